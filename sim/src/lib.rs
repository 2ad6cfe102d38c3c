//! toolop-sim: a deterministic fault-injection harness that runs the real toolop executor
//! against fake servers under madsim. The module list is the code map, in data-flow order:
//! `scenario -> series(seed) -> runner <-> net (fault rules) <-> codec <-> fake service ->
//! trace -> judge -> report`, driven many times by a campaign.

/// Runs of many series: sweeps, shrinking, the mutation run, the benchmark, tuning.
pub mod campaign;
/// The fake server side: one protocol-neutral task service with its ground truth, and one codec
/// per protocol that turns frames into neutral requests and neutral responses into frames.
pub mod fake;
/// Judges over traces and sweeps: checkers, metrics, gates, the coverage matrix.
pub mod judge;
/// What a sweep or a series looks like to people and CI: CSV, histograms, Markdown, JUnit,
/// terminal tables, replay timelines and summaries.
pub mod report;
/// Scenario files: typed protocol and server profile, workload, executor settings, network,
/// faults, gates, limits. A bad file names the file, the field and the problem.
pub mod scenario;
/// One series: seed -> drawn parameters -> world (executors, fake servers, network, caller,
/// approval agent) -> trace. Holds the network and its fault rules (`series::net`) and the
/// fault catalogue, plan and schedules (`series::faults`).
pub mod series;
/// The trace: typed events, canonical bytes, hash. The only input to judges.
pub mod trace;
pub mod trace_hash;
