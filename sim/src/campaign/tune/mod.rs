//! `toolop-sim tune`: evaluate a grid of executor poll settings on the same seeds and recommend
//! one for a latency target.
//!
//! Each grid point is a copy of the scenario with the executor settings of the point
//! ([`grid::Setting::apply`]), written as a scenario file under `reports/<run>/points/`, and run
//! as a gate sweep: [`sweep::run`] over the same seed range at every point, then
//! [`gates::evaluate`]. The point's numbers are read from those rows and gate verdicts
//! ([`analysis::PointMetrics`]), so tune and gate cannot disagree. The files, under
//! `reports/<run>/`:
//!
//! | file | module | what |
//! |---|---|---|
//! | `tune.csv` | [`csv`] | one row per point: settings, latency, polls, rate, cancel, UNKNOWN, 429s, every gate |
//! | `tune.md` | [`markdown`] | the frontier, the recommendation and the `gate` command that re-checks it |
//! | `tune.html` | [`html`] | a self-contained page with plots drawn by `plotters` (SVG backend) |
//! | `points/pNN.toml` | here | each point as a scenario file: every failing seed replays from it |
//! | `recommended.toml` | here | the recommended point, for `toolop-sim gate --scenario` |
//!
//! Paired comparison: every point runs seeds `start_seed..start_seed+series`, and everything
//! [`series::draw_params`] draws from a seed (workload, server profile, network, fault profile,
//! sub-seeds) is identical across points; [`run`] checks that for every seed and point and says
//! so in the report. See `tune.md` for what is not common.

pub mod analysis;
pub mod csv;
pub mod grid;
pub mod html;
pub mod markdown;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::campaign::sweep::{self, Loaded};
use crate::judge::gates::{self, FailingSeed, GateRow};
use crate::report::Progress;
use crate::scenario::{Scenario, ScenarioError};
use crate::series;

pub use analysis::{frontier, recommend, Candidate, PointMetrics};
pub use grid::{Grid, GridError, Knob, Setting};

/// Default latency target: p99 completion detection (server-side terminal to acceptance).
pub const DEFAULT_LATENCY_P99_MAX_MS: u64 = 60_000;

/// Failing seeds kept per point (each with its replay command).
const FAILING_KEPT: usize = 5;

/// The `tune` command line.
#[derive(Clone, Debug, clap::Args)]
pub struct TuneArgs {
    /// The scenario whose executor settings the grid varies.
    #[arg(long)]
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: crate::scenario::overrides::SetArgs,
    /// The grid file (TOML): lists or ranges of executor poll settings.
    #[arg(long)]
    pub grid: PathBuf,
    /// Series per grid point (at least 1); every point runs the same seeds.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub series: u64,
    /// Worker threads (1 to 256): points run side by side, series within a point when there
    /// are fewer points than jobs.
    #[arg(long, default_value_t = 2, value_parser = crate::campaign::jobs_parser)]
    pub jobs: usize,
    /// The first seed of every point; seeds never wrap past 2^64-1.
    #[arg(long, default_value_t = 0)]
    pub start_seed: u64,
    /// Latency target for the recommendation: p99 completion detection in ms.
    #[arg(long, default_value_t = DEFAULT_LATENCY_P99_MAX_MS)]
    pub latency_p99_max_ms: u64,
    /// Report folder name under --reports: one path segment (letters, digits, `.`, `_`, `-`).
    #[arg(long, default_value = "tune")]
    pub run: String,
    /// The folder every report of this command goes under.
    #[arg(long, default_value = "reports")]
    pub reports: PathBuf,
    /// Print one JSON object (every point, the frontier, the recommendation, its re-check
    /// command, the files written) instead of the summary.
    #[arg(long)]
    pub json: bool,
}

