//! `toolop` end to end against the official SDK servers (TypeScript 1.32.x, Python 1.30.x),
//! real processes and real sockets on 127.0.0.1: outcomes and exit codes, status output, a
//! cancel from a second process, and kill -9 in the middle of polling followed by `resume`.
#![cfg(not(madsim))]

mod common;

use std::time::{Duration, Instant};

use common::{
    acceptances, call, code, run, spawn_call, status, text, wait_status, Peer, Sdk, TempLedger,
};

fn completes_with_exit_0(sdk: Sdk, flags: &[&str]) {
    let peer = Peer::start(sdk, flags);
    let ledger = TempLedger::new("complete");
    let out = call(
        &ledger,
        &peer,
        "n1",
        "build_report",
        r#"{"month":"2026-11"}"#,
        &[],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("report for 2026-11"),
        "{}",
        text(&out)
    );
    let s = status(&ledger, "n1");
    assert_eq!(s["local_state"], "ACCEPTED");
    assert_eq!(s["protocol_status"], "completed");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(s["payload"]["content"][0]["text"], "report for 2026-11");
    let key = s["submission_key"].as_str().unwrap();
    assert_eq!(peer.creations(key), 1, "exactly one task for the key");
    assert_eq!(acceptances(&ledger, "n1"), 1);
    // Calling the same node again returns the same outcome and creates nothing.
    let again = call(
        &ledger,
        &peer,
        "n1",
        "build_report",
        r#"{"month":"2026-11"}"#,
        &[],
    );
    assert_eq!(code(&again), 0, "{}", text(&again));
    assert_eq!(peer.creations(key), 1);
    assert_eq!(acceptances(&ledger, "n1"), 1);
}

#[test]
fn ts_sse_call_completes_with_exit_0() {
    completes_with_exit_0(Sdk::Ts, &[]);
}

#[test]
fn ts_json_response_call_completes_with_exit_0() {
    completes_with_exit_0(Sdk::Ts, &["--json-response"]);
}

#[test]
fn python_call_completes_with_exit_0() {
    completes_with_exit_0(Sdk::Python, &[]);
}

#[test]
fn python_json_response_call_completes_with_exit_0() {
    completes_with_exit_0(Sdk::Python, &["--json-response"]);
}

