//! The codec of Google AIP-151 long-running operations over the HTTP/JSON mapping
//! (`google.longrunning.Operations`, AIP-155 `request_id`; `shared/spec/aip-151.md`): HTTP
//! requests <-> neutral requests, neutral responses <-> HTTP replies with JSON bodies.
//!
//! ## Routes
//! Requests are routed by `frame.http` (method and path) through the configured templates:
//! - `POST submit_path` (`{tool}` a configured tool): create (or dedupe) an operation; the body
//!   is the tool arguments plus `requestId`;
//! - `GET operation_path`: GetOperation; `POST operation_path:cancel`: CancelOperation;
//!   `DELETE operation_path`: DeleteOperation;
//! - `GET operations_collection[?filter=...]`: ListOperations, with the toolop `request_id="KEY"`
//!   filter extension.
//!
//! Anything else is 404 NOT_FOUND. Every reply answers its request (`request_id` copied from the
//! frame), body JSON: an Operation, `{}` (Empty), a `ListOperationsResponse`, or an error
//! `{"error": {"code": <http>, "message", "status"}}`. A frame without an HTTP target and
//! without a correlation id gets no reply.
//!
//! ## Operations
//! `done` is omitted while false. The outcome: `completed` ends with `response` (an `Any` with
//! `@type`; with extensions, `metadata["io.toolop/resultDigest"]`); `failed` with `error {code: 13
//! INTERNAL}`; `tool_error` with `error {code: 9 FAILED_PRECONDITION}`; `done_without_result`
//! with neither; a cancel that took effect with `error {code: 1 CANCELLED}`; a pre-emption with
//! `error {code: 10 ABORTED}`. Cancel is best effort: `200 {}` now, the effect later; on a done
//! operation the profile decides ([`CancelOnDone`]). ListOperations has no pagination; an empty
//! list is `{}` (proto3 omits empty repeated fields).
//!
//! Paths and filters are percent-decoded with the `percent-encoding` crate and parsed here, apart
//! from the executor's adapter.

use percent_encoding::percent_decode_str;
use serde_json::{json, Map, Value};
use toolop::transport::{InFrame, OutFrame};

use crate::fake::codec::{
    neutral_shows, Ask, CallBook, CallId, Codec, CodecCaps, Decoded, ExchangeKind, Outcome, Push,
    Request, Response, ResultBody, ResultShape, RunAs, Shape, Stop, Submit, TaskView,
};
use crate::fake::script::TaskScript;
use crate::fake::service::{
    AfterAnswer, AtTerminal, CancelRule, Dedupe, Expiry, InputDelivery, Policy,
};
use crate::fake::truth::{payload_digest, TaskStatus};
use crate::trace::Shows;

#[cfg(test)]
mod tests;

/// `@type` of a completed operation's `response`.
pub const RESPONSE_TYPE: &str = "type.googleapis.com/toolop.sim.v1.ToolResult";
/// `@type` of every operation's `metadata`.
pub const METADATA_TYPE: &str = "type.googleapis.com/toolop.sim.v1.OperationMetadata";
/// The toolop extension: the digest of a completed operation's `response`, in its metadata.
const METADATA_RESULT_DIGEST: &str = "io.toolop/resultDigest";
const REQUEST_ID_FIELD: &str = "requestId";
const CANCEL_SUFFIX: &str = ":cancel";

/// `google.rpc.Code`: (number, name, HTTP status) as AIP-193 maps them.
const CODES: [(i64, &str, u16); 17] = [
    (0, "OK", 200),
    (1, "CANCELLED", 499),
    (2, "UNKNOWN", 500),
    (3, "INVALID_ARGUMENT", 400),
    (4, "DEADLINE_EXCEEDED", 504),
    (5, "NOT_FOUND", 404),
    (6, "ALREADY_EXISTS", 409),
    (7, "PERMISSION_DENIED", 403),
    (8, "RESOURCE_EXHAUSTED", 429),
    (9, "FAILED_PRECONDITION", 400),
    (10, "ABORTED", 409),
    (11, "OUT_OF_RANGE", 400),
    (12, "UNIMPLEMENTED", 501),
    (13, "INTERNAL", 500),
    (14, "UNAVAILABLE", 503),
    (15, "DATA_LOSS", 500),
    (16, "UNAUTHENTICATED", 401),
];

