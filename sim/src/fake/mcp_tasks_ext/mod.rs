//! The codec of the MCP tasks extension `io.modelcontextprotocol/tasks` (SEP-2663, protocol
//! 2026-07-28; `shared/spec/mcp-tasks.md` §15): JSON-RPC messages <-> neutral requests and
//! responses.
//!
//! ## Behaviour
//! - `initialize` answers protocol `2026-07-28` (the `rmcp` profile: `2025-11-25`, as rmcp
//!   does) with `capabilities.extensions[
//!   "io.modelcontextprotocol/tasks"]`, and with the toolop extensions also
//!   `experimental["io.toolop/idempotency"]` (`retentionMs` = the ttl, when there is one).
//! - `tools/call` reads the per-request capability in `_meta["io.modelcontextprotocol/
//!   clientCapabilities"].extensions["io.modelcontextprotocol/tasks"]`. Whether the call *needs*
//!   a task: a tool whose task support is `required` always does, `forbidden` never does,
//!   otherwise a script longer than [`ExtConfig::task_threshold_ms`] does. A call that needs a
//!   task gets one when the capability is declared (`resultType: "task"`, flat Task fields) and
//!   `-32021` otherwise. A call that does not need one runs inline: the `CallToolResult`
//!   (`resultType: "complete"`) or its error comes after the work's duration.
//! - `tasks/get` answers `resultType: "complete"` plus the Task, with `result` (completed),
//!   `error` (failed) or `inputRequests` (input_required) inlined.
//! - Input rounds: `inputRequests: {"input-<n>": {method: "elicitation/create", params}}`,
//!   answered by `tasks/update {taskId, inputResponses}`; keys that are not the pending round are
//!   stale. The ack is `{resultType: "complete"}` either way; an unknown task is `-32602`.
//! - `tasks/cancel` answers the empty ack and takes effect after a delay (eventually consistent:
//!   a cancelled task may still end `completed` or `failed`).
//! - `isError` results end `completed`; `tool_error` ends `failed` with the error inlined.
//! - ttl (`ttlMs`) counts from creation and starts again at terminal; a deleted task answers
//!   `-32602` "unknown task: <id>", as rmcp words an unknown task (it says nothing of expiry).
//!   Strict: the record goes at its ttl, running or not, and the work keeps going. The `rmcp`
//!   profile ([`ExtConfig::rmcp`]): a task still running at its ttl ends `failed` with
//!   `-32603` "task expired: TTL elapsed before completion" and its work is aborted; a terminal
//!   task goes one ttl after it ended; both only when a request reaches the server. A cancel of a
//!   task waiting for input withdraws the round at once: `working`, no `inputRequests`, until
//!   the cancel takes effect.
//! - `tasks/list` and `tasks/result` do not exist: `-32601`, like any unknown method.
//! - The toolop extensions: submissions deduplicated by `_meta["io.toolop/idempotency-key"]`,
//!   results carry `_meta["io.toolop/result-digest"]` (over the result without `_meta` and
//!   `resultType`, so a result digests the same inline and inlined in a task).

use serde_json::{json, Map, Value};
use toolop::protocol::TaskSupport;
use toolop::transport::{InFrame, OutFrame};

use crate::fake::codec::{
    neutral_shows, AnswerItem, CallId, Codec, CodecCaps, Decoded, ExchangeKind, FakeTool, Note,
    Outcome, Push, Request, Response, ResultBody, ResultShape, RunAs, Shape, Stop, Submit,
    TaskView,
};
use crate::fake::jsonrpc::{
    self, Direct, Incoming, RpcCalls, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, TOOL_ERROR,
};
use crate::fake::script::ScriptOutcome;
#[cfg(test)]
use crate::fake::script::TaskScript;
use crate::fake::service::{
    AfterAnswer, AtTerminal, CancelRule, Dedupe, Expiry, InputDelivery, Policy,
};
use crate::fake::truth::{payload_digest, AnswerAction, TaskStatus};
use crate::trace::Shows;

#[cfg(test)]
mod tests;

pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// rmcp's words for a task its ttl sweep failed (rmcp-3.11.0 seq 206).
pub const EXPIRED_MESSAGE: &str = "task expired: TTL elapsed before completion";
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/tasks";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// MCP 2026-07-28: the request needs a client capability it did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtConfig {
    pub toolop_extensions: bool,
    /// `pollIntervalMs` reported on every task.
    pub poll_interval_ms: u64,
    /// `ttlMs` of every task (the extension has no requested ttl); `None` is unlimited (`null`).
    pub ttl_ms: Option<u64>,
    /// Scripts with more working time than this get a task (tools without a fixed policy).
    pub task_threshold_ms: u64,
    /// Range the delay between a cancel and its effect is drawn from.
    pub cancel_delay_ms: (u64, u64),
    pub tools: Vec<FakeTool>,
    /// rmcp's ttl sweep ([`Expiry::FailRunningOnCall`]) instead of deletion at the ttl.
    pub rmcp: bool,
}

