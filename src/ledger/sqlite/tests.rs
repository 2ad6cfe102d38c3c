//! What only the SQLite ledger has: files (WAL, synchronous, reopening, two connections), the
//! schema's own constraints (proved with raw SQL that bypasses every Rust check), migrations
//! from a version-1 database, exactly-once consumption, and storage errors as errors.

use rusqlite::{params, Connection, ErrorCode};

use super::{schema, ConsumeError, SqliteLedger, SCHEMA_VERSION};
use crate::ledger::tests::fixtures::{accept_write, fetching, ids, rec, write};
use crate::ledger::{Ledger, LedgerError, OutboxStatus, RecordHead, INITIAL_EPOCH};
use crate::record::LocalState;

fn refused_by_the_database(res: rusqlite::Result<usize>, what: &str) {
    match res {
        Err(rusqlite::Error::SqliteFailure(e, msg)) => {
            assert_eq!(
                e.code,
                ErrorCode::ConstraintViolation,
                "{what}: refused, but not by a constraint: {msg:?}"
            )
        }
        other => panic!("{what}: the database accepted it ({other:?})"),
    }
}

/// A ledger with one accepted call node `a` (receipt `a#receipt`, outbox seq 1).
fn accepted_a() -> SqliteLedger {
    let mut l = SqliteLedger::open_in_memory().unwrap();
    let r = fetching(&mut l, "a");
    l.commit(accept_write(&r, Some("d1"))).unwrap();
    l
}

#[test]
fn the_database_itself_refuses_a_second_receipt_outbox_entry_or_key() {
    let l = accepted_a();
    let c = &l.conn;
    let digest = l.by_call_node("a").unwrap().unwrap().request_digest;
    let receipt = |receipt_id: &str, node: &str| {
        c.execute(
            "INSERT INTO receipts (receipt_id, call_node_id, operation_id, request_digest, tool_version, execution_epoch, \
             cancel_generation, terminal_state, result_digest, accepted_at_ms) VALUES (?1, ?2, 'op-a', ?3, 'v1', 1, 0, 'completed', 'd2', 3)",
            params![receipt_id, node, digest],
        )
    };
    refused_by_the_database(receipt("a#second", "a"), "a second receipt for call node a");
    refused_by_the_database(
        receipt("z#receipt", "z"),
        "a receipt for a call node without a record",
    );
    let outbox = |receipt_id: &str, node: &str| {
        c.execute("INSERT INTO outbox (receipt_id, call_node_id, terminal_state, status) VALUES (?1, ?2, 'completed', 'ready')", params![receipt_id, node])
    };
    refused_by_the_database(
        outbox("a#receipt", "a"),
        "a second outbox entry for receipt a#receipt",
    );
    // A record b with its own receipt: an outbox entry may not pair b with a's receipt.
    let mut l2 = accepted_a();
    let b = fetching(&mut l2, "b");
    l2.commit(accept_write(&b, Some("d"))).unwrap();
    l2.conn
        .execute("DELETE FROM outbox WHERE call_node_id = 'b'", [])
        .unwrap();
    let res = l2.conn.execute("INSERT INTO outbox (receipt_id, call_node_id, terminal_state, status) VALUES ('a#receipt', 'b', 'completed', 'ready')", []);
    refused_by_the_database(res, "an outbox entry naming another call node's receipt");
    let res = c.execute(
        "INSERT INTO records (call_node_id, submission_key, request_digest, adapter, local_state, is_final, execution_epoch, \
         cancel_generation, version, record_json) VALUES ('b', 'key-a', 'x', 'mcp-2025-11-25', 'SUBMITTING', 0, 1, 0, 1, '{}')",
        [],
    );
    refused_by_the_database(res, "a second record with submission key key-a");
    assert_eq!(l.receipts().unwrap().len(), 1);
    assert_eq!(l.outbox().unwrap().len(), 1);
    assert_eq!(l.records().unwrap().len(), 1);
}

