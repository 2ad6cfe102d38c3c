//! Gates: thresholds over a sweep of series. Types shared by the gate command and the reports.

use std::collections::BTreeMap;

use serde::Serialize;
use toolop::record::LocalState;

use crate::campaign::sweep::{replay_command, Loaded};
use crate::judge::checkers::Violation;
use crate::judge::coverage::{self, ProtocolCoverage};
use crate::judge::metrics::SeriesMetrics;
use crate::scenario::Protocol;
use crate::series::faults::FaultKind;

pub mod latency;

/// One series of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesRow {
    pub seed: u64,
    pub scenario: String,
    /// Path of the scenario file, for the replay command.
    pub scenario_file: String,
    pub protocol: String,
    pub metrics: SeriesMetrics,
    pub violations: Vec<Violation>,
    pub trace_hash: String,
    pub end_reason: String,
    pub events: usize,
    pub sim_end_ms: u64,
}

/// One gate's verdict (per protocol, and "all").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateRow {
    pub protocol: String,
    pub gate: String,
    pub threshold: String,
    pub measured: String,
    /// Not failing. A gate with too few samples to decide is not failing either, but it is no
    /// PASS: `insufficient` says so, and what is missing.
    pub pass: bool,
    /// Too few samples to decide, and what would be needed (reported as INSUFFICIENT).
    pub insufficient: Option<String>,
}

impl GateRow {
    /// "PASS", "FAIL" or "INSUFFICIENT".
    pub fn verdict(&self) -> &'static str {
        match (self.pass, &self.insufficient) {
            (false, _) => "FAIL",
            (true, Some(_)) => "INSUFFICIENT",
            (true, None) => "PASS",
        }
    }
}

/// A seed that failed something, with the command that replays it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailingSeed {
    pub scenario_file: String,
    pub seed: u64,
    pub reasons: Vec<String>,
    pub replay: String,
}

/// Everything a sweep produced; the reports are views of this.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepReport {
    /// Run name: the folder under reports/.
    pub run: String,
    pub start_seed: u64,
    pub series: u64,
    pub rows: Vec<SeriesRow>,
    pub gates: Vec<GateRow>,
    /// Hits per (protocol, fault, state) over the sweep.
    pub coverage: BTreeMap<(String, FaultKind, LocalState), u64>,
    /// Per protocol of the set: the catalogue's declared cells and which must be hit. The
    /// coverage gate and the coverage matrices both read this.
    pub coverage_plan: Vec<ProtocolCoverage>,
    pub coverage_min_hits: u64,
    pub failing: Vec<FailingSeed>,
    pub wall_ms: u64,
}

impl SweepReport {
    pub fn passed(&self) -> bool {
        self.gates.iter().all(|g| g.pass)
    }

    /// Gates that could not decide for lack of samples.
    pub fn insufficient(&self) -> usize {
        self.gates
            .iter()
            .filter(|g| g.pass && g.insufficient.is_some())
            .count()
    }
}

fn row(protocol: &str, gate: &str, threshold: String, measured: String, pass: bool) -> GateRow {
    GateRow {
        protocol: protocol.into(),
        gate: gate.into(),
        threshold,
        measured,
        pass,
        insufficient: None,
    }
}

