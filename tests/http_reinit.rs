//! The Streamable HTTP transport re-initializing after a 404, against a scripted server on
//! 127.0.0.1 whose answer to the new `initialize` is slow: nothing the runner sends meanwhile is
//! held. A send held until the new session stood left after the runner's deadline for it, and
//! in the simulator's gate after its call was handed to a person (session 43, mcp_ext_faults
//! seed 1543 over HTTP). The official SDK servers answer `initialize` too fast to show it, and
//! their faults never touch `initialize` (tests/live_http.rs runs the same exchange against them).
//! Also: the answer to a retried `initialize` that arrives after the first never replaces the
//! session the first one opened (session 44).
#![cfg(not(madsim))]

mod common;

use common::{reply_to, rt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use toolop::transport::http::{connect, HttpConfig};
use toolop::transport::{InFrame, LiveTransport, OutFrame, Transport, TransportStats};

/// How long the scripted server takes to answer the second `initialize` (the transport's replay).
const SLOW_INIT_MS: u64 = 1_500;
/// How long the scripted server holds the body of its answer to the first `initialize` (its
/// headers, session id included, go out at once) when `late_first_body` is set.
const LATE_BODY_MS: u64 = 400;

/// One request as the scripted server saw it.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    session: Option<String>,
    method: Option<String>,
}

#[derive(Default)]
struct Script {
    /// Sessions opened so far (`s1`, `s2`, ...); the server forgets those below `known_from`.
    opened: u32,
    known_from: u32,
    /// Replayed `initialize` requests still to refuse with 503 (a server slow to come back).
    refuse_replays: u32,
    /// The replay's answer is slow (see [`SLOW_INIT_MS`]).
    slow_replay: bool,
    /// The first `initialize` is answered late: headers at once, body after [`LATE_BODY_MS`].
    late_first_body: bool,
    seen: Vec<Seen>,
}

type Shared = Arc<Mutex<Script>>;

/// Read one HTTP/1.1 request: its headers (lower-cased names) and body. `None` at end of stream.
async fn read_request(r: &mut BufReader<TcpStream>) -> Option<(Vec<(String, String)>, Vec<u8>)> {
    let mut headers = vec![];
    let mut line = String::new();
    // Bounded: a request line and at most 100 header lines.
    for i in 0..=100 {
        line.clear();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        assert!(i < 100, "too many header lines");
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.ok()?;
    Some((headers, body))
}

/// Answer one request as the script says: `initialize` opens the next session (the second one
/// slowly), a request naming a forgotten session is 404, a notification 202, anything else an
/// empty result. Also how long to hold the reply's body after its headers went out (ms).
async fn answer(script: &Shared, headers: &[(String, String)], body: &[u8]) -> (String, u64) {
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone());
    let msg: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let method = msg["method"].as_str().map(str::to_string);
    let (opened, known, slow, late_body, refused) = {
        let mut s = script.lock().unwrap();
        s.seen.push(Seen {
            at: Instant::now(),
            session: session.clone(),
            method: method.clone(),
        });
        let known = session
            .as_deref()
            .and_then(|id| id.strip_prefix('s')?.parse::<u32>().ok())
            .is_some_and(|n| n >= s.known_from && n <= s.opened);
        let init = method.as_deref() == Some("initialize");
        let refused = init && s.opened > 0 && s.refuse_replays > 0;
        if refused {
            s.refuse_replays -= 1;
        } else if init {
            s.opened += 1;
        }
        (s.opened, known, s.slow_replay, s.late_first_body, refused)
    };
    let json = |status: &str, extra: &str, v: Value| {
        let b = v.to_string();
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}\r\n{b}",
            b.len()
        )
    };
    let reply = match (method.as_deref(), msg.get("id")) {
        (Some("initialize"), Some(_)) if refused => {
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n".to_string()
        }
        (Some("initialize"), Some(id)) => {
            if opened > 1 && slow {
                tokio::time::sleep(Duration::from_millis(SLOW_INIT_MS)).await;
            }
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "scripted", "version": "0"}});
            json(
                "200 OK",
                &format!("mcp-session-id: s{opened}\r\n"),
                json!({"jsonrpc": "2.0", "id": id, "result": result}),
            )
        }
        // As both SDKs answer a request without a session id.
        _ if session.is_none() => json(
            "400 Bad Request",
            "",
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}}),
        ),
        _ if !known => json(
            "404 Not Found",
            "",
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "Session not found"}}),
        ),
        (_, None) => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_string(),
        (_, Some(id)) => json(
            "200 OK",
            "",
            json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        ),
    };
    let init = method.as_deref() == Some("initialize") && !refused;
    let hold = if init && opened == 1 && late_body {
        LATE_BODY_MS
    } else {
        0
    };
    (reply, hold)
}