impl ExtConfig {
    /// No toolop extensions, poll interval 1000 ms, no ttl, threshold 1000 ms, cancel delay
    /// 0..=2000 ms.
    pub fn new(tools: Vec<FakeTool>) -> ExtConfig {
        ExtConfig {
            toolop_extensions: false,
            poll_interval_ms: 1000,
            ttl_ms: None,
            task_threshold_ms: 1000,
            cancel_delay_ms: (0, 2000),
            tools,
            rmcp: false,
        }
    }
}

/// What the codec needs to answer the service's reply to one request.
#[derive(Clone, Debug)]
pub(crate) enum What {
    Call,
    Get { task: String },
    Ack { task: String },
}

/// The codec. See the module docs.
pub struct ExtCodec {
    cfg: ExtConfig,
    calls: RpcCalls<What>,
}

/// The fake tasks-extension server: this codec with the task service it asks for.
pub fn server(cfg: ExtConfig, rng: rand_chacha::ChaCha8Rng) -> crate::fake::FakeServer {
    let ttl_ms = cfg.ttl_ms;
    crate::fake::FakeServer::new(
        Box::new(ExtCodec::new(cfg)),
        crate::fake::service::IdStyle::Hex128,
        ttl_ms,
        0.0,
        rng,
    )
}

impl ExtCodec {
    pub fn new(cfg: ExtConfig) -> ExtCodec {
        ExtCodec {
            cfg,
            calls: RpcCalls::default(),
        }
    }

    pub fn config(&self) -> &ExtConfig {
        &self.cfg
    }

    fn direct(&mut self, exchange: ExchangeKind, id: Value, d: Direct) -> Decoded {
        let rid = id.as_u64();
        self.calls.direct(exchange, id, rid, d)
    }

