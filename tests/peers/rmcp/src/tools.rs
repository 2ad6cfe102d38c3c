//! The tool catalogue and the tool bodies. Each body runs the same way as a task (under rmcp's
//! `TaskManager`) and synchronously (the client did not declare the tasks extension): the
//! [`Env`] hides the difference (cancel signal, status message, asking for input).
//!
//! Names, arguments and texts follow the rmcp probe server of
//! `shared/spec/transcripts/rmcp-3.11.0/tasks-extension-stdio.jsonl`, so a replay of that
//! transcript against this peer differs only in ids and timestamps.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitationAction,
    InputRequest, JsonObject, Tool,
};
use rmcp::service::{Peer, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit};
use rmcp::ErrorData as McpError;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Upper bound on every delay a caller can ask for: a typo must not park a tool for a week.
pub const MAX_DELAY_MS: u64 = 600_000;
/// Upper bound on `cancellable` steps (one second each).
pub const MAX_STEPS: u64 = 600;
/// The key of the one input request `needs_input` makes (as in the transcript).
pub const INPUT_KEY: &str = "answer-1";

fn default_sum_delay_ms() -> u64 {
    2000
}
fn default_delay_ms() -> u64 {
    1000
}
fn default_seconds() -> u64 {
    10
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlowSumArgs {
    /// First addend.
    pub a: f64,
    /// Second addend.
    pub b: f64,
    /// Delay before the result, in milliseconds.
    #[serde(default = "default_sum_delay_ms")]
    pub delay_ms: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DelayArgs {
    /// Delay in milliseconds before the tool ends.
    #[serde(default = "default_delay_ms")]
    pub delay_ms: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancellableArgs {
    /// Number of 1-second work steps.
    #[serde(default = "default_seconds")]
    pub seconds: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The tools this server offers, in `tools/list` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ToolName {
    SlowSum,
    FailingJob,
    ToolError,
    NeedsInput,
    Cancellable,
    IgnoresCancel,
    Stats,
}

impl ToolName {
    pub const ALL: [ToolName; 7] = [
        ToolName::SlowSum,
        ToolName::FailingJob,
        ToolName::ToolError,
        ToolName::NeedsInput,
        ToolName::Cancellable,
        ToolName::IgnoresCancel,
        ToolName::Stats,
    ];

    pub fn parse(name: &str) -> Option<ToolName> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::SlowSum => "slow_sum",
            ToolName::FailingJob => "failing_job",
            ToolName::ToolError => "tool_error",
            ToolName::NeedsInput => "needs_input",
            ToolName::Cancellable => "cancellable",
            ToolName::IgnoresCancel => "ignores_cancel",
            ToolName::Stats => "stats",
        }
    }

    /// `stats` reads this server's own record; it never becomes a task and is never counted.
    pub fn runs_as_task(self) -> bool {
        self != ToolName::Stats
    }

    fn description(self) -> &'static str {
        match self {
            ToolName::SlowSum => {
                "Returns the text of a+b after delay_ms (default 2000). As a task: ends completed. Honours tasks/cancel at once."
            }
            ToolName::FailingJob => {
                "After delay_ms (default 1000) ends with a JSON-RPC error (-32603). As a task: ends failed with the error inlined."
            }
            ToolName::ToolError => {
                "After delay_ms (default 1000) returns a CallToolResult with isError:true. As a task: ends completed."
            }
            ToolName::NeedsInput => {
                "After delay_ms (default 1000) asks for input with an elicitation/create form request (task: input_required + tasks/update; sync: a real elicitation/create if the client declared elicitation), then completes with the answer."
            }
            ToolName::Cancellable => {
                "Works in 1-second steps (seconds, default 10) and checks for tasks/cancel after each step; ends cancelled if asked to stop."
            }
            ToolName::IgnoresCancel => {
                "Sleeps delay_ms (default 1000) and ignores tasks/cancel: acks the cancel but still ends completed."
            }
            ToolName::Stats => {
                "This server's own record: task creations per io.toolop/idempotency-key, synchronous runs, every task's status. Never a task."
            }
        }
    }

    fn input_schema(self) -> Arc<JsonObject> {
        use rmcp::handler::server::tool::schema_for_type;
        match self {
            ToolName::SlowSum => schema_for_type::<SlowSumArgs>(),
            ToolName::FailingJob
            | ToolName::ToolError
            | ToolName::NeedsInput
            | ToolName::IgnoresCancel => schema_for_type::<DelayArgs>(),
            ToolName::Cancellable => schema_for_type::<CancellableArgs>(),
            ToolName::Stats => schema_for_type::<NoArgs>(),
        }
    }

    pub fn descriptor(self) -> Tool {
        Tool::new(self.as_str(), self.description(), self.input_schema())
    }
}

/// A tool call whose arguments have been checked: built before any task exists, so bad
/// arguments are a JSON-RPC -32602 and never a task.
#[derive(Debug)]
pub enum Call {
    SlowSum(SlowSumArgs),
    FailingJob(DelayArgs),
    ToolError(DelayArgs),
    NeedsInput(DelayArgs),
    Cancellable(CancellableArgs),
    IgnoresCancel(DelayArgs),
}

fn args<T: for<'de> Deserialize<'de>>(
    tool: ToolName,
    arguments: Option<JsonObject>,
) -> Result<T, McpError> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default())).map_err(|e| {
        McpError::invalid_params(format!("{}: bad arguments: {e}", tool.as_str()), None)
    })
}

