//! Eventually (bounded): every submitted call node settles, that is the world finds in the store
//! its receipt (accepted, cancelled or rejected) or its hand-off to manual reconciliation, no
//! later than the liveness bound after the safety phase ends, or after its own submission if
//! that came later. The time is the world's (`What::Store`), not the executor's report of a
//! move. A series the world ended for any other reason than "all call nodes settled" fails too,
//! and so does a record left unfinished. One violation per late or unsettled node, plus one for
//! the end reason (`SeriesMetrics::liveness_failures` is their count).

use super::view::{caller_times, judge, store_facts, View};
use super::Violation;
use crate::trace::{CallerAction, Trace};

pub const NAME: &str = "settles_within_bound";

/// The `End` reason of a series in which every call node settled.
pub const SETTLED: &str = "all call nodes settled";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let settled = store_facts(v.trace);
    let mut out = vec![];
    for (node, submitted_ms) in caller_times(v.trace, CallerAction::Submit) {
        let deadline_ms = v
            .safety_window_ms
            .saturating_add(v.liveness_bound_ms)
            .max(submitted_ms.saturating_add(v.liveness_bound_ms));
        let problem = match (v.record(&node), settled.get(&node)) {
            (None, _) => Some("submitted but has no ledger record".to_string()),
            (Some(r), _) if !r.local_state.is_final() => {
                Some(format!("still {} at the end", r.local_state))
            }
            (Some(r), None) => Some(format!(
                "record is {} but the store never showed a receipt or a hand-off",
                r.local_state
            )),
            (Some(_), Some((t, fact))) if *t > deadline_ms => Some(format!(
                "the store showed its {} at {t} ms, bound {deadline_ms} ms",
                match fact {
                    crate::trace::StoreFact::Receipt { terminal } =>
                        format!("{} receipt", terminal.name()),
                    crate::trace::StoreFact::Reconcile => "hand-off".to_string(),
                }
            )),
            _ => None,
        };
        out.extend(problem.map(|detail| Violation {
            checker: NAME,
            node: Some(node),
            detail,
        }));
    }
    if v.end_reason != Some(SETTLED) {
        out.push(Violation {
            checker: NAME,
            node: None,
            detail: format!("series ended with {:?}", v.end_reason),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{all_paths, assert_clean};
    use toolop::record::LocalState;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_node_settling_after_the_bound_is_caught() {
        // Bound: max(10 000 + 60 000, submission + 60 000).
        let mut b = all_paths();
        for (node, submitted, settled) in [
            ("early_ok", 0, 70_000),
            ("early_late", 0, 70_001),
            ("late_ok", 20_000, 80_000),
            ("late_late", 20_000, 80_001),
        ] {
            b.at(submitted).submit(node);
            b.at(settled)
                .moved(node, &[LocalState::Submitting, LocalState::Rejected])
                .stored(node, toolop::record::TerminalState::Rejected);
            b.record(node, LocalState::Rejected, None);
        }
        // The executor reports an early settlement the store does not show until later.
        b.at(10).submit("says_early").moved(
            "says_early",
            &[LocalState::Submitting, LocalState::Rejected],
        );
        b.at(90_000)
            .stored("says_early", toolop::record::TerminalState::Rejected);
        b.record("says_early", LocalState::Rejected, None);
        let v = check(&b.build(SETTLED));
        let nodes: Vec<_> = v.iter().filter_map(|v| v.node.as_deref()).collect();
        assert_eq!(nodes, ["early_late", "late_late", "says_early"], "{v:?}");
    }

    #[test]
    fn an_unsettled_node_and_a_timed_out_series_are_caught() {
        let mut b = all_paths();
        b.at(50)
            .submit("stuck")
            .moved("stuck", &[LocalState::Submitting, LocalState::Working]);
        b.record("stuck", LocalState::Working, Some("t-stuck"));
        let v = check(&b.build("simulated time limit reached"));
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("stuck"));
        assert_eq!(v[1].node, None);
    }
}
