//! The MCP tasks extension adapter (`io.modelcontextprotocol/tasks`, SEP-2663,
//! `shared/spec/mcp-tasks.md` §15).
//!
//! 1. Encoding: every outbound kind, as exact JSON, data-driven.
//! 2. Decoding: every reply shape of every request kind, as exact protocol-neutral `Reply`
//!    values, data-driven; the extension's differences from 2025-11-25 have named tests.
//! 3. Negotiation, tools/list, classification, HTTP status replies.
//! 4. Decoding never panics, whatever the bytes (proptest).
//! 5. The rmcp 3.11.0 transcript (`tests/data/transcripts/rmcp-3.11.0/`), replayed message by
//!    message against a committed expectation file (`replay`).

use proptest::prelude::*;
use serde_json::{json, Value};
use toolop::digest::value_digest;
use toolop::protocol::mcp_tasks_ext::{
    McpTasksExtAdapter, EXTENSION_ID, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION,
    PROTOCOL_VERSION, SELF_MINTED_ID_BASE,
};
use toolop::protocol::{
    Adapter, ApprovalReply, Inbound, InputRequest, Outbound, Reply, RequestKind, ResultView,
    TaskSupport, TaskView, EXT_IDEMPOTENCY, META_IDEMPOTENCY_KEY, META_LOOKUP_KEY,
    META_RESULT_DIGEST, META_SYNC_UPPER_BOUND_MS,
};
use toolop::record::{AdapterId, ProtocolStatus};
use toolop::transport::InFrame;

mod replay;

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

fn adapter() -> McpTasksExtAdapter {
    McpTasksExtAdapter::with_client_info("toolop-test", "9.9.9")
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the adapter emits JSON")
}

/// The per-request `_meta` the adapter sends; `tasks` declares the extension.
fn meta(tasks: bool) -> Value {
    let caps = if tasks {
        json!({ "extensions": { EXTENSION_ID: {} } })
    } else {
        json!({})
    };
    json!({ META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: caps })
}

fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

fn req(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// ---------------------------------------------------------------------------------------------
// Encoding

#[test]
fn encodes_every_outbound_kind() {
    let a = adapter();
    let task_params = |id: &str| json!({"taskId": id, "_meta": meta(true)});
    let cases: Vec<(&str, Outbound, Value)> = vec![
        (
            "submit declares the extension per request and carries the key; no task param, no ttl",
            Outbound::Submit {
                key: "key-1".into(),
                tool: "build_report".into(),
                arguments: json!({"month": "2026-10"}),
                ttl_ms: Some(120_000),
            },
            req(
                10,
                "tools/call",
                json!({
                    "name": "build_report",
                    "arguments": {"month": "2026-10"},
                    "_meta": with(meta(true), META_IDEMPOTENCY_KEY, json!("key-1")),
                }),
            ),
        ),
        (
            "submit without arguments",
            Outbound::Submit { key: "k".into(), tool: "ping".into(), arguments: Value::Null, ttl_ms: None },
            req(10, "tools/call", json!({"name": "ping", "_meta": with(meta(true), META_IDEMPOTENCY_KEY, json!("k"))})),
        ),
        (
            "synchronous submit does not declare the extension",
            Outbound::SubmitSync { key: "key-2".into(), tool: "echo".into(), arguments: json!({"text": "hi"}) },
            req(
                10,
                "tools/call",
                json!({
                    "name": "echo",
                    "arguments": {"text": "hi"},
                    "_meta": with(meta(false), META_IDEMPOTENCY_KEY, json!("key-2")),
                }),
            ),
        ),
        (
            "lookup is still tasks/list with the lookup key (the extension removed it: -32601 expected)",
            Outbound::LookupByKey { key: "key-1".into() },
            req(10, "tasks/list", json!({"_meta": with(meta(true), META_LOOKUP_KEY, json!("key-1"))})),
        ),
        ("poll is tasks/get", Outbound::Poll { operation_id: "t-1".into() }, req(10, "tasks/get", task_params("t-1"))),
        (
            "fetch is tasks/get too (results are inlined; tasks/result is gone)",
            Outbound::FetchResult { operation_id: "t-1".into() },
            req(10, "tasks/get", task_params("t-1")),
        ),
        (
            "cancel is tasks/cancel",
            Outbound::Cancel { operation_id: "t-1".into() },
            req(10, "tasks/cancel", task_params("t-1")),
        ),
        (
            "accepted input goes back as tasks/update keyed by the input request key",
            Outbound::InputResponse {
                operation_id: "t-1".into(),
                server_request_id: json!("input-1"),
                reply: ApprovalReply::Accept { content: json!({"ok": true}) },
            },
            req(
                10,
                "tasks/update",
                json!({
                    "taskId": "t-1",
                    "inputResponses": {"input-1": {"action": "accept", "content": {"ok": true}}},
                    "_meta": meta(true),
                }),
            ),
        ),
        (
            "declined input has no content",
            Outbound::InputResponse {
                operation_id: "t-1".into(),
                server_request_id: json!("input-2"),
                reply: ApprovalReply::Decline,
            },
            req(
                10,
                "tasks/update",
                json!({"taskId": "t-1", "inputResponses": {"input-2": {"action": "decline"}}, "_meta": meta(true)}),
            ),
        ),
        (
            "cancelled input; a non-string request id is keyed by its JSON text",
            Outbound::InputResponse {
                operation_id: "t-1".into(),
                server_request_id: json!(5),
                reply: ApprovalReply::Cancel,
            },
            req(
                10,
                "tasks/update",
                json!({"taskId": "t-1", "inputResponses": {"5": {"action": "cancel"}}, "_meta": meta(true)}),
            ),
        ),
        (
            "accepted content that is not an object is sent as no content",
            Outbound::InputResponse {
                operation_id: "t-1".into(),
                server_request_id: json!("k"),
                reply: ApprovalReply::Accept { content: json!([1, 2]) },
            },
            req(
                10,
                "tasks/update",
                json!({"taskId": "t-1", "inputResponses": {"k": {"action": "accept"}}, "_meta": meta(true)}),
            ),
        ),
    ];
    for (name, out, want) in cases {
        assert_eq!(parse(&a.encode(10, &out)), want, "{name}");
        let frame = a.encode_frame(10, &out);
        assert_eq!(parse(&frame.body), want, "{name} (frame)");
        assert_eq!(
            frame.request_id,
            Some(10),
            "{name}: every message of this adapter is a request"
        );
        assert_eq!(frame.http, None, "{name}");
    }
}

#[test]
fn initialize_declares_the_extension_and_2026_07_28() {
    let a = adapter();
    assert_eq!(a.id(), AdapterId::McpTasksExt);
    assert_eq!(
        parse(&a.encode_initialize(1)),
        req(
            1,
            "initialize",
            json!({
                "protocolVersion": "2026-07-28",
                "capabilities": {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                "clientInfo": {"name": "toolop-test", "version": "9.9.9"},
            })
        )
    );
    let note = parse(
        &a.encode_initialized()
            .expect("a notification follows initialize"),
    );
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    );
    assert_eq!(
        parse(&a.encode_list_tools(2, None)),
        req(2, "tools/list", json!({"_meta": meta(true)}))
    );
    assert_eq!(
        parse(&a.encode_list_tools(3, Some("p2"))),
        req(
            3,
            "tools/list",
            json!({"cursor": "p2", "_meta": meta(true)})
        )
    );
}

#[test]
fn input_response_frame_expects_an_ack() {
    let a = adapter();
    let out = |k: &str| Outbound::InputResponse {
        operation_id: "t".into(),
        server_request_id: json!(k),
        reply: ApprovalReply::Decline,
    };
    // With an id from the runner: that id, in the frame and in the body.
    let f = a.encode_frame(42, &out("a"));
    assert_eq!(f.request_id, Some(42));
    assert_eq!(parse(&f.body)["id"], json!(42));
    // The current runner passes 0 for kinds whose `expects_reply()` is false: the adapter mints
    // distinct ids of its own, far above the runner's, so a pending reply can still be matched.
    let f1 = a.encode_frame(0, &out("a"));
    let f2 = a.encode_frame(0, &out("b"));
    let (i1, i2) = (
        f1.request_id.expect("an ack is awaited"),
        f2.request_id.expect("an ack is awaited"),
    );
    assert!(
        i1 >= SELF_MINTED_ID_BASE && i2 >= SELF_MINTED_ID_BASE && i1 != i2,
        "{i1} {i2}"
    );
    assert_eq!(parse(&f1.body)["id"], json!(i1));
    assert_eq!(parse(&f2.body)["id"], json!(i2));
    // Other kinds keep the default framing.
    assert_eq!(
        a.encode_frame(
            7,
            &Outbound::Poll {
                operation_id: "t".into()
            }
        )
        .request_id,
        Some(7)
    );
    // The reply to the update is a plain response and classifies as such.
    let ack = InFrame::message(
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": i1, "result": {}})).unwrap(),
    );
    assert_eq!(a.classify(&ack), Inbound::Response { rpc_id: i1 });
}

// ---------------------------------------------------------------------------------------------
// Decoding: helpers

fn ok(result: Value) -> InFrame {
    InFrame::message(
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "result": result})).unwrap(),
    )
}

