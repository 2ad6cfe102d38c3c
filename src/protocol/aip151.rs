//! Google AIP-151 long-running operations (`google.longrunning.Operation`) over the HTTP/JSON
//! mapping, with AIP-155 `request_id` for idempotent submission.
//!
//! The only place that knows this wire format: HTTP statuses, `google.rpc.Status` bodies and
//! codes, proto3 JSON defaults and the `done`/`response`/`error` reading of an Operation stop
//! here (`shared/spec/aip-151.md`). Every decoder treats server bytes as hostile: no `unwrap` on
//! server data, and anything without the expected shape becomes `Reply::Malformed` with a reason.
//!
//! ## Wire mapping (what [`Adapter::encode_frame`] emits)
//! Every frame is plain HTTP (`http: Some(..)`) and carries the executor's `rpc_id` as its
//! transport correlation (`request_id`); bodies are JSON or empty. The three URL templates come
//! from [`Aip151Config`], never from this file: real services nest operation names
//! (`projects/*/locations/*/operations/*`) and bind their methods where they like.
//!
//! | Outbound | HTTP | body |
//! |---|---|---|
//! | `Submit`, `SubmitSync` | `POST submit_path` (`{tool}` filled in) | the arguments object plus `"requestId": key` |
//! | `LookupByKey` | `GET operations_collection?filter=request_id%3D%22KEY%22` | empty |
//! | `Poll`, `FetchResult` | `GET operation_path` (`{name}` filled in) | empty |
//! | `Cancel` | `POST operation_path:cancel` | `{}` |
//! | `InputResponse` | none (see below) | empty |
//!
//! - AIP has no synchronous form: `SubmitSync` is sent exactly like `Submit`, and its reply
//!   decodes like a submit reply. Every configured tool is advertised with task support
//!   `Required`, so the core never asks for a synchronous call on this adapter.
//! - AIP has no TTL: `Submit.ttl_ms` is not sent. Retention runs from completion and is not
//!   advertised; a 404 on a name we hold means "gone", never "failed".
//! - The key rides in the request message as AIP-155 `request_id` (JSON `requestId`), which wins
//!   over any `requestId` the arguments already had. Arguments that are not an object (a caller
//!   bug) are sent as `{"requestId": key, "arguments": <value>}`, so the key still travels and the
//!   server refuses the request visibly; `null` means no arguments.
//! - Lookup by key is a toolop extension of `ListOperations` (a `request_id` filter). A service
//!   without it answers 404/501 UNIMPLEMENTED, or 400 INVALID_ARGUMENT for the filter: all three
//!   decode to `LookupUnsupported`.
//! - AIP has no input requests. The core never sends `InputResponse` on this adapter (no
//!   `InputRequest` ever comes out of [`Adapter::classify`]); if asked, the frame is harmless:
//!   no HTTP target, no correlation, empty body.
//! - There is no handshake: [`Adapter::configured_capabilities`] answers from configuration and
//!   the negotiation methods are never called. `encode_initialize`/`encode_list_tools` return an
//!   empty body and the `decode_*` negotiation methods return an error saying so.
//! - Names and keys are percent-encoded where a path or query would otherwise break (`/` stays
//!   literal in names: `{name=projects/*/operations/*}` binds the whole path).
//!
//! ## Decoding
//! Status first: 429 `RateLimited`, 503 `Unavailable`, 202 `Accepted`; 404 `NotFound` (on a
//! lookup: `LookupUnsupported`, the collection route does not exist). Other non-2xx replies read
//! the `google.rpc.Status` body `{"error": {"code", "message", "status"}}`, whose canonical code
//! comes from `status` (or, without it, from the HTTP status):
//! - submit: a refusal (`SubmitRefused`) unless the code leaves the outcome unknown —
//!   DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL, UNKNOWN (the brief's set) plus ALREADY_EXISTS
//!   ("probably our earlier attempt landed"), CANCELLED (our own call was cut) and DATA_LOSS —
//!   or the body is no Status at all: those are `Error` (the core then resolves by key);
//! - cancel: FAILED_PRECONDITION is `CancelRejectedTerminal` (the core reads the state, never
//!   takes it as an outcome); UNIMPLEMENTED is `Error`;
//! - lookup: UNIMPLEMENTED and INVALID_ARGUMENT are `LookupUnsupported`;
//! - everything else is `Error`.
//!
//! A 2xx body is an Operation. `done` omitted (proto3 default) is `false`. Status: not done is
//! `Working`; `response` `Completed`; `error.code == 1` `Cancelled`; any other `error` `Failed`
//! (an `error` whose code is omitted, i.e. 0/OK, is still an `error`: `Failed`); done with neither
//! `DoneWithoutResult`. Not done *with* a result, or both `response` and `error`, violate the
//! proto and are `Malformed`. A fetch is one more Get: the done Operation carries the result. A
//! fetch that finds the operation not done answers `Status(view)` (a truthful, well-formed read;
//! the core fetches again), not `Malformed`.

