//! The MCP Streamable HTTP transport against the official SDK servers on 127.0.0.1: frames tied
//! to their POST, one session kept, a stale session replaced, the GET stream resumed with
//! `Last-Event-ID`, server requests answered through the runner, 429/503 with Retry-After
//! reaching the adapter, the body cap and the request timeout.
#![cfg(not(madsim))]

mod common;

use common::{reply_to, rt};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Peer, Sdk};
use serde_json::{json, Value};
use toolop::ledger::MemoryLedger;
use toolop::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use toolop::protocol::{Adapter, Reply, RequestKind};
use toolop::runner::{NullObserver, Runner, RunnerConfig, SharedLedger};
use toolop::transport::http::{connect, HttpConfig};
use toolop::transport::{LiveTransport, OutFrame, Transport, TransportStats};

fn request(id: u64, method: &str, params: Value) -> OutFrame {
    OutFrame {
        request_id: Some(id),
        body: serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap(),
        http: None,
    }
}

fn notification(method: &str) -> OutFrame {
    OutFrame {
        request_id: None,
        body: serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method})).unwrap(),
        http: None,
    }
}

async fn handshake(t: &mut LiveTransport) {
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}}, "clientInfo": {"name": "t", "version": "0"}});
    t.send(request(1, "initialize", params)).unwrap();
    let f = reply_to(t, 1, 10_000).await.expect("initialize answered");
    assert_eq!(f.http_status, 200);
    assert!(String::from_utf8_lossy(&f.body).contains("protocolVersion"));
    t.send(notification("notifications/initialized")).unwrap();
    // One round trip: the driver sends in order, so the notification has been taken before any
    // fault the test arms next.
    t.send(request(2, "ping", json!({}))).unwrap();
    assert_eq!(
        reply_to(t, 2, 10_000)
            .await
            .expect("ping answered")
            .http_status,
        200
    );
}

fn open(peer: &Peer, tweak: impl FnOnce(&mut HttpConfig)) -> LiveTransport {
    let mut cfg = HttpConfig {
        url: peer.url(),
        ..HttpConfig::default()
    };
    tweak(&mut cfg);
    connect(cfg).unwrap()
}

fn counter(c: &std::sync::atomic::AtomicU64) -> u64 {
    TransportStats::get(c)
}

fn one_session_for_many_requests(sdk: Sdk, flags: &[&str]) {
    let peer = Peer::start(sdk, flags);
    rt().block_on(async {
        let mut t = open(&peer, |_| {});
        handshake(&mut t).await;
        // Concurrent requests; each reply comes back tied to its own POST.
        for id in 3..7 {
            t.send(request(id, "tools/list", json!({}))).unwrap();
        }
        let mut answered = std::collections::BTreeSet::new();
        while answered.len() < 4 {
            let f = tokio::time::timeout(Duration::from_secs(10), t.recv())
                .await
                .expect("tools/list answered")
                .unwrap();
            let v: Value = serde_json::from_slice(&f.body).unwrap();
            assert_eq!(
                Some(v["id"].as_u64().unwrap()),
                f.request_id,
                "a reply is tied to its own POST"
            );
            assert!(v["result"]["tools"]
                .as_array()
                .is_some_and(|a| a.len() >= 6));
            answered.insert(v["id"].as_u64().unwrap());
        }
        assert_eq!(answered, (3..7).collect());
        assert_eq!(counter(&t.stats().sessions), 1);
        assert_eq!(counter(&t.stats().sessions_lost), 0);
    });
    if sdk == Sdk::Ts {
        assert_eq!(
            peer.stats()["sessions_created"],
            1,
            "every request rode the one session"
        );
    }
}

#[test]
fn ts_sse_replies_keep_one_session() {
    one_session_for_many_requests(Sdk::Ts, &[]);
}

#[test]
fn ts_json_replies_keep_one_session() {
    one_session_for_many_requests(Sdk::Ts, &["--json-response"]);
}

#[test]
fn python_sse_replies_keep_one_session() {
    one_session_for_many_requests(Sdk::Python, &[]);
}

#[test]
fn python_json_replies_keep_one_session() {
    one_session_for_many_requests(Sdk::Python, &["--json-response"]);
}

fn restart(old: Peer, port: u16) -> Peer {
    drop(old);
    Peer::start_on(Sdk::Python, port, &[])
}

