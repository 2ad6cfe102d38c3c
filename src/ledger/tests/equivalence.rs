//! The same random sequence of inserts, commits, acceptances, fences, cancel intents and
//! deliveries applied to both ledgers: every result and every snapshot must agree, step by step.
//! Writes are built from the in-memory ledger's view, and are often wrong on purpose (stale
//! versions, stale epochs, stale acceptance bases, clashing keys) so that refusals are compared
//! as closely as successes.

use proptest::prelude::*;

use super::fixtures::rec;
use crate::core::{AcceptBasis, AcceptSpec};
use crate::ledger::{Ledger, LedgerError, MemoryLedger, RecordHead, SqliteLedger, Write};
use crate::record::{LocalState, TerminalState, ToolOperation};

/// Nodes n0..n2 exist from the start; n3 only if an insert makes it.
const NODES: u8 = 4;

#[derive(Clone, Debug)]
enum Change {
    State(usize),
    OperationId(u8),
    CancelGeneration,
    ResultDigest(u8),
    TakeOver,
    /// An operation id and a result being fetched: what an acceptance usually starts from.
    Fetching(u8),
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        node: u8,
        key_of: u8,
        epoch_delta: i8,
    },
    Commit {
        node: u8,
        change: Change,
        stale_version: bool,
        epoch_delta: i8,
        reconcile: bool,
        effect: bool,
    },
    Accept {
        node: u8,
        terminal: usize,
        cancelled_accepted: bool,
        digest: u8,
        stale_basis: bool,
        epoch_delta: i8,
    },
    Bump,
    RequestCancel {
        node: u8,
        at_ms: u8,
    },
    TakeCancel {
        node: u8,
    },
    Deliver {
        node: u8,
        consumer: u8,
    },
}

fn epoch_delta() -> impl Strategy<Value = i8> {
    prop_oneof![6 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (0..LocalState::ALL.len()).prop_map(Change::State),
        (0..3u8).prop_map(Change::OperationId),
        Just(Change::CancelGeneration),
        (0..3u8).prop_map(Change::ResultDigest),
        Just(Change::TakeOver),
        (0..3u8).prop_map(Change::Fetching),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..NODES, 0..NODES, epoch_delta()).prop_map(|(node, key_of, epoch_delta)| Op::Insert { node, key_of, epoch_delta }),
        6 => (0..NODES, change(), proptest::bool::weighted(0.15), epoch_delta(), proptest::bool::weighted(0.2), proptest::bool::weighted(0.2))
            .prop_map(|(node, change, stale_version, epoch_delta, reconcile, effect)| Op::Commit { node, change, stale_version, epoch_delta, reconcile, effect }),
        4 => (0..NODES, 0..5usize, any::<bool>(), 0..3u8, proptest::bool::weighted(0.2), epoch_delta())
            .prop_map(|(node, terminal, cancelled_accepted, digest, stale_basis, epoch_delta)| Op::Accept { node, terminal, cancelled_accepted, digest, stale_basis, epoch_delta }),
        1 => Just(Op::Bump),
        2 => (0..NODES, 0..4u8).prop_map(|(node, at_ms)| Op::RequestCancel { node, at_ms }),
        1 => (0..NODES).prop_map(|node| Op::TakeCancel { node }),
        2 => (0..NODES, 0..2u8).prop_map(|(node, consumer)| Op::Deliver { node, consumer }),
    ]
}

fn id(node: u8) -> String {
    format!("n{node}")
}

fn token(current: u64, delta: i8) -> u64 {
    current.saturating_add_signed(i64::from(delta))
}

fn digest(d: u8) -> Option<String> {
    (d > 0).then(|| format!("d{d}"))
}

const TERMINALS: [TerminalState; 5] = [
    TerminalState::Completed,
    TerminalState::Failed,
    TerminalState::Cancelled,
    TerminalState::DoneWithoutResult,
    TerminalState::Rejected,
];

/// The record a write is built on: the stored one, or a stand-in for a node never inserted
/// (which both ledgers must refuse the same way).
fn base(m: &MemoryLedger, node: u8) -> ToolOperation {
    m.by_call_node(&id(node)).unwrap().unwrap_or_else(|| {
        let mut r = rec(&id(node));
        r.version = 1;
        r
    })
}

fn commit_write(
    m: &MemoryLedger,
    node: u8,
    change: &Change,
    stale_version: bool,
    epoch_delta: i8,
    reconcile: bool,
    effect: bool,
) -> Write {
    let current = m.current_epoch().unwrap();
    let r = base(m, node);
    let mut next = r.clone();
    match change {
        Change::State(i) => next.local_state = LocalState::ALL[*i],
        Change::OperationId(o) => next.operation_id = Some(format!("op{o}")),
        Change::CancelGeneration => next.cancel_generation += 1,
        Change::ResultDigest(d) => next.result_digest = digest(*d),
        Change::TakeOver => next.execution_epoch = current,
        Change::Fetching(o) => {
            next.operation_id = Some(format!("op{o}"));
            next.local_state = LocalState::FetchingResult;
        }
    }
    Write {
        expected_version: if stale_version {
            r.version.saturating_sub(1)
        } else {
            r.version
        },
        writer_epoch: token(current, epoch_delta),
        record: next,
        accept: None,
        reconcile: reconcile.then(|| "lost".to_string()),
        effect: effect.then(|| "late".to_string()),
        now_ms: 7,
    }
}

