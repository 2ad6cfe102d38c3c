//! Incoming messages: JSON-RPC parsing and the method handlers.

use serde_json::{json, Value};
use toolop::protocol::{
    EXT_IDEMPOTENCY, META_IDEMPOTENCY_KEY, META_LOOKUP_KEY, META_SYNC_UPPER_BOUND_MS,
};
use toolop::transport::{InFrame, OutFrame};

use super::lifecycle::Msg;
use super::wire::{self, TasksMethod};
use super::{
    FakeMcpServer, Profile, StaleInputResponse, SyncRun, SyncRunKind, SyncRunTruth, Task,
    TaskScript, TaskStatus, TaskTruth, Work, WorkEnd, WorkState,
};

/// TS lists 10 tasks per page.
const TS_PAGE_SIZE: usize = 10;

impl FakeMcpServer {
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
                self.on_client_response(now, &id, &msg);
                Vec::new()
            }
            (None, id) => {
                vec![wire::error(
                    &id.unwrap_or(Value::Null),
                    wire::INVALID_REQUEST,
                    "Invalid Request",
                )]
            }
        }
    }

    fn on_request(&mut self, now: u64, method: &str, id: Value, params: &Value) -> Option<InFrame> {
        match method {
            "initialize" => Some(self.initialize(&id)),
            "ping" => Some(wire::response(&id, json!({}))),
            "tools/list" => Some(self.tools_list(&id)),
            "tools/call" => self.tools_call(now, id, params),
            "tasks/get" => Some(self.tasks_get(&id, params)),
            "tasks/result" => self.tasks_result(now, id, params),
            "tasks/cancel" => Some(self.tasks_cancel(now, &id, params)),
            "tasks/list" => Some(self.tasks_list(&id, params)),
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
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        });
        if self.cfg.toolop_extensions {
            // Keys live as long as their task, and a task at least its ttl: the server's
            // maximum ttl bounds what "not found by key" can prove.
            let ext = match self.cfg.max_ttl_ms {
                Some(ms) => json!({ "retentionMs": ms }),
                None => json!({}),
            };
            caps["experimental"] = json!({ EXT_IDEMPOTENCY: ext });
        } else if self.profile() == Profile::PythonSdk {
            caps["experimental"] = json!({});
        }
        wire::response(
            id,
            json!({
                "protocolVersion": wire::PROTOCOL_VERSION,
                "capabilities": caps,
                "serverInfo": {"name": "toolop-fake-mcp", "version": self.profile().name()},
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
                if let Some(ts) = t.task_support {
                    d["execution"] = json!({ "taskSupport": ts });
                }
                if let Some(ms) = t.sync_upper_bound_ms {
                    d["_meta"] = json!({ META_SYNC_UPPER_BOUND_MS: ms });
                }
                d
            })
            .collect();
        wire::response(id, json!({ "tools": tools }))
    }

    fn tools_call(&mut self, now: u64, id: Value, params: &Value) -> Option<InFrame> {
        let profile = self.profile();
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Some(wire::error(
                &id,
                wire::INVALID_PARAMS,
                "Invalid params: missing tool name",
            ));
        };
        let name = name.to_string();
        let task_param = params.get("task").filter(|t| !t.is_null());
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
            return Some(match (profile, task_param.is_some()) {
                (Profile::PythonSdk, _) => {
                    wire::response(&id, wire::error_result(&format!("Unknown tool: {name}")))
                }
                (Profile::TsSdk, true) => {
                    wire::error(&id, wire::INVALID_PARAMS, wire::TS_INVALID_TASK_CREATION)
                }
                (Profile::TsSdk, false) => wire::error(
                    &id,
                    wire::INVALID_PARAMS,
                    &format!("MCP error -32602: Tool {name} not found"),
                ),
                (Profile::SpecStrict, _) => {
                    wire::error(&id, wire::INVALID_PARAMS, &format!("Unknown tool: {name}"))
                }
            });
        };
        let support = tool.task_support.unwrap_or("forbidden");
        let task_capable = matches!(support, "optional" | "required");
        match (task_param, task_capable) {
            (Some(task_param), true) => Some(self.create_task(now, &id, &name, script, key, task_param)),
            (Some(_), false) => match profile {
                Profile::TsSdk => {
                    self.start_sync(now, id, &name, script, key, SyncRunKind::ForbiddenRunAnyway);
                    None
                }
                Profile::PythonSdk => Some(wire::response(
                    &id,
                    wire::error_result("This tool does not support task-augmented invocation"),
                )),
                Profile::SpecStrict => Some(wire::error(
                    &id,
                    wire::METHOD_NOT_FOUND,
                    &format!("Tool {name} does not support task-augmented invocation"),
                )),
            },
            (None, _) if support == "required" => Some(match profile {
                Profile::TsSdk => wire::response(
                    &id,
                    wire::error_result(&format!(
                        "MCP error -32601: Tool {name} requires task augmentation (taskSupport: 'required')"
                    )),
                ),
                Profile::PythonSdk => {
                    wire::response(&id, wire::error_result("This tool requires task-augmented invocation"))
                }
                Profile::SpecStrict => {
                    wire::error(&id, wire::METHOD_NOT_FOUND, &format!("Tool {name} requires task augmentation"))
                }
            }),
            (None, _) => {
                self.start_sync(now, id, &name, script, key, SyncRunKind::Plain);
                None
            }
        }
    }

    fn create_task(
        &mut self,
        now: u64,
        id: &Value,
        tool: &str,
        script: TaskScript,
        key: Option<String>,
        task_param: &Value,
    ) -> InFrame {
        let profile = self.profile();
        let requested_ttl = match task_param.get("ttl") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(ttl) => Some(ttl),
                None => {
                    return wire::error(
                        id,
                        wire::INVALID_PARAMS,
                        "Invalid params: task.ttl must be a non-negative integer",
                    )
                }
            },
        };
        if self.cfg.toolop_extensions {
            if let Some(&seq) = key.as_ref().and_then(|k| self.by_key.get(k)) {
                if !self.task(seq).deleted {
                    self.truth.duplicate_submits_deduped += 1;
                    self.tt(seq).dedupe_hits += 1;
                    return wire::response(id, json!({ "task": self.task_json(self.task(seq)) }));
                }
            }
        }
        let ttl = match (requested_ttl, self.cfg.max_ttl_ms) {
            (Some(r), Some(max)) => Some(r.min(max)),
            (r, max) => r.or(max),
        };
        let task_id = loop {
            let candidate = match profile {
                Profile::PythonSdk => {
                    format!("{}:{}", self.session_scope, wire::uuid4(&mut self.rng))
                }
                _ => wire::hex(&mut self.rng, 16),
            };
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
            ttl,
            poll_interval: self
                .cfg
                .poll_interval_ms
                .unwrap_or(profile.default_poll_interval_ms()),
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
            held: Vec::new(),
            rounds: Vec::new(),
            sched_work: None,
            sched_delete: None,
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
        wire::response(id, json!({ "task": self.task_json(self.task(seq)) }))
    }

    fn start_sync(
        &mut self,
        now: u64,
        rpc_id: Value,
        tool: &str,
        script: TaskScript,
        key: Option<String>,
        kind: SyncRunKind,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let truth_idx = self.truth.sync_runs.len();
        self.truth.sync_runs.push(SyncRunTruth {
            call_node: script.call_node.clone(),
            tool: tool.to_string(),
            kind,
            idempotency_key: key,
            started_at_ms: now,
            finished_at_ms: None,
            outcome: script.outcome,
            side_effects: 0,
            result_digest: None,
        });
        self.schedule
            .insert((now + script.duration_ms, super::Ev::Sync(seq)));
        self.sync_runs.insert(
            seq,
            SyncRun {
                rpc_id,
                script,
                kind,
                truth_idx,
            },
        );
    }

    /// The live task named by `params.taskId`, or the error frame to send.
    fn live_task(&self, id: &Value, params: &Value, method: TasksMethod) -> Result<u64, InFrame> {
        let profile = self.profile();
        let Some(task_id) = params.get("taskId").and_then(Value::as_str) else {
            let (code, msg) = wire::missing_task_id(profile);
            return Err(wire::error(id, code, &msg));
        };
        match self.by_id.get(task_id) {
            Some(&seq) if !self.task(seq).deleted => Ok(seq),
            found => {
                let msg = wire::not_found_message(profile, method, task_id, found.is_some());
                Err(wire::error(id, wire::INVALID_PARAMS, &msg))
            }
        }
    }

    fn tasks_get(&self, id: &Value, params: &Value) -> InFrame {
        match self.live_task(id, params, TasksMethod::Get) {
            Ok(seq) => wire::response(id, self.task_json(self.task(seq))),
            Err(f) => f,
        }
    }

    fn tasks_result(&mut self, now: u64, id: Value, params: &Value) -> Option<InFrame> {
        let seq = match self.live_task(&id, params, TasksMethod::Result) {
            Ok(seq) => seq,
            Err(f) => return Some(f),
        };
        if self.task(seq).status.is_terminal() {
            return Some(self.result_reply(seq, &id));
        }
        self.task_mut(seq).held.push(id);
        if self.task(seq).pending_round().is_some() {
            self.deliver_round(seq, now);
        }
        None
    }

    fn tasks_cancel(&mut self, now: u64, id: &Value, params: &Value) -> InFrame {
        let profile = self.profile();
        let seq = match self.live_task(id, params, TasksMethod::Cancel) {
            Ok(seq) => seq,
            Err(f) => return f,
        };
        let status = self.task(seq).status;
        if status.is_terminal() {
            return wire::error(
                id,
                wire::INVALID_PARAMS,
                &wire::cancel_terminal_message(profile, status.as_str()),
            );
        }
        self.abandon_round(seq, now);
        let work_state = self.task(seq).work.state;
        // The status-after-cancel quirk keeps work going like Python does, in every profile.
        let keeps_working =
            profile == Profile::PythonSdk || self.after_cancel.contains_key(&self.task(seq).id);
        match (keeps_working, work_state) {
            (_, WorkState::Ended) => {}
            // Python: running work goes on; work waiting for input can never get it.
            (true, WorkState::Running) => {}
            (true, WorkState::WaitingInput) => self.end_work(seq, now, WorkEnd::AbortedAtInput),
            (false, _) => self.end_work(seq, now, WorkEnd::StoppedByCancel),
        }
        let msg = match profile {
            Profile::TsSdk => Msg::Set("Client cancelled task execution.".to_string()),
            Profile::PythonSdk => Msg::Keep,
            Profile::SpecStrict => Msg::Set("Cancelled by client".to_string()),
        };
        // Cancelled before the reply is built; held calls settle right after it.
        self.set_status(seq, TaskStatus::Cancelled, now, msg);
        self.settle_held(seq, now);
        self.reschedule(seq);
        let mut body = self.task_json(self.task(seq));
        if profile == Profile::TsSdk {
            body["_meta"] = json!({});
        }
        wire::response(id, body)
    }

    fn tasks_list(&self, id: &Value, params: &Value) -> InFrame {
        let profile = self.profile();
        let wrap = |tasks: Vec<Value>, next: Option<String>| {
            let mut r = json!({ "tasks": tasks });
            if let Some(c) = next {
                r["nextCursor"] = json!(c);
            }
            if profile == Profile::TsSdk {
                r["_meta"] = json!({});
            }
            wire::response(id, r)
        };
        if self.cfg.toolop_extensions {
            if let Some(key) = params
                .get("_meta")
                .and_then(|m| m.get(META_LOOKUP_KEY))
                .and_then(Value::as_str)
            {
                let found = self
                    .by_key
                    .get(key)
                    .map(|&s| self.task(s))
                    .filter(|t| !t.deleted);
                return wrap(found.map(|t| self.task_json(t)).into_iter().collect(), None);
            }
        }
        let live: Vec<&Task> = self.tasks.values().filter(|t| !t.deleted).collect();
        let cursor = params.get("cursor").and_then(Value::as_str);
        match profile {
            Profile::PythonSdk => wrap(live.iter().map(|t| self.task_json(t)).collect(), None),
            Profile::SpecStrict => match cursor {
                Some(c) => wire::error(id, wire::INVALID_PARAMS, &format!("Invalid cursor: {c}")),
                None => wrap(live.iter().map(|t| self.task_json(t)).collect(), None),
            },
            Profile::TsSdk => {
                let start = match cursor {
                    None => 0,
                    Some(c) => match live.iter().position(|t| t.id == c) {
                        Some(i) => i + 1,
                        None => {
                            let msg = format!(
                                "MCP error -32602: Failed to list tasks: Invalid cursor: {c}"
                            );
                            return wire::error(id, wire::INVALID_PARAMS, &msg);
                        }
                    },
                };
                let page: Vec<&Task> = live
                    .iter()
                    .skip(start)
                    .take(TS_PAGE_SIZE)
                    .copied()
                    .collect();
                let next = if start + page.len() < live.len() {
                    page.last().map(|t| t.id.clone())
                } else {
                    None
                };
                wrap(page.iter().map(|t| self.task_json(t)).collect(), next)
            }
        }
    }

    /// The client answered one of our requests (an `elicitation/create`).
    fn on_client_response(&mut self, now: u64, id: &Value, msg: &Value) {
        let action = match msg.get("result") {
            Some(r) => r.get("action").and_then(Value::as_str).map(str::to_string),
            None => Some("error".to_string()),
        };
        let related = msg
            .get("result")
            .and_then(|r| r.get("_meta"))
            .and_then(|m| m.get(wire::RELATED_TASK))
            .and_then(|r| r.get("taskId"))
            .and_then(Value::as_str);
        // Delivered, unanswered rounds with this id: related task first, then last delivered.
        let mut best: Option<(bool, u64, u64)> = None;
        for (&seq, task) in &self.tasks {
            if task.deleted {
                continue;
            }
            if let Some(r) = task.pending_round() {
                if r.deliveries > 0 && &r.request_id == id {
                    let rank = (related == Some(task.id.as_str()), r.last_delivery, seq);
                    if best.is_none_or(|b| rank > b) {
                        best = Some(rank);
                    }
                }
            }
        }
        if let Some((_, _, seq)) = best {
            let task = self.task_mut(seq);
            let round = task.rounds.last_mut().expect("pending round");
            round.answered = true;
            task.work.state = WorkState::Running;
            task.work.running_since = Some(now);
            let content = msg.get("result").and_then(|r| r.get("content")).cloned();
            let meant_for = related.filter(|r| *r != self.task(seq).id.as_str()).map(str::to_string);
            let r = self.tt(seq).input_rounds.last_mut().expect("round truth");
            r.answered_at_ms = Some(now);
            r.action = action;
            r.content = content;
            r.answer_meant_for = meant_for;
            let msg = if self.profile() == Profile::SpecStrict {
                Msg::Clear
            } else {
                Msg::Keep
            };
            self.set_status(seq, TaskStatus::Working, now, msg);
            return;
        }
        // Stale: attribute it by related-task meta, else by the last round that used this id.
        let mut owner = related.and_then(|r| self.by_id.get(r).copied());
        if owner.is_none() {
            let mut last: Option<(u64, u64)> = None;
            for (&seq, task) in &self.tasks {
                for r in task.rounds.iter().filter(|r| &r.request_id == id) {
                    if last.is_none_or(|l| (r.last_delivery, seq) > l) {
                        last = Some((r.last_delivery, seq));
                    }
                }
            }
            owner = last.map(|(_, seq)| seq);
        }
        let task_id = owner.map(|seq| {
            self.tt(seq).stale_input_responses += 1;
            self.task(seq).id.clone()
        });
        self.truth.stale_input_responses.push(StaleInputResponse {
            at_ms: now,
            request_id: id.clone(),
            task_id,
            action,
        });
    }
}
