//! The ledger as one runner of `toolop call`/`resume` sees it. One process may run several
//! runners on one ledger (one per server target); each must resume only its own call nodes and
//! pick up only their cancel requests: a runner that took another target's request would send
//! that cancel to the wrong server.

use std::collections::BTreeSet;

use crate::ledger::{
    Beat, CancelRequest, EffectItem, Ledger, LedgerError, OutboxEntry, Receipt, ReconcileItem,
    RecordHead, Write,
};
use crate::record::{LocalState, ToolOperation};
use crate::runner::SharedLedger;

/// The ledger as one runner sees it: only the call nodes of its target are in flight, and only
/// their cancel requests are its to pick up (another target's node is another runner's).
pub struct Scoped {
    pub inner: SharedLedger,
    pub nodes: BTreeSet<String>,
}

impl Scoped {
    fn with<T>(&self, f: impl FnOnce(&mut dyn Ledger) -> T) -> T {
        let mut guard = self.inner.lock().expect("ledger lock");
        f(&mut *guard)
    }

    fn ours<T>(
        &self,
        all: Result<Vec<T>, LedgerError>,
        id: impl Fn(&T) -> &str,
    ) -> Result<Vec<T>, LedgerError> {
        Ok(all?
            .into_iter()
            .filter(|x| self.nodes.contains(id(x)))
            .collect())
    }
}

impl Ledger for Scoped {
    fn current_epoch(&self) -> Result<u64, LedgerError> {
        self.with(|l| l.current_epoch())
    }
    fn bump_epoch(&mut self) -> Result<u64, LedgerError> {
        self.with(|l| l.bump_epoch())
    }
    fn insert(
        &mut self,
        record: ToolOperation,
        writer_epoch: u64,
    ) -> Result<ToolOperation, LedgerError> {
        self.with(|l| l.insert(record, writer_epoch))
    }
    fn commit(&mut self, write: Write) -> Result<ToolOperation, LedgerError> {
        self.with(|l| l.commit(write))
    }
    fn by_call_node(&self, id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.with(|l| l.by_call_node(id))
    }
    fn by_operation_id(&self, id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.with(|l| l.by_operation_id(id))
    }
    fn by_submission_key(&self, key: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.with(|l| l.by_submission_key(key))
    }
    fn records(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        self.ours(self.with(|l| l.records()), |r| &r.call_node_id)
    }
    fn receipts(&self) -> Result<Vec<Receipt>, LedgerError> {
        self.with(|l| l.receipts())
    }
    fn outbox(&self) -> Result<Vec<OutboxEntry>, LedgerError> {
        self.with(|l| l.outbox())
    }
    fn reconciliation_queue(&self) -> Result<Vec<ReconcileItem>, LedgerError> {
        self.with(|l| l.reconciliation_queue())
    }
    fn effect_reconciliations(&self) -> Result<Vec<EffectItem>, LedgerError> {
        self.with(|l| l.effect_reconciliations())
    }
    fn outbox_entry(&self, id: &str) -> Result<Option<OutboxEntry>, LedgerError> {
        self.with(|l| l.outbox_entry(id))
    }
    fn local_state(&self, id: &str) -> Result<Option<LocalState>, LedgerError> {
        self.with(|l| l.local_state(id))
    }
    fn record_head(&self, id: &str) -> Result<Option<RecordHead>, LedgerError> {
        self.with(|l| l.record_head(id))
    }
    fn settled_count(&self) -> Result<(usize, usize), LedgerError> {
        let recs = self.records()?;
        Ok((
            recs.len(),
            recs.iter().filter(|r| r.local_state.is_final()).count(),
        ))
    }
    fn in_flight(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        self.ours(self.with(|l| l.in_flight()), |r| &r.call_node_id)
    }
    fn outbox_ready(&self, after_seq: u64, limit: usize) -> Result<Vec<OutboxEntry>, LedgerError> {
        self.with(|l| l.outbox_ready(after_seq, limit))
    }
    fn mark_delivered(
        &mut self,
        receipt_id: &str,
        consumer_id: &str,
        at_ms: u64,
    ) -> Result<bool, LedgerError> {
        self.with(|l| l.mark_delivered(receipt_id, consumer_id, at_ms))
    }
    fn request_cancel(&mut self, id: &str, at_ms: u64) -> Result<(), LedgerError> {
        self.with(|l| l.request_cancel(id, at_ms))
    }
    fn cancel_requests(&self) -> Result<Vec<CancelRequest>, LedgerError> {
        self.ours(self.with(|l| l.cancel_requests()), |c| &c.call_node_id)
    }
    fn take_cancel_request(&mut self, id: &str) -> Result<(), LedgerError> {
        self.with(|l| l.take_cancel_request(id))
    }
    fn beat(&mut self, beat: Beat) -> Result<(), LedgerError> {
        self.with(|l| l.beat(beat))
    }
    fn end_beat(&mut self, process: u64) -> Result<(), LedgerError> {
        self.with(|l| l.end_beat(process))
    }
    fn beat_of(&self, process: u64) -> Result<Option<Beat>, LedgerError> {
        self.with(|l| l.beat_of(process))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::ledger::tests::fixtures::rec;
    use crate::ledger::MemoryLedger;

    #[test]
    fn a_runner_sees_only_its_own_nodes_in_flight_and_their_cancel_requests() {
        let inner: SharedLedger = Arc::new(Mutex::new(MemoryLedger::new()));
        let scoped = |ids: &[&str]| Scoped {
            inner: inner.clone(),
            nodes: ids.iter().map(|s| s.to_string()).collect(),
        };
        let (mut a, b) = (scoped(&["a1", "a2"]), scoped(&["b1"]));
        for id in ["a1", "a2"] {
            a.insert(rec(id), 1).unwrap();
        }
        inner.lock().unwrap().insert(rec("b1"), 1).unwrap();
        for id in ["b1", "a2"] {
            inner.lock().unwrap().request_cancel(id, 5).unwrap();
        }
        let ids =
            |recs: Vec<ToolOperation>| recs.into_iter().map(|r| r.call_node_id).collect::<Vec<_>>();
        assert_eq!(ids(a.in_flight().unwrap()), ["a1", "a2"]);
        assert_eq!(ids(b.in_flight().unwrap()), ["b1"]);
        assert_eq!(ids(a.records().unwrap()), ["a1", "a2"]);
        assert_eq!(a.settled_count().unwrap(), (2, 0));
        let nodes =
            |reqs: Vec<CancelRequest>| reqs.into_iter().map(|r| r.call_node_id).collect::<Vec<_>>();
        assert_eq!(nodes(a.cancel_requests().unwrap()), ["a2"]);
        assert_eq!(nodes(b.cancel_requests().unwrap()), ["b1"]);
        // Writes and point reads go straight through: the ledger stays one.
        a.take_cancel_request("a2").unwrap();
        assert_eq!(
            nodes(inner.lock().unwrap().cancel_requests().unwrap()),
            ["b1"]
        );
        assert!(b.by_call_node("a1").unwrap().is_some());
    }
}