/// The receipts table, not only the record's state, says a node was accepted. A records row put
/// back to FETCHING_RESULT behind the ledger's back (a restore of one table, a hand edit) must not
/// let a second acceptance through: the commit names the receipt that exists, rather than
/// reaching the table's unique key as a storage error. (cargo-mutants: `||` to `&&` in
/// `check_commit` survived every other test.)
#[test]
fn a_receipt_refuses_a_second_acceptance_even_if_the_record_forgot_it() {
    let mut l = SqliteLedger::open_in_memory().unwrap();
    let r = fetching(&mut l, "a");
    let before: String = l
        .conn
        .query_row(
            "SELECT record_json FROM records WHERE call_node_id = 'a'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    l.commit(accept_write(&r, Some("d1"))).unwrap();
    l.conn
        .execute(
            "UPDATE records SET local_state = 'FETCHING_RESULT', is_final = 0, version = ?1, record_json = ?2 \
             WHERE call_node_id = 'a'",
            params![r.version, before],
        )
        .unwrap();
    assert_eq!(
        l.by_call_node("a").unwrap().unwrap().local_state,
        LocalState::FetchingResult,
        "the set-up put the record back"
    );
    match l.commit(accept_write(&r, Some("d2"))) {
        Err(LedgerError::AcceptRefused { why, .. }) => assert!(
            why.contains("a receipt exists already"),
            "refused for {why:?}"
        ),
        other => panic!("a second acceptance over an existing receipt: {other:?}"),
    }
    assert_eq!(l.receipts().unwrap().len(), 1);
    assert_eq!(l.outbox().unwrap().len(), 1);
}

#[test]
fn the_database_itself_keeps_states_epochs_deliveries_and_cancel_requests_well_formed() {
    let mut l = accepted_a();
    l.request_cancel("a", 1).unwrap();
    let c = &l.conn;
    refused_by_the_database(
        c.execute("UPDATE records SET local_state = 'DONE-ISH'", []),
        "an unknown local state",
    );
    refused_by_the_database(
        c.execute("UPDATE records SET version = 0", []),
        "version 0 in the ledger",
    );
    refused_by_the_database(
        c.execute("UPDATE outbox SET status = 'delivered'", []),
        "delivered without naming a consumer",
    );
    refused_by_the_database(
        c.execute("UPDATE outbox SET status = 'lost'", []),
        "an unknown outbox status",
    );
    refused_by_the_database(
        c.execute("UPDATE ledger_meta SET current_epoch = 0", []),
        "epoch 0",
    );
    refused_by_the_database(
        c.execute(
            "INSERT INTO ledger_meta (singleton, current_epoch) VALUES (2, 5)",
            [],
        ),
        "a second epoch row",
    );
    refused_by_the_database(
        c.execute(
            "INSERT INTO cancel_requests (call_node_id, at_ms) VALUES ('a', 2)",
            [],
        ),
        "a second cancel request for a",
    );
    refused_by_the_database(
        c.execute(
            "INSERT INTO cancel_requests (call_node_id, at_ms) VALUES ('zz', 2)",
            [],
        ),
        "a cancel request for no record",
    );
    assert_eq!(l.current_epoch().unwrap(), INITIAL_EPOCH);
}

/// A version-1 database (the fixture) opened by this build: migrated in place, every row kept.
#[test]
fn a_version_1_database_is_migrated_with_every_row_kept() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    schema::MIGRATIONS.to_version(&mut conn, 1).unwrap();
    conn.execute_batch(include_str!("fixtures/v1_ledger.sql"))
        .unwrap();
    let mut l = SqliteLedger::init(conn).unwrap();
    assert_eq!(l.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 3);
    assert_eq!(
        ids(l.records().unwrap()),
        ["v1-done", "v1-purged", "v1-working"]
    );
    assert_eq!(
        l.by_operation_id("op-2").unwrap().unwrap().local_state,
        LocalState::Working
    );
    assert_eq!(l.in_flight().unwrap().len(), 1);
    assert_eq!(l.receipts().unwrap().len(), 2);
    // The newest epoch any record was written under becomes the ledger's.
    assert_eq!(l.current_epoch().unwrap(), 2);
    let out = l.outbox().unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (
            out[0].seq,
            out[0].status,
            out[0].delivered_to.as_deref(),
            out[0].audit_payload.as_ref()
        ),
        (2, OutboxStatus::Ready, None, None)
    );
    assert_eq!(
        out[0].payload,
        Some(serde_json::json!({"content": [{"type": "text", "text": "done"}]}))
    );
    assert_eq!(
        l.reconciliation_queue().unwrap()[0].reason,
        "operator review"
    );
    assert_eq!(
        l.effect_reconciliations().unwrap()[0].reason,
        "late completion"
    );
    // The new tables work on the old data.
    assert_eq!(l.mark_delivered("v1-done#receipt", "billing", 9), Ok(true));
    l.request_cancel("v1-working", 10).unwrap();
    // The next entry is numbered past the deleted one (high-water 3), never reusing it.
    let r = fetching_at_epoch(&mut l, "fresh", 2);
    l.commit(crate::ledger::Write {
        writer_epoch: 2,
        ..accept_write(&r, Some("d"))
    })
    .unwrap();
    assert_eq!(l.outbox_entry("fresh").unwrap().unwrap().seq, 4);
}

