//! Always-properties over a series trace. Each checker is passive: it reads the trace and
//! returns violations; it never drives the simulation. Every checker judges a trace with a
//! `Begin` (the bounds) and a `Final` (ledger and ground truth); a trace without either gets the
//! single violation `trace_incomplete` instead. No checker panics on any trace.
//!
//! Judges never trust the executor under test: the facts a checker relies on come from the
//! world (the fake's ground truth, the frames the network carried and what the fault layer drew,
//! the caller's and the approval agent's records, the store as the world read it, the
//! scenario). What the executor says about itself (its observations, its numbering, flags on its
//! own record) is only ever the thing judged, or a confession: it may convict, never acquit.
//! `ARCHITECTURE.md` has the table of every judge and the facts it reads.
//!
//! Each module has `NAME` (the stable `Violation::checker`), `check(trace)` and
//! `violations(view)`; the metrics reuse the latter, so each property has one implementation.

use serde::Serialize;

use crate::trace::Trace;

/// 1. At most one terminal receipt per call node.
pub mod at_most_one_receipt;
/// The executor cancels on the server only when the caller asked (a detach is no cancel).
pub mod cancel_only_when_asked;
pub mod cancel_requeried_on_time;
/// Once a cancel is asked for, the executor's cancels stay within `max_cancel_attempts`.
pub mod cancel_within_budget;
/// A cancel the caller clicked reaches the network once the operation is known to run.
pub mod clicked_cancel_is_acted_on;
/// 2. Completed never advances downstream without a fetched, verified result.
pub mod completed_needs_verified_result;
/// Once a result digest is in the ledger, no later write accepts another one.
pub mod digest_kept_across_restart;
/// A task shown ending after its confirmed cancel, read by the accepting process, is handed to
/// a person (an effect reconciliation).
pub mod effect_reconciliation_raised;
/// An input round is answered with the answer given for it (never a replayed older one).
pub mod input_answer_matches_round;
/// The shared ledger's write history as the world recorded it.
pub mod ledger_writes;
/// After a newer epoch took a call node over, no older executor acts on it.
pub mod no_action_from_old_epoch;
/// 3. After a successful cancel, a late completion never advances.
pub mod no_advance_after_cancel;
/// A call node is submitted again only on proof that the previous submission created nothing.
pub mod no_blind_resubmit;
/// 5. The accepted terminal state equals the server's ground truth.
pub mod no_divergence;
/// Nothing is handed to manual reconciliation that could still have been resolved.
pub mod no_false_unknown;
/// A write lands only on the version its writer last saw (compare-and-swap, no lost update).
pub mod no_lost_update;
/// A person is asked about a side effect only when the server reported a cancelled task ending.
pub mod no_needless_effect_reconciliation;
/// 6. No second operation from a duplicate submission.
pub mod no_second_operation;
/// Nothing is sent for a call node once it has settled.
pub mod no_send_after_receipt;
/// An answer to an older request never overwrites what a newer one established.
pub mod no_stale_overwrite;
/// Nothing a process of a fenced epoch writes lands in the ledger.
pub mod no_write_from_fenced_epoch;
/// A process whose crash fail point fired writes nothing more (a real crash runs no clean-up).
pub mod nothing_written_after_crash;
/// Every outbox entry's terminal state and payload are the server's.
pub mod outbox_payload_matches_truth;
/// 8. Every outbox entry traces back to a terminal receipt.
pub mod outbox_traceable;
/// No call node is polled sooner than the server's suggested interval.
pub mod poll_interval_honoured;
/// 7. Sends never exceed the max QPS in any one-second window.
pub mod poll_rate_within_bound;
/// Retirement by version: no new work on a retired adapter; what it has drains.
pub mod retired_adapter_drains;
/// A 429/503's Retry-After is waited out before the refused request is repeated.
pub mod retry_after_honoured;
/// A call the executor is configured to run synchronously is never refused by it locally.
pub mod runnable_call_not_refused;
/// Liveness: every call node settles within the bound after the safety phase.
pub mod settles_within_bound;
/// Launch control: shadow operations never reach the outbox.
pub mod shadow_never_reaches_outbox;
/// The stall watch rescues a node only when another process of its epoch drove it.
pub mod stall_only_behind_another_process;
/// A synchronous call of a slow tool is waited for up to the tool's published bound.
pub mod sync_reply_awaited;
/// A call is task-augmented only for a tool whose listed descriptor allows tasks.
pub mod task_calls_only_where_listed;
/// 4. Every UNKNOWN operation is queryable by task id or by submission key.
pub mod unknown_is_queryable;
/// Shared readings: `Begin`/`Final`, settle times, the node's server task.
pub mod view;

