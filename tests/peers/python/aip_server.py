"""A small Google AIP-151 long-running-operations service over HTTP/JSON, for toolop's live
tests of the AIP adapter and transport. Python (Starlette + uvicorn from the peer venv); there is
no official AIP-151 server SDK to use instead.

    python aip_server.py --port 3002

- POST /v1/reports:{tool}   body: the arguments plus AIP-155 `requestId` -> an Operation.
  Deduplicates by requestId (returns the existing operation) and counts creations per key.
  A requestId must be a UUID4 (lower-case, hyphenated): AIP-155 lets a method require that form
  with `(google.api.field_info).format = UUID4`; anything else is 400 INVALID_ARGUMENT.
  Tools: build_report {month, ms?} completes; failing_job ends with error code 13; slow_job
  {ms?} runs ms (default 30000) and honours cancel.
- GET  /v1/operations/{id}          -> the Operation (`done` omitted while running, as proto3 does)
- POST /v1/operations/{id}:cancel   -> {} (best effort: a running op ends with error code 1)
- GET  /v1/operations?filter=request_id="KEY"  -> {"operations": [..]} (toolop's lookup)
- GET  /stats                       -> {"creations": {key: n}, "operations_created": n}
"""

import argparse
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

OPS = {}
BY_KEY = {}
STATS = {"creations": {}, "operations_created": 0}


def now():
    return time.monotonic()


def view(op):
    """The Operation as the wire shows it, computing completion lazily."""
    if not op["done"] and now() >= op["due"]:
        op["done"] = True
        if op["tool"] == "failing_job":
            op["error"] = {"code": 13, "message": "the job failed"}
        else:
            op["response"] = {"@type": "type.googleapis.com/toolop.Report", "text": op["text"]}
    out = {"name": op["name"], "metadata": {"@type": "type.googleapis.com/toolop.Progress"}}
    if op["done"]:
        out["done"] = True
        if "error" in op:
            out["error"] = op["error"]
        else:
            out["response"] = op["response"]
    return out


def is_uuid4(text):
    try:
        parsed = uuid.UUID(text)
    except (ValueError, TypeError, AttributeError):
        return False
    return parsed.version == 4 and str(parsed) == text


def status_error(http, code, status, message):
    return JSONResponse({"error": {"code": http, "message": message, "status": status}}, status_code=http)


async def submit(request):
    tool = request.path_params["tool"]
    if tool not in ("build_report", "failing_job", "slow_job"):
        return status_error(404, 5, "NOT_FOUND", f"no method {tool}")
    body = await request.json()
    key = body.pop("requestId", None)
    if key is not None and not is_uuid4(key):
        return status_error(400, 3, "INVALID_ARGUMENT", "request_id must be a UUID4")
    if key and key in BY_KEY:
        return JSONResponse(view(OPS[BY_KEY[key]]))
    op_id = uuid.uuid4().hex
    name = f"operations/{op_id}"
    ms = body.get("ms", 30000 if tool == "slow_job" else 300)
    OPS[op_id] = {"name": name, "tool": tool, "done": False, "due": now() + ms / 1000, "text": f"report for {body.get('month')}"}
    STATS["operations_created"] += 1
    if key:
        BY_KEY[key] = op_id
        STATS["creations"][key] = STATS["creations"].get(key, 0) + 1
    return JSONResponse(view(OPS[op_id]))


async def operation(request):
    rest = request.path_params["rest"]
    if request.method == "POST" and rest.endswith(":cancel"):
        op = OPS.get(rest[: -len(":cancel")])
        if op is None:
            return status_error(404, 5, "NOT_FOUND", "no such operation")
        view(op)
        if not op["done"]:
            op["done"] = True
            op["error"] = {"code": 1, "message": "cancelled by the client"}
        return JSONResponse({})
    op = OPS.get(rest)
    if op is None or request.method != "GET":
        return status_error(404, 5, "NOT_FOUND", "no such operation")
    return JSONResponse(view(op))


async def list_operations(request):
    f = request.query_params.get("filter", "")
    prefix = 'request_id="'
    if not (f.startswith(prefix) and f.endswith('"')):
        return status_error(400, 3, "INVALID_ARGUMENT", "only request_id filters are supported")
    key = f[len(prefix) : -1].replace('\\"', '"').replace("\\\\", "\\")
    ops = [view(OPS[BY_KEY[key]])] if key in BY_KEY else []
    return JSONResponse({"operations": ops} if ops else {})


async def stats(_request):
    return JSONResponse(STATS)


app = Starlette(
    routes=[
        Route("/v1/reports:{tool}", submit, methods=["POST"]),
        Route("/v1/operations", list_operations, methods=["GET"]),
        Route("/v1/operations/{rest:path}", operation, methods=["GET", "POST"]),
        Route("/stats", stats),
    ]
)

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=3002)
    p.add_argument("--host", default="127.0.0.1")
    a = p.parse_args()
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")
