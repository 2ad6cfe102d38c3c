//! `toolop-sim gate`: a seeded sweep, every checker on every series, the gates, the reports, and
//! the first failing seed of each checker shrunk.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::json;
use toolop_sim::campaign::shard::Shard;
use toolop_sim::campaign::sweep::{self, Loaded, Plan};
use toolop_sim::campaign::{jobs_parser, shrink};
use toolop_sim::judge::gates;
use toolop_sim::report;

use crate::series_parser;

use super::{paint, usage_error, EXIT_FAIL, EXIT_INTERRUPTED, STOP};

/// The `gate` command line.
#[derive(clap::Args)]
pub struct GateArgs {
    /// Scenario files; series take turns over them.
    #[arg(long, num_args = 1.., required = true)]
    pub scenario: Vec<PathBuf>,
    /// Number of series (1 to 10,000,000).
    #[arg(long, default_value_t = 10_000, value_parser = series_parser())]
    pub series: u64,
    /// Worker threads (1 to 256); each series runs on its own OS thread.
    #[arg(long, default_value_t = 2, value_parser = jobs_parser)]
    pub jobs: usize,
    #[command(flatten)]
    pub set: super::SetArgs,
    /// The first seed; series i runs seed start_seed + i (seeds never wrap).
    #[arg(long, default_value_t = 0)]
    pub start_seed: u64,
    /// Re-judge only these seeds (comma-separated), each on the scenario the range from
    /// --start-seed gave it; replaces --series.
    #[arg(long, value_delimiter = ',', conflicts_with = "series")]
    pub seeds: Vec<u64>,
    /// Stop starting series after the first that fails a checker (the report is partial).
    #[arg(long)]
    pub fail_fast: bool,
    /// Print one JSON object (verdict, gates, failing seeds, reports) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Report folder name under --reports: one path segment (letters, digits, `.`, `_`, `-`).
    #[arg(long, default_value = "gate")]
    pub run: String,
    /// The folder every report goes under: <reports>/<run>/{series.csv, summary.md,
    /// junit.xml, failing.txt, hist_*.hgrm, hist_*.hdr, shrunk/}.
    #[arg(long, default_value = "reports")]
    pub reports: PathBuf,
    /// Run only shard K of N (from 0): a contiguous block of the series, written to
    /// <reports>/<run>/shard-K-of-N/ for `toolop-sim merge`, which judges the gates.
    #[arg(long, value_parser = toolop_sim::campaign::shard::parse_shard, conflicts_with = "json")]
    pub shard: Option<Shard>,
}

/// The plan the flags ask for, or the usage error (seeds that wrap, seeds below --start-seed).
pub fn plan_of(a: &GateArgs) -> Result<Plan, String> {
    if a.seeds.is_empty() {
        if a.start_seed.checked_add(a.series - 1).is_none() {
            return Err(format!(
                "--start-seed {} with --series {} runs past the last seed ({}); seeds never wrap",
                a.start_seed,
                a.series,
                u64::MAX
            ));
        }
        return Ok(Plan::Range {
            start_seed: a.start_seed,
            series: a.series,
        });
    }
    if let Some(s) = a.seeds.iter().find(|&&s| s < a.start_seed) {
        return Err(format!(
            "--seeds {s} is below --start-seed {}: a seed's scenario is counted from --start-seed",
            a.start_seed
        ));
    }
    Ok(Plan::Seeds {
        start_seed: a.start_seed,
        seeds: a.seeds.clone(),
    })
}

pub fn gate(a: GateArgs) -> ExitCode {
    if let Err(code) = super::check_run_name("--run", &a.run) {
        return code;
    }
    let scenarios =
        match super::checked_sets(&a.set).and_then(|sets| super::load_all(&a.scenario, sets)) {
            Ok(s) => s,
            Err(code) => return code,
        };
    let plan = match plan_of(&a) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    let names: Vec<String> = scenarios.iter().map(Loaded::source).collect();
    if let Some(shard) = a.shard {
        return super::shard::run_shard(&a, &scenarios, &plan, shard);
    }
    let say = |line: String| {
        if !a.json {
            println!("{line}");
        }
    };
    say(format!(
        "gate: {} series over {} ({}), {} jobs{}",
        plan.len(),
        names.join(", "),
        seeds_text(&plan),
        a.jobs,
        if a.fail_fast { ", --fail-fast" } else { "" }
    ));
    let started = Instant::now();
    let (rows, partial) = sweep_with_progress(&a, &scenarios, &plan);
    let out = Output {
        run: &a.run,
        reports: &a.reports,
        jobs: a.jobs,
        json: a.json,
    };
    judge_and_report(&scenarios, rows, &plan, &out, partial, started, 0)
}