    fn on_request(&mut self, id: Value, method: &str, params: &Value) -> Decoded {
        let task = params
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_string);
        match (method, task) {
            ("initialize", _) => {
                let d = Direct::Result(self.initialize());
                self.direct(ExchangeKind::Handshake, id, d)
            }
            ("ping", _) => self.direct(
                ExchangeKind::Handshake,
                id,
                Direct::Result(json!({"resultType": "complete"})),
            ),
            ("tools/list", _) => {
                let d = Direct::Result(self.tools_list());
                self.direct(ExchangeKind::Handshake, id, d)
            }
            ("tools/call", _) => self.tools_call(id, params),
            ("tasks/get" | "tasks/update" | "tasks/cancel", None) => {
                let exchange = exchange_of(method);
                self.direct(
                    exchange,
                    id,
                    Direct::Error(INVALID_PARAMS, "Missing params.taskId".into()),
                )
            }
            ("tasks/get", Some(task)) => self.calls.service(
                ExchangeKind::Poll,
                id,
                What::Get { task: task.clone() },
                Request::Poll { task },
            ),
            ("tasks/cancel", Some(task)) => self.calls.service(
                ExchangeKind::Cancel,
                id,
                What::Ack { task: task.clone() },
                Request::Cancel { task },
            ),
            ("tasks/update", Some(task)) => {
                let Some(responses) = params.get("inputResponses").and_then(Value::as_object)
                else {
                    return self.direct(
                        ExchangeKind::Answer,
                        id,
                        Direct::Error(
                            INVALID_PARAMS,
                            "Invalid params: inputResponses must be an object".into(),
                        ),
                    );
                };
                let items = responses
                    .iter()
                    .map(|(key, r)| AnswerItem {
                        candidates: round_of_key(key)
                            .map(|n| (task.clone(), n))
                            .into_iter()
                            .collect(),
                        prefer_task: None,
                        action: AnswerAction::from_word(r.get("action").and_then(Value::as_str)),
                        content: r.get("content").cloned(),
                    })
                    .collect();
                let request = Request::Answer {
                    task: Some(task.clone()),
                    items,
                };
                self.calls
                    .service(ExchangeKind::Answer, id, What::Ack { task }, request)
            }
            // Includes tasks/result and tasks/list, which the extension removed.
            _ => self.direct(
                ExchangeKind::Other,
                id,
                Direct::Error(METHOD_NOT_FOUND, format!("Method not found: {method}")),
            ),
        }
    }

    fn initialize(&self) -> Value {
        let mut caps = json!({ "tools": {}, "extensions": { EXTENSION_ID: {} } });
        if self.cfg.toolop_extensions {
            // Keys live as long as their task, and a task at least its ttl.
            let ext = match self.cfg.ttl_ms {
                Some(ms) => json!({ "retentionMs": ms }),
                None => json!({}),
            };
            caps["experimental"] = json!({ jsonrpc::EXT_IDEMPOTENCY: ext });
        }
        // rmcp 3.11.0 answers a 2026-07-28 `initialize` with 2025-11-25 and the extension
        // (rmcp-3.11.0 seq 3): the executor must go on in the older revision.
        let version = if self.cfg.rmcp {
            "2025-11-25"
        } else {
            PROTOCOL_VERSION
        };
        json!({
            "protocolVersion": version,
            "capabilities": caps,
            "serverInfo": {"name": "toolop-fake-mcp-ext", "version": PROTOCOL_VERSION},
        })
    }

    /// The extension has no per-tool task support handshake: the server decides per call.
    fn tools_list(&self) -> Value {
        let tools = jsonrpc::tool_descriptors(&self.cfg.tools, false);
        json!({ "tools": tools, "resultType": "complete" })
    }

    fn tools_call(&mut self, id: Value, params: &Value) -> Decoded {
        let (name, key, script) = match jsonrpc::call_parts(params) {
            Ok(parts) => parts,
            Err(d) => return self.direct(ExchangeKind::Submit, id, d),
        };
        let Some(support) = self
            .cfg
            .tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.task_support)
        else {
            return self.direct(
                ExchangeKind::Submit,
                id,
                Direct::Error(INVALID_PARAMS, format!("Unknown tool: {name}")),
            );
        };
        let needs_task = match support {
            Some(TaskSupport::Required) => true,
            Some(TaskSupport::Forbidden) => false,
            _ => script.duration_ms > self.cfg.task_threshold_ms,
        };
        if needs_task && !declares_tasks(params) {
            let msg = format!(
                "Missing required client capability: {EXTENSION_ID} (tool {name} runs as a task)"
            );
            return self.direct(
                ExchangeKind::Submit,
                id,
                Direct::Error(MISSING_REQUIRED_CLIENT_CAPABILITY, msg),
            );
        }
        let run = if needs_task {
            RunAs::Task
        } else {
            RunAs::Inline
        };
        let request = Request::Submit(Submit {
            tool: name,
            script,
            key,
            dedupe: self.cfg.toolop_extensions,
            run,
            requested_ttl_ms: None,
        });
        self.calls
            .service(ExchangeKind::Submit, id, What::Call, request)
    }

    /// `payload` plus, with the toolop extensions, its digest (of the uncut result).
    fn with_meta(&self, body: &ResultBody, cut: bool) -> Value {
        let mut out = result_payload(body, cut);
        if self.cfg.toolop_extensions {
            // The whole result is the one just built unless it was cut.
            let whole = cut.then(|| result_payload(body, false));
            let digest = payload_digest(whole.as_ref().unwrap_or(&out));
            out["_meta"] = json!({ jsonrpc::META_RESULT_DIGEST: digest });
        }
        out
    }

    /// The flat Task fields.
    fn task_fields(&self, v: &TaskView, id: &str) -> Map<String, Value> {
        let mut m = jsonrpc::task_head(id, v, false);
        m.insert("ttlMs".into(), json!(v.ttl_ms));
        m.insert("pollIntervalMs".into(), json!(self.cfg.poll_interval_ms));
        if let Some(s) = status_message(v) {
            m.insert("statusMessage".into(), json!(s));
        }
        m
    }

    /// The `GetTaskResult`: the Task with `result` / `error` / `inputRequests` inlined.
    fn get_task_result(&self, v: &TaskView, id: &str, cut: bool) -> Value {
        let mut m = self.task_fields(v, id);
        m.insert("resultType".into(), json!("complete"));
        match inlined(v) {
            Inlined::Result(b) => {
                m.insert("result".into(), self.with_meta(b, cut));
            }
            Inlined::Error(code, message) => {
                m.insert("error".into(), json!({"code": code, "message": message}));
            }
            Inlined::Input(n) => {
                let text = if v.call_node.is_empty() {
                    format!("Input round {n}: approve continuing task {id}?")
                } else {
                    format!("Input round {n}: approve continuing {}?", v.call_node)
                };
                let request = json!({
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": text,
                        "requestedSchema": crate::fake::codec::question_schema(id, n),
                    },
                });
                let mut reqs = Map::new();
                reqs.insert(format!("input-{n}"), request);
                m.insert("inputRequests".into(), Value::Object(reqs));
            }
            Inlined::Nothing => {}
        }
        Value::Object(m)
    }
}

