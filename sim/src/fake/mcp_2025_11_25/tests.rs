//! Behaviour of the fake MCP server per profile: the test driver and method-level tests.
//! Lifecycle flows are in `tests_flow.rs`. Assertions are on parsed JSON.

use crate::fake::jsonrpc::{EXT_IDEMPOTENCY, META_RESULT_DIGEST, META_SYNC_UPPER_BOUND_MS};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use super::*;
use crate::fake::codec::FakeTool;
use crate::fake::jsonrpc;
use crate::fake::script::{ScriptOutcome, TaskScript};
use crate::fake::truth::{payload_digest, TaskStatus, WorkEnd};
use toolop::protocol::TaskSupport;

pub(super) const ALL: [Profile; 3] = [Profile::SpecStrict, Profile::TsSdk, Profile::PythonSdk];
pub(super) const RELATED: &str = "io.modelcontextprotocol/related-task";

pub(super) fn tools() -> Vec<FakeTool> {
    vec![
        FakeTool::new("opt", Some(TaskSupport::Optional)),
        FakeTool::new("req", Some(TaskSupport::Required)),
        FakeTool::new("forb", Some(TaskSupport::Forbidden)),
        FakeTool {
            name: "plain".into(),
            task_support: None,
            sync_upper_bound_ms: Some(250),
        },
    ]
}

pub(super) fn script(node: &str, duration_ms: u64, outcome: ScriptOutcome) -> TaskScript {
    TaskScript::for_test(node, duration_ms, outcome)
}

/// The JSON-RPC test client, with this protocol's constructors and submission.
pub(super) type Drv = crate::fake::testdrv::RpcDrv;

pub(super) trait McpDrv {
    fn new(profile: Profile, ext: bool) -> Self;
    fn with(cfg: McpConfig, seed: u64) -> Self;
    fn submit(&mut self, tool: &str, s: &TaskScript, task: Value) -> String;
    fn answer_of(out: &[Value], id: u64) -> Option<Value>;
}

impl McpDrv for Drv {
    fn new(profile: Profile, ext: bool) -> Drv {
        Drv::with(
            McpConfig {
                toolop_extensions: ext,
                ..McpConfig::new(profile, tools())
            },
            7,
        )
    }

    fn with(cfg: McpConfig, seed: u64) -> Drv {
        Drv::on(server(cfg, ChaCha8Rng::seed_from_u64(seed)))
    }

    /// Submit a task-augmented call; returns the task id.
    fn submit(&mut self, tool: &str, s: &TaskScript, task: Value) -> String {
        let r = self.call(
            "tools/call",
            json!({"name": tool, "arguments": s.to_arguments(), "task": task}),
        );
        r["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {r}"))
            .to_string()
    }

    fn answer_of(out: &[Value], id: u64) -> Option<Value> {
        out.iter()
            .find(|v| v["id"] == json!(id) && v.get("method").is_none())
            .cloned()
    }
}

pub(super) fn notes(out: &[Value]) -> Vec<String> {
    out.iter()
        .filter(|v| v["method"] == "notifications/tasks/status")
        .map(|v| v["params"]["status"].as_str().unwrap().to_string())
        .collect()
}

pub(super) fn elicitations(out: &[Value]) -> Vec<Value> {
    out.iter()
        .filter(|v| v["method"] == "elicitation/create")
        .cloned()
        .collect()
}

#[test]
fn timestamps_are_iso8601_from_the_sim_epoch() {
    assert_eq!(jsonrpc::iso8601(0, false), "2026-12-01T00:00:00.000Z");
    assert_eq!(jsonrpc::iso8601(1_500, true), "2026-12-01T00:00:01.500000Z");
    assert_eq!(
        jsonrpc::iso8601(31 * 86_400_000 + 3_723_004, false),
        "2027-01-01T01:02:03.004Z"
    );
    assert_eq!(
        jsonrpc::iso8601(90 * 86_400_000, false),
        "2027-03-01T00:00:00.000Z"
    );
}