/// A 404 on the old session reaches the adapter (not-found evidence, never a cancel), and the
/// transport re-initializes so the next request runs on a new session.
fn stale_session_is_replaced(sdk: Sdk) {
    let peer = Peer::start(sdk, &[]);
    rt().block_on(async {
        // No GET stream: its reconnect could meet the 404 first (then the POST below would
        // already run on the new session). Here the POST must be the one that finds out.
        let mut t = open(&peer, |c| c.get_stream = false);
        handshake(&mut t).await;
        // TS: forget every session; Python: a restart on the same address (the new process
        // knows no session).
        let _peer = match sdk {
            Sdk::Ts => {
                peer.fault(json!({"drop_sessions": true}));
                peer
            }
            _ => {
                let port = peer.port;
                restart(peer, port)
            }
        };
        t.send(request(7, "tasks/get", json!({"taskId": "t-1"})))
            .unwrap();
        let f = reply_to(&mut t, 7, 10_000)
            .await
            .expect("the 404 reaches the runner");
        assert_eq!(f.http_status, 404);
        let reply = Mcp20251125Adapter::new().decode_reply(RequestKind::Poll, &f);
        assert!(
            matches!(reply, Reply::Error { .. } | Reply::NotFound { .. }),
            "a lost session is not a cancel: {}",
            reply.name()
        );
        answered_on_a_new_session(&mut t, 8).await;
        let s = t.stats();
        assert_eq!(
            (
                counter(&s.sessions_lost),
                counter(&s.reinitializations),
                counter(&s.sessions)
            ),
            (1, 1, 2)
        );
    });
}

#[test]
fn ts_stale_session_is_replaced() {
    stale_session_is_replaced(Sdk::Ts);
}

