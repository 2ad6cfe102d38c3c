//! The server room of a lane: the actor that runs the fake server (codec and task service) over
//! simulated time, and the faults that are server behaviour rather than network behaviour, all
//! decided here:
//! - a completion racing a cancel, the status-after-cancel quirk (a cancel's work outlives
//!   it, and its end later overwrites `cancelled`), and a cancel acknowledged and ignored: asked
//!   when a cancel meets running work;
//! - not-found after expiry, and a running task deleted at its ttl: noted when the service
//!   answers a read of a task it deleted (they follow from a short server ttl).
//!
//! - over Streamable HTTP, a server that shows a task only to the session that created it (the
//!   TS and Python SDKs): a read, result or cancel of a task it holds, from another session, is
//!   answered "not found" in front of the service, and a list leaves such tasks out
//!   ([`Bound`]). Not a fault: the executor must keep its session across processes.
//!
//! - a task-augmented submission meeting an instance redeployed without task support for its
//!   tool (`tool_redeployed`): asked when the submission arrives, so a request the network lost
//!   or a replica answered never counts; the codec decodes the call again under the same id.
//!
//! The status-after-cancel flip happens once the executor has taken in a reply showing the task
//! `cancelled`: that confirmation is what makes a later outcome a lie, and an executor that never
//! saw it (the reply was lost, or it crashed before writing it down) may take the task's word.
//! "Taken in" is read from the trace: the network carried a reply showing `cancelled` under
//! correlation id R, the executor sent R for (node, kind, seq), received (node, kind, seq), and
//! the step it took for that reply was applied (moved or kept the record) rather than refused.
//! The flip is recorded with the state it meets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Duration;
use toolop::runner::Observation;

use super::net::{Delivery, SharedServer};
use super::World;
use crate::fake::codec::{Ask, Decoded, ExchangeKind, Push, Request, Response, RunAs};
use crate::fake::service::{CancelFaults, Out};
use crate::fake::truth::TaskStatus;
use crate::judge::checkers::view::reply_event;
use crate::series::faults::FaultKind;
use crate::trace::{FaultDetail, Shows, Trace, What};

/// A task marked for status-after-cancel: the decision that marked it, and the correlation ids
/// of delivered replies that showed it cancelled.
#[derive(Default)]
struct Mark {
    decision: u64,
    confirmations: Vec<u64>,
}

type Marked = BTreeMap<String, Mark>;

pub(super) async fn serve(
    world: Arc<World>,
    lane: usize,
    mut rx: mpsc::UnboundedReceiver<Delivery>,
) {
    let server = world.servers[lane].clone();
    let mut marked: Marked = BTreeMap::new();
    let mut finished: Vec<String> = Vec::new();
    let mut restart = Restart::default();
    // Asked once: only a lane over HTTP sessions has a session gate in front of its handlers.
    let http = world.net.lock().expect("net lock").http_session_lane(lane);
    let mut bound =
        (http && server.lock().expect("server lock").tasks_bound_to_session()).then(Bound::default);
    loop {
        flip_after_cancel(&world, lane, &server, &mut marked, &mut finished);
        let now = world.now_ms();
        let next = server.lock().expect("server lock").next_event_at_ms();
        // Without pending work the server still wakes each minute: every wait is bounded.
        let wake = next.unwrap_or(now + 60_000).max(now);
        let sleep = tokio::time::sleep_until(world.origin + Duration::from_millis(wake));
        tokio::select! {
            biased;
            msg = rx.recv() => {
                let Some(delivery) = msg else { return };
                let now = world.now_ms();
                let early = server.lock().expect("server lock").advance(now);
                send_out(&world, lane, &server, &mut marked, early);
                // The session gate first: a request it refuses never meets a restart.
                let refused = http && session_gone(&world, lane, &mut marked, &delivery);
                if refused || restart.loses(&world, lane, &server, &mut marked, &delivery) {
                    continue;
                }
                match &mut bound {
                    Some(b) if b.hides(&server, &delivery) => {
                        if let Some(call) = delivery.decoded.call {
                            let hidden = Response::NotFound { expired: false, hidden: true };
                            carry(&world, lane, &mut marked, call, hidden);
                        }
                    }
                    b => serve_one(&world, lane, &server, &mut marked, delivery, b.as_mut()),
                }
            }
            _ = sleep => {
                let now = world.now_ms();
                let out = server.lock().expect("server lock").advance(now);
                send_out(&world, lane, &server, &mut marked, out);
            }
        }
    }
}

