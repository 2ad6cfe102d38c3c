//! MCP Tasks, protocol revision 2025-11-25 (experimental), over JSON-RPC 2.0.
//!
//! The only place that knows this wire format: JSON-RPC error codes, HTTP statuses, the wire
//! spelling of task statuses and the quirks of the real SDKs (`shared/spec/mcp-tasks.md` §14)
//! stop here. Message text is read only through [`super::wording`] (exact SDK phrasings). Every decoder treats server bytes as hostile: no `unwrap` on server data, and
//! anything that does not have the expected shape becomes `Reply::Malformed` with a reason.

use super::jsonrpc::{
    call_error, cancel_error, check_call_result, has_path, http_status_reply, negotiation_result,
    parse_frame_reply, parse_reply, parse_task, refusal_in_result, related_task_id, request,
    response_rpc_id, result_view_of, says_no_result_stored, server_answer, server_request,
    task_read_error, to_bytes, type_name, ParseMemo, RpcReply, INVALID_PARAMS, METHOD_NOT_FOUND,
    RELATED_TASK,
};
use serde_json::{json, Map, Value};

use super::{
    Adapter, ApprovalReply, Inbound, InputRequest, Outbound, ProtocolError, Reply, RequestKind,
    ResultView, ServerAnswer, ServerCapabilities, ServerRequest, TaskSupport, TaskView, ToolInfo,
    EXT_IDEMPOTENCY, META_IDEMPOTENCY_KEY, META_LOOKUP_KEY, META_SYNC_UPPER_BOUND_MS,
};
use crate::digest::value_digest;
use crate::record::{AdapterId, ProtocolStatus};
use crate::transport::InFrame;

pub const PROTOCOL_VERSION: &str = "2025-11-25";

pub struct Mcp20251125Adapter {
    client_name: String,
    client_version: String,
    /// The last classified frame's JSON, for its decode.
    memo: ParseMemo,
}

impl Mcp20251125Adapter {
    pub fn new() -> Self {
        Self::with_client_info("toolop", env!("CARGO_PKG_VERSION"))
    }

    /// The `clientInfo` sent in `initialize`.
    pub fn with_client_info(name: &str, version: &str) -> Self {
        Mcp20251125Adapter {
            client_name: name.to_string(),
            client_version: version.to_string(),
            memo: ParseMemo::default(),
        }
    }
}

impl Default for Mcp20251125Adapter {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// `tools/call` params shared by the task and the synchronous form. The idempotency key rides in
/// `_meta` either way: a server with [`EXT_IDEMPOTENCY`] deduplicates by it, others ignore it.
fn call_params(key: &str, tool: &str, arguments: &Value) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("name".into(), Value::from(tool));
    // The schema wants an object; `null` means "no arguments". Any other value is a caller bug
    // that we pass through so the server refuses it visibly rather than guessing here.
    if !arguments.is_null() {
        params.insert("arguments".into(), arguments.clone());
    }
    params.insert("_meta".into(), json!({ META_IDEMPOTENCY_KEY: key }));
    params
}

fn related_task_meta(operation_id: &str) -> Value {
    json!({ RELATED_TASK: { "taskId": operation_id } })
}