fn fetching_at_epoch(l: &mut SqliteLedger, id: &str, epoch: u64) -> crate::record::ToolOperation {
    let mut r = rec(id);
    r.execution_epoch = epoch;
    let r = l.insert(r, epoch).unwrap();
    let mut next = r.clone();
    next.local_state = LocalState::FetchingResult;
    next.operation_id = Some(format!("op-{id}"));
    l.commit(crate::ledger::Write {
        writer_epoch: epoch,
        ..write(&r, next)
    })
    .unwrap()
}

#[test]
fn a_database_from_a_newer_toolop_is_refused_not_downgraded() {
    let mut conn = Connection::open_in_memory().unwrap();
    schema::MIGRATIONS.to_latest(&mut conn).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    let err = SqliteLedger::init(conn).unwrap_err();
    assert!(
        matches!(&err, LedgerError::Storage(why) if why.contains("schema migration")),
        "{err}"
    );
}

/// A migration that fails while the version stays put is a real failure, reported at once:
/// only a version moved by someone else is worth another attempt. A file whose write lock
/// another process holds costs one busy wait (`toolop` answers after its busy timeout, not
/// several of them), and the error says the file is locked in SQLite's words.
/// (cargo-mutants: `||` made `&&` in `migrate`'s retry test, and `migration_error` returning
/// an empty or made-up text, survived.)
#[cfg(not(madsim))]
#[test]
fn a_migration_blocked_by_another_writer_is_tried_once_and_says_the_file_is_locked() {
    use std::cell::Cell;
    thread_local! {
        static LOCK_WAITS: Cell<u32> = const { Cell::new(0) };
    }
    /// Counts each time the migration meets the lock, and gives up at once (no waiting).
    fn count_and_give_up(_: i32) -> bool {
        LOCK_WAITS.with(|n| n.set(n.get() + 1));
        false
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let other = Connection::open(&path).unwrap();
    let mode: String = other
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "the set-up: readers pass a writer's lock");
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut conn = Connection::open(&path).unwrap();
    conn.busy_handler(Some(count_and_give_up)).unwrap();
    let err = schema::migrate(&mut conn).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("ledger storage failed: schema migration to version {SCHEMA_VERSION}: database is locked")
    );
    assert_eq!(
        LOCK_WAITS.with(Cell::get),
        1,
        "one attempt, one wait for the lock"
    );
    other.execute_batch("ROLLBACK").unwrap();
    schema::migrate(&mut conn).expect("migrates once the lock is gone");
    assert_eq!(version_of(&conn), SCHEMA_VERSION as u64);
}

/// A migration that fails on the file's content says why, without quoting the migration's
/// whole SQL: rusqlite's text for a failed statement of a batch ends "in <SQL> at offset n",
/// which put all of version 1's tables into the user's error until `migration_error` took
/// the message alone. (cargo-mutants: `migration_error` returning an empty or made-up text
/// survived.)
#[test]
fn a_failed_migration_says_why_without_quoting_its_sql() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE records (anything TEXT)")
        .unwrap();
    let err = schema::migrate(&mut conn).unwrap_err().to_string();
    assert!(
        err.starts_with("ledger storage failed: schema migration to version")
            && err.contains("table records already exists")
            && !err.contains("CREATE TABLE"),
        "{err}"
    );
    assert_eq!(version_of(&conn), 0, "nothing migrated");
}

