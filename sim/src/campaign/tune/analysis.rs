//! What one grid point measured, the Pareto frontier and the recommendation. Every number is
//! read from the sweep's rows ([`SeriesMetrics`](crate::judge::metrics::SeriesMetrics), measured from
//! the trace the checkers read) and the gate verdicts of [`gates::evaluate`](crate::judge::gates::evaluate),
//! through the same percentile function the gate uses: tune re-implements no metric.

use std::cmp::Ordering;

use serde::Serialize;

use crate::judge::gates::{GateRow, SweepReport};
use crate::report::percentile;

/// One point's measurements over its sweep. Durations in simulated milliseconds; `None` when
/// the sweep produced no value of that kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointMetrics {
    pub series: u64,
    /// Call nodes that got an operation id (the denominator of polls per operation).
    pub operations: u64,
    /// Server-side terminal time to acceptance: p50 and p99 over every accepted node.
    pub detection_p50_ms: Option<u64>,
    pub detection_p99_ms: Option<u64>,
    pub polls_per_op_mean: Option<f64>,
    pub polls_per_op_p99: Option<u64>,
    /// Most sends by one executor in any one-second window, over the sweep (what the QPS gate bounds).
    pub busiest_window_sends: u32,
    pub cancel_p99_ms: Option<u64>,
    pub unknown_p99_ms: Option<u64>,
    pub unknown_max_ms: Option<u64>,
    /// 429 replies the executor received (each is a poll the fault layer's replica refused).
    pub rate_limited: u64,
    pub checker_violations: u64,
    pub failing_seeds: u64,
}

impl PointMetrics {
    pub fn of(r: &SweepReport) -> PointMetrics {
        let flat = |f: fn(&crate::judge::metrics::SeriesMetrics) -> &Vec<u64>| -> Vec<u64> {
            r.rows
                .iter()
                .flat_map(|row| f(&row.metrics).iter().copied())
                .collect()
        };
        let detection = flat(|m| &m.completion_detection_ms);
        let polls = flat(|m| &m.polls_per_operation);
        let cancels = flat(|m| &m.cancel_confirmation_ms);
        let unknown = flat(|m| &m.unknown_reconciliation_ms);
        PointMetrics {
            series: r.rows.len() as u64,
            operations: polls.len() as u64,
            detection_p50_ms: percentile(&detection, 50.0),
            detection_p99_ms: percentile(&detection, 99.0),
            polls_per_op_mean: (!polls.is_empty())
                .then(|| polls.iter().sum::<u64>() as f64 / polls.len() as f64),
            polls_per_op_p99: percentile(&polls, 99.0),
            busiest_window_sends: r
                .rows
                .iter()
                .map(|row| row.metrics.max_sends_in_window)
                .max()
                .unwrap_or(0),
            cancel_p99_ms: percentile(&cancels, 99.0),
            unknown_p99_ms: percentile(&unknown, 99.0),
            // The gate judges the exact maximum, so the report shows that one.
            unknown_max_ms: unknown.iter().copied().max(),
            rate_limited: r
                .rows
                .iter()
                .map(|row| u64::from(row.metrics.rate_limited))
                .sum(),
            checker_violations: r.rows.iter().map(|row| row.violations.len() as u64).sum(),
            failing_seeds: r.failing.len() as u64,
        }
    }
}

/// What the frontier and the recommendation need of a point.
pub trait Candidate {
    fn passes(&self) -> bool;
    /// p99 completion-detection latency.
    fn latency(&self) -> Option<u64>;
    /// Mean polls per operation.
    fn polls(&self) -> Option<f64>;
}

/// The gate a point's verdict leaves out: coverage measures how far the fault draws reached on
/// these seeds, not the poll settings, and on a few hundred series it passes or fails by chance
/// (a rare cell hit once or not at all). The re-check gate, on other seeds, judges it.
pub const NOT_A_POINT_VERDICT: &str = "coverage";

/// Whether every gate row that decides a point's verdict passed.
pub fn all_pass(gates: &[GateRow]) -> bool {
    gates
        .iter()
        .filter(|g| g.gate != NOT_A_POINT_VERDICT)
        .all(|g| g.pass)
}

fn measured<C: Candidate>(c: &C) -> Option<(u64, f64)> {
    match (c.passes(), c.latency(), c.polls()) {
        (true, Some(l), Some(p)) if p.is_finite() => Some((l, p)),
        _ => None,
    }
}

