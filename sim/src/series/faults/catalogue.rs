//! The fault catalogue: one closed enum, each variant documented and named in scenario files
//! (snake_case), and per protocol the faults it can express with the executor local states each
//! one meets (the reachable cells of the coverage matrix). The coverage matrix, the coverage
//! gate and scenario validation all read [`row`]: a fault a protocol cannot express is a load
//! error, and every declared cell of an enabled fault must be hit.

use serde::{Deserialize, Serialize};
use toolop::record::LocalState::{self, *};

use crate::scenario::{Protocol, ServerProfile};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The server created the task, and its reply to the submission is lost.
    LostResponseAfterCreation,
    /// A request never reaches the server.
    LostRequest,
    /// A status read's reply is held past the request timeout, so it arrives after a newer one.
    PollsOutOfOrder,
    /// An input request already delivered is delivered again later (pushed again, or a read that
    /// showed it arrives again).
    InputRequiredReplay,
    /// The work completes at the very instant the executor's cancel reaches the server (or, for
    /// a delayed cancel, exactly when it would take effect).
    CompletionCancelRace,
    /// The reply to a cancel is lost.
    CancelAckLost,
    /// A reply carrying a terminal task's result is lost.
    ResultLost,
    /// A reply carrying a result arrives cut short (bytes cut, or its last content block dropped
    /// while the server's digest stays).
    ResultTruncated,
    /// A message reaches an executor of an older execution epoch after a rollback took over: a
    /// reply to what it sent before, or (with this fault's rate) a copy of a message meant for
    /// the newest executor while the old one lingers.
    OldEpochMessage,
    /// A reply names a task of another call node, session or server.
    TaskIdMisuse,
    /// A lagging replica answers "not found" for a task that exists.
    NotFoundBeforeExpiry,
    /// The server answers "not found" because the task expired and was deleted.
    NotFoundAfterExpiry,
    /// A status or result read is answered 429 with Retry-After.
    #[serde(rename = "poll_429")]
    Poll429,
    /// A status or result read is answered 503 with Retry-After.
    #[serde(rename = "poll_503")]
    Poll503,
    /// The connection drops; whatever was in flight is lost.
    ConnectionDrop,
    /// The executor crashes (between a ledger write and its send, or between a reply and its
    /// write) and restarts from the ledger alone.
    ExecutorCrash,
    /// The server deletes a task at its ttl while it is still running (seen in real SDKs).
    ServerDeletesRunningTask,
    /// An operator rolls back: a new executor with a higher epoch takes over the in-flight items.
    Rollback,
    /// The approval agent sends an answer for an older input round again (a replayed click).
    ApprovalReplay,
    /// A non-compliant server shows the work's outcome for a cancelled task once its work
    /// finishes (cancelled must stay cancelled; servers that keep working get this wrong).
    StatusAfterCancel,
    /// A reply the executor already had is delivered again, late: after the call node was
    /// settled, or after a rollback (to the new executor, or to the old one still lingering).
    LateDuplicateReply,
    /// A reply whose body names another request than the one it answers (where the body
    /// carries a request id).
    ReplyToOtherExchange,
    /// A ledger commit takes `faults.slow_commit_ms` of simulated time between the executor's
    /// read and its write, so other writers act in between.
    LedgerSlowCommit,
    /// A second executor process (a replica behind a load balancer, or a restarted executor
    /// overlapping its predecessor) runs beside the current one on the same ledger and epoch:
    /// it resumes the call nodes in flight, and the caller's submissions are retried at it.
    SecondExecutor,
    /// A commit lands in the ledger and its reply is lost: the executor stops before learning
    /// it, and its restart resumes from the ledger.
    LedgerCommitLostReply,
    /// A task-augmented call reaches a server redeployed since the executor listed its tools,
    /// where the tool no longer supports tasks (a rolling deploy: the listing came from an old
    /// instance). Each SDK answers as it does a task-augmented call of a tool that forbids
    /// tasks (spec/mcp-tasks.md section 14): the TS SDK runs the tool, then answers `-32602`
    /// "Invalid task creation result"; the Python SDK and a strict server refuse it unrun.
    ToolRedeployed,
    /// An executor process freezes whole for `faults.process_pause_ms` (a stop-the-world
    /// pause, swapping, a suspended VM), caught at a commit: its loop stops there and it writes
    /// no beat, while its connections keep receiving. Another process on the same ledger sees
    /// it go quiet, which a slow commit (the process still beats) does not show.
    ProcessPause,
    /// The server ends a task still running at its ttl `failed` and aborts its work (rmcp's
    /// ttl sweep). Follows from the short ttl `server_deletes_running_task` draws, on the
    /// `rmcp` profile of the tasks extension.
    /// (Last, as every fault added later: a fault's discriminant seeds its decisions
    /// (`FaultPlan`), so one added in between would move every later fault's draws.)
    TtlFailsRunningTask,
    /// The server acknowledges a cancel and the work runs to its end as if never asked: the
    /// tool does not look for cancels (rmcp's `ignores_cancel` tool; AIP-151's best-effort
    /// cancel). Only where a cancel is acknowledged before it takes effect: an MCP 2025-11-25
    /// server shows `cancelled` in its reply.
    CancelIgnored,
    /// The server process restarts, as every SDK server with an in-memory task store does on a
    /// deploy or a crash: every task it held is gone with its stored result and its input
    /// rounds, work still running is aborted (no side effect), every connection to it drops
    /// (frames on their way are lost, the request that met the restart included), and the new
    /// process answers "not found" for every task id of the old one. Asked as each request
    /// arrives while the server holds a task; fires at most once per lane per series. Never of
    /// a server offering
    /// toolop's idempotency extension: its contract keeps keys and tasks across a restart
    /// (`ARCHITECTURE.md`), and a key index lost would make "not found by key" a false proof
    /// of "never created". AIP-151 operations are durable resources: not expressed.
    ServerRestart,
    /// A cancel is answered 503 with a short Retry-After (1-5 s) by what stands in front of the
    /// server (a gateway shedding load, an overloaded server): AIP-194 names UNAVAILABLE the
    /// retryable code, CancelOperation included. The operation runs on; each refused cancel
    /// costs the executor an attempt once a read shows it still running, so a run of them
    /// spends `max_cancel_attempts` and hands the node to a person, the one way to that end
    /// the other faults reach only by a long run of losses (session 46).
    #[serde(rename = "cancel_503")]
    Cancel503,
}

