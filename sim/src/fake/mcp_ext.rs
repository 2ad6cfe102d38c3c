//! Fake MCP server speaking the tasks extension `io.modelcontextprotocol/tasks` (SEP-2663,
//! protocol 2026-07-28; `shared/spec/mcp-tasks.md` §15), as a pure deterministic state machine
//! over simulated time.
//!
//! The API mirrors [`super::mcp::FakeMcpServer`]: [`FakeMcpExtServer::handle`] takes a client
//! frame and returns the direct reply, [`FakeMcpExtServer::advance`] moves time and returns what
//! became due (answers to calls run inline), [`FakeMcpExtServer::next_event_at_ms`] says when the
//! next internal event is due. Randomness (task ids, cancel delays) comes only from the
//! `ChaCha8Rng` given at construction, and every map is a `BTreeMap`, so the same seed and the
//! same inputs give byte-identical outputs.
//!
//! Scripts and ground truth are the MCP fake's: `arguments["__sim"]` is a [`TaskScript`], and
//! [`GroundTruth`] / [`TaskTruth`] are filled by the same rules (tasks keyed by task id, call node
//! from the script, `terminal_status` the first terminal status, `result_digest` the digest of the
//! stored result without `_meta`, side effects per task and per call node, tasks created per call
//! node, input rounds, stale input responses), so the existing checkers read both fakes alike.
//!
//! ## Behaviour
//! - `initialize` answers protocol `2026-07-28` with `capabilities.extensions[
//!   "io.modelcontextprotocol/tasks"]`, and with [`ExtServerConfig::toolop_extensions`] also
//!   `experimental["io.toolop/idempotency"]` (`retentionMs` = the ttl, when there is one).
//! - `tools/call` reads the per-request capability in `_meta["io.modelcontextprotocol/
//!   clientCapabilities"].extensions["io.modelcontextprotocol/tasks"]`. Whether the call *needs*
//!   a task: a tool whose [`FakeTool::task_support`] is `"required"` always does, `"forbidden"`
//!   never does, otherwise (`"optional"` or `None`) a script whose `duration_ms` is above
//!   [`ExtServerConfig::task_threshold_ms`] does. A call that needs a task gets one when the
//!   capability is declared (`resultType: "task"`, flat Task fields) and `-32021` otherwise
//!   (nothing created, nothing run). A call that does not need one runs inline: the
//!   `CallToolResult` (`resultType: "complete"`) or its JSON-RPC error is answered after
//!   `duration_ms`, by `advance`.
//! - `tasks/get` answers `resultType: "complete"` plus the Task, with `result` (completed),
//!   `error` (failed) or `inputRequests` (input_required) inlined.
//! - Input rounds come from the script's `input_at_ms` (offsets of working time): the task goes
//!   `input_required` with `inputRequests: {"input-<n>": {method: "elicitation/create", params}}`.
//!   `tasks/update {taskId, inputResponses}` answers them; keys that are not the pending round are
//!   stale (counted on the task and logged in `stale_input_responses`). The ack is
//!   `{resultType: "complete"}` either way; an unknown task is `-32602`.
//! - `tasks/cancel` answers the empty ack `{resultType: "complete"}` and takes effect after a
//!   delay drawn from [`ExtServerConfig::cancel_delay_ms`], unless the task reached a terminal
//!   status first (eventually consistent: a cancelled task may end `completed` or `failed`).
//!   When it takes effect the work stops (no side effect) and the task ends `cancelled`.
//! - `isError` results (`outcome: "failed"`) end `completed`; `outcome: "tool_error"` ends
//!   `failed` with the JSON-RPC error `-32000` (message = `text`) inlined, and applies no side
//!   effect.
//! - TTL (`ttlMs`): counted from creation and restarted when the task becomes terminal (the SDK
//!   stores' behaviour); a deleted task answers `-32602`. Work keeps running after a deletion
//!   (its side effect is logged as `effects_after_deletion`); work waiting for input aborts.
//! - `tasks/list` and `tasks/result` do not exist: `-32601`, like any unknown method.
//! - With `toolop_extensions`, task submissions are deduplicated by
//!   `_meta["io.toolop/idempotency-key"]` (while the task exists) and results carry
//!   `_meta["io.toolop/result-digest"]`.
//!
//! ## Modelling choices where neither §15 nor the brief decides
//! - At equal times, work milestones run before inline-call answers, before cancel effects,
//!   before ttl deletions: work that ends exactly when the cancel would take effect wins.
//! - A second cancel while one is pending draws nothing and changes nothing.
//! - Every `tasks/get` that shows a pending input request counts as one delivery of it.
//! - An input response that is not `accept` still resumes the work (the action is logged), as in
//!   the MCP fake.
//! - The result digest (truth and `io.toolop/result-digest`) is over the `CallToolResult` without
//!   `_meta` and without `resultType`, so a result digests the same inline and inlined in a task.
//! - A JSON-RPC response from the client (there are no server requests in this era) is logged as
//!   a stale input response without a task.
//! - `outcome: "done_without_result"` (an AIP-151 outcome) behaves like `completed`, as in the
//!   MCP fake.
//! - Inline runs ignore `input_at_ms`, and the idempotency key does not deduplicate them (as in
//!   the MCP fake).

