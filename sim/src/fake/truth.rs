//! Ground truth: everything a fake server did, including what no client could see (work that
//! kept running after a cancel or a deletion). Judges compare the executor's account with this.
//! It is filled in one place, the task service (`fake::service`), whatever protocol the codec in
//! front of it speaks, so every protocol is judged by the same facts.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::script::ScriptOutcome;

/// Task status as the server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// Done with neither result nor error (AIP-151 only).
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

/// How the work behind a task (or an inline run) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkEnd {
    /// Ran to the end with this outcome (every outcome but `tool_error` applied a side effect).
    Finished(ScriptOutcome),
    /// Stopped by a cancel before the end: no side effect.
    StoppedByCancel,
    /// Stopped by the service itself (AIP-151 pre-emption): no side effect.
    Preempted,
    /// Aborted by the server's ttl sweep (rmcp fails a task still running at its ttl): no
    /// side effect.
    Expired,
    /// Needed input from a task that was terminal or deleted: no side effect.
    AbortedAtInput,
    /// Aborted by a restart of the server process (`server_restart`): no side effect.
    LostInRestart,
}

/// How the client answered an input round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerAction {
    Accept,
    Decline,
    Cancel,
    /// An error response instead of an answer, or an action the protocol does not know.
    Error,
}

impl AnswerAction {
    /// The protocol word (`accept`, `decline`, `cancel`); anything else is an error answer.
    pub fn from_word(word: Option<&str>) -> AnswerAction {
        match word {
            Some("accept") => AnswerAction::Accept,
            Some("decline") => AnswerAction::Decline,
            Some("cancel") => AnswerAction::Cancel,
            _ => AnswerAction::Error,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AnswerAction::Accept => "accept",
            AnswerAction::Decline => "decline",
            AnswerAction::Cancel => "cancel",
            AnswerAction::Error => "error",
        }
    }
}

/// Everything the server did: the judges' view.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GroundTruth {
    /// Per task id.
    pub tasks: BTreeMap<String, TaskTruth>,
    /// Tool runs without a task, in arrival order.
    pub sync_runs: Vec<SyncRunTruth>,
    /// Tasks created per call node (more than one means a second operation was started).
    pub tasks_created_per_call_node: BTreeMap<String, u32>,
    /// Side effects per call node, over tasks and inline runs.
    pub effects_per_call_node: BTreeMap<String, u32>,
    /// Submissions answered with an existing task because of the idempotency key.
    pub duplicate_submits_deduped: u32,
    /// Client answers that answered no pending input round, in arrival order.
    pub stale_input_responses: Vec<StaleInputResponse>,
    /// Task-augmented calls of a tool whose descriptor, as this server listed it, forbids
    /// tasks, in arrival order (a redeploy the client could not know of, the `tool_redeployed`
    /// fault, is not one). Written only when there is one, so other traces keep their bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forbidden_task_calls: Vec<ForbiddenTaskCall>,
    /// When the server process restarted (`server_restart`): each time, every task it held
    /// was lost. Written only when there is one, so other traces keep their bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_restarts_at_ms: Vec<u64>,
}

/// A task-augmented `tools/call` of a tool whose descriptor forbids tasks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForbiddenTaskCall {
    pub call_node: String,
    pub tool: String,
    /// What the server did with it: ran the tool and then refused the call (the TS SDK), or
    /// refused it without running (the Python SDK, the spec's reading).
    pub ran: bool,
}

impl GroundTruth {
    /// The truths of several servers as one log (task ids are unique per server, and servers of
    /// different lanes draw ids from different streams).
    pub fn merge(truths: impl IntoIterator<Item = GroundTruth>) -> GroundTruth {
        let mut out = GroundTruth::default();
        for t in truths {
            // Taken apart whole, so a field added later cannot be left out of the merge (the
            // restarts were, at first: found by sim/tests/faults.rs).
            let GroundTruth {
                tasks,
                sync_runs,
                tasks_created_per_call_node,
                effects_per_call_node,
                duplicate_submits_deduped,
                stale_input_responses,
                forbidden_task_calls,
                server_restarts_at_ms,
            } = t;
            out.tasks.extend(tasks);
            out.sync_runs.extend(sync_runs);
            for (k, v) in tasks_created_per_call_node {
                *out.tasks_created_per_call_node.entry(k).or_default() += v;
            }
            for (k, v) in effects_per_call_node {
                *out.effects_per_call_node.entry(k).or_default() += v;
            }
            out.duplicate_submits_deduped += duplicate_submits_deduped;
            out.stale_input_responses.extend(stale_input_responses);
            out.forbidden_task_calls.extend(forbidden_task_calls);
            out.server_restarts_at_ms.extend(server_restarts_at_ms);
        }
        out.server_restarts_at_ms.sort_unstable();
        out
    }
}

