//! Always: a call node is submitted again only on proof that the previous submission created
//! nothing. Between two submissions of a node (`submit` or `submit_sync` sends, any executor)
//! the executor must have applied one of:
//! - `lookup_not_found`: the server said, by the submission key, that no operation exists
//!   (the way into NOT_FOUND_SAFE);
//! - `rate_limited` answering a submission: a 429 means the server did not take the request.
//!
//! A submission that timed out, or a 404 on a poll, proves nothing: submitting again without
//! asking by key first is the blind retry that starts a second operation wherever the server
//! does not deduplicate.

use std::collections::{BTreeMap, BTreeSet};

use toolop::runner::Observation;

use super::view::{judge, observations, reply_event, ExecId, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "no_blind_resubmit";

/// (request kind, reply) pairs that, once applied, allow the next submission.
pub const LICENSING_REPLIES: [(&str, &str); 3] = [
    ("lookup", "lookup_not_found"),
    ("submit", "rate_limited"),
    ("submit_sync", "rate_limited"),
];

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    // Per node: submitted before, and whether a proof arrived since the last submission.
    let mut submitted: BTreeMap<&str, bool> = BTreeMap::new();
    let mut waiting: BTreeMap<(ExecId, &str), String> = BTreeMap::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for (t, exec, obs) in observations(v.trace) {
        match obs {
            Observation::Sent {
                node,
                kind: kind @ ("submit" | "submit_sync"),
                ..
            } => {
                let node = node.as_str();
                if submitted.get(node) == Some(&false) && reported.insert(node) {
                    out.push(Violation {
                        checker: NAME,
                        node: Some(node.to_string()),
                        detail: format!(
                            "executor epoch {} incarnation {} sent {kind} again at {t} ms with no proof that the previous submission created nothing",
                            exec.0, exec.1
                        ),
                    });
                }
                submitted.insert(node, false);
            }
            Observation::Received {
                node, kind, reply, ..
            } if LICENSING_REPLIES.contains(&(*kind, *reply)) => {
                waiting.insert((exec, node.as_str()), reply_event(kind, reply));
            }
            Observation::Moved { node, event, .. } | Observation::Stayed { node, event }
                if waiting
                    .remove(&(exec, node.as_str()))
                    .is_some_and(|e| e == *event) =>
            {
                if let Some(proved) = submitted.get_mut(node.as_str()) {
                    *proved = true;
                }
            }
            Observation::Rejected { node, .. }
            | Observation::Refused { node, .. }
            | Observation::LedgerRefused { node, .. } => {
                waiting.remove(&(exec, node.as_str()));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use toolop::record::LocalState::*;

    fn applied(b: &mut Tb, kind: &'static str, reply: &'static str) {
        b.recv("n1", kind, reply);
        b.obs(Observation::Moved {
            node: "n1".into(),
            event: reply_event(kind, reply),
            path: vec![SubmissionUnknown, NotFoundSafe],
            version: 0,
        });
    }

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
        applied(&mut b, "lookup", "lookup_not_found");
        b.at(10_040).sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A 429 on the submission: the server did not take it.
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(20);
        applied(&mut b, "submit", "rate_limited");
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
    fn a_proof_counts_once_and_only_when_applied() {
        let mut b = timed_out();
        applied(&mut b, "lookup", "lookup_not_found");
        b.at(10_040)
            .sent("n1", "submit")
            .at(20_000)
            .sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        let mut b = timed_out();
        b.recv("n1", "lookup", "lookup_not_found");
        b.obs(Observation::Rejected {
            node: "n1".into(),
            event: "reply:lookup:lookup_not_found".into(),
            reason: toolop::core::Rejection::StaleEpoch {
                event_epoch: 1,
                record_epoch: 2,
            },
        });
        b.at(10_040).sent("n1", "submit");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