impl TuneArgs {
    /// Arguments with the defaults of the command line.
    pub fn new(scenario: impl Into<PathBuf>, grid: impl Into<PathBuf>, series: u64) -> TuneArgs {
        TuneArgs {
            scenario: scenario.into(),
            set: Default::default(),
            grid: grid.into(),
            series,
            jobs: 2,
            start_seed: 0,
            latency_p99_max_ms: DEFAULT_LATENCY_P99_MAX_MS,
            run: "tune".into(),
            reports: PathBuf::from("reports"),
            json: false,
        }
    }

    /// `reports/<run>`.
    pub fn dir(&self) -> PathBuf {
        self.reports.join(&self.run)
    }
}

/// Why `tune` could not run. Every variant is exit code 2 (bad usage or input).
#[derive(Clone, Debug, PartialEq)]
pub enum TuneError {
    Grid(GridError),
    Scenario(ScenarioError),
    Usage(String),
    Io(String),
}

impl std::fmt::Display for TuneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TuneError::Grid(e) => write!(f, "{e}"),
            TuneError::Scenario(e) => write!(f, "{e}"),
            TuneError::Usage(e) | TuneError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TuneError {}

impl TuneError {
    pub fn exit_code(&self) -> u8 {
        2
    }
}

impl From<GridError> for TuneError {
    fn from(e: GridError) -> Self {
        TuneError::Grid(e)
    }
}

/// One grid point and what its sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    /// "p01", "p02" ... in grid order.
    pub id: String,
    /// The varied settings, e.g. "initial=250 backoff=1.5".
    pub label: String,
    pub setting: Setting,
    /// The point's scenario file (`reports/<run>/points/<id>.toml`) and its text.
    pub file: PathBuf,
    #[serde(skip)]
    pub scenario_toml: String,
    pub metrics: PointMetrics,
    pub gates: Vec<GateRow>,
    /// The first few failing seeds, with replay commands against the point's file.
    pub failing: Vec<FailingSeed>,
    /// Per-operation poll counts and completion-detection latencies, for the histograms.
    #[serde(skip)]
    pub polls_per_operation: Vec<u64>,
    #[serde(skip)]
    pub detection_ms: Vec<u64>,
    /// SHA-256 over the series' trace hashes in seed order: re-running the point's file with
    /// `gate` on the same seeds reproduces it.
    pub traces_digest: String,
    pub wall_ms: u64,
}

impl PointResult {
    pub fn passes(&self) -> bool {
        analysis::all_pass(&self.gates)
    }

    /// Names of the gates that fail this point (coverage is reported, never counted: see
    /// [`analysis::NOT_A_POINT_VERDICT`]).
    pub fn failed_gates(&self) -> Vec<&str> {
        self.gates
            .iter()
            .filter(|g| !g.pass && g.gate != analysis::NOT_A_POINT_VERDICT)
            .map(|g| g.gate.as_str())
            .collect()
    }
}

impl Candidate for PointResult {
    fn passes(&self) -> bool {
        PointResult::passes(self)
    }
    fn latency(&self) -> Option<u64> {
        self.metrics.detection_p99_ms
    }
    fn polls(&self) -> Option<f64> {
        self.metrics.polls_per_op_mean
    }
}

/// The common-random-numbers check: the seed's draws compared across points.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CrnCheck {
    /// (point, seed) pairs compared against the first point.
    pub compared: u64,
    /// Pairs whose drawn parameters differ from the first point's (should be none).
    pub differing: Vec<(String, u64)>,
}

/// Everything a tune run produced; the report files are views of this.
#[derive(Clone, Debug, Serialize)]
pub struct TuneReport {
    pub run: String,
    pub dir: PathBuf,
    pub reports: PathBuf,
    pub scenario_file: PathBuf,
    pub scenario_name: String,
    pub grid_file: PathBuf,
    pub grid_description: Option<String>,
    /// The knobs the grid varies, by grid-file name.
    pub varied: Vec<&'static str>,
    pub start_seed: u64,
    pub series: u64,
    pub jobs: usize,
    pub latency_p99_max_ms: u64,
    /// The gates' poll-rate bound (the scenario's, kept at every point).
    pub qps_bound: u32,
    pub points: Vec<PointResult>,
    /// Indices into `points`, polls ascending.
    pub frontier: Vec<usize>,
    pub recommended: Option<usize>,
    pub crn: CrnCheck,
    pub wall_ms: u64,
}

