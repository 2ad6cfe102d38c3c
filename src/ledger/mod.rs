//! The durable operation ledger: records, terminal receipts, the outbox, the manual
//! reconciliation queue, effect-reconciliation records and cancel intents. Every write is one
//! transaction guarded by compare-and-swap on the record version and fenced by the writer's
//! execution epoch.
//!
//! Two implementations pass one test suite: [`MemoryLedger`] (the simulator's default) and
//! [`SqliteLedger`] (the durable one). The rules both apply live in `checks.rs`, so they cannot
//! drift apart; the SQLite schema enforces what a database can enforce by itself on top.

mod checks;
mod error;
mod memory;
mod sqlite;

pub use error::LedgerError;
pub use memory::MemoryLedger;
pub use sqlite::{
    rusqlite, ConsumeError, SqliteLedger, SqliteOptions, Synchronous, SCHEMA_VERSION,
};

use serde::{Deserialize, Serialize};

use crate::core::AcceptSpec;
use crate::record::{LocalState, TerminalState, ToolOperation};

/// The epoch a fresh ledger starts at: the first executor writes under it.
pub const INITIAL_EPOCH: u64 = 1;

/// The single proof that a call node reached a terminal state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub receipt_id: String,
    pub call_node_id: String,
    pub operation_id: Option<String>,
    pub request_digest: String,
    pub tool_version: String,
    pub execution_epoch: u64,
    pub cancel_generation: u32,
    pub terminal_state: TerminalState,
    pub result_digest: Option<String>,
    pub accepted_at_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    /// Written by the acceptance transaction; no consumer has acknowledged it.
    Ready,
    /// A consumer acknowledged it (`mark_delivered`); it is never handed out again.
    Delivered,
}

impl OutboxStatus {
    pub fn name(self) -> &'static str {
        match self {
            OutboxStatus::Ready => "ready",
            OutboxStatus::Delivered => "delivered",
        }
    }
}

/// What downstream work may consume: exactly one per receipt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    /// Assigned by the acceptance transaction, strictly increasing, never reused: consumers
    /// page through the outbox by it.
    pub seq: u64,
    pub call_node_id: String,
    pub receipt_id: String,
    /// Always explicit: a consumer never infers the outcome from which payload is present.
    pub terminal_state: TerminalState,
    /// The result of a completed or failed outcome (the error of a failed one). Never set for
    /// any other terminal state.
    pub payload: Option<serde_json::Value>,
    /// A result the server returned for a cancelled operation: kept for audit, never a
    /// success payload.
    pub audit_payload: Option<serde_json::Value>,
    pub status: OutboxStatus,
    /// The consumer that acknowledged the entry, once one has.
    pub delivered_to: Option<String>,
    pub delivered_at_ms: Option<u64>,
}

/// An item the executor could not prove; it stays queryable by operation id or submission key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReconcileItem {
    pub call_node_id: String,
    pub operation_id: Option<String>,
    pub submission_key: String,
    pub reason: String,
    pub at_ms: u64,
}

/// A completion that arrived after a cancel was confirmed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectItem {
    pub call_node_id: String,
    pub operation_id: Option<String>,
    pub reason: String,
    pub at_ms: u64,
}

/// A cancel asked for by someone other than the executor (the live CLI's `toolop cancel`),
/// waiting for an executor to turn it into a committed cancel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub call_node_id: String,
    pub at_ms: u64,
}

/// A process's sign of life on a shared ledger: the newest time it said it was alive, under its
/// epoch. Another process on the same ledger leaves a submission this one sent to it while the
/// beat is fresh: the sender will read the reply, however long its commits hold it
/// (`RunnerConfig::beat_timeout_ms`). Not part of the [`LedgerSnapshot`]: a beat says nothing
/// about any operation, and a crashed process's last one only goes stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beat {
    /// `Ctx::process` of the beating process.
    pub process: u64,
    pub epoch: u64,
    pub at_ms: u64,
}

/// One transaction: the record at `expected_version` becomes `record`, plus side records.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    pub expected_version: u64,
    /// The fencing token: the execution epoch of the executor making the write. Checked
    /// against the ledger's current epoch, whatever `record.execution_epoch` says.
    pub writer_epoch: u64,
    pub record: ToolOperation,
    pub accept: Option<AcceptSpec>,
    pub reconcile: Option<String>,
    /// Ask a person about a side effect (a task that ended after its confirmed cancel). At most
    /// one item per call node and operation: a second frame showing the same late end (a
    /// duplicated push, a late poll reply) asks nothing new, and the first item stays.
    pub effect: Option<String>,
    pub now_ms: u64,
}

/// Everything a ledger holds, for audits, for the shared test suite's comparisons and for the
/// simulator's final trace event.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LedgerSnapshot {
    pub current_epoch: u64,
    pub records: Vec<ToolOperation>,
    pub receipts: Vec<Receipt>,
    pub outbox: Vec<OutboxEntry>,
    pub reconciliation_queue: Vec<ReconcileItem>,
    pub effect_reconciliations: Vec<EffectItem>,
    pub cancel_requests: Vec<CancelRequest>,
}

/// What a writer needs to know of a stored record beside its own write: the version, local
/// state and result digest the ledger holds. Read with [`Ledger::record_head`], which copies
/// only these, not the whole record (the simulator reads them under its lock at every commit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHead {
    pub version: u64,
    pub local_state: LocalState,
    pub result_digest: Option<String>,
}

