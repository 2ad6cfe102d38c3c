//! Determinism is a feature: the same seed gives the same trace hash alone, after other seeds,
//! in fresh threads, in a second process, and under madsim's own determinism check.
#![cfg(madsim)]

use std::path::PathBuf;
use std::process::Command;

use toolop_sim::scenario::Scenario;
use toolop_sim::series::{self, run_series};

fn smoke() -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/smoke.toml");
    Scenario::load(&path).unwrap()
}

fn hash(sc: &Scenario, seed: u64) -> String {
    run_series(sc, seed).unwrap_or_else(|e| panic!("seed {seed}: {e}; replay: toolop-sim run --scenario scenarios/smoke.toml --seed {seed}")).hash
}

#[test]
fn same_seed_same_hash_alone_and_after_other_seeds() {
    let sc = smoke();
    let seeds = [1u64, 2, 3, 42, 1_000_003];
    let first: Vec<String> = seeds.iter().map(|&s| hash(&sc, s)).collect();
    // The same seeds again, in reverse order: each series on its own fresh thread.
    let mut again: Vec<String> = seeds.iter().rev().map(|&s| hash(&sc, s)).collect();
    again.reverse();
    assert_eq!(first, again, "a seed's hash depended on what ran before it");
    let distinct: std::collections::BTreeSet<_> = first.iter().collect();
    assert_eq!(
        distinct.len(),
        seeds.len(),
        "different seeds should give different traces"
    );
}

#[test]
fn same_seed_same_hash_in_a_second_process() {
    let sc = smoke();
    let seed = 42;
    let here = run_series(&sc, seed).unwrap();
    let expected = here.hash.clone();
    let reports = std::env::temp_dir().join(format!("toolop-det-{}", std::process::id()));
    let smoke_file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/smoke.toml");
    let stdout = sim(&[
        "run",
        "--scenario",
        &smoke_file.display().to_string(),
        "--seed",
        &seed.to_string(),
        "--reports",
        &reports.display().to_string(),
    ]);
    let printed = printed_hash(&stdout);
    assert_eq!(
        printed, expected,
        "replay: toolop-sim run --scenario scenarios/smoke.toml --seed {seed}"
    );
    // The trace file on disk is this trace, byte for byte (the hash is not over the file's
    // JSON but over the same events' binary form, sim/src/trace_hash.rs).
    let bytes = std::fs::read(
        reports
            .join("smoke")
            .join(seed.to_string())
            .join("trace.jsonl"),
    )
    .unwrap();
    assert!(
        bytes == here.trace.canonical_bytes(),
        "the trace file differs from the trace the hash was taken of; replay: toolop-sim run --scenario scenarios/smoke.toml --seed {seed}"
    );
    let _ = std::fs::remove_dir_all(&reports);
}

#[test]
fn madsim_determinism_check_passes() {
    // madsim runs the future twice and checks every random draw matches; the future must be a
    // plain fn, so it reads its seed from the runtime.
    for seed in [5u64, 6, 7] {
        // What run_series does before a runtime starts; without it, the first series of the
        // process would pay the validator's entropy and the check would (rightly) fail.
        series::entropy::settle();
        madsim::runtime::Runtime::check_determinism(seed, madsim::Config::default(), || async {
            let sc = smoke();
            let seed = madsim::runtime::Handle::current().seed();
            let params = series::draw_params(&sc, seed);
            let r = series::world_main(sc, params).await;
            assert!(!r.trace.events.is_empty());
        });
    }
}

#[test]
fn every_series_settles_and_records_a_receipt_or_reconciliation() {
    let sc = smoke();
    for seed in 0..30u64 {
        let r = run_series(&sc, seed).unwrap();
        assert_eq!(
            r.end_reason, "all call nodes settled",
            "seed {seed}: replay: toolop-sim run --scenario scenarios/smoke.toml --seed {seed}"
        );
        let nodes = toolop_sim::report::summary::nodes(&r.trace);
        assert_eq!(nodes.len(), r.params.nodes.len());
        for (id, n) in nodes {
            assert!(
                n.terminal.is_some() || n.reconcile.is_some(),
                "seed {seed} node {id} has neither receipt nor reconciliation"
            );
        }
    }
}

