//! Campaigns: many series at once, and what is built on running them.

/// The benchmark behind `make bench`.
pub mod bench;
/// The mutation run: the gate against planted anti-patterns.
pub mod mutants;
/// Shrinking a failing series: fewer fault firings and call nodes, same checker failure.
pub mod shrink;
/// Many seeded series over a scenario set, spread over worker threads.
pub mod sweep;
/// The tune command: a grid of executor poll settings on the same seeds, frontier, recommendation.
pub mod tune;
