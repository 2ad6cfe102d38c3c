//! Always: no call node is polled sooner than the server's suggested interval allows. When an
//! executor sends two status reads of a node with nothing else for that node in between (its
//! polling loop), the second leaves at least `i` ms after the first, where `i` is the interval
//! the server suggested on the last reply about the node that reached that executor before the
//! second read (the value the network carried, never the executor's reading of it).
//!
//! Jitter: the scenario's jitter fraction `f` (recorded in `Begin`) is a delay the executor adds
//! on top of the interval, drawn in [0, f): it never licenses an earlier read, so the bound is
//! the interval itself. The checker refuses a negative fraction rather than read it as slack.
//!
//! Judged per executor incarnation (a restarted process starts over: its first read follows no
//! read of its own). A read that follows another request for the node (a cancel, a fetch, an
//! answer, a lookup) starts a new loop: the answer to that request drives the next read. Once a
//! reply showed the operation ended, the next read is not polling but fetching its outcome (the
//! tasks extension reads a result with the same message it polls with). Retry-After is
//! `retry_after_honoured`'s.

use std::collections::BTreeMap;

use super::view::{arrivals, judge, sends, ExecId, Frame, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{Shows, Trace};

pub const NAME: &str = "poll_interval_honoured";

/// A task reply as it reached an executor: (arrival, suggested interval, showed it ended).
type Shown = (u64, Option<u64>, bool);

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    if v.config.poll_jitter_fraction < 0.0 {
        out.push(Violation {
            checker: NAME,
            node: None,
            detail: format!(
                "the scenario's jitter fraction {} is negative: jitter is added on top of the interval",
                v.config.poll_jitter_fraction
            ),
        });
    }
    // Task replies that reached each executor about each node, in arrival order: when, the
    // interval suggested on it, and whether it showed the operation ended.
    let mut shown: BTreeMap<(ExecId, &str), Vec<Shown>> = BTreeMap::new();
    for a in arrivals(v.trace) {
        if let (
            Some(node),
            Some(Shows::Task {
                poll_interval_ms,
                status,
                ..
            }),
        ) = (a.node, a.shows)
        {
            let at = a.arrives_at_ms.unwrap_or(a.t_ms);
            shown.entry((a.exec, node)).or_default().push((
                at,
                *poll_interval_ms,
                status.is_terminal(),
            ));
        }
    }
    let mut last: BTreeMap<(ExecId, &str), Frame> = BTreeMap::new();
    for s in sends(v.trace) {
        let Some(node) = s.node else { continue };
        if matches!(s.exchange, ExchangeKind::Other) {
            continue;
        }
        let key = (s.exec, node);
        let previous = last.insert(key, s);
        let Some(p) = previous
            .filter(|p| p.exchange == ExchangeKind::Poll && s.exchange == ExchangeKind::Poll)
        else {
            continue;
        };
        let before: Vec<&Shown> = shown
            .get(&key)
            .map(|l| l.iter().filter(|(at, _, _)| *at <= s.t_ms).collect())
            .unwrap_or_default();
        // Any reply since the previous read that showed it ended, not only the last to arrive:
        // a stale copy showing it running (polls out of order) can land after it, and the
        // executor rightly ignores it.
        if before.iter().any(|(at, _, ended)| *ended && *at >= p.t_ms) {
            continue;
        }
        let interval = before.iter().rev().find_map(|(_, i, _)| *i);
        if let Some(i) = interval {
            let gap = s.t_ms - p.t_ms;
            if gap < i {
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!(
                        "executor epoch {} incarnation {} polled at {} ms and again at {} ms ({gap} ms apart); the server suggested {i} ms",
                        s.exec.0, s.exec.1, p.t_ms, s.t_ms
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
    use crate::fake::truth::TaskStatus;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};

    fn status(interval_ms: u64) -> Shows {
        Shows::Task {
            task: "t-n1".into(),
            status: TaskStatus::Working,
            poll_interval_ms: Some(interval_ms),
            input_round: None,
            ttl_ms: None,
            result: false,
        }
    }

    /// n1 polls at 2000 ms; the reply suggests 1000 ms and reaches the executor at 2010 ms.
    fn polling() -> Tb {
        let mut b = happy("n1", 0);
        b.at(2_000).sent("n1", "poll");
        b.at(2_010)
            .recv_shows("n1", "poll", "status", status(1_000));
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = polling();
        b.at(3_000).sent("n1", "poll");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Something else in between starts over; so does another incarnation.
        let mut b = polling();
        b.at(2_100)
            .sent("n1", "cancel")
            .at(2_200)
            .sent("n1", "poll");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        let mut b = polling();
        b.exec(1, 2).at(2_300).sent("n1", "poll");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A read right after a reply showed the task ended fetches its outcome.
        let mut b = polling();
        let mut done = status(1_000);
        if let Shows::Task { status, .. } = &mut done {
            *status = TaskStatus::Completed;
        }
        b.at(2_020).sent("n1", "poll");
        b.at(2_030).recv_shows("n1", "poll", "status", done);
        b.at(2_040).sent("n1", "poll");
        assert_eq!(
            check(&b.build(SETTLED)).len(),
            1,
            "2020 after 2000 is polling"
        );
    }

    #[test]
    fn a_poll_sooner_than_the_suggested_interval_is_caught() {
        let mut b = polling();
        b.at(2_999).sent("n1", "poll");
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("999 ms apart"), "{v:?}");
    }

    #[test]
    fn the_interval_is_the_one_the_network_carried_not_the_executor_s_reading() {
        // The executor reports no reply at all; the network delivered one suggesting 5 s.
        let mut b = happy("n1", 0);
        b.at(2_000).sent("n1", "poll");
        b.at(2_010).net_in("n1", ExchangeKind::Poll, status(5_000));
        b.at(4_000).sent("n1", "poll");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        // A negative jitter fraction is refused, not used as slack.
        let mut b = polling();
        b.config.poll_jitter_fraction = -0.5;
        b.at(2_600).sent("n1", "poll");
        assert_eq!(check(&b.build(SETTLED)).len(), 2);
    }

    #[test]
    fn a_stale_running_copy_after_the_end_was_shown_asks_no_interval() {
        // Polls out of order: the reply showing n1 ended arrives, then a held older copy
        // showing it running; the executor rightly reads on at once. Without the ended reply
        // the same read is polling too soon.
        let build = |ended_shown: bool| {
            let mut b = polling();
            b.at(3_000).sent("n1", "poll");
            if ended_shown {
                let mut done = status(1_000);
                if let Shows::Task { status, .. } = &mut done {
                    *status = TaskStatus::Completed;
                }
                b.at(3_010).recv_shows("n1", "poll", "status", done);
            }
            b.at(3_020).net_in("n1", ExchangeKind::Poll, status(1_000));
            b.at(3_030).sent("n1", "poll");
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        assert_eq!(check(&build(false)).len(), 1);
    }
}
