//! The executor's life in a series: start, crash at fail points, reconnect after a dropped
//! connection, restart from the ledger alone, and roll back to a new epoch while the old
//! incarnation lingers (its late replies must be rejected).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::ledger::Ledger;
use toolop::runner::{ApprovalRequest, CrashPoint, CrashPoints, Exit, Input, Observation, Observer, Runner, SharedLedger};

use super::{caller, World};
use crate::faults::FaultKind;
use crate::net::{Net, LANES_MAX};
use crate::trace::What;

/// Restarts a series may see before the world gives up on the executor (a bound on the loop).
const INCARNATIONS_MAX: u32 = 500;

/// Trace observer of one incarnation; also notes old-epoch messages for the coverage matrix.
struct SimObserver {
    world: Arc<World>,
    epoch: u64,
    incarnation: u32,
}

impl Observer for SimObserver {
    fn observe(&mut self, now_ms: u64, obs: Observation) {
        let stale = match &obs {
            Observation::Rejected { node, reason, .. } if reason.starts_with("StaleEpoch") => Some(node.clone()),
            // The ledger's fence refused an old-epoch write the core had not caught yet.
            Observation::Fenced { node, .. } => Some(node.clone()),
            _ => None,
        };
        self.world.trace.lock().expect("trace lock").push(now_ms, What::Exec { epoch: self.epoch, incarnation: self.incarnation, obs });
        if let Some(node) = stale {
            self.world.record_fault(0, FaultKind::OldEpochMessage, Some(&node), format!("epoch {} message after takeover", self.epoch));
        }
    }
}

/// Crash fail points, decided by the series' fault plan.
struct SimCrash {
    world: Arc<World>,
}

impl CrashPoints for SimCrash {
    fn crash_here(&mut self, point: CrashPoint, node: &str) -> bool {
        let now = self.world.now_ms();
        let Some(decision) = self.world.plan.lock().expect("plan lock").fire(FaultKind::ExecutorCrash, now) else {
            return false;
        };
        self.world.record_fault(decision, FaultKind::ExecutorCrash, Some(node), format!("{point:?}"));
        true
    }
}

fn start(
    world: &Arc<World>,
    epoch: u64,
    incarnation: u32,
    inputs: mpsc::UnboundedReceiver<Input>,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
) -> tokio::task::JoinHandle<Exit> {
    // One connection per lane: connection ids say incarnation and lane.
    let protocols = super::servers::lane_protocols(&world.sc);
    let transports: Vec<_> = (0..protocols.len()).map(|lane| Net::connect(&world.net, incarnation * LANES_MAX + lane as u32)).collect();
    let ledger: SharedLedger = world.ledger.clone();
    let observer = SimObserver { world: world.clone(), epoch, incarnation };
    let runner = Runner::new(
        world.sc.executor.clone(),
        epoch,
        world.origin,
        super::servers::adapter(&world.sc, &protocols[0]),
        ledger,
        Box::new(observer),
        approvals,
        world.params.jitter_seed ^ u64::from(incarnation),
        u64::from(incarnation) * 1_000_000_000,
    )
    .with_crash_points(Box::new(SimCrash { world: world.clone() }));
    let runner = protocols[1..].iter().fold(runner, |r, p| r.with_lane(super::servers::adapter(&world.sc, p)));
    tokio::spawn(runner.run_lanes(transports, inputs))
}

/// Give the caller a fresh channel to the next incarnation; returns the old sender.
fn new_channel(world: &World) -> (mpsc::UnboundedSender<Input>, mpsc::UnboundedReceiver<Input>) {
    let (tx, rx) = mpsc::unbounded_channel();
    // An operator's retirement is standing configuration: the next incarnation hears it before
    // any submission queued for it.
    if let Some(id) = *world.retired.lock().expect("caller lock") {
        let _ = tx.send(Input::RetireAdapter(id));
    }
    let old = std::mem::replace(&mut *world.inputs.lock().expect("inputs lock"), tx);
    (old, rx)
}

