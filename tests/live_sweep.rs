//! A short live sweep through the seeded fault proxy (`tests/fault-proxy`): 50 call nodes per
//! server, `toolop call --batch` then `toolop resume` until every node has settled, with
//! responses dropped after the server processed the request, delays, 429/503 with
//! Retry-After, truncated bodies and cut connections. It checks what the simulator checks,
//! against each server's own record:
//! - at most one receipt per call node (and one outbox entry per receipt);
//! - no second task on the server for any node's key (the servers count creations per key);
//! - every accepted terminal state equals the server's own status of that task;
//! - nodes without a receipt are in manual reconciliation (UNKNOWN), never lost or left running.
//!
//! The seed is fixed per server; a failure prints the proxy's decision log and the command
//! line that reruns the sweep. The measured calls per second are printed (run with
//! `--nocapture`); performance is reported, never asserted.
#![cfg(not(madsim))]

mod common;

use std::collections::BTreeMap;
use std::time::Instant;

use common::proxy::Proxy;
use common::{code, run, text, Peer, Sdk, TempLedger};
use toolop::ledger::Ledger;

const NODES: usize = 50;
const RESUMES_MAX: usize = 8;

/// Rates per request (30% faulted); the drop hangs 0 ms, so the client sees a closed connection
/// at once (its own timeout is covered in live_http.rs).
const SWEEP_FAULTS: &str = r#"[faults.drop_after]
rate = 0.07
[faults.delay]
rate = 0.08
min_ms = 10
max_ms = 300
[faults.reject]
rate = 0.07
statuses = [429, 503]
retry_after_s = 1
[faults.truncate]
rate = 0.04
[faults.cut]
rate = 0.04
"#;

/// The batch: mostly completions, some tool errors and failures, in a fixed order.
fn batch(sdk: Sdk) -> String {
    let mut lines = String::new();
    for i in 0..NODES {
        let (tool, args) = match (sdk, i % 5) {
            (Sdk::Rmcp, 3) => ("tool_error", serde_json::json!({"delay_ms": 200})),
            (Sdk::Rmcp, 4) => ("failing_job", serde_json::json!({"delay_ms": 200})),
            (Sdk::Rmcp, _) => (
                "slow_sum",
                serde_json::json!({"a": i, "b": 1, "delay_ms": 200}),
            ),
            (_, 3) => ("tool_error", serde_json::json!({"ms": 200})),
            (_, 4) => ("failing_job", serde_json::json!({"ms": 200})),
            _ => (
                "build_report",
                serde_json::json!({"month": format!("m{i}"), "ms": 200}),
            ),
        };
        lines.push_str(
            &serde_json::json!({"node": format!("w{i:02}"), "tool": tool, "args": args})
                .to_string(),
        );
        lines.push('\n');
    }
    lines
}

