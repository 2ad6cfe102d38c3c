//! The shared ledger's write history as the world recorded it (`What::Ledger`): the input of
//! the concurrency checkers, and a builder for their tests. Never the executor's account.

use crate::trace::{LedgerWrite, Trace, What};

/// Every write the world's ledger saw, in trace order.
pub fn writes(trace: &Trace) -> impl Iterator<Item = (u64, &LedgerWrite)> {
    trace.events.iter().filter_map(|e| match &e.what {
        What::Ledger { write } => Some((e.t_ms, &**write)),
        _ => None,
    })
}

/// Every write that landed (committed, whether or not its writer learnt it).
pub fn landed(trace: &Trace) -> impl Iterator<Item = (u64, &LedgerWrite)> {
    writes(trace).filter(|(_, w)| w.outcome.landed().is_some())
}

/// "epoch 1 incarnation 2": the writing process, as people read it.
pub fn process(w: &LedgerWrite) -> String {
    format!("epoch {} incarnation {}", w.epoch, w.incarnation)
}

#[cfg(test)]
pub(crate) mod build {
    use toolop::record::LocalState;

    use crate::trace::{LedgerWrite, What, WriteOutcome};

    /// A landed write by process (`epoch`, `incarnation`) of `node`, from version `expected`
    /// (which the process read, and the ledger held) to `expected + 1`, under ledger epoch 1.
    pub fn write(node: &str, epoch: u64, incarnation: u32, expected: u64) -> LedgerWrite {
        LedgerWrite {
            node: node.into(),
            epoch,
            incarnation,
            writer_epoch: epoch,
            ledger_epoch: epoch,
            expected_version: expected,
            read_version: Some(expected),
            stored_version: Some(expected),
            stored_state: Some(LocalState::Working),
            recorded_digest: None,
            state: LocalState::Working,
            submit_attempts: 1,
            result_digest: None,
            operation_id: None,
            receipt: None,
            question: None,
            delay_ms: 0,
            outcome: WriteOutcome::Committed {
                version: expected + 1,
            },
        }
    }

    pub fn ev(write: LedgerWrite) -> What {
        What::Ledger {
            write: Box::new(write),
        }
    }
}
