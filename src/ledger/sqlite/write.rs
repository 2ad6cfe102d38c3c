//! The write transactions. Each opens `BEGIN IMMEDIATE`, reads what it checks inside the
//! transaction, applies the rules shared with the in-memory ledger (`checks.rs`), writes, and
//! commits; any error drops the transaction, which rolls it back.

use rusqlite::{params, Connection, OptionalExtension};

use super::decoded::{self, Decoded};
use super::rows;
use crate::ledger::{checks, LedgerError, Write};
use crate::record::ToolOperation;

/// An open `BEGIN IMMEDIATE` transaction, rolled back when dropped uncommitted. It does what
/// rusqlite's `Transaction` does, through cached statements: `Transaction` runs BEGIN and COMMIT
/// with `execute_batch`, which parses the SQL anew each time (a twentieth of a simulated commit).
/// `&mut Connection` keeps a second transaction from opening on the connection meanwhile.
struct Tx<'c> {
    conn: &'c mut Connection,
    open: bool,
}

fn begin(conn: &mut Connection) -> Result<Tx<'_>, LedgerError> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    Ok(Tx { conn, open: true })
}

impl Tx<'_> {
    fn commit(mut self) -> Result<(), LedgerError> {
        // A failed COMMIT (busy) leaves the transaction open: the drop rolls it back.
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // Nothing to report to: the error that dropped the transaction is on its way up, and a
        // failed ROLLBACK leaves SQLite to roll back when the connection closes.
        if self.open && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

pub(super) fn epoch(conn: &Connection) -> Result<u64, LedgerError> {
    Ok(conn
        .prepare_cached("SELECT current_epoch FROM ledger_meta WHERE singleton = 1")?
        .query_row([], |r| r.get(0))?)
}

pub(super) fn bump_epoch(conn: &mut Connection) -> Result<u64, LedgerError> {
    let tx = begin(conn)?;
    tx.execute(
        "UPDATE ledger_meta SET current_epoch = current_epoch + 1 WHERE singleton = 1",
        [],
    )?;
    let now = epoch(&tx)?;
    tx.commit()?;
    Ok(now)
}

fn exists(conn: &Connection, sql: &str, key: &str) -> Result<bool, LedgerError> {
    Ok(conn
        .prepare_cached(sql)?
        .query_row([key], |_| Ok(()))
        .optional()?
        .is_some())
}

fn stored(
    conn: &Connection,
    decoded: &Decoded,
    call_node_id: &str,
) -> Result<Option<ToolOperation>, LedgerError> {
    conn.prepare_cached("SELECT record_json, version FROM records WHERE call_node_id = ?1")?
        .query_row([call_node_id], |r| {
            decoded::row(r, Some(call_node_id), decoded)
        })
        .optional()?
        .transpose()
}

fn note_operation_id(tx: &Connection, rec: &ToolOperation) -> Result<(), LedgerError> {
    if let Some(op) = &rec.operation_id {
        tx.prepare_cached(
            "INSERT INTO operation_ids (operation_id, call_node_id) VALUES (?1, ?2) \
             ON CONFLICT (operation_id) DO UPDATE SET call_node_id = excluded.call_node_id",
        )?
        .execute(params![op, rec.call_node_id])?;
    }
    Ok(())
}

pub(super) fn insert(
    conn: &mut Connection,
    decoded: &Decoded,
    mut record: ToolOperation,
    writer_epoch: u64,
) -> Result<ToolOperation, LedgerError> {
    let tx = begin(conn)?;
    checks::check_insert(&record, writer_epoch, epoch(&tx)?)?;
    if exists(
        &tx,
        "SELECT 1 FROM records WHERE call_node_id = ?1",
        &record.call_node_id,
    )? {
        return Err(LedgerError::DuplicateCallNode(record.call_node_id));
    }
    if exists(
        &tx,
        "SELECT 1 FROM records WHERE submission_key = ?1",
        &record.submission_key,
    )? {
        return Err(LedgerError::DuplicateSubmissionKey(record.submission_key));
    }
    record.version = 1;
    let json = rows::to_json("the record", &record)?;
    tx.prepare_cached(
        "INSERT INTO records (call_node_id, submission_key, operation_id, request_digest, adapter, local_state, is_final, \
         execution_epoch, cancel_generation, version, record_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        record.call_node_id,
        record.submission_key,
        record.operation_id,
        record.request_digest,
        record.adapter.name(),
        record.local_state.name(),
        record.local_state.is_final(),
        record.execution_epoch,
        record.cancel_generation,
        record.version,
        json,
    ])?;
    note_operation_id(&tx, &record)?;
    tx.commit()?;
    decoded.remember(&json, &record);
    Ok(record)
}

