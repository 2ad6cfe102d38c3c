//! Always: the executor asks the server to cancel a call node only after the caller asked it
//! to (`cancel`, or `recancel` after a restart). A caller that stops waiting (`detach`) only
//! stops local waiting; it is never a server-side cancel.

use std::collections::BTreeSet;

use toolop::runner::Observation;

use super::view::{judge, View};
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
        match &e.what {
            What::Caller {
                action: CallerAction::Cancel | CallerAction::Recancel,
                node,
            } => {
                asked.insert(node);
            }
            What::Caller {
                action: CallerAction::Detach,
                node,
            } => {
                detached.insert(node);
            }
            What::Exec {
                obs:
                    Observation::Sent {
                        node,
                        kind: "cancel",
                        ..
                    },
                epoch,
                incarnation,
            } if !asked.contains(node.as_str()) && reported.insert(node) => {
                let after = if detached.contains(node.as_str()) {
                    " (the caller only detached)"
                } else {
                    ""
                };
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.clone()),
                    detail: format!("executor epoch {epoch} incarnation {incarnation} sent a cancel at {} ms that the caller never asked for{after}", e.t_ms),
                });
            }
            _ => {}
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
}
