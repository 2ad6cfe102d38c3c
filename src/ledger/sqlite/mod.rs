//! The durable ledger on SQLite (bundled, so a fresh machine needs no system library).
//!
//! One SQL transaction per write (`BEGIN IMMEDIATE`: the write lock is taken before the
//! record is read, so two processes sharing the file serialise instead of both reading the
//! same version). Files use WAL; `synchronous` is NORMAL by default (a power loss may lose the
//! last transactions but never corrupts the file or splits one) or FULL (every commit durable
//! before it returns). The schema and what the database enforces by itself: `schema.rs`.
//!
//! File access is compiled out of simulation builds (`--cfg madsim`): the simulator may only
//! use [`SqliteLedger::open_in_memory`], which touches no file and is deterministic.

mod consume;
mod decoded;
mod rows;
mod schema;
mod write;

use rusqlite::{Connection, OptionalExtension};

pub use consume::ConsumeError;
/// The rusqlite this ledger is built with, for consumers of [`SqliteLedger::consume_with`].
pub use rusqlite;
pub use schema::SCHEMA_VERSION;

use super::{
    Beat, CancelRequest, EffectItem, Ledger, LedgerError, OutboxEntry, Receipt, ReconcileItem,
    RecordHead, Write,
};
use crate::record::{LocalState, ToolOperation};

/// How hard a commit waits for the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    /// WAL + NORMAL: a commit is atomic and survives a process crash; a power loss may undo
    /// the last few commits, never half of one.
    Normal,
    /// WAL + FULL: a commit survives a power loss once it returns.
    Full,
}

impl Synchronous {
    #[cfg(not(madsim))]
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
    /// How long a write waits for another process's write lock before it fails.
    pub busy_timeout_ms: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Normal,
            busy_timeout_ms: 5_000,
        }
    }
}

pub struct SqliteLedger {
    conn: Connection,
    decoded: decoded::Decoded,
}

/// Prepared statements kept per connection. The ledger has about 35 distinct ones, and at
/// rusqlite's default of 16 a commit between reads re-prepared (re-parsed) some each time.
const STATEMENT_CACHE_CAPACITY: usize = 64;

impl std::fmt::Debug for SqliteLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteLedger")
            .field("path", &self.conn.path())
            .finish()
    }
}

const RECORD: &str = "SELECT record_json, version FROM records";
/// `RECORD` by call node, spelt out: the per-event reads use it, and need no `format!` each time.
const RECORD_BY_NODE: &str = "SELECT record_json, version FROM records WHERE call_node_id = ?1";

