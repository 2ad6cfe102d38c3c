//! Planted anti-patterns, each named after a bug that real long-running-operation clients ship.
//! Compiled only with the `mutations` feature, which the simulator enables and production
//! builds never do: `toolop-sim mutants` proves the gate catches every one of them.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mutation {
    /// After a submit timeout, resubmit under a freshly minted idempotency key.
    FreshKeyOnSubmitTimeout,
    /// After a submit timeout, resubmit (same key) without first querying by key.
    ResubmitWithoutLookup,
    /// Mark the call failed locally the moment cancel is clicked.
    FailOnCancelClick,
    /// Rewrite a -32602 cancel rejection (task already terminal) as cancelled.
    CancelRejectionAsCancelled,
    /// Accept `completed` from tasks/get without fetching the result.
    AcceptCompletedWithoutFetch,
    /// Accept a truncated or unverified result (or one naming another task).
    AcceptUnverifiedResult,
    /// Treat a cancel ack as provisional and let a later `completed` win.
    AcceptLateCompletionAfterCancel,
    /// Treat any 404 as "never created" and resubmit.
    NotFoundMeansNeverCreated,
    /// Treat a client disconnect as a server-side cancel.
    DisconnectIsCancel,
    /// Accept an approval reply from an older input round.
    AcceptStaleApproval,
    /// Ignore the execution epoch: an old executor keeps acting after a takeover.
    IgnoreEpoch,
    /// Send without the executor-wide QPS limiter.
    NoQpsLimiter,
    /// Ignore Retry-After on 429/503.
    IgnoreRetryAfter,
    /// Let a poll answer that arrives late overwrite a newer state.
    LateAnswerOverwrites,
    /// Fetch a completed result once more after its receipt is committed.
    SendAfterReceipt,
    /// Hand a failed outcome downstream without its error payload.
    FailedPayloadDropped,
    /// Never reset the not-found streak when the server shows the operation alive again.
    NotFoundStreakNeverReset,
    /// Forget a cancel clicked before the server named the operation.
    CancelDroppedBeforeOperationId,
    /// Read "the tool may have run" (a submission outcome left open) as a refusal.
    UnknownOutcomeAsRefusal,
    /// A cancel write that lost a compare-and-swap is retried at the version the ledger
    /// reported, without reading the record again: another writer's commit is overwritten.
    BlindCancelWrite,
    /// The fencing token is read from the ledger at each write instead of kept from the start:
    /// a rolled-back executor's writes (receipts included) pass the fence.
    ForgedFencingToken,
    /// Record the digest of a result that failed verification (truncated, unverified, naming
    /// another task) as if it were provisional, and drop it when fetching again: the record
    /// named one result, the receipt names another, and the ledger's digest check (which
    /// compares with the digest stored now) never sees the first.
    UnverifiedDigestRecorded,
    /// Raise an effect reconciliation (a person asked to undo a side effect) for any late
    /// completed or failed status after a final state, not only after a confirmed cancel: an
    /// ordinary late poll reply after a completed receipt then pages someone.
    EffectReconciliationOnAnyLateEnd,
    /// After a still-working status, arm no next poll: the node has nothing that wakes it, and
    /// the runner's stall watch resumes it a request timeout later, so it still settles.
    PollNotRearmed,
    /// A sent submission taken up (another process's, or after a restart) waits a request
    /// lease from the sender's step, not from the take-up: a sender frozen past its beats,
    /// whose reply waits unread, is handed to a person as it thaws (mcp_ext_faults seed
    /// 1183230, before beats).
    TakeUpLeaseFromSenderStep,
    /// Look for operators' cancel requests in the ledger (`toolop cancel NODE`) only when the
    /// executor starts: a running executor never finds one, and the operator's cancel waits
    /// for the next restart while the operation runs on.
    CancelRequestsOnlyAtStart,
    /// Send every call task-augmented, whatever `tools/list` said of the tool: a tool that
    /// forbids tasks is run and refused (the TS SDK) or refused (the Python SDK, the spec)
    /// where the executor could have called it synchronously.
    IgnoreToolTaskSupport,
    /// Refuse every tool that forbids tasks, even one that publishes a synchronous bound with
    /// the executor configured to run such tools synchronously (`no_task_support = run_sync`).
    RefuseSynchronousTools,
    /// Resolve a submission whose reply was lost by looking it up by key whether or not the
    /// server offers lookup by key: a real SDK server ignores the key it does not know, nothing
    /// it lists names the key, and the executor reads that as "never created" and submits
    /// again (a second operation). Caught only in series without the toolop extensions
    /// (session 38; until then every series offered them).
    LookupWithoutExtension,
    /// End the process's beat on the way down from a crash, as a clean-up handler would: a
    /// real crash (kill -9, a power cut) runs no clean-up, so replicas that read "left" from
    /// the ended beat in the simulator read "frozen" from a stale one in life.
    EndBeatOnCrash,
    /// Give a synchronous call the request timeout, not the bound its tool published: a slow
    /// tool that promised an answer within a minute is handed to a person at ten seconds,
    /// although its answer (and its effect) is on the way.
    SyncCallOnRequestTimeout,
    /// Drop a late completed or failed status that arrives after a confirmed cancel, as any
    /// status after a final state is dropped: the cancelled effect may be real, the CANCELLED
    /// receipt no longer tells the truth, and nobody is asked to undo or confirm it.
    EffectReconciliationDropped,
    /// Report a retired adapter's lane drained as soon as it is retired, whatever still runs
    /// on it: an operator takes the old server away while calls on it are in flight, and their
    /// outcomes are lost with it.
    DrainedAtRetirement,
    /// Read a task the server no longer knows as failed ("404: the task is gone, so it
    /// failed"): a receipt for an outcome nobody saw, where the work may have completed (a
    /// task deleted at its ttl runs on) or been lost unfinished (a server restart).
    NotFoundIsFailure,
    /// Open a new HTTP session in every process instead of continuing the one the store
    /// keeps (`toolop resume`, or a second process on the same target): a server that shows a
    /// task only to the session that created it (the TS and Python SDKs) answers every later
    /// process "not found" for the earlier ones' tasks, and live tasks go to a person. Planted
    /// in the simulator's copy of the CLI's session keeping (`series::net::session`), the
    /// code that reads the kept session being the CLI's, not the runner's.
    FreshSessionPerProcess,
    /// Send the cancel again at every read while a best-effort cancel the server took is
    /// pending, uncounted, instead of only reading (the `while not cancelled: cancel()` loop):
    /// a server that acknowledges cancels and finishes the work anyway (AIP-151's best-effort
    /// cancel, rmcp's `ignores_cancel` tool) gets a cancel every requery for as long as the work
    /// runs, far past `max_cancel_attempts`.
    CancelUntilConfirmed,
    /// Send one cancel more than `max_cancel_attempts` allows: the check that the attempts are
    /// spent reads `>` where it means `>=`. A server whose gateway keeps refusing cancels gets
    /// one more before the node goes to a person.
    CancelBudgetOffByOne,
    /// Read the status of a cancelling node on the poll schedule, not at the cancel's requery
    /// interval: the poll backoff grew while the work ran (to its 20 s cap), so each read after
    /// a cancel waits as long as a read of the running work would, and the person who clicked
    /// cancel waits several of them. No safety property breaks: `cancel_requeried_on_time`
    /// judges the reads' pace (the cancel-confirmation gate saw it only over a sweep, and only
    /// in AIP-151).
    CancelRequeryOnPollSchedule,
}