impl TuneReport {
    /// "seeds 0..=199".
    pub fn seed_range(&self) -> String {
        match self.series {
            0 => "no seeds".into(),
            1 => format!("seed {}", self.start_seed),
            n => format!(
                "seeds {}..={}",
                self.start_seed,
                self.start_seed.saturating_add(n - 1)
            ),
        }
    }

    /// `reports/<run>/recommended.toml`.
    pub fn recommended_file(&self) -> PathBuf {
        self.dir.join("recommended.toml")
    }

    /// The first seed of the re-check: the block right after the tuning seeds (or right before
    /// them when that would run past the last seed), so the recommendation is judged on seeds it
    /// was not chosen on.
    pub fn recheck_start_seed(&self) -> u64 {
        let after = self.start_seed.checked_add(self.series);
        match after.and_then(|a| a.checked_add(self.series.saturating_sub(1))) {
            Some(_) => self.start_seed + self.series,
            None => self.start_seed.saturating_sub(self.series),
        }
    }

    /// The exact command that re-checks the recommended point with the release gate, on other
    /// seeds than the tuning ones.
    pub fn recheck_command(&self) -> String {
        let mut cmd = format!(
            "toolop-sim gate --scenario {} --series {} --start-seed {} --run {}-recheck",
            self.recommended_file().display(),
            self.series,
            self.recheck_start_seed(),
            self.run
        );
        if self.reports != Path::new("reports") {
            cmd.push_str(&format!(" --reports {}", self.reports.display()));
        }
        cmd
    }

    pub fn recommended_point(&self) -> Option<&PointResult> {
        self.recommended.map(|i| &self.points[i])
    }

    /// Names of the gates (the columns of `tune.csv`), in gate order.
    pub fn gate_names(&self) -> Vec<String> {
        let mut names: Vec<String> = vec![];
        for p in &self.points {
            for g in &p.gates {
                if !names.contains(&g.gate) {
                    names.push(g.gate.clone());
                }
            }
        }
        names
    }
}

/// A point's scenario file: a header naming its origin, then the scenario as TOML.
fn point_toml(
    sc: &Scenario,
    id: &str,
    label: &str,
    base: &Path,
    grid: &Path,
) -> Result<String, String> {
    let body =
        toml::to_string(sc).map_err(|e| format!("cannot write the scenario as TOML: {e}"))?;
    Ok(format!(
        "# toolop-sim tune point {id}: {label}\n# {} with the executor settings of this point from {}.\n\
         # gates.max_qps is the scenario's own poll-rate bound, whatever executor.max_qps says.\n{body}",
        base.display(),
        grid.display()
    ))
}

