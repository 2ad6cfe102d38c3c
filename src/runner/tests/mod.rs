//! The runner on real tokio (the production runtime), against small scripted MCP servers over
//! the channel transport. Intervals are a few milliseconds so the tests run in real time; every
//! wait is bounded and names what it waited for.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Duration;

use super::*;
use crate::core::{Command, PollPolicy};
use crate::ledger::{MemoryLedger, SqliteLedger};
use crate::protocol::mcp_2025_11_25::Mcp20251125Adapter;
use crate::protocol::Reply;
use crate::record::{AdapterId, LocalState, ToolOperation};
use crate::transport::{ChannelTransport, InFrame};

type Seen = Arc<Mutex<Vec<Observation>>>;

struct Collect(Seen);

impl Observer for Collect {
    fn observe(&mut self, _now_ms: u64, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

/// The server's tasks, shared by every connection (as one server behind two executors).
#[derive(Default)]
struct Tasks {
    status: std::collections::BTreeMap<String, &'static str>,
    calls: u32,
    polls: u32,
    cancels: u32,
    /// The first this many replies to `tasks/get` are cut short on the way.
    cut_polls: u32,
    /// Before the first reply to `tasks/get`, a cut message that names no request (a server
    /// message, as an elicitation pushed on a stream).
    junk_before_poll: bool,
    /// The first reply to `tasks/get` is a 503 asking to wait this long.
    unavailable_first_poll_ms: Option<u64>,
}

struct Server {
    tasks: Mutex<Tasks>,
    /// A task completes on this poll (`None`: tasks run until cancelled).
    complete_on_poll: Option<u32>,
    /// When set, a cancel is answered only once the test adds a permit.
    cancel_gate: Option<Semaphore>,
}

impl Server {
    fn new(complete_on_poll: Option<u32>, gated_cancel: bool) -> Arc<Server> {
        let cancel_gate = gated_cancel.then(|| Semaphore::new(0));
        Arc::new(Server {
            tasks: Mutex::new(Tasks::default()),
            complete_on_poll,
            cancel_gate,
        })
    }

    fn counts(&self) -> (u32, u32, u32) {
        let t = self.tasks.lock().unwrap();
        (t.calls, t.polls, t.cancels)
    }

    fn complete_all(&self) {
        self.tasks
            .lock()
            .unwrap()
            .status
            .values_mut()
            .for_each(|s| *s = "completed");
    }
}

fn task(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "createdAt": "2026-12-01T00:00:00Z", "lastUpdatedAt": "2026-12-01T00:00:00Z", "ttl": 60000, "pollInterval": 5})
}

/// Serve one connection.
async fn serve(
    mut rx: mpsc::UnboundedReceiver<crate::transport::OutFrame>,
    tx: mpsc::UnboundedSender<InFrame>,
    server: Arc<Server>,
) {
    while let Some(frame) = rx.recv().await {
        let msg: Value = serde_json::from_slice(&frame.body).unwrap();
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let method = msg["method"].as_str().unwrap_or("").to_string();
        if let ("tasks/cancel", Some(gate)) = (method.as_str(), &server.cancel_gate) {
            gate.acquire().await.unwrap().forget();
        }
        let task_id = msg["params"]["taskId"].as_str().unwrap_or("").to_string();
        let result = {
            let mut t = server.tasks.lock().unwrap();
            match method.as_str() {
                "initialize" => {
                    json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "t", "version": "1"},
                    "capabilities": {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}})
                }
                "tools/list" => {
                    json!({"tools": [{"name": "report", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]})
                }
                "tools/call" => {
                    t.calls += 1;
                    let id = format!("t{}", t.calls);
                    t.status.insert(id.clone(), "working");
                    json!({"task": task(&id, "working")})
                }
                "tasks/get" => {
                    t.polls += 1;
                    let polls = t.polls;
                    let status = t.status.get_mut(&task_id).unwrap();
                    if *status == "working" && server.complete_on_poll.is_some_and(|n| polls >= n) {
                        *status = "completed";
                    }
                    task(&task_id, status)
                }
                "tasks/cancel" => {
                    t.cancels += 1;
                    t.status.insert(task_id.clone(), "cancelled");
                    task(&task_id, "cancelled")
                }
                "tasks/result" => json!({"content": [{"type": "text", "text": "ok"}],
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}}),
                _ => continue,
            }
        };
        let mut body =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap();
        if method == "tasks/get" {
            let mut t = server.tasks.lock().unwrap();
            if std::mem::take(&mut t.junk_before_poll) {
                let _ = tx.send(InFrame::message(
                    br#"{"jsonrpc":"2.0","method":"elic"#.to_vec(),
                ));
            }
            if t.cut_polls > 0 {
                t.cut_polls -= 1;
                body.truncate(body.len() / 2);
            }
        }
        let refused = (method == "tasks/get")
            .then(|| {
                server
                    .tasks
                    .lock()
                    .unwrap()
                    .unavailable_first_poll_ms
                    .take()
            })
            .flatten();
        let _ = tx.send(InFrame {
            request_id: frame.request_id,
            http_status: if refused.is_some() { 503 } else { 200 },
            retry_after_ms: refused,
            body: if refused.is_some() { vec![] } else { body },
        });
    }
}

struct Running {
    seen: Seen,
    inputs: mpsc::UnboundedSender<Input>,
    exit: tokio::task::JoinHandle<Exit>,
}

impl Running {
    fn saw(&self, f: impl Fn(&Observation) -> bool) -> bool {
        self.seen.lock().unwrap().iter().any(f)
    }

    async fn stop(self) -> (Exit, Vec<Observation>) {
        let _ = self.inputs.send(Input::Shutdown);
        let exit = self.exit.await.unwrap();
        let seen = self.seen.lock().unwrap().clone();
        (exit, seen)
    }
}

fn config() -> RunnerConfig {
    let mut cfg = RunnerConfig::default();
    cfg.core.poll = PollPolicy {
        initial_interval_ms: 5,
        backoff_multiplier: 1.0,
        interval_cap_ms: 5,
        jitter_fraction: 0.1,
        honor_server_interval: true,
    };
    cfg.request_timeout_ms = 2_000;
    cfg.cancel_request_check_ms = 5;
    cfg
}

fn start(
    ledger: &SharedLedger,
    server: &Arc<Server>,
    epoch: u64,
    rpc_id_base: u64,
    tune: impl FnOnce(Runner) -> Runner,
) -> Running {
    let (transport, out_rx, in_tx) = ChannelTransport::pair();
    tokio::spawn(serve(out_rx, in_tx, server.clone()));
    let seen: Seen = Arc::new(Mutex::new(vec![]));
    let (approvals, _) = mpsc::unbounded_channel();
    let runner = Runner::new(
        config(),
        epoch,
        tokio::time::Instant::now(),
        Box::new(Mcp20251125Adapter::new()),
        ledger.clone(),
        Box::new(Collect(seen.clone())),
        approvals,
        rpc_id_base + 1,
        rpc_id_base,
    );
    let (inputs, inputs_rx) = mpsc::unbounded_channel();
    let exit = tokio::spawn(tune(runner).run(transport, inputs_rx));
    Running { seen, inputs, exit }
}

fn node(id: &str) -> CallNode {
    CallNode {
        id: id.into(),
        tool: "report".into(),
        arguments: json!({"m": id}),
        submission_key: format!("k-{id}"),
    }
}

/// Wait (bounded, in real time) until `ok` holds.
async fn until(what: &str, ok: impl Fn() -> bool) {
    until_within(what, 4, ok).await
}

/// Wait until `ok` holds, at most `limit_s` seconds of real time.
async fn until_within(what: &str, limit_s: u64, ok: impl Fn() -> bool) {
    for _ in 0..limit_s * 200 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("gave up waiting ({limit_s} s) until {what}");
}

/// The record's cancel generation (how many cancels it has committed).
fn generation_of(ledger: &SharedLedger, id: &str) -> u32 {
    let rec = ledger.lock().unwrap().by_call_node(id).unwrap();
    rec.expect("the record").cancel_generation
}

fn state_of(ledger: &SharedLedger, id: &str) -> Option<LocalState> {
    ledger.lock().unwrap().local_state(id).unwrap()
}

/// An executor (epoch 1) started on `ledger`, once it has submitted n1 and the record shows it
/// working.
async fn working_n1(ledger: &SharedLedger, server: &Arc<Server>) -> Running {
    let r = start(ledger, server, 1, 0, |r| r);
    r.inputs.send(Input::Submit(node("n1"))).unwrap();
    until("n1 is working", || {
        state_of(ledger, "n1") == Some(LocalState::Working)
    })
    .await;
    r
}

fn on_tokio(test: impl std::future::Future<Output = ()>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(test);
}

fn memory() -> SharedLedger {
    Arc::new(Mutex::new(MemoryLedger::new()))
}

fn sqlite() -> SharedLedger {
    Arc::new(Mutex::new(SqliteLedger::open_in_memory().unwrap()))
}

#[test]
fn runs_on_real_tokio_and_accepts_exactly_once() {
    for ledger in [memory(), sqlite()] {
        on_tokio(async {
            let server = Server::new(Some(3), false);
            let r = start(&ledger, &server, 1, 0, |r| r);
            r.inputs.send(Input::Submit(node("n1"))).unwrap();
            // The same call node again must not start a second operation.
            r.inputs.send(Input::Submit(node("n1"))).unwrap();
            until("n1 has its receipt", || {
                state_of(&ledger, "n1") == Some(LocalState::Accepted)
            })
            .await;
            let (exit, seen) = r.stop().await;
            assert_eq!(exit, Exit::Shutdown);
            let l = ledger.lock().unwrap();
            assert_eq!(l.receipts().unwrap().len(), 1);
            assert_eq!(l.outbox().unwrap().len(), 1);
            assert_eq!(server.counts().0, 1, "exactly one operation created");
            assert!(seen
                .iter()
                .any(|o| matches!(o, Observation::DuplicateCallNode { .. })));
            assert!(seen.iter().any(|o| matches!(
                o,
                Observation::Negotiated {
                    key_lookup: false,
                    ..
                }
            )));
        });
    }
}

#[test]
fn a_cut_reply_fails_its_exchange_at_once() {
    // The reply to the first poll is cut on the way. It still belongs to its POST, so the poll
    // fails as malformed now rather than after the request timeout (the test's is 2 s), and
    // the next poll finds the task done.
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(Some(2), false);
        server.tasks.lock().unwrap().cut_polls = 1;
        let r = start(&ledger, &server, 1, 0, |r| r);
        r.inputs.send(Input::Submit(node("n1"))).unwrap();
        until("n1 has its receipt", || {
            state_of(&ledger, "n1") == Some(LocalState::Accepted)
        })
        .await;
        let (_, seen) = r.stop().await;
        assert!(seen.iter().any(|o| matches!(
            o,
            Observation::Received {
                kind: "poll",
                reply: "malformed",
                ..
            }
        )));
        assert!(!seen
            .iter()
            .any(|o| matches!(o, Observation::Lost { .. } | Observation::Malformed { .. })));
    });
}

#[test]
fn a_cut_message_that_names_no_request_fails_nothing() {
    // A server message cut on the way carries no request id: it is reported as malformed and
    // the poll in flight still gets its own reply.
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(Some(1), false);
        server.tasks.lock().unwrap().junk_before_poll = true;
        let r = start(&ledger, &server, 1, 0, |r| r);
        r.inputs.send(Input::Submit(node("n1"))).unwrap();
        until("n1 has its receipt", || {
            state_of(&ledger, "n1") == Some(LocalState::Accepted)
        })
        .await;
        let (exit, seen) = r.stop().await;
        assert_eq!(exit, Exit::Shutdown);
        assert!(seen
            .iter()
            .any(|o| matches!(o, Observation::Malformed { .. })));
        assert!(!seen.iter().any(|o| matches!(
            o,
            Observation::Received {
                reply: "malformed",
                ..
            } | Observation::Unrouted { .. }
        )));
    });
}

/// Another executor's write: `change` applied to `node`'s record, committed under `epoch`.
fn write_as(
    ledger: &SharedLedger,
    node: &str,
    epoch: u64,
    change: impl FnOnce(&mut crate::record::ToolOperation),
) {
    let mut l = ledger.lock().unwrap();
    let mut record = l.by_call_node(node).unwrap().expect("the record");
    let expected_version = record.version;
    change(&mut record);
    l.commit(crate::ledger::Write {
        expected_version,
        writer_epoch: epoch,
        record,
        accept: None,
        reconcile: None,
        effect: None,
        now_ms: 0,
    })
    .unwrap();
}

/// Pauses the first commit of one event until the test lets it go.
struct PauseOnce {
    event_prefix: &'static str,
    paused: Option<oneshot::Sender<()>>,
    release: Option<oneshot::Receiver<()>>,
}

impl PauseOnce {
    /// The delay, the signal that the commit is held, and the release.
    fn on(event_prefix: &'static str) -> (PauseOnce, oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (paused_tx, paused_rx) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel();
        let pause = PauseOnce {
            event_prefix,
            paused: Some(paused_tx),
            release: Some(release_rx),
        };
        (pause, paused_rx, release_tx)
    }
}

