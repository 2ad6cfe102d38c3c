//! Property: no sequence of events, however hostile, makes the core write two receipts, accept
//! `completed` without a fetched and verified result, or step outside the transition table.
//! Every write it produces must also pass the ledger's own acceptance checks.

use proptest::prelude::*;

use super::transitions::ALLOWED;
use super::*;
use crate::ledger::{Ledger, MemoryLedger, Write};
use crate::protocol::{ResultView, TaskView};
use crate::record::{AdapterId, LocalState as S, ProtocolStatus as P};

const OP: &str = "op-1";

fn arb_status() -> impl Strategy<Value = P> {
    prop_oneof![
        Just(P::Working),
        Just(P::InputRequired),
        Just(P::Completed),
        Just(P::Failed),
        Just(P::Cancelled)
    ]
}

fn arb_view() -> impl Strategy<Value = TaskView> {
    (arb_status(), prop::bool::weighted(0.9)).prop_map(|(status, ours)| TaskView {
        operation_id: if ours { OP.into() } else { "op-other".into() },
        status,
        poll_interval_ms: Some(1_000),
        ttl_ms: Some(120_000),
        status_message: None,
        hint_problem: None,
    })
}

fn arb_result() -> impl Strategy<Value = ResultView> {
    (any::<bool>(), prop::bool::weighted(0.9), 0u8..3).prop_map(|(verified, ours, d)| ResultView {
        payload: serde_json::json!({"content": [{"type": "text", "text": format!("r{d}")}]}),
        is_error: false,
        related_operation_id: Some(if ours { OP.into() } else { "op-other".into() }),
        digest: format!("digest-{d}"),
        verified,
        problem: None,
    })
}

fn arb_reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        arb_view().prop_map(Reply::Submitted),
        Just(Reply::SubmitRefused {
            reason: "no".into()
        }),
        Just(Reply::SubmitOutcomeUnknown {
            reason: "may have run".into()
        }),
        arb_result().prop_map(Reply::SyncResult),
        (
            prop::collection::vec(0i64..3, 0..3),
            prop::bool::weighted(0.8)
        )
            .prop_map(|(ids, ours)| Reply::InputRequests(
                ids.into_iter()
                    .map(|id| InputRequest {
                        server_request_id: serde_json::json!(id),
                        related_operation_id: Some(if ours {
                            OP.into()
                        } else {
                            "op-other".into()
                        }),
                        message: "ok?".into(),
                        requested_schema: serde_json::json!({}),
                        schema_digest: "s".into(),
                        raw: serde_json::json!({}),
                    })
                    .collect()
            )),
        arb_view().prop_map(Reply::LookupFound),
        Just(Reply::LookupNotFound),
        Just(Reply::LookupUnsupported),
        arb_view().prop_map(Reply::Status),
        Just(Reply::NotFound {
            message: "gone".into()
        }),
        (0u64..60_000).prop_map(|ms| Reply::RateLimited {
            retry_after_ms: Some(ms)
        }),
        Just(Reply::Unavailable {
            retry_after_ms: None
        }),
        Just(Reply::Accepted),
        arb_result().prop_map(Reply::Result),
        Just(Reply::ResultIsError {
            code: -32000,
            message: "boom".into()
        }),
        Just(Reply::NoResultStored {
            message: "none".into()
        }),
        arb_view().prop_map(Reply::CancelAcknowledged),
        Just(Reply::CancelPending),
        Just(Reply::CancelRejectedTerminal {
            message: "terminal".into()
        }),
        Just(Reply::Error {
            message: "x".into()
        }),
        Just(Reply::Malformed {
            reason: "truncated".into()
        }),
    ]
}

fn arb_kind() -> impl Strategy<Value = RequestKind> {
    prop_oneof![
        Just(RequestKind::Submit),
        Just(RequestKind::SubmitSync),
        Just(RequestKind::Lookup),
        Just(RequestKind::Poll),
        Just(RequestKind::Fetch),
        Just(RequestKind::Cancel),
    ]
}

fn arb_timer() -> impl Strategy<Value = Timer> {
    prop_oneof![
        Just(Timer::SubmitDue),
        Just(Timer::LookupDue),
        Just(Timer::PollDue),
        Just(Timer::FetchDue),
        Just(Timer::CancelRequery),
        (0u32..3).prop_map(|round| Timer::ApprovalDeadline { round }),
        Just(Timer::SubmissionLease),
    ]
}

