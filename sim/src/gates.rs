//! Gates: thresholds over a sweep of series. Types shared by the gate command and the reports.

use std::collections::BTreeMap;

use serde::Serialize;
use toolop::record::LocalState;

use crate::checkers::Violation;
use crate::faults::FaultKind;
use crate::metrics::SeriesMetrics;

/// One series of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesRow {
    pub seed: u64,
    pub scenario: String,
    /// Path of the scenario file, for the replay command.
    pub scenario_file: String,
    pub protocol: String,
    pub metrics: SeriesMetrics,
    pub violations: Vec<Violation>,
    pub trace_hash: String,
    pub end_reason: String,
    pub events: usize,
    pub sim_end_ms: u64,
}

/// One gate's verdict (per protocol, and "all").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateRow {
    pub protocol: String,
    pub gate: String,
    pub threshold: String,
    pub measured: String,
    pub pass: bool,
}

/// A seed that failed something, with the command that replays it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailingSeed {
    pub scenario_file: String,
    pub seed: u64,
    pub reasons: Vec<String>,
    pub replay: String,
}

/// Everything a sweep produced; the reports are views of this.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepReport {
    /// Run name: the folder under reports/.
    pub run: String,
    pub start_seed: u64,
    pub series: u64,
    pub rows: Vec<SeriesRow>,
    pub gates: Vec<GateRow>,
    /// Hits per (protocol, fault, state) over the sweep.
    pub coverage: BTreeMap<(String, FaultKind, LocalState), u64>,
    /// Cells the catalogue declares reachable.
    pub reachable: Vec<(FaultKind, LocalState)>,
    pub coverage_min_hits: u64,
    pub failing: Vec<FailingSeed>,
    pub wall_ms: u64,
}

impl SweepReport {
    pub fn passed(&self) -> bool {
        self.gates.iter().all(|g| g.pass)
    }
}
