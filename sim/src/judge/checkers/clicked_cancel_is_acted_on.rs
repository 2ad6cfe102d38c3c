//! Always: a cancel the caller clicked is acted on. Once the caller clicked cancel on a call node
//! (the caller's record), whenever a reply reaches the executor showing the node's operation
//! still running, a cancel for the node leaves that executor on the network within the act
//! bound ([`act_bound_ms`]) of that reply's arrival, unless one already left after the click. A
//! terminal state the server had already reached supersedes the click: a reply showing the
//! operation ended asks for nothing, nor does an unsolicited status notification (advisory: the
//! executor keeps to its own reads), and neither does a stale reply showing it running when the
//! ground truth says it had ended by then. Replies that reach an executor of an older epoch, or
//! one that goes down or is fenced by a rollback within the bound, ask nothing of it (the next
//! process is judged on its own replies), and nothing is asked once the store shows the node
//! settled. A commit the world
//! holds (`ledger_commit_ms`, a slow commit) while the bound runs, of the judged process or of
//! any process about the node, extends it to the bound after that commit lands (or would have
//! landed, for a process that died inside it): a process acts one event at a time, and a click
//! another process took shows in the ledger only then. An end the server reached before such
//! a hold let go supersedes the click, as an end the reply showed would.
//!
//! An operator's cancel request in the ledger (`cancel_request`, as `toolop cancel NODE` writes
//! it) is judged as a click from the executors' next look (`cancel_request_check_ms` after it),
//! and every process knows of it (they all look at the ledger); a cancel sent since the request
//! acts on it.
//!
//! This catches a click that is dropped on the way (for instance remembered while the operation
//! id is unknown and then forgotten when it becomes known), which otherwise only shows
//! statistically, as a slow cancel.

use std::collections::{BTreeMap, BTreeSet};

use super::no_action_from_old_epoch::drain_allowance_ms;
use super::view::{
    arrivals, caller_times, down_times, held_commits, judge, newest_epoch_at, newest_epochs, sends,
    store_facts, RequestTimes, View,
};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{CallerAction, Shows, Trace, What, WorldAction};
use toolop::record::LocalState;

pub const NAME: &str = "clicked_cancel_is_acted_on";

