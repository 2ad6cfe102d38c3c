//! Always: a call node is submitted again only on proof that the previous submission created
//! nothing. Judged from the network: between two submission frames of a node (any executor,
//! any lane), one of these reached an executor intact:
//! - the answer to a lookup by the node's submission key saying no operation exists (the way
//!   into NOT_FOUND_SAFE);
//! - a 429 answering the node's submission (the server did not take the request).
//!
//! A submission that timed out, or a 404 on a poll, proves nothing: submitting again without
//! asking by key first is the blind retry that starts a second operation wherever the server
//! does not deduplicate. What the executor says it received plays no part.

use std::collections::{BTreeMap, BTreeSet};

use super::view::{arrivals, judge, sends, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{Shows, Trace};

pub const NAME: &str = "no_blind_resubmit";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    // Per node: arrival times of proofs that nothing was created.
    let mut proofs: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for a in arrivals(v.trace) {
        let proof = match (a.exchange, a.shows) {
            (ExchangeKind::Lookup, Some(Shows::Tasks { tasks, .. })) => tasks.is_empty(),
            (ExchangeKind::Submit, Some(Shows::Throttled { status: 429, .. })) => true,
            _ => false,
        };
        if let Some(node) = a.node.filter(|_| proof && a.intact()) {
            proofs
                .entry(node)
                .or_default()
                .push(a.arrives_at_ms.unwrap_or(a.t_ms));
        }
    }
    let mut last_submit: BTreeMap<&str, u64> = BTreeMap::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for s in sends(v.trace).filter(|s| s.exchange == ExchangeKind::Submit) {
        let Some(node) = s.node else { continue };
        if let Some(&before) = last_submit.get(node) {
            let proved = proofs
                .get(node)
                .is_some_and(|p| p.iter().any(|&t| t >= before && t <= s.t_ms));
            if !proved && reported.insert(node) {
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!(
                        "executor epoch {} incarnation {} submitted again at {} ms (previous submission at {before} ms) with no proof that the previous submission created nothing",
                        s.exec.0, s.exec.1, s.t_ms
                    ),
                });
            }
        }
        last_submit.insert(node, s.t_ms);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::{Dir, NetVerdict};
    use toolop::record::LocalState::*;
    use toolop::runner::Observation;

    /// n1's submission times out; the executor asks by key.
    fn timed_out() -> Tb {
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(10_000).obs(Observation::Lost {
            node: "n1".into(),
            kind: "submit",
            seq: 1,
        });
        b.moved("n1", &[Submitting, SubmissionUnknown])
            .sent("n1", "lookup");
        b.at(10_030);
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        // Not found by key: submitting again (same key) is what NOT_FOUND_SAFE is for.
        let mut b = timed_out();
        b.recv("n1", "lookup", "lookup_not_found");
        b.at(10_040).sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A 429 on the submission: the server did not take it.
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(20).recv("n1", "submit", "rate_limited");
        b.at(5_020).sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_resubmission_without_a_lookup_is_caught() {
        let mut b = timed_out();
        b.at(10_040)
            .sent("n1", "submit")
            .at(12_000)
            .sent("n1", "submit");
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "one violation per node: {v:?}");
        assert!(v[0].detail.contains("at 10040 ms"), "{v:?}");
    }

    #[test]
    fn a_proof_counts_once_and_only_as_the_network_carried_it() {
        let mut b = timed_out();
        b.recv("n1", "lookup", "lookup_not_found");
        b.at(10_040)
            .sent("n1", "submit")
            .at(20_000)
            .sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        // The executor says "not found by key"; the network carried a lookup that found the task.
        let mut b = timed_out();
        b.recv_shows(
            "n1",
            "lookup",
            "lookup_not_found",
            Shows::Tasks {
                tasks: vec!["t-n1".into()],
                status: BTreeMap::new(),
                ttl_ms: BTreeMap::new(),
            },
        );
        b.at(10_040).sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        // A "not found" that was lost on the way proves nothing to anyone.
        let mut b = timed_out();
        b.net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Lookup,
            NetVerdict::Lost,
            None,
            Some(Shows::Tasks {
                tasks: vec![],
                status: Default::default(),
                ttl_ms: Default::default(),
            }),
        );
        b.at(10_040).sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
