//! Where the CLI keeps its state: one SQLite file (`--ledger`, WAL) holding the durable
//! ledger ([`SqliteLedger`]) and, in the CLI's own tables beside the ledger's, what the ledger
//! does not hold: each call node's server target, the MCP session each target last had,
//! operator resolutions, and the ledger's clock origin. One file is the whole durable state:
//! copy it and you have moved the executor.
//!
//! The CLI tables are created idempotently after the ledger's migrations ran (so
//! `cli_resolutions` can point at `records`), and carry their own schema version in
//! `cli_meta`: the ledger's `user_version` belongs to the ledger.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::target::Target;
use super::{Failure, EXIT_LEDGER};
use crate::ledger::{Ledger, LedgerError, SqliteLedger};
use crate::runner::SharedLedger;
use crate::transport::http::{KeptSession, SessionStore};

/// The version of the CLI tables this build writes.
const CLI_SCHEMA_VERSION: u64 = 1;

/// The CLI tables. `IF NOT EXISTS` everywhere: every process runs this when it finds no
/// `cli_meta`, and two racing ones serialise on the write lock.
const CLI_TABLES: &str = "
CREATE TABLE IF NOT EXISTS cli_meta (
    singleton      INTEGER PRIMARY KEY CHECK (singleton = 1),
    schema_version INTEGER NOT NULL,
    -- The Unix time (ms) the ledger's `*_ms` values count from.
    origin_unix_ms INTEGER NOT NULL
) STRICT;
-- Written before the call node's record, so a node always has a server to resume on.
CREATE TABLE IF NOT EXISTS cli_targets (
    call_node_id TEXT PRIMARY KEY NOT NULL,
    target_json  TEXT NOT NULL
) STRICT;
-- The MCP session a target last had, so a later process continues on it.
CREATE TABLE IF NOT EXISTS cli_sessions (
    target_json      TEXT PRIMARY KEY NOT NULL,
    session_id       TEXT NOT NULL,
    initialize_reply TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS cli_resolutions (
    call_node_id TEXT PRIMARY KEY NOT NULL REFERENCES records (call_node_id),
    outcome      TEXT NOT NULL CHECK (outcome IN ('completed', 'failed', 'cancelled', 'never-ran')),
    note         TEXT NOT NULL,
    at_unix_ms   INTEGER NOT NULL
) STRICT;
";

/// What an operator decided about an item in manual reconciliation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub call_node_id: String,
    pub outcome: String,
    pub note: String,
    pub at_unix_ms: u64,
}

/// The ledger plus the CLI tables, as the CLI uses them. Every error comes back as a
/// [`Failure`] naming the file: exit 2 when the path cannot be a ledger, [`EXIT_LEDGER`] when
/// the ledger itself fails.
pub struct LedgerStore {
    ledger: SharedLedger,
    /// A second connection to the same file, for the CLI tables (the ledger's is its own).
    side: Mutex<Connection>,
    path: PathBuf,
    origin_unix_ms: u64,
}

