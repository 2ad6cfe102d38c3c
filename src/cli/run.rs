//! `toolop call` and `toolop resume`: one runner per server target, on the shared ledger,
//! scoped to the call nodes of that target; a watch loop that shows progress, turns cancel
//! requests from other processes into cancel clicks, and stops the runner once every node is
//! final. A runner that loses its connection (a stdio child that died, a handshake that failed)
//! is restarted from the ledger, a bounded number of times.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};

use super::approve::{self, Gate};
use super::progress::Progress;
use super::store::{unix_ms, LedgerStore};
use super::target::Target;
use super::{Failure, RunOpts, EXIT_COMPLETED, EXIT_FAILED, EXIT_RECONCILE, EXIT_UNFINISHED};
use crate::core::PollPolicy;
use crate::ledger::{
    CancelRequest, EffectItem, Ledger, LedgerError, OutboxEntry, Receipt, ReconcileItem, Write,
};
use crate::record::{LocalState, TerminalState, ToolOperation};
use crate::runner::{
    CallNode, Exit, Input, Observation, Observer, Runner, RunnerConfig, SharedLedger,
};
use crate::transport::http::{KeptSession, SessionHandle};

/// The executor epoch of the CLI. Rollback (an epoch bump) is an operator action the CLI does
/// not offer yet.
const EPOCH: u64 = 1;
/// Runner restarts after a lost connection or failed handshake, per target and command.
const RESTARTS_MAX: u32 = 5;
const WATCH_INTERVAL_MS: u64 = 100;

/// The ledger as one runner sees it: only the call nodes of its target are in flight.
struct Scoped {
    inner: SharedLedger,
    nodes: BTreeSet<String>,
}

impl Scoped {
    fn with<T>(&self, f: impl FnOnce(&dyn Ledger) -> T) -> T {
        let guard = self.inner.lock().expect("ledger lock");
        f(&*guard)
    }
}

impl Ledger for Scoped {
    fn insert(&mut self, record: ToolOperation) -> Result<ToolOperation, LedgerError> {
        self.inner.lock().expect("ledger lock").insert(record)
    }
    fn commit(&mut self, write: Write) -> Result<ToolOperation, LedgerError> {
        self.inner.lock().expect("ledger lock").commit(write)
    }
    fn by_call_node(&self, id: &str) -> Option<ToolOperation> {
        self.with(|l| l.by_call_node(id))
    }
    fn by_operation_id(&self, id: &str) -> Option<ToolOperation> {
        self.with(|l| l.by_operation_id(id))
    }
    fn by_submission_key(&self, key: &str) -> Option<ToolOperation> {
        self.with(|l| l.by_submission_key(key))
    }
    fn records(&self) -> Vec<ToolOperation> {
        self.with(|l| l.records())
            .into_iter()
            .filter(|r| self.nodes.contains(&r.call_node_id))
            .collect()
    }
    fn receipts(&self) -> Vec<Receipt> {
        self.with(|l| l.receipts())
    }
    fn outbox(&self) -> Vec<OutboxEntry> {
        self.with(|l| l.outbox())
    }
    fn reconciliation_queue(&self) -> Vec<ReconcileItem> {
        self.with(|l| l.reconciliation_queue())
    }
    fn effect_reconciliations(&self) -> Vec<EffectItem> {
        self.with(|l| l.effect_reconciliations())
    }
    fn request_cancel(&mut self, id: &str, at_ms: u64) -> Result<(), LedgerError> {
        self.inner
            .lock()
            .expect("ledger lock")
            .request_cancel(id, at_ms)
    }
    fn cancel_requests(&self) -> Vec<CancelRequest> {
        self.with(|l| l.cancel_requests())
    }
    fn take_cancel_request(&mut self, id: &str) -> Result<(), LedgerError> {
        self.inner
            .lock()
            .expect("ledger lock")
            .take_cancel_request(id)
    }
}

/// Why call nodes were refused before anything was sent (the record does not say), for the
/// outcome report of this process.
type Refusals = Arc<Mutex<BTreeMap<String, String>>>;

/// What the watch loop keeps up to date while runners work.
struct Watch {
    progress: Progress,
    refusals: Refusals,
}