impl CommitDelay for PauseOnce {
    fn before_commit(
        &mut self,
        _node: &str,
        event: &str,
    ) -> Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
        if !event.starts_with(self.event_prefix) {
            return None;
        }
        let (paused, release) = (self.paused.take()?, self.release.take()?);
        Some(Box::pin(async move {
            let _ = paused.send(());
            let _ = release.await;
        }))
    }
}

/// Two executors share one ledger. A's commit of a poll answer is held between its read and
/// its write; meanwhile B commits the caller's cancel. A's write must be refused by
/// compare-and-swap, and A must step the same answer again on the record as B left it: B's
/// cancel survives (no lost update) and A's answer is applied (no lost reply).
fn a_write_between_read_and_commit(ledger: SharedLedger) {
    on_tokio(async {
        let server = Server::new(None, true);
        let (pause, paused_rx, release_tx) = PauseOnce::on("reply:poll");
        let a = start(&ledger, &server, 1, 0, |r| {
            r.with_commit_delay(Box::new(pause))
        });
        let b = start(&ledger, &server, 1, 1_000_000, |r| r);
        // B must not find n1 in flight when it starts (it would resume it and race A's polls).
        until("B has started", || {
            b.saw(|o| matches!(o, Observation::Started { resumed: 0, .. }))
        })
        .await;
        a.inputs.send(Input::Submit(node("n1"))).unwrap();
        tokio::time::timeout(Duration::from_secs(4), paused_rx)
            .await
            .expect("A reached a poll answer's commit")
            .unwrap();
        let read_by_a = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
        b.inputs.send(Input::Cancel { node: "n1".into() }).unwrap();
        until("B committed the cancel", || {
            state_of(&ledger, "n1") == Some(LocalState::CancelRequested)
        })
        .await;
        release_tx.send(()).unwrap();
        until("A stepped its answer again", || a.saw(|o| matches!(o, Observation::Stayed { event, .. } if event.starts_with("reply:poll")))).await;
        let after_a = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
        assert_eq!(
            (after_a.local_state, after_a.cancel_generation),
            (LocalState::CancelRequested, 1),
            "B's cancel was not overwritten"
        );
        assert!(
            after_a.version >= read_by_a.version + 2,
            "both writes are in the ledger: {} -> {}",
            read_by_a.version,
            after_a.version
        );
        assert!(
            after_a.poll_cursor.applied_seq > read_by_a.poll_cursor.applied_seq,
            "A's answer was applied, not dropped"
        );
        server.cancel_gate.as_ref().unwrap().add_permits(1);
        until("the cancel is confirmed", || {
            state_of(&ledger, "n1") == Some(LocalState::CancelledAccepted)
        })
        .await;
        let (_, seen_a) = a.stop().await;
        let (_, seen_b) = b.stop().await;
        let conflict = seen_a.iter().position(|o| matches!(o, Observation::CommitConflict { node, event, attempt: 1, .. } if node == "n1" && event.starts_with("reply:poll")));
        let conflict = conflict.expect("A observed the conflict");
        assert!(
            seen_a[conflict..].iter().any(|o| matches!(o, Observation::Stayed { event, .. } if event.starts_with("reply:poll"))),
            "the same event was applied after the conflict"
        );
        for o in seen_a.iter().chain(&seen_b) {
            assert!(
                !matches!(
                    o,
                    Observation::LedgerRefused { .. } | Observation::Fenced { .. }
                ),
                "nothing refused: {o:?}"
            );
        }
        let l = ledger.lock().unwrap();
        assert_eq!(
            l.receipts().unwrap().len(),
            1,
            "one receipt between two executors"
        );
        assert_eq!(server.counts().0, 1, "one operation");
    });
}

#[test]
fn a_write_between_read_and_commit_is_stepped_again_not_lost_memory() {
    a_write_between_read_and_commit(memory());
}

#[test]
fn a_write_between_read_and_commit_is_stepped_again_not_lost_sqlite() {
    a_write_between_read_and_commit(sqlite());
}

/// A rollback bumps the ledger's epoch under a running executor: its next write is fenced and
/// it does nothing more for that record, even once the server completes the task.
#[test]
fn a_fenced_executor_stops_acting_on_the_record() {
    for ledger in [memory(), sqlite()] {
        on_tokio(async {
            let server = Server::new(None, false);
            let r = working_n1(&ledger, &server).await;
            assert_eq!(ledger.lock().unwrap().bump_epoch().unwrap(), 2);
            let fenced_at = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
            until("the executor is fenced", || {
                r.saw(|o| matches!(o, Observation::Fenced { node, .. } if node == "n1"))
            })
            .await;
            server.complete_all();
            let polls = server.counts().1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(server.counts().1, polls, "no poll after the fence");
            let (_, seen) = r.stop().await;
            let l = ledger.lock().unwrap();
            assert_eq!(
                l.by_call_node("n1").unwrap().unwrap(),
                fenced_at,
                "nothing written after the fence"
            );
            assert!(l.receipts().unwrap().is_empty());
            let fenced = seen
                .iter()
                .filter(|o| matches!(o, Observation::Fenced { .. }))
                .count();
            assert_eq!(fenced, 1, "fenced once, then left alone");
        });
    }
}

/// Crashes the executor right after the cancel step is committed, before its send.
struct CrashAfterCancelCommit;

impl CrashPoints for CrashAfterCancelCommit {
    fn crash_here(&mut self, point: CrashPoint, _node: &str) -> bool {
        point == CrashPoint::AfterCommitBeforeSend
    }
}

/// `toolop cancel NODE` writes a request into the ledger; a running executor picks it up on
/// its wake-ups, one that starts picks it up at once, and a request is taken only after the
/// record's cancel is committed: a crash in between leaves it for the next executor.
#[test]
fn cancel_requests_in_the_ledger_are_picked_up_and_taken_after_the_commit() {
    on_tokio(async {
        let ledger = sqlite();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;

        // Asked while no executor runs; the next one crashes between the commit and the send.
        ledger.lock().unwrap().request_cancel("n1", 7).unwrap();
        let crashing = start(&ledger, &server, 1, 1_000_000, |r| {
            r.with_crash_points(Box::new(CrashAfterCancelCommit))
        });
        let exit = tokio::time::timeout(Duration::from_secs(4), crashing.exit)
            .await
            .expect("the executor crashed")
            .unwrap();
        assert!(
            matches!(exit, Exit::Crashed(CrashPoint::AfterCommitBeforeSend)),
            "{exit:?}"
        );
        let rec = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
        assert_eq!(
            (rec.local_state, rec.cancel_generation),
            (LocalState::CancelRequested, 1)
        );
        assert_eq!(
            ledger.lock().unwrap().cancel_requests().unwrap().len(),
            1,
            "still pending after the crash"
        );
        assert!(crashing.seen.lock().unwrap().iter().any(|o| matches!(o, Observation::CancelRequestPicked { node, requested_at_ms: 7, moot: false } if node == "n1")));

        // The next executor resumes, picks the request again (idempotent: no second generation),
        // takes it, and the cancel completes.
        let next = start(&ledger, &server, 1, 2_000_000, |r| r);
        until("n1 is cancelled", || {
            state_of(&ledger, "n1") == Some(LocalState::CancelledAccepted)
        })
        .await;
        until("the request is taken", || {
            ledger.lock().unwrap().cancel_requests().unwrap().is_empty()
        })
        .await;
        assert_eq!(generation_of(&ledger, "n1"), 1);

        // While it runs: a request for a new node is picked up on a wake-up.
        next.inputs.send(Input::Submit(node("n2"))).unwrap();
        until("n2 is working", || {
            state_of(&ledger, "n2") == Some(LocalState::Working)
        })
        .await;
        ledger.lock().unwrap().request_cancel("n2", 9).unwrap();
        until("n2 is cancelled", || {
            state_of(&ledger, "n2") == Some(LocalState::CancelledAccepted)
        })
        .await;
        // A request for a settled node is moot: taken without a cancel.
        ledger.lock().unwrap().request_cancel("n1", 11).unwrap();
        until("the moot request is taken", || {
            ledger.lock().unwrap().cancel_requests().unwrap().is_empty()
        })
        .await;
        let (_, seen) = next.stop().await;
        assert!(seen.iter().any(|o| matches!(o, Observation::CancelRequestPicked { node, moot: true, .. } if node == "n1")));
        assert_eq!(server.counts().0, 2, "one operation per node");
    });
}

/// A cancel request for a record another executor owns (a newer epoch's, or one on a lane this
/// executor does not speak) is left for that executor: not picked up, not acted on, not taken.
#[test]
fn a_cancel_request_for_another_executors_record_is_left_alone() {
    type Owner = (&'static str, u64, fn(&mut ToolOperation));
    let owners: [Owner; 2] = [
        ("a newer epoch", 2, |r| r.execution_epoch = 2),
        ("another lane", 1, |r| r.adapter = AdapterId::Aip151),
    ];
    for (whose, writer_epoch, owner) in owners {
        on_tokio(async {
            let ledger = memory();
            let server = Server::new(None, false);
            working_n1(&ledger, &server).await.stop().await;
            if writer_epoch > 1 {
                ledger.lock().unwrap().bump_epoch().unwrap();
            }
            write_as(&ledger, "n1", writer_epoch, owner);
            let before = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
            ledger.lock().unwrap().request_cancel("n1", 7).unwrap();
            // An executor that starts looks at once, then every `cancel_request_check_ms`.
            let r = start(&ledger, &server, 1, 1_000_000, |r| r);
            tokio::time::sleep(Duration::from_millis(300)).await;
            let (_, seen) = r.stop().await;
            assert!(
                !seen
                    .iter()
                    .any(|o| matches!(o, Observation::CancelRequestPicked { .. })),
                "{whose}: picked up"
            );
            let l = ledger.lock().unwrap();
            assert_eq!(l.cancel_requests().unwrap().len(), 1, "{whose}: taken");
            assert_eq!(
                l.by_call_node("n1").unwrap().unwrap(),
                before,
                "{whose}: the record was written"
            );
            assert_eq!(server.counts().0, 1, "{whose}: one operation");
        });
    }
}

/// Another writer commits the record between each read and commit of `event` while `on`
/// holds: every attempt of that event loses its race.
struct Interfere {
    ledger: SharedLedger,
    event: &'static str,
    on: Arc<std::sync::atomic::AtomicBool>,
}

impl CommitDelay for Interfere {
    fn before_commit(
        &mut self,
        node: &str,
        event: &str,
    ) -> Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
        if event == self.event && self.on.load(std::sync::atomic::Ordering::SeqCst) {
            write_as(&self.ledger, node, 1, |_| {});
        }
        None
    }
}

/// A cancel request whose click was not applied (every commit of it lost its race) stays in
/// the ledger and is picked up again: taking it then would lose the operator's cancel.
#[test]
fn a_cancel_request_whose_click_was_not_applied_stays() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        ledger.lock().unwrap().request_cancel("n1", 7).unwrap();
        let on = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let interfere = Interfere {
            ledger: ledger.clone(),
            event: "cancel_clicked",
            on: on.clone(),
        };
        let r = start(&ledger, &server, 1, 1_000_000, |r| {
            r.with_commit_delay(Box::new(interfere))
        });
        until("the click lost every race", || {
            r.saw(|o| matches!(o, Observation::LedgerRefused { node, error } if node == "n1" && error.contains("cancel_clicked")))
        })
        .await;
        // Ten more looks, every one refused the same way.
        tokio::time::sleep(Duration::from_millis(50)).await;
        {
            let l = ledger.lock().unwrap();
            assert_eq!(
                l.cancel_requests().unwrap().len(),
                1,
                "the request was taken"
            );
            assert_eq!(
                l.by_call_node("n1").unwrap().unwrap().cancel_generation,
                0,
                "cancelled"
            );
        }
        on.store(false, std::sync::atomic::Ordering::SeqCst);
        until("the request is taken once the click is applied", || {
            ledger.lock().unwrap().cancel_requests().unwrap().is_empty()
        })
        .await;
        assert_eq!(generation_of(&ledger, "n1"), 1);
        r.stop().await;
    });
}

// Server requests and the approval gate: `requests.rs`.
mod requests;

/// B (epoch 1) submits n1 and is paused at the commit of its first poll's answer; meanwhile A,
/// on the same epoch, sends the next poll and dies before its reply; then B goes on. B's answer
/// is no longer the newest, and nothing of B covers the node.
async fn overtaken_at_a_poll_answer(ledger: &SharedLedger, server: &Arc<Server>) -> Running {
    let (pause, paused_rx, release_tx) = PauseOnce::on("reply:poll");
    let b = start(ledger, server, 1, 0, |r| {
        r.with_commit_delay(Box::new(pause))
    });
    b.inputs.send(Input::Submit(node("n1"))).unwrap();
    tokio::time::timeout(Duration::from_secs(4), paused_rx)
        .await
        .expect("B reached a poll answer's commit")
        .unwrap();
    write_as(ledger, "n1", 1, |r| r.poll_cursor.sent_seq += 1);
    release_tx.send(()).unwrap();
    b
}

