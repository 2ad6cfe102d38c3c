//! The toolop-sim command line. Exit codes: 0 ok, 1 a gate or check failed, 2 bad usage or input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use toolop_sim::campaign::sweep::{self, Loaded};
use toolop_sim::campaign::{bench, shrink};
use toolop_sim::judge::{checkers, gates};
use toolop_sim::report::{self, summary, timeline};
use toolop_sim::scenario::Scenario;
use toolop_sim::series;
use toolop_sim::series::faults::Schedule;

#[derive(Parser)]
#[command(
    name = "toolop-sim",
    about = "Deterministic simulation harness for the toolop executor"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one seeded series and print its parameters, summary and trace hash.
    Run {
        #[arg(long)]
        scenario: PathBuf,
        #[arg(long)]
        seed: u64,
        /// Where traces go: <reports>/<scenario>/<seed>/trace.jsonl
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
    },
    /// Replay one series byte for byte and print a timeline and the checkers' verdicts.
    Replay {
        /// Required unless --schedule names it.
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// Required unless --schedule names it.
        #[arg(long)]
        seed: Option<u64>,
        /// Replay a fault schedule file (from `shrink`, or edited by hand): its scenario and
        /// seed unless --scenario/--seed override them.
        #[arg(long)]
        schedule: Option<PathBuf>,
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
        /// Also show every send, reply and network frame.
        #[arg(long)]
        verbose: bool,
        /// Plant a mutation (an anti-pattern from `toolop-sim mutants`) in the executor.
        #[arg(long)]
        mutation: Option<String>,
    },
    /// Run a seeded sweep, check every invariant on every series, and judge the gates.
    Gate {
        /// Scenario files; series take turns over them.
        #[arg(long, num_args = 1.., required = true)]
        scenario: Vec<PathBuf>,
        #[arg(long, default_value_t = 10_000)]
        series: u64,
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        #[arg(long, default_value_t = 0)]
        start_seed: u64,
        /// Report folder name under --reports.
        #[arg(long, default_value = "gate")]
        run: String,
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
    },
    /// Shrink a failing series: record its fault schedule, remove firings, call nodes, the
    /// rollback and the short ttl while the same checker still fails, and write the schedule.
    /// Exit 0 shrunk, 1 the seed does not fail (nothing to shrink), 2 bad input.
    Shrink {
        #[arg(long)]
        scenario: PathBuf,
        #[arg(long)]
        seed: u64,
        /// Shrink against this checker (default: the first violation's).
        #[arg(long)]
        checker: Option<String>,
        /// Where the shrunk schedule goes (default <reports>/<scenario>/<seed>/schedule.toml);
        /// the recorded one goes next to it as <name>.original.toml.
        #[arg(long)]
        out: Option<PathBuf>,
        /// At most this many replays.
        #[arg(long, default_value_t = shrink::DEFAULT_MAX_REPLAYS)]
        max_replays: u32,
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
    },
    /// Measure the gate (series/s, events/s, simulated-to-wall ratio, peak memory) against a
    /// bare madsim runtime doing a comparable number of timer and message events.
    /// Run the gate against planted anti-patterns; exit 1 if any survives.
    Mutants {
        #[arg(long, num_args = 1.., default_values_t = toolop_sim::campaign::mutants::DEFAULT_SET.map(String::from))]
        scenario: Vec<String>,
        /// Series budget per mutation.
        #[arg(long, default_value_t = 2_000)]
        series: u64,
        #[arg(long, default_value_t = 2)]
        jobs: usize,
    },
    /// Evaluate a grid of executor poll settings on the same seeds; recommend one for a latency target.
    Tune(toolop_sim::campaign::tune::TuneArgs),
    /// Print the scenario reference (docs/scenario-reference.md) generated from the table the
    /// loader validates with. Exit 0.
    Reference,
    Bench {
        #[arg(long, num_args = 1.., required = true)]
        scenario: Vec<PathBuf>,
        #[arg(long, default_value_t = 10_000)]
        series: u64,
        #[arg(long, default_value_t = 2)]
        jobs: usize,
    },
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Run {
            scenario,
            seed,
            reports,
        } => run(&scenario, seed, &reports),
        Cmd::Replay {
            scenario,
            seed,
            schedule,
            reports,
            verbose,
            mutation,
        } => replay_cmd(
            scenario,
            seed,
            schedule,
            &reports,
            verbose,
            mutation.as_deref(),
        ),
        Cmd::Shrink {
            scenario,
            seed,
            checker,
            out,
            max_replays,
            reports,
        } => shrink_cmd(
            &scenario,
            seed,
            checker.as_deref(),
            out,
            max_replays,
            &reports,
        ),
        Cmd::Gate {
            scenario,
            series,
            jobs,
            start_seed,
            run,
            reports,
        } => gate(&scenario, series, jobs, start_seed, &run, &reports),
        Cmd::Bench {
            scenario,
            series,
            jobs,
        } => bench_cmd(&scenario, series, jobs),
        Cmd::Mutants {
            scenario,
            series,
            jobs,
        } => mutants_cmd(
            &scenario.iter().map(PathBuf::from).collect::<Vec<_>>(),
            series,
            jobs,
        ),
        Cmd::Tune(args) => toolop_sim::campaign::tune::main_tune(args),
        Cmd::Reference => {
            print!("{}", toolop_sim::scenario::reference::render());
            ExitCode::SUCCESS
        }
    }
}

