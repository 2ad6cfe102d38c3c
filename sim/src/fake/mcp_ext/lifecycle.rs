//! Task lifecycles over simulated time: work milestones, input rounds, terminal states, cancel
//! effects, TTL deletion, inline runs, and the JSON the server shows for them.

use serde_json::{json, Map, Value};
use toolop::digest::value_digest;
use toolop::protocol::META_RESULT_DIGEST;

use super::wire;
use super::{
    Ev, FakeMcpExtServer, InputRoundTruth, Round, ScriptOutcome, Stored, Task, TaskScript,
    TaskStatus, TaskTruth, WorkEnd, WorkState,
};

impl FakeMcpExtServer {
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
                Ev::Sync(seq) => self.finish_sync(seq, t),
                Ev::Cancel(seq) => {
                    self.task_mut(seq).sched_cancel = None;
                    self.cancel_takes_effect(seq, t);
                }
                Ev::Delete(seq) => {
                    self.task_mut(seq).sched_delete = None;
                    self.delete_task(seq, t);
                }
            }
        }
        self.clock = self.clock.max(now);
    }

    /// Bring the task's entries in the schedule in line with its state.
    pub(super) fn reschedule(&mut self, seq: u64) {
        let task = self.tasks.get_mut(&seq).expect("task seq exists");
        let work_at = task.next_work_event();
        let delete_at = if task.deleted { None } else { task.delete_at };
        let cancel_at = if task.deleted || task.status.is_terminal() {
            None
        } else {
            task.cancel_at
        };
        for (slot, want, ev) in [
            (&mut task.sched_work, work_at, Ev::Work(seq)),
            (&mut task.sched_delete, delete_at, Ev::Delete(seq)),
            (&mut task.sched_cancel, cancel_at, Ev::Cancel(seq)),
        ] {
            if *slot != want {
                if let Some(old) = *slot {
                    self.schedule.remove(&(old, ev));
                }
                if let Some(new) = want {
                    self.schedule.insert((new, ev));
                }
                *slot = want;
            }
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
        self.by_id
            .get(task_id)
            .is_some_and(|seq| self.tasks[seq].deleted)
    }

    /// Whether a cancel of `task_id` was accepted and has not taken effect (or been overtaken).
    pub fn cancel_pending(&self, task_id: &str) -> bool {
        self.by_id
            .get(task_id)
            .is_some_and(|seq| self.tasks[seq].sched_cancel.is_some())
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

    /// Open a new input round: `input_required` with one inlined `elicitation/create`.
    fn ask_input(&mut self, seq: u64, t: u64) {
        let n = self.task(seq).rounds.len() as u32 + 1;
        let key = format!("input-{n}");
        let task = self.task(seq);
        let text = if task.script.call_node.is_empty() {
            format!("Input round {n}: approve continuing task {}?", task.id)
        } else {
            format!(
                "Input round {n}: approve continuing {}?",
                task.script.call_node
            )
        };
        let request = json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": text,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                },
            },
        });
        self.task_mut(seq).rounds.push(Round {
            key: key.clone(),
            request,
            answered: false,
            abandoned: false,
        });
        self.tt(seq).input_rounds.push(InputRoundTruth {
            round: n,
            request_id: Value::String(key),
            asked_at_ms: t,
            deliveries: 0,
            answered_at_ms: None,
            action: None,
            content: None,
            answer_meant_for: None,
            abandoned_at_ms: None,
        });
        self.set_status(
            seq,
            TaskStatus::InputRequired,
            t,
            Some("Waiting for client input".into()),
        );
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
        if deleted || self.task(seq).status.is_terminal() {
            return;
        }
        // `failed` is a JSON-RPC error only: an isError result ends completed.
        let (stored, status, msg) = match script.outcome {
            // AIP-151's `done_without_result` has no counterpart here: like `completed`.
            ScriptOutcome::Completed | ScriptOutcome::Failed | ScriptOutcome::DoneWithoutResult => {
                (
                    Stored::Result(result_payload(&script)),
                    TaskStatus::Completed,
                    None,
                )
            }
            ScriptOutcome::ToolError => (
                Stored::Error {
                    code: wire::TOOL_ERROR,
                    message: script.text.clone(),
                },
                TaskStatus::Failed,
                Some(script.text.clone()),
            ),
        };
        if let Stored::Result(p) = &stored {
            self.tt(seq).result_digest = Some(value_digest(p));
        }
        self.task_mut(seq).result = Some(stored);
        self.set_status(seq, status, t, msg);
    }

    /// Change the visible status at `t` (and the status message, `None` clearing it): truth, and
    /// the ttl restart on terminal.
    pub(super) fn set_status(&mut self, seq: u64, status: TaskStatus, t: u64, msg: Option<String>) {
        let ttl = self.cfg.ttl_ms;
        let task = self.task_mut(seq);
        task.status = status;
        task.updated_at = t;
        task.status_message = msg;
        if status.is_terminal() {
            if let Some(ttl) = ttl {
                task.delete_at = Some(t + ttl);
            }
        }
        let tt = self.tt(seq);
        tt.status = status;
        if status.is_terminal() && tt.terminal_status.is_none() {
            tt.terminal_status = Some(status);
            tt.terminal_at_ms = Some(t);
        }
        self.reschedule(seq);
    }

    /// An accepted cancel takes effect at `t`, unless the task got there first.
    fn cancel_takes_effect(&mut self, seq: u64, t: u64) {
        let task = self.task(seq);
        if task.deleted || task.status.is_terminal() {
            return;
        }
        self.abandon_round(seq, t);
        if self.task(seq).work.state != WorkState::Ended {
            self.end_work(seq, t, WorkEnd::StoppedByCancel);
        }
        self.set_status(
            seq,
            TaskStatus::Cancelled,
            t,
            Some("Cancelled by client".into()),
        );
    }

    /// TTL deletion at `t`. Running work keeps going; work waiting for input aborts.
    fn delete_task(&mut self, seq: u64, t: u64) {
        self.task_mut(seq).deleted = true;
        self.tt(seq).deleted_at_ms = Some(t);
        let waiting = self.task(seq).work.state == WorkState::WaitingInput;
        self.abandon_round(seq, t);
        if waiting {
            self.end_work(seq, t, WorkEnd::AbortedAtInput);
        }
        self.reschedule(seq);
    }

    /// An inline run ends at `t`: its answer is queued.
    fn finish_sync(&mut self, seq: u64, t: u64) {
        let run = self
            .sync_runs
            .remove(&seq)
            .expect("scheduled sync run exists");
        let applies = run.script.outcome != ScriptOutcome::ToolError;
        let frame = match run.script.outcome {
            ScriptOutcome::ToolError => {
                wire::error(&run.rpc_id, wire::TOOL_ERROR, &run.script.text)
            }
            _ => {
                let payload = result_payload(&run.script);
                self.truth.sync_runs[run.truth_idx].result_digest = Some(value_digest(&payload));
                let mut body = self.with_meta(&payload);
                body["resultType"] = json!("complete");
                wire::response(&run.rpc_id, body)
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
        self.outbox.push((t, frame));
    }

    /// `payload` plus, with the toolop extensions, `_meta["io.toolop/result-digest"]`.
    pub(super) fn with_meta(&self, payload: &Value) -> Value {
        let mut out = payload.clone();
        if self.cfg.toolop_extensions {
            out["_meta"] = json!({ META_RESULT_DIGEST: value_digest(payload) });
        }
        out
    }

    /// The flat Task fields.
    pub(super) fn task_json(&self, task: &Task) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("taskId".into(), json!(task.id));
        m.insert("status".into(), json!(task.status.as_str()));
        m.insert("createdAt".into(), json!(wire::iso8601(task.created_at)));
        m.insert(
            "lastUpdatedAt".into(),
            json!(wire::iso8601(task.updated_at)),
        );
        m.insert("ttlMs".into(), json!(self.cfg.ttl_ms));
        m.insert("pollIntervalMs".into(), json!(self.cfg.poll_interval_ms));
        if let Some(s) = &task.status_message {
            m.insert("statusMessage".into(), json!(s));
        }
        m
    }

    /// The `CreateTaskResult`: `resultType: "task"` and the flat Task, nothing inlined.
    pub(super) fn create_task_result(&self, seq: u64) -> Value {
        let mut m = self.task_json(self.task(seq));
        m.insert("resultType".into(), json!("task"));
        Value::Object(m)
    }

    /// The `GetTaskResult`: the Task with `result` / `error` / `inputRequests` inlined. Showing a
    /// pending input request counts as delivering it.
    pub(super) fn get_task_result(&mut self, seq: u64) -> Value {
        let task = self.task(seq);
        let mut m = self.task_json(task);
        m.insert("resultType".into(), json!("complete"));
        let mut delivered = false;
        match (task.status, &task.result) {
            (TaskStatus::Completed, Some(Stored::Result(p))) => {
                m.insert("result".into(), self.with_meta(p));
            }
            (TaskStatus::Failed, Some(Stored::Error { code, message })) => {
                m.insert("error".into(), json!({"code": code, "message": message}));
            }
            (TaskStatus::InputRequired, _) => {
                if let Some(r) = task.pending_round() {
                    let mut reqs = Map::new();
                    reqs.insert(r.key.clone(), r.request.clone());
                    m.insert("inputRequests".into(), Value::Object(reqs));
                    delivered = true;
                }
            }
            _ => {}
        }
        if delivered {
            if let Some(r) = self.tt(seq).input_rounds.last_mut() {
                r.deliveries += 1;
            }
        }
        Value::Object(m)
    }
}

/// The `CallToolResult` of a script, without `_meta` and `resultType`. `isError` is always
/// printed.
pub(super) fn result_payload(script: &TaskScript) -> Value {
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
    json!({ "content": content, "isError": script.outcome == ScriptOutcome::Failed })
}
