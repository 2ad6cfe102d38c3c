//! Fake AIP-151 service (`google.longrunning.Operations` over the HTTP/JSON mapping, AIP-155
//! `request_id`), as a pure deterministic state machine over simulated time.
//!
//! Same shape as the MCP fake ([`crate::fake::mcp::FakeMcpServer`]): no tokio, no I/O, no clock;
//! [`FakeAipServer::handle`] takes a frame, [`FakeAipServer::advance`] moves time,
//! [`FakeAipServer::next_event_at_ms`] says when the next internal event (a completion, a
//! pre-emption, a cancel taking effect, a retention deletion) is due. Randomness (operation ids,
//! pre-emption, cancel delays) comes only from the `ChaCha8Rng` given at construction, and every
//! map is a `BTreeMap`: the same seed and the same inputs give byte-identical outputs.
//!
//! How an operation behaves comes from the request: `body["__sim"]` is a [`TaskScript`] (the
//! submit body is the tool arguments plus `requestId`). Everything the service did, including what
//! no client could see (work that kept running after a Delete), is logged in the shared
//! [`GroundTruth`], keyed by operation name, so the existing checkers judge AIP series unchanged.
//!
//! ## Routes
//! Requests are routed by `frame.http` (method and path) through the same templates the adapter
//! is configured with ([`Aip151Config`]):
//! - `POST submit_path` (`{tool}` a configured tool): create (or dedupe) an operation;
//! - `GET operation_path`: GetOperation; `POST operation_path:cancel`: CancelOperation;
//!   `DELETE operation_path`: DeleteOperation;
//! - `GET operations_collection[?filter=...]`: ListOperations, with the toolop `request_id="KEY"`
//!   filter extension.
//!
//! Anything else is 404 NOT_FOUND. Every reply answers its request (`request_id` copied from the
//! `OutFrame`), `retry_after_ms: None`, body JSON: an Operation, `{}` (Empty), a
//! `ListOperationsResponse`, or an error `{"error": {"code": <http>, "message", "status"}}`.
//! A frame without an HTTP target and without a correlation id (the adapter's never-sent input
//! response) gets no reply. 429/503 are the network layer's business, never this server's.
//!
//! ## Behaviour
//! - Operations run for the script's `duration_ms` (there is never an input request:
//!   `input_at_ms` is ignored). `duration_ms == 0` is done on the submit reply itself.
//! - The outcome: `completed` ends with `response` (an `Any` with `@type`, plus
//!   `metadata["io.toolop/resultDigest"]` with extensions); `failed` with `error {code: 13
//!   INTERNAL}`; `tool_error` with `error {code: 9 FAILED_PRECONDITION}`; `done_without_result`
//!   with neither. As in the MCP fake, every end but `tool_error` applies one side effect.
//! - `requestId` dedupes within `dedupe_window_ms` counted from the operation's creation
//!   (`None`: forever): the duplicate is answered with the original operation as it is now (even
//!   deleted: AIP-155 "stale success"; the work never runs twice inside the window). After the
//!   window a repeat creates a second operation — `tasks_created_per_call_node` records it.
//! - Cancel is best effort: `200 {}` and the cancel takes effect after a delay drawn from
//!   `cancel_delay_ms`. If the work ends first (completion, failure, pre-emption), that end wins;
//!   otherwise the operation ends `error {code: 1, message: "CANCELLED"}` without side effect.
//!   A second cancel while one is pending changes nothing. Cancel answers 501 UNIMPLEMENTED when
//!   `cancel_supported` is off, and on a done operation what [`CancelOnDone`] says.
//! - Pre-emption: a drawn fraction (`preempt_rate`) of operations ends at a drawn point of their
//!   run with `error {code: 10 ABORTED}`, without side effect (truth: `WorkEnd::StoppedByCancel`,
//!   the service stopped the work).
//! - Retention: `retention_after_done_ms` after completion the record is deleted; Get, Cancel
//!   and Delete then answer 404 NOT_FOUND and List no longer shows it.
//! - Delete is not cancel: the record goes (404 from then on) but the work continues and its side
//!   effect is still counted (`effects_after_deletion`); its end is visible to nobody, so the
//!   truth's `terminal_status` stays `None`.
//! - ListOperations: no pagination (every match on one page); an empty list is `{}` (proto3
//!   omits empty repeated fields). With `list_supported` off: 501. A `request_id` filter without
//!   extensions, or any other filter: 400 INVALID_ARGUMENT.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};
use toolop::digest::value_digest;
use toolop::protocol::aip151::{
    code, parse_request_id_filter, percent_decode, Aip151Config, CANCEL_SUFFIX, METADATA_RESULT_DIGEST,
    NAME_PLACEHOLDER, REQUEST_ID_FIELD, TOOL_PLACEHOLDER,
};
use toolop::transport::{InFrame, OutFrame};