/// Observations go to `tracing` (debug) as JSON, never as Debug text; refusals are kept.
struct TraceObserver(Refusals);

impl Observer for TraceObserver {
    fn observe(&mut self, now_ms: u64, obs: Observation) {
        if let Observation::CallRejected { node, reason } = &obs {
            self.0
                .lock()
                .expect("refusals lock")
                .insert(node.clone(), reason.clone());
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            let text = serde_json::to_string(&obs).unwrap_or_default();
            tracing::debug!("t={now_ms} {text}");
        }
    }
}

/// Time zero of the ledger's `*_ms` values, as an `Instant` of this process: record times stay
/// meaningful across processes. If the monotonic clock cannot reach that far back (a reboot
/// since), times restart at this process: deadlines stretch, they never shrink.
fn origin_instant(origin_unix_ms: u64) -> Instant {
    let elapsed = Duration::from_millis(unix_ms().saturating_sub(origin_unix_ms));
    let now = Instant::now();
    now.checked_sub(elapsed).unwrap_or_else(|| {
        tracing::warn!("the ledger is older than this machine's uptime: its times restart now");
        now
    })
}

fn runner_config(opts: &RunOpts) -> RunnerConfig {
    let mut cfg = RunnerConfig {
        max_qps: opts.max_qps.max(1),
        request_timeout_ms: opts.request_timeout_ms,
        ..RunnerConfig::default()
    };
    cfg.core.wait_budget_ms = opts.wait_budget_ms;
    cfg.core.poll = PollPolicy {
        initial_interval_ms: opts.poll_interval_ms,
        interval_cap_ms: opts.poll_interval_ms.max(5_000),
        ..PollPolicy::default()
    };
    cfg
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure {
            code: EXIT_UNFINISHED,
            message: format!("cannot start the async runtime: {e}"),
        })
}

fn default_node_id(tool: &str) -> String {
    format!("{tool}-{}-{}", unix_ms(), std::process::id())
}

/// One call the user asked for: `--tool/--args/--node`, or one line of `--batch`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wanted {
    pub node: Option<String>,
    pub tool: String,
    #[serde(default = "empty_object")]
    pub args: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// `--batch FILE`: one JSON object per line, `{"node": "n1", "tool": "t", "args": {...}}`
/// (`node` optional); blank lines and `#` comments skipped.
pub fn read_batch(path: &std::path::Path) -> Result<Vec<Wanted>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let w: Wanted = serde_json::from_str(line)
            .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
        if !w.args.is_object() {
            return Err(format!(
                "{} line {}: \"args\" must be a JSON object",
                path.display(),
                i + 1
            ));
        }
        out.push(w);
    }
    if out.is_empty() {
        return Err(format!("{}: no calls in the file", path.display()));
    }
    Ok(out)
}

/// The call node for `w`: a new one (its target written first), or `None` when the ledger has
/// it already for the same server, tool and arguments (then it is resumed, never re-created).
fn prepare(
    store: &LedgerStore,
    target: &Target,
    w: Wanted,
    index: usize,
) -> Result<(String, Option<CallNode>), Failure> {
    let id = w
        .node
        .unwrap_or_else(|| format!("{}-{index}", default_node_id(&w.tool)));
    let existing = store
        .ledger()
        .lock()
        .expect("ledger lock")
        .by_call_node(&id);
    if let Some(rec) = existing {
        let stored = store.targets().map_err(Failure::usage)?.get(&id).cloned();
        if stored.as_ref().is_some_and(|t| t != target) {
            let other = stored.map(|t| t.describe()).unwrap_or_default();
            return Err(Failure::usage(format!(
                "call node {id} exists for another server ({other})"
            )));
        }
        if rec.tool_name != w.tool || rec.request_body != w.args {
            return Err(Failure::usage(format!(
                "call node {id} exists with another tool or other arguments; pick another node id"
            )));
        }
        return Ok((id, None));
    }
    // The target first: whatever happens next, `resume` knows where this node's server is.
    store.set_target(&id, target).map_err(Failure::usage)?;
    let digest =
        crate::digest::sha256_hex(format!("{id}/{}/{}", unix_ms(), std::process::id()).as_bytes());
    let key = format!("toolop-{}", &digest[..32]);
    Ok((
        id.clone(),
        Some(CallNode {
            id,
            tool: w.tool,
            arguments: w.args,
            submission_key: key,
        }),
    ))
}

