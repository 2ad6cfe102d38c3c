//! The rules every ledger applies, in one place so the two implementations cannot drift: the
//! epoch fence, the commit checks, the acceptance re-checks, and how a receipt and its outbox
//! entry are made. Each ledger calls these inside its transaction, with the record as stored.

use super::{LedgerError, OutboxEntry, OutboxStatus, Receipt, Write};
use crate::core::AcceptSpec;
use crate::record::{LocalState, TerminalState, ToolOperation};

/// Fencing: only the current epoch writes. An older writer was rolled back or taken over; a
/// newer one holds a token the ledger never issued.
pub(super) fn fence(call_node_id: &str, writer: u64, current: u64) -> Result<(), LedgerError> {
    if writer < current {
        return Err(LedgerError::StaleEpoch {
            call_node_id: call_node_id.to_string(),
            writer,
            current,
        });
    }
    if writer > current {
        return Err(LedgerError::UnissuedEpoch {
            call_node_id: call_node_id.to_string(),
            writer,
            current,
        });
    }
    Ok(())
}

/// A writer may not claim a record for an epoch it does not hold.
fn stamp(record: &ToolOperation, writer_epoch: u64) -> Result<(), LedgerError> {
    if record.execution_epoch > writer_epoch {
        return Err(LedgerError::Invalid(format!(
            "{}: a writer of epoch {writer_epoch} cannot stamp the record with epoch {}",
            record.call_node_id, record.execution_epoch
        )));
    }
    Ok(())
}

/// What an insert must pass before the duplicate checks (which each ledger makes its own way).
pub(super) fn check_insert(
    record: &ToolOperation,
    writer_epoch: u64,
    current: u64,
) -> Result<(), LedgerError> {
    fence(&record.call_node_id, writer_epoch, current)?;
    if record.version != 0 {
        return Err(LedgerError::Invalid(format!(
            "{}: a new record starts at version 0",
            record.call_node_id
        )));
    }
    stamp(record, writer_epoch)
}

/// Everything a commit must pass, in the order both ledgers report it. `has_receipt`: the
/// ledger holds a receipt for the call node.
pub(super) fn check_commit(
    stored: &ToolOperation,
    has_receipt: bool,
    current: u64,
    w: &Write,
) -> Result<(), LedgerError> {
    let id = &stored.call_node_id;
    fence(id, w.writer_epoch, current)?;
    stamp(&w.record, w.writer_epoch)?;
    if stored.version != w.expected_version {
        return Err(LedgerError::VersionConflict {
            call_node_id: id.clone(),
            expected: w.expected_version,
            found: stored.version,
        });
    }
    if w.record.submission_key != stored.submission_key
        || w.record.request_digest != stored.request_digest
    {
        return Err(LedgerError::Invalid(format!(
            "{id}: identity fields may not change"
        )));
    }
    if stored.local_state.has_receipt() || has_receipt {
        if w.accept.is_some() {
            return Err(LedgerError::AcceptRefused {
                call_node_id: id.clone(),
                why: "a receipt exists already".into(),
            });
        }
        if w.record.local_state != stored.local_state {
            return Err(LedgerError::Invalid(format!(
                "{id}: a receipted record cannot change state"
            )));
        }
    }
    if w.accept.is_none() && w.record.local_state.has_receipt() && !stored.local_state.has_receipt()
    {
        return Err(LedgerError::Invalid(format!(
            "{id}: {} needs the acceptance transaction",
            w.record.local_state
        )));
    }
    if let Some(spec) = &w.accept {
        recheck_basis(stored, spec)
            .and_then(|()| check_accept(stored, &w.record, spec))
            .map_err(|why| LedgerError::AcceptRefused {
                call_node_id: id.clone(),
                why,
            })?;
    }
    Ok(())
}

fn shown(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("none")
}

/// The acceptance re-checks: what the deciding step read against the record as stored now.
/// Compare-and-swap makes these agree for an honest writer; they hold even for a writer that
/// re-read only the version and kept a decision made on an older record.
fn recheck_basis(stored: &ToolOperation, spec: &AcceptSpec) -> Result<(), String> {
    let b = &spec.basis;
    if b.request_digest != stored.request_digest {
        return Err("decided for another request digest".into());
    }
    if b.tool_version != stored.tool_version {
        return Err(format!(
            "decided for tool version {}, the record holds {}",
            b.tool_version, stored.tool_version
        ));
    }
    if b.execution_epoch != stored.execution_epoch {
        return Err(format!(
            "decided on the record of epoch {}, epoch {} has taken it over since",
            b.execution_epoch, stored.execution_epoch
        ));
    }
    if b.cancel_generation != stored.cancel_generation {
        return Err(format!(
            "decided at cancel generation {}, a cancel moved it to {} since",
            b.cancel_generation, stored.cancel_generation
        ));
    }
    if b.operation_id != stored.operation_id {
        return Err(format!(
            "decided for operation {}, the record names operation {}",
            shown(&b.operation_id),
            shown(&stored.operation_id)
        ));
    }
    if b.recorded_result_digest != stored.result_digest {
        return Err(format!(
            "decided while the record held result digest {}, it holds {} now",
            shown(&b.recorded_result_digest),
            shown(&stored.result_digest)
        ));
    }
    if stored.result_digest.is_some() && spec.result_digest != stored.result_digest {
        return Err(format!(
            "result digest {} was recorded before; this acceptance carries {}",
            shown(&stored.result_digest),
            shown(&spec.result_digest)
        ));
    }
    Ok(())
}

