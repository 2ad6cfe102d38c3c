//! In-memory ledger: ordered maps, one transaction per call (every check passes before the
//! first change). The simulator's default, and the reference the SQLite ledger is compared
//! with step by step.

use std::collections::BTreeMap;

use super::{
    checks, Beat, CancelRequest, EffectItem, Ledger, LedgerError, OutboxEntry, OutboxStatus,
    Receipt, ReconcileItem, RecordHead, Write, INITIAL_EPOCH,
};
use crate::record::{LocalState, ToolOperation};

#[derive(Clone, Debug)]
pub struct MemoryLedger {
    epoch: u64,
    records: BTreeMap<String, ToolOperation>,
    by_key: BTreeMap<String, String>,
    /// Every operation id a record ever carried, to the record that carried it last.
    by_operation: BTreeMap<String, String>,
    receipts: BTreeMap<String, Receipt>,
    outbox: Vec<OutboxEntry>,
    /// Outbox position by call node (at most one entry each) and by receipt id.
    outbox_at: BTreeMap<String, usize>,
    outbox_by_receipt: BTreeMap<String, usize>,
    reconcile: Vec<ReconcileItem>,
    effects: Vec<EffectItem>,
    /// Pending cancel requests by call node: (at_ms, arrival number) orders them.
    cancels: BTreeMap<String, (u64, u64)>,
    /// Counters that, like SQLite's AUTOINCREMENT, only ever grow.
    last_outbox_seq: u64,
    last_cancel_seq: u64,
    beats: BTreeMap<u64, Beat>,
}

impl Default for MemoryLedger {
    fn default() -> Self {
        MemoryLedger {
            epoch: INITIAL_EPOCH,
            records: BTreeMap::new(),
            by_key: BTreeMap::new(),
            by_operation: BTreeMap::new(),
            receipts: BTreeMap::new(),
            outbox: Vec::new(),
            outbox_at: BTreeMap::new(),
            outbox_by_receipt: BTreeMap::new(),
            reconcile: Vec::new(),
            effects: Vec::new(),
            cancels: BTreeMap::new(),
            last_outbox_seq: 0,
            last_cancel_seq: 0,
            beats: BTreeMap::new(),
        }
    }
}

impl MemoryLedger {
    pub fn new() -> MemoryLedger {
        MemoryLedger::default()
    }
}

impl Ledger for MemoryLedger {
    fn current_epoch(&self) -> Result<u64, LedgerError> {
        Ok(self.epoch)
    }

    fn bump_epoch(&mut self) -> Result<u64, LedgerError> {
        self.epoch += 1;
        Ok(self.epoch)
    }

    fn insert(
        &mut self,
        mut record: ToolOperation,
        writer_epoch: u64,
    ) -> Result<ToolOperation, LedgerError> {
        checks::check_insert(&record, writer_epoch, self.epoch)?;
        if self.records.contains_key(&record.call_node_id) {
            return Err(LedgerError::DuplicateCallNode(record.call_node_id));
        }
        if self.by_key.contains_key(&record.submission_key) {
            return Err(LedgerError::DuplicateSubmissionKey(record.submission_key));
        }
        record.version = 1;
        self.by_key
            .insert(record.submission_key.clone(), record.call_node_id.clone());
        if let Some(op) = &record.operation_id {
            self.by_operation
                .insert(op.clone(), record.call_node_id.clone());
        }
        self.records
            .insert(record.call_node_id.clone(), record.clone());
        Ok(record)
    }

