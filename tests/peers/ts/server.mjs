// An MCP 2025-11-25 tasks server on the official TypeScript SDK (@modelcontextprotocol/sdk
// 1.32.x), for toolop's live tests and the README example. Streamable HTTP on 127.0.0.1.
//
//   node server.mjs --port 3000 [--json-response] [--session-scoped] [--idempotency]
//
// Tools (taskSupport in brackets):
//   build_report {month, ms?}  [required]  completes after ms (default 300) with a text result
//   failing_job {ms?}          [required]  ends `failed` with an isError result (TS app style)
//   tool_error {ms?}           [required]  ends `completed` with isError:true (Python SDK style)
//   needs_input {question}     [required]  input_required: elicits an answer, then completes
//   slow_job {ms?}             [optional]  runs ms (default 30000) in steps: for cancel races
//   short_ttl {ms?}            [required]  ttl 1000 whatever was asked: deleted soon after
//   quick_job {ms?}            [required]  completes after ms (default 200), pollInterval 10 s:
//                                          a cancel sent before the first poll loses
//   echo {text}                [forbidden] a plain tool
//   stats {}                   [forbidden] task creations per idempotency key, as JSON text
//
// --idempotency: a repeated io.toolop/idempotency-key gets the task it created, tasks/list
// answers lookups by key, and a call run inline under a key (a redeployed tool) answers a later
// call with the key as it answered the first, without running again: the key names the
// submission, task or not (toolop's contract, src/protocol/mod.rs `META_IDEMPOTENCY_KEY`).
//
// Side endpoints (tests only): GET /stats (the same counts plus transport facts as JSON, and
// `tasks`: {taskId: {key, status}} from the store, `gone: true` once the store deleted it),
// GET /truth (every task created: key, status, stored result),
// POST /faults {status, retry_after, count} (the next `count` MCP requests answer `status`),
// {redeploy: tool} (a rolling redeploy: the next tools/call of `tool` reaches an instance where
// it no longer supports tasks: on every open session, and every later one, `tool` becomes a
// plain tool; a task-augmented call of it then runs inline and the SDK answers -32602),
// {oversize_bytes, count}, {delay_ms, count}, {drop_sessions: true} (forget every session, as
// a restart would), {cut_get: true} (end open GET streams), {ping: true} / {sampling: true}
// (send that request to every session; answers are counted in /stats).
//
// Tasks live in one store shared by all sessions (as a deployment with a shared store would),
// so an executor that restarts on a new session still finds its task; --session-scoped keeps
// the SDK default (tasks visible only to the session that created them).

import { randomUUID, createHash } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { isInitializeRequest, ListTasksRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';

const KEY = 'io.toolop/idempotency-key';
const LOOKUP = 'io.toolop/lookup-key';

function flag(name) {
  return process.argv.includes(name);
}
function option(name, dflt) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}

const port = Number(option('--port', '3000'));
const host = option('--host', '127.0.0.1');
const jsonResponse = flag('--json-response');
const sessionScoped = flag('--session-scoped');
const idempotency = flag('--idempotency');

// Counts the tests read to prove "no second operation".
const stats = {
  creations: {}, // idempotency key -> tasks created
  tasks_created: 0,
  sessions_created: 0,
  last_event_ids_seen: [],
  pings_answered: 0,
  sampling_errors: [],
  posts: 0,
  tasks: {}, // taskId -> {key, status}: the store's own status, read at each GET /stats
  sync_runs: {}, // idempotency key (or "" without one) -> inline runs of a redeployed tool
};
const byKey = new Map(); // key -> taskId (idempotency extension)
const inlineByKey = new Map(); // key -> the first inline run's answer (a promise), --idempotency
const redeployArmed = new Set(); // tools whose next tools/call lands on a redeployed instance
const redeployed = new Set(); // tools redeployed without task support
const servers = new Set(); // every McpServer built (one per session), for a redeploy
// Ground truth for GET /truth: every task created, with its key and the outcome the work stored
// (kept here too, so a task the store expired still shows what the server did).
const created = []; // { taskId, key }
const outcomes = new Map(); // taskId -> { status, result }