pub const CANCELLED: i64 = 1;
pub const INVALID_ARGUMENT: i64 = 3;
pub const NOT_FOUND: i64 = 5;
pub const FAILED_PRECONDITION: i64 = 9;
pub const ABORTED: i64 = 10;
pub const UNIMPLEMENTED: i64 = 12;
pub const INTERNAL: i64 = 13;

fn code_name(code: i64) -> &'static str {
    CODES
        .iter()
        .find(|c| c.0 == code)
        .map_or("UNKNOWN", |c| c.1)
}

fn code_http(code: i64) -> u16 {
    CODES.iter().find(|c| c.0 == code).map_or(500, |c| c.2)
}

/// How CancelOperation on an operation that is already done is answered (AIP-151 leaves it
/// open): the AIP-151 server profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CancelOnDone {
    /// `200 {}`: a no-op.
    Ok,
    /// `400 FAILED_PRECONDITION`.
    FailedPrecondition,
    /// `404 NOT_FOUND`.
    NotFound,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AipConfig {
    pub submit_path: String,
    pub operation_path: String,
    pub operations_collection: String,
    pub tools: Vec<String>,
    /// Operation names are `{name_prefix}/op-{16 hex}`.
    pub name_prefix: String,
    /// AIP-155 request id dedupe window from creation (`None`: forever).
    pub dedupe_window_ms: Option<u64>,
    pub cancel_supported: bool,
    pub list_supported: bool,
    pub delete_supported: bool,
    /// The toolop extensions: the `request_id` filter, and the result digest in metadata.
    pub toolop_extensions: bool,
    pub cancel_on_done: CancelOnDone,
    /// Delay between an accepted cancel and its effect.
    pub cancel_delay_ms: (u64, u64),
    /// Records are deleted this long after completion; `None` keeps them.
    pub retention_after_done_ms: Option<u64>,
}

impl AipConfig {
    /// Names under `projects/p/locations/l/operations`; extensions, List and Delete on; cancel
    /// of a done operation OK; cancel delay 0..=200 ms; no retention deletion.
    pub fn new(
        submit_path: &str,
        operation_path: &str,
        operations_collection: &str,
        tools: Vec<String>,
    ) -> AipConfig {
        AipConfig {
            submit_path: submit_path.into(),
            operation_path: operation_path.into(),
            operations_collection: operations_collection.into(),
            tools,
            name_prefix: "projects/p/locations/l/operations".into(),
            dedupe_window_ms: None,
            cancel_supported: true,
            list_supported: true,
            delete_supported: true,
            toolop_extensions: true,
            cancel_on_done: CancelOnDone::Ok,
            cancel_delay_ms: (0, 200),
            retention_after_done_ms: None,
        }
    }
}

#[derive(Clone, Debug)]
struct Ctx {
    request_id: Option<u64>,
    what: What,
}

#[derive(Clone, Debug)]
enum What {
    /// An error the codec answers by itself: (code, message).
    Direct(i64, String),
    /// The reply shows the named operation (or not-found for it).
    Operation {
        name: String,
    },
    Cancel {
        name: String,
    },
    Delete {
        name: String,
    },
    Submit,
    List,
}

/// The codec. See the module docs.
pub struct AipCodec {
    cfg: AipConfig,
    calls: CallBook<Ctx>,
}

/// The fake AIP-151 service: this codec with the task service it asks for. `max_ttl_ms`: records
/// expire this long after creation even while running (off with `None`); `preempt_rate`: the
/// fraction of operations the service aborts itself.
pub fn server(
    cfg: AipConfig,
    max_ttl_ms: Option<u64>,
    preempt_rate: f64,
    rng: rand_chacha::ChaCha8Rng,
) -> crate::fake::FakeServer {
    let ids = crate::fake::service::IdStyle::Operation {
        prefix: cfg.name_prefix.clone(),
    };
    crate::fake::FakeServer::new(
        Box::new(AipCodec::new(cfg)),
        ids,
        max_ttl_ms,
        preempt_rate,
        rng,
    )
}

