//! Fake MCP server, protocol revision 2025-11-25 with Tasks (SEP-1686), as a pure deterministic
//! state machine over simulated time.
//!
//! No tokio, no I/O, no clock: the harness hands in frames with [`FakeMcpServer::handle`] and
//! moves time with [`FakeMcpServer::advance`]; [`FakeMcpServer::next_event_at_ms`] says when the
//! next internal event (a completion, an input request, a TTL deletion, a queued frame) is due.
//! Randomness (task ids) comes only from the `ChaCha8Rng` given at construction, and every map is
//! a `BTreeMap`, so the same seed and the same inputs give byte-identical outputs.
//!
//! The server behaves like one of three [`Profile`]s: the spec text read strictly, or what the TS
//! (`@modelcontextprotocol/sdk@1.32.2`) and Python (`mcp==1.30.0`) SDK servers were observed to do
//! (`shared/spec/mcp-tasks.md` §14 and `shared/spec/transcripts/`).
//!
//! How a task behaves comes from the tool arguments: `arguments["__sim"]` is a [`TaskScript`].
//! Working time only counts while the task is `working`: `input_required` pauses it.
//!
//! Everything the server did, including what no client could see (side effects of work that kept
//! running after a cancel or a TTL deletion), is logged in a [`GroundTruth`] for checkers.
//!
//! ## Frames
//! Every response frame has `http_status: 200`, `retry_after_ms: None`, a body of exactly one
//! JSON-RPC message, and `request_id: Some(id)` when it answers a request whose JSON-RPC id is a
//! non-negative integer. Server-initiated messages (`elicitation/create`,
//! `notifications/tasks/status`) have `request_id: None`. Client notifications and client
//! responses (elicitation answers) get no reply. A body that is not JSON gets `-32700` with
//! `id: null`; that frame keeps the `OutFrame`'s `request_id` (an HTTP reply belongs to its POST).
//!
//! [`FakeMcpServer::handle`] returns only the direct reply to the message it was given. Anything
//! else the message causes (an elicitation delivered on a `tasks/result` call, held calls settled
//! by a cancel, status notifications) is queued and returned by the next
//! [`FakeMcpServer::advance`]; `next_event_at_ms` then reports the time it was queued.
//!
//! ## Modelling choices where neither the spec nor the brief decides
//! - Work keeps running when a task is deleted by TTL (the tool does not know about the store):
//!   its side effect still happens, logged as `effects_after_deletion`; held `tasks/result` calls
//!   settle with `-32602` not found at the deletion.
//! - Work that needs input from a task that is terminal or deleted (Python work after a cancel,
//!   or a task paused in `input_required` when cancelled/deleted) aborts without a side effect
//!   (the SDK refuses to move a terminal task back to `input_required`).
//! - A cancel or deletion abandons the pending input round; later answers are stale.
//! - An elicitation answer is matched by its JSON-RPC id among delivered, unanswered rounds; when
//!   several match (TS always uses id `0`), the related-task `_meta` picks one, else the round
//!   delivered last wins (a resolver map keyed by id keeps the last entry).
//! - Synchronous runs (`tools/call` without `task`) ignore `input_at_ms`.
//! - `outcome: "tool_error"` is a JSON-RPC error `-32000` (message = `text`) and applies no side
//!   effect; `completed` and `failed` (a `CallToolResult` with `isError: true`) apply one.
//!
//! ## The status-after-cancel quirk (a fault, off unless the harness marks a task)
//! A server that keeps working after a cancel and then lets the work's end overwrite the
//! status (the spec says cancelled stays cancelled). [`FakeMcpServer::keep_working_after_cancel`]
//! marks a task: a cancel then leaves its running work running, in every profile. When that work
//! ends, the server applies the side effect as usual and reports the task through
//! [`FakeMcpServer::take_finished_after_cancel`]; the harness may then call
//! [`FakeMcpServer::complete_after_cancel`], which flips the visible status to the work's outcome
//! (`completed`, or `failed`) with a stored result. The ground truth keeps the first terminal
//! status (`cancelled`); its `status` and `result_digest` show the flip.

use std::collections::{BTreeMap, BTreeSet};

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolop::transport::{InFrame, OutFrame};

mod lifecycle;
mod methods;
pub(in crate::fake) mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_flow;
#[cfg(test)]
mod tests_quirk;

/// Which real server the fake imitates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Profile {
    /// The 2025-11-25 spec text, read strictly (SHOULD/MUST error codes, no notifications).
    SpecStrict,
    /// `@modelcontextprotocol/sdk@1.32.2` (McpServer + InMemoryTaskStore).
    TsSdk,
    /// `mcp==1.30.0` (low-level Server + `experimental.enable_tasks()`).
    PythonSdk,
}

