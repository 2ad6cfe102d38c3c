//! Exactly-once outbox consumption for a consumer whose own effects live in the ledger's
//! database: the consumer's writes and the delivered mark commit in one transaction, so a
//! kill -9 at any instant leaves either both or neither.

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior};

use super::{rows, write, SqliteLedger};
use crate::ledger::{LedgerError, OutboxEntry};

/// Why [`SqliteLedger::consume_with`] stopped early.
#[derive(Debug)]
pub enum ConsumeError<E> {
    Ledger(LedgerError),
    /// The consumer's own error; its entry's transaction was rolled back.
    Consumer(E),
    /// Other writers (executors, other consumers) held the ledger's write lock for the whole
    /// busy timeout: the entry stays ready and nothing of it was written. Not a failure of the
    /// ledger: a consumer loop waits a moment and calls again. (Kept apart from `Ledger` so a
    /// consumer need not read an error's text to tell; the kill -9 proof's consumer stopped on
    /// one under an overlapping second executor, CI session 47.)
    Busy(String),
}

impl<E> From<LedgerError> for ConsumeError<E> {
    fn from(e: LedgerError) -> Self {
        ConsumeError::Ledger(e)
    }
}

impl<E> From<rusqlite::Error> for ConsumeError<E> {
    fn from(e: rusqlite::Error) -> Self {
        if super::is_busy(&e) {
            ConsumeError::Busy(format!("SQLite: {e}"))
        } else {
            ConsumeError::Ledger(e.into())
        }
    }
}

impl<E: std::fmt::Display> std::fmt::Display for ConsumeError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsumeError::Ledger(e) => write!(f, "{e}"),
            ConsumeError::Consumer(e) => write!(f, "the consumer failed: {e}"),
            ConsumeError::Busy(why) => write!(
                f,
                "the ledger stayed locked by other writers past the busy timeout ({why}): nothing was consumed, try again"
            ),
        }
    }
}

impl<E: std::fmt::Display + std::fmt::Debug> std::error::Error for ConsumeError<E> {}

impl SqliteLedger {
    /// Hand up to `limit` ready outbox entries, in `seq` order, to `f`, one transaction per
    /// entry: `f` writes its effects through the transaction it is given, and the entry is
    /// marked delivered to `consumer_id` in that same transaction. Returns how many entries were
    /// consumed. If `f` fails, its entry's transaction (its writes and the mark) is rolled back,
    /// the entry stays ready, and consumption stops there.
    pub fn consume_with<E, F>(
        &mut self,
        consumer_id: &str,
        limit: usize,
        at_ms: u64,
        mut f: F,
    ) -> Result<usize, ConsumeError<E>>
    where
        F: FnMut(&OutboxEntry, &Transaction<'_>) -> Result<(), E>,
    {
        let sql = format!(
            "SELECT {} FROM outbox WHERE status = 'ready' ORDER BY seq LIMIT 1",
            rows::OUTBOX_COLUMNS
        );
        for consumed in 0..limit {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let row = tx
                .prepare_cached(&sql)?
                .query_row([], rows::read_outbox)
                .optional()?;
            let Some(entry) = row.map(rows::outbox).transpose()? else {
                return Ok(consumed);
            };
            f(&entry, &tx).map_err(ConsumeError::Consumer)?;
            write::mark_delivered(&tx, &entry.receipt_id, consumer_id, at_ms)?;
            tx.commit()?;
        }
        Ok(limit)
    }
}
