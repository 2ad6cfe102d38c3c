//! Hand-built traces for the checker and metric tests: a builder that writes one event per
//! call, and five clean call-node stories (completed, cancelled, synchronous, rejected,
//! unknown) that every checker must pass and that each test bends into a violation.

use toolop::ledger::{LedgerSnapshot, OutboxEntry, OutboxStatus, Receipt, ReconcileItem};
use toolop::record::{AdapterId, LocalState, TerminalState, ToolOperation};
use toolop::runner::Observation;

use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::fake::script::ScriptOutcome;
use crate::fake::truth::{GroundTruth, SyncRunKind, SyncRunTruth, TaskStatus, TaskTruth};
use crate::series::faults::FaultKind;
use crate::trace::{
    BeginConfig, BeginNode, CallerAction, Dir, FaultDetail, NetVerdict, Shows, StoreFact, Trace,
    TraceEvent, What,
};

use LocalState::*;

pub use super::settles_within_bound::SETTLED;

/// Builds a trace: `Begin` first, events sorted by time (stably), then `Final` and `End`.
/// The executor's reports (`sent`, `recv`, `accepted`) come with the world's record of the same
/// thing (the frame on the network, the receipt in the store), as in a real series; a test
/// that makes the executor lie pushes one without the other.
#[derive(Clone)]
pub struct Tb {
    pub max_qps: u32,
    pub safety_window_ms: u64,
    pub liveness_bound_ms: u64,
    pub call_nodes: u32,
    pub config: BeginConfig,
    events: Vec<TraceEvent>,
    t: u64,
    exec: (u64, u32),
    frames: u64,
    last_request: std::collections::BTreeMap<String, u64>,
    pub ledger: LedgerSnapshot,
    pub truth: GroundTruth,
}

impl Tb {
    pub fn new() -> Tb {
        Tb {
            max_qps: 10,
            safety_window_ms: 10_000,
            liveness_bound_ms: 60_000,
            call_nodes: 0,
            config: BeginConfig {
                poll_jitter_fraction: 0.2,
                approval_timeout_ms: 60_000,
                request_timeout_ms: 10_000,
                not_found_retries: 2,
                max_cancel_attempts: 3,
                shadow_tools: vec![],
                nodes: vec![],
                lanes: vec![crate::scenario::Protocol::Mcp20251125],
                cancel_request_check_ms: None,
                sync_tools: vec![],
                slow_sync_bounds_ms: Default::default(),
                cancel_requery_interval_ms: None,
            },
            events: vec![],
            t: 0,
            exec: (1, 1),
            frames: 0,
            last_request: Default::default(),
            ledger: LedgerSnapshot::default(),
            truth: GroundTruth::default(),
        }
    }

    pub fn at(&mut self, t_ms: u64) -> &mut Tb {
        self.t = t_ms;
        self
    }

    /// Later observations come from executor epoch `epoch`, incarnation `incarnation`.
    pub fn exec(&mut self, epoch: u64, incarnation: u32) -> &mut Tb {
        self.exec = (epoch, incarnation);
        self
    }

    pub fn push(&mut self, what: What) -> &mut Tb {
        self.events.push(TraceEvent { t_ms: self.t, what });
        self
    }

    pub fn obs(&mut self, obs: Observation) -> &mut Tb {
        let (epoch, incarnation) = self.exec;
        self.push(What::Exec {
            epoch,
            incarnation,
            obs,
        })
    }

    pub fn caller(&mut self, action: CallerAction, node: &str) -> &mut Tb {
        self.push(What::Caller {
            action,
            node: node.into(),
        })
    }

    pub fn submit(&mut self, node: &str) -> &mut Tb {
        self.call_nodes += 1;
        self.config.nodes.push(BeginNode {
            id: node.into(),
            tool: "tool".into(),
            key: key(node),
        });
        self.caller(CallerAction::Submit, node)
    }

    /// The executor reports a send, and the network carries it.
    pub fn sent(&mut self, node: &str, kind: &'static str) -> &mut Tb {
        self.obs(Observation::Sent {
            node: node.into(),
            kind,
            seq: 0,
            rpc_id: None,
        });
        self.net_out(node, exchange_of(kind))
    }

