//! The toolop-sim command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolop_sim::scenario::Scenario;
use toolop_sim::{summary, world};

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
}

/// Exit codes: 0 ok, 1 a check failed, 2 bad usage or input.
fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run { scenario, seed, reports } => run(&scenario, seed, &reports),
    }
}

fn run(path: &PathBuf, seed: u64, reports: &std::path::Path) -> ExitCode {
    let sc = match Scenario::load(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", world::draw_params(&sc, seed).render());
    let result = match world::run_series(&sc, seed) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", summary::render(&result.trace));
    let dir = reports.join(&sc.name).join(seed.to_string());
    let file = dir.join("trace.jsonl");
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, result.trace.canonical_bytes())) {
        eprintln!("error: cannot write {}: {e}", file.display());
        return ExitCode::from(2);
    }
    println!("end: {} at {} ms simulated, {} events", result.end_reason, result.end_ms, result.trace.events.len());
    println!("trace: {}", file.display());
    println!("trace hash: {}", result.hash);
    println!("replay: toolop-sim run --scenario {} --seed {seed}", path.display());
    ExitCode::SUCCESS
}
