//! Retirement by version, both halves: after an operator retires an adapter, (1) no new
//! operation is submitted through it, and (2) the operations it still had are reconciled to a
//! receipt or to manual reconciliation, after which it reports itself drained. Judged from the
//! world: the operator's retirement and the caller's submissions (the caller's record), the lane
//! each submission frame took on the network, and the store's receipts and hand-offs; the drain
//! report is the executor's output being judged, and must be true when made: a report for an
//! adapter not retired yet, or before every call submitted on its lane had settled, would let an
//! operator take away a server that still has work. A new operation is a call the caller first
//! handed in after the retirement: its submissions must not take the retired lane. (A call
//! handed in before it may still go there, even when a restart made the caller hand it in again
//! later: the executor may have taken it before it heard of the retirement.)

use std::collections::BTreeMap;

use toolop::runner::Observation;

use super::view::{judge, sends, store_facts, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{CallerAction, Trace, What};

pub const NAME: &str = "retired_adapter_drains";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    // First retirement time per adapter name, and the first drain report.
    let mut retired: BTreeMap<&str, u64> = BTreeMap::new();
    let mut drained: BTreeMap<&str, u64> = BTreeMap::new();
    // Every drain report (a process reports each retired lane once): (adapter, time).
    let mut reports: Vec<(&str, u64)> = vec![];
    let mut handed_in: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &v.trace.events {
        match &e.what {
            What::Caller {
                action: CallerAction::Submit,
                node,
            } => {
                handed_in.entry(node.as_str()).or_insert(e.t_ms);
            }
            What::Caller {
                action: CallerAction::Retire,
                node,
            } => {
                retired.entry(node.as_str()).or_insert(e.t_ms);
            }
            What::Exec {
                obs: Observation::AdapterDrained { adapter },
                ..
            } => {
                drained.entry(adapter).or_insert(e.t_ms);
                reports.push((adapter, e.t_ms));
            }
            _ => {}
        }
    }
    let lane_of = |name: &str| {
        v.config
            .lanes
            .iter()
            .position(|p| p.adapter_id().name() == name)
            .map(|l| l as u32)
    };
    // Per node: its first submission (time, lane). Per lane: each node submitted on it, with
    // the time of its first submission there.
    let mut first: BTreeMap<&str, (u64, u32)> = BTreeMap::new();
    let mut on_lane: BTreeMap<u32, BTreeMap<&str, u64>> = BTreeMap::new();
    for s in sends(v.trace).filter(|s| s.exchange == ExchangeKind::Submit) {
        let Some(node) = s.node else { continue };
        first.entry(node).or_insert((s.t_ms, s.lane));
        on_lane
            .entry(s.lane)
            .or_default()
            .entry(node)
            .or_insert(s.t_ms);
    }
    let empty = BTreeMap::new();
    let submitted_on = |lane: u32| on_lane.get(&lane).unwrap_or(&empty);
    let settled = store_facts(v.trace);
    // A drain report is a claim an operator acts on (the old server can go): it must be true
    // when made. The adapter was retired, and every call submitted on its lane before the
    // report had settled in the store by then.
    for &(name, at) in &reports {
        if retired.get(name).is_none_or(|&t| t > at) {
            out.push(Violation {
                checker: NAME,
                node: None,
                detail: format!("{name} reported itself drained at {at} ms, never retired before"),
            });
            continue;
        }
        let Some(lane) = lane_of(name) else { continue };
        let before: Vec<&str> = submitted_on(lane)
            .iter()
            .filter(|(_, &t)| t <= at)
            .map(|(&node, _)| node)
            .collect();
        for node in before {
            match settled.get(node).map(|(t, _)| *t) {
                Some(t) if t <= at => {}
                when => out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!(
                        "{name} reported itself drained at {at} ms, while this call submitted on it had not settled ({})",
                        when.map_or("it never did".to_string(), |t| format!("settled at {t} ms"))
                    ),
                }),
            }
        }
    }
    for (&name, &t) in &retired {
        let Some(lane) = lane_of(name) else { continue };
        // Half one: a call first handed in after the retirement, submitted on the retired lane.
        for (&node, &(at, l)) in &first {
            let given = handed_in.get(node).copied();
            if let Some(given) = given.filter(|&g| l == lane && g >= t) {
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!(
                        "new operation on {name} at {at} ms (handed in at {given} ms), retired at {t} ms"
                    ),
                });
            }
        }
        // Half two: everything submitted on the retired lane settles, and the drain is reported.
        let mut all_settled = true;
        for node in submitted_on(lane).keys() {
            if !settled.contains_key(*node) {
                all_settled = false;
                out.push(Violation {
                    checker: NAME,
                    node: Some(node.to_string()),
                    detail: format!("submitted on retired {name}, and never settled in the store"),
                });
            }
        }
        if all_settled && !drained.contains_key(name) {
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
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};

    fn retire(b: &mut Tb, t: u64) {
        b.at(t).caller(CallerAction::Retire, "mcp-2025-11-25");
    }

    fn drained(b: &mut Tb, t: u64) {
        b.at(t).obs(Observation::AdapterDrained {
            adapter: "mcp-2025-11-25",
        });
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = happy("n1", 0);
        retire(&mut b, 50_000);
        drained(&mut b, 50_001);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_new_operation_on_a_retired_adapter_is_caught_even_if_the_executor_dates_it_earlier() {
        let mut b = happy("n1", 60_000);
        retire(&mut b, 50_000);
        drained(&mut b, 99_000);
        // The record claims it was created before the retirement; the network says otherwise.
        b.ledger.records[0].created_at_ms = 1;
        let v = check(&b.build(SETTLED));
        assert!(
            v.iter().any(|x| x.detail.contains("new operation")),
            "{v:?}"
        );
    }

    /// A drain report must be true when made (cargo-mutants, session 41: reporting a lane
    /// drained while its own calls ran, or a lane nobody retired, survived every judge).
    #[test]
    fn an_early_or_unretired_drain_report_is_caught() {
        // Submitted at 15,000 and settled a second later; retired at 15,100, reported drained
        // at 15,500.
        let mut b = happy("n1", 15_000);
        retire(&mut b, 15_100);
        drained(&mut b, 15_500);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("had not settled (settled at"), "{v:?}");
        // Reported before the retirement.
        let mut b = happy("n1", 0);
        drained(&mut b, 40_000);
        retire(&mut b, 50_000);
        let v = check(&b.build(SETTLED));
        assert!(
            v.iter().any(|x| x.detail.contains("never retired before")),
            "{v:?}"
        );
        // Reported for an adapter nobody retired.
        let mut b = happy("n1", 0);
        drained(&mut b, 40_000);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("never retired before"), "{v:?}");
    }

    #[test]
    fn an_unreported_drain_or_an_unsettled_operation_is_caught() {
        let mut b = happy("n1", 0);
        retire(&mut b, 50_000);
        let v = check(&b.build(SETTLED));
        assert!(
            v.iter()
                .any(|x| x.detail.contains("never reported itself drained")),
            "{v:?}"
        );
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        retire(&mut b, 1);
        drained(&mut b, 2);
        let v = check(&b.build(SETTLED));
        assert!(
            v.iter().any(|x| x.detail.contains("never settled")),
            "{v:?}"
        );
    }
}