    /// The network carries a frame from the current executor for `node` (delivered).
    pub fn net_out(&mut self, node: &str, exchange: ExchangeKind) -> &mut Tb {
        self.net(
            Dir::ToServer,
            node,
            exchange,
            NetVerdict::Deliver,
            None,
            None,
        )
    }

    /// A frame reaches the current executor at once, showing `shows`.
    pub fn net_in(&mut self, node: &str, exchange: ExchangeKind, shows: Shows) -> &mut Tb {
        self.net(
            Dir::ToExecutor,
            node,
            exchange,
            NetVerdict::Deliver,
            Some(0),
            Some(shows),
        )
    }

    /// The number of the last frame the builder put on the network.
    pub fn last_frame(&self) -> u64 {
        self.frames
    }

    /// One frame on the network, as the world records it.
    pub fn net(
        &mut self,
        dir: Dir,
        node: &str,
        exchange: ExchangeKind,
        verdict: NetVerdict,
        arrives_after_ms: Option<u64>,
        shows: Option<Shows>,
    ) -> &mut Tb {
        self.frames += 1;
        let (epoch, incarnation) = self.exec;
        let frame = self.frames;
        // A request is numbered by its frame; a reply carries the number of the node's last
        // request, as a real reply carries its request's id.
        let request_id = match dir {
            Dir::ToServer => {
                self.last_request.insert(node.to_string(), frame);
                Some(frame)
            }
            Dir::ToExecutor => self.last_request.get(node).copied(),
        };
        self.push(What::Net {
            dir,
            exchange,
            node: Some(node.into()),
            lane: 0,
            epoch,
            incarnation,
            frame,
            request_id,
            bytes: 1,
            verdict,
            arrives_after_ms,
            shows: shows.map(Box::new),
        })
    }

    /// The network brings a reply to the current executor, and the executor reports it.
    pub fn recv(&mut self, node: &str, kind: &'static str, reply: &'static str) -> &mut Tb {
        let shows = shows_of(node, reply);
        self.recv_shows(node, kind, reply, shows)
    }

    pub fn recv_shows(
        &mut self,
        node: &str,
        kind: &'static str,
        reply: &'static str,
        shows: Shows,
    ) -> &mut Tb {
        self.net_in(node, exchange_of(kind), shows);
        self.obs(Observation::Received {
            node: node.into(),
            kind,
            seq: 0,
            reply,
            retry_after_ms: None,
        })
    }

    /// The world finds `node`'s receipt in the store.
    pub fn stored(&mut self, node: &str, terminal: TerminalState) -> &mut Tb {
        self.push(What::Store {
            node: node.into(),
            fact: StoreFact::Receipt { terminal },
        })
    }

    pub fn moved(&mut self, node: &str, path: &[LocalState]) -> &mut Tb {
        self.obs(Observation::Moved {
            node: node.into(),
            event: "test".into(),
            path: path.to_vec(),
            version: 0,
        })
    }

    /// The executor reports an acceptance, and the world finds the receipt in the store.
    pub fn accepted(
        &mut self,
        node: &str,
        terminal: TerminalState,
        digest: Option<&str>,
    ) -> &mut Tb {
        self.stored(node, terminal);
        self.obs(Observation::Accepted {
            node: node.into(),
            terminal,
            result_digest: digest.map(String::from),
        })
    }

    pub fn fault(
        &mut self,
        fault: FaultKind,
        node: Option<&str>,
        state: Option<LocalState>,
    ) -> &mut Tb {
        self.push(What::Fault {
            decision: 0,
            fault,
            node: node.map(String::from),
            state,
            detail: FaultDetail::None,
        })
    }

    /// A final ledger record; returns it for tweaks.
    pub fn record(
        &mut self,
        node: &str,
        state: LocalState,
        op: Option<&str>,
    ) -> &mut ToolOperation {
        let mut r = ToolOperation::new(
            node,
            "tool",
            "v1",
            serde_json::json!({}),
            AdapterId::Mcp20251125,
            &key(node),
            1,
            0,
            600_000,
        );
        r.local_state = state;
        r.operation_id = op.map(String::from);
        self.ledger.records.push(r);
        let last = self.ledger.records.len() - 1;
        &mut self.ledger.records[last]
    }

