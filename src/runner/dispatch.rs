//! Dispatch: inputs and frames become core events for one call node (`commit.rs` steps,
//! commits and acts on each); the commands of a committed step are executed here.

use super::commit::Handled;
use super::{
    ApprovalRequest, CallNode, Input, NoTaskSupport, Observation, Queued, Runner,
    APPROVAL_REASKS_MAX,
};
use crate::approval;
use crate::core::{Command, Event, Timer};
use crate::ledger::LedgerError;
use crate::protocol::{
    ApprovalReply, Inbound, Outbound, RequestKind, ServerAnswer, ServerRequest, TaskSupport,
};
use crate::record::ToolOperation;

impl Runner {
    /// A timer that would repeat the exchange a Retry-After refused for `node` (a poll after a
    /// refused poll, a fetch after a refused fetch, a lookup after a refused lookup) falls due
    /// no sooner than that Retry-After runs out, until the server answers a later request. The
    /// core honours a Retry-After when it steps the refusal, but a later event may arm its
    /// timer afresh: in mcp_replicas seed 198228 a replica moved the node to INPUT_REQUIRED
    /// after the primary's poll was refused with 27.5 s to wait, and the primary, stepping a
    /// replayed input request on that record, armed a poll 3 s out.
    fn after_retry_after(&self, node: &str, timer: Timer, at_ms: u64) -> u64 {
        let Some(refused) = self.retry_after.get(node) else {
            return at_ms;
        };
        let repeats = matches!(
            (timer, refused.kind),
            (Timer::PollDue, RequestKind::Poll)
                | (Timer::FetchDue, RequestKind::Fetch)
                | (Timer::LookupDue, RequestKind::Lookup)
        );
        if repeats {
            at_ms.max(refused.until_ms)
        } else {
            at_ms
        }
    }

    /// When a status read of `node` may next leave this process, if its own last request for
    /// the node was a status read and the server suggested an interval (`after_own_read`).
    pub(super) fn own_read_floor_ms(
        &self,
        node: &str,
        lane: usize,
        rec: &ToolOperation,
    ) -> Option<u64> {
        match (self.last_sent.get(node), rec.poll_cursor.server_interval_ms) {
            (Some((RequestKind::Poll, at_ms)), Some(interval_ms))
                if self.lanes[lane].core.poll.honor_server_interval =>
            {
                Some(at_ms.saturating_add(interval_ms))
            }
            _ => None,
        }
    }

    /// Whether a fetch `event` schedules must wait the own-read floor too: the lane reads the
    /// result with its status read, and `event` answers a request that left before this
    /// process's own last status read of the node, so to the server the fetch follows that read
    /// (mcp_ext_replicas seeds 318340, 338850: an answer showing the end waited unread while a
    /// slow commit held the process; the commit's poll went out, then the answer was read and
    /// the fetch followed that poll by 122 and 809 ms, the server asking for 1000). A fetch
    /// after the answer to this process's newest read is reading an ended task's outcome, not
    /// polling, and goes at once.
    pub(super) fn fetch_after_own_read(&self, node: &str, lane: usize, event: &Event) -> bool {
        let Event::Reply {
            sent_ms: Some(answered_sent_ms),
            ..
        } = event
        else {
            return false;
        };
        self.lanes[lane].adapter.fetch_is_status_read()
            && matches!(
                self.last_sent.get(node),
                Some((RequestKind::Poll, own_ms)) if own_ms > answered_sent_ms
            )
    }

    pub(super) async fn on_input(&mut self, input: Input) {
        match input {
            Input::Submit(node) => self.submit(node).await,
            Input::Cancel { node } => {
                self.handle(&node, Event::CancelClicked).await;
            }
            Input::Detach { node } => {
                self.handle(&node, Event::CallerDetached).await;
            }
            Input::Approval {
                node,
                round,
                schema_digest,
                reply,
            } => self.approval(node, round, schema_digest, reply).await,
            Input::RetireAdapter(id) => self.retire(id),
            Input::Shutdown => {}
        }
    }

