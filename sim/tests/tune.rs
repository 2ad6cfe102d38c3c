//! `toolop-sim tune` end to end on small grids: a setting that breaks the QPS bound is reported
//! failing, the recommendation follows the latency target (and re-checks with the gate to the
//! same traces), and a bad grid is refused with its file, field and reason (exit code 2).
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use toolop_sim::campaign::sweep::{self, Loaded};
use toolop_sim::campaign::tune::{self, Candidate, TuneArgs, TuneError};
use toolop_sim::judge::gates;
use toolop_sim::scenario::Scenario;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh folder with a grid file in it.
fn setup(name: &str, grid: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("toolop-tune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("grid.toml");
    std::fs::write(&file, grid).unwrap();
    (dir, file)
}

fn args(dir: &Path, grid: &Path, series: u64) -> TuneArgs {
    TuneArgs {
        reports: dir.join("reports"),
        ..TuneArgs::new(root().join("scenarios/smoke.toml"), grid, series)
    }
}

fn csv_rows(path: &Path) -> (csv::StringRecord, Vec<csv::StringRecord>) {
    let mut rdr = csv::Reader::from_path(path).unwrap();
    let header = rdr.headers().unwrap().clone();
    (header, rdr.records().map(|r| r.unwrap()).collect())
}

fn col(header: &csv::StringRecord, name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("column {name} in {header:?}"))
}

