//! The MCP tasks extension `io.modelcontextprotocol/tasks` (SEP-2663, the 2026-07-28 era),
//! over JSON-RPC 2.0. Successor of the 2025-11-25 experimental tasks and not wire-compatible with
//! them (`shared/spec/mcp-tasks.md` §15).
//!
//! What differs from [`super::mcp_2025_11_25`], and how this adapter maps it:
//!
//! | extension | neutral |
//! | --- | --- |
//! | the client declares the extension per request in `_meta["io.modelcontextprotocol/clientCapabilities"]`; no `task` param, no `taskSupport` | every tool is [`TaskSupport::Optional`]: the server decides |
//! | `tools/call` answers `resultType: "task"` with flat Task fields (`ttlMs`, `pollIntervalMs`) | [`Reply::Submitted`] |
//! | `tools/call` answers a plain `CallToolResult` (the server chose not to create a task) | [`Reply::SyncResult`], verified like a fetched result |
//! | `-32021` missing required client capability, `-32700`/`-32600`/`-32601`/`-32602` | [`Reply::SubmitRefused`] (nothing ran) |
//! | any other `tools/call` error (rmcp returns a tool's own failure as `-32603`) | [`Reply::SubmitOutcomeUnknown`] |
//! | `tasks/get` inlines `result` / `error` / `inputRequests` | Poll and FetchResult both send `tasks/get` |
//! | `inputRequests` on an `input_required` task | [`Reply::InputRequests`] (poll and fetch) |
//! | `tasks/update {taskId, inputResponses}` with an empty ack | InputResponse is a *request* here: [`Reply::Accepted`] |
//! | `tasks/cancel` answers an empty ack; cancellation is eventually consistent | [`Reply::CancelPending`], never terminal |
//! | `failed` means a JSON-RPC error only; an `isError` tool result ends `completed` | `failed` + `error` → [`Reply::ResultIsError`] |
//! | no `tasks/result`, no `tasks/list` | LookupByKey is still sent as `tasks/list`; `-32601` → [`Reply::LookupUnsupported`] |
//!
//! Every decoder treats server bytes as hostile: no `unwrap` on server data, and anything that
//! does not have the expected shape becomes `Reply::Malformed` with a reason.
//!
//! ## Decisions where neither §15 nor the schema decides
//! - `Outbound::Submit::ttl_ms` is not sent: the extension has no requested ttl. The server's
//!   `ttlMs` is reported back in the [`TaskView`] as usual.
//! - The result payload (and so its digest) is the `CallToolResult` without `_meta` *and without
//!   `resultType`*: the discriminator is framing (a synchronous answer carries it at top level, an
//!   inlined task result may not), so the same tool result digests the same either way. A
//!   `resultType` other than `"complete"` on a result makes it unverified.
//! - A `tools/call` answered `resultType: "input_required"` (a multi-round-trip request, which
//!   toolop does not speak) is refused: the server ran nothing it would not re-run.
//! - A `CreateTaskResult` carrying `result` / `error` / `inputRequests` (the SEP says a client
//!   MUST NOT use them) is still a submission: the fields are ignored, the task is not lost.
//! - `tasks/cancel` answering a Task object instead of the empty ack is still [`Reply::CancelPending`]:
//!   an ack is never a terminal read. A `-32602` is [`Reply::CancelRejectedTerminal`] or
//!   [`Reply::NotFound`] only in the exact words of [`super::wording`]; otherwise
//!   [`Reply::Error`], and the core reads the task.
//! - A task read's `-32602` is [`Reply::NotFound`], except rmcp's complaint about the request's
//!   `_meta` (rmcp-3.11.0 seq 177), which is about the request, not the task: [`Reply::Error`].
//! - A `tasks/update` error is [`Reply::Error`] (including `-32602`, which may mean "unknown task"
//!   as well as "that key is no longer outstanding").
//! - Server-initiated `elicitation/create` requests do not exist in this era (input is inlined);
//!   [`Adapter::classify`] makes them a [`ServerRequest`] that is declined (never a `tasks/update`,
//!   never silence); `ping` gets an empty result, any other server request -32601.
//! - InputResponse frames carry a `request_id` (see [`McpTasksExtAdapter::encode_frame`]).