    /// A ledger receipt and its outbox entry, as the acceptance transaction writes them.
    pub fn receipt(
        &mut self,
        node: &str,
        op: Option<&str>,
        terminal: TerminalState,
        digest: Option<&str>,
    ) -> &mut Tb {
        let receipt_id = format!("{node}#receipt");
        self.ledger.receipts.push(Receipt {
            receipt_id: receipt_id.clone(),
            call_node_id: node.into(),
            operation_id: op.map(String::from),
            request_digest: String::new(),
            tool_version: "v1".into(),
            execution_epoch: 1,
            cancel_generation: 0,
            terminal_state: terminal,
            result_digest: digest.map(String::from),
            accepted_at_ms: self.t,
        });
        let payload = matches!(terminal, TerminalState::Completed | TerminalState::Failed)
            .then(|| payload(node));
        let seq = self.ledger.outbox.len() as u64 + 1;
        self.ledger.outbox.push(OutboxEntry {
            seq,
            call_node_id: node.into(),
            receipt_id,
            terminal_state: terminal,
            payload,
            audit_payload: None,
            status: OutboxStatus::Ready,
            delivered_to: None,
            delivered_at_ms: None,
        });
        self
    }

    pub fn reconcile_item(&mut self, node: &str, op: Option<&str>) -> &mut Tb {
        self.ledger.reconciliation_queue.push(ReconcileItem {
            call_node_id: node.into(),
            operation_id: op.map(String::from),
            submission_key: key(node),
            reason: "test".into(),
            at_ms: self.t,
        });
        self
    }

    /// A server task; counts as a task created for `node`.
    pub fn task(
        &mut self,
        id: &str,
        node: &str,
        terminal: Option<TaskStatus>,
        digest: Option<&str>,
        terminal_at_ms: Option<u64>,
    ) -> &mut Tb {
        let status = terminal.unwrap_or(TaskStatus::Working);
        self.truth.tasks.insert(
            id.into(),
            TaskTruth {
                call_node: node.into(),
                tool: "tool".into(),
                idempotency_key: Some(key(node)),
                created_at_ms: 0,
                ttl_ms: None,
                status,
                terminal_status: terminal,
                terminal_at_ms,
                result_digest: digest.map(String::from),
                error_message: None,
                side_effects: 0,
                effects_after_cancel: 0,
                effects_after_deletion: 0,
                work_end: None,
                work_end_at_ms: None,
                cancel_ignored_at_ms: None,
                deleted_at_ms: None,
                input_rounds: vec![],
                stale_input_responses: 0,
                dedupe_hits: 0,
            },
        );
        *self
            .truth
            .tasks_created_per_call_node
            .entry(node.into())
            .or_default() += 1;
        self
    }

    pub fn sync_run(
        &mut self,
        node: &str,
        outcome: ScriptOutcome,
        digest: Option<&str>,
    ) -> &mut Tb {
        self.truth.sync_runs.push(SyncRunTruth {
            call_node: node.into(),
            tool: "tool".into(),
            kind: SyncRunKind::Plain,
            idempotency_key: Some(key(node)),
            started_at_ms: self.t,
            finished_at_ms: Some(self.t),
            outcome,
            side_effects: 1,
            result_digest: digest.map(String::from),
            error_message: None,
            lost_at_ms: None,
        });
        self
    }

    /// Submitted, polled, fetched, accepted completed with the server's digest.
    pub fn happy_path(&mut self, n: &str, t0: u64) -> &mut Tb {
        let (op, d) = (format!("t-{n}"), digest(n));
        self.at(t0).submit(n).sent(n, "submit");
        self.at(t0 + 10)
            .recv(n, "submit", "submitted")
            .moved(n, &[Submitting, Working]);
        self.at(t0 + 1_000).sent(n, "poll");
        self.at(t0 + 1_010)
            .recv(n, "poll", "status")
            .moved(n, &[Working, TerminalObserved]);
        self.moved(n, &[TerminalObserved, FetchingResult])
            .sent(n, "fetch");
        self.at(t0 + 1_020)
            .recv(n, "fetch", "result")
            .moved(n, &[FetchingResult, Accepted]);
        self.accepted(n, TerminalState::Completed, Some(&d));
        self.record(n, Accepted, Some(&op));
        self.receipt(n, Some(&op), TerminalState::Completed, Some(&d));
        self.task(
            &op,
            n,
            Some(TaskStatus::Completed),
            Some(&d),
            Some(t0 + 900),
        )
    }

