//! A timeline a person can follow: time, call node, event, state change, fault fired.

use toolop::runner::Observation;

use crate::trace::{Dir, FaultDetail, NetVerdict, StoreFact, Trace, What, WorldAction};

fn secs(t_ms: u64) -> String {
    format!("{:>9.3}s", t_ms as f64 / 1000.0)
}

/// What the timeline's columns and marks mean; `replay` prints it above the timeline.
pub const LEGEND: &str = "\
legend: TIME (simulated s)  NODE (call node, or - for the whole world)  EVENT
  [n]            executor incarnation n (a restart or rollback starts a new one)
  a -> b         the executor moved the node's local state from a to b
  RECEIPT        the executor accepted a terminal outcome (at most one per node)
  REFUSED        the state machine refused a transition (an event that came too late)
  FAULT f        the world injected fault f; (executor state s) is the node's state then
  ask/decision   (schedules) the n-th time the world asked whether f fires, and the draw
  crash points   named where the executor dies (e.g. after_ledger_write)
  WORLD          the world acting: executor down, restart, rollback
  net -> / <-    (--verbose) a frame to the server / to the executor, and its fate
";

/// One line per meaningful event; network frames only with `verbose`.
pub fn render(trace: &Trace, verbose: bool) -> String {
    render_for(trace, verbose, None)
}

/// [`render`], keeping only the lines of call node `node` (and the world's own lines) when
/// given.
pub fn render_for(trace: &Trace, verbose: bool, node: Option<&str>) -> String {
    let mut out = String::new();
    for e in &trace.events {
        let line = match &e.what {
            What::Begin {
                faults, max_qps, ..
            } => Some(format!(
                "-      begin (max_qps {max_qps}; faults: {faults})"
            )),
            What::Fault {
                fault,
                node,
                state,
                detail,
                ..
            } => Some(format!(
                "{:<6} FAULT {} (executor state {}){}",
                node.as_deref().unwrap_or("-"),
                fault.name(),
                state.map(|s| s.name()).unwrap_or("-"),
                fault_detail(detail)
            )),
            What::Caller { action, node } => Some(format!("{node:<6} caller {}", action.name())),
            What::Approval {
                node,
                round,
                question,
                action,
            } => Some(format!(
                "{node:<6} approval round {round}{}: {}",
                question
                    .as_ref()
                    .map(|q| format!(" (server round {} of {})", q.round, q.task))
                    .unwrap_or_default(),
                action.name()
            )),
            What::Store { node, fact } => Some(match fact {
                StoreFact::Receipt { terminal } => {
                    format!("{node:<6} store: receipt {}", terminal.name())
                }
                StoreFact::Reconcile => format!("{node:<6} store: handed to manual reconciliation"),
            }),
            What::World { action } => Some(format!("-      WORLD {}", world_action(action))),
            What::Ledger { write } if verbose => Some(format!(
                "{:<6} ledger write by epoch {} incarnation {} at version {} (last read {}): {}",
                write.node,
                write.epoch,
                write.incarnation,
                write.expected_version,
                write
                    .read_version
                    .map_or_else(|| "none".to_string(), |v| v.to_string()),
                match &write.outcome {
                    crate::trace::WriteOutcome::Committed { version } =>
                        format!("committed v{version}"),
                    crate::trace::WriteOutcome::ReplyLost { version } => {
                        format!("committed v{version}, reply lost")
                    }
                    crate::trace::WriteOutcome::Refused { error } => format!("refused: {error}"),
                }
            )),
            What::End { reason } => Some(format!("-      end: {reason}")),
            What::Final { ledger, .. } => Some(format!(
                "-      final: {} receipts, {} outbox entries, {} in manual reconciliation",
                ledger.receipts.len(),
                ledger.outbox.len(),
                ledger.reconciliation_queue.len()
            )),
            What::Net {
                dir,
                exchange,
                node,
                incarnation,
                frame,
                request_id,
                bytes,
                verdict,
                shows,
                ..
            } if verbose => Some(format!(
                "{:<6} net [{incarnation}] frame {frame} {} {} #{} {bytes} bytes{}: {}",
                node.as_deref().unwrap_or("-"),
                match dir {
                    Dir::ToServer => "->",
                    Dir::ToExecutor => "<-",
                },
                exchange.name(),
                request_id.map_or_else(|| "-".to_string(), |r| r.to_string()),
                // The one answer whose bytes say nothing a reader could tell apart.
                if matches!(shows.as_deref(), Some(crate::trace::Shows::SessionGone)) {
                    " (HTTP 404: session gone)"
                } else {
                    ""
                },
                net_verdict(verdict)
            )),
            What::Insert {
                node,
                epoch,
                incarnation,
                version,
            } if verbose => Some(format!(
                "{node:<6} ledger insert by epoch {epoch} incarnation {incarnation}: v{version}"
            )),
            What::Net { .. } | What::Ledger { .. } | What::Insert { .. } => None,
            What::Exec {
                incarnation, obs, ..
            } => exec_line(*incarnation, obs, verbose),
        };
        // Every line starts with its node column ("-" for the world), so a filter reads it.
        let keep = |l: &str| {
            node.is_none_or(
                |n| matches!(l.split_whitespace().next(), Some(c) if c == n || c == "-"),
            )
        };
        if let Some(l) = line.filter(|l| keep(l)) {
            out.push_str(&format!("{} {l}\n", secs(e.t_ms)));
        }
    }
    out
}

