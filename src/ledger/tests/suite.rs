//! The shared ledger tests, each generic over the implementation (see `mod.rs`).

use super::fixtures::{
    accept_as, accept_write, assert_conflict, assert_fenced, cancelled, change, fetching, ids, rec,
    write,
};
use crate::core::AcceptBasis;
use crate::ledger::{
    Beat, CancelRequest, Ledger, LedgerError, LedgerSnapshot, OutboxStatus, RecordHead, Write,
    INITIAL_EPOCH,
};
use crate::record::{LocalState, TerminalState, ToolOperation};

fn refused_because<T: std::fmt::Debug>(res: Result<T, LedgerError>, phrase: &str) {
    match res {
        Err(LedgerError::AcceptRefused { why, .. }) => assert!(
            why.contains(phrase),
            "refused, but for {why:?} instead of {phrase:?}"
        ),
        other => panic!("expected an acceptance refused for {phrase:?}, got {other:?}"),
    }
}

fn nothing_accepted<L: Ledger>(l: &L, what: &str) {
    assert!(
        l.receipts().unwrap().is_empty(),
        "{what}: no receipt written"
    );
    assert!(
        l.outbox().unwrap().is_empty(),
        "{what}: no outbox entry written"
    );
}

pub fn cas_conflict_is_refused_and_changes_nothing<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = l.insert(rec("a"), INITIAL_EPOCH).unwrap();
    assert_eq!(r.version, 1);
    let mut next = r.clone();
    next.local_state = LocalState::Working;
    let stale = Write {
        expected_version: 7,
        ..write(&r, next.clone())
    };
    assert_eq!(
        l.commit(stale),
        Err(LedgerError::VersionConflict {
            call_node_id: "a".into(),
            expected: 7,
            found: 1
        })
    );
    assert_eq!(
        l.by_call_node("a").unwrap().unwrap(),
        r,
        "a refused write changes nothing"
    );
    let ok = l.commit(write(&r, next)).unwrap();
    assert_eq!(ok.version, 2);
    assert_eq!(l.by_call_node("a").unwrap().unwrap(), ok);
    // The write that won moved the version: the same write again is now stale.
    let again = l.commit(write(&r, ok.clone()));
    assert!(
        matches!(
            again,
            Err(LedgerError::VersionConflict {
                expected: 1,
                found: 2,
                ..
            })
        ),
        "{again:?}"
    );
}

pub fn duplicate_call_node_and_key_are_refused<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    l.insert(rec("a"), INITIAL_EPOCH).unwrap();
    assert_eq!(
        l.insert(rec("a"), INITIAL_EPOCH),
        Err(LedgerError::DuplicateCallNode("a".into()))
    );
    let mut other = rec("b");
    other.submission_key = "key-a".into();
    assert_eq!(
        l.insert(other, INITIAL_EPOCH),
        Err(LedgerError::DuplicateSubmissionKey("key-a".into()))
    );
    let mut versioned = rec("c");
    versioned.version = 3;
    assert!(matches!(
        l.insert(versioned, INITIAL_EPOCH),
        Err(LedgerError::Invalid(_))
    ));
    assert_eq!(l.records().unwrap().len(), 1);
}

pub fn acceptance_writes_one_receipt_and_one_ready_outbox_entry<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    let stored = l.commit(accept_write(&r, Some("d1"))).unwrap();
    assert_eq!(stored.local_state, LocalState::Accepted);
    let receipts = l.receipts().unwrap();
    assert_eq!(receipts.len(), 1);
    assert_eq!(
        (
            receipts[0].operation_id.as_deref(),
            receipts[0].result_digest.as_deref()
        ),
        (Some("op-a"), Some("d1"))
    );
    assert_eq!(receipts[0].accepted_at_ms, 2);
    let out = l.outbox().unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, OutboxStatus::Ready);
    assert_eq!(out[0].receipt_id, receipts[0].receipt_id);
    assert_eq!(l.outbox_entry("a").unwrap().as_ref(), Some(&out[0]));
    assert_eq!(l.outbox_entry("b").unwrap(), None);
}

