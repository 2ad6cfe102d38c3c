//! The seam between wire formats and the task service. A [`Codec`] turns a client's frame into a
//! protocol-neutral [`Request`] (or answers it itself: handshakes, malformed frames, unknown
//! methods), and turns the service's neutral [`Response`]s and [`Push`]es back into frames. The
//! network sees only [`ExchangeKind`] and the neutral response, never a byte of the wire format.
//!
//! Codecs are written from the protocol texts (`shared/spec/`), apart from the executor's
//! adapters in `src/protocol/`: they import no decoder, no encoder and no wire constant from
//! there, so a misreading of the protocol in an adapter shows as a disagreement with its codec
//! instead of being repeated on both sides.

use serde::Serialize;
use serde_json::Value;
use toolop::protocol::TaskSupport;
use toolop::transport::{InFrame, OutFrame};

use super::script::TaskScript;
use super::service::Policy;
use super::truth::{AnswerAction, TaskStatus};
use crate::trace::Shows;

/// The words of an input round's question, as every codec prints them in the round's requested
/// schema (the description of its one property, `ok`): the approval agent reads them to know
/// which of the server's rounds it is answering, whatever the executor numbered it.
pub fn question_words(task: &str, round: u32) -> String {
    format!("approve round {round} of task {task}")
}

/// The (task, round) that [`question_words`] wrote, if `words` are such words.
pub fn question_of(words: &str) -> Option<(String, u32)> {
    let rest = words.strip_prefix("approve round ")?;
    let (round, task) = rest.split_once(" of task ")?;
    Some((task.to_string(), round.parse().ok()?))
}

/// The requested schema of an input round: one boolean, `ok`, described by the question.
pub fn question_schema(task: &str, round: u32) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean", "description": question_words(task, round)}},
        "required": ["ok"],
    })
}

/// A tool a fake server offers (MCP servers list them; AIP-151 routes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeTool {
    pub name: String,
    /// `execution.taskSupport`; `None` omits `execution` (which means forbidden).
    pub task_support: Option<TaskSupport>,
    /// Advertised as `_meta["io.toolop/sync-upper-bound-ms"]` on the descriptor.
    pub sync_upper_bound_ms: Option<u64>,
}

impl FakeTool {
    pub fn new(name: impl Into<String>, task_support: Option<TaskSupport>) -> FakeTool {
        FakeTool {
            name: name.into(),
            task_support,
            sync_upper_bound_ms: None,
        }
    }
}

/// A request that expects a reply, numbered by the codec that decoded it. The service and the
/// network refer to requests only by this number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct CallId(pub u64);

/// What kind of exchange a frame belongs to: all the fault rules may know about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeKind {
    /// Negotiation and discovery (initialize, tools/list, ping).
    Handshake,
    Submit,
    /// A status read of one operation.
    Poll,
    /// A result read of one operation.
    Fetch,
    Cancel,
    /// The client's answer to an input request.
    Answer,
    /// Find an operation by the submission key.
    Lookup,
    List,
    Delete,
    /// A request the server sends the client (an input request).
    ServerRequest,
    /// A notification from the server.
    Notification,
    /// Anything else (malformed frames, unknown methods, client notifications).
    Other,
}

impl ExchangeKind {
    pub fn name(self) -> &'static str {
        match self {
            ExchangeKind::Handshake => "handshake",
            ExchangeKind::Submit => "submit",
            ExchangeKind::Poll => "poll",
            ExchangeKind::Fetch => "fetch",
            ExchangeKind::Cancel => "cancel",
            ExchangeKind::Answer => "answer",
            ExchangeKind::Lookup => "lookup",
            ExchangeKind::List => "list",
            ExchangeKind::Delete => "delete",
            ExchangeKind::ServerRequest => "server_request",
            ExchangeKind::Notification => "notification",
            ExchangeKind::Other => "other",
        }
    }
}

