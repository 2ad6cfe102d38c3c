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
//!
//! Beside the gate, every seed of `sim/tests/data/regression-seeds.txt` (seeds that once failed a
//! checker) runs alone and must pass every checker, both as its scenario is now and as it was
//! when the seed was found (`--set`): a fix that only such a seed exercises is judged here too,
//! where `cargo mutants` looks.
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

/// How the simulator is built here: the cargo profile and the target folder (see the module
/// comment), and cargo itself.
struct SimBuild {
    cargo: String,
    profile: String,
    target_dir: PathBuf,
}

impl SimBuild {
    fn from_env() -> SimBuild {
        SimBuild {
            cargo: std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
            profile: std::env::var("TOOLOP_SIM_GATE_PROFILE").unwrap_or_else(|_| "release".into()),
            target_dir: std::env::var_os("TOOLOP_SIM_GATE_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root().join("target/sim")),
        }
    }

    /// `cargo <verb> --profile P -p toolop-sim`, built with madsim into the target folder.
    fn cargo(&self, verb: &str) -> Command {
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(root())
            // CARGO_ENCODED_RUSTFLAGS (cargo-mutants' --cap-lints) would override RUSTFLAGS and
            // silently build the simulator without madsim.
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("RUSTFLAGS", "--cfg madsim")
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .args([verb, "-q", "--profile", &self.profile, "-p", "toolop-sim"]);
        cmd
    }

    /// The built binary (cargo puts the `dev` profile under `debug`, any other under its name).
    fn binary(&self) -> PathBuf {
        let dir = if self.profile == "dev" {
            "debug"
        } else {
            &self.profile
        };
        self.target_dir.join(dir).join("toolop-sim")
    }
}

#[test]
fn the_simulated_gate_passes_on_this_source_tree() {
    let series = std::env::var("TOOLOP_SIM_GATE_SERIES").unwrap_or_else(|_| "500".into());
    let build = SimBuild::from_env();
    let profile = &build.profile;
    let set = default_set();
    assert!(
        !set.is_empty(),
        "scenarios/default-set.txt lists no scenario"
    );
    let reports = std::env::temp_dir().join(format!("toolop-sim-gate-{}", std::process::id()));
    let out = build
        .cargo("run")
        .args(["--", "gate", "--fail-fast"])
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

/// The seeds of `sim/tests/data/regression-seeds.txt`: (scenario file, seed), in file order.
fn regression_seeds() -> Vec<(String, u64)> {
    let list = root().join("sim/tests/data/regression-seeds.txt");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    let mut seeds = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let parsed = match words[..] {
            [name, seed] => seed
                .parse::<u64>()
                .ok()
                .map(|s| (format!("scenarios/{name}.toml"), s)),
            _ => None,
        };
        let Some(entry) = parsed else {
            panic!(
                "{}:{}: want `<scenario> <seed>`, got {line:?}",
                list.display(),
                i + 1
            )
        };
        seeds.push(entry);
    }
    seeds
}

/// The settings a regression seed runs under: the scenario as it is now and, where the scenario
/// has gained a draw since (operators' cancel requests, session 37; series without the toolop
/// extensions, session 38; both drawn last), with those draws off: the series the seed was
/// found in, so the mechanism it pinned still replays. sim/tests/gate.rs does the same.
fn settings_of(scenario: &str) -> Vec<Vec<&'static str>> {
    const AS_FOUND: [&str; 2] = [
        "workload.caller.cancel_by_request_rate=0",
        "server.toolop_extensions_rate=1",
    ];
    let path = root().join(scenario);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{scenario}: {e}"));
    let doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{scenario}: {e}"));
    // A number at a dotted path, or the field's default when the file leaves it out.
    let rate = |path: &str, default: f64| {
        let mut v: Option<&toml::Value> = None;
        for (i, part) in path.split('.').enumerate() {
            v = if i == 0 {
                doc.get(part)
            } else {
                v.and_then(|t| t.get(part))
            };
        }
        v.and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64)))
            .unwrap_or(default)
    };
    let requests = rate("workload.caller.cancel_by_request_rate", 0.0);
    let extensions = rate("server.toolop_extensions_rate", 1.0);
    if requests > 0.0 || extensions < 1.0 {
        vec![vec![], AS_FOUND.to_vec()]
    } else {
        vec![vec![]]
    }
}

#[test]
fn every_regression_seed_passes_every_checker() {
    let seeds = regression_seeds();
    assert!(seeds.len() >= 40, "only {} regression seeds", seeds.len());
    let build = SimBuild::from_env();
    let out = build.cargo("build").output().expect("cargo runs");
    assert!(
        out.status.success(),
        "building the simulator failed\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports = std::env::temp_dir().join(format!("toolop-sim-regress-{}", std::process::id()));
    let mut failed = vec![];
    let mut runs = 0;
    for (scenario, seed) in &seeds {
        for sets in settings_of(scenario) {
            let mut args = vec![];
            for s in &sets {
                args.extend(["--set", s]);
            }
            let out = Command::new(build.binary())
                .current_dir(root())
                .args(["run", "--color", "never", "--scenario", scenario])
                .args(&args)
                .args(["--seed", &seed.to_string(), "--reports"])
                .arg(&reports)
                .output()
                .expect("the simulator runs");
            runs += 1;
            if !out.status.success() {
                let flags: String = sets.iter().map(|s| format!(" --set {s}")).collect();
                failed.push(format!(
                    "toolop-sim replay --scenario {scenario}{flags} --seed {seed}\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(runs > seeds.len(), "no seed ran as it was found");
    let _ = std::fs::remove_dir_all(&reports);
    assert!(
        failed.is_empty(),
        "{} of {} regression seeds failed:\n{}",
        failed.len(),
        seeds.len(),
        failed.join("\n")
    );
}
