//! What the seed draws for a series, in one fixed order, and how a schedule edits it.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::SeriesResult;
use crate::fake::script::{ScriptOutcome, TaskScript};
use crate::scenario::{Scenario, ServerProfile};
use crate::series::faults::{FaultKind, FaultProfile, Schedule};

/// Everything the seed drew for one series, printed in one block at the start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Params {
    pub scenario: String,
    pub seed: u64,
    pub profile: ServerProfile,
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
    /// The cancel is an operator's request through the ledger, not the caller's click.
    pub cancel_by_request: bool,
    pub detach_at_ms: Option<u64>,
}

pub(super) fn draw_in(rng: &mut ChaCha8Rng, [lo, hi]: [u64; 2]) -> u64 {
    rng.gen_range(lo..=hi)
}

/// Draw every parameter of the series from its seed, in a fixed order.
pub fn draw_params(sc: &Scenario, seed: u64) -> Params {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let profile = sc.server.profiles[rng.gen_range(0..sc.server.profiles.len())];
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
        let script = TaskScript {
            call_node: id.clone(),
            duration_ms,
            outcome,
            text: format!("result of {id}"),
            input_at_ms,
            blocks,
        };
        let submit_at_ms = rng.gen_range(0..=sc.workload.start_spread_ms);
        let caller = &sc.workload.caller;
        let cancel_at_ms = rng
            .gen_bool(caller.cancel_rate)
            .then(|| submit_at_ms + draw_in(&mut rng, caller.cancel_after_ms));
        let detach_at_ms = rng
            .gen_bool(caller.detach_rate)
            .then(|| submit_at_ms + draw_in(&mut rng, caller.cancel_after_ms));
        nodes.push(NodeParams {
            id,
            tool: tool.name.clone(),
            script,
            submit_at_ms,
            cancel_at_ms,
            cancel_by_request: false,
            detach_at_ms,
        });
    }
    let server_seed = rng.gen();
    let net_seed = rng.gen();
    let approval_seed = rng.gen();
    let jitter_seed = rng.gen();
    let (max_rates, max_rates_drawn_last): (BTreeMap<_, _>, BTreeMap<_, _>) = sc
        .faults
        .max_rates()
        .into_iter()
        .partition(|(f, _)| !f.drawn_last());
    let mut faults = FaultProfile::draw(&max_rates, sc.faults.swarm_enable_rate, &mut rng);
    let short_ttl = draw_in(&mut rng, sc.faults.short_ttl_ms);
    let server_max_ttl_ms = if faults.rate(FaultKind::ServerDeletesRunningTask) > 0.0 {
        Some(short_ttl)
    } else {
        sc.server.max_ttl_ms
    };
    let rollback_roll: f64 = rng.gen();
    let [lo, hi] = sc.faults.rollback_at_ms;
    let hi = hi.min(sc.faults.safety_window_ms.saturating_sub(1));
    let rollback_t = rng.gen_range(lo.min(hi)..=hi);
    let rollback_at_ms = (rollback_roll < faults.rate(FaultKind::Rollback)).then_some(rollback_t);
    // Drawn last, so that every draw above is the one it was before requests existed.
    let by_request = sc.workload.caller.cancel_by_request_rate;
    if by_request > 0.0 {
        for n in nodes.iter_mut().filter(|n| n.cancel_at_ms.is_some()) {
            n.cancel_by_request = rng.gen_bool(by_request);
        }
    }
    // After everything else too (session 38): every scenario offered the extensions in every
    // series until then, and a certain draw takes nothing from the generator, so a series that
    // still offers them is the one it was. A series without them runs as against a real SDK
    // server: no idempotency key, no lookup by key, no result digest.
    let toolop_extensions = rng.gen_bool(sc.server.toolop_extensions_rate);
    // Faults added since (session 41) are drawn after all of that, for the same reason.
    let late = FaultProfile::draw(&max_rates_drawn_last, sc.faults.swarm_enable_rate, &mut rng);
    faults.rates.extend(late.rates);
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
pub fn params_with(
    sc: &Scenario,
    seed: u64,
    schedule: Option<&Schedule>,
) -> Result<Params, String> {
    let mut p = draw_params(sc, seed);
    let Some(s) = schedule else { return Ok(p) };
    if let Some(keep) = &s.nodes {
        if let Some(bad) = keep.iter().find(|id| !p.nodes.iter().any(|n| &&n.id == id)) {
            let ids: Vec<&str> = p.nodes.iter().map(|n| n.id.as_str()).collect();
            return Err(format!(
                "schedule keeps call node {bad}, which seed {seed} did not draw (it drew {})",
                ids.join(" ")
            ));
        }
        p.nodes.retain(|n| keep.contains(&n.id));
    }
    p.rollback_at_ms = match (s.rollback, s.rollback_at_ms.or(p.rollback_at_ms)) {
        (false, _) => None,
        (true, Some(t)) => Some(t),
        (true, None) => {
            return Err(format!(
                "schedule: rollback = true needs rollback_at_ms (seed {seed} drew no rollback)"
            ))
        }
    };
    let drawn_short = (p.faults.rate(FaultKind::ServerDeletesRunningTask) > 0.0)
        .then_some(p.server_max_ttl_ms)
        .flatten();
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
        sets: vec![],
        seed: r.params.seed,
        checker: None,
        rollback: r.params.rollback_at_ms.is_some(),
        rollback_at_ms: r.params.rollback_at_ms.or(drawn.rollback_at_ms),
        server_deletes_running_task: short,
        short_ttl_ms: if short {
            r.params.server_max_ttl_ms
        } else {
            None
        },
        nodes: Some(r.params.nodes.iter().map(|n| n.id.clone()).collect()),
        shrunk_from: None,
        firings: r.firings.clone(),
    }
}