use serde_json::{json, Map, Value};

use super::{
    Adapter, Inbound, Outbound, ProtocolError, Reply, RequestKind, ResultView, ServerCapabilities,
    TaskSupport, TaskView, ToolInfo,
};
use crate::digest::value_digest;
use crate::record::{AdapterId, ProtocolStatus};
use crate::transport::{HttpTarget, InFrame, OutFrame};

/// `ServerCapabilities::protocol_version` of this adapter.
pub const PROTOCOL_VERSION: &str = "aip-151";
/// JSON name of the AIP-155 `request_id` field in a request message.
pub const REQUEST_ID_FIELD: &str = "requestId";
/// `Operation.metadata` key on which a toolop-aware service puts the digest of `response`
/// (`value_digest`, SHA-256 of canonical JSON).
pub const METADATA_RESULT_DIGEST: &str = "io.toolop/resultDigest";
/// Placeholder in [`Aip151Config::submit_path`].
pub const TOOL_PLACEHOLDER: &str = "{tool}";
/// Placeholder in [`Aip151Config::operation_path`].
pub const NAME_PLACEHOLDER: &str = "{name}";
/// Suffix of the custom method `CancelOperation` on the operation path.
pub const CANCEL_SUFFIX: &str = ":cancel";

/// `google.rpc.Code` values the adapter reads.
pub mod code {
    pub const OK: i64 = 0;
    pub const CANCELLED: i64 = 1;
    pub const UNKNOWN: i64 = 2;
    pub const INVALID_ARGUMENT: i64 = 3;
    pub const DEADLINE_EXCEEDED: i64 = 4;
    pub const NOT_FOUND: i64 = 5;
    pub const ALREADY_EXISTS: i64 = 6;
    pub const PERMISSION_DENIED: i64 = 7;
    pub const RESOURCE_EXHAUSTED: i64 = 8;
    pub const FAILED_PRECONDITION: i64 = 9;
    pub const ABORTED: i64 = 10;
    pub const OUT_OF_RANGE: i64 = 11;
    pub const UNIMPLEMENTED: i64 = 12;
    pub const INTERNAL: i64 = 13;
    pub const UNAVAILABLE: i64 = 14;
    pub const DATA_LOSS: i64 = 15;
    pub const UNAUTHENTICATED: i64 = 16;

