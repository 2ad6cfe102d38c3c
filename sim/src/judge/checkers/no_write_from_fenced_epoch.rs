//! Always: once the ledger's epoch moved past a process's (a rollback), nothing that process
//! writes lands, a receipt least of all. Judged from the world's record of the shared ledger:
//! the epoch the world started the writing process under (never the token it presented) against
//! the ledger's epoch when the write ran, so a process that forged or refreshed its token is
//! caught as well as a ledger whose fence let it through.

use super::ledger_writes::{landed, process};
use super::view::{judge, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "no_write_from_fenced_epoch";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    landed(v.trace)
        .filter(|(_, w)| w.epoch < w.ledger_epoch)
        .map(|(t, w)| Violation {
            checker: NAME,
            node: Some(w.node.clone()),
            detail: format!(
                "at {t} ms {}, fenced by epoch {}, {} (token presented: epoch {})",
                process(w),
                w.ledger_epoch,
                match w.receipt {
                    Some(terminal) => format!("wrote a {} receipt", terminal.name()),
                    None => format!("wrote the record ({})", w.state),
                },
                w.writer_epoch
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::ledger_writes::build::{ev, write};
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};
    use crate::trace::WriteOutcome;
    use toolop::record::{LocalState, TerminalState};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_fenced_write_the_ledger_refused_passes() {
        let mut b = happy("n1", 0);
        let mut w = write("n1", 1, 1, 3);
        w.ledger_epoch = 2;
        w.outcome = WriteOutcome::Refused {
            error: "stale epoch".into(),
        };
        b.at(10).push(ev(w)).push(ev(write("n1", 2, 2, 3)));
        assert!(check(&b.build(SETTLED)).is_empty());
    }

    #[test]
    fn a_receipt_from_a_fenced_epoch_is_caught_whatever_token_it_showed() {
        let mut b = happy("n1", 0);
        let mut w = write("n1", 1, 1, 3);
        // The old process presented the ledger's epoch as its token.
        w.writer_epoch = 2;
        w.ledger_epoch = 2;
        w.state = LocalState::Accepted;
        w.receipt = Some(TerminalState::Completed);
        b.at(10).push(ev(w));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("completed receipt"), "{v:?}");
        assert!(v[0].detail.contains("epoch 1 incarnation 1"), "{v:?}");
    }
}