/// The `server_restart` fault of a lane: whether it happened (once per series at most), and
/// the connections it cut.
#[derive(Default)]
struct Restart {
    done: bool,
    cut: BTreeSet<u32>,
}

impl Restart {
    /// Whether the old process takes `d` down with it: a request on a connection the restart
    /// cut (it was on its way to a process that is gone), or the request the restart meets. The
    /// restart is asked at each request that arrives while the server holds a task (the rate is
    /// per request, so restarts spread over a series), of a server without toolop's idempotency
    /// extension (whose contract keeps tasks and keys).
    fn loses(
        &mut self,
        world: &World,
        lane: usize,
        server: &SharedServer,
        marked: &mut Marked,
        d: &Delivery,
    ) -> bool {
        if self.cut.contains(&d.conn) {
            return true;
        }
        if self.done
            || world.params.toolop_extensions
            || world.params.faults.rate(FaultKind::ServerRestart) == 0.0
            || !server.lock().expect("server lock").service().holds_a_task()
        {
            return false;
        }
        let node = d.node.as_deref();
        let Some(decision) = world.ask(lane, FaultKind::ServerRestart, node) else {
            return false;
        };
        self.done = true;
        let lost = server.lock().expect("server lock").restart(world.now_ms());
        for task in &lost {
            marked.remove(task);
        }
        let mut net = world.net.lock().expect("net lock");
        let cut = if net.http_session_lane(lane) {
            // Over HTTP the executor's side holds no connection to the old process: it forgets
            // the sessions, and what it had sent on its way was sent whole.
            net.forget_sessions(lane);
            vec![]
        } else {
            // What was on its way is named before the connections close.
            let cut = net.on_the_way(lane);
            self.cut.extend(net.disconnect_lane(lane));
            cut
        };
        drop(net);
        let detail = FaultDetail::Restart {
            frame: d.frame,
            tasks: lost,
            cut,
        };
        world.record_fault(decision, FaultKind::ServerRestart, node, detail);
        true
    }
}

/// Streamable HTTP (`server.transport = "http"`): a request naming a session the server does not
/// know (it forgot every one when it restarted) is answered 404 in front of every handler, and
/// the service never sees it; an `initialize`, which names none, opens a new one.
fn session_gone(world: &World, lane: usize, marked: &mut Marked, d: &Delivery) -> bool {
    let known = world
        .net
        .lock()
        .expect("net lock")
        .session_known(lane, d.tag);
    if known {
        return false;
    }
    // A notification or an answer to a server request has nobody waiting for a reply.
    if let Some(call) = d.decoded.call {
        carry(world, lane, marked, call, Response::SessionGone);
    }
    true
}

/// Which HTTP session created each task, on a server that shows a task only to the session
/// that created it (the TS and Python SDKs; transcripts `11-cross-session`: another session's
/// `tasks/get`, `tasks/result` and `tasks/cancel` answer -32602 not found, its `tasks/list` is
/// empty).
#[derive(Default)]
struct Bound {
    owners: BTreeMap<String, u64>,
}

impl Bound {
    /// Whether `d` reads, fetches or cancels a task the server holds for another session.
    fn hides(&self, server: &SharedServer, d: &Delivery) -> bool {
        let Ask::Service(
            Request::Poll { task } | Request::Fetch { task } | Request::Cancel { task },
        ) = &d.decoded.ask
        else {
            return false;
        };
        self.owners
            .get(task)
            .is_some_and(|&owner| owner != d.tag.session)
            && server
                .lock()
                .expect("server lock")
                .service()
                .holds_task(task)
    }

    /// Take in a reply to a request of `session`: a submission's task is that session's, and a
    /// list shows only that session's tasks.
    fn note(&mut self, exchange: ExchangeKind, session: u64, response: &mut Response) {
        match response {
            Response::Task(v) if exchange == ExchangeKind::Submit => {
                self.owners.entry(v.id.clone()).or_insert(session);
            }
            Response::Tasks(ts) => {
                ts.retain(|t| self.owners.get(&t.id).is_none_or(|&owner| owner == session))
            }
            _ => {}
        }
    }
}

