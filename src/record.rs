//! The durable operation record `toolOperation.v1`, and the two state types it keeps apart:
//! [`LocalState`] (what the executor knows and has decided) and [`ProtocolStatus`] (what the
//! server last said). A local state never stands in for a protocol state, and the reverse.

use serde::{Deserialize, Serialize};

/// Schema tag written into every record, so a reader can refuse a record it does not understand.
pub const RECORD_SCHEMA: &str = "toolOperation.v1";

/// Where the executor stands with one call node. Transitions are listed in
/// `core::transitions::ALLOWED`; anything else is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LocalState {
    /// Record written, submission about to be (or being) sent.
    Submitting,
    /// The submission may or may not have created an operation: resolve by key, never re-mint.
    SubmissionUnknown,
    /// The server proved by key that no operation exists; re-submission with the same key is safe.
    NotFoundSafe,
    /// The server returned a queryable operation id; polling.
    Working,
    /// The server waits for input; auto-polling is paused while the approval gate decides.
    InputRequired,
    /// Cancel generation bumped and written; the cancel is being sent or confirmed.
    CancelRequested,
    /// A poll saw a terminal protocol status; the result has not been fetched yet.
    TerminalObserved,
    /// The result fetch is in flight.
    FetchingResult,
    /// Terminal receipt written for a terminal state read from the server (completed, failed,
    /// cancelled by the server itself, or done without result).
    Accepted,
    /// Terminal receipt written for a cancel this executor requested and the server confirmed.
    CancelledAccepted,
    /// The server refused the submission outright (no operation was created); receipt written.
    Rejected,
    /// The executor cannot prove the outcome: handed to the manual reconciliation queue.
    Unknown,
}

impl LocalState {
    pub const ALL: [LocalState; 12] = [
        LocalState::Submitting,
        LocalState::SubmissionUnknown,
        LocalState::NotFoundSafe,
        LocalState::Working,
        LocalState::InputRequired,
        LocalState::CancelRequested,
        LocalState::TerminalObserved,
        LocalState::FetchingResult,
        LocalState::Accepted,
        LocalState::CancelledAccepted,
        LocalState::Rejected,
        LocalState::Unknown,
    ];

    /// States in which the executor does no more work on its own.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            LocalState::Accepted
                | LocalState::CancelledAccepted
                | LocalState::Rejected
                | LocalState::Unknown
        )
    }

    /// States that carry a terminal receipt.
    pub fn has_receipt(self) -> bool {
        matches!(
            self,
            LocalState::Accepted | LocalState::CancelledAccepted | LocalState::Rejected
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            LocalState::Submitting => "SUBMITTING",
            LocalState::SubmissionUnknown => "SUBMISSION_UNKNOWN",
            LocalState::NotFoundSafe => "NOT_FOUND_SAFE",
            LocalState::Working => "WORKING",
            LocalState::InputRequired => "INPUT_REQUIRED",
            LocalState::CancelRequested => "CANCEL_REQUESTED",
            LocalState::TerminalObserved => "TERMINAL_OBSERVED",
            LocalState::FetchingResult => "FETCHING_RESULT",
            LocalState::Accepted => "ACCEPTED",
            LocalState::CancelledAccepted => "CANCELLED_ACCEPTED",
            LocalState::Rejected => "REJECTED",
            LocalState::Unknown => "UNKNOWN",
        }
    }
}

impl std::fmt::Display for LocalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A status as the server reported it, normalised across protocols. Adapters map wire values
/// here; nothing outside an adapter sees the wire spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// AIP-151 `done` with neither `response` nor `error`: its own outcome, never a failure.
    DoneWithoutResult,
}

impl ProtocolStatus {
    /// The serialised (snake_case) name, for people and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolStatus::Working => "working",
            ProtocolStatus::InputRequired => "input_required",
            ProtocolStatus::Completed => "completed",
            ProtocolStatus::Failed => "failed",
            ProtocolStatus::Cancelled => "cancelled",
            ProtocolStatus::DoneWithoutResult => "done_without_result",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            ProtocolStatus::Working | ProtocolStatus::InputRequired
        )
    }

    pub fn as_terminal(self) -> Option<TerminalState> {
        match self {
            ProtocolStatus::Completed => Some(TerminalState::Completed),
            ProtocolStatus::Failed => Some(TerminalState::Failed),
            ProtocolStatus::Cancelled => Some(TerminalState::Cancelled),
            ProtocolStatus::DoneWithoutResult => Some(TerminalState::DoneWithoutResult),
            ProtocolStatus::Working | ProtocolStatus::InputRequired => None,
        }
    }
}

