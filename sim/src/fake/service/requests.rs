//! Requests: what the service does with each neutral request, and what it answers at once.

use rand::Rng;

use super::{
    AfterAnswer, CancelEffect, Dedupe, Ev, InlineRun, InputDelivery, KeyedInline, Reply, Task,
    TaskService, Work, WorkState,
};
use crate::fake::codec::{AnswerItem, CallId, Note, Request, Response, ResultShape, RunAs, Submit};
use crate::fake::truth::{StaleInputResponse, SyncRunKind, SyncRunTruth, TaskStatus, TaskTruth};

/// A request's effect on the fault decisions that ride on it (the status-after-cancel mark, a
/// completion racing the cancel): set by the server's fault room, applied here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CancelFaults {
    /// The work finishes at the instant the cancel lands (or takes effect, when delayed).
    pub race: bool,
    /// The work outlives the cancel, and its end may later overwrite `cancelled`.
    pub keep_working: bool,
    /// The cancel is acknowledged and never takes effect: the tool does not look for it (a
    /// delayed cancel only; an immediate one shows `cancelled` in its reply).
    pub ignore: bool,
}

impl TaskService {
    /// A request arrives at `now_ms`. Events due up to then are processed first. Returns the
    /// replies due at once (a held read or an inline run is answered by a later `advance`).
    /// `call`: where the reply goes; `None` when nobody waits for one. `frame`: the network's
    /// number for the frame that carried the request, kept with an answer to an input round.
    pub fn handle(
        &mut self,
        now_ms: u64,
        call: Option<CallId>,
        request: Request,
        faults: CancelFaults,
        frame: Option<u64>,
        shape: &dyn ResultShape,
    ) -> Vec<Reply> {
        self.process_until(now_ms, shape);
        let now = self.clock;
        self.sweep_on_call(now, shape);
        let response = match request {
            Request::Submit(s) => self.submit(now, call, s, shape),
            Request::Poll { task } => Some(self.poll(now, &task)),
            Request::Fetch { task } => self.fetch(now, call, &task),
            Request::Cancel { task } => Some(self.cancel(now, &task, faults, shape)),
            Request::Delete { task } => Some(match self.live(&task) {
                Ok(seq) => {
                    self.delete_task(seq, now);
                    Response::Ack
                }
                Err(expired) => Response::NotFound {
                    expired,
                    hidden: false,
                },
            }),
            Request::Answer { task, items } => {
                Some(self.answer(now, task.as_deref(), items, frame))
            }
            Request::Lookup { key } => {
                let seqs = self.by_key.get(&key).cloned().unwrap_or_default();
                Some(Response::Tasks(
                    seqs.into_iter()
                        .filter(|s| self.tasks[s].live())
                        .map(|s| self.view(s))
                        .collect(),
                ))
            }
            Request::List => {
                let live: Vec<u64> = self
                    .tasks
                    .iter()
                    .filter(|(_, t)| t.live())
                    .map(|(s, _)| *s)
                    .collect();
                Some(Response::Tasks(
                    live.into_iter().map(|s| self.view(s)).collect(),
                ))
            }
        };
        match (call, response) {
            (Some(call), Some(response)) => vec![Reply { call, response }],
            _ => Vec::new(),
        }
    }

    fn submit(
        &mut self,
        now: u64,
        call: Option<CallId>,
        s: Submit,
        shape: &dyn ResultShape,
    ) -> Option<Response> {
        // A server that deduplicates by key does so for a call it ran inline too (a task-augmented
        // call of a tool that forbids tasks included): the key names the submission, task or
        // not. Without this, a lookup by key finds no task for a call that ran, and the
        // executor's "never created" submitted it again (the `tool_redeployed` fault).
        if let (true, Some(key)) = (s.dedupe, &s.key) {
            // A run still going keeps its key whatever the window: its waiters need the answer.
            let kept = |first: &&mut KeyedInline| match self.cfg.policy.dedupe {
                Dedupe::WhileRetained => true,
                Dedupe::FromCreation { window_ms } => {
                    first.answer.is_none()
                        || window_ms.is_none_or(|w| now.saturating_sub(first.started_at_ms) < w)
                }
            };
            if let Some(first) = self.inline_by_key.get_mut(key).filter(kept) {
                self.truth.duplicate_submits_deduped += 1;
                return match &first.answer {
                    Some(answer) => Some(answer.clone()),
                    None => {
                        first.waiting.extend(call);
                        None
                    }
                };
            }
        }
        match s.run {
            RunAs::Task => Some(self.create_or_find(now, s, shape)),
            RunAs::Inline | RunAs::InlineThenRefuse => {
                let kind = if s.run == RunAs::Inline {
                    SyncRunKind::Plain
                } else {
                    SyncRunKind::ForbiddenRunAnyway
                };
                self.start_inline(now, call?, s, kind);
                None
            }
        }
    }