    async fn submit(&mut self, node: CallNode) {
        let now = self.now_ms();
        let Some(lane) = self.lane_for_new(&node) else {
            self.observe(Observation::CallRejected {
                node: node.id.clone(),
                reason: "every adapter is retired".into(),
            });
            return;
        };
        let caps = &self.lanes[lane].caps;
        let tool = caps.tools.get(&node.tool).cloned();
        let task_capable = caps.tasks_tool_call;
        let ignore_support = planted!(self, IgnoreToolTaskSupport);
        let refuse_sync = planted!(self, RefuseSynchronousTools);
        let (tool_version, synchronous, refusal) = match &tool {
            None => (
                String::new(),
                false,
                Some(format!("server lists no tool \"{}\"", node.tool)),
            ),
            Some(t)
                if ignore_support || task_capable && t.task_support != TaskSupport::Forbidden =>
            {
                (t.descriptor_digest.clone(), false, None)
            }
            Some(t) => match (self.cfg.no_task_support, t.sync_upper_bound_ms) {
                (NoTaskSupport::RunSync, Some(_)) if !refuse_sync => {
                    (t.descriptor_digest.clone(), true, None)
                }
                _ => (
                    t.descriptor_digest.clone(),
                    false,
                    Some(
                        "tool has no task support and no synchronous bound we may use".to_string(),
                    ),
                ),
            },
        };
        let mut rec = ToolOperation::new(
            &node.id,
            &node.tool,
            &tool_version,
            node.arguments,
            self.lanes[lane].adapter.id(),
            &node.submission_key,
            self.epoch,
            now,
            self.cfg.core.wait_budget_ms,
        );
        rec.synchronous = synchronous;
        rec.shadow = self.cfg.launch.shadow_tools.contains(&node.tool);
        let inserted = self
            .ledger
            .lock()
            .expect("ledger lock")
            .insert(rec, self.epoch);
        match inserted {
            Ok(_) => {}
            // The same call node again: the ledger already owns it; a second operation is exactly
            // what this executor exists to prevent.
            Err(LedgerError::DuplicateCallNode(_)) => {
                self.observe(Observation::DuplicateCallNode {
                    node: node.id.clone(),
                });
                return self.watch_duplicate(&node.id);
            }
            Err(e @ LedgerError::DuplicateSubmissionKey(_)) => {
                return self.observe(Observation::CallRejected {
                    node: node.id,
                    reason: e.to_string(),
                });
            }
            Err(e @ (LedgerError::StaleEpoch { .. } | LedgerError::UnissuedEpoch { .. })) => {
                return self.observe(Observation::Fenced {
                    node: node.id,
                    error: e.to_string(),
                });
            }
            Err(e @ LedgerError::Storage(_)) => return self.ledger_failed(e),
            Err(e) => {
                return self.observe(Observation::LedgerRefused {
                    node: node.id,
                    error: e.to_string(),
                })
            }
        }
        match refusal {
            Some(reason) => {
                self.observe(Observation::CallRejected {
                    node: node.id.clone(),
                    reason,
                });
                self.handle(&node.id, Event::RejectLocally).await;
            }
            None => {
                self.handle(&node.id, Event::Start).await;
            }
        }
    }

