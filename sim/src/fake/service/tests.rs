//! The task service on its own, with a codec-free result shape: the policies each protocol picks
//! and what they change. Wire behaviour is tested per codec.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use super::*;
use crate::fake::codec::{AnswerItem, Request, ResultBody, RunAs, Submit};
use crate::fake::script::ScriptOutcome;
use crate::fake::truth::{AnswerAction, WorkEnd};

struct Plain;

impl ResultShape for Plain {
    fn payload(&self, b: &ResultBody) -> Option<Value> {
        Some(json!({"text": b.text, "blocks": b.blocks, "error": b.is_error}))
    }
}

fn policy() -> Policy {
    Policy {
        error_result_status: TaskStatus::Failed,
        done_without_result: false,
        cancel: CancelRule {
            effect: CancelEffect::Immediate,
            running_work: RunningWork::Stops,
        },
        at_terminal: AtTerminal::RestartTtl,
        dedupe: Dedupe::WhileRetained,
        input: InputDelivery::Shown,
        expiry: Expiry::Delete,
        cancel_withdraws_input: false,
        notify_status: false,
        after_answer: AfterAnswer::Working,
        tasks_bound_to_session: false,
    }
}

fn service(p: Policy) -> TaskService {
    TaskService::new(
        ServiceConfig {
            policy: p,
            ids: IdStyle::Hex128,
            max_ttl_ms: Some(10_000),
            preempt_rate: 0.0,
        },
        ChaCha8Rng::seed_from_u64(3),
    )
}

fn submit(node: &str, key: &str, duration_ms: u64, outcome: ScriptOutcome) -> Request {
    let script = TaskScript {
        call_node: node.into(),
        duration_ms,
        outcome,
        text: format!("{node} ok"),
        ..TaskScript::default()
    };
    Request::Submit(Submit {
        tool: "t".into(),
        script,
        key: Some(key.into()),
        dedupe: true,
        run: RunAs::Task,
        requested_ttl_ms: None,
    })
}

/// Send `r` at `now`; the single reply.
fn ask(s: &mut TaskService, now: u64, r: Request) -> Response {
    let mut out = s.handle(
        now,
        Some(CallId(now)),
        r,
        CancelFaults::default(),
        None,
        &Plain,
    );
    assert_eq!(out.len(), 1, "{out:?}");
    out.remove(0).response
}

