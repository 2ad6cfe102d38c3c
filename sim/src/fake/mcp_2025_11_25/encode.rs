//! Neutral responses and pushes into MCP 2025-11-25 frames, per profile.

use serde_json::{json, Map, Value};
use toolop::transport::{InFrame, OutFrame};

use super::{texts, McpCodec, Profile, TasksMethod, What, RELATED_TASK};
use crate::fake::codec::{
    CallId, Codec, CodecCaps, Decoded, Outcome, Push, Response, ResultBody, ResultShape, Shape,
    TaskView,
};
use crate::fake::jsonrpc::{self, Direct, INTERNAL_ERROR, INVALID_PARAMS, TOOL_ERROR};
use crate::fake::service::{
    AfterAnswer, AtTerminal, CancelEffect, CancelRule, Dedupe, Expiry, InputDelivery, Policy,
    RunningWork,
};
use crate::fake::truth::{payload_digest, TaskStatus};

/// TS lists 10 tasks per page.
const TS_PAGE_SIZE: usize = 10;

impl ResultShape for McpCodec {
    /// The `CallToolResult` without `_meta`. TS omits `isError` unless true; Python and strict
    /// always print it.
    fn payload(&self, body: &ResultBody) -> Option<Value> {
        Some(result_payload(self.profile(), body, false))
    }
}

fn result_payload(profile: Profile, body: &ResultBody, cut: bool) -> Value {
    let mut out = json!({ "content": jsonrpc::content_blocks(&body.text, body.blocks, cut) });
    if body.is_error || profile != Profile::TsSdk {
        out["isError"] = json!(body.is_error);
    }
    out
}

/// `{"io.modelcontextprotocol/related-task": {"taskId": id}}`
fn related_meta(task_id: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(RELATED_TASK.to_string(), json!({ "taskId": task_id }));
    m
}

impl McpCodec {
    /// The flat `Task` object as the profile prints it.
    fn task_json(&self, view: &TaskView, id: &str) -> Value {
        let profile = self.profile();
        let micros = profile == Profile::PythonSdk;
        let mut m = jsonrpc::task_head(id, view, micros);
        match (view.ttl_ms, profile) {
            (Some(ttl), _) => {
                m.insert("ttl".into(), json!(ttl));
            }
            // Python omits the required key when no ttl applies (observed quirk).
            (None, Profile::PythonSdk) => {}
            (None, _) => {
                m.insert("ttl".into(), Value::Null);
            }
        }
        m.insert("pollInterval".into(), json!(self.poll_interval_ms()));
        if let Some(s) = texts::status_message(profile, view) {
            m.insert("statusMessage".into(), json!(s));
        }
        Value::Object(m)
    }

    /// The `pollInterval` the server suggests: the configured one, else the profile's own. The
    /// Python SDK (mcp 1.30) creates every task with 500 and offers no way to ask for another,
    /// so its profile says 500 whatever is configured.
    fn poll_interval_ms(&self) -> u64 {
        match (self.profile(), self.cfg.poll_interval_ms) {
            (Profile::PythonSdk, _) | (_, None) => texts::default_poll_interval_ms(self.profile()),
            (_, Some(configured_ms)) => configured_ms,
        }
    }

    /// A result plus `_meta`: the related task (when given) and, with extensions, the digest of
    /// the whole result (a cut one keeps the digest of what was cut from).
    fn with_meta(&self, body: &ResultBody, task_id: Option<&str>, cut: bool) -> Value {
        let mut out = result_payload(self.profile(), body, cut);
        let mut meta = task_id.map(related_meta).unwrap_or_default();
        if self.cfg.toolop_extensions {
            // The whole result is the one just built unless it was cut.
            let whole = cut.then(|| result_payload(self.profile(), body, false));
            meta.insert(
                jsonrpc::META_RESULT_DIGEST.to_string(),
                json!(payload_digest(whole.as_ref().unwrap_or(&out))),
            );
        }
        if !meta.is_empty() {
            out["_meta"] = Value::Object(meta);
        }
        out
    }

