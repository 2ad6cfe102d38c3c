//! Coverage: which (fault, executor state) cells a sweep must hit, per protocol. One function
//! decides it from the catalogue ([`catalogue::row`]) and the scenarios, and both the coverage
//! gate and the coverage matrix of every report read its answer, so a matrix can never show a
//! hole beside a passing coverage gate.

use std::collections::BTreeMap;

use serde::Serialize;
use toolop::record::LocalState;

use crate::campaign::sweep::Loaded;
use crate::scenario::Protocol;
use crate::series::faults::{catalogue, FaultKind};

/// One declared cell of a protocol's catalogue row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeclaredCell {
    pub fault: FaultKind,
    pub state: LocalState,
    /// The fault is enabled (or follows from an enabled one) in a coverage-gated scenario of the
    /// protocol: the cell must be hit.
    pub required: bool,
}

/// What one protocol's group of series must cover.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProtocolCoverage {
    pub protocol: String,
    /// Every cell the protocol's catalogue row declares, in catalogue order.
    pub cells: Vec<DeclaredCell>,
    /// Whether any scenario of the protocol asks for the coverage gate.
    pub gated: bool,
    pub min_hits: u64,
}

impl ProtocolCoverage {
    /// Required cells with fewer than `min_hits` hits.
    pub fn missing(
        &self,
        hits: &BTreeMap<(String, FaultKind, LocalState), u64>,
    ) -> Vec<DeclaredCell> {
        self.cells
            .iter()
            .filter(|c| {
                c.required
                    && hits
                        .get(&(self.protocol.clone(), c.fault, c.state))
                        .copied()
                        .unwrap_or(0)
                        < self.min_hits
            })
            .copied()
            .collect()
    }

    pub fn required(&self) -> usize {
        self.cells.iter().filter(|c| c.required).count()
    }
}

/// Whether `f` happens in scenario `l`: a positive rate, or the fault it follows from has one,
/// on a server profile that shows it.
fn enabled(l: &Loaded, f: FaultKind) -> bool {
    let rated = l.scenario.faults.enabled(f)
        || f.follows_from()
            .is_some_and(|src| l.scenario.faults.enabled(src));
    let shown = f
        .needs_profile()
        .is_none_or(|p| l.scenario.server.profiles.contains(&p));
    rated && shown
}

/// The coverage `protocol` must show over `scenarios` (those whose primary lane speaks it).
pub fn of_protocol(scenarios: &[Loaded], protocol: Protocol) -> ProtocolCoverage {
    let gated: Vec<&Loaded> = scenarios
        .iter()
        .filter(|l| l.scenario.protocol == protocol && l.scenario.gates.coverage)
        .collect();
    let cells = catalogue::row(protocol)
        .iter()
        .flat_map(|c| {
            let required = gated.iter().any(|l| enabled(l, c.fault));
            c.states.iter().map(move |&state| DeclaredCell {
                fault: c.fault,
                state,
                required,
            })
        })
        .collect();
    ProtocolCoverage {
        protocol: protocol.name().to_string(),
        cells,
        gated: !gated.is_empty(),
        min_hits: gated
            .iter()
            .map(|l| l.scenario.gates.coverage_min_hits)
            .max()
            .unwrap_or(1),
    }
}
