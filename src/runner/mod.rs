//! The async shell around the core: owns the transport, timers, the QPS limiter and the ledger
//! handle. For each event it asks the core for a step, commits the step to the ledger (one
//! transaction), and only then executes the step's commands. Runs on real tokio in production
//! and on madsim's tokio in the simulator: the same code.

/// Whether the planted mutation `$name` is on (`toolop-sim mutants`); `false` in a build without
/// the `mutations` feature. A macro, as the core's `mutated!` is: the plant's name does not exist
/// without the feature, and cargo-mutants leaves macro arguments alone.
macro_rules! planted {
    ($runner:expr, $name:ident) => {{
        #[cfg(feature = "mutations")]
        {
            $runner
                .cfg
                .core
                .mutated(crate::core::mutation::Mutation::$name)
        }
        #[cfg(not(feature = "mutations"))]
        {
            false
        }
    }};
}

mod beat;
mod cancels;
mod commit;
mod dispatch;
mod handshake;
mod jitter;
mod lanes;
mod observe;
mod stall;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use std::future::Future;
use tokio::sync::mpsc;

use tokio::time::{Duration, Instant};

use crate::core::{CoreConfig, Event, Loss, QpsLimiter, Timer};
use crate::ledger::{Ledger, OutboxEntry};
use crate::protocol::{Adapter, ApprovalReply, Outbound, RequestKind};
use crate::record::AdapterId;
use crate::transport::Transport;
pub use commit::{CommitDelay, NoCommitDelay};
pub use jitter::Jitter;
use lanes::Lane;
pub use lanes::LaunchConfig;
pub use observe::{NullObserver, Observation, Observer};

pub type SharedLedger = Arc<Mutex<dyn Ledger + Send>>;

/// Milliseconds from `origin` (time zero of every `*_ms` value) to now; zero before it.
fn ms_since(origin: Instant) -> u64 {
    Instant::now().duration_since(origin).as_millis() as u64
}

/// What to do with a tool whose descriptor forbids tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoTaskSupport {
    /// Refuse the call (receipt `rejected`).
    Reject,
    /// Call it synchronously, bounded by the tool's published upper bound; no bound, no call.
    RunSync,
}

/// A 429 or 503 that asked this runner to wait before repeating `kind` for a call node: the
/// answer to request `seq`, which only an answer to a later request lifts.
#[derive(Clone, Copy, Debug)]
pub(super) struct RetryAfter {
    pub(super) until_ms: u64,
    pub(super) kind: RequestKind,
    pub(super) seq: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunnerConfig {
    pub core: CoreConfig,
    pub max_qps: u32,
    pub request_timeout_ms: u64,
    pub handshake_attempts: u32,
    /// How long the first handshake attempt waits; each retry waits twice as long, never more
    /// than `request_timeout_ms`. A lost `initialize` after a restart then costs one short wait,
    /// not a full request timeout, and a late answer to an earlier attempt is still taken.
    pub handshake_first_timeout_ms: u64,
    pub no_task_support: NoTaskSupport,
    /// Upper bound on loop iterations of one runner: a runaway loop ends, it never hangs.
    pub max_events: u64,
    /// Times an event is stepped again on a re-read record after another writer's commit
    /// landed between the read and this runner's commit.
    pub commit_conflict_retries: u32,
    /// How often the runner looks for cancel requests other processes wrote into the ledger
    /// (it also looks once when it starts). 0: only when it starts.
    pub cancel_request_check_ms: u64,
    /// The longest the runner sleeps with nothing due.
    pub idle_wake_ms: u64,
    /// How long a record asking for a cancel another process committed (and the server has
    /// not yet taken) must stay quiet before this process sends that cancel itself: the other
    /// process may have died between its commit and its send. Well above a round trip and a
    /// commit, so a live committer's record of the server's answer stands the watch down.
    pub cancel_take_up_ms: u64,
    /// How often this process writes its beat to the ledger (`Beat`): proof, to other
    /// processes on the same ledger, that it is alive though its commits may hold it. 0: never.
    /// Only for a process alone on its ledger: without beats another process takes a sent
    /// submission up at its start and concludes a request timeout after the later of the send's
    /// step and the take-up, so a sender whose commits or a pause hold it longer hands a live
    /// task to a person (`mcp_ext_replicas_nobeat` seeds 10217, 19382, 25685; the CLI always
    /// beats).
    pub beat_interval_ms: u64,
    /// How long after its newest beat a process counts as gone: a submission it sent is then
    /// another process's to take up. A few beats, so a slow write or two does not look like
    /// death.
    pub beat_timeout_ms: u64,
    /// Which adapter new operations go to, and which tools run in shadow mode.
    pub launch: LaunchConfig,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            core: CoreConfig::default(),
            max_qps: 20,
            request_timeout_ms: 10_000,
            handshake_attempts: 5,
            handshake_first_timeout_ms: 1_000,
            no_task_support: NoTaskSupport::Reject,
            max_events: 1_000_000,
            commit_conflict_retries: 8,
            cancel_request_check_ms: 1_000,
            idle_wake_ms: 60_000,
            cancel_take_up_ms: 500,
            beat_interval_ms: 1_000,
            beat_timeout_ms: 5_000,
            launch: LaunchConfig::default(),
        }
    }
}