fn sweep(sdk: Sdk, peer_flags: &[&str], seed: u64) {
    let reproduce = format!(
        "cargo test -p toolop --test live_sweep {}_ -- --nocapture   # seed {seed}",
        format!("{sdk:?}").to_lowercase()
    );
    let peer = Peer::start(sdk, peer_flags);
    let ledger = TempLedger::new("sweep");
    let proxy = Proxy::start(ledger.dir(), seed, peer.port, SWEEP_FAULTS);
    let file = ledger.dir().join("calls.jsonl");
    std::fs::write(&file, batch(sdk)).unwrap();
    let url = proxy.url();
    let run_opts = ["--request-timeout-ms", "3000", "--max-qps", "50"];
    let started = Instant::now();
    let mut args = vec![
        "call",
        "--server",
        url.as_str(),
        "--protocol",
        sdk.protocol(),
        "--batch",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(&run_opts);
    let mut out = run(&ledger, &args);
    // 4 = not finished (the server unreachable through a fault at the wrong moment): resume.
    let mut resumes = 0;
    while code(&out) == 4 && resumes < RESUMES_MAX {
        resumes += 1;
        let mut a = vec!["resume"];
        a.extend_from_slice(&run_opts);
        out = run(&ledger, &a);
    }
    let elapsed = started.elapsed();
    assert!(
        [0, 1, 3].contains(&code(&out)),
        "{sdk:?}: not settled after {resumes} resumes: {}\nreproduce: {reproduce}",
        text(&out)
    );

    let l = toolop::ledger::SqliteLedger::open(ledger.path()).unwrap();
    let records = l.records().unwrap();
    assert_eq!(
        records.len(),
        NODES,
        "{sdk:?}: every call node has a record"
    );
    let mut receipts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in l.receipts().unwrap() {
        receipts
            .entry(r.call_node_id.clone())
            .or_default()
            .push(r.terminal_state.name().to_string());
    }
    let outbox = l.outbox().unwrap();
    let server = peer.record();
    let mut unknown = Vec::new();
    let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
    let fail = |what: String| -> ! {
        panic!(
            "{sdk:?} seed {seed}: {what}\nproxy faults: {:?}\nproxy log: {}\nreproduce: {reproduce}",
            proxy.applied(),
            std::fs::read_to_string(&proxy.log).unwrap_or_default()
        )
    };
    for rec in &records {
        let node = &rec.call_node_id;
        let created = server
            .creations
            .get(&rec.submission_key)
            .copied()
            .unwrap_or(0);
        if created > 1 {
            fail(format!(
                "{node}: {created} tasks on the server for key {}",
                rec.submission_key
            ));
        }
        let got = receipts.get(node).cloned().unwrap_or_default();
        let entries = outbox.iter().filter(|e| &e.call_node_id == node).count();
        if got.len() > 1 || entries != got.len() {
            fail(format!(
                "{node}: receipts {got:?}, outbox entries {entries}"
            ));
        }
        match got.first() {
            Some(terminal) => {
                *by_state.entry(terminal.clone()).or_default() += 1;
                let Some(task) = rec.operation_id.as_deref() else {
                    fail(format!("{node}: accepted {terminal} without a task id"));
                };
                let Some((key, status, _)) = server.tasks.get(task) else {
                    fail(format!("{node}: task {task} unknown to the server"));
                };
                if key.as_deref() != Some(rec.submission_key.as_str()) || status != terminal {
                    fail(format!(
                        "{node}: accepted {terminal}, the server recorded {status} (key {key:?})"
                    ));
                }
            }
            None if rec.local_state.name() == "UNKNOWN" => unknown.push(node.clone()),
            None => fail(format!(
                "{node}: no receipt and in {}",
                rec.local_state.name()
            )),
        }
    }
    assert_eq!(server.sync_runs, 0, "{sdk:?}: nothing ran without a task");
    let applied = proxy.applied();
    let faulted: u64 = applied
        .iter()
        .filter(|(k, _)| k.as_str() != "requests" && k.as_str() != "none")
        .map(|(_, n)| n)
        .sum();
    assert!(
        faulted > 0,
        "{sdk:?}: the proxy applied no fault: {applied:?}"
    );
    eprintln!(
        "sweep {sdk:?} seed {seed}: {NODES} call nodes in {:.1} s = {:.2} calls/s ({resumes} resumes); \
         accepted {by_state:?}; manual reconciliation {}; proxy {applied:?}",
        elapsed.as_secs_f64(),
        NODES as f64 / elapsed.as_secs_f64(),
        unknown.len()
    );
    // Most nodes must be settled by proof, not handed over: a sweep where everything went to
    // manual reconciliation would pass the checks above vacuously. Without a lookup by key
    // (Python, rmcp) a submission whose answer the proxy lost cannot be proved, so some are
    // expected there (~15% of tools/call requests draw a body fault; measured 8 and 11 of 50).
    assert!(
        unknown.len() * 5 <= NODES * 2,
        "{sdk:?}: {} of {NODES} call nodes in manual reconciliation: {unknown:?}\nreproduce: {reproduce}",
        unknown.len()
    );
}

/// TypeScript SDK with the idempotency extension (lookups by key resolve lost submissions).
#[test]
fn ts_sweep_through_the_fault_proxy() {
    sweep(Sdk::Ts, &["--idempotency"], 11);
}

/// Python SDK: no lookup by key, so a submission whose answer was dropped cannot be proved.
#[test]
fn python_sweep_through_the_fault_proxy() {
    sweep(Sdk::Python, &[], 12);
}

/// rmcp, the tasks extension, with no deduplication: every creation counts.
#[test]
fn rmcp_sweep_through_the_fault_proxy() {
    sweep(Sdk::Rmcp, &[], 13);
}
