//! A raw JSON-RPC driver for the peer binary: no MCP client library between the test and the
//! wire, so what a test asserts is what the server sent.
#![allow(dead_code)] // each test file uses a different part

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

pub const PEER: &str = env!("CARGO_BIN_EXE_toolop-rmcp-peer");
/// Every wait in these tests is bounded by this unless it says otherwise.
pub const WAIT: Duration = Duration::from_secs(10);

pub fn tasks_caps() -> Value {
    json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } })
}

/// The peer binary with these arguments, stdout piped, killed on drop. Its event lines on
/// stderr are noise in a passing run: PEER_STDERR=1 shows them.
pub fn peer_command(transport: &[&str], args: &[&str]) -> Command {
    let mut command = Command::new(PEER);
    command
        .args(transport)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(if std::env::var_os("PEER_STDERR").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .kill_on_drop(true);
    command
}

/// The peer over stdio. The child is killed when this is dropped.
pub struct StdioPeer {
    child: Child,
    stdin: ChildStdin,
    out: mpsc::UnboundedReceiver<Value>,
    /// Messages read while waiting for another one.
    pending: VecDeque<Value>,
    next_id: u64,
}

impl StdioPeer {
    pub async fn start(args: &[&str]) -> StdioPeer {
        let mut child = peer_command(&["stdio"], args)
            .stdin(Stdio::piped())
            .spawn()
            .expect("start the peer binary");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, out) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("non-JSON line {line:?}: {e}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        StdioPeer {
            child,
            stdin,
            out,
            pending: VecDeque::new(),
            next_id: 1_000_000,
        }
    }

    pub async fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .expect("write to the peer");
        self.stdin.flush().await.expect("flush to the peer");
    }

    /// The next message that `wanted` accepts; others are kept for later calls.
    pub async fn recv_matching(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.pending.iter().position(&wanted) {
            return self.pending.remove(i).expect("index from position");
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let message = tokio::time::timeout_at(deadline, self.out.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!("no {what} within {WAIT:?}; unmatched: {:?}", self.pending)
                })
                .unwrap_or_else(|| panic!("the peer closed stdout while a test waited for {what}"));
            if wanted(&message) {
                return message;
            }
            self.pending.push_back(message);
        }
    }

    pub async fn response(&mut self, id: &Value) -> Value {
        let id = id.clone();
        self.recv_matching(&format!("response {id}"), move |m| {
            m.get("method").is_none() && m["id"] == id
        })
        .await
    }

    /// Sends a request with a fresh id and returns the whole response message.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        self.response(&id).await
    }

    /// `initialize` + `notifications/initialized` with these client capabilities.
    pub async fn initialize(&mut self, capabilities: Value) -> Value {
        let params = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": { "name": "peer-test", "version": "0" },
        });
        let reply = self.request("initialize", params).await;
        self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        reply
    }

    /// Closes stdin and waits (bounded) for the peer to exit on its own.
    pub async fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the peer exits after stdin closes")
            .expect("wait")
    }
}

/// Polls `tasks/get` until the task's status is one of `statuses` (bounded by [`WAIT`]).
pub async fn poll_until(peer: &mut StdioPeer, task_id: &str, statuses: &[&str]) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let reply = peer
            .request("tasks/get", json!({ "taskId": task_id }))
            .await;
        let status = reply["result"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if statuses.contains(&status.as_str()) {
            return reply;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task_id} never reached {statuses:?}; last {reply}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The lines of an events file (`--events-file`), complete lines only.
pub fn read_events(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| {
            serde_json::from_str(l.trim_end())
                .unwrap_or_else(|e| panic!("bad events line {l:?}: {e}"))
        })
        .collect()
}

/// A fresh path under the system temp dir, unique to this process and `name`.
pub fn temp_path(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("toolop-rmcp-peer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}
