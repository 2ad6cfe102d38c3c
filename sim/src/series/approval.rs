//! The approval agent: answers the executor's approval requests after a drawn delay; sometimes
//! declines, sometimes stays silent; and, under the approval-replay fault, sends an old answer
//! again (a replayed click). Input rounds exist on the primary lane's protocol only when it has
//! them; the fault is asked on lane 0's expressibility.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::protocol::ApprovalReply;
use toolop::runner::{ApprovalRequest, Input};

use super::params::draw_in;
use super::World;
use crate::fake::codec::question_of;
use crate::judge::checkers::input_answer_matches_round::agent_accept_content;
use crate::series::faults::FaultKind;
use crate::trace::{ApprovalAction, FaultDetail, Question, What};

/// An answer the agent gave, kept to be sent again (the approval-replay fault).
#[derive(Clone, Debug)]
struct Answer {
    node: String,
    round: u32,
    question: Option<Question>,
    schema_digest: String,
    reply: ApprovalReply,
}

/// What the question names, read from its words ([`question_of`]) as a person would read them:
/// the server's task and round, whatever number the executor gave the question.
fn question(req: &ApprovalRequest) -> Option<Question> {
    question_in(&req.requested_schema)
}

/// What a question's schema names (its words, [`question_of`]).
pub(crate) fn question_in(requested_schema: &serde_json::Value) -> Option<Question> {
    let words = requested_schema.pointer("/properties/ok/description")?;
    let (task, round) = question_of(words.as_str()?)?;
    Some(Question { task, round })
}

/// Answers approval requests after a drawn delay; sometimes declines, sometimes stays silent.
/// An accepted answer's content is [`agent_accept_content`] of its round, so answers to
/// successive rounds differ and one forwarded for the wrong round shows at the server.
///
/// The approval-replay fault sends an accepted answer again later (a replayed click): when the
/// node's next round is asked (arriving before the agent answers that one), or at a drawn time
/// after the answer. A correct executor refuses it: its round is over.
pub(super) async fn agent(world: Arc<World>, mut rx: mpsc::UnboundedReceiver<ApprovalRequest>) {
    let mut rng = ChaCha8Rng::seed_from_u64(world.params.approval_seed);
    let spec = world.sc.approval.clone();
    // Per node, the last accepted answer.
    let mut accepted: BTreeMap<String, Answer> = BTreeMap::new();
    while let Some(req) = rx.recv().await {
        let q = question(&req);
        world.push(What::Approval {
            node: req.node.clone(),
            round: req.round,
            question: q.clone(),
            action: ApprovalAction::Asked,
        });
        let delay_ms = draw_in(&mut rng, spec.delay_ms);
        let roll: f64 = rng.gen();
        // The content names the round the question names (the executor's number otherwise).
        let content_round = q.as_ref().map_or(req.round, |q| q.round);
        let reply = if roll < spec.silent_rate {
            None
        } else if roll < spec.silent_rate + spec.decline_rate {
            Some(ApprovalReply::Decline)
        } else {
            Some(ApprovalReply::Accept {
                content: agent_accept_content(content_round),
            })
        };
        // The node's next round is asked: an older answer arrives first.
        if let Some(old) = accepted
            .get(&req.node)
            .filter(|a| a.round < req.round)
            .cloned()
        {
            if let Some(decision) = world.ask(0, FaultKind::ApprovalReplay, Some(&req.node)) {
                let before = if reply.is_some() {
                    delay_ms.saturating_sub(1)
                } else {
                    spec.delay_ms[1]
                };
                let after_ms = world.plan.lock().expect("plan lock").draw(0, before);
                tokio::spawn(replay(world.clone(), old, after_ms, decision));
            }
        }
        let Some(reply) = reply else {
            world.push(What::Approval {
                node: req.node.clone(),
                round: req.round,
                question: q,
                action: ApprovalAction::Silent,
            });
            continue;
        };
        if let ApprovalReply::Accept { .. } = reply {
            let answer = Answer {
                node: req.node.clone(),
                round: req.round,
                question: q.clone(),
                schema_digest: req.schema_digest.clone(),
                reply: reply.clone(),
            };
            // The same answer, once more, a while after it was given.
            if let Some(decision) = world.ask(0, FaultKind::ApprovalReplay, Some(&req.node)) {
                let after_ms = delay_ms + world.plan.lock().expect("plan lock").draw(1_000, 30_000);
                tokio::spawn(replay(world.clone(), answer.clone(), after_ms, decision));
            }
            accepted.insert(req.node.clone(), answer);
        }
        let world = world.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let action = match &reply {
                ApprovalReply::Accept { .. } => ApprovalAction::Accept,
                ApprovalReply::Decline => ApprovalAction::Decline,
                ApprovalReply::Cancel => ApprovalAction::Cancel,
            };
            world.push(What::Approval {
                node: req.node.clone(),
                round: req.round,
                question: q,
                action,
            });
            world.send_input(Input::Approval {
                node: req.node,
                round: req.round,
                schema_digest: req.schema_digest,
                reply,
            });
        });
    }
}

/// Send `answer` again after `after_ms`, recording the firing with the state it meets.
async fn replay(world: Arc<World>, answer: Answer, after_ms: u64, decision: u64) {
    tokio::time::sleep(Duration::from_millis(after_ms)).await;
    let Answer {
        node,
        round,
        question,
        schema_digest,
        reply,
    } = answer;
    world.record_fault(
        decision,
        FaultKind::ApprovalReplay,
        Some(&node),
        FaultDetail::Round { round },
    );
    world.push(What::Approval {
        node: node.clone(),
        round,
        question,
        action: ApprovalAction::ReplayAccept,
    });
    world.send_input(Input::Approval {
        node,
        round,
        schema_digest,
        reply,
    });
}
