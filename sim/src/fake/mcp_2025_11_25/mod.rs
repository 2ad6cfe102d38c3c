//! The codec of MCP 2025-11-25 with Tasks (SEP-1686): JSON-RPC messages <-> neutral requests and
//! responses, for three server profiles: the spec text read strictly, and what the TS
//! (`@modelcontextprotocol/sdk@1.32.2`) and Python (`mcp==1.30.0`) SDK servers were observed to
//! do (`shared/spec/mcp-tasks.md` §14 and `shared/spec/transcripts/`).
//!
//! ## Frames
//! Every reply has `http_status: 200`, no Retry-After, one JSON-RPC message, and `request_id`
//! the JSON-RPC id when it is a non-negative integer. Server messages (`elicitation/create`,
//! `notifications/tasks/status`) have `request_id: None`. Client notifications and client
//! responses (answers to input requests) get no reply. A body that is not JSON gets `-32700`
//! with `id: null`, and keeps the frame's `request_id` (an HTTP reply belongs to its POST).
//!
//! ## Profile quirks (the policy and the texts)
//! - ids: TS and strict 32 hex digits; Python `<session scope>:<uuid4>`.
//! - `isError` results: TS and strict end `failed`, Python `completed`.
//! - cancel: immediate everywhere; Python lets running work finish (its side effect happens).
//! - ttl: the SDK stores restart it when a task becomes terminal; strict counts from creation.
//!   Python omits a `null` ttl. Status notifications: both SDKs, not strict.
//! - input requests: `elicitation/create` sent while a `tasks/result` is held; ids: TS a
//!   counter from `0` (the SDK's per-session request counter; one session is shared by every
//!   executor process), Python `task-<id>-<n>`, strict a counter from `1`. No profile reuses an
//!   id: MCP forbids reusing a request id within a session.
//! - `tasks/list`: TS pages by 10 with the last task id as cursor; strict refuses any cursor;
//!   Python returns everything.
//! - Tools: a task-augmented call of a tool that forbids tasks runs anyway on TS (then fails
//!   `-32602`), is an error result on Python and `-32601` on strict.
//!
//! The toolop extensions (advertised as `experimental["io.toolop/idempotency"]`): submissions
//! deduplicated by `_meta["io.toolop/idempotency-key"]`, `tasks/list` filtered by
//! `_meta["io.toolop/lookup-key"]`, `_meta["io.toolop/result-digest"]` on results.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use toolop::protocol::TaskSupport;
use toolop::transport::OutFrame;

use crate::fake::codec::{
    AnswerItem, Ask, Decoded, ExchangeKind, FakeTool, Request, RunAs, Submit,
};
use crate::fake::jsonrpc::{self, Direct, Incoming, RpcCalls, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::fake::truth::AnswerAction;

mod encode;
mod texts;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_flow;
#[cfg(test)]
mod tests_quirk;

pub use texts::TasksMethod;

pub const PROTOCOL_VERSION: &str = "2025-11-25";
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Which real server the codec imitates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    SpecStrict,
    TsSdk,
    PythonSdk,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    pub profile: Profile,
    /// Advertise and honour the toolop extensions.
    pub toolop_extensions: bool,
    /// `None`: the profile default (TS 1000, Python 500, strict 1000).
    pub poll_interval_ms: Option<u64>,
    /// The server's maximum ttl (advertised as the key retention with the extensions).
    pub max_ttl_ms: Option<u64>,
    pub tools: Vec<FakeTool>,
}

impl McpConfig {
    /// No extensions, default poll interval, no maximum ttl.
    pub fn new(profile: Profile, tools: Vec<FakeTool>) -> McpConfig {
        McpConfig {
            profile,
            toolop_extensions: false,
            poll_interval_ms: None,
            max_ttl_ms: None,
            tools,
        }
    }
}

/// What the codec needs to answer the service's reply to one request.
#[derive(Clone, Debug)]
pub(crate) enum What {
    /// `tools/call`: `task` says whether it was task-augmented.
    Call {
        task: bool,
    },
    Tasks {
        method: TasksMethod,
        task: String,
    },
    Lookup,
    List {
        cursor: Option<String>,
    },
}

