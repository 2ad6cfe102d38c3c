//! In-memory ledger: ordered maps, one transaction per call. Also the reference the SQLite
//! ledger will be tested against.

use std::collections::BTreeMap;

use super::{CancelRequest, EffectItem, Ledger, LedgerError, OutboxEntry, OutboxStatus, ReconcileItem, Receipt, Write};
use crate::core::AcceptSpec;
use crate::record::{LocalState, TerminalState, ToolOperation};

#[derive(Clone, Debug, Default)]
pub struct MemoryLedger {
    records: BTreeMap<String, ToolOperation>,
    by_key: BTreeMap<String, String>,
    by_operation: BTreeMap<String, String>,
    receipts: BTreeMap<String, Receipt>,
    outbox: Vec<OutboxEntry>,
    reconcile: Vec<ReconcileItem>,
    effects: Vec<EffectItem>,
    cancels: BTreeMap<String, CancelRequest>,
}

impl MemoryLedger {
    pub fn new() -> MemoryLedger {
        MemoryLedger::default()
    }
}

/// The acceptance checks of design.md section 3, against the record as stored before the write.
fn check_accept(stored: &ToolOperation, next: &ToolOperation, spec: &AcceptSpec) -> Result<(), String> {
    if next.request_digest != stored.request_digest {
        return Err("request digest changed".into());
    }
    if next.tool_version != stored.tool_version {
        return Err("tool version changed".into());
    }
    if next.execution_epoch != stored.execution_epoch {
        return Err(format!("execution epoch {} is not the stored {}", next.execution_epoch, stored.execution_epoch));
    }
    if next.cancel_generation != stored.cancel_generation {
        return Err("cancel generation changed under the acceptance".into());
    }
    if stored.operation_id.is_some() && next.operation_id != stored.operation_id {
        return Err("operation id changed".into());
    }
    if spec.terminal != TerminalState::Rejected && next.operation_id.is_none() && !next.synchronous {
        return Err("a terminal state without an operation id".into());
    }
    if next.result_digest != spec.result_digest {
        return Err("result digest differs from the record".into());
    }
    if matches!(spec.terminal, TerminalState::Completed) && spec.result_digest.is_none() {
        return Err("completed without a fetched, verified result".into());
    }
    let want = match spec.terminal {
        TerminalState::Rejected => LocalState::Rejected,
        TerminalState::Cancelled if next.local_state == LocalState::CancelledAccepted => LocalState::CancelledAccepted,
        _ => LocalState::Accepted,
    };
    if next.local_state != want {
        return Err(format!("terminal {} cannot land in {}", spec.terminal.name(), next.local_state));
    }
    if next.local_state == LocalState::CancelledAccepted && next.cancel_generation == 0 {
        return Err("cancel confirmed but no cancel was ever requested".into());
    }
    Ok(())
}

impl Ledger for MemoryLedger {
    fn insert(&mut self, mut record: ToolOperation) -> Result<ToolOperation, LedgerError> {
        if self.records.contains_key(&record.call_node_id) {
            return Err(LedgerError::DuplicateCallNode(record.call_node_id));
        }
        if self.by_key.contains_key(&record.submission_key) {
            return Err(LedgerError::DuplicateSubmissionKey(record.submission_key));
        }
        if record.version != 0 {
            return Err(LedgerError::Invalid("a new record starts at version 0".into()));
        }
        record.version = 1;
        self.by_key.insert(record.submission_key.clone(), record.call_node_id.clone());
        self.records.insert(record.call_node_id.clone(), record.clone());
        Ok(record)
    }

