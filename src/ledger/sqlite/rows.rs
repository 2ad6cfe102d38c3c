//! Rows to values: the typed columns and the record JSON, decoded with their errors named.
//! A row that does not decode is a storage error, never a panic and never "no such row".

use serde::de::DeserializeOwned;

use crate::ledger::{CancelRequest, EffectItem, LedgerError, OutboxEntry, Receipt, ReconcileItem};
use crate::record::{ToolOperation, RECORD_SCHEMA};

impl From<rusqlite::Error> for LedgerError {
    fn from(e: rusqlite::Error) -> Self {
        LedgerError::Storage(format!("SQLite: {e}"))
    }
}

/// An enum stored by its serde spelling (the same text the JSON record uses).
pub(super) fn parse_name<T: DeserializeOwned>(column: &str, text: &str) -> Result<T, LedgerError> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).map_err(|_| {
        LedgerError::Storage(format!(
            "column {column} holds {text:?}, which this build does not know"
        ))
    })
}

pub(super) fn parse_json(
    column: &str,
    text: Option<String>,
) -> Result<Option<serde_json::Value>, LedgerError> {
    text.map(|t| {
        serde_json::from_str(&t)
            .map_err(|e| LedgerError::Storage(format!("column {column} is not JSON: {e}")))
    })
    .transpose()
}

pub(super) fn to_json<T: serde::Serialize>(what: &str, v: &T) -> Result<String, LedgerError> {
    serde_json::to_string(v)
        .map_err(|e| LedgerError::Storage(format!("{what} does not encode: {e}")))
}

/// A record row: its `toolOperation.v1` JSON, checked against the typed version column.
pub(super) fn record(json: &str, version: u64) -> Result<ToolOperation, LedgerError> {
    let rec: ToolOperation = serde_json::from_str(json).map_err(|e| {
        LedgerError::Storage(format!(
            "a stored record does not decode as {RECORD_SCHEMA}: {e}"
        ))
    })?;
    if rec.schema != RECORD_SCHEMA {
        return Err(LedgerError::Storage(format!(
            "record {} has schema {}, this build reads {RECORD_SCHEMA}",
            rec.call_node_id, rec.schema
        )));
    }
    if rec.version != version {
        return Err(LedgerError::Storage(format!(
            "record {} says version {}, its row says {version}",
            rec.call_node_id, rec.version
        )));
    }
    Ok(rec)
}

pub(super) const RECEIPT_COLUMNS: &str =
    "receipt_id, call_node_id, operation_id, request_digest, tool_version, execution_epoch, \
     cancel_generation, terminal_state, result_digest, accepted_at_ms";

type ReceiptRow = (
    String,
    String,
    Option<String>,
    String,
    String,
    u64,
    u32,
    String,
    Option<String>,
    u64,
);

pub(super) fn read_receipt(row: &rusqlite::Row<'_>) -> rusqlite::Result<ReceiptRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
    ))
}

pub(super) fn receipt(r: ReceiptRow) -> Result<Receipt, LedgerError> {
    let (
        receipt_id,
        call_node_id,
        operation_id,
        request_digest,
        tool_version,
        execution_epoch,
        cancel_generation,
        terminal,
        result_digest,
        accepted_at_ms,
    ) = r;
    Ok(Receipt {
        receipt_id,
        call_node_id,
        operation_id,
        request_digest,
        tool_version,
        execution_epoch,
        cancel_generation,
        terminal_state: parse_name("receipts.terminal_state", &terminal)?,
        result_digest,
        accepted_at_ms,
    })
}

pub(super) const OUTBOX_COLUMNS: &str =
    "seq, call_node_id, receipt_id, terminal_state, payload_json, audit_payload_json, status, delivered_to, delivered_at_ms";

type OutboxRow = (
    u64,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    Option<u64>,
);

pub(super) fn read_outbox(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
    ))
}

pub(super) fn outbox(
    (
        seq,
        call_node_id,
        receipt_id,
        terminal,
        payload,
        audit,
        status,
        delivered_to,
        delivered_at_ms,
    ): OutboxRow,
) -> Result<OutboxEntry, LedgerError> {
    Ok(OutboxEntry {
        seq,
        call_node_id,
        receipt_id,
        terminal_state: parse_name("outbox.terminal_state", &terminal)?,
        payload: parse_json("outbox.payload_json", payload)?,
        audit_payload: parse_json("outbox.audit_payload_json", audit)?,
        status: parse_name("outbox.status", &status)?,
        delivered_to,
        delivered_at_ms,
    })
}

pub(super) fn read_reconcile(row: &rusqlite::Row<'_>) -> rusqlite::Result<ReconcileItem> {
    Ok(ReconcileItem {
        call_node_id: row.get(0)?,
        operation_id: row.get(1)?,
        submission_key: row.get(2)?,
        reason: row.get(3)?,
        at_ms: row.get(4)?,
    })
}

pub(super) fn read_effect(row: &rusqlite::Row<'_>) -> rusqlite::Result<EffectItem> {
    Ok(EffectItem {
        call_node_id: row.get(0)?,
        operation_id: row.get(1)?,
        reason: row.get(2)?,
        at_ms: row.get(3)?,
    })
}

pub(super) fn read_cancel(row: &rusqlite::Row<'_>) -> rusqlite::Result<CancelRequest> {
    Ok(CancelRequest {
        call_node_id: row.get(0)?,
        at_ms: row.get(1)?,
    })
}
