//! The stdio transport on real child processes: newline-delimited JSON-RPC with the Python SDK
//! server, a line over the cap dropped, the end of the child's stdout closing the transport,
//! and the child killed when the transport is dropped.
#![cfg(not(madsim))]

mod common;

use common::rt;

use std::time::Duration;

use serde_json::{json, Value};
use toolop::transport::stdio::{spawn, StdioConfig};
use toolop::transport::{LiveTransport, OutFrame, Transport, TransportStats};

async fn next(t: &mut LiveTransport) -> Option<Value> {
    let f = tokio::time::timeout(Duration::from_secs(20), t.recv())
        .await
        .expect("a frame or the end")?;
    Some(serde_json::from_slice(&f.body).expect("one JSON message per line"))
}

fn send(t: &mut LiveTransport, v: Value) {
    t.send(OutFrame {
        request_id: v["id"].as_u64(),
        body: serde_json::to_vec(&v).unwrap(),
        http: None,
    })
    .unwrap();
}

#[test]
fn python_sdk_server_speaks_over_stdio_and_dies_with_the_transport() {
    let dir = common::TempLedger::new("stdio-pid");
    let pid_file = dir.dir().join("pid");
    // `exec` keeps the pid: the child the transport spawned is the server itself.
    let line = format!(
        "sh -c 'echo $$ > {}; exec {} {} --stdio'",
        pid_file.display(),
        common::python().display(),
        common::root()
            .join("tests/peers/python/server.py")
            .display()
    );
    rt().block_on(async {
        let mut t = spawn(StdioConfig::from_command_line(&line).unwrap()).unwrap();
        send(&mut t, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}));
        let init = next(&mut t).await.unwrap();
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        assert!(init["result"]["capabilities"]["tasks"].is_object());
        send(&mut t, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        send(&mut t, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
        let tools = next(&mut t).await.unwrap();
        assert_eq!(tools["id"], 2);
        assert!(tools["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "build_report"));
        let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        drop(t);
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie no longer running.
            if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the server child {pid} outlived its transport");
    });
}

#[test]
fn an_oversize_line_is_dropped_and_the_end_of_stdout_closes_the_transport() {
    let dir = common::TempLedger::new("stdio-cap");
    let script = dir.dir().join("server.sh");
    std::fs::write(&script, "head -c 3000000 /dev/zero | tr '\\0' x\necho\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}'\n").unwrap();
    let mut cfg = StdioConfig::from_command_line(&format!("sh {}", script.display())).unwrap();
    cfg.line_limit_bytes = 1 << 20;
    rt().block_on(async {
        let mut t = spawn(cfg).unwrap();
        let stats = t.stats();
        let v = next(&mut t).await.expect("the short line arrives");
        assert_eq!(v["id"], 1);
        assert_eq!(TransportStats::get(&stats.oversize), 1);
        assert!(
            next(&mut t).await.is_none(),
            "stdout closed: the transport is closed"
        );
    });
}

#[test]
fn a_command_that_cannot_start_is_a_clear_error() {
    let e = rt().block_on(async {
        spawn(StdioConfig::from_command_line("/nonexistent/server --stdio").unwrap())
            .err()
            .unwrap()
    });
    assert!(
        e.contains("cannot start") && e.contains("/nonexistent/server"),
        "{e}"
    );
}
