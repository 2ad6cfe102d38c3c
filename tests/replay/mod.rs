//! Replays recorded real-server transcripts through an adapter and renders, for every
//! server-to-client message, how the adapter classified and decoded it: one line per message,
//! compared with a committed expectation file next to the transcript
//! (`tests/data/transcripts/<server>/<file>.<adapter>.expect`). A change in any classification
//! shows as a diff; after reading the diff and agreeing with it, `UPDATE_EXPECT=1 cargo test`
//! rewrites the files.
//!
//! Frames are built the way a transport builds them: an HTTP response or an SSE event on the
//! stream of one of our POSTs carries that request's id as `request_id` and its HTTP status;
//! the standalone GET stream and stdio carry none. The request kind of a reply comes from the
//! request the transcript shows (`tools/call` with `task` is a submit, without a synchronous
//! call; `tasks/get` a poll, and for the tasks extension also a fetch: both send it).

// Shared by several test crates, each of which uses part of it (the tasks-extension tests
// replay only the stdio transcript).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use toolop::protocol::{Adapter, Inbound, Reply, RequestKind, ResultView, TaskView};
use toolop::transport::InFrame;

pub const TRANSCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/transcripts");

/// One server-to-client message: where it is in the transcript and the frame a transport
/// would hand the adapter.
pub struct Message {
    pub label: String,
    pub session: String,
    pub frame: InFrame,
}

/// A transcript: the requests we sent, per session and id, and the server's messages in order.
#[derive(Default)]
pub struct Transcript {
    pub requests: BTreeMap<(String, u64), Value>,
    pub messages: Vec<Message>,
}

fn records(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}:{}: {e}", i + 1)))
        .collect()
}