/// The outcome written into a terminal receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalState {
    Completed,
    Failed,
    Cancelled,
    DoneWithoutResult,
    /// The server refused the submission; no operation exists.
    Rejected,
}

impl TerminalState {
    pub fn name(self) -> &'static str {
        match self {
            TerminalState::Completed => "completed",
            TerminalState::Failed => "failed",
            TerminalState::Cancelled => "cancelled",
            TerminalState::DoneWithoutResult => "done_without_result",
            TerminalState::Rejected => "rejected",
        }
    }
}

/// Which adapter (and which version of its contract) owns an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdapterId {
    /// MCP Tasks, protocol revision 2025-11-25 (experimental).
    Mcp20251125,
    /// The MCP tasks extension `io.modelcontextprotocol/tasks` (SEP-2663), successor of the above.
    McpTasksExt,
    /// Google AIP-151 long-running operations over the HTTP/JSON mapping.
    Aip151,
}

impl AdapterId {
    pub fn name(self) -> &'static str {
        match self {
            AdapterId::Mcp20251125 => "mcp-2025-11-25",
            AdapterId::McpTasksExt => "mcp-tasks-ext",
            AdapterId::Aip151 => "aip-151",
        }
    }
}

/// Where polling stands. `sent_seq` numbers every status read sent (poll or lookup);
/// `applied_seq` is the newest answer applied, so an older answer that arrives late is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollCursor {
    pub sent_seq: u64,
    pub applied_seq: u64,
    /// The newest answer applied that said something of the operation: `applied_seq` less the
    /// 429s, 503s and unreadable answers, which leave nothing an older answer could overwrite.
    /// An answer older than this one is stale. Left out when it equals `applied_seq` (and in records written
    /// before it): read as `applied_seq` then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_seq: Option<u64>,
    /// Polls sent so far; drives the backoff.
    pub polls: u32,
    /// Interval the server last suggested, if any.
    pub server_interval_ms: Option<u64>,
    /// Earliest time of the next poll; a Retry-After pushes it out.
    pub next_poll_at_ms: u64,
    /// Consecutive not-found answers while the operation should exist.
    pub not_found_streak: u32,
    /// The request number of the first not-found of the current streak: a late view of the
    /// operation answering a later request proves that streak a lagging replica's.
    #[serde(default)]
    pub not_found_first_seq: u64,
    /// When that first not-found was taken in (the ledger's clock): a view of the operation
    /// whose request left after it is newer than that 404, whatever its number. Requests are
    /// numbered when committed and may leave later, after other processes' requests
    /// (mcp_ext_faults seed 462185).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_found_first_at_ms: Option<u64>,
    /// When the request that drew that first not-found left (the ledger's clock): a view of
    /// the operation whose request left after it answers a newer request, as requests are
    /// ordered by when they leave (mcp_ext_replicas seed 1046: a process's poll numbered
    /// before a replica's, leaving 189 ms after it, showed the task while the replica's
    /// drew a lagging 404, and arrived only after that 404 was taken in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_found_first_sent_at_ms: Option<u64>,
    /// The latest time a request left whose answer showed the operation alive (the ledger's
    /// clock): a not-found answering a request that left before it is older than that sight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alive_sent_at_ms: Option<u64>,
    /// Consecutive requests that went unanswered (lost or timed out).
    pub lost_streak: u32,
    /// The newest request still unanswered when a later one was sent while a not-found streak
    /// ran (another process's read in flight, or its reply held up): until a request lease
    /// after that, its answer may yet show the operation alive, and the streak does not
    /// conclude. Left out when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overtaken: Option<Overtaken>,
    /// The process that sent the newest request (`sent_seq`), so an overtaking send can say
    /// whose request it overtook. Left out when unknown (records written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_by: Option<u64>,
}

/// A request a later one overtook unanswered, and when (the ledger's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overtaken {
    pub seq: u64,
    pub at_ms: u64,
    /// The process that sent it, when known: while that process beats (another of this
    /// epoch), it may be reading the answer behind slow commits, or be frozen with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<u64>,
}

impl PollCursor {
    /// The newest answer applied that said something of the operation (`answered_seq`, or
    /// `applied_seq` where no throttle came since): an answer older than it is stale.
    pub fn newest_answer(&self) -> u64 {
        self.answered_seq.unwrap_or(self.applied_seq)
    }
}

