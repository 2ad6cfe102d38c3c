//! JSON-RPC 2.0 as both MCP codecs speak it (the server side): reading a client message,
//! framing responses and server messages, and the timestamps MCP servers print. Written from
//! the JSON-RPC 2.0 text and the MCP schema, apart from the executor's `protocol/jsonrpc.rs`.

use serde::Serialize;
use serde_json::{json, Map, Value};
use toolop::transport::InFrame;

use super::codec::{Ask, CallBook, CallId, Decoded, ExchangeKind, Request, Response, Shape};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Code of a scripted `tool_error`.
pub const TOOL_ERROR: i64 = -32000;

/// toolop's extension keys, as the fake servers read and write them (toolop's README).
pub const EXT_IDEMPOTENCY: &str = "io.toolop/idempotency";
pub const META_IDEMPOTENCY_KEY: &str = "io.toolop/idempotency-key";
pub const META_LOOKUP_KEY: &str = "io.toolop/lookup-key";
pub const META_RESULT_DIGEST: &str = "io.toolop/result-digest";
pub const META_SYNC_UPPER_BOUND_MS: &str = "io.toolop/sync-upper-bound-ms";

/// A client message, read.
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification,
    /// A response to one of the server's requests.
    Response {
        id: Value,
        body: Map<String, Value>,
    },
    /// Not a message the server can take: answer with this error (`id` null when unknown).
    Invalid {
        id: Value,
        code: i64,
        message: String,
    },
}

pub fn read(body: &[u8]) -> Message {
    let msg: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Message::Invalid {
                id: Value::Null,
                code: PARSE_ERROR,
                message: format!("Parse error: {e}"),
            }
        }
    };
    let Value::Object(mut obj) = msg else {
        return Message::Invalid {
            id: Value::Null,
            code: INVALID_REQUEST,
            message: "Invalid Request: not a single JSON-RPC object".into(),
        };
    };
    let id = obj.remove("id");
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    match (method, id) {
        (Some(_), None) => Message::Notification,
        (Some(method), Some(id)) => {
            let params = obj.remove("params").unwrap_or_else(|| json!({}));
            Message::Request { id, method, params }
        }
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Message::Response { id, body: obj }
        }
        (None, id) => Message::Invalid {
            id: id.unwrap_or(Value::Null),
            code: INVALID_REQUEST,
            message: "Invalid Request".into(),
        },
    }
}

/// A frame carrying `body`; `request_id` ties it to the request it answers (transport level).
pub fn frame(request_id: Option<u64>, body: &Value) -> InFrame {
    InFrame {
        request_id,
        http_status: 200,
        retry_after_ms: None,
        body: serde_json::to_vec(body).expect("Value serialises"),
    }
}

/// `{"jsonrpc": "2.0", "id": id, "result": result}`
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `{"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}`
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A reply the codec worked out by itself at decode time.
#[derive(Clone, Debug)]
pub enum Direct {
    Result(Value),
    Error(i64, String),
}

impl Direct {
    /// The reply's body as a `Value` (`result()` or `error()`): the spelling [`Direct::frame`]
    /// writes without building it, and the reference its test compares the bytes with.
    pub fn body(&self, id: &Value) -> Value {
        match self {
            Direct::Result(r) => result(id, r.clone()),
            Direct::Error(code, message) => error(id, *code, message),
        }
    }

    /// The frame of [`Direct::body`], its bytes written without building the envelope as a
    /// `Value` or copying the result into it (a reply's whole result was cloned per reply).
    pub fn frame(&self, request_id: Option<u64>, id: &Value) -> InFrame {
        let body = match self {
            Direct::Result(result) => serde_json::to_vec(&ResultEnvelope {
                id,
                jsonrpc: "2.0",
                result,
            }),
            Direct::Error(code, message) => serde_json::to_vec(&ErrorEnvelope {
                error: ErrorObject {
                    code: *code,
                    message,
                },
                id,
                jsonrpc: "2.0",
            }),
        };
        InFrame {
            request_id,
            http_status: 200,
            retry_after_ms: None,
            // Plain data with string keys: serialising it into a Vec cannot fail.
            body: body.expect("envelope serialises"),
        }
    }
}

// The envelopes as `result()` and `error()` build them. Fields are declared in the order a
// `Value` object writes its keys (sorted: serde_json without `preserve_order`, Cargo.toml), so
// the bytes are the same; `a_typed_envelope_writes_the_bytes_of_its_value` holds them to it.
#[derive(Serialize)]
struct ResultEnvelope<'a> {
    id: &'a Value,
    jsonrpc: &'static str,
    result: &'a Value,
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    error: ErrorObject<'a>,
    id: &'a Value,
    jsonrpc: &'static str,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
}

