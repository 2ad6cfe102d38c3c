//! Always: once the caller asked for a cancel, a call node's cancels stay within
//! `executor.core.max_cancel_attempts`. The executor counts the first cancel and each one it
//! sends again after a read showed the operation still running, and hands the node to a person
//! when the count is spent; a best-effort cancel the server took is only read after, never
//! sent again. A cancel sent without end hammers a server that acknowledged it and finishes
//! the work anyway (AIP-151's best-effort cancel, rmcp's `ignores_cancel` tool).
//!
//! Counted from the frames the network carried, per process (the client end of the
//! connection) and never from the executor's own count: each process that takes the node up
//! may say the cancel once more, uncounted, because the process before it may have died between
//! committing the cancel and sending it (`mcp_faults` seed 39769: five restarts, and no cancel
//! had reached the server). A take-up is read from the world's ledger: a run of landed writes
//! of the node by one process, after another's (the executor writes the node before each send,
//! so a send belongs to its process's latest write before it: `mcp_ext_replicas` seed 5147770,
//! a process's cancel left after a replica's write that its own commit preceded, and its later
//! take-up from that replica's lost read was its second). Each ask (the caller's click, its
//! repetition to a restarted process, an operator's request) starts the count again: the judge
//! never counts across asks, so an ask the executor found nothing to do for only makes it
//! laxer, never wrong.

use std::collections::{BTreeMap, BTreeSet};

use super::view::{cancel_ask, cancel_sent, judge, ExecId, View};
use super::Violation;
use crate::trace::{Trace, What};

pub const NAME: &str = "cancel_within_budget";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// One call node: who held it (runs of landed writes), and its cancels since the latest ask.
#[derive(Default)]
struct Node {
    last_writer: Option<ExecId>,
    runs: u64,
    /// Each process's latest run: the one its sends belong to.
    run_of: BTreeMap<ExecId, u64>,
    ask: Option<Ask>,
}

#[derive(Default)]
struct Ask {
    at_ms: u64,
    /// The runs whose one uncounted cancel was said since the ask.
    free_used: BTreeSet<u64>,
    /// Cancels beyond each run's first since the ask.
    counted: u32,
    sent: u32,
    reported: bool,
}

impl Node {
    fn wrote(&mut self, by: ExecId) {
        if self.last_writer != Some(by) {
            self.last_writer = Some(by);
            self.runs += 1;
        }
        self.run_of.insert(by, self.runs);
    }

    /// The run a cancel of `by` belongs to: its latest write's, or (a process that never wrote
    /// the node, which the executor never does) one of its own.
    fn run_of_sender(&mut self, by: ExecId) -> u64 {
        if let Some(r) = self.run_of.get(&by) {
            return *r;
        }
        self.runs += 1;
        self.run_of.insert(by, self.runs);
        self.runs
    }
}

pub fn violations(v: &View) -> Vec<Violation> {
    let budget = v.config.max_cancel_attempts.max(1);
    let mut nodes: BTreeMap<&str, Node> = BTreeMap::new();
    let mut out = vec![];
    // Trace order: a write is recorded as it commits, before the send it came before, and the
    // caller's ask before its input reaches the executor.
    for e in &v.trace.events {
        if let Some(node) = cancel_ask(&e.what) {
            nodes.entry(node).or_default().ask = Some(Ask {
                at_ms: e.t_ms,
                ..Ask::default()
            });
        } else if let What::Ledger { write } = &e.what {
            if write.outcome.landed().is_some() {
                nodes
                    .entry(write.node.as_str())
                    .or_default()
                    .wrote((write.epoch, write.incarnation));
            }
        } else if let Some((node, sender)) = cancel_sent(&e.what) {
            let n = nodes.entry(node).or_default();
            let run = n.run_of_sender(sender);
            // A cancel nobody asked for is `cancel_only_when_asked`'s.
            let Some(ask) = n.ask.as_mut() else { continue };
            ask.sent += 1;
            if !ask.free_used.insert(run) {
                ask.counted += 1;
            }
            // The first cancel is the executor's first attempt: `budget - 1` more may follow.
            if ask.counted >= budget && !ask.reported {
                ask.reported = true;
                out.push(Violation {
                        checker: NAME,
                        node: Some(node.to_string()),
                        detail: format!(
                            "epoch {} incarnation {} sent the call's {} cancel since the ask at {} ms (at {} ms): {} beyond the first of each process's turn at the node, where max_cancel_attempts {budget} allows {}",
                            sender.0,
                            sender.1,
                            ordinal(ask.sent),
                            ask.at_ms,
                            e.t_ms,
                            ask.counted,
                            budget - 1
                        ),
                    });
            }
        }
    }
    out
}

