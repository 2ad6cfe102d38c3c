//! Task lifecycles over simulated time: work milestones, input rounds, terminal states, TTL
//! deletion, synchronous runs, and the JSON the server shows for them.

use serde_json::{json, Value};
use toolop::digest::value_digest;
use toolop::protocol::META_RESULT_DIGEST;
use toolop::transport::InFrame;

use super::wire::{self, TasksMethod};
use super::{
    Ev, FakeMcpServer, Profile, ScriptOutcome, Stored, SyncRunKind, Task, TaskScript, TaskStatus,
    TaskTruth, WorkEnd, WorkState,
};

/// What a status change does to `statusMessage`.
pub(super) enum Msg {
    Keep,
    Set(String),
    Clear,
}

impl FakeMcpServer {
    pub(super) fn profile(&self) -> Profile {
        self.cfg.profile
    }

    pub(super) fn task(&self, seq: u64) -> &Task {
        &self.tasks[&seq]
    }

    pub(super) fn task_mut(&mut self, seq: u64) -> &mut Task {
        self.tasks.get_mut(&seq).expect("task seq exists")
    }

    pub(super) fn tt(&mut self, seq: u64) -> &mut TaskTruth {
        let id = &self.tasks[&seq].id;
        self.truth.tasks.get_mut(id).expect("truth for every task")
    }

    /// Process every scheduled event due at or before `now`, in time order.
    pub(super) fn process_until(&mut self, now: u64) {
        while let Some(&(t, ev)) = self.schedule.first() {
            if t > now {
                break;
            }
            self.schedule.remove(&(t, ev));
            self.clock = self.clock.max(t);
            match ev {
                Ev::Work(seq) => {
                    self.task_mut(seq).sched_work = None;
                    self.work_milestone(seq, t);
                }
                Ev::Delete(seq) => {
                    self.task_mut(seq).sched_delete = None;
                    self.delete_task(seq, t);
                }
                Ev::Sync(seq) => self.finish_sync(seq, t),
            }
        }
        self.clock = self.clock.max(now);
    }

    /// Bring the task's entries in the schedule in line with its state.
    pub(super) fn reschedule(&mut self, seq: u64) {
        let task = self.tasks.get_mut(&seq).expect("task seq exists");
        let work_at = task.next_work_event();
        if task.sched_work != work_at {
            if let Some(old) = task.sched_work {
                self.schedule.remove(&(old, Ev::Work(seq)));
            }
            if let Some(new) = work_at {
                self.schedule.insert((new, Ev::Work(seq)));
            }
            task.sched_work = work_at;
        }
        let delete_at = if task.deleted { None } else { task.delete_at };
        if task.sched_delete != delete_at {
            if let Some(old) = task.sched_delete {
                self.schedule.remove(&(old, Ev::Delete(seq)));
            }
            if let Some(new) = delete_at {
                self.schedule.insert((new, Ev::Delete(seq)));
            }
            task.sched_delete = delete_at;
        }
    }

    /// Fault hook: the work of `task_id` finishes at `now_ms`, skipping what was left of it
    /// (completion racing a cancel). Only running, live, non-terminal work is affected.
    pub fn finish_now(&mut self, task_id: &str, now_ms: u64) -> bool {
        self.process_until(now_ms);
        let Some(&seq) = self.by_id.get(task_id) else {
            return false;
        };
        let task = self.task(seq);
        if task.deleted || task.status.is_terminal() || task.work.state != WorkState::Running {
            return false;
        }
        let task = self.task_mut(seq);
        task.work.done_ms = task.script.duration_ms;
        task.work.running_since = None;
        task.work.next_input = task.inputs.len();
        self.finish_work(seq, now_ms);
        self.reschedule(seq);
        true
    }

    /// Whether `task_id` was deleted (by ttl) at or before now.
    pub fn is_deleted(&self, task_id: &str) -> bool {
        self.by_id.get(task_id).is_some_and(|seq| self.tasks[seq].deleted)
    }

