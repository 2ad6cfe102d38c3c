//! The peer over MCP Streamable HTTP on 127.0.0.1, driven with a plain HTTP client so every
//! status code, header and SSE frame asserted here is what rmcp put on the wire.

mod common;

use std::time::Duration;

use common::{peer_command, tasks_caps, WAIT};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// The peer over HTTP; killed on drop.
struct HttpPeer {
    _child: Child,
    url: String,
    port: u16,
}

impl HttpPeer {
    async fn start(port: u16, args: &[&str]) -> HttpPeer {
        let port_arg = port.to_string();
        let mut child = peer_command(&["http", "--port", &port_arg], args)
            .spawn()
            .expect("start the peer binary");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let first = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("listening line in time")
            .expect("read");
        let addr = first
            .as_deref()
            .and_then(|l| l.strip_prefix("listening "))
            .expect("`listening ADDR` first")
            .to_string();
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port");
        HttpPeer {
            _child: child,
            url: format!("http://{addr}/mcp"),
            port,
        }
    }
}

struct Reply {
    status: u16,
    content_type: String,
    session: Option<String>,
    body: String,
}

impl Reply {
    /// The JSON-RPC messages of the body: the body itself, or each SSE event's `data`.
    fn messages(&self) -> Vec<Value> {
        if self.content_type.starts_with("application/json") {
            return vec![serde_json::from_str(&self.body).expect("JSON body")];
        }
        sse_events(&self.body)
            .into_iter()
            .filter_map(|e| e.data)
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(&d).expect("SSE data is JSON"))
            .collect()
    }

    fn only_message(&self) -> Value {
        let mut m = self.messages();
        assert_eq!(m.len(), 1, "one message in {}", self.body);
        m.remove(0)
    }
}

#[derive(Debug, PartialEq)]
struct SseEvent {
    id: Option<String>,
    data: Option<String>,
    retry: Option<String>,
}

/// Minimal SSE field reader for assertions (events end at a blank line; `data:` lines join).
fn sse_events(body: &str) -> Vec<SseEvent> {
    let mut events = Vec::new();
    for block in body
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
    {
        let mut e = SseEvent {
            id: None,
            data: None,
            retry: None,
        };
        for line in block.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value).to_string();
            match field {
                "id" => e.id = Some(value),
                "retry" => e.retry = Some(value),
                "data" => e.data = Some(e.data.map_or(value.clone(), |d| format!("{d}\n{value}"))),
                _ => {}
            }
        }
        events.push(e);
    }
    events
}

struct Client {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    version: &'static str,
    /// `_meta` added to the params of every `rpc` (stateless servers forget `initialize`).
    meta: Option<Value>,
}

impl Client {
    fn new(url: &str) -> Client {
        let http = reqwest::Client::builder()
            .timeout(WAIT)
            .build()
            .expect("client");
        Client {
            http,
            url: url.to_string(),
            session: None,
            version: "2025-11-25",
            meta: None,
        }
    }

    async fn post_with(&self, body: &Value, extra: &[(&str, &str)]) -> Reply {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", self.version);
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let resp = req.body(body.to_string()).send().await.expect("POST");
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (status, content_type, session) = (
            resp.status().as_u16(),
            header("content-type").unwrap_or_default(),
            header("mcp-session-id"),
        );
        Reply {
            status,
            content_type,
            session,
            body: resp.text().await.expect("body"),
        }
    }

    async fn post(&self, body: &Value) -> Reply {
        self.post_with(body, &[]).await
    }

    async fn initialize(&mut self) -> Reply {
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": tasks_caps(), "clientInfo": {"name": "t", "version": "0"}});
        let reply = self
            .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
            .await;
        self.session = reply.session.clone();
        let note = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(note.status, 202, "a notification is answered 202");
        reply
    }

    async fn rpc(&self, id: u64, method: &str, mut params: Value) -> Value {
        if let Some(meta) = &self.meta {
            params["_meta"] = meta.clone();
        }
        let reply = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(reply.status, 200, "{method}: {}", reply.body);
        reply.only_message()
    }