fn id_of(r: &Response) -> String {
    match r {
        Response::Task(v) => v.id.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dedupe_windows_differ_by_policy() {
    // While retained: a second submission with the key finds the task; after deletion it creates.
    let mut s = service(policy());
    let a = id_of(&ask(
        &mut s,
        0,
        submit("n1", "k", 1_000, ScriptOutcome::Completed),
    ));
    assert_eq!(
        id_of(&ask(
            &mut s,
            10,
            submit("n1", "k", 1_000, ScriptOutcome::Completed)
        )),
        a
    );
    s.advance(20_000, &Plain);
    assert!(s.truth().tasks[&a].deleted_at_ms.is_some());
    assert_ne!(
        id_of(&ask(
            &mut s,
            20_000,
            submit("n1", "k", 1_000, ScriptOutcome::Completed)
        )),
        a
    );
    assert_eq!(s.truth().tasks_created_per_call_node["n1"], 2);
    // From creation, deleted included (AIP-155 stale success), and a new task past the window.
    let mut p = policy();
    p.dedupe = Dedupe::FromCreation {
        window_ms: Some(30_000),
    };
    let mut s = service(p);
    let a = id_of(&ask(
        &mut s,
        0,
        submit("n1", "k", 1_000, ScriptOutcome::Completed),
    ));
    s.advance(20_000, &Plain);
    let again = ask(
        &mut s,
        20_000,
        submit("n1", "k", 1_000, ScriptOutcome::Completed),
    );
    assert!(
        matches!(&again, Response::Task(v) if v.id == a && v.deleted),
        "{again:?}"
    );
    assert_ne!(
        id_of(&ask(
            &mut s,
            40_000,
            submit("n1", "k", 1_000, ScriptOutcome::Completed)
        )),
        a
    );
    assert_eq!(s.truth().duplicate_submits_deduped, 1);
}

#[test]
fn an_error_result_shows_the_status_the_policy_names_and_digests_the_payload() {
    for status in [TaskStatus::Failed, TaskStatus::Completed] {
        let mut p = policy();
        p.error_result_status = status;
        let mut s = service(p);
        let a = id_of(&ask(
            &mut s,
            0,
            submit("n1", "k", 100, ScriptOutcome::Failed),
        ));
        s.advance(100, &Plain);
        let t = &s.truth().tasks[&a];
        assert_eq!((t.terminal_status, t.side_effects), (Some(status), 1));
        let digest = crate::fake::truth::payload_digest(
            &json!({"text": "n1 ok", "blocks": 1, "error": true}),
        );
        assert_eq!(t.result_digest.as_deref(), Some(digest.as_str()));
    }
}

#[test]
fn a_delayed_cancel_acknowledges_first_and_the_work_may_still_win() {
    let mut p = policy();
    p.cancel = CancelRule {
        effect: CancelEffect::Delayed {
            min_ms: 500,
            max_ms: 500,
        },
        running_work: RunningWork::Stops,
    };
    let mut s = service(p);
    let slow = id_of(&ask(
        &mut s,
        0,
        submit("n1", "a", 5_000, ScriptOutcome::Completed),
    ));
    let fast = id_of(&ask(
        &mut s,
        0,
        submit("n2", "b", 1_200, ScriptOutcome::Completed),
    ));
    assert_eq!(
        ask(&mut s, 1_000, Request::Cancel { task: slow.clone() }),
        Response::CancelAccepted
    );
    assert_eq!(
        ask(&mut s, 1_000, Request::Cancel { task: fast.clone() }),
        Response::CancelAccepted
    );
    assert!(s.cancel_pending(&slow));
    s.advance(2_000, &Plain);
    let (a, b) = (&s.truth().tasks[&slow], &s.truth().tasks[&fast]);
    assert_eq!(
        (a.terminal_status, a.work_end),
        (Some(TaskStatus::Cancelled), Some(WorkEnd::StoppedByCancel))
    );
    assert_eq!(
        (b.terminal_status, b.side_effects),
        (Some(TaskStatus::Completed), 1),
        "the work ended first"
    );
    assert_eq!(
        ask(&mut s, 2_000, Request::Cancel { task: fast }),
        Response::CancelRejected {
            status: TaskStatus::Completed
        }
    );
}

#[test]
fn answers_go_to_the_preferred_pending_round_else_the_last_delivered_and_stale_ones_are_logged() {
    let mut s = service(policy());
    let mut script = TaskScript {
        call_node: "n1".into(),
        duration_ms: 1_000,
        input_at_ms: vec![100],
        ..TaskScript::default()
    };
    let mk = |script: &TaskScript| {
        Request::Submit(Submit {
            tool: "t".into(),
            script: script.clone(),
            key: None,
            dedupe: false,
            run: RunAs::Task,
            requested_ttl_ms: None,
        })
    };
    let a = id_of(&ask(&mut s, 0, mk(&script)));
    script.call_node = "n2".into();
    let b = id_of(&ask(&mut s, 0, mk(&script)));
    s.advance(100, &Plain);
    // Shown rounds are delivered by reads.
    ask(&mut s, 110, Request::Poll { task: a.clone() });
    ask(&mut s, 120, Request::Poll { task: b.clone() });
    let item = |prefer: Option<&str>, action| AnswerItem {
        candidates: vec![(a.clone(), 1), (b.clone(), 1)],
        prefer_task: prefer.map(String::from),
        action,
        content: None,
    };
    ask(
        &mut s,
        200,
        Request::Answer {
            task: None,
            items: vec![item(Some(&a), AnswerAction::Accept)],
        },
    );
    assert_eq!(
        s.truth().tasks[&a].input_rounds[0].action,
        Some(AnswerAction::Accept)
    );
    ask(
        &mut s,
        210,
        Request::Answer {
            task: None,
            items: vec![item(None, AnswerAction::Decline)],
        },
    );
    assert_eq!(
        s.truth().tasks[&b].input_rounds[0].action,
        Some(AnswerAction::Decline),
        "b's round was the last delivered"
    );
    ask(
        &mut s,
        220,
        Request::Answer {
            task: None,
            items: vec![item(Some(&b), AnswerAction::Accept)],
        },
    );
    let stale = &s.truth().stale_input_responses;
    assert_eq!(
        (stale.len(), stale[0].task_id.as_deref()),
        (1, Some(b.as_str()))
    );
    assert_eq!(
        ask(
            &mut s,
            230,
            Request::Answer {
                task: Some("nope".into()),
                items: vec![]
            }
        ),
        Response::NotFound {
            expired: false,
            hidden: false
        }
    );
}

#[test]
fn retention_at_terminal_follows_the_policy() {
    for (at_terminal, deleted_at) in [
        (AtTerminal::Keep, 10_000),
        (AtTerminal::RestartTtl, 13_000),
        (AtTerminal::DeleteAfter(500), 3_500),
    ] {
        let mut p = policy();
        p.at_terminal = at_terminal;
        let mut s = service(p);
        let a = id_of(&ask(
            &mut s,
            0,
            submit("n1", "k", 3_000, ScriptOutcome::Completed),
        ));
        s.advance(60_000, &Plain);
        assert_eq!(
            s.truth().tasks[&a].deleted_at_ms,
            Some(deleted_at),
            "{at_terminal:?}"
        );
        assert_eq!(
            ask(&mut s, 60_000, Request::Poll { task: a }),
            Response::NotFound {
                expired: true,
                hidden: false
            }
        );
    }
}

#[test]
fn lookups_find_live_tasks_by_key_and_nodes_are_known_by_task_and_key() {
    let mut s = service(policy());
    let a = id_of(&ask(
        &mut s,
        0,
        submit("n1", "k1", 3_000, ScriptOutcome::Completed),
    ));
    assert!(
        matches!(ask(&mut s, 10, Request::Lookup { key: "k1".into() }), Response::Tasks(v) if v.len() == 1 && v[0].id == a)
    );
    assert!(
        matches!(ask(&mut s, 10, Request::Lookup { key: "k2".into() }), Response::Tasks(v) if v.is_empty())
    );
    assert_eq!(
        (s.node_of_task(&a), s.node_of_key("k1"), s.node_of_key("k2")),
        (Some("n1"), Some("n1"), None)
    );
}

/// A call run inline under a key the server deduplicates by (a task-augmented call of a tool
/// that forbids tasks, run anyway: the TS SDK) answers every later submission with the key as
/// it answered the first, whether they come while it runs or after, and runs once: a lookup by
/// key finds no task, so without this an executor's "never created" ran the tool again.
#[test]
fn an_inline_run_under_a_key_answers_later_submissions_with_the_key_and_runs_once() {
    let mut s = service(policy());
    let inline = |r: Request| match r {
        Request::Submit(mut sub) => {
            sub.run = RunAs::InlineThenRefuse;
            Request::Submit(sub)
        }
        other => other,
    };
    let first = inline(submit("n1", "k1", 3_000, ScriptOutcome::Completed));
    let call = |n| Some(CallId(n));
    let nothing = CancelFaults::default();
    assert!(s
        .handle(0, call(1), first, nothing, None, &Plain)
        .is_empty());
    // While it runs, the same key (now as a task) waits for the first answer.
    let again = submit("n1", "k1", 3_000, ScriptOutcome::Completed);
    assert!(s
        .handle(1_000, call(2), again, nothing, None, &Plain)
        .is_empty());
    let replies: Vec<(CallId, Response)> = s
        .advance(3_000, &Plain)
        .into_iter()
        .filter_map(|o| match o {
            Out::Reply(r) => Some((r.call, r.response)),
            Out::Push(_) => None,
        })
        .collect();
    assert_eq!(
        replies,
        vec![
            (CallId(1), Response::InlineRefused),
            (CallId(2), Response::InlineRefused)
        ]
    );
    // After it ended, at once.
    let late = submit("n1", "k1", 3_000, ScriptOutcome::Completed);
    assert_eq!(ask(&mut s, 5_000, late), Response::InlineRefused);
    assert_eq!(s.truth().sync_runs.len(), 1, "one run");
    assert!(s.truth().tasks.is_empty(), "no task");
    assert!(
        matches!(ask(&mut s, 6_000, Request::Lookup { key: "k1".into() }), Response::Tasks(v) if v.is_empty())
    );
}

#[test]
fn an_inline_run_keeps_its_key_for_the_window_a_task_would() {
    let mut p = policy();
    p.dedupe = Dedupe::FromCreation {
        window_ms: Some(30_000),
    };
    let mut s = service(p);
    let inline = || match submit("n1", "k1", 3_000, ScriptOutcome::Completed) {
        Request::Submit(mut sub) => {
            sub.run = RunAs::Inline;
            Request::Submit(sub)
        }
        other => other,
    };
    assert!(s
        .handle(
            0,
            Some(CallId(1)),
            inline(),
            CancelFaults::default(),
            None,
            &Plain
        )
        .is_empty());
    s.advance(3_000, &Plain);
    assert_eq!(s.truth().sync_runs.len(), 1);
    // Inside the window, the first answer again, no second run.
    let again = ask(&mut s, 20_000, inline());
    assert!(matches!(again, Response::Outcome(_)), "{again:?}");
    assert_eq!(
        s.truth().sync_runs.len(),
        1,
        "deduplicated inside the window"
    );
    // Past the window from the run's start, the key names nothing: a new run.
    assert!(s
        .handle(
            40_000,
            Some(CallId(3)),
            inline(),
            CancelFaults::default(),
            None,
            &Plain
        )
        .is_empty());
    assert_eq!(s.truth().sync_runs.len(), 2, "a new run past the window");
}

/// A TS app may never move an answered task back to `working` (the SDK leaves it to the app):
/// under that policy every other task's status stays `input_required` after its answer while
/// its work runs on to the end; the other tasks, and every task under the spec's policy, go back
/// to `working` at once.
#[test]
fn an_answered_task_stays_input_required_where_the_app_leaves_it() {
    for after_answer in [AfterAnswer::Working, AfterAnswer::AppMayLeaveInputRequired] {
        let mut s = service(Policy {
            after_answer,
            ..policy()
        });
        let mut ids = vec![];
        for node in ["n1", "n2"] {
            let script = TaskScript {
                call_node: node.into(),
                duration_ms: 1_000,
                input_at_ms: vec![100],
                ..TaskScript::default()
            };
            let submit = Request::Submit(Submit {
                tool: "t".into(),
                script,
                key: None,
                dedupe: false,
                run: RunAs::Task,
                requested_ttl_ms: None,
            });
            ids.push(id_of(&ask(&mut s, 0, submit)));
        }
        s.advance(100, &Plain);
        let mut shown = vec![];
        for id in &ids {
            ask(&mut s, 110, Request::Poll { task: id.clone() });
            let answer = Request::Answer {
                task: Some(id.clone()),
                items: vec![AnswerItem {
                    candidates: vec![(id.clone(), 1)],
                    prefer_task: Some(id.clone()),
                    action: AnswerAction::Accept,
                    content: None,
                }],
            };
            ask(&mut s, 200, answer);
            let Response::Task(view) = ask(&mut s, 300, Request::Poll { task: id.clone() }) else {
                panic!("a live task reads back");
            };
            shown.push(view.status);
        }
        let stays = after_answer == AfterAnswer::AppMayLeaveInputRequired;
        // Sequence numbers start at 1: the first task's is odd.
        let left = if stays {
            TaskStatus::InputRequired
        } else {
            TaskStatus::Working
        };
        assert_eq!(shown, [left, TaskStatus::Working], "{after_answer:?}");
        s.advance(1_200, &Plain);
        for id in &ids {
            let Response::Task(view) = ask(&mut s, 1_200, Request::Poll { task: id.clone() })
            else {
                panic!("a live task reads back");
            };
            assert!(
                view.status.is_terminal(),
                "the work ran on to its end: {:?}",
                view.status
            );
        }
    }
}

/// A restart (`server_restart`) loses every task: running work stops without its side effect,
/// an ended task's result is gone, a held read is never answered, and the new process knows no
/// id of the old one (not found as never seen, not as expired).
#[test]
fn a_restart_loses_every_task_and_aborts_running_work() {
    let mut s = service(policy());
    let slow = id_of(&ask(
        &mut s,
        0,
        submit("n1", "a", 5_000, ScriptOutcome::Completed),
    ));
    let fast = id_of(&ask(
        &mut s,
        0,
        submit("n2", "b", 500, ScriptOutcome::Completed),
    ));
    let held = s.handle(
        100,
        Some(CallId(100)),
        Request::Fetch { task: slow.clone() },
        CancelFaults::default(),
        None,
        &Plain,
    );
    assert!(held.is_empty(), "{held:?}");
    assert!(s.advance(1_000, &Plain).is_empty());
    for task in [&slow, &fast] {
        let r = ask(&mut s, 1_000, Request::Poll { task: task.clone() });
        assert_eq!(&id_of(&r), task);
    }
    let mut lost = s.restart(1_000);
    lost.sort();
    let mut both = vec![slow.clone(), fast.clone()];
    both.sort();
    assert_eq!(lost, both);
    assert!(!s.holds_a_task());
    // Past the slow task's end: no side effect, no answer to the held read.
    assert!(s.advance(20_000, &Plain).is_empty());
    let t = &s.truth().tasks[&slow];
    assert_eq!(
        (
            t.work_end,
            t.side_effects,
            t.deleted_at_ms,
            t.terminal_status
        ),
        (Some(WorkEnd::LostInRestart), 0, Some(1_000), None)
    );
    let t = &s.truth().tasks[&fast];
    assert_eq!(
        (t.side_effects, t.deleted_at_ms, t.terminal_status),
        (1, Some(1_000), Some(TaskStatus::Completed))
    );
    assert_eq!(s.truth().server_restarts_at_ms, vec![1_000]);
    for task in [&slow, &fast] {
        let r = ask(&mut s, 20_000, Request::Poll { task: task.clone() });
        assert_eq!(
            r,
            Response::NotFound {
                expired: false,
                hidden: false
            }
        );
    }
    assert_eq!(
        ask(&mut s, 20_000, Request::Lookup { key: "a".into() }),
        Response::Tasks(vec![])
    );
    let again = id_of(&ask(
        &mut s,
        20_000,
        submit("n3", "c", 500, ScriptOutcome::Completed),
    ));
    assert!(s.holds_a_task());
    let r = ask(
        &mut s,
        20_000,
        Request::Poll {
            task: again.clone(),
        },
    );
    assert_eq!(id_of(&r), again);
    let r = ask(&mut s, 20_000, Request::Poll { task: slow.clone() });
    assert_eq!(
        r,
        Response::NotFound {
            expired: false,
            hidden: false
        }
    );
}