fn err(code: i64, message: &str) -> InFrame {
    InFrame::message(
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 7, "error": {"code": code, "message": message}}),
        )
        .unwrap(),
    )
}

fn http(status: u16, retry_after_ms: Option<u64>, body: &[u8]) -> InFrame {
    InFrame {
        request_id: Some(7),
        http_status: status,
        retry_after_ms,
        body: body.to_vec(),
    }
}

/// Flat Task fields as the extension prints them.
fn task(id: &str, status: &str) -> Value {
    json!({
        "taskId": id,
        "status": status,
        "createdAt": "2026-12-01T09:00:00.000Z",
        "lastUpdatedAt": "2026-12-01T09:00:04.100Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
    })
}

fn created(id: &str, status: &str) -> Value {
    with(task(id, status), "resultType", json!("task"))
}

fn got(id: &str, status: &str) -> Value {
    with(task(id, status), "resultType", json!("complete"))
}

fn view(id: &str, status: ProtocolStatus) -> TaskView {
    TaskView {
        operation_id: id.into(),
        status,
        poll_interval_ms: Some(500),
        ttl_ms: Some(60_000),
        status_message: None,
        hint_problem: None,
    }
}

fn call_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// The verified view of a result whose payload is `payload`.
fn verified(payload: Value, owner: Option<&str>) -> ResultView {
    ResultView {
        is_error: payload["isError"] == json!(true),
        digest: value_digest(&payload),
        payload,
        related_operation_id: owner.map(str::to_string),
        verified: true,
        problem: None,
    }
}

fn approval_request(message: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        },
    })
}

fn input_req(task_id: &str, key: &str, message: &str) -> InputRequest {
    let raw = approval_request(message);
    let schema = raw["params"]["requestedSchema"].clone();
    InputRequest {
        server_request_id: json!(key),
        related_operation_id: Some(task_id.into()),
        message: message.into(),
        schema_digest: value_digest(&schema),
        requested_schema: schema,
        raw,
    }
}

fn malformed(reply: &Reply) -> bool {
    matches!(reply, Reply::Malformed { reason } if !reason.is_empty())
}

// ---------------------------------------------------------------------------------------------
// Decoding: the table

