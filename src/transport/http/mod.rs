//! MCP Streamable HTTP, client side (protocol revision 2025-11-25, `basic/transports`).
//!
//! - Every JSON-RPC message is one POST with `Accept: application/json, text/event-stream`.
//!   The reply is a JSON body or an SSE stream carrying any number of messages (server requests
//!   and notifications interleaved with the response); each message becomes one [`InFrame`]
//!   tagged with the POST's request id.
//! - `Mcp-Session-Id` from the initialize reply is sent on every later request;
//!   `MCP-Protocol-Version` on every request after initialize.
//! - A GET stream carries server-initiated messages; after a drop it is reopened with
//!   `Last-Event-ID` (bounded consecutive failures). A POST stream cut before its response
//!   arrived is resumed the same way when the server numbered its events.
//! - HTTP 404 on a request that carried a session id: the session is gone. The 404 reaches the
//!   adapter (an error of that exchange: never "not found", never a cancel); the transport then
//!   re-initializes by replaying the runner's own `initialize` and `notifications/initialized`,
//!   so later requests run on a new session. It does so beside the runner's sends, which hold
//!   nothing: until the new session stands they name the old one and meet 404 too, and the
//!   runner's policy decides what to send again (a send held until then left after its
//!   deadline, perhaps after its call went to a person: session 43). Tasks bound to the old
//!   session may be gone; the core finds that out by reading them.
//! - 429/503 and every other status reach the adapter with `http_status` and `retry_after_ms`.
//! - Requests are concurrent, except that `initialize`, notifications and responses are sent
//!   one at a time in order (the server must see `notifications/initialized` before the next
//!   request).
//! - Bodies and SSE events over `body_limit_bytes` are dropped (counted in the stats); the
//!   runner's own deadline then treats the request as lost.
//!
//! The transport reads the JSON-RPC envelope (method, id) and nothing else: what a message
//! means is the adapter's business.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Duration;

mod get;
mod reply;
mod session;

use get::get_loop;
#[cfg(test)]
use reply::answers;
use reply::read_reply;
use session::{kept_reply, note_version, promote, reinitialize};

use super::body::{self, error_text, BODY_LIMIT_BYTES_DEFAULT};
use super::live::{Deliver, DriverParts, LiveTransport, TransportStats};
use super::InFrame;

const HEADER_SESSION_ID: &str = "mcp-session-id";
const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
const HEADER_LAST_EVENT_ID: &str = "last-event-id";
const HEADER_METHOD: &str = "mcp-method";
const HEADER_NAME: &str = "mcp-name";
/// The first protocol revision whose servers route on `Mcp-Method` / `Mcp-Name`.
const ROUTING_HEADERS_SINCE: &str = "2026-07-28";
const ACCEPT_POST: &str = "application/json, text/event-stream";
/// Resumptions of one cut POST stream before the request is left to the runner's deadline.
const POST_RESUMES_MAX: u32 = 3;

/// How to reach one MCP server over Streamable HTTP.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The MCP endpoint, e.g. `http://127.0.0.1:3000/mcp`.
    pub url: String,
    /// Sent as `MCP-Protocol-Version` after initialize, until the server's initialize reply
    /// names the revision it chose (then that one).
    pub protocol_version: String,
    pub connect_timeout_ms: u64,
    /// Upper bound on one POST exchange, its SSE stream included. Generous: `tasks/result`
    /// streams stay open while the approval gate decides.
    pub request_timeout_ms: u64,
    /// Cap on one JSON body or one SSE event.
    pub body_limit_bytes: usize,
    /// Open the GET stream for server-initiated messages.
    pub get_stream: bool,
    /// Delay before reopening a dropped GET stream, unless the server sent `retry:`.
    pub get_retry_ms: u64,
    /// Consecutive failed GET attempts before the transport stops trying (until a new session).
    pub get_failures_max: u32,
    /// Attempts to re-initialize after a lost session.
    pub reinit_attempts_max: u32,
    /// Extra headers on every request (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
    /// A session an earlier process established (`toolop resume`): the runner's initialize is
    /// answered from it instead of opening a new session, so tasks a server scopes to its
    /// session stay visible. A server that no longer knows it answers 404: a new session then.
    #[serde(skip)]
    pub resume: Option<KeptSession>,
}

/// A session worth keeping across processes: its id and the initialize reply it got.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KeptSession {
    pub session_id: String,
    /// The JSON-RPC response to initialize, as the server sent it.
    pub initialize_reply: String,
}

/// The transport's current session, for the caller to persist.
pub type SessionHandle = Arc<Mutex<Option<KeptSession>>>;

