//! Replays every client message of the recorded rmcp 3.11.0 transcript
//! (`tests/data/transcripts/rmcp-3.11.0/tasks-extension-stdio.jsonl` of the toolop repository)
//! against this peer, one fresh process per recorded session, at the recorded times, and compares
//! every server message with the recorded one.
//!
//! What is allowed to differ, and nothing else: task ids (mapped by order of creation),
//! `createdAt`/`lastUpdatedAt` values (checked for rmcp's shape instead: nanoseconds and
//! `+00:00`), `serverInfo`/`instructions` (this peer names itself), the extra `stats` tool in
//! `tools/list`, and *when* a polled status shows: a `tasks/get` is repeated until its answer
//! equals the recorded one or a later recorded answer for the same task, because exact timing
//! on a loaded two-core machine is not something to assert.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::StdioPeer;
use serde_json::{json, Value};

const TRANSCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../data/transcripts/rmcp-3.11.0/tasks-extension-stdio.jsonl"
);
/// How long past its recorded time a polled answer may take to appear.
const POLL_GRACE: Duration = Duration::from_secs(3);

struct Record {
    seq: u64,
    t_ms: u64,
    direction: String,
    message: Value,
}

fn load() -> BTreeMap<String, Vec<Record>> {
    let text = std::fs::read_to_string(TRANSCRIPT).unwrap_or_else(|e| panic!("{TRANSCRIPT}: {e}"));
    let mut sessions: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("transcript line is JSON");
        sessions
            .entry(v["session"].as_str().expect("session").to_string())
            .or_default()
            .push(Record {
                seq: v["seq"].as_u64().expect("seq"),
                t_ms: v["tMs"].as_u64().expect("tMs"),
                direction: v["direction"].as_str().expect("direction").to_string(),
                message: v.get("message").cloned().unwrap_or(Value::Null),
            });
    }
    sessions
}

/// The server options the recorded session ran with (read off its `ttlMs`/`pollIntervalMs`).
fn session_args(name: &str) -> Vec<&'static str> {
    match name {
        "D-ttl" => vec!["--ttl-ms", "1500", "--poll-interval-ms", "250"],
        "E-nottl" => vec!["--ttl-ms", "none"],
        _ => vec![],
    }
}