use super::jsonrpc::{
    call_error, cancel_error, check_call_result, has_path, http_status_reply, negotiation_result,
    parse_error_object, parse_frame_reply, parse_task, refusal_in_result, related_task_id, request,
    response_rpc_id, result_view_of, server_answer, server_request, task_read_error, to_bytes,
    type_name, ParseMemo, RpcReply, METHOD_NOT_FOUND,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::{
    Adapter, ApprovalReply, Inbound, InputRequest, Outbound, ProtocolError, Reply, RequestKind,
    ResultView, ServerCapabilities, ServerRequest, TaskSupport, TaskView, ToolInfo,
    EXT_IDEMPOTENCY, META_IDEMPOTENCY_KEY, META_LOOKUP_KEY, META_SYNC_UPPER_BOUND_MS,
};
use crate::digest::value_digest;
use crate::record::{AdapterId, ProtocolStatus};
use crate::transport::{InFrame, OutFrame};

pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// The revision a server may answer our initialize with and still run the extension, when its
/// capabilities declare it (see [`Adapter::decode_initialize`]).
pub const LEGACY_PROTOCOL_VERSION: &str = "2025-11-25";
/// The extension identifier, under `capabilities.extensions` and the per-request capabilities.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/tasks";
/// `_meta` key of the per-request client capabilities (2026-07-28).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the per-request protocol version (2026-07-28).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

// JSON-RPC error codes this adapter interprets.
/// MCP 2026-07-28: a request needs a client capability the request did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

/// First JSON-RPC id this adapter mints itself for a `tasks/update` when the runner handed it no
/// id (`rpc_id == 0`, which the runner passes for kinds that [`RequestKind::expects_reply`] says
/// need none). Far above anything the runner allocates, below 2^53 (safe for JS servers).
pub const SELF_MINTED_ID_BASE: u64 = 1 << 40;

pub struct McpTasksExtAdapter {
    client_name: String,
    client_version: String,
    /// Next self-minted id (see [`SELF_MINTED_ID_BASE`]).
    minted: AtomicU64,
    /// The revision the server chose at initialize (ours until it answers).
    negotiated: Mutex<&'static str>,
    /// The last classified frame's JSON, for its decode.
    memo: ParseMemo,
}

impl McpTasksExtAdapter {
    pub fn new() -> Self {
        Self::with_client_info("toolop", env!("CARGO_PKG_VERSION"))
    }

    /// The `clientInfo` sent in `initialize`.
    pub fn with_client_info(name: &str, version: &str) -> Self {
        McpTasksExtAdapter {
            client_name: name.to_string(),
            client_version: version.to_string(),
            minted: AtomicU64::new(SELF_MINTED_ID_BASE),
            negotiated: Mutex::new(PROTOCOL_VERSION),
            memo: ParseMemo::default(),
        }
    }

    /// The session's protocol revision, for the per-request `_meta`.
    fn version(&self) -> &'static str {
        *self.negotiated.lock().expect("negotiated lock")
    }
}

impl Default for McpTasksExtAdapter {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// The per-request `_meta` of 2026-07-28: protocol version and client capabilities. With
/// `tasks`, the capabilities declare the extension (the server may then answer with a task).
/// `version` is the session's: rmcp refuses a request whose `_meta` version differs from its
/// `MCP-Protocol-Version` header (-32020), and that header carries the negotiated revision.
fn request_meta(version: &str, tasks: bool) -> Map<String, Value> {
    let caps = if tasks {
        json!({ "extensions": { EXTENSION_ID: {} } })
    } else {
        json!({})
    };
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.into(), Value::from(version));
    meta.insert(META_CLIENT_CAPABILITIES.into(), caps);
    meta
}

/// `tools/call` params. The idempotency key rides in `_meta` either way: a server with
/// [`EXT_IDEMPOTENCY`] deduplicates by it, others ignore it.
fn call_params(version: &str, key: &str, tool: &str, arguments: &Value, tasks: bool) -> Value {
    let mut params = Map::new();
    params.insert("name".into(), Value::from(tool));
    // The schema wants an object; `null` means "no arguments". Any other value is a caller bug
    // that we pass through so the server refuses it visibly rather than guessing here.
    if !arguments.is_null() {
        params.insert("arguments".into(), arguments.clone());
    }
    let mut meta = request_meta(version, tasks);
    meta.insert(META_IDEMPOTENCY_KEY.into(), Value::from(key));
    params.insert("_meta".into(), Value::Object(meta));
    Value::Object(params)
}

