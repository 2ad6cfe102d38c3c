//! What each server profile says where MCP 2025-11-25 leaves the wording (or the shape) open:
//! error texts, status messages, id formats. From `shared/spec/mcp-tasks.md` §14 and the raw
//! transcripts of the TS (`@modelcontextprotocol/sdk@1.32.2`) and Python (`mcp==1.30.0`) servers.

use serde_json::{json, Value};

use super::Profile;
use crate::fake::codec::{Note, TaskView};
use crate::fake::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS};
use crate::fake::script::ScriptOutcome;

/// Which `tasks/*` method a not-found error answers (TS words them differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TasksMethod {
    Get,
    Result,
    Cancel,
}

/// Message of the `-32602` for an unknown or deleted task id.
pub fn not_found(profile: Profile, method: TasksMethod, task_id: &str, expired: bool) -> String {
    match profile {
        Profile::TsSdk => match method {
            TasksMethod::Get => {
                "MCP error -32602: Failed to retrieve task: Task not found".to_string()
            }
            TasksMethod::Result | TasksMethod::Cancel => {
                format!("MCP error -32602: Task not found: {task_id}")
            }
        },
        Profile::PythonSdk => format!("Task not found: {task_id}"),
        // The spec's own example (basic/utilities/tasks.mdx, "Task expired").
        Profile::SpecStrict if expired => "Failed to retrieve task: Task has expired".to_string(),
        Profile::SpecStrict => format!("Task not found: {task_id}"),
    }
}

/// (code, message) for a `tasks/*` request without a string `taskId`.
pub fn missing_task_id(profile: Profile) -> (i64, String) {
    match profile {
        Profile::TsSdk => (
            INTERNAL_ERROR,
            "[\n  {\n    \"expected\": \"string\",\n    \"code\": \"invalid_type\",\n    \"path\": [\n      \"params\",\n      \"taskId\"\n    ],\n    \"message\": \"Invalid input: expected string, received undefined\"\n  }\n]".to_string(),
        ),
        Profile::PythonSdk => (INVALID_PARAMS, "Invalid request parameters".to_string()),
        Profile::SpecStrict => (INVALID_PARAMS, "Missing params.taskId".to_string()),
    }
}

/// Message of the `-32602` for `tasks/cancel` on a terminal task.
pub fn cancel_terminal(profile: Profile, status: &str) -> String {
    match profile {
        Profile::TsSdk => {
            format!("MCP error -32602: Cannot cancel task in terminal status: {status}")
        }
        Profile::PythonSdk => format!("Cannot cancel task in terminal state '{status}'"),
        Profile::SpecStrict => format!("Cannot cancel task in terminal status: {status}"),
    }
}

/// The TS SDK's error when a tool without task support answers a task-augmented call.
pub const TS_INVALID_TASK_CREATION: &str = "MCP error -32602: Invalid task creation result: [\n  {\n    \"expected\": \"object\",\n    \"code\": \"invalid_type\",\n    \"path\": [\n      \"task\"\n    ],\n    \"message\": \"Invalid input: expected object, received undefined\"\n  }\n]";

/// A `CallToolResult` with `isError: true` and one text block.
pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// `statusMessage` after the task's history: which changes set it, which clear it, which keep it.
pub fn status_message(profile: Profile, view: &TaskView) -> Option<String> {
    let mut msg: Option<String> = None;
    for note in &view.notes {
        let tool_error = matches!(
            note,
            Note::Ended {
                outcome: ScriptOutcome::ToolError,
                ..
            }
        );
        match (profile, note) {
            (_, Note::Ended { .. }) if tool_error => msg = Some(view.text.clone()),
            (Profile::SpecStrict, Note::InputAsked) => {
                msg = Some("Waiting for client input".into())
            }
            (Profile::SpecStrict, Note::Answered) => msg = None,
            (
                Profile::SpecStrict,
                Note::Ended {
                    outcome: ScriptOutcome::Failed,
                    ..
                },
            ) => msg = Some(view.text.clone()),
            (Profile::SpecStrict, Note::Cancelled) => msg = Some("Cancelled by client".into()),
            (Profile::TsSdk, Note::Cancelled) => {
                msg = Some("Client cancelled task execution.".into())
            }
            _ => {}
        }
    }
    msg
}

/// `pollInterval` reported when the configuration does not set one.
pub fn default_poll_interval_ms(profile: Profile) -> u64 {
    match profile {
        Profile::SpecStrict | Profile::TsSdk => 1000,
        Profile::PythonSdk => 500,
    }
}

/// `serverInfo.version`.
pub fn server_version(profile: Profile) -> &'static str {
    match profile {
        Profile::SpecStrict => "spec-strict",
        Profile::TsSdk => "ts-sdk-1.32.2",
        Profile::PythonSdk => "python-mcp-1.30.0",
    }
}