/// Two executors on one epoch (a `toolop resume` started while a `toolop call` still runs): A
/// sends a poll (commits `sent_seq` one higher) and dies before its reply, while B's own poll
/// is answered. B's answer is then not the latest, B holds nothing for the node (no request,
/// no send, no timer), and before `stall.rs` it waited until its deadline. Now B resumes the
/// node after `request_timeout_ms` and finishes it.
#[test]
fn a_node_nothing_covers_is_resumed_not_left_waiting() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        let b = overtaken_at_a_poll_answer(&ledger, &server).await;
        until("B resumed the uncovered node", || {
            b.saw(|o| matches!(o, Observation::Stalled { node, .. } if node == "n1"))
        })
        .await;
        server.complete_all();
        until("a receipt", || {
            state_of(&ledger, "n1") == Some(LocalState::Accepted)
        })
        .await;
        let (_, seen) = b.stop().await;
        let stalled = seen
            .iter()
            .filter(|o| matches!(o, Observation::Stalled { .. }))
            .count();
        assert_eq!(stalled, 1, "resumed once, then covered again");
        assert_eq!(server.counts().0, 1, "one operation");
        assert_eq!(ledger.lock().unwrap().receipts().unwrap().len(), 1);
    });
}

/// A node the stall watch takes up is not driven before a Retry-After this process was given
/// for it runs out (cargo-mutants: `resume_not_before_ms` returning 0 survived). B's first poll
/// is answered 503 with 4 s to wait; while B commits that, A sends the next poll and dies, so
/// B's refused poll is not the newest and nothing of B covers the node. The watch looks after a
/// request timeout (2 s), finds the Retry-After still running, and resumes only after it.
#[test]
fn a_stalled_node_is_resumed_only_after_its_retry_after() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        server.tasks.lock().unwrap().unavailable_first_poll_ms = Some(4_000);
        let b = overtaken_at_a_poll_answer(&ledger, &server).await;
        // The 503 reached B just before (the pause held only its commit).
        let refused_at = tokio::time::Instant::now();
        // Past the watch's first look (2 s), inside the Retry-After: nothing sent yet.
        tokio::time::sleep_until(refused_at + Duration::from_millis(3_500)).await;
        assert_eq!(server.counts().1, 1, "a poll inside the Retry-After");
        until_within("B resumed the uncovered node", 30, || {
            b.saw(|o| matches!(o, Observation::Stalled { node, .. } if node == "n1"))
        })
        .await;
        let waited = refused_at.elapsed();
        assert!(
            waited >= Duration::from_millis(3_900),
            "resumed {waited:?} after the 503, inside its 4 s Retry-After"
        );
        let (_, _) = b.stop().await;
    });
}

/// A call for a node another process inserted after this one started (and then left: it
/// stopped) is watched by the process that got the call as "duplicate", and taken up once the
/// record stays quiet for a request timeout (mcp_replicas seed 68025: before, nothing ever acted
/// on it again).
#[test]
fn a_call_for_a_node_another_process_left_is_taken_up() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        // B starts first, so its start-up resume finds nothing: A inserts n1 afterwards. Waiting
        // for B's start matters: on a loaded machine A inserted n1 before B read what was in
        // flight, B then drove n1 as its own and never stalled (CI, session 28).
        let b = start(&ledger, &server, 1, 1_000, |r| r);
        until("B started", || {
            b.saw(|o| matches!(o, Observation::Started { .. }))
        })
        .await;
        let a = working_n1(&ledger, &server).await;
        a.stop().await;
        b.inputs.send(Input::Submit(node("n1"))).unwrap();
        until("B answered the call as a duplicate", || {
            b.saw(|o| matches!(o, Observation::DuplicateCallNode { node } if node == "n1"))
        })
        .await;
        server.complete_all();
        // The watch waits out a request timeout (2 s) of quiet, on a loaded CI machine with the
        // lib's other tests running beside it (4 s was too short there once).
        until_within("B took the node up", 30, || {
            b.saw(|o| matches!(o, Observation::Stalled { node, .. } if node == "n1"))
        })
        .await;
        until("a receipt", || {
            state_of(&ledger, "n1") == Some(LocalState::Accepted)
        })
        .await;
        b.stop().await;
        assert_eq!(server.counts().0, 1, "one operation");
    });
}

/// A timer left from a state the record has since left fires after another process wrote the
/// record. The node is taken up from the record (mcp_sqlite seed 233) only when nothing else of
/// this process drives it: here a cancel re-query timer still waits out a not-found's retry
/// and the server's interval, and a resume would have replaced it with a read at once
/// (mcp_ext_faults seed 2412: a poll 643 ms after the last, the server suggesting 1000 ms).
/// A runner on epoch 1 (process 5,000,000) that is not serving: a test drives its steps and
/// reads its timers and queue directly.
/// What the core is told in a step of `r` (epoch 1, the bare runner's process) now.
fn ctx_now(r: &Runner) -> crate::core::Ctx {
    crate::core::Ctx {
        now_ms: r.now_ms(),
        jitter_permille: 0,
        epoch: 1,
        process: 5_000_000,
        overtaken_sender_until_ms: None,
    }
}

/// A new record of n1 (epoch 1, MCP 2025-11-25), for the runner's rules judged on a record
/// alone.
fn n1_record() -> ToolOperation {
    ToolOperation::new(
        "n1",
        "report",
        "",
        json!({}),
        AdapterId::Mcp20251125,
        "k",
        1,
        0,
        60_000,
    )
}

/// n1 runs to WORKING on a fresh server and stops; then another process on epoch 1 commits a
/// cancel of it that it has not sent yet. The record after.
async fn cancel_committed_elsewhere(ledger: &SharedLedger) -> ToolOperation {
    let server = Server::new(None, false);
    working_n1(ledger, &server).await.stop().await;
    write_as(ledger, "n1", 1, |r| {
        r.local_state = LocalState::CancelRequested;
        r.cancel_generation = 1;
    });
    let rec = ledger.lock().unwrap().by_call_node("n1").unwrap();
    rec.expect("the record")
}

fn bare_runner(ledger: &SharedLedger, cfg: RunnerConfig) -> Runner {
    let (approvals, _) = mpsc::unbounded_channel();
    Runner::new(
        cfg,
        1,
        tokio::time::Instant::now(),
        Box::new(Mcp20251125Adapter::new()),
        ledger.clone(),
        Box::new(NullObserver),
        approvals,
        7,
        5_000_000,
    )
}

/// A handshake attempt waits twice as long as the one before, from the first timeout up to the
/// request timeout: a slow server is given time, and a lost answer is asked again soon.
#[test]
fn handshake_attempts_back_off_up_to_the_request_timeout() {
    on_tokio(async {
        let mut cfg = config();
        cfg.handshake_first_timeout_ms = 300;
        cfg.request_timeout_ms = 2_000;
        let r = bare_runner(&memory(), cfg);
        let waits: Vec<u64> = (0..6)
            .map(|a| super::handshake::attempt_timeout_ms(&r, a))
            .collect();
        assert_eq!(waits, [300, 600, 1_200, 2_000, 2_000, 2_000]);
    });
}

/// A server that answers `tools/list` with HTTP 404 (Streamable HTTP: the session is gone) for
/// its first `refusals` attempts, then a tool list; how the runner ended.
async fn handshake_against_404s(refusals: usize) -> Exit {
    let mut cfg = config();
    cfg.handshake_attempts = 3;
    cfg.handshake_first_timeout_ms = 20;
    let runner = bare_runner(&memory(), cfg);
    let (transport, mut out_rx, in_tx) = ChannelTransport::pair();
    let (inputs, inputs_rx) = mpsc::unbounded_channel();
    let handle = tokio::spawn(runner.run(transport, inputs_rx));
    let body = |f: &crate::transport::OutFrame| serde_json::from_slice::<Value>(&f.body).unwrap();
    let answer = |id: &Value, result: Value| {
        InFrame::message(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap(),
        )
    };
    let mut refused = 0;
    // Bounded: an initialize, its notification, and at most three tools/list attempts.
    for _ in 0..5 {
        let next = tokio::time::timeout(Duration::from_secs(5), out_rx.recv()).await;
        let Ok(Some(frame)) = next else { break };
        let msg = body(&frame);
        match msg["method"].as_str() {
            Some("initialize") => {
                let caps = json!({"protocolVersion": "2025-11-25", "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}}, "serverInfo": {"name": "s", "version": "1"}});
                in_tx.send(answer(&msg["id"], caps)).unwrap();
            }
            Some("tools/list") if refused < refusals => {
                refused += 1;
                in_tx
                    .send(InFrame {
                        request_id: frame.request_id,
                        http_status: 404,
                        retry_after_ms: None,
                        body: br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#.to_vec(),
                    })
                    .unwrap();
            }
            Some("tools/list") => {
                in_tx
                    .send(answer(&msg["id"], json!({"tools": []})))
                    .unwrap();
                break;
            }
            _ => {}
        }
    }
    let _ = inputs.send(Input::Shutdown);
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the runner ends")
        .unwrap()
}

/// An HTTP 404 to a handshake request (the kept session a restarted server forgot) is waited
/// past, and the next attempt is answered on the session the transport opened meanwhile: the
/// process gets through (session 44: it failed at the 404, and every restart began again on
/// the same kept session). Only when every attempt met 404 does the handshake fail, in the
/// server's words.
#[test]
fn the_handshake_waits_past_a_404_and_fails_only_when_every_attempt_met_one() {
    on_tokio(async {
        assert_eq!(handshake_against_404s(1).await, Exit::Shutdown);
        assert_eq!(handshake_against_404s(2).await, Exit::Shutdown);
        match handshake_against_404s(3).await {
            Exit::HandshakeFailed(why) => assert!(why.contains("404"), "{why}"),
            other => panic!("every attempt met 404, yet the runner ended: {other}"),
        }
    });
}

#[test]
fn a_stale_timer_does_not_take_up_a_node_another_timer_still_drives() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        let seen_at = ledger
            .lock()
            .unwrap()
            .by_call_node("n1")
            .unwrap()
            .unwrap()
            .version;
        // Another process on the same epoch: the cancel is sent and the server took it.
        write_as(&ledger, "n1", 1, |r| {
            r.local_state = LocalState::CancelRequested;
            r.cancel_pending = true;
        });
        let mut r = bare_runner(&ledger, config());
        let requery = ("n1".to_string(), Timer::CancelRequery);
        let later_ms = r.now_ms() + 60_000;
        for driven in [true, false] {
            // This process last saw the record before the other process's write, and its poll
            // timer (set in WORKING) has just fired and been taken off.
            r.seen_version.insert("n1".into(), seen_at);
            r.timers.clear();
            r.timer_at.clear();
            if driven {
                let schedule = crate::core::Command::Schedule {
                    at_ms: later_ms,
                    timer: Timer::CancelRequery,
                };
                r.execute("n1", 0, schedule);
            }
            r.handle("n1", Event::Timer(Timer::PollDue)).await;
            assert!(r.queue.is_empty(), "nothing sent at once");
            let at = r.timer_at.get(&requery).copied();
            if driven {
                assert_eq!(at, Some(later_ms), "the re-query keeps its time");
            } else {
                // Nothing else drives it: taken up, re-queried at once.
                assert!(at.is_some_and(|t| t < later_ms), "taken up: {at:?}");
            }
        }
    });
}

/// A timer's step over a record another process wrote since this one saw it is left to that
/// process when it would submit, or would hand the node to a person while the record is still
/// SUBMITTING (the other's submission may be in flight: mcp_sqlite seed 73974). A hand-off from
/// any other state is this process's to make, and so is a step that does neither.
/// (cargo-mutants' `==` to `!=` and `&&` to `||` in `concludes_on_submitting` survived the
/// gate and the regression seeds, session 45.)
#[test]
fn a_timer_leaves_to_the_other_process_only_a_submission_or_a_hand_off_from_submitting() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        r.seen_version.insert("n1".to_string(), 1);
        let rec = |state: LocalState| ToolOperation {
            local_state: state,
            version: 2,
            ..n1_record()
        };
        let step = |record: &ToolOperation, commands: Vec<Command>| crate::core::Step {
            record: record.clone(),
            commands,
            outcome: crate::core::Outcome::Stayed,
        };
        let reconcile = || Command::Reconcile {
            reason: "spent".into(),
        };
        let timer = Event::Timer(Timer::SubmitDue);
        let submitting = rec(LocalState::Submitting);
        let unknown = rec(LocalState::SubmissionUnknown);
        assert!(r.submission_left_to_other(
            "n1",
            &submitting,
            &timer,
            &step(&submitting, vec![reconcile()])
        ));
        assert!(
            !r.submission_left_to_other("n1", &unknown, &timer, &step(&unknown, vec![reconcile()])),
            "a hand-off from SUBMISSION_UNKNOWN is this process's"
        );
        assert!(
            !r.submission_left_to_other("n1", &submitting, &timer, &step(&submitting, vec![])),
            "a step that neither submits nor hands off is this process's"
        );
        // Not moved elsewhere: this process's own to decide.
        r.seen_version.insert("n1".to_string(), 2);
        assert!(!r.submission_left_to_other(
            "n1",
            &submitting,
            &timer,
            &step(&submitting, vec![reconcile()])
        ));
    });
}

