//! One series: (scenario, seed) -> world -> trace. The world holds the executor (the real
//! `toolop` runner), the fake server, the network, the approval agent and the caller, all
//! inside one madsim runtime on one fresh OS thread. Everything random comes from the seed.

use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};
use toolop::ledger::{Ledger, MemoryLedger};
use toolop::runner::{CallNode, Input};

mod actors;
mod caller;
mod executor;
mod servers;

use crate::fake::mcp::{FakeMcpServer, Profile, ScriptOutcome, ServerConfig, TaskScript};
use crate::faults::{FaultKind, FaultPlan, FaultProfile, Firing, PlanMode, Schedule, SharedPlan};
use crate::net::{Net, NetCtx, SharedNet};
use crate::scenario::Scenario;
use crate::trace::{SharedTrace, Trace, What};

/// Everything the seed drew for one series, printed in one block at the start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Params {
    pub scenario: String,
    pub seed: u64,
    pub profile: String,
    pub toolop_extensions: bool,
    pub latency_ms: [u64; 2],
    pub nodes: Vec<NodeParams>,
    pub server_seed: u64,
    pub net_seed: u64,
    pub approval_seed: u64,
    pub jitter_seed: u64,
    pub faults: FaultProfile,
    /// Server maximum ttl for this series (shortened when running tasks are to be deleted).
    pub server_max_ttl_ms: Option<u64>,
    /// When an operator rolls the executor back (a new epoch takes over), if at all.
    pub rollback_at_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeParams {
    pub id: String,
    pub tool: String,
    pub script: TaskScript,
    pub submit_at_ms: u64,
    pub cancel_at_ms: Option<u64>,
    pub detach_at_ms: Option<u64>,
}

fn profile_of(name: &str) -> Profile {
    match name {
        "ts-sdk" => Profile::TsSdk,
        "python-sdk" => Profile::PythonSdk,
        _ => Profile::SpecStrict,
    }
}

fn draw_in(rng: &mut ChaCha8Rng, [lo, hi]: [u64; 2]) -> u64 {
    rng.gen_range(lo..=hi)
}

/// Draw every parameter of the series from its seed, in a fixed order.
pub fn draw_params(sc: &Scenario, seed: u64) -> Params {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let profile = sc.server.profiles[rng.gen_range(0..sc.server.profiles.len())].clone();
    let toolop_extensions = rng.gen_bool(sc.server.toolop_extensions_rate);
    let n = rng.gen_range(sc.workload.call_nodes[0]..=sc.workload.call_nodes[1]);
    let total_weight: u32 = sc.workload.tools.iter().map(|t| t.weight).sum();
    let mut nodes = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut pick = rng.gen_range(0..total_weight);
        let tool = sc.workload.tools.iter().find(|t| {
            if pick < t.weight {
                true
            } else {
                pick -= t.weight;
                false
            }
        });
        let tool = tool.expect("weights sum covers the draw");
        let duration_ms = draw_in(&mut rng, tool.duration_ms);
        let roll: f64 = rng.gen();
        let outcome = if roll < tool.fail_rate {
            ScriptOutcome::Failed
        } else if roll < tool.fail_rate + tool.tool_error_rate {
            ScriptOutcome::ToolError
        } else {
            ScriptOutcome::Completed
        };
        let mut input_at_ms = vec![];
        if duration_ms > 1 && rng.gen_bool(tool.input_rate) {
            for _ in 0..rng.gen_range(1..=2) {
                input_at_ms.push(rng.gen_range(0..duration_ms));
            }
            input_at_ms.sort_unstable();
            input_at_ms.dedup();
        }
        let blocks = rng.gen_range(tool.blocks[0]..=tool.blocks[1]);
        let id = format!("n{i:03}");
        let script = TaskScript { call_node: id.clone(), duration_ms, outcome, text: format!("result of {id}"), input_at_ms, blocks };
        let submit_at_ms = rng.gen_range(0..=sc.workload.start_spread_ms);
        let caller = &sc.workload.caller;
        let cancel_at_ms = rng.gen_bool(caller.cancel_rate).then(|| submit_at_ms + draw_in(&mut rng, caller.cancel_after_ms));
        let detach_at_ms = rng.gen_bool(caller.detach_rate).then(|| submit_at_ms + draw_in(&mut rng, caller.cancel_after_ms));
        nodes.push(NodeParams { id, tool: tool.name.clone(), script, submit_at_ms, cancel_at_ms, detach_at_ms });
    }
    let server_seed = rng.gen();
    let net_seed = rng.gen();
    let approval_seed = rng.gen();
    let jitter_seed = rng.gen();
    let faults = FaultProfile::draw(&sc.faults.max_rates(), sc.faults.swarm_enable_rate, &mut rng);
    let short_ttl = draw_in(&mut rng, sc.faults.short_ttl_ms);
    let server_max_ttl_ms = if faults.rate(FaultKind::ServerDeletesRunningTask) > 0.0 { Some(short_ttl) } else { sc.server.max_ttl_ms };
    let rollback_roll: f64 = rng.gen();
    let rollback_t = rng.gen_range(0..=sc.faults.safety_window_ms.max(1));
    let rollback_at_ms = (rollback_roll < faults.rate(FaultKind::Rollback)).then_some(rollback_t);
    Params {
        scenario: sc.name.clone(),
        seed,
        profile,
        toolop_extensions,
        latency_ms: sc.network.latency_ms,
        nodes,
        server_seed,
        net_seed,
        approval_seed,
        jitter_seed,
        faults,
        server_max_ttl_ms,
        rollback_at_ms,
    }
}

