//! A timeline a person can follow: time, call node, event, state change, fault fired.

use toolop::runner::Observation;

use crate::trace::{Trace, What};

fn secs(t_ms: u64) -> String {
    format!("{:>9.3}s", t_ms as f64 / 1000.0)
}

/// One line per meaningful event; network frames only with `verbose`.
pub fn render(trace: &Trace, verbose: bool) -> String {
    let mut out = String::new();
    for e in &trace.events {
        let line = match &e.what {
            What::Begin { faults, max_qps, .. } => Some(format!("-      begin (max_qps {max_qps}; faults: {faults})")),
            What::Fault { fault, node, state, detail, .. } => Some(format!(
                "{:<6} FAULT {} (executor state {}){}",
                node.as_deref().unwrap_or("-"),
                fault.name(),
                state.map(|s| s.name()).unwrap_or("-"),
                if detail.is_empty() { String::new() } else { format!(": {detail}") }
            )),
            What::Caller { action, node } => Some(format!("{node:<6} caller {action}")),
            What::Approval { node, round, action } => Some(format!("{node:<6} approval round {round}: {action}")),
            What::World { action, detail } => Some(format!("-      WORLD {action} {detail}")),
            What::End { reason } => Some(format!("-      end: {reason}")),
            What::Final { ledger, .. } => Some(format!(
                "-      final: {} receipts, {} outbox entries, {} in manual reconciliation",
                ledger.receipts.len(),
                ledger.outbox.len(),
                ledger.reconciliation_queue.len()
            )),
            What::Net { dir, request_id, verdict, .. } if verbose => Some(format!("-      net {dir:?} {request_id:?} {verdict}")),
            What::Net { .. } => None,
            What::Exec { incarnation, obs, .. } => exec_line(*incarnation, obs, verbose),
        };
        if let Some(l) = line {
            out.push_str(&format!("{} {l}\n", secs(e.t_ms)));
        }
    }
    out
}

fn exec_line(inc: u32, obs: &Observation, verbose: bool) -> Option<String> {
    Some(match obs {
        Observation::Moved { node, event, path, .. } => {
            let p: Vec<&str> = path.iter().map(|s| s.name()).collect();
            format!("{node:<6} [{inc}] {event}: {}", p.join(" -> "))
        }
        Observation::Rejected { node, event, reason } => format!("{node:<6} [{inc}] {event} rejected: {reason}"),
        Observation::Refused { node, event, from, to } => format!("{node:<6} [{inc}] {event} REFUSED {from} -> {to}"),
        Observation::Accepted { node, terminal, .. } => format!("{node:<6} [{inc}] RECEIPT {}", terminal.name()),
        Observation::Reconcile { node, reason } => format!("{node:<6} [{inc}] to manual reconciliation: {reason}"),
        Observation::EffectReconciliation { node, reason } => format!("{node:<6} [{inc}] effect reconciliation: {reason}"),
        Observation::LedgerRefused { node, error } => format!("{node:<6} [{inc}] ledger refused: {error}"),
        Observation::Sent { node, kind, seq, .. } if verbose => format!("{node:<6} [{inc}] sent {kind} #{seq}"),
        Observation::Received { node, kind, seq, reply, .. } if verbose => format!("{node:<6} [{inc}] got {reply} for {kind} #{seq}"),
        Observation::Lost { node, kind, seq } => format!("{node:<6} [{inc}] no answer to {kind} #{seq}"),
        Observation::Started { epoch, resumed } => format!("-      [{inc}] executor started, epoch {epoch}, resumed {resumed}"),
        Observation::Exit { reason } => format!("-      [{inc}] executor exit: {reason}"),
        Observation::HandshakeFailed { reason } => format!("-      [{inc}] handshake failed: {reason}"),
        _ => return None,
    })
}