/// `{taskId, _meta}` params of the `tasks/*` requests.
fn task_params(version: &str, operation_id: &str) -> Value {
    json!({ "taskId": operation_id, "_meta": request_meta(version, true) })
}

/// The `inputResponses` key for a server request id: the extension keys input requests by
/// string; a non-string id (never produced by [`decode_input_requests`]) is sent as its JSON text.
fn input_key(server_request_id: &Value) -> String {
    match server_request_id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An `ElicitResult`: `{action, content?}`.
fn elicit_result(reply: &ApprovalReply) -> Value {
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
    Value::Object(result)
}

fn encode_outbound(version: &str, rpc_id: u64, out: &Outbound) -> Vec<u8> {
    match out {
        // No requested ttl in the extension (module docs).
        Outbound::Submit {
            key,
            tool,
            arguments,
            ttl_ms: _,
        } => request(
            rpc_id,
            "tools/call",
            call_params(version, key, tool, arguments, true),
        ),
        Outbound::SubmitSync {
            key,
            tool,
            arguments,
        } => request(
            rpc_id,
            "tools/call",
            call_params(version, key, tool, arguments, false),
        ),
        // The extension removed tasks/list; a server that still answers it with the lookup-key
        // filter is used, one that does not says -32601 (→ LookupUnsupported).
        Outbound::LookupByKey { key } => {
            let mut meta = request_meta(version, true);
            meta.insert(META_LOOKUP_KEY.into(), Value::from(key.as_str()));
            request(rpc_id, "tasks/list", json!({ "_meta": meta }))
        }
        Outbound::Poll { operation_id } | Outbound::FetchResult { operation_id } => {
            request(rpc_id, "tasks/get", task_params(version, operation_id))
        }
        Outbound::Cancel { operation_id } => {
            request(rpc_id, "tasks/cancel", task_params(version, operation_id))
        }
        Outbound::InputResponse {
            operation_id,
            server_request_id,
            reply,
        } => {
            let mut responses = Map::new();
            responses.insert(input_key(server_request_id), elicit_result(reply));
            let params = json!({
                "taskId": operation_id,
                "inputResponses": responses,
                "_meta": request_meta(version, true),
            });
            request(rpc_id, "tasks/update", params)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing helpers (the small ones copied from the 2025-11-25 adapter)

/// The flat Task fields of a `CreateTaskResult` or `GetTaskResult` (see [`parse_task`]);
/// `ttlMs` `null` means unlimited, its absence is tolerated as unlimited.
fn task(obj: &Map<String, Value>) -> Result<TaskView, String> {
    parse_task(obj, "ttlMs", "pollIntervalMs")
}

/// `resultType` of a result: absent means `"complete"` (results from earlier versions).
fn result_type(obj: &Map<String, Value>) -> Result<&str, String> {
    match obj.get("resultType") {
        None | Some(Value::Null) => Ok("complete"),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(format!("\"resultType\" is {}, not a string", type_name(v))),
    }
}

/// A `CallToolResult` as a [`ResultView`]: the payload is the result without `_meta` and
/// `resultType`, the digest is computed here, and `verified` says whether the content is well
/// formed and matches any digest the server claimed. `task_id` is the task the result was
/// inlined in (its owner), if any; a related-task `_meta` naming another task is a problem.
fn result_view(mut result: Map<String, Value>, task_id: Option<&str>) -> ResultView {
    let meta = result.remove("_meta");
    let mut problems = Vec::new();
    match result.remove("resultType") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t == "complete" => {}
        Some(other) => problems.push(format!("result has resultType {other}, not \"complete\"")),
    }
    let claimed_owner = related_task_id(meta.as_ref());
    let related_operation_id = match (task_id, claimed_owner) {
        (Some(owner), Some(claimed)) if claimed != owner => {
            problems.push(format!(
                "result of task {owner} claims to belong to task {claimed}"
            ));
            Some(owner.to_string())
        }
        (Some(owner), _) => Some(owner.to_string()),
        (None, claimed) => claimed,
    };
    let payload = Value::Object(result);
    let digest = value_digest(&payload);
    let is_error = check_call_result(&payload, meta.as_ref(), &digest, &mut problems);
    result_view_of(payload, is_error, related_operation_id, digest, problems)
}

/// One `inputRequests` entry as an [`InputRequest`]. Only form elicitation is supported (the
/// only input capability toolop declares).
fn input_request(task_id: &str, key: &str, entry: &Value) -> Result<InputRequest, String> {
    let bad = |reason: &str| Err(format!("inputRequests[{key:?}]: {reason}"));
    let Some(obj) = entry.as_object() else {
        return bad(&format!("is {}, not an object", type_name(entry)));
    };
    match obj.get("method").and_then(Value::as_str) {
        Some("elicitation/create") => {}
        Some(m) => return bad(&format!("unsupported method {m}")),
        None => return bad("no string method"),
    }
    let Some(params) = obj.get("params").and_then(Value::as_object) else {
        return bad("no params object");
    };
    // A missing mode is form.
    match params.get("mode") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) if m == "form" => {}
        Some(m) => return bad(&format!("unsupported mode {m}")),
    }
    let Some(message) = params.get("message").and_then(Value::as_str) else {
        return bad("no string message");
    };
    let Some(schema) = params.get("requestedSchema").filter(|s| s.is_object()) else {
        return bad("no requestedSchema object");
    };
    Ok(InputRequest {
        server_request_id: Value::String(key.to_string()),
        related_operation_id: Some(task_id.to_string()),
        message: message.to_string(),
        requested_schema: schema.clone(),
        schema_digest: value_digest(schema),
        raw: entry.clone(),
    })
}

/// The `inputRequests` of an `input_required` task read, in key order; `None` when the task
/// carries none (or an empty map): then it is a plain status.
fn decode_input_requests(
    task_id: &str,
    task: &Map<String, Value>,
) -> Option<Result<Vec<InputRequest>, String>> {
    match task.get("inputRequests") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(Value::Object(m)) => Some(
            m.iter()
                .map(|(k, v)| input_request(task_id, k, v))
                .collect(),
        ),
        Some(v) => Some(Err(format!(
            "\"inputRequests\" is {}, not an object",
            type_name(v)
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// Reply decoding, per request kind

/// A `tools/call` answer: a task handle, a plain result, or a refusal.
fn decode_call(reply: RpcReply) -> Reply {
    let result = match reply {
        // -32021 (missing required client capability) is checked before dispatch: refused.
        RpcReply::Error { code, message } => {
            return call_error(code, message, &[MISSING_REQUIRED_CLIENT_CAPABILITY])
        }
        RpcReply::Result(result) => result,
    };
    let kind = match result_type(&result) {
        Ok(kind) => kind,
        Err(reason) => {
            return Reply::Malformed {
                reason: format!("tools/call: {reason}"),
            }
        }
    };
    match kind {
        // `result` / `error` / `inputRequests` on a CreateTaskResult are ignored (module docs).
        "task" => match task(&result) {
            Ok(view) => Reply::Submitted(view),
            Err(reason) => Reply::Malformed { reason: format!("CreateTaskResult: {reason}") },
        },
        // The server chose not to create a task: this is the tool's result, unless it is one of
        // the SDKs' refusals sent as a tool result (nothing ran).
        "complete" => match refusal_in_result(&result) {
            Some(reason) => Reply::SubmitRefused { reason },
            None => Reply::SyncResult(result_view(result, None)),
        },
        "input_required" => Reply::SubmitRefused {
            reason: "the server asked for input before running the call (multi round-trip request, unsupported)".into(),
        },
        other => Reply::Malformed { reason: format!("tools/call answered with unknown resultType {other:?}") },
    }
}

fn decode_lookup(reply: RpcReply) -> Reply {
    match reply {
        // The extension has no tasks/list: the expected answer.
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
                    reason: "tasks/list result without a \"tasks\" array".into(),
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

/// A `tasks/get` result: the task, checked to be a `GetTaskResult`.
fn task_read(result: &Map<String, Value>) -> Result<TaskView, String> {
    match result_type(result)? {
        "complete" => {}
        other => return Err(format!("resultType {other:?}, expected \"complete\"")),
    }
    task(result)
}

/// Inlined input requests of an `input_required` read, if any.
fn input_required_reply(view: &TaskView, result: &Map<String, Value>) -> Option<Reply> {
    if view.status != ProtocolStatus::InputRequired {
        return None;
    }
    Some(match decode_input_requests(&view.operation_id, result)? {
        Ok(requests) => Reply::InputRequests(requests),
        Err(reason) => Reply::Malformed {
            reason: format!("GetTaskResult: {reason}"),
        },
    })
}

fn decode_poll(reply: RpcReply) -> Reply {
    match reply {
        RpcReply::Error { code, message } => task_read_error("tasks/get", code, message),
        RpcReply::Result(result) => match task_read(&result) {
            Ok(view) => input_required_reply(&view, &result).unwrap_or(Reply::Status(view)),
            Err(reason) => Reply::Malformed {
                reason: format!("GetTaskResult: {reason}"),
            },
        },
    }
}

fn decode_fetch(reply: RpcReply) -> Reply {
    let mut result = match reply {
        RpcReply::Error { code, message } => return task_read_error("tasks/get", code, message),
        RpcReply::Result(result) => result,
    };
    let view = match task_read(&result) {
        Ok(view) => view,
        Err(reason) => {
            return Reply::Malformed {
                reason: format!("GetTaskResult: {reason}"),
            }
        }
    };
    match view.status {
        ProtocolStatus::Completed => match result.remove("result") {
            Some(Value::Object(inner)) => {
                Reply::Result(result_view(inner, Some(&view.operation_id)))
            }
            Some(v) => Reply::Malformed {
                reason: format!("completed task: \"result\" is {}", type_name(&v)),
            },
            None => Reply::Malformed {
                reason: "completed task without an inlined \"result\"".into(),
            },
        },
        // `failed` is a JSON-RPC error only; the error is the original request's.
        ProtocolStatus::Failed => match result.get("error") {
            Some(Value::Object(err)) => match parse_error_object(err) {
                Ok((code, message)) => Reply::ResultIsError { code, message },
                Err(reason) => Reply::Malformed {
                    reason: format!("failed task: {reason}"),
                },
            },
            Some(v) => Reply::Malformed {
                reason: format!("failed task: \"error\" is {}", type_name(v)),
            },
            None => Reply::Malformed {
                reason: "failed task without an inlined \"error\"".into(),
            },
        },
        ProtocolStatus::Cancelled => Reply::NoResultStored {
            message: view
                .status_message
                .clone()
                .unwrap_or_else(|| "task cancelled: no result".into()),
        },
        _ => input_required_reply(&view, &result).unwrap_or(Reply::Status(view)),
    }
}

fn decode_cancel(reply: RpcReply) -> Reply {
    match reply {
        RpcReply::Error { code, message } => cancel_error(code, message),
        // An empty ack (or anything else the server put in it) says nothing about the outcome:
        // cancellation is eventually consistent and may end in any terminal status.
        RpcReply::Result(_) => Reply::CancelPending,
    }
}

fn decode_update(reply: RpcReply) -> Reply {
    match reply {
        RpcReply::Error { code, message } => Reply::Error {
            message: format!("tasks/update {code}: {message}"),
        },
        RpcReply::Result(_) => Reply::Accepted,
    }
}

// ---------------------------------------------------------------------------------------------
// Inbound classification

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
        // Input is inlined in task reads in this era: a server request is answered on its own
        // (`ping` empty, an elicitation declined, anything else -32601), never left waiting.
        (Some(m), true) => Inbound::ServerRequest(server_request(&msg["id"], m)),
        // Task notifications are advisory: the executor keeps polling.
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

/// A tool descriptor. There is no `taskSupport` handshake in the extension: every tool is
/// optional and the server decides per request (an `execution` member is ignored).
fn parse_tool(i: usize, tool: &Value) -> Result<ToolInfo, String> {
    let obj = tool
        .as_object()
        .ok_or_else(|| format!("tools[{i}] is {}", type_name(tool)))?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("tools[{i}] has no string name"))?;
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
        task_support: TaskSupport::Optional,
        sync_upper_bound_ms,
        descriptor_digest: value_digest(tool),
    })
}

impl Adapter for McpTasksExtAdapter {
    fn id(&self) -> AdapterId {
        AdapterId::McpTasksExt
    }

    fn encode_initialize(&self, rpc_id: u64) -> Vec<u8> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": { "elicitation": { "form": {} }, "extensions": { EXTENSION_ID: {} } },
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
        let mut params = Map::new();
        if let Some(c) = cursor {
            params.insert("cursor".into(), Value::from(c));
        }
        params.insert(
            "_meta".into(),
            Value::Object(request_meta(self.version(), true)),
        );
        request(rpc_id, "tools/list", Value::Object(params))
    }

    fn decode_initialize(&self, frame: &InFrame) -> Result<ServerCapabilities, ProtocolError> {
        let result = negotiation_result(&self.memo, frame)?;
        let caps = match result.get("capabilities") {
            Some(c @ Value::Object(_)) => c,
            _ => return Err(ProtocolError("result without a capabilities object".into())),
        };
        let tasks = has_path(caps, &["extensions", EXTENSION_ID]);
        let version: &'static str = match result.get("protocolVersion").and_then(Value::as_str) {
            Some(PROTOCOL_VERSION) => PROTOCOL_VERSION,
            // The server chose an older revision (MCP lifecycle: the client may go on if it
            // speaks it). Extensions are negotiated by capability, not by version: a
            // 2025-11-25 session that declares the extension runs it, and this adapter's
            // per-request `_meta` is what such a server reads (rmcp 3.11.0 answers our
            // 2026-07-28 initialize this way; transcript seq 3, `tests/peers/rmcp/README.md`).
            Some(LEGACY_PROTOCOL_VERSION) if tasks => LEGACY_PROTOCOL_VERSION,
            Some(v @ LEGACY_PROTOCOL_VERSION) => {
                return Err(ProtocolError(format!(
                    "server speaks protocol {v} without the {EXTENSION_ID} extension: \
                     use --protocol mcp-2025-11-25"
                )))
            }
            Some(v) => {
                return Err(ProtocolError(format!(
                "server speaks protocol {v}, not {PROTOCOL_VERSION} or {LEGACY_PROTOCOL_VERSION} \
                     with the {EXTENSION_ID} extension"
            )))
            }
            None => {
                return Err(ProtocolError(
                    "result without a string protocolVersion".into(),
                ))
            }
        };
        *self.negotiated.lock().expect("negotiated lock") = version;
        Ok(ServerCapabilities {
            protocol_version: version.to_string(),
            tasks_tool_call: tasks,
            tasks_cancel: tasks,
            // Removed by the extension.
            tasks_list: false,
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
        encode_outbound(self.version(), rpc_id, out)
    }

    /// Like the default, except that an InputResponse is a `tasks/update` *request* here, whose
    /// ack is awaited: its frame carries `request_id: Some(rpc_id)` so the runner registers a
    /// pending reply. The runner allocates no id for kinds that [`RequestKind::expects_reply`]
    /// calls reply-less and passes `0`; then the adapter mints one above [`SELF_MINTED_ID_BASE`]
    /// so two updates in flight never share an id.
    fn encode_frame(&self, rpc_id: u64, out: &Outbound) -> OutFrame {
        let rpc_id = match out {
            Outbound::InputResponse { .. } if rpc_id == 0 => {
                self.minted.fetch_add(1, Ordering::Relaxed)
            }
            _ => rpc_id,
        };
        let request_id = match out {
            Outbound::InputResponse { .. } => Some(rpc_id),
            _ => out.kind().expects_reply().then_some(rpc_id),
        };
        OutFrame {
            request_id,
            body: self.encode(rpc_id, out),
            http: None,
        }
    }

    /// `tasks/get` both polls and carries the result inline (`Poll` and `FetchResult` share a
    /// frame; there is no `tasks/result`).
    fn fetch_is_status_read(&self) -> bool {
        true
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
            RequestKind::InputResponse => decode_update(reply),
            // Negotiation replies have their own decoders; only their errors fit a `Reply`.
            RequestKind::Initialize | RequestKind::ListTools => match reply {
                RpcReply::Error { code, message } => Reply::Error {
                    message: format!("{} {code}: {message}", kind.name()),
                },
                RpcReply::Result(_) => Reply::Malformed {
                    reason: format!(
                        "{} replies are decoded by decode_initialize / decode_list_tools",
                        kind.name()
                    ),
                },
            },
        }
    }
}