/// The codec. See the module docs.
pub struct McpCodec {
    cfg: McpConfig,
    calls: RpcCalls<What>,
    /// Wire id of each input round delivered so far, and the rounds each wire id named.
    round_ids: BTreeMap<(String, u32), Value>,
    rounds_by_wire_id: BTreeMap<String, Vec<(String, u32)>>,
    elicit_counter: u64,
    /// Task-augmented calls of tools that forbid tasks, for the service's truth.
    forbidden_task_calls: Vec<crate::fake::truth::ForbiddenTaskCall>,
}

/// The fake MCP 2025-11-25 server: this codec with the task service its profile asks for.
pub fn server(cfg: McpConfig, rng: rand_chacha::ChaCha8Rng) -> crate::fake::FakeServer {
    use crate::fake::service::IdStyle;
    let ids = if cfg.profile == Profile::PythonSdk {
        IdStyle::ScopedUuid
    } else {
        IdStyle::Hex128
    };
    let max_ttl_ms = cfg.max_ttl_ms;
    crate::fake::FakeServer::new(Box::new(McpCodec::new(cfg)), ids, max_ttl_ms, 0.0, rng)
}

impl McpCodec {
    pub fn new(cfg: McpConfig) -> McpCodec {
        McpCodec {
            cfg,
            calls: RpcCalls::default(),
            round_ids: BTreeMap::new(),
            rounds_by_wire_id: BTreeMap::new(),
            elicit_counter: 0,
            forbidden_task_calls: Vec::new(),
        }
    }

    pub fn config(&self) -> &McpConfig {
        &self.cfg
    }

    fn profile(&self) -> Profile {
        self.cfg.profile
    }

    fn service(
        &mut self,
        exchange: ExchangeKind,
        id: Value,
        what: What,
        request: Request,
    ) -> Decoded {
        self.calls.service(exchange, id, what, request)
    }