fn version_of(conn: &Connection) -> u64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[cfg(not(madsim))]
#[test]
fn a_file_ledger_runs_in_wal_and_keeps_everything_across_reopening() {
    use super::{SqliteOptions, Synchronous};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    for (sync, level) in [(Synchronous::Normal, 1), (Synchronous::Full, 2)] {
        let l = SqliteLedger::open_with(
            &path,
            SqliteOptions {
                synchronous: sync,
                ..SqliteOptions::default()
            },
        )
        .unwrap();
        let mode: String = l
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        let got: i64 = l
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!((mode.as_str(), got), ("wal", level));
    }
    let before = {
        let mut l = SqliteLedger::open(&path).unwrap();
        let r = fetching(&mut l, "a");
        l.commit(accept_write(&r, Some("d1"))).unwrap();
        fetching(&mut l, "b");
        l.request_cancel("b", 4).unwrap();
        l.mark_delivered("a#receipt", "billing", 5).unwrap();
        assert_eq!(l.bump_epoch().unwrap(), 2);
        l.snapshot().unwrap()
    };
    let l = SqliteLedger::open(&path).unwrap();
    assert_eq!(l.snapshot().unwrap(), before);
    assert_eq!(
        l.current_epoch().unwrap(),
        2,
        "the fence survives a restart"
    );
}

/// Processes that open one new file at the same moment (`toolop call` and `toolop status`
/// started together) all get the migrated ledger: one that loses the migration race reads the
/// version again instead of failing on the tables the winner created.
#[cfg(not(madsim))]
#[test]
fn openers_racing_on_one_new_file_all_get_the_migrated_ledger() {
    use std::sync::{Arc, Barrier};
    const OPENERS: usize = 4;
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolop.db");
        let start = Arc::new(Barrier::new(OPENERS));
        let openers: Vec<_> = (0..OPENERS)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    SqliteLedger::open(&path).and_then(|l| l.schema_version())
                })
            })
            .collect();
        for o in openers {
            assert_eq!(o.join().unwrap(), Ok(SCHEMA_VERSION), "round {round}");
        }
    }
}

#[cfg(not(madsim))]
#[test]
fn two_processes_on_one_file_meet_compare_and_swap_and_the_fence() {
    use crate::ledger::tests::fixtures::{assert_conflict, assert_fenced, cancelled};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let mut a = SqliteLedger::open(&path).unwrap();
    let mut b = SqliteLedger::open(&path).unwrap();
    let read_by_a = fetching(&mut a, "n");
    let read_by_b = b.by_call_node("n").unwrap().unwrap();
    assert_eq!(read_by_a, read_by_b);
    cancelled(&mut b, &read_by_b);
    assert_conflict(a.commit(accept_write(&read_by_a, Some("d"))), 2, 3);
    // A rollback in one process fences the other at its next write.
    assert_eq!(b.bump_epoch().unwrap(), 2);
    let now = a.by_call_node("n").unwrap().unwrap();
    let res = a.commit(write(&now, now.clone()));
    assert_fenced(res, 1, 2);
    assert!(a.receipts().unwrap().is_empty());
}

