//! Reports of a sweep under reports/<run>/: series.csv, histograms, summary.md, junit.xml.
//!
//! Every report is a view of one [`SweepReport`]; nothing here measures anything. The files:
//!
//! | file | module | for |
//! |---|---|---|
//! | `series.csv` | [`csv`] | one row per series, for spreadsheets and scripts |
//! | `hist_*.hgrm` | [`hdr`] | HdrHistogram percentile distributions, aggregated over the sweep |
//! | `summary.md` | [`markdown`] | the CI job summary: verdict, gates, coverage, failing seeds |
//! | `junit.xml` | [`junit`] | one test case per gate row, for CI test reporters |
//! | `failing.txt` | [`text`] | every failing seed with its replay command (the others list the first few per checker) |
//!
//! [`text`] renders the same tables for the terminal, and [`progress`] is the sweep's progress
//! bar.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use toolop::record::LocalState;

use crate::judge::gates::SweepReport;
use crate::series::faults::FaultKind;

pub mod csv;
pub mod hdr;
pub mod junit;
pub mod markdown;
pub mod progress;
/// The seeds that set a failing metric gate (a p99, a busiest window).
pub mod setters;
/// A readable per-node summary of one series.
pub mod summary;
pub mod text;
/// A readable timeline of one trace, for replay.
pub mod timeline;

pub use self::hdr::{hgrm, percentile, percentiles, Percentiles};
pub use self::junit::junit_xml;
pub use self::markdown::summary_markdown;
pub use self::progress::Progress;
pub use self::text::{coverage_table, failing_list, gate_table};

/// Creates `dir` (and its parents) and writes every report of `r` into it: `series.csv`, the
/// `hist_*.hgrm` files of [`hdr::HISTOGRAMS`], `summary.md` and `junit.xml`. Returns the paths
/// written, in that order. Existing files of the same names are overwritten.
pub fn write_all(dir: &Path, r: &SweepReport) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();

    let path = dir.join("series.csv");
    self::csv::write(&path, r)?;
    written.push(path);

    for (file, values) in hdr::histogram_values(r) {
        let path = dir.join(file);
        std::fs::write(&path, hgrm(&values))?;
        written.push(path);
    }

    let path = dir.join("summary.md");
    std::fs::write(&path, summary_markdown(r))?;
    written.push(path);

    let path = dir.join("junit.xml");
    std::fs::write(&path, junit_xml(r))?;
    written.push(path);

    let path = dir.join("failing.txt");
    std::fs::write(&path, text::failing_full(r))?;
    written.push(path);

    Ok(written)
}

/// "seeds 100..=109" for the run's seed range, or "no seeds" for an empty sweep.
fn seed_range(r: &SweepReport) -> String {
    match r.series {
        0 => "no seeds".into(),
        1 => format!("seed {}", r.start_seed),
        n => format!(
            "seeds {}..={}",
            r.start_seed,
            r.start_seed.saturating_add(n - 1)
        ),
    }
}

/// Wall time in seconds with millisecond precision: "12.345 s".
fn wall_time(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

/// One cell of the coverage matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    /// The catalogue declares the cell and the sweep must hit it (its fault was enabled);
    /// `below_min` when it got fewer hits than the protocol's minimum: the coverage gate fails.
    Reachable { hits: u64, below_min: bool },
    /// Declared, but its fault was off in every coverage-gated scenario of the protocol.
    Off { hits: u64 },
    /// Not declared (hits shown only when, unexpectedly, there are some).
    Unreachable { hits: u64 },
}

/// The coverage matrix of one protocol: rows are faults, columns the local states that appear in
/// any protocol's declared cells.
#[derive(Clone, Debug)]
struct CoverageGrid {
    protocol: String,
    /// Hits each required cell needs.
    min_hits: u64,
    states: Vec<LocalState>,
    rows: Vec<(FaultKind, Vec<Cell>)>,
}

impl CoverageGrid {
    fn below_min(&self) -> usize {
        self.rows
            .iter()
            .flat_map(|(_, cells)| cells)
            .filter(|c| {
                matches!(
                    c,
                    Cell::Reachable {
                        below_min: true,
                        ..
                    }
                )
            })
            .count()
    }
}

