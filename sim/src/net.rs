//! The simulated network between executor incarnations and the fake server. Every frame passes
//! the fault layer here (lost, delayed past a newer reply, truncated, rewritten, answered by a
//! "replica" with 404/429/503, connection dropped), with no change on either side.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};
use toolop::ledger::{Ledger, MemoryLedger};
use toolop::protocol::{META_IDEMPOTENCY_KEY, META_LOOKUP_KEY, META_RESULT_DIGEST};
use toolop::transport::{InFrame, OutFrame, Transport, TransportError};

use crate::fake::server::SimServer;
use crate::faults::{FaultKind, SharedPlan};
use crate::trace::{Dir, SharedTrace, What};

const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// What a request was, so its reply can be judged by the same layer.
#[derive(Clone, Debug)]
struct Sent {
    method: String,
    node: Option<String>,
    task_id: Option<String>,
    /// A plain-HTTP (AIP-151) exchange rather than JSON-RPC.
    http: bool,
}

/// Handles the network needs to judge frames.
pub struct NetCtx {
    pub trace: SharedTrace,
    pub plan: SharedPlan,
    pub ledger: Arc<Mutex<MemoryLedger>>,
    /// One server per lane; connection `c` speaks to lane `c % LANES_MAX`.
    pub servers: Vec<Arc<Mutex<Box<dyn SimServer>>>>,
    pub origin: Instant,
    pub latency_ms: [u64; 2],
    /// The executor's request timeout: a poll reply held longer than this arrives out of order.
    pub request_timeout_ms: u64,
}

/// The network: one server inbox, one inbox per open executor connection.
pub struct Net {
    ctx: NetCtx,
    /// One inbox per server lane; empty once the series is over (see [`Net::shutdown`]).
    to_server: Vec<mpsc::UnboundedSender<(u32, OutFrame)>>,
    connections: BTreeMap<u32, mpsc::UnboundedSender<InFrame>>,
    sent: BTreeMap<(u32, u64), Sent>,
    task_ids: Vec<String>,
}

pub type SharedNet = Arc<Mutex<Net>>;

/// Lanes a connection id can name: connection ids are `incarnation * LANES_MAX + lane`.
pub const LANES_MAX: u32 = 10;

pub fn lane_of(conn: u32) -> usize {
    (conn % LANES_MAX) as usize
}

/// What an AIP-151 (plain HTTP) request is, in the JSON-RPC method names the fault layer uses.
fn aip_method(http: &toolop::transport::HttpTarget) -> &'static str {
    match (http.method.as_str(), http.path.ends_with(":cancel"), http.path.contains("?filter=")) {
        ("POST", true, _) => "tasks/cancel",
        ("POST", false, _) => "tools/call",
        ("GET", _, true) => "tasks/list",
        ("GET", _, false) => "tasks/get",
        _ => "(other)",
    }
}

fn parse(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// A 404 as a gateway in front of an AIP-151 service would send it (google.rpc.Status body).
fn http_not_found(rpc_id: u64) -> InFrame {
    let body = serde_json::json!({"error": {"code": 404, "message": "operation not found", "status": "NOT_FOUND"}});
    InFrame { request_id: Some(rpc_id), http_status: 404, retry_after_ms: None, body: body.to_string().into_bytes() }
}

fn error_frame(rpc_id: u64, code: i64, message: &str) -> InFrame {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}});
    InFrame { request_id: Some(rpc_id), http_status: 200, retry_after_ms: None, body: body.to_string().into_bytes() }
}

/// Replace every `taskId` string in a message (the related-task `_meta` included).
fn rewrite_task_ids(v: &mut Value, to: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "taskId" && x.is_string() {
                    *x = Value::String(to.to_string());
                } else {
                    rewrite_task_ids(x, to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_task_ids(x, to)),
        _ => {}
    }
}

/// Drop the last content block of a `tasks/result` reply, keeping `_meta` (the server's result
/// digest included) as sent. Only for a result that carries the server's digest, so the cut is
/// detectable; returns whether a block was dropped.
fn drop_last_content_block(msg: &mut Value) -> bool {
    let Some(result) = msg.get_mut("result") else {
        return false;
    };
    if !result["_meta"][META_RESULT_DIGEST].is_string() {
        return false;
    }
    match result.get_mut("content").and_then(Value::as_array_mut) {
        Some(blocks) => blocks.pop().is_some(),
        None => false,
    }
}

impl Net {
    pub fn new(ctx: NetCtx, to_server: Vec<mpsc::UnboundedSender<(u32, OutFrame)>>) -> Net {
        Net { ctx, to_server, connections: BTreeMap::new(), sent: BTreeMap::new(), task_ids: vec![] }
    }