/// The parameters a schedule runs with: what the seed drew, with the schedule's node filter,
/// rollback and short-ttl switches applied. Without a schedule, exactly [`draw_params`].
pub fn params_with(sc: &Scenario, seed: u64, schedule: Option<&Schedule>) -> Result<Params, String> {
    let mut p = draw_params(sc, seed);
    let Some(s) = schedule else { return Ok(p) };
    if let Some(keep) = &s.nodes {
        if let Some(bad) = keep.iter().find(|id| !p.nodes.iter().any(|n| &&n.id == id)) {
            let ids: Vec<&str> = p.nodes.iter().map(|n| n.id.as_str()).collect();
            return Err(format!("schedule keeps call node {bad}, which seed {seed} did not draw (it drew {})", ids.join(" ")));
        }
        p.nodes.retain(|n| keep.contains(&n.id));
    }
    p.rollback_at_ms = match (s.rollback, s.rollback_at_ms.or(p.rollback_at_ms)) {
        (false, _) => None,
        (true, Some(t)) => Some(t),
        (true, None) => return Err(format!("schedule: rollback = true needs rollback_at_ms (seed {seed} drew no rollback)")),
    };
    let drawn_short = (p.faults.rate(FaultKind::ServerDeletesRunningTask) > 0.0).then_some(p.server_max_ttl_ms).flatten();
    p.server_max_ttl_ms = match (s.server_deletes_running_task, s.short_ttl_ms.or(drawn_short)) {
        (false, _) => sc.server.max_ttl_ms,
        (true, Some(t)) => Some(t),
        (true, None) => {
            return Err(format!("schedule: server_deletes_running_task = true needs short_ttl_ms (seed {seed} drew no short ttl)"))
        }
    };
    Ok(p)
}

/// The schedule a finished series ran: every firing, the rollback and short-ttl switches as
/// they were, every node kept. Replayed unmodified it reproduces the series byte for byte.
pub fn schedule_of(scenario_file: &str, r: &SeriesResult, sc: &Scenario) -> Schedule {
    let drawn = draw_params(sc, r.params.seed);
    let short = r.params.server_max_ttl_ms != sc.server.max_ttl_ms;
    Schedule {
        scenario: scenario_file.to_string(),
        seed: r.params.seed,
        checker: None,
        rollback: r.params.rollback_at_ms.is_some(),
        rollback_at_ms: r.params.rollback_at_ms.or(drawn.rollback_at_ms),
        server_deletes_running_task: short,
        short_ttl_ms: if short { r.params.server_max_ttl_ms } else { None },
        nodes: Some(r.params.nodes.iter().map(|n| n.id.clone()).collect()),
        shrunk_from: None,
        firings: r.firings.clone(),
    }
}

impl Params {
    /// The parameter block printed before a series runs.
    pub fn render(&self) -> String {
        let mut s = format!(
            "series scenario={} seed={}\n  server profile={} toolop_extensions={} max_ttl_ms={:?} latency_ms={:?}\n  faults: {}\n  rollback_at_ms={:?}\n  sub-seeds server={} net={} approval={} jitter={}\n",
            self.scenario,
            self.seed,
            self.profile,
            self.toolop_extensions,
            self.server_max_ttl_ms,
            self.latency_ms,
            self.faults.render(),
            self.rollback_at_ms,
            self.server_seed,
            self.net_seed,
            self.approval_seed,
            self.jitter_seed
        );
        for n in &self.nodes {
            s.push_str(&format!(
                "  {} tool={} submit_at={}ms duration={}ms outcome={:?} inputs_at={:?} blocks={} cancel_at={:?} detach_at={:?}\n",
                n.id, n.tool, n.submit_at_ms, n.script.duration_ms, n.script.outcome, n.script.input_at_ms, n.script.blocks, n.cancel_at_ms, n.detach_at_ms
            ));
        }
        s
    }
}

