//! `toolop call` and `toolop resume`: one runner per server target, on the shared ledger,
//! scoped to the call nodes of that target; a watch loop that shows progress and stops the
//! runner once every node is final (or fenced by a newer epoch). Cancel requests from other
//! processes (`toolop cancel`) are the runner's own business: it looks for them in the ledger
//! every [`WATCH_INTERVAL_MS`]. A runner that loses its connection (a stdio child that died, a
//! handshake that failed) is restarted from the ledger, a bounded number of times.
//!
//! The executor epoch is the ledger's current epoch, read once per command: a process is one
//! executor incarnation. Once the ledger moves on (a rollback bumps it), the ledger refuses
//! this process's writes; it stops waiting for those nodes and leaves them to the executor of
//! the new epoch (`toolop resume` started after the bump).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};

use super::approve::{self, Gate};
use super::crash_hook;
use super::progress::Progress;
use super::report::{report, SharedNotes};
use super::scoped::Scoped;
use super::store::{unix_ms, LedgerStore};
use super::target::Target;
use super::{Failure, RunOpts, EXIT_LEDGER, EXIT_UNFINISHED};
use crate::core::PollPolicy;
use crate::ledger::LedgerError;
use crate::record::ToolOperation;
use crate::runner::{
    CallNode, Exit, Input, Observation, Observer, Runner, RunnerConfig, SharedLedger,
};
use crate::transport::http::{KeptSession, SessionHandle, SessionStore};

/// Runner restarts after a lost connection or failed handshake, per target and command.
const RESTARTS_MAX: u32 = 5;
const WATCH_INTERVAL_MS: u64 = 100;

/// What the watch loop keeps up to date while runners work.
struct Watch {
    progress: Progress,
    notes: SharedNotes,
}

/// Observations go to `tracing` (debug) as JSON, never as Debug text; refusals and fences are
/// kept.
struct TraceObserver(SharedNotes);

