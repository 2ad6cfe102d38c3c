//! Lifecycle flows of the fake MCP server per profile: held results, cancel, input rounds, TTL,
//! notifications, dedupe, augmentation edges, synchronous runs, determinism. The driver is in `tests.rs`.

use crate::fake::jsonrpc::{META_IDEMPOTENCY_KEY, META_LOOKUP_KEY};
use serde_json::{json, Value};

use super::tests::{elicitations, notes, script, tools, Drv, McpDrv, ALL, RELATED};
use super::*;
use crate::fake::jsonrpc;
use crate::fake::script::ScriptOutcome;
use crate::fake::truth::{AnswerAction, SyncRunKind, TaskStatus, WorkEnd};

#[test]
fn held_result_is_answered_on_completion() {
    for profile in ALL {
        let mut d = Drv::new(profile, false);
        let id = d.submit(
            "req",
            &script("n", 3_000, ScriptOutcome::Completed),
            json!({"ttl": 60_000}),
        );
        d.to(1_000);
        let (rid, out) = d.req("tasks/result", json!({ "taskId": id }));
        assert!(out.is_empty(), "held: {out:?}");
        assert!(Drv::answer_of(&d.to(2_999), rid).is_none());
        let out = d.to(3_000);
        let ans = Drv::answer_of(&out, rid).expect("answered at completion");
        assert_eq!(ans["result"]["content"][0]["text"], "n ok");
        assert_eq!(ans["result"]["_meta"][RELATED]["taskId"], json!(id));
        // Deletion: created+ttl (strict), terminal+ttl (SDKs).
        let expected = if profile == Profile::SpecStrict {
            60_000
        } else {
            63_000
        };
        assert_eq!(d.s.next_event_at_ms(), Some(expected));
    }
}

#[test]
fn cancel_running_task_per_profile() {
    // (profile, statusMessage after cancel, has _meta {}, effect after cancel)
    let cases = [
        (Profile::SpecStrict, Some("Cancelled by client"), false, 0),
        (
            Profile::TsSdk,
            Some("Client cancelled task execution."),
            true,
            0,
        ),
        (Profile::PythonSdk, None, false, 1),
    ];
    for (profile, message, meta, late_effects) in cases {
        let mut d = Drv::new(profile, false);
        let id = d.submit(
            "opt",
            &script("c", 10_000, ScriptOutcome::Completed),
            json!({"ttl": 60_000}),
        );
        d.to(1_000);
        let (held, _) = d.req("tasks/result", json!({ "taskId": id }));
        let r = d.call("tasks/cancel", json!({ "taskId": id }));
        let t = &r["result"];
        assert_eq!(t["status"], "cancelled");
        assert_eq!(
            t.get("statusMessage").and_then(Value::as_str),
            message,
            "{profile:?}"
        );
        assert_eq!(t.get("_meta") == Some(&json!({})), meta);
        assert_eq!(
            t["lastUpdatedAt"],
            json!(jsonrpc::iso8601(1_000, profile == Profile::PythonSdk))
        );
        // The held tasks/result settles right after, the same way a fresh one does.
        let out = d.to(1_000);
        let settled = Drv::answer_of(&out, held).expect("held call settles");
        let fresh = d.call("tasks/result", json!({ "taskId": id }));
        assert_eq!(settled.get("result"), fresh.get("result"));
        assert_eq!(settled.get("error"), fresh.get("error"));
        match profile {
            Profile::PythonSdk => {
                assert_eq!(fresh["result"], json!({"_meta": {RELATED: {"taskId": id}}}));
            }
            _ => {
                assert_eq!(fresh["error"]["code"], -32603);
                assert_eq!(
                    fresh["error"]["message"],
                    json!(format!("Task {id} has no result stored"))
                );
            }
        }
        // Work past its would-be completion: status stays cancelled.
        d.to(20_000);
        assert_eq!(d.status(&id), "cancelled");
        let tr = d.truth(&id);
        assert_eq!(tr.terminal_status, Some(TaskStatus::Cancelled));
        assert_eq!(
            (tr.side_effects, tr.effects_after_cancel),
            (late_effects, late_effects)
        );
        if profile == Profile::PythonSdk {
            assert_eq!(
                tr.work_end,
                Some(WorkEnd::Finished(ScriptOutcome::Completed))
            );
            assert_eq!(tr.work_end_at_ms, Some(10_000));
            // The store still shows activity after the cancel.
            assert_eq!(
                d.get(&id)["result"]["lastUpdatedAt"],
                json!(jsonrpc::iso8601(10_000, profile == Profile::PythonSdk))
            );
        } else {
            assert_eq!(tr.work_end, Some(WorkEnd::StoppedByCancel));
        }
    }
}