#[test]
fn consume_with_commits_the_consumers_writes_and_the_mark_together() {
    let mut l = SqliteLedger::open_in_memory().unwrap();
    for id in ["a", "b", "c"] {
        let r = fetching(&mut l, id);
        l.commit(accept_write(&r, Some("d"))).unwrap();
    }
    l.conn
        .execute("CREATE TABLE invoices (call_node_id TEXT PRIMARY KEY)", [])
        .unwrap();
    let invoice =
        |e: &crate::ledger::OutboxEntry, tx: &rusqlite::Transaction<'_>| -> Result<(), String> {
            tx.execute(
                "INSERT INTO invoices (call_node_id) VALUES (?1)",
                [&e.call_node_id],
            )
            .map_err(|e| e.to_string())?;
            if e.call_node_id == "b" {
                // Fails after writing its effect: the effect must go with the rollback.
                return Err("the invoice service is down".into());
            }
            Ok(())
        };
    let res = l.consume_with("billing", 10, 7, invoice);
    assert!(
        matches!(&res, Err(ConsumeError::Consumer(why)) if why == "the invoice service is down"),
        "{res:?}"
    );
    let invoices = |l: &SqliteLedger| -> Vec<String> {
        let mut s = l
            .conn
            .prepare("SELECT call_node_id FROM invoices ORDER BY call_node_id")
            .unwrap();
        s.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(invoices(&l), ["a"]);
    let ready: Vec<String> = l
        .outbox_ready(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.call_node_id)
        .collect();
    assert_eq!(
        ready,
        ["b", "c"],
        "b's entry stays ready with its effect rolled back"
    );
    // The consumer recovers: b and c, each exactly once; nothing is left.
    let n = l.consume_with("billing", 10, 8, |e, tx| {
        tx.execute(
            "INSERT INTO invoices (call_node_id) VALUES (?1)",
            [&e.call_node_id],
        )
        .map(|_| ())
    });
    assert_eq!(n.unwrap(), 2);
    assert_eq!(invoices(&l), ["a", "b", "c"]);
    assert_eq!(
        l.consume_with("billing", 10, 9, |_, _| Ok::<(), String>(()))
            .unwrap(),
        0
    );
    assert!(l
        .outbox()
        .unwrap()
        .iter()
        .all(|e| e.delivered_to.as_deref() == Some("billing")));
}

/// A consumer's operator reads `consume_with`'s error as text (the crash-test consumer passes it
/// on with `to_string`): it must say whether the consumer's own work or the ledger failed, and
/// why. (cargo-mutants: `ConsumeError`'s `Display` writing nothing survived.)
#[test]
fn a_consume_error_says_whether_the_consumer_or_the_ledger_failed() {
    let mut l = accepted_a();
    let err = l
        .consume_with("billing", 10, 7, |_, _| Err("the invoice service is down"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the consumer failed: the invoice service is down"
    );
    l.conn
        .execute("UPDATE outbox SET terminal_state = 'exploded'", [])
        .unwrap();
    let err = l
        .consume_with("billing", 10, 8, |_, _| Ok::<(), String>(()))
        .unwrap_err();
    assert_eq!(err.to_string(), "ledger storage failed: column outbox.terminal_state holds \"exploded\", which this build does not know");
}

#[test]
fn unreadable_rows_are_storage_errors_not_panics_or_absences() {
    let mut l = accepted_a();
    fetching(&mut l, "b");
    l.conn.execute("UPDATE records SET record_json = '{\"schema\": \"toolOperation.v1\"' WHERE call_node_id = 'b'", []).unwrap();
    let err = l.by_call_node("b").unwrap_err();
    assert!(
        matches!(&err, LedgerError::Storage(why) if why.contains("does not decode")),
        "{err}"
    );
    assert!(l.records().is_err() && l.in_flight().is_err());
    let w = write(
        &l.by_call_node("a").unwrap().unwrap(),
        l.by_call_node("a").unwrap().unwrap(),
    );
    let mut w_b = w.clone();
    w_b.record.call_node_id = "b".into();
    assert!(
        matches!(l.commit(w_b), Err(LedgerError::Storage(_))),
        "a write over an unreadable record fails, loses nothing"
    );
    l.conn
        .execute("UPDATE outbox SET terminal_state = 'exploded'", [])
        .unwrap();
    let err = l.outbox().unwrap_err();
    assert_eq!(err.to_string(), "ledger storage failed: column outbox.terminal_state holds \"exploded\", which this build does not know");
}

#[cfg(not(madsim))]
#[test]
fn a_file_that_cannot_be_opened_is_named_in_the_error() {
    let missing = std::path::Path::new("/nonexistent-dir-for-toolop/ledger.db");
    let err = SqliteLedger::open(missing).unwrap_err();
    assert!(
        err.to_string()
            .contains("/nonexistent-dir-for-toolop/ledger.db"),
        "the error names the file: {err}"
    );
}

/// Another writer holding the write lock past the busy timeout: `consume_with` says so as
/// `Busy` (a consumer loop calls again), not as a failed ledger, and has written nothing; once
/// the lock goes, the same call consumes the entry once.
#[cfg(not(madsim))]
#[test]
fn a_ledger_locked_past_the_busy_timeout_is_busy_and_loses_nothing() {
    use super::SqliteOptions;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let short = SqliteOptions {
        busy_timeout_ms: 50,
        ..SqliteOptions::default()
    };
    let mut l = SqliteLedger::open_with(&path, short).unwrap();
    let r = fetching(&mut l, "a");
    l.commit(accept_write(&r, Some("d1"))).unwrap();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut called = 0;
    let res = l.consume_with("billing", 10, 7, |_, _| {
        called += 1;
        Ok::<(), String>(())
    });
    match &res {
        Err(e @ ConsumeError::Busy(_)) => assert!(
            e.to_string().contains("try again"),
            "the error says what to do: {e}"
        ),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(called, 0, "nothing was handed to the consumer");
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        l.outbox_ready(0, 10).unwrap().len(),
        1,
        "the entry stays ready"
    );
    let n = l.consume_with("billing", 10, 8, |_, _| Ok::<(), String>(()));
    assert_eq!(n.unwrap(), 1);
    assert!(l.outbox_ready(0, 10).unwrap().is_empty());
}

/// Opens `path` on another thread with `busy_timeout_ms`; the receiver gets the opened
/// ledger's schema version or the error.
#[cfg(not(madsim))]
fn open_on_a_thread(
    path: &std::path::Path,
    busy_timeout_ms: u64,
) -> std::sync::mpsc::Receiver<Result<usize, LedgerError>> {
    use super::SqliteOptions;
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let opened = SqliteLedger::open_with(
            &path,
            SqliteOptions {
                busy_timeout_ms,
                ..SqliteOptions::default()
            },
        )
        .and_then(|l| l.schema_version());
        // The test may have stopped listening (it failed): nothing left to tell.
        let _ = tx.send(opened);
    });
    rx
}

