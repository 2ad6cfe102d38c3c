//! Always: an executor never sends more than `Begin.max_qps` requests in any one-second window
//! [t, t+999] ms. Counted from the frames the network carried from each executor process:
//! every request counts (handshake, submits, lookups, polls, fetches, cancels): the server's
//! rate limit does not care which. Answers to the server's own requests are not load (the
//! executor sends them ahead of its queue, and a server may block until it has them), and
//! neither are frames that ask nothing (`other`: client notifications). Judged per executor
//! incarnation, because a crash restarts the limiter with the process.

use std::collections::BTreeMap;

use super::view::{judge, sends, ExecId, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::Trace;

pub const NAME: &str = "poll_rate_within_bound";

/// Width of the rate window.
pub const WINDOW_MS: u64 = 1_000;

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    busiest_windows(v.trace)
        .into_iter()
        .filter(|(_, w)| w.sends > v.max_qps)
        .map(|((epoch, incarnation), w)| Violation {
            checker: NAME,
            node: None,
            detail: format!(
                "executor epoch {epoch} incarnation {incarnation}: {} sends in [{}, {}] ms, bound {}",
                w.sends,
                w.start_ms,
                w.start_ms + WINDOW_MS - 1,
                v.max_qps
            ),
        })
        .collect()
}

/// The busiest window of one executor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub sends: u32,
    pub start_ms: u64,
}

/// Per executor (epoch, incarnation): its busiest window. The busiest window can always be
/// taken to start at a send, so a two-pointer sweep over the send times finds it.
pub fn busiest_windows(trace: &Trace) -> BTreeMap<ExecId, Window> {
    let mut by_exec: BTreeMap<ExecId, Vec<u64>> = BTreeMap::new();
    for f in sends(trace) {
        if !matches!(f.exchange, ExchangeKind::Answer | ExchangeKind::Other) {
            by_exec.entry(f.exec).or_default().push(f.t_ms);
        }
    }
    by_exec
        .into_iter()
        .map(|(exec, mut times)| {
            times.sort_unstable();
            let mut best = Window::default();
            let mut end = 0;
            for (start, &t0) in times.iter().enumerate() {
                while end < times.len() && times[end] < t0.saturating_add(WINDOW_MS) {
                    end += 1;
                }
                let n = (end - start) as u32;
                if n > best.sends {
                    best = Window {
                        sends: n,
                        start_ms: t0,
                    };
                }
            }
            (exec, best)
        })
        .collect()
}

/// The most sends by any one executor in any window (`SeriesMetrics::max_sends_in_window`).
pub fn max_sends_in_window(trace: &Trace) -> u32 {
    busiest_windows(trace)
        .values()
        .map(|w| w.sends)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_burst_over_the_bound_is_caught_and_its_window_found() {
        let mut b = happy("n1", 0);
        b.max_qps = 3;
        // Four sends in [5000, 5999]; the fifth at 6000 starts a new window.
        for t in [5_000, 5_300, 5_600, 5_999, 6_000] {
            b.at(t).sent("n1", "poll");
        }
        let trace = b.build(SETTLED);
        let v = check(&trace);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("4 sends in [5000, 5999]"), "{v:?}");
        assert_eq!(max_sends_in_window(&trace), 4);
    }

    #[test]
    fn sends_the_executor_does_not_report_still_count() {
        let mut b = happy("n1", 0);
        b.max_qps = 3;
        for t in [5_000, 5_100, 5_200, 5_300] {
            b.at(t)
                .net_out("n1", crate::fake::codec::ExchangeKind::Poll);
        }
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn executors_are_judged_separately() {
        let mut b = Tb::new();
        b.max_qps = 2;
        b.exec(1, 1)
            .at(0)
            .sent("n1", "poll")
            .at(10)
            .sent("n1", "poll");
        b.exec(1, 2)
            .at(20)
            .sent("n1", "poll")
            .at(30)
            .sent("n1", "poll");
        let trace = b.build(SETTLED);
        assert!(check(&trace).is_empty());
        assert_eq!(max_sends_in_window(&trace), 2);
    }
}
