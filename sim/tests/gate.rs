//! The gate command end to end: it passes on the default set, fails the canary, replays any
//! seed of a sweep to the same hash, and refuses bad input with exit code 2.
#![cfg(madsim)]

use std::path::{Path, PathBuf};

mod common;
use common::{root, sim};

use toolop_sim::scenario::overrides::{self, Setting};
use toolop_sim::scenario::Scenario;
use toolop_sim::series::run_series;

fn tmp(name: &str) -> PathBuf {
    common::tmp("gate", name)
}

#[test]
fn default_set_passes_and_reports_parse_and_replay_matches_the_sweep() {
    let reports = tmp("default");
    let out = sim(&[
        "gate",
        "--scenario",
        "scenarios/smoke.toml",
        "scenarios/mcp_faults.toml",
        "--series",
        "300",
        "--start-seed",
        "1000",
        "--reports",
        reports.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "gate failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("GATE") && stdout.contains("coverage"),
        "gate table and coverage matrix printed"
    );
    let dir = reports.join("gate");
    let mut rdr = csv::Reader::from_path(dir.join("series.csv")).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("column {name}"))
    };
    let (seed_col, hash_col, scen_col) = (col("seed"), col("trace_hash"), col("scenario"));
    let rows: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 300);
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(
        junit.matches("<testcase").count() >= 8,
        "one test case per gate"
    );
    assert!(!junit.contains("<failure"));
    assert!(std::fs::read_to_string(dir.join("summary.md"))
        .unwrap()
        .contains("PASS"));
    // A sample of seeds replays to the sweep's trace hash.
    for r in rows.iter().step_by(37) {
        let seed: u64 = r[seed_col].parse().unwrap();
        let file = root()
            .join("scenarios")
            .join(format!("{}.toml", &r[scen_col]));
        let sc = Scenario::load(&file).unwrap();
        let again = run_series(&sc, seed).unwrap();
        assert_eq!(
            again.hash,
            &r[hash_col],
            "replay: toolop-sim replay --scenario {} --seed {seed}",
            file.display()
        );
    }
    let _ = std::fs::remove_dir_all(&reports);
}

#[test]
fn the_canary_must_fail_the_gate() {
    let reports = tmp("canary");
    let out = sim(&[
        "gate",
        "--scenario",
        "scenarios/canary_must_fail.toml",
        "--series",
        "100",
        "--reports",
        reports.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the canary passed the gate:\n{stdout}"
    );
    let failing: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_end().ends_with("FAIL"))
        .collect();
    assert!(
        failing.iter().any(|l| l.contains("poll_rate_per_second")),
        "{stdout}"
    );
    assert!(
        failing
            .iter()
            .any(|l| l.contains("cancel_confirmation_p99_ms")),
        "{stdout}"
    );
    assert!(
        stdout.contains("toolop-sim replay --scenario scenarios/canary_must_fail.toml --seed"),
        "failing seeds come with replay commands"
    );
    let junit = std::fs::read_to_string(reports.join("gate").join("junit.xml")).unwrap();
    assert!(junit.contains("<failure"));
    let _ = std::fs::remove_dir_all(&reports);
}

