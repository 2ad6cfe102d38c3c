//! The executor's end of a connection ([`SimTransport`]), and on MCP lanes over Streamable HTTP
//! (`server.transport = "http"`) its session: what the live transport
//! (`toolop::transport::http`, its `session.rs`) does when a server answers HTTP 404 for the
//! session, carried over the simulated network.
//!
//! - The runner's own `initialize` and `notifications/initialized` are kept as they go by (the
//!   transport reads the JSON-RPC envelope and nothing else).
//! - A 404 to a request sent on the current session means the server forgot it (it restarted).
//!   The 404 still reaches the runner: the adapter reads it as an error of that exchange, never
//!   as "not found". The transport replays the runner's `initialize` under an id of its own at
//!   once; once it is answered, frames name the new session and the runner's
//!   `notifications/initialized` goes again.
//! - Nothing is held meanwhile: a frame goes out naming the session the transport has, and the
//!   server answers 404 for a forgotten one (see [`Transport::send`] below).
//! - Each frame names its session ([`Tag`]); an `initialize` names none and opens the next one.
//! - A process starts on the session the executors' store keeps for the lane ([`Kept`]), as
//!   `toolop resume` does: the runner's `initialize` is answered from it and its
//!   `notifications/initialized` is not sent again (it went out in the process that opened the
//!   session). A session a transport opens is kept only if the store still holds the one the
//!   transport started from or lost; if another process kept a new one first, the transport
//!   adopts that one instead (two processes that lost the same session to a restart end on
//!   one: `mcp_replicas` seed 2932, where each opened its own and one's tasks were hidden from
//!   the other). Servers that show a task only to the session that created it (the TS and
//!   Python SDKs) so show every process the tasks of the others; a forgotten kept session meets
//!   404 as above. The live code does the same (`toolop::transport::http::SessionStore`).
//! - A replay unanswered within the request timeout, or refused, is sent again, up to
//!   [`REINIT_ATTEMPTS_MAX`] times a round; after a spent round the session stays lost, and the
//!   next 404 on it starts another round.
//!
//! The live transport does the same since session 43, when the gate showed what holding sends
//! costs (it had held them, and gone on without a session after a spent round, which a server
//! answers 400 for good). It is not this code: it starts a round at the runner's next send rather
//! than at the 404, waits 100 ms doubling between refused attempts, and names a new session only
//! once its `notifications/initialized` went out; `tests/http_reinit.rs` and the live matrix run
//! it against a scripted server and each SDK. This copy shows what the executor's core and
//! adapters do with a server that restarts under them while the process lives on.

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::{Duration, Sleep};
use toolop::transport::{InFrame, OutFrame, Transport, TransportError};

use super::{SharedNet, Tag};

/// JSON-RPC ids of the transport's own `initialize` replays start here, far above any id a
/// runner gives (`incarnation * 10^9 + n`).
pub const REINIT_ID_BASE: u64 = 1 << 52;
/// Replays of the runner's `initialize` in one round (the next 404 starts another).
pub const REINIT_ATTEMPTS_MAX: u32 = 5;
/// Frames one receive takes in before it yields (the transport's own answers are swallowed).
const RECV_TURNS_MAX: usize = 64;

/// The HTTP sessions of one lane: those its server knows (opened since it last restarted; a
/// server holds any number), how many were opened, and the one the executors' store keeps.
#[derive(Default)]
pub(super) struct LaneSessions {
    pub(super) known: BTreeSet<u64>,
    pub(super) opened: u64,
    pub(super) kept: Option<Kept>,
}

/// A session kept across processes (the live `KeptSession`): its number and the reply to the
/// `initialize` that opened it.
#[derive(Clone, Debug)]
pub struct Kept {
    pub session: u64,
    pub initialize_reply: Vec<u8>,
}

/// One HTTP session as the executor's transport keeps it.
#[derive(Default)]
pub struct Session {
    /// The session the store kept when the process started: the runner's `initialize` is
    /// answered from it.
    answer_locally: Option<Kept>,
    /// The runner's `notifications/initialized` after a locally answered `initialize` is not
    /// sent: the session's went out in the process that opened it.
    swallow_initialized: bool,
    /// The runner's `initialize`, replayed for every new session.
    initialize: Option<OutFrame>,
    /// The runner's `notifications/initialized`, sent again once a replay is answered.
    initialized: Option<OutFrame>,
    /// The session frames name now (the simulator's stand-in for an `Mcp-Session-Id`), learnt
    /// from the answer to the `initialize` that opened it, as a client learns the header.
    current: u64,
    /// The session this transport last took from or gave to the store (what a swap expects).
    base: Option<u64>,
    /// The runner's own `initialize` requests on their way, with the session each opens.
    opening: Vec<(u64, u64)>,
    reinit: Option<Reinit>,
    /// The newest request id the runner sent.
    newest_sent: u64,
    /// `newest_sent` when the current session began: a 404 answering a request up to it is the
    /// old session's, already dealt with.
    session_began_after: u64,
    /// Replays sent so far (they number the replays' ids).
    replays: u64,
}

