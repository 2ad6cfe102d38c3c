//! What the checkers share: the bounds from `Begin`, the ledger and ground truth from `Final`,
//! and a few per-node readings of the trace that more than one checker (or a metric) needs.
//! Everything here reads; nothing assumes the trace is well formed.

use std::collections::{BTreeMap, BTreeSet};

use toolop::ledger::LedgerSnapshot;
use toolop::record::ToolOperation;
use toolop::runner::Observation;

use crate::fake::codec::ExchangeKind;
use crate::fake::truth::{GroundTruth, TaskTruth};
use crate::scenario::Protocol;
use crate::trace::{
    BeginConfig, BeginNode, CallerAction, Dir, FaultDetail, NetVerdict, Shows, StoreFact, Trace,
    What,
};

use super::Violation;

/// The name of the single violation reported for a trace that cannot be judged.
pub const INCOMPLETE: &str = "trace_incomplete";

/// A trace with the two events every property needs: `Begin` (bounds) and `Final` (outcome).
pub struct View<'a> {
    pub trace: &'a Trace,
    pub protocol: Protocol,
    /// What the scenario configured (jitter, approval deadline, shadow tools, call nodes).
    pub config: &'a BeginConfig,
    pub max_qps: u32,
    pub safety_window_ms: u64,
    pub liveness_bound_ms: u64,
    pub call_nodes: u32,
    pub ledger: &'a LedgerSnapshot,
    pub truth: &'a GroundTruth,
    /// `None` when the trace has no `End` (the liveness check fails it).
    pub end_reason: Option<&'a str>,
}

impl<'a> View<'a> {
    /// The first `Begin` and the last `Final`; without either the trace is incomplete (a series
    /// that hit its event limit drops both, since `Trace::push` refuses events past the limit).
    pub fn of(trace: &'a Trace) -> Result<View<'a>, Violation> {
        let begin = trace.events.iter().find_map(|e| match &e.what {
            What::Begin {
                protocol,
                max_qps,
                safety_window_ms,
                liveness_bound_ms,
                call_nodes,
                config,
                ..
            } => Some((
                (*protocol, config),
                *max_qps,
                *safety_window_ms,
                *liveness_bound_ms,
                *call_nodes,
            )),
            _ => None,
        });
        let fin = trace.events.iter().rev().find_map(|e| match &e.what {
            What::Final { ledger, truth } => Some((ledger, truth)),
            _ => None,
        });
        let end_reason = trace.events.iter().rev().find_map(|e| match &e.what {
            What::End { reason } => Some(reason.as_str()),
            _ => None,
        });
        match (begin, fin) {
            (
                Some((
                    (protocol, config),
                    max_qps,
                    safety_window_ms,
                    liveness_bound_ms,
                    call_nodes,
                )),
                Some((ledger, truth)),
            ) => Ok(View {
                trace,
                protocol,
                config,
                max_qps,
                safety_window_ms,
                liveness_bound_ms,
                call_nodes,
                ledger,
                truth,
                end_reason,
            }),
            (b, f) => {
                let mut missing = vec![];
                if b.is_none() {
                    missing.push("Begin");
                }
                if f.is_none() {
                    missing.push("Final");
                }
                Err(Violation {
                    checker: INCOMPLETE,
                    node: None,
                    detail: format!(
                        "no {} event ({} events, truncated: {})",
                        missing.join(" and no "),
                        trace.events.len(),
                        trace.truncated
                    ),
                })
            }
        }
    }

    pub fn record(&self, node: &str) -> Option<&'a ToolOperation> {
        self.ledger.records.iter().find(|r| r.call_node_id == node)
    }

    /// The call node as the caller will submit it (`Begin`'s config).
    fn begin_node(&self, node: &str) -> Option<&'a BeginNode> {
        self.config.nodes.iter().find(|n| n.id == node)
    }

    /// The submission key the caller gave `node` (the world's record of it).
    pub fn caller_key(&self, node: &str) -> Option<&'a str> {
        self.begin_node(node).map(|n| n.key.as_str())
    }

    /// The tool the caller calls for `node`.
    pub fn tool_of(&self, node: &str) -> Option<&'a str> {
        self.begin_node(node).map(|n| n.tool.as_str())
    }
}