/// Serve one request, deciding the server-side faults that ride on it.
fn serve_one(
    world: &World,
    lane: usize,
    server: &SharedServer,
    marked: &mut Marked,
    d: Delivery,
    mut bound: Option<&mut Bound>,
) {
    let now = world.now_ms();
    let session = d.tag.session;
    let node = d.node.as_deref();
    let task = match &d.decoded.ask {
        Ask::Service(
            Request::Poll { task } | Request::Fetch { task } | Request::Cancel { task },
        ) => Some(task.clone()),
        _ => None,
    };
    let mut faults = CancelFaults::default();
    if d.decoded.exchange == ExchangeKind::Cancel {
        let t = task.as_deref().unwrap_or_default();
        if server
            .lock()
            .expect("server lock")
            .service()
            .cancel_meets_running_work(t)
        {
            let detail = || FaultDetail::Task {
                task: t.to_string(),
            };
            // A cancel the tool never looks for meets neither a racing end nor a flip.
            faults.ignore = world
                .fire(lane, FaultKind::CancelIgnored, node, detail())
                .is_some();
            faults.race = !faults.ignore
                && world
                    .fire(lane, FaultKind::CompletionCancelRace, node, detail())
                    .is_some();
            // Recorded when (and if) the status flips.
            let flip = if faults.ignore {
                None
            } else {
                world.ask(lane, FaultKind::StatusAfterCancel, node)
            };
            if let Some(decision) = flip {
                faults.keep_working = true;
                marked.insert(
                    t.to_string(),
                    Mark {
                        decision,
                        confirmations: vec![],
                    },
                );
            }
        }
    }
    let decoded = redeployed(world, lane, server, d.decoded, d.frame, node);
    let exchange = decoded.exchange;
    let replies = server
        .lock()
        .expect("server lock")
        .serve(now, decoded, faults, Some(d.frame));
    note_ttl_failures(world, lane, server);
    for mut r in replies {
        if let Some(b) = bound.as_deref_mut() {
            b.note(exchange, session, &mut r.response);
        }
        if let (Response::NotFound { expired: true, .. }, Some(t)) = (&r.response, &task) {
            note_expiry(world, lane, server, exchange, t, node);
        }
        carry(world, lane, marked, r.call, r.response);
    }
}

/// Tasks the request's sweep failed at their ttl while they ran (the `rmcp` profile): the
/// `ttl_fails_running_task` fault, which follows from the short ttl that
/// `server_deletes_running_task` draws.
fn note_ttl_failures(world: &World, lane: usize, server: &SharedServer) {
    let failed = {
        let mut s = server.lock().expect("server lock");
        let ids = s.take_expired_running();
        ids.into_iter()
            .map(|task| {
                let node = s.service().node_of_task(&task).map(str::to_string);
                (task, node)
            })
            .collect::<Vec<_>>()
    };
    for (task, node) in failed {
        let detail = FaultDetail::Task { task };
        world.note(
            lane,
            FaultKind::TtlFailsRunningTask,
            node.as_deref(),
            detail,
        );
    }
}

/// The `tool_redeployed` fault: a task-augmented submission reaches an instance redeployed
/// since the executor listed the tools, whose tool no longer supports tasks.
fn redeployed(
    world: &World,
    lane: usize,
    server: &SharedServer,
    decoded: Decoded,
    frame: u64,
    node: Option<&str>,
) -> Decoded {
    let task_submission = matches!(
        &decoded.ask,
        Ask::Service(Request::Submit(s)) if s.run == RunAs::Task
    );
    let detail = FaultDetail::Request {
        exchange: ExchangeKind::Submit,
        frame,
    };
    if task_submission
        && world
            .fire(lane, FaultKind::ToolRedeployed, node, detail)
            .is_some()
    {
        server
            .lock()
            .expect("server lock")
            .without_task_support(decoded)
    } else {
        decoded
    }
}

