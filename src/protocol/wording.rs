//! The one table of human-readable phrasings the MCP adapters read, and the only place they
//! read message text at all.
//!
//! The protocol gives a JSON-RPC code or a structure for most answers, and the adapters decide by
//! that. Text matters only where the code is shared by outcomes the executor must tell apart, and
//! the SDKs say which one it is in words alone:
//! - `tasks/cancel` answers `-32602` both for an unknown task and for a task already terminal
//!   (spec §9): only a phrase in [`PHRASES`] decides; anything else is an `Error` the core
//!   resolves by reading the task.
//! - `tools/call` errors mean "refused before anything ran" by their code (`-32700`, `-32600`,
//!   `-32601`, `-32602`), except the TS SDK's `-32602` sent *after* the tool ran; an `isError`
//!   result is the tool's outcome, except the SDKs' refusals (augmentation mismatch, unknown
//!   tool) sent as tool results.
//! - `tasks/result` answers `-32603` both for a failed task's own error and for the TS SDK's
//!   "no result stored" of a cancelled task.
//! - `tasks/get` answers `-32602` for an unknown task (spec §9), except the SDKs' complaints
//!   about the request's own shape (Python's "Invalid request parameters", rmcp's `_meta`).
//!
//! A phrase matches the whole message, never a substring: "Task not found (already deleted)"
//! is neither "not found" nor "already terminal". Placeholders: `{id}` (a task id) and `{name}`
//! (a tool name) are one or more characters without whitespace; `{status}` is `completed`,
//! `failed` or `cancelled`; `{rest}` is anything, and only ends a pattern. The TS SDK prefixes
//! every `McpError` with `MCP error <code>: ` (src/types.ts:2313), so its rows carry that prefix
//! verbatim.
//!
//! Sources: TS = `@modelcontextprotocol/sdk` 1.32.2 (the recorded servers; the code lines are
//! those of tag v1.29.0, the newest 1.x source at hand, whose texts the 1.32.2 transcripts
//! show unchanged), PY = `mcp` 1.30.0 (source lines of tag v1.29.0, likewise), rmcp = `rmcp`
//! 3.11.0, spec = MCP 2025-11-25 documentation examples. Transcripts are
//! `tests/data/transcripts/<server>/<file>` and their `seq` numbers.

/// What a matched phrase tells the adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    /// `tools/call`: the server refused before running anything.
    CallRefused,
    /// `tools/call`: the tool ran (or may have), then the server answered without a task.
    CallRanNoTask,
    /// `tasks/cancel`: the task is already terminal.
    CancelTerminal,
    /// The task id is unknown, expired or deleted.
    TaskNotFound,
    /// `tasks/result`: the task ended with no stored result (the TS SDK, for a cancelled task).
    NoResultStored,
    /// `-32602` about the request's own shape: the server did not act on it (a `tools/call` so
    /// answered was refused), and it says nothing about a task.
    RequestShape,
}

/// Where a phrase appears: as a JSON-RPC error message (with its code) or as the text of a
/// `CallToolResult` with `isError: true`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carrier {
    Error(i64),
    ToolResultText,
}

pub struct Phrase {
    pub meaning: Meaning,
    pub carrier: Carrier,
    pub pattern: &'static str,
    pub source: &'static str,
}

impl Meaning {
    pub fn name(self) -> &'static str {
        match self {
            Meaning::CallRefused => "call refused (nothing ran)",
            Meaning::CallRanNoTask => "call ran, no task (outcome unknown)",
            Meaning::CancelTerminal => "cancel: already terminal",
            Meaning::TaskNotFound => "task not found",
            Meaning::NoResultStored => "no result stored",
            Meaning::RequestShape => "request malformed (not acted on; not about a task)",
        }
    }
}

impl Carrier {
    pub fn name(self) -> String {
        match self {
            Carrier::Error(code) => format!("error {code}"),
            Carrier::ToolResultText => "isError tool result".into(),
        }
    }
}

const fn phrase(
    meaning: Meaning,
    carrier: Carrier,
    pattern: &'static str,
    source: &'static str,
) -> Phrase {
    Phrase {
        meaning,
        carrier,
        pattern,
        source,
    }
}

use Carrier::{Error as E, ToolResultText as TEXT};
use Meaning::*;