use std::collections::{BTreeMap, BTreeSet};

use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use toolop::transport::{InFrame, OutFrame};

pub use super::mcp::{
    FakeTool, GroundTruth, InputRoundTruth, ScriptOutcome, StaleInputResponse, SyncRunKind,
    SyncRunTruth, TaskScript, TaskStatus, TaskTruth, WorkEnd,
};

mod lifecycle;
mod methods;
mod wire;

#[cfg(test)]
mod tests;

/// Server configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtServerConfig {
    /// Advertise and honour the toolop extensions: task dedupe by
    /// `_meta["io.toolop/idempotency-key"]` and `_meta["io.toolop/result-digest"]` on results.
    pub toolop_extensions: bool,
    /// `pollIntervalMs` reported on every task.
    pub poll_interval_ms: u64,
    /// `ttlMs` of every task (the extension has no requested ttl); `None` is unlimited (`null`).
    pub ttl_ms: Option<u64>,
    /// Scripts with more working time than this get a task (tools without a fixed policy).
    pub task_threshold_ms: u64,
    /// Inclusive range the delay between a cancel and its effect is drawn from.
    pub cancel_delay_ms: (u64, u64),
    pub tools: Vec<FakeTool>,
}

impl ExtServerConfig {
    /// Defaults: no toolop extensions, poll interval 1000 ms, no ttl, threshold 1000 ms, cancel
    /// delay 0..=2000 ms.
    pub fn new(tools: Vec<FakeTool>) -> ExtServerConfig {
        ExtServerConfig {
            toolop_extensions: false,
            poll_interval_ms: 1000,
            ttl_ms: None,
            task_threshold_ms: 1000,
            cancel_delay_ms: (0, 2000),
            tools,
        }
    }
}

/// State of the work behind a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WorkState {
    Running,
    WaitingInput,
    Ended,
}

#[derive(Clone, Debug)]
struct Work {
    /// Working time accumulated up to `running_since` (or in total when not running).
    done_ms: u64,
    running_since: Option<u64>,
    next_input: usize,
    state: WorkState,
}

/// A stored outcome, as `tasks/get` inlines it.
#[derive(Clone, Debug)]
enum Stored {
    /// A `CallToolResult` without `_meta` and `resultType`.
    Result(Value),
    /// The call's JSON-RPC error.
    Error { code: i64, message: String },
}

#[derive(Clone, Debug)]
struct Round {
    /// The `inputRequests` key.
    key: String,
    /// The `{method, params}` entry.
    request: Value,
    answered: bool,
    abandoned: bool,
}