/// An event with its sequence number given relative to the newest send, so it lands near it.
#[derive(Clone, Debug)]
enum Ev {
    Plain(Event),
    Reply {
        kind: RequestKind,
        seq_back: u64,
        old_epoch: bool,
        reply: Reply,
    },
    /// A reply to whatever was sent last: the common case, which random kinds rarely hit.
    ReplyToLast {
        reply: Reply,
    },
    Lost {
        kind: RequestKind,
        seq_back: u64,
        loss: Loss,
    },
}

fn arb_ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        1 => Just(Ev::Plain(Event::Start)),
        1 => Just(Ev::Plain(Event::Resume)),
        4 => arb_timer().prop_map(|t| Ev::Plain(Event::Timer(t))),
        10 => (arb_kind(), 0u64..3, prop::bool::weighted(0.05), arb_reply())
            .prop_map(|(kind, seq_back, old_epoch, reply)| Ev::Reply { kind, seq_back, old_epoch, reply }),
        2 => (arb_kind(), 0u64..2, prop_oneof![Just(Loss::Deadline), Just(Loss::ConnectionGone)])
            .prop_map(|(kind, seq_back, loss)| Ev::Lost { kind, seq_back, loss }),
        12 => arb_reply().prop_map(|reply| Ev::ReplyToLast { reply }),
        2 => (0i64..3, prop::bool::weighted(0.9)).prop_map(|(id, ours)| Ev::Plain(Event::InputRequested(InputRequest {
            server_request_id: serde_json::json!(id),
            related_operation_id: Some(if ours { OP.into() } else { "op-other".into() }),
            message: "ok?".into(),
            requested_schema: serde_json::json!({}),
            schema_digest: "s".into(),
            raw: serde_json::json!({}),
        }))),
        2 => (0u32..3, any::<bool>()).prop_map(|(round, good)| Ev::Plain(Event::ApprovalReplied {
            round,
            schema_digest: if good { "s".into() } else { "other".into() },
            reply: ApprovalReply::Decline,
        })),
        1 => Just(Ev::Plain(Event::CancelClicked)),
        1 => Just(Ev::Plain(Event::CallerDetached)),
        1 => arb_view().prop_map(|v| Ev::Plain(Event::StatusPushed(v))),
    ]
}

