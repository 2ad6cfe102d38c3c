//! Server-side faults riding on a cancel: the status-after-cancel quirk (a marked task's work
//! outlives the cancel in every profile, its end is reported, and only on request does the
//! visible status flip; the truth keeps the first terminal status), and a completion racing the
//! cancel. Also answers matched to rounds.

use serde_json::{json, Value};

use crate::fake::service::CancelFaults;

use super::tests::{script, Drv, McpDrv, ALL};
use super::*;
use crate::fake::script::ScriptOutcome;
use crate::fake::truth::{AnswerAction, TaskStatus, WorkEnd};

#[test]
fn a_marked_task_flips_to_its_outcome_after_cancel_and_the_truth_keeps_cancelled() {
    for profile in ALL {
        let mut d = Drv::new(profile, true);
        let id = d.submit(
            "req",
            &script("n1", 2_000, ScriptOutcome::Completed),
            json!({}),
        );
        let plain = d.submit(
            "req",
            &script("n2", 2_000, ScriptOutcome::Completed),
            json!({}),
        );
        d.to(500);
        let r = d.call_with(
            "tasks/cancel",
            json!({ "taskId": id }),
            CancelFaults {
                keep_working: true,
                race: false,
                ..Default::default()
            },
        );
        assert_eq!(r["result"]["status"], "cancelled", "{profile:?}");
        let r = d.call("tasks/cancel", json!({ "taskId": plain }));
        assert_eq!(r["result"]["status"], "cancelled", "{profile:?}");
        // The marked task's work goes on; nothing flips by itself.
        d.to(2_000);
        assert_eq!(
            d.s.take_finished_after_cancel(),
            vec![id.clone()],
            "{profile:?}"
        );
        assert_eq!(d.status(&id), "cancelled");
        assert_eq!(d.truth(&id).effects_after_cancel, 1);
        assert_eq!(
            d.s.flip_after_cancel(&plain, 2_000),
            None,
            "an unmarked task never flips"
        );
        // Asked to, it flips: status completed, result stored; truth: first terminal cancelled.
        assert_eq!(
            d.s.flip_after_cancel(&id, 2_100),
            Some(TaskStatus::Completed)
        );
        assert_eq!(d.s.flip_after_cancel(&id, 2_100), None, "flips once");
        assert_eq!(d.status(&id), "completed", "{profile:?}");
        let r = d.call("tasks/result", json!({ "taskId": id }));
        assert_eq!(r["result"]["content"][0]["text"], "n1 ok", "{profile:?}");
        let tr = d.truth(&id);
        assert_eq!(tr.terminal_status, Some(TaskStatus::Cancelled));
        assert_eq!(tr.status, TaskStatus::Completed);
        assert!(tr.result_digest.is_some());
        // The unmarked task: TS/strict stopped its work, Python let it run; it stays cancelled.
        assert_eq!(d.status(&plain), "cancelled");
        assert_eq!(d.truth(&plain).terminal_status, Some(TaskStatus::Cancelled));
    }
}

#[test]
fn work_waiting_for_input_aborts_even_when_marked() {
    let mut d = Drv::new(Profile::TsSdk, true);
    let mut s = script("n1", 2_000, ScriptOutcome::Completed);
    s.input_at_ms = vec![100];
    let id = d.submit("req", &s, json!({}));
    d.to(200);
    assert_eq!(d.status(&id), "input_required");
    d.call_with(
        "tasks/cancel",
        json!({ "taskId": id }),
        CancelFaults {
            keep_working: true,
            race: false,
            ..Default::default()
        },
    );
    assert_eq!(d.truth(&id).work_end, Some(WorkEnd::AbortedAtInput));
    d.to(5_000);
    assert!(d.s.take_finished_after_cancel().is_empty());
    assert_eq!(d.s.flip_after_cancel(&id, 5_000), None);
}

#[test]
fn a_completion_racing_the_cancel_wins_and_the_cancel_meets_a_terminal_task() {
    for profile in ALL {
        let mut d = Drv::new(profile, true);
        let id = d.submit(
            "req",
            &script("n1", 9_000, ScriptOutcome::Completed),
            json!({}),
        );
        d.to(500);
        assert!(d.s.service().cancel_meets_running_work(&id));
        let r = d.call_with(
            "tasks/cancel",
            json!({ "taskId": id }),
            CancelFaults {
                keep_working: false,
                race: true,
                ..Default::default()
            },
        );
        assert_eq!(r["error"]["code"], -32602, "{profile:?}: {r}");
        assert_eq!(d.status(&id), "completed");
        let tr = d.truth(&id);
        assert_eq!(
            (tr.terminal_status, tr.work_end_at_ms, tr.side_effects),
            (Some(TaskStatus::Completed), Some(500), 1)
        );
        assert!(!d.s.service().cancel_meets_running_work(&id));
    }
}