impl RecordHead {
    pub fn of(rec: &ToolOperation) -> RecordHead {
        RecordHead {
            version: rec.version,
            local_state: rec.local_state,
            result_digest: rec.result_digest.clone(),
        }
    }
}

/// The ledger. Reads return `Result` too: on SQLite a read can fail (I/O, corruption), and a
/// failed read must never look like "no such record".
pub trait Ledger {
    /// The epoch writers must present. Starts at [`INITIAL_EPOCH`].
    fn current_epoch(&self) -> Result<u64, LedgerError>;
    /// Fence every writer of the current epoch (a rollback); returns the new epoch, which the
    /// executor taking over writes under.
    fn bump_epoch(&mut self) -> Result<u64, LedgerError>;

    /// Store a new record (version 0 -> 1). Refused if the call node or key exists, or if
    /// `writer_epoch` is not the current epoch.
    fn insert(
        &mut self,
        record: ToolOperation,
        writer_epoch: u64,
    ) -> Result<ToolOperation, LedgerError>;
    /// Apply one write transaction; returns the stored record with its new version.
    fn commit(&mut self, write: Write) -> Result<ToolOperation, LedgerError>;

    fn by_call_node(&self, call_node_id: &str) -> Result<Option<ToolOperation>, LedgerError>;
    /// The record that last carried this operation id (an id a record had before a
    /// re-submission still finds it).
    fn by_operation_id(&self, operation_id: &str) -> Result<Option<ToolOperation>, LedgerError>;
    fn by_submission_key(&self, key: &str) -> Result<Option<ToolOperation>, LedgerError>;
    /// Every record, ordered by call node id.
    fn records(&self) -> Result<Vec<ToolOperation>, LedgerError>;
    /// Every receipt, ordered by call node id.
    fn receipts(&self) -> Result<Vec<Receipt>, LedgerError>;
    /// The whole outbox, delivered entries included, in `seq` order.
    fn outbox(&self) -> Result<Vec<OutboxEntry>, LedgerError>;
    /// In the order the items were written.
    fn reconciliation_queue(&self) -> Result<Vec<ReconcileItem>, LedgerError>;
    /// In the order the items were written; one per call node and operation.
    fn effect_reconciliations(&self) -> Result<Vec<EffectItem>, LedgerError>;
    /// The outbox entry of one call node, if it has one.
    fn outbox_entry(&self, call_node_id: &str) -> Result<Option<OutboxEntry>, LedgerError>;
    /// The local state of one call node, without copying its record.
    fn local_state(&self, call_node_id: &str) -> Result<Option<LocalState>, LedgerError>;
    /// The head of one call node's record: what `by_call_node` would answer (errors included),
    /// cut down to [`RecordHead`], without copying the whole record. Required, not defaulted
    /// through `by_call_node`: every ledger answers it cheaply, and a default no ledger used
    /// was code no test could judge (a cargo-mutants survivor).
    fn record_head(&self, call_node_id: &str) -> Result<Option<RecordHead>, LedgerError>;
    /// (records, records in a final state).
    fn settled_count(&self) -> Result<(usize, usize), LedgerError>;
    /// Records the executor still has work on, ordered by call node id.
    fn in_flight(&self) -> Result<Vec<ToolOperation>, LedgerError>;

    /// Outbox consumer: up to `limit` entries not yet delivered with `seq > after_seq`, in
    /// `seq` order. An entry stays ready until acknowledged, so a consumer that crashed before
    /// its acknowledgement reads it again (at-least-once).
    fn outbox_ready(&self, after_seq: u64, limit: usize) -> Result<Vec<OutboxEntry>, LedgerError>;
    /// Outbox consumer: acknowledge one entry. Idempotent for the same consumer (`Ok(false)`
    /// when it was already acknowledged by `consumer_id`); an entry another consumer
    /// acknowledged is [`LedgerError::AlreadyDelivered`].
    fn mark_delivered(
        &mut self,
        receipt_id: &str,
        consumer_id: &str,
        at_ms: u64,
    ) -> Result<bool, LedgerError>;

    /// Ask for a cancel of a call node from outside the executor. Idempotent: a second request
    /// for the same node keeps the first one's time. Unknown node: an error.
    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError>;
    /// Pending cancel requests, oldest first.
    fn cancel_requests(&self) -> Result<Vec<CancelRequest>, LedgerError>;
    /// Remove a pending request once the cancel it asked for is committed in the record (or
    /// moot). Taking a request that is not there is a no-op.
    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError>;

    /// Say `beat.process` is alive at `beat.at_ms`, replacing its previous beat. One small
    /// write of its own: never fenced (a fenced process's beat names its older epoch, and
    /// readers compare epochs) and never part of a record's transaction.
    fn beat(&mut self, beat: Beat) -> Result<(), LedgerError>;
    /// The process is leaving: forget its beat, so nobody waits for it. No beat: a no-op.
    fn end_beat(&mut self, process: u64) -> Result<(), LedgerError>;
    /// The newest beat of `process`, if it has one.
    fn beat_of(&self, process: u64) -> Result<Option<Beat>, LedgerError>;

    fn snapshot(&self) -> Result<LedgerSnapshot, LedgerError> {
        Ok(LedgerSnapshot {
            current_epoch: self.current_epoch()?,
            records: self.records()?,
            receipts: self.receipts()?,
            outbox: self.outbox()?,
            reconciliation_queue: self.reconciliation_queue()?,
            effect_reconciliations: self.effect_reconciliations()?,
            cancel_requests: self.cancel_requests()?,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