/// The truth about one task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskTruth {
    pub call_node: String,
    pub tool: String,
    /// The idempotency key the submission carried (whether or not the server dedupes by it).
    pub idempotency_key: Option<String>,
    pub created_at_ms: u64,
    /// Effective ttl (requested, capped by the server's maximum).
    pub ttl_ms: Option<u64>,
    /// Current status (the last one a client could see once deleted).
    pub status: TaskStatus,
    /// The first terminal status; it never changes afterwards.
    pub terminal_status: Option<TaskStatus>,
    pub terminal_at_ms: Option<u64>,
    /// Digest of the stored result as the server puts it on the wire (without metadata); `None`
    /// without a stored result.
    pub result_digest: Option<String>,
    /// The error the server shows for a failed outcome in place of a payload: a tool error's
    /// message (each protocol puts it in its own error shape); on AIP-151 also an error
    /// result's and a pre-emption's (`ResultShape::error_message`).
    pub error_message: Option<String>,
    /// Side effects applied by the work (0 or 1).
    pub side_effects: u32,
    /// Of those, applied while the task was already cancelled (work that kept running).
    pub effects_after_cancel: u32,
    /// Of those, applied after the task was deleted.
    pub effects_after_deletion: u32,
    pub work_end: Option<WorkEnd>,
    pub work_end_at_ms: Option<u64>,
    /// When the server first acknowledged a cancel it then ignored (`cancel_ignored`): from
    /// here to the work's end no executor can learn who won. Left out of the trace when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel_ignored_at_ms: Option<u64>,
    pub deleted_at_ms: Option<u64>,
    pub input_rounds: Vec<InputRoundTruth>,
    /// Client answers attributed to this task that answered no pending round.
    pub stale_input_responses: u32,
    /// Duplicate submissions answered with this task.
    pub dedupe_hits: u32,
}

impl TaskTruth {
    /// A task just created, working.
    pub fn new(
        call_node: &str,
        tool: &str,
        idempotency_key: Option<String>,
        created_at_ms: u64,
        ttl_ms: Option<u64>,
    ) -> TaskTruth {
        TaskTruth {
            call_node: call_node.to_string(),
            tool: tool.to_string(),
            idempotency_key,
            created_at_ms,
            ttl_ms,
            status: TaskStatus::Working,
            terminal_status: None,
            terminal_at_ms: None,
            result_digest: None,
            error_message: None,
            side_effects: 0,
            effects_after_cancel: 0,
            effects_after_deletion: 0,
            work_end: None,
            work_end_at_ms: None,
            cancel_ignored_at_ms: None,
            deleted_at_ms: None,
            input_rounds: Vec::new(),
            stale_input_responses: 0,
            dedupe_hits: 0,
        }
    }
}

/// One input request of a task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputRoundTruth {
    /// 1-based.
    pub round: u32,
    pub asked_at_ms: u64,
    /// How many times the request reached the wire (pushed, or shown by a read).
    pub deliveries: u32,
    pub answered_at_ms: Option<u64>,
    pub action: Option<AnswerAction>,
    /// The `content` of the answer (accepted answers carry one), as the server received it.
    pub content: Option<Value>,
    /// The task the answer named, when that is another task: a server that pairs answers with
    /// rounds by request id alone (the TS SDK) lands an answer on the round its id asks, even
    /// when its related-task `_meta` names another task. `None`: it named this task, or none.
    pub answer_meant_for: Option<String>,
    /// Set when a cancel or deletion left the round unanswerable.
    pub abandoned_at_ms: Option<u64>,
    /// The network's number for the frame that carried the answer (the trace's `Net` event
    /// with this `frame` says when and from which executor it left).
    pub answered_by_frame: Option<u64>,
}

impl InputRoundTruth {
    pub fn asked(round: u32, asked_at_ms: u64) -> InputRoundTruth {
        InputRoundTruth {
            round,
            asked_at_ms,
            deliveries: 0,
            answered_at_ms: None,
            action: None,
            content: None,
            answer_meant_for: None,
            abandoned_at_ms: None,
            answered_by_frame: None,
        }
    }
}

/// Why a tool ran without a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncRunKind {
    /// A call the server ran inline and answered with its result.
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
    /// Digest of the result sent back (plain runs with a tool result only).
    pub result_digest: Option<String>,
    /// The tool's error, when the run ended in one.
    pub error_message: Option<String>,
    /// When a server restart aborted the run (no side effect, no answer). Left out of the trace
    /// when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_at_ms: Option<u64>,
}

/// A client answer that matched no pending input round.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StaleInputResponse {
    pub at_ms: u64,
    /// The task it was attributed to (the task it named, or the last one asked under its id).
    pub task_id: Option<String>,
    /// The round it named, when it named one.
    pub round: Option<u32>,
    pub action: AnswerAction,
    /// The frame that carried it.
    pub frame: Option<u64>,
}

/// SHA-256 (lowercase hex) of the canonical bytes of `v`: a `serde_json::Value` keeps its keys
/// sorted, so `to_vec` is canonical. The server's own digest, computed apart from the executor's.
pub fn payload_digest(v: &Value) -> String {
    let bytes = serde_json::to_vec(v).expect("Value serialises");
    let mut out = String::with_capacity(64);
    for b in Sha256::digest(&bytes) {
        out.push(char::from_digit(u32::from(b >> 4), 16).expect("nibble"));
        out.push(char::from_digit(u32::from(b & 15), 16).expect("nibble"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_lowercase_sha256_of_sorted_json() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        // echo -n '{"a":2,"b":1}' | sha256sum
        assert_eq!(
            payload_digest(&a),
            "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772"
        );
        assert_eq!(payload_digest(&a).len(), 64);
        assert!(payload_digest(&a)
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn merge_adds_counts_and_keeps_every_task() {
        let mut a = GroundTruth::default();
        a.tasks
            .insert("t1".into(), TaskTruth::new("n1", "x", None, 0, None));
        a.tasks_created_per_call_node.insert("n1".into(), 1);
        let mut b = GroundTruth::default();
        b.tasks
            .insert("t2".into(), TaskTruth::new("n1", "x", None, 5, None));
        b.tasks_created_per_call_node.insert("n1".into(), 1);
        b.duplicate_submits_deduped = 2;
        let m = GroundTruth::merge([a, b]);
        assert_eq!(m.tasks.len(), 2);
        assert_eq!(m.tasks_created_per_call_node["n1"], 2);
        assert_eq!(m.duplicate_submits_deduped, 2);
    }
}
