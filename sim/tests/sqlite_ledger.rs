//! The simulator on the SQLite ledger (`ledger = "sqlite"`, in memory): deterministic like the
//! in-memory default (same seed, same hash, alone, after other seeds and in a fresh process), and
//! equivalent to it: the same seed gives the same trace on either ledger, so every commit,
//! refusal and receipt the SQL transactions made is the one the reference ledger made.

use std::path::PathBuf;
use std::process::Command;

use toolop_sim::scenario::{LedgerKind, Scenario};
use toolop_sim::series::run_series;

const FILE: &str = "scenarios/mcp_sqlite.toml";

fn sqlite() -> Scenario {
    let sc = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(FILE),
    )
    .unwrap();
    assert_eq!(sc.ledger, LedgerKind::Sqlite);
    sc
}

fn hash(sc: &Scenario, seed: u64) -> String {
    run_series(sc, seed)
        .unwrap_or_else(|e| {
            panic!("{e}; replay: toolop-sim replay --scenario {FILE} --seed {seed}")
        })
        .hash
}

#[test]
fn same_seed_same_hash_alone_and_after_other_seeds() {
    let sc = sqlite();
    let first = hash(&sc, 7);
    for other in [3u64, 17, 101] {
        hash(&sc, other);
    }
    assert_eq!(
        hash(&sc, 7),
        first,
        "replay: toolop-sim replay --scenario {FILE} --seed 7"
    );
}

#[test]
fn same_seed_same_hash_in_a_second_process() {
    let sc = sqlite();
    let seed = 11;
    let expected = hash(&sc, seed);
    let reports = std::env::temp_dir().join(format!("toolop-sqlite-det-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .args(["run", "--scenario"])
        .arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(FILE),
        )
        .args(["--seed", &seed.to_string(), "--reports"])
        .arg(&reports)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let printed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("trace hash: "))
        .unwrap_or_else(|| panic!("no hash line in:\n{stdout}"));
    assert_eq!(
        printed, expected,
        "replay: toolop-sim run --scenario {FILE} --seed {seed}"
    );
    let _ = std::fs::remove_dir_all(&reports);
}

#[test]
fn the_sqlite_ledger_makes_the_same_trace_as_the_reference_ledger() {
    let sc = sqlite();
    let mut memory = sc.clone();
    memory.ledger = LedgerKind::Memory;
    for seed in [1u64, 5, 23, 42] {
        let on_sqlite = run_series(&sc, seed).unwrap();
        let on_memory = run_series(&memory, seed).unwrap();
        assert!(
            on_sqlite
                .trace
                .events
                .iter()
                .any(|e| matches!(e.what, toolop_sim::trace::What::Ledger { .. })),
            "seed {seed}: the world recorded no ledger write"
        );
        assert_eq!(
            on_sqlite.hash, on_memory.hash,
            "seed {seed}: the ledgers diverged; replay: toolop-sim replay --scenario {FILE} --seed {seed}"
        );
    }
}
