//! The task service behind every fake server: one protocol-neutral state machine over simulated
//! time. It stores tasks, runs their scripted work (milestones, input rounds), applies ttl and
//! retention, deduplicates submissions by key within a window, finds tasks by key, cancels by a
//! per-protocol [`CancelRule`], and fills the [`GroundTruth`] — the only place truth is written.
//!
//! No tokio, no I/O, no clock: [`TaskService::handle`] takes a request at a time,
//! [`TaskService::advance`] moves time, [`TaskService::next_event_at_ms`] says when the next
//! internal event is due. Randomness (ids, cancel delays, pre-emption) comes only from the
//! `ChaCha8Rng` given at construction and every map is ordered, so the same seed and inputs give
//! the same outputs.
//!
//! Where protocols differ, the difference is data: a [`Policy`] the codec's profile chooses
//! (cancel effect and whether work keeps running, status of an error result, retention at
//! terminal, dedupe window, how input requests reach the client, status notifications).
//!
//! ## Modelling choices where the protocols do not decide
//! - Working time only counts while a task is working; `input_required` pauses it.
//! - Work keeps running when a task is deleted (the tool does not know about the store): its
//!   side effect still happens, logged as `effects_after_deletion`. Work waiting for input when
//!   its task is cancelled or deleted aborts without a side effect.
//! - A cancel or deletion abandons the pending input round; later answers are stale.
//! - At equal times: work milestones, then pre-emptions, then inline runs, then cancel effects,
//!   then deletions. Work that ends exactly when a cancel takes effect wins.
//! - A second cancel while one is pending changes nothing.
//! - An answer that is not `accept` still resumes the work (the action is logged).
//! - Inline runs ignore input offsets, and no key deduplicates them.

use std::collections::{BTreeMap, BTreeSet};

use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use super::codec::{CallId, Note, Outcome, Push, Response, ResultShape, TaskView};
use super::script::TaskScript;
use super::truth::{GroundTruth, SyncRunKind, TaskStatus, TaskTruth};

mod requests;
mod restart;
mod work;

pub use requests::CancelFaults;

#[cfg(test)]
mod tests;

/// When an accepted cancel takes effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelEffect {
    /// At once; the reply shows the cancelled task (MCP 2025-11-25).
    Immediate,
    /// After a delay drawn in `[min_ms, max_ms]`; the reply is a bare acknowledgement (AIP-151's
    /// best-effort cancel, the tasks extension's eventually consistent one).
    Delayed { min_ms: u64, max_ms: u64 },
}

/// What a cancel does to work that is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunningWork {
    Stops,
    /// It runs to its end (the Python SDK); only work waiting for input aborts.
    KeepsRunning,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CancelRule {
    pub effect: CancelEffect,
    pub running_work: RunningWork,
}

impl CancelRule {
    /// Acknowledged at once, in effect after a delay drawn in `[min, max]`, stopping the work.
    pub fn delayed((min_ms, max_ms): (u64, u64)) -> CancelRule {
        CancelRule {
            effect: CancelEffect::Delayed { min_ms, max_ms },
            running_work: RunningWork::Stops,
        }
    }
}

/// What becoming terminal does to a task's deletion time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtTerminal {
    /// Nothing: the ttl counts from creation.
    Keep,
    /// The ttl starts again (the SDK stores).
    RestartTtl,
    /// The record goes this long after it is done (or at its ttl, if that comes first).
    DeleteAfter(u64),
}

/// What a task's ttl does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// The record goes at its deletion time, on time, running or not; running work keeps
    /// going (the TS and Python SDKs, a strict server).
    Delete,
    /// The SDK's sweep, run only when a request reaches the server (no background sweeper):
    /// a task still running past its ttl ends `failed` and its work is aborted; a terminal
    /// task goes once its deletion time has passed (rmcp's `TaskManager::sweep_expired`:
    /// spec/mcp-tasks.md section 16).
    FailRunningOnCall,
}

/// How long a submission key finds its task again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dedupe {
    /// While the task exists.
    WhileRetained,
    /// Within a window from creation (`None`: forever), even once the record is deleted
    /// (AIP-155 answers such a duplicate with the original operation: "stale success").
    FromCreation { window_ms: Option<u64> },
}