#[test]
fn decodes_every_reply_shape() {
    use ProtocolStatus::*;
    use RequestKind::*;
    let a = adapter();
    let text = call_result("report ready", false);
    let cases: Vec<(&str, RequestKind, InFrame, Reply)> = vec![
        // --- tools/call with the extension declared
        ("task created", Submit, ok(created("t-1", "working")), Reply::Submitted(view("t-1", Working))),
        (
            "task created with unlimited ttl and no poll hint",
            Submit,
            ok(json!({"resultType": "task", "taskId": "t-2", "status": "working", "ttlMs": null,
                      "createdAt": "x", "lastUpdatedAt": "x", "statusMessage": "queued"})),
            Reply::Submitted(TaskView {
                operation_id: "t-2".into(),
                status: Working,
                poll_interval_ms: None,
                ttl_ms: None,
                status_message: Some("queued".into()),
                hint_problem: None,
            }),
        ),
        (
            "a CreateTaskResult must not carry result/error/inputRequests; they are ignored, the task kept",
            Submit,
            ok(with(created("t-3", "working"), "result", text.clone())),
            Reply::Submitted(view("t-3", Working)),
        ),
        (
            "server chose not to create a task: the plain CallToolResult is the result",
            Submit,
            ok(with(text.clone(), "resultType", json!("complete"))),
            Reply::SyncResult(verified(text.clone(), None)),
        ),
        (
            "a plain result without resultType (treated as complete)",
            Submit,
            ok(text.clone()),
            Reply::SyncResult(verified(text.clone(), None)),
        ),
        (
            "missing client capability",
            Submit,
            err(-32021, "Missing required client capability: io.modelcontextprotocol/tasks"),
            Reply::SubmitRefused { reason: "-32021: Missing required client capability: io.modelcontextprotocol/tasks".into() },
        ),
        ("unknown tool", Submit, err(-32602, "Unknown tool: nope"), Reply::SubmitRefused { reason: "-32602: Unknown tool: nope".into() }),
        (
            "a multi round-trip input_required answer is refused (unsupported; nothing ran)",
            Submit,
            ok(json!({"resultType": "input_required", "inputRequests": {"k": approval_request("?")}})),
            Reply::SubmitRefused {
                reason: "the server asked for input before running the call (multi round-trip request, unsupported)".into(),
            },
        ),
        // --- tools/call without the extension
        (
            "synchronous call answered inline",
            SubmitSync,
            ok(with(call_result("pong", true), "resultType", json!("complete"))),
            Reply::SyncResult(verified(call_result("pong", true), None)),
        ),
        (
            "synchronous call needing a task: -32021",
            SubmitSync,
            err(-32021, "needs tasks"),
            Reply::SubmitRefused { reason: "-32021: needs tasks".into() },
        ),
        (
            "a synchronous call's -32603: the tool may have run (rmcp's failing_job, seq 147)",
            SubmitSync,
            err(-32603, "failing_job: deliberate failure after 100 ms"),
            Reply::SubmitOutcomeUnknown {
                reason: "-32603: failing_job: deliberate failure after 100 ms (an error of this code does not say whether the tool ran)".into(),
            },
        ),
        (
            "a task although the extension was not declared is reported, not orphaned",
            SubmitSync,
            ok(created("t-4", "working")),
            Reply::Submitted(view("t-4", Working)),
        ),
        // --- lookup
        ("no tasks/list in the extension", Lookup, err(-32601, "Method not found: tasks/list"), Reply::LookupUnsupported),
        (
            "a server that still answers the lookup",
            Lookup,
            ok(json!({"tasks": [task("t-1", "working")]})),
            Reply::LookupFound(view("t-1", Working)),
        ),
        ("lookup: nothing under that key", Lookup, ok(json!({"tasks": []})), Reply::LookupNotFound),
        ("lookup: other error", Lookup, err(-32603, "boom"), Reply::Error { message: "tasks/list -32603: boom".into() }),
        // --- tasks/get as a poll
        ("poll working", Poll, ok(got("t-1", "working")), Reply::Status(view("t-1", Working))),
        (
            "poll completed: a status (the fetch reads the inlined result)",
            Poll,
            ok(with(got("t-1", "completed"), "result", text.clone())),
            Reply::Status(view("t-1", Completed)),
        ),
        (
            "poll input_required with inlined input requests",
            Poll,
            ok(with(got("t-1", "input_required"), "inputRequests", json!({"input-1": approval_request("Approve?")}))),
            Reply::InputRequests(vec![input_req("t-1", "input-1", "Approve?")]),
        ),
        (
            "poll input_required without input requests is a status",
            Poll,
            ok(got("t-1", "input_required")),
            Reply::Status(view("t-1", InputRequired)),
        ),
        (
            "poll input_required with an empty map is a status",
            Poll,
            ok(with(got("t-1", "input_required"), "inputRequests", json!({}))),
            Reply::Status(view("t-1", InputRequired)),
        ),
        ("poll of an unknown or expired task", Poll, err(-32602, "Task not found"), Reply::NotFound { message: "Task not found".into() }),
        ("poll: other error", Poll, err(-32603, "boom"), Reply::Error { message: "tasks/get -32603: boom".into() }),
        // --- tasks/get as a fetch
        (
            "fetch completed with the inlined result",
            Fetch,
            ok(with(got("t-1", "completed"), "result", text.clone())),
            Reply::Result(verified(text.clone(), Some("t-1"))),
        ),
        (
            "fetch: an isError tool result ends completed and is a result",
            Fetch,
            ok(with(got("t-1", "completed"), "result", call_result("upstream 503", true))),
            Reply::Result(verified(call_result("upstream 503", true), Some("t-1"))),
        ),
        (
            "fetch failed: the JSON-RPC error inlined",
            Fetch,
            ok(with(got("t-1", "failed"), "error", json!({"code": -32000, "message": "tool crashed"}))),
            Reply::ResultIsError { code: -32000, message: "tool crashed".into() },
        ),
        (
            "fetch cancelled: no result",
            Fetch,
            ok(with(got("t-1", "cancelled"), "statusMessage", json!("Cancelled by client"))),
            Reply::NoResultStored { message: "Cancelled by client".into() },
        ),
        (
            "fetch cancelled without a message",
            Fetch,
            ok(got("t-1", "cancelled")),
            Reply::NoResultStored { message: "task cancelled: no result".into() },
        ),
        (
            "fetch input_required with inlined requests, in key order",
            Fetch,
            ok(with(
                got("t-1", "input_required"),
                "inputRequests",
                json!({"b": approval_request("second"), "a": approval_request("first")}),
            )),
            Reply::InputRequests(vec![input_req("t-1", "a", "first"), input_req("t-1", "b", "second")]),
        ),
        ("fetch of a task still working", Fetch, ok(got("t-1", "working")), Reply::Status(view("t-1", Working))),
        ("fetch of an expired task", Fetch, err(-32602, "Task has expired"), Reply::NotFound { message: "Task has expired".into() }),
        // --- tasks/cancel
        ("the extension's cancel ack is not terminal", Cancel, ok(json!({})), Reply::CancelPending),
        ("cancel ack with resultType", Cancel, ok(json!({"resultType": "complete"})), Reply::CancelPending),
        (
            "a cancel answered with a task is still only an ack",
            Cancel,
            ok(got("t-1", "cancelled")),
            Reply::CancelPending,
        ),
        ("cancel of an unknown task", Cancel, err(-32602, "Task not found: t-9"), Reply::NotFound { message: "Task not found: t-9".into() }),
        (
            "cancel refused as terminal (the TS SDK's words)",
            Cancel,
            err(-32602, "MCP error -32602: Cannot cancel task in terminal status: completed"),
            Reply::CancelRejectedTerminal { message: "MCP error -32602: Cannot cancel task in terminal status: completed".into() },
        ),
        (
            "cancel -32602 in words no SDK uses: neither terminal nor not found, the core reads the task",
            Cancel,
            err(-32602, "Task not found (already deleted)"),
            Reply::Error { message: "tasks/cancel -32602: Task not found (already deleted)".into() },
        ),
        ("cancel: other error", Cancel, err(-32603, "boom"), Reply::Error { message: "tasks/cancel -32603: boom".into() }),
        // --- tasks/update
        ("tasks/update ack", InputResponse, ok(json!({"resultType": "complete"})), Reply::Accepted),
        ("tasks/update empty ack", InputResponse, ok(json!({})), Reply::Accepted),
        (
            "tasks/update refused",
            InputResponse,
            err(-32602, "no outstanding input request input-7"),
            Reply::Error { message: "tasks/update -32602: no outstanding input request input-7".into() },
        ),
        // --- HTTP
        ("429", Poll, http(429, Some(1500), b""), Reply::RateLimited { retry_after_ms: Some(1500) }),
        ("503", Submit, http(503, None, b"oops"), Reply::Unavailable { retry_after_ms: None }),
        ("202", InputResponse, http(202, None, b""), Reply::Accepted),
        (
            "404",
            Fetch,
            http(404, None, br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}"#),
            Reply::Error { message: "HTTP 404: session gone, re-initialize (server said -32600: Session not found)".into() },
        ),
        ("400", Cancel, http(400, None, b""), Reply::Error { message: "HTTP 400".into() }),
    ];
    for (name, kind, frame, want) in &cases {
        assert_eq!(&a.decode_reply(*kind, frame), want, "{name}");
    }
    // As the runner does: classify a frame, then decode it. The JSON the classification keeps
    // decodes to the same reply; a decode of other bytes (the frame classified before) never
    // takes it.
    let a = adapter();
    for (i, (name, kind, frame, want)) in cases.iter().enumerate() {
        a.classify(frame);
        if let Some((before, kind_before, frame_before, want_before)) =
            i.checked_sub(1).map(|j| &cases[j])
        {
            if frame_before.body != frame.body {
                let got = a.decode_reply(*kind_before, frame_before);
                assert_eq!(
                    &got, want_before,
                    "{before}, decoded after {name} was classified"
                );
            }
            a.classify(frame);
        }
        assert_eq!(
            &a.decode_reply(*kind, frame),
            want,
            "{name}, classified first"
        );
    }
}

