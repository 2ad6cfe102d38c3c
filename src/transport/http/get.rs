//! The stream half of the Streamable HTTP client: the standalone GET stream for
//! server-initiated messages (reopened with `Last-Event-ID` after a drop, restarted on a new
//! session) and the resumption of a POST stream cut before its response.

use std::sync::Arc;

use tokio::time::Duration;

use super::reply::{note_end, read_post_events};
use super::{
    note_session, Shared, HEADER_LAST_EVENT_ID, HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID,
    POST_RESUMES_MAX,
};
use crate::transport::body::{error_text, is_event_stream, read_sse, SseEnd};
use crate::transport::live::TransportStats;
use crate::transport::InFrame;

/// A POST stream was cut before its response: ask for the rest with `Last-Event-ID`.
pub(super) async fn resume_post_stream(shared: &Shared, request_id: Option<u64>, last_id: String) {
    let mut last_id = Some(last_id);
    for _ in 0..POST_RESUMES_MAX {
        let Some(resp) = get(shared, last_id.as_deref()).await else {
            return;
        };
        if !resp.status().is_success() || !is_event_stream(&resp) {
            return;
        }
        TransportStats::bump(&shared.deliver.stats.get_resumptions);
        let (end, answered) = read_post_events(shared, resp, request_id, &mut last_id, false).await;
        note_end(shared, &end, "resumed POST stream");
        if answered || matches!(end, SseEnd::TooLarge) {
            return;
        }
    }
}

/// One GET for a stream on the current session.
async fn get(shared: &Shared, last_event_id: Option<&str>) -> Option<reqwest::Response> {
    let session_id = shared.session.lock().expect("session lock").id.clone();
    let mut req = shared
        .client
        .get(&shared.cfg.url)
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .header(HEADER_PROTOCOL_VERSION, shared.protocol_version());
    if let Some(id) = &session_id {
        req = req.header(HEADER_SESSION_ID, id);
    }
    if let Some(last) = last_event_id {
        req = req.header(HEADER_LAST_EVENT_ID, last);
    }
    for (k, v) in &shared.cfg.headers {
        req = req.header(k, v);
    }
    TransportStats::bump(&shared.deliver.stats.requests);
    match req.send().await {
        Ok(resp) => Some(resp),
        Err(e) => {
            TransportStats::bump(&shared.deliver.stats.failures);
            tracing::info!("GET {} failed: {}", shared.cfg.url, error_text(&e));
            None
        }
    }
}

/// Wait until a session is ready (initialized notification sent); its generation.
async fn ready_session(shared: &Shared) -> u64 {
    loop {
        let notified = shared.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let s = shared.session.lock().expect("session lock");
            if s.ready && !s.lost {
                return s.generation;
            }
        }
        notified.await;
    }
}

/// The standalone GET stream: server-initiated requests and notifications, reopened with
/// `Last-Event-ID` after a drop, restarted without it on a new session.
pub(super) async fn get_loop(shared: Arc<Shared>) {
    let mut last: Option<(u64, String)> = None;
    let mut failures = 0u32;
    let mut stopped_generation = None;
    loop {
        let generation = ready_session(&shared).await;
        if stopped_generation == Some(generation) {
            // This session offers no stream (405) or kept failing: wait for the next one.
            let notified = shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if shared.session.lock().expect("session lock").generation == generation {
                notified.await;
            }
            continue;
        }
        if shared.deliver.closed() {
            return;
        }
        let last_id = last
            .as_ref()
            .filter(|(g, _)| *g == generation)
            .map(|(_, id)| id.clone());
        let resp = get(&shared, last_id.as_deref()).await;
        let mut retry_ms = shared.cfg.get_retry_ms;
        match resp {
            Some(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                TransportStats::bump(&shared.deliver.stats.get_streams);
                if last_id.is_some() {
                    TransportStats::bump(&shared.deliver.stats.get_resumptions);
                }
                failures = 0;
                let end = read_sse(resp, shared.cfg.body_limit_bytes, |ev| {
                    if let Some(id) = ev.id {
                        last = Some((generation, id));
                    }
                    if let Some(r) = ev.retry_ms {
                        retry_ms = r;
                    }
                    if !ev.data.trim().is_empty() {
                        shared.deliver.frame(InFrame::message(ev.data.into_bytes()));
                    }
                    !shared.deliver.closed()
                })
                .await;
                note_end(&shared, &end, "GET stream");
            }
            Some(resp) if resp.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                tracing::info!("server offers no GET stream (HTTP 405)");
                stopped_generation = Some(generation);
                continue;
            }
            Some(resp) => {
                let status = resp.status();
                if status == reqwest::StatusCode::NOT_FOUND {
                    note_session(&shared, &resp, false, true, generation);
                }
                failures += 1;
                tracing::info!("GET stream refused: HTTP {status}");
            }
            None => failures += 1,
        }
        if failures >= shared.cfg.get_failures_max {
            tracing::warn!(
                "GET stream failed {failures} times in a row; not reopened on this session"
            );
            stopped_generation = Some(generation);
            failures = 0;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(retry_ms)).await;
    }
}