impl FaultKind {
    pub const ALL: [FaultKind; 31] = [
        FaultKind::LostResponseAfterCreation,
        FaultKind::LostRequest,
        FaultKind::PollsOutOfOrder,
        FaultKind::InputRequiredReplay,
        FaultKind::CompletionCancelRace,
        FaultKind::CancelAckLost,
        FaultKind::ResultLost,
        FaultKind::ResultTruncated,
        FaultKind::OldEpochMessage,
        FaultKind::TaskIdMisuse,
        FaultKind::NotFoundBeforeExpiry,
        FaultKind::NotFoundAfterExpiry,
        FaultKind::Poll429,
        FaultKind::Poll503,
        FaultKind::ConnectionDrop,
        FaultKind::ExecutorCrash,
        FaultKind::ServerDeletesRunningTask,
        FaultKind::Rollback,
        FaultKind::ApprovalReplay,
        FaultKind::StatusAfterCancel,
        FaultKind::LateDuplicateReply,
        FaultKind::ReplyToOtherExchange,
        FaultKind::LedgerSlowCommit,
        FaultKind::SecondExecutor,
        FaultKind::LedgerCommitLostReply,
        FaultKind::ToolRedeployed,
        FaultKind::ProcessPause,
        FaultKind::TtlFailsRunningTask,
        FaultKind::CancelIgnored,
        FaultKind::ServerRestart,
        FaultKind::Cancel503,
    ];

    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }

    /// One line: what happens when the fault fires (for `toolop-sim list faults` and the
    /// scenario reference).
    pub fn summary(self) -> &'static str {
        match self {
            F::LostResponseAfterCreation => {
                "the server creates the task; its reply to the submission is lost"
            }
            F::LostRequest => "a request never reaches the server",
            F::PollsOutOfOrder => {
                "a status read's reply is held past the timeout and arrives after a newer one"
            }
            F::InputRequiredReplay => "an input request already delivered is delivered again",
            F::CompletionCancelRace => "the work completes at the instant the cancel takes effect",
            F::CancelAckLost => "the reply to a cancel is lost",
            F::ResultLost => "a reply carrying a terminal task's result is lost",
            F::ResultTruncated => {
                "a reply carrying a result arrives cut short (bytes cut or last block dropped)"
            }
            F::OldEpochMessage => {
                "a message reaches an executor of an older epoch after a rollback"
            }
            F::TaskIdMisuse => "a reply names a task of another call node, session or server",
            F::NotFoundBeforeExpiry => "a lagging replica answers not found for a task that exists",
            F::NotFoundAfterExpiry => {
                "not found because the task expired (follows from server_deletes_running_task)"
            }
            F::Poll429 => "a status or result read is answered 429 with Retry-After",
            F::Poll503 => "a status or result read is answered 503 with Retry-After",
            F::ConnectionDrop => "the connection drops; whatever was in flight is lost",
            F::ExecutorCrash => "the executor crashes at a fail point and restarts from the ledger",
            F::ServerDeletesRunningTask => "the server deletes a running task at its (short) ttl",
            F::TtlFailsRunningTask => {
                "the server fails a running task at its (short) ttl and aborts the work (rmcp; follows from server_deletes_running_task)"
            }
            F::Rollback => "an operator rollback: a newer epoch takes over the in-flight work",
            F::ApprovalReplay => "the approval agent sends an older round's answer again",
            F::StatusAfterCancel => {
                "a cancelled task later shows its work's outcome (a non-compliant server)"
            }
            F::LateDuplicateReply => "a reply already received is delivered again, late",
            F::ReplyToOtherExchange => {
                "a reply's body names another request than the one it answers"
            }
            F::LedgerSlowCommit => {
                "a ledger commit takes long enough for other writers to act between its read and write"
            }
            F::SecondExecutor => {
                "a replica on the same ledger and epoch resumes the call nodes in flight beside the executor"
            }
            F::LedgerCommitLostReply => {
                "a commit lands in the ledger; the executor stops before learning it and restarts"
            }
            F::ToolRedeployed => {
                "a task-augmented call reaches a redeployed server whose tool no longer supports tasks"
            }
            F::ProcessPause => {
                "an executor process freezes whole at a commit: no steps and no beats, its sockets still receiving"
            }
            F::CancelIgnored => {
                "the server acknowledges a cancel and the work runs to its end regardless"
            }
            F::ServerRestart => {
                "the server restarts: every task and result is lost, running work aborted; every connection drops, or over HTTP every session is forgotten (404)"
            }
            F::Cancel503 => "a cancel is answered 503 with a short Retry-After; the work runs on",
        }
    }

    pub fn from_name(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The fault whose rate makes this one happen, for faults without a rate of their own:
    /// expiry follows from a short server ttl.
    pub fn follows_from(self) -> Option<FaultKind> {
        match self {
            FaultKind::NotFoundAfterExpiry | FaultKind::TtlFailsRunningTask => {
                Some(FaultKind::ServerDeletesRunningTask)
            }
            _ => None,
        }
    }

    /// Whether a series draws this fault's swarm switch and rate after every other draw of its
    /// parameters: a fault added to a scenario's rates then leaves the series that do not
    /// enable it exactly as they were (their trace hashes too).
    pub fn drawn_last(self) -> bool {
        matches!(
            self,
            FaultKind::CancelIgnored | FaultKind::ServerRestart | FaultKind::Cancel503
        )
    }

    /// The server profile a fault needs, for faults only one real server shows: a scenario
    /// whose profiles leave it out cannot produce it.
    pub fn needs_profile(self) -> Option<ServerProfile> {
        match self {
            FaultKind::TtlFailsRunningTask => Some(ServerProfile::Rmcp),
            _ => None,
        }
    }
}

