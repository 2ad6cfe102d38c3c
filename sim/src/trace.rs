//! The trace: the only input to judges and reports. An ordered list of typed events with a
//! canonical byte form (one JSON object per line, fields in declaration order, map keys sorted),
//! written when a trace is kept, and a hash: SHA-256 over the same events in a compact binary
//! form ([`crate::trace_hash`]), the identity a sweep records for every series.
//!
//! The trace also keeps, as it is written, the last local state it shows for each call node:
//! the world attributes a fault to the executor state it met by reading the trace, never the
//! executor's ledger.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sha2::{Digest, Sha256};
use toolop::ledger::LedgerSnapshot;
use toolop::record::{LocalState, TerminalState};
use toolop::runner::{CrashPoint, Observation};

use crate::fake::codec::ExchangeKind;
use crate::fake::truth::{GroundTruth, TaskStatus};
use crate::scenario::Protocol;
use crate::series::faults::FaultKind;
pub use crate::series::ledger::{LedgerWrite, WriteOutcome};

/// One thing that happened in a series, at simulated time `t_ms`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    pub t_ms: u64,
    #[serde(flatten)]
    pub what: What,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "src", rename_all = "snake_case")]
pub enum What {
    /// First event of every series: the bounds the checkers judge against.
    Begin {
        scenario: String,
        seed: u64,
        protocol: Protocol,
        call_nodes: u32,
        /// The poll-rate bound (gates.max_qps) checked in every one-second window.
        max_qps: u32,
        /// Faults fire only before this time (the safety phase); after it they are healed.
        safety_window_ms: u64,
        /// After the safety phase every call node must settle within this long.
        liveness_bound_ms: u64,
        faults: String,
        /// What the scenario configured that judges read: the executor's settings it was
        /// given (jitter, approval deadline) and the call nodes the caller will submit.
        /// Boxed, as are `Final`'s and `Ledger`'s payloads: an event is as large as its largest
        /// variant, and a trace holds hundreds of small ones (serde writes a box as its content,
        /// so the canonical bytes are the same).
        config: Box<BeginConfig>,
    },
    /// A fault fired at decision point `decision` (0: a fault that follows from another), meeting
    /// `node` in local state `state` (the last state the trace showed for it).
    Fault {
        decision: u64,
        fault: FaultKind,
        node: Option<String>,
        state: Option<LocalState>,
        detail: FaultDetail,
    },
    /// Last event before `End`: the ledger and the server's ground truth as they stand.
    Final {
        ledger: Box<LedgerSnapshot>,
        truth: Box<GroundTruth>,
    },
    /// An executor process (execution epoch, incarnation) reported an observation.
    Exec {
        epoch: u64,
        incarnation: u32,
        obs: Observation,
    },
    /// A frame crossed the simulated network: the exchange it belongs to, the call node the
    /// world attributes it to, the executor process at the client end, and what the fault layer
    /// did with it. Recorded when the frame leaves (an executor's request as it is sent, a reply
    /// or push as the server emits it).
    Net {
        dir: Dir,
        exchange: ExchangeKind,
        node: Option<String>,
        /// The lane (one per protocol the executor speaks) and the executor process at the
        /// client end of the connection: its execution epoch and incarnation.
        lane: u32,
        epoch: u64,
        incarnation: u32,
        /// The network's own number for the frame, unique in a series: the server's ground
        /// truth names the frame that carried an answer by it.
        frame: u64,
        request_id: Option<u64>,
        bytes: usize,
        verdict: NetVerdict,
        /// A frame to the executor that arrives: after how long (latency and any hold). Absent
        /// for requests and for frames that never arrive.
        #[serde(skip_serializing_if = "Option::is_none")]
        arrives_after_ms: Option<u64>,
        /// A frame to the executor: what it shows, in neutral terms, as the service (or the
        /// replica in front of it) answered, before any rewrite the verdict names. Boxed: a
        /// list's entries made it the largest part of every event (serde writes a box as its
        /// content, so the canonical bytes are the same).
        #[serde(skip_serializing_if = "Option::is_none")]
        shows: Option<Box<Shows>>,
    },
    /// The world read the executors' durable store and found something new for a call node:
    /// a receipt (the acceptance transaction: receipt and outbox entry) or a hand-off to manual
    /// reconciliation. Recorded at the moment the world first sees it, which is right after
    /// the commit that wrote it (the world looks whenever an executor reports anything).
    Store { node: String, fact: StoreFact },
    /// The caller acted.
    Caller { action: CallerAction, node: String },
    /// The approval agent was asked, answered, or chose silence. `round` is the number the
    /// executor gave the question; `question` is what the question itself names (the server's
    /// task and round, as the server worded it), when it names them.
    Approval {
        node: String,
        round: u32,
        question: Option<Question>,
        action: ApprovalAction,
    },
    /// The world stopped, restarted or rolled back an executor.
    World { action: WorldAction },
    /// A commit as the world's shared ledger saw it (not as the executor reports it).
    Ledger { write: Box<LedgerWrite> },
    /// A process inserted a call node's first record (version `version`) in the world's shared
    /// ledger: who took a call in, as the ledger saw it.
    Insert {
        node: String,
        epoch: u64,
        incarnation: u32,
        version: u64,
    },
    /// The series ended.
    End { reason: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    ToServer,
    ToExecutor,
}

/// What the fault layer did with one frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum NetVerdict {
    Deliver,
    /// Never arrives.
    Lost,
    /// Answered by something in front of the server (HTTP status, Retry-After it asked for).
    Replica {
        status: u16,
        retry_after_ms: Option<u64>,
    },
    /// Held back this much longer than the link's latency.
    Held {
        extra_ms: u64,
    },
    /// Delivered, and delivered again this much later.
    Duplicated {
        after_ms: u64,
    },
    /// Every task id in it names another task.
    TaskIdRewritten {
        to: String,
    },
    /// The result's last content block dropped (the server's digest kept).
    LastBlockDropped,
    /// Cut to this many bytes.
    Truncated {
        to_bytes: usize,
    },
    /// Its body names another request than the one it answers.
    BodyNamesOtherRequest,
    /// An old reply, delivered again late.
    LateDuplicate,
    /// A copy delivered to an executor of an older epoch that still lingers.
    ToOldEpoch,
}

