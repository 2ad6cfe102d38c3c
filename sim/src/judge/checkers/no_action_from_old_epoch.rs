//! Always: once an executor of a newer execution epoch has taken a call node over, no executor
//! of an older epoch acts on that node again. A correct old executor only rejects what still
//! reaches it (stale epoch). Two kinds of evidence, the world's first:
//! - the network: the newer epoch's first frame for the node marks the takeover (it resumed the
//!   record, committing its epoch, before it sent anything); a frame for the node from an older
//!   epoch's connection after that is an action, unless it left within the drain allowance: a
//!   send the old executor decided before the takeover but its QPS limiter let out after it is
//!   its last word. The allowance is one window per `max_qps` call nodes, plus one
//!   ([`drain_allowance_ms`]): a queue holds at most one send per node.
//! - the executors' own reports, which may convict but never acquit: an older executor that
//!   reports applying an event (`Moved`, `Stayed`) or accepting an outcome after a newer
//!   epoch reported resuming the node.

use std::collections::{BTreeMap, BTreeSet};

use toolop::core::poll::QPS_WINDOW_MS;
use toolop::runner::Observation;

use super::view::{judge, observations, sends, ExecId, View, RESUME_EVENT};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "no_action_from_old_epoch";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// How long after a takeover an older executor's queued sends may still leave.
pub fn drain_allowance_ms(call_nodes: u32, max_qps: u32) -> u64 {
    (u64::from(call_nodes) / u64::from(max_qps.max(1)) + 1) * QPS_WINDOW_MS
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = world_evidence(v);
    // Per node: the newest epoch that resumed it, and when.
    let mut claimed: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut reported: BTreeSet<(ExecId, &str)> = BTreeSet::new();
    for (t, exec, obs) in observations(v.trace) {
        let node = match obs {
            Observation::Moved { node, .. }
            | Observation::Stayed { node, .. }
            | Observation::Accepted { node, .. } => node.as_str(),
            _ => continue,
        };
        if let Some(&(epoch, at)) = claimed.get(node) {
            if exec.0 < epoch && reported.insert((exec, node)) {
                let what = action_words(obs);
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!(
                        "executor epoch {} incarnation {} {what} at {t} ms, after epoch {epoch} resumed the node at {at} ms",
                        exec.0, exec.1
                    ),
                });
            }
        }
        if let Observation::Moved { event, .. } | Observation::Stayed { event, .. } = obs {
            if event == RESUME_EVENT && claimed.get(node).is_none_or(|&(e, _)| exec.0 > e) {
                claimed.insert(node, (exec.0, t));
            }
        }
    }
    out
}

/// What an action observation did, in words: made only for a violation's detail (made for
/// every observation, it cost more than the rest of the checker).
fn action_words(obs: &Observation) -> String {
    match obs {
        Observation::Moved { event, .. } => format!("moved the record ({event})"),
        Observation::Stayed { event, .. } => format!("applied {event}"),
        Observation::Accepted { terminal, .. } => format!("accepted {}", terminal.name()),
        // `violations` passes only the three actions above.
        _ => String::new(),
    }
}