#[test]
fn malformed_replies_are_malformed() {
    use RequestKind::*;
    let a = adapter();
    let cases: Vec<(&str, RequestKind, InFrame)> = vec![
        ("not JSON", Poll, InFrame::message(b"{".to_vec())),
        ("empty", Fetch, InFrame::message(Vec::new())),
        (
            "no jsonrpc",
            Poll,
            InFrame::message(br#"{"id":1,"result":{}}"#.to_vec()),
        ),
        (
            "unknown resultType on tools/call",
            Submit,
            ok(json!({"resultType": "later"})),
        ),
        (
            "resultType not a string",
            Submit,
            ok(json!({"resultType": 3, "content": []})),
        ),
        (
            "task without id",
            Submit,
            ok(json!({"resultType": "task", "status": "working"})),
        ),
        ("task with empty id", Submit, ok(created("", "working"))),
        ("unknown status", Poll, ok(got("t", "paused"))),
        (
            "tasks/get answered with a task handle",
            Poll,
            ok(created("t", "working")),
        ),
        (
            "completed without a result",
            Fetch,
            ok(got("t", "completed")),
        ),
        (
            "completed with a non-object result",
            Fetch,
            ok(with(got("t", "completed"), "result", json!("done"))),
        ),
        ("failed without an error", Fetch, ok(got("t", "failed"))),
        (
            "failed with an error without code",
            Fetch,
            ok(with(got("t", "failed"), "error", json!({"message": "x"}))),
        ),
        (
            "inputRequests not an object",
            Poll,
            ok(with(
                got("t", "input_required"),
                "inputRequests",
                json!([1]),
            )),
        ),
        (
            "unsupported input method",
            Poll,
            ok(with(
                got("t", "input_required"),
                "inputRequests",
                json!({"k": {"method": "sampling/createMessage", "params": {}}}),
            )),
        ),
        (
            "url-mode elicitation",
            Fetch,
            ok(with(
                got("t", "input_required"),
                "inputRequests",
                json!({"k": {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "requestedSchema": {}}}}),
            )),
        ),
        (
            "elicitation without a schema",
            Poll,
            ok(with(
                got("t", "input_required"),
                "inputRequests",
                json!({"k": {"method": "elicitation/create", "params": {"message": "m"}}}),
            )),
        ),
        (
            "lookup with a paginated list",
            Lookup,
            ok(json!({"tasks": [], "nextCursor": "p2"})),
        ),
        (
            "a request instead of a response",
            Cancel,
            InFrame::message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec()),
        ),
    ];
    for (name, kind, frame) in cases {
        let reply = a.decode_reply(kind, &frame);
        assert!(malformed(&reply), "{name}: {reply:?}");
    }
}

/// A bad advisory value keeps the task (documented variants of rmcp seq 9, a real
/// CreateTaskResult with `"ttlMs":300000,"pollIntervalMs":1000`).
#[test]
fn a_bad_advisory_value_never_costs_the_task() {
    let a = adapter();
    let real: Value = serde_json::from_slice(&rmcp_frame("9").body).expect("json");
    for (key, bad, ttl, poll) in [
        ("ttlMs", json!("60s"), None, Some(1000)),
        ("ttlMs", json!(-1), None, Some(1000)),
        ("ttlMs", json!(60000.0), Some(60_000), Some(1000)),
        ("pollIntervalMs", json!(333.3), Some(300_000), None),
    ] {
        let mut v = real.clone();
        v["result"][key] = bad.clone();
        match a.decode_reply(
            RequestKind::Submit,
            &InFrame::message(serde_json::to_vec(&v).expect("json")),
        ) {
            Reply::Submitted(t) => {
                assert_eq!(
                    t.operation_id, "fc6e04cc-ecae-45a8-9de4-dd3b2d8d111f",
                    "{key}={bad}"
                );
                assert_eq!((t.ttl_ms, t.poll_interval_ms), (ttl, poll), "{key}={bad}");
                assert!(
                    t.hint_problem.as_deref().is_some_and(|p| p.contains(key)),
                    "{key}={bad}: {t:?}"
                );
            }
            other => panic!("{key}={bad}: the created task was lost: {other:?}"),
        }
    }
}

