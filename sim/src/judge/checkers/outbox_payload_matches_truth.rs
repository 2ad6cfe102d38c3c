//! Always: what goes downstream is what the server did. Every outbox entry's terminal state and
//! payload equal the server's ground truth for that node's operation (the task its receipt
//! names, or the node's run without a task):
//! - completed: a payload whose digest (computed here, over the entry's own payload, not taken
//!   from the executor's receipt) is the digest of the result the server stored;
//! - failed: a payload; when the server stored an error result, its digest; when the tool ended
//!   in an error instead, the server's error message in it (`error.message`, the one error
//!   shape the executor hands downstream);
//! - cancelled, done without a result, rejected: no payload (a cancelled outcome may be
//!   audited, never delivered as a success).
//!
//! The terminal state must be the server's too; a rejected entry needs a server that started
//! nothing for the node. (`no_divergence` judges the receipts the same way; this judges what
//! downstream work actually reads.)

use serde_json::Value;
use toolop::ledger::OutboxEntry;
use toolop::record::TerminalState;

use super::no_divergence::{sync_terminal, task_terminal};
use super::view::{judge, node_task, View};
use super::Violation;
use crate::fake::truth::payload_digest;
use crate::trace::Trace;

pub const NAME: &str = "outbox_payload_matches_truth";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    v.ledger
        .outbox
        .iter()
        .filter_map(|e| {
            problem(v, e).map(|detail| Violation {
                checker: NAME,
                node: Some(e.call_node_id.clone()),
                detail: format!("outbox entry {}: {detail}", e.receipt_id),
            })
        })
        .collect()
}

/// What the server did for the entry's node: (terminal state, result digest, error message).
type Truth<'a> = (
    Option<TerminalState>,
    Option<&'a String>,
    Option<&'a String>,
);

fn server_side<'a>(v: &View<'a>, e: &OutboxEntry) -> Result<Option<Truth<'a>>, String> {
    let node = e.call_node_id.as_str();
    let op = v
        .ledger
        .receipts
        .iter()
        .find(|r| r.receipt_id == e.receipt_id)
        .and_then(|r| r.operation_id.as_deref());
    if let Some((_, t)) = node_task(v.truth, node, op) {
        return Ok(Some((
            t.terminal_status.and_then(task_terminal),
            t.result_digest.as_ref(),
            t.error_message.as_ref(),
        )));
    }
    if let Some(run) = v.truth.sync_runs.iter().rev().find(|s| s.call_node == node) {
        return Ok(Some((
            Some(sync_terminal(run.outcome)),
            run.result_digest.as_ref(),
            run.error_message.as_ref(),
        )));
    }
    match op {
        Some(op) => Err(format!(
            "names operation {op}, which the server never ran for the node"
        )),
        None => Ok(None),
    }
}

fn problem(v: &View, e: &OutboxEntry) -> Option<String> {
    let ours = e.terminal_state;
    let truth = match server_side(v, e) {
        Ok(t) => t,
        Err(why) => return Some(why),
    };
    let Some((theirs, digest, error)) = truth else {
        // The server started nothing: only a refusal is true.
        return (ours != TerminalState::Rejected).then(|| {
            format!(
                "{} entry, but the server started nothing for the node",
                ours.name()
            )
        });
    };
    match theirs {
        None => {
            return Some(format!(
                "{} entry, but the server's operation never ended",
                ours.name()
            ))
        }
        Some(t) if t != ours => {
            return Some(format!(
                "{} entry, but the server's operation ended {}",
                ours.name(),
                t.name()
            ))
        }
        Some(_) => {}
    }
    let payload = e.payload.as_ref();
    match (ours, payload) {
        (TerminalState::Completed | TerminalState::Failed, None) => Some(format!(
            "{} entry without a payload, but the server's operation ended {0} with {}",
            ours.name(),
            match (digest, error) {
                (Some(d), _) => format!("result {d}"),
                (None, Some(m)) => format!("error {m:?}"),
                (None, None) => "an outcome".into(),
            }
        )),
        (TerminalState::Completed | TerminalState::Failed, Some(p)) => {
            let got = payload_digest(p);
            match (digest, error) {
                (Some(d), _) if *d != got => Some(format!(
                    "{} payload digest {got}, the server's result is {d}",
                    ours.name()
                )),
                (None, Some(m))
                    if p.pointer("/error/message").and_then(Value::as_str) != Some(m) =>
                {
                    Some(format!("failed payload {p}, the server's error is {m:?}"))
                }
                _ => None,
            }
        }
        (_, Some(p)) => Some(format!(
            "{} entry with a payload ({p}): only completed and failed outcomes carry one",
            ours.name()
        )),
        (_, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::script::ScriptOutcome;
    use crate::fake::truth::TaskStatus;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};
    use serde_json::json;

    /// n1 completed with the payload whose digest the server stored.
    fn completed() -> Tb {
        let mut b = happy("n1", 0);
        let payload = json!({"content": [{"type": "text", "text": "r"}]});
        b.truth.tasks.get_mut("t-n1").expect("task").result_digest = Some(payload_digest(&payload));
        b.ledger.outbox[0].payload = Some(payload);
        b
    }

    /// n1 failed with the tool's error message.
    fn failed() -> Tb {
        let mut b = happy("n1", 0);
        let t = b.truth.tasks.get_mut("t-n1").expect("task");
        t.terminal_status = Some(TaskStatus::Failed);
        t.result_digest = None;
        t.error_message = Some("disk full".into());
        b.ledger.receipts[0].terminal_state = TerminalState::Failed;
        b.ledger.outbox[0].terminal_state = TerminalState::Failed;
        b.ledger.outbox[0].payload =
            Some(json!({"error": {"code": -32000, "message": "disk full"}}));
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        assert_eq!(check(&completed().build(SETTLED)), vec![]);
        assert_eq!(check(&failed().build(SETTLED)), vec![]);
    }

    #[test]
    fn a_failed_outcome_without_its_payload_is_caught() {
        let mut b = failed();
        b.ledger.outbox[0].payload = None;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("without a payload"), "{v:?}");
        let mut b = failed();
        b.ledger.outbox[0].payload = Some(json!({"error": {"message": "all fine"}}));
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_payload_the_executor_vouches_for_but_the_server_never_sent_is_caught() {
        // The receipt's digest agrees with the server; the payload downstream reads does not.
        let mut b = completed();
        b.ledger.receipts[0].result_digest = b
            .truth
            .tasks
            .get("t-n1")
            .and_then(|t| t.result_digest.clone());
        b.ledger.outbox[0].payload = Some(json!({"content": []}));
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("payload digest"), "{v:?}");
    }

    #[test]
    fn payloads_on_cancelled_or_wrong_terminal_states_are_caught() {
        let mut b = Tb::new();
        b.cancel_path("n2", 0);
        b.ledger.outbox[0].payload = Some(json!({"late": true}));
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        let mut b = completed();
        b.truth.tasks.get_mut("t-n1").expect("task").terminal_status = Some(TaskStatus::Cancelled);
        let v = check(&b.build(SETTLED));
        assert!(v[0].detail.contains("ended cancelled"), "{v:?}");
        let mut b = Tb::new();
        b.reject_path("n4", 0)
            .sync_run("n4", ScriptOutcome::Completed, None);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