    /// A duplicate of an earlier submission within the dedupe window, if any.
    fn duplicate_of(&self, now: u64, key: &str) -> Option<u64> {
        let seqs = self.by_key.get(key)?;
        match self.cfg.policy.dedupe {
            Dedupe::WhileRetained => seqs.iter().rev().copied().find(|s| self.tasks[s].live()),
            Dedupe::FromCreation { window_ms } => {
                let &newest = seqs.last()?;
                let created = self.tasks[&newest].created_at;
                window_ms
                    .is_none_or(|w| now.saturating_sub(created) < w)
                    .then_some(newest)
            }
        }
    }

    fn create_or_find(&mut self, now: u64, s: Submit, shape: &dyn ResultShape) -> Response {
        if let (true, Some(key)) = (s.dedupe, &s.key) {
            if let Some(seq) = self.duplicate_of(now, key) {
                self.truth.duplicate_submits_deduped += 1;
                self.tt(seq).dedupe_hits += 1;
                return Response::Task(self.view(seq));
            }
        }
        let ttl = match (s.requested_ttl_ms, self.cfg.max_ttl_ms) {
            (Some(r), Some(max)) => Some(r.min(max)),
            (r, max) => r.or(max),
        };
        let id = self.mint_id();
        let preempt_at = if self.cfg.preempt_rate > 0.0 {
            // Drawn for every task, so the stream does not depend on the script.
            let preempted = self.rng.gen_bool(self.cfg.preempt_rate.clamp(0.0, 1.0));
            let offset = self.rng.gen_range(0..s.script.duration_ms.max(1));
            (preempted && s.script.duration_ms > 0).then_some(now + offset)
        } else {
            None
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let call_node = s.script.call_node.clone();
        self.truth.tasks.insert(
            id.clone(),
            TaskTruth::new(&call_node, &s.tool, s.key.clone(), now, ttl),
        );
        *self
            .truth
            .tasks_created_per_call_node
            .entry(call_node)
            .or_insert(0) += 1;
        let inputs = s.script.input_offsets();
        let task = Task {
            id: id.clone(),
            tool: s.tool,
            script: s.script,
            inputs,
            created_at: now,
            updated_at: now,
            ttl,
            status: TaskStatus::Working,
            notes: Vec::new(),
            work: Work {
                done_ms: 0,
                running_since: Some(now),
                next_input: 0,
                state: WorkState::Running,
                end_at: None,
            },
            outcome: None,
            deleted: false,
            lost: false,
            delete_at: ttl.map(|t| now + t),
            held: Vec::new(),
            rounds: Vec::new(),
            cancel_at: None,
            preempt_at,
            keeps_working_after_cancel: false,
            ignores_cancel: false,
            sched: [None; 4],
        };
        let zero_time = task.script.duration_ms == 0 && task.inputs.is_empty();
        self.tasks.insert(seq, task);
        self.by_id.insert(id, seq);
        if let Some(k) = s.key {
            self.by_key.entry(k).or_default().push(seq);
        }
        if zero_time {
            // Work that takes no time is done before the reply is written.
            self.force_finish(seq, now, shape);
        }
        self.reschedule(seq);
        Response::Task(self.view(seq))
    }

    fn start_inline(&mut self, now: u64, call: CallId, s: Submit, kind: SyncRunKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let truth_idx = self.truth.sync_runs.len();
        let key = s.key.clone().filter(|_| s.dedupe);
        if let Some(k) = &key {
            self.inline_by_key.insert(
                k.clone(),
                KeyedInline {
                    started_at_ms: now,
                    answer: None,
                    waiting: Vec::new(),
                },
            );
        }
        self.truth.sync_runs.push(SyncRunTruth {
            call_node: s.script.call_node.clone(),
            tool: s.tool,
            kind,
            idempotency_key: s.key,
            started_at_ms: now,
            finished_at_ms: None,
            outcome: s.script.outcome,
            side_effects: 0,
            result_digest: None,
            error_message: None,
            lost_at_ms: None,
        });
        self.schedule
            .insert((now + s.script.duration_ms, Ev::Inline(seq)));
        self.inline.insert(
            seq,
            InlineRun {
                call,
                script: s.script,
                kind,
                truth_idx,
                key,
            },
        );
    }

    fn poll(&mut self, now: u64, task: &str) -> Response {
        let seq = match self.live(task) {
            Ok(seq) => seq,
            Err(expired) => {
                return Response::NotFound {
                    expired,
                    hidden: false,
                }
            }
        };
        // A read that shows a pending input request delivers it.
        if self.cfg.policy.input == InputDelivery::Shown
            && self.task(seq).status == TaskStatus::InputRequired
        {
            self.deliver_round(seq, now);
        }
        Response::Task(self.view(seq))
    }

    fn fetch(&mut self, now: u64, call: Option<CallId>, task: &str) -> Option<Response> {
        let seq = match self.live(task) {
            Ok(seq) => seq,
            Err(expired) => {
                return Some(Response::NotFound {
                    expired,
                    hidden: false,
                })
            }
        };
        if self.task(seq).status.is_terminal() {
            return Some(self.result_response(seq));
        }
        self.task_mut(seq).held.extend(call);
        if self.cfg.policy.input == InputDelivery::Pushed
            && self.task(seq).pending_round().is_some()
        {
            self.deliver_round(seq, now);
        }
        None
    }

    fn cancel(
        &mut self,
        now: u64,
        task: &str,
        faults: CancelFaults,
        shape: &dyn ResultShape,
    ) -> Response {
        let seq = match self.live(task) {
            Ok(seq) => seq,
            Err(expired) => {
                return Response::NotFound {
                    expired,
                    hidden: false,
                }
            }
        };
        let status = self.task(seq).status;
        if status.is_terminal() {
            return Response::CancelRejected { status };
        }
        if faults.ignore || self.task(seq).ignores_cancel {
            assert!(
                matches!(self.cfg.policy.cancel.effect, CancelEffect::Delayed { .. }),
                "only a delayed cancel can be acknowledged and then ignored"
            );
            // rmcp's `ignores_cancel` tool, AIP-151's best effort that gets nowhere: the ack is
            // all there is; the work runs to its end and its outcome stands.
            self.task_mut(seq).ignores_cancel = true;
            self.tt(seq).cancel_ignored_at_ms.get_or_insert(now);
            return Response::CancelAccepted;
        }
        if faults.keep_working {
            self.task_mut(seq).keeps_working_after_cancel = true;
        }
        let running = self.task(seq).work.state == WorkState::Running;
        match self.cfg.policy.cancel.effect {
            CancelEffect::Immediate => {
                if faults.race && running {
                    // The work ends as the cancel lands: the cancel meets a terminal task.
                    self.force_finish(seq, now, shape);
                    let status = self.task(seq).status;
                    if status.is_terminal() {
                        return Response::CancelRejected { status };
                    }
                }
                self.cancel_now(seq, now);
                Response::Task(self.view(seq))
            }
            CancelEffect::Delayed { min_ms, max_ms } => {
                if self.cfg.policy.cancel_withdraws_input && status == TaskStatus::InputRequired {
                    self.abandon_round(seq, now);
                    self.set_status(seq, TaskStatus::Working, now, Note::InputWithdrawn);
                }
                if self.task(seq).cancel_at.is_none() {
                    let delay = self.rng.gen_range(min_ms.min(max_ms)..=max_ms.max(min_ms));
                    let at = now.saturating_add(delay);
                    let task = self.task_mut(seq);
                    task.cancel_at = Some(at);
                    if faults.race && running {
                        // The work ends exactly when the cancel would take effect (and wins).
                        task.work.end_at = Some(at);
                    }
                    self.reschedule(seq);
                }
                Response::CancelAccepted
            }
        }
    }

    fn answer(
        &mut self,
        now: u64,
        named: Option<&str>,
        items: Vec<AnswerItem>,
        frame: Option<u64>,
    ) -> Response {
        let named_seq = match named.map(|t| self.live(t)) {
            Some(Err(expired)) => {
                return Response::NotFound {
                    expired,
                    hidden: false,
                }
            }
            Some(Ok(seq)) => Some(seq),
            None => None,
        };
        for item in items {
            self.answer_one(now, named_seq, item, frame);
        }
        Response::Ack
    }

    /// Apply one answer to the round it is for, or log it as stale. Among the candidate rounds
    /// that are pending (and delivered, where rounds are pushed) the one of the preferred task
    /// wins, else the one delivered last.
    fn answer_one(&mut self, now: u64, named: Option<u64>, item: AnswerItem, frame: Option<u64>) {
        let must_be_delivered = self.cfg.policy.input == InputDelivery::Pushed;
        let mut best: Option<(bool, u64, u64)> = None;
        for (task_id, round) in &item.candidates {
            let Some(&seq) = self.by_id.get(task_id) else {
                continue;
            };
            let t = &self.tasks[&seq];
            let Some((n, r)) = t.pending_round() else {
                continue;
            };
            if !t.live() || n != *round || (must_be_delivered && r.deliveries == 0) {
                continue;
            }
            let rank = (
                item.prefer_task.as_deref() == Some(t.id.as_str()),
                r.last_delivery,
                seq,
            );
            if best.is_none_or(|b| rank > b) {
                best = Some(rank);
            }
        }
        if let Some((_, _, seq)) = best {
            let task = self.task_mut(seq);
            task.rounds.last_mut().expect("pending round").answered = true;
            task.work.state = WorkState::Running;
            task.work.running_since = Some(now);
            let meant_for = item.prefer_task.filter(|p| *p != self.task(seq).id);
            let r = self.tt(seq).input_rounds.last_mut().expect("round truth");
            r.answered_at_ms = Some(now);
            r.action = Some(item.action);
            r.content = item.content;
            r.answer_meant_for = meant_for;
            r.answered_by_frame = frame;
            let app_leaves_it = self.cfg.policy.after_answer
                == AfterAnswer::AppMayLeaveInputRequired
                && seq % 2 == 1;
            if app_leaves_it {
                // Nothing changes that a client sees: the status stays `input_required` (no
                // update, so no status push) while the work runs on.
                self.reschedule(seq);
            } else {
                self.set_status(
                    seq,
                    TaskStatus::Working,
                    now,
                    crate::fake::codec::Note::Answered,
                );
            }
            return;
        }
        // Stale: attributed to the task it named, else the one whose round under this id was
        // delivered last.
        let owner = named
            .or_else(|| {
                item.prefer_task
                    .as_ref()
                    .and_then(|p| self.by_id.get(p).copied())
            })
            .or_else(|| {
                item.candidates
                    .iter()
                    .filter_map(|(t, n)| {
                        let seq = *self.by_id.get(t)?;
                        let r = self.tasks[&seq].rounds.get((*n as usize).checked_sub(1)?)?;
                        Some((r.last_delivery, seq))
                    })
                    .max()
                    .map(|(_, seq)| seq)
            });
        let task_id = owner.map(|seq| {
            self.tt(seq).stale_input_responses += 1;
            self.task(seq).id.clone()
        });
        let round = match item.candidates.as_slice() {
            [(_, n)] => Some(*n),
            _ => None,
        };
        self.truth.stale_input_responses.push(StaleInputResponse {
            at_ms: now,
            task_id,
            round,
            action: item.action,
            frame,
        });
    }
}