/// Run `f` over a complete trace, or report the single incomplete-trace violation.
pub fn judge(trace: &Trace, f: impl FnOnce(&View) -> Vec<Violation>) -> Vec<Violation> {
    match View::of(trace) {
        Ok(v) => f(&v),
        Err(incomplete) => vec![incomplete],
    }
}

/// The server task that belongs to `node`: the one named by `operation_id` when that task is the
/// node's, otherwise the node's first task by id. A task of another node never counts, so an id
/// that points elsewhere (task id misuse) finds nothing here and is judged by the caller.
pub fn node_task<'t>(
    truth: &'t GroundTruth,
    node: &str,
    operation_id: Option<&str>,
) -> Option<(&'t str, &'t TaskTruth)> {
    if let Some(op) = operation_id {
        if let Some((id, t)) = truth.tasks.get_key_value(op) {
            if t.call_node == node {
                return Some((id.as_str(), t));
            }
        }
    }
    truth
        .tasks
        .iter()
        .find(|(_, t)| t.call_node == node)
        .map(|(id, t)| (id.as_str(), t))
}

/// One executor process: (epoch, incarnation).
pub type ExecId = (u64, u32);

/// Each observation in trace order with its time and executor.
pub fn observations(trace: &Trace) -> impl Iterator<Item = (u64, ExecId, &Observation)> {
    trace.events.iter().filter_map(|e| match &e.what {
        What::Exec {
            epoch,
            incarnation,
            obs,
        } => Some((e.t_ms, (*epoch, *incarnation), obs)),
        _ => None,
    })
}

/// One frame the network carried, as the world recorded it.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// When it left.
    pub t_ms: u64,
    pub dir: Dir,
    pub exchange: ExchangeKind,
    pub node: Option<&'a str>,
    pub lane: u32,
    /// The executor process at the client end.
    pub exec: ExecId,
    pub frame: u64,
    pub request_id: Option<u64>,
    pub verdict: &'a NetVerdict,
    /// A frame to the executor that arrives: when.
    pub arrives_at_ms: Option<u64>,
    pub shows: Option<&'a Shows>,
}

impl Frame<'_> {
    /// Reached the executor as the server wrote it: not lost, cut, rewritten or an old copy.
    pub fn intact(&self) -> bool {
        self.arrives_at_ms.is_some()
            && matches!(
                self.verdict,
                NetVerdict::Deliver | NetVerdict::Held { .. } | NetVerdict::Duplicated { .. }
            )
    }

    pub fn is(&self, node: &str) -> bool {
        self.node == Some(node)
    }
}

/// Every frame the network carried, in the order it left.
pub fn frames(trace: &Trace) -> impl Iterator<Item = Frame<'_>> {
    trace.events.iter().filter_map(|e| match &e.what {
        What::Net {
            dir,
            exchange,
            node,
            lane,
            epoch,
            incarnation,
            frame,
            request_id,
            verdict,
            arrives_after_ms,
            shows,
            ..
        } => Some(Frame {
            t_ms: e.t_ms,
            dir: *dir,
            exchange: *exchange,
            node: node.as_deref(),
            lane: *lane,
            exec: (*epoch, *incarnation),
            frame: *frame,
            request_id: *request_id,
            verdict,
            arrives_at_ms: arrives_after_ms.map(|d| e.t_ms.saturating_add(d)),
            shows: shows.as_deref(),
        }),
        _ => None,
    })
}

/// When each request left, by process and request id: a reply that reaches its process after
/// its request's timeout was never read (the executor had given the request up, and the runner
/// drops it). A submission may be given longer (a synchronous tool's bound), so its reply
/// counts whenever it came.
pub struct RequestTimes {
    sent_at: BTreeMap<(ExecId, u64), u64>,
    timeout_ms: u64,
}