/// What a frame to the executor shows: the service's neutral answer (or the replica's), before
/// any rewrite. The world's record of what the executor was told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "shows", rename_all = "snake_case")]
pub enum Shows {
    /// One task: a submission's reply, a status read, an immediate cancel's result, a status
    /// notification. `poll_interval_ms`: the interval the server suggests on it; `input_round`:
    /// the input round it shows pending (protocols whose reads show them).
    Task {
        task: String,
        status: TaskStatus,
        poll_interval_ms: Option<u64>,
        input_round: Option<u32>,
        /// The retention the server advertises on it, if any.
        ttl_ms: Option<u64>,
        /// The read carries the task's stored result (a done AIP-151 operation, or a task read
        /// of the tasks extension with its result inlined).
        result: bool,
    },
    /// A lookup by key or a list: the tasks found (none: nothing by that key), and what each
    /// entry shows, by task: its status and the retention it advertises (a list of full task
    /// objects carries both: MCP's `tasks/list`, AIP-151's `ListOperations`).
    Tasks {
        tasks: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        status: BTreeMap<String, TaskStatus>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        ttl_ms: BTreeMap<String, u64>,
    },
    /// A terminal task's stored outcome (a result read, an inline run's end).
    Outcome,
    /// A result read of a task with nothing stored.
    NoResult,
    /// An inline run refused after it ran.
    InlineRefused,
    /// `hidden`: the server held the task, bound to another HTTP session than the reader's
    /// (what the executor reads is an unknown id's not-found all the same).
    NotFound {
        expired: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        hidden: bool,
    },
    CancelAccepted,
    CancelRejected {
        status: TaskStatus,
    },
    Ack,
    /// A 429/503 from in front of the server, with the Retry-After it carries.
    Throttled {
        status: u16,
        retry_after_ms: u64,
    },
    /// HTTP 404 for a session the server no longer knows (it restarted): nothing about any
    /// task.
    SessionGone,
    /// An input request of `task`'s round `round` (pushed by the server).
    Input {
        task: String,
        round: u32,
    },
}

