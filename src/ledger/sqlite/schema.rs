//! The ledger schema, as migrations. A migration, once shipped, never changes: a database
//! written by an older toolop is brought forward by the ones after it (`PRAGMA user_version`
//! counts them). Typed columns hold what is queried or constrained; `record_json` holds the
//! whole `toolOperation.v1` record.
//!
//! What the database enforces by itself, whatever the Rust code does:
//! - one record per call node (`records` primary key) and one per submission key (`UNIQUE`);
//! - one receipt per call node (`receipts` primary key on `call_node_id`);
//! - one outbox entry per receipt and per call node (`UNIQUE`), pointing at a receipt of the
//!   same call node (composite foreign key);
//! - one pending cancel request per call node, for a call node that exists;
//! - the ledger's epoch is a single row, at least 1;
//! - one beat per process;
//! - enumerated columns hold known spellings only (`CHECK`), and a delivered outbox entry names
//!   its consumer.

use rusqlite::{Connection, TransactionBehavior};
use rusqlite_migration::{Migrations, M};

use crate::ledger::LedgerError;

/// Version 1: records, receipts, a ready-only outbox, the reconciliation queue, effect
/// reconciliations. What the ledger was before fencing, outbox delivery and cancel intents.
const V1: &str = "
CREATE TABLE records (
    call_node_id      TEXT PRIMARY KEY NOT NULL,
    submission_key    TEXT NOT NULL UNIQUE,
    operation_id      TEXT,
    request_digest    TEXT NOT NULL,
    adapter           TEXT NOT NULL,
    local_state       TEXT NOT NULL CHECK (local_state IN ('SUBMITTING', 'SUBMISSION_UNKNOWN',
                          'NOT_FOUND_SAFE', 'WORKING', 'INPUT_REQUIRED', 'CANCEL_REQUESTED',
                          'TERMINAL_OBSERVED', 'FETCHING_RESULT', 'ACCEPTED', 'CANCELLED_ACCEPTED',
                          'REJECTED', 'UNKNOWN')),
    is_final          INTEGER NOT NULL CHECK (is_final IN (0, 1)),
    execution_epoch   INTEGER NOT NULL,
    cancel_generation INTEGER NOT NULL,
    version           INTEGER NOT NULL CHECK (version >= 1),
    record_json       TEXT NOT NULL
) STRICT;
CREATE INDEX records_in_flight ON records (is_final, call_node_id);

-- Every operation id a record ever carried, to the record that carried it last.
CREATE TABLE operation_ids (
    operation_id TEXT PRIMARY KEY NOT NULL,
    call_node_id TEXT NOT NULL REFERENCES records (call_node_id)
) STRICT;

CREATE TABLE receipts (
    call_node_id      TEXT PRIMARY KEY NOT NULL REFERENCES records (call_node_id),
    receipt_id        TEXT NOT NULL UNIQUE,
    operation_id      TEXT,
    request_digest    TEXT NOT NULL,
    tool_version      TEXT NOT NULL,
    execution_epoch   INTEGER NOT NULL,
    cancel_generation INTEGER NOT NULL,
    terminal_state    TEXT NOT NULL CHECK (terminal_state IN ('completed', 'failed', 'cancelled',
                          'done_without_result', 'rejected')),
    result_digest     TEXT,
    accepted_at_ms    INTEGER NOT NULL,
    UNIQUE (receipt_id, call_node_id)
) STRICT;

CREATE TABLE outbox (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    receipt_id     TEXT NOT NULL UNIQUE,
    call_node_id   TEXT NOT NULL UNIQUE,
    terminal_state TEXT NOT NULL,
    payload_json   TEXT,
    status         TEXT NOT NULL CHECK (status = 'ready'),
    FOREIGN KEY (receipt_id, call_node_id) REFERENCES receipts (receipt_id, call_node_id)
) STRICT;

CREATE TABLE reconciliation_queue (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    call_node_id   TEXT NOT NULL REFERENCES records (call_node_id),
    operation_id   TEXT,
    submission_key TEXT NOT NULL,
    reason         TEXT NOT NULL,
    at_ms          INTEGER NOT NULL
) STRICT;

CREATE TABLE effect_reconciliations (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    call_node_id TEXT NOT NULL REFERENCES records (call_node_id),
    operation_id TEXT,
    reason       TEXT NOT NULL,
    at_ms        INTEGER NOT NULL
) STRICT;
";