impl RequestTimes {
    pub fn of(v: &View) -> RequestTimes {
        RequestTimes {
            sent_at: sends(v.trace)
                .filter_map(|s| Some(((s.exec, s.request_id?), s.t_ms)))
                .collect(),
            timeout_ms: v.config.request_timeout_ms,
        }
    }

    /// Whether reply `a` reached its process only after its request's timeout.
    pub fn past_timeout(&self, a: &Frame) -> bool {
        let at = a.arrives_at_ms.unwrap_or(a.t_ms);
        a.exchange != ExchangeKind::Submit
            && a.request_id
                .and_then(|id| self.sent_at.get(&(a.exec, id)))
                .is_some_and(|sent| at >= sent.saturating_add(self.timeout_ms))
    }
}

/// Frames the executors sent, in the order they left.
pub fn sends(trace: &Trace) -> impl Iterator<Item = Frame<'_>> {
    frames(trace).filter(|f| f.dir == Dir::ToServer)
}

/// Frames that reached an executor, in the order they arrived (ties in the order they left).
/// A frame still on its way when the world dropped its connection never arrives: the network
/// names those frames in the drop's record ([`connection_cuts`]), exact even for one due in the
/// very millisecond of the drop.
pub fn arrivals(trace: &Trace) -> Vec<Frame<'_>> {
    let cut = connection_cuts(trace);
    let mut out: Vec<Frame> = frames(trace)
        .filter(|f| {
            f.dir == Dir::ToExecutor && f.arrives_at_ms.is_some() && !cut.contains(&f.frame)
        })
        .collect();
    out.sort_by_key(|f| f.arrives_at_ms);
    out
}

/// The frames each connection drop the world recorded cut on their way (a server restart drops
/// every connection of its lane).
pub fn connection_cuts(trace: &Trace) -> BTreeSet<u64> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::Fault {
                detail: FaultDetail::Connection { cut, .. } | FaultDetail::Restart { cut, .. },
                ..
            } => Some(cut.iter().copied()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// When the world first saw each node's receipt or hand-off in the store, and which.
pub fn store_facts(trace: &Trace) -> BTreeMap<String, (u64, StoreFact)> {
    let mut out = BTreeMap::new();
    for e in &trace.events {
        if let What::Store { node, fact } = &e.what {
            out.entry(node.clone()).or_insert((e.t_ms, *fact));
        }
    }
    out
}

/// The newest execution epoch at `t_ms`: 1, raised by each rollback the world recorded.
pub fn newest_epochs(trace: &Trace) -> Vec<(u64, u64)> {
    let mut out = vec![(0, 1)];
    for e in &trace.events {
        if let What::World {
            action: crate::trace::WorldAction::Rollback { epoch, .. },
        } = &e.what
        {
            out.push((e.t_ms, *epoch));
        }
    }
    out
}

/// The newest epoch at `t_ms` from [`newest_epochs`].
pub fn newest_epoch_at(epochs: &[(u64, u64)], t_ms: u64) -> u64 {
    epochs
        .iter()
        .take_while(|(t, _)| *t <= t_ms)
        .last()
        .map_or(1, |(_, e)| *e)
}

/// The spans `[from, to)` in which no executor process of the newest epoch ran, from the
/// world's own account: after a crash, a dropped connection or a failed handshake until the
/// world restarted one (a replica of that epoch that is up counts as running). The first
/// incarnation runs from time 0. A span still open at the end closes at the last event.
/// A runner task that failed is not taken as down: that time stays the executor's.
pub fn executor_down_spans(trace: &Trace) -> Vec<(u64, u64)> {
    use crate::trace::WorldAction as A;
    let mut alive: BTreeMap<u32, u64> = BTreeMap::from([(1, 1)]);
    let mut newest = 1;
    let mut down_since: Option<u64> = None;
    let mut out = vec![];
    for e in &trace.events {
        let What::World { action } = &e.what else {
            continue;
        };
        match action {
            A::ExecutorDown { incarnation, .. } | A::ReplicaStop { incarnation, .. } => {
                alive.remove(incarnation);
            }
            A::ExecutorRestart { incarnation, epoch } | A::ReplicaStart { incarnation, epoch } => {
                alive.insert(*incarnation, *epoch);
            }
            A::Rollback { incarnation, epoch } => {
                newest = *epoch;
                alive.insert(*incarnation, *epoch);
            }
            A::OldEpochStopped { epoch } => alive.retain(|_, e| e != epoch),
            A::ExecutorTaskFailed { .. }
            | A::IncarnationLimit { .. }
            | A::WriteAfterCrash { .. } => {}
        }
        let up = alive.values().any(|e| *e == newest);
        match (up, down_since) {
            (false, None) => down_since = Some(e.t_ms),
            (true, Some(from)) => {
                out.push((from, e.t_ms));
                down_since = None;
            }
            _ => {}
        }
    }
    if let (Some(from), Some(last)) = (down_since, trace.events.last()) {
        out.push((from, last.t_ms.max(from)));
    }
    out
}

/// A commit the world held (`ledger_commit_ms`, a slow commit, a process pause): when it
/// landed (or would have, for a process that died inside it), for how long, by which process,
/// of which node. A process steps one event at a time, so a held commit delays every send of
/// that process after it, whatever node the send is about.
pub struct HeldCommit<'a> {
    pub landed_ms: u64,
    pub delay_ms: u64,
    pub exec: ExecId,
    pub node: &'a str,
}

