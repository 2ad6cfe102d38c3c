//! Where the CLI keeps its state: the ledger, and a side table of what the ledger does not
//! hold (each call node's server target, operator resolutions, the ledger's clock origin).
//!
//! INTERIM: until the SQLite ledger lands, the ledger is the in-memory one made durable by a
//! journal (every insert and commit is one synced line, replayed on open; see `journal.rs`).
//! [`LedgerStore::open`] is the one place to swap it for `SqliteLedger::open(path)`; the side
//! table lives in its own file (`<ledger>.side.jsonl`) and does not change with it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::journal::Journal;
use super::target::Target;
use crate::core::AcceptSpec;
use crate::ledger::{
    CancelRequest, EffectItem, Ledger, LedgerError, MemoryLedger, OutboxEntry, Receipt,
    ReconcileItem, Write,
};
use crate::record::{TerminalState, ToolOperation};
use crate::runner::SharedLedger;
use crate::transport::http::KeptSession;

/// One journal line of the interim ledger.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Entry {
    Insert { record: ToolOperation },
    Commit { write: WriteLine },
    Cancel { call_node_id: String, at_ms: u64 },
    TakeCancel { call_node_id: String },
}

#[derive(Serialize, Deserialize)]
struct AcceptLine {
    terminal: TerminalState,
    result_digest: Option<String>,
    payload: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct WriteLine {
    expected_version: u64,
    record: ToolOperation,
    accept: Option<AcceptLine>,
    reconcile: Option<String>,
    effect: Option<String>,
    now_ms: u64,
}

impl WriteLine {
    fn from(w: &Write) -> WriteLine {
        WriteLine {
            expected_version: w.expected_version,
            record: w.record.clone(),
            accept: w.accept.as_ref().map(|a| AcceptLine {
                terminal: a.terminal,
                result_digest: a.result_digest.clone(),
                payload: a.payload.clone(),
            }),
            reconcile: w.reconcile.clone(),
            effect: w.effect.clone(),
            now_ms: w.now_ms,
        }
    }

    fn into_write(self) -> Write {
        Write {
            expected_version: self.expected_version,
            record: self.record,
            accept: self.accept.map(|a| AcceptSpec {
                terminal: a.terminal,
                result_digest: a.result_digest,
                payload: a.payload,
            }),
            reconcile: self.reconcile,
            effect: self.effect,
            now_ms: self.now_ms,
        }
    }
}

struct Inner {
    journal: Journal,
    mem: MemoryLedger,
}

impl Inner {
    /// Replay what other processes appended. A line that no longer applies (a writer that lost a
    /// compare-and-swap race it did not see) is skipped, exactly as its writer was refused.
    fn refresh(&mut self) -> Result<(), String> {
        for line in self.journal.read_new()? {
            let entry: Entry = serde_json::from_str(&line)
                .map_err(|e| format!("{}: unreadable entry: {e}", self.journal.path().display()))?;
            let _ = apply(&mut self.mem, entry);
        }
        Ok(())
    }
}

fn apply(mem: &mut MemoryLedger, entry: Entry) -> Result<(), LedgerError> {
    match entry {
        Entry::Insert { record } => mem.insert(record).map(drop),
        Entry::Commit { write } => mem.commit(write.into_write()).map(drop),
        Entry::Cancel {
            call_node_id,
            at_ms,
        } => mem.request_cancel(&call_node_id, at_ms),
        Entry::TakeCancel { call_node_id } => mem.take_cancel_request(&call_node_id),
    }
}

/// The interim durable ledger: [`MemoryLedger`] semantics, journal durability.
pub struct JournalLedger {
    inner: RefCell<Inner>,
}

impl JournalLedger {
    pub fn open(path: &Path) -> Result<JournalLedger, String> {
        let mut inner = Inner {
            journal: Journal::open(path)?,
            mem: MemoryLedger::new(),
        };
        inner.journal.locked(false, |_| ())?;
        inner.refresh()?;
        Ok(JournalLedger {
            inner: RefCell::new(inner),
        })
    }

    /// A read: catch up with other writers first (a failed catch-up reads what we have).
    fn read<T>(&self, f: impl FnOnce(&MemoryLedger) -> T) -> T {
        let mut inner = self.inner.borrow_mut();
        if let Err(e) = inner.refresh() {
            tracing::warn!("{e}");
        }
        f(&inner.mem)
    }

