//! Judges: everything that reads a trace (or the rows of many) and says whether it is good.

/// Always-properties over a trace, one checker per invariant.
pub mod checkers;
/// Which (fault, state) cells a sweep must hit, per protocol: read by the gate and the reports.
pub mod coverage;
/// Gates over a sweep, and the sweep's result types.
pub mod gates;
/// Per-series measurements from the trace.
pub mod metrics;