    fn on_request(&mut self, id: Value, method: &str, params: &Value) -> Decoded {
        let rid = id.as_u64();
        let task_method = match method {
            "tasks/get" => Some((TasksMethod::Get, ExchangeKind::Poll)),
            "tasks/result" => Some((TasksMethod::Result, ExchangeKind::Fetch)),
            "tasks/cancel" => Some((TasksMethod::Cancel, ExchangeKind::Cancel)),
            _ => None,
        };
        if let Some((m, exchange)) = task_method {
            let Some(task) = params
                .get("taskId")
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                let (code, msg) = texts::missing_task_id(self.profile());
                return self
                    .calls
                    .direct(exchange, id, rid, Direct::Error(code, msg));
            };
            let request = match m {
                TasksMethod::Get => Request::Poll { task: task.clone() },
                TasksMethod::Result => Request::Fetch { task: task.clone() },
                TasksMethod::Cancel => Request::Cancel { task: task.clone() },
            };
            return self.service(exchange, id, What::Tasks { method: m, task }, request);
        }
        match method {
            "initialize" => {
                let d = Direct::Result(self.initialize());
                self.calls.direct(ExchangeKind::Handshake, id, rid, d)
            }
            "ping" => {
                self.calls
                    .direct(ExchangeKind::Handshake, id, rid, Direct::Result(json!({})))
            }
            "tools/list" => {
                let d = Direct::Result(self.tools_list());
                self.calls.direct(ExchangeKind::Handshake, id, rid, d)
            }
            "tools/call" => self.tools_call(id, params),
            "tasks/list" => {
                let key = params
                    .get("_meta")
                    .and_then(|m| m.get(jsonrpc::META_LOOKUP_KEY))
                    .and_then(Value::as_str);
                match key.filter(|_| self.cfg.toolop_extensions) {
                    Some(key) => {
                        let request = Request::Lookup {
                            key: key.to_string(),
                        };
                        self.service(ExchangeKind::Lookup, id, What::Lookup, request)
                    }
                    None => {
                        let cursor = params
                            .get("cursor")
                            .and_then(Value::as_str)
                            .map(str::to_string);
                        if let (Profile::SpecStrict, Some(c)) = (self.profile(), &cursor) {
                            let d = Direct::Error(INVALID_PARAMS, format!("Invalid cursor: {c}"));
                            return self.calls.direct(ExchangeKind::List, id, rid, d);
                        }
                        self.service(ExchangeKind::List, id, What::List { cursor }, Request::List)
                    }
                }
            }
            _ => self.calls.direct(
                ExchangeKind::Other,
                id,
                rid,
                Direct::Error(METHOD_NOT_FOUND, format!("Method not found: {method}")),
            ),
        }
    }

    fn initialize(&self) -> Value {
        let mut caps = json!({
            "tools": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        });
        if self.cfg.toolop_extensions {
            // Keys live as long as their task, and a task at least its ttl: the server's maximum
            // ttl bounds what "not found by key" can prove.
            let ext = match self.cfg.max_ttl_ms {
                Some(ms) => json!({ "retentionMs": ms }),
                None => json!({}),
            };
            caps["experimental"] = json!({ jsonrpc::EXT_IDEMPOTENCY: ext });
        } else if self.profile() == Profile::PythonSdk {
            caps["experimental"] = json!({});
        }
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": caps,
            "serverInfo": {"name": "toolop-fake-mcp", "version": texts::server_version(self.profile())},
        })
    }

    fn tools_list(&self) -> Value {
        let tools = jsonrpc::tool_descriptors(&self.cfg.tools, true);
        json!({ "tools": tools })
    }

    fn tools_call(&mut self, id: Value, params: &Value) -> Decoded {
        let profile = self.profile();
        let rid = id.as_u64();
        let refuse =
            |me: &mut Self, id: Value, d: Direct| me.calls.direct(ExchangeKind::Submit, id, rid, d);
        let (name, key, script) = match jsonrpc::call_parts(params) {
            Ok(parts) => parts,
            Err(d) => return refuse(self, id, d),
        };
        let task_param = params.get("task").filter(|t| !t.is_null());
        let Some(tool) = self.cfg.tools.iter().find(|t| t.name == name) else {
            let d = match (profile, task_param.is_some()) {
                (Profile::PythonSdk, _) => {
                    Direct::Result(texts::error_result(&format!("Unknown tool: {name}")))
                }
                (Profile::TsSdk, true) => {
                    Direct::Error(INVALID_PARAMS, texts::TS_INVALID_TASK_CREATION.into())
                }
                (Profile::TsSdk, false) => Direct::Error(
                    INVALID_PARAMS,
                    format!("MCP error -32602: Tool {name} not found"),
                ),
                (Profile::SpecStrict, _) => {
                    Direct::Error(INVALID_PARAMS, format!("Unknown tool: {name}"))
                }
            };
            return refuse(self, id, d);
        };
        let support = tool.task_support.unwrap_or(TaskSupport::Forbidden);
        let task_capable = support != TaskSupport::Forbidden;
        let submit = |run, requested_ttl_ms| Submit {
            tool: name.clone(),
            script: script.clone(),
            key: key.clone(),
            dedupe: self.cfg.toolop_extensions,
            run,
            requested_ttl_ms,
        };
        let (run, ttl) = match (task_param, task_capable) {
            (Some(task_param), true) => match task_param.get("ttl") {
                None | Some(Value::Null) => (RunAs::Task, None),
                Some(v) => match v.as_u64() {
                    Some(ttl) => (RunAs::Task, Some(ttl)),
                    None => {
                        return refuse(
                            self,
                            id,
                            Direct::Error(
                                INVALID_PARAMS,
                                "Invalid params: task.ttl must be a non-negative integer".into(),
                            ),
                        )
                    }
                },
            },
            (Some(_), false) => {
                let refusal = forbidden_with_task(profile, &name);
                self.forbidden_task_calls
                    .push(crate::fake::truth::ForbiddenTaskCall {
                        call_node: script.call_node.clone(),
                        tool: name.clone(),
                        ran: refusal.is_none(),
                    });
                match refusal {
                    None => (RunAs::InlineThenRefuse, None),
                    Some(d) => return refuse(self, id, d),
                }
            }
            (None, _) if support == TaskSupport::Required => {
                let d = match profile {
                    Profile::TsSdk => Direct::Result(texts::error_result(&format!(
                        "MCP error -32601: Tool {name} requires task augmentation (taskSupport: 'required')"
                    ))),
                    Profile::PythonSdk => Direct::Result(texts::error_result("This tool requires task-augmented invocation")),
                    Profile::SpecStrict => Direct::Error(METHOD_NOT_FOUND, format!("Tool {name} requires task augmentation")),
                };
                return refuse(self, id, d);
            }
            (None, _) => (RunAs::Inline, None),
        };
        let request = Request::Submit(submit(run, ttl));
        self.service(
            ExchangeKind::Submit,
            id,
            What::Call {
                task: run == RunAs::Task,
            },
            request,
        )
    }

    /// A task-augmented submission, answered as if its tool forbade tasks (the
    /// `tool_redeployed` fault): decoded again, under the same call, the way `tools_call`
    /// decodes such a call.
    pub(super) fn redeployed_without_tasks(&mut self, d: Decoded) -> Decoded {
        let (Some(call), Ask::Service(Request::Submit(s))) = (d.call, &d.ask) else {
            return d;
        };
        if s.run != RunAs::Task {
            return d;
        }
        let mut submit = s.clone();
        let redecoded = match forbidden_with_task(self.profile(), &submit.tool) {
            None => {
                submit.run = RunAs::InlineThenRefuse;
                submit.requested_ttl_ms = None;
                self.calls.redecode(
                    call,
                    ExchangeKind::Submit,
                    Ok(What::Call { task: false }),
                    Ask::Service(Request::Submit(submit)),
                )
            }
            Some(refusal) => {
                self.calls
                    .redecode(call, ExchangeKind::Submit, Err(refusal), Ask::Codec)
            }
        };
        redecoded.unwrap_or(d)
    }

    /// The client answered one of our requests (an `elicitation/create`).
    fn on_client_response(&self, id: &Value, body: &serde_json::Map<String, Value>) -> Request {
        let result = body.get("result");
        let action = match result {
            Some(r) => AnswerAction::from_word(r.get("action").and_then(Value::as_str)),
            None => AnswerAction::Error,
        };
        let prefer_task = result
            .and_then(|r| r.get("_meta"))
            .and_then(|m| m.get(RELATED_TASK))
            .and_then(|r| r.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let candidates = self
            .rounds_by_wire_id
            .get(&id.to_string())
            .cloned()
            .unwrap_or_default();
        let content = result.and_then(|r| r.get("content")).cloned();
        Request::Answer {
            task: None,
            items: vec![AnswerItem {
                candidates,
                prefer_task,
                action,
                content,
            }],
        }
    }

    /// The wire id of `round` of `task`, allocated on its first delivery.
    fn round_id(&mut self, task: &str, round: u32) -> Value {
        if let Some(id) = self.round_ids.get(&(task.to_string(), round)) {
            return id.clone();
        }
        let id = match self.profile() {
            // The SDK numbers the requests it sends from 0, one counter per server session,
            // and every executor process shares the node's session.
            Profile::TsSdk => {
                let id = self.elicit_counter;
                self.elicit_counter += 1;
                json!(id)
            }
            Profile::PythonSdk => json!(format!("task-{task}-{round}")),
            Profile::SpecStrict => {
                self.elicit_counter += 1;
                json!(self.elicit_counter)
            }
        };
        self.round_ids.insert((task.to_string(), round), id.clone());
        self.rounds_by_wire_id
            .entry(id.to_string())
            .or_default()
            .push((task.to_string(), round));
        id
    }
}

impl McpCodec {
    pub(super) fn decode_frame(&mut self, frame: OutFrame) -> Decoded {
        match self.calls.read(&frame) {
            Incoming::Done(decoded) => decoded,
            Incoming::Request { id, method, params } => self.on_request(id, &method, &params),
            Incoming::Response { id, body } => {
                jsonrpc::client_answer(self.on_client_response(&id, &body))
            }
        }
    }
}

/// How each profile answers a task-augmented call of a tool that forbids tasks
/// (spec/mcp-tasks.md section 14): `None` for the TS SDK, which runs the tool first and then
/// fails the reply (`RunAs::InlineThenRefuse`); the refusal the others send unrun.
fn forbidden_with_task(profile: Profile, name: &str) -> Option<Direct> {
    match profile {
        Profile::TsSdk => None,
        Profile::PythonSdk => Some(Direct::Result(texts::error_result(
            "This tool does not support task-augmented invocation",
        ))),
        Profile::SpecStrict => Some(Direct::Error(
            METHOD_NOT_FOUND,
            format!("Tool {name} does not support task-augmented invocation"),
        )),
    }
}
