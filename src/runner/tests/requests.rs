//! Requests from the server: input rounds answered through the approval gate (validated
//! against the requested schema before anything is sent), and every other server request
//! answered, on the channel transport as on the live ones.

use super::*;

/// What the input-round server saw: the answers that reached it.
#[derive(Default)]
struct Answers(Vec<Value>);

/// A server whose task asks one question (`{"ok": boolean}`, required) on the `tasks/result`
/// stream, like the TS SDK (its first request of the session: id 0, related-task `_meta`), and
/// completes once answered.
async fn input_server(
    mut rx: mpsc::UnboundedReceiver<crate::transport::OutFrame>,
    tx: mpsc::UnboundedSender<InFrame>,
    answers: Arc<Mutex<Answers>>,
) {
    let send = |id: &Value, result: Value| {
        let body =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap();
        let _ = tx.send(InFrame {
            request_id: id.as_u64(),
            http_status: 200,
            retry_after_ms: None,
            body,
        });
    };
    let mut held_fetch: Option<Value> = None;
    while let Some(frame) = rx.recv().await {
        let msg: Value = serde_json::from_slice(&frame.body).unwrap();
        let answered = !answers.lock().unwrap().0.is_empty();
        match (msg["method"].as_str(), msg.get("id").cloned()) {
            (Some("initialize"), Some(id)) => send(
                &id,
                json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "t", "version": "1"},
                "capabilities": {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}}),
            ),
            (Some("tools/list"), Some(id)) => send(
                &id,
                json!({"tools": [{"name": "report", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
            ),
            (Some("tools/call"), Some(id)) => send(&id, json!({"task": task("t1", "working")})),
            (Some("tasks/get"), Some(id)) => send(
                &id,
                task(
                    "t1",
                    if answered {
                        "completed"
                    } else {
                        "input_required"
                    },
                ),
            ),
            (Some("tasks/result"), Some(id)) if answered => send(
                &id,
                json!({"content": [{"type": "text", "text": "ok"}],
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}),
            ),
            (Some("tasks/result"), Some(id)) => {
                held_fetch = Some(id);
                let ask = json!({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {
                    "mode": "form", "message": "Approve?",
                    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}});
                let _ = tx.send(InFrame::message(serde_json::to_vec(&ask).unwrap()));
            }
            // Our answer to the elicitation: a response carrying the server's id.
            (None, Some(_)) => {
                answers.lock().unwrap().0.push(msg["result"].clone());
                if let Some(id) = held_fetch.take() {
                    send(
                        &id,
                        json!({"content": [{"type": "text", "text": "ok"}],
                        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}),
                    );
                }
            }
            _ => {}
        }
    }
}

/// A runner on the input-round server with call node `n1` submitted.
struct InputRound {
    ledger: SharedLedger,
    obs: Seen,
    gate: mpsc::UnboundedReceiver<ApprovalRequest>,
    inputs: mpsc::UnboundedSender<Input>,
    handle: tokio::task::JoinHandle<Exit>,
    answers: Arc<Mutex<Answers>>,
    /// To push more server messages, as the server would.
    in_tx: mpsc::UnboundedSender<InFrame>,
}

fn input_round(cfg: RunnerConfig) -> InputRound {
    let (transport, out_rx, in_tx) = ChannelTransport::pair();
    let answers = Arc::new(Mutex::new(Answers::default()));
    tokio::spawn(input_server(out_rx, in_tx.clone(), answers.clone()));
    let ledger = memory();
    let obs = Arc::new(Mutex::new(vec![]));
    let (approvals, gate) = mpsc::unbounded_channel();
    let runner = Runner::new(
        cfg,
        1,
        tokio::time::Instant::now(),
        Box::new(Mcp20251125Adapter::new()),
        ledger.clone(),
        Box::new(Collect(obs.clone())),
        approvals,
        1,
        0,
    );
    let (inputs, inputs_rx) = mpsc::unbounded_channel();
    let handle = tokio::spawn(runner.run(transport, inputs_rx));
    let node = CallNode {
        id: "n1".into(),
        tool: "report".into(),
        arguments: json!({}),
        submission_key: "k1".into(),
    };
    inputs.send(Input::Submit(node)).unwrap();
    InputRound {
        ledger,
        obs,
        gate,
        inputs,
        handle,
        answers,
        in_tx,
    }
}

/// Accept the gate's first question with `{"ok": true}` and wait for `n1`'s receipt.
async fn accept_round_until_receipt(
    ledger: &SharedLedger,
    gate: &mut mpsc::UnboundedReceiver<ApprovalRequest>,
    inputs: &mpsc::UnboundedSender<Input>,
) {
    let ask = tokio::time::timeout(Duration::from_secs(5), gate.recv())
        .await
        .expect("the gate is asked")
        .expect("open");
    inputs
        .send(Input::Approval {
            node: "n1".into(),
            round: ask.round,
            schema_digest: ask.schema_digest.clone(),
            reply: ApprovalReply::Accept {
                content: json!({"ok": true}),
            },
        })
        .unwrap();
    until("a receipt", || {
        ledger.lock().unwrap().receipts().unwrap().len() == 1
    })
    .await;
}

/// The approval gate gets the requested schema; an accepted answer that does not conform is
/// never sent: it is observed, the gate is asked again with the reason (at most
/// `APPROVAL_REASKS_MAX` times), and the round stays open until a conforming answer.
#[test]
fn a_nonconforming_approval_is_refused_at_the_gate_and_never_sent() {
    on_tokio(async {
        let mut cfg = config();
        cfg.core.approval_timeout_ms = 60_000;
        cfg.request_timeout_ms = 5_000;
        let InputRound {
            ledger,
            obs,
            mut gate,
            inputs,
            handle,
            answers,
            ..
        } = input_round(cfg);
        let wait = Duration::from_secs(5);
        let ask = tokio::time::timeout(wait, gate.recv())
            .await
            .expect("the gate is asked")
            .expect("open");
        assert_eq!(
            ask.requested_schema,
            json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
        );
        assert_eq!(ask.refused_answer, None);
        let answer = |content: Value| Input::Approval {
            node: "n1".into(),
            round: ask.round,
            schema_digest: ask.schema_digest.clone(),
            reply: ApprovalReply::Accept { content },
        };
        // A gate that keeps answering wrong: refused every time, told why a bounded number of times.
        let wrong = [
            json!({"ok": "yes"}),
            json!({}),
            json!({"ok": 1}),
            json!({"ok": null}),
            json!({"ok": []}),
        ];
        for content in &wrong {
            inputs.send(answer(content.clone())).unwrap();
        }
        let mut reasks = vec![];
        for _ in 0..APPROVAL_REASKS_MAX {
            let again = tokio::time::timeout(wait, gate.recv())
                .await
                .expect("asked again")
                .expect("open");
            assert_eq!(
                (again.round, &again.schema_digest, &again.requested_schema),
                (ask.round, &ask.schema_digest, &ask.requested_schema)
            );
            reasks.push(
                again
                    .refused_answer
                    .expect("the reason comes with the question"),
            );
        }
        assert!(
            reasks[0].contains("/ok") && reasks[0].contains("boolean"),
            "{}",
            reasks[0]
        );
        assert!(
            reasks[1].contains("\"ok\" is a required property"),
            "{}",
            reasks[1]
        );
        inputs.send(answer(json!({"ok": true}))).unwrap();
        until("a receipt", || {
            ledger.lock().unwrap().receipts().unwrap().len() == 1
        })
        .await;
        inputs.send(Input::Shutdown).unwrap();
        assert_eq!(handle.await.unwrap(), Exit::Shutdown);
        assert!(
            gate.try_recv().is_err(),
            "asked more than {APPROVAL_REASKS_MAX} times again"
        );
        assert_eq!(state_of(&ledger, "n1"), Some(LocalState::Accepted));
        // Only the conforming answer reached the server.
        let sent = &answers.lock().unwrap().0;
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0]["content"], json!({"ok": true}));
        let obs = obs.lock().unwrap();
        let refused = obs
            .iter()
            .filter(|o| matches!(o, Observation::ApprovalRefused { node, .. } if node == "n1"))
            .count();
        assert_eq!(refused, wrong.len());
    });
}