/// The acceptance checks of design.md section 3 on the record being written.
fn check_accept(
    stored: &ToolOperation,
    next: &ToolOperation,
    spec: &AcceptSpec,
) -> Result<(), String> {
    if next.tool_version != stored.tool_version {
        return Err("tool version changed".into());
    }
    if next.execution_epoch != stored.execution_epoch {
        return Err(format!(
            "execution epoch {} is not the stored {}",
            next.execution_epoch, stored.execution_epoch
        ));
    }
    if next.cancel_generation != stored.cancel_generation {
        return Err("cancel generation changed under the acceptance".into());
    }
    if stored.operation_id.is_some() && next.operation_id != stored.operation_id {
        return Err("operation id changed".into());
    }
    if spec.terminal != TerminalState::Rejected && next.operation_id.is_none() && !next.synchronous
    {
        return Err("a terminal state without an operation id".into());
    }
    if next.result_digest != spec.result_digest {
        return Err("result digest differs from the record".into());
    }
    if matches!(spec.terminal, TerminalState::Completed) && spec.result_digest.is_none() {
        return Err("completed without a fetched, verified result".into());
    }
    let want = match spec.terminal {
        TerminalState::Rejected => LocalState::Rejected,
        TerminalState::Cancelled if next.local_state == LocalState::CancelledAccepted => {
            LocalState::CancelledAccepted
        }
        _ => LocalState::Accepted,
    };
    if next.local_state != want {
        return Err(format!(
            "terminal {} cannot land in {}",
            spec.terminal.name(),
            next.local_state
        ));
    }
    if next.local_state == LocalState::CancelledAccepted && next.cancel_generation == 0 {
        return Err("cancel confirmed but no cancel was ever requested".into());
    }
    Ok(())
}

/// The receipt the acceptance transaction writes for `next`.
pub(super) fn receipt(next: &ToolOperation, spec: &AcceptSpec, now_ms: u64) -> Receipt {
    let id = &next.call_node_id;
    Receipt {
        receipt_id: format!("{id}#receipt"),
        call_node_id: id.clone(),
        operation_id: next.operation_id.clone(),
        request_digest: next.request_digest.clone(),
        tool_version: next.tool_version.clone(),
        execution_epoch: next.execution_epoch,
        cancel_generation: next.cancel_generation,
        terminal_state: spec.terminal,
        result_digest: spec.result_digest.clone(),
        accepted_at_ms: now_ms,
    }
}

/// The outbox entry of a receipt, or `None` for a shadow operation (receipted and checked,
/// but nothing downstream ever sees it). The payload is split by terminal state: only a
/// completed or failed outcome has one; anything else the server returned is audit.
pub(super) fn outbox_entry(
    seq: u64,
    next: &ToolOperation,
    receipt: &Receipt,
    spec: &AcceptSpec,
) -> Option<OutboxEntry> {
    if next.shadow {
        return None;
    }
    let (payload, audit_payload) = match spec.terminal {
        TerminalState::Completed | TerminalState::Failed => (spec.payload.clone(), None),
        _ => (None, spec.payload.clone()),
    };
    Some(OutboxEntry {
        seq,
        call_node_id: receipt.call_node_id.clone(),
        receipt_id: receipt.receipt_id.clone(),
        terminal_state: spec.terminal,
        payload,
        audit_payload,
        status: OutboxStatus::Ready,
        delivered_to: None,
        delivered_at_ms: None,
    })
}

/// Whether `consumer_id` may acknowledge `entry`: `Ok(true)` to mark it now, `Ok(false)` when
/// this consumer already did (idempotent), an error when another consumer took it.
pub(super) fn may_deliver(entry: &OutboxEntry, consumer_id: &str) -> Result<bool, LedgerError> {
    if consumer_id.is_empty() {
        return Err(LedgerError::Invalid(
            "a consumer id may not be empty".into(),
        ));
    }
    match &entry.delivered_to {
        None => Ok(true),
        Some(c) if c == consumer_id => Ok(false),
        Some(c) => Err(LedgerError::AlreadyDelivered {
            receipt_id: entry.receipt_id.clone(),
            delivered_to: c.clone(),
            consumer_id: consumer_id.to_string(),
        }),
    }
}
