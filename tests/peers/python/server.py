"""An MCP 2025-11-25 tasks server on the official Python SDK (`mcp` 1.30.x), for toolop's live
tests. Streamable HTTP on 127.0.0.1, or stdio.

    python server.py --port 3001 [--json-response] [--session-scoped]
    python server.py --stdio [--session-scoped]

Tools (taskSupport in brackets), the same as the TypeScript peer's:
  build_report {month, ms?}  [required]  completes after ms (default 300) with a text result
  failing_job {ms?}          [required]  raises: the SDK ends the task `failed`
  tool_error {ms?}           [required]  returns isError:true: the SDK ends it `completed`
  needs_input {question}     [required]  input_required through the SDK's elicit()
  slow_job {ms?}             [optional]  runs ms (default 30000) in ten steps: cancel races
  short_ttl {ms?}            [required]  ttl 1000 whatever was asked
  quick_job {ms?}            [required]  completes after ms (default 200), pollInterval 10 s:
                                         a cancel sent before the first poll loses
  echo {text}                [forbidden] a plain tool
  stats {}                   [forbidden] task creations per idempotency key, as JSON text

GET /stats answers the same counts as JSON (HTTP mode), plus `tasks`: {task_id: {key, status}},
the store's own status of every task created without a session scope (read at each /stats; a
task the store has deleted keeps its last status and gets `"gone": true`).

Tasks get ids without a session scope, so a restarted executor on a new session still finds
its task (as with a shared store); --session-scoped keeps the SDK default (`<scope>:<uuid>`
ids served only to the session that created them).
"""

import argparse
import json
import uuid
import warnings
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
import uvicorn
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.experimental.tasks.in_memory_task_store import InMemoryTaskStore
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

KEY = "io.toolop/idempotency-key"

STATS = {"creations": {}, "tasks_created": 0, "tasks": {}}
# The server's task support (its store), set by build_server.
SUPPORT = {}
# task id -> pollInterval (ms) its Task advertises instead of the SDK's fixed 500.
POLL_INTERVAL_MS = {}


class PeerTaskStore(InMemoryTaskStore):
    """The SDK's store; a task may advertise its own pollInterval (the SDK fixes 500 ms)."""

    async def create_task(self, metadata, task_id=None):
        task = await super().create_task(metadata, task_id)
        ms = POLL_INTERVAL_MS.pop(task.taskId, None)
        if ms is not None:
            self._tasks[task.taskId].task.pollInterval = ms
            task.pollInterval = ms
        return task


def text(t, is_error=False):
    return types.CallToolResult(content=[types.TextContent(type="text", text=t)], isError=is_error)


def tool(name, description, properties, required, support):
    return types.Tool(
        name=name,
        description=description,
        inputSchema={"type": "object", "properties": properties, "required": required},
        execution=types.ToolExecution(taskSupport=support) if support else None,
    )


TOOLS = [
    tool("build_report", "Builds a monthly report", {"month": {"type": "string"}, "ms": {"type": "number"}}, ["month"], "required"),
    tool("failing_job", "Always fails", {"ms": {"type": "number"}}, [], "required"),
    tool("tool_error", "Completes with a tool error", {"ms": {"type": "number"}}, [], "required"),
    tool("needs_input", "Asks a question first", {"question": {"type": "string"}}, ["question"], "required"),
    tool("slow_job", "Runs long, in steps", {"ms": {"type": "number"}}, [], "optional"),
    tool("short_ttl", "A task deleted one second after creation", {"ms": {"type": "number"}}, [], "required"),
    tool("quick_job", "Completes at once, asks for slow polling", {"ms": {"type": "number"}}, [], "required"),
    tool("echo", "Echoes", {"text": {"type": "string"}}, ["text"], None),
    tool("stats", "Task creations per idempotency key", {}, [], None),
]


