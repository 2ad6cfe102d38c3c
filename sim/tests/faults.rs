//! Every fault of the catalogue fires in every protocol that can express it, under that
//! protocol's default fault scenario, and never in one that cannot; each firing is attributed to
//! a call node and the state the trace showed for it.
#![cfg(madsim)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use toolop_sim::scenario::{Protocol, Scenario, ServerTransport};
use toolop_sim::series::faults::{catalogue, FaultKind};
use toolop_sim::series::run_series;
use toolop_sim::trace::What;

const SERIES: u64 = 240;

#[test]
fn every_expressible_fault_fires_in_every_protocol_and_no_other_does() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for (file, protocol) in [
        ("scenarios/mcp_faults.toml", Protocol::Mcp20251125),
        ("scenarios/mcp_ext_faults.toml", Protocol::McpTasksExt),
        ("scenarios/aip151_faults.toml", Protocol::Aip151),
    ] {
        let sc = Scenario::load(&root.join(file)).unwrap();
        assert_eq!(sc.protocol, protocol);
        let mut fired: BTreeMap<FaultKind, u64> = BTreeMap::new();
        for seed in 0..SERIES {
            let r = run_series(&sc, seed).unwrap();
            for e in &r.trace.events {
                if let What::Fault {
                    fault, node, state, ..
                } = &e.what
                {
                    *fired.entry(*fault).or_default() += 1;
                    // A firing that names a node names the state the trace showed for it, except
                    // for a node the executor had not shown yet (a lost first submission, the
                    // commit of a node's first step, a restart met by its first submission).
                    if node.is_some() && state.is_none() {
                        assert!(
                            matches!(
                                fault,
                                FaultKind::LostRequest
                                    | FaultKind::ConnectionDrop
                                    | FaultKind::ReplyToOtherExchange
                                    | FaultKind::LostResponseAfterCreation
                                    | FaultKind::ExecutorCrash
                                    | FaultKind::LedgerSlowCommit
                                    | FaultKind::ProcessPause
                                    | FaultKind::LedgerCommitLostReply
                                    | FaultKind::ServerRestart
                            ),
                            "{} without a state: toolop-sim replay --scenario {file} --seed {seed}",
                            fault.name()
                        );
                    }
                }
            }
        }
        for f in FaultKind::ALL {
            let n = fired.get(&f).copied().unwrap_or(0);
            if catalogue::expresses(protocol, f) {
                assert!(
                    n > 0,
                    "{protocol}: {} never fired in {SERIES} series of {file}",
                    f.name()
                );
            } else {
                assert_eq!(n, 0, "{protocol} cannot express {}, yet it fired", f.name());
            }
        }
    }
}

/// Where a status read carries the end with its result (the tasks extension, AIP-151), such a
/// read is held out of order too: a late end after the executor settled from a newer read is
/// what `no_needless_effect_reconciliation` and `no_stale_overwrite` judge, and before this
/// neither protocol ever produced one (the held read carried no result by rule).
#[test]
fn a_held_read_can_carry_the_end_with_its_result() {
    use toolop_sim::fake::codec::ExchangeKind;
    use toolop_sim::trace::{NetVerdict, Shows};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in [
        "scenarios/mcp_ext_faults.toml",
        "scenarios/aip151_faults.toml",
    ] {
        let sc = Scenario::load(&root.join(file)).unwrap();
        let held_ends: usize = (0..SERIES)
            .map(|seed| {
                let r = run_series(&sc, seed).unwrap();
                r.trace
                    .events
                    .iter()
                    .filter(|e| {
                        matches!(
                            &e.what,
                            What::Net {
                                exchange: ExchangeKind::Poll,
                                verdict: NetVerdict::Held { .. },
                                shows: Some(shows),
                                ..
                            } if matches!(**shows, Shows::Task { result: true, .. })
                        )
                    })
                    .count()
            })
            .sum();
        assert!(
            held_ends > 0,
            "{file}: no held read carried a result in {SERIES} series"
        );
    }
}

