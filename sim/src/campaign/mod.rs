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

/// `--jobs`: worker threads, 1 to 256 (0 would run nothing and report it as done).
pub fn jobs_parser(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is outside 1..=256")),
        Err(e) => Err(e.to_string()),
    }
}