#[test]
fn the_extensions_cancel_ack_is_not_terminal() {
    let a = adapter();
    for body in [
        json!({}),
        json!({"resultType": "complete"}),
        json!({"_meta": {}}),
    ] {
        let reply = a.decode_reply(RequestKind::Cancel, &ok(body.clone()));
        assert_eq!(reply, Reply::CancelPending, "{body}");
        assert!(
            !matches!(reply, Reply::CancelAcknowledged(_)),
            "an ack must never read as cancelled"
        );
    }
    // Eventually consistent: after the ack, a read may show any terminal status; it is the read
    // that decides. A task that completed despite the cancel fetches as a result.
    let later = a.decode_reply(
        RequestKind::Fetch,
        &ok(with(
            got("t-1", "completed"),
            "result",
            call_result("won the race", false),
        )),
    );
    assert_eq!(later.name(), "result");
}

#[test]
fn is_error_result_ends_completed() {
    // The extension's `failed` is a JSON-RPC error only: a tool result with isError is a
    // completed task whose result says so.
    let a = adapter();
    let body = with(
        got("t-1", "completed"),
        "result",
        call_result("disk full", true),
    );
    assert_eq!(
        a.decode_reply(RequestKind::Poll, &ok(body.clone())),
        Reply::Status(view("t-1", ProtocolStatus::Completed))
    );
    match a.decode_reply(RequestKind::Fetch, &ok(body)) {
        Reply::Result(rv) => {
            assert!(rv.is_error && rv.verified, "{rv:?}");
            assert_eq!(rv.related_operation_id.as_deref(), Some("t-1"));
        }
        other => panic!("expected a result, got {other:?}"),
    }
}

#[test]
fn server_chose_not_to_create_a_task() {
    let a = adapter();
    let result = json!({"content": [{"type": "text", "text": "quick"}], "isError": false});
    let frame = ok(with(result.clone(), "resultType", json!("complete")));
    match a.decode_reply(RequestKind::Submit, &frame) {
        Reply::SyncResult(rv) => {
            assert_eq!(rv, verified(result.clone(), None));
            // The digest does not depend on the discriminator: the same result inlined in a task
            // read digests the same.
            let inlined = a.decode_reply(
                RequestKind::Fetch,
                &ok(with(got("t", "completed"), "result", result)),
            );
            let Reply::Result(inl) = inlined else {
                panic!("{inlined:?}")
            };
            assert_eq!(inl.digest, rv.digest);
        }
        other => panic!("expected a synchronous result, got {other:?}"),
    }
    // Verified like a fetched result: a broken content block or a wrong server digest is caught.
    let broken = ok(json!({"resultType": "complete", "content": [{"type": "text"}]}));
    let Reply::SyncResult(rv) = a.decode_reply(RequestKind::Submit, &broken) else {
        panic!()
    };
    assert!(
        !rv.verified && rv.problem.as_deref().unwrap_or("").contains("content[0]"),
        "{rv:?}"
    );
    let lying = ok(json!({"content": [], "_meta": {META_RESULT_DIGEST: "abc"}}));
    let Reply::SyncResult(rv) = a.decode_reply(RequestKind::Submit, &lying) else {
        panic!()
    };
    assert!(!rv.verified, "{rv:?}");
}

#[test]
fn server_digest_is_over_the_result_without_meta_and_result_type() {
    let a = adapter();
    let payload = call_result("ok", false);
    let d = value_digest(&payload);
    let mut inlined = payload.clone();
    inlined["_meta"] = json!({ META_RESULT_DIGEST: d });
    inlined["resultType"] = json!("complete");
    let Reply::Result(rv) = a.decode_reply(
        RequestKind::Fetch,
        &ok(with(got("t", "completed"), "result", inlined)),
    ) else {
        panic!()
    };
    assert!(rv.verified, "{rv:?}");
    assert_eq!((rv.digest, rv.payload), (d, payload));
    // A result claiming another task is not ours.
    let foreign = with(
        call_result("x", false),
        "_meta",
        json!({"io.modelcontextprotocol/related-task": {"taskId": "other"}}),
    );
    let Reply::Result(rv) = a.decode_reply(
        RequestKind::Fetch,
        &ok(with(got("t", "completed"), "result", foreign)),
    ) else {
        panic!()
    };
    assert!(
        !rv.verified && rv.related_operation_id.as_deref() == Some("t"),
        "{rv:?}"
    );
}

#[test]
fn input_requests_inlined_in_tasks_get() {
    let a = adapter();
    let body = with(
        with(
            got("t-7", "input_required"),
            "statusMessage",
            json!("waiting"),
        ),
        "inputRequests",
        json!({"input-1": approval_request("Approve spend of 40 EUR?")}),
    );
    for kind in [RequestKind::Poll, RequestKind::Fetch] {
        let Reply::InputRequests(reqs) = a.decode_reply(kind, &ok(body.clone())) else {
            panic!("{kind:?}")
        };
        assert_eq!(reqs.len(), 1);
        let r = &reqs[0];
        assert_eq!(r.server_request_id, json!("input-1"));
        assert_eq!(r.related_operation_id.as_deref(), Some("t-7"));
        assert_eq!(r.message, "Approve spend of 40 EUR?");
        assert_eq!(r.schema_digest, value_digest(&r.requested_schema));
        assert_eq!(r.raw, approval_request("Approve spend of 40 EUR?"));
        // The answer goes back keyed by the same key.
        let out = Outbound::InputResponse {
            operation_id: "t-7".into(),
            server_request_id: r.server_request_id.clone(),
            reply: ApprovalReply::Accept {
                content: json!({"ok": true}),
            },
        };
        let sent = parse(&a.encode(3, &out));
        assert_eq!(sent["method"], "tasks/update");
        assert_eq!(
            sent["params"]["inputResponses"]["input-1"],
            json!({"action": "accept", "content": {"ok": true}})
        );
    }
    // A form elicitation without `mode` is form.
    let mut no_mode = approval_request("m");
    no_mode["params"].as_object_mut().unwrap().remove("mode");
    let reply = a.decode_reply(
        RequestKind::Poll,
        &ok(with(
            got("t", "input_required"),
            "inputRequests",
            json!({"k": no_mode}),
        )),
    );
    assert_eq!(reply.name(), "input_requests");
}