/// Run the grid: every point over the same seeds, gates and metrics per point, the frontier and
/// the recommendation. `on_series` is called once per finished series (progress). Writes no
/// file; see [`write_all`].
pub fn run(args: &TuneArgs, on_series: &(dyn Fn() + Sync)) -> Result<TuneReport, TuneError> {
    let started = Instant::now();
    if args.series == 0 {
        return Err(TuneError::Usage("--series must be positive".into()));
    }
    if !crate::scenario::validate::is_safe_segment(&args.run) {
        return Err(TuneError::Usage(format!(
            "--run {:?} {}",
            args.run,
            crate::scenario::validate::SAFE_SEGMENT
        )));
    }
    if args.jobs == 0 {
        return Err(TuneError::Usage("--jobs must be positive".into()));
    }
    if args.start_seed.checked_add(args.series).is_none() {
        return Err(TuneError::Usage("--start-seed + --series overflows".into()));
    }
    let sets = args.set.checked().map_err(TuneError::Usage)?;
    // The settings apply before the grid's: every point file holds both.
    let base =
        crate::scenario::overrides::load(&args.scenario, sets).map_err(TuneError::Scenario)?;
    let grid = Grid::load(&args.grid)?;
    let settings = grid.settings(&base)?;
    let varied = grid.varied();
    let dir = args.dir();
    let width = settings.len().to_string().len().max(2);

    // Each point as a scenario file, read back through the scenario loader: what runs is what
    // the file says, and a point the loader refuses is a bad grid.
    let mut planned = vec![];
    for (i, s) in settings.iter().enumerate() {
        let id = format!("p{:0width$}", i + 1);
        let label = s.label(&varied);
        let file = dir.join("points").join(format!("{id}.toml"));
        let bad = |reason: String| GridError {
            file: grid.file.clone(),
            field: varied.first().map_or("(document)", |k| k.name()).into(),
            reason,
        };
        let text = point_toml(&s.apply(&base), &id, &label, &args.scenario, &args.grid)
            .map_err(|e| bad(format!("point {id} ({label}): {e}")))?;
        let scenario =
            Scenario::parse(&file.display().to_string(), &text).map_err(|e| GridError {
                file: grid.file.clone(),
                field: Knob::ALL
                    .into_iter()
                    .find(|k| {
                        e.field.starts_with(k.scenario_field())
                            || k.scenario_field().starts_with(&e.field)
                    })
                    .map_or(e.field.clone(), |k| k.name().to_string()),
                reason: format!(
                    "point {id} ({label}) is not a valid scenario: {}: {}",
                    e.field, e.problem
                ),
            })?;
        planned.push((id, label, s.clone(), file, text, scenario));
    }

    // What every seed draws at the first point; each point's worker compares its own draws.
    let reference: Vec<series::Params> = (args.start_seed..args.start_seed + args.series)
        .map(|seed| series::draw_params(&planned[0].5, seed))
        .collect();
    let differing: Mutex<Vec<(usize, u64)>> = Mutex::new(vec![]);

    let outer = args.jobs.max(1).min(planned.len());
    let inner = (args.jobs.max(1) / outer).max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<PointResult>>> = Mutex::new(vec![None; planned.len()]);
    std::thread::scope(|scope| {
        for _ in 0..outer {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((id, label, setting, file, text, scenario)) = planned.get(i) else {
                    return;
                };
                let point_started = Instant::now();
                if i > 0 {
                    let seeds = args.start_seed..args.start_seed + args.series;
                    let differ = seeds
                        .zip(&reference)
                        .filter(|(seed, r)| series::draw_params(scenario, *seed) != **r)
                        .map(|(seed, _)| (i, seed));
                    differing.lock().expect("crn lock").extend(differ);
                }
                let loaded = [Loaded::plain(file.clone(), scenario.clone())];
                let (rows, _) = sweep::run(&loaded, args.start_seed, args.series, inner, on_series);
                let wall_ms = point_started.elapsed().as_millis() as u64;
                let hashes: String = rows
                    .iter()
                    .map(|r| r.trace_hash.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                let traces_digest = toolop::digest::sha256_hex(hashes.as_bytes());
                let flat = |f: fn(&crate::judge::metrics::SeriesMetrics) -> &Vec<u64>| -> Vec<u64> {
                    rows.iter()
                        .flat_map(|r| f(&r.metrics).iter().copied())
                        .collect()
                };
                let polls_per_operation = flat(|m| &m.polls_per_operation);
                let detection_ms = flat(|m| &m.completion_detection_ms);
                let report = gates::evaluate(&loaded, rows, id, args.start_seed, wall_ms);
                let metrics = PointMetrics::of(&report);
                let result = PointResult {
                    id: id.clone(),
                    label: label.clone(),
                    setting: setting.clone(),
                    file: file.clone(),
                    scenario_toml: text.clone(),
                    metrics,
                    gates: report.gates,
                    failing: report.failing.into_iter().take(FAILING_KEPT).collect(),
                    polls_per_operation,
                    detection_ms,
                    traces_digest,
                    wall_ms,
                };
                results.lock().expect("results lock")[i] = Some(result);
            });
        }
    });
    let points: Vec<PointResult> = results
        .into_inner()
        .expect("results lock")
        .into_iter()
        .map(|p| p.expect("every point ran"))
        .collect();
    let wall_ms = started.elapsed().as_millis() as u64;
    let mut differing = differing.into_inner().expect("crn lock");
    differing.sort_unstable();
    let crn = CrnCheck {
        compared: (points.len() as u64 - 1) * args.series,
        differing: differing
            .into_iter()
            .map(|(i, seed)| (points[i].id.clone(), seed))
            .collect(),
    };
    let frontier = analysis::frontier(&points);
    let recommended = analysis::recommend(&points, args.latency_p99_max_ms);
    Ok(TuneReport {
        run: args.run.clone(),
        dir,
        reports: args.reports.clone(),
        scenario_file: args.scenario.clone(),
        scenario_name: base.name.clone(),
        grid_file: args.grid.clone(),
        grid_description: grid.description.clone(),
        varied: varied.iter().map(|k| k.name()).collect(),
        start_seed: args.start_seed,
        series: args.series,
        jobs: args.jobs.max(1),
        latency_p99_max_ms: args.latency_p99_max_ms,
        qps_bound: base.gates.max_qps.unwrap_or(base.executor.max_qps),
        points,
        frontier,
        recommended,
        crn,
        wall_ms,
    })
}

