//! Always: Retry-After is honoured. When an executor applies a 429 (`rate_limited`) or 503
//! (`unavailable`) with a Retry-After of `d` ms, received at `t` for the newest request it had
//! out for a call node, its next request for that node does not repeat the refused kind (the
//! next `poll` after a refused poll, the next `fetch` after a refused fetch) before `t + d`.
//! Judged per executor incarnation (a restarted process starts over) and with no slack.
//!
//! Only the next request counts: once the executor sent something else for the node (a cancel
//! the caller asked for, an input response), the answer to that drives what follows.

use std::collections::BTreeMap;

use toolop::runner::Observation;

use super::view::{judge, observations, reply_event, ExecId, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "retry_after_honoured";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// A refusal waiting to be applied, or applied and being watched.
#[derive(Clone, Debug)]
struct Refusal {
    kind: &'static str,
    reply: &'static str,
    at_ms: u64,
    retry_after_ms: u64,
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    let mut last_sent: BTreeMap<(ExecId, &str), u64> = BTreeMap::new();
    let mut received: BTreeMap<(ExecId, &str), Refusal> = BTreeMap::new();
    let mut watching: BTreeMap<(ExecId, &str), Refusal> = BTreeMap::new();
    for (t, exec, obs) in observations(v.trace) {
        match obs {
            Observation::Sent {
                node, kind, seq, ..
            } => {
                let key = (exec, node.as_str());
                if let Some(r) = watching.remove(&key) {
                    let until = r.at_ms.saturating_add(r.retry_after_ms);
                    if *kind == r.kind && t < until {
                        out.push(Violation {
                            checker: NAME,
                            node: Some(node.clone()),
                            detail: format!(
                                "executor epoch {} incarnation {} sent {kind} at {t} ms; the {} at {} ms asked it to wait {} ms (until {until} ms)",
                                exec.0, exec.1, r.reply, r.at_ms, r.retry_after_ms
                            ),
                        });
                    }
                }
                last_sent.insert(key, *seq);
            }
            Observation::Received {
                node,
                kind,
                seq,
                reply,
                retry_after_ms: Some(d),
            } if matches!(*reply, "rate_limited" | "unavailable") => {
                let key = (exec, node.as_str());
                if last_sent.get(&key) == Some(seq) {
                    received.insert(
                        key,
                        Refusal {
                            kind,
                            reply,
                            at_ms: t,
                            retry_after_ms: *d,
                        },
                    );
                }
            }
            Observation::Moved { node, event, .. } | Observation::Stayed { node, event } => {
                let key = (exec, node.as_str());
                if let Some(r) = received.remove(&key) {
                    if *event == reply_event(r.kind, r.reply) {
                        watching.insert(key, r);
                    }
                }
            }
            Observation::Rejected { node, .. }
            | Observation::Refused { node, .. }
            | Observation::LedgerRefused { node, .. } => {
                received.remove(&(exec, node.as_str()));
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

    /// n1 polls (seq 3) at 2000 ms and is told 429, retry after 5000 ms.
    fn refused(reply: &'static str) -> Tb {
        let mut b = happy("n1", 0);
        b.at(2_000).obs(Observation::Sent {
            node: "n1".into(),
            kind: "poll",
            seq: 3,
            rpc_id: Some(9),
        });
        b.at(2_010).obs(Observation::Received {
            node: "n1".into(),
            kind: "poll",
            seq: 3,
            reply,
            retry_after_ms: Some(5_000),
        });
        b.obs(Observation::Stayed {
            node: "n1".into(),
            event: format!("reply:poll:{reply}"),
        });
        b
    }

    fn poll_at(b: &mut Tb, t: u64, seq: u64) {
        b.at(t).obs(Observation::Sent {
            node: "n1".into(),
            kind: "poll",
            seq,
            rpc_id: None,
        });
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = refused("rate_limited");
        poll_at(&mut b, 7_010, 4);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Another request in between (a cancel the caller asked for) ends the wait.
        let mut b = refused("unavailable");
        b.at(2_500).obs(Observation::Sent {
            node: "n1".into(),
            kind: "cancel",
            seq: 4,
            rpc_id: None,
        });
        poll_at(&mut b, 3_000, 5);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Another incarnation starts over.
        let mut b = refused("rate_limited");
        b.exec(1, 2);
        poll_at(&mut b, 3_000, 4);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_poll_before_retry_after_is_caught() {
        for reply in ["rate_limited", "unavailable"] {
            let mut b = refused(reply);
            poll_at(&mut b, 7_009, 4);
            let v = check(&b.build(SETTLED));
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].detail.contains("until 7010 ms"), "{v:?}");
        }
    }

    #[test]
    fn a_refusal_not_applied_is_not_judged() {
        // An answer to an older request, or one the executor rejected, asks nothing of it.
        let mut b = refused("rate_limited");
        b.at(2_005).obs(Observation::Sent {
            node: "n1".into(),
            kind: "cancel",
            seq: 4,
            rpc_id: None,
        });
        poll_at(&mut b, 3_000, 5);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        let mut b = happy("n1", 0);
        b.at(2_000).obs(Observation::Sent {
            node: "n1".into(),
            kind: "poll",
            seq: 3,
            rpc_id: None,
        });
        b.at(2_010).obs(Observation::Received {
            node: "n1".into(),
            kind: "poll",
            seq: 3,
            reply: "rate_limited",
            retry_after_ms: Some(5_000),
        });
        b.obs(Observation::Rejected {
            node: "n1".into(),
            event: "reply:poll:rate_limited".into(),
            reason: toolop::core::Rejection::StaleEpoch {
                event_epoch: 1,
                record_epoch: 2,
            },
        });
        poll_at(&mut b, 3_000, 4);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }
}
