//! Always: a task that ends after all, once its cancel was confirmed, is handed to a person. A
//! server that confirmed a cancel and then shows the task completed or failed (its work ran on:
//! the effect the caller cancelled may be real) leaves a CANCELLED receipt that no longer tells
//! the truth. The receipt stays (it is what downstream saw), and a person must be asked to undo
//! or confirm the effect: an effect reconciliation. Without one the flip is silently dropped.
//! `no_needless_effect_reconciliation` judges the converse (raised without cause).
//!
//! Required only where the executor surely could have raised it, all from the world:
//! - the shared ledger's write history: process P committed the node's CANCELLED receipt for
//!   task T (a commit P learnt of: its record is final from then on);
//! - the network: a frame showing T completed or failed reached P intact after that commit,
//!   and before the last call node settled (the world shuts the executor down only after that,
//!   and a process told to stop first reads what it has received);
//! - the server's truth: T's first terminal status was cancelled;
//! - the world's account of processes: P never stopped, crashed or was superseded by a newer
//!   epoch afterwards (a dead or fenced process can write nothing; such a series is not judged
//!   for that node, which makes this judge lenient, never wrong).
//!
//! The judged output is the final ledger's effect-reconciliation items.

use std::collections::BTreeSet;

use toolop::record::TerminalState;

use super::ledger_writes::writes;
use super::view::{arrivals, judge, store_facts, ExecId, View};
use super::Violation;
use crate::fake::truth::TaskStatus;
use crate::trace::{Shows, Trace, What, WorldAction, WriteOutcome};

pub const NAME: &str = "effect_reconciliation_raised";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let raised: BTreeSet<&str> = v
        .ledger
        .effect_reconciliations
        .iter()
        .map(|i| i.call_node_id.as_str())
        .collect();
    // The world shuts the executor down after the last node settled, never before.
    let Some(settled_ms) = store_facts(v.trace).values().map(|(t, _)| *t).max() else {
        return vec![];
    };
    // (node, task, process, commit time) of every CANCELLED receipt a process committed.
    let accepted: Vec<(&str, &str, ExecId, u64)> = writes(v.trace)
        .filter(|(_, w)| {
            w.receipt == Some(TerminalState::Cancelled)
                && matches!(w.outcome, WriteOutcome::Committed { .. })
        })
        .filter_map(|(t, w)| {
            let task = w.operation_id.as_deref()?;
            Some((w.node.as_str(), task, (w.epoch, w.incarnation), t))
        })
        .collect();
    let mut out = vec![];
    let mut reported = BTreeSet::new();
    for f in arrivals(v.trace) {
        let (Some(node), Some(at_ms)) = (f.node, f.arrives_at_ms) else {
            continue;
        };
        if !f.intact() || at_ms >= settled_ms || raised.contains(node) {
            continue;
        }
        let Some(Shows::Task { task, status, .. }) = f.shows else {
            continue;
        };
        if !matches!(status, TaskStatus::Completed | TaskStatus::Failed) {
            continue;
        }
        let cancelled_first = v
            .truth
            .tasks
            .get(task)
            .is_some_and(|t| t.terminal_status == Some(TaskStatus::Cancelled));
        if !cancelled_first {
            continue;
        }
        let Some(&(_, _, _, committed_ms)) = accepted
            .iter()
            .find(|(n, t, p, c)| *n == node && t == task && *p == f.exec && *c < at_ms)
        else {
            continue;
        };
        if ended_or_superseded(v.trace, f.exec) || !reported.insert(node) {
            continue;
        }
        out.push(Violation {
            checker: NAME,
            node: Some(node.to_string()),
            detail: format!(
                "epoch {} incarnation {} committed the CANCELLED receipt at {committed_ms} ms and at {at_ms} ms read the server show task {task} {} after all, yet no effect reconciliation was raised",
                f.exec.0,
                f.exec.1,
                status.as_str()
            ),
        });
    }
    out
}

