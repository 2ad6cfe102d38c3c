//! Always: a call the executor is configured to run is made. A call node whose tool forbids
//! tasks but publishes a synchronous bound, with the executor told to run such tools
//! synchronously (`executor.no_task_support = "run_sync"`), is never refused by the executor
//! itself: a `rejected` receipt in the store needs the server to have been asked (a submission
//! on the network, or a call of the node in the server's truth: the server's refusal).
//! A local refusal loses a call the operator configured to run. Judged from the store's receipts,
//! the frames the network carried and the server's truth, against the scenario's tools
//! (`Begin`'s `sync_tools`), never from the executor's report.

use std::collections::BTreeSet;

use super::view::{judge, sends, store_facts, View};
use super::Violation;
use crate::fake::codec::ExchangeKind;
use crate::trace::{StoreFact, Trace};
use toolop::record::TerminalState;

pub const NAME: &str = "runnable_call_not_refused";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    if v.config.sync_tools.is_empty() {
        return vec![];
    }
    // Asked the server: a submission the network attributed to the node, or any call of the
    // node the server's truth holds (a refused call's frame names no node on the network).
    let t = v.truth;
    let mut submitted: BTreeSet<&str> = sends(v.trace)
        .filter(|s| s.exchange == ExchangeKind::Submit)
        .filter_map(|s| s.node)
        .collect();
    submitted.extend(t.sync_runs.iter().map(|r| r.call_node.as_str()));
    submitted.extend(t.tasks.values().map(|k| k.call_node.as_str()));
    submitted.extend(t.tasks_created_per_call_node.keys().map(String::as_str));
    submitted.extend(t.forbidden_task_calls.iter().map(|c| c.call_node.as_str()));
    store_facts(v.trace)
        .into_iter()
        .filter(|(_, (_, fact))| {
            *fact
                == StoreFact::Receipt {
                    terminal: TerminalState::Rejected,
                }
        })
        .filter(|(node, _)| !submitted.contains(node.as_str()))
        .filter_map(|(node, _)| {
            let tool = v.tool_of(&node)?;
            v.config.sync_tools.iter().any(|t| t == tool).then(|| Violation {
                checker: NAME,
                node: Some(node.clone()),
                detail: format!(
                    "the executor refused the call of tool {tool} itself, without asking the server, though it is configured to run the tool synchronously within its published bound"
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};

    /// n1 (tool "tool", which the executor may run synchronously) ends with a rejected receipt;
    /// `asked`: a submission for it went out first.
    fn rejected(asked: bool) -> Tb {
        let mut b = Tb::new();
        b.config.sync_tools = vec!["tool".into()];
        b.at(0).submit("n1");
        if asked {
            b.sent("n1", "submit");
        }
        b.at(50).accepted("n1", TerminalState::Rejected, None);
        b
    }

    #[test]
    fn clean_traces_pass() {
        assert_clean(check);
        // The server refused it: the executor asked.
        assert_eq!(check(&rejected(true).build(SETTLED)), vec![]);
        // A tool the executor may not run synchronously may be refused locally.
        let mut b = rejected(false);
        b.config.sync_tools.clear();
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_call_the_server_holds_was_asked_for() {
        // The server refused a task-augmented call (its frame names no node on the network).
        let mut b = rejected(false);
        b.truth
            .forbidden_task_calls
            .push(crate::fake::truth::ForbiddenTaskCall {
                call_node: "n1".into(),
                tool: "tool".into(),
                ran: false,
            });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_local_refusal_of_a_runnable_call_is_caught() {
        let v = check(&rejected(false).build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("refused the call of tool tool itself"),
            "{v:?}"
        );
    }
}