/// Another process holding a write lock on a file not yet in WAL (the switch to WAL needs that
/// lock) makes SQLite answer "busy" at once, without its busy handler. Opening must keep trying
/// while the lock is held and succeed once it goes, not fail on the first answer.
/// (cargo-mutants: `is_busy` made `false`, and `<` made `==` in `open_with`'s retry guard,
/// survived.)
#[cfg(not(madsim))]
#[test]
fn opening_waits_for_another_writer_to_let_go_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let opened = open_on_a_thread(&path, 60_000);
    // The opener meets the lock within a millisecond; a generous wait in case the machine is busy.
    std::thread::sleep(std::time::Duration::from_millis(300));
    if let Ok(early) = opened.try_recv() {
        panic!("opening answered while the other writer held the file: {early:?}");
    }
    other.execute_batch("ROLLBACK").unwrap();
    let opened = opened
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("opening finishes once the lock is gone");
    assert_eq!(opened, Ok(SCHEMA_VERSION));
}

/// A lock held longer than the busy timeout: opening gives up after that long, with an error
/// that names the file and says it is locked, rather than hanging for as long as the lock lasts.
/// (cargo-mutants: the retry guard made `true`, and `&&` made `||`, survived; both retry
/// for as long as the lock is held.)
#[cfg(not(madsim))]
#[test]
fn opening_gives_up_after_its_busy_timeout_and_names_the_locked_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let began = std::time::Instant::now();
    let opened = open_on_a_thread(&path, 200)
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("opening gives up while the lock is still held");
    let waited = began.elapsed();
    other.execute_batch("ROLLBACK").unwrap();
    match opened {
        Err(LedgerError::Storage(why)) => assert!(
            why.contains(&path.display().to_string()) && why.contains("locked"),
            "the error names the file and the lock: {why}"
        ),
        other => panic!("expected a storage error for the locked file, got {other:?}"),
    }
    assert!(
        waited >= std::time::Duration::from_millis(200),
        "it kept trying for its busy timeout first (gave up after {waited:?})"
    );
}

