//! Always: once a call node has settled, nothing more is sent for it. After the world found the
//! node's receipt (or its hand-off to manual reconciliation) in the store, the network carries
//! no frame any executor sends for that node: no re-submission, re-fetch, poll or cancel. The
//! settlement is the world's record (`What::Store`, written the moment the world sees the
//! commit, before anything the executor sends next), the sends are what the network carried;
//! trace order decides "after", so a send in the same millisecond as the commit still counts.
//!
//! One exception: an answer to an input request that reached the executor (the server asked; a
//! server request is never left unanswered). Answers are counted per process: one per request
//! that reached it, whenever it arrived and whichever process settled the node. A process reads
//! its inputs in its own order and at its own pace: a request that reached a busy replica before
//! another process settled the node is declined after (`mcp_replicas` seeds 53695 and 74919), a
//! request that arrived during the settling commit is read after it (`mcp_sqlite` seeds 24 and
//! 326), and one that arrived a millisecond before the reply that settled the node may be read
//! after that reply (`mcp_replicas` seed 2551). What stays caught: any other send, and an answer
//! with no request left to answer.

use std::collections::{BTreeMap, BTreeSet};

use super::view::{judge, ExecId, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{Dir, NetVerdict, StoreFact, Trace, What};

pub const NAME: &str = "no_send_after_receipt";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    // When each input request reached the executor, per node: a frame's arrival, and its
    // duplicate's (a replayed request arrives twice, the second copy possibly after settling).
    let mut asked: BTreeMap<(&str, ExecId), Vec<u64>> = BTreeMap::new();
    for e in &v.trace.events {
        if let What::Net {
            dir: Dir::ToExecutor,
            exchange: ExchangeKind::ServerRequest,
            node: Some(node),
            arrives_after_ms: Some(after),
            verdict,
            epoch,
            incarnation,
            ..
        } = &e.what
        {
            let arrivals = asked
                .entry((node.as_str(), (*epoch, *incarnation)))
                .or_default();
            arrivals.push(e.t_ms + after);
            if let NetVerdict::Duplicated { after_ms } = verdict {
                arrivals.push(e.t_ms + after_ms);
            }
        }
    }
    let mut settled: BTreeMap<&str, (u64, StoreFact)> = BTreeMap::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for e in &v.trace.events {
        match &e.what {
            What::Store { node, fact } => {
                settled.entry(node.as_str()).or_insert((e.t_ms, *fact));
            }
            What::Net {
                dir: Dir::ToServer,
                exchange,
                node: Some(node),
                epoch,
                incarnation,
                ..
            } => {
                let node = node.as_str();
                let exec = (*epoch, *incarnation);
                let settled_at = settled.get(node);
                if *exchange == ExchangeKind::Answer {
                    // One answer per request that reached this process before the answer left.
                    let answered = asked.get_mut(&(node, exec)).and_then(|arrivals| {
                        let i = arrivals.iter().position(|&t| t <= e.t_ms)?;
                        Some(arrivals.remove(i))
                    });
                    if answered.is_some() {
                        continue;
                    }
                }
                let Some((at, fact)) = settled_at else {
                    continue;
                };
                if reported.insert(node) {
                    let what = match fact {
                        StoreFact::Receipt { terminal } => format!("{} receipt", terminal.name()),
                        StoreFact::Reconcile => "hand-off to manual reconciliation".to_string(),
                    };
                    out.push(Violation {
                        checker: NAME,
                        node: Some(node.to_string()),
                        detail: format!(
                            "executor epoch {epoch} incarnation {incarnation} sent {} at {} ms, after the store showed the node's {what} at {at} ms",
                            exchange.name(),
                            e.t_ms
                        ),
                    });
                }
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
    use crate::trace::Shows;

    /// n1's round-1 input request, reaching the builder's current executor 5 ms after `t_ms`.
    fn request(b: &mut Tb, t_ms: u64, verdict: NetVerdict) {
        let shows = Shows::Input {
            task: "t-n1".into(),
            round: 1,
        };
        let kind = ExchangeKind::ServerRequest;
        b.at(t_ms)
            .net(Dir::ToExecutor, "n1", kind, verdict, Some(5), Some(shows));
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        // An input request that arrives after the receipt may be answered (declined).
        let mut b = happy("n1", 0);
        request(&mut b, 5_000, NetVerdict::Deliver);
        b.at(5_010).net_out("n1", ExchangeKind::Answer);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn each_copy_of_a_replayed_input_request_may_be_answered_once() {
        // Delivered before the receipt (1020 ms) and again 4500 ms later: the second copy
        // reaches the executor after settling, and one answer to it is no violation; nor is
        // one to the first copy, read late.
        let mut b = happy("n1", 0);
        request(&mut b, 500, NetVerdict::Duplicated { after_ms: 4_500 });
        b.at(5_000).net_out("n1", ExchangeKind::Answer);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        b.at(5_100).net_out("n1", ExchangeKind::Answer);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A third answer has no copy left to answer.
        b.at(5_200).net_out("n1", ExchangeKind::Answer);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_fetch_after_the_receipt_is_caught_even_in_the_same_millisecond() {
        let mut b = happy("n1", 0);
        // The happy path's receipt is stored at 1020 ms; a fetch leaves in that millisecond,
        // after the commit, and the executor does not report it.
        b.at(1_020).net_out("n1", ExchangeKind::Fetch);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail
                .contains("sent fetch at 1020 ms, after the store showed the node's completed receipt at 1020 ms"),
            "{v:?}"
        );
    }

    #[test]
    fn any_send_after_a_hand_off_or_from_another_executor_is_caught() {
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.exec(2, 2)
            .at(9_000)
            .net_out("n1", ExchangeKind::Lookup)
            .net_out("n1", ExchangeKind::Poll);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "one violation per node: {v:?}");
        assert!(
            v[0].detail.contains("epoch 2 incarnation 2 sent lookup"),
            "{v:?}"
        );
        // An unasked answer after the receipt is a send like any other.
        let mut b = happy("n1", 0);
        b.at(5_010).net_out("n1", ExchangeKind::Answer);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_request_that_arrived_during_the_settling_commit_may_be_answered() {
        // mcp_sqlite seed 326: the receipt's commit began at 950 ms and the world held it until
        // 1020 ms; a request that arrived at 1000 ms was read after it, and answered.
        let build = |delay_ms: u64| {
            let mut b = happy("n1", 0);
            request(&mut b, 995, NetVerdict::Deliver);
            let mut w = crate::judge::checkers::ledger_writes::build::write("n1", 1, 1, 4);
            w.delay_ms = delay_ms;
            b.at(1_020)
                .push(crate::judge::checkers::ledger_writes::build::ev(w));
            b.at(1_020).net_out("n1", ExchangeKind::Answer);
            b.build(SETTLED)
        };
        assert_eq!(check(&build(70)), vec![]);
        // An instant commit: the request was there before it, and read after it (mcp_replicas
        // seed 2551: the reply that settled the node was read first). Still one answer owed.
        assert_eq!(check(&build(0)), vec![]);
    }

    #[test]
    fn another_process_may_decline_a_request_it_got_before_the_settlement() {
        // mcp_replicas seed 53695: a request reached a busy replica (1, 1000) at 905 ms; the
        // primary (1, 1) settled the node at 1020 ms; the replica declined the request at
        // 1100 ms. The same late answer from the settling process is owed too; a second answer
        // from either is caught.
        let build = |answerer: (u64, u32), answers: u32| {
            let mut b = happy("n1", 0);
            b.exec(1, answerer.1);
            request(&mut b, 900, NetVerdict::Deliver);
            let w = crate::judge::checkers::ledger_writes::build::write("n1", 1, 1, 4);
            b.exec(1, 1)
                .at(1_020)
                .push(crate::judge::checkers::ledger_writes::build::ev(w));
            b.exec(answerer.0, answerer.1);
            for i in 0..answers {
                b.at(1_100 + u64::from(i))
                    .net_out("n1", ExchangeKind::Answer);
            }
            b.build(SETTLED)
        };
        assert_eq!(check(&build((1, 1_000), 1)), vec![]);
        assert_eq!(check(&build((1, 1_000), 2)).len(), 1);
        assert_eq!(check(&build((1, 1), 1)), vec![]);
        assert_eq!(check(&build((1, 1), 2)).len(), 1);
    }
}
