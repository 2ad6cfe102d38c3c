//! `toolop status`, `toolop reconcile` and `toolop cancel`: reads of the ledger, and the two
//! writes an operator makes (a cancel click, a reconciliation decision).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::store::{unix_ms, LedgerStore, Resolution};
use super::{Failure, ReconcileAction, EXIT_COMPLETED};
use crate::ledger::{OutboxEntry, Receipt};
use crate::record::{ProtocolStatus, ToolOperation};

pub fn status_name(s: ProtocolStatus) -> String {
    s.name().to_string()
}

/// The text blocks of a tool result, or the JSON when it has none.
pub fn payload_text(payload: &Value) -> String {
    let texts: Vec<&str> = payload
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if texts.is_empty() {
        payload.to_string()
    } else {
        texts.join("\n")
    }
}

pub fn node_line(
    id: &str,
    rec: Option<&ToolOperation>,
    receipt: Option<&Receipt>,
    outbox: Option<&OutboxEntry>,
) -> String {
    let Some(rec) = rec else {
        return format!("{id}: not submitted");
    };
    let outcome = match receipt {
        Some(r) => r.terminal_state.name().to_string(),
        None => "no receipt".into(),
    };
    let tool_error = outbox
        .and_then(|o| o.payload.as_ref())
        .and_then(|p| p.get("isError"))
        .and_then(Value::as_bool)
        == Some(true);
    let mut line = format!(
        "{id}: {outcome}{} ({})",
        if tool_error {
            ", tool reported an error"
        } else {
            ""
        },
        rec.local_state
    );
    if let Some(op) = &rec.operation_id {
        line.push_str(&format!(" operation={op}"));
    }
    line.push_str(&format!(" polls={}", rec.poll_cursor.polls));
    if let Some(reason) = &rec.unknown_reason {
        line.push_str(&format!("\n  manual reconciliation: {reason}"));
    }
    line
}

pub fn node_json(
    rec: Option<&ToolOperation>,
    receipt: Option<&Receipt>,
    outbox: Option<&OutboxEntry>,
    exit_code: u8,
    id: &str,
) -> Value {
    json!({
        "call_node": id,
        "local_state": rec.map(|r| r.local_state.name()),
        "protocol_status": rec.and_then(|r| r.last_server_status).map(status_name),
        "operation_id": rec.and_then(|r| r.operation_id.clone()),
        "polls": rec.map(|r| r.poll_cursor.polls),
        "epoch": rec.map(|r| r.execution_epoch),
        "receipt": receipt,
        "payload": outbox.and_then(|o| o.payload.clone()),
        "exit_code": exit_code,
    })
}

pub fn status(store: &LedgerStore, node: Option<&str>, json: bool) -> Result<u8, Failure> {
    let targets = store.targets()?;
    let records: Vec<ToolOperation> = match node {
        Some(id) => vec![store.with(|l| l.by_call_node(id))?.ok_or_else(|| {
            Failure::usage(format!("no call node {id} in {}", store.path().display()))
        })?],
        None => store.with(|l| l.records())?,
    };
    let receipts: BTreeMap<String, Receipt> = store
        .with(|l| l.receipts())?
        .into_iter()
        .map(|r| (r.call_node_id.clone(), r))
        .collect();
    let outboxes: BTreeMap<String, OutboxEntry> = match node {
        Some(id) => store
            .with(|l| l.outbox_entry(id))?
            .into_iter()
            .map(|o| (o.call_node_id.clone(), o))
            .collect(),
        None => store
            .with(|l| l.outbox())?
            .into_iter()
            .map(|o| (o.call_node_id.clone(), o))
            .collect(),
    };
    let mut rows = Vec::new();
    for r in &records {
        let receipt = receipts.get(&r.call_node_id);
        let outbox = outboxes.get(&r.call_node_id);
        let code = super::report::exit_code(Some(r), receipt, outbox);
        let mut v = node_json(Some(r), receipt, outbox, code, &r.call_node_id);
        v["server"] = json!(targets.get(&r.call_node_id).map(|t| t.describe()));
        v["tool"] = json!(r.tool_name);
        v["submission_key"] = json!(r.submission_key);
        v["cancel_generation"] = json!(r.cancel_generation);
        v["unknown_reason"] = json!(r.unknown_reason);
        rows.push(v);
    }
    if json {
        println!("{}", json!({ "call_nodes": rows }));
        return Ok(EXIT_COMPLETED);
    }
    if rows.is_empty() {
        println!("no call nodes in {}", store.path().display());
        return Ok(EXIT_COMPLETED);
    }
    println!(
        "{:<36} {:<20} {:<15} {:>5} {:>5} {:<10} SERVER",
        "CALL NODE", "LOCAL STATE", "PROTOCOL", "POLLS", "EPOCH", "RECEIPT"
    );
    for v in &rows {
        let s = |k: &str| v[k].as_str().unwrap_or("-").to_string();
        let receipt = v["receipt"]["terminal_state"].as_str().unwrap_or("-");
        println!(
            "{:<36} {:<20} {:<15} {:>5} {:>5} {:<10} {}",
            s("call_node"),
            s("local_state"),
            s("protocol_status"),
            v["polls"].as_u64().unwrap_or(0),
            v["epoch"].as_u64().unwrap_or(0),
            receipt,
            s("server")
        );
    }
    if let (Some(r), Some(v)) = (records.first(), rows.first()) {
        if node.is_some() {
            println!(
                "tool {} key {} operation {} cancel generation {}",
                r.tool_name,
                r.submission_key,
                r.operation_id.as_deref().unwrap_or("-"),
                r.cancel_generation
            );
            if let Some(p) = v["payload"].as_object() {
                println!("{}", payload_text(&Value::Object(p.clone())));
            }
        }
    }
    Ok(EXIT_COMPLETED)
}