/// What a `tasks/get` reply inlines for a task: one rule, read by the encoder
/// (`get_task_result`) and by what the trace says the reply showed (`shows`).
enum Inlined<'a> {
    Result(&'a ResultBody),
    /// The JSON-RPC error a failed task carries: its code and message.
    Error(i64, &'a str),
    Input(u32),
    Nothing,
}

fn inlined(v: &TaskView) -> Inlined<'_> {
    match (v.status, &v.outcome, v.pending_round) {
        (TaskStatus::Completed, Some(Outcome::Result(b)), _) => Inlined::Result(b),
        (TaskStatus::Failed, Some(Outcome::ToolError { message }), _) => {
            Inlined::Error(TOOL_ERROR, message)
        }
        (TaskStatus::Failed, Some(Outcome::Stopped(Stop::Expired)), _) => {
            Inlined::Error(INTERNAL_ERROR, EXPIRED_MESSAGE)
        }
        (TaskStatus::InputRequired, _, Some(n)) => Inlined::Input(n),
        _ => Inlined::Nothing,
    }
}

impl jsonrpc::RpcCodec for ExtCodec {
    type What = What;

    fn calls(&mut self) -> &mut RpcCalls<What> {
        &mut self.calls
    }

    /// rmcp answers an unknown session with a plain-text 404 (`tests/peers/rmcp/README.md`);
    /// the strict profile with nothing (the spec says 404 and no more).
    fn session_gone_body(&self) -> Vec<u8> {
        if self.cfg.rmcp {
            b"Not Found: Session not found".to_vec()
        } else {
            Vec::new()
        }
    }

    fn reply_body(&self, what: &What, response: &Response, shape: &Shape) -> Direct {
        let ack = || Direct::Result(json!({"resultType": "complete"}));
        match (what, response) {
            (What::Call, Response::Task(v)) => {
                let mut m = self.task_fields(v, shape.task_id.as_deref().unwrap_or(&v.id));
                m.insert("resultType".into(), json!("task"));
                Direct::Result(Value::Object(m))
            }
            (What::Call, Response::Outcome(Outcome::Result(b))) => {
                let mut body = self.with_meta(b, shape.drop_last_block);
                body["resultType"] = json!("complete");
                Direct::Result(body)
            }
            (_, Response::Outcome(Outcome::ToolError { message })) => {
                Direct::Error(TOOL_ERROR, message.clone())
            }
            // rmcp's words for an unknown and a deleted task alike (rmcp-3.11.0 seq 113, 116).
            (What::Get { task } | What::Ack { task }, Response::NotFound { .. }) => {
                let task = shape.task_id.as_deref().unwrap_or(task);
                Direct::Error(INVALID_PARAMS, format!("unknown task: {task}"))
            }
            (What::Get { task }, Response::Task(v)) => Direct::Result(self.get_task_result(
                v,
                shape.task_id.as_deref().unwrap_or(task),
                shape.drop_last_block,
            )),
            // Cancel and update acknowledge whatever they did (a terminal task: nothing).
            (
                What::Ack { .. },
                Response::CancelAccepted
                | Response::CancelRejected { .. }
                | Response::Ack
                | Response::Task(_),
            ) => ack(),
            _ => Direct::Error(
                jsonrpc::INTERNAL_ERROR,
                "the server has no answer here".into(),
            ),
        }
    }
}

fn exchange_of(method: &str) -> ExchangeKind {
    match method {
        "tasks/get" => ExchangeKind::Poll,
        "tasks/update" => ExchangeKind::Answer,
        _ => ExchangeKind::Cancel,
    }
}

/// `input-<n>` -> `n`.
fn round_of_key(key: &str) -> Option<u32> {
    key.strip_prefix("input-")?.parse().ok()
}

/// Whether request params declare the tasks extension in their per-request capabilities.
fn declares_tasks(params: &Value) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION_ID))
        .is_some_and(Value::is_object)
}

/// The `CallToolResult` without `_meta` and `resultType`; `isError` always printed.
fn result_payload(body: &ResultBody, cut: bool) -> Value {
    json!({ "content": jsonrpc::content_blocks(&body.text, body.blocks, cut), "isError": body.is_error })
}

