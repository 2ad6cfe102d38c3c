//! The verdict of the kill -9 proof, read from the world only: each peer's own record of the
//! tasks it created (`GET /truth`: key, status, stored result), the SQLite ledger file (records,
//! receipts, outbox, reconciliation queue) and the consumer's rows in that file. Nothing here
//! reads what `toolop` printed or logged.

use std::collections::BTreeMap;

use toolop::ledger::{Ledger, OutboxStatus, SqliteLedger};
use toolop::record::TerminalState;

use super::consumer::{self, CONSUMER_ID};
use super::Driver;
use crate::common::http;

/// A task a peer created.
#[derive(Clone, Debug)]
struct Task {
    task_id: String,
    status: String,
    result: Option<serde_json::Value>,
}

/// Counts for the report line.
#[derive(Debug, Default)]
pub struct Verdict {
    pub nodes: usize,
    pub receipts: BTreeMap<&'static str, usize>,
    pub reconciliation: usize,
    /// Of those, on the peer with lookup: stopped by the submission bound (crash loop).
    pub crash_loop_bound: usize,
    pub consumed: usize,
}

/// The result without its `_meta` (the peer's digest), for comparing payloads.
fn bare(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("_meta");
    }
    v
}

fn truth(d: &Driver) -> Vec<BTreeMap<String, Vec<Task>>> {
    d.peers
        .iter()
        .map(|p| {
            let body = http(p.port, "GET", "/truth", "");
            let v: serde_json::Value = serde_json::from_str(&body)
                .unwrap_or_else(|e| d.fail(&format!("peer /truth is not JSON ({e}): {body}")));
            let mut by_key: BTreeMap<String, Vec<Task>> = BTreeMap::new();
            for t in v["tasks"].as_array().cloned().unwrap_or_default() {
                let Some(key) = t["key"].as_str() else {
                    d.fail(&format!(
                        "the peer created a task with no idempotency key: {t}"
                    ));
                };
                by_key.entry(key.to_string()).or_default().push(Task {
                    task_id: t["taskId"].as_str().unwrap_or_default().to_string(),
                    status: t["status"].as_str().unwrap_or_default().to_string(),
                    result: (!t["result"].is_null()).then(|| t["result"].clone()),
                });
            }
            by_key
        })
        .collect()
}

pub fn judge(d: &Driver) -> Verdict {
    let truth = truth(d);
    let l = SqliteLedger::open(d.ledger())
        .unwrap_or_else(|e| d.fail(&format!("cannot open the ledger file: {e}")));
    fn ok<T>(d: &Driver, r: Result<T, toolop::ledger::LedgerError>) -> T {
        r.unwrap_or_else(|e| d.fail(&format!("reading the ledger: {e}")))
    }
    let records = ok(d, l.records());
    let receipts = ok(d, l.receipts());
    let outbox = ok(d, l.outbox());
    let queue = ok(d, l.reconciliation_queue());
    let rows = consumer::rows(d.ledger())
        .unwrap_or_else(|e| d.fail(&format!("reading the consumer's rows: {e}")));
    let mut v = Verdict {
        nodes: d.nodes.len(),
        ..Verdict::default()
    };

    // No task on any server that no ledger record explains: a key the executor generated,
    // crashed before writing, and sent anyway would show here.
    let keys: BTreeMap<&str, &str> = records
        .iter()
        .map(|r| (r.submission_key.as_str(), r.call_node_id.as_str()))
        .collect();
    for (peer, by_key) in truth.iter().enumerate() {
        for (key, tasks) in by_key {
            if !keys.contains_key(key.as_str()) {
                d.fail(&format!(
                    "peer {peer} holds {} task(s) for key {key}, which no ledger record carries",
                    tasks.len()
                ));
            }
        }
    }
    if outbox.len() != receipts.len() {
        d.fail(&format!(
            "{} outbox entries for {} receipts",
            outbox.len(),
            receipts.len()
        ));
    }

    for node in &d.nodes {
        let id = node.id.as_str();
        let Some(rec) = records.iter().find(|r| r.call_node_id == id) else {
            d.fail(&format!(
                "call node {id} has no record after its round settled"
            ));
        };
        if !rec.local_state.is_final() {
            d.fail(&format!(
                "call node {id} is left {} after its round settled",
                rec.local_state
            ));
        }
        let tasks = truth[node.peer]
            .get(&rec.submission_key)
            .cloned()
            .unwrap_or_default();
        if tasks.len() > 1 {
            d.fail(&format!(
                "call node {id}: {} tasks on the server for its key {} (a second operation)",
                tasks.len(),
                rec.submission_key
            ));
        }
        let task = tasks.first();
        let mine: Vec<_> = receipts.iter().filter(|r| r.call_node_id == id).collect();
        let queued = queue.iter().filter(|q| q.call_node_id == id).count();
        match (mine.as_slice(), queued) {
            ([], 0) => d.fail(&format!(
                "call node {id} ({}) has neither a receipt nor a reconciliation item",
                rec.local_state
            )),
            ([_, _, ..], _) => d.fail(&format!("call node {id} has {} receipts", mine.len())),
            ([_], q) if q > 0 => d.fail(&format!(
                "call node {id} has a receipt and is in manual reconciliation too"
            )),
            // Where the server offers lookup by key, the executor resolves a crash itself: an
            // operator item there is an executor that gave up too soon (handing everything to
            // reconciliation would pass every other check). The one allowed exception is the
            // crash-loop bound: a node whose every submission died with its process stops after
            // `max_submit_attempts`, with nothing created on the server.
            ([], _) if node.peer == 0 => {
                let why = queue
                    .iter()
                    .find(|q| q.call_node_id == id)
                    .map(|q| q.reason.clone())
                    .unwrap_or_default();
                let bound = toolop::core::CoreConfig::default().max_submit_attempts;
                if !(why.starts_with("submission attempts spent")
                    && rec.submit_attempts >= bound
                    && task.is_none())
                {
                    d.fail(&format!(
                        "call node {id} is in manual reconciliation on the server with lookup by key ({} submissions, {} tasks): {why}",
                        rec.submit_attempts,
                        tasks.len()
                    ));
                }
                v.crash_loop_bound += 1;
                v.reconciliation += 1;
            }
            ([], _) => {
                v.reconciliation += 1;
                if outbox.iter().any(|e| e.call_node_id == id) {
                    d.fail(&format!(
                        "call node {id} is in reconciliation but has an outbox entry"
                    ));
                }
            }
            ([receipt], _) => {
                *v.receipts.entry(receipt.terminal_state.name()).or_default() += 1;
                judge_receipt(d, id, receipt, task, &outbox, &rows);
            }
        }
    }
    // The consumer saw every entry exactly once, and nothing else.
    for e in &outbox {
        let seen = rows.iter().filter(|r| r.receipt_id == e.receipt_id).count();
        if seen != 1 {
            d.fail(&format!(
                "the consumer saw the outbox entry of {} {seen} times",
                e.call_node_id
            ));
        }
        if e.status != OutboxStatus::Delivered || e.delivered_to.as_deref() != Some(CONSUMER_ID) {
            d.fail(&format!(
                "the outbox entry of {} is {} (delivered to {:?}) after the drain",
                e.call_node_id,
                e.status.name(),
                e.delivered_to
            ));
        }
    }
    if rows.len() != outbox.len() {
        d.fail(&format!(
            "the consumer wrote {} rows for {} outbox entries",
            rows.len(),
            outbox.len()
        ));
    }
    v.consumed = rows.len();
    v
}

