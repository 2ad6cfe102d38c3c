//! Per-series measurements, computed from the trace alone (the same trace the checkers read),
//! so gate, tune and reports never re-implement a metric.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toolop::record::LocalState;
use toolop::runner::Observation;

use crate::fake::codec::ExchangeKind;
use crate::judge::checkers::view::{
    arrivals, caller_times, cancel_asked_times, covered_ms, executor_down_spans, node_task,
    observations, sends, store_facts, View,
};
use crate::judge::checkers::{
    self, at_most_one_receipt, no_divergence, no_false_unknown, no_second_operation,
    outbox_traceable, poll_rate_within_bound, settles_within_bound, Violation,
};
use crate::series::faults::FaultKind;
use crate::trace::{CallerAction, Shows, StoreFact, Trace, What};

/// What one series measured. Durations in simulated milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesMetrics {
    pub call_nodes: u32,
    /// Fault firings by kind.
    pub faults: BTreeMap<FaultKind, u32>,
    /// (fault, executor local state at firing) -> firings: the coverage matrix of this series.
    /// As JSON a list of `[fault, state, firings]` (JSON keys are strings only).
    #[serde(with = "coverage_as_list")]
    pub coverage: BTreeMap<(FaultKind, LocalState), u32>,
    /// Terminal outcome per call node: "completed", "failed", "cancelled", "done_without_result",
    /// "rejected", "unknown" (manual reconciliation), or "unsettled"; "no_receipt" for a record
    /// in a receipt state whose receipt is missing (an executor bug the checkers also report).
    /// Read from the final records, so empty for a trace without `Final`.
    pub terminal_states: BTreeMap<String, u32>,
    /// Status reads (`poll` sends) over the series.
    pub polls: u64,
    /// Polls per operation (one entry per call node that got an operation id).
    pub polls_per_operation: Vec<u64>,
    /// Most sends by one executor incarnation in any window [t, t+999] ms.
    pub max_sends_in_window: u32,
    /// Cancel click to the executor knowing who won: the cancel confirmed (CANCELLED_ACCEPTED),
    /// a terminal state observed instead (TERMINAL_OBSERVED: the work finished first), or the
    /// node settled otherwise. Fetching a result the cancel lost to is not part of it. A node
    /// that had settled before the click has nothing to confirm and is left out. Time in which
    /// the world kept every executor process of the newest epoch down (crashed, not yet
    /// restarted) is not counted: no executor can confirm anything then, and the restart delay
    /// is the world's, not the code's (`view::executor_down_spans`). Nor is the time in which
    /// the server held an acknowledged cancel it ignored, until the work ended
    /// (`cancel_ignored`): who won is decided then, by the server.
    pub cancel_confirmation_ms: Vec<u64>,
    /// Time spent not knowing whether an operation exists: entering SUBMISSION_UNKNOWN to leaving
    /// it, and submission to hand-off for nodes that end in UNKNOWN.
    pub unknown_reconciliation_ms: Vec<u64>,
    /// Submission to settlement, per settled call node.
    pub end_to_end_ms: Vec<u64>,
    /// Server-side terminal time to acceptance, per accepted node with a server task.
    pub completion_detection_ms: Vec<u64>,
    /// 429 replies the executor received.
    pub rate_limited: u32,
    /// Receipts whose terminal state differs from the server's ground truth.
    pub divergences: u32,
    /// Call nodes for which the server started more than one operation (tasks + sync runs - 1).
    pub second_operations: u32,
    /// Outbox entries without a matching receipt.
    pub untraceable_outbox: u32,
    pub outbox_entries: u32,
    /// Call nodes with more than one receipt (or Accepted observation).
    pub extra_receipts: u32,
    /// Call nodes that did not settle within the liveness bound (the liveness check's violations,
    /// so a series that did not end "all call nodes settled" counts one more).
    pub liveness_failures: u32,
    /// Call nodes the world found handed to manual reconciliation in the store.
    pub unknown_hand_offs: u32,
    /// Hand-offs of an operation the server still held and had shown (`no_false_unknown`).
    pub false_unknowns: u32,
    /// Hand-offs the protocol left undecidable (expiry, or every recent read spoiled).
    pub undecidable_unknowns: u32,
}