impl AipCodec {
    pub fn new(cfg: AipConfig) -> AipCodec {
        AipCodec {
            cfg,
            calls: CallBook::default(),
        }
    }

    pub fn config(&self) -> &AipConfig {
        &self.cfg
    }

    fn open(
        &mut self,
        exchange: ExchangeKind,
        request_id: Option<u64>,
        what: What,
        ask: Ask,
    ) -> Decoded {
        let call = self.calls.open(Ctx { request_id, what });
        Decoded {
            exchange,
            call: Some(call),
            ask,
        }
    }

    fn refuse(
        &mut self,
        exchange: ExchangeKind,
        request_id: Option<u64>,
        code: i64,
        message: String,
    ) -> Decoded {
        self.open(
            exchange,
            request_id,
            What::Direct(code, message),
            Ask::Codec,
        )
    }

    fn route(&mut self, rid: Option<u64>, method: &str, full_path: &str, body: &[u8]) -> Decoded {
        let (path, query) = full_path
            .split_once('?')
            .map_or((full_path, None), |(p, q)| (p, Some(q)));
        if method == "GET" && path == self.cfg.operations_collection {
            return self.list(rid, query);
        }
        if method == "POST" {
            if let Some(tool) = match_template(&self.cfg.submit_path, "{tool}", path) {
                if self.cfg.tools.contains(&tool) {
                    return self.submit(rid, tool, body);
                }
            }
            if let Some(name) = path
                .strip_suffix(CANCEL_SUFFIX)
                .and_then(|p| match_template(&self.cfg.operation_path, "{name}", p))
            {
                if !self.cfg.cancel_supported {
                    return self.refuse(
                        ExchangeKind::Cancel,
                        rid,
                        UNIMPLEMENTED,
                        "CancelOperation is not implemented".into(),
                    );
                }
                return self.open(
                    ExchangeKind::Cancel,
                    rid,
                    What::Cancel { name: name.clone() },
                    Ask::Service(Request::Cancel { task: name }),
                );
            }
        }
        if let Some(name) = match_template(&self.cfg.operation_path, "{name}", path) {
            match method {
                "GET" => {
                    return self.open(
                        ExchangeKind::Poll,
                        rid,
                        What::Operation { name: name.clone() },
                        Ask::Service(Request::Poll { task: name }),
                    )
                }
                "DELETE" if !self.cfg.delete_supported => {
                    return self.refuse(
                        ExchangeKind::Delete,
                        rid,
                        UNIMPLEMENTED,
                        "DeleteOperation is not implemented".into(),
                    )
                }
                "DELETE" => {
                    return self.open(
                        ExchangeKind::Delete,
                        rid,
                        What::Delete { name: name.clone() },
                        Ask::Service(Request::Delete { task: name }),
                    )
                }
                _ => {}
            }
        }
        self.refuse(
            ExchangeKind::Other,
            rid,
            NOT_FOUND,
            format!("no method {method} {path}"),
        )
    }

