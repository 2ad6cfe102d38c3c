//! Sharding a sweep over machines: `gate --shard K/N` runs one contiguous block of the plan's
//! series and writes its rows (lossless JSON lines), its histograms (HdrHistogram V2) and a
//! manifest; `merge` checks that the shards are the N parts of one sweep by one build and judges
//! the concatenated rows exactly as a single-machine gate would (the same `evaluate`, the same
//! reports), so the verdict cannot depend on how the seeds were split.
//!
//! Contiguous blocks, not strides: scenarios take turns by series index, so a stride of N that
//! shares a factor with the number of scenarios would give a shard only some of them (N = 6
//! over the six default scenarios: one scenario per shard, and the shard with `mcp_load` runs
//! longest). A block holds every scenario in the same proportion as the whole sweep, its seeds
//! are one range, and merging is concatenation.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::campaign::sweep::{Loaded, Plan};
use crate::judge::checkers::{self, Violation};
use crate::judge::gates::SeriesRow;
use crate::judge::metrics::SeriesMetrics;
use crate::report::hdr;
use crate::scenario::overrides::{self, Setting};

/// The manifest's file name in a shard folder.
pub const MANIFEST: &str = "shard.json";
/// The rows' file name in a shard folder: one JSON object per line, in series order.
pub const ROWS: &str = "rows.jsonl";
/// The manifest format; a merge refuses any other.
pub const FORMAT: &str = "toolop-sim-shard/1";

/// `K/N`: shard K (0-based) of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// The series indices (into the plan) of this shard: contiguous blocks whose sizes differ
    /// by at most one, the larger ones first.
    pub fn block(&self, total: u64) -> std::ops::Range<u64> {
        let (size, extra) = (total / self.count, total % self.count);
        let start = self.index * size + self.index.min(extra);
        start..start + size + u64::from(self.index < extra)
    }

    /// The part of `plan` this shard runs, as chosen seeds on the whole plan's scenario turns.
    pub fn sub_plan(&self, plan: &Plan) -> Plan {
        let block = self.block(plan.len());
        let seeds = match plan {
            Plan::Range { start_seed, .. } => block.map(|i| start_seed + i).collect(),
            Plan::Seeds { seeds, .. } => seeds[block.start as usize..block.end as usize].to_vec(),
        };
        Plan::Seeds {
            start_seed: plan.start_seed(),
            seeds,
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Parses `K/N` (clap's value parser): 0 <= K < N <= 100,000.
pub fn parse_shard(s: &str) -> Result<Shard, String> {
    let (k, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s}: expected K/N, e.g. 0/4 (shard K of N, from 0)"))?;
    let k: u64 = k.trim().parse().map_err(|e| format!("{s}: K: {e}"))?;
    let n: u64 = n.trim().parse().map_err(|e| format!("{s}: N: {e}"))?;
    if !(1..=100_000).contains(&n) {
        return Err(format!("{s}: N must be 1 to 100,000"));
    }
    if k >= n {
        return Err(format!("{s}: K counts from 0, so it must be below N ({n})"));
    }
    Ok(Shard { index: k, count: n })
}

/// A scenario as the shard ran it: the path replay commands name, and the text itself, so a
/// merge judges with exactly the thresholds and coverage plan the shards ran under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioText {
    pub file: String,
    pub text: String,
    /// The `--set FIELD=VALUE` settings the shard applied to the text, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<String>,
}

/// `shard.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub shard: Shard,
    /// The toolop-sim that ran it ([`build_id`]).
    pub build: String,
    /// The whole sweep's plan: its first seed, and either a series count or chosen seeds.
    pub start_seed: u64,
    pub series: u64,
    pub seeds: Option<Vec<u64>>,
    pub scenarios: Vec<ScenarioText>,
    /// This shard's block of series indices.
    pub first_index: u64,
    pub planned: u64,
    /// Rows written; fewer than `planned` when the shard was stopped (then `partial` says why).
    pub done: u64,
    pub partial: Option<String>,
    pub wall_ms: u64,
}

impl Manifest {
    /// The whole sweep's plan.
    pub fn plan(&self) -> Plan {
        match &self.seeds {
            Some(seeds) => Plan::Seeds {
                start_seed: self.start_seed,
                seeds: seeds.clone(),
            },
            None => Plan::Range {
                start_seed: self.start_seed,
                series: self.series,
            },
        }
    }
}

/// What identifies a build: the crate version and the SHA-256 of the running executable. Shards
/// of one sweep must share it (a different executor gives different traces), and so must the
/// merge, which re-runs failing seeds to shrink them.
pub fn build_id() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let bytes = std::fs::read(&exe).map_err(|e| format!("cannot read {}: {e}", exe.display()))?;
    Ok(format!(
        "toolop-sim {} sha256:{}",
        env!("CARGO_PKG_VERSION"),
        toolop::digest::hex(&Sha256::digest(&bytes))
    ))
}

