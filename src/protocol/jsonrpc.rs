//! JSON-RPC 2.0 pieces both MCP adapters read and write the same way (2025-11-25 tasks and the
//! tasks extension): framing, error codes, the Task status spelling, field readers with
//! precise error texts, and content-block verification. What differs between the two
//! versions stays in each adapter.

use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::wording::{self, Meaning};
use super::{ProtocolError, Reply, ResultView, TaskView};
use crate::record::ProtocolStatus;
use crate::transport::InFrame;

pub(super) const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const INVALID_PARAMS: i64 = -32602;

/// `_meta` key tying a message to a task (spec §8).
pub(super) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Why a content block is not well formed, if it is not. Checks the required fields of the five
/// `ContentBlock` kinds of the schema.
pub(super) fn content_block_problem(i: usize, block: &Value) -> Option<String> {
    let Some(obj) = block.as_object() else {
        return Some(format!(
            "content[{i}] is {}, not an object",
            type_name(block)
        ));
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
                _ => Some(format!(
                    "content[{i}] (resource) has no \"resource\" object"
                )),
            };
        }
        other => return Some(format!("content[{i}] has unknown type {other:?}")),
    };
    let missing = required
        .iter()
        .find(|k| !obj.get(**k).is_some_and(Value::is_string))?;
    Some(format!("content[{i}] ({kind}) has no string \"{missing}\""))
}

/// Capability leaves are empty objects; presence means support (spec §3).
pub(super) fn has_path(v: &Value, path: &[&str]) -> bool {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .is_some_and(Value::is_object)
}

/// The largest integer an IEEE double holds exactly: beyond it `60000.0`-style values are not
/// read as integers.
const F64_EXACT_MAX: f64 = 9_007_199_254_740_992.0;

/// An advisory millisecond field of a Task (`ttl`, `pollInterval`, `ttlMs`, `pollIntervalMs`).
/// Absent and `null` are `None`. A bad value never costs the task (the id and status are what
/// matter): a whole number written as a float (`60000.0`, as a JSON number it is the same value)
/// is read as that integer, anything else (`-1`, `333.3`, `"60s"`) is ignored; either way the
/// problem is pushed so the runner can report it.
pub(super) fn advisory_ms(
    obj: &Map<String, Value>,
    key: &str,
    problems: &mut Vec<String>,
) -> Option<u64> {
    let v = match obj.get(key) {
        None | Some(Value::Null) => return None,
        Some(v) => v,
    };
    if let Some(ms) = v.as_u64() {
        return Some(ms);
    }
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..=F64_EXACT_MAX).contains(&f) => {
            // Exact: a whole number within 2^53.
            let ms = f as u64;
            problems.push(format!(
                "\"{key}\" {v} is not an integer literal: read as {ms}"
            ));
            Some(ms)
        }
        _ => {
            problems.push(format!(
                "\"{key}\" is {} {}, not a non-negative integer: ignored",
                type_name(v),
                short(v)
            ));
            None
        }
    }
}

/// An advisory text field (`statusMessage`): a non-string is ignored and named.
pub(super) fn advisory_text(
    obj: &Map<String, Value>,
    key: &str,
    problems: &mut Vec<String>,
) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            problems.push(format!(
                "\"{key}\" is {} {}, not a string: ignored",
                type_name(v),
                short(v)
            ));
            None
        }
    }
}

/// A value as JSON text, cut to a length that fits a trace line.
fn short(v: &Value) -> String {
    const MAX_CHARS: usize = 40;
    let text = v.to_string();
    if text.chars().count() <= MAX_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_CHARS).collect();
    format!("{cut}...")
}