#[test]
fn input_round_flow_with_redelivery() {
    for profile in ALL {
        let mut d = Drv::new(profile, false);
        let mut s = script("in", 3_000, ScriptOutcome::Completed);
        s.input_at_ms = vec![1_000, 2_000];
        let id = d.submit("req", &s, json!({"ttl": 600_000}));
        let out = d.to(1_000);
        assert!(
            elicitations(&out).is_empty(),
            "not delivered without a tasks/result call"
        );
        assert_eq!(
            notes(&out),
            if profile == Profile::SpecStrict {
                vec![]
            } else {
                vec!["input_required".to_string()]
            }
        );
        assert_eq!(d.status(&id), "input_required");
        // Paused: nothing happens however long we wait.
        assert_eq!(d.s.next_event_at_ms(), Some(600_000)); // only the ttl deletion
        d.to(5_000);
        let (r1, direct) = d.req("tasks/result", json!({ "taskId": id }));
        assert!(direct.is_empty());
        let e1 = elicitations(&d.to(5_000));
        assert_eq!(e1.len(), 1);
        let req_id = e1[0]["id"].clone();
        let expected_id = match profile {
            Profile::TsSdk => json!(0),
            Profile::PythonSdk => json!(format!("task-{id}-1")),
            Profile::SpecStrict => json!(1),
        };
        assert_eq!(req_id, expected_id, "{profile:?}");
        let p = &e1[0]["params"];
        assert_eq!(p["mode"], "form");
        assert_eq!(p["requestedSchema"]["required"], json!(["ok"]));
        assert_eq!(p["_meta"][RELATED]["taskId"], json!(id));
        // A second tasks/result while unanswered re-delivers the same request.
        let (r2, _) = d.req("tasks/result", json!({ "taskId": id }));
        let e2 = elicitations(&d.to(5_000));
        assert_eq!(e2, e1);
        // The answer (no related meta, like the probe's) moves the task back to working, but
        // under TS only if the app does: this task (the first, an odd sequence number) is one
        // whose app leaves it `input_required`, with no status push.
        assert!(d.send(json!({"jsonrpc": "2.0", "id": req_id, "result": {"action": "accept", "content": {"ok": true}}})).is_empty());
        let out = d.to(5_000);
        let app_left_it = profile == Profile::TsSdk;
        assert_eq!(
            notes(&out),
            if profile == Profile::PythonSdk {
                vec!["working".to_string()]
            } else {
                vec![]
            }
        );
        let after = if app_left_it {
            "input_required"
        } else {
            "working"
        };
        assert_eq!(d.status(&id), after);
        // A duplicate answer is stale.
        d.send(json!({"jsonrpc": "2.0", "id": req_id, "result": {"action": "accept", "content": {"ok": true}}}));
        // Second round at 1000 more working ms: delivered at once to the held calls.
        let out = d.to(6_000);
        let e3 = elicitations(&out);
        assert_eq!(e3.len(), 1, "one delivery for the held calls");
        let expected_id2 = match profile {
            Profile::TsSdk => json!(1),
            Profile::PythonSdk => json!(format!("task-{id}-2")),
            Profile::SpecStrict => json!(2),
        };
        assert_eq!(e3[0]["id"], expected_id2);
        d.to(6_500);
        let mut answer = json!({"jsonrpc": "2.0", "id": expected_id2, "result": {"action": "decline", "_meta": {RELATED: {"taskId": id}}}});
        d.send(answer.clone());
        // Remaining 1000 ms of work.
        assert!(Drv::answer_of(&d.to(7_499), r1).is_none());
        let out = d.to(7_500);
        for r in [r1, r2] {
            let a = Drv::answer_of(&out, r).expect("both held calls answered");
            assert_eq!(a["result"]["content"][0]["text"], "in ok");
        }
        // An answer after completion is stale too.
        answer["result"]["action"] = json!("accept");
        d.send(answer);
        let tr = d.truth(&id);
        assert_eq!(tr.input_rounds.len(), 2);
        assert_eq!(tr.input_rounds[0].action, Some(AnswerAction::Accept));
        assert_eq!(tr.input_rounds[0].deliveries, 2);
        assert_eq!(
            (
                tr.input_rounds[0].asked_at_ms,
                tr.input_rounds[0].answered_at_ms
            ),
            (1_000, Some(5_000))
        );
        assert_eq!(tr.input_rounds[1].action, Some(AnswerAction::Decline));
        assert_eq!(
            (
                tr.input_rounds[1].asked_at_ms,
                tr.input_rounds[1].answered_at_ms
            ),
            (6_000, Some(6_500))
        );
        assert_eq!(tr.stale_input_responses, 2);
        assert_eq!(tr.terminal_at_ms, Some(7_500));
        assert_eq!(d.s.truth().stale_input_responses.len(), 2);
        assert_eq!(
            d.s.truth().stale_input_responses[0].task_id.as_deref(),
            Some(id.as_str())
        );
    }
}