/// Every commit the world held, by landing, so one pass extends a bound through every commit
/// that chains on. A slow commit whose process died inside it never lands, so no write shows
/// it: its fault says when it began, how long the world held it and whom (mcp_ext_replicas
/// seed 24957: the replica that was shown the task sat in a 3.7 s commit of the node and was
/// killed before it landed; seed 166721: the same, in a commit of another node).
pub fn held_commits(trace: &Trace) -> Vec<HeldCommit<'_>> {
    let mut out = vec![];
    for e in &trace.events {
        match &e.what {
            What::Ledger { write } => out.push(HeldCommit {
                landed_ms: e.t_ms,
                delay_ms: write.delay_ms,
                exec: (write.epoch, write.incarnation),
                node: write.node.as_str(),
            }),
            What::Fault {
                detail:
                    FaultDetail::CommitDelay {
                        delay_ms,
                        epoch,
                        incarnation,
                    }
                    | FaultDetail::Pause {
                        delay_ms,
                        epoch,
                        incarnation,
                    },
                node: Some(node),
                ..
            } => out.push(HeldCommit {
                landed_ms: e.t_ms.saturating_add(*delay_ms),
                delay_ms: *delay_ms,
                exec: (*epoch, *incarnation),
                node: node.as_str(),
            }),
            _ => {}
        }
    }
    out.sort_by_key(|w| w.landed_ms);
    out
}

/// When each executor incarnation first went down (a replica's stop included).
pub fn down_times(trace: &Trace) -> BTreeMap<u32, u64> {
    use crate::trace::WorldAction as A;
    let mut down = BTreeMap::new();
    for e in &trace.events {
        if let What::World {
            action: A::ExecutorDown { incarnation, .. } | A::ReplicaStop { incarnation, .. },
        } = &e.what
        {
            down.entry(*incarnation).or_insert(e.t_ms);
        }
    }
    down
}

/// How much of `[from, to)` the spans cover; time that several spans cover counts once.
pub fn covered_ms(spans: &[(u64, u64)], from: u64, to: u64) -> u64 {
    let mut clipped: Vec<(u64, u64)> = spans
        .iter()
        .map(|&(a, b)| (a.max(from), b.min(to)))
        .filter(|(a, b)| a < b)
        .collect();
    clipped.sort_unstable();
    let mut covered = 0;
    let mut reached = from;
    for (a, b) in clipped {
        let start = a.max(reached);
        if b > start {
            covered += b - start;
            reached = b;
        }
    }
    covered
}