impl SqliteLedger {
    /// Open (or create) the ledger file with the default options, migrating an older schema.
    #[cfg(not(madsim))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<SqliteLedger, LedgerError> {
        SqliteLedger::open_with(path, SqliteOptions::default())
    }

    #[cfg(not(madsim))]
    pub fn open_with(
        path: impl AsRef<std::path::Path>,
        opts: SqliteOptions,
    ) -> Result<SqliteLedger, LedgerError> {
        let path = path.as_ref();
        let named = |e: LedgerError| match e {
            LedgerError::Storage(why) => LedgerError::Storage(format!("{}: {why}", path.display())),
            other => other,
        };
        let conn = Connection::open(path).map_err(|e| named(e.into()))?;
        conn.busy_timeout(std::time::Duration::from_millis(opts.busy_timeout_ms))
            .map_err(|e| named(e.into()))?;
        // Switching a new file to WAL needs the exclusive lock, and SQLite answers "busy" at
        // once (no busy handler: two would deadlock) when another process is switching it too.
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(opts.busy_timeout_ms);
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other.map_err(|e| named(e.into()))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(named(LedgerError::Storage(format!(
                "journal mode WAL refused (the file system gave {mode})"
            ))));
        }
        conn.pragma_update(None, "synchronous", opts.synchronous.pragma())
            .map_err(|e| named(e.into()))?;
        SqliteLedger::init(conn).map_err(named)
    }

    /// A ledger in memory: no file, nothing durable; for the simulator and tests.
    pub fn open_in_memory() -> Result<SqliteLedger, LedgerError> {
        SqliteLedger::init(Connection::open_in_memory()?)
    }

    /// A ledger in memory, like [`SqliteLedger::open_in_memory`], that starts as a byte copy
    /// of a migrated empty database built once per process instead of running the migrations
    /// again. Running them parses the whole schema several times, which was a tenth of the CPU
    /// of a simulated series on SQLite (the simulator opens one ledger per series). The copy
    /// holds the same schema, version and constraints; the migrations themselves still run, once.
    pub fn open_in_memory_copy() -> Result<SqliteLedger, LedgerError> {
        static EMPTY: std::sync::OnceLock<Result<Vec<u8>, String>> = std::sync::OnceLock::new();
        let empty = EMPTY.get_or_init(|| {
            let ledger = SqliteLedger::open_in_memory().map_err(|e| e.to_string())?;
            let bytes = ledger.conn.serialize(rusqlite::MAIN_DB);
            bytes.map(|b| b.to_vec()).map_err(|e| e.to_string())
        });
        let empty = empty
            .as_ref()
            .map_err(|why| LedgerError::Storage(format!("the empty ledger to copy: {why}")))?;
        let mut conn = Connection::open_in_memory()?;
        conn.deserialize_read_exact(rusqlite::MAIN_DB, empty.as_slice(), empty.len(), false)?;
        // A connection setting, not stored in the database: set it as `init` does.
        conn.pragma_update(None, "foreign_keys", true)?;
        Ok(SqliteLedger::over(conn))
    }

    fn init(mut conn: Connection) -> Result<SqliteLedger, LedgerError> {
        conn.pragma_update(None, "foreign_keys", true)?;
        schema::migrate(&mut conn)?;
        Ok(SqliteLedger::over(conn))
    }

    fn over(conn: Connection) -> SqliteLedger {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        SqliteLedger {
            conn,
            decoded: decoded::Decoded::default(),
        }
    }

    /// The schema version of the open database (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<usize, LedgerError> {
        let v: u64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        Ok(v as usize)
    }

    /// One record by `key`; `node` says the key is the call node's id (the decode cache's key).
    fn one_record(
        &self,
        sql: &str,
        key: &str,
        node: Option<&str>,
    ) -> Result<Option<ToolOperation>, LedgerError> {
        self.one_row(sql, key, |r| decoded::row(r, node, &self.decoded))
    }

    /// The one row `sql` finds by `key`, read by `read` (which may itself fail to decode it).
    fn one_row<T>(
        &self,
        sql: &str,
        key: &str,
        read: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<Result<T, LedgerError>>,
    ) -> Result<Option<T>, LedgerError> {
        self.conn
            .prepare_cached(sql)?
            .query_row([key], read)
            .optional()?
            .transpose()
    }

    fn many_records(&self, sql: &str) -> Result<Vec<ToolOperation>, LedgerError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt
            .query_map([], |r| decoded::row(r, None, &self.decoded))?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().collect()
    }

    fn all<T>(
        &self,
        sql: &str,
        read: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, LedgerError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let out = stmt.query_map([], read)?.collect::<Result<Vec<_>, _>>()?;
        Ok(out)
    }
}

