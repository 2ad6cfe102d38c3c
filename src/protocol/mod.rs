//! Protocol adapters: the only code that knows a wire format. Everything an adapter hands to
//! the rest of the executor is protocol-neutral ([`Reply`], [`Inbound`], [`InputRequest`]):
//! no JSON-RPC error code or HTTP status leaves this module tree.

pub mod aip151;
mod jsonrpc;
pub mod mcp_2025_11_25;
pub mod mcp_tasks_ext;
pub mod wording;

/// "a string", "an object" ...: how error texts name a JSON value's kind.
pub(crate) use jsonrpc::type_name;

use std::collections::BTreeMap;

use crate::record::{AdapterId, ProtocolStatus};
use crate::transport::InFrame;

/// `_meta` key under which toolop sends the submission idempotency key. A server that advertises
/// [`EXT_IDEMPOTENCY`] deduplicates submissions by it and answers lookups by it. The key names the
/// submission, task or not: a call the server ran inline (a task-augmented call of a tool that
/// no longer supports tasks, which the TS SDK runs anyway) answers a later submission with the
/// key as it answered the first. The executor relies on it: after a lookup by key finds no task,
/// it submits again (`NOT_FOUND_SAFE`), which must not run the tool a second time.
pub const META_IDEMPOTENCY_KEY: &str = "io.toolop/idempotency-key";
/// Capability (under `capabilities.experimental`) for the idempotency extension.
pub const EXT_IDEMPOTENCY: &str = "io.toolop/idempotency";
/// `_meta` key on a tool result carrying the server's digest of the result content.
pub const META_RESULT_DIGEST: &str = "io.toolop/result-digest";
/// `_meta` key on a tool descriptor: the synchronous upper bound of a tool without task support.
pub const META_SYNC_UPPER_BOUND_MS: &str = "io.toolop/sync-upper-bound-ms";
/// `_meta` key on `tasks/list` params: list only the task created with this key.
pub const META_LOOKUP_KEY: &str = "io.toolop/lookup-key";

/// What the executor wants sent. The adapter turns it into bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Outbound {
    Submit {
        key: String,
        tool: String,
        arguments: serde_json::Value,
        ttl_ms: Option<u64>,
    },
    /// A synchronous call of a tool without task support.
    SubmitSync {
        key: String,
        tool: String,
        arguments: serde_json::Value,
    },
    LookupByKey {
        key: String,
    },
    Poll {
        operation_id: String,
    },
    FetchResult {
        operation_id: String,
    },
    Cancel {
        operation_id: String,
    },
    /// Answer to a server's input request (a JSON-RPC response, not a request).
    InputResponse {
        operation_id: String,
        server_request_id: serde_json::Value,
        reply: ApprovalReply,
    },
}

impl Outbound {
    pub fn kind(&self) -> RequestKind {
        match self {
            Outbound::Submit { .. } => RequestKind::Submit,
            Outbound::SubmitSync { .. } => RequestKind::SubmitSync,
            Outbound::LookupByKey { .. } => RequestKind::Lookup,
            Outbound::Poll { .. } => RequestKind::Poll,
            Outbound::FetchResult { .. } => RequestKind::Fetch,
            Outbound::Cancel { .. } => RequestKind::Cancel,
            Outbound::InputResponse { .. } => RequestKind::InputResponse,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestKind {
    Initialize,
    ListTools,
    Submit,
    SubmitSync,
    Lookup,
    Poll,
    Fetch,
    Cancel,
    /// Expects no reply.
    InputResponse,
}

impl RequestKind {
    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Initialize => "initialize",
            RequestKind::ListTools => "list_tools",
            RequestKind::Submit => "submit",
            RequestKind::SubmitSync => "submit_sync",
            RequestKind::Lookup => "lookup",
            RequestKind::Poll => "poll",
            RequestKind::Fetch => "fetch",
            RequestKind::Cancel => "cancel",
            RequestKind::InputResponse => "input_response",
        }
    }

    /// Whether a reply is awaited (and so a timeout armed).
    pub fn expects_reply(self) -> bool {
        !matches!(self, RequestKind::InputResponse)
    }
}

/// The approval gate's answer to an input request.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ApprovalReply {
    Accept { content: serde_json::Value },
    Decline,
    Cancel,
}

/// A server's view of one operation, protocol-neutral.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskView {
    pub operation_id: String,
    pub status: ProtocolStatus,
    pub poll_interval_ms: Option<u64>,
    /// Retention from creation; `None` when unlimited or omitted (a real-SDK quirk).
    pub ttl_ms: Option<u64>,
    pub status_message: Option<String>,
    /// What was wrong with the advisory fields (`ttl`, `pollInterval`, `statusMessage`), if
    /// anything: a bad hint is dropped (or read as the integer it equals) and named here, never
    /// a reason to lose the task. The runner reports it as an observation.
    pub hint_problem: Option<String>,
}