    /// Canonical names, indexed by code.
    pub const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];

    pub fn name(code: i64) -> Option<&'static str> {
        usize::try_from(code)
            .ok()
            .and_then(|i| NAMES.get(i).copied())
    }

    pub fn from_name(name: &str) -> Option<i64> {
        NAMES.iter().position(|n| *n == name).map(|i| i as i64)
    }

    /// The HTTP status of the JSON error mapping for a code (`google/rpc/code.proto`).
    pub fn http_status(code: i64) -> u16 {
        match code {
            OK => 200,
            CANCELLED => 499,
            INVALID_ARGUMENT | FAILED_PRECONDITION | OUT_OF_RANGE => 400,
            DEADLINE_EXCEEDED => 504,
            NOT_FOUND => 404,
            ALREADY_EXISTS | ABORTED => 409,
            PERMISSION_DENIED => 403,
            RESOURCE_EXHAUSTED => 429,
            UNIMPLEMENTED => 501,
            UNAVAILABLE => 503,
            UNAUTHENTICATED => 401,
            _ => 500,
        }
    }

    /// The code an HTTP status stands for when the body does not say (`status` missing).
    /// 400 and 409 are ambiguous; the most common reading is taken.
    pub fn from_http_status(status: u16) -> i64 {
        match status {
            400 => INVALID_ARGUMENT,
            401 => UNAUTHENTICATED,
            403 => PERMISSION_DENIED,
            404 => NOT_FOUND,
            409 => ABORTED,
            412 => FAILED_PRECONDITION,
            429 => RESOURCE_EXHAUSTED,
            499 => CANCELLED,
            501 => UNIMPLEMENTED,
            503 => UNAVAILABLE,
            504 => DEADLINE_EXCEEDED,
            s if (500..600).contains(&s) => INTERNAL,
            _ => UNKNOWN,
        }
    }
}

/// How one AIP-151 service is reached. Everything here is configuration: AIP has no handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aip151Config {
    /// Submit method path, with `{tool}`: e.g. `/v1/projects/p/reports:{tool}`.
    pub submit_path: String,
    /// Operation resource path, with `{name}` (the full operation name): e.g. `/v1/{name}`.
    pub operation_path: String,
    /// The `ListOperations` collection: e.g. `/v1/operations`.
    pub operations_collection: String,
    /// Tools (long-running methods) this service offers.
    pub tools: Vec<String>,
    /// The service's AIP-155 dedupe window for `request_id`; `None`: for as long as the
    /// operation exists.
    pub dedupe_window_ms: Option<u64>,
    /// Whether `CancelOperation` is implemented.
    pub cancel_supported: bool,
}

impl Aip151Config {
    /// The submit path for `tool` (percent-encoded where a path needs it).
    pub fn submit_path_for(&self, tool: &str) -> String {
        self.submit_path
            .replace(TOOL_PLACEHOLDER, &encode_path(tool))
    }

    /// The resource path of the operation `name` (hierarchical, `/` kept literal).
    pub fn operation_path_for(&self, name: &str) -> String {
        self.operation_path
            .replace(NAME_PLACEHOLDER, &encode_path(name))
    }

    /// The `CancelOperation` path of the operation `name`.
    pub fn cancel_path_for(&self, name: &str) -> String {
        format!("{}{CANCEL_SUFFIX}", self.operation_path_for(name))
    }

    /// `ListOperations` filtered by AIP-155 request id (toolop extension).
    pub fn lookup_path_for(&self, key: &str) -> String {
        format!(
            "{}?filter={}",
            self.operations_collection,
            encode_query(&request_id_filter(key))
        )
    }
}

/// The filter expression (AIP-160) selecting the operation created with `key`:
/// `request_id="KEY"`, with `"` and `\` escaped inside the string literal.
pub fn request_id_filter(key: &str) -> String {
    let mut s = String::with_capacity(key.len() + 14);
    s.push_str("request_id=\"");
    for c in key.chars() {
        if c == '"' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

/// Inverse of [`request_id_filter`]; `None` for any other expression.
pub fn parse_request_id_filter(filter: &str) -> Option<String> {
    let inner = filter
        .trim()
        .strip_prefix("request_id")?
        .trim_start()
        .strip_prefix('=')?
        .trim_start();
    let inner = inner.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return chars.as_str().trim().is_empty().then_some(out),
            c => out.push(c),
        }
    }
    None
}

fn pct(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[usize::from(b >> 4)] as char);
    out.push(HEX[usize::from(b & 15)] as char);
}

/// Percent-encode for a path: RFC 3986 `pchar` and `/` stay literal.
pub fn encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            pct(&mut out, b);
        }
    }
    out
}

