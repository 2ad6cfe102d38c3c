//! The sans-IO executor core: `(record, event, ctx) -> (record', commands, outcome)`.
//!
//! The core reads no clock, draws no random numbers and does no I/O: the current time, a jitter
//! draw and the executor's epoch arrive in [`Ctx`]. The runner persists `record'` (one ledger
//! transaction, including any receipt) *before* it executes a single command, so every send is
//! preceded by the write that explains it.

mod handlers;
#[cfg(feature = "mutations")]
pub mod mutation;
pub mod poll;
pub mod transitions;

use serde::{Deserialize, Serialize};

use crate::protocol::{ApprovalReply, InputRequest, Outbound, Reply, RequestKind, TaskView};
use crate::record::{LocalState, TerminalState, ToolOperation};
pub use poll::{PollPolicy, QpsLimiter};

/// Executor settings the core needs. Limits on every retry loop live here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoreConfig {
    pub poll: PollPolicy,
    /// Total time the executor waits for one call node before handing it to reconciliation.
    pub wait_budget_ms: u64,
    pub approval_timeout_ms: u64,
    pub cancel_requery_interval_ms: u64,
    /// Delay before retrying a lookup, fetch or submission after a loss.
    pub retry_interval_ms: u64,
    /// Retention the executor asks for; the server may override it.
    pub task_ttl_ms: Option<u64>,
    pub max_submit_attempts: u32,
    pub max_lookup_attempts: u32,
    pub max_fetch_attempts: u32,
    pub max_cancel_attempts: u32,
    /// Not-found answers tolerated in a row, before the reckoned expiry or after it (a 404
    /// from a lagging replica is not proof, and the reckoned expiry is an estimate).
    pub not_found_retries: u32,
    /// How long after a request was committed to be sent its reply may still reach the
    /// process that sent it: a process resuming a sent submission waits that long before it
    /// takes the outcome as unknown (two executors on one epoch), and a not-found streak does
    /// not conclude that long after it overtook an unanswered read. The runner sets it to its
    /// request timeout (so a configuration does not name it).
    #[serde(skip)]
    pub request_lease_ms: u64,
    /// Set by negotiation: the server answers lookups by submission key.
    pub key_lookup: bool,
    /// Set by negotiation: how long the server keeps keys answerable (`None`: while the
    /// operation exists). A lookup older than this cannot prove "never created".
    pub key_retention_ms: Option<u64>,
    /// A planted anti-pattern (simulation builds only).
    #[cfg(feature = "mutations")]
    pub mutation: Option<mutation::Mutation>,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            poll: PollPolicy::default(),
            wait_budget_ms: 30 * 60 * 1_000,
            approval_timeout_ms: 60_000,
            cancel_requery_interval_ms: 2_000,
            retry_interval_ms: 1_000,
            task_ttl_ms: Some(15 * 60 * 1_000),
            max_submit_attempts: 3,
            max_lookup_attempts: 20,
            max_fetch_attempts: 8,
            max_cancel_attempts: 5,
            not_found_retries: 2,
            request_lease_ms: 10_000,
            key_lookup: true,
            key_retention_ms: None,
            #[cfg(feature = "mutations")]
            mutation: None,
        }
    }
}

impl CoreConfig {
    /// Whether a planted anti-pattern is active. Always false in production builds, where the
    /// compiler removes every mutated branch.
    #[cfg(feature = "mutations")]
    pub fn mutated(&self, m: mutation::Mutation) -> bool {
        self.mutation == Some(m)
    }
}

/// Inputs the core may not fetch itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx {
    pub now_ms: u64,
    /// A uniform draw in [0, 1000) from the caller's seeded RNG.
    pub jitter_permille: u32,
    /// The epoch of the executor processing this event.
    pub epoch: u64,
    /// Which executor process steps this event: distinct for every process on one ledger at a
    /// time (processes on one epoch share the record, not their connections).
    pub process: u64,
    /// Until when the sender of the request a not-found streak overtook unanswered
    /// (`PollCursor::overtaken`), another process of this epoch, was said alive by its beat,
    /// as the runner reads it: its last beat (counted no later than a request lease after the
    /// overtaking, when a live sender's request has been answered or timed out) plus the beat
    /// timeout. `None` when there is no such request, or it is this process's, another
    /// epoch's, or its sender never beat or left.
    pub overtaken_sender_until_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "timer")]