#[cfg(test)]
pub(crate) mod testkit;

pub use view::INCOMPLETE;

/// One broken property.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The checker's name, e.g. "at_most_one_receipt".
    pub checker: &'static str,
    pub node: Option<String>,
    pub detail: String,
}

type Checker = fn(&view::View) -> Vec<Violation>;

/// Every checker, in report order: (name, check).
pub const CHECKERS: [(&str, Checker); 34] = [
    (at_most_one_receipt::NAME, at_most_one_receipt::violations),
    (
        completed_needs_verified_result::NAME,
        completed_needs_verified_result::violations,
    ),
    (
        no_advance_after_cancel::NAME,
        no_advance_after_cancel::violations,
    ),
    (unknown_is_queryable::NAME, unknown_is_queryable::violations),
    (no_divergence::NAME, no_divergence::violations),
    (no_second_operation::NAME, no_second_operation::violations),
    (
        poll_rate_within_bound::NAME,
        poll_rate_within_bound::violations,
    ),
    (outbox_traceable::NAME, outbox_traceable::violations),
    (settles_within_bound::NAME, settles_within_bound::violations),
    (
        input_answer_matches_round::NAME,
        input_answer_matches_round::violations,
    ),
    (
        cancel_only_when_asked::NAME,
        cancel_only_when_asked::violations,
    ),
    (
        no_action_from_old_epoch::NAME,
        no_action_from_old_epoch::violations,
    ),
    (retry_after_honoured::NAME, retry_after_honoured::violations),
    (no_stale_overwrite::NAME, no_stale_overwrite::violations),
    (no_blind_resubmit::NAME, no_blind_resubmit::violations),
    (
        retired_adapter_drains::NAME,
        retired_adapter_drains::violations,
    ),
    (
        shadow_never_reaches_outbox::NAME,
        shadow_never_reaches_outbox::violations,
    ),
    (
        no_send_after_receipt::NAME,
        no_send_after_receipt::violations,
    ),
    (
        outbox_payload_matches_truth::NAME,
        outbox_payload_matches_truth::violations,
    ),
    (
        clicked_cancel_is_acted_on::NAME,
        clicked_cancel_is_acted_on::violations,
    ),
    (no_false_unknown::NAME, no_false_unknown::violations),
    (
        poll_interval_honoured::NAME,
        poll_interval_honoured::violations,
    ),
    (no_lost_update::NAME, no_lost_update::violations),
    (
        no_write_from_fenced_epoch::NAME,
        no_write_from_fenced_epoch::violations,
    ),
    (
        digest_kept_across_restart::NAME,
        digest_kept_across_restart::violations,
    ),
    (
        no_needless_effect_reconciliation::NAME,
        no_needless_effect_reconciliation::violations,
    ),
    (
        stall_only_behind_another_process::NAME,
        stall_only_behind_another_process::violations,
    ),
    (
        task_calls_only_where_listed::NAME,
        task_calls_only_where_listed::violations,
    ),
    (
        runnable_call_not_refused::NAME,
        runnable_call_not_refused::violations,
    ),
    (
        nothing_written_after_crash::NAME,
        nothing_written_after_crash::violations,
    ),
    (sync_reply_awaited::NAME, sync_reply_awaited::violations),
    (
        effect_reconciliation_raised::NAME,
        effect_reconciliation_raised::violations,
    ),
    (cancel_within_budget::NAME, cancel_within_budget::violations),
    (
        cancel_requeried_on_time::NAME,
        cancel_requeried_on_time::violations,
    ),
];

/// Run every checker over a trace, in `CHECKERS` order.
pub fn check_all(trace: &Trace) -> Vec<Violation> {
    view::judge(trace, |v| check_view(v).0)
}

/// Every checker over a complete trace's view, in `CHECKERS` order, and the hand-offs
/// `no_false_unknown` excused as undecidable (a metric): its judgement is the judge's dearest,
/// and a sweep needs both from one run of it.
pub fn check_view(v: &view::View) -> (Vec<Violation>, u32) {
    let mut undecidable = 0;
    let mut out = vec![];
    for (name, check) in CHECKERS {
        if name == no_false_unknown::NAME {
            let (found, excused) = no_false_unknown::judged(v);
            undecidable = excused;
            out.extend(found);
        } else {
            out.extend(check(v));
        }
    }
    (out, undecidable)
}