impl Profile {
    /// `pollInterval` reported when the config does not set one.
    pub fn default_poll_interval_ms(self) -> u64 {
        match self {
            Profile::SpecStrict | Profile::TsSdk => 1000,
            Profile::PythonSdk => 500,
        }
    }

    /// Short name, used as `serverInfo.version` suffix and in logs.
    pub fn name(self) -> &'static str {
        match self {
            Profile::SpecStrict => "spec-strict",
            Profile::TsSdk => "ts-sdk-1.32.2",
            Profile::PythonSdk => "python-mcp-1.30.0",
        }
    }
}

/// A tool the fake server offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeTool {
    pub name: String,
    /// `execution.taskSupport`: `"forbidden"`, `"optional"` or `"required"`; `None` omits
    /// `execution` (which means forbidden).
    pub task_support: Option<&'static str>,
    /// Advertised as `_meta["io.toolop/sync-upper-bound-ms"]` on the descriptor.
    pub sync_upper_bound_ms: Option<u64>,
}

impl FakeTool {
    pub fn new(name: impl Into<String>, task_support: Option<&'static str>) -> FakeTool {
        FakeTool {
            name: name.into(),
            task_support,
            sync_upper_bound_ms: None,
        }
    }
}

/// Server configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    pub profile: Profile,
    /// Advertise and honour the toolop extensions: submission dedupe by
    /// `_meta["io.toolop/idempotency-key"]`, `tasks/list` lookup by
    /// `_meta["io.toolop/lookup-key"]`, and `_meta["io.toolop/result-digest"]` on results.
    pub toolop_extensions: bool,
    /// `None`: the profile default (TS 1000, Python 500, strict 1000).
    pub poll_interval_ms: Option<u64>,
    /// The server's maximum ttl: a larger or absent requested ttl becomes this value.
    pub max_ttl_ms: Option<u64>,
    pub tools: Vec<FakeTool>,
}

impl ServerConfig {
    /// A config without extensions, default poll interval and no maximum ttl.
    pub fn new(profile: Profile, tools: Vec<FakeTool>) -> ServerConfig {
        ServerConfig {
            profile,
            toolop_extensions: false,
            poll_interval_ms: None,
            max_ttl_ms: None,
            tools,
        }
    }
}

/// How the scripted work ends.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ScriptOutcome {
    /// A `CallToolResult` without error.
    #[default]
    Completed,
    /// A `CallToolResult` with `isError: true` (TS/strict status `failed`, Python `completed`).
    Failed,
    /// The tool call fails with a JSON-RPC error (`-32000`, message = `text`); status `failed`.
    ToolError,
    /// AIP-151: the operation ends `done` with neither `response` nor `error`. MCP has no such
    /// outcome: the MCP fake treats it exactly like [`ScriptOutcome::Completed`].
    DoneWithoutResult,
}

/// What a task (or synchronous run) does, read from `arguments["__sim"]`. Every field has a
/// default, and arguments without `__sim` give [`TaskScript::default`] (1000 ms, completed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskScript {
    /// The call node the world submitted this for; empty when unknown.
    pub call_node: String,
    /// Working time until the work ends.
    pub duration_ms: u64,
    pub outcome: ScriptOutcome,
    /// Result text (or the JSON-RPC error message for `tool_error`).
    pub text: String,
    /// Offsets of *working* time at which the task asks for input; offsets at or past
    /// `duration_ms` are ignored, duplicates collapse.
    pub input_at_ms: Vec<u64>,
    /// Number of text content blocks in the result. With one block its text is `text`; with
    /// `n > 1` block `i` reads `"<text> [i/n]"`; zero gives an empty `content`.
    pub blocks: u32,
}

impl Default for TaskScript {
    fn default() -> TaskScript {
        TaskScript {
            call_node: String::new(),
            duration_ms: 1000,
            outcome: ScriptOutcome::Completed,
            text: "done".to_string(),
            input_at_ms: Vec::new(),
            blocks: 1,
        }
    }
}

impl TaskScript {
    /// Key of the script inside the tool arguments.
    pub const ARG_KEY: &'static str = "__sim";

    /// The script as JSON, to put at `arguments["__sim"]`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("TaskScript serialises")
    }

    /// Tool arguments carrying only this script: `{"__sim": ...}`.
    pub fn to_arguments(&self) -> Value {
        serde_json::json!({ Self::ARG_KEY: self.to_value() })
    }

    /// The script in `arguments` (a default one when there is none).
    pub fn from_arguments(arguments: Option<&Value>) -> Result<TaskScript, String> {
        match arguments.and_then(|a| a.get(Self::ARG_KEY)) {
            None | Some(Value::Null) => Ok(TaskScript::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("invalid {}: {e}", Self::ARG_KEY)),
        }
    }
}

