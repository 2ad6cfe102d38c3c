//! The lanes of a series: one per protocol the executor speaks, each with the executor's adapter
//! and the fake server (codec and task service) it talks to.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use toolop::protocol::aip151::{Aip151Adapter, Aip151Config};
use toolop::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use toolop::protocol::mcp_tasks_ext::McpTasksExtAdapter;
use toolop::protocol::Adapter;

use super::Params;
use crate::fake::codec::FakeTool;
use crate::fake::{server_for, FakeServer, ServerSetup};
use crate::scenario::{Protocol, Scenario};

fn tools(sc: &Scenario) -> Vec<FakeTool> {
    sc.workload
        .tools
        .iter()
        .map(|t| FakeTool {
            name: t.name.clone(),
            task_support: t.task_support,
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

/// The fake server of lane `lane`, speaking `protocol`. The primary lane uses the drawn
/// profile, a successor lane its protocol's first.
pub fn server(sc: &Scenario, params: &Params, protocol: Protocol, lane: usize) -> FakeServer {
    // Each lane's server draws from its own stream of the series seed.
    let rng = ChaCha8Rng::seed_from_u64(params.server_seed.wrapping_add(lane as u64));
    let profile = if lane == 0 {
        params.profile
    } else {
        protocol.profiles()[0]
    };
    let setup = ServerSetup {
        profile,
        toolop_extensions: params.toolop_extensions,
        poll_interval_ms: sc.server.poll_interval_ms,
        max_ttl_ms: params.server_max_ttl_ms,
        tools: tools(sc),
        aip: sc.aip.clone(),
    };
    server_for(protocol, &setup, rng)
}

/// The executor's adapter for one lane.
pub fn adapter(sc: &Scenario, protocol: Protocol) -> Box<dyn Adapter + Send> {
    match protocol {
        Protocol::Aip151 => Box::new(Aip151Adapter::new(aip_config(sc))),
        Protocol::McpTasksExt => Box::new(McpTasksExtAdapter::new()),
        Protocol::Mcp20251125 => Box::new(Mcp20251125Adapter::new()),
    }
}