/// The coverage map as a list of `(fault, state, firings)`, so a row survives JSON (shard rows).
mod coverage_as_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use toolop::record::LocalState;

    use crate::series::faults::FaultKind;

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<(FaultKind, LocalState), u32>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let list: Vec<(FaultKind, LocalState, u32)> =
            m.iter().map(|(&(f, st), &n)| (f, st, n)).collect();
        list.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<(FaultKind, LocalState), u32>, D::Error> {
        let list = Vec::<(FaultKind, LocalState, u32)>::deserialize(d)?;
        Ok(list.into_iter().map(|(f, st, n)| ((f, st), n)).collect())
    }
}

/// Measure one series from its trace. Counts that need the ledger or the ground truth (terminal
/// states, polls per operation, completion detection, divergences, second operations, outbox,
/// receipts, liveness) stay at zero or empty for a trace without `Begin` or `Final`; such a
/// trace is reported by `checkers::check_all` as `trace_incomplete`.
pub fn measure(trace: &Trace) -> SeriesMetrics {
    measure_and_check(trace).0
}

/// The metrics and every checker's violations (`checkers::check_all`'s), from one reading of
/// the trace: some metrics count checkers' violations, and a sweep needs both (judging each
/// series twice, as it did, was a quarter of the judge's time).
pub fn measure_and_check(trace: &Trace) -> (SeriesMetrics, Vec<Violation>) {
    let submitted = caller_times(trace, CallerAction::Submit);
    // Settled when the world found the receipt or hand-off in the store.
    let stored = store_facts(trace);
    let settled: BTreeMap<&str, (u64, LocalState)> = stored
        .iter()
        .map(|(node, &(t, fact))| {
            let state = match fact {
                StoreFact::Reconcile => LocalState::Unknown,
                StoreFact::Receipt { .. } => LocalState::Accepted,
            };
            (node.as_str(), (t, state))
        })
        .collect();
    let mut m = SeriesMetrics {
        call_nodes: trace
            .events
            .iter()
            .find_map(|e| match &e.what {
                What::Begin { call_nodes, .. } => Some(*call_nodes),
                _ => None,
            })
            .unwrap_or(submitted.len() as u32),
        max_sends_in_window: poll_rate_within_bound::max_sends_in_window(trace),
        ..SeriesMetrics::default()
    };
    for e in &trace.events {
        if let What::Fault { fault, state, .. } = &e.what {
            *m.faults.entry(*fault).or_default() += 1;
            if let Some(state) = state {
                *m.coverage.entry((*fault, *state)).or_default() += 1;
            }
        }
    }
    // Counted from what the network carried, not from the executor's report of it.
    m.polls = sends(trace)
        .filter(|s| s.exchange == ExchangeKind::Poll)
        .count() as u64;
    m.rate_limited = arrivals(trace)
        .iter()
        .filter(|a| matches!(a.shows, Some(Shows::Throttled { status: 429, .. })))
        .count() as u32;
    for (node, submitted_ms) in &submitted {
        if let Some((t, _)) = settled.get(node.as_str()) {
            m.end_to_end_ms.push(t.saturating_sub(*submitted_ms));
        }
    }
    let down = executor_down_spans(trace);
    let ignored = ignored_cancel_spans(trace);
    let throttled = throttled_spans(trace);
    // From the click, or from the operator's request (the executor's look at the ledger is
    // part of what the operator waits for).
    for (node, clicked_ms) in cancel_asked_times(trace) {
        if let Some((t, _)) = settled.get(node.as_str()).filter(|(t, _)| *t >= clicked_ms) {
            let known = outcome_known_after(trace, &node, clicked_ms)
                .unwrap_or(*t)
                .min(*t);
            let held: Vec<(u64, u64)> = down
                .iter()
                .chain(ignored.get(node.as_str()).into_iter().flatten())
                .chain(throttled.get(node.as_str()).into_iter().flatten())
                .copied()
                .collect();
            let held_ms = covered_ms(&held, clicked_ms, known);
            m.cancel_confirmation_ms.push(known - clicked_ms - held_ms);
        }
    }
    m.unknown_reconciliation_ms = unknown_durations(trace, &submitted, &settled);
    let violations = match View::of(trace) {
        Ok(v) => {
            let (violations, undecidable) = checkers::check_view(&v);
            let judged = Judged {
                violations: &violations,
                undecidable,
                stored: &stored,
            };
            measure_final(&v, &submitted, &judged, &mut m);
            violations
        }
        Err(incomplete) => vec![incomplete],
    };
    (m, violations)
}