/// Task status as the server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// AIP-151 `done` with neither `response` nor `error` (never reported by the MCP fake).
    DoneWithoutResult,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::DoneWithoutResult => "done_without_result",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed
                | TaskStatus::Failed
                | TaskStatus::Cancelled
                | TaskStatus::DoneWithoutResult
        )
    }
}

/// How the work behind a task (or a synchronous run) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkEnd {
    /// Ran to the end with this outcome (`completed`/`failed` applied a side effect).
    Finished(ScriptOutcome),
    /// Stopped by a cancel (TS/strict) before the end: no side effect.
    StoppedByCancel,
    /// Needed input from a task that was terminal or deleted: no side effect.
    AbortedAtInput,
}

/// Everything the server did: the checker's view.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroundTruth {
    /// Per task id.
    pub tasks: BTreeMap<String, TaskTruth>,
    /// Tool runs without a task: `tools/call` without `task`, and forbidden tools that the TS
    /// profile runs although `task` was sent. In arrival order.
    pub sync_runs: Vec<SyncRunTruth>,
    /// Tasks created per call node (more than one means a second operation was started).
    pub tasks_created_per_call_node: BTreeMap<String, u32>,
    /// Side effects per call node, over tasks and synchronous runs.
    pub effects_per_call_node: BTreeMap<String, u32>,
    /// Submissions answered with an existing task because of the idempotency key.
    pub duplicate_submits_deduped: u32,
    /// Client responses that answered no pending input round, in arrival order.
    pub stale_input_responses: Vec<StaleInputResponse>,
}

/// The truth about one task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskTruth {
    pub call_node: String,
    pub tool: String,
    /// The idempotency key the submission carried (whether or not extensions are on).
    pub idempotency_key: Option<String>,
    pub created_at_ms: u64,
    /// Effective ttl (requested, capped by the server's maximum).
    pub ttl_ms: Option<u64>,
    /// Current status (the last one a client could see once deleted).
    pub status: TaskStatus,
    /// The first terminal status; it never changes afterwards.
    pub terminal_status: Option<TaskStatus>,
    pub terminal_at_ms: Option<u64>,
    /// `value_digest` of the stored result without `_meta`; `None` without a stored result.
    pub result_digest: Option<String>,
    /// Side effects applied by the work (0 or 1).
    pub side_effects: u32,
    /// Of those, applied while the task was already `cancelled` (Python keeps working).
    pub effects_after_cancel: u32,
    /// Of those, applied after the task was deleted by TTL.
    pub effects_after_deletion: u32,
    pub work_end: Option<WorkEnd>,
    pub work_end_at_ms: Option<u64>,
    pub deleted_at_ms: Option<u64>,
    pub input_rounds: Vec<InputRoundTruth>,
    /// Client responses attributed to this task that answered no pending round.
    pub stale_input_responses: u32,
    /// Duplicate submissions answered with this task.
    pub dedupe_hits: u32,
}

/// One input request of a task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputRoundTruth {
    /// 1-based.
    pub round: u32,
    /// JSON-RPC id of the `elicitation/create` request.
    pub request_id: Value,
    pub asked_at_ms: u64,
    /// How many times the request was sent.
    pub deliveries: u32,
    pub answered_at_ms: Option<u64>,
    /// `accept`, `decline`, `cancel` (or `error` for a JSON-RPC error response).
    pub action: Option<String>,
    /// The `content` of the answer (accepted answers carry one), as the server received it.
    pub content: Option<Value>,
    /// The task the answer named in its related-task `_meta`, when that is another task: TS
    /// pairs answers with rounds by JSON-RPC id (always `0`), so an answer meant for a task whose
    /// round is gone can land on another task's round. `None`: it named this task, or none.
    pub answer_meant_for: Option<String>,
    /// Set when a cancel or deletion left the round unanswerable.
    pub abandoned_at_ms: Option<u64>,
}

/// Why a tool ran without a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncRunKind {
    /// `tools/call` without `task` on a forbidden/optional tool.
    Plain,
    /// TS profile: `task` sent for a forbidden tool; it runs, then the call fails `-32602`.
    ForbiddenRunAnyway,
}

/// One tool run without a task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SyncRunTruth {
    pub call_node: String,
    pub tool: String,
    pub kind: SyncRunKind,
    pub idempotency_key: Option<String>,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    pub outcome: ScriptOutcome,
    pub side_effects: u32,
    /// Digest of the result sent back (plain runs with a `CallToolResult` only).
    pub result_digest: Option<String>,
}