fn accept_write(
    m: &MemoryLedger,
    node: u8,
    terminal: usize,
    cancelled_accepted: bool,
    d: u8,
    stale_basis: bool,
    epoch_delta: i8,
) -> Write {
    let r = base(m, node);
    let terminal = TERMINALS[terminal];
    let mut next = r.clone();
    next.local_state = match terminal {
        TerminalState::Rejected => LocalState::Rejected,
        TerminalState::Cancelled if cancelled_accepted => LocalState::CancelledAccepted,
        _ => LocalState::Accepted,
    };
    next.result_digest = digest(d);
    let mut basis = AcceptBasis::of(&r);
    if stale_basis {
        basis.cancel_generation += 1;
    }
    let payload = Some(serde_json::json!({"result": d}));
    Write {
        expected_version: r.version,
        writer_epoch: token(m.current_epoch().unwrap(), epoch_delta),
        record: next,
        accept: Some(AcceptSpec {
            terminal,
            result_digest: digest(d),
            payload,
            basis,
        }),
        reconcile: None,
        effect: None,
        now_ms: 9,
    }
}

/// What a step returned.
#[derive(Debug, PartialEq)]
enum Done {
    Record(Box<ToolOperation>),
    Epoch(u64),
    Marked(bool),
    Nothing,
}

/// One step on one ledger.
fn apply<L: Ledger>(l: &mut L, op: &Op, m: &MemoryLedger) -> Result<Done, LedgerError> {
    match op {
        Op::Insert {
            node,
            key_of,
            epoch_delta,
        } => {
            let mut r = rec(&id(*node));
            r.submission_key = format!("key-{}", id(*key_of));
            let writer = token(l.current_epoch()?, *epoch_delta);
            r.execution_epoch = writer.min(l.current_epoch()?);
            l.insert(r, writer).map(|r| Done::Record(Box::new(r)))
        }
        Op::Commit {
            node,
            change,
            stale_version,
            epoch_delta,
            reconcile,
            effect,
        } => l
            .commit(commit_write(
                m,
                *node,
                change,
                *stale_version,
                *epoch_delta,
                *reconcile,
                *effect,
            ))
            .map(|r| Done::Record(Box::new(r))),
        Op::Accept {
            node,
            terminal,
            cancelled_accepted,
            digest,
            stale_basis,
            epoch_delta,
        } => l
            .commit(accept_write(
                m,
                *node,
                *terminal,
                *cancelled_accepted,
                *digest,
                *stale_basis,
                *epoch_delta,
            ))
            .map(|r| Done::Record(Box::new(r))),
        Op::Bump => l.bump_epoch().map(Done::Epoch),
        Op::RequestCancel { node, at_ms } => l
            .request_cancel(&id(*node), u64::from(*at_ms))
            .map(|()| Done::Nothing),
        Op::TakeCancel { node } => l.take_cancel_request(&id(*node)).map(|()| Done::Nothing),
        Op::Deliver { node, consumer } => {
            let receipt = m
                .outbox_entry(&id(*node))?
                .map(|e| e.receipt_id)
                .unwrap_or_else(|| format!("{}#none", id(*node)));
            l.mark_delivered(&receipt, &format!("consumer-{consumer}"), 11)
                .map(Done::Marked)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn both_ledgers_agree_step_by_step(ops in proptest::collection::vec(op(), 1..64)) {
        let mut mem = MemoryLedger::new();
        let mut sql = SqliteLedger::open_in_memory().unwrap();
        for node in 0..NODES - 1 {
            prop_assert_eq!(mem.insert(rec(&id(node)), 1).unwrap(), sql.insert(rec(&id(node)), 1).unwrap());
        }
        for (i, op) in ops.iter().enumerate() {
            // Both writes are built from the same (pre-step) view.
            let view = mem.clone();
            let a = apply(&mut mem, op, &view);
            let b = apply(&mut sql, op, &view);
            prop_assert_eq!(&a, &b, "step {}: {:?}", i, op);
            prop_assert_eq!(mem.snapshot().unwrap(), sql.snapshot().unwrap(), "snapshots after step {}: {:?}", i, op);
            for o in 0..3 {
                let op_id = format!("op{o}");
                prop_assert_eq!(mem.by_operation_id(&op_id).unwrap(), sql.by_operation_id(&op_id).unwrap());
            }
            for node in 0..NODES {
                // Each ledger's head of a record is the head of its `by_call_node`, and the two agree.
                let head = mem.record_head(&id(node)).unwrap();
                let via_record = mem.by_call_node(&id(node)).unwrap().as_ref().map(RecordHead::of);
                prop_assert_eq!(&head, &via_record);
                let sql_via_record = sql.by_call_node(&id(node)).unwrap().as_ref().map(RecordHead::of);
                prop_assert_eq!(&sql.record_head(&id(node)).unwrap(), &sql_via_record);
                prop_assert_eq!(&head, &sql_via_record);
            }
            prop_assert_eq!(mem.in_flight().unwrap(), sql.in_flight().unwrap());
            prop_assert_eq!(mem.outbox_ready(1, 2).unwrap(), sql.outbox_ready(1, 2).unwrap());
            prop_assert_eq!(mem.settled_count().unwrap(), sql.settled_count().unwrap());
        }
    }
}
