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
use toolop::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use toolop::protocol::ApprovalReply;
use toolop::runner::{ApprovalRequest, CallNode, Input, Runner, SharedLedger};

use crate::fake::mcp::{FakeMcpServer, FakeTool, Profile, ScriptOutcome, ServerConfig, TaskScript};
use crate::net::{Net, SharedNet};
use crate::scenario::Scenario;
use crate::trace::{SharedTrace, Trace, TraceObserver, What};

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
    Params {
        scenario: sc.name.clone(),
        seed,
        profile,
        toolop_extensions,
        latency_ms: sc.network.latency_ms,
        nodes,
        server_seed: rng.gen(),
        net_seed: rng.gen(),
        approval_seed: rng.gen(),
        jitter_seed: rng.gen(),
    }
}

impl Params {
    /// The parameter block printed before a series runs.
    pub fn render(&self) -> String {
        let mut s = format!(
            "series scenario={} seed={}\n  server profile={} toolop_extensions={} latency_ms={:?}\n  sub-seeds server={} net={} approval={} jitter={}\n",
            self.scenario, self.seed, self.profile, self.toolop_extensions, self.latency_ms, self.server_seed, self.net_seed, self.approval_seed, self.jitter_seed
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
}

/// Run one series on a fresh OS thread (determinism rule: one thread per series).
pub fn run_series(sc: &Scenario, seed: u64) -> Result<SeriesResult, String> {
    let sc = sc.clone();
    std::thread::Builder::new()
        .name(format!("series-{seed}"))
        .spawn(move || run_series_here(&sc, seed))
        .map_err(|e| format!("cannot start the series thread: {e}"))?
        .join()
        .map_err(|p| format!("series {seed} panicked: {}", panic_text(&p)))?
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// Run one series on the current thread. Callers must give each series its own thread.
#[cfg(madsim)]
pub fn run_series_here(sc: &Scenario, seed: u64) -> Result<SeriesResult, String> {
    let params = draw_params(sc, seed);
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let sc = sc.clone();
    Ok(rt.block_on(async move { world_main(sc, params).await }))
}

#[cfg(not(madsim))]
pub fn run_series_here(_sc: &Scenario, _seed: u64) -> Result<SeriesResult, String> {
    Err("this build has no simulator: build toolop-sim with RUSTFLAGS=\"--cfg madsim\" (use `make`)".into())
}

struct World {
    sc: Scenario,
    params: Params,
    origin: Instant,
    trace: SharedTrace,
    ledger: Arc<Mutex<MemoryLedger>>,
    net: SharedNet,
    server: Arc<Mutex<FakeMcpServer>>,
}

impl World {
    fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.origin).as_millis() as u64
    }

    fn push(&self, what: What) {
        let now = self.now_ms();
        self.trace.lock().expect("trace lock").push(now, what);
    }

    fn all_settled(&self) -> bool {
        let l = self.ledger.lock().expect("ledger lock");
        let recs = l.records();
        recs.len() == self.params.nodes.len() && recs.iter().all(|r| r.local_state.is_final())
    }
}

/// The world of one series, to be run inside a madsim runtime seeded with `params.seed`.
pub async fn world_main(sc: Scenario, params: Params) -> SeriesResult {
    let origin = Instant::now();
    let trace: SharedTrace = Arc::new(Mutex::new(Trace::new(sc.limits.max_events)));
    let (srv_tx, srv_rx) = mpsc::unbounded_channel();
    let net: SharedNet = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(params.net_seed), params.latency_ms, srv_tx, trace.clone(), origin)));
    let tools = sc
        .workload
        .tools
        .iter()
        .map(|t| FakeTool {
            name: t.name.clone(),
            task_support: t.task_support.as_deref().map(|s| match s {
                "required" => "required",
                "optional" => "optional",
                _ => "forbidden",
            }),
            sync_upper_bound_ms: t.sync_upper_bound_ms,
        })
        .collect();
    let server_cfg = ServerConfig {
        profile: profile_of(&params.profile),
        toolop_extensions: params.toolop_extensions,
        poll_interval_ms: sc.server.poll_interval_ms,
        max_ttl_ms: sc.server.max_ttl_ms,
        tools,
    };
    let server = Arc::new(Mutex::new(FakeMcpServer::new(server_cfg, ChaCha8Rng::seed_from_u64(params.server_seed))));
    let world = Arc::new(World { sc, params, origin, trace, ledger: Arc::new(Mutex::new(MemoryLedger::new())), net, server });

    tokio::spawn(serve(world.clone(), srv_rx));
    let (inputs_tx, inputs_rx) = mpsc::unbounded_channel();
    let (approvals_tx, approvals_rx) = mpsc::unbounded_channel();
    tokio::spawn(approval_agent(world.clone(), approvals_rx, inputs_tx.clone()));
    let runner = start_executor(&world, 1, 1, inputs_rx, approvals_tx);
    let end_reason = drive_caller(&world, &inputs_tx).await;
    let _ = inputs_tx.send(Input::Shutdown);
    // Give the runner its turn to see the shutdown; it ends on the next poll of its loop.
    let _ = tokio::time::timeout(Duration::from_secs(1), runner).await;
    world.push(What::End { reason: end_reason.clone() });
    let end_ms = world.now_ms();
    let trace = world.trace.lock().expect("trace lock").clone();
    let hash = trace.hash();
    SeriesResult { params: world.params.clone(), trace, hash, end_reason, end_ms }
}

