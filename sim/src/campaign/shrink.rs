//! Shrinking a failing series. A series' fault schedule (which fault fired at which decision
//! point, see [`crate::series::faults::Schedule`]) is data: record it from the failing run, then
//! remove firings, call nodes, the rollback and the short server ttl for as long as replaying
//! the smaller schedule still breaks the same checker.
//!
//! The loop is ddmin over the firings (remove everything, then halves, quarters, ... single
//! firings), then one call node at a time, then the rollback, then the short ttl, repeated
//! until nothing more goes or the replay budget is spent. Every accepted candidate is
//! normalised to the firings its replay actually made (a listed firing whose decision point
//! the smaller run never reaches is dropped); that changes nothing in the run, so the result
//! replays byte for byte.
//!
//! Why not proptest's shrinker: proptest shrinks a `ValueTree` that its own strategies
//! generated from random draws; there is no way to hand it an existing value (the recorded
//! schedule) and start from there, its collection trees (`VecValueTree`, `BitSetValueTree`)
//! remove one element per step, so a pass costs one replay per firing and gets nowhere within
//! a budget of a few hundred replays on a schedule of a hundred firings, and its runner wants
//! to generate cases rather than answer to an oracle. ddmin removes halves first and needs
//! O(log n) replays when few firings matter. Proptest is used where it fits: the property
//! tests of the fault plan and the schedule file (`faults.rs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::campaign::sweep::Loaded;
use crate::judge::checkers;
use crate::scenario::Scenario;
use crate::series::faults::{Schedule, ScheduleSize};
use crate::series::{self, SeriesResult};

/// The replay budget of one shrink.
pub const DEFAULT_MAX_REPLAYS: u32 = 300;

/// What a shrink produced.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The checker the shrunk schedule still breaks.
    pub checker: String,
    pub original: Schedule,
    pub original_size: ScheduleSize,
    pub original_hash: String,
    /// `checker` and `shrunk_from` are set.
    pub shrunk: Schedule,
    pub shrunk_size: ScheduleSize,
    pub shrunk_hash: String,
    /// The first violation of `checker` in the shrunk run.
    pub detail: String,
    pub replays: u32,
    pub budget_exhausted: bool,
    pub wall_ms: u64,
}

impl Shrunk {
    /// "12 firing(s), 6 node(s), rollback -> 0 firing(s), 1 node(s) in 23 replays"
    pub fn render(&self) -> String {
        format!(
            "{} -> {} in {} replay(s){}",
            self.original_size,
            self.shrunk_size,
            self.replays,
            if self.budget_exhausted {
                " (budget spent: may shrink further)"
            } else {
                ""
            }
        )
    }
}

/// The first violation's checker of a finished series, if any.
pub fn first_failure(r: &SeriesResult) -> Option<&'static str> {
    checkers::check_all(&r.trace).first().map(|v| v.checker)
}

/// The exact command that replays a schedule file.
pub fn replay_command(schedule_file: &Path) -> String {
    format!("toolop-sim replay --schedule {}", schedule_file.display())
}

/// The scenario path a schedule written to `schedule_file` stores: relative to the schedule's
/// folder (absolute when no relative path exists, e.g. another drive).
pub fn scenario_relative_to(scenario: &Path, schedule_file: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let folder = abs(schedule_file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    pathdiff::diff_paths(abs(scenario), &folder)
        .unwrap_or_else(|| abs(scenario))
        .display()
        .to_string()
}

/// The scenario a schedule file names: its stored path read relative to the schedule's folder
/// (absolute paths as they are).
pub fn scenario_of(schedule_file: &Path, stored: &str) -> PathBuf {
    let folder = schedule_file.parent().unwrap_or(Path::new(""));
    folder.join(stored)
}

/// Where `toolop-sim shrink` writes by default: `<reports>/<scenario>/<seed>/schedule.toml`.
pub fn default_path(reports: &Path, sc: &Scenario, seed: u64) -> PathBuf {
    reports
        .join(&sc.name)
        .join(seed.to_string())
        .join("schedule.toml")
}

/// The recorded (unshrunk) schedule next to a shrunk one: `x.toml` -> `x.original.toml`.
pub fn original_path(shrunk: &Path) -> PathBuf {
    let stem = shrunk
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "schedule".into());
    shrunk.with_file_name(format!("{stem}.original.toml"))
}

