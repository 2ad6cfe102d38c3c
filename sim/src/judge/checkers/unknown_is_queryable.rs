//! Always: every UNKNOWN operation is queryable by task id or by submission key, in the world,
//! not only in the executor's own books. Each item in the manual reconciliation queue carries
//! the submission key the caller gave that call node (the caller's record of it), and an
//! operation id, when it names one, that the server created for that same node (the ground
//! truth): an operator who asks the server by either finds this node's operation. Every record
//! left in UNKNOWN has an item, since the queue is how an operator finds it.

use toolop::ledger::ReconcileItem;
use toolop::record::LocalState;

use super::view::{judge, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "unknown_is_queryable";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    for item in &v.ledger.reconciliation_queue {
        out.extend(item_problem(v, item).map(|detail| Violation {
            checker: NAME,
            node: Some(item.call_node_id.clone()),
            detail,
        }));
    }
    for rec in v
        .ledger
        .records
        .iter()
        .filter(|r| r.local_state == LocalState::Unknown)
    {
        if !v
            .ledger
            .reconciliation_queue
            .iter()
            .any(|i| i.call_node_id == rec.call_node_id)
        {
            out.push(Violation {
                checker: NAME,
                node: Some(rec.call_node_id.clone()),
                detail: "UNKNOWN record with no reconciliation item".into(),
            });
        }
    }
    out
}

fn item_problem(v: &View, item: &ReconcileItem) -> Option<String> {
    let node = item.call_node_id.as_str();
    if item.submission_key.is_empty() {
        return Some("reconciliation item without a submission key".into());
    }
    match v.caller_key(node) {
        None => {
            return Some(format!(
                "call node {node} was never submitted by the caller"
            ))
        }
        Some(k) if k != item.submission_key => {
            return Some(format!(
                "submission key {} is not the key the caller gave the node ({k})",
                item.submission_key
            ))
        }
        Some(_) => {}
    }
    let op = item.operation_id.as_deref()?;
    match v.truth.tasks.get(op) {
        None => Some(format!(
            "operation id {op} names no operation the server created"
        )),
        Some(t) if t.call_node != node => Some(format!(
            "operation id {op} names the server's operation of call node {}",
            t.call_node
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};

    fn unknown() -> Tb {
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn an_item_without_a_key_is_caught() {
        let mut b = unknown();
        b.ledger.reconciliation_queue[0].submission_key.clear();
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn an_operation_id_of_another_node_is_caught() {
        let mut b = unknown();
        b.happy_path("n2", 0);
        b.ledger.reconciliation_queue[0].operation_id = Some("t-n2".into());
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("of call node n2"), "{v:?}");
    }

    #[test]
    fn a_key_or_id_the_executor_agrees_with_but_the_world_does_not_is_caught() {
        // The executor's record carries the same wrong key as its item: its books agree, the
        // server would find nothing by it.
        let mut b = unknown();
        b.ledger.reconciliation_queue[0].submission_key = "minted-again".into();
        b.ledger.records[0].submission_key = "minted-again".into();
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("not the key the caller gave"), "{v:?}");
        let mut b = unknown();
        b.ledger.reconciliation_queue[0].operation_id = Some("t-ghost".into());
        b.ledger.records[0].operation_id = Some("t-ghost".into());
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn an_unknown_record_missing_from_the_queue_is_caught() {
        let mut b = unknown();
        b.ledger.reconciliation_queue.clear();
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