/// Another connection holds the lock this one needs.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl Ledger for SqliteLedger {
    fn current_epoch(&self) -> Result<u64, LedgerError> {
        write::epoch(&self.conn)
    }

    fn bump_epoch(&mut self) -> Result<u64, LedgerError> {
        write::bump_epoch(&mut self.conn)
    }

    fn insert(
        &mut self,
        record: ToolOperation,
        writer_epoch: u64,
    ) -> Result<ToolOperation, LedgerError> {
        write::insert(&mut self.conn, &self.decoded, record, writer_epoch)
    }

    fn commit(&mut self, w: Write) -> Result<ToolOperation, LedgerError> {
        write::commit(&mut self.conn, &self.decoded, w)
    }

    fn by_call_node(&self, call_node_id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.one_record(RECORD_BY_NODE, call_node_id, Some(call_node_id))
    }

    fn by_operation_id(&self, operation_id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        let sql = "SELECT r.record_json, r.version FROM operation_ids o JOIN records r ON r.call_node_id = o.call_node_id \
                   WHERE o.operation_id = ?1";
        self.one_record(sql, operation_id, None)
    }

    fn by_submission_key(&self, key: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.one_record(&format!("{RECORD} WHERE submission_key = ?1"), key, None)
    }

    fn records(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        self.many_records(&format!("{RECORD} ORDER BY call_node_id"))
    }

    fn receipts(&self) -> Result<Vec<Receipt>, LedgerError> {
        let sql = format!(
            "SELECT {} FROM receipts ORDER BY call_node_id",
            rows::RECEIPT_COLUMNS
        );
        self.all(&sql, rows::read_receipt)?
            .into_iter()
            .map(rows::receipt)
            .collect()
    }

    fn outbox(&self) -> Result<Vec<OutboxEntry>, LedgerError> {
        let sql = format!("SELECT {} FROM outbox ORDER BY seq", rows::OUTBOX_COLUMNS);
        self.all(&sql, rows::read_outbox)?
            .into_iter()
            .map(rows::outbox)
            .collect()
    }

    fn reconciliation_queue(&self) -> Result<Vec<ReconcileItem>, LedgerError> {
        self.all("SELECT call_node_id, operation_id, submission_key, reason, at_ms FROM reconciliation_queue ORDER BY id", rows::read_reconcile)
    }

    fn effect_reconciliations(&self) -> Result<Vec<EffectItem>, LedgerError> {
        self.all("SELECT call_node_id, operation_id, reason, at_ms FROM effect_reconciliations ORDER BY id", rows::read_effect)
    }

    fn outbox_entry(&self, call_node_id: &str) -> Result<Option<OutboxEntry>, LedgerError> {
        let sql = format!(
            "SELECT {} FROM outbox WHERE call_node_id = ?1",
            rows::OUTBOX_COLUMNS
        );
        let row = self
            .conn
            .prepare_cached(&sql)?
            .query_row([call_node_id], rows::read_outbox)
            .optional()?;
        row.map(rows::outbox).transpose()
    }

    fn local_state(&self, call_node_id: &str) -> Result<Option<LocalState>, LedgerError> {
        let row: Option<String> = self
            .conn
            .prepare_cached("SELECT local_state FROM records WHERE call_node_id = ?1")?
            .query_row([call_node_id], |r| r.get(0))
            .optional()?;
        row.map(|s| rows::parse_name("records.local_state", &s))
            .transpose()
    }

    // The schema has typed columns for the version and the local state but not for the result
    // digest, so the row's JSON is read as `by_call_node` reads it, through the decoded records:
    // while the row holds the text a remembered record came from, only the head is copied
    // (no parse, no clone of the whole record), and the answer is the one `by_call_node` gives.
    fn record_head(&self, call_node_id: &str) -> Result<Option<RecordHead>, LedgerError> {
        self.one_row(RECORD_BY_NODE, call_node_id, |r| {
            decoded::head_row(r, call_node_id, &self.decoded)
        })
    }

    fn settled_count(&self) -> Result<(usize, usize), LedgerError> {
        let (all, done): (u64, u64) = self
            .conn
            .prepare_cached("SELECT COUNT(*), IFNULL(SUM(is_final), 0) FROM records")?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok((all as usize, done as usize))
    }

    fn in_flight(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        self.many_records(&format!(
            "{RECORD} WHERE is_final = 0 ORDER BY call_node_id"
        ))
    }

    fn outbox_ready(&self, after_seq: u64, limit: usize) -> Result<Vec<OutboxEntry>, LedgerError> {
        let sql = format!(
            "SELECT {} FROM outbox WHERE status = 'ready' AND seq > ?1 ORDER BY seq LIMIT ?2",
            rows::OUTBOX_COLUMNS
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let raw = stmt
            .query_map(rusqlite::params![after_seq, limit], rows::read_outbox)?
            .collect::<Result<Vec<_>, _>>()?;
        raw.into_iter().map(rows::outbox).collect()
    }

    fn mark_delivered(
        &mut self,
        receipt_id: &str,
        consumer_id: &str,
        at_ms: u64,
    ) -> Result<bool, LedgerError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let marked = write::mark_delivered(&tx, receipt_id, consumer_id, at_ms)?;
        tx.commit()?;
        Ok(marked)
    }

    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError> {
        write::request_cancel(&mut self.conn, call_node_id, at_ms)
    }

    fn cancel_requests(&self) -> Result<Vec<CancelRequest>, LedgerError> {
        self.all(
            "SELECT call_node_id, at_ms FROM cancel_requests ORDER BY at_ms, seq",
            rows::read_cancel,
        )
    }

    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError> {
        self.conn
            .prepare_cached("DELETE FROM cancel_requests WHERE call_node_id = ?1")?
            .execute([call_node_id])?;
        Ok(())
    }

    fn beat(&mut self, beat: Beat) -> Result<(), LedgerError> {
        // One statement, so one implicit transaction: no record's lock is held with it.
        self.conn
            .prepare_cached(
                "INSERT INTO process_beats (process, epoch, at_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (process) DO UPDATE SET epoch = excluded.epoch, at_ms = excluded.at_ms",
            )?
            .execute(rusqlite::params![
                process_key(beat.process),
                beat.epoch,
                beat.at_ms
            ])?;
        Ok(())
    }

    fn end_beat(&mut self, process: u64) -> Result<(), LedgerError> {
        self.conn
            .prepare_cached("DELETE FROM process_beats WHERE process = ?1")?
            .execute([process_key(process)])?;
        Ok(())
    }

    fn beat_of(&self, process: u64) -> Result<Option<Beat>, LedgerError> {
        Ok(self
            .conn
            .prepare_cached("SELECT epoch, at_ms FROM process_beats WHERE process = ?1")?
            .query_row([process_key(process)], |r| {
                Ok(Beat {
                    process,
                    epoch: r.get(0)?,
                    at_ms: r.get(1)?,
                })
            })
            .optional()?)
    }
}

/// A process id as SQLite's signed INTEGER key: the same 64 bits. An id is opaque (the CLI's
/// mix a pid and a clock), so any u64 must be storable; nothing orders or compares them.
fn process_key(process: u64) -> i64 {
    i64::from_ne_bytes(process.to_ne_bytes())
}

#[cfg(test)]
mod tests;