/// Only "busy" is worth waiting for. A file that is not a database fails on the first try: a
/// wrong path given to toolop is answered at once, not after the busy timeout.
/// (cargo-mutants: `is_busy` made `true` survived.)
#[cfg(not(madsim))]
#[test]
fn a_file_that_is_not_a_database_fails_at_once_not_after_the_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "a shopping list, not a ledger\n".repeat(200)).unwrap();
    let opened = open_on_a_thread(&path, 600_000)
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("answered long before its ten-minute busy timeout");
    match opened {
        Err(LedgerError::Storage(why)) => assert!(
            why.contains(&path.display().to_string()) && why.contains("not a database"),
            "the error names the file and what is wrong with it: {why}"
        ),
        other => panic!("expected a storage error for a non-database, got {other:?}"),
    }
}

/// The simulator will run series on `open_in_memory` under `--cfg madsim`: SQLite inside the
/// simulated runtime, two simulated writers racing on one ledger across simulated time.
#[cfg(madsim)]
#[tokio::test]
async fn sqlite_in_memory_runs_inside_the_simulated_runtime() {
    use std::sync::{Arc, Mutex};
    let ledger = Arc::new(Mutex::new(SqliteLedger::open_in_memory().unwrap()));
    ledger
        .lock()
        .unwrap()
        .insert(rec("n"), INITIAL_EPOCH)
        .unwrap();
    let writer = |gen: u32| {
        let ledger = ledger.clone();
        tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..8 {
                let read = ledger.lock().unwrap().by_call_node("n").unwrap().unwrap();
                // The commit takes simulated time: the other writer lands in between.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                let mut next = read.clone();
                next.input_round += gen;
                match ledger.lock().unwrap().commit(write(&read, next)) {
                    Ok(_) => return conflicts,
                    Err(LedgerError::VersionConflict { .. }) => conflicts += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            panic!("no commit in 8 attempts")
        })
    };
    let (a, b) = (writer(1), writer(10));
    let conflicts = a.await.unwrap() + b.await.unwrap();
    let r = ledger.lock().unwrap().by_call_node("n").unwrap().unwrap();
    assert_eq!(
        (r.version, r.input_round),
        (3, 11),
        "both writes landed, neither lost"
    );
    assert!(conflicts >= 1, "the writers raced");
}

