//! A sweep: many seeded series over a set of scenarios, spread over worker threads, each
//! series on its own fresh OS thread. Only per-series rows are kept, never whole traces, so
//! memory stays flat in the number of series.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::judge::checkers;
use crate::judge::gates::SeriesRow;
use crate::judge::metrics;
use crate::scenario::Scenario;
use crate::series::{self, SeriesResult};

/// A scenario and the file it came from (for replay commands).
#[derive(Clone, Debug)]
pub struct Loaded {
    pub file: PathBuf,
    pub scenario: Scenario,
}

/// Which scenario and seed the `i`-th series of a sweep runs: scenarios take turns.
pub fn assignment(scenarios: &[Loaded], start_seed: u64, i: u64) -> (usize, u64) {
    assert!(!scenarios.is_empty(), "a sweep needs at least one scenario");
    ((i % scenarios.len() as u64) as usize, start_seed + i)
}

/// The exact command that replays one series.
pub fn replay_command(file: &std::path::Path, seed: u64) -> String {
    format!(
        "toolop-sim replay --scenario {} --seed {seed}",
        file.display()
    )
}

/// Turn one finished series into its row: checkers and metrics read the trace, then it is dropped.
pub fn row_of(l: &Loaded, r: &SeriesResult) -> SeriesRow {
    SeriesRow {
        seed: r.params.seed,
        scenario: l.scenario.name.clone(),
        scenario_file: l.file.display().to_string(),
        protocol: l.scenario.protocol.name().to_string(),
        metrics: metrics::measure(&r.trace),
        violations: checkers::check_all(&r.trace),
        trace_hash: r.hash.clone(),
        end_reason: r.end_reason.clone(),
        events: r.trace.events.len(),
        sim_end_ms: r.end_ms,
    }
}

/// Totals the benchmark reports.
#[derive(Clone, Debug, Default)]
pub struct SweepTotals {
    pub events: u64,
    pub sim_ms: u64,
}

/// Run `series` series starting at `start_seed` on `jobs` worker threads. `on_done` is called
/// once per finished series (progress). Rows come back ordered by series index.
pub fn run(
    scenarios: &[Loaded],
    start_seed: u64,
    series: u64,
    jobs: usize,
    on_done: &(dyn Fn() + Sync),
) -> (Vec<SeriesRow>, SweepTotals) {
    let plan = Plan::Range { start_seed, series };
    run_plan(
        scenarios,
        &plan,
        jobs,
        &|_| on_done(),
        &AtomicBool::new(false),
    )
}

/// Which series a sweep runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// `series` seeds from `start_seed`; scenarios take turns.
    Range { start_seed: u64, series: u64 },
    /// Chosen seeds (`--seeds`), each on the scenario a range from `start_seed` gave it, so a
    /// failing seed of a gate is re-judged on the same scenario.
    Seeds { start_seed: u64, seeds: Vec<u64> },
}

impl Plan {
    pub fn len(&self) -> u64 {
        match self {
            Plan::Range { series, .. } => *series,
            Plan::Seeds { seeds, .. } => seeds.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn start_seed(&self) -> u64 {
        match self {
            Plan::Range { start_seed, .. } | Plan::Seeds { start_seed, .. } => *start_seed,
        }
    }

    /// The scenario index and seed of the `i`-th series.
    fn series(&self, scenarios: &[Loaded], i: u64) -> (usize, u64) {
        match self {
            Plan::Range { start_seed, .. } => assignment(scenarios, *start_seed, i),
            Plan::Seeds { start_seed, seeds } => {
                let seed = seeds[i as usize];
                assert!(seed >= *start_seed, "seeds below --start-seed are refused");
                (
                    ((seed - start_seed) % scenarios.len() as u64) as usize,
                    seed,
                )
            }
        }
    }
}

/// Run the series of `plan` on `jobs` worker threads. `on_done` sees each finished row
/// (progress, --fail-fast). Once `stop` is set no new series starts; those running finish. Rows
/// come back ordered by series index; fewer than planned when stopped.
pub fn run_plan(
    scenarios: &[Loaded],
    plan: &Plan,
    jobs: usize,
    on_done: &(dyn Fn(&SeriesRow) + Sync),
    stop: &AtomicBool,
) -> (Vec<SeriesRow>, SweepTotals) {
    let series = plan.len();
    let next = AtomicU64::new(0);
    let rows: Mutex<Vec<(u64, SeriesRow)>> = Mutex::new(Vec::with_capacity(series as usize));
    let totals = Mutex::new(SweepTotals::default());
    let scenarios = Arc::new(scenarios.to_vec());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= series {
                    return;
                }
                let (which, seed) = plan.series(&scenarios, i);
                let l = &scenarios[which];
                let row = match series::run_series(&l.scenario, seed) {
                    Ok(r) => {
                        let mut t = totals.lock().expect("totals lock");
                        t.events += r.trace.events.len() as u64;
                        t.sim_ms += r.end_ms;
                        row_of(l, &r)
                    }
                    Err(e) => failed_row(l, seed, e),
                };
                on_done(&row);
                rows.lock().expect("rows lock").push((i, row));
            });
        }
    });
    let mut rows = rows.into_inner().expect("rows lock");
    rows.sort_by_key(|(i, _)| *i);
    (
        rows.into_iter().map(|(_, r)| r).collect(),
        totals.into_inner().expect("totals lock"),
    )
}

/// A series that could not run at all (a panic in the world) is a failing row, never a skip.
fn failed_row(l: &Loaded, seed: u64, error: String) -> SeriesRow {
    SeriesRow {
        seed,
        scenario: l.scenario.name.clone(),
        scenario_file: l.file.display().to_string(),
        protocol: l.scenario.protocol.name().to_string(),
        metrics: Default::default(),
        violations: vec![checkers::Violation {
            checker: "series_ran",
            node: None,
            detail: error,
        }],
        trace_hash: String::new(),
        end_reason: "series failed to run".into(),
        events: 0,
        sim_end_ms: 0,
    }
}