/// Every server request gets an answer, on the channel transport as on the live ones: `ping`
/// an empty result, URL-mode elicitation and elicitation for no call node of ours declined,
/// sampling and roots -32601, an unreadable elicitation -32602. Silence hangs a real server.
#[test]
fn every_server_request_is_answered() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (transport, mut out_rx, in_tx) = ChannelTransport::pair();
        let ledger = memory();
        let (approvals, _approvals_rx) = mpsc::unbounded_channel();
        let obs = Arc::new(Mutex::new(vec![]));
        let runner = Runner::new(RunnerConfig::default(), 1, tokio::time::Instant::now(), Box::new(Mcp20251125Adapter::new()), ledger, Box::new(Collect(obs.clone())), approvals, 1, 0);
        let (inputs, inputs_rx) = mpsc::unbounded_channel();
        let handle = tokio::spawn(runner.run(transport, inputs_rx));
        let reply = |id: Value, result: Value| InFrame::message(serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap());
        let request = |id: Value, method: &str, params: Value| InFrame::message(serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap());
        // A ping during the handshake is answered before initialize is.
        let init = out_rx.recv().await.unwrap();
        let init_id: Value = serde_json::from_slice::<Value>(&init.body).unwrap()["id"].clone();
        in_tx.send(request(json!("early"), "ping", json!({}))).unwrap();
        let early: Value = serde_json::from_slice(&out_rx.recv().await.unwrap().body).unwrap();
        assert_eq!(early, json!({"jsonrpc": "2.0", "id": "early", "result": {}}));
        in_tx.send(reply(init_id, json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}))).unwrap();
        let _initialized = out_rx.recv().await.unwrap();
        let list = out_rx.recv().await.unwrap();
        let list_id = serde_json::from_slice::<Value>(&list.body).unwrap()["id"].clone();
        in_tx.send(reply(list_id, json!({"tools": []}))).unwrap();
        let cases = [
            (request(json!(1), "ping", json!({})), json!({"result": {}})),
            (request(json!(2), "sampling/createMessage", json!({"messages": [], "maxTokens": 1})), json!({"error": -32601})),
            (request(json!(3), "roots/list", json!({})), json!({"error": -32601})),
            (request(json!(4), "elicitation/create", json!({"mode": "url", "message": "open", "url": "https://x", "elicitationId": "e"})), json!({"result": {"action": "decline"}})),
            (request(json!(5), "elicitation/create", json!({"message": "m", "requestedSchema": {"type": "object"},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "not-ours"}}})), json!({"result": {"action": "decline"}})),
            (request(json!(6), "elicitation/create", json!({"message": 7})), json!({"error": -32602})),
        ];
        for (frame, want) in cases {
            let id = serde_json::from_slice::<Value>(&frame.body).unwrap()["id"].clone();
            in_tx.send(frame).unwrap();
            let got: Value = serde_json::from_slice(&out_rx.recv().await.unwrap().body).unwrap();
            assert_eq!(got["id"], id);
            match (&want["result"], &want["error"]) {
                (Value::Null, code) => assert_eq!(&got["error"]["code"], code, "{got}"),
                (result, _) => assert_eq!(&got["result"], result, "{got}"),
            }
        }
        inputs.send(Input::Shutdown).unwrap();
        assert_eq!(handle.await.unwrap(), Exit::Shutdown);
        let answered = obs.lock().unwrap().iter().filter(|o| matches!(o, Observation::ServerRequestAnswered { .. })).count();
        assert_eq!(answered, 7);
    });
}