/// A fetched result, before verification.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultView {
    pub payload: serde_json::Value,
    pub is_error: bool,
    /// The operation id the server tied this result to, if it said.
    pub related_operation_id: Option<String>,
    /// The digest the adapter computed over the payload it received.
    pub digest: String,
    /// Whether the payload was complete and well formed for its protocol, and matched any
    /// digest the server claimed.
    pub verified: bool,
    pub problem: Option<String>,
}

/// A decoded reply to one of our requests.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Submitted(TaskView),
    /// The server refused the submission before running anything; no operation was created.
    SubmitRefused {
        reason: String,
    },
    /// The server answered the submission with an error that may come after the tool ran,
    /// and without a task to follow (the TS SDK's `-32602` "Invalid task creation result" for a
    /// tool that forbids tasks; an error of a code that does not say whether the call ran).
    /// Neither a refusal nor a result: a lookup by key cannot find a run that made no task, so
    /// the core hands the call to manual reconciliation and never submits it again.
    SubmitOutcomeUnknown {
        reason: String,
    },
    /// A synchronous call's result.
    SyncResult(ResultView),
    LookupFound(TaskView),
    LookupNotFound,
    LookupUnsupported,
    Status(TaskView),
    /// The operation id is unknown to the server (never created, expired, or deleted).
    NotFound {
        message: String,
    },
    /// 429 / RESOURCE_EXHAUSTED.
    RateLimited {
        retry_after_ms: Option<u64>,
    },
    /// 503 / UNAVAILABLE.
    Unavailable {
        retry_after_ms: Option<u64>,
    },
    /// Accepted for processing, no content yet (HTTP 202). Never a completion.
    Accepted,
    Result(ResultView),
    /// The fetch answered with the original request's error (a failed operation's result).
    ResultIsError {
        code: i64,
        message: String,
    },
    /// The fetch found no stored result (cancelled tasks: `-32603` or an empty result).
    NoResultStored {
        message: String,
    },
    CancelAcknowledged(TaskView),
    /// The cancel was accepted, but says nothing about the outcome (AIP-151 CancelOperation,
    /// the tasks extension's empty ack): only a later read says who won.
    CancelPending,
    /// Input requests the server inlined in a task read (the tasks extension's `inputRequests`),
    /// in key order. Answered with [`Outbound::InputResponse`], one per request.
    InputRequests(Vec<InputRequest>),
    /// The cancel was refused because the operation is already terminal.
    CancelRejectedTerminal {
        message: String,
    },
    /// Any other protocol error.
    Error {
        message: String,
    },
    Malformed {
        reason: String,
    },
}

impl Reply {
    pub fn name(&self) -> &'static str {
        match self {
            Reply::Submitted(_) => "submitted",
            Reply::SubmitRefused { .. } => "submit_refused",
            Reply::SubmitOutcomeUnknown { .. } => "submit_outcome_unknown",
            Reply::SyncResult(_) => "sync_result",
            Reply::LookupFound(_) => "lookup_found",
            Reply::LookupNotFound => "lookup_not_found",
            Reply::LookupUnsupported => "lookup_unsupported",
            Reply::Status(_) => "status",
            Reply::NotFound { .. } => "not_found",
            Reply::RateLimited { .. } => "rate_limited",
            Reply::Unavailable { .. } => "unavailable",
            Reply::Accepted => "accepted_202",
            Reply::Result(_) => "result",
            Reply::ResultIsError { .. } => "result_is_error",
            Reply::NoResultStored { .. } => "no_result_stored",
            Reply::CancelAcknowledged(_) => "cancel_ack",
            Reply::CancelPending => "cancel_pending",
            Reply::InputRequests(_) => "input_requests",
            Reply::CancelRejectedTerminal { .. } => "cancel_rejected_terminal",
            Reply::Error { .. } => "error",
            Reply::Malformed { .. } => "malformed",
        }
    }

    /// The advisory-field problem of the task view this reply carries, if any.
    pub fn hint_problem(&self) -> Option<&str> {
        match self {
            Reply::Submitted(v)
            | Reply::LookupFound(v)
            | Reply::Status(v)
            | Reply::CancelAcknowledged(v) => v.hint_problem.as_deref(),
            _ => None,
        }
    }
}

/// An input request from the server (e.g. MCP `elicitation/create` tied to a task).
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequest {
    pub server_request_id: serde_json::Value,
    pub related_operation_id: Option<String>,
    pub message: String,
    pub requested_schema: serde_json::Value,
    pub schema_digest: String,
    pub raw: serde_json::Value,
}

/// A request from the server that is not a task's input request. Every one gets an answer:
/// a server left waiting hangs.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerRequest {
    /// The server's JSON-RPC id, echoed verbatim.
    pub id: serde_json::Value,
    pub method: String,
    pub answer: ServerAnswer,
}

