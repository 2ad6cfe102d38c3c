//! What the runner reports as it works. Production can log these; the simulator turns them
//! into trace events. Plain data, so a trace can embed them verbatim.

use serde::Serialize;

use crate::core::Rejection;
use crate::record::{LocalState, TerminalState};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "obs", rename_all = "snake_case")]
pub enum Observation {
    Started {
        epoch: u64,
        resumed: usize,
    },
    Negotiated {
        protocol_version: String,
        key_lookup: bool,
        tools: usize,
    },
    HandshakeFailed {
        reason: String,
    },
    Sent {
        node: String,
        kind: &'static str,
        seq: u64,
        rpc_id: Option<u64>,
    },
    /// A send waited for the executor-wide QPS limiter.
    Throttled {
        node: String,
        until_ms: u64,
    },
    /// `retry_after_ms`: what a 429/503 asked the executor to wait.
    Received {
        node: String,
        kind: &'static str,
        seq: u64,
        reply: &'static str,
        retry_after_ms: Option<u64>,
    },
    Lost {
        node: String,
        kind: &'static str,
        seq: u64,
    },
    Moved {
        node: String,
        event: String,
        path: Vec<LocalState>,
        version: u64,
    },
    Stayed {
        node: String,
        event: String,
    },
    Rejected {
        node: String,
        event: String,
        reason: Rejection,
    },
    Refused {
        node: String,
        event: String,
        from: LocalState,
        to: LocalState,
    },
    LedgerRefused {
        node: String,
        error: String,
    },
    /// Another writer committed between this runner's read and its commit; the event is
    /// stepped again on the record as it is now (`attempt` counts from 1).
    CommitConflict {
        node: String,
        event: String,
        attempt: u32,
        expected: u64,
        found: u64,
    },
    /// A non-final call node nothing of this runner covered (no request in flight, no send
    /// queued, no timer) for `request_timeout_ms`: resumed as after a restart.
    Stalled {
        node: String,
        state: &'static str,
    },
    /// The ledger refused this runner's epoch for the record: it no longer acts on it.
    Fenced {
        node: String,
        error: String,
    },
    /// The ledger could not be read or written; the runner stops.
    LedgerFailed {
        error: String,
    },
    /// A cancel request another process wrote into the ledger (`moot`: the record is final).
    CancelRequestPicked {
        node: String,
        requested_at_ms: u64,
        moot: bool,
    },
    Accepted {
        node: String,
        terminal: TerminalState,
        result_digest: Option<String>,
    },
    Reconcile {
        node: String,
        reason: String,
    },
    EffectReconciliation {
        node: String,
        reason: String,
    },
    ApprovalAsked {
        node: String,
        round: u32,
        deadline_ms: u64,
    },
    /// The gate's answer did not conform to the requested schema: not sent; the round stays open.
    ApprovalRefused {
        node: String,
        round: u32,
        reason: String,
    },
    /// A reply's advisory fields (ttl, poll interval, status message) were bad: dropped, the
    /// reply itself was used.
    HintIgnored {
        node: String,
        kind: &'static str,
        problem: String,
    },
    OutputChecked {
        node: String,
        ok: bool,
        detail: String,
    },
    CallRejected {
        node: String,
        reason: String,
    },
    DuplicateCallNode {
        node: String,
    },
    /// A timer of this process not applied: it would send a submission, and another process
    /// wrote the node since this one last saw it (that process's submission, or its lookup,
    /// is the node's; a second one from here could start a second operation).
    SubmissionLeftToOther {
        node: String,
        event: String,
    },
    /// A queued send not sent: the ledger shows the node settled, by another process or by
    /// this one after the send was queued.
    SettledElsewhere {
        node: String,
        kind: &'static str,
        seq: u64,
    },
    /// A queued read not sent: a cancel for the same node went ahead of it, and the cancel's
    /// answer (or the re-read after it) tells what the read would have.
    Superseded {
        node: String,
        kind: &'static str,
        seq: u64,
    },
    AdapterRetired {
        adapter: &'static str,
    },
    /// A retired adapter has no in-flight operation left.
    AdapterDrained {
        adapter: &'static str,
    },
    /// A request from the server (not a task's input request) and what it was answered.
    ServerRequestAnswered {
        method: String,
        answer: &'static str,
    },
    /// A frame nobody was waiting for (late reply to a forgotten request, unknown operation).
    Unrouted {
        what: String,
    },
    Malformed {
        reason: String,
    },
    Exit {
        reason: String,
    },
}

pub trait Observer {
    fn observe(&mut self, now_ms: u64, obs: Observation);
}

/// Drops everything: for callers that only want the ledger.
pub struct NullObserver;

impl Observer for NullObserver {
    fn observe(&mut self, _now_ms: u64, _obs: Observation) {}
}