/// An input request the core refuses still gets an answer on the wire: after the round was
/// answered and the call accepted, the server delivers the same request again (a stream replay)
/// and then a request the executor never solicited, both for our task. The replay gets the
/// answer the gate gave; the other is declined. Before, both were left hanging for the server.
#[test]
fn refused_input_requests_are_answered_never_left_hanging() {
    on_tokio(async {
        let InputRound {
            ledger,
            mut gate,
            inputs,
            handle,
            answers,
            in_tx,
            ..
        } = input_round(config());
        accept_round_until_receipt(&ledger, &mut gate, &inputs).await;
        let elicit = |id: Value, schema: Value| {
            let ask = json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
                "mode": "form", "message": "Approve?", "requestedSchema": schema,
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}});
            InFrame::message(serde_json::to_vec(&ask).unwrap())
        };
        let same = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        in_tx.send(elicit(json!(0), same)).unwrap();
        in_tx
            .send(elicit(
                json!(9),
                json!({"type": "object", "properties": {"why": {"type": "string"}}}),
            ))
            .unwrap();
        until("three answers", || answers.lock().unwrap().0.len() == 3).await;
        inputs.send(Input::Shutdown).unwrap();
        assert_eq!(handle.await.unwrap(), Exit::Shutdown);
        let sent = &answers.lock().unwrap().0;
        assert_eq!(
            (&sent[0]["action"], &sent[0]["content"]),
            (&json!("accept"), &json!({"ok": true}))
        );
        assert_eq!(sent[1], sent[0], "the replay hears the gate's answer again");
        assert_eq!(
            sent[2]["action"], "decline",
            "the unsolicited one is declined: {}",
            sent[2]
        );
        // Ids are reused across tasks (the TS SDK's 0): the decline names its task, or the
        // server could take it as another task's answer (mcp_faults seed 2173).
        assert_eq!(
            sent[2]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], "t1",
            "the decline names its task: {}",
            sent[2]
        );
        assert!(
            gate.try_recv().is_err(),
            "no new round for a refused request"
        );
        assert_eq!(state_of(&ledger, "n1"), Some(LocalState::Accepted));
    });
}