/// "1st", "2nd", "3rd", "4th", ... for people reading a violation.
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::codec::ExchangeKind;
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::CallerAction;

    /// A cancelled node (the testkit allows 3 cancel attempts) whose first cancel left at 3 s,
    /// with `more` cancels after it from `(epoch, incarnation)` pairs, one a second; each
    /// cancel follows its process's landed write of the node, as the executor's do.
    fn cancels(more: &[(u64, u32)]) -> Tb {
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        b.at(2_999).push(build::ev(build::write("n1", 1, 1, 2)));
        for (i, &by) in more.iter().enumerate() {
            write_and_cancel(&mut b, by, 4_000 + 1_000 * i as u64);
        }
        b
    }

    fn write_and_cancel(b: &mut Tb, (epoch, incarnation): (u64, u32), t_ms: u64) {
        b.at(t_ms)
            .push(build::ev(build::write("n1", epoch, incarnation, 3)));
        b.exec(epoch, incarnation)
            .at(t_ms)
            .net_out("n1", ExchangeKind::Cancel);
    }

    #[test]
    fn cancels_within_the_budget_pass() {
        assert_clean(check);
        // The first and two more: three attempts.
        assert_eq!(check(&cancels(&[(1, 1), (1, 1)]).build(SETTLED)), vec![]);
    }

    #[test]
    fn a_cancel_beyond_the_budget_is_caught() {
        let v = check(&cancels(&[(1, 1), (1, 1), (1, 1), (1, 1)]).build(SETTLED));
        assert_eq!(v.len(), 1, "one violation per node: {v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n1"));
        assert!(
            v[0].detail
                .contains("4th cancel since the ask at 3000 ms (at 6000 ms)")
                && v[0].detail.contains("max_cancel_attempts 3 allows 2"),
            "{}",
            v[0].detail
        );
    }

    #[test]
    fn each_process_that_takes_the_node_up_may_say_it_once_more() {
        // A restart (incarnation 2) repeats the cancel the crash may have kept from the server,
        // uncounted; two more from it are one too many.
        let restarted = [(1, 1), (1, 2), (1, 2)];
        assert_eq!(check(&cancels(&restarted).build(SETTLED)), vec![]);
        let v = check(&cancels(&[(1, 1), (1, 2), (1, 2), (1, 2)]).build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("epoch 1 incarnation 2"), "{v:?}");
    }

    /// mcp_ext_replicas seed 5147770: a process's cancel left just after a replica's write,
    /// though its own write came first; it belongs to that write's turn. The process's next
    /// write, after the replica's, is a take-up of its own, and may say the cancel once more.
    /// Without the replica's write it is the same turn, and the cancel counts.
    #[test]
    fn a_cancel_belongs_to_its_process_s_latest_write() {
        for (replica_writes, violations) in [(true, 0), (false, 1)] {
            let mut b = cancels(&[(1, 1), (1, 1)]);
            b.at(6_000).push(build::ev(build::write("n1", 1, 2, 3)));
            if replica_writes {
                b.at(6_010).push(build::ev(build::write("n1", 1, 1000, 4)));
            }
            b.exec(1, 2).at(6_050).net_out("n1", ExchangeKind::Cancel);
            write_and_cancel(&mut b, (1, 2), 16_000);
            assert_eq!(
                check(&b.build(SETTLED)).len(),
                violations,
                "{replica_writes}"
            );
        }
    }

    #[test]
    fn each_ask_starts_the_count_again() {
        let mut b = cancels(&[(1, 1), (1, 1)]);
        b.at(8_000).caller(CallerAction::Recancel, "n1");
        for t in [9_000, 10_000, 11_000] {
            write_and_cancel(&mut b, (1, 1), t);
        }
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A cancel nobody asked for is `cancel_only_when_asked`'s, not counted here.
        let mut b = crate::judge::checkers::testkit::happy("n1", 0);
        for t in [500, 600, 700, 800] {
            b.at(t).net_out("n1", ExchangeKind::Cancel);
        }
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn ordinals_read_as_english() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }
}