/// First time the caller asked to cancel each node: a click, or an operator's request through
/// the ledger, whichever came first.
pub fn cancel_asked_times(trace: &Trace) -> BTreeMap<String, u64> {
    let mut asked = caller_times(trace, CallerAction::Cancel);
    for (node, t) in caller_times(trace, CallerAction::CancelRequest) {
        let first = asked.entry(node).or_insert(t);
        *first = (*first).min(t);
    }
    asked
}

/// The call node a caller's event asks to cancel: a click, its repetition to a process that
/// started, or an operator's request in the ledger.
pub fn cancel_ask(what: &What) -> Option<&str> {
    match what {
        What::Caller {
            action: CallerAction::Cancel | CallerAction::Recancel | CallerAction::CancelRequest,
            node,
        } => Some(node),
        _ => None,
    }
}

/// A cancel an executor process put on the network, for a node the world attributes it to:
/// the node and the process.
pub fn cancel_sent(what: &What) -> Option<(&str, ExecId)> {
    match what {
        What::Net {
            dir: Dir::ToServer,
            exchange: ExchangeKind::Cancel,
            node: Some(node),
            epoch,
            incarnation,
            ..
        } => Some((node, (*epoch, *incarnation))),
        _ => None,
    }
}

/// First time the caller did `action` per node.
pub fn caller_times(trace: &Trace, action: CallerAction) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in &trace.events {
        if let What::Caller { action: a, node } = &e.what {
            if *a == action {
                out.entry(node.clone()).or_insert(e.t_ms);
            }
        }
    }
    out
}

/// The `event` of the step that handled a reply (`Moved`, `Stayed`, `Rejected`): the core's
/// `Event::Reply` name, from the request kind and reply names that `Received` carries.
pub fn reply_event(kind: &str, reply: &str) -> String {
    format!("reply:{kind}:{reply}")
}

/// The `event` of the step that resumes a record when an executor (re)starts or takes over.
pub const RESUME_EVENT: &str = "resume";

#[cfg(test)]
mod tests {
    use toolop::core::Event;
    use toolop::protocol::{Reply, RequestKind};

    use super::*;

    #[test]
    fn event_names_are_the_cores() {
        let reply = Reply::RateLimited {
            retry_after_ms: Some(1),
        };
        let ev = Event::Reply {
            kind: RequestKind::Poll,
            seq: 1,
            epoch: 1,
            sent_ms: None,
            reply: reply.clone(),
        };
        assert_eq!(
            ev.name(),
            reply_event(RequestKind::Poll.name(), reply.name())
        );
        assert_eq!(Event::Resume.name(), RESUME_EVENT);
    }

    /// Down spans follow the world's account: a crash until the restart, a replica that covers
    /// part of it, a rollback whose new process runs while the old epoch's lingers, and a new
    /// epoch's process going down while only the fenced old one is up (open until the end).
    #[test]
    fn executor_down_spans_follow_the_world() {
        use crate::judge::checkers::testkit::Tb;
        use crate::trace::WorldAction as A;
        let mut b = Tb::new();
        let mut world = |t: u64, action: A| {
            b.at(t).push(What::World { action });
        };
        let down = |incarnation| A::ExecutorDown {
            incarnation,
            exit: "crashed".into(),
        };
        world(1_000, down(1));
        world(
            2_000,
            A::ReplicaStart {
                incarnation: 1_000,
                epoch: 1,
            },
        );
        world(
            3_000,
            A::ReplicaStop {
                incarnation: 1_000,
                exit: "done".into(),
                killed: false,
            },
        );
        world(
            5_000,
            A::ExecutorRestart {
                incarnation: 2,
                epoch: 1,
            },
        );
        world(
            6_000,
            A::Rollback {
                incarnation: 3,
                epoch: 2,
            },
        );
        world(7_000, down(3));
        b.at(9_000).caller(CallerAction::Submit, "n1");
        let trace = b.assemble(true, false, None);
        let spans = executor_down_spans(&trace);
        assert_eq!(spans, vec![(1_000, 2_000), (3_000, 5_000), (7_000, 9_000)]);
        assert_eq!(covered_ms(&spans, 1_500, 8_000), 500 + 2_000 + 1_000);
        assert_eq!(covered_ms(&spans, 5_000, 7_000), 0);
        // Overlapping spans count their common time once, in any order.
        let overlapping = [(50, 60), (10, 20), (15, 30), (30, 35), (40, 40)];
        assert_eq!(covered_ms(&overlapping, 0, 100), 25 + 10);
        assert_eq!(covered_ms(&overlapping, 18, 55), 17 + 5);
        assert_eq!(covered_ms(&[], 0, 100), 0);
        // A replica of the fenced epoch keeps nothing up.
        let mut b = Tb::new();
        b.at(10).push(What::World {
            action: A::Rollback {
                incarnation: 2,
                epoch: 2,
            },
        });
        b.at(20).push(What::World {
            action: A::ReplicaStart {
                incarnation: 1_000,
                epoch: 1,
            },
        });
        b.at(30).push(What::World { action: down(2) });
        b.at(40).push(What::World {
            action: A::OldEpochStopped { epoch: 1 },
        });
        b.at(50).push(What::World {
            action: A::ExecutorRestart {
                incarnation: 3,
                epoch: 2,
            },
        });
        assert_eq!(
            executor_down_spans(&b.assemble(false, false, None)),
            vec![(30, 50)]
        );
    }

