//! Always: every UNKNOWN operation is queryable by task id or by submission key. Each item in the
//! manual reconciliation queue carries a submission key, and the key and the operation id (when
//! one is known) both lead back to the same call node's record; and every record left in UNKNOWN
//! has an item, since the queue is how an operator finds it.

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
    if item.submission_key.is_empty() {
        return Some("reconciliation item without a submission key".into());
    }
    let by_key = v
        .ledger
        .records
        .iter()
        .find(|r| r.submission_key == item.submission_key);
    match by_key {
        None => {
            return Some(format!(
                "submission key {} finds no record",
                item.submission_key
            ))
        }
        Some(r) if r.call_node_id != item.call_node_id => {
            return Some(format!(
                "submission key {} finds call node {}",
                item.submission_key, r.call_node_id
            ));
        }
        Some(_) => {}
    }
    let op = item.operation_id.as_deref()?;
    match v
        .ledger
        .records
        .iter()
        .find(|r| r.operation_id.as_deref() == Some(op))
    {
        None => Some(format!("operation id {op} finds no record")),
        Some(r) if r.call_node_id != item.call_node_id => Some(format!(
            "operation id {op} finds call node {}",
            r.call_node_id
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
        assert!(v[0].detail.contains("finds call node n2"), "{v:?}");
    }

    #[test]
    fn an_unknown_record_missing_from_the_queue_is_caught() {
        let mut b = unknown();
        b.ledger.reconciliation_queue.clear();
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
