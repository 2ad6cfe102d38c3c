//! Always: an input round is answered with the answer given for it. The server's ground truth
//! says how each of its rounds was answered (action, content) and which frame carried the
//! answer; the network says when that frame left; the approval agent says which questions it
//! was asked and how it answered each, a question naming the server's task and round in the
//! server's own words. The answer a round got must be one the agent gave, before the frame
//! left, to a question naming that round:
//! - `accept`: the agent accepted such a question, and the content is the agent's content for
//!   it ([`agent_accept_content`]: successive rounds differ, so an answer forwarded to the wrong
//!   round shows);
//! - `decline`: the agent declined such a question, or the executor's approval deadline (the
//!   scenario's `approval_timeout_ms` from the first time the agent was asked, or from the
//!   start of the first commit whose record held the question, by whichever process, if that
//!   was earlier: the world may have held the commit, or its writer died before asking) had passed
//!   (the executor declines by itself then), or the world's ledger held the node final when
//!   the answer left (a node no process drives any more is declined, fail-safe);
//! - `cancel`: the agent cancelled such a question, or the caller had asked to cancel the call
//!   node (the executor answers `cancel` by itself a round asked while its cancel is pending).
//!
//! A replayed answer of an older round (the approval-replay fault) forwarded as the answer to
//! the round now asked is the bug this catches. Nothing the executor says enters: not its round
//! numbers (a request delivered again after a crash is a new round to it), not its report of
//! what it asked. Pairing by the carrying frame, not by time: an answer sent for round 1 that
//! is still in flight when the executor asks again is judged as round 1's. An answer is judged
//! for the call node it was meant for: a TS server pairs answers by JSON-RPC id, and one meant
//! for another task (whose round was gone) can land on this task's round
//! (`InputRoundTruth::answer_meant_for`); it must then be an answer to a question of that task.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::view::{cancel_asked_times, judge, sends, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::fake::truth::AnswerAction;
use crate::trace::{ApprovalAction, Question, Trace, What, WriteOutcome};

pub const NAME: &str = "input_answer_matches_round";

/// The content of the approval agent's accepted answer to the server's round `round` (schema
/// `{"ok": boolean}`): `ok` is true on odd rounds, false on even ones, so answers to successive
/// rounds differ.
pub fn agent_accept_content(round: u32) -> Value {
    json!({ "ok": round % 2 == 1 })
}

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

