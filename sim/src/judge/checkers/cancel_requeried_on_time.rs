//! Always (bounded): a call node whose cancel is out and undecided is read again on the
//! cancel's own interval (`executor.core.cancel_requery_interval_ms`), never left to the poll
//! schedule. Once an executor process put a cancel for a node on the network, each reply to its
//! latest request about the node that leaves the cancel undecided (the task still running, a
//! best-effort cancel taken, a cancel refused as already ended, a 429 or 503) is followed by
//! another request about the node, from that process or any other, within the longest of the
//! interval, the interval the server suggested and the Retry-After asked for, plus the QPS
//! queue's allowance ([`act_bound_ms`]), from the reply's arrival.
//!
//! Why a checker: the poll schedule's backoff grows while the work runs (to 20 s by default)
//! and a person is waiting for the cancel's answer. A requery on that schedule is slow, not
//! wrong: it passes every safety checker and shows only as a slower cancel p99 over a sweep,
//! in the protocols whose cancels the cancel's own reply does not settle (session 47: over
//! 10,000 series only AIP-151's gate failed, by 0.37 points; MCP's passed).
//!
//! Read from the world: the frames the network carried and their arrivals, the commits the
//! world held, the processes it stopped, the store. Nothing is asked of a process that goes
//! down or is fenced by a rollback before the read was due, once the store shows the node
//! settled, or past the series' end. A commit the world held for the process while the bound
//! ran extends the bound to the same allowance after the commit landed: the process steps one
//! event at a time and arms its timer only once it committed what the reply taught it. A reply
//! that reached its process after its request's timeout, or answers a request the process has
//! since followed with another about the node (any process's, in the order they left), drives
//! nothing (a newer answer does), nor does one after the process was shown the task ended (the
//! cancel is decided; it fetches the outcome), and a status notification is advisory.

use std::collections::BTreeMap;

use super::clicked_cancel_is_acted_on::act_bound_ms;
use super::view::{
    arrivals, down_times, held_commits, judge, newest_epoch_at, newest_epochs, sends, store_facts,
    ExecId, RequestTimes, View,
};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{Shows, Trace, What};

pub const NAME: &str = "cancel_requeried_on_time";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// How long the next request about the node may wait after a reply that leaves its cancel
/// undecided, and what the reply showed, in words; `None` for a reply that decides the cancel
/// or asks for nothing of this kind (a not-found has rules of its own).
fn wait_after(shows: &Shows, interval_ms: u64) -> Option<(u64, String)> {
    match shows {
        Shows::Task {
            status,
            poll_interval_ms,
            ..
        } if !status.is_terminal() => Some((
            interval_ms.max(poll_interval_ms.unwrap_or(0)),
            format!("the task {}", status.as_str()),
        )),
        Shows::CancelAccepted => Some((interval_ms, "the cancel taken, undecided".into())),
        Shows::CancelRejected { status } => Some((
            interval_ms,
            format!("the cancel refused, the task {}", status.as_str()),
        )),
        Shows::Throttled {
            status,
            retry_after_ms,
        } => Some((
            interval_ms.max(*retry_after_ms),
            format!("HTTP {status} with a Retry-After of {retry_after_ms} ms"),
        )),
        _ => None,
    }
}

/// A request a process sent about a node: when it left, its id, its kind, its frame.
type Sent = (u64, Option<u64>, ExchangeKind, u64);

