use super::*;
use crate::core::AcceptSpec;
use crate::record::{AdapterId, LocalState, TerminalState, ToolOperation};

fn rec(id: &str) -> ToolOperation {
    ToolOperation::new(id, "report", "v1", serde_json::json!({"n": 1}), AdapterId::Mcp20251125, &format!("key-{id}"), 1, 0, 60_000)
}

fn working(l: &mut MemoryLedger, id: &str) -> ToolOperation {
    let r = l.insert(rec(id)).unwrap();
    let mut next = r.clone();
    next.local_state = LocalState::FetchingResult;
    next.operation_id = Some(format!("op-{id}"));
    l.commit(Write { expected_version: r.version, record: next, accept: None, reconcile: None, effect: None, now_ms: 1 }).unwrap()
}

fn accept_write(r: &ToolOperation, digest: Option<&str>) -> Write {
    let mut next = r.clone();
    next.local_state = LocalState::Accepted;
    next.result_digest = digest.map(String::from);
    Write {
        expected_version: r.version,
        record: next,
        accept: Some(AcceptSpec { terminal: TerminalState::Completed, result_digest: digest.map(String::from), payload: Some(serde_json::json!({"ok": true})) }),
        reconcile: None,
        effect: None,
        now_ms: 2,
    }
}

#[test]
fn cas_conflict_is_refused_and_changes_nothing() {
    let mut l = MemoryLedger::new();
    let r = l.insert(rec("a")).unwrap();
    assert_eq!(r.version, 1);
    let mut next = r.clone();
    next.local_state = LocalState::Working;
    let stale = Write { expected_version: 7, record: next.clone(), accept: None, reconcile: None, effect: None, now_ms: 1 };
    assert!(matches!(l.commit(stale), Err(LedgerError::VersionConflict { expected: 7, found: 1, .. })));
    assert_eq!(l.by_call_node("a").unwrap().local_state, LocalState::Submitting);
    let ok = l.commit(Write { expected_version: 1, record: next, accept: None, reconcile: None, effect: None, now_ms: 1 }).unwrap();
    assert_eq!(ok.version, 2);
}

#[test]
fn duplicate_call_node_and_key_are_refused() {
    let mut l = MemoryLedger::new();
    l.insert(rec("a")).unwrap();
    assert!(matches!(l.insert(rec("a")), Err(LedgerError::DuplicateCallNode(_))));
    let mut other = rec("b");
    other.submission_key = "key-a".into();
    assert!(matches!(l.insert(other), Err(LedgerError::DuplicateSubmissionKey(_))));
}

#[test]
fn acceptance_writes_one_receipt_and_one_ready_outbox_entry() {
    let mut l = MemoryLedger::new();
    let r = working(&mut l, "a");
    let stored = l.commit(accept_write(&r, Some("d1"))).unwrap();
    assert_eq!(stored.local_state, LocalState::Accepted);
    assert_eq!(l.receipts().len(), 1);
    let out = l.outbox();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, OutboxStatus::Ready);
    assert_eq!(out[0].receipt_id, l.receipts()[0].receipt_id);
}

#[test]
fn a_second_receipt_for_a_call_node_is_refused() {
    let mut l = MemoryLedger::new();
    let r = working(&mut l, "a");
    let stored = l.commit(accept_write(&r, Some("d1"))).unwrap();
    let again = l.commit(accept_write(&stored, Some("d1")));
    assert!(matches!(again, Err(LedgerError::AcceptRefused { .. })), "{again:?}");
    assert_eq!(l.receipts().len(), 1);
    assert_eq!(l.outbox().len(), 1, "outbox entries stay unique per call node");
}

#[test]
fn acceptance_checks_each_bound_field() {
    type Mutate = fn(&mut Write);
    let cases: &[(&str, Mutate)] = &[
        ("request digest", |w| w.record.request_digest = "other".into()),
        ("tool version", |w| w.record.tool_version = "v2".into()),
        ("epoch", |w| w.record.execution_epoch = 9),
        ("cancel generation", |w| w.record.cancel_generation = 3),
        ("operation id", |w| w.record.operation_id = Some("op-zzz".into())),
        ("result digest", |w| w.record.result_digest = Some("different".into())),
        ("completed needs a result", |w| {
            w.record.result_digest = None;
            w.accept.as_mut().unwrap().result_digest = None;
        }),
        ("terminal vs local state", |w| w.record.local_state = LocalState::CancelledAccepted),
    ];
    for (what, mutate) in cases {
        let mut l = MemoryLedger::new();
        let r = working(&mut l, "a");
        let mut w = accept_write(&r, Some("d1"));
        mutate(&mut w);
        let res = l.commit(w);
        assert!(res.is_err(), "{what}: acceptance should be refused, got {res:?}");
        assert!(l.receipts().is_empty(), "{what}: nothing written");
        assert!(l.outbox().is_empty(), "{what}: nothing written");
    }
}

#[test]
fn a_receipted_state_cannot_be_written_without_the_acceptance_transaction() {
    let mut l = MemoryLedger::new();
    let r = working(&mut l, "a");
    let mut w = accept_write(&r, Some("d1"));
    w.accept = None;
    assert!(matches!(l.commit(w), Err(LedgerError::Invalid(_))));
}

#[test]
fn stale_epoch_writer_is_refused() {
    let mut l = MemoryLedger::new();
    let r = l.insert(rec("a")).unwrap();
    let mut taken = r.clone();
    taken.execution_epoch = 2;
    let r2 = l.commit(Write { expected_version: 1, record: taken, accept: None, reconcile: None, effect: None, now_ms: 1 }).unwrap();
    let mut old = r2.clone();
    old.execution_epoch = 1;
    let res = l.commit(Write { expected_version: r2.version, record: old, accept: None, reconcile: None, effect: None, now_ms: 1 });
    assert!(matches!(res, Err(LedgerError::StaleEpoch { writer: 1, stored: 2, .. })));
}

#[test]
fn lookups_by_operation_and_key_and_reconciliation_queue() {
    let mut l = MemoryLedger::new();
    let r = working(&mut l, "a");
    assert_eq!(l.by_operation_id("op-a").unwrap().call_node_id, "a");
    assert_eq!(l.by_submission_key("key-a").unwrap().call_node_id, "a");
    let mut next = r.clone();
    next.local_state = LocalState::Unknown;
    l.commit(Write { expected_version: r.version, record: next, accept: None, reconcile: Some("lost".into()), effect: Some("late".into()), now_ms: 5 }).unwrap();
    let q = l.reconciliation_queue();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].operation_id.as_deref(), q[0].submission_key.as_str()), (Some("op-a"), "key-a"));
    assert_eq!(l.effect_reconciliations().len(), 1);
    assert!(l.in_flight().is_empty());
}

#[test]
fn cancel_requests_are_kept_until_taken_and_only_for_known_call_nodes() {
    let mut l = MemoryLedger::new();
    assert!(matches!(l.request_cancel("nope", 1), Err(LedgerError::UnknownCallNode(_))));
    l.insert(rec("n1")).unwrap();
    l.request_cancel("n1", 5).unwrap();
    l.request_cancel("n1", 9).unwrap();
    assert_eq!(l.cancel_requests(), vec![super::CancelRequest { call_node_id: "n1".into(), at_ms: 5 }]);
    l.take_cancel_request("n1").unwrap();
    assert!(l.cancel_requests().is_empty());
    l.take_cancel_request("n1").unwrap();
}