/// Run `(sc, seed)` as drawn and shrink its schedule against `checker` (default: the first
/// violation's checker). `Ok(None)`: the series does not fail (that checker), nothing to shrink.
pub fn shrink_seed(
    sc: &Scenario,
    scenario_file: &str,
    seed: u64,
    checker: Option<&str>,
    max_replays: u32,
) -> Result<Option<Shrunk>, String> {
    let started = Instant::now();
    // A series that panics records no schedule (the world is gone): that is an error here.
    let r = series::run_series(sc, seed)?;
    let violations = checkers::check_all(&r.trace);
    let target = match checker {
        Some(c) if violations.iter().any(|v| v.checker == c) => c,
        Some(_) => return Ok(None),
        None => match violations.first() {
            Some(v) => v.checker,
            None => return Ok(None),
        },
    };
    let original = series::schedule_of(scenario_file, &r, sc);
    Ok(Some(shrink_schedule(
        sc,
        original,
        r.hash,
        target,
        max_replays,
        started,
    )?))
}

/// The replay oracle and its budget.
struct Oracle<'a> {
    sc: &'a Scenario,
    checker: &'a str,
    replays: u32,
    max_replays: u32,
}

impl Oracle<'_> {
    fn spent(&self) -> bool {
        self.replays >= self.max_replays
    }

    /// Replay `cand`; if it still breaks the checker, the candidate normalised to the firings
    /// its run made, the run's hash and the violation.
    fn test(&mut self, cand: &Schedule) -> Result<Option<(Schedule, String, String)>, String> {
        self.replays += 1;
        let r = match series::run_series_with(self.sc, cand.seed, Some(cand)) {
            Ok(r) => r,
            // A candidate that panics the world breaks something else: not this checker.
            Err(e) if e.contains("panicked") => return Ok(None),
            // A candidate the world refuses (a bad node list) is a bug here, not a non-failure.
            Err(e) => return Err(e),
        };
        let Some(v) = checkers::check_all(&r.trace)
            .into_iter()
            .find(|v| v.checker == self.checker)
        else {
            return Ok(None);
        };
        let detail = format!(
            "{}{}",
            v.node.map(|n| format!("{n}: ")).unwrap_or_default(),
            v.detail
        );
        Ok(Some((
            Schedule {
                firings: r.firings,
                ..cand.clone()
            },
            r.hash,
            detail,
        )))
    }
}

