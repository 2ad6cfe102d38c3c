//! The gate command end to end: it passes on the default set, fails the canary, replays any
//! seed of a sweep to the same hash, and refuses bad input with exit code 2.
#![cfg(madsim)]

use std::path::{Path, PathBuf};

mod common;
use common::{root, sim};

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
    let rel = format!("scenarios/{name}.toml");
    let sc = Scenario::load(&root().join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let replay = format!("toolop-sim replay --scenario {rel} --seed {seed}");
    let r = run_series(&sc, seed).unwrap_or_else(|e| panic!("{e}; replay: {replay}"));
    (r, replay)
}

/// Series `seed` of `scenarios/<name>.toml`, which must pass every checker, and its replay
/// command.
fn clean_series_of(name: &str, seed: u64) -> (toolop_sim::series::SeriesResult, String) {
    let (r, replay) = series_of(name, seed);
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

/// mcp_ext_faults seed 2412 (10,000-series gate): a poll timer an executor set in WORKING fired
/// in CANCEL_REQUESTED after a replica wrote the record, and the runner took the node up from
/// the record although its cancel re-query timer still drove it: it polled 643 ms after the
/// last, the server suggesting 1000 ms. The runner now takes a node up only when nothing else
/// of its own drives it.
#[test]
fn mcp_ext_faults_seed_2412_honours_the_poll_interval_after_a_replica_s_writes() {
    clean_series_of("mcp_ext_faults", 2412);
}

/// mcp_replicas seed 918: a replica's submit timer lost its commit to the restarted primary's
/// submission, was stepped again on the primary's SUBMITTING record and sent a second
/// submission 77 ms after the primary's (`no_blind_resubmit`; against a server that does not
/// dedupe by key, a second operation). A timer that would submit over a record another process
/// wrote since this one last saw it is now left to that process. Since the submission lease
/// (a resumed SUBMITTING record waits for its sender's reply), seed 918 no longer takes that
/// path and stays clean; seed 45 (the only one of 0..1500 that does) is where the timer is left
/// out now.
#[test]
fn mcp_replicas_seed_918_leaves_the_submission_to_the_process_that_made_it() {
    clean_series_of("mcp_replicas", 918);
    let (r, replay) = clean_series_of("mcp_replicas", 45);
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

/// aip151_faults seed 13660 (100,000-series gate): two lagging 404s, a cancel the server took
/// (AIP-151's empty answer), a third 404: the executor handed a live, cancelled operation to a
/// person (`no_false_unknown`). The taken cancel now resets the not-found count.
#[test]
fn aip151_faults_seed_13660_counts_not_founds_again_after_a_taken_cancel() {
    clean_series_of("aip151_faults", 13660);
}

/// mcp_ext_faults seed 62339 (100,000-series gate): a replica crashed with two submissions'
/// replies unread; `no_false_unknown` took the world's `ReplicaStop` for a process that lived
/// on, and called the next process's hand-offs false. A replica's crash now loses what it read
/// like any process's.
#[test]
fn mcp_ext_faults_seed_62339_a_crashed_replica_read_nothing_it_did_not_write_down() {
    clean_series_of("mcp_ext_faults", 62339);
}

/// mcp_ext_faults seed 78901 (100,000-series gate): a submission's reply was on its way when
/// the connection dropped, and the fake network still put it in the queue of the process, which
/// was already failing its requests as lost; `no_false_unknown` counted it as shown. A dropped
/// connection now takes what was on its way, in the network and in the judges' view of it.
#[test]
fn mcp_ext_faults_seed_78901_a_dropped_connection_takes_its_frames_in_flight() {
    clean_series_of("mcp_ext_faults", 78901);
}

/// mcp_sqlite seed 47038 (100,000-series gate): after the server had taken round 1's answer
/// and shown the task working, a replica got round 2's request (same id and content, as servers
/// that reuse ids send) and said round 1's accept again without asking anyone
/// (`input_answer_matches_round`). A round the server moved on from is no longer answered again.
#[test]
fn mcp_sqlite_seed_47038_never_answers_a_later_round_with_the_last_answer() {
    clean_series_of("mcp_sqlite", 47038);
}

/// mcp_replicas seed 53695 (100,000-series gate): an input request reached a busy replica
/// before another process settled the node; the replica declined it after, as a server request
/// must be answered. `no_send_after_receipt` excused only requests that arrived after the
/// settlement, which is right for the settling process and not for another one.
#[test]
fn mcp_replicas_seed_53695_a_replica_may_decline_what_reached_it_before_the_settlement() {
    clean_series_of("mcp_replicas", 53695);
}

/// The seeds the 100,000-series gate failed on at session 22's end that are fixed now, each
/// replayed and judged by every checker. Executor fixes: input rounds told apart by content
/// under one reused request id (`input_answer_matches_round`), fetch and cancel attempts counted
/// at their outcome, one more read while a request sent after the first not-found is
/// unanswered (`no_false_unknown`), a cancel another process committed taken up from a reply
/// (`clicked_cancel_is_acted_on`), a resumed submission leased to its sender for one request
/// timeout (`no_false_unknown`: mcp_ext_faults 16364, 20268, 50047), a stale submit timer that
/// leaves another process's SUBMITTING record alone instead of concluding (mcp_sqlite 73974,
/// 86598, found by the 100,000-series gate after the others were fixed). Fake network: a
/// connection drop names the frames it cut (mcp_sqlite 128726, seeds 100,000..199,999: a
/// result due in the drop's millisecond had been delivered, and the view took it as cut).
/// Judge fixes: a reply that landed after its reader went down,
/// or after its request's timeout, showed nothing; every process owes one answer per request
/// that reached it (mcp_replicas 2551, found at 10,000 series on the way).
#[test]
fn the_seeds_the_100k_gate_failed_on_are_clean() {
    let seeds = [
        ("mcp_replicas", 10151),
        ("mcp_replicas", 36439),
        ("mcp_replicas", 64039),
        ("mcp_replicas", 86823),
        ("mcp_replicas", 96783),
        ("mcp_replicas", 97695),
        ("mcp_sqlite", 56670),
        ("mcp_sqlite", 69158),
        ("mcp_replicas", 39495),
        ("mcp_replicas", 65679),
        ("mcp_replicas", 75111),
        ("mcp_replicas", 81359),
        ("mcp_faults", 21921),
        ("mcp_faults", 39769),
        ("mcp_faults", 55633),
        ("mcp_sqlite", 21982),
        ("mcp_replicas", 97943),
        ("mcp_replicas", 2551),
        ("mcp_ext_faults", 16364),
        ("mcp_ext_faults", 20268),
        ("mcp_ext_faults", 50047),
        ("mcp_faults", 88544),
        ("mcp_sqlite", 73974),
        ("mcp_sqlite", 86598),
        ("mcp_sqlite", 128726),
    ];
    for (name, seed) in seeds {
        clean_series_of(name, seed);
    }
}

/// Seeds that failed when each scenario ran 100,000 series alone (seeds 0..99,999; before, the
/// set's 100,000 gave each scenario 12,500). Executor fixes:
/// - a stale fetch result tied to our operation ends a not-found streak (mcp_replicas 35738);
/// - a lost answer the server still asks for is said again after doubling pauses
///   (mcp_ext_faults 45046, 92752);
/// - the cancel take-up watch counts only timers the record's state acts on as cover
///   (mcp_replicas 18757), and keeps watching while the committer writes but never gets its
///   cancel answered (mcp_replicas 99124);
/// - a call for a node another process inserted is watched, and taken up when that process goes
///   quiet (mcp_replicas 68025).
///
/// Judge fix: an approval deadline counts from the first commit that recorded the question,
/// whoever wrote it (mcp_replicas 32645: a false alarm).
#[test]
fn the_seeds_the_per_scenario_100k_gates_failed_on_are_clean() {
    let seeds = [
        ("mcp_replicas", 35738),
        ("mcp_ext_faults", 45046),
        ("mcp_ext_faults", 92752),
        ("mcp_replicas", 18757),
        ("mcp_replicas", 99124),
        ("mcp_replicas", 68025),
        ("mcp_replicas", 32645),
    ];
    for (name, seed) in seeds {
        clean_series_of(name, seed);
    }
}
