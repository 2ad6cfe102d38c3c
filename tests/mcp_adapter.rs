//! The MCP 2025-11-25 adapter against the official schema and against real server text.
//!
//! 1. Every message the adapter emits validates against `tests/data/mcp-2025-11-25.schema.json`,
//!    both as its JSON-RPC envelope and as its specific `$defs` type.
//! 2. Real replies recorded from the TS SDK, the Python SDK and server-everything
//!    (`tests/data/transcripts/`) decode to the right protocol-neutral `Reply`; the server text is
//!    read from the jsonl records, never retyped. Every server message of every transcript is
//!    replayed and its classification compared with a committed expectation file (`replay`).
//! 3. Decoding never panics, whatever the bytes.
//! 4. HTTP status replies (429/503/202/404) map to their own replies.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{json, Value};
use toolop::digest::value_digest;
use toolop::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use toolop::protocol::{
    Adapter, ApprovalReply, Inbound, Outbound, Reply, RequestKind, TaskSupport, EXT_IDEMPOTENCY,
    META_IDEMPOTENCY_KEY, META_LOOKUP_KEY, META_RESULT_DIGEST, META_SYNC_UPPER_BOUND_MS,
};
use toolop::record::{AdapterId, ProtocolStatus};
use toolop::transport::InFrame;

mod replay;
use replay::{sse_data, TRANSCRIPTS};

const SCHEMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/mcp-2025-11-25.schema.json"
);
const TS: &str = "ts-sdk-1.32.2";
const PY: &str = "python-mcp-1.30.0";
const EV: &str = "server-everything-2026.8.31";
const RMCP: &str = "rmcp-3.11.0";
const RMCP_FILE: &str = "tasks-extension-stdio";

const ALL_KINDS: [RequestKind; 9] = [
    RequestKind::Initialize,
    RequestKind::ListTools,
    RequestKind::Submit,
    RequestKind::SubmitSync,
    RequestKind::Lookup,
    RequestKind::Poll,
    RequestKind::Fetch,
    RequestKind::Cancel,
    RequestKind::InputResponse,
];

fn adapter() -> Mcp20251125Adapter {
    Mcp20251125Adapter::new()
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the adapter emits JSON")
}

// ---------------------------------------------------------------------------------------------
// Schema validation

/// The schema file's `$defs`, loaded once.
fn defs() -> &'static Value {
    static DEFS: OnceLock<Value> = OnceLock::new();
    DEFS.get_or_init(|| {
        let text = std::fs::read_to_string(SCHEMA).expect("schema file");
        let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
        schema["$defs"].clone()
    })
}

/// A validator for one `$defs` type: `{"$ref": "#/$defs/<def>"}` next to the file's `$defs`.
fn validator(def: &str) -> jsonschema::Validator {
    assert!(defs().get(def).is_some(), "schema has no $defs/{def}");
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/$defs/{def}"),
        "$defs": defs(),
    });
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn schema_errors(def: &str, instance: &Value) -> Vec<String> {
    validator(def)
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

fn assert_valid(def: &str, instance: &Value) {
    let errors = schema_errors(def, instance);
    assert!(
        errors.is_empty(),
        "not a valid {def}: {errors:?}\n{instance:#}"
    );
}

/// Validate an emitted message as its envelope and as its specific type.
fn assert_message_valid(envelope: &str, specific: &str, msg: &Value) {
    assert_valid(envelope, msg);
    assert_valid("JSONRPCMessage", msg);
    assert_valid(specific, msg);
}

fn submit(ttl_ms: Option<u64>) -> Outbound {
    Outbound::Submit {
        key: "key-1".into(),
        tool: "build_report".into(),
        arguments: json!({"month": "2026-10"}),
        ttl_ms,
    }
}

fn input_response(id: Value, reply: ApprovalReply) -> Outbound {
    Outbound::InputResponse {
        operation_id: "e7Yx1c".into(),
        server_request_id: id,
        reply,
    }
}

#[test]
fn every_emitted_message_kind_validates_against_the_schema() {
    let a = adapter();
    let init = parse(&a.encode_initialize(1));
    assert_message_valid("JSONRPCRequest", "InitializeRequest", &init);
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert!(init["params"]["capabilities"]["elicitation"].is_object());

    let initialized = parse(
        &a.encode_initialized()
            .expect("MCP has notifications/initialized"),
    );
    assert_message_valid(
        "JSONRPCNotification",
        "InitializedNotification",
        &initialized,
    );
    assert!(initialized.get("id").is_none(), "a notification has no id");

    for cursor in [None, Some("page-2")] {
        let list = parse(&a.encode_list_tools(2, cursor));
        assert_message_valid("JSONRPCRequest", "ListToolsRequest", &list);
        assert_eq!(list["params"].get("cursor").and_then(Value::as_str), cursor);
    }

    // (outbound, envelope, specific type, method)
    let requests: Vec<(Outbound, &str)> = vec![
        (submit(Some(120_000)), "CallToolRequest"),
        (submit(None), "CallToolRequest"),
        (
            Outbound::SubmitSync {
                key: "key-2".into(),
                tool: "echo".into(),
                arguments: json!({"text": "hi"}),
            },
            "CallToolRequest",
        ),
        (
            Outbound::SubmitSync {
                key: "key-3".into(),
                tool: "ping".into(),
                arguments: Value::Null,
            },
            "CallToolRequest",
        ),
        (
            Outbound::LookupByKey {
                key: "key-1".into(),
            },
            "ListTasksRequest",
        ),
        (
            Outbound::Poll {
                operation_id: "q9Zr2w".into(),
            },
            "GetTaskRequest",
        ),
        (
            Outbound::FetchResult {
                operation_id: "q9Zr2w".into(),
            },
            "GetTaskPayloadRequest",
        ),
        (
            Outbound::Cancel {
                operation_id: "q9Zr2w".into(),
            },
            "CancelTaskRequest",
        ),
    ];
    for (rpc_id, (out, def)) in (10u64..).zip(requests) {
        let msg = parse(&a.encode(rpc_id, &out));
        assert_message_valid("JSONRPCRequest", def, &msg);
        assert_valid("ClientRequest", &msg);
        assert_eq!(msg["id"], rpc_id);
    }

    for id in [
        json!(0),
        json!(41),
        json!("task-abc:def-139671787959024"),
        json!("srv-5"),
    ] {
        for reply in [
            ApprovalReply::Accept {
                content: json!({"ok": true, "n": 3, "tags": ["a"]}),
            },
            ApprovalReply::Decline,
            ApprovalReply::Cancel,
        ] {
            let msg = parse(&a.encode(99, &input_response(id.clone(), reply.clone())));
            assert_message_valid("JSONRPCResponse", "JSONRPCResultResponse", &msg);
            assert_valid("ElicitResult", &msg["result"]);
            assert_valid("ClientResult", &msg["result"]);
            assert_eq!(
                msg["id"], id,
                "the server's id is echoed verbatim, not our rpc id"
            );
            assert_eq!(
                msg["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                "e7Yx1c"
            );
            assert_eq!(
                msg["result"].get("content").is_some(),
                matches!(reply, ApprovalReply::Accept { .. })
            );
        }
    }
}

#[test]
fn encoded_requests_carry_what_the_executor_asked_for() {
    let a = adapter();
    let call = parse(&a.encode(7, &submit(Some(60_000))));
    assert_eq!(call["method"], "tools/call");
    assert_eq!(call["params"]["name"], "build_report");
    assert_eq!(call["params"]["arguments"], json!({"month": "2026-10"}));
    assert_eq!(call["params"]["task"], json!({"ttl": 60_000}));
    assert_eq!(call["params"]["_meta"][META_IDEMPOTENCY_KEY], "key-1");
    assert_eq!(
        parse(&a.encode(7, &submit(None)))["params"]["task"],
        json!({})
    );

    let sync = Outbound::SubmitSync {
        key: "k".into(),
        tool: "echo".into(),
        arguments: json!({}),
    };
    let sync = parse(&a.encode(8, &sync));
    assert!(
        sync["params"].get("task").is_none(),
        "a synchronous call must not ask for a task"
    );
    assert_eq!(sync["params"]["_meta"][META_IDEMPOTENCY_KEY], "k");

    let lookup = parse(&a.encode(9, &Outbound::LookupByKey { key: "k".into() }));
    assert_eq!(lookup["method"], "tasks/list");
    assert_eq!(lookup["params"]["_meta"][META_LOOKUP_KEY], "k");

    for (out, method) in [
        (
            Outbound::Poll {
                operation_id: "t1".into(),
            },
            "tasks/get",
        ),
        (
            Outbound::FetchResult {
                operation_id: "t1".into(),
            },
            "tasks/result",
        ),
        (
            Outbound::Cancel {
                operation_id: "t1".into(),
            },
            "tasks/cancel",
        ),
    ] {
        let msg = parse(&a.encode(10, &out));
        assert_eq!(msg["method"], method);
        assert_eq!(msg["params"], json!({"taskId": "t1"}));
    }
    assert_eq!(a.id(), AdapterId::Mcp20251125);
}

#[test]
fn validator_rejects_deliberately_wrong_messages() {
    // If these pass, the validator is not really checking and the positive tests mean nothing.
    let wrong: [(&str, Value); 8] = [
        (
            "GetTaskRequest",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}),
        ),
        (
            "GetTaskRequest",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/gets", "params": {"taskId": "t"}}),
        ),
        (
            "CallToolRequest",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "task": {"ttl": "60s"}}}),
        ),
        (
            "CallToolRequest",
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {"name": "x"}}),
        ),
        ("ElicitResult", json!({"action": "maybe"})),
        (
            "ElicitResult",
            json!({"action": "accept", "content": {"nested": {"no": 1}}}),
        ),
        (
            "JSONRPCNotification",
            json!({"jsonrpc": "1.0", "method": "notifications/initialized"}),
        ),
        (
            "InitializeRequest",
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
        ),
    ];
    for (def, msg) in wrong {
        assert!(
            !schema_errors(def, &msg).is_empty(),
            "{def} accepted a wrong message: {msg}"
        );
    }
}