impl LedgerStore {
    /// Open (or create) the ledger file at `path`, migrating an older ledger schema.
    pub fn open(path: &Path) -> Result<LedgerStore, Failure> {
        check_path(path)?;
        let fail = |e: LedgerError| ledger_failure(path, e);
        let ledger = SqliteLedger::open(path).map_err(fail)?;
        let side = Connection::open(path).map_err(|e| fail(e.into()))?;
        side.busy_timeout(std::time::Duration::from_secs(5))
            .and_then(|()| side.pragma_update(None, "foreign_keys", true))
            .map_err(|e| fail(e.into()))?;
        let origin_unix_ms = cli_tables(&side, unix_ms()).map_err(fail)?;
        Ok(LedgerStore {
            ledger: Arc::new(Mutex::new(ledger)),
            side: Mutex::new(side),
            path: path.to_path_buf(),
            origin_unix_ms,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn ledger(&self) -> SharedLedger {
        self.ledger.clone()
    }

    /// A failure of this ledger, for the user.
    pub fn failure(&self, e: LedgerError) -> Failure {
        ledger_failure(&self.path, e)
    }

    /// Run `f` on the ledger (locked); its error becomes a [`Failure`].
    pub fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn Ledger) -> Result<T, LedgerError>,
    ) -> Result<T, Failure> {
        let mut guard = self.ledger.lock().expect("ledger lock");
        f(&mut *guard).map_err(|e| self.failure(e))
    }

    fn side<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Failure> {
        let mut conn = self.side.lock().expect("side lock");
        f(&mut conn).map_err(|e| self.failure(e.into()))
    }

    /// The Unix time the ledger's `*_ms` values count from.
    pub fn origin_unix_ms(&self) -> u64 {
        self.origin_unix_ms
    }

    /// Record the server of a call node. The first one written stays (a node never moves).
    pub fn set_target(&self, call_node_id: &str, target: &Target) -> Result<(), Failure> {
        let json = target_json(target);
        self.side(|c| {
            c.execute(
                "INSERT OR IGNORE INTO cli_targets (call_node_id, target_json) VALUES (?1, ?2)",
                params![call_node_id, json],
            )
            .map(drop)
        })
    }

    pub fn targets(&self) -> Result<BTreeMap<String, Target>, Failure> {
        let rows: Vec<(String, String)> = self.side(|c| {
            let mut stmt = c.prepare("SELECT call_node_id, target_json FROM cli_targets")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        rows.into_iter()
            .map(|(id, json)| {
                let target = serde_json::from_str(&json).map_err(|e| {
                    self.failure(LedgerError::Storage(format!(
                        "cli_targets row of call node {id} does not decode: {e}"
                    )))
                })?;
                Ok((id, target))
            })
            .collect()
    }

    /// The session `target` last had (its server may have forgotten it since).
    pub fn kept_session(&self, target: &Target) -> Result<Option<KeptSession>, Failure> {
        self.side(|c| read_kept(c, &target_json(target)))
    }

    /// The kept session of `target` as processes share it (see [`SessionStore`]), on a
    /// connection of its own: the transport swaps from its own tasks.
    pub fn session_store(&self, target: &Target) -> Result<Arc<dyn SessionStore>, Failure> {
        let conn = Connection::open(&self.path)
            .and_then(|c| {
                c.busy_timeout(std::time::Duration::from_secs(5))
                    .map(|()| c)
            })
            .map_err(|e| self.failure(e.into()))?;
        Ok(Arc::new(TargetSessions {
            conn: Mutex::new(conn),
            target_json: target_json(target),
        }))
    }

    /// Record (or replace) an operator's decision.
    pub fn resolve(&self, r: &Resolution) -> Result<(), Failure> {
        self.side(|c| {
            c.execute(
                "INSERT INTO cli_resolutions (call_node_id, outcome, note, at_unix_ms) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (call_node_id) DO UPDATE SET outcome = excluded.outcome, note = excluded.note, \
                 at_unix_ms = excluded.at_unix_ms",
                params![r.call_node_id, r.outcome, r.note, r.at_unix_ms],
            )
            .map(drop)
        })
    }

    pub fn resolutions(&self) -> Result<BTreeMap<String, Resolution>, Failure> {
        self.side(|c| {
            let mut stmt = c.prepare(
                "SELECT call_node_id, outcome, note, at_unix_ms FROM cli_resolutions ORDER BY call_node_id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(Resolution {
                    call_node_id: r.get(0)?,
                    outcome: r.get(1)?,
                    note: r.get(2)?,
                    at_unix_ms: r.get(3)?,
                })
            })?;
            rows.map(|r| r.map(|r| (r.call_node_id.clone(), r)))
                .collect()
        })
    }
}

/// One target's row of `cli_sessions`, swapped in a write transaction so two processes that
/// open sessions at once end on one.
struct TargetSessions {
    conn: Mutex<Connection>,
    target_json: String,
}

impl TargetSessions {
    fn try_swap(&self, expected: Option<&str>, new: &KeptSession) -> rusqlite::Result<KeptSession> {
        let mut conn = self.conn.lock().expect("session store lock");
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let held = match read_kept(&tx, &self.target_json)? {
            Some(k) if Some(k.session_id.as_str()) != expected => k,
            _ => {
                write_kept(&tx, &self.target_json, new)?;
                new.clone()
            }
        };
        tx.commit()?;
        Ok(held)
    }
}