/// "seeds 0..=99" or "seeds 3,5,8".
pub fn seeds_text(plan: &Plan) -> String {
    match plan {
        Plan::Range { start_seed, series } => {
            format!("seeds {start_seed}..={}", start_seed + (series - 1))
        }
        Plan::Seeds { seeds, .. } => match (seeds.first(), seeds.last()) {
            (Some(a), Some(b))
                if seeds.len() > 10 && seeds.windows(2).all(|w| w[1] == w[0] + 1) =>
            {
                format!("seeds {a}..={b}")
            }
            _ => {
                let s: Vec<String> = seeds.iter().map(u64::to_string).collect();
                format!("seeds {}", s.join(","))
            }
        },
    }
}

/// Runs `plan` with the progress bar, Ctrl-C and --fail-fast; the rows and, when the sweep
/// stopped early, why.
pub fn sweep_with_progress(
    a: &GateArgs,
    scenarios: &[Loaded],
    plan: &Plan,
) -> (Vec<gates::SeriesRow>, Option<String>) {
    super::on_interrupt();
    let progress = if a.json {
        report::Progress::hidden(plan.len())
    } else {
        report::Progress::new(plan.len())
    };
    let fail_fast = a.fail_fast;
    let on_done = |row: &gates::SeriesRow| {
        progress.inc(1);
        if fail_fast && !row.violations.is_empty() {
            super::stop(super::STOPPED_BY_FAIL_FAST);
        }
    };
    let hooks = sweep::Hooks {
        on_done: &on_done,
        stop: &STOP,
        ..sweep::Hooks::default()
    };
    let (rows, _) = sweep::run_plan(scenarios, plan, a.jobs, &hooks);
    progress.finish();
    let done = rows.len() as u64;
    let partial = match super::stopped() {
        super::STOPPED_BY_INTERRUPT => Some(format!(
            "PARTIAL: interrupted after {done} of {} series",
            plan.len()
        )),
        super::STOPPED_BY_FAIL_FAST if done < plan.len() => Some(format!(
            "PARTIAL: --fail-fast stopped after {done} of {} series",
            plan.len()
        )),
        _ => None,
    };
    (rows, partial)
}

/// Where and how a judged sweep is reported.
pub struct Output<'a> {
    pub run: &'a str,
    pub reports: &'a Path,
    /// Worker threads for shrinking.
    pub jobs: usize,
    pub json: bool,
}

