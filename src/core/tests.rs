//! Data-driven tests of the core: each scenario is a list of events and the expected rendering
//! of what the core did (`event => outcome [commands]`), one line per event.

use super::handlers::Machine;
use super::transitions::ALLOWED;
use super::*;
use crate::protocol::{ResultView, TaskView};
use crate::record::{AdapterId, LocalState as S, ProtocolStatus as P};

const OP: &str = "op-1";

fn cfg() -> CoreConfig {
    CoreConfig {
        poll: PollPolicy {
            jitter_fraction: 0.0,
            ..PollPolicy::default()
        },
        ..CoreConfig::default()
    }
}

fn new_rec() -> ToolOperation {
    ToolOperation::new(
        "n1",
        "report",
        "v1",
        serde_json::json!({"m": 1}),
        AdapterId::Mcp20251125,
        "key-n1",
        1,
        0,
        600_000,
    )
}

fn view(status: P) -> TaskView {
    TaskView {
        operation_id: OP.into(),
        status,
        poll_interval_ms: Some(1_000),
        ttl_ms: Some(60_000),
        status_message: None,
        hint_problem: None,
    }
}

fn result(verified: bool) -> ResultView {
    ResultView {
        payload: serde_json::json!({"content": [{"type": "text", "text": "done"}]}),
        is_error: false,
        related_operation_id: Some(OP.into()),
        digest: "d-1".into(),
        verified,
        problem: None,
    }
}

fn input(id: i64) -> InputRequest {
    InputRequest {
        server_request_id: serde_json::json!(id),
        related_operation_id: Some(OP.into()),
        message: "ok?".into(),
        requested_schema: serde_json::json!({"type": "object"}),
        schema_digest: "s-1".into(),
        raw: serde_json::json!({"id": id}),
    }
}

struct Sim {
    rec: ToolOperation,
    cfg: CoreConfig,
    now_ms: u64,
    epoch: u64,
    /// The executor process stepping the events (`Ctx::process`).
    process: u64,
    /// What the runner says of the overtaken request's sender (`Ctx::overtaken_sender_until_ms`).
    overtaken_sender_until_ms: Option<u64>,
    log: Vec<String>,
    hops: Vec<(S, S)>,
}

impl Sim {
    fn new() -> Sim {
        Sim {
            rec: new_rec(),
            cfg: cfg(),
            now_ms: 0,
            epoch: 1,
            process: 1,
            overtaken_sender_until_ms: None,
            log: vec![],
            hops: vec![],
        }
    }

    fn at(&mut self, now_ms: u64) -> &mut Sim {
        self.now_ms = now_ms;
        self
    }

    fn ev(&mut self, e: Event) -> &mut Sim {
        let ctx = Ctx {
            now_ms: self.now_ms,
            jitter_permille: 0,
            epoch: self.epoch,
            process: self.process,
            overtaken_sender_until_ms: self.overtaken_sender_until_ms,
        };
        let s = step(&self.rec, &e, &ctx, &self.cfg);
        if let Outcome::Moved(path) = &s.outcome {
            for w in path.windows(2) {
                self.hops.push((w[0], w[1]));
            }
        }
        self.log.push(format!("{} => {}", e.name(), render(&s)));
        self.rec = s.record;
        self
    }

    fn reply(&mut self, kind: RequestKind, reply: Reply) -> &mut Sim {
        let seq = self.rec.poll_cursor.sent_seq;
        self.ev(Event::Reply {
            kind,
            seq,
            epoch: self.rec.execution_epoch,
            sent_ms: None,
            reply,
        })
    }

    /// The newest request got no reply by its deadline.
    fn lost(&mut self, kind: RequestKind) -> &mut Sim {
        self.lost_by(kind, Loss::Deadline)
    }

    /// The newest request's connection closed for good under it.
    fn cut(&mut self, kind: RequestKind) -> &mut Sim {
        self.lost_by(kind, Loss::ConnectionGone)
    }

    fn lost_by(&mut self, kind: RequestKind, loss: Loss) -> &mut Sim {
        let seq = self.rec.poll_cursor.sent_seq;
        self.ev(Event::Lost {
            kind,
            seq,
            epoch: self.rec.execution_epoch,
            loss,
        })
    }

    fn timer(&mut self, t: Timer) -> &mut Sim {
        self.ev(Event::Timer(t))
    }

    /// Start, get an id, and stand in WORKING.
    fn working(&mut self) -> &mut Sim {
        self.ev(Event::Start)
            .reply(RequestKind::Submit, Reply::Submitted(view(P::Working)))
    }

    /// One cancel attempt allowed, refused 503; process 2 takes the node up and says the
    /// cancel again (#3); this process's read (#4, at 100 ms) overtakes it unanswered and
    /// shows the task working with the attempts spent.
    fn last_cancel_overtaken_by_a_read(&mut self) -> &mut Sim {
        self.cfg.max_cancel_attempts = 1;
        self.working().ev(Event::CancelClicked);
        self.reply(
            RequestKind::Cancel,
            Reply::Unavailable {
                retry_after_ms: Some(1_000),
            },
        );
        self.process = 2;
        self.ev(Event::Resume);
        self.process = 1;
        self.at(100)
            .timer(Timer::CancelRequery)
            .reply(RequestKind::Poll, Reply::Status(view(P::Working)))
    }
}

fn render(s: &Step) -> String {
    let outcome = match &s.outcome {
        Outcome::Moved(path) => path.iter().map(|p| p.name()).collect::<Vec<_>>().join("->"),
        Outcome::Stayed => "stay".into(),
        Outcome::Rejected(r) => format!("rejected:{}", r.name()),
        Outcome::Refused { from, to } => format!("REFUSED {from}->{to}"),
    };
    let cmds: Vec<String> = s
        .commands
        .iter()
        .map(|c| match c {
            Command::Send { out, seq } => format!("send:{}#{}", out.kind().name(), seq),
            Command::Schedule { at_ms, timer } => format!(
                "at{}:{}",
                at_ms,
                Event::Timer(*timer).name().trim_start_matches("timer:")
            ),
            Command::AskApproval { round, .. } => format!("ask:r{round}"),
            Command::Accept(a) => format!("accept:{}", a.terminal.name()),
            // The hand-off's reason says whether the executor reckoned the task expired: the
            // expiry rules are otherwise seen only in timings.
            Command::Reconcile { reason } if reason.contains("(after the expected expiry)") => {
                "reconcile:after_expiry".into()
            }
            Command::Reconcile { .. } => "reconcile".into(),
            Command::EffectReconciliation { .. } => "effect".into(),
        })
        .collect();
    if cmds.is_empty() {
        outcome
    } else {
        format!("{outcome} [{}]", cmds.join(" "))
    }
}

type Script = fn(&mut Sim);