/// Carry one reply; note it when it shows a marked task cancelled.
fn carry(
    world: &World,
    lane: usize,
    marked: &mut Marked,
    call: crate::fake::codec::CallId,
    response: Response,
) {
    let shows_cancelled = match &response {
        Response::Task(v) if v.status == TaskStatus::Cancelled && marked.contains_key(&v.id) => {
            Some(v.id.clone())
        }
        _ => None,
    };
    let sent = world
        .net
        .lock()
        .expect("net lock")
        .reply(lane, call, response);
    if let (Some(task), Some(request_id)) = (shows_cancelled, sent) {
        if let Some(m) = marked.get_mut(&task) {
            m.confirmations.push(request_id);
        }
    }
}

/// The server answered "not found" for a task it deleted: the expiry faults, which follow from
/// a short ttl. A task deleted before it ended was a running task deleted.
fn note_expiry(
    world: &World,
    lane: usize,
    server: &SharedServer,
    exchange: ExchangeKind,
    task: &str,
    node: Option<&str>,
) {
    if !matches!(
        exchange,
        ExchangeKind::Poll | ExchangeKind::Fetch | ExchangeKind::Cancel
    ) {
        return;
    }
    let running = server
        .lock()
        .expect("server lock")
        .truth()
        .tasks
        .get(task)
        .is_some_and(|t| t.terminal_status.is_none());
    world.note(
        lane,
        FaultKind::NotFoundAfterExpiry,
        node,
        FaultDetail::Task {
            task: task.to_string(),
        },
    );
    if running {
        world.note(
            lane,
            FaultKind::ServerDeletesRunningTask,
            node,
            FaultDetail::Task {
                task: task.to_string(),
            },
        );
    }
}

/// Carry what the server emitted: replies to held and inline calls, pushes.
fn send_out(world: &World, lane: usize, server: &SharedServer, marked: &mut Marked, out: Vec<Out>) {
    for o in out {
        match o {
            Out::Reply(r) => carry(world, lane, marked, r.call, r.response),
            Out::Push(p) => {
                let (frame, node, exchange, shown) = {
                    let mut s = server.lock().expect("server lock");
                    let task = match &p {
                        Push::Input { task, .. } => task,
                        Push::Status(v) => &v.id,
                    };
                    let node = s.service().node_of_task(task).map(str::to_string);
                    let frame = s.encode_push(&p);
                    let (exchange, shown) = match p {
                        Push::Input { task, round, .. } => {
                            (ExchangeKind::ServerRequest, Shows::Input { task, round })
                        }
                        Push::Status(v) => {
                            let n = ExchangeKind::Notification;
                            (n, s.shows(n, &Response::Task(v)))
                        }
                    };
                    (frame, node, exchange, shown)
                };
                if let Some(frame) = frame {
                    world
                        .net
                        .lock()
                        .expect("net lock")
                        .push(lane, frame, exchange, node, shown);
                }
            }
        }
    }
}

/// Status-after-cancel: marked tasks whose work ended while cancelled flip once the trace shows
/// their node's cancel confirmed.
fn flip_after_cancel(
    world: &World,
    lane: usize,
    server: &SharedServer,
    marked: &mut Marked,
    finished: &mut Vec<String>,
) {
    finished.extend(
        server
            .lock()
            .expect("server lock")
            .take_finished_after_cancel(),
    );
    if finished.is_empty() {
        return;
    }
    let now = world.now_ms();
    finished.retain(|task| {
        let Some(mark) = marked.get(task) else {
            return false;
        };
        let decision = mark.decision;
        let node = server
            .lock()
            .expect("server lock")
            .service()
            .node_of_task(task)
            .map(str::to_string);
        let Some(node) = node else { return false };
        if !taken_in(
            &world.trace.lock().expect("trace lock"),
            &mark.confirmations,
        ) {
            return true;
        }
        marked.remove(task);
        let flipped = server
            .lock()
            .expect("server lock")
            .flip_after_cancel(task, now);
        if let Some(to) = flipped {
            world.record_fault(
                decision,
                FaultKind::StatusAfterCancel,
                Some(&node),
                FaultDetail::StatusFlip {
                    task: task.clone(),
                    to,
                },
            );
        }
        false
    });
    let out = server.lock().expect("server lock").advance(now);
    send_out(world, lane, server, marked, out);
}