    fn list_reply(
        &self,
        views: &[TaskView],
        cursor: Option<&str>,
        shape: &Shape,
    ) -> Result<Value, Direct> {
        let profile = self.profile();
        let json_of = |v: &TaskView| self.task_json(v, shape.task_id.as_deref().unwrap_or(&v.id));
        let wrap = |tasks: Vec<Value>, next: Option<String>| {
            let mut r = json!({ "tasks": tasks });
            if let Some(c) = next {
                r["nextCursor"] = json!(c);
            }
            if profile == Profile::TsSdk {
                r["_meta"] = json!({});
            }
            r
        };
        if profile != Profile::TsSdk {
            return Ok(wrap(views.iter().map(json_of).collect(), None));
        }
        let start = match cursor {
            None => 0,
            Some(c) => match views.iter().position(|t| t.id == c) {
                Some(i) => i + 1,
                None => {
                    return Err(Direct::Error(
                        INVALID_PARAMS,
                        format!("MCP error -32602: Failed to list tasks: Invalid cursor: {c}"),
                    ))
                }
            },
        };
        let page: Vec<&TaskView> = views.iter().skip(start).take(TS_PAGE_SIZE).collect();
        let next = (start + page.len() < views.len())
            .then(|| page.last().map(|t| t.id.clone()))
            .flatten();
        Ok(wrap(page.into_iter().map(json_of).collect(), next))
    }
}

impl jsonrpc::RpcCodec for McpCodec {
    type What = What;

    fn calls(&mut self) -> &mut jsonrpc::RpcCalls<What> {
        &mut self.calls
    }

    /// As each server answers an unknown `Mcp-Session-Id`: the Python SDK's
    /// `StreamableHTTPSessionManager` (spec/mcp-tasks.md section 14, `11-cross-session`), the
    /// TS SDK's example routing (the peer in `tests/peers/ts`), nothing at all for the strict
    /// profile (the spec says 404 and no more).
    fn session_gone_body(&self) -> Vec<u8> {
        match self.profile() {
            Profile::PythonSdk => br#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Session not found"}}"#.to_vec(),
            Profile::TsSdk => br#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}"#.to_vec(),
            Profile::SpecStrict => Vec::new(),
        }
    }

    /// The reply body (result or error) to a request of kind `what`.
    fn reply_body(&self, what: &What, response: &Response, shape: &Shape) -> Direct {
        let profile = self.profile();
        let id_of = |v: &TaskView| shape.task_id.clone().unwrap_or_else(|| v.id.clone());
        match (what, response) {
            (What::Call { task: true }, Response::Task(v)) => {
                Direct::Result(json!({ "task": self.task_json(v, &id_of(v)) }))
            }
            (What::Call { .. }, Response::Outcome(Outcome::Result(b))) => {
                Direct::Result(self.with_meta(b, None, shape.drop_last_block))
            }
            (What::Call { .. }, Response::InlineRefused) => {
                Direct::Error(INVALID_PARAMS, texts::TS_INVALID_TASK_CREATION.into())
            }
            // The Python SDK (mcp 1.30) fails a task whose tool raised (`statusMessage` = the
            // exception's text) and stores no result: `tasks/result` answers only `_meta`, as
            // for a cancelled task (seen against the real server in the live tests).
            (
                What::Tasks {
                    method: TasksMethod::Result,
                    task,
                },
                Response::Outcome(Outcome::ToolError { .. }),
            ) if profile == Profile::PythonSdk => {
                let task = shape.task_id.as_deref().unwrap_or(task);
                Direct::Result(json!({ "_meta": related_meta(task) }))
            }
            (_, Response::Outcome(Outcome::ToolError { message })) => {
                Direct::Error(TOOL_ERROR, message.clone())
            }
            (What::Tasks { method, task }, r) => {
                let task = shape.task_id.as_deref().unwrap_or(task);
                match (method, r) {
                    (TasksMethod::Cancel, Response::Task(v)) => {
                        let mut body = self.task_json(v, task);
                        if profile == Profile::TsSdk {
                            body["_meta"] = json!({});
                        }
                        Direct::Result(body)
                    }
                    (_, Response::Task(v)) => Direct::Result(self.task_json(v, task)),
                    (_, Response::NotFound { expired, .. }) => Direct::Error(
                        INVALID_PARAMS,
                        texts::not_found(profile, *method, task, *expired),
                    ),
                    (_, Response::CancelRejected { status }) => Direct::Error(
                        INVALID_PARAMS,
                        texts::cancel_terminal(profile, status.as_str()),
                    ),
                    (_, Response::Outcome(Outcome::Result(b))) => {
                        Direct::Result(self.with_meta(b, Some(task), shape.drop_last_block))
                    }
                    (_, Response::NoResult { cancelled: true })
                        if profile == Profile::PythonSdk =>
                    {
                        Direct::Result(json!({ "_meta": related_meta(task) }))
                    }
                    _ => Direct::Error(INTERNAL_ERROR, format!("Task {task} has no result stored")),
                }
            }
            (What::Lookup, Response::Tasks(views)) => match self.list_reply(views, None, shape) {
                Ok(v) | Err(Direct::Result(v)) => Direct::Result(v),
                Err(e) => e,
            },
            (What::List { cursor }, Response::Tasks(views)) => {
                match self.list_reply(views, cursor.as_deref(), shape) {
                    Ok(v) => Direct::Result(v),
                    Err(e) => e,
                }
            }
            (_, r) => Direct::Error(
                INTERNAL_ERROR,
                format!("the server has no answer here ({})", response_name(r)),
            ),
        }
    }
}

