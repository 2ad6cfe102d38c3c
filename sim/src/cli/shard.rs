//! `gate --shard K/N` (one block of a sweep, written for merging) and `merge DIR...` (the
//! shards checked to be the parts of one sweep, then judged and reported exactly as a
//! single-machine gate: `campaign::shard` says why blocks and how the checks go).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use toolop_sim::campaign::jobs_parser;
use toolop_sim::campaign::shard::{self, Manifest, ScenarioText, Shard};
use toolop_sim::campaign::sweep::{self, Loaded, Plan};
use toolop_sim::judge::gates;
use toolop_sim::report::hdr;

use super::gate::{judge_and_report, seeds_text, sweep_with_progress, GateArgs, Output};
use super::{paint, usage_error};

/// The `merge` command line.
#[derive(clap::Args)]
pub struct MergeArgs {
    /// Shard folders written by `toolop-sim gate --shard K/N` (all N of them, any order).
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Report folder name under --reports: one path segment (letters, digits, `.`, `_`, `-`).
    #[arg(long, default_value = "gate")]
    pub run: String,
    /// The folder the merged report goes under: <reports>/<run>/, as `gate` writes it.
    #[arg(long, default_value = "reports")]
    pub reports: PathBuf,
    /// Worker threads (1 to 256) for shrinking the first failing seed of each checker.
    #[arg(long, default_value_t = 2, value_parser = jobs_parser)]
    pub jobs: usize,
    /// Print one JSON object (verdict, gates, failing seeds, reports) instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// `merge`: exit 0 every gate passes, 1 a gate failed, 2 the shards do not make one sweep
/// (the message names the file and the problem) or the report cannot be written.
pub fn merge_cmd(a: MergeArgs) -> ExitCode {
    if let Err(code) = super::check_run_name("--run", &a.run) {
        return code;
    }
    let started = Instant::now();
    let build = match shard::build_id() {
        Ok(b) => b,
        Err(e) => return usage_error(e),
    };
    let mut shards = vec![];
    for dir in &a.dirs {
        match shard::read(dir) {
            Ok(s) => shards.push(s),
            Err(e) => return usage_error(e),
        }
    }
    let merged = match shard::merge(shards, &build) {
        Ok(m) => m,
        Err(e) => return usage_error(e),
    };
    // The summed shard histograms are the merged sweep's, byte for byte, or a shard lied.
    for ((file, values), (_, sum)) in hdr::histogram_values_of(&merged.rows)
        .into_iter()
        .zip(&merged.histograms)
    {
        if hdr::to_v2(sum) != hdr::to_v2(&hdr::histogram(&values)) {
            return usage_error(format!(
                "{}: the shards' histograms do not add up to their rows' values",
                hdr::hdr_file(file)
            ));
        }
    }
    let plan = merged.manifest.plan();
    if !a.json {
        println!(
            "merge: {} shards, {} series over {} ({}); longest shard {:.2} s wall",
            merged.manifest.shard.count,
            plan.len(),
            merged
                .scenarios
                .iter()
                .map(Loaded::source)
                .collect::<Vec<_>>()
                .join(", "),
            seeds_text(&plan),
            merged.longest_shard_ms as f64 / 1000.0
        );
    }
    let out = Output {
        run: &a.run,
        reports: &a.reports,
        jobs: a.jobs,
        json: a.json,
    };
    judge_and_report(
        &merged.scenarios,
        merged.rows,
        &plan,
        &out,
        None,
        started,
        merged.longest_shard_ms,
    )
}

/// `gate --shard K/N`: run this shard's block of the plan and write its folder
/// `<reports>/<run>/shard-K-of-N/` (rows, histograms, manifest). No gate is judged here: a gate
/// over part of the seeds would say PASS or FAIL on evidence the sweep has not finished
/// gathering; `toolop-sim merge` judges. Exit 0 the shard ran to the end with no checker
/// violation, 1 a checker fired (the merged gate will fail) or --fail-fast stopped it, 2, 130.
pub fn run_shard(a: &GateArgs, scenarios: &[Loaded], plan: &Plan, shard: Shard) -> ExitCode {
    let build = match toolop_sim::campaign::shard::build_id() {
        Ok(b) => b,
        Err(e) => return usage_error(e),
    };
    let mut texts = vec![];
    for l in scenarios {
        match std::fs::read_to_string(&l.file) {
            Ok(text) => texts.push(ScenarioText {
                file: l.file.display().to_string(),
                text,
                sets: l.sets.iter().map(ToString::to_string).collect(),
            }),
            Err(e) => return usage_error(format!("cannot read {}: {e}", l.file.display())),
        }
    }
    let block = shard.block(plan.len());
    let sub = shard.sub_plan(plan);
    println!(
        "gate shard {shard}: series {}..{} of {} ({}) over {} scenario(s), {} jobs",
        block.start,
        block.end,
        plan.len(),
        if sub.is_empty() {
            "none".into()
        } else {
            seeds_text(&sub)
        },
        scenarios.len(),
        a.jobs
    );
    let started = Instant::now();
    let (rows, partial) = sweep_with_progress(a, scenarios, &sub);
    let (series, seeds) = match plan {
        Plan::Range { series, .. } => (*series, None),
        Plan::Seeds { seeds, .. } => (seeds.len() as u64, Some(seeds.clone())),
    };
    let manifest = Manifest {
        format: toolop_sim::campaign::shard::FORMAT.into(),
        shard,
        build,
        start_seed: plan.start_seed(),
        series,
        seeds,
        scenarios: texts,
        first_index: block.start,
        planned: block.end - block.start,
        done: rows.len() as u64,
        partial: partial.clone(),
        wall_ms: started.elapsed().as_millis() as u64,
    };
    let dir = a
        .reports
        .join(&a.run)
        .join(format!("shard-{}-of-{}", shard.index, shard.count));
    let files = match toolop_sim::campaign::shard::write(&dir, &manifest, &rows) {
        Ok(f) => f,
        Err(e) => return usage_error(format!("cannot write {}: {e}", dir.display())),
    };
    for f in &files {
        println!("wrote {}", f.display());
    }
    let failing: Vec<&gates::SeriesRow> =
        rows.iter().filter(|r| !r.violations.is_empty()).collect();
    for r in failing.iter().take(5) {
        println!(
            "  {} (seed {}): {}",
            r.violations[0].checker,
            r.seed,
            sweep::replay_command(&r.scenario_file, r.seed)
        );
    }
    println!(
        "shard {shard}: {} series in {:.2} s wall, {} with checker violations; the verdict comes from `toolop-sim merge {}`",
        rows.len(),
        manifest.wall_ms as f64 / 1000.0,
        failing.len(),
        a.reports.join(&a.run).join("shard-*").display()
    );
    if let Some(p) = &partial {
        println!("{}", paint(false, p));
    }
    super::gate::exit_code(failing.is_empty() && partial.is_none())
}
