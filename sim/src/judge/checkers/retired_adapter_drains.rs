//! Retirement by version, both halves: after an operator retires an adapter, (1) no new
//! operation is submitted through it, and (2) the operations it still had are reconciled to a
//! receipt or to manual reconciliation, after which it reports itself drained.

use std::collections::BTreeMap;

use toolop::runner::Observation;

use super::view::{judge, View};
use super::Violation;
use crate::trace::{Trace, What};

pub const NAME: &str = "retired_adapter_drains";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    // First retirement time per adapter name, and whether a drain was reported.
    let mut retired: BTreeMap<&str, u64> = BTreeMap::new();
    let mut drained: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &v.trace.events {
        match &e.what {
            What::Exec {
                obs: Observation::AdapterRetired { adapter },
                ..
            } => {
                retired.entry(adapter).or_insert(e.t_ms);
            }
            What::Exec {
                obs: Observation::AdapterDrained { adapter },
                ..
            } => {
                drained.entry(adapter).or_insert(e.t_ms);
            }
            // Half one: a submission on a retired adapter, by a node whose record lives there.
            What::Exec {
                obs:
                    Observation::Sent {
                        node,
                        kind: "submit" | "submit_sync",
                        ..
                    },
                ..
            } => {
                let Some(rec) = v.record(node) else { continue };
                let name = rec.adapter.name();
                if let Some(&t) = retired.get(name) {
                    if e.t_ms >= t && rec.submit_attempts <= 1 && rec.created_at_ms >= t {
                        out.push(Violation {
                            checker: NAME,
                            node: Some(node.clone()),
                            detail: format!(
                                "new operation on {name} at {} ms, retired at {t} ms",
                                e.t_ms
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    // Half two: everything the retired adapter owns settles, and the drain is reported.
    for (&name, &t) in &retired {
        let owned: Vec<_> = v
            .ledger
            .records
            .iter()
            .filter(|r| r.adapter.name() == name)
            .collect();
        for r in owned.iter().filter(|r| !r.local_state.is_final()) {
            out.push(Violation {
                checker: NAME,
                node: Some(r.call_node_id.clone()),
                detail: format!("still {} on retired {name}", r.local_state),
            });
        }
        if owned.iter().all(|r| r.local_state.is_final()) && !drained.contains_key(name) {
            out.push(Violation {
                checker: NAME,
                node: None,
                detail: format!("{name} retired at {t} ms never reported itself drained"),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy};
    use toolop::record::LocalState;

    fn retire(b: &mut crate::judge::checkers::testkit::Tb, t: u64) {
        b.at(t).obs(Observation::AdapterRetired {
            adapter: "mcp-2025-11-25",
        });
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = happy("n1", 0);
        retire(&mut b, 50_000);
        b.at(50_001).obs(Observation::AdapterDrained {
            adapter: "mcp-2025-11-25",
        });
        assert_eq!(check(&b.build(super::super::testkit::SETTLED)), vec![]);
    }

    #[test]
    fn a_new_operation_on_a_retired_adapter_is_caught() {
        let mut b = happy("n1", 60_000);
        retire(&mut b, 50_000);
        b.at(99_000).obs(Observation::AdapterDrained {
            adapter: "mcp-2025-11-25",
        });
        b.ledger.records.retain(|r| r.call_node_id != "n1");
        b.record("n1", LocalState::Accepted, Some("t-n1"))
            .created_at_ms = 60_000;
        let v = check(&b.build(super::super::testkit::SETTLED));
        assert!(
            v.iter().any(|x| x.detail.contains("new operation")),
            "{v:?}"
        );
    }

    #[test]
    fn an_unreported_drain_or_an_unsettled_operation_is_caught() {
        let mut b = happy("n1", 0);
        retire(&mut b, 50_000);
        let v = check(&b.build(super::super::testkit::SETTLED));
        assert!(
            v.iter()
                .any(|x| x.detail.contains("never reported itself drained")),
            "{v:?}"
        );
        let mut b = happy("n1", 0);
        retire(&mut b, 1);
        b.ledger.records.retain(|r| r.call_node_id != "n1");
        b.record("n1", LocalState::Working, Some("t-n1"));
        let v = check(&b.build(super::super::testkit::SETTLED));
        assert!(
            v.iter().any(|x| x.detail.contains("still WORKING")),
            "{v:?}"
        );
    }
}