fn response_name(r: &Response) -> &'static str {
    match r {
        Response::Task(_) => "task",
        Response::Outcome(_) => "outcome",
        Response::NoResult { .. } => "no result",
        Response::InlineRefused => "inline refused",
        Response::NotFound { .. } => "not found",
        Response::CancelAccepted => "cancel accepted",
        Response::CancelRejected { .. } => "cancel rejected",
        Response::Tasks(_) => "tasks",
        Response::Ack => "ack",
        Response::Throttled { .. } => "throttled",
        Response::SessionGone => "session gone",
    }
}

impl Codec for McpCodec {
    fn caps(&self) -> CodecCaps {
        CodecCaps {
            body_ids: true,
            poll_shows_result: false,
            poll_shows_input: false,
            result_digest: self.cfg.toolop_extensions,
            poll_interval_ms: Some(self.poll_interval_ms()),
        }
    }

    fn policy(&self) -> Policy {
        let p = self.profile();
        Policy {
            error_result_status: if p == Profile::PythonSdk {
                TaskStatus::Completed
            } else {
                TaskStatus::Failed
            },
            done_without_result: false,
            cancel: CancelRule {
                effect: CancelEffect::Immediate,
                running_work: if p == Profile::PythonSdk {
                    RunningWork::KeepsRunning
                } else {
                    RunningWork::Stops
                },
            },
            at_terminal: if p == Profile::SpecStrict {
                AtTerminal::Keep
            } else {
                AtTerminal::RestartTtl
            },
            dedupe: Dedupe::WhileRetained,
            input: InputDelivery::Pushed,
            expiry: Expiry::Delete,
            cancel_withdraws_input: false,
            notify_status: p != Profile::SpecStrict,
            after_answer: if p == Profile::TsSdk {
                AfterAnswer::AppMayLeaveInputRequired
            } else {
                AfterAnswer::Working
            },
            // Both SDKs bind; the spec leaves it open. A server offering toolop's extensions
            // shows a task, and finds it by key, in every session of the client: its contract
            // (a lookup that missed a task bound elsewhere would submit it again).
            tasks_bound_to_session: p != Profile::SpecStrict && !self.cfg.toolop_extensions,
        }
    }

    fn decode(&mut self, frame: OutFrame) -> Decoded {
        self.decode_frame(frame)
    }

    fn without_task_support(&mut self, d: Decoded) -> Decoded {
        self.redeployed_without_tasks(d)
    }

    fn take_forbidden_task_calls(&mut self) -> Vec<crate::fake::truth::ForbiddenTaskCall> {
        std::mem::take(&mut self.forbidden_task_calls)
    }

    /// The TS SDK numbers the requests it sends per session from 0 (a strict server from 1),
    /// and a restarted process has only new sessions: ids the old process used come again, for
    /// other tasks. Rounds already numbered keep their ids, as the old process's frames did.
    fn restart(&mut self) {
        self.elicit_counter = 0;
    }

    fn encode_reply(&mut self, call: CallId, response: &Response, shape: &Shape) -> InFrame {
        jsonrpc::encode_reply(self, call, response, shape)
    }

    fn encode_push(&mut self, push: &Push) -> Option<InFrame> {
        match push {
            Push::Input {
                task,
                call_node,
                round,
            } => {
                let id = self.round_id(task, *round);
                let text = if call_node.is_empty() {
                    format!("Input round {round}: approve continuing task {task}?")
                } else {
                    format!("Input round {round}: approve continuing {call_node}?")
                };
                let message = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": text,
                        "requestedSchema": crate::fake::codec::question_schema(task, *round),
                        "_meta": related_meta(task),
                    },
                });
                Some(jsonrpc::frame(None, &message))
            }
            Push::Status(view) if self.profile() != Profile::SpecStrict => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": self.task_json(view, &view.id)});
                Some(jsonrpc::frame(None, &note))
            }
            Push::Status(_) => None,
        }
    }
}
