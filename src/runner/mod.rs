//! The async shell around the core: owns the transport, timers, the QPS limiter and the ledger
//! handle. For each event it asks the core for a step, commits the step to the ledger (one
//! transaction), and only then executes the step's commands. Runs on real tokio in production
//! and on madsim's tokio in the simulator: the same code.

mod handshake;
mod jitter;
mod observe;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};

use crate::core::{self, Command, CoreConfig, Ctx, Event, Outcome, QpsLimiter, Timer};
use crate::ledger::{Ledger, OutboxEntry, Write};
use crate::protocol::{Adapter, ApprovalReply, Inbound, Outbound, RequestKind, ServerCapabilities, TaskSupport};
use crate::record::ToolOperation;
use crate::transport::{OutFrame, Transport};
pub use jitter::Jitter;
pub use observe::{NullObserver, Observation, Observer};

pub type SharedLedger = Arc<Mutex<dyn Ledger + Send>>;

/// What to do with a tool whose descriptor forbids tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoTaskSupport {
    /// Refuse the call (receipt `rejected`).
    Reject,
    /// Call it synchronously, bounded by the tool's published upper bound; no bound, no call.
    RunSync,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunnerConfig {
    pub core: CoreConfig,
    pub max_qps: u32,
    pub request_timeout_ms: u64,
    pub handshake_attempts: u32,
    pub no_task_support: NoTaskSupport,
    /// Upper bound on loop iterations of one runner: a runaway loop ends, it never hangs.
    pub max_events: u64,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            core: CoreConfig::default(),
            max_qps: 20,
            request_timeout_ms: 10_000,
            handshake_attempts: 5,
            no_task_support: NoTaskSupport::Reject,
            max_events: 1_000_000,
        }
    }
}

/// One tool call handed to the executor.
#[derive(Clone, Debug, PartialEq)]
pub struct CallNode {
    pub id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// Chosen once by the caller and kept for every submission of this node.
    pub submission_key: String,
}

/// Everything a runner can be told from outside.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Submit(CallNode),
    Cancel { node: String },
    Detach { node: String },
    Approval { node: String, round: u32, schema_digest: String, reply: ApprovalReply },
    Shutdown,
}

/// A question for the approval gate.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRequest {
    pub node: String,
    pub operation_id: String,
    pub round: u32,
    pub request: serde_json::Value,
    pub schema_digest: String,
    pub deadline_ms: u64,
}

/// Checks returned content after acceptance (design.md: the output-validation hook).
pub trait OutputHook {
    fn check(&mut self, entry: &OutboxEntry) -> Result<(), String>;
}

pub struct AcceptAll;

impl OutputHook for AcceptAll {
    fn check(&mut self, _entry: &OutboxEntry) -> Result<(), String> {
        Ok(())
    }
}

/// Places where a crash loses the most: the simulator crashes the executor exactly there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashPoint {
    /// The ledger write is done, the sends it explains are not.
    AfterCommitBeforeSend,
    /// A reply arrived (the server acted), its ledger write is not done.
    AfterReplyBeforeCommit,
}

/// Fail points (FoundationDB's buggify, for crashes only). Production uses [`NoCrash`].
pub trait CrashPoints {
    fn crash_here(&mut self, point: CrashPoint, node: &str) -> bool;
}

pub struct NoCrash;