/// Version 2: the fencing epoch, outbox delivery (an entry becomes `delivered` by one named
/// consumer; a cancelled outcome's result is kept as audit), and cancel intents written by
/// other processes. SQLite cannot alter a CHECK constraint, so the outbox is rebuilt, keeping
/// every `seq` and the AUTOINCREMENT high-water mark.
const V2: &str = "
CREATE TABLE ledger_meta (
    singleton     INTEGER PRIMARY KEY CHECK (singleton = 1),
    current_epoch INTEGER NOT NULL CHECK (current_epoch >= 1)
) STRICT;
-- A database from before fencing starts at the newest epoch any record was written under.
INSERT INTO ledger_meta (singleton, current_epoch)
    SELECT 1, MAX(1, IFNULL(MAX(execution_epoch), 1)) FROM records;

CREATE TABLE outbox_v2 (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    receipt_id         TEXT NOT NULL UNIQUE,
    call_node_id       TEXT NOT NULL UNIQUE,
    terminal_state     TEXT NOT NULL,
    payload_json       TEXT,
    audit_payload_json TEXT,
    status             TEXT NOT NULL CHECK (status IN ('ready', 'delivered')),
    delivered_to       TEXT,
    delivered_at_ms    INTEGER,
    CHECK ((status = 'delivered') = (delivered_to IS NOT NULL AND delivered_at_ms IS NOT NULL)),
    FOREIGN KEY (receipt_id, call_node_id) REFERENCES receipts (receipt_id, call_node_id)
) STRICT;
INSERT INTO outbox_v2 (seq, receipt_id, call_node_id, terminal_state, payload_json, status)
    SELECT seq, receipt_id, call_node_id, terminal_state, payload_json, status FROM outbox;
-- Entries deleted by hand in a v1 database still keep their numbers from coming back.
UPDATE sqlite_sequence SET seq = MAX(seq, IFNULL((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0))
    WHERE name = 'outbox_v2';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'outbox_v2', seq FROM sqlite_sequence
    WHERE name = 'outbox' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outbox_v2');
DROP TABLE outbox;
ALTER TABLE outbox_v2 RENAME TO outbox;
CREATE INDEX outbox_ready ON outbox (status, seq);

CREATE TABLE cancel_requests (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    call_node_id TEXT NOT NULL UNIQUE REFERENCES records (call_node_id),
    at_ms        INTEGER NOT NULL
) STRICT;
";

/// Version 3: process beats. Each process sharing the ledger says it is alive, one row each,
/// written on its own (never inside a record's transaction): a replica leaves a submission to
/// its live sender instead of taking it up and handing its unknown outcome to a person.
const V3: &str = "
CREATE TABLE process_beats (
    process INTEGER PRIMARY KEY NOT NULL,
    epoch   INTEGER NOT NULL CHECK (epoch >= 1),
    at_ms   INTEGER NOT NULL CHECK (at_ms >= 0)
) STRICT;
";

const STEPS: &[M<'static>] = &[M::up(V1), M::up(V2).foreign_key_check(), M::up(V3)];

/// The schema version this build writes (the number of migrations).
pub const SCHEMA_VERSION: usize = STEPS.len();

pub(super) const MIGRATIONS: Migrations<'static> = Migrations::from_slice(STEPS);

/// Migration attempts when other processes migrate the same file at the same moment.
const MIGRATE_ATTEMPTS: u32 = 4;

/// Bring the database to [`SCHEMA_VERSION`]. Several processes may open one new (or older)
/// file at once (`toolop call` and `toolop status` started together): the migration crate
/// reads the version outside its transaction, so a second process can start the migration the
/// first one just committed and fail on it ("table records already exists", or a busy
/// snapshot). Its transaction is rolled back whole; if the version moved meanwhile, someone
/// else migrated, and reading it again settles it. A failure with the version unchanged is
/// real and reported.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    // The migration transaction takes the write lock before it reads the schema, so it waits
    // for another migration (busy timeout) instead of racing it.
    conn.set_transaction_behavior(TransactionBehavior::Immediate);
    let mut outcome = Ok(());
    for _ in 0..MIGRATE_ATTEMPTS {
        let before = version(conn)?;
        outcome = MIGRATIONS.to_latest(conn);
        if outcome.is_ok() || version(conn)? == before {
            break;
        }
    }
    conn.set_transaction_behavior(TransactionBehavior::Deferred);
    outcome.map_err(|e| {
        LedgerError::Storage(format!(
            "schema migration to version {SCHEMA_VERSION}: {}",
            migration_error(&e)
        ))
    })
}

fn version(conn: &Connection) -> Result<u64, LedgerError> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// The migration crate's error without the whole migration's SQL it quotes, nor the copy
/// rusqlite quotes for a statement of the batch that failed ("... in <SQL> at offset n").
fn migration_error(e: &rusqlite_migration::Error) -> String {
    match e {
        rusqlite_migration::Error::RusqliteError {
            err: rusqlite::Error::SqlInputError { msg, .. },
            ..
        } => msg.clone(),
        rusqlite_migration::Error::RusqliteError { err, .. } => err.to_string(),
        other => other.to_string(),
    }
}
