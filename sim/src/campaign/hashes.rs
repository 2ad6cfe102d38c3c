//! The determinism list: the trace hash of seeds `0..SEEDS` of every default scenario, committed
//! in [`LIST_PATH`] and recomputed by a test. A change to the executor or the world that changes
//! any trace shows up as a diff of this list; the list is regenerated (`make trace-hashes`) only
//! with a reason in the commit message, so an optimisation that claims to keep behaviour proves
//! it by leaving the file alone.

use std::fmt::Write as _;

use crate::campaign::sweep::{self, Loaded, Plan};

/// The release gate's scenario set (`scenarios/default-set.txt`, which the Makefile reads; a
/// test keeps them equal).
pub const DEFAULT_SET: [&str; 9] = [
    "scenarios/smoke.toml",
    "scenarios/mcp_faults.toml",
    "scenarios/mcp_load.toml",
    "scenarios/aip151_faults.toml",
    "scenarios/mcp_ext_faults.toml",
    "scenarios/mcp_retire.toml",
    "scenarios/mcp_sqlite.toml",
    "scenarios/mcp_replicas.toml",
    "scenarios/mcp_ext_replicas.toml",
];

/// Seeds `0..SEEDS` of each scenario.
pub const SEEDS: u64 = 100;

/// The committed list, relative to the repository root.
pub const LIST_PATH: &str = "sim/tests/data/trace-hashes.txt";

/// The one command that rewrites the list.
pub const REGENERATE: &str = "make trace-hashes";

/// One line of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashLine {
    pub scenario_file: String,
    pub seed: u64,
    pub hash: String,
}

/// The trace hash of seeds `0..seeds` of each scenario (each scenario runs every seed, unlike a
/// gate where scenarios take turns), in scenario then seed order. A series that could not run
/// has the hash `series-failed`, so it differs from any committed hash.
pub fn compute(scenarios: &[Loaded], seeds: u64, jobs: usize) -> Vec<HashLine> {
    let plan = Plan::Range {
        start_seed: 0,
        series: seeds,
    };
    let mut out = vec![];
    for l in scenarios {
        let (rows, _) = sweep::run_plan(
            std::slice::from_ref(l),
            &plan,
            jobs,
            &sweep::Hooks::default(),
        );
        out.extend(rows.into_iter().map(|r| HashLine {
            scenario_file: l.file.display().to_string(),
            seed: r.seed,
            hash: if r.trace_hash.is_empty() {
                "series-failed".into()
            } else {
                r.trace_hash
            },
        }));
    }
    out
}

/// The list as committed: a header that says what it is and how it changes, then
/// `<scenario file> <seed> <hash>` per line.
pub fn render(lines: &[HashLine], seeds: u64) -> String {
    let mut out = format!(
        "# Trace hashes (SHA-256 of the trace's binary form, sim/src/trace_hash.rs) of seeds\n\
         # 0..={} of every scenario. Checked by sim/tests/trace_hashes.rs. Regenerate with\n\
         # `{REGENERATE}`, and commit a change only with the reason the traces changed in the\n\
         # commit message.\n",
        seeds.saturating_sub(1)
    );
    for l in lines {
        let _ = writeln!(out, "{} {} {}", l.scenario_file, l.seed, l.hash);
    }
    out
}

/// Reads a list back; `#` lines and blank lines are skipped. The error names the line.
pub fn parse(text: &str) -> Result<Vec<HashLine>, String> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [file, seed, hash] = parts[..] else {
            return Err(format!(
                "line {}: expected `<scenario file> <seed> <hash>`, found {line}",
                i + 1
            ));
        };
        let seed = seed
            .parse()
            .map_err(|e| format!("line {}: seed {seed}: {e}", i + 1))?;
        out.push(HashLine {
            scenario_file: file.into(),
            seed,
            hash: hash.into(),
        });
    }
    Ok(out)
}

/// What differs between the committed list and a fresh one, one line each (at most `limit`
/// lines, then a count of the rest); empty when they agree. Each changed seed comes with the
/// command that replays it.
pub fn differences(committed: &[HashLine], fresh: &[HashLine], limit: usize) -> Vec<String> {
    let key = |l: &HashLine| (l.scenario_file.clone(), l.seed);
    let old: std::collections::BTreeMap<_, _> = committed.iter().map(|l| (key(l), l)).collect();
    let new: std::collections::BTreeMap<_, _> = fresh.iter().map(|l| (key(l), l)).collect();
    let mut out = vec![];
    for (k, n) in &new {
        match old.get(k) {
            None => out.push(format!("{} seed {}: not in the list", k.0, k.1)),
            Some(o) if o.hash != n.hash => out.push(format!(
                "{} seed {}: listed {}, now {} ({})",
                k.0,
                k.1,
                o.hash,
                n.hash,
                sweep::replay_command(&k.0, k.1)
            )),
            Some(_) => {}
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push(format!("{} seed {}: listed, no longer computed", k.0, k.1));
    }
    let total = out.len();
    if total > limit {
        out.truncate(limit);
        out.push(format!("... and {} more", total - limit));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(file: &str, seed: u64, hash: &str) -> HashLine {
        HashLine {
            scenario_file: file.into(),
            seed,
            hash: hash.into(),
        }
    }

    #[test]
    fn a_list_parses_back_and_differences_name_each_change() {
        let a = vec![line("s.toml", 0, "aa"), line("s.toml", 1, "bb")];
        assert_eq!(parse(&render(&a, 2)).unwrap(), a);
        assert!(differences(&a, &a, 10).is_empty());
        let b = vec![
            line("s.toml", 0, "aa"),
            line("s.toml", 1, "cc"),
            line("t.toml", 0, "dd"),
        ];
        let d = differences(&a, &b, 10);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].contains("s.toml seed 1: listed bb, now cc") && d[0].contains("--seed 1"));
        assert_eq!(d[1], "t.toml seed 0: not in the list");
        let d = differences(&b, &a, 1);
        assert_eq!(
            d,
            [
                "s.toml seed 1: listed cc, now bb (toolop-sim replay --scenario s.toml --seed 1)",
                "... and 1 more"
            ]
        );
        let err = parse("s.toml 0\n").unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
        assert!(parse("s.toml x aa\n").unwrap_err().contains("seed x"));
    }

    /// `scenarios/default-set.txt` (what `make gate`, `make bench` and the root crate's
    /// `sim_gate` test run; the Makefile reads it) is this set.
    #[test]
    fn the_default_set_file_is_this_one() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/default-set.txt"),
        )
        .unwrap();
        let listed: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert_eq!(listed, DEFAULT_SET);
    }

    /// The nightly workflow runs the default set, and its shard matrix is 0..SHARDS.
    #[test]
    fn the_nightly_workflow_shards_the_default_set() {
        let yml = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../.github/workflows/nightly-gate.yml"),
        )
        .unwrap();
        for f in DEFAULT_SET {
            assert!(yml.contains(f), "{f} missing from the nightly workflow");
        }
        let shards: u64 = yml
            .lines()
            .find_map(|l| l.trim().strip_prefix("SHARDS: "))
            .expect("SHARDS in the workflow's env")
            .trim_matches('"')
            .parse()
            .unwrap();
        let matrix: Vec<u64> = yml
            .lines()
            .find_map(|l| l.trim().strip_prefix("shard: ["))
            .expect("the shard matrix")
            .trim_end_matches(']')
            .split(',')
            .map(|k| k.trim().parse().unwrap())
            .collect();
        assert_eq!(matrix, (0..shards).collect::<Vec<_>>());
    }
}