#[test]
fn missing_capability_is_refused_with_32021() {
    let a = adapter();
    for kind in [RequestKind::Submit, RequestKind::SubmitSync] {
        match a.decode_reply(kind, &err(-32021, "Missing required client capability")) {
            Reply::SubmitRefused { reason } => assert!(reason.starts_with("-32021"), "{reason}"),
            other => panic!("{kind:?}: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Negotiation, tools, classification

fn init_reply(version: &str, caps: Value) -> InFrame {
    ok(
        json!({"protocolVersion": version, "capabilities": caps, "serverInfo": {"name": "s", "version": "1"}}),
    )
}

#[test]
fn decode_initialize_cases() {
    let a = adapter();
    let ext = json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let caps = a
        .decode_initialize(&init_reply("2026-07-28", ext.clone()))
        .expect("ours");
    assert_eq!(caps.protocol_version, "2026-07-28");
    assert!(caps.tasks_tool_call && caps.tasks_cancel && !caps.tasks_list);
    assert!(!caps.idempotency_by_key && caps.idempotency_retention_ms.is_none());

    let with_idem = with(
        ext.clone(),
        "experimental",
        json!({ EXT_IDEMPOTENCY: {"retentionMs": 90_000} }),
    );
    let caps = a
        .decode_initialize(&init_reply("2026-07-28", with_idem))
        .expect("ours");
    assert!(caps.idempotency_by_key);
    assert_eq!(caps.idempotency_retention_ms, Some(90_000));

    let no_ext = a
        .decode_initialize(&init_reply("2026-07-28", json!({"tools": {}})))
        .expect("ours");
    assert!(!no_ext.tasks_tool_call && !no_ext.tasks_cancel && !no_ext.tasks_list);

    // 2025-11-25's capability shape does not count.
    let old = json!({"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}});
    let caps = a
        .decode_initialize(&init_reply("2026-07-28", old))
        .expect("ours");
    assert!(!caps.tasks_tool_call);

    for (name, frame) in [
        ("an unknown version", init_reply("2024-11-05", ext.clone())),
        (
            "2025-11-25 without the extension",
            init_reply("2025-11-25", json!({"tools": {}})),
        ),
        (
            "2025-11-25 with only its own tasks shape",
            init_reply(
                "2025-11-25",
                json!({"tasks": {"requests": {"tools": {"call": {}}}}}),
            ),
        ),
        ("no version", ok(json!({"capabilities": {}}))),
        (
            "no capabilities",
            ok(json!({"protocolVersion": "2026-07-28"})),
        ),
        ("error", err(-32602, "Unsupported protocol version")),
        ("HTTP", http(500, None, b"")),
        ("garbage", InFrame::message(b"nope".to_vec())),
    ] {
        assert!(a.decode_initialize(&frame).is_err(), "{name}");
    }
}

#[test]
fn every_tool_is_optional_the_server_decides() {
    let a = adapter();
    let tools = json!([
        {"name": "a", "inputSchema": {"type": "object"}},
        {"name": "b", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "forbidden"}},
        {"name": "c", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
        {"name": "d", "inputSchema": {"type": "object"}, "_meta": { META_SYNC_UPPER_BOUND_MS: 250 }},
    ]);
    let (list, next) = a
        .decode_list_tools(&ok(json!({"tools": tools, "nextCursor": "p2"})))
        .expect("valid");
    assert_eq!(next.as_deref(), Some("p2"));
    assert_eq!(
        list.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );
    assert!(list.iter().all(|t| t.task_support == TaskSupport::Optional));
    assert_eq!(list[3].sync_upper_bound_ms, Some(250));
    assert_eq!(list[0].descriptor_digest, value_digest(&tools[0]));
    assert!(a
        .decode_list_tools(&ok(json!({"tools": [{"inputSchema": {}}]})))
        .is_err());
    assert!(a
        .decode_list_tools(&ok(
            json!({"tools": [{"name": "x", "_meta": { META_SYNC_UPPER_BOUND_MS: "1s" }}]})
        ))
        .is_err());
    assert!(a.decode_list_tools(&ok(json!({}))).is_err());
}

#[test]
fn classifies_inbound_frames() {
    let a = adapter();
    let m = |v: Value| InFrame::message(serde_json::to_vec(&v).unwrap());
    assert_eq!(
        a.classify(&m(json!({"jsonrpc": "2.0", "id": 12, "result": {}}))),
        Inbound::Response { rpc_id: 12 }
    );
    assert_eq!(
        a.classify(&InFrame {
            request_id: Some(4),
            ..m(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}}))
        }),
        Inbound::Response { rpc_id: 4 }
    );
    assert_eq!(
        a.classify(&http(429, Some(10), b"")),
        Inbound::Response { rpc_id: 7 }
    );
    match a.classify(&m(
        json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": task("t", "working")}),
    )) {
        Inbound::Ignored { what } => assert!(what.contains("notifications/tasks"), "{what}"),
        other => panic!("{other:?}"),
    }
    // No server-to-client input requests in this era: an elicitation request is not an input
    // request, and it is declined rather than left unanswered.
    let elicit = with(
        with(approval_request("?"), "jsonrpc", json!("2.0")),
        "id",
        json!(0),
    );
    match a.classify(&m(elicit)) {
        Inbound::ServerRequest(req) => assert_eq!(
            req.answer,
            toolop::protocol::ServerAnswer::DeclineElicitation
        ),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        a.classify(&InFrame::message(Vec::new())),
        Inbound::Ignored { .. }
    ));
    assert!(matches!(
        a.classify(&InFrame::message(b"[1]".to_vec())),
        Inbound::Malformed { .. }
    ));
    assert!(matches!(
        a.classify(&InFrame::message(b"{".to_vec())),
        Inbound::Malformed { .. }
    ));
    assert!(matches!(
        a.classify(&m(json!({"jsonrpc": "2.0", "result": {}}))),
        Inbound::Malformed { .. }
    ));
}

// ---------------------------------------------------------------------------------------------
// Decoding never panics

const VOCAB: &[&str] = &[
    "jsonrpc",
    "id",
    "result",
    "error",
    "code",
    "message",
    "method",
    "params",
    "resultType",
    "task",
    "complete",
    "input_required",
    "taskId",
    "status",
    "statusMessage",
    "ttlMs",
    "pollIntervalMs",
    "createdAt",
    "inputRequests",
    "requestedSchema",
    "mode",
    "form",
    "content",
    "type",
    "text",
    "isError",
    "_meta",
    "working",
    "completed",
    "failed",
    "cancelled",
    "tasks",
    "nextCursor",
    "protocolVersion",
    "capabilities",
    "extensions",
    "tools",
    "name",
];

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(VOCAB).prop_map(str::to_string), 1 => "[a-zA-Z_/.]{0,8}"]
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

fn arb_status_word() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(vec!["working", "input_required", "completed", "failed", "cancelled"]).prop_map(Value::from),
        1 => arb_json(),
    ]
}