    /// A write: under the exclusive lock, catch up, apply to a copy, append, then keep the copy.
    fn write<T>(
        &mut self,
        entry: Entry,
        f: impl FnOnce(&mut MemoryLedger) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let line = serde_json::to_string(&entry).expect("entries serialise");
        let Inner { journal, mem } = self.inner.get_mut();
        journal
            .locked(true, |journal| {
                for line in journal.read_new().map_err(LedgerError::Invalid)? {
                    let entry: Entry = serde_json::from_str(&line).map_err(|e| {
                        LedgerError::Invalid(format!("unreadable ledger entry: {e}"))
                    })?;
                    let _ = apply(mem, entry);
                }
                let mut next = mem.clone();
                let out = f(&mut next)?;
                journal.append(&line).map_err(LedgerError::Invalid)?;
                *mem = next;
                Ok(out)
            })
            .map_err(LedgerError::Invalid)?
    }
}

impl Ledger for JournalLedger {
    fn insert(&mut self, record: ToolOperation) -> Result<ToolOperation, LedgerError> {
        self.write(
            Entry::Insert {
                record: record.clone(),
            },
            |m| m.insert(record),
        )
    }

    fn commit(&mut self, write: Write) -> Result<ToolOperation, LedgerError> {
        self.write(
            Entry::Commit {
                write: WriteLine::from(&write),
            },
            |m| m.commit(write),
        )
    }

    fn by_call_node(&self, call_node_id: &str) -> Option<ToolOperation> {
        self.read(|m| m.by_call_node(call_node_id))
    }

    fn by_operation_id(&self, operation_id: &str) -> Option<ToolOperation> {
        self.read(|m| m.by_operation_id(operation_id))
    }

    fn by_submission_key(&self, key: &str) -> Option<ToolOperation> {
        self.read(|m| m.by_submission_key(key))
    }

    fn records(&self) -> Vec<ToolOperation> {
        self.read(|m| m.records())
    }

    fn receipts(&self) -> Vec<Receipt> {
        self.read(|m| m.receipts())
    }

    fn outbox(&self) -> Vec<OutboxEntry> {
        self.read(|m| m.outbox())
    }

    fn reconciliation_queue(&self) -> Vec<ReconcileItem> {
        self.read(|m| m.reconciliation_queue())
    }

    fn effect_reconciliations(&self) -> Vec<EffectItem> {
        self.read(|m| m.effect_reconciliations())
    }

    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError> {
        self.write(
            Entry::Cancel {
                call_node_id: call_node_id.to_string(),
                at_ms,
            },
            |m| m.request_cancel(call_node_id, at_ms),
        )
    }