impl Session {
    pub(super) fn new(kept: Option<Kept>) -> Session {
        Session {
            base: kept.as_ref().map(|k| k.session),
            answer_locally: kept,
            ..Session::default()
        }
    }
}

/// The reply to the runner's `initialize` (request `id`), answered from a kept session.
fn kept_reply(kept: &Kept, id: Option<u64>) -> Option<InFrame> {
    let mut reply: Value = serde_json::from_slice(&kept.initialize_reply).ok()?;
    reply.get("result")?;
    reply["id"] = Value::from(id?);
    Some(InFrame {
        request_id: id,
        http_status: 200,
        retry_after_ms: None,
        body: serde_json::to_vec(&reply).ok()?,
    })
}

struct Reinit {
    id: u64,
    attempt: u32,
    /// The session this replay opens.
    session: u64,
    /// Fires when the replay has gone unanswered for a request timeout. Kept here, not made in
    /// `recv`: the runner polls a receive future once and drops it, and a timer dropped with it
    /// would never fire.
    timeout: Pin<Box<Sleep>>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    method: Option<&'a str>,
}

fn method_of(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|e| e.method.map(str::to_string))
}

/// The executor's end of one connection.
pub struct SimTransport {
    pub(super) net: SharedNet,
    pub(super) conn: u32,
    pub(super) lane: usize,
    pub(super) rx: mpsc::UnboundedReceiver<InFrame>,
    /// Answers the transport gives itself (an `initialize` answered from a kept session),
    /// taken before the network's.
    pub(super) local: VecDeque<InFrame>,
    /// Set on MCP lanes over HTTP sessions.
    pub(super) session: Option<Session>,
}

impl SimTransport {
    /// Send `frame` naming the current session.
    fn send_raw(&self, frame: OutFrame) -> Result<(), TransportError> {
        let session = self.session.as_ref().map_or(0, |s| s.current);
        let tag = Tag {
            session,
            opens_session: false,
        };
        self.net
            .lock()
            .expect("net lock")
            .send(self.conn, frame, tag)
    }

    /// Send an `initialize`, which names no session and opens the next one; returns that one.
    fn send_opening(&mut self, frame: OutFrame) -> (u64, Result<(), TransportError>) {
        let mut net = self.net.lock().expect("net lock");
        let tag = Tag {
            session: net.open_session(self.lane),
            opens_session: true,
        };
        let sent = net.send(self.conn, frame, tag);
        (tag.session, sent)
    }

    /// A session opened: have the store keep it, and name from now on the one the store holds
    /// (this one, or another process's kept first). Returns whether it was this one.
    fn stand_on(&mut self, session: u64, initialize_reply: &[u8]) -> bool {
        let base = self.session.as_ref().expect("an HTTP session").base;
        let new = Kept {
            session,
            initialize_reply: initialize_reply.to_vec(),
        };
        let held = self
            .net
            .lock()
            .expect("net lock")
            .swap_kept(self.lane, base, new);
        let s = self.session.as_mut().expect("an HTTP session");
        s.current = held.session;
        s.base = Some(held.session);
        held.session == session
    }

    fn request_timeout_ms(&self) -> u64 {
        self.net.lock().expect("net lock").ctx.request_timeout_ms
    }

    /// Send the runner's `initialize` again under an id of the transport's own (attempt
    /// `attempt`; none once the round's attempts are spent). Without one to replay the transport
    /// closes: the process ends and the world restarts it.
    fn replay_initialize(&mut self, attempt: u32) -> Result<(), TransportError> {
        let timeout_ms = self.request_timeout_ms();
        let conn = u64::from(self.conn);
        let s = self.session.as_mut().expect("an HTTP session");
        let Some(init) = s.initialize.clone() else {
            return Err(TransportError::Disconnected);
        };
        if attempt >= REINIT_ATTEMPTS_MAX {
            // The round is spent; the session stays lost and the next 404 starts another.
            s.reinit = None;
            return Ok(());
        }
        s.replays += 1;
        let id = REINIT_ID_BASE + conn * 1_000_000 + s.replays;
        let mut body: Value =
            serde_json::from_slice(&init.body).map_err(|_| TransportError::Disconnected)?;
        body["id"] = Value::from(id);
        let frame = OutFrame {
            request_id: Some(id),
            body: serde_json::to_vec(&body).expect("a JSON value serializes"),
            http: None,
        };
        let (session, sent) = self.send_opening(frame);
        self.session.as_mut().expect("an HTTP session").reinit = Some(Reinit {
            id,
            attempt,
            session,
            timeout: Box::pin(tokio::time::sleep(Duration::from_millis(timeout_ms))),
        });
        sent
    }