    async fn poll_until(&self, task_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        for id in 10_000u64.. {
            let reply = self.rpc(id, "tasks/get", json!({"taskId": task_id})).await;
            if reply["result"]["status"] == status {
                return reply;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{task_id} never {status}: {reply}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        unreachable!("the id range is not exhausted before the deadline")
    }
}

#[tokio::test]
async fn a_session_runs_tasks_over_streamable_http() {
    let peer = HttpPeer::start(0, &[]).await;
    let mut client = Client::new(&peer.url);
    let init = client.initialize().await;
    assert_eq!(init.status, 200);
    assert_eq!(
        init.content_type, "text/event-stream",
        "rmcp answers initialize over SSE"
    );
    assert!(
        client.session.is_some(),
        "session mode hands out Mcp-Session-Id"
    );
    // rmcp's priming event comes first: empty data, an event id, a retry hint.
    let events = sse_events(&init.body);
    assert_eq!(
        events[0],
        SseEvent {
            id: Some("0".into()),
            data: Some(String::new()),
            retry: Some("3000".into())
        }
    );
    assert_eq!(
        init.only_message()["result"]["protocolVersion"],
        "2025-11-25"
    );

    let call = json!({"name": "slow_sum", "arguments": {"a": 2, "b": 40, "delay_ms": 100}, "_meta": {"io.toolop/idempotency-key": "h1"}});
    let created = client.rpc(2, "tools/call", call).await;
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_string();
    let done = client.poll_until(&id, "completed").await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "42");

    let asks = client
        .rpc(
            3,
            "tools/call",
            json!({"name": "needs_input", "arguments": {"delay_ms": 10}}),
        )
        .await;
    let asks = asks["result"]["taskId"].as_str().unwrap().to_string();
    client.poll_until(&asks, "input_required").await;
    let answer = json!({"taskId": asks, "inputResponses": {"answer-1": {"action": "accept", "content": {"answer": "http"}}}});
    assert_eq!(
        client.rpc(4, "tasks/update", answer).await["result"],
        json!({"resultType": "complete"})
    );
    let done = client.poll_until(&asks, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "needs_input: got answer: http"
    );

    let slow = client
        .rpc(
            5,
            "tools/call",
            json!({"name": "cancellable", "arguments": {"seconds": 30}}),
        )
        .await;
    let slow = slow["result"]["taskId"].as_str().unwrap().to_string();
    client.rpc(6, "tasks/cancel", json!({"taskId": slow})).await;
    client.poll_until(&slow, "cancelled").await;

    let stats = client
        .rpc(7, "tools/call", json!({"name": "stats", "arguments": {}}))
        .await;
    assert_eq!(
        stats["result"]["structuredContent"]["tasksCreatedByKey"],
        json!({"h1": 1})
    );
    assert_eq!(
        stats["result"]["structuredContent"]["tasksCreatedWithoutKey"],
        2
    );

    // The session ends: the old id is then a 404 (the client must re-initialize).
    let delete = client
        .http
        .delete(&client.url)
        .header("mcp-session-id", client.session.as_deref().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("DELETE");
    assert_eq!(delete.status().as_u16(), 202);
    let stale = client
        .post(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {}}))
        .await;
    assert_eq!(stale.status, 404, "{}", stale.body);
    // Tasks are not bound to the session here: a new session still sees them.
    let mut fresh = Client::new(&peer.url);
    fresh.initialize().await;
    assert_eq!(
        fresh.rpc(9, "tasks/get", json!({"taskId": id})).await["result"]["status"],
        "completed"
    );
}

#[tokio::test]
async fn the_get_stream_opens_and_a_restarted_server_forgets_sessions() {
    let peer = HttpPeer::start(0, &[]).await;
    let mut client = Client::new(&peer.url);
    client.initialize().await;
    let get = |last_event_id: Option<&str>| {
        let mut req = client
            .http
            .get(&client.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", client.session.clone().unwrap())
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.send()
    };
    let mut stream = get(None).await.expect("GET");
    assert_eq!(stream.status().as_u16(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let first = tokio::time::timeout(WAIT, stream.chunk())
        .await
        .expect("priming in time")
        .expect("chunk")
        .expect("data");
    let first = String::from_utf8(first.to_vec()).expect("utf-8");
    assert_eq!(sse_events(&first)[0].id.as_deref(), Some("0"), "{first:?}");
    drop(stream);
    let again = tokio::time::timeout(WAIT, get(Some("0")))
        .await
        .expect("a reopened GET is answered")
        .expect("GET");
    assert_eq!(again.status().as_u16(), 200, "reopen with Last-Event-ID");
    drop(again);

    // Restart on the same port: the old session id is now unknown.
    let port = peer.port;
    drop(peer);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _restarted = HttpPeer::start(port, &[]).await;
    let stale = client
        .post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        .await;
    assert_eq!(stale.status, 404, "{}", stale.body);
}

#[tokio::test]
async fn stateless_json_mode_and_the_2026_headers() {
    let peer = HttpPeer::start(0, &["--stateless", "--json-response"]).await;
    let mut client = Client::new(&peer.url);
    let init = client.initialize().await;
    assert_eq!(init.status, 200);
    assert!(
        init.content_type.starts_with("application/json"),
        "{}",
        init.content_type
    );
    assert_eq!(init.session, None);
    // Stateless: nothing remembers the capabilities this client declared at initialize, so a
    // call without a per-request declaration runs synchronously...
    let args = json!({"a": 1, "b": 2, "delay_ms": 10});
    let sync = client
        .rpc(
            2,
            "tools/call",
            json!({"name": "slow_sum", "arguments": args}),
        )
        .await;
    assert_eq!(
        sync["result"],
        json!({"content": [{"type": "text", "text": "3"}], "isError": false}),
        "{sync}"
    );
    // ...and one that declares the extension in its own _meta becomes a task; so must the polls
    // (-32021 without).
    client.meta = Some(json!({"io.modelcontextprotocol/clientCapabilities": tasks_caps()}));
    let created = client
        .rpc(
            3,
            "tools/call",
            json!({"name": "slow_sum", "arguments": args}),
        )
        .await;
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_string();
    let done = client.poll_until(&id, "completed").await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "3");

    // 2026-07-28: no initialize; Mcp-Method/Mcp-Name headers are required.
    client.version = "2026-07-28";
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": tasks_caps(),
    });
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "slow_sum", "arguments": {"a": 1, "b": 2, "delay_ms": 10}, "_meta": meta}});
    let bare = client.post(&call).await;
    assert_eq!(bare.status, 400, "{}", bare.body);
    assert_eq!(bare.only_message()["error"]["code"], -32020);
    let ok = client
        .post_with(
            &call,
            &[("mcp-method", "tools/call"), ("mcp-name", "slow_sum")],
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.only_message()["result"]["resultType"], "task");
}