/// One tool call handed to the executor.
#[derive(Clone, Debug, PartialEq)]
pub struct CallNode {
    pub id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// Chosen once by the caller and kept for every submission of this node.
    pub submission_key: String,
}

/// Everything a runner can be told from outside.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Submit(CallNode),
    Cancel {
        node: String,
    },
    Detach {
        node: String,
    },
    Approval {
        node: String,
        round: u32,
        schema_digest: String,
        reply: ApprovalReply,
    },
    /// An operator retires an adapter version: no new operations on it; its in-flight ones are
    /// still queried and reconciled until it reports itself drained.
    RetireAdapter(AdapterId),
    Shutdown,
}

/// A question for the approval gate. An accepted answer must conform to `requested_schema`
/// (see [`crate::approval`]); one that does not is not sent, and the gate is asked the same
/// question again with `refused_answer` saying why, up to [`APPROVAL_REASKS_MAX`] times a round.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRequest {
    pub node: String,
    pub operation_id: String,
    pub round: u32,
    pub request: serde_json::Value,
    pub requested_schema: serde_json::Value,
    pub schema_digest: String,
    pub deadline_ms: u64,
    /// Why the gate's previous answer to this round was refused; `None` on the first asking.
    pub refused_answer: Option<String>,
}

/// How often one round is asked again after a refused answer: a gate that keeps answering
/// wrong is told a few times, then the round waits for a conforming answer or its deadline.
pub const APPROVAL_REASKS_MAX: u32 = 3;

/// Checks returned content after acceptance (design.md: the output-validation hook).
pub trait OutputHook {
    fn check(&mut self, entry: &OutboxEntry) -> Result<(), String>;
}

pub struct AcceptAll;

impl OutputHook for AcceptAll {
    fn check(&mut self, _entry: &OutboxEntry) -> Result<(), String> {
        Ok(())
    }
}

/// Places where a crash loses the most: the simulator crashes the executor exactly there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashPoint {
    /// The ledger write is done, the sends it explains are not.
    AfterCommitBeforeSend,
    /// A reply arrived (the server acted), its ledger write is not done.
    AfterReplyBeforeCommit,
}

/// Fail points (FoundationDB's buggify, for crashes only). Production uses [`NoCrash`].
pub trait CrashPoints {
    fn crash_here(&mut self, point: CrashPoint, node: &str) -> bool;
}

pub struct NoCrash;

impl CrashPoints for NoCrash {
    fn crash_here(&mut self, _point: CrashPoint, _node: &str) -> bool {
        false
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// A fail point fired: the runner stopped dead, as a process would on a crash.
    Crashed(CrashPoint),
    Shutdown,
    /// The connection dropped; in-flight requests were reported lost. Restart to resume.
    Disconnected,
    HandshakeFailed(String),
    EventLimit,
    /// The ledger could not be read or written. Restart to resume from what it holds.
    LedgerFailed(String),
}

/// What an exit is called in observations, traces and timelines (never the `Debug` text).
impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Crashed(CrashPoint::AfterCommitBeforeSend) => {
                f.write_str("crashed after a commit, before its sends")
            }
            Exit::Crashed(CrashPoint::AfterReplyBeforeCommit) => {
                f.write_str("crashed after a reply, before its commit")
            }
            Exit::Shutdown => f.write_str("shut down"),
            Exit::Disconnected => f.write_str("disconnected"),
            Exit::HandshakeFailed(reason) => write!(f, "handshake failed: {reason}"),
            Exit::EventLimit => f.write_str("event limit reached"),
            Exit::LedgerFailed(error) => write!(f, "ledger failed: {error}"),
        }
    }
}