/// Where the processes that reach one server keep their session (the CLI's store). A session a
/// transport opens replaces the kept one only if that is still the one the transport started
/// from or lost; if another process kept a new one first, the transport adopts it. Servers that
/// show a task only to the session that created it (the TS and Python SDKs) then show every
/// process the same tasks: two processes that each opened their own after a server restart
/// hid their tasks from each other (the simulator's `mcp_replicas` seed 2932, session 44).
pub trait SessionStore: Send + Sync {
    /// Keep `new` if the store holds `expected` (by id; `None`: nothing kept). Returns the
    /// session the store holds afterwards (`new`, or the one another process kept), or `None`
    /// when the store cannot say (the transport then stays on `new`).
    fn swap(&self, expected: Option<&str>, new: &KeptSession) -> Option<KeptSession>;
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            url: String::new(),
            protocol_version: "2025-11-25".into(),
            connect_timeout_ms: 10_000,
            request_timeout_ms: 300_000,
            body_limit_bytes: BODY_LIMIT_BYTES_DEFAULT,
            get_stream: true,
            get_retry_ms: 1_000,
            get_failures_max: 20,
            reinit_attempts_max: 5,
            headers: Vec::new(),
            resume: None,
        }
    }
}

#[derive(Default)]
struct Session {
    id: Option<String>,
    /// Bumped for every new session, so a late 404 from an old one is not taken for the new one.
    generation: u64,
    /// A 404 said the session is gone; re-initialize before the next send.
    lost: bool,
    /// A re-initialization runs (its own task). Sends go on meanwhile, naming the session the
    /// transport has: a forgotten one is answered 404, and the runner's own policy decides
    /// what to send again.
    reinitializing: bool,
    /// The session a re-initialization opened, not named by requests until its
    /// `notifications/initialized` went out (a server may refuse a request before it).
    opened: Option<Option<String>>,
    /// `notifications/initialized` went out on this session: the GET stream may open.
    ready: bool,
    /// The `protocolVersion` the server chose in its initialize reply (it may answer an older
    /// revision than we asked: rmcp 3.11.0 answers 2025-11-25 to 2026-07-28). Sent as
    /// `MCP-Protocol-Version` from then on, instead of [`HttpConfig::protocol_version`].
    version: Option<String>,
    /// The runner's initialize request and initialized notification, replayed on re-init.
    init: Option<Value>,
    initialized: Option<Vec<u8>>,
    /// The session this transport last took from or gave to the store (what a swap expects).
    base: Option<String>,
    /// The runner's `initialize` was answered on a session another process opened (a kept
    /// one, or one adopted from the store), whose initialized notification went out then: the
    /// runner's is not sent.
    opened_elsewhere: bool,
}

struct Shared {
    cfg: HttpConfig,
    client: reqwest::Client,
    deliver: Deliver,
    session: Mutex<Session>,
    changed: Notify,
    kept: SessionHandle,
    store: Option<Arc<dyn SessionStore>>,
}

impl Shared {
    /// The protocol revision of the current session: the server's choice once it made one.
    fn protocol_version(&self) -> String {
        let s = self.session.lock().expect("session lock");
        s.version
            .clone()
            .unwrap_or_else(|| self.cfg.protocol_version.clone())
    }
}

/// Open a Streamable HTTP transport to `cfg.url`. Nothing is sent until the runner sends.
/// Must be called inside a tokio runtime.
pub fn connect(cfg: HttpConfig) -> Result<LiveTransport, String> {
    connect_keeping(cfg, None).map(|(t, _)| t)
}

/// As [`connect`], plus a handle on the session the transport holds (to keep it for a later
/// process: see [`HttpConfig::resume`]).
/// `store`: where processes share the session (see [`SessionStore`]); without one the
/// transport keeps its own.
pub fn connect_keeping(
    cfg: HttpConfig,
    store: Option<Arc<dyn SessionStore>>,
) -> Result<(LiveTransport, SessionHandle), String> {
    reqwest::Url::parse(&cfg.url).map_err(|e| format!("server URL \"{}\": {e}", cfg.url))?;
    let client = body::client(cfg.connect_timeout_ms)?;
    let kept: SessionHandle = Arc::new(Mutex::new(cfg.resume.clone()));
    let handle = kept.clone();
    Ok((
        LiveTransport::start(move |parts| drive(cfg, client, kept, store, parts)),
        handle,
    ))
}

