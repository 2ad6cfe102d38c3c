//! The command line as a CI user meets it (issue 13): every bad input refused with exit 2 and a
//! message naming what is wrong, nothing written outside --reports, `run` judging its series,
//! printed commands that work from anywhere, Ctrl-C leaving a partial report.
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// A fresh folder under the target dir (no temp-dir crate needed), removed first.
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sim(args: &[&str]) -> Output {
    sim_in(&root(), args)
}

/// `toolop-sim run --scenario <scenario> --seed <seed> --reports <reports>`.
fn run_seed(scenario: &Path, seed: &str, reports: &Path) -> Output {
    sim(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--seed",
        seed,
        "--reports",
        reports.to_str().unwrap(),
    ])
}

fn sim_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_exit(o: &Output, code: i32, needle: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(code), "{t}");
    assert!(t.contains(needle), "expected {needle:?} in:\n{t}");
}

/// The smoke scenario with `edit` applied, written to `dir/name.toml`.
fn edited(dir: &Path, base: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(root().join(base)).unwrap();
    let file = dir.join("edited.toml");
    std::fs::write(&file, edit(text)).unwrap();
    file
}

#[test]
fn a_huge_start_spread_is_refused_instead_of_hanging() {
    let d = scratch("spread");
    let f = edited(&d, "scenarios/smoke.toml", |t| {
        t.replace(
            "[workload]",
            "[workload]\nstart_spread_ms = 18446744073709551615",
        )
    });
    let started = Instant::now();
    let o = run_seed(&f, "1", &d);
    assert_exit(&o, 2, "field `workload.start_spread_ms`");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn names_that_become_paths_cannot_leave_the_reports_folder() {
    let d = scratch("escape");
    let reports = d.join("a").join("b").join("reports");
    let f = edited(&d, "scenarios/smoke.toml", |t| {
        t.replace("name = \"smoke\"", "name = \"../../../x\"")
    });
    let o = run_seed(&f, "1", &reports);
    assert_exit(&o, 2, "field `name`");
    let o = sim(&[
        "gate",
        "--scenario",
        "scenarios/smoke.toml",
        "--series",
        "1",
        "--run",
        "../../escaped",
        "--reports",
        reports.to_str().unwrap(),
    ]);
    assert_exit(&o, 2, "--run \"../../escaped\" must be one path segment");
    assert!(!d.join("x").exists() && !d.join("a").join("escaped").exists());
    assert!(!reports.exists(), "nothing is written for refused input");
}

#[test]
fn run_judges_its_series_and_exits_1_on_a_violation() {
    let d = scratch("run");
    let o = run_seed(Path::new("scenarios/canary_must_fail.toml"), "3", &d);
    // The canary polls too fast: the pacing checkers fire (how often is theirs to count).
    assert_exit(&o, 1, " violation(s)");
    assert!(text(&o).contains("poll_rate_within_bound"), "{}", text(&o));
    assert!(text(&o)
        .contains("replay: toolop-sim replay --scenario scenarios/canary_must_fail.toml --seed 3"));
    let o = run_seed(Path::new("scenarios/smoke.toml"), "3", &d);
    assert_exit(&o, 0, "checkers: all properties hold");
}

#[test]
fn flags_out_of_range_are_usage_errors() {
    let d = scratch("flags");
    let r = d.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "gate",
                "--scenario",
                "scenarios/smoke.toml",
                "--jobs",
                "0",
                "--reports",
                r,
            ],
            "--jobs",
        ),
        (&["mutants", "--series", "0"], "--series"),
        (
            &[
                "bench",
                "--scenario",
                "scenarios/smoke.toml",
                "--series",
                "0",
            ],
            "--series",
        ),
        (
            &[
                "shrink",
                "--scenario",
                "scenarios/canary_must_fail.toml",
                "--seed",
                "3",
                "--max-replays",
                "0",
            ],
            "--max-replays",
        ),
        (
            &[
                "gate",
                "--scenario",
                "scenarios/smoke.toml",
                "--start-seed",
                "18446744073709551615",
                "--series",
                "3",
                "--reports",
                r,
            ],
            "seeds never wrap",
        ),
        (
            &[
                "gate",
                "--scenario",
                "scenarios/smoke.toml",
                "--start-seed",
                "10",
                "--seeds",
                "3",
                "--reports",
                r,
            ],
            "below --start-seed",
        ),
        (
            &[
                "tune",
                "--scenario",
                "scenarios/mcp_faults.toml",
                "--grid",
                "scenarios/grids/default.toml",
                "--jobs",
                "0",
            ],
            "--jobs",
        ),
        (
            &[
                "replay",
                "--scenario",
                "scenarios/smoke.toml",
                "--seed",
                "1",
                "--mutation",
                "nope",
            ],
            "no such mutation",
        ),
    ];
    for (args, needle) in cases {
        let o = sim(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
    assert!(
        std::fs::read_dir(&d).unwrap().next().is_none(),
        "a refused command wrote something"
    );
}

#[test]
fn a_schedule_naming_an_unknown_checker_is_refused() {
    let d = scratch("schedule_checker");
    let s = d.join("s.toml");
    let smoke = root().join("scenarios/smoke.toml");
    std::fs::write(
        &s,
        format!(
            "scenario = {:?}\nseed = 1\nchecker = \"no_such_checker\"\n",
            smoke.display().to_string()
        ),
    )
    .unwrap();
    let o = sim(&[
        "replay",
        "--schedule",
        s.to_str().unwrap(),
        "--reports",
        d.to_str().unwrap(),
    ]);
    assert_exit(&o, 2, "no_such_checker: no such checker");
}

#[test]
fn settings_aip151_cannot_express_are_refused() {
    let d = scratch("aip");
    for (setting, field) in [
        (
            "[faults.rates]\napproval_replay = 0.1\n",
            "faults.rates.approval_replay",
        ),
        (
            "[faults.rates]\ninput_required_replay = 0.1\n",
            "faults.rates.input_required_replay",
        ),
    ] {
        let f = edited(&d, "scenarios/aip151_faults.toml", |t| {
            t.replace("[faults.rates]\n", setting)
        });
        let o = run_seed(&f, "1", &d);
        assert_eq!(o.status.code(), Some(2), "{setting}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("field `{field}`")),
            "{setting}: {}",
            text(&o)
        );
    }
    let f = edited(&d, "scenarios/aip151_faults.toml", |t| {
        t.replacen("input_rate = 0.0", "input_rate = 0.3", 1)
    });
    let o = run_seed(&f, "1", &d);
    assert_exit(&o, 2, "input_rate");
}

#[test]
fn a_shrunk_schedule_replays_from_any_working_directory() {
    let d = scratch("shrunk");
    let out = d.join("deep").join("canary.toml");
    let o = sim(&[
        "shrink",
        "--scenario",
        "scenarios/canary_must_fail.toml",
        "--seed",
        "3",
        "--max-replays",
        "40",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_exit(&o, 0, "replay: toolop-sim replay --schedule");
    let stored = std::fs::read_to_string(&out).unwrap();
    assert!(
        stored.contains("scenario = \"../"),
        "stored relative to the schedule:\n{stored}"
    );
    // From another folder, with the command as printed (the schedule path as given).
    let o = sim_in(
        &d,
        &[
            "replay",
            "--schedule",
            out.to_str().unwrap(),
            "--reports",
            d.to_str().unwrap(),
        ],
    );
    assert_exit(&o, 1, "reproduced");
    assert!(!text(&o).contains("NOT reproduced"), "{}", text(&o));
}

#[test]
fn gate_json_is_one_parseable_object_and_seeds_rejudges_chosen_seeds() {
    let d = scratch("json");
    let o = sim(&[
        "gate",
        "--scenario",
        "scenarios/canary_must_fail.toml",
        "--seeds",
        "3,5",
        "--json",
        "--run",
        "j",
        "--reports",
        d.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("stdout is one JSON object");
    assert_eq!(v["verdict"], "FAIL");
    assert_eq!(v["series"], 2);
    assert!(v["failing"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["seed"] == 3));
    assert!(d.join("j").join("failing.txt").exists());
    let md = std::fs::read_to_string(d.join("j").join("summary.md")).unwrap();
    assert!(
        md.contains("## Shrunk schedules") && md.contains("toolop-sim replay --schedule"),
        "{md}"
    );
}

#[test]
fn fail_fast_stops_early_and_marks_the_report_partial() {
    let d = scratch("failfast");
    let o = sim(&[
        "gate",
        "--scenario",
        "scenarios/canary_must_fail.toml",
        "--series",
        "2000",
        "--jobs",
        "1",
        "--fail-fast",
        "--run",
        "ff",
        "--reports",
        d.to_str().unwrap(),
    ]);
    assert_exit(&o, 1, "PARTIAL: --fail-fast stopped after");
    assert!(d.join("ff").join("PARTIAL").exists());
}

#[test]
fn ctrl_c_writes_a_partial_report_and_exits_130() {
    let d = scratch("sigint");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .args([
            "gate",
            "--scenario",
            "scenarios/mcp_faults.toml",
            "--series",
            "1000000",
            "--jobs",
            "1",
            "--run",
            "int",
            "--reports",
        ])
        .arg(&d)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the gate did not stop after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let o = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(130), "{}", text(&o));
    let marker = std::fs::read_to_string(d.join("int").join("PARTIAL")).unwrap();
    assert!(
        marker.starts_with("PARTIAL: interrupted after "),
        "{marker}"
    );
    let md = std::fs::read_to_string(d.join("int").join("summary.md")).unwrap();
    assert!(md.starts_with("> **PARTIAL: interrupted"), "{md}");
    assert!(d.join("int").join("junit.xml").exists());
}

#[test]
fn version_list_and_reference_answer() {
    assert_exit(&sim(&["--version"]), 0, "toolop-sim ");
    for (what, needle) in [
        ("checkers", "no_divergence"),
        ("faults", "lost_request"),
        ("gates", "coverage"),
        ("scenarios", "scenarios/smoke.toml"),
    ] {
        assert_exit(&sim(&["list", what]), 0, needle);
    }
    let o = sim(&["list", "scenarios"]);
    assert!(
        !text(&o).contains("does not load"),
        "a shipped scenario does not load:\n{}",
        text(&o)
    );
}

#[test]
fn tune_json_is_one_parseable_object() {
    let d = scratch("tune_json");
    let o = sim(&[
        "tune",
        "--scenario",
        "scenarios/smoke.toml",
        "--grid",
        "scenarios/grids/default.toml",
        "--series",
        "4",
        "--latency-p99-max-ms",
        "3600000",
        "--json",
        "--reports",
        d.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(
        v["report"]["points"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "{v}"
    );
    assert!(v["files"].as_array().is_some_and(|f| !f.is_empty()), "{v}");
    match o.status.code() {
        Some(0) => assert!(
            v["recheck"].as_str().unwrap().contains("--start-seed 4"),
            "{v}"
        ),
        Some(1) => assert!(v["recheck"].is_null(), "{v}"),
        c => panic!("exit {c:?}: {}", text(&o)),
    }
}

#[test]
fn replay_shows_a_legend_and_node_filters_the_timeline() {
    let d = scratch("node");
    let o = sim(&[
        "replay",
        "--scenario",
        "scenarios/smoke.toml",
        "--seed",
        "1",
        "--node",
        "n001",
        "--reports",
        d.to_str().unwrap(),
    ]);
    assert_exit(&o, 0, "legend: TIME");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let timeline = &out[out.find("timeline:\n").unwrap() + 10..out.find("summary:\n").unwrap()];
    let nodes: std::collections::BTreeSet<&str> = timeline
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(nodes.contains("n001"), "{timeline}");
    assert!(nodes.iter().all(|n| *n == "n001" || *n == "-"), "{nodes:?}");
    assert!(
        !out.contains("Some(") && !out.contains("None"),
        "Debug text:\n{out}"
    );
}

#[test]
fn color_follows_the_flag_and_no_color() {
    let colored = Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .args([
            "--color",
            "always",
            "run",
            "--scenario",
            "scenarios/smoke.toml",
            "--seed",
            "1",
        ])
        .arg("--reports")
        .arg(scratch("color"))
        .current_dir(root())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&colored.stdout).contains("\u{1b}["));
    // NO_COLOR (set by `sim`) and no terminal: plain text.
    let r = scratch("nocolor");
    let plain = run_seed(Path::new("scenarios/smoke.toml"), "1", &r);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("\u{1b}["));
}

/// `toolop-sim run --scenario <scenario> --seed <seed> --reports <reports> --set <set>`.
fn run_set(scenario: &str, seed: &str, reports: &str, set: &str) -> Output {
    sim(&[
        "run",
        "--scenario",
        scenario,
        "--seed",
        seed,
        "--reports",
        reports,
        "--set",
        set,
    ])
}

/// The `trace hash: ...` line of a run or replay.
fn trace_hash(o: &Output) -> String {
    let t = text(o);
    t.lines()
        .find_map(|l| l.strip_prefix("trace hash: "))
        .unwrap_or_else(|| panic!("no trace hash in:\n{t}"))
        .to_string()
}

/// `--set` changes a field for one command; every command it prints (a failing seed's replay, a
/// shrunk schedule) applies the same settings, so what it names is what ran.
#[test]
fn set_changes_a_field_and_every_printed_command_repeats_it() {
    let d = scratch("set");
    let reports = d.to_str().unwrap();
    let canary = "scenarios/canary_must_fail.toml";
    // The canary ignores the server's poll interval; honouring it makes seed 3 pass.
    let fixed = run_set(
        canary,
        "3",
        reports,
        "executor.core.poll.honor_server_interval=true",
    );
    assert_exit(&fixed, 0, "all properties hold");
    assert_exit(
        &run_seed(&root().join(canary), "3", &d),
        1,
        "poll_interval_honoured",
    );

    // A gate with a setting: its failing seed's replay names it, and replays the same series.
    let set = "executor.core.poll.jitter_fraction=0.5";
    let o = sim(&[
        "gate",
        "--scenario",
        canary,
        "--seeds",
        "3",
        "--json",
        "--run",
        "s",
        "--reports",
        reports,
        "--set",
        set,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let replay = v["failing"][0]["replay"].as_str().unwrap().to_string();
    assert_eq!(
        replay,
        format!("toolop-sim replay --scenario {canary} --set {set} --seed 3")
    );
    let md = std::fs::read_to_string(d.join("s").join("summary.md")).unwrap();
    assert!(md.contains(&replay), "{md}");
    let args: Vec<&str> = replay.split(' ').skip(2).collect();
    let mut with_reports = vec!["replay", "--reports", reports];
    with_reports.extend(args);
    let replayed = sim(&with_reports);
    assert_exit(&replayed, 1, "poll_interval_honoured");
    let direct = run_set(canary, "3", reports, set);
    assert_eq!(trace_hash(&replayed), trace_hash(&direct));
    let unset = run_seed(&root().join(canary), "3", &d);
    assert_ne!(
        trace_hash(&direct),
        trace_hash(&unset),
        "the setting changed the series"
    );

    // A shrunk schedule stores the settings, and `replay --schedule` applies them again.
    let out = d.join("schedule.toml");
    let o = sim(&[
        "shrink",
        "--scenario",
        canary,
        "--seed",
        "3",
        "--max-replays",
        "20",
        "--out",
        out.to_str().unwrap(),
        "--set",
        set,
    ]);
    assert_exit(&o, 0, "replay: toolop-sim replay --schedule");
    let stored = std::fs::read_to_string(&out).unwrap();
    assert!(stored.contains(&format!("sets = [\"{set}\"]")), "{stored}");
    let o = sim(&[
        "replay",
        "--schedule",
        out.to_str().unwrap(),
        "--reports",
        reports,
    ]);
    assert_exit(&o, 1, "reproduced");
    assert!(!text(&o).contains("NOT reproduced"), "{}", text(&o));
}

/// A bad setting is refused with exit 2, naming the setting and what is wrong; a value the
/// scenario rules refuse names the file, the settings and the field.
#[test]
fn bad_settings_are_usage_errors_that_name_them() {
    let d = scratch("bad-set");
    let reports = d.to_str().unwrap();
    for (set, needle) in [
        ("executor.max_qpz=3", "--set executor.max_qpz=3: `executor.max_qpz` is not a scenario field"),
        ("executor.max_qps", "expected FIELD=VALUE"),
        ("executor.max_qps=lots", "is not a TOML value"),
        (
            "faults.rates.poll_503=2",
            "scenarios/smoke.toml with --set faults.rates.poll_503=2: field `faults.rates.poll_503`",
        ),
    ] {
        for cmd in ["run", "gate", "replay", "shrink"] {
            let o = sim(&[
                cmd, "--scenario", "scenarios/smoke.toml", "--seed", "1", "--reports", reports,
                "--set", set,
            ]
            .into_iter()
            .filter(|a| !(cmd == "gate" && (*a == "--seed" || *a == "1")))
            .collect::<Vec<_>>());
            assert_exit(&o, 2, needle);
        }
    }
}

/// `toolop-sim ... | head`: a reader that goes away ends the command quietly (by SIGPIPE, as
/// any Unix tool), never with a panic and a backtrace on the terminal.
#[test]
#[cfg(unix)]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt as _;
    let d = scratch("pipe");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .args([
            "run",
            "--scenario",
            "scenarios/mcp_faults.toml",
            "--seed",
            "3",
        ])
        .args(["--reports", d.to_str().unwrap()])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(13),
        "ended by SIGPIPE: {:?}",
        out.status
    );
}