/// What an approval question names, in the server's words.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Question {
    pub task: String,
    pub round: u32,
}

/// What the world found in the executors' store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum StoreFact {
    Receipt { terminal: TerminalState },
    Reconcile,
}

/// The scenario's settings that judges read, as the series ran them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BeginConfig {
    /// The executor's poll jitter: a fraction of the interval added on top, in [0, f).
    pub poll_jitter_fraction: f64,
    /// How long the executor gives the approval gate before it declines by itself.
    pub approval_timeout_ms: u64,
    /// The executor's request timeout.
    pub request_timeout_ms: u64,
    /// How many not-found replies in a row, before the operation's advertised expiry, the
    /// executor is configured to retry before it gives up (it hands over on the next).
    pub not_found_retries: u32,
    /// How many cancels the executor sends for a node, none of them taken, before it hands a
    /// still running operation to a person.
    pub max_cancel_attempts: u32,
    /// Tools the executor runs in shadow mode.
    pub shadow_tools: Vec<String>,
    /// Every call node the caller will submit.
    pub nodes: Vec<BeginNode>,
    /// The protocol of each lane, in lane order (the primary first).
    pub lanes: Vec<Protocol>,
    /// How often a running executor looks for cancel requests in the ledger. Written only for
    /// a series whose operator makes one (the judge then needs it), so every other trace keeps
    /// the bytes it had before requests were simulated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel_request_check_ms: Option<u64>,
    /// Tools of this series' call nodes that the executor is configured to run synchronously:
    /// they forbid tasks, publish a synchronous bound, and `executor.no_task_support` is
    /// `run_sync`. Written only when there is one, so other traces keep their bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sync_tools: Vec<String>,
    /// Of those, the tools whose published bound is longer than the request timeout, with the
    /// bound: a synchronous call of one is waited for up to its bound, not a request timeout.
    /// Written only when there is one (session 38), so other traces keep their bytes.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub slow_sync_bounds_ms: std::collections::BTreeMap<String, u64>,
    /// How often the executor reads a node again while its cancel is out and undecided.
    /// Written only when it is not the executor's default ([`BeginConfig::cancel_requery_ms`]
    /// reads it), so every other trace keeps its bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel_requery_interval_ms: Option<u64>,
}

impl BeginConfig {
    /// The executor's cancel requery interval for this series.
    pub fn cancel_requery_ms(&self) -> u64 {
        self.cancel_requery_interval_ms
            .unwrap_or_else(|| toolop::core::CoreConfig::default().cancel_requery_interval_ms)
    }
}

/// A call node as the caller will submit it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BeginNode {
    pub id: String,
    pub tool: String,
    /// The submission key the caller gives it.
    pub key: String,
}

/// What the caller did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallerAction {
    Submit,
    Cancel,
    /// Stop waiting (never a server-side cancel).
    Detach,
    /// Retire an adapter (the node is the adapter's name).
    Retire,
    /// Submit again after an executor restart that had not recorded the node.
    Resubmit,
    /// Cancel again after an executor restart that had not recorded the cancel.
    Recancel,
    /// An operator's cancel written into the ledger as a request (`toolop cancel NODE`), for
    /// whichever executor process owns the node to find on its next look.
    CancelRequest,
}

impl CallerAction {
    pub fn name(self) -> &'static str {
        match self {
            CallerAction::Submit => "submit",
            CallerAction::Cancel => "cancel",
            CallerAction::Detach => "detach",
            CallerAction::Retire => "retire",
            CallerAction::Resubmit => "resubmit",
            CallerAction::Recancel => "recancel",
            CallerAction::CancelRequest => "cancel_request",
        }
    }
}