    /// An answer from the approval gate. An accepted answer is checked against the round's
    /// requested schema before the core sees it: one that does not conform is never sent. The
    /// refusal is observed and the gate is asked again with the reason (a bounded number of
    /// times); the round stays open until a conforming answer or its deadline. An answer for
    /// another round or schema goes to the core, which refuses it as stale.
    pub(super) async fn approval(
        &mut self,
        node: String,
        round: u32,
        schema_digest: String,
        reply: ApprovalReply,
    ) {
        let read = self.ledger.lock().expect("ledger lock").by_call_node(&node);
        let rec = match read {
            Ok(rec) => rec,
            Err(e) => return self.ledger_failed(e),
        };
        // A final record may still hold the round it was asked (a task that completed while a
        // person was deciding): nobody is asked again about a settled node, and the core
        // refuses the answer as late.
        let current = rec
            .filter(|r| !r.local_state.is_final())
            .and_then(|r| Some((r.operation_id.unwrap_or_default(), r.pending_input?)));
        if let Some((operation_id, p)) =
            current.filter(|(_, p)| p.round == round && p.schema_digest == schema_digest)
        {
            let key = (node.clone(), round);
            if let Err(reason) = approval::check_answer(&p.requested_schema, &reply) {
                self.observe(Observation::ApprovalRefused {
                    node: node.clone(),
                    round,
                    reason: reason.clone(),
                });
                let refusals = self.approval_refusals.entry(key).or_insert(0);
                *refusals += 1;
                if *refusals <= APPROVAL_REASKS_MAX {
                    // A gate that went away cannot answer; the deadline timer declines instead.
                    let again = ApprovalRequest {
                        node,
                        operation_id,
                        round,
                        request: p.request,
                        requested_schema: p.requested_schema,
                        schema_digest,
                        deadline_ms: p.deadline_ms,
                        refused_answer: Some(reason),
                    };
                    let _ = self.approvals.send(again);
                }
                return;
            }
            self.approval_refusals.remove(&key);
        }
        self.handle(
            &node,
            Event::ApprovalReplied {
                round,
                schema_digest,
                reply,
            },
        )
        .await;
    }

    pub(super) async fn on_frame(&mut self, lane: usize, frame: &crate::transport::InFrame) {
        match self.lanes[lane].adapter.classify(frame) {
            Inbound::Response { rpc_id } => self.on_response(rpc_id, frame).await,
            Inbound::InputRequest(req) => {
                let owner = match req.related_operation_id.as_deref() {
                    Some(op) => self.ledger.lock().expect("ledger lock").by_operation_id(op),
                    None => Ok(None),
                };
                match owner {
                    Ok(Some(rec)) => {
                        let (node, id, digest) = (
                            rec.call_node_id.clone(),
                            req.server_request_id.clone(),
                            req.schema_digest.clone(),
                        );
                        if self.handle(&node, Event::InputRequested(req)).await == Handled::Rejected
                        {
                            self.answer_refused_input(lane, &node, id, &digest);
                        }
                    }
                    Err(e) => self.ledger_failed(e),
                    Ok(None) => {
                        let op = req.related_operation_id.as_deref().unwrap_or("(none)");
                        self.observe(Observation::Unrouted {
                            what: format!("input request for unknown operation {op}"),
                        });
                        // No call node of ours asked for this: decline rather than leave the server waiting.
                        let decline = ServerRequest {
                            id: req.server_request_id,
                            method: "elicitation/create".into(),
                            answer: ServerAnswer::DeclineElicitation,
                        };
                        self.answer_server_request(lane, decline);
                    }
                }
            }
            Inbound::ServerRequest(req) => self.answer_server_request(lane, req),
            Inbound::StatusPushed(view) => self.on_status_pushed(view).await,
            Inbound::Ignored { .. } => {}
            // An HTTP response belongs to its POST: a body cut on the way fails that exchange
            // now (the adapter decodes it as malformed) instead of after the request timeout
            // (mcp_ext_faults seed 6122: three cut poll replies cost 10 s each while a cancel
            // waited for its outcome). Server messages carry no request id.
            Inbound::Malformed { .. }
                if frame
                    .request_id
                    .is_some_and(|id| self.pending.get(&id).is_some_and(|p| p.lane == lane)) =>
            {
                let rpc_id = frame.request_id.expect("checked by the guard");
                self.on_response(rpc_id, frame).await;
            }
            Inbound::Malformed { reason } => self.observe(Observation::Malformed { reason }),
        }
    }