/// What one series produced.
#[derive(Clone, Debug)]
pub struct SeriesResult {
    pub params: Params,
    pub trace: Trace,
    pub hash: String,
    pub end_reason: String,
    pub end_ms: u64,
    /// Every fault firing, in order: the series' own schedule.
    pub firings: Vec<Firing>,
    /// Decision points (asks) per fault kind, fired or not.
    pub asks: std::collections::BTreeMap<FaultKind, u64>,
}

/// Run one series on a fresh OS thread (determinism rule: one thread per series).
pub fn run_series(sc: &Scenario, seed: u64) -> Result<SeriesResult, String> {
    run_series_with(sc, seed, None)
}

/// [`run_series`], replaying `schedule` when given (its scenario and seed fields are not read:
/// `sc` and `seed` are what runs).
pub fn run_series_with(sc: &Scenario, seed: u64, schedule: Option<&Schedule>) -> Result<SeriesResult, String> {
    let sc = sc.clone();
    let schedule = schedule.cloned();
    std::thread::Builder::new()
        .name(format!("series-{seed}"))
        .spawn(move || run_series_here_with(&sc, seed, schedule.as_ref()))
        .map_err(|e| format!("cannot start the series thread: {e}"))?
        .join()
        .map_err(|p| format!("series {seed} panicked: {}", panic_text(&p)))?
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// Run one series on the current thread. Callers must give each series its own thread.
pub fn run_series_here(sc: &Scenario, seed: u64) -> Result<SeriesResult, String> {
    run_series_here_with(sc, seed, None)
}

/// [`run_series_here`], replaying `schedule` when given.
#[cfg(madsim)]
pub fn run_series_here_with(sc: &Scenario, seed: u64, schedule: Option<&Schedule>) -> Result<SeriesResult, String> {
    let params = params_with(sc, seed, schedule)?;
    let mode = schedule.map_or(PlanMode::Draw, |s| PlanMode::Replay(s.decisions()));
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let sc = sc.clone();
    Ok(rt.block_on(async move { world_main_with(sc, params, mode).await }))
}

#[cfg(not(madsim))]
pub fn run_series_here_with(_sc: &Scenario, _seed: u64, _schedule: Option<&Schedule>) -> Result<SeriesResult, String> {
    Err("this build has no simulator: build toolop-sim with RUSTFLAGS=\"--cfg madsim\" (use `make`)".into())
}


/// Everything the actors of one series share.
pub(crate) struct World {
    pub sc: Scenario,
    pub params: Params,
    pub origin: Instant,
    pub trace: SharedTrace,
    pub ledger: Arc<Mutex<MemoryLedger>>,
    pub net: SharedNet,
    /// The fake server of each lane (one per protocol the executor speaks).
    pub servers: Vec<Arc<Mutex<Box<dyn crate::fake::server::SimServer>>>>,
    pub plan: SharedPlan,
    /// The current executor's input channel: callers and the approval agent send here.
    pub inputs: Mutex<mpsc::UnboundedSender<Input>>,
    /// What the caller has done so far, so it can retry after an executor restart.
    pub submitted: Mutex<Vec<CallNode>>,
    pub cancelled: Mutex<Vec<String>>,
    /// The adapter the operator retired, if any.
    pub retired: Mutex<Option<toolop::record::AdapterId>>,
}

impl World {
    /// Empty what the world holds once a series is over. Tasks the runtime never finished keep
    /// an `Arc<World>` alive through channel wakers (a cycle madsim does not break on drop);
    /// emptying the world keeps that from leaking a series' worth of memory each time.
    fn defuse(&self) {
        self.net.lock().expect("net lock").shutdown();
        *self.ledger.lock().expect("ledger lock") = MemoryLedger::new();
        let empty = ServerConfig::new(Profile::SpecStrict, vec![]);
        for s in &self.servers {
            *s.lock().expect("server lock") = Box::new(FakeMcpServer::new(empty.clone(), ChaCha8Rng::seed_from_u64(0)));
        }
        *self.inputs.lock().expect("inputs lock") = mpsc::unbounded_channel().0;
        self.submitted.lock().expect("caller lock").clear();
    }

    pub fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.origin).as_millis() as u64
    }

    pub fn push(&self, what: What) {
        let now = self.now_ms();
        self.trace.lock().expect("trace lock").push(now, what);
    }

    pub fn send_input(&self, input: Input) {
        // An executor between incarnations buffers in the new channel; none is ever closed early.
        let _ = self.inputs.lock().expect("inputs lock").send(input);
    }

    pub fn all_settled(&self) -> bool {
        let (records, done) = self.ledger.lock().expect("ledger lock").settled_count().expect("in-memory ledger reads cannot fail");
        records == self.params.nodes.len() && done == records
    }
}