/// TS numbers the elicitations of one session 0, 1, ... (probed on the SDK 1.32.2 peer: two
/// tasks, ids 0 and 1), and pairs an answer by its id alone: related-task metadata naming the
/// other task does not move it.
#[test]
fn ts_elicitation_ids_count_per_server_and_answers_pair_by_id() {
    let mut d = Drv::new(Profile::TsSdk, false);
    let mut s = script("a", 2_000, ScriptOutcome::Completed);
    s.input_at_ms = vec![0];
    let a = d.submit("req", &s, json!({}));
    let b = d.submit("req", &s, json!({}));
    d.to(0);
    d.req("tasks/result", json!({ "taskId": a }));
    d.req("tasks/result", json!({ "taskId": b }));
    let e = elicitations(&d.to(0));
    let ids: Vec<(Value, Value)> = e
        .iter()
        .map(|m| {
            (
                m["params"]["_meta"][RELATED]["taskId"].clone(),
                m["id"].clone(),
            )
        })
        .collect();
    assert_eq!(ids, vec![(json!(a), json!(0)), (json!(b), json!(1))]);
    // b's id with metadata naming a: b's round takes it, marked as meant for a.
    d.send(json!({"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {"ok": true}, "_meta": {RELATED: {"taskId": a}}}}));
    assert_eq!(d.status(&b), "working");
    assert_eq!(d.status(&a), "input_required");
    assert_eq!(
        d.truth(&b).input_rounds[0].answer_meant_for,
        Some(a.clone())
    );
    // a's id, no metadata: a's round. a (the first task, an odd sequence number) is one whose
    // app leaves it `input_required` after the answer.
    d.send(json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "cancel"}}));
    assert_eq!(d.status(&a), "input_required");
    assert_eq!(
        d.truth(&a).input_rounds[0].action,
        Some(AnswerAction::Cancel)
    );
    // Both rounds answered: a second answer under either id is stale.
    d.send(
        json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"ok": true}}}),
    );
    assert_eq!(d.s.truth().stale_input_responses.len(), 1);
}

#[test]
fn ttl_deletes_running_task_ts_vs_strict_timing() {
    // A task that runs past its ttl is deleted while working (all profiles); the work goes on.
    for profile in ALL {
        let mut d = Drv::new(profile, false);
        let id = d.submit(
            "opt",
            &script("long", 5_000, ScriptOutcome::Completed),
            json!({"ttl": 2_000}),
        );
        d.to(1_000);
        let (held, _) = d.req("tasks/result", json!({ "taskId": id }));
        let out = d.to(2_000);
        let a = Drv::answer_of(&out, held).expect("held call settles at deletion");
        assert_eq!(a["error"]["code"], -32602);
        let g = d.get(&id);
        assert_eq!(g["error"]["code"], -32602);
        let l = d.call("tasks/list", json!({}));
        assert_eq!(l["result"]["tasks"], json!([]));
        d.to(5_000);
        let tr = d.truth(&id);
        assert_eq!(tr.deleted_at_ms, Some(2_000));
        assert_eq!(
            (tr.side_effects, tr.effects_after_deletion),
            (1, 1),
            "{profile:?}"
        );
        assert_eq!(tr.terminal_status, None);
    }
    // Completed task: TS/Python keep it ttl after completion, strict deletes at created+ttl.
    let cases = [
        (Profile::SpecStrict, 1_500),
        (Profile::TsSdk, 2_500),
        (Profile::PythonSdk, 2_500),
    ];
    for (profile, deleted_at) in cases {
        let mut d = Drv::new(profile, false);
        let id = d.submit(
            "opt",
            &script("short", 1_000, ScriptOutcome::Completed),
            json!({"ttl": 1_500}),
        );
        d.to(deleted_at - 1);
        assert_eq!(d.status(&id), "completed", "{profile:?}");
        d.to(deleted_at);
        let r = d.call("tasks/result", json!({ "taskId": id }));
        assert_eq!(r["error"]["code"], -32602, "{profile:?}");
        assert_eq!(d.truth(&id).deleted_at_ms, Some(deleted_at));
        if profile == Profile::SpecStrict {
            assert_eq!(
                r["error"]["message"],
                "Failed to retrieve task: Task has expired"
            );
        }
        assert_eq!(d.s.next_event_at_ms(), None);
    }
}