/// What the checkers found, and the store facts, for the counts that need a complete trace.
struct Judged<'a> {
    violations: &'a [Violation],
    undecidable: u32,
    stored: &'a BTreeMap<String, (u64, StoreFact)>,
}

impl Judged<'_> {
    fn count(&self, checker: &str) -> u32 {
        self.violations
            .iter()
            .filter(|x| x.checker == checker)
            .count() as u32
    }
}

/// Per call node, the spans in which its server held a cancel it had acknowledged and was
/// ignoring (`cancel_ignored`): from the first ack to the task's end (or deletion, or the end of
/// the trace), read from the ground truth. Until the work ends, no executor can know who won.
fn ignored_cancel_spans(trace: &Trace) -> BTreeMap<&str, Vec<(u64, u64)>> {
    let last_ms = trace.events.last().map_or(0, |e| e.t_ms);
    let mut out: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    let Some(truth) = trace.events.iter().rev().find_map(|e| match &e.what {
        What::Final { truth, .. } => Some(truth),
        _ => None,
    }) else {
        return out;
    };
    for t in truth.tasks.values() {
        if let Some(from) = t.cancel_ignored_at_ms {
            let to = t.terminal_at_ms.or(t.deleted_at_ms).unwrap_or(last_ms);
            out.entry(t.call_node.as_str())
                .or_default()
                .push((from, to.max(from)));
        }
    }
    out
}

/// Per call node, the spans a 429 or 503 told an executor to wait: from the refusal's arrival
/// for its Retry-After, which `retry_after_honoured` forbids repeating the request within. A
/// refused cancel, or a refused read of a cancelling node, is the server's delay, not the
/// executor's (session 46: `cancel_503` refusing runs of cancels for 1-5 s each counted them
/// against the executor); whatever the executor waits beyond it still counts.
fn throttled_spans(trace: &Trace) -> BTreeMap<&str, Vec<(u64, u64)>> {
    let mut out: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for a in arrivals(trace) {
        if let (Some(node), Some(Shows::Throttled { retry_after_ms, .. }), Some(at)) =
            (a.node, a.shows, a.arrives_at_ms)
        {
            out.entry(node)
                .or_default()
                .push((at, at.saturating_add(*retry_after_ms)));
        }
    }
    out
}

/// The first time at or after `after` that `node` moved into a state that says who won a cancel.
fn outcome_known_after(trace: &Trace, node: &str, after: u64) -> Option<u64> {
    observations(trace).find_map(|(t, _, obs)| match obs {
        Observation::Moved { node: n, path, .. } if n == node && t >= after => path
            .iter()
            .skip(1)
            .any(|s| {
                matches!(
                    s,
                    LocalState::CancelledAccepted | LocalState::TerminalObserved
                ) || s.is_final()
            })
            .then_some(t),
        _ => None,
    })
}

