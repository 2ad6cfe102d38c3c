//! The world's ledger: one shared ledger (in memory, or SQLite in memory with
//! `ledger = "sqlite"`) behind a front per executor process. The front is the world's, not the
//! executor's: it records every write as the ledger saw it (`What::Ledger`): which process wrote
//! (the epoch the world issued it, never the token it presented), the version it last read, the
//! version and epoch the ledger held, and what came of it. The lost-update, fenced-write and
//! digest checkers read those facts.
//!
//! The front also injects the ledger faults: a commit that takes simulated time (so other
//! writers act between a read and its commit, through the runner's `CommitDelay` hook) and a
//! commit whose reply is lost (it happened; the process stops before learning it, as one whose
//! connection to a remote database died after `COMMIT` would).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::time::Duration;
use toolop::ledger::{
    Beat, CancelRequest, EffectItem, Ledger, LedgerError, MemoryLedger, OutboxEntry, Receipt,
    ReconcileItem, RecordHead, SqliteLedger, Write,
};
use toolop::record::{LocalState, TerminalState, ToolOperation};
use toolop::runner::CommitDelay;

use super::World;
use crate::series::faults::FaultKind;
use crate::trace::{FaultDetail, What, WorldAction};

/// Which ledger implementation a series runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerKind {
    /// The in-memory reference ledger (the default).
    #[default]
    Memory,
    /// SQLite in memory: no file, deterministic; proves the SQL transaction logic under the
    /// same checkers.
    Sqlite,
}

impl LedgerKind {
    pub fn name(self) -> &'static str {
        match self {
            LedgerKind::Memory => "memory",
            LedgerKind::Sqlite => "sqlite",
        }
    }

    /// A fresh, empty ledger of this kind.
    pub fn open(self) -> Box<dyn Ledger + Send> {
        match self {
            LedgerKind::Memory => Box::new(MemoryLedger::new()),
            // An in-memory SQLite database touches no file; failing to create one is a broken
            // build (the bundled library), not an operating error of a series.
            LedgerKind::Sqlite => Box::new(
                SqliteLedger::open_in_memory_copy().expect("an in-memory SQLite ledger opens"),
            ),
        }
    }
}

/// The one ledger every executor process of a series shares.
pub(crate) type WorldLedger = Arc<Mutex<Box<dyn Ledger + Send>>>;

/// What came of one write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WriteOutcome {
    Committed {
        version: u64,
    },
    /// Committed, and the writer never learnt it (the `ledger_commit_lost_reply` fault).
    ReplyLost {
        version: u64,
    },
    Refused {
        error: String,
    },
}

impl WriteOutcome {
    /// The version the write produced, if it landed.
    pub fn landed(&self) -> Option<u64> {
        match self {
            WriteOutcome::Committed { version } | WriteOutcome::ReplyLost { version } => {
                Some(*version)
            }
            WriteOutcome::Refused { .. } => None,
        }
    }
}

/// One commit as the world's ledger saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LedgerWrite {
    pub node: String,
    /// The writing process: the epoch the world started it under, and its incarnation.
    pub epoch: u64,
    pub incarnation: u32,
    /// The fencing token the write presented.
    pub writer_epoch: u64,
    /// The ledger's current epoch when the write ran.
    pub ledger_epoch: u64,
    pub expected_version: u64,
    /// The version this process last read for the node (a read, its own insert or its own
    /// landed write), if it ever did.
    pub read_version: Option<u64>,
    /// The record as the ledger held it when the write ran.
    pub stored_version: Option<u64>,
    pub stored_state: Option<LocalState>,
    pub recorded_digest: Option<String>,
    /// The record the write carried.
    pub state: LocalState,
    /// Submissions the record says were sent: a write that raises it committed a submission
    /// (judges tell from it whose submission a record holds).
    pub submit_attempts: u32,
    pub result_digest: Option<String>,
    /// The server's operation the record names, once the process knows it (judges tell from
    /// it whether a process wrote down a submission's reply).
    pub operation_id: Option<String>,
    /// The receipt an acceptance asked for.
    pub receipt: Option<TerminalState>,
    /// The open question the record holds (its pending input), read from its words as the
    /// approval agent reads them: judges tell from it when a question was first recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<crate::trace::Question>,
    /// Simulated time the world held this commit between the process's read and the write
    /// (`faults.ledger_commit_ms`, or a slow commit): what the process decided, it decided this
    /// long before the write's time.
    pub delay_ms: u64,
    #[serde(flatten)]
    pub outcome: WriteOutcome,
}

