//! The decision log: one JSON line per request, written when the proxy is done with it (for a
//! long SSE stream, when the stream ends). A test reads it to tell which fault fired where.
//!
//! ```json
//! {"n":3,"seed":7,"drawn":{"fault":"cut","at_permille":412},"fault":"cut","applied":true,
//!  "method":"POST","path":"/mcp","rpc_method":"tasks/get","rpc_id":12,"upstream_status":200,
//!  "status":200,"outcome":"cut","bytes_to_client":57,"elapsed_ms":3}
//! ```
//! - `drawn`: what the seed decided for request `n`. `fault`: what was applied (`none` when the
//!   drawn fault does not target this request's method). `applied`: the fault actually bit (a
//!   truncation needs a body to cut; a fault on an SSE stream needs the event it targets).
//! - `outcome`: `passed` (a delay passes too), `rejected`, `dropped`, `truncated`, `cut`,
//!   `upstream_error`, `upstream_timeout`, `request_too_large`, `response_too_large`,
//!   `stream_idle`, `stream_max`, `client_gone`.
//! - `status`: what the client got (`null` when the connection was dropped before a head).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use crate::plan::Fault;

#[derive(Clone)]
pub struct LogSink {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl LogSink {
    pub fn new(out: Box<dyn Write + Send>) -> LogSink {
        LogSink {
            out: Arc::new(Mutex::new(out)),
        }
    }

    pub fn stderr() -> LogSink {
        LogSink::new(Box::new(std::io::stderr()))
    }

    /// Appends to `path` (created if absent).
    pub fn file(path: &std::path::Path) -> std::io::Result<LogSink> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(LogSink::new(Box::new(f)))
    }

    fn write(&self, line: &Entry) {
        let mut bytes = serde_json::to_vec(line).expect("a log entry serialises");
        bytes.push(b'\n');
        let mut out = self.out.lock().expect("log lock poisoned");
        // One write per line: concurrent requests never interleave within a line.
        if let Err(e) = out.write_all(&bytes).and_then(|()| out.flush()) {
            eprintln!("toolop-fault-proxy: log write failed: {e}");
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct Entry {
    n: u64,
    seed: u64,
    drawn: Fault,
    fault: &'static str,
    applied: bool,
    method: String,
    path: String,
    rpc_method: Option<String>,
    rpc_id: Option<Value>,
    upstream_status: Option<u16>,
    status: Option<u16>,
    outcome: &'static str,
    bytes_to_client: u64,
    elapsed_ms: u64,
}

/// What is known about a request as it goes; [`Record::finish`] writes its line.
pub struct Record {
    sink: LogSink,
    started: Instant,
    entry: Entry,
}

impl Record {
    pub fn new(sink: LogSink, n: u64, seed: u64, drawn: Fault, method: &str, path: &str) -> Record {
        let entry = Entry {
            n,
            seed,
            drawn,
            fault: "none",
            applied: false,
            method: method.to_string(),
            path: path.to_string(),
            rpc_method: None,
            rpc_id: None,
            upstream_status: None,
            status: None,
            outcome: "passed",
            bytes_to_client: 0,
            elapsed_ms: 0,
        };
        Record {
            sink,
            started: Instant::now(),
            entry,
        }
    }

    pub fn rpc(&mut self, method: Option<String>, id: Option<Value>) {
        self.entry.rpc_method = method;
        self.entry.rpc_id = id;
    }

    /// The fault this request gets (the drawn one, or none).
    pub fn fault(&mut self, fault: &Fault) {
        self.entry.fault = fault.name();
    }

    pub fn upstream_status(&mut self, status: u16) {
        self.entry.upstream_status = Some(status);
    }

    pub fn status(&mut self, status: u16) {
        self.entry.status = Some(status);
    }

    pub fn applied(&mut self) {
        self.entry.applied = true;
    }

    pub fn bytes(&mut self, n: u64) {
        self.entry.bytes_to_client += n;
    }

    pub fn finish(mut self, outcome: &'static str) {
        self.entry.outcome = outcome;
        self.entry.elapsed_ms = self.started.elapsed().as_millis() as u64;
        self.sink.write(&self.entry);
    }
}