/// What a JSON-RPC codec keeps about one request until it answers it: the JSON-RPC id, the
/// transport correlation of the reply, and either the reply it worked out itself or what it
/// needs (`W`, the codec's own) to encode the service's answer.
#[derive(Clone, Debug)]
pub struct RpcCtx<W> {
    pub id: Value,
    pub request_id: Option<u64>,
    pub what: Result<W, Direct>,
}

/// The open requests of a JSON-RPC codec.
#[derive(Debug)]
pub struct RpcCalls<W> {
    book: CallBook<RpcCtx<W>>,
}

impl<W> RpcCalls<W> {
    /// Close `call` without a body; the request id of its frame, if it had one.
    pub fn close(&mut self, call: CallId) -> Option<u64> {
        self.book.close(call).and_then(|c| c.request_id)
    }
}

impl<W> Default for RpcCalls<W> {
    fn default() -> Self {
        RpcCalls {
            book: CallBook::default(),
        }
    }
}

/// A client message the codec reads further.
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A response to one of the server's requests (an answer to an input request).
    Response { id: Value, body: Map<String, Value> },
    /// What the frame already decodes to: a malformed message answered with its JSON-RPC
    /// error, or a notification ignored.
    Done(Decoded),
}

/// A client's answer to a server request: nothing to reply, the service takes it.
pub fn client_answer(request: Request) -> Decoded {
    Decoded {
        exchange: ExchangeKind::Answer,
        call: None,
        ask: Ask::Service(request),
    }
}

impl<W> RpcCalls<W> {
    /// Read a client frame.
    pub fn read(&mut self, frame: &toolop::transport::OutFrame) -> Incoming {
        match read(&frame.body) {
            Message::Invalid { id, code, message } => {
                // A reply to a body nobody can read still belongs to its POST.
                let request_id = if id.is_null() && code == PARSE_ERROR {
                    frame.request_id
                } else {
                    id.as_u64()
                };
                Incoming::Done(self.direct(
                    ExchangeKind::Other,
                    id,
                    request_id,
                    Direct::Error(code, message),
                ))
            }
            Message::Notification => Incoming::Done(Decoded {
                exchange: ExchangeKind::Other,
                call: None,
                ask: Ask::Nothing,
            }),
            Message::Request { id, method, params } => Incoming::Request { id, method, params },
            Message::Response { id, body } => Incoming::Response { id, body },
        }
    }

    /// Decode the open `call` again another way, under the same id (the network and the server
    /// room track it by that id): `what` is how its reply is now worked out, `ask` what the
    /// server is asked. `None` when `call` is not open.
    pub fn redecode(
        &mut self,
        call: CallId,
        exchange: ExchangeKind,
        what: Result<W, Direct>,
        ask: Ask,
    ) -> Option<Decoded> {
        let (id, request_id) = self.book.get(call).map(|c| (c.id.clone(), c.request_id))?;
        self.book.replace(
            call,
            RpcCtx {
                id,
                request_id,
                what,
            },
        );
        Some(Decoded {
            exchange,
            call: Some(call),
            ask,
        })
    }

    /// A request the codec answers itself with `d`.
    pub fn direct(
        &mut self,
        exchange: ExchangeKind,
        id: Value,
        request_id: Option<u64>,
        d: Direct,
    ) -> Decoded {
        let call = self.book.open(RpcCtx {
            id,
            request_id,
            what: Err(d),
        });
        Decoded {
            exchange,
            call: Some(call),
            ask: Ask::Codec,
        }
    }

    /// A request for the service; its reply goes back under its JSON-RPC id.
    pub fn service(
        &mut self,
        exchange: ExchangeKind,
        id: Value,
        what: W,
        request: Request,
    ) -> Decoded {
        let request_id = id.as_u64();
        let call = self.book.open(RpcCtx {
            id,
            request_id,
            what: Ok(what),
        });
        Decoded {
            exchange,
            call: Some(call),
            ask: Ask::Service(request),
        }
    }

    /// The reply frame to `call`: a throttle from in front of the server, the codec's own answer,
    /// or `body` of the service's answer; the body's id is the request's, or the one the shape
    /// names (a reply naming another request).
    pub fn encode(
        &mut self,
        call: CallId,
        response: &Response,
        shape: &Shape,
        body: impl FnOnce(&W) -> Direct,
    ) -> InFrame {
        let Some(ctx) = self.book.close(call) else {
            return frame(
                None,
                &error(&Value::Null, INTERNAL_ERROR, "no such request"),
            );
        };
        let body_id = shape
            .body_call
            .and_then(|c| self.book.get(c))
            .map_or_else(|| ctx.id.clone(), |o| o.id.clone());
        let made;
        let direct = match (&ctx.what, response) {
            (
                _,
                Response::Throttled {
                    throttle,
                    retry_after_ms,
                },
            ) => return throttled(ctx.request_id, throttle.http_status(), *retry_after_ms),
            // A replica's not-found for a request the codec answered itself.
            (Err(_), Response::NotFound { .. }) => {
                made = Direct::Error(INVALID_PARAMS, "Task not found".into());
                &made
            }
            (Err(d), _) => d,
            (Ok(w), _) => {
                made = body(w);
                &made
            }
        };
        direct.frame(ctx.request_id, &body_id)
    }
}