pub fn a_second_receipt_for_a_call_node_is_refused<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    let stored = l.commit(accept_write(&r, Some("d1"))).unwrap();
    refused_because(
        l.commit(accept_write(&stored, Some("d1"))),
        "a receipt exists already",
    );
    assert_eq!(l.receipts().unwrap().len(), 1);
    assert_eq!(
        l.outbox().unwrap().len(),
        1,
        "outbox entries stay unique per call node"
    );
    // Nor can a plain write move a receipted record.
    let mut moved = stored.clone();
    moved.local_state = LocalState::Working;
    assert!(matches!(
        l.commit(write(&stored, moved)),
        Err(LedgerError::Invalid(_))
    ));
}

pub fn acceptance_checks_each_bound_field<L: Ledger>(new: fn() -> L) {
    type Mutate = fn(&mut Write);
    let cases: &[(&str, Mutate)] = &[
        ("tool version changed", |w| {
            w.record.tool_version = "v2".into()
        }),
        ("execution epoch", |w| w.record.execution_epoch = 0),
        ("cancel generation changed", |w| {
            w.record.cancel_generation = 3
        }),
        ("operation id changed", |w| {
            w.record.operation_id = Some("op-zzz".into())
        }),
        ("result digest differs", |w| {
            w.record.result_digest = Some("different".into())
        }),
        ("without a fetched, verified result", |w| {
            w.record.result_digest = None;
            w.accept.as_mut().unwrap().result_digest = None;
        }),
        ("cannot land in", |w| {
            w.record.local_state = LocalState::CancelledAccepted
        }),
    ];
    for (phrase, mutate) in cases {
        let mut l = new();
        let r = fetching(&mut l, "a");
        let mut w = accept_write(&r, Some("d1"));
        mutate(&mut w);
        refused_because(l.commit(w), phrase);
        nothing_accepted(&l, phrase);
        assert_eq!(
            l.by_call_node("a").unwrap().unwrap(),
            r,
            "{phrase}: the record is untouched"
        );
    }
    // Identity is checked before the acceptance: a changed request digest is misuse.
    let mut l = new();
    let r = fetching(&mut l, "a");
    let mut w = accept_write(&r, Some("d1"));
    w.record.request_digest = "other".into();
    assert!(matches!(l.commit(w), Err(LedgerError::Invalid(_))));
    // A cancel confirmation needs a cancel: generation 0 is refused.
    let mut w = accept_as(
        &r,
        TerminalState::Cancelled,
        LocalState::CancelledAccepted,
        None,
        None,
    );
    w.record.cancel_generation = 0;
    refused_because(l.commit(w), "no cancel was ever requested");
}

/// A task the server cancelled on its own (nothing of ours asked: cancel generation 0, the
/// core's "cancelled, no result stored") is an outcome like any other: the receipt and the
/// outbox say cancelled, the record lands in ACCEPTED. CANCELLED_ACCEPTED is only for a cancel
/// we asked for; were this refused, the runner would only log the refusal: the finished call
/// would get no receipt and its outcome would never reach the outbox.
/// (cargo-mutants: the `CancelledAccepted` guard in `check_accept` made `true` survived.)
pub fn a_cancel_nobody_asked_for_is_accepted_as_the_servers_outcome<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    assert_eq!(r.cancel_generation, 0, "no cancel of ours");
    let stored = l
        .commit(accept_as(
            &r,
            TerminalState::Cancelled,
            LocalState::Accepted,
            None,
            None,
        ))
        .expect("a cancel by the server is accepted");
    assert_eq!(stored.local_state, LocalState::Accepted);
    let receipts = l.receipts().unwrap();
    assert_eq!(
        receipts
            .iter()
            .map(|r| (r.call_node_id.as_str(), r.terminal_state))
            .collect::<Vec<_>>(),
        [("a", TerminalState::Cancelled)]
    );
    let entry = l.outbox_entry("a").unwrap().expect("an outbox entry");
    assert_eq!(
        (entry.terminal_state, entry.status, entry.payload),
        (TerminalState::Cancelled, OutboxStatus::Ready, None)
    );
}