/// The scripted server on a free port of 127.0.0.1; its tasks end with the test's runtime.
async fn serve() -> (String, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let script: Shared = Arc::default();
    let s = script.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let mut r = BufReader::new(stream);
                while let Some((headers, body)) = read_request(&mut r).await {
                    let (reply, hold_ms) = answer(&s, &headers, &body).await;
                    // Headers first; the body after `hold_ms` (a server slow to finish its answer).
                    let split = reply.find("\r\n\r\n").map_or(reply.len(), |i| i + 4);
                    let (head, rest) = reply.split_at(split);
                    if r.get_mut().write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    if hold_ms > 0 {
                        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                    }
                    if r.get_mut().write_all(rest.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, script)
}

fn request(id: u64, method: &str) -> OutFrame {
    OutFrame {
        request_id: Some(id),
        body: json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
            .to_string()
            .into_bytes(),
        http: None,
    }
}

/// The runner's `notifications/initialized`.
fn initialized() -> OutFrame {
    OutFrame {
        request_id: None,
        body: br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
        http: None,
    }
}

/// The runner's handshake (session `s1`), then the server restarts and forgets it: request 3
/// meets the 404 that starts a new session.
async fn handshake_then_restart(t: &mut LiveTransport, script: &Shared) {
    t.send(request(1, "initialize")).unwrap();
    assert_eq!(reply_to(t, 1, 5_000).await.unwrap().http_status, 200);
    t.send(initialized()).unwrap();
    t.send(request(2, "ping")).unwrap();
    assert_eq!(reply_to(t, 2, 5_000).await.unwrap().http_status, 200);
    {
        let mut s = script.lock().unwrap();
        s.known_from = s.opened + 1;
    }
    t.send(request(3, "tasks/get")).unwrap();
    assert_eq!(reply_to(t, 3, 5_000).await.unwrap().http_status, 404);
}

/// Requests from id `first` on, sent again as a runner would, until one is served (200).
async fn served_again(t: &mut LiveTransport, first: u64) -> Vec<u16> {
    let mut statuses = vec![];
    for id in first..first + 40 {
        t.send(request(id, "tasks/get")).unwrap();
        let status = reply_to(t, id, 5_000).await.unwrap().http_status;
        if status == 200 {
            return statuses;
        }
        statuses.push(status);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("never served on a new session: {statuses:?}");
}

/// The transport to the scripted server at `url`, as `cfg` says otherwise: no GET stream (the
/// script serves none), a request timeout well past every test's waits.
fn open(cfg: HttpConfig, url: String) -> LiveTransport {
    connect(HttpConfig {
        url,
        get_stream: false,
        request_timeout_ms: 10_000,
        ..cfg
    })
    .unwrap()
}

#[test]
fn nothing_is_held_while_a_lost_session_is_replaced() {
    rt().block_on(async {
        let (url, script) = serve().await;
        script.lock().unwrap().slow_replay = true;
        let mut t = open(HttpConfig::default(), url);
        handshake_then_restart(&mut t, &script).await;

        // The transport replays `initialize` now, and the server takes 1.5 s to answer it. The
        // next request goes out at once on the forgotten session and is answered 404 well
        // before then (held, it would have left after the new session stood, and got 200).
        let sent = Instant::now();
        t.send(request(4, "tasks/get")).unwrap();
        let f = reply_to(&mut t, 4, 5_000).await.unwrap();
        assert_eq!(f.http_status, 404, "{}", String::from_utf8_lossy(&f.body));
        assert!(
            sent.elapsed() < Duration::from_millis(SLOW_INIT_MS / 2),
            "request 4 waited {} ms for the new session",
            sent.elapsed().as_millis()
        );

        // Once the new session stands, requests name it and are served.
        served_again(&mut t, 5).await;

        // The new session was named only after its initialized notification reached the
        // server (a server may refuse a request before it: older Python SDK servers did).
        let seen = script.lock().unwrap().seen.clone();
        let named_s2: Vec<&Seen> = seen
            .iter()
            .filter(|s| s.session.as_deref() == Some("s2"))
            .collect();
        assert_eq!(
            named_s2.first().and_then(|s| s.method.as_deref()),
            Some("notifications/initialized"),
            "{seen:?}"
        );
        let replay = seen
            .iter()
            .filter(|s| s.method.as_deref() == Some("initialize"))
            .nth(1)
            .expect("the transport replayed initialize");
        assert!(
            seen.iter()
                .any(|s| s.at > replay.at && s.session.as_deref() == Some("s1")),
            "requests went out on the old session while the new one was opened: {seen:?}"
        );
    });
}

/// A server slow to come back refuses every replay of the transport's first round: the session
/// stays lost and the next send starts another round, which reaches it. (Until session 43 the
/// transport went on without a session, the server answered every request 400, and nothing
/// started a new round: the runner's calls failed for good.)
#[test]
fn a_server_that_refused_a_whole_round_of_replays_is_reached_in_the_next() {
    rt().block_on(async {
        let (url, script) = serve().await;
        // Two attempts a round (100 and 200 ms apart); three refusals span into the second round.
        script.lock().unwrap().refuse_replays = 3;
        let mut t = open(
            HttpConfig {
                reinit_attempts_max: 2,
                ..HttpConfig::default()
            },
            url,
        );
        handshake_then_restart(&mut t, &script).await;
        let before = served_again(&mut t, 4).await;
        assert!(
            before.iter().all(|&s| s == 404),
            "a request between rounds named the lost session, never none: {before:?}"
        );
        let s = script.lock().unwrap();
        assert_eq!((s.refuse_replays, s.opened), (0, 2), "one new session");
    });
}

/// Frames the transport delivers until each of `ids` has one, in the order they arrive (other
/// frames are kept too, so the order shows). Panics after `ms`.
async fn frames_until(t: &mut LiveTransport, ids: &[u64], ms: u64) -> Vec<InFrame> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    let mut frames: Vec<InFrame> = vec![];
    while !ids
        .iter()
        .all(|id| frames.iter().any(|f| f.request_id == Some(*id)))
    {
        match tokio::time::timeout_at(deadline, t.recv()).await {
            Ok(Some(f)) => frames.push(f),
            _ => panic!("requests {ids:?} not all answered within {ms} ms"),
        }
    }
    frames
}

/// The runner's handshake retries `initialize` when its attempt times out, and takes an answer
/// to any attempt. The server here sends the headers of its answer to the first `initialize`
/// (session `s1`) at once but holds the body, so the runner's attempt times out and it sends a
/// second `initialize`; that one is answered at once, with session `s2`. Two `initialize`
/// requests were outstanding, and `s1` stood first: every later request must name `s1`. Taking
/// the later answer would move the runner to a session its first tasks may not be visible on
/// (the TS and Python SDKs show a task only to the session that created it; the simulator's
/// `mcp_replicas` seed 1705, session 44).
#[test]
fn a_later_answer_to_a_retried_initialize_never_replaces_the_session() {
    rt().block_on(async {
        let (url, script) = serve().await;
        script.lock().unwrap().late_first_body = true;
        let mut t = open(HttpConfig::default(), url);
        let stats = t.stats();

        // The runner's first attempt: its answer's body is held, so nothing arrives in time.
        t.send(request(1, "initialize")).unwrap();
        assert!(
            reply_to(&mut t, 1, 100).await.is_none(),
            "the first initialize was answered before the runner's attempt timed out"
        );
        // The retry, under a new id (as `runner/handshake.rs` sends it). Its answer comes first.
        t.send(request(2, "initialize")).unwrap();
        let first = frames_until(&mut t, &[2], 5_000).await;
        assert_eq!(first.len(), 1, "only the retry's answer so far");
        assert_eq!(first[0].http_status, 200);

        // The runner took that answer and goes on at once: its initialized notification and a
        // request, while the first answer's body is still on its way.
        t.send(initialized()).unwrap();
        t.send(request(3, "ping")).unwrap();
        let rest = frames_until(&mut t, &[1, 3], 5_000).await;
        assert!(rest.iter().all(|f| f.http_status == 200));
        // And once the first answer has arrived too.
        t.send(request(4, "tasks/get")).unwrap();
        assert_eq!(reply_to(&mut t, 4, 5_000).await.unwrap().http_status, 200);

        let s = script.lock().unwrap();
        assert_eq!(s.opened, 2, "the server opened s1, then s2 for the retry");
        let named: Vec<(Option<&str>, Option<&str>)> = s
            .seen
            .iter()
            .filter(|r| r.method.as_deref() != Some("initialize"))
            .map(|r| (r.method.as_deref(), r.session.as_deref()))
            .collect();
        assert_eq!(
            named,
            vec![
                (Some("notifications/initialized"), Some("s1")),
                (Some("ping"), Some("s1")),
                (Some("tasks/get"), Some("s1")),
            ],
            "every request after the handshake names the session that stood first"
        );
        assert_eq!(
            TransportStats::get(&stats.sessions),
            1,
            "the transport took one session and never switched"
        );
    });
}