    /// A status the server pushed unasked. Advisory (MCP §7): a live node keeps polling, and a
    /// final one has nothing a push could change, except a node whose cancel was accepted: a
    /// task shown ending after all (its effect may be real) must reach a person. Only that node
    /// hears it, so pushes cost nothing elsewhere (mcp_faults seed 100: the server pushed
    /// `completed` for a task it had confirmed cancelled, and the executor dropped it).
    async fn on_status_pushed(&mut self, view: crate::protocol::TaskView) {
        let owner = self
            .ledger
            .lock()
            .expect("ledger lock")
            .by_operation_id(&view.operation_id);
        match owner {
            Ok(Some(rec)) if rec.local_state == crate::record::LocalState::CancelledAccepted => {
                let node = rec.call_node_id.clone();
                self.handle(&node, Event::StatusPushed(view)).await;
            }
            Ok(_) => {}
            Err(e) => self.ledger_failed(e),
        }
    }

    /// A reply to our request `rpc_id`, decoded by the adapter of the lane that sent it.
    async fn on_response(&mut self, rpc_id: u64, frame: &crate::transport::InFrame) {
        let Some(p) = self.pending.remove(&rpc_id) else {
            self.observe(Observation::Unrouted {
                what: format!("reply to request {rpc_id} nobody waits for"),
            });
            return;
        };
        let reply = self.lanes[p.lane].adapter.decode_reply(p.kind, frame);
        let retry_after_ms = match &reply {
            crate::protocol::Reply::RateLimited { retry_after_ms }
            | crate::protocol::Reply::Unavailable { retry_after_ms } => *retry_after_ms,
            _ => None,
        };
        self.observe(Observation::Received {
            node: p.node.clone(),
            kind: p.kind.name(),
            seq: p.seq,
            reply: reply.name(),
            retry_after_ms,
        });
        if let Some(problem) = reply.hint_problem() {
            self.observe(Observation::HintIgnored {
                node: p.node.clone(),
                kind: p.kind.name(),
                problem: problem.to_string(),
            });
        }
        self.handle(
            &p.node,
            Event::Reply {
                kind: p.kind,
                seq: p.seq,
                epoch: p.epoch,
                sent_ms: Some(p.sent_ms),
                reply,
            },
        )
        .await;
    }

    /// An input request the core refused, answered on the wire where no round can come of it:
    /// only for a call node that has finished. The request we answered last, delivered again
    /// (same id, same schema), gets that same answer; any other is declined: nothing will ever
    /// ask the gate. A request for a node still running is left to the core, even a copy of the
    /// one answered last: the server may already have opened the next round under the same id
    /// (ids are reused), and a late copy of the old answer would be taken as that round's (the
    /// simulator's `input_answer_matches_round`, mcp_faults seed 81). It may also be the next
    /// round itself, pushed before the
    /// executor saw `input_required` again, and the SDK servers deliver it again on the stream
    /// the executor opens then; declining it here would answer a round the gate never saw (the
    /// simulator's `input_answer_matches_round` catches exactly that).
    ///
    /// A server may reuse request ids (MCP forbids it within a session, but a server that
    /// starts a new session or restarts numbers from 0 again, as the TS SDK does), and may
    /// route an answer by id alone, whatever task its `_meta` names: while another call node
    /// has a round open under the same id, any answer here could be taken as that round's.
    /// Then nothing is sent.
    fn answer_refused_input(
        &mut self,
        lane: usize,
        node: &str,
        id: serde_json::Value,
        schema_digest: &str,
    ) {
        let Some(rec) = self.read(node) else { return };
        // A process fenced off by a newer epoch sends nothing for the node, answers included:
        // the newer executor owns every exchange about it (mcp_faults seed 6691).
        if rec.execution_epoch > self.epoch {
            return;
        }
        let in_flight = self.ledger.lock().expect("ledger lock").in_flight();
        let shared_id = match in_flight {
            Ok(recs) => recs.iter().any(|r| {
                r.call_node_id != node
                    && r.pending_input
                        .as_ref()
                        .is_some_and(|p| p.server_request_id == id)
            }),
            Err(e) => return self.ledger_failed(e),
        };
        if shared_id {
            return;
        }
        let finished = rec.local_state.is_final();
        let last = rec
            .last_answer
            .filter(|l| l.server_request_id == id && l.schema_digest == schema_digest);
        if !finished {
            return;
        }
        // Both answers name the task (§8: a response belonging to a task carries the
        // related-task `_meta`): with ids reused across tasks, the id alone would let the server
        // take this answer as another task's (mcp_faults seed 2173: a decline for one finished
        // node landed on another's request).
        let (reply, answer) = match last {
            Some(last) => (last.reply, "last_answer_again"),
            None => (
                ApprovalReply::Decline,
                ServerAnswer::DeclineElicitation.name(),
            ),
        };
        match rec.operation_id {
            Some(operation_id) => {
                self.observe(Observation::ServerRequestAnswered {
                    method: "elicitation/create".into(),
                    answer,
                });
                let out = Outbound::InputResponse {
                    operation_id,
                    server_request_id: id,
                    reply,
                };
                let body = self.lanes[lane].adapter.encode(0, &out);
                self.answers.push_back((lane, body));
            }
            // Unreachable in practice (the request was routed by its operation id), but a
            // server is never left waiting.
            None => {
                let decline = ServerRequest {
                    id,
                    method: "elicitation/create".into(),
                    answer: ServerAnswer::DeclineElicitation,
                };
                self.answer_server_request(lane, decline);
            }
        }
    }