#[test]
fn failures_exit_1_and_say_so() {
    let ts = Peer::start(Sdk::Ts, &[]);
    let py = Peer::start(Sdk::Python, &[]);
    let ledger = TempLedger::new("fail");
    // TS app stores `failed` with an isError result.
    let out = call(&ledger, &ts, "ts-fail", "failing_job", "{}", &[]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert_eq!(
        status(&ledger, "ts-fail")["receipt"]["terminal_state"],
        "failed"
    );
    // isError results: `completed` on the wire, a tool error for the caller (both SDKs).
    for (peer, node) in [(&ts, "ts-err"), (&py, "py-err")] {
        let out = call(&ledger, peer, node, "tool_error", "{}", &[]);
        assert_eq!(code(&out), 1, "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("tool reported an error"),
            "{}",
            text(&out)
        );
        assert_eq!(
            status(&ledger, node)["receipt"]["terminal_state"],
            "completed"
        );
    }
    // Python: a raised exception ends the task `failed`, and tasks/result then answers a result
    // holding only `_meta` (as for a cancelled task). The status read is the evidence: accepted
    // failed at the first fetch, not re-fetched until the attempts run out and handed over.
    let out = call(
        &ledger,
        &py,
        "py-fail",
        "failing_job",
        "{}",
        &["--wait-budget-ms", "20000"],
    );
    assert_eq!(code(&out), 1, "{}", text(&out));
    let s = status(&ledger, "py-fail");
    assert_eq!(s["local_state"], "ACCEPTED", "{s}");
    assert_eq!(s["protocol_status"], "failed");
    assert_eq!(s["receipt"]["terminal_state"], "failed");
    // The exception's text reached the executor only as `statusMessage`: it is the error
    // downstream reads.
    assert_eq!(
        s["payload"],
        serde_json::json!({"error": {"message": "the job failed"}}),
        "{s}"
    );
    assert_eq!(py.creations(s["submission_key"].as_str().unwrap()), 1);
    // A tool that forbids tasks is refused locally: rejected, exit 1, nothing created.
    let out = call(&ledger, &ts, "ts-echo", "echo", r#"{"text":"x"}"#, &[]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert_eq!(status(&ledger, "ts-echo")["local_state"], "REJECTED");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("refused before sending: tool has no task support"),
        "{}",
        text(&out)
    );
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let ledger = TempLedger::new("usage");
    for (args, says) in [
        (
            vec!["call", "--server", "ftp://x", "--tool", "t"],
            "expected http://",
        ),
        (
            vec![
                "call",
                "--server",
                "http://127.0.0.1:9/mcp",
                "--tool",
                "t",
                "--args",
                "[1]",
            ],
            "JSON object",
        ),
        (
            vec![
                "call",
                "--server",
                "http://127.0.0.1:9/mcp",
                "--tool",
                "t",
                "--args",
                "{",
            ],
            "not JSON",
        ),
        (
            vec![
                "call",
                "--server",
                "http://127.0.0.1:9/mcp",
                "--tool",
                "t",
                "--approve",
                "maybe",
            ],
            "--approve",
        ),
        (vec!["status", "nope"], "no call node nope"),
        (vec!["cancel", "nope"], "no call node nope"),
        (
            vec!["reconcile", "show", "nope"],
            "not in manual reconciliation",
        ),
    ] {
        let out = run(&ledger, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !err.contains("Some(") && !err.contains("{ "),
            "Debug text in {err}"
        );
    }
}

#[test]
fn python_over_stdio_completes() {
    let ledger = TempLedger::new("stdio");
    let server = format!(
        "stdio:{} {} --stdio",
        common::python().display(),
        common::root()
            .join("tests/peers/python/server.py")
            .display()
    );
    let out = run(
        &ledger,
        &[
            "call",
            "--server",
            &server,
            "--tool",
            "build_report",
            "--args",
            r#"{"month":"2026-12"}"#,
            "--node",
            "s1",
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(
        status(&ledger, "s1")["payload"]["content"][0]["text"],
        "report for 2026-12"
    );
}

fn cancel_from_a_second_process(sdk: Sdk) {
    let peer = Peer::start(sdk, &[]);
    let ledger = TempLedger::new("cancel");
    let child = spawn_call(&ledger, &peer, "c1", "slow_job", r#"{"ms":20000}"#);
    wait_status(&ledger, "c1", "WORKING", |s| s["local_state"] == "WORKING");
    let out = run(&ledger, &["cancel", "c1"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    let s = status(&ledger, "c1");
    assert_eq!(s["local_state"], "CANCELLED_ACCEPTED");
    assert_eq!(s["receipt"]["terminal_state"], "cancelled");
    assert_eq!(s["cancel_generation"], 1);
    assert_eq!(peer.creations(s["submission_key"].as_str().unwrap()), 1);
}

#[test]
fn ts_cancel_from_a_second_process_wins() {
    cancel_from_a_second_process(Sdk::Ts);
}

#[test]
fn python_cancel_from_a_second_process_wins() {
    cancel_from_a_second_process(Sdk::Python);
}

/// kill -9 of `toolop call` while it polls, then `toolop resume` with no flags: one receipt,
/// one task on the server for the key.
fn kill_9_mid_poll_then_resume(sdk: Sdk, flags: &[&str]) {
    let peer = Peer::start(sdk, flags);
    let ledger = TempLedger::new("kill9");
    let mut child = spawn_call(&ledger, &peer, "k1", "slow_job", r#"{"ms":4000}"#);
    let s = wait_status(&ledger, "k1", "WORKING with a poll", |s| {
        s["local_state"] == "WORKING" && s["polls"].as_u64() >= Some(1)
    });
    let key = s["submission_key"].as_str().unwrap().to_string();
    child.kill().unwrap(); // SIGKILL
    let killed = child.wait().unwrap();
    assert!(!killed.success());
    assert_eq!(
        status(&ledger, "k1")["receipt"],
        serde_json::Value::Null,
        "killed before the outcome"
    );
    let started = Instant::now();
    let out = run(&ledger, &["resume"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(started.elapsed() < Duration::from_secs(30));
    let s = status(&ledger, "k1");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(acceptances(&ledger, "k1"), 1, "exactly one receipt");
    assert_eq!(peer.creations(&key), 1, "exactly one task for the key");
    assert_eq!(peer.stats()["tasks_created"], 1);
    if sdk == Sdk::Ts {
        assert_eq!(
            peer.stats()["sessions_created"],
            1,
            "resume continued on the kept session"
        );
    }
    // Nothing left: a second resume has nothing to do and exits 0.
    let out = run(&ledger, &["resume"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to resume"),
        "{}",
        text(&out)
    );
}

#[test]
fn ts_kill_9_mid_poll_then_resume_gives_one_receipt_and_one_task() {
    kill_9_mid_poll_then_resume(Sdk::Ts, &[]);
}

#[test]
fn python_kill_9_mid_poll_then_resume_gives_one_receipt_and_one_task() {
    kill_9_mid_poll_then_resume(Sdk::Python, &[]);
}

/// With the SDKs' default task stores a task is visible only to the session that created it:
/// `resume` continues on the kept session instead of opening a new one.
#[test]
fn ts_session_scoped_tasks_survive_kill_9_on_the_kept_session() {
    kill_9_mid_poll_then_resume(Sdk::Ts, &["--session-scoped"]);
}

#[test]
fn python_session_scoped_tasks_survive_kill_9_on_the_kept_session() {
    kill_9_mid_poll_then_resume(Sdk::Python, &["--session-scoped"]);
}

/// `resume` after the server restarted while no process ran: the kept session is gone. The
/// first request on it meets 404, the handshake waits for the transport's new session, and the
/// task (lost with the server) goes to a person. Before session 44 the handshake failed at that
/// 404, and every restart began again on the same kept session until `resume` gave up with the
/// node still WORKING ("cannot negotiate ...: tools/list: HTTP 404"); the simulator found it
/// once processes kept sessions (`mcp_ext_faults` seed 335).
#[test]
fn ts_resume_after_a_server_restart_leaves_the_forgotten_kept_session() {
    let peer = Peer::start(Sdk::Ts, &[]);
    let ledger = TempLedger::new("restart");
    let mut child = spawn_call(&ledger, &peer, "r1", "slow_job", r#"{"ms":20000}"#);
    wait_status(&ledger, "r1", "WORKING with a poll", |s| {
        s["local_state"] == "WORKING" && s["polls"].as_u64() >= Some(1)
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let peer = peer.restart();
    let out = run(&ledger, &["resume"]);
    let s = status(&ledger, "r1");
    assert_eq!(s["local_state"], "UNKNOWN", "{s}; {}", text(&out));
    assert!(
        !text(&out).contains("cannot negotiate"),
        "the handshake got through: {}",
        text(&out)
    );
    assert!(
        peer.stats()["sessions_created"].as_u64() >= Some(1),
        "a new session on the restarted server"
    );
}

#[test]
fn input_required_is_answered_through_the_gate() {
    let ts = Peer::start(Sdk::Ts, &[]);
    let py = Peer::start(Sdk::Python, &[]);
    let ledger = TempLedger::new("input");
    let answer = ledger.dir().join("answer.json");
    std::fs::write(&answer, r#"{"answer":"Ada"}"#).unwrap();
    let accept = format!("accept-file={}", answer.display());
    for (peer, node) in [(&ts, "ts-in"), (&py, "py-in")] {
        let out = call(
            &ledger,
            peer,
            node,
            "needs_input",
            r#"{"question":"name?"}"#,
            &["--approve", &accept],
        );
        assert_eq!(code(&out), 0, "{}", text(&out));
        let text = status(&ledger, node)["payload"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            text.contains("Ada") && text.contains("accept"),
            "{node}: {text}"
        );
    }
    // Declined by default: the server hears "decline", never silence.
    let out = call(
        &ledger,
        &ts,
        "ts-decline",
        "needs_input",
        r#"{"question":"name?"}"#,
        &[],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        status(&ledger, "ts-decline")["payload"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("action=decline")
    );
}

/// A task the server deletes at its ttl while it still runs (both SDKs do this) cannot be
/// proved: exit 3, the manual reconciliation queue, and an operator's resolution.
#[test]
fn a_task_deleted_at_its_ttl_goes_to_manual_reconciliation_and_is_resolved() {
    let ts = Peer::start(Sdk::Ts, &[]);
    let py = Peer::start(Sdk::Python, &[]);
    let ledger = TempLedger::new("ttl");
    for (peer, node) in [(&ts, "ttl-ts"), (&py, "ttl-py")] {
        let out = call(&ledger, peer, node, "short_ttl", "{}", &[]);
        assert_eq!(code(&out), 3, "{}", text(&out));
        assert_eq!(status(&ledger, node)["local_state"], "UNKNOWN");
    }
    let list = run(&ledger, &["--json", "reconcile", "list"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let queued: Vec<&str> = v["reconciliation_queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["call_node_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        queued,
        ["ttl-ts", "ttl-py"],
        "in the order they were handed over"
    );
    let bad = run(
        &ledger,
        &["reconcile", "resolve", "ttl-ts", "--outcome", "maybe"],
    );
    assert_eq!(code(&bad), 2, "{}", text(&bad));
    let ok = run(
        &ledger,
        &[
            "reconcile",
            "resolve",
            "ttl-ts",
            "--outcome",
            "never-ran",
            "--note",
            "checked the server log",
        ],
    );
    assert_eq!(code(&ok), 0, "{}", text(&ok));
    let show = run(&ledger, &["--json", "reconcile", "show", "ttl-ts"]);
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(v["resolution"]["outcome"], "never-ran");
    assert_eq!(v["server"], ts.url());
    let list = run(&ledger, &["--json", "reconcile", "list"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        v["reconciliation_queue"].as_array().unwrap().len(),
        1,
        "only the unresolved item is listed"
    );
}

/// `--batch`: many call nodes on one executor, one task per key, the worst outcome as exit code.
#[test]
fn a_batch_runs_every_call_once_on_one_executor() {
    for sdk in [Sdk::Ts, Sdk::Python] {
        let peer = Peer::start(sdk, &[]);
        let ledger = TempLedger::new("batch");
        let file = ledger.dir().join("calls.jsonl");
        let mut lines = String::from("# twenty reports\n");
        for i in 0..20 {
            lines.push_str(&format!("{{\"node\": \"b{i:02}\", \"tool\": \"build_report\", \"args\": {{\"month\": \"m{i}\", \"ms\": 50}}}}\n"));
        }
        std::fs::write(&file, &lines).unwrap();
        let out = run(
            &ledger,
            &[
                "--json",
                "call",
                "--server",
                &peer.url(),
                "--batch",
                file.to_str().unwrap(),
            ],
        );
        assert_eq!(code(&out), 0, "{sdk:?}: {}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let nodes = v["call_nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 20);
        for n in nodes {
            assert_eq!(n["receipt"]["terminal_state"], "completed", "{n}");
            let node = n["call_node"].as_str().unwrap();
            assert_eq!(acceptances(&ledger, node), 1);
        }
        assert_eq!(
            peer.stats()["tasks_created"],
            20,
            "{sdk:?}: one task per call node"
        );
        assert!(peer.stats()["creations"]
            .as_object()
            .unwrap()
            .values()
            .all(|c| c == 1));
        // A failing line makes the batch exit 1; a malformed file is refused naming its line.
        std::fs::write(&file, "{\"tool\": \"tool_error\"}\n").unwrap();
        assert_eq!(
            code(&run(
                &ledger,
                &[
                    "call",
                    "--server",
                    &peer.url(),
                    "--batch",
                    file.to_str().unwrap()
                ]
            )),
            1
        );
        std::fs::write(&file, "{\"tool\": \"build_report\"}\n{\"tool\": 3}\n").unwrap();
        let out = run(
            &ledger,
            &[
                "call",
                "--server",
                &peer.url(),
                "--batch",
                file.to_str().unwrap(),
            ],
        );
        assert_eq!(code(&out), 2, "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("line 2"),
            "{}",
            text(&out)
        );
    }
}