/// An input request handed to the approval gate and not yet answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInput {
    pub round: u32,
    /// The server's JSON-RPC id for the request, kept verbatim so the reply can echo it.
    pub server_request_id: serde_json::Value,
    pub schema_digest: String,
    pub deadline_ms: u64,
    pub request: serde_json::Value,
    /// The schema the answer must conform to (the request's `requestedSchema`): the runner
    /// validates an accepted answer against it before anything is sent. `null` in a record
    /// written before it was kept: then no accepted answer can be validated, and none is sent.
    #[serde(default)]
    pub requested_schema: serde_json::Value,
}

/// The durable record of one call node's long-running operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolOperation {
    pub schema: String,
    pub call_node_id: String,
    pub request_digest: String,
    pub tool_name: String,
    pub tool_version: String,
    /// Shared, not copied, by the record's clones: it never changes after the record is made,
    /// and the executor clones a record several times per step. (Serialised as the value itself.)
    pub request_body: std::sync::Arc<serde_json::Value>,
    pub operation_id: Option<String>,
    pub adapter: AdapterId,
    pub adapter_version: String,
    pub submission_key: String,
    /// A tool without task support, called synchronously under its published upper bound.
    pub synchronous: bool,
    /// Shadow mode: the operation is recorded, checked and receipted, but its outcome never
    /// reaches the outbox.
    pub shadow: bool,
    /// Submissions sent with this key (the same key every time).
    pub submit_attempts: u32,
    /// When the newest submission was committed to be sent, by whichever process. Another
    /// process that resumes the record while its reply may still reach the sender concludes
    /// nothing before `CoreConfig::request_lease_ms` has passed. Left out when unset, so
    /// older records read and write as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_at_ms: Option<u64>,
    /// The process that sent it (`Ctx::process`). While that process still beats on the
    /// ledger (`Beat`), no other process takes the submission up: the sender reads its reply,
    /// however long its commits hold it. Left out when unset, as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<u64>,
    /// Lookups by key sent while the submission outcome was unknown.
    pub lookup_attempts: u32,
    pub poll_cursor: PollCursor,
    pub last_server_status: Option<ProtocolStatus>,
    /// The server's `statusMessage` from its newest status read (advisory). A failed task that
    /// stores no result (the Python SDK, failed by an exception) explains itself only here.
    #[serde(default)]
    pub last_status_message: Option<String>,
    pub input_round: u32,
    pub pending_input: Option<PendingInput>,
    /// A fetch was opened to receive the server's input request; only then is one expected.
    pub input_stream_open: bool,
    /// The process that opened that stream (`Ctx::process`). Only its own connection carries
    /// the stream: a request reaching another process did not come on it. Left out when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_stream_owner: Option<u64>,
    /// Server request ids of input requests already answered, newest last, bounded.
    pub answered_inputs: Vec<serde_json::Value>,
    /// Schema digests of the input requests already answered, newest last, bounded like
    /// `answered_inputs`. A server that reuses one request id for every request (the TS SDK's
    /// `0`) tells its rounds apart by content only, so a late copy of an answered request is
    /// known by its id and its content together. Left out when empty, like the streak below:
    /// records that never answered an input read and write as before these fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered_input_digests: Vec<String>,
    /// Copies of an answered request refused in a row, each on a stream we opened. A late copy
    /// comes once; a server that asks the very same thing again under the same id sends it on
    /// every stream, so the `ANSWERED_COPY_NEW_ROUND`-th in a row is taken as a new round.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub answered_copy_streak: u32,
    /// The newest answer sent, kept so a lost answer can be sent again (tasks extension, where
    /// the answer is a request of its own that can go unacknowledged).
    pub last_answer: Option<LastAnswer>,
    pub cancel_generation: u32,
    /// Cancel sends for the current generation (retries after a lost ack).
    pub cancel_attempts: u32,
    /// Cancel was asked before the server returned an id; it is sent once one is known.
    pub cancel_wanted: bool,
    /// The server took the cancel without saying who won (best-effort cancel): keep reading,
    /// do not send it again.
    pub cancel_pending: bool,
    pub execution_epoch: u64,
    pub created_at_ms: u64,
    /// Server-reported retention end, if the server reported a ttl.
    pub expires_at_ms: Option<u64>,
    /// The retention the server reported (its ttl), kept to push `expires_at_ms` on to a later
    /// possible end than one a read showed: an acknowledged cancel. Left out when unset, so
    /// older records read and write as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Total wait budget end: past it the executor stops waiting and hands the item over.
    pub wait_deadline_ms: u64,
    pub result_digest: Option<String>,
    /// Result fetches for this terminal observation (retries after loss or a bad payload).
    pub fetch_attempts: u32,
    /// The caller stopped waiting. This never cancels anything on the server.
    pub caller_detached: bool,
    pub local_state: LocalState,
    /// Why the record is in `Unknown`, when it is.
    pub unknown_reason: Option<String>,
    /// Compare-and-swap version, bumped by the ledger on every write.
    pub version: u64,
}