fn bounded_delay(tool: ToolName, delay_ms: u64) -> Result<u64, McpError> {
    if delay_ms > MAX_DELAY_MS {
        return Err(McpError::invalid_params(
            format!(
                "{}: delay_ms {delay_ms} is above the limit of {MAX_DELAY_MS}",
                tool.as_str()
            ),
            None,
        ));
    }
    Ok(delay_ms)
}

impl Call {
    /// `None` for `stats`, which is not a job.
    pub fn parse(tool: ToolName, arguments: Option<JsonObject>) -> Result<Option<Call>, McpError> {
        let job = match tool {
            ToolName::SlowSum => {
                let a: SlowSumArgs = args(tool, arguments)?;
                bounded_delay(tool, a.delay_ms)?;
                Call::SlowSum(a)
            }
            ToolName::FailingJob
            | ToolName::ToolError
            | ToolName::NeedsInput
            | ToolName::IgnoresCancel => {
                let a: DelayArgs = args(tool, arguments)?;
                bounded_delay(tool, a.delay_ms)?;
                match tool {
                    ToolName::FailingJob => Call::FailingJob(a),
                    ToolName::ToolError => Call::ToolError(a),
                    ToolName::NeedsInput => Call::NeedsInput(a),
                    _ => Call::IgnoresCancel(a),
                }
            }
            ToolName::Cancellable => {
                let a: CancellableArgs = args(tool, arguments)?;
                if a.seconds > MAX_STEPS {
                    return Err(McpError::invalid_params(
                        format!(
                            "cancellable: seconds {} is above the limit of {MAX_STEPS}",
                            a.seconds
                        ),
                        None,
                    ));
                }
                Call::Cancellable(a)
            }
            ToolName::Stats => {
                let _: NoArgs = args(tool, arguments)?;
                return Ok(None);
            }
        };
        Ok(Some(job))
    }

    /// Runs the tool body. `Ok` is a `CallToolResult` (maybe `isError`), `Err(Error)` a JSON-RPC
    /// error, `Err(Cancelled)` a cooperative stop.
    pub async fn run(self, env: Env) -> Result<CallToolResult, TaskExit> {
        match self {
            Call::SlowSum(a) => {
                tokio::select! {
                    biased;
                    _ = env.cancelled() => Err(TaskExit::Cancelled),
                    _ = sleep_ms(a.delay_ms) => Ok(text_result(format_sum(a.a + a.b))),
                }
            }
            Call::FailingJob(a) => {
                sleep_ms(a.delay_ms).await;
                Err(TaskExit::Error(McpError::internal_error(
                    format!("failing_job: deliberate failure after {} ms", a.delay_ms),
                    Some(json!({ "tool": "failing_job", "delayMs": a.delay_ms })),
                )))
            }
            Call::ToolError(a) => {
                sleep_ms(a.delay_ms).await;
                Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "tool_error: deliberate tool-level error after {} ms",
                    a.delay_ms
                ))]))
            }
            Call::NeedsInput(a) => {
                sleep_ms(a.delay_ms).await;
                match env.ask_for_answer().await? {
                    Answer::Given(answer) => {
                        env.set_status("input received");
                        Ok(text_result(format!("needs_input: got answer: {answer}")))
                    }
                    Answer::Refused(action) => Ok(CallToolResult::error(vec![ContentBlock::text(
                        format!("needs_input: no answer (action {action})"),
                    )])),
                }
            }
            Call::Cancellable(a) => {
                for step in 1..=a.seconds {
                    env.set_status(format!("step {step}/{}", a.seconds));
                    sleep_ms(1000).await;
                    if env.cancel_requested() {
                        return Err(TaskExit::Cancelled);
                    }
                }
                Ok(text_result(format!(
                    "cancellable: finished {} steps",
                    a.seconds
                )))
            }
            Call::IgnoresCancel(a) => {
                sleep_ms(a.delay_ms).await;
                let text = if env.cancel_requested() {
                    "ignores_cancel: done (a cancel was requested and ignored)"
                } else {
                    "ignores_cancel: done"
                };
                Ok(text_result(text.to_string()))
            }
        }
    }
}

/// `2+40` prints `42`, `1.5+2` prints `3.5` (as the transcript's probe did).
fn format_sum(sum: f64) -> String {
    if sum.fract() == 0.0 && sum.abs() < 1e15 {
        format!("{}", sum as i64)
    } else {
        format!("{sum}")
    }
}

