//! The simulated network between executor processes and the fake servers, with the fault layer
//! on it. The network carries frames but never reads them: each lane's codec decodes a request
//! as it enters (into a neutral exchange the rules judge), and encodes each reply as it leaves
//! (after the rules' neutral edits). Fault rules ([`rules`]) return a [`Verdict`] per leg.
//!
//! Attribution: the call node of an exchange comes from the world's own knowledge (the fake
//! service knows which node a task belongs to from the script it was submitted with; the caller
//! registered which node a submission key belongs to), and the executor state a fault met from
//! the trace. The network never reads the executor's ledger.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};
use toolop::transport::{InFrame, OutFrame, TransportError};

use crate::fake::codec::{Ask, CallId, Decoded, ExchangeKind, Response};
use crate::fake::FakeServer;
use crate::scenario::Protocol;
use crate::series::faults::{catalogue, FaultKind, SharedPlan};
use crate::trace::{Dir, FaultDetail, NetVerdict, SharedTrace, Shows, What};

pub mod rules;
mod session;

pub use session::{Kept, SimTransport, REINIT_ID_BASE};
use session::{LaneSessions, Session};

pub use rules::Verdict;

pub type SharedServer = Arc<Mutex<FakeServer>>;
/// Submission key -> call node, as the caller submitted them.
pub type SharedDirectory = Arc<Mutex<BTreeMap<String, String>>>;

/// Handles the network needs.
pub struct NetCtx {
    pub trace: SharedTrace,
    pub plan: SharedPlan,
    /// One server per lane.
    pub servers: Vec<SharedServer>,
    /// The protocol of each lane.
    pub lanes: Vec<Protocol>,
    pub directory: SharedDirectory,
    pub origin: Instant,
    pub latency_ms: [u64; 2],
    /// The executor's request timeout: a reply held longer than this arrives out of order.
    pub request_timeout_ms: u64,
    /// MCP lanes run Streamable HTTP sessions (`server.transport = "http"`): a server restart
    /// forgets them instead of closing connections, and each executor transport re-initializes
    /// ([`SimTransport`]).
    pub http_sessions: bool,
    /// Processes share a session through the executors' store (off only under the planted
    /// `fresh_session_per_process`: each process opens its own and keeps none).
    pub kept_sessions: bool,
}

/// A request on its way to a server.
pub struct Delivery {
    pub conn: u32,
    /// The network's number for the frame that carried it.
    pub frame: u64,
    pub decoded: Decoded,
    pub node: Option<String>,
    /// The HTTP session the frame names, if the lane runs them.
    pub tag: Tag,
}

/// The HTTP session a frame names ([`SimTransport`] on a lane with `server.transport = "http"`):
/// the simulator's stand-in for the `Mcp-Session-Id` header. Zero on other lanes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    pub session: u64,
    /// An `initialize`: it names no session, and opens `session`.
    pub opens_session: bool,
}

/// One open connection: which lane, which executor process.
struct Conn {
    tx: mpsc::UnboundedSender<InFrame>,
    /// Cleared when the connection drops: a delivery still on its way checks it when it lands.
    open: Arc<AtomicBool>,
    /// Frames on their way to this connection (first deliveries, by frame number): what a drop
    /// now cuts.
    on_the_way: Arc<Mutex<BTreeSet<u64>>>,
    lane: usize,
    epoch: u64,
    incarnation: u32,
}

impl Conn {
    /// The frames on their way to this connection now, in frame order.
    fn on_the_way(&self) -> Vec<u64> {
        self.on_the_way
            .lock()
            .expect("frames on the way")
            .iter()
            .copied()
            .collect()
    }
}

/// Where a frame goes and what the trace says about it, beyond the exchange.
struct Leg<'a> {
    dir: Dir,
    exchange: ExchangeKind,
    node: Option<&'a str>,
    /// The connection at the executor's end.
    conn: u32,
    request_id: Option<u64>,
    bytes: usize,
    verdict: NetVerdict,
    arrives_after_ms: Option<u64>,
    shows: Option<Shows>,
}

