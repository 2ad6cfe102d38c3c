//! The interop matrix: `toolop` (real process, real sockets) against each official SDK server
//! this repo ships, case by case. TypeScript SDK 1.32.2 and Python `mcp` 1.30.0 speak MCP
//! 2025-11-25 tasks (adapter `mcp-2025-11-25`); rmcp 3.11.0 speaks the tasks extension
//! (adapter `mcp-tasks-ext`). Cases already proven for TS and Python in `live_cli.rs` (a task
//! that completes, fails, `isError`, input through the gate, a cancel that wins, a task deleted at
//! its ttl, kill -9 and resume) run here for rmcp; the cases missing there (a cancel that loses,
//! a stale session after a server restart) run here for all three, and which session sees a task
//! another session created (rmcp: every one; the TS SDK's own store: only its creator). The
//! README's interop table maps each case to its test.
//!
//! Every outcome is checked against the server's own record (its task store's status, its
//! creations per idempotency key), never only against what toolop says about itself.
#![cfg(not(madsim))]

mod common;

use std::time::Duration;

use common::{
    acceptances, call, code, reply_to, rt, run, spawn_call, status, text, wait_status, Peer, Sdk,
    TempLedger,
};
use serde_json::{json, Value};
use toolop::transport::http::{connect_keeping, HttpConfig};
use toolop::transport::{LiveTransport, OutFrame, Transport};

/// The receipt's terminal state equals the server's own status for the node's task, and the
/// server created exactly one task for the node's key (and ran nothing synchronously).
fn matches_server_record(ledger: &TempLedger, peer: &Peer, node: &str) -> serde_json::Value {
    let s = status(ledger, node);
    let key = s["submission_key"].as_str().expect("submission key");
    let task = s["operation_id"].as_str().expect("operation id");
    let record = peer.record();
    assert_eq!(
        record.creations.get(key),
        Some(&1),
        "{node}: one task for its key"
    );
    assert_eq!(record.sync_runs, 0, "{node}: nothing ran without a task");
    let (rkey, server_status, _) = record
        .tasks
        .get(task)
        .unwrap_or_else(|| panic!("{node}: task {task} not in the server's record {record:?}"));
    assert_eq!(
        rkey.as_deref(),
        Some(key),
        "{node}: the task carries the key"
    );
    assert_eq!(
        s["receipt"]["terminal_state"].as_str(),
        Some(server_status.as_str()),
        "{node}: accepted state equals the server's record"
    );
    s
}