/// What covers a node (`drives_otherwise`): a request of its own in flight, and no other node's.
/// For a cancel another process committed, only a request whose timeout would still step the
/// record: one the record has moved past (an older `sent_seq`) is answered as stale whatever
/// comes back, and must not hold the cancel (mcp_replicas seed 592590). cargo-mutants' `==` to
/// `!=` on the node and three mutants of the `for_cancel` rule survived the gate (session 45).
#[test]
fn a_request_in_flight_covers_its_own_node_and_for_a_cancel_only_if_current() {
    on_tokio(async {
        let ledger = memory();
        let rec = cancel_committed_elsewhere(&ledger).await;
        let current = rec.poll_cursor.sent_seq;
        assert!(current > 0, "the record has sent a request");
        let mut r = bare_runner(&ledger, config());
        let ctx = ctx_now(&r);
        let in_flight = |node: &str, seq: u64| Pending {
            lane: 0,
            node: node.into(),
            kind: RequestKind::Poll,
            seq,
            epoch: rec.execution_epoch,
            sent_ms: 0,
            deadline_ms: 10_000,
        };
        assert!(
            !r.drives_otherwise("n1", &rec, &ctx, 0, false),
            "nothing yet"
        );
        r.pending.insert(1, in_flight("n2", current));
        assert!(
            !r.drives_otherwise("n1", &rec, &ctx, 0, false),
            "another node's request covers nothing here"
        );
        r.pending.insert(2, in_flight("n1", current - 1));
        assert!(
            r.drives_otherwise("n1", &rec, &ctx, 0, false),
            "its own request covers it, however old"
        );
        assert!(
            !r.drives_otherwise("n1", &rec, &ctx, 0, true),
            "for a cancel, a request the record moved past covers nothing"
        );
        r.pending.insert(3, in_flight("n1", current));
        assert!(
            r.drives_otherwise("n1", &rec, &ctx, 0, true),
            "for a cancel, the current request covers it"
        );
    });
}

/// A cancel another process committed is taken up whatever the attempts its record counts: at
/// the budget the committer counted its last attempt as it committed it, and may have died
/// before sending it (aip151_faults seed 18528, session 46; session 45 had pinned the opposite,
/// reading the budget as spent). Not one that is pending (in flight) or that this process
/// already sent.
#[test]
fn a_cancel_of_another_process_is_taken_up_even_at_the_budget() {
    on_tokio(async {
        let ledger = memory();
        let rec = cancel_committed_elsewhere(&ledger).await;
        let mut r = bare_runner(&ledger, config());
        let budget = r.lanes[0].core.max_cancel_attempts;
        let with = |attempts: u32, pending: bool| ToolOperation {
            cancel_attempts: attempts,
            cancel_pending: pending,
            ..rec.clone()
        };
        assert!(r.cancel_of_another("n1", &with(budget - 1, false)));
        assert!(r.cancel_of_another("n1", &with(budget, false)));
        assert!(!r.cancel_of_another("n1", &with(0, true)));
        r.cancel_sent_generation
            .insert("n1".to_string(), rec.cancel_generation);
        assert!(!r.cancel_of_another("n1", &with(0, false)));
    });
}

/// The short watch on a cancel another process committed is let go when it falls due if a
/// timer of this process would step the node then (here the cancel re-query): taking the node
/// up as well would send a second cancel beside the one that timer sends.
#[test]
fn a_cancel_watch_that_falls_due_while_a_timer_drives_the_node_takes_nothing_up() {
    on_tokio(async {
        let ledger = memory();
        // Another process on the same epoch committed a cancel it has not sent yet.
        let rec = cancel_committed_elsewhere(&ledger).await;
        for driven in [true, false] {
            let mut cfg = config();
            cfg.cancel_take_up_ms = 0;
            let mut r = bare_runner(&ledger, cfg);
            let ctx = ctx_now(&r);
            // Nothing of this process covers the node yet: the short watch is armed, due now.
            r.watch_cancel_of_another("n1", &rec, &ctx, 0, rec.version);
            assert!(r.stall_at.contains_key("n1"), "the cancel watch is armed");
            let requery = ("n1".to_string(), Timer::CancelRequery);
            let later_ms = r.now_ms() + 60_000;
            if driven {
                let schedule = crate::core::Command::Schedule {
                    at_ms: later_ms,
                    timer: Timer::CancelRequery,
                };
                r.execute("n1", 0, schedule);
            }
            r.fire_stalls().await;
            if driven {
                assert!(
                    r.queue.is_empty(),
                    "nothing sent: the re-query will send the cancel"
                );
                assert_eq!(r.timer_at.get(&requery).copied(), Some(later_ms));
            } else {
                // Nothing drives it: taken up at once, and the cancel goes out.
                assert!(
                    r.queue.iter().any(|q| q.node == "n1"),
                    "taken up: the cancel is queued"
                );
            }
        }
    });
}

/// A stall watch keeps the sooner of two times: arming it later never postpones a watch
/// already due sooner, and one due sooner replaces it. A cancel another process committed is
/// watched for `cancel_take_up_ms` from now.
#[test]
fn a_stall_watch_keeps_the_sooner_time_and_a_cancel_watch_runs_the_take_up() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let watch = |r: &Runner| {
            let w = &r.stall_at["n1"];
            (w.at_ms, w.version, w.urgent)
        };
        r.arm("n1", 5_000, 1, false);
        r.arm("n1", 7_000, 2, true);
        assert_eq!(
            watch(&r),
            (5_000, 1, false),
            "a later time postpones nothing"
        );
        r.arm("n1", 3_000, 3, true);
        assert_eq!(watch(&r), (3_000, 3, true), "a sooner time is taken");
        r.arm("n1", 3_000, 4, false);
        assert_eq!(watch(&r), (3_000, 3, true), "the same time keeps the watch");

        let rec = cancel_committed_elsewhere(&ledger).await;
        let mut cfg = config();
        cfg.cancel_take_up_ms = 500;
        let mut r = bare_runner(&ledger, cfg);
        let ctx = ctx_now(&r);
        let before_ms = r.now_ms();
        r.watch_cancel_of_another("n1", &rec, &ctx, 0, rec.version);
        let after_ms = r.now_ms();
        let (at_ms, _, urgent) = watch(&r);
        assert!(urgent);
        assert!(
            (before_ms + 500..=after_ms + 500).contains(&at_ms),
            "due {at_ms} ms, armed between {before_ms} and {after_ms} ms"
        );
    });
}

/// A duplicate call for a node another process made is watched only while that node is open
/// and of this executor's epoch or older: a settled node, or a newer epoch's, is nobody's here.
#[test]
fn a_duplicate_call_watches_only_an_open_node_of_this_epoch() {
    on_tokio(async {
        let ledger = memory();
        ledger.lock().unwrap().bump_epoch().unwrap();
        let open = |id: &str, epoch: u64| {
            let mut r = ToolOperation::new(
                id,
                "report",
                "v1",
                json!({}),
                AdapterId::Mcp20251125,
                &format!("k-{id}"),
                epoch,
                0,
                60_000,
            );
            r.local_state = LocalState::Working;
            r
        };
        let mut settled = open("settled", 1);
        settled.local_state = LocalState::Unknown;
        for rec in [open("mine", 1), settled, open("newer", 2)] {
            ledger.lock().unwrap().insert(rec, 2).unwrap();
        }
        let mut r = bare_runner(&ledger, config());
        for node in ["mine", "settled", "newer"] {
            r.watch_duplicate(node);
        }
        let watched: Vec<&str> = r.stall_at.keys().map(String::as_str).collect();
        assert_eq!(watched, ["mine"]);
    });
}

/// A stall watch that falls due on a record another process wrote meanwhile looks again later,
/// and takes nothing up: a request timeout on, or, while the record still asks for another
/// process's unsent cancel and the watch was the short one, `cancel_take_up_ms` on. A watch on
/// a node this process covers (a timer) or was fenced from is dropped.
#[test]
fn a_stall_watch_on_a_record_written_meanwhile_looks_again_later() {
    on_tokio(async {
        let mut cfg = config();
        cfg.request_timeout_ms = 2_000;
        cfg.cancel_take_up_ms = 500;
        // (the record asks for another process's cancel, the watch was urgent) -> (re-armed
        // after, urgent)
        let cases = [
            (false, false, 2_000, false),
            (true, false, 2_000, false),
            (true, true, 500, true),
        ];
        for (cancelling, urgent, after, again_urgent) in cases {
            let ledger = memory();
            let server = Server::new(None, false);
            working_n1(&ledger, &server).await.stop().await;
            if cancelling {
                write_as(&ledger, "n1", 1, |r| {
                    r.local_state = LocalState::CancelRequested;
                    r.cancel_generation = 1;
                });
            }
            let rec = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
            let mut r = bare_runner(&ledger, cfg.clone());
            // Armed on an older version: the record was written since.
            r.arm("n1", 0, rec.version - 1, urgent);
            let before_ms = r.now_ms();
            r.fire_stalls().await;
            let w = r.stall_at.get("n1").copied().expect("watched again");
            assert!(
                (before_ms + after..=r.now_ms() + after).contains(&w.at_ms),
                "{}: due {} ms, want {after} ms after {before_ms}",
                rec.local_state,
                w.at_ms
            );
            assert_eq!((w.version, w.urgent), (rec.version, again_urgent));
            assert!(r.queue.is_empty(), "nothing taken up");
            // Covered by a timer of this process, or fenced: dropped, not looked at again.
            for fenced in [false, true] {
                let mut r = bare_runner(&ledger, cfg.clone());
                if fenced {
                    r.fenced.insert("n1".to_string());
                } else {
                    let at_ms = r.now_ms() + 60_000;
                    let schedule = crate::core::Command::Schedule {
                        at_ms,
                        timer: Timer::PollDue,
                    };
                    r.execute("n1", 0, schedule);
                }
                r.arm("n1", 0, rec.version - 1, false);
                r.fire_stalls().await;
                assert!(
                    !r.stall_at.contains_key("n1"),
                    "fenced {fenced}: watched again"
                );
            }
        }
    });
}

/// A submit timer armed on one version, fired after another process submitted, leaves the
/// submission to that process even when a step of this one read the newer version in between
/// without changing it (mcp_replicas seed 574077: a cancel click that changed nothing hid the
/// replica's write, and the timer sent a second submission 70 ms after the replica's).
#[test]
fn a_submit_timer_armed_before_another_process_submitted_sends_nothing() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        // Proven never created: a resume arms the submit timer on this version.
        write_as(&ledger, "n1", 1, |r| {
            r.local_state = LocalState::NotFoundSafe;
            r.operation_id = None;
        });
        for read_between in [false, true] {
            let mut r = bare_runner(&ledger, config());
            r.handle("n1", Event::Resume).await;
            let submit_due = ("n1".to_string(), Timer::SubmitDue);
            assert!(
                r.timer_at.contains_key(&submit_due),
                "the submit timer is armed"
            );
            // Another process on the same epoch submits.
            write_as(&ledger, "n1", 1, |rec| {
                rec.local_state = LocalState::Submitting;
                rec.submit_attempts = 1;
            });
            if read_between {
                // A step that reads the newer record and changes nothing.
                r.handle("n1", Event::Timer(Timer::PollDue)).await;
            }
            r.handle("n1", Event::Timer(Timer::SubmitDue)).await;
            assert!(
                !r.queue
                    .iter()
                    .any(|q| matches!(q.out, crate::protocol::Outbound::Submit { .. })),
                "no second submission (read between: {read_between})"
            );
            // Put the record back for the next round.
            write_as(&ledger, "n1", 1, |rec| {
                rec.local_state = LocalState::NotFoundSafe;
                rec.submit_attempts = 0;
            });
        }
    });
}

/// A timer taken up as a resume on another process's record reads no sooner after this
/// process's own last read than the polling policy allows (mcp_ext_faults seed 428000: the
/// take-up polled 472 ms after this process's poll, inside the server's 1000 ms). A process that
/// has not read the node takes it up at once.
#[test]
fn a_take_up_reads_no_sooner_after_this_process_own_read_than_the_interval() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        for own_read in [false, true] {
            let mut r = bare_runner(&ledger, config());
            // A timer that drives nothing in WORKING: this process has now seen the record.
            r.handle("n1", Event::Timer(Timer::FetchDue)).await;
            let read_at_ms = r.now_ms();
            if own_read {
                r.last_read_sent_ms.insert("n1".into(), read_at_ms);
            }
            // Another process writes the record; the server asks for 60 s between reads.
            write_as(&ledger, "n1", 1, |rec| {
                rec.poll_cursor.server_interval_ms = Some(60_000);
            });
            r.handle("n1", Event::Timer(Timer::FetchDue)).await;
            let poll_due = r.timer_at.get(&("n1".to_string(), Timer::PollDue)).copied();
            let fetch_due = r
                .timer_at
                .get(&("n1".to_string(), Timer::FetchDue))
                .copied();
            if own_read {
                assert_eq!(poll_due, None, "no read scheduled inside the interval");
                assert!(
                    fetch_due.is_some_and(|at| at >= read_at_ms + 60_000),
                    "the timer looks again once the interval ran out: {fetch_due:?}"
                );
            } else {
                assert!(
                    poll_due.is_some_and(|at| at < read_at_ms + 60_000),
                    "taken up at once: {poll_due:?}"
                );
            }
        }
    });
}

