//! Behaviour of the fake AIP-151 service: a small HTTP driver, one test per behaviour, and the
//! adapter driven against the fake end to end. Assertions are on parsed JSON.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use toolop::protocol::aip151::{Aip151Adapter, Aip151Config};
use toolop::protocol::{Adapter, Outbound, Reply, RequestKind};
use toolop::record::ProtocolStatus;
use toolop::transport::{HttpTarget, InFrame, OutFrame};

use super::*;
use crate::fake::script::ScriptOutcome;
use crate::fake::service::CancelFaults;
use crate::fake::truth::{payload_digest, TaskStatus, TaskTruth, WorkEnd};
use crate::fake::FakeServer;

/// The service's settings in one place, as the tests vary them; built with the routes of the
/// adapter's configuration so that the adapter and the fake agree on paths.
#[derive(Clone, Debug)]
struct AipServerConfig {
    api: Aip151Config,
    name_prefix: String,
    toolop_extensions: bool,
    list_supported: bool,
    delete_supported: bool,
    cancel_on_done: CancelOnDone,
    cancel_delay_ms: (u64, u64),
    preempt_rate: f64,
    retention_after_done_ms: Option<u64>,
}

impl AipServerConfig {
    fn new(api: Aip151Config) -> AipServerConfig {
        AipServerConfig {
            api,
            name_prefix: "projects/p/locations/l/operations".into(),
            toolop_extensions: true,
            list_supported: true,
            delete_supported: true,
            cancel_on_done: CancelOnDone::Ok,
            cancel_delay_ms: (0, 200),
            preempt_rate: 0.0,
            retention_after_done_ms: None,
        }
    }

    fn server(&self, rng: ChaCha8Rng) -> FakeServer {
        let a = &self.api;
        let mut c = AipConfig::new(
            &a.submit_path,
            &a.operation_path,
            &a.operations_collection,
            a.tools.clone(),
        );
        c.name_prefix = self.name_prefix.clone();
        c.dedupe_window_ms = a.dedupe_window_ms;
        c.cancel_supported = a.cancel_supported;
        c.toolop_extensions = self.toolop_extensions;
        c.list_supported = self.list_supported;
        c.delete_supported = self.delete_supported;
        c.cancel_on_done = self.cancel_on_done;
        c.cancel_delay_ms = self.cancel_delay_ms;
        c.retention_after_done_ms = self.retention_after_done_ms;
        server(c, None, self.preempt_rate, rng)
    }
}

fn api() -> Aip151Config {
    Aip151Config {
        submit_path: "/v1/projects/p/reports:{tool}".into(),
        operation_path: "/v1/{name}".into(),
        operations_collection: "/v1/operations".into(),
        tools: vec!["build".into(), "export".into()],
        dedupe_window_ms: Some(10_000),
        cancel_supported: true,
    }
}

fn cfg() -> AipServerConfig {
    AipServerConfig::new(api())
}

fn script(node: &str, duration_ms: u64, outcome: ScriptOutcome) -> TaskScript {
    TaskScript::for_test(node, duration_ms, outcome)
}

/// A test client speaking plain HTTP to the fake, with fresh correlation ids.
struct Drv {
    s: FakeServer,
    now: u64,
    next_id: u64,
}

impl Drv {
    fn new(cfg: AipServerConfig) -> Drv {
        Drv::seeded(cfg, 7)
    }

    fn seeded(cfg: AipServerConfig, seed: u64) -> Drv {
        Drv {
            s: cfg.server(ChaCha8Rng::seed_from_u64(seed)),
            now: 0,
            next_id: 1,
        }
    }

    fn to(&mut self, t: u64) {
        self.now = t;
        assert!(
            self.s.advance_frames(t).is_empty(),
            "AIP has no server push"
        );
    }

    fn send(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.send_with(method, path, body, CancelFaults::default())
    }

    /// [`Drv::send`] with the fault decisions that ride on a cancel.
    fn send_with(
        &mut self,
        method: &str,
        path: &str,
        body: &[u8],
        faults: CancelFaults,
    ) -> (u16, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let frame = OutFrame {
            request_id: Some(id),
            body: body.to_vec(),
            http: Some(HttpTarget {
                method: method.into(),
                path: path.into(),
            }),
        };
        let out = self.s.handle_with(self.now, frame, faults);
        assert_eq!(out.len(), 1, "exactly one reply");
        let f = &out[0];
        assert_eq!(f.request_id, Some(id));
        assert_eq!(f.retry_after_ms, None);
        let v: Value = serde_json::from_slice(&f.body).expect("the fake sends JSON");
        if f.http_status != 200 {
            // The JSON error mapping: code is the HTTP status, status the canonical name.
            assert_eq!(v["error"]["code"], json!(f.http_status), "{v}");
            assert!(
                v["error"]["status"].is_string() && v["error"]["message"].is_string(),
                "{v}"
            );
        }
        (f.http_status, v)
    }

