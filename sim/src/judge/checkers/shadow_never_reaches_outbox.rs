//! Launch control: an operation run in shadow mode is recorded, checked and receipted, but its
//! outcome never reaches the outbox (nothing downstream may act on it). Which nodes run in shadow
//! is the scenario's word (their tool is one of `executor.launch.shadow_tools`), not a flag on
//! the executor's own record.

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
        .filter(|e| {
            v.tool_of(&e.call_node_id)
                .is_some_and(|t| v.config.shadow_tools.iter().any(|s| s == t))
        })
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
    fn a_shadow_outcome_in_the_outbox_is_caught_whatever_the_record_says() {
        // The node's tool runs in shadow; the executor's record forgot to say so.
        let mut b = happy("n1", 0);
        b.config.shadow_tools = vec!["tool".into()];
        assert!(!b.ledger.records[0].shadow);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        // A record that calls itself shadow, of a tool that is not, is judged by its tool.
        let mut b = happy("n1", 0);
        b.ledger.records.retain(|r| r.call_node_id != "n1");
        b.record("n1", LocalState::Accepted, Some("t-n1")).shadow = true;
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }
}
