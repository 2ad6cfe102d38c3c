//! Always: every downstream advance (outbox entry) traces back to a terminal receipt: a receipt
//! with the entry's receipt id, call node and terminal state, whose acceptance an executor
//! reported in the trace (or whose acceptance the world saw land in the ledger, when the
//! commit's reply was lost). A receipt licenses one entry, so a second entry for the same receipt
//! or node has no receipt of its own. One violation per untraceable entry
//! (`SeriesMetrics::untraceable_outbox` is their count).

use std::collections::BTreeSet;

use toolop::ledger::OutboxEntry;
use toolop::record::TerminalState;
use toolop::runner::Observation;

use super::view::{judge, observations, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "outbox_traceable";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut accepted: BTreeSet<(&str, TerminalState)> = observations(v.trace)
        .filter_map(|(_, _, obs)| match obs {
            Observation::Accepted { node, terminal, .. } => Some((node.as_str(), *terminal)),
            _ => None,
        })
        .collect();
    // An acceptance whose commit reply was lost landed without its executor knowing: the
    // world's record of the ledger shows it.
    accepted.extend(
        super::ledger_writes::landed(v.trace)
            .filter_map(|(_, w)| w.receipt.map(|terminal| (w.node.as_str(), terminal))),
    );
    let (mut seen_receipts, mut seen_nodes): (BTreeSet<&str>, BTreeSet<&str>) = Default::default();
    let mut out = vec![];
    for e in &v.ledger.outbox {
        let mut problems = entry_problems(v, e, &accepted);
        // Both keys are checked: entries of one receipt, and entries of one node under two ids.
        let new_receipt = seen_receipts.insert(e.receipt_id.as_str());
        let new_node = seen_nodes.insert(e.call_node_id.as_str());
        if !new_receipt || !new_node {
            problems.push("a second entry for the same receipt or call node".to_string());
        }
        if !problems.is_empty() {
            out.push(Violation {
                checker: NAME,
                node: Some(e.call_node_id.clone()),
                detail: format!("outbox entry {}: {}", e.receipt_id, problems.join("; ")),
            });
        }
    }
    out
}

fn entry_problems(
    v: &View,
    e: &OutboxEntry,
    accepted: &BTreeSet<(&str, TerminalState)>,
) -> Vec<String> {
    let mut problems = vec![];
    match v
        .ledger
        .receipts
        .iter()
        .find(|r| r.receipt_id == e.receipt_id)
    {
        None => problems.push("no receipt with this id".to_string()),
        Some(r) => {
            if r.call_node_id != e.call_node_id {
                problems.push(format!("receipt is for call node {}", r.call_node_id));
            }
            if r.terminal_state != e.terminal_state {
                problems.push(format!(
                    "receipt says {}, entry says {}",
                    r.terminal_state.name(),
                    e.terminal_state.name()
                ));
            }
        }
    }
    if !accepted.contains(&(e.call_node_id.as_str(), e.terminal_state)) {
        problems.push(format!(
            "no executor reported accepting {} for this node",
            e.terminal_state.name()
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{all_paths, assert_clean, happy, SETTLED};
    use crate::judge::checkers::testkit::{digest, Tb};
    use toolop::record::LocalState;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn an_entry_without_its_receipt_is_caught() {
        let mut b = all_paths();
        b.ledger.receipts.retain(|r| r.call_node_id != "n2");
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n2"));
    }

    #[test]
    fn an_entry_no_executor_accepted_is_caught() {
        let mut b = happy("n1", 0);
        b.ledger.outbox[0].terminal_state = TerminalState::Failed;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("receipt says completed") && v[0].detail.contains("no executor"),
            "{v:?}"
        );
    }

    #[test]
    fn a_duplicate_entry_is_caught() {
        let mut b = happy("n1", 0);
        let dup = b.ledger.outbox[0].clone();
        b.ledger.outbox.push(dup);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn an_acceptance_whose_commit_reply_was_lost_traces_by_the_ledger_s_record() {
        // ledger_commit_lost_reply: the acceptance landed and its executor went down before
        // learning it, so no executor reported it; the world saw the write land.
        let build = |landed: bool| {
            let mut b = Tb::new();
            b.at(0).submit("n1").sent("n1", "submit");
            b.at(10).recv("n1", "submit", "submitted");
            b.record("n1", LocalState::Accepted, Some("t-n1"));
            b.receipt(
                "n1",
                Some("t-n1"),
                TerminalState::Completed,
                Some(&digest("n1")),
            );
            if landed {
                let mut w = build::write("n1", 1, 1, 3);
                w.state = LocalState::Accepted;
                w.receipt = Some(TerminalState::Completed);
                b.at(1_000).push(build::ev(w));
            }
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        let v = check(&build(false));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("no executor"), "{v:?}");
    }
}