use crate::fake::mcp::{GroundTruth, ScriptOutcome, TaskScript, TaskStatus, TaskTruth, WorkEnd};

#[cfg(test)]
mod tests;

/// `@type` of a completed operation's `response`.
pub const RESPONSE_TYPE: &str = "type.googleapis.com/toolop.sim.v1.ToolResult";
/// `@type` of every operation's `metadata`.
pub const METADATA_TYPE: &str = "type.googleapis.com/toolop.sim.v1.OperationMetadata";
/// The `error.code` of a `failed` script.
pub const FAILED_CODE: i64 = code::INTERNAL;
/// The `error.code` of a `tool_error` script.
pub const TOOL_ERROR_CODE: i64 = code::FAILED_PRECONDITION;

/// How CancelOperation on an operation that is already done is answered (AIP-151 leaves it open).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CancelOnDone {
    /// `200 {}`: a no-op.
    Ok,
    /// `400 FAILED_PRECONDITION`.
    FailedPrecondition,
    /// `404 NOT_FOUND`.
    NotFound,
}

/// Service configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AipServerConfig {
    /// Routes, tools, the dedupe window and whether Cancel is implemented: the same facts the
    /// adapter is configured with.
    pub api: Aip151Config,
    /// Operation names are `{name_prefix}/op-{16 hex}`.
    pub name_prefix: String,
    /// The toolop extensions: ListOperations answers the `request_id` filter, and a completed
    /// operation's metadata carries `io.toolop/resultDigest`.
    pub toolop_extensions: bool,
    /// ListOperations is implemented (else 501 UNIMPLEMENTED).
    pub list_supported: bool,
    /// DeleteOperation is implemented (else 501 UNIMPLEMENTED).
    pub delete_supported: bool,
    pub cancel_on_done: CancelOnDone,
    /// Delay between an accepted cancel and its effect, drawn uniformly in `[lo, hi]`.
    pub cancel_delay_ms: (u64, u64),
    /// Fraction of operations pre-empted (ending ABORTED) at a drawn point of their run.
    pub preempt_rate: f64,
    /// Records are deleted this long after completion; `None` keeps them.
    pub retention_after_done_ms: Option<u64>,
}

impl AipServerConfig {
    /// Extensions, List and Delete on; cancel of a done operation OK; cancel delay 0..=200 ms;
    /// no pre-emption; no retention deletion.
    pub fn new(api: Aip151Config) -> AipServerConfig {
        AipServerConfig {
            api,
            name_prefix: "projects/p/locations/l/operations".into(),
            toolop_extensions: true,
            list_supported: true,
            delete_supported: true,
            cancel_on_done: CancelOnDone::Ok,
            cancel_delay_ms: (0, 200),
            preempt_rate: 0.0,
            retention_after_done_ms: None,
        }
    }
}

/// How an operation ended, as the Operation shows it.
#[derive(Clone, Debug, PartialEq)]
enum End {
    Response(Value),
    Error { code: i64, message: String },
    Neither,
}

#[derive(Clone, Debug)]
struct Op {
    name: String,
    tool: String,
    script: TaskScript,
    /// The AIP-155 request id it was created with.
    request_id: Option<String>,
    created_at: u64,
    /// `None` while not done (or when the work ended after a Delete: nobody sees it).
    end: Option<End>,
    deleted: bool,
    /// The work is still running.
    running: bool,
    finish_at: u64,
    preempt_at: Option<u64>,
    cancel_at: Option<u64>,
}

/// Scheduled internal events; at equal times a completion beats a pre-emption, which beats a
/// cancel taking effect, which beats a retention deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Finish(u64),
    Preempt(u64),
    Cancel(u64),
    Delete(u64),
}

/// A reply: HTTP status and JSON body.
type Answer = (u16, Value);

