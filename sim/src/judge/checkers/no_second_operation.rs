//! Always: no second operation from a duplicate submission. Per call node the server started at
//! most one operation: tasks created plus tool runs without a task.

use std::collections::BTreeMap;

use super::view::{judge, View};
use super::Violation;
use crate::fake::truth::GroundTruth;
use crate::trace::Trace;

pub const NAME: &str = "no_second_operation";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    operations_per_node(v.truth)
        .into_iter()
        .filter(|(_, (tasks, runs))| tasks + runs > 1)
        .map(|(node, (tasks, runs))| Violation {
            checker: NAME,
            node: Some(node.to_string()),
            detail: format!("the server started {tasks} task(s) and {runs} synchronous run(s)"),
        })
        .collect()
}

/// Operations beyond the first, summed over call nodes (`SeriesMetrics::second_operations`).
pub fn second_operations(truth: &GroundTruth) -> u32 {
    operations_per_node(truth)
        .values()
        .map(|(tasks, runs)| (tasks + runs).saturating_sub(1))
        .sum()
}

/// node -> (tasks created, synchronous runs). The server leaves `call_node` empty when a request
/// did not say which node it was for; those cannot be attributed, so they are not counted here.
fn operations_per_node(truth: &GroundTruth) -> BTreeMap<&str, (u32, u32)> {
    let mut out: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for (node, n) in &truth.tasks_created_per_call_node {
        out.entry(node.as_str()).or_default().0 += n;
    }
    for run in &truth.sync_runs {
        out.entry(run.call_node.as_str()).or_default().1 += 1;
    }
    out.remove("");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::script::ScriptOutcome;
    use crate::judge::checkers::testkit::{all_paths, assert_clean, SETTLED};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_resubmission_that_minted_a_second_task_is_caught() {
        let mut b = all_paths();
        b.task("t-n1-again", "n1", None, None, None);
        // A sync run for a node that also got a task is a second operation too.
        b.sync_run("n2", ScriptOutcome::Completed, None);
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(second_operations(&b.truth), 2);
    }
}