fn start_executor(
    world: &Arc<World>,
    epoch: u64,
    incarnation: u32,
    inputs: mpsc::UnboundedReceiver<Input>,
    approvals: mpsc::UnboundedSender<ApprovalRequest>,
) -> tokio::task::JoinHandle<toolop::runner::Exit> {
    let transport = Net::connect(&world.net, incarnation);
    let ledger: SharedLedger = world.ledger.clone();
    let observer = TraceObserver { trace: world.trace.clone(), epoch, incarnation };
    let runner = Runner::new(
        world.sc.executor.clone(),
        epoch,
        world.origin,
        Mcp20251125Adapter::new(),
        ledger,
        Box::new(observer),
        approvals,
        world.params.jitter_seed ^ u64::from(incarnation),
        u64::from(incarnation) * 1_000_000_000,
    );
    tokio::spawn(runner.run(transport, inputs))
}

/// The fake server's task: frames in, frames out, and its own clock-driven progress.
async fn serve(world: Arc<World>, mut rx: mpsc::UnboundedReceiver<(u32, toolop::transport::OutFrame)>) {
    loop {
        let now = world.now_ms();
        let next = world.server.lock().expect("server lock").next_event_at_ms();
        // Without pending work the server still wakes each minute: every wait is bounded.
        let wake = next.unwrap_or(now + 60_000).max(now);
        let sleep = tokio::time::sleep_until(world.origin + Duration::from_millis(wake));
        tokio::select! {
            biased;
            msg = rx.recv() => {
                let Some((conn, frame)) = msg else { return };
                let now = world.now_ms();
                let mut out = world.server.lock().expect("server lock").advance(now);
                out.extend(world.server.lock().expect("server lock").handle(now, frame));
                let mut net = world.net.lock().expect("net lock");
                for f in out {
                    // Replies go back on the connection they came from; the rest to the newest.
                    let to = if f.request_id.is_some() { conn } else { net.latest_connection().unwrap_or(conn) };
                    net.to_executor(to, f);
                }
            }
            _ = sleep => {
                let now = world.now_ms();
                let out = world.server.lock().expect("server lock").advance(now);
                let mut net = world.net.lock().expect("net lock");
                if let Some(to) = net.latest_connection() {
                    for f in out {
                        net.to_executor(to, f);
                    }
                }
            }
        }
    }
}

/// Answers approval requests after a drawn delay; sometimes declines, sometimes stays silent.
async fn approval_agent(world: Arc<World>, mut rx: mpsc::UnboundedReceiver<ApprovalRequest>, inputs: mpsc::UnboundedSender<Input>) {
    let mut rng = ChaCha8Rng::seed_from_u64(world.params.approval_seed);
    let spec = world.sc.approval.clone();
    while let Some(req) = rx.recv().await {
        let delay_ms = draw_in(&mut rng, spec.delay_ms);
        let roll: f64 = rng.gen();
        let reply = if roll < spec.silent_rate {
            world.push(What::Approval { node: req.node.clone(), round: req.round, action: "silent".into() });
            continue;
        } else if roll < spec.silent_rate + spec.decline_rate {
            ApprovalReply::Decline
        } else {
            ApprovalReply::Accept { content: serde_json::json!({"ok": true}) }
        };
        let (world, inputs) = (world.clone(), inputs.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let action = match &reply {
                ApprovalReply::Accept { .. } => "accept",
                ApprovalReply::Decline => "decline",
                ApprovalReply::Cancel => "cancel",
            };
            world.push(What::Approval { node: req.node.clone(), round: req.round, action: action.into() });
            let _ = inputs.send(Input::Approval { node: req.node, round: req.round, schema_digest: req.schema_digest, reply });
        });
    }
}

/// The caller: submits, cancels and detaches at drawn times, then waits (bounded) until every
/// call node has a receipt or sits in manual reconciliation.
async fn drive_caller(world: &Arc<World>, inputs: &mpsc::UnboundedSender<Input>) -> String {
    let mut plan: Vec<(u64, u8, Input)> = vec![];
    for n in &world.params.nodes {
        let node = CallNode {
            id: n.id.clone(),
            tool: n.tool.clone(),
            arguments: n.script.to_arguments(),
            submission_key: format!("{}:{}:{}", world.params.scenario, world.params.seed, n.id),
        };
        plan.push((n.submit_at_ms, 0, Input::Submit(node)));
        if let Some(t) = n.cancel_at_ms {
            plan.push((t, 1, Input::Cancel { node: n.id.clone() }));
        }
        if let Some(t) = n.detach_at_ms {
            plan.push((t, 2, Input::Detach { node: n.id.clone() }));
        }
    }
    plan.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (at, _, input) in plan {
        tokio::time::sleep_until(world.origin + Duration::from_millis(at)).await;
        let (action, node) = match &input {
            Input::Submit(n) => ("submit", n.id.clone()),
            Input::Cancel { node } => ("cancel", node.clone()),
            Input::Detach { node } => ("detach", node.clone()),
            _ => ("other", String::new()),
        };
        world.push(What::Caller { action: action.into(), node });
        let _ = inputs.send(input);
    }
    let limit_ms = world.sc.limits.sim_time_ms;
    // Check once a simulated second; the limit bounds the loop.
    for _ in 0..=limit_ms / 1_000 {
        if world.trace.lock().expect("trace lock").truncated {
            return "event limit reached".into();
        }
        if world.all_settled() {
            return "all call nodes settled".into();
        }
        if world.now_ms() >= limit_ms {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    "simulated time limit reached".into()
}
