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
//! had reached the server). A process takes the node up when it writes the node's record in
//! the world's ledger, or sends it a cancel, after another process did. Each ask (the caller's
//! click, its repetition to a restarted process, an operator's request) starts the count again:
//! the judge never counts across asks, so an ask the executor found nothing to do for only
//! makes it laxer, never wrong.

use std::collections::BTreeMap;

use super::view::{judge, ExecId, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{CallerAction, Dir, Trace, What};

pub const NAME: &str = "cancel_within_budget";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// One call node's cancels since its latest ask.
#[derive(Default)]
struct Count {
    asked_at_ms: u64,
    /// The process that drove the node last (wrote it or cancelled it).
    holder: Option<ExecId>,
    /// Whether the holder has said its one uncounted cancel since it took the node up.
    free_spent: bool,
    /// Cancels beyond each holder's first since the ask.
    counted: u32,
    sent: u32,
    reported: bool,
}

impl Count {
    fn take_up(&mut self, by: ExecId) {
        if self.holder != Some(by) {
            self.holder = Some(by);
            self.free_spent = false;
        }
    }
}

pub fn violations(v: &View) -> Vec<Violation> {
    let budget = v.config.max_cancel_attempts;
    let mut counts: BTreeMap<&str, Count> = BTreeMap::new();
    let mut out = vec![];
    // Trace order: a write is recorded as it commits, before the send it came before, and the
    // caller's ask before its input reaches the executor.
    for e in &v.trace.events {
        match &e.what {
            What::Caller {
                action: CallerAction::Cancel | CallerAction::Recancel | CallerAction::CancelRequest,
                node,
            } => {
                counts.insert(
                    node,
                    Count {
                        asked_at_ms: e.t_ms,
                        ..Count::default()
                    },
                );
            }
            What::Ledger { write } if write.outcome.landed().is_some() => {
                if let Some(c) = counts.get_mut(write.node.as_str()) {
                    c.take_up((write.epoch, write.incarnation));
                }
            }
            What::Net {
                dir: Dir::ToServer,
                exchange: ExchangeKind::Cancel,
                node: Some(node),
                epoch,
                incarnation,
                ..
            } => {
                let Some(c) = counts.get_mut(node.as_str()) else {
                    continue; // cancel_only_when_asked judges a cancel nobody asked for
                };
                c.take_up((*epoch, *incarnation));
                c.sent += 1;
                if !c.free_spent {
                    c.free_spent = true;
                } else {
                    c.counted += 1;
                }
                // The first cancel is the executor's first attempt: `budget - 1` more may follow.
                if c.counted >= budget.max(1) && !c.reported {
                    c.reported = true;
                    out.push(Violation {
                        checker: NAME,
                        node: Some(node.clone()),
                        detail: format!(
                            "epoch {epoch} incarnation {incarnation} sent the call's {} cancel since the ask at {} ms (at {} ms): {} beyond the first each process that took the node up may send, where max_cancel_attempts {budget} allows {}",
                            ordinal(c.sent),
                            c.asked_at_ms,
                            e.t_ms,
                            c.counted,
                            budget.max(1) - 1
                        ),
                    });
                }
            }
            _ => {}
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
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::CallerAction;

    /// A cancelled node (the testkit allows 3 cancel attempts) whose first cancel left at 3 s,
    /// with `more` cancels after it from `(epoch, incarnation)` pairs, one a second.
    fn cancels(more: &[(u64, u32)]) -> Tb {
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        for (i, &(epoch, incarnation)) in more.iter().enumerate() {
            b.exec(epoch, incarnation)
                .at(4_000 + 1_000 * i as u64)
                .net_out("n1", ExchangeKind::Cancel);
        }
        b
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
        // A process that writes the node after another took it up, and sends its cancel again,
        // took it back: that cancel is uncounted too. Without the other's write it counts.
        for (other_writes, violations) in [(true, 0), (false, 1)] {
            let mut b = cancels(&[(1, 1), (1, 1)]);
            if other_writes {
                b.at(6_500).push(build::ev(build::write("n1", 1, 2, 3)));
            }
            b.exec(1, 1).at(7_000).net_out("n1", ExchangeKind::Cancel);
            assert_eq!(check(&b.build(SETTLED)).len(), violations, "{other_writes}");
        }
    }

    #[test]
    fn each_ask_starts_the_count_again() {
        let mut b = cancels(&[(1, 1), (1, 1)]);
        b.at(8_000).caller(CallerAction::Recancel, "n1");
        for t in [9_000, 10_000, 11_000] {
            b.at(t).net_out("n1", ExchangeKind::Cancel);
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
