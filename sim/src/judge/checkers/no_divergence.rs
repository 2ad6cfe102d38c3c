//! Always: the accepted terminal state equals the server's ground truth. One violation per
//! receipt that disagrees; `SeriesMetrics::divergences` is their count.
//! - A receipt naming an operation: that task is this node's and its first terminal status is
//!   the receipt's (a task that never ended, or is missing, while the receipt says it ended, diverges).
//! - A rejected receipt: the server started nothing for the node, neither a task nor a tool run
//!   without one (a call whose tool ran and was then refused, or whose outcome was left open,
//!   is not a refusal: the tool ran).
//! - A synchronous receipt (no operation, not rejected): the node's synchronous run ended the same way.

use toolop::ledger::Receipt;
use toolop::record::TerminalState;

use super::view::{judge, View};
use super::Violation;
use crate::fake::script::ScriptOutcome;
use crate::fake::truth::TaskStatus;
use crate::trace::Trace;

pub const NAME: &str = "no_divergence";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    v.ledger
        .receipts
        .iter()
        .filter_map(|r| {
            divergence(v, r).map(|detail| Violation {
                checker: NAME,
                node: Some(r.call_node_id.clone()),
                detail,
            })
        })
        .collect()
}

pub fn task_terminal(s: TaskStatus) -> Option<TerminalState> {
    match s {
        TaskStatus::Completed => Some(TerminalState::Completed),
        TaskStatus::Failed => Some(TerminalState::Failed),
        TaskStatus::Cancelled => Some(TerminalState::Cancelled),
        TaskStatus::DoneWithoutResult => Some(TerminalState::DoneWithoutResult),
        TaskStatus::Working | TaskStatus::InputRequired => None,
    }
}

pub fn sync_terminal(o: ScriptOutcome) -> TerminalState {
    match o {
        // The MCP fake runs a done-without-result script like a completed one.
        ScriptOutcome::Completed | ScriptOutcome::DoneWithoutResult => TerminalState::Completed,
        // A result with isError and a JSON-RPC error both end the call failed.
        ScriptOutcome::Failed | ScriptOutcome::ToolError => TerminalState::Failed,
    }
}

fn divergence(v: &View, r: &Receipt) -> Option<String> {
    let node = r.call_node_id.as_str();
    let ours = r.terminal_state.name();
    if r.terminal_state == TerminalState::Rejected {
        let created = v
            .truth
            .tasks_created_per_call_node
            .get(node)
            .copied()
            .unwrap_or(0);
        let created = created.max(
            v.truth
                .tasks
                .values()
                .filter(|t| t.call_node == node)
                .count() as u32,
        );
        let runs = v
            .truth
            .sync_runs
            .iter()
            .filter(|s| s.call_node == node)
            .count();
        return match (created, runs) {
            (0, 0) => None,
            (0, _) => Some(format!(
                "rejected receipt, but the server ran the tool {runs} time(s) without a task"
            )),
            _ => Some(format!(
                "rejected receipt, but the server created {created} task(s)"
            )),
        };
    }
    let Some(op) = &r.operation_id else {
        let Some(run) = v.truth.sync_runs.iter().rev().find(|s| s.call_node == node) else {
            return Some(format!(
                "synchronous {ours} receipt, but the server ran nothing synchronously"
            ));
        };
        let theirs = sync_terminal(run.outcome);
        return (theirs != r.terminal_state)
            .then(|| format!("synchronous receipt {ours}, server run {}", theirs.name()));
    };
    let Some(task) = v.truth.tasks.get(op) else {
        return Some(format!(
            "{ours} receipt for operation {op}, which the server never created"
        ));
    };
    if task.call_node != node {
        return Some(format!(
            "{ours} receipt for operation {op}, which belongs to call node {}",
            task.call_node
        ));
    }
    match task.terminal_status.and_then(task_terminal) {
        None => Some(format!(
            "{ours} receipt, but task {op} never ended (status {})",
            task.status.as_str()
        )),
        Some(theirs) if theirs != r.terminal_state => Some(format!(
            "receipt {ours}, server task {op} {}",
            theirs.name()
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, Tb, SETTLED};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_cancel_receipt_for_a_task_that_completed_is_caught() {
        // Completion and cancel raced; the server completed first.
        let mut b = Tb::new();
        b.cancel_path("n1", 0);
        if let Some(t) = b.truth.tasks.get_mut("t-n1") {
            t.terminal_status = Some(TaskStatus::Completed);
        }
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail
                .contains("receipt cancelled, server task t-n1 completed"),
            "{v:?}"
        );
    }

    #[test]
    fn a_receipt_for_a_task_still_running_or_of_another_node_is_caught() {
        let mut b = happy("n1", 0);
        b.happy_path("n2", 0);
        if let Some(t) = b.truth.tasks.get_mut("t-n1") {
            t.terminal_status = None;
        }
        b.ledger.receipts[1].operation_id = Some("t-n1".into());
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 2, "{v:?}");
    }

    #[test]
    fn a_rejection_after_the_server_created_a_task_is_caught() {
        let mut b = Tb::new();
        b.reject_path("n1", 0).task("t-n1", "n1", None, None, None);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_rejection_of_a_call_whose_tool_ran_is_caught() {
        // The TS SDK runs a forbidden tool called with `task`, then refuses the call: an
        // outcome left open read as a refusal.
        let mut b = Tb::new();
        b.reject_path("n1", 0)
            .sync_run("n1", ScriptOutcome::Completed, None);
        b.truth.sync_runs[0].kind = crate::fake::truth::SyncRunKind::ForbiddenRunAnyway;
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("ran the tool"), "{v:?}");
    }

    #[test]
    fn a_synchronous_receipt_is_judged_by_its_run() {
        let mut b = Tb::new();
        b.sync_path("n1", 0);
        b.truth.sync_runs[0].outcome = ScriptOutcome::ToolError;
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        b.truth.sync_runs.clear();
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }
}
