//! Shared by the live tests: real peer servers on free 127.0.0.1 ports (stopped on drop), the
//! `toolop` binary, and a tiny HTTP client for the peers' side endpoints.

#![allow(dead_code)]

pub mod proxy;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn python() -> PathBuf {
    let p = root().join("target/peers-venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: run `make peers` first",
        p.display()
    );
    p
}

fn ts_server() -> PathBuf {
    let dir = root().join("tests/peers/ts");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "TypeScript peer not installed: run `make peers` first"
    );
    dir.join("server.mjs")
}

fn rmcp_server() -> PathBuf {
    let bin = root().join("target/peers/rmcp/debug/toolop-rmcp-peer");
    assert!(
        bin.exists(),
        "{} missing: run `make peers` first",
        bin.display()
    );
    bin
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sdk {
    Ts,
    Python,
    /// The rmcp 3.11.0 tasks-extension server (`tests/peers/rmcp`).
    Rmcp,
    /// The AIP-151 test service (`tests/peers/python/aip_server.py`).
    Aip,
}

impl Sdk {
    /// The `--protocol` of `toolop call` for this server.
    pub fn protocol(self) -> &'static str {
        match self {
            Sdk::Rmcp => "mcp-tasks-ext",
            _ => "mcp-2025-11-25",
        }
    }
}

/// A peer server process; killed (and reaped) on drop.
pub struct Peer {
    child: Child,
    pub port: u16,
    pub sdk: Sdk,
    flags: Vec<String>,
    /// rmcp: its events file, shared by every incarnation on this port.
    events: Option<PathBuf>,
}

/// What a server itself recorded: its tasks (status from its own store) and creations per key.
#[derive(Debug, Default)]
pub struct ServerRecord {
    /// task id -> (idempotency key, last status the server's store reported, gone from the store)
    pub tasks: std::collections::BTreeMap<String, (Option<String>, String, bool)>,
    /// idempotency key -> tasks created for it (rmcp: across every incarnation)
    pub creations: std::collections::BTreeMap<String, u64>,
    /// rmcp: synchronous runs (a call the server ran without a task), which would be operations too
    pub sync_runs: u64,
}

impl Peer {
    pub fn start(sdk: Sdk, flags: &[&str]) -> Peer {
        Peer::start_on(sdk, free_port(), flags)
    }

    /// The same server again on the same port (a crash and restart: its in-memory tasks and
    /// sessions are gone; rmcp appends to the same events file).
    pub fn restart(mut self) -> Peer {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        Peer::spawn(self.sdk, self.port, &flags, self.events.take())
    }

    /// On a given port (a restart on the same address, as after a server crash).
    pub fn start_on(sdk: Sdk, port: u16, flags: &[&str]) -> Peer {
        let events = (sdk == Sdk::Rmcp).then(|| {
            std::env::temp_dir().join(format!(
                "toolop-rmcp-events-{}-{port}.jsonl",
                std::process::id()
            ))
        });
        if let Some(e) = &events {
            let _ = std::fs::remove_file(e);
        }
        Peer::spawn(sdk, port, flags, events)
    }