/// The agent's record for one node: (time, question, action), in trace order.
type AgentLog<'a> = Vec<(u64, &'a Question, ApprovalAction)>;

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    let mut agent: BTreeMap<&str, AgentLog> = BTreeMap::new();
    for e in &v.trace.events {
        if let What::Approval {
            node,
            question: Some(q),
            action,
            ..
        } = &e.what
        {
            agent
                .entry(node.as_str())
                .or_default()
                .push((e.t_ms, q, *action));
        }
    }
    // Per node, the landed ledger writes: (time, how long the world held the commit).
    let mut commits: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    // Per question, the first landed write whose record held it open: (time, hold). The
    // executor fixes the deadline when it records the question, whichever process asks later.
    let mut first_recorded: BTreeMap<&Question, (u64, u64)> = BTreeMap::new();
    // Per node, the world's ledger over time: (time, whether it then held the node final). A
    // rollback only moves the epoch on (design section 3: the new epoch takes over the in-flight
    // items of the same ledger), so a final node stays final through it (mcp_faults seed
    // 146082: a node settled at 28 s, a rollback at 33 s, and the old epoch's replica declined a
    // replayed request of the settled task at 34 s, the fail-safe answer, judged as early).
    let mut held_final: BTreeMap<&str, Vec<(u64, bool)>> = BTreeMap::new();
    for e in &v.trace.events {
        match &e.what {
            What::Ledger { write } if !matches!(write.outcome, WriteOutcome::Refused { .. }) => {
                commits
                    .entry(write.node.as_str())
                    .or_default()
                    .push((e.t_ms, write.delay_ms));
                if let Some(q) = &write.question {
                    first_recorded.entry(q).or_insert((e.t_ms, write.delay_ms));
                }
                held_final
                    .entry(write.node.as_str())
                    .or_default()
                    .push((e.t_ms, write.state.is_final()));
            }
            _ => {}
        }
    }
    let final_when = |node: &str, t: u64| {
        held_final
            .get(node)
            .and_then(|s| s.iter().rev().find(|(at, _)| *at <= t))
            .is_some_and(|(_, fin)| *fin)
    };
    let left: BTreeMap<u64, u64> = sends(v.trace)
        .filter(|f| f.exchange == ExchangeKind::Answer)
        .map(|f| (f.frame, f.t_ms))
        .collect();
    // Per node, when the caller first asked to cancel it: a round the server asks after that is
    // answered `cancel` by the executor itself.
    let cancel_asked = cancel_asked_times(v.trace);
    let empty = vec![];
    for (task_id, task) in &v.truth.tasks {
        for r in &task.input_rounds {
            let (Some(action), Some(at)) = (r.action, r.answered_at_ms) else {
                continue;
            };
            if action == AnswerAction::Error {
                continue;
            }
            let meant_for = r
                .answer_meant_for
                .as_ref()
                .and_then(|t| v.truth.tasks.get_key_value(t));
            let (q_task, node) = match meant_for {
                Some((id, t)) => (id.as_str(), t.call_node.as_str()),
                None => (task_id.as_str(), task.call_node.as_str()),
            };
            let bad = |detail: String| Violation {
                checker: NAME,
                node: Some(node.to_string()),
                detail,
            };
            let action_name = action.name();
            let what = match &r.answer_meant_for {
                Some(other) => format!("task {task_id} round {} answered {action_name} at {at} ms (an answer meant for task {other})", r.round),
                None => format!("task {task_id} round {} answered {action_name} at {at} ms", r.round),
            };
            // When the answer left the executor: the frame that carried it.
            let Some(&sent) = r.answered_by_frame.and_then(|f| left.get(&f)) else {
                out.push(bad(format!(
                    "{what}, by a frame the network never saw an executor send"
                )));
                continue;
            };
            // Questions naming the round (any round of the task the answer was meant for).
            let names =
                |q: &Question| q.task == q_task && (meant_for.is_some() || q.round == r.round);
            let log = agent.get(node).unwrap_or(&empty);
            let before: Vec<&(u64, &Question, ApprovalAction)> = log
                .iter()
                .filter(|(t, q, _)| *t <= sent && names(q))
                .collect();
            let answered = |want: ApprovalAction| before.iter().filter(move |(_, _, a)| *a == want);
            let round_words = match meant_for {
                Some(_) => format!("a question of task {q_task}"),
                None => format!("round {}", r.round),
            };
            let problem = match action {
                AnswerAction::Accept => {
                    let contents: Vec<Value> = answered(ApprovalAction::Accept)
                        .map(|(_, q, _)| agent_accept_content(q.round))
                        .collect();
                    if contents.is_empty() {
                        Some(format!("{what} (sent at {sent} ms), but the agent had not accepted {round_words}"))
                    } else if !contents.iter().any(|c| r.content.as_ref() == Some(c)) {
                        Some(format!(
                            "{what} with content {}, not the agent's answer to {round_words} ({})",
                            r.content
                                .as_ref()
                                .map_or("none".to_string(), Value::to_string),
                            contents[0]
                        ))
                    } else {
                        None
                    }
                }
                AnswerAction::Decline => {
                    let first_asked = before
                        .iter()
                        .find(|(_, _, a)| *a == ApprovalAction::Asked)
                        .map(|(t, q, _)| (*t, *q));
                    // The executor fixed its deadline when it decided to ask, before the commit
                    // that records the question; the world held that commit for `delay_ms`.
                    // That is the first commit whose record held this question, whoever wrote
                    // it: a process that recorded it and died before asking leaves its deadline
                    // to the one that asks (mcp_replicas seed 32645: recorded at 115.7 s by a
                    // replica whose commit reply was lost, asked at 138.8 s by the primary,
                    // declined at its deadline, 175.7 s). Without such a commit in view, the
                    // last commit before the ask.
                    let decided = first_asked.map(|(asked, q)| {
                        let recorded = first_recorded.get(q).filter(|(t, _)| *t <= asked);
                        recorded
                            .or_else(|| {
                                commits
                                    .get(node)
                                    .and_then(|c| c.iter().rev().find(|(t, _)| *t <= asked))
                            })
                            .map_or(asked, |(t, delay)| asked.min(t.saturating_sub(*delay)))
                    });
                    let deadline = decided.map(|t| t.saturating_add(v.config.approval_timeout_ms));
                    let declined = answered(ApprovalAction::Decline).next().is_some();
                    // The ledger already held the node final (settled, or handed to manual
                    // reconciliation while the server still held the task): no process drives
                    // it, nobody can be asked, and a decline is the fail-safe answer that
                    // authorises nothing (mcp_faults seed 6119: three false 404s sent the node
                    // to reconciliation, then its task asked round 2). Never an accept.
                    let settled = final_when(node, sent);
                    match deadline {
                        _ if declined || settled => None,
                        None => Some(format!("{what} (sent at {sent} ms), but the agent was never asked {round_words}")),
                        Some(d) if sent < d => Some(format!(
                            "{what} (sent at {sent} ms), but the agent did not decline {round_words} and the approval deadline is {d} ms"
                        )),
                        Some(_) => None,
                    }
                }
                AnswerAction::Cancel
                    if answered(ApprovalAction::Cancel).next().is_none()
                        && cancel_asked.get(node).is_none_or(|t| *t > sent) =>
                {
                    Some(format!(
                        "{what} (sent at {sent} ms), but neither the agent cancelled {round_words} nor the caller the call node"
                    ))
                }
                AnswerAction::Cancel | AnswerAction::Error => None,
            };
            out.extend(problem.map(bad));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::truth::InputRoundTruth;
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::series::faults::FaultKind;
    use crate::trace::WorldAction;
    use toolop::record::LocalState::*;
    use toolop::runner::Observation;

    fn q(task: &str, round: u32) -> Question {
        Question {
            task: task.into(),
            round,
        }
    }

    /// The agent's record: asked or answered a question of t-n1's round `round`.
    fn agent(b: &mut Tb, t: u64, node: &str, task: &str, round: u32, action: ApprovalAction) {
        b.at(t).push(What::Approval {
            node: node.into(),
            round,
            question: Some(q(task, round)),
            action,
        });
    }

    /// The answer to `round` leaves the executor at `sent` (a frame numbered by the builder)
    /// and arrives at `at`.
    fn round(
        b: &mut Tb,
        node: &str,
        n: u32,
        sent: u64,
        at: u64,
        action: &str,
        content: Option<Value>,
    ) -> InputRoundTruth {
        b.at(sent).net_out(node, ExchangeKind::Answer);
        InputRoundTruth {
            round: n,
            asked_at_ms: sent.saturating_sub(500),
            deliveries: 1,
            answered_at_ms: Some(at),
            action: Some(AnswerAction::from_word(Some(action))),
            content,
            answer_meant_for: None,
            abandoned_at_ms: None,
            answered_by_frame: Some(b.last_frame()),
        }
    }

    /// n1's task asks three rounds; the agent accepts round 1 and declines round 2, and stays
    /// silent on round 3, which the executor declines at its deadline (60 s after asking).
    fn three_rounds() -> Tb {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        agent(&mut b, 100, "n1", "t-n1", 1, ApprovalAction::Asked);
        agent(&mut b, 300, "n1", "t-n1", 1, ApprovalAction::Accept);
        agent(&mut b, 500, "n1", "t-n1", 2, ApprovalAction::Asked);
        agent(&mut b, 700, "n1", "t-n1", 2, ApprovalAction::Decline);
        agent(&mut b, 800, "n1", "t-n1", 3, ApprovalAction::Asked);
        agent(&mut b, 810, "n1", "t-n1", 3, ApprovalAction::Silent);
        let rounds = vec![
            round(
                &mut b,
                "n1",
                1,
                310,
                320,
                "accept",
                Some(agent_accept_content(1)),
            ),
            round(&mut b, "n1", 2, 710, 720, "decline", None),
            round(&mut b, "n1", 3, 60_800, 60_820, "decline", None),
        ];
        b.truth
            .tasks
            .get_mut("t-n1")
            .expect("happy path task")
            .input_rounds = rounds;
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        assert_eq!(check(&three_rounds().build(SETTLED)), vec![]);
    }

    #[test]
    fn the_agent_content_differs_between_successive_rounds() {
        assert_ne!(agent_accept_content(1), agent_accept_content(2));
        assert_eq!(agent_accept_content(1), agent_accept_content(3));
    }

    #[test]
    fn a_replayed_answer_forwarded_to_the_next_round_is_caught() {
        // Round 2 is asked; the agent's round-1 answer arrives again and is forwarded for it.
        let mut b = three_rounds();
        b.at(600)
            .fault(FaultKind::ApprovalReplay, Some("n1"), Some(InputRequired));
        agent(&mut b, 600, "n1", "t-n1", 1, ApprovalAction::ReplayAccept);
        let r = round(
            &mut b,
            "n1",
            2,
            610,
            620,
            "accept",
            Some(agent_accept_content(1)),
        );
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[1] = r;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("had not accepted round 2"), "{v:?}");
    }

    #[test]
    fn a_decline_for_a_node_the_ledger_held_final_is_the_fail_safe_answer() {
        // mcp_faults seed 6119: false 404s send n1 to manual reconciliation at 1_000 (the
        // world's ledger holds it final); its task then asks round 3, which nobody can be
        // asked about, and the executor declines it at once. Before the ledger held the node
        // final, the same decline is the executor's own. A rollback between (mcp_faults seed
        // 146082) keeps the ledger: the node is still final.
        // Round 3 answered `action` at 2_000 ms; n1 held final from `final_at`.
        let build = |final_at: u64, rollback: bool, action: &str| {
            let mut b = three_rounds();
            let mut w = build::write("n1", 1, 1, 5);
            w.state = Unknown;
            b.at(final_at).push(build::ev(w));
            if rollback {
                b.at(1_500).push(What::World {
                    action: WorldAction::Rollback {
                        incarnation: 2,
                        epoch: 2,
                    },
                });
            }
            let content = (action == "accept").then(|| agent_accept_content(3));
            let r3 = round(&mut b, "n1", 3, 2_000, 2_010, action, content);
            b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[2] = r3;
            b.build(SETTLED)
        };
        assert_eq!(check(&build(1_000, false, "decline")), vec![]);
        assert_eq!(check(&build(3_000, false, "decline")).len(), 1);
        assert_eq!(check(&build(1_000, true, "decline")), vec![]);
        assert_eq!(check(&build(3_000, true, "decline")).len(), 1);
        // An accept is never excused so.
        assert_eq!(check(&build(1_000, false, "accept")).len(), 1);
    }

    #[test]
    fn foreign_content_and_early_declines_are_caught() {
        let mut b = three_rounds();
        let rounds = &mut b.truth.tasks.get_mut("t-n1").expect("task").input_rounds;
        rounds[0].content = Some(json!({"ok": false}));
        let r3 = round(&mut b, "n1", 3, 1_000, 1_010, "decline", None);
        // Round 3 declined before its deadline although the agent stayed silent.
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[2] = r3;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].detail.contains("not the agent's answer to round 1"),
            "{v:?}"
        );
        assert!(v[1].detail.contains("did not decline round 3"), "{v:?}");
    }

    #[test]
    fn an_answer_is_paired_with_the_frame_that_carried_it_not_with_the_time_it_arrived() {
        // Canary seed 883 (481 on the old numbering): the executor sends its decline of round 1;
        // before it arrives, the executor asks again (the same server request, delivered once
        // more while the answer was in flight) and the agent accepts that second question.
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        agent(&mut b, 100, "n1", "t-n1", 1, ApprovalAction::Asked);
        agent(&mut b, 300, "n1", "t-n1", 1, ApprovalAction::Decline);
        let r1 = round(&mut b, "n1", 1, 370, 408, "decline", None);
        // The executor's report numbers the second question round 2.
        b.at(405).obs(Observation::ApprovalAsked {
            node: "n1".into(),
            round: 2,
            deadline_ms: 60_405,
        });
        agent(&mut b, 405, "n1", "t-n1", 1, ApprovalAction::Asked);
        agent(&mut b, 600, "n1", "t-n1", 1, ApprovalAction::Accept);
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds = vec![r1];
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Had the decline left after the agent accepted, the decline would be no answer of its.
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        agent(&mut b, 100, "n1", "t-n1", 1, ApprovalAction::Asked);
        agent(&mut b, 300, "n1", "t-n1", 1, ApprovalAction::Accept);
        let r1 = round(&mut b, "n1", 1, 370, 408, "decline", None);
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds = vec![r1];
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn an_answer_meant_for_another_task_is_judged_for_that_tasks_node() {
        // n2's answer to its round 1 lands on n1's round 2 (TS pairs answers by id): not n1's
        // executor's doing, and n2's agent did accept a question of n2's task.
        let mut b = three_rounds();
        b.happy_path("n2", 0);
        agent(&mut b, 900, "n2", "t-n2", 1, ApprovalAction::Asked);
        agent(&mut b, 950, "n2", "t-n2", 1, ApprovalAction::Accept);
        let mut r = round(
            &mut b,
            "n2",
            2,
            955,
            960,
            "accept",
            Some(agent_accept_content(1)),
        );
        r.answer_meant_for = Some("t-n2".into());
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[1] = r.clone();
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // Judged for n2, a wrong answer is still caught.
        r.content = Some(agent_accept_content(2));
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[1] = r;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].node.as_deref(), Some("n2"));
        assert!(v[0].detail.contains("meant for task t-n2"), "{v:?}");
    }

    #[test]
    fn an_answer_nobody_asked_for_is_caught() {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        let r = round(
            &mut b,
            "n1",
            1,
            40,
            50,
            "accept",
            Some(agent_accept_content(1)),
        );
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds = vec![r];
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("had not accepted"), "{v:?}");
        // An answer by a frame no executor sent.
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[0].answered_by_frame = Some(999);
        let v = check(&b.build(SETTLED));
        assert!(v[0].detail.contains("never saw an executor send"), "{v:?}");
    }

    /// A `cancel` nobody gave is caught; after the caller asked to cancel the node (a click or
    /// a request through the ledger), the executor answers `cancel` by itself.
    #[test]
    fn a_cancel_answer_needs_the_agent_or_the_caller_to_have_cancelled_first() {
        let build = |caller: Option<(u64, crate::trace::CallerAction)>| {
            let mut b = Tb::new();
            b.happy_path("n1", 0);
            if let Some((t, action)) = caller {
                b.at(t).caller(action, "n1");
            }
            let r = round(&mut b, "n1", 1, 400, 410, "cancel", None);
            b.truth.tasks.get_mut("t-n1").expect("task").input_rounds = vec![r];
            check(&b.build(SETTLED))
        };
        let v = build(None);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("nor the caller"), "{v:?}");
        assert_eq!(
            build(Some((300, crate::trace::CallerAction::Cancel))),
            vec![]
        );
        assert_eq!(
            build(Some((400, crate::trace::CallerAction::CancelRequest))),
            vec![]
        );
        // A click after the answer left does not excuse it.
        assert_eq!(
            build(Some((401, crate::trace::CallerAction::Cancel))).len(),
            1
        );
    }

    #[test]
    fn the_deadline_counts_from_the_start_of_a_held_commit_that_recorded_the_question() {
        // Round 3 asked at 800 ms; the executor decided to ask (and fixed its deadline) at
        // 100 ms, before a commit the world held for 700 ms landed at 800 ms. Its decline at
        // 60,200 ms is past its deadline (60,100 ms), not early.
        let build = |held_commit: bool| {
            let mut b = three_rounds();
            if held_commit {
                let mut w = crate::judge::checkers::ledger_writes::build::write("n1", 1, 1, 4);
                w.delay_ms = 700;
                b.at(800)
                    .push(crate::judge::checkers::ledger_writes::build::ev(w));
            }
            let r3 = round(&mut b, "n1", 3, 60_200, 60_220, "decline", None);
            b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[2] = r3;
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        let v = check(&build(false));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("approval deadline is 60800 ms"),
            "{v:?}"
        );
    }

    #[test]
    fn the_deadline_counts_from_the_first_commit_that_recorded_the_question_whoever_asks() {
        // Round 3 recorded at 300 ms by a process that died before asking (its commit landed);
        // another process wrote the node at 700 ms and asked at 800 ms. The deadline is the
        // recorder's, 60,300 ms (mcp_replicas seed 32645): a decline at 60,500 ms is on time,
        // one at 60,200 ms is early. Before, the deadline counted from the 700 ms write.
        let build = |declined_at: u64| {
            use crate::judge::checkers::ledger_writes::build::{ev, write};
            let mut b = three_rounds();
            let mut recorder = write("n1", 1, 1, 4);
            recorder.question = Some(q("t-n1", 3));
            b.at(300).push(ev(recorder));
            b.at(700).push(ev(write("n1", 1, 1000, 5)));
            let r3 = round(
                &mut b,
                "n1",
                3,
                declined_at,
                declined_at + 20,
                "decline",
                None,
            );
            b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[2] = r3;
            b.build(SETTLED)
        };
        assert_eq!(check(&build(60_500)), vec![]);
        let v = check(&build(60_200));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("approval deadline is 60300 ms"),
            "{v:?}"
        );
    }
}