/// One row of `rows.jsonl`: a [`SeriesRow`] with its index in the plan.
#[derive(Serialize, Deserialize)]
struct RowLine {
    index: u64,
    seed: u64,
    scenario: String,
    scenario_file: String,
    protocol: String,
    metrics: SeriesMetrics,
    violations: Vec<ViolationLine>,
    trace_hash: String,
    end_reason: String,
    events: usize,
    sim_end_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct ViolationLine {
    checker: String,
    node: Option<String>,
    detail: String,
}

/// Checker names a row can carry: every checker, an incomplete trace, a series that did not run.
fn checker_name(name: &str) -> Option<&'static str> {
    checkers::CHECKERS
        .iter()
        .map(|(n, _)| *n)
        .chain([
            checkers::view::INCOMPLETE,
            crate::campaign::sweep::SERIES_RAN,
        ])
        .find(|n| *n == name)
}

/// Writes a shard's folder: `rows.jsonl`, the `hist_*.hdr` files of its rows, then
/// `shard.json` last (a folder without it is not a shard). Returns the files written.
pub fn write(dir: &Path, m: &Manifest, rows: &[SeriesRow]) -> std::io::Result<Vec<PathBuf>> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    let _ = std::fs::remove_file(dir.join(MANIFEST));
    let mut files = vec![];
    let path = dir.join(ROWS);
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for (i, r) in rows.iter().enumerate() {
        let line = RowLine {
            index: m.first_index + i as u64,
            seed: r.seed,
            scenario: r.scenario.clone(),
            scenario_file: r.scenario_file.clone(),
            protocol: r.protocol.clone(),
            metrics: r.metrics.clone(),
            violations: r
                .violations
                .iter()
                .map(|v| ViolationLine {
                    checker: v.checker.into(),
                    node: v.node.clone(),
                    detail: v.detail.clone(),
                })
                .collect(),
            trace_hash: r.trace_hash.clone(),
            end_reason: r.end_reason.clone(),
            events: r.events,
            sim_end_ms: r.sim_end_ms,
        };
        serde_json::to_writer(&mut w, &line)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    files.push(path);
    for (file, values) in hdr::histogram_values_of(rows) {
        let path = dir.join(hdr::hdr_file(file));
        std::fs::write(&path, hdr::to_v2(&hdr::histogram(&values)))?;
        files.push(path);
    }
    let path = dir.join(MANIFEST);
    let json = serde_json::to_string_pretty(m).map_err(std::io::Error::other)?;
    std::fs::write(&path, json + "\n")?;
    files.push(path);
    Ok(files)
}

/// One shard folder read back and checked on its own.
pub struct ShardDir {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub rows: Vec<SeriesRow>,
    pub histograms: Vec<(&'static str, hdrhistogram::Histogram<u64>)>,
}

/// Reads a shard folder. Every error names the file and what is wrong with it.
pub fn read(dir: &Path) -> Result<ShardDir, String> {
    if !dir.is_dir() {
        return Err(format!("{}: no such folder", dir.display()));
    }
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: cannot read ({e}); a shard folder is written by `toolop-sim gate --shard K/N`, \
             its manifest last",
            path.display()
        )
    })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a shard manifest: {e}", path.display()))?;
    if manifest.format != FORMAT {
        return Err(format!(
            "{}: format {}, this toolop-sim reads {FORMAT}",
            path.display(),
            manifest.format
        ));
    }
    if let Some(why) = &manifest.partial {
        return Err(format!(
            "{}: shard {} is partial ({why}); run it again to the end",
            path.display(),
            manifest.shard
        ));
    }
    let plan = manifest.plan();
    let block = manifest.shard.block(plan.len());
    if block.start != manifest.first_index || block.end - block.start != manifest.planned {
        return Err(format!(
            "{}: shard {} of {} series should hold series {}..{}, the manifest says {}..{}",
            path.display(),
            manifest.shard,
            plan.len(),
            block.start,
            block.end,
            manifest.first_index,
            manifest.first_index + manifest.planned
        ));
    }
    let rows = read_rows(&dir.join(ROWS), &manifest)?;
    let mut histograms = vec![];
    for (file, values) in hdr::histogram_values_of(&rows) {
        let path = dir.join(hdr::hdr_file(file));
        let bytes =
            std::fs::read(&path).map_err(|e| format!("{}: cannot read ({e})", path.display()))?;
        let h = hdr::from_v2(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        if hdr::to_v2(&h) != hdr::to_v2(&hdr::histogram(&values)) {
            return Err(format!(
                "{}: does not hold the values of {} (files of different shards mixed up?)",
                path.display(),
                dir.join(ROWS).display()
            ));
        }
        histograms.push((file, h));
    }
    Ok(ShardDir {
        dir: dir.to_path_buf(),
        manifest,
        rows,
        histograms,
    })
}