    fn submit(&mut self, tool: &str, key: Option<&str>, s: &TaskScript) -> (u16, Value) {
        let mut body = s.to_arguments();
        if let Some(k) = key {
            body["requestId"] = json!(k);
        }
        self.send(
            "POST",
            &format!("/v1/projects/p/reports:{tool}"),
            &serde_json::to_vec(&body).unwrap(),
        )
    }

    fn get(&mut self, name: &str) -> (u16, Value) {
        self.send("GET", &format!("/v1/{name}"), b"")
    }

    fn cancel(&mut self, name: &str) -> (u16, Value) {
        self.send("POST", &format!("/v1/{name}:cancel"), b"{}")
    }

    fn lookup(&mut self, key: &str) -> (u16, Value) {
        let path = api().lookup_path_for(key);
        self.send("GET", &path, b"")
    }

    fn truth(&self, name: &str) -> &TaskTruth {
        &self.s.truth().tasks[name]
    }
}

fn name_of(op: &Value) -> String {
    op["name"].as_str().expect("operation name").to_string()
}

fn status_name(v: &Value) -> &str {
    v["error"]["status"].as_str().unwrap_or("")
}

#[test]
fn an_operation_runs_for_its_duration_then_carries_its_response() {
    let mut d = Drv::new(cfg());
    let (st, op) = d.submit(
        "build",
        Some("k-1"),
        &script("n1", 1_000, ScriptOutcome::Completed),
    );
    assert_eq!(st, 200);
    let name = name_of(&op);
    assert!(
        name.starts_with("projects/p/locations/l/operations/op-"),
        "{name}"
    );
    // proto3: `done` omitted while false; no result yet; metadata typed.
    assert_eq!(op.get("done"), None);
    assert!(op.get("response").is_none() && op.get("error").is_none());
    assert_eq!(op["metadata"]["@type"], METADATA_TYPE);
    assert_eq!(d.s.next_event_at_ms(), Some(1_000));
    d.to(999);
    assert_eq!(d.get(&name).1.get("done"), None);
    d.to(1_000);
    let (st, op) = d.get(&name);
    assert_eq!(st, 200);
    assert_eq!(op["done"], true);
    let response = &op["response"];
    assert_eq!(response["@type"], RESPONSE_TYPE);
    assert_eq!(response["content"][0]["text"], "n1 ok");
    assert_eq!(
        op["metadata"][METADATA_RESULT_DIGEST],
        json!(payload_digest(response))
    );
    let t = d.truth(&name);
    assert_eq!(t.call_node, "n1");
    assert_eq!(t.tool, "build");
    assert_eq!(t.idempotency_key.as_deref(), Some("k-1"));
    assert_eq!(
        (t.status, t.terminal_status, t.terminal_at_ms),
        (
            TaskStatus::Completed,
            Some(TaskStatus::Completed),
            Some(1_000)
        )
    );
    assert_eq!(t.result_digest, Some(payload_digest(response)));
    assert_eq!(t.side_effects, 1);
    assert_eq!(
        t.work_end,
        Some(WorkEnd::Finished(ScriptOutcome::Completed))
    );
    assert_eq!(d.s.truth().tasks_created_per_call_node["n1"], 1);
    assert_eq!(d.s.truth().effects_per_call_node["n1"], 1);
    assert_eq!(d.s.next_event_at_ms(), None);
}

#[test]
fn a_zero_duration_operation_is_done_on_the_first_response() {
    let mut d = Drv::new(cfg());
    let (st, op) = d.submit("build", None, &script("z", 0, ScriptOutcome::Completed));
    assert_eq!(st, 200);
    assert_eq!(op["done"], true);
    assert!(op["response"].is_object());
    let t = d.truth(&name_of(&op));
    assert_eq!(
        (
            t.terminal_status,
            t.terminal_at_ms,
            t.idempotency_key.clone()
        ),
        (Some(TaskStatus::Completed), Some(0), None)
    );
}