/// A client response that matched no pending input round.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StaleInputResponse {
    pub at_ms: u64,
    pub request_id: Value,
    /// The task it was attributed to (from related-task `_meta` or an earlier round's id).
    pub task_id: Option<String>,
    pub action: Option<String>,
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

/// A stored outcome, as `tasks/result` replays it.
#[derive(Clone, Debug)]
enum Stored {
    /// A `CallToolResult` without `_meta`.
    Result(Value),
    /// The original call's JSON-RPC error.
    Error { code: i64, message: String },
}

#[derive(Clone, Debug)]
struct Round {
    request_id: Value,
    /// The whole `elicitation/create` message.
    message: Value,
    answered: bool,
    abandoned: bool,
    deliveries: u32,
    /// Global delivery counter at the last delivery (0 = never delivered).
    last_delivery: u64,
}

#[derive(Clone, Debug)]
struct Task {
    id: String,
    script: TaskScript,
    /// Input offsets, sorted, deduplicated, all below the duration.
    inputs: Vec<u64>,
    created_at: u64,
    updated_at: u64,
    ttl: Option<u64>,
    poll_interval: u64,
    status: TaskStatus,
    status_message: Option<String>,
    work: Work,
    result: Option<Stored>,
    deleted: bool,
    delete_at: Option<u64>,
    /// JSON-RPC ids of held `tasks/result` calls.
    held: Vec<Value>,
    rounds: Vec<Round>,
    sched_work: Option<u64>,
    sched_delete: Option<u64>,
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
    kind: SyncRunKind,
    truth_idx: usize,
}

/// Scheduled internal events; at equal times work runs before synchronous runs before deletions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Work(u64),
    Sync(u64),
    Delete(u64),
}

/// The fake server. See the module docs.
pub struct FakeMcpServer {
    cfg: ServerConfig,
    rng: ChaCha8Rng,
    /// Latest simulated time seen.
    clock: u64,
    /// Python: the `<32 hex>` session scope prefix of task ids.
    session_scope: String,
    tasks: BTreeMap<u64, Task>,
    by_id: BTreeMap<String, u64>,
    by_key: BTreeMap<String, u64>,
    next_seq: u64,
    elicit_counter: u64,
    delivery_counter: u64,
    sync_runs: BTreeMap<u64, SyncRun>,
    schedule: BTreeSet<(u64, Ev)>,
    /// Frames caused by past events or messages, with the time they were queued.
    outbox: Vec<(u64, InFrame)>,
    truth: GroundTruth,
    /// Status-after-cancel quirk: tasks whose work keeps running through a cancel, with the
    /// caller's tag (see [`FakeMcpServer::keep_working_after_cancel`]).
    after_cancel: BTreeMap<String, u64>,
    /// Marked tasks whose work finished while cancelled, with the time and the caller's tag,
    /// waiting for [`FakeMcpServer::take_finished_after_cancel`].
    finished_after_cancel: Vec<(String, u64, u64)>,
}

impl FakeMcpServer {
    pub fn new(cfg: ServerConfig, mut rng: ChaCha8Rng) -> FakeMcpServer {
        let session_scope = match cfg.profile {
            Profile::PythonSdk => wire::hex(&mut rng, 16),
            _ => String::new(),
        };
        FakeMcpServer {
            cfg,
            rng,
            clock: 0,
            session_scope,
            tasks: BTreeMap::new(),
            by_id: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_seq: 1,
            elicit_counter: 0,
            delivery_counter: 0,
            sync_runs: BTreeMap::new(),
            schedule: BTreeSet::new(),
            outbox: Vec::new(),
            truth: GroundTruth::default(),
            after_cancel: BTreeMap::new(),
            finished_after_cancel: Vec::new(),
        }
    }

    /// A frame from the client arrives at `now_ms`. Returns the direct reply, if any (a held
    /// `tasks/result` or a synchronous call is answered later by [`FakeMcpServer::advance`]).
    /// Events due up to `now_ms` are processed first; frames they or this message cause are
    /// queued for the next `advance`.
    pub fn handle(&mut self, now_ms: u64, frame: OutFrame) -> Vec<InFrame> {
        self.process_until(now_ms);
        let now = self.clock;
        self.on_frame(now, frame)
    }

    /// Advance task lifecycles to `now_ms`: completions, input requests, ttl deletions. Returns
    /// the frames to send, in order: answers to held `tasks/result` and synchronous calls,
    /// `elicitation/create` requests, `notifications/tasks/status`.
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

    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }
}
