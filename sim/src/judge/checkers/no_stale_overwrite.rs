//! Always: a late answer never overwrites a newer one. Every request of a call node carries a
//! sequence number; once an executor has applied the answer to request `s` (the step for that
//! reply moved or kept the record), an answer to an older request `s' < s` that reaches the same
//! executor is rejected (stale), never applied: no `Moved` follows it, and no `Stayed` either
//! while the record is not final (a final record may note a late completion without a change).
//! Judged per executor incarnation, over every request kind (polls, cancels, lookups, fetches).
//!
//! One exception, the core's on purpose: a late status view (a poll's `status`, a cancel's
//! `cancel_ack`; a cancel the server took or refused as too late, and a read's input requests,
//! show the operation held as well) may be kept, never moved on, once a not-found for the node has reached an
//! executor. The core then uses it only as proof that the operation outlived that 404 (it resets
//! the not-found streak; `src/core/handlers.rs`, `stale_view_shows_ours`). The not-found is the
//! world's fact: a frame the network carried to an executor showing the operation not found
//! (mcp_replicas seeds 4119 and 5823: a replica's 404, then a poll answer that arrived after a
//! newer cancel's).
//!
//! A 429 or 503 is not an answer applied over: it comes from in front of the server and says
//! nothing of the operation (nor does an answer that could not be read, a cut or garbled
//! reply), so an older answer that arrives after it is not stale (the core's
//! rule, mcp_replicas seed 1731344: a replica's 503 made the primary's older "completed" stale,
//! and a lagging 404 then handed a completed task to a person).
//!
//! And one the world grants: a late result read (a result, or a failed task's error) that moves
//! the record from FETCHING_RESULT to ACCEPTED, when the network had carried an intact result of
//! the node to that executor by the time the answer was received. An ended task's stored outcome
//! does not change, so a late copy is no older than anything applied since (mcp_replicas seed
//! 501214: a verified result lost its commit to a replica's fetch, and was stale when stepped
//! again; mcp_ext_replicas seed 5046961, session 43: a failed task's error, the same way). Whether it was the
//! right result is `completed_needs_verified_result`'s and `no_divergence`'s to judge.

use std::collections::BTreeMap;

use toolop::record::LocalState;
use toolop::runner::Observation;

use super::completed_needs_verified_result::carries_result;
use super::view::{arrivals, frames, judge, observations, reply_event, ExecId, View};
use super::Violation;
use crate::trace::{Dir, NetVerdict, Shows, Trace};

