//! Always: an input round is answered with the answer given for it. The server's ground truth
//! says how each of its rounds was answered (action, content, time); the trace says which round
//! the executor had put to the approval agent when that answer reached the server (its last
//! `approval_asked` for the node before then), and how the agent answered that round.
//! - `accept`: the agent accepted that round, and the content is the agent's content for it
//!   ([`agent_accept_content`]: successive rounds differ, so an answer forwarded to the wrong
//!   round shows).
//! - `decline`: the agent declined that round, or the round's approval deadline had passed (the
//!   executor declines by itself then).
//! - `cancel`: the agent cancelled that round.
//!
//! A replayed answer of an older round (the approval-replay fault) forwarded as the answer to
//! the round now asked is the bug this catches. Rounds are matched by time, not by number: the
//! executor numbers the rounds it is asked (a request delivered again after a crash is a new
//! round to it), the server the rounds it asks. An answer is judged for the call node it was
//! meant for: a TS server pairs answers by JSON-RPC id, and one meant for another task (whose
//! round was gone) can land on this task's round (`InputRoundTruth::answer_meant_for`).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use toolop::runner::Observation;

use super::view::{judge, observations, View};
use super::Violation;
use crate::fake::truth::AnswerAction;
use crate::trace::{ApprovalAction, Trace, What};

pub const NAME: &str = "input_answer_matches_round";