/// How an input request reaches the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputDelivery {
    /// Sent as a server request while a result read is held; an answer must match a delivered
    /// round (MCP 2025-11-25).
    Pushed,
    /// Shown by status reads; each read that shows it is one delivery (the tasks extension).
    Shown,
}

/// How a server behaves, where protocols and their SDKs differ. Chosen by the codec's profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The status of work that ended with an error result (`isError`).
    pub error_result_status: TaskStatus,
    /// Work scripted to end with neither result nor error shows as such; else it completes.
    pub done_without_result: bool,
    pub cancel: CancelRule,
    pub at_terminal: AtTerminal,
    pub dedupe: Dedupe,
    pub input: InputDelivery,
    pub expiry: Expiry,
    /// A cancel of a task waiting for input withdraws the pending round at once, and the task
    /// shows `working` until the cancel takes effect (rmcp's `cancel_task` clears its pending
    /// inputs: the tool's input request fails and it stops on its own).
    pub cancel_withdraws_input: bool,
    /// Every status change is also pushed to the client.
    pub notify_status: bool,
    pub after_answer: AfterAnswer,
    /// Over Streamable HTTP, a task is shown only to the session that created it: a read,
    /// result or cancel from another session answers "not found", a list leaves it out (the TS
    /// and Python SDKs, spec/mcp-tasks.md sections 12 and 14, transcripts `11-cross-session`).
    /// The server room applies it (`series::server`), where sessions are known.
    pub tasks_bound_to_session: bool,
}

/// What a task's status does once its input request is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterAnswer {
    /// It goes back to `working` at once (the spec's "should"; the Python SDK's `elicit()`).
    Working,
    /// The TS SDK leaves the move to the app (spec/mcp-tasks.md section 14), and not every app
    /// makes it: for every other task (odd sequence numbers) the status stays `input_required`
    /// while the work runs on, until it ends or asks again.
    AppMayLeaveInputRequired,
}

/// How task ids look.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdStyle {
    /// 32 lowercase hex digits.
    Hex128,
    /// `<32 hex session scope>:<uuid4>` (the Python SDK).
    ScopedUuid,
    /// `<prefix>/op-<16 hex>` (AIP-151 operation names).
    Operation { prefix: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServiceConfig {
    pub policy: Policy,
    pub ids: IdStyle,
    /// The server's maximum ttl: a larger or absent requested ttl becomes this value.
    pub max_ttl_ms: Option<u64>,
    /// Fraction of tasks the service itself stops at a drawn point of their work.
    pub preempt_rate: f64,
}

/// A reply due now or later: the response to `call`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub call: CallId,
    pub response: Response,
}

/// What [`TaskService::advance`] emits, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    Reply(Reply),
    Push(Push),
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
    /// The work ends at this time whatever is left of it (a completion racing a cancel).
    end_at: Option<u64>,
}

#[derive(Clone, Debug)]
struct Round {
    answered: bool,
    abandoned: bool,
    deliveries: u32,
    /// Service-wide delivery counter at the last delivery (0 = never delivered).
    last_delivery: u64,
}

#[derive(Clone, Debug)]
struct Task {
    id: String,
    tool: String,
    script: TaskScript,
    /// Input offsets, sorted, deduplicated, all below the duration.
    inputs: Vec<u64>,
    created_at: u64,
    updated_at: u64,
    ttl: Option<u64>,
    status: TaskStatus,
    notes: Vec<Note>,
    work: Work,
    outcome: Option<Outcome>,
    deleted: bool,
    /// Lost in a server restart: unknown to the new process, so "not found" as never seen.
    lost: bool,
    delete_at: Option<u64>,
    /// Result reads held until the task is terminal or gone.
    held: Vec<CallId>,
    rounds: Vec<Round>,
    /// When an accepted (delayed) cancel takes effect.
    cancel_at: Option<u64>,
    preempt_at: Option<u64>,
    /// Status-after-cancel: the work outlives a cancel, and its end may later be shown.
    keeps_working_after_cancel: bool,
    /// The tool never looks for a cancel: every cancel is acknowledged and the work runs on.
    ignores_cancel: bool,
    /// Scheduled times: work, pre-emption, cancel effect, deletion.
    sched: [Option<u64>; 4],
}