#[test]
fn each_script_outcome_ends_the_operation_its_own_way() {
    let mut d = Drv::new(cfg());
    let cases = [
        (ScriptOutcome::Failed, Some(INTERNAL), TaskStatus::Failed, 1),
        (
            ScriptOutcome::ToolError,
            Some(FAILED_PRECONDITION),
            TaskStatus::Failed,
            0,
        ),
        (
            ScriptOutcome::DoneWithoutResult,
            None,
            TaskStatus::DoneWithoutResult,
            1,
        ),
    ];
    for (i, (outcome, code, status, effects)) in cases.into_iter().enumerate() {
        let node = format!("n{i}");
        let (_, op) = d.submit("export", None, &script(&node, 0, outcome));
        assert_eq!(op["done"], true, "{op}");
        assert!(op.get("response").is_none(), "{op}");
        match code {
            Some(c) => {
                assert_eq!(op["error"]["code"], json!(c));
                assert_eq!(op["error"]["message"], json!(format!("{node} ok")));
                assert!(op["error"]["details"].is_array());
            }
            // Done with neither field.
            None => assert!(op.get("error").is_none(), "{op}"),
        }
        let t = d.truth(&name_of(&op));
        assert_eq!(
            (t.terminal_status, t.side_effects, t.result_digest.clone()),
            (Some(status), effects, None),
            "{outcome:?}"
        );
        // The truth keeps the message the wire shows: what a failed entry downstream must
        // carry (outbox_payload_matches_truth; before, an error result's left it empty, and
        // any failed payload passed).
        assert_eq!(
            t.error_message.as_deref(),
            op["error"]["message"].as_str(),
            "{outcome:?}"
        );
    }
}

#[test]
fn request_id_dedupes_within_the_window_and_a_repeat_after_it_is_a_second_operation() {
    let mut d = Drv::new(cfg());
    let s = script("dup", 60_000, ScriptOutcome::Completed);
    let (_, first) = d.submit("build", Some("key-a"), &s);
    d.to(9_999);
    let (st, again) = d.submit("build", Some("key-a"), &s);
    assert_eq!(
        (st, &again),
        (200, &first),
        "the original operation, same name"
    );
    // Another key is another operation.
    let (_, other) = d.submit(
        "build",
        Some("key-b"),
        &script("other", 60_000, ScriptOutcome::Completed),
    );
    assert_ne!(name_of(&other), name_of(&first));
    assert_eq!(d.s.truth().duplicate_submits_deduped, 1);
    assert_eq!(d.truth(&name_of(&first)).dedupe_hits, 1);
    // The window counts from creation; past it the key is forgotten.
    d.to(10_000);
    let (_, second) = d.submit("build", Some("key-a"), &s);
    assert_ne!(name_of(&second), name_of(&first));
    assert_eq!(
        d.s.truth().tasks_created_per_call_node["dup"],
        2,
        "the second operation is recorded"
    );
    assert_eq!(d.s.truth().duplicate_submits_deduped, 1);
    // The key now dedupes to the newest operation.
    let (_, third) = d.submit("build", Some("key-a"), &s);
    assert_eq!(name_of(&third), name_of(&second));
    // Without a window, a key dedupes for ever.
    let mut api = api();
    api.dedupe_window_ms = None;
    let mut d = Drv::new(AipServerConfig::new(api));
    let (_, a) = d.submit("build", Some("k"), &s);
    d.to(1_000_000);
    assert_eq!(name_of(&d.submit("build", Some("k"), &s).1), name_of(&a));
}

#[test]
fn a_duplicate_inside_the_window_never_runs_the_work_twice_even_after_deletion() {
    let mut d = Drv::new(cfg());
    let s = script("gone", 100, ScriptOutcome::Completed);
    let (_, op) = d.submit("build", Some("k"), &s);
    let name = name_of(&op);
    assert_eq!(d.send("DELETE", &format!("/v1/{name}"), b"").0, 200);
    let (st, again) = d.submit("build", Some("k"), &s);
    assert_eq!(
        (st, name_of(&again)),
        (200, name.clone()),
        "stale success: the original operation"
    );
    assert_eq!(d.s.truth().tasks_created_per_call_node["gone"], 1);
}