pub fn call(
    store: &LedgerStore,
    target: Target,
    wanted: Vec<Wanted>,
    opts: &RunOpts,
    json: bool,
) -> Result<u8, Failure> {
    let gate = Gate::parse(&opts.approve).map_err(Failure::usage)?;
    let mut nodes = BTreeSet::new();
    let mut submit = Vec::new();
    for (i, w) in wanted.into_iter().enumerate() {
        let (id, node) = prepare(store, &target, w, i)?;
        if !nodes.insert(id.clone()) {
            return Err(Failure::usage(format!("call node {id} is named twice")));
        }
        submit.extend(node);
    }
    if !json {
        let first = nodes.iter().next().cloned().unwrap_or_default();
        match nodes.len() {
            1 => eprintln!("call node {first} on {}", target.describe()),
            n => eprintln!("{n} call nodes on {}", target.describe()),
        }
    }
    let mut watch = Watch {
        progress: Progress::new(json),
        refusals: Refusals::default(),
    };
    let result = runtime()?.block_on(drive(
        store,
        &target,
        nodes.clone(),
        submit,
        opts,
        gate,
        &mut watch,
    ));
    watch.progress.finish();
    report(store, &nodes, result.err(), json, &watch.refusals)
}

pub fn resume(store: &LedgerStore, opts: &RunOpts, json: bool) -> Result<u8, Failure> {
    let gate = Gate::parse(&opts.approve).map_err(Failure::usage)?;
    let targets = store.targets().map_err(Failure::usage)?;
    let in_flight = store.ledger().lock().expect("ledger lock").in_flight();
    let mut groups: BTreeMap<Target, BTreeSet<String>> = BTreeMap::new();
    let mut orphans = Vec::new();
    for rec in in_flight {
        match targets.get(&rec.call_node_id) {
            Some(t) => {
                groups
                    .entry(t.clone())
                    .or_default()
                    .insert(rec.call_node_id);
            }
            None => orphans.push(rec.call_node_id),
        }
    }
    for o in &orphans {
        eprintln!("toolop: call node {o} has no recorded server; it stays in flight");
    }
    if groups.is_empty() {
        if !json {
            eprintln!("nothing to resume");
        }
        return report(store, &BTreeSet::new(), None, json, &Refusals::default());
    }
    let all: BTreeSet<String> = groups.values().flatten().cloned().collect();
    if !json {
        eprintln!(
            "resuming {} call node(s) on {} server(s)",
            all.len(),
            groups.len()
        );
    }
    let mut watch = Watch {
        progress: Progress::new(json),
        refusals: Refusals::default(),
    };
    let rt = runtime()?;
    let mut errors = Vec::new();
    // One target after another keeps the progress display simple; each runner drives all of
    // its target's nodes concurrently.
    for (target, nodes) in groups {
        if let Err(e) = rt.block_on(drive(
            store,
            &target,
            nodes,
            Vec::new(),
            opts,
            gate.clone(),
            &mut watch,
        )) {
            errors.push(format!("{}: {e}", target.describe()));
        }
    }
    watch.progress.finish();
    let mut code = report(
        store,
        &all,
        (!errors.is_empty()).then(|| errors.join("; ")),
        json,
        &watch.refusals,
    )?;
    if !orphans.is_empty() {
        code = code.max(EXIT_UNFINISHED);
    }
    Ok(code)
}

