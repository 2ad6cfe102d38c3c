//! Always: once a result digest is in the ledger for a call node, no later write accepts or
//! records another one for it: not a restarted incarnation that fetched again, not a replica.
//! Judged from the world's record of the shared ledger (the digest each write carried, the
//! digest the ledger held when it ran), never from the executor's account.

use std::collections::BTreeMap;

use super::ledger_writes::{landed, process};
use super::view::{judge, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "digest_kept_across_restart";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    // node -> (digest, who recorded it first)
    let mut recorded: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    let mut out = vec![];
    for (t, w) in landed(v.trace) {
        let before = recorded
            .get(w.node.as_str())
            .map(|(d, who)| (*d, who.clone()))
            .or_else(|| {
                w.recorded_digest
                    .as_deref()
                    .map(|d| (d, "an earlier writer".to_string()))
            });
        if let Some((was, who)) = before {
            let now = w.result_digest.as_deref();
            // A receipt must carry the recorded digest; any write that names a digest must name it.
            if now.is_some_and(|d| d != was) || (w.receipt.is_some() && now != Some(was)) {
                out.push(Violation {
                    checker: NAME,
                    node: Some(w.node.clone()),
                    detail: format!(
                        "result digest {was} was recorded by {who}; at {t} ms {} {} digest {}",
                        process(w),
                        if w.receipt.is_some() {
                            "accepted"
                        } else {
                            "recorded"
                        },
                        now.unwrap_or("none")
                    ),
                });
            }
        }
        if let Some(d) = w.result_digest.as_deref() {
            recorded
                .entry(w.node.as_str())
                .or_insert_with(|| (d, process(w)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::ledger_writes::build::{ev, write};
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};
    use toolop::record::{LocalState, TerminalState};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    fn accept(node: &str, epoch: u64, incarnation: u32, v: u64, digest: &str) -> What {
        let mut w = write(node, epoch, incarnation, v);
        w.state = LocalState::Accepted;
        w.receipt = Some(TerminalState::Completed);
        w.result_digest = Some(digest.into());
        ev(w)
    }

    use crate::trace::What;

    #[test]
    fn the_same_digest_again_passes() {
        let mut b = happy("n1", 0);
        let mut keep = write("n1", 1, 1, 2);
        keep.result_digest = Some("d1".into());
        b.at(10).push(ev(keep)).push(accept("n1", 1, 2, 3, "d1"));
        assert!(check(&b.build(SETTLED)).is_empty());
    }

    #[test]
    fn another_digest_accepted_after_a_restart_is_caught() {
        let mut b = happy("n1", 0);
        let mut keep = write("n1", 1, 1, 2);
        keep.result_digest = Some("d1".into());
        b.at(10).push(ev(keep));
        b.at(20).push(accept("n1", 1, 2, 3, "d2"));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail
                .contains("d1 was recorded by epoch 1 incarnation 1")
                && v[0].detail.contains("incarnation 2 accepted digest d2"),
            "{v:?}"
        );
    }

    #[test]
    fn a_digest_the_ledger_held_counts_without_its_write_in_the_trace() {
        let mut b = happy("n1", 0);
        let mut w = write("n1", 1, 2, 3);
        w.recorded_digest = Some("d1".into());
        w.receipt = Some(TerminalState::Completed);
        w.state = LocalState::Accepted;
        w.result_digest = None;
        b.at(20).push(ev(w));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("accepted digest none"), "{v:?}");
    }
}