fn read_rows(path: &Path, m: &Manifest) -> Result<Vec<SeriesRow>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read ({e})", path.display()))?;
    let plan = m.plan();
    let mut rows = Vec::with_capacity(m.planned as usize);
    for (n, line) in text.lines().enumerate() {
        let at = format!("{} line {}", path.display(), n + 1);
        let l: RowLine =
            serde_json::from_str(line).map_err(|e| format!("{at}: not a series row: {e}"))?;
        let want_index = m.first_index + n as u64;
        if n as u64 >= m.planned || l.index != want_index {
            return Err(format!(
                "{at}: series {}, expected {} (shard {} holds {}..{})",
                l.index,
                want_index,
                m.shard,
                m.first_index,
                m.first_index + m.planned
            ));
        }
        let want_seed = plan.seed_at(want_index);
        if l.seed != want_seed {
            return Err(format!(
                "{at}: seed {}, but series {want_index} of the plan is seed {want_seed}",
                l.seed
            ));
        }
        let violations = l
            .violations
            .into_iter()
            .map(|v| {
                let checker = checker_name(&v.checker)
                    .ok_or_else(|| format!("{at}: unknown checker {}", v.checker))?;
                Ok(Violation {
                    checker,
                    node: v.node,
                    detail: v.detail,
                })
            })
            .collect::<Result<_, String>>()?;
        rows.push(SeriesRow {
            seed: l.seed,
            scenario: l.scenario,
            scenario_file: l.scenario_file,
            protocol: l.protocol,
            metrics: l.metrics,
            violations,
            trace_hash: l.trace_hash,
            end_reason: l.end_reason,
            events: l.events,
            sim_end_ms: l.sim_end_ms,
        });
    }
    if rows.len() as u64 != m.planned {
        return Err(format!(
            "{}: {} rows, shard {} of the plan has {} (truncated?)",
            path.display(),
            rows.len(),
            m.shard,
            m.planned
        ));
    }
    Ok(rows)
}