/// Another writer moved the record after the acceptance was decided. The accepting writer
/// re-read only the version (so compare-and-swap passes) and kept its old decision: each
/// re-check must refuse it on its own.
pub fn acceptance_rechecks_what_the_writer_read_against_the_stored_record<L: Ledger>(
    new: fn() -> L,
) {
    type Race<L> = fn(&mut L, &ToolOperation) -> ToolOperation;
    let cases: Vec<(&str, Race<L>)> = vec![
        ("a cancel moved it to 1", |l, r| cancelled(l, r)),
        ("epoch 2 has taken it over", |l, r| {
            let epoch = l.bump_epoch().unwrap();
            let mut n = r.clone();
            n.execution_epoch = epoch;
            l.commit(Write {
                writer_epoch: epoch,
                ..write(r, n)
            })
            .unwrap()
        }),
        ("the record names operation op-b", |l, r| {
            change(l, r, |n| n.operation_id = Some("op-b".into()))
        }),
        ("it holds d-before now", |l, r| {
            change(l, r, |n| n.result_digest = Some("d-before".into()))
        }),
        ("decided for tool version v1", |l, r| {
            change(l, r, |n| n.tool_version = "v9".into())
        }),
    ];
    for (phrase, race) in cases {
        let mut l = new();
        let read = fetching(&mut l, "a");
        let decided = accept_write(&read, Some("d1"));
        let now = race(&mut l, &read);
        // The stale decision, applied onto the record as it is now.
        let mut w = accept_write(&now, Some("d1"));
        w.accept.as_mut().unwrap().basis = decided.accept.unwrap().basis;
        w.writer_epoch = l.current_epoch().unwrap();
        refused_because(l.commit(w), phrase);
        nothing_accepted(&l, phrase);
        assert_eq!(
            l.by_call_node("a").unwrap().unwrap(),
            now,
            "{phrase}: the other writer's record stands"
        );
    }
    // A digest recorded before a restart binds the acceptance, whatever the writer read.
    let mut l = new();
    let r = fetching(&mut l, "a");
    let recorded = change(&mut l, &r, |n| n.result_digest = Some("d-before".into()));
    let mut w = accept_write(&recorded, Some("d-after"));
    w.accept.as_mut().unwrap().basis = AcceptBasis::of(&recorded);
    refused_because(
        l.commit(w),
        "result digest d-before was recorded before; this acceptance carries d-after",
    );
    // The same digest is accepted.
    l.commit(accept_write(&recorded, Some("d-before"))).unwrap();
    assert_eq!(
        l.receipts().unwrap()[0].result_digest.as_deref(),
        Some("d-before")
    );
}

/// For an honest writer, compare-and-swap refuses every one of those races first.
pub fn compare_and_swap_catches_the_same_races_first<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let read = fetching(&mut l, "a");
    cancelled(&mut l, &read);
    assert_conflict(l.commit(accept_write(&read, Some("d1"))), 2, 3);
    nothing_accepted(&l, "stale version");
}

pub fn a_receipted_state_cannot_be_written_without_the_acceptance_transaction<L: Ledger>(
    new: fn() -> L,
) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    let mut w = accept_write(&r, Some("d1"));
    w.accept = None;
    assert!(matches!(l.commit(w), Err(LedgerError::Invalid(_))));
    nothing_accepted(&l, "no acceptance transaction");
}

