//! The proxy on real sockets: pass-through byte for byte, every fault firing and logged, seeded
//! decisions repeating, and the bounds.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use toolop_fault_proxy::config::{Delay, DropAfter, Faults, Limits, Reject, Shape};
use toolop_fault_proxy::plan::{cut_point, Plan};

fn truncate_all() -> Faults {
    Faults {
        truncate: Some(Shape {
            rate: 1.0,
            methods: None,
        }),
        ..Faults::default()
    }
}

fn cut_all() -> Faults {
    Faults {
        cut: Some(Shape {
            rate: 1.0,
            methods: None,
        }),
        ..Faults::default()
    }
}

/// A fresh upstream and proxy with `faults`, and one JSON-RPC request through them.
async fn one(
    faults: Faults,
    seed: u64,
    route: &str,
    id: u64,
    method: &str,
) -> (Upstream, Proxy, Got) {
    let up = upstream().await;
    let p = proxy(up.addr, seed, faults, Limits::default()).await;
    let got = send(
        &client(),
        post(&format!("{}/{route}", p.base), rpc(id, method)),
    )
    .await;
    (up, p, got)
}

fn is_strict_prefix(part: &[u8], whole: &[u8]) -> bool {
    part.len() < whole.len() && whole.starts_with(part)
}

#[tokio::test]
async fn without_faults_bodies_pass_byte_for_byte() {
    let up = upstream().await;
    let p = proxy(up.addr, 1, Faults::default(), Limits::default()).await;
    let c = client();

    let got = send(&c, post(&format!("{}/json", p.base), rpc(7, "tools/call"))).await;
    assert_eq!(got.status, Some(200));
    assert_eq!(got.body, json_body(&json!(7)));
    assert_eq!(
        got.headers["content-length"],
        json_body(&json!(7)).len().to_string().as_str(),
        "framing kept"
    );
    assert_eq!(
        got.headers["mcp-session-id"], "s-1",
        "end-to-end headers kept"
    );

    let got = send(&c, post(&format!("{}/sse", p.base), rpc(8, "tasks/result"))).await;
    assert_eq!(got.headers["content-type"], "text/event-stream");
    assert_eq!(
        String::from_utf8(got.body).unwrap(),
        sse_events(&json!(8)).concat()
    );

    let got = send(&c, post(&format!("{}/aip", p.base), b"{}".to_vec())).await;
    assert_eq!(got.body, aip_body());

    // The GET stream: read some events as they come, then go away; the upstream must notice.
    let resp = c
        .request(get(&format!("{}/sse", p.base)))
        .await
        .expect("GET through the proxy");
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    let want: String = (0..5).map(get_event).collect();
    while bytes.len() < want.len() {
        use http_body_util::BodyExt;
        let frame = tokio::time::timeout(WAIT, body.frame())
            .await
            .expect("events keep coming")
            .unwrap()
            .unwrap();
        bytes.extend_from_slice(&frame.into_data().unwrap());
    }
    assert!(String::from_utf8(bytes).unwrap().starts_with(&want));
    drop(body);
    let deadline = Instant::now() + WAIT;
    while up.seen.get_closed_early.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the upstream's GET stream outlived its client"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let got = send(
        &c,
        post(&format!("{}/note", p.base), note.to_string().into_bytes()),
    )
    .await;
    assert_eq!((got.status, got.body.len()), (Some(202), 0));
    let note_line = p.log.line(4).await;
    assert_eq!(
        (
            note_line["rpc_method"].as_str(),
            note_line["outcome"].as_str()
        ),
        (Some("notifications/initialized"), Some("passed"))
    );

    let first = p.log.line(0).await;
    assert_eq!(first["fault"], "none");
    assert_eq!(first["rpc_method"], "tools/call");
    assert_eq!(first["rpc_id"], 7);
    assert_eq!(first["outcome"], "passed");
    assert_eq!(first["bytes_to_client"], json_body(&json!(7)).len());
    assert_eq!(p.log.line(2).await["rpc_method"], Value::Null);
    let get_line = p.log.line(3).await;
    assert_eq!(
        (get_line["method"].as_str(), get_line["outcome"].as_str()),
        (Some("GET"), Some("client_gone"))
    );
}

#[tokio::test]
async fn reject_answers_itself_with_retry_after() {
    let faults = Faults {
        reject: Some(Reject {
            rate: 1.0,
            statuses: vec![503],
            ..Reject::default()
        }),
        ..Faults::default()
    };
    let (up, p, got) = one(faults, 1, "json", 1, "tools/call").await;
    assert_eq!(got.status, Some(503));
    assert_eq!(got.headers["retry-after"], "1");
    assert_eq!(up.seen.json.load(Ordering::SeqCst), 0, "never forwarded");
    let line = p.log.line(0).await;
    assert_eq!(
        (line["fault"].as_str(), line["applied"].as_bool()),
        (Some("reject"), Some(true))
    );
    assert_eq!(
        (line["status"].as_u64(), line["outcome"].as_str()),
        (Some(503), Some("rejected"))
    );
    assert_eq!(line["upstream_status"], Value::Null);
}