/// Judges `rows` (the series of `plan`, in plan order), shrinks the first failing seed of each
/// failing checker, writes the reports and prints the verdict. The one path from rows to a
/// verdict, for `gate` and `merge` alike. The wall time reported is `earlier_ms` (work done
/// before `started`, elsewhere: the longest shard of a merge) plus the time since `started`.
pub fn judge_and_report(
    scenarios: &[Loaded],
    rows: Vec<gates::SeriesRow>,
    plan: &Plan,
    out: &Output,
    partial: Option<String>,
    started: Instant,
    earlier_ms: u64,
) -> ExitCode {
    let done = rows.len() as u64;
    let mut r = gates::evaluate(scenarios, rows, out.run, plan.start_seed(), 0);
    let dir = out.reports.join(out.run);
    // Shrinking is part of the gate's wall time; an interrupted gate does not shrink.
    let shrunk = if STOP.load(Ordering::SeqCst) && super::stopped() == super::STOPPED_BY_INTERRUPT {
        vec![]
    } else {
        shrink_failing(scenarios, &r, &dir.join("shrunk"), out.jobs)
    };
    r.wall_ms = earlier_ms + started.elapsed().as_millis() as u64;
    let files = match write_reports(&dir, &r, partial.as_deref(), &shrunk) {
        Ok(f) => f,
        Err(e) => return usage_error(format!("cannot write reports to {}: {e}", dir.display())),
    };
    let verdict = if r.passed() { "PASS" } else { "FAIL" };
    if out.json {
        let out = json!({
            "verdict": verdict,
            "partial": partial,
            "series": done,
            "planned_series": plan.len(),
            "wall_ms": r.wall_ms,
            "gates": r.gates,
            "failing": r.failing,
            "gate_setters": report::setters::gate_setters(&r).iter().map(|g| json!({
                "protocol": g.protocol,
                "gate": g.gate,
                "seeds": g.seeds.iter().map(|(row, v)| json!({"seed": row.seed, "scenario_file": row.scenario_file, "value": v})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "shrunk": shrunk.iter().map(|s| json!({"checker": s.checker, "seed": s.seed, "result": s.text, "replay": s.replay})).collect::<Vec<_>>(),
            "reports": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        println!("{}", report::gate_table(&r));
        println!("{}", report::coverage_table(&r));
        if !r.failing.is_empty() {
            println!("{}", report::failing_list(&r));
        }
        print!("{}", report::setters::setters_text(&r));
        if !shrunk.is_empty() {
            print!("{}", shrunk_text(&shrunk));
        }
        for f in &files {
            println!("wrote {}", f.display());
        }
        if let Some(p) = &partial {
            println!("{}", paint(false, p));
        }
        println!(
            "{} in {:.2} s wall (shrinking included)",
            paint(r.passed(), verdict),
            r.wall_ms as f64 / 1000.0
        );
    }
    exit_code(r.passed() && partial.is_none())
}

/// 130 after Ctrl-C, else 0 when `ok`, else 1.
pub fn exit_code(ok: bool) -> ExitCode {
    if super::stopped() == super::STOPPED_BY_INTERRUPT {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    }
}

/// The reports, then what only the CLI knows: a partial run is marked at the top of
/// `summary.md` and in a `PARTIAL` file; shrunk schedules go into `summary.md` and `junit.xml`.
fn write_reports(
    dir: &Path,
    r: &gates::SweepReport,
    partial: Option<&str>,
    shrunk: &[Shrunk],
) -> std::io::Result<Vec<PathBuf>> {
    let _ = std::fs::remove_file(dir.join("PARTIAL"));
    let mut files = report::write_all(dir, r)?;
    let summary = dir.join("summary.md");
    let mut md = std::fs::read_to_string(&summary)?;
    if let Some(p) = partial {
        md = format!("> **{p}.** The verdict below covers only the series that ran.\n\n{md}");
        let marker = dir.join("PARTIAL");
        std::fs::write(&marker, format!("{p}\n"))?;
        files.push(marker);
    }
    let setters = report::setters::setters_text(r);
    if !setters.is_empty() {
        let _ = write!(
            md,
            "\n## Seeds that set the failing gates\n\n```\n{setters}```\n"
        );
    }
    if !shrunk.is_empty() {
        md.push_str("\n## Shrunk schedules\n\n");
        for s in shrunk {
            let _ = writeln!(
                md,
                "- {} (seed {}): {}",
                s.checker,
                s.seed,
                s.text.replace('\n', " ")
            );
            if let Some(cmd) = &s.replay {
                let _ = writeln!(md, "  replay: `{cmd}`");
            }
        }
        let junit = dir.join("junit.xml");
        let xml = std::fs::read_to_string(&junit)?;
        let body: String = shrunk_text(shrunk)
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let xml = xml.replacen(
            "</testsuite>",
            &format!("  <system-err>{body}</system-err>\n</testsuite>"),
            1,
        );
        std::fs::write(&junit, xml)?;
    }
    std::fs::write(&summary, md)?;
    Ok(files)
}

/// One shrink of the gate's shrinking step.
pub struct Shrunk {
    pub checker: String,
    pub seed: u64,
    pub text: String,
    pub replay: Option<String>,
}

fn shrunk_text(shrunk: &[Shrunk]) -> String {
    let mut out = format!(
        "shrinking the first failing seed of {} failing checker(s):\n",
        shrunk.len()
    );
    for s in shrunk {
        let _ = writeln!(out, "  {} (seed {}): {}", s.checker, s.seed, s.text);
        if let Some(cmd) = &s.replay {
            let _ = writeln!(out, "    replay: {cmd}");
        }
    }
    out
}

/// Per gate report: the replay budget of each shrink.
const GATE_SHRINK_REPLAYS: u32 = 200;

/// The gate's shrinking step: the first failing seed of each failing checker, shrunk against
/// that checker, its schedule written under `dir`.
fn shrink_failing(
    scenarios: &[Loaded],
    r: &gates::SweepReport,
    dir: &Path,
    jobs: usize,
) -> Vec<Shrunk> {
    let mut firsts: Vec<(&'static str, &gates::SeriesRow)> = vec![];
    for row in &r.rows {
        for v in &row.violations {
            if !firsts.iter().any(|(c, _)| *c == v.checker) {
                firsts.push((v.checker, row));
            }
        }
    }
    std::thread::scope(|scope| {
        let mut out = vec![];
        for batch in firsts.chunks(jobs.max(1)) {
            let handles: Vec<_> = batch
                .iter()
                .map(|&(checker, row)| {
                    scope.spawn(move || shrink_one(scenarios, checker, row, dir))
                })
                .collect();
            out.extend(handles.into_iter().zip(batch).map(|(h, &(checker, row))| {
                h.join().unwrap_or_else(|_| Shrunk {
                    checker: checker.into(),
                    seed: row.seed,
                    text: "shrink panicked".into(),
                    replay: None,
                })
            }));
        }
        out
    })
}

fn shrink_one(scenarios: &[Loaded], checker: &str, row: &gates::SeriesRow, dir: &Path) -> Shrunk {
    let mut s = Shrunk {
        checker: checker.into(),
        seed: row.seed,
        text: String::new(),
        replay: None,
    };
    let Some(l) = scenarios.iter().find(|l| l.source() == row.scenario_file) else {
        s.text = "scenario not found".into();
        return s;
    };
    let out = dir.join(format!("{checker}-{}-{}.toml", l.scenario.name, row.seed));
    match shrink::shrink_to_file(l, row.seed, Some(checker), GATE_SHRINK_REPLAYS, &out) {
        Ok(Some((sh, _))) => {
            s.text = sh.render();
            s.replay = Some(shrink::replay_command(&out));
        }
        Ok(None) => s.text = "did not fail again (not shrunk)".into(),
        Err(e) => s.text = format!("cannot shrink: {e}"),
    }
    s
}