/// Another writer changes the record (by `change`) between the read and the commit of the
/// first `event` this runner tries to commit, and then no more.
struct ChangeOnce {
    ledger: SharedLedger,
    event: &'static str,
    change: Option<fn(&mut ToolOperation)>,
}

impl CommitDelay for ChangeOnce {
    fn before_commit(
        &mut self,
        node: &str,
        event: &str,
    ) -> Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
        if event == self.event {
            if let Some(change) = self.change.take() {
                write_as(&self.ledger, node, 1, change);
            }
        }
        None
    }
}

/// A commit that lost its race steps the event it was given again, and decides afresh whether
/// to take the node up: the resume its first attempt turned the event into is not kept. Here
/// the write in between asks for 60 s between reads, so the timer's fresh take-up waits that
/// long after this process's own read, where a kept resume would read at once (mcp_replicas
/// seed 253 has such a retry on a record another process had meanwhile moved to a pending
/// approval: a kept resume asked the person again).
#[test]
fn a_retry_after_a_lost_race_decides_the_take_up_afresh() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        let interval_elsewhere = ChangeOnce {
            ledger: ledger.clone(),
            event: "resume",
            change: Some(|rec| rec.poll_cursor.server_interval_ms = Some(60_000)),
        };
        let mut r = bare_runner(&ledger, config()).with_commit_delay(Box::new(interval_elsewhere));
        // A timer that drives nothing in WORKING: this process has now seen the record.
        r.handle("n1", Event::Timer(Timer::FetchDue)).await;
        let read_at_ms = r.now_ms();
        r.last_read_sent_ms.insert("n1".into(), read_at_ms);
        // Past the 5 ms the policy asks for after that read: the first attempt takes the node up.
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Another process moved the record: its result read holds a stream open, which a take-up
        // here closes, so the take-up writes (and meets the write in between).
        write_as(&ledger, "n1", 1, |rec| rec.input_stream_open = true);
        r.handle("n1", Event::Timer(Timer::FetchDue)).await;
        let at = |timer| r.timer_at.get(&("n1".to_string(), timer)).copied();
        assert!(r.queue.is_empty(), "nothing sent at once");
        assert_eq!(
            at(Timer::PollDue),
            None,
            "no read inside the newer interval"
        );
        assert!(
            at(Timer::FetchDue).is_some_and(|t| t >= read_at_ms + 60_000),
            "the timer looks again once the interval ran out: {:?}",
            at(Timer::FetchDue)
        );
    });
}

/// A single executor always covers its nodes: through a whole call with polls, a result and a
/// receipt, the stall watch never fires.
#[test]
fn a_single_executor_never_stalls() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(Some(3), false);
        let r = start(&ledger, &server, 1, 0, |r| r);
        for id in ["n1", "n2", "n3"] {
            r.inputs.send(Input::Submit(node(id))).unwrap();
        }
        until("three receipts", || {
            ledger.lock().unwrap().receipts().unwrap().len() == 3
        })
        .await;
        let (_, seen) = r.stop().await;
        assert!(
            !seen
                .iter()
                .any(|o| matches!(o, Observation::Stalled { .. })),
            "no stall in a single executor"
        );
    });
}

/// After a drop, the frames the connection had delivered are still read (a fully received
/// response is an answer), and reading them never waits for more.
#[test]
fn frames_delivered_before_a_drop_are_read() {
    let (mut t, _out, in_tx) = ChannelTransport::pair();
    for body in [b"one".to_vec(), b"two".to_vec()] {
        in_tx.send(InFrame::message(body)).unwrap();
    }
    let got = already_received(&mut t, 8);
    let bodies: Vec<Vec<u8>> = got.iter().map(|f| f.body.clone()).collect();
    assert_eq!(bodies, vec![b"one".to_vec(), b"two".to_vec()]);
    // Open but empty: nothing, at once.
    assert!(already_received(&mut t, 8).is_empty());
    in_tx.send(InFrame::message(b"three".to_vec())).unwrap();
    drop(in_tx);
    let last = already_received(&mut t, 8);
    assert_eq!(last.len(), 1, "a frame queued before the close is read");
    assert!(already_received(&mut t, 8).is_empty(), "closed and drained");
    // The bound holds.
    let (mut t, _out, in_tx) = ChannelTransport::pair();
    for _ in 0..5 {
        in_tx.send(InFrame::message(vec![])).unwrap();
    }
    assert_eq!(already_received(&mut t, 3).len(), 3);
}

/// Exit reasons reach traces and timelines as words, never as `Debug` text.
#[test]
fn exit_reasons_read_as_words() {
    let cases = [
        (
            Exit::Crashed(CrashPoint::AfterCommitBeforeSend),
            "crashed after a commit, before its sends",
        ),
        (
            Exit::Crashed(CrashPoint::AfterReplyBeforeCommit),
            "crashed after a reply, before its commit",
        ),
        (Exit::Shutdown, "shut down"),
        (Exit::Disconnected, "disconnected"),
        (
            Exit::HandshakeFailed("no tasks capability".into()),
            "handshake failed: no tasks capability",
        ),
        (Exit::EventLimit, "event limit reached"),
        (
            Exit::LedgerFailed("disk full".into()),
            "ledger failed: disk full",
        ),
    ];
    for (exit, words) in cases {
        assert_eq!(exit.to_string(), words);
    }
}

/// What the runner keeps about `node` in its per-node maps, as (map, present) pairs.
fn kept_about(r: &Runner, node: &str) -> Vec<(&'static str, bool)> {
    let n = node.to_string();
    vec![
        ("settled_here", r.settled_here.contains(node)),
        ("seen_version", r.seen_version.contains_key(node)),
        (
            "submit_timer_outdated",
            r.submit_timer_outdated.contains(node),
        ),
        (
            "cancel_sent_generation",
            r.cancel_sent_generation.contains_key(node),
        ),
        ("retry_after", r.retry_after.contains_key(node)),
        ("last_sent", r.last_sent.contains_key(node)),
        ("last_read_sent_ms", r.last_read_sent_ms.contains_key(node)),
        ("stall_at", r.stall_at.contains_key(node)),
        (
            "approval_refusals",
            r.approval_refusals.contains_key(&(n, 2)),
        ),
    ]
}

/// A settled node is forgotten once nothing of the runner's covers it: a live executor's
/// per-node maps hold the nodes in flight, not every node it ever touched. While a timer of its
/// own still covers the node, what it knows stays; the timer's firing on the final record then
/// lets it go.
#[test]
fn a_settled_node_is_forgotten_once_nothing_covers_it() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        let mut r = bare_runner(&ledger, config());
        r.handle("n1", Event::Timer(Timer::FetchDue)).await;
        // Everything a long call can leave behind.
        r.settled_here.insert("n1".into());
        r.submit_timer_outdated.insert("n1".into());
        r.cancel_sent_generation.insert("n1".into(), 1);
        let until_ms = r.now_ms() + 1;
        r.retry_after.insert(
            "n1".into(),
            RetryAfter {
                until_ms,
                kind: RequestKind::Poll,
                seq: 1,
            },
        );
        r.last_read_sent_ms.insert("n1".into(), 0);
        r.last_sent.insert("n1".into(), (RequestKind::Poll, 0));
        r.approval_refusals.insert(("n1".into(), 2), 1);
        let kept = kept_about(&r, "n1");
        assert!(kept.iter().all(|(_, k)| *k), "all set up: {kept:?}");
        // Another process hands the node to a person: the record is final.
        hand_over_as_another(&ledger, "n1", |_| {});
        // A timer of this runner still covers the node: an event on it forgets nothing.
        let far_ms = r.now_ms() + 60_000;
        r.execute(
            "n1",
            0,
            crate::core::Command::Schedule {
                at_ms: far_ms,
                timer: Timer::PollDue,
            },
        );
        r.handle("n1", Event::Timer(Timer::FetchDue)).await;
        let kept = kept_about(&r, "n1");
        assert!(
            kept.iter()
                .filter(|(m, _)| *m != "stall_at")
                .all(|(_, k)| *k),
            "covered by a timer, nothing is forgotten: {kept:?}"
        );
        // The timer fires on the final record: nothing covers the node any more.
        r.timers.remove(&(far_ms, "n1".to_string(), Timer::PollDue));
        r.timer_at.remove(&("n1".to_string(), Timer::PollDue));
        r.handle("n1", Event::Timer(Timer::PollDue)).await;
        let kept = kept_about(&r, "n1");
        assert!(
            kept.iter().all(|(_, k)| !*k),
            "settled and uncovered, everything is forgotten: {kept:?}"
        );
        assert_eq!(state_of(&ledger, "n1"), Some(LocalState::Unknown));
    });
}

/// Another process (epoch 1) hands `node` to a person: the record goes to UNKNOWN, final, with
/// whatever `change` adds.
fn hand_over_as_another(
    ledger: &SharedLedger,
    node: &str,
    change: impl FnOnce(&mut crate::record::ToolOperation),
) {
    let mut l = ledger.lock().unwrap();
    let record = l.by_call_node(node).unwrap().expect("the record");
    let mut next = record.clone();
    next.local_state = LocalState::Unknown;
    change(&mut next);
    l.commit(crate::ledger::Write {
        expected_version: record.version,
        writer_epoch: 1,
        record: next,
        accept: None,
        reconcile: Some("handed over".into()),
        effect: None,
        now_ms: 0,
    })
    .unwrap();
}

/// A final record may still name the round a person was asked (the task ended while they were
/// deciding). A refused answer for it asks nobody again: the node is settled, and the core
/// refuses the answer as late. Before, the gate was asked again, and once the runner forgot
/// the settled node, it would have been asked without end.
#[test]
fn a_refused_answer_for_a_settled_node_asks_nobody_again() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        working_n1(&ledger, &server).await.stop().await;
        let asked = crate::record::PendingInput {
            round: 2,
            server_request_id: json!(7),
            schema_digest: "d".into(),
            deadline_ms: 60_000,
            request: json!({}),
            requested_schema: json!({"type": "object", "required": ["ok"]}),
        };
        for settled in [false, true] {
            let (approvals, mut gate) = mpsc::unbounded_channel();
            let mut r = bare_runner(&ledger, config());
            r.approvals = approvals;
            let round = asked.clone();
            if settled {
                hand_over_as_another(&ledger, "n1", |rec| rec.pending_input = Some(round));
            } else {
                write_as(&ledger, "n1", 1, |rec| {
                    rec.local_state = LocalState::InputRequired;
                    rec.pending_input = Some(round);
                });
            }
            r.approval(
                "n1".into(),
                2,
                "d".into(),
                ApprovalReply::Accept { content: json!({}) },
            )
            .await;
            assert_eq!(
                gate.try_recv().is_ok(),
                !settled,
                "asked again only while the node is open (settled: {settled})"
            );
        }
    });
}

/// Holds the commit of `node`'s Start until the test lets it go.
struct PauseStart {
    node: &'static str,
    inner: PauseOnce,
}

impl CommitDelay for PauseStart {
    fn before_commit(
        &mut self,
        node: &str,
        event: &str,
    ) -> Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
        (node == self.node)
            .then(|| self.inner.before_commit(node, event))
            .flatten()
    }
}

/// A runner (`tune`d) that has sent n1's submission, the server has created n1's task, and
/// n2's Start commit is held until the returned sender lets it go: n1's reply can land while
/// the runner is busy.
async fn n1_submitted_behind_n2s_held_start(
    ledger: &SharedLedger,
    server: &Arc<Server>,
    tune: impl FnOnce(Runner) -> Runner,
) -> (Running, oneshot::Sender<()>) {
    let (inner, paused_rx, release_tx) = PauseOnce::on("start");
    let pause = PauseStart { node: "n2", inner };
    let r = start(ledger, server, 1, 0, |r| {
        tune(r).with_commit_delay(Box::new(pause))
    });
    r.inputs.send(Input::Submit(node("n1"))).unwrap();
    r.inputs.send(Input::Submit(node("n2"))).unwrap();
    paused_rx.await.expect("n2's start is held");
    until("the server created n1's task", || server.counts().0 >= 1).await;
    (r, release_tx)
}

/// Told to stop, a runner first writes down the replies it has already received: a submission's
/// reply names the task it created, and dropped, the id is lost (mcp_ext_faults seed 1044363: a
/// replica stopped while its Start commits ran, three replies queued; on a server without key
/// lookups three live tasks went to a person). Here n1's reply lands while n2's Start commit is
/// held, and the stop comes before the runner reads it.
#[test]
fn a_runner_told_to_stop_writes_down_the_replies_it_already_received() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        let (r, release_tx) = n1_submitted_behind_n2s_held_start(&ledger, &server, |r| r).await;
        // Time for the reply to reach the runner's connection (real time, a local channel).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(state_of(&ledger, "n1"), Some(LocalState::Submitting));
        r.inputs.send(Input::Shutdown).unwrap();
        release_tx.send(()).unwrap();
        let (exit, _) = r.stop().await;
        assert_eq!(exit, Exit::Shutdown);
        let l = ledger.lock().unwrap();
        let n1 = l.by_call_node("n1").unwrap().expect("n1's record");
        assert!(
            n1.operation_id.is_some(),
            "the received reply was written down: {:?} without an operation id",
            n1.local_state
        );
    });
}