pub fn a_fenced_writer_is_refused_whatever_the_record_says<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = l.insert(rec("a"), INITIAL_EPOCH).unwrap();
    assert_eq!(l.current_epoch().unwrap(), INITIAL_EPOCH);
    assert_eq!(l.bump_epoch().unwrap(), 2);
    assert_eq!(l.current_epoch().unwrap(), 2);
    // The old writer claims the new epoch in the record: the record is not the token.
    let mut forged = r.clone();
    forged.execution_epoch = 2;
    forged.local_state = LocalState::Working;
    let res = l.commit(Write {
        writer_epoch: 1,
        ..write(&r, forged.clone())
    });
    assert_eq!(
        res,
        Err(LedgerError::StaleEpoch {
            call_node_id: "a".into(),
            writer: 1,
            current: 2
        })
    );
    assert_eq!(l.by_call_node("a").unwrap().unwrap(), r);
    // The new epoch's writer goes through.
    let taken = l
        .commit(Write {
            writer_epoch: 2,
            ..write(&r, forged)
        })
        .unwrap();
    assert_eq!((taken.execution_epoch, taken.version), (2, 2));
}

pub fn a_fenced_executor_cannot_commit_a_receipt<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    let decided = accept_write(&r, Some("d1"));
    l.bump_epoch().unwrap();
    // The old executor skipped its own epoch check: its acceptance is otherwise perfect.
    let res = l.commit(decided);
    assert_fenced(res, 1, 2);
    nothing_accepted(&l, "fenced acceptance");
    // Fencing is per ledger: every record is fenced for the old epoch, untouched ones too.
    let b = l.insert(rec("b"), 2).unwrap();
    let res = l.commit(write(&b, b.clone()));
    assert!(
        matches!(res, Err(LedgerError::StaleEpoch { .. })),
        "{res:?}"
    );
}

pub fn inserts_are_fenced_too<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    l.bump_epoch().unwrap();
    let res = l.insert(rec("a"), INITIAL_EPOCH);
    assert_eq!(
        res,
        Err(LedgerError::StaleEpoch {
            call_node_id: "a".into(),
            writer: 1,
            current: 2
        })
    );
    assert!(l.records().unwrap().is_empty());
    let mut r = rec("a");
    r.execution_epoch = 2;
    assert_eq!(l.insert(r, 2).unwrap().version, 1);
}

pub fn an_unissued_epoch_and_an_overstamped_record_are_refused<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let res = l.insert(rec("a"), 5);
    assert_eq!(
        res,
        Err(LedgerError::UnissuedEpoch {
            call_node_id: "a".into(),
            writer: 5,
            current: 1
        })
    );
    let r = l.insert(rec("a"), INITIAL_EPOCH).unwrap();
    let mut over = r.clone();
    over.execution_epoch = 3;
    assert!(
        matches!(l.commit(write(&r, over)), Err(LedgerError::Invalid(_))),
        "a writer of epoch 1 cannot stamp epoch 3"
    );
    let mut over = rec("b");
    over.execution_epoch = 2;
    assert!(matches!(
        l.insert(over, INITIAL_EPOCH),
        Err(LedgerError::Invalid(_))
    ));
}

pub fn lookups_by_call_node_operation_id_and_key<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    fetching(&mut l, "b");
    assert_eq!(l.by_call_node("a").unwrap().unwrap(), r);
    assert_eq!(l.by_call_node("zz").unwrap(), None);
    assert_eq!(
        l.by_operation_id("op-a").unwrap().unwrap().call_node_id,
        "a"
    );
    assert_eq!(l.by_operation_id("op-zz").unwrap(), None);
    assert_eq!(
        l.by_submission_key("key-b").unwrap().unwrap().call_node_id,
        "b"
    );
    assert_eq!(l.by_submission_key("key-zz").unwrap(), None);
    // A re-submission names a new operation: both ids find the record.
    let r2 = change(&mut l, &r, |n| n.operation_id = Some("op-a2".into()));
    assert_eq!(l.by_operation_id("op-a2").unwrap().unwrap(), r2);
    assert_eq!(l.by_operation_id("op-a").unwrap().unwrap(), r2);
    assert_eq!(ids(l.records().unwrap()), ["a", "b"]);
}