pub const NAME: &str = "no_stale_overwrite";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// A received answer waiting for the step that handles it.
struct Answer {
    event: String,
    seq: u64,
    at_ms: u64,
    /// The newest sequence number this executor had applied for the node when it arrived.
    stale_behind: Option<u64>,
    /// A 429 or 503: applying it makes no older answer stale.
    throttle: bool,
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    let mut applied: BTreeMap<(ExecId, &str), u64> = BTreeMap::new();
    let mut waiting: BTreeMap<(ExecId, &str), Answer> = BTreeMap::new();
    // The node's local state as the last move left it (any executor).
    let mut state: BTreeMap<&str, LocalState> = BTreeMap::new();
    let not_found_at = first_not_found_delivered(v.trace);
    let results_in = intact_results_delivered(v.trace);
    for (t, exec, obs) in observations(v.trace) {
        match obs {
            Observation::Received {
                node,
                kind,
                seq,
                reply,
                ..
            } => {
                let key = (exec, node.as_str());
                let stale_behind = applied.get(&key).copied().filter(|&a| *seq < a);
                waiting.insert(
                    key,
                    Answer {
                        event: reply_event(kind, reply),
                        seq: *seq,
                        at_ms: t,
                        stale_behind,
                        throttle: matches!(*reply, "rate_limited" | "unavailable" | "malformed"),
                    },
                );
            }
            Observation::Moved { node, event, .. } | Observation::Stayed { node, event } => {
                let key = (exec, node.as_str());
                let moved = matches!(obs, Observation::Moved { .. });
                let was_final = state.get(node.as_str()).is_some_and(|s| s.is_final());
                if let Observation::Moved { path, .. } = obs {
                    if let Some(last) = path.last() {
                        state.insert(node, *last);
                    }
                }
                let Some(a) = waiting.remove(&key).filter(|a| a.event == *event) else {
                    continue;
                };
                let proof_of_life = !moved
                    && STATUS_VIEWS.contains(&a.event.as_str())
                    && not_found_at
                        .get(node.as_str())
                        .is_some_and(|&nf| nf <= a.at_ms);
                let ended_result = match obs {
                    Observation::Moved { path, .. } => {
                        ENDED_OUTCOMES.contains(&a.event.as_str())
                            && path.first() == Some(&LocalState::FetchingResult)
                            && path.last() == Some(&LocalState::Accepted)
                            && results_in
                                .get(&(node.as_str(), exec))
                                .is_some_and(|&at| at <= a.at_ms)
                    }
                    _ => false,
                };
                match a.stale_behind {
                    Some(_) if proof_of_life || ended_result => {}
                    Some(newer) if moved || !was_final => out.push(Violation {
                        checker: NAME,
                        node: Some(node.clone()),
                        detail: format!(
                            "executor epoch {} incarnation {} applied {} for request {} (received at {} ms) after applying request {newer}: {}",
                            exec.0,
                            exec.1,
                            a.event,
                            a.seq,
                            a.at_ms,
                            if moved { "the record moved" } else { "the record was kept" }
                        ),
                    }),
                    Some(_) => {}
                    None if a.throttle => {}
                    None => {
                        applied.insert(key, a.seq);
                    }
                }
            }
            Observation::Rejected { node, .. }
            | Observation::Refused { node, .. }
            | Observation::LedgerRefused { node, .. } => {
                waiting.remove(&(exec, node.as_str()));
            }
            _ => {}
        }
    }
    out
}

/// The fetch answers that are an ended task's whole stored outcome: a result, or a failed
/// task's error (the core's `late_result_of_ours`; mcp_ext_replicas seed 5046961).
const ENDED_OUTCOMES: [&str; 2] = ["reply:fetch:result", "reply:fetch:result_is_error"];

/// The replies that show the operation held by the server: a view of its status, a cancel the
/// server took or refused as too late (the request named the operation), and the input requests
/// a read of it drew (the core's `stale_view_shows_ours`; mcp_ext_replicas seed 97899).
const STATUS_VIEWS: [&str; 6] = [
    "reply:poll:status",
    "reply:cancel:cancel_ack",
    "reply:cancel:cancel_pending",
    "reply:cancel:cancel_rejected_terminal",
    "reply:poll:input_requests",
    "reply:fetch:input_requests",
];

/// Per call node and executor, when the network first carried an intact result of the node to
/// that executor.
fn intact_results_delivered(trace: &Trace) -> BTreeMap<(&str, ExecId), u64> {
    let mut out = BTreeMap::new();
    for f in arrivals(trace) {
        if let (Some(node), Some(at), true) = (f.node, f.arrives_at_ms, f.intact()) {
            if carries_result(&f) {
                out.entry((node, f.exec)).or_insert(at);
            }
        }
    }
    out
}