    fn submit(&mut self, rid: Option<u64>, tool: String, body: &[u8]) -> Decoded {
        let mut args = match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return self.refuse(
                    ExchangeKind::Submit,
                    rid,
                    INVALID_ARGUMENT,
                    "request body is not an object".into(),
                )
            }
            Err(e) => {
                return self.refuse(
                    ExchangeKind::Submit,
                    rid,
                    INVALID_ARGUMENT,
                    format!("request body is not JSON: {e}"),
                )
            }
        };
        let key = match args.remove(REQUEST_ID_FIELD) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(_) => {
                return self.refuse(
                    ExchangeKind::Submit,
                    rid,
                    INVALID_ARGUMENT,
                    "requestId must be a non-empty string".into(),
                )
            }
        };
        let script = match TaskScript::from_arguments(Some(&Value::Object(args))) {
            Ok(s) => s,
            Err(e) => return self.refuse(ExchangeKind::Submit, rid, INVALID_ARGUMENT, e),
        };
        let dedupe = key.is_some();
        let request = Request::Submit(Submit {
            tool,
            script,
            key,
            dedupe,
            run: RunAs::Task,
            requested_ttl_ms: None,
        });
        self.open(
            ExchangeKind::Submit,
            rid,
            What::Submit,
            Ask::Service(request),
        )
    }

    fn list(&mut self, rid: Option<u64>, query: Option<&str>) -> Decoded {
        if !self.cfg.list_supported {
            return self.refuse(
                ExchangeKind::List,
                rid,
                UNIMPLEMENTED,
                "ListOperations is not implemented".into(),
            );
        }
        let mut filter = None;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if k == "filter" {
                match percent_decode_str(v).decode_utf8() {
                    Ok(f) => filter = Some(f.into_owned()),
                    Err(_) => {
                        return self.refuse(
                            ExchangeKind::List,
                            rid,
                            INVALID_ARGUMENT,
                            "filter is not percent-encoded UTF-8".into(),
                        )
                    }
                }
            }
        }
        match filter.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
            None => self.open(
                ExchangeKind::List,
                rid,
                What::List,
                Ask::Service(Request::List),
            ),
            Some(f) => match request_id_of(f) {
                Some(key) if self.cfg.toolop_extensions => self.open(
                    ExchangeKind::Lookup,
                    rid,
                    What::List,
                    Ask::Service(Request::Lookup { key }),
                ),
                _ => self.refuse(
                    ExchangeKind::Lookup,
                    rid,
                    INVALID_ARGUMENT,
                    format!("unsupported filter {f:?}"),
                ),
            },
        }
    }

    /// The Operation in proto3 JSON.
    fn op_json(&self, v: &TaskView, name: &str, cut: bool) -> Value {
        let mut metadata = Map::new();
        metadata.insert("@type".into(), json!(METADATA_TYPE));
        metadata.insert("tool".into(), json!(v.tool));
        metadata.insert("createTimeMs".into(), json!(v.created_at_ms.to_string()));
        let mut m = Map::new();
        m.insert("name".into(), json!(name));
        if let (true, Some(outcome)) = (v.status.is_terminal(), &v.outcome) {
            m.insert("done".into(), json!(true));
            let error = |code: i64, message: &str| {
                let mut e = json!({"code": code, "message": message});
                if code != CANCELLED {
                    e["details"] = json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code_name(code), "domain": "toolop.sim"}]);
                }
                e
            };
            match outcome {
                Outcome::Result(b) if !b.is_error => {
                    let response = response_payload(b, cut);
                    if self.cfg.toolop_extensions {
                        // The whole result is the one just built unless it was cut.
                        let whole = cut.then(|| response_payload(b, false));
                        metadata.insert(
                            METADATA_RESULT_DIGEST.into(),
                            json!(payload_digest(whole.as_ref().unwrap_or(&response))),
                        );
                    }
                    m.insert("response".into(), response);
                }
                Outcome::Result(b) => {
                    m.insert("error".into(), error(INTERNAL, &b.text));
                }
                Outcome::ToolError { message } => {
                    m.insert("error".into(), error(FAILED_PRECONDITION, message));
                }
                Outcome::Stopped(Stop::Cancelled) => {
                    m.insert("error".into(), error(CANCELLED, "CANCELLED"));
                }
                Outcome::Stopped(Stop::Preempted) => {
                    m.insert("error".into(), error(ABORTED, PREEMPTED_MESSAGE));
                }
                Outcome::Stopped(Stop::Expired) => {
                    unreachable!(
                        "this policy deletes at the ttl (Expiry::Delete): no sweep fails a task"
                    )
                }
                Outcome::Nothing => {}
            }
        }
        m.insert("metadata".into(), Value::Object(metadata));
        Value::Object(m)
    }

    fn answer(&self, ctx: &Ctx, response: &Response, shape: &Shape) -> (u16, Value) {
        let name_of = |n: &str| shape.task_id.clone().unwrap_or_else(|| n.to_string());
        let not_found = |n: &str| error(NOT_FOUND, &format!("Operation {} not found", name_of(n)));
        match (&ctx.what, response) {
            (What::Direct(code, message), _) => error(*code, message),
            (_, Response::Task(v)) => {
                (200, self.op_json(v, &name_of(&v.id), shape.drop_last_block))
            }
            (
                What::Operation { name } | What::Cancel { name } | What::Delete { name },
                Response::NotFound { .. },
            ) => not_found(name),
            (_, Response::CancelAccepted | Response::Ack) => (200, json!({})),
            (What::Cancel { name }, Response::CancelRejected { .. }) => {
                match self.cfg.cancel_on_done {
                    CancelOnDone::Ok => (200, json!({})),
                    CancelOnDone::FailedPrecondition => error(
                        FAILED_PRECONDITION,
                        &format!("Operation {name} is already done"),
                    ),
                    CancelOnDone::NotFound => not_found(name),
                }
            }
            (_, Response::Tasks(views)) if views.is_empty() => (200, json!({})),
            (_, Response::Tasks(views)) => {
                let ops: Vec<Value> = views
                    .iter()
                    .map(|v| self.op_json(v, &name_of(&v.id), false))
                    .collect();
                (200, json!({ "operations": ops }))
            }
            _ => error(INTERNAL, "the service has no answer here"),
        }
    }
}