#[test]
fn status_notifications_only_in_sdk_profiles() {
    for profile in ALL {
        let mut d = Drv::new(profile, false);
        let mut s = script("n", 1_000, ScriptOutcome::Completed);
        s.input_at_ms = vec![500];
        let id = d.submit("req", &s, json!({}));
        let mut out = d.to(500);
        d.req("tasks/result", json!({ "taskId": id }));
        out.extend(d.to(600));
        let e = elicitations(&out);
        d.send(json!({"jsonrpc": "2.0", "id": e[0]["id"], "result": {"action": "accept", "content": {"ok": true}}}));
        out.extend(d.to(2_000));
        let expected: Vec<&str> = match profile {
            Profile::SpecStrict => vec![],
            // This task's app leaves it `input_required` after the answer: no update, no push.
            Profile::TsSdk => vec!["input_required", "completed"],
            Profile::PythonSdk => vec!["input_required", "working", "completed"],
        };
        assert_eq!(notes(&out), expected, "{profile:?}");
        for n in out
            .iter()
            .filter(|v| v["method"] == "notifications/tasks/status")
        {
            assert_eq!(n["params"]["taskId"], json!(id));
            assert!(n.get("id").is_none());
            assert!(n["params"].get("_meta").is_none());
        }
    }
}

#[test]
fn python_cancel_while_waiting_for_input_aborts_the_work() {
    let mut d = Drv::new(Profile::PythonSdk, false);
    let mut s = script("w", 1_000, ScriptOutcome::Completed);
    s.input_at_ms = vec![100];
    let id = d.submit("req", &s, json!({}));
    d.to(100);
    d.req("tasks/result", json!({ "taskId": id }));
    let e = elicitations(&d.to(100));
    d.call("tasks/cancel", json!({ "taskId": id }));
    d.send(json!({"jsonrpc": "2.0", "id": e[0]["id"], "result": {"action": "accept", "content": {"ok": true}}}));
    d.to(10_000);
    let tr = d.truth(&id);
    assert_eq!(
        (tr.side_effects, tr.work_end),
        (0, Some(WorkEnd::AbortedAtInput))
    );
    assert_eq!(tr.input_rounds[0].abandoned_at_ms, Some(100));
    assert_eq!(tr.stale_input_responses, 1);
    assert_eq!(d.status(&id), "cancelled");
}

/// Same seed and inputs give identical frames and truth; another seed gives other ids.
#[test]
fn deterministic_under_same_seed() {
    fn run(profile: Profile, seed: u64) -> (Vec<(u64, Value)>, String) {
        let cfg = McpConfig {
            toolop_extensions: true,
            max_ttl_ms: Some(9_000),
            ..McpConfig::new(profile, tools())
        };
        let mut d = Drv::with(cfg, seed);
        let mut s = script("a", 2_000, ScriptOutcome::Failed);
        s.input_at_ms = vec![700];
        let a = d.submit("req", &s, json!({"ttl": 20_000}));
        let b = d.submit(
            "opt",
            &script("b", 1_200, ScriptOutcome::ToolError),
            json!({}),
        );
        d.req("tools/call", json!({"name": "plain", "arguments": script("c", 50, ScriptOutcome::Completed).to_arguments()}));
        d.to(800);
        d.req("tasks/result", json!({ "taskId": a }));
        let e = elicitations(&d.to(800));
        d.send(json!({"jsonrpc": "2.0", "id": e[0]["id"], "result": {"action": "accept", "content": {"ok": true}}}));
        d.req("tasks/result", json!({ "taskId": b }));
        d.to(3_000);
        d.call("tasks/cancel", json!({ "taskId": b }));
        d.call("tasks/list", json!({}));
        d.to(30_000);
        (d.log, serde_json::to_string(d.s.truth()).unwrap())
    }
    for profile in ALL {
        let x = run(profile, 11);
        let y = run(profile, 11);
        assert_eq!(x, y, "{profile:?}");
        let z = run(profile, 12);
        assert_ne!(x.1, z.1, "another seed mints other ids");
        assert!(x.0.len() >= 8);
    }
}