struct Pending {
    lane: usize,
    node: String,
    kind: RequestKind,
    seq: u64,
    epoch: u64,
    sent_ms: u64,
    deadline_ms: u64,
}

struct Queued {
    lane: usize,
    node: String,
    out: Outbound,
    seq: u64,
}

pub struct Runner {
    cfg: RunnerConfig,
    epoch: u64,
    origin: Instant,
    /// One lane per adapter (protocol version) this executor speaks, each with its transport.
    lanes: Vec<Lane>,
    ledger: SharedLedger,
    observer: Box<dyn Observer + Send>,
    hook: Box<dyn OutputHook + Send>,
    crash: Box<dyn CrashPoints + Send>,
    crashed: Option<CrashPoint>,
    /// Set when the ledger failed: the runner stops at its next turn.
    failed: Option<String>,
    commit_delay: Box<dyn CommitDelay>,
    /// Call nodes whose writes the ledger fenced: this runner no longer acts on them.
    fenced: BTreeSet<String>,
    /// Call nodes this runner settled itself (its own acceptance or hand-off): the queue guard
    /// against another process's settlement does not apply to them.
    settled_here: BTreeSet<String>,
    /// The record version this runner last read or wrote, per call node: a different version
    /// at the next read means another process (a replica on the same ledger) moved the node.
    seen_version: BTreeMap<String, u64>,
    /// Nodes whose submit timer was armed before another process's write this process has
    /// read since: a step that only read that write (a cancel click that changed nothing)
    /// must not hide it from the submission guard (mcp_replicas seed 574077). Cleared when
    /// a step of this process arms the submit timer again.
    submit_timer_outdated: BTreeSet<String>,
    /// Per call node, the newest cancel generation this runner sent a cancel for: a cancel
    /// another process committed is taken up from a reply at most once per generation.
    cancel_sent_generation: BTreeMap<String, u32>,

    /// Per call node, the last Retry-After this runner was given, until the server answers a
    /// later request: a node taken up from another process's record is not driven before it
    /// runs out, nor is the refused exchange repeated (`Runner::after_retry_after`).
    retry_after: BTreeMap<String, RetryAfter>,
    /// Per node: the kind of the last request this process sent for it, and when
    /// (`Runner::after_own_read`).
    last_sent: BTreeMap<String, (RequestKind, u64)>,
    /// Per call node, when this runner last sent a status read of it: a take-up from another
    /// process's record reads no sooner after it than the polling policy allows.
    last_read_sent_ms: BTreeMap<String, u64>,
    /// When to look for external cancel requests next.
    next_cancel_check_ms: u64,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
    jitter: Jitter,
    next_rpc_id: u64,
    /// This process's identity among those sharing the ledger (`Ctx::process`).
    process: u64,
    pending: BTreeMap<u64, Pending>,
    timers: BTreeSet<(u64, String, Timer)>,
    timer_at: BTreeMap<(String, Timer), u64>,
    queue: VecDeque<Queued>,
    /// Answers to server requests (lane, bytes): sent before the queue and outside the QPS
    /// limiter, because they are responses, not load, and a server may hang until it has them.
    answers: VecDeque<(usize, Vec<u8>)>,
    limiter: QpsLimiter,
    /// Refused answers per (node, round), for [`APPROVAL_REASKS_MAX`].
    approval_refusals: BTreeMap<(String, u32), u32>,
    /// Call nodes nothing of ours covers, and when to look at them again (see `stall.rs`).
    stall_at: BTreeMap<String, stall::Watch>,
}