    /// The work of task `seq` reached its next milestone at time `t`.
    fn work_milestone(&mut self, seq: u64, t: u64) {
        let (m, is_input) = self.task(seq).next_milestone();
        let task = self.task_mut(seq);
        task.work.done_ms = m;
        task.work.running_since = None;
        if !is_input {
            self.finish_work(seq, t);
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

    pub(super) fn end_work(&mut self, seq: u64, t: u64, how: WorkEnd) {
        let task = self.task_mut(seq);
        task.work.state = WorkState::Ended;
        task.work.running_since = None;
        let tt = self.tt(seq);
        tt.work_end = Some(how);
        tt.work_end_at_ms = Some(t);
    }

    /// Open a new input round: `input_required`, and an `elicitation/create` for any held call.
    fn ask_input(&mut self, seq: u64, t: u64) {
        let profile = self.profile();
        let n = self.task(seq).rounds.len() as u32 + 1;
        let task_id = self.task(seq).id.clone();
        let request_id = match profile {
            Profile::TsSdk => json!(0),
            Profile::PythonSdk => json!(format!("task-{task_id}-{n}")),
            Profile::SpecStrict => {
                self.elicit_counter += 1;
                json!(self.elicit_counter)
            }
        };
        let call_node = &self.task(seq).script.call_node;
        let text = if call_node.is_empty() {
            format!("Input round {n}: approve continuing task {task_id}?")
        } else {
            format!("Input round {n}: approve continuing {call_node}?")
        };
        let message = json!({
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": text,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                },
                "_meta": wire::related_meta(&task_id),
            },
        });
        self.task_mut(seq).rounds.push(super::Round {
            request_id: request_id.clone(),
            message,
            answered: false,
            abandoned: false,
            deliveries: 0,
            last_delivery: 0,
        });
        self.tt(seq).input_rounds.push(super::InputRoundTruth {
            round: n,
            request_id,
            asked_at_ms: t,
            deliveries: 0,
            answered_at_ms: None,
            action: None,
            content: None,
            answer_meant_for: None,
            abandoned_at_ms: None,
        });
        let msg = match profile {
            Profile::SpecStrict => Msg::Set("Waiting for client input".to_string()),
            _ => Msg::Keep,
        };
        self.set_status(seq, TaskStatus::InputRequired, t, msg);
        if !self.task(seq).held.is_empty() {
            self.deliver_round(seq, t);
        }
    }

    /// Send the pending round's `elicitation/create` (again).
    pub(super) fn deliver_round(&mut self, seq: u64, t: u64) {
        self.delivery_counter += 1;
        let counter = self.delivery_counter;
        let task = self.task_mut(seq);
        let Some(round) = task
            .rounds
            .last_mut()
            .filter(|r| !r.answered && !r.abandoned)
        else {
            return;
        };
        round.deliveries += 1;
        round.last_delivery = counter;
        let frame = wire::message(&round.message);
        if let Some(r) = self.tt(seq).input_rounds.last_mut() {
            r.deliveries += 1;
        }
        self.outbox.push((t, frame));
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

    /// The work ran to its end at `t`: apply the side effect, store the result, settle.
    fn finish_work(&mut self, seq: u64, t: u64) {
        let profile = self.profile();
        let script = self.task(seq).script.clone();
        self.end_work(seq, t, WorkEnd::Finished(script.outcome));
        let (cancelled, deleted) = {
            let task = self.task(seq);
            (task.status == TaskStatus::Cancelled, task.deleted)
        };
        if script.outcome != ScriptOutcome::ToolError {
            let tt = self.tt(seq);
            tt.side_effects += 1;
            if cancelled {
                tt.effects_after_cancel += 1;
            }
            if deleted {
                tt.effects_after_deletion += 1;
            }
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
            // Python: the work outlived the cancel; the store still shows activity.
            self.task_mut(seq).updated_at = t;
            let id = self.task(seq).id.clone();
            if cancelled {
                if let Some(&tag) = self.after_cancel.get(&id) {
                    self.finished_after_cancel.push((id, t, tag));
                }
            }
            return;
        }
        let (stored, status, msg) = work_outcome(profile, &script);
        if let Stored::Result(p) = &stored {
            self.tt(seq).result_digest = Some(value_digest(p));
        }
        self.task_mut(seq).result = Some(stored);
        self.set_status(seq, status, t, msg);
        self.settle_held(seq, t);
    }

    /// Status-after-cancel quirk: mark `task_id` so that a cancel leaves its running work
    /// running (in every profile), and so that the work's end is reported by
    /// [`FakeMcpServer::take_finished_after_cancel`] with `tag`. Only a live task that is not
    /// terminal yet can be marked; returns whether it was.
    pub fn keep_working_after_cancel(&mut self, task_id: &str, tag: u64) -> bool {
        let Some(&seq) = self.by_id.get(task_id) else {
            return false;
        };
        let task = self.task(seq);
        if task.deleted || task.status.is_terminal() {
            return false;
        }
        self.after_cancel.insert(task_id.to_string(), tag);
        true
    }

    /// Marked tasks whose work ended while they were cancelled, since the last call:
    /// (task id, time the work ended, tag given to `keep_working_after_cancel`).
    pub fn take_finished_after_cancel(&mut self) -> Vec<(String, u64, u64)> {
        std::mem::take(&mut self.finished_after_cancel)
    }

    /// Status-after-cancel quirk: a marked, cancelled task whose work has finished flips its
    /// visible status to the work's outcome (`completed` or `failed`) at `now_ms`, with the
    /// stored result `tasks/result` then returns. The ground truth keeps `cancelled` as the
    /// first terminal status. Returns whether the task flipped.
    pub fn complete_after_cancel(&mut self, task_id: &str, now_ms: u64) -> bool {
        self.process_until(now_ms);
        let Some(&seq) = self.by_id.get(task_id) else {
            return false;
        };
        let task = self.task(seq);
        let finished = matches!(self.truth.tasks.get(task_id).and_then(|t| t.work_end), Some(WorkEnd::Finished(_)));
        let flips = self.after_cancel.contains_key(task_id)
            && !task.deleted
            && task.status == TaskStatus::Cancelled
            && task.result.is_none()
            && task.work.state == WorkState::Ended
            && finished;
        if !flips {
            return false;
        }
        let script = task.script.clone();
        self.after_cancel.remove(task_id);
        let now = self.clock;
        let (stored, status, msg) = work_outcome(self.profile(), &script);
        if let Stored::Result(p) = &stored {
            self.tt(seq).result_digest = Some(value_digest(p));
        }
        self.task_mut(seq).result = Some(stored);
        self.set_status(seq, status, now, msg);
        self.settle_held(seq, now);
        true
    }

    /// Change the visible status at `t`: truth, TTL restart on terminal (SDK profiles), status
    /// notification (SDK profiles).
    pub(super) fn set_status(&mut self, seq: u64, status: TaskStatus, t: u64, msg: Msg) {
        let profile = self.profile();
        let task = self.task_mut(seq);
        task.status = status;
        task.updated_at = t;
        match msg {
            Msg::Keep => {}
            Msg::Set(m) => task.status_message = Some(m),
            Msg::Clear => task.status_message = None,
        }
        if status.is_terminal() && profile != Profile::SpecStrict {
            if let Some(ttl) = task.ttl {
                task.delete_at = Some(t + ttl);
            }
        }
        let tt = self.tt(seq);
        tt.status = status;
        if status.is_terminal() && tt.terminal_status.is_none() {
            tt.terminal_status = Some(status);
            tt.terminal_at_ms = Some(t);
        }
        if profile != Profile::SpecStrict {
            let note = json!({
                "jsonrpc": "2.0",
                "method": "notifications/tasks/status",
                "params": self.task_json(self.task(seq)),
            });
            self.outbox.push((t, wire::message(&note)));
        }
        self.reschedule(seq);
    }

    /// Answer every held `tasks/result` of a task that is terminal or deleted.
    pub(super) fn settle_held(&mut self, seq: u64, t: u64) {
        let held = std::mem::take(&mut self.task_mut(seq).held);
        for rpc_id in held {
            let frame = self.result_reply(seq, &rpc_id);
            self.outbox.push((t, frame));
        }
    }

    /// The `tasks/result` answer for a terminal or deleted task.
    pub(super) fn result_reply(&self, seq: u64, rpc_id: &Value) -> InFrame {
        let profile = self.profile();
        let task = self.task(seq);
        if task.deleted {
            let msg = wire::not_found_message(profile, TasksMethod::Result, &task.id, true);
            return wire::error(rpc_id, wire::INVALID_PARAMS, &msg);
        }
        match (task.status, &task.result) {
            (TaskStatus::Cancelled, _) => match profile {
                Profile::PythonSdk => {
                    wire::response(rpc_id, json!({ "_meta": wire::related_meta(&task.id) }))
                }
                _ => wire::error(
                    rpc_id,
                    wire::INTERNAL_ERROR,
                    &format!("Task {} has no result stored", task.id),
                ),
            },
            (_, Some(Stored::Result(payload))) => {
                wire::response(rpc_id, self.with_meta(payload, Some(&task.id)))
            }
            (_, Some(Stored::Error { code, message })) => wire::error(rpc_id, *code, message),
            (_, None) => wire::error(
                rpc_id,
                wire::INTERNAL_ERROR,
                &format!("Task {} has no result stored", task.id),
            ),
        }
    }

    /// `payload` plus `_meta`: related task (when given) and, with extensions, the digest.
    pub(super) fn with_meta(&self, payload: &Value, task_id: Option<&str>) -> Value {
        let mut out = payload.clone();
        let mut meta = match task_id {
            Some(id) => wire::related_meta(id),
            None => serde_json::Map::new(),
        };
        if self.cfg.toolop_extensions {
            meta.insert(META_RESULT_DIGEST.to_string(), json!(value_digest(payload)));
        }
        if !meta.is_empty() {
            out.as_object_mut()
                .expect("results are objects")
                .insert("_meta".to_string(), Value::Object(meta));
        }
        out
    }

    /// TTL deletion at `t`. The work (if any) keeps going.
    fn delete_task(&mut self, seq: u64, t: u64) {
        self.task_mut(seq).deleted = true;
        self.tt(seq).deleted_at_ms = Some(t);
        let waiting = self.task(seq).work.state == WorkState::WaitingInput;
        self.abandon_round(seq, t);
        if waiting {
            self.end_work(seq, t, WorkEnd::AbortedAtInput);
        }
        self.settle_held(seq, t);
        self.reschedule(seq);
    }

    /// A synchronous run ends at `t`.
    fn finish_sync(&mut self, seq: u64, t: u64) {
        let run = self
            .sync_runs
            .remove(&seq)
            .expect("scheduled sync run exists");
        let profile = self.profile();
        let applies = run.script.outcome != ScriptOutcome::ToolError;
        let frame = match run.kind {
            SyncRunKind::ForbiddenRunAnyway => wire::error(
                &run.rpc_id,
                wire::INVALID_PARAMS,
                wire::TS_INVALID_TASK_CREATION,
            ),
            SyncRunKind::Plain => match run.script.outcome {
                ScriptOutcome::ToolError => {
                    wire::error(&run.rpc_id, wire::TOOL_ERROR, &run.script.text)
                }
                _ => {
                    let payload = result_payload(profile, &run.script);
                    self.truth.sync_runs[run.truth_idx].result_digest =
                        Some(value_digest(&payload));
                    wire::response(&run.rpc_id, self.with_meta(&payload, None))
                }
            },
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
        self.outbox.push((t, frame));
    }

    /// The flat `Task` object as the profile prints it.
    pub(super) fn task_json(&self, task: &Task) -> Value {
        let profile = self.profile();
        let mut m = serde_json::Map::new();
        m.insert("taskId".into(), json!(task.id));
        m.insert("status".into(), json!(task.status.as_str()));
        m.insert(
            "createdAt".into(),
            json!(wire::iso8601(profile, task.created_at)),
        );
        m.insert(
            "lastUpdatedAt".into(),
            json!(wire::iso8601(profile, task.updated_at)),
        );
        match (task.ttl, profile) {
            (Some(ttl), _) => {
                m.insert("ttl".into(), json!(ttl));
            }
            // Python omits the required key when no ttl applies (observed quirk).
            (None, Profile::PythonSdk) => {}
            (None, _) => {
                m.insert("ttl".into(), Value::Null);
            }
        }
        m.insert("pollInterval".into(), json!(task.poll_interval));
        if let Some(s) = &task.status_message {
            m.insert("statusMessage".into(), json!(s));
        }
        Value::Object(m)
    }
}

/// The `CallToolResult` of a script, without `_meta`. TS omits `isError` unless true; Python
/// and strict always print it.
pub(super) fn result_payload(profile: Profile, script: &TaskScript) -> Value {
    let n = script.blocks;
    let content: Vec<Value> = (1..=n)
        .map(|i| {
            let text = if n == 1 {
                script.text.clone()
            } else {
                format!("{} [{i}/{n}]", script.text)
            };
            json!({"type": "text", "text": text})
        })
        .collect();
    let is_error = script.outcome == ScriptOutcome::Failed;
    let mut out = json!({ "content": content });
    if is_error || profile != Profile::TsSdk {
        out["isError"] = json!(is_error);
    }
    out
}

/// What the end of the work stores and shows: (stored outcome, status, status message).
fn work_outcome(profile: Profile, script: &TaskScript) -> (Stored, TaskStatus, Msg) {
    match script.outcome {
        // MCP has no "done without result": such a script completes normally here.
        ScriptOutcome::Completed | ScriptOutcome::DoneWithoutResult => (
            Stored::Result(result_payload(profile, script)),
            TaskStatus::Completed,
            Msg::Keep,
        ),
        ScriptOutcome::Failed => match profile {
            Profile::PythonSdk => (
                Stored::Result(result_payload(profile, script)),
                TaskStatus::Completed,
                Msg::Keep,
            ),
            Profile::TsSdk => (
                Stored::Result(result_payload(profile, script)),
                TaskStatus::Failed,
                Msg::Keep,
            ),
            Profile::SpecStrict => (
                Stored::Result(result_payload(profile, script)),
                TaskStatus::Failed,
                Msg::Set(script.text.clone()),
            ),
        },
        ScriptOutcome::ToolError => (
            Stored::Error {
                code: wire::TOOL_ERROR,
                message: script.text.clone(),
            },
            TaskStatus::Failed,
            Msg::Set(script.text.clone()),
        ),
    }
}
