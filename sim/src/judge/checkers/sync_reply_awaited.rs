//! Always: a synchronous call is waited for as long as its tool promised. A tool that forbids
//! tasks and publishes a synchronous bound longer than the request timeout (`Begin`'s
//! `slow_sync_bounds_ms`) may take that long to answer; a call of it whose reply reached the
//! process that sent it, within the bound from the send, must not have been handed to a person
//! before the reply came. A synchronous call has no operation to look up, so an executor that
//! gives up at its request timeout hands a call that is about to answer (and whose tool may
//! already have acted) to manual reconciliation: `no_false_unknown` judges operations and cannot
//! see it.
//!
//! Judged from the network (the submission, and its reply's arrival at the sender's
//! connection: a reply cut by a dropped connection never arrives), the store (the hand-off) and
//! the world's epochs (a reply reaching a fenced process of an older epoch counts for nothing),
//! never from the executor's report.

use super::view::{arrivals, judge, newest_epoch_at, newest_epochs, sends, store_facts, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{StoreFact, Trace};

pub const NAME: &str = "sync_reply_awaited";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let bounds = &v.config.slow_sync_bounds_ms;
    if bounds.is_empty() {
        return vec![];
    }
    let epochs = newest_epochs(v.trace);
    let replies = arrivals(v.trace);
    let mut out = vec![];
    for (node, (handed_ms, fact)) in store_facts(v.trace) {
        if fact != StoreFact::Reconcile {
            continue;
        }
        let Some(bound_ms) = v.tool_of(&node).and_then(|t| bounds.get(t)).copied() else {
            continue;
        };
        let came = sends(v.trace)
            .filter(|s| s.exchange == ExchangeKind::Submit && s.node == Some(node.as_str()))
            .filter(|s| s.t_ms <= handed_ms)
            .find_map(|s| {
                let id = s.request_id?;
                replies
                    .iter()
                    .filter(|r| r.exec == s.exec && r.request_id == Some(id))
                    .filter_map(|r| r.arrives_at_ms.map(|at| (s.t_ms, at, r.exec)))
                    .find(|(sent, at, exec)| {
                        *at <= sent + bound_ms
                            && *at > handed_ms
                            && exec.0 >= newest_epoch_at(&epochs, *at)
                    })
            });
        if let Some((sent_ms, at_ms, _)) = came {
            out.push(Violation {
                checker: NAME,
                node: Some(node.clone()),
                detail: format!(
                    "the synchronous call sent at {sent_ms} ms was handed to a person at {handed_ms} ms, though its reply reached the sender at {at_ms} ms, within the tool's bound of {bound_ms} ms"
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::{Dir, NetVerdict, What};

    /// n1 calls "tool" (bound 30 s, longer than the request timeout) synchronously at 0; its
    /// reply arrives at `reply_ms`; it is handed to a person at `handed_ms`.
    fn slow_call(reply_ms: u64, handed_ms: u64) -> Tb {
        let mut b = Tb::new();
        b.config.slow_sync_bounds_ms.insert("tool".into(), 30_000);
        b.at(0).submit("n1");
        b.net(
            Dir::ToServer,
            "n1",
            ExchangeKind::Submit,
            NetVerdict::Deliver,
            None,
            None,
        );
        b.at(reply_ms - 10).net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Submit,
            NetVerdict::Deliver,
            Some(10),
            None,
        );
        b.at(handed_ms).push(What::Store {
            node: "n1".into(),
            fact: StoreFact::Reconcile,
        });
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        // Handed off after the reply came (the reply said nothing usable), or the reply came
        // after the bound (the tool broke its promise): no violation.
        assert_eq!(check(&slow_call(20_000, 20_500).build(SETTLED)), vec![]);
        assert_eq!(check(&slow_call(31_000, 30_500).build(SETTLED)), vec![]);
        // A tool whose bound is within the request timeout is not listed: not judged.
        let mut b = slow_call(20_000, 10_000);
        b.config.slow_sync_bounds_ms.clear();
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_call_handed_off_before_its_reply_within_the_bound_is_caught() {
        let v = check(&slow_call(20_000, 10_000).build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains(
                "handed to a person at 10000 ms, though its reply reached the sender at 20000 ms"
            ),
            "{}",
            v[0].detail
        );
    }
}