/// A request whose deadline passes while the runner is held up (its commits) is not lost if its
/// reply was delivered meanwhile: the reply is read first (mcp_ext_replicas seed 11: two slow
/// commits held a runner 11.5 s, two submissions' replies waited unread, their timeouts won, and
/// on a server without key lookups both live tasks went to a person). Here n1's reply lands
/// while n2's Start commit is held past n1's request timeout.
#[test]
fn a_reply_delivered_while_the_runner_was_held_past_its_deadline_is_read() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        let (r, release_tx) = n1_submitted_behind_n2s_held_start(&ledger, &server, |mut r| {
            r.cfg.request_timeout_ms = 300;
            r
        })
        .await;
        // Past n1's request timeout, its reply waiting on the runner's connection.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(state_of(&ledger, "n1"), Some(LocalState::Submitting));
        release_tx.send(()).unwrap();
        until("n1's reply is written down", || {
            ledger
                .lock()
                .unwrap()
                .by_call_node("n1")
                .unwrap()
                .is_some_and(|n1| {
                    n1.operation_id.is_some() || n1.local_state != LocalState::Submitting
                })
        })
        .await;
        let (_, seen) = r.stop().await;
        let n1 = ledger.lock().unwrap().by_call_node("n1").unwrap().unwrap();
        assert!(
            n1.operation_id.is_some() && n1.local_state != LocalState::SubmissionUnknown,
            "{:?} without the operation the delivered reply named",
            n1.local_state
        );
        assert!(
            !seen
                .iter()
                .any(|o| matches!(o, Observation::Lost { node, .. } if node == "n1")),
            "n1's submission declared lost with its reply delivered"
        );
    });
}

/// A transport with `n` frames already delivered to the executor, and the sender (kept, so the
/// connection stays open).
fn delivered(
    n: usize,
) -> (
    ChannelTransport,
    tokio::sync::mpsc::UnboundedSender<InFrame>,
) {
    let (t, _out, in_tx) = ChannelTransport::pair();
    for _ in 0..n {
        in_tx.send(InFrame::message(b"{}".to_vec())).unwrap();
    }
    (t, in_tx)
}

/// A drain reads every frame already delivered, however many: on real tokio a receive polled
/// without waiting looks empty once the task has spent its cooperative budget (128 ready polls
/// without yielding), and a drain built on it stopped there, leaving replies unread at a stop.
#[test]
fn a_drain_reads_past_the_cooperative_budget() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let queued = 300;
        let (mut t, _in_tx) = delivered(queued);
        r.read_received(std::slice::from_mut(&mut t)).await;
        assert!(
            t.rx.try_recv().is_err(),
            "frames were left unread after the drain"
        );
    });
}

/// Reading what was received (on a stop or a drop) is bounded: at most `RECEIVED_READ_MAX`
/// frames, however many are queued and however many passes it takes.
#[test]
fn reading_what_was_received_stops_at_its_bound() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let queued = RECEIVED_READ_MAX + 100;
        let (mut t, _in_tx) = delivered(queued);
        r.read_received(std::slice::from_mut(&mut t)).await;
        assert_eq!(
            already_received(&mut t, queued).len(),
            queued - RECEIVED_READ_MAX
        );
    });
}

/// A Retry-After holds this process back until it runs out or the server answers a request sent
/// after the refused one; a late answer to an older request lifts nothing, nor does an older
/// refusal replace a newer one (mcp_replicas seed 1535815: a fetch answered 11 s late, behind a
/// 429 asking for 21 s, lifted it, and the stall watch then polled 10 s early).
#[test]
fn only_an_answer_to_a_later_request_lifts_a_retry_after() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let reply = |kind, seq, reply| Event::Reply {
            kind,
            seq,
            epoch: 1,
            sent_ms: None,
            reply,
        };
        let refused = |ms| Reply::RateLimited {
            retry_after_ms: Some(ms),
        };
        let held = |r: &Runner| r.retry_after.get("n1").map(|a| (a.seq, a.kind));
        r.note_retry_after("n1", &reply(RequestKind::Poll, 17, refused(21_000)));
        assert_eq!(held(&r), Some((17, RequestKind::Poll)));
        // Late answers to older requests: a fetch's, and another 429's.
        r.note_retry_after("n1", &reply(RequestKind::Fetch, 15, Reply::LookupNotFound));
        r.note_retry_after("n1", &reply(RequestKind::Fetch, 16, refused(1_000)));
        assert_eq!(held(&r), Some((17, RequestKind::Poll)), "still the poll's");
        // The same refusal again (a late duplicate) answers the newest request still: its wait
        // counts from its own arrival (retry_after_honoured judges every copy that arrives).
        let first_until = r.retry_after["n1"].until_ms;
        r.note_retry_after("n1", &reply(RequestKind::Poll, 17, refused(30_000)));
        assert!(
            r.retry_after["n1"].until_ms > first_until,
            "the copy's wait counts"
        );
        // The answer to a later request lifts it.
        r.note_retry_after("n1", &reply(RequestKind::Cancel, 18, Reply::Accepted));
        assert_eq!(held(&r), None);
    });
}

/// A status read is not scheduled sooner after this process's own last request for the node, a
/// status read, than the interval the server suggested; after any other request (a cancel, a
/// fetch) it may go at once, and other timers are left alone (mcp_ext_faults seed 1625166).
#[test]
fn a_read_waits_the_servers_interval_after_this_processs_own_read() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let mut rec = n1_record();
        rec.poll_cursor.server_interval_ms = Some(1_000);
        assert_eq!(r.own_read_floor_ms("n1", 0, &rec), None, "nothing sent yet");
        r.last_sent.insert("n1".into(), (RequestKind::Poll, 5_000));
        assert_eq!(r.own_read_floor_ms("n1", 0, &rec), Some(6_000));
        let at = |at_ms, timer| Command::Schedule { at_ms, timer };
        let moved = dispatch::after_own_read(
            r.own_read_floor_ms("n1", 0, &rec),
            false,
            vec![
                at(5_500, Timer::PollDue),
                at(5_500, Timer::CancelRequery),
                at(7_000, Timer::PollDue),
                at(5_500, Timer::FetchDue),
            ],
        );
        assert_eq!(
            moved,
            vec![
                at(6_000, Timer::PollDue),
                at(6_000, Timer::CancelRequery),
                at(7_000, Timer::PollDue),
                at(5_500, Timer::FetchDue),
            ]
        );
        // A fetch is held back only when told to (`Runner::fetch_after_own_read`).
        let fetch = dispatch::after_own_read(Some(6_000), true, vec![at(5_500, Timer::FetchDue)]);
        assert_eq!(fetch, vec![at(6_000, Timer::FetchDue)]);
        // Without a floor there is nothing to hold it to.
        let unheld = dispatch::after_own_read(None, true, vec![at(5_500, Timer::FetchDue)]);
        assert_eq!(unheld, vec![at(5_500, Timer::FetchDue)]);
        r.last_sent
            .insert("n1".into(), (RequestKind::Cancel, 5_200));
        assert_eq!(
            r.own_read_floor_ms("n1", 0, &rec),
            None,
            "a cancel went since"
        );
        rec.poll_cursor.server_interval_ms = None;
        r.last_sent.insert("n1".into(), (RequestKind::Poll, 5_000));
        assert_eq!(
            r.own_read_floor_ms("n1", 0, &rec),
            None,
            "no interval suggested"
        );
        // A policy that ignores the server's interval ignores it here too.
        rec.poll_cursor.server_interval_ms = Some(1_000);
        r.lanes[0].core.poll.honor_server_interval = false;
        assert_eq!(
            r.own_read_floor_ms("n1", 0, &rec),
            None,
            "interval not honoured"
        );
    });
}

/// A runner beats on the ledger from its start (`beat.rs`) and takes the beat away when it
/// stops on purpose: nobody then waits for a process that left.
#[test]
fn a_runner_beats_while_it_runs_and_takes_its_beat_away_when_it_stops() {
    for ledger in [memory(), sqlite()] {
        on_tokio(async {
            let server = Server::new(None, false);
            let r = start(&ledger, &server, 1, 0, |r| r.with_process_id(77));
            until("a beat", || {
                ledger.lock().unwrap().beat_of(77).unwrap().is_some()
            })
            .await;
            let beat = ledger.lock().unwrap().beat_of(77).unwrap().unwrap();
            assert_eq!((beat.process, beat.epoch), (77, 1));
            let (exit, _) = r.stop().await;
            assert_eq!(exit, Exit::Shutdown);
            assert_eq!(ledger.lock().unwrap().beat_of(77).unwrap(), None);
        });
    }
}

/// A submission another process of this epoch sent is left to it while its beat is fresh
/// (mcp_ext_replicas seed 156166: a replica took one up from a sender held 10 s by slow commits
/// and handed a live task to a person). Stale, another epoch's, this process's own, absent, or
/// a record past submitting: nobody holds it.
#[test]
fn a_submission_is_left_to_its_sender_while_the_sender_beats() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let rec = submitting_of_42();
        assert_eq!(r.sender_alive_until_ms(&rec), None, "no beat");
        let now_ms = r.now_ms();
        beat_42(&ledger, 1, now_ms);
        let timeout_ms = r.cfg.beat_timeout_ms;
        assert_eq!(r.sender_alive_until_ms(&rec), Some(now_ms + timeout_ms));
        let mut past_submitting = rec.clone();
        past_submitting.local_state = LocalState::Working;
        assert_eq!(r.sender_alive_until_ms(&past_submitting), None);
        let mut unsent = rec.clone();
        unsent.submit_attempts = 0;
        assert_eq!(r.sender_alive_until_ms(&unsent), None);
        let mut ours = rec.clone();
        ours.submitted_by = Some(5_000_000);
        assert_eq!(r.sender_alive_until_ms(&ours), None);
        beat_42(&ledger, 2, now_ms);
        assert_eq!(r.sender_alive_until_ms(&rec), None, "another epoch's");
        // A lease that runs out while the sender beats concludes nothing: the node is watched.
        ledger.lock().unwrap().insert(rec.clone(), 1).unwrap();
        beat_42(&ledger, 1, now_ms);
        assert!(r.held_for_live_sender("n1"));
        assert!(
            r.stall_at.contains_key("n1"),
            "watched until the beat goes stale"
        );
        r.cfg.beat_timeout_ms = 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(r.sender_alive_until_ms(&rec), None, "stale");
        assert!(!r.held_for_live_sender("n1"));
    });
}

/// A submission lease runs a full request timeout past the sender's last sign of life, not
/// only past the take-up: a take-up that began while the sender still beat (a duplicate call
/// stepped after a refused write) would otherwise conclude while a sender frozen whole has its
/// reply unread (mcp_ext_replicas seed 79259: frozen 11.4 s; the lease, counted from the
/// take-up, ran out 1.6 s before the thaw). Past that, the lease concludes.
#[test]
fn a_submission_lease_runs_on_a_request_timeout_past_the_senders_last_beat() {
    on_tokio(async {
        let ledger = memory();
        let mut cfg = config();
        cfg.beat_timeout_ms = 1;
        let mut r = bare_runner(&ledger, cfg);
        let rec = submitting_of_42();
        ledger.lock().unwrap().insert(rec, 1).unwrap();
        let beat_ms = r.now_ms();
        beat_42(&ledger, 1, beat_ms);
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Stale now, but a request timeout has not passed since: the lease runs on.
        assert!(r.lease_held("n1"));
        let end_ms = beat_ms + r.cfg.beat_timeout_ms + r.cfg.request_timeout_ms;
        assert_eq!(
            r.timer_at
                .get(&("n1".to_string(), Timer::SubmissionLease))
                .copied(),
            Some(end_ms),
            "the lease re-armed to end a request timeout past the last beat"
        );
        assert!(
            !r.stall_at.contains_key("n1"),
            "a stale sender is not watched"
        );
        // No beat at all (the sender left, or never beat), or another epoch's: it concludes.
        ledger.lock().unwrap().end_beat(42).unwrap();
        assert!(!r.lease_held("n1"));
        beat_42(&ledger, 2, beat_ms);
        assert!(!r.lease_held("n1"));
        // A request timeout past the last beat: it concludes.
        r.cfg.request_timeout_ms = 1;
        beat_42(&ledger, 1, beat_ms);
        assert!(!r.lease_held("n1"));
    });
}

/// On a paused clock: `now_ms` moves only by `tokio::time::advance`, so a test can stand at
/// the exact millisecond a rule turns on. Real tokio's `test-util` only: under `--cfg madsim`
/// (the ledger suite builds these tests too) time is madsim's.
#[cfg(not(madsim))]
fn on_paused_tokio(test: impl std::future::Future<Output = ()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(test);
}