/// What the approval agent did with a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    Accept,
    Decline,
    Cancel,
    /// No answer at all (the executor's deadline must decline).
    Silent,
    /// An accepted answer sent again (the approval-replay fault).
    ReplayAccept,
    /// The agent received the question.
    Asked,
}

impl ApprovalAction {
    pub fn name(self) -> &'static str {
        match self {
            ApprovalAction::Accept => "accept",
            ApprovalAction::Decline => "decline",
            ApprovalAction::Cancel => "cancel",
            ApprovalAction::Silent => "silent",
            ApprovalAction::ReplayAccept => "replay_accept",
            ApprovalAction::Asked => "asked",
        }
    }
}

/// What the world did to executor processes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum WorldAction {
    /// An incarnation stopped (crash, dropped connection, failed handshake).
    ExecutorDown {
        incarnation: u32,
        exit: String,
    },
    ExecutorRestart {
        incarnation: u32,
        epoch: u64,
    },
    /// A new epoch took over; the old incarnation lingers for a while.
    Rollback {
        incarnation: u32,
        epoch: u64,
    },
    OldEpochStopped {
        epoch: u64,
    },
    /// The executor task itself failed (a panic in the runner).
    ExecutorTaskFailed {
        error: String,
    },
    IncarnationLimit {
        limit: u32,
    },
    /// A second executor process started beside the current one (`second_executor`).
    ReplicaStart {
        incarnation: u32,
        epoch: u64,
    },
    ReplicaStop {
        incarnation: u32,
        exit: String,
        /// The world killed it: told to stop, it was still busy (slow commits) when the
        /// shutdown wait ran out. What it had read and not written down died with it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        killed: bool,
    },
    /// A process whose crash fail point had fired tried to write to the ledger (`write`: the
    /// ledger call, `node`: the call node it names, if any). The write did not land: a dead
    /// process writes nothing.
    WriteAfterCrash {
        incarnation: u32,
        write: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
}

/// What a fault did, as far as judges and people need to know.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultDetail {
    /// Nothing beyond the fault itself.
    None,
    /// The exchange the fault hit.
    Exchange {
        exchange: ExchangeKind,
    },
    /// A connection dropped at the exchange it carried: the executor process and lane whose
    /// connection it was. Frames still on their way to it are lost with it.
    Connection {
        exchange: ExchangeKind,
        lane: u32,
        epoch: u64,
        incarnation: u32,
        /// The frames still on their way to the connection when it dropped, lost with it: the
        /// network's own record, exact where a frame was due in the very millisecond of the drop
        /// (`mcp_sqlite` seed 128726: such a frame was delivered, and a view inferring the cut
        /// from times took it as lost).
        cut: Vec<u64>,
    },
    /// A request the server met with a fault as it arrived: its exchange, and the network's
    /// number for the frame that carried it (a request the network lost never arrives).
    Request {
        exchange: ExchangeKind,
        frame: u64,
    },
    /// A reply from in front of the server.
    Replica {
        exchange: ExchangeKind,
        status: u16,
        retry_after_ms: Option<u64>,
    },
    Crash {
        point: CrashPoint,
    },
    Epochs {
        from: u64,
        to: u64,
    },
    /// An input round's answer sent again.
    Round {
        round: u32,
    },
    /// A cancelled task that later showed another status.
    StatusFlip {
        task: String,
        to: TaskStatus,
    },
    /// The task a server-side fault concerned.
    Task {
        task: String,
    },
    /// How long a slow commit took (simulated time between the read and the commit), and the
    /// process it held: a process steps one event at a time, so it holds that process's every
    /// send, whatever node the commit was about.
    CommitDelay {
        delay_ms: u64,
        epoch: u64,
        incarnation: u32,
    },
    /// A second executor process started beside the current one (same epoch, same ledger).
    SecondExecutor {
        incarnation: u32,
        epoch: u64,
    },
    /// How long a process stays frozen (its commit held, no beats), and which.
    Pause {
        delay_ms: u64,
        epoch: u64,
        incarnation: u32,
    },
    /// The server process restarted as a request arrived: that request's frame (lost with the
    /// process), the tasks the old process held (lost with it), and the frames still on their
    /// way to any executor over the lane's connections, which all dropped (never arrive).
    Restart {
        frame: u64,
        tasks: Vec<String>,
        cut: Vec<u64>,
    },
}

