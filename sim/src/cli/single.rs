//! The one-series commands: `run`, `replay`, `shrink`. `run` and `replay` judge the series with
//! every checker and exit 1 on a violation, each line with the command that reproduces it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;
use toolop_sim::campaign::{shrink, sweep};
use toolop_sim::judge::checkers::{self, Violation};
use toolop_sim::report::{summary, timeline};
use toolop_sim::scenario::overrides::Setting;
use toolop_sim::series;
use toolop_sim::series::faults::Schedule;

use super::{paint, usage_error, EXIT_FAIL};

/// How a single series is shown.
pub struct View {
    pub verbose: bool,
    pub node: Option<String>,
    pub json: bool,
}

pub fn run(path: &Path, sets: &[Setting], seed: u64, reports: &Path) -> ExitCode {
    let loaded = match super::load(path, sets) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let sc = &loaded.scenario;
    print!("{}", series::draw_params(sc, seed).render());
    let result = match series::run_series(sc, seed) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let file = match super::write_trace(reports, &sc.name, seed, "trace.jsonl", &result.trace) {
        Ok(f) => f,
        Err(code) => return code,
    };
    print!("{}", summary::render(&result.trace));
    println!(
        "end: {} at {} ms simulated, {} events",
        result.end_reason,
        result.end_ms,
        result.trace.events.len()
    );
    println!("trace: {}", file.display());
    println!("trace hash: {}", result.hash);
    let replay = sweep::replay_command(loaded.source(), seed);
    let violations = checkers::check_all(&result.trace);
    print_verdict(&violations);
    println!("replay: {replay}");
    exit_of(&violations)
}

fn print_verdict(violations: &[Violation]) {
    if violations.is_empty() {
        println!("checkers: {}", paint(true, "all properties hold"));
        return;
    }
    println!(
        "checkers: {}",
        paint(false, &format!("{} violation(s)", violations.len()))
    );
    for v in violations {
        println!(
            "  {} {}: {}",
            v.checker,
            v.node.as_deref().unwrap_or("-"),
            v.detail
        );
    }
}

fn exit_of(violations: &[Violation]) -> ExitCode {
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    }
}

