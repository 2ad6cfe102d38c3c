//! Always: completed never advances downstream without a fetched, verified result. Judged from
//! what the network carried: before a completed receipt of a call node appeared in the store,
//! a reply carrying that node's result (a result read, an inline run's end, or a status read
//! that shows a done operation's result) reached, intact, the executor that accepted it (the
//! one that reported the acceptance; any executor when none did). A cut, rewritten, lost or
//! stale copy is no result. In the ledger, every completed receipt and outbox entry belongs to a
//! node that got such a reply, and the receipt's digest is the server's. And every executor
//! that reports accepting completed must have had such a reply itself (its report convicts it;
//! a restarted or rolled-back process must fetch again, the old process's reply is not its own).

use std::collections::BTreeMap;

use toolop::ledger::Receipt;
use toolop::record::TerminalState;
use toolop::runner::Observation;

use super::view::{arrivals, judge, observations, store_facts, ExecId, Frame, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{Shows, Trace};

pub const NAME: &str = "completed_needs_verified_result";

/// Whether a frame to the executor carries a task's result.
pub fn carries_result(f: &Frame) -> bool {
    match f.shows {
        Some(Shows::Outcome) => matches!(f.exchange, ExchangeKind::Fetch | ExchangeKind::Submit),
        Some(Shows::Task { result, .. }) => *result,
        _ => false,
    }
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
    // Per node: (arrival time, executor) of every intact result that reached an executor.
    let mut results: BTreeMap<&str, Vec<(u64, ExecId)>> = BTreeMap::new();
    for a in arrivals(v.trace) {
        if let Some(node) = a.node.filter(|_| a.intact() && carries_result(&a)) {
            results
                .entry(node)
                .or_default()
                .push((a.arrives_at_ms.unwrap_or(a.t_ms), a.exec));
        }
    }
    // Who accepted completed, and when, by their own report (the acceptance being judged).
    let mut acceptors: BTreeMap<&str, (u64, ExecId)> = BTreeMap::new();
    for (t, exec, obs) in observations(v.trace) {
        if let Observation::Accepted {
            node,
            terminal: TerminalState::Completed,
            ..
        } = obs
        {
            acceptors.entry(node.as_str()).or_insert((t, exec));
        }
    }
    // Every report of a completed acceptance, by whoever made it.
    for (t, exec, obs) in observations(v.trace) {
        if let Observation::Accepted {
            node,
            terminal: TerminalState::Completed,
            ..
        } = obs
        {
            let had = results
                .get(node.as_str())
                .is_some_and(|l| l.iter().any(|(arrived, e)| *arrived <= t && *e == exec));
            if !had {
                out.push(bad(
                    node,
                    format!(
                        "executor epoch {} incarnation {} reported accepting completed at {t} ms without an intact result of its own",
                        exec.0, exec.1
                    ),
                ));
            }
        }
    }
    let stored = store_facts(v.trace);
    let mut judged: Vec<&str> = vec![];
    for r in v
        .ledger
        .receipts
        .iter()
        .filter(|r| r.terminal_state == TerminalState::Completed)
    {
        let node = r.call_node_id.as_str();
        judged.push(node);
        let acceptor = acceptors.get(node);
        // The moment the acceptance happened: the store's, or the report's when the world never
        // saw the receipt before the end.
        let at = stored
            .get(node)
            .map(|(t, _)| *t)
            .or(acceptor.map(|(t, _)| *t))
            .unwrap_or(u64::MAX);
        let got = results.get(node).is_some_and(|l| {
            l.iter().any(|(arrived, exec)| {
                *arrived <= at && acceptor.is_none_or(|(_, who)| who == exec)
            })
        });
        if !got {
            let who = acceptor
                .map(|(_, (e, i))| format!(" by executor epoch {e} incarnation {i}"))
                .unwrap_or_default();
            out.push(bad(
                node,
                format!(
                    "completed receipt {} accepted{who} at {at} ms, but no intact result of the node had reached that executor",
                    r.receipt_id
                ),
            ));
        }
        out.extend(digest_mismatch(v, r).map(|d| bad(node, d)));
    }
    for e in v
        .ledger
        .outbox
        .iter()
        .filter(|e| e.terminal_state == TerminalState::Completed)
    {
        let node = e.call_node_id.as_str();
        if !judged.contains(&node) && !results.contains_key(node) {
            out.push(bad(
                node,
                format!(
                    "completed outbox entry {} although no intact result of the node reached any executor",
                    e.receipt_id
                ),
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
            "receipt digest {ours} differs from the server's {theirs} (operation {})",
            r.operation_id.as_deref().unwrap_or("none")
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};
    use crate::trace::{Dir, NetVerdict};
    use toolop::record::LocalState::*;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn completion_accepted_from_a_status_read_is_caught() {
        // A result reply arrived earlier, but cut short; the executor says it was a fine result.
        let mut b = Tb::new();
        b.at(0)
            .submit("n1")
            .sent("n1", "submit")
            .recv("n1", "submit", "submitted")
            .moved("n1", &[Submitting, Working]);
        b.at(500).net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Fetch,
            NetVerdict::Truncated { to_bytes: 3 },
            Some(0),
            Some(Shows::Outcome),
        );
        b.obs(Observation::Received {
            node: "n1".into(),
            kind: "fetch",
            seq: 0,
            reply: "result",
            retry_after_ms: None,
        });
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
        assert_eq!(v.len(), 2, "the report and the receipt: {v:?}");
        assert!(v[0].detail.contains("without an intact result"), "{v:?}");
        assert!(v[1].detail.contains("no intact result"), "{v:?}");
    }

    #[test]
    fn a_restarted_executor_must_fetch_again() {
        let mut b = happy("n1", 0);
        b.exec(1, 2)
            .at(2_000)
            .accepted("n1", TerminalState::Completed, Some("d-n1"));
        // The receipt is incarnation 1's, which had its result; incarnation 2's report convicts it.
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("incarnation 2 reported"), "{v:?}");
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(10).recv("n1", "submit", "submitted");
        b.at(500).sent("n1", "fetch").recv("n1", "fetch", "result");
        b.exec(1, 2)
            .at(2_000)
            .accepted("n1", TerminalState::Completed, Some("d-n1"));
        b.record("n1", Accepted, Some("t-n1"));
        b.receipt("n1", Some("t-n1"), TerminalState::Completed, Some("d-n1"));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 2, "the report and the receipt: {v:?}");
        assert!(v[1].detail.contains("incarnation 2"), "{v:?}");
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
    fn a_completed_receipt_with_no_result_on_the_network_is_caught() {
        // The executor reports a result reply; the network never carried one.
        let mut b = Tb::new();
        b.at(0).submit("n1").obs(Observation::Received {
            node: "n1".into(),
            kind: "fetch",
            seq: 0,
            reply: "result",
            retry_after_ms: None,
        });
        b.moved("n1", &[Submitting, Accepted]);
        b.record("n1", Accepted, Some("t-n1"));
        b.receipt("n1", Some("t-n1"), TerminalState::Completed, Some("d"));
        // The receipt, and the outbox entry without any receipt judged for it.
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        b.ledger.receipts.clear();
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