/// The frame of a 429/503 from something in front of the server: HTTP status and Retry-After,
/// no JSON-RPC body.
pub fn throttled(request_id: Option<u64>, status: u16, retry_after_ms: u64) -> InFrame {
    InFrame {
        request_id,
        http_status: status,
        retry_after_ms: Some(retry_after_ms),
        body: Vec::new(),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Simulated time as ISO 8601: 2026-12-01T00:00:00Z plus `ms`, with milliseconds (`.123Z`) or,
/// with `micros`, microseconds (`.123000Z`, the Python SDK's spelling).
pub fn iso8601(ms: u64, micros: bool) -> String {
    const DAY_MS: u64 = 86_400_000;
    let days = days_from_civil(2026, 12, 1) + (ms / DAY_MS) as i64;
    let (y, mo, d) = civil_from_days(days);
    let rem = ms % DAY_MS;
    let (h, mi, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    // Digits pushed by hand: `format!` cost a percent of a gate run (two stamps per task shown).
    let mut out = String::with_capacity(27);
    let mut push = |v: u64, width: u32, after: char| {
        for p in (0..width).rev() {
            let digit = (v / 10u64.pow(p) % 10) as u8;
            out.push(char::from(b'0' + digit));
        }
        out.push(after);
    };
    // The simulation starts in 2026 and lasts days: the year has four digits.
    debug_assert!((0..10_000).contains(&y), "year {y} out of four digits");
    push(y as u64, 4, '-');
    push(mo as u64, 2, '-');
    push(d as u64, 2, 'T');
    push(h, 2, ':');
    push(mi, 2, ':');
    push(s, 2, '.');
    if micros {
        push(milli * 1000, 6, 'Z');
    } else {
        push(milli, 3, 'Z');
    }
    out
}

/// The fields every MCP Task object starts with: id, status, creation and update times
/// (`micros`: the Python SDK's microsecond spelling).
pub fn task_head(id: &str, v: &super::codec::TaskView, micros: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(id));
    m.insert("status".into(), json!(v.status.as_str()));
    m.insert("createdAt".into(), json!(iso8601(v.created_at_ms, micros)));
    m.insert(
        "lastUpdatedAt".into(),
        json!(iso8601(v.updated_at_ms, micros)),
    );
    m
}

/// What a `tools/call` names: the tool, the toolop idempotency key, the script in its
/// arguments; or the `-32602` to answer.
pub fn call_parts(
    params: &Value,
) -> Result<(String, Option<String>, super::script::TaskScript), Direct> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Direct::Error(INVALID_PARAMS, "Invalid params: missing tool name".into()))?;
    let key = params
        .get("_meta")
        .and_then(|m| m.get(META_IDEMPOTENCY_KEY))
        .and_then(Value::as_str)
        .map(str::to_string);
    let script = super::script::TaskScript::from_arguments(params.get("arguments"))
        .map_err(|e| Direct::Error(INVALID_PARAMS, e))?;
    Ok((name.to_string(), key, script))
}

/// The `tools/list` entries of `tools`; `execution.taskSupport` only where the protocol has it.
pub fn tool_descriptors(tools: &[super::codec::FakeTool], with_task_support: bool) -> Vec<Value> {
    tools
        .iter()
        .map(|t| tool_descriptor(t, with_task_support))
        .collect()
}

/// An MCP tool descriptor; `execution.taskSupport` only where the protocol has it.
fn tool_descriptor(t: &super::codec::FakeTool, with_task_support: bool) -> Value {
    let mut d = json!({"name": t.name, "inputSchema": {"type": "object"}});
    if let Some(ts) = t.task_support.filter(|_| with_task_support) {
        let word = match ts {
            toolop::protocol::TaskSupport::Forbidden => "forbidden",
            toolop::protocol::TaskSupport::Optional => "optional",
            toolop::protocol::TaskSupport::Required => "required",
        };
        d["execution"] = json!({ "taskSupport": word });
    }
    if let Some(ms) = t.sync_upper_bound_ms {
        d["_meta"] = json!({ META_SYNC_UPPER_BOUND_MS: ms });
    }
    d
}