    fn cancel_requests(&self) -> Vec<CancelRequest> {
        self.read(|m| m.cancel_requests())
    }

    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError> {
        self.write(
            Entry::TakeCancel {
                call_node_id: call_node_id.to_string(),
            },
            |m| m.take_cancel_request(call_node_id),
        )
    }
}

/// What an operator decided about an item in manual reconciliation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub call_node_id: String,
    pub outcome: String,
    pub note: String,
    pub at_unix_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum SideEntry {
    /// The ledger's clock origin: record times are milliseconds since this Unix time.
    Origin {
        unix_ms: u64,
    },
    Target {
        call_node_id: String,
        target: Target,
    },
    Resolve {
        resolution: Resolution,
    },
    /// The MCP session a target last had, so a later process can continue on it.
    Session {
        target: Target,
        session: KeptSession,
    },
}

#[derive(Default)]
struct Side {
    origin_unix_ms: Option<u64>,
    targets: BTreeMap<String, Target>,
    resolutions: BTreeMap<String, Resolution>,
    sessions: BTreeMap<Target, KeptSession>,
}

/// The ledger plus the side table, as the CLI uses them.
pub struct LedgerStore {
    ledger: SharedLedger,
    side: Mutex<(Journal, Side)>,
    path: PathBuf,
}

impl LedgerStore {
    /// Open (or create) the ledger at `path` and its side table beside it.
    pub fn open(path: &Path) -> Result<LedgerStore, String> {
        // The one line to change when the SQLite ledger lands.
        let ledger: SharedLedger = Arc::new(Mutex::new(JournalLedger::open(path)?));
        let mut side_path = path.as_os_str().to_owned();
        side_path.push(".side.jsonl");
        let journal = Journal::open(Path::new(&side_path))?;
        let store = LedgerStore {
            ledger,
            side: Mutex::new((journal, Side::default())),
            path: path.to_path_buf(),
        };
        store.refresh_side()?;
        if store
            .side
            .lock()
            .expect("side lock")
            .1
            .origin_unix_ms
            .is_none()
        {
            store.append_side(SideEntry::Origin { unix_ms: unix_ms() })?;
        }
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn ledger(&self) -> SharedLedger {
        self.ledger.clone()
    }

    fn refresh_side(&self) -> Result<(), String> {
        let mut guard = self.side.lock().expect("side lock");
        let (journal, side) = &mut *guard;
        let lines = journal.locked(false, |j| j.read_new())??;
        for line in lines {
            apply_side(side, &line, journal.path())?;
        }
        Ok(())
    }

    fn append_side(&self, entry: SideEntry) -> Result<(), String> {
        let line = serde_json::to_string(&entry).expect("side entries serialise");
        let mut guard = self.side.lock().expect("side lock");
        let (journal, side) = &mut *guard;
        journal.locked(true, |j| -> Result<(), String> {
            for old in j.read_new()? {
                apply_side(side, &old, j.path())?;
            }
            // Two processes opening a new ledger at once: the first origin wins.
            if matches!(entry, SideEntry::Origin { .. }) && side.origin_unix_ms.is_some() {
                return Ok(());
            }
            j.append(&line)?;
            apply_side(side, &line, j.path())
        })?
    }

    /// The Unix time the ledger's `*_ms` values count from.
    pub fn origin_unix_ms(&self) -> u64 {
        self.side
            .lock()
            .expect("side lock")
            .1
            .origin_unix_ms
            .expect("written on open")
    }

    pub fn set_target(&self, call_node_id: &str, target: &Target) -> Result<(), String> {
        self.append_side(SideEntry::Target {
            call_node_id: call_node_id.to_string(),
            target: target.clone(),
        })
    }

    pub fn targets(&self) -> Result<BTreeMap<String, Target>, String> {
        self.refresh_side()?;
        Ok(self.side.lock().expect("side lock").1.targets.clone())
    }

    pub fn resolve(&self, resolution: Resolution) -> Result<(), String> {
        self.append_side(SideEntry::Resolve { resolution })
    }

    /// The session `target` last had (its server may have forgotten it since).
    pub fn kept_session(&self, target: &Target) -> Result<Option<KeptSession>, String> {
        self.refresh_side()?;
        Ok(self
            .side
            .lock()
            .expect("side lock")
            .1
            .sessions
            .get(target)
            .cloned())
    }

    pub fn keep_session(&self, target: &Target, session: &KeptSession) -> Result<(), String> {
        self.append_side(SideEntry::Session {
            target: target.clone(),
            session: session.clone(),
        })
    }

    pub fn resolutions(&self) -> Result<BTreeMap<String, Resolution>, String> {
        self.refresh_side()?;
        Ok(self.side.lock().expect("side lock").1.resolutions.clone())
    }
}

fn apply_side(side: &mut Side, line: &str, path: &Path) -> Result<(), String> {
    let entry: SideEntry = serde_json::from_str(line)
        .map_err(|e| format!("{}: unreadable entry: {e}", path.display()))?;
    match entry {
        SideEntry::Origin { unix_ms } => {
            side.origin_unix_ms.get_or_insert(unix_ms);
        }
        SideEntry::Target {
            call_node_id,
            target,
        } => {
            side.targets.entry(call_node_id).or_insert(target);
        }
        SideEntry::Session { target, session } => {
            side.sessions.insert(target, session);
        }
        SideEntry::Resolve { resolution } => {
            side.resolutions
                .insert(resolution.call_node_id.clone(), resolution);
        }
    }
    Ok(())
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{AdapterId, LocalState};

    fn rec(id: &str) -> ToolOperation {
        ToolOperation::new(
            id,
            "t",
            "v1",
            serde_json::json!({}),
            AdapterId::Mcp20251125,
            &format!("k-{id}"),
            1,
            0,
            60_000,
        )
    }

    #[test]
    fn a_second_handle_sees_the_first_ones_writes_and_loses_cas_races() {
        let dir =
            std::env::temp_dir().join(format!("toolop-store-{}-{}", std::process::id(), unix_ms()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("l.db");
        let mut a = JournalLedger::open(&path).unwrap();
        let mut b = JournalLedger::open(&path).unwrap();
        let r = a.insert(rec("n1")).unwrap();
        assert_eq!(b.by_call_node("n1").unwrap().version, 1);
        let mut next = r.clone();
        next.local_state = LocalState::Working;
        next.operation_id = Some("op".into());
        let w = Write {
            expected_version: 1,
            record: next.clone(),
            accept: None,
            reconcile: None,
            effect: None,
            now_ms: 1,
        };
        a.commit(w.clone()).unwrap();
        // b read version 1 before; its write at version 1 must be refused.
        assert!(matches!(
            b.commit(w),
            Err(LedgerError::VersionConflict { .. })
        ));
        b.request_cancel("n1", 5).unwrap();
        assert_eq!(a.cancel_requests().len(), 1);
        // A torn tail (a writer killed mid-append) is cut off by the next writer.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"op\":\"ins")
            .unwrap();
        a.take_cancel_request("n1").unwrap();
        let c = JournalLedger::open(&path).unwrap();
        assert!(c.cancel_requests().is_empty());
        assert_eq!(
            c.by_call_node("n1").unwrap().local_state,
            LocalState::Working
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use std::io::Write as _;
}