    /// Queue the answer to a server request (sent by the next flush, ahead of the QPS queue).
    pub(super) fn answer_server_request(&mut self, lane: usize, req: ServerRequest) {
        self.observe(Observation::ServerRequestAnswered {
            method: req.method.clone(),
            answer: req.answer.name(),
        });
        if let Some(body) = self.lanes[lane].adapter.encode_server_answer(&req) {
            self.answers.push_back((lane, body));
        }
    }

    /// Arm `timer` for `node` at `at_ms`. One timer per (node, kind): a new one replaces the old.
    pub(super) fn set_timer(&mut self, node: &str, timer: Timer, at_ms: u64) {
        if let Some(old) = self.timer_at.insert((node.to_string(), timer), at_ms) {
            self.timers.remove(&(old, node.to_string(), timer));
        }
        self.timers.insert((at_ms, node.to_string(), timer));
    }

    pub(super) fn execute(&mut self, node: &str, lane: usize, c: Command) {
        if matches!(c, Command::Accept(_) | Command::Reconcile { .. }) {
            self.settled_here.insert(node.to_string());
        }
        match c {
            Command::Send { out, seq } => {
                // A cancel goes ahead of every queued read and submission (after the cancels
                // already waiting): a person asked to stop work the server is doing, and behind
                // a thousand nodes' polls at 20 requests a second it waited minutes (mcp_load at
                // 1,000 call nodes: cancel p99 145 s). Reads it overtakes were committed earlier
                // with lower request numbers, so their replies are older than the cancel's.
                if matches!(out, Outbound::Cancel { .. }) {
                    // The node's queued reads are overtaken and then stale: left out, or a
                    // read would leave after the cancel and the cancel's re-read right behind
                    // it, inside the server's poll interval.
                    self.drop_queued(node, true);
                }
                let at = queue_position(self.queue.iter().map(|q| &q.out), &out);
                self.queue.insert(
                    at,
                    Queued {
                        lane,
                        node: node.to_string(),
                        out,
                        seq,
                    },
                );
            }
            Command::Schedule { at_ms, timer } => {
                let at_ms = self.after_retry_after(node, timer, at_ms);
                self.set_timer(node, timer, at_ms);
            }
            Command::AskApproval {
                round,
                operation_id,
                request,
                requested_schema,
                schema_digest,
                deadline_ms,
            } => {
                self.observe(Observation::ApprovalAsked {
                    node: node.to_string(),
                    round,
                    deadline_ms,
                });
                // A gate that went away cannot answer; the deadline timer declines instead.
                let ask = ApprovalRequest {
                    node: node.to_string(),
                    operation_id,
                    round,
                    request,
                    requested_schema,
                    schema_digest,
                    deadline_ms,
                    refused_answer: None,
                };
                let _ = self.approvals.send(ask);
            }
            Command::Accept(spec) => {
                self.observe(Observation::Accepted {
                    node: node.to_string(),
                    terminal: spec.terminal,
                    result_digest: spec.result_digest.clone(),
                });
                let entry = self.ledger.lock().expect("ledger lock").outbox_entry(node);
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => return self.ledger_failed(e),
                };
                if let Some(entry) = entry {
                    let (ok, detail) = match self.hook.check(&entry) {
                        Ok(()) => (true, String::new()),
                        Err(e) => (false, e),
                    };
                    self.observe(Observation::OutputChecked {
                        node: node.to_string(),
                        ok,
                        detail,
                    });
                }
            }
            Command::Reconcile { reason } => self.observe(Observation::Reconcile {
                node: node.to_string(),
                reason,
            }),
            Command::EffectReconciliation { reason } => {
                self.observe(Observation::EffectReconciliation {
                    node: node.to_string(),
                    reason,
                })
            }
        }
    }
}