#[test]
fn answered_rounds_keep_their_content() {
    let mut d = Drv::new(Profile::SpecStrict, true);
    let mut s = script("n1", 2_000, ScriptOutcome::Completed);
    s.input_at_ms = vec![100];
    let id = d.submit("req", &s, json!({}));
    d.req("tasks/result", json!({ "taskId": id }));
    let out = d.to(100);
    let e = super::tests::elicitations(&out);
    assert_eq!(e.len(), 1);
    d.send(json!({"jsonrpc": "2.0", "id": e[0]["id"], "result": {"action": "accept", "content": {"ok": false}}}));
    let r = &d.truth(&id).input_rounds[0];
    assert_eq!(
        (r.action, r.content.clone()),
        (Some(AnswerAction::Accept), Some(json!({"ok": false})))
    );
}

/// An answer whose related-task metadata names another task than the round its id asks is
/// marked as meant for that task (the judge reads the mark): TS pairs by id alone.
#[test]
fn a_ts_answer_meant_for_another_task_is_marked_as_such() {
    let mut d = Drv::new(Profile::TsSdk, true);
    let mut s = script("n1", 2_000, ScriptOutcome::Completed);
    s.input_at_ms = vec![100];
    let a = d.submit("req", &s, json!({}));
    s.call_node = "n2".into();
    let b = d.submit("req", &s, json!({}));
    d.req("tasks/result", json!({ "taskId": a }));
    d.req("tasks/result", json!({ "taskId": b }));
    let e = super::tests::elicitations(&d.to(100));
    assert_eq!(e.len(), 2);
    let b_id = e
        .iter()
        .find(|m| {
            m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == json!(b)
        })
        .map(|m| m["id"].clone())
        .expect("b's round asked");
    d.call("tasks/cancel", json!({ "taskId": a }));
    let related = json!({"io.modelcontextprotocol/related-task": {"taskId": a}});
    d.send(json!({"jsonrpc": "2.0", "id": b_id, "result": {"action": "accept", "content": {"ok": true}, "_meta": related}}));
    let r = &d.truth(&b).input_rounds[0];
    assert_eq!(
        (r.action, r.answer_meant_for.clone()),
        (Some(AnswerAction::Accept), Some(a.clone()))
    );
    // An answer naming its own task is not marked.
    assert_eq!(d.truth(&a).input_rounds[0].answer_meant_for, None);
}

/// The fault layer's neutral edits, as this codec puts them on the wire: a result missing its
/// last block still claims the digest of the whole; a rewritten task id reaches every place the
/// reply names the task; a reply can name another request in flight.
#[test]
fn rewrites_land_where_the_wire_format_carries_them() {
    use crate::fake::codec::{Ask, Shape};
    use toolop::transport::OutFrame;
    let mut d = Drv::new(Profile::SpecStrict, true);
    let mut s = script("n1", 1_000, ScriptOutcome::Completed);
    s.blocks = 3;
    let id = d.submit("req", &s, json!({}));
    d.to(2_000);
    let frame = |rpc: u64, method: &str, params: Value| OutFrame {
        request_id: Some(rpc),
        body: serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": rpc, "method": method, "params": params}),
        )
        .unwrap(),
        http: None,
    };
    let result = |d: &mut Drv, shape: &Shape| {
        let fetch =
            d.s.decode(frame(70, "tasks/result", json!({ "taskId": id })));
        let poll = d.s.decode(frame(71, "tasks/get", json!({ "taskId": id })));
        assert!(matches!(fetch.ask, Ask::Service(_)));
        let mut shape = shape.clone();
        if shape.body_call.is_some() {
            shape.body_call = poll.call;
        }
        let r = d.s.serve(2_000, fetch, Default::default(), None).remove(0);
        let f = d.s.encode_reply(r.call, &r.response, &shape);
        assert_eq!(
            f.request_id,
            Some(70),
            "the transport still answers request 70"
        );
        serde_json::from_slice::<Value>(&f.body).unwrap()
    };
    let whole = result(&mut d, &Shape::default());
    let cut = result(
        &mut d,
        &Shape {
            drop_last_block: true,
            ..Shape::default()
        },
    );
    assert_eq!(whole["result"]["content"].as_array().unwrap().len(), 3);
    assert_eq!(cut["result"]["content"].as_array().unwrap().len(), 2);
    assert_eq!(
        cut["result"]["_meta"], whole["result"]["_meta"],
        "the claimed digest is the whole result's"
    );
    let other = result(
        &mut d,
        &Shape {
            task_id: Some("t-other".into()),
            ..Shape::default()
        },
    );
    assert_eq!(
        other["result"]["_meta"][super::RELATED_TASK]["taskId"],
        "t-other"
    );
    let misaddressed = result(
        &mut d,
        &Shape {
            body_call: Some(crate::fake::codec::CallId(0)),
            ..Shape::default()
        },
    );
    assert_eq!(
        misaddressed["id"], 71,
        "the body names the other request in flight"
    );
}
