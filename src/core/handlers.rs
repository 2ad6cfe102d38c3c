//! The per-state rules of the core. Every state change goes through [`Machine::go`], which
//! consults the transition table; every send goes through [`Machine::send`], which numbers it.

use super::transitions::is_allowed;
use super::{
    AcceptBasis, AcceptSpec, Command, CoreConfig, Ctx, Event, Loss, Outcome, Rejection, Step, Timer,
};
use crate::digest::value_digest;
use crate::protocol::{
    ApprovalReply, InputRequest, Outbound, Reply, RequestKind, ResultView, TaskView,
};
use crate::record::{
    LocalState as S, PendingInput, ProtocolStatus as P, TerminalState, ToolOperation,
    ANSWERED_INPUTS_MAX,
};

type R = Result<Outcome, Outcome>;

/// Whether a planted anti-pattern is on; a constant `false` in production builds.
macro_rules! mutated {
    ($m:expr, $name:ident) => {
        mutated!($m, $name, when true)
    };
    // A plant that applies only where `$when` holds. The condition sits inside the macro so
    // that it is part of the plant, not of the executor: cargo-mutants does not rewrite macro
    // arguments, and a mutant of a condition beside a plant that is off changes nothing.
    ($m:expr, $name:ident, when $when:expr) => {{
        #[cfg(feature = "mutations")]
        {
            $m.cfg.mutated(super::mutation::Mutation::$name) && $when
        }
        #[cfg(not(feature = "mutations"))]
        {
            false
        }
    }};
}

pub(super) struct Machine<'a> {
    rec: ToolOperation,
    /// The record as read: an acceptance's basis (`AcceptBasis::of`) is taken from it, and only
    /// then, not at every step (it copies four strings).
    read: &'a ToolOperation,
    path: Vec<S>,
    cmds: Vec<Command>,
    ctx: &'a Ctx,
    cfg: &'a CoreConfig,
    /// When the request the event answers left, if the event is a reply and its sender knows.
    reply_sent_ms: Option<u64>,
}

const STAYED: R = Ok(Outcome::Stayed);

fn rejected(r: Rejection) -> R {
    Ok(Outcome::Rejected(r))
}