/// Percent-encode a query parameter value: only unreserved characters stay literal.
pub fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            pct(&mut out, b);
        }
    }
    out
}

/// Inverse of the encoders (`+` is not a space in a path; in a query we never emit it). `None`
/// on a bad escape or bytes that are not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The AIP-151 adapter. See the module docs.
#[derive(Clone, Debug)]
pub struct Aip151Adapter {
    cfg: Aip151Config,
}

impl Aip151Adapter {
    pub fn new(cfg: Aip151Config) -> Aip151Adapter {
        Aip151Adapter { cfg }
    }

    pub fn config(&self) -> &Aip151Config {
        &self.cfg
    }

    /// The small JSON the descriptor digest of `tool` is taken over: protocol, name and where it
    /// is submitted (a service that moves the method is a new tool version).
    pub fn tool_descriptor(&self, tool: &str) -> Value {
        json!({
            "protocol": PROTOCOL_VERSION,
            "tool": tool,
            "method": "POST",
            "path": self.cfg.submit_path_for(tool),
            "taskSupport": "required",
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

fn to_bytes(v: &Value) -> Vec<u8> {
    // Serialising a Value cannot fail (string keys only, no custom Serialize).
    serde_json::to_vec(v).expect("Value serialises")
}

fn submit_body(key: &str, arguments: &Value) -> Vec<u8> {
    let mut body = match arguments {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("arguments".into(), other.clone());
            m
        }
    };
    body.insert(REQUEST_ID_FIELD.into(), Value::from(key));
    to_bytes(&Value::Object(body))
}

fn target(method: &str, path: String) -> Option<HttpTarget> {
    Some(HttpTarget {
        method: method.to_string(),
        path,
    })
}

impl Aip151Adapter {
    fn frame(&self, rpc_id: u64, out: &Outbound) -> OutFrame {
        let (http, body) = match out {
            Outbound::Submit {
                key,
                tool,
                arguments,
                ttl_ms: _,
            }
            | Outbound::SubmitSync {
                key,
                tool,
                arguments,
            } => (
                target("POST", self.cfg.submit_path_for(tool)),
                submit_body(key, arguments),
            ),
            Outbound::LookupByKey { key } => {
                (target("GET", self.cfg.lookup_path_for(key)), Vec::new())
            }
            Outbound::Poll { operation_id } | Outbound::FetchResult { operation_id } => (
                target("GET", self.cfg.operation_path_for(operation_id)),
                Vec::new(),
            ),
            Outbound::Cancel { operation_id } => (
                target("POST", self.cfg.cancel_path_for(operation_id)),
                b"{}".to_vec(),
            ),
            // AIP has no input requests: nothing to send, nothing awaited.
            Outbound::InputResponse { .. } => {
                return OutFrame {
                    request_id: None,
                    body: Vec::new(),
                    http: None,
                }
            }
        };
        OutFrame {
            request_id: Some(rpc_id),
            body,
            http,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing helpers

use super::jsonrpc::type_name;

fn is_blank(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

fn parse_json(body: &[u8]) -> Result<Value, String> {
    if is_blank(body) {
        return Err("empty body".into());
    }
    serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))
}

/// A `google.rpc.Status` as it appears inside an Operation (`code` is the RPC code).
#[derive(Clone, Debug, PartialEq, Eq)]
struct RpcStatus {
    code: i64,
    message: String,
}

/// `google.rpc.Status` in proto3 JSON: `code` and `message` omitted mean 0 and "".
fn parse_status(v: &Value, what: &str) -> Result<RpcStatus, String> {
    let Value::Object(obj) = v else {
        return Err(format!(
            "{what} is {}, not a google.rpc.Status object",
            type_name(v)
        ));
    };
    let code = match obj.get("code") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => n
            .as_i64()
            .filter(|c| i32::try_from(*c).is_ok())
            .ok_or_else(|| format!("{what}.code {n} is not an int32"))?,
        Some(v) => return Err(format!("{what}.code is {}, not an integer", type_name(v))),
    };
    let message = match obj.get("message") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(format!("{what}.message is {}, not a string", type_name(v))),
    };
    match obj.get("details") {
        None | Some(Value::Null) | Some(Value::Array(_)) => {}
        Some(v) => return Err(format!("{what}.details is {}, not an array", type_name(v))),
    }
    Ok(RpcStatus { code, message })
}

/// The error of a non-2xx reply: canonical code (from `status`, else from the HTTP status) and
/// message. `None` when the body is no `{"error": {...}}` object.
fn http_error(frame: &InFrame) -> Option<(i64, String)> {
    let v = parse_json(&frame.body).ok()?;
    let err = v.get("error")?.as_object()?;
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let code = err
        .get("status")
        .and_then(Value::as_str)
        .and_then(code::from_name)
        .unwrap_or_else(|| code::from_http_status(frame.http_status));
    Some((code, message))
}

fn describe(http_status: u16, err: &Option<(i64, String)>) -> String {
    match err {
        Some((c, m)) => format!("HTTP {http_status} {}: {m}", code::name(*c).unwrap_or("?")),
        None => format!("HTTP {http_status} without a google.rpc.Status body"),
    }
}

/// An Operation, reduced to what the decoders need.
#[derive(Clone, Debug, PartialEq)]
struct Operation {
    name: String,
    done: bool,
    response: Option<Map<String, Value>>,
    error: Option<RpcStatus>,
    metadata: Option<Map<String, Value>>,
}

impl Operation {
    fn status(&self) -> ProtocolStatus {
        match (self.done, &self.response, &self.error) {
            (false, _, _) => ProtocolStatus::Working,
            (true, Some(_), _) => ProtocolStatus::Completed,
            (true, None, Some(e)) if e.code == code::CANCELLED => ProtocolStatus::Cancelled,
            (true, None, Some(_)) => ProtocolStatus::Failed,
            (true, None, None) => ProtocolStatus::DoneWithoutResult,
        }
    }

    fn view(&self) -> TaskView {
        let status_message = self.error.as_ref().map(|e| {
            let name = code::name(e.code).unwrap_or("UNKNOWN_CODE");
            if e.message.is_empty() {
                name.to_string()
            } else {
                format!("{name}: {}", e.message)
            }
        });
        TaskView {
            operation_id: self.name.clone(),
            status: self.status(),
            // AIP defines no interval hint and no TTL (retention runs from completion, unadvertised).
            poll_interval_ms: None,
            ttl_ms: None,
            status_message,
            hint_problem: None,
        }
    }
}

fn parse_operation(v: &Value) -> Result<Operation, String> {
    let Value::Object(obj) = v else {
        return Err(format!("Operation is {}, not an object", type_name(v)));
    };
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        // proto3 omits an empty name: a validate-only style operation with nothing to poll.
        None | Some(Value::Null) | Some(Value::String(_)) => {
            return Err("Operation has no name".into())
        }
        Some(v) => return Err(format!("Operation.name is {}, not a string", type_name(v))),
    };
    let done = match obj.get("done") {
        // proto3 JSON omits `false`.
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("Operation.done is {}, not a boolean", type_name(v))),
    };
    let response = match obj.get("response") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(v) => {
            return Err(format!(
                "Operation.response is {}, not an Any object",
                type_name(v)
            ))
        }
    };
    let error = match obj.get("error") {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_status(v, "Operation.error")?),
    };
    let metadata = match obj.get("metadata") {
        Some(Value::Object(m)) => Some(m.clone()),
        // Opaque to the adapter: a metadata of another shape is not our business.
        _ => None,
    };
    if !done && (response.is_some() || error.is_some()) {
        return Err("Operation is not done but carries a result".into());
    }
    if response.is_some() && error.is_some() {
        return Err("Operation has both response and error (a oneof)".into());
    }
    Ok(Operation {
        name,
        done,
        response,
        error,
        metadata,
    })
}