#[test]
fn list_operations_answers_the_request_id_filter() {
    let mut d = Drv::new(cfg());
    let (_, a) = d.submit(
        "build",
        Some("k-a"),
        &script("a", 5_000, ScriptOutcome::Completed),
    );
    d.submit(
        "build",
        Some("k-b"),
        &script("b", 5_000, ScriptOutcome::Completed),
    );
    let (st, list) = d.lookup("k-a");
    assert_eq!(st, 200);
    assert_eq!(list["operations"].as_array().unwrap().len(), 1);
    assert_eq!(list["operations"][0], a);
    // Nothing matches: an empty list is `{}` in proto3 JSON.
    assert_eq!(d.lookup("k-none"), (200, json!({})));
    // Without a filter: every operation.
    assert_eq!(
        d.send("GET", "/v1/operations", b"").1["operations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Any other filter is refused.
    let (st, e) = d.send("GET", "/v1/operations?filter=done%3Dtrue", b"");
    assert_eq!((st, status_name(&e)), (400, "INVALID_ARGUMENT"));
    // Without the extension the request_id filter is refused as well.
    let mut c = cfg();
    c.toolop_extensions = false;
    let mut d = Drv::new(c);
    d.submit(
        "build",
        Some("k-a"),
        &script("a", 5_000, ScriptOutcome::Completed),
    );
    let (st, e) = d.lookup("k-a");
    assert_eq!((st, status_name(&e)), (400, "INVALID_ARGUMENT"));
    // A service without ListOperations.
    let mut c = cfg();
    c.list_supported = false;
    let mut d = Drv::new(c);
    let (st, e) = d.lookup("k-a");
    assert_eq!((st, status_name(&e)), (501, "UNIMPLEMENTED"));
}

#[test]
fn without_extensions_a_completed_operation_carries_no_digest() {
    let mut c = cfg();
    c.toolop_extensions = false;
    let mut d = Drv::new(c);
    let (_, op) = d.submit("build", None, &script("n", 0, ScriptOutcome::Completed));
    assert!(op["response"].is_object());
    assert!(op["metadata"].get(METADATA_RESULT_DIGEST).is_none());
}

#[test]
fn a_cancel_takes_effect_after_the_drawn_delay() {
    let mut c = cfg();
    c.cancel_delay_ms = (300, 300);
    let mut d = Drv::new(c);
    let (_, op) = d.submit(
        "build",
        None,
        &script("c", 10_000, ScriptOutcome::Completed),
    );
    let name = name_of(&op);
    d.to(1_000);
    assert_eq!(
        d.cancel(&name),
        (200, json!({})),
        "Empty: best effort, says nothing"
    );
    // Still running until the delay has passed; a second cancel changes nothing.
    d.to(1_299);
    assert_eq!(d.cancel(&name), (200, json!({})));
    assert_eq!(d.get(&name).1.get("done"), None);
    assert_eq!(d.s.next_event_at_ms(), Some(1_300));
    d.to(1_300);
    let op = d.get(&name).1;
    assert_eq!(op["done"], true);
    assert_eq!(op["error"], json!({"code": 1, "message": "CANCELLED"}));
    let t = d.truth(&name);
    assert_eq!(
        (t.terminal_status, t.terminal_at_ms, t.side_effects),
        (Some(TaskStatus::Cancelled), Some(1_300), 0)
    );
    assert_eq!(t.work_end, Some(WorkEnd::StoppedByCancel));
    // The completion that would have come is off the schedule.
    assert_eq!(d.s.next_event_at_ms(), None);
}

#[test]
fn completion_wins_a_cancel_that_takes_effect_too_late() {
    let mut c = cfg();
    c.cancel_delay_ms = (500, 500);
    let mut d = Drv::new(c);
    let (_, op) = d.submit(
        "build",
        None,
        &script("race", 1_000, ScriptOutcome::Completed),
    );
    let name = name_of(&op);
    d.to(600);
    assert_eq!(d.cancel(&name).0, 200);
    d.to(2_000);
    let op = d.get(&name).1;
    assert!(op["response"].is_object(), "{op}");
    let t = d.truth(&name);
    assert_eq!(
        (t.terminal_status, t.side_effects),
        (Some(TaskStatus::Completed), 1)
    );
    // At equal times the completion wins too.
    let mut d = Drv::new({
        let mut c = cfg();
        c.cancel_delay_ms = (400, 400);
        c
    });
    let (_, op) = d.submit(
        "build",
        None,
        &script("tie", 1_000, ScriptOutcome::Completed),
    );
    d.to(600);
    d.cancel(&name_of(&op));
    d.to(1_000);
    assert_eq!(
        d.truth(&name_of(&op)).terminal_status,
        Some(TaskStatus::Completed)
    );
}

#[test]
fn an_ignored_cancel_gets_its_empty_reply_and_the_operation_completes() {
    let mut c = cfg();
    c.cancel_delay_ms = (300, 300);
    let mut d = Drv::new(c);
    let (_, op) = d.submit(
        "build",
        None,
        &script("ign", 10_000, ScriptOutcome::Completed),
    );
    let name = name_of(&op);
    d.to(1_000);
    let ignore = CancelFaults {
        ignore: true,
        ..Default::default()
    };
    let path = format!("/v1/{name}:cancel");
    assert_eq!(d.send_with("POST", &path, b"{}", ignore), (200, json!({})));
    // Past the drawn delay, and after a second cancel: still running.
    d.to(5_000);
    assert_eq!(d.cancel(&name), (200, json!({})));
    assert_eq!(d.get(&name).1.get("done"), None);
    d.to(10_000);
    let op = d.get(&name).1;
    assert!(op["response"].is_object(), "{op}");
    let t = d.truth(&name);
    assert_eq!(
        (t.terminal_status, t.side_effects, t.cancel_ignored_at_ms),
        (Some(TaskStatus::Completed), 1, Some(1_000))
    );
}

#[test]
fn cancel_is_unimplemented_when_configured() {
    let mut a = api();
    a.cancel_supported = false;
    let mut d = Drv::new(AipServerConfig::new(a));
    let (_, op) = d.submit("build", None, &script("u", 1_000, ScriptOutcome::Completed));
    let (st, e) = d.cancel(&name_of(&op));
    assert_eq!((st, status_name(&e)), (501, "UNIMPLEMENTED"));
    d.to(1_000);
    assert_eq!(
        d.truth(&name_of(&op)).terminal_status,
        Some(TaskStatus::Completed)
    );
}

#[test]
fn cancel_of_a_done_operation_is_answered_as_configured() {
    for (mode, want) in [
        (CancelOnDone::Ok, (200, "")),
        (
            CancelOnDone::FailedPrecondition,
            (400, "FAILED_PRECONDITION"),
        ),
        (CancelOnDone::NotFound, (404, "NOT_FOUND")),
    ] {
        let mut c = cfg();
        c.cancel_on_done = mode;
        let mut d = Drv::new(c);
        let (_, op) = d.submit("build", None, &script("d", 0, ScriptOutcome::Completed));
        let (st, body) = d.cancel(&name_of(&op));
        assert_eq!((st, status_name(&body)), want, "{mode:?}");
        // Never an outcome: the operation stays completed.
        assert!(d.get(&name_of(&op)).1["response"].is_object());
    }
    // Cancel of an unknown operation: 404.
    let mut d = Drv::new(cfg());
    assert_eq!(d.cancel("projects/p/locations/l/operations/nope").0, 404);
}

#[test]
fn preemption_ends_the_configured_fraction_aborted() {
    let run = |rate: f64| {
        let mut c = cfg();
        c.preempt_rate = rate;
        let mut d = Drv::new(c);
        let names: Vec<String> = (0..40)
            .map(|i| {
                name_of(
                    &d.submit(
                        "build",
                        None,
                        &script(&format!("p{i}"), 1_000, ScriptOutcome::Completed),
                    )
                    .1,
                )
            })
            .collect();
        d.to(1_000);
        names
            .iter()
            .filter(|n| d.get(n).1["error"]["code"] == json!(ABORTED))
            .count()
    };
    assert_eq!(run(0.0), 0);
    assert_eq!(run(1.0), 40);
    let some = run(0.5);
    assert!((5..=35).contains(&some), "{some} of 40");
    // A pre-empted operation: error ABORTED before its end, failed, no side effect.
    let mut c = cfg();
    c.preempt_rate = 1.0;
    let mut d = Drv::new(c);
    let (_, op) = d.submit(
        "build",
        None,
        &script("pre", 1_000, ScriptOutcome::Completed),
    );
    let name = name_of(&op);
    let at = d.s.next_event_at_ms().unwrap();
    assert!(at < 1_000, "pre-empted during the run, at {at}");
    d.to(at);
    let op = d.get(&name).1;
    assert_eq!(
        (op["done"].clone(), op["error"]["code"].clone()),
        (json!(true), json!(10))
    );
    let t = d.truth(&name);
    assert_eq!(
        (t.terminal_status, t.side_effects),
        (Some(TaskStatus::Failed), 0)
    );
    assert_eq!(t.error_message.as_deref(), op["error"]["message"].as_str());
    assert_eq!(d.s.next_event_at_ms(), None);
}

#[test]
fn retention_deletes_the_record_counting_from_completion() {
    let mut c = cfg();
    c.retention_after_done_ms = Some(5_000);
    let mut d = Drv::new(c);
    let (_, op) = d.submit(
        "build",
        Some("k"),
        &script("r", 2_000, ScriptOutcome::Completed),
    );
    let name = name_of(&op);
    d.to(6_999);
    assert_eq!(
        d.get(&name).0,
        200,
        "retention runs from completion (2 000), not creation"
    );
    assert_eq!(
        d.lookup("k").1["operations"].as_array().map(Vec::len),
        Some(1)
    );
    d.to(7_000);
    let (st, e) = d.get(&name);
    assert_eq!((st, status_name(&e)), (404, "NOT_FOUND"));
    assert_eq!(d.lookup("k"), (200, json!({})));
    assert_eq!(d.cancel(&name).0, 404);
    let t = d.truth(&name);
    assert_eq!(
        (t.deleted_at_ms, t.terminal_status),
        (Some(7_000), Some(TaskStatus::Completed))
    );
}

#[test]
fn delete_drops_the_record_but_the_work_continues() {
    let mut d = Drv::new(cfg());
    let (_, op) = d.submit(
        "build",
        None,
        &script("del", 1_000, ScriptOutcome::Completed),
    );
    let name = name_of(&op);
    d.to(100);
    assert_eq!(
        d.send("DELETE", &format!("/v1/{name}"), b""),
        (200, json!({}))
    );
    assert_eq!(d.get(&name).0, 404);
    assert_eq!(d.send("DELETE", &format!("/v1/{name}"), b"").0, 404);
    d.to(1_000);
    let t = d.truth(&name);
    assert_eq!(
        (t.side_effects, t.effects_after_deletion, t.deleted_at_ms),
        (1, 1, Some(100))
    );
    assert_eq!(
        t.work_end,
        Some(WorkEnd::Finished(ScriptOutcome::Completed))
    );
    assert_eq!(t.terminal_status, None, "nobody could see the end");
    assert_eq!(d.s.truth().effects_per_call_node["del"], 1);
    // Delete may be unimplemented.
    let mut c = cfg();
    c.delete_supported = false;
    let mut d = Drv::new(c);
    let (_, op) = d.submit("build", None, &script("x", 1_000, ScriptOutcome::Completed));
    assert_eq!(
        d.send("DELETE", &format!("/v1/{}", name_of(&op)), b"").0,
        501
    );
}

#[test]
fn bad_requests_are_refused_before_any_operation_exists() {
    let mut d = Drv::new(cfg());
    let cases: [(&str, &str, &[u8], u16); 7] = [
        ("POST", "/v1/projects/p/reports:build", b"not json", 400),
        ("POST", "/v1/projects/p/reports:build", b"[1]", 400),
        (
            "POST",
            "/v1/projects/p/reports:build",
            br#"{"requestId": 5}"#,
            400,
        ),
        (
            "POST",
            "/v1/projects/p/reports:build",
            br#"{"__sim": {"duration_ms": "x"}}"#,
            400,
        ),
        ("POST", "/v1/projects/p/reports:nosuch", b"{}", 404),
        (
            "PUT",
            "/v1/projects/p/locations/l/operations/op-1",
            b"{}",
            404,
        ),
        ("GET", "/v2/elsewhere", b"", 404),
    ];
    for (m, p, body, want) in cases {
        assert_eq!(d.send(m, p, body).0, want, "{m} {p}");
    }
    assert!(d.s.truth().tasks.is_empty());
    // A frame without an HTTP target: no reply when uncorrelated, 400 when it awaits one.
    assert!(d
        .s
        .handle(
            0,
            OutFrame {
                request_id: None,
                body: vec![],
                http: None
            }
        )
        .is_empty());
    let r = d.s.handle(
        0,
        OutFrame {
            request_id: Some(99),
            body: vec![],
            http: None,
        },
    );
    assert_eq!(
        (r.len(), r[0].http_status, r[0].request_id),
        (1, 400, Some(99))
    );
}

#[test]
fn routes_follow_the_configured_templates() {
    let a = Aip151Config {
        submit_path: "/v2beta/{tool}:run".into(),
        operation_path: "/v2beta/regions/eu/{name}".into(),
        operations_collection: "/v2beta/regions/eu/operations".into(),
        tools: vec!["build".into()],
        dedupe_window_ms: None,
        cancel_supported: true,
    };
    let mut c = AipServerConfig::new(a.clone());
    c.name_prefix = "operations".into();
    let mut d = Drv::new(c);
    let body =
        serde_json::to_vec(&script("t", 1_000, ScriptOutcome::Completed).to_arguments()).unwrap();
    let (st, op) = d.send("POST", "/v2beta/build:run", &body);
    assert_eq!(st, 200);
    let name = name_of(&op);
    assert!(name.starts_with("operations/op-"));
    assert_eq!(d.send("GET", &a.operation_path_for(&name), b"").0, 200);
    assert_eq!(
        d.send("GET", &format!("/v1/{name}"), b"").0,
        404,
        "the default route is not this service's"
    );
    assert_eq!(d.send("POST", &a.cancel_path_for(&name), b"{}").0, 200);
    assert_eq!(d.send("GET", "/v2beta/regions/eu/operations", b"").0, 200);
}

/// One fixed conversation; returns every reply and the truth.
fn conversation(seed: u64) -> (Vec<(u16, Value)>, String) {
    let mut c = cfg();
    c.preempt_rate = 0.3;
    c.cancel_delay_ms = (0, 2_000);
    c.retention_after_done_ms = Some(3_000);
    let mut d = Drv::seeded(c, seed);
    let mut out = vec![];
    let mut names = vec![];
    for i in 0..8u64 {
        d.to(i * 100);
        let r = d.submit(
            "build",
            Some(&format!("k{i}")),
            &script(&format!("n{i}"), 500 + i * 300, ScriptOutcome::Completed),
        );
        names.push(name_of(&r.1));
        out.push(r);
    }
    for (i, n) in names.iter().enumerate() {
        if i % 2 == 0 {
            out.push(d.cancel(n));
        }
    }
    for t in (1_000..8_000).step_by(700) {
        d.to(t);
        for n in &names {
            out.push(d.get(n));
        }
    }
    (out, serde_json::to_string(d.s.truth()).unwrap())
}

#[test]
fn equal_seeds_give_identical_replies_and_truth() {
    assert_eq!(conversation(42), conversation(42));
    assert_ne!(conversation(42).0, conversation(43).0);
}

/// One exchange: the adapter encodes, the fake answers, the adapter decodes.
fn call(
    adapter: &Aip151Adapter,
    s: &mut FakeServer,
    now: u64,
    kind: RequestKind,
    out: Outbound,
) -> Reply {
    let frames: Vec<InFrame> = s.handle(now, adapter.encode_frame(9, &out));
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].request_id, Some(9));
    adapter.decode_reply(kind, &frames[0])
}

