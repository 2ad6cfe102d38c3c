//! The toolop-sim command line. Exit codes: 0 ok, 1 a gate or check failed, 2 bad usage or input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use toolop_sim::scenario::Scenario;
use toolop_sim::sweep::{self, Loaded};
use toolop_sim::{bench, checkers, gates, report, summary, timeline, world};

#[derive(Parser)]
#[command(name = "toolop-sim", about = "Deterministic simulation harness for the toolop executor")]
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
        #[arg(long)]
        scenario: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value = "reports")]
        reports: PathBuf,
        /// Also show every send, reply and network frame.
        #[arg(long)]
        verbose: bool,
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
    /// Measure the gate (series/s, events/s, simulated-to-wall ratio, peak memory) against a
    /// bare madsim runtime doing a comparable number of timer and message events.
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
        Cmd::Run { scenario, seed, reports } => run(&scenario, seed, &reports),
        Cmd::Replay { scenario, seed, reports, verbose } => replay(&scenario, seed, &reports, verbose),
        Cmd::Gate { scenario, series, jobs, start_seed, run, reports } => gate(&scenario, series, jobs, start_seed, &run, &reports),
        Cmd::Bench { scenario, series, jobs } => bench_cmd(&scenario, series, jobs),
    }
}

fn load(path: &Path) -> Result<Scenario, ExitCode> {
    Scenario::load(path).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

fn load_all(paths: &[PathBuf]) -> Result<Vec<Loaded>, ExitCode> {
    paths.iter().map(|p| load(p).map(|scenario| Loaded { file: p.clone(), scenario })).collect()
}

fn write_trace(reports: &Path, name: &str, seed: u64, trace: &toolop_sim::trace::Trace) -> Result<PathBuf, ExitCode> {
    let dir = reports.join(name).join(seed.to_string());
    let file = dir.join("trace.jsonl");
    std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, trace.canonical_bytes())).map_err(|e| {
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
    print!("{}", world::draw_params(&sc, seed).render());
    let result = match world::run_series(&sc, seed) {
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
    println!("end: {} at {} ms simulated, {} events", result.end_reason, result.end_ms, result.trace.events.len());
    println!("trace: {}", file.display());
    println!("trace hash: {}", result.hash);
    println!("replay: {}", sweep::replay_command(path, seed));
    ExitCode::SUCCESS
}

fn replay(path: &Path, seed: u64, reports: &Path, verbose: bool) -> ExitCode {
    let sc = match load(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let result = match world::run_series(&sc, seed) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", world::draw_params(&sc, seed).render());
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
            println!("  {} {}: {}", v.checker, v.node.as_deref().unwrap_or("-"), v.detail);
        }
    }
    match write_trace(reports, &sc.name, seed, &result.trace) {
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

fn gate(paths: &[PathBuf], series: u64, jobs: usize, start_seed: u64, run_name: &str, reports: &Path) -> ExitCode {
    let scenarios = match load_all(paths) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if series == 0 {
        eprintln!("error: --series must be positive");
        return ExitCode::from(2);
    }
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    println!("gate: {series} series over {} (seeds {start_seed}..{}), {jobs} jobs", names.join(", "), start_seed + series - 1);
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
    println!("{} in {:.2} s wall", if r.passed() { "PASS" } else { "FAIL" }, wall_ms as f64 / 1000.0);
    if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
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