#[test]
fn task_script_round_trips_and_defaults() {
    let s = TaskScript {
        call_node: "n1".into(),
        duration_ms: 5,
        outcome: ScriptOutcome::ToolError,
        text: "x".into(),
        input_at_ms: vec![1, 2],
        blocks: 3,
    };
    assert_eq!(s.to_value()["outcome"], "tool_error");
    assert_eq!(
        TaskScript::from_arguments(Some(&s.to_arguments())).unwrap(),
        s
    );
    assert_eq!(
        TaskScript::from_arguments(None).unwrap(),
        TaskScript::default()
    );
    assert_eq!(
        TaskScript::from_arguments(Some(&json!({"a": 1})))
            .unwrap()
            .duration_ms,
        1000
    );
    let partial = TaskScript::from_arguments(Some(&json!({"__sim": {"duration_ms": 7}}))).unwrap();
    assert_eq!(
        (partial.duration_ms, partial.outcome, partial.blocks),
        (7, ScriptOutcome::Completed, 1)
    );
    assert!(TaskScript::from_arguments(Some(&json!({"__sim": {"outcome": "bogus"}}))).is_err());
}

#[test]
fn initialize_answers_2025_11_25_with_task_capabilities() {
    for profile in ALL {
        for ext in [false, true] {
            let mut d = Drv::new(profile, ext);
            let r = d.call("initialize", json!({"protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
            let res = &r["result"];
            assert_eq!(res["protocolVersion"], "2025-11-25");
            assert_eq!(
                res["capabilities"]["tasks"],
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
            );
            assert_eq!(res["capabilities"]["tools"], json!({}));
            assert!(res["serverInfo"]["name"].is_string());
            assert_eq!(
                res["capabilities"]["experimental"]
                    .get(EXT_IDEMPOTENCY)
                    .is_some(),
                ext,
                "{profile:?}"
            );
            // A client notification gets nothing back.
            assert!(d
                .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .is_empty());
        }
    }
}

#[test]
fn tools_list_reports_task_support_and_sync_bound() {
    let mut d = Drv::new(Profile::TsSdk, true);
    let r = d.call("tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4);
    assert_eq!(tools[0]["execution"]["taskSupport"], "optional");
    assert_eq!(tools[1]["execution"]["taskSupport"], "required");
    assert_eq!(tools[2]["execution"]["taskSupport"], "forbidden");
    assert!(tools[3].get("execution").is_none());
    assert_eq!(tools[3]["_meta"][META_SYNC_UPPER_BOUND_MS], 250);
    assert!(tools[0].get("_meta").is_none());
    assert_eq!(tools[0]["inputSchema"], json!({"type": "object"}));
}

#[test]
fn task_creation_shape_per_profile() {
    // (profile, requested ttl, max ttl, expected ttl in the Task: None = key absent)
    type TtlCase = (Profile, Option<u64>, Option<u64>, Option<Value>);
    let cases: Vec<TtlCase> = vec![
        (Profile::TsSdk, Some(60_000), None, Some(json!(60_000))),
        (Profile::TsSdk, None, None, Some(Value::Null)),
        (Profile::SpecStrict, None, None, Some(Value::Null)),
        (Profile::PythonSdk, Some(60_000), None, Some(json!(60_000))),
        (Profile::PythonSdk, None, None, None), // the Python quirk: key omitted
        (
            Profile::TsSdk,
            Some(60_000),
            Some(30_000),
            Some(json!(30_000)),
        ),
        (
            Profile::TsSdk,
            Some(10_000),
            Some(30_000),
            Some(json!(10_000)),
        ),
        (Profile::PythonSdk, None, Some(30_000), Some(json!(30_000))),
        (Profile::SpecStrict, None, Some(30_000), Some(json!(30_000))),
    ];
    for (profile, requested, max, expected) in cases {
        let cfg = McpConfig {
            max_ttl_ms: max,
            ..McpConfig::new(profile, tools())
        };
        let mut d = Drv::with(cfg, 1);
        d.to(1_500);
        let task = match requested {
            Some(t) => json!({ "ttl": t }),
            None => json!({}),
        };
        let r = d.call("tools/call", json!({"name": "opt", "arguments": script("a", 100, ScriptOutcome::Completed).to_arguments(), "task": task}));
        let t = &r["result"]["task"];
        assert_eq!(
            t.get("ttl").cloned(),
            expected,
            "{profile:?} {requested:?} {max:?}: {t}"
        );
        assert_eq!(t["status"], "working");
        let id = t["taskId"].as_str().unwrap();
        let hex32 = |s: &str| {
            s.len() == 32
                && s.chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        };
        match profile {
            Profile::PythonSdk => {
                let (scope, uuid) = id.split_once(':').unwrap();
                assert!(hex32(scope), "{id}");
                let parts: Vec<&str> = uuid.split('-').collect();
                assert_eq!(
                    parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                    vec![8, 4, 4, 4, 12],
                    "{id}"
                );
                assert!(parts[2].starts_with('4'), "{id}");
                assert_eq!(t["createdAt"], "2026-12-01T00:00:01.500000Z");
                assert_eq!(t["pollInterval"], 500);
            }
            _ => {
                assert!(hex32(id), "{id}");
                assert_eq!(t["createdAt"], "2026-12-01T00:00:01.500Z");
                assert_eq!(t["pollInterval"], 1000);
            }
        }
        assert_eq!(t["lastUpdatedAt"], t["createdAt"]);
        assert_eq!(d.truth(id).created_at_ms, 1_500);
    }
    // Python ids share the session scope; the SDK's 500 wins over a configured poll interval
    // (a configured one wins elsewhere: the first loop's `pollInterval` is the default).
    let cfg = McpConfig {
        poll_interval_ms: Some(42),
        ..McpConfig::new(Profile::PythonSdk, tools())
    };
    let mut d = Drv::with(cfg, 3);
    let a = d.submit("opt", &TaskScript::default(), json!({}));
    let b = d.submit("opt", &TaskScript::default(), json!({}));
    assert_ne!(a, b);
    assert_eq!(a.split(':').next(), b.split(':').next());
    assert_eq!(d.get(&a)["result"]["pollInterval"], 500);
    let mut d = Drv::with(
        McpConfig {
            poll_interval_ms: Some(42),
            ..McpConfig::new(Profile::TsSdk, tools())
        },
        3,
    );
    let a = d.submit("opt", &TaskScript::default(), json!({}));
    assert_eq!(d.get(&a)["result"]["pollInterval"], 42);
}

#[test]
fn happy_path_poll_then_result_twice() {
    for profile in ALL {
        for ext in [false, true] {
            let mut d = Drv::new(profile, ext);
            let mut s = script("n1", 2_000, ScriptOutcome::Completed);
            s.blocks = 2;
            let id = d.submit("opt", &s, json!({"ttl": 60_000}));
            assert_eq!(d.s.next_event_at_ms(), Some(2_000));
            d.to(1_999);
            assert_eq!(d.status(&id), "working");
            let out = d.to(2_000);
            assert_eq!(d.status(&id), "completed");
            let expect_notes: Vec<String> = if profile == Profile::SpecStrict {
                vec![]
            } else {
                vec!["completed".into()]
            };
            assert_eq!(notes(&out), expect_notes, "{profile:?}");
            let g = d.get(&id);
            assert_eq!(
                g["result"]["lastUpdatedAt"],
                json!(jsonrpc::iso8601(2_000, profile == Profile::PythonSdk))
            );
            assert!(g["result"].get("_meta").is_none());
            let r1 = d.call("tasks/result", json!({ "taskId": id }));
            let r2 = d.call("tasks/result", json!({ "taskId": id }));
            assert_eq!(r1["result"], r2["result"]);
            let res = &r1["result"];
            assert_eq!(
                res["content"],
                json!([{"type": "text", "text": "n1 ok [1/2]"}, {"type": "text", "text": "n1 ok [2/2]"}])
            );
            assert_eq!(res["_meta"][RELATED]["taskId"], json!(id));
            // TS omits isError when false; Python and strict print it.
            assert_eq!(
                res.get("isError").cloned(),
                if profile == Profile::TsSdk {
                    None
                } else {
                    Some(json!(false))
                }
            );
            let mut bare = res.clone();
            bare.as_object_mut().unwrap().remove("_meta");
            let truth = d.truth(&id);
            assert_eq!(
                truth.result_digest.as_deref(),
                Some(payload_digest(&bare).as_str())
            );
            assert_eq!(res["_meta"].get(META_RESULT_DIGEST).is_some(), ext);
            if ext {
                assert_eq!(
                    res["_meta"][META_RESULT_DIGEST],
                    json!(payload_digest(&bare))
                );
            }
            assert_eq!(
                (
                    truth.side_effects,
                    truth.terminal_status,
                    truth.terminal_at_ms
                ),
                (1, Some(TaskStatus::Completed), Some(2_000))
            );
            assert_eq!(
                truth.work_end,
                Some(WorkEnd::Finished(ScriptOutcome::Completed))
            );
            assert_eq!(d.s.truth().effects_per_call_node["n1"], 1);
            assert_eq!(d.s.truth().tasks_created_per_call_node["n1"], 1);
            let l = d.call("tasks/list", json!({}));
            assert_eq!(l["result"]["tasks"][0]["taskId"], json!(id));
            assert_eq!(l["result"]["tasks"][0]["status"], "completed");
        }
    }
}

#[test]
fn failed_and_tool_error_outcomes() {
    // (profile, status after isError result, statusMessage of the tool_error task)
    let cases = [
        (Profile::SpecStrict, "failed"),
        (Profile::TsSdk, "failed"),
        (Profile::PythonSdk, "completed"), // Python never maps isError to failed
    ];
    for (profile, is_error_status) in cases {
        let mut d = Drv::new(profile, true);
        let f = d.submit("opt", &script("f", 100, ScriptOutcome::Failed), json!({}));
        let e = d.submit(
            "opt",
            &script("e", 100, ScriptOutcome::ToolError),
            json!({}),
        );
        d.to(100);
        assert_eq!(d.status(&f), is_error_status, "{profile:?}");
        let r = d.call("tasks/result", json!({ "taskId": f }));
        assert_eq!(r["result"]["isError"], true);
        assert_eq!(r["result"]["content"][0]["text"], "f ok");
        assert_eq!(d.truth(&f).side_effects, 1);
        let g = d.get(&e);
        assert_eq!(g["result"]["status"], "failed");
        assert_eq!(g["result"]["statusMessage"], "e ok");
        for _ in 0..2 {
            let r = d.call("tasks/result", json!({ "taskId": e }));
            if profile == Profile::PythonSdk {
                // A tool that raised: failed, no result stored, only `_meta`; the text is in
                // `statusMessage` alone.
                assert_eq!(
                    r["result"],
                    json!({"_meta": {"io.modelcontextprotocol/related-task": {"taskId": e}}}),
                    "{profile:?}"
                );
            } else {
                assert_eq!(r["error"]["code"], jsonrpc::TOOL_ERROR);
                assert_eq!(r["error"]["message"], "e ok");
            }
        }
        let te = d.truth(&e);
        assert_eq!(
            (
                te.side_effects,
                te.result_digest.clone(),
                te.terminal_status
            ),
            (0, None, Some(TaskStatus::Failed))
        );
    }
}

#[test]
fn cancel_terminal_and_unknown() {
    let cases = [
        (
            Profile::SpecStrict,
            "Cannot cancel task in terminal status: completed",
        ),
        (
            Profile::TsSdk,
            "MCP error -32602: Cannot cancel task in terminal status: completed",
        ),
        (
            Profile::PythonSdk,
            "Cannot cancel task in terminal state 'completed'",
        ),
    ];
    for (profile, text) in cases {
        let mut d = Drv::new(profile, false);
        let id = d.submit("opt", &script("x", 10, ScriptOutcome::Completed), json!({}));
        d.to(10);
        let r = d.call("tasks/cancel", json!({ "taskId": id }));
        assert_eq!(r["error"]["code"], -32602);
        assert_eq!(r["error"]["message"], text);
        assert_eq!(d.status(&id), "completed");
        let r = d.call("tasks/cancel", json!({"taskId": "nope"}));
        assert_eq!(r["error"]["code"], -32602);
    }
}

#[test]
fn unknown_task_messages() {
    // (profile, get message, result/cancel message)
    let cases = [
        (
            Profile::SpecStrict,
            "Task not found: zz",
            "Task not found: zz",
        ),
        (
            Profile::TsSdk,
            "MCP error -32602: Failed to retrieve task: Task not found",
            "MCP error -32602: Task not found: zz",
        ),
        (
            Profile::PythonSdk,
            "Task not found: zz",
            "Task not found: zz",
        ),
    ];
    for (profile, get_msg, other_msg) in cases {
        let mut d = Drv::new(profile, false);
        let r = d.call("tasks/get", json!({"taskId": "zz"}));
        assert_eq!(
            (r["error"]["code"].clone(), r["error"]["message"].clone()),
            (json!(-32602), json!(get_msg))
        );
        for m in ["tasks/result", "tasks/cancel"] {
            let r = d.call(m, json!({"taskId": "zz"}));
            assert_eq!(
                (r["error"]["code"].clone(), r["error"]["message"].clone()),
                (json!(-32602), json!(other_msg))
            );
        }
        let r = d.call("tasks/get", json!({}));
        let code = if profile == Profile::TsSdk {
            -32603
        } else {
            -32602
        };
        assert_eq!(r["error"]["code"], code, "{profile:?}");
    }
}

#[test]
fn protocol_errors() {
    for profile in ALL {
        let mut d = Drv::new(profile, false);
        let r = d.call("resources/list", json!({}));
        assert_eq!(r["error"]["code"], -32601);
        let out = d.send_raw(b"{not json".to_vec(), Some(9));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["error"]["code"], -32700);
        assert_eq!(out[0]["id"], Value::Null);
        let out = d.send(json!({"jsonrpc": "2.0", "id": 3}));
        assert_eq!(out[0]["error"]["code"], -32600);
        // A client response nobody waits for: no reply, recorded as stale.
        assert!(d
            .send(json!({"jsonrpc": "2.0", "id": 77, "result": {"action": "accept"}}))
            .is_empty());
        assert_eq!(d.s.truth().stale_input_responses.len(), 1);
        assert_eq!(d.s.truth().stale_input_responses[0].task_id, None);
        let r = d.call("ping", json!({}));
        assert_eq!(r["result"], json!({}));
        // String ids are echoed; no transport correlation.
        let out = d.send(json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
        assert_eq!(out[0]["id"], "s1");
    }
}

#[test]
fn tasks_list_paging_and_cursors() {
    let mut d = Drv::new(Profile::TsSdk, false);
    let ids: Vec<String> = (0..12)
        .map(|i| {
            d.submit(
                "opt",
                &script(&format!("n{i}"), 100, ScriptOutcome::Completed),
                json!({}),
            )
        })
        .collect();
    let p1 = d.call("tasks/list", json!({}));
    assert_eq!(p1["result"]["tasks"].as_array().unwrap().len(), 10);
    assert_eq!(p1["result"]["nextCursor"], json!(ids[9]));
    assert_eq!(p1["result"]["_meta"], json!({}));
    let p2 = d.call("tasks/list", json!({"cursor": ids[9]}));
    let got: Vec<Value> = p2["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].clone())
        .collect();
    assert_eq!(got, vec![json!(ids[10]), json!(ids[11])]);
    assert!(p2["result"].get("nextCursor").is_none());
    assert_eq!(
        d.call("tasks/list", json!({"cursor": "bogus"}))["error"]["code"],
        -32602
    );
    let mut py = Drv::new(Profile::PythonSdk, false);
    py.submit("opt", &TaskScript::default(), json!({}));
    assert_eq!(
        py.call("tasks/list", json!({"cursor": "bogus"}))["result"]["tasks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let mut st = Drv::new(Profile::SpecStrict, false);
    assert_eq!(
        st.call("tasks/list", json!({"cursor": "bogus"}))["error"]["code"],
        -32602
    );
}