pub fn violations(v: &View) -> Vec<Violation> {
    let interval_ms = v.config.cancel_requery_ms();
    let queue_ms = act_bound_ms(v.call_nodes, v.max_qps);
    let mut own: BTreeMap<(ExecId, &str), Vec<Sent>> = BTreeMap::new();
    // Every process's requests about each node: when each left, and its frame (the order they
    // left in, within a millisecond too).
    let mut any: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    // When each process took each node over: its first request about the node after another
    // process's, in the order they left.
    let mut takeovers: BTreeMap<(ExecId, &str), Vec<u64>> = BTreeMap::new();
    let mut last_sender: BTreeMap<&str, ExecId> = BTreeMap::new();
    // What each process did to each node, requests and landed writes.
    let mut touched: BTreeMap<&str, Vec<(u64, ExecId)>> = BTreeMap::new();
    for s in sends(v.trace) {
        let Some(node) = s.node else { continue };
        own.entry((s.exec, node))
            .or_default()
            .push((s.t_ms, s.request_id, s.exchange, s.frame));
        any.entry(node).or_default().push((s.t_ms, s.frame));
        if last_sender
            .insert(node, s.exec)
            .is_some_and(|p| p != s.exec)
        {
            takeovers.entry((s.exec, node)).or_default().push(s.t_ms);
        }
        touched.entry(node).or_default().push((s.t_ms, s.exec));
    }
    for e in &v.trace.events {
        if let What::Ledger { write } = &e.what {
            if write.outcome.landed().is_some() {
                touched
                    .entry(write.node.as_str())
                    .or_default()
                    .push((e.t_ms, (write.epoch, write.incarnation)));
            }
        }
    }
    let lease_ms = v.config.request_timeout_ms;
    let others_touched = |exec: ExecId, node: &str, from_ms: u64, to_ms: u64| {
        touched.get(node).is_some_and(|list| {
            list.iter()
                .any(|&(t, by)| by != exec && t >= from_ms && t <= to_ms)
        })
    };
    let all_arrivals = arrivals(v.trace);
    let times = RequestTimes::of(v);
    // When each process was first shown each node's task ended: from then the cancel is decided
    // for it, and what it does next is fetch the outcome (mcp_faults seed 23861: a read showed
    // the task ended, and a cancel and a fetch left together; the cancel's 503 asked nothing).
    let mut ended: BTreeMap<(ExecId, &str), u64> = BTreeMap::new();
    for a in &all_arrivals {
        if let (Some(node), Some(Shows::Task { status, .. })) = (a.node, a.shows) {
            if status.is_terminal() && a.intact() && !times.past_timeout(a) {
                ended
                    .entry((a.exec, node))
                    .or_insert(a.arrives_at_ms.unwrap_or(a.t_ms));
            }
        }
    }
    let writes = held_commits(v.trace);
    let down = down_times(v.trace);
    let epochs = newest_epochs(v.trace);
    let settled = store_facts(v.trace);
    let end_ms = v.trace.events.last().map_or(0, |e| e.t_ms);
    let mut out = vec![];
    let mut judged: Vec<&str> = vec![];
    for a in all_arrivals.iter().copied() {
        let (Some(node), Some(shows), Some(id)) = (a.node, a.shows, a.request_id) else {
            continue;
        };
        let at = a.arrives_at_ms.unwrap_or(a.t_ms);
        if !a.intact()
            || a.exchange == ExchangeKind::Notification
            || times.past_timeout(&a)
            || judged.contains(&node)
            || a.exec.0 < newest_epoch_at(&epochs, at)
            || settled.get(node).is_some_and(|(s, _)| *s <= at)
        {
            continue;
        }
        if ended.get(&(a.exec, node)).is_some_and(|&e| e <= at) {
            continue;
        }
        let Some((wait_ms, what)) = wait_after(shows, interval_ms) else {
            continue;
        };
        let Some(mine) = own.get(&(a.exec, node)) else {
            continue;
        };
        let Some(cancelled_ms) = mine
            .iter()
            .find(|s| s.2 == ExchangeKind::Cancel)
            .map(|s| s.0)
        else {
            continue;
        };
        // The request this replies to: the latest with its id that left before it arrived.
        let Some(pos) = mine.iter().rposition(|s| s.1 == Some(id) && s.0 <= at) else {
            continue;
        };
        let (sent_ms, _, kind, frame) = mine[pos];
        // A request about the node that left after this one, from any process, overtook it: the
        // newer answer drives what happens next (mcp_ext_replicas seed 89: a replica's cancel
        // overtook the primary's, whose ack then came back stale; the replica, which was to read
        // again, shut down, and the primary took over only on its stall watch).
        let overtaken = any
            .get(node)
            .is_some_and(|sends| sends.iter().any(|&(t, f)| f > frame && t <= at));
        if sent_ms < cancelled_ms || overtaken {
            continue;
        }
        let allowance_ms = wait_ms + queue_ms;
        let mut until = at + allowance_ms;
        // The process took the node over from another whose last request may still be answered:
        // with the cancel budget spent it waits a request lease from then for that answer (it
        // may be the ack) before it concludes (aip151_faults seed 1200: a second executor's
        // cancel, lost; mcp_faults seed 1873: a crashed process's).
        if let Some(&took_ms) = takeovers
            .get(&(a.exec, node))
            .and_then(|t| t.iter().rev().find(|&&t| t <= at))
        {
            until = until.max(took_ms + lease_ms + allowance_ms);
        }
        for w in &writes {
            if w.exec == a.exec
                && w.landed_ms > at
                && w.landed_ms.saturating_sub(w.delay_ms) < until
            {
                until = until.max(w.landed_ms + allowance_ms);
            }
        }
        // Another process at the node within a request lease of this exchange: who reads next
        // is theirs to settle through the ledger (a replica may have taken the node up, or wait
        // for this one's answer), and a take-up after a process stops waits on its stall watch.
        // Judged only where one process works the node alone (mcp_ext_replicas seed 8684: a
        // replica committed its cancel 0.4 s before this process's read came back, and sent it
        // 5 s later behind a slow commit).
        if others_touched(a.exec, node, sent_ms.saturating_sub(lease_ms), until) {
            continue;
        }
        let gone = down.get(&a.exec.1).is_some_and(|d| *d <= until)
            || newest_epoch_at(&epochs, until) > a.exec.0
            || settled.get(node).is_some_and(|(s, _)| *s <= until)
            || end_ms <= until;
        let next = any
            .get(node)
            .and_then(|sends| sends.iter().map(|&(t, _)| t).find(|&t| t >= at));
        if gone || next.is_some_and(|t| t <= until) {
            continue;
        }
        judged.push(node);
        out.push(Violation {
            checker: NAME,
            node: Some(node.to_string()),
            detail: format!(
                "executor epoch {} incarnation {} sent a cancel at {cancelled_ms} ms; the reply to its {} of {sent_ms} ms reached it at {at} ms showing {what}, and {} (due by {until} ms: {wait_ms} ms for the cancel requery interval of {interval_ms} ms, the server's interval or its Retry-After, and {queue_ms} ms for the QPS queue, after the reply or after the last hold of the process that ran into that time, or a request lease after its take-up of the node)",
                a.exec.0,
                a.exec.1,
                kind.name(),
                match next {
                    Some(t) => format!("no request about the node left until {t} ms"),
                    None => "no request about the node left again".to_string(),
                },
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::truth::TaskStatus;
    use crate::judge::checkers::ledger_writes::build::{ev, write};
    use crate::judge::checkers::testkit::{assert_clean, task_shows, Tb, SETTLED};
    use crate::series::faults::FaultKind;
    use crate::trace::{CallerAction, FaultDetail, What, WorldAction};
    use toolop::record::LocalState::*;
    use toolop::record::TerminalState;

    // The bound with the test kit's 10 QPS and one node: 2,000 ms + 1,000 ms after an arrival.

    /// n1 submitted at 0; cancel clicked and sent at 3,000; the cancel's reply reaches the
    /// executor at 3,040 showing it taken (AIP-151's empty ack).
    fn cancelled_at_3s() -> Tb {
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(10)
            .recv("n1", "submit", "submitted")
            .moved("n1", &[Submitting, Working]);
        b.at(3_000)
            .caller(CallerAction::Cancel, "n1")
            .moved("n1", &[Working, CancelRequested])
            .sent("n1", "cancel");
        b.at(3_040)
            .net_in("n1", ExchangeKind::Cancel, Shows::CancelAccepted);
        b
    }

    /// Status reads at `reads`, each answered 10 ms later with the task working.
    fn read_working(b: &mut Tb, reads: &[u64]) {
        for &t in reads {
            b.at(t).sent("n1", "poll");
            b.at(t + 10).net_in(
                "n1",
                ExchangeKind::Poll,
                task_shows("t-n1", TaskStatus::Working),
            );
        }
    }

    /// A read at `t` shows the task cancelled, and the store shows the receipt.
    fn confirmed(b: &mut Tb, t: u64) -> Trace {
        b.at(t).sent("n1", "poll");
        b.at(t + 10).net_in(
            "n1",
            ExchangeKind::Poll,
            task_shows("t-n1", TaskStatus::Cancelled),
        );
        b.at(t + 20)
            .moved("n1", &[CancelRequested, CancelledAccepted])
            .accepted("n1", TerminalState::Cancelled, None);
        b.record("n1", CancelledAccepted, Some("t-n1"))
            .cancel_generation = 1;
        b.receipt("n1", Some("t-n1"), TerminalState::Cancelled, None);
        b.task("t-n1", "n1", Some(TaskStatus::Cancelled), None, Some(t));
        b.build(SETTLED)
    }

    fn reads(reads: &[u64], last: u64) -> Trace {
        let mut b = cancelled_at_3s();
        read_working(&mut b, reads);
        confirmed(&mut b, last)
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        assert_eq!(check(&reads(&[5_040, 7_050], 9_060)), vec![]);
        // Right at the bound.
        assert_eq!(check(&reads(&[6_040], 9_050)), vec![]);
    }

    #[test]
    fn a_read_past_the_interval_is_caught() {
        // The read after the cancel's ack waits 5 s: the poll schedule's, not the cancel's.
        let v = check(&reads(&[], 8_040));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n1"));
        assert!(v[0].detail.contains("until 8040 ms"), "{}", v[0].detail);
        assert!(v[0].detail.contains("due by 6040 ms"), "{}", v[0].detail);
        // After a read that showed it still running too; one violation per node.
        let v = check(&reads(&[5_040, 20_050], 40_060));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("reached it at 5050 ms"),
            "{}",
            v[0].detail
        );
    }

    #[test]
    fn the_interval_is_the_scenarios() {
        let with = |interval_ms, last| {
            let mut b = cancelled_at_3s();
            b.config.cancel_requery_interval_ms = Some(interval_ms);
            check(&confirmed(&mut b, last))
        };
        assert_eq!(with(5_000, 8_040), vec![]);
        assert_eq!(with(1_000, 5_040), vec![]);
        assert_eq!(with(1_000, 5_100).len(), 1);
    }

    #[test]
    fn a_retry_after_or_the_servers_interval_lengthens_the_wait() {
        let throttled = || {
            let mut b = cancelled_at_3s();
            b.at(4_000).sent("n1", "cancel");
            b.at(4_040).net_in(
                "n1",
                ExchangeKind::Cancel,
                Shows::Throttled {
                    status: 503,
                    retry_after_ms: 4_000,
                },
            );
            b
        };
        // Due 4,000 + 1,000 ms after the refusal.
        assert_eq!(check(&confirmed(&mut throttled(), 9_040)), vec![]);
        assert_eq!(check(&confirmed(&mut throttled(), 9_100)).len(), 1);
        // A server that suggests 5 s between reads is read 5 s apart.
        let suggesting = |last| {
            let mut b = cancelled_at_3s();
            b.at(5_000).sent("n1", "poll");
            b.at(5_010).net_in(
                "n1",
                ExchangeKind::Poll,
                Shows::Task {
                    task: "t-n1".into(),
                    status: TaskStatus::Working,
                    poll_interval_ms: Some(5_000),
                    input_round: None,
                    ttl_ms: None,
                    result: false,
                },
            );
            check(&confirmed(&mut b, last))
        };
        assert_eq!(suggesting(11_010), vec![]);
        assert_eq!(suggesting(11_100).len(), 1);
    }

    /// The commit of what the cancel's ack taught the process, held 3 s by the world.
    fn held(b: &mut Tb, incarnation: u32) {
        b.at(4_000).push(What::Fault {
            decision: 0,
            fault: FaultKind::LedgerSlowCommit,
            node: Some("n1".into()),
            state: Some(CancelRequested),
            detail: FaultDetail::CommitDelay {
                delay_ms: 3_000,
                epoch: 1,
                incarnation,
            },
        });
    }

    #[test]
    fn a_held_commit_a_stopped_process_or_a_settled_node_excuse_it() {
        // The bound runs again from the commit's landing at 7,000.
        let mut b = cancelled_at_3s();
        held(&mut b, 1);
        assert_eq!(check(&confirmed(&mut b, 10_000)), vec![]);
        let mut b = cancelled_at_3s();
        held(&mut b, 1);
        assert_eq!(check(&confirmed(&mut b, 10_100)).len(), 1);
        // Another process's hold excuses nothing.
        let mut b = cancelled_at_3s();
        held(&mut b, 2);
        assert_eq!(check(&confirmed(&mut b, 10_000)).len(), 1);
        // A process that went down before the read was due is asked nothing (its successor
        // is judged on its own replies).
        let mut b = cancelled_at_3s();
        b.at(5_000).push(What::World {
            action: WorldAction::ExecutorDown {
                incarnation: 1,
                exit: "crash".into(),
            },
        });
        assert_eq!(check(&confirmed(&mut b, 20_000)), vec![]);
    }

    #[test]
    fn replies_before_any_cancel_are_the_poll_schedules() {
        // Working at 1,010, next read at 9,000: the cancel was only sent at 8,000.
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(10).recv("n1", "submit", "submitted");
        read_working(&mut b, &[1_000]);
        b.at(8_000)
            .caller(CallerAction::Cancel, "n1")
            .sent("n1", "cancel");
        b.at(8_040).net_in(
            "n1",
            ExchangeKind::Cancel,
            task_shows("t-n1", TaskStatus::Cancelled),
        );
        b.at(8_060)
            .moved("n1", &[CancelRequested, CancelledAccepted])
            .accepted("n1", TerminalState::Cancelled, None);
        b.record("n1", CancelledAccepted, Some("t-n1"))
            .cancel_generation = 1;
        b.receipt("n1", Some("t-n1"), TerminalState::Cancelled, None);
        b.task("t-n1", "n1", Some(TaskStatus::Cancelled), None, Some(8_020));
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn once_the_task_showed_ended_the_cancel_is_decided() {
        // A read shows the task completed; a cancel still leaves and is refused 503 at once;
        // the process fetches 15 s later (a lost result's timeout, say): nothing to requery.
        let ended = |status| {
            let mut b = cancelled_at_3s();
            b.at(5_000).sent("n1", "poll");
            b.at(5_010)
                .net_in("n1", ExchangeKind::Poll, task_shows("t-n1", status));
            b.at(5_020).sent("n1", "cancel");
            b.at(5_030).net_in(
                "n1",
                ExchangeKind::Cancel,
                Shows::Throttled {
                    status: 503,
                    retry_after_ms: 0,
                },
            );
            b.at(20_000).sent("n1", "fetch");
            b.at(20_010)
                .net_in("n1", ExchangeKind::Fetch, Shows::Outcome)
                .accepted("n1", TerminalState::Completed, None);
            check(&b.build(SETTLED))
        };
        assert_eq!(ended(TaskStatus::Completed), vec![]);
        // Shown still running instead, the 503 asked for a read within the bound.
        assert_eq!(ended(TaskStatus::Working).len(), 1);
    }

    /// Another process at the node, and the lease after a take-up.
    #[test]
    fn another_process_at_the_node_or_a_take_up_lengthens_or_ends_the_duty() {
        // A second process (epoch 1, incarnation 2) commits a write of the node at 4,000 (it
        // took it up, or is about to send): who reads next is settled through the ledger.
        let shared = |incarnation| {
            let mut b = cancelled_at_3s();
            b.at(4_000).push(ev(write("n1", 1, incarnation, 3)));
            confirmed(&mut b, 8_040)
        };
        assert_eq!(check(&shared(2)), vec![]);
        // The process's own write excuses nothing: the same wait is caught.
        assert_eq!(check(&shared(1)).len(), 1);
        // A take-up: incarnation 2 sends the node's first cancel after incarnation 1's submit;
        // its wait may run a request lease (10 s) from then, plus the allowance.
        let took = |last| {
            let mut b = Tb::new();
            b.at(0).submit("n1").sent("n1", "submit");
            b.at(10).recv("n1", "submit", "submitted");
            b.exec(1, 2).at(30_000).caller(CallerAction::Cancel, "n1");
            b.sent("n1", "cancel");
            b.at(30_040)
                .net_in("n1", ExchangeKind::Cancel, Shows::CancelAccepted);
            confirmed(&mut b, last)
        };
        assert_eq!(check(&took(42_000)), vec![]);
        assert_eq!(check(&took(43_100)).len(), 1);
    }
}