    fn commit(&mut self, w: Write) -> Result<ToolOperation, LedgerError> {
        let id = w.record.call_node_id.clone();
        let stored = self.records.get(&id).ok_or_else(|| LedgerError::UnknownCallNode(id.clone()))?;
        if stored.version != w.expected_version {
            return Err(LedgerError::VersionConflict { call_node_id: id, expected: w.expected_version, found: stored.version });
        }
        if w.record.execution_epoch < stored.execution_epoch {
            return Err(LedgerError::StaleEpoch { call_node_id: id, writer: w.record.execution_epoch, stored: stored.execution_epoch });
        }
        if w.record.submission_key != stored.submission_key || w.record.request_digest != stored.request_digest {
            return Err(LedgerError::Invalid(format!("{id}: identity fields may not change")));
        }
        if stored.local_state.has_receipt() || self.receipts.contains_key(&id) {
            if w.accept.is_some() {
                return Err(LedgerError::AcceptRefused { call_node_id: id, why: "a receipt exists already".into() });
            }
            if w.record.local_state != stored.local_state {
                return Err(LedgerError::Invalid(format!("{id}: a receipted record cannot change state")));
            }
        }
        if w.accept.is_none() && w.record.local_state.has_receipt() && !stored.local_state.has_receipt() {
            return Err(LedgerError::Invalid(format!("{id}: {} needs the acceptance transaction", w.record.local_state)));
        }
        if let Some(spec) = &w.accept {
            check_accept(stored, &w.record, spec).map_err(|why| LedgerError::AcceptRefused { call_node_id: id.clone(), why })?;
        }
        // All checks passed: from here the transaction cannot fail.
        let mut next = w.record;
        next.version = w.expected_version + 1;
        if let Some(spec) = w.accept {
            let receipt_id = format!("{id}#receipt");
            self.receipts.insert(
                id.clone(),
                Receipt {
                    receipt_id: receipt_id.clone(),
                    call_node_id: id.clone(),
                    operation_id: next.operation_id.clone(),
                    request_digest: next.request_digest.clone(),
                    tool_version: next.tool_version.clone(),
                    execution_epoch: next.execution_epoch,
                    cancel_generation: next.cancel_generation,
                    terminal_state: spec.terminal,
                    result_digest: spec.result_digest.clone(),
                    accepted_at_ms: w.now_ms,
                },
            );
            let payload = match spec.terminal {
                TerminalState::Completed | TerminalState::Failed => spec.payload,
                _ => None,
            };
            // A shadow operation is receipted and checked, but nothing downstream ever sees it.
            if !next.shadow {
                self.outbox.push(OutboxEntry { call_node_id: id.clone(), receipt_id, terminal_state: spec.terminal, payload, status: OutboxStatus::Ready });
            }
        }
        if let Some(reason) = w.reconcile {
            self.reconcile.push(ReconcileItem {
                call_node_id: id.clone(),
                operation_id: next.operation_id.clone(),
                submission_key: next.submission_key.clone(),
                reason,
                at_ms: w.now_ms,
            });
        }
        if let Some(reason) = w.effect {
            self.effects.push(EffectItem { call_node_id: id.clone(), operation_id: next.operation_id.clone(), reason, at_ms: w.now_ms });
        }
        if let Some(op) = &next.operation_id {
            self.by_operation.insert(op.clone(), id.clone());
        }
        self.records.insert(id, next.clone());
        Ok(next)
    }

    fn by_call_node(&self, call_node_id: &str) -> Option<ToolOperation> {
        self.records.get(call_node_id).cloned()
    }

    fn by_operation_id(&self, operation_id: &str) -> Option<ToolOperation> {
        self.by_operation.get(operation_id).and_then(|id| self.records.get(id)).cloned()
    }

    fn outbox_entry(&self, call_node_id: &str) -> Option<OutboxEntry> {
        self.outbox.iter().find(|e| e.call_node_id == call_node_id).cloned()
    }

    fn local_state(&self, call_node_id: &str) -> Option<LocalState> {
        self.records.get(call_node_id).map(|r| r.local_state)
    }

    fn settled_count(&self) -> (usize, usize) {
        (self.records.len(), self.records.values().filter(|r| r.local_state.is_final()).count())
    }

    fn by_submission_key(&self, key: &str) -> Option<ToolOperation> {
        self.by_key.get(key).and_then(|id| self.records.get(id)).cloned()
    }

    fn records(&self) -> Vec<ToolOperation> {
        self.records.values().cloned().collect()
    }

    fn receipts(&self) -> Vec<Receipt> {
        self.receipts.values().cloned().collect()
    }

    fn outbox(&self) -> Vec<OutboxEntry> {
        self.outbox.clone()
    }

    fn reconciliation_queue(&self) -> Vec<ReconcileItem> {
        self.reconcile.clone()
    }

    fn effect_reconciliations(&self) -> Vec<EffectItem> {
        self.effects.clone()
    }

    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError> {
        if !self.records.contains_key(call_node_id) {
            return Err(LedgerError::UnknownCallNode(call_node_id.to_string()));
        }
        self.cancels.entry(call_node_id.to_string()).or_insert(CancelRequest { call_node_id: call_node_id.to_string(), at_ms });
        Ok(())
    }

    fn cancel_requests(&self) -> Vec<CancelRequest> {
        self.cancels.values().cloned().collect()
    }

    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError> {
        self.cancels.remove(call_node_id);
        Ok(())
    }
}
