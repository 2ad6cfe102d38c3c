//! Per-series measurements, computed from the trace alone (the same trace the checkers read),
//! so gate, tune and reports never re-implement a metric.

use std::collections::BTreeMap;

use serde::Serialize;
use toolop::record::LocalState;

use crate::faults::FaultKind;

/// What one series measured. Durations in simulated milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SeriesMetrics {
    pub call_nodes: u32,
    /// Fault firings by kind.
    pub faults: BTreeMap<FaultKind, u32>,
    /// (fault, executor local state at firing) -> firings: the coverage matrix of this series.
    pub coverage: BTreeMap<(FaultKind, LocalState), u32>,
    /// Terminal outcome per call node: "completed", "failed", "cancelled", "done_without_result",
    /// "rejected", "unknown" (manual reconciliation), or "unsettled".
    pub terminal_states: BTreeMap<String, u32>,
    /// Status reads (`poll` sends) over the series.
    pub polls: u64,
    /// Polls per operation (one entry per call node that got an operation id).
    pub polls_per_operation: Vec<u64>,
    /// Most sends by one executor incarnation in any window [t, t+999] ms.
    pub max_sends_in_window: u32,
    /// Cancel click to the call node settling (receipt or reconciliation), per cancelled node.
    pub cancel_confirmation_ms: Vec<u64>,
    /// Time spent not knowing whether an operation exists: entering SUBMISSION_UNKNOWN to leaving
    /// it, and submission to hand-off for nodes that end in UNKNOWN.
    pub unknown_reconciliation_ms: Vec<u64>,
    /// Submission to settlement, per settled call node.
    pub end_to_end_ms: Vec<u64>,
    /// Server-side terminal time to acceptance, per accepted node with a server task.
    pub completion_detection_ms: Vec<u64>,
    /// 429 replies the executor received.
    pub rate_limited: u32,
    /// Receipts whose terminal state differs from the server's ground truth.
    pub divergences: u32,
    /// Call nodes for which the server started more than one operation (tasks + sync runs - 1).
    pub second_operations: u32,
    /// Outbox entries without a matching receipt.
    pub untraceable_outbox: u32,
    pub outbox_entries: u32,
    /// Call nodes with more than one receipt (or Accepted observation).
    pub extra_receipts: u32,
    /// Call nodes that did not settle within the liveness bound.
    pub liveness_failures: u32,
}
