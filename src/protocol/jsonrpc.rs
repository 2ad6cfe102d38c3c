//! JSON-RPC 2.0 pieces both MCP adapters read and write the same way (2025-11-25 tasks and the
//! tasks extension): framing, error codes, the Task status spelling, field readers with
//! precise error texts, and content-block verification. What differs between the two
//! versions stays in each adapter.

use serde_json::{json, Map, Value};

use super::{ProtocolError, Reply};
use crate::record::ProtocolStatus;
use crate::transport::InFrame;

pub(super) const INVALID_PARAMS: i64 = -32602;

pub(super) const METHOD_NOT_FOUND: i64 = -32601;

/// `_meta` key tying a message to a task (spec §8).
pub(super) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Why a content block is not well formed, if it is not. Checks the required fields of the five
/// `ContentBlock` kinds of the schema.
pub(super) fn content_block_problem(i: usize, block: &Value) -> Option<String> {
    let Some(obj) = block.as_object() else {
        return Some(format!("content[{i}] is {}, not an object", type_name(block)));
    };
    let Some(kind) = obj.get("type").and_then(Value::as_str) else {
        return Some(format!("content[{i}] has no string \"type\""));
    };
    let required: &[&str] = match kind {
        "text" => &["text"],
        "image" | "audio" => &["data", "mimeType"],
        "resource_link" => &["uri", "name"],
        "resource" => {
            return match obj.get("resource") {
                Some(Value::Object(_)) => None,
                _ => Some(format!("content[{i}] (resource) has no \"resource\" object")),
            };
        }
        other => return Some(format!("content[{i}] has unknown type {other:?}")),
    };
    let missing = required.iter().find(|k| !obj.get(**k).is_some_and(Value::is_string))?;
    Some(format!("content[{i}] ({kind}) has no string \"{missing}\""))
}

/// Capability leaves are empty objects; presence means support (spec §3).
pub(super) fn has_path(v: &Value, path: &[&str]) -> bool {
    path.iter().try_fold(v, |v, k| v.get(k)).is_some_and(Value::is_object)
}

/// An optional field: absent and `null` are both `None`, a present value must convert.
pub(super) fn opt_field<T>(
    obj: &Map<String, Value>,
    key: &str,
    what: &str,
    conv: impl Fn(&Value) -> Option<T>,
) -> Result<Option<T>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => conv(v).map(Some).ok_or_else(|| format!("task \"{key}\" is {}, expected {what}", type_name(v))),
    }
}

pub(super) fn parse_json(body: &[u8]) -> Result<Value, String> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err("empty body".into());
    }
    serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))
}

pub(super) fn related_task_id(meta: Option<&Value>) -> Option<String> {
    meta?.get(RELATED_TASK)?.get("taskId")?.as_str().map(str::to_string)
}

pub(super) fn request(rpc_id: u64, method: &str, params: Value) -> Vec<u8> {
    to_bytes(&json!({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}))
}

pub(super) fn required_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(format!("task \"{key}\" is {}, expected a string", type_name(v))),
        None => Err(format!("task has no \"{key}\"")),
    }
}

/// `-32602` on `tasks/cancel` means either "unknown id" or "already terminal" (spec §9): the spec
/// defines no distinct codes, so the message text is all there is (§12). Both SDK spellings are
/// covered: TS "Cannot cancel task in terminal status: completed", Python "Cannot cancel task in
/// terminal state 'completed'", and the spec's example "task … is already cancelled".
pub(super) fn says_terminal(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("terminal") || m.contains("cannot cancel") || m.contains("already")
}