pub fn replay_cmd(
    scenario: Option<PathBuf>,
    sets: &[Setting],
    seed: Option<u64>,
    schedule_file: Option<PathBuf>,
    reports: &Path,
    view: &View,
    mutation: Option<toolop::core::mutation::Mutation>,
) -> ExitCode {
    let schedule = match schedule_file.as_deref().map(Schedule::load).transpose() {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    if let Some(c) = schedule.as_ref().and_then(|s| s.checker.as_deref()) {
        if let Err(code) = check_checker(
            &format!(
                "{}: field `checker`",
                schedule_file.as_deref().unwrap_or(Path::new("")).display()
            ),
            c,
        ) {
            return code;
        }
    }
    let path = scenario.or_else(|| {
        let (file, s) = (schedule_file.as_deref()?, schedule.as_ref()?);
        Some(shrink::scenario_of(file, &s.scenario))
    });
    let seed = seed.or(schedule.as_ref().map(|s| s.seed));
    let (Some(path), Some(seed)) = (path, seed) else {
        return usage_error("replay needs --scenario and --seed, or --schedule");
    };
    // A schedule's own settings first (the series it was recorded from), then the flags'.
    let mut all = vec![];
    if let (Some(file), Some(s)) = (schedule_file.as_deref(), schedule.as_ref()) {
        for text in &s.sets {
            match Setting::parse(text) {
                Ok(set) => all.push(set),
                Err(e) => return usage_error(format!("{}: field `sets`: {e}", file.display())),
            }
        }
    }
    all.extend_from_slice(sets);
    replay(
        &path,
        &all,
        seed,
        schedule.as_ref(),
        reports,
        view,
        mutation,
    )
}

/// A checker name given by the user (a flag or a schedule's field) must exist.
pub fn check_checker(what: &str, c: &str) -> Result<(), ExitCode> {
    if checkers::CHECKERS.iter().any(|(n, _)| *n == c) {
        return Ok(());
    }
    let names: Vec<&str> = checkers::CHECKERS.iter().map(|(n, _)| *n).collect();
    Err(usage_error(format!(
        "{what} {c}: no such checker (one of {})",
        names.join(", ")
    )))
}

fn replay(
    path: &Path,
    sets: &[Setting],
    seed: u64,
    schedule: Option<&Schedule>,
    reports: &Path,
    view: &View,
    mutation: Option<toolop::core::mutation::Mutation>,
) -> ExitCode {
    let loaded = match super::load(path, sets) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let mut sc = loaded.scenario.clone();
    sc.executor.core.mutation = mutation;
    let params = match series::params_with(&sc, seed, schedule) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    let result = match series::run_series_with(&sc, seed, schedule) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let violations = checkers::check_all(&result.trace);
    // A schedule's trace goes next to the seed's own, never over it.
    let file_name = if schedule.is_some() {
        "schedule-trace.jsonl"
    } else {
        "trace.jsonl"
    };
    let written = match super::write_trace(reports, &sc.name, seed, file_name, &result.trace) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let reproduced = schedule
        .and_then(|s| s.checker.as_deref())
        .map(|c| (c, violations.iter().any(|v| v.checker == c)));
    if view.json {
        let out = json!({
            "scenario": loaded.source(),
            "seed": seed,
            "end_reason": result.end_reason,
            "end_ms": result.end_ms,
            "events": result.trace.events.len(),
            "trace": written.display().to_string(),
            "trace_hash": result.hash,
            "violations": violations,
            "schedule_reproduced": reproduced.map(|(c, ok)| json!({"checker": c, "reproduced": ok})),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return exit_of(&violations);
    }
    print!("{}", params.render());
    if let Some(s) = schedule {
        println!("schedule: {}", s.size(params.nodes.len()));
        for f in &result.firings {
            let asks = result.asks.get(&f.fault).copied().unwrap_or(0);
            println!(
                "  fired {} ask {} of {asks} (decision {}) at {} ms",
                f.fault.name(),
                f.ask,
                f.decision.unwrap_or(0),
                f.t_ms.unwrap_or(0)
            );
        }
        let listed = s.firings.len();
        if listed != result.firings.len() {
            println!(
                "  ({} listed firing(s) never reached their decision point)",
                listed - result.firings.len().min(listed)
            );
        }
    }
    print!("{}", timeline::LEGEND);
    println!("timeline:");
    print!(
        "{}",
        timeline::render_for(&result.trace, view.verbose, view.node.as_deref())
    );
    println!("summary:");
    print!("{}", summary::render(&result.trace));
    print_verdict(&violations);
    if !violations.is_empty() && !view.verbose {
        println!("hint: --verbose also shows every send, reply and network frame the violations may name");
    }
    if let Some((expected, again)) = reproduced {
        println!(
            "schedule expects {expected}: {}",
            if again {
                paint(true, "reproduced")
            } else {
                paint(false, "NOT reproduced")
            }
        );
    }
    println!("trace: {}", written.display());
    println!("trace hash: {}", result.hash);
    exit_of(&violations)
}

pub fn shrink_cmd(
    path: &Path,
    sets: &[Setting],
    seed: u64,
    checker: Option<&str>,
    out: Option<PathBuf>,
    max_replays: u32,
    reports: &Path,
) -> ExitCode {
    let loaded = match super::load(path, sets) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let sc = &loaded.scenario;
    if let Some(c) = checker {
        if let Err(code) = check_checker("--checker", c) {
            return code;
        }
    }
    let out = out.unwrap_or_else(|| shrink::default_path(reports, sc, seed));
    let file = loaded.source();
    match shrink::shrink_to_file(&loaded, seed, checker, max_replays, &out) {
        Ok(Some((s, original))) => {
            println!("shrink scenario={file} seed={seed} checker={}", s.checker);
            println!(
                "  original: {} (trace hash {})",
                s.original_size, s.original_hash
            );
            println!(
                "  shrunk:   {} (trace hash {})",
                s.shrunk_size, s.shrunk_hash
            );
            println!(
                "  replays:  {}{} in {:.2} s wall",
                s.replays,
                if s.budget_exhausted {
                    " (budget spent: may shrink further)"
                } else {
                    ""
                },
                s.wall_ms as f64 / 1000.0
            );
            println!("  still fails: {}: {}", s.checker, s.detail);
            println!("wrote {}", out.display());
            println!("wrote {} (the recorded schedule)", original.display());
            println!("replay: {}", shrink::replay_command(&out));
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!(
                "seed {seed} of {file} does not fail{}: nothing to shrink",
                checker.map(|c| format!(" {c}")).unwrap_or_default()
            );
            ExitCode::from(EXIT_FAIL)
        }
        Err(e) => usage_error(e),
    }
}