impl CrashPoints for NoCrash {
    fn crash_here(&mut self, _point: CrashPoint, _node: &str) -> bool {
        false
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// A fail point fired: the runner stopped dead, as a process would on a crash.
    Crashed(CrashPoint),
    Shutdown,
    /// The connection dropped; in-flight requests were reported lost. Restart to resume.
    Disconnected,
    HandshakeFailed(String),
    EventLimit,
}

struct Pending {
    node: String,
    kind: RequestKind,
    seq: u64,
    epoch: u64,
    deadline_ms: u64,
}

struct Queued {
    node: String,
    out: Outbound,
    seq: u64,
}

pub struct Runner<A: Adapter> {
    cfg: RunnerConfig,
    epoch: u64,
    origin: Instant,
    adapter: A,
    ledger: SharedLedger,
    observer: Box<dyn Observer + Send>,
    hook: Box<dyn OutputHook + Send>,
    crash: Box<dyn CrashPoints + Send>,
    crashed: Option<CrashPoint>,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
    jitter: Jitter,
    caps: ServerCapabilities,
    next_rpc_id: u64,
    pending: BTreeMap<u64, Pending>,
    timers: BTreeSet<(u64, String, Timer)>,
    timer_at: BTreeMap<(String, Timer), u64>,
    queue: VecDeque<Queued>,
    limiter: QpsLimiter,
}

impl<A: Adapter> Runner<A> {
    /// `origin` is time zero for every `*_ms` value; `rpc_id_base` keeps ids of successive
    /// incarnations apart so a late reply can never match a new request.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: RunnerConfig,
        epoch: u64,
        origin: Instant,
        adapter: A,
        ledger: SharedLedger,
        observer: Box<dyn Observer + Send>,
        approvals: mpsc::UnboundedSender<ApprovalRequest>,
        jitter_seed: u64,
        rpc_id_base: u64,
    ) -> Runner<A> {
        let limiter = QpsLimiter::new(cfg.max_qps);
        Runner {
            cfg,
            epoch,
            origin,
            adapter,
            ledger,
            observer,
            hook: Box::new(AcceptAll),
            crash: Box::new(NoCrash),
            crashed: None,
            approvals,
            jitter: Jitter::new(jitter_seed),
            caps: ServerCapabilities::default(),
            next_rpc_id: rpc_id_base,
            pending: BTreeMap::new(),
            timers: BTreeSet::new(),
            timer_at: BTreeMap::new(),
            queue: VecDeque::new(),
            limiter,
        }
    }

    pub fn with_output_hook(mut self, hook: Box<dyn OutputHook + Send>) -> Self {
        self.hook = hook;
        self
    }

    pub fn with_crash_points(mut self, crash: Box<dyn CrashPoints + Send>) -> Self {
        self.crash = crash;
        self
    }

    fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.origin).as_millis() as u64
    }

    fn observe(&mut self, obs: Observation) {
        let now = self.now_ms();
        self.observer.observe(now, obs);
    }

    fn at(&self, ms: u64) -> Instant {
        self.origin + Duration::from_millis(ms)
    }

    /// Negotiate, resume what the ledger holds in flight, then serve inputs and frames until
    /// told to stop, the connection drops, or the event limit is reached.
    pub async fn run<T: Transport>(mut self, mut transport: T, mut inputs: mpsc::UnboundedReceiver<Input>) -> Exit {
        match handshake::negotiate(&mut self, &mut transport).await {
            Ok(caps) => {
                self.observe(Observation::Negotiated {
                    protocol_version: caps.protocol_version.clone(),
                    key_lookup: caps.idempotency_by_key,
                    tools: caps.tools.len(),
                });
                self.cfg.core.key_lookup = caps.idempotency_by_key;
                self.cfg.core.key_retention_ms = caps.idempotency_retention_ms;
                self.caps = caps;
            }
            Err(reason) => {
                self.observe(Observation::HandshakeFailed { reason: reason.clone() });
                return Exit::HandshakeFailed(reason);
            }
        }
        let in_flight: Vec<String> = {
            let l = self.ledger.lock().expect("ledger lock");
            l.in_flight().into_iter().filter(|r| r.execution_epoch <= self.epoch).map(|r| r.call_node_id).collect()
        };
        self.observe(Observation::Started { epoch: self.epoch, resumed: in_flight.len() });
        for node in in_flight {
            self.handle(&node, Event::Resume);
        }
        let exit = self.serve(&mut transport, &mut inputs).await;
        self.observe(Observation::Exit { reason: format!("{exit:?}") });
        exit
    }

    async fn serve<T: Transport>(&mut self, transport: &mut T, inputs: &mut mpsc::UnboundedReceiver<Input>) -> Exit {
        for _ in 0..self.cfg.max_events {
            self.fire_due();
            if let Some(p) = self.crashed {
                return Exit::Crashed(p);
            }
            if let Err(exit) = self.flush(transport) {
                return exit;
            }
            let wake = self.next_wake_ms();
            let sleep = tokio::time::sleep_until(self.at(wake));
            // `biased;`: tokio would otherwise pick branches in an order seeded process-wide,
            // and a seed run after another would differ from the same seed run alone.
            tokio::select! {
                biased;
                input = inputs.recv() => match input {
                    Some(Input::Shutdown) | None => return Exit::Shutdown,
                    Some(input) => self.on_input(input),
                },
                frame = transport.recv() => match frame {
                    Some(frame) => self.on_frame(&frame),
                    None => {
                        self.fail_all_pending();
                        return Exit::Disconnected;
                    }
                },
                _ = sleep => {}
            }
            if let Some(p) = self.crashed {
                return Exit::Crashed(p);
            }
        }
        Exit::EventLimit
    }

    fn next_wake_ms(&mut self) -> u64 {
        let now = self.now_ms();
        // Even with nothing to do, wake now and then: bounded waits everywhere.
        let mut wake = now + 60_000;
        if let Some((at, _, _)) = self.timers.first() {
            wake = wake.min(*at);
        }
        if let Some(d) = self.pending.values().map(|p| p.deadline_ms).min() {
            wake = wake.min(d);
        }
        if !self.queue.is_empty() {
            wake = wake.min(self.limiter.next_slot_ms(now));
        }
        wake.max(now)
    }

    fn fire_due(&mut self) {
        let now = self.now_ms();
        let expired: Vec<u64> = self.pending.iter().filter(|(_, p)| p.deadline_ms <= now).map(|(id, _)| *id).collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                self.observe(Observation::Lost { node: p.node.clone(), kind: p.kind.name(), seq: p.seq });
                self.handle(&p.node, Event::Lost { kind: p.kind, seq: p.seq, epoch: p.epoch });
            }
        }
        while let Some((at, node, timer)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, node.clone(), timer));
            self.timer_at.remove(&(node.clone(), timer));
            self.handle(&node, Event::Timer(timer));
        }
    }

    /// Send what the limiter admits now; the rest waits for its slot.
    fn flush<T: Transport>(&mut self, transport: &mut T) -> Result<(), Exit> {
        let now = self.now_ms();
        #[cfg(feature = "mutations")]
        let unlimited = self.cfg.core.mutated(crate::core::mutation::Mutation::NoQpsLimiter);
        #[cfg(not(feature = "mutations"))]
        let unlimited = false;
        while let Some(q) = self.queue.front() {
            if !unlimited && !self.limiter.try_admit(now) {
                let until_ms = self.limiter.next_slot_ms(now);
                let node = q.node.clone();
                self.observe(Observation::Throttled { node, until_ms });
                break;
            }
            let q = self.queue.pop_front().expect("front exists");
            let kind = q.out.kind();
            let rpc_id = kind.expects_reply().then(|| self.alloc_rpc_id());
            let body = self.adapter.encode(rpc_id.unwrap_or(0), &q.out);
            if let Some(id) = rpc_id {
                let timeout_ms = self.timeout_for(&q);
                self.pending.insert(id, Pending { node: q.node.clone(), kind, seq: q.seq, epoch: self.epoch, deadline_ms: now + timeout_ms });
            }
            self.observe(Observation::Sent { node: q.node.clone(), kind: kind.name(), seq: q.seq, rpc_id });
            if transport.send(OutFrame { request_id: rpc_id, body }).is_err() {
                self.fail_all_pending();
                return Err(Exit::Disconnected);
            }
        }
        Ok(())
    }

    fn timeout_for(&self, q: &Queued) -> u64 {
        match &q.out {
            Outbound::SubmitSync { tool, .. } => self
                .caps
                .tools
                .get(tool)
                .and_then(|t| t.sync_upper_bound_ms)
                .unwrap_or(self.cfg.request_timeout_ms),
            _ => self.cfg.request_timeout_ms,
        }
    }

    fn alloc_rpc_id(&mut self) -> u64 {
        self.next_rpc_id += 1;
        self.next_rpc_id
    }

    fn fail_all_pending(&mut self) {
        let all = std::mem::take(&mut self.pending);
        for (_, p) in all {
            self.observe(Observation::Lost { node: p.node.clone(), kind: p.kind.name(), seq: p.seq });
            self.handle(&p.node, Event::Lost { kind: p.kind, seq: p.seq, epoch: p.epoch });
        }
    }

    fn on_input(&mut self, input: Input) {
        match input {
            Input::Submit(node) => self.submit(node),
            Input::Cancel { node } => self.handle(&node, Event::CancelClicked),
            Input::Detach { node } => self.handle(&node, Event::CallerDetached),
            Input::Approval { node, round, schema_digest, reply } => {
                self.handle(&node, Event::ApprovalReplied { round, schema_digest, reply })
            }
            Input::Shutdown => {}
        }
    }

    fn submit(&mut self, node: CallNode) {
        let now = self.now_ms();
        let tool = self.caps.tools.get(&node.tool).cloned();
        let task_capable = self.caps.tasks_tool_call;
        let (tool_version, synchronous, refusal) = match &tool {
            None => (String::new(), false, Some(format!("server lists no tool {:?}", node.tool))),
            Some(t) if task_capable && t.task_support != TaskSupport::Forbidden => (t.descriptor_digest.clone(), false, None),
            Some(t) => match (self.cfg.no_task_support, t.sync_upper_bound_ms) {
                (NoTaskSupport::RunSync, Some(_)) => (t.descriptor_digest.clone(), true, None),
                _ => (t.descriptor_digest.clone(), false, Some("tool has no task support and no synchronous bound we may use".to_string())),
            },
        };
        let mut rec = ToolOperation::new(
            &node.id,
            &node.tool,
            &tool_version,
            node.arguments,
            self.adapter.id(),
            &node.submission_key,
            self.epoch,
            now,
            self.cfg.core.wait_budget_ms,
        );
        rec.synchronous = synchronous;
        let inserted = self.ledger.lock().expect("ledger lock").insert(rec);
        if inserted.is_err() {
            // The same call node again: the ledger already owns it; a second operation is exactly
            // what this executor exists to prevent.
            self.observe(Observation::DuplicateCallNode { node: node.id });
            return;
        }
        match refusal {
            Some(reason) => {
                self.observe(Observation::CallRejected { node: node.id.clone(), reason });
                self.handle(&node.id, Event::RejectLocally);
            }
            None => self.handle(&node.id, Event::Start),
        }
    }

    fn on_frame(&mut self, frame: &crate::transport::InFrame) {
        match self.adapter.classify(frame) {
            Inbound::Response { rpc_id } => {
                let Some(p) = self.pending.remove(&rpc_id) else {
                    self.observe(Observation::Unrouted { what: format!("reply to request {rpc_id} nobody waits for") });
                    return;
                };
                let reply = self.adapter.decode_reply(p.kind, frame);
                let retry_after_ms = match &reply {
                    crate::protocol::Reply::RateLimited { retry_after_ms } | crate::protocol::Reply::Unavailable { retry_after_ms } => *retry_after_ms,
                    _ => None,
                };
                self.observe(Observation::Received { node: p.node.clone(), kind: p.kind.name(), seq: p.seq, reply: reply.name(), retry_after_ms });
                self.handle(&p.node, Event::Reply { kind: p.kind, seq: p.seq, epoch: p.epoch, reply });
            }
            Inbound::InputRequest(req) => {
                let owner = req.related_operation_id.as_deref().and_then(|op| self.ledger.lock().expect("ledger lock").by_operation_id(op));
                match owner {
                    Some(rec) => self.handle(&rec.call_node_id, Event::InputRequested(req)),
                    None => self.observe(Observation::Unrouted { what: format!("input request for unknown operation {:?}", req.related_operation_id) }),
                }
            }
            Inbound::Ignored { .. } => {}
            Inbound::Malformed { reason } => self.observe(Observation::Malformed { reason }),
        }
    }

    /// One event for one call node: step, commit, then act. Nothing is sent unless the write
    /// that explains it is in the ledger.
    fn handle(&mut self, node: &str, event: Event) {
        if self.crashed.is_some() {
            // A crashed process does nothing more; what it had not written is lost.
            return;
        }
        if matches!(event, Event::Reply { .. }) && self.crash.crash_here(CrashPoint::AfterReplyBeforeCommit, node) {
            self.crashed = Some(CrashPoint::AfterReplyBeforeCommit);
            return;
        }
        let Some(rec) = self.ledger.lock().expect("ledger lock").by_call_node(node) else {
            self.observe(Observation::Unrouted { what: format!("event {} for unknown call node {node}", event.name()) });
            return;
        };
        let ctx = Ctx { now_ms: self.now_ms(), jitter_permille: self.jitter.permille(), epoch: self.epoch };
        let step = core::step(&rec, &event, &ctx, &self.cfg.core);
        let changed = step.record != rec;
        let mut write = Write { expected_version: rec.version, record: step.record, accept: None, reconcile: None, effect: None, now_ms: ctx.now_ms };
        for c in &step.commands {
            match c {
                Command::Accept(spec) => write.accept = Some(spec.clone()),
                Command::Reconcile { reason } => write.reconcile = Some(reason.clone()),
                Command::EffectReconciliation { reason } => write.effect = Some(reason.clone()),
                _ => {}
            }
        }
        let needs_write = changed || write.accept.is_some() || write.reconcile.is_some() || write.effect.is_some();
        let version = if needs_write {
            let committed = self.ledger.lock().expect("ledger lock").commit(write);
            match committed {
                Ok(stored) => stored.version,
                Err(e) => {
                    self.observe(Observation::LedgerRefused { node: node.to_string(), error: e.to_string() });
                    return;
                }
            }
        } else {
            rec.version
        };
        let name = event.name();
        let obs = match step.outcome {
            Outcome::Moved(path) => Observation::Moved { node: node.to_string(), event: name, path, version },
            Outcome::Stayed => Observation::Stayed { node: node.to_string(), event: name },
            Outcome::Rejected(r) => Observation::Rejected { node: node.to_string(), event: name, reason: format!("{r:?}") },
            Outcome::Refused { from, to } => Observation::Refused { node: node.to_string(), event: name, from, to },
        };
        self.observe(obs);
        let sends = step.commands.iter().any(|c| matches!(c, Command::Send { .. }));
        if sends && self.crash.crash_here(CrashPoint::AfterCommitBeforeSend, node) {
            self.crashed = Some(CrashPoint::AfterCommitBeforeSend);
            return;
        }
        for c in step.commands {
            self.execute(node, c);
        }
    }

    fn execute(&mut self, node: &str, c: Command) {
        match c {
            Command::Send { out, seq } => self.queue.push_back(Queued { node: node.to_string(), out, seq }),
            Command::Schedule { at_ms, timer } => {
                // One timer per (node, kind): a new schedule replaces the old one.
                if let Some(old) = self.timer_at.insert((node.to_string(), timer), at_ms) {
                    self.timers.remove(&(old, node.to_string(), timer));
                }
                self.timers.insert((at_ms, node.to_string(), timer));
            }
            Command::AskApproval { round, operation_id, request, schema_digest, deadline_ms } => {
                self.observe(Observation::ApprovalAsked { node: node.to_string(), round, deadline_ms });
                // A gate that went away cannot answer; the deadline timer declines instead.
                let _ = self.approvals.send(ApprovalRequest { node: node.to_string(), operation_id, round, request, schema_digest, deadline_ms });
            }
            Command::Accept(spec) => {
                self.observe(Observation::Accepted { node: node.to_string(), terminal: spec.terminal, result_digest: spec.result_digest.clone() });
                let entry = self.ledger.lock().expect("ledger lock").outbox().into_iter().find(|e| e.call_node_id == node);
                if let Some(entry) = entry {
                    let (ok, detail) = match self.hook.check(&entry) {
                        Ok(()) => (true, String::new()),
                        Err(e) => (false, e),
                    };
                    self.observe(Observation::OutputChecked { node: node.to_string(), ok, detail });
                }
            }
            Command::Reconcile { reason } => self.observe(Observation::Reconcile { node: node.to_string(), reason }),
            Command::EffectReconciliation { reason } => {
                self.observe(Observation::EffectReconciliation { node: node.to_string(), reason })
            }
        }
    }
}

#[cfg(test)]
mod tests;