/// One grid per protocol of the coverage plan (then any other protocol with rows or hits, in
/// name order). Columns: the states of every plan's declared cells, in [`LocalState::ALL`]
/// order. Rows: the faults the protocol's catalogue row declares, then any other fault that hit,
/// in [`FaultKind::ALL`] order. The cells are the plan's, the same the coverage gate judges.
fn coverage_grids(r: &SweepReport) -> Vec<CoverageGrid> {
    let states: Vec<LocalState> = LocalState::ALL
        .into_iter()
        .filter(|s| {
            r.coverage_plan
                .iter()
                .any(|p| p.cells.iter().any(|c| c.state == *s))
        })
        .collect();
    let mut protocols: Vec<&str> = r
        .coverage_plan
        .iter()
        .map(|p| p.protocol.as_str())
        .collect();
    let others: BTreeSet<&str> = r
        .coverage
        .keys()
        .map(|(p, _, _)| p.as_str())
        .chain(r.rows.iter().map(|row| row.protocol.as_str()))
        .collect();
    protocols.extend(
        others
            .into_iter()
            .filter(|p| !r.coverage_plan.iter().any(|c| c.protocol == *p)),
    );
    protocols
        .into_iter()
        .map(|protocol| {
            let plan = r.coverage_plan.iter().find(|p| p.protocol == protocol);
            let hits = |f: FaultKind, s: LocalState| {
                r.coverage
                    .get(&(protocol.to_string(), f, s))
                    .copied()
                    .unwrap_or(0)
            };
            let declared = |f: FaultKind, s: LocalState| {
                plan.and_then(|p| p.cells.iter().find(|c| c.fault == f && c.state == s))
            };
            let min = plan.map_or(r.coverage_min_hits.max(1), |p| p.min_hits);
            let rows = FaultKind::ALL
                .into_iter()
                .filter(|&f| {
                    plan.is_some_and(|p| p.cells.iter().any(|c| c.fault == f))
                        || r.coverage
                            .iter()
                            .any(|((p, rf, _), &n)| p == protocol && *rf == f && n > 0)
                })
                .map(|f| {
                    let cells = states
                        .iter()
                        .map(|&s| {
                            let hits = hits(f, s);
                            match declared(f, s) {
                                Some(c) if c.required => Cell::Reachable {
                                    hits,
                                    below_min: hits < min,
                                },
                                Some(_) => Cell::Off { hits },
                                None => Cell::Unreachable { hits },
                            }
                        })
                        .collect();
                    (f, cells)
                })
                .collect();
            CoverageGrid {
                protocol: protocol.to_string(),
                min_hits: min,
                states: states.clone(),
                rows,
            }
        })
        .collect()
}

