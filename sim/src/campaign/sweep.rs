//! A sweep: many seeded series over a set of scenarios, spread over worker threads, each
//! series on its own fresh OS thread. Only per-series rows are kept, never whole traces, so
//! memory stays flat in the number of series.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::judge::checkers;
use crate::judge::gates::SeriesRow;
use crate::judge::metrics;
use crate::scenario::overrides::{self, Setting};
use crate::scenario::Scenario;
use crate::series::{self, SeriesResult};

/// A scenario, the file it came from and the `--set` settings applied to it (for replay
/// commands).
#[derive(Clone, Debug)]
pub struct Loaded {
    pub file: PathBuf,
    pub scenario: Scenario,
    pub sets: Vec<Setting>,
}

impl Loaded {
    /// A file as it is, with no settings.
    pub fn plain(file: PathBuf, scenario: Scenario) -> Loaded {
        Loaded {
            file,
            scenario,
            sets: vec![],
        }
    }

    /// Where the scenario came from, as a command gives it: the file, then ` --set ...` for
    /// each setting. Rows carry it as `scenario_file`, so every replay command made from a row
    /// applies the same settings.
    pub fn source(&self) -> String {
        format!("{}{}", self.file.display(), overrides::flags(&self.sets))
    }
}

/// Which scenario and seed the `i`-th series of a sweep runs: scenarios take turns.
pub fn assignment(scenarios: &[Loaded], start_seed: u64, i: u64) -> (usize, u64) {
    assert!(!scenarios.is_empty(), "a sweep needs at least one scenario");
    ((i % scenarios.len() as u64) as usize, start_seed + i)
}

/// The exact command that replays one series; `source` is a [`Loaded::source`] (a file and
/// its settings).
pub fn replay_command(source: impl std::fmt::Display, seed: u64) -> String {
    format!("toolop-sim replay --scenario {source} --seed {seed}")
}

/// Turn one finished series into its row: checkers and metrics read the trace, then it is dropped.
pub fn row_of(l: &Loaded, r: &SeriesResult) -> SeriesRow {
    let (metrics, violations) = metrics::measure_and_check(&r.trace);
    SeriesRow {
        seed: r.params.seed,
        scenario: l.scenario.name.clone(),
        scenario_file: l.source(),
        protocol: l.scenario.protocol.name().to_string(),
        metrics,
        violations,
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
    /// Frames that crossed the simulated network, by size in bytes -> count (the benchmark's
    /// floor encodes and decodes as many messages of these sizes).
    pub frame_sizes: BTreeMap<usize, u64>,
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
    let hooks = Hooks {
        on_done: &|_| on_done(),
        ..Hooks::default()
    };
    run_plan(scenarios, &plan, jobs, &hooks)
}

/// Wall time after which a series still running is reported (with its replay command) while
/// the sweep goes on: the world's limits end every series, so this names the seed of a hang in
/// the harness itself before a CI job's own timeout kills the run without a word.
pub const SLOW_SERIES_WARN: Duration = Duration::from_secs(120);

/// What a sweep tells its caller and listens to.
pub struct Hooks<'a> {
    /// Called with each finished row (progress, --fail-fast).
    pub on_done: &'a (dyn Fn(&SeriesRow) + Sync),
    /// Called once per series still running after `slow_after` of wall time, with a message
    /// naming its seed and the command that reproduces it alone.
    pub on_slow: &'a (dyn Fn(&str) + Sync),
    pub slow_after: Duration,
    /// Once set, no new series starts; those running finish.
    pub stop: &'a AtomicBool,
}

static NEVER: AtomicBool = AtomicBool::new(false);