/// How the client wants a submission run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunAs {
    /// As a task (operation) the client polls.
    Task,
    /// Inline: the reply is the result, after the work's duration.
    Inline,
    /// Inline, and then the call is refused anyway (TS SDK: `task` sent for a tool that forbids
    /// it: the tool runs, the reply is an error).
    InlineThenRefuse,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Submit {
    pub tool: String,
    pub script: TaskScript,
    pub key: Option<String>,
    /// Whether the server deduplicates by `key`.
    pub dedupe: bool,
    pub run: RunAs,
    /// The retention the client asked for, if any.
    pub requested_ttl_ms: Option<u64>,
}

/// One answer to an input round, as the codec could place it.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerItem {
    /// The rounds the answer may be for: (task id, round), every round the protocol's id names.
    pub candidates: Vec<(String, u32)>,
    /// The task the answer says it is for, when it says (MCP related-task metadata).
    pub prefer_task: Option<String>,
    pub action: AnswerAction,
    pub content: Option<Value>,
}

/// A protocol-neutral request to the task service.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Submit(Submit),
    Poll {
        task: String,
    },
    /// A result read; the service may hold it until the task is terminal.
    Fetch {
        task: String,
    },
    Cancel {
        task: String,
    },
    /// Remove the record; the work goes on (AIP-151 DeleteOperation).
    Delete {
        task: String,
    },
    /// Answers to input rounds; `task`: the task the request names (it must exist), if any.
    Answer {
        task: Option<String>,
        items: Vec<AnswerItem>,
    },
    Lookup {
        key: String,
    },
    List,
}

/// Why work stopped before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    Cancelled,
    Preempted,
    /// Failed by the server's ttl sweep while running ([`super::service::Expiry`]).
    Expired,
}

/// A tool result: `blocks` text blocks made of `text` (see [`TaskScript::block_text`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultBody {
    pub text: String,
    pub blocks: u32,
    pub is_error: bool,
}

/// What a terminal task stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Result(ResultBody),
    ToolError {
        message: String,
    },
    Stopped(Stop),
    /// Done with neither result nor error.
    Nothing,
}

/// What changed a task's status: codecs derive their status messages from this history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    InputAsked,
    Answered,
    /// The work ended and its outcome became visible (`flipped`: after a cancel, the
    /// status-after-cancel quirk).
    Ended {
        outcome: super::script::ScriptOutcome,
        flipped: bool,
    },
    Cancelled,
    Preempted,
    /// The server's ttl sweep failed the running task.
    Expired,
    /// A cancel withdrew the pending input round; the task works until the cancel takes effect.
    InputWithdrawn,
}

/// A task as the service shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView {
    pub id: String,
    pub call_node: String,
    pub tool: String,
    pub status: TaskStatus,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub ttl_ms: Option<u64>,
    /// The script's text (status messages quote it).
    pub text: String,
    pub notes: Vec<Note>,
    /// The stored outcome, once terminal.
    pub outcome: Option<Outcome>,
    /// The pending input round, if the task waits for one.
    pub pending_round: Option<u32>,
    pub deleted: bool,
}

#[cfg(test)]
impl TaskView {
    /// A view for tests: task `id` of node `n1`, tool `report`, created at 0, no ttl.
    pub fn for_test(
        id: &str,
        status: TaskStatus,
        outcome: Option<Outcome>,
        pending_round: Option<u32>,
    ) -> TaskView {
        TaskView {
            id: id.into(),
            call_node: "n1".into(),
            tool: "report".into(),
            status,
            created_at_ms: 0,
            updated_at_ms: 0,
            ttl_ms: None,
            text: "t".into(),
            notes: vec![],
            outcome,
            pending_round,
            deleted: false,
        }
    }
}

/// A 429/503 from something in front of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Throttle {
    RateLimited,
    Unavailable,
}

impl Throttle {
    pub fn http_status(self) -> u16 {
        match self {
            Throttle::RateLimited => 429,
            Throttle::Unavailable => 503,
        }
    }
}