impl Observer for TraceObserver {
    fn observe(&mut self, now_ms: u64, obs: Observation) {
        match &obs {
            Observation::CallRejected { node, reason } => {
                self.0
                    .lock()
                    .expect("notes lock")
                    .refused
                    .insert(node.clone(), reason.clone());
            }
            Observation::Fenced { node, error } => {
                self.0
                    .lock()
                    .expect("notes lock")
                    .fenced
                    .insert(node.clone(), error.clone());
            }
            _ => {}
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
        // `toolop cancel` from another terminal should act about as fast as a click.
        cancel_request_check_ms: WATCH_INTERVAL_MS,
        beat_timeout_ms: opts.beat_timeout_ms,
        beat_interval_ms: (opts.beat_timeout_ms / 4).clamp(1, 1_000),
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
    let existing = store.with(|l| l.by_call_node(&id))?;
    if let Some(rec) = existing {
        let stored = store.targets()?.get(&id).cloned();
        if stored.as_ref().is_some_and(|t| t != target) {
            let other = stored.map(|t| t.describe()).unwrap_or_default();
            return Err(Failure::usage(format!(
                "call node {id} exists for another server ({other})"
            )));
        }
        if rec.tool_name != w.tool || *rec.request_body != w.args {
            return Err(Failure::usage(format!(
                "call node {id} exists with another tool or other arguments; pick another node id"
            )));
        }
        return Ok((id, None));
    }
    // The target first: whatever happens next, `resume` knows where this node's server is.
    store.set_target(&id, target)?;
    let key = mint_submission_key(&format!("{id}/{}/{}", unix_ms(), std::process::id()));
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

/// A fresh submission key: a UUID4 made of the first 16 bytes of `seed`'s SHA-256. The key rides
/// as AIP-155 `request_id`, which a service may require to be a UUID4 (36 characters); MCP
/// servers take any string, so one form serves every protocol.
fn mint_submission_key(seed: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(seed.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
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
    let ex = Executor {
        store,
        opts,
        gate,
        epoch: store.with(|l| l.current_epoch())?,
    };
    let mut watch = Watch {
        progress: Progress::new(json),
        notes: SharedNotes::default(),
    };
    let result = runtime()?.block_on(drive(&ex, &target, nodes.clone(), submit, &mut watch));
    watch.progress.finish();
    let error = match result {
        Ok(()) => None,
        Err(f) if f.code == EXIT_LEDGER => return Err(f),
        Err(f) => Some(f.message),
    };
    report(store, &nodes, error, json, &watch.notes)
}

pub fn resume(store: &LedgerStore, opts: &RunOpts, json: bool) -> Result<u8, Failure> {
    let gate = Gate::parse(&opts.approve).map_err(Failure::usage)?;
    let targets = store.targets()?;
    let (epoch, in_flight) = store.with(|l| Ok((l.current_epoch()?, l.in_flight()?)))?;
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
        return report(store, &BTreeSet::new(), None, json, &SharedNotes::default());
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
        notes: SharedNotes::default(),
    };
    let rt = runtime()?;
    let ex = Executor {
        store,
        opts,
        gate,
        epoch,
    };
    let mut errors = Vec::new();
    // One target after another keeps the progress display simple; each runner drives all of
    // its target's nodes concurrently.
    for (target, nodes) in groups {
        match rt.block_on(drive(&ex, &target, nodes, Vec::new(), &mut watch)) {
            Ok(()) => {}
            Err(f) if f.code == EXIT_LEDGER => {
                watch.progress.finish();
                return Err(f);
            }
            Err(f) => errors.push(format!("{}: {}", target.describe(), f.message)),
        }
    }
    watch.progress.finish();
    let mut code = report(
        store,
        &all,
        (!errors.is_empty()).then(|| errors.join("; ")),
        json,
        &watch.notes,
    )?;
    if !orphans.is_empty() {
        code = code.max(EXIT_UNFINISHED);
    }
    Ok(code)
}

/// What every runner of one command shares: the ledger, the options, the approval gate, and
/// the executor epoch this process writes under.
struct Executor<'a> {
    store: &'a LedgerStore,
    opts: &'a RunOpts,
    gate: Gate,
    epoch: u64,
}

/// Run `nodes` on `target` until each is final (or fenced), the runner gives up, or the user
/// interrupts. An `Err` with [`EXIT_LEDGER`] means the ledger failed.
async fn drive(
    ex: &Executor<'_>,
    target: &Target,
    nodes: BTreeSet<String>,
    mut submit: Vec<CallNode>,
    watch: &mut Watch,
) -> Result<(), Failure> {
    let Executor {
        store, opts, epoch, ..
    } = *ex;
    let unfinished = |message: String| Failure {
        code: EXIT_UNFINISHED,
        message,
    };
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
        let sessions = store.session_store(target)?;
        let (adapter, transport, session) = target
            .connect(opts.request_timeout_ms, kept, Some(sessions.clone()))
            .map_err(unfinished)?;
        let (approvals_tx, approvals_rx) = mpsc::unbounded_channel();
        let (inputs_tx, inputs_rx) = mpsc::unbounded_channel();
        // Ids apart across incarnations and below 2^40 (the extension adapter's own ids start there).
        let rpc_id_base = (unix_ms() / 1000 % 1_000_000) * 1_000_000;
        let mut runner = Runner::new(
            cfg.clone(),
            epoch,
            origin,
            adapter,
            scoped.clone(),
            Box::new(TraceObserver(watch.notes.clone())),
            approvals_tx,
            unix_ms(),
            rpc_id_base,
        )
        // Two processes started in the same second share an id base; the pid tells them apart.
        .with_process_id((u64::from(std::process::id()) << 32) ^ unix_ms());
        if let Some(hook) = crash_hook::from_env().map_err(Failure::usage)? {
            runner = runner.with_crash_points(Box::new(hook));
        }
        let gate_task = tokio::spawn(approve::serve(
            ex.gate.clone(),
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
                exit = &mut handle => break exit.map_err(|e| unfinished(format!("the executor stopped: {e}")))?,
                _ = &mut ctrl_c => {
                    let _ = inputs_tx.send(Input::Shutdown);
                    let _ = (&mut handle).await;
                    gate_task.abort();
                    return Err(unfinished("interrupted; the call stays in flight (toolop resume picks it up)".into()));
                }
                _ = tick => {}
            }
            // A failed read here is the runner's failure too: it stops and says so.
            let Ok(records) = records_of(&ledger, &nodes) else {
                continue;
            };
            watch.progress.update(&records);
            keep_session(&*sessions, session.as_ref(), &mut last_kept);
            submit.retain(|s| !records.iter().any(|r| r.call_node_id == s.id));
            if settled(&records, &nodes, &watch.notes) {
                let _ = inputs_tx.send(Input::Shutdown);
            }
            if Instant::now() > deadline {
                let _ = inputs_tx.send(Input::Shutdown);
            }
        };
        gate_task.abort();
        keep_session(&*sessions, session.as_ref(), &mut last_kept);
        if let Exit::LedgerFailed(error) = exit {
            return Err(store.failure(LedgerError::Storage(error)));
        }
        let records = records_of(&ledger, &nodes).map_err(|e| store.failure(e))?;
        match exit {
            _ if settled(&records, &nodes, &watch.notes) => return Ok(()),
            Exit::Shutdown if Instant::now() > deadline => {
                return Err(unfinished("gave up waiting (wait budget exceeded)".into()))
            }
            Exit::Shutdown => return Ok(()),
            Exit::EventLimit => return Err(unfinished("the executor hit its event limit".into())),
            Exit::Crashed(_) => {
                return Err(unfinished("the executor stopped at a fail point".into()))
            }
            Exit::LedgerFailed(_) => unreachable!("handled above"),
            Exit::Disconnected | Exit::HandshakeFailed(_) if restarts >= RESTARTS_MAX => {
                return Err(unfinished(match exit {
                    Exit::HandshakeFailed(reason) => {
                        format!("cannot negotiate with {}: {reason}", target.describe())
                    }
                    _ => format!(
                        "lost the connection to {} {} times",
                        target.describe(),
                        restarts + 1
                    ),
                }));
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
/// server that scopes tasks to sessions shows them to that session only). The transport keeps
/// each session it opens through the same swap; this retries one its swap could not write, and
/// never overwrites a newer session another process kept (an unconditional write here did,
/// beside the swap).
fn keep_session(
    sessions: &dyn SessionStore,
    handle: Option<&SessionHandle>,
    last: &mut Option<KeptSession>,
) {
    let Some(current) = handle.and_then(|h| h.lock().expect("session lock").clone()) else {
        return;
    };
    if last.as_ref() != Some(&current) {
        let expected = last.as_ref().map(|k| k.session_id.as_str());
        if sessions.swap(expected, &current).is_some() {
            *last = Some(current);
        }
    }
}

/// The records of `nodes` that exist, in id order.
fn records_of(
    ledger: &SharedLedger,
    nodes: &BTreeSet<String>,
) -> Result<Vec<ToolOperation>, LedgerError> {
    let l = ledger.lock().expect("ledger lock");
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        out.extend(l.by_call_node(n)?);
    }
    Ok(out)
}

/// Nothing left for this process to do: every node has a record that is final, or that the
/// ledger fenced off for a newer epoch.
fn settled(records: &[ToolOperation], nodes: &BTreeSet<String>, notes: &SharedNotes) -> bool {
    let notes = notes.lock().expect("notes lock");
    records.len() == nodes.len()
        && records
            .iter()
            .all(|r| r.local_state.is_final() || notes.fenced.contains_key(&r.call_node_id))
}

#[cfg(test)]
mod tests {
    use super::mint_submission_key;

    #[test]
    fn a_minted_key_is_a_uuid4_of_36_characters() {
        let key = mint_submission_key("report-0/1765000000000/4242");
        assert_eq!(key.len(), 36, "{key}");
        let parsed = uuid::Uuid::parse_str(&key).expect("a UUID");
        assert_eq!(parsed.get_version(), Some(uuid::Version::Random), "{key}");
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{key}");
        assert_eq!(
            parsed.hyphenated().to_string(),
            key,
            "lower case, hyphenated"
        );
        assert_eq!(key, mint_submission_key("report-0/1765000000000/4242"));
        assert_ne!(key, mint_submission_key("report-0/1765000000001/4242"));
    }
}
