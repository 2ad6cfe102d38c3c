//! What comes back on a POST: a status, a JSON body or an SSE stream of messages, each
//! delivered to the runner tagged with the POST's request id; a stream cut before its response
//! is resumed (see `get.rs`).

use std::sync::Arc;

use serde_json::Value;

use super::get::resume_post_stream;
use super::session::keep;
use super::Shared;
use crate::transport::body::{
    self, is_event_stream, read_capped, read_sse, retry_after_ms, SseEnd,
};
use crate::transport::live::TransportStats;
use crate::transport::InFrame;

/// Whether an SSE message is the response to `request_id`.
pub(super) fn answers(data: &str, request_id: Option<u64>) -> bool {
    let Some(want) = request_id else { return false };
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return false;
    };
    v.get("method").is_none() && v.get("id").and_then(Value::as_u64) == Some(want)
}

/// The events of a POST's SSE stream (or its resumption), each message delivered tagged with
/// the POST's request id, until the response to it has come or the stream ends. `last_id`
/// follows the newest event id. Whether the response came.
pub(super) async fn read_post_events(
    shared: &Shared,
    resp: reqwest::Response,
    request_id: Option<u64>,
    last_id: &mut Option<String>,
    initialize: bool,
) -> (SseEnd, bool) {
    let mut answered = false;
    let end = read_sse(resp, shared.cfg.body_limit_bytes, |ev| {
        if ev.id.is_some() {
            *last_id = ev.id;
        }
        if !ev.data.trim().is_empty() {
            let answer = answers(&ev.data, request_id);
            if answer && initialize {
                keep(shared, ev.data.as_bytes());
            }
            answered |= answer;
            let frame = InFrame {
                request_id,
                http_status: 200,
                retry_after_ms: None,
                body: ev.data.into_bytes(),
            };
            shared.deliver.frame(frame);
        }
        !answered && !shared.deliver.closed()
    })
    .await;
    (end, answered)
}

/// Deliver what one POST's reply holds.
pub(super) async fn read_reply(
    shared: Arc<Shared>,
    resp: reqwest::Response,
    request_id: Option<u64>,
    initialize: bool,
) {
    let status = resp.status().as_u16();
    let retry_after_ms = retry_after_ms(resp.headers());
    if status == 202 || status == 204 {
        // A notification or response was accepted; a request answered 202 is the adapter's call.
        if request_id.is_some() {
            shared.deliver.frame(InFrame {
                request_id,
                http_status: 202,
                retry_after_ms,
                body: Vec::new(),
            });
        }
        return;
    }
    if (200..300).contains(&status) && is_event_stream(&resp) {
        let mut last_id = None;
        let (end, answered) =
            read_post_events(&shared, resp, request_id, &mut last_id, initialize).await;
        note_end(&shared, &end, "POST stream");
        if !answered && !matches!(end, SseEnd::TooLarge) {
            if let Some(last_id) = last_id {
                resume_post_stream(&shared, request_id, last_id).await;
            }
        }
        return;
    }
    match read_capped(resp, shared.cfg.body_limit_bytes).await {
        Ok(body) => {
            if initialize && status == 200 {
                keep(&shared, &body);
            }
            if request_id.is_some() || status >= 300 {
                shared.deliver.frame(InFrame {
                    request_id,
                    http_status: status,
                    retry_after_ms,
                    body,
                });
            }
        }
        Err(e) => {
            if matches!(e, body::BodyError::TooLarge { .. }) {
                TransportStats::bump(&shared.deliver.stats.oversize);
            }
            tracing::warn!(
                "reply to request {}: {e}",
                request_id.map_or("-".into(), |id| id.to_string())
            );
        }
    }
}

pub(super) fn note_end(shared: &Shared, end: &SseEnd, what: &str) {
    match end {
        SseEnd::Closed => {}
        SseEnd::Broken(e) => tracing::info!("{what} ended: {e}"),
        SseEnd::TooLarge => {
            TransportStats::bump(&shared.deliver.stats.oversize);
            tracing::warn!(
                "{what}: an event exceeded the {}-byte cap; stream dropped",
                shared.cfg.body_limit_bytes
            );
        }
    }
}