/// The fake service. See the module docs.
pub struct FakeAipServer {
    cfg: AipServerConfig,
    rng: ChaCha8Rng,
    clock: u64,
    ops: BTreeMap<u64, Op>,
    by_name: BTreeMap<String, u64>,
    /// request id -> (newest operation created with it, its creation time).
    by_request_id: BTreeMap<String, (u64, u64)>,
    next_seq: u64,
    schedule: BTreeSet<(u64, Ev)>,
    truth: GroundTruth,
}

impl FakeAipServer {
    pub fn new(cfg: AipServerConfig, rng: ChaCha8Rng) -> FakeAipServer {
        FakeAipServer {
            cfg,
            rng,
            clock: 0,
            ops: BTreeMap::new(),
            by_name: BTreeMap::new(),
            by_request_id: BTreeMap::new(),
            next_seq: 1,
            schedule: BTreeSet::new(),
            truth: GroundTruth::default(),
        }
    }

    /// A request arrives at `now_ms`. Events due up to `now_ms` are processed first. Returns the
    /// reply (none for an uncorrelated frame without an HTTP target).
    pub fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        self.process_until(now_ms);
        let now = self.clock;
        let Some(http) = frame.http.as_ref() else {
            return match frame.request_id {
                None => Vec::new(),
                Some(_) => vec![reply(frame.request_id, error(code::INVALID_ARGUMENT, "not an HTTP request"))],
            };
        };
        let (method, path) = (http.method.clone(), http.path.clone());
        let answer = self.route(now, &method, &path, &frame.body);
        vec![reply(frame.request_id, answer)]
    }

    /// Move time to `now_ms`. AIP has no server push: nothing is ever returned, but operations
    /// end, cancels take effect and records expire.
    pub fn advance(&mut self, now_ms: u64) -> Vec<InFrame> {
        self.process_until(now_ms);
        Vec::new()
    }

    /// When the next internal event is due, if any.
    pub fn next_event_at_ms(&self) -> Option<u64> {
        self.schedule.first().map(|(t, _)| *t)
    }

    pub fn truth(&self) -> &GroundTruth {
        &self.truth
    }

    pub fn config(&self) -> &AipServerConfig {
        &self.cfg
    }

    // -----------------------------------------------------------------------------------------
    // Routing

    fn route(&mut self, now: u64, method: &str, full_path: &str, body: &[u8]) -> Answer {
        let (path, query) = match full_path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (full_path, None),
        };
        let api = &self.cfg.api;
        if method == "GET" && path == api.operations_collection {
            return self.list(query);
        }
        if method == "POST" {
            if let Some(tool) = match_template(&api.submit_path, TOOL_PLACEHOLDER, path) {
                if api.tools.contains(&tool) {
                    return self.submit(now, &tool, body);
                }
            }
            if let Some(name) = path.strip_suffix(CANCEL_SUFFIX).and_then(|p| match_template(&api.operation_path, NAME_PLACEHOLDER, p)) {
                return self.cancel(now, &name);
            }
        }
        if let Some(name) = match_template(&api.operation_path, NAME_PLACEHOLDER, path) {
            match method {
                "GET" => return self.get(&name),
                "DELETE" => return self.delete(now, &name),
                _ => {}
            }
        }
        error(code::NOT_FOUND, &format!("no method {method} {path}"))
    }

    fn live(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied().filter(|s| !self.ops[s].deleted)
    }

    fn not_found(name: &str) -> Answer {
        error(code::NOT_FOUND, &format!("Operation {name} not found"))
    }

    // -----------------------------------------------------------------------------------------
    // Methods

    fn submit(&mut self, now: u64, tool: &str, body: &[u8]) -> Answer {
        let mut args = match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return error(code::INVALID_ARGUMENT, "request body is not an object"),
            Err(e) => return error(code::INVALID_ARGUMENT, &format!("request body is not JSON: {e}")),
        };
        let request_id = match args.remove(REQUEST_ID_FIELD) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(_) => return error(code::INVALID_ARGUMENT, "requestId must be a non-empty string"),
        };
        let args = Value::Object(args);
        let script = match TaskScript::from_arguments(Some(&args)) {
            Ok(s) => s,
            Err(e) => return error(code::INVALID_ARGUMENT, &e),
        };
        if let Some(key) = &request_id {
            if let Some(&(seq, created)) = self.by_request_id.get(key) {
                let within = self.cfg.api.dedupe_window_ms.is_none_or(|w| now.saturating_sub(created) < w);
                if within {
                    self.truth.duplicate_submits_deduped += 1;
                    let name = self.ops[&seq].name.clone();
                    if let Some(t) = self.truth.tasks.get_mut(&name) {
                        t.dedupe_hits += 1;
                    }
                    return (200, self.op_json(&self.ops[&seq]));
                }
            }
        }
        let seq = self.create(now, tool, script, request_id);
        (200, self.op_json(&self.ops[&seq]))
    }

    fn create(&mut self, now: u64, tool: &str, script: TaskScript, request_id: Option<String>) -> u64 {
        let name = loop {
            let mut b = [0u8; 8];
            self.rng.fill_bytes(&mut b);
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            let candidate = format!("{}/op-{hex}", self.cfg.name_prefix);
            if !self.by_name.contains_key(&candidate) {
                break candidate;
            }
        };
        // Drawn for every operation, so the stream does not depend on the script.
        let preempted = self.rng.gen_bool(self.cfg.preempt_rate.clamp(0.0, 1.0));
        let preempt_offset = self.rng.gen_range(0..script.duration_ms.max(1));
        let seq = self.next_seq;
        self.next_seq += 1;
        let call_node = script.call_node.clone();
        let finish_at = now.saturating_add(script.duration_ms);
        let preempt_at = (preempted && script.duration_ms > 0).then(|| now + preempt_offset);
        self.truth.tasks.insert(
            name.clone(),
            TaskTruth {
                call_node: call_node.clone(),
                tool: tool.to_string(),
                idempotency_key: request_id.clone(),
                created_at_ms: now,
                ttl_ms: None,
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
        *self.truth.tasks_created_per_call_node.entry(call_node).or_insert(0) += 1;
        if let Some(key) = &request_id {
            self.by_request_id.insert(key.clone(), (seq, now));
        }
        self.by_name.insert(name.clone(), seq);
        self.ops.insert(
            seq,
            Op {
                name,
                tool: tool.to_string(),
                script,
                request_id,
                created_at: now,
                end: None,
                deleted: false,
                running: true,
                finish_at,
                preempt_at,
                cancel_at: None,
            },
        );
        if finish_at == now {
            // Done on the first response.
            self.finish(seq, now);
        } else {
            self.schedule.insert((finish_at, Ev::Finish(seq)));
            if let Some(t) = preempt_at {
                self.schedule.insert((t, Ev::Preempt(seq)));
            }
        }
        seq
    }

    fn get(&self, name: &str) -> Answer {
        match self.live(name) {
            Some(seq) => (200, self.op_json(&self.ops[&seq])),
            None => Self::not_found(name),
        }
    }

    fn cancel(&mut self, now: u64, name: &str) -> Answer {
        if !self.cfg.api.cancel_supported {
            return error(code::UNIMPLEMENTED, "CancelOperation is not implemented");
        }
        let Some(seq) = self.live(name) else {
            return Self::not_found(name);
        };
        let op = &self.ops[&seq];
        if op.end.is_some() {
            return match self.cfg.cancel_on_done {
                CancelOnDone::Ok => (200, json!({})),
                CancelOnDone::FailedPrecondition => {
                    error(code::FAILED_PRECONDITION, &format!("Operation {name} is already done"))
                }
                CancelOnDone::NotFound => Self::not_found(name),
            };
        }
        if op.cancel_at.is_none() {
            let (a, b) = self.cfg.cancel_delay_ms;
            let delay = self.rng.gen_range(a.min(b)..=a.max(b));
            let at = now.saturating_add(delay);
            self.ops.get_mut(&seq).expect("live op").cancel_at = Some(at);
            self.schedule.insert((at, Ev::Cancel(seq)));
        }
        (200, json!({}))
    }

    fn delete(&mut self, now: u64, name: &str) -> Answer {
        if !self.cfg.delete_supported {
            return error(code::UNIMPLEMENTED, "DeleteOperation is not implemented");
        }
        let Some(seq) = self.live(name) else {
            return Self::not_found(name);
        };
        self.remove_record(seq, now);
        (200, json!({}))
    }

    fn list(&self, query: Option<&str>) -> Answer {
        if !self.cfg.list_supported {
            return error(code::UNIMPLEMENTED, "ListOperations is not implemented");
        }
        let mut filter = None;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if k == "filter" {
                match percent_decode(v) {
                    Some(f) => filter = Some(f),
                    None => return error(code::INVALID_ARGUMENT, "filter is not percent-encoded UTF-8"),
                }
            }
        }
        let key = match filter.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
            None => None,
            Some(f) => match parse_request_id_filter(f) {
                Some(key) if self.cfg.toolop_extensions => Some(key),
                _ => return error(code::INVALID_ARGUMENT, &format!("unsupported filter {f:?}")),
            },
        };
        let ops: Vec<Value> = self
            .ops
            .values()
            .filter(|op| !op.deleted)
            .filter(|op| key.is_none() || op.request_id == key)
            .map(|op| self.op_json(op))
            .collect();
        if ops.is_empty() {
            // proto3 JSON omits an empty repeated field.
            return (200, json!({}));
        }
        (200, json!({ "operations": ops }))
    }

    // -----------------------------------------------------------------------------------------
    // Lifecycle

    fn process_until(&mut self, now: u64) {
        self.clock = self.clock.max(now);
        while let Some(&(t, ev)) = self.schedule.first() {
            if t > self.clock {
                break;
            }
            self.schedule.pop_first();
            match ev {
                Ev::Finish(seq) => self.finish(seq, t),
                Ev::Preempt(seq) => self.stop(seq, t, code::ABORTED, "ABORTED: pre-empted by a newer operation"),
                Ev::Cancel(seq) => self.stop(seq, t, code::CANCELLED, "CANCELLED"),
                Ev::Delete(seq) => {
                    if !self.ops[&seq].deleted {
                        self.remove_record(seq, t);
                    }
                }
            }
        }
    }

    /// Take the work's pending events off the schedule once it no longer runs.
    fn unschedule_work(&mut self, seq: u64) {
        let op = &self.ops[&seq];
        let mut stale = vec![(op.finish_at, Ev::Finish(seq))];
        stale.extend(op.preempt_at.map(|t| (t, Ev::Preempt(seq))));
        stale.extend(op.cancel_at.map(|t| (t, Ev::Cancel(seq))));
        for e in stale {
            self.schedule.remove(&e);
        }
    }

    /// The work ran to its end at `t`.
    fn finish(&mut self, seq: u64, t: u64) {
        if !self.ops[&seq].running {
            return;
        }
        self.unschedule_work(seq);
        let op = self.ops.get_mut(&seq).expect("op exists");
        op.running = false;
        let (script, name, deleted) = (op.script.clone(), op.name.clone(), op.deleted);
        let applies = script.outcome != ScriptOutcome::ToolError;
        {
            let tt = self.truth.tasks.get_mut(&name).expect("truth exists");
            tt.work_end = Some(WorkEnd::Finished(script.outcome));
            tt.work_end_at_ms = Some(t);
            if applies {
                tt.side_effects += 1;
                if deleted {
                    tt.effects_after_deletion += 1;
                }
            }
        }
        if applies {
            *self.truth.effects_per_call_node.entry(script.call_node.clone()).or_insert(0) += 1;
        }
        if deleted {
            // Nobody can see this end: the record is gone.
            return;
        }
        let (end, status) = match script.outcome {
            ScriptOutcome::Completed => (End::Response(response_payload(&script)), TaskStatus::Completed),
            ScriptOutcome::Failed => (End::Error { code: FAILED_CODE, message: script.text.clone() }, TaskStatus::Failed),
            ScriptOutcome::ToolError => {
                (End::Error { code: TOOL_ERROR_CODE, message: script.text.clone() }, TaskStatus::Failed)
            }
            ScriptOutcome::DoneWithoutResult => (End::Neither, TaskStatus::DoneWithoutResult),
        };
        self.set_done(seq, t, end, status);
    }

    /// The service stopped the work at `t` (a cancel taking effect, or a pre-emption): no side
    /// effect. Does nothing if the work already ended: the earlier end wins.
    fn stop(&mut self, seq: u64, t: u64, code: i64, message: &str) {
        if !self.ops[&seq].running {
            return;
        }
        self.unschedule_work(seq);
        let op = self.ops.get_mut(&seq).expect("op exists");
        op.running = false;
        let (name, deleted) = (op.name.clone(), op.deleted);
        let tt = self.truth.tasks.get_mut(&name).expect("truth exists");
        tt.work_end = Some(WorkEnd::StoppedByCancel);
        tt.work_end_at_ms = Some(t);
        if deleted {
            return;
        }
        let status = if code == code::CANCELLED { TaskStatus::Cancelled } else { TaskStatus::Failed };
        self.set_done(seq, t, End::Error { code, message: message.to_string() }, status);
    }

    fn set_done(&mut self, seq: u64, t: u64, end: End, status: TaskStatus) {
        let op = self.ops.get_mut(&seq).expect("op exists");
        let name = op.name.clone();
        let digest = match &end {
            End::Response(v) => Some(value_digest(v)),
            _ => None,
        };
        op.end = Some(end);
        let tt = self.truth.tasks.get_mut(&name).expect("truth exists");
        tt.status = status;
        if tt.terminal_status.is_none() {
            tt.terminal_status = Some(status);
            tt.terminal_at_ms = Some(t);
            tt.result_digest = digest;
        }
        if let Some(r) = self.cfg.retention_after_done_ms {
            self.schedule.insert((t.saturating_add(r), Ev::Delete(seq)));
        }
    }

    fn remove_record(&mut self, seq: u64, t: u64) {
        let op = self.ops.get_mut(&seq).expect("op exists");
        op.deleted = true;
        let name = op.name.clone();
        if let Some(r) = self.cfg.retention_after_done_ms {
            // A pending retention deletion has nothing left to do.
            if let Some(at) = self.truth.tasks[&name].terminal_at_ms {
                self.schedule.remove(&(at.saturating_add(r), Ev::Delete(seq)));
            }
        }
        if let Some(tt) = self.truth.tasks.get_mut(&name) {
            tt.deleted_at_ms.get_or_insert(t);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Wire

    /// The Operation in proto3 JSON: `done` omitted while false, at most one of `response` and
    /// `error`.
    fn op_json(&self, op: &Op) -> Value {
        let mut metadata = Map::new();
        metadata.insert("@type".into(), json!(METADATA_TYPE));
        metadata.insert("tool".into(), json!(op.tool));
        metadata.insert("createTimeMs".into(), json!(op.created_at.to_string()));
        let mut m = Map::new();
        m.insert("name".into(), json!(op.name));
        match &op.end {
            None => {}
            Some(end) => {
                m.insert("done".into(), json!(true));
                match end {
                    End::Response(v) => {
                        if self.cfg.toolop_extensions {
                            metadata.insert(METADATA_RESULT_DIGEST.into(), json!(value_digest(v)));
                        }
                        m.insert("response".into(), v.clone());
                    }
                    End::Error { code, message } => {
                        let mut e = json!({"code": code, "message": message});
                        if *code != code::CANCELLED {
                            e["details"] = json!([{
                                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                "reason": code::name(*code).unwrap_or("UNKNOWN"),
                                "domain": "toolop.sim",
                            }]);
                        }
                        m.insert("error".into(), e);
                    }
                    End::Neither => {}
                }
            }
        }
        m.insert("metadata".into(), Value::Object(metadata));
        Value::Object(m)
    }
}

/// `template` with `placeholder` matched against `path`: the percent-decoded middle, if the rest
/// matches and the middle is not empty.
fn match_template(template: &str, placeholder: &str, path: &str) -> Option<String> {
    let (pre, post) = template.split_once(placeholder)?;
    let middle = path.strip_prefix(pre)?.strip_suffix(post)?;
    if middle.is_empty() {
        return None;
    }
    percent_decode(middle)
}

/// The `response` of a completed script: an `Any` with `@type`, the text blocks as in the MCP fake.
fn response_payload(script: &TaskScript) -> Value {
    let n = script.blocks;
    let content: Vec<Value> = (1..=n)
        .map(|i| {
            let text = if n == 1 { script.text.clone() } else { format!("{} [{i}/{n}]", script.text) };
            json!({"type": "text", "text": text})
        })
        .collect();
    json!({"@type": RESPONSE_TYPE, "content": content})
}

/// An error in the JSON error mapping: `code` is the HTTP status, `status` the canonical name.
fn error(c: i64, message: &str) -> Answer {
    let http = code::http_status(c);
    (http, json!({"error": {"code": http, "message": message, "status": code::name(c).unwrap_or("UNKNOWN")}}))
}

fn reply(request_id: Option<u64>, (status, body): Answer) -> InFrame {
    InFrame {
        request_id,
        http_status: status,
        retry_after_ms: None,
        body: serde_json::to_vec(&body).expect("Value serialises"),
    }
}
