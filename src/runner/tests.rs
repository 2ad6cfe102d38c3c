//! The runner on real tokio (the production runtime), against a tiny scripted MCP server over
//! the channel transport. Intervals are a few milliseconds so the test runs in real time.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::*;
use crate::core::PollPolicy;
use crate::ledger::MemoryLedger;
use crate::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use crate::record::LocalState;
use crate::transport::{ChannelTransport, InFrame};

struct Collect(Arc<Mutex<Vec<Observation>>>);

impl Observer for Collect {
    fn observe(&mut self, _now_ms: u64, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

fn task(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "createdAt": "2026-12-01T00:00:00Z", "lastUpdatedAt": "2026-12-01T00:00:00Z", "ttl": 60000, "pollInterval": 5})
}

/// Answers like a server whose task completes on the third poll. Counts `tools/call`s.
async fn scripted_server(mut rx: mpsc::UnboundedReceiver<crate::transport::OutFrame>, tx: mpsc::UnboundedSender<InFrame>, calls: Arc<Mutex<u32>>) {
    let mut polls = 0;
    while let Some(frame) = rx.recv().await {
        let msg: Value = serde_json::from_slice(&frame.body).unwrap();
        let Some(id) = msg.get("id").cloned() else { continue };
        let result = match msg["method"].as_str().unwrap_or("") {
            "initialize" => json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "t", "version": "1"},
                "capabilities": {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}}),
            "tools/list" => json!({"tools": [{"name": "report", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
            "tools/call" => {
                *calls.lock().unwrap() += 1;
                json!({"task": task("t1", "working")})
            }
            "tasks/get" => {
                polls += 1;
                task("t1", if polls >= 3 { "completed" } else { "working" })
            }
            "tasks/result" => json!({"content": [{"type": "text", "text": "ok"}],
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}),
            _ => continue,
        };
        let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap();
        let _ = tx.send(InFrame { request_id: frame.request_id, http_status: 200, retry_after_ms: None, body });
    }
}

#[test]
fn runs_on_real_tokio_and_accepts_exactly_once() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let (transport, out_rx, in_tx) = ChannelTransport::pair();
        let calls = Arc::new(Mutex::new(0));
        tokio::spawn(scripted_server(out_rx, in_tx, calls.clone()));
        let ledger = Arc::new(Mutex::new(MemoryLedger::new()));
        let shared: SharedLedger = ledger.clone();
        let obs = Arc::new(Mutex::new(vec![]));
        let (approvals, _approvals_rx) = mpsc::unbounded_channel();
        let mut cfg = RunnerConfig::default();
        cfg.core.poll = PollPolicy { initial_interval_ms: 5, backoff_multiplier: 1.0, interval_cap_ms: 5, jitter_fraction: 0.1, honor_server_interval: true };
        cfg.request_timeout_ms = 2_000;
        let runner = Runner::new(cfg, 1, tokio::time::Instant::now(), Box::new(Mcp20251125Adapter::new()), shared, Box::new(Collect(obs.clone())), approvals, 1, 0);
        let (inputs, inputs_rx) = mpsc::unbounded_channel();
        let handle = tokio::spawn(runner.run(transport, inputs_rx));
        let node = CallNode { id: "n1".into(), tool: "report".into(), arguments: json!({"m": 1}), submission_key: "k1".into() };
        inputs.send(Input::Submit(node.clone())).unwrap();
        // The same call node again must not start a second operation.
        inputs.send(Input::Submit(node)).unwrap();
        // Bounded wait in real time: the scripted task completes after three 5 ms polls.
        for _ in 0..400 {
            if ledger.lock().unwrap().receipts().len() == 1 {
                break;
            }
            tokio::time::sleep(tokio::time::Duration::from_millis(5)).await;
        }
        inputs.send(Input::Shutdown).unwrap();
        assert_eq!(handle.await.unwrap(), Exit::Shutdown);
        let l = ledger.lock().unwrap();
        assert_eq!(l.by_call_node("n1").unwrap().local_state, LocalState::Accepted);
        assert_eq!(l.receipts().len(), 1);
        assert_eq!(l.outbox().len(), 1);
        assert_eq!(*calls.lock().unwrap(), 1, "exactly one operation created");
        let obs = obs.lock().unwrap();
        assert!(obs.iter().any(|o| matches!(o, Observation::DuplicateCallNode { .. })));
        assert!(obs.iter().any(|o| matches!(o, Observation::Negotiated { key_lookup: false, .. })));
    });
}
