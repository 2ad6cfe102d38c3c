//! A readable summary of one series, built from its trace alone.

use std::collections::BTreeMap;

use toolop::record::LocalState;
use toolop::runner::Observation;

use crate::trace::{CallerAction, Trace, What};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSummary {
    pub path: Vec<LocalState>,
    pub terminal: Option<String>,
    pub reconcile: Option<String>,
    pub polls: u32,
    pub submitted_at_ms: Option<u64>,
    pub settled_at_ms: Option<u64>,
}

/// Per call node: local-state path, terminal state, polls and latency.
pub fn nodes(trace: &Trace) -> BTreeMap<String, NodeSummary> {
    let mut out: BTreeMap<String, NodeSummary> = BTreeMap::new();
    for e in &trace.events {
        match &e.what {
            What::Caller {
                action: CallerAction::Submit,
                node,
            } => {
                let n = out.entry(node.clone()).or_default();
                n.submitted_at_ms = Some(e.t_ms);
                n.path = vec![LocalState::Submitting];
            }
            What::Exec { obs, .. } => match obs {
                Observation::Moved { node, path, .. } => {
                    let n = out.entry(node.clone()).or_default();
                    n.path.extend(path.iter().skip(1).copied());
                    if path.last().is_some_and(|s| s.is_final()) {
                        n.settled_at_ms = Some(e.t_ms);
                    }
                }
                Observation::Sent { node, kind, .. } if *kind == "poll" => {
                    out.entry(node.clone()).or_default().polls += 1
                }
                Observation::Accepted { node, terminal, .. } => {
                    out.entry(node.clone()).or_default().terminal =
                        Some(terminal.name().to_string())
                }
                Observation::Reconcile { node, reason } => {
                    out.entry(node.clone()).or_default().reconcile = Some(reason.clone())
                }
                _ => {}
            },
            _ => {}
        }
    }
    out
}

pub fn render(trace: &Trace) -> String {
    let mut s = String::from("  node   terminal             polls  latency_ms  path\n");
    for (id, n) in nodes(trace) {
        let latency = match (n.submitted_at_ms, n.settled_at_ms) {
            (Some(a), Some(b)) => (b - a).to_string(),
            _ => "-".into(),
        };
        let terminal = n
            .terminal
            .clone()
            .or_else(|| {
                n.reconcile
                    .as_ref()
                    .map(|_| "UNKNOWN (reconcile)".to_string())
            })
            .unwrap_or_else(|| "(none)".into());
        let path: Vec<&str> = n.path.iter().map(|p| p.name()).collect();
        s.push_str(&format!(
            "  {id:<6} {terminal:<20} {:>5}  {latency:>10}  {}\n",
            n.polls,
            path.join(" > ")
        ));
    }
    s
}