#[test]
fn next_event_at_is_none_when_idle() {
    let mut d = Drv::new(Profile::TsSdk, false);
    assert_eq!(d.s.next_event_at_ms(), None);
    assert!(d.s.advance(500).is_empty());
    d.now = 1_000;
    let id = d.submit("opt", &script("i", 10, ScriptOutcome::Completed), json!({}));
    assert_eq!(d.s.next_event_at_ms(), Some(1_010));
    d.to(1_010);
    assert_eq!(d.s.next_event_at_ms(), None, "ttl null: kept forever");
    assert_eq!(d.status(&id), "completed");
}

#[test]
fn dedupe_by_idempotency_key_only_with_extensions() {
    for profile in ALL {
        for ext in [false, true] {
            let mut d = Drv::new(profile, ext);
            let s = script("dup", 5_000, ScriptOutcome::Completed);
            let submit = |d: &mut Drv| {
                let r = d.call(
                    "tools/call",
                    json!({"name": "opt", "arguments": s.to_arguments(), "task": {"ttl": 1_000}, "_meta": {META_IDEMPOTENCY_KEY: "k1"}}),
                );
                r["result"]["task"].clone()
            };
            let a = submit(&mut d);
            d.to(500);
            let b = submit(&mut d);
            let t = d.s.truth();
            if ext {
                assert_eq!(a["taskId"], b["taskId"], "{profile:?}");
                assert_eq!(t.duplicate_submits_deduped, 1);
                assert_eq!(t.tasks_created_per_call_node["dup"], 1);
                assert_eq!(t.tasks[a["taskId"].as_str().unwrap()].dedupe_hits, 1);
                // Lookup by key finds it; another key finds nothing.
                let l = d.call("tasks/list", json!({"_meta": {META_LOOKUP_KEY: "k1"}}));
                assert_eq!(l["result"]["tasks"].as_array().unwrap().len(), 1);
                assert_eq!(l["result"]["tasks"][0]["taskId"], a["taskId"]);
                let l = d.call("tasks/list", json!({"_meta": {META_LOOKUP_KEY: "other"}}));
                assert_eq!(l["result"]["tasks"], json!([]));
                // Once the task is deleted (ttl 1000 from creation), the key creates a new one.
                d.to(1_000);
                let l = d.call("tasks/list", json!({"_meta": {META_LOOKUP_KEY: "k1"}}));
                assert_eq!(l["result"]["tasks"], json!([]));
                let c = submit(&mut d);
                assert_ne!(c["taskId"], a["taskId"]);
                assert_eq!(d.s.truth().tasks_created_per_call_node["dup"], 2);
            } else {
                assert_ne!(a["taskId"], b["taskId"], "{profile:?}");
                assert_eq!(t.duplicate_submits_deduped, 0);
                assert_eq!(t.tasks_created_per_call_node["dup"], 2);
                assert_eq!(
                    t.tasks[a["taskId"].as_str().unwrap()]
                        .idempotency_key
                        .as_deref(),
                    Some("k1")
                );
                // Without the extension the lookup key is ignored: every live task is listed.
                let l = d.call("tasks/list", json!({"_meta": {META_LOOKUP_KEY: "k1"}}));
                assert_eq!(l["result"]["tasks"].as_array().unwrap().len(), 2);
            }
        }
    }
}