/// `tool_redeployed` is the server's answer to a submission, so it counts only for a submission
/// the server received: each firing names the request's frame, and the network carried that
/// frame to the server (not lost, not answered by a replica in front of it), for the same node.
/// Decided in the network's request leg, the fault was counted for requests that never arrived.
#[test]
fn a_redeploy_counts_only_for_a_submission_the_server_received() {
    use toolop_sim::fake::codec::ExchangeKind;
    use toolop_sim::trace::{Dir, FaultDetail, NetVerdict};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let file = "scenarios/mcp_faults.toml";
    let sc = Scenario::load(&root.join(file)).unwrap();
    let mut fired = 0;
    for seed in 0..SERIES {
        let r = run_series(&sc, seed).unwrap();
        let mut legs = BTreeMap::new();
        for e in &r.trace.events {
            match &e.what {
                What::Net {
                    dir: Dir::ToServer,
                    exchange,
                    node,
                    frame,
                    verdict,
                    ..
                } => {
                    legs.insert(*frame, (*exchange, node.clone(), verdict.clone()));
                }
                What::Fault {
                    fault: FaultKind::ToolRedeployed,
                    node,
                    detail,
                    ..
                } => {
                    fired += 1;
                    let replay = format!("toolop-sim replay --scenario {file} --seed {seed}");
                    let FaultDetail::Request { exchange, frame } = detail else {
                        panic!("tool_redeployed names no request frame: {replay}");
                    };
                    assert_eq!(*exchange, ExchangeKind::Submit, "{replay}");
                    let leg = legs.get(frame);
                    assert!(
                        matches!(
                            leg,
                            Some((ExchangeKind::Submit, n, NetVerdict::Deliver)) if n == node
                        ),
                        "tool_redeployed on frame {frame}, which the server never received: \
                         {replay}"
                    );
                }
                _ => {}
            }
        }
    }
    assert!(
        fired > 0,
        "{file}: tool_redeployed never fired in {SERIES} series"
    );
}

/// An operator's cancel through the ledger (`toolop cancel NODE`: a request the executor owning
/// the node finds on its next look) is exercised in every protocol, on the SQLite ledger and
/// among replicas: requests are made, executors pick them up, and cancels for those nodes go
/// out on the network after them (read from the network, not from the executor's report).
#[test]
fn operators_cancel_requests_reach_executors_in_every_protocol() {
    use toolop::runner::Observation;
    use toolop_sim::fake::codec::ExchangeKind;
    use toolop_sim::trace::{CallerAction, Dir};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in [
        "scenarios/mcp_faults.toml",
        "scenarios/mcp_ext_faults.toml",
        "scenarios/aip151_faults.toml",
        "scenarios/mcp_sqlite.toml",
        "scenarios/mcp_replicas.toml",
    ] {
        let sc = Scenario::load(&root.join(file)).unwrap();
        let (mut requested, mut picked, mut cancelled) = (0, 0, 0);
        for seed in 0..60 {
            let r = run_series(&sc, seed).unwrap();
            let mut asked: BTreeMap<String, u64> = BTreeMap::new();
            for e in &r.trace.events {
                match &e.what {
                    What::Caller {
                        action: CallerAction::CancelRequest,
                        node,
                    } => {
                        requested += 1;
                        asked.insert(node.clone(), e.t_ms);
                    }
                    What::Exec {
                        obs: Observation::CancelRequestPicked { moot: false, .. },
                        ..
                    } => picked += 1,
                    What::Net {
                        dir: Dir::ToServer,
                        exchange: ExchangeKind::Cancel,
                        node: Some(node),
                        ..
                    } if asked.remove(node).is_some() => cancelled += 1,
                    _ => {}
                }
            }
        }
        assert!(
            requested > 0 && picked > 0 && cancelled > 0,
            "{file}: {requested} requests, {picked} picked up, {cancelled} cancels after one"
        );
    }
}

/// A server restart, alone: the truth records it once, every task it lost is deleted at the
/// restart with no side effect after it, and the executor hands each node whose work it aborted
/// to a person, with no second operation (the server offers no idempotency extension, so
/// nothing can prove "never created"). Other faults are off so that nothing else explains a
/// hand-off or a receipt.
/// Seeds 0..40 of `sc` (`file` with `sets`), each series in which a fault `pick` recognises
/// fired: its replay command, its result, and the time and detail of that fault's first firing.
fn first_firings<T>(
    file: &str,
    sc: &Scenario,
    sets: &[String],
    pick: impl Fn(&toolop_sim::trace::FaultDetail) -> Option<T>,
) -> Vec<(String, toolop_sim::series::SeriesResult, u64, T)> {
    let mut out = vec![];
    for seed in 0..40 {
        let r = run_series(sc, seed).unwrap();
        let first = r.trace.events.iter().find_map(|e| match &e.what {
            What::Fault { detail, .. } => pick(detail).map(|t| (e.t_ms, t)),
            _ => None,
        });
        if let Some((at, t)) = first {
            let replay = format!(
                "toolop-sim replay --scenario {file} {} --seed {seed}",
                sets.join(" ")
            );
            out.push((replay, r, at, t));
        }
    }
    out
}