/// One fault a protocol can express, and the executor states a correct executor meets it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub fault: FaultKind,
    pub states: &'static [LocalState],
}

const fn c(fault: FaultKind, states: &'static [LocalState]) -> Cell {
    Cell { fault, states }
}

use FaultKind as F;

// The states of each row are the ones a correct executor meets robustly under the default
// scenarios: at least 200 hits in the 10,000-series gate (about 10 in the 500-series CI gate),
// or, for a fault that meets the executor in one place only (the cancel-path faults), that
// place. Hits in other cells are shown in the matrix but not required.

/// The ledger faults meet the executor wherever it writes, whatever the wire format: every
/// protocol expresses them (they are the world's, not the server's).
const LEDGER_STATES: &[LocalState] = &[Working];

/// MCP 2025-11-25: every fault. Input requests are pushed, so they can be replayed; the body
/// carries the JSON-RPC id.
const MCP_2025_11_25: &[Cell] = &[
    c(F::LostResponseAfterCreation, &[Submitting]),
    c(
        F::LostRequest,
        &[Submitting, Working, InputRequired, FetchingResult],
    ),
    c(F::PollsOutOfOrder, &[Working]),
    c(F::InputRequiredReplay, &[InputRequired]),
    c(F::CompletionCancelRace, &[CancelRequested]),
    c(F::CancelAckLost, &[CancelRequested]),
    c(F::ResultLost, &[FetchingResult]),
    c(F::ResultTruncated, &[FetchingResult]),
    c(F::OldEpochMessage, &[Working]),
    c(F::TaskIdMisuse, &[Working]),
    c(F::NotFoundBeforeExpiry, &[Working, FetchingResult]),
    c(F::NotFoundAfterExpiry, &[Working, InputRequired]),
    c(F::Poll429, &[Working, InputRequired, FetchingResult]),
    c(F::Poll503, &[Working, InputRequired, FetchingResult]),
    c(F::ConnectionDrop, &[Working]),
    c(
        F::ExecutorCrash,
        &[Submitting, Working, InputRequired, FetchingResult],
    ),
    c(F::ServerDeletesRunningTask, &[Working, InputRequired]),
    c(F::Rollback, &[Working]),
    c(F::ApprovalReplay, &[InputRequired]),
    c(F::StatusAfterCancel, &[CancelledAccepted]),
    c(F::LateDuplicateReply, &[Accepted]),
    c(F::ReplyToOtherExchange, &[Working]),
    c(F::LedgerSlowCommit, LEDGER_STATES),
    c(F::SecondExecutor, LEDGER_STATES),
    c(F::LedgerCommitLostReply, LEDGER_STATES),
    c(F::ProcessPause, LEDGER_STATES),
    c(F::ToolRedeployed, &[Submitting]),
    c(F::ServerRestart, &[Working]),
    c(F::Cancel503, &[CancelRequested]),
];

