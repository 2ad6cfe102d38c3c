//! Task lifecycles over simulated time: the schedule, work milestones, input rounds, terminal
//! states, cancel effects, pre-emption, deletion, inline runs and the status-after-cancel flip.

use super::{
    AtTerminal, Ev, Expiry, InputDelivery, Out, Reply, RunningWork, TaskService, WorkState,
};
use crate::fake::codec::{Note, Outcome, Push, Response, ResultBody, ResultShape, Stop};
use crate::fake::script::ScriptOutcome;
use crate::fake::truth::{payload_digest, InputRoundTruth, SyncRunKind, TaskStatus, WorkEnd};

impl TaskService {
    /// Process every scheduled event due at or before `now`, in time order.
    pub(super) fn process_until(&mut self, now: u64, shape: &dyn ResultShape) {
        while let Some(&(t, ev)) = self.schedule.first() {
            if t > now {
                break;
            }
            self.schedule.remove(&(t, ev));
            self.clock = self.clock.max(t);
            match ev {
                Ev::Work(seq) => {
                    self.task_mut(seq).sched[0] = None;
                    self.work_milestone(seq, t, shape);
                }
                Ev::Preempt(seq) => {
                    self.task_mut(seq).sched[1] = None;
                    self.preempt(seq, t, shape);
                }
                Ev::Inline(seq) => self.finish_inline(seq, t, shape),
                Ev::Cancel(seq) => {
                    self.task_mut(seq).sched[2] = None;
                    self.cancel_takes_effect(seq, t);
                }
                Ev::Delete(seq) => {
                    self.task_mut(seq).sched[3] = None;
                    self.delete_task(seq, t);
                }
            }
        }
        self.clock = self.clock.max(now);
    }

    /// Bring the task's entries in the schedule in line with its state.
    pub(super) fn reschedule(&mut self, seq: u64) {
        let task = self.tasks.get_mut(&seq).expect("task seq exists");
        let running = task.work.state != WorkState::Ended;
        let open = !task.deleted && !task.status.is_terminal();
        let want = [
            task.next_work_event(),
            task.preempt_at.filter(|_| running),
            task.cancel_at.filter(|_| open),
            // A sweep on a request deletes instead (`sweep_on_call`).
            task.delete_at
                .filter(|_| !task.deleted && self.cfg.policy.expiry == Expiry::Delete),
        ];
        let evs = [
            Ev::Work(seq),
            Ev::Preempt(seq),
            Ev::Cancel(seq),
            Ev::Delete(seq),
        ];
        for i in 0..4 {
            if task.sched[i] != want[i] {
                if let Some(old) = task.sched[i] {
                    self.schedule.remove(&(old, evs[i]));
                }
                if let Some(new) = want[i] {
                    self.schedule.insert((new, evs[i]));
                }
                task.sched[i] = want[i];
            }
        }
    }

    /// The work of task `seq` reached its next milestone (or its forced end) at `t`.
    fn work_milestone(&mut self, seq: u64, t: u64, shape: &dyn ResultShape) {
        if self.task(seq).work.end_at.is_some_and(|e| e <= t) {
            self.force_finish(seq, t, shape);
            return;
        }
        let (m, is_input) = self.task(seq).next_milestone();
        let task = self.task_mut(seq);
        task.work.done_ms = m;
        task.work.running_since = None;
        if !is_input {
            self.finish_work(seq, t, shape);
        } else {
            task.work.next_input += 1;
            if task.deleted || task.status.is_terminal() {
                self.end_work(seq, t, WorkEnd::AbortedAtInput);
            } else {
                task.work.state = WorkState::WaitingInput;
                self.ask_input(seq, t);
            }
        }
        self.reschedule(seq);
    }

    /// The work ends now, skipping what was left of it (a completion racing a cancel).
    pub(super) fn force_finish(&mut self, seq: u64, t: u64, shape: &dyn ResultShape) {
        let task = self.task_mut(seq);
        task.work.done_ms = task.script.duration_ms;
        task.work.running_since = None;
        task.work.next_input = task.inputs.len();
        task.work.end_at = None;
        self.finish_work(seq, t, shape);
        self.reschedule(seq);
    }