/// The fault scenarios of every protocol replay to the same hash: the codecs, the task service
/// and the fault layer draw only from the seed.
#[test]
fn fault_scenarios_of_every_protocol_replay_to_the_same_hash() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in [
        "scenarios/mcp_faults.toml",
        "scenarios/aip151_faults.toml",
        "scenarios/mcp_ext_faults.toml",
    ] {
        let sc = Scenario::load(&root.join(file)).unwrap();
        for seed in [3u64, 17, 101] {
            let a = run_series(&sc, seed).unwrap();
            let b = run_series(&sc, seed).unwrap();
            assert_eq!(
                a.hash, b.hash,
                "replay: toolop-sim replay --scenario {file} --seed {seed}"
            );
        }
    }
}

/// The smoke scenario with a fixed 3 s poll interval: the first validated approval answer of a
/// process used to come before two replies due at the same instant, so a seed replayed alone
/// (seed 3, 11 and 20 among 0..24) ordered that tie differently from its sweep.
fn fixed_interval_smoke(dir: &std::path::Path) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/smoke.toml")).unwrap();
    let mut edited = text;
    for (from, to) in [
        ("initial_interval_ms = 500", "initial_interval_ms = 3000"),
        ("backoff_multiplier = 1.5", "backoff_multiplier = 1.0"),
        ("interval_cap_ms = 10_000", "interval_cap_ms = 9000"),
        (
            "honor_server_interval = true",
            "honor_server_interval = false",
        ),
    ] {
        assert!(
            edited.contains(from),
            "smoke.toml no longer has `{from}`: update this test's edits"
        );
        edited = edited.replace(from, to);
    }
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("fixed_interval_smoke.toml");
    std::fs::write(&file, edited).unwrap();
    file
}

fn sim(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "toolop-sim {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The hash `toolop-sim run` prints.
fn printed_hash(stdout: &str) -> &str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("trace hash: "))
        .unwrap_or_else(|| panic!("no trace hash line in {stdout}"))
}

/// Each seed's hash from a gate sweep in a fresh process, by seed.
fn gate_hashes(scenario: &str, series: u64, jobs: usize, reports: &str) -> Vec<String> {
    let run = format!("jobs{jobs}");
    let (n, j) = (series.to_string(), jobs.to_string());
    sim(&[
        "gate",
        "--scenario",
        scenario,
        "--series",
        &n,
        "--jobs",
        &j,
        "--run",
        &run,
        "--reports",
        reports,
    ]);
    let mut rdr =
        csv::Reader::from_path(PathBuf::from(reports).join(&run).join("series.csv")).unwrap();
    let header = rdr.headers().unwrap().clone();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (seed, hash) = (at("seed"), at("trace_hash"));
    let rows: Vec<(u64, String)> = rdr
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r[seed].parse().unwrap(), r[hash].to_string())
        })
        .collect();
    assert_eq!(
        rows.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        (0..series).collect::<Vec<_>>()
    );
    rows.into_iter().map(|(_, h)| h).collect()
}

/// What a user does with a failing seed: replay it alone, in a new process. It must be the
/// series the sweep ran, whatever --jobs the sweep had and whatever ran before it there.
#[test]
fn a_seed_replayed_alone_in_a_fresh_process_is_the_series_its_sweep_ran() {
    let dir = std::env::temp_dir().join(format!("toolop-det-alone-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = fixed_interval_smoke(&dir);
    let (scenario, reports) = (file.display().to_string(), dir.display().to_string());
    let series = 24;
    let by_jobs: Vec<Vec<String>> = [1, 2, 4]
        .iter()
        .map(|&jobs| gate_hashes(&scenario, series, jobs, &reports))
        .collect();
    for (jobs, hashes) in [(2, &by_jobs[1]), (4, &by_jobs[2])] {
        assert_eq!(
            hashes, &by_jobs[0],
            "--jobs {jobs} ran other series than --jobs 1: toolop-sim gate --scenario {scenario} --series {series} --jobs {jobs}"
        );
    }
    for (seed, swept) in by_jobs[0].iter().enumerate() {
        let seed = seed.to_string();
        let out = sim(&[
            "run",
            "--scenario",
            &scenario,
            "--seed",
            &seed,
            "--reports",
            &reports,
        ]);
        let alone = printed_hash(&out);
        assert_eq!(
            alone, swept,
            "seed {seed} alone is not the series its sweep ran: toolop-sim run --scenario {scenario} --seed {seed}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
