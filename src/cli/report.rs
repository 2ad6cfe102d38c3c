//! What `toolop call` and `toolop resume` print when they are done, and the exit code: each
//! call node's outcome as its record, receipt and outbox entry say, plus what this process
//! learned that the ledger does not say (a refusal before sending, a fence by a newer epoch).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use super::store::LedgerStore;
use super::{Failure, EXIT_COMPLETED, EXIT_FAILED, EXIT_RECONCILE, EXIT_UNFINISHED};
use crate::ledger::{OutboxEntry, Receipt};
use crate::record::{LocalState, TerminalState, ToolOperation};

/// What this process learned that the records do not say, per call node, for the outcome
/// report: why a node was refused before anything was sent, or that the ledger fenced this
/// executor's writes for it (a newer epoch owns it).
#[derive(Default)]
pub struct Notes {
    pub refused: BTreeMap<String, String>,
    pub fenced: BTreeMap<String, String>,
}

pub type SharedNotes = Arc<Mutex<Notes>>;

/// The exit code one call node's record stands for.
pub fn exit_code(
    rec: Option<&ToolOperation>,
    receipt: Option<&Receipt>,
    outbox: Option<&OutboxEntry>,
) -> u8 {
    let Some(rec) = rec else {
        return EXIT_UNFINISHED;
    };
    match rec.local_state {
        LocalState::Accepted => match receipt.map(|r| r.terminal_state) {
            Some(TerminalState::Completed) => {
                let tool_error = outbox
                    .and_then(|o| o.payload.as_ref())
                    .and_then(|p| p.get("isError"))
                    .and_then(|e| e.as_bool())
                    == Some(true);
                if tool_error {
                    EXIT_FAILED
                } else {
                    EXIT_COMPLETED
                }
            }
            _ => EXIT_FAILED,
        },
        LocalState::CancelledAccepted | LocalState::Rejected => EXIT_FAILED,
        LocalState::Unknown => EXIT_RECONCILE,
        _ => EXIT_UNFINISHED,
    }
}

/// Print each node's outcome; the worst exit code among them.
pub fn report(
    store: &LedgerStore,
    nodes: &BTreeSet<String>,
    error: Option<String>,
    json: bool,
    notes: &SharedNotes,
) -> Result<u8, Failure> {
    let mut rows = Vec::with_capacity(nodes.len());
    let receipts: BTreeMap<String, Receipt> = store
        .with(|l| l.receipts())?
        .into_iter()
        .map(|r| (r.call_node_id.clone(), r))
        .collect();
    for id in nodes {
        let (rec, outbox) = store.with(|l| Ok((l.by_call_node(id)?, l.outbox_entry(id)?)))?;
        rows.push((id, rec, outbox));
    }
    let notes = notes.lock().expect("notes lock");
    let mut worst = EXIT_COMPLETED;
    let mut out = Vec::new();
    for (id, rec, outbox) in rows {
        let receipt = receipts.get(id);
        let code = exit_code(rec.as_ref(), receipt, outbox.as_ref());
        worst = worst.max(severity(code));
        let fenced = notes.fenced.get(id);
        if json {
            let mut v = super::show::node_json(rec.as_ref(), receipt, outbox.as_ref(), code, id);
            if let Some(why) = fenced {
                v["fenced"] = serde_json::json!(why);
            }
            out.push(v);
            continue;
        }
        println!(
            "{}",
            super::show::node_line(id, rec.as_ref(), receipt, outbox.as_ref())
        );
        if let Some(text) = outbox
            .as_ref()
            .and_then(|o| o.payload.as_ref())
            .map(super::show::payload_text)
        {
            println!("{text}");
        }
        if let Some(reason) = notes.refused.get(id) {
            println!("  refused before sending: {reason}");
        }
        if let Some(why) = fenced {
            println!("  left to a newer executor epoch: {why}");
        }
    }
    if let Some(e) = &error {
        eprintln!("toolop: {e}");
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "call_nodes": out, "error": error, "exit_code": from_severity(worst) })
        );
    }
    Ok(from_severity(worst))
}

/// Order of badness for combining exit codes: completed < failed < unfinished < reconcile.
fn severity(code: u8) -> u8 {
    match code {
        EXIT_COMPLETED => 0,
        EXIT_FAILED => 1,
        EXIT_UNFINISHED => 2,
        _ => 3,
    }
}

fn from_severity(s: u8) -> u8 {
    [EXIT_COMPLETED, EXIT_FAILED, EXIT_UNFINISHED, EXIT_RECONCILE][usize::from(s.min(3))]
}