    /// A frame arrived: the answer to a replay is the transport's own; a 404 to a request sent
    /// on the current session starts a replay. Returns what the runner gets.
    fn take_in(&mut self, frame: InFrame) -> Result<Option<InFrame>, TransportError> {
        let Some(s) = self.session.as_mut() else {
            return Ok(Some(frame));
        };
        if let Some(i) = s
            .opening
            .iter()
            .position(|&(id, _)| Some(id) == frame.request_id)
        {
            let (_, session) = s.opening.remove(i);
            // The first answer stands, as the runner takes the first (its handshake retries
            // `initialize` when an answer is slow): a later one switching sessions would hide
            // every task created since from a server that binds tasks to sessions
            // (`mcp_replicas` seed 1705: two answers 640 ms apart, the first process's polls
            // answered "not found" for the tasks it had just created).
            if frame.http_status == 200 && s.current == 0 && !self.stand_on(session, &frame.body) {
                // Adopted: that session's initialized went out in the process that opened it.
                self.session
                    .as_mut()
                    .expect("an HTTP session")
                    .swallow_initialized = true;
            }
            return Ok(Some(frame));
        }
        let answers_replay = s.reinit.as_ref().map(|r| (r.id, r.attempt, r.session));
        match (frame.request_id, answers_replay) {
            (Some(id), Some((replay, attempt, session))) if id == replay => {
                if frame.http_status != 200 {
                    self.replay_initialize(attempt + 1)?;
                    return Ok(None);
                }
                s.reinit = None;
                s.session_began_after = s.newest_sent;
                let initialized = s.initialized.clone();
                // An adopted session had its initialized from the process that opened it.
                if self.stand_on(session, &frame.body) {
                    if let Some(n) = initialized {
                        self.send_raw(n)?;
                    }
                }
                Ok(None)
            }
            // An answer to an earlier replay: the transport's own, and moot.
            (Some(id), _) if id >= REINIT_ID_BASE => Ok(None),
            (Some(id), None) if frame.http_status == 404 && id > s.session_began_after => {
                self.replay_initialize(0)?;
                Ok(Some(frame))
            }
            _ => Ok(Some(frame)),
        }
    }

    /// [`Transport::recv`] as a poll: frames, and the replay's timeout.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<InFrame>> {
        // Bounded: each turn takes a frame from the network, or spends one of a replay's
        // attempts; past the bound the task is woken to go on.
        if let Some(f) = self.local.pop_front() {
            return Poll::Ready(Some(f));
        }
        for _ in 0..RECV_TURNS_MAX {
            let timed_out = self
                .session
                .as_mut()
                .and_then(|s| s.reinit.as_mut())
                .and_then(|r| r.timeout.as_mut().poll(cx).is_ready().then_some(r.attempt));
            if let Some(attempt) = timed_out {
                if self.replay_initialize(attempt + 1).is_err() {
                    return Poll::Ready(None);
                }
                continue;
            }
            let frame = match self.rx.poll_recv(cx) {
                Poll::Ready(Some(frame)) => frame,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            };
            match self.take_in(frame) {
                Ok(Some(f)) => return Poll::Ready(Some(f)),
                Ok(None) => {}
                Err(_) => return Poll::Ready(None),
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Transport for SimTransport {
    fn send(&mut self, frame: OutFrame) -> Result<(), TransportError> {
        let Some(s) = self.session.as_mut() else {
            return self.send_raw(frame);
        };
        if let Some(id) = frame.request_id {
            s.newest_sent = s.newest_sent.max(id);
        }
        if s.initialize.is_none() || s.initialized.is_none() {
            match method_of(&frame.body).as_deref() {
                Some("initialize") => {
                    s.initialize = Some(frame.clone());
                    let kept = s.answer_locally.take();
                    if let Some(reply) = kept.as_ref().and_then(|k| kept_reply(k, frame.request_id))
                    {
                        s.current = kept.map_or(0, |k| k.session);
                        s.session_began_after = s.newest_sent;
                        s.swallow_initialized = true;
                        self.local.push_back(reply);
                        return Ok(());
                    }
                    let request_id = frame.request_id;
                    let (session, sent) = self.send_opening(frame);
                    // Bounded: a runner sends a handful of these at most, all before it runs.
                    if let Some(id) = request_id {
                        let s = self.session.as_mut().expect("an HTTP session");
                        s.opening.push((id, session));
                    }
                    return sent;
                }
                Some("notifications/initialized") => {
                    s.initialized = Some(frame.clone());
                    if std::mem::take(&mut s.swallow_initialized) {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        // Never held: a frame goes out on the session the transport has, even one the server
        // forgot (it answers 404, and the runner's own policy decides what to send again). A
        // frame held until a new session stood would leave late, for a node settled meanwhile
        // (mcp_ext_faults seed 1543 with `server.transport = "http"`: a submission counted lost,
        // its node handed to a person, then sent).
        self.send_raw(frame)
    }

    async fn recv(&mut self) -> Option<InFrame> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn received(&mut self) -> Option<InFrame> {
        if let Some(f) = self.local.pop_front() {
            return Some(f);
        }
        loop {
            let frame = self.rx.try_recv().ok()?;
            if let Some(f) = self.take_in(frame).ok()? {
                return Some(f);
            }
        }
    }
}
