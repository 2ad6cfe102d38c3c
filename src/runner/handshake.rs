//! Capability negotiation before any call: `initialize` (our protocol version), the
//! initialized notification, then every page of the tool list. Bounded in attempts and pages.
//! Attempts wait `handshake_first_timeout_ms`, doubling up to the request timeout, and take an
//! answer to any earlier attempt of the same request: a lost message costs a short wait, a slow
//! server is not punished for being slow.
//!
//! An HTTP 404 answer (Streamable HTTP: the session is gone) is no answer either: the attempt
//! waits out its timeout, reading on (the transport opens a new session meanwhile), and the next
//! attempt goes on the new session. A process that starts on a kept session a restarted server
//! forgot meets exactly that at its first request; failing the handshake there ended every
//! process the same way, each starting again on the same kept session. Only when every attempt
//! met 404 does the last one's answer fail the handshake.

use tokio::time::Duration;

use super::Runner;
use crate::protocol::{Inbound, ServerCapabilities};
use crate::transport::{InFrame, OutFrame, Transport};

/// Pages of tools/list we follow before deciding the server is looping.
const TOOL_PAGES_MAX: usize = 64;

pub(super) async fn negotiate<T: Transport>(
    r: &mut Runner,
    lane: usize,
    t: &mut T,
) -> Result<ServerCapabilities, String> {
    let mut caps = None;
    let mut sent = vec![];
    let mut refused = None;
    for attempt in 0..r.cfg.handshake_attempts.max(1) {
        let id = r.alloc_rpc_id();
        sent.push(id);
        let body = r.lanes[lane].adapter.encode_initialize(id);
        let timeout_ms = attempt_timeout_ms(r, attempt);
        if let Some(frame) = exchange(r, lane, t, &sent, body, timeout_ms, &mut refused)
            .await?
            .or_else(|| last_refused(r, attempt, &mut refused))
        {
            caps = Some(
                r.lanes[lane]
                    .adapter
                    .decode_initialize(&frame)
                    .map_err(|e| format!("initialize: {e}"))?,
            );
            break;
        }
    }
    let mut caps = caps.ok_or("initialize went unanswered")?;
    if let Some(note) = r.lanes[lane].adapter.encode_initialized() {
        admit(r).await;
        t.send(OutFrame {
            request_id: None,
            body: note,
            http: None,
        })
        .map_err(|_| "disconnected after initialize".to_string())?;
    }
    let mut cursor: Option<String> = None;
    for _ in 0..TOOL_PAGES_MAX {
        let mut page = None;
        let mut sent = vec![];
        let mut refused = None;
        for attempt in 0..r.cfg.handshake_attempts.max(1) {
            let id = r.alloc_rpc_id();
            sent.push(id);
            let body = r.lanes[lane]
                .adapter
                .encode_list_tools(id, cursor.as_deref());
            let timeout_ms = attempt_timeout_ms(r, attempt);
            if let Some(frame) = exchange(r, lane, t, &sent, body, timeout_ms, &mut refused)
                .await?
                .or_else(|| last_refused(r, attempt, &mut refused))
            {
                page = Some(
                    r.lanes[lane]
                        .adapter
                        .decode_list_tools(&frame)
                        .map_err(|e| format!("tools/list: {e}"))?,
                );
                break;
            }
        }
        let (tools, next) = page.ok_or("tools/list went unanswered")?;
        for tool in tools {
            caps.tools.insert(tool.name.clone(), tool);
        }
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(caps),
        }
    }
    Err(format!(
        "tools/list still paging after {TOOL_PAGES_MAX} pages"
    ))
}

/// Wait for a slot of the shared QPS limiter: the handshake counts against the bound too.
async fn admit(r: &mut Runner) {
    loop {
        let now = r.now_ms();
        if r.limiter.try_admit(now) {
            return;
        }
        let slot = r.limiter.next_slot_ms(now);
        tokio::time::sleep_until(r.at(slot)).await;
    }
}

/// How long attempt `attempt` (0-based) waits: the first timeout, doubled per retry, at most the
/// request timeout.
pub(super) fn attempt_timeout_ms(r: &Runner, attempt: u32) -> u64 {
    let first = r
        .cfg
        .handshake_first_timeout_ms
        .clamp(1, r.cfg.request_timeout_ms.max(1));
    first
        .saturating_mul(1u64 << attempt.min(32))
        .min(r.cfg.request_timeout_ms.max(1))
}

/// The 404 an attempt met, as its answer, once it was the last attempt (it fails the handshake
/// in the server's words).
fn last_refused(r: &Runner, attempt: u32, refused: &mut Option<InFrame>) -> Option<InFrame> {
    if attempt + 1 >= r.cfg.handshake_attempts.max(1) {
        refused.take()
    } else {
        None
    }
}

/// Send the newest attempt of one request (the last id of `ids`) and wait up to `timeout_ms`
/// for a frame answering any attempt of it. `Ok(None)` on timeout. An HTTP 404 answer is kept
/// in `refused` and waited past (see the module docs).
async fn exchange<T: Transport>(
    r: &mut Runner,
    lane: usize,
    t: &mut T,
    ids: &[u64],
    body: Vec<u8>,
    timeout_ms: u64,
    refused: &mut Option<InFrame>,
) -> Result<Option<InFrame>, String> {
    let id = *ids.last().expect("at least one attempt");
    admit(r).await;
    t.send(OutFrame {
        request_id: Some(id),
        body,
        http: None,
    })
    .map_err(|_| "disconnected during the handshake".to_string())?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
    // Each frame either answers us or is dropped; a server flooding us still meets the deadline.
    loop {
        let sleep = tokio::time::sleep_until(deadline);
        tokio::select! {
            biased;
            frame = t.recv() => match frame {
                None => return Err("disconnected during the handshake".into()),
                Some(f) => match r.lanes[lane].adapter.classify(&f) {
                    Inbound::Response { rpc_id } if ids.contains(&rpc_id) && f.http_status == 404 => {
                        *refused = Some(f);
                    }
                    Inbound::Response { rpc_id } if ids.contains(&rpc_id) => return Ok(Some(f)),
                    // A ping (or any request) during negotiation is answered now: the server may
                    // wait for it before it answers us.
                    Inbound::ServerRequest(req) => {
                        r.observe(super::Observation::ServerRequestAnswered { method: req.method.clone(), answer: req.answer.name() });
                        if let Some(body) = r.lanes[lane].adapter.encode_server_answer(&req) {
                            let answer = OutFrame { request_id: None, body, http: None };
                            t.send(answer).map_err(|_| "disconnected during the handshake".to_string())?;
                        }
                    }
                    _ => {}
                },
            },
            _ = sleep => return Ok(None),
        }
    }
}
