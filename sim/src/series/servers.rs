//! Building the fake server (and executor adapter) of each lane from the scenario: the lane's
//! protocol decides which fake runs and which adapter talks to it.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use toolop::protocol::aip151::{Aip151Adapter, Aip151Config};
use toolop::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use toolop::protocol::mcp_tasks_ext::McpTasksExtAdapter;
use toolop::protocol::Adapter;

use super::{profile_of, Params};
use crate::fake::aip151::{AipServerConfig, FakeAipServer};
use crate::fake::mcp::{FakeMcpServer, FakeTool, GroundTruth, ServerConfig};
use crate::fake::mcp_ext::{ExtServerConfig, FakeMcpExtServer};
use crate::fake::server::SimServer;
use crate::scenario::Scenario;

fn tools(sc: &Scenario) -> Vec<FakeTool> {
    sc.workload
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
        .collect()
}

fn aip_config(sc: &Scenario) -> Aip151Config {
    Aip151Config {
        submit_path: sc.aip.submit_path.clone(),
        operation_path: sc.aip.operation_path.clone(),
        operations_collection: sc.aip.operations_collection.clone(),
        tools: sc.workload.tools.iter().map(|t| t.name.clone()).collect(),
        dedupe_window_ms: sc.aip.dedupe_window_ms,
        cancel_supported: sc.aip.cancel_supported,
    }
}

/// The protocols of a scenario's lanes, in lane order.
pub fn lane_protocols(sc: &Scenario) -> Vec<String> {
    let mut out = vec![sc.protocol.clone()];
    out.extend(sc.successor.clone());
    out
}

/// The fake server for one lane.
pub fn server(sc: &Scenario, params: &Params, protocol: &str, lane: usize) -> Box<dyn SimServer> {
    // Each lane's server draws from its own stream of the series seed.
    let rng = ChaCha8Rng::seed_from_u64(params.server_seed.wrapping_add(lane as u64));
    match protocol {
        "aip-151" => {
            let mut cfg = AipServerConfig::new(aip_config(sc));
            cfg.toolop_extensions = params.toolop_extensions;
            cfg.preempt_rate = sc.aip.preempt_rate;
            cfg.retention_after_done_ms = sc.aip.retention_after_done_ms;
            Box::new(FakeAipServer::new(cfg, rng))
        }
        "mcp-tasks-ext" => {
            let mut cfg = ExtServerConfig::new(tools(sc));
            cfg.toolop_extensions = params.toolop_extensions;
            cfg.poll_interval_ms = sc.server.poll_interval_ms.unwrap_or(cfg.poll_interval_ms);
            cfg.ttl_ms = params.server_max_ttl_ms;
            Box::new(FakeMcpExtServer::new(cfg, rng))
        }
        _ => {
            let cfg = ServerConfig {
                profile: profile_of(&params.profile),
                toolop_extensions: params.toolop_extensions,
                poll_interval_ms: sc.server.poll_interval_ms,
                max_ttl_ms: params.server_max_ttl_ms,
                tools: tools(sc),
            };
            Box::new(FakeMcpServer::new(cfg, rng))
        }
    }
}

/// The executor's adapter for one lane.
pub fn adapter(sc: &Scenario, protocol: &str) -> Box<dyn Adapter + Send> {
    match protocol {
        "aip-151" => Box::new(Aip151Adapter::new(aip_config(sc))),
        "mcp-tasks-ext" => Box::new(McpTasksExtAdapter::new()),
        _ => Box::new(Mcp20251125Adapter::new()),
    }
}

/// The ground truth of every lane's server as one log (task ids are unique per server, and
/// servers of different lanes never share an id in practice: they draw from different streams).
pub fn merged_truth(truths: Vec<GroundTruth>) -> GroundTruth {
    let mut out = GroundTruth::default();
    for t in truths {
        out.tasks.extend(t.tasks);
        out.sync_runs.extend(t.sync_runs);
        for (k, v) in t.tasks_created_per_call_node {
            *out.tasks_created_per_call_node.entry(k).or_default() += v;
        }
        for (k, v) in t.effects_per_call_node {
            *out.effects_per_call_node.entry(k).or_default() += v;
        }
        out.duplicate_submits_deduped += t.duplicate_submits_deduped;
        out.stale_input_responses.extend(t.stale_input_responses);
    }
    out
}