/// A protocol-neutral response from the task service (or from something in front of it).
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// The task a submission created or found, a status read, or an immediate cancel's result.
    Task(TaskView),
    /// A result read of a terminal task, or an inline run's end.
    Outcome(Outcome),
    /// A result read of a task with nothing stored (`cancelled`: it was cancelled).
    NoResult {
        cancelled: bool,
    },
    /// An inline run refused after running ([`RunAs::InlineThenRefuse`]).
    InlineRefused,
    /// No such task (`expired`: it existed and was deleted). `hidden`: the task lives on, but
    /// bound to another HTTP session than the one asking (the TS and Python SDKs show a task
    /// only to the session that created it); the words are those of an unknown id.
    NotFound {
        expired: bool,
        hidden: bool,
    },
    /// A cancel accepted; only a later read says who won.
    CancelAccepted,
    /// A cancel of a task already terminal.
    CancelRejected {
        status: TaskStatus,
    },
    Tasks(Vec<TaskView>),
    Ack,
    /// Refused before reaching the server.
    Throttled {
        throttle: Throttle,
        retry_after_ms: u64,
    },
    /// The request named a session the server does not know (it restarted since): Streamable
    /// HTTP's 404, answered in front of the server's handlers.
    SessionGone,
}

/// Something the server sends without being asked.
#[derive(Clone, Debug, PartialEq)]
pub enum Push {
    /// An input request for `round` of `task` (protocols that push them).
    Input {
        task: String,
        call_node: String,
        round: u32,
    },
    /// A status change (servers that notify).
    Status(TaskView),
}

/// What a decoded frame asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Ask {
    Service(Request),
    /// The codec answers by itself (handshake, malformed frame, unknown method, refused call).
    Codec,
    /// Nothing to do and nothing to answer (a client notification).
    Nothing,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub exchange: ExchangeKind,
    /// Set when a reply is due.
    pub call: Option<CallId>,
    pub ask: Ask,
}

/// Neutral edits of a response, applied by the codec as it encodes (the fault layer's
/// rewrites: it names them, the codec knows where they go).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shape {
    /// Every task id in the reply names this task instead.
    pub task_id: Option<String>,
    /// The reply's own id names this other request (where the body carries an id).
    pub body_call: Option<CallId>,
    /// The result loses its last content block; a digest the server claims stays as it was.
    pub drop_last_block: bool,
}

/// What a codec's wire format can carry, which decides the faults it can express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodecCaps {
    /// Replies carry their request's id in the body (JSON-RPC), apart from the transport.
    pub body_ids: bool,
    /// Status reads show a terminal task's result.
    pub poll_shows_result: bool,
    /// Status reads show pending input requests.
    pub poll_shows_input: bool,
    /// Results carry the server's digest.
    pub result_digest: bool,
    /// The poll interval the server suggests on every task it shows, if it suggests one.
    pub poll_interval_ms: Option<u64>,
}

/// The result payload as the server puts it on the wire (without metadata): what the truth's
/// `result_digest` digests. `None` when the protocol shows no payload for it (AIP-151 shows an
/// error result as an `error` status only).
pub trait ResultShape {
    fn payload(&self, body: &ResultBody) -> Option<Value>;
    /// The error message the server shows for a failed `outcome`, where it shows one in place
    /// of a payload (what the truth's `error_message` holds, and a failed entry downstream must
    /// carry). By default a tool error's own message; AIP-151 also shows an error result and a
    /// pre-emption as an `error` status.
    fn error_message(&self, outcome: &Outcome) -> Option<String> {
        match outcome {
            Outcome::ToolError { message } => Some(message.clone()),
            _ => None,
        }
    }
}