/// A sender's beat that expires at this very millisecond is stale, and a submission lease that
/// ends at it has ended: at that instant neither holds on. Held, the lease would re-arm its timer
/// for "now" and fire again at once, round after round, without time moving (the two `>` of
/// `stall.rs` that `>=` survived 2,000 gate series: no series lands on the instant).
#[cfg(not(madsim))]
#[test]
fn a_beat_or_a_lease_that_ends_this_millisecond_holds_nothing() {
    on_paused_tokio(async {
        let ledger = memory();
        let mut cfg = config();
        cfg.beat_timeout_ms = 1_000;
        cfg.request_timeout_ms = 10_000;
        let mut r = bare_runner(&ledger, cfg);
        let rec = submitting_of_42();
        ledger.lock().unwrap().insert(rec.clone(), 1).unwrap();
        beat_42(&ledger, 1, r.now_ms());
        tokio::time::advance(Duration::from_millis(999)).await;
        assert_eq!(r.now_ms(), 999, "the clock moves only when told");
        assert_eq!(
            r.sender_alive_until_ms(&rec),
            Some(1_000),
            "a millisecond left"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(r.sender_alive_until_ms(&rec), None, "expires now: stale");
        // Stale, and the lease runs to a request timeout past the beat's end: 11,000 ms.
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(r.lease_held("n1"), "a millisecond of lease left");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(r.now_ms(), 11_000);
        assert!(!r.lease_held("n1"), "the lease ends now");
    });
}

/// A process the ledger has fenced (a newer epoch took over) sends nothing it had queued: the
/// new epoch owns those records. Its queue is dropped and the nodes are fenced; an unfenced
/// process sends. (The survey's `flush` survivors: the guard deleted, or run only on an empty
/// queue, passed 2,000 gate series; 20,000 caught it once, at mcp seed 13,283.)
#[cfg(not(madsim))]
#[test]
fn a_fenced_process_sends_nothing_it_had_queued() {
    on_paused_tokio(async {
        for fenced in [false, true] {
            let ledger = memory();
            let mut r = bare_runner(&ledger, config());
            insert_working_n1(&ledger);
            queue_n1(&mut r, poll_t1());
            if fenced {
                ledger.lock().unwrap().bump_epoch().unwrap();
            }
            let (t, mut out_rx, _in_tx) = ChannelTransport::pair();
            let mut transports = [t];
            assert!(r.flush(&mut transports).await.is_ok());
            assert!(r.queue.is_empty());
            assert_eq!(out_rx.try_recv().is_ok(), !fenced, "fenced {fenced}");
            assert_eq!(r.fenced.contains("n1"), fenced);
        }
    });
}

/// A process's own last status read of a node is the time it last sent a poll for it, not any
/// send: a take-up resumes polling the policy's delay after it (`own_read_not_before`; mcp_ext_faults
/// seed 428000), and a fetch or a cancel sent later must not push that back or pull it forward.
#[cfg(not(madsim))]
#[test]
fn the_last_read_sent_is_the_last_poll_sent() {
    on_paused_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        insert_working_n1(&ledger);
        let (t, _out_rx, _in_tx) = ChannelTransport::pair();
        let mut transports = [t];
        // Each step: time moves on by `after_ms`, `out` for n1 is queued and flushed.
        for (after_ms, out, read_ms, why) in [
            (5, fetch_t1(), None, "a fetch is no status read"),
            (5, poll_t1(), Some(10), "the poll's time"),
            (5_000, fetch_t1(), Some(10), "still the poll's time"),
        ] {
            tokio::time::advance(Duration::from_millis(after_ms)).await;
            queue_n1(&mut r, out);
            assert!(r.flush(&mut transports).await.is_ok());
            assert_eq!(r.last_read_sent_ms.get("n1").copied(), read_ms, "{why}");
        }
    });
}

/// A fence ends one record's work: its timers go, and every other node's stay.
#[cfg(not(madsim))]
#[test]
fn a_fence_drops_only_the_fenced_nodes_timers() {
    on_paused_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        r.set_timer("n1", Timer::PollDue, 1_000);
        r.set_timer("n1", Timer::CancelRequery, 2_000);
        r.set_timer("n2", Timer::PollDue, 1_500);
        let e = crate::ledger::LedgerError::StaleEpoch {
            call_node_id: "n1".into(),
            writer: 1,
            current: 2,
        };
        r.fence("n1", e);
        assert!(r.fenced.contains("n1"));
        let left: Vec<(u64, String, Timer)> = r.timers.iter().cloned().collect();
        assert_eq!(left, vec![(1_500, "n2".to_string(), Timer::PollDue)]);
        assert_eq!(r.timer_at.len(), 1);
    });
}

/// A crashed runner is dead: it loses no pending request (no `Lost` for a request it can
/// no longer read) and acts on nothing more, however it came to leave its loop.
#[cfg(not(madsim))]
#[test]
fn a_crashed_runner_fails_nothing_pending() {
    on_paused_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        r.pending.insert(
            1,
            Pending {
                lane: 0,
                node: "n1".into(),
                kind: RequestKind::Poll,
                seq: 1,
                epoch: 1,
                sent_ms: 0,
                deadline_ms: 10_000,
            },
        );
        r.crashed = Some(CrashPoint::AfterReplyBeforeCommit);
        r.fail_all_pending().await;
        assert_eq!(
            r.pending.len(),
            1,
            "a dead process's requests die with it, unread"
        );
        r.crashed = None;
        r.fail_all_pending().await;
        assert!(r.pending.is_empty(), "a live one loses them");
    });
}

/// With nothing to do, the loop still wakes an idle period from now (every wait is bounded),
/// and anything due sooner (a timer) wakes it sooner; never earlier than now.
#[cfg(not(madsim))]
#[test]
fn an_idle_runner_wakes_an_idle_period_from_now() {
    on_paused_tokio(async {
        let ledger = memory();
        let mut cfg = config();
        cfg.idle_wake_ms = 60_000;
        cfg.cancel_request_check_ms = 0;
        let mut r = bare_runner(&ledger, cfg);
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(r.next_wake_ms(), 60_005);
        r.set_timer("n1", Timer::PollDue, 7_000);
        assert_eq!(r.next_wake_ms(), 7_000);
        tokio::time::advance(Duration::from_millis(10_000)).await;
        assert_eq!(r.next_wake_ms(), 10_005, "a timer past due wakes it now");
    });
}

/// What the core hears of the sender of a request a not-found streak overtook
/// (`Ctx::overtaken_sender_until_ms`): its last beat plus the beat timeout, counting beats no
/// later than a request timeout after the overtaking; nothing for this process's own request,
/// one never overtaken, or outside a streak.
#[test]
fn the_core_hears_until_when_the_overtaken_requests_sender_lived() {
    on_tokio(async {
        let ledger = memory();
        let mut r = bare_runner(&ledger, config());
        let (lease_ms, beat_timeout_ms) = (r.cfg.request_timeout_ms, r.cfg.beat_timeout_ms);
        let mut rec = crate::ledger::tests::fixtures::rec("n1");
        rec.poll_cursor.not_found_streak = 1;
        rec.poll_cursor.overtaken = Some(crate::record::Overtaken {
            seq: 3,
            at_ms: 1_000,
            by: Some(42),
        });
        assert_eq!(r.overtaken_sender_until_ms(&rec), None, "no beat");
        let within_ms = 1_000 + lease_ms / 2;
        beat_42(&ledger, 1, within_ms);
        assert_eq!(
            r.overtaken_sender_until_ms(&rec),
            Some(within_ms + beat_timeout_ms)
        );
        beat_42(&ledger, 1, 1_000 + lease_ms + 7_000);
        assert_eq!(
            r.overtaken_sender_until_ms(&rec),
            Some(1_000 + lease_ms + beat_timeout_ms),
            "beats past a lease after the overtaking do not count"
        );
        let mut ours = rec.clone();
        ours.poll_cursor.overtaken = Some(crate::record::Overtaken {
            by: Some(5_000_000),
            ..rec.poll_cursor.overtaken.unwrap()
        });
        assert_eq!(r.overtaken_sender_until_ms(&ours), None, "our own request");
        let mut no_streak = rec.clone();
        no_streak.poll_cursor.not_found_streak = 0;
        assert_eq!(r.overtaken_sender_until_ms(&no_streak), None);
        // Fetching, the spent fetches conclude on it too, streak or none (seed 492064).
        for state in [LocalState::TerminalObserved, LocalState::FetchingResult] {
            let mut fetching = no_streak.clone();
            fetching.local_state = state;
            assert_eq!(
                r.overtaken_sender_until_ms(&fetching),
                Some(1_000 + lease_ms + beat_timeout_ms),
                "fetching"
            );
        }
        let mut unknown = rec.clone();
        unknown.poll_cursor.overtaken = None;
        assert_eq!(r.overtaken_sender_until_ms(&unknown), None);
    });
}

/// When `process` last beat on `ledger`, if it beats.
fn beat_at(ledger: &SharedLedger, process: u64) -> Option<u64> {
    let beat = ledger.lock().unwrap().beat_of(process).unwrap();
    beat.map(|b| b.at_ms)
}

/// A runner beats again every `beat_interval_ms` while it runs, not once at its start: a
/// process that beat once would go stale `beat_timeout_ms` later, alive or not, and its
/// submissions be taken up under it (cargo-mutants: a loop bound of zero and an inverted
/// interval test in `Beats::run` survived the unit tests; only the simulator caught them).
#[test]
fn a_runner_beats_again_every_interval_while_it_runs() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        let r = start(&ledger, &server, 1, 0, |mut r| {
            r.cfg.beat_interval_ms = 10;
            r.with_process_id(77)
        });
        until("the start beat", || beat_at(&ledger, 77).is_some()).await;
        let first_ms = beat_at(&ledger, 77).unwrap();
        until("a beat after the start beat", || {
            beat_at(&ledger, 77).is_some_and(|at_ms| at_ms > first_ms)
        })
        .await;
        let (exit, _) = r.stop().await;
        assert_eq!(exit, Exit::Shutdown);
    });
}

/// A zero `beat_interval_ms` beats never, not at the start nor after: such a process holds
/// nothing against another's take-up (`Beats::run`; cargo-mutants: with its interval test
/// inverted, a zero interval beat without pause).
#[test]
fn a_zero_beat_interval_never_beats() {
    on_tokio(async {
        let ledger = memory();
        let server = Server::new(None, false);
        let r = start(&ledger, &server, 1, 0, |mut r| {
            r.cfg.beat_interval_ms = 0;
            r.with_process_id(78)
        });
        until("the runner started", || {
            r.saw(|o| matches!(o, Observation::Started { .. }))
        })
        .await;
        // A runner that beats on a zero interval beats without pause: it has by now.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(beat_at(&ledger, 78), None, "a zero interval beat");
        let (exit, _) = r.stop().await;
        assert_eq!(exit, Exit::Shutdown);
    });
}

/// n1 in SUBMITTING, its submission sent by process 42 (another process of this epoch).
fn submitting_of_42() -> ToolOperation {
    let mut rec = crate::ledger::tests::fixtures::rec("n1");
    rec.local_state = LocalState::Submitting;
    rec.submit_attempts = 1;
    rec.submitted_by = Some(42);
    rec
}

/// Queues `out` for n1 on lane 0, as the runner's own sends are queued.
#[cfg(not(madsim))]
fn queue_n1(r: &mut Runner, out: crate::protocol::Outbound) {
    r.queue.push_back(Queued {
        lane: 0,
        node: "n1".into(),
        out,
        seq: 1,
    });
}

#[cfg(not(madsim))]
fn poll_t1() -> crate::protocol::Outbound {
    crate::protocol::Outbound::Poll {
        operation_id: "t-1".into(),
    }
}

#[cfg(not(madsim))]
fn fetch_t1() -> crate::protocol::Outbound {
    crate::protocol::Outbound::FetchResult {
        operation_id: "t-1".into(),
    }
}

/// n1 in WORKING, inserted in `ledger`.
#[cfg(not(madsim))]
fn insert_working_n1(ledger: &SharedLedger) {
    let mut rec = crate::ledger::tests::fixtures::rec("n1");
    rec.local_state = LocalState::Working;
    ledger.lock().unwrap().insert(rec, 1).unwrap();
}

/// `n1` in the ledger as process 42 (epoch 1) left it: its submission sent and in flight.
fn sent_by_42(ledger: &SharedLedger) {
    let mut rec = submitting_of_42();
    rec.submitted_at_ms = Some(0);
    ledger.lock().unwrap().insert(rec, 1).unwrap();
}

/// Process 42's beat, on `epoch`, written at `at_ms`.
fn beat_42(ledger: &SharedLedger, epoch: u64, at_ms: u64) {
    let beat = crate::ledger::Beat {
        process: 42,
        epoch,
        at_ms,
    };
    ledger.lock().unwrap().beat(beat).unwrap();
}

