//! An upstream that behaves like the servers the proxy fronts (JSON-RPC over JSON or SSE, a
//! GET event stream, a plain JSON body), a raw HTTP client, and an in-memory decision log.
#![allow(dead_code)] // each test file uses a different part

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use toolop_fault_proxy::config::{Faults, FileConfig, Limits, ProxyConfig};
use toolop_fault_proxy::log::LogSink;
use toolop_fault_proxy::{Aborted, ChannelBody, Running};

pub const WAIT: Duration = Duration::from_secs(10);
/// Events the upstream's GET stream sends before it ends by itself.
pub const GET_EVENTS: usize = 200;

/// What the upstream saw: requests it answered in full, per route.
#[derive(Default)]
pub struct Seen {
    pub json: AtomicU64,
    pub sse: AtomicU64,
    pub get: AtomicU64,
    /// GET streams that ended because the receiving side went away.
    pub get_closed_early: AtomicU64,
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The bytes the upstream sends for a JSON-RPC request with `id` on `/json`.
pub fn json_body(id: &Value) -> Vec<u8> {
    let pad = "x".repeat(300);
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": pad}]}})
        .to_string()
        .into_bytes()
}

/// The events the upstream sends on `/sse` for request `id`: a priming event, a server request,
/// the response. CRLF line ends, as the Python SDK writes them.
pub fn sse_events(id: &Value) -> [String; 3] {
    [
        "data: \r\nid: 0\r\nretry: 3000\r\n\r\n".to_string(),
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"elicitation/create\",\"params\":{}}\r\n\r\n"
            .to_string(),
        format!("event: message\r\ndata: {}\r\nid: 1\r\n\r\n", String::from_utf8(json_body(id)).unwrap()),
    ]
}

/// Event `k` of the GET stream.
pub fn get_event(k: usize) -> String {
    format!("data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{{\"k\":{k}}}}}\n\n")
}

/// The `/aip` body: an AIP-151 Operation (plain JSON, no JSON-RPC).
pub fn aip_body() -> Vec<u8> {
    json!({"name": "operations/op-1", "done": false, "metadata": {"progress": 3}})
        .to_string()
        .into_bytes()
}

type UpBody = BoxBody<Bytes, Aborted>;

fn full(bytes: Vec<u8>) -> UpBody {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

async fn serve(req: Request<Incoming>, seen: Arc<Seen>) -> Result<Response<UpBody>, hyper::Error> {
    let path = req.uri().path().to_string();
    let get = req.method() == hyper::Method::GET;
    let body = req.into_body().collect().await?.to_bytes();
    let id = serde_json::from_slice::<Value>(&body)
        .ok()
        .map(|v| v["id"].clone())
        .unwrap_or(Value::Null);
    let resp = Response::builder().header("mcp-session-id", "s-1");
    let resp = match (path.as_str(), get) {
        ("/json", false) => {
            seen.json.fetch_add(1, Ordering::SeqCst);
            resp.header("content-type", "application/json")
                .body(full(json_body(&id)))
        }
        // A notification's answer: 202, empty body.
        ("/note", false) => resp.status(202).body(full(Vec::new())),
        ("/big", false) => resp
            .header("content-type", "application/json")
            .body(full(vec![b' '; 4096])),
        ("/aip", _) => resp
            .header("content-type", "application/json")
            .body(full(aip_body())),
        ("/sse", false) => {
            let (tx, body) = ChannelBody::channel(None);
            tokio::spawn(async move {
                for (i, event) in sse_events(&id).into_iter().enumerate() {
                    if i == 2 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if tx.send(Ok(Bytes::from(event))).await.is_err() {
                        return;
                    }
                }
                seen.sse.fetch_add(1, Ordering::SeqCst);
            });
            resp.header("content-type", "text/event-stream")
                .body(body.boxed())
        }
        ("/sse", true) => {
            seen.get.fetch_add(1, Ordering::SeqCst);
            let (tx, body) = ChannelBody::channel(None);
            tokio::spawn(async move {
                for k in 0..GET_EVENTS {
                    let sent = tokio::select! {
                        biased;
                        () = tx.closed() => false,
                        r = tx.send(Ok(Bytes::from(get_event(k)))) => r.is_ok(),
                    };
                    if !sent {
                        seen.get_closed_early.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            resp.header("content-type", "text/event-stream")
                .body(body.boxed())
        }
        _ => resp.status(404).body(full(b"no such route".to_vec())),
    };
    Ok(resp.expect("a valid response"))
}

pub async fn upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let seen2 = seen.clone();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let seen = seen2.clone();
            conns.spawn(async move {
                let svc = hyper::service::service_fn(move |req| serve(req, seen.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Upstream { addr, seen, task }
}

/// A log that a test can read.
#[derive(Clone, Default)]
pub struct MemLog(Arc<Mutex<Vec<u8>>>);

impl Write for MemLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl MemLog {
    pub fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("log lines are JSON"))
            .collect()
    }

    /// The line of decision `n`, waiting (bounded) for it: a body's line comes when it ends.
    pub async fn line(&self, n: u64) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| l["n"] == n) {
                return l;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no log line for request {n}: {:?}",
                self.lines()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub struct Proxy {
    pub running: Running,
    pub log: MemLog,
    pub base: String,
}

pub async fn proxy(upstream: SocketAddr, seed: u64, faults: Faults, limits: Limits) -> Proxy {
    let file = FileConfig {
        seed: Some(seed),
        upstream: Some(format!("http://{upstream}")),
        faults,
        limits,
        ..FileConfig::default()
    };
    let config = ProxyConfig::new(file, "test").expect("valid test configuration");
    let log = MemLog::default();
    let running = toolop_fault_proxy::start(config, LogSink::new(Box::new(log.clone())))
        .await
        .expect("start proxy");
    let base = format!("http://{}", running.addr);
    Proxy { running, log, base }
}

/// A client that opens one connection per request, so request order is decision order.
pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(HttpConnector::new())
}

pub fn rpc(id: u64, method: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
        .to_string()
        .into_bytes()
}

pub fn post(url: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

pub fn get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url)
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// What a client got: the head (or the error instead of one) and the body read to its end.
pub struct Got {
    pub status: Option<u16>,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
    /// The body (or the request) ended with an error: a cut connection.
    pub error: Option<String>,
}

/// Sends `req` and reads the whole body, keeping the bytes that came before any error.
pub async fn send(client: &Client<HttpConnector, Full<Bytes>>, req: Request<Full<Bytes>>) -> Got {
    let resp = match tokio::time::timeout(WAIT, client.request(req))
        .await
        .expect("an answer or an error in time")
    {
        Ok(r) => r,
        Err(e) => {
            return Got {
                status: None,
                headers: Default::default(),
                body: vec![],
                error: Some(e.to_string()),
            }
        }
    };
    let status = Some(resp.status().as_u16());
    let headers = resp.headers().clone();
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, body.frame())
            .await
            .expect("body frames in time")
        {
            None => {
                return Got {
                    status,
                    headers,
                    body: bytes,
                    error: None,
                }
            }
            Some(Err(e)) => {
                return Got {
                    status,
                    headers,
                    body: bytes,
                    error: Some(e.to_string()),
                }
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
        }
    }
}