impl Params {
    /// The parameter block printed before a series runs.
    pub fn render(&self) -> String {
        let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let [lo, hi] = self.latency_ms;
        let mut s = format!(
            "series scenario={} seed={}\n  server profile={} toolop_extensions={} max_ttl_ms={} latency_ms=[{lo}, {hi}]\n  faults: {}\n  rollback_at_ms={}\n  sub-seeds server={} net={} approval={} jitter={}\n",
            self.scenario,
            self.seed,
            self.profile.name(),
            self.toolop_extensions,
            opt(self.server_max_ttl_ms),
            self.faults.render(),
            opt(self.rollback_at_ms),
            self.server_seed,
            self.net_seed,
            self.approval_seed,
            self.jitter_seed
        );
        for n in &self.nodes {
            let inputs: Vec<String> = n.script.input_at_ms.iter().map(u64::to_string).collect();
            let outcome = serde_json::to_value(n.script.outcome)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            s.push_str(&format!(
                "  {} tool={} submit_at={}ms duration={}ms outcome={outcome} inputs_at=[{}] blocks={} cancel_at={}{} detach_at={}\n",
                n.id,
                n.tool,
                n.submit_at_ms,
                n.script.duration_ms,
                inputs.join(", "),
                n.script.blocks,
                opt(n.cancel_at_ms),
                if n.cancel_by_request && n.cancel_at_ms.is_some() {
                    " (a request through the ledger)"
                } else {
                    ""
                },
                opt(n.detach_at_ms)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operators' requests are drawn after everything else: a scenario that turns them on
    /// draws every other parameter as before (the trace of a series without a request keeps
    /// its hash), and only cancelled call nodes are requests.
    #[test]
    fn requests_leave_every_other_draw_as_it_was() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/mcp_faults.toml");
        let mut with = Scenario::load(&path).expect("a default scenario loads");
        assert!(with.workload.caller.cancel_by_request_rate > 0.0);
        // The extensions' draw comes after the requests', and the faults drawn last after that
        // (their own tests are below).
        with.server.toolop_extensions_rate = 1.0;
        without_late_faults(&mut with);
        let mut without = with.clone();
        without.workload.caller.cancel_by_request_rate = 0.0;
        let mut requests = 0;
        for seed in 0..200 {
            let a = draw_params(&with, seed);
            let mut b = draw_params(&without, seed);
            for (x, y) in a.nodes.iter().zip(b.nodes.iter_mut()) {
                assert!(!y.cancel_by_request);
                assert!(!x.cancel_by_request || x.cancel_at_ms.is_some());
                requests += u32::from(x.cancel_by_request);
                y.cancel_by_request = x.cancel_by_request;
            }
            assert_eq!(a, b, "seed {seed}");
        }
        assert!(requests > 20, "{requests} requests in 200 series");
    }

    /// Series without the toolop extensions are drawn last of all: a scenario that offers them
    /// in only some series draws every other parameter as one that offers them always (the
    /// trace of a series that offers them keeps its hash), whatever its requests.
    #[test]
    fn the_extensions_draw_leaves_every_other_draw_as_it_was() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/mcp_faults.toml");
        let mut some = Scenario::load(&path).expect("a default scenario loads");
        assert!(some.server.toolop_extensions_rate < 1.0);
        // Drawn after the extensions (their own test is below).
        without_late_faults(&mut some);
        let mut always = some.clone();
        always.server.toolop_extensions_rate = 1.0;
        let mut without = 0;
        for seed in 0..200 {
            let a = draw_params(&some, seed);
            let mut b = draw_params(&always, seed);
            assert!(b.toolop_extensions);
            without += u32::from(!a.toolop_extensions);
            b.toolop_extensions = a.toolop_extensions;
            assert_eq!(a, b, "seed {seed}");
        }
        assert!(
            (60..=140).contains(&without),
            "{without} of 200 series without"
        );
    }

    fn without_late_faults(sc: &mut Scenario) {
        sc.faults
            .rates
            .retain(|name, _| FaultKind::from_name(name).is_some_and(|f| !f.drawn_last()));
    }

    /// Faults added since session 41 are drawn after everything else: a scenario that adds one
    /// draws every other parameter as before (the trace of a series that does not enable it
    /// keeps its hash), and only the late faults' rates differ.
    #[test]
    fn faults_drawn_last_leave_every_other_draw_as_it_was() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut seen_late = 0;
        for file in ["mcp_faults.toml", "mcp_ext_faults.toml"] {
            let with = Scenario::load(&dir.join(file)).expect("a default scenario loads");
            let late: Vec<FaultKind> = with
                .faults
                .max_rates()
                .into_keys()
                .filter(|f| f.drawn_last())
                .collect();
            assert!(!late.is_empty(), "{file} draws no fault last");
            let mut without = with.clone();
            without_late_faults(&mut without);
            for seed in 0..200 {
                let mut a = draw_params(&with, seed);
                let b = draw_params(&without, seed);
                seen_late += late.iter().filter(|f| a.faults.rate(**f) > 0.0).count();
                a.faults.rates.retain(|f, _| !f.drawn_last());
                assert_eq!(a, b, "{file} seed {seed}");
            }
        }
        assert!(seen_late > 100, "{seen_late} late faults enabled");
    }
}