#[test]
fn augmentation_edges_per_profile() {
    for profile in ALL {
        let mut d = Drv::new(profile, false);
        let s = script("edge", 300, ScriptOutcome::Completed);
        // Forbidden tool with task.
        let (rid, out) = d.req(
            "tools/call",
            json!({"name": "forb", "arguments": s.to_arguments(), "task": {"ttl": 60_000}}),
        );
        match profile {
            Profile::SpecStrict => assert_eq!(out[0]["error"]["code"], -32601),
            Profile::PythonSdk => {
                assert_eq!(out[0]["result"]["isError"], true);
                assert!(out[0]["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("does not support task-augmented invocation"));
            }
            Profile::TsSdk => {
                assert!(out.is_empty(), "TS runs the tool first");
                let out = d.to(300);
                let a = Drv::answer_of(&out, rid).unwrap();
                assert_eq!(a["error"]["code"], -32602);
                assert!(a["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("Invalid task creation result"));
                let run = &d.s.truth().sync_runs[0];
                assert_eq!(
                    (run.kind, run.side_effects, run.finished_at_ms),
                    (SyncRunKind::ForbiddenRunAnyway, 1, Some(300))
                );
                assert_eq!(d.s.truth().effects_per_call_node["edge"], 1);
            }
        }
        if profile != Profile::TsSdk {
            assert!(d.s.truth().sync_runs.is_empty());
        }
        assert!(d.s.truth().tasks.is_empty());
        // Whatever the profile answered, the truth keeps the call (the judge's
        // `task_calls_only_where_listed` reads it), and whether the tool ran.
        assert_eq!(
            d.s.truth().forbidden_task_calls,
            vec![crate::fake::truth::ForbiddenTaskCall {
                call_node: "edge".into(),
                tool: "forb".into(),
                ran: profile == Profile::TsSdk,
            }]
        );
        // Required tool without task.
        let r = d.call(
            "tools/call",
            json!({"name": "req", "arguments": s.to_arguments()}),
        );
        match profile {
            Profile::SpecStrict => assert_eq!(r["error"]["code"], -32601),
            _ => {
                assert_eq!(r["result"]["isError"], true);
                assert!(r["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("requires task"));
            }
        }
        // Unknown tool, with and without task.
        for task in [Some(json!({})), None] {
            let mut p = json!({"name": "nope", "arguments": {}});
            if let Some(t) = task {
                p["task"] = t;
            }
            let r = d.call("tools/call", p);
            match profile {
                Profile::PythonSdk => {
                    assert_eq!(r["result"]["content"][0]["text"], "Unknown tool: nope")
                }
                _ => assert_eq!(r["error"]["code"], -32602),
            }
        }
    }
}

#[test]
fn sync_calls_answer_after_duration() {
    for profile in ALL {
        for ext in [false, true] {
            let mut d = Drv::new(profile, ext);
            let cases = [
                ("opt", ScriptOutcome::Completed),
                ("plain", ScriptOutcome::Failed),
                ("forb", ScriptOutcome::ToolError),
            ];
            for (i, (tool, outcome)) in cases.into_iter().enumerate() {
                let start = 100 + 1_000 * i as u64;
                d.to(start);
                let (rid, out) = d.req(
                    "tools/call",
                    json!({"name": tool, "arguments": script(tool, 400, outcome).to_arguments()}),
                );
                assert!(out.is_empty());
                assert!(Drv::answer_of(&d.to(start + 399), rid).is_none());
                let a =
                    Drv::answer_of(&d.to(start + 400), rid).expect("answered after duration_ms");
                match outcome {
                    ScriptOutcome::ToolError => assert_eq!(a["error"]["code"], jsonrpc::TOOL_ERROR),
                    _ => {
                        assert_eq!(
                            a["result"]["content"][0]["text"],
                            json!(format!("{tool} ok"))
                        );
                        assert_eq!(
                            a["result"].get("isError") == Some(&json!(true)),
                            outcome == ScriptOutcome::Failed
                        );
                        assert!(a["result"]
                            .get("_meta")
                            .and_then(|m| m.get(RELATED))
                            .is_none());
                        assert_eq!(a["result"].get("_meta").is_some(), ext);
                    }
                }
            }
            let runs = &d.s.truth().sync_runs;
            assert_eq!(
                runs.iter().map(|r| r.side_effects).collect::<Vec<_>>(),
                vec![1, 1, 0]
            );
            assert!(d.s.truth().tasks.is_empty());
        }
    }
}