#[test]
fn the_adapter_and_the_fake_agree_end_to_end() {
    let adapter = Aip151Adapter::new(api());
    let cases = [
        (
            ScriptOutcome::Completed,
            ProtocolStatus::Completed,
            "result",
        ),
        (
            ScriptOutcome::Failed,
            ProtocolStatus::Failed,
            "result_is_error",
        ),
        (
            ScriptOutcome::ToolError,
            ProtocolStatus::Failed,
            "result_is_error",
        ),
        (
            ScriptOutcome::DoneWithoutResult,
            ProtocolStatus::DoneWithoutResult,
            "no_result_stored",
        ),
    ];
    for (i, (outcome, status, fetched)) in cases.into_iter().enumerate() {
        let mut s = cfg().server(ChaCha8Rng::seed_from_u64(i as u64));
        let node = format!("e{i}");
        let arguments = script(&node, 1_000, outcome).to_arguments();
        let submit = Outbound::Submit {
            key: format!("key-{i}"),
            tool: "build".into(),
            arguments,
            ttl_ms: None,
        };
        let Reply::Submitted(v) = call(&adapter, &mut s, 0, RequestKind::Submit, submit.clone())
        else {
            panic!("submitted")
        };
        assert_eq!(v.status, ProtocolStatus::Working);
        let name = v.operation_id.clone();
        // A resubmission under the same key finds the same operation; so does a lookup.
        assert_eq!(
            call(&adapter, &mut s, 10, RequestKind::Submit, submit),
            Reply::Submitted(v.clone())
        );
        assert_eq!(
            call(
                &adapter,
                &mut s,
                20,
                RequestKind::Lookup,
                Outbound::LookupByKey {
                    key: format!("key-{i}")
                }
            ),
            Reply::LookupFound(v.clone())
        );
        assert_eq!(
            call(
                &adapter,
                &mut s,
                20,
                RequestKind::Lookup,
                Outbound::LookupByKey {
                    key: "other".into()
                }
            ),
            Reply::LookupNotFound
        );
        let Reply::Status(done) = call(
            &adapter,
            &mut s,
            1_000,
            RequestKind::Poll,
            Outbound::Poll {
                operation_id: name.clone(),
            },
        ) else {
            panic!("status")
        };
        assert_eq!(done.status, status, "{outcome:?}");
        let r = call(
            &adapter,
            &mut s,
            1_000,
            RequestKind::Fetch,
            Outbound::FetchResult {
                operation_id: name.clone(),
            },
        );
        assert_eq!(r.name(), fetched, "{r:?}");
        let truth = s.truth().tasks[&name].clone();
        if let Reply::Result(rv) = &r {
            assert!(rv.verified, "{rv:?}");
            assert_eq!(Some(&rv.digest), truth.result_digest.as_ref());
            assert_eq!(rv.related_operation_id.as_deref(), Some(name.as_str()));
        }
        // Cancel of the done operation: OK by default, which is "pending", never an outcome.
        assert_eq!(
            call(
                &adapter,
                &mut s,
                1_100,
                RequestKind::Cancel,
                Outbound::Cancel {
                    operation_id: name.clone()
                }
            ),
            Reply::CancelPending
        );
        assert_eq!(s.truth().tasks_created_per_call_node[&node], 1);
    }
    // A cancel that wins, read through the adapter.
    let mut c = cfg();
    c.cancel_delay_ms = (10, 10);
    let mut s = c.server(ChaCha8Rng::seed_from_u64(1));
    let submit = Outbound::Submit {
        key: "kc".into(),
        tool: "build".into(),
        arguments: script("c", 5_000, ScriptOutcome::Completed).to_arguments(),
        ttl_ms: None,
    };
    let Reply::Submitted(v) = call(&adapter, &mut s, 0, RequestKind::Submit, submit) else {
        panic!("submitted")
    };
    let name = v.operation_id;
    assert_eq!(
        call(
            &adapter,
            &mut s,
            100,
            RequestKind::Cancel,
            Outbound::Cancel {
                operation_id: name.clone()
            }
        ),
        Reply::CancelPending
    );
    let Reply::Status(v) = call(
        &adapter,
        &mut s,
        110,
        RequestKind::Poll,
        Outbound::Poll {
            operation_id: name.clone(),
        },
    ) else {
        panic!("status")
    };
    assert_eq!(v.status, ProtocolStatus::Cancelled);
    assert_eq!(
        call(
            &adapter,
            &mut s,
            110,
            RequestKind::Fetch,
            Outbound::FetchResult {
                operation_id: name.clone()
            }
        )
        .name(),
        "no_result_stored"
    );
    // Cancel on a service without it reads as an error, never as an outcome.
    let mut a = api();
    a.cancel_supported = false;
    let adapter = Aip151Adapter::new(a.clone());
    let mut s = AipServerConfig::new(a).server(ChaCha8Rng::seed_from_u64(1));
    let out = Outbound::Cancel {
        operation_id: "projects/p/locations/l/operations/op-x".into(),
    };
    let r = adapter.decode_reply(
        RequestKind::Cancel,
        &s.handle(0, adapter.encode_frame(1, &out))[0],
    );
    assert!(
        matches!(r, Reply::Error { ref message } if message.starts_with("UNIMPLEMENTED")),
        "{r:?}"
    );
}