/// The merged sweep: the shards' common manifest, every row in plan order, the summed
/// histograms, and the longest shard's wall time.
pub struct Merged {
    pub manifest: Manifest,
    pub scenarios: Vec<Loaded>,
    pub rows: Vec<SeriesRow>,
    pub histograms: Vec<(&'static str, hdrhistogram::Histogram<u64>)>,
    pub longest_shard_ms: u64,
}

/// Checks that `shards` are exactly the N parts of one sweep by one build (`build`, the
/// merging toolop-sim's own), and concatenates them. Every error names the files involved.
pub fn merge(mut shards: Vec<ShardDir>, build: &str) -> Result<Merged, String> {
    let Some(first) = shards.first() else {
        return Err("nothing to merge: name the shard folders".into());
    };
    let m0 = first.manifest.clone();
    let f0 = first.dir.join(MANIFEST);
    for s in &shards {
        let m = &s.manifest;
        let f = s.dir.join(MANIFEST);
        let differ = |what: &str, a: String, b: String| {
            Err(format!(
                "{}: {what} {b}, but {}: {what} {a}; these shards are not parts of one sweep",
                f.display(),
                f0.display()
            ))
        };
        if m.build != m0.build {
            return Err(format!(
                "{}: built by {}, but {}: built by {}; every shard of a sweep must come from \
                 one build",
                f.display(),
                m.build,
                f0.display(),
                m0.build
            ));
        }
        if m.shard.count != m0.shard.count {
            return differ("shard", m0.shard.to_string(), m.shard.to_string());
        }
        if (m.start_seed, m.series) != (m0.start_seed, m0.series) || m.seeds != m0.seeds {
            let plan = |m: &Manifest| match &m.seeds {
                Some(s) => format!("{} chosen seeds from {}", s.len(), m.start_seed),
                None => format!("{} series from seed {}", m.series, m.start_seed),
            };
            return differ("plan", plan(&m0), plan(m));
        }
        if m.scenarios != m0.scenarios {
            let names = |m: &Manifest| {
                m.scenarios
                    .iter()
                    .map(|s| {
                        format!(
                            "{} (sha256:{}){}",
                            s.file,
                            &toolop::digest::hex(&Sha256::digest(&s.text))[..12],
                            s.sets
                                .iter()
                                .map(|x| format!(" --set {x}"))
                                .collect::<String>()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return differ("scenarios", names(&m0), names(m));
        }
    }
    if m0.build != build {
        return Err(format!(
            "{}: built by {}, but this toolop-sim is {build}; merge with the build that ran the \
             shards (it re-runs failing seeds to shrink them)",
            f0.display(),
            m0.build
        ));
    }
    shards.sort_by_key(|s| s.manifest.shard.index);
    for w in shards.windows(2) {
        if w[0].manifest.shard.index == w[1].manifest.shard.index {
            return Err(format!(
                "{} and {} are both shard {}: overlapping shards",
                w[0].dir.display(),
                w[1].dir.display(),
                w[0].manifest.shard
            ));
        }
    }
    let n = m0.shard.count;
    let missing: Vec<String> = (0..n)
        .filter(|k| !shards.iter().any(|s| s.manifest.shard.index == *k))
        .map(|k| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = shards
            .iter()
            .map(|s| format!("{} ({})", s.dir.display(), s.manifest.shard))
            .collect();
        return Err(format!(
            "missing shard(s) {} of the sweep; given {}",
            missing.join(", "),
            given.join(", ")
        ));
    }
    let scenarios = m0
        .scenarios
        .iter()
        .map(|s| {
            let sets = s
                .sets
                .iter()
                .map(|a| Setting::parse(a))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{}: scenario {}: {e}", f0.display(), s.file))?;
            overrides::apply(&s.file, &s.text, &sets)
                .map(|scenario| Loaded {
                    file: PathBuf::from(&s.file),
                    scenario,
                    sets,
                })
                .map_err(|e| format!("{}: scenario {}: {e}", f0.display(), s.file))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let longest_shard_ms = shards.iter().map(|s| s.manifest.wall_ms).max().unwrap_or(0);
    let mut rows = Vec::with_capacity(m0.plan().len() as usize);
    let mut histograms: Vec<(&'static str, hdrhistogram::Histogram<u64>)> = vec![];
    for s in shards {
        rows.extend(s.rows);
        for (file, h) in s.histograms {
            match histograms.iter_mut().find(|(f, _)| *f == file) {
                Some((_, sum)) => sum.add(&h).map_err(|e| {
                    format!(
                        "{}: cannot add it to the other shards' ({e})",
                        s.dir.join(hdr::hdr_file(file)).display()
                    )
                })?,
                None => histograms.push((file, h)),
            }
        }
    }
    Ok(Merged {
        manifest: m0,
        scenarios,
        rows,
        histograms,
        longest_shard_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_partition_the_plan_evenly() {
        for total in [0u64, 1, 5, 6, 7, 100, 1_000_003] {
            for count in [1u64, 2, 3, 4, 7, 16] {
                let blocks: Vec<_> = (0..count)
                    .map(|index| Shard { index, count }.block(total))
                    .collect();
                assert_eq!(blocks[0].start, 0);
                assert_eq!(blocks.last().unwrap().end, total);
                assert!(blocks.windows(2).all(|w| w[0].end == w[1].start));
                let sizes: Vec<u64> = blocks.iter().map(|b| b.end - b.start).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
        let plan = Plan::Range {
            start_seed: 10,
            series: 10,
        };
        let s = Shard { index: 1, count: 4 }.sub_plan(&plan);
        assert_eq!(
            s,
            Plan::Seeds {
                start_seed: 10,
                seeds: vec![13, 14, 15]
            }
        );
    }

    #[test]
    fn shard_flags_parse_or_say_why() {
        assert_eq!(parse_shard("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert!(parse_shard("4/4").unwrap_err().contains("below N"));
        assert!(parse_shard("0/0").unwrap_err().contains("1 to 100,000"));
        assert!(parse_shard("3").unwrap_err().contains("expected K/N"));
        assert!(parse_shard("a/4").unwrap_err().contains("K:"));
    }
}
