//! The `second_executor` fault: a second executor process runs beside the current one on the
//! same ledger and under the same epoch, as a replica behind a load balancer would, or a
//! restarted executor that overlaps its predecessor. It resumes every call node in flight (so
//! two processes step, commit and send for the same node), and the caller's submissions and
//! cancels are retried at it (a retry routed to the other replica). It runs for
//! `faults.second_executor_ms`, then shuts down.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::runner::{ApprovalRequest, Exit, Input};

use super::executor::{exit_name, start, LANES_MAX};
use super::World;
use crate::series::faults::FaultKind;
use crate::trace::{CallerAction, FaultDetail, What, WorldAction};

/// How often the world considers starting a replica (one decision each time, while call nodes
/// are in flight and no replica runs).
const ASK_EVERY_MS: u64 = 10_000;

/// Replicas one series may see: a bound on the loop.
const REPLICAS_MAX: u32 = 4;

/// Replica incarnations are numbered from here, clear of the supervisor's (at most 500).
const FIRST_INCARNATION: u32 = 1_000;

/// Replicas a shutdown waits for before the world moves on.
const SHUTDOWN_WAIT_MS: u64 = 5_000;

/// How often the end of a series looks whether the replica it stopped is gone.
const END_LOOK_EVERY_MS: u64 = 100;

/// The series ends: no replica starts from now on, and a running one is told to stop (its
/// life then ends as after its drawn lifetime: a clean stop, or killed past the wait). Returns
/// whether one was running.
pub(super) fn stop_at_end(world: &World) -> bool {
    world
        .ending
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let inputs = world.replica_inputs.lock().expect("inputs lock");
    if let Some(tx) = inputs.as_ref() {
        let _ = tx.send(Input::Shutdown);
    }
    inputs.is_some()
}

/// Wait until the replica told to stop has recorded its stop, at most the longest pause it may
/// be frozen in, its own shutdown wait and a margin.
pub(super) async fn wait_stopped(world: &World) {
    let wait_ms = world.sc.faults.process_pause_ms[1] + SHUTDOWN_WAIT_MS + 1_000;
    for _ in 0..wait_ms / END_LOOK_EVERY_MS {
        if world.replica_inputs.lock().expect("inputs lock").is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(END_LOOK_EVERY_MS)).await;
    }
}

pub(super) async fn run(world: Arc<World>, approvals: mpsc::UnboundedSender<ApprovalRequest>) {
    let asks_max = world.sc.faults.safety_window_ms / ASK_EVERY_MS + 1;
    let mut started = 0;
    for _ in 0..asks_max {
        if started >= REPLICAS_MAX {
            return;
        }
        tokio::time::sleep(Duration::from_millis(ASK_EVERY_MS)).await;
        if world.ending.load(std::sync::atomic::Ordering::SeqCst)
            || world.plan.lock().expect("plan lock").healed(world.now_ms())
        {
            return;
        }
        let in_flight = world.trace.lock().expect("trace lock").in_flight();
        if in_flight.is_empty() {
            continue;
        }
        let Some(decision) = world.ask(0, FaultKind::SecondExecutor, None) else {
            continue;
        };
        let incarnation = FIRST_INCARNATION + started;
        started += 1;
        let epoch = world
            .ledger
            .lock()
            .expect("ledger lock")
            .current_epoch()
            .expect("the world's ledger is in memory: reads cannot fail");
        for node in &in_flight {
            world.record_fault(
                decision,
                FaultKind::SecondExecutor,
                Some(node),
                FaultDetail::SecondExecutor { incarnation, epoch },
            );
        }
        run_one(&world, epoch, incarnation, approvals.clone()).await;
    }
}

/// One replica's life: start, the caller's retries, its drawn lifetime, shutdown.
async fn run_one(
    world: &Arc<World>,
    epoch: u64,
    incarnation: u32,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    world.push(What::World {
        action: WorldAction::ReplicaStart { incarnation, epoch },
    });
    if let Some(id) = *world.retired.lock().expect("caller lock") {
        let _ = tx.send(Input::RetireAdapter(id));
    }
    let mut process = start(world, epoch, incarnation, rx, approvals);
    *world.replica_inputs.lock().expect("inputs lock") = Some(tx.clone());
    // The caller's retries, routed to the replica: every submission (a node the ledger holds
    // already is the ledger's; the replica must not make a second operation of it) and every
    // cancel.
    let submitted = world.submitted.lock().expect("caller lock").clone();
    let cancelled = world.cancelled.lock().expect("caller lock").clone();
    for node in submitted {
        world.push(What::Caller {
            action: CallerAction::Resubmit,
            node: node.id.clone(),
        });
        let _ = tx.send(Input::Submit(node));
    }
    for node in cancelled {
        // As after a restart: only a cancel the ledger does not show yet is retried, a node
        // without a record included (clicked while every process was down: mcp_faults seed
        // 4621, a cancel that no process ever took).
        if !super::caller::cancel_unrecorded(world, &node) {
            continue;
        }
        world.push(What::Caller {
            action: CallerAction::Recancel,
            node: node.clone(),
        });
        let _ = tx.send(Input::Cancel { node });
    }
    let [lo, hi] = world.sc.faults.second_executor_ms;
    let life_ms = world.plan.lock().expect("plan lock").draw(lo, hi);
    let exit = tokio::select! {
        biased;
        exit = &mut process => Some(exit),
        _ = tokio::time::sleep(Duration::from_millis(life_ms)) => None,
    };
    let mut killed = false;
    let exit = match exit {
        Some(exit) => exit,
        None => {
            let _ = tx.send(Input::Shutdown);
            match tokio::time::timeout(Duration::from_millis(SHUTDOWN_WAIT_MS), &mut process).await
            {
                Ok(exit) => exit,
                Err(_) => {
                    // Still busy (its commits held it): killed, as an orchestrator kills a
                    // process that ignores its stop, and recorded as such, not as a clean stop
                    // (mcp_ext_replicas seed 229: a replica busy in slow commits held two
                    // submissions' replies unread when the wait ran out).
                    process.abort();
                    killed = true;
                    Ok(Exit::Shutdown)
                }
            }
        }
    };
    *world.replica_inputs.lock().expect("inputs lock") = None;
    let exit = match exit {
        Ok(_) if killed => format!("killed: no clean stop within {SHUTDOWN_WAIT_MS} ms"),
        Ok(e) => exit_name(&e),
        Err(e) => format!("task failed: {e}"),
    };
    for lane in 0..LANES_MAX {
        world
            .net
            .lock()
            .expect("net lock")
            .disconnect(incarnation * LANES_MAX + lane);
    }
    world.push(What::World {
        action: WorldAction::ReplicaStop {
            incarnation,
            exit,
            killed,
        },
    });
}
