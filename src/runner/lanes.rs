//! Lanes: one per adapter (protocol version) the executor speaks. Launch controls pick the lane
//! of a new call node; a retired lane takes no new work but keeps reconciling what it has, then
//! reports itself drained. Records always stay on the lane they were created on.

use serde::{Deserialize, Serialize};

use super::{CallNode, Observation, Runner};
use crate::core::CoreConfig;
use crate::protocol::{Adapter, ServerCapabilities};
use crate::record::AdapterId;

pub(super) struct Lane {
    pub adapter: Box<dyn Adapter + Send>,
    pub caps: ServerCapabilities,
    /// The core settings for records on this lane (negotiated key lookup and retention).
    pub core: CoreConfig,
    pub accepting_new: bool,
    pub drained_reported: bool,
}

impl Lane {
    /// A lane whose records a resumed submission's lease covers for `request_timeout_ms`: as
    /// long as the process that sent it may still read its reply.
    pub fn new(
        adapter: Box<dyn Adapter + Send>,
        core: &CoreConfig,
        request_timeout_ms: u64,
    ) -> Lane {
        let core = CoreConfig {
            request_lease_ms: request_timeout_ms,
            ..core.clone()
        };
        Lane {
            adapter,
            caps: ServerCapabilities::default(),
            core,
            accepting_new: true,
            drained_reported: false,
        }
    }

    pub fn set_caps(&mut self, caps: ServerCapabilities) {
        self.core.key_lookup = caps.idempotency_by_key;
        self.core.key_retention_ms = caps.idempotency_retention_ms;
        self.caps = caps;
    }
}

/// Launch controls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LaunchConfig {
    /// The adapter being launched; a fraction of new long tasks go to it.
    pub new_adapter: Option<AdapterId>,
    /// Fraction of new long tasks for `new_adapter`, chosen by a stable hash of the call node id.
    pub new_adapter_fraction: f64,
    /// Tools whose calls count as long tasks for the launch fraction (empty: all tools).
    pub long_tools: Vec<String>,
    /// Side-effect-free report tools run in shadow mode: recorded, checked and receipted, but
    /// their outcome never reaches the outbox.
    pub shadow_tools: Vec<String>,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            new_adapter: None,
            new_adapter_fraction: 0.05,
            long_tools: vec![],
            shadow_tools: vec![],
        }
    }
}

/// A stable draw in [0, 1) from a call node id: the same node always lands on the same lane.
pub fn stable_fraction(id: &str) -> f64 {
    let d = crate::digest::sha256_hex(id.as_bytes());
    let head = u64::from_str_radix(&d[..13], 16).unwrap_or(0);
    head as f64 / (1u64 << 52) as f64
}

impl Runner {
    pub(super) fn lane_of(&self, id: AdapterId) -> Option<usize> {
        self.lanes.iter().position(|l| l.adapter.id() == id)
    }

    /// The lane for a new call node, or `None` when every lane is retired.
    pub(super) fn lane_for_new(&self, node: &CallNode) -> Option<usize> {
        let launch = &self.cfg.launch;
        let open = |i: &usize| self.lanes[*i].accepting_new;
        let new_lane = launch
            .new_adapter
            .and_then(|a| self.lane_of(a))
            .filter(open);
        let long = launch.long_tools.is_empty() || launch.long_tools.contains(&node.tool);
        if let Some(n) = new_lane {
            if long && stable_fraction(&node.id) < launch.new_adapter_fraction {
                return Some(n);
            }
        }
        (0..self.lanes.len())
            .filter(open)
            .find(|&i| Some(i) != new_lane)
            .or(new_lane)
    }

    pub(super) fn retire(&mut self, id: AdapterId) {
        if let Some(i) = self.lane_of(id) {
            self.lanes[i].accepting_new = false;
            self.observe(Observation::AdapterRetired { adapter: id.name() });
            self.check_drained();
        }
    }

    /// Report each retired lane once no in-flight record uses it.
    pub(super) fn check_drained(&mut self) {
        let retiring: Vec<usize> = (0..self.lanes.len())
            .filter(|&i| !self.lanes[i].accepting_new && !self.lanes[i].drained_reported)
            .collect();
        if retiring.is_empty() {
            return;
        }
        let in_flight = self.ledger.lock().expect("ledger lock").in_flight();
        let in_flight = match in_flight {
            Ok(recs) => recs,
            Err(e) => return self.ledger_failed(e),
        };
        let at_retirement = planted!(self, DrainedAtRetirement);
        for i in retiring {
            let id = self.lanes[i].adapter.id();
            if at_retirement || !in_flight.iter().any(|r| r.adapter == id) {
                self.lanes[i].drained_reported = true;
                self.observe(Observation::AdapterDrained { adapter: id.name() });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stable_fraction_is_stable_and_spread() {
        let a = super::stable_fraction("n001");
        assert_eq!(a, super::stable_fraction("n001"));
        assert!((0.0..1.0).contains(&a));
        let below = (0..1000)
            .filter(|i| super::stable_fraction(&format!("n{i}")) < 0.05)
            .count();
        assert!(
            (20..=80).contains(&below),
            "about 5% of 1000 ids, got {below}"
        );
    }
}