/// Write `tune.csv`, `tune.md`, `tune.html`, every point's scenario file under `points/`, and
/// `recommended.toml` (when there is a recommendation) into `r.dir`. Returns the paths written
/// (the point files summarised by their folder).
pub fn write_all(r: &TuneReport) -> std::io::Result<Vec<PathBuf>> {
    let points_dir = r.dir.join("points");
    std::fs::create_dir_all(&points_dir)?;
    let mut written = vec![];
    let path = r.dir.join("tune.csv");
    std::fs::write(&path, csv::to_string(r)?)?;
    written.push(path);
    let path = r.dir.join("tune.md");
    std::fs::write(&path, markdown::tune_markdown(r))?;
    written.push(path);
    let path = r.dir.join("tune.html");
    std::fs::write(&path, html::tune_html(r).map_err(std::io::Error::other)?)?;
    written.push(path);
    for p in &r.points {
        std::fs::write(&p.file, &p.scenario_toml)?;
    }
    written.push(points_dir);
    let rec = r.recommended_file();
    match r.recommended_point() {
        Some(p) => {
            let header = format!(
                "# Recommended by toolop-sim tune (run {}) for p99 completion detection <= {} ms: the point with the\n\
                 # fewest polls per operation among those that pass every gate. Re-check:\n#   {}\n",
                r.run,
                r.latency_p99_max_ms,
                r.recheck_command()
            );
            std::fs::write(&rec, format!("{header}{}", p.scenario_toml))?;
            written.push(rec);
        }
        None => {
            // A stale recommendation from an earlier run must not survive this one.
            if rec.exists() {
                std::fs::remove_file(&rec)?;
            }
        }
    }
    Ok(written)
}

