//! The fake server's task and the approval agent.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::protocol::ApprovalReply;
use toolop::runner::{ApprovalRequest, Input, Observation};
use toolop::transport::OutFrame;

use super::{draw_in, World};
use crate::judge::checkers::input_answer_matches_round::agent_accept_content;
use crate::judge::checkers::view::reply_event;
use crate::series::faults::FaultKind;
use crate::trace::{Trace, What};

/// The fake server: frames in, frames out, and its own clock-driven progress.
pub(super) async fn serve(world: Arc<World>, lane: usize, mut rx: mpsc::UnboundedReceiver<(u32, OutFrame)>) {
    let server = world.servers[lane].clone();
    loop {
        status_after_cancel(&world, &server);
        let now = world.now_ms();
        let next = server.lock().expect("server lock").next_event_at_ms();
        // Without pending work the server still wakes each minute: every wait is bounded.
        let wake = next.unwrap_or(now + 60_000).max(now);
        let sleep = tokio::time::sleep_until(world.origin + Duration::from_millis(wake));
        tokio::select! {
            biased;
            msg = rx.recv() => {
                let Some((conn, frame)) = msg else { return };
                let now = world.now_ms();
                let (early, replies) = {
                    let mut s = server.lock().expect("server lock");
                    let early = s.advance(now);
                    (early, s.handle(now, frame))
                };
                let mut net = world.net.lock().expect("net lock");
                if let Some(to) = net.latest_connection(lane) {
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
                let out = server.lock().expect("server lock").advance(now);
                let mut net = world.net.lock().expect("net lock");
                if let Some(to) = net.latest_connection(lane) {
                    for f in out {
                        net.to_executor(to, f);
                    }
                }
            }
        }
    }
}

/// The status-after-cancel fault (marked by the network when a `tasks/cancel` passed): the work
/// of a cancelled task has ended and the server would now report its outcome. It does so only
/// once the executor has taken in the server's cancel confirmation, because that confirmation
/// is what makes a later `completed` a lie: an executor that never heard `cancelled` may take
/// the task's word. The firing is recorded at the flip, with the state it meets.
fn status_after_cancel(world: &World, server: &std::sync::Mutex<Box<dyn crate::fake::server::SimServer>>) {
    let finished = server.lock().expect("server lock").take_finished_after_cancel();
    for (task_id, _ended_at_ms, decision) in finished {
        let node = server.lock().expect("server lock").truth().tasks.get(&task_id).map(|t| t.call_node.clone());
        let Some(node) = node else { continue };
        if !cancel_confirmation_taken(&world.trace.lock().expect("trace lock"), &node) {
            continue;
        }
        let now = world.now_ms();
        let flipped = {
            let mut s = server.lock().expect("server lock");
            s.complete_after_cancel(&task_id, now).then(|| s.truth().tasks.get(&task_id).map(|t| t.status.as_str()).unwrap_or_default())
        };
        if let Some(status) = flipped {
            world.record_fault(decision, FaultKind::StatusAfterCancel, Some(&node), format!("task {task_id}: cancelled, then {status}"));
        }
    }
}

/// Whether an executor applied a cancel confirmation (`tasks/cancel` answered with the task)
/// for `node`: the step for that reply moved or kept the record rather than rejecting it.
fn cancel_confirmation_taken(trace: &Trace, node: &str) -> bool {
    trace.events.iter().any(|e| match &e.what {
        What::Exec { obs: Observation::Moved { node: n, event, .. } | Observation::Stayed { node: n, event }, .. } => {
            n == node && *event == reply_event("cancel", "cancel_ack")
        }
        _ => false,
    })
}

/// An answer the agent gave, kept to be sent again (the approval-replay fault).
#[derive(Clone, Debug)]
struct Answer {
    node: String,
    round: u32,
    schema_digest: String,
    reply: ApprovalReply,
}

/// Answers approval requests after a drawn delay; sometimes declines, sometimes stays silent.
/// An accepted answer's content is [`agent_accept_content`] of its round, so answers to
/// successive rounds differ and one forwarded for the wrong round shows at the server.
///
/// The approval-replay fault sends an accepted answer again later (a replayed click): when the
/// node's next round is asked (arriving before the agent answers that one), or at a drawn time
/// after the answer. A correct executor refuses it: its round is over.
pub(super) async fn approval_agent(world: Arc<World>, mut rx: mpsc::UnboundedReceiver<ApprovalRequest>) {
    let mut rng = ChaCha8Rng::seed_from_u64(world.params.approval_seed);
    let spec = world.sc.approval.clone();
    // Per node, the last accepted answer.
    let mut accepted: BTreeMap<String, Answer> = BTreeMap::new();
    while let Some(req) = rx.recv().await {
        let delay_ms = draw_in(&mut rng, spec.delay_ms);
        let roll: f64 = rng.gen();
        let reply = if roll < spec.silent_rate {
            None
        } else if roll < spec.silent_rate + spec.decline_rate {
            Some(ApprovalReply::Decline)
        } else {
            Some(ApprovalReply::Accept { content: agent_accept_content(req.round) })
        };
        // The node's next round is asked: an older answer arrives first.
        if let Some(old) = accepted.get(&req.node).filter(|a| a.round < req.round).cloned() {
            let decision = world.plan.lock().expect("plan lock").fire(FaultKind::ApprovalReplay, world.now_ms());
            if let Some(decision) = decision {
                let before = if reply.is_some() { delay_ms.saturating_sub(1) } else { spec.delay_ms[1] };
                let after_ms = world.plan.lock().expect("plan lock").draw(0, before);
                tokio::spawn(replay(world.clone(), old, after_ms, decision));
            }
        }
        let Some(reply) = reply else {
            world.push(What::Approval { node: req.node.clone(), round: req.round, action: "silent".into() });
            continue;
        };
        if let ApprovalReply::Accept { .. } = reply {
            let answer = Answer { node: req.node.clone(), round: req.round, schema_digest: req.schema_digest.clone(), reply: reply.clone() };
            // The same answer, once more, a while after it was given.
            let decision = world.plan.lock().expect("plan lock").fire(FaultKind::ApprovalReplay, world.now_ms());
            if let Some(decision) = decision {
                let after_ms = delay_ms + world.plan.lock().expect("plan lock").draw(1_000, 30_000);
                tokio::spawn(replay(world.clone(), answer.clone(), after_ms, decision));
            }
            accepted.insert(req.node.clone(), answer);
        }
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

/// Send `answer` again after `after_ms`, recording the firing with the state it meets.
async fn replay(world: Arc<World>, answer: Answer, after_ms: u64, decision: u64) {
    tokio::time::sleep(Duration::from_millis(after_ms)).await;
    let Answer { node, round, schema_digest, reply } = answer;
    world.record_fault(decision, FaultKind::ApprovalReplay, Some(&node), format!("round {round} answer sent again"));
    world.push(What::Approval { node: node.clone(), round, action: "replay_accept".into() });
    world.send_input(Input::Approval { node, round, schema_digest, reply });
}