#[test]
fn real_server_messages_against_the_schema_show_the_python_ttl_quirk() {
    let result = |dir, file, seq| server_json(dir, file, seq)["result"].clone();
    assert_valid("CreateTaskResult", &result(TS, "09-ttl-expiry", 31)); // "ttl": null
    assert_valid("CreateTaskResult", &result(PY, "02-happy-path-poll", 10));
    assert_valid("GetTaskResult", &result(TS, "02-happy-path-poll", 34));
    assert_valid("CallToolResult", &result(TS, "02-happy-path-poll", 38));
    assert_valid("CancelTaskResult", &result(TS, "04-cancel-running", 15));
    assert_valid("ElicitRequest", &server_json(TS, "08-input-required", 17));
    // Python omits `ttl` when none was requested: invalid per the schema, decoded anyway.
    let errors = schema_errors("CreateTaskResult", &result(PY, "09-ttl-expiry", 31));
    assert!(errors.iter().any(|e| e.contains("ttl")), "{errors:?}");
    // Python's empty tasks/result for a cancelled task is not a CallToolResult (no content).
    assert!(!schema_errors("CallToolResult", &result(PY, "04-cancel-running", 22)).is_empty());
}

fn arb_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,40}".prop_map(Value::from)
    ]
}

/// Values an ElicitResult may carry (string, integer, boolean, string array).
fn arb_elicit_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::collection::vec(any::<String>(), 0..3).prop_map(Value::from),
    ]
}