fn result_view(op: &Operation, response: &Map<String, Value>) -> ResultView {
    let payload = Value::Object(response.clone());
    let digest = value_digest(&payload);
    let mut problems = Vec::new();
    match response.get("@type") {
        Some(Value::String(t)) if !t.is_empty() => {}
        Some(v) => problems.push(format!(
            "response \"@type\" is {}, not a type URL",
            type_name(v)
        )),
        None => problems.push("response has no \"@type\"".into()),
    }
    match op
        .metadata
        .as_ref()
        .and_then(|m| m.get(METADATA_RESULT_DIGEST))
    {
        None | Some(Value::Null) => {}
        Some(Value::String(claimed)) if *claimed == digest => {}
        Some(Value::String(claimed)) => {
            problems.push(format!("server digest {claimed} != computed {digest}"))
        }
        Some(v) => problems.push(format!("server digest is {}, not a string", type_name(v))),
    }
    let problem = (!problems.is_empty()).then(|| problems.join("; "));
    ResultView {
        payload,
        is_error: false,
        related_operation_id: Some(op.name.clone()),
        digest,
        verified: problem.is_none(),
        problem,
    }
}

// ---------------------------------------------------------------------------------------------
// Reply decoding

/// Codes that, on a submit, do not prove the operation was not created.
fn submit_outcome_unknown(c: i64) -> bool {
    matches!(
        c,
        code::DEADLINE_EXCEEDED
            | code::UNAVAILABLE
            | code::INTERNAL
            | code::UNKNOWN
            | code::ALREADY_EXISTS
            | code::CANCELLED
            | code::DATA_LOSS
    )
}

