//! Always: the executor asks for a task only where the server listed one. A `tools/call` is
//! task-augmented only for a tool whose descriptor, as the server listed it (`tools/list`),
//! allows tasks. Otherwise the server runs the tool and then refuses the call (the TS SDK: the
//! tool ran, and the executor is told it has no task) or refuses it outright (the Python SDK, the
//! spec): either way a call the executor could have run synchronously, within the tool's
//! published bound, is lost or handed to a person. Judged from the server's ground truth (the
//! calls it received), never from the executor's report. A tool redeployed without task support
//! after the executor listed it (`tool_redeployed`) is the server's change, not the executor's
//! mistake: the server does not count those.

use super::view::{judge, View};
use super::Violation;
use crate::trace::Trace;

pub const NAME: &str = "task_calls_only_where_listed";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    v.truth
        .forbidden_task_calls
        .iter()
        .map(|c| Violation {
            checker: NAME,
            node: Some(c.call_node.clone()),
            detail: format!(
                "the executor sent a task-augmented call of tool {}, whose descriptor forbids tasks; the server {}",
                c.tool,
                if c.ran {
                    "ran the tool and then refused the call"
                } else {
                    "refused it"
                }
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::truth::ForbiddenTaskCall;
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
    }

    #[test]
    fn a_task_call_of_a_tool_that_forbids_tasks_is_caught() {
        let mut b = happy("n1", 0);
        b.truth.forbidden_task_calls.push(ForbiddenTaskCall {
            call_node: "n1".into(),
            tool: "echo".into(),
            ran: true,
        });
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail
                .contains("tool echo, whose descriptor forbids tasks; the server ran the tool"),
            "{v:?}"
        );
    }
}