const OUTCOMES: [&str; 4] = ["completed", "failed", "cancelled", "never-ran"];

pub fn reconcile(store: &LedgerStore, action: ReconcileAction, json: bool) -> Result<u8, Failure> {
    let resolutions = store.resolutions()?;
    let (queue, effects) =
        store.with(|l| Ok((l.reconciliation_queue()?, l.effect_reconciliations()?)))?;
    match action {
        ReconcileAction::List => {
            let open: Vec<_> = queue
                .iter()
                .filter(|i| !resolutions.contains_key(&i.call_node_id))
                .collect();
            let open_effects: Vec<_> = effects
                .iter()
                .filter(|i| !resolutions.contains_key(&i.call_node_id))
                .collect();
            if json {
                println!(
                    "{}",
                    json!({ "reconciliation_queue": open, "effect_reconciliations": open_effects })
                );
            } else if open.is_empty() && open_effects.is_empty() {
                println!("nothing to reconcile");
            } else {
                for i in open {
                    println!(
                        "{} unknown outcome: operation {} key {}: {}",
                        i.call_node_id,
                        i.operation_id.as_deref().unwrap_or("-"),
                        i.submission_key,
                        i.reason
                    );
                }
                for e in open_effects {
                    println!(
                        "{} effect after a confirmed cancel: operation {}: {}",
                        e.call_node_id,
                        e.operation_id.as_deref().unwrap_or("-"),
                        e.reason
                    );
                }
            }
            Ok(EXIT_COMPLETED)
        }
        ReconcileAction::Show { node } => {
            let items: Vec<_> = queue.iter().filter(|i| i.call_node_id == node).collect();
            let eff: Vec<_> = effects.iter().filter(|i| i.call_node_id == node).collect();
            if items.is_empty() && eff.is_empty() {
                return Err(Failure::usage(format!(
                    "{node} is not in manual reconciliation"
                )));
            }
            let target = store.targets()?.get(&node).map(|t| t.describe());
            let resolution = resolutions.get(&node);
            if json {
                println!(
                    "{}",
                    json!({ "call_node": node, "server": target, "reconciliation_queue": items, "effect_reconciliations": eff, "resolution": resolution })
                );
            } else {
                println!(
                    "{node} on {}",
                    target.unwrap_or_else(|| "(unknown server)".into())
                );
                for i in items {
                    println!(
                        "  unknown outcome: operation {} key {}: {}",
                        i.operation_id.as_deref().unwrap_or("-"),
                        i.submission_key,
                        i.reason
                    );
                }
                for e in eff {
                    println!(
                        "  effect after cancel: operation {}: {}",
                        e.operation_id.as_deref().unwrap_or("-"),
                        e.reason
                    );
                }
                match resolution {
                    Some(r) => println!("  resolved: {} {}", r.outcome, r.note),
                    None => println!("  unresolved"),
                }
            }
            Ok(EXIT_COMPLETED)
        }
        ReconcileAction::Resolve {
            node,
            outcome,
            note,
        } => {
            if !OUTCOMES.contains(&outcome.as_str()) {
                return Err(Failure::usage(format!(
                    "--outcome \"{outcome}\": expected one of {}",
                    OUTCOMES.join(", ")
                )));
            }
            if !queue.iter().any(|i| i.call_node_id == node)
                && !effects.iter().any(|e| e.call_node_id == node)
            {
                return Err(Failure::usage(format!(
                    "{node} is not in manual reconciliation"
                )));
            }
            store.resolve(&Resolution {
                call_node_id: node.clone(),
                outcome,
                note,
                at_unix_ms: unix_ms(),
            })?;
            if !json {
                println!("{node}: resolution recorded");
            }
            Ok(EXIT_COMPLETED)
        }
    }
}

pub fn cancel(store: &LedgerStore, node: &str, json: bool) -> Result<u8, Failure> {
    let Some(rec) = store.with(|l| l.by_call_node(node))? else {
        return Err(Failure::usage(format!(
            "no call node {node} in {}",
            store.path().display()
        )));
    };
    if rec.local_state.is_final() {
        if !json {
            println!(
                "{node} is already final ({}): nothing to cancel",
                rec.local_state
            );
        }
        return Ok(EXIT_COMPLETED);
    }
    let now_ms = unix_ms().saturating_sub(store.origin_unix_ms());
    store.with(|l| l.request_cancel(node, now_ms))?;
    if json {
        println!("{}", json!({ "call_node": node, "cancel_requested": true }));
    } else {
        println!("cancel requested for {node}; the executor running it sends it (or `toolop resume` will)");
    }
    Ok(EXIT_COMPLETED)
}