/// Shrink `original` (a schedule that breaks `checker`, with the hash of its run) within
/// `max_replays` replays.
pub fn shrink_schedule(
    sc: &Scenario,
    original: Schedule,
    original_hash: String,
    checker: &str,
    max_replays: u32,
    started: Instant,
) -> Result<Shrunk, String> {
    let all_nodes = series::draw_params(sc, original.seed).nodes.len();
    let mut o = Oracle {
        sc,
        checker,
        replays: 0,
        max_replays,
    };
    let mut cur = original.clone();
    let (mut hash, mut detail) = (original_hash.clone(), String::new());
    let mut accept = |cur: &mut Schedule, (next, h, d): (Schedule, String, String)| {
        *cur = next;
        hash = h;
        detail = d;
    };
    loop {
        let before = cur.size(all_nodes);
        // 1. ddmin over the firings: remove chunks of n = 1 (everything), 2, 4, ... down to one.
        let mut n = 1usize;
        while !cur.firings.is_empty() && !o.spent() {
            let len = cur.firings.len();
            let n_eff = n.min(len);
            let chunk = len.div_ceil(n_eff);
            let mut reduced = false;
            for i in 0..n_eff {
                if o.spent() {
                    break;
                }
                let (lo, hi) = (i * chunk, ((i + 1) * chunk).min(len));
                if lo >= hi {
                    continue;
                }
                let mut cand = cur.clone();
                cand.firings.drain(lo..hi);
                if let Some(hit) = o.test(&cand)? {
                    accept(&mut cur, hit);
                    n = n_eff.saturating_sub(1).max(2);
                    reduced = true;
                    break;
                }
            }
            if !reduced {
                if n_eff >= len {
                    break;
                }
                n = (n_eff * 2).min(len);
            }
        }
        // 2. One call node at a time (at least one stays).
        let ids: Vec<String> = match &cur.nodes {
            Some(ids) => ids.clone(),
            None => series::draw_params(sc, cur.seed)
                .nodes
                .into_iter()
                .map(|n| n.id)
                .collect(),
        };
        let mut kept = ids.clone();
        for id in &ids {
            if kept.len() <= 1 || o.spent() {
                break;
            }
            let mut cand = cur.clone();
            cand.nodes = Some(kept.iter().filter(|k| *k != id).cloned().collect());
            if let Some(hit) = o.test(&cand)? {
                kept.retain(|k| k != id);
                accept(&mut cur, hit);
            }
        }
        // 3. The rollback, 4. the short server ttl.
        if cur.rollback && !o.spent() {
            if let Some(hit) = o.test(&Schedule {
                rollback: false,
                ..cur.clone()
            })? {
                accept(&mut cur, hit);
            }
        }
        if cur.server_deletes_running_task && !o.spent() {
            if let Some(hit) = o.test(&Schedule {
                server_deletes_running_task: false,
                ..cur.clone()
            })? {
                accept(&mut cur, hit);
            }
        }
        if cur.size(all_nodes) == before || o.spent() {
            break;
        }
    }
    if detail.is_empty() {
        // Nothing could be removed: one replay of the original for its verdict (and as a check
        // that the recorded schedule does reproduce the failure).
        match o.test(&cur)? {
            Some((next, h, d)) => {
                cur = next;
                hash = h;
                detail = d;
            }
            None => {
                return Err(format!(
                    "seed {}: the recorded schedule does not reproduce {checker}",
                    cur.seed
                ))
            }
        }
    }
    let original_size = original.size(all_nodes);
    let shrunk_size = cur.size(all_nodes);
    cur.checker = Some(checker.to_string());
    cur.shrunk_from = Some(original_size);
    Ok(Shrunk {
        checker: checker.to_string(),
        original,
        original_size,
        original_hash,
        shrunk: cur,
        shrunk_size,
        shrunk_hash: hash,
        detail,
        replays: o.replays,
        budget_exhausted: o.spent(),
        wall_ms: started.elapsed().as_millis() as u64,
    })
}

/// Shrink and write: the shrunk schedule to `out`, the recorded one next to it
/// ([`original_path`]). Both name the scenario file and its `--set` settings. Returns the
/// shrink and the two paths.
pub fn shrink_to_file(
    l: &Loaded,
    seed: u64,
    checker: Option<&str>,
    max_replays: u32,
    out: &Path,
) -> Result<Option<(Shrunk, PathBuf)>, String> {
    let file = l.file.display().to_string();
    let Some(mut s) = shrink_seed(&l.scenario, &file, seed, checker, max_replays)? else {
        return Ok(None);
    };
    // Stored relative to the schedule file's folder, so `replay --schedule` works from any
    // working directory (and the pair can be moved together).
    let stored = scenario_relative_to(&l.file, out);
    let sets: Vec<String> = l.sets.iter().map(ToString::to_string).collect();
    for schedule in [&mut s.shrunk, &mut s.original] {
        schedule.scenario = stored.clone();
        schedule.sets = sets.clone();
    }
    s.shrunk.save(out)?;
    let orig = original_path(out);
    s.original.save(&orig)?;
    Ok(Some((s, orig)))
}