def build_server(session_scoped):
    server = Server("toolop-peer-python")
    SUPPORT["tasks"] = server.experimental.enable_tasks(store=PeerTaskStore())

    @server.list_tools()
    async def list_tools():
        return TOOLS

    async def sleep_ms(ms):
        await anyio.sleep(ms / 1000)

    def work_for(name, args):
        ms = args.get("ms")

        async def build_report(task: ServerTaskContext):
            await sleep_ms(ms or 300)
            return text(f"report for {args.get('month')}")

        async def failing_job(task: ServerTaskContext):
            await sleep_ms(ms or 200)
            raise RuntimeError("the job failed")

        async def tool_error(task: ServerTaskContext):
            await sleep_ms(ms or 200)
            return text("tool error", is_error=True)

        async def needs_input(task: ServerTaskContext):
            await sleep_ms(100)
            schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
            answer = await task.elicit(message=args.get("question", "?"), requestedSchema=schema)
            return text(f"answer={json.dumps(answer.content)} action={answer.action}")

        async def slow_job(task: ServerTaskContext):
            total = ms or 30000
            for i in range(1, 11):
                await sleep_ms(total / 10)
                if task.is_cancelled:
                    return text("cancelled")
                await task.update_status(f"step {i}/10")
            return text(f"slow job done after {total} ms")

        async def quick_job(task: ServerTaskContext):
            await sleep_ms(ms or 200)
            return text("quick job done")

        async def short_ttl(task: ServerTaskContext):
            await sleep_ms(ms or 3000)
            return text("too late")

        return {
            "build_report": build_report,
            "failing_job": failing_job,
            "tool_error": tool_error,
            "needs_input": needs_input,
            "slow_job": slow_job,
            "short_ttl": short_ttl,
            "quick_job": quick_job,
        }.get(name)

    @server.call_tool()
    async def call_tool(name, arguments):
        ctx = server.request_context
        if name == "echo":
            return text(arguments.get("text", ""))
        if name == "stats":
            return text(json.dumps(STATS))
        work = work_for(name, arguments or {})
        if work is None:
            return text(f"Unknown tool: {name}", is_error=True)
        if not ctx.experimental.is_task:
            return text(f"Tool {name} requires task-augmented invocation", is_error=True)
        meta = ctx.meta.model_extra if ctx.meta is not None else {}
        key = (meta or {}).get(KEY)
        if name == "short_ttl":
            ctx.experimental.task_metadata.ttl = 1000
        STATS["tasks_created"] += 1
        if key:
            STATS["creations"][key] = STATS["creations"].get(key, 0) + 1
        if session_scoped:
            return await ctx.experimental.run_task(work)
        task_id = uuid.uuid4().hex
        STATS["tasks"][task_id] = {"key": key, "status": "working"}
        if name == "quick_job":
            POLL_INTERVAL_MS[task_id] = 10000
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            # An id without a session scope: any session may read it (see the module docs).
            return await ctx.experimental.run_task(work, task_id=task_id)

    return server


class McpEndpoint:
    """The session manager as a plain ASGI app on exactly `/mcp` (no redirect to `/mcp/`)."""

    def __init__(self, manager):
        self.manager = manager

    async def __call__(self, scope, receive, send):
        await self.manager.handle_request(scope, receive, send)


def http_app(server, json_response):
    manager = StreamableHTTPSessionManager(app=server, json_response=json_response, stateless=False)

    async def stats(_request):
        store = SUPPORT["tasks"].store
        for task_id, record in STATS["tasks"].items():
            task = await store.get_task(task_id)
            if task is None:
                record["gone"] = True
            else:
                record["status"] = str(task.status)
        return JSONResponse(STATS)

    @asynccontextmanager
    async def lifespan(_app):
        async with manager.run():
            yield

    routes = [Route("/mcp", endpoint=McpEndpoint(manager), methods=["GET", "POST", "DELETE"]), Route("/stats", endpoint=stats)]
    return Starlette(routes=routes, lifespan=lifespan)


async def run_stdio(server):
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=3001)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--json-response", action="store_true")
    p.add_argument("--session-scoped", action="store_true")
    p.add_argument("--stdio", action="store_true")
    a = p.parse_args()
    server = build_server(a.session_scoped)
    if a.stdio:
        anyio.run(run_stdio, server)
    else:
        uvicorn.run(http_app(server, a.json_response), host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