    fn spawn(sdk: Sdk, port: u16, flags: &[&str], events: Option<PathBuf>) -> Peer {
        let mut cmd = match sdk {
            Sdk::Rmcp => {
                let mut c = Command::new(rmcp_server());
                c.arg("http")
                    .arg("--events-file")
                    .arg(events.as_ref().expect("rmcp events file"));
                c
            }
            Sdk::Ts => {
                let mut c = Command::new("node");
                c.arg(ts_server());
                c
            }
            Sdk::Python => {
                let mut c = Command::new(python());
                c.arg(root().join("tests/peers/python/server.py"));
                c
            }
            Sdk::Aip => {
                let mut c = Command::new(python());
                c.arg(root().join("tests/peers/python/aip_server.py"));
                c
            }
        };
        cmd.arg("--port")
            .arg(port.to_string())
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().expect("start peer");
        let flags = flags.iter().map(|f| f.to_string()).collect();
        let peer = Peer {
            child,
            port,
            sdk,
            flags,
            events,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "{sdk:?} peer did not listen on {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        peer
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn stats(&self) -> serde_json::Value {
        serde_json::from_str(&http(self.port, "GET", "/stats", "")).expect("stats JSON")
    }

    /// Task creations the server counted for one idempotency key.
    pub fn creations(&self, key: &str) -> u64 {
        if self.sdk == Sdk::Rmcp {
            return self.record().creations.get(key).copied().unwrap_or(0);
        }
        self.stats()["creations"][key].as_u64().unwrap_or(0)
    }

    /// The server's own record (TS, Python: `GET /stats`; rmcp: its events file).
    pub fn record(&self) -> ServerRecord {
        let mut r = ServerRecord::default();
        if self.sdk == Sdk::Rmcp {
            let path = self.events.as_ref().expect("rmcp events file");
            let text = std::fs::read_to_string(path).unwrap_or_default();
            // A line without its newline is still being written (tests/peers/rmcp/README.md).
            let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            for line in complete.lines() {
                let e: serde_json::Value = serde_json::from_str(line).expect("events line");
                let id = e["task_id"].as_str().unwrap_or_default().to_string();
                match e["event"].as_str() {
                    Some("created") => {
                        let key = e["key"].as_str().map(str::to_string);
                        if let Some(k) = &key {
                            *r.creations.entry(k.clone()).or_default() += 1;
                        }
                        r.tasks.insert(id, (key, "working".into(), false));
                    }
                    Some("status") => {
                        if let Some(t) = r.tasks.get_mut(&id) {
                            t.1 = e["status"].as_str().unwrap_or_default().to_string();
                        }
                    }
                    Some("evicted") => {
                        if let Some(t) = r.tasks.get_mut(&id) {
                            t.2 = true;
                        }
                    }
                    Some("sync_run") => r.sync_runs += 1,
                    _ => {}
                }
            }
            return r;
        }
        let stats = self.stats();
        for (k, n) in stats["creations"].as_object().into_iter().flatten() {
            r.creations.insert(k.clone(), n.as_u64().unwrap_or(0));
        }
        for (id, t) in stats["tasks"].as_object().into_iter().flatten() {
            let key = t["key"].as_str().map(str::to_string);
            let status = t["status"].as_str().unwrap_or_default().to_string();
            r.tasks.insert(
                id.clone(),
                (key, status, t["gone"] == serde_json::Value::Bool(true)),
            );
        }
        r
    }

    /// Arm a fault on the TypeScript peer (see its header comment).
    pub fn fault(&self, body: serde_json::Value) {
        assert_eq!(
            self.sdk,
            Sdk::Ts,
            "faults exist on the TypeScript peer only"
        );
        http(self.port, "POST", "/faults", &body.to_string());
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(e) = self.events.take() {
            let _ = std::fs::remove_file(e);
        }
    }
}

/// One HTTP/1.1 exchange on a fresh connection; the body of the reply.
pub fn http(port: u16, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, rest) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_string()
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// The next frame a live transport delivers for request `id`, or `None` within `ms`.
pub async fn reply_to(
    t: &mut toolop::transport::LiveTransport,
    id: u64,
    ms: u64,
) -> Option<toolop::transport::InFrame> {
    use toolop::transport::Transport;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    loop {
        let frame = tokio::time::timeout_at(deadline, t.recv()).await.ok()??;
        if frame.request_id == Some(id) {
            return Some(frame);
        }
    }
}

/// A real multi-threaded tokio runtime, as production uses.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `toolop --ledger L ARGS...` started in the background (for kill -9 and second processes).
pub fn spawn(ledger: &TempLedger, args: &[&str]) -> Child {
    toolop()
        .arg("--ledger")
        .arg(ledger.path())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolop")
}

pub fn toolop() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolop"));
    c.env("CI", "true").env_remove("RUST_LOG");
    c
}

/// A fresh ledger path in its own temporary directory.
pub struct TempLedger {
    dir: PathBuf,
}

impl TempLedger {
    pub fn new(name: &str) -> TempLedger {
        let dir = std::env::temp_dir().join(format!(
            "toolop-live-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempLedger { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("toolop.db")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TempLedger {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `toolop --ledger L ARGS...`, waited for.
pub fn run(ledger: &TempLedger, args: &[&str]) -> Output {
    toolop()
        .arg("--ledger")
        .arg(ledger.path())
        .args(args)
        .output()
        .expect("run toolop")
}

pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `toolop status --json` of one node.
pub fn status(ledger: &TempLedger, node: &str) -> serde_json::Value {
    let out = run(ledger, &["--json", "status", node]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["call_nodes"][0].clone()
}

/// Poll `cond` on the node's status until it holds (bounded).
pub fn wait_status(
    ledger: &TempLedger,
    node: &str,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = run(ledger, &["--json", "status", node]);
        if code(&out) == 0 {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if cond(&v["call_nodes"][0]) {
                return v["call_nodes"][0].clone();
            }
        }
        assert!(Instant::now() < deadline, "{node} never reached: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `toolop call` of one node on `peer`, in the peer's protocol, waited for.
pub fn call(
    ledger: &TempLedger,
    peer: &Peer,
    node: &str,
    tool: &str,
    args: &str,
    extra: &[&str],
) -> Output {
    let url = peer.url();
    let mut a = vec![
        "call",
        "--server",
        url.as_str(),
        "--protocol",
        peer.sdk.protocol(),
        "--tool",
        tool,
        "--args",
        args,
        "--node",
        node,
    ];
    a.extend_from_slice(extra);
    run(ledger, &a)
}

/// The same, in the background (for a cancel from another process, or kill -9).
pub fn spawn_call(ledger: &TempLedger, peer: &Peer, node: &str, tool: &str, args: &str) -> Child {
    let url = peer.url();
    spawn(
        ledger,
        &[
            "call",
            "--server",
            &url,
            "--protocol",
            peer.sdk.protocol(),
            "--tool",
            tool,
            "--args",
            args,
            "--node",
            node,
        ],
    )
}

/// Receipts for one node in the ledger file, across every process that ever wrote it (the
/// database allows no second one; this checks there is one), each with its one outbox entry.
pub fn acceptances(ledger: &TempLedger, node: &str) -> usize {
    use toolop::ledger::Ledger;
    let l = toolop::ledger::SqliteLedger::open(ledger.path()).unwrap();
    let receipts = l.receipts().unwrap();
    let receipts = receipts.iter().filter(|r| r.call_node_id == node).count();
    let outbox = l.outbox().unwrap();
    let outbox = outbox.iter().filter(|e| e.call_node_id == node).count();
    assert_eq!(receipts, outbox, "{node}: one outbox entry per receipt");
    receipts
}
