//! The durable operation ledger: records, terminal receipts, the outbox, the manual
//! reconciliation queue and effect-reconciliation records. Every write is one transaction
//! guarded by compare-and-swap on the record version.

mod memory;

pub use memory::MemoryLedger;

use serde::{Deserialize, Serialize};

use crate::core::AcceptSpec;
use crate::record::{TerminalState, ToolOperation};

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
    Ready,
}

/// What downstream work may consume: exactly one per receipt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub call_node_id: String,
    pub receipt_id: String,
    pub terminal_state: TerminalState,
    /// Present only for completed and failed outcomes: a cancelled result is audit, not payload.
    pub payload: Option<serde_json::Value>,
    pub status: OutboxStatus,
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

/// A cancel click written to the ledger by someone other than the executor running the call
/// node (`toolop cancel` from another process); the executor picks it up and takes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub call_node_id: String,
    pub at_ms: u64,
}

/// One transaction: the record at `expected_version` becomes `record`, plus side records.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    pub expected_version: u64,
    pub record: ToolOperation,
    pub accept: Option<AcceptSpec>,
    pub reconcile: Option<String>,
    pub effect: Option<String>,
    pub now_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerError {
    /// Someone else wrote the record since it was read.
    VersionConflict { call_node_id: String, expected: u64, found: u64 },
    /// A writer from an older execution epoch: it was rolled back or taken over.
    StaleEpoch { call_node_id: String, writer: u64, stored: u64 },
    DuplicateCallNode(String),
    DuplicateSubmissionKey(String),
    UnknownCallNode(String),
    /// The acceptance checks failed; nothing was written.
    AcceptRefused { call_node_id: String, why: String },
    /// Programmer-visible misuse caught at the boundary (e.g. changing a record's identity).
    Invalid(String),
}

impl std::fmt::Display for LedgerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for LedgerError {}

/// Everything a ledger holds, for audits and for the simulator's final trace event.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LedgerSnapshot {
    pub records: Vec<ToolOperation>,
    pub receipts: Vec<Receipt>,
    pub outbox: Vec<OutboxEntry>,
    pub reconciliation_queue: Vec<ReconcileItem>,
    pub effect_reconciliations: Vec<EffectItem>,
}

pub trait Ledger {
    /// Store a new record (version 0 -> 1). Refused if the call node or key exists.
    fn insert(&mut self, record: ToolOperation) -> Result<ToolOperation, LedgerError>;
    /// Apply one write transaction; returns the stored record with its new version.
    fn commit(&mut self, write: Write) -> Result<ToolOperation, LedgerError>;
    fn by_call_node(&self, call_node_id: &str) -> Option<ToolOperation>;
    fn by_operation_id(&self, operation_id: &str) -> Option<ToolOperation>;
    fn by_submission_key(&self, key: &str) -> Option<ToolOperation>;
    /// Every record, ordered by call node id.
    fn records(&self) -> Vec<ToolOperation>;
    fn receipts(&self) -> Vec<Receipt>;
    fn outbox(&self) -> Vec<OutboxEntry>;
    fn reconciliation_queue(&self) -> Vec<ReconcileItem>;
    fn effect_reconciliations(&self) -> Vec<EffectItem>;
    /// Record a cancel click for a call node (refused for an unknown one). Idempotent.
    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError>;
    /// Cancel clicks not yet taken, ordered by call node id.
    fn cancel_requests(&self) -> Vec<CancelRequest>;
    /// The executor has turned the click into a cancel event; taking an absent one is a no-op.
    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError>;

    /// The outbox entry of one call node, if it has one.
    fn outbox_entry(&self, call_node_id: &str) -> Option<OutboxEntry> {
        self.outbox().into_iter().find(|e| e.call_node_id == call_node_id)
    }

    /// The local state of one call node, without copying its record.
    fn local_state(&self, call_node_id: &str) -> Option<crate::record::LocalState> {
        self.by_call_node(call_node_id).map(|r| r.local_state)
    }

    /// (records, records in a final state).
    fn settled_count(&self) -> (usize, usize) {
        let recs = self.records();
        let done = recs.iter().filter(|r| r.local_state.is_final()).count();
        (recs.len(), done)
    }

    fn snapshot(&self) -> LedgerSnapshot {
        LedgerSnapshot {
            records: self.records(),
            receipts: self.receipts(),
            outbox: self.outbox(),
            reconciliation_queue: self.reconciliation_queue(),
            effect_reconciliations: self.effect_reconciliations(),
        }
    }

    /// Records the executor still has work on, ordered by call node id.
    fn in_flight(&self) -> Vec<ToolOperation> {
        self.records().into_iter().filter(|r| !r.local_state.is_final()).collect()
    }
}


#[cfg(test)]
mod tests;