#[derive(Clone, Debug)]
struct Task {
    id: String,
    script: TaskScript,
    /// Input offsets, sorted, deduplicated, all below the duration.
    inputs: Vec<u64>,
    created_at: u64,
    updated_at: u64,
    status: TaskStatus,
    status_message: Option<String>,
    work: Work,
    result: Option<Stored>,
    deleted: bool,
    delete_at: Option<u64>,
    /// When an accepted cancel takes effect.
    cancel_at: Option<u64>,
    rounds: Vec<Round>,
    sched_work: Option<u64>,
    sched_delete: Option<u64>,
    sched_cancel: Option<u64>,
}

impl Task {
    fn pending_round(&self) -> Option<&Round> {
        self.rounds.last().filter(|r| !r.answered && !r.abandoned)
    }

    /// Next working-time milestone: (offset, is an input request).
    fn next_milestone(&self) -> (u64, bool) {
        match self.inputs.get(self.work.next_input) {
            Some(&off) => (off, true),
            None => (self.script.duration_ms, false),
        }
    }

    fn next_work_event(&self) -> Option<u64> {
        let since = self.work.running_since?;
        let (m, _) = self.next_milestone();
        Some(since + m.saturating_sub(self.work.done_ms))
    }
}

#[derive(Clone, Debug)]
struct SyncRun {
    rpc_id: Value,
    script: TaskScript,
    truth_idx: usize,
}

/// Scheduled internal events; at equal times work runs before inline answers before cancel
/// effects before deletions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Work(u64),
    Sync(u64),
    Cancel(u64),
    Delete(u64),
}

/// The fake server. See the module docs.
pub struct FakeMcpExtServer {
    cfg: ExtServerConfig,
    rng: ChaCha8Rng,
    /// Latest simulated time seen.
    clock: u64,
    tasks: BTreeMap<u64, Task>,
    by_id: BTreeMap<String, u64>,
    by_key: BTreeMap<String, u64>,
    next_seq: u64,
    sync_runs: BTreeMap<u64, SyncRun>,
    schedule: BTreeSet<(u64, Ev)>,
    /// Frames caused by past events, with the time they were queued.
    outbox: Vec<(u64, InFrame)>,
    truth: GroundTruth,
}

impl FakeMcpExtServer {
    pub fn new(cfg: ExtServerConfig, rng: ChaCha8Rng) -> FakeMcpExtServer {
        FakeMcpExtServer {
            cfg,
            rng,
            clock: 0,
            tasks: BTreeMap::new(),
            by_id: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_seq: 1,
            sync_runs: BTreeMap::new(),
            schedule: BTreeSet::new(),
            outbox: Vec::new(),
            truth: GroundTruth::default(),
        }
    }

    /// A frame from the client arrives at `now_ms`. Returns the direct reply, if any (a call run
    /// inline is answered later by [`FakeMcpExtServer::advance`]). Events due up to `now_ms` are
    /// processed first.
    pub fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        self.process_until(now_ms);
        let now = self.clock;
        self.on_frame(now, frame)
    }

    /// Advance task lifecycles to `now_ms`: completions, input requests, cancel effects, ttl
    /// deletions. Returns the frames to send, in order (answers to calls run inline).
    pub fn advance(&mut self, now_ms: u64) -> Vec<InFrame> {
        self.process_until(now_ms);
        self.outbox.drain(..).map(|(_, f)| f).collect()
    }

    /// When `advance` next has something to do, if ever: the time queued frames were queued at,
    /// or the time of the next internal event.
    pub fn next_event_at_ms(&self) -> Option<u64> {
        let queued = self.outbox.first().map(|(t, _)| *t);
        let scheduled = self.schedule.first().map(|(t, _)| *t);
        match (queued, scheduled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn truth(&self) -> &GroundTruth {
        &self.truth
    }

    pub fn config(&self) -> &ExtServerConfig {
        &self.cfg
    }
}
