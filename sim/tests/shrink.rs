//! Fault schedules as data: a recorded schedule replays a series byte for byte, and a shrunk
//! schedule of a failing series (the canary) replays to the same checker failure.
#![cfg(madsim)]

use std::path::PathBuf;
use std::process::Command;

use toolop_sim::campaign::shrink;
use toolop_sim::judge::checkers;
use toolop_sim::scenario::Scenario;
use toolop_sim::series::faults::Schedule;
use toolop_sim::series::{self, run_series, run_series_with};

const CANARY: &str = "scenarios/canary_must_fail.toml";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(rel: &str) -> Scenario {
    Scenario::load(&root().join(rel)).unwrap()
}

/// The first seeds of `sc` that fail, with their first checker.
fn failing_seeds(sc: &Scenario, n: usize) -> Vec<(u64, &'static str)> {
    (0..200u64)
        .filter_map(|seed| {
            let r = run_series(sc, seed).unwrap();
            shrink::first_failure(&r).map(|c| (seed, c))
        })
        .take(n)
        .collect()
}

#[test]
fn a_recorded_schedule_replays_to_the_same_trace_hash() {
    // Seeds with firings, on both fault scenarios; the canary too.
    for (rel, seeds) in [
        ("scenarios/mcp_faults.toml", [1u64, 2, 3, 451]),
        (CANARY, [0, 1, 2, 3]),
    ] {
        let sc = load(rel);
        let mut fired = 0;
        for seed in seeds {
            let r = run_series(&sc, seed).unwrap();
            fired += r.firings.len();
            let schedule = series::schedule_of(rel, &r, &sc);
            // Through the file form, as `replay --schedule` reads it.
            let schedule = Schedule::from_toml(&schedule.to_toml().unwrap()).unwrap();
            let again = run_series_with(&sc, seed, Some(&schedule)).unwrap();
            assert_eq!(
                again.hash, r.hash,
                "replay: toolop-sim replay --scenario {rel} --seed {seed}"
            );
            assert_eq!(again.firings, r.firings);
        }
        assert!(
            fired > 0,
            "{rel}: no firings in the sample, the test proves nothing"
        );
    }
}

#[test]
fn an_empty_schedule_fires_nothing() {
    let sc = load("scenarios/mcp_faults.toml");
    let r = run_series(&sc, 1).unwrap();
    assert!(!r.firings.is_empty());
    let empty = Schedule {
        firings: vec![],
        ..series::schedule_of("x", &r, &sc)
    };
    let again = run_series_with(&sc, 1, Some(&empty)).unwrap();
    assert!(again.firings.is_empty());
    assert!(!again.trace.events.iter().any(
        |e| matches!(&e.what, toolop_sim::trace::What::Fault { decision, .. } if *decision > 0)
    ));
}

#[test]
fn a_shrunk_canary_schedule_replays_to_the_same_checker_failure() {
    let sc = load(CANARY);
    let failing = failing_seeds(&sc, 3);
    assert!(
        !failing.is_empty(),
        "the canary should fail some of its first 200 seeds"
    );
    for (seed, checker) in failing {
        let s = shrink::shrink_seed(&sc, CANARY, seed, None, 120)
            .unwrap()
            .expect("a failing seed shrinks");
        assert_eq!(s.checker, checker);
        assert!(
            s.shrunk_size.firings <= s.original_size.firings,
            "seed {seed}: {}",
            s.render()
        );
        assert!(
            s.shrunk_size.nodes <= s.original_size.nodes,
            "seed {seed}: {}",
            s.render()
        );
        assert!(s.replays <= 121, "the budget holds");
        // Through the file form: the shrunk schedule replays to the same checker, twice alike.
        let text = s.shrunk.to_toml().unwrap();
        let file = Schedule::from_toml(&text).unwrap();
        assert_eq!(file.checker.as_deref(), Some(checker));
        let a = run_series_with(&sc, seed, Some(&file)).unwrap();
        let b = run_series_with(&sc, seed, Some(&file)).unwrap();
        assert_eq!(
            a.hash, b.hash,
            "seed {seed}: a schedule replays deterministically"
        );
        assert_eq!(
            a.hash, s.shrunk_hash,
            "seed {seed}: the file replays the run the shrinker judged"
        );
        assert!(
            checkers::check_all(&a.trace)
                .iter()
                .any(|v| v.checker == checker),
            "seed {seed}: shrunk schedule lost {checker}:\n{text}"
        );
    }
}

