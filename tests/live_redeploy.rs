//! A rolling redeploy, live, on the official TypeScript SDK: the executor listed `build_report`
//! as a task tool, and its task-augmented call reaches an instance where the tool no longer
//! supports tasks. The SDK runs the tool, then answers -32602 "Invalid task creation result"
//! (mcp-tasks.md §14): the tool ran and no task exists. The fault proxy loses every answer to
//! `tools/call` after the server produced it, so the executor never hears even that.
//!
//! - On a server that deduplicates by key (`--idempotency`), the executor asks by key (no
//!   task), resubmits as "never created" lets it (NOT_FOUND_SAFE), up to its attempt limit,
//!   then hands the call to a person. The server answers each resubmission with the first
//!   run's answer, as toolop's contract on `io.toolop/idempotency-key` says (the key names the
//!   submission, task or not): the tool runs once.
//! - On one that does not, nothing proves the first call created nothing: no resubmission, the
//!   call is handed over at once, and the tool ran once.
//!
//! - When the SDK's answer does arrive, it says the tool may have run and left no task: handed
//!   over at once.
//!
//! Every way: one run on the server (its own count), no task, no receipt, a hand-off.
#![cfg(not(madsim))]

mod common;

use common::proxy::Proxy;
use common::{code, run, text, Peer, Sdk, TempLedger};
use toolop::ledger::Ledger;

/// Every answer to `tools/call` is lost after the server answered.
const LOSE_CALL_ANSWERS: &str = r#"[faults.drop_after]
rate = 1.0
methods = ["tools/call"]
"#;

/// One call of `build_report`, redeployed on its way, through the proxy with `faults`: the calls
/// the proxy saw, the runs the server counted under the node's key, the server's stats.
fn redeployed_call(peer_flags: &[&str], faults: &str) -> (u64, u64, serde_json::Value) {
    let peer = Peer::start(Sdk::Ts, peer_flags);
    let ledger = TempLedger::new("redeploy");
    let proxy = Proxy::start(ledger.dir(), 1, peer.port, faults);
    peer.fault(serde_json::json!({"redeploy": "build_report"}));
    let url = proxy.url();
    let out = run(
        &ledger,
        &[
            "call",
            "--server",
            &url,
            "--protocol",
            Sdk::Ts.protocol(),
            "--tool",
            "build_report",
            "--args",
            r#"{"month": "2026-11", "ms": 100}"#,
            "--node",
            "n1",
            "--request-timeout-ms",
            "3000",
        ],
    );
    let log = std::fs::read_to_string(&proxy.log).unwrap_or_default();
    assert_eq!(
        code(&out),
        3,
        "the call is handed to a person: {}\nproxy log:\n{log}",
        text(&out)
    );
    let l = toolop::ledger::SqliteLedger::open(ledger.path()).unwrap();
    let key = l.records().unwrap()[0].submission_key.clone();
    assert!(l.receipts().unwrap().is_empty(), "no receipt");
    let calls = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["rpc_method"] == "tools/call")
        .count() as u64;
    let stats = peer.stats();
    let runs = stats["sync_runs"][key.as_str()].as_u64().unwrap_or(0);
    assert_eq!(stats["tasks_created"], 0, "no task: {stats}");
    (calls, runs, stats)
}

#[test]
fn a_redeployed_tool_runs_once_when_its_answers_are_lost_and_the_server_deduplicates() {
    let (calls, runs, stats) = redeployed_call(&["--idempotency"], LOSE_CALL_ANSWERS);
    assert!(
        calls >= 2,
        "the executor resubmitted after a lookup by key found nothing ({calls} calls)"
    );
    assert_eq!(runs, 1, "{calls} calls, one run: {stats}");
}

#[test]
fn a_redeployed_tool_is_not_called_again_where_nothing_can_prove_it_did_not_run() {
    let (calls, runs, stats) = redeployed_call(&[], LOSE_CALL_ANSWERS);
    assert_eq!((calls, runs), (1, 1), "{stats}");
}

/// The SDK's answer arrives: "-32602 Invalid task creation result" says the tool may have run
/// and left no task, so the executor hands the call over at once, never calling again.
#[test]
fn the_sdks_answer_to_a_redeployed_tool_is_handed_over_at_once() {
    let (calls, runs, stats) = redeployed_call(&["--idempotency"], "");
    assert_eq!((calls, runs), (1, 1), "{stats}");
}
