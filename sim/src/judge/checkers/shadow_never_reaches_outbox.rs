//! Launch control: an operation run in shadow mode is recorded, checked and receipted, but its
//! outcome never reaches the outbox (nothing downstream may act on it).

use super::view::{judge, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "shadow_never_reaches_outbox";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    v.ledger
        .outbox
        .iter()
        .filter(|e| v.record(&e.call_node_id).is_some_and(|r| r.shadow))
        .map(|e| Violation {
            checker: NAME,
            node: Some(e.call_node_id.clone()),
            detail: format!(
                "shadow operation reached the outbox as {}",
                e.terminal_state.name()
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};
    use toolop::record::LocalState;

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_shadow_outcome_in_the_outbox_is_caught() {
        let mut b = happy("n1", 0);
        // The happy path's record is the first; mark it shadow.
        b.ledger.records.retain(|r| r.call_node_id != "n1");
        b.record("n1", LocalState::Accepted, Some("t-n1")).shadow = true;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
    }
}