    pub(super) fn end_work(&mut self, seq: u64, t: u64, how: WorkEnd) {
        let task = self.task_mut(seq);
        task.work.state = WorkState::Ended;
        task.work.running_since = None;
        task.work.end_at = None;
        let tt = self.tt(seq);
        tt.work_end = Some(how);
        tt.work_end_at_ms = Some(t);
    }

    /// Open a new input round at `t`.
    fn ask_input(&mut self, seq: u64, t: u64) {
        let n = self.task(seq).rounds.len() as u32 + 1;
        self.task_mut(seq).rounds.push(super::Round {
            answered: false,
            abandoned: false,
            deliveries: 0,
            last_delivery: 0,
        });
        self.tt(seq).input_rounds.push(InputRoundTruth::asked(n, t));
        self.set_status(seq, TaskStatus::InputRequired, t, Note::InputAsked);
        if self.cfg.policy.input == InputDelivery::Pushed && !self.task(seq).held.is_empty() {
            self.deliver_round(seq, t);
        }
    }

    /// The pending round reaches the client once more: pushed, or shown by a read.
    pub(super) fn deliver_round(&mut self, seq: u64, t: u64) {
        self.delivery_counter += 1;
        let counter = self.delivery_counter;
        let task = self.task_mut(seq);
        let n = task.rounds.len() as u32;
        let Some(round) = task
            .rounds
            .last_mut()
            .filter(|r| !r.answered && !r.abandoned)
        else {
            return;
        };
        round.deliveries += 1;
        round.last_delivery = counter;
        let (id, call_node) = (task.id.clone(), task.script.call_node.clone());
        if let Some(r) = self.tt(seq).input_rounds.last_mut() {
            r.deliveries += 1;
        }
        if self.cfg.policy.input == InputDelivery::Pushed {
            self.out.push((
                t,
                Out::Push(Push::Input {
                    task: id,
                    call_node,
                    round: n,
                }),
            ));
        }
    }

    /// Mark the pending round (if any) unanswerable.
    pub(super) fn abandon_round(&mut self, seq: u64, t: u64) {
        let task = self.task_mut(seq);
        if let Some(round) = task
            .rounds
            .last_mut()
            .filter(|r| !r.answered && !r.abandoned)
        {
            round.abandoned = true;
            if let Some(r) = self.tt(seq).input_rounds.last_mut() {
                r.abandoned_at_ms = Some(t);
            }
        }
    }

    /// What the end of `script`'s work stores and shows.
    fn work_outcome(&self, script: &crate::fake::script::TaskScript) -> (Outcome, TaskStatus) {
        let result = |is_error| {
            Outcome::Result(ResultBody {
                text: script.text.clone(),
                blocks: script.blocks,
                is_error,
            })
        };
        match script.outcome {
            ScriptOutcome::Completed => (result(false), TaskStatus::Completed),
            ScriptOutcome::DoneWithoutResult if self.cfg.policy.done_without_result => {
                (Outcome::Nothing, TaskStatus::DoneWithoutResult)
            }
            ScriptOutcome::DoneWithoutResult => (result(false), TaskStatus::Completed),
            ScriptOutcome::Failed => (result(true), self.cfg.policy.error_result_status),
            ScriptOutcome::ToolError => (
                Outcome::ToolError {
                    message: script.text.clone(),
                },
                TaskStatus::Failed,
            ),
        }
    }

    /// Store `outcome` (and its digest in the truth) and show `status`.
    fn show_outcome(
        &mut self,
        seq: u64,
        t: u64,
        outcome: Outcome,
        status: TaskStatus,
        note: Note,
        shape: &dyn ResultShape,
    ) {
        if let Some(payload) = match &outcome {
            Outcome::Result(body) => shape.payload(body),
            _ => None,
        } {
            self.tt(seq).result_digest = Some(payload_digest(&payload));
        }
        if let Some(message) = shape.error_message(&outcome) {
            self.tt(seq).error_message = Some(message);
        }
        self.task_mut(seq).outcome = Some(outcome);
        self.set_status(seq, status, t, note);
        self.settle_held(seq, t);
    }