/// One executor process's door to the world's ledger.
pub(crate) struct ProcessLedger {
    world: Arc<World>,
    epoch: u64,
    incarnation: u32,
    /// Node -> the version this process last saw for it. Reads take `&self`, so a cell.
    seen: RefCell<BTreeMap<String, u64>>,
    /// The delay the world drew for this process's next commit, and its pause
    /// ([`SimCommitDelay`]).
    held: CommitDelayCell,
}

impl ProcessLedger {
    pub fn new(
        world: Arc<World>,
        epoch: u64,
        incarnation: u32,
        held: CommitDelayCell,
    ) -> ProcessLedger {
        ProcessLedger {
            world,
            epoch,
            incarnation,
            seen: RefCell::new(BTreeMap::new()),
            held,
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Box<dyn Ledger + Send>> {
        self.world.ledger.lock().expect("ledger lock")
    }

    fn saw(&self, node: &str, version: u64) {
        self.seen.borrow_mut().insert(node.to_string(), version);
    }

    /// A process whose crash fail point fired is dead: a real one (kill -9, power loss) runs
    /// no clean-up, so no write of its lands, and the world records each it tried
    /// (`nothing_written_after_crash` judges them). Without this the simulator would let a
    /// crash end gracefully, and code that leans on that would pass here and fail in life.
    fn dead(&self, write: &'static str, node: Option<&str>) -> Result<(), LedgerError> {
        if !self.held.lock().expect("delay lock").crashed {
            return Ok(());
        }
        self.world.push(What::World {
            action: WorldAction::WriteAfterCrash {
                incarnation: self.incarnation,
                write: write.into(),
                node: node.map(String::from),
            },
        });
        Err(LedgerError::Storage(
            "the process crashed: nothing it writes lands".into(),
        ))
    }
}

impl Ledger for ProcessLedger {
    fn current_epoch(&self) -> Result<u64, LedgerError> {
        self.shared().current_epoch()
    }

    fn bump_epoch(&mut self) -> Result<u64, LedgerError> {
        self.dead("bump_epoch", None)?;
        self.shared().bump_epoch()
    }

    fn insert(
        &mut self,
        record: ToolOperation,
        writer_epoch: u64,
    ) -> Result<ToolOperation, LedgerError> {
        self.dead("insert", Some(&record.call_node_id))?;
        let inserted = self.shared().insert(record, writer_epoch);
        if let Ok(r) = &inserted {
            self.saw(&r.call_node_id, r.version);
            self.world.push(What::Insert {
                node: r.call_node_id.clone(),
                epoch: self.epoch,
                incarnation: self.incarnation,
                version: r.version,
            });
        }
        inserted
    }

    fn commit(&mut self, write: Write) -> Result<ToolOperation, LedgerError> {
        self.dead("commit", Some(&write.record.call_node_id))?;
        let node = write.record.call_node_id.clone();
        let mut fact = LedgerWrite {
            node: node.clone(),
            epoch: self.epoch,
            incarnation: self.incarnation,
            writer_epoch: write.writer_epoch,
            ledger_epoch: 0,
            expected_version: write.expected_version,
            read_version: self.seen.borrow().get(&node).copied(),
            stored_version: None,
            stored_state: None,
            recorded_digest: None,
            state: write.record.local_state,
            submit_attempts: write.record.submit_attempts,
            result_digest: write.record.result_digest.clone(),
            operation_id: write.record.operation_id.clone(),
            receipt: write.accept.as_ref().map(|a| a.terminal),
            question: write
                .record
                .pending_input
                .as_ref()
                .and_then(|p| super::approval::question_in(&p.requested_schema)),
            delay_ms: std::mem::take(&mut self.held.lock().expect("delay lock").delay_ms),
            outcome: WriteOutcome::Refused {
                error: String::new(),
            },
        };
        let committed = {
            let mut ledger = self.shared();
            // What the ledger holds as the write runs: read under the same lock, so nothing
            // lands in between. Only the head: a copy of the whole record (on SQLite, a row
            // decoded) at every commit, for three fields, was a few percent of a sweep.
            fact.ledger_epoch = ledger.current_epoch()?;
            if let Some(stored) = ledger.record_head(&node)? {
                fact.stored_version = Some(stored.version);
                fact.stored_state = Some(stored.local_state);
                fact.recorded_digest = stored.result_digest;
            }
            ledger.commit(write)
        };
        let result = match committed {
            Ok(stored) => {
                self.saw(&node, stored.version);
                let lost = self.world.fire(
                    0,
                    FaultKind::LedgerCommitLostReply,
                    Some(&node),
                    FaultDetail::None,
                );
                if lost.is_some() {
                    fact.outcome = WriteOutcome::ReplyLost {
                        version: stored.version,
                    };
                    Err(LedgerError::Storage(
                        "the ledger's reply to a commit was lost (it committed)".into(),
                    ))
                } else {
                    fact.outcome = WriteOutcome::Committed {
                        version: stored.version,
                    };
                    Ok(stored)
                }
            }
            Err(e) => {
                fact.outcome = WriteOutcome::Refused {
                    error: e.to_string(),
                };
                Err(e)
            }
        };
        self.world.push(What::Ledger {
            write: Box::new(fact),
        });
        result
    }

    fn by_call_node(&self, call_node_id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        let read = self.shared().by_call_node(call_node_id);
        if let Ok(Some(r)) = &read {
            self.saw(&r.call_node_id, r.version);
        }
        read
    }

    fn by_operation_id(&self, operation_id: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.shared().by_operation_id(operation_id)
    }

    fn by_submission_key(&self, key: &str) -> Result<Option<ToolOperation>, LedgerError> {
        self.shared().by_submission_key(key)
    }

    fn records(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        self.shared().records()
    }

    fn receipts(&self) -> Result<Vec<Receipt>, LedgerError> {
        self.shared().receipts()
    }

    fn outbox(&self) -> Result<Vec<OutboxEntry>, LedgerError> {
        self.shared().outbox()
    }

    fn reconciliation_queue(&self) -> Result<Vec<ReconcileItem>, LedgerError> {
        self.shared().reconciliation_queue()
    }

    fn effect_reconciliations(&self) -> Result<Vec<EffectItem>, LedgerError> {
        self.shared().effect_reconciliations()
    }

    fn outbox_entry(&self, call_node_id: &str) -> Result<Option<OutboxEntry>, LedgerError> {
        self.shared().outbox_entry(call_node_id)
    }

    fn local_state(&self, call_node_id: &str) -> Result<Option<LocalState>, LedgerError> {
        self.shared().local_state(call_node_id)
    }

    // Like `local_state`, not noted as a read of the record: nothing here acts on it.
    fn record_head(&self, call_node_id: &str) -> Result<Option<RecordHead>, LedgerError> {
        self.shared().record_head(call_node_id)
    }

    fn settled_count(&self) -> Result<(usize, usize), LedgerError> {
        self.shared().settled_count()
    }

    fn in_flight(&self) -> Result<Vec<ToolOperation>, LedgerError> {
        self.shared().in_flight()
    }

    fn outbox_ready(&self, after_seq: u64, limit: usize) -> Result<Vec<OutboxEntry>, LedgerError> {
        self.shared().outbox_ready(after_seq, limit)
    }

    fn mark_delivered(
        &mut self,
        receipt_id: &str,
        consumer_id: &str,
        at_ms: u64,
    ) -> Result<bool, LedgerError> {
        self.dead("mark_delivered", None)?;
        self.shared().mark_delivered(receipt_id, consumer_id, at_ms)
    }

    fn request_cancel(&mut self, call_node_id: &str, at_ms: u64) -> Result<(), LedgerError> {
        self.dead("request_cancel", Some(call_node_id))?;
        self.shared().request_cancel(call_node_id, at_ms)
    }

    fn cancel_requests(&self) -> Result<Vec<CancelRequest>, LedgerError> {
        self.shared().cancel_requests()
    }

    fn take_cancel_request(&mut self, call_node_id: &str) -> Result<(), LedgerError> {
        self.dead("take_cancel_request", Some(call_node_id))?;
        self.shared().take_cancel_request(call_node_id)
    }

    // Beats go straight to the shared ledger, untraced and never delayed: a slow commit holds
    // one record's transaction, and the beat is a row of its own. A process frozen whole
    // (`process_pause`) beats not at all.
    fn beat(&mut self, beat: Beat) -> Result<(), LedgerError> {
        self.dead("beat", None)?;
        // A frozen process writes nothing, its beat included (`process_pause`).
        if self.world.now_ms() < self.held.lock().expect("delay lock").frozen_until_ms {
            return Ok(());
        }
        self.shared().beat(beat)
    }

    fn end_beat(&mut self, process: u64) -> Result<(), LedgerError> {
        self.dead("end_beat", None)?;
        self.shared().end_beat(process)
    }

    fn beat_of(&self, process: u64) -> Result<Option<Beat>, LedgerError> {
        self.shared().beat_of(process)
    }
}

/// The commit delay of one executor process: every commit takes `faults.ledger_commit_ms`
/// (drawn per commit), and a `ledger_slow_commit` firing makes one take
/// `faults.slow_commit_ms` instead. Awaited between the runner's read and its commit.
pub(crate) struct SimCommitDelay {
    pub world: Arc<World>,
    /// The process the delay holds.
    pub epoch: u64,
    pub incarnation: u32,
    /// Shared with the process's [`ProcessLedger`], which records the delay with the write
    /// and drops beats while the process is frozen.
    pub held: CommitDelayCell,
}

/// What [`SimCommitDelay`] decided that [`ProcessLedger`] must know: the delay drawn for the
/// process's next commit, and until when a `process_pause` freezes the process.
#[derive(Default)]
pub(crate) struct Held {
    pub delay_ms: u64,
    pub frozen_until_ms: u64,
    /// A crash fail point fired in this process: it is dead, and nothing it writes lands.
    pub crashed: bool,
    /// The earliest a new pause may begin: the longest pause after the last one thawed.
    pub next_pause_ms: u64,
}

pub(crate) type CommitDelayCell = Arc<Mutex<Held>>;

impl CommitDelay for SimCommitDelay {
    fn before_commit(
        &mut self,
        node: &str,
        _event: &str,
    ) -> Option<Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
        let faults = &self.world.sc.faults;
        // A pause is a held commit that also stops the process's beats. Pauses do not chain: a
        // process thawed runs for the longest pause before it may freeze again, so it is never
        // frozen longer than `process_pause_ms` at a stretch (the bound the executor is held to;
        // two back to back read as one pause twice as long).
        let rested = self.world.now_ms() >= self.held.lock().expect("delay lock").next_pause_ms;
        let paused = rested
            .then(|| {
                self.hold_if(
                    FaultKind::ProcessPause,
                    node,
                    faults.process_pause_ms,
                    |delay_ms, epoch, incarnation| FaultDetail::Pause {
                        delay_ms,
                        epoch,
                        incarnation,
                    },
                )
            })
            .flatten();
        if let Some(delay_ms) = paused {
            let mut held = self.held.lock().expect("delay lock");
            held.frozen_until_ms = self.world.now_ms() + delay_ms;
            held.next_pause_ms = held.frozen_until_ms + faults.process_pause_ms[1];
        }
        let delay_ms = match paused {
            Some(delay_ms) => delay_ms,
            None => self.slow_or_usual_ms(node),
        };
        self.held.lock().expect("delay lock").delay_ms = delay_ms;
        (delay_ms > 0).then(|| {
            Box::pin(tokio::time::sleep(Duration::from_millis(delay_ms)))
                as Pin<Box<dyn Future<Output = ()> + Send>>
        })
    }
}

impl SimCommitDelay {
    /// A commit's delay when the process is not paused: a slow commit's, or the usual draw.
    fn slow_or_usual_ms(&self, node: &str) -> u64 {
        let faults = &self.world.sc.faults;
        let slow = self.hold_if(
            FaultKind::LedgerSlowCommit,
            node,
            faults.slow_commit_ms,
            |delay_ms, epoch, incarnation| FaultDetail::CommitDelay {
                delay_ms,
                epoch,
                incarnation,
            },
        );
        slow.unwrap_or_else(|| match faults.ledger_commit_ms {
            [_, 0] => 0,
            [lo, hi] => self.world.plan.lock().expect("plan lock").draw(lo, hi),
        })
    }

    /// Whether `fault` holds this commit of `node`: if it fires, the hold drawn from the range,
    /// recorded with `detail` made of the hold and this process's epoch and incarnation.
    fn hold_if(
        &self,
        fault: FaultKind,
        node: &str,
        [lo, hi]: [u64; 2],
        detail: fn(u64, u64, u32) -> FaultDetail,
    ) -> Option<u64> {
        let decision = self.world.ask(0, fault, Some(node))?;
        let delay_ms = self.world.plan.lock().expect("plan lock").draw(lo, hi);
        let d = detail(delay_ms, self.epoch, self.incarnation);
        self.world.record_fault(decision, fault, Some(node), d);
        Some(delay_ms)
    }
}