/// Each status change sets the message (or clears it).
fn status_message(v: &TaskView) -> Option<String> {
    match v.notes.last()? {
        Note::InputAsked => Some("Waiting for client input".into()),
        Note::Cancelled => Some("Cancelled by client".into()),
        Note::Ended {
            outcome: ScriptOutcome::ToolError,
            ..
        } => Some(v.text.clone()),
        Note::Preempted => Some("Pre-empted".into()),
        // rmcp keeps the last progress message (rmcp-3.11.0 seq 206); the fake reports none.
        Note::Expired | Note::InputWithdrawn => None,
        Note::Answered | Note::Ended { .. } => None,
    }
}

impl ResultShape for ExtCodec {
    fn payload(&self, body: &ResultBody) -> Option<Value> {
        Some(result_payload(body, false))
    }

    /// A tool error's message, and the ttl sweep's: each is the `error` a failed task inlines.
    fn error_message(&self, outcome: &Outcome) -> Option<String> {
        match outcome {
            Outcome::ToolError { message } => Some(message.clone()),
            Outcome::Stopped(Stop::Expired) => Some(EXPIRED_MESSAGE.into()),
            _ => None,
        }
    }
}

impl Codec for ExtCodec {
    fn caps(&self) -> CodecCaps {
        CodecCaps {
            body_ids: true,
            poll_shows_result: true,
            poll_shows_input: true,
            result_digest: self.cfg.toolop_extensions,
            poll_interval_ms: Some(self.cfg.poll_interval_ms),
        }
    }

    fn policy(&self) -> Policy {
        Policy {
            // `failed` is a JSON-RPC error only: an isError result ends completed.
            error_result_status: TaskStatus::Completed,
            done_without_result: false,
            cancel: CancelRule::delayed(self.cfg.cancel_delay_ms),
            at_terminal: AtTerminal::RestartTtl,
            dedupe: Dedupe::WhileRetained,
            input: InputDelivery::Shown,
            expiry: if self.cfg.rmcp {
                Expiry::FailRunningOnCall
            } else {
                Expiry::Delete
            },
            cancel_withdraws_input: self.cfg.rmcp,
            notify_status: false,
            after_answer: AfterAnswer::Working,
            tasks_bound_to_session: false,
        }
    }

    fn decode(&mut self, frame: OutFrame) -> Decoded {
        match self.calls.read(&frame) {
            Incoming::Done(decoded) => decoded,
            Incoming::Request { id, method, params } => self.on_request(id, &method, &params),
            // There are no server requests in this era: whatever this answers, it is stale.
            Incoming::Response { body, .. } => {
                let action = AnswerAction::from_word(
                    body.get("result")
                        .and_then(|r| r.get("action"))
                        .and_then(Value::as_str),
                );
                let item = AnswerItem {
                    candidates: Vec::new(),
                    prefer_task: None,
                    action,
                    content: None,
                };
                jsonrpc::client_answer(Request::Answer {
                    task: None,
                    items: vec![item],
                })
            }
        }
    }

    fn encode_reply(&mut self, call: CallId, response: &Response, shape: &Shape) -> InFrame {
        jsonrpc::encode_reply(self, call, response, shape)
    }

    /// The extension pushes nothing: input requests ride on `tasks/get`, and there are no
    /// status notifications.
    fn encode_push(&mut self, _push: &Push) -> Option<InFrame> {
        None
    }

    /// As `answer` writes it: `tasks/cancel` and `tasks/update` answer the plain ack whatever the
    /// service did (a cancel of an ended task included); only `tasks/get` inlines anything, and
    /// only a completed task's result, a failed task's error or the pending round's requests.
    /// A submission's reply is the flat CreateTaskResult, with nothing inlined.
    fn shows(&self, exchange: ExchangeKind, response: &Response) -> Shows {
        let acked = matches!(
            response,
            Response::Task(_) | Response::CancelAccepted | Response::CancelRejected { .. }
        );
        match (exchange, response) {
            (ExchangeKind::Cancel, _) if acked => Shows::CancelAccepted,
            (ExchangeKind::Answer, _) if acked => Shows::Ack,
            (_, Response::Task(v)) => {
                let read = exchange == ExchangeKind::Poll;
                let inline = inlined(v);
                let mut shown = neutral_shows(response, self.caps());
                if let Shows::Task {
                    result,
                    input_round,
                    ..
                } = &mut shown
                {
                    *result = read && matches!(inline, Inlined::Result(_) | Inlined::Error(..));
                    *input_round = match inline {
                        Inlined::Input(n) if read => Some(n),
                        _ => None,
                    };
                }
                shown
            }
            _ => neutral_shows(response, self.caps()),
        }
    }
}