    /// The work ran to its end at `t`: apply the side effect, store the outcome, settle.
    fn finish_work(&mut self, seq: u64, t: u64, shape: &dyn ResultShape) {
        let script = self.task(seq).script.clone();
        self.end_work(seq, t, WorkEnd::Finished(script.outcome));
        let (cancelled, deleted) = (
            self.task(seq).status == TaskStatus::Cancelled,
            self.task(seq).deleted,
        );
        if script.outcome != ScriptOutcome::ToolError {
            let tt = self.tt(seq);
            tt.side_effects += 1;
            tt.effects_after_cancel += u32::from(cancelled);
            tt.effects_after_deletion += u32::from(deleted);
            *self
                .truth
                .effects_per_call_node
                .entry(script.call_node.clone())
                .or_insert(0) += 1;
        }
        if deleted {
            return;
        }
        if self.task(seq).status.is_terminal() {
            // The work outlived a cancel; the store still shows activity.
            let task = self.task_mut(seq);
            task.updated_at = t;
            if cancelled && task.keeps_working_after_cancel {
                let id = task.id.clone();
                self.finished_after_cancel.push(id);
            }
            return;
        }
        let (outcome, status) = self.work_outcome(&script);
        self.show_outcome(
            seq,
            t,
            outcome,
            status,
            Note::Ended {
                outcome: script.outcome,
                flipped: false,
            },
            shape,
        );
    }

    /// The service stops the work itself at `t` (pre-emption): no side effect, status failed.
    fn preempt(&mut self, seq: u64, t: u64, shape: &dyn ResultShape) {
        if self.task(seq).work.state == WorkState::Ended {
            return;
        }
        self.end_work(seq, t, WorkEnd::Preempted);
        let task = self.task(seq);
        if task.deleted || task.status.is_terminal() {
            self.reschedule(seq);
            return;
        }
        self.fail_stopped(seq, t, Stop::Preempted, Note::Preempted, shape);
    }

    /// The service itself stopped the task at `t` (`stop`): the round goes, the task shows
    /// `failed` with the stop's error message, held reads settle.
    fn fail_stopped(&mut self, seq: u64, t: u64, stop: Stop, note: Note, shape: &dyn ResultShape) {
        self.abandon_round(seq, t);
        let outcome = Outcome::Stopped(stop);
        if let Some(message) = shape.error_message(&outcome) {
            self.tt(seq).error_message = Some(message);
        }
        self.task_mut(seq).outcome = Some(outcome);
        self.set_status(seq, TaskStatus::Failed, t, note);
        self.settle_held(seq, t);
    }

    /// A request reached the server at `now` (events due by then already processed): under
    /// [`Expiry::FailRunningOnCall`], every task past its deletion time is swept. One still
    /// running ends `failed`, its work aborted (rmcp's ttl is a hard stop, unlike its
    /// cooperative cancel), and its ttl starts again; one already terminal goes. A task failed
    /// here is not deleted by the same sweep (rmcp: phase 1, then phase 2).
    pub(super) fn sweep_on_call(&mut self, now: u64, shape: &dyn ResultShape) {
        if self.cfg.policy.expiry != Expiry::FailRunningOnCall {
            return;
        }
        let due: Vec<u64> = self
            .tasks
            .iter()
            .filter(|(_, t)| !t.deleted && t.delete_at.is_some_and(|d| d <= now))
            .map(|(seq, _)| *seq)
            .collect();
        for seq in due {
            if self.task(seq).status.is_terminal() {
                self.delete_task(seq, now);
            } else {
                self.expire_running(seq, now, shape);
            }
        }
    }

