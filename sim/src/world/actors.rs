//! The fake server's task and the approval agent.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::protocol::ApprovalReply;
use toolop::runner::{ApprovalRequest, Input};
use toolop::transport::OutFrame;

use super::{draw_in, World};
use crate::trace::What;

/// The fake server: frames in, frames out, and its own clock-driven progress.
pub(super) async fn serve(world: Arc<World>, mut rx: mpsc::UnboundedReceiver<(u32, OutFrame)>) {
    loop {
        let now = world.now_ms();
        let next = world.server.lock().expect("server lock").next_event_at_ms();
        // Without pending work the server still wakes each minute: every wait is bounded.
        let wake = next.unwrap_or(now + 60_000).max(now);
        let sleep = tokio::time::sleep_until(world.origin + Duration::from_millis(wake));
        tokio::select! {
            biased;
            msg = rx.recv() => {
                let Some((conn, frame)) = msg else { return };
                let now = world.now_ms();
                let (early, replies) = {
                    let mut s = world.server.lock().expect("server lock");
                    let early = s.advance(now);
                    (early, s.handle(now, frame))
                };
                let mut net = world.net.lock().expect("net lock");
                if let Some(to) = net.latest_connection() {
                    for f in early {
                        net.to_executor(to, f);
                    }
                }
                // Replies go back on the connection the request came from.
                for f in replies {
                    net.to_executor(conn, f);
                }
            }
            _ = sleep => {
                let now = world.now_ms();
                let out = world.server.lock().expect("server lock").advance(now);
                let mut net = world.net.lock().expect("net lock");
                if let Some(to) = net.latest_connection() {
                    for f in out {
                        net.to_executor(to, f);
                    }
                }
            }
        }
    }
}

/// Answers approval requests after a drawn delay; sometimes declines, sometimes stays silent.
pub(super) async fn approval_agent(world: Arc<World>, mut rx: mpsc::UnboundedReceiver<ApprovalRequest>) {
    let mut rng = ChaCha8Rng::seed_from_u64(world.params.approval_seed);
    let spec = world.sc.approval.clone();
    while let Some(req) = rx.recv().await {
        let delay_ms = draw_in(&mut rng, spec.delay_ms);
        let roll: f64 = rng.gen();
        let reply = if roll < spec.silent_rate {
            world.push(What::Approval { node: req.node.clone(), round: req.round, action: "silent".into() });
            continue;
        } else if roll < spec.silent_rate + spec.decline_rate {
            ApprovalReply::Decline
        } else {
            ApprovalReply::Accept { content: serde_json::json!({"ok": true}) }
        };
        let world = world.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let action = match &reply {
                ApprovalReply::Accept { .. } => "accept",
                ApprovalReply::Decline => "decline",
                ApprovalReply::Cancel => "cancel",
            };
            world.push(What::Approval { node: req.node.clone(), round: req.round, action: action.into() });
            world.send_input(Input::Approval { node: req.node, round: req.round, schema_digest: req.schema_digest, reply });
        });
    }
}