/// Whether the world ever stopped process `exec`, saw its runner fail, or started a newer epoch.
fn ended_or_superseded(trace: &Trace, (epoch, inc): ExecId) -> bool {
    trace.events.iter().any(|e| match &e.what {
        What::World { action } => match action {
            WorldAction::ExecutorDown { incarnation, .. }
            | WorldAction::ReplicaStop { incarnation, .. }
            | WorldAction::WriteAfterCrash { incarnation, .. } => *incarnation == inc,
            WorldAction::OldEpochStopped { epoch: e } => *e == epoch,
            WorldAction::Rollback { epoch: e, .. }
            | WorldAction::ExecutorRestart { epoch: e, .. }
            | WorldAction::ReplicaStart { epoch: e, .. } => *e > epoch,
            WorldAction::ExecutorTaskFailed { .. } => true,
            WorldAction::IncarnationLimit { .. } => false,
        },
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::codec::ExchangeKind;
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{assert_clean, task_shows as shows, Tb, SETTLED};
    use crate::trace::{Dir, NetVerdict};
    use toolop::ledger::EffectItem;
    use toolop::record::LocalState;

    /// n1 cancelled (receipt committed at 3,040 by epoch 1 incarnation 1), n2 settles at
    /// 9,000; at `flip_ms` the server shows n1's task completed after all, to epoch 1
    /// incarnation 1, the frame's fate `verdict`.
    fn flip(flip_ms: u64, verdict: NetVerdict) -> Tb {
        flip_to(flip_ms, verdict, (1, 1))
    }

    /// As [`flip`], the frame going to process `reader`.
    fn flip_to(flip_ms: u64, verdict: NetVerdict, reader: ExecId) -> Tb {
        let mut b = Tb::new();
        b.cancel_path("n1", 0).happy_path("n2", 8_000);
        let mut w = build::write("n1", 1, 1, 2);
        w.state = LocalState::CancelledAccepted;
        w.receipt = Some(TerminalState::Cancelled);
        w.operation_id = Some("t-n1".into());
        b.at(3_040).push(build::ev(w));
        b.exec(reader.0, reader.1).at(flip_ms).net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Poll,
            verdict,
            Some(0),
            Some(shows("t-n1", TaskStatus::Completed)),
        );
        b
    }

    fn raise(b: &mut Tb) {
        b.ledger.effect_reconciliations.push(EffectItem {
            call_node_id: "n1".into(),
            operation_id: Some("t-n1".into()),
            reason: "server reported completed after the cancel was confirmed".into(),
            at_ms: 5_000,
        });
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = flip(5_000, NetVerdict::Deliver);
        raise(&mut b);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_flip_read_by_the_accepting_process_and_dropped_is_caught() {
        let v = check(&flip(5_000, NetVerdict::Deliver).build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n1"));
        assert!(
            v[0].detail
                .contains("at 5000 ms read the server show task t-n1 completed"),
            "{}",
            v[0].detail
        );
    }

    #[test]
    fn no_requirement_where_the_process_could_not_have_raised_it() {
        // The frame never arrived intact.
        assert_eq!(check(&flip(5_000, NetVerdict::Lost).build(SETTLED)), vec![]);
        let cut = NetVerdict::Truncated { to_bytes: 3 };
        assert_eq!(check(&flip(5_000, cut).build(SETTLED)), vec![]);
        // It arrived before the receipt was committed, or after the last node settled (the
        // executor may have been shut down by then).
        assert_eq!(
            check(&flip(3_000, NetVerdict::Deliver).build(SETTLED)),
            vec![]
        );
        assert_eq!(
            check(&flip(9_500, NetVerdict::Deliver).build(SETTLED)),
            vec![]
        );
        // Another process read it (its record may be stale: not judged here).
        let b = flip_to(5_000, NetVerdict::Deliver, (1, 2));
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // The reader crashed or a newer epoch took over.
        for action in [
            WorldAction::ExecutorDown {
                incarnation: 1,
                exit: "crashed".into(),
            },
            WorldAction::Rollback {
                incarnation: 2,
                epoch: 2,
            },
        ] {
            let mut b = flip(5_000, NetVerdict::Deliver);
            b.at(5_001).push(What::World { action });
            assert_eq!(check(&b.build(SETTLED)), vec![]);
        }
        // The server had completed the task before any cancel: a plain late status.
        let mut b = flip(5_000, NetVerdict::Deliver);
        b.truth.tasks.get_mut("t-n1").unwrap().terminal_status = Some(TaskStatus::Completed);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }
}
