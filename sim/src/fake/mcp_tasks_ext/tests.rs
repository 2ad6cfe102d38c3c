//! Behaviour of the fake extension server: one test per behaviour, determinism, and a round trip
//! with the production adapter. Assertions are on parsed JSON.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use toolop::protocol::mcp_tasks_ext::McpTasksExtAdapter;
use toolop::protocol::{Adapter, ApprovalReply, Outbound, Reply, RequestKind, TaskSupport};
use toolop::record::ProtocolStatus;
use toolop::transport::OutFrame;

use super::*;
use crate::fake::codec::Stop;
use crate::fake::jsonrpc::{
    EXT_IDEMPOTENCY, META_IDEMPOTENCY_KEY, META_RESULT_DIGEST, META_SYNC_UPPER_BOUND_MS,
};
use crate::fake::truth::{payload_digest, AnswerAction, SyncRunKind, TaskStatus, WorkEnd};
use crate::fake::FakeServer;

const EXT: &str = "io.modelcontextprotocol/tasks";

fn tools() -> Vec<FakeTool> {
    vec![
        FakeTool::new("auto", None),
        FakeTool::new("opt", Some(TaskSupport::Optional)),
        FakeTool::new("req", Some(TaskSupport::Required)),
        FakeTool {
            name: "forb".into(),
            task_support: Some(TaskSupport::Forbidden),
            sync_upper_bound_ms: Some(250),
        },
    ]
}

fn script(node: &str, duration_ms: u64, outcome: ScriptOutcome) -> TaskScript {
    TaskScript::for_test(node, duration_ms, outcome)
}

fn cfg() -> ExtConfig {
    ExtConfig {
        cancel_delay_ms: (300, 300),
        ..ExtConfig::new(tools())
    }
}

/// `_meta` declaring the extension (or not), with an optional idempotency key.
fn meta(tasks: bool, key: Option<&str>) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": if tasks { json!({"extensions": {EXT: {}}}) } else { json!({}) },
    });
    if let Some(k) = key {
        m[META_IDEMPOTENCY_KEY] = json!(k);
    }
    m
}

/// The JSON-RPC test client, with this protocol's constructors and calls.
type Drv = crate::fake::testdrv::RpcDrv;

trait ExtDrv {
    fn new() -> Self;
    fn with(cfg: ExtConfig, seed: u64) -> Self;
    fn tool_call(
        &mut self,
        tool: &str,
        s: &TaskScript,
        tasks: bool,
        key: Option<&str>,
    ) -> (u64, Vec<Value>);
    fn submit(&mut self, tool: &str, s: &TaskScript) -> String;
    fn update(&mut self, task_id: &str, responses: Value) -> Value;
    fn cancel(&mut self, task_id: &str) -> Value;
}

impl ExtDrv for Drv {
    fn new() -> Drv {
        Drv::with(cfg(), 7)
    }

    fn with(cfg: ExtConfig, seed: u64) -> Drv {
        Drv::on(server(cfg, ChaCha8Rng::seed_from_u64(seed)))
    }

    fn tool_call(
        &mut self,
        tool: &str,
        s: &TaskScript,
        tasks: bool,
        key: Option<&str>,
    ) -> (u64, Vec<Value>) {
        self.req(
            "tools/call",
            json!({"name": tool, "arguments": s.to_arguments(), "_meta": meta(tasks, key)}),
        )
    }

    /// Submit a call that must become a task; returns the task id.
    fn submit(&mut self, tool: &str, s: &TaskScript) -> String {
        let (_, out) = self.tool_call(tool, s, true, None);
        assert_eq!(out.len(), 1, "{out:?}");
        let r = &out[0]["result"];
        assert_eq!(r["resultType"], "task", "{r}");
        r["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {r}"))
            .to_string()
    }

    fn update(&mut self, task_id: &str, responses: Value) -> Value {
        self.call(
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": responses}),
        )
    }

    fn cancel(&mut self, task_id: &str) -> Value {
        self.call("tasks/cancel", json!({"taskId": task_id}))
    }
}

// ---------------------------------------------------------------------------------------------
// Negotiation

