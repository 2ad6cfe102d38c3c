//! Live calls per second: N call nodes on one runner against a real MCP server over Streamable
//! HTTP, in memory (no ledger file), until every node has its receipt. A measurement, not a test.
//!
//!     cargo run --release --example live_calls -- http://127.0.0.1:3000/mcp 200 [MAX_QPS]

use std::sync::{Arc, Mutex};
use std::time::Instant;

use toolop::core::PollPolicy;
use toolop::ledger::{Ledger, MemoryLedger};
use toolop::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use toolop::runner::{CallNode, Input, NullObserver, Runner, RunnerConfig, SharedLedger};
use toolop::transport::http::{connect, HttpConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "http://127.0.0.1:3000/mcp".into());
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let max_qps: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let memory = Arc::new(Mutex::new(MemoryLedger::new()));
        let ledger: SharedLedger = memory.clone();
        let mut cfg = RunnerConfig { max_qps, ..RunnerConfig::default() };
        cfg.core.poll = PollPolicy { initial_interval_ms: 50, interval_cap_ms: 500, ..PollPolicy::default() };
        let (approvals, _rx) = tokio::sync::mpsc::unbounded_channel();
        let runner = Runner::new(cfg, 1, tokio::time::Instant::now(), Box::new(Mcp20251125Adapter::new()), ledger, Box::new(NullObserver), approvals, 7, 0);
        let transport = connect(HttpConfig { url, ..HttpConfig::default() }).unwrap();
        let (inputs, inputs_rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = tokio::spawn(runner.run(transport, inputs_rx));
        let started = Instant::now();
        for i in 0..n {
            let node = CallNode { id: format!("n{i:05}"), tool: "build_report".into(), arguments: serde_json::json!({"month": "2026-11", "ms": 0}), submission_key: format!("bench-{}-{i}", std::process::id()) };
            inputs.send(Input::Submit(node)).unwrap();
        }
        // Bounded: at most ten minutes.
        for _ in 0..60_000 {
            if memory.lock().unwrap().receipts().expect("in-memory read").len() >= n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        let receipts = memory.lock().unwrap().receipts().expect("in-memory read");
        let completed = receipts.iter().filter(|r| r.terminal_state.name() == "completed").count();
        inputs.send(Input::Shutdown).unwrap();
        let _ = handle.await;
        println!("{n} call nodes, {completed} completed, {} receipts in {secs:.2} s: {:.1} calls/s (max_qps {max_qps})", receipts.len(), receipts.len() as f64 / secs);
    });
}