/// An answer to an input request, as sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastAnswer {
    pub server_request_id: serde_json::Value,
    /// The digest of the answered request's schema: a request delivered again with the same id
    /// and the same schema is the same request (servers that reuse ids, like the TS SDK's `0`,
    /// are told apart by content only).
    #[serde(default)]
    pub schema_digest: String,
    pub reply: crate::protocol::ApprovalReply,
    /// The answer's own request went unacknowledged.
    pub lost: bool,
    pub resends: u32,
    /// When the answer was last sent (first send or resend); absent in records written before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at_ms: Option<u64>,
}

/// Resends of one lost answer in quick succession (one per poll while the server still asks).
pub const ANSWER_RESENDS_MAX: u32 = 3;

/// After the quick resends, a lost answer the server still asks for is said again once this long
/// has passed since the last send, the pause doubling each time up to 16x: a partition or a run of
/// lost requests can outlast the quick resends, and then a bounded count left the server asking
/// and the executor silent until the wait budget handed a live task to a person (mcp_ext_faults
/// seeds 45046, 92752). The wait budget bounds the whole.
pub const ANSWER_RESEND_PAUSE_MS: u64 = 30_000;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// At most this many answered input ids are remembered for replay detection.
pub const ANSWERED_INPUTS_MAX: usize = 16;

/// A copy of an answered request (same id, same content) that arrives on this many streams in a
/// row is the server asking again, not a late copy: a new round, put to the gate.
pub const ANSWERED_COPY_NEW_ROUND: u32 = 2;

impl ToolOperation {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        call_node_id: &str,
        tool_name: &str,
        tool_version: &str,
        request_body: serde_json::Value,
        adapter: AdapterId,
        submission_key: &str,
        execution_epoch: u64,
        now_ms: u64,
        wait_budget_ms: u64,
    ) -> ToolOperation {
        let request_digest = crate::digest::request_digest(tool_name, tool_version, &request_body);
        ToolOperation {
            schema: RECORD_SCHEMA.to_string(),
            call_node_id: call_node_id.to_string(),
            request_digest,
            tool_name: tool_name.to_string(),
            tool_version: tool_version.to_string(),
            request_body: std::sync::Arc::new(request_body),
            operation_id: None,
            adapter,
            adapter_version: adapter.name().to_string(),
            submission_key: submission_key.to_string(),
            synchronous: false,
            shadow: false,
            submit_attempts: 0,
            submitted_at_ms: None,
            submitted_by: None,
            lookup_attempts: 0,
            poll_cursor: PollCursor::default(),
            last_server_status: None,
            last_status_message: None,
            input_round: 0,
            pending_input: None,
            input_stream_open: false,
            input_stream_owner: None,
            answered_inputs: Vec::new(),
            answered_input_digests: Vec::new(),
            answered_copy_streak: 0,
            last_answer: None,
            cancel_generation: 0,
            cancel_attempts: 0,
            cancel_wanted: false,
            cancel_pending: false,
            execution_epoch,
            created_at_ms: now_ms,
            expires_at_ms: None,
            ttl_ms: None,
            wait_deadline_ms: now_ms.saturating_add(wait_budget_ms),
            result_digest: None,
            fetch_attempts: 0,
            caller_detached: false,
            local_state: LocalState::Submitting,
            unknown_reason: None,
            version: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_through_json_with_its_schema_tag() {
        let rec = ToolOperation::new(
            "n1",
            "build_report",
            "v1",
            serde_json::json!({"month": "2026-10"}),
            AdapterId::Mcp20251125,
            "key-1",
            1,
            5,
            1000,
        );
        let text = serde_json::to_string(&rec).unwrap();
        assert!(text.contains("\"schema\":\"toolOperation.v1\""));
        assert!(text.contains("\"local_state\":\"SUBMITTING\""));
        let back: ToolOperation = serde_json::from_str(&text).unwrap();
        assert_eq!(back, rec);
        assert_eq!(back.wait_deadline_ms, 1005);
    }

    #[test]
    fn local_and_protocol_states_are_distinct_types_with_distinct_spellings() {
        let local = serde_json::to_string(&LocalState::Working).unwrap();
        let proto = serde_json::to_string(&ProtocolStatus::Working).unwrap();
        assert_ne!(local, proto);
        assert!(ProtocolStatus::Cancelled.is_terminal());
        assert!(!ProtocolStatus::InputRequired.is_terminal());
        assert_eq!(ProtocolStatus::Working.as_terminal(), None);
    }
}
