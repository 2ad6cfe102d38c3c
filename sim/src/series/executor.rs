//! The executor's life in a series: start, crash at fail points, reconnect after a dropped
//! connection, restart from the ledger alone, and roll back to a new epoch while the old
//! incarnation lingers (its late replies must be rejected).

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::runner::{
    ApprovalRequest, CrashPoint, CrashPoints, Exit, Input, Observation, Observer, Runner,
    SharedLedger,
};

use super::ledger::{CommitDelayCell, ProcessLedger, SimCommitDelay};
use super::{caller, World};
use crate::series::faults::FaultKind;
use crate::series::net::Net;
use crate::trace::{FaultDetail, What, WorldAction};

/// Lanes a connection id can name: connection ids are `incarnation * LANES_MAX + lane`.
pub(super) const LANES_MAX: u32 = 10;

/// Restarts a series may see before the world gives up on the executor (a bound on the loop).
const INCARNATIONS_MAX: u32 = 500;

/// Trace observer of one executor process.
struct SimObserver {
    world: Arc<World>,
    epoch: u64,
    incarnation: u32,
}

impl Observer for SimObserver {
    fn observe(&mut self, now_ms: u64, obs: Observation) {
        // Whatever the executor says, the world looks at the store first: a receipt or a
        // hand-off a commit just wrote is recorded before the report of it (or of a send).
        if let Some(node) = observed_node(&obs) {
            self.world.watch_store(node);
        }
        self.world.trace.lock().expect("trace lock").push(
            now_ms,
            What::Exec {
                epoch: self.epoch,
                incarnation: self.incarnation,
                obs,
            },
        );
    }
}

/// Crash fail points, decided by the series' fault plan. A process that crashes is dead from
/// that moment: its ledger front refuses what it writes after (`ProcessLedger::dead`).
struct SimCrash {
    world: Arc<World>,
    held: CommitDelayCell,
}

impl CrashPoints for SimCrash {
    fn crash_here(&mut self, point: CrashPoint, node: &str) -> bool {
        let crashed = self
            .world
            .fire(
                0,
                FaultKind::ExecutorCrash,
                Some(node),
                FaultDetail::Crash { point },
            )
            .is_some();
        if crashed {
            self.held.lock().expect("delay lock").crashed = true;
        }
        crashed
    }
}

/// Start one executor process of `epoch` on the world's shared ledger (through its own
/// recording front) and its own connections.
pub(super) fn start(
    world: &Arc<World>,
    epoch: u64,
    incarnation: u32,
    inputs: mpsc::UnboundedReceiver<Input>,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
) -> tokio::task::JoinHandle<Exit> {
    // One connection per lane: connection ids say incarnation and lane.
    let protocols = world.sc.lanes();
    let transports: Vec<_> = (0..protocols.len())
        .map(|lane| {
            Net::connect(
                &world.net,
                incarnation * LANES_MAX + lane as u32,
                lane,
                epoch,
                incarnation,
            )
        })
        .collect();
    let held = CommitDelayCell::default();
    let ledger: SharedLedger = Arc::new(Mutex::new(ProcessLedger::new(
        world.clone(),
        epoch,
        incarnation,
        held.clone(),
    )));
    let observer = SimObserver {
        world: world.clone(),
        epoch,
        incarnation,
    };
    let runner = Runner::new(
        world.sc.executor.clone(),
        epoch,
        world.origin,
        super::lanes::adapter(&world.sc, protocols[0]),
        ledger,
        Box::new(observer),
        approvals,
        world.params.jitter_seed ^ u64::from(incarnation),
        u64::from(incarnation) * 1_000_000_000,
    )
    .with_crash_points(Box::new(SimCrash {
        world: world.clone(),
        held: held.clone(),
    }))
    .with_commit_delay(Box::new(SimCommitDelay {
        world: world.clone(),
        epoch,
        incarnation,
        held,
    }));
    let runner = protocols[1..].iter().fold(runner, |r, p| {
        r.with_lane(super::lanes::adapter(&world.sc, *p))
    });
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

pub(super) async fn supervise(
    world: Arc<World>,
    inputs: mpsc::UnboundedReceiver<Input>,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
) {
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
                        world.push(What::World { action: WorldAction::ExecutorTaskFailed { error: e.to_string() } });
                        return;
                    }
                };
                if matches!(exit, Exit::Shutdown | Exit::EventLimit) {
                    return;
                }
                world.push(What::World { action: WorldAction::ExecutorDown { incarnation, exit: exit_name(&exit) } });
                for lane in 0..LANES_MAX {
                    world.net.lock().expect("net lock").disconnect(incarnation * LANES_MAX + lane);
                }
                let (_old, rx) = new_channel(&world);
                *world.primary_down.lock().expect("inputs lock") = true;
                let [lo, hi] = world.sc.faults.restart_delay_ms;
                let delay = world.plan.lock().expect("plan lock").draw(lo, hi);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                incarnation += 1;
                world.push(What::World { action: WorldAction::ExecutorRestart { incarnation, epoch } });
                current = start(&world, epoch, incarnation, rx, approvals.clone());
                *world.primary_down.lock().expect("inputs lock") = false;
                caller::retry_after_restart(&world);
            }
            _ = rollback, if rollback_at.is_some() => {
                rollback_at = None;
                // One firing per item the new epoch takes over (the trace shows it in flight): the
                // state each one was in.
                let in_flight = world.trace.lock().expect("trace lock").in_flight();
                let epochs = FaultDetail::Epochs { from: epoch, to: epoch + 1 };
                if in_flight.is_empty() {
                    world.record_fault(0, FaultKind::Rollback, None, epochs.clone());
                }
                for node in &in_flight {
                    world.record_fault(0, FaultKind::Rollback, Some(node), epochs.clone());
                }
                let (old_tx, rx) = new_channel(&world);
                // The fence: from here the ledger refuses every write of the old epoch.
                epoch = world.ledger.lock().expect("ledger lock").bump_epoch().expect("in-memory ledger reads cannot fail");
                incarnation += 1;
                world.push(What::World { action: WorldAction::Rollback { incarnation, epoch } });
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
                    w.push(What::World { action: WorldAction::OldEpochStopped { epoch: epoch - 1 } });
                });
            }
        }
    }
    world.push(What::World {
        action: WorldAction::IncarnationLimit {
            limit: INCARNATIONS_MAX,
        },
    });
}