/// 2,000 cases unless `PROPTEST_CASES` (proptest's own variable) says otherwise: `make mutation`
/// lowers it, since this one test is most of the lib tests' time and every mutant pays for it.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn no_event_sequence_breaks_the_acceptance_rules(
        evs in prop::collection::vec((0u64..40_000, 0u32..1_000, arb_ev()), 1..60),
        key_lookup in any::<bool>(),
        synchronous in prop::bool::weighted(0.1),
    ) {
        let cfg = CoreConfig { key_lookup, ..CoreConfig::default() };
        let mut ledger = MemoryLedger::new();
        let mut first = ToolOperation::new("n1", "t", "v1", serde_json::json!({}), AdapterId::Mcp20251125, "k1", 1, 0, 300_000);
        first.synchronous = synchronous;
        let mut rec = ledger.insert(first, 1).unwrap();
        let mut now_ms = 0;
        let mut accepts = 0;
        let mut last_sent: Option<RequestKind> = None;
        let mut outstanding = false;
        let mut timers = std::collections::BTreeSet::new();
        // Set once the core took an answer saying the tool may have run without a task.
        let mut maybe_ran = false;
        for (dt, jitter, ev) in evs {
            now_ms += dt;
            let sent = rec.poll_cursor.sent_seq;
            let event = match ev {
                Ev::Plain(e) => e,
                Ev::Reply { kind, seq_back, old_epoch, reply } => Event::Reply {
                    kind, seq: sent.saturating_sub(seq_back), epoch: if old_epoch { 0 } else { rec.execution_epoch }, sent_ms: None, reply,
                },
                Ev::Lost { kind, seq_back, loss } => Event::Lost { kind, seq: sent.saturating_sub(seq_back), epoch: rec.execution_epoch, loss },
                Ev::ReplyToLast { reply } => Event::Reply { kind: last_sent.unwrap_or(RequestKind::Poll), seq: sent, epoch: rec.execution_epoch, sent_ms: None, reply },
            };
            let ctx = Ctx { now_ms, jitter_permille: jitter, epoch: 1, process: 1, overtaken_sender_until_ms: None };
            let step = step(&rec, &event, &ctx, &cfg);
            match &step.outcome {
                Outcome::Refused { from, to } => prop_assert!(false, "refused {from}->{to} on {event:?}"),
                Outcome::Moved(path) => {
                    for w in path.windows(2) {
                        prop_assert!(ALLOWED.contains(&(w[0], w[1])), "{}->{} outside the table", w[0], w[1]);
                    }
                }
                _ => {}
            }
            if rec.local_state.is_final() {
                prop_assert_eq!(step.record.local_state, rec.local_state, "a final state changed");
            }
            let resubmits = step.commands.iter().any(|c| matches!(c, Command::Send { out: Outbound::Submit { .. } | Outbound::SubmitSync { .. }, .. }));
            prop_assert!(!(maybe_ran && resubmits), "submitted again after the server said the tool may have run: {event:?}");
            if matches!(&event, Event::Reply { reply: Reply::SubmitOutcomeUnknown { .. }, .. }) && matches!(step.outcome, Outcome::Moved(_)) {
                prop_assert_eq!(step.record.local_state, S::Unknown);
                maybe_ran = true;
            }
            // Liveness: a node that is not final must always have something that will wake it:
            // a pending timer, an outstanding request, or the approval gate / an input stream.
            let answers_newest = match &event {
                Event::Reply { kind, seq, epoch, .. } | Event::Lost { kind, seq, epoch, .. } => {
                    *seq == rec.poll_cursor.sent_seq && *seq > rec.poll_cursor.applied_seq && Some(*kind) == last_sent && *epoch == rec.execution_epoch
                }
                _ => false,
            };
            if answers_newest {
                outstanding = false;
            }
            if let Event::Timer(t) = &event {
                timers.remove(t);
            }
            for c in &step.commands {
                match c {
                    Command::Send { out, .. } => {
                        last_sent = Some(out.kind());
                        outstanding = out.kind().expects_reply();
                    }
                    Command::Schedule { timer, .. } => {
                        timers.insert(*timer);
                    }
                    _ => {}
                }
            }
            // Waiting on the approval gate has its own wake-up (the deadline timer); an open
            // input stream must be an outstanding request like any other.
            let waiting_on_input = step.record.local_state == S::InputRequired && step.record.pending_input.is_some();
            if !step.record.local_state.is_final() && !waiting_on_input && step.record.submit_attempts > 0 {
                // A timer left over from an earlier state fires into nothing: it does not count.
                let useful = timers.iter().any(|t| matches!((t, step.record.local_state),
                    (Timer::SubmitDue, S::Submitting | S::NotFoundSafe)
                    | (Timer::LookupDue, S::SubmissionUnknown)
                    | (Timer::PollDue, S::Working | S::InputRequired)
                    | (Timer::CancelRequery, S::CancelRequested)
                    | (Timer::SubmissionLease, S::Submitting)
                    | (Timer::FetchDue, S::TerminalObserved | S::FetchingResult)));
                prop_assert!(outstanding || useful, "nothing armed after {event:?} in {}: the node would stall", step.record.local_state);
            }
            let mut accept = None;
            let mut reconcile = None;
            let mut effect = None;
            for c in &step.commands {
                match c {
                    Command::Accept(spec) => {
                        accepts += 1;
                        prop_assert!(accepts <= 1, "two receipts");
                        if spec.terminal == TerminalState::Completed {
                            let fetched = match &event {
                                Event::Reply { kind: RequestKind::Fetch, reply: Reply::Result(rv), .. }
                                | Event::Reply { kind: RequestKind::SubmitSync | RequestKind::Submit, reply: Reply::SyncResult(rv), .. } => Some(rv),
                                _ => None,
                            };
                            let rv = fetched.expect("completed accepted without a fetched result");
                            prop_assert!(rv.verified, "accepted an unverified result");
                            let inline = matches!(event, Event::Reply { reply: Reply::SyncResult(_), .. });
                            if rec.synchronous {
                                prop_assert!(inline, "a synchronous record accepted other than by its reply");
                            } else if !inline {
                                prop_assert_eq!(rv.related_operation_id.as_deref(), Some(OP));
                            }
                            prop_assert_eq!(spec.result_digest.as_deref(), Some(rv.digest.as_str()));
                        }
                        accept = Some(spec.clone());
                    }
                    Command::Reconcile { reason } => reconcile = Some(reason.clone()),
                    Command::EffectReconciliation { reason } => effect = Some(reason.clone()),
                    _ => {}
                }
            }
            if step.record != rec {
                let w = Write { expected_version: rec.version, writer_epoch: 1, record: step.record.clone(), accept, reconcile, effect, now_ms };
                let stored = ledger.commit(w);
                prop_assert!(stored.is_ok(), "ledger refused a core write: {:?} after {event:?}", stored);
                rec = stored.unwrap();
            }
        }
        let receipts = ledger.receipts().unwrap();
        prop_assert!(receipts.len() <= 1);
        prop_assert_eq!(receipts.len(), ledger.outbox().unwrap().len());
        if rec.local_state == S::CancelledAccepted {
            prop_assert!(rec.cancel_generation > 0);
        }
    }
}