/// The error message of a failed outcome's payload.
fn error_message(s: &serde_json::Value) -> String {
    s["payload"]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn payload_text(s: &serde_json::Value) -> String {
    s["payload"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// rmcp: the cases live_cli.rs runs for TS and Python

#[test]
fn rmcp_task_completes() {
    let peer = Peer::start(Sdk::Rmcp, &[]);
    let ledger = TempLedger::new("rmcp-complete");
    let args = r#"{"a":2,"b":3,"delay_ms":300}"#;
    let out = call(&ledger, &peer, "r1", "slow_sum", args, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "r1");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(payload_text(&s), "5");
    // The same node again: the same outcome, nothing new on the server.
    let again = call(&ledger, &peer, "r1", "slow_sum", args, &[]);
    assert_eq!(code(&again), 0, "{}", text(&again));
    matches_server_record(&ledger, &peer, "r1");
}

#[test]
fn rmcp_failed_task_and_is_error_result() {
    let peer = Peer::start(Sdk::Rmcp, &[]);
    let ledger = TempLedger::new("rmcp-fail");
    // `failed` with an inlined JSON-RPC error: accepted failed, the error as payload.
    let out = call(
        &ledger,
        &peer,
        "f1",
        "failing_job",
        r#"{"delay_ms":300}"#,
        &[],
    );
    assert_eq!(code(&out), 1, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "f1");
    assert_eq!(s["receipt"]["terminal_state"], "failed");
    assert!(error_message(&s).contains("deliberate failure"), "{s}");
    // An isError tool result ends `completed` in the extension: a tool error for the caller.
    let out = call(
        &ledger,
        &peer,
        "e1",
        "tool_error",
        r#"{"delay_ms":300}"#,
        &[],
    );
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("tool reported an error"),
        "{}",
        text(&out)
    );
    let s = matches_server_record(&ledger, &peer, "e1");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(s["payload"]["isError"], true);
}

/// rmcp inlines the input request in `tasks/get` (`inputRequests`); the gate's answer goes back
/// in `tasks/update`. Accepted from a file, and declined by default.
#[test]
fn rmcp_input_required_is_answered_through_the_gate() {
    let peer = Peer::start(Sdk::Rmcp, &[]);
    let ledger = TempLedger::new("rmcp-input");
    let answer = ledger.dir().join("answer.json");
    std::fs::write(&answer, r#"{"answer":"Ada"}"#).unwrap();
    let accept = format!("accept-file={}", answer.display());
    let args = r#"{"delay_ms":200}"#;
    let out = call(
        &ledger,
        &peer,
        "i1",
        "needs_input",
        args,
        &["--approve", &accept],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "i1");
    assert_eq!(payload_text(&s), "needs_input: got answer: Ada");
    // Declined by default: the server hears "decline" and ends with a tool error.
    let out = call(&ledger, &peer, "i2", "needs_input", args, &[]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "i2");
    assert!(payload_text(&s).contains("action decline"), "{s}");
}

#[test]
fn rmcp_cancel_wins() {
    let peer = Peer::start(Sdk::Rmcp, &[]);
    let ledger = TempLedger::new("rmcp-cancel");
    let child = spawn_call(&ledger, &peer, "c1", "cancellable", r#"{"seconds":20}"#);
    wait_status(&ledger, "c1", "WORKING", |s| s["local_state"] == "WORKING");
    let out = run(&ledger, &["cancel", "c1"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "c1");
    assert_eq!(s["local_state"], "CANCELLED_ACCEPTED");
    assert_eq!(s["receipt"]["terminal_state"], "cancelled");
}

/// rmcp's task ttl runs out before the tool ends: rmcp itself ends the task `failed` ("task
/// expired") and keeps it one more ttl window. Polled in time, that is the accepted outcome,
/// as the server recorded it. Read only after the window (toolop was down), the task is gone:
/// nothing proves the outcome, so manual reconciliation (exit 3), never a resubmission.
#[test]
fn rmcp_task_at_its_ttl_fails_then_is_deleted() {
    let peer = Peer::start(
        Sdk::Rmcp,
        &["--ttl-ms", "1500", "--poll-interval-ms", "250"],
    );
    let ledger = TempLedger::new("rmcp-ttl");
    let out = call(&ledger, &peer, "t1", "cancellable", r#"{"seconds":5}"#, &[]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "t1");
    assert_eq!(s["receipt"]["terminal_state"], "failed");
    assert!(error_message(&s).contains("task expired"), "{s}");

    let mut child = spawn_call(&ledger, &peer, "t2", "cancellable", r#"{"seconds":5}"#);
    let s = wait_status(&ledger, "t2", "WORKING", |s| s["local_state"] == "WORKING");
    child.kill().unwrap();
    child.wait().unwrap();
    let task = s["operation_id"].as_str().unwrap().to_string();
    // Failed at 1.5 s, evicted one window later: wait for the server's own eviction record.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !peer.record().tasks.get(&task).is_some_and(|t| t.2) {
        assert!(
            std::time::Instant::now() < deadline,
            "rmcp never evicted {task}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = run(&ledger, &["resume"]);
    assert_eq!(code(&out), 3, "{}", text(&out));
    let s = status(&ledger, "t2");
    assert_eq!(s["local_state"], "UNKNOWN");
    assert_eq!(s["receipt"], serde_json::Value::Null);
    assert_eq!(peer.creations(s["submission_key"].as_str().unwrap()), 1);
}

#[test]
fn rmcp_kill_9_mid_poll_then_resume_gives_one_receipt_and_one_task() {
    let peer = Peer::start(Sdk::Rmcp, &[]);
    let ledger = TempLedger::new("rmcp-kill9");
    let mut child = spawn_call(
        &ledger,
        &peer,
        "k1",
        "slow_sum",
        r#"{"a":1,"b":1,"delay_ms":4000}"#,
    );
    wait_status(&ledger, "k1", "WORKING with a poll", |s| {
        s["local_state"] == "WORKING" && s["polls"].as_u64() >= Some(1)
    });
    child.kill().unwrap(); // SIGKILL
    assert!(!child.wait().unwrap().success());
    assert_eq!(status(&ledger, "k1")["receipt"], serde_json::Value::Null);
    let out = run(&ledger, &["resume"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let s = matches_server_record(&ledger, &peer, "k1");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(payload_text(&s), "2");
    assert_eq!(acceptances(&ledger, "k1"), 1, "exactly one receipt");
}

// ---------------------------------------------------------------------------------------------
// Every server: a cancel that loses to completion

/// The task ends before toolop's cancel reaches the server. TS and Python: `quick_job` finishes
/// in 200 ms and asks for 10 s polls, so the cancel (sent ~1 s in) finds it `completed`: the SDK
/// refuses it (-32602, terminal) and toolop accepts `completed`. rmcp: `ignores_cancel` acks the
/// cancel and completes anyway (the extension's cancel is a request, not a verdict).
fn cancel_loses(sdk: Sdk, tool: &str, args: &str, says: &str) {
    let peer = Peer::start(sdk, &[]);
    let ledger = TempLedger::new("cancel-loses");
    let child = spawn_call(&ledger, &peer, "l1", tool, args);
    wait_status(&ledger, "l1", "WORKING", |s| s["local_state"] == "WORKING");
    std::thread::sleep(Duration::from_millis(500));
    let out = run(&ledger, &["cancel", "l1"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{sdk:?}: {}", text(&out));
    let s = matches_server_record(&ledger, &peer, "l1");
    assert_eq!(s["local_state"], "ACCEPTED", "{sdk:?}: {s}");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(s["cancel_generation"], 1, "{sdk:?}: the cancel was sent");
    assert_eq!(payload_text(&s), says);
}

#[test]
fn ts_cancel_loses_to_completion() {
    cancel_loses(Sdk::Ts, "quick_job", "{}", "quick job done");
}

#[test]
fn python_cancel_loses_to_completion() {
    cancel_loses(Sdk::Python, "quick_job", "{}", "quick job done");
}

#[test]
fn rmcp_cancel_loses_to_completion() {
    cancel_loses(
        Sdk::Rmcp,
        "ignores_cancel",
        r#"{"delay_ms":2500}"#,
        "ignores_cancel: done (a cancel was requested and ignored)",
    );
}

// ---------------------------------------------------------------------------------------------
// Every server: a stale session (the server restarted under a running call)

/// The server restarts while toolop polls: the old session answers 404, toolop opens a new
/// one, and the task is gone with the old process (all three SDKs keep tasks in memory). Not
/// found after a restart proves nothing about the outcome: manual reconciliation (exit 3),
/// never a second task for the key, never "cancelled".
fn stale_session_after_a_restart(sdk: Sdk, tool: &str, args: &str) {
    let peer = Peer::start(sdk, &[]);
    let ledger = TempLedger::new("stale");
    let child = spawn_call(&ledger, &peer, "s1", tool, args);
    let s = wait_status(&ledger, "s1", "WORKING with a poll", |s| {
        s["local_state"] == "WORKING" && s["polls"].as_u64() >= Some(1)
    });
    let key = s["submission_key"].as_str().unwrap().to_string();
    let peer = peer.restart();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 3, "{sdk:?}: {}", text(&out));
    let s = status(&ledger, "s1");
    assert_eq!(s["local_state"], "UNKNOWN", "{sdk:?}: {s}");
    assert_eq!(s["receipt"], serde_json::Value::Null);
    let reason = s["unknown_reason"].as_str().unwrap_or_default().to_string();
    assert!(
        !reason.contains("Some(") && !reason.contains("None"),
        "{sdk:?}: words, not Debug text: {reason}"
    );
    let record = peer.record();
    match sdk {
        // The events file spans both incarnations: the one creation is the first process's.
        Sdk::Rmcp => assert_eq!(record.creations.get(&key), Some(&1)),
        _ => {
            assert_eq!(
                record.creations.get(&key),
                None,
                "{sdk:?}: nothing created after the restart"
            );
            assert_eq!(peer.stats()["tasks_created"], 0);
        }
    }
    if sdk == Sdk::Ts {
        assert!(
            peer.stats()["sessions_created"].as_u64() >= Some(1),
            "a new session on the restarted server"
        );
    }
}

#[test]
fn ts_stale_session_after_a_restart_goes_to_reconciliation() {
    stale_session_after_a_restart(Sdk::Ts, "slow_job", r#"{"ms":20000}"#);
}

#[test]
fn python_stale_session_after_a_restart_goes_to_reconciliation() {
    stale_session_after_a_restart(Sdk::Python, "slow_job", r#"{"ms":20000}"#);
}

#[test]
fn rmcp_stale_session_after_a_restart_goes_to_reconciliation() {
    stale_session_after_a_restart(Sdk::Rmcp, "slow_sum", r#"{"a":1,"b":1,"delay_ms":20000}"#);
}

// ---------------------------------------------------------------------------------------------
// Which session sees a task
//
// `toolop resume` goes on with the session it kept because the official TS and Python SDKs show
// a task only to the session that created it, and the simulator's fakes model them that way. rmcp
// binds nothing to sessions. These pin both behaviours on the real servers, so a new SDK
// release that changes either shows up here rather than as tasks lost after a resume.

/// One MCP session on `peer`, opened through toolop's own Streamable HTTP transport (the
/// client the runner uses), and the `Mcp-Session-Id` the server gave it.
async fn open_session(peer: &Peer, capabilities: Value) -> (LiveTransport, String) {
    let (mut t, kept) = connect_keeping(
        HttpConfig {
            url: peer.url(),
            get_stream: false,
            request_timeout_ms: 10_000,
            ..HttpConfig::default()
        },
        None,
    )
    .unwrap();
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}});
    rpc(&mut t, 1, "initialize", params).await;
    t.send(OutFrame {
        request_id: None,
        body: br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
        http: None,
    })
    .unwrap();
    // The transport keeps the session before it delivers the initialize answer.
    let session = kept
        .lock()
        .unwrap()
        .as_ref()
        .map(|k| k.session_id.clone())
        .expect("the server handed out a session id");
    (t, session)
}

/// Send one request and return the JSON-RPC response to it (skipping any notification the
/// server streams first on the same POST).
async fn rpc(t: &mut LiveTransport, id: u64, method: &str, params: Value) -> Value {
    t.send(OutFrame {
        request_id: Some(id),
        body: json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            .to_string()
            .into_bytes(),
        http: None,
    })
    .unwrap();
    loop {
        let f = reply_to(t, id, 10_000)
            .await
            .unwrap_or_else(|| panic!("{method} went unanswered"));
        let body = String::from_utf8_lossy(&f.body).to_string();
        assert_eq!(f.http_status, 200, "{method}: {body}");
        let v: Value = serde_json::from_str(&body).expect("a JSON-RPC message");
        if v.get("method").is_none() {
            return v;
        }
    }
}

/// What session B hears when it asks for a task session A created.
enum SeenFromB {
    /// The task, with its status.
    Shown,
    /// A JSON-RPC error: no such task for this session.
    Hidden,
}

/// Sessions A and B on `peer`; A creates a long task with `call` (task-augmented); B asks for it
/// with `tasks/get`, and for an id nobody created. `task_of` reads the task id from the
/// creation answer (the two task dialects put it in different places).
fn a_task_seen_from_another_session(
    peer: &Peer,
    capabilities: Value,
    call: Value,
    task_of: fn(&Value) -> Option<&str>,
    expect: SeenFromB,
) {
    let sdk = peer.sdk;
    rt().block_on(async {
        let (mut a, session_a) = open_session(peer, capabilities.clone()).await;
        let (mut b, session_b) = open_session(peer, capabilities).await;
        assert_ne!(session_a, session_b, "{sdk:?}: two sessions");

        let created = rpc(&mut a, 2, "tools/call", call).await;
        let task = task_of(&created)
            .unwrap_or_else(|| panic!("{sdk:?}: no task created: {created}"))
            .to_string();
        // A sees its own task: what B hears below is about B's session, not about the task.
        let own = rpc(&mut a, 3, "tasks/get", json!({"taskId": task})).await;
        assert_eq!(own["result"]["taskId"], task.as_str(), "{sdk:?}: {own}");

        let from_b = rpc(&mut b, 2, "tasks/get", json!({"taskId": task})).await;
        match expect {
            SeenFromB::Shown => {
                assert_eq!(
                    from_b["result"]["taskId"],
                    task.as_str(),
                    "{sdk:?}: {from_b}"
                );
                let status = from_b["result"]["status"].as_str().unwrap_or_default();
                assert!(
                    ["working", "completed"].contains(&status),
                    "{sdk:?}: the task from session B: {from_b}"
                );
            }
            SeenFromB::Hidden => {
                assert_eq!(
                    from_b["error"]["code"], -32602,
                    "{sdk:?}: session B was shown another session's task: {from_b}"
                );
            }
        }
        // An id nobody created is refused to B either way: "shown" above is not "B is
        // answered whatever it asks".
        let unknown = rpc(&mut b, 3, "tasks/get", json!({"taskId": "no-such-task"})).await;
        assert_eq!(unknown["error"]["code"], -32602, "{sdk:?}: {unknown}");
        assert!(unknown.get("result").is_none(), "{sdk:?}: {unknown}");
    });
}

/// rmcp keeps one task store per process and binds nothing to sessions (its README, item 3).
#[test]
fn rmcp_shows_a_task_to_every_session() {
    let peer = Peer::start(Sdk::Rmcp, &[]);
    a_task_seen_from_another_session(
        &peer,
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        // A task because the extension was declared at initialize; 5 s: still working when read.
        json!({"name": "slow_sum", "arguments": {"a": 1, "b": 2, "delay_ms": 5000}}),
        |v| v["result"]["taskId"].as_str(),
        SeenFromB::Shown,
    );
}

/// The TS and Python SDKs' own task stores (`--session-scoped`: the peers' default shares one
/// store across sessions, as a deployment with a shared store would) show a task only to the
/// session that created it (shared/spec/transcripts, 11-cross-session; Python's task ids carry
/// the creating session's scope). The simulator's `ts-sdk` and `python-sdk` profiles bind tasks
/// to their session for this.
fn own_store_hides_a_task_from_another_session(sdk: Sdk) {
    let peer = Peer::start(sdk, &["--session-scoped"]);
    a_task_seen_from_another_session(
        &peer,
        json!({}),
        json!({"name": "slow_job", "arguments": {"ms": 5000}, "task": {"ttl": 60000}}),
        |v| v["result"]["task"]["taskId"].as_str(),
        SeenFromB::Hidden,
    );
}

#[test]
fn ts_hides_a_task_from_another_session() {
    own_store_hides_a_task_from_another_session(Sdk::Ts);
}

#[test]
fn python_hides_a_task_from_another_session() {
    own_store_hides_a_task_from_another_session(Sdk::Python);
}