impl Task {
    fn pending_round(&self) -> Option<(u32, &Round)> {
        let n = self.rounds.len() as u32;
        self.rounds
            .last()
            .filter(|r| !r.answered && !r.abandoned)
            .map(|r| (n, r))
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
        let natural = since + m.saturating_sub(self.work.done_ms);
        Some(self.work.end_at.map_or(natural, |e| e.min(natural)))
    }

    fn live(&self) -> bool {
        !self.deleted
    }
}

#[derive(Clone, Debug)]
struct InlineRun {
    call: CallId,
    script: TaskScript,
    kind: SyncRunKind,
    truth_idx: usize,
    /// The idempotency key it ran under, where the server deduplicates by key.
    key: Option<String>,
}

/// A call run inline under an idempotency key the server deduplicates by: a later submission
/// with the key gets the first answer again rather than a second run, for as long as the
/// policy's [`Dedupe`] keeps a key (a window counts from the run's start, as from a task's
/// creation).
struct KeyedInline {
    started_at_ms: u64,
    /// The answer, once the run ended.
    answer: Option<Response>,
    /// Submissions with the key that arrived while it ran: answered when it ends.
    waiting: Vec<CallId>,
}

/// Scheduled internal events, in the order they run at equal times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Work(u64),
    Preempt(u64),
    Inline(u64),
    Cancel(u64),
    Delete(u64),
}

/// The task service. See the module docs.
pub struct TaskService {
    cfg: ServiceConfig,
    rng: ChaCha8Rng,
    /// Latest simulated time seen.
    clock: u64,
    /// Session scope of [`IdStyle::ScopedUuid`] ids.
    scope: String,
    tasks: BTreeMap<u64, Task>,
    by_id: BTreeMap<String, u64>,
    /// Key -> tasks created with it, oldest first.
    by_key: BTreeMap<String, Vec<u64>>,
    next_seq: u64,
    delivery_counter: u64,
    inline: BTreeMap<u64, InlineRun>,
    /// Key -> the inline run made with it (only where the server deduplicates by key).
    inline_by_key: BTreeMap<String, KeyedInline>,
    schedule: BTreeSet<(u64, Ev)>,
    /// What events and requests caused, with the time, for the next `advance`.
    out: Vec<(u64, Out)>,
    truth: GroundTruth,
    /// Marked tasks whose work ended while they were cancelled, not reported yet.
    finished_after_cancel: Vec<String>,
    /// Tasks a sweep failed at their ttl while running, not reported yet.
    expired_running: Vec<String>,
}

impl TaskService {
    pub fn new(cfg: ServiceConfig, mut rng: ChaCha8Rng) -> TaskService {
        let scope = match cfg.ids {
            IdStyle::ScopedUuid => hex(&mut rng, 16),
            _ => String::new(),
        };
        TaskService {
            cfg,
            rng,
            clock: 0,
            scope,
            tasks: BTreeMap::new(),
            by_id: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_seq: 1,
            delivery_counter: 0,
            inline: BTreeMap::new(),
            inline_by_key: BTreeMap::new(),
            schedule: BTreeSet::new(),
            out: Vec::new(),
            truth: GroundTruth::default(),
            finished_after_cancel: Vec::new(),
            expired_running: Vec::new(),
        }
    }

    /// Move time to `now_ms`: completions, input requests, cancel effects, deletions. Returns
    /// what became due, in order: replies to held and inline calls, pushes.
    pub fn advance(&mut self, now_ms: u64, shape: &dyn ResultShape) -> Vec<Out> {
        self.process_until(now_ms, shape);
        self.out.drain(..).map(|(_, o)| o).collect()
    }