/// Run a command to success, showing its output when it fails.
fn run_ok(cmd: &mut std::process::Command) {
    let out = cmd.output().unwrap();
    let shown: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(
        out.status.success(),
        "{}: {}{}",
        shown.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fixed poll interval each: the shorter, the faster completion is detected and the more polls.
const INTERVAL_GRID: &str = "initial_interval_ms = [1000, 3000, 9000]\nbackoff_multiplier = 1.0\ninterval_cap_ms = 9000\nhonor_server_interval = false\n";

#[test]
fn a_setting_that_breaks_the_qps_bound_is_reported_failing() {
    // Poll every 100 ms, ignoring the server's suggested interval: with 4 to 8 operations only the
    // limiter keeps the executor within the scenario's 20 sends per second, and the second point
    // lifts the limiter to 1000.
    let (dir, grid) = setup(
        "qps",
        "initial_interval_ms = 100\nbackoff_multiplier = 1.0\ninterval_cap_ms = 100\nhonor_server_interval = false\nmax_qps = [20, 1000]\n",
    );
    let r = tune::run(&args(&dir, &grid, 40), &|| {}).unwrap();
    assert_eq!(r.points.len(), 2);
    assert_eq!(r.qps_bound, 20);
    let gate = |p: &tune::PointResult| {
        p.gates
            .iter()
            .find(|g| g.gate == "poll_rate_per_second")
            .cloned()
            .unwrap()
    };
    let (bounded, unbounded) = (&r.points[0], &r.points[1]);
    assert_eq!(
        (bounded.setting.max_qps, unbounded.setting.max_qps),
        (20, 1000)
    );
    assert!(
        gate(bounded).pass,
        "the limiter holds the bound: {:?}",
        gate(bounded)
    );
    assert!(bounded.metrics.busiest_window_sends <= 20);
    let g = gate(unbounded);
    assert!(
        !g.pass && g.threshold == "<= 20",
        "max_qps = 1000 must fail the scenario's bound of 20: {g:?}"
    );
    assert!(unbounded.metrics.busiest_window_sends > 20);
    assert!(!unbounded.passes() && unbounded.failed_gates().contains(&"poll_rate_per_second"));
    assert!(
        !r.frontier.contains(&1) && r.recommended != Some(1),
        "a failing point is never on the frontier nor recommended"
    );
    assert!(
        !unbounded.failing.is_empty(),
        "the seeds that broke the bound are listed with replay commands"
    );

    let written = tune::write_all(&r).unwrap();
    assert!(
        written.iter().any(|p| p.ends_with("tune.csv"))
            && written.iter().any(|p| p.ends_with("tune.html"))
    );
    let (header, rows) = csv_rows(&r.dir.join("tune.csv"));
    let (rate, all, max_qps) = (
        col(&header, "gate_poll_rate_per_second"),
        col(&header, "pass_all"),
        col(&header, "max_qps"),
    );
    assert_eq!((&rows[0][max_qps], &rows[0][rate]), ("20", "pass"));
    assert_eq!(
        (&rows[1][max_qps], &rows[1][rate], &rows[1][all]),
        ("1000", "fail", "fail")
    );
    let md = std::fs::read_to_string(r.dir.join("tune.md")).unwrap();
    let failing = &md[md.find("## Failing points").expect("failing section")..];
    assert!(
        failing.contains("**p02**") && failing.contains("`poll_rate_per_second` measured"),
        "{failing}"
    );
    // The point's file runs 1000 QPS but is judged against the scenario's 20, and replays.
    let file = Scenario::load(&unbounded.file).unwrap();
    assert_eq!(
        (file.executor.max_qps, file.gates.max_qps),
        (1000, Some(20))
    );
    assert!(unbounded.failing[0]
        .replay
        .contains(&unbounded.file.display().to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tune --set` changes the base scenario before the grid does: every point's file (which its
/// failing seeds and the re-check replay from) holds the setting, and a grid knob the setting
/// also names takes the grid's value.
#[test]
fn settings_apply_to_every_point_and_the_grid_wins_over_them() {
    let (dir, grid) = setup("set", INTERVAL_GRID);
    let mut a = TuneArgs {
        jobs: 1,
        ..args(&dir, &grid, 3)
    };
    for s in [
        "executor.request_timeout_ms=12345",
        "executor.core.poll.initial_interval_ms=777",
    ] {
        a.set
            .sets
            .push(toolop_sim::scenario::overrides::Setting::parse(s).unwrap());
    }
    let r = tune::run(&a, &|| {}).unwrap();
    assert_eq!(r.points.len(), 3);
    for (p, interval_ms) in r.points.iter().zip([1000, 3000, 9000]) {
        let sc = Scenario::parse(&p.file.display().to_string(), &p.scenario_toml).unwrap();
        assert_eq!(
            sc.executor.request_timeout_ms,
            12_345,
            "{}",
            p.file.display()
        );
        assert_eq!(sc.executor.core.poll.initial_interval_ms, interval_ms);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_recommendation_follows_the_latency_target_and_rechecks_with_the_gate() {
    let (dir, grid) = setup("target", INTERVAL_GRID);
    let loose = TuneArgs {
        latency_p99_max_ms: 3_600_000,
        jobs: 1,
        ..args(&dir, &grid, 60)
    };
    let r1 = tune::run(&loose, &|| {}).unwrap();
    assert!(
        r1.points.iter().all(|p| p.passes()),
        "{:?}",
        r1.points
            .iter()
            .map(|p| p.failed_gates())
            .collect::<Vec<_>>()
    );
    assert!(
        r1.crn.differing.is_empty() && r1.crn.compared == 2 * 60,
        "every seed draws the same parameters at every point"
    );
    let lat = |p: &tune::PointResult| p.latency().unwrap();
    let polls = |p: &tune::PointResult| p.polls().unwrap();
    assert!(
        lat(&r1.points[0]) < lat(&r1.points[1]) && lat(&r1.points[1]) < lat(&r1.points[2]),
        "latency grows with the interval"
    );
    assert!(
        polls(&r1.points[0]) > polls(&r1.points[1]) && polls(&r1.points[1]) > polls(&r1.points[2]),
        "polls fall with it"
    );
    assert_eq!(
        r1.frontier,
        [2, 1, 0],
        "a clean trade-off: every point is on the frontier"
    );
    assert_eq!(
        r1.recommended,
        Some(2),
        "a loose target takes the fewest polls"
    );

    // Just below the cheapest point's latency, the recommendation moves to the next one.
    let tight = lat(&r1.points[2]) - 1;
    let args2 = TuneArgs {
        latency_p99_max_ms: tight,
        jobs: 2,
        run: "tight".into(),
        ..loose.clone()
    };
    let r2 = tune::run(&args2, &|| {}).unwrap();
    assert_eq!(r2.recommended, Some(1), "target {tight} ms");
    assert!(lat(&r2.points[1]) <= tight);
    assert_eq!(tune::recommend(&r1.points, tight), Some(1));
    assert_eq!(tune::recommend(&r1.points, lat(&r1.points[0]) - 1), None);

    // Same seeds, same results, whatever --jobs: the two runs' CSVs differ only in the
    // recommended column.
    tune::write_all(&r1).unwrap();
    tune::write_all(&r2).unwrap();
    let (h, a) = csv_rows(&r1.dir.join("tune.csv"));
    let (_, b) = csv_rows(&r2.dir.join("tune.csv"));
    let rec = col(&h, "recommended");
    for (x, y) in a.iter().zip(&b) {
        let strip = |r: &csv::StringRecord| {
            r.iter()
                .enumerate()
                .filter(|(i, _)| *i != rec)
                .map(|(_, v)| v.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(x), strip(y));
    }
    assert_eq!(&b[1][rec], "yes");
    let md = std::fs::read_to_string(r2.dir.join("tune.md")).unwrap();
    assert!(
        md.contains(&r2.recheck_command()) && md.contains("seeds 0..=59"),
        "{md}"
    );
    let html = std::fs::read_to_string(r2.dir.join("tune.html")).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.matches("<svg").count() == 1 + 2 * 3,
        "one scatter, two histograms per point"
    );
    assert!(
        !html.contains("<script") && !html.contains("src=\"http"),
        "self-contained"
    );

    // The recommended file, run as the gate runs it on the same seeds, passes with the same traces.
    let file = r2.recommended_file();
    // The re-check runs other seeds than the ones the point was chosen on.
    assert!(r2.recheck_command().starts_with(&format!(
        "toolop-sim gate --scenario {} --series 60 --start-seed 60",
        file.display()
    )));
    let loaded = [Loaded::plain(file.clone(), Scenario::load(&file).unwrap())];
    let (rows, _) = sweep::run(&loaded, 0, 60, 2, &|| {});
    let digest = toolop::digest::sha256_hex(
        rows.iter()
            .map(|r| r.trace_hash.as_str())
            .collect::<Vec<_>>()
            .join("\n")
            .as_bytes(),
    );
    assert_eq!(
        digest, r2.points[1].traces_digest,
        "recommended.toml reproduces the point"
    );
    assert!(gates::evaluate(&loaded, rows, "recheck", 0, 0).passed());

    // No point meets an impossible target: no recommendation, exit code 1, no stale file.
    let none = TuneArgs {
        latency_p99_max_ms: 1,
        ..args2.clone()
    };
    assert_eq!(tune::main_tune(none), ExitCode::from(1));
    assert!(
        !file.exists(),
        "a stale recommended.toml must not survive a run without a recommendation"
    );

    // The page renders in headless Chromium when it is installed (scripts/check_tune_html.sh).
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .any(|c| Path::new(c).exists());
    if chromium && std::env::var_os("TOOLOP_SKIP_CHROMIUM").is_none() {
        run_ok(
            std::process::Command::new(root().join("scripts/check_tune_html.sh"))
                .arg(r1.dir.join("tune.html")),
        );
    } else {
        eprintln!(
            "chromium not installed: tune.html not rendered (scripts/check_tune_html.sh does it)"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tune` in a fresh process at --jobs 1, 2 and 4, twice each, writes the same tune.csv: the
/// points' trace digests do not depend on which point's series ran first in the process (they
/// did, while the first validated approval answer of a process drew its entropy from the series).
#[test]
fn tune_writes_the_same_csv_at_any_jobs_in_fresh_processes() {
    let (dir, grid) = setup("jobs", INTERVAL_GRID);
    let scenario = root().join("scenarios/smoke.toml");
    let mut csvs = vec![];
    for (i, jobs) in [1, 2, 4, 1, 2, 4].into_iter().enumerate() {
        let run = format!("run{i}-jobs{jobs}");
        let args = [
            "tune".to_string(),
            "--scenario".into(),
            scenario.display().to_string(),
            "--grid".into(),
            grid.display().to_string(),
            "--series".into(),
            "20".into(),
            "--latency-p99-max-ms".into(),
            "3600000".into(),
            "--jobs".into(),
            jobs.to_string(),
            "--run".into(),
            run.clone(),
            "--reports".into(),
            dir.join("reports").display().to_string(),
        ];
        run_ok(std::process::Command::new(env!("CARGO_BIN_EXE_toolop-sim")).args(&args));
        let text =
            std::fs::read_to_string(dir.join("reports").join(&run).join("tune.csv")).unwrap();
        csvs.push((args.join(" "), text));
    }
    let (first_command, first) = &csvs[0];
    for (command, text) in &csvs[1..] {
        assert_eq!(
            text, first,
            "same grid, same seeds 0..=19, different tune.csv:\n  toolop-sim {first_command}\n  toolop-sim {command}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_grid_is_refused_with_file_field_and_reason() {
    let cases = [
        (
            "backoff_multiplier = [1.5, 0.5]\n",
            "backoff_multiplier[1]",
            "0.5 is outside [1, 10]",
        ),
        (
            "poll_interval_ms = [100, 200]\n",
            "poll_interval_ms",
            "unknown setting",
        ),
        (
            "initial_interval_ms = { from = 250, to = 1000 }\n",
            "initial_interval_ms",
            "needs step",
        ),
        (
            "initial_interval_ms = [500, 4000]\ninterval_cap_ms = [2000]\n",
            "interval_cap_ms",
            "2000 is below initial_interval_ms 4000",
        ),
        ("max_qps = [20, \"fast\"]\n", "max_qps[1]", "whole number"),
        ("max_qps = [20, 40\n", "max_qps", "not valid TOML"),
    ];
    for (i, (text, field, reason)) in cases.iter().enumerate() {
        let (dir, grid) = setup(&format!("bad{i}"), text);
        let a = args(&dir, &grid, 10);
        match tune::run(&a, &|| {}) {
            Err(TuneError::Grid(e)) => {
                assert_eq!(e.file, grid.display().to_string());
                assert_eq!(e.field, *field, "{e}");
                assert!(e.reason.contains(reason), "{e} should say {reason:?}");
                let shown = e.to_string();
                assert!(
                    shown.starts_with(&format!("{}: field `{field}`: ", grid.display())),
                    "{shown}"
                );
            }
            other => panic!(
                "{text:?} should be refused, got {:?}",
                other.map(|r| r.points.len())
            ),
        }
        assert_eq!(
            tune::main_tune(a.clone()),
            ExitCode::from(2),
            "bad input is exit code 2"
        );
        assert!(!a.dir().exists(), "nothing is written for a bad grid");
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (dir, _) = setup("missing", "");
    let a = args(&dir, &dir.join("no-such-grid.toml"), 10);
    let e = tune::run(&a, &|| {}).expect_err("a missing grid is refused");
    assert!(
        matches!(&e, TuneError::Grid(g) if g.field == "(file)" && g.reason.contains("cannot read")),
        "{e}"
    );
    assert_eq!(e.exit_code(), 2);
    let zero = TuneArgs {
        series: 0,
        ..args(&dir, &root().join("scenarios/grids/default.toml"), 10)
    };
    assert!(matches!(tune::run(&zero, &|| {}), Err(TuneError::Usage(_))));
    let _ = std::fs::remove_dir_all(&dir);
}