pub fn reconciliation_queue_and_effect_records<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let r = fetching(&mut l, "a");
    let mut next = r.clone();
    next.local_state = LocalState::Unknown;
    l.commit(Write {
        reconcile: Some("lost".into()),
        effect: Some("late".into()),
        now_ms: 5,
        ..write(&r, next)
    })
    .unwrap();
    let q = l.reconciliation_queue().unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(
        (
            q[0].operation_id.as_deref(),
            q[0].submission_key.as_str(),
            q[0].reason.as_str(),
            q[0].at_ms
        ),
        (Some("op-a"), "key-a", "lost", 5)
    );
    let e = l.effect_reconciliations().unwrap();
    assert_eq!(
        (e.len(), e[0].reason.as_str(), e[0].operation_id.as_deref()),
        (1, "late", Some("op-a"))
    );
    // The same late end seen again (a duplicated push) asks nothing new: the first item stays.
    let now = l.by_call_node("a").unwrap().unwrap();
    l.commit(Write {
        effect: Some("late again".into()),
        now_ms: 6,
        ..write(&now, now.clone())
    })
    .unwrap();
    let e = l.effect_reconciliations().unwrap();
    assert_eq!((e.len(), e[0].reason.as_str(), e[0].at_ms), (1, "late", 5));
    let b = l.insert(rec("b"), INITIAL_EPOCH).unwrap();
    let mut next = b.clone();
    next.local_state = LocalState::Unknown;
    l.commit(Write {
        reconcile: Some("second".into()),
        ..write(&b, next)
    })
    .unwrap();
    let reasons: Vec<String> = l
        .reconciliation_queue()
        .unwrap()
        .into_iter()
        .map(|i| i.reason)
        .collect();
    assert_eq!(reasons, ["lost", "second"], "in the order written");
}

pub fn in_flight_listing_settled_count_and_local_state<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let a = fetching(&mut l, "a");
    fetching(&mut l, "b");
    l.insert(rec("c"), INITIAL_EPOCH).unwrap();
    l.commit(accept_write(&a, Some("d"))).unwrap();
    assert_eq!(ids(l.in_flight().unwrap()), ["b", "c"]);
    assert_eq!(l.settled_count().unwrap(), (3, 1));
    assert_eq!(l.local_state("a").unwrap(), Some(LocalState::Accepted));
    assert_eq!(l.local_state("c").unwrap(), Some(LocalState::Submitting));
    assert_eq!(l.local_state("zz").unwrap(), None);
}

/// `record_head` answers what `by_call_node` would, cut down: as inserted, as moved, with a
/// result digest recorded, and for a node the ledger does not hold.
pub fn record_head_answers_as_by_call_node_would<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let head_via_record =
        |l: &L, id: &str| l.by_call_node(id).unwrap().as_ref().map(RecordHead::of);
    l.insert(rec("c"), INITIAL_EPOCH).unwrap();
    let a = fetching(&mut l, "a");
    assert_eq!(l.record_head("a").unwrap(), head_via_record(&l, "a"));
    l.commit(accept_write(&a, Some("d1"))).unwrap();
    let head = l.record_head("a").unwrap();
    assert_eq!(
        head,
        Some(RecordHead {
            version: a.version + 1,
            local_state: LocalState::Accepted,
            result_digest: Some("d1".into()),
        })
    );
    assert_eq!(head, head_via_record(&l, "a"));
    assert_eq!(l.record_head("c").unwrap(), head_via_record(&l, "c"));
    assert_eq!(l.record_head("zz").unwrap(), None);
}