    /// When `advance` next has something to do: the time queued output was queued at, or the
    /// time of the next internal event.
    pub fn next_event_at_ms(&self) -> Option<u64> {
        let queued = self.out.first().map(|(t, _)| *t);
        let scheduled = self.schedule.first().map(|(t, _)| *t);
        match (queued, scheduled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn truth(&self) -> &GroundTruth {
        &self.truth
    }

    /// A task-augmented call of a tool that forbids tasks reached the server (the codec saw it).
    pub fn note_forbidden_task_call(&mut self, call: crate::fake::truth::ForbiddenTaskCall) {
        self.truth.forbidden_task_calls.push(call);
    }

    pub fn config(&self) -> &ServiceConfig {
        &self.cfg
    }

    /// The call node a task belongs to (from the script it was submitted with).
    pub fn node_of_task(&self, task_id: &str) -> Option<&str> {
        self.by_id
            .get(task_id)
            .map(|s| self.tasks[s].script.call_node.as_str())
    }

    /// The call node whose submissions carried `key`, if one reached this service.
    pub fn node_of_key(&self, key: &str) -> Option<&str> {
        self.by_key
            .get(key)
            .and_then(|s| s.first())
            .map(|s| self.tasks[s].script.call_node.as_str())
    }

    /// Whether a cancel of `task_id` now would meet running work of a live, non-terminal task.
    pub fn cancel_meets_running_work(&self, task_id: &str) -> bool {
        self.by_id
            .get(task_id)
            .map(|s| &self.tasks[s])
            .is_some_and(|t| {
                t.live()
                    && !t.status.is_terminal()
                    && t.cancel_at.is_none()
                    && !t.ignores_cancel
                    && t.work.state == WorkState::Running
            })
    }

    /// Whether an accepted cancel of `task_id` has not taken effect yet (nor been overtaken).
    pub fn cancel_pending(&self, task_id: &str) -> bool {
        self.by_id
            .get(task_id)
            .is_some_and(|s| self.tasks[s].sched[2].is_some())
    }

    /// Ids of every task ever created, in creation order.
    pub fn task_ids(&self) -> impl Iterator<Item = &str> {
        self.tasks.values().map(|t| t.id.as_str())
    }

    fn view(&self, seq: u64) -> TaskView {
        let t = &self.tasks[&seq];
        TaskView {
            id: t.id.clone(),
            call_node: t.script.call_node.clone(),
            tool: t.tool.clone(),
            status: t.status,
            created_at_ms: t.created_at,
            updated_at_ms: t.updated_at,
            ttl_ms: t.ttl,
            text: t.script.text.clone(),
            notes: t.notes.clone(),
            outcome: t.outcome.clone(),
            pending_round: if t.status == TaskStatus::InputRequired {
                t.pending_round().map(|(n, _)| n)
            } else {
                None
            },
            deleted: t.deleted,
        }
    }

    fn mint_id(&mut self) -> String {
        loop {
            let candidate = match &self.cfg.ids {
                IdStyle::Hex128 => hex(&mut self.rng, 16),
                IdStyle::ScopedUuid => format!("{}:{}", self.scope, uuid4(&mut self.rng)),
                IdStyle::Operation { prefix } => {
                    let prefix = prefix.clone();
                    format!("{prefix}/op-{}", hex(&mut self.rng, 8))
                }
            };
            if !self.by_id.contains_key(&candidate) {
                return candidate;
            }
        }
    }

    fn task(&self, seq: u64) -> &Task {
        &self.tasks[&seq]
    }

    fn task_mut(&mut self, seq: u64) -> &mut Task {
        self.tasks.get_mut(&seq).expect("task seq exists")
    }

    fn tt(&mut self, seq: u64) -> &mut TaskTruth {
        let id = &self.tasks[&seq].id;
        self.truth.tasks.get_mut(id).expect("truth for every task")
    }

    /// The live task named `task_id`; else whether it existed (and expired). A task lost in a
    /// restart did not exist as far as the new process knows.
    fn live(&self, task_id: &str) -> Result<u64, bool> {
        match self.by_id.get(task_id) {
            Some(&seq) if self.tasks[&seq].live() => Ok(seq),
            Some(&seq) => Err(!self.tasks[&seq].lost),
            None => Err(false),
        }
    }
}

/// `n` random bytes as lowercase hex.
pub(super) fn hex(rng: &mut ChaCha8Rng, n: usize) -> String {
    let mut b = vec![0u8; n];
    rng.fill_bytes(&mut b);
    let mut s = String::with_capacity(2 * n);
    for x in b {
        s.push(char::from_digit(u32::from(x >> 4), 16).expect("nibble"));
        s.push(char::from_digit(u32::from(x & 15), 16).expect("nibble"));
    }
    s
}

/// A random UUID version 4, lowercase, hyphenated.
fn uuid4(rng: &mut ChaCha8Rng) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