    /// The sweep fails a task still running (or waiting for input) at `t`: no side effect.
    fn expire_running(&mut self, seq: u64, t: u64, shape: &dyn ResultShape) {
        if self.task(seq).work.state != WorkState::Ended {
            self.end_work(seq, t, WorkEnd::Expired);
        }
        self.fail_stopped(seq, t, Stop::Expired, Note::Expired, shape);
        let id = self.task(seq).id.clone();
        self.expired_running.push(id);
    }

    /// The task becomes cancelled at `t`: the round goes, running work stops or keeps running
    /// by the policy (or the status-after-cancel mark), held reads settle.
    pub(super) fn cancel_now(&mut self, seq: u64, t: u64) {
        self.abandon_round(seq, t);
        let keeps = self.cfg.policy.cancel.running_work == RunningWork::KeepsRunning
            || self.task(seq).keeps_working_after_cancel;
        match (keeps, self.task(seq).work.state) {
            (_, WorkState::Ended) => {}
            (true, WorkState::Running) => {}
            (true, WorkState::WaitingInput) => self.end_work(seq, t, WorkEnd::AbortedAtInput),
            (false, _) => self.end_work(seq, t, WorkEnd::StoppedByCancel),
        }
        self.task_mut(seq).outcome = Some(Outcome::Stopped(Stop::Cancelled));
        self.set_status(seq, TaskStatus::Cancelled, t, Note::Cancelled);
        self.settle_held(seq, t);
        self.reschedule(seq);
    }

    /// An accepted (delayed) cancel takes effect at `t`, unless the task got there first.
    fn cancel_takes_effect(&mut self, seq: u64, t: u64) {
        let task = self.task(seq);
        if task.deleted || task.status.is_terminal() {
            return;
        }
        self.cancel_now(seq, t);
    }

    /// Change the visible status at `t`: truth, retention at terminal, status push.
    pub(super) fn set_status(&mut self, seq: u64, status: TaskStatus, t: u64, note: Note) {
        let at_terminal = self.cfg.policy.at_terminal;
        let task = self.task_mut(seq);
        task.status = status;
        task.updated_at = t;
        task.notes.push(note);
        if status.is_terminal() {
            match (at_terminal, task.ttl) {
                (AtTerminal::RestartTtl, Some(ttl)) => task.delete_at = Some(t + ttl),
                (AtTerminal::DeleteAfter(ms), _) => {
                    task.delete_at = Some(task.delete_at.map_or(t + ms, |d| d.min(t + ms)))
                }
                _ => {}
            }
        }
        let tt = self.tt(seq);
        tt.status = status;
        if status.is_terminal() && tt.terminal_status.is_none() {
            tt.terminal_status = Some(status);
            tt.terminal_at_ms = Some(t);
        }
        if self.cfg.policy.notify_status {
            let view = self.view(seq);
            self.out.push((t, Out::Push(Push::Status(view))));
        }
        self.reschedule(seq);
    }

    /// Answer every held result read of a task that is terminal or deleted.
    pub(super) fn settle_held(&mut self, seq: u64, t: u64) {
        let held = std::mem::take(&mut self.task_mut(seq).held);
        for call in held {
            let response = self.result_response(seq);
            self.out.push((t, Out::Reply(Reply { call, response })));
        }
    }

    /// The result read's answer for a terminal or deleted task.
    pub(super) fn result_response(&self, seq: u64) -> Response {
        let task = self.task(seq);
        if task.deleted {
            return Response::NotFound {
                expired: true,
                hidden: false,
            };
        }
        match (&task.outcome, task.status) {
            (_, TaskStatus::Cancelled) | (Some(Outcome::Stopped(Stop::Cancelled)), _) => {
                Response::NoResult { cancelled: true }
            }
            (Some(o), _) => Response::Outcome(o.clone()),
            (None, _) => Response::NoResult { cancelled: false },
        }
    }