/// Per call node, when a frame showing its operation not found first left for an executor
/// (and was not lost on the way).
fn first_not_found_delivered(trace: &Trace) -> BTreeMap<&str, u64> {
    let mut out = BTreeMap::new();
    for f in frames(trace) {
        if let (Dir::ToExecutor, Some(node), Some(Shows::NotFound { .. })) =
            (f.dir, f.node, f.shows)
        {
            if !matches!(f.verdict, NetVerdict::Lost) {
                out.entry(node).or_insert(f.t_ms);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use toolop::record::LocalState::*;

    fn recv(b: &mut Tb, t: u64, kind: &'static str, seq: u64, reply: &'static str) {
        b.at(t).obs(Observation::Received {
            node: "n1".into(),
            kind,
            seq,
            reply,
            retry_after_ms: None,
        });
    }

    /// n1 in INPUT_REQUIRED: poll 3 and cancel 4 are out; the cancel answer comes first and is
    /// applied; poll 3's answer (a status) comes late.
    fn reordered() -> Tb {
        reordered_with("status")
    }

    fn reordered_with(late_reply: &'static str) -> Tb {
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        recv(&mut b, 4_000, "poll", 2, "status");
        b.moved("n1", &[Working, InputRequired]);
        recv(&mut b, 5_000, "cancel", 4, "cancel_rejected_terminal");
        b.obs(Observation::Stayed {
            node: "n1".into(),
            event: "reply:cancel:cancel_rejected_terminal".into(),
        });
        recv(&mut b, 5_010, "poll", 3, late_reply);
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        let mut b = reordered();
        b.obs(Observation::Rejected {
            node: "n1".into(),
            event: "reply:poll:status".into(),
            reason: toolop::core::Rejection::StaleAnswer {
                seq: 3,
                applied_seq: 4,
            },
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // A final record may note a late answer without changing.
        let mut b = reordered();
        b.at(4_500)
            .moved("n1", &[InputRequired, CancelRequested, CancelledAccepted]);
        b.at(5_010).obs(Observation::Stayed {
            node: "n1".into(),
            event: "reply:poll:status".into(),
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Another incarnation has applied nothing yet.
        let mut b = reordered();
        b.exec(1, 2).at(5_010);
        recv(&mut b, 5_020, "poll", 1, "status");
        b.obs(Observation::Moved {
            node: "n1".into(),
            event: "reply:poll:status".into(),
            path: vec![InputRequired, Working],
            version: 0,
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn an_answer_older_than_a_throttle_is_not_stale() {
        // Poll 4 drew a 503 (applied: the record kept); poll 3's answer then moves the record.
        let build = |newer: &'static str| {
            let mut b = Tb::new();
            b.cancel_path("n1", 0);
            recv(&mut b, 4_000, "poll", 2, "status");
            b.moved("n1", &[Working, InputRequired]);
            recv(&mut b, 5_000, "poll", 4, newer);
            b.obs(Observation::Stayed {
                node: "n1".into(),
                event: format!("reply:poll:{newer}"),
            });
            recv(&mut b, 5_010, "poll", 3, "status");
            b.obs(Observation::Moved {
                node: "n1".into(),
                event: "reply:poll:status".into(),
                path: vec![InputRequired, Working],
                version: 0,
            });
            check(&b.build(SETTLED))
        };
        assert_eq!(build("unavailable"), vec![]);
        assert_eq!(build("rate_limited"), vec![]);
        // An answer that could not be read says nothing either (mcp_ext_replicas seed 79499).
        assert_eq!(build("malformed"), vec![]);
        assert_eq!(
            build("status").len(),
            1,
            "a real answer still makes it stale"
        );
    }

    #[test]
    fn a_late_answer_that_moves_the_record_is_caught() {
        let mut b = reordered();
        b.obs(Observation::Moved {
            node: "n1".into(),
            event: "reply:poll:status".into(),
            path: vec![InputRequired, Working],
            version: 0,
        });
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("request 3") && v[0].detail.contains("after applying request 4"),
            "{v:?}"
        );
    }

    #[test]
    fn a_late_answer_applied_without_a_move_is_caught_while_not_final() {
        let mut b = reordered();
        b.obs(Observation::Stayed {
            node: "n1".into(),
            event: "reply:poll:status".into(),
        });
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    /// `reordered` with a not-found for n1 carried to an executor at `t_ms`.
    fn with_not_found_at(t_ms: u64) -> Tb {
        with_not_found_before("status", t_ms)
    }

    fn with_not_found_before(late_reply: &'static str, t_ms: u64) -> Tb {
        let mut b = reordered_with(late_reply);
        b.at(t_ms).net_in(
            "n1",
            crate::fake::codec::ExchangeKind::Poll,
            Shows::NotFound {
                expired: false,
                hidden: false,
            },
        );
        // Where `reordered` left off: poll 3's late answer arrived at 5,010 ms.
        b.at(5_010);
        b
    }

    #[test]
    fn a_late_status_kept_after_a_not_found_is_the_cores_proof_of_life() {
        let kept = |b: &mut Tb| {
            b.obs(Observation::Stayed {
                node: "n1".into(),
                event: "reply:poll:status".into(),
            });
        };
        let sorted = |b: &Tb| {
            let mut t = b.build(SETTLED);
            t.events.sort_by_key(|e| e.t_ms);
            t
        };
        let mut b = with_not_found_at(4_800);
        kept(&mut b);
        assert_eq!(check(&sorted(&b)), vec![]);
        // Moving on it is still an overwrite.
        let mut b = with_not_found_at(4_800);
        b.obs(Observation::Moved {
            node: "n1".into(),
            event: "reply:poll:status".into(),
            path: vec![InputRequired, Working],
            version: 0,
        });
        assert_eq!(check(&sorted(&b)).len(), 1);
        // A not-found that came only after the late answer excuses nothing.
        let mut b = with_not_found_at(5_500);
        kept(&mut b);
        assert_eq!(check(&sorted(&b)).len(), 1);
    }

    #[test]
    fn late_input_requests_kept_after_a_not_found_are_proof_of_life_too() {
        // mcp_ext_replicas seed 97899: a replica's poll drew the task's input requests; read
        // after a newer request's answer, they reset the not-found streak and were kept. Kept
        // before any not-found reached an executor, they are an overwrite.
        let run = |not_found_at: u64| {
            let mut b = with_not_found_before("input_requests", not_found_at);
            b.obs(Observation::Stayed {
                node: "n1".into(),
                event: "reply:poll:input_requests".into(),
            });
            let mut t = b.build(SETTLED);
            t.events.sort_by_key(|e| e.t_ms);
            check(&t)
        };
        assert_eq!(run(4_800), vec![]);
        assert_eq!(run(5_500).len(), 1);
    }

    /// n1 fetching: fetch 5's answer (a cut result, fetched again) is applied, then fetch 4's
    /// late result moves the record along `path`; the network carried fetch 4's result to the
    /// executor only if `intact`. (In seed 501214 fetch 5 drew a 503, which since no longer
    /// makes older answers stale.)
    fn late_result(intact: bool, path: &[LocalState]) -> Trace {
        late_outcome(intact, path, "result")
    }

    /// [`late_result`] with fetch 4's late answer `reply` (`result`, `result_is_error`, ...).
    fn late_outcome(intact: bool, path: &[LocalState], reply: &'static str) -> Trace {
        let mut b = Tb::new();
        b.at(1_000);
        recv(&mut b, 1_000, "fetch", 5, "result");
        b.obs(Observation::Stayed {
            node: "n1".into(),
            event: "reply:fetch:result".into(),
        });
        b.at(2_000);
        if intact {
            b.net_in(
                "n1",
                crate::fake::codec::ExchangeKind::Fetch,
                Shows::Outcome,
            );
        } else {
            b.net(
                Dir::ToExecutor,
                "n1",
                crate::fake::codec::ExchangeKind::Fetch,
                NetVerdict::Truncated { to_bytes: 10 },
                Some(0),
                Some(Shows::Outcome),
            );
        }
        recv(&mut b, 2_000, "fetch", 4, reply);
        b.obs(Observation::Moved {
            node: "n1".into(),
            event: format!("reply:fetch:{reply}"),
            path: path.to_vec(),
            version: 0,
        });
        b.build(SETTLED)
    }

    #[test]
    fn a_late_intact_result_accepted_while_fetching_is_no_overwrite() {
        assert_eq!(
            check(&late_result(true, &[FetchingResult, Accepted])),
            vec![]
        );
        // Not carried intact: the executor took in what the server never said.
        assert_eq!(
            check(&late_result(false, &[FetchingResult, Accepted])).len(),
            1
        );
        // A late result that moves the record anywhere else is an overwrite.
        assert_eq!(
            check(&late_result(true, &[Working, TerminalObserved])).len(),
            1
        );
    }

    #[test]
    fn a_late_intact_error_of_a_failed_task_accepted_while_fetching_is_no_overwrite() {
        let accepted = [FetchingResult, Accepted];
        assert_eq!(
            check(&late_outcome(true, &accepted, "result_is_error")),
            vec![]
        );
        assert_eq!(
            check(&late_outcome(false, &accepted, "result_is_error")).len(),
            1
        );
        // Any other late answer that accepts is an overwrite, carried intact or not.
        assert_eq!(check(&late_outcome(true, &accepted, "not_found")).len(), 1);
    }
}
