//! Always: at most one terminal receipt per call node. Counted twice over, because either alone
//! can hide a second receipt: the executors' `Accepted` observations (across every incarnation
//! and epoch, so a rolled-back executor that also accepted is seen) and the ledger's receipts
//! at the end (so a receipt written without an observation is seen).

use std::collections::BTreeMap;

use toolop::runner::Observation;

use super::view::{judge, observations, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "at_most_one_receipt";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// One violation per call node with more than one receipt; `SeriesMetrics::extra_receipts`
/// is their count.
pub fn violations(v: &View) -> Vec<Violation> {
    // node -> (Accepted observations, ledger receipts)
    let mut counts: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for (_, _, obs) in observations(v.trace) {
        if let Observation::Accepted { node, .. } = obs {
            counts.entry(node.as_str()).or_default().0 += 1;
        }
    }
    for r in &v.ledger.receipts {
        counts.entry(r.call_node_id.as_str()).or_default().1 += 1;
    }
    counts
        .into_iter()
        .filter(|(_, (observed, stored))| *observed > 1 || *stored > 1)
        .map(|(node, (observed, stored))| Violation {
            checker: NAME,
            node: Some(node.to_string()),
            detail: format!("{observed} Accepted observations, {stored} ledger receipts"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};
    use toolop::record::TerminalState;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_second_acceptance_by_a_rolled_back_executor_is_caught() {
        let mut b = happy("n1", 0);
        b.exec(2, 1)
            .at(5_000)
            .accepted("n1", TerminalState::Completed, Some("d-n1"));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n1"));
    }

    #[test]
    fn a_second_ledger_receipt_is_caught_without_any_observation() {
        let mut b = happy("n1", 0);
        b.receipt("n1", Some("t-n1"), TerminalState::Completed, Some("d-n1"));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("2 ledger receipts"), "{v:?}");
    }
}