/// How long after learning that the operation still runs the executor has to put the cancel on
/// the network: it acts at once, so only its QPS queue stands between (the same allowance as a
/// queue drain, one window per `max_qps` call nodes plus one).
pub fn act_bound_ms(call_nodes: u32, max_qps: u32) -> u64 {
    drain_allowance_ms(call_nodes, max_qps)
}

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let bound = act_bound_ms(v.call_nodes, v.max_qps);
    let mut clicks = caller_times(v.trace, CallerAction::Cancel);
    for (node, t) in caller_times(v.trace, CallerAction::Recancel) {
        clicks.entry(node).or_insert(t);
    }
    // An operator's request in the ledger reaches the executor at its next look: from then it
    // is judged as a click. A cancel sent since the request counts as acting on it.
    let look_ms = v.config.cancel_request_check_ms.unwrap_or(0);
    let requested = caller_times(v.trace, CallerAction::CancelRequest);
    for (node, t) in &requested {
        clicks.entry(node.clone()).or_insert(t + look_ms);
    }
    let asked_at = |node: &str, clicked: u64| requested.get(node).copied().unwrap_or(clicked);
    let mut cancels: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for s in sends(v.trace).filter(|s| s.exchange == ExchangeKind::Cancel) {
        if let Some(node) = s.node {
            cancels.entry(node).or_default().push(s.t_ms);
        }
    }
    let down = down_times(v.trace);
    // A commit the world holds delays every send of its process after it, the cancel
    // included; and a click that reached another process (a replica's twin) shows in the
    // ledger only once that process's commit of it lands.
    let writes = held_commits(v.trace);
    // A reply past its request's timeout answers a request the executor had given up on.
    let times = RequestTimes::of(v);
    let holds = ClickHolders::of(v.trace, &clicks, &requested);
    let epochs = newest_epochs(v.trace);
    let settled = store_facts(v.trace);
    let mut out = vec![];
    let mut judged: Vec<&str> = vec![];
    for a in arrivals(v.trace) {
        let (Some(node), Some(Shows::Task { task, status, .. })) = (a.node, a.shows) else {
            continue;
        };
        let Some(&clicked) = clicks.get(node) else {
            continue;
        };
        let at = a.arrives_at_ms.unwrap_or(a.t_ms);
        let Some(t) = v.truth.tasks.get(task).filter(|t| t.call_node == node) else {
            continue;
        };
        let ended_by_then = t.terminal_at_ms.is_some_and(|e| e <= at);
        // A status notification is advisory (MCP 2025-11-25 section 7): the executor keeps to
        // its own reads, and is judged on their replies. A reply that came after its request's
        // timeout was never read (mcp_sqlite seed 21982: a poll's reply held 15 s, dropped as
        // nobody's); a submission may be given longer, so it is judged whenever it came.
        let in_time = !times.past_timeout(&a);
        let relevant = at >= clicked
            && in_time
            && a.exchange != ExchangeKind::Notification
            && a.intact()
            && !status.is_terminal()
            && !ended_by_then
            && a.exec.0 >= newest_epoch_at(&epochs, at)
            && settled.get(node).is_none_or(|(s, _)| *s > at)
            && holds.knows(node, a.exec.1, at)
            && !judged.contains(&node);
        if !relevant {
            continue;
        }
        // The bound, extended past every commit the world held while it ran, of the judged
        // process, of any process about the node, or of any process that wrote the node (the
        // one that took the click acts on it, and a commit it is held in, whatever its node,
        // holds its sends: mcp_sqlite seed 5).
        let writers: Vec<(u64, u32)> = writes
            .iter()
            .filter(|w| w.node == node)
            .map(|w| w.exec)
            .collect();
        let mut until = at + bound;
        // When the last hold that extended the bound let go: the process could act from then.
        let mut held_until = at;
        for w in &writes {
            let involved = w.node == node || w.exec == a.exec || writers.contains(&w.exec);
            if involved && w.landed_ms > at && w.landed_ms.saturating_sub(w.delay_ms) < until {
                until = until.max(w.landed_ms + bound);
                held_until = held_until.max(w.landed_ms);
            }
        }
        // The server ended the operation while the world held the process: the end supersedes
        // the click as if the reply had shown it (mcp_ext_replicas seed 187463: the process
        // shown the task working froze 12.5 s; a replica saw it completed meanwhile, and the
        // thawed process rightly had nothing left to cancel).
        if t.terminal_at_ms.is_some_and(|e| e <= held_until) {
            continue;
        }
        // A process that went down before the cancel was due could not act: a commit the
        // world held for it (which extends the bound) may never land if it dies inside it
        // (mcp_replicas seed 1693: the reply arrived, the process waited on a held commit and
        // crashed before it landed).
        if down.get(&a.exec.1).is_some_and(|d| *d <= until) {
            continue;
        }
        // Likewise a process a rollback fenced before the cancel was due: from then on it may
        // not act, and the newer epoch's process is judged on its own replies (mcp_faults seed
        // 9329: the reply showing the task arrived, the process sat in a held commit, and the
        // rollback came before it could step again).
        if newest_epoch_at(&epochs, until) > a.exec.0 {
            continue;
        }
        let since = asked_at(node, clicked);
        let acted = cancels
            .get(node)
            .is_some_and(|c| c.iter().any(|&c| c >= since && c <= until));
        let settled_in_time = settled.get(node).is_some_and(|(s, _)| *s <= until);
        if !acted && !settled_in_time {
            judged.push(node);
            let asked = match requested.get(node) {
                Some(t) => format!("an operator requested a cancel in the ledger at {t} ms (executors look every {look_ms} ms)"),
                None => format!("the caller clicked cancel at {clicked} ms"),
            };
            out.push(Violation {
                checker: NAME,
                node: Some(node.to_string()),
                detail: format!(
                    "{asked}; at {at} ms executor epoch {} incarnation {} was shown task {task} {} and no cancel left by {} ms",
                    a.exec.0,
                    a.exec.1,
                    status.as_str(),
                    until
                ),
            });
        }
    }
    out
}