fn text_result(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// What a tool body can do besides computing: see a cancel, report progress, ask for input.
pub enum Env {
    /// Running under rmcp's `TaskManager`: `tasks/cancel`, `statusMessage`, `inputRequests`.
    Task(TaskContext),
    /// A synchronous `tools/call`: `notifications/cancelled` for the request, and a real
    /// server-to-client `elicitation/create` if the client declared `elicitation`.
    Sync {
        peer: Peer<RoleServer>,
        cancel: CancellationToken,
        can_elicit: bool,
    },
}

enum Answer {
    Given(String),
    Refused(String),
}

impl Env {
    async fn cancelled(&self) {
        match self {
            Env::Task(ctx) => ctx.cancelled().await,
            Env::Sync { cancel, .. } => cancel.cancelled().await,
        }
    }

    fn cancel_requested(&self) -> bool {
        match self {
            Env::Task(ctx) => ctx.is_cancel_requested(),
            Env::Sync { cancel, .. } => cancel.is_cancelled(),
        }
    }

    fn set_status(&self, message: impl Into<String>) {
        if let Env::Task(ctx) = self {
            ctx.set_status_message(message);
        }
    }

    async fn ask_for_answer(&self) -> Result<Answer, TaskExit> {
        let params = elicitation_params();
        let reply: Value = match self {
            Env::Task(ctx) => {
                ctx.set_status_message(format!("waiting for input: {INPUT_KEY}"));
                ctx.request_input(
                    INPUT_KEY,
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                )
                .await?
            }
            Env::Sync {
                can_elicit: false, ..
            } => {
                return Ok(Answer::Refused(
                    "none: the client did not declare elicitation".into(),
                ))
            }
            Env::Sync { peer, .. } => {
                let result = peer.create_elicitation(params).await.map_err(|e| {
                    TaskExit::Error(McpError::internal_error(
                        format!("needs_input: elicitation failed: {e}"),
                        None,
                    ))
                })?;
                serde_json::to_value(result).unwrap_or(Value::Null)
            }
        };
        Ok(read_answer(&reply))
    }
}

fn elicitation_params() -> ElicitRequestParams {
    let schema = json!({
        "type": "object",
        "properties": { "answer": { "type": "string", "description": "Any text" } },
        "required": ["answer"],
    });
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "needs_input: please provide an answer".into(),
        requested_schema: serde_json::from_value(schema)
            .expect("a constant, valid elicitation schema"),
    }
}

/// An `ElicitResult` as the client sent it (the task path hands over raw JSON). Anything but an
/// accepted string answer is a refusal, reported in the tool result rather than guessed at.
fn read_answer(reply: &Value) -> Answer {
    let action: Option<ElicitationAction> = reply
        .get("action")
        .and_then(|a| serde_json::from_value(a.clone()).ok());
    match (
        action,
        reply.pointer("/content/answer").and_then(Value::as_str),
    ) {
        (Some(ElicitationAction::Accept), Some(answer)) => Answer::Given(answer.to_string()),
        (Some(ElicitationAction::Accept), None) => {
            Answer::Refused("accept without a string \"answer\"".into())
        }
        (Some(ElicitationAction::Decline), _) => Answer::Refused("decline".into()),
        (Some(ElicitationAction::Cancel), _) => Answer::Refused("cancel".into()),
        (Some(other), _) => Answer::Refused(serde_json::to_string(&other).unwrap_or_default()),
        (None, _) => Answer::Refused(format!("unreadable response {reply}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_print_like_the_transcript() {
        assert_eq!(format_sum(42.0), "42");
        assert_eq!(format_sum(3.5), "3.5");
        assert_eq!(format_sum(-1.0), "-1");
    }

    #[test]
    fn every_tool_name_round_trips() {
        for t in ToolName::ALL {
            assert_eq!(ToolName::parse(t.as_str()), Some(t));
        }
        assert_eq!(ToolName::parse("no_such_tool"), None);
    }

    #[test]
    fn answers_are_read_strictly() {
        let given = read_answer(&json!({"action": "accept", "content": {"answer": "x"}}));
        assert!(matches!(given, Answer::Given(a) if a == "x"));
        assert!(matches!(
            read_answer(&json!({"action": "accept", "content": {"answer": 1}})),
            Answer::Refused(_)
        ));
        assert!(
            matches!(read_answer(&json!({"action": "decline"})), Answer::Refused(a) if a == "decline")
        );
        assert!(matches!(
            read_answer(&json!({"nope": 1})),
            Answer::Refused(_)
        ));
    }

    #[test]
    fn limits_refuse_before_anything_runs() {
        let big = serde_json::from_value(json!({"delay_ms": MAX_DELAY_MS + 1})).unwrap();
        assert!(Call::parse(ToolName::FailingJob, Some(big)).is_err());
        let steps = serde_json::from_value(json!({"seconds": MAX_STEPS + 1})).unwrap();
        assert!(Call::parse(ToolName::Cancellable, Some(steps)).is_err());
        let bad = serde_json::from_value(json!({"a": "x", "b": 1})).unwrap();
        assert!(Call::parse(ToolName::SlowSum, Some(bad)).is_err());
        assert!(Call::parse(ToolName::Stats, None).unwrap().is_none());
    }
}