enum Envelope {
    Initialize(Value),
    /// A request, with its `Mcp-Method` / `Mcp-Name` routing headers (protocol 2026-07-28).
    Request(Vec<(&'static str, String)>),
    /// A notification or a response: no reply but the HTTP status.
    Other {
        initialized: bool,
    },
}

fn envelope(body: &[u8]) -> Envelope {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Envelope::Other { initialized: false };
    };
    let method = v.get("method").and_then(Value::as_str);
    let has_id = v.get("id").is_some_and(|id| !id.is_null());
    match (method, has_id) {
        (Some("initialize"), true) => Envelope::Initialize(v),
        (Some(m), true) => {
            // rmcp 3.11 at 2026-07-28 routes on these and answers 400 (-32020) without them;
            // earlier servers ignore unknown headers. `Mcp-Name`: the tool, or the task.
            let name = v["params"]["name"]
                .as_str()
                .or_else(|| v["params"]["taskId"].as_str());
            let mut headers = vec![(HEADER_METHOD, m.to_string())];
            headers.extend(name.map(|n| (HEADER_NAME, n.to_string())));
            Envelope::Request(headers)
        }
        (m, _) => Envelope::Other {
            initialized: m == Some("notifications/initialized"),
        },
    }
}

async fn drive(
    cfg: HttpConfig,
    client: reqwest::Client,
    kept: SessionHandle,
    store: Option<Arc<dyn SessionStore>>,
    mut parts: DriverParts,
) {
    let get_stream = cfg.get_stream;
    // A kept session is live until the server says otherwise; its initialized notification
    // went out in the process that opened it.
    let mut answer_locally = cfg.resume.clone().filter(|k| !k.session_id.is_empty());
    let shared = Arc::new(Shared {
        cfg,
        client,
        deliver: parts.deliver,
        session: Mutex::default(),
        changed: Notify::new(),
        kept,
        store,
    });
    if let Some(k) = &answer_locally {
        let mut s = shared.session.lock().expect("session lock");
        s.id = Some(k.session_id.clone());
        s.base = Some(k.session_id.clone());
        s.generation = 1;
    }
    // Dropping the set (when the transport aborts this task) aborts every exchange in it.
    let mut set = JoinSet::new();
    if get_stream {
        set.spawn(get_loop(shared.clone()));
    }
    while let Some(frame) = parts.out.recv().await {
        while set.try_join_next().is_some() {}
        if shared.deliver.closed() {
            return;
        }
        if frame.http.is_some() {
            tracing::warn!(
                "MCP transport got a plain-HTTP frame; it speaks JSON-RPC only (frame dropped)"
            );
            continue;
        }
        let reinit = {
            let mut s = shared.session.lock().expect("session lock");
            let start = s.lost && !s.reinitializing;
            s.reinitializing |= start;
            start
        };
        if reinit {
            // Not awaited: a frame held until a new session stands would leave late, after the
            // runner counted it lost at its deadline and perhaps handed its call to a person
            // (the simulator's gate: mcp_ext_faults seed 1543 over HTTP, session 43, a
            // submission sent after its node's hand-off).
            let shared = shared.clone();
            set.spawn(async move {
                reinitialize(&shared).await;
                shared.session.lock().expect("session lock").reinitializing = false;
            });
        }
        match envelope(&frame.body) {
            Envelope::Initialize(v) => {
                let kept = answer_locally.take();
                let local = kept.as_ref().and_then(|k| kept_reply(k, &v));
                if let Some(body) = &local {
                    note_version(&shared, body);
                } else if kept.is_some() {
                    // A kept reply that cannot answer: open a session as if none was kept (an
                    // answer is not taken while a session stands).
                    let mut s = shared.session.lock().expect("session lock");
                    s.id = None;
                    s.generation = 0;
                }
                {
                    let mut s = shared.session.lock().expect("session lock");
                    s.init = Some(v);
                    s.opened_elsewhere |= local.is_some();
                }
                if let Some(body) = local {
                    let reply = InFrame {
                        request_id: frame.request_id,
                        http_status: 200,
                        retry_after_ms: None,
                        body,
                    };
                    shared.deliver.frame(reply);
                    continue;
                }
                // In order: the session id must be known before the next message goes out.
                if let Some(resp) = post(&shared, frame.body, true, &[]).await {
                    set.spawn(read_reply(shared.clone(), resp, frame.request_id, true));
                }
            }
            Envelope::Request(headers) => {
                let shared = shared.clone();
                let headers = if shared.protocol_version().as_str() >= ROUTING_HEADERS_SINCE {
                    headers
                } else {
                    Vec::new()
                };
                set.spawn(async move {
                    if let Some(resp) = post(&shared, frame.body, false, &headers).await {
                        read_reply(shared, resp, frame.request_id, false).await;
                    }
                });
            }
            Envelope::Other { initialized } => {
                if initialized {
                    let opened_elsewhere = {
                        let mut s = shared.session.lock().expect("session lock");
                        s.initialized = Some(frame.body.clone());
                        std::mem::take(&mut s.opened_elsewhere)
                    };
                    if opened_elsewhere {
                        mark_ready(&shared);
                        continue;
                    }
                }
                if let Some(resp) = post(&shared, frame.body, false, &[]).await {
                    if initialized && resp.status().is_success() {
                        mark_ready(&shared);
                    }
                    set.spawn(read_reply(shared.clone(), resp, frame.request_id, false));
                }
            }
        }
    }
}

fn mark_ready(shared: &Shared) {
    shared.session.lock().expect("session lock").ready = true;
    shared.changed.notify_waiters();
}

/// One POST; the session bookkeeping its headers call for. `None` when it failed below HTTP.
async fn post(
    shared: &Shared,
    body: Vec<u8>,
    initialize: bool,
    extra: &[(&'static str, String)],
) -> Option<reqwest::Response> {
    let (session_id, generation) = {
        let s = shared.session.lock().expect("session lock");
        (if initialize { None } else { s.id.clone() }, s.generation)
    };
    let resp = send_post(shared, body, initialize, session_id.as_deref(), extra).await?;
    note_session(shared, &resp, initialize, session_id.is_some(), generation);
    Some(resp)
}

/// One POST naming `session_id`, a session not yet the transport's (a re-initialization's, before
/// its initialized notification went out): no session bookkeeping.
async fn post_on(
    shared: &Shared,
    body: Vec<u8>,
    session_id: Option<String>,
) -> Option<reqwest::Response> {
    send_post(shared, body, false, session_id.as_deref(), &[]).await
}

async fn send_post(
    shared: &Shared,
    body: Vec<u8>,
    initialize: bool,
    session_id: Option<&str>,
    extra: &[(&'static str, String)],
) -> Option<reqwest::Response> {
    let mut req = shared
        .client
        .post(&shared.cfg.url)
        .header(reqwest::header::ACCEPT, ACCEPT_POST)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .timeout(Duration::from_millis(shared.cfg.request_timeout_ms))
        .body(body);
    if !initialize {
        req = req.header(HEADER_PROTOCOL_VERSION, shared.protocol_version());
    }
    if let Some(id) = session_id {
        req = req.header(HEADER_SESSION_ID, id);
    }
    for (k, v) in &shared.cfg.headers {
        req = req.header(k, v);
    }
    for (k, v) in extra {
        req = req.header(*k, v);
    }
    TransportStats::bump(&shared.deliver.stats.requests);
    match req.send().await {
        Ok(resp) => Some(resp),
        Err(e) => {
            TransportStats::bump(&shared.deliver.stats.failures);
            tracing::info!("POST {} failed: {}", shared.cfg.url, error_text(&e));
            None
        }
    }
}

/// Keep the session id an initialize reply hands out; a 404 on a request that carried the
/// current session id means that session is gone.
fn note_session(
    shared: &Shared,
    resp: &reqwest::Response,
    initialize: bool,
    had_session: bool,
    generation: u64,
) {
    let header = resp
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut s = shared.session.lock().expect("session lock");
    if initialize && resp.status().is_success() && s.reinitializing {
        // Requests name it once its `notifications/initialized` went out (`session::promote`).
        s.opened = Some(header);
        return;
    }
    if initialize && resp.status().is_success() {
        if s.generation > 0 && !s.lost {
            // A session stands already: this answers a retried `initialize` of the runner's
            // handshake, which took the first answer. Switching now would hide every task
            // created on the first session from a server that binds tasks to sessions (the
            // simulator's `mcp_replicas` seed 1705, session 44).
            return;
        }
        drop(s);
        // Ready once the runner's initialized notification goes out (`mark_ready`).
        promote(shared, header, false);
        return;
    }
    if resp.status() == reqwest::StatusCode::NOT_FOUND
        && had_session
        && s.generation == generation
        && !s.lost
    {
        s.lost = true;
        TransportStats::bump(&shared.deliver.stats.sessions_lost);
        tracing::warn!(
            "session {} is gone (HTTP 404); re-initializing",
            s.id.as_deref().unwrap_or("?")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_tells_initialize_requests_and_the_rest_apart() {
        assert!(matches!(
            envelope(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Envelope::Initialize(_)
        ));
        match envelope(br#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t9"}}"#)
        {
            Envelope::Request(h) => assert_eq!(
                h,
                vec![
                    (HEADER_METHOD, "tasks/get".to_string()),
                    (HEADER_NAME, "t9".to_string())
                ]
            ),
            _ => panic!("a request"),
        }
        match envelope(
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"build_report"}}"#,
        ) {
            Envelope::Request(h) => assert_eq!(h[1], (HEADER_NAME, "build_report".to_string())),
            _ => panic!("a request"),
        }
        assert!(matches!(
            envelope(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Envelope::Other { initialized: true }
        ));
        assert!(matches!(
            envelope(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#),
            Envelope::Other { initialized: false }
        ));
        assert!(matches!(
            envelope(b"not json"),
            Envelope::Other { initialized: false }
        ));
    }

    #[test]
    fn a_response_is_recognised_by_its_id_and_not_by_a_request_with_that_id() {
        assert!(answers(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, Some(7)));
        assert!(!answers(
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            Some(7)
        ));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":8,"result":{}}"#, Some(7)));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, None));
    }
}