/// A Task object (2025-11-25 §5, or the extension's flat fields). `taskId` and `status` are
/// what the executor acts on and must be right, or the reply is malformed. The rest is
/// advisory (`ttl_key`, `poll_key`, `statusMessage`): a bad value is dropped and named in
/// `hint_problem`, never a reason to lose a task that was created. `createdAt`/`lastUpdatedAt`
/// are required by the schema but unused here, so their absence is tolerated; so is a missing
/// ttl (the Python SDK omits it, §14).
pub(super) fn parse_task(
    obj: &Map<String, Value>,
    ttl_key: &str,
    poll_key: &str,
) -> Result<TaskView, String> {
    let operation_id = required_str(obj, "taskId")?;
    if operation_id.is_empty() {
        return Err("task \"taskId\" is empty".into());
    }
    let status = required_str(obj, "status")?;
    let status = wire_status(status).ok_or_else(|| format!("unknown task status {status:?}"))?;
    let mut problems = Vec::new();
    let poll_interval_ms = advisory_ms(obj, poll_key, &mut problems);
    let ttl_ms = advisory_ms(obj, ttl_key, &mut problems);
    let status_message = advisory_text(obj, "statusMessage", &mut problems);
    let hint_problem = (!problems.is_empty()).then(|| problems.join("; "));
    Ok(TaskView {
        operation_id: operation_id.to_string(),
        status,
        poll_interval_ms,
        ttl_ms,
        status_message,
        hint_problem,
    })
}

/// The JSON of the last frame classified, kept for the decode that follows: the runner
/// classifies every frame (is it a reply, and to which request?) and then decodes a reply from
/// the same bytes, and parsing each reply twice was a fifth of the executor's adapter time.
/// Every decode of a frame reads through it ([`parse_reply`], [`parse_frame_reply`]): an
/// ordinary reply, an error status's detail, the answer to an input response, a handshake.
/// Taken by bytes, never by position: a decode of other bytes parses them afresh, so the memo
/// never changes what a frame decodes to. A mutex, not a cell, so adapters stay `Sync`.
#[derive(Debug, Default)]
pub(super) struct ParseMemo {
    kept: Mutex<Option<(Vec<u8>, Value)>>,
    /// Parses `take` made afresh: the memo is an optimisation only, and the tests show it works.
    #[cfg(test)]
    fresh: std::sync::atomic::AtomicU32,
}

impl ParseMemo {
    /// `body` parsed, handed to `look`; the JSON is kept for a [`ParseMemo::take`] of the same
    /// bytes.
    pub(super) fn look<R>(&self, body: &[u8], look: impl FnOnce(&Result<Value, String>) -> R) -> R {
        let parsed = parse_json(body);
        let seen = look(&parsed);
        *self.slot() = parsed.ok().map(|v| (body.to_vec(), v));
        seen
    }

    /// `body` parsed: the JSON a look at the same bytes kept, or a fresh parse.
    pub(super) fn take(&self, body: &[u8]) -> Result<Value, String> {
        match self.slot().take() {
            Some((kept, v)) if kept == body => Ok(v),
            _ => {
                #[cfg(test)]
                self.fresh
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                parse_json(body)
            }
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Vec<u8>, Value)>> {
        // A panic elsewhere while the memo was held leaves nothing half-written: a kept parse
        // is whole or absent.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub(super) fn parse_json(body: &[u8]) -> Result<Value, String> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err("empty body".into());
    }
    serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))
}

pub(super) fn related_task_id(meta: Option<&Value>) -> Option<String> {
    meta?
        .get(RELATED_TASK)?
        .get("taskId")?
        .as_str()
        .map(str::to_string)
}

pub(super) fn request(rpc_id: u64, method: &str, params: Value) -> Vec<u8> {
    to_bytes(&json!({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}))
}

pub(super) fn required_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(format!(
            "task \"{key}\" is {}, expected a string",
            type_name(v)
        )),
        None => Err(format!("task has no \"{key}\"")),
    }
}

pub(super) fn to_bytes(v: &Value) -> Vec<u8> {
    // Serialising a Value cannot fail (string keys only, no custom Serialize).
    serde_json::to_vec(v).expect("Value serialises")
}

pub(crate) fn type_name(v: &Value) -> &'static str {
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
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(super) enum RpcReply {
    Result(Map<String, Value>),
    Error { code: i64, message: String },
}