impl Default for Hooks<'_> {
    fn default() -> Self {
        Hooks {
            on_done: &|_| {},
            on_slow: &|m| eprintln!("warning: {m}"),
            slow_after: SLOW_SERIES_WARN,
            stop: &NEVER,
        }
    }
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

    /// The seed of the `i`-th series.
    pub fn seed_at(&self, i: u64) -> u64 {
        match self {
            Plan::Range { start_seed, .. } => start_seed + i,
            Plan::Seeds { seeds, .. } => seeds[i as usize],
        }
    }

    /// The scenario index and seed of the `i`-th series.
    pub(crate) fn series(&self, scenarios: &[Loaded], i: u64) -> (usize, u64) {
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

/// Run the series of `plan` on `jobs` worker threads, with a watchdog that reports series
/// running longer than `hooks.slow_after`. Rows come back ordered by series index; fewer than
/// planned when `hooks.stop` was set.
pub fn run_plan(
    scenarios: &[Loaded],
    plan: &Plan,
    jobs: usize,
    hooks: &Hooks,
) -> (Vec<SeriesRow>, SweepTotals) {
    let series = plan.len();
    let next = AtomicU64::new(0);
    let rows: Mutex<Vec<(u64, SeriesRow)>> = Mutex::new(Vec::with_capacity(series as usize));
    let totals = Mutex::new(SweepTotals::default());
    let scenarios = Arc::new(scenarios.to_vec());
    // Series in flight: index -> (scenario, seed, started, reported).
    let inflight: Mutex<InFlight> = Mutex::new(BTreeMap::new());
    let workers_left = (Mutex::new(jobs.max(1)), Condvar::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if hooks.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= series {
                        break;
                    }
                    let (which, seed) = plan.series(&scenarios, i);
                    let l = &scenarios[which];
                    let started = (which, seed, Instant::now(), false);
                    inflight.lock().expect("inflight lock").insert(i, started);
                    let row = match series::run_series(&l.scenario, seed) {
                        Ok(r) => {
                            let frames = r.trace.events.iter().filter_map(|e| match &e.what {
                                crate::trace::What::Net { bytes, .. } => Some(*bytes),
                                _ => None,
                            });
                            let frames: Vec<usize> = frames.collect();
                            let mut t = totals.lock().expect("totals lock");
                            t.events += r.trace.events.len() as u64;
                            t.sim_ms += r.end_ms;
                            for b in frames {
                                *t.frame_sizes.entry(b).or_default() += 1;
                            }
                            row_of(l, &r)
                        }
                        Err(e) => failed_row(l, seed, e),
                    };
                    inflight.lock().expect("inflight lock").remove(&i);
                    (hooks.on_done)(&row);
                    rows.lock().expect("rows lock").push((i, row));
                }
                let (left, done) = &workers_left;
                *left.lock().expect("workers lock") -= 1;
                done.notify_all();
            });
        }
        // The watchdog: wakes once a second (or when the last worker ends) until all have ended.
        let (left, done) = &workers_left;
        let mut n = left.lock().expect("workers lock");
        while *n > 0 {
            n = done
                .wait_timeout(n, Duration::from_secs(1))
                .expect("workers lock")
                .0;
            report_slow(
                &mut inflight.lock().expect("inflight lock"),
                &scenarios,
                hooks,
            );
        }
    });
    let mut rows = rows.into_inner().expect("rows lock");
    rows.sort_by_key(|(i, _)| *i);
    (
        rows.into_iter().map(|(_, r)| r).collect(),
        totals.into_inner().expect("totals lock"),
    )
}

/// Series in flight: index -> (scenario, seed, started, reported).
type InFlight = BTreeMap<u64, (usize, u64, Instant, bool)>;

/// The watchdog's look: every series running longer than `hooks.slow_after` and not yet
/// reported is reported once.
fn report_slow(inflight: &mut InFlight, scenarios: &[Loaded], hooks: &Hooks) {
    for (which, seed, started, reported) in inflight.values_mut() {
        if !*reported && started.elapsed() >= hooks.slow_after {
            *reported = true;
            let source = scenarios[*which].source();
            (hooks.on_slow)(&format!(
                "series seed {seed} of {source} has run {} s of wall time and is still running; alone: {}",
                started.elapsed().as_secs(),
                replay_command(&source, *seed)
            ));
        }
    }
}

/// The violation of a series that could not run.
pub const SERIES_RAN: &str = "series_ran";

/// A series that could not run at all (a panic in the world) is a failing row, never a skip.
fn failed_row(l: &Loaded, seed: u64, error: String) -> SeriesRow {
    SeriesRow {
        seed,
        scenario: l.scenario.name.clone(),
        scenario_file: l.source(),
        protocol: l.scenario.protocol.name().to_string(),
        metrics: Default::default(),
        violations: vec![checkers::Violation {
            checker: SERIES_RAN,
            node: None,
            detail: error,
        }],
        trace_hash: String::new(),
        end_reason: "series failed to run".into(),
        events: 0,
        sim_end_ms: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series past the wall-time threshold is named once, with its seed and replay command;
    /// one under it is not.
    #[test]
    fn the_watchdog_names_a_slow_series_once() {
        let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/smoke.toml");
        let loaded = [Loaded::plain(file.clone(), Scenario::load(&file).unwrap())];
        let said = Mutex::new(vec![]);
        let on_slow = |m: &str| said.lock().unwrap().push(m.to_string());
        let mut inflight: InFlight = BTreeMap::from([(0, (0, 7, Instant::now(), false))]);
        let patient = Hooks {
            on_slow: &on_slow,
            slow_after: Duration::from_secs(3_600),
            ..Hooks::default()
        };
        report_slow(&mut inflight, &loaded, &patient);
        assert!(said.lock().unwrap().is_empty());
        let hasty = Hooks {
            slow_after: Duration::ZERO,
            ..patient
        };
        report_slow(&mut inflight, &loaded, &hasty);
        report_slow(&mut inflight, &loaded, &hasty);
        let said = said.into_inner().unwrap();
        assert_eq!(said.len(), 1, "reported once: {said:?}");
        assert!(
            said[0].contains("series seed 7 of ")
                && said[0].contains("toolop-sim replay --scenario"),
            "{}",
            said[0]
        );
    }
}
