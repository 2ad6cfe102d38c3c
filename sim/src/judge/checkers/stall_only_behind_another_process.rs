//! Always: the runner's stall watch (a non-final call node that nothing of the process covers,
//! no request in flight, no send queued, no timer, resumed as after a restart) rescues a node
//! only because another process of the same execution epoch drove it: that process wrote the
//! node's record, or inserted it (a write or insert the world's ledger saw land), while the
//! rescuer was alive. That is the one case the watch exists for (two executors on one epoch; `src/runner/stall.rs`). A rescue
//! with no such writer means the core left a node with nothing armed: a gap the watch would hide
//! behind a delay of `request_timeout_ms`, which no liveness bound notices.
//!
//! The rescue is the executor's confession (its `stalled` observation): it may convict, never
//! acquit. The excuse is the world's: the writes the shared ledger recorded, by writer.

use std::collections::BTreeMap;

use toolop::record::LocalState;
use toolop::runner::Observation;

use super::ledger_writes::landed;
use super::view::{judge, observations, ExecId, View};
use super::Violation;
use crate::trace::{Trace, What};

pub const NAME: &str = "stall_only_behind_another_process";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let events = &v.trace.events;
    // When the world first saw each process: its first report or its first write.
    let mut born: BTreeMap<ExecId, u64> = BTreeMap::new();
    for e in events {
        let id = match &e.what {
            What::Exec {
                epoch, incarnation, ..
            } => (*epoch, *incarnation),
            What::Ledger { write } => (write.epoch, write.incarnation),
            _ => continue,
        };
        born.entry(id).or_insert(e.t_ms);
    }
    let mut out = vec![];
    for (t, (epoch, incarnation), obs) in observations(v.trace) {
        let Observation::Stalled { node, state } = obs else {
            continue;
        };
        let from_ms = born.get(&(epoch, incarnation)).copied().unwrap_or(0);
        let by_other = |n: &str, e: u64, i: u32, at_ms: u64| {
            n == node && e == epoch && i != incarnation && (from_ms..=t).contains(&at_ms)
        };
        // A write, or the insert of a call another process took in (and then left: stopped
        // before its first commit landed, mcp_ext_replicas seed 52): the rescuer's duplicate
        // call is watched for exactly that.
        let driven_by_other = landed(v.trace)
            .any(|(w_ms, w)| by_other(&w.node, w.epoch, w.incarnation, w_ms))
            || v.trace.events.iter().any(|e| match &e.what {
                What::Insert {
                    node: n,
                    epoch: ep,
                    incarnation: i,
                    ..
                } => by_other(n, *ep, *i, e.t_ms),
                _ => false,
            });
        // Or the record, still submitting, holds another process's submission: the rescuer
        // left it to that process (`src/runner/beat.rs`) until it went quiet, whoever wrote
        // the record meanwhile (a cancel click, mcp_ext_replicas seed 341).
        let held_for_other = submission_of(v, node, t).is_some_and(|(e, i, state)| {
            e == epoch && i != incarnation && state == LocalState::Submitting
        });
        if !driven_by_other && !held_for_other {
            out.push(Violation {
                checker: NAME,
                node: Some(node.clone()),
                detail: format!(
                    "at {t} ms executor epoch {epoch} incarnation {incarnation} found the node in {state} with nothing armed and resumed it, yet no other process of its epoch wrote the node's record while it ran: the core left the node uncovered"
                ),
            });
        }
    }
    out
}

