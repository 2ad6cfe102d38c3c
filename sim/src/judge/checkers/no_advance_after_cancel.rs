//! Always: after a successful cancel, a late completion never advances. A node with a cancelled
//! receipt has no other receipt and at most a cancelled, payload-free outbox entry; a node whose
//! server task ended cancelled (the ground truth, whatever the status said later) has no
//! completed or failed outbox entry (a server that keeps working after cancel may still store a
//! result); and no executor accepts another outcome after one accepted the cancel. The
//! receipts, outbox and acceptances are the outputs judged; the record's own state is not read.

use std::collections::{BTreeMap, BTreeSet};

use toolop::record::TerminalState;
use toolop::runner::Observation;

use super::view::{judge, node_task, observations, View};
use super::Violation;
use crate::fake::truth::TaskStatus;
use crate::trace::Trace;

pub const NAME: &str = "no_advance_after_cancel";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    let bad = |node: &str, detail: String| Violation {
        checker: NAME,
        node: Some(node.to_string()),
        detail,
    };
    let cancelled: BTreeSet<&str> = v
        .ledger
        .receipts
        .iter()
        .filter(|r| r.terminal_state == TerminalState::Cancelled)
        .map(|r| r.call_node_id.as_str())
        .collect();
    for &node in &cancelled {
        for r in v
            .ledger
            .receipts
            .iter()
            .filter(|r| r.call_node_id == node && r.terminal_state != TerminalState::Cancelled)
        {
            out.push(bad(
                node,
                format!(
                    "a cancelled receipt and a {} receipt",
                    r.terminal_state.name()
                ),
            ));
        }
        for e in v.ledger.outbox.iter().filter(|e| e.call_node_id == node) {
            if e.terminal_state != TerminalState::Cancelled || e.payload.is_some() {
                out.push(bad(
                    node,
                    format!(
                        "a cancelled receipt with a {} outbox entry (payload: {})",
                        e.terminal_state.name(),
                        e.payload.is_some()
                    ),
                ));
            }
        }
    }
    for e in v.ledger.outbox.iter().filter(|e| {
        matches!(
            e.terminal_state,
            TerminalState::Completed | TerminalState::Failed
        )
    }) {
        let op = v
            .ledger
            .receipts
            .iter()
            .find(|r| r.receipt_id == e.receipt_id)
            .and_then(|r| r.operation_id.as_deref());
        if let Some((id, _)) = node_task(v.truth, &e.call_node_id, op)
            .filter(|(_, t)| t.terminal_status == Some(TaskStatus::Cancelled))
        {
            out.push(bad(
                &e.call_node_id,
                format!(
                    "{} outbox entry although server task {id} ended cancelled",
                    e.terminal_state.name()
                ),
            ));
        }
    }
    // In the trace: once any executor accepted a cancel for a node, no acceptance may follow.
    let mut cancelled_at: BTreeMap<&str, u64> = BTreeMap::new();
    for (t, _, obs) in observations(v.trace) {
        if let Observation::Accepted { node, terminal, .. } = obs {
            match (cancelled_at.get(node.as_str()), terminal) {
                (Some(at), _) => out.push(bad(
                    node,
                    format!(
                        "accepted {} at {t} ms after accepting the cancel at {at} ms",
                        terminal.name()
                    ),
                )),
                (None, TerminalState::Cancelled) => {
                    cancelled_at.insert(node, t);
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};

    fn cancelled() -> Tb {
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_payload_behind_a_confirmed_cancel_is_caught() {
        let mut b = cancelled();
        b.ledger.outbox[0].terminal_state = TerminalState::Completed;
        b.ledger.outbox[0].payload = Some(serde_json::json!({"late": true}));
        let v = check(&b.build(SETTLED));
        // The record says cancelled, and the server says cancelled: both readings object.
        assert_eq!(v.len(), 2, "{v:?}");
    }

    #[test]
    fn a_completed_entry_for_a_task_the_server_cancelled_is_caught() {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        if let Some(t) = b.truth.tasks.get_mut("t-n1") {
            t.terminal_status = Some(TaskStatus::Cancelled);
        }
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("ended cancelled"), "{v:?}");
    }

    #[test]
    fn a_late_acceptance_after_the_cancel_is_caught() {
        let mut b = cancelled();
        b.at(9_000)
            .accepted("n1", TerminalState::Completed, Some("late"));
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