fn task_view(status: TaskStatus, outcome: Option<Outcome>) -> TaskView {
    TaskView::for_test("op-1", status, outcome, None)
}

fn codec_with(cancel_on_done: CancelOnDone) -> AipCodec {
    let a = api();
    let mut c = AipConfig::new(
        &a.submit_path,
        &a.operation_path,
        &a.operations_collection,
        a.tools.clone(),
    );
    c.cancel_on_done = cancel_on_done;
    AipCodec::new(c)
}

/// What the trace says a reply showed is what the wire carries: a done operation carries a
/// result exactly when its JSON has a `response` or an `error` (done without a result has
/// neither), and a cancel of a done operation shows what the profile answers (`200 {}` is an
/// accepted cancel to the client; NOT_FOUND a not-found). The checkers credit an executor with
/// these facts.
#[test]
fn what_a_reply_shows_is_what_its_wire_carries() {
    let codec = codec_with(CancelOnDone::Ok);
    let result = Outcome::Result(ResultBody {
        text: "r".into(),
        blocks: 1,
        is_error: false,
    });
    for (status, outcome) in [
        (TaskStatus::Completed, Some(result)),
        (
            TaskStatus::Failed,
            Some(Outcome::ToolError {
                message: "no".into(),
            }),
        ),
        (
            TaskStatus::Cancelled,
            Some(Outcome::Stopped(Stop::Cancelled)),
        ),
        (TaskStatus::Completed, Some(Outcome::Nothing)),
        (TaskStatus::Working, None),
    ] {
        let v = task_view(status, outcome);
        let wire = codec.op_json(&v, "op-1", false);
        let on_wire = wire.get("response").is_some() || wire.get("error").is_some();
        for exchange in [ExchangeKind::Poll, ExchangeKind::Submit] {
            match codec.shows(exchange, &Response::Task(v.clone())) {
                Shows::Task { result, .. } => {
                    assert_eq!(result, on_wire, "{status:?} {:?}: {wire}", v.outcome)
                }
                other => panic!("a task shows a task: {other:?}"),
            }
        }
    }
    let done = Response::CancelRejected {
        status: TaskStatus::Completed,
    };
    for (profile, expected) in [
        (CancelOnDone::Ok, Shows::CancelAccepted),
        (
            CancelOnDone::FailedPrecondition,
            Shows::CancelRejected {
                status: TaskStatus::Completed,
            },
        ),
        (
            CancelOnDone::NotFound,
            Shows::NotFound {
                expired: false,
                hidden: false,
            },
        ),
    ] {
        let codec = codec_with(profile);
        assert_eq!(codec.shows(ExchangeKind::Cancel, &done), expected);
        let ctx = Ctx {
            request_id: None,
            what: What::Cancel {
                name: "op-1".into(),
            },
        };
        let (status, _) = codec.answer(&ctx, &done, &Shape::default());
        let want = match expected {
            Shows::CancelAccepted => 200,
            Shows::NotFound { .. } => 404,
            _ => 400,
        };
        assert_eq!(status, want, "{profile:?}");
    }
}