/// Which processes can know of a click. The world's load balancer hands a click to the primary
/// while it is up, and to the live replicas only while it is down; the caller repeats an
/// unrecorded click to every process that starts. A replica that got neither learns of the
/// click only from the ledger, once a process has written the node as cancelling: before
/// that it is not judged on the click (mcp_replicas seed 22: the primary took the click and
/// died before committing it; the replica never heard of it, and the caller's repeat reached
/// the restarted primary, which acted).
struct ClickHolders {
    replicas: BTreeMap<u32, u64>,
    /// Per node: the clicks and repeats that reached the replicas (the primary was down).
    to_replicas: BTreeMap<String, Vec<u64>>,
    /// Per node: when a write first recorded it as cancelling.
    recorded: BTreeMap<String, u64>,
    /// Per node: the first click.
    clicked: BTreeMap<String, u64>,
    /// Nodes an operator asked to cancel through the ledger: every process looks there.
    requested: BTreeSet<String>,
}

impl ClickHolders {
    fn of(
        trace: &Trace,
        clicks: &BTreeMap<String, u64>,
        requested: &BTreeMap<String, u64>,
    ) -> ClickHolders {
        let mut replicas = BTreeMap::new();
        let mut to_replicas: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut recorded = BTreeMap::new();
        let mut primary_down = false;
        for e in &trace.events {
            match &e.what {
                What::World { action } => match action {
                    WorldAction::ReplicaStart { incarnation, .. } => {
                        replicas.insert(*incarnation, e.t_ms);
                    }
                    WorldAction::ExecutorDown { incarnation, .. }
                        if !replicas.contains_key(incarnation) =>
                    {
                        primary_down = true;
                    }
                    WorldAction::ExecutorRestart { .. } | WorldAction::Rollback { .. } => {
                        primary_down = false;
                    }
                    _ => {}
                },
                What::Caller {
                    action: CallerAction::Cancel | CallerAction::Recancel,
                    node,
                } if primary_down => {
                    to_replicas.entry(node.clone()).or_default().push(e.t_ms);
                }
                What::Ledger { write } if write.state == LocalState::CancelRequested => {
                    recorded.entry(write.node.clone()).or_insert(e.t_ms);
                }
                _ => {}
            }
        }
        ClickHolders {
            replicas,
            to_replicas,
            recorded,
            clicked: clicks.clone(),
            requested: requested.keys().cloned().collect(),
        }
    }