/// One protocol's wire format. See the module docs.
pub trait Codec: ResultShape + Send {
    fn caps(&self) -> CodecCaps;
    /// How the service behind this codec (and its profile) behaves.
    fn policy(&self) -> Policy;
    fn decode(&mut self, frame: OutFrame) -> Decoded;
    /// The reply to `call`. A codec answer ([`Ask::Codec`]) is encoded from what the codec kept
    /// at decode time, unless `response` comes from in front of the server (`Throttled`, or a
    /// replica's `NotFound`): the request never reached the codec's server then.
    fn encode_reply(&mut self, call: CallId, response: &Response, shape: &Shape) -> InFrame;
    /// A frame for a push, or `None` when this protocol does not send it.
    fn encode_push(&mut self, push: &Push) -> Option<InFrame>;
    /// What this codec's reply to an `exchange` shows the executor, read off the wire it writes
    /// rather than the service's neutral response: the checkers credit an executor with what
    /// reached it, no more and no less (a cancel's plain ack shows an accepted cancel whatever
    /// the service did; a read that inlines nothing carries no result). Fault rewrites are not
    /// applied: the trace marks those frames apart.
    fn shows(&self, exchange: ExchangeKind, response: &Response) -> Shows {
        let _ = exchange;
        neutral_shows(response, self.caps())
    }
    /// Task-augmented calls of tools that forbid tasks decoded since the last take (protocols
    /// whose client chooses per call whether it is a task: MCP 2025-11-25).
    fn take_forbidden_task_calls(&mut self) -> Vec<crate::fake::truth::ForbiddenTaskCall> {
        Vec::new()
    }
    /// `d`, a task-augmented submission, as a server redeployed since the executor listed its
    /// tools answers it when the tool no longer supports tasks (the `tool_redeployed` fault).
    /// Only codecs whose protocol expresses the fault change it.
    fn without_task_support(&mut self, d: Decoded) -> Decoded {
        d
    }
    /// The server process restarted (the `server_restart` fault): state a new process starts
    /// afresh with, such as a per-session counter of the requests the server sends.
    fn restart(&mut self) {}
}

/// What a response shows the executor, in the trace's neutral terms, for a codec whose wire
/// carries each response as the service gave it.
pub fn neutral_shows(response: &Response, caps: CodecCaps) -> Shows {
    match response {
        Response::Task(v) => Shows::Task {
            task: v.id.clone(),
            status: v.status,
            poll_interval_ms: caps.poll_interval_ms,
            input_round: v.pending_round.filter(|_| caps.poll_shows_input),
            ttl_ms: v.ttl_ms,
            result: caps.poll_shows_result && v.status.is_terminal() && v.outcome.is_some(),
        },
        Response::Outcome(_) => Shows::Outcome,
        Response::NoResult { .. } => Shows::NoResult,
        Response::InlineRefused => Shows::InlineRefused,
        Response::NotFound { expired, hidden } => Shows::NotFound {
            expired: *expired,
            hidden: *hidden,
        },
        Response::CancelAccepted => Shows::CancelAccepted,
        Response::CancelRejected { status } => Shows::CancelRejected { status: *status },
        Response::Tasks(ts) => Shows::Tasks {
            tasks: ts.iter().map(|t| t.id.clone()).collect(),
            status: ts.iter().map(|t| (t.id.clone(), t.status)).collect(),
            ttl_ms: ts
                .iter()
                .filter_map(|t| Some((t.id.clone(), t.ttl_ms?)))
                .collect(),
        },
        Response::Ack => Shows::Ack,
        Response::SessionGone => Shows::SessionGone,
        Response::Throttled {
            throttle,
            retry_after_ms,
        } => Shows::Throttled {
            status: throttle.http_status(),
            retry_after_ms: *retry_after_ms,
        },
    }
}

/// The requests a codec is waiting to answer, with what it needs to encode each answer.
#[derive(Debug)]
pub struct CallBook<C> {
    next: u64,
    open: std::collections::BTreeMap<CallId, C>,
}

impl<C> Default for CallBook<C> {
    fn default() -> Self {
        CallBook {
            next: 0,
            open: std::collections::BTreeMap::new(),
        }
    }
}

impl<C> CallBook<C> {
    pub fn open(&mut self, ctx: C) -> CallId {
        self.next += 1;
        let id = CallId(self.next);
        self.open.insert(id, ctx);
        id
    }

    /// The context of `call`, closed: a request is answered once.
    pub fn close(&mut self, call: CallId) -> Option<C> {
        self.open.remove(&call)
    }

    pub fn get(&self, call: CallId) -> Option<&C> {
        self.open.get(&call)
    }

    /// Give the open `call` another context under the same id: a request decoded again after
    /// the network registered it (whatever tracks the call by its id keeps tracking it).
    pub fn replace(&mut self, call: CallId, ctx: C) -> Option<C> {
        self.open.get_mut(&call).map(|c| std::mem::replace(c, ctx))
    }
}