/// The world of one series, to be run inside a madsim runtime seeded with `params.seed`.
pub async fn world_main(sc: Scenario, params: Params) -> SeriesResult {
    world_main_with(sc, params, PlanMode::Draw).await
}

/// [`world_main`] with the fault plan in `mode` (draw, or replay a schedule's firings).
pub async fn world_main_with(sc: Scenario, params: Params, mode: PlanMode) -> SeriesResult {
    let origin = Instant::now();
    let trace: SharedTrace = Arc::new(Mutex::new(Trace::new(sc.limits.max_events)));
    let safety = sc.faults.safety_window_ms;
    let rng = ChaCha8Rng::seed_from_u64(params.net_seed);
    let plan: SharedPlan = Arc::new(Mutex::new(FaultPlan::with_mode(params.faults.clone(), rng, safety, mode)));
    trace.lock().expect("trace lock").push(
        0,
        What::Begin {
            scenario: params.scenario.clone(),
            seed: params.seed,
            protocol: sc.protocol.clone(),
            call_nodes: params.nodes.len() as u32,
            max_qps: sc.gates.max_qps.unwrap_or(sc.executor.max_qps),
            safety_window_ms: safety,
            liveness_bound_ms: sc.faults.liveness_bound_ms,
            faults: params.faults.render(),
        },
    );
    let protocols = servers::lane_protocols(&sc);
    let server_list: Vec<Arc<Mutex<Box<dyn crate::fake::server::SimServer>>>> =
        protocols.iter().enumerate().map(|(lane, p)| Arc::new(Mutex::new(servers::server(&sc, &params, p, lane)))).collect();
    let ledger = Arc::new(Mutex::new(MemoryLedger::new()));
    let (srv_txs, srv_rxs): (Vec<_>, Vec<_>) = protocols.iter().map(|_| mpsc::unbounded_channel()).unzip();
    let ctx = NetCtx {
        trace: trace.clone(),
        plan: plan.clone(),
        ledger: ledger.clone(),
        servers: server_list.clone(),
        origin,
        latency_ms: params.latency_ms,
        request_timeout_ms: sc.executor.request_timeout_ms,
    };
    let net: SharedNet = Arc::new(Mutex::new(Net::new(ctx, srv_txs)));
    let (inputs_tx, inputs_rx) = mpsc::unbounded_channel();
    let world = Arc::new(World {
        sc,
        params,
        origin,
        trace,
        ledger,
        net,
        servers: server_list,
        plan,
        inputs: Mutex::new(inputs_tx),
        submitted: Mutex::new(vec![]),
        cancelled: Mutex::new(vec![]),
        retired: Mutex::new(None),
    });
    for (lane, rx) in srv_rxs.into_iter().enumerate() {
        tokio::spawn(actors::serve(world.clone(), lane, rx));
    }
    let (approvals_tx, approvals_rx) = mpsc::unbounded_channel();
    tokio::spawn(actors::approval_agent(world.clone(), approvals_rx));
    let supervisor = tokio::spawn(executor::supervise(world.clone(), inputs_rx, approvals_tx));
    let end_reason = caller::drive(&world).await;
    world.send_input(Input::Shutdown);
    // The supervisor ends once its executor has seen the shutdown; bounded either way.
    let _ = tokio::time::timeout(Duration::from_secs(5), supervisor).await;
    let snapshot = world.ledger.lock().expect("ledger lock").snapshot().expect("in-memory ledger reads cannot fail");
    let truth = servers::merged_truth(world.servers.iter().map(|s| s.lock().expect("server lock").truth().clone()).collect());
    world.push(What::Final { ledger: snapshot, truth });
    world.push(What::End { reason: end_reason.clone() });
    let end_ms = world.now_ms();
    let trace = std::mem::take(&mut *world.trace.lock().expect("trace lock"));
    let hash = trace.hash();
    let (firings, asks) = world.plan.lock().expect("plan lock").take_record();
    world.defuse();
    SeriesResult { params: world.params.clone(), trace, hash, end_reason, end_ms, firings, asks }
}