impl Mutation {
    pub const ALL: [Mutation; 38] = [
        Mutation::FreshKeyOnSubmitTimeout,
        Mutation::ResubmitWithoutLookup,
        Mutation::FailOnCancelClick,
        Mutation::CancelRejectionAsCancelled,
        Mutation::AcceptCompletedWithoutFetch,
        Mutation::AcceptUnverifiedResult,
        Mutation::AcceptLateCompletionAfterCancel,
        Mutation::NotFoundMeansNeverCreated,
        Mutation::DisconnectIsCancel,
        Mutation::AcceptStaleApproval,
        Mutation::IgnoreEpoch,
        Mutation::NoQpsLimiter,
        Mutation::IgnoreRetryAfter,
        Mutation::LateAnswerOverwrites,
        Mutation::SendAfterReceipt,
        Mutation::FailedPayloadDropped,
        Mutation::NotFoundStreakNeverReset,
        Mutation::CancelDroppedBeforeOperationId,
        Mutation::UnknownOutcomeAsRefusal,
        Mutation::BlindCancelWrite,
        Mutation::ForgedFencingToken,
        Mutation::UnverifiedDigestRecorded,
        Mutation::EffectReconciliationOnAnyLateEnd,
        Mutation::PollNotRearmed,
        Mutation::TakeUpLeaseFromSenderStep,
        Mutation::CancelRequestsOnlyAtStart,
        Mutation::IgnoreToolTaskSupport,
        Mutation::RefuseSynchronousTools,
        Mutation::LookupWithoutExtension,
        Mutation::EndBeatOnCrash,
        Mutation::SyncCallOnRequestTimeout,
        Mutation::EffectReconciliationDropped,
        Mutation::DrainedAtRetirement,
        Mutation::NotFoundIsFailure,
        Mutation::FreshSessionPerProcess,
        Mutation::CancelUntilConfirmed,
        Mutation::CancelBudgetOffByOne,
        Mutation::CancelRequeryOnPollSchedule,
    ];

    /// A plant no checker can catch, because it breaks no property of a single series: it is
    /// slow, not wrong. The gate judges it over a whole sweep (`toolop-sim mutants`), on the
    /// latency gates the unmutated executor passes on the same seeds. None is, now:
    /// `cancel_requery_on_poll_schedule` was until `cancel_requeried_on_time` judged the
    /// requery's pace per series (the gate had caught it in AIP-151 alone, by 0.37 points).
    pub fn judged_by_gate(self) -> bool {
        Mutation::JUDGED_BY_GATE.contains(&self)
    }

    const JUDGED_BY_GATE: [Mutation; 0] = [];

    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }

    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == name)
    }
}