/// A restarted runner resumes a submission in flight whose sender is gone (no beat, a stale
/// one, or a beat from another epoch: fenced), taking it up with a lease of its own; one whose
/// sender of this epoch beats is left to it and only watched until the beat would go stale
/// (`Runner::resume_unless_held`). Resumed under a live sender, the lease would race it to a
/// hand-off; left alone when its sender is dead, nothing of this runner would ever cover it
/// (cargo-mutants: the hold's test inverted survived the unit tests).
#[test]
fn a_restart_resumes_a_dead_senders_submission_and_leaves_a_live_senders_alone() {
    on_tokio(async {
        let lease = ("n1".to_string(), Timer::SubmissionLease);
        for sender in ["none", "stale", "another epoch", "live"] {
            let ledger = memory();
            sent_by_42(&ledger);
            let mut r = bare_runner(&ledger, config());
            let timeout_ms = r.cfg.beat_timeout_ms;
            let now_ms = r.now_ms();
            match sender {
                "none" => {}
                "stale" => {
                    r.cfg.beat_timeout_ms = 1;
                    beat_42(&ledger, 1, now_ms);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                "another epoch" => beat_42(&ledger, 2, now_ms),
                _ => beat_42(&ledger, 1, now_ms),
            }
            r.resume_unless_held("n1").await;
            if sender == "live" {
                assert!(
                    !r.timer_at.contains_key(&lease),
                    "a live sender's submission was taken up"
                );
                assert_eq!(
                    r.stall_at.get("n1").map(|w| w.at_ms),
                    Some(now_ms + timeout_ms),
                    "watched until the sender's beat goes stale"
                );
            } else {
                assert!(
                    r.timer_at.contains_key(&lease),
                    "sender {sender}: not taken up with a lease of this runner's"
                );
            }
        }
    });
}

/// The hold for a live sender is the submission lease's alone (`Runner::fire_due`): when the
/// lease runs out the sender keeps its submission, but any other timer of the node is stepped
/// as ever. Here this runner's lookup timer, set while it saw n1's submission unknown, fires
/// after process 42 (same epoch, beating) found nothing and submitted again: the timer drives
/// nothing from SUBMITTING, so the node is taken up from the record, with a lease. Swallowed
/// instead, nothing of this runner's but a watch would cover the node (cargo-mutants: `&&`
/// made `||` there, which dropped every due timer of a held node, survived the unit tests).
#[test]
fn only_the_submission_lease_of_a_live_senders_node_waits_for_the_sender() {
    // No connection: nothing is delivered to read before the timers fire.
    fn no_lanes() -> [crate::transport::ChannelTransport; 0] {
        []
    }
    on_tokio(async {
        let ledger = memory();
        let mut unknown = crate::ledger::tests::fixtures::rec("n1");
        unknown.local_state = LocalState::SubmissionUnknown;
        unknown.submit_attempts = 1;
        unknown.submitted_by = Some(5_000_000);
        let seen = ledger.lock().unwrap().insert(unknown, 1).unwrap();
        let mut r = bare_runner(&ledger, config());
        r.seen_version.insert("n1".into(), seen.version);
        let now_ms = r.now_ms();
        r.execute(
            "n1",
            0,
            Command::Schedule {
                at_ms: now_ms,
                timer: Timer::LookupDue,
            },
        );
        // Process 42 looked the key up, found nothing, submitted again, and beats.
        write_as(&ledger, "n1", 1, |rec| {
            rec.local_state = LocalState::Submitting;
            rec.submit_attempts = 2;
            rec.submitted_at_ms = Some(now_ms);
            rec.submitted_by = Some(42);
        });
        beat_42(&ledger, 1, now_ms);
        r.fire_due(&mut no_lanes()).await;
        assert!(
            r.timer_at
                .contains_key(&("n1".to_string(), Timer::SubmissionLease)),
            "the lookup timer was swallowed: the node was not taken up"
        );
        assert!(r.queue.is_empty(), "nothing sent over 42's submission");
        // That lease runs out (moved to now) while 42 still beats: the submission stays 42's.
        r.execute(
            "n1",
            0,
            Command::Schedule {
                at_ms: r.now_ms(),
                timer: Timer::SubmissionLease,
            },
        );
        r.fire_due(&mut no_lanes()).await;
        assert_eq!(state_of(&ledger, "n1"), Some(LocalState::Submitting));
        assert!(r.stall_at.contains_key("n1"), "watched while 42 beats");
    });
}

/// A frame read before a due timer fires may move that timer (`Runner::fire_due` reads what was
/// delivered before each due timer): the timer is then looked at again, and the instance that
/// fell due is not fired. Here n1's poll timer falls due while the answer to its last poll waits
/// on the connection; reading it (the task still working) sets the next poll a server interval
/// on. Fired anyway, the old instance would send a second poll at once and drop the new timer's
/// entry (mcp_ext_replicas seeds 33673, 38006 found the order; cargo-mutants: the "still first"
/// compare made always true survived the unit tests).
#[test]
fn a_due_timer_that_a_frame_read_first_moved_is_not_fired() {
    on_tokio(async {
        let ledger = memory();
        let mut working = crate::ledger::tests::fixtures::rec("n1");
        working.local_state = LocalState::Working;
        working.operation_id = Some("t1".into());
        let seen = ledger.lock().unwrap().insert(working, 1).unwrap();
        let mut r = bare_runner(&ledger, config());
        r.seen_version.insert("n1".into(), seen.version);
        r.handle("n1", Event::Timer(Timer::PollDue)).await;
        assert_eq!(r.queue.len(), 1, "the poll is queued");
        let (t, mut out_rx, in_tx) = ChannelTransport::pair();
        let mut lanes = [t];
        r.flush(&mut lanes).await.unwrap();
        let poll = out_rx.try_recv().expect("the poll was sent");
        let msg: Value = serde_json::from_slice(&poll.body).unwrap();
        assert_eq!(msg["method"], "tasks/get");
        let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "result": task("t1", "working")});
        in_tx
            .send(InFrame {
                request_id: poll.request_id,
                http_status: 200,
                retry_after_ms: None,
                body: serde_json::to_vec(&answer).unwrap(),
            })
            .unwrap();
        // The poll timer falls due with the answer unread.
        let due_ms = r.now_ms();
        r.execute(
            "n1",
            0,
            Command::Schedule {
                at_ms: due_ms,
                timer: Timer::PollDue,
            },
        );
        r.fire_due(&mut lanes).await;
        assert!(r.queue.is_empty(), "the moved timer fired: a second poll");
        let next = r.timer_at.get(&("n1".to_string(), Timer::PollDue)).copied();
        assert!(
            next.is_some_and(|at| at > due_ms),
            "the answer's next poll is kept: {next:?}"
        );
        assert_eq!(r.timers.len(), 1, "one timer for n1: {:?}", r.timers);
    });
}

/// A fetch follows this process's own status read as one more read when the lane reads results
/// with its status read and the answer that ended the task came to an older request
/// (`Runner::fetch_after_own_read`; mcp_ext_replicas seeds 318340, 338850). The answer to the
/// newest read, another protocol's fetch, or an event that answers nothing leaves it alone.
#[test]
fn a_fetch_waits_the_servers_interval_only_after_a_read_newer_than_the_answer() {
    on_tokio(async {
        let ledger = memory();
        let (approvals, _) = mpsc::unbounded_channel();
        let mut ext = Runner::new(
            config(),
            1,
            tokio::time::Instant::now(),
            Box::new(crate::protocol::mcp_tasks_ext::McpTasksExtAdapter::new()),
            ledger.clone(),
            Box::new(NullObserver),
            approvals,
            7,
            5_000_000,
        );
        let answer = |sent_ms| Event::Reply {
            kind: RequestKind::Poll,
            seq: 7,
            epoch: 1,
            sent_ms,
            reply: Reply::NotFound {
                message: "any".into(),
            },
        };
        ext.last_sent
            .insert("n1".into(), (RequestKind::Poll, 54_156));
        assert!(ext.fetch_after_own_read("n1", 0, &answer(Some(37_083))));
        assert!(
            !ext.fetch_after_own_read("n1", 0, &answer(Some(54_156))),
            "the newest read's answer"
        );
        assert!(
            !ext.fetch_after_own_read("n1", 0, &answer(None)),
            "when it left is unknown"
        );
        assert!(!ext.fetch_after_own_read("n1", 0, &Event::Timer(Timer::FetchDue)));
        ext.last_sent
            .insert("n1".into(), (RequestKind::Cancel, 54_156));
        assert!(
            !ext.fetch_after_own_read("n1", 0, &answer(Some(37_083))),
            "a cancel went last"
        );
        let mut mcp = bare_runner(&ledger, config());
        mcp.last_sent
            .insert("n1".into(), (RequestKind::Poll, 54_156));
        assert!(
            !mcp.fetch_after_own_read("n1", 0, &answer(Some(37_083))),
            "tasks/result is not a status read"
        );
    });
}

/// `Adapter::fetch_is_status_read` is a fact about each protocol's wire, read off the frames:
/// true exactly when the result is fetched with the very frame of the status read.
#[test]
fn an_adapter_says_its_fetch_is_a_status_read_exactly_when_the_frames_are_the_same() {
    use crate::protocol::aip151::{Aip151Adapter, Aip151Config};
    use crate::protocol::mcp_tasks_ext::McpTasksExtAdapter;
    use crate::protocol::{Adapter, Outbound};
    let aip = Aip151Adapter::new(Aip151Config {
        submit_path: "/v1/projects/p/reports:{tool}".into(),
        operation_path: "/v1/{name}".into(),
        operations_collection: "/v1/operations".into(),
        tools: vec!["report".into()],
        dedupe_window_ms: None,
        cancel_supported: true,
    });
    let adapters: [Box<dyn Adapter>; 3] = [
        Box::new(Mcp20251125Adapter::new()),
        Box::new(McpTasksExtAdapter::new()),
        Box::new(aip),
    ];
    let mut said = vec![];
    for a in &adapters {
        let operation_id = "operations/op-1".to_string();
        let poll = a.encode_frame(
            9,
            &Outbound::Poll {
                operation_id: operation_id.clone(),
            },
        );
        let fetch = a.encode_frame(9, &Outbound::FetchResult { operation_id });
        let same = poll.body == fetch.body && poll.http == fetch.http;
        assert_eq!(a.fetch_is_status_read(), same, "{}", a.id().name());
        said.push(same);
    }
    assert_eq!(said, [false, true, true], "MCP 2025-11-25 has tasks/result");
}

/// Launch controls: a new call node goes to the launched adapter's lane exactly when its tool
/// is long (or no tool list narrows them) and its id's stable draw is below the fraction; when
/// the primary lane is retired every new node goes to the launched one, and with both retired
/// none is taken. (cargo-mutants, session 41: `||` read as `&&` in "long", `&&` as `||` and `<`
/// as `==` in the choice survived the unit tests and the gate: `mcp_retire` sends 5% of a
/// dozen nodes, and no judge counts which lane they took.)
#[test]
fn launch_controls_send_the_configured_share_of_long_calls_to_the_new_adapter() {
    use crate::protocol::mcp_tasks_ext::McpTasksExtAdapter;
    on_tokio(async {
        let fraction = 0.3;
        let launched = |long_tools: Vec<String>| {
            let mut cfg = config();
            cfg.launch = LaunchConfig {
                new_adapter: Some(AdapterId::McpTasksExt),
                new_adapter_fraction: fraction,
                long_tools,
                shadow_tools: vec![],
            };
            bare_runner(&memory(), cfg).with_lane(Box::new(McpTasksExtAdapter::new()))
        };
        let call = |id: String, tool: &str| CallNode {
            tool: tool.into(),
            ..node(&id)
        };
        let r = launched(vec!["report".into()]);
        let ext = r
            .lane_of(AdapterId::McpTasksExt)
            .expect("the launched lane");
        let primary = r.lane_of(AdapterId::Mcp20251125).expect("the primary lane");
        let mut on_new = 0;
        for i in 0..1_000 {
            let id = format!("n{i}");
            let below = lanes::stable_fraction(&id) < fraction;
            let want = if below { ext } else { primary };
            assert_eq!(
                r.lane_for_new(&call(id.clone(), "report")),
                Some(want),
                "{id}"
            );
            on_new += u32::from(below);
            // Not a long tool: always the primary lane.
            assert_eq!(r.lane_for_new(&call(id, "lookup")), Some(primary));
        }
        assert!(
            (250..=350).contains(&on_new),
            "{on_new} of 1,000 long calls launched"
        );
        // No tool list: every tool counts as long.
        let r = launched(vec![]);
        let id = (0..)
            .map(|i| format!("n{i}"))
            .find(|id| lanes::stable_fraction(id) < fraction)
            .expect("an id below the fraction");
        assert_eq!(r.lane_for_new(&call(id.clone(), "lookup")), Some(ext));
        // The primary retired: everything new is launched; both retired: nothing is taken.
        let mut r = launched(vec!["report".into()]);
        let above = (0..)
            .map(|i| format!("n{i}"))
            .find(|id| lanes::stable_fraction(id) >= fraction)
            .expect("an id above the fraction");
        r.retire(AdapterId::Mcp20251125);
        assert_eq!(r.lane_for_new(&call(above.clone(), "lookup")), Some(ext));
        r.retire(AdapterId::McpTasksExt);
        assert_eq!(r.lane_for_new(&call(above, "report")), None);
    });
}