/// The content of the approval agent's accepted answer to `round` (schema `{"ok": boolean}`):
/// `ok` is true on odd rounds, false on even ones, so answers to successive rounds differ.
pub fn agent_accept_content(round: u32) -> Value {
    json!({ "ok": round % 2 == 1 })
}

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    let mut out = vec![];
    // Per node: (time, round, deadline) of every approval question, in trace order.
    let mut asked: BTreeMap<&str, Vec<(u64, u32, u64)>> = BTreeMap::new();
    for (t, _, obs) in observations(v.trace) {
        if let Observation::ApprovalAsked {
            node,
            round,
            deadline_ms,
        } = obs
        {
            asked
                .entry(node.as_str())
                .or_default()
                .push((t, *round, *deadline_ms));
        }
    }
    // Per (node, round): (time, action) of the agent's answers (replays are not answers).
    let mut given: BTreeMap<(&str, u32), Vec<(u64, ApprovalAction)>> = BTreeMap::new();
    for e in &v.trace.events {
        if let What::Approval {
            node,
            round,
            action,
        } = &e.what
        {
            given
                .entry((node.as_str(), *round))
                .or_default()
                .push((e.t_ms, *action));
        }
    }
    for (task_id, task) in &v.truth.tasks {
        for r in &task.input_rounds {
            let (Some(action), Some(at)) = (r.action, r.answered_at_ms) else {
                continue;
            };
            let meant_for = r
                .answer_meant_for
                .as_ref()
                .and_then(|t| v.truth.tasks.get(t));
            let node = meant_for.unwrap_or(task).call_node.as_str();
            if action == AnswerAction::Error {
                continue;
            }
            let action_name = action.name();
            let bad = |detail: String| Violation {
                checker: NAME,
                node: Some(node.to_string()),
                detail,
            };
            let what = match &r.answer_meant_for {
                Some(other) => format!("task {task_id} round {} answered {action_name} at {at} ms (an answer meant for task {other})", r.round),
                None => format!("task {task_id} round {} answered {action_name} at {at} ms", r.round),
            };
            let Some(&(_, round, deadline_ms)) = asked
                .get(node)
                .and_then(|a| a.iter().rev().find(|(t, _, _)| *t <= at))
            else {
                out.push(bad(format!(
                    "{what}, but the executor never asked for approval"
                )));
                continue;
            };
            let agent = |want: ApprovalAction| {
                given
                    .get(&(node, round))
                    .is_some_and(|g| g.iter().any(|(t, a)| *t <= at && *a == want))
            };
            match action {
                AnswerAction::Accept if !agent(ApprovalAction::Accept) => {
                    out.push(bad(format!("{what}, but the agent did not accept round {round} (the round then asked)")))
                }
                AnswerAction::Accept if r.content.as_ref() != Some(&agent_accept_content(round)) => out.push(bad(format!(
                    "{what} with content {}, not the agent's answer to round {round} ({})",
                    r.content.as_ref().map_or("none".to_string(), Value::to_string),
                    agent_accept_content(round)
                ))),
                AnswerAction::Decline if !agent(ApprovalAction::Decline) && at < deadline_ms => out.push(bad(format!(
                    "{what}, but the agent did not decline round {round} and its deadline is {deadline_ms} ms"
                ))),
                AnswerAction::Cancel if !agent(ApprovalAction::Cancel) => out.push(bad(format!("{what}, but the agent did not cancel round {round}"))),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::truth::InputRoundTruth;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::series::faults::FaultKind;
    use toolop::record::LocalState::*;

    fn round(n: u32, at: u64, action: &str, content: Option<Value>) -> InputRoundTruth {
        InputRoundTruth {
            round: n,
            asked_at_ms: at.saturating_sub(500),
            deliveries: 1,
            answered_at_ms: Some(at),
            action: Some(crate::fake::truth::AnswerAction::from_word(Some(action))),
            content,
            answer_meant_for: None,
            abandoned_at_ms: None,
        }
    }

    /// n1 asks two rounds; the agent accepts round 1 and declines round 2 (silent on a third
    /// the executor declines at its deadline).
    fn two_rounds() -> Tb {
        let mut b = Tb::new();
        b.happy_path("n1", 0);
        b.at(100).obs(Observation::ApprovalAsked {
            node: "n1".into(),
            round: 1,
            deadline_ms: 60_100,
        });
        b.at(300).push(What::Approval {
            node: "n1".into(),
            round: 1,
            action: crate::trace::ApprovalAction::Accept,
        });
        b.at(500).obs(Observation::ApprovalAsked {
            node: "n1".into(),
            round: 2,
            deadline_ms: 60_500,
        });
        b.at(700).push(What::Approval {
            node: "n1".into(),
            round: 2,
            action: crate::trace::ApprovalAction::Decline,
        });
        b.at(800).obs(Observation::ApprovalAsked {
            node: "n1".into(),
            round: 3,
            deadline_ms: 60_800,
        });
        b.at(810).push(What::Approval {
            node: "n1".into(),
            round: 3,
            action: crate::trace::ApprovalAction::Silent,
        });
        let rounds = vec![
            round(1, 320, "accept", Some(agent_accept_content(1))),
            round(2, 720, "decline", None),
            round(3, 60_820, "decline", None),
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
        assert_eq!(check(&two_rounds().build(SETTLED)), vec![]);
    }

    #[test]
    fn the_agent_content_differs_between_successive_rounds() {
        assert_ne!(agent_accept_content(1), agent_accept_content(2));
        assert_eq!(agent_accept_content(1), agent_accept_content(3));
    }

    #[test]
    fn a_replayed_answer_forwarded_to_the_next_round_is_caught() {
        // Round 2 is asked; the agent's round-1 answer arrives again and is forwarded for it.
        let mut b = two_rounds();
        b.at(600)
            .fault(FaultKind::ApprovalReplay, Some("n1"), Some(InputRequired));
        b.push(What::Approval {
            node: "n1".into(),
            round: 1,
            action: crate::trace::ApprovalAction::ReplayAccept,
        });
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds[1] =
            round(2, 620, "accept", Some(agent_accept_content(1)));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("did not accept round 2"), "{v:?}");
    }

    #[test]
    fn foreign_content_and_early_declines_are_caught() {
        let mut b = two_rounds();
        let rounds = &mut b.truth.tasks.get_mut("t-n1").expect("task").input_rounds;
        rounds[0].content = Some(json!({"ok": false}));
        // Round 3 declined before its deadline although the agent stayed silent.
        rounds[2].answered_at_ms = Some(1_000);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].detail.contains("not the agent's answer to round 1"),
            "{v:?}"
        );
        assert!(v[1].detail.contains("did not decline round 3"), "{v:?}");
    }

    #[test]
    fn an_answer_meant_for_another_task_is_judged_for_that_tasks_node() {
        // n2's answer to its round 1 lands on n1's round 2 (TS pairs answers by id): not n1's
        // executor's doing, and n2's executor did ask round 1.
        let mut b = two_rounds();
        b.happy_path("n2", 0);
        b.at(900).obs(Observation::ApprovalAsked {
            node: "n2".into(),
            round: 1,
            deadline_ms: 60_900,
        });
        b.at(950).push(What::Approval {
            node: "n2".into(),
            round: 1,
            action: crate::trace::ApprovalAction::Accept,
        });
        let mut r = round(2, 960, "accept", Some(agent_accept_content(1)));
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
        b.truth.tasks.get_mut("t-n1").expect("task").input_rounds =
            vec![round(1, 50, "accept", Some(agent_accept_content(1)))];
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("never asked"), "{v:?}");
    }
}