/// `file` with the server restart alone: every other fault off, the fault enabled in every
/// series at 0.2, no toolop extensions (their contract keeps tasks across a restart), over
/// `transport` if given; and the `--set` flags that replay it so.
fn restart_alone(
    root: &std::path::Path,
    file: &str,
    transport: Option<ServerTransport>,
) -> (Scenario, Vec<String>) {
    fault_alone(root, file, "server_restart", transport)
}

/// `file` with `fault` alone, as [`restart_alone`] does it for the restart.
fn fault_alone(
    root: &std::path::Path,
    file: &str,
    fault: &str,
    transport: Option<ServerTransport>,
) -> (Scenario, Vec<String>) {
    let mut sc = Scenario::load(&root.join(file)).unwrap();
    let others: Vec<String> = sc
        .faults
        .rates
        .keys()
        .filter(|f| *f != fault)
        .cloned()
        .collect();
    sc.faults.rates.retain(|f, _| f == fault);
    sc.faults.rates.insert(fault.into(), 0.2);
    sc.faults.swarm_enable_rate = 1.0;
    sc.server.toolop_extensions_rate = 0.0;
    let mut sets: Vec<String> = others
        .iter()
        .map(|f| format!("--set faults.rates.{f}=0"))
        .collect();
    sets.extend([
        format!("--set faults.rates.{fault}=0.2"),
        "--set faults.swarm_enable_rate=1".to_string(),
        "--set server.toolop_extensions_rate=0".to_string(),
    ]);
    if let Some(t) = transport {
        sc.server.transport = t;
        let name = serde_json::to_value(t).expect("a transport spells itself");
        sets.push(format!("--set 'server.transport={name}'"));
    }
    (sc, sets)
}

#[test]
fn a_server_restart_loses_its_tasks_and_their_nodes_go_to_a_person() {
    use toolop_sim::fake::truth::WorkEnd;
    use toolop_sim::judge::checkers::view::View;
    use toolop_sim::trace::{FaultDetail, StoreFact};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in ["scenarios/mcp_faults.toml", "scenarios/mcp_ext_faults.toml"] {
        let (sc, sets) = restart_alone(&root, file, None);
        let (mut restarted, mut aborted) = (0, 0);
        for (replay, r, at, lost) in first_firings(file, &sc, &sets, |d| match d {
            FaultDetail::Restart { tasks, .. } => Some(tasks.clone()),
            _ => None,
        }) {
            restarted += 1;
            let view = View::of(&r.trace).expect("a finished series has its truth");
            let truth = view.truth;
            assert_eq!(truth.server_restarts_at_ms, vec![at], "{replay}");
            let facts: Vec<(u64, &String, &StoreFact)> = r
                .trace
                .events
                .iter()
                .filter_map(|e| match &e.what {
                    What::Store { node, fact } => Some((e.t_ms, node, fact)),
                    _ => None,
                })
                .collect();
            for id in &lost {
                let t = &truth.tasks[id];
                assert_eq!(t.deleted_at_ms, Some(at), "{id}: {replay}");
                if t.work_end != Some(WorkEnd::LostInRestart) {
                    continue;
                }
                aborted += 1;
                assert_eq!(
                    (t.side_effects, t.work_end_at_ms, t.terminal_status),
                    (0, Some(at), None),
                    "{id}: {replay}"
                );
                let node = &t.call_node;
                let settled: Vec<&StoreFact> = facts
                    .iter()
                    .filter(|(_, n, _)| *n == node)
                    .map(|(_, _, f)| *f)
                    .collect();
                assert_eq!(settled, vec![&StoreFact::Reconcile], "{node}: {replay}");
                assert_eq!(
                    truth.tasks_created_per_call_node.get(node),
                    Some(&1),
                    "{node}: {replay}"
                );
            }
        }
        assert!(
            restarted >= 10,
            "{file}: {restarted} of 40 series restarted"
        );
        assert!(aborted >= 10, "{file}: {aborted} tasks aborted by restarts");
    }
}

