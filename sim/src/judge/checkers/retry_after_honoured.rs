//! Always: Retry-After is honoured. When a 429 or 503 with a Retry-After of `d` ms reaches an
//! executor at `t` (the value the fault layer drew and the network carried, never the value as
//! the executor read it), answering the newest request that executor had out for a call node,
//! its next request for that node does not repeat the refused exchange (the next poll after a
//! refused poll, the next fetch after a refused fetch) before `t + d`. Judged per executor
//! incarnation (a restarted process starts over) and with no slack; an executor of an epoch
//! older than the newest is judged by `no_action_from_old_epoch` instead.
//!
//! Only the next request counts: once the executor sent something else for the node (a cancel
//! the caller asked for, an input response), the answer to that drives what follows.

use std::collections::BTreeMap;

use super::view::{arrivals, judge, newest_epoch_at, newest_epochs, sends, ExecId, Frame, View};
use super::Violation;
use crate::trace::{Shows, Trace};

pub const NAME: &str = "retry_after_honoured";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    let mut sent: BTreeMap<(ExecId, &str), Vec<Frame>> = BTreeMap::new();
    for f in sends(v.trace) {
        if let Some(node) = f.node {
            sent.entry((f.exec, node)).or_default().push(f);
        }
    }
    let epochs = newest_epochs(v.trace);
    for a in arrivals(v.trace) {
        let (
            Some(node),
            Some(&Shows::Throttled {
                status,
                retry_after_ms,
            }),
        ) = (a.node, a.shows)
        else {
            continue;
        };
        let at = a.arrives_at_ms.unwrap_or(a.t_ms);
        if a.exec.0 < newest_epoch_at(&epochs, at) {
            continue;
        }
        let Some(mine) = sent.get(&(a.exec, node)) else {
            continue;
        };
        // The refused request, and nothing newer from this executor for the node before the
        // refusal arrived.
        let Some(i) = mine.iter().rposition(|s| {
            s.t_ms <= a.t_ms
                && s.exchange == a.exchange
                && (a.request_id.is_none() || s.request_id == a.request_id)
        }) else {
            continue;
        };
        if mine[i + 1..].iter().any(|s| s.t_ms <= at) {
            continue;
        }
        let until = at.saturating_add(retry_after_ms);
        if let Some(next) = mine[i + 1..].first() {
            if next.exchange == a.exchange && next.t_ms < until {
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!(
                        "executor epoch {} incarnation {} sent {} at {} ms; the {status} that reached it at {at} ms asked it to wait {retry_after_ms} ms (until {until} ms)",
                        a.exec.0,
                        a.exec.1,
                        next.exchange.name(),
                        next.t_ms
                    ),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::codec::ExchangeKind;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};
    use crate::trace::{Dir, NetVerdict};
    use toolop::runner::Observation;

    /// n1 polls at 2000 ms; a replica answers 429/503 with Retry-After 5000 ms, which reaches the
    /// executor at 2010 ms. The executor's own report says it read no Retry-After at all.
    fn refused(status: u16) -> Tb {
        let mut b = happy("n1", 0);
        b.at(2_000).sent("n1", "poll");
        b.net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Poll,
            NetVerdict::Deliver,
            Some(10),
            Some(Shows::Throttled {
                status,
                retry_after_ms: 5_000,
            }),
        );
        b.at(2_010).obs(Observation::Received {
            node: "n1".into(),
            kind: "poll",
            seq: 3,
            reply: if status == 429 {
                "rate_limited"
            } else {
                "unavailable"
            },
            retry_after_ms: None,
        });
        b
    }

    fn poll_at(b: &mut Tb, t: u64) {
        b.at(t).sent("n1", "poll");
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = refused(429);
        poll_at(&mut b, 7_010);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Another request in between (a cancel the caller asked for) ends the wait.
        let mut b = refused(503);
        b.at(2_500).sent("n1", "cancel");
        poll_at(&mut b, 3_000);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Another incarnation starts over.
        let mut b = refused(429);
        b.exec(1, 2);
        poll_at(&mut b, 3_000);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_poll_before_the_network_s_retry_after_is_caught_whatever_the_executor_read() {
        for status in [429, 503] {
            let mut b = refused(status);
            poll_at(&mut b, 7_009);
            let v = check(&b.build(SETTLED));
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].detail.contains("until 7010 ms"), "{v:?}");
        }
    }

    #[test]
    fn a_refusal_of_an_older_request_asks_nothing() {
        // A poll left after the refused one and before the refusal arrived: the refusal does
        // not answer the newest request.
        let mut b = happy("n1", 0);
        b.at(2_000).sent("n1", "poll");
        b.net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Poll,
            NetVerdict::Deliver,
            Some(10),
            Some(Shows::Throttled {
                status: 429,
                retry_after_ms: 5_000,
            }),
        );
        b.at(2_005).sent("n1", "cancel");
        poll_at(&mut b, 3_000);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }
}