impl<'a> Machine<'a> {
    pub(super) fn new(rec: &'a ToolOperation, ctx: &'a Ctx, cfg: &'a CoreConfig) -> Machine<'a> {
        Machine {
            rec: rec.clone(),
            read: rec,
            path: vec![rec.local_state],
            cmds: vec![],
            ctx,
            cfg,
            reply_sent_ms: None,
        }
    }

    pub(super) fn finish(self, outcome: Outcome) -> Step {
        let outcome = if self.path.len() > 1 {
            Outcome::Moved(self.path)
        } else {
            outcome
        };
        Step {
            record: self.rec,
            commands: self.cmds,
            outcome,
        }
    }

    fn now(&self) -> u64 {
        self.ctx.now_ms
    }

    pub(super) fn go(&mut self, to: S) -> Result<(), Outcome> {
        let from = self.rec.local_state;
        if !is_allowed(from, to) {
            return Err(Outcome::Refused { from, to });
        }
        self.rec.local_state = to;
        self.path.push(to);
        Ok(())
    }

    /// Planted bugs only: take a transition the table forbids.
    fn force(&mut self, to: S) {
        self.rec.local_state = to;
        self.path.push(to);
    }

    /// Planted bugs only: write a receipt from wherever the record stands.
    fn force_accept(&mut self, to: S, terminal: TerminalState, digest: Option<String>) -> R {
        self.force(to);
        self.rec.result_digest = digest.clone();
        let basis = AcceptBasis::of(self.read);
        self.cmds.push(Command::Accept(AcceptSpec {
            terminal,
            result_digest: digest,
            payload: None,
            basis,
        }));
        STAYED
    }

    fn send(&mut self, out: Outbound) {
        let c = &mut self.rec.poll_cursor;
        // Noted outside a streak too: another process's request numbered before the streak's
        // first 404 can leave after it (mcp_ext_replicas seed 17241: a process's poll,
        // numbered before a replica's, left 529 ms after it, drew the task working, and its
        // process froze 10.1 s before writing it down).
        if c.sent_seq > c.applied_seq {
            c.overtaken = Some(crate::record::Overtaken {
                seq: c.sent_seq,
                at_ms: self.ctx.now_ms,
                by: c.sent_by,
            });
        }
        c.sent_by = Some(self.ctx.process);
        self.rec.poll_cursor.sent_seq += 1;
        self.cmds.push(Command::Send {
            out,
            seq: self.rec.poll_cursor.sent_seq,
        });
    }

    fn schedule(&mut self, delay_ms: u64, timer: Timer) {
        self.cmds.push(Command::Schedule {
            at_ms: self.now().saturating_add(delay_ms),
            timer,
        });
    }

    fn poll_delay(&self) -> u64 {
        let c = &self.rec.poll_cursor;
        self.cfg
            .poll
            .next_delay_ms(c.polls, c.server_interval_ms, self.ctx.jitter_permille)
    }

    /// How long a node waiting to learn who won its cancel waits before reading the status
    /// again: the cancel's own short interval, not the poll schedule, whose backoff has grown
    /// while the work ran (up to its cap) and would hold the answer a person is waiting for.
    fn cancel_requery_ms(&self) -> u64 {
        if mutated!(self, CancelRequeryOnPollSchedule) {
            // Planted: the status is read on the poll schedule whatever the state.
            return self.poll_delay();
        }
        self.cfg.cancel_requery_interval_ms
    }

    fn op_id(&self) -> String {
        // Only called in states entered with an id; an empty id would be refused by the server.
        self.rec.operation_id.clone().unwrap_or_default()
    }

    /// Hand the item to manual reconciliation, from any non-final state.
    fn hand_over(&mut self, reason: &str) -> R {
        if self.rec.local_state == S::Submitting {
            self.go(S::SubmissionUnknown)?;
        }
        self.go(S::Unknown)?;
        let reason = match self.rec.last_server_status {
            Some(status) => format!("{reason} (last server status: {})", status.name()),
            None => format!("{reason} (no server status read yet)"),
        };
        self.rec.unknown_reason = Some(reason.clone());
        self.rec.pending_input = None;
        self.cmds.push(Command::Reconcile { reason });
        STAYED
    }

    fn accept(
        &mut self,
        to: S,
        terminal: TerminalState,
        digest: Option<String>,
        payload: Option<serde_json::Value>,
    ) -> R {
        self.go(to)?;
        self.rec.result_digest = digest.clone();
        // The payload travels whatever the terminal state; the ledger decides what downstream
        // may treat as a result (a cancelled outcome's result is audit, never a payload).
        let payload = if mutated!(self, FailedPayloadDropped, when terminal == TerminalState::Failed)
        {
            None
        } else {
            payload
        };
        let basis = AcceptBasis::of(self.read);
        self.cmds.push(Command::Accept(AcceptSpec {
            terminal,
            result_digest: digest,
            payload,
            basis,
        }));
        if mutated!(self, SendAfterReceipt, when terminal == TerminalState::Completed
            && self.rec.operation_id.is_some())
        {
            // Planted: "read it once more to be sure", after the receipt is written.
            self.send(Outbound::FetchResult {
                operation_id: self.op_id(),
            });
        }
        STAYED
    }

    pub(super) fn run(&mut self, ev: &Event) -> R {
        if self.ctx.epoch < self.rec.execution_epoch && !mutated!(self, IgnoreEpoch) {
            return rejected(Rejection::StaleEpoch {
                event_epoch: self.ctx.epoch,
                record_epoch: self.rec.execution_epoch,
            });
        }
        if let Event::Reply { epoch, .. } | Event::Lost { epoch, .. } = ev {
            if *epoch != self.rec.execution_epoch && !mutated!(self, IgnoreEpoch) {
                return rejected(Rejection::StaleEpoch {
                    event_epoch: *epoch,
                    record_epoch: self.rec.execution_epoch,
                });
            }
        }
        if self.rec.local_state.is_final() {
            return self.on_final(ev);
        }
        match ev {
            Event::Start => self.start(),
            Event::RejectLocally
                if self.rec.local_state == S::Submitting && self.rec.submit_attempts == 0 =>
            {
                self.accept(S::Rejected, TerminalState::Rejected, None, None)
            }
            Event::RejectLocally => rejected(Rejection::NotApplicable),
            Event::Resume => self.resume(),
            Event::Timer(t) => self.timer(*t),
            Event::Reply {
                kind,
                seq,
                sent_ms,
                reply,
                ..
            } => {
                self.reply_sent_ms = *sent_ms;
                self.reply(*kind, *seq, reply)
            }
            Event::Lost {
                kind, seq, loss, ..
            } => self.lost(*kind, *seq, *loss),
            Event::InputRequested(req) => self.input_requested(req),
            Event::ApprovalReplied {
                round,
                schema_digest,
                reply,
            } => self.approval(*round, schema_digest, reply.clone()),
            Event::CancelClicked => self.cancel_clicked(),
            Event::CallerDetached => {
                self.rec.caller_detached = true;
                if mutated!(self, DisconnectIsCancel, when matches!(self.rec.local_state, S::Working | S::InputRequired))
                {
                    return self.request_cancel();
                }
                STAYED
            }
            // Advisory while the operation lives (MCP §7): polls decide, so a push that raced a
            // newer poll reply can never move the record back.
            Event::StatusPushed(_) => rejected(Rejection::NotApplicable),
        }
    }

    fn on_final(&mut self, ev: &Event) -> R {
        if let Event::Reply {
            reply: Reply::Status(v) | Reply::CancelAcknowledged(v),
            ..
        }
        | Event::StatusPushed(v) = ev
        {
            let late_completion = matches!(v.status, P::Completed | P::Failed);
            let after_cancel = self.rec.local_state == S::CancelledAccepted
                || mutated!(self, EffectReconciliationOnAnyLateEnd);
            if after_cancel
                && late_completion
                && Some(&v.operation_id) == self.rec.operation_id.as_ref()
                && !mutated!(self, EffectReconciliationDropped)
            {
                self.cmds.push(Command::EffectReconciliation {
                    reason: format!(
                        "server reported {} after the cancel was confirmed",
                        v.status.name()
                    ),
                });
                return STAYED;
            }
        }
        if let Event::CallerDetached = ev {
            self.rec.caller_detached = true;
            return STAYED;
        }
        // A push asked for nothing: one that changes nothing is no refusal either.
        if let Event::StatusPushed(_) = ev {
            return STAYED;
        }
        rejected(Rejection::AlreadyFinal)
    }

    fn submit(&mut self) {
        self.rec.submit_attempts += 1;
        self.rec.submitted_at_ms = Some(self.now());
        self.rec.submitted_by = Some(self.ctx.process);
        let (key, tool, arguments) = (
            self.rec.submission_key.clone(),
            self.rec.tool_name.clone(),
            (*self.rec.request_body).clone(),
        );
        if self.rec.synchronous {
            self.send(Outbound::SubmitSync {
                key,
                tool,
                arguments,
            });
        } else {
            self.send(Outbound::Submit {
                key,
                tool,
                arguments,
                ttl_ms: self.cfg.task_ttl_ms,
            });
        }
    }

    /// A submission this process resumed: while its reply may still reach the process that sent
    /// it (a replica on the same epoch, busy or slow), wait; after that its outcome is unknown.
    /// Concluding at once handed a node to a person whose submission another live process was
    /// about to read (mcp_ext_faults seeds 16364 and 20268: the tasks extension has no lookup by
    /// key, so "unknown" is a hand-off).
    fn submission_leased(&mut self) -> R {
        let lease_end_ms = self.lease_end_from(self.rec.submitted_at_ms);
        if self.now() < lease_end_ms {
            self.schedule(lease_end_ms - self.now(), Timer::SubmissionLease);
            return STAYED;
        }
        self.submission_unknown()
    }

    /// A sent submission this process takes up (a restart, or another process's): the lease
    /// runs from now at the earliest. `submitted_at_ms` is when the sender stepped the commit,
    /// and the send can leave seconds later behind slow commits, its reply read later still
    /// (mcp_ext_faults seed 1183230: a replica took the node up 9 s after that step, concluded
    /// 1 s later, and the sender, whose request had left 6 s after the step, read the reply
    /// naming the task 1 ms after the hand-off). Watching a full lease itself, as the stall
    /// watch does, this process sees the sender's write instead.
    /// A lone executor restarting after its own crash waits one full lease too.
    fn submission_taken_up(&mut self) -> R {
        let from_sender_ms = self.lease_end_from(self.rec.submitted_at_ms);
        let lease_end_ms = if mutated!(self, TakeUpLeaseFromSenderStep) {
            from_sender_ms
        } else {
            from_sender_ms.max(self.lease_end_from(Some(self.now())))
        };
        self.schedule(
            lease_end_ms.saturating_sub(self.now()),
            Timer::SubmissionLease,
        );
        STAYED
    }

    /// When a submission lease that began at `start_ms` ends (at once when nothing began one).
    fn lease_end_from(&self, start_ms: Option<u64>) -> u64 {
        start_ms.map_or(0, |t| t.saturating_add(self.cfg.request_lease_ms))
    }

    fn start(&mut self) -> R {
        if self.rec.local_state != S::Submitting || self.rec.submit_attempts != 0 {
            return rejected(Rejection::NotApplicable);
        }
        self.submit();
        STAYED
    }

    fn resume(&mut self) -> R {
        self.rec.execution_epoch = self.ctx.epoch;
        self.rec.input_stream_open = false;
        // The crash may have come between writing an answer and sending it.
        if let Some(a) = &mut self.rec.last_answer {
            a.lost = true;
        }
        match self.rec.local_state {
            S::Submitting if self.rec.submit_attempts == 0 => {
                self.submit();
                STAYED
            }
            // The submission may have left before the crash: never send it blind again.
            S::Submitting => self.submission_taken_up(),
            S::SubmissionUnknown => self.submission_unknown(),
            S::NotFoundSafe => {
                self.schedule(0, Timer::SubmitDue);
                STAYED
            }
            S::Working => {
                self.schedule(0, Timer::PollDue);
                STAYED
            }
            S::InputRequired => {
                if let Some(p) = self.rec.pending_input.clone() {
                    // The approval gate lost its question with the crash: ask again, same round.
                    self.ask_approval(&p);
                } else {
                    self.schedule(0, Timer::PollDue);
                }
                STAYED
            }
            // The cancel may never have left before the crash: say it again at once (cancelling
            // twice is harmless) rather than read the status first and cancel a round trip
            // later. A best-effort cancel the server already took is only re-read. Not counted
            // as an attempt: attempts are counted when a read shows the operation still running
            // after one, and a crash between the commit and the send sends nothing
            // (mcp_faults seed 39769: five restarts spent the attempts, and no cancel had ever
            // reached the server). Said again with the attempts spent too: the last one is
            // counted as it is committed, and may have died with its process (aip151_faults
            // seed 18528: four cancels refused 503, the fifth committed and the process crashed
            // before sending it; the replica that took the node up read it running and handed it
            // to a person with four cancels sent). A crash loop is bounded by the wait budget.
            S::CancelRequested if !self.rec.cancel_pending => self.send_cancel(),
            S::CancelRequested => {
                self.schedule(0, Timer::CancelRequery);
                STAYED
            }
            S::TerminalObserved | S::FetchingResult => {
                self.schedule(0, Timer::FetchDue);
                STAYED
            }
            S::Accepted | S::CancelledAccepted | S::Rejected | S::Unknown => STAYED,
        }
    }

    /// Enter (or stay in) SUBMISSION_UNKNOWN and start resolving it by key.
    fn submission_unknown(&mut self) -> R {
        if self.rec.local_state != S::SubmissionUnknown {
            self.go(S::SubmissionUnknown)?;
        }
        if self.rec.synchronous {
            return self.hand_over(
                "a synchronous call went unanswered; calling again could run the tool twice",
            );
        }
        if !self.cfg.key_lookup && !mutated!(self, LookupWithoutExtension) {
            return self
                .hand_over("submission outcome unknown and the server offers no lookup by key");
        }
        self.schedule(0, Timer::LookupDue);
        STAYED
    }

    fn timer(&mut self, t: Timer) -> R {
        if self.now() >= self.rec.wait_deadline_ms {
            let why = format!("wait budget spent in {}", self.rec.local_state);
            return self.hand_over(&why);
        }
        match (t, self.rec.local_state) {
            (Timer::SubmitDue, S::Submitting | S::NotFoundSafe) => {
                if self.rec.submit_attempts >= self.cfg.max_submit_attempts {
                    return self.hand_over("submission attempts spent");
                }
                if self.rec.local_state == S::NotFoundSafe {
                    self.go(S::Submitting)?;
                }
                self.submit();
                STAYED
            }
            (Timer::LookupDue, S::SubmissionUnknown) => {
                if self.rec.lookup_attempts >= self.cfg.max_lookup_attempts {
                    return self.hand_over("lookups by key spent without an answer");
                }
                self.rec.lookup_attempts += 1;
                self.send(Outbound::LookupByKey {
                    key: self.rec.submission_key.clone(),
                });
                STAYED
            }
            (Timer::PollDue, S::Working) => self.poll(),
            (Timer::PollDue, S::InputRequired)
                if self.rec.pending_input.is_none() && !self.rec.input_stream_open =>
            {
                self.poll()
            }
            (Timer::FetchDue, S::TerminalObserved | S::FetchingResult) => {
                if self.rec.fetch_attempts >= self.cfg.max_fetch_attempts {
                    return self.budget_spent(Timer::FetchDue, "result fetch attempts spent");
                }
                if self.rec.local_state == S::TerminalObserved {
                    self.go(S::FetchingResult)?;
                }
                if mutated!(self, UnverifiedDigestRecorded) {
                    // Planted: the provisional digest is dropped when fetching again, so the
                    // ledger's own digest check has nothing to compare the next acceptance with.
                    self.rec.result_digest = None;
                }
                self.send(Outbound::FetchResult {
                    operation_id: self.op_id(),
                });
                STAYED
            }
            (Timer::CancelRequery, S::CancelRequested) => self.poll(),
            (Timer::SubmissionLease, S::Submitting) if self.rec.submit_attempts > 0 => {
                self.submission_leased()
            }
            (Timer::ApprovalDeadline { round }, S::InputRequired) => {
                match &self.rec.pending_input {
                    // Nobody approved in time: decline, so the server can move on.
                    Some(p) if p.round == round => {
                        let digest = p.schema_digest.clone();
                        self.approval(round, &digest, ApprovalReply::Decline)
                    }
                    _ => STAYED,
                }
            }
            // A timer set for a state the record has since left.
            _ => STAYED,
        }
    }

    fn poll(&mut self) -> R {
        self.rec.poll_cursor.polls += 1;
        self.send(Outbound::Poll {
            operation_id: self.op_id(),
        });
        STAYED
    }

    /// Say the last answer again (its request was lost, or the request came again on a stream
    /// we opened after answering), counted against `ANSWER_RESENDS_MAX`; then poll on.
    fn resend_last_answer(&mut self, last: crate::record::LastAnswer) -> R {
        self.rec.last_answer = Some(crate::record::LastAnswer {
            lost: false,
            resends: last.resends + 1,
            sent_at_ms: Some(self.now()),
            ..last.clone()
        });
        self.send(Outbound::InputResponse {
            operation_id: self.op_id(),
            server_request_id: last.server_request_id,
            reply: last.reply,
        });
        self.schedule_poll_after(None);
        STAYED
    }

    /// Whether the last answer may be said again now: within the quick resends, or once the
    /// pause since its last send has passed (`ANSWER_RESEND_PAUSE_MS`).
    fn may_resend(&self, last: &crate::record::LastAnswer) -> bool {
        use crate::record::{ANSWER_RESENDS_MAX, ANSWER_RESEND_PAUSE_MS};
        if last.resends < ANSWER_RESENDS_MAX {
            return true;
        }
        let doublings = (last.resends - ANSWER_RESENDS_MAX).min(4);
        let pause_ms = ANSWER_RESEND_PAUSE_MS << doublings;
        last.sent_at_ms
            .is_none_or(|sent| self.now() >= sent.saturating_add(pause_ms))
    }

    fn schedule_poll_after(&mut self, at_least_ms: Option<u64>) {
        let at_least_ms = if mutated!(self, IgnoreRetryAfter) {
            None
        } else {
            at_least_ms
        };
        let delay = self.poll_delay().max(at_least_ms.unwrap_or(0));
        if self.rec.local_state == S::CancelRequested {
            self.schedule(
                delay.min(self.cancel_requery_ms().max(at_least_ms.unwrap_or(0))),
                Timer::CancelRequery,
            );
        } else {
            self.schedule(delay, Timer::PollDue);
        }
    }

    fn reply(&mut self, kind: RequestKind, seq: u64, reply: &Reply) -> R {
        // Stale: older than the newest answer that said something of the operation (a 429 or
        // 503 applied since does not count).
        let applied = self.rec.poll_cursor.newest_answer();
        let overwrite = mutated!(self, LateAnswerOverwrites);
        if seq <= applied && !overwrite && self.late_result_of_ours(kind, reply) {
            // An ended task's result does not change, so a late one is no older than what was
            // applied since: it answers every fetch alike (mcp_replicas seed 501214: this
            // process's verified result lost its commit to a replica's write, and stepped again
            // it was "stale"; the replica's next fetch drew a 503 and the fetch budget handed a
            // completed task to a person). Only a result naming our operation: an unnamed one
            // sent before a resubmission could be the earlier operation's.
            return self.on_result(reply);
        }
        if seq <= applied && !overwrite {
            if self.stale_view_shows_ours(kind, seq, reply) {
                // A late view of our own operation, answering a request sent after the streak's
                // first not-found, proves the server held it after that 404: the streak was a
                // lagging replica's, whoever read it. Executors sharing the ledger interleave
                // their request numbers, so a replica's good read can arrive "stale" after the
                // primary's 404s (mcp_sqlite seed 560). Nothing else of a stale view is applied,
                // and a view older than the streak proves nothing (it may predate a deletion).
                self.rec.poll_cursor.not_found_streak = 0;
                self.alive_when_sent();
                return STAYED;
            }
            if self.stale_cancel_taken(kind, reply) {
                // The server took a cancel of ours, and a taken cancel stays taken whatever was
                // read since: only a terminal read says who won now, and no more cancels are
                // owed (mcp_ext_replicas seed 6722 with cancel_503: a replica's cancel was
                // acknowledged while the primary's newer read showed the task working; the ack
                // came back "stale", the primary's next cancels were refused 503 and the budget
                // handed a task that held our cancel to a person). Nothing else of it is applied.
                self.rec.cancel_pending = true;
                return STAYED;
            }
            return rejected(Rejection::StaleAnswer {
                seq,
                applied_seq: applied,
            });
        }
        let latest = seq == self.rec.poll_cursor.sent_seq || overwrite;
        let outcome = match kind {
            RequestKind::Submit | RequestKind::SubmitSync => {
                self.on_submit_reply(kind, reply, latest)
            }
            RequestKind::Lookup => self.on_lookup_reply(reply, latest),
            RequestKind::Poll => self.on_poll_reply(reply, latest),
            RequestKind::Fetch => self.on_fetch_reply(reply, latest),
            RequestKind::Cancel => self.on_cancel_reply(reply, latest),
            RequestKind::Initialize | RequestKind::ListTools | RequestKind::InputResponse => {
                rejected(Rejection::NotApplicable)
            }
        }?;
        if matches!(outcome, Outcome::Rejected(Rejection::NotApplicable))
            && !latest
            && self.stale_view_shows_ours(kind, seq, reply)
        {
            // Not the newest request's answer, so not acted on, but as a stale one it proves the
            // server held our operation after the streak's first not-found (mcp_replicas seed
            // 104378: a replica's fetch drew the result just after the primary sent its next
            // fetch; the result was set aside, and the primary's third 404 handed a completed
            // task to a person). Every handler refuses before it touches the record.
            self.rec.poll_cursor.not_found_streak = 0;
            self.alive_when_sent();
            return STAYED;
        }
        if !matches!(outcome, Outcome::Rejected(_)) {
            let c = &mut self.rec.poll_cursor;
            // A 429 or 503 is from in front of the server and says nothing of the operation:
            // it leaves nothing an older answer could overwrite, so it does not make older
            // answers stale (mcp_replicas seed 1731344: a replica's poll drew a 503, and this
            // process's older poll, answered "completed", was set aside as stale; ten seconds
            // later a lagging replica's 404 past the reckoned expiry handed a completed task to
            // a person). Nor does an answer that could not be read (a cut or garbled reply:
            // mcp_ext_replicas seed 79499, a truncated answer to a process's poll made a
            // replica's older "completed" stale, and a lagging 404 past the reckoned expiry
            // handed a completed task to a person).
            let says_nothing = matches!(
                reply,
                Reply::RateLimited { .. } | Reply::Unavailable { .. } | Reply::Malformed { .. }
            );
            let answered = if says_nothing {
                c.newest_answer()
            } else {
                c.newest_answer().max(seq)
            };
            c.applied_seq = c.applied_seq.max(seq);
            // Kept only while it differs: most records never see a throttle.
            c.answered_seq = (answered != c.applied_seq).then_some(answered);
        }
        Ok(outcome)
    }

    /// Whether a late reply, read while fetching, is our ended operation's whole outcome: a
    /// verified result named for our operation, or the error of an operation a read showed
    /// failed (mcp_ext_replicas seed 5046961: a process's fetch drew the error while its commit
    /// waited behind a slow one, a replica's newer fetch met a lagging 404 meanwhile, and the
    /// error stepped again as "stale" was set aside; the next 404 handed a failed task to a
    /// person).
    fn late_result_of_ours(&self, kind: RequestKind, reply: &Reply) -> bool {
        if kind != RequestKind::Fetch || self.rec.local_state != S::FetchingResult {
            return false;
        }
        match reply {
            Reply::Result(rv) => {
                rv.verified
                    && rv.related_operation_id.is_some()
                    && rv.related_operation_id == self.rec.operation_id
            }
            Reply::ResultIsError { .. } => self.final_answer_of_ours(reply),
            _ => false,
        }
    }

    /// Whether a stale reply is the server's acknowledgement of a cancel still wanted: while the
    /// node stays CANCEL_REQUESTED its cancel generation cannot change (a click there is a
    /// no-op), so the ack is of the cancel the record asks for.
    fn stale_cancel_taken(&self, kind: RequestKind, reply: &Reply) -> bool {
        kind == RequestKind::Cancel
            && matches!(reply, Reply::CancelPending)
            && self.rec.local_state == S::CancelRequested
            && !self.rec.cancel_pending
    }

    /// Whether a stale reply is a view of our own operation answering a request sent after the
    /// first not-found of the streak being counted: a status, or a result the server tied to
    /// our operation (a replica's fetch answered with the result while another process counted
    /// the primary's 404s: mcp_replicas seed 35738). A result that names no operation proves
    /// nothing of which task it came from. "Sent after": numbered after it, or known to have
    /// left once it was taken in (mcp_ext_faults seed 462185: a replica's poll, numbered before
    /// the primary's 404s, left 4 s later behind slow commits and showed the task completed).
    /// Answers that carry no view count too when the request named the operation (it never
    /// changes once known): a cancel the server took or refused as too late, and input requests
    /// a read drew (mcp_ext_replicas seeds 46975 and 48611: a replica's cancel_pending, and its
    /// poll's input requests, came back "stale" while the primary counted a lagging replica's
    /// 404s, and the third handed a live task to a person).
    fn stale_view_shows_ours(&self, kind: RequestKind, seq: u64, reply: &Reply) -> bool {
        let ours = self.rec.operation_id.as_deref();
        let shown = match (kind, reply) {
            (_, Reply::Status(v) | Reply::CancelAcknowledged(v)) => Some(v.operation_id.as_str()),
            (_, Reply::Result(rv)) => rv.related_operation_id.as_deref(),
            (RequestKind::Cancel, Reply::CancelPending | Reply::CancelRejectedTerminal { .. }) => {
                ours
            }
            (RequestKind::Poll | RequestKind::Fetch, Reply::InputRequests(reqs))
                if reqs.iter().all(|r| {
                    r.related_operation_id.is_none() || r.related_operation_id.as_deref() == ours
                }) =>
            {
                ours
            }
            _ => None,
        };
        let c = &self.rec.poll_cursor;
        let left_after = self.reply_sent_ms.is_some_and(|sent| {
            c.not_found_first_at_ms
                .is_some_and(|taken_in| sent >= taken_in)
                || c.not_found_first_sent_at_ms.is_some_and(|left| sent > left)
        });
        c.not_found_streak > 0
            && (seq > c.not_found_first_seq || left_after)
            && shown.is_some_and(|op| self.rec.operation_id.as_deref() == Some(op))
            && !mutated!(self, NotFoundStreakNeverReset)
    }

    /// The server just showed the operation alive (a view of it, an input request, a cancel it
    /// took): earlier not-founds were a lagging replica's, and the unanswered streak is over.
    fn shown_alive(&mut self) {
        if !mutated!(self, NotFoundStreakNeverReset) {
            self.rec.poll_cursor.not_found_streak = 0;
        }
        self.rec.poll_cursor.lost_streak = 0;
        self.alive_when_sent();
    }

    /// The operation has ended, or may have, without a read showing when: both SDK stores start
    /// the deletion timer again at an end, so the reckoned expiry moves to now plus the ttl
    /// when that is later (what the hand-off's reason says of a 404 streak's end).
    fn ended_unseen(&mut self) {
        if let (Some(ttl), Some(at)) = (self.rec.ttl_ms, self.rec.expires_at_ms) {
            self.rec.expires_at_ms = Some(at.max(self.now().saturating_add(ttl)));
        }
    }

    /// Note when the request whose answer showed the operation alive left: a not-found
    /// answering a request that left before it is older than that sight.
    fn alive_when_sent(&mut self) {
        let c = &mut self.rec.poll_cursor;
        if let Some(sent) = self.reply_sent_ms {
            c.alive_sent_at_ms = Some(c.alive_sent_at_ms.map_or(sent, |a| a.max(sent)));
        }
    }

    /// Whether the not-found being read answers a request that left before one whose answer
    /// already showed the operation alive: the server held it after that 404 was written, so
    /// the 404 was a lagging replica's (aip151_faults seed 282576: a replica's poll, sent 24 ms
    /// after the primary's, showed the task working and was applied first; the primary's 404,
    /// applied after it, began the streak that handed a completed task to a person).
    fn not_found_predates_a_sight(&self) -> bool {
        matches!(
            (self.reply_sent_ms, self.rec.poll_cursor.alive_sent_at_ms),
            (Some(sent), Some(alive)) if sent < alive
        ) && !mutated!(self, NotFoundStreakNeverReset)
    }

    /// Record what a server view says, after checking it is about our operation.
    fn absorb(&mut self, v: &TaskView) -> Result<(), Outcome> {
        match &self.rec.operation_id {
            Some(id) if *id != v.operation_id => {
                return Err(Outcome::Rejected(Rejection::OperationMismatch {
                    expected: Some(id.clone()),
                    got: v.operation_id.clone(),
                }))
            }
            None if v.operation_id.is_empty() => {
                return Err(Outcome::Rejected(Rejection::OperationMismatch {
                    expected: None,
                    got: String::new(),
                }))
            }
            _ => {}
        }
        let first_terminal =
            v.status.is_terminal() && !self.rec.last_server_status.is_some_and(|s| s.is_terminal());
        self.rec.operation_id = Some(v.operation_id.clone());
        self.rec.last_server_status = Some(v.status);
        self.rec.last_status_message = v.status_message.clone();
        self.shown_alive();
        if let Some(i) = v.poll_interval_ms {
            self.rec.poll_cursor.server_interval_ms = Some(i);
        }
        if let Some(ttl) = v.ttl_ms {
            // Counted from our first sight: later than the true expiry, so a not-found before it
            // is retried a little longer, never shorter. Both SDK stores start the deletion timer
            // again when the task ends (spec notes, section 10): from our first sight of the end,
            // the same reasoning holds (mcp_replicas seed 128402: a lagging replica's 404 came
            // 51 s after creation with a 50.8 s ttl, and the failed task, ended 7 s before, was
            // handed to a person at once as expired).
            self.rec.ttl_ms = Some(ttl);
            let from_now = self.now().saturating_add(ttl);
            match self.rec.expires_at_ms {
                None => self.rec.expires_at_ms = Some(from_now),
                Some(at) if first_terminal && at < from_now => {
                    self.rec.expires_at_ms = Some(from_now)
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The server proved the operation exists: enter WORKING and act on its status.
    fn operation_known(&mut self, v: &TaskView) -> R {
        self.absorb(v)?;
        self.go(S::Working)?;
        if self.rec.cancel_wanted && !v.status.is_terminal() {
            self.rec.cancel_wanted = false;
            return self.request_cancel();
        }
        self.on_status(v.status, true)
    }

    fn on_status(&mut self, status: P, latest: bool) -> R {
        let state = self.rec.local_state;
        if status.is_terminal() {
            if state == S::CancelRequested && status == P::Cancelled {
                if mutated!(self, AcceptLateCompletionAfterCancel) {
                    // Planted: the ack is "provisional"; keep asking until something else wins.
                    self.schedule(self.cancel_requery_ms(), Timer::CancelRequery);
                    return STAYED;
                }
                // The server's own word that our cancel took effect.
                return self.accept(S::CancelledAccepted, TerminalState::Cancelled, None, None);
            }
            if mutated!(self, AcceptCompletedWithoutFetch, when status == P::Completed) {
                let fake = value_digest(
                    &serde_json::json!({"status": "completed", "operation": self.rec.operation_id}),
                );
                return self.force_accept(S::Accepted, TerminalState::Completed, Some(fake));
            }
            self.rec.pending_input = None;
            self.rec.input_stream_open = false;
            self.go(S::TerminalObserved)?;
            self.rec.fetch_attempts = 0;
            self.schedule(0, Timer::FetchDue);
            return STAYED;
        }
        if !latest {
            // A newer request is out; its answer (or loss) drives what happens next.
            return STAYED;
        }
        match (state, status) {
            (S::CancelRequested, _) if self.rec.cancel_pending => {
                if mutated!(self, CancelUntilConfirmed) {
                    // Planted: say it again, uncounted; its ack schedules the next read.
                    return self.send_cancel();
                }
                // Best-effort cancel already taken: only a terminal read says who won.
                self.schedule(self.cancel_requery_ms(), Timer::CancelRequery);
                STAYED
            }
            (S::CancelRequested, _) if mutated!(self, CancelBudgetOffByOne, when self.rec.cancel_attempts == self.cfg.max_cancel_attempts) => {
                self.cancel_again()
            }
            (S::CancelRequested, _) => {
                if self.rec.cancel_attempts >= self.cfg.max_cancel_attempts {
                    return self.budget_spent(
                        Timer::CancelRequery,
                        "cancel attempts spent and the operation still runs",
                    );
                }
                self.cancel_again()
            }
            (S::Working, P::InputRequired) => {
                self.go(S::InputRequired)?;
                self.open_input_stream();
                STAYED
            }
            (S::InputRequired, P::InputRequired) => {
                if self.rec.pending_input.is_none() && !self.rec.input_stream_open {
                    self.open_input_stream();
                }
                STAYED
            }
            (S::InputRequired, _) => {
                if self.rec.pending_input.is_some() {
                    return STAYED;
                }
                // The server moved on from the round we answered: it has our answer. A request
                // with the same id and content after this is another round (servers that reuse
                // ids, like the TS SDK's), never one to answer again without the gate
                // (mcp_sqlite seed 47038: a replica said round 1's accept to round 2).
                self.rec.last_answer = None;
                self.rec.input_stream_open = false;
                self.go(S::Working)?;
                self.schedule_poll_after(None);
                STAYED
            }
            _ => {
                if !mutated!(self, PollNotRearmed, when state == S::Working) {
                    self.schedule_poll_after(None);
                }
                STAYED
            }
        }
    }

    /// An input stream is open, opened by this process (only its connection carries it).
    fn stream_opened(&mut self) {
        self.rec.input_stream_open = true;
        self.rec.input_stream_owner = Some(self.ctx.process);
    }

    /// MCP delivers input requests on a result stream: open one and expect exactly one request.
    fn open_input_stream(&mut self) {
        self.stream_opened();
        self.send(Outbound::FetchResult {
            operation_id: self.op_id(),
        });
    }

    fn on_submit_reply(&mut self, kind: RequestKind, reply: &Reply, latest: bool) -> R {
        let state = self.rec.local_state;
        if !matches!(state, S::Submitting | S::SubmissionUnknown) {
            return rejected(Rejection::NotApplicable);
        }
        match reply {
            // A task with no id cannot be followed, yet the server may have created one: settle
            // it by key like any other submission whose outcome is unknown. (Refusing the
            // reply and waiting left the node with nothing armed: no other answer comes.)
            Reply::Submitted(v)
                if v.operation_id.is_empty() && latest && state == S::Submitting =>
            {
                self.submission_unknown()
            }
            Reply::Submitted(v) => {
                // A server may make a task of a call we sent without one: the task, not the
                // reply, then holds the outcome, and the record stops calling itself synchronous
                // so that it is judged (and resumed) as the task it is.
                self.rec.synchronous = false;
                self.operation_known(v)
            }
            // The tool may have run, and no task exists that a lookup by key could find: "not
            // found by key" would then look like proof that nothing ran, and the call would run
            // again. Late or not, this settles it: a human reconciles, nothing is resent.
            Reply::SubmitOutcomeUnknown { .. } if mutated!(self, UnknownOutcomeAsRefusal, when state == S::Submitting) => {
                // Planted: an error after the tool may have run, read as "refused, nothing ran".
                self.accept(S::Rejected, TerminalState::Rejected, None, None)
            }
            Reply::SubmitOutcomeUnknown { reason } => {
                self.hand_over(&format!("the server answered the submission in a way that leaves open whether the tool ran, with no task to follow: {reason}"))
            }
            Reply::SubmitRefused { .. } if state == S::Submitting && latest => {
                self.accept(S::Rejected, TerminalState::Rejected, None, None)
            }
            // A synchronous call's reply, or a server that chose to answer a submission inline
            // instead of creating a task (the tasks extension lets it): the result is in hand.
            Reply::SyncResult(rv) if state == S::Submitting && latest && (kind == RequestKind::Submit || self.rec.synchronous) => {
                // Answered inline: the call ran synchronously after all, with no operation id.
                self.rec.synchronous = true;
                if !rv.verified {
                    return self.hand_over("a synchronous result failed verification and cannot be fetched again");
                }
                let terminal = if rv.is_error { TerminalState::Failed } else { TerminalState::Completed };
                self.accept(S::Accepted, terminal, Some(rv.digest.clone()), Some(rv.payload.clone()))
            }
            // The server answered inline, so the tool may well have run (an error result may also
            // be a refusal in disguise: the Python SDK's answer to a task-augmented call of a tool
            // that forbids tasks), but the reply cannot be taken as the receipt: it answers a
            // submission we had counted lost (SUBMISSION_UNKNOWN has no way to ACCEPTED), or an
            // older one than the newest. No task exists, so a lookup by key would find nothing and
            // the call would be sent again: a human reconciles instead.
            Reply::SyncResult(_) => self.hand_over(
                "the server answered inline a submission already counted lost: the tool may have run, and no task exists that a lookup by key could find",
            ),
            _ if !latest || state != S::Submitting => STAYED,
            // 429 means the server did not take the request: same key, after Retry-After.
            Reply::RateLimited { retry_after_ms } => {
                self.schedule(retry_after_ms.unwrap_or(self.cfg.retry_interval_ms), Timer::SubmitDue);
                STAYED
            }
            // Anything else leaves us not knowing whether an operation was created.
            _ => self.submission_unknown(),
        }
    }

    fn on_lookup_reply(&mut self, reply: &Reply, latest: bool) -> R {
        if self.rec.local_state != S::SubmissionUnknown {
            return rejected(Rejection::NotApplicable);
        }
        match reply {
            Reply::LookupFound(v) => self.operation_known(v),
            Reply::LookupNotFound if latest => {
                // "Not found by key" proves "never created" only while the key would still be
                // answerable: within the server's key retention and our requested ttl, counted
                // from before our first submission left.
                let window = match (self.cfg.key_retention_ms, self.cfg.task_ttl_ms) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if window.is_some_and(|w| self.now().saturating_sub(self.rec.created_at_ms) >= w) {
                    return self.hand_over("not found by key, but past the key retention: it may have existed and expired");
                }
                self.go(S::NotFoundSafe)?;
                self.schedule(0, Timer::SubmitDue);
                STAYED
            }
            Reply::LookupUnsupported => self.hand_over("the server does not answer lookups by key"),
            _ if !latest => STAYED,
            Reply::RateLimited { retry_after_ms } | Reply::Unavailable { retry_after_ms } => {
                self.schedule(
                    retry_after_ms
                        .unwrap_or(self.cfg.retry_interval_ms)
                        .max(self.cfg.retry_interval_ms),
                    Timer::LookupDue,
                );
                STAYED
            }
            _ => {
                self.schedule(self.cfg.retry_interval_ms, Timer::LookupDue);
                STAYED
            }
        }
    }

    fn on_poll_reply(&mut self, reply: &Reply, latest: bool) -> R {
        if !matches!(
            self.rec.local_state,
            S::Working | S::InputRequired | S::CancelRequested
        ) {
            return rejected(Rejection::NotApplicable);
        }
        match reply {
            Reply::InputRequests(reqs) => self.on_input_requests(reqs, latest),
            Reply::Status(v) => match self.absorb(v) {
                Ok(()) => self.on_status(v.status, latest),
                // Someone else's task in our reply: refuse it, and keep our own polling alive.
                Err(refusal) => {
                    if latest {
                        self.schedule_poll_after(None);
                    }
                    Ok(refusal)
                }
            },
            _ if !latest => STAYED,
            Reply::NotFound { .. } => {
                self.not_found("operation not found before a terminal state was read")
            }
            Reply::RateLimited { retry_after_ms } | Reply::Unavailable { retry_after_ms } => {
                self.schedule_poll_after(*retry_after_ms);
                STAYED
            }
            _ => {
                self.schedule_poll_after(None);
                STAYED
            }
        }
    }

    /// A not-found may be a lagging replica: retry a bounded number of times. After that
    /// nothing can be proved: manual reconciliation.
    /// After a not-found the streak allows (or one it does not count): read again, the same
    /// read, after the retry interval.
    fn read_again_after_not_found(&mut self) -> R {
        self.read_again_after(self.cfg.retry_interval_ms)
    }

    fn read_again_after(&mut self, wait_ms: u64) -> R {
        if matches!(self.rec.local_state, S::FetchingResult) {
            self.schedule(wait_ms, Timer::FetchDue);
        } else {
            self.schedule_poll_after(Some(wait_ms));
        }
        STAYED
    }

    fn not_found(&mut self, why: &str) -> R {
        if mutated!(self, NotFoundMeansNeverCreated, when self.rec.submit_attempts < self.cfg.max_submit_attempts)
        {
            // Planted: "404, so it never existed": forget the id and submit again.
            self.force(S::NotFoundSafe);
            self.rec.operation_id = None;
            self.rec.expires_at_ms = None;
            self.schedule(0, Timer::SubmitDue);
            return STAYED;
        }
        if mutated!(self, NotFoundIsFailure) {
            // Planted: "the server says it is gone, so it failed".
            return self.force_accept(S::Accepted, TerminalState::Failed, None);
        }
        if self.not_found_predates_a_sight() {
            // Read again as after any not-found the streak allows; this one is not counted.
            return self.read_again_after_not_found();
        }
        if self.rec.poll_cursor.not_found_streak == 0 {
            // Not-founds are acted on only as answers to the newest request.
            self.rec.poll_cursor.not_found_first_seq = self.rec.poll_cursor.sent_seq;
            self.rec.poll_cursor.not_found_first_at_ms = Some(self.now());
            self.rec.poll_cursor.not_found_first_sent_at_ms = self.reply_sent_ms;
        }
        self.rec.poll_cursor.not_found_streak += 1;
        // After the reckoned expiry too: it is an estimate, counted from this executor's sight
        // of the operation or of its end, and the server restarts its deletion timer when the
        // task ends, seen or not. An end read but set aside (its commit lost the race to a
        // later request's 404) leaves the expiry at creation's ttl while the task lives on
        // (mcp_ext_replicas seeds 41830, 223964: the next 404, from a lagging replica, came
        // past it and was handed over at once). Two more reads cost seconds; a false hand-off
        // costs a person.
        if self.rec.poll_cursor.not_found_streak <= self.cfg.not_found_retries {
            return self.read_again_after_not_found();
        }
        // A request sent after the streak began was overtaken unanswered (another process's on
        // the same epoch, or one whose reply is late): until a request lease after that, its
        // answer may yet show the operation alive, so read again then rather than conclude
        // (mcp_faults seed 21921: a replica's poll, in flight, would have shown the task
        // working when the third 404 arrived; mcp_ext_replicas seeds 11369 and 72278: a
        // replica's fetch held the verified result, unread behind slow commits for 2 to 3 s,
        // when the third and then a fourth 404 came). If that request's sender is another
        // process of this epoch, the lease runs from when its beat last said it lives
        // (`Ctx::overtaken_sender_until_ms`), as a sent submission's does: it may hold the
        // answer frozen whole (mcp_ext_replicas seed 84944: a replica read its poll's answer
        // showing the task working and froze 12.9 s; the streak concluded a lease after the
        // overtaking, 3 s before the thaw). Past the reckoned expiry too, an estimate.
        // Our own request numbered before the streak began was answered or lost here, where
        // we can see it; another process's may have left after the streak's first request.
        let first_seq = self.rec.poll_cursor.not_found_first_seq;
        if let Some(wait_ms) = self.overtaken_lease_wait_ms(Some(first_seq)) {
            return self.read_again_after(wait_ms);
        }
        // The reckoned expiry decides nothing here, but tells the person what to expect, as
        // what it is: an estimate. Counted from sights, it is late by a reply's latency, and
        // early when the server restarted its timer at an end this executor never read.
        let before_expiry = self.rec.expires_at_ms.is_none_or(|e| self.now() < e);
        let when = if before_expiry {
            "before the expected expiry"
        } else {
            "after the expected expiry"
        };
        self.hand_over(&format!("{why} ({when})"))
    }

    /// How long to wait before concluding, while a request overtaken unanswered may still be
    /// answered: until a request lease after the overtaking, or after the last beat of its
    /// sender, another process of this epoch (`Ctx::overtaken_sender_until_ms`), if later. Our
    /// own requests count only when numbered after `own_after_seq`: an older one of ours was
    /// answered or lost here, where we can see it. At least the retry interval; `None` once
    /// the lease has run out.
    fn overtaken_lease_wait_ms(&self, own_after_seq: Option<u64>) -> Option<u64> {
        let process = self.ctx.process;
        let end_ms = self
            .rec
            .poll_cursor
            .overtaken
            .filter(|o| {
                own_after_seq.is_some_and(|first| o.seq > first)
                    || o.by.is_some_and(|p| p != process)
            })
            .map(|o| {
                o.at_ms
                    .max(self.ctx.overtaken_sender_until_ms.unwrap_or(0))
                    .saturating_add(self.cfg.request_lease_ms)
            })?;
        (self.now() < end_ms).then(|| (end_ms - self.now()).max(self.cfg.retry_interval_ms))
    }

    /// A budget is spent (the fetches, or the cancel attempts while a read shows the operation
    /// still running): hand over, unless another process's request was overtaken unanswered
    /// within a request lease; then look again (`look_again`) when the lease runs out. That
    /// request may hold what this process lacks: the verified result (mcp_ext_replicas seed
    /// 492064: a replica's fetch drew it and its process sat 11 s in slow commits before
    /// reading it, while this process's last fetch came back cut and spent the attempts; the
    /// record is final by the next look if that process accepted), or the server's ack of a
    /// cancel, which the extension and AIP-151 may follow with reads showing the work running
    /// (mcp_ext_replicas seed 5061856 with cancel_503: a process's last attempt was acknowledged
    /// and sat 2.5 s in a slow commit while a replica read the task working; that ack, stale by
    /// the next look, still marks the cancel taken).
    fn budget_spent(&mut self, look_again: Timer, why: &str) -> R {
        if let Some(wait_ms) = self.overtaken_lease_wait_ms(None) {
            self.schedule(wait_ms, look_again);
            return STAYED;
        }
        self.hand_over(why)
    }

    /// Input requests inlined in a status read (the tasks extension): the read itself plays
    /// the part of MCP 2025-11-25's input stream. Requests already answered come back until the
    /// server has processed the answer; they are skipped, not asked again.
    fn on_input_requests(&mut self, reqs: &[InputRequest], latest: bool) -> R {
        match self.rec.local_state {
            S::Working => self.go(S::InputRequired)?,
            S::InputRequired => {}
            // Still running while we cancel: the same as a non-terminal status read (resend a lost
            // cancel, or keep reading after a best-effort one).
            // They show the operation alive as a status does (mcp_ext_replicas seed 233499: a
            // poll's input requests, read after a cancel was sent, left a lagging replica's
            // 404 streak running, and its third 404 handed a live task to a person).
            S::CancelRequested => {
                self.shown_alive();
                if self.rec.cancel_pending && latest {
                    if let Some(answered) = self.answer_input_while_cancelling(reqs) {
                        self.rec.last_server_status =
                            Some(crate::record::ProtocolStatus::InputRequired);
                        return answered;
                    }
                }
                return self.on_status(crate::record::ProtocolStatus::InputRequired, latest);
            }
            _ => return rejected(Rejection::NotApplicable),
        }
        self.rec.last_server_status = Some(crate::record::ProtocolStatus::InputRequired);
        self.shown_alive();
        if self.rec.pending_input.is_some() {
            return STAYED;
        }
        let fresh = reqs
            .iter()
            .find(|r| !self.rec.answered_inputs.contains(&r.server_request_id));
        if fresh.is_none() && latest {
            if let Some(resent) = self.resend_if_still_asked(reqs.iter()) {
                return resent;
            }
        }
        match fresh {
            Some(req) => {
                self.stream_opened();
                let taken = self.input_requested(req)?;
                if self.rec.pending_input.is_none() {
                    // Refused (e.g. it named another task): no round began, so keep reading.
                    self.rec.input_stream_open = false;
                    if latest {
                        self.schedule_poll_after(None);
                    }
                }
                Ok(taken)
            }
            None => {
                if latest {
                    // The answer ended whatever stream asked for it and nothing in it is new:
                    // the next status read must not wait on a stream that is gone (proptest,
                    // CI of 262cc0a: a fetch's empty input list left a poll timer that fired
                    // into a still-open stream, and nothing else was armed).
                    self.rec.input_stream_open = false;
                    self.schedule_poll_after(None);
                }
                STAYED
            }
        }
    }

    fn on_fetch_reply(&mut self, reply: &Reply, latest: bool) -> R {
        if let (Reply::InputRequests(reqs), S::Working | S::InputRequired | S::CancelRequested) =
            (reply, self.rec.local_state)
        {
            return self.on_input_requests(reqs, latest);
        }
        match self.rec.local_state {
            S::FetchingResult if latest => self.on_result(reply),
            // An ended task's result does not change, so a verified result of our operation
            // answers every fetch alike, whichever of ours drew it. Setting it aside for not
            // answering the newest fetch lost it when the newest reply was lost too
            // (mcp_ext_faults seed 223900: a replica's fetch went out 2 ms before this one's
            // verified result came back, its reply was lost, and the fetch budget handed a
            // completed task to a person). So does a failed operation's error, the whole of its
            // result (aip151_faults seed 1209602: a replica's fetch drew the error 11 ms after
            // the primary's fetch superseded it; two lagging 404s then handed a failed
            // operation to a person). Anything else a superseded fetch says is left unread.
            S::FetchingResult if self.final_answer_of_ours(reply) => self.on_result(reply),
            // The input stream ended (the task finished, or the server dropped it): read status.
            S::InputRequired if latest && self.rec.pending_input.is_none() => {
                self.rec.input_stream_open = false;
                match reply {
                    Reply::NotFound { .. } => {
                        self.not_found("operation not found while waiting for input")
                    }
                    _ => {
                        self.schedule(0, Timer::PollDue);
                        STAYED
                    }
                }
            }
            _ => rejected(Rejection::NotApplicable),
        }
    }

    /// A fetch's answer that is the whole outcome of our ended operation, the same whichever
    /// fetch drew it: a verified result of ours, or the error of an operation a read showed
    /// failed.
    fn final_answer_of_ours(&self, reply: &Reply) -> bool {
        match reply {
            Reply::Result(rv) => self.result_usable(rv),
            Reply::ResultIsError { .. } => {
                self.rec.last_server_status.and_then(|s| s.as_terminal())
                    == Some(TerminalState::Failed)
            }
            _ => false,
        }
    }

    fn on_result(&mut self, reply: &Reply) -> R {
        let Some(terminal) = self.rec.last_server_status.and_then(|s| s.as_terminal()) else {
            return self.hand_over("fetching a result without a terminal status");
        };
        match (reply, terminal) {
            (Reply::Result(rv), _) if self.result_usable(rv) => self.accept(
                S::Accepted,
                terminal,
                Some(rv.digest.clone()),
                Some(rv.payload.clone()),
            ),
            (Reply::ResultIsError { code, message }, TerminalState::Failed) => {
                let payload = serde_json::json!({"error": {"code": code, "message": message}});
                self.accept(
                    S::Accepted,
                    terminal,
                    Some(value_digest(&payload)),
                    Some(payload),
                )
            }
            // A failed task may store no result: the Python SDK (mcp 1.30) answers `tasks/result`
            // of a task failed by an exception with only `_meta`, and puts the exception's text in
            // `statusMessage`. The terminal status read decides; its message is the error
            // downstream reads (the shape of every failed payload: `error.message`).
            (Reply::NoResultStored { .. }, TerminalState::Failed) => {
                let payload = self
                    .rec
                    .last_status_message
                    .clone()
                    .map(|message| serde_json::json!({"error": {"message": message}}));
                let digest = payload.as_ref().map(value_digest);
                self.accept(S::Accepted, terminal, digest, payload)
            }
            (
                Reply::NoResultStored { .. },
                TerminalState::Cancelled | TerminalState::DoneWithoutResult,
            ) => self.accept(S::Accepted, terminal, None, None),
            (Reply::NotFound { .. }, _) => self.not_found("result gone before it was fetched"),
            (Reply::RateLimited { retry_after_ms } | Reply::Unavailable { retry_after_ms }, _) => {
                self.refetch(retry_after_ms.unwrap_or(0))
            }
            (Reply::Result(rv), _) if mutated!(self, UnverifiedDigestRecorded) => {
                // Planted: keep the digest of what arrived "provisionally" and fetch again.
                self.rec.result_digest = Some(rv.digest.clone());
                self.refetch(0)
            }
            // Unverified, truncated, mismatched or unexpected: fetch again, a bounded number of times.
            _ => self.refetch(0),
        }
    }

    fn result_usable(&self, rv: &ResultView) -> bool {
        let ours = match (&rv.related_operation_id, &self.rec.operation_id) {
            (Some(got), Some(id)) => got == id,
            (None, _) => true,
            (Some(_), None) => false,
        };
        (rv.verified && ours) || mutated!(self, AcceptUnverifiedResult)
    }

    /// A fetch came back without a usable result (lost, refused, unverified): count it, and
    /// fetch again while attempts remain. Counted at its outcome, not at its send: a crash
    /// between the commit and the send sends nothing, and a reply lost with its reader was no
    /// attempt at the result (mcp_replicas seed 75111: three restarts that never sent and two
    /// replies that died with their readers spent the attempts on what three fetches saw). A
    /// crash loop is bounded by the wait budget.
    fn refetch(&mut self, at_least_ms: u64) -> R {
        self.rec.fetch_attempts += 1;
        if self.rec.fetch_attempts >= self.cfg.max_fetch_attempts {
            return self.budget_spent(
                Timer::FetchDue,
                "no verified result after the allowed fetches",
            );
        }
        self.schedule(self.cfg.retry_interval_ms.max(at_least_ms), Timer::FetchDue);
        STAYED
    }

    fn on_cancel_reply(&mut self, reply: &Reply, latest: bool) -> R {
        if self.rec.local_state != S::CancelRequested {
            return rejected(Rejection::NotApplicable);
        }
        match reply {
            Reply::CancelAcknowledged(v) => match self.absorb(v) {
                Ok(()) => self.on_status(v.status, latest),
                Err(refusal) => {
                    if latest {
                        self.schedule(self.cancel_requery_ms(), Timer::CancelRequery);
                    }
                    Ok(refusal)
                }
            },
            // Already terminal: read which terminal state it is; never rewrite it as cancelled.
            Reply::CancelPending => {
                // The server took a cancel for our operation id (AIP-151 and the tasks
                // extension answer "not found" for one they do not hold): it held the operation
                // after any not-found this reply is newer than. Those were a lagging replica's
                // (aip151_faults seed 13660: two lagging 404s, this ack, a third 404, and a live
                // cancelled operation handed to a person).
                self.shown_alive();
                // The cancel may have ended the task by now (mcp_ext_faults seed 1380165: an
                // acknowledged cancel, no read of the end, and a lagging replica's 404 past
                // creation's ttl handed the cancelled task to a person at once).
                self.ended_unseen();
                self.rec.cancel_pending = true;
                self.schedule(self.cancel_requery_ms(), Timer::CancelRequery);
                STAYED
            }
            Reply::CancelRejectedTerminal { .. } if mutated!(self, CancelRejectionAsCancelled) => {
                self.accept(S::CancelledAccepted, TerminalState::Cancelled, None, None)
            }
            Reply::CancelRejectedTerminal { .. } => {
                // The server holds our operation, ended (mcp_replicas seed 1844492: a cancel
                // refused as "already completed", then a lagging replica's 404 past the expiry
                // reckoned from first sight, and a completed task went to a person at once).
                self.shown_alive();
                self.ended_unseen();
                self.schedule(0, Timer::CancelRequery);
                STAYED
            }
            _ if !latest => STAYED,
            Reply::NotFound { .. } => self.not_found("operation not found while cancelling"),
            Reply::RateLimited { retry_after_ms } | Reply::Unavailable { retry_after_ms } => {
                self.schedule(
                    retry_after_ms.unwrap_or(0).max(self.cancel_requery_ms()),
                    Timer::CancelRequery,
                );
                STAYED
            }
            _ => {
                self.schedule(self.cancel_requery_ms(), Timer::CancelRequery);
                STAYED
            }
        }
    }

    fn lost(&mut self, kind: RequestKind, seq: u64, loss: Loss) -> R {
        if kind == RequestKind::InputResponse {
            // An answer sent as a request of its own went unacknowledged: remember it, and say it
            // again if the server keeps asking. Newer requests do not make this loss stale.
            if let Some(last) = &mut self.rec.last_answer {
                last.lost = true;
            }
            return STAYED;
        }
        if seq != self.rec.poll_cursor.sent_seq {
            // Superseded by a newer request; only the newest one's loss matters.
            return rejected(Rejection::StaleAnswer {
                seq,
                applied_seq: self.rec.poll_cursor.applied_seq,
            });
        }
        self.rec.poll_cursor.lost_streak += 1;
        match (kind, self.rec.local_state) {
            // Planted only. Each guard is one `mutated!` (false in every judged build), and the
            // body is a function of its own, so no mutant of the plant hides among the
            // executor's (they would all be equivalent: the code cannot run).
            (RequestKind::Submit, S::Submitting) if mutated!(self, FreshKeyOnSubmitTimeout) => {
                self.resubmit_blind(true)
            }
            (RequestKind::Submit, S::Submitting) if mutated!(self, ResubmitWithoutLookup) => {
                self.resubmit_blind(false)
            }
            (RequestKind::Submit | RequestKind::SubmitSync, S::Submitting) => {
                self.submission_unknown()
            }
            (RequestKind::Lookup, S::SubmissionUnknown) => {
                self.schedule(self.cfg.retry_interval_ms, Timer::LookupDue);
                STAYED
            }
            (RequestKind::Poll, S::Working | S::InputRequired | S::CancelRequested) => {
                self.schedule_poll_after(None);
                STAYED
            }
            // A fetch whose connection closed under it was no attempt at the result: the
            // server's answer, whatever it was, died with the connection, as a reply dies with
            // its reader in a crash (`mcp_ext_faults` seed 10341 at `connection_drop` 0.3 over
            // stdio: eight fetches counted in 26 incarnations, six of them sent into a
            // connection already closed, and a completed task went to a person). The process
            // ends with its connection; a crash loop is bounded by the wait budget.
            (RequestKind::Fetch, S::FetchingResult) if loss == Loss::ConnectionGone => {
                self.schedule(self.cfg.retry_interval_ms, Timer::FetchDue);
                STAYED
            }
            (RequestKind::Fetch, S::FetchingResult) => self.refetch(0),
            (RequestKind::Fetch, S::InputRequired) => {
                self.rec.input_stream_open = false;
                self.schedule_poll_after(None);
                STAYED
            }
            // A lost cancel ack is resolved by reading the state.
            (RequestKind::Cancel, S::CancelRequested) => {
                self.schedule(self.cancel_requery_ms(), Timer::CancelRequery);
                STAYED
            }
            _ => rejected(Rejection::NotApplicable),
        }
    }

    /// Planted bugs only: after a lost submission, submit again without a lookup by key, under
    /// a freshly minted key if `fresh_key`.
    fn resubmit_blind(&mut self, fresh_key: bool) -> R {
        if self.rec.submit_attempts >= self.cfg.max_submit_attempts {
            return self.submission_unknown();
        }
        let mut key = self.rec.submission_key.clone();
        if fresh_key {
            key = format!("{key}~retry{}", self.rec.submit_attempts);
        }
        self.rec.submit_attempts += 1;
        let (tool, arguments) = (self.rec.tool_name.clone(), (*self.rec.request_body).clone());
        self.send(Outbound::Submit {
            key,
            tool,
            arguments,
            ttl_ms: self.cfg.task_ttl_ms,
        });
        STAYED
    }

    fn input_requested(&mut self, req: &InputRequest) -> R {
        if let Some(rel) = &req.related_operation_id {
            if self.rec.operation_id.as_ref() != Some(rel) {
                return rejected(Rejection::OperationMismatch {
                    expected: self.rec.operation_id.clone(),
                    got: rel.clone(),
                });
            }
        }
        let moved_on = self.rec.last_answer.as_ref().is_some_and(|l| {
            l.server_request_id == req.server_request_id
                && l.schema_digest != req.schema_digest
                && !self.rec.answered_input_digests.contains(&req.schema_digest)
        });
        if moved_on {
            // Something new asked under the id we answered last (a server that reuses ids): the
            // server has our answer and moved on, so a later copy of the answered request must
            // not be answered again, wherever it lands (mcp_replicas seed 10151: round 2 came
            // unsolicited, then round 1's copy on our next stream was given round 1's answer,
            // which the server took as round 2's).
            self.rec.last_answer = None;
        }
        if self.rec.local_state != S::InputRequired {
            return rejected(Rejection::UnsolicitedInput);
        }
        if let Some(p) = &self.rec.pending_input {
            if p.server_request_id != req.server_request_id {
                return rejected(Rejection::UnsolicitedInput);
            }
            // The same request delivered again while still unanswered changes nothing.
            if p.schema_digest == req.schema_digest
                || self.rec.answered_input_digests.contains(&req.schema_digest)
            {
                return STAYED;
            }
            // Something new under the id of the question still open (a server that reuses
            // ids): the server moved on from it (another process answered it), and an answer to
            // the open question would be taken as this one's (mcp_replicas seed 36439: round
            // 1's decline, asked of a restarted executor, went to round 2). This is the round
            // now; the open question's answer will be stale.
            return self.begin_round(req);
        }
        if let Some(last) = self.rec.last_answer.clone().filter(|l| {
            l.server_request_id == req.server_request_id && l.schema_digest == req.schema_digest
        }) {
            // The request we answered last, delivered again (same id, same content): our answer
            // may still be in flight, or lost. Never a new round: the gate answered it. On a
            // stream we opened after answering, say the same answer again (bounded); a server
            // that already has it takes the copy as stale. (With ids reused for every request,
            // as the TS SDK does, identical content is all that tells a re-delivery from a new
            // round that happens to ask the same thing; such a round gets the last answer.)
            // Only a stream this process opened: a copy reaching this process while another
            // one's stream is open came on an old stream of ours, and the server may be asking
            // the next round under the same id on that other stream (mcp_replicas seed 275211:
            // the primary said round 1's accept again on a copy of round 1, as a replica's
            // stream carried round 2 under the id 0 the ts-sdk profile then reused, and the
            // server took it as round 2's; the replica then refused round 2 as answered).
            // That other stream stays open: its process reads what comes on it.
            if self.rec.input_stream_open && self.rec.input_stream_owner != Some(self.ctx.process) {
                return rejected(Rejection::ReplayedInput);
            }
            let again = self.rec.input_stream_open && self.may_resend(&last);
            self.rec.input_stream_open = false;
            if !again {
                return rejected(Rejection::ReplayedInput);
            }
            return self.resend_last_answer(last);
        }
        if !self.rec.input_stream_open {
            // Only a stream we opened after the server showed input_required again may carry a
            // new round; anything else is a replay of an answered request.
            return if self.rec.answered_inputs.contains(&req.server_request_id) {
                rejected(Rejection::ReplayedInput)
            } else {
                rejected(Rejection::UnsolicitedInput)
            };
        }
        self.rec.input_stream_open = false;
        let answered_before = self.rec.answered_inputs.contains(&req.server_request_id)
            && self.rec.answered_input_digests.contains(&req.schema_digest);
        if answered_before {
            // An answered request again (same id, same content), on a stream we opened after the
            // server moved on from it: a late copy (mcp_sqlite seed 69158: round 1's copy came
            // just before round 2, under the id the ts-sdk profile then reused, and the person
            // was asked about round 1 for an answer the server took as round 2's). Refused, and
            // the stream is left closed so the next read opens another one, which carries what
            // the server asks now. The same request on `ANSWERED_COPY_NEW_ROUND` streams in a
            // row is the server asking it again: a new round.
            self.rec.answered_copy_streak += 1;
            if self.rec.answered_copy_streak < crate::record::ANSWERED_COPY_NEW_ROUND {
                self.schedule_poll_after(None);
                return rejected(Rejection::ReplayedInput);
            }
        }
        self.begin_round(req)
    }

    /// A new input round for `req`: put to the gate, with the approval deadline armed.
    fn begin_round(&mut self, req: &InputRequest) -> R {
        self.rec.answered_copy_streak = 0;
        self.rec.input_round += 1;
        let p = PendingInput {
            round: self.rec.input_round,
            server_request_id: req.server_request_id.clone(),
            schema_digest: req.schema_digest.clone(),
            deadline_ms: self.now().saturating_add(self.cfg.approval_timeout_ms),
            request: req.raw.clone(),
            requested_schema: req.requested_schema.clone(),
        };
        self.rec.pending_input = Some(p.clone());
        self.ask_approval(&p);
        STAYED
    }

    fn ask_approval(&mut self, p: &PendingInput) {
        self.cmds.push(Command::AskApproval {
            round: p.round,
            operation_id: self.op_id(),
            request: p.request.clone(),
            requested_schema: p.requested_schema.clone(),
            schema_digest: p.schema_digest.clone(),
            deadline_ms: p.deadline_ms,
        });
        self.cmds.push(Command::Schedule {
            at_ms: p.deadline_ms,
            timer: Timer::ApprovalDeadline { round: p.round },
        });
    }

    fn approval(&mut self, round: u32, schema_digest: &str, reply: ApprovalReply) -> R {
        let current = self.rec.input_round;
        let Some(p) = self.rec.pending_input.clone() else {
            return rejected(Rejection::StaleApproval {
                round,
                current_round: current,
            });
        };
        let stale = p.round != round || p.schema_digest != schema_digest;
        if self.rec.local_state != S::InputRequired
            || (stale && !mutated!(self, AcceptStaleApproval))
        {
            return rejected(Rejection::StaleApproval {
                round,
                current_round: current,
            });
        }
        self.rec.pending_input = None;
        self.answer(p.server_request_id, p.schema_digest, reply)
    }

    /// Send `reply` as the answer to the server's request `server_request_id`, and remember it
    /// as answered (so that copies of the request are not asked again) and as the last answer
    /// (so that a lost one can be said again).
    fn answer(
        &mut self,
        server_request_id: serde_json::Value,
        schema_digest: String,
        reply: ApprovalReply,
    ) -> R {
        self.rec.answered_inputs.push(server_request_id.clone());
        if self.rec.answered_inputs.len() > ANSWERED_INPUTS_MAX {
            self.rec.answered_inputs.remove(0);
        }
        self.rec.answered_input_digests.push(schema_digest.clone());
        if self.rec.answered_input_digests.len() > ANSWERED_INPUTS_MAX {
            self.rec.answered_input_digests.remove(0);
        }
        self.rec.last_answer = Some(crate::record::LastAnswer {
            server_request_id: server_request_id.clone(),
            schema_digest,
            reply: reply.clone(),
            lost: false,
            resends: 0,
            sent_at_ms: Some(self.now()),
        });
        self.send(Outbound::InputResponse {
            operation_id: self.op_id(),
            server_request_id,
            reply,
        });
        self.schedule_poll_after(None);
        STAYED
    }

    /// Input requests shown while a best-effort cancel of ours was taken and the operation still
    /// runs: the cancel did not stop the tool (it may never: a tool that ignores cancels), and
    /// it now waits on us. The caller asked to cancel, so nobody is asked: each new request is
    /// answered `cancel` at once, and a lost answer is said again. Unanswered, the tool would
    /// wait until the wait budget handed a live task to a person (mcp_ext_faults seed 472,
    /// session 41: 849 reads of `input_required` in 30 minutes, then UNKNOWN). `None`: nothing
    /// to answer.
    fn answer_input_while_cancelling(&mut self, reqs: &[InputRequest]) -> Option<R> {
        let op = self.rec.operation_id.clone();
        let ours = |r: &&InputRequest| {
            r.related_operation_id
                .as_ref()
                .is_none_or(|rel| op.as_ref() == Some(rel))
        };
        // New: an id not answered yet, or an answered id asking something not answered yet (a
        // server that reuses ids across rounds, as the approval path reads it too).
        let fresh = reqs.iter().filter(ours).find(|r| {
            !self.rec.answered_inputs.contains(&r.server_request_id)
                || !self.rec.answered_input_digests.contains(&r.schema_digest)
        });
        if let Some(req) = fresh {
            let (id, digest) = (req.server_request_id.clone(), req.schema_digest.clone());
            return Some(self.answer(id, digest, ApprovalReply::Cancel));
        }
        self.resend_if_still_asked(reqs.iter().filter(ours))
    }

    /// Our last answer's request was lost and the server still asks the same thing (one of
    /// `reqs` has its id): say it again, within `may_resend`. `None`: nothing to say again.
    fn resend_if_still_asked<'r>(
        &mut self,
        mut reqs: impl Iterator<Item = &'r InputRequest>,
    ) -> Option<R> {
        let last = self.rec.last_answer.clone()?;
        let still_asked = reqs.any(|r| r.server_request_id == last.server_request_id);
        (still_asked && last.lost && self.may_resend(&last)).then(|| self.resend_last_answer(last))
    }

    /// A read showed the operation still running after our cancel: one attempt more.
    fn cancel_again(&mut self) -> R {
        self.rec.cancel_attempts += 1;
        self.send_cancel()
    }

    fn send_cancel(&mut self) -> R {
        self.send(Outbound::Cancel {
            operation_id: self.op_id(),
        });
        STAYED
    }

    fn request_cancel(&mut self) -> R {
        self.rec.cancel_generation += 1;
        self.rec.cancel_attempts = 1;
        self.rec.cancel_pending = false;
        self.rec.pending_input = None;
        self.rec.input_stream_open = false;
        self.go(S::CancelRequested)?;
        self.send_cancel()
    }

    fn cancel_clicked(&mut self) -> R {
        if mutated!(self, FailOnCancelClick, when matches!(self.rec.local_state, S::Working | S::InputRequired))
        {
            // Planted: the click itself is the outcome.
            return self.force_accept(S::Accepted, TerminalState::Failed, None);
        }
        match self.rec.local_state {
            S::Working | S::InputRequired => self.request_cancel(),
            // No id yet: remember, and cancel as soon as the server names the operation.
            // Planted: the click is acknowledged and forgotten.
            S::Submitting | S::SubmissionUnknown | S::NotFoundSafe
                if mutated!(self, CancelDroppedBeforeOperationId) =>
            {
                STAYED
            }
            S::Submitting | S::SubmissionUnknown | S::NotFoundSafe => {
                self.rec.cancel_wanted = true;
                STAYED
            }
            S::CancelRequested => STAYED,
            _ => rejected(Rejection::NotApplicable),
        }
    }
}