/// The tasks extension: input requests ride on status reads (a replay is a read showing one
/// delivered again); the body carries the JSON-RPC id. No `tool_redeployed`: the server chooses
/// task or inline per call, and a tool that no longer supports tasks runs inline, as every short
/// call already does.
const MCP_TASKS_EXT: &[Cell] = &[
    c(F::LostResponseAfterCreation, &[Submitting]),
    c(F::LostRequest, &[Submitting, Working]),
    c(F::PollsOutOfOrder, &[Working]),
    c(F::InputRequiredReplay, &[Working]),
    c(F::CompletionCancelRace, &[CancelRequested]),
    c(F::CancelAckLost, &[CancelRequested]),
    c(F::ResultLost, &[Working, FetchingResult]),
    c(F::ResultTruncated, &[Working, FetchingResult]),
    c(F::OldEpochMessage, &[Working]),
    c(F::TaskIdMisuse, &[Working]),
    c(F::NotFoundBeforeExpiry, &[Working]),
    c(F::NotFoundAfterExpiry, &[Working]),
    c(F::Poll429, &[Working]),
    c(F::Poll503, &[Working]),
    c(F::ConnectionDrop, &[Working]),
    c(F::ExecutorCrash, &[Working]),
    c(F::ServerDeletesRunningTask, &[Working]),
    c(F::TtlFailsRunningTask, &[Working]),
    c(F::CancelIgnored, &[CancelRequested]),
    c(F::Rollback, &[Working]),
    c(F::ApprovalReplay, &[InputRequired]),
    c(F::StatusAfterCancel, &[CancelledAccepted]),
    c(F::LateDuplicateReply, &[Accepted]),
    c(F::ReplyToOtherExchange, &[Working]),
    c(F::LedgerSlowCommit, LEDGER_STATES),
    c(F::SecondExecutor, LEDGER_STATES),
    c(F::LedgerCommitLostReply, LEDGER_STATES),
    c(F::ProcessPause, LEDGER_STATES),
    c(F::ServerRestart, &[Working]),
    c(F::Cancel503, &[CancelRequested]),
];