/// A JSON-RPC codec: its open requests, and how it words the service's answer to each.
pub(crate) trait RpcCodec {
    type What;
    fn calls(&mut self) -> &mut RpcCalls<Self::What>;
    fn reply_body(&self, what: &Self::What, response: &Response, shape: &Shape) -> Direct;
    /// The body of this server's HTTP 404 for a session it does not know.
    fn session_gone_body(&self) -> Vec<u8>;
}

/// [`RpcCalls::encode`] for a codec that keeps its calls in itself.
pub(crate) fn encode_reply<C: RpcCodec>(
    codec: &mut C,
    call: CallId,
    response: &Response,
    shape: &Shape,
) -> InFrame {
    if *response == Response::SessionGone {
        let request_id = codec.calls().close(call);
        return InFrame {
            request_id,
            http_status: 404,
            retry_after_ms: None,
            body: codec.session_gone_body(),
        };
    }
    let mut calls = std::mem::take(codec.calls());
    let frame = calls.encode(call, response, shape, |what| {
        codec.reply_body(what, response, shape)
    });
    *codec.calls() = calls;
    frame
}

/// A result's text blocks, the last one dropped when `cut` (a truncation the fault layer asked
/// for).
pub fn content_blocks(text: &str, blocks: u32, cut: bool) -> Vec<Value> {
    let shown = if cut {
        blocks.saturating_sub(1)
    } else {
        blocks
    };
    (1..=shown).map(|i| json!({"type": "text", "text": crate::fake::script::TaskScript::block_text(text, i, blocks)})).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_count_from_the_epoch_of_the_simulation() {
        assert_eq!(iso8601(0, false), "2026-12-01T00:00:00.000Z");
        assert_eq!(
            iso8601(86_400_000 * 31 + 3_723_004, false),
            "2027-01-01T01:02:03.004Z"
        );
        assert_eq!(iso8601(1, true), "2026-12-01T00:00:00.001000Z");
        assert_eq!(civil_from_days(days_from_civil(2028, 2, 29)), (2028, 2, 29));
        assert_eq!(
            iso8601(86_400_000 * 400 + 45_296_789, true),
            "2028-01-05T12:34:56.789000Z"
        );
    }

    /// The typed envelopes write the bytes their `Value`s write, for results, ids and errors.
    #[test]
    fn a_typed_envelope_writes_the_bytes_of_its_value() {
        let results = [
            json!({}),
            json!({"task": {"taskId": "t-1", "status": "working", "ttl": null, "pollInterval": 500}}),
            json!({"content": [{"type": "text", "text": "a \"quoted\" line\nand \u{e9}"}], "isError": false, "_meta": {"k": [1, 2.5, -3]}}),
        ];
        let ids = [
            json!(7),
            json!(null),
            json!("server-error"),
            json!(1u64 << 60),
        ];
        for id in &ids {
            for r in &results {
                let d = Direct::Result(r.clone());
                assert_eq!(d.frame(Some(3), id), frame(Some(3), &d.body(id)), "{r}");
            }
            for (code, message) in [
                (INVALID_PARAMS, "Task not found"),
                (TOOL_ERROR, "b\u{fc}se \"x\""),
            ] {
                let d = Direct::Error(code, message.into());
                assert_eq!(d.frame(None, id), frame(None, &d.body(id)), "{message}");
            }
        }
    }

    /// The digits pushed by hand spell what `format!` spelt, over ten years of instants.
    #[test]
    fn timestamps_match_the_formatted_spelling() {
        let mut ms = 0u64;
        while ms < 86_400_000 * 3_650 {
            let (y, mo, d) =
                civil_from_days(days_from_civil(2026, 12, 1) + (ms / 86_400_000) as i64);
            let rem = ms % 86_400_000;
            let (h, mi, s, milli) = (
                rem / 3_600_000,
                rem / 60_000 % 60,
                rem / 1000 % 60,
                rem % 1000,
            );
            let want = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z");
            assert_eq!(iso8601(ms, false), want);
            let micros = format!(
                "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
                milli * 1000
            );
            assert_eq!(iso8601(ms, true), micros);
            ms += 7_777_777_777 / 1000 + 1;
        }
    }

    #[test]
    fn messages_are_read_by_shape() {
        assert!(matches!(
            read(b"{"),
            Message::Invalid {
                code: PARSE_ERROR,
                ..
            }
        ));
        assert!(matches!(
            read(b"[1]"),
            Message::Invalid {
                code: INVALID_REQUEST,
                ..
            }
        ));
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","method":"x"}"#),
            Message::Notification
        ));
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","id":3,"method":"x"}"#),
            Message::Request { .. }
        ));
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Message::Response { .. }
        ));
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","id":3}"#),
            Message::Invalid {
                code: INVALID_REQUEST,
                ..
            }
        ));
    }
}