fn decode_error_status(kind: RequestKind, frame: &InFrame) -> Reply {
    let err = http_error(frame);
    let text = describe(frame.http_status, &err);
    let c = err.as_ref().map(|(c, _)| *c);
    match kind {
        RequestKind::Submit | RequestKind::SubmitSync => match c {
            Some(c) if !submit_outcome_unknown(c) && (400..600).contains(&frame.http_status) => {
                Reply::SubmitRefused { reason: text }
            }
            _ => Reply::Error {
                message: format!("submit outcome unknown: {text}"),
            },
        },
        RequestKind::Lookup => match (frame.http_status, c) {
            (501, _) | (_, Some(code::UNIMPLEMENTED | code::INVALID_ARGUMENT)) => {
                Reply::LookupUnsupported
            }
            _ => Reply::Error {
                message: format!("lookup: {text}"),
            },
        },
        RequestKind::Cancel => match (frame.http_status, c) {
            (_, Some(code::FAILED_PRECONDITION)) => Reply::CancelRejectedTerminal { message: text },
            (501, _) | (_, Some(code::UNIMPLEMENTED)) => Reply::Error {
                message: format!("UNIMPLEMENTED: cancel: {text}"),
            },
            _ => Reply::Error {
                message: format!("cancel: {text}"),
            },
        },
        _ => Reply::Error {
            message: format!("{}: {text}", kind.name()),
        },
    }
}

fn decode_operation_reply(kind: RequestKind, body: &[u8]) -> Reply {
    let op = match parse_json(body).and_then(|v| parse_operation(&v)) {
        Ok(op) => op,
        Err(reason) => {
            return Reply::Malformed {
                reason: format!("{}: {reason}", kind.name()),
            }
        }
    };
    match kind {
        // An immediate `done` is fine: the core reads the status and fetches.
        RequestKind::Submit | RequestKind::SubmitSync => Reply::Submitted(op.view()),
        RequestKind::Poll => Reply::Status(op.view()),
        RequestKind::Fetch => match (op.done, &op.response, &op.error) {
            (false, _, _) => Reply::Status(op.view()),
            (true, Some(response), _) => Reply::Result(result_view(&op, response)),
            (true, None, Some(e)) if e.code == code::CANCELLED => Reply::NoResultStored {
                message: format!("cancelled: {}", e.message),
            },
            (true, None, Some(e)) => Reply::ResultIsError {
                code: e.code,
                message: e.message.clone(),
            },
            (true, None, None) => Reply::NoResultStored {
                message: "done without result".into(),
            },
        },
        _ => Reply::Malformed {
            reason: format!("{}: unexpected Operation", kind.name()),
        },
    }
}