/// An error in the JSON error mapping: `code` is the HTTP status, `status` the canonical name.
fn error(code: i64, message: &str) -> (u16, Value) {
    let http = code_http(code);
    (
        http,
        json!({"error": {"code": http, "message": message, "status": code_name(code)}}),
    )
}

/// `template` with `placeholder` matched against `path`: the percent-decoded middle, if the rest
/// matches and the middle is not empty.
fn match_template(template: &str, placeholder: &str, path: &str) -> Option<String> {
    let (pre, post) = template.split_once(placeholder)?;
    let middle = path.strip_prefix(pre)?.strip_suffix(post)?;
    if middle.is_empty() {
        return None;
    }
    percent_decode_str(middle)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The key of an AIP-160 filter `request_id = "KEY"` (backslash escapes `"` and `\` inside the
/// string); `None` for any other expression.
fn request_id_of(filter: &str) -> Option<String> {
    let rest = filter
        .trim()
        .strip_prefix("request_id")?
        .trim_start()
        .strip_prefix('=')?
        .trim_start()
        .strip_prefix('"')?;
    let mut key = String::new();
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match (escaped, c) {
            (true, c) => {
                key.push(c);
                escaped = false;
            }
            (false, '\\') => escaped = true,
            (false, '"') => return rest[i + 1..].trim().is_empty().then_some(key),
            (false, c) => key.push(c),
        }
    }
    None
}

/// The `response` of a completed operation: an `Any` with `@type` and the text blocks.
fn response_payload(b: &ResultBody, cut: bool) -> Value {
    json!({"@type": RESPONSE_TYPE, "content": crate::fake::jsonrpc::content_blocks(&b.text, b.blocks, cut)})
}

impl ResultShape for AipCodec {
    /// Only a successful result has a `response`; an error result is an `error` status.
    fn payload(&self, body: &ResultBody) -> Option<Value> {
        (!body.is_error).then(|| response_payload(body, false))
    }

    /// The `error.message` of a done operation that failed, as `op_json` writes it.
    fn error_message(&self, outcome: &Outcome) -> Option<String> {
        match outcome {
            Outcome::Result(b) if b.is_error => Some(b.text.clone()),
            Outcome::ToolError { message } => Some(message.clone()),
            Outcome::Stopped(Stop::Preempted) => Some(PREEMPTED_MESSAGE.into()),
            _ => None,
        }
    }
}

/// The message of a pre-empted operation's ABORTED error.
const PREEMPTED_MESSAGE: &str = "ABORTED: pre-empted by a newer operation";

impl Codec for AipCodec {
    /// A done operation is its own result; a reply is its HTTP response, with no id of its own.
    fn caps(&self) -> CodecCaps {
        CodecCaps {
            result_digest: self.cfg.toolop_extensions,
            poll_shows_result: true,
            poll_shows_input: false,
            body_ids: false,
            // AIP-151 suggests no poll interval.
            poll_interval_ms: None,
        }
    }

    fn policy(&self) -> Policy {
        Policy {
            error_result_status: TaskStatus::Failed,
            done_without_result: true,
            cancel: CancelRule::delayed(self.cfg.cancel_delay_ms),
            at_terminal: self
                .cfg
                .retention_after_done_ms
                .map_or(AtTerminal::Keep, AtTerminal::DeleteAfter),
            dedupe: Dedupe::FromCreation {
                window_ms: self.cfg.dedupe_window_ms,
            },
            input: InputDelivery::Shown,
            expiry: Expiry::Delete,
            cancel_withdraws_input: false,
            notify_status: false,
            after_answer: AfterAnswer::Working,
            tasks_bound_to_session: false,
        }
    }

    fn decode(&mut self, frame: OutFrame) -> Decoded {
        let rid = frame.request_id;
        match &frame.http {
            Some(http) => {
                let (method, path) = (http.method.clone(), http.path.clone());
                self.route(rid, &method, &path, &frame.body)
            }
            None if rid.is_none() => Decoded {
                exchange: ExchangeKind::Other,
                call: None,
                ask: Ask::Nothing,
            },
            None => self.refuse(
                ExchangeKind::Other,
                rid,
                INVALID_ARGUMENT,
                "not an HTTP request".into(),
            ),
        }
    }

    fn encode_reply(&mut self, call: CallId, response: &Response, shape: &Shape) -> InFrame {
        let ctx = self.calls.close(call).unwrap_or(Ctx {
            request_id: None,
            what: What::Submit,
        });
        let (http_status, retry_after_ms, body) = match (&ctx.what, response) {
            (
                _,
                Response::Throttled {
                    throttle,
                    retry_after_ms,
                },
            ) => {
                let code = if throttle.http_status() == 429 { 8 } else { 14 };
                let (s, b) = error(code, "the service is busy; retry later");
                (s, Some(*retry_after_ms), b)
            }
            (What::Direct(..), Response::NotFound { .. }) => {
                let (s, b) = error(NOT_FOUND, "operation not found");
                (s, None, b)
            }
            _ => {
                let (s, b) = self.answer(&ctx, response, shape);
                (s, None, b)
            }
        };
        InFrame {
            request_id: ctx.request_id,
            http_status,
            retry_after_ms,
            body: serde_json::to_vec(&body).expect("Value serialises"),
        }
    }

    /// AIP-151 has no server push.
    fn encode_push(&mut self, _push: &Push) -> Option<InFrame> {
        None
    }

    /// As `answer` writes it: a cancel of a done operation is answered the way the profile
    /// says (`200 {}`, like an accepted cancel; FAILED_PRECONDITION; or NOT_FOUND), and a done
    /// operation carries a result only when it has a `response` or an `error` (done without a
    /// result carries neither).
    fn shows(&self, exchange: ExchangeKind, response: &Response) -> Shows {
        match (exchange, response) {
            (ExchangeKind::Cancel, Response::CancelRejected { status }) => {
                match self.cfg.cancel_on_done {
                    CancelOnDone::Ok => Shows::CancelAccepted,
                    CancelOnDone::FailedPrecondition => Shows::CancelRejected { status: *status },
                    CancelOnDone::NotFound => Shows::NotFound {
                        expired: false,
                        hidden: false,
                    },
                }
            }
            (_, Response::Task(v)) => {
                let mut shown = neutral_shows(response, self.caps());
                if let Shows::Task { result, .. } = &mut shown {
                    *result = v.status.is_terminal()
                        && !matches!(v.outcome, None | Some(Outcome::Nothing));
                }
                shown
            }
            _ => neutral_shows(response, self.caps()),
        }
    }
}

#[cfg(test)]
mod filter_tests {
    use super::*;

    #[test]
    fn request_id_filters_parse_with_escapes_and_nothing_else() {
        assert_eq!(request_id_of(r#"request_id="a:b""#).as_deref(), Some("a:b"));
        assert_eq!(
            request_id_of(r#" request_id = "q\"uo\\te" "#).as_deref(),
            Some("q\"uo\\te")
        );
        assert_eq!(request_id_of(r#"request_id="a" AND done=true"#), None);
        assert_eq!(request_id_of(r#"name="a""#), None);
        assert_eq!(request_id_of(r#"request_id="unterminated"#), None);
        assert_eq!(
            match_template("/v1/{name}", "{name}", "/v1/projects%2Fp/op-1").as_deref(),
            Some("projects/p/op-1")
        );
        assert_eq!(match_template("/v1/{name}", "{name}", "/v1/"), None);
        assert_eq!(code_http(FAILED_PRECONDITION), 400);
        assert_eq!(code_name(ABORTED), "ABORTED");
    }
}