/// A small sweep report built by hand, shared by the modules' tests: three rows over two
/// protocols, one failing gate, one failing seed, a reachable coverage cell under the minimum.
#[cfg(test)]
pub(crate) fn sample_report() -> SweepReport {
    use std::collections::BTreeMap;

    use crate::judge::checkers::Violation;
    use crate::judge::gates::{FailingSeed, GateRow, SeriesRow};
    use crate::judge::metrics::SeriesMetrics;

    let metrics =
        |faults: &[(FaultKind, u32)], cancel: &[u64], e2e: &[u64], polls: &[u64]| SeriesMetrics {
            call_nodes: 5,
            faults: faults.iter().copied().collect(),
            terminal_states: [("completed".to_string(), 4), ("cancelled".to_string(), 1)].into(),
            polls: polls.iter().sum(),
            polls_per_operation: polls.to_vec(),
            max_sends_in_window: 3,
            cancel_confirmation_ms: cancel.to_vec(),
            unknown_reconciliation_ms: Vec::new(),
            end_to_end_ms: e2e.to_vec(),
            ..SeriesMetrics::default()
        };
    let row =
        |seed: u64, protocol: &str, metrics: SeriesMetrics, violations: Vec<Violation>| SeriesRow {
            seed,
            scenario: "smoke".into(),
            scenario_file: "scenarios/smoke.toml".into(),
            protocol: protocol.into(),
            metrics,
            violations,
            trace_hash: format!("{seed:016x}"),
            end_reason: "quiescent".into(),
            events: 100,
            sim_end_ms: 60_000,
        };
    let rows = vec![
        row(
            100,
            "mcp",
            metrics(
                &[(FaultKind::LostRequest, 3), (FaultKind::Poll429, 1)],
                &[120, 450],
                &[1000, 2000, 3000],
                &[3, 4],
            ),
            Vec::new(),
        ),
        row(
            101,
            "mcp",
            metrics(
                &[(FaultKind::CancelAckLost, 2)],
                &[9000],
                &[1500, 2500],
                &[7],
            ),
            vec![Violation {
                checker: "at_most_one_receipt",
                node: Some("n1".into()),
                detail: "two receipts <a&b>".into(),
            }],
        ),
        row(
            102,
            "aip151",
            metrics(&[], &[], &[800], &[1, 2, 3]),
            Vec::new(),
        ),
    ];
    let gate = |protocol: &str, gate: &str, threshold: &str, measured: &str, pass: bool| GateRow {
        protocol: protocol.into(),
        gate: gate.into(),
        threshold: threshold.into(),
        measured: measured.into(),
        pass,
        insufficient: None,
    };
    let gates = vec![
        gate("mcp", "violations", "== 0", "1", false),
        gate(
            "mcp",
            "cancel_confirmation_p99_ms",
            "<= 10000",
            "9000",
            true,
        ),
        gate(
            "all",
            "coverage \"cells\" <min>",
            ">= 2 & reachable",
            "5/6",
            true,
        ),
    ];
    let mut coverage = BTreeMap::new();
    coverage.insert(
        (
            "mcp".to_string(),
            FaultKind::LostRequest,
            LocalState::Submitting,
        ),
        3,
    );
    coverage.insert(
        (
            "mcp".to_string(),
            FaultKind::LostRequest,
            LocalState::Working,
        ),
        1,
    );
    coverage.insert(
        ("mcp".to_string(), FaultKind::Poll429, LocalState::Working),
        4,
    );
    coverage.insert(
        (
            "aip151".to_string(),
            FaultKind::Poll429,
            LocalState::Working,
        ),
        2,
    );
    use crate::judge::coverage::{DeclaredCell, ProtocolCoverage};
    let cell = |fault, state, required| DeclaredCell {
        fault,
        state,
        required,
    };
    let coverage_plan = vec![
        ProtocolCoverage {
            protocol: "mcp".into(),
            cells: vec![
                cell(FaultKind::LostRequest, LocalState::Submitting, true),
                cell(FaultKind::LostRequest, LocalState::Working, true),
                cell(FaultKind::LostRequest, LocalState::FetchingResult, true),
                cell(FaultKind::Poll429, LocalState::Working, true),
                cell(FaultKind::CancelAckLost, LocalState::Working, false),
            ],
            gated: true,
            min_hits: 2,
        },
        ProtocolCoverage {
            protocol: "aip151".into(),
            cells: vec![
                cell(FaultKind::LostRequest, LocalState::Submitting, true),
                cell(FaultKind::LostRequest, LocalState::Working, true),
                cell(FaultKind::LostRequest, LocalState::FetchingResult, true),
                cell(FaultKind::Poll429, LocalState::Working, true),
            ],
            gated: true,
            min_hits: 2,
        },
    ];
    SweepReport {
        run: "sample".into(),
        start_seed: 100,
        series: 3,
        rows,
        gates,
        coverage,
        coverage_plan,
        coverage_min_hits: 2,
        failing: vec![FailingSeed {
            scenario_file: "scenarios/smoke.toml".into(),
            seed: 101,
            reasons: vec!["at_most_one_receipt: two receipts <a&b>".into()],
            replay: "cargo run -p toolop-sim -- run scenarios/smoke.toml --seed 101".into(),
        }],
        wall_ms: 12_345,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_all_writes_every_file() {
        let dir = std::env::temp_dir().join(format!("toolop-sim-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = write_all(&dir.join("run"), &sample_report()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "series.csv",
                "hist_cancel_confirmation_ms.hgrm",
                "hist_unknown_reconciliation_ms.hgrm",
                "hist_end_to_end_ms.hgrm",
                "hist_polls_per_operation.hgrm",
                "summary.md",
                "junit.xml",
                "failing.txt",
            ]
        );
        assert!(written.iter().all(|p| p.is_file()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn coverage_grid_marks_cells() {
        let r = sample_report();
        let grids = coverage_grids(&r);
        assert_eq!(
            grids
                .iter()
                .map(|g| g.protocol.as_str())
                .collect::<Vec<_>>(),
            ["mcp", "aip151"]
        );
        let mcp = &grids[0];
        assert_eq!(
            mcp.states,
            [
                LocalState::Submitting,
                LocalState::Working,
                LocalState::FetchingResult
            ]
        );
        let (f, cells) = &mcp.rows[0];
        assert_eq!(*f, FaultKind::LostRequest);
        assert_eq!(
            cells[0],
            Cell::Reachable {
                hits: 3,
                below_min: false
            }
        );
        assert_eq!(
            cells[1],
            Cell::Reachable {
                hits: 1,
                below_min: true
            }
        );
        let (f, cells) = &mcp.rows[1];
        assert_eq!(*f, FaultKind::CancelAckLost);
        assert_eq!(cells[1], Cell::Off { hits: 0 });
        let (f, cells) = &mcp.rows[2];
        assert_eq!(*f, FaultKind::Poll429);
        assert_eq!(cells[0], Cell::Unreachable { hits: 0 });
        // The cells the gate would call missing are the ones the grid marks.
        let missing = r.coverage_plan[0].missing(&r.coverage);
        assert_eq!(missing.len(), mcp.below_min());
        assert_eq!(seed_range(&r), "seeds 100..=102");
        assert_eq!(wall_time(12_345), "12.345 s");
    }
}
