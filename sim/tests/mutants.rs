//! Every planted anti-pattern is caught within the series budget, and the unmutated executor
//! trips no checker on the same seeds, within the budget `toolop-sim mutants` uses (2,000 series;
//! TOOLOP_MUTANT_SERIES overrides it); a plant that is slow, not wrong, and that no checker can
//! see would have to fail a gate over 10,000 series that the unmutated executor passes on the
//! same seeds (none is, since session 48). The reduced 600 it once ran let
//! a plant the gate catches only at series 696 (effect_reconciliation_on_any_late_end) look like
//! a survivor.
#![cfg(madsim)]

use std::path::PathBuf;

use toolop::core::mutation::Mutation;
use toolop_sim::campaign::mutants;
use toolop_sim::campaign::sweep::Loaded;
use toolop_sim::scenario::Scenario;

fn default_set() -> Vec<Loaded> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    toolop_sim::campaign::mutants::DEFAULT_SET
        .iter()
        .map(|f| Loaded::plain(PathBuf::from(f), Scenario::load(&root.join(f)).unwrap()))
        .collect()
}

#[test]
fn every_mutation_is_caught_and_the_unmutated_executor_is_clean() {
    let budget: u64 = std::env::var("TOOLOP_MUTANT_SERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let set = default_set();
    let base = mutants::baseline(&set, budget, 2);
    assert!(
        base.values().all(|&n| n == 0),
        "the unmutated executor trips checkers: {base:?}"
    );
    // A plant no checker can see is judged by the gate over the release gate's number of
    // series, against the unmutated executor's sweep of the same seeds.
    let (results, _) = mutants::hunt_all(&set, &Mutation::ALL, (budget, mutants::GATE_SERIES), 2);
    let table = mutants::table(&results, &base);
    println!("{table}");
    let survivors: Vec<String> = results
        .iter()
        .filter(|r| !r.caught())
        .map(|r| r.mutation.name())
        .collect();
    let names = survivors.join(" ");
    assert!(
        survivors.is_empty(),
        "mutations survived ({budget} series for a checker, {} for the gate): {names}; reproduce: toolop-sim mutants --mutation {names}\n{table}",
        mutants::GATE_SERIES,
    );
}

/// The variant without beats that `make mutants` runs is the gate's `mcp_ext_replicas` with
/// beats turned off, and nothing else: an edit to one that the other misses would hunt the
/// plant in another world.
#[test]
fn the_variant_without_beats_is_the_gate_scenario_with_beats_off() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let gated = Scenario::load(&root.join("scenarios/mcp_ext_replicas.toml")).unwrap();
    let mut variant = Scenario::load(&root.join("scenarios/mcp_ext_replicas_nobeat.toml")).unwrap();
    assert_eq!(variant.executor.beat_interval_ms, 0);
    assert!(
        gated.executor.beat_interval_ms > 0,
        "the gate's scenario beats"
    );
    variant.name = gated.name.clone();
    variant.executor.beat_interval_ms = gated.executor.beat_interval_ms;
    assert!(
        variant == gated,
        "the two scenario files differ beyond the name and the beat"
    );
}
