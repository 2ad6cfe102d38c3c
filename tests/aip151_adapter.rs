//! The AIP-151 adapter against the documented HTTP/JSON mapping (`shared/spec/aip-151.md`).
//!
//! 1. Every message the adapter emits round-trips through the mapping: method, path from the
//!    configured templates, body field names (`requestId`), the lookup filter.
//! 2. Operations decode by the mapping: `done` omitted means false, `error` is a
//!    `google.rpc.Status` `{code, message, details?}`, `response` is an `Any` with `@type`.
//! 3. A data-driven table covers every decode row: HTTP statuses, Status bodies per request kind,
//!    each Operation shape, hierarchical names.
//! 4. Decoding never panics, whatever the bytes or JSON, for every request kind.
//! 5. URL templates come from configuration.

use proptest::prelude::*;
use serde_json::{json, Value};
use toolop::digest::value_digest;
use toolop::protocol::aip151::{
    code, parse_request_id_filter, percent_decode, Aip151Adapter, Aip151Config,
    METADATA_RESULT_DIGEST, PROTOCOL_VERSION,
};
use toolop::protocol::{
    Adapter, ApprovalReply, Inbound, Outbound, Reply, RequestKind, ResultView, TaskSupport,
    TaskView,
};
use toolop::record::{AdapterId, ProtocolStatus};
use toolop::transport::{HttpTarget, InFrame};

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

const NAME: &str = "projects/p/locations/l/operations/op-1";
const TYPE: &str = "type.googleapis.com/toolop.test.Report";

fn cfg() -> Aip151Config {
    Aip151Config {
        submit_path: "/v1/projects/p/reports:{tool}".into(),
        operation_path: "/v1/{name}".into(),
        operations_collection: "/v1/operations".into(),
        tools: vec!["build".into(), "export".into()],
        dedupe_window_ms: Some(60_000),
        cancel_supported: true,
    }
}

fn other_cfg() -> Aip151Config {
    Aip151Config {
        submit_path: "/v2beta/{tool}:run".into(),
        operation_path: "/v2beta/regions/eu/{name}".into(),
        operations_collection: "/v2beta/regions/eu/operations".into(),
        tools: vec!["build".into()],
        dedupe_window_ms: None,
        cancel_supported: false,
    }
}

fn adapter() -> Aip151Adapter {
    Aip151Adapter::new(cfg())
}

fn frame(status: u16, body: &Value) -> InFrame {
    InFrame {
        request_id: Some(7),
        http_status: status,
        retry_after_ms: None,
        body: serde_json::to_vec(body).unwrap(),
    }
}

fn raw(status: u16, body: &[u8]) -> InFrame {
    InFrame {
        request_id: Some(7),
        http_status: status,
        retry_after_ms: None,
        body: body.to_vec(),
    }
}

fn status_body(http: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": http, "message": message, "status": status}})
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the adapter emits JSON")
}