// Records every terminal status as it is set (a cancel through the SDK included), so GET /truth
// still knows it once the store has expired the task (ttl).
class RecordingTaskStore extends InMemoryTaskStore {
  async updateTaskStatus(taskId, status, statusMessage, sessionId) {
    await super.updateTaskStatus(taskId, status, statusMessage, sessionId);
    if (['cancelled', 'completed', 'failed'].includes(status) && !outcomes.has(taskId)) outcomes.set(taskId, { status, result: null });
  }
}
class SharedTaskStore extends RecordingTaskStore {
  async createTask(params, requestId, request, _sessionId) {
    return super.createTask(params, requestId, request, undefined);
  }
}
const taskStore = sessionScoped ? new RecordingTaskStore() : new SharedTaskStore();
const messageQueue = new InMemoryTaskMessageQueue();

class MemEventStore {
  constructor() {
    this.events = [];
    this.n = 0;
  }
  async storeEvent(streamId, message) {
    const id = `${streamId}_${++this.n}`;
    this.events.push({ id, streamId, message });
    if (this.events.length > 10000) this.events.shift();
    return id;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.find((e) => e.id === eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const i = this.events.findIndex((e) => e.id === lastEventId);
    if (i < 0) return '';
    const streamId = this.events[i].streamId;
    for (const e of this.events.slice(i + 1)) if (e.streamId === streamId) await send(e.id, e.message);
    return streamId;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function text(t, isError = false) {
  return isError ? { content: [{ type: 'text', text: t }], isError: true } : { content: [{ type: 'text', text: t }] };
}

// Canonical JSON (sorted keys), SHA-256: toolop's result digest.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}
function withDigest(result) {
  if (!idempotency) return result;
  const digest = createHash('sha256').update(canonical(result)).digest('hex');
  return { ...result, _meta: { 'io.toolop/result-digest': digest } };
}

async function finish(taskId, status, result) {
  const t = await taskStore.getTask(taskId);
  // A cancelled (or deleted) task keeps its state: the work's late result is dropped.
  if (!t || ['cancelled', 'completed', 'failed'].includes(t.status)) return;
  const stored = withDigest(result);
  await taskStore.storeTaskResult(taskId, status, stored);
  outcomes.set(taskId, { status, result: stored });
}

// A task tool: create (counting the key; deduplicating with --idempotency), run `work` in the
// background, answer gets and results from the store.
function taskTool(server, name, description, inputSchema, support, work, ttlOverride, pollInterval = 100) {
  if (redeployed.has(name)) return plainTool(server, name, description, inputSchema);
  server.toolopTools[name] = { description, inputSchema };
  server.toolopTools[name].registered = server.experimental.tasks.registerToolTask(
    name,
    { description, inputSchema, execution: { taskSupport: support } },
    {
      async createTask(args, extra) {
        const key = extra._meta?.[KEY];
        if (idempotency && key && byKey.has(key)) {
          const existing = await taskStore.getTask(byKey.get(key));
          if (existing) return { task: existing };
        }
        const task = await extra.taskStore.createTask({ ttl: ttlOverride ?? extra.taskRequestedTtl, pollInterval });
        stats.tasks_created += 1;
        stats.tasks[task.taskId] = { key: key ?? null, status: task.status };
        created.push({ taskId: task.taskId, key: key ?? null });
        if (key) {
          stats.creations[key] = (stats.creations[key] ?? 0) + 1;
          byKey.set(key, task.taskId);
        }
        work(task.taskId, args, server).catch((e) => finish(task.taskId, 'failed', text(`error: ${e}`, true)));
        return { task };
      },
      async getTask(_args, { taskId, taskStore: s }) {
        return await s.getTask(taskId);
      },
      async getTaskResult(_args, { taskId, taskStore: s }) {
        return await s.getTaskResult(taskId);
      },
    },
  );
}

// The redeployed version of a task tool: plain (no task support), runs inline. Under
// --idempotency a key it already ran under gets the first answer, the run is not repeated.
function plainTool(server, name, description, inputSchema) {
  server.registerTool(name, { description, inputSchema }, async (args, extra) => {
    const key = extra._meta?.[KEY];
    if (idempotency && key && inlineByKey.has(key)) return await inlineByKey.get(key);
    const run = (async () => {
      stats.sync_runs[key ?? ''] = (stats.sync_runs[key ?? ''] ?? 0) + 1;
      await sleep(args.ms ?? 200);
      return text(`${name} ran inline`);
    })();
    if (idempotency && key) inlineByKey.set(key, run);
    return await run;
  });
}

// A redeploy of `name` lands: on every session's server the task tool gives way to its plain
// version (the SDK tells each client notifications/tools/list_changed).
function redeploy(name) {
  redeployArmed.delete(name);
  redeployed.add(name);
  for (const server of servers) {
    const t = server.toolopTools[name];
    if (!t?.registered) continue;
    t.registered.remove();
    t.registered = null;
    plainTool(server, name, t.description, t.inputSchema);
  }
}

function buildServer() {
  const server = new McpServer(
    { name: 'toolop-peer-ts', version: '0.1.0' },
    {
      capabilities: {
        tools: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
        ...(idempotency ? { experimental: { 'io.toolop/idempotency': {} } } : {}),
      },
      taskStore,
      taskMessageQueue: messageQueue,
    },
  );
  server.toolopTools = {};
  servers.add(server);
  taskTool(server, 'build_report', 'Builds a monthly report', { month: z.string(), ms: z.number().optional() }, 'required', async (id, { month, ms }) => {
    await sleep(ms ?? 300);
    await finish(id, 'completed', text(`report for ${month}`));
  });
  taskTool(server, 'failing_job', 'Always fails', { ms: z.number().optional() }, 'required', async (id, { ms }) => {
    await sleep(ms ?? 200);
    await finish(id, 'failed', text('the job failed', true));
  });
  taskTool(server, 'tool_error', 'Completes with a tool error', { ms: z.number().optional() }, 'required', async (id, { ms }) => {
    await sleep(ms ?? 200);
    await finish(id, 'completed', text('tool error', true));
  });
  taskTool(server, 'needs_input', 'Asks a question first', { question: z.string() }, 'required', async (id, { question }, srv) => {
    await sleep(100);
    await taskStore.updateTaskStatus(id, 'input_required');
    const answer = await srv.server.elicitInput(
      { mode: 'form', message: question, requestedSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] } },
      { relatedTask: { taskId: id } },
    );
    const t = await taskStore.getTask(id);
    if (t && t.status === 'input_required') await taskStore.updateTaskStatus(id, 'working', 'input received');
    await finish(id, 'completed', text(`answer=${JSON.stringify(answer.content ?? null)} action=${answer.action}`));
  });
  taskTool(server, 'slow_job', 'Runs long, in steps', { ms: z.number().optional() }, 'optional', async (id, { ms }) => {
    const total = ms ?? 30000;
    const steps = 10;
    for (let i = 1; i <= steps; i++) {
      await sleep(total / steps);
      const t = await taskStore.getTask(id);
      if (!t || t.status === 'cancelled') return;
      await taskStore.updateTaskStatus(id, 'working', `step ${i}/${steps}`);
    }
    await finish(id, 'completed', text(`slow job done after ${total} ms`));
  });
  taskTool(
    server,
    'short_ttl',
    'A task the server deletes one second after creation',
    { ms: z.number().optional() },
    'required',
    async (id, { ms }) => {
      await sleep(ms ?? 3000);
      await finish(id, 'completed', text('too late'));
    },
    1000,
  );
  // Done long before the client's first poll (pollInterval 10 s): a cancel sent in between
  // arrives after completion and loses.
  taskTool(
    server,
    'quick_job',
    'Completes at once, asks for slow polling',
    { ms: z.number().optional() },
    'required',
    async (id, { ms }) => {
      await sleep(ms ?? 200);
      await finish(id, 'completed', text('quick job done'));
    },
    undefined,
    10000,
  );
  server.registerTool('echo', { description: 'Echoes', inputSchema: { text: z.string() } }, async ({ text: t }) => text(t));
  if (idempotency) {
    // The lookup half of io.toolop/idempotency: tasks/list filtered by key.
    server.server.setRequestHandler(ListTasksRequestSchema, async (req) => {
      const key = req.params?._meta?.[LOOKUP];
      if (key === undefined) return await taskStore.listTasks(req.params?.cursor);
      const id = byKey.get(key);
      const t = id ? await taskStore.getTask(id) : null;
      return { tasks: t ? [t] : [] };
    });
  }
  server.registerTool('stats', { description: 'Task creations per idempotency key', inputSchema: {} }, async () => text(JSON.stringify(stats)));
  return server;
}

// ---------------------------------------------------------------------------------------------
// HTTP

const sessions = new Map(); // session id -> { transport, server }
const getStreams = new Set(); // open GET responses
let faults = [];

const app = createMcpExpressApp({ host });

app.get('/stats', async (_req, res) => {
  // The store's status of every task; one it deleted (ttl) keeps its last status, marked gone.
  for (const [id, record] of Object.entries(stats.tasks)) {
    const t = await taskStore.getTask(id);
    if (t) record.status = t.status;
    else record.gone = true;
  }
  res.json({ ...stats, open_sessions: sessions.size });
});
// What the server did, per task (tests only): its key, its status now (the store's, or the
// outcome the work stored if the store expired it) and the stored result. The kill -9 proof
// checks the executor's receipts and outbox payloads against this, never against toolop's log.
app.get('/truth', async (_req, res) => {
  const tasks = [];
  for (const { taskId, key } of created) {
    const t = await taskStore.getTask(taskId);
    const done = outcomes.get(taskId);
    tasks.push({ taskId, key, status: t?.status ?? done?.status ?? 'expired', result: done?.result ?? null });
  }
  res.json({ tasks });
});
app.post('/faults', (req, res) => {
  const f = req.body ?? {};
  if (f.drop_sessions) {
    for (const s of sessions.values()) s.transport.onclose = undefined;
    sessions.clear();
  }
  if (f.cut_get) {
    for (const r of getStreams) r.end();
    getStreams.clear();
  }
  if (f.ping) {
    for (const s of sessions.values())
      s.server.server.ping().then(() => (stats.pings_answered += 1), () => {});
  }
  if (f.sampling) {
    for (const s of sessions.values())
      s.server.server
        .createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 5 })
        .then(() => stats.sampling_errors.push('answered'), (e) => stats.sampling_errors.push(e.code ?? String(e)));
  }
  if (typeof f.redeploy === 'string') redeployArmed.add(f.redeploy);
  if (f.status || f.oversize_bytes || f.delay_ms) faults.push({ ...f, count: f.count ?? 1 });
  res.json({ ok: true });
});