fn schema_rows(conn: &Connection) -> Vec<(String, String, Option<String>)> {
    conn.prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The simulator's copy of a migrated empty database is that database: the same tables,
/// indexes and constraints, the same schema version and epoch, foreign keys enforced; and each
/// copy is its own database.
#[test]
fn a_copied_ledger_is_a_migrated_one_and_copies_share_nothing() {
    let migrated = SqliteLedger::open_in_memory().unwrap();
    let mut copy = SqliteLedger::open_in_memory_copy().unwrap();
    assert_eq!(schema_rows(&copy.conn), schema_rows(&migrated.conn));
    assert!(schema_rows(&copy.conn).len() > 5);
    assert_eq!(copy.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(copy.current_epoch().unwrap(), INITIAL_EPOCH);
    let fk: u64 = copy
        .conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        fk, 1,
        "foreign keys are a connection setting and must be set again"
    );
    refused_by_the_database(
        copy.conn.execute(
            "INSERT INTO operation_ids (operation_id, call_node_id) VALUES ('op', 'nobody')",
            [],
        ),
        "an operation id of a record that does not exist",
    );
    copy.insert(rec("a"), INITIAL_EPOCH).unwrap();
    let other = SqliteLedger::open_in_memory_copy().unwrap();
    assert_eq!(other.records().unwrap(), vec![]);
    assert_eq!(copy.records().unwrap().len(), 1);
}

#[test]
fn a_remembered_record_is_returned_only_while_the_row_holds_the_very_text_it_came_from() {
    let mut l = SqliteLedger::open_in_memory().unwrap();
    let r = fetching(&mut l, "a");
    assert_eq!(l.by_call_node("a").unwrap().unwrap(), r);
    assert_eq!(l.decoded.len(), 1, "the committed record is remembered");
    // Another writer (or a hand edit) changes the text and keeps the version: the row wins.
    let mut edited = r.clone();
    edited.tool_version = "v2".into();
    l.conn
        .execute(
            "UPDATE records SET record_json = ?1 WHERE call_node_id = 'a'",
            [serde_json::to_string(&edited).unwrap()],
        )
        .unwrap();
    assert_eq!(l.by_call_node("a").unwrap().unwrap().tool_version, "v2");
    // The version column is still checked against the remembered record's.
    l.conn
        .execute(
            "UPDATE records SET version = version + 7 WHERE call_node_id = 'a'",
            [],
        )
        .unwrap();
    let err = l.by_call_node("a").unwrap_err();
    assert!(err.to_string().contains("its row says"), "{err}");
}

#[test]
fn a_record_head_follows_the_row_as_by_call_node_does() {
    let mut l = SqliteLedger::open_in_memory().unwrap();
    let r = fetching(&mut l, "a");
    let head = |l: &SqliteLedger| l.record_head("a");
    let via_record = |l: &SqliteLedger| l.by_call_node("a").map(|r| r.as_ref().map(RecordHead::of));
    assert_eq!(
        head(&l).unwrap(),
        via_record(&l).unwrap(),
        "a remembered record"
    );
    // A hand edit keeps the version and changes the text: the head is read from the row.
    let mut edited = r.clone();
    edited.result_digest = Some("edited".into());
    l.conn
        .execute(
            "UPDATE records SET record_json = ?1 WHERE call_node_id = 'a'",
            [serde_json::to_string(&edited).unwrap()],
        )
        .unwrap();
    assert_eq!(
        head(&l).unwrap().unwrap().result_digest.as_deref(),
        Some("edited")
    );
    // A version column that disagrees with the text fails the head as it fails the record.
    l.conn
        .execute(
            "UPDATE records SET version = version + 7 WHERE call_node_id = 'a'",
            [],
        )
        .unwrap();
    assert_eq!(head(&l).unwrap_err(), via_record(&l).unwrap_err());
    // So does a row that does not decode, remembered or not.
    l.conn
        .execute(
            "UPDATE records SET record_json = '{' WHERE call_node_id = 'a'",
            [],
        )
        .unwrap();
    assert_eq!(head(&l).unwrap_err(), via_record(&l).unwrap_err());
}

#[test]
fn a_write_that_fails_after_its_update_rolls_back_whole_and_leaves_the_connection_usable() {
    let mut l = SqliteLedger::open_in_memory().unwrap();
    let r = fetching(&mut l, "a");
    l.conn
        .execute_batch(
            "CREATE TRIGGER no_receipts BEFORE INSERT ON receipts \
             BEGIN SELECT RAISE(ABORT, 'the disk says no'); END;",
        )
        .unwrap();
    // The record's UPDATE runs before the receipt's INSERT fails.
    let err = l.commit(accept_write(&r, Some("d1"))).unwrap_err();
    assert!(err.to_string().contains("the disk says no"), "{err}");
    assert_eq!(
        l.by_call_node("a").unwrap().unwrap(),
        r,
        "the update was undone"
    );
    assert!(l.conn.is_autocommit(), "no transaction was left open");
    l.conn.execute_batch("DROP TRIGGER no_receipts").unwrap();
    l.commit(accept_write(&r, Some("d1"))).unwrap();
    assert_eq!(l.receipts().unwrap().len(), 1);
}

#[test]
fn the_decoded_records_are_kept_per_node_and_bounded() {
    let decoded = super::decoded::Decoded::default();
    let json = |r: &crate::record::ToolOperation| serde_json::to_string(r).unwrap();
    for id in ["a", "b", "c"] {
        let r = rec(id);
        decoded.remember(&json(&r), &r);
    }
    assert_eq!(
        decoded.len(),
        3,
        "one entry per node, none dropped below the bound"
    );
    let again = rec("b");
    decoded.remember(&json(&again), &again);
    assert_eq!(
        decoded.len(),
        3,
        "a node remembered again replaces its entry"
    );
    for i in 0..2_000 {
        let r = rec(&format!("n{i}"));
        decoded.remember(&json(&r), &r);
        assert!(decoded.len() <= 1_024, "bounded: {}", decoded.len());
    }
}