pub fn every_terminal_state_carries_its_payload_explicitly<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let result = |s: &str| Some(serde_json::json!({"r": s}));
    let a = fetching(&mut l, "a");
    l.commit(accept_as(
        &a,
        TerminalState::Completed,
        LocalState::Accepted,
        Some("da"),
        result("done"),
    ))
    .unwrap();
    let b = fetching(&mut l, "b");
    l.commit(accept_as(
        &b,
        TerminalState::Failed,
        LocalState::Accepted,
        Some("db"),
        result("boom"),
    ))
    .unwrap();
    let c = fetching(&mut l, "c");
    let c = cancelled(&mut l, &c);
    l.commit(accept_as(
        &c,
        TerminalState::Cancelled,
        LocalState::CancelledAccepted,
        Some("dc"),
        result("partial"),
    ))
    .unwrap();
    let d = fetching(&mut l, "d");
    l.commit(accept_as(
        &d,
        TerminalState::DoneWithoutResult,
        LocalState::Accepted,
        None,
        None,
    ))
    .unwrap();
    let shape: Vec<_> = l
        .outbox()
        .unwrap()
        .into_iter()
        .map(|e| (e.call_node_id, e.terminal_state, e.payload, e.audit_payload))
        .collect();
    assert_eq!(
        shape,
        vec![
            (
                "a".to_string(),
                TerminalState::Completed,
                result("done"),
                None
            ),
            ("b".to_string(), TerminalState::Failed, result("boom"), None),
            // A cancelled outcome's result is audit, never a payload.
            (
                "c".to_string(),
                TerminalState::Cancelled,
                None,
                result("partial")
            ),
            (
                "d".to_string(),
                TerminalState::DoneWithoutResult,
                None,
                None
            ),
        ]
    );
}

pub fn a_shadow_operation_is_receipted_but_never_reaches_the_outbox<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let mut s = rec("s");
    s.shadow = true;
    let r = l.insert(s, INITIAL_EPOCH).unwrap();
    let r = change(&mut l, &r, |n| {
        n.local_state = LocalState::FetchingResult;
        n.operation_id = Some("op-s".into());
    });
    l.commit(accept_write(&r, Some("d"))).unwrap();
    assert_eq!(l.receipts().unwrap().len(), 1);
    assert!(l.outbox().unwrap().is_empty());
    assert_eq!(l.outbox_entry("s").unwrap(), None);
}

fn accepted<L: Ledger>(l: &mut L, ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let r = fetching(l, id);
            l.commit(accept_write(&r, Some("d"))).unwrap();
            l.outbox_entry(id).unwrap().unwrap().receipt_id
        })
        .collect()
}

pub fn outbox_consumer_pages_by_seq_and_acknowledges_idempotently<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let receipts = accepted(&mut l, &["a", "b", "c"]);
    let seqs: Vec<u64> = l.outbox().unwrap().iter().map(|e| e.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing: {seqs:?}"
    );
    let first = l.outbox_ready(0, 2).unwrap();
    assert_eq!(
        first
            .iter()
            .map(|e| e.call_node_id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    let rest = l.outbox_ready(first[1].seq, 10).unwrap();
    assert_eq!(
        rest.iter()
            .map(|e| e.call_node_id.as_str())
            .collect::<Vec<_>>(),
        ["c"]
    );
    assert!(l.outbox_ready(0, 0).unwrap().is_empty());

    assert_eq!(l.mark_delivered(&receipts[1], "billing", 9), Ok(true));
    assert_eq!(
        l.mark_delivered(&receipts[1], "billing", 10),
        Ok(false),
        "the same consumer again: a no-op"
    );
    let res = l.mark_delivered(&receipts[1], "audit", 11);
    assert_eq!(
        res,
        Err(LedgerError::AlreadyDelivered {
            receipt_id: receipts[1].clone(),
            delivered_to: "billing".into(),
            consumer_id: "audit".into()
        })
    );
    assert_eq!(
        l.mark_delivered("nope", "billing", 9),
        Err(LedgerError::UnknownReceipt("nope".into()))
    );
    assert!(matches!(
        l.mark_delivered(&receipts[0], "", 9),
        Err(LedgerError::Invalid(_))
    ));

    let ready: Vec<String> = l
        .outbox_ready(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.call_node_id)
        .collect();
    assert_eq!(
        ready,
        ["a", "c"],
        "a delivered entry is never handed out again"
    );
    let b = l.outbox_entry("b").unwrap().unwrap();
    assert_eq!(
        (b.status, b.delivered_to.as_deref(), b.delivered_at_ms),
        (OutboxStatus::Delivered, Some("billing"), Some(9))
    );
}

pub fn outbox_seq_only_grows<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    accepted(&mut l, &["a"]);
    // A refused acceptance in between consumes no sequence number.
    let b = fetching(&mut l, "b");
    let mut bad = accept_write(&b, Some("d"));
    bad.record.tool_version = "v2".into();
    assert!(l.commit(bad).is_err());
    accepted(&mut l, &["c"]);
    let seqs: Vec<u64> = l.outbox().unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2]);
}