/// A request waiting for its reply.
#[derive(Clone, Debug)]
struct Inflight {
    conn: u32,
    exchange: ExchangeKind,
    node: Option<String>,
    /// The task the request named, if it named one.
    task: Option<String>,
}

/// A reply delivered, kept to be delivered again late (the late-duplicate fault).
#[derive(Clone, Debug)]
struct Past {
    conn: u32,
    epoch: u64,
    exchange: ExchangeKind,
    frame: InFrame,
    shows: Shows,
}

/// Replies kept per call node for late duplicates.
const HISTORY_PER_NODE: usize = 2;

/// The network: one server inbox per lane, one inbox per open executor connection.
pub struct Net {
    ctx: NetCtx,
    /// One inbox per server lane; empty once the series is over (see [`Net::shutdown`]).
    to_server: Vec<mpsc::UnboundedSender<Delivery>>,
    conns: BTreeMap<u32, Conn>,
    /// The newest execution epoch that has connected.
    newest_epoch: u64,
    inflight: BTreeMap<(usize, CallId), Inflight>,
    history: BTreeMap<String, Vec<Past>>,
    /// The late-duplicate index (`rules::late_duplicates`): every node of `history` that has a
    /// reply to duplicate (it is settled, or has a reply kept from an older epoch) is here; the
    /// set may also hold nodes that no longer have one, dropped when met.
    eligible: BTreeSet<String>,
    /// How much of the trace's settle log `eligible` has taken in.
    settled_seen: usize,
    /// What each lane's protocol can express.
    expressible: Vec<BTreeSet<FaultKind>>,
    /// The last frame number handed out.
    frames: u64,
    /// Each lane's HTTP sessions (lanes that run them).
    sessions: Vec<LaneSessions>,
}

pub type SharedNet = Arc<Mutex<Net>>;

impl Net {
    pub fn new(ctx: NetCtx, to_server: Vec<mpsc::UnboundedSender<Delivery>>) -> Net {
        let expressible = ctx
            .lanes
            .iter()
            .map(|&p| catalogue::row(p).iter().map(|c| c.fault).collect())
            .collect();
        let sessions = ctx.lanes.iter().map(|_| LaneSessions::default()).collect();
        Net {
            ctx,
            to_server,
            conns: BTreeMap::new(),
            newest_epoch: 0,
            inflight: BTreeMap::new(),
            history: BTreeMap::new(),
            eligible: BTreeSet::new(),
            settled_seen: 0,
            expressible,
            sessions,
            frames: 0,
        }
    }

    /// Drop every channel end the network holds. Tasks still parked on those channels when a
    /// series ends hold the world through their wakers; without this the cycle leaks the world.
    pub fn shutdown(&mut self) {
        self.to_server.clear();
        self.conns.clear();
        self.inflight.clear();
        self.history.clear();
        self.eligible.clear();
    }

    fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.ctx.origin).as_millis() as u64
    }

    fn draw(&self, lo: u64, hi: u64) -> u64 {
        self.ctx.plan.lock().expect("plan lock").draw(lo, hi)
    }

    fn latency(&self) -> u64 {
        let [lo, hi] = self.ctx.latency_ms;
        self.draw(lo, hi)
    }

    /// Whether `fault` fires now on `lane` (never, if the lane's protocol cannot express it);
    /// a firing is recorded with the state the trace shows for `node`.
    fn fire(&self, lane: usize, fault: FaultKind, node: Option<&str>, detail: FaultDetail) -> bool {
        self.fire_with(lane, fault, node, |_| detail)
    }

    /// [`Net::fire`], with the detail worked out (and its shape drawn) only once it fires.
    fn fire_with(
        &self,
        lane: usize,
        fault: FaultKind,
        node: Option<&str>,
        detail: impl FnOnce(&Net) -> FaultDetail,
    ) -> bool {
        if !self.expressible[lane].contains(&fault) {
            return false;
        }
        let now = self.now_ms();
        let Some(decision) = self
            .ctx
            .plan
            .lock()
            .expect("plan lock")
            .fire(fault, node, now)
        else {
            return false;
        };
        let detail = detail(self);
        self.record_fault(decision, fault, node, detail);
        true
    }

    fn record_fault(
        &self,
        decision: u64,
        fault: FaultKind,
        node: Option<&str>,
        detail: FaultDetail,
    ) {
        let now = self.now_ms();
        self.ctx
            .trace
            .lock()
            .expect("trace lock")
            .push_fault(now, decision, fault, node, detail);
    }

    /// Record one frame; returns the number it got.
    fn record(&mut self, leg: Leg) -> u64 {
        self.frames += 1;
        let (lane, epoch, incarnation) = self.end_of(leg.conn);
        let now = self.now_ms();
        let what = What::Net {
            dir: leg.dir,
            exchange: leg.exchange,
            node: leg.node.map(String::from),
            lane,
            epoch,
            incarnation,
            frame: self.frames,
            request_id: leg.request_id,
            bytes: leg.bytes,
            verdict: leg.verdict,
            arrives_after_ms: leg.arrives_after_ms,
            shows: leg.shows.map(Box::new),
        };
        self.ctx.trace.lock().expect("trace lock").push(now, what);
        self.frames
    }

    /// The lane and the executor process (epoch, incarnation) at the client end of `conn`, or
    /// zeros for a connection already closed.
    fn end_of(&self, conn: u32) -> (u32, u64, u32) {
        self.conns
            .get(&conn)
            .map_or((0, 0, 0), |c| (c.lane as u32, c.epoch, c.incarnation))
    }

    /// Open connection `conn` to `lane` for the executor process (`epoch`, `incarnation`).
    pub fn connect(
        net: &SharedNet,
        conn: u32,
        lane: usize,
        epoch: u64,
        incarnation: u32,
    ) -> SimTransport {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut n = net.lock().expect("net lock");
        if epoch > n.newest_epoch {
            n.newest_epoch = epoch;
            // Every kept reply of an older epoch is now a late duplicate to be.
            let older: Vec<String> = n
                .history
                .iter()
                .filter(|(_, past)| past.iter().any(|p| p.epoch < epoch))
                .map(|(node, _)| node.clone())
                .collect();
            n.eligible.extend(older);
        }
        n.conns.insert(
            conn,
            Conn {
                tx,
                open: Arc::new(AtomicBool::new(true)),
                on_the_way: Arc::new(Mutex::new(BTreeSet::new())),
                lane,
                epoch,
                incarnation,
            },
        );
        // A new process starts on the session its store keeps for the lane, as `toolop resume`
        // does: the runner's `initialize` is answered from it (none is kept under the planted
        // `fresh_session_per_process`: see `swap_kept`).
        let kept = n.sessions[lane].kept.clone();
        let session = n.http_session_lane(lane).then(|| Session::new(kept));
        SimTransport {
            net: net.clone(),
            conn,
            lane,
            rx,
            local: Default::default(),
            session,
        }
    }

    /// Close a connection: frames in flight to it are lost, as on a real dropped socket, and
    /// replies to its requests have nowhere to go.
    pub fn disconnect(&mut self, conn: u32) {
        if let Some(c) = self.conns.remove(&conn) {
            c.open.store(false, Ordering::Relaxed);
        }
        self.inflight.retain(|_, i| i.conn != conn);
    }

    /// Whether `lane` runs HTTP sessions (an MCP lane with `server.transport = "http"`).
    pub fn http_session_lane(&self, lane: usize) -> bool {
        self.ctx.http_sessions && self.ctx.lanes[lane] != Protocol::Aip151
    }

    /// Whether `lane`'s requests are HTTP requests, each on a connection of its own standing: an
    /// MCP lane over HTTP sessions, and every AIP-151 lane (the live `aip_http` transport is
    /// plain HTTP/JSON; a request whose connection fails is dropped and the process lives on).
    fn http_lane(&self, lane: usize) -> bool {
        self.http_session_lane(lane) || self.ctx.lanes[lane] == Protocol::Aip151
    }

    /// A dropped TCP connection under HTTP: the POSTs on it fail (what was on its way to the
    /// executor is lost, replies to its requests have nowhere to go), and the transport lives
    /// on, opening another for the next POST.
    fn cut_connection(&mut self, conn: u32) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.open.store(false, Ordering::Relaxed);
            c.open = Arc::new(AtomicBool::new(true));
            c.on_the_way = Arc::new(Mutex::new(BTreeSet::new()));
        }
        self.inflight.retain(|_, i| i.conn != conn);
    }

    /// The frames on their way to an executor over any open connection of `lane`.
    pub fn on_the_way(&self, lane: usize) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.lane == lane)
            .flat_map(Conn::on_the_way)
            .collect();
        out.sort_unstable();
        out
    }

    /// Close every connection of `lane` (its server restarted), as [`Net::disconnect`] does one.
    /// Returns the connections closed.
    pub fn disconnect_lane(&mut self, lane: usize) -> Vec<u32> {
        let conns: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| c.lane == lane)
            .map(|(&id, _)| id)
            .collect();
        for &conn in &conns {
            self.disconnect(conn);
        }
        conns
    }

    /// The server of `lane` restarted over HTTP sessions: it knows none of them now. Nothing is
    /// cut: a reply on its way had left the old process whole.
    pub fn forget_sessions(&mut self, lane: usize) {
        self.sessions[lane].known.clear();
    }

    /// Whether a frame naming `tag` on `lane` reaches the server's handlers, and the session it
    /// opens if it is an `initialize`. Asked only on lanes that run HTTP sessions.
    pub fn session_known(&mut self, lane: usize, tag: Tag) -> bool {
        let known = &mut self.sessions[lane].known;
        if tag.opens_session {
            known.insert(tag.session);
        }
        known.contains(&tag.session)
    }

    /// A number for the session the next `initialize` on `lane` opens (sessions are the lane
    /// server's, so processes can share one).
    fn open_session(&mut self, lane: usize) -> u64 {
        let s = &mut self.sessions[lane];
        s.opened += 1;
        s.opened
    }

    /// The executors' store keeps `new` as the lane's session if it still holds `expected` (the
    /// session the transport started from or lost; `None`: none), as the CLI's store swaps its
    /// kept-session row. Returns the session the store holds afterwards: `new`, or the one
    /// another process kept first, which the transport then adopts.
    fn swap_kept(&mut self, lane: usize, expected: Option<u64>, new: Kept) -> Kept {
        if !self.ctx.kept_sessions {
            return new;
        }
        let kept = &mut self.sessions[lane].kept;
        match kept {
            Some(k) if Some(k.session) != expected => k.clone(),
            _ => kept.insert(new).clone(),
        }
    }

    /// The newest open connection of a lane: where its server sends what it initiates.
    pub fn latest_connection(&self, lane: usize) -> Option<u32> {
        self.conns
            .iter()
            .rev()
            .find(|(_, c)| c.lane == lane)
            .map(|(&id, _)| id)
    }

    /// A frame from an executor: decoded by the lane's codec, judged, carried (or not).
    fn send(&mut self, conn: u32, frame: OutFrame, tag: Tag) -> Result<(), TransportError> {
        let Some(lane) = self.conns.get(&conn).map(|c| c.lane) else {
            return Err(TransportError::Disconnected);
        };
        let (request_id, bytes) = (frame.request_id, frame.body.len());
        let (decoded, node, key, task) = {
            let mut server = self.ctx.servers[lane].lock().expect("server lock");
            let decoded = server.decode(frame);
            let (node, key, task) = match &decoded.ask {
                Ask::Service(r) => {
                    let (node, key) = server.node_of(r);
                    (node, key, rules::task_of(r))
                }
                Ask::Codec | Ask::Nothing => (None, None, None),
            };
            (decoded, node, key, task)
        };
        let node = node.or_else(|| {
            key.and_then(|k| {
                self.ctx
                    .directory
                    .lock()
                    .expect("directory lock")
                    .get(&k)
                    .cloned()
            })
        });
        let exchange = decoded.exchange;
        if let Some(call) = decoded.call {
            self.inflight.insert(
                (lane, call),
                Inflight {
                    conn,
                    exchange,
                    node: node.clone(),
                    task,
                },
            );
        }
        let verdict = self.request_verdict(lane, &decoded, node.as_deref());
        let recorded = match &verdict {
            Verdict::Reply(Response::Throttled {
                throttle,
                retry_after_ms,
            }) => NetVerdict::Replica {
                status: throttle.http_status(),
                retry_after_ms: Some(*retry_after_ms),
            },
            Verdict::Reply(_) => NetVerdict::Replica {
                status: 404,
                retry_after_ms: None,
            },
            Verdict::Drop => NetVerdict::Lost,
            Verdict::Pass => NetVerdict::Deliver,
        };
        let frame_no = self.record(Leg {
            dir: Dir::ToServer,
            exchange,
            node: node.as_deref(),
            conn,
            request_id,
            bytes,
            verdict: recorded,
            arrives_after_ms: None,
            shows: None,
        });
        match verdict {
            Verdict::Reply(response) => {
                let call = decoded
                    .call
                    .expect("only requests awaiting a reply get one from a replica");
                self.inflight.remove(&(lane, call));
                let (frame, shown) = {
                    let mut server = self.ctx.servers[lane].lock().expect("server lock");
                    let frame = server.encode_reply(call, &response, &Default::default());
                    (frame, server.shows(exchange, &response))
                };
                let latency = self.latency();
                // The replica's answer is a frame to the executor like any other.
                let no = self.record(Leg {
                    dir: Dir::ToExecutor,
                    exchange,
                    node: node.as_deref(),
                    conn,
                    request_id: frame.request_id,
                    bytes: frame.body.len(),
                    verdict: NetVerdict::Deliver,
                    arrives_after_ms: Some(latency),
                    shows: Some(shown),
                });
                self.deliver_to(conn, frame, latency, Some(no));
            }
            Verdict::Drop => {}
            Verdict::Pass => {
                if let Some(tx) = self.to_server.get(lane).cloned() {
                    let latency = self.latency();
                    let delivery = Delivery {
                        conn,
                        frame: frame_no,
                        decoded,
                        node: node.clone(),
                        tag,
                    };
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(latency)).await;
                        // The server outlives every delivery in a series; a send after it ends is moot.
                        let _ = tx.send(delivery);
                    });
                }
            }
        }
        let (lane_no, epoch, incarnation) = self.end_of(conn);
        let on_the_way: Vec<u64> = self.conns.get(&conn).map_or(vec![], Conn::on_the_way);
        let cut = FaultDetail::Connection {
            exchange,
            lane: lane_no,
            epoch,
            incarnation,
            cut: on_the_way,
        };
        if self.fire(lane, FaultKind::ConnectionDrop, node.as_deref(), cut) {
            if self.http_lane(lane) {
                self.cut_connection(conn);
            } else {
                self.disconnect(conn);
            }
        }
        Ok(())
    }

    /// The server's reply to `call` on `lane`: judged, encoded, carried to the connection the
    /// request came from. Returns the frame's correlation id when the reply is on its way as the
    /// server wrote it (not lost, cut or rewritten).
    pub fn reply(&mut self, lane: usize, call: CallId, response: Response) -> Option<u64> {
        let Some(inflight) = self.inflight.remove(&(lane, call)) else {
            // Nobody waits for it (the request's connection record is gone): encode to close
            // the codec's books, carry nothing.
            let _ = self.ctx.servers[lane]
                .lock()
                .expect("server lock")
                .encode_reply(call, &response, &Default::default());
            return None;
        };
        let (caps, shown) = {
            let server = self.ctx.servers[lane].lock().expect("server lock");
            (server.caps(), server.shows(inflight.exchange, &response))
        };
        let info = rules::ReplyInfo::of(inflight.exchange, &response, caps, &shown);
        let v = self.reply_verdict(lane, call, &inflight, &info);
        let mut v = v;
        let mut frame = self.ctx.servers[lane]
            .lock()
            .expect("server lock")
            .encode_reply(call, &response, &v.shape);
        if v.cut_bytes && frame.body.len() >= 2 {
            let to_bytes = self.draw(1, frame.body.len() as u64 - 1) as usize;
            frame.body.truncate(to_bytes);
            v.verdict = NetVerdict::Truncated { to_bytes };
        }
        let node = inflight.node.as_deref();
        let lost = v.verdict == NetVerdict::Lost;
        // Drawn before the record so the trace can say when the frame arrives.
        let arrival = (!lost).then(|| self.latency() + v.extra_delay_ms);
        let no = self.record(Leg {
            dir: Dir::ToExecutor,
            exchange: inflight.exchange,
            node,
            conn: inflight.conn,
            request_id: frame.request_id,
            bytes: frame.body.len(),
            verdict: v.verdict.clone(),
            arrives_after_ms: arrival,
            shows: Some(shown.clone()),
        });
        let arrival = arrival?;
        let intact = matches!(
            v.verdict,
            NetVerdict::Deliver | NetVerdict::Held { .. } | NetVerdict::Duplicated { .. }
        );
        let request_id = frame.request_id.filter(|_| intact);
        self.note_old_epoch(lane, inflight.conn, node);
        self.copy_to_old_epoch(lane, inflight.conn, inflight.exchange, node, &frame, &shown);
        if let Some(after_ms) = v.duplicate_after_ms {
            self.deliver_to(inflight.conn, frame.clone(), after_ms, None);
        }
        self.deliver_to(inflight.conn, frame.clone(), arrival, Some(no));
        if let Some(node) = inflight.node {
            let epoch = self.conns.get(&inflight.conn).map_or(0, |c| c.epoch);
            let past = self.history.entry(node.clone()).or_default();
            if past.len() >= HISTORY_PER_NODE {
                past.remove(0);
            }
            past.push(Past {
                conn: inflight.conn,
                epoch,
                exchange: inflight.exchange,
                frame,
                shows: shown,
            });
            // Settled nodes are taken in from the trace's log; a node settled before it had
            // any kept reply is taken in here.
            let settled = || {
                let trace = self.ctx.trace.lock().expect("trace lock");
                trace.state_of(&node).is_some_and(|s| s.is_final())
            };
            if epoch < self.newest_epoch || settled() {
                self.eligible.insert(node);
            }
        }
        self.late_duplicates(lane);
        request_id
    }

    /// Where the server of `lane` sends something unasked. An input request rides the stream
    /// of a result read waiting on its task (the real SDKs send `elicitation/create` on the
    /// `tasks/result` stream that holds the task, spec/mcp-tasks.md), the newest such read;
    /// anything else, or an input request no read waits for, goes to the lane's newest
    /// connection (its standalone GET stream).
    fn push_target(&self, lane: usize, exchange: ExchangeKind, shown: &Shows) -> Option<u32> {
        let waiting = match (exchange, shown) {
            (ExchangeKind::ServerRequest, Shows::Input { task, .. }) => self
                .inflight
                .range((lane, CallId(0))..)
                .take_while(|((l, _), _)| *l == lane)
                .filter(|(_, i)| {
                    i.exchange == ExchangeKind::Fetch && i.task.as_deref() == Some(task.as_str())
                })
                // A dropped connection's reads left `inflight` with it (`disconnect`).
                .map(|(_, i)| i.conn)
                .max(),
            _ => None,
        };
        waiting.or_else(|| self.latest_connection(lane))
    }

    /// Something the server of `lane` sends unasked (an input request, a status notification):
    /// see [`Net::push_target`].
    pub fn push(
        &mut self,
        lane: usize,
        frame: InFrame,
        exchange: ExchangeKind,
        node: Option<String>,
        shown: Shows,
    ) {
        let Some(conn) = self.push_target(lane, exchange, &shown) else {
            return;
        };
        let mut verdict = NetVerdict::Deliver;
        let mut again = None;
        if exchange == ExchangeKind::ServerRequest
            && self.fire(
                lane,
                FaultKind::InputRequiredReplay,
                node.as_deref(),
                FaultDetail::Exchange { exchange },
            )
        {
            let after_ms = self.draw(1_000, 30_000);
            verdict = NetVerdict::Duplicated { after_ms };
            again = Some(after_ms);
        }
        let latency = self.latency();
        let no = self.record(Leg {
            dir: Dir::ToExecutor,
            exchange,
            node: node.as_deref(),
            conn,
            request_id: None,
            bytes: frame.body.len(),
            verdict,
            arrives_after_ms: Some(latency),
            shows: Some(shown.clone()),
        });
        self.note_old_epoch(lane, conn, node.as_deref());
        self.copy_to_old_epoch(lane, conn, exchange, node.as_deref(), &frame, &shown);
        if let Some(after_ms) = again {
            self.deliver_to(conn, frame.clone(), after_ms, None);
        }
        self.deliver_to(conn, frame, latency, Some(no));
    }

    /// A message reaching an executor of an older epoch than the newest one: the old-epoch
    /// fault, which follows from a rollback.
    fn note_old_epoch(&self, lane: usize, conn: u32, node: Option<&str>) {
        let old = self
            .conns
            .get(&conn)
            .is_some_and(|c| c.epoch < self.newest_epoch);
        if old && self.expressible[lane].contains(&FaultKind::OldEpochMessage) {
            let epochs = FaultDetail::Epochs {
                from: self.conns[&conn].epoch,
                to: self.newest_epoch,
            };
            self.record_fault(0, FaultKind::OldEpochMessage, node, epochs);
        }
    }

    /// The old-epoch fault: while an executor of an older epoch lingers after a rollback, a
    /// message for the newest one may reach it as well (a callback or reply routed to the old
    /// process). It must refuse it.
    fn copy_to_old_epoch(
        &mut self,
        lane: usize,
        conn: u32,
        exchange: ExchangeKind,
        node: Option<&str>,
        frame: &InFrame,
        shown: &Shows,
    ) {
        if self
            .conns
            .get(&conn)
            .is_none_or(|c| c.epoch < self.newest_epoch)
        {
            return;
        }
        let Some(old) = self
            .conns
            .iter()
            .find(|(_, c)| c.lane == lane && c.epoch < self.newest_epoch)
            .map(|(&id, c)| (id, c.epoch))
        else {
            return;
        };
        let epochs = FaultDetail::Epochs {
            from: old.1,
            to: self.newest_epoch,
        };
        if self.fire(lane, FaultKind::OldEpochMessage, node, epochs) {
            let latency = self.latency();
            let no = self.record(Leg {
                dir: Dir::ToExecutor,
                exchange,
                node,
                conn: old.0,
                request_id: frame.request_id,
                bytes: frame.body.len(),
                verdict: NetVerdict::ToOldEpoch,
                arrives_after_ms: Some(latency),
                shows: Some(shown.clone()),
            });
            self.deliver_to(old.0, frame.clone(), latency, Some(no));
        }
    }

    /// Carry `frame` to `conn` after `delay_ms`. `first` names the frame's number when this is
    /// its first delivery (not a duplicate's copy): it is then on the way until it lands, and a
    /// connection drop meanwhile records it as cut.
    fn deliver_to(&self, conn: u32, frame: InFrame, delay_ms: u64, first: Option<u64>) {
        let Some((tx, open, on_the_way)) = self
            .conns
            .get(&conn)
            .map(|c| (c.tx.clone(), c.open.clone(), c.on_the_way.clone()))
        else {
            return;
        };
        if let Some(no) = first {
            on_the_way.lock().expect("frames on the way").insert(no);
        }
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            if let Some(no) = first {
                on_the_way.lock().expect("frames on the way").remove(&no);
            }
            // A frame still on its way when its connection dropped is lost with it
            // (`mcp_ext_faults` seed 78901: a submission's reply landed 38 ms after the drop, in
            // the queue of a process already failing its requests as lost).
            if open.load(Ordering::Relaxed) {
                let _ = tx.send(frame);
            }
        });
    }
}