#[tokio::test]
async fn drop_after_lets_the_server_finish_then_closes_without_an_answer() {
    let up = upstream().await;
    let faults = Faults {
        drop_after: Some(DropAfter {
            rate: 1.0,
            ..DropAfter::default()
        }),
        ..Faults::default()
    };
    let p = proxy(up.addr, 1, faults, Limits::default()).await;
    let c = client();
    for (n, route) in [(0, "json"), (1, "sse")] {
        let got = send(
            &c,
            post(&format!("{}/{route}", p.base), rpc(1, "tools/call")),
        )
        .await;
        assert_eq!(got.status, None, "{route}: no response head");
        assert!(
            got.error.is_some(),
            "{route}: the client sees a closed connection"
        );
        let line = p.log.line(n).await;
        assert_eq!(
            (line["fault"].as_str(), line["outcome"].as_str()),
            (Some("drop_after"), Some("dropped"))
        );
        assert_eq!(
            (line["applied"].as_bool(), line["upstream_status"].as_u64()),
            (Some(true), Some(200))
        );
        assert_eq!(line["status"], Value::Null);
    }
    // The server answered both: it processed them (the SSE one once its response event went out).
    assert_eq!(up.seen.json.load(Ordering::SeqCst), 1);
    let deadline = Instant::now() + WAIT;
    while up.seen.sse.load(Ordering::SeqCst) != 1 {
        assert!(Instant::now() < deadline, "the SSE request was processed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn drop_after_can_hold_the_connection_until_the_client_gives_up() {
    let faults = Faults {
        drop_after: Some(DropAfter {
            rate: 1.0,
            hang_ms: 300,
            methods: None,
        }),
        ..Faults::default()
    };
    let started = Instant::now();
    let (_up, _p, got) = one(faults, 1, "json", 1, "tasks/get").await;
    assert!(got.error.is_some());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "held {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn delay_holds_the_answer_and_keeps_it_intact() {
    let faults = Faults {
        delay: Some(Delay {
            rate: 1.0,
            min_ms: 250,
            max_ms: 250,
            methods: None,
        }),
        ..Faults::default()
    };
    let started = Instant::now();
    let (_up, p, got) = one(faults, 1, "json", 3, "tasks/get").await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(got.body, json_body(&json!(3)));
    let line = p.log.line(0).await;
    assert_eq!(line["drawn"], json!({"fault": "delay", "delay_ms": 250}));
    assert_eq!(
        (line["applied"].as_bool(), line["outcome"].as_str()),
        (Some(true), Some("passed"))
    );
}

#[tokio::test]
async fn truncate_ends_a_plain_body_cleanly_but_short() {
    let (_up, p, got) = one(truncate_all(), 5, "json", 4, "tasks/get").await;
    let whole = json_body(&json!(4));
    assert_eq!(
        (got.status, got.error.as_deref()),
        (Some(200), None),
        "a clean end"
    );
    assert!(
        is_strict_prefix(&got.body, &whole),
        "{} of {} bytes",
        got.body.len(),
        whole.len()
    );
    assert!(
        got.headers.get("content-length").is_none(),
        "the server's length is not claimed"
    );
    let line = p.log.line(0).await;
    assert_eq!(
        (line["fault"].as_str(), line["outcome"].as_str()),
        (Some("truncate"), Some("truncated"))
    );
    assert_eq!(line["bytes_to_client"], got.body.len());
    let permille = line["drawn"]["at_permille"].as_u64().unwrap() as u16;
    assert_eq!(
        Some(got.body.len()),
        cut_point(whole.len(), permille),
        "lands where the seed says"
    );
}

#[tokio::test]
async fn cut_aborts_a_plain_body_midway() {
    let (_up, p, got) = one(cut_all(), 5, "json", 4, "tasks/get").await;
    let whole = json_body(&json!(4));
    assert_eq!(got.status, Some(200));
    assert!(got.error.is_some(), "the connection is cut, not ended");
    assert!(is_strict_prefix(&got.body, &whole));
    assert_eq!(
        got.headers["content-length"],
        whole.len().to_string().as_str(),
        "the promised length stays"
    );
    let line = p.log.line(0).await;
    assert_eq!(
        (
            line["fault"].as_str(),
            line["outcome"].as_str(),
            line["applied"].as_bool()
        ),
        (Some("cut"), Some("cut"), Some(true))
    );
    let permille = line["drawn"]["at_permille"].as_u64().unwrap() as u16;
    assert_eq!(
        Some(got.body.len()),
        cut_point(whole.len(), permille),
        "the bytes before the cut arrive"
    );
}

/// On an SSE stream, body faults land inside the JSON-RPC response event: what comes before it
/// (priming event, a server request) reaches the client whole.
#[tokio::test]
async fn sse_faults_land_inside_the_response_event() {
    let up = upstream().await;
    let events = sse_events(&json!(9));
    let before = format!("{}{}", events[0], events[1]);
    for (faults, clean) in [(truncate_all(), true), (cut_all(), false)] {
        let p = proxy(up.addr, 11, faults, Limits::default()).await;
        let got = send(
            &client(),
            post(&format!("{}/sse", p.base), rpc(9, "tasks/result")),
        )
        .await;
        let text = String::from_utf8(got.body).unwrap();
        assert_eq!(
            got.error.is_none(),
            clean,
            "truncate ends cleanly, cut does not"
        );
        assert!(
            text.starts_with(&before),
            "events before the response pass whole: {text:?}"
        );
        assert!(
            text.len() > before.len() && text.len() < before.len() + events[2].len(),
            "clean {clean}: {text:?}"
        );
        assert_eq!(p.log.line(0).await["applied"], true);
    }
    // The GET stream: the first event with data.
    let p = proxy(up.addr, 11, cut_all(), Limits::default()).await;
    let got = send(&client(), get(&format!("{}/sse", p.base))).await;
    assert!(got.error.is_some());
    assert!(got.body.len() < get_event(0).len() && get_event(0).as_bytes().starts_with(&got.body));
}

#[tokio::test]
async fn a_method_list_keeps_a_fault_on_its_targets() {
    let up = upstream().await;
    let faults = Faults {
        truncate: Some(Shape {
            rate: 1.0,
            methods: Some(vec!["tasks/get".into()]),
        }),
        ..Faults::default()
    };
    let p = proxy(up.addr, 1, faults, Limits::default()).await;
    let c = client();
    let call = send(&c, post(&format!("{}/json", p.base), rpc(1, "tools/call"))).await;
    assert_eq!(
        call.body,
        json_body(&json!(1)),
        "tools/call is not a target"
    );
    let poll = send(&c, post(&format!("{}/json", p.base), rpc(2, "tasks/get"))).await;
    assert!(is_strict_prefix(&poll.body, &json_body(&json!(2))));
    let (first, second) = (p.log.line(0).await, p.log.line(1).await);
    assert_eq!(
        (first["drawn"]["fault"].as_str(), first["fault"].as_str()),
        (Some("truncate"), Some("none"))
    );
    assert_eq!(second["fault"], "truncate");
}

/// Same seed, same request sequence: the same decisions, and the ones `Plan` computes offline.
#[tokio::test]
async fn a_seed_repeats_its_decisions() {
    let up = upstream().await;
    let faults = || Faults {
        drop_after: Some(DropAfter {
            rate: 0.15,
            ..DropAfter::default()
        }),
        delay: Some(Delay {
            rate: 0.15,
            min_ms: 1,
            max_ms: 5,
            methods: None,
        }),
        reject: Some(Reject {
            rate: 0.15,
            ..Reject::default()
        }),
        truncate: Some(Shape {
            rate: 0.15,
            methods: None,
        }),
        cut: Some(Shape {
            rate: 0.15,
            methods: None,
        }),
    };
    let run = |seed: u64| {
        let addr = up.addr;
        async move {
            let p = proxy(addr, seed, faults(), Limits::default()).await;
            let c = client();
            let mut seen = Vec::new();
            for i in 0..40u64 {
                let got = send(&c, post(&format!("{}/json", p.base), rpc(i, "tasks/get"))).await;
                let line = p.log.line(i).await;
                seen.push((
                    line["drawn"].clone(),
                    line["outcome"].clone(),
                    got.status,
                    got.body.len(),
                ));
            }
            seen
        }
    };
    let (a, b, other) = (run(42).await, run(42).await, run(43).await);
    assert_eq!(a, b);
    assert_ne!(a, other);
    let plan = Plan::new(42, faults());
    for (n, (drawn, ..)) in a.iter().enumerate() {
        assert_eq!(*drawn, serde_json::to_value(plan.decide(n as u64)).unwrap());
    }
    let kinds: std::collections::BTreeSet<&str> =
        a.iter().filter_map(|(d, ..)| d["fault"].as_str()).collect();
    assert!(
        kinds.len() >= 5,
        "40 requests at these rates draw most kinds: {kinds:?}"
    );
}

#[tokio::test]
async fn bodies_are_bounded_both_ways() {
    let up = upstream().await;
    let limits = Limits {
        max_body_bytes: 1024,
        ..Limits::default()
    };
    let p = proxy(up.addr, 1, Faults::default(), limits).await;
    let c = client();
    let big = send(&c, post(&format!("{}/json", p.base), vec![b' '; 2000])).await;
    assert_eq!(big.status, Some(413));
    assert_eq!(up.seen.json.load(Ordering::SeqCst), 0);
    assert_eq!(p.log.line(0).await["outcome"], "request_too_large");
    let huge = send(&c, post(&format!("{}/big", p.base), b"{}".to_vec())).await;
    assert!(
        huge.error.is_some() && huge.body.len() <= 1024,
        "{} bytes",
        huge.body.len()
    );
    assert_eq!(p.log.line(1).await["outcome"], "response_too_large");
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_logged_502() {
    let up = upstream().await;
    let addr = up.addr;
    drop(up);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let p = proxy(addr, 1, Faults::default(), Limits::default()).await;
    let got = send(
        &client(),
        post(&format!("{}/json", p.base), rpc(1, "tools/call")),
    )
    .await;
    assert_eq!(got.status, Some(502));
    assert_eq!(p.log.line(0).await["outcome"], "upstream_error");
}