/// How an executor process ended, in words.
pub(super) fn exit_name(exit: &Exit) -> String {
    match exit {
        Exit::Crashed(CrashPoint::AfterCommitBeforeSend) => {
            "crashed after a commit, before its sends".into()
        }
        Exit::Crashed(CrashPoint::AfterReplyBeforeCommit) => {
            "crashed after a reply, before its commit".into()
        }
        Exit::Shutdown => "shut down".into(),
        Exit::Disconnected => "connection dropped".into(),
        Exit::HandshakeFailed(reason) => format!("handshake failed: {reason}"),
        Exit::EventLimit => "event limit".into(),
        Exit::LedgerFailed(reason) => format!("ledger failed: {reason}"),
    }
}

/// The call node an observation is about, if it is about one.
fn observed_node(obs: &Observation) -> Option<&str> {
    match obs {
        Observation::Sent { node, .. }
        | Observation::Throttled { node, .. }
        | Observation::Received { node, .. }
        | Observation::Lost { node, .. }
        | Observation::Moved { node, .. }
        | Observation::Stayed { node, .. }
        | Observation::Rejected { node, .. }
        | Observation::Refused { node, .. }
        | Observation::LedgerRefused { node, .. }
        | Observation::Accepted { node, .. }
        | Observation::Reconcile { node, .. }
        | Observation::EffectReconciliation { node, .. }
        | Observation::ApprovalAsked { node, .. }
        | Observation::ApprovalRefused { node, .. }
        | Observation::HintIgnored { node, .. }
        | Observation::OutputChecked { node, .. }
        | Observation::CallRejected { node, .. }
        | Observation::DuplicateCallNode { node }
        | Observation::SettledElsewhere { node, .. }
        | Observation::Superseded { node, .. }
        | Observation::SubmissionLeftToOther { node, .. }
        | Observation::CommitConflict { node, .. }
        | Observation::Fenced { node, .. }
        | Observation::Stalled { node, .. }
        | Observation::CancelRequestPicked { node, .. } => Some(node),
        Observation::Started { .. }
        | Observation::Negotiated { .. }
        | Observation::HandshakeFailed { .. }
        | Observation::AdapterRetired { .. }
        | Observation::AdapterDrained { .. }
        | Observation::ServerRequestAnswered { .. }
        | Observation::Unrouted { .. }
        | Observation::Malformed { .. }
        | Observation::LedgerFailed { .. }
        | Observation::Exit { .. } => None,
    }
}