fn encode_outbound(rpc_id: u64, out: &Outbound) -> Vec<u8> {
    match out {
        Outbound::Submit {
            key,
            tool,
            arguments,
            ttl_ms,
        } => {
            let mut params = call_params(key, tool, arguments);
            let task = match ttl_ms {
                Some(ttl) => json!({ "ttl": ttl }),
                None => json!({}),
            };
            params.insert("task".into(), task);
            request(rpc_id, "tools/call", Value::Object(params))
        }
        Outbound::SubmitSync {
            key,
            tool,
            arguments,
        } => request(
            rpc_id,
            "tools/call",
            Value::Object(call_params(key, tool, arguments)),
        ),
        Outbound::LookupByKey { key } => request(
            rpc_id,
            "tasks/list",
            json!({ "_meta": { META_LOOKUP_KEY: key } }),
        ),
        Outbound::Poll { operation_id } => {
            request(rpc_id, "tasks/get", json!({ "taskId": operation_id }))
        }
        Outbound::FetchResult { operation_id } => {
            request(rpc_id, "tasks/result", json!({ "taskId": operation_id }))
        }
        // Always `tasks/cancel`: spec §7 forbids `notifications/cancelled` for tasks.
        Outbound::Cancel { operation_id } => {
            request(rpc_id, "tasks/cancel", json!({ "taskId": operation_id }))
        }
        Outbound::InputResponse {
            operation_id,
            server_request_id,
            reply,
        } => {
            let (action, content) = match reply {
                // ElicitResult.content must be an object; anything else is sent as no content.
                ApprovalReply::Accept { content } => ("accept", content.as_object()),
                ApprovalReply::Decline => ("decline", None),
                ApprovalReply::Cancel => ("cancel", None),
            };
            let mut result = Map::new();
            result.insert("action".into(), Value::from(action));
            if let Some(content) = content {
                result.insert("content".into(), Value::Object(content.clone()));
            }
            // §8: a response belonging to a task MUST carry the related-task `_meta`.
            result.insert("_meta".into(), related_task_meta(operation_id));
            // A response, not a request: the id is the server's, echoed verbatim.
            to_bytes(&json!({"jsonrpc": "2.0", "id": server_request_id, "result": result}))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing helpers

/// A `Task` object (spec §5): see [`parse_task`].
fn task(obj: &Map<String, Value>) -> Result<TaskView, String> {
    parse_task(obj, "ttl", "pollInterval")
}

/// A `CallToolResult` as a [`ResultView`]: the payload is the result without `_meta`, the digest
/// is computed here, and `verified` says whether the content is well formed, not empty (see
/// [`check_call_result`]) and matches any digest the server claimed.
fn result_view(mut result: Map<String, Value>) -> ResultView {
    let meta = result.remove("_meta");
    let related_operation_id = related_task_id(meta.as_ref());
    let payload = Value::Object(result);
    let digest = value_digest(&payload);
    let mut problems = Vec::new();
    let is_error = check_call_result(&payload, meta.as_ref(), &digest, &mut problems);
    result_view_of(payload, is_error, related_operation_id, digest, problems)
}

// ---------------------------------------------------------------------------------------------
// Reply decoding, per request kind

/// A `tools/call` answer, with or without `task`: a task handle, a refusal, an unknown
/// outcome, or the call's own result.
///
/// - An error: refused or unknown by its code and the wording table ([`call_error`]).
/// - `{task}`: the task was created.
/// - A `CallToolResult` carrying an SDK refusal (`isError` "requires task augmentation",
///   "does not support task-augmented invocation", unknown tool): nothing ran, refused
///   ([`refusal_in_result`]). The TS SDK decides augmentation before it runs anything
///   (McpServer checks taskSupport first), the Python SDK in `validate_task_mode` before the
///   tool body; neither is a failed run.
/// - Any other `CallToolResult`, even to a task-augmented call: the server ran the call inline
///   and this is its outcome. A receiver without task support must ignore `task` and process the
///   request normally (spec §3), and rmcp 3.11 does exactly that on a 2025-11-25 session
///   (rmcp-3.11.0/tasks-extension-stdio seq 140/143). Reading it as anything else would let the
///   core look the call up by key, find no task and run it a second time.
/// - Anything else is malformed.
fn decode_call(reply: RpcReply) -> Reply {
    let result = match reply {
        RpcReply::Error { code, message } => return call_error(code, message, &[]),
        RpcReply::Result(result) => result,
    };
    match result.get("task") {
        Some(Value::Object(t)) => match task(t) {
            Ok(view) => Reply::Submitted(view),
            Err(reason) => Reply::Malformed {
                reason: format!("CreateTaskResult: {reason}"),
            },
        },
        Some(v) => Reply::Malformed {
            reason: format!("CreateTaskResult \"task\" is {}", type_name(v)),
        },
        None => match refusal_in_result(&result) {
            Some(reason) => Reply::SubmitRefused { reason },
            None if result.contains_key("content") => Reply::SyncResult(result_view(result)),
            None => Reply::Malformed {
                reason: "tools/call answered with neither a CreateTaskResult nor a CallToolResult"
                    .into(),
            },
        },
    }
}

fn decode_lookup(reply: RpcReply) -> Reply {
    match reply {
        RpcReply::Error {
            code: METHOD_NOT_FOUND,
            ..
        } => Reply::LookupUnsupported,
        RpcReply::Error { code, message } => Reply::Error {
            message: format!("tasks/list {code}: {message}"),
        },
        RpcReply::Result(result) => {
            let Some(tasks) = result.get("tasks").and_then(Value::as_array) else {
                return Reply::Malformed {
                    reason: "ListTasksResult without a \"tasks\" array".into(),
                };
            };
            // A filtered list holds at most one task on one page; more, or a next page, means the
            // server ignored the key filter and the answer proves nothing.
            if result.get("nextCursor").is_some_and(|c| !c.is_null()) {
                return Reply::Malformed {
                    reason: "lookup answered with a paginated list: key filter ignored".into(),
                };
            }
            match tasks.as_slice() {
                [] => Reply::LookupNotFound,
                [Value::Object(t)] => match task(t) {
                    Ok(view) => Reply::LookupFound(view),
                    Err(reason) => Reply::Malformed {
                        reason: format!("tasks[0]: {reason}"),
                    },
                },
                [v] => Reply::Malformed {
                    reason: format!("tasks[0] is {}", type_name(v)),
                },
                many => Reply::Malformed {
                    reason: format!(
                        "lookup by key returned {} tasks: filter ignored",
                        many.len()
                    ),
                },
            }
        }
    }
}

fn decode_poll(reply: RpcReply) -> Reply {
    match reply {
        // Unknown and expired ids share -32602 (spec §9, §12).
        RpcReply::Error { code, message } => task_read_error("tasks/get", code, message),
        RpcReply::Result(result) => match task(&result) {
            Ok(view) => Reply::Status(view),
            Err(reason) => Reply::Malformed {
                reason: format!("GetTaskResult: {reason}"),
            },
        },
    }
}

fn decode_fetch(reply: RpcReply) -> Reply {
    match reply {
        // TS SDK quirk for cancelled tasks: -32603 "Task … has no result stored" (§14). Any other
        // -32603 is an ordinary internal error, which for a failed task is the original
        // request's error: only the exact phrase decides (the spec gives nothing else).
        RpcReply::Error { code, message } if says_no_result_stored(code, &message) => {
            Reply::NoResultStored { message }
        }
        RpcReply::Error {
            code: INVALID_PARAMS,
            message,
        } => task_read_error("tasks/result", INVALID_PARAMS, message),
        RpcReply::Error { code, message } => Reply::ResultIsError { code, message },
        // Python SDK quirk for cancelled tasks: a result holding only the related-task `_meta`.
        RpcReply::Result(result) if result.keys().all(|k| k == "_meta") => Reply::NoResultStored {
            message: "empty result (only _meta): no result stored".into(),
        },
        RpcReply::Result(result) => Reply::Result(result_view(result)),
    }
}

fn decode_cancel(reply: RpcReply) -> Reply {
    match reply {
        RpcReply::Error { code, message } => cancel_error(code, message),
        RpcReply::Result(result) => match task(&result) {
            Ok(view) if view.status == ProtocolStatus::Cancelled => Reply::CancelAcknowledged(view),
            // The receiver must be `cancelled` before replying (§7). Another terminal status means
            // the task had already ended: the cancel did not take.
            Ok(view) if view.status.is_terminal() => Reply::CancelRejectedTerminal {
                message: format!(
                    "cancel answered with terminal status {}",
                    view.status.name()
                ),
            },
            Ok(view) => Reply::Malformed {
                reason: format!(
                    "cancel answered with non-terminal status {}",
                    view.status.name()
                ),
            },
            Err(reason) => Reply::Malformed {
                reason: format!("CancelTaskResult: {reason}"),
            },
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Inbound classification

fn input_request(msg: &Map<String, Value>) -> Inbound {
    let bad = |reason: &str| Inbound::Malformed {
        reason: format!("elicitation/create: {reason}"),
    };
    let id = match msg.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(id @ Value::Number(n)) if n.is_i64() || n.is_u64() => id.clone(),
        _ => return bad("id is not a string or an integer"),
    };
    // From here the request has an id: it gets an answer whatever else is wrong with it.
    let invalid = |message: &str| {
        let answer = ServerAnswer::InvalidParams {
            message: format!("elicitation/create: {message}"),
        };
        Inbound::ServerRequest(ServerRequest {
            id: id.clone(),
            method: "elicitation/create".into(),
            answer,
        })
    };
    let Some(params) = msg.get("params").and_then(Value::as_object) else {
        return invalid("no params object");
    };
    // We declare only form mode; a missing mode is form (older servers, server-everything).
    // Any other mode (URL) is declined: the gate cannot open a browser, and silence would hang
    // the server.
    match params.get("mode") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) if m == "form" => {}
        Some(_) => return Inbound::ServerRequest(server_request(&id, "elicitation/create")),
    }
    let Some(message) = params.get("message").and_then(Value::as_str) else {
        return invalid("no string message");
    };
    let Some(schema) = params.get("requestedSchema").filter(|s| s.is_object()) else {
        return invalid("no requestedSchema object");
    };
    Inbound::InputRequest(InputRequest {
        server_request_id: id,
        related_operation_id: related_task_id(params.get("_meta")),
        message: message.to_string(),
        requested_schema: schema.clone(),
        schema_digest: value_digest(schema),
        raw: Value::Object(msg.clone()),
    })
}

/// What `frame` is, from its JSON (`parsed`).
fn classify_frame(frame: &InFrame, parsed: &Result<Value, String>) -> Inbound {
    let object = parsed.as_ref().ok().and_then(Value::as_object);
    if let Some(msg) = object.filter(|m| {
        !m.contains_key("method") && (m.contains_key("result") || m.contains_key("error"))
    }) {
        return match response_rpc_id(msg, frame) {
            Ok(rpc_id) => Inbound::Response { rpc_id },
            Err(reason) => Inbound::Malformed { reason },
        };
    }
    // An HTTP status reply (202, 404, 429, 503 ...) belongs to its POST, whatever its body.
    if let Some(rpc_id) = frame.request_id.filter(|_| frame.http_status != 200) {
        return Inbound::Response { rpc_id };
    }
    let msg = match (object, parsed) {
        (Some(msg), _) => msg,
        _ if frame.body.iter().all(u8::is_ascii_whitespace) => {
            return Inbound::Ignored {
                what: format!("empty body (HTTP {})", frame.http_status),
            };
        }
        (None, Err(reason)) => {
            return Inbound::Malformed {
                reason: reason.clone(),
            }
        }
        (None, Ok(v)) => {
            return Inbound::Malformed {
                reason: format!("message is {}, not an object", type_name(v)),
            }
        }
    };
    match (
        msg.get("method").and_then(Value::as_str),
        msg.contains_key("id"),
    ) {
        (Some("elicitation/create"), true) => input_request(msg),
        (Some(m), true) => Inbound::ServerRequest(server_request(&msg["id"], m)),
        // Status notifications are advisory (§7): the executor keeps polling, and reads one only
        // to learn that a task it saw cancelled ended after all.
        (Some("notifications/tasks/status"), false) => {
            let params = msg.get("params").and_then(Value::as_object);
            match params
                .ok_or_else(|| "params is not an object".to_string())
                .and_then(task)
            {
                Ok(view) => Inbound::StatusPushed(view),
                Err(reason) => Inbound::Malformed {
                    reason: format!("notifications/tasks/status: {reason}"),
                },
            }
        }
        (Some(m), false) => Inbound::Ignored {
            what: format!("notification {m}"),
        },
        (None, _) => Inbound::Malformed {
            reason: "neither a request, a notification nor a response".into(),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Negotiation

fn parse_tool(i: usize, tool: &Value) -> Result<ToolInfo, String> {
    let obj = tool
        .as_object()
        .ok_or_else(|| format!("tools[{i}] is {}", type_name(tool)))?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("tools[{i}] has no string name"))?;
    let task_support = match obj.get("execution") {
        None | Some(Value::Null) => None,
        Some(Value::Object(exec)) => exec.get("taskSupport"),
        Some(v) => return Err(format!("tool {name}: \"execution\" is {}", type_name(v))),
    };
    let task_support = match task_support.filter(|t| !t.is_null()) {
        None => TaskSupport::Forbidden, // the schema's default
        Some(Value::String(s)) if s == "forbidden" => TaskSupport::Forbidden,
        Some(Value::String(s)) if s == "optional" => TaskSupport::Optional,
        Some(Value::String(s)) if s == "required" => TaskSupport::Required,
        Some(v) => return Err(format!("tool {name}: unknown taskSupport {v}")),
    };
    let sync_upper_bound_ms =
        match obj
            .get("_meta")
            .and_then(|m| m.get(META_SYNC_UPPER_BOUND_MS))
        {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                format!("tool {name}: {META_SYNC_UPPER_BOUND_MS} is not an integer")
            })?),
        };
    Ok(ToolInfo {
        name: name.to_string(),
        task_support,
        sync_upper_bound_ms,
        descriptor_digest: value_digest(tool),
    })
}

impl Adapter for Mcp20251125Adapter {
    fn id(&self) -> AdapterId {
        AdapterId::Mcp20251125
    }

    fn encode_initialize(&self, rpc_id: u64) -> Vec<u8> {
        // Form elicitation is how a task asks for input (§11); without it the server cannot ask.
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": { "elicitation": { "form": {} } },
            "clientInfo": { "name": self.client_name, "version": self.client_version },
        });
        request(rpc_id, "initialize", params)
    }

    fn encode_initialized(&self) -> Option<Vec<u8>> {
        Some(to_bytes(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ))
    }

    fn encode_list_tools(&self, rpc_id: u64, cursor: Option<&str>) -> Vec<u8> {
        let params = match cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        request(rpc_id, "tools/list", params)
    }

    fn decode_initialize(&self, frame: &InFrame) -> Result<ServerCapabilities, ProtocolError> {
        let result = negotiation_result(&self.memo, frame)?;
        // A server that does not speak our version answers with another one (§2): not ours.
        match result.get("protocolVersion").and_then(Value::as_str) {
            Some(PROTOCOL_VERSION) => {}
            Some(v) => {
                return Err(ProtocolError(format!(
                    "server speaks protocol {v}, not {PROTOCOL_VERSION}"
                )))
            }
            None => {
                return Err(ProtocolError(
                    "result without a string protocolVersion".into(),
                ))
            }
        }
        let caps = match result.get("capabilities") {
            Some(c @ Value::Object(_)) => c,
            _ => return Err(ProtocolError("result without a capabilities object".into())),
        };
        Ok(ServerCapabilities {
            protocol_version: PROTOCOL_VERSION.to_string(),
            tasks_tool_call: has_path(caps, &["tasks", "requests", "tools", "call"]),
            tasks_cancel: has_path(caps, &["tasks", "cancel"]),
            tasks_list: has_path(caps, &["tasks", "list"]),
            idempotency_by_key: has_path(caps, &["experimental", EXT_IDEMPOTENCY]),
            idempotency_retention_ms: caps["experimental"][EXT_IDEMPOTENCY]["retentionMs"].as_u64(),
            tools: Default::default(),
        })
    }

    fn decode_list_tools(
        &self,
        frame: &InFrame,
    ) -> Result<(Vec<ToolInfo>, Option<String>), ProtocolError> {
        let result = negotiation_result(&self.memo, frame)?;
        let tools = result
            .get("tools")
            .and_then(Value::as_array)
            .ok_or_else(|| ProtocolError("result without a tools array".into()))?;
        let tools = tools
            .iter()
            .enumerate()
            .map(|(i, t)| parse_tool(i, t))
            .collect::<Result<Vec<_>, _>>();
        let next = match result.get("nextCursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.clone()),
            Some(v) => return Err(ProtocolError(format!("nextCursor is {}", type_name(v)))),
        };
        Ok((tools.map_err(ProtocolError)?, next))
    }

    fn encode(&self, rpc_id: u64, out: &Outbound) -> Vec<u8> {
        encode_outbound(rpc_id, out)
    }

    fn classify(&self, frame: &InFrame) -> Inbound {
        self.memo
            .look(&frame.body, |parsed| classify_frame(frame, parsed))
    }

    fn encode_server_answer(&self, request: &ServerRequest) -> Option<Vec<u8>> {
        Some(server_answer(request))
    }

    fn decode_reply(&self, kind: RequestKind, frame: &InFrame) -> Reply {
        if let Some(reply) = http_status_reply(&self.memo, frame) {
            return reply;
        }
        if kind == RequestKind::InputResponse {
            // Our answer to an elicitation is a response; HTTP says 202 and nothing more is due.
            return match parse_reply(&self.memo, &frame.body) {
                Ok(RpcReply::Error { code, message }) => Reply::Error {
                    message: format!("input response {code}: {message}"),
                },
                _ => Reply::Accepted,
            };
        }
        let reply = match parse_frame_reply(&self.memo, frame) {
            Ok(reply) => reply,
            Err(reason) => {
                return Reply::Malformed {
                    reason: format!("{}: {reason}", kind.name()),
                }
            }
        };
        match kind {
            RequestKind::Submit | RequestKind::SubmitSync => decode_call(reply),
            RequestKind::Lookup => decode_lookup(reply),
            RequestKind::Poll => decode_poll(reply),
            RequestKind::Fetch => decode_fetch(reply),
            RequestKind::Cancel => decode_cancel(reply),
            // Negotiation replies have their own decoders; only their errors fit a `Reply`.
            RequestKind::Initialize | RequestKind::ListTools | RequestKind::InputResponse => {
                match reply {
                    RpcReply::Error { code, message } => Reply::Error {
                        message: format!("{} {code}: {message}", kind.name()),
                    },
                    RpcReply::Result(_) => Reply::Malformed {
                        reason: format!(
                            "{} replies are decoded by decode_initialize / decode_list_tools",
                            kind.name()
                        ),
                    },
                }
            }
        }
    }
}