#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub events: Vec<TraceEvent>,
    /// Set once the event limit is reached; later events are dropped, not recorded.
    pub truncated: bool,
    pub max_events: u64,
    /// The last local state the trace shows per call node (any executor).
    states: BTreeMap<String, LocalState>,
    /// Each time a node's state became final, in trace order (a node again after it showed a
    /// state that is not final). Read by the network's late-duplicate index through a cursor.
    settled_log: Vec<String>,
}

impl Trace {
    pub fn new(max_events: u64) -> Trace {
        Trace {
            events: Vec::new(),
            truncated: false,
            max_events,
            states: BTreeMap::new(),
            settled_log: Vec::new(),
        }
    }

    pub fn push(&mut self, t_ms: u64, what: What) {
        if let What::Exec { obs, .. } = &what {
            self.note_state(obs);
        }
        if self.events.len() as u64 >= self.max_events {
            self.truncated = true;
            return;
        }
        self.events.push(TraceEvent { t_ms, what });
    }

    fn note_state(&mut self, obs: &Observation) {
        match obs {
            Observation::Moved { node, path, .. } => {
                if let Some(&last) = path.last() {
                    let was_final = match self.states.get_mut(node) {
                        Some(s) => std::mem::replace(s, last).is_final(),
                        None => {
                            self.states.insert(node.clone(), last);
                            false
                        }
                    };
                    if last.is_final() && !was_final {
                        self.settled_log.push(node.clone());
                    }
                }
            }
            // Every record starts SUBMITTING; the first thing a node shows is its start step.
            Observation::Stayed { node, .. } | Observation::Sent { node, .. }
                if !self.states.contains_key(node) =>
            {
                self.states.insert(node.clone(), LocalState::Submitting);
            }
            _ => {}
        }
    }

    /// A fault firing at `t_ms`, meeting `node` in the state the trace shows for it now.
    pub fn push_fault(
        &mut self,
        t_ms: u64,
        decision: u64,
        fault: FaultKind,
        node: Option<&str>,
        detail: FaultDetail,
    ) {
        let state = node.and_then(|n| self.state_of(n));
        self.push(
            t_ms,
            What::Fault {
                decision,
                fault,
                node: node.map(String::from),
                state,
                detail,
            },
        );
    }

    /// The last local state the trace shows for `node`, if it shows one.
    pub fn state_of(&self, node: &str) -> Option<LocalState> {
        self.states.get(node).copied()
    }

    /// The nodes that became final since entry `from` of the settle log, and the log's length
    /// (the next `from`).
    pub fn settled_since(&self, from: usize) -> (&[String], usize) {
        let log = &self.settled_log;
        (&log[from.min(log.len())..], log.len())
    }

    /// Call nodes the trace shows in a state that is not final, in id order.
    pub fn in_flight(&self) -> Vec<String> {
        self.states
            .iter()
            .filter(|(_, s)| !s.is_final())
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Canonical bytes: one JSON line per event.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.events.len() * 256);
        for e in &self.events {
            // A TraceEvent holds only plain data; serialising it into a Vec cannot fail.
            serde_json::to_writer(&mut out, e).expect("trace event serialises");
            out.push(b'\n');
        }
        out
    }

    /// SHA-256 of the events in the binary form of [`crate::trace_hash`], fed event by event
    /// through one reused buffer. Every series of a sweep is hashed and few are ever written,
    /// so the hash does not go through the JSON text: it holds the same data (the same events
    /// tell apart the same), in 60% of the bytes and at a fifth of the cost to write.
    pub fn hash(&self) -> String {
        let mut hasher = Sha256::new();
        let mut item = Vec::with_capacity(4 * 1024);
        for e in &self.events {
            item.clear();
            // The time and the event apart: `TraceEvent` flattens them into one map (for the
            // JSON form), which would name every field of every event.
            crate::trace_hash::encode(&e.t_ms, &mut item);
            crate::trace_hash::encode(&e.what, &mut item);
            hasher.update(&item);
        }
        toolop::digest::hex(&hasher.finalize())
    }
}