fn exec_line(inc: u32, obs: &Observation, verbose: bool) -> Option<String> {
    Some(match obs {
        Observation::Moved {
            node, event, path, ..
        } => {
            let p: Vec<&str> = path.iter().map(|s| s.name()).collect();
            format!("{node:<6} [{inc}] {event}: {}", p.join(" -> "))
        }
        Observation::Rejected {
            node,
            event,
            reason,
        } => format!("{node:<6} [{inc}] {event} rejected: {}", reason.name()),
        Observation::Refused {
            node,
            event,
            from,
            to,
        } => format!("{node:<6} [{inc}] {event} REFUSED {from} -> {to}"),
        Observation::Accepted { node, terminal, .. } => {
            format!("{node:<6} [{inc}] RECEIPT {}", terminal.name())
        }
        Observation::Reconcile { node, reason } => {
            format!("{node:<6} [{inc}] to manual reconciliation: {reason}")
        }
        Observation::EffectReconciliation { node, reason } => {
            format!("{node:<6} [{inc}] effect reconciliation: {reason}")
        }
        Observation::LedgerRefused { node, error } => {
            format!("{node:<6} [{inc}] ledger refused: {error}")
        }
        Observation::Sent {
            node, kind, seq, ..
        } if verbose => format!("{node:<6} [{inc}] sent {kind} #{seq}"),
        Observation::Received {
            node,
            kind,
            seq,
            reply,
            ..
        } if verbose => format!("{node:<6} [{inc}] got {reply} for {kind} #{seq}"),
        Observation::Lost { node, kind, seq } => {
            format!("{node:<6} [{inc}] no answer to {kind} #{seq}")
        }
        Observation::Started { epoch, resumed } => {
            format!("-      [{inc}] executor started, epoch {epoch}, resumed {resumed}")
        }
        Observation::Exit { reason } => format!("-      [{inc}] executor exit: {reason}"),
        Observation::HandshakeFailed { reason } => {
            format!("-      [{inc}] handshake failed: {reason}")
        }
        _ => return None,
    })
}

