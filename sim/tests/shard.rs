//! `gate --shard K/N` + `merge`: four shards merged give the same report, byte for byte apart
//! from the wall time, as one machine running the same seeds; shards that are not the parts of
//! one sweep are refused with the file and the problem named (exit 2).
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::sim;

fn tmp(name: &str) -> PathBuf {
    common::tmp("shard", name)
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const SET: [&str; 3] = [
    "scenarios/smoke.toml",
    "scenarios/mcp_faults.toml",
    "scenarios/aip151_faults.toml",
];

/// Runs shard k of n of `series` series from `start` into `<reports>/gate/shard-k-of-n`.
fn shard(reports: &Path, set: &[&str], series: u64, start: u64, k: u64, n: u64) -> PathBuf {
    shard_with(reports, set, &[], series, start, k, n)
}

/// [`shard`] with more flags (`--set ...`).
fn shard_with(
    reports: &Path,
    set: &[&str],
    flags: &[&str],
    series: u64,
    start: u64,
    k: u64,
    n: u64,
) -> PathBuf {
    let (series, start, shard) = (series.to_string(), start.to_string(), format!("{k}/{n}"));
    let mut args = vec!["gate", "--scenario"];
    args.extend(set);
    args.extend(flags);
    args.extend([
        "--series",
        &series,
        "--start-seed",
        &start,
        "--shard",
        &shard,
        "--reports",
        reports.to_str().unwrap(),
    ]);
    let out = sim(&args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "shard {shard}: {}",
        text(&out)
    );
    reports.join("gate").join(format!("shard-{k}-of-{n}"))
}

/// One gate over the whole plan (no shard) into `<reports>/gate`.
fn single_run(reports: &Path, set: &[&str], flags: &[&str], series: u64, start: u64) -> Output {
    let (series, start) = (series.to_string(), start.to_string());
    let mut args = vec!["gate", "--scenario"];
    args.extend(set);
    args.extend(flags);
    args.extend(["--series", &series, "--start-seed", &start]);
    args.extend(["--reports", reports.to_str().unwrap()]);
    sim(&args)
}

/// Every file under `dir` (relative path -> bytes), the wall-time figures and the report
/// folder's own path blanked.
fn report_files(dir: &Path) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let body = std::fs::read(&p).unwrap();
            let body = match String::from_utf8(body) {
                Ok(t) => blank_wall_time(&t.replace(dir.to_str().unwrap(), "<dir>")),
                Err(e) => format!("{:x?}", e.into_bytes()),
            };
            out.push((p.strip_prefix(dir).unwrap().display().to_string(), body));
        }
    }
    out.sort();
    out
}