// MCP POSTs, with armed faults applied first (never to initialize).
app.post('/mcp', async (req, res) => {
  stats.posts += 1;
  const sessionId = req.headers['mcp-session-id'];
  // Faults hit requests only (method and id), never initialize, notifications or responses:
  // a test arms a fault and knows which request it lands on.
  const isRequest = req.body?.method !== undefined && req.body?.id !== undefined;
  if (isRequest && !isInitializeRequest(req.body) && faults.length > 0) {
    const f = faults[0];
    f.count -= 1;
    if (f.count <= 0) faults.shift();
    if (f.status) {
      if (f.retry_after !== undefined) res.set('Retry-After', String(f.retry_after));
      res.status(f.status).json({ jsonrpc: '2.0', error: { code: -32000, message: `injected HTTP ${f.status}` }, id: req.body?.id ?? null });
      return;
    }
    if (f.oversize_bytes) {
      res.set('Content-Type', 'application/json');
      res.end(`{"jsonrpc":"2.0","id":${JSON.stringify(req.body?.id ?? null)},"result":{"pad":"${'x'.repeat(f.oversize_bytes)}"}}`);
      return;
    }
    if (f.delay_ms) await sleep(f.delay_ms);
  }
  if (req.body?.method === 'tools/call' && redeployArmed.has(req.body.params?.name)) redeploy(req.body.params.name);
  const session = sessionId ? sessions.get(sessionId) : undefined;
  if (session) {
    await session.transport.handleRequest(req, res, req.body);
    return;
  }
  if (sessionId) {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    return;
  }
  if (!isInitializeRequest(req.body)) {
    res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
    return;
  }
  const server = buildServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableJsonResponse: jsonResponse,
    eventStore: new MemEventStore(),
    onsessioninitialized: (sid) => {
      stats.sessions_created += 1;
      sessions.set(sid, { transport, server });
    },
  });
  transport.onclose = () => {
    if (transport.sessionId) sessions.delete(transport.sessionId);
    servers.delete(server);
  };
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});

app.get('/mcp', async (req, res) => {
  const session = sessions.get(req.headers['mcp-session-id']);
  if (!session) {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    return;
  }
  const last = req.headers['last-event-id'];
  if (last) stats.last_event_ids_seen.push(String(last));
  getStreams.add(res);
  res.on('close', () => getStreams.delete(res));
  await session.transport.handleRequest(req, res);
});

app.delete('/mcp', async (req, res) => {
  const session = sessions.get(req.headers['mcp-session-id']);
  if (!session) {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    return;
  }
  await session.transport.handleRequest(req, res);
});

app.listen(port, host, () => {
  console.error(`toolop-peer-ts listening on http://${host}:${port}/mcp`);
});