/// Every phrasing the adapters act on, with its source. Adding a row is a decision: it needs an
/// SDK, version and source line or transcript line.
pub const PHRASES: &[Phrase] = &[
    // tools/call: the tool ran, then no task came back.
    phrase(CallRanNoTask, E(-32602), "MCP error -32602: Invalid task creation result: {rest}",
        "TS: Server wraps tools/call and validates the handler's result after running it (src/server/index.ts:272); ts-sdk-1.32.2/10-augmentation-edges seq 12 (forbidden tool, ran), seq 20 (unknown tool); server-everything-2026.8.31/E1 seq 52"),
    phrase(CallRanNoTask, E(-32602), "MCP error -32602: Invalid tools/call result: {rest}",
        "TS: the same wrapper, for a plain call whose result fails validation after running (src/server/index.ts:282)"),
    // tools/call: refused before running, as a JSON-RPC error (also refusals by code alone).
    phrase(RequestShape, E(-32602), "MCP error -32602: Invalid tools/call request: {rest}",
        "TS: the wrapper validates the request before calling the handler (src/server/index.ts:257)"),
    phrase(RequestShape, E(-32602), "Invalid request parameters",
        "PY: request validation before dispatch, for every method (src/mcp/shared/session.py:390); python-mcp-1.30.0/06-unknown-task seq 22 (tasks/get without taskId)"),
    phrase(CallRefused, E(-32602), "Unknown tool: {name}",
        "spec: server/tools.mdx, example protocol error for an unknown tool"),
    phrase(CallRefused, E(-32602), "unknown tool: {name}", "rmcp: rmcp-3.11.0/tasks-extension-stdio seq 130"),
    // tools/call: refused before running, sent as a tool result with isError.
    phrase(CallRefused, TEXT, "MCP error -32601: Tool {name} requires task augmentation (taskSupport: 'required')",
        "TS: McpServer checks taskSupport before running (src/server/mcp.ts:203) and turns the McpError into a tool result (mcp.ts:230); ts-sdk-1.32.2/10-augmentation-edges seq 8; server-everything-2026.8.31/E1 seq 47"),
    phrase(CallRefused, TEXT, "MCP error -32602: Tool {name} not found",
        "TS: McpServer, unknown tool, before running (src/server/mcp.ts:181), as a tool result (mcp.ts:230)"),
    phrase(CallRefused, TEXT, "This tool requires task-augmented invocation",
        "PY: validate_task_mode before running (src/mcp/server/experimental/request_context.py:106); python-mcp-1.30.0/10-augmentation-edges seq 8"),
    phrase(CallRefused, TEXT, "This tool does not support task-augmented invocation",
        "PY: validate_task_mode before running (request_context.py:111); python-mcp-1.30.0/10-augmentation-edges seq 12"),
    phrase(CallRefused, TEXT, "Unknown tool: {name}",
        "PY probe app (the SDK's example servers use the same text; the spec's unknown-tool example); python-mcp-1.30.0/10-augmentation-edges seq 20"),
    // tasks/cancel on a terminal task.
    phrase(CancelTerminal, E(-32602), "MCP error -32602: Cannot cancel task in terminal status: {status}",
        "TS: tasks/cancel handler (src/shared/protocol.ts:514); ts-sdk-1.32.2/05-cancel-completed seq 20, 04-cancel-running seq 26; server-everything-2026.8.31/E3 seq 22"),
    phrase(CancelTerminal, E(-32602), "Cannot cancel task in terminal state '{status}'",
        "PY: cancel_task (src/mcp/shared/experimental/tasks/helpers.py:96); python-mcp-1.30.0/05-cancel-completed seq 20, 04-cancel-running seq 26"),
    phrase(CancelTerminal, E(-32602), "Cannot cancel task: already in terminal status '{status}'",
        "spec: basic/utilities/tasks.mdx, example 'Task cancellation rejected (already terminal)'"),
    // Unknown, expired or deleted task.
    phrase(TaskNotFound, E(-32602), "MCP error -32602: Failed to retrieve task: Task not found",
        "TS: tasks/get (src/shared/protocol.ts:388); ts-sdk-1.32.2/06-unknown-task seq 8; server-everything-2026.8.31/E3 seq 37"),
    phrase(TaskNotFound, E(-32602), "MCP error -32602: Task not found: {id}",
        "TS: tasks/result, tasks/cancel (src/shared/protocol.ts:451, :509); ts-sdk-1.32.2/06-unknown-task seq 11, 14; 11-cross-session seq 18"),
    phrase(TaskNotFound, E(-32602), "Task not found: {id}",
        "PY: tasks/get, tasks/result, tasks/cancel (src/mcp/shared/experimental/tasks/helpers.py:88); python-mcp-1.30.0/06-unknown-task seq 8, 11, 14; 09-ttl-expiry seq 24"),
    phrase(TaskNotFound, E(-32602), "Failed to retrieve task: Task not found",
        "spec: basic/utilities/tasks.mdx, example 'Task not found'"),
    phrase(TaskNotFound, E(-32602), "Failed to retrieve task: Task has expired",
        "spec: basic/utilities/tasks.mdx, example 'Task expired'"),
    phrase(TaskNotFound, E(-32602), "unknown task: {id}",
        "rmcp: tasks/get, tasks/cancel, tasks/update; rmcp-3.11.0/tasks-extension-stdio seq 113, 116, 119, 208"),
    // tasks/result of a task without a stored result.
    phrase(NoResultStored, E(-32603), "Task {id} has no result stored",
        "TS: InMemoryTaskStore.getTaskResult (src/experimental/tasks/stores/in-memory.ts:129); ts-sdk-1.32.2/04-cancel-running seq 22; server-everything-2026.8.31/E3 seq 27"),
    phrase(RequestShape, E(-32602), "request _meta is missing or has malformed required fields: {rest}",
        "rmcp: 2026-07-28 request without client capabilities; rmcp-3.11.0/tasks-extension-stdio seq 177"),
];