    /// Deletion at `t` (ttl, retention or an explicit delete). Running work keeps going; work
    /// waiting for input aborts; held reads settle with not-found.
    pub(super) fn delete_task(&mut self, seq: u64, t: u64) {
        self.task_mut(seq).deleted = true;
        self.tt(seq).deleted_at_ms.get_or_insert(t);
        let waiting = self.task(seq).work.state == WorkState::WaitingInput;
        self.abandon_round(seq, t);
        if waiting {
            self.end_work(seq, t, WorkEnd::AbortedAtInput);
        }
        self.settle_held(seq, t);
        self.reschedule(seq);
    }

    /// An inline run ends at `t`: its answer is queued.
    fn finish_inline(&mut self, seq: u64, t: u64, shape: &dyn ResultShape) {
        let run = self
            .inline
            .remove(&seq)
            .expect("scheduled inline run exists");
        let applies = run.script.outcome != ScriptOutcome::ToolError;
        let response = match (run.kind, run.script.outcome) {
            (SyncRunKind::ForbiddenRunAnyway, _) => Response::InlineRefused,
            (SyncRunKind::Plain, ScriptOutcome::ToolError) => {
                self.truth.sync_runs[run.truth_idx].error_message = Some(run.script.text.clone());
                Response::Outcome(Outcome::ToolError {
                    message: run.script.text.clone(),
                })
            }
            (SyncRunKind::Plain, outcome) => {
                let body = ResultBody {
                    text: run.script.text.clone(),
                    blocks: run.script.blocks,
                    is_error: outcome == ScriptOutcome::Failed,
                };
                self.truth.sync_runs[run.truth_idx].result_digest =
                    shape.payload(&body).map(|p| payload_digest(&p));
                Response::Outcome(Outcome::Result(body))
            }
        };
        let st = &mut self.truth.sync_runs[run.truth_idx];
        st.finished_at_ms = Some(t);
        if applies {
            st.side_effects += 1;
            *self
                .truth
                .effects_per_call_node
                .entry(run.script.call_node.clone())
                .or_insert(0) += 1;
        }
        let waiting = match run.key.and_then(|k| self.inline_by_key.get_mut(&k)) {
            Some(keyed) => {
                keyed.answer = Some(response.clone());
                std::mem::take(&mut keyed.waiting)
            }
            None => Vec::new(),
        };
        for call in std::iter::once(run.call).chain(waiting) {
            self.out.push((
                t,
                Out::Reply(Reply {
                    call,
                    response: response.clone(),
                }),
            ));
        }
    }

    /// Marked tasks whose work ended while they were cancelled, since the last call.
    pub fn take_finished_after_cancel(&mut self) -> Vec<String> {
        std::mem::take(&mut self.finished_after_cancel)
    }

    /// Tasks a sweep failed at their ttl while running since the last call (by id).
    pub fn take_expired_running(&mut self) -> Vec<String> {
        std::mem::take(&mut self.expired_running)
    }

    /// Status-after-cancel: a marked, cancelled task whose work has finished shows the work's
    /// outcome from `now_ms` on (`completed` or `failed`, with the stored result). The truth keeps
    /// `cancelled` as the first terminal status. Returns the status it flipped to.
    pub fn flip_after_cancel(
        &mut self,
        task_id: &str,
        now_ms: u64,
        shape: &dyn ResultShape,
    ) -> Option<TaskStatus> {
        self.process_until(now_ms, shape);
        let seq = *self.by_id.get(task_id)?;
        let task = self.task(seq);
        let finished = matches!(
            self.truth.tasks.get(task_id).and_then(|t| t.work_end),
            Some(WorkEnd::Finished(_))
        );
        let flips = task.keeps_working_after_cancel
            && !task.deleted
            && task.status == TaskStatus::Cancelled
            && task.work.state == WorkState::Ended
            && finished;
        if !flips {
            return None;
        }
        let script = task.script.clone();
        self.task_mut(seq).keeps_working_after_cancel = false;
        let (outcome, status) = self.work_outcome(&script);
        self.show_outcome(
            seq,
            self.clock,
            outcome,
            status,
            Note::Ended {
                outcome: script.outcome,
                flipped: true,
            },
            shape,
        );
        Some(status)
    }
}