fn bad_input(text: &str, expect: &[&str]) {
    let dir = tmp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, text).unwrap();
    let out = sim(&[
        "gate",
        "--scenario",
        file.to_str().unwrap(),
        "--series",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.toml"), "names the file: {stderr}");
    for e in expect {
        assert!(stderr.contains(e), "expected {e:?} in {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_scenarios_unknown_faults_and_rates_out_of_range_exit_2() {
    let good = std::fs::read_to_string(root().join("scenarios/mcp_faults.toml")).unwrap();
    bad_input(
        "name = \"x\"\n[server\n",
        &["field `server`", "unclosed table", "line 2"],
    );
    bad_input(
        &good.replace("lost_request = 0.1", "lost_requests = 0.1"),
        &["faults.rates.lost_requests", "unknown fault"],
    );
    bad_input(
        &good.replace("lost_request = 0.1", "lost_request = 1.5"),
        &["faults.rates.lost_request", "outside [0, 1]"],
    );
    bad_input(
        &good.replace("call_nodes = [4, 8]", "call_nodes = [8, 4]"),
        &["workload.call_nodes"],
    );
    let out = sim(&["gate", "--scenario", "no/such/file.toml", "--series", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(Path::new("no/such/file.toml")
        .to_str()
        .is_some_and(|f| String::from_utf8_lossy(&out.stderr).contains(f)));
}

/// Series `seed` of `scenarios/<name>.toml`, run in this process, and the command that replays
/// it.
fn series_of(name: &str, seed: u64) -> (toolop_sim::series::SeriesResult, String) {
    series_with(name, seed, &[])
}

/// [`series_of`] with `--set` settings (the replay command names them).
fn series_with(name: &str, seed: u64, sets: &[&str]) -> (toolop_sim::series::SeriesResult, String) {
    let rel = format!("scenarios/{name}.toml");
    let sets: Vec<Setting> = sets.iter().map(|s| Setting::parse(s).unwrap()).collect();
    let sc = overrides::load(&root().join(&rel), &sets).unwrap_or_else(|e| panic!("{e}"));
    let replay = format!(
        "toolop-sim replay --scenario {rel}{} --seed {seed}",
        overrides::flags(&sets)
    );
    let r = run_series(&sc, seed).unwrap_or_else(|e| panic!("{e}; replay: {replay}"));
    (r, replay)
}

/// Series `seed` of `scenarios/<name>.toml`, which must pass every checker, and its replay
/// command.
fn clean_series_of(name: &str, seed: u64) -> (toolop_sim::series::SeriesResult, String) {
    clean(series_of(name, seed))
}

fn clean(
    (r, replay): (toolop_sim::series::SeriesResult, String),
) -> (toolop_sim::series::SeriesResult, String) {
    let violations = toolop_sim::judge::checkers::check_all(&r.trace);
    assert!(violations.is_empty(), "{violations:?}; replay: {replay}");
    (r, replay)
}

/// Canary seed 481 (issue 11): the canary is wrong about pacing, not approvals. The series once
/// failed `input_answer_matches_round` because the checker paired a server-side answer with the
/// executor's latest question by time; it now pairs it with the frame that carried it.
#[test]
fn canary_seed_481_fails_on_pacing_not_on_approvals() {
    let (r, replay) = series_of("canary_must_fail", 481);
    let fired: Vec<&str> = toolop_sim::judge::checkers::check_all(&r.trace)
        .iter()
        .map(|v| v.checker)
        .collect();
    assert!(
        !fired.contains(&"input_answer_matches_round"),
        "replay: {replay}"
    );
    assert!(
        fired.contains(&"poll_rate_within_bound") || fired.contains(&"poll_interval_honoured"),
        "{fired:?}; replay: {replay}"
    );
}

/// mcp_replicas seed 918: a replica's submit timer lost its commit to the restarted primary's
/// submission, was stepped again on the primary's SUBMITTING record and sent a second
/// submission 77 ms after the primary's (`no_blind_resubmit`; against a server that does not
/// dedupe by key, a second operation). A timer that would submit over a record another process
/// wrote since this one last saw it is now left to that process. Since the submission lease
/// (a resumed SUBMITTING record waits for its sender's reply), seed 918 no longer takes that
/// path and stays clean. Where the timer is left out now: seed 45 until session 44 (the only
/// one of 0..1500), then seed 1025 (the first of 0..2999; later processes answer `initialize`
/// from the kept session over HTTP, which moved every series with more than one), with the
/// later draws off as the seed was found.
#[test]
fn mcp_replicas_seed_918_leaves_the_submission_to_the_process_that_made_it() {
    clean_series_of("mcp_replicas", 918);
    let (r, replay) = clean(series_with("mcp_replicas", 1025, &AS_FOUND));
    let left = r.trace.events.iter().any(|e| {
        matches!(
            &e.what,
            toolop_sim::trace::What::Exec {
                obs: toolop::runner::Observation::SubmissionLeftToOther { .. },
                ..
            }
        )
    });
    assert!(
        left,
        "the replica's timer was not the one left out; replay: {replay}"
    );
}

/// `mcp_ext_faults` seed 10341 with every connection dropped at 0.3 over stdio (a stress far past
/// the scenario's rate, which the seed list cannot carry): the fetch budget counted each fetch
/// the runner lost with its connection, six of the eight sent into a connection already closed,
/// and after 26 processes a completed task (n002) went to a person (`no_false_unknown`). A fetch
/// cut by its connection closing is no attempt at the result now; n002's result is accepted.
#[test]
fn mcp_ext_faults_seed_10341_counts_no_fetch_its_connection_took() {
    let (r, replay) = clean(series_with(
        "mcp_ext_faults",
        10341,
        &[
            "server.transport=\"stream\"",
            "faults.rates.connection_drop=0.3",
        ],
    ));
    let n002 = r.trace.events.iter().find_map(|e| match &e.what {
        toolop_sim::trace::What::Store { node, fact } if node == "n002" => Some(fact),
        _ => None,
    });
    assert!(
        matches!(
            n002,
            Some(toolop_sim::trace::StoreFact::Receipt {
                terminal: toolop::record::TerminalState::Completed
            })
        ),
        "n002 did not end with a completed receipt; replay: {replay}"
    );
}

/// Every seed of `sim/tests/data/regression-seeds.txt` (seeds that once failed a checker and are
/// fixed now; the file says what each found) passes every checker.
#[test]
fn every_regression_seed_passes_every_checker() {
    let list = root().join("sim/tests/data/regression-seeds.txt");
    let text = std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || {
            panic!(
                "{}:{}: want `<scenario> <seed>`, got {line:?}",
                list.display(),
                i + 1
            )
        };
        let mut words = line.split_whitespace();
        let (Some(name), Some(seed), None) = (words.next(), words.next(), words.next()) else {
            bad()
        };
        let Ok(seed) = seed.parse::<u64>() else { bad() };
        clean_series_of(name, seed);
        as_found(name, seed);
        count += 1;
    }
    assert!(count >= 40, "{}: only {count} seeds", list.display());
}

/// The settings that turn the scenarios' later draws off (tests/sim_gate.rs runs the same):
/// operators' cancel requests (session 37) and series without the toolop extensions (session
/// 38). Both are drawn after everything else, and a certain draw takes nothing from the
/// generator, so with these a series is the one its seed was found in.
const AS_FOUND: [&str; 2] = [
    "workload.caller.cancel_by_request_rate=0",
    "server.toolop_extensions_rate=1",
];

/// Series `seed` of `scenarios/<name>.toml` as it was when the seed was found, if the scenario
/// has changed since in a way that changes the series, so the mechanism it pinned still replays
/// (72 of the 107 seeds of the scenarios that make requests draw one now).
fn as_found(name: &str, seed: u64) {
    let rel = format!("scenarios/{name}.toml");
    let sc = Scenario::load(&root().join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    if sc.workload.caller.cancel_by_request_rate == 0.0 && sc.server.toolop_extensions_rate == 1.0 {
        return;
    }
    let (r, _) = clean(series_with(name, seed, &AS_FOUND));
    let p = &r.params;
    assert!(p.toolop_extensions && p.nodes.iter().all(|n| !n.cancel_by_request));
}