pub enum Timer {
    SubmitDue,
    LookupDue,
    PollDue,
    FetchDue,
    CancelRequery,
    ApprovalDeadline {
        round: u32,
    },
    /// The lease of a submission another process sent is over: its outcome is unknown now.
    SubmissionLease,
}

impl Timer {
    pub fn name(self) -> &'static str {
        match self {
            Timer::SubmitDue => "submit_due",
            Timer::LookupDue => "lookup_due",
            Timer::PollDue => "poll_due",
            Timer::FetchDue => "fetch_due",
            Timer::CancelRequery => "cancel_requery",
            Timer::ApprovalDeadline { .. } => "approval_deadline",
            Timer::SubmissionLease => "submission_lease",
        }
    }
}

/// Something that happened to one operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A new call node: send the submission (synchronously if the record says so).
    Start,
    /// The executor will not send this call at all (e.g. the tool has no task support and no
    /// synchronous bound): the call node ends `REJECTED` with a receipt, nothing is sent.
    RejectLocally,
    /// The executor restarted (or took over after a rollback) and found this record in flight.
    Resume,
    Timer(Timer),
    /// A decoded reply to request `seq`, sent by an executor of epoch `epoch`, at `sent_ms`
    /// when the sender knows (the ledger's clock): requests are numbered when committed and may
    /// leave later, so a number alone does not say what left first.
    Reply {
        kind: RequestKind,
        seq: u64,
        epoch: u64,
        sent_ms: Option<u64>,
        reply: Reply,
    },
    /// Request `seq` got no reply in time, or the connection dropped under it (`loss` says
    /// which).
    Lost {
        kind: RequestKind,
        seq: u64,
        epoch: u64,
        loss: Loss,
    },
    InputRequested(InputRequest),
    ApprovalReplied {
        round: u32,
        schema_digest: String,
        reply: ApprovalReply,
    },
    /// The caller asked to cancel.
    CancelClicked,
    /// The caller stopped waiting. Never a server-side cancel.
    CallerDetached,
    /// The server pushed the operation's status unasked (an MCP status notification). Advisory:
    /// a live operation keeps being polled; after a confirmed cancel, a task shown ending after
    /// all raises an effect reconciliation, as a late status reply does.
    StatusPushed(TaskView),
}

/// Why a request got no reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Its deadline passed: the server had the time to answer, and may yet have acted on it.
    Deadline,
    /// The connection closed for good under it (a stdio server gone): the process ends, and
    /// whatever the server said died with the connection. Not a reading of the server.
    ConnectionGone,
}

impl Event {
    pub fn name(&self) -> String {
        match self {
            Event::Start => "start".into(),
            Event::RejectLocally => "reject_locally".into(),
            Event::Resume => "resume".into(),
            // `concat`, not `format!`: a name is made for every event the core handles.
            Event::Timer(t) => ["timer:", t.name()].concat(),
            Event::Reply { kind, reply, .. } => ["reply:", kind.name(), ":", reply.name()].concat(),
            Event::Lost { kind, .. } => ["lost:", kind.name()].concat(),
            Event::InputRequested(_) => "input_requested".into(),
            Event::ApprovalReplied { .. } => "approval_replied".into(),
            Event::CancelClicked => "cancel_clicked".into(),
            Event::CallerDetached => "caller_detached".into(),
            Event::StatusPushed(_) => "status_pushed".into(),
        }
    }
}

/// What the acceptance transaction must check and write.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptSpec {
    pub terminal: TerminalState,
    pub result_digest: Option<String>,
    /// The result as fetched, whatever the terminal state. The ledger hands it downstream as
    /// the payload for completed and failed outcomes and only as audit for a cancelled one.
    pub payload: Option<serde_json::Value>,
    /// What the deciding step read; the ledger re-checks it against the record as stored.
    pub basis: AcceptBasis,
}