/// What the executor answers to a [`ServerRequest`] (README, "Requests from the server").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerAnswer {
    /// An empty result (`ping`).
    Empty,
    /// An elicitation the approval gate cannot serve (URL mode; no task of ours): declined.
    DeclineElicitation,
    /// A method the executor does not serve (`sampling/createMessage`, `roots/list`, ...).
    MethodNotFound,
    /// A request of a method we serve, with parameters we cannot read.
    InvalidParams { message: String },
}

impl ServerAnswer {
    pub fn name(&self) -> &'static str {
        match self {
            ServerAnswer::Empty => "empty_result",
            ServerAnswer::DeclineElicitation => "decline",
            ServerAnswer::MethodNotFound => "method_not_found",
            ServerAnswer::InvalidParams { .. } => "invalid_params",
        }
    }
}

/// What an inbound frame is, before it is matched to a pending request.
#[derive(Clone, Debug, PartialEq)]
pub enum Inbound {
    /// A reply to our request `rpc_id` (from the JSON-RPC id or the transport correlation).
    Response {
        rpc_id: u64,
    },
    InputRequest(InputRequest),
    /// A server request the runner answers at once with [`Adapter::encode_server_answer`].
    ServerRequest(ServerRequest),
    /// The server pushed an operation's status unasked (MCP `notifications/tasks/status`).
    /// Advisory (the executor keeps polling): the runner hands it on only to a node whose cancel
    /// was accepted, where a task shown ending after all needs a person.
    StatusPushed(TaskView),
    /// A notification or server request we do not act on.
    Ignored {
        what: String,
    },
    Malformed {
        reason: String,
    },
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolInfo {
    pub name: String,
    pub task_support: TaskSupport,
    pub sync_upper_bound_ms: Option<u64>,
    /// Digest of the tool descriptor: the tool version a receipt is bound to.
    pub descriptor_digest: String,
}

/// What negotiation established about a server.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServerCapabilities {
    pub protocol_version: String,
    pub tasks_tool_call: bool,
    pub tasks_cancel: bool,
    pub tasks_list: bool,
    /// The server deduplicates submissions by key and answers lookups by key.
    pub idempotency_by_key: bool,
    /// How long the server keeps a key answerable after creation (`retentionMs`); `None` means
    /// for as long as the operation exists. Past it, "not found by key" proves nothing.
    pub idempotency_retention_ms: Option<u64>,
    pub tools: BTreeMap<String, ToolInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One protocol, one version. Object safe so the runner can route by negotiated version.
pub trait Adapter {
    fn id(&self) -> AdapterId;
    fn encode_initialize(&self, rpc_id: u64) -> Vec<u8>;
    /// The notification sent after a successful initialize, if the protocol has one.
    fn encode_initialized(&self) -> Option<Vec<u8>>;
    fn encode_list_tools(&self, rpc_id: u64, cursor: Option<&str>) -> Vec<u8>;
    /// Server capabilities from the initialize reply; an error if the version is not ours.
    fn decode_initialize(&self, frame: &InFrame) -> Result<ServerCapabilities, ProtocolError>;
    /// Tools and the next page cursor from a tools/list reply.
    fn decode_list_tools(
        &self,
        frame: &InFrame,
    ) -> Result<(Vec<ToolInfo>, Option<String>), ProtocolError>;
    fn encode(&self, rpc_id: u64, out: &Outbound) -> Vec<u8>;
    /// The whole frame for `out`. JSON-RPC adapters keep the default; plain-HTTP adapters add
    /// the method and path.
    fn encode_frame(&self, rpc_id: u64, out: &Outbound) -> crate::transport::OutFrame {
        let request_id = out.kind().expects_reply().then_some(rpc_id);
        crate::transport::OutFrame {
            request_id,
            body: self.encode(rpc_id, out),
            http: None,
        }
    }
    /// Capabilities known from configuration, for protocols without a handshake (AIP-151).
    /// `None` means: negotiate (initialize, tools/list).
    fn configured_capabilities(&self) -> Option<ServerCapabilities> {
        None
    }
    fn classify(&self, frame: &InFrame) -> Inbound;
    /// Whether the result is read with the status read's own message (the tasks extension's
    /// `tasks/get`, AIP-151's `GET`): to the server a fetch is then one more status read, and
    /// the interval it suggested between them applies.
    fn fetch_is_status_read(&self) -> bool {
        false
    }
    /// The bytes answering a server request; `None` for protocols without server requests.
    fn encode_server_answer(&self, _request: &ServerRequest) -> Option<Vec<u8>> {
        None
    }
    /// Decode the reply to a request of `kind`. Never panics: bad input is `Reply::Malformed`.
    fn decode_reply(&self, kind: RequestKind, frame: &InFrame) -> Reply;
}
