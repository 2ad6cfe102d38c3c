//! Always: a cancel for a call node reaches the network only after the caller asked for it
//! (`cancel`, `recancel` after a restart, or an operator's `cancel_request` in the ledger). A caller that stops waiting (`detach`) only stops
//! local waiting; it is never a server-side cancel. Judged from the frames the network carried
//! (a cancel exchange the world attributes to the node, from any executor) and the caller's own
//! record of its clicks, never from the executor's report of what it sent.

use std::collections::BTreeSet;

use super::view::{cancel_ask, cancel_sent, judge, View};
use super::Violation;
use crate::trace::{CallerAction, Trace, What};

pub const NAME: &str = "cancel_only_when_asked";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    let mut asked: BTreeSet<&str> = BTreeSet::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut detached: BTreeSet<&str> = BTreeSet::new();
    // Trace order, not time: the caller's event is written before its input reaches the executor.
    for e in &v.trace.events {
        if let Some(node) = cancel_ask(&e.what) {
            asked.insert(node);
        } else if let What::Caller {
            action: CallerAction::Detach,
            node,
        } = &e.what
        {
            detached.insert(node);
        } else if let Some((node, (epoch, incarnation))) = cancel_sent(&e.what) {
            if asked.contains(node) || !reported.insert(node) {
                continue;
            }
            let after = if detached.contains(node) {
                " (the caller only detached)"
            } else {
                ""
            };
            out.push(Violation {
                checker: NAME,
                node: Some(node.to_string()),
                detail: format!("executor epoch {epoch} incarnation {incarnation} put a cancel on the network at {} ms that the caller never asked for{after}", e.t_ms),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        // A cancel repeated by a restarted executor after the caller's re-cancel is asked for.
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        b.exec(1, 2)
            .at(9_000)
            .caller(crate::trace::CallerAction::Recancel, "n1")
            .sent("n1", "cancel");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // An operator's request in the ledger asks for it too; a request for another node
        // does not.
        for (asked_for, violations) in [("n1", 0), ("n2", 1)] {
            let mut b = happy("n1", 0);
            b.at(500)
                .caller(crate::trace::CallerAction::CancelRequest, asked_for);
            b.at(900).sent("n1", "cancel");
            assert_eq!(check(&b.build(SETTLED)).len(), violations, "{asked_for}");
        }
    }

    #[test]
    fn a_detach_treated_as_a_cancel_is_caught() {
        let mut b = happy("n1", 0);
        b.at(500)
            .caller(crate::trace::CallerAction::Detach, "n1")
            .sent("n1", "cancel");
        b.at(600).sent("n1", "cancel");
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "one violation per node: {v:?}");
        assert!(v[0].detail.contains("only detached"), "{v:?}");
    }

    #[test]
    fn a_cancel_sent_before_the_click_is_caught() {
        let mut b = happy("n1", 0);
        b.at(500).sent("n1", "cancel");
        b.at(600).caller(crate::trace::CallerAction::Cancel, "n1");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_cancel_the_executor_does_not_report_is_still_seen_on_the_network() {
        // The executor reports nothing; the network carried its cancel anyway.
        let mut b = happy("n1", 0);
        b.at(500)
            .net_out("n1", crate::fake::codec::ExchangeKind::Cancel);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("at 500 ms"), "{v:?}");
        // And a report of a cancel that never reached the network convicts nobody.
        let mut b = happy("n1", 0);
        b.at(500).obs(toolop::runner::Observation::Sent {
            node: "n1".into(),
            kind: "cancel",
            seq: 9,
            rpc_id: None,
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }
}