/// The `data:` payloads of an SSE body, one per event, skipping empty ones (priming events).
pub fn sse_data(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in body
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .chain([""])
    {
        if line.is_empty() {
            let joined = data.join("\n");
            if !joined.is_empty() {
                events.push(joined);
            }
            data.clear();
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    events
}

/// A Streamable HTTP transcript (`http_request` / `http_response` / `sse_event` records).
pub fn http_transcript(dir: &str, file: &str) -> Transcript {
    let mut t = Transcript::default();
    for rec in records(&format!("{TRANSCRIPTS}/{dir}/{file}.jsonl")) {
        let seq = rec["seq"].as_u64().expect("seq");
        let session = rec["session"].as_str().unwrap_or_default().to_string();
        let (status, for_id, texts) = match rec["kind"].as_str() {
            Some("http_request") => {
                if let (Some(id), Some(_)) =
                    (rec["body"]["id"].as_u64(), rec["body"]["method"].as_str())
                {
                    t.requests.insert((session, id), rec["body"].clone());
                }
                continue;
            }
            Some("http_response") => {
                let body = rec["body_raw"].as_str().unwrap_or_default();
                // "(text/event-stream follows ...)", "(GET stream events follow)": the recorder's
                // placeholders; the events are records of their own.
                if body.starts_with("(") && body.ends_with(")") {
                    continue;
                }
                let texts = if body.starts_with("event:") || body.starts_with("id:") {
                    sse_data(body)
                } else {
                    vec![body.to_string()]
                };
                (
                    rec["status"].as_u64().expect("status") as u16,
                    rec["for_id"].as_u64(),
                    texts,
                )
            }
            Some("sse_event") => (
                200,
                rec["stream_for_id"].as_u64(),
                vec![rec["data_raw"].as_str().unwrap_or_default().to_string()],
            ),
            _ => continue,
        };
        // Only a POST of one of our requests ties its response to that request (our answer
        // to a server request is a POST too, but a response, and gets no correlation).
        let request_id = for_id.filter(|id| t.requests.contains_key(&(session.clone(), *id)));
        let many = texts.len() > 1;
        for (i, text) in texts.into_iter().enumerate() {
            let label = if many {
                format!("{seq}#{}", i + 1)
            } else {
                seq.to_string()
            };
            let frame = InFrame {
                request_id,
                http_status: status,
                retry_after_ms: None,
                body: text.into_bytes(),
            };
            t.messages.push(Message {
                label,
                session: session.clone(),
                frame,
            });
        }
    }
    t
}

/// A stdio transcript (`direction` / `message` records; rmcp), restricted to `sessions` if
/// given. Server stderr lines are not messages.
pub fn stdio_transcript(dir: &str, file: &str, sessions: Option<&[&str]>) -> Transcript {
    let mut t = Transcript::default();
    for rec in records(&format!("{TRANSCRIPTS}/{dir}/{file}.jsonl")) {
        let session = rec["session"].as_str().unwrap_or_default().to_string();
        if sessions.is_some_and(|s| !s.contains(&session.as_str())) {
            continue;
        }
        let msg = &rec["message"];
        match rec["direction"].as_str() {
            Some("client->server") => {
                if let (Some(id), Some(_)) = (msg["id"].as_u64(), msg["method"].as_str()) {
                    t.requests.insert((session, id), msg.clone());
                }
            }
            Some("server->client") => {
                let label = rec["seq"].as_u64().expect("seq").to_string();
                let frame = InFrame::message(serde_json::to_vec(msg).expect("json"));
                t.messages.push(Message {
                    label,
                    session,
                    frame,
                });
            }
            _ => {}
        }
    }
    t
}

/// The request kinds a reply to `request` is decoded as (the tasks extension sends `tasks/get`
/// for both a poll and a fetch), or the negotiation method it answers.
enum Decode {
    Kinds(Vec<RequestKind>),
    Initialize,
    ListTools,
    Unknown(String),
}

fn decode_as(request: &Value, ext: bool) -> Decode {
    let method = request["method"].as_str().unwrap_or_default();
    Decode::Kinds(match method {
        "initialize" => return Decode::Initialize,
        "tools/list" => return Decode::ListTools,
        // The extension's per-request capabilities replace the session's (§16): `_meta` with
        // client capabilities that lack the extension is a synchronous call.
        "tools/call" if ext => {
            match request["params"]["_meta"].get("io.modelcontextprotocol/clientCapabilities") {
                Some(caps)
                    if caps["extensions"]
                        .get("io.modelcontextprotocol/tasks")
                        .is_none() =>
                {
                    vec![RequestKind::SubmitSync]
                }
                _ => vec![RequestKind::Submit],
            }
        }
        "tools/call" if request["params"].get("task").is_some() => vec![RequestKind::Submit],
        "tools/call" => vec![RequestKind::SubmitSync],
        "tasks/list" => vec![RequestKind::Lookup],
        "tasks/get" if ext => vec![RequestKind::Poll, RequestKind::Fetch],
        "tasks/get" => vec![RequestKind::Poll],
        "tasks/result" if !ext => vec![RequestKind::Fetch],
        "tasks/cancel" => vec![RequestKind::Cancel],
        "tasks/update" => vec![RequestKind::InputResponse],
        other => return Decode::Unknown(other.to_string()),
    })
}

/// The replay of `t` through `adapter`, one line per server message.
pub fn render(adapter: &dyn Adapter, t: &Transcript, ext: bool) -> String {
    let mut out = String::new();
    for m in &t.messages {
        let line = match adapter.classify(&m.frame) {
            Inbound::Ignored { what } => format!("ignored: {what}"),
            Inbound::StatusPushed(v) => format!("status pushed {}", task(&v)),
            Inbound::Malformed { reason } => format!("MALFORMED: {reason}"),
            Inbound::ServerRequest(r) => format!(
                "server request id={} method={} answered {}",
                r.id,
                r.method,
                r.answer.name()
            ),
            Inbound::InputRequest(r) => format!(
                "input request id={} task={} schema={} message={}",
                r.server_request_id,
                r.related_operation_id.as_deref().unwrap_or("-"),
                short_digest(&r.schema_digest),
                quote(&r.message)
            ),
            Inbound::Response { rpc_id } => match t.requests.get(&(m.session.clone(), rpc_id)) {
                None => format!("response to request {rpc_id}, which was never sent"),
                Some(request) => match decode_as(request, ext) {
                    Decode::Initialize => match adapter.decode_initialize(&m.frame) {
                        Ok(c) => format!(
                            "initialize: {} tasks(call={} cancel={} list={}) idempotency={}",
                            c.protocol_version,
                            c.tasks_tool_call,
                            c.tasks_cancel,
                            c.tasks_list,
                            c.idempotency_by_key
                        ),
                        Err(e) => format!("initialize refused: {e}"),
                    },
                    Decode::ListTools => match adapter.decode_list_tools(&m.frame) {
                        Ok((tools, next)) => {
                            let tools: Vec<String> = tools
                                .iter()
                                .map(|t| {
                                    format!(
                                        "{}={}",
                                        t.name,
                                        json_name(
                                            &serde_json::to_value(t.task_support).expect("json")
                                        )
                                    )
                                })
                                .collect();
                            format!(
                                "tools/list: {} next={}",
                                tools.join(" "),
                                next.as_deref().unwrap_or("-")
                            )
                        }
                        Err(e) => format!("tools/list refused: {e}"),
                    },
                    Decode::Unknown(method) => {
                        format!("reply to {method}, which the executor never sends")
                    }
                    Decode::Kinds(kinds) => kinds
                        .iter()
                        .map(|k| {
                            format!(
                                "{}: {}",
                                k.name(),
                                reply(&adapter.decode_reply(*k, &m.frame))
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" | "),
                },
            },
        };
        out.push_str(&format!("seq {}: {line}\n", m.label));
    }
    out
}

/// The file an adapter's replay of a transcript is compared with.
pub fn expect_path(dir: &str, file: &str, adapter: &dyn Adapter) -> PathBuf {
    PathBuf::from(format!(
        "{TRANSCRIPTS}/{dir}/{file}.{}.expect",
        adapter.id().name()
    ))
}

/// Compare with the committed file; rewrite it under `UPDATE_EXPECT=1` (as expect-test does).
pub fn check(actual: &str, path: PathBuf) {
    let header = format!(
        "# Replay of {} through the adapter: one line per server message.\n# Regenerate after review: UPDATE_EXPECT=1 cargo test -p toolop --test <adapter test>\n",
        path.file_name().and_then(|n| n.to_str()).unwrap_or_default()
    );
    expect_test::expect_file![path].assert_eq(&format!("{header}{actual}"));
}

/// Every transcript file (without `.jsonl`) of a server directory, sorted.
pub fn transcript_files(dir: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(format!("{TRANSCRIPTS}/{dir}"))
        .expect("transcript dir")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .into_string()
                .ok()?
                .strip_suffix(".jsonl")
                .map(str::to_string)
        })
        .collect();
    files.sort();
    files
}

pub fn reply(r: &Reply) -> String {
    match r {
        Reply::Submitted(v) => format!("submitted {}", task(v)),
        Reply::SubmitRefused { reason } => format!("submit_refused {}", quote(reason)),
        Reply::SubmitOutcomeUnknown { reason } => {
            format!("submit_outcome_unknown {}", quote(reason))
        }
        Reply::SyncResult(rv) => format!("sync_result {}", result(rv)),
        Reply::LookupFound(v) => format!("lookup_found {}", task(v)),
        Reply::LookupNotFound => "lookup_not_found".into(),
        Reply::LookupUnsupported => "lookup_unsupported".into(),
        Reply::Status(v) => format!("status {}", task(v)),
        Reply::NotFound { message } => format!("not_found {}", quote(message)),
        Reply::RateLimited { retry_after_ms } => {
            format!("rate_limited retry_after_ms={}", opt(*retry_after_ms))
        }
        Reply::Unavailable { retry_after_ms } => {
            format!("unavailable retry_after_ms={}", opt(*retry_after_ms))
        }
        Reply::Accepted => "accepted".into(),
        Reply::Result(rv) => format!("result {}", result(rv)),
        Reply::ResultIsError { code, message } => {
            format!("result_is_error {code} {}", quote(message))
        }
        Reply::NoResultStored { message } => format!("no_result_stored {}", quote(message)),
        Reply::CancelAcknowledged(v) => format!("cancel_ack {}", task(v)),
        Reply::CancelPending => "cancel_pending".into(),
        Reply::InputRequests(reqs) => {
            let reqs: Vec<String> = reqs
                .iter()
                .map(|r| {
                    format!(
                        "{}@{}:{}",
                        r.server_request_id,
                        r.related_operation_id.as_deref().unwrap_or("-"),
                        quote(&r.message)
                    )
                })
                .collect();
            format!("input_requests [{}]", reqs.join(", "))
        }
        Reply::CancelRejectedTerminal { message } => {
            format!("cancel_rejected_terminal {}", quote(message))
        }
        Reply::Error { message } => format!("error {}", quote(message)),
        Reply::Malformed { reason } => format!("MALFORMED {}", quote(reason)),
    }
}

fn opt(o: Option<u64>) -> String {
    o.map_or("-".to_string(), |v| v.to_string())
}

fn task(v: &TaskView) -> String {
    let mut s = format!(
        "id={} status={} ttl={} poll={} msg={}",
        v.operation_id,
        json_name(&serde_json::to_value(v.status).expect("json")),
        opt(v.ttl_ms),
        opt(v.poll_interval_ms),
        v.status_message.as_deref().map_or("-".to_string(), quote)
    );
    if let Some(h) = &v.hint_problem {
        s.push_str(&format!(" HINT {}", quote(h)));
    }
    s
}

fn result(rv: &ResultView) -> String {
    let verified = match &rv.problem {
        None if rv.verified => "verified".to_string(),
        None => "UNVERIFIED".to_string(),
        Some(p) => format!("UNVERIFIED {}", quote(p)),
    };
    format!(
        "{verified} is_error={} related={} digest={}",
        rv.is_error,
        rv.related_operation_id.as_deref().unwrap_or("-"),
        short_digest(&rv.digest)
    )
}

fn short_digest(d: &str) -> &str {
    &d[..d.len().min(12)]
}

/// A JSON string literal: one line whatever the text holds.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn json_name(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}