pub type SharedTrace = Arc<Mutex<Trace>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_changes_with_any_event_and_canonical_bytes_are_json_lines() {
        let mut a = Trace::new(10);
        a.push(
            1,
            What::Caller {
                action: CallerAction::Submit,
                node: "n1".into(),
            },
        );
        let mut b = a.clone();
        assert_eq!(a.hash(), b.hash());
        b.push(
            2,
            What::End {
                reason: "done".into(),
            },
        );
        assert_ne!(a.hash(), b.hash());
        // A field's value alone, a time or a name, changes it too.
        for (t_ms, node) in [(2, "n1"), (1, "n2")] {
            let mut c = Trace::new(10);
            c.push(
                t_ms,
                What::Caller {
                    action: CallerAction::Submit,
                    node: node.into(),
                },
            );
            assert_ne!(a.hash(), c.hash());
        }
        // The hash is not over the JSON text, which a sweep never writes.
        assert_ne!(b.hash(), toolop::digest::sha256_hex(&b.canonical_bytes()));
        let line = String::from_utf8(a.canonical_bytes()).unwrap();
        assert_eq!(
            line,
            "{\"t_ms\":1,\"src\":\"caller\",\"action\":\"submit\",\"node\":\"n1\"}\n"
        );
    }

    /// A trace holds hundreds of events and every checker walks them: a large payload is boxed
    /// so that one variant does not make every event its size (288 bytes before `Begin`,
    /// `Final` and `Ledger` were boxed, 216 before `Net`'s `shows`).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn an_event_stays_small() {
        let size = std::mem::size_of::<TraceEvent>();
        assert!(
            size <= 144,
            "TraceEvent is {size} bytes: box the new large variant"
        );
    }

    #[test]
    fn event_limit_truncates_instead_of_growing() {
        let mut t = Trace::new(2);
        for i in 0..5 {
            t.push(i, What::End { reason: "x".into() });
        }
        assert_eq!(t.events.len(), 2);
        assert!(t.truncated);
    }

    #[test]
    fn the_state_of_a_node_is_the_last_the_trace_shows() {
        let mut t = Trace::new(10);
        let exec = |obs| What::Exec {
            epoch: 1,
            incarnation: 1,
            obs,
        };
        assert_eq!(t.state_of("n1"), None);
        t.push(
            1,
            exec(Observation::Stayed {
                node: "n1".into(),
                event: "start".into(),
            }),
        );
        assert_eq!(t.state_of("n1"), Some(LocalState::Submitting));
        t.push(
            2,
            exec(Observation::Moved {
                node: "n1".into(),
                event: "e".into(),
                path: vec![LocalState::Submitting, LocalState::Working],
                version: 2,
            }),
        );
        t.push(
            3,
            exec(Observation::Sent {
                node: "n1".into(),
                kind: "poll",
                seq: 1,
                rpc_id: Some(3),
            }),
        );
        assert_eq!(t.state_of("n1"), Some(LocalState::Working));
        assert_eq!(t.in_flight(), ["n1"]);
        t.push(
            4,
            exec(Observation::Moved {
                node: "n1".into(),
                event: "e".into(),
                path: vec![LocalState::Working, LocalState::Accepted],
                version: 3,
            }),
        );
        assert_eq!(t.state_of("n1"), Some(LocalState::Accepted));
        assert!(t.in_flight().is_empty());
    }
}