    /// Submitted, then cancelled by the caller; the server confirmed the cancel.
    pub fn cancel_path(&mut self, n: &str, t0: u64) -> &mut Tb {
        let op = format!("t-{n}");
        self.at(t0).submit(n).sent(n, "submit");
        self.at(t0 + 10)
            .recv(n, "submit", "submitted")
            .moved(n, &[Submitting, Working]);
        self.at(t0 + 3_000)
            .caller(crate::trace::CallerAction::Cancel, n)
            .moved(n, &[Working, CancelRequested])
            .sent(n, "cancel");
        self.at(t0 + 3_040)
            .recv(n, "cancel", "cancel_ack")
            .moved(n, &[CancelRequested, CancelledAccepted]);
        self.accepted(n, TerminalState::Cancelled, None);
        self.record(n, CancelledAccepted, Some(&op))
            .cancel_generation = 1;
        self.receipt(n, Some(&op), TerminalState::Cancelled, None);
        self.task(&op, n, Some(TaskStatus::Cancelled), None, Some(t0 + 3_020))
    }

    /// A tool without task support, called synchronously.
    pub fn sync_path(&mut self, n: &str, t0: u64) -> &mut Tb {
        let d = digest(n);
        self.at(t0).submit(n).sent(n, "submit_sync");
        self.at(t0 + 500)
            .recv(n, "submit_sync", "sync_result")
            .moved(n, &[Submitting, Accepted]);
        self.accepted(n, TerminalState::Completed, Some(&d));
        self.record(n, Accepted, None).synchronous = true;
        self.receipt(n, None, TerminalState::Completed, Some(&d));
        self.sync_run(n, ScriptOutcome::Completed, Some(&d))
    }

    /// The server refused the submission; no operation exists.
    pub fn reject_path(&mut self, n: &str, t0: u64) -> &mut Tb {
        self.at(t0).submit(n).sent(n, "submit");
        self.at(t0 + 20)
            .recv(n, "submit", "submit_refused")
            .moved(n, &[Submitting, Rejected]);
        self.accepted(n, TerminalState::Rejected, None);
        self.record(n, Rejected, None);
        self.receipt(n, None, TerminalState::Rejected, None)
    }

    /// The submit reply was lost after the server created the task; key lookup is unsupported,
    /// so the node goes to manual reconciliation.
    pub fn unknown_path(&mut self, n: &str, t0: u64) -> &mut Tb {
        let op = format!("t-{n}");
        self.at(t0).submit(n).sent(n, "submit");
        self.at(t0 + 5_000)
            .moved(n, &[Submitting, SubmissionUnknown])
            .sent(n, "lookup");
        self.at(t0 + 5_030)
            .recv(n, "lookup", "lookup_unsupported")
            .moved(n, &[SubmissionUnknown, Unknown]);
        self.push(What::Store {
            node: n.into(),
            fact: StoreFact::Reconcile,
        });
        self.obs(Observation::Reconcile {
            node: n.into(),
            reason: "test".into(),
        });
        self.record(n, Unknown, None);
        self.reconcile_item(n, None);
        self.task(
            &op,
            n,
            Some(TaskStatus::Completed),
            Some("d"),
            Some(t0 + 1_000),
        )
    }

    /// The trace, with `Final` and `End { reason: end }`.
    pub fn build(&self, end: &str) -> Trace {
        self.assemble(true, true, Some(end))
    }

