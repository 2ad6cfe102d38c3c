//! Always: an effect reconciliation (a person asked to undo or confirm a side effect) is raised
//! for a call node only when the server itself reported one of that node's tasks completing or
//! failing after it had confirmed the task cancelled. The evidence is the world's: the frames
//! the network carried to an executor (what each showed, before any rewrite) and the server's
//! ground truth (the task's first terminal status). A late status of a task that simply
//! completed, a cancel the server never confirmed, or no such frame at all makes the hand-off
//! needless: it costs a human's time and trains people to ignore the queue.
//!
//! The items judged are the ledger's effect-reconciliation records (the executor's act, which
//! is what is judged). A frame counts if it could reach an executor readable: not lost, not
//! answered by a replica instead of the server, not rewritten to name another task, not cut
//! short (a truncated frame is a malformed one to the executor: it shows no status).

use std::collections::BTreeSet;

use super::view::{judge, View};
use super::Violation;
use crate::fake::truth::TaskStatus;
use crate::trace::{Dir, NetVerdict, Shows, Trace, What};

pub const NAME: &str = "no_needless_effect_reconciliation";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let flipped = nodes_shown_completing_after_cancel(v);
    let mut out = vec![];
    let mut reported = BTreeSet::new();
    for item in &v.ledger.effect_reconciliations {
        let node = item.call_node_id.as_str();
        if flipped.contains(node) || !reported.insert(node) {
            continue;
        }
        out.push(Violation {
            checker: NAME,
            node: Some(node.to_string()),
            detail: format!(
                "effect reconciliation at {} ms, but no frame showed any of the node's tasks completing or failing after the server had cancelled it",
                item.at_ms
            ),
        });
    }
    out
}

/// Nodes for which a frame that could reach an executor showed a task completed or failed
/// whose first terminal status, by the server's truth, was cancelled.
fn nodes_shown_completing_after_cancel<'a>(v: &View<'a>) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    for e in &v.trace.events {
        let What::Net {
            dir: Dir::ToExecutor,
            node: Some(node),
            verdict,
            shows: Some(shows),
            ..
        } = &e.what
        else {
            continue;
        };
        let Shows::Task { task, status, .. } = &**shows else {
            continue;
        };
        let reaches = !matches!(
            verdict,
            NetVerdict::Lost
                | NetVerdict::Replica { .. }
                | NetVerdict::TaskIdRewritten { .. }
                | NetVerdict::Truncated { .. }
        );
        let late_end = matches!(status, TaskStatus::Completed | TaskStatus::Failed);
        let was_cancelled = v
            .truth
            .tasks
            .get(task)
            .is_some_and(|t| t.terminal_status == Some(TaskStatus::Cancelled));
        if reaches && late_end && was_cancelled {
            out.insert(node.as_str());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::codec::ExchangeKind;
    use crate::judge::checkers::testkit::{assert_clean, task_shows as shows, Tb, SETTLED};
    use toolop::ledger::EffectItem;

    fn effect(b: &mut Tb, node: &str, at_ms: u64) {
        b.ledger.effect_reconciliations.push(EffectItem {
            call_node_id: node.into(),
            operation_id: Some(format!("t-{node}")),
            reason: "server reported completed after the cancel was confirmed".into(),
            at_ms,
        });
    }

    /// n1's task was cancelled, and the server then flipped its word: it now shows completed.
    fn flipped() -> Tb {
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        b.truth.tasks.get_mut("t-n1").unwrap().status = TaskStatus::Completed;
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_completion_shown_after_a_confirmed_cancel_justifies_it() {
        let mut b = flipped();
        b.at(4_000).net_in(
            "n1",
            ExchangeKind::Poll,
            shows("t-n1", TaskStatus::Completed),
        );
        effect(&mut b, "n1", 4_000);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_late_status_of_a_task_that_simply_completed_is_needless() {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        b.at(5_000).net_in(
            "n1",
            ExchangeKind::Poll,
            shows("t-n1", TaskStatus::Completed),
        );
        effect(&mut b, "n1", 5_000);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].checker, NAME);
        assert_eq!(v[0].node.as_deref(), Some("n1"));
    }

    #[test]
    fn a_flip_shown_only_on_a_frame_that_never_arrives_is_no_evidence() {
        let mut b = flipped();
        b.at(4_000).net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Poll,
            NetVerdict::Lost,
            None,
            Some(shows("t-n1", TaskStatus::Completed)),
        );
        effect(&mut b, "n1", 4_000);
        effect(&mut b, "n1", 4_001);
        // Reported once per node.
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        // Nor one cut short on the way: the executor could not read a status from it.
        let mut b = flipped();
        b.at(4_000).net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Poll,
            NetVerdict::Truncated { to_bytes: 12 },
            Some(20),
            Some(shows("t-n1", TaskStatus::Completed)),
        );
        effect(&mut b, "n1", 4_100);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn another_nodes_flip_does_not_justify_it() {
        let mut b = Tb::new();
        b.cancel_path("n1", 0).cancel_path("n2", 100);
        b.truth.tasks.get_mut("t-n1").unwrap().status = TaskStatus::Completed;
        b.at(4_000).net_in(
            "n1",
            ExchangeKind::Poll,
            shows("t-n1", TaskStatus::Completed),
        );
        effect(&mut b, "n1", 4_000);
        effect(&mut b, "n2", 4_000);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n2"));
    }
}