/// A process a newer epoch fenced off answers nothing for the node, not even a request the
/// server delivers again: the newer executor owns every exchange about it (mcp_faults seed
/// 6691, where the fenced process declined a replayed request 16 s after the takeover).
#[test]
fn a_fenced_process_leaves_refused_input_requests_to_the_newer_epoch() {
    on_tokio(async {
        let InputRound {
            ledger,
            mut gate,
            inputs,
            handle,
            answers,
            in_tx,
            ..
        } = input_round(config());
        accept_round_until_receipt(&ledger, &mut gate, &inputs).await;
        // Another executor takes the node over (epoch 2) while this one still runs.
        assert_eq!(ledger.lock().unwrap().bump_epoch().unwrap(), 2);
        write_as(&ledger, "n1", 2, |r| r.execution_epoch = 2);
        let ask = json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {
            "mode": "form", "message": "Approve?", "requestedSchema": {"type": "object"},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}});
        in_tx
            .send(InFrame::message(serde_json::to_vec(&ask).unwrap()))
            .unwrap();
        // A request nobody of ours asked for still gets its decline: the runner is alive and
        // reading, so silence for the fenced node's request is the fence, not a stall.
        let stray = json!({"jsonrpc": "2.0", "id": 8, "method": "elicitation/create", "params": {
            "mode": "form", "message": "?", "requestedSchema": {"type": "object"},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "nobody"}}}});
        in_tx
            .send(InFrame::message(serde_json::to_vec(&stray).unwrap()))
            .unwrap();
        until("the stray decline", || answers.lock().unwrap().0.len() >= 2).await;
        inputs.send(Input::Shutdown).unwrap();
        let _ = handle.await.unwrap();
        let sent = &answers.lock().unwrap().0;
        assert_eq!(
            sent.len(),
            2,
            "only the round's answer and the stray decline: {sent:?}"
        );
        assert_eq!(sent[1]["action"], "decline");
        assert!(
            sent[1].get("_meta").is_none(),
            "the stray decline names no task of ours"
        );
    });
}

/// An `elicitation/create` for our task `t1`, request id `id`, asking with `schema`.
fn elicit_t1(id: Value, schema: Value) -> InFrame {
    let ask = json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
        "mode": "form", "message": "Approve?", "requestedSchema": schema,
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}});
    InFrame::message(serde_json::to_vec(&ask).unwrap())
}

/// A refused request (here: n1's answered round, delivered again after its receipt) is left
/// unanswered while another call node holds a round open under the same request id: servers
/// reuse ids (the TS SDK's 0), and one that routes an answer by id alone would take it as that
/// node's. Under another id it is answered: the gate's answer again for the same request (same
/// id, same schema), a decline for another request under the answered id (another schema).
#[test]
fn a_refused_request_under_an_id_another_node_holds_open_is_not_answered() {
    let same =
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    for (open_id, replay_answered) in [(json!(0), false), (json!(5), true)] {
        on_tokio(async {
            let InputRound {
                ledger,
                mut gate,
                inputs,
                handle,
                answers,
                in_tx,
                ..
            } = input_round(config());
            accept_round_until_receipt(&ledger, &mut gate, &inputs).await;
            // n2, another process's node, waits for its person under `open_id`.
            let mut n2 = ToolOperation::new(
                "n2",
                "report",
                "v1",
                json!({}),
                AdapterId::Mcp20251125,
                "k2",
                1,
                0,
                60_000,
            );
            n2.local_state = LocalState::InputRequired;
            n2.operation_id = Some("t2".into());
            n2.pending_input = Some(crate::record::PendingInput {
                round: 1,
                server_request_id: open_id.clone(),
                schema_digest: "another".into(),
                deadline_ms: u64::MAX / 2,
                request: json!({}),
                requested_schema: json!({"type": "object"}),
            });
            ledger.lock().unwrap().insert(n2, 1).unwrap();
            in_tx.send(elicit_t1(json!(0), same.clone())).unwrap();
            let other = json!({"type": "object", "properties": {"why": {"type": "string"}}});
            in_tx.send(elicit_t1(json!(0), other)).unwrap();
            // Nothing shows a request left unanswered but the silence: give the runner time to
            // read both (it reads a frame in well under a millisecond).
            if replay_answered {
                until("three answers", || answers.lock().unwrap().0.len() >= 3).await;
            } else {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            inputs.send(Input::Shutdown).unwrap();
            assert_eq!(handle.await.unwrap(), Exit::Shutdown);
            let sent = &answers.lock().unwrap().0;
            if !replay_answered {
                assert_eq!(sent.len(), 1, "only the round's own answer: {sent:?}");
                return;
            }
            assert_eq!(sent.len(), 3, "{sent:?}");
            assert_eq!(
                sent[1], sent[0],
                "the same request hears the gate's answer again"
            );
            assert_eq!(
                sent[2]["action"], "decline",
                "another request under the answered id is not answered with its answer: {}",
                sent[2]
            );
        });
    }
}
