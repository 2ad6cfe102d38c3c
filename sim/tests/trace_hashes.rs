//! The determinism list: seeds 0..99 of every default scenario hash to the committed
//! `sim/tests/data/trace-hashes.txt`. An intended behaviour change regenerates it with
//! `make trace-hashes`, and the commit message says why the traces changed.
#![cfg(madsim)]

use std::path::PathBuf;

use toolop_sim::campaign::hashes;
use toolop_sim::campaign::sweep::Loaded;
use toolop_sim::scenario::Scenario;

#[test]
fn trace_hashes_match_the_committed_list() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let scenarios: Vec<Loaded> = hashes::DEFAULT_SET
        .iter()
        .map(|f| Loaded::plain(PathBuf::from(f), Scenario::load(&root.join(f)).unwrap()))
        .collect();
    let list = root.join(hashes::LIST_PATH);
    let committed = hashes::parse(&std::fs::read_to_string(&list).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    assert_eq!(
        committed.len() as u64,
        hashes::SEEDS * hashes::DEFAULT_SET.len() as u64,
        "{} must list seeds 0..{} of every default scenario; regenerate: {}",
        hashes::LIST_PATH,
        hashes::SEEDS,
        hashes::REGENERATE
    );
    let fresh = hashes::compute(&scenarios, hashes::SEEDS, 2);
    let diff = hashes::differences(&committed, &fresh, 20);
    assert!(
        diff.is_empty(),
        "trace hashes differ from {}:\n  {}\nDeterminism or behaviour changed. If the change is \
         intended, regenerate with `{}` and commit the list only with the reason the traces \
         changed in the commit message.",
        hashes::LIST_PATH,
        diff.join("\n  "),
        hashes::REGENERATE
    );
}
