//! What the transcript does not cover: the server's own record (creations per idempotency key,
//! statuses, evictions), `--dedupe-by-key`, and the events file across restarts. Over stdio.

mod common;

use std::time::Duration;

use common::{poll_until, read_events, tasks_caps, temp_path, StdioPeer, WAIT};
use serde_json::{json, Value};

fn call(tool: &str, arguments: Value, key: Option<&str>) -> Value {
    let mut params = json!({ "name": tool, "arguments": arguments });
    if let Some(key) = key {
        params["_meta"] = json!({ "io.toolop/idempotency-key": key });
    }
    params
}

/// Calls `tool` and returns the id of the task the call created.
async fn start(peer: &mut StdioPeer, tool: &str, arguments: Value, key: Option<&str>) -> String {
    task_id(&peer.request("tools/call", call(tool, arguments, key)).await)
}

fn task_id(reply: &Value) -> String {
    assert_eq!(
        reply["result"]["resultType"], "task",
        "expected a CreateTaskResult, got {reply}"
    );
    reply["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string()
}

async fn stats(peer: &mut StdioPeer) -> Value {
    let reply = peer
        .request("tools/call", call("stats", json!({}), None))
        .await;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .expect("stats text");
    let from_text: Value = serde_json::from_str(text).expect("stats text is JSON");
    assert_eq!(
        from_text, reply["result"]["structuredContent"],
        "text and structured content agree"
    );
    from_text
}

/// Waits (bounded) until the events file has a line for which `wanted` holds.
async fn wait_for_event(
    path: &std::path::Path,
    what: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let events = read_events(path);
        if events.iter().any(&wanted) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} event within {WAIT:?}: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn creations_are_counted_per_idempotency_key() {
    let events = temp_path("count.jsonl");
    let mut peer = StdioPeer::start(&["--events-file", events.to_str().unwrap()]).await;
    peer.initialize(tasks_caps()).await;

    let first = start(
        &mut peer,
        "slow_sum",
        json!({"a": 1, "b": 2, "delay_ms": 50}),
        Some("k1"),
    )
    .await;
    let second = start(
        &mut peer,
        "slow_sum",
        json!({"a": 1, "b": 2, "delay_ms": 50}),
        Some("k1"),
    )
    .await;
    assert_ne!(
        first, second,
        "without --dedupe-by-key a repeated key makes a second task"
    );
    start(&mut peer, "tool_error", json!({"delay_ms": 50}), Some("k2")).await;
    start(&mut peer, "tool_error", json!({"delay_ms": 50}), None).await;
    // A per-request declaration without the extension makes the call synchronous: counted apart.
    let mut sync = call(
        "slow_sum",
        json!({"a": 20, "b": 22, "delay_ms": 10}),
        Some("k3"),
    );
    sync["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let sync_reply = peer.request("tools/call", sync).await;
    assert_eq!(
        sync_reply["result"]["content"][0]["text"], "42",
        "{sync_reply}"
    );
    // Bad arguments are refused before any task exists.
    let refused = peer
        .request(
            "tools/call",
            call("slow_sum", json!({"a": "x"}), Some("k4")),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    poll_until(&mut peer, &second, &["completed"]).await;
    let s = stats(&mut peer).await;
    assert_eq!(s["tasksCreatedByKey"], json!({"k1": 2, "k2": 1}));
    assert_eq!(s["tasksCreatedWithoutKey"], 1);
    assert_eq!(s["syncRunsByKey"], json!({"k3": 1}));
    assert_eq!(s["tasks"][&second]["status"], "completed");
    assert_eq!(s["tasks"][&second]["key"], "k1");

    let lines = read_events(&events);
    let created: Vec<_> = lines.iter().filter(|e| e["event"] == "created").collect();
    assert_eq!(created.len(), 4, "{lines:?}");
    assert_eq!(created.iter().filter(|e| e["key"] == "k1").count(), 2);
    let seqs: Vec<u64> = lines.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seq counts up by one: {seqs:?}"
    );
    assert!(peer.close().await.success());
}

#[tokio::test]
async fn dedupe_by_key_returns_the_task_the_key_created() {
    let mut peer = StdioPeer::start(&["--dedupe-by-key", "--ttl-ms", "60000"]).await;
    let init = peer.initialize(tasks_caps()).await;
    assert_eq!(
        init["result"]["capabilities"]["experimental"]["io.toolop/idempotency"],
        json!({"retentionMs": 60000}),
        "{init}"
    );
    let args = json!({"a": 1, "b": 1, "delay_ms": 100});
    let first = start(&mut peer, "slow_sum", args.clone(), Some("k1")).await;
    let again = start(&mut peer, "slow_sum", args.clone(), Some("k1")).await;
    assert_eq!(first, again);
    poll_until(&mut peer, &first, &["completed"]).await;
    // Still retained: a completed task's key still answers with it.
    let late = start(&mut peer, "slow_sum", args.clone(), Some("k1")).await;
    assert_eq!(first, late);
    let other = start(&mut peer, "slow_sum", args, Some("k2")).await;
    assert_ne!(first, other);
    let s = stats(&mut peer).await;
    assert_eq!(s["tasksCreatedByKey"], json!({"k1": 1, "k2": 1}));
    assert_eq!(s["dedupeHitsByKey"], json!({"k1": 2}));
}

#[tokio::test]
async fn ttl_expiry_and_eviction_reach_the_record_without_any_poll() {
    let events = temp_path("ttl.jsonl");
    let mut peer =
        StdioPeer::start(&["--ttl-ms", "400", "--events-file", events.to_str().unwrap()]).await;
    peer.initialize(tasks_caps()).await;
    let quick = start(
        &mut peer,
        "slow_sum",
        json!({"a": 1, "b": 1, "delay_ms": 50}),
        None,
    )
    .await;
    let long = start(&mut peer, "cancellable", json!({"seconds": 5}), None).await;
    // No tasks/get from here on: the watcher alone must see these.
    let lines = wait_for_event(&events, "eviction of the long task", |e| {
        e["event"] == "evicted" && e["task_id"] == long
    })
    .await;
    let statuses = |id: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|e| e["task_id"] == id && e["event"] == "status")
            .map(|e| e["status"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(statuses(&quick), ["completed"]);
    assert_eq!(
        statuses(&long),
        ["failed"],
        "a task still working at its ttl ends failed"
    );
    assert!(lines.iter().any(|e| e["event"] == "evicted"
        && e["task_id"] == quick
        && e["last_status"] == "completed"));
    let gone = peer.request("tasks/get", json!({ "taskId": long })).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let s = stats(&mut peer).await;
    assert_eq!(s["tasks"][&long]["evicted"], true);
    assert_eq!(s["tasks"][&long]["status"], "failed");
}

#[tokio::test]
async fn the_events_file_spans_restarts() {
    let events = temp_path("restart.jsonl");
    let mut pids = Vec::new();
    for key in ["before", "after"] {
        let mut peer = StdioPeer::start(&["--events-file", events.to_str().unwrap()]).await;
        peer.initialize(tasks_caps()).await;
        start(
            &mut peer,
            "slow_sum",
            json!({"a": 1, "b": 1, "delay_ms": 10}),
            Some(key),
        )
        .await;
        let s = stats(&mut peer).await;
        assert_eq!(
            s["tasksCreatedByKey"],
            json!({ key: 1 }),
            "stats are per process"
        );
        pids.push(s["pid"].clone());
        assert!(peer.close().await.success());
    }
    let lines = read_events(&events);
    let created: Vec<(Value, Value)> = lines
        .iter()
        .filter(|e| e["event"] == "created")
        .map(|e| (e["pid"].clone(), e["key"].clone()))
        .collect();
    assert_eq!(
        created,
        [
            (pids[0].clone(), json!("before")),
            (pids[1].clone(), json!("after"))
        ]
    );
}

#[tokio::test]
async fn an_input_request_is_answered_with_tasks_update() {
    let mut peer = StdioPeer::start(&[]).await;
    peer.initialize(tasks_caps()).await;
    let id = start(
        &mut peer,
        "needs_input",
        json!({"delay_ms": 10}),
        Some("in"),
    )
    .await;
    let waiting = poll_until(&mut peer, &id, &["input_required"]).await;
    let ask = &waiting["result"]["inputRequests"]["answer-1"];
    assert_eq!(ask["method"], "elicitation/create", "{waiting}");
    assert_eq!(
        ask["params"]["requestedSchema"]["required"],
        json!(["answer"])
    );
    let update = json!({"taskId": id, "inputResponses": {"answer-1": {"action": "accept", "content": {"answer": "yes"}}}});
    let ack = peer.request("tasks/update", update).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = poll_until(&mut peer, &id, &["completed"]).await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "needs_input: got answer: yes"
    );

    // A decline is reported in the tool result, not guessed into an answer.
    let id = start(&mut peer, "needs_input", json!({"delay_ms": 10}), None).await;
    poll_until(&mut peer, &id, &["input_required"]).await;
    let update = json!({"taskId": id, "inputResponses": {"answer-1": {"action": "decline"}}});
    peer.request("tasks/update", update).await;
    let done = poll_until(&mut peer, &id, &["completed"]).await;
    assert_eq!(done["result"]["result"]["isError"], true, "{done}");
}

#[tokio::test]
async fn a_cancel_races_completion_both_ways() {
    let mut peer = StdioPeer::start(&[]).await;
    peer.initialize(tasks_caps()).await;
    // slow_sum honours the cancel at once: the cancel wins.
    let id = start(
        &mut peer,
        "slow_sum",
        json!({"a": 1, "b": 1, "delay_ms": 5000}),
        None,
    )
    .await;
    let ack = peer.request("tasks/cancel", json!({ "taskId": id })).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    poll_until(&mut peer, &id, &["cancelled"]).await;
    // ignores_cancel: the ack comes, then the task completes anyway (the cancel loses).
    let id = start(&mut peer, "ignores_cancel", json!({"delay_ms": 200}), None).await;
    peer.request("tasks/cancel", json!({ "taskId": id })).await;
    let done = poll_until(&mut peer, &id, &["completed", "cancelled", "failed"]).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    // A cancel of a finished task is still acked (rmcp), and changes nothing.
    let ack = peer.request("tasks/cancel", json!({ "taskId": id })).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    let after = peer.request("tasks/get", json!({ "taskId": id })).await;
    assert_eq!(after["result"]["status"], "completed");
}

/// What toolop's extension adapter sends first: rmcp answers it with the legacy version, and
/// the extension works in that session all the same.
#[tokio::test]
async fn an_initialize_for_2026_07_28_is_answered_2025_11_25() {
    let mut peer = StdioPeer::start(&[]).await;
    let params = json!({
        "protocolVersion": "2026-07-28",
        "capabilities": { "elicitation": { "form": {} }, "extensions": { "io.modelcontextprotocol/tasks": {} } },
        "clientInfo": { "name": "toolop", "version": "0" },
    });
    let init = peer.request("initialize", params).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(
        init["result"]["capabilities"]["extensions"],
        tasks_caps()["extensions"]
    );
    peer.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    // The adapter's own shapes (src/protocol/mcp_tasks_ext.rs): 2026-07-28 per-request _meta
    // on every request, the idempotency key beside it.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": tasks_caps(),
    });
    let mut call_meta = meta.clone();
    call_meta["io.toolop/idempotency-key"] = json!("adapter-key");
    let params = json!({"name": "slow_sum", "arguments": {"a": 1, "b": 1, "delay_ms": 10}, "_meta": call_meta});
    let id = task_id(&peer.request("tools/call", params).await);
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let poll = peer
            .request("tasks/get", json!({"taskId": id, "_meta": meta}))
            .await;
        assert_eq!(poll["result"]["resultType"], "complete", "{poll}");
        if poll["result"]["status"] == "completed" {
            assert_eq!(poll["result"]["result"]["content"][0]["text"], "2");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{poll}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        stats(&mut peer).await["tasksCreatedByKey"],
        json!({"adapter-key": 1})
    );
}