fn judge_receipt(
    d: &Driver,
    id: &str,
    receipt: &toolop::ledger::Receipt,
    task: Option<&Task>,
    outbox: &[toolop::ledger::OutboxEntry],
    rows: &[consumer::Consumed],
) {
    let entries: Vec<_> = outbox.iter().filter(|e| e.call_node_id == id).collect();
    let [entry] = entries.as_slice() else {
        d.fail(&format!(
            "call node {id}: {} outbox entries for its receipt",
            entries.len()
        ));
    };
    if entry.receipt_id != receipt.receipt_id || entry.terminal_state != receipt.terminal_state {
        d.fail(&format!(
            "call node {id}: the outbox entry ({}, {}) does not match its receipt ({}, {})",
            entry.receipt_id,
            entry.terminal_state.name(),
            receipt.receipt_id,
            receipt.terminal_state.name()
        ));
    }
    let Some(task) = task else {
        if receipt.terminal_state != TerminalState::Rejected {
            d.fail(&format!(
                "call node {id}: receipt {} but the server created no task for its key",
                receipt.terminal_state.name()
            ));
        }
        return;
    };
    if receipt.operation_id.as_deref() != Some(task.task_id.as_str()) {
        d.fail(&format!(
            "call node {id}: the receipt names operation {:?}, the server's task is {}",
            receipt.operation_id, task.task_id
        ));
    }
    if receipt.terminal_state.name() != task.status {
        d.fail(&format!(
            "call node {id}: receipt {}, the server says {}",
            receipt.terminal_state.name(),
            task.status
        ));
    }
    // The payload the outbox carries is what the server stored (failed included).
    let want = match receipt.terminal_state {
        TerminalState::Completed | TerminalState::Failed => task.result.as_ref().map(bare),
        _ => None,
    };
    let got = entry.payload.as_ref().map(bare);
    if got != want {
        d.fail(&format!(
            "call node {id} ({}): outbox payload {} but the server stored {}",
            receipt.terminal_state.name(),
            got.map(|g| g.to_string()).unwrap_or("none".into()),
            want.map(|w| w.to_string()).unwrap_or("none".into())
        ));
    }
    // And the consumer read that payload, not another.
    if let Some(row) = rows.iter().find(|r| r.receipt_id == receipt.receipt_id) {
        if row.call_node_id != id
            || row.terminal_state != receipt.terminal_state.name()
            || row.payload.as_ref().map(bare) != entry.payload.as_ref().map(bare)
        {
            d.fail(&format!(
                "call node {id}: the consumer read {} {} {:?}, the outbox holds {} {:?}",
                row.call_node_id,
                row.terminal_state,
                row.payload,
                receipt.terminal_state.name(),
                entry.payload
            ));
        }
    }
}