/// (name, script, expected lines). Each expectation was read and judged, not pasted blindly.
const SCENARIOS: &[(&str, Script, &str)] = &[
    (
        "happy path: submit, poll, observe, fetch, accept",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(true)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        "lost submit is resolved by key, never re-minted",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit).timer(Timer::LookupDue);
            s.reply(RequestKind::Lookup, Reply::LookupFound(view(P::Working)));
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:lookup:lookup_found => SUBMISSION_UNKNOWN->WORKING [at1000:poll_due]",
    ),
    (
        "proved never created: resubmit with the same key",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit).timer(Timer::LookupDue);
            s.reply(RequestKind::Lookup, Reply::LookupNotFound).timer(Timer::SubmitDue);
            s.reply(RequestKind::Submit, Reply::Submitted(view(P::Working)));
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:lookup:lookup_not_found => SUBMISSION_UNKNOWN->NOT_FOUND_SAFE [at0:submit_due]
         timer:submit_due => NOT_FOUND_SAFE->SUBMITTING [send:submit#3]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]",
    ),
    (
        "not found by key after the key retention proves nothing: manual reconciliation",
        |s| {
            s.cfg.key_retention_ms = Some(20_000);
            s.ev(Event::Start).lost(RequestKind::Submit).at(25_000).timer(Timer::LookupDue);
            s.reply(RequestKind::Lookup, Reply::LookupNotFound);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:lookup:lookup_not_found => SUBMISSION_UNKNOWN->UNKNOWN [reconcile]",
    ),
    (
        "no lookup by key: an unknown submission goes to manual reconciliation",
        |s| {
            s.cfg.key_lookup = false;
            s.ev(Event::Start).lost(RequestKind::Submit);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN->UNKNOWN [reconcile]",
    ),
    (
        "lookups spent, and resubmissions spent, end in UNKNOWN",
        |s| {
            s.cfg.max_lookup_attempts = 1;
            s.ev(Event::Start).lost(RequestKind::Submit).timer(Timer::LookupDue).lost(RequestKind::Lookup).timer(Timer::LookupDue);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         lost:lookup => stay [at1000:lookup_due]
         timer:lookup_due => SUBMISSION_UNKNOWN->UNKNOWN [reconcile]",
    ),
    (
        "not found safe, but resubmissions spent",
        |s| {
            s.cfg.max_submit_attempts = 1;
            s.ev(Event::Start).lost(RequestKind::Submit).timer(Timer::LookupDue);
            s.reply(RequestKind::Lookup, Reply::LookupNotFound).timer(Timer::SubmitDue);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:lookup:lookup_not_found => SUBMISSION_UNKNOWN->NOT_FOUND_SAFE [at0:submit_due]
         timer:submit_due => NOT_FOUND_SAFE->UNKNOWN [reconcile]",
    ),
    (
        "refused submission is a receipt of its own",
        |s| {
            s.ev(Event::Start).reply(RequestKind::Submit, Reply::SubmitRefused { reason: "-32601".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submit_refused => SUBMITTING->REJECTED [accept:rejected]",
    ),
    (
        "the tool may have run without a task (TS -32602 'Invalid task creation result'): manual reconciliation, no lookup, no resubmit",
        |s| {
            s.ev(Event::Start).reply(RequestKind::Submit, Reply::SubmitOutcomeUnknown { reason: "-32602: Invalid task creation result".into() });
            s.timer(Timer::SubmitDue).timer(Timer::LookupDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submit_outcome_unknown => SUBMITTING->SUBMISSION_UNKNOWN->UNKNOWN [reconcile]
         timer:submit_due => rejected:already_final
         timer:lookup_due => rejected:already_final",
    ),
    (
        "an unknown outcome settles even while a lookup is under way, late or not",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.timer(Timer::LookupDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Submit, seq: 1, epoch: 1, reply: Reply::SubmitOutcomeUnknown { reason: "-32603: boom".into() } });
            s.reply(RequestKind::Lookup, Reply::LookupNotFound);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:submit:submit_outcome_unknown => SUBMISSION_UNKNOWN->UNKNOWN [reconcile]
         reply:lookup:lookup_not_found => rejected:already_final",
    ),
    (
        "a synchronous call answered with an unknown outcome is never called again",
        |s| {
            s.rec.synchronous = true;
            s.ev(Event::Start).reply(RequestKind::SubmitSync, Reply::SubmitOutcomeUnknown { reason: "-32603: boom".into() });
        },
        "start => stay [send:submit_sync#1]
         reply:submit_sync:submit_outcome_unknown => SUBMITTING->SUBMISSION_UNKNOWN->UNKNOWN [reconcile]",
    ),
    (
        "synchronous tool: the reply is the result",
        |s| {
            s.rec.synchronous = true;
            s.ev(Event::Start).reply(RequestKind::SubmitSync, Reply::SyncResult(result(true)));
        },
        "start => stay [send:submit_sync#1]
         reply:submit_sync:sync_result => SUBMITTING->ACCEPTED [accept:completed]",
    ),
    (
        "a synchronous call the server made a task of is followed as that task",
        |s| {
            s.rec.synchronous = true;
            s.ev(Event::Start).reply(RequestKind::SubmitSync, Reply::Submitted(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(true)));
        },
        "start => stay [send:submit_sync#1]
         reply:submit_sync:submitted => SUBMITTING->WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#2]
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        "synchronous call lost: never called twice",
        |s| {
            s.rec.synchronous = true;
            s.ev(Event::Start).lost(RequestKind::SubmitSync);
        },
        "start => stay [send:submit_sync#1]
         lost:submit_sync => SUBMITTING->SUBMISSION_UNKNOWN->UNKNOWN [reconcile]",
    ),
    (
        "input round: ask, stale and replayed replies rejected, answer, resume",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 0, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "other".into(), reply: ApprovalReply::Decline });
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Accept { content: serde_json::json!({"ok": true}) } });
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.at(2_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         approval_replied => rejected:stale_approval
         approval_replied => rejected:stale_approval
         approval_replied => stay [send:input_response#4 at2500:poll_due]
         input_requested => rejected:replayed_input
         approval_replied => rejected:stale_approval
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => INPUT_REQUIRED->WORKING [at4250:poll_due]",
    ),
    (
        // mcp_replicas seed 275211: process 1 answered round 1; process 2 read input_required
        // and opened its stream, which carries round 2 under the same id (the TS SDK's 0). A
        // copy of round 1 reaching process 1 came on an old stream of its own: not answered
        // again, or the server takes round 1's answer as round 2's. The same copy on process
        // 2's stream is the server asking again (the answer was lost): said again there.
        "a copy of the answered request reaching a process whose stream is not the open one is not answered again",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Accept { content: serde_json::json!({"ok": true}) } });
            s.process = 2;
            s.at(2_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.process = 1;
            s.ev(Event::InputRequested(input(0)));
            s.process = 2;
            s.ev(Event::InputRequested(input(0)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         approval_replied => stay [send:input_response#4 at2500:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => stay [send:fetch#6]
         input_requested => rejected:replayed_input
         input_requested => stay [send:input_response#7 at4250:poll_due]",
    ),
    (
        "a request like the answered one after the server moved on: a late copy once, a new round on the next stream too; never answered again",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Accept { content: serde_json::json!({"ok": true}) } });
            s.at(2_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.at(5_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            // The same id and schema (a server that reuses ids): a late copy of round 1 as far
            // as one stream can tell, so refused and read again on a new stream.
            s.ev(Event::InputRequested(input(0)));
            // The server sends it on the next stream too: it asks it again, round 2, for the gate.
            s.at(9_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         approval_replied => stay [send:input_response#4 at2500:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => INPUT_REQUIRED->WORKING [at4250:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#7]
         input_requested => rejected:replayed_input [at8375:poll_due]
         timer:poll_due => stay [send:poll#8]
         reply:poll:status => stay [send:fetch#9]
         input_requested => stay [ask:r2 at69000:approval_deadline]",
    ),
    (
        "a late copy of the answered round just before the next round, under one reused id: the copy is refused, the next round is asked",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.at(2_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.at(5_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            // mcp_sqlite seed 69158: round 1's copy lands first, then round 2 (id 0 again, other
            // content) on the same stream, which the refusal closed; the next stream carries it.
            s.ev(Event::InputRequested(input(0)));
            let mut round_2 = input(0);
            round_2.schema_digest = "s-2".into();
            s.ev(Event::InputRequested(round_2.clone()));
            s.at(9_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(round_2));
            // The person's answer to round 1's question is not round 2's.
            s.ev(Event::ApprovalReplied { round: 2, schema_digest: "s-1".into(), reply: ApprovalReply::Accept { content: serde_json::json!({"ok": true}) } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         approval_replied => stay [send:input_response#4 at2500:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => INPUT_REQUIRED->WORKING [at4250:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#7]
         input_requested => rejected:replayed_input [at8375:poll_due]
         input_requested => rejected:replayed_input
         timer:poll_due => stay [send:poll#8]
         reply:poll:status => stay [send:fetch#9]
         input_requested => stay [ask:r2 at69000:approval_deadline]
         approval_replied => rejected:stale_approval",
    ),
    (
        "something new under the answered id, even unsolicited, ends the last answer: a later copy of the answered request is not answered again",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Accept { content: serde_json::json!({"ok": true}) } });
            // mcp_replicas seed 10151: round 2 (id 0, other content) lands with no stream open.
            let mut round_2 = input(0);
            round_2.schema_digest = "s-2".into();
            s.ev(Event::InputRequested(round_2.clone()));
            // The server still shows input_required; round 1's late copy lands on our stream.
            s.at(2_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.at(5_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(round_2));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         approval_replied => stay [send:input_response#4 at2500:poll_due]
         input_requested => rejected:replayed_input
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => stay [send:fetch#6]
         input_requested => rejected:replayed_input [at4250:poll_due]
         timer:poll_due => stay [send:poll#7]
         reply:poll:status => stay [send:fetch#8]
         input_requested => stay [ask:r2 at65000:approval_deadline]",
    ),
    (
        "something new under the id of the open question: the server moved on, the new request is the round",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            // mcp_replicas seed 36439: another process answered round 1; round 2 arrives (id 0).
            let mut round_2 = input(0);
            round_2.schema_digest = "s-2".into();
            s.ev(Event::InputRequested(round_2));
            // The person's answer to round 1's question is stale; round 2's is sent.
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.ev(Event::ApprovalReplied { round: 2, schema_digest: "s-2".into(), reply: ApprovalReply::Decline });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         input_requested => stay [ask:r2 at61000:approval_deadline]
         approval_replied => rejected:stale_approval
         approval_replied => stay [send:input_response#4 at2500:poll_due]",
    ),
    (
        "a request under another id does not end the last answer: its request again on our stream gets it again",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            let mut other = input(7);
            other.schema_digest = "s-2".into();
            s.ev(Event::InputRequested(other));
            s.at(2_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at61000:approval_deadline]
         approval_replied => stay [send:input_response#4 at2500:poll_due]
         input_requested => rejected:unsolicited_input
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => stay [send:fetch#6]
         input_requested => stay [send:input_response#7 at4250:poll_due]",
    ),
    (
        "unsolicited input while working, and input for another operation, are rejected",
        |s| {
            s.working().ev(Event::InputRequested(input(7)));
            let mut other = input(8);
            other.related_operation_id = Some("op-other".into());
            s.ev(Event::InputRequested(other));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         input_requested => rejected:unsolicited_input
         input_requested => rejected:operation_mismatch",
    ),
    (
        "approval deadline declines",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0))).at(60_000).timer(Timer::ApprovalDeadline { round: 1 });
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         timer:approval_deadline => stay [send:input_response#4 at61500:poll_due]
         approval_replied => rejected:stale_approval",
    ),
    (
        "cancel acknowledged: CANCELLED_ACCEPTED with the generation bumped first",
        |s| {
            s.working().ev(Event::CancelClicked).ev(Event::CancelClicked);
            s.reply(RequestKind::Cancel, Reply::CancelAcknowledged(view(P::Cancelled)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         cancel_clicked => stay
         reply:cancel:cancel_ack => CANCEL_REQUESTED->CANCELLED_ACCEPTED [accept:cancelled]",
    ),
    (
        "cancel refused as terminal: read the state, never rewrite it as cancelled",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelRejectedTerminal { message: "terminal".into() });
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_rejected_terminal => stay [at0:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => CANCEL_REQUESTED->TERMINAL_OBSERVED [at0:fetch_due]",
    ),
    (
        "best-effort cancel taken: keep reading until a terminal read says who won",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelPending);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_pending => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#4]
         reply:poll:status => CANCEL_REQUESTED->TERMINAL_OBSERVED [at0:fetch_due]",
    ),
    (
        "AIP-151: a cancel that succeeded, then a completion: accepted as completed",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelPending);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(true)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_pending => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => CANCEL_REQUESTED->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#4]
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        "failed with no result stored (Python SDK: a tool that raised; tasks/result holds only _meta): accepted failed",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Failed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NoResultStored { message: "empty result (only _meta): no result stored".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:no_result_stored => FETCHING_RESULT->ACCEPTED [accept:failed]",
    ),
    (
        "AIP-151: done without result is its own outcome, never a failure",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::DoneWithoutResult)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NoResultStored { message: "done without result".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:no_result_stored => FETCHING_RESULT->ACCEPTED [accept:done_without_result]",
    ),
    (
        // Said again once per loss, never without one, 3 times (ANSWER_RESENDS_MAX) in quick
        // succession: cargo-mutants found both unpinned (a resend that kept `lost` set, and one
        // that did not count itself; neither broke a checker). Then once the pause since the
        // last send has passed, 30 s, then 60 s: with a plain count the executor fell silent
        // while the server kept asking, until the wait budget handed the task to a person
        // (mcp_ext_faults seeds 45046, 92752).
        "tasks extension: input requests inlined in a read, answer lost, said again once per loss, 3 times quickly, then after doubling pauses",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.lost(RequestKind::InputResponse).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            for _ in 0..3 {
                s.lost(RequestKind::InputResponse).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            }
            s.at(29_999).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.at(30_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.lost(RequestKind::InputResponse).at(89_999).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.at(90_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:input_requests => WORKING->INPUT_REQUIRED [ask:r1 at60000:approval_deadline]
         approval_replied => stay [send:input_response#3 at1500:poll_due]
         lost:input_response => stay
         timer:poll_due => stay [send:poll#4]
         reply:poll:input_requests => stay [send:input_response#5 at2250:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:input_requests => stay [at3375:poll_due]
         lost:input_response => stay
         timer:poll_due => stay [send:poll#7]
         reply:poll:input_requests => stay [send:input_response#8 at5062:poll_due]
         lost:input_response => stay
         timer:poll_due => stay [send:poll#9]
         reply:poll:input_requests => stay [send:input_response#10 at7593:poll_due]
         lost:input_response => stay
         timer:poll_due => stay [send:poll#11]
         reply:poll:input_requests => stay [at11390:poll_due]
         timer:poll_due => stay [send:poll#12]
         reply:poll:input_requests => stay [at47084:poll_due]
         timer:poll_due => stay [send:poll#13]
         reply:poll:input_requests => stay [send:input_response#14 at50000:poll_due]
         lost:input_response => stay
         timer:poll_due => stay [send:poll#15]
         reply:poll:input_requests => stay [at109999:poll_due]
         timer:poll_due => stay [send:poll#16]
         reply:poll:input_requests => stay [send:input_response#17 at110000:poll_due]",
    ),
    (
        // The guard on saying a lost answer again: only on the newest read, and never while a
        // request not answered yet is shown (that one is a new round: the person is asked). A
        // stale read still showing the old request proves nothing about the lost answer.
        "tasks extension: a lost answer is said again on the newest read only, and a new request comes first",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.lost(RequestKind::InputResponse).timer(Timer::PollDue).timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::InputRequests(vec![input(1)]) });
            s.reply(RequestKind::Poll, Reply::InputRequests(vec![input(1), input(2)]));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:input_requests => WORKING->INPUT_REQUIRED [ask:r1 at60000:approval_deadline]
         approval_replied => stay [send:input_response#3 at1500:poll_due]
         lost:input_response => stay
         timer:poll_due => stay [send:poll#4]
         timer:poll_due => stay [send:poll#5]
         reply:poll:input_requests => stay
         reply:poll:input_requests => stay [ask:r2 at60000:approval_deadline]",
    ),
    (
        // A status read said input_required, the stream opened for it answered with nothing new
        // (our answer already reached the server): the next status read must go out. It used to
        // wait on the stream the reply had ended, with nothing else armed (the core proptest,
        // in CI of 262cc0a).
        "tasks extension: an input stream that answers with nothing new hands back to status reads",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.reply(RequestKind::Fetch, Reply::InputRequests(vec![]));
            s.timer(Timer::PollDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         reply:fetch:input_requests => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#4]",
    ),
    (
        "tasks extension: the server answered inline instead of making a task",
        |s| {
            s.ev(Event::Start).reply(RequestKind::Submit, Reply::SyncResult(result(true)));
        },
        "start => stay [send:submit#1]
         reply:submit:sync_result => SUBMITTING->ACCEPTED [accept:completed]",
    ),
    (
        "cancel ack lost: resolved by querying",
        |s| {
            s.working().ev(Event::CancelClicked).lost(RequestKind::Cancel);
            s.at(2_000).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.reply(RequestKind::Cancel, Reply::CancelAcknowledged(view(P::Cancelled)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         lost:cancel => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => stay [send:cancel#4]
         reply:cancel:cancel_ack => CANCEL_REQUESTED->CANCELLED_ACCEPTED [accept:cancelled]",
    ),
    (
        "cancel before an id exists is sent once the server names the operation",
        |s| {
            s.ev(Event::Start).ev(Event::CancelClicked).reply(RequestKind::Submit, Reply::Submitted(view(P::Working)));
        },
        "start => stay [send:submit#1]
         cancel_clicked => stay
         reply:submit:submitted => SUBMITTING->WORKING->CANCEL_REQUESTED [send:cancel#2]",
    ),
    (
        "a late completion after a confirmed cancel never advances: effect reconciliation",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelAcknowledged(view(P::Cancelled)));
            s.reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_ack => CANCEL_REQUESTED->CANCELLED_ACCEPTED [accept:cancelled]
         reply:poll:status => stay [effect]",
    ),
    (
        // mcp_faults seed 100: the server pushed `completed` for a task it had confirmed
        // cancelled. A push is advisory while the operation lives (polls decide), changes nothing
        // after any other end, and after a confirmed cancel asks for a person as a poll would.
        "a pushed status moves nothing, except a task ending after its confirmed cancel",
        |s| {
            s.working().ev(Event::StatusPushed(view(P::Completed)));
            s.ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelAcknowledged(view(P::Cancelled)));
            s.ev(Event::StatusPushed(view(P::Cancelled)));
            s.ev(Event::StatusPushed(view(P::Failed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         status_pushed => rejected:not_applicable
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_ack => CANCEL_REQUESTED->CANCELLED_ACCEPTED [accept:cancelled]
         status_pushed => stay
         status_pushed => stay [effect]",
    ),
    (
        "a late poll answer never overwrites a newer state",
        |s| {
            s.working().timer(Timer::PollDue).lost(RequestKind::Poll).timer(Timer::PollDue);
            s.reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         lost:poll => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         reply:poll:status => rejected:stale_answer",
    ),
    (
        "a poll reply naming another operation is refused, and polling goes on",
        |s| {
            s.working().timer(Timer::PollDue);
            let mut other = view(P::Completed);
            other.operation_id = "op-other".into();
            s.reply(RequestKind::Poll, Reply::Status(other));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => rejected:operation_mismatch [at1500:poll_due]",
    ),
    (
        "Retry-After on 429 pushes the next poll out",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::RateLimited { retry_after_ms: Some(30_000) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:rate_limited => stay [at30000:poll_due]",
    ),
    (
        "404 before expiry is retried, then the item goes to reconciliation",
        |s| {
            s.working();
            for _ in 0..3 {
                s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            }
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at2250:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile]",
    ),
    (
        "a late view of our own operation answering a request after the first not-found resets their count",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.timer(Timer::PollDue).lost(RequestKind::Poll);
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            // The reply to poll #3, read late (a replica on the same ledger, or a held reply).
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            // A late view of another operation proves nothing; nor does one older than the
            // streak's first not-found (poll #5's): it may predate a deletion.
            let mut other = view(P::Working);
            other.operation_id = "op-other".into();
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::Status(other) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::Status(view(P::Working)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         lost:poll => stay [at2250:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at3375:poll_due]
         reply:poll:status => stay
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at5062:poll_due]
         reply:poll:status => rejected:stale_answer
         reply:poll:status => rejected:stale_answer",
    ),
    (
        "a cancel the server took after not-founds shows the operation alive: their count starts again",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelPending);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at2250:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#4]
         reply:cancel:cancel_pending => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:not_found => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#6]
         reply:poll:not_found => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#7]
         reply:poll:not_found => CANCEL_REQUESTED->UNKNOWN [reconcile]",
    ),
    (
        // mcp_ext_replicas seeds 41830, 223964: the reckoned expiry is an estimate (an end
        // read but set aside leaves it at creation's ttl), so a 404 past it takes the streak's
        // retries like any; the hand-off then says it came after expiry.
        "404s after expiry are read again like any, then handed over as after expiry",
        |s| {
            s.working().at(70_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(71_500).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(73_750).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at71500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at73750:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile:after_expiry]",
    ),
    (
        // cargo-mutants: only the first sight of the end moves the expiry. A task still
        // working at 30 s leaves it at 60 s (first sight plus the ttl): 404s from 65 s are
        // after expiry, and the hand-off says so.
        "a view of a task still running does not move its expiry",
        |s| {
            s.working().at(30_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.at(65_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(67_250).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(70_625).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => stay [at31500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at67250:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at70625:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile:after_expiry]",
    ),
    (
        "truncated result refetched until verified",
        |s| {
            s.cfg.max_fetch_attempts = 2;
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(false)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Malformed { reason: "truncated".into() });
            s.timer(Timer::FetchDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:result => stay [at1000:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:malformed => FETCHING_RESULT->UNKNOWN [reconcile]
         timer:fetch_due => rejected:already_final",
    ),
    (
        // mcp_ext_replicas seed 492064: a replica's fetch (process 2, #3) was overtaken
        // unanswered by this process's; its answer held the verified result while its process
        // sat in slow commits. When this process's fetches are spent, the hand-off waits a
        // request lease after the overtaking (10 s), then concludes on the record as it stands.
        "spent fetches wait for another process's overtaken fetch a request lease before the hand-off",
        |s| {
            s.cfg.max_fetch_attempts = 2;
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.process = 2;
            s.timer(Timer::FetchDue);
            s.process = 1;
            s.at(100).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(false)));
            s.at(1_100).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Malformed { reason: "truncated".into() });
            s.at(10_099).timer(Timer::FetchDue);
            s.at(10_100).timer(Timer::FetchDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:result => stay [at1100:fetch_due]
         timer:fetch_due => stay [send:fetch#5]
         reply:fetch:malformed => stay [at10100:fetch_due]
         timer:fetch_due => stay [at11099:fetch_due]
         timer:fetch_due => FETCHING_RESULT->UNKNOWN [reconcile]",
    ),
    (
        "a fetch is counted when it comes back without a result, not when it is sent",
        |s| {
            s.cfg.max_fetch_attempts = 2;
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            // mcp_replicas seed 75111: restarts between the commit and the send; each fetched
            // again, and none of those fetches left.
            s.timer(Timer::FetchDue).timer(Timer::FetchDue).timer(Timer::FetchDue);
            s.lost(RequestKind::Fetch);
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(true)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         timer:fetch_due => stay [send:fetch#5]
         lost:fetch => stay [at1000:fetch_due]
         timer:fetch_due => stay [send:fetch#6]
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        // mcp_ext_faults seed 10341 at connection_drop 0.3 over stdio: each process's fetch
        // went with its connection, and the eighth process handed a completed task to a person.
        "a fetch cut by its connection closing is not counted; one past its deadline is",
        |s| {
            s.cfg.max_fetch_attempts = 2;
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            for _ in 0..3 {
                s.timer(Timer::FetchDue).cut(RequestKind::Fetch);
                s.ev(Event::Resume);
            }
            s.timer(Timer::FetchDue).lost(RequestKind::Fetch);
            s.timer(Timer::FetchDue).lost(RequestKind::Fetch);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         lost:fetch => stay [at1000:fetch_due]
         resume => stay [at0:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         lost:fetch => stay [at1000:fetch_due]
         resume => stay [at0:fetch_due]
         timer:fetch_due => stay [send:fetch#5]
         lost:fetch => stay [at1000:fetch_due]
         resume => stay [at0:fetch_due]
         timer:fetch_due => stay [send:fetch#6]
         lost:fetch => stay [at1000:fetch_due]
         timer:fetch_due => stay [send:fetch#7]
         lost:fetch => FETCHING_RESULT->UNKNOWN [reconcile]",
    ),
    (
        "failed task: the original error is the result",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Failed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::ResultIsError { code: -32000, message: "boom".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:result_is_error => FETCHING_RESULT->ACCEPTED [accept:failed]",
    ),
    (
        "cancelled by the server itself: accepted as cancelled, no payload",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Cancelled)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NoResultStored { message: "-32603".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:no_result_stored => FETCHING_RESULT->ACCEPTED [accept:cancelled]",
    ),
    (
        "a result for another operation is not accepted",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            let mut r = result(true);
            r.related_operation_id = Some("op-other".into());
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(r));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:result => stay [at1000:fetch_due]",
    ),
    (
        "wait budget spent: UNKNOWN, from any waiting state",
        |s| {
            s.working().at(600_000).timer(Timer::PollDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => WORKING->UNKNOWN [reconcile]",
    ),
    (
        "input required then cancel, then terminal observed from input required",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.lost(RequestKind::Fetch).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         lost:fetch => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:status => INPUT_REQUIRED->TERMINAL_OBSERVED [at0:fetch_due]",
    ),
    (
        "cancel from input required",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0))).ev(Event::CancelClicked);
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         cancel_clicked => INPUT_REQUIRED->CANCEL_REQUESTED [send:cancel#4]
         approval_replied => rejected:stale_approval",
    ),
    (
        "client disconnect is not a cancel",
        |s| {
            s.working().ev(Event::CallerDetached);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         caller_detached => stay",
    ),
    (
        "answers from an older execution epoch are rejected",
        |s| {
            s.working().timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 0, reply: Reply::Status(view(P::Completed)) });
            s.epoch = 2;
            s.ev(Event::Resume);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Completed)) });
            s.epoch = 1;
            s.ev(Event::CancelClicked);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => rejected:stale_epoch
         resume => stay [at0:poll_due]
         reply:poll:status => rejected:stale_epoch
         cancel_clicked => rejected:stale_epoch",
    ),
    (
        "restart resumes from the record alone: a sent submission becomes unknown once its reply can no longer reach its sender",
        |s| {
            s.ev(Event::Start).ev(Event::Resume);
            s.at(10_000).timer(Timer::SubmissionLease);
            s.at(12_000).ev(Event::Resume);
        },
        "start => stay [send:submit#1]
         resume => stay [at10000:submission_lease]
         timer:submission_lease => SUBMITTING->SUBMISSION_UNKNOWN [at10000:lookup_due]
         resume => stay [at12000:lookup_due]",
    ),
    (
        "a submission another process sent and read within its lease: the resumed process concludes nothing",
        |s| {
            // mcp_ext_faults seed 16364: a replica sent the submission and read its reply late
            // (slow commits); the restarted primary resumed the record meanwhile.
            s.ev(Event::Start).at(500).ev(Event::Resume);
            s.at(900).reply(RequestKind::Submit, Reply::Submitted(view(P::Working)));
            s.at(10_000).timer(Timer::SubmissionLease);
        },
        "start => stay [send:submit#1]
         resume => stay [at10500:submission_lease]
         reply:submit:submitted => SUBMITTING->WORKING [at1900:poll_due]
         timer:submission_lease => stay",
    ),
    (
        "a submission taken up late waits a full lease from the take-up, not from the sender's step",
        |s| {
            // mcp_ext_faults seed 1183230: the sender stepped the commit at 0 and its request
            // left 6 s later behind slow commits; a replica took the node up at 9 s. Its lease
            // runs to 19 s, not 10 s: a sender that reads the reply before then is heard.
            s.ev(Event::Start).at(9_000).ev(Event::Resume);
            s.at(19_000).timer(Timer::SubmissionLease);
        },
        "start => stay [send:submit#1]
         resume => stay [at19000:submission_lease]
         timer:submission_lease => SUBMITTING->SUBMISSION_UNKNOWN [at19000:lookup_due]",
    ),
    (
        "restart before the first send submits, once",
        |s| {
            s.ev(Event::Resume).ev(Event::Start);
        },
        "resume => stay [send:submit#1]
         start => rejected:not_applicable",
    ),
    (
        "restart with a pending approval asks again for the same round",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0))).ev(Event::Resume);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         resume => stay [ask:r1 at60000:approval_deadline]",
    ),
    (
        "restart in the result phase fetches again",
        |s| {
            s.working().reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed))).ev(Event::Resume);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         reply:poll:status => rejected:stale_answer
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         resume => stay [at0:fetch_due]",
    ),
    (
        "cancel spent while the operation keeps running",
        |s| {
            s.cfg.max_cancel_attempts = 1;
            s.working().ev(Event::CancelClicked).lost(RequestKind::Cancel);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         lost:cancel => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => CANCEL_REQUESTED->UNKNOWN [reconcile]",
    ),
    (
        "input required, answered, budget spent before the server resumes",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.at(650_000).timer(Timer::PollDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         approval_replied => stay [send:input_response#4 at1500:poll_due]
         timer:poll_due => INPUT_REQUIRED->UNKNOWN [reconcile]",
    ),
    (
        "terminal observed, budget spent before the fetch",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.at(700_000).timer(Timer::FetchDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->UNKNOWN [reconcile]",
    ),
    (
        "input required seen at submission, then the server goes back to working",
        |s| {
            s.ev(Event::Start).reply(RequestKind::Submit, Reply::Submitted(view(P::InputRequired)));
            s.lost(RequestKind::Fetch).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::CancelClicked);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING->INPUT_REQUIRED [send:fetch#2]
         lost:fetch => stay [at1000:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:status => INPUT_REQUIRED->WORKING [at1500:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#5]
         cancel_clicked => INPUT_REQUIRED->CANCEL_REQUESTED [send:cancel#6]",
    ),
    (
        // cargo-mutants found the guard of RejectLocally unpinned (any operator, `true`, `false`):
        // no scenario rejected a call locally at all.
        "a call the executor will not send ends REJECTED with a receipt, and nothing is sent",
        |s| {
            s.ev(Event::RejectLocally).ev(Event::RejectLocally).ev(Event::Start);
        },
        "reject_locally => SUBMITTING->REJECTED [accept:rejected]
         reject_locally => rejected:already_final
         start => rejected:already_final",
    ),
    (
        "once the submission has left, the call can no longer be rejected locally",
        |s| {
            s.ev(Event::Start).ev(Event::RejectLocally);
            s.reply(RequestKind::Submit, Reply::Submitted(view(P::Working))).ev(Event::RejectLocally);
        },
        "start => stay [send:submit#1]
         reject_locally => rejected:not_applicable
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         reject_locally => rejected:not_applicable",
    ),
    (
        // cargo-mutants: with either `&&` of the late-completion check read as `||`, a late view
        // of a cancel already confirmed, or of another operation, also called for a human.
        "after a confirmed cancel only a late completion of our own operation needs a human",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelAcknowledged(view(P::Cancelled)));
            s.reply(RequestKind::Poll, Reply::Status(view(P::Cancelled)));
            let mut other = view(P::Completed);
            other.operation_id = "op-other".into();
            s.reply(RequestKind::Poll, Reply::Status(other));
            s.reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_ack => CANCEL_REQUESTED->CANCELLED_ACCEPTED [accept:cancelled]
         reply:poll:status => rejected:already_final
         reply:poll:status => rejected:already_final
         reply:poll:status => stay [effect]",
    ),
    (
        "a late completion after a completed acceptance is refused, not sent to a human",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(true)));
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Completed)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]
         reply:poll:status => rejected:already_final",
    ),
    (
        // cargo-mutants: the resume rule for CANCEL_REQUESTED (its guard, its comparison with
        // the budget, and the count it keeps) was unpinned: no scenario restarted mid-cancel.
        "restart while cancelling says the cancel again at once, uncounted; reads that show it still running spend the budget",
        |s| {
            s.cfg.max_cancel_attempts = 2;
            // mcp_faults seed 39769: restarts between the commit and the send never sent one.
            s.working().ev(Event::CancelClicked).ev(Event::Resume).ev(Event::Resume);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         resume => stay [send:cancel#3]
         resume => stay [send:cancel#4]
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:status => stay [send:cancel#6]
         timer:cancel_requery => stay [send:poll#7]
         reply:poll:status => CANCEL_REQUESTED->UNKNOWN [reconcile]",
    ),
    (
        // aip151_faults seed 18528 (session 46): the last attempt is counted as it is
        // committed; a crash before its send left a replica to hand the node over with one
        // cancel fewer than the budget sent.
        "restart with the cancel budget spent says the last cancel again, uncounted",
        |s| {
            s.cfg.max_cancel_attempts = 1;
            s.working().ev(Event::CancelClicked).ev(Event::Resume);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         resume => stay [send:cancel#3]
         timer:cancel_requery => stay [send:poll#4]
         reply:poll:status => CANCEL_REQUESTED->UNKNOWN [reconcile]",
    ),
    (
        // mcp_ext_replicas seed 6722 with cancel_503 (session 46): a replica's cancel was
        // acknowledged after the primary's newer read showed the task working; the ack was
        // dropped as stale, and refused cancels then spent the budget on a task that held ours.
        "a stale ack of our cancel still says the server took it: reads only, and no hand-off on the budget",
        |s| {
            s.cfg.max_cancel_attempts = 2;
            s.working().ev(Event::CancelClicked).lost(RequestKind::Cancel);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            // Only an ack: a stale read, or a stale refusal of a cancel, marks nothing.
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Cancel, seq: 2, epoch: 1, reply: Reply::CancelRejectedTerminal { message: "terminal".into() } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Cancel, seq: 2, epoch: 1, reply: Reply::CancelPending });
            s.reply(RequestKind::Cancel, Reply::Unavailable { retry_after_ms: Some(1_000) });
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         lost:cancel => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => stay [send:cancel#4]
         reply:poll:status => rejected:stale_answer
         reply:cancel:cancel_rejected_terminal => rejected:stale_answer
         reply:cancel:cancel_pending => stay
         reply:cancel:unavailable => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:status => stay [at2000:cancel_requery]",
    ),
    (
        // mcp_ext_replicas seed 5061856 with cancel_503 (session 46): process 2's last cancel
        // (#3) was taken and its ack sat in a slow commit while this process's read (#4)
        // showed the task working with the attempts spent. The hand-off waits a request lease
        // after the overtaking (10 s); the ack, stale by then, marks the cancel taken.
        "spent cancels wait for another process's overtaken request a request lease before the hand-off",
        |s| {
            s.last_cancel_overtaken_by_a_read();
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Cancel, seq: 3, epoch: 1, reply: Reply::CancelPending });
            s.at(10_100).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:unavailable => stay [at2000:cancel_requery]
         resume => stay [send:cancel#3]
         timer:cancel_requery => stay [send:poll#4]
         reply:poll:status => stay [at10100:cancel_requery]
         reply:cancel:cancel_pending => stay
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:status => stay [at12100:cancel_requery]",
    ),
    (
        // The same without the ack: past the lease the spent budget hands the node over.
        "spent cancels hand over once the overtaken request's lease ran out unanswered",
        |s| {
            s.last_cancel_overtaken_by_a_read();
            s.at(10_100).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:unavailable => stay [at2000:cancel_requery]
         resume => stay [send:cancel#3]
         timer:cancel_requery => stay [send:poll#4]
         reply:poll:status => stay [at10100:cancel_requery]
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:status => CANCEL_REQUESTED->UNKNOWN [reconcile]",
    ),
    (
        "restart after a best-effort cancel was taken only reads the state again",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelPending);
            s.ev(Event::Resume);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_pending => stay [at2000:cancel_requery]
         resume => stay [at0:cancel_requery]",
    ),
    (
        // cargo-mutants: the guard on polling from INPUT_REQUIRED (`true`, `||`) was unpinned.
        "no poll while the input stream is open or an approval is pending",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.timer(Timer::PollDue).ev(Event::InputRequested(input(0))).timer(Timer::PollDue);
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.timer(Timer::PollDue);
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         timer:poll_due => stay
         input_requested => stay [ask:r1 at60000:approval_deadline]
         timer:poll_due => stay
         approval_replied => stay [send:input_response#4 at1500:poll_due]
         timer:poll_due => stay [send:poll#5]",
    ),
    (
        // cargo-mutants: with the round check of the deadline gone, an old round's deadline
        // was reported as a rejected stale approval instead of a spent timer. The poll after
        // the first answer also pins the (INPUT_REQUIRED, input_required) arm of on_status:
        // without it the server's "still asking" read as back to WORKING, and round 2 was lost.
        "the deadline of an answered round is spent; the next round keeps its own",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(1)));
            s.at(60_000).timer(Timer::ApprovalDeadline { round: 1 }).timer(Timer::ApprovalDeadline { round: 2 });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         approval_replied => stay [send:input_response#4 at1500:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => stay [send:fetch#6]
         input_requested => stay [ask:r2 at60000:approval_deadline]
         timer:approval_deadline => stay
         timer:approval_deadline => stay [send:input_response#7 at62250:poll_due]",
    ),
    (
        // mcp_replicas seed 35738: a replica's fetch was answered with the result while the
        // other process counted the primary's 404s; read as merely stale, the result was
        // dropped and the third 404 handed a completed task to manual reconciliation.
        "a late result of our operation, answering a fetch sent after the first not-found, resets the count",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            // Fetch #4's answer, read after #5's 404: stale, but the result is ours (unverified:
            // a verified one is now accepted outright, the 501214 case).
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 4, epoch: 1, reply: Reply::Result(result(false)) });
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            // A result naming no operation, or another one, proves nothing: fetch #7's
            // answers, read after #8's 404, leave the count at two, and #9's 404 is the third.
            // Fetch #7, overtaken unanswered by #8 (at 1,000 ms), holds the conclusion for a
            // request lease (10 s; its answers, refused as stale, are not written down): #9's
            // 404 just before it reads again, #10's at it concludes.
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "gone".into() });
            let mut unnamed = result(true);
            unnamed.related_operation_id = None;
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 7, epoch: 1, reply: Reply::Result(unnamed) });
            let mut other = result(true);
            other.related_operation_id = Some("op-other".into());
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 7, epoch: 1, reply: Reply::Result(other) });
            s.at(10_999).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "gone".into() });
            s.at(11_000).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:not_found => stay [at2000:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         timer:fetch_due => stay [send:fetch#5]
         reply:fetch:not_found => stay [at2000:fetch_due]
         reply:fetch:result => stay
         timer:fetch_due => stay [send:fetch#6]
         reply:fetch:not_found => stay [at2000:fetch_due]
         timer:fetch_due => stay [send:fetch#7]
         timer:fetch_due => stay [send:fetch#8]
         reply:fetch:not_found => stay [at2000:fetch_due]
         reply:fetch:result => rejected:stale_answer
         reply:fetch:result => rejected:stale_answer
         timer:fetch_due => stay [send:fetch#9]
         reply:fetch:not_found => stay [at11999:fetch_due]
         timer:fetch_due => stay [send:fetch#10]
         reply:fetch:not_found => FETCHING_RESULT->UNKNOWN [reconcile]",
    ),
    (
        // mcp_replicas seed 104378: the same, but the result arrived after the other process
        // sent its next fetch and before that fetch's 404: newer than anything applied, yet not
        // the newest request's answer, so set aside as not applicable, and the count went on.
        // (A verified one is now accepted outright: the next case. An unverified one, say
        // truncated, still names our operation, so it still proves the server held it.)
        "a result of our operation answering a fetch that is not the newest resets the count",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            // Fetch #4's answer, read while #5 is out: the result is ours, but unverified.
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 4, epoch: 1, reply: Reply::Result(result(false)) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 5, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            // A result of another operation, in the same place, proves nothing: #7's answer,
            // read while #8 is out, leaves the count at two; #8's 404 is the third, and as #7
            // counts as unanswered (its refused answer is not written down) the conclusion waits
            // a request lease after #8 overtook it; #9's 404, then, ends it.
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            let mut other = result(true);
            other.related_operation_id = Some("op-other".into());
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 7, epoch: 1, reply: Reply::Result(other) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 8, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            s.at(11_000).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:not_found => stay [at2000:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         timer:fetch_due => stay [send:fetch#5]
         reply:fetch:result => stay
         reply:fetch:not_found => stay [at2000:fetch_due]
         timer:fetch_due => stay [send:fetch#6]
         reply:fetch:not_found => stay [at2000:fetch_due]
         timer:fetch_due => stay [send:fetch#7]
         timer:fetch_due => stay [send:fetch#8]
         reply:fetch:result => rejected:not_applicable
         reply:fetch:not_found => stay [at11000:fetch_due]
         timer:fetch_due => stay [send:fetch#9]
         reply:fetch:not_found => FETCHING_RESULT->UNKNOWN [reconcile]",
    ),
    (
        // mcp_ext_faults seed 223900: a replica sent fetch #5 just before #4's verified result
        // came back; #5's reply was lost. The result of an ended task does not change, so the
        // verified result is accepted whichever of our fetches drew it. A superseded fetch's
        // refusal or 404 is still left unread, and so is a verified result of another operation.
        "a verified result answering a fetch that is not the newest is accepted",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::Unavailable { retry_after_ms: None } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            let mut other = result(true);
            other.related_operation_id = Some("op-other".into());
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::Result(other) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::Result(result(true)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:unavailable => rejected:not_applicable
         reply:fetch:not_found => rejected:not_applicable
         reply:fetch:result => rejected:not_applicable
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        // aip151_faults seed 1209602: a replica's fetch drew a failed operation's error 11 ms
        // after the primary's fetch superseded it; the newer fetch and the next met lagging
        // 404s, and the node went to a person. The error is the failed operation's whole
        // result: accepted whichever fetch drew it. Not before a read showed it failed.
        "a failed operation's error answering a fetch that is not the newest is accepted",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Failed)));
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::ResultIsError { code: 13, message: "boom".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:result_is_error => FETCHING_RESULT->ACCEPTED [accept:failed]",
    ),
    (
        // mcp_ext_replicas seed 5046961 (session 43): a process's fetch (#3 here) drew a failed
        // task's error, and its commit waited behind a slow one while a replica's newer fetch
        // (#4) met a lagging replica's 404 and was applied. Stepped again, the error was
        // "stale" and set aside; the next 404 handed a failed task to a person. The error is
        // the failed operation's whole result, as final as a verified result: accepted late
        // too, once a read showed the operation failed. Before that read it proves nothing.
        "a failed operation's error answering an older fetch than one applied is accepted",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Failed)));
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 4, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::ResultIsError { code: 13, message: "boom".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:not_found => stay [at2000:fetch_due]
         reply:fetch:result_is_error => FETCHING_RESULT->ACCEPTED [accept:failed]",
    ),
    (
        "a stale error of an operation no read showed failed stays stale",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 4, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::ResultIsError { code: 13, message: "boom".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:not_found => stay [at2000:fetch_due]
         reply:fetch:result_is_error => rejected:stale_answer",
    ),
    (
        // aip151_faults seed 282576: a replica's poll (#2 here) left 50 ms after the primary's
        // (#3), showed the task working, and was applied first; the primary's 404 to #3,
        // applied after it, is older than that sight and is not counted. Two more 404s are
        // then two, not three.
        "a not-found answering a request that left before a read that showed the operation alive is not counted",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.at(1_200);
            s.ev(Event::Reply { sent_ms: Some(1_050), kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.ev(Event::Reply { sent_ms: Some(1_000), kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            s.at(3_500).timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: Some(3_500), kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            s.at(6_000).timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: Some(6_000), kind: RequestKind::Poll, seq: 5, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         timer:poll_due => stay [send:poll#3]
         reply:poll:status => stay
         reply:poll:not_found => stay [at3450:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at6875:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at11062:poll_due]",
    ),
    (
        // mcp_ext_faults seed 462185: a replica's poll, numbered before the primary's first 404,
        // left 4 s later behind slow commits and showed the task alive. Its number says it is
        // older than the streak; when it left says it is newer than the 404, so it resets the
        // count. One that left before the 404 was taken in still proves nothing.
        "a late view whose request left after the streak's first not-found resets the count",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue);
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.at(2_000);
            s.ev(Event::Reply { sent_ms: Some(900), kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.ev(Event::Reply { sent_ms: Some(1_500), kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            // The count starts again: two more 404s are not three in a row.
            s.at(3_250).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.at(5_500).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at3250:poll_due]
         reply:poll:status => rejected:stale_answer
         reply:poll:status => rejected:stale_answer
         reply:poll:status => stay
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at6625:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at10562:poll_due]",
    ),
    (
        // mcp_ext_replicas seed 1046: a process's poll, numbered before a replica's, left 189 ms
        // after it; the replica's drew a lagging 404, and the view came back only after that
        // 404 was taken in. Requests are ordered by when they leave: the view answers the newer
        // request and resets the count. One that left before the 404's request proves nothing.
        "a late view whose request left after the request of the streak's first not-found resets the count",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.at(1_400);
            s.ev(Event::Reply { sent_ms: Some(1_000), kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
            s.at(2_000);
            s.ev(Event::Reply { sent_ms: Some(950), kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.ev(Event::Reply { sent_ms: Some(1_189), kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            // The count starts again: two more 404s are not three in a row.
            s.at(3_650).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
            s.at(6_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at3650:poll_due]
         reply:poll:status => rejected:stale_answer
         reply:poll:status => stay
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at7025:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at11062:poll_due]",
    ),
    (
        // mcp_replicas seed 1731344: a replica's poll (#3 here) drew a 503; this process's older
        // poll (#2) came back "completed". A throttle says nothing of the operation, so the
        // older answer is not stale: it is the newest word on the task. An answer older than a
        // real answer still is.
        "an answer older than a 429 or 503 is not stale",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::Unavailable { retry_after_ms: Some(5_000) } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::Status(view(P::Working)) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Completed)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:unavailable => stay [at6000:poll_due]
         reply:poll:status => stay
         reply:poll:status => rejected:stale_answer",
    ),
    (
        // mcp_ext_faults seed 472 (session 41): a tool that ignores cancels asked for input after
        // the cancel was taken, nobody answered, and the wait budget handed the live task to a
        // person. The caller asked to cancel, so the executor answers `cancel` by itself, once
        // per request, and again only when that answer was lost.
        "input asked while a best-effort cancel is taken is answered cancel, without asking anyone",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelPending);
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.lost(RequestKind::InputResponse).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1), input(2)]));
            // The same id asking something new (a server that reuses ids): a new request.
            let mut reused = input(2);
            reused.schema_digest = "s-2".into();
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::InputRequests(vec![reused]));
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_pending => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:input_requests => stay [send:input_response#4 at1500:cancel_requery]
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:input_requests => stay [at2000:cancel_requery]
         lost:input_response => stay
         timer:cancel_requery => stay [send:poll#6]
         reply:poll:input_requests => stay [send:input_response#7 at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#8]
         reply:poll:input_requests => stay [send:input_response#9 at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#10]
         reply:poll:input_requests => stay [send:input_response#11 at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#12]
         reply:poll:status => CANCEL_REQUESTED->TERMINAL_OBSERVED [at0:fetch_due]",
    ),
    (
        // mcp_ext_replicas seed 233499: two lagging 404s, then a poll's input requests read after
        // the cancel left: they show the task alive, so the next 404 starts the count again.
        "input requests read while cancelling show the operation alive to a not-found streak",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.timer(Timer::PollDue);
            s.ev(Event::CancelClicked);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::InputRequests(vec![]) });
            // The cancel's answer named another request (malformed): it says nothing.
            s.reply(RequestKind::Cancel, Reply::Malformed { reason: "names another request".into() });
            // Past the request lease the overtaken poll (#4) would hold the conclusion for.
            s.at(20_000).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at2250:poll_due]
         timer:poll_due => stay [send:poll#4]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#5]
         reply:poll:input_requests => stay
         reply:cancel:malformed => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#6]
         reply:poll:not_found => stay [at22000:cancel_requery]",
    ),
    (
        // mcp_ext_replicas seed 79499: a process's poll (#3 here) drew a cut answer; a replica's
        // older poll (#2) came back "completed" and, stepped after it, was stale; a lagging 404
        // past the reckoned expiry then handed a completed task to a person. An answer that
        // could not be read says nothing of the operation, as a throttle says nothing.
        "an answer older than an unreadable one is not stale",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::Malformed { reason: "cut".into() } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Completed)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         timer:poll_due => stay [send:poll#3]
         reply:poll:malformed => stay [at3250:poll_due]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]",
    ),
    (
        // mcp_replicas seed 501214: the verified result of fetch #3 lost its commit to another
        // process's write (fetch #4's answer, applied), so stepped again it was stale. An ended
        // task's result does not change: a late one naming our operation is accepted. One that
        // names no operation could be an earlier operation's, so it stays stale. (In the seed
        // #4's answer was a 503, which no longer makes older answers stale: a cut result here.)
        "a late verified result naming our operation is accepted while fetching",
        |s| {
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue);
            s.timer(Timer::FetchDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 4, epoch: 1, reply: Reply::Result(result(false)) });
            let mut unnamed = result(true);
            unnamed.related_operation_id = None;
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::Result(unnamed) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::Result(result(false)) });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::Result(result(true)) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at1000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:result => stay [at2000:fetch_due]
         reply:fetch:result => rejected:stale_answer
         reply:fetch:result => rejected:stale_answer
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        // mcp_ext_replicas seeds 11369 and 72278: a replica's fetch, numbered after the first
        // 404, was overtaken unanswered; its verified result sat unread in the replica (held 2
        // to 3 s by slow commits) when the third 404 handed a completed task to a person, and
        // when a fourth did once one more read was allowed. Until a request lease (10 s) has
        // passed since it was overtaken, its answer may come: the streak reads again then.
        "a request overtaken unanswered during a not-found streak holds the conclusion for a request lease",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(100).timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(10_099).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(10_100).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at3475:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at10100:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:not_found => stay [at17692:poll_due]
         timer:poll_due => stay [send:poll#7]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile]",
    ),
    (
        // The reckoned expiry is an estimate (an end read but set aside leaves it at
        // creation's ttl), so past it too a request overtaken unanswered holds the conclusion
        // for a request lease: its answer may show the task alive.
        "past the reckoned expiry an overtaken request still holds the conclusion for a request lease",
        |s| {
            s.working().at(60_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(60_100).timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(70_100).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at61500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at63475:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at70100:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile:after_expiry]",
    ),
    (
        // mcp_ext_replicas seed 84944: the overtaken poll was a replica's (process 2), which
        // read its answer showing the task working and froze 12.9 s with it. Its beat said it
        // lived until 12 s (the runner's `Ctx::overtaken_sender_until_ms`): the lease runs from
        // there, not from the overtaking at 100 ms, so the 404 at 10.1 s reads again at 22 s.
        "the overtaken request of another process holds the conclusion a request lease past its sender's last beat",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.process = 2;
            s.at(100).timer(Timer::PollDue);
            s.process = 1;
            s.overtaken_sender_until_ms = Some(12_000);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(10_100).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(21_999).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(22_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at3475:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at22000:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:not_found => stay [at22000:poll_due]
         timer:poll_due => stay [send:poll#7]
         reply:poll:not_found => stay [at33389:poll_due]
         timer:poll_due => stay [send:poll#8]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile]",
    ),
    (
        // mcp_ext_replicas seed 48611: a replica's poll, numbered after the first not-found,
        // drew the task's input requests; its answer came back after a later 404 and was set
        // aside as stale, and the third 404 handed a live task to a person. Input requests a
        // read of our operation drew show it alive like a status.
        "a late read's input requests after the first not-found reset the count",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::InputRequests(vec![]) });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at3375:poll_due]
         reply:poll:input_requests => stay
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at5062:poll_due]",
    ),
    (
        // cargo-mutants: the guard on input requests in stale_view_shows_ours survived as
        // `true`, and with `==` read as `!=`: the scenarios' late input requests were all empty
        // lists. Input requests naming another operation are that task's questions, not a sight
        // of ours: a late read that drew them leaves the count going, though one of them names
        // no operation. Poll #5's 404 is the third: as poll #3 counts as unanswered (its refused
        // answer is not written down), it reads again a request lease (10 s) after #4 overtook
        // #3, and #6's 404 at it concludes.
        "a late read's input requests naming another operation do not reset the count",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            let mut unnamed = input(7);
            unnamed.related_operation_id = None;
            let mut other = input(8);
            other.related_operation_id = Some("op-other".into());
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::InputRequests(vec![unnamed, other]) });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.at(10_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at3375:poll_due]
         reply:poll:input_requests => rejected:stale_answer
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at10000:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile]",
    ),
    (
        // cargo-mutants: `||` read as `&&` in the same guard survived. Input requests that name
        // no operation, or name ours, are what a read of our operation draws: a late one
        // resets the count as a view of ours does.
        "a late read's input requests naming no operation or ours reset the count",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.timer(Timer::PollDue);
            s.timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            let mut unnamed = input(7);
            unnamed.related_operation_id = None;
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: 1, reply: Reply::InputRequests(vec![unnamed, input(8)]) });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at3375:poll_due]
         reply:poll:input_requests => stay
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at5062:poll_due]",
    ),
    (
        // mcp_ext_replicas seed 46975: a replica's cancel, numbered before the first not-found
        // but leaving after it, was taken (cancel_pending); the answer came back "stale", and
        // the third 404 handed a live task to a person. A cancel names our operation, so the
        // server taking it shows the operation alive when it left.
        "a late cancel the server took, sent after the first not-found left, resets the count",
        |s| {
            s.working().ev(Event::CancelClicked);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Cancel, seq: 2, epoch: 1, reply: Reply::CancelPending });
            s.timer(Timer::CancelRequery);
            s.timer(Timer::CancelRequery);
            s.ev(Event::Reply { sent_ms: Some(1_000), kind: RequestKind::Poll, seq: 4, epoch: 1, reply: Reply::NotFound { message: "gone".into() } });
            s.ev(Event::Reply { sent_ms: Some(1_001), kind: RequestKind::Cancel, seq: 3, epoch: 1, reply: Reply::CancelPending });
            for _ in 0..2 {
                s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            }
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_pending => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         timer:cancel_requery => stay [send:poll#4]
         reply:poll:not_found => stay [at2000:cancel_requery]
         reply:cancel:cancel_pending => stay
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:not_found => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#6]
         reply:poll:not_found => stay [at2000:cancel_requery]",
    ),
    (
        // cargo-mutants: `>` read as `>=` (stale_view_shows_ours) survived. A view answering the
        // very request that drew the first not-found may have been read before that 404 (two
        // replicas, one request): it proves nothing, and the streak goes on.
        "a late view answering the request that drew the first not-found does not reset the count",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::Status(view(P::Working)) });
            for _ in 0..2 {
                s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            }
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         reply:poll:status => rejected:stale_answer
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at2250:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile]",
    ),
    (
        // cargo-mutants: the guard refusing an empty operation id (absorb) survived as `false`:
        // no scenario had the server name no operation. An empty id is never adopted (every
        // later request would name it). The server may have created a task all the same, and
        // no other answer to the submission comes: the key settles it (before session 20 the
        // reply was refused and nothing was armed: a stall only the stall watch ended).
        "a submission answered with an empty operation id is settled by key, never adopted",
        |s| {
            let mut nameless = view(P::Working);
            nameless.operation_id = String::new();
            s.ev(Event::Start).reply(RequestKind::Submit, Reply::Submitted(nameless));
            s.timer(Timer::LookupDue).reply(RequestKind::Lookup, Reply::LookupFound(view(P::Working)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:lookup:lookup_found => SUBMISSION_UNKNOWN->WORKING [at1000:poll_due]",
    ),
    (
        "an empty operation id in a late answer is refused, never adopted",
        |s| {
            let mut nameless = view(P::Working);
            nameless.operation_id = String::new();
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Submit, seq: 1, epoch: 1, reply: Reply::Submitted(nameless) });
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         reply:submit:submitted => rejected:operation_mismatch",
    ),
    (
        // cargo-mutants: the count of cancels resent after a still-running read (on_status) was
        // unpinned (`+=` as `-=`, `*=`): the existing scenario spent a budget of one, which is
        // checked before any resend is counted.
        "a cancel resent after a still-running read counts against the budget",
        |s| {
            s.cfg.max_cancel_attempts = 2;
            s.working().ev(Event::CancelClicked).lost(RequestKind::Cancel);
            for _ in 0..2 {
                s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            }
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         lost:cancel => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => stay [send:cancel#4]
         timer:cancel_requery => stay [send:poll#5]
         reply:poll:status => CANCEL_REQUESTED->UNKNOWN [reconcile]",
    ),
    (
        // cargo-mutants: the 429 arms of on_submit_reply and on_lookup_reply could be deleted:
        // no scenario rate-limited a submission or a lookup. A 429 proves the server did not
        // take the submission (same key again, after Retry-After); a lookup waits it out too.
        "Retry-After on 429 delays a resubmission and a lookup, never read as unknown",
        |s| {
            s.ev(Event::Start).reply(RequestKind::Submit, Reply::RateLimited { retry_after_ms: Some(5_000) });
            s.at(5_000).timer(Timer::SubmitDue).lost(RequestKind::Submit).timer(Timer::LookupDue);
            s.reply(RequestKind::Lookup, Reply::RateLimited { retry_after_ms: Some(30_000) });
        },
        "start => stay [send:submit#1]
         reply:submit:rate_limited => stay [at5000:submit_due]
         timer:submit_due => stay [send:submit#2]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at5000:lookup_due]
         timer:lookup_due => stay [send:lookup#3]
         reply:lookup:rate_limited => stay [at35000:lookup_due]",
    ),
    (
        // cargo-mutants: the `latest` guards of on_lookup_reply (not-found as `true`, the
        // catch-all for old answers as `false`) survived: no scenario had two lookups out.
        "an answer to an older lookup proves nothing and schedules nothing",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.timer(Timer::LookupDue).lost(RequestKind::Lookup).timer(Timer::LookupDue).lost(RequestKind::Lookup).timer(Timer::LookupDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Lookup, seq: 2, epoch: 1, reply: Reply::Unavailable { retry_after_ms: None } });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Lookup, seq: 3, epoch: 1, reply: Reply::LookupNotFound });
            s.reply(RequestKind::Lookup, Reply::LookupFound(view(P::Working)));
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         lost:lookup => stay [at1000:lookup_due]
         timer:lookup_due => stay [send:lookup#3]
         lost:lookup => stay [at1000:lookup_due]
         timer:lookup_due => stay [send:lookup#4]
         reply:lookup:unavailable => stay
         reply:lookup:lookup_not_found => stay
         reply:lookup:lookup_found => SUBMISSION_UNKNOWN->WORKING [at1000:poll_due]",
    ),
    (
        "a refusal that arrives after the submission was counted lost does not end the call: the lookup by key decides",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.reply(RequestKind::Submit, Reply::SubmitRefused { reason: "-32602: bad".into() });
            s.timer(Timer::LookupDue);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         reply:submit:submit_refused => stay
         timer:lookup_due => stay [send:lookup#2]",
    ),
    (
        "a late error for a submission already counted lost starts no second lookup",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.reply(RequestKind::Submit, Reply::Error { message: "502".into() });
            s.timer(Timer::LookupDue);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         reply:submit:error => stay
         timer:lookup_due => stay [send:lookup#2]",
    ),
    (
        "an inline result for a submission counted lost proves the tool ran: it is never submitted again",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.timer(Timer::LookupDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Submit, seq: 1, epoch: 1, reply: Reply::SyncResult(result(true)) });
            s.reply(RequestKind::Lookup, Reply::LookupNotFound).timer(Timer::SubmitDue);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         timer:lookup_due => stay [send:lookup#2]
         reply:submit:sync_result => SUBMISSION_UNKNOWN->UNKNOWN [reconcile]
         reply:lookup:lookup_not_found => rejected:already_final
         timer:submit_due => rejected:already_final",
    ),
    (
        "an inline result that arrives before the lookup is sent is not dropped either",
        |s| {
            s.ev(Event::Start).lost(RequestKind::Submit);
            s.reply(RequestKind::Submit, Reply::SyncResult(result(true)));
            s.timer(Timer::LookupDue);
        },
        "start => stay [send:submit#1]
         lost:submit => SUBMITTING->SUBMISSION_UNKNOWN [at0:lookup_due]
         reply:submit:sync_result => SUBMISSION_UNKNOWN->UNKNOWN [reconcile]
         timer:lookup_due => rejected:already_final",
    ),
    (
        "a late not-found for a poll already counted lost is not counted against the operation",
        |s| {
            s.working().timer(Timer::PollDue).lost(RequestKind::Poll).timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 2, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         lost:poll => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay",
    ),
    (
        "only the newest fetch's answer is acted on: a late not-found for a lost fetch is ignored",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).lost(RequestKind::Fetch).timer(Timer::FetchDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         lost:fetch => stay [at1000:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:not_found => rejected:not_applicable",
    ),
    (
        "the last not-found while a request sent after the first is unanswered: read again a request lease later; its late reply shows the operation alive",
        |s| {
            s.cfg.not_found_retries = 1;
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            // mcp_faults seed 21921: another process's poll (#3) is out when ours (#4) gets the
            // second 404; #3 is unanswered and may show the task alive.
            s.timer(Timer::PollDue).timer(Timer::PollDue);
            s.reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Poll, seq: 3, epoch: s.rec.execution_epoch, reply: Reply::Status(view(P::Working)) });
            // No gap now: a second 404 in a row to the newest request concludes.
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
            s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#3]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => stay [at10000:poll_due]
         reply:poll:status => stay
         timer:poll_due => stay [send:poll#5]
         reply:poll:not_found => stay [at5062:poll_due]
         timer:poll_due => stay [send:poll#6]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile]",
    ),
    (
        "a not-found on the input stream counts toward the not-found retries, like a poll's",
        |s| {
            s.cfg.not_found_retries = 0;
            s.working().at(1_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.reply(RequestKind::Fetch, Reply::NotFound { message: "gone".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         reply:fetch:not_found => INPUT_REQUIRED->UNKNOWN [reconcile]",
    ),
    (
        // mcp_replicas seed 128402: both SDK stores restart the deletion timer when a task
        // ends, so a 404 past creation's ttl, from a lagging replica, was no proof of expiry.
        // Seen ended at 70 s, past creation's ttl (60 s): its ttl runs from the end (130 s), so
        // the streak of 404s that follows is handed over as before expiry.
        "the reckoned expiry of a task seen ended counts from that sight",
        |s| {
            s.working().at(70_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            s.at(71_000).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
            s.at(72_000).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::NotFound { message: "lagging".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at70000:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         reply:fetch:not_found => stay [at71000:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:not_found => stay [at72000:fetch_due]
         timer:fetch_due => stay [send:fetch#5]
         reply:fetch:not_found => FETCHING_RESULT->UNKNOWN [reconcile]",
    ),
    (
        // mcp_ext_faults seed 1380165: the acknowledged cancel may have ended the task, which
        // starts its deletion timer again; a 404 past creation's ttl (60 s) but within the
        // ttl of the ack (at 50 s) is read again, not handed over as expiry.
        "an acknowledged cancel counts as a possible end for the reckoned expiry",
        |s| {
            s.working().at(50_000).ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelPending);
            s.at(70_000).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_pending => stay [at52000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:not_found => stay [at71500:cancel_requery]",
    ),
    (
        // mcp_replicas seed 1844492: a cancel refused because the task had already ended proves
        // it held and ended, which starts its deletion timer again; a 404 past creation's ttl
        // (60 s) but within the ttl of the refusal (at 50 s) is read again, not handed over.
        "a cancel refused as already ended counts as a possible end for the reckoned expiry",
        |s| {
            s.working().at(50_000).ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::CancelRejectedTerminal { message: "Cannot cancel task in terminal state 'completed'".into() });
            s.at(70_000).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "lagging".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:cancel_rejected_terminal => stay [at50000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:not_found => stay [at71500:cancel_requery]",
    ),
    (
        "a late not-found for a cancel already counted lost is not counted against the operation",
        |s| {
            s.working().ev(Event::CancelClicked).lost(RequestKind::Cancel);
            s.at(2_000).timer(Timer::CancelRequery);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Cancel, seq: 2, epoch: 1, reply: Reply::NotFound { message: "lagging".into() } });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         lost:cancel => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:cancel:not_found => stay",
    ),
    (
        "a cancel answered not-found after the task's ttl is read again, then handed over as after expiry",
        |s| {
            s.working().at(70_000).ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::NotFound { message: "expired".into() });
            s.at(71_000).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(72_500).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:not_found => stay [at71000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:not_found => stay [at72500:cancel_requery]
         timer:cancel_requery => stay [send:poll#4]
         reply:poll:not_found => CANCEL_REQUESTED->UNKNOWN [reconcile:after_expiry]",
    ),
    (
        "a rate-limited cancel is re-read no sooner than the server's Retry-After",
        |s| {
            s.working().ev(Event::CancelClicked).reply(RequestKind::Cancel, Reply::RateLimited { retry_after_ms: Some(30_000) });
            s.timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::Status(view(P::Working)));
            s.reply(RequestKind::Cancel, Reply::Unavailable { retry_after_ms: Some(20_000) });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         reply:cancel:rate_limited => stay [at30000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:status => stay [send:cancel#4]
         reply:cancel:unavailable => stay [at20000:cancel_requery]",
    ),
    (
        "a lost result fetch is fetched again after the retry interval",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::Completed)));
            s.timer(Timer::FetchDue).lost(RequestKind::Fetch);
            s.at(1_000).timer(Timer::FetchDue).reply(RequestKind::Fetch, Reply::Result(result(true)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->TERMINAL_OBSERVED [at0:fetch_due]
         timer:fetch_due => TERMINAL_OBSERVED->FETCHING_RESULT [send:fetch#3]
         lost:fetch => stay [at1000:fetch_due]
         timer:fetch_due => stay [send:fetch#4]
         reply:fetch:result => FETCHING_RESULT->ACCEPTED [accept:completed]",
    ),
    (
        "a not-found at the very instant the ttl runs out counts as after expiry",
        |s| {
            s.working().at(56_250).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(57_750).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
            s.at(60_000).timer(Timer::PollDue).reply(RequestKind::Poll, Reply::NotFound { message: "expired".into() });
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:not_found => stay [at57750:poll_due]
         timer:poll_due => stay [send:poll#3]
         reply:poll:not_found => stay [at60000:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:poll:not_found => WORKING->UNKNOWN [reconcile:after_expiry]",
    ),
    (
        "while cancelling, a read inlining input requests is a still-running status: the cancel is said again",
        |s| {
            s.working().ev(Event::CancelClicked).lost(RequestKind::Cancel);
            s.at(2_000).timer(Timer::CancelRequery).reply(RequestKind::Poll, Reply::InputRequests(vec![input(1)]));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         cancel_clicked => WORKING->CANCEL_REQUESTED [send:cancel#2]
         lost:cancel => stay [at2000:cancel_requery]
         timer:cancel_requery => stay [send:poll#3]
         reply:poll:input_requests => stay [send:cancel#4]",
    ),
    (
        "the pending request delivered again changes nothing; another request meanwhile is refused",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0))).ev(Event::InputRequested(input(0)));
            s.ev(Event::InputRequested(input(5)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         input_requested => stay
         input_requested => rejected:unsolicited_input",
    ),
    (
        "the request answered last, delivered again on a stream opened after answering, gets the same answer again, at most 3 times, never a new round",
        |s| {
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.ev(Event::InputRequested(input(0)));
            s.ev(Event::ApprovalReplied { round: 1, schema_digest: "s-1".into(), reply: ApprovalReply::Decline });
            for _ in 0..4 {
                s.timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
                s.ev(Event::InputRequested(input(0)));
            }
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         input_requested => stay [ask:r1 at60000:approval_deadline]
         approval_replied => stay [send:input_response#4 at1500:poll_due]
         timer:poll_due => stay [send:poll#5]
         reply:poll:status => stay [send:fetch#6]
         input_requested => stay [send:input_response#7 at2250:poll_due]
         timer:poll_due => stay [send:poll#8]
         reply:poll:status => stay [send:fetch#9]
         input_requested => stay [send:input_response#10 at3375:poll_due]
         timer:poll_due => stay [send:poll#11]
         reply:poll:status => stay [send:fetch#12]
         input_requested => stay [send:input_response#13 at5062:poll_due]
         timer:poll_due => stay [send:poll#14]
         reply:poll:status => stay [send:fetch#15]
         input_requested => rejected:replayed_input",
    ),
    (
        "while an approval pends, a read showing input_required opens no second input stream",
        |s| {
            // The stream's fetch times out, a poll replaces it, and then the fetch's late reply
            // (tasks extension: requests inlined) starts a round: the poll's answer is the latest.
            s.working().timer(Timer::PollDue).reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
            s.lost(RequestKind::Fetch).timer(Timer::PollDue);
            s.ev(Event::Reply { sent_ms: None, kind: RequestKind::Fetch, seq: 3, epoch: 1, reply: Reply::InputRequests(vec![input(1)]) });
            s.reply(RequestKind::Poll, Reply::Status(view(P::InputRequired)));
        },
        "start => stay [send:submit#1]
         reply:submit:submitted => SUBMITTING->WORKING [at1000:poll_due]
         timer:poll_due => stay [send:poll#2]
         reply:poll:status => WORKING->INPUT_REQUIRED [send:fetch#3]
         lost:fetch => stay [at1500:poll_due]
         timer:poll_due => stay [send:poll#4]
         reply:fetch:input_requests => stay [ask:r1 at60000:approval_deadline]
         reply:poll:status => stay",
    ),
];

fn normalise(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn scenarios_render_as_expected() {
    let mut failures = vec![];
    for (name, script, expect) in SCENARIOS {
        let mut sim = Sim::new();
        script(&mut sim);
        let got = sim.log.join("\n");
        if normalise(&got) != normalise(expect) {
            failures.push(format!(
                "--- {name}\nexpected:\n{}\ngot:\n{got}",
                normalise(expect)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_allowed_transition_is_exercised_by_a_scenario() {
    let mut seen = vec![];
    for (_, script, _) in SCENARIOS {
        let mut sim = Sim::new();
        script(&mut sim);
        seen.extend(sim.hops);
    }
    let missing: Vec<_> = ALLOWED.iter().filter(|t| !seen.contains(t)).collect();
    assert!(
        missing.is_empty(),
        "transitions no scenario exercises: {missing:?}"
    );
}

#[test]
fn every_transition_outside_the_table_is_refused() {
    let ctx = Ctx {
        now_ms: 0,
        jitter_permille: 0,
        epoch: 1,
        process: 1,
        overtaken_sender_until_ms: None,
    };
    let cfg = cfg();
    let mut refused = 0;
    for from in S::ALL {
        for to in S::ALL {
            if ALLOWED.contains(&(from, to)) {
                continue;
            }
            let mut rec = new_rec();
            rec.local_state = from;
            let mut m = Machine::new(&rec, &ctx, &cfg);
            assert_eq!(m.go(to), Err(Outcome::Refused { from, to }));
            refused += 1;
        }
    }
    assert_eq!(refused, S::ALL.len() * S::ALL.len() - ALLOWED.len());
}

/// A failed task that stores no result (the Python SDK: a tool that raised; `tasks/result`
/// holds only `_meta`) explains itself in `statusMessage`: that text is the error downstream
/// reads, in the one failed payload shape (`error.message`). Without a message, no payload.
#[test]
fn a_failed_task_without_a_result_hands_its_status_message_downstream() {
    for (message, expected) in [
        (
            Some("the job failed"),
            Some(serde_json::json!({"error": {"message": "the job failed"}})),
        ),
        (None, None),
    ] {
        let mut s = Sim::new();
        let mut failed = view(P::Failed);
        failed.status_message = message.map(str::to_string);
        s.working()
            .timer(Timer::PollDue)
            .reply(RequestKind::Poll, Reply::Status(failed));
        s.timer(Timer::FetchDue);
        let ctx = Ctx {
            now_ms: s.now_ms,
            jitter_permille: 0,
            epoch: s.epoch,
            process: s.process,
            overtaken_sender_until_ms: None,
        };
        let seq = s.rec.poll_cursor.sent_seq;
        let reply = Reply::NoResultStored {
            message: "empty result (only _meta): no result stored".into(),
        };
        let e = Event::Reply {
            kind: RequestKind::Fetch,
            seq,
            epoch: s.rec.execution_epoch,
            sent_ms: None,
            reply,
        };
        let step = step(&s.rec, &e, &ctx, &s.cfg);
        let accept = step.commands.iter().find_map(|c| match c {
            Command::Accept(spec) => Some(spec.clone()),
            _ => None,
        });
        let accept = accept.expect("accepted");
        assert_eq!(accept.terminal, TerminalState::Failed);
        assert_eq!(accept.payload, expected);
        assert_eq!(
            accept.result_digest,
            expected.as_ref().map(crate::digest::value_digest)
        );
    }
}

/// The record counts consecutive unanswered requests (`poll_cursor.lost_streak`, kept in the
/// ledger for whoever inspects a node that stopped moving); any view of the operation ends the
/// streak. Nothing else shows the count, so only its value can pin it.
#[test]
fn consecutive_losses_are_counted_until_the_server_answers() {
    let mut s = Sim::new();
    s.working().timer(Timer::PollDue).lost(RequestKind::Poll);
    assert_eq!(s.rec.poll_cursor.lost_streak, 1);
    s.timer(Timer::PollDue).lost(RequestKind::Poll);
    assert_eq!(s.rec.poll_cursor.lost_streak, 2);
    s.timer(Timer::PollDue)
        .reply(RequestKind::Poll, Reply::Status(view(P::Working)));
    assert_eq!(s.rec.poll_cursor.lost_streak, 0);
}

/// Answered request ids are remembered for the last `ANSWERED_INPUTS_MAX` rounds, no fewer: the
/// tasks extension inlines a request in every read until the server has processed its answer,
/// and one the record has forgotten would be put to the person a second time.
#[test]
fn the_last_answered_inputs_max_requests_are_never_asked_again() {
    let mut s = Sim::new();
    s.working();
    let rounds = crate::record::ANSWERED_INPUTS_MAX as i64 + 1;
    for id in 1..=rounds {
        s.timer(Timer::PollDue)
            .reply(RequestKind::Poll, Reply::InputRequests(vec![input(id)]));
        assert!(s.rec.pending_input.is_some(), "request {id} began a round");
        let round = s.rec.input_round;
        s.ev(Event::ApprovalReplied {
            round,
            schema_digest: "s-1".into(),
            reply: ApprovalReply::Decline,
        });
    }
    let remembered: Vec<_> = (2..=rounds).map(|id| serde_json::json!(id)).collect();
    assert_eq!(s.rec.answered_inputs, remembered);
    // Their digests are remembered for exactly as many rounds.
    assert_eq!(
        s.rec.answered_input_digests.len(),
        crate::record::ANSWERED_INPUTS_MAX
    );
    // The oldest request still remembered, inlined again: no new round.
    s.timer(Timer::PollDue)
        .reply(RequestKind::Poll, Reply::InputRequests(vec![input(2)]));
    assert!(s.rec.pending_input.is_none());
    assert_eq!(i64::from(s.rec.input_round), rounds);
}