/// The Pareto frontier of latency (p99) against polls (mean per operation) among the points
/// that pass every gate: those no other passing point beats on one and matches on the other.
/// Indices into `points`, ordered by polls ascending (latency descending along the frontier).
/// Points with identical measurements are all kept.
pub fn frontier<C: Candidate>(points: &[C]) -> Vec<usize> {
    let m: Vec<Option<(u64, f64)>> = points.iter().map(measured).collect();
    let mut out: Vec<usize> = (0..points.len())
        .filter(|&i| {
            let Some((li, pi)) = m[i] else { return false };
            !m.iter()
                .flatten()
                .any(|&(l, p)| l <= li && p <= pi && (l < li || p < pi))
        })
        .collect();
    out.sort_by(|&a, &b| {
        let (la, pa) = m[a].expect("on the frontier");
        let (lb, pb) = m[b].expect("on the frontier");
        pa.total_cmp(&pb).then(la.cmp(&lb)).then(a.cmp(&b))
    });
    out
}

/// The recommended point for a latency target: among the points that pass every gate and whose
/// p99 completion-detection latency is at most `target_ms`, the one with the fewest polls per
/// operation (ties: lower latency, then grid order). Always on the frontier. `None` when no
/// passing point meets the target.
pub fn recommend<C: Candidate>(points: &[C], target_ms: u64) -> Option<usize> {
    points
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            measured(c)
                .filter(|&(l, _)| l <= target_ms)
                .map(|(l, p)| (i, l, p))
        })
        .min_by(|a, b| a.2.total_cmp(&b.2).then(a.1.cmp(&b.1)).then(a.0.cmp(&b.0)))
        .map(|(i, _, _)| i)
}

/// For each frontier point (in `frontier` order), the latency targets for which it is the
/// recommendation: `[its p99, the next cheaper frontier point's p99)`, the cheapest open-ended.
pub fn target_bands<C: Candidate>(points: &[C], frontier: &[usize]) -> Vec<(u64, Option<u64>)> {
    frontier
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let lo = points[i].latency().unwrap_or(0);
            // The previous (cheaper) frontier point has a higher latency; below it, this one wins.
            let hi = k.checked_sub(1).and_then(|j| points[frontier[j]].latency());
            (lo, hi)
        })
        .collect()
}

/// Compare two optional numbers with `None` last (for sorting tables).
pub fn cmp_opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &str, pass: bool) -> GateRow {
        GateRow {
            protocol: "mcp".into(),
            gate: name.into(),
            threshold: "-".into(),
            measured: "-".into(),
            pass,
            insufficient: None,
        }
    }

    #[test]
    fn coverage_does_not_decide_a_points_verdict_other_gates_do() {
        assert!(all_pass(&[
            gate("second_operations", true),
            gate("coverage", false)
        ]));
        assert!(!all_pass(&[
            gate("second_operations", false),
            gate("coverage", true)
        ]));
    }

    struct P(bool, Option<u64>, Option<f64>);
    impl Candidate for P {
        fn passes(&self) -> bool {
            self.0
        }
        fn latency(&self) -> Option<u64> {
            self.1
        }
        fn polls(&self) -> Option<f64> {
            self.2
        }
    }

    #[test]
    fn frontier_keeps_the_undominated_passing_points() {
        let pts = [
            P(true, Some(1_000), Some(20.0)), // 0: fast, expensive: frontier
            P(true, Some(2_000), Some(10.0)), // 1: frontier
            P(true, Some(2_500), Some(12.0)), // 2: dominated by 1
            P(true, Some(8_000), Some(4.0)),  // 3: frontier, cheapest
            P(false, Some(500), Some(1.0)),   // 4: fails a gate: never on the frontier
            P(true, None, Some(3.0)),         // 5: no latency measured
            P(true, Some(2_000), Some(10.0)), // 6: equal to 1: kept
        ];
        assert_eq!(frontier(&pts), [3, 1, 6, 0]);
        assert_eq!(recommend(&pts, 10_000), Some(3));
        assert_eq!(recommend(&pts, 5_000), Some(1));
        assert_eq!(recommend(&pts, 1_500), Some(0));
        assert_eq!(recommend(&pts, 999), None);
        let f = frontier(&pts);
        assert_eq!(
            target_bands(&pts, &f),
            [
                (8_000, None),
                (2_000, Some(8_000)),
                (2_000, Some(2_000)),
                (1_000, Some(2_000))
            ]
        );
    }
}