/// Whether an executor moved on one of the replies carried under `request_ids`: took the
/// cancelled status in. A step that stayed set the reply aside (an answer to a request older
/// than the newest, read only to end a not-found streak): the executor does not know the task
/// was cancelled, and flipping then leaves it no way to learn it (mcp_replicas seed 482459:
/// a poll sent before the cancel answered 'cancelled', was set aside, the status flipped to
/// 'failed', and the executor's next poll read 'failed').
fn taken_in(trace: &Trace, request_ids: &[u64]) -> bool {
    // (exec, node, kind, seq) of the requests those replies answered.
    let mut sent: Vec<((u64, u32), &str, &str, u64)> = vec![];
    // A received reply of interest waiting for the step that handles it: (exec, node) -> event.
    let mut waiting: BTreeMap<((u64, u32), &str), String> = BTreeMap::new();
    for e in &trace.events {
        let What::Exec {
            epoch,
            incarnation,
            obs,
        } = &e.what
        else {
            continue;
        };
        let exec = (*epoch, *incarnation);
        match obs {
            Observation::Sent {
                node,
                kind,
                seq,
                rpc_id: Some(r),
            } if request_ids.contains(r) => sent.push((exec, node, kind, *seq)),
            Observation::Received {
                node,
                kind,
                seq,
                reply,
                ..
            } if sent.contains(&(exec, node.as_str(), *kind, *seq)) => {
                waiting.insert((exec, node.as_str()), reply_event(kind, reply));
            }
            Observation::Moved { node, event, .. }
                if waiting
                    .remove(&(exec, node.as_str()))
                    .is_some_and(|w| w == *event) =>
            {
                return true;
            }
            Observation::Stayed { node, event }
                if waiting
                    .get(&(exec, node.as_str()))
                    .is_some_and(|w| w == event) =>
            {
                waiting.remove(&(exec, node.as_str()));
            }
            Observation::Rejected { node, .. }
            | Observation::Refused { node, .. }
            | Observation::LedgerRefused { node, .. } => {
                waiting.remove(&(exec, node.as_str()));
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use toolop::record::LocalState;

    use super::*;

    fn exec(trace: &mut Trace, t_ms: u64, obs: Observation) {
        trace.push(
            t_ms,
            What::Exec {
                epoch: 1,
                incarnation: 2,
                obs,
            },
        );
    }

    /// A poll whose reply showed the task cancelled (`rpc_id` 7), read by the executor.
    fn poll_answered(trace: &mut Trace) {
        exec(
            trace,
            1,
            Observation::Sent {
                node: "n1".into(),
                kind: "poll",
                seq: 3,
                rpc_id: Some(7),
            },
        );
        exec(
            trace,
            2,
            Observation::Received {
                node: "n1".into(),
                kind: "poll",
                seq: 3,
                reply: "status",
                retry_after_ms: None,
            },
        );
    }

    #[test]
    fn only_a_step_that_moved_on_the_reply_takes_the_cancel_in() {
        // Set aside (stayed): not taken in, so the status must not flip yet.
        let mut set_aside = Trace::new(100);
        poll_answered(&mut set_aside);
        exec(
            &mut set_aside,
            3,
            Observation::Stayed {
                node: "n1".into(),
                event: "reply:poll:status".into(),
            },
        );
        assert!(!taken_in(&set_aside, &[7]));
        // A later step of the same node on another event does not count either.
        exec(
            &mut set_aside,
            4,
            Observation::Moved {
                node: "n1".into(),
                event: "timer:cancel_requery".into(),
                path: vec![LocalState::CancelRequested, LocalState::CancelRequested],
                version: 9,
            },
        );
        assert!(!taken_in(&set_aside, &[7]));

        // Acted on (moved): taken in.
        let mut acted = Trace::new(100);
        poll_answered(&mut acted);
        exec(
            &mut acted,
            3,
            Observation::Moved {
                node: "n1".into(),
                event: "reply:poll:status".into(),
                path: vec![LocalState::CancelRequested, LocalState::TerminalObserved],
                version: 9,
            },
        );
        assert!(taken_in(&acted, &[7]));
        // A reply under another request id is not one of the confirmations.
        assert!(!taken_in(&acted, &[8]));
    }
}