    pub fn assemble(&self, begin: bool, fin: bool, end: Option<&str>) -> Trace {
        let mut events = self.events.clone();
        events.sort_by_key(|e| e.t_ms);
        let last = events.last().map_or(0, |e| e.t_ms) + 1;
        let mut trace = Trace::new(u64::MAX);
        if begin {
            trace.push(
                0,
                What::Begin {
                    scenario: "test".into(),
                    seed: 1,
                    protocol: crate::scenario::Protocol::Mcp20251125,
                    call_nodes: self.call_nodes,
                    max_qps: self.max_qps,
                    safety_window_ms: self.safety_window_ms,
                    liveness_bound_ms: self.liveness_bound_ms,
                    faults: String::new(),
                    config: Box::new(self.config.clone()),
                },
            );
        }
        for e in events {
            trace.push(e.t_ms, e.what);
        }
        if fin {
            trace.push(
                last,
                What::Final {
                    ledger: Box::new(self.ledger.clone()),
                    truth: Box::new(self.truth.clone()),
                },
            );
        }
        if let Some(reason) = end {
            trace.push(
                last,
                What::End {
                    reason: reason.into(),
                },
            );
        }
        trace
    }
}

pub fn key(node: &str) -> String {
    format!("test:1:{node}")
}

/// The result payload of `node` in the clean stories, as the outbox carries it.
pub fn payload(node: &str) -> serde_json::Value {
    serde_json::json!({"r": node})
}

/// The server's digest of [`payload`] (the clean stories' receipts carry it too).
pub fn digest(node: &str) -> String {
    crate::fake::truth::payload_digest(&payload(node))
}

/// The exchange an executor's request kind goes out as.
pub fn exchange_of(kind: &str) -> ExchangeKind {
    match kind {
        "submit" | "submit_sync" => ExchangeKind::Submit,
        "poll" => ExchangeKind::Poll,
        "fetch" => ExchangeKind::Fetch,
        "cancel" => ExchangeKind::Cancel,
        "lookup" => ExchangeKind::Lookup,
        "input_response" => ExchangeKind::Answer,
        _ => ExchangeKind::Other,
    }
}

/// A frame showing `task` in `status`, with no hints and no result.
pub fn task_shows(task: &str, status: TaskStatus) -> Shows {
    Shows::Task {
        task: task.into(),
        status,
        poll_interval_ms: None,
        input_round: None,
        ttl_ms: None,
        result: false,
    }
}

/// What a reply the executor names `reply` shows in the clean stories (task `t-<node>`).
pub fn shows_of(node: &str, reply: &str) -> Shows {
    let task = |status| task_shows(&format!("t-{node}"), status);
    match reply {
        "submitted" => task(TaskStatus::Working),
        // The clean stories read a status once, when the work is done.
        "status" => task(TaskStatus::Completed),
        "cancel_ack" => task(TaskStatus::Cancelled),
        "result" | "sync_result" => Shows::Outcome,
        "lookup_not_found" => Shows::Tasks {
            tasks: vec![],
            status: Default::default(),
            ttl_ms: Default::default(),
        },
        "rate_limited" => Shows::Throttled {
            status: 429,
            retry_after_ms: 0,
        },
        "cancel_rejected_terminal" => Shows::CancelRejected {
            status: TaskStatus::Completed,
        },
        "not_found" => Shows::NotFound {
            expired: false,
            hidden: false,
        },
        _ => Shows::Ack,
    }
}

pub fn happy(node: &str, t0: u64) -> Tb {
    let mut b = Tb::new();
    b.happy_path(node, t0);
    b
}

/// One of each clean story, interleaved in time.
pub fn all_paths() -> Tb {
    let mut b = Tb::new();
    b.happy_path("n1", 0)
        .cancel_path("n2", 100)
        .sync_path("n3", 200)
        .reject_path("n4", 300)
        .unknown_path("n5", 400);
    b
}

/// Every clean trace must pass `check`.
pub fn assert_clean(check: fn(&Trace) -> Vec<Violation>) {
    let mut singles = vec![];
    for path in [
        Tb::happy_path,
        Tb::cancel_path,
        Tb::sync_path,
        Tb::reject_path,
        Tb::unknown_path,
    ] {
        let mut b = Tb::new();
        path(&mut b, "n1", 0);
        singles.push(b);
    }
    for b in singles.iter().chain([&all_paths()]) {
        let trace = b.build(SETTLED);
        let v = check(&trace);
        assert!(
            v.is_empty(),
            "clean trace flagged: {v:?}\n{}",
            String::from_utf8_lossy(&trace.canonical_bytes())
        );
    }
}