/// Judge a sweep. Rows are grouped by protocol; each group is judged with the thresholds of
/// the first scenario of that protocol in the set, and coverage is required where any of the
/// group's scenarios asks for it.
pub fn evaluate(
    scenarios: &[Loaded],
    rows: Vec<SeriesRow>,
    run: &str,
    start_seed: u64,
    wall_ms: u64,
) -> SweepReport {
    // Protocols in order of first appearance, each once.
    let mut protocols: Vec<Protocol> = vec![];
    for l in scenarios {
        if !protocols.contains(&l.scenario.protocol) {
            protocols.push(l.scenario.protocol);
        }
    }
    let mut gates = vec![];
    let mut coverage: BTreeMap<(String, FaultKind, LocalState), u64> = BTreeMap::new();
    for r in &rows {
        for (&(f, s), &n) in &r.metrics.coverage {
            *coverage.entry((r.protocol.clone(), f, s)).or_default() += u64::from(n);
        }
    }
    let mut coverage_plan = vec![];
    let mut coverage_min_hits = 0;
    for &protocol in &protocols {
        let p = &protocol.name().to_string();
        let group: Vec<&SeriesRow> = rows.iter().filter(|r| &r.protocol == p).collect();
        let first = scenarios
            .iter()
            .find(|l| l.scenario.protocol == protocol)
            .expect("protocol came from a scenario");
        let g = &first.scenario.gates;
        let sum = |f: &dyn Fn(&SeriesRow) -> u64| group.iter().map(|r| f(r)).sum::<u64>();
        let divergences = sum(&|r| u64::from(r.metrics.divergences));
        gates.push(row(
            p,
            "terminal_state_divergence",
            format!("<= {}", g.max_divergences),
            divergences.to_string(),
            divergences <= g.max_divergences,
        ));
        let seconds = sum(&|r| u64::from(r.metrics.second_operations));
        gates.push(row(
            p,
            "second_operations",
            format!("<= {}", g.max_second_operations),
            seconds.to_string(),
            seconds <= g.max_second_operations,
        ));
        let qps_bound = g.max_qps.unwrap_or(first.scenario.executor.max_qps);
        let busiest = group
            .iter()
            .map(|r| r.metrics.max_sends_in_window)
            .max()
            .unwrap_or(0);
        gates.push(row(
            p,
            "poll_rate_per_second",
            format!("<= {qps_bound}"),
            busiest.to_string(),
            busiest <= qps_bound,
        ));
        let cancels: Vec<u64> = group
            .iter()
            .flat_map(|r| r.metrics.cancel_confirmation_ms.iter().copied())
            .collect();
        gates.push(latency::percentile_gate(
            p,
            "cancel_confirmation_p99_ms",
            &cancels,
            99.0,
            g.cancel_confirmation_p99_ms,
        ));
        let unknowns: Vec<u64> = group
            .iter()
            .flat_map(|r| r.metrics.unknown_reconciliation_ms.iter().copied())
            .collect();
        gates.push(latency::max_gate(
            p,
            "unknown_reconciliation_max_ms",
            &unknowns,
            g.unknown_reconciliation_max_ms,
        ));
        let handed_over = sum(&|r| u64::from(r.metrics.unknown_hand_offs));
        let false_unknowns = sum(&|r| u64::from(r.metrics.false_unknowns));
        let undecidable = sum(&|r| u64::from(r.metrics.undecidable_unknowns));
        let pct = if handed_over == 0 {
            0.0
        } else {
            100.0 * false_unknowns as f64 / handed_over as f64
        };
        gates.push(row(
            p,
            "false_unknown_pct",
            format!("<= {}", g.max_false_unknown_pct),
            format!(
                "{pct:.2} ({false_unknowns} of {handed_over} hand-offs; {undecidable} undecidable)"
            ),
            pct <= g.max_false_unknown_pct,
        ));
        let outbox = sum(&|r| u64::from(r.metrics.outbox_entries));
        let untraceable = sum(&|r| u64::from(r.metrics.untraceable_outbox));
        let pct = if outbox == 0 {
            100.0
        } else {
            100.0 * (outbox - untraceable.min(outbox)) as f64 / outbox as f64
        };
        gates.push(row(
            p,
            "outbox_traceable_pct",
            format!(">= {}", g.outbox_traceable_min_pct),
            format!("{pct:.2}"),
            pct >= g.outbox_traceable_min_pct,
        ));
        let extra = sum(&|r| u64::from(r.metrics.extra_receipts));
        gates.push(row(
            p,
            "receipts_per_call_node",
            format!("<= {}", g.max_receipts_per_node),
            if extra == 0 {
                "1".into()
            } else {
                format!("{extra} extra")
            },
            extra == 0,
        ));
        let violations = sum(&|r| r.violations.len() as u64);
        gates.push(row(
            p,
            "checker_violations",
            "0".into(),
            violations.to_string(),
            violations == 0,
        ));
        let plan = coverage::of_protocol(scenarios, protocol);
        if plan.gated {
            coverage_min_hits = coverage_min_hits.max(plan.min_hits);
            let missing: Vec<String> = plan
                .missing(&coverage)
                .iter()
                .map(|c| format!("{}@{}", c.fault.name(), c.state.name()))
                .collect();
            let measured = if missing.is_empty() {
                format!("{} cells hit", plan.required())
            } else {
                format!("missing {}", missing.join(", "))
            };
            gates.push(row(
                p,
                "coverage",
                format!("every reachable cell >= {}", plan.min_hits),
                measured,
                missing.is_empty(),
            ));
        }
        coverage_plan.push(plan);
    }
    let failing = rows
        .iter()
        .filter(|r| !r.violations.is_empty())
        .map(|r| FailingSeed {
            scenario_file: r.scenario_file.clone(),
            seed: r.seed,
            reasons: r
                .violations
                .iter()
                .map(|v| {
                    format!(
                        "{}: {}{}",
                        v.checker,
                        v.node
                            .as_deref()
                            .map(|n| format!("{n}: "))
                            .unwrap_or_default(),
                        v.detail
                    )
                })
                .collect(),
            replay: replay_command(&r.scenario_file, r.seed),
        })
        .collect();
    SweepReport {
        run: run.into(),
        start_seed,
        series: rows.len() as u64,
        rows,
        gates,
        coverage,
        coverage_plan,
        coverage_min_hits,
        failing,
        wall_ms,
    }
}
