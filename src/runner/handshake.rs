//! Capability negotiation before any call: `initialize` (our protocol version), the
//! initialized notification, then every page of the tool list. Bounded in attempts and pages.

use tokio::time::Duration;

use super::Runner;
use crate::protocol::{Inbound, ServerCapabilities};
use crate::transport::{InFrame, OutFrame, Transport};

/// Pages of tools/list we follow before deciding the server is looping.
const TOOL_PAGES_MAX: usize = 64;

pub(super) async fn negotiate<T: Transport>(r: &mut Runner, lane: usize, t: &mut T) -> Result<ServerCapabilities, String> {
    let mut caps = None;
    for _ in 0..r.cfg.handshake_attempts.max(1) {
        let id = r.alloc_rpc_id();
        let body = r.lanes[lane].adapter.encode_initialize(id);
        if let Some(frame) = exchange(r, lane, t, id, body).await? {
            caps = Some(r.lanes[lane].adapter.decode_initialize(&frame).map_err(|e| format!("initialize: {e}"))?);
            break;
        }
    }
    let mut caps = caps.ok_or("initialize went unanswered")?;
    if let Some(note) = r.lanes[lane].adapter.encode_initialized() {
        admit(r).await;
        t.send(OutFrame { request_id: None, body: note, http: None }).map_err(|_| "disconnected after initialize".to_string())?;
    }
    let mut cursor: Option<String> = None;
    for _ in 0..TOOL_PAGES_MAX {
        let mut page = None;
        for _ in 0..r.cfg.handshake_attempts.max(1) {
            let id = r.alloc_rpc_id();
            let body = r.lanes[lane].adapter.encode_list_tools(id, cursor.as_deref());
            if let Some(frame) = exchange(r, lane, t, id, body).await? {
                page = Some(r.lanes[lane].adapter.decode_list_tools(&frame).map_err(|e| format!("tools/list: {e}"))?);
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
    Err(format!("tools/list still paging after {TOOL_PAGES_MAX} pages"))
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

/// Send one request and wait (bounded) for the frame answering it. `Ok(None)` on timeout.
async fn exchange<T: Transport>(r: &mut Runner, lane: usize, t: &mut T, id: u64, body: Vec<u8>) -> Result<Option<InFrame>, String> {
    admit(r).await;
    t.send(OutFrame { request_id: Some(id), body, http: None }).map_err(|_| "disconnected during the handshake".to_string())?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(r.cfg.request_timeout_ms);
    // Each frame either answers us or is dropped; a server flooding us still meets the deadline.
    loop {
        let sleep = tokio::time::sleep_until(deadline);
        tokio::select! {
            biased;
            frame = t.recv() => match frame {
                None => return Err("disconnected during the handshake".into()),
                Some(f) => match r.lanes[lane].adapter.classify(&f) {
                    Inbound::Response { rpc_id } if rpc_id == id => return Ok(Some(f)),
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