    /// A frame on its way when the world dropped its connection never arrives, nor one due in
    /// the drop's millisecond; one that landed before, one to another process or lane, and one
    /// on a later connection of the process do. A server restart's cut counts the same.
    #[test]
    fn a_dropped_connection_takes_what_was_on_its_way() {
        use crate::fake::codec::ExchangeKind;
        use crate::judge::checkers::testkit::Tb;
        use crate::series::faults::FaultKind;
        let shows = || Shows::Ack;
        let mut b = Tb::new();
        let reply = |b: &mut Tb, t: u64, after: u64| {
            b.at(t).net(
                Dir::ToExecutor,
                "n1",
                ExchangeKind::Poll,
                NetVerdict::Deliver,
                Some(after),
                Some(shows()),
            );
            b.last_frame()
        };
        let landed = reply(&mut b, 90, 5); // 95
        let on_its_way = reply(&mut b, 95, 20); // 115
        let due_at_the_drop = reply(&mut b, 98, 2); // 100, and the network had carried it
        b.exec(1, 2);
        let other_process = reply(&mut b, 95, 20);
        b.exec(1, 1);
        // The network names what it cut: the frame due in the drop's millisecond had landed
        // (mcp_sqlite seed 128726), so it is not among them.
        b.at(100).push(What::Fault {
            decision: 0,
            fault: FaultKind::ConnectionDrop,
            node: Some("n1".into()),
            state: None,
            detail: FaultDetail::Connection {
                exchange: ExchangeKind::Poll,
                lane: 0,
                epoch: 1,
                incarnation: 1,
                cut: vec![on_its_way],
            },
        });
        let later_connection = reply(&mut b, 101, 1);
        let trace = b.assemble(false, false, None);
        let got: Vec<u64> = arrivals(&trace).iter().map(|f| f.frame).collect();
        assert_eq!(
            got,
            vec![landed, due_at_the_drop, later_connection, other_process]
        );
        assert!(!got.contains(&on_its_way));
        assert_eq!(connection_cuts(&trace), BTreeSet::from([on_its_way]));
        // A server restart drops every connection of its lane: what it names as cut on the way
        // (here the other process's frame) does not arrive either.
        b.at(102).push(What::Fault {
            decision: 7,
            fault: FaultKind::ServerRestart,
            node: None,
            state: None,
            detail: FaultDetail::Restart {
                frame: 1,
                tasks: vec!["t-n1".into()],
                cut: vec![other_process],
            },
        });
        let trace = b.assemble(false, false, None);
        let got: Vec<u64> = arrivals(&trace).iter().map(|f| f.frame).collect();
        assert_eq!(got, vec![landed, due_at_the_drop, later_connection]);
        assert_eq!(
            connection_cuts(&trace),
            BTreeSet::from([on_its_way, other_process])
        );
    }
}