/// Task-shaped results with random inlined parts, so decoding reaches the per-status code.
fn arb_task_result() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just(json!("task")), Just(json!("complete")), arb_json()],
        prop_oneof![3 => "[a-z0-9-]{1,8}".prop_map(Value::from), 1 => arb_json()],
        arb_status_word(),
        prop::option::of(arb_json()),
        prop::option::of(prop_oneof![Just(approval_request("m")), arb_json()]),
        prop::option::of(arb_json()),
        prop::option::of(arb_json()),
    )
        .prop_map(|(rt, id, status, result, input, error, ttl)| {
            let mut t = json!({"resultType": rt, "taskId": id, "status": status});
            if let Some(r) = result {
                t["result"] = r;
            }
            if let Some(i) = input {
                t["inputRequests"] = json!({"k": i});
            }
            if let Some(e) = error {
                t["error"] = e;
            }
            if let Some(ttl) = ttl {
                t["ttlMs"] = ttl;
            }
            t
        })
}

fn arb_jsonrpc() -> impl Strategy<Value = Value> {
    let id = prop_oneof![any::<u64>().prop_map(Value::from), arb_json()];
    prop_oneof![
        (id.clone(), arb_json()).prop_map(|(id, result)| json!({"jsonrpc": "2.0", "id": id, "result": result})),
        (id.clone(), arb_task_result()).prop_map(|(id, result)| json!({"jsonrpc": "2.0", "id": id, "result": result})),
        (id.clone(), any::<i64>(), arb_json()).prop_map(
            |(id, code, message)| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        ),
        (id, arb_key(), arb_json())
            .prop_map(|(id, method, params)| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})),
    ]
}

