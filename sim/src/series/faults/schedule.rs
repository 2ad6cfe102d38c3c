//! Fault schedules: a series' firings as data (TOML), to replay, edit and shrink.

use serde::{Deserialize, Serialize};

use super::catalogue::FaultKind;

/// One fault firing: the `ask`-th time (1-based, counted per fault kind and call node within
/// the safety phase) the series asked whether `fault` fires for `node`, and it did.
/// `(fault, node, ask)` names a decision point; it is more stable under edits of a schedule than
/// a global counter: removing one fault's firings leaves the other kinds' numbering alone, and
/// removing a call node leaves the other nodes' numbering alone, as far as the run stays the same.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Firing {
    pub fault: FaultKind,
    /// The call node the ask was made for; missing: a series-wide ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub ask: u64,
    /// Informational, ignored on replay: the trace's `decision` number of this firing (the
    /// series-wide decision counter, which `What::Fault` has always carried) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<u64>,
    /// ... and its simulated time, to find it in the timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ms: Option<u64>,
}

/// How a [`FaultPlan`] decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PlanMode {
    /// Draw every decision from the rate (the normal run); firings are recorded.
    #[default]
    Draw,
    /// Replay a schedule: a fault fires iff its `(fault, node, ask)` is in the set. The schedule
    /// is authoritative for every fault kind: a kind it does not name never fires.
    Replay(std::collections::BTreeSet<(FaultKind, Option<String>, u64)>),
}

/// A series' fault schedule as data: which fault fired at which decision point, plus the
/// fault-like parameters the seed drew (rollback, short server ttl) and the call nodes kept.
/// Stored as TOML (see [`Schedule::to_toml`]); `toolop-sim replay --schedule FILE` replays it.
///
/// Fields a hand-written file leaves out mean "off" (no firings, no rollback, no short ttl),
/// except `nodes`, which means "every node the seed drew".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The scenario file, relative to the schedule file's folder (or absolute).
    pub scenario: String,
    /// The `--set FIELD=VALUE` settings the series ran with, applied to the scenario in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<String>,
    pub seed: u64,
    /// The checker that failed (set on shrunk schedules): what a replay should reproduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker: Option<String>,
    /// Whether the operator rollback happens ...
    #[serde(default)]
    pub rollback: bool,
    /// ... and when (kept when `rollback` is off, so switching it back on is a one-word edit).
    /// Missing with `rollback = true`: the time the seed drew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_at_ms: Option<u64>,
    /// Whether the server's ttl is shortened so that it deletes running tasks ...
    #[serde(default)]
    pub server_deletes_running_task: bool,
    /// ... and to what (kept when off). Missing with the fault on: the ttl the seed drew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_ttl_ms: Option<u64>,
    /// The call nodes kept, by id; missing: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Sizes before shrinking (shrunk schedules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrunk_from: Option<ScheduleSize>,
    /// The firings, in the order they happened.
    #[serde(default, rename = "firing")]
    pub firings: Vec<Firing>,
}

/// The size of a schedule: what shrinking minimizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSize {
    pub firings: usize,
    pub nodes: usize,
    pub rollback: bool,
    pub server_deletes_running_task: bool,
}

impl std::fmt::Display for ScheduleSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} firing(s), {} node(s)", self.firings, self.nodes)?;
        if self.rollback {
            write!(f, ", rollback")?;
        }
        if self.server_deletes_running_task {
            write!(f, ", short server ttl")?;
        }
        Ok(())
    }
}

impl Schedule {
    /// The decision points that fire.
    pub fn decisions(&self) -> std::collections::BTreeSet<(FaultKind, Option<String>, u64)> {
        self.firings
            .iter()
            .map(|f| (f.fault, f.node.clone(), f.ask))
            .collect()
    }

    /// `all_nodes`: how many nodes the seed drew (for a schedule that keeps them all).
    pub fn size(&self, all_nodes: usize) -> ScheduleSize {
        ScheduleSize {
            firings: self.firings.len(),
            nodes: self.nodes.as_ref().map_or(all_nodes, Vec::len),
            rollback: self.rollback,
            server_deletes_running_task: self.server_deletes_running_task,
        }
    }

    /// The file form: a comment header, then TOML.
    pub fn to_toml(&self) -> Result<String, String> {
        let body =
            toml::to_string(self).map_err(|e| format!("cannot serialise the schedule: {e}"))?;
        Ok(format!(
            "# toolop-sim fault schedule. Replay: toolop-sim replay --schedule <this file>\n\
             # A fault fires iff its (fault, node, ask) is listed: ask = the n-th time (from 1) the\n\
             # series asked whether that fault fires for that call node (no node: a series-wide ask).\n\
             # `decision` and `t_ms` only help find a firing in the timeline; replay ignores them.\n{body}"
        ))
    }

    pub fn from_toml(text: &str) -> Result<Schedule, String> {
        let s: Schedule = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut seen = std::collections::BTreeSet::new();
        for f in &s.firings {
            if f.ask == 0 {
                return Err(format!("firing {}: ask counts from 1", f.fault.name()));
            }
            if !seen.insert((f.fault, f.node.as_deref(), f.ask)) {
                return Err(format!(
                    "firing {} node {} ask {} is listed twice",
                    f.fault.name(),
                    f.node.as_deref().unwrap_or("(none)"),
                    f.ask
                ));
            }
        }
        Ok(s)
    }

    pub fn load(path: &std::path::Path) -> Result<Schedule, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        Schedule::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn save(&self, path: &std::path::Path) -> Result<(), String> {
        let text = self.to_toml()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}