/// A JSON-RPC error object: `(code, message)`.
pub(super) fn parse_error_object(err: &Map<String, Value>) -> Result<(i64, String), String> {
    let code = err
        .get("code")
        .and_then(Value::as_i64)
        .ok_or("error without an integer \"code\"")?;
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .ok_or("error without a string \"message\"")?;
    Ok((code, message.to_string()))
}

/// The reply in `body`, read through `memo`: where the frame's classification may have kept its
/// JSON (other bytes are parsed afresh).
pub(super) fn parse_reply(memo: &ParseMemo, body: &[u8]) -> Result<RpcReply, String> {
    parse_reply_to(memo.take(body), None)
}

/// The reply in `frame`, which the transport tied to our request `frame.request_id`. Over HTTP a
/// POST's response answers that POST: a body whose id names another of our requests is a broken
/// reply (a server or proxy fault), never a reason to believe it answers the other request.
/// `memo`: where the frame's classification may have kept its JSON.
pub(super) fn parse_frame_reply(memo: &ParseMemo, frame: &InFrame) -> Result<RpcReply, String> {
    parse_reply_to(memo.take(&frame.body), frame.request_id)
}

fn parse_reply_to(
    parsed: Result<Value, String>,
    transport_id: Option<u64>,
) -> Result<RpcReply, String> {
    let v = parsed?;
    let Value::Object(mut obj) = v else {
        return Err(format!(
            "JSON-RPC message is not an object but {}",
            type_name(&v)
        ));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("missing or wrong \"jsonrpc\": \"2.0\"".into());
    }
    if let (Some(t), Some(b)) = (transport_id, obj.get("id").and_then(Value::as_u64)) {
        if t != b {
            return Err(format!(
                "the reply's body names request {b}, but it is the response to request {t}"
            ));
        }
    }
    match (obj.remove("result"), obj.remove("error")) {
        (Some(Value::Object(result)), None) => Ok(RpcReply::Result(result)),
        (Some(other), None) => Err(format!(
            "\"result\" is {}, not an object",
            type_name(&other)
        )),
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

/// The request a response answers. The transport's correlation comes first: over HTTP a POST's
/// response answers that POST, whatever id its body names. Decoding then refuses a body that
/// names another request (see [`parse_frame_reply`]), so that exchange ends at once as a broken
/// reply and is retried, instead of waiting for its timeout; it is never taken as the reply to
/// the other request. Without a correlation (stdio, the GET stream) the body's numeric id names
/// it; replies with `id: null` (or the Python SDK's 404 with `"id": "server-error"`) need one.
pub(super) fn response_rpc_id(msg: &Map<String, Value>, frame: &InFrame) -> Result<u64, String> {
    match frame.request_id.or(msg.get("id").and_then(Value::as_u64)) {
        Some(id) => Ok(id),
        None => Err("response without a numeric id".into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Replies whose meaning the code alone does not settle (see `wording`)

/// A JSON-RPC error answering `tools/call`. By its code, `-32700`, `-32600`, `-32601` and
/// `-32602` (and the adapter's `refused_codes`) mean the request was refused before anything ran:
/// parse error, invalid request, method not found (the spec's augmentation-mismatch codes, §3,
/// §9), invalid params (unknown tool, malformed request: server/tools.mdx). Every other code
/// (`-32603`, application codes) does not say whether the tool ran. The wording table overrides
/// the code both ways: the TS SDK's `-32602` "Invalid task creation result" comes after the tool
/// ran (mcp-tasks.md §14), so it is an unknown outcome, never a refusal.
pub(super) fn call_error(code: i64, message: String, refused_codes: &[i64]) -> Reply {
    let refused_by_code = matches!(
        code,
        PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND | INVALID_PARAMS
    ) || refused_codes.contains(&code);
    match wording::error_meaning(code, &message) {
        Some(Meaning::CallRanNoTask) => Reply::SubmitOutcomeUnknown {
            reason: format!("{code}: {message}"),
        },
        Some(Meaning::CallRefused | Meaning::RequestShape) => Reply::SubmitRefused {
            reason: format!("{code}: {message}"),
        },
        _ if refused_by_code => Reply::SubmitRefused {
            reason: format!("{code}: {message}"),
        },
        _ => Reply::SubmitOutcomeUnknown {
            reason: format!(
                "{code}: {message} (an error of this code does not say whether the tool ran)"
            ),
        },
    }
}

/// The refusal an `isError` `CallToolResult` carries instead of a JSON-RPC error, if it is one
/// of the SDKs' refusals (augmentation mismatch, unknown tool: nothing ran). Any other
/// `isError` result is the tool's own outcome.
pub(super) fn refusal_in_result(result: &Map<String, Value>) -> Option<String> {
    if result.get("isError") != Some(&Value::Bool(true)) {
        return None;
    }
    let [block] = result.get("content")?.as_array()?.as_slice() else {
        return None;
    };
    let text = block
        .get("text")
        .and_then(Value::as_str)
        .filter(|_| block.get("type") == Some(&Value::from("text")))?;
    (wording::tool_text_meaning(text) == Some(Meaning::CallRefused)).then(|| text.to_string())
}

/// A JSON-RPC error answering `tasks/cancel`. `-32602` means "unknown task" or "already
/// terminal" (spec §9) and only the wording table tells which; anything else is an `Error`,
/// which the core resolves by reading the task's status.
pub(super) fn cancel_error(code: i64, message: String) -> Reply {
    match wording::error_meaning(code, &message) {
        Some(Meaning::CancelTerminal) => Reply::CancelRejectedTerminal { message },
        Some(Meaning::TaskNotFound) => Reply::NotFound { message },
        _ => Reply::Error {
            message: format!("tasks/cancel {code}: {message}"),
        },
    }
}

/// A JSON-RPC error answering a task read (`tasks/get`, and `tasks/result` before its own
/// cases). `-32602` is "unknown or expired task" by the spec's code (§9: MUST), except the
/// SDKs' complaints about the request's own shape (wording table), which say nothing about it.
pub(super) fn task_read_error(method: &str, code: i64, message: String) -> Reply {
    match (code, wording::error_meaning(code, &message)) {
        (INVALID_PARAMS, Some(Meaning::RequestShape)) => Reply::Error {
            message: format!("{method} {code}: {message}"),
        },
        (INVALID_PARAMS, _) => Reply::NotFound { message },
        _ => Reply::Error {
            message: format!("{method} {code}: {message}"),
        },
    }
}

/// Whether a `-32603` answering `tasks/result` is the TS SDK's "no result stored" (a cancelled
/// task) rather than the failed request's own error.
pub(super) fn says_no_result_stored(code: i64, message: &str) -> bool {
    wording::error_meaning(code, message) == Some(Meaning::NoResultStored)
}

// ---------------------------------------------------------------------------------------------
// Tool results

/// Checks a `CallToolResult` payload (already without `_meta`) and returns its `isError`;
/// problems are pushed. `meta` is the result's `_meta`, for a digest the server claims.
///
/// An *empty* result, `content: []` with no `structuredContent` and no `isError: true`, is not
/// verified unless the server's digest vouches for it. The schema allows an empty `content`
/// array, but nothing in the protocol tells such a result from a result that was never stored:
/// the Python SDK answers `tasks/result` of a cancelled task with a result holding only
/// `_meta` (python-mcp-1.30.0/04-cancel-running seq 22), and a relay built on the TS SDK's
/// types fills a missing `content` with `[]`. Accepting it as "completed, nothing to say" could
/// mislabel a lost result as an empty success, so the core fetches again and then hands the
/// call over rather than guessing.
pub(super) fn check_call_result(
    payload: &Value,
    meta: Option<&Value>,
    digest: &str,
    problems: &mut Vec<String>,
) -> bool {
    let empty_content = match payload.get("content") {
        Some(Value::Array(blocks)) => {
            problems.extend(
                blocks
                    .iter()
                    .enumerate()
                    .filter_map(|(i, b)| content_block_problem(i, b)),
            );
            blocks.is_empty()
        }
        Some(v) => {
            problems.push(format!("\"content\" is {}, not an array", type_name(v)));
            false
        }
        None => {
            problems.push("result has no \"content\"".into());
            false
        }
    };
    let is_error = match payload.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            problems.push(format!("\"isError\" is {}, not a boolean", type_name(v)));
            false
        }
    };
    let vouched = match meta.and_then(|m| m.get(super::META_RESULT_DIGEST)) {
        None => false,
        Some(Value::String(claimed)) if claimed == digest => true,
        Some(Value::String(claimed)) => {
            problems.push(format!("server digest {claimed} != computed {digest}"));
            false
        }
        Some(v) => {
            problems.push(format!("server digest is {}, not a string", type_name(v)));
            false
        }
    };
    let structured = payload
        .get("structuredContent")
        .is_some_and(Value::is_object);
    if empty_content && !structured && !is_error && !vouched {
        problems.push(
            "empty result (content [] and no structuredContent): not told apart from a result never stored, and no server digest vouches for it"
                .into(),
        );
    }
    is_error
}

/// A [`ResultView`] from a checked payload.
pub(super) fn result_view_of(
    payload: Value,
    is_error: bool,
    related_operation_id: Option<String>,
    digest: String,
    problems: Vec<String>,
) -> ResultView {
    let problem = (!problems.is_empty()).then(|| problems.join("; "));
    ResultView {
        payload,
        is_error,
        related_operation_id,
        digest,
        verified: problem.is_none(),
        problem,
    }
}

/// How a server request other than a task's elicitation is answered: `ping` with an empty
/// result, an elicitation we cannot route declined, anything else `-32601`.
pub(super) fn server_request(id: &Value, method: &str) -> super::ServerRequest {
    let answer = match method {
        "ping" => super::ServerAnswer::Empty,
        "elicitation/create" => super::ServerAnswer::DeclineElicitation,
        _ => super::ServerAnswer::MethodNotFound,
    };
    super::ServerRequest {
        id: id.clone(),
        method: method.to_string(),
        answer,
    }
}

/// The JSON-RPC response to a server request.
pub(super) fn server_answer(req: &super::ServerRequest) -> Vec<u8> {
    use super::ServerAnswer;
    let body = match &req.answer {
        ServerAnswer::Empty => json!({"jsonrpc": "2.0", "id": req.id, "result": {}}),
        ServerAnswer::DeclineElicitation => {
            json!({"jsonrpc": "2.0", "id": req.id, "result": {"action": "decline"}})
        }
        ServerAnswer::MethodNotFound => json!({"jsonrpc": "2.0", "id": req.id,
            "error": {"code": METHOD_NOT_FOUND, "message": format!("Method not found: {} (toolop does not serve it)", req.method)}}),
        ServerAnswer::InvalidParams { message } => json!({"jsonrpc": "2.0", "id": req.id,
            "error": {"code": INVALID_PARAMS, "message": message}}),
    };
    to_bytes(&body)
}

pub(super) fn http_status_reply(memo: &ParseMemo, frame: &InFrame) -> Option<Reply> {
    let detail = || match parse_reply(memo, &frame.body) {
        Ok(RpcReply::Error { code, message }) => format!(" (server said {code}: {message})"),
        _ => String::new(),
    };
    match frame.http_status {
        200 => None,
        429 => Some(Reply::RateLimited {
            retry_after_ms: frame.retry_after_ms,
        }),
        503 => Some(Reply::Unavailable {
            retry_after_ms: frame.retry_after_ms,
        }),
        // Accepted for processing; the answer (if any) comes later. Never a completion.
        202 => Some(Reply::Accepted),
        404 => Some(Reply::Error {
            message: format!("HTTP 404: session gone, re-initialize{}", detail()),
        }),
        s => Some(Reply::Error {
            message: format!("HTTP {s}{}", detail()),
        }),
    }
}

/// The result of an `initialize` or `tools/list` answer. Its errors do not name the method: the
/// runner's handshake, which sent it, names it once ("tools/list: HTTP 404", not twice).
pub(super) fn negotiation_result(
    memo: &ParseMemo,
    frame: &InFrame,
) -> Result<Map<String, Value>, ProtocolError> {
    if frame.http_status != 200 {
        return Err(ProtocolError(format!("HTTP {}", frame.http_status)));
    }
    match parse_reply(memo, &frame.body) {
        Ok(RpcReply::Result(result)) => Ok(result),
        Ok(RpcReply::Error { code, message }) => {
            Err(ProtocolError(format!("refused: {code}: {message}")))
        }
        Err(reason) => Err(ProtocolError(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_gives_back_only_the_bytes_it_looked_at() {
        let memo = ParseMemo::default();
        let fresh = || memo.fresh.load(std::sync::atomic::Ordering::Relaxed);
        let a = br#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#;
        let b = br#"{"jsonrpc":"2.0","id":2,"result":{"b":2}}"#;
        let seen = memo.look(a, |p| p.as_ref().ok().map(|v| v["id"].clone()));
        assert_eq!(seen, Some(json!(1)));
        // Other bytes: parsed afresh, and the kept JSON is gone with the look.
        assert_eq!(memo.take(b), parse_json(b));
        assert_eq!(fresh(), 1);
        assert_eq!(memo.take(a), parse_json(a));
        assert_eq!(fresh(), 2);
        // The same bytes: the kept JSON, without a parse, once; then a fresh parse, equal to it.
        memo.look(a, |_| ());
        assert_eq!(memo.take(a), parse_json(a));
        assert_eq!(fresh(), 2);
        assert!(memo.slot().is_none());
        assert_eq!(memo.take(a), parse_json(a));
        assert_eq!(fresh(), 3);
        // A body that is not JSON keeps nothing and decodes to the same error as ever.
        let cut = &a[..10];
        let seen = memo.look(cut, |p| p.clone());
        assert!(seen.is_err() && memo.slot().is_none());
        assert_eq!(memo.take(cut), seen);
        assert_eq!(fresh(), 4);
    }

    /// Not only an ordinary reply: an error status's detail, an answer to our input response
    /// and a handshake answer are read through the memo too, and read the same as without it.
    #[test]
    fn every_decode_of_a_frame_reads_through_the_memo() {
        let memo = ParseMemo::default();
        let fresh = || memo.fresh.load(std::sync::atomic::Ordering::Relaxed);
        let refused = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"gone"}}"#;
        let mut frame = InFrame::message(refused.to_vec());
        frame.http_status = 404;
        memo.look(&frame.body, |_| ());
        let told = http_status_reply(&memo, &frame);
        assert_eq!(
            told,
            Some(Reply::Error {
                message: "HTTP 404: session gone, re-initialize (server said -32600: gone)".into()
            })
        );
        assert_eq!(fresh(), 0);
        // Without a look first, the same words from a fresh parse.
        assert_eq!(http_status_reply(&memo, &frame), told);
        assert_eq!(fresh(), 1);

        memo.look(refused, |_| ());
        let input = parse_reply(&memo, refused);
        assert_eq!(
            input,
            Ok(RpcReply::Error {
                code: -32600,
                message: "gone".into()
            })
        );
        assert_eq!(fresh(), 1);

        let hello = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#;
        let frame = InFrame::message(hello.to_vec());
        memo.look(hello, |_| ());
        let answer = negotiation_result(&memo, &frame).expect("a result");
        assert_eq!(answer["protocolVersion"], json!("2025-11-25"));
        assert_eq!(fresh(), 1);
        let refusal = negotiation_result(&memo, &InFrame::message(refused.to_vec()));
        assert_eq!(
            refusal.map_err(|e| e.0),
            Err("refused: -32600: gone".to_string())
        );
        assert_eq!(fresh(), 2);
    }
}