impl SessionStore for TargetSessions {
    fn swap(&self, expected: Option<&str>, new: &KeptSession) -> Option<KeptSession> {
        self.try_swap(expected, new)
            .map_err(|e| tracing::warn!("cannot keep the session: {e}"))
            .ok()
    }
}

/// The session kept for the target stored under `target_json`.
fn read_kept(c: &Connection, target_json: &str) -> rusqlite::Result<Option<KeptSession>> {
    c.query_row(
        "SELECT session_id, initialize_reply FROM cli_sessions WHERE target_json = ?1",
        [target_json],
        |r| {
            Ok(KeptSession {
                session_id: r.get(0)?,
                initialize_reply: r.get(1)?,
            })
        },
    )
    .optional()
}

fn write_kept(c: &Connection, target_json: &str, session: &KeptSession) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO cli_sessions (target_json, session_id, initialize_reply) VALUES (?1, ?2, ?3) \
         ON CONFLICT (target_json) DO UPDATE SET session_id = excluded.session_id, \
         initialize_reply = excluded.initialize_reply",
        params![target_json, session.session_id, session.initialize_reply],
    )
    .map(drop)
}

/// The key a target is stored under: its JSON (serde writes the fields in one fixed order).
fn target_json(target: &Target) -> String {
    serde_json::to_string(target).expect("targets serialise")
}

/// Create the CLI tables if this file has none yet; the clock origin (`now_unix_ms` for a new
/// file, the first writer's for an existing one).
fn cli_tables(conn: &Connection, now_unix_ms: u64) -> Result<u64, LedgerError> {
    let meta = |c: &Connection| {
        c.query_row(
            "SELECT schema_version, origin_unix_ms FROM cli_meta WHERE singleton = 1",
            [],
            |r| Ok((r.get::<_, u64>(0)?, r.get::<_, u64>(1)?)),
        )
        .optional()
    };
    let has_meta: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = 'cli_meta'",
        [],
        |r| r.get(0),
    )?;
    let found = if has_meta { meta(conn)? } else { None };
    let (version, origin) = match found {
        Some(v) => v,
        None => {
            // Under the write lock: of two processes creating a new ledger, the first origin wins.
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
            tx.execute_batch(CLI_TABLES)?;
            tx.execute(
                "INSERT OR IGNORE INTO cli_meta (singleton, schema_version, origin_unix_ms) VALUES (1, ?1, ?2)",
                params![CLI_SCHEMA_VERSION, now_unix_ms],
            )?;
            let v = meta(&tx)?.expect("just written");
            tx.commit()?;
            v
        }
    };
    if version > CLI_SCHEMA_VERSION {
        return Err(LedgerError::Storage(format!(
            "its CLI tables are version {version}, written by a newer toolop (this one knows {CLI_SCHEMA_VERSION})"
        )));
    }
    Ok(origin)
}

/// What makes a path unusable as a ledger before SQLite is asked: exit 2, naming the problem.
fn check_path(path: &Path) -> Result<(), Failure> {
    let shown = path.display();
    if path.is_dir() {
        return Err(Failure::usage(format!("--ledger {shown}: is a directory")));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(Failure::usage(format!(
                "--ledger {shown}: directory {} does not exist",
                dir.display()
            )));
        }
    }
    // An empty file is a new database to SQLite; anything else must be one already.
    const MAGIC: &[u8; 16] = b"SQLite format 3\0";
    let mut head = Vec::with_capacity(MAGIC.len());
    if let Ok(f) = std::fs::File::open(path) {
        use std::io::Read;
        let _ = f.take(MAGIC.len() as u64).read_to_end(&mut head);
    }
    if !head.is_empty() && head != MAGIC {
        return Err(Failure::usage(format!(
            "--ledger {shown}: not a toolop ledger (the file is not an SQLite database)"
        )));
    }
    Ok(())
}

/// A ledger error for the user: a broken ledger (storage) is [`EXIT_LEDGER`]; a refusal is a
/// request the ledger could not take (exit 2).
pub fn ledger_failure(path: &Path, e: LedgerError) -> Failure {
    let code = match e {
        LedgerError::Storage(_) => EXIT_LEDGER,
        _ => super::EXIT_USAGE,
    };
    Failure {
        code,
        message: format!("ledger {}: {e}", path.display()),
    }
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
