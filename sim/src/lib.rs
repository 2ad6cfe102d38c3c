//! toolop-sim: a deterministic fault-injection harness that runs the real toolop executor
//! against fake servers under madsim. The module list is the code map, in data-flow order.

/// Scenario files: workload, executor settings, server profile, network, limits.
pub mod scenario;
/// One series: seed -> drawn parameters -> world (executor, server, network, caller) -> trace.
pub mod world;
/// The simulated network, where every frame gets a verdict.
pub mod net;
/// Fake servers per protocol, with ground truth.
pub mod fake;
/// The trace: typed events, canonical bytes, hash.
pub mod trace;
/// Human-readable summaries of a series.
pub mod summary;
/// The fault catalogue and swarm-drawn fault profiles.
pub mod faults;
/// Per-series measurements from the trace.
pub mod metrics;
/// Always-properties over a trace, one checker per invariant.
pub mod checkers;
/// Gates over a sweep, and the sweep's result types.
pub mod gates;
/// Report files of a sweep.
pub mod report;
/// Many seeded series over a scenario set, spread over worker threads.
pub mod sweep;
/// Shrinking a failing series: fewer fault firings and call nodes, same checker failure.
pub mod shrink;
/// A readable timeline of a trace, for replay.
pub mod timeline;
/// The benchmark behind `make bench`.
pub mod bench;
/// The mutation run: the gate against planted anti-patterns.
pub mod mutants;
/// The tune command: a grid of executor poll settings on the same seeds, frontier, recommendation.
pub mod tune;