/// What an acceptance rests on, as the step that decided it read the record. The acceptance
/// transaction compares every field with the record as stored when it runs: another writer
/// (a concurrent cancel, a takeover after a rollback, an incarnation before a restart) may
/// have moved it since, and an acceptance decided on a record that no longer exists is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptBasis {
    pub operation_id: Option<String>,
    pub cancel_generation: u32,
    /// The record's own execution epoch (who owned it), not the writer's fencing token.
    pub execution_epoch: u64,
    /// The result digest the record held before this step (`None` unless one was recorded).
    pub recorded_result_digest: Option<String>,
    pub request_digest: String,
    pub tool_version: String,
}

impl AcceptBasis {
    pub fn of(rec: &ToolOperation) -> AcceptBasis {
        AcceptBasis {
            operation_id: rec.operation_id.clone(),
            cancel_generation: rec.cancel_generation,
            execution_epoch: rec.execution_epoch,
            recorded_result_digest: rec.result_digest.clone(),
            request_digest: rec.request_digest.clone(),
            tool_version: rec.tool_version.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Send `out`; `seq` ties the reply back to this request.
    Send {
        out: Outbound,
        seq: u64,
    },
    Schedule {
        at_ms: u64,
        timer: Timer,
    },
    AskApproval {
        round: u32,
        operation_id: String,
        request: serde_json::Value,
        requested_schema: serde_json::Value,
        schema_digest: String,
        deadline_ms: u64,
    },
    /// Write the terminal receipt and one outbox entry in the same transaction as the record.
    Accept(AcceptSpec),
    /// Hand the item to the manual reconciliation queue (same transaction as the record).
    Reconcile {
        reason: String,
    },
    /// A completion arrived after a cancel won: the effect needs a human.
    EffectReconciliation {
        reason: String,
    },
}

/// Why an event was not applied. Serialised (tagged by `rejection`) into observations, so a
/// reader matches on data, never on text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "rejection", rename_all = "snake_case")]
pub enum Rejection {
    StaleEpoch {
        event_epoch: u64,
        record_epoch: u64,
    },
    /// An answer older than one already applied.
    StaleAnswer {
        seq: u64,
        applied_seq: u64,
    },
    OperationMismatch {
        expected: Option<String>,
        got: String,
    },
    ReplayedInput,
    UnsolicitedInput,
    StaleApproval {
        round: u32,
        current_round: u32,
    },
    AlreadyFinal,
    NotApplicable,
}

impl Rejection {
    /// A short name for people: `stale_epoch`, `stale_answer`, ...
    pub fn name(&self) -> &'static str {
        match self {
            Rejection::StaleEpoch { .. } => "stale_epoch",
            Rejection::StaleAnswer { .. } => "stale_answer",
            Rejection::OperationMismatch { .. } => "operation_mismatch",
            Rejection::ReplayedInput => "replayed_input",
            Rejection::UnsolicitedInput => "unsolicited_input",
            Rejection::StaleApproval { .. } => "stale_approval",
            Rejection::AlreadyFinal => "already_final",
            Rejection::NotApplicable => "not_applicable",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The record moved through these states, first to last (always at least two).
    Moved(Vec<LocalState>),
    /// Applied without a state change.
    Stayed,
    Rejected(Rejection),
    /// The handler wanted a transition the table does not allow; nothing changed.
    Refused {
        from: LocalState,
        to: LocalState,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub record: ToolOperation,
    pub commands: Vec<Command>,
    pub outcome: Outcome,
}

/// Apply one event. Never panics on any event in any state.
pub fn step(rec: &ToolOperation, event: &Event, ctx: &Ctx, cfg: &CoreConfig) -> Step {
    let mut m = handlers::Machine::new(rec, ctx, cfg);
    match m.run(event) {
        Ok(outcome) => m.finish(outcome),
        Err(refused) => Step {
            record: rec.clone(),
            commands: vec![],
            outcome: refused,
        },
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