    fn server(&self, conn: u32) -> &Arc<Mutex<Box<dyn SimServer>>> {
        let lane = lane_of(conn).min(self.ctx.servers.len().saturating_sub(1));
        &self.ctx.servers[lane]
    }

    /// Drop every channel end the network holds. Tasks still parked on those channels when a
    /// series ends hold the world through their wakers; without this the cycle leaks the world.
    pub fn shutdown(&mut self) {
        self.to_server.clear();
        self.connections.clear();
        self.sent.clear();
        self.task_ids.clear();
    }

    fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.ctx.origin).as_millis() as u64
    }

    fn latency(&mut self) -> u64 {
        let [lo, hi] = self.ctx.latency_ms;
        self.ctx.plan.lock().expect("plan lock").draw(lo, hi)
    }

    fn fire(&mut self, fault: FaultKind, node: Option<&str>, detail: String) -> bool {
        let now = self.now_ms();
        let Some(decision) = self.ctx.plan.lock().expect("plan lock").fire(fault, now) else {
            return false;
        };
        self.record_fault(decision, fault, node, detail);
        true
    }

    /// Record a fault firing with the executor state it met.
    pub fn record_fault(&self, decision: u64, fault: FaultKind, node: Option<&str>, detail: String) {
        let what = crate::faults::fault_event(&self.ctx.ledger, decision, fault, node, detail);
        let now = self.now_ms();
        self.ctx.trace.lock().expect("trace lock").push(now, what);
    }

    fn record(&self, dir: Dir, request_id: Option<u64>, bytes: usize, verdict: &str) {
        let now = self.now_ms();
        self.ctx.trace.lock().expect("trace lock").push(now, What::Net { dir, request_id, bytes, verdict: verdict.to_string() });
    }

    /// Open a connection for a new executor incarnation.
    pub fn connect(net: &SharedNet, conn: u32) -> SimTransport {
        let (tx, rx) = mpsc::unbounded_channel();
        net.lock().expect("net lock").connections.insert(conn, tx);
        SimTransport { net: net.clone(), conn, rx }
    }

    /// Close a connection: frames in flight to it are lost, as on a real dropped socket.
    pub fn disconnect(&mut self, conn: u32) {
        self.connections.remove(&conn);
    }

    /// The newest open connection of a lane: where its server sends what it initiates.
    pub fn latest_connection(&self, lane: usize) -> Option<u32> {
        self.connections.keys().rev().find(|&&c| lane_of(c) == lane).copied()
    }

    fn classify_request(&self, frame: &OutFrame, msg: &Value) -> Sent {
        let (method, task_id, key) = match &frame.http {
            // AIP-151 over HTTP: the operation name is in the path, the key is the requestId.
            Some(http) => {
                let method = aip_method(http);
                let path = http.path.split('?').next().unwrap_or_default();
                let name = path.trim_end_matches(":cancel").trim_start_matches('/').split_once('/').map(|(_, rest)| rest.to_string());
                let task_id = if matches!(method, "tasks/get" | "tasks/cancel") { name } else { None };
                (method.to_string(), task_id, msg["requestId"].as_str().map(String::from))
            }
            None => {
                let params = &msg["params"];
                let task_id = params["taskId"]
                    .as_str()
                    .or_else(|| msg["result"]["_meta"][RELATED_TASK]["taskId"].as_str())
                    .map(String::from);
                let key = params["_meta"][META_IDEMPOTENCY_KEY].as_str().or_else(|| params["_meta"][META_LOOKUP_KEY].as_str()).map(String::from);
                (msg["method"].as_str().unwrap_or("(response)").to_string(), task_id, key)
            }
        };
        let key = key.as_deref();
        let http = frame.http.is_some();
        let l = self.ctx.ledger.lock().expect("ledger lock");
        let node = task_id
            .as_deref()
            .and_then(|t| l.by_operation_id(t).expect("in-memory ledger reads cannot fail"))
            .or_else(|| key.and_then(|k| l.by_submission_key(k).expect("in-memory ledger reads cannot fail")))
            .map(|r| r.call_node_id);
        Sent { method, node, task_id, http }
    }

    fn to_server(&mut self, conn: u32, frame: OutFrame) -> Result<(), TransportError> {
        if !self.connections.contains_key(&conn) {
            return Err(TransportError::Disconnected);
        }
        let sent = self.classify_request(&frame, &parse(&frame.body));
        if let Some(id) = frame.request_id {
            self.sent.insert((conn, id), sent.clone());
        }
        let node = sent.node.clone();
        let n = node.as_deref();
        let now = self.now_ms();
        // A replica or gateway in front of the server answers instead of it.
        if let (Some(id), "tasks/get" | "tasks/result") = (frame.request_id, sent.method.as_str()) {
            let synthetic = if self.fire(FaultKind::Poll429, n, sent.method.clone()) {
                let retry = self.ctx.plan.lock().expect("plan lock").draw(1_000, 30_000);
                Some(InFrame { request_id: Some(id), http_status: 429, retry_after_ms: Some(retry), body: vec![] })
            } else if self.fire(FaultKind::Poll503, n, sent.method.clone()) {
                let retry = self.ctx.plan.lock().expect("plan lock").draw(1_000, 30_000);
                Some(InFrame { request_id: Some(id), http_status: 503, retry_after_ms: Some(retry), body: vec![] })
            } else if self.fire(FaultKind::NotFoundBeforeExpiry, n, sent.method.clone()) {
                Some(if sent.http { http_not_found(id) } else { error_frame(id, -32602, "Task not found") })
            } else {
                None
            };
            if let Some(f) = synthetic {
                self.record(Dir::ToServer, frame.request_id, frame.body.len(), "answered by replica");
                self.deliver_to(conn, f, 0);
                return Ok(());
            }
        }
        if sent.method == "tasks/cancel" {
            if let Some(t) = &sent.task_id {
                // Completion and cancel at the same instant: the work ends as the cancel lands.
                let delay = self.latency();
                if self.fire(FaultKind::CompletionCancelRace, n, t.clone()) {
                    let (server, t, at) = (self.server(conn).clone(), t.clone(), now + delay);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                        server.lock().expect("server lock").finish_now(&t, at);
                    });
                }
                // A server that keeps working through the cancel and later lets the work's end
                // overwrite `cancelled`. Recorded when (and if) the status flips: see
                // `world::actors`, which decides the flip.
                let decision = self.ctx.plan.lock().expect("plan lock").fire(FaultKind::StatusAfterCancel, now);
                if let Some(decision) = decision {
                    self.server(conn).lock().expect("server lock").keep_working_after_cancel(t, decision);
                }
            }
        }
        let lost = frame.request_id.is_some() && self.fire(FaultKind::LostRequest, n, sent.method.clone());
        self.record(Dir::ToServer, frame.request_id, frame.body.len(), if lost { "lost" } else { "deliver" });
        if let (false, Some(tx)) = (lost, self.to_server.get(lane_of(conn)).cloned()) {
            let latency = self.latency();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(latency)).await;
                // The server outlives every delivery in a series; a send after it ends is moot.
                let _ = tx.send((conn, frame));
            });
        }
        if self.fire(FaultKind::ConnectionDrop, n, sent.method) {
            self.disconnect(conn);
        }
        Ok(())
    }

    /// A frame from the server to connection `conn`.
    pub fn to_executor(&mut self, conn: u32, mut frame: InFrame) {
        let sent = frame.request_id.and_then(|id| self.sent.remove(&(conn, id)));
        let mut msg = parse(&frame.body);
        for t in [&msg["result"]["task"]["taskId"], &msg["result"]["taskId"], &msg["name"]] {
            if let Some(t) = t.as_str() {
                if !self.task_ids.iter().any(|x| x == t) {
                    self.task_ids.push(t.to_string());
                }
            }
        }
        let mut extra_delay_ms = 0;
        let mut verdict = "deliver".to_string();
        if let Some(s) = &sent {
            let n = s.node.as_deref();
            let is_error = msg.get("error").is_some() || frame.http_status >= 400;
            // A done AIP-151 operation is its own result: faults on results apply to it.
            // So is a tasks-extension read of a finished task, which inlines its result.
            let inline_result = !s.http && s.method == "tasks/get" && (msg["result"]["result"].is_object() || msg["result"]["error"].is_object());
            let method = if (s.http && s.method == "tasks/get" && msg["done"] == true) || inline_result { "tasks/result" } else { s.method.as_str() };
            let created = msg["result"]["task"].is_object() || msg["result"]["resultType"] == "task" || (s.http && msg["name"].is_string());
            match method {
                "tools/call" if created && self.fire(FaultKind::LostResponseAfterCreation, n, String::new()) => {
                    verdict = "lost".into()
                }
                "tasks/get" if !is_error && self.fire(FaultKind::PollsOutOfOrder, n, String::new()) => {
                    extra_delay_ms = self.ctx.request_timeout_ms + self.ctx.plan.lock().expect("plan lock").draw(1, 5_000);
                    verdict = format!("held +{extra_delay_ms}ms");
                }
                "tasks/get" | "tasks/result" if !is_error && self.fire(FaultKind::TaskIdMisuse, n, String::new()) => {
                    let own = s.task_id.clone().unwrap_or_default();
                    let other = self.task_ids.iter().find(|t| **t != own).cloned().unwrap_or_else(|| "foreign-server-task".into());
                    rewrite_task_ids(&mut msg, &other);
                    if s.http && msg["name"].is_string() {
                        msg["name"] = Value::String(other.clone());
                    }
                    frame.body = msg.to_string().into_bytes();
                    verdict = format!("task id rewritten to {other}");
                }
                "tasks/cancel" if self.fire(FaultKind::CancelAckLost, n, String::new()) => verdict = "lost".into(),
                "tasks/result" if self.fire(FaultKind::ResultLost, n, String::new()) => verdict = "lost".into(),
                "tasks/result" if !is_error && frame.body.len() > 2 && self.fire(FaultKind::ResultTruncated, n, String::new()) => {
                    // Half the firings cut bytes; the other half keep the JSON well formed and
                    // drop the last content block (the server's digest then no longer matches).
                    let semantic = self.ctx.plan.lock().expect("plan lock").draw(0, 1) == 1;
                    if semantic && drop_last_content_block(&mut msg) {
                        frame.body = msg.to_string().into_bytes();
                        verdict = "last content block dropped".into();
                    } else {
                        let cut = self.ctx.plan.lock().expect("plan lock").draw(1, frame.body.len() as u64 - 1) as usize;
                        frame.body.truncate(cut);
                        verdict = format!("truncated to {cut} bytes");
                    }
                }
                _ => {}
            }
            // Not injected: the server itself expired the task. Recorded for the coverage matrix.
            if is_error && matches!(s.method.as_str(), "tasks/get" | "tasks/result" | "tasks/cancel") {
                if let Some(t) = &s.task_id {
                    self.note_expiry(conn, t, n);
                }
            }
        } else if msg["method"] == "elicitation/create" && self.fire(FaultKind::InputRequiredReplay, self.node_of_related(&msg).as_deref(), String::new()) {
            let again = self.ctx.plan.lock().expect("plan lock").draw(1_000, 30_000);
            self.deliver_to(conn, frame.clone(), again);
        }
        self.record(Dir::ToExecutor, frame.request_id, frame.body.len(), &verdict);
        if verdict != "lost" {
            let latency = self.latency();
            self.deliver_to(conn, frame, latency + extra_delay_ms);
        }
    }

    fn node_of_related(&self, msg: &Value) -> Option<String> {
        let t = msg["params"]["_meta"][RELATED_TASK]["taskId"].as_str()?;
        self.ctx.ledger.lock().expect("ledger lock").by_operation_id(t).expect("in-memory ledger reads cannot fail").map(|r| r.call_node_id)
    }

    fn note_expiry(&self, conn: u32, task_id: &str, node: Option<&str>) {
        let (deleted, running) = {
            let s = self.server(conn).lock().expect("server lock");
            let running = s.truth().tasks.get(task_id).is_some_and(|t| t.terminal_status.is_none());
            (s.is_deleted(task_id), running)
        };
        if deleted {
            self.record_fault(0, FaultKind::NotFoundAfterExpiry, node, task_id.to_string());
            if running {
                self.record_fault(0, FaultKind::ServerDeletesRunningTask, node, task_id.to_string());
            }
        }
    }

    fn deliver_to(&self, conn: u32, frame: InFrame, delay_ms: u64) {
        let Some(tx) = self.connections.get(&conn).cloned() else { return };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let _ = tx.send(frame);
        });
    }
}