/// Run `nodes` on `target` until each is final, the runner gives up, or the user interrupts.
async fn drive(
    store: &LedgerStore,
    target: &Target,
    nodes: BTreeSet<String>,
    mut submit: Vec<CallNode>,
    opts: &RunOpts,
    gate: Gate,
    watch: &mut Watch,
) -> Result<(), String> {
    let ledger = store.ledger();
    let scoped: SharedLedger = Arc::new(Mutex::new(Scoped {
        inner: ledger.clone(),
        nodes: nodes.clone(),
    }));
    let origin = origin_instant(store.origin_unix_ms());
    let cfg = runner_config(opts);
    // Past the wait budget the core hands the node over itself; this only bounds a stuck runner.
    let deadline =
        Instant::now() + Duration::from_millis(opts.wait_budget_ms.saturating_add(60_000));
    let mut restarts = 0;
    loop {
        let kept = store.kept_session(target)?;
        let mut last_kept = kept.clone();
        let (adapter, transport, session) = target.connect(opts.request_timeout_ms, kept)?;
        let (approvals_tx, approvals_rx) = mpsc::unbounded_channel();
        let (inputs_tx, inputs_rx) = mpsc::unbounded_channel();
        // Ids apart across incarnations and below 2^40 (the extension adapter's own ids start there).
        let rpc_id_base = (unix_ms() / 1000 % 1_000_000) * 1_000_000;
        let runner = Runner::new(
            cfg.clone(),
            EPOCH,
            origin,
            adapter,
            scoped.clone(),
            Box::new(TraceObserver(watch.refusals.clone())),
            approvals_tx,
            unix_ms(),
            rpc_id_base,
        );
        let gate_task = tokio::spawn(approve::serve(
            gate.clone(),
            approvals_rx,
            inputs_tx.clone(),
        ));
        // Submitted again after a restart only if the ledger still has no record of it.
        for node in &submit {
            let _ = inputs_tx.send(Input::Submit(node.clone()));
        }
        let mut handle = tokio::spawn(runner.run(transport, inputs_rx));
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        let exit = loop {
            let tick = tokio::time::sleep(Duration::from_millis(WATCH_INTERVAL_MS));
            tokio::select! {
                biased;
                exit = &mut handle => break exit.map_err(|e| format!("the executor stopped: {e}"))?,
                _ = &mut ctrl_c => {
                    let _ = inputs_tx.send(Input::Shutdown);
                    let _ = (&mut handle).await;
                    gate_task.abort();
                    return Err("interrupted; the call stays in flight (toolop resume picks it up)".into());
                }
                _ = tick => {}
            }
            let records: Vec<ToolOperation> = {
                let l = ledger.lock().expect("ledger lock");
                nodes.iter().filter_map(|n| l.by_call_node(n)).collect()
            };
            watch.progress.update(&records);
            keep_session(store, target, session.as_ref(), &mut last_kept);
            submit.retain(|s| !records.iter().any(|r| r.call_node_id == s.id));
            take_cancel_clicks(&ledger, &nodes, &inputs_tx);
            if records.len() == nodes.len() && records.iter().all(|r| r.local_state.is_final()) {
                let _ = inputs_tx.send(Input::Shutdown);
            }
            if Instant::now() > deadline {
                let _ = inputs_tx.send(Input::Shutdown);
            }
        };
        gate_task.abort();
        keep_session(store, target, session.as_ref(), &mut last_kept);
        let all_final = {
            let l = ledger.lock().expect("ledger lock");
            nodes
                .iter()
                .all(|n| l.by_call_node(n).is_some_and(|r| r.local_state.is_final()))
        };
        match exit {
            _ if all_final => return Ok(()),
            Exit::Shutdown if Instant::now() > deadline => {
                return Err("gave up waiting (wait budget exceeded)".into())
            }
            Exit::Shutdown => return Ok(()),
            Exit::EventLimit => return Err("the executor hit its event limit".into()),
            Exit::Crashed(_) => return Err("the executor stopped at a fail point".into()),
            Exit::Disconnected | Exit::HandshakeFailed(_) if restarts >= RESTARTS_MAX => {
                return Err(match exit {
                    Exit::HandshakeFailed(reason) => {
                        format!("cannot negotiate with {}: {reason}", target.describe())
                    }
                    _ => format!(
                        "lost the connection to {} {} times",
                        target.describe(),
                        restarts + 1
                    ),
                });
            }
            Exit::Disconnected | Exit::HandshakeFailed(_) => {
                restarts += 1;
                if let Exit::HandshakeFailed(reason) = &exit {
                    tracing::warn!(
                        "handshake with {} failed: {reason}; retrying",
                        target.describe()
                    );
                }
                tokio::time::sleep(Duration::from_millis(200u64 << restarts.min(5))).await;
            }
        }
    }
}

