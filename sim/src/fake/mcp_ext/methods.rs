//! Incoming messages: JSON-RPC parsing and the method handlers of the extension server.

use rand::Rng;
use serde_json::{json, Value};
use toolop::protocol::{EXT_IDEMPOTENCY, META_IDEMPOTENCY_KEY, META_SYNC_UPPER_BOUND_MS};
use toolop::transport::{InFrame, OutFrame};

use super::wire;
use super::{
    Ev, FakeMcpExtServer, StaleInputResponse, SyncRun, SyncRunKind, SyncRunTruth, Task, TaskScript,
    TaskStatus, TaskTruth, Work, WorkState,
};

impl FakeMcpExtServer {
    pub(super) fn on_frame(&mut self, now: u64, frame: OutFrame) -> Vec<InFrame> {
        let msg: Value = match serde_json::from_slice(&frame.body) {
            Ok(v) => v,
            Err(e) => {
                let mut f = wire::error(
                    &Value::Null,
                    wire::PARSE_ERROR,
                    &format!("Parse error: {e}"),
                );
                // An HTTP error reply still belongs to its POST.
                f.request_id = frame.request_id;
                return vec![f];
            }
        };
        let Some(obj) = msg.as_object() else {
            return vec![wire::error(
                &Value::Null,
                wire::INVALID_REQUEST,
                "Invalid Request: not a single JSON-RPC object",
            )];
        };
        let id = obj.get("id").cloned();
        match (obj.get("method").and_then(Value::as_str), id) {
            // Client notification: no reply.
            (Some(_), None) => Vec::new(),
            (Some(method), Some(id)) => {
                let params = obj.get("params").cloned().unwrap_or_else(|| json!({}));
                self.on_request(now, method, id, &params)
                    .into_iter()
                    .collect()
            }
            (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
                // There are no server requests in this era: whatever this answers, it is stale.
                let action = msg
                    .get("result")
                    .and_then(|r| r.get("action"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.truth.stale_input_responses.push(StaleInputResponse {
                    at_ms: now,
                    request_id: id,
                    task_id: None,
                    action,
                });
                Vec::new()
            }
            (None, id) => vec![wire::error(
                &id.unwrap_or(Value::Null),
                wire::INVALID_REQUEST,
                "Invalid Request",
            )],
        }
    }

    fn on_request(&mut self, now: u64, method: &str, id: Value, params: &Value) -> Option<InFrame> {
        match method {
            "initialize" => Some(self.initialize(&id)),
            "ping" => Some(wire::response(&id, json!({"resultType": "complete"}))),
            "tools/list" => Some(self.tools_list(&id)),
            "tools/call" => self.tools_call(now, id, params),
            "tasks/get" => Some(self.tasks_get(&id, params)),
            "tasks/update" => Some(self.tasks_update(now, &id, params)),
            "tasks/cancel" => Some(self.tasks_cancel(now, &id, params)),
            // Includes tasks/result and tasks/list, which the extension removed.
            _ => Some(wire::error(
                &id,
                wire::METHOD_NOT_FOUND,
                &format!("Method not found: {method}"),
            )),
        }
    }

    fn initialize(&self, id: &Value) -> InFrame {
        let mut caps = json!({
            "tools": {},
            "extensions": { wire::EXTENSION_ID: {} },
        });
        if self.cfg.toolop_extensions {
            // Keys live as long as their task, and a task at least its ttl.
            let ext = match self.cfg.ttl_ms {
                Some(ms) => json!({ "retentionMs": ms }),
                None => json!({}),
            };
            caps["experimental"] = json!({ EXT_IDEMPOTENCY: ext });
        }
        wire::response(
            id,
            json!({
                "protocolVersion": wire::PROTOCOL_VERSION,
                "capabilities": caps,
                "serverInfo": {"name": "toolop-fake-mcp-ext", "version": "2026-07-28"},
            }),
        )
    }

    fn tools_list(&self, id: &Value) -> InFrame {
        let tools: Vec<Value> = self
            .cfg
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.name, "inputSchema": {"type": "object"}});
                if let Some(ms) = t.sync_upper_bound_ms {
                    d["_meta"] = json!({ META_SYNC_UPPER_BOUND_MS: ms });
                }
                d
            })
            .collect();
        wire::response(id, json!({ "tools": tools, "resultType": "complete" }))
    }

    fn tools_call(&mut self, now: u64, id: Value, params: &Value) -> Option<InFrame> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Some(wire::error(
                &id,
                wire::INVALID_PARAMS,
                "Invalid params: missing tool name",
            ));
        };
        let name = name.to_string();
        let key = params
            .get("_meta")
            .and_then(|m| m.get(META_IDEMPOTENCY_KEY))
            .and_then(Value::as_str)
            .map(str::to_string);
        let script = match TaskScript::from_arguments(params.get("arguments")) {
            Ok(s) => s,
            Err(e) => return Some(wire::error(&id, wire::INVALID_PARAMS, &e)),
        };
        let Some(tool) = self.cfg.tools.iter().find(|t| t.name == name) else {
            return Some(wire::error(
                &id,
                wire::INVALID_PARAMS,
                &format!("Unknown tool: {name}"),
            ));
        };
        let needs_task = match tool.task_support {
            Some("required") => true,
            Some("forbidden") => false,
            _ => script.duration_ms > self.cfg.task_threshold_ms,
        };
        if !needs_task {
            self.start_sync(now, id, &name, script, key);
            return None;
        }
        if !wire::declares_tasks(params) {
            let msg = format!(
                "Missing required client capability: {} (tool {name} runs as a task)",
                wire::EXTENSION_ID
            );
            return Some(wire::error(
                &id,
                wire::MISSING_REQUIRED_CLIENT_CAPABILITY,
                &msg,
            ));
        }
        if self.cfg.toolop_extensions {
            if let Some(&seq) = key.as_ref().and_then(|k| self.by_key.get(k)) {
                if !self.task(seq).deleted {
                    self.truth.duplicate_submits_deduped += 1;
                    self.tt(seq).dedupe_hits += 1;
                    return Some(wire::response(&id, self.create_task_result(seq)));
                }
            }
        }
        let seq = self.create_task(now, &name, script, key);
        Some(wire::response(&id, self.create_task_result(seq)))
    }

    fn create_task(
        &mut self,
        now: u64,
        tool: &str,
        script: TaskScript,
        key: Option<String>,
    ) -> u64 {
        let ttl = self.cfg.ttl_ms;
        let task_id = loop {
            let candidate = wire::hex(&mut self.rng, 16);
            if !self.by_id.contains_key(&candidate) {
                break candidate;
            }
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut inputs: Vec<u64> = script
            .input_at_ms
            .iter()
            .copied()
            .filter(|&o| o < script.duration_ms)
            .collect();
        inputs.sort_unstable();
        inputs.dedup();
        let call_node = script.call_node.clone();
        let task = Task {
            id: task_id.clone(),
            script,
            inputs,
            created_at: now,
            updated_at: now,
            status: TaskStatus::Working,
            status_message: None,
            work: Work {
                done_ms: 0,
                running_since: Some(now),
                next_input: 0,
                state: WorkState::Running,
            },
            result: None,
            deleted: false,
            delete_at: ttl.map(|t| now + t),
            cancel_at: None,
            rounds: Vec::new(),
            sched_work: None,
            sched_delete: None,
            sched_cancel: None,
        };
        self.truth.tasks.insert(
            task_id.clone(),
            TaskTruth {
                call_node: call_node.clone(),
                tool: tool.to_string(),
                idempotency_key: key.clone(),
                created_at_ms: now,
                ttl_ms: ttl,
                status: TaskStatus::Working,
                terminal_status: None,
                terminal_at_ms: None,
                result_digest: None,
                side_effects: 0,
                effects_after_cancel: 0,
                effects_after_deletion: 0,
                work_end: None,
                work_end_at_ms: None,
                deleted_at_ms: None,
                input_rounds: Vec::new(),
                stale_input_responses: 0,
                dedupe_hits: 0,
            },
        );
        *self
            .truth
            .tasks_created_per_call_node
            .entry(call_node)
            .or_insert(0) += 1;
        self.tasks.insert(seq, task);
        self.by_id.insert(task_id, seq);
        if let Some(k) = key {
            self.by_key.insert(k, seq);
        }
        self.reschedule(seq);
        seq
    }

    fn start_sync(
        &mut self,
        now: u64,
        rpc_id: Value,
        tool: &str,
        script: TaskScript,
        key: Option<String>,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let truth_idx = self.truth.sync_runs.len();
        self.truth.sync_runs.push(SyncRunTruth {
            call_node: script.call_node.clone(),
            tool: tool.to_string(),
            kind: SyncRunKind::Plain,
            idempotency_key: key,
            started_at_ms: now,
            finished_at_ms: None,
            outcome: script.outcome,
            side_effects: 0,
            result_digest: None,
        });
        self.schedule
            .insert((now + script.duration_ms, Ev::Sync(seq)));
        self.sync_runs.insert(
            seq,
            SyncRun {
                rpc_id,
                script,
                truth_idx,
            },
        );
    }

    /// The live task named by `params.taskId`, or the error frame to send.
    fn live_task(&self, id: &Value, params: &Value) -> Result<u64, InFrame> {
        let Some(task_id) = params.get("taskId").and_then(Value::as_str) else {
            return Err(wire::error(
                id,
                wire::INVALID_PARAMS,
                "Missing params.taskId",
            ));
        };
        match self.by_id.get(task_id) {
            Some(&seq) if !self.task(seq).deleted => Ok(seq),
            Some(_) => Err(wire::error(id, wire::INVALID_PARAMS, "Task has expired")),
            None => Err(wire::error(
                id,
                wire::INVALID_PARAMS,
                &format!("Task not found: {task_id}"),
            )),
        }
    }

    fn tasks_get(&mut self, id: &Value, params: &Value) -> InFrame {
        match self.live_task(id, params) {
            Ok(seq) => {
                let body = self.get_task_result(seq);
                wire::response(id, body)
            }
            Err(f) => f,
        }
    }

    fn tasks_update(&mut self, now: u64, id: &Value, params: &Value) -> InFrame {
        let seq = match self.live_task(id, params) {
            Ok(seq) => seq,
            Err(f) => return f,
        };
        let Some(responses) = params.get("inputResponses").and_then(Value::as_object) else {
            return wire::error(
                id,
                wire::INVALID_PARAMS,
                "Invalid params: inputResponses must be an object",
            );
        };
        for (key, response) in responses {
            let action = response
                .get("action")
                .and_then(Value::as_str)
                .map(str::to_string);
            let task = self.task(seq);
            let pending = task.status == TaskStatus::InputRequired
                && task.pending_round().is_some_and(|r| &r.key == key);
            if pending {
                let task = self.task_mut(seq);
                task.rounds.last_mut().expect("pending round").answered = true;
                task.work.state = WorkState::Running;
                task.work.running_since = Some(now);
                let r = self.tt(seq).input_rounds.last_mut().expect("round truth");
                r.answered_at_ms = Some(now);
                r.action = action;
                r.content = response.get("content").cloned();
                self.set_status(seq, TaskStatus::Working, now, None);
            } else {
                let task_id = self.task(seq).id.clone();
                self.tt(seq).stale_input_responses += 1;
                self.truth.stale_input_responses.push(StaleInputResponse {
                    at_ms: now,
                    request_id: Value::String(key.clone()),
                    task_id: Some(task_id),
                    action,
                });
            }
        }
        wire::ack(id)
    }

    fn tasks_cancel(&mut self, now: u64, id: &Value, params: &Value) -> InFrame {
        let seq = match self.live_task(id, params) {
            Ok(seq) => seq,
            Err(f) => return f,
        };
        let task = self.task(seq);
        // Terminal: nothing to do. Already pending: the first cancel stands.
        if !task.status.is_terminal() && task.cancel_at.is_none() {
            let (lo, hi) = self.cfg.cancel_delay_ms;
            let delay = self.rng.gen_range(lo.min(hi)..=hi.max(lo));
            self.task_mut(seq).cancel_at = Some(now + delay);
            self.reschedule(seq);
        }
        wire::ack(id)
    }
}