pub fn cancel_intents_queue_oldest_first_and_are_idempotent<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    for id in ["a", "b", "c"] {
        l.insert(rec(id), INITIAL_EPOCH).unwrap();
    }
    assert_eq!(
        l.request_cancel("zz", 1),
        Err(LedgerError::UnknownCallNode("zz".into()))
    );
    l.request_cancel("b", 20).unwrap();
    l.request_cancel("c", 10).unwrap();
    l.request_cancel("a", 20).unwrap();
    l.request_cancel("b", 5).unwrap();
    let req = |id: &str, at_ms| CancelRequest {
        call_node_id: id.into(),
        at_ms,
    };
    // Oldest first; a tie keeps arrival order; a repeated request keeps its first time.
    assert_eq!(
        l.cancel_requests().unwrap(),
        vec![req("c", 10), req("b", 20), req("a", 20)]
    );
    l.take_cancel_request("b").unwrap();
    l.take_cancel_request("b").unwrap();
    assert_eq!(
        l.cancel_requests().unwrap(),
        vec![req("c", 10), req("a", 20)]
    );
    l.request_cancel("b", 30).unwrap();
    assert_eq!(
        l.cancel_requests().unwrap().last(),
        Some(&req("b", 30)),
        "taken, then asked again: a new request"
    );
}

pub fn snapshot_holds_everything<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    accepted(&mut l, &["a"]);
    l.request_cancel("a", 3).unwrap();
    l.bump_epoch().unwrap();
    let s = l.snapshot().unwrap();
    assert_eq!(s.current_epoch, 2);
    assert_eq!(
        (
            s.records.len(),
            s.receipts.len(),
            s.outbox.len(),
            s.cancel_requests.len()
        ),
        (1, 1, 1, 1)
    );
}

pub fn a_beat_replaces_the_last_and_ends_when_taken_away<L: Ledger>(new: fn() -> L) {
    let mut l = new();
    let beat = |process, epoch, at_ms| Beat {
        process,
        epoch,
        at_ms,
    };
    assert_eq!(l.beat_of(7).unwrap(), None);
    l.beat(beat(7, 1, 100)).unwrap();
    l.beat(beat(8, 1, 150)).unwrap();
    l.beat(beat(7, 2, 200)).unwrap();
    assert_eq!(l.beat_of(7).unwrap(), Some(beat(7, 2, 200)));
    // A process id is opaque: one past i64 (SQLite's INTEGER) round-trips too.
    let big = u64::MAX - 3;
    l.beat(beat(big, 1, 5)).unwrap();
    assert_eq!(l.beat_of(big).unwrap(), Some(beat(big, 1, 5)));
    l.end_beat(7).unwrap();
    l.end_beat(7).unwrap();
    assert_eq!(l.beat_of(7).unwrap(), None);
    assert_eq!(l.beat_of(8).unwrap(), Some(beat(8, 1, 150)));
    // Beats are no operation's facts: a snapshot leaves them out, and a bumped epoch keeps them.
    l.bump_epoch().unwrap();
    assert_eq!(
        l.snapshot().unwrap(),
        LedgerSnapshot {
            current_epoch: 2,
            ..LedgerSnapshot::default()
        }
    );
    assert_eq!(l.beat_of(8).unwrap(), Some(beat(8, 1, 150)));
}