fn load(path: &Path) -> Result<Scenario, ExitCode> {
    Scenario::load(path).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

fn load_all(paths: &[PathBuf]) -> Result<Vec<Loaded>, ExitCode> {
    paths
        .iter()
        .map(|p| {
            load(p).map(|scenario| Loaded {
                file: p.clone(),
                scenario,
            })
        })
        .collect()
}

fn write_trace(
    reports: &Path,
    name: &str,
    seed: u64,
    trace: &toolop_sim::trace::Trace,
) -> Result<PathBuf, ExitCode> {
    let dir = reports.join(name).join(seed.to_string());
    let file = dir.join("trace.jsonl");
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(&file, trace.canonical_bytes()))
        .map_err(|e| {
            eprintln!("error: cannot write {}: {e}", file.display());
            ExitCode::from(2)
        })?;
    Ok(file)
}

fn write_named_trace(
    reports: &Path,
    name: &str,
    seed: u64,
    file_name: &str,
    trace: &toolop_sim::trace::Trace,
) -> Result<PathBuf, ExitCode> {
    let file = reports.join(name).join(seed.to_string()).join(file_name);
    let dir = file.parent().unwrap_or(reports);
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&file, trace.canonical_bytes()))
        .map_err(|e| {
            eprintln!("error: cannot write {}: {e}", file.display());
            ExitCode::from(2)
        })?;
    Ok(file)
}