/// Over HTTP sessions (`server.transport = "http"`) a server restart leaves the executor
/// process running: the server answers 404 for the forgotten session, the transport opens a
/// new one on the same connection, and later requests are served again. Both MCP protocols,
/// the restart alone (every other fault off, so no process ends for another reason).
#[test]
fn over_http_a_restart_answers_404_and_the_same_process_opens_a_new_session() {
    use toolop_sim::fake::codec::ExchangeKind;
    use toolop_sim::series::net::REINIT_ID_BASE;
    use toolop_sim::trace::{Dir, FaultDetail, Shows};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in ["scenarios/mcp_faults.toml", "scenarios/mcp_ext_faults.toml"] {
        let (sc, sets) = restart_alone(&root, file, Some(ServerTransport::Http));
        let (mut restarted, mut renewed, mut served_after) = (0, 0, 0);
        for (replay, r, at, cut) in first_firings(file, &sc, &sets, |d| match d {
            FaultDetail::Restart { cut, .. } => Some(cut.clone()),
            _ => None,
        }) {
            restarted += 1;
            assert!(cut.is_empty(), "nothing is cut over HTTP: {replay}");
            // (time, direction, exchange, process, request id, what it showed) after the restart
            let after: Vec<_> = r
                .trace
                .events
                .iter()
                .filter(|e| e.t_ms >= at)
                .filter_map(|e| match &e.what {
                    What::Net {
                        dir,
                        exchange,
                        incarnation,
                        request_id,
                        shows,
                        ..
                    } => Some((e.t_ms, *dir, *exchange, *incarnation, *request_id, shows)),
                    _ => None,
                })
                .collect();
            assert!(
                after.iter().all(|a| a.3 == 1),
                "the process that met the restart is the only one: {replay}"
            );
            let gone: Vec<u64> = after
                .iter()
                .filter(|a| matches!(a.5.as_deref(), Some(Shows::SessionGone)))
                .map(|a| a.0)
                .collect();
            let Some(&first_404) = gone.first() else {
                // The series may have had nothing more to ask of the server.
                continue;
            };
            let replay_sent = after.iter().find(|a| {
                a.1 == Dir::ToServer
                    && a.2 == ExchangeKind::Handshake
                    && a.4.is_some_and(|id| id >= REINIT_ID_BASE)
                    && a.0 >= first_404
            });
            let Some(replay_sent) = replay_sent else {
                panic!("a 404 at {first_404} ms and no new session asked for: {replay}");
            };
            renewed += 1;
            // Once the new session is answered, requests reach the server again.
            let served = after.iter().any(|a| {
                a.0 > replay_sent.0
                    && a.1 == Dir::ToExecutor
                    && a.2 != ExchangeKind::Handshake
                    && !matches!(a.5.as_deref(), Some(Shows::SessionGone) | None)
            });
            served_after += usize::from(served);
        }
        assert!(
            restarted >= 10,
            "{file}: {restarted} of 40 series restarted"
        );
        // Measured in session 43: 35 and 39 of 40 series restarted, every one renewed and
        // served again.
        assert!(renewed >= 20, "{file}: {renewed} new sessions after a 404");
        assert!(
            served_after >= 20,
            "{file}: {served_after} series served again on the new session"
        );
    }
}

/// Over HTTP sessions a dropped connection loses the POSTs in flight on it and nothing else: the
/// process that met it runs on, and later requests on the connection are answered. Both MCP
/// protocols, the drop alone (no crash, replica or rollback starts another process).
#[test]
fn over_http_a_dropped_connection_loses_its_posts_and_the_process_lives_on() {
    use toolop_sim::trace::{Dir, FaultDetail, NetVerdict};
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in ["scenarios/mcp_faults.toml", "scenarios/mcp_ext_faults.toml"] {
        let (sc, sets) = fault_alone(&root, file, "connection_drop", Some(ServerTransport::Http));
        let (mut dropped, mut answered_after) = (0, 0);
        for (replay, r, at, incarnation) in first_firings(file, &sc, &sets, |d| match d {
            FaultDetail::Connection { incarnation, .. } => Some(*incarnation),
            _ => None,
        }) {
            dropped += 1;
            assert_eq!(incarnation, 1, "{replay}");
            let after: Vec<_> = r
                .trace
                .events
                .iter()
                .filter(|e| e.t_ms > at)
                .filter_map(|e| match &e.what {
                    What::Net {
                        dir,
                        incarnation,
                        verdict,
                        ..
                    } => Some((*dir, *incarnation, verdict)),
                    _ => None,
                })
                .collect();
            assert!(
                after.iter().all(|a| a.1 == 1),
                "the process that met the drop is the only one: {replay}"
            );
            answered_after += usize::from(
                after
                    .iter()
                    .any(|a| a.0 == Dir::ToExecutor && *a.2 == NetVerdict::Deliver),
            );
        }
        assert!(dropped >= 10, "{file}: {dropped} of 40 series dropped");
        assert!(
            answered_after >= 10,
            "{file}: {answered_after} series answered after a drop"
        );
    }
}