fn decode_lookup(body: &[u8]) -> Reply {
    let v = match parse_json(body) {
        Ok(v) => v,
        Err(reason) => {
            return Reply::Malformed {
                reason: format!("lookup: {reason}"),
            }
        }
    };
    let Value::Object(obj) = &v else {
        return Reply::Malformed {
            reason: format!("lookup: ListOperationsResponse is {}", type_name(&v)),
        };
    };
    // proto3 omits an empty repeated field and an empty page token.
    let ops: &[Value] = match obj.get("operations") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Reply::Malformed {
                reason: format!("lookup: \"operations\" is {}", type_name(v)),
            }
        }
    };
    match obj.get("nextPageToken") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t.is_empty() => {}
        Some(_) => {
            return Reply::Malformed {
                reason: "lookup answered with a paginated list: request_id filter ignored".into(),
            }
        }
    }
    match ops {
        [] => Reply::LookupNotFound,
        [op] => match parse_operation(op) {
            Ok(op) => Reply::LookupFound(op.view()),
            Err(reason) => Reply::Malformed {
                reason: format!("lookup: operations[0]: {reason}"),
            },
        },
        many => Reply::Malformed {
            reason: format!(
                "lookup by request_id returned {} operations: filter ignored or key reused",
                many.len()
            ),
        },
    }
}

fn decode_success(kind: RequestKind, frame: &InFrame) -> Reply {
    match kind {
        RequestKind::Submit | RequestKind::SubmitSync | RequestKind::Poll | RequestKind::Fetch => {
            decode_operation_reply(kind, &frame.body)
        }
        RequestKind::Lookup => decode_lookup(&frame.body),
        // `google.protobuf.Empty`: `{}` or nothing. Best effort: it says nothing about the outcome.
        RequestKind::Cancel => {
            if is_blank(&frame.body) {
                return Reply::CancelPending;
            }
            match parse_json(&frame.body) {
                Ok(Value::Object(_)) => Reply::CancelPending,
                Ok(v) => Reply::Malformed {
                    reason: format!("cancel: reply is {}, not an object", type_name(&v)),
                },
                Err(reason) => Reply::Malformed {
                    reason: format!("cancel: {reason}"),
                },
            }
        }
        RequestKind::InputResponse => Reply::Error {
            message: "aip-151 has no input requests".into(),
        },
        RequestKind::Initialize | RequestKind::ListTools => Reply::Error {
            message: format!("{}: aip-151 has no handshake", kind.name()),
        },
    }
}

fn decode(kind: RequestKind, frame: &InFrame) -> Reply {
    match frame.http_status {
        429 => Reply::RateLimited {
            retry_after_ms: frame.retry_after_ms,
        },
        503 => Reply::Unavailable {
            retry_after_ms: frame.retry_after_ms,
        },
        // Accepted for processing, no content. Never a completion.
        202 => Reply::Accepted,
        404 if kind == RequestKind::Lookup => Reply::LookupUnsupported,
        404 => {
            let err = http_error(frame);
            Reply::NotFound {
                message: describe(404, &err),
            }
        }
        200..=299 => decode_success(kind, frame),
        _ => decode_error_status(kind, frame),
    }
}

impl Adapter for Aip151Adapter {
    fn id(&self) -> AdapterId {
        AdapterId::Aip151
    }

    /// No handshake: never called (capabilities are configured). Empty.
    fn encode_initialize(&self, _rpc_id: u64) -> Vec<u8> {
        Vec::new()
    }

    fn encode_initialized(&self) -> Option<Vec<u8>> {
        None
    }

    /// No handshake: never called (tools are configured). Empty.
    fn encode_list_tools(&self, _rpc_id: u64, _cursor: Option<&str>) -> Vec<u8> {
        Vec::new()
    }