fn arb_status() -> impl Strategy<Value = u16> {
    prop_oneof![6 => Just(200u16), 1 => prop::sample::select(vec![202u16, 400, 404, 429, 500, 503]), 1 => any::<u16>()]
}

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
        // An ack is never terminal, whatever it carries.
        if kind == RequestKind::Cancel {
            prop_assert!(!matches!(reply, Reply::CancelAcknowledged(_)), "{reply:?}");
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
    fn truncated_valid_replies_are_malformed_not_panics(which in 0usize..4, cut in any::<prop::sample::Index>()) {
        let bodies = [
            json!({"jsonrpc": "2.0", "id": 1, "result": created("t-1", "working")}),
            json!({"jsonrpc": "2.0", "id": 1, "result": with(got("t-1", "completed"), "result", call_result("x", false))}),
            json!({"jsonrpc": "2.0", "id": 1, "result": with(got("t-1", "input_required"), "inputRequests", json!({"k": approval_request("m")}))}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        ];
        let text = serde_json::to_vec(&bodies[which]).unwrap();
        let body = text[..cut.index(text.len())].to_vec();
        decode_everything(body.clone(), 200, Some(1), None)?;
        for kind in [RequestKind::Submit, RequestKind::Poll, RequestKind::Fetch, RequestKind::Cancel, RequestKind::InputResponse] {
            prop_assert_eq!(adapter().decode_reply(kind, &InFrame::message(body.clone())).name(), "malformed");
        }
    }

    #[test]
    fn any_valid_task_reads_back_exactly(
        id in "[ -~]{1,40}", status in prop::sample::select(vec!["working", "input_required", "completed", "failed", "cancelled"]),
        ttl in prop::option::of(any::<u64>()), poll in prop::option::of(any::<u64>()), msg in prop::option::of(any::<String>()),
    ) {
        let mut t = json!({"resultType": "task", "taskId": id, "status": status, "ttlMs": ttl,
                           "createdAt": "2026-12-01T00:00:00.000Z", "lastUpdatedAt": "2026-12-01T00:00:00.000Z"});
        if let Some(p) = poll { t["pollIntervalMs"] = json!(p); }
        if let Some(m) = &msg { t["statusMessage"] = json!(m); }
        let Reply::Submitted(v) = adapter().decode_reply(RequestKind::Submit, &ok(t.clone())) else {
            return Err(TestCaseError::fail("not submitted"));
        };
        prop_assert_eq!(&v.operation_id, &id);
        prop_assert_eq!((v.ttl_ms, v.poll_interval_ms, v.status_message.clone()), (ttl, poll, msg));
        t["resultType"] = json!("complete");
        prop_assert_eq!(adapter().decode_reply(RequestKind::Poll, &ok(t)), Reply::Status(v));
    }

    #[test]
    fn encoding_never_panics_and_is_a_request(
        key in any::<String>(), tool in any::<String>(), id in any::<String>(), args in arb_json(), rpc in 1u64..1_000_000,
    ) {
        let a = adapter();
        for out in [
            Outbound::Submit { key: key.clone(), tool: tool.clone(), arguments: args.clone(), ttl_ms: Some(1) },
            Outbound::SubmitSync { key: key.clone(), tool: tool.clone(), arguments: args.clone() },
            Outbound::LookupByKey { key: key.clone() },
            Outbound::Poll { operation_id: id.clone() },
            Outbound::FetchResult { operation_id: id.clone() },
            Outbound::Cancel { operation_id: id.clone() },
            Outbound::InputResponse { operation_id: id.clone(), server_request_id: json!(key.clone()), reply: ApprovalReply::Accept { content: args.clone() } },
        ] {
            let f = a.encode_frame(rpc, &out);
            let v = parse(&f.body);
            prop_assert_eq!(&v["id"], &json!(rpc));
            prop_assert!(v["method"].is_string());
            prop_assert_eq!(f.request_id, Some(rpc));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The real server

const RMCP: &str = "rmcp-3.11.0";
const RMCP_FILE: &str = "tasks-extension-stdio";

fn rmcp_frame(seq: &str) -> InFrame {
    let t = replay::stdio_transcript(RMCP, RMCP_FILE, None);
    t.messages
        .into_iter()
        .find(|m| m.label == seq)
        .unwrap_or_else(|| panic!("rmcp seq {seq}"))
        .frame
}

/// rmcp 3.11.0 answers an initialize (ours asks for 2026-07-28) with `protocolVersion:
/// "2025-11-25"` and the extension capability (seq 3, session A-tasks; the same for B-sync at
/// seq 138, whose client asked 2025-11-25 with the old tasks shape). The extension is negotiated
/// by capability: the session runs it at the revision the server chose.
#[test]
fn rmcp_answers_2025_11_25_with_the_extension_and_the_adapter_runs_it() {
    let a = adapter();
    for seq in ["3", "138"] {
        let caps = a
            .decode_initialize(&rmcp_frame(seq))
            .unwrap_or_else(|e| panic!("seq {seq}: {}", e.0));
        assert_eq!(
            caps.protocol_version, "2025-11-25",
            "seq {seq}: the revision the server chose"
        );
        assert!(
            caps.tasks_tool_call && caps.tasks_cancel && !caps.tasks_list,
            "seq {seq}"
        );
    }
    // Every later request's `_meta` names the session's revision: rmcp answers -32020 when it
    // differs from the MCP-Protocol-Version header, which carries the negotiated one.
    let submit = Outbound::Submit {
        key: "k".into(),
        tool: "slow_sum".into(),
        arguments: json!({}),
        ttl_ms: None,
    };
    for out in [
        submit,
        Outbound::Poll {
            operation_id: "t".into(),
        },
        Outbound::Cancel {
            operation_id: "t".into(),
        },
    ] {
        let sent: Value = serde_json::from_slice(&a.encode(5, &out)).unwrap();
        assert_eq!(
            sent["params"]["_meta"][META_PROTOCOL_VERSION], "2025-11-25",
            "{sent}"
        );
        assert!(
            sent["params"]["_meta"][META_CLIENT_CAPABILITIES]["extensions"][EXTENSION_ID]
                .is_object(),
            "{sent}"
        );
    }
    // A fresh adapter (no initialize answered yet) speaks its own revision.
    let sent: Value = serde_json::from_slice(&adapter().encode(
        5,
        &Outbound::Poll {
            operation_id: "t".into(),
        },
    ))
    .unwrap();
    assert_eq!(
        sent["params"]["_meta"][META_PROTOCOL_VERSION],
        PROTOCOL_VERSION
    );
    // The same reply without the extension capability: nothing here would create a task.
    let mut v: Value = serde_json::from_slice(&rmcp_frame("3").body).unwrap();
    v["result"]["capabilities"]
        .as_object_mut()
        .unwrap()
        .remove("extensions");
    let err = a
        .decode_initialize(&InFrame::message(serde_json::to_vec(&v).unwrap()))
        .unwrap_err();
    assert!(err.0.contains("--protocol mcp-2025-11-25"), "{}", err.0);
}

/// Every server message of the rmcp transcript, replayed through the adapter and compared with
/// the committed expectation file. `tasks/get` replies are shown decoded both as a poll and as
/// a fetch (the extension sends `tasks/get` for both).
#[test]
fn rmcp_transcript_replay_matches_the_expectations() {
    let a = adapter();
    let t = replay::stdio_transcript(RMCP, RMCP_FILE, None);
    let actual = replay::render(&a, &t, true);
    assert!(actual.lines().count() >= 80, "{actual}");
    replay::check(&actual, replay::expect_path(RMCP, RMCP_FILE, &a));
}

/// rmcp's own words, by the table: an unknown task is not found; a `_meta` complaint is about
/// the request, not the task (a code-only reading made it "not found": the core would have
/// given the task up after its retries); an unknown tool is refused; a tool's own `-32603`
/// after it ran leaves the outcome open.
#[test]
fn rmcp_errors_are_read_by_code_and_exact_words() {
    let a = adapter();
    for kind in [RequestKind::Poll, RequestKind::Fetch] {
        assert_eq!(a.decode_reply(kind, &rmcp_frame("113")).name(), "not_found");
        assert_eq!(a.decode_reply(kind, &rmcp_frame("177")).name(), "error");
    }
    assert_eq!(
        a.decode_reply(RequestKind::Cancel, &rmcp_frame("116"))
            .name(),
        "not_found"
    );
    assert_eq!(
        a.decode_reply(RequestKind::Submit, &rmcp_frame("130"))
            .name(),
        "submit_refused"
    );
    assert_eq!(
        a.decode_reply(RequestKind::SubmitSync, &rmcp_frame("147"))
            .name(),
        "submit_outcome_unknown"
    );
    assert_eq!(
        a.decode_reply(RequestKind::SubmitSync, &rmcp_frame("155"))
            .name(),
        "submit_refused"
    );
}

/// As for MCP 2025-11-25: a body naming another request than the one the transport answers is
/// refused, never handed to the other request.
#[test]
fn a_reply_whose_body_names_another_request_is_refused_not_rerouted() {
    let a = adapter();
    let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete", "taskId": "t", "status": "working"}})).unwrap();
    let f = InFrame {
        request_id: Some(9),
        ..InFrame::message(body.clone())
    };
    assert_eq!(a.classify(&f), Inbound::Response { rpc_id: 9 });
    match a.decode_reply(RequestKind::Poll, &f) {
        Reply::Malformed { reason } => assert!(reason.contains("names request 3"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let own = InFrame {
        request_id: Some(3),
        ..InFrame::message(body)
    };
    assert_ne!(a.decode_reply(RequestKind::Poll, &own).name(), "malformed");
}