/// Time in SUBMISSION_UNKNOWN (entering it to the next move out of it, wherever in a move's
/// path that happens), then submission to hand-off for nodes that settled in UNKNOWN.
fn unknown_durations(
    trace: &Trace,
    submitted: &BTreeMap<String, u64>,
    settled: &BTreeMap<&str, (u64, LocalState)>,
) -> Vec<u64> {
    let mut out = vec![];
    let mut entered: BTreeMap<&str, u64> = BTreeMap::new();
    for (t, _, obs) in observations(trace) {
        let Observation::Moved { node, path, .. } = obs else {
            continue;
        };
        for state in path.iter().skip(1) {
            match (
                *state == LocalState::SubmissionUnknown,
                entered.get(node.as_str()),
            ) {
                (true, None) => {
                    entered.insert(node, t);
                }
                (false, Some(since)) => {
                    out.push(t.saturating_sub(*since));
                    entered.remove(node.as_str());
                }
                _ => {}
            }
        }
    }
    for (node, (t, state)) in settled {
        if let (LocalState::Unknown, Some(s)) = (state, submitted.get(*node)) {
            out.push(t.saturating_sub(*s));
        }
    }
    out
}

fn measure_final(
    v: &View,
    submitted: &BTreeMap<String, u64>,
    judged: &Judged,
    m: &mut SeriesMetrics,
) {
    // A submitted node the ledger never recorded has no outcome at all.
    let unrecorded = submitted.keys().filter(|n| v.record(n).is_none()).count() as u32;
    if unrecorded > 0 {
        *m.terminal_states.entry("unsettled".into()).or_default() += unrecorded;
    }
    let mut polls: BTreeMap<&str, u64> = BTreeMap::new();
    for s in sends(v.trace).filter(|s| s.exchange == ExchangeKind::Poll) {
        if let Some(node) = s.node {
            *polls.entry(node).or_default() += 1;
        }
    }
    // Detection ends when the world finds the receipt in the store.
    let stored = judged.stored;
    let mut records: Vec<_> = v.ledger.records.iter().collect();
    records.sort_by(|a, b| a.call_node_id.cmp(&b.call_node_id));
    for r in records {
        let node = r.call_node_id.as_str();
        let receipt = v.ledger.receipts.iter().find(|x| x.call_node_id == node);
        let outcome = match (r.local_state, receipt) {
            (LocalState::Unknown, _) => "unknown",
            (s, Some(x)) if s.has_receipt() => x.terminal_state.name(),
            (s, None) if s.has_receipt() => "no_receipt",
            _ => "unsettled",
        };
        *m.terminal_states.entry(outcome.into()).or_default() += 1;
        if r.operation_id.is_some() {
            m.polls_per_operation
                .push(polls.get(node).copied().unwrap_or(0));
        }
        let op = receipt
            .and_then(|x| x.operation_id.as_deref())
            .or(r.operation_id.as_deref());
        let terminal_at = node_task(v.truth, node, op).and_then(|(_, t)| t.terminal_at_ms);
        let accepted_at = stored
            .get(node)
            .filter(|(_, f)| matches!(f, StoreFact::Receipt { .. }))
            .map(|(t, _)| t);
        if let (Some(accepted_ms), Some(terminal_ms)) = (accepted_at, terminal_at) {
            m.completion_detection_ms
                .push(accepted_ms.saturating_sub(terminal_ms));
        }
    }
    m.divergences = judged.count(no_divergence::NAME);
    m.second_operations = no_second_operation::second_operations(v.truth);
    m.untraceable_outbox = judged.count(outbox_traceable::NAME);
    m.outbox_entries = v.ledger.outbox.len() as u32;
    m.extra_receipts = judged.count(at_most_one_receipt::NAME);
    m.liveness_failures = judged.count(settles_within_bound::NAME);
    m.unknown_hand_offs = stored
        .values()
        .filter(|(_, f)| *f == StoreFact::Reconcile)
        .count() as u32;
    m.false_unknowns = judged.count(no_false_unknown::NAME);
    m.undecidable_unknowns = judged.undecidable;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::truth::TaskStatus;
    use crate::judge::checkers::testkit::{all_paths, Tb, SETTLED};
    use toolop::record::TerminalState;

    #[test]
    fn a_clean_series_measures_every_field() {
        let mut b = all_paths();
        b.at(1_500)
            .fault(FaultKind::Poll429, Some("n1"), Some(LocalState::Working))
            .recv("n1", "poll", "rate_limited");
        b.at(1_600).fault(FaultKind::ExecutorCrash, None, None);
        let m = measure(&b.build(SETTLED));
        let expect = SeriesMetrics {
            call_nodes: 5,
            faults: BTreeMap::from([(FaultKind::Poll429, 1), (FaultKind::ExecutorCrash, 1)]),
            coverage: BTreeMap::from([((FaultKind::Poll429, LocalState::Working), 1)]),
            terminal_states: BTreeMap::from([
                ("cancelled".to_string(), 1),
                ("completed".to_string(), 2),
                ("rejected".to_string(), 1),
                ("unknown".to_string(), 1),
            ]),
            polls: 1,
            // n1 polled once, n2 was cancelled before its first poll; n5 never got an id.
            polls_per_operation: vec![1, 0],
            // [100, 1099] holds the submits of n2..n5 at 100..400 and n1's poll and fetch.
            max_sends_in_window: 6,
            cancel_confirmation_ms: vec![40],
            // n5: 30 ms in SUBMISSION_UNKNOWN, and 5030 ms from submission to UNKNOWN.
            unknown_reconciliation_ms: vec![30, 5_030],
            end_to_end_ms: vec![1_020, 3_040, 500, 20, 5_030],
            // n1 terminal at 900, accepted at 1020; n2 cancelled at 3120, accepted at 3140.
            completion_detection_ms: vec![120, 20],
            rate_limited: 1,
            divergences: 0,
            second_operations: 0,
            untraceable_outbox: 0,
            outbox_entries: 4,
            extra_receipts: 0,
            liveness_failures: 0,
            // n5's hand-off: nothing about it was ever shown, so it is no false one.
            unknown_hand_offs: 1,
            false_unknowns: 0,
            undecidable_unknowns: 0,
        };
        assert_eq!(m, expect);
    }

    #[test]
    fn broken_properties_are_counted_as_the_checkers_count_them() {
        let mut b = all_paths();
        b.task("t-n1-again", "n1", None, None, None)
            .task("t-n1-third", "n1", None, None, None);
        b.exec(2, 1)
            .at(4_000)
            .accepted("n3", TerminalState::Completed, Some("d-n3"));
        b.ledger.receipts.retain(|r| r.call_node_id != "n4");
        if let Some(t) = b.truth.tasks.get_mut("t-n2") {
            t.terminal_status = Some(TaskStatus::Completed);
        }
        b.at(100).submit("lost");
        let m = measure(&b.build("simulated time limit reached"));
        assert_eq!(m.second_operations, 2);
        assert_eq!(m.extra_receipts, 1);
        assert_eq!(m.untraceable_outbox, 1);
        assert_eq!(m.divergences, 1);
        // "lost" never settled, and the series did not end settled.
        assert_eq!(m.liveness_failures, 2);
        assert_eq!(m.terminal_states.get("unsettled"), Some(&1));
        assert_eq!(m.terminal_states.get("no_receipt"), Some(&1));
        // The sweep's one reading finds what the checkers find apart, in their order.
        let trace = b.build("simulated time limit reached");
        let (one_pass, violations) = measure_and_check(&trace);
        assert_eq!(one_pass, m);
        assert_eq!(violations, checkers::check_all(&trace));
        assert!(violations.len() >= 7, "{violations:?}");
    }

    #[test]
    fn a_trace_without_final_still_measures_what_the_trace_shows() {
        let trace = all_paths().assemble(true, false, None);
        let m = measure(&trace);
        assert_eq!(m.call_nodes, 5);
        assert_eq!(m.polls, 1);
        assert_eq!(m.end_to_end_ms.len(), 5);
        assert!(m.terminal_states.is_empty() && m.completion_detection_ms.is_empty());
        assert_eq!(m.liveness_failures, 0);
        let (_, violations) = measure_and_check(&trace);
        assert_eq!(violations, checkers::check_all(&trace));
        assert_eq!(violations.len(), 1);
    }

    /// The only executor crashes at 3,110 ms and its restart runs from 3,130 ms.
    fn down_from_3110_to_3130(b: &mut Tb) {
        use crate::trace::WorldAction;
        b.at(3_110).push(What::World {
            action: WorldAction::ExecutorDown {
                incarnation: 1,
                exit: "crashed".into(),
            },
        });
        b.at(3_130).push(What::World {
            action: WorldAction::ExecutorRestart {
                incarnation: 2,
                epoch: 1,
            },
        });
    }

    /// Cancel confirmation leaves out the time the world kept every executor down, and only
    /// that: the cancel takes 40 ms from click to confirmation, and when the executor was down
    /// for 20 ms of them, the other 20 ms count.
    #[test]
    fn cancel_confirmation_leaves_out_only_the_time_no_executor_ran() {
        let mut b = Tb::new();
        b.cancel_path("n1", 100);
        assert_eq!(measure(&b.build(SETTLED)).cancel_confirmation_ms, vec![40]);
        down_from_3110_to_3130(&mut b);
        assert_eq!(measure(&b.build(SETTLED)).cancel_confirmation_ms, vec![20]);
    }

    /// Cancel confirmation leaves out the time a server held a cancel it acknowledged and
    /// ignored, until the task ended (read from the ground truth), and time that is both that
    /// and executor downtime counts once (`view::covered_ms`).
    #[test]
    fn cancel_confirmation_leaves_out_a_cancel_the_server_held_and_ignored() {
        let mut b = Tb::new();
        b.cancel_path("n1", 100);
        // Clicked at 3,100, known at 3,140; the server acked at 3,105, the task ended at 3,120.
        b.truth.tasks.get_mut("t-n1").unwrap().cancel_ignored_at_ms = Some(3_105);
        assert_eq!(measure(&b.build(SETTLED)).cancel_confirmation_ms, vec![25]);
        // Another node's ignored cancel is not this one's.
        b.truth.tasks.get_mut("t-n1").unwrap().call_node = "n2".into();
        assert_eq!(measure(&b.build(SETTLED)).cancel_confirmation_ms, vec![40]);
        b.truth.tasks.get_mut("t-n1").unwrap().call_node = "n1".into();
        down_from_3110_to_3130(&mut b);
        // Held or down from 3,105 to 3,130: 25 ms out of 40.
        assert_eq!(measure(&b.build(SETTLED)).cancel_confirmation_ms, vec![15]);
    }

    /// Cancel confirmation leaves out the Retry-After a 429 or 503 to the node's request told
    /// the executor to wait, from the refusal's arrival; another node's refusal is not this
    /// one's.
    #[test]
    fn cancel_confirmation_leaves_out_the_wait_a_refusal_asked_for() {
        for (node, want) in [("n1", 28), ("n2", 40)] {
            let mut b = Tb::new();
            b.cancel_path("n1", 100);
            // Clicked at 3,100, known at 3,140; a 503 arrived at 3,110 asking for 12 ms.
            b.at(3_110).net(
                crate::trace::Dir::ToExecutor,
                node,
                ExchangeKind::Cancel,
                crate::trace::NetVerdict::Deliver,
                Some(0),
                Some(Shows::Throttled {
                    status: 503,
                    retry_after_ms: 12,
                }),
            );
            assert_eq!(
                measure(&b.build(SETTLED)).cancel_confirmation_ms,
                vec![want],
                "{node}"
            );
        }
    }
}
