//! The simulated gate as a test of this crate: it builds the simulator from this very source
//! tree (under `--cfg madsim`, in `target/sim`) and runs the gate over the default set. Unit
//! tests see one function at a time; this sees the executor as the simulator judges it, which
//! is what lets `cargo mutants` score a mutant of the executor by the checkers and gates (see
//! `make mutation`), not only by unit tests.
//!
//! `TOOLOP_SIM_GATE_SERIES` (default 500), `TOOLOP_SIM_GATE_PROFILE` (default `release`;
//! `make mutation` uses the incremental `mutants` profile) and `TOOLOP_SIM_GATE_TARGET_DIR`
//! (default `target/sim` of this tree; `make mutation` points every scratch copy at the
//! worktree's, so a mutant rebuilds only the two crates of this workspace) tune it.
//!
//! The gate runs with `--fail-fast`: this test needs a verdict, not a report, and a mutant that
//! breaks a checker in series 3 should not cost the other series.
#![cfg(not(madsim))]

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The default gate set, one path per line (the Makefile reads the same file).
fn default_set() -> Vec<String> {
    let list = root().join("scenarios/default-set.txt");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[test]
fn the_simulated_gate_passes_on_this_source_tree() {
    let series = std::env::var("TOOLOP_SIM_GATE_SERIES").unwrap_or_else(|_| "500".into());
    let profile = std::env::var("TOOLOP_SIM_GATE_PROFILE").unwrap_or_else(|_| "release".into());
    let set = default_set();
    assert!(
        !set.is_empty(),
        "scenarios/default-set.txt lists no scenario"
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = std::env::var_os("TOOLOP_SIM_GATE_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/sim"));
    let reports = std::env::temp_dir().join(format!("toolop-sim-gate-{}", std::process::id()));
    let out = Command::new(cargo)
        .current_dir(root())
        // CARGO_ENCODED_RUSTFLAGS (cargo-mutants' --cap-lints) would override RUSTFLAGS and
        // silently build the simulator without madsim.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", "--cfg madsim")
        .env("CARGO_TARGET_DIR", &target_dir)
        .args([
            "run",
            "-q",
            "--profile",
            &profile,
            "-p",
            "toolop-sim",
            "--",
            "gate",
            "--fail-fast",
        ])
        .args(["--series", &series, "--run", "sim-gate", "--reports"])
        .arg(&reports)
        .arg("--scenario")
        .args(&set)
        .output()
        .expect("cargo runs");
    let _ = std::fs::remove_dir_all(&reports);
    assert!(
        out.status.success(),
        "the simulated gate failed ({} series, profile {profile}); reproduce with\n  make gate SERIES={series}\n{}\n{}",
        series,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