/// The plain-text summary `main_tune` prints: one line per point, the frontier, the
/// recommendation and the command that re-checks it.
pub fn text_summary(r: &TuneReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let mut rows = vec![vec![
        "POINT".to_string(),
        "SETTING".into(),
        "DETECT_P50".into(),
        "DETECT_P99".into(),
        "POLLS/OP".into(),
        "POLLS_P99".into(),
        "BUSIEST_1S".into(),
        "CANCEL_P99".into(),
        "UNKNOWN_MAX".into(),
        "429S".into(),
        "VERDICT".into(),
    ]];
    for (i, p) in r.points.iter().enumerate() {
        let m = &p.metrics;
        let mut verdict = if p.passes() {
            "PASS".to_string()
        } else {
            format!("FAIL {}", p.failed_gates().join(","))
        };
        if r.frontier.contains(&i) {
            verdict.push_str(" frontier");
        }
        if r.recommended == Some(i) {
            verdict.push_str(" RECOMMENDED");
        }
        rows.push(vec![
            p.id.clone(),
            p.label.clone(),
            opt(m.detection_p50_ms),
            opt(m.detection_p99_ms),
            m.polls_per_op_mean
                .map_or("-".into(), |v| format!("{v:.2}")),
            opt(m.polls_per_op_p99),
            m.busiest_window_sends.to_string(),
            opt(m.cancel_p99_ms),
            opt(m.unknown_max_ms),
            m.rate_limited.to_string(),
            verdict,
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    let ids: Vec<&str> = r
        .frontier
        .iter()
        .map(|&i| r.points[i].id.as_str())
        .collect();
    let _ = writeln!(
        out,
        "frontier (latency p99 vs polls/op, passing points): {}",
        if ids.is_empty() {
            "none".into()
        } else {
            ids.join(", ")
        }
    );
    match r.recommended_point() {
        Some(p) => {
            let _ = writeln!(
                out,
                "recommended for completion-detection p99 <= {} ms: {} ({}): {:.2} polls/op, p99 {} ms",
                r.latency_p99_max_ms,
                p.id,
                p.label,
                p.metrics.polls_per_op_mean.unwrap_or(0.0),
                opt(p.metrics.detection_p99_ms)
            );
            let _ = writeln!(out, "re-check: {}", r.recheck_command());
        }
        None => {
            let _ = writeln!(out, "no point passes every gate with completion-detection p99 <= {} ms: no recommendation", r.latency_p99_max_ms);
        }
    }
    out
}

/// `toolop-sim tune`: run the grid, print the summary, write the reports. Exit code 0 with a
/// recommendation, 1 when no point passes every gate within the latency target, 2 on bad usage
/// or input (a bad grid names its file, field and reason).
pub fn main_tune(args: TuneArgs) -> ExitCode {
    let points = Grid::load(&args.grid).map(|g| g.len() as u64).unwrap_or(0);
    let say = |line: String| {
        if !args.json {
            println!("{line}");
        }
    };
    say(format!(
        "tune: {} over {}, {} series per point (seeds {}..={}, the same at every point), {} jobs",
        args.grid.display(),
        args.scenario.display(),
        args.series,
        args.start_seed,
        args.start_seed
            .saturating_add(args.series.saturating_sub(1)),
        args.jobs.max(1)
    ));
    let total = points.saturating_mul(args.series);
    let progress = if args.json {
        Progress::hidden(total)
    } else {
        Progress::new(total)
    };
    let result = run(&args, &|| progress.inc(1));
    progress.finish();
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    if !args.json {
        print!("{}", text_summary(&r));
    }
    if !r.crn.differing.is_empty() {
        eprintln!("warning: {} (point, seed) pairs drew different parameters from the first point; see tune.md", r.crn.differing.len());
    }
    let files = match write_all(&r) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: cannot write reports to {}: {e}", r.dir.display());
            return ExitCode::from(2);
        }
    };
    if args.json {
        let out = serde_json::json!({
            "report": r,
            "recommended_point": r.recommended_point().map(|p| &p.id),
            "recheck": r.recommended.map(|_| r.recheck_command()),
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        for f in &files {
            println!("wrote {}", f.display());
        }
        println!(
            "{} points in {:.2} s wall",
            r.points.len(),
            r.wall_ms as f64 / 1000.0
        );
    }
    if r.recommended.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