    fn decode_initialize(&self, _frame: &InFrame) -> Result<ServerCapabilities, ProtocolError> {
        Err(ProtocolError(
            "aip-151 has no handshake: capabilities come from configuration".into(),
        ))
    }

    fn decode_list_tools(
        &self,
        _frame: &InFrame,
    ) -> Result<(Vec<ToolInfo>, Option<String>), ProtocolError> {
        Err(ProtocolError(
            "aip-151 has no tools/list: tools come from configuration".into(),
        ))
    }

    fn encode(&self, rpc_id: u64, out: &Outbound) -> Vec<u8> {
        self.frame(rpc_id, out).body
    }

    fn encode_frame(&self, rpc_id: u64, out: &Outbound) -> OutFrame {
        self.frame(rpc_id, out)
    }

    fn configured_capabilities(&self) -> Option<ServerCapabilities> {
        let tools = self
            .cfg
            .tools
            .iter()
            .map(|t| {
                let info = ToolInfo {
                    name: t.clone(),
                    task_support: TaskSupport::Required,
                    sync_upper_bound_ms: None,
                    descriptor_digest: value_digest(&self.tool_descriptor(t)),
                };
                (t.clone(), info)
            })
            .collect();
        Some(ServerCapabilities {
            protocol_version: PROTOCOL_VERSION.to_string(),
            tasks_tool_call: true,
            tasks_cancel: self.cfg.cancel_supported,
            // Lookup goes through ListOperations (with the request_id filter extension).
            tasks_list: true,
            idempotency_by_key: true,
            idempotency_retention_ms: self.cfg.dedupe_window_ms,
            tools,
        })
    }

    /// `GetOperation` both polls and reads the outcome (`Poll` and `FetchResult` share a frame).
    fn fetch_is_status_read(&self) -> bool {
        true
    }

    /// Plain HTTP: every reply is tied to its request by the transport. AIP has no server push.
    fn classify(&self, frame: &InFrame) -> Inbound {
        match frame.request_id {
            Some(rpc_id) => Inbound::Response { rpc_id },
            None => Inbound::Ignored {
                what: format!(
                    "uncorrelated frame (HTTP {}, {} bytes)",
                    frame.http_status,
                    frame.body.len()
                ),
            },
        }
    }

    fn decode_reply(&self, kind: RequestKind, frame: &InFrame) -> Reply {
        decode(kind, frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_id_filter_round_trips_through_escapes_and_encoding() {
        for key in ["k-1", "a\"b\\c", "ü ?&=/#%", ""] {
            let f = request_id_filter(key);
            assert_eq!(parse_request_id_filter(&f).as_deref(), Some(key));
            assert_eq!(
                percent_decode(&encode_query(&f)).as_deref(),
                Some(f.as_str())
            );
        }
        assert_eq!(parse_request_id_filter("done=true"), None);
        assert_eq!(
            parse_request_id_filter("request_id=\"x\" AND done=true"),
            None
        );
        assert_eq!(encode_query("request_id=\"K\""), "request_id%3D%22K%22");
    }

    #[test]
    fn path_encoding_keeps_hierarchy_and_escapes_the_rest() {
        assert_eq!(
            encode_path("projects/p/operations/op-1"),
            "projects/p/operations/op-1"
        );
        assert_eq!(encode_path("a b?c#d%"), "a%20b%3Fc%23d%25");
        assert_eq!(
            percent_decode("a%20b%3Fc%23d%25").as_deref(),
            Some("a b?c#d%")
        );
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%4"), None);
    }

    #[test]
    fn code_names_and_http_statuses_agree() {
        for c in 0..=16 {
            let name = code::name(c).unwrap();
            assert_eq!(code::from_name(name), Some(c));
        }
        assert_eq!(code::http_status(code::FAILED_PRECONDITION), 400);
        assert_eq!(code::from_http_status(501), code::UNIMPLEMENTED);
        assert_eq!(code::name(17), None);
        assert_eq!(code::name(-1), None);
    }
}