fn arb_args() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(any::<String>(), arb_json(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn arb_outbound() -> impl Strategy<Value = Outbound> {
    let content = prop::collection::btree_map(any::<String>(), arb_elicit_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()));
    let reply = prop_oneof![
        content.prop_map(|content| ApprovalReply::Accept { content }),
        Just(ApprovalReply::Decline),
        Just(ApprovalReply::Cancel),
    ];
    prop_oneof![
        (
            any::<String>(),
            any::<String>(),
            arb_args(),
            any::<Option<u64>>()
        )
            .prop_map(|(key, tool, arguments, ttl_ms)| Outbound::Submit {
                key,
                tool,
                arguments,
                ttl_ms
            }),
        (any::<String>(), any::<String>(), arb_args()).prop_map(|(key, tool, arguments)| {
            Outbound::SubmitSync {
                key,
                tool,
                arguments,
            }
        }),
        any::<String>().prop_map(|key| Outbound::LookupByKey { key }),
        any::<String>().prop_map(|operation_id| Outbound::Poll { operation_id }),
        any::<String>().prop_map(|operation_id| Outbound::FetchResult { operation_id }),
        any::<String>().prop_map(|operation_id| Outbound::Cancel { operation_id }),
        (any::<String>(), arb_id(), reply).prop_map(|(operation_id, server_request_id, reply)| {
            Outbound::InputResponse {
                operation_id,
                server_request_id,
                reply,
            }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn emitted_messages_validate_for_arbitrary_inputs(rpc_id in any::<u64>(), out in arb_outbound()) {
        static VALIDATORS: OnceLock<HashMap<&'static str, jsonschema::Validator>> = OnceLock::new();
        let validators = VALIDATORS.get_or_init(|| {
            ["JSONRPCMessage", "ClientRequest", "ElicitResult"].into_iter().map(|d| (d, validator(d))).collect()
        });
        let msg = parse(&adapter().encode(rpc_id, &out));
        prop_assert!(validators["JSONRPCMessage"].is_valid(&msg), "{msg}");
        if let Outbound::InputResponse { .. } = out {
            prop_assert!(validators["ElicitResult"].is_valid(&msg["result"]), "{msg}");
        } else {
            prop_assert!(validators["ClientRequest"].is_valid(&msg), "{msg}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Transcripts

fn records(dir: &str, file: &str) -> Vec<Value> {
    let path = format!("{TRANSCRIPTS}/{dir}/{file}.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("jsonl record"))
        .collect()
}

/// The verbatim server text of record `seq`: an SSE event's `data_raw`, or an HTTP body (the
/// initialize response keeps its SSE framing in `body_raw`, so its data is extracted).
fn server_text(dir: &str, file: &str, seq: u64) -> String {
    let recs = records(dir, file);
    let rec = recs
        .iter()
        .find(|r| r["seq"] == seq)
        .unwrap_or_else(|| panic!("{dir}/{file} has no seq {seq}"));
    match rec["kind"].as_str() {
        Some("sse_event") => rec["data_raw"].as_str().expect("data_raw").to_string(),
        Some("http_response") => {
            let body = rec["body_raw"].as_str().expect("body_raw");
            if body.starts_with("event:") || body.starts_with("id:") {
                let mut events = sse_data(body);
                assert_eq!(events.len(), 1, "{dir}/{file} {seq}: one message expected");
                events.remove(0)
            } else {
                body.to_string()
            }
        }
        other => panic!("{dir}/{file} seq {seq} is a {other:?} record, not server text"),
    }
}

fn server_json(dir: &str, file: &str, seq: u64) -> Value {
    serde_json::from_str(&server_text(dir, file, seq)).expect("server JSON")
}

fn server_frame(dir: &str, file: &str, seq: u64) -> InFrame {
    InFrame::message(server_text(dir, file, seq).into_bytes())
}

fn decode(kind: RequestKind, dir: &str, file: &str, seq: u64) -> Reply {
    adapter().decode_reply(kind, &server_frame(dir, file, seq))
}

/// One recorded reply and the reply kind it must decode to.
struct Case {
    dir: &'static str,
    file: &'static str,
    seq: u64,
    kind: RequestKind,
    expect: &'static str,
}

const fn case(
    dir: &'static str,
    file: &'static str,
    seq: u64,
    kind: RequestKind,
    expect: &'static str,
) -> Case {
    Case {
        dir,
        file,
        seq,
        kind,
        expect,
    }
}

fn check(c: &Case) -> Reply {
    let reply = decode(c.kind, c.dir, c.file, c.seq);
    assert_eq!(
        reply.name(),
        c.expect,
        "{}/{} seq {} as {:?}: {reply:?}",
        c.dir,
        c.file,
        c.seq,
        c.kind
    );
    reply
}

#[test]
fn decodes_real_transcript_replies() {
    use RequestKind::*;
    let cases = [
        // CreateTaskResult: ttl echoed, ttl null (TS), ttl omitted (Python), ttl overridden (EV).
        case(TS, "02-happy-path-poll", 10, Submit, "submitted"),
        case(TS, "09-ttl-expiry", 31, Submit, "submitted"),
        case(PY, "02-happy-path-poll", 10, Submit, "submitted"),
        case(PY, "09-ttl-expiry", 31, Submit, "submitted"),
        case(EV, "E1-everything-research", 14, Submit, "submitted"),
        // Augmentation mismatches the SDKs refuse before running anything, as tool-error
        // results (§14): refusals, whichever way the call was sent (the transcript's own kind
        // and its documented variant).
        case(TS, "10-augmentation-edges", 8, SubmitSync, "submit_refused"),
        case(TS, "10-augmentation-edges", 8, Submit, "submit_refused"),
        case(PY, "10-augmentation-edges", 8, SubmitSync, "submit_refused"),
        case(PY, "10-augmentation-edges", 8, Submit, "submit_refused"),
        case(PY, "10-augmentation-edges", 12, Submit, "submit_refused"),
        case(PY, "10-augmentation-edges", 20, Submit, "submit_refused"),
        case(
            EV,
            "E1-everything-research",
            47,
            SubmitSync,
            "submit_refused",
        ),
        // TS -32602 "Invalid task creation result": sent after the tool ran (forbidden tool) or
        // for an unknown tool, in the same words: the outcome is unknown, never a refusal.
        case(
            TS,
            "10-augmentation-edges",
            12,
            Submit,
            "submit_outcome_unknown",
        ),
        case(
            TS,
            "10-augmentation-edges",
            20,
            Submit,
            "submit_outcome_unknown",
        ),
        case(
            EV,
            "E1-everything-research",
            52,
            Submit,
            "submit_outcome_unknown",
        ),
        case(
            TS,
            "10-augmentation-edges",
            12,
            SubmitSync,
            "submit_outcome_unknown",
        ),
        // A plain result, with or without `task` asked: the server ran the call inline.
        case(TS, "10-augmentation-edges", 16, Submit, "sync_result"),
        case(TS, "10-augmentation-edges", 16, SubmitSync, "sync_result"),
        case(PY, "10-augmentation-edges", 16, SubmitSync, "sync_result"),
        // tasks/get
        case(TS, "02-happy-path-poll", 13, Poll, "status"),
        case(TS, "02-happy-path-poll", 34, Poll, "status"),
        case(TS, "07-failing-task", 17, Poll, "status"),
        case(TS, "08-input-required", 14, Poll, "status"),
        case(PY, "02-happy-path-poll", 34, Poll, "status"),
        case(PY, "07-failing-task", 17, Poll, "status"),
        case(PY, "08-input-required", 14, Poll, "status"),
        case(EV, "E1-everything-research", 34, Poll, "status"),
        case(TS, "06-unknown-task", 8, Poll, "not_found"),
        case(TS, "09-ttl-expiry", 24, Poll, "not_found"),
        case(PY, "06-unknown-task", 8, Poll, "not_found"),
        case(PY, "09-ttl-expiry", 24, Poll, "not_found"),
        case(EV, "E3-everything-cancel", 37, Poll, "not_found"),
        case(TS, "06-unknown-task", 22, Poll, "error"), // -32603 zod text for a missing taskId
        // tasks/result
        case(TS, "02-happy-path-poll", 38, Fetch, "result"),
        case(TS, "07-failing-task", 20, Fetch, "result"),
        case(TS, "08-input-required", 21, Fetch, "result"),
        case(PY, "02-happy-path-poll", 38, Fetch, "result"),
        case(PY, "07-failing-task", 20, Fetch, "result"),
        case(PY, "08-input-required", 21, Fetch, "result"),
        case(EV, "E1-everything-research", 38, Fetch, "result"),
        case(TS, "04-cancel-running", 22, Fetch, "no_result_stored"),
        case(
            TS,
            "12-cancel-while-result-pending",
            14,
            Fetch,
            "no_result_stored",
        ),
        case(EV, "E3-everything-cancel", 27, Fetch, "no_result_stored"),
        case(PY, "04-cancel-running", 22, Fetch, "no_result_stored"),
        case(
            PY,
            "12-cancel-while-result-pending",
            14,
            Fetch,
            "no_result_stored",
        ),
        case(TS, "06-unknown-task", 11, Fetch, "not_found"),
        case(TS, "09-ttl-expiry", 27, Fetch, "not_found"),
        case(PY, "06-unknown-task", 11, Fetch, "not_found"),
        case(PY, "09-ttl-expiry", 27, Fetch, "not_found"),
        // tasks/cancel
        case(TS, "04-cancel-running", 15, Cancel, "cancel_ack"),
        case(
            TS,
            "12-cancel-while-result-pending",
            13,
            Cancel,
            "cancel_ack",
        ),
        case(PY, "04-cancel-running", 15, Cancel, "cancel_ack"),
        case(
            PY,
            "12-cancel-while-result-pending",
            13,
            Cancel,
            "cancel_ack",
        ),
        case(EV, "E3-everything-cancel", 17, Cancel, "cancel_ack"),
        case(
            TS,
            "04-cancel-running",
            26,
            Cancel,
            "cancel_rejected_terminal",
        ),
        case(
            TS,
            "05-cancel-completed",
            20,
            Cancel,
            "cancel_rejected_terminal",
        ),
        case(
            PY,
            "04-cancel-running",
            26,
            Cancel,
            "cancel_rejected_terminal",
        ),
        case(
            PY,
            "05-cancel-completed",
            20,
            Cancel,
            "cancel_rejected_terminal",
        ),
        case(
            EV,
            "E3-everything-cancel",
            22,
            Cancel,
            "cancel_rejected_terminal",
        ),
        case(TS, "06-unknown-task", 14, Cancel, "not_found"),
        case(PY, "06-unknown-task", 14, Cancel, "not_found"),
        case(TS, "11-cross-session", 18, Cancel, "not_found"),
        // tasks/list as a lookup
        case(TS, "02-happy-path-poll", 46, Lookup, "lookup_found"),
        case(PY, "02-happy-path-poll", 46, Lookup, "lookup_found"),
        case(EV, "E1-everything-research", 42, Lookup, "lookup_found"),
        case(TS, "11-cross-session", 21, Lookup, "lookup_not_found"),
        case(PY, "11-cross-session", 21, Lookup, "lookup_not_found"),
        case(TS, "06-unknown-task", 18, Lookup, "error"), // -32602 invalid cursor
    ];
    for c in &cases {
        check(c);
    }
    // As the runner does: classify a frame, then decode it, on one adapter. The JSON the
    // classification keeps decodes to the same reply as a fresh adapter's; a decode of other
    // bytes (the frame classified before) never takes it.
    let a = adapter();
    let mut before: Option<(&Case, InFrame, Reply)> = None;
    for c in &cases {
        let f = server_frame(c.dir, c.file, c.seq);
        let alone = adapter().decode_reply(c.kind, &f);
        a.classify(&f);
        if let Some((b, bf, b_alone)) = before.as_ref().filter(|(_, bf, _)| bf.body != f.body) {
            let got = a.decode_reply(b.kind, bf);
            assert_eq!(
                &got, b_alone,
                "{}/{} #{} after another's classification",
                b.dir, b.file, b.seq
            );
            a.classify(&f);
        }
        assert_eq!(
            a.decode_reply(c.kind, &f),
            alone,
            "{}/{} #{} classified first",
            c.dir,
            c.file,
            c.seq
        );
        before = Some((c, f, alone));
    }
}

fn task_of(reply: Reply) -> toolop::protocol::TaskView {
    match reply {
        Reply::Submitted(t)
        | Reply::Status(t)
        | Reply::LookupFound(t)
        | Reply::CancelAcknowledged(t) => t,
        other => panic!("expected a task view, got {other:?}"),
    }
}

#[test]
fn task_fields_from_real_servers() {
    use RequestKind::*;
    let t = task_of(decode(Submit, TS, "02-happy-path-poll", 10));
    assert_eq!(t.operation_id, "a333d5b6d2fa9d3becd9d9ce948da0ab");
    assert_eq!(
        (t.status, t.ttl_ms, t.poll_interval_ms, t.status_message),
        (ProtocolStatus::Working, Some(60_000), Some(500), None)
    );
    // ttl null (TS) and ttl omitted (Python) both mean "no retention reported".
    assert_eq!(
        task_of(decode(Submit, TS, "09-ttl-expiry", 31)).ttl_ms,
        None
    );
    let py = task_of(decode(Submit, PY, "09-ttl-expiry", 31));
    assert_eq!((py.ttl_ms, py.poll_interval_ms), (None, Some(500)));
    assert_eq!(
        py.operation_id,
        "c428679a84bd4e08a5eb522bc9e97a83:c36d4352-8df7-4004-97e0-a894c18d2da9"
    );
    // server-everything overrides the requested 60000 with 300000 and says so.
    let ev = task_of(decode(Submit, EV, "E1-everything-research", 14));
    assert_eq!(
        (ev.ttl_ms, ev.poll_interval_ms),
        (Some(300_000), Some(1000))
    );
    assert_eq!(ev.status_message.as_deref(), Some("Gathering sources..."));

    for (dir, file, seq, status) in [
        (TS, "02-happy-path-poll", 34, ProtocolStatus::Completed),
        (TS, "07-failing-task", 17, ProtocolStatus::Failed),
        (TS, "08-input-required", 14, ProtocolStatus::InputRequired),
        (PY, "08-input-required", 14, ProtocolStatus::InputRequired),
        // Python maps a tool's isError result to `completed`, not `failed` (§14).
        (PY, "07-failing-task", 17, ProtocolStatus::Completed),
        (TS, "04-cancel-running", 30, ProtocolStatus::Cancelled),
    ] {
        assert_eq!(
            task_of(decode(Poll, dir, file, seq)).status,
            status,
            "{dir}/{file} {seq}"
        );
    }
    let ack = task_of(decode(Cancel, TS, "04-cancel-running", 15));
    assert_eq!(ack.status, ProtocolStatus::Cancelled);
    assert_eq!(
        ack.status_message.as_deref(),
        Some("Client cancelled task execution.")
    );
    assert_eq!(
        task_of(decode(Lookup, TS, "02-happy-path-poll", 46)).operation_id,
        "a333d5b6d2fa9d3becd9d9ce948da0ab"
    );
}

fn result_of(reply: Reply) -> toolop::protocol::ResultView {
    match reply {
        Reply::Result(r) | Reply::SyncResult(r) => r,
        other => panic!("expected a result view, got {other:?}"),
    }
}

#[test]
fn fetched_results_from_real_servers_are_verified() {
    let ts = result_of(decode(RequestKind::Fetch, TS, "02-happy-path-poll", 38));
    assert!(ts.verified, "{:?}", ts.problem);
    assert!(!ts.is_error);
    assert_eq!(
        ts.payload,
        json!({"content": [{"type": "text", "text": "slow_job finished after 3s"}]})
    );
    assert_eq!(ts.digest, value_digest(&ts.payload));
    assert_eq!(
        ts.related_operation_id.as_deref(),
        Some("a333d5b6d2fa9d3becd9d9ce948da0ab")
    );
    // Fetching twice gives the same payload, so the same digest.
    assert_eq!(
        result_of(decode(RequestKind::Fetch, TS, "02-happy-path-poll", 42)).digest,
        ts.digest
    );

    let py = result_of(decode(RequestKind::Fetch, PY, "02-happy-path-poll", 38));
    assert!(py.verified && !py.is_error);
    assert!(py.payload.get("_meta").is_none(), "payload excludes _meta");
    assert_eq!(py.payload["isError"], false);

    for dir in [TS, PY] {
        let failed = result_of(decode(RequestKind::Fetch, dir, "07-failing-task", 20));
        assert!(failed.verified && failed.is_error, "{dir}: {failed:?}");
        assert_eq!(
            failed.payload["content"][0]["text"],
            "failing_job: simulated upstream failure"
        );
    }
    let ev = result_of(decode(RequestKind::Fetch, EV, "E1-everything-research", 38));
    assert!(ev.verified);
    assert_eq!(
        ev.related_operation_id.as_deref(),
        Some("079b073dac0776e2908d3ee476ceebb2")
    );

    // A synchronous tool-error result is the tool's outcome, kept with is_error (rmcp's
    // `tool_error`, called without a task).
    let rmcp = replay::stdio_transcript(RMCP, RMCP_FILE, None);
    let frame = &rmcp
        .messages
        .iter()
        .find(|m| m.label == "134")
        .expect("rmcp seq 134")
        .frame;
    let sync = result_of(adapter().decode_reply(RequestKind::SubmitSync, frame));
    assert!(
        sync.is_error && sync.verified && sync.related_operation_id.is_none(),
        "{sync:?}"
    );
}

#[test]
fn refusals_and_errors_keep_the_server_text() {
    match decode(RequestKind::Submit, TS, "10-augmentation-edges", 8) {
        Reply::SubmitRefused { reason } => {
            assert!(reason.contains("requires task augmentation"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    match decode(RequestKind::Submit, PY, "10-augmentation-edges", 12) {
        Reply::SubmitRefused { reason } => assert_eq!(
            reason,
            "This tool does not support task-augmented invocation"
        ),
        other => panic!("{other:?}"),
    }
    match decode(RequestKind::Fetch, TS, "04-cancel-running", 22) {
        Reply::NoResultStored { message } => assert!(message.contains("has no result stored")),
        other => panic!("{other:?}"),
    }
    match decode(RequestKind::Poll, PY, "09-ttl-expiry", 24) {
        Reply::NotFound { message } => assert!(message.starts_with("Task not found")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cancel_of_a_terminal_task_is_told_from_not_found_by_text_for_both_sdks() {
    for (dir, file, seq, text) in [
        (
            TS,
            "05-cancel-completed",
            20,
            "Cannot cancel task in terminal status: completed",
        ),
        (
            PY,
            "05-cancel-completed",
            20,
            "Cannot cancel task in terminal state 'completed'",
        ),
        (
            TS,
            "04-cancel-running",
            26,
            "Cannot cancel task in terminal status: cancelled",
        ),
        (
            PY,
            "04-cancel-running",
            26,
            "Cannot cancel task in terminal state 'cancelled'",
        ),
    ] {
        match decode(RequestKind::Cancel, dir, file, seq) {
            Reply::CancelRejectedTerminal { message } => {
                assert!(message.ends_with(text), "{message}")
            }
            other => panic!("{dir}/{file}: {other:?}"),
        }
    }
    // The spec's own example wording (basic/utilities/tasks.mdx) and its not-found examples.
    for (message, expect) in [
        (
            "Cannot cancel task: already in terminal status 'completed'",
            "cancel_rejected_terminal",
        ),
        ("Failed to retrieve task: Task not found", "not_found"),
        ("Failed to retrieve task: Task has expired", "not_found"),
        // Wordings no SDK or spec example uses decide nothing: the core reads the task instead.
        // A substring reading took the first for "already terminal" and the second for "not found".
        ("Task not found (already deleted)", "error"),
        ("task q9Zr2w is already cancelled", "error"),
        ("no such task: zz00", "error"),
    ] {
        assert_eq!(
            error_to(RequestKind::Cancel, -32602, message).name(),
            expect,
            "{message}"
        );
    }
    // Not-found by the spec's code on a read, whatever the words.
    assert_eq!(
        error_to(RequestKind::Poll, -32602, "no such task: zz00").name(),
        "not_found"
    );
    assert_eq!(
        error_to(
            RequestKind::Fetch,
            -32602,
            "Task not found (already deleted)"
        )
        .name(),
        "not_found"
    );
}

#[test]
fn elicitation_requests_with_numeric_and_string_ids() {
    let a = adapter();
    for (dir, file, seq, task) in [
        (
            TS,
            "08-input-required",
            17,
            "e44a394fdef02808a60a730f7051ca8b",
        ),
        (
            PY,
            "08-input-required",
            17,
            "12fb05db03594ad08bc58a1b49592f2b:fde1626c-ee7f-452f-a6d3-1a3aaed86460",
        ),
        (
            EV,
            "E2-everything-input-required",
            25,
            "a58b7cb7ea03cf33ddfbbcdbc28a53a7",
        ), // no `mode`
    ] {
        let raw = server_json(dir, file, seq);
        let Inbound::InputRequest(req) = a.classify(&server_frame(dir, file, seq)) else {
            panic!("{dir}/{file} {seq} is not an input request");
        };
        assert_eq!(req.server_request_id, raw["id"]);
        assert_eq!(req.related_operation_id.as_deref(), Some(task));
        assert_eq!(
            req.message,
            raw["params"]["message"].as_str().expect("message")
        );
        assert_eq!(req.requested_schema, raw["params"]["requestedSchema"]);
        assert_eq!(
            req.schema_digest,
            value_digest(&raw["params"]["requestedSchema"])
        );
        assert_eq!(req.raw, raw);

        // The answer echoes the server's id verbatim and validates.
        let reply = ApprovalReply::Accept {
            content: json!({"answer": "Ada"}),
        };
        let out = Outbound::InputResponse {
            operation_id: task.into(),
            server_request_id: req.server_request_id.clone(),
            reply,
        };
        let msg = parse(&a.encode(1, &out));
        assert_eq!(msg["id"], raw["id"]);
        assert_message_valid("JSONRPCResponse", "JSONRPCResultResponse", &msg);
        assert_valid("ElicitResult", &msg["result"]);
    }
    let ts = server_json(TS, "08-input-required", 17);
    assert_eq!(ts["id"], json!(0));
    assert!(server_json(PY, "08-input-required", 17)["id"].is_string());
}

fn frame(
    status: u16,
    request_id: Option<u64>,
    retry_after_ms: Option<u64>,
    body: &[u8],
) -> InFrame {
    InFrame {
        request_id,
        http_status: status,
        retry_after_ms,
        body: body.to_vec(),
    }
}

#[test]
fn classifies_real_inbound_frames() {
    let a = adapter();
    // A status notification is read as the task it carries (the runner hands it on only
    // after a confirmed cancel); one whose params are no task is malformed, never a panic.
    for sdk in [TS, PY] {
        match a.classify(&server_frame(sdk, "02-happy-path-poll", 17)) {
            Inbound::StatusPushed(v) => {
                assert!(!v.operation_id.is_empty(), "{sdk}: {v:?}");
                assert_eq!(v.status, ProtocolStatus::Working, "{sdk}");
            }
            other => panic!("{sdk}: {other:?}"),
        }
    }
    let no_task = br#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"status":"completed"}}"#;
    match a.classify(&frame(200, None, None, no_task)) {
        Inbound::Malformed { reason } => {
            assert!(
                reason.starts_with("notifications/tasks/status: "),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    let other_note = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
    assert!(matches!(
        a.classify(&frame(200, None, None, other_note)),
        Inbound::Ignored { .. }
    ));
    assert_eq!(
        a.classify(&server_frame(TS, "02-happy-path-poll", 10)),
        Inbound::Response { rpc_id: 2 }
    );
    assert_eq!(
        a.classify(&server_frame(PY, "06-unknown-task", 14)),
        Inbound::Response { rpc_id: 4 }
    );
    // server-everything's SSE priming event: an empty data line.
    assert!(matches!(
        a.classify(&server_frame(EV, "E1-everything-research", 7)),
        Inbound::Ignored { .. }
    ));

    // Python's stale-session 404 carries `"id":"server-error"`: the transport's correlation wins.
    let py404 = server_text(PY, "11-cross-session", 34);
    let f = frame(404, Some(3), None, py404.as_bytes());
    assert_eq!(a.classify(&f), Inbound::Response { rpc_id: 3 });
    match a.decode_reply(RequestKind::Poll, &f) {
        Reply::Error { message } => {
            assert!(
                message.contains("404") && message.contains("Session not found"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    // TS answers a stale session with 400 and `"id":null`.
    let ts400 = server_text(TS, "11-cross-session", 34);
    let f = frame(400, Some(3), None, ts400.as_bytes());
    assert_eq!(a.classify(&f), Inbound::Response { rpc_id: 3 });
    assert_eq!(a.decode_reply(RequestKind::Poll, &f).name(), "error");

    // Other server requests get an answer (a ping an empty result); odd bodies.
    let ping = br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    match a.classify(&InFrame::message(ping.to_vec())) {
        Inbound::ServerRequest(req) => {
            assert_eq!(
                (req.id, req.method.as_str(), req.answer),
                (json!(5), "ping", toolop::protocol::ServerAnswer::Empty)
            );
        }
        other => panic!("{other:?}"),
    }
    let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}"#;
    assert!(matches!(
        a.classify(&InFrame::message(progress.to_vec())),
        Inbound::Ignored { .. }
    ));
    assert!(matches!(
        a.classify(&InFrame::message(Vec::new())),
        Inbound::Ignored { .. }
    ));
    assert!(matches!(
        a.classify(&InFrame::message(
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"res".to_vec()
        )),
        Inbound::Malformed { .. }
    ));
    assert!(matches!(
        a.classify(&InFrame::message(b"[1,2]".to_vec())),
        Inbound::Malformed { .. }
    ));
    let bad_elicit = br#"{"jsonrpc":"2.0","id":{"x":1},"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}"#;
    assert!(matches!(
        a.classify(&InFrame::message(bad_elicit.to_vec())),
        Inbound::Malformed { .. }
    ));
}

/// The one table of phrasings the MCP adapters act on (`src/protocol/wording.rs`), rendered
/// as markdown and compared with `tests/data/wording-table.md`: a row added, changed or
/// dropped shows as a diff in review.
#[test]
fn the_wording_table_is_the_reviewed_one() {
    use toolop::protocol::wording::PHRASES;
    let mut md = String::from(
        "# Phrasings the MCP adapters act on\n\nGenerated from `src/protocol/wording.rs` by `tests/mcp_adapter.rs` \
         (`UPDATE_EXPECT=1` rewrites it). A phrase matches the whole message: `{id}`/`{name}` one token without \
         whitespace, `{status}` a terminal status word, `{rest}` anything at the end. Anything not listed \
         falls back to the code's meaning (see the module docs). TS and Python source lines are those of tag \
         v1.29.0 of each SDK (the newest 1.x source at hand); the transcripts are of TS 1.32.2 and Python 1.30.0.\n\n| meaning | carried as | exact phrase | source |\n| --- | --- | --- | --- |\n",
    );
    for p in PHRASES {
        let pattern = p.pattern.replace('|', "\\|");
        md.push_str(&format!(
            "| {} | {} | `{pattern}` | {} |\n",
            p.meaning.name(),
            p.carrier.name(),
            p.source
        ));
    }
    expect_test::expect_file!["data/wording-table.md"].assert_eq(&md);
}

/// An HTTP exchange belongs to its POST: a body naming another request is an operating error on
/// that exchange, never a reply to the other request (the real reply of TS 02-happy-path-poll
/// seq 10 answers request 2). The exchange ends at once as malformed (and is retried) instead of
/// waiting for its timeout.
#[test]
fn a_reply_naming_another_request_than_its_exchange_is_an_operating_error() {
    let a = adapter();
    let text = server_text(TS, "02-happy-path-poll", 10);
    assert_eq!(
        a.classify(&frame(200, Some(2), None, text.as_bytes())),
        Inbound::Response { rpc_id: 2 }
    );
    assert_eq!(
        a.classify(&frame(200, None, None, text.as_bytes())),
        Inbound::Response { rpc_id: 2 }
    );
    let other = frame(200, Some(5), None, text.as_bytes());
    assert_eq!(
        a.classify(&other),
        Inbound::Response { rpc_id: 5 },
        "routed by the exchange, not by the body"
    );
    match a.decode_reply(RequestKind::Poll, &other) {
        Reply::Malformed { reason } => assert!(
            reason.contains("names request 2") && reason.contains("request 5"),
            "{reason}"
        ),
        got => panic!("a reply to request 2 on the exchange of request 5 became {got:?}"),
    }
    // No numeric id in the body: the exchange decides (TS 400 with `id: null`).
    let ts400 = server_text(TS, "11-cross-session", 34);
    assert_eq!(
        a.classify(&frame(400, Some(5), None, ts400.as_bytes())),
        Inbound::Response { rpc_id: 5 }
    );
    // Server requests and notifications on the stream of a POST are not replies to it.
    let elicit = server_text(TS, "08-input-required", 17);
    assert!(matches!(
        a.classify(&frame(200, Some(6), None, elicit.as_bytes())),
        Inbound::InputRequest(_)
    ));
}

#[test]
fn negotiation_with_real_servers() {
    let a = adapter();
    for (dir, file, seq) in [
        (TS, "01-initialize-list", 3),
        (PY, "01-initialize-list", 3),
        (EV, "E1-everything-research", 2),
    ] {
        let caps = a
            .decode_initialize(&server_frame(dir, file, seq))
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(caps.protocol_version, "2025-11-25");
        assert!(
            caps.tasks_tool_call && caps.tasks_cancel && caps.tasks_list,
            "{dir}: {caps:?}"
        );
        assert!(
            !caps.idempotency_by_key,
            "no real server has the toolop extension"
        );
    }

    let (tools, next) = a
        .decode_list_tools(&server_frame(TS, "01-initialize-list", 8))
        .expect("TS tools");
    let by_name: BTreeMap<_, _> = tools.iter().map(|t| (t.name.as_str(), t)).collect();
    assert_eq!(next, None);
    assert_eq!(by_name["echo"].task_support, TaskSupport::Forbidden);
    assert_eq!(by_name["slow_job"].task_support, TaskSupport::Optional);
    assert_eq!(by_name["needs_input"].task_support, TaskSupport::Required);
    let raw = server_json(TS, "01-initialize-list", 8);
    assert_eq!(
        by_name["echo"].descriptor_digest,
        value_digest(&raw["result"]["tools"][0])
    );

    // Python leaves `execution` out for a forbidden tool: the default is forbidden.
    let (py, _) = a
        .decode_list_tools(&server_frame(PY, "01-initialize-list", 8))
        .expect("PY tools");
    let echo = py.iter().find(|t| t.name == "echo").expect("echo");
    assert!(
        server_json(PY, "01-initialize-list", 8)["result"]["tools"][0]
            .get("execution")
            .is_none()
    );
    assert_eq!(echo.task_support, TaskSupport::Forbidden);

    let (ev, _) = a
        .decode_list_tools(&server_frame(EV, "E1-everything-research", 8))
        .expect("EV tools");
    let research = ev
        .iter()
        .find(|t| t.name == "simulate-research-query")
        .expect("research tool");
    assert_eq!(research.task_support, TaskSupport::Required);
}

#[test]
fn negotiation_reads_extensions_and_refuses_other_versions() {
    let a = adapter();
    let init = |result: Value| {
        InFrame::message(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": result}))
                .expect("json"),
        )
    };
    let caps = a
        .decode_initialize(&init(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"experimental": {EXT_IDEMPOTENCY: {}}, "tasks": {"cancel": {}}},
            "serverInfo": {"name": "s", "version": "1"}
        })))
        .expect("caps");
    assert!(
        caps.idempotency_by_key && caps.tasks_cancel && !caps.tasks_list && !caps.tasks_tool_call
    );

    for bad in [
        json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
        json!({"protocolVersion": "2026-07-28", "capabilities": {"tasks": {}}}),
        json!({"capabilities": {}}),
        json!({"protocolVersion": "2025-11-25"}),
    ] {
        assert!(a.decode_initialize(&init(bad.clone())).is_err(), "{bad}");
    }
    let err = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unsupported protocol version"}}"#;
    assert!(a
        .decode_initialize(&InFrame::message(err.to_vec()))
        .is_err());
    assert!(a
        .decode_initialize(&frame(503, Some(1), Some(10), b""))
        .is_err());

    let list = |result: Value| a.decode_list_tools(&init(result));
    let (tools, next) = list(json!({
        "tools": [{"name": "quick", "inputSchema": {"type": "object"}, "_meta": {META_SYNC_UPPER_BOUND_MS: 2500}}],
        "nextCursor": "c2"
    }))
    .expect("tools");
    assert_eq!(
        (tools[0].sync_upper_bound_ms, next.as_deref()),
        (Some(2500), Some("c2"))
    );
    assert!(
        list(json!({"tools": [{"name": "x", "execution": {"taskSupport": "sometimes"}}]})).is_err()
    );
    assert!(list(json!({"tools": [{"inputSchema": {}}]})).is_err());
    assert!(list(json!({"tool": []})).is_err());
}

#[test]
fn http_status_replies_come_before_the_body() {
    let a = adapter();
    for kind in ALL_KINDS {
        assert_eq!(
            a.decode_reply(kind, &frame(429, Some(1), Some(1500), b"")),
            Reply::RateLimited {
                retry_after_ms: Some(1500)
            }
        );
        assert_eq!(
            a.decode_reply(kind, &frame(429, Some(1), None, b"Too Many")),
            Reply::RateLimited {
                retry_after_ms: None
            }
        );
        assert_eq!(
            a.decode_reply(kind, &frame(503, Some(1), Some(30_000), b"")),
            Reply::Unavailable {
                retry_after_ms: Some(30_000)
            }
        );
        // 202 is "accepted for processing", never a completion.
        assert_eq!(
            a.decode_reply(kind, &frame(202, Some(1), None, b"")),
            Reply::Accepted
        );
        assert_eq!(
            a.decode_reply(kind, &frame(404, Some(1), None, b"")).name(),
            "error"
        );
        assert_eq!(
            a.decode_reply(kind, &frame(500, Some(1), None, b"oops"))
                .name(),
            "error"
        );
    }
    // Even a body that looks like a completed result does not turn a 202 into one.
    let done = server_text(TS, "02-happy-path-poll", 38);
    assert_eq!(
        a.decode_reply(
            RequestKind::Fetch,
            &frame(202, Some(10), None, done.as_bytes())
        ),
        Reply::Accepted
    );
    for status in [202, 404, 429, 503] {
        assert_eq!(
            a.classify(&frame(status, Some(9), Some(5), b"")),
            Inbound::Response { rpc_id: 9 }
        );
    }
    assert!(matches!(
        a.classify(&frame(202, None, None, b"")),
        Inbound::Ignored { .. }
    ));
}

fn reply_to(kind: RequestKind, result: Value) -> Reply {
    let body =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": result})).expect("json");
    adapter().decode_reply(kind, &InFrame::message(body))
}

fn error_to(kind: RequestKind, code: i64, message: &str) -> Reply {
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}}),
    )
    .expect("json");
    adapter().decode_reply(kind, &InFrame::message(body))
}

#[test]
fn error_codes_per_request_kind() {
    use RequestKind::*;
    assert_eq!(
        error_to(Lookup, -32601, "Method not found"),
        Reply::LookupUnsupported
    );
    // A tools/call error: the codes that mean "not processed" are refusals; the others do not
    // say whether the tool ran.
    for kind in [Submit, SubmitSync] {
        for code in [-32700, -32600, -32601, -32602] {
            assert_eq!(
                error_to(kind, code, "nope").name(),
                "submit_refused",
                "{code}"
            );
        }
        for code in [-32603, -32000, 1, 0] {
            assert_eq!(
                error_to(kind, code, "nope").name(),
                "submit_outcome_unknown",
                "{code}"
            );
        }
        // The TS wrapper's -32602 after the tool ran, whatever the zod text.
        let ran = "MCP error -32602: Invalid task creation result: anything";
        assert_eq!(error_to(kind, -32602, ran).name(), "submit_outcome_unknown");
        let ran = "MCP error -32602: Invalid tools/call result: [{}]";
        assert_eq!(error_to(kind, -32602, ran).name(), "submit_outcome_unknown");
        // The same words under another code are not the TS wrapper's.
        assert_eq!(
            error_to(kind, -32601, "Invalid task creation result: x").name(),
            "submit_refused"
        );
    }
    assert_eq!(error_to(Poll, -32603, "boom").name(), "error");
    assert_eq!(
        error_to(Fetch, -32000, "upstream 503"),
        Reply::ResultIsError {
            code: -32000,
            message: "upstream 503".into()
        }
    );
    // A -32603 that is not the "no result stored" quirk is the failed request's own error,
    // even when its words mention a missing result (a substring reading took it for the quirk).
    assert_eq!(error_to(Fetch, -32603, "db down").name(), "result_is_error");
    for message in [
        "upstream returned no result",
        "Task t1 has no result stored yet",
        "no result stored",
    ] {
        assert_eq!(
            error_to(Fetch, -32603, message),
            Reply::ResultIsError {
                code: -32603,
                message: message.into()
            },
            "{message}"
        );
    }
    assert_eq!(
        error_to(Fetch, -32603, "Task t1 has no result stored").name(),
        "no_result_stored"
    );
    assert_eq!(error_to(Cancel, -32603, "boom").name(), "error");
    assert_eq!(reply_to(Fetch, json!({})).name(), "no_result_stored");
}

fn task(status: &str) -> Value {
    json!({"taskId": "t1", "status": status, "createdAt": "x", "lastUpdatedAt": "y", "ttl": 1000})
}

#[test]
fn structural_problems_are_malformed_or_unverified_with_reasons() {
    use RequestKind::*;
    let malformed = |r: Reply| match r {
        Reply::Malformed { reason } => {
            assert!(!reason.is_empty());
            reason
        }
        other => panic!("expected malformed, got {other:?}"),
    };
    assert!(malformed(reply_to(
        Submit,
        json!({"task": {"taskId": "", "status": "working", "ttl": null}})
    ))
    .contains("empty"));
    assert!(malformed(reply_to(
        Submit,
        json!({"task": {"taskId": 7, "status": "working"}})
    ))
    .contains("taskId"));
    assert!(malformed(reply_to(
        Submit,
        json!({"task": {"taskId": "t", "status": "done"}})
    ))
    .contains("done"));
    assert!(malformed(reply_to(Poll, json!({"taskId": "t"}))).contains("status"));
    assert!(malformed(reply_to(
        Submit,
        json!({"task": {"taskId": "t", "status": 3, "ttl": 5}})
    ))
    .contains("status"));
    assert!(malformed(reply_to(
        Lookup,
        json!({"tasks": [task("working"), task("completed")]})
    ))
    .contains("2 tasks"));
    assert!(malformed(reply_to(
        Lookup,
        json!({"tasks": [task("working")], "nextCursor": "c"})
    ))
    .contains("filter"));
    assert!(malformed(reply_to(Lookup, json!({"tasks": {}}))).contains("tasks"));
    assert!(malformed(reply_to(Cancel, task("working"))).contains("non-terminal"));
    assert_eq!(
        reply_to(Cancel, task("completed")).name(),
        "cancel_rejected_terminal"
    );
    for body in [
        &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"taskId\":\"t\",\"sta"[..],
        b"",
        b"null",
        b"{\"id\":1,\"result\":{}}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}",
    ] {
        for kind in [Submit, SubmitSync, Lookup, Poll, Fetch, Cancel] {
            malformed(adapter().decode_reply(kind, &InFrame::message(body.to_vec())));
        }
    }

    // Results: structure problems leave `verified` false with a reason, never a panic.
    let unverified = |result: Value| {
        let r = result_of(reply_to(Fetch, result));
        assert!(!r.verified && r.problem.is_some(), "{r:?}");
        r.problem.unwrap_or_default()
    };
    assert!(unverified(json!({"content": "text"})).contains("not an array"));
    assert!(unverified(json!({"structuredContent": {}})).contains("no \"content\""));
    assert!(unverified(json!({"content": [{"type": "text"}]})).contains("text"));
    assert!(unverified(json!({"content": [{"text": "x"}]})).contains("type"));
    assert!(unverified(json!({"content": [{"type": "video", "url": "x"}]})).contains("video"));
    assert!(unverified(json!({"content": [], "isError": "yes"})).contains("isError"));
    // Neither a CreateTaskResult nor a CallToolResult.
    assert!(malformed(reply_to(
        Submit,
        json!({"taskId": "t", "status": "working"})
    ))
    .contains("neither"));
}

/// Advisory fields with bad values, as documented variants of a real CreateTaskResult (TS
/// 02-happy-path-poll seq 10: `"ttl":60000`, `"pollInterval":500`): the task that was created is
/// kept, the hint is read as the integer it equals or dropped, and the problem is named.
#[test]
fn a_bad_advisory_value_never_costs_the_task() {
    let real = server_text(TS, "02-happy-path-poll", 10);
    assert!(
        real.contains(r#""ttl":60000,"#) && real.contains(r#""pollInterval":500"#),
        "{real}"
    );
    let id = "a333d5b6d2fa9d3becd9d9ce948da0ab";
    let variant = |from: &str, to: &str| {
        let text = real.replacen(from, to, 1);
        assert_ne!(text, real, "{from} not in the transcript line");
        match adapter().decode_reply(RequestKind::Submit, &InFrame::message(text.into_bytes())) {
            Reply::Submitted(v) => v,
            other => panic!("{to}: the created task was lost: {other:?}"),
        }
    };
    let clean = task_of(decode(RequestKind::Submit, TS, "02-happy-path-poll", 10));
    assert_eq!(
        (clean.ttl_ms, clean.poll_interval_ms, clean.hint_problem),
        (Some(60_000), Some(500), None)
    );
    for (from, to, ttl, poll, says) in [
        (
            r#""ttl":60000,"#,
            r#""ttl":60000.0,"#,
            Some(60_000),
            Some(500),
            "\"ttl\" 60000.0 is not an integer literal: read as 60000",
        ),
        (
            r#""ttl":60000,"#,
            r#""ttl":-1,"#,
            None,
            Some(500),
            "\"ttl\" is a number -1, not a non-negative integer: ignored",
        ),
        (
            r#""ttl":60000,"#,
            r#""ttl":"60s","#,
            None,
            Some(500),
            "\"ttl\" is a string \"60s\", not a non-negative integer: ignored",
        ),
        (
            r#""ttl":60000,"#,
            r#""ttl":1e300,"#,
            None,
            Some(500),
            "\"ttl\" is a number 1e+300, not a non-negative integer: ignored",
        ),
        (
            r#""pollInterval":500"#,
            r#""pollInterval":333.3"#,
            Some(60_000),
            None,
            "\"pollInterval\" is a number 333.3, not a non-negative integer: ignored",
        ),
        (
            r#""pollInterval":500"#,
            r#""pollInterval":true"#,
            Some(60_000),
            None,
            "\"pollInterval\" is a boolean true",
        ),
        (
            r#""pollInterval":500"#,
            r#""pollInterval":500,"statusMessage":{"p":1}"#,
            Some(60_000),
            Some(500),
            "\"statusMessage\" is an object",
        ),
    ] {
        let v = variant(from, to);
        assert_eq!(
            (v.operation_id.as_str(), v.status),
            (id, ProtocolStatus::Working),
            "{to}"
        );
        assert_eq!((v.ttl_ms, v.poll_interval_ms), (ttl, poll), "{to}");
        let problem = v
            .hint_problem
            .unwrap_or_else(|| panic!("{to}: the problem must be visible"));
        assert!(problem.starts_with(says), "{to}: {problem}");
    }
    // Two bad hints at once are both named; a bad poll answer keeps its task id too.
    let both = real
        .replacen(r#""ttl":60000,"#, r#""ttl":-1,"#, 1)
        .replacen(r#""pollInterval":500"#, r#""pollInterval":0.5"#, 1);
    let Reply::Submitted(both) =
        adapter().decode_reply(RequestKind::Submit, &InFrame::message(both.into_bytes()))
    else {
        panic!("lost the task");
    };
    let problem = both.hint_problem.expect("named");
    assert!(
        problem.contains("ttl") && problem.contains("pollInterval"),
        "{problem}"
    );
    let poll = server_text(TS, "02-happy-path-poll", 13).replacen(
        r#""pollInterval":500"#,
        r#""pollInterval":-5"#,
        1,
    );
    match adapter().decode_reply(RequestKind::Poll, &InFrame::message(poll.into_bytes())) {
        Reply::Status(v) => assert!(
            v.operation_id == id && v.hint_problem.is_some() && v.poll_interval_ms.is_none()
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        Reply::Status(toolop::protocol::TaskView {
            hint_problem: Some("x".into()),
            ..task_of(decode(RequestKind::Poll, TS, "02-happy-path-poll", 13))
        })
        .hint_problem(),
        Some("x")
    );
}

/// The empty-result shape (`content: []`, no `structuredContent`, not an error) is not a
/// verified result: nothing in the protocol tells it from a result never stored (Python's
/// cancelled-task answer, python-mcp-1.30.0/04-cancel-running seq 22, is `{_meta}` alone; a relay
/// on the TS SDK's types fills in `content: []`). A server digest that vouches for it, structured
/// content, or `isError` make it an ordinary result.
#[test]
fn an_empty_result_is_not_a_verified_completion() {
    use RequestKind::*;
    let py_cancelled = server_json(PY, "04-cancel-running", 22);
    assert_eq!(
        adapter()
            .decode_reply(Fetch, &server_frame(PY, "04-cancel-running", 22))
            .name(),
        "no_result_stored"
    );
    // The documented variant: the same answer relayed with `content: []` filled in.
    let mut relayed = py_cancelled.clone();
    relayed["result"]["content"] = json!([]);
    let body = serde_json::to_vec(&relayed).expect("json");
    let r = result_of(adapter().decode_reply(Fetch, &InFrame::message(body)));
    assert!(
        !r.verified
            && r.problem
                .as_deref()
                .is_some_and(|p| p.contains("empty result")),
        "{r:?}"
    );
    for kind in [Fetch, SubmitSync, Submit] {
        let r = result_of(reply_to(kind, json!({"content": []})));
        assert!(!r.verified, "{kind:?}");
    }
    let empty = json!({"content": []});
    let mut vouched = empty.clone();
    vouched["_meta"] = json!({META_RESULT_DIGEST: value_digest(&empty)});
    for ok in [
        vouched,
        json!({"content": [], "structuredContent": {"rows": 0}}),
        json!({"content": [], "isError": true}),
        json!({"content": [{"type": "text", "text": ""}]}),
    ] {
        let r = result_of(reply_to(Fetch, ok.clone()));
        assert!(r.verified, "{ok}: {:?}", r.problem);
    }
}

#[test]
fn result_digest_claims_are_checked() {
    let payload = json!({"content": [{"type": "text", "text": "report ready"}], "isError": false});
    let digest = value_digest(&payload);
    let mut good = payload.clone();
    good["_meta"] = json!({META_RESULT_DIGEST: digest, "io.modelcontextprotocol/related-task": {"taskId": "t1"}});
    let r = result_of(reply_to(RequestKind::Fetch, good));
    assert!(
        r.verified && r.digest == digest && r.payload == payload,
        "{r:?}"
    );

    let mut bad = payload.clone();
    bad["_meta"] = json!({META_RESULT_DIGEST: "00ff"});
    let r = result_of(reply_to(RequestKind::Fetch, bad));
    assert!(
        !r.verified && r.problem.as_deref().is_some_and(|p| p.contains("digest")),
        "{r:?}"
    );
    assert_eq!(
        r.digest, digest,
        "the computed digest is always over what arrived"
    );
}

/// Every server message of every transcript, replayed through the adapter: the classification
/// and decoded reply of each is compared with the committed expectation file next to the
/// transcript. The rmcp transcript's `B-sync` session is a 2025-11-25 session (no extension
/// declared at initialize): it shows what this adapter makes of a server that ignores `task`.
#[test]
fn transcript_replay_matches_the_expectations() {
    let a = adapter();
    let mut lines = 0;
    for dir in [TS, PY, EV] {
        for file in replay::transcript_files(dir) {
            let actual = replay::render(&a, &replay::http_transcript(dir, &file), false);
            // Whatever the expectations say, no real server text may be unreadable.
            assert!(!actual.contains("MALFORMED"), "{dir}/{file}:\n{actual}");
            lines += actual.lines().count();
            replay::check(&actual, replay::expect_path(dir, &file, &a));
        }
    }
    let rmcp = replay::stdio_transcript(RMCP, RMCP_FILE, Some(&["B-sync"]));
    let actual = replay::render(&a, &rmcp, false);
    lines += actual.lines().count();
    replay::check(
        &actual,
        replay::expect_path(RMCP, &format!("{RMCP_FILE}.B-sync"), &a),
    );
    assert!(
        lines >= 200,
        "the replay covered only {lines} server messages"
    );
}

// ---------------------------------------------------------------------------------------------
// Decoding never panics

const VOCAB: &[&str] = &[
    "jsonrpc",
    "2.0",
    "id",
    "result",
    "error",
    "code",
    "message",
    "data",
    "task",
    "taskId",
    "status",
    "ttl",
    "pollInterval",
    "statusMessage",
    "tasks",
    "nextCursor",
    "content",
    "type",
    "text",
    "isError",
    "_meta",
    "io.modelcontextprotocol/related-task",
    "io.toolop/result-digest",
    "method",
    "params",
    "requestedSchema",
    "elicitation/create",
    "notifications/tasks/status",
    "protocolVersion",
    "2025-11-25",
    "capabilities",
    "experimental",
    "io.toolop/idempotency",
    "tools",
    "name",
    "execution",
    "taskSupport",
    "required",
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
    "terminal",
    "mode",
    "form",
    "image",
    "resource",
];

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(VOCAB).prop_map(str::to_string), 1 => "[a-zA-Z_]{0,6}"]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        arb_key().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            prop::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON-RPC-shaped noise: a real envelope around random content, so decoding gets past the
/// envelope checks into the per-kind code.
fn arb_jsonrpc() -> impl Strategy<Value = Value> {
    let id = prop_oneof![any::<u64>().prop_map(Value::from), arb_json()];
    prop_oneof![
        (id.clone(), arb_json()).prop_map(|(id, result)| json!({"jsonrpc": "2.0", "id": id, "result": result})),
        (id.clone(), prop::collection::btree_map(arb_key(), arb_json(), 0..6))
            .prop_map(|(id, m)| json!({"jsonrpc": "2.0", "id": id, "result": Value::Object(m.into_iter().collect())})),
        (id.clone(), prop::option::of(arb_json())).prop_map(
            |(id, t)| json!({"jsonrpc": "2.0", "id": id, "result": {"task": t, "tasks": [t], "content": [t]}})
        ),
        (id.clone(), any::<i64>(), arb_json()).prop_map(
            |(id, code, message)| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        ),
        (id, arb_key(), arb_json())
            .prop_map(|(id, method, params)| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})),
    ]
}

/// Real server messages from the transcripts, for truncation.
fn real_messages() -> &'static Vec<String> {
    static MSGS: OnceLock<Vec<String>> = OnceLock::new();
    MSGS.get_or_init(|| {
        [
            (TS, "02-happy-path-poll", 10),
            (TS, "02-happy-path-poll", 38),
            (TS, "04-cancel-running", 15),
            (TS, "04-cancel-running", 22),
            (TS, "08-input-required", 17),
            (PY, "04-cancel-running", 22),
            (PY, "05-cancel-completed", 20),
            (PY, "02-happy-path-poll", 46),
            (PY, "01-initialize-list", 8),
        ]
        .iter()
        .map(|(d, f, s)| server_text(d, f, *s))
        .collect()
    })
}

fn arb_status() -> impl Strategy<Value = u16> {
    prop_oneof![6 => Just(200u16), 1 => prop::sample::select(vec![202u16, 400, 404, 429, 500, 503]), 1 => any::<u16>()]
}

/// Run every decoder on a frame; they must not panic, and an HTTP error must never look malformed.
fn decode_everything(
    body: Vec<u8>,
    status: u16,
    request_id: Option<u64>,
    retry: Option<u64>,
) -> Result<(), TestCaseError> {
    let a = adapter();
    let f = InFrame {
        request_id,
        http_status: status,
        retry_after_ms: retry,
        body,
    };
    let _ = a.classify(&f);
    let _ = a.decode_initialize(&f);
    let _ = a.decode_list_tools(&f);
    for kind in ALL_KINDS {
        let reply = a.decode_reply(kind, &f);
        if status != 200 {
            prop_assert!(
                !matches!(reply, Reply::Malformed { .. }),
                "HTTP {status} decoded as {reply:?}"
            );
        }
        if let Reply::Malformed { reason } = &reply {
            prop_assert!(!reason.is_empty());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoding_random_bytes_never_panics(
        body in prop::collection::vec(any::<u8>(), 0..300), status in arb_status(),
        request_id in any::<Option<u64>>(), retry in any::<Option<u64>>(),
    ) {
        decode_everything(body, status, request_id, retry)?;
    }

    #[test]
    fn decoding_random_json_never_panics(v in arb_json(), status in arb_status(), request_id in any::<Option<u64>>()) {
        decode_everything(serde_json::to_vec(&v).expect("json"), status, request_id, None)?;
    }

    #[test]
    fn decoding_jsonrpc_shaped_noise_never_panics(v in arb_jsonrpc(), request_id in any::<Option<u64>>()) {
        decode_everything(serde_json::to_vec(&v).expect("json"), 200, request_id, None)?;
    }

    #[test]
    fn truncated_real_messages_are_malformed_not_panics(idx in 0usize..9, cut in any::<prop::sample::Index>()) {
        let text = real_messages()[idx].as_bytes();
        let cut = cut.index(text.len()); // strictly shorter than the message: never complete JSON
        let body = text[..cut].to_vec();
        decode_everything(body.clone(), 200, Some(1), None)?;
        for kind in [RequestKind::Submit, RequestKind::Poll, RequestKind::Fetch, RequestKind::Cancel, RequestKind::Lookup] {
            let reply = adapter().decode_reply(kind, &InFrame::message(body.clone()));
            prop_assert_eq!(reply.name(), "malformed");
        }
    }

    #[test]
    fn any_valid_task_polls_back_exactly(
        id in "[ -~]{1,40}", status in prop::sample::select(vec!["working", "input_required", "completed", "failed", "cancelled"]),
        ttl in prop::option::of(any::<u64>()), poll in prop::option::of(any::<u64>()), msg in prop::option::of(any::<String>()),
        ttl_null in any::<bool>(),
    ) {
        let mut t = json!({"taskId": id, "status": status, "createdAt": "2026-12-02T16:12:10.154Z", "lastUpdatedAt": "2026-12-02T16:12:10.154Z"});
        match ttl {
            Some(ms) => t["ttl"] = json!(ms),
            None if ttl_null => t["ttl"] = Value::Null,
            None => {}
        }
        if let Some(p) = poll { t["pollInterval"] = json!(p); }
        if let Some(m) = &msg { t["statusMessage"] = json!(m); }
        let view = task_of(reply_to(RequestKind::Poll, t));
        prop_assert_eq!(&view.operation_id, &id);
        prop_assert_eq!((view.ttl_ms, view.poll_interval_ms, view.status_message), (ttl, poll, msg));
        prop_assert_eq!(view.status.is_terminal(), !matches!(status, "working" | "input_required"));
    }
}

/// A POST's response answers that POST. A body whose JSON-RPC id names another of our requests
/// (a broken server or proxy: the reply-to-other-exchange fault) is routed by the transport and
/// refused as malformed, so it cannot hand one call node another node's task.
#[test]
fn a_reply_whose_body_names_another_request_is_refused_not_rerouted() {
    let a = adapter();
    let body = br#"{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"t-other","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttl":60000,"pollInterval":1000}}}"#;
    let f = frame(200, Some(8), None, body);
    assert_eq!(a.classify(&f), Inbound::Response { rpc_id: 8 });
    match a.decode_reply(RequestKind::Submit, &f) {
        Reply::Malformed { reason } => assert!(
            reason.contains("names request 7") && reason.contains("request 8"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    // The same body on its own request decodes; without a transport correlation (stdio) the
    // body's id is all there is.
    assert_eq!(
        a.decode_reply(RequestKind::Submit, &frame(200, Some(7), None, body))
            .name(),
        "submitted"
    );
    assert_eq!(
        a.classify(&frame(200, None, None, body)),
        Inbound::Response { rpc_id: 7 }
    );
}