/// Frames for a node from an older epoch after a newer epoch's first frame for it.
fn world_evidence(v: &View) -> Vec<Violation> {
    let allowance = drain_allowance_ms(v.call_nodes, v.max_qps);
    let mut out = vec![];
    // Per node: the newest epoch seen sending for it, and its first frame's time.
    let mut taken: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut reported: BTreeSet<(ExecId, &str)> = BTreeSet::new();
    for s in sends(v.trace) {
        let Some(node) = s.node else { continue };
        match taken.get(node).copied() {
            Some((epoch, _)) if s.exec.0 > epoch => {
                taken.insert(node, (s.exec.0, s.t_ms));
            }
            None => {
                taken.insert(node, (s.exec.0, s.t_ms));
            }
            Some((epoch, at)) if s.exec.0 < epoch && s.t_ms > at + allowance => {
                if reported.insert((s.exec, node)) {
                    out.push(Violation {
                        checker: NAME,
                        node: Some(node.to_string()),
                        detail: format!(
                            "executor epoch {} incarnation {} sent {} for the node at {} ms; epoch {epoch} took it over at {at} ms (drain allowance {allowance} ms)",
                            s.exec.0,
                            s.exec.1,
                            s.exchange.name(),
                            s.t_ms
                        ),
                    });
                }
            }
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::What;
    use toolop::record::LocalState::*;
    use toolop::record::TerminalState;

    /// Epoch 1 submits n1; a rollback starts epoch 2, which resumes it and finishes it. The
    /// old executor lingers: its late reply is rejected (stale epoch), and a send it decided
    /// before the takeover leaves after it.
    fn rollback() -> Tb {
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(10)
            .recv("n1", "submit", "submitted")
            .moved("n1", &[Submitting, Working]);
        b.at(1_000).obs(Observation::Stayed {
            node: "n1".into(),
            event: "timer:poll_due".into(),
        });
        b.at(2_000).push(What::World {
            action: crate::trace::WorldAction::Rollback {
                incarnation: 2,
                epoch: 2,
            },
        });
        b.exec(2, 2).at(2_050).obs(Observation::Stayed {
            node: "n1".into(),
            event: "resume".into(),
        });
        b.exec(1, 1).at(2_060).sent("n1", "poll");
        b.at(2_100).recv("n1", "poll", "status");
        b.obs(Observation::Rejected {
            node: "n1".into(),
            event: "reply:poll:status".into(),
            reason: toolop::core::Rejection::StaleEpoch {
                event_epoch: 1,
                record_epoch: 2,
            },
        });
        b.exec(2, 2).at(3_000).sent("n1", "poll");
        b.at(3_010)
            .recv("n1", "poll", "status")
            .moved("n1", &[Working, TerminalObserved, FetchingResult])
            .sent("n1", "fetch");
        b.at(3_020)
            .recv("n1", "fetch", "result")
            .moved("n1", &[FetchingResult, Accepted]);
        b.accepted("n1", TerminalState::Completed, Some("d-n1"));
        b.record("n1", Accepted, Some("t-n1"));
        b.receipt("n1", Some("t-n1"), TerminalState::Completed, Some("d-n1"));
        b.task(
            "t-n1",
            "n1",
            Some(crate::fake::truth::TaskStatus::Completed),
            Some("d-n1"),
            Some(2_900),
        );
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        assert_eq!(check(&rollback().build(SETTLED)), vec![]);
        // A restart in the same epoch takes nothing from anyone.
        let mut b = rollback();
        b.exec(2, 3).at(5_000).obs(Observation::Stayed {
            node: "n1".into(),
            event: "resume".into(),
        });
        b.exec(2, 2).at(5_001).obs(Observation::Stayed {
            node: "n1".into(),
            event: "caller_detached".into(),
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn an_old_executor_acting_after_the_takeover_is_caught() {
        let mut b = rollback();
        // The old executor applies its late reply instead of rejecting it, and accepts.
        b.exec(1, 1)
            .at(2_200)
            .moved("n1", &[Working, TerminalObserved]);
        b.at(2_300)
            .accepted("n1", TerminalState::Completed, Some("d-n1"));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "one violation per executor and node: {v:?}");
        assert!(
            v[0].detail
                .contains("epoch 1 incarnation 1 moved the record"),
            "{v:?}"
        );
        assert!(
            v[0].detail.contains("epoch 2 resumed the node at 2050 ms"),
            "{v:?}"
        );
    }

    #[test]
    fn an_old_executor_that_keeps_sending_is_caught_on_the_network_whatever_it_reports() {
        // The old executor reports nothing at all, but its polls keep reaching the network.
        let mut b = rollback();
        b.exec(1, 1)
            .at(4_200)
            .net_out("n1", crate::fake::codec::ExchangeKind::Poll);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("took it over at 3000 ms"), "{v:?}");
        // Within the drain allowance (one node at 10 QPS: one window) a queued send may leave.
        let mut b = rollback();
        b.exec(1, 1)
            .at(4_000)
            .net_out("n1", crate::fake::codec::ExchangeKind::Poll);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn before_the_takeover_the_old_executor_may_act() {
        let mut b = rollback();
        b.exec(1, 1).at(2_040).obs(Observation::Stayed {
            node: "n1".into(),
            event: "timer:poll_due".into(),
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }
}