fn fault_detail(d: &FaultDetail) -> String {
    match d {
        FaultDetail::None => String::new(),
        FaultDetail::Exchange { exchange } | FaultDetail::Connection { exchange, .. } => {
            format!(": {}", exchange.name())
        }
        FaultDetail::Request { exchange, frame } => {
            format!(": {} (frame {frame})", exchange.name())
        }
        FaultDetail::Replica {
            exchange,
            status,
            retry_after_ms,
        } => match retry_after_ms {
            Some(ms) => format!(
                ": {} answered {status}, retry after {ms} ms",
                exchange.name()
            ),
            None => format!(": {} answered {status}", exchange.name()),
        },
        FaultDetail::Crash { point } => format!(
            ": {}",
            serde_json::to_value(point)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        ),
        FaultDetail::Epochs { from, to } => format!(": epoch {from} -> {to}"),
        FaultDetail::Round { round } => format!(": round {round} answer sent again"),
        FaultDetail::StatusFlip { task, to } => {
            format!(": task {task} cancelled, then {}", to.as_str())
        }
        FaultDetail::Task { task } => format!(": task {task}"),
        FaultDetail::CommitDelay {
            delay_ms,
            incarnation,
            ..
        } => format!(": [{incarnation}]'s commit takes {delay_ms} ms"),
        FaultDetail::Pause {
            delay_ms,
            incarnation,
            ..
        } => format!(": [{incarnation}] freezes for {delay_ms} ms at a commit"),
        FaultDetail::SecondExecutor { incarnation, epoch } => {
            format!(": replica incarnation {incarnation}, epoch {epoch}")
        }
        FaultDetail::Restart { frame, tasks, cut } => format!(
            ": at frame {frame}, {} task(s) lost, {} frame(s) cut on their way",
            tasks.len(),
            cut.len()
        ),
    }
}

fn world_action(a: &WorldAction) -> String {
    match a {
        WorldAction::ExecutorDown { incarnation, exit } => {
            format!("executor incarnation {incarnation} down: {exit}")
        }
        WorldAction::ExecutorRestart { incarnation, epoch } => {
            format!("executor restart: incarnation {incarnation}, epoch {epoch}")
        }
        WorldAction::Rollback { incarnation, epoch } => {
            format!("rollback: incarnation {incarnation}, epoch {epoch} takes over")
        }
        WorldAction::OldEpochStopped { epoch } => format!("executor of epoch {epoch} stopped"),
        WorldAction::ExecutorTaskFailed { error } => format!("executor task failed: {error}"),
        WorldAction::IncarnationLimit { limit } => format!("incarnation limit {limit} reached"),
        WorldAction::ReplicaStart { incarnation, epoch } => {
            format!("second executor: incarnation {incarnation}, epoch {epoch}, same ledger")
        }
        WorldAction::ReplicaStop {
            incarnation, exit, ..
        } => {
            format!("second executor incarnation {incarnation} stopped: {exit}")
        }
        WorldAction::WriteAfterCrash {
            incarnation,
            write,
            node,
        } => format!(
            "executor incarnation {incarnation} tried a ledger {write}{} after its crash (refused: a dead process writes nothing)",
            node.as_deref().map(|n| format!(" of {n}")).unwrap_or_default()
        ),
    }
}

fn net_verdict(v: &NetVerdict) -> String {
    match v {
        NetVerdict::Deliver => "deliver".into(),
        NetVerdict::Lost => "lost".into(),
        NetVerdict::Replica {
            status,
            retry_after_ms: Some(ms),
        } => format!("replica {status}, retry after {ms} ms"),
        NetVerdict::Replica {
            status,
            retry_after_ms: None,
        } => format!("replica {status}"),
        NetVerdict::Held { extra_ms } => format!("held +{extra_ms} ms"),
        NetVerdict::Duplicated { after_ms } => format!("delivered, and again {after_ms} ms later"),
        NetVerdict::TaskIdRewritten { to } => format!("task id rewritten to {to}"),
        NetVerdict::LastBlockDropped => "last content block dropped".into(),
        NetVerdict::Truncated { to_bytes } => format!("truncated to {to_bytes} bytes"),
        NetVerdict::BodyNamesOtherRequest => "body names another request".into(),
        NetVerdict::LateDuplicate => "late duplicate".into(),
        NetVerdict::ToOldEpoch => "copy to an executor of an older epoch".into(),
    }
}
