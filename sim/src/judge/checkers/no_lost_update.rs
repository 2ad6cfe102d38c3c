//! Always: no lost update. A write lands only on the version its writer last saw: when another
//! writer's commit came in between, compare-and-swap must refuse the stale write and the writer
//! must read again. Judged from the world's record of the shared ledger (what each process last
//! read, what the ledger held, what landed), so a writer that retried a refused write blindly at
//! the version the ledger reported, or a ledger whose compare-and-swap let a stale write
//! through, is caught even if no executor noticed.

use super::ledger_writes::{landed, process};
use super::view::{judge, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "no_lost_update";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    for (t, w) in landed(v.trace) {
        let detail = if w.stored_version != Some(w.expected_version) {
            Some(format!(
                "at {t} ms the ledger let {} write at version {} while it held version {}",
                process(w),
                w.expected_version,
                w.stored_version
                    .map_or_else(|| "none".to_string(), |s| s.to_string())
            ))
        } else if w.read_version != Some(w.expected_version) {
            Some(format!(
                "at {t} ms {} wrote over version {} having last read version {}: the commit in \
                 between, by another writer, was overwritten unseen",
                process(w),
                w.expected_version,
                w.read_version
                    .map_or_else(|| "none".to_string(), |r| r.to_string())
            ))
        } else {
            None
        };
        if let Some(detail) = detail {
            out.push(Violation {
                checker: NAME,
                node: Some(w.node.clone()),
                detail,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::ledger_writes::build::{ev, write};
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};
    use crate::trace::WriteOutcome;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn two_writers_taking_turns_through_compare_and_swap_pass() {
        let mut b = happy("n1", 0);
        b.at(10).push(ev(write("n1", 1, 1, 3)));
        // The replica's write at 3 is refused, it reads 4 and writes again.
        let mut refused = write("n1", 1, 1_000, 3);
        refused.stored_version = Some(4);
        refused.outcome = WriteOutcome::Refused {
            error: "version conflict".into(),
        };
        b.at(11).push(ev(refused));
        b.at(12).push(ev(write("n1", 1, 1_000, 4)));
        assert!(check(&b.build(SETTLED)).is_empty());
    }

    #[test]
    fn a_blind_retry_at_the_reported_version_is_a_lost_update() {
        let mut b = happy("n1", 0);
        b.at(10).push(ev(write("n1", 1, 1_000, 3)));
        // Incarnation 1 read version 3, lost the race, and wrote at 4 without reading it.
        let mut blind = write("n1", 1, 1, 4);
        blind.read_version = Some(3);
        b.at(11).push(ev(blind));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n1"));
        assert!(v[0].detail.contains("last read version 3"), "{v:?}");
    }

    #[test]
    fn a_ledger_that_lets_a_stale_write_through_is_caught() {
        let mut b = happy("n1", 0);
        let mut stale = write("n1", 1, 1, 3);
        stale.stored_version = Some(4);
        b.at(10).push(ev(stale));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("held version 4"), "{v:?}");
    }
}
