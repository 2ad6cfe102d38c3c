//! `toolop-sim hashes`: the determinism list (trace hashes of seeds 0..N of each scenario),
//! printed, written, or checked against a committed copy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use toolop_sim::campaign::hashes;

use super::{usage_error, EXIT_FAIL};

/// The `hashes` command line.
#[derive(clap::Args)]
pub struct HashesArgs {
    /// Scenario files; each runs every seed (default: the release gate's set).
    #[arg(long, num_args = 1.., default_values_t = hashes::DEFAULT_SET.map(String::from))]
    pub scenario: Vec<String>,
    /// Seeds 0..N of each scenario (1 to 10,000,000).
    #[arg(long, default_value_t = hashes::SEEDS, value_parser = crate::series_parser())]
    pub seeds: u64,
    /// Worker threads (1 to 256).
    #[arg(long, default_value_t = 2, value_parser = toolop_sim::campaign::jobs_parser)]
    pub jobs: usize,
    /// Write the list to this file (e.g. sim/tests/data/trace-hashes.txt) instead of stdout.
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// Compare with this list instead of printing; exit 1 naming every seed whose hash differs.
    #[arg(long, conflicts_with = "write")]
    pub check: Option<PathBuf>,
}

pub fn hashes_cmd(a: HashesArgs) -> ExitCode {
    let paths: Vec<PathBuf> = a.scenario.iter().map(PathBuf::from).collect();
    let scenarios = match super::load_all(&paths, &[]) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let committed = match a.check.as_deref().map(read_list).transpose() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let fresh = hashes::compute(&scenarios, a.seeds, a.jobs);
    let text = hashes::render(&fresh, a.seeds);
    match (&a.write, committed) {
        (Some(file), _) => match std::fs::write(file, &text) {
            Ok(()) => {
                println!("wrote {} ({} hashes)", file.display(), fresh.len());
                ExitCode::SUCCESS
            }
            Err(e) => usage_error(format!("cannot write {}: {e}", file.display())),
        },
        (None, Some(committed)) => {
            let diff = hashes::differences(&committed, &fresh, 20);
            if diff.is_empty() {
                println!("{} hashes agree with the list", fresh.len());
                return ExitCode::SUCCESS;
            }
            println!("trace hashes differ from the list:");
            for d in diff {
                println!("  {d}");
            }
            println!(
                "if the change is intended, `{}` and say why the traces changed in the commit message",
                hashes::REGENERATE
            );
            ExitCode::from(EXIT_FAIL)
        }
        (None, None) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
    }
}

fn read_list(file: &Path) -> Result<Vec<hashes::HashLine>, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    hashes::parse(&text).map_err(|e| format!("{}: {e}", file.display()))
}