/// AIP-151: no input requests (no replay of them, no approvals), and the body carries no
/// request id (a reply is its HTTP response), so it cannot name another request. No tools to
/// list, so no `tool_redeployed`. A done operation is its own result, so result faults meet
/// status reads too. No `server_restart`: an operation is a durable resource that outlives the
/// server's processes.
const AIP_151: &[Cell] = &[
    c(F::LostResponseAfterCreation, &[Submitting]),
    c(F::LostRequest, &[Submitting, Working, FetchingResult]),
    c(F::PollsOutOfOrder, &[Working]),
    c(F::CompletionCancelRace, &[CancelRequested]),
    c(F::CancelAckLost, &[CancelRequested]),
    c(F::CancelIgnored, &[CancelRequested]),
    c(F::Cancel503, &[CancelRequested]),
    c(F::ResultLost, &[Working, FetchingResult]),
    c(F::ResultTruncated, &[Working, FetchingResult]),
    c(F::OldEpochMessage, &[Working]),
    c(F::TaskIdMisuse, &[Working, FetchingResult]),
    c(F::NotFoundBeforeExpiry, &[Working, FetchingResult]),
    c(
        F::NotFoundAfterExpiry,
        &[Working, CancelRequested, FetchingResult],
    ),
    c(F::Poll429, &[Working, FetchingResult]),
    c(F::Poll503, &[Working, FetchingResult]),
    c(F::ConnectionDrop, &[Working]),
    c(F::ExecutorCrash, &[Working]),
    c(F::ServerDeletesRunningTask, &[Working]),
    c(F::Rollback, &[Working]),
    c(F::StatusAfterCancel, &[CancelledAccepted]),
    c(F::LateDuplicateReply, &[Accepted]),
    c(F::LedgerSlowCommit, LEDGER_STATES),
    c(F::SecondExecutor, LEDGER_STATES),
    c(F::LedgerCommitLostReply, LEDGER_STATES),
    c(F::ProcessPause, LEDGER_STATES),
];

/// The faults `p` can express, each with the states it meets: the protocol's catalogue row.
pub fn row(p: Protocol) -> &'static [Cell] {
    match p {
        Protocol::Mcp20251125 => MCP_2025_11_25,
        Protocol::McpTasksExt => MCP_TASKS_EXT,
        Protocol::Aip151 => AIP_151,
    }
}

pub fn expresses(p: Protocol, f: FaultKind) -> bool {
    row(p).iter().any(|c| c.fault == f)
}

/// The states `f` meets on `p` (empty if `p` cannot express `f`).
pub fn reachable(p: Protocol, f: FaultKind) -> &'static [LocalState] {
    row(p)
        .iter()
        .find(|c| c.fault == f)
        .map_or(&[], |c| c.states)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_every_row_is_sound() {
        for f in FaultKind::ALL {
            assert_eq!(FaultKind::from_name(&f.name()), Some(f));
            assert!(
                Protocol::ALL.iter().any(|&p| expresses(p, f)),
                "{} is expressed nowhere",
                f.name()
            );
        }
        assert_eq!(FaultKind::from_name("no_such_fault"), None);
        for p in Protocol::ALL {
            let row = row(p);
            for (i, cell) in row.iter().enumerate() {
                assert!(
                    !cell.states.is_empty(),
                    "{p}: {} has no reachable state",
                    cell.fault.name()
                );
                assert!(
                    row[..i].iter().all(|o| o.fault != cell.fault),
                    "{p}: {} listed twice",
                    cell.fault.name()
                );
                if let Some(src) = cell.fault.follows_from() {
                    assert!(
                        expresses(p, src),
                        "{p}: {} follows from {}, which it cannot express",
                        cell.fault.name(),
                        src.name()
                    );
                }
            }
        }
    }

    #[test]
    fn what_each_wire_format_cannot_carry_is_left_out() {
        for f in [
            F::InputRequiredReplay,
            F::ApprovalReplay,
            F::ReplyToOtherExchange,
        ] {
            assert!(!expresses(Protocol::Aip151, f), "{}", f.name());
            assert!(
                expresses(Protocol::Mcp20251125, f) && expresses(Protocol::McpTasksExt, f),
                "{}",
                f.name()
            );
        }
        // MCP 2025-11-25 expresses every fault but rmcp's ttl sweep (its SDKs delete instead)
        // and an ignored cancel (its cancel's reply shows the task `cancelled`); both delayed
        // cancels can be ignored.
        assert_eq!(row(Protocol::Mcp20251125).len(), FaultKind::ALL.len() - 2);
        assert!(!expresses(Protocol::Mcp20251125, F::TtlFailsRunningTask));
        assert!(!expresses(Protocol::Mcp20251125, F::CancelIgnored));
        assert!(
            expresses(Protocol::McpTasksExt, F::CancelIgnored)
                && expresses(Protocol::Aip151, F::CancelIgnored)
        );
        assert_eq!(
            reachable(Protocol::Aip151, F::ApprovalReplay),
            &[] as &[LocalState]
        );
    }
}