/// The meaning of a JSON-RPC error, if its code and whole message are a phrase of the table.
pub(super) fn error_meaning(code: i64, message: &str) -> Option<Meaning> {
    lookup(Carrier::Error(code), message)
}

/// The meaning of an `isError` tool result's text, if it is a phrase of the table.
pub(super) fn tool_text_meaning(text: &str) -> Option<Meaning> {
    lookup(Carrier::ToolResultText, text)
}

fn lookup(carrier: Carrier, text: &str) -> Option<Meaning> {
    PHRASES
        .iter()
        .find(|p| p.carrier == carrier && matches(p.pattern, text))
        .map(|p| p.meaning)
}

const TERMINAL_STATUSES: [&str; 3] = ["completed", "failed", "cancelled"];

/// Whether `text` is exactly `pattern` with its placeholders filled (module docs).
fn matches(pattern: &str, text: &str) -> bool {
    let Some(open) = pattern.find('{') else {
        return pattern == text;
    };
    let (literal, after) = pattern.split_at(open);
    let Some(rest_of_text) = text.strip_prefix(literal) else {
        return false;
    };
    // The table's patterns are constants: a broken one is a programmer error.
    let close = after.find('}').expect("placeholder closes");
    let (placeholder, pattern_tail) = (&after[1..close], &after[close + 1..]);
    match placeholder {
        "rest" => {
            assert!(pattern_tail.is_empty(), "{{rest}} ends a pattern");
            true
        }
        "status" => TERMINAL_STATUSES.iter().any(|s| {
            rest_of_text
                .strip_prefix(s)
                .is_some_and(|tail| matches(pattern_tail, tail))
        }),
        "id" | "name" => {
            // One token: every split point inside the leading run of non-whitespace.
            let token_len = rest_of_text
                .find(char::is_whitespace)
                .unwrap_or(rest_of_text.len());
            (1..=token_len)
                .filter(|n| rest_of_text.is_char_boundary(*n))
                .any(|n| matches(pattern_tail, &rest_of_text[n..]))
        }
        other => panic!("unknown placeholder {{{other}}} in the wording table"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_a_source_and_matches_an_instance_of_itself() {
        for p in PHRASES {
            assert!(!p.source.is_empty(), "{}", p.pattern);
            let instance = p
                .pattern
                .replace("{rest}", "[\n  {\"x\": 1}\n]")
                .replace("{status}", "completed")
                .replace("{id}", "c428679a:3dd87b10-689e")
                .replace("{name}", "build_report");
            let found = match p.carrier {
                Carrier::Error(code) => error_meaning(code, &instance),
                Carrier::ToolResultText => tool_text_meaning(&instance),
            };
            assert_eq!(found, Some(p.meaning), "{instance}");
        }
    }

    #[test]
    fn whole_messages_only() {
        assert_eq!(
            error_meaning(-32602, "Task not found: abc"),
            Some(TaskNotFound)
        );
        // The brief's examples: a substring reading would call these "not found"/"terminal".
        assert_eq!(
            error_meaning(-32602, "Task not found (already deleted)"),
            None
        );
        assert_eq!(
            error_meaning(-32602, "task q9Zr2w is already cancelled"),
            None
        );
        assert_eq!(
            error_meaning(-32603, "upstream returned no result stored in cache"),
            None
        );
        assert_eq!(
            error_meaning(-32603, "Task t1 has no result stored yet"),
            None
        );
        assert_eq!(
            error_meaning(-32603, "Task t1 has no result stored"),
            Some(NoResultStored)
        );
        // The code is part of the phrase.
        assert_eq!(error_meaning(-32603, "Task not found: abc"), None);
        assert_eq!(error_meaning(-32602, "Task t1 has no result stored"), None);
        // Placeholders: one token, a terminal status word, anything at the end.
        assert_eq!(error_meaning(-32602, "Task not found: "), None);
        assert_eq!(error_meaning(-32602, "Task not found: a b"), None);
        assert_eq!(
            error_meaning(-32602, "Cannot cancel task in terminal state 'working'"),
            None
        );
        assert_eq!(
            error_meaning(-32602, "Cannot cancel task in terminal state 'failed'"),
            Some(CancelTerminal)
        );
        assert_eq!(
            error_meaning(-32602, "MCP error -32602: Invalid task creation result: "),
            Some(CallRanNoTask)
        );
        assert_eq!(
            error_meaning(-32602, "Invalid task creation result: [..]"),
            None,
            "TS always prefixes"
        );
        assert_eq!(tool_text_meaning("Tool x requires task augmentation"), None);
        assert_eq!(
            tool_text_meaning(
                "MCP error -32601: Tool a.b-c requires task augmentation (taskSupport: 'required')"
            ),
            Some(CallRefused)
        );
        assert_eq!(
            tool_text_meaning("ünïcode: Task ü has no result stored"),
            None
        );
        assert_eq!(
            error_meaning(-32603, "Task ü has no result stored"),
            Some(NoResultStored)
        );
    }
}