fn view(name: &str, status: ProtocolStatus, msg: Option<&str>) -> TaskView {
    TaskView {
        operation_id: name.into(),
        status,
        poll_interval_ms: None,
        ttl_ms: None,
        status_message: msg.map(str::to_string),
        hint_problem: None,
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Emitted messages

/// Parse a frame back through the documented mapping into the `Outbound` it encodes.
fn read_back(c: &Aip151Config, http: &HttpTarget, body: &[u8]) -> Outbound {
    let (path, query) = match http.path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (http.path.as_str(), None),
    };
    let (op_pre, op_post) = c.operation_path.split_once("{name}").unwrap();
    match http.method.as_str() {
        "GET" if query.is_some() => {
            assert_eq!(path, c.operations_collection);
            let filter = query.unwrap().strip_prefix("filter=").unwrap();
            let key = parse_request_id_filter(&percent_decode(filter).unwrap()).unwrap();
            Outbound::LookupByKey { key }
        }
        "GET" => {
            let name = path
                .strip_prefix(op_pre)
                .unwrap()
                .strip_suffix(op_post)
                .unwrap();
            assert!(body.is_empty(), "GET has no body");
            Outbound::Poll {
                operation_id: percent_decode(name).unwrap(),
            }
        }
        "POST" if path.ends_with(":cancel") => {
            let name = path
                .strip_suffix(":cancel")
                .unwrap()
                .strip_prefix(op_pre)
                .unwrap()
                .strip_suffix(op_post)
                .unwrap();
            assert_eq!(
                parse(body),
                json!({}),
                "CancelOperation body is `*` of an empty request"
            );
            Outbound::Cancel {
                operation_id: percent_decode(name).unwrap(),
            }
        }
        "POST" => {
            let (pre, post) = c.submit_path.split_once("{tool}").unwrap();
            let tool = path.strip_prefix(pre).unwrap().strip_suffix(post).unwrap();
            let mut args = parse(body);
            let key = args.as_object_mut().unwrap().remove("requestId").unwrap();
            Outbound::Submit {
                key: key.as_str().unwrap().into(),
                tool: percent_decode(tool).unwrap(),
                arguments: args,
                ttl_ms: None,
            }
        }
        m => panic!("unexpected method {m}"),
    }
}

#[test]
fn every_emitted_message_round_trips_through_the_http_json_mapping() {
    let args = json!({"month": "2026-10", "__sim": {"duration_ms": 5}, "nested": {"a": [1, 2]}});
    let outs = [
        Outbound::Submit {
            key: "k-1".into(),
            tool: "build".into(),
            arguments: args.clone(),
            ttl_ms: None,
        },
        Outbound::LookupByKey { key: "k-1".into() },
        Outbound::LookupByKey {
            key: "we\"ird \\key?&=/#".into(),
        },
        Outbound::Poll {
            operation_id: NAME.into(),
        },
        Outbound::Poll {
            operation_id: "operations/op with space".into(),
        },
        Outbound::Cancel {
            operation_id: NAME.into(),
        },
    ];
    for c in [cfg(), other_cfg()] {
        let a = Aip151Adapter::new(c.clone());
        for (i, out) in outs.iter().enumerate() {
            let f = a.encode_frame(40 + i as u64, out);
            assert_eq!(
                f.request_id,
                Some(40 + i as u64),
                "correlation id on {out:?}"
            );
            assert_eq!(a.encode(40 + i as u64, out), f.body);
            let http = f.http.as_ref().expect("plain HTTP frame");
            assert_eq!(&read_back(&c, http, &f.body), out, "{http:?}");
        }
    }
}

#[test]
fn submit_carries_the_arguments_and_the_aip155_request_id() {
    let a = adapter();
    let f = a.encode_frame(
        3,
        &Outbound::Submit {
            key: "k-9".into(),
            tool: "build".into(),
            arguments: json!({"x": 1}),
            ttl_ms: Some(99),
        },
    );
    assert_eq!(
        f.http,
        Some(HttpTarget {
            method: "POST".into(),
            path: "/v1/projects/p/reports:build".into()
        })
    );
    // No TTL on the wire: AIP has none.
    assert_eq!(parse(&f.body), json!({"x": 1, "requestId": "k-9"}));
    // SubmitSync is the same request (AIP has no synchronous form).
    let s = a.encode_frame(
        3,
        &Outbound::SubmitSync {
            key: "k-9".into(),
            tool: "build".into(),
            arguments: json!({"x": 1}),
        },
    );
    assert_eq!(s, f);
    // The key wins over an argument of the same name; null is no arguments; a non-object is wrapped.
    let f = a.encode_frame(
        4,
        &Outbound::Submit {
            key: "k".into(),
            tool: "build".into(),
            arguments: json!({"requestId": "x"}),
            ttl_ms: None,
        },
    );
    assert_eq!(parse(&f.body), json!({"requestId": "k"}));
    let f = a.encode_frame(
        4,
        &Outbound::Submit {
            key: "k".into(),
            tool: "build".into(),
            arguments: Value::Null,
            ttl_ms: None,
        },
    );
    assert_eq!(parse(&f.body), json!({"requestId": "k"}));
    let f = a.encode_frame(
        4,
        &Outbound::Submit {
            key: "k".into(),
            tool: "build".into(),
            arguments: json!([1]),
            ttl_ms: None,
        },
    );
    assert_eq!(parse(&f.body), json!({"requestId": "k", "arguments": [1]}));
}

#[test]
fn lookup_poll_fetch_and_cancel_paths_are_exact() {
    let a = adapter();
    let path = |out: &Outbound| {
        let h = a.encode_frame(1, out).http.unwrap();
        format!("{} {}", h.method, h.path)
    };
    assert_eq!(
        path(&Outbound::LookupByKey { key: "KEY".into() }),
        "GET /v1/operations?filter=request_id%3D%22KEY%22"
    );
    assert_eq!(
        path(&Outbound::Poll {
            operation_id: NAME.into()
        }),
        format!("GET /v1/{NAME}")
    );
    // There is no separate fetch: the done Operation carries the result.
    assert_eq!(
        path(&Outbound::FetchResult {
            operation_id: NAME.into()
        }),
        format!("GET /v1/{NAME}")
    );
    assert_eq!(
        path(&Outbound::Cancel {
            operation_id: NAME.into()
        }),
        format!("POST /v1/{NAME}:cancel")
    );
}

#[test]
fn input_response_is_a_harmless_uncorrelated_frame() {
    let f = adapter().encode_frame(
        5,
        &Outbound::InputResponse {
            operation_id: NAME.into(),
            server_request_id: json!(1),
            reply: ApprovalReply::Decline,
        },
    );
    assert_eq!(f.request_id, None);
    assert_eq!(f.http, None);
    assert!(f.body.is_empty());
}

#[test]
fn url_templates_come_from_configuration() {
    let (a, b) = (adapter(), Aip151Adapter::new(other_cfg()));
    let sub = Outbound::Submit {
        key: "k".into(),
        tool: "build".into(),
        arguments: json!({}),
        ttl_ms: None,
    };
    let poll = Outbound::Poll {
        operation_id: "operations/o-1".into(),
    };
    let look = Outbound::LookupByKey { key: "k".into() };
    let paths =
        |ad: &Aip151Adapter| [&sub, &poll, &look].map(|o| ad.encode_frame(1, o).http.unwrap().path);
    assert_eq!(
        paths(&a),
        [
            "/v1/projects/p/reports:build".to_string(),
            "/v1/operations/o-1".to_string(),
            "/v1/operations?filter=request_id%3D%22k%22".to_string()
        ]
    );
    assert_eq!(
        paths(&b),
        [
            "/v2beta/build:run".to_string(),
            "/v2beta/regions/eu/operations/o-1".to_string(),
            "/v2beta/regions/eu/operations?filter=request_id%3D%22k%22".to_string()
        ]
    );
}

#[test]
fn capabilities_come_from_configuration_without_a_handshake() {
    let a = adapter();
    assert_eq!(a.id(), AdapterId::Aip151);
    let caps = a.configured_capabilities().expect("configured");
    assert_eq!(caps.protocol_version, PROTOCOL_VERSION);
    assert!(caps.tasks_tool_call && caps.tasks_cancel && caps.idempotency_by_key);
    assert_eq!(caps.idempotency_retention_ms, Some(60_000));
    assert_eq!(caps.tools.keys().collect::<Vec<_>>(), ["build", "export"]);
    for (name, t) in &caps.tools {
        assert_eq!(&t.name, name);
        assert_eq!(t.task_support, TaskSupport::Required);
        assert_eq!(t.sync_upper_bound_ms, None);
        assert_eq!(t.descriptor_digest, value_digest(&a.tool_descriptor(name)));
    }
    assert_ne!(
        caps.tools["build"].descriptor_digest,
        caps.tools["export"].descriptor_digest
    );
    let b = Aip151Adapter::new(other_cfg())
        .configured_capabilities()
        .unwrap();
    assert!(!b.tasks_cancel);
    assert_eq!(b.idempotency_retention_ms, None);
    // Same tool, another endpoint: another tool version.
    assert_ne!(
        b.tools["build"].descriptor_digest,
        caps.tools["build"].descriptor_digest
    );
    // Negotiation is not used.
    assert!(a.encode_initialize(1).is_empty());
    assert!(a.encode_list_tools(1, None).is_empty());
    assert_eq!(a.encode_initialized(), None);
    assert!(a.decode_initialize(&frame(200, &json!({}))).is_err());
    assert!(a.decode_list_tools(&frame(200, &json!({}))).is_err());
}

#[test]
fn classify_ties_every_correlated_frame_to_its_request() {
    let a = adapter();
    for status in [200, 202, 404, 429, 500, 503] {
        assert_eq!(
            a.classify(&raw(status, b"garbage")),
            Inbound::Response { rpc_id: 7 }
        );
    }
    let mut f = raw(200, b"{}");
    f.request_id = None;
    assert!(matches!(a.classify(&f), Inbound::Ignored { .. }));
}

// ---------------------------------------------------------------------------------------------
// 2. Operation JSON mapping

#[test]
fn operation_json_mapping_reads_proto3_defaults_and_google_rpc_status() {
    let a = adapter();
    let poll = |op: Value| a.decode_reply(RequestKind::Poll, &frame(200, &op));
    // `done` omitted: false. So are `done: false` and `done: null`.
    for op in [
        json!({"name": NAME}),
        json!({"name": NAME, "done": false}),
        json!({"name": NAME, "done": null}),
    ] {
        assert_eq!(
            poll(op),
            Reply::Status(view(NAME, ProtocolStatus::Working, None))
        );
    }
    // Metadata is opaque, whatever its shape.
    let op = json!({"name": NAME, "metadata": {"@type": "type.googleapis.com/x.Meta", "progressPercent": 40}});
    assert_eq!(
        poll(op),
        Reply::Status(view(NAME, ProtocolStatus::Working, None))
    );
    assert_eq!(
        poll(json!({"name": NAME, "metadata": 3})),
        Reply::Status(view(NAME, ProtocolStatus::Working, None))
    );
    // error: {code, message, details?}; code and message may be omitted (proto3 defaults).
    let err = |e: Value| poll(json!({"name": NAME, "done": true, "error": e}));
    assert_eq!(
        err(
            json!({"code": 5, "message": "gone", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo"}]})
        ),
        Reply::Status(view(NAME, ProtocolStatus::Failed, Some("NOT_FOUND: gone")))
    );
    assert_eq!(
        err(json!({"code": 1})),
        Reply::Status(view(NAME, ProtocolStatus::Cancelled, Some("CANCELLED")))
    );
    assert_eq!(
        err(json!({})),
        Reply::Status(view(NAME, ProtocolStatus::Failed, Some("OK")))
    );
    for bad in [
        json!({"code": "5"}),
        json!({"code": 1.5}),
        json!({"message": 3}),
        json!({"details": {}}),
        json!("x"),
    ] {
        assert!(matches!(err(bad.clone()), Reply::Malformed { .. }), "{bad}");
    }
    // Invariants of the proto: not done carries nothing; done carries at most one of the oneof.
    for bad in [
        json!({"name": NAME, "response": {"@type": TYPE}}),
        json!({"name": NAME, "done": false, "error": {"code": 2}}),
        json!({"name": NAME, "done": true, "response": {"@type": TYPE}, "error": {"code": 2}}),
        json!({"name": NAME, "done": "true"}),
        json!({"name": NAME, "done": true, "response": "x"}),
        json!({"name": ""}),
        json!({"done": true}),
        json!({"name": 5}),
        json!([]),
    ] {
        assert!(
            matches!(poll(bad.clone()), Reply::Malformed { .. }),
            "{bad}"
        );
    }
}

#[test]
fn fetch_result_is_the_response_any_with_its_digest() {
    let a = adapter();
    let response = json!({"@type": TYPE, "rows": 3, "blocks": [{"text": "ok"}]});
    let digest = value_digest(&response);
    let fetch = |op: Value| a.decode_reply(RequestKind::Fetch, &frame(200, &op));
    let expected = |verified: bool, problem: Option<&str>| {
        Reply::Result(ResultView {
            payload: response.clone(),
            is_error: false,
            related_operation_id: Some(NAME.into()),
            digest: digest.clone(),
            verified,
            problem: problem.map(str::to_string),
        })
    };
    assert_eq!(
        fetch(json!({"name": NAME, "done": true, "response": response})),
        expected(true, None)
    );
    let with_digest = json!({"name": NAME, "done": true, "response": response, "metadata": {METADATA_RESULT_DIGEST: digest}});
    assert_eq!(fetch(with_digest), expected(true, None));
    let Reply::Result(rv) = fetch(
        json!({"name": NAME, "done": true, "response": response, "metadata": {METADATA_RESULT_DIGEST: "beef"}}),
    ) else {
        panic!("a result")
    };
    assert!(!rv.verified && rv.problem.unwrap().contains("beef"));
    // An Any without a type URL is not a well-formed response.
    let Reply::Result(rv) = fetch(json!({"name": NAME, "done": true, "response": {"rows": 3}}))
    else {
        panic!("a result")
    };
    assert!(!rv.verified && rv.problem.unwrap().contains("@type"));
}

// ---------------------------------------------------------------------------------------------
// 3. Decode table

struct Case {
    what: &'static str,
    kind: RequestKind,
    status: u16,
    retry_after_ms: Option<u64>,
    body: Vec<u8>,
    want: Reply,
}

fn case(what: &'static str, kind: RequestKind, status: u16, body: Value, want: Reply) -> Case {
    Case {
        what,
        kind,
        status,
        retry_after_ms: None,
        body: serde_json::to_vec(&body).unwrap(),
        want,
    }
}

fn bare(
    what: &'static str,
    kind: RequestKind,
    status: u16,
    retry_after_ms: Option<u64>,
    body: &[u8],
    want: Reply,
) -> Case {
    Case {
        what,
        kind,
        status,
        retry_after_ms,
        body: body.to_vec(),
        want,
    }
}

fn op_done(extra: Value) -> Value {
    let mut op =
        json!({"name": NAME, "done": true, "metadata": {"@type": "type.googleapis.com/x.Meta"}});
    for (k, v) in extra.as_object().unwrap() {
        op[k] = v.clone();
    }
    op
}

fn cases() -> Vec<Case> {
    use RequestKind::*;
    let working = || view(NAME, ProtocolStatus::Working, None);
    let completed = || view(NAME, ProtocolStatus::Completed, None);
    let response = json!({"@type": TYPE, "ok": true});
    let refused = |s: &str| Reply::SubmitRefused { reason: s.into() };
    let err = |s: &str| Reply::Error { message: s.into() };
    vec![
        // Transport-level statuses, for every kind that sends a request.
        bare(
            "429 poll",
            Poll,
            429,
            Some(1500),
            b"",
            Reply::RateLimited {
                retry_after_ms: Some(1500),
            },
        ),
        bare(
            "429 submit",
            Submit,
            429,
            None,
            b"{}",
            Reply::RateLimited {
                retry_after_ms: None,
            },
        ),
        bare(
            "503 fetch",
            Fetch,
            503,
            Some(20),
            b"",
            Reply::Unavailable {
                retry_after_ms: Some(20),
            },
        ),
        bare(
            "503 cancel",
            Cancel,
            503,
            None,
            b"",
            Reply::Unavailable {
                retry_after_ms: None,
            },
        ),
        bare("202 poll", Poll, 202, None, b"", Reply::Accepted),
        case(
            "404 poll",
            Poll,
            404,
            status_body(404, "NOT_FOUND", "Operation not found"),
            Reply::NotFound {
                message: "HTTP 404 NOT_FOUND: Operation not found".into(),
            },
        ),
        bare(
            "404 fetch bare",
            Fetch,
            404,
            None,
            b"",
            Reply::NotFound {
                message: "HTTP 404 without a google.rpc.Status body".into(),
            },
        ),
        case(
            "404 cancel",
            Cancel,
            404,
            status_body(404, "NOT_FOUND", "gone"),
            Reply::NotFound {
                message: "HTTP 404 NOT_FOUND: gone".into(),
            },
        ),
        case(
            "404 lookup: no such collection",
            Lookup,
            404,
            status_body(404, "NOT_FOUND", "no route"),
            Reply::LookupUnsupported,
        ),
        case(
            "501 lookup",
            Lookup,
            501,
            status_body(501, "UNIMPLEMENTED", "ListOperations"),
            Reply::LookupUnsupported,
        ),
        case(
            "400 lookup: filter not understood",
            Lookup,
            400,
            status_body(400, "INVALID_ARGUMENT", "bad filter"),
            Reply::LookupUnsupported,
        ),
        case(
            "500 lookup",
            Lookup,
            500,
            status_body(500, "INTERNAL", "boom"),
            err("lookup: HTTP 500 INTERNAL: boom"),
        ),
        case(
            "501 cancel",
            Cancel,
            501,
            status_body(501, "UNIMPLEMENTED", "no cancel"),
            err("UNIMPLEMENTED: cancel: HTTP 501 UNIMPLEMENTED: no cancel"),
        ),
        case(
            "FAILED_PRECONDITION cancel of a done operation",
            Cancel,
            400,
            status_body(400, "FAILED_PRECONDITION", "operation is done"),
            Reply::CancelRejectedTerminal {
                message: "HTTP 400 FAILED_PRECONDITION: operation is done".into(),
            },
        ),
        case(
            "cancel ok: Empty",
            Cancel,
            200,
            json!({}),
            Reply::CancelPending,
        ),
        bare(
            "cancel ok: no body",
            Cancel,
            200,
            None,
            b"",
            Reply::CancelPending,
        ),
        bare(
            "cancel ok: not JSON",
            Cancel,
            200,
            None,
            b"<html>",
            Reply::Malformed {
                reason: "cancel: body is not JSON: expected value at line 1 column 1".into(),
            },
        ),
        case(
            "cancel 403",
            Cancel,
            403,
            status_body(403, "PERMISSION_DENIED", "no"),
            err("cancel: HTTP 403 PERMISSION_DENIED: no"),
        ),
        // Submit errors: refused before an operation existed, or outcome unknown.
        case(
            "submit INVALID_ARGUMENT",
            Submit,
            400,
            status_body(400, "INVALID_ARGUMENT", "bad month"),
            refused("HTTP 400 INVALID_ARGUMENT: bad month"),
        ),
        case(
            "submit ABORTED",
            Submit,
            409,
            status_body(409, "ABORTED", "busy"),
            refused("HTTP 409 ABORTED: busy"),
        ),
        case(
            "submit PERMISSION_DENIED",
            SubmitSync,
            403,
            status_body(403, "PERMISSION_DENIED", "no"),
            refused("HTTP 403 PERMISSION_DENIED: no"),
        ),
        case(
            "submit UNIMPLEMENTED",
            Submit,
            501,
            status_body(501, "UNIMPLEMENTED", "no method"),
            refused("HTTP 501 UNIMPLEMENTED: no method"),
        ),
        case(
            "submit status from HTTP code",
            Submit,
            400,
            json!({"error": {"code": 400, "message": "m"}}),
            refused("HTTP 400 INVALID_ARGUMENT: m"),
        ),
        case(
            "submit DEADLINE_EXCEEDED",
            Submit,
            504,
            status_body(504, "DEADLINE_EXCEEDED", "slow"),
            err("submit outcome unknown: HTTP 504 DEADLINE_EXCEEDED: slow"),
        ),
        case(
            "submit INTERNAL",
            Submit,
            500,
            status_body(500, "INTERNAL", "x"),
            err("submit outcome unknown: HTTP 500 INTERNAL: x"),
        ),
        case(
            "submit UNKNOWN",
            Submit,
            500,
            status_body(500, "UNKNOWN", "x"),
            err("submit outcome unknown: HTTP 500 UNKNOWN: x"),
        ),
        case(
            "submit UNAVAILABLE in a 500",
            Submit,
            500,
            status_body(500, "UNAVAILABLE", "x"),
            err("submit outcome unknown: HTTP 500 UNAVAILABLE: x"),
        ),
        case(
            "submit ALREADY_EXISTS",
            Submit,
            409,
            status_body(409, "ALREADY_EXISTS", "dup"),
            err("submit outcome unknown: HTTP 409 ALREADY_EXISTS: dup"),
        ),
        bare(
            "submit 400 without Status",
            Submit,
            400,
            None,
            b"bad",
            err("submit outcome unknown: HTTP 400 without a google.rpc.Status body"),
        ),
        bare(
            "submit 502 without Status",
            Submit,
            502,
            None,
            b"",
            err("submit outcome unknown: HTTP 502 without a google.rpc.Status body"),
        ),
        case(
            "poll 500",
            Poll,
            500,
            status_body(500, "INTERNAL", "x"),
            err("poll: HTTP 500 INTERNAL: x"),
        ),
        // Submit successes, including an immediate done.
        case(
            "submit working",
            Submit,
            200,
            json!({"name": NAME}),
            Reply::Submitted(working()),
        ),
        case(
            "submit immediately done",
            Submit,
            200,
            op_done(json!({"response": response})),
            Reply::Submitted(completed()),
        ),
        case(
            "submit_sync is a submit",
            SubmitSync,
            200,
            json!({"name": NAME, "done": false}),
            Reply::Submitted(working()),
        ),
        case(
            "submit without a name",
            Submit,
            200,
            json!({"done": true}),
            Reply::Malformed {
                reason: "submit: Operation has no name".into(),
            },
        ),
        // Status mapping on Get.
        case(
            "poll done omitted",
            Poll,
            200,
            json!({"name": NAME, "metadata": {}}),
            Reply::Status(working()),
        ),
        case(
            "poll response",
            Poll,
            200,
            op_done(json!({"response": response})),
            Reply::Status(completed()),
        ),
        case(
            "poll error code 1",
            Poll,
            200,
            op_done(json!({"error": {"code": 1, "message": "CANCELLED"}})),
            Reply::Status(view(
                NAME,
                ProtocolStatus::Cancelled,
                Some("CANCELLED: CANCELLED"),
            )),
        ),
        case(
            "poll error ABORTED (pre-empted)",
            Poll,
            200,
            op_done(json!({"error": {"code": 10, "message": "pre-empted"}})),
            Reply::Status(view(
                NAME,
                ProtocolStatus::Failed,
                Some("ABORTED: pre-empted"),
            )),
        ),
        case(
            "poll neither",
            Poll,
            200,
            op_done(json!({})),
            Reply::Status(view(NAME, ProtocolStatus::DoneWithoutResult, None)),
        ),
        case(
            "poll short name",
            Poll,
            200,
            json!({"name": "operations/123"}),
            Reply::Status(view("operations/123", ProtocolStatus::Working, None)),
        ),
        bare(
            "poll not JSON",
            Poll,
            200,
            None,
            b"{",
            Reply::Malformed {
                reason: "poll: body is not JSON: EOF while parsing an object at line 1 column 1"
                    .into(),
            },
        ),
        bare(
            "poll empty",
            Poll,
            200,
            None,
            b"",
            Reply::Malformed {
                reason: "poll: empty body".into(),
            },
        ),
        // Fetch: the done Operation is the result.
        case(
            "fetch error code 1",
            Fetch,
            200,
            op_done(json!({"error": {"code": 1, "message": "CANCELLED"}})),
            Reply::NoResultStored {
                message: "cancelled: CANCELLED".into(),
            },
        ),
        case(
            "fetch INTERNAL",
            Fetch,
            200,
            op_done(json!({"error": {"code": 13, "message": "tool failed"}})),
            Reply::ResultIsError {
                code: 13,
                message: "tool failed".into(),
            },
        ),
        case(
            "fetch neither",
            Fetch,
            200,
            op_done(json!({})),
            Reply::NoResultStored {
                message: "done without result".into(),
            },
        ),
        case(
            "fetch before done",
            Fetch,
            200,
            json!({"name": NAME}),
            Reply::Status(working()),
        ),
        // Lookup by request_id.
        case(
            "lookup one",
            Lookup,
            200,
            json!({"operations": [{"name": NAME}]}),
            Reply::LookupFound(working()),
        ),
        case(
            "lookup one done",
            Lookup,
            200,
            json!({"operations": [op_done(json!({"response": response}))]}),
            Reply::LookupFound(completed()),
        ),
        case(
            "lookup none (omitted)",
            Lookup,
            200,
            json!({}),
            Reply::LookupNotFound,
        ),
        case(
            "lookup none (empty)",
            Lookup,
            200,
            json!({"operations": [], "nextPageToken": ""}),
            Reply::LookupNotFound,
        ),
        case(
            "lookup two",
            Lookup,
            200,
            json!({"operations": [{"name": NAME}, {"name": "operations/2"}]}),
            Reply::Malformed {
                reason: "lookup by request_id returned 2 operations: filter ignored or key reused"
                    .into(),
            },
        ),
        case(
            "lookup paginated",
            Lookup,
            200,
            json!({"operations": [{"name": NAME}], "nextPageToken": "p2"}),
            Reply::Malformed {
                reason: "lookup answered with a paginated list: request_id filter ignored".into(),
            },
        ),
        case(
            "lookup bad op",
            Lookup,
            200,
            json!({"operations": [{"done": true}]}),
            Reply::Malformed {
                reason: "lookup: operations[0]: Operation has no name".into(),
            },
        ),
        case(
            "lookup operations not a list",
            Lookup,
            200,
            json!({"operations": {}}),
            Reply::Malformed {
                reason: "lookup: \"operations\" is an object".into(),
            },
        ),
    ]
}

#[test]
fn decode_table() {
    let a = adapter();
    let mut failures = vec![];
    for c in cases() {
        let f = InFrame {
            request_id: Some(7),
            http_status: c.status,
            retry_after_ms: c.retry_after_ms,
            body: c.body,
        };
        let got = a.decode_reply(c.kind, &f);
        if got != c.want {
            failures.push(format!("{}: got {got:?}\n    want {:?}", c.what, c.want));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn decode_table_covers_every_status_and_every_reply_row() {
    let statuses: Vec<ProtocolStatus> = cases()
        .iter()
        .filter_map(|c| match &c.want {
            Reply::Status(v) | Reply::Submitted(v) | Reply::LookupFound(v) => Some(v.status),
            _ => None,
        })
        .collect();
    for s in [
        ProtocolStatus::Working,
        ProtocolStatus::Completed,
        ProtocolStatus::Failed,
        ProtocolStatus::Cancelled,
        ProtocolStatus::DoneWithoutResult,
    ] {
        assert!(statuses.contains(&s), "{s:?} not covered");
    }
    assert!(
        !statuses.contains(&ProtocolStatus::InputRequired),
        "AIP has no input_required"
    );
    let names: std::collections::BTreeSet<&str> = cases().iter().map(|c| c.want.name()).collect();
    for n in [
        "submitted",
        "submit_refused",
        "lookup_found",
        "lookup_not_found",
        "lookup_unsupported",
        "status",
        "not_found",
        "rate_limited",
        "unavailable",
        "accepted_202",
        "no_result_stored",
        "result_is_error",
        "cancel_pending",
        "cancel_rejected_terminal",
        "error",
        "malformed",
    ] {
        assert!(names.contains(n), "no case for {n}");
    }
}

#[test]
fn negotiation_and_input_kinds_are_never_decoded_as_replies() {
    let a = adapter();
    for kind in [
        RequestKind::Initialize,
        RequestKind::ListTools,
        RequestKind::InputResponse,
    ] {
        assert!(matches!(
            a.decode_reply(kind, &frame(200, &json!({"name": NAME}))),
            Reply::Error { .. }
        ));
    }
}

#[test]
fn error_codes_map_both_ways() {
    assert_eq!(
        code::from_name("FAILED_PRECONDITION"),
        Some(code::FAILED_PRECONDITION)
    );
    assert_eq!(code::http_status(code::UNIMPLEMENTED), 501);
    assert_eq!(code::from_http_status(504), code::DEADLINE_EXCEEDED);
}

// ---------------------------------------------------------------------------------------------
// 4. Never panics

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z@/\\.]{0,12}".prop_map(Value::from),
        Just(json!("type.googleapis.com/x.Y")),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("name".to_string()),
                    Just("done".to_string()),
                    Just("response".to_string()),
                    Just("error".to_string()),
                    Just("metadata".to_string()),
                    Just("code".to_string()),
                    Just("message".to_string()),
                    Just("details".to_string()),
                    Just("status".to_string()),
                    Just("operations".to_string()),
                    Just("nextPageToken".to_string()),
                    Just("@type".to_string()),
                    Just(METADATA_RESULT_DIGEST.to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_status() -> impl Strategy<Value = u16> {
    prop_oneof![
        Just(200u16),
        Just(202),
        Just(204),
        Just(400),
        Just(404),
        Just(409),
        Just(429),
        Just(500),
        Just(501),
        Just(503),
        any::<u16>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..256),
        status in arb_status(),
        retry in proptest::option::of(any::<u64>()),
    ) {
        let a = adapter();
        let f = InFrame { request_id: Some(1), http_status: status, retry_after_ms: retry, body };
        for kind in ALL_KINDS {
            let _ = a.decode_reply(kind, &f);
        }
        let _ = a.classify(&f);
    }

    #[test]
    fn decode_never_panics_on_arbitrary_json(v in arb_json(), status in arb_status(), wrap in 0u8..4) {
        let a = adapter();
        let v = match wrap {
            0 => v,
            1 => json!({"name": NAME, "done": true, "response": v}),
            2 => json!({"error": v}),
            _ => json!({"operations": [v]}),
        };
        let f = frame(status, &v);
        for kind in ALL_KINDS {
            let r = a.decode_reply(kind, &f);
            // Whatever comes back for a status read is one of the AIP statuses.
            if let Reply::Status(view) | Reply::Submitted(view) | Reply::LookupFound(view) = r {
                prop_assert_ne!(view.status, ProtocolStatus::InputRequired);
                prop_assert!(!view.operation_id.is_empty());
            }
        }
    }

    #[test]
    fn any_key_and_name_round_trip_through_paths(key in "\\PC{0,24}", name in "[a-z0-9/ ?#%:-]{1,24}") {
        let c = cfg();
        let a = adapter();
        for out in [Outbound::LookupByKey { key: key.clone() }, Outbound::Poll { operation_id: name.clone() }, Outbound::Cancel { operation_id: name.clone() }] {
            let f = a.encode_frame(1, &out);
            prop_assert_eq!(read_back(&c, f.http.as_ref().unwrap(), &f.body), out);
        }
    }
}