#[test]
fn initialize_advertises_the_extension_and_2026_07_28() {
    let mut d = Drv::new();
    let r = d.call(
        "initialize",
        json!({"protocolVersion": "2026-07-28", "capabilities": {}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2026-07-28");
    assert_eq!(r["result"]["capabilities"]["extensions"][EXT], json!({}));
    assert!(
        r["result"]["capabilities"].get("tasks").is_none(),
        "no 2025-11-25 tasks capability"
    );
    assert!(r["result"]["capabilities"].get("experimental").is_none());

    let mut d = Drv::with(
        ExtConfig {
            toolop_extensions: true,
            ttl_ms: Some(60_000),
            ..cfg()
        },
        7,
    );
    let r = d.call("initialize", json!({"protocolVersion": "2026-07-28"}));
    assert_eq!(
        r["result"]["capabilities"]["experimental"][EXT_IDEMPOTENCY],
        json!({"retentionMs": 60_000})
    );

    // rmcp answers with the older revision, and the extension (rmcp-3.11.0 seq 3).
    let mut d = Drv::with(
        ExtConfig {
            rmcp: true,
            ..cfg()
        },
        7,
    );
    let r = d.call("initialize", json!({"protocolVersion": "2026-07-28"}));
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(r["result"]["capabilities"]["extensions"][EXT], json!({}));
}

#[test]
fn tools_list_has_no_task_support_handshake() {
    let mut d = Drv::new();
    let r = d.call("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4);
    assert!(
        tools.iter().all(|t| t.get("execution").is_none()),
        "{tools:?}"
    );
    assert_eq!(tools[3]["_meta"][META_SYNC_UPPER_BOUND_MS], 250);
}

// ---------------------------------------------------------------------------------------------
// tools/call: task or inline

#[test]
fn short_call_runs_inline_with_or_without_the_capability() {
    for tasks in [true, false] {
        let mut d = Drv::new();
        let s = script("n1", 400, ScriptOutcome::Completed);
        let (id, out) = d.tool_call("auto", &s, tasks, Some("k1"));
        assert!(out.is_empty(), "answered after the run: {out:?}");
        assert_eq!(d.s.next_event_at_ms(), Some(400));
        let out = d.to(400);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["id"], json!(id));
        let r = &out[0]["result"];
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["content"][0]["text"], "n1 ok");
        assert_eq!(r["isError"], false);
        let t = d.s.truth();
        assert!(t.tasks.is_empty());
        assert_eq!(t.sync_runs.len(), 1);
        let run = &t.sync_runs[0];
        assert_eq!(
            (run.call_node.as_str(), run.kind, run.side_effects),
            ("n1", SyncRunKind::Plain, 1)
        );
        assert_eq!(run.idempotency_key.as_deref(), Some("k1"));
        let mut payload = r.clone();
        payload.as_object_mut().unwrap().remove("resultType");
        assert_eq!(
            run.result_digest.as_deref(),
            Some(payload_digest(&payload).as_str())
        );
        assert_eq!(t.effects_per_call_node["n1"], 1);
    }
}

#[test]
fn long_call_with_the_capability_creates_a_task() {
    let mut d = Drv::with(
        ExtConfig {
            ttl_ms: Some(60_000),
            poll_interval_ms: 700,
            ..cfg()
        },
        7,
    );
    let s = script("n1", 2_000, ScriptOutcome::Completed);
    let (_, out) = d.tool_call("auto", &s, true, Some("k1"));
    let r = &out[0]["result"];
    assert_eq!(r["resultType"], "task");
    assert_eq!(r["status"], "working");
    assert_eq!(
        (r["ttlMs"].clone(), r["pollIntervalMs"].clone()),
        (json!(60_000), json!(700))
    );
    assert_eq!(r["createdAt"], "2026-12-01T00:00:00.000Z");
    assert!(
        r.get("task").is_none() && r.get("result").is_none(),
        "flat, nothing inlined: {r}"
    );
    let task_id = r["taskId"].as_str().unwrap().to_string();
    assert_eq!(task_id.len(), 32);

    d.to(1_999);
    let g = d.get(&task_id)["result"].clone();
    assert_eq!(
        (g["resultType"].clone(), g["status"].clone()),
        (json!("complete"), json!("working"))
    );
    assert!(g.get("result").is_none());
    d.to(2_000);
    let g = d.get(&task_id)["result"].clone();
    assert_eq!(g["status"], "completed");
    assert_eq!(g["lastUpdatedAt"], "2026-12-01T00:00:02.000Z");
    assert_eq!(g["result"]["content"][0]["text"], "n1 ok");
    let t = d.truth(&task_id);
    assert_eq!(t.call_node, "n1");
    assert_eq!(t.idempotency_key.as_deref(), Some("k1"));
    assert_eq!(
        (t.terminal_status, t.terminal_at_ms),
        (Some(TaskStatus::Completed), Some(2_000))
    );
    assert_eq!(
        t.result_digest.as_deref(),
        Some(payload_digest(&g["result"]).as_str())
    );
    assert_eq!(
        (t.side_effects, t.work_end),
        (1, Some(WorkEnd::Finished(ScriptOutcome::Completed)))
    );
    assert_eq!(d.s.truth().tasks_created_per_call_node["n1"], 1);
}

#[test]
fn a_call_that_needs_a_task_without_the_capability_is_refused_with_32021() {
    let mut d = Drv::new();
    // Long script on a server-decides tool, and any script on a task-only tool.
    for (tool, ms) in [("auto", 5_000), ("opt", 5_000), ("req", 10)] {
        let (_, out) = d.tool_call(
            tool,
            &script("n1", ms, ScriptOutcome::Completed),
            false,
            None,
        );
        assert_eq!(out[0]["error"]["code"], -32021, "{tool}: {out:?}");
        assert!(out[0]["error"]["message"].as_str().unwrap().contains(EXT));
    }
    d.to(10_000);
    let t = d.s.truth();
    assert!(t.tasks.is_empty() && t.sync_runs.is_empty() && t.effects_per_call_node.is_empty());
    // With the capability, the task-only tool makes a task even for a short script; a forbidden
    // tool runs inline even for a long one.
    d.submit("req", &script("n2", 10, ScriptOutcome::Completed));
    let (_, out) = d.tool_call(
        "forb",
        &script("n3", 5_000, ScriptOutcome::Completed),
        true,
        None,
    );
    assert!(out.is_empty());
    assert_eq!(d.to(15_000).len(), 1);
    assert_eq!(d.s.truth().sync_runs[0].call_node, "n3");
}

#[test]
fn unknown_tool_and_bad_script_are_invalid_params() {
    let mut d = Drv::new();
    let (_, out) = d.tool_call("nope", &TaskScript::default(), true, None);
    assert_eq!(out[0]["error"]["code"], -32602);
    let r = d.call("tools/call", json!({"name": "auto", "arguments": {"__sim": {"duration_ms": "x"}}, "_meta": meta(true, None)}));
    assert_eq!(r["error"]["code"], -32602);
    let r = d.call("tools/call", json!({"arguments": {}}));
    assert_eq!(r["error"]["code"], -32602);
}

// ---------------------------------------------------------------------------------------------
// Outcomes

#[test]
fn is_error_result_ends_completed() {
    let mut d = Drv::new();
    let id = d.submit("auto", &script("n1", 1_500, ScriptOutcome::Failed));
    d.to(1_500);
    let g = d.get(&id)["result"].clone();
    assert_eq!(g["status"], "completed", "failed is a JSON-RPC error only");
    assert_eq!(g["result"]["isError"], true);
    assert!(g.get("error").is_none());
    let t = d.truth(&id);
    assert_eq!(
        (t.terminal_status, t.side_effects),
        (Some(TaskStatus::Completed), 1)
    );
    assert_eq!(
        t.result_digest.as_deref(),
        Some(payload_digest(&g["result"]).as_str())
    );
}

#[test]
fn tool_error_ends_failed_with_the_error_inlined() {
    let mut d = Drv::new();
    let id = d.submit("auto", &script("n1", 1_500, ScriptOutcome::ToolError));
    d.to(1_500);
    let g = d.get(&id)["result"].clone();
    assert_eq!(g["status"], "failed");
    assert_eq!(g["error"], json!({"code": -32000, "message": "n1 ok"}));
    assert_eq!(g["statusMessage"], "n1 ok");
    assert!(g.get("result").is_none());
    let t = d.truth(&id);
    assert_eq!(
        (t.terminal_status, t.side_effects, t.result_digest.clone()),
        (Some(TaskStatus::Failed), 0, None)
    );
    // Inline, the same outcome is the JSON-RPC error of the call itself.
    let (cid, _) = d.tool_call(
        "auto",
        &script("n2", 10, ScriptOutcome::ToolError),
        true,
        None,
    );
    let out = d.to(2_000);
    assert_eq!(out[0]["id"], json!(cid));
    assert_eq!(out[0]["error"]["code"], -32000);
    assert_eq!(d.s.truth().sync_runs[0].side_effects, 0);
}

#[test]
fn results_carry_the_toolop_digest_with_extensions() {
    let mut d = Drv::with(
        ExtConfig {
            toolop_extensions: true,
            ..cfg()
        },
        7,
    );
    let id = d.submit("auto", &script("n1", 1_500, ScriptOutcome::Completed));
    d.to(1_500);
    let mut result = d.get(&id)["result"]["result"].clone();
    let meta = result
        .as_object_mut()
        .unwrap()
        .remove("_meta")
        .expect("digest meta");
    assert_eq!(meta[META_RESULT_DIGEST], json!(payload_digest(&result)));
    assert_eq!(
        d.truth(&id).result_digest.as_deref(),
        Some(payload_digest(&result).as_str())
    );
}

// ---------------------------------------------------------------------------------------------
// Input rounds

#[test]
fn input_rounds_are_inlined_and_answered_by_tasks_update() {
    let mut d = Drv::new();
    let s = TaskScript {
        input_at_ms: vec![500, 1_000],
        ..script("n1", 2_000, ScriptOutcome::Completed)
    };
    let id = d.submit("auto", &s);
    d.to(500);
    let g = d.get(&id)["result"].clone();
    assert_eq!(g["status"], "input_required");
    let req = &g["inputRequests"]["input-1"];
    assert_eq!(req["method"], "elicitation/create");
    assert_eq!(req["params"]["mode"], "form");
    assert_eq!(
        req["params"]["message"],
        "Input round 1: approve continuing n1?"
    );
    assert!(req["params"]["requestedSchema"].is_object());
    d.get(&id);
    assert_eq!(
        d.truth(&id).input_rounds[0].deliveries,
        2,
        "every read that shows it delivers it"
    );

    // Waiting for input does not count as working time.
    d.to(3_000);
    assert_eq!(d.status(&id), "input_required");
    let ack = d.update(
        &id,
        json!({"input-1": {"action": "accept", "content": {"ok": true}}}),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    assert_eq!(d.status(&id), "working");
    let r = &d.truth(&id).input_rounds[0];
    assert_eq!(
        (r.answered_at_ms, r.action, r.round),
        (Some(3_000), Some(AnswerAction::Accept), 1)
    );

    // Second round 500 ms of working time later; the old key is now stale.
    d.to(3_500);
    let g = d.get(&id)["result"].clone();
    assert!(g["inputRequests"]["input-2"].is_object(), "{g}");
    assert!(g["inputRequests"].get("input-1").is_none());
    d.update(
        &id,
        json!({"input-1": {"action": "accept", "content": {"ok": true}}}),
    );
    assert_eq!(d.status(&id), "input_required");
    d.update(&id, json!({"input-2": {"action": "decline"}}));
    d.to(4_500);
    assert_eq!(d.status(&id), "completed");
    let t = d.truth(&id);
    assert_eq!(t.input_rounds.len(), 2);
    assert_eq!(t.input_rounds[1].action, Some(AnswerAction::Decline));
    assert_eq!(
        (t.stale_input_responses, t.terminal_at_ms),
        (1, Some(4_500))
    );
    let stale = &d.s.truth().stale_input_responses;
    assert_eq!(stale.len(), 1);
    assert_eq!(
        (stale[0].round, stale[0].task_id.clone()),
        (Some(1), Some(id.clone()))
    );
    // After the end, any update is stale but still acked; unknown tasks are -32602.
    assert_eq!(
        d.update(&id, json!({"input-2": {"action": "accept"}}))["result"]["resultType"],
        "complete"
    );
    assert_eq!(d.truth(&id).stale_input_responses, 2);
    assert_eq!(d.update("nope", json!({}))["error"]["code"], -32602);
    assert_eq!(
        d.call("tasks/update", json!({"taskId": id, "inputResponses": [1]}))["error"]["code"],
        -32602
    );
}

// ---------------------------------------------------------------------------------------------
// Cancel: an ack, then eventually

#[test]
fn cancel_is_an_ack_and_takes_effect_after_the_drawn_delay() {
    let mut d = Drv::new();
    let id = d.submit("auto", &script("n1", 5_000, ScriptOutcome::Completed));
    d.to(1_000);
    let ack = d.cancel(&id);
    assert_eq!(
        ack["result"],
        json!({"resultType": "complete"}),
        "an empty ack, no Task"
    );
    assert!(d.s.service().cancel_pending(&id));
    assert_eq!(d.status(&id), "working", "not yet");
    // A second cancel neither redraws nor moves the effect.
    d.to(1_200);
    d.cancel(&id);
    d.to(1_299);
    assert_eq!(d.status(&id), "working");
    d.to(1_300);
    let g = d.get(&id)["result"].clone();
    assert_eq!(g["status"], "cancelled");
    assert!(g.get("result").is_none() && g.get("error").is_none());
    let t = d.truth(&id);
    assert_eq!(
        (t.terminal_status, t.terminal_at_ms),
        (Some(TaskStatus::Cancelled), Some(1_300))
    );
    assert_eq!(
        (t.side_effects, t.work_end),
        (0, Some(WorkEnd::StoppedByCancel))
    );
    d.to(10_000);
    assert_eq!(d.truth(&id).side_effects, 0, "the work stopped");
    // Cancel of a terminal task: still an ack, nothing changes.
    assert_eq!(d.cancel(&id)["result"]["resultType"], "complete");
    assert_eq!(d.status(&id), "cancelled");
    assert_eq!(d.cancel("nope")["error"]["code"], -32602);
}

#[test]
fn cancel_may_end_completed_when_the_work_finishes_first() {
    let mut d = Drv::new();
    let id = d.submit("auto", &script("n1", 1_200, ScriptOutcome::Completed));
    d.to(1_000);
    d.cancel(&id); // takes effect at 1_300, the work ends at 1_200
    d.to(5_000);
    let g = d.get(&id)["result"].clone();
    assert_eq!(g["status"], "completed");
    assert_eq!(g["result"]["content"][0]["text"], "n1 ok");
    let t = d.truth(&id);
    assert_eq!(
        (t.terminal_status, t.side_effects),
        (Some(TaskStatus::Completed), 1)
    );
    assert!(!d.s.service().cancel_pending(&id));
    // At the very same instant (work 300 ms, cancel delay 300 ms), the work wins too.
    let id2 = d.submit("req", &script("n2", 300, ScriptOutcome::ToolError));
    d.cancel(&id2);
    d.to(d.now + 300);
    assert_eq!(d.truth(&id2).terminal_status, Some(TaskStatus::Failed));
}

#[test]
fn cancel_while_waiting_for_input_abandons_the_round() {
    let mut d = Drv::new();
    let s = TaskScript {
        input_at_ms: vec![100],
        ..script("n1", 2_000, ScriptOutcome::Completed)
    };
    let id = d.submit("auto", &s);
    d.to(100);
    d.cancel(&id);
    d.to(400);
    assert_eq!(d.status(&id), "cancelled");
    d.update(
        &id,
        json!({"input-1": {"action": "accept", "content": {"ok": true}}}),
    );
    let t = d.truth(&id);
    assert_eq!(t.input_rounds[0].abandoned_at_ms, Some(400));
    assert_eq!(
        (t.stale_input_responses, t.side_effects, t.work_end),
        (1, 0, Some(WorkEnd::StoppedByCancel))
    );
}

/// rmcp's `cancel_task` clears the pending inputs at once: until the cancel takes effect the
/// task shows `working` with nothing to answer (spec/mcp-tasks.md section 16), and an answer
/// to the withdrawn round is stale. The strict profile keeps asking until the effect
/// (`cancel_while_waiting_for_input_abandons_the_round`).
#[test]
fn rmcp_withdraws_the_round_when_the_cancel_is_acknowledged() {
    let mut d = Drv::with(
        ExtConfig {
            rmcp: true,
            ..cfg()
        },
        7,
    );
    let s = TaskScript {
        input_at_ms: vec![100],
        ..script("n1", 2_000, ScriptOutcome::Completed)
    };
    let id = d.submit("auto", &s);
    d.to(100);
    assert_eq!(d.status(&id), "input_required");
    d.cancel(&id);
    let g = d.get(&id);
    assert_eq!(g["result"]["status"], "working", "{g}");
    assert!(g["result"].get("inputRequests").is_none(), "{g}");
    d.update(
        &id,
        json!({"input-1": {"action": "accept", "content": {"ok": true}}}),
    );
    d.to(400);
    assert_eq!(d.status(&id), "cancelled");
    let t = d.truth(&id);
    assert_eq!(t.input_rounds[0].abandoned_at_ms, Some(100), "at the ack");
    assert_eq!(
        (t.stale_input_responses, t.side_effects, t.work_end),
        (1, 0, Some(WorkEnd::StoppedByCancel))
    );

    // Strict: the round stays asked until the cancel takes effect.
    let mut d = Drv::new();
    let id = d.submit("auto", &s);
    d.to(100);
    d.cancel(&id);
    assert_eq!(d.status(&id), "input_required");
}

#[test]
fn cancel_delays_are_drawn_from_the_configured_range() {
    let mut d = Drv::with(
        ExtConfig {
            cancel_delay_ms: (100, 900),
            ..cfg()
        },
        3,
    );
    let mut at = Vec::new();
    for i in 0..8 {
        let id = d.submit(
            "auto",
            &script(&format!("n{i}"), 60_000, ScriptOutcome::Completed),
        );
        d.cancel(&id);
        d.to(d.now + 1_000);
        let t = d
            .truth(&id)
            .terminal_at_ms
            .expect("cancelled within the range")
            - (d.now - 1_000);
        assert!((100..=900).contains(&t), "{t}");
        at.push(t);
    }
    at.dedup();
    assert!(at.len() > 1, "drawn, not fixed: {at:?}");
}

// ---------------------------------------------------------------------------------------------
// TTL, dedupe, removed methods, framing

#[test]
fn ttl_restarts_at_terminal_and_deletion_is_not_found() {
    let mut d = Drv::with(
        ExtConfig {
            ttl_ms: Some(1_500),
            ..cfg()
        },
        7,
    );
    let id = d.submit("req", &script("n1", 1_000, ScriptOutcome::Completed));
    d.to(2_000);
    assert_eq!(
        d.status(&id),
        "completed",
        "kept ttl after the end, not after creation"
    );
    d.to(2_499);
    assert_eq!(d.status(&id), "completed");
    d.to(2_500);
    let g = d.get(&id);
    assert_eq!(g["error"]["code"], -32602);
    assert!(d.truth(&id).deleted_at_ms.is_some());
    assert_eq!(d.truth(&id).deleted_at_ms, Some(2_500));
    assert_eq!(d.cancel(&id)["error"]["code"], -32602);

    // Deleted while running: the work goes on and its effect is logged.
    let id = d.submit("auto", &script("n2", 5_000, ScriptOutcome::Completed));
    d.to(d.now + 6_000);
    let t = d.truth(&id);
    assert_eq!(
        (
            t.deleted_at_ms.is_some(),
            t.side_effects,
            t.effects_after_deletion
        ),
        (true, 1, 1)
    );
    assert_eq!(t.terminal_status, None, "never seen terminal");
}

/// rmcp's `TaskManager` (spec/mcp-tasks.md section 16, `transcripts/rmcp-3.11.0` seq 185-208):
/// a task still running at its ttl ends `failed` with -32603 and its work is aborted; the
/// failed task goes one ttl later; and both happen only when a request reaches the server.
#[test]
fn rmcp_fails_a_running_task_at_its_ttl_and_sweeps_only_on_a_request() {
    let rmcp = || ExtConfig {
        ttl_ms: Some(1_500),
        rmcp: true,
        ..cfg()
    };
    let mut d = Drv::with(rmcp(), 7);
    let id = d.submit("auto", &script("n1", 5_000, ScriptOutcome::Completed));
    d.to(1_499);
    assert_eq!(d.status(&id), "working", "not yet at its ttl");
    d.to(1_600);
    let g = d.get(&id);
    let r = &g["result"];
    assert_eq!(r["status"], "failed", "{g}");
    assert_eq!(r["error"]["code"], -32603, "{g}");
    assert_eq!(r["error"]["message"], EXPIRED_MESSAGE, "{g}");
    assert!(r.get("result").is_none(), "{g}");
    // The work never ends: no side effect, even past its scripted end.
    d.to(6_000);
    let t = d.truth(&id);
    assert_eq!(t.terminal_status, Some(TaskStatus::Failed));
    assert_eq!(
        t.terminal_at_ms,
        Some(1_600),
        "failed by the request's sweep"
    );
    assert_eq!(t.work_end, Some(WorkEnd::Expired));
    assert_eq!(t.side_effects, 0);
    assert_eq!(t.error_message.as_deref(), Some(EXPIRED_MESSAGE));
    assert_eq!(
        t.deleted_at_ms, None,
        "no request since: nothing swept it away"
    );
    // The ttl started again when it failed (1,600 + 1,500), and the next request sweeps it.
    let g = d.get(&id);
    assert_eq!(g["error"]["code"], -32602, "{g}");
    assert_eq!(d.truth(&id).deleted_at_ms, Some(6_000));

    // Work that ends past the ttl, before any request swept it, completes: the sweep fails only
    // what is still running when a request comes.
    let mut d = Drv::with(rmcp(), 7);
    let id = d.submit("auto", &script("n2", 1_800, ScriptOutcome::Completed));
    d.to(2_000);
    assert_eq!(d.status(&id), "completed");
    assert_eq!(d.truth(&id).side_effects, 1);

    // Any request sweeps every task of the server, not only the one it names.
    let mut d = Drv::with(rmcp(), 7);
    let a = d.submit("auto", &script("n3", 5_000, ScriptOutcome::Completed));
    d.to(1_000);
    let b = d.submit("auto", &script("n4", 5_000, ScriptOutcome::Completed));
    d.to(1_700);
    assert_eq!(d.status(&b), "working");
    assert_eq!(d.truth(&a).terminal_status, Some(TaskStatus::Failed));
    assert_eq!(d.truth(&a).terminal_at_ms, Some(1_700));
}

/// Without the profile, a running task is deleted at its ttl, on time and with no request
/// needed, and never fails there.
#[test]
fn without_the_rmcp_profile_a_running_task_is_deleted_not_failed() {
    let mut d = Drv::with(
        ExtConfig {
            ttl_ms: Some(1_500),
            ..cfg()
        },
        7,
    );
    let id = d.submit("auto", &script("n1", 5_000, ScriptOutcome::Completed));
    d.to(1_600);
    assert_eq!(d.get(&id)["error"]["code"], -32602);
    assert_eq!(d.truth(&id).terminal_status, None);
    assert_eq!(
        d.truth(&id).deleted_at_ms,
        Some(1_500),
        "on time, no request needed"
    );
}

#[test]
fn submissions_are_deduplicated_by_key_with_extensions_only() {
    for ext in [false, true] {
        let mut d = Drv::with(
            ExtConfig {
                toolop_extensions: ext,
                ..cfg()
            },
            7,
        );
        let s = script("n1", 5_000, ScriptOutcome::Completed);
        let (_, a) = d.tool_call("auto", &s, true, Some("k1"));
        d.to(100);
        let (_, b) = d.tool_call("auto", &s, true, Some("k1"));
        let (ta, tb) = (
            a[0]["result"]["taskId"].clone(),
            b[0]["result"]["taskId"].clone(),
        );
        let t = d.s.truth();
        if ext {
            assert_eq!(ta, tb);
            assert_eq!(b[0]["result"]["resultType"], "task");
            assert_eq!(
                (
                    t.duplicate_submits_deduped,
                    t.tasks_created_per_call_node["n1"]
                ),
                (1, 1)
            );
            assert_eq!(t.tasks[ta.as_str().unwrap()].dedupe_hits, 1);
        } else {
            assert_ne!(ta, tb);
            assert_eq!(
                (
                    t.duplicate_submits_deduped,
                    t.tasks_created_per_call_node["n1"]
                ),
                (0, 2)
            );
        }
    }
}

#[test]
fn removed_methods_are_method_not_found() {
    let mut d = Drv::with(
        ExtConfig {
            toolop_extensions: true,
            ..cfg()
        },
        7,
    );
    let id = d.submit("auto", &script("n1", 5_000, ScriptOutcome::Completed));
    assert_eq!(
        d.call("tasks/result", json!({"taskId": id}))["error"]["code"],
        -32601
    );
    assert_eq!(
        d.call(
            "tasks/list",
            json!({"_meta": {"io.toolop/lookup-key": "k"}})
        )["error"]["code"],
        -32601
    );
    assert_eq!(
        d.call("ping", json!({}))["result"]["resultType"],
        "complete"
    );
    assert_eq!(d.get("nope")["error"]["code"], -32602);
    assert_eq!(d.call("tasks/get", json!({}))["error"]["code"], -32602);
}

#[test]
fn framing_errors_notifications_and_client_responses() {
    let mut d = Drv::new();
    let out = d.send_raw(b"{not json".to_vec(), Some(9));
    assert_eq!(out[0]["error"]["code"], -32700);
    assert_eq!(
        d.s.handle(
            0,
            OutFrame {
                request_id: Some(9),
                body: b"{".to_vec(),
                http: None
            }
        )[0]
        .request_id,
        Some(9)
    );
    assert_eq!(
        d.send_raw(b"[1]".to_vec(), None)[0]["error"]["code"],
        -32600
    );
    assert!(d
        .send_raw(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
            None
        )
        .is_empty());
    assert!(d
        .send_raw(
            br#"{"jsonrpc":"2.0","id":0,"result":{"action":"accept"}}"#.to_vec(),
            None
        )
        .is_empty());
    let stale = &d.s.truth().stale_input_responses;
    assert_eq!(
        (stale.len(), stale[0].task_id.clone(), stale[0].action),
        (1, None, AnswerAction::Accept)
    );
}

#[test]
fn a_completion_racing_a_delayed_cancel_ends_when_the_cancel_would_take_effect_and_wins() {
    let mut d = Drv::new();
    let id = d.submit("auto", &script("n1", 60_000, ScriptOutcome::Completed));
    let ack = d.call_with(
        "tasks/cancel",
        json!({ "taskId": id }),
        crate::fake::service::CancelFaults {
            race: true,
            keep_working: false,
            ..Default::default()
        },
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    d.to(1_000);
    assert_eq!(
        d.status(&id),
        "completed",
        "the work ended as the cancel took effect, and won"
    );
    let t = d.truth(&id);
    assert_eq!(
        (t.terminal_status, t.work_end_at_ms, t.side_effects),
        (Some(TaskStatus::Completed), Some(300), 1)
    );
}

#[test]
fn an_ignored_cancel_is_acknowledged_and_the_work_runs_to_its_end() {
    let mut d = Drv::new();
    let id = d.submit("auto", &script("n1", 60_000, ScriptOutcome::Completed));
    d.to(1_000);
    assert!(d.s.service().cancel_meets_running_work(&id));
    let ignore = crate::fake::service::CancelFaults {
        ignore: true,
        ..Default::default()
    };
    let ack = d.call_with("tasks/cancel", json!({ "taskId": id }), ignore);
    assert_eq!(ack["result"], json!({"resultType": "complete"}));
    assert!(
        !d.s.service().cancel_meets_running_work(&id),
        "a task that ignores cancels offers no further cancel decisions"
    );
    d.to(30_000);
    assert_eq!(d.status(&id), "working", "no cancel ever takes effect");
    // A second cancel is acknowledged and ignored too, and keeps the first ack's time.
    let again = d.call_with("tasks/cancel", json!({ "taskId": id }), Default::default());
    assert_eq!(again["result"], json!({"resultType": "complete"}));
    d.to(61_000);
    assert_eq!(d.status(&id), "completed");
    let t = d.truth(&id);
    assert_eq!(
        (
            t.terminal_status,
            t.work_end_at_ms,
            t.side_effects,
            t.effects_after_cancel,
            t.cancel_ignored_at_ms
        ),
        (Some(TaskStatus::Completed), Some(60_000), 1, 0, Some(1_000))
    );
}

// ---------------------------------------------------------------------------------------------
// Determinism

/// A mixed workload with cancels (random delays), input rounds, inline calls and a ttl.
fn workload(seed: u64) -> (Vec<(u64, Value)>, String) {
    let mut d = Drv::with(
        ExtConfig {
            ttl_ms: Some(3_000),
            cancel_delay_ms: (0, 2_000),
            ..cfg()
        },
        seed,
    );
    let mut ids = Vec::new();
    for i in 0..6u64 {
        let s = TaskScript {
            input_at_ms: if i % 2 == 0 { vec![300] } else { vec![] },
            ..script(&format!("n{i}"), 1_200 + 300 * i, ScriptOutcome::Completed)
        };
        ids.push(d.submit("auto", &s));
        d.tool_call(
            "auto",
            &script(&format!("s{i}"), 50 * i, ScriptOutcome::Failed),
            true,
            None,
        );
        d.to(d.now + 150);
    }
    for (i, id) in ids.iter().enumerate() {
        if i % 3 == 0 {
            d.cancel(id);
        }
        d.get(id);
        d.update(
            id,
            json!({"input-1": {"action": "accept", "content": {"ok": true}}}),
        );
    }
    d.to(20_000);
    for id in &ids {
        d.get(id);
    }
    (d.log, serde_json::to_string(d.s.truth()).unwrap())
}

#[test]
fn equal_seeds_give_identical_output() {
    assert_eq!(workload(42), workload(42));
    let (a, _) = workload(42);
    let (b, _) = workload(43);
    assert_ne!(a, b, "task ids come from the seed");
}

// ---------------------------------------------------------------------------------------------
// Round trip with the production adapter

/// Send `out` through the adapter, feed it to the fake at `now`, decode every reply to it.
fn exchange(
    a: &McpTasksExtAdapter,
    s: &mut FakeServer,
    now: u64,
    rpc: u64,
    out: &Outbound,
) -> Vec<Reply> {
    let frame = a.encode_frame(rpc, out);
    let id = frame.request_id.expect("every message is a request");
    let mut replies = s.handle(now, frame);
    replies.extend(s.advance_frames(now));
    replies
        .iter()
        .filter(|f| f.request_id == Some(id))
        .map(|f| a.decode_reply(out.kind(), f))
        .collect()
}

fn one(replies: Vec<Reply>) -> Reply {
    assert_eq!(replies.len(), 1, "{replies:?}");
    replies.into_iter().next().unwrap()
}

#[test]
fn the_adapter_and_the_fake_agree() {
    let a = McpTasksExtAdapter::new();
    let config = ExtConfig {
        toolop_extensions: true,
        ttl_ms: Some(30_000),
        ..cfg()
    };
    let mut s = server(config, ChaCha8Rng::seed_from_u64(11));

    let caps = a
        .decode_initialize(
            &s.handle(
                0,
                OutFrame {
                    request_id: Some(1),
                    body: a.encode_initialize(1),
                    http: None,
                },
            )[0],
        )
        .unwrap();
    assert!(
        caps.tasks_tool_call && caps.tasks_cancel && !caps.tasks_list && caps.idempotency_by_key
    );
    assert_eq!(caps.idempotency_retention_ms, Some(30_000));
    let (tools, _) = a
        .decode_list_tools(
            &s.handle(
                0,
                OutFrame {
                    request_id: Some(2),
                    body: a.encode_list_tools(2, None),
                    http: None,
                },
            )[0],
        )
        .unwrap();
    assert_eq!(tools.len(), 4);

    // A long call becomes a task; input is inlined and answered; the result verifies.
    let sc = TaskScript {
        input_at_ms: vec![500],
        ..script("n1", 2_000, ScriptOutcome::Completed)
    };
    let submit = Outbound::Submit {
        key: "k1".into(),
        tool: "auto".into(),
        arguments: sc.to_arguments(),
        ttl_ms: Some(1),
    };
    let Reply::Submitted(v) = one(exchange(&a, &mut s, 0, 3, &submit)) else {
        panic!()
    };
    assert_eq!(
        (v.status, v.ttl_ms, v.poll_interval_ms),
        (ProtocolStatus::Working, Some(30_000), Some(1_000))
    );
    let op = v.operation_id.clone();
    let poll = Outbound::Poll {
        operation_id: op.clone(),
    };
    assert_eq!(one(exchange(&a, &mut s, 100, 4, &poll)).name(), "status");
    let Reply::InputRequests(reqs) = one(exchange(&a, &mut s, 600, 5, &poll)) else {
        panic!()
    };
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].related_operation_id.as_deref(), Some(op.as_str()));
    let answer = Outbound::InputResponse {
        operation_id: op.clone(),
        server_request_id: reqs[0].server_request_id.clone(),
        reply: ApprovalReply::Accept {
            content: json!({"ok": true}),
        },
    };
    // The runner hands 0 for an input response today; the adapter mints an id.
    assert_eq!(one(exchange(&a, &mut s, 700, 0, &answer)), Reply::Accepted);
    let fetch = Outbound::FetchResult {
        operation_id: op.clone(),
    };
    assert_eq!(one(exchange(&a, &mut s, 1_000, 6, &fetch)).name(), "status");
    let Reply::Result(rv) = one(exchange(&a, &mut s, 2_300, 7, &fetch)) else {
        panic!()
    };
    assert!(rv.verified, "{rv:?}");
    assert_eq!(
        Some(rv.digest.as_str()),
        s.truth().tasks[&op].result_digest.as_deref()
    );
    assert_eq!(rv.related_operation_id.as_deref(), Some(op.as_str()));
    // The same key again: deduplicated.
    let Reply::Submitted(again) = one(exchange(&a, &mut s, 2_400, 8, &submit)) else {
        panic!()
    };
    assert_eq!(again.operation_id, op);

    // A short call: the server chooses not to create a task.
    let quick = Outbound::Submit {
        key: "k2".into(),
        tool: "auto".into(),
        arguments: script("n2", 50, ScriptOutcome::Failed).to_arguments(),
        ttl_ms: None,
    };
    let frame = a.encode_frame(9, &quick);
    assert!(s.handle(3_000, frame).is_empty());
    let out = s.advance_frames(3_050);
    let Reply::SyncResult(rv) = a.decode_reply(RequestKind::Submit, &out[0]) else {
        panic!("{out:?}")
    };
    assert!(rv.verified && rv.is_error, "{rv:?}");
    assert_eq!(
        Some(rv.digest.as_str()),
        s.truth().sync_runs[0].result_digest.as_deref()
    );

    // Without the capability, a long call is refused.
    let sync = Outbound::SubmitSync {
        key: "k3".into(),
        tool: "auto".into(),
        arguments: script("n3", 9_000, ScriptOutcome::Completed).to_arguments(),
    };
    let Reply::SubmitRefused { reason } = one(exchange(&a, &mut s, 3_100, 10, &sync)) else {
        panic!()
    };
    assert!(reason.starts_with("-32021"), "{reason}");

    // Cancel is pending; the read decides; a lookup is unsupported.
    let long = Outbound::Submit {
        key: "k4".into(),
        tool: "auto".into(),
        arguments: script("n4", 60_000, ScriptOutcome::Completed).to_arguments(),
        ttl_ms: None,
    };
    let Reply::Submitted(v) = one(exchange(&a, &mut s, 3_200, 11, &long)) else {
        panic!()
    };
    let cancel = Outbound::Cancel {
        operation_id: v.operation_id.clone(),
    };
    assert_eq!(
        one(exchange(&a, &mut s, 3_300, 12, &cancel)),
        Reply::CancelPending
    );
    s.advance(4_000);
    let fetch = Outbound::FetchResult {
        operation_id: v.operation_id.clone(),
    };
    assert_eq!(
        one(exchange(&a, &mut s, 4_000, 13, &fetch)).name(),
        "no_result_stored"
    );
    assert_eq!(
        one(exchange(
            &a,
            &mut s,
            4_000,
            14,
            &Outbound::LookupByKey { key: "k4".into() }
        )),
        Reply::LookupUnsupported
    );
    let gone = Outbound::Poll {
        operation_id: "missing".into(),
    };
    assert_eq!(
        one(exchange(&a, &mut s, 4_000, 15, &gone)).name(),
        "not_found"
    );
}

fn task_view(status: TaskStatus, outcome: Option<Outcome>, round: Option<u32>) -> TaskView {
    TaskView {
        ttl_ms: Some(60_000),
        ..TaskView::for_test("t1", status, outcome, round)
    }
}

/// What the trace says a reply showed is what the wire carries: only `tasks/get` inlines
/// anything (a completed task's result, a failed task's error, the pending round), a
/// submission's reply inlines nothing, and `tasks/cancel` and `tasks/update` answer the plain
/// ack whatever the service did, a cancel of an ended task included. Before, a cancelled task's
/// read and a deduplicated submission's reply were credited with a result, and a cancel's ack
/// of an ended task was recorded as a refusal the client never saw.
#[test]
fn what_a_reply_shows_is_what_its_wire_carries() {
    let codec = ExtCodec::new(cfg());
    let result = Outcome::Result(ResultBody {
        text: "r".into(),
        blocks: 1,
        is_error: false,
    });
    for (status, outcome, round) in [
        (TaskStatus::Completed, Some(result), None),
        (
            TaskStatus::Failed,
            Some(Outcome::ToolError {
                message: "no".into(),
            }),
            None,
        ),
        (
            TaskStatus::Cancelled,
            Some(Outcome::Stopped(Stop::Cancelled)),
            None,
        ),
        (TaskStatus::InputRequired, None, Some(2)),
        (TaskStatus::Working, None, None),
    ] {
        let v = task_view(status, outcome, round);
        let wire = codec.get_task_result(&v, "t1", false);
        let inlined = wire.get("result").is_some() || wire.get("error").is_some();
        let asks = wire.get("inputRequests").is_some();
        match codec.shows(ExchangeKind::Poll, &Response::Task(v.clone())) {
            Shows::Task {
                result,
                input_round,
                ..
            } => {
                assert_eq!(result, inlined, "{status:?}: {wire}");
                assert_eq!(input_round.is_some(), asks, "{status:?}: {wire}");
            }
            other => panic!("a read shows a task: {other:?}"),
        }
        match codec.shows(ExchangeKind::Submit, &Response::Task(v.clone())) {
            Shows::Task {
                result,
                input_round,
                ..
            } => assert!(!result && input_round.is_none(), "{status:?}"),
            other => panic!("a submission's reply shows a task: {other:?}"),
        }
        assert_eq!(
            codec.shows(ExchangeKind::Cancel, &Response::Task(v.clone())),
            Shows::CancelAccepted
        );
    }
    let ended = Response::CancelRejected {
        status: TaskStatus::Completed,
    };
    assert_eq!(
        codec.shows(ExchangeKind::Cancel, &ended),
        Shows::CancelAccepted
    );
    assert_eq!(codec.shows(ExchangeKind::Answer, &ended), Shows::Ack);
}
