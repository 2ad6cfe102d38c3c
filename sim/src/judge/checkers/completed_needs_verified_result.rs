//! Always: completed never advances downstream without a fetched, verified result. In the trace,
//! the executor's last reply for the node before an `Accepted { completed }` must be one that
//! carries a verified result (the acceptance is that reply's consequence); in the ledger, every
//! completed receipt and outbox entry must belong to a node that received such a reply, the
//! outbox entry must carry the payload, and the receipt's digest must be the server's.

use std::collections::{BTreeMap, BTreeSet};

use toolop::ledger::Receipt;
use toolop::record::TerminalState;
use toolop::runner::Observation;

use super::view::{judge, observations, ExecId, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "completed_needs_verified_result";

/// (request kind, reply) pairs whose reply carries a result the adapter verified. An adapter
/// that returns results inline in a status read (AIP-151 `done` with `response`) adds its pair.
/// A submission answered inline (the tasks extension may decline to create a task) carries its result too.
pub const VERIFYING_REPLIES: [(&str, &str); 3] = [
    ("fetch", "result"),
    ("submit_sync", "sync_result"),
    ("submit", "sync_result"),
];

fn verifying(kind: &str, reply: &str) -> bool {
    VERIFYING_REPLIES
        .iter()
        .any(|(k, r)| *k == kind && *r == reply)
}

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
    // Per executor and node: was the newest reply a verified result? Keyed per executor because
    // a restarted or rolled-back executor must fetch again; the old process's reply is not its own.
    let mut last_reply: BTreeMap<(ExecId, &str), (&str, &str)> = BTreeMap::new();
    let mut verified_nodes: BTreeSet<&str> = BTreeSet::new();
    for (t, exec, obs) in observations(v.trace) {
        match obs {
            Observation::Received {
                node, kind, reply, ..
            } => {
                last_reply.insert((exec, node.as_str()), (kind, reply));
                if verifying(kind, reply) {
                    verified_nodes.insert(node.as_str());
                }
            }
            Observation::Accepted {
                node,
                terminal: TerminalState::Completed,
                ..
            } => match last_reply.get(&(exec, node.as_str())) {
                Some((kind, reply)) if verifying(kind, reply) => {}
                last => out.push(bad(
                    node,
                    format!("accepted completed at {t} ms after {last:?}, not a verified result"),
                )),
            },
            _ => {}
        }
    }
    for r in v
        .ledger
        .receipts
        .iter()
        .filter(|r| r.terminal_state == TerminalState::Completed)
    {
        if !verified_nodes.contains(r.call_node_id.as_str()) {
            out.push(bad(
                &r.call_node_id,
                format!(
                    "completed receipt {} without any verified result reply",
                    r.receipt_id
                ),
            ));
        }
        out.extend(digest_mismatch(v, r).map(|d| bad(&r.call_node_id, d)));
    }
    for e in v
        .ledger
        .outbox
        .iter()
        .filter(|e| e.terminal_state == TerminalState::Completed)
    {
        if !verified_nodes.contains(e.call_node_id.as_str()) {
            out.push(bad(
                &e.call_node_id,
                format!(
                    "completed outbox entry {} without any verified result reply",
                    e.receipt_id
                ),
            ));
        }
        if e.payload.is_none() {
            out.push(bad(
                &e.call_node_id,
                format!("completed outbox entry {} carries no payload", e.receipt_id),
            ));
        }
    }
    out
}

/// The receipt's digest against the server's: the node's task named by the receipt, or for a
/// synchronous receipt the node's synchronous run. Without a server digest there is nothing to
/// compare (a task of another node is `no_divergence`'s finding, not this one's).
fn digest_mismatch(v: &View, r: &Receipt) -> Option<String> {
    let truth = match &r.operation_id {
        Some(op) => v
            .truth
            .tasks
            .get(op)
            .filter(|t| t.call_node == r.call_node_id)
            .and_then(|t| t.result_digest.as_ref()),
        None => v
            .truth
            .sync_runs
            .iter()
            .filter(|s| s.call_node == r.call_node_id)
            .find_map(|s| s.result_digest.as_ref()),
    };
    match (&r.result_digest, truth) {
        (None, _) => Some(format!(
            "completed receipt {} has no result digest",
            r.receipt_id
        )),
        (Some(ours), Some(theirs)) if ours != theirs => Some(format!(
            "receipt digest {ours} differs from the server's {theirs} (operation {:?})",
            r.operation_id
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};
    use toolop::record::LocalState::*;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn completion_accepted_from_a_status_read_is_caught() {
        // A result reply that arrived earlier and was refused does not license a later acceptance.
        let mut b = Tb::new();
        b.at(0)
            .submit("n1")
            .sent("n1", "submit")
            .recv("n1", "submit", "submitted")
            .moved("n1", &[Submitting, Working]);
        b.at(500).recv("n1", "fetch", "result");
        b.at(1_000)
            .recv("n1", "poll", "status")
            .moved("n1", &[Working, Accepted]);
        b.accepted("n1", TerminalState::Completed, Some("d-n1"));
        b.record("n1", Accepted, Some("t-n1"));
        b.receipt("n1", Some("t-n1"), TerminalState::Completed, Some("d-n1"));
        b.task(
            "t-n1",
            "n1",
            Some(crate::fake::truth::TaskStatus::Completed),
            Some("d-n1"),
            Some(900),
        );
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("poll"), "{v:?}");
    }

    #[test]
    fn a_restarted_executor_must_fetch_again() {
        let mut b = happy("n1", 0);
        b.exec(1, 2)
            .at(2_000)
            .accepted("n1", TerminalState::Completed, Some("d-n1"));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
    }

    #[test]
    fn a_receipt_digest_other_than_the_servers_is_caught() {
        let mut b = happy("n1", 0);
        b.ledger.receipts[0].result_digest = Some("truncated".into());
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("differs"), "{v:?}");
    }

    #[test]
    fn a_synchronous_digest_is_compared_with_the_run() {
        let mut b = Tb::new();
        b.sync_path("n1", 0);
        b.truth.sync_runs[0].result_digest = Some("other".into());
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_completed_outbox_entry_without_payload_is_caught() {
        let mut b = happy("n1", 0);
        b.ledger.outbox[0].payload = None;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("payload"), "{v:?}");
    }

    #[test]
    fn a_completed_receipt_with_no_result_reply_in_the_trace_is_caught() {
        let mut b = Tb::new();
        b.at(0).submit("n1").moved("n1", &[Submitting, Accepted]);
        b.record("n1", Accepted, Some("t-n1"));
        b.receipt("n1", Some("t-n1"), TerminalState::Completed, Some("d"));
        // Receipt and outbox entry, each without a verified reply.
        assert_eq!(check(&b.build(SETTLED)).len(), 2);
    }
}
