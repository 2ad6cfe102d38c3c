//! The `ServerHandler`: rmcp's own `TaskManager` does the task work (state, `tasks/get`
//! payloads, `tasks/update` routing, cooperative cancel, TTL); this file only decides task vs
//! synchronous per request, as rmcp's task demo does, and keeps the [`Book`] informed.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    GetTaskParams, GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{json, Map, Value};

use crate::book::Book;
use crate::tools::{Call, Env, ToolName};

/// `_meta` key under which toolop sends its submission key (`src/protocol/mod.rs`).
pub const META_IDEMPOTENCY_KEY: &str = "io.toolop/idempotency-key";
/// The capability (under `experimental`) a server advertises when it deduplicates by that key.
pub const EXT_IDEMPOTENCY: &str = "io.toolop/idempotency";

#[derive(Debug, Clone)]
pub struct Settings {
    /// `ttlMs` of every task; `None` is unlimited retention.
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: u64,
    /// Answer a repeated idempotency key with the task it created (and advertise it).
    pub dedupe_by_key: bool,
}

/// One per process. Cloned into every connection (and, over HTTP, every session) so all of them
/// share one task store: a task created on one session can be polled from another, which is
/// what rmcp's `TaskManager` does when a server shares it (rmcp binds nothing to sessions).
#[derive(Clone)]
pub struct Peer {
    pub tasks: TaskManager,
    pub book: Arc<Book>,
    pub settings: Arc<Settings>,
}

/// How a `tasks/update` or `tasks/cancel` went, for the record (rmcp fails them only for an
/// unknown task).
fn ack_label(outcome: &Result<(), McpError>) -> &'static str {
    if outcome.is_ok() {
        "ack"
    } else {
        "unknown-task"
    }
}

fn idempotency_key(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .meta
        .get(META_IDEMPOTENCY_KEY)
        .and_then(Value::as_str)
        .map(str::to_string)
}

impl Peer {
    fn task_options(&self) -> TaskOptions {
        TaskOptions::new()
            .with_ttl_ms(self.settings.ttl_ms)
            .with_poll_interval_ms(self.settings.poll_interval_ms)
    }

    fn run_sync_stats(&self) -> CallToolResult {
        let snapshot = self.book.snapshot();
        let mut result = CallToolResult::structured(snapshot);
        // The structured content is also the text block, so a client that reads only text
        // gets the same JSON.
        result.is_error = Some(false);
        result
    }

    async fn run_sync(
        &self,
        tool: ToolName,
        job: Call,
        key: Option<String>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let can_elicit = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let env = Env::Sync {
            peer: context.peer.clone(),
            cancel: context.ct.clone(),
            can_elicit,
        };
        let outcome = job.run(env).await;
        let label = match &outcome {
            Ok(r) if r.is_error == Some(true) => "isError",
            Ok(_) => "ok",
            Err(TaskExit::Cancelled) => "cancelled",
            Err(TaskExit::Error(_)) => "error",
        };
        self.book.sync_run(tool.as_str(), key.as_deref(), label);
        match outcome {
            Ok(result) => Ok(CallToolResponse::Complete(result)),
            Err(TaskExit::Error(e)) => Err(e),
            Err(TaskExit::Cancelled) => Err(McpError::internal_error(
                format!("{}: cancelled", tool.as_str()),
                None,
            )),
        }
    }
}

impl ServerHandler for Peer {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tool = ToolName::parse(&request.name).ok_or_else(|| {
            McpError::invalid_params(format!("unknown tool: {}", request.name), None)
        })?;
        let Some(job) = Call::parse(tool, request.arguments)? else {
            return Ok(CallToolResponse::Complete(self.run_sync_stats()));
        };
        let key = idempotency_key(&context);
        // SEP-2663: the server decides per request, and must not answer with a task unless the
        // request (or, failing a per-request declaration, the session) declared the extension.
        let tasks_declared = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if !(tasks_declared && tool.runs_as_task()) {
            return self.run_sync(tool, job, key, context).await;
        }
        let options = self.task_options();
        let manager = self.tasks.clone();
        let task = self.book.create_task(
            tool.as_str(),
            key.as_deref(),
            self.settings.dedupe_by_key,
            &self.tasks,
            || manager.spawn(options, move |ctx| Box::pin(job.run(Env::Task(ctx)))),
        );
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            ToolName::ALL.iter().map(|t| t.descriptor()).collect(),
        ))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let detailed = self.tasks.get_task(&request.task_id);
        // Record what the client is about to see before it sees it.
        self.book.observe(&self.tasks, &request.task_id);
        Ok(GetTaskResult::new(detailed?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let keys = request.input_responses.keys().cloned().collect();
        let outcome = self
            .tasks
            .update_task(&request.task_id, request.input_responses);
        self.book
            .update(&request.task_id, keys, ack_label(&outcome));
        self.book.observe(&self.tasks, &request.task_id);
        outcome
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let outcome = self.tasks.cancel_task(&request.task_id);
        self.book
            .cancel_requested(&request.task_id, ack_label(&outcome));
        self.book.observe(&self.tasks, &request.task_id);
        outcome
    }

    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build();
        if self.settings.dedupe_by_key {
            let mut idempotency = Map::new();
            if let Some(ttl_ms) = self.settings.ttl_ms {
                // A key is honoured while its task is retained: at least the ttl.
                idempotency.insert("retentionMs".into(), json!(ttl_ms));
            }
            capabilities.experimental = Some(
                [(EXT_IDEMPOTENCY.to_string(), idempotency)]
                    .into_iter()
                    .collect(),
            );
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolop-rmcp-peer", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "tasks-extension interop peer on rmcp 3.11.0. Tools run as tasks when the request declares the \
                 io.modelcontextprotocol/tasks client capability.",
            )
    }
}