pub(super) fn to_bytes(v: &Value) -> Vec<u8> {
    // Serialising a Value cannot fail (string keys only, no custom Serialize).
    serde_json::to_vec(v).expect("Value serialises")
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Wire status → protocol-neutral status. The only place the wire spelling is read.
pub(super) fn wire_status(s: &str) -> Option<ProtocolStatus> {
    Some(match s {
        "working" => ProtocolStatus::Working,
        "input_required" => ProtocolStatus::InputRequired,
        "completed" => ProtocolStatus::Completed,
        "failed" => ProtocolStatus::Failed,
        "cancelled" => ProtocolStatus::Cancelled,
        _ => return None,
    })
}

/// A JSON-RPC response body, reduced to what the decoders need.
pub(super) enum RpcReply {
    Result(Map<String, Value>),
    Error { code: i64, message: String },
}

/// A JSON-RPC error object: `(code, message)`.
pub(super) fn parse_error_object(err: &Map<String, Value>) -> Result<(i64, String), String> {
    let code = err.get("code").and_then(Value::as_i64).ok_or("error without an integer \"code\"")?;
    let message = err.get("message").and_then(Value::as_str).ok_or("error without a string \"message\"")?;
    Ok((code, message.to_string()))
}

pub(super) fn parse_reply(body: &[u8]) -> Result<RpcReply, String> {
    parse_reply_to(body, None)
}

/// The reply in `frame`, which the transport tied to our request `frame.request_id`. Over HTTP a
/// POST's response answers that POST: a body whose id names another of our requests is a broken
/// reply (a server or proxy fault), never a reason to believe it answers the other request.
pub(super) fn parse_frame_reply(frame: &InFrame) -> Result<RpcReply, String> {
    parse_reply_to(&frame.body, frame.request_id)
}

fn parse_reply_to(body: &[u8], transport_id: Option<u64>) -> Result<RpcReply, String> {
    let v = parse_json(body)?;
    let Value::Object(mut obj) = v else {
        return Err(format!("JSON-RPC message is not an object but {}", type_name(&v)));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("missing or wrong \"jsonrpc\": \"2.0\"".into());
    }
    if let (Some(t), Some(b)) = (transport_id, obj.get("id").and_then(Value::as_u64)) {
        if t != b {
            return Err(format!("the reply's body names request {b}, but it is the response to request {t}"));
        }
    }
    match (obj.remove("result"), obj.remove("error")) {
        (Some(Value::Object(result)), None) => Ok(RpcReply::Result(result)),
        (Some(other), None) => Err(format!("\"result\" is {}, not an object", type_name(&other))),
        (None, Some(Value::Object(err))) => {
            let (code, message) = parse_error_object(&err)?;
            Ok(RpcReply::Error { code, message })
        }
        (None, Some(other)) => Err(format!("\"error\" is {}, not an object", type_name(&other))),
        (Some(_), Some(_)) => Err("response has both \"result\" and \"error\"".into()),
        (None, None) => Err(match obj.get("method").and_then(Value::as_str) {
            Some(m) => format!("expected a response, got a {m} message"),
            None => "response has neither \"result\" nor \"error\"".into(),
        }),
    }
}

pub(super) fn http_status_reply(frame: &InFrame) -> Option<Reply> {
    let detail = || match parse_reply(&frame.body) {
        Ok(RpcReply::Error { code, message }) => format!(" (server said {code}: {message})"),
        _ => String::new(),
    };
    match frame.http_status {
        200 => None,
        429 => Some(Reply::RateLimited { retry_after_ms: frame.retry_after_ms }),
        503 => Some(Reply::Unavailable { retry_after_ms: frame.retry_after_ms }),
        // Accepted for processing; the answer (if any) comes later. Never a completion.
        202 => Some(Reply::Accepted),
        404 => Some(Reply::Error { message: format!("HTTP 404: session gone, re-initialize{}", detail()) }),
        s => Some(Reply::Error { message: format!("HTTP {s}{}", detail()) }),
    }
}

pub(super) fn negotiation_result(frame: &InFrame, what: &str) -> Result<Map<String, Value>, ProtocolError> {
    if frame.http_status != 200 {
        return Err(ProtocolError(format!("{what}: HTTP {}", frame.http_status)));
    }
    match parse_reply(&frame.body) {
        Ok(RpcReply::Result(result)) => Ok(result),
        Ok(RpcReply::Error { code, message }) => Err(ProtocolError(format!("{what} refused: {code}: {message}"))),
        Err(reason) => Err(ProtocolError(format!("{what}: {reason}"))),
    }
}