/// Whose submission `node`'s record holds at `t_ms`: the process of the newest landed write
/// that raised its submission count, and the state of the newest landed write.
fn submission_of(v: &View, node: &str, t_ms: u64) -> Option<(u64, u32, LocalState)> {
    let mut sent_by = None;
    let mut last: Option<&crate::trace::LedgerWrite> = None;
    for (_, w) in landed(v.trace).filter(|(w_ms, w)| *w_ms <= t_ms && w.node == node) {
        if w.submit_attempts > last.map_or(0, |l| l.submit_attempts) {
            sent_by = Some((w.epoch, w.incarnation));
        }
        last = Some(w);
    }
    let (epoch, incarnation) = sent_by?;
    Some((epoch, incarnation, last?.state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::WriteOutcome;

    fn stalled(b: &mut Tb, node: &str) {
        b.obs(Observation::Stalled {
            node: node.into(),
            state: "WORKING",
        });
    }

    fn write_by(b: &mut Tb, node: &str, epoch: u64, incarnation: u32, outcome: WriteOutcome) {
        let mut w = build::write(node, epoch, incarnation, 3);
        w.outcome = outcome;
        b.push(build::ev(w));
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_rescue_with_no_other_writer_is_a_core_gap() {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        b.at(20_000);
        stalled(&mut b, "n1");
        let got = check(&b.build(SETTLED));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].checker, NAME);
        assert_eq!(got[0].node.as_deref(), Some("n1"));
    }

    #[test]
    fn a_rescue_after_a_same_epoch_replica_drove_the_node_is_excused() {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        b.at(5_000);
        write_by(
            &mut b,
            "n1",
            1,
            1000,
            WriteOutcome::Committed { version: 4 },
        );
        b.at(20_000);
        stalled(&mut b, "n1");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    /// mcp_ext_replicas seed 52: a replica inserted the node for a call and was stopped before
    /// its first commit landed; the rescuer, which got the call again, took it up.
    #[test]
    fn a_rescue_of_a_node_another_process_inserted_and_left_is_excused() {
        let insert = |incarnation| What::Insert {
            node: "n1".into(),
            epoch: 1,
            incarnation,
            version: 1,
        };
        let mut b = Tb::new();
        b.happy_path("n2", 0);
        b.at(5_000);
        b.push(insert(1000));
        b.at(20_000);
        stalled(&mut b, "n1");
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Its own insert excuses nothing.
        let mut b = Tb::new();
        b.happy_path("n2", 0);
        b.at(5_000);
        b.push(insert(1));
        b.at(20_000);
        stalled(&mut b, "n1");
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    /// A submission held for its live sender from the rescuer's start (`src/runner/beat.rs`),
    /// committed before the rescuer was born; the rescuer wrote the record meanwhile (a cancel
    /// click) and sent nothing.
    #[test]
    fn a_rescue_of_a_submission_another_process_sent_is_excused() {
        let run = |sender: (u64, u32), rescuer_submitted: bool, state: LocalState| {
            let mut b = Tb::new();
            let mut w = build::write("n1", sender.0, sender.1, 1);
            w.state = LocalState::Submitting;
            b.push(build::ev(w));
            b.at(1_000);
            b.happy_path("n2", 1_000);
            b.at(2_000);
            let mut w = build::write("n1", 1, 1, 2);
            w.state = state;
            w.submit_attempts = if rescuer_submitted { 2 } else { 1 };
            b.push(build::ev(w));
            b.at(20_000);
            stalled(&mut b, "n1");
            check(&b.build(SETTLED))
        };
        assert_eq!(run((1, 1000), false, LocalState::Submitting), vec![]);
        // The rescuer's own submission since: the gap is its own.
        assert_eq!(run((1, 1000), true, LocalState::Submitting).len(), 1);
        // Another epoch's sender holds nothing of this one.
        assert_eq!(run((2, 1000), false, LocalState::Submitting).len(), 1);
        // Past submitting, the submission is nobody's to hold.
        assert_eq!(run((1, 1000), false, LocalState::Working).len(), 1);
    }

    #[test]
    fn writes_that_do_not_excuse_it() {
        for (epoch, incarnation, outcome, at_ms) in [
            // Another epoch's process: it would have fenced the rescuer, not left it uncovered.
            (2, 1, WriteOutcome::Committed { version: 4 }, 5_000),
            // The rescuer's own write.
            (1, 1, WriteOutcome::Committed { version: 4 }, 5_000),
            // A write the ledger refused changed nothing.
            (
                1,
                1000,
                WriteOutcome::Refused {
                    error: "conflict".into(),
                },
                5_000,
            ),
            // After the rescue: not why the node was quiet.
            (1, 1000, WriteOutcome::Committed { version: 4 }, 25_000),
        ] {
            let mut b = Tb::new();
            b.happy_path("n1", 0);
            b.at(at_ms);
            write_by(&mut b, "n1", epoch, incarnation, outcome);
            b.at(20_000);
            stalled(&mut b, "n1");
            let mut trace = b.build(SETTLED);
            trace.events.sort_by_key(|e| e.t_ms);
            assert_eq!(
                check(&trace).len(),
                1,
                "epoch {epoch} inc {incarnation} at {at_ms}"
            );
        }
    }
}