fn run(path: &Path, seed: u64, reports: &Path) -> ExitCode {
    let sc = match load(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    print!("{}", series::draw_params(&sc, seed).render());
    let result = match series::run_series(&sc, seed) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let file = match write_trace(reports, &sc.name, seed, &result.trace) {
        Ok(f) => f,
        Err(code) => return code,
    };
    print!("{}", summary::render(&result.trace));
    println!(
        "end: {} at {} ms simulated, {} events",
        result.end_reason,
        result.end_ms,
        result.trace.events.len()
    );
    println!("trace: {}", file.display());
    println!("trace hash: {}", result.hash);
    println!("replay: {}", sweep::replay_command(path, seed));
    ExitCode::SUCCESS
}

fn replay_cmd(
    scenario: Option<PathBuf>,
    seed: Option<u64>,
    schedule: Option<PathBuf>,
    reports: &Path,
    verbose: bool,
    mutation: Option<&str>,
) -> ExitCode {
    let mutation = match mutation
        .map(|m| toolop::core::mutation::Mutation::from_name(m).ok_or(m))
        .transpose()
    {
        Ok(m) => m,
        Err(name) => {
            let known: Vec<String> = toolop::core::mutation::Mutation::ALL
                .iter()
                .map(|m| m.name())
                .collect();
            eprintln!(
                "error: unknown mutation {name:?}; known: {}",
                known.join(", ")
            );
            return ExitCode::from(2);
        }
    };
    let schedule = match schedule.as_deref().map(Schedule::load).transpose() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let path = scenario.or_else(|| schedule.as_ref().map(|s| PathBuf::from(&s.scenario)));
    let seed = seed.or(schedule.as_ref().map(|s| s.seed));
    let (Some(path), Some(seed)) = (path, seed) else {
        eprintln!("error: replay needs --scenario and --seed, or --schedule");
        return ExitCode::from(2);
    };
    replay(&path, seed, schedule.as_ref(), reports, verbose, mutation)
}

fn replay(
    path: &Path,
    seed: u64,
    schedule: Option<&Schedule>,
    reports: &Path,
    verbose: bool,
    mutation: Option<toolop::core::mutation::Mutation>,
) -> ExitCode {
    let mut sc = match load(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    sc.executor.core.mutation = mutation;
    let params = match series::params_with(&sc, seed, schedule) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match series::run_series_with(&sc, seed, schedule) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", params.render());
    if let Some(s) = schedule {
        println!("schedule: {}", s.size(params.nodes.len()));
        for f in &result.firings {
            let asks = result.asks.get(&f.fault).copied().unwrap_or(0);
            println!(
                "  fired {} ask {} of {asks} (decision {}) at {} ms",
                f.fault.name(),
                f.ask,
                f.decision.unwrap_or(0),
                f.t_ms.unwrap_or(0)
            );
        }
        let listed = s.firings.len();
        if listed != result.firings.len() {
            println!(
                "  ({} listed firing(s) never reached their decision point)",
                listed - result.firings.len().min(listed)
            );
        }
    }
    println!("timeline:");
    print!("{}", timeline::render(&result.trace, verbose));
    println!("summary:");
    print!("{}", summary::render(&result.trace));
    let violations = checkers::check_all(&result.trace);
    if violations.is_empty() {
        println!("checkers: all properties hold");
    } else {
        println!("checkers: {} violation(s)", violations.len());
        for v in &violations {
            println!(
                "  {} {}: {}",
                v.checker,
                v.node.as_deref().unwrap_or("-"),
                v.detail
            );
        }
    }
    if let Some(expected) = schedule.and_then(|s| s.checker.as_deref()) {
        let again = violations.iter().any(|v| v.checker == expected);
        println!(
            "schedule expects {expected}: {}",
            if again {
                "reproduced"
            } else {
                "NOT reproduced"
            }
        );
    }
    // A schedule's trace goes next to the seed's own, never over it.
    let written = match schedule {
        None => write_trace(reports, &sc.name, seed, &result.trace),
        Some(_) => write_named_trace(
            reports,
            &sc.name,
            seed,
            "schedule-trace.jsonl",
            &result.trace,
        ),
    };
    match written {
        Ok(f) => println!("trace: {}", f.display()),
        Err(code) => return code,
    }
    println!("trace hash: {}", result.hash);
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn gate(
    paths: &[PathBuf],
    series: u64,
    jobs: usize,
    start_seed: u64,
    run_name: &str,
    reports: &Path,
) -> ExitCode {
    let scenarios = match load_all(paths) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if series == 0 {
        eprintln!("error: --series must be positive");
        return ExitCode::from(2);
    }
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    println!(
        "gate: {series} series over {} (seeds {start_seed}..{}), {jobs} jobs",
        names.join(", "),
        start_seed + series - 1
    );
    let progress = report::Progress::new(series);
    let started = Instant::now();
    let (rows, _) = sweep::run(&scenarios, start_seed, series, jobs, &|| progress.inc(1));
    progress.finish();
    let wall_ms = started.elapsed().as_millis() as u64;
    let r = gates::evaluate(&scenarios, rows, run_name, start_seed, wall_ms);
    println!("{}", report::gate_table(&r));
    println!("{}", report::coverage_table(&r));
    if !r.failing.is_empty() {
        println!("{}", report::failing_list(&r));
    }
    let dir = reports.join(run_name);
    match report::write_all(&dir, &r) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
        }
        Err(e) => {
            eprintln!("error: cannot write reports to {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    }
    shrink_failing(&scenarios, &r, &reports.join(run_name).join("shrunk"), jobs);
    println!(
        "{} in {:.2} s wall",
        if r.passed() { "PASS" } else { "FAIL" },
        wall_ms as f64 / 1000.0
    );
    if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Per gate report: the replay budget of each shrink.
const GATE_SHRINK_REPLAYS: u32 = 200;

/// The gate's shrinking step: the first failing seed of each failing checker, shrunk against
/// that checker, its schedule written under `dir`, the sizes and the replay command printed.
fn shrink_failing(scenarios: &[Loaded], r: &gates::SweepReport, dir: &Path, jobs: usize) {
    let mut firsts: Vec<(&'static str, &gates::SeriesRow)> = vec![];
    for row in &r.rows {
        for v in &row.violations {
            if !firsts.iter().any(|(c, _)| *c == v.checker) {
                firsts.push((v.checker, row));
            }
        }
    }
    if firsts.is_empty() {
        return;
    }
    println!(
        "shrinking the first failing seed of {} failing checker(s):",
        firsts.len()
    );
    let results: Vec<String> = std::thread::scope(|scope| {
        let mut out = vec![];
        for batch in firsts.chunks(jobs.max(1)) {
            let handles: Vec<_> = batch
                .iter()
                .map(|&(checker, row)| {
                    scope.spawn(move || shrink_one(scenarios, checker, row, dir))
                })
                .collect();
            out.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| "  shrink panicked".into())),
            );
        }
        out
    });
    for line in results {
        println!("{line}");
    }
}

fn shrink_one(scenarios: &[Loaded], checker: &str, row: &gates::SeriesRow, dir: &Path) -> String {
    let head = format!("  {checker} (seed {} of {})", row.seed, row.scenario_file);
    let Some(l) = scenarios
        .iter()
        .find(|l| l.file.display().to_string() == row.scenario_file)
    else {
        return format!("{head}: scenario not found");
    };
    let out = dir.join(format!("{checker}-{}-{}.toml", l.scenario.name, row.seed));
    match shrink::shrink_to_file(
        &l.scenario,
        &row.scenario_file,
        row.seed,
        Some(checker),
        GATE_SHRINK_REPLAYS,
        &out,
    ) {
        Ok(Some((s, _))) => format!(
            "{head}: {}
    replay: {}",
            s.render(),
            shrink::replay_command(&out)
        ),
        Ok(None) => format!("{head}: did not fail again (not shrunk)"),
        Err(e) => format!("{head}: cannot shrink: {e}"),
    }
}

fn shrink_cmd(
    path: &Path,
    seed: u64,
    checker: Option<&str>,
    out: Option<PathBuf>,
    max_replays: u32,
    reports: &Path,
) -> ExitCode {
    let sc = match load(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(c) = checker.filter(|c| !checkers::CHECKERS.iter().any(|(n, _)| n == c)) {
        let names: Vec<&str> = checkers::CHECKERS.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "error: --checker {c}: no such checker (one of {})",
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    let out = out.unwrap_or_else(|| shrink::default_path(reports, &sc, seed));
    let file = path.display().to_string();
    match shrink::shrink_to_file(&sc, &file, seed, checker, max_replays, &out) {
        Ok(Some((s, original))) => {
            println!("shrink scenario={file} seed={seed} checker={}", s.checker);
            println!(
                "  original: {} (trace hash {})",
                s.original_size, s.original_hash
            );
            println!(
                "  shrunk:   {} (trace hash {})",
                s.shrunk_size, s.shrunk_hash
            );
            println!(
                "  replays:  {}{} in {:.2} s wall",
                s.replays,
                if s.budget_exhausted {
                    " (budget spent: may shrink further)"
                } else {
                    ""
                },
                s.wall_ms as f64 / 1000.0
            );
            println!("  still fails: {}: {}", s.checker, s.detail);
            println!("wrote {}", out.display());
            println!("wrote {} (the recorded schedule)", original.display());
            println!("replay: {}", shrink::replay_command(&out));
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!(
                "seed {seed} of {file} does not fail{}: nothing to shrink",
                checker.map(|c| format!(" {c}")).unwrap_or_default()
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn bench_cmd(paths: &[PathBuf], series: u64, jobs: usize) -> ExitCode {
    let scenarios = match load_all(paths) {
        Ok(s) => s,
        Err(code) => return code,
    };
    print!("{}", bench::run(&scenarios, series, jobs));
    ExitCode::SUCCESS
}

fn mutants_cmd(paths: &[PathBuf], series: u64, jobs: usize) -> ExitCode {
    let scenarios = match load_all(paths) {
        Ok(s) => s,
        Err(code) => return code,
    };
    println!(
        "mutants: {} mutations, up to {series} series each over {}",
        toolop::core::mutation::Mutation::ALL.len(),
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let base = toolop_sim::campaign::mutants::baseline(&scenarios, series, jobs);
    let results: Vec<_> = toolop::core::mutation::Mutation::ALL
        .iter()
        .map(|&m| toolop_sim::campaign::mutants::hunt(&scenarios, m, series, jobs))
        .collect();
    print!("{}", toolop_sim::campaign::mutants::table(&results, &base));
    for r in results.iter().filter(|r| r.caught()) {
        if let Some((_, seed, file)) = &r.first_failure {
            println!(
                "  {}: toolop-sim replay --scenario {file} --seed {seed} --mutation {}",
                r.mutation.name(),
                r.mutation.name()
            );
        }
    }
    let survivors = results.iter().filter(|r| !r.caught()).count();
    let clean = base.values().all(|&n| n == 0);
    if survivors == 0 && clean {
        println!("PASS: every mutation caught; the unmutated executor is clean");
        ExitCode::SUCCESS
    } else {
        println!(
            "FAIL: {survivors} mutation(s) survived{}",
            if clean {
                ""
            } else {
                "; the unmutated executor tripped checkers"
            }
        );
        ExitCode::from(1)
    }
}
