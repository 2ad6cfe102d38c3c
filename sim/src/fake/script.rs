//! What the world asks a fake server's work to do: the script a call node carries in its tool
//! arguments (`arguments["__sim"]`). Every protocol's codec reads it the same way, so one call
//! node behaves alike whichever protocol carries it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How the scripted work ends.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ScriptOutcome {
    /// A tool result without error.
    #[default]
    Completed,
    /// A tool result marked as an error (`isError: true`; AIP-151: `error` INTERNAL).
    Failed,
    /// The tool call itself fails (MCP: JSON-RPC `-32000`; AIP-151: FAILED_PRECONDITION). No
    /// side effect.
    ToolError,
    /// Done with neither result nor error (AIP-151 only; elsewhere the work completes).
    DoneWithoutResult,
}

/// What a task (or inline run) does. Every field has a default; arguments without `__sim` give
/// [`TaskScript::default`] (1000 ms, completed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskScript {
    /// The call node the world submitted this for; empty when unknown.
    pub call_node: String,
    /// Working time until the work ends.
    pub duration_ms: u64,
    pub outcome: ScriptOutcome,
    /// Result text (or the error message for `tool_error`).
    pub text: String,
    /// Offsets of *working* time at which the task asks for input; offsets at or past
    /// `duration_ms` are ignored, duplicates collapse.
    pub input_at_ms: Vec<u64>,
    /// Number of text blocks in the result. With one block its text is `text`; with `n > 1`
    /// block `i` reads `"<text> [i/n]"`; zero gives no blocks.
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
            Some(v) => {
                TaskScript::deserialize(v).map_err(|e| format!("invalid {}: {e}", Self::ARG_KEY))
            }
        }
    }

    /// A test script: `duration_ms` of work for `node` ending `outcome`, with text `"<node> ok"`.
    #[cfg(test)]
    pub fn for_test(node: &str, duration_ms: u64, outcome: ScriptOutcome) -> TaskScript {
        TaskScript {
            call_node: node.into(),
            duration_ms,
            outcome,
            text: format!("{node} ok"),
            ..TaskScript::default()
        }
    }

    /// Input offsets that fall inside the work, sorted, without duplicates.
    pub fn input_offsets(&self) -> Vec<u64> {
        let mut inputs: Vec<u64> = self
            .input_at_ms
            .iter()
            .copied()
            .filter(|&o| o < self.duration_ms)
            .collect();
        inputs.sort_unstable();
        inputs.dedup();
        inputs
    }

    /// The text of block `i` (1-based) of `n`.
    pub fn block_text(text: &str, i: u32, n: u32) -> String {
        if n == 1 {
            text.to_string()
        } else {
            format!("{text} [{i}/{n}]")
        }
    }
}