    /// Whether `incarnation` can know of `node`'s click at `at_ms`.
    fn knows(&self, node: &str, incarnation: u32, at_ms: u64) -> bool {
        let Some(&started) = self.replicas.get(&incarnation) else {
            return true;
        };
        if self.requested.contains(node) {
            return true;
        }
        let clicked = self.clicked.get(node).copied().unwrap_or(u64::MAX);
        started >= clicked
            || self
                .to_replicas
                .get(node)
                .is_some_and(|c| c.iter().any(|&t| t <= at_ms))
            || self.recorded.get(node).is_some_and(|&t| t <= at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::truth::TaskStatus;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::series::faults::FaultKind;
    use crate::trace::FaultDetail;
    use toolop::record::LocalState::*;
    use toolop::record::TerminalState;

    fn working(node: &str) -> Shows {
        Shows::Task {
            task: format!("t-{node}"),
            status: TaskStatus::Working,
            poll_interval_ms: None,
            input_round: None,
            ttl_ms: None,
            result: false,
        }
    }

    /// n1 is clicked while its submission is out; the reply naming the task arrives later.
    fn clicked_early() -> Tb {
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(100).caller(CallerAction::Cancel, "n1");
        b.at(5_000)
            .recv_shows("n1", "submit", "submitted", working("n1"))
            .moved("n1", &[Submitting, Working]);
        b.task("t-n1", "n1", Some(TaskStatus::Cancelled), None, Some(9_000));
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = clicked_early();
        b.at(5_000).sent("n1", "cancel");
        b.at(5_040).recv("n1", "cancel", "cancel_ack").accepted(
            "n1",
            TerminalState::Cancelled,
            None,
        );
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // An executor that goes down right after the reply is not asked to act.
        let mut b = clicked_early();
        b.at(5_001).push(What::World {
            action: WorldAction::ExecutorDown {
                incarnation: 1,
                exit: "crashed".into(),
            },
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A reply showing the task running after the server had ended it asks nothing.
        let mut b = clicked_early();
        b.truth.tasks.get_mut("t-n1").expect("task").terminal_at_ms = Some(4_000);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    /// An operator requests n1's cancel in the ledger at 100 ms; executors look every 1,000 ms.
    /// The reply naming the task arrives at 5,000 ms, from incarnation `incarnation`.
    fn requested(incarnation: u32) -> Tb {
        asked(incarnation, CallerAction::CancelRequest)
    }

    /// As [`requested`], with the cancel asked by `action` at 100 ms.
    fn asked(incarnation: u32, action: CallerAction) -> Tb {
        let mut b = Tb::new();
        if action == CallerAction::CancelRequest {
            b.config.cancel_request_check_ms = Some(1_000);
        }
        b.exec(1, incarnation);
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(100).caller(action, "n1");
        b.at(5_000)
            .recv_shows("n1", "submit", "submitted", working("n1"))
            .moved("n1", &[Submitting, Working]);
        b.task("t-n1", "n1", Some(TaskStatus::Cancelled), None, Some(9_000));
        b
    }

    #[test]
    fn an_operators_request_is_judged_as_a_click_from_the_next_look() {
        let v = check(&requested(1).build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("an operator requested a cancel in the ledger at 100 ms (executors look every 1000 ms); at 5000 ms executor epoch 1 incarnation 1"),
            "{v:?}"
        );
        // Acted on within the bound: clean.
        let mut b = requested(1);
        b.at(5_000).sent("n1", "cancel");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A cancel sent after the request, before the executors' next look was due, acts on it.
        let mut b = requested(1);
        b.at(600).sent("n1", "cancel");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Every process looks at the ledger: a replica that started before the request knows
        // of it. A click goes to one process only, so the same replica is not judged on one.
        let replica = |b: &mut Tb| {
            b.at(0).push(What::World {
                action: WorldAction::ReplicaStart {
                    incarnation: 1_000,
                    epoch: 1,
                },
            });
        };
        let mut b = requested(1_000);
        replica(&mut b);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        let mut b = asked(1_000, CallerAction::Cancel);
        replica(&mut b);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_click_dropped_before_the_operation_id_was_known_is_caught() {
        let v = check(&clicked_early().build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail
                .contains("clicked cancel at 100 ms; at 5000 ms executor epoch 1 incarnation 1"),
            "{v:?}"
        );
    }

    #[test]
    fn the_executor_saying_it_cancelled_is_not_a_cancel_on_the_network() {
        let mut b = clicked_early();
        b.at(5_000).obs(toolop::runner::Observation::Sent {
            node: "n1".into(),
            kind: "cancel",
            seq: 2,
            rpc_id: None,
        });
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_commit_the_world_held_extends_the_bound() {
        // The reply showing n1 running arrives at 5,000 ms; the cancel leaves 500 ms after the
        // bound. A commit of the same process that the world held across the bound (started
        // before it ran out, landed after) excuses the wait; without it the click was dropped.
        let bound = act_bound_ms(1, 10);
        let build = |held_commit: bool| {
            let mut b = clicked_early();
            if held_commit {
                let mut w = crate::judge::checkers::ledger_writes::build::write("n2", 1, 1, 3);
                w.delay_ms = 1_000;
                b.at(5_000 + bound + 100)
                    .push(crate::judge::checkers::ledger_writes::build::ev(w));
            }
            b.at(5_000 + bound + 500).sent("n1", "cancel");
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn an_operation_the_server_ended_while_the_process_was_held_asks_nothing() {
        // mcp_ext_replicas seed 187463: the process shown n1 running froze (held past the
        // bound); the server ended the task while it was held, so no cancel was left to send.
        // Ended only after the hold let go, the click still asks for a cancel.
        let bound = act_bound_ms(1, 10);
        let build = |ended_ms: u64| {
            let mut b = clicked_early();
            b.truth.tasks.get_mut("t-n1").expect("task").terminal_at_ms = Some(ended_ms);
            let mut w = crate::judge::checkers::ledger_writes::build::write("n2", 1, 1, 3);
            w.delay_ms = 8_000;
            b.at(5_000 + 8_000)
                .push(crate::judge::checkers::ledger_writes::build::ev(w));
            b.build(SETTLED)
        };
        assert_eq!(check(&build(5_000 + 7_000)), vec![]);
        assert_eq!(check(&build(5_000 + 8_000 + bound / 2)).len(), 1);
    }

    #[test]
    fn a_slow_commit_the_process_died_inside_extends_the_bound() {
        // mcp_ext_replicas seed 24957: the process shown n1 running sat in a slow commit of n1
        // (begun 100 ms before the reply, held 3 s) and was killed 500 ms past the bound, before
        // the commit landed, so no write shows it: the fault does. Without it the same death
        // comes after the bound, and the click was dropped. Seed 166721: the same in a commit
        // of another node; a slow commit of another node by another process holds nothing.
        let bound = act_bound_ms(1, 10);
        let build = |held_commit: Option<(&str, u32)>| {
            let mut b = clicked_early();
            if let Some((node, incarnation)) = held_commit {
                b.at(4_900).push(What::Fault {
                    decision: 0,
                    fault: FaultKind::LedgerSlowCommit,
                    node: Some(node.into()),
                    state: Some(Working),
                    detail: FaultDetail::CommitDelay {
                        delay_ms: 3_000,
                        epoch: 1,
                        incarnation,
                    },
                });
            }
            b.at(5_000 + bound + 500).push(What::World {
                action: WorldAction::ReplicaStop {
                    incarnation: 1,
                    exit: "killed".into(),
                    killed: true,
                },
            });
            b.build(SETTLED)
        };
        assert_eq!(check(&build(Some(("n1", 1)))), vec![]);
        assert_eq!(check(&build(Some(("n2", 1)))), vec![]);
        assert_eq!(check(&build(Some(("n2", 2000)))).len(), 1);
        assert_eq!(check(&build(None)).len(), 1);
    }

    #[test]
    fn a_commit_held_by_the_process_that_took_the_click_extends_the_bound() {
        // mcp_sqlite seed 5: a replica (incarnation 1000) is shown n1 running; the primary
        // took the click (it wrote n1), and its next commit, of another node, was held past the
        // bound: its cancel left after it.
        let bound = act_bound_ms(1, 10);
        let build = |primary_wrote_n1: bool| {
            let mut b = clicked_early();
            if primary_wrote_n1 {
                b.at(4_000)
                    .push(crate::judge::checkers::ledger_writes::build::ev(
                        crate::judge::checkers::ledger_writes::build::write("n1", 1, 2, 2),
                    ));
            }
            let mut w = crate::judge::checkers::ledger_writes::build::write("n2", 1, 2, 3);
            w.delay_ms = 1_000;
            b.at(5_000 + bound + 100)
                .push(crate::judge::checkers::ledger_writes::build::ev(w));
            b.exec(1, 2).at(5_000 + bound + 500).sent("n1", "cancel");
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn a_status_notification_asks_for_nothing() {
        // After the click, the server pushes a status notification showing the task running;
        // the executor treats those as advisory and keeps to its own reads (the submission's
        // reply was lost, so it cannot even tell whose task it is: mcp_sqlite seed 5354). The
        // same view as the reply to a poll asks for the cancel.
        let build = |exchange: ExchangeKind| {
            let mut b = Tb::new();
            b.at(0).submit("n1").sent("n1", "submit");
            b.at(100).caller(CallerAction::Cancel, "n1");
            b.at(5_000).net_in("n1", exchange, working("n1"));
            b.task("t-n1", "n1", Some(TaskStatus::Cancelled), None, Some(9_000));
            b.build(SETTLED)
        };
        assert_eq!(check(&build(ExchangeKind::Notification)), vec![]);
        assert_eq!(check(&build(ExchangeKind::Poll)).len(), 1);
    }

    #[test]
    fn a_reply_past_its_requests_timeout_asks_for_nothing() {
        // mcp_sqlite seed 21982: a poll's reply showing the task running was held past the
        // request timeout; the executor had given the poll up and never read it. The same
        // reply in time asks for the cancel.
        let build = |late: bool| {
            let mut b = Tb::new();
            b.at(0).submit("n1").sent("n1", "submit");
            b.at(100).caller(CallerAction::Cancel, "n1");
            b.at(1_000).net_out("n1", ExchangeKind::Poll);
            let timeout_ms = b.config.request_timeout_ms;
            let at = if late {
                1_000 + timeout_ms
            } else {
                1_000 + timeout_ms - 1
            };
            b.at(at).net_in("n1", ExchangeKind::Poll, working("n1"));
            b.task(
                "t-n1",
                "n1",
                Some(TaskStatus::Cancelled),
                None,
                Some(90_000),
            );
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn a_replica_that_stops_within_the_bound_is_not_asked_to_act() {
        let mut b = clicked_early();
        b.at(5_001).push(What::World {
            action: WorldAction::ReplicaStop {
                incarnation: 1,
                exit: "stopped".into(),
                killed: false,
            },
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_replica_that_never_heard_of_the_click_is_not_judged_on_it() {
        // mcp_replicas seed 22: the primary (incarnation 1) is up and takes the click; the
        // replica (1000), shown the task running, hears of the click only when the primary was
        // down at a click, or once a write records the node cancelling.
        use crate::judge::checkers::ledger_writes::build;
        let run = |primary_down_at_click: bool, recorded: bool| {
            let mut b = Tb::new();
            b.at(0).push(What::World {
                action: WorldAction::ReplicaStart {
                    incarnation: 1000,
                    epoch: 1,
                },
            });
            b.at(0).submit("n1").sent("n1", "submit");
            if primary_down_at_click {
                b.at(50).push(What::World {
                    action: WorldAction::ExecutorDown {
                        incarnation: 1,
                        exit: "crashed".into(),
                    },
                });
            }
            b.at(100).caller(CallerAction::Cancel, "n1");
            if recorded {
                let mut w = build::write("n1", 1, 1, 2);
                w.state = CancelRequested;
                b.at(4_000).push(build::ev(w));
            }
            b.exec(1, 1000)
                .at(5_000)
                .recv_shows("n1", "submit", "submitted", working("n1"));
            b.task("t-n1", "n1", Some(TaskStatus::Cancelled), None, Some(9_000));
            check(&b.build(SETTLED)).len()
        };
        assert_eq!(run(false, false), 0);
        assert_eq!(run(true, false), 1);
        assert_eq!(run(false, true), 1);
    }

    #[test]
    fn a_process_that_dies_inside_a_held_commit_is_not_asked_to_act() {
        // mcp_replicas seed 1693: shown the task running at 5,000 ms, the process waits on a
        // commit the world holds past the bound and goes down before the extended bound ends.
        use crate::judge::checkers::ledger_writes::build;
        let bound = act_bound_ms(1, 10);
        let run = |dies: bool| {
            let mut b = clicked_early();
            let mut w = build::write("n2", 1, 1, 3);
            w.delay_ms = 1_000;
            b.at(5_000 + bound + 100).push(build::ev(w));
            if dies {
                b.at(5_000 + bound + 150).push(What::World {
                    action: WorldAction::ExecutorDown {
                        incarnation: 1,
                        exit: "crashed".into(),
                    },
                });
            }
            check(&b.build(SETTLED)).len()
        };
        assert_eq!(run(true), 0);
        assert_eq!(run(false), 1);
    }

    #[test]
    fn a_process_a_rollback_fences_within_the_bound_is_not_asked_to_act() {
        // mcp_faults seed 9329: shown the task running at 5,000 ms, the process is fenced by a
        // rollback to epoch 2 before its bound ends; the new epoch's process is judged on its own
        // replies. A rollback after the bound excuses nothing.
        let bound = act_bound_ms(1, 10);
        let run = |rollback_at_ms: u64| {
            let mut b = clicked_early();
            b.at(rollback_at_ms).push(What::World {
                action: WorldAction::Rollback {
                    incarnation: 2,
                    epoch: 2,
                },
            });
            let mut t = b.build(SETTLED);
            t.events.sort_by_key(|e| e.t_ms);
            check(&t).len()
        };
        assert_eq!(run(5_000 + bound / 2), 0);
        assert_eq!(run(5_000 + bound + 1), 1);
    }
}