/// Replaces every occurrence of a key of `ids` (task ids are UUIDs: no false hits) in every
/// string, error messages included, by its value.
fn map_ids(v: &Value, ids: &BTreeMap<String, String>) -> Value {
    match v {
        Value::String(s) => Value::String(
            ids.iter()
                .fold(s.clone(), |s, (from, to)| s.replace(from, to)),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| map_ids(x, ids)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), map_ids(x, ids)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// rmcp's timestamps: `chrono::Utc::now().to_rfc3339()`, so RFC 3339 with `+00:00` (not `Z`)
/// and the sub-second digits chrono's `AutoSi` keeps: 9, or 6 or 3 when the nanoseconds end in
/// zeros, or none (CI of session 32 met `.323454`: a 9-digit-only check failed one run in a few
/// hundred).
fn rmcp_timestamp(s: &str) -> bool {
    let Some((date_time, offset)) = s.split_once('+') else {
        return false;
    };
    let (seconds, fraction) = date_time.split_once('.').unwrap_or((date_time, ""));
    offset == "00:00"
        && seconds.len() == 19
        && matches!(fraction.len(), 0 | 3 | 6 | 9)
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

/// Strips what may differ (module docs). Timestamps of *this* peer are checked on the way.
fn normalize(v: &Value, ours: bool, problems: &mut Vec<String>) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|x| normalize(x, ours, problems)).collect()),
        Value::Object(o) => {
            let mut out = serde_json::Map::new();
            for (k, x) in o {
                match k.as_str() {
                    "createdAt" | "lastUpdatedAt" => {
                        if ours && !x.as_str().is_some_and(rmcp_timestamp) {
                            problems.push(format!("{k} {x} is not rmcp's timestamp shape"));
                        }
                        out.insert(k.clone(), json!("<timestamp>"));
                    }
                    "serverInfo" | "instructions" | "io.modelcontextprotocol/serverInfo" => {
                        out.insert(k.clone(), json!("<server>"));
                    }
                    "tools" if ours && x.is_array() => {
                        let kept = x
                            .as_array()
                            .map(|t| t.iter().filter(|t| t["name"] != "stats").cloned().collect());
                        out.insert(
                            k.clone(),
                            normalize(&Value::Array(kept.unwrap_or_default()), ours, problems),
                        );
                    }
                    _ => {
                        out.insert(k.clone(), normalize(x, ours, problems));
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Replays one session against a peer started with `args`; returns the differences found.
async fn replay(name: &str, records: &[Record], args: &[&str]) -> Vec<String> {
    let mut peer = StdioPeer::start(args).await;
    let start = tokio::time::Instant::now();
    let t0 = records.first().map(|r| r.t_ms).unwrap_or(0);
    // transcript task id -> ours, and back.
    let mut theirs_to_ours: BTreeMap<String, String> = BTreeMap::new();
    let mut ours_to_theirs: BTreeMap<String, String> = BTreeMap::new();
    // JSON-RPC id -> the request we sent under it (after id mapping), for poll retries.
    let mut sent: BTreeMap<String, Value> = BTreeMap::new();
    let mut diffs = Vec::new();
    let mut retry_id = 5_000_000u64;

    for (i, rec) in records.iter().enumerate() {
        let at = start + Duration::from_millis(rec.t_ms - t0);
        match rec.direction.as_str() {
            "client->server" => {
                tokio::time::sleep_until(at).await;
                let message = map_ids(&rec.message, &theirs_to_ours);
                if message.get("method").is_some() {
                    if let Some(id) = message.get("id") {
                        sent.insert(id.to_string(), message.clone());
                    }
                }
                peer.send(&message).await;
            }
            "server->client" => {
                let expected = &rec.message;
                let is_server_request = expected.get("method").is_some();
                let mut got = if is_server_request {
                    peer.recv_matching("server request", |m| {
                        m.get("method").is_some() && m.get("id").is_some()
                    })
                    .await
                } else {
                    peer.response(&expected["id"]).await
                };
                // A new task: learn its id (by order of creation).
                if let (Some(theirs), Some(ours)) = (
                    expected["result"]["taskId"].as_str(),
                    got["result"]["taskId"].as_str(),
                ) {
                    if expected["result"]["resultType"] == "task"
                        && !theirs_to_ours.contains_key(theirs)
                    {
                        theirs_to_ours.insert(theirs.to_string(), ours.to_string());
                        ours_to_theirs.insert(ours.to_string(), theirs.to_string());
                    }
                }
                let mut problems = Vec::new();
                let want = normalize(expected, false, &mut problems);
                let request = sent.get(&expected["id"].to_string()).cloned();
                let is_poll = !is_server_request
                    && request.as_ref().is_some_and(|r| r["method"] == "tasks/get");
                // The recorded answer and, for a poll, every later recorded answer to a poll of
                // the same task: a poll that comes late may see a later state.
                let mut acceptable = vec![want.clone()];
                if is_poll {
                    let task = &rec_request(records, i, &expected["id"])["params"]["taskId"];
                    acceptable.extend(later_poll_answers(records, i, task).map(|m| {
                        let mut m = normalize(&m, false, &mut Vec::new());
                        m["id"] = expected["id"].clone();
                        m
                    }));
                }
                let deadline = at + POLL_GRACE;
                loop {
                    let mut ours = normalize(&map_ids(&got, &ours_to_theirs), true, &mut problems);
                    if is_poll {
                        ours["id"] = expected["id"].clone();
                    }
                    if acceptable.contains(&ours) {
                        break;
                    }
                    if !is_poll || tokio::time::Instant::now() >= deadline {
                        diffs.push(format!(
                            "{name} seq {}:\n  recorded {want}\n  got      {ours}",
                            rec.seq
                        ));
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    retry_id += 1;
                    let mut again = request.clone().expect("a poll has its request");
                    again["id"] = json!(retry_id);
                    peer.send(&again).await;
                    got = peer.response(&json!(retry_id)).await;
                }
                diffs.extend(
                    problems
                        .into_iter()
                        .map(|p| format!("{name} seq {}: {p}", rec.seq)),
                );
            }
            _ => {} // server stderr: the probe's own wording, not protocol
        }
    }
    let status = peer.close().await;
    if !status.success() {
        diffs.push(format!(
            "{name}: the peer exited with {status} after stdin closed"
        ));
    }
    diffs
}

/// The recorded request a recorded response answers.
fn rec_request<'a>(records: &'a [Record], before: usize, id: &Value) -> &'a Value {
    records[..before]
        .iter()
        .rev()
        .find(|r| {
            r.direction == "client->server"
                && r.message["id"] == *id
                && r.message.get("method").is_some()
        })
        .map(|r| &r.message)
        .unwrap_or(&Value::Null)
}

/// Recorded answers to later polls of `task` in the same session.
fn later_poll_answers<'a>(
    records: &'a [Record],
    after: usize,
    task: &'a Value,
) -> impl Iterator<Item = Value> + 'a {
    (after + 1..records.len()).filter_map(move |j| {
        let r = &records[j];
        if r.direction != "server->client" || r.message.get("method").is_some() {
            return None;
        }
        let req = rec_request(records, j, &r.message["id"]);
        (req["method"] == "tasks/get" && req["params"]["taskId"] == *task)
            .then(|| r.message.clone())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_answers_like_the_recorded_rmcp_server() {
    let sessions = load();
    assert_eq!(
        sessions.keys().map(String::as_str).collect::<Vec<_>>(),
        ["A-tasks", "B-sync", "C-inline", "D-ttl", "E-nottl"],
        "the transcript's sessions"
    );
    // Sessions are independent processes: run them side by side (the longest is ~8 s).
    let mut handles = Vec::new();
    for (name, records) in sessions {
        handles.push(tokio::spawn(async move {
            replay(&name, &records, &session_args(&name)).await
        }));
    }
    let mut diffs = Vec::new();
    for h in handles {
        diffs.extend(h.await.expect("a replay panicked"));
    }
    assert!(
        diffs.is_empty(),
        "{} differences from the transcript:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

#[test]
fn the_timestamp_check_can_fail() {
    assert!(rmcp_timestamp("2026-12-03T07:25:33.316713669+00:00"));
    assert!(rmcp_timestamp("2026-12-05T23:34:35.323454+00:00"));
    assert!(rmcp_timestamp("2026-12-05T23:34:35+00:00"));
    assert!(!rmcp_timestamp("2026-12-03T07:25:33.316Z"));
    assert!(!rmcp_timestamp("2026-12-03T07:25:33.3167136+00:00"));
    assert!(!rmcp_timestamp("2026-12-03T07:25:33.31671366x+00:00"));
    assert!(!rmcp_timestamp("2026-12-03T07:25:33.316713669+01:00"));
}

/// The comparison can fail: the no-ttl session replayed against a peer with the default ttl.
#[tokio::test]
async fn a_peer_that_differs_is_reported() {
    let sessions = load();
    let diffs = replay("E-nottl", &sessions["E-nottl"], &[]).await;
    assert!(!diffs.is_empty());
    assert!(
        diffs.iter().all(|d| d.contains("\"ttlMs\":300000")),
        "{diffs:?}"
    );
}