/// `wall time 1.234 s` (summary.md) and `time="1.234"` (junit.xml) -> a placeholder.
fn blank_wall_time(t: &str) -> String {
    let mut out = String::new();
    for line in t.lines() {
        let line = match (line.find("wall time "), line.find(" time=\"")) {
            (Some(i), _) => {
                let rest = &line[i + "wall time ".len()..];
                let end = rest.find(" s").unwrap();
                format!("{}wall time <t>{}", &line[..i], &rest[end..])
            }
            (None, Some(i)) => {
                let rest = &line[i + " time=\"".len()..];
                let end = rest.find('"').unwrap();
                format!("{} time=\"<t>{}", &line[..i], &rest[end..])
            }
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn four_shards_merged_equal_one_run() {
    let base = tmp("equal");
    let (series, start) = (90, 5);
    let dirs: Vec<PathBuf> = (0..4)
        .map(|k| shard(&base.join("shards"), &SET, series, start, k, 4))
        .collect();
    let mut args = vec!["merge"];
    // Any order: the merge orders shards by K.
    let names: Vec<String> = dirs.iter().rev().map(|d| d.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let merged_reports = base.join("merged");
    args.extend(["--reports", merged_reports.to_str().unwrap()]);
    let merged = sim(&args);
    let single_reports = base.join("single");
    let single = single_run(&single_reports, &SET, &[], 90, 5);
    assert_eq!(
        merged.status.code(),
        single.status.code(),
        "merged:\n{}\nsingle:\n{}",
        text(&merged),
        text(&single)
    );
    let (m, s) = (
        report_files(&merged_reports.join("gate")),
        report_files(&single_reports.join("gate")),
    );
    let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
    for f in [
        "series.csv",
        "summary.md",
        "junit.xml",
        "failing.txt",
        "hist_end_to_end_ms.hdr",
        "hist_end_to_end_ms.hgrm",
    ] {
        assert!(names.contains(&f), "{f} missing from {names:?}");
    }
    assert_eq!(m.len(), s.len(), "{names:?}");
    for ((mn, mb), (sn, sb)) in m.iter().zip(&s) {
        assert_eq!(mn, sn);
        assert!(
            mb == sb,
            "{mn} differs:\n--- merged\n{mb}\n--- single\n{sb}"
        );
    }
    // The CSV has one row per series, in seed order.
    let csv = std::fs::read_to_string(merged_reports.join("gate/series.csv")).unwrap();
    assert_eq!(csv.lines().count(), 91);
    assert!(csv.lines().nth(1).unwrap().starts_with("5,"));
    let _ = std::fs::remove_dir_all(&base);
}

/// Merge's refusal: exit 2 and a message with the file and the problem.
fn s<'a>(v: &[&'a String]) -> Vec<&'a str> {
    v.iter().map(|x| x.as_str()).collect()
}

fn refused(args: &[&str], says: &[&str]) {
    let out = sim(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    for s in says {
        assert!(err.contains(s), "{args:?}: {s:?} not in {err}");
    }
}

#[test]
fn merge_refuses_shards_that_are_not_one_sweep() {
    let base = tmp("bad");
    let set = &SET[..2];
    let a: Vec<String> = (0..3)
        .map(|k| {
            shard(&base.join("a"), set, 12, 0, k, 3)
                .display()
                .to_string()
        })
        .collect();
    let ok = sim(&[
        ["merge"].as_slice(),
        &s(&[&a[0], &a[1], &a[2]]),
        &["--reports", base.join("ok").to_str().unwrap()],
    ]
    .concat());
    assert!(matches!(ok.status.code(), Some(0 | 1)), "{}", text(&ok));

    let missing_dir = base.join("nowhere").display().to_string();
    refused(
        &["merge", &a[0], &missing_dir],
        &[&missing_dir, "no such folder"],
    );
    let not_a_shard = base.join("a").display().to_string();
    refused(&["merge", &not_a_shard], &["shard.json", "cannot read"]);
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1]])].concat(),
        &["missing shard(s) 2/3"],
    );
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1], &a[2], &a[1]])].concat(),
        &[a[1].as_str(), "both shard 1/3", "overlapping"],
    );
    // Another sweep: a different series count, different scenarios, a different shard count.
    let other_count = shard(&base.join("b"), set, 15, 0, 2, 3)
        .display()
        .to_string();
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1], &other_count])].concat(),
        &[
            &format!("{other_count}/shard.json"),
            "plan 15 series from seed 0",
            "not parts of one sweep",
        ],
    );
    let other_set = shard(&base.join("c"), &SET[1..], 12, 0, 2, 3)
        .display()
        .to_string();
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1], &other_set])].concat(),
        &[
            &format!("{other_set}/shard.json"),
            "scenarios",
            "aip151_faults.toml",
        ],
    );
    let other_n = shard(&base.join("d"), set, 12, 0, 1, 2)
        .display()
        .to_string();
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &other_n])].concat(),
        &["shard 1/2", "shard 0/3"],
    );
    // Another build, a partial shard, cut rows: each names its file.
    let edit = |dir: &str, from: &str, to: &str| {
        let f = Path::new(dir).join("shard.json");
        let t = std::fs::read_to_string(&f).unwrap();
        assert!(t.contains(from), "{t}");
        std::fs::write(&f, t.replacen(from, to, 1)).unwrap();
    };
    edit(&a[2], "sha256:", "sha256:0");
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1], &a[2]])].concat(),
        &[&format!("{}/shard.json", a[2]), "one build"],
    );
    edit(&a[2], "sha256:0", "sha256:");
    edit(
        &a[2],
        "\"partial\": null",
        "\"partial\": \"PARTIAL: interrupted after 1 of 4 series\"",
    );
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1], &a[2]])].concat(),
        &[&format!("{}/shard.json", a[2]), "partial", "run it again"],
    );
    let rows = Path::new(&a[1]).join("rows.jsonl");
    let t = std::fs::read_to_string(&rows).unwrap();
    std::fs::write(&rows, t.lines().skip(1).collect::<Vec<_>>().join("\n")).unwrap();
    refused(
        &[["merge"].as_slice(), &s(&[&a[0], &a[1]])].concat(),
        &[&format!("{} line 1", rows.display()), "expected 4"],
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// Shards run with `--set` carry the settings: the merge judges the scenarios as they ran (the
/// same report as one run with the settings), and refuses a shard run with other settings.
#[test]
fn shards_with_settings_merge_as_one_run_with_them() {
    let base = tmp("settings");
    let set = &SET[..2];
    let flags = ["--set", "executor.core.poll.jitter_fraction=0.5"];
    let dirs: Vec<String> = (0..2)
        .map(|k| {
            shard_with(&base.join("shards"), set, &flags, 10, 0, k, 2)
                .display()
                .to_string()
        })
        .collect();
    let merged_reports = base.join("merged");
    let merged = sim(&[
        ["merge"].as_slice(),
        &s(&[&dirs[0], &dirs[1]]),
        &["--reports", merged_reports.to_str().unwrap()],
    ]
    .concat());
    let single_reports = base.join("single");
    let single = single_run(&single_reports, set, &flags, 10, 0);
    assert_eq!(
        merged.status.code(),
        single.status.code(),
        "{}",
        text(&merged)
    );
    let (m, one) = (
        report_files(&merged_reports.join("gate")),
        report_files(&single_reports.join("gate")),
    );
    assert_eq!(m, one);
    // The settings changed the series: the same sweep without them hashes otherwise.
    let plain_reports = base.join("plain");
    single_run(&plain_reports, set, &[], 10, 0);
    let csv = |d: &Path| std::fs::read_to_string(d.join("gate/series.csv")).unwrap();
    assert_ne!(csv(&single_reports), csv(&plain_reports));
    let plain = shard(&base.join("p"), set, 10, 0, 1, 2)
        .display()
        .to_string();
    refused(
        &[["merge"].as_slice(), &s(&[&dirs[0], &plain])].concat(),
        &["scenarios", "--set executor.core.poll.jitter_fraction=0.5"],
    );
    let _ = std::fs::remove_dir_all(&base);
}
