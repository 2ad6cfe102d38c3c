//! Sessions across failures: a kept session answers the runner's initialize in a later process,
//! and a session the server lost (404) is replaced by replaying the runner's own initialize.

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Duration;

use super::{post, post_on, KeptSession, Shared};
use crate::transport::body::{is_event_stream, read_capped, read_sse};
use crate::transport::live::TransportStats;

/// Take the revision the server chose from its initialize reply (a JSON-RPC response), for the
/// `MCP-Protocol-Version` header of every later request. A reply without one changes nothing.
pub(super) fn note_version(shared: &Shared, reply: &[u8]) {
    let chosen = serde_json::from_slice::<Value>(reply).ok().and_then(|v| {
        v.get("result")?
            .get("protocolVersion")?
            .as_str()
            .map(str::to_string)
    });
    if let Some(v) = chosen {
        shared.session.lock().expect("session lock").version = Some(v);
    }
}

/// The runner's `initialize` answered (`reply`) on the session the transport just opened: keep
/// it, or adopt the one another process kept first (see [`super::SessionStore`]); before the
/// runner reads the answer, so its next message names the session that stands.
pub(super) fn keep(shared: &Shared, reply: &[u8]) {
    note_version(shared, reply);
    let id = shared.session.lock().expect("session lock").id.clone();
    let Some(opened) = id else { return };
    if let Some(held) = settle(shared, opened.clone(), reply) {
        if held != opened {
            promote(shared, Some(held), true);
            shared
                .session
                .lock()
                .expect("session lock")
                .opened_elsewhere = true;
        }
    }
}

/// Offer the session `opened` (answered `reply` to an initialize) to the store; returns the
/// session to name from now on (`opened`, or the one another process kept first), and keeps
/// it in the handle the caller persists. `None` when the reply is no text.
fn settle(shared: &Shared, opened: String, reply: &[u8]) -> Option<String> {
    let new = KeptSession {
        session_id: opened,
        initialize_reply: std::str::from_utf8(reply).ok()?.to_string(),
    };
    let base = shared.session.lock().expect("session lock").base.clone();
    let held = shared
        .store
        .as_ref()
        .and_then(|store| store.swap(base.as_deref(), &new))
        .unwrap_or(new);
    let id = held.session_id.clone();
    shared.session.lock().expect("session lock").base = Some(id.clone());
    *shared.kept.lock().expect("kept lock") = Some(held);
    Some(id)
}

/// The runner's initialize, answered from a kept session: its reply with the runner's id.
pub(super) fn kept_reply(kept: &KeptSession, init: &Value) -> Option<Vec<u8>> {
    let mut reply: Value = serde_json::from_str(&kept.initialize_reply).ok()?;
    reply.get("result")?;
    reply["id"] = init.get("id")?.clone();
    serde_json::to_vec(&reply).ok()
}

/// The first response message of a reply, JSON body or SSE stream.
async fn first_response(shared: &Shared, resp: reqwest::Response) -> Option<Vec<u8>> {
    if !is_event_stream(&resp) {
        return read_capped(resp, shared.cfg.body_limit_bytes).await.ok();
    }
    let mut found = None;
    read_sse(resp, shared.cfg.body_limit_bytes, |ev| {
        let is_response = serde_json::from_str::<Value>(&ev.data).is_ok_and(|v| {
            v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some())
        });
        if is_response {
            found = Some(ev.data.into_bytes());
        }
        found.is_none()
    })
    .await;
    found
}

/// Requests name the session `id` from now on: one an `initialize` opened (`ready` once its
/// initialized notification went out).
pub(super) fn promote(shared: &Shared, id: Option<String>, ready: bool) {
    let mut s = shared.session.lock().expect("session lock");
    s.id = id;
    s.generation += 1;
    s.lost = false;
    s.ready = ready;
    TransportStats::bump(&shared.deliver.stats.sessions);
    drop(s);
    shared.changed.notify_waiters();
}

/// A new session after a 404: the runner's initialize and initialized notification again, under
/// ids of the transport's own (their replies are consumed here, never delivered). It runs beside
/// the runner's sends, which name the old session until the new one is promoted.
pub(super) async fn reinitialize(shared: &Arc<Shared>) {
    let (init, initialized) = {
        let s = shared.session.lock().expect("session lock");
        (s.init.clone(), s.initialized.clone())
    };
    let Some(mut init) = init else {
        // Nothing to replay: go on without a session and let the server say what it wants.
        let mut s = shared.session.lock().expect("session lock");
        s.lost = false;
        s.id = None;
        return;
    };
    for attempt in 0..shared.cfg.reinit_attempts_max.max(1) {
        init["id"] = Value::from(format!("toolop-transport-reinit-{attempt}"));
        let body = serde_json::to_vec(&init).expect("Value serialises");
        if let Some(resp) = post(shared, body, true, &[]).await {
            let ok = resp.status().is_success();
            // The reply is the server's initialize result: kept, never delivered (the runner
            // negotiated already).
            let reply = first_response(shared, resp).await;
            let opened = shared.session.lock().expect("session lock").opened.take();
            if let (true, Some(id)) = (ok, opened) {
                // Another process that lost the same session may have kept a new one first:
                // then that one stands, its initialized notification sent by its opener.
                let held = match (&id, &reply) {
                    (Some(opened), Some(reply)) => settle(shared, opened.clone(), reply),
                    _ => None,
                };
                if let Some(other) = held.filter(|h| Some(h) != id.as_ref()) {
                    promote(shared, Some(other), true);
                } else {
                    let note = initialized.clone().unwrap_or_else(|| {
                        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec()
                    });
                    let ready = post_on(shared, note, id.clone())
                        .await
                        .is_some_and(|r| r.status().is_success());
                    promote(shared, id, ready);
                }
                TransportStats::bump(&shared.deliver.stats.reinitializations);
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100u64 << attempt.min(6))).await;
    }
    // The session stays lost, so the next send starts another round: a server that takes longer
    // than these attempts to come back is reached once it has. (Until session 43 the transport
    // went on without a session, and a server answers every request without one 400, never the
    // 404 that would start a new round: the runner's calls failed for good.)
    tracing::warn!(
        "re-initialization failed {} times; trying again at the next send",
        shared.cfg.reinit_attempts_max
    );
}