pub(super) async fn supervise(world: Arc<World>, inputs: mpsc::UnboundedReceiver<Input>, approvals: mpsc::UnboundedSender<ApprovalRequest>) {
    let (mut epoch, mut incarnation) = (1u64, 1u32);
    let mut current = start(&world, epoch, incarnation, inputs, approvals.clone());
    let mut rollback_at = world.params.rollback_at_ms;
    for _ in 0..INCARNATIONS_MAX {
        let until = rollback_at.unwrap_or(u64::MAX / 4);
        let rollback = tokio::time::sleep_until(world.origin + Duration::from_millis(until));
        tokio::select! {
            biased;
            exit = &mut current => {
                let exit = match exit {
                    Ok(e) => e,
                    Err(e) => {
                        world.push(What::World { action: "executor_task_failed".into(), detail: e.to_string() });
                        return;
                    }
                };
                if matches!(exit, Exit::Shutdown | Exit::EventLimit) {
                    return;
                }
                world.push(What::World { action: "executor_down".into(), detail: format!("incarnation {incarnation}: {exit:?}") });
                for lane in 0..LANES_MAX {
                    world.net.lock().expect("net lock").disconnect(incarnation * LANES_MAX + lane);
                }
                let (_old, rx) = new_channel(&world);
                let [lo, hi] = world.sc.faults.restart_delay_ms;
                let delay = world.plan.lock().expect("plan lock").draw(lo, hi);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                incarnation += 1;
                world.push(What::World { action: "executor_restart".into(), detail: format!("incarnation {incarnation} epoch {epoch}") });
                current = start(&world, epoch, incarnation, rx, approvals.clone());
                caller::retry_after_restart(&world);
            }
            _ = rollback, if rollback_at.is_some() => {
                rollback_at = None;
                // One firing per item the new epoch takes over: the state each one was in.
                let in_flight: Vec<String> = world.ledger.lock().expect("ledger lock").in_flight().expect("in-memory ledger reads cannot fail").into_iter().map(|r| r.call_node_id).collect();
                if in_flight.is_empty() {
                    world.record_fault(0, FaultKind::Rollback, None, format!("epoch {} -> {}", epoch, epoch + 1));
                }
                for node in &in_flight {
                    world.record_fault(0, FaultKind::Rollback, Some(node), format!("epoch {} -> {}", epoch, epoch + 1));
                }
                let (old_tx, rx) = new_channel(&world);
                // The fence: from here the ledger refuses every write of the old epoch.
                epoch = world.ledger.lock().expect("ledger lock").bump_epoch().expect("in-memory ledger reads cannot fail");
                incarnation += 1;
                world.push(What::World { action: "rollback".into(), detail: format!("incarnation {incarnation} epoch {epoch} takes over") });
                let old = std::mem::replace(&mut current, start(&world, epoch, incarnation, rx, approvals.clone()));
                caller::retry_after_restart(&world);
                // The old incarnation lingers, then stops; its writes and replies are refused.
                let [lo, hi] = world.sc.faults.rollback_overlap_ms;
                let overlap = world.plan.lock().expect("plan lock").draw(lo, hi);
                let w = world.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(overlap)).await;
                    let _ = old_tx.send(Input::Shutdown);
                    let _ = old.await;
                    w.push(What::World { action: "old_epoch_stopped".into(), detail: String::new() });
                });
            }
        }
    }
    world.push(What::World { action: "incarnation_limit".into(), detail: INCARNATIONS_MAX.to_string() });
}

impl World {
    /// Record a fault firing with the executor state it met.
    pub fn record_fault(&self, decision: u64, fault: FaultKind, node: Option<&str>, detail: String) {
        self.push(crate::faults::fault_event(&self.ledger, decision, fault, node, detail));
    }
}