/// The executor's end of one connection.
pub struct SimTransport {
    net: SharedNet,
    conn: u32,
    rx: mpsc::UnboundedReceiver<InFrame>,
}

impl Transport for SimTransport {
    fn send(&mut self, frame: OutFrame) -> Result<(), TransportError> {
        self.net.lock().expect("net lock").to_server(self.conn, frame)
    }

    async fn recv(&mut self) -> Option<InFrame> {
        self.rx.recv().await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn semantic_truncation_drops_the_last_block_and_keeps_the_digest() {
        let meta = json!({ META_RESULT_DIGEST: "d", RELATED_TASK: {"taskId": "t"} });
        let mut msg = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "isError": false, "_meta": meta}});
        assert!(drop_last_content_block(&mut msg));
        assert_eq!(msg["result"]["content"], json!([{"type": "text", "text": "a"}]));
        assert_eq!(msg["result"]["_meta"], meta);
        // Without the server's digest the cut would go unnoticed: left alone. So are results
        // without blocks, and anything that is not a result.
        let mut plain = json!({"result": {"content": [{"type": "text", "text": "a"}]}});
        let mut empty = json!({"result": {"content": [], "_meta": {META_RESULT_DIGEST: "d"}}});
        let mut odd = json!([1, 2]);
        for m in [&mut plain, &mut empty, &mut odd] {
            let before = m.clone();
            assert!(!drop_last_content_block(m));
            assert_eq!(*m, before);
        }
    }
}