#[test]
fn shrinking_keeps_the_firing_a_fault_dependent_failure_needs() {
    // A planted bug that only shows after a lost submit reply: the shrunk schedule must keep
    // at least one firing, and replaying it without that firing must pass the checker.
    let mut sc = load("scenarios/mcp_faults.toml");
    sc.executor.core.mutation = Some(toolop::core::mutation::Mutation::FreshKeyOnSubmitTimeout);
    let (seed, checker) = failing_seeds(&sc, 1)
        .first()
        .copied()
        .expect("the planted bug shows within 200 seeds");
    let s = shrink::shrink_seed(
        &sc,
        "mcp_faults+fresh_key_on_submit_timeout",
        seed,
        None,
        150,
    )
    .unwrap()
    .unwrap();
    assert!(
        s.shrunk_size.firings >= 1 && s.shrunk_size.firings <= s.original_size.firings,
        "seed {seed}: {}",
        s.render()
    );
    let a = run_series_with(&sc, seed, Some(&s.shrunk)).unwrap();
    assert!(checkers::check_all(&a.trace)
        .iter()
        .any(|v| v.checker == checker));
    let none = Schedule {
        firings: vec![],
        ..s.shrunk.clone()
    };
    let b = run_series_with(&sc, seed, Some(&none)).unwrap();
    assert!(
        !checkers::check_all(&b.trace)
            .iter()
            .any(|v| v.checker == checker),
        "seed {seed}: fails without faults too"
    );
}

#[test]
fn a_passing_seed_has_nothing_to_shrink() {
    let sc = load("scenarios/smoke.toml");
    assert!(
        shrink::shrink_seed(&sc, "scenarios/smoke.toml", 42, None, 10)
            .unwrap()
            .is_none()
    );
}

#[test]
fn shrink_and_replay_schedule_on_the_command_line() {
    let sc = load(CANARY);
    let (seed, checker) = failing_seeds(&sc, 1)[0];
    let dir = std::env::temp_dir().join(format!("toolop-shrink-{}", std::process::id()));
    let out = dir.join("s.toml");
    let sim = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
            .current_dir(root())
            .args(args)
            .output()
            .unwrap()
    };
    let o = sim(&[
        "shrink",
        "--scenario",
        CANARY,
        "--seed",
        &seed.to_string(),
        "--out",
        out.to_str().unwrap(),
        "--max-replays",
        "60",
        "--reports",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("original: ") && stdout.contains("shrunk: "),
        "{stdout}"
    );
    let cmd = format!("toolop-sim replay --schedule {}", out.display());
    assert!(stdout.contains(&cmd), "{stdout}");
    assert!(shrink::original_path(&out).exists());
    let o = sim(&[
        "replay",
        "--schedule",
        out.to_str().unwrap(),
        "--reports",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failing schedule replays to a failure:\n{stdout}"
    );
    assert!(
        stdout.contains(&format!("schedule expects {checker}: reproduced")),
        "{stdout}"
    );
    // Nothing to shrink: exit 1; bad input: exit 2.
    let o = sim(&[
        "shrink",
        "--scenario",
        "scenarios/smoke.toml",
        "--seed",
        "42",
        "--out",
        dir.join("n.toml").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = sim(&["shrink", "--scenario", "no/such.toml", "--seed", "1"]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::write(
        dir.join("bad.toml"),
        "scenario = \"scenarios/smoke.toml\"\nseed = 1\nnodes = [\"n999\"]\n",
    )
    .unwrap();
    let o = sim(&[
        "replay",
        "--schedule",
        dir.join("bad.toml").to_str().unwrap(),
        "--reports",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