#[cfg(test)]
mod tests {
    use super::testkit::{all_paths, happy, SETTLED};
    use super::*;
    use crate::trace::{TraceEvent, What};
    use toolop::record::TerminalState;

    #[test]
    fn a_clean_series_has_no_violations() {
        let v = check_all(&all_paths().build(SETTLED));
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_truncated_trace_gives_one_incomplete_violation() {
        let b = all_paths();
        for trace in [
            b.assemble(true, false, None),
            b.assemble(false, true, Some(SETTLED)),
            b.assemble(false, false, None),
        ] {
            let v = check_all(&trace);
            assert_eq!(v.len(), 1, "{v:?}");
            assert_eq!(v[0].checker, INCOMPLETE);
            // Each checker alone says the same.
            let each: [fn(&Trace) -> Vec<Violation>; 22] = [
                at_most_one_receipt::check,
                completed_needs_verified_result::check,
                no_advance_after_cancel::check,
                unknown_is_queryable::check,
                no_divergence::check,
                no_second_operation::check,
                poll_rate_within_bound::check,
                outbox_traceable::check,
                settles_within_bound::check,
                input_answer_matches_round::check,
                cancel_only_when_asked::check,
                no_action_from_old_epoch::check,
                retry_after_honoured::check,
                no_stale_overwrite::check,
                no_blind_resubmit::check,
                retired_adapter_drains::check,
                shadow_never_reaches_outbox::check,
                no_send_after_receipt::check,
                outbox_payload_matches_truth::check,
                clicked_cancel_is_acted_on::check,
                no_false_unknown::check,
                poll_interval_honoured::check,
            ];
            for check in each {
                assert_eq!(check(&trace), v);
            }
        }
    }

    #[test]
    fn violations_come_in_checker_order_with_stable_names() {
        let mut b = happy("n1", 0);
        b.exec(2, 1)
            .at(2_000)
            .accepted("n1", TerminalState::Completed, Some("d-n1"));
        let v = check_all(&b.build("simulated time limit reached"));
        let names: Vec<&str> = v.iter().map(|v| v.checker).collect();
        assert_eq!(
            names,
            [
                "at_most_one_receipt",
                "completed_needs_verified_result",
                "settles_within_bound"
            ]
        );
        let all: Vec<&str> = CHECKERS.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            all,
            [
                "at_most_one_receipt",
                "completed_needs_verified_result",
                "no_advance_after_cancel",
                "unknown_is_queryable",
                "no_divergence",
                "no_second_operation",
                "poll_rate_within_bound",
                "outbox_traceable",
                "settles_within_bound",
                "input_answer_matches_round",
                "cancel_only_when_asked",
                "no_action_from_old_epoch",
                "retry_after_honoured",
                "no_stale_overwrite",
                "no_blind_resubmit",
                "retired_adapter_drains",
                "shadow_never_reaches_outbox",
                "no_send_after_receipt",
                "outbox_payload_matches_truth",
                "clicked_cancel_is_acted_on",
                "no_false_unknown",
                "poll_interval_honoured",
                "no_lost_update",
                "no_write_from_fenced_epoch",
                "digest_kept_across_restart",
                "no_needless_effect_reconciliation",
                "stall_only_behind_another_process",
                "task_calls_only_where_listed",
                "runnable_call_not_refused",
                "nothing_written_after_crash",
                "sync_reply_awaited",
                "effect_reconciliation_raised",
                "cancel_within_budget",
                "cancel_requeried_on_time"
            ]
        );
    }

    #[test]
    fn no_checker_panics_on_odd_traces() {
        // Events in any order, empty paths, a Final before Begin, duplicates: judged, not panicked on.
        let full = all_paths().build(SETTLED);
        let mut reversed = full.clone();
        reversed.events.reverse();
        let mut odd = full.clone();
        odd.events.push(TraceEvent {
            t_ms: 0,
            what: What::Exec {
                epoch: 0,
                incarnation: 0,
                obs: toolop::runner::Observation::Moved {
                    node: String::new(),
                    event: String::new(),
                    path: vec![],
                    version: 0,
                },
            },
        });
        odd.events.push(TraceEvent {
            t_ms: u64::MAX,
            what: What::Caller {
                action: crate::trace::CallerAction::Submit,
                node: "ghost".into(),
            },
        });
        for trace in [reversed, odd, Trace::default()] {
            let _ = check_all(&trace);
            let _ = crate::judge::metrics::measure(&trace);
        }
    }
}