    fn commit(&mut self, w: Write) -> Result<ToolOperation, LedgerError> {
        let id = w.record.call_node_id.clone();
        let stored = self
            .records
            .get(&id)
            .ok_or_else(|| LedgerError::UnknownCallNode(id.clone()))?;
        checks::check_commit(stored, self.receipts.contains_key(&id), self.epoch, &w)?;
        // All checks passed: from here the transaction cannot fail.
        let mut next = w.record;
        next.version = w.expected_version + 1;
        if let Some(spec) = &w.accept {
            let receipt = checks::receipt(&next, spec, w.now_ms);
            if let Some(entry) =
                checks::outbox_entry(self.last_outbox_seq + 1, &next, &receipt, spec)
            {
                self.last_outbox_seq = entry.seq;
                self.outbox_at.insert(id.clone(), self.outbox.len());
                self.outbox_by_receipt
                    .insert(entry.receipt_id.clone(), self.outbox.len());
                self.outbox.push(entry);
            }
            self.receipts.insert(id.clone(), receipt);
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
        let asked = |e: &EffectItem| e.call_node_id == id && e.operation_id == next.operation_id;
        if let Some(reason) = w.effect.filter(|_| !self.effects.iter().any(asked)) {
            self.effects.push(EffectItem {
                call_node_id: id.clone(),
                operation_id: next.operation_id.clone(),
                reason,
                at_ms: w.now_ms,
            });
        }
        if let Some(op) = &next.operation_id {
            self.by_operation.insert(op.clone(), id.clone());
        }
        self.records.insert(id, next.clone());
        Ok(next)
    }

    fn by_call_node(&self, call_node_id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        Ok(self.records.get(call_node_id).cloned())
    }

    fn by_operation_id(&self, operation_id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        Ok(self
            .by_operation
            .get(operation_id)
            .and_then(|id| self.records.get(id))
            .cloned())
    }

    fn by_submission_key(&self, key: &str) -> Result<Option<ToolOperation>, LedgerError> {
        Ok(self
            .by_key
            .get(key)
            .and_then(|id| self.records.get(id))
            .cloned())
    }

    fn records(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        Ok(self.records.values().cloned().collect())
    }

    fn receipts(&self) -> Result<Vec<Receipt>, LedgerError> {
        Ok(self.receipts.values().cloned().collect())
    }

    fn outbox(&self) -> Result<Vec<OutboxEntry>, LedgerError> {
        Ok(self.outbox.clone())
    }

    fn reconciliation_queue(&self) -> Result<Vec<ReconcileItem>, LedgerError> {
        Ok(self.reconcile.clone())
    }

    fn effect_reconciliations(&self) -> Result<Vec<EffectItem>, LedgerError> {
        Ok(self.effects.clone())
    }

    fn outbox_entry(&self, call_node_id: &str) -> Result<Option<OutboxEntry>, LedgerError> {
        Ok(self
            .outbox_at
            .get(call_node_id)
            .map(|&i| self.outbox[i].clone()))
    }

    fn local_state(&self, call_node_id: &str) -> Result<Option<LocalState>, LedgerError> {
        Ok(self.records.get(call_node_id).map(|r| r.local_state))
    }

    fn record_head(&self, call_node_id: &str) -> Result<Option<RecordHead>, LedgerError> {
        Ok(self.records.get(call_node_id).map(RecordHead::of))
    }

    fn settled_count(&self) -> Result<(usize, usize), LedgerError> {
        Ok((
            self.records.len(),
            self.records
                .values()
                .filter(|r| r.local_state.is_final())
                .count(),
        ))
    }

    fn in_flight(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        Ok(self
            .records
            .values()
            .filter(|r| !r.local_state.is_final())
            .cloned()
            .collect())
    }

    fn outbox_ready(&self, after_seq: u64, limit: usize) -> Result<Vec<OutboxEntry>, LedgerError> {
        // The outbox is in seq order: skip to the first entry past `after_seq`.
        let from = self.outbox.partition_point(|e| e.seq <= after_seq);
        Ok(self.outbox[from..]
            .iter()
            .filter(|e| e.status == OutboxStatus::Ready)
            .take(limit)
            .cloned()
            .collect())
    }

    fn mark_delivered(
        &mut self,
        receipt_id: &str,
        consumer_id: &str,
        at_ms: u64,
    ) -> Result<bool, LedgerError> {
        let i = *self
            .outbox_by_receipt
            .get(receipt_id)
            .ok_or_else(|| LedgerError::UnknownReceipt(receipt_id.to_string()))?;
        let entry = &mut self.outbox[i];
        if !checks::may_deliver(entry, consumer_id)? {
            return Ok(false);
        }
        entry.status = OutboxStatus::Delivered;
        entry.delivered_to = Some(consumer_id.to_string());
        entry.delivered_at_ms = Some(at_ms);
        Ok(true)
    }

    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError> {
        if !self.records.contains_key(call_node_id) {
            return Err(LedgerError::UnknownCallNode(call_node_id.to_string()));
        }
        if !self.cancels.contains_key(call_node_id) {
            self.last_cancel_seq += 1;
            self.cancels
                .insert(call_node_id.to_string(), (at_ms, self.last_cancel_seq));
        }
        Ok(())
    }

    fn cancel_requests(&self) -> Result<Vec<CancelRequest>, LedgerError> {
        let mut pending: Vec<(&(u64, u64), &String)> = self
            .cancels
            .iter()
            .map(|(node, order)| (order, node))
            .collect();
        pending.sort();
        Ok(pending
            .into_iter()
            .map(|(&(at_ms, _), node)| CancelRequest {
                call_node_id: node.clone(),
                at_ms,
            })
            .collect())
    }

    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError> {
        self.cancels.remove(call_node_id);
        Ok(())
    }

    fn beat(&mut self, beat: Beat) -> Result<(), LedgerError> {
        self.beats.insert(beat.process, beat);
        Ok(())
    }

    fn end_beat(&mut self, process: u64) -> Result<(), LedgerError> {
        self.beats.remove(&process);
        Ok(())
    }

    fn beat_of(&self, process: u64) -> Result<Option<Beat>, LedgerError> {
        Ok(self.beats.get(&process).copied())
    }
}