/// Persist the session the transport holds when it changed, so `resume` continues on it (a
/// server that scopes tasks to sessions shows them to that session only).
fn keep_session(
    store: &LedgerStore,
    target: &Target,
    handle: Option<&SessionHandle>,
    last: &mut Option<KeptSession>,
) {
    let Some(current) = handle.and_then(|h| h.lock().expect("session lock").clone()) else {
        return;
    };
    if last.as_ref() != Some(&current) {
        match store.keep_session(target, &current) {
            Ok(()) => *last = Some(current),
            Err(e) => tracing::warn!("cannot keep the session: {e}"),
        }
    }
}

/// Cancel clicks written by `toolop cancel` (another process) become cancel inputs here.
fn take_cancel_clicks(
    ledger: &SharedLedger,
    nodes: &BTreeSet<String>,
    inputs: &mpsc::UnboundedSender<Input>,
) {
    let mut l = ledger.lock().expect("ledger lock");
    for c in l.cancel_requests() {
        if nodes.contains(&c.call_node_id) {
            let _ = inputs.send(Input::Cancel {
                node: c.call_node_id.clone(),
            });
            if let Err(e) = l.take_cancel_request(&c.call_node_id) {
                tracing::warn!("cannot take the cancel request of {}: {e}", c.call_node_id);
            }
        }
    }
}

/// The exit code one call node's record stands for.
pub fn exit_code(
    rec: Option<&ToolOperation>,
    receipt: Option<&Receipt>,
    outbox: Option<&OutboxEntry>,
) -> u8 {
    let Some(rec) = rec else {
        return EXIT_UNFINISHED;
    };
    match rec.local_state {
        LocalState::Accepted => match receipt.map(|r| r.terminal_state) {
            Some(TerminalState::Completed) => {
                let tool_error = outbox
                    .and_then(|o| o.payload.as_ref())
                    .and_then(|p| p.get("isError"))
                    .and_then(|e| e.as_bool())
                    == Some(true);
                if tool_error {
                    EXIT_FAILED
                } else {
                    EXIT_COMPLETED
                }
            }
            _ => EXIT_FAILED,
        },
        LocalState::CancelledAccepted | LocalState::Rejected => EXIT_FAILED,
        LocalState::Unknown => EXIT_RECONCILE,
        _ => EXIT_UNFINISHED,
    }
}

/// Print each node's outcome; the worst exit code among them.
fn report(
    store: &LedgerStore,
    nodes: &BTreeSet<String>,
    error: Option<String>,
    json: bool,
    refusals: &Refusals,
) -> Result<u8, Failure> {
    let l = store.ledger();
    let l = l.lock().expect("ledger lock");
    let mut worst = EXIT_COMPLETED;
    let mut out = Vec::new();
    for id in nodes {
        let rec = l.by_call_node(id);
        let receipt = l.receipts().into_iter().find(|r| r.call_node_id == *id);
        let outbox = l.outbox_entry(id);
        let code = exit_code(rec.as_ref(), receipt.as_ref(), outbox.as_ref());
        worst = worst.max(severity(code));
        if json {
            out.push(super::show::node_json(
                rec.as_ref(),
                receipt.as_ref(),
                outbox.as_ref(),
                code,
                id,
            ));
        } else {
            println!(
                "{}",
                super::show::node_line(id, rec.as_ref(), receipt.as_ref(), outbox.as_ref())
            );
            if let Some(text) = outbox
                .as_ref()
                .and_then(|o| o.payload.as_ref())
                .map(super::show::payload_text)
            {
                println!("{text}");
            }
            if let Some(reason) = refusals.lock().expect("refusals lock").get(id) {
                println!("  refused before sending: {reason}");
            }
        }
    }
    if let Some(e) = &error {
        eprintln!("toolop: {e}");
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "call_nodes": out, "error": error, "exit_code": from_severity(worst) })
        );
    }
    Ok(from_severity(worst))
}

/// Order of badness for combining exit codes: completed < failed < unfinished < reconcile.
fn severity(code: u8) -> u8 {
    match code {
        EXIT_COMPLETED => 0,
        EXIT_FAILED => 1,
        EXIT_UNFINISHED => 2,
        _ => 3,
    }
}

fn from_severity(s: u8) -> u8 {
    [EXIT_COMPLETED, EXIT_FAILED, EXIT_UNFINISHED, EXIT_RECONCILE][usize::from(s.min(3))]
}