impl Runner {
    /// `origin` is time zero for every `*_ms` value; `rpc_id_base` keeps ids of successive
    /// incarnations apart so a late reply can never match a new request. It is also this
    /// process's identity in the core (`Ctx::process`) until `with_process_id` says otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: RunnerConfig,
        epoch: u64,
        origin: Instant,
        adapter: Box<dyn Adapter + Send>,
        ledger: SharedLedger,
        observer: Box<dyn Observer + Send>,
        approvals: mpsc::UnboundedSender<ApprovalRequest>,
        jitter_seed: u64,
        rpc_id_base: u64,
    ) -> Runner {
        let limiter = QpsLimiter::new(cfg.max_qps);
        let lanes = vec![Lane::new(adapter, &cfg.core, cfg.request_timeout_ms)];
        Runner {
            cfg,
            epoch,
            origin,
            lanes,
            ledger,
            observer,
            hook: Box::new(AcceptAll),
            crash: Box::new(NoCrash),
            crashed: None,
            failed: None,
            commit_delay: Box::new(NoCommitDelay),
            fenced: BTreeSet::new(),
            settled_here: BTreeSet::new(),
            seen_version: BTreeMap::new(),
            submit_timer_outdated: BTreeSet::new(),
            cancel_sent_generation: BTreeMap::new(),
            retry_after: BTreeMap::new(),
            last_sent: BTreeMap::new(),
            last_read_sent_ms: BTreeMap::new(),
            next_cancel_check_ms: 0,
            approvals,
            jitter: Jitter::new(jitter_seed),
            next_rpc_id: rpc_id_base,
            process: rpc_id_base,
            pending: BTreeMap::new(),
            timers: BTreeSet::new(),
            timer_at: BTreeMap::new(),
            queue: VecDeque::new(),
            answers: VecDeque::new(),
            limiter,
            approval_refusals: BTreeMap::new(),
            stall_at: BTreeMap::new(),
        }
    }

    pub fn with_output_hook(mut self, hook: Box<dyn OutputHook + Send>) -> Self {
        self.hook = hook;
        self
    }

    /// This process's identity among the processes sharing the ledger (`Ctx::process`).
    pub fn with_process_id(mut self, process: u64) -> Self {
        self.process = process;
        self
    }

    pub fn with_crash_points(mut self, crash: Box<dyn CrashPoints + Send>) -> Self {
        self.crash = crash;
        self
    }

    /// Let every commit take the time `delay` says (tests and the simulator; production: none).
    pub fn with_commit_delay(mut self, delay: Box<dyn CommitDelay>) -> Self {
        self.commit_delay = delay;
        self
    }

    /// Speak one more protocol version, on its own transport (see [`Runner::run_lanes`]).
    pub fn with_lane(mut self, adapter: Box<dyn Adapter + Send>) -> Self {
        self.lanes.push(Lane::new(
            adapter,
            &self.cfg.core,
            self.cfg.request_timeout_ms,
        ));
        self
    }

    fn now_ms(&self) -> u64 {
        ms_since(self.origin)
    }

    /// What the core is told about this process and now, for a step with `jitter_permille`.
    fn ctx(&self, jitter_permille: u32) -> crate::core::Ctx {
        crate::core::Ctx {
            now_ms: self.now_ms(),
            jitter_permille,
            epoch: self.epoch,
            process: self.process,
            overtaken_sender_until_ms: None,
        }
    }

    fn observe(&mut self, obs: Observation) {
        let now = self.now_ms();
        self.observer.observe(now, obs);
    }

    fn at(&self, ms: u64) -> Instant {
        self.origin + Duration::from_millis(ms)
    }

    /// Negotiate, resume what the ledger holds in flight, then serve inputs and frames until
    /// told to stop, the connection drops, or the event limit is reached.
    pub async fn run<T: Transport>(
        self,
        transport: T,
        inputs: mpsc::UnboundedReceiver<Input>,
    ) -> Exit {
        self.run_lanes(vec![transport], inputs).await
    }

    /// As [`Runner::run`], with one transport per lane, in lane order. The process beats on
    /// the ledger meanwhile (`beat.rs`), beside the loop, and takes its beat away when it
    /// leaves other than by a crash.
    pub async fn run_lanes<T: Transport>(
        mut self,
        mut transports: Vec<T>,
        mut inputs: mpsc::UnboundedReceiver<Input>,
    ) -> Exit {
        let beats = beat::Beats {
            ledger: self.ledger.clone(),
            origin: self.origin,
            process: self.process,
            epoch: self.epoch,
            interval_ms: self.cfg.beat_interval_ms,
        };
        let beating = self.cfg.beat_interval_ms > 0;
        if beating {
            if let Err(e) = beats.beat() {
                self.ledger_failed(e);
                return self.stopped().expect("a failed ledger stops the runner");
            }
        }
        let beat_failed = {
            let live = self.live(&mut transports, &mut inputs);
            // `biased;`: the loop's own exit wins a tie with a failed beat.
            tokio::select! {
                biased;
                exit = live => Ok(exit),
                e = beats.run() => Err(e),
            }
        };
        let exit = match beat_failed {
            Ok(exit) => exit,
            Err(e) => {
                self.ledger_failed(e);
                let exit = self.stopped().expect("a failed ledger stops the runner");
                self.observe(Observation::Exit {
                    reason: exit.to_string(),
                });
                exit
            }
        };
        // A crash ends nothing: a dead process runs no clean-up, and its beat goes stale.
        let crashed = matches!(exit, Exit::Crashed(_)) && !planted!(self, EndBeatOnCrash);
        if beating && !crashed {
            beats.end();
        }
        exit
    }

    async fn live<T: Transport>(
        &mut self,
        transports: &mut [T],
        inputs: &mut mpsc::UnboundedReceiver<Input>,
    ) -> Exit {
        assert_eq!(transports.len(), self.lanes.len(), "one transport per lane");
        for (i, t) in transports.iter_mut().enumerate() {
            let caps = match self.lanes[i].adapter.configured_capabilities() {
                Some(caps) => Ok(caps),
                None => handshake::negotiate(self, i, t).await,
            };
            match caps {
                Ok(caps) => {
                    self.observe(Observation::Negotiated {
                        protocol_version: caps.protocol_version.clone(),
                        key_lookup: caps.idempotency_by_key,
                        tools: caps.tools.len(),
                    });
                    self.lanes[i].set_caps(caps);
                }
                Err(reason) => {
                    self.observe(Observation::HandshakeFailed {
                        reason: reason.clone(),
                    });
                    return Exit::HandshakeFailed(reason);
                }
            }
        }
        let in_flight = self.ledger.lock().expect("ledger lock").in_flight();
        let in_flight: Vec<String> = match in_flight {
            Ok(recs) => recs
                .into_iter()
                .filter(|r| r.execution_epoch <= self.epoch)
                .map(|r| r.call_node_id)
                .collect(),
            Err(e) => {
                self.ledger_failed(e);
                Vec::new()
            }
        };
        self.observe(Observation::Started {
            epoch: self.epoch,
            resumed: in_flight.len(),
        });
        for node in in_flight {
            self.resume_unless_held(&node).await;
        }
        let exit = self.serve(transports, inputs).await;
        // A crash that fired in the step that also found the connection gone (or the ledger
        // failed) is still a crash: the process died there, whatever it noticed on its way out
        // (mcp_sqlite seed 17403: a reply crashed the process as a dropped connection was being
        // read, and it left as "disconnected" and ended its beat).
        let exit = match self.crashed {
            Some(point) => Exit::Crashed(point),
            None => exit,
        };
        self.observe(Observation::Exit {
            reason: exit.to_string(),
        });
        exit
    }

    async fn serve<T: Transport>(
        &mut self,
        transports: &mut [T],
        inputs: &mut mpsc::UnboundedReceiver<Input>,
    ) -> Exit {
        for _ in 0..self.cfg.max_events {
            self.pick_up_cancel_requests().await;
            // A request whose deadline passed while this runner was busy (its commits held it
            // up) may have been answered meanwhile: what was delivered is read before anything
            // is declared lost, as a reply fully received is the server's answer (mcp_ext_replicas
            // seed 11: two slow commits of one node held the runner 11.5 s; two submissions'
            // replies, delivered at 1.7 s, lost to their timeouts, and on a server without key
            // lookups both live tasks went to a person).
            if self.pending_expired() {
                self.read_received(transports).await;
            }
            self.fire_due(transports).await;
            self.fire_stalls().await;
            if let Some(exit) = self.stopped() {
                return exit;
            }
            if let Err(exit) = self.flush(transports).await {
                return exit;
            }
            let wake = self.next_wake_ms();
            let sleep = tokio::time::sleep_until(self.at(wake));
            // `biased;`: tokio would otherwise pick branches in an order seeded process-wide,
            // and a seed run after another would differ from the same seed run alone.
            tokio::select! {
                biased;
                input = inputs.recv() => match input {
                    Some(Input::Shutdown) | None => {
                        // Replies already received are answers: write them down before going
                        // (mcp_ext_faults seed 1044363: a replica told to stop while its Start
                        // commits ran had three submissions' replies queued, each naming a
                        // created task; dropped, the ids were lost, and on a server without key
                        // lookups three live tasks went to a person). Sends they cause stay in
                        // the ledger for the next process, as after a crash.
                        self.read_received(transports).await;
                        return self.stopped().unwrap_or(Exit::Shutdown);
                    }
                    Some(input) => self.on_input(input).await,
                },
                (lane, frame) = next_frame(transports) => match frame {
                    Some(frame) => self.on_frame(lane, &frame).await,
                    None => {
                        self.read_received(transports).await;
                        self.fail_all_pending().await;
                        return Exit::Disconnected;
                    }
                },
                _ = sleep => {}
            }
            if let Some(exit) = self.stopped() {
                return exit;
            }
        }
        Exit::EventLimit
    }

    /// A crash point fired or the ledger failed: the runner stops where it stands.
    fn stopped(&self) -> Option<Exit> {
        if let Some(p) = self.crashed {
            return Some(Exit::Crashed(p));
        }
        self.failed.as_ref().map(|e| Exit::LedgerFailed(e.clone()))
    }

    fn next_wake_ms(&mut self) -> u64 {
        let now = self.now_ms();
        // Even with nothing to do, wake now and then: bounded waits everywhere.
        let mut wake = now + self.cfg.idle_wake_ms.max(1);
        if let Some((at, _, _)) = self.timers.first() {
            wake = wake.min(*at);
        }
        if let Some(d) = self.pending.values().map(|p| p.deadline_ms).min() {
            wake = wake.min(d);
        }
        if !self.queue.is_empty() {
            wake = wake.min(self.limiter.next_slot_ms(now));
        }
        if self.cfg.cancel_request_check_ms > 0 {
            wake = wake.min(self.next_cancel_check_ms);
        }
        if let Some(at) = self
            .stall_at
            .values()
            .filter(|w| w.urgent)
            .map(|w| w.at_ms)
            .min()
        {
            wake = wake.min(at);
        }
        wake.max(now)
    }

    /// A pending request's deadline has passed.
    fn pending_expired(&self) -> bool {
        let now = self.now_ms();
        self.pending.values().any(|p| p.deadline_ms <= now)
    }

    /// Lose the requests whose deadline passed, then fire the timers that fell due. Before each
    /// timer fires, what was delivered meanwhile is read: an answer that sat unread behind slow
    /// commits is the server's word, and a timer fired past it acts on an old view
    /// (mcp_ext_replicas seed 33673: a reply showing the task ended sat 4.2 s unread behind
    /// slow commits; the poll timer fired first and sent a needless read, and the fetch the
    /// reply then called for left 989 ms after it, the server asking for 1000 ms).
    async fn fire_due<T: Transport>(&mut self, transports: &mut [T]) {
        let now = self.now_ms();
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline_ms <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                self.lose(p, Loss::Deadline).await;
            }
        }
        while let Some((at, node, timer)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.read_received(transports).await;
            if self.stopped().is_some() {
                return;
            }
            let still_first = self
                .timers
                .first()
                .is_some_and(|(a, n, t)| *a == at && *n == node && *t == timer);
            if !still_first {
                // What was read moved or dropped this timer: look again.
                continue;
            }
            // Still first: take it off without cloning its node name again (once per timer).
            self.timers.pop_first();
            let key = (node, timer);
            self.timer_at.remove(&key);
            let (node, timer) = key;
            if timer == Timer::SubmissionLease && self.lease_held(&node) {
                continue;
            }
            self.handle(&node, Event::Timer(timer)).await;
        }
    }

    /// Send what the limiter admits now; the rest waits for its slot.
    async fn flush<T: Transport>(&mut self, transports: &mut [T]) -> Result<(), Exit> {
        let now = self.now_ms();
        while let Some((lane, body)) = self.answers.pop_front() {
            if transports[lane]
                .send(crate::transport::OutFrame {
                    request_id: None,
                    body,
                    http: None,
                })
                .is_err()
            {
                self.read_received(transports).await;
                self.fail_all_pending().await;
                return Err(Exit::Disconnected);
            }
        }
        if !self.queue.is_empty() {
            self.drop_fenced_sends();
        }
        let unlimited = planted!(self, NoQpsLimiter);
        while let Some(q) = self.queue.front() {
            if self.settled_in_ledger(&q.node) {
                let q = self.queue.pop_front().expect("front exists");
                self.observe(Observation::SettledElsewhere {
                    node: q.node,
                    kind: q.out.kind().name(),
                    seq: q.seq,
                });
                continue;
            }
            if !unlimited && !self.limiter.try_admit(now) {
                let until_ms = self.limiter.next_slot_ms(now);
                let node = q.node.clone();
                self.observe(Observation::Throttled { node, until_ms });
                break;
            }
            let q = self.queue.pop_front().expect("front exists");
            let kind = q.out.kind();
            // Every frame gets an id; the adapter decides whether its protocol carries one
            // (an MCP 2025-11-25 elicitation answer does not, a tasks/update does).
            let rpc_id = self.alloc_rpc_id();
            let frame = self.lanes[q.lane].adapter.encode_frame(rpc_id, &q.out);
            let rpc_id = frame.request_id;
            if let Some(id) = rpc_id {
                let timeout_ms = self.timeout_for(&q);
                self.pending.insert(
                    id,
                    Pending {
                        lane: q.lane,
                        node: q.node.clone(),
                        kind,
                        seq: q.seq,
                        epoch: self.epoch,
                        sent_ms: now,
                        deadline_ms: now + timeout_ms,
                    },
                );
            }
            match self.last_sent.get_mut(&q.node) {
                Some(last) => *last = (kind, now),
                None => {
                    self.last_sent.insert(q.node.clone(), (kind, now));
                }
            }
            if kind == RequestKind::Poll {
                // On every poll sent: no new key (and no clone of it) once the node has one.
                match self.last_read_sent_ms.get_mut(&q.node) {
                    Some(at) => *at = now,
                    None => {
                        self.last_read_sent_ms.insert(q.node.clone(), now);
                    }
                }
            }
            self.observe(Observation::Sent {
                node: q.node.clone(),
                kind: kind.name(),
                seq: q.seq,
                rpc_id,
            });
            if transports[q.lane].send(frame).is_err() {
                self.read_received(transports).await;
                self.fail_all_pending().await;
                return Err(Exit::Disconnected);
            }
        }
        Ok(())
    }

    /// A process the ledger has fenced (a newer epoch took over) sends nothing more. What it
    /// queued was committed before the fence, but the new epoch owns those records now and may
    /// have proved a submission unnecessary or made it itself: a process that stalled (a slow
    /// commit, a long pause) and then sent its queue would submit again blindly. One epoch read
    /// per flush with something queued.
    fn drop_fenced_sends(&mut self) {
        let current = self.ledger.lock().expect("ledger lock").current_epoch();
        let current = match current {
            Ok(c) => c,
            Err(e) => {
                self.queue.clear();
                return self.ledger_failed(e);
            }
        };
        if current <= self.epoch {
            return;
        }
        let nodes: BTreeSet<String> = self.queue.drain(..).map(|q| q.node).collect();
        for node in nodes {
            let e = crate::ledger::LedgerError::StaleEpoch {
                call_node_id: node.clone(),
                writer: self.epoch,
                current,
            };
            self.fence(&node, e);
        }
    }

    /// Leaves out the node's queued sends: its status reads only, when a cancel for it is
    /// queued (`Observation::Superseded`); all of them, when it settled here
    /// (`Observation::SettledElsewhere`).
    fn drop_queued(&mut self, node: &str, reads_only: bool) {
        let (dropped, kept): (VecDeque<Queued>, VecDeque<Queued>) =
            self.queue.drain(..).partition(|q| {
                q.node == node && (!reads_only || matches!(q.out, Outbound::Poll { .. }))
            });
        self.queue = kept;
        for q in dropped {
            let (node, kind, seq) = (q.node, q.out.kind().name(), q.seq);
            self.observe(if reads_only {
                Observation::Superseded { node, kind, seq }
            } else {
                Observation::SettledElsewhere { node, kind, seq }
            });
        }
    }

    /// Another process sharing the ledger (a replica behind the same load balancer) may have
    /// settled the node while this send waited in the queue: it is then not sent. One read per
    /// send; a read that fails sends anyway (the commit after the reply will fail and say so).
    fn settled_in_ledger(&self, node: &str) -> bool {
        if self.settled_here.contains(node) {
            return false;
        }
        // The state column alone: a whole record (a decode on SQLite, a clone in memory) was a
        // twentieth of a simulated series' CPU, spent on one bit.
        let state = self.ledger.lock().expect("ledger lock").local_state(node);
        matches!(state, Ok(Some(s)) if s.is_final())
    }

    /// After a step that left `node`'s record final: once nothing of this runner's covers the
    /// node (no request in flight, no send queued, no timer), forget what it kept about it. A
    /// live executor runs for weeks, and these maps would otherwise hold every node it ever
    /// touched. Nothing is lost: a final record has no way out (`core::transitions`), the core
    /// refuses or only annotates every later event on it and sends nothing, and each map below
    /// is read only to decide a send, a take-up or a resume of a node that is not final. The
    /// fenced set stays: a fenced runner never steps the node, so it never gets here for one.
    fn forget_if_settled(&mut self, node: &str) {
        if self.covered(node) {
            return;
        }
        self.settled_here.remove(node);
        self.seen_version.remove(node);
        self.submit_timer_outdated.remove(node);
        self.cancel_sent_generation.remove(node);
        self.retry_after.remove(node);
        self.last_sent.remove(node);
        self.last_read_sent_ms.remove(node);
        self.stall_at.remove(node);
        self.approval_refusals.retain(|(n, _), _| n != node);
    }

    fn timeout_for(&self, q: &Queued) -> u64 {
        match &q.out {
            Outbound::SubmitSync { tool, .. } if !planted!(self, SyncCallOnRequestTimeout) => self
                .lanes[q.lane]
                .caps
                .tools
                .get(tool)
                .and_then(|t| t.sync_upper_bound_ms)
                .unwrap_or(self.cfg.request_timeout_ms),
            _ => self.cfg.request_timeout_ms,
        }
    }

    fn alloc_rpc_id(&mut self) -> u64 {
        self.next_rpc_id += 1;
        self.next_rpc_id
    }

    /// The connection is gone, the runner was told to stop, or a request's deadline passed:
    /// first apply what had already been delivered (then fail what is still pending, on a
    /// drop; expire what is still overdue, on a deadline). A response fully received is
    /// the server's answer, as an HTTP client keeps a body it read in full; declaring its request
    /// lost instead sends a created submission to manual reconciliation (a runner held up by
    /// slow commits had not read it yet: mcp_ext_faults seed 2349). Reading takes commits, and
    /// what arrives meanwhile is read too, until a look finds nothing (mcp_ext_faults seed
    /// 1044363: a reply landed while the stopping runner wrote down the ones before it).
    /// Frames are taken with `Transport::received`, which tokio's cooperative budget does not
    /// cut short (a receive polled once did, after 128 frames).
    async fn read_received<T: Transport>(&mut self, transports: &mut [T]) {
        let mut read = 0;
        while read < RECEIVED_READ_MAX && self.stopped().is_none() {
            let before = read;
            for (lane, transport) in transports.iter_mut().enumerate() {
                for frame in already_received(transport, RECEIVED_READ_MAX - read) {
                    self.on_frame(lane, &frame).await;
                    read += 1;
                }
            }
            if read == before {
                break;
            }
        }
    }

    async fn fail_all_pending(&mut self) {
        if self.crashed.is_some() {
            // A dead process loses nothing more: it is gone, and its requests with it.
            return;
        }
        let all = std::mem::take(&mut self.pending);
        for (_, p) in all {
            self.lose(p, Loss::ConnectionGone).await;
        }
    }

    /// A request that will get no reply (timed out, or its connection went): the core hears
    /// it was lost.
    async fn lose(&mut self, p: Pending, loss: Loss) {
        self.observe(Observation::Lost {
            node: p.node.clone(),
            kind: p.kind.name(),
            seq: p.seq,
        });
        let lost = Event::Lost {
            kind: p.kind,
            seq: p.seq,
            epoch: p.epoch,
            loss,
        };
        self.handle(&p.node, lost).await;
    }
}

/// At most this many frames are read after a connection dropped or the runner was told to stop
/// (a bound on a loop).
const RECEIVED_READ_MAX: usize = 4096;

/// The frames a connection has already delivered, without waiting for more (up to `max`).
fn already_received<T: Transport>(t: &mut T, max: usize) -> Vec<crate::transport::InFrame> {
    std::iter::from_fn(|| t.received()).take(max).collect()
}

/// The next frame from any lane, lanes polled in order (deterministic, like `biased;`).
async fn next_frame<T: Transport>(
    transports: &mut [T],
) -> (usize, Option<crate::transport::InFrame>) {
    std::future::poll_fn(|cx| {
        for (i, t) in transports.iter_mut().enumerate() {
            // A receive future is cheap to make and cancel-safe to drop: frames stay queued.
            let fut = std::pin::pin!(t.recv());
            if let std::task::Poll::Ready(f) = fut.poll(cx) {
                return std::task::Poll::Ready((i, f));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests;
