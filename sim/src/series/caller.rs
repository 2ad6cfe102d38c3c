//! The caller: submits, cancels and detaches at drawn times, then waits (bounded) until every
//! call node has a receipt or sits in manual reconciliation.

use std::sync::Arc;

use tokio::time::Duration;
use toolop::runner::{CallNode, Input};

use super::World;
use crate::trace::{CallerAction, What};

/// The submission key the caller gives call node `node`.
pub(super) fn submission_key(params: &super::Params, node: &str) -> String {
    format!("{}:{}:{}", params.scenario, params.seed, node)
}

pub(super) async fn drive(world: &Arc<World>) -> String {
    // (when, tie order, what, whether a cancel is an operator's request through the ledger)
    let mut plan: Vec<(u64, u8, Input, bool)> = vec![];
    for n in &world.params.nodes {
        let node = CallNode {
            id: n.id.clone(),
            tool: n.tool.clone(),
            arguments: n.script.to_arguments(),
            submission_key: submission_key(&world.params, &n.id),
        };
        world
            .directory
            .lock()
            .expect("directory lock")
            .insert(node.submission_key.clone(), n.id.clone());
        plan.push((n.submit_at_ms, 0, Input::Submit(node), false));
        if let Some(t) = n.cancel_at_ms {
            let cancel = Input::Cancel { node: n.id.clone() };
            plan.push((t, 1, cancel, n.cancel_by_request));
        }
        if let Some(t) = n.detach_at_ms {
            plan.push((t, 2, Input::Detach { node: n.id.clone() }, false));
        }
    }
    if let Some(t) = world.sc.retire_primary_at_ms {
        let retire = Input::RetireAdapter(world.sc.protocol.adapter_id());
        plan.push((t, 3, retire, false));
    }
    plan.sort_by_key(|a| (a.0, a.1));
    for (at, _, input, by_request) in plan {
        tokio::time::sleep_until(world.origin + Duration::from_millis(at)).await;
        if let Input::Cancel { node } = &input {
            if by_request && request_cancel(world, node) {
                continue;
            }
        }
        let (action, node) = match &input {
            Input::Submit(n) => {
                world.submitted.lock().expect("caller lock").push(n.clone());
                (CallerAction::Submit, n.id.clone())
            }
            Input::Cancel { node } => {
                world
                    .cancelled
                    .lock()
                    .expect("caller lock")
                    .push(node.clone());
                (CallerAction::Cancel, node.clone())
            }
            Input::Detach { node } => (CallerAction::Detach, node.clone()),
            Input::RetireAdapter(id) => {
                *world.retired.lock().expect("caller lock") = Some(*id);
                (CallerAction::Retire, id.name().to_string())
            }
            Input::Approval { .. } | Input::Shutdown => unreachable!(
                "the caller's plan holds submissions, cancels, detaches and retirements only"
            ),
        };
        world.push(What::Caller { action, node });
        world.send_input(input);
    }
    let limit_ms = world.sc.limits.sim_time_ms;
    // Check once a simulated second; the limit bounds the loop.
    for _ in 0..=limit_ms / 1_000 {
        if world.trace.lock().expect("trace lock").truncated {
            return "event limit reached".into();
        }
        if world.all_settled() {
            return "all call nodes settled".into();
        }
        if world.now_ms() >= limit_ms {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    "simulated time limit reached".into()
}

/// An operator cancels `node` as `toolop cancel NODE` does: a request written into the shared
/// ledger, which the process owning the node finds on its next look and takes once the cancel
/// is committed. The ledger holds it across restarts, so it is never repeated. `false` when the
/// ledger does not hold the node yet (the CLI would refuse an unknown node): the caller then
/// clicks instead.
fn request_cancel(world: &World, node: &str) -> bool {
    let mut ledger = world.ledger.lock().expect("ledger lock");
    let known = ledger
        .by_call_node(node)
        .expect("in-memory ledger reads cannot fail")
        .is_some();
    if !known {
        return false;
    }
    // The operator's event goes first, as a click's does (judges read trace order); no await
    // between the read and the write, so no executor step comes in between.
    world.push(What::Caller {
        action: CallerAction::CancelRequest,
        node: node.to_string(),
    });
    ledger
        .request_cancel(node, world.now_ms())
        .expect("the ledger holds the node");
    true
}

/// After an executor restart the caller repeats what the dead process may not have taken in:
/// submissions the ledger never saw, cancels it never recorded. The ledger makes both idempotent.
pub(super) fn retry_after_restart(world: &World) {
    // A retirement is an operator's standing order: a restarted executor hears it again first.
    if let Some(id) = *world.retired.lock().expect("caller lock") {
        world.send_input(Input::RetireAdapter(id));
    }
    let submitted = world.submitted.lock().expect("caller lock").clone();
    let cancelled = world.cancelled.lock().expect("caller lock").clone();
    for node in submitted {
        let rec = world
            .ledger
            .lock()
            .expect("ledger lock")
            .by_call_node(&node.id)
            .expect("in-memory ledger reads cannot fail");
        if rec.is_none() {
            world.push(What::Caller {
                action: CallerAction::Resubmit,
                node: node.id.clone(),
            });
            world.send_input(Input::Submit(node));
        }
    }
    for node in cancelled {
        if cancel_unrecorded(world, &node) {
            world.push(What::Caller {
                action: CallerAction::Recancel,
                node: node.clone(),
            });
            world.send_input(Input::Cancel { node });
        }
    }
}

/// Whether a clicked cancel is one the ledger does not show yet, so the caller repeats it to a
/// process that starts (a restart or a replica). A node being submitted again (no record)
/// takes its cancel again too: the click went to a process that never recorded the node (or
/// to none: every process was down), and a cancel for an unknown node is dropped.
pub(super) fn cancel_unrecorded(world: &World, node: &str) -> bool {
    let rec = world
        .ledger
        .lock()
        .expect("ledger lock")
        .by_call_node(node)
        .expect("in-memory ledger reads cannot fail");
    rec.is_none_or(|r| !r.local_state.is_final() && r.cancel_generation == 0 && !r.cancel_wanted)
}
