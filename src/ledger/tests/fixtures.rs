//! Records and writes the suite builds on.

use crate::core::{AcceptBasis, AcceptSpec};
use crate::ledger::{Ledger, LedgerError, Write, INITIAL_EPOCH};
use crate::record::{AdapterId, LocalState, TerminalState, ToolOperation};

pub fn rec(id: &str) -> ToolOperation {
    ToolOperation::new(
        id,
        "report",
        "v1",
        serde_json::json!({"n": 1}),
        AdapterId::Mcp20251125,
        &format!("key-{id}"),
        INITIAL_EPOCH,
        0,
        60_000,
    )
}

/// A plain write of `next` over `r`, by a writer of the ledger's first epoch.
pub fn write(r: &ToolOperation, next: ToolOperation) -> Write {
    Write {
        expected_version: r.version,
        writer_epoch: INITIAL_EPOCH,
        record: next,
        accept: None,
        reconcile: None,
        effect: None,
        now_ms: 1,
    }
}

/// Change `r` with `f` and commit it.
pub fn change<L: Ledger>(
    l: &mut L,
    r: &ToolOperation,
    f: impl FnOnce(&mut ToolOperation),
) -> ToolOperation {
    let mut next = r.clone();
    f(&mut next);
    l.commit(write(r, next)).expect("a plain write commits")
}

/// A record with an operation id, fetching its result.
pub fn fetching<L: Ledger>(l: &mut L, id: &str) -> ToolOperation {
    let r = l.insert(rec(id), INITIAL_EPOCH).expect("insert");
    change(l, &r, |n| {
        n.local_state = LocalState::FetchingResult;
        n.operation_id = Some(format!("op-{id}"));
    })
}

/// The acceptance of a completed result with `digest`, decided on `r`.
pub fn accept_write(r: &ToolOperation, digest: Option<&str>) -> Write {
    accept_as(
        r,
        TerminalState::Completed,
        LocalState::Accepted,
        digest,
        Some(serde_json::json!({"ok": true})),
    )
}

pub fn accept_as(
    r: &ToolOperation,
    terminal: TerminalState,
    to: LocalState,
    digest: Option<&str>,
    payload: Option<serde_json::Value>,
) -> Write {
    let mut next = r.clone();
    next.local_state = to;
    next.result_digest = digest.map(String::from);
    let accept = AcceptSpec {
        terminal,
        result_digest: digest.map(String::from),
        payload,
        basis: AcceptBasis::of(r),
    };
    Write {
        accept: Some(accept),
        now_ms: 2,
        ..write(r, next)
    }
}

/// A cancel committed over `r`: generation 1, `CANCEL_REQUESTED`.
pub fn cancelled<L: Ledger>(l: &mut L, r: &ToolOperation) -> ToolOperation {
    change(l, r, |n| {
        n.cancel_generation = 1;
        n.local_state = LocalState::CancelRequested;
    })
}

/// The call node ids of `records`, in order.
pub fn ids(records: Vec<ToolOperation>) -> Vec<String> {
    records.into_iter().map(|r| r.call_node_id).collect()
}

/// `res` is a version conflict from `expected` to `found`.
pub fn assert_conflict<T: std::fmt::Debug>(res: Result<T, LedgerError>, expected: u64, found: u64) {
    match res {
        Err(LedgerError::VersionConflict {
            expected: e,
            found: f,
            ..
        }) if (e, f) == (expected, found) => {}
        other => panic!("expected a version conflict {expected} -> {found}, got {other:?}"),
    }
}

/// `res` is refused by the fence: a writer of epoch `writer`, the ledger at `current`.
pub fn assert_fenced<T: std::fmt::Debug>(res: Result<T, LedgerError>, writer: u64, current: u64) {
    match res {
        Err(LedgerError::StaleEpoch {
            writer: w,
            current: c,
            ..
        }) if (w, c) == (writer, current) => {}
        other => panic!("expected writer epoch {writer} fenced at {current}, got {other:?}"),
    }
}
