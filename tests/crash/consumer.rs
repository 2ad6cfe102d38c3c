//! The outbox consumer of the kill -9 proof: a separate process (this test binary started
//! again with [`ROLE_ENV`] set) that reads ready entries with
//! `SqliteLedger::consume_with` and writes one row per entry into its own table in the same
//! database, in the transaction that marks the entry delivered. The driver kills it with
//! SIGKILL at random instants (some inside that transaction: each entry holds it a few ms).
//! The table has no unique constraint, so an entry consumed twice shows as two rows.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolop::ledger::{rusqlite, ConsumeError, SqliteLedger};

pub const CONSUMER_ID: &str = "crash-consumer";
/// `consume` (until killed) or `drain` (until nothing is ready): run as the consumer.
pub const ROLE_ENV: &str = "TOOLOP_CRASH_CONSUMER";
/// The ledger file the consumer reads.
pub const LEDGER_ENV: &str = "TOOLOP_CRASH_LEDGER";

const TABLE: &str = "CREATE TABLE IF NOT EXISTS crash_consumed (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    receipt_id TEXT NOT NULL,
    call_node_id TEXT NOT NULL,
    terminal_state TEXT NOT NULL,
    payload_json TEXT,
    consumer_pid INTEGER NOT NULL
)";

/// `Some((drain, ledger))` when this process was started as the consumer.
pub fn role_from_env() -> Option<(bool, PathBuf)> {
    let role = std::env::var(ROLE_ENV).ok()?;
    let ledger = std::env::var_os(LEDGER_ENV)
        .unwrap_or_else(|| panic!("{ROLE_ENV} is set but {LEDGER_ENV} is not"));
    match role.as_str() {
        "consume" => Some((false, ledger.into())),
        "drain" => Some((true, ledger.into())),
        other => panic!("{ROLE_ENV}={other}: expected consume or drain"),
    }
}

/// Start this test binary as the consumer (`drain`: until nothing is ready).
pub fn command(ledger: &Path, drain: bool) -> std::process::Command {
    let mut c = std::process::Command::new(std::env::current_exe().expect("test binary"));
    c.env(ROLE_ENV, if drain { "drain" } else { "consume" })
        .env(LEDGER_ENV, ledger);
    c
}

/// One row the consumer wrote.
#[derive(Debug)]
pub struct Consumed {
    pub receipt_id: String,
    pub call_node_id: String,
    pub terminal_state: String,
    pub payload: Option<serde_json::Value>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Consume until killed (`drain == false`) or until nothing is ready (`drain == true`).
pub fn run(ledger: &Path, drain: bool) -> Result<(), String> {
    let conn = rusqlite::Connection::open(ledger).map_err(|e| e.to_string())?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    conn.execute(TABLE, []).map_err(|e| e.to_string())?;
    drop(conn);
    let mut l = SqliteLedger::open(ledger).map_err(|e| e.to_string())?;
    let pid = std::process::id();
    // Bounded: a consumer the driver forgot still ends (10 minutes of polls).
    for poll in 0u64..60_000 {
        let batch = 1 + (poll % 3) as usize;
        let n = l
            .consume_with(CONSUMER_ID, batch, now_ms(), |entry, tx| {
                let payload = entry.payload.as_ref().map(|p| p.to_string());
                tx.execute(
                    "INSERT INTO crash_consumed (receipt_id, call_node_id, terminal_state, payload_json, consumer_pid) VALUES (?1, ?2, ?3, ?4, ?5)",
                    rusqlite::params![
                        entry.receipt_id,
                        entry.call_node_id,
                        entry.terminal_state.name(),
                        payload,
                        pid
                    ],
                )?;
                // Hold the transaction a moment: the driver's kills land inside it too.
                std::thread::sleep(Duration::from_millis(2));
                Ok::<(), rusqlite::Error>(())
            });
        let n = match n {
            // Executors held the lock past the busy timeout (an overlapping second executor on
            // a loaded machine): a consumer loop tries again, as a real one would. Not read as
            // "nothing ready", which would end a drain with entries still ready.
            Err(ConsumeError::Busy(why)) => {
                // Said in the driver's log, so a run shows how often it happens.
                eprintln!("crash_kill9 consumer: busy, trying again: {why}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            other => other.map_err(|e| e.to_string())?,
        };
        if n == 0 {
            if drain {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Err("the consumer ran out of polls".into())
}

/// Every row the consumer ever wrote (none if it never started).
pub fn rows(ledger: &Path) -> Result<Vec<Consumed>, String> {
    let conn = rusqlite::Connection::open(ledger).map_err(|e| e.to_string())?;
    conn.execute(TABLE, []).map_err(|e| e.to_string())?;
    let mut stmt = conn
        .prepare("SELECT receipt_id, call_node_id, terminal_state, payload_json FROM crash_consumed ORDER BY n")
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for row in rows {
        let (receipt_id, call_node_id, terminal_state, payload) = row.map_err(|e| e.to_string())?;
        let payload = match payload {
            Some(p) => Some(serde_json::from_str(&p).map_err(|e| e.to_string())?),
            None => None,
        };
        out.push(Consumed {
            receipt_id,
            call_node_id,
            terminal_state,
            payload,
        });
    }
    Ok(out)
}