#[test]
fn python_stale_session_after_a_restart_is_replaced() {
    stale_session_is_replaced(Sdk::Python);
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..200 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn get_stream_resumes_with_last_event_id_and_server_requests_are_answered() {
    let peer = Peer::start(Sdk::Ts, &[]);
    rt().block_on(async {
        let t = open(&peer, |c| c.get_retry_ms = 100);
        let stats = t.stats();
        let ledger: SharedLedger = Arc::new(Mutex::new(MemoryLedger::new()));
        let (approvals, _approvals_rx) = tokio::sync::mpsc::unbounded_channel();
        let runner = Runner::new(
            RunnerConfig::default(),
            1,
            tokio::time::Instant::now(),
            Box::new(Mcp20251125Adapter::new()),
            ledger,
            Box::new(NullObserver),
            approvals,
            1,
            0,
        );
        let (inputs, inputs_rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = tokio::spawn(runner.run(t, inputs_rx));
        wait_for("the GET stream", || counter(&stats.get_streams) >= 1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        peer.fault(json!({"ping": true}));
        wait_for("the ping answered", || peer.stats()["pings_answered"] == 1).await;
        peer.fault(json!({"cut_get": true}));
        wait_for("the GET stream reopened", || {
            counter(&stats.get_streams) >= 2
        })
        .await;
        assert!(counter(&stats.get_resumptions) >= 1);
        let seen = peer.stats()["last_event_ids_seen"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(!seen.is_empty(), "the reopened GET carried Last-Event-ID");
        peer.fault(json!({"ping": true}));
        wait_for("the second ping answered", || {
            peer.stats()["pings_answered"] == 2
        })
        .await;
        peer.fault(json!({"sampling": true}));
        wait_for("the sampling request answered", || {
            peer.stats()["sampling_errors"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .await;
        assert_eq!(
            peer.stats()["sampling_errors"][0],
            -32601,
            "sampling/createMessage answered with method not found"
        );
        inputs.send(toolop::runner::Input::Shutdown).unwrap();
        handle.await.unwrap();
    });
}

#[test]
fn rate_limits_and_unavailability_reach_the_adapter_with_retry_after() {
    let peer = Peer::start(Sdk::Ts, &[]);
    rt().block_on(async {
        let mut t = open(&peer, |_| {});
        handshake(&mut t).await;
        peer.fault(json!({"status": 429, "retry_after": "2"}));
        t.send(request(11, "tasks/get", json!({"taskId": "x"})))
            .unwrap();
        let f = reply_to(&mut t, 11, 10_000).await.unwrap();
        assert_eq!((f.http_status, f.retry_after_ms), (429, Some(2000)));
        assert_eq!(
            Mcp20251125Adapter::new().decode_reply(RequestKind::Poll, &f),
            Reply::RateLimited {
                retry_after_ms: Some(2000)
            }
        );
        let at = std::time::SystemTime::now() + Duration::from_secs(30);
        peer.fault(json!({"status": 503, "retry_after": httpdate::fmt_http_date(at)}));
        t.send(request(12, "tasks/get", json!({"taskId": "x"})))
            .unwrap();
        let f = reply_to(&mut t, 12, 10_000).await.unwrap();
        assert_eq!(f.http_status, 503);
        let ms = f.retry_after_ms.expect("an HTTP-date Retry-After is read");
        assert!((25_000..=30_000).contains(&ms), "{ms}");
        assert!(matches!(
            Mcp20251125Adapter::new().decode_reply(RequestKind::Poll, &f),
            Reply::Unavailable {
                retry_after_ms: Some(_)
            }
        ));
    });
}

#[test]
fn an_oversize_reply_is_dropped_and_the_next_one_arrives() {
    let peer = Peer::start(Sdk::Ts, &[]);
    rt().block_on(async {
        let mut t = open(&peer, |c| c.body_limit_bytes = 1 << 20);
        handshake(&mut t).await;
        peer.fault(json!({"oversize_bytes": 3_000_000}));
        t.send(request(21, "tools/list", json!({}))).unwrap();
        assert!(
            reply_to(&mut t, 21, 2_000).await.is_none(),
            "nothing over the cap is delivered"
        );
        assert_eq!(counter(&t.stats().oversize), 1);
        t.send(request(22, "tools/list", json!({}))).unwrap();
        assert_eq!(reply_to(&mut t, 22, 10_000).await.unwrap().http_status, 200);
    });
}

#[test]
fn a_silent_server_is_bounded_by_the_request_timeout() {
    let peer = Peer::start(Sdk::Ts, &[]);
    rt().block_on(async {
        let mut t = open(&peer, |c| c.request_timeout_ms = 300);
        handshake(&mut t).await;
        peer.fault(json!({"delay_ms": 3000}));
        t.send(request(31, "tools/list", json!({}))).unwrap();
        assert!(reply_to(&mut t, 31, 1_500).await.is_none());
        assert_eq!(
            counter(&t.stats().failures),
            1,
            "the POST gave up at its timeout"
        );
    });
}

/// A kept session answers the runner's initialize without a round trip and carries on; when
/// the server has forgotten it, the first request meets a 404 and a new session follows.
#[test]
fn a_kept_session_is_reused_and_replaced_when_the_server_forgot_it() {
    let peer = Peer::start(Sdk::Ts, &[]);
    rt().block_on(async {
        let (mut t, handle) = toolop::transport::http::connect_keeping(
            HttpConfig {
                url: peer.url(),
                ..HttpConfig::default()
            },
            None,
        )
        .unwrap();
        handshake(&mut t).await;
        let kept = handle.lock().unwrap().clone().expect("the session is kept");
        assert!(kept.initialize_reply.contains("protocolVersion"));
        drop(t);
        let resume = |kept: toolop::transport::http::KeptSession| HttpConfig {
            url: peer.url(),
            resume: Some(kept),
            ..HttpConfig::default()
        };
        let (mut t, handle) =
            toolop::transport::http::connect_keeping(resume(kept.clone()), None).unwrap();
        handshake(&mut t).await;
        assert_eq!(
            peer.stats()["sessions_created"],
            1,
            "initialize answered from the kept session"
        );
        assert_eq!(handle.lock().unwrap().as_ref(), Some(&kept));
        drop(t);
        peer.fault(json!({"drop_sessions": true}));
        let (mut t, handle) =
            toolop::transport::http::connect_keeping(resume(kept.clone()), None).unwrap();
        handshake_expecting_404(&mut t).await;
        answered_on_a_new_session(&mut t, 9).await;
        assert_eq!(peer.stats()["sessions_created"], 2);
        let now = handle.lock().unwrap().clone().unwrap();
        assert_ne!(
            now.session_id, kept.session_id,
            "the new session is the one kept now"
        );
    });
}

/// A `tools/list` from request id `first` on, sent again as a runner would while the transport
/// opens a new session: nothing is held meanwhile, so a request may still meet the forgotten
/// session (404) until the new one stands; it must be answered 200 within a few tries.
/// The session store processes share, in memory (the CLI's is its SQLite file).
#[derive(Default)]
struct SharedSessions(Mutex<Option<toolop::transport::http::KeptSession>>);

impl toolop::transport::http::SessionStore for SharedSessions {
    fn swap(
        &self,
        expected: Option<&str>,
        new: &toolop::transport::http::KeptSession,
    ) -> Option<toolop::transport::http::KeptSession> {
        let mut kept = self.0.lock().unwrap();
        match &*kept {
            Some(k) if Some(k.session_id.as_str()) != expected => Some(k.clone()),
            _ => Some(kept.insert(new.clone()).clone()),
        }
    }
}

/// Two processes on one kept session, which the server forgets (a restart): each meets the 404
/// and opens a new session, and the one that keeps its session second adopts the first's, so a
/// server that shows a task only to its session shows both the same tasks. Before session 44
/// each went on its own (the simulator's `mcp_replicas` seed 2932: one process's tasks "not
/// found" for the other, and a live task handed to a person).
#[test]
fn two_processes_that_lost_one_session_end_on_one() {
    let peer = Peer::start(Sdk::Ts, &[]);
    rt().block_on(async {
        let store = Arc::new(SharedSessions::default());
        let shared =
            || -> Option<Arc<dyn toolop::transport::http::SessionStore>> { Some(store.clone()) };
        let cfg = HttpConfig {
            url: peer.url(),
            ..HttpConfig::default()
        };
        let (mut a, handle_a) =
            toolop::transport::http::connect_keeping(cfg.clone(), shared()).unwrap();
        handshake(&mut a).await;
        let kept = handle_a
            .lock()
            .unwrap()
            .clone()
            .expect("the session is kept");
        assert_eq!(
            store.0.lock().unwrap().as_ref(),
            Some(&kept),
            "kept in the store"
        );
        let resume = HttpConfig {
            resume: Some(kept.clone()),
            ..cfg
        };
        let (mut b, handle_b) = toolop::transport::http::connect_keeping(resume, shared()).unwrap();
        handshake(&mut b).await;
        assert_eq!(
            peer.stats()["sessions_created"],
            1,
            "b continued a's session"
        );
        peer.fault(json!({"drop_sessions": true}));
        answered_on_a_new_session(&mut a, 9).await;
        answered_on_a_new_session(&mut b, 109).await;
        let (now_a, now_b) = (
            handle_a.lock().unwrap().clone().unwrap(),
            handle_b.lock().unwrap().clone().unwrap(),
        );
        assert_ne!(now_a.session_id, kept.session_id, "a new session");
        assert_eq!(now_a.session_id, now_b.session_id, "both on one session");
        assert_eq!(
            store.0.lock().unwrap().as_ref(),
            Some(&now_a),
            "the one kept"
        );
    });
}

async fn answered_on_a_new_session(t: &mut LiveTransport, first: u64) {
    let mut statuses = vec![];
    for id in first..first + 50 {
        t.send(request(id, "tools/list", json!({}))).unwrap();
        let f = reply_to(t, id, 10_000)
            .await
            .expect("every request is answered");
        if f.http_status == 200 {
            return;
        }
        statuses.push(f.http_status);
        assert_eq!(f.http_status, 404, "{}", String::from_utf8_lossy(&f.body));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never answered on a new session: {statuses:?}");
}

/// As [`handshake`], on a kept session the server forgot: the first request is a 404.
async fn handshake_expecting_404(t: &mut LiveTransport) {
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    t.send(request(1, "initialize", params)).unwrap();
    assert_eq!(reply_to(t, 1, 10_000).await.unwrap().http_status, 200);
    t.send(notification("notifications/initialized")).unwrap();
    t.send(request(2, "ping", json!({}))).unwrap();
    // The GET stream opened after `initialized` races the ping: whichever reaches the server
    // first meets the 404. If it was the GET, the transport has already replaced the session
    // and the ping goes out on the new one.
    let status = reply_to(t, 2, 10_000).await.unwrap().http_status;
    assert!(
        status == 404 || status == 200,
        "ping on a forgotten session: HTTP {status}"
    );
    assert!(
        counter(&t.stats().sessions_lost) >= 1,
        "a request met the forgotten session"
    );
}