pub(super) fn commit(
    conn: &mut Connection,
    decoded: &Decoded,
    w: Write,
) -> Result<ToolOperation, LedgerError> {
    let tx = begin(conn)?;
    let id = w.record.call_node_id.clone();
    let stored =
        stored(&tx, decoded, &id)?.ok_or_else(|| LedgerError::UnknownCallNode(id.clone()))?;
    let has_receipt = exists(&tx, "SELECT 1 FROM receipts WHERE call_node_id = ?1", &id)?;
    checks::check_commit(&stored, has_receipt, epoch(&tx)?, &w)?;
    let mut next = w.record;
    next.version = w.expected_version + 1;
    let json = rows::to_json("the record", &next)?;
    // The version condition repeats the compare-and-swap in SQL: the row must still be the one read.
    let updated = tx
        .prepare_cached(
            "UPDATE records SET operation_id = ?2, local_state = ?3, is_final = ?4, execution_epoch = ?5, cancel_generation = ?6, \
             version = ?7, record_json = ?8 WHERE call_node_id = ?1 AND version = ?9",
        )?
        .execute(params![
            id,
            next.operation_id,
            next.local_state.name(),
            next.local_state.is_final(),
            next.execution_epoch,
            next.cancel_generation,
            next.version,
            json,
            w.expected_version,
        ])?;
    if updated != 1 {
        return Err(LedgerError::Storage(format!(
            "{id}: the record changed inside its own transaction"
        )));
    }
    if let Some(spec) = &w.accept {
        let r = checks::receipt(&next, spec, w.now_ms);
        tx.prepare_cached(
            "INSERT INTO receipts (receipt_id, call_node_id, operation_id, request_digest, tool_version, execution_epoch, \
             cancel_generation, terminal_state, result_digest, accepted_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            r.receipt_id,
            r.call_node_id,
            r.operation_id,
            r.request_digest,
            r.tool_version,
            r.execution_epoch,
            r.cancel_generation,
            r.terminal_state.name(),
            r.result_digest,
            r.accepted_at_ms
        ])?;
        // `seq` comes from AUTOINCREMENT: strictly increasing, never reused.
        if let Some(e) = checks::outbox_entry(0, &next, &r, spec) {
            let payload = e
                .payload
                .as_ref()
                .map(|p| rows::to_json("the payload", p))
                .transpose()?;
            let audit = e
                .audit_payload
                .as_ref()
                .map(|p| rows::to_json("the audit payload", p))
                .transpose()?;
            tx.prepare_cached(
                "INSERT INTO outbox (receipt_id, call_node_id, terminal_state, payload_json, audit_payload_json, status) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![e.receipt_id, e.call_node_id, e.terminal_state.name(), payload, audit, e.status.name()])?;
        }
    }
    if let Some(reason) = &w.reconcile {
        tx.prepare_cached("INSERT INTO reconciliation_queue (call_node_id, operation_id, submission_key, reason, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)")?
            .execute(params![id, next.operation_id, next.submission_key, reason, w.now_ms])?;
    }
    if let Some(reason) = &w.effect {
        // One item per call node and operation (`Write::effect`).
        tx.prepare_cached("INSERT INTO effect_reconciliations (call_node_id, operation_id, reason, at_ms) SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (SELECT 1 FROM effect_reconciliations WHERE call_node_id = ?1 AND operation_id IS ?2)")?
            .execute(params![id, next.operation_id, reason, w.now_ms])?;
    }
    note_operation_id(&tx, &next)?;
    tx.commit()?;
    decoded.remember(&json, &next);
    Ok(next)
}

/// Mark one outbox entry delivered inside `tx` (the caller commits).
pub(super) fn mark_delivered(
    tx: &Connection,
    receipt_id: &str,
    consumer_id: &str,
    at_ms: u64,
) -> Result<bool, LedgerError> {
    let sql = format!(
        "SELECT {} FROM outbox WHERE receipt_id = ?1",
        rows::OUTBOX_COLUMNS
    );
    let row = tx
        .prepare_cached(&sql)?
        .query_row([receipt_id], rows::read_outbox)
        .optional()?;
    let entry = row
        .map(rows::outbox)
        .transpose()?
        .ok_or_else(|| LedgerError::UnknownReceipt(receipt_id.to_string()))?;
    if !checks::may_deliver(&entry, consumer_id)? {
        return Ok(false);
    }
    tx.prepare_cached("UPDATE outbox SET status = 'delivered', delivered_to = ?2, delivered_at_ms = ?3 WHERE receipt_id = ?1")?
        .execute(params![receipt_id, consumer_id, at_ms])?;
    Ok(true)
}

pub(super) fn request_cancel(
    conn: &mut Connection,
    call_node_id: &str,
    at_ms: u64,
) -> Result<(), LedgerError> {
    let tx = begin(conn)?;
    if !exists(
        &tx,
        "SELECT 1 FROM records WHERE call_node_id = ?1",
        call_node_id,
    )? {
        return Err(LedgerError::UnknownCallNode(call_node_id.to_string()));
    }
    // Idempotent: the first request keeps its place in the queue.
    if !exists(
        &tx,
        "SELECT 1 FROM cancel_requests WHERE call_node_id = ?1",
        call_node_id,
    )? {
        tx.prepare_cached("INSERT INTO cancel_requests (call_node_id, at_ms) VALUES (?1, ?2)")?
            .execute(params![call_node_id, at_ms])?;
    }
    tx.commit()?;
    Ok(())
}