/// Where a send joins the QPS queue (the queued sends in order): a cancel after the cancels
/// already waiting and before everything else, any other send at the back.
fn queue_position<'a>(
    queued: impl ExactSizeIterator<Item = &'a Outbound>,
    out: &Outbound,
) -> usize {
    let len = queued.len();
    let is_cancel = |o: &Outbound| matches!(o, Outbound::Cancel { .. });
    if !is_cancel(out) {
        return len;
    }
    queued
        .into_iter()
        .position(|q| !is_cancel(q))
        .unwrap_or(len)
}

/// A status read this process would send sooner after its own last request for the node, a
/// status read, than the interval the server suggested (`floor_ms`) is moved to when the
/// interval runs out. The core counts a node's polls from its record, which another process's
/// reads move; this process's own last read is the runner's to remember (mcp_ext_faults seed
/// 1625166: a replica's reads kept the record current, and this process, resumed by its stall
/// watch on a cancel another had sent, read 813 ms after its own read, the server asking for
/// 1000 ms).
/// A fetch is held back to the same floor only when `hold_fetch` (`Runner::fetch_after_own_read`).
pub(super) fn after_own_read(
    floor_ms: Option<u64>,
    hold_fetch: bool,
    commands: Vec<Command>,
) -> Vec<Command> {
    let Some(floor_ms) = floor_ms else {
        return commands;
    };
    commands
        .into_iter()
        .map(|c| match c {
            Command::Schedule {
                at_ms,
                timer: timer @ (Timer::PollDue | Timer::CancelRequery),
            } => Command::Schedule {
                at_ms: at_ms.max(floor_ms),
                timer,
            },
            Command::Schedule {
                at_ms,
                timer: Timer::FetchDue,
            } if hold_fetch => Command::Schedule {
                at_ms: at_ms.max(floor_ms),
                timer: Timer::FetchDue,
            },
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::queue_position;
    use crate::protocol::Outbound;

    fn cancel(op: &str) -> Outbound {
        Outbound::Cancel {
            operation_id: op.into(),
        }
    }

    fn poll(op: &str) -> Outbound {
        Outbound::Poll {
            operation_id: op.into(),
        }
    }

    #[test]
    fn a_cancel_overtakes_queued_reads_but_not_earlier_cancels() {
        let queued = [cancel("a"), poll("b"), poll("c")];
        assert_eq!(queue_position(queued.iter(), &cancel("d")), 1);
        assert_eq!(queue_position(queued.iter(), &poll("d")), 3);
        let only_cancels = [cancel("a"), cancel("b")];
        assert_eq!(queue_position(only_cancels.iter(), &cancel("c")), 2);
        assert_eq!(queue_position([].iter(), &cancel("c")), 0);
        let reads = [poll("a"), poll("b")];
        assert_eq!(queue_position(reads.iter(), &cancel("c")), 0);
    }
}
