//! This process's beat: every `beat_interval_ms` it writes that it is alive into the shared
//! ledger (`Beat`), beside the runner's loop rather than inside it, so a loop held by slow
//! commits still beats. Another process on the same epoch leaves a submission this one sent
//! to it while the beat is fresh (`Runner::sender_alive_until_ms`): the sender reads its reply,
//! however late. Without it, a replica took up a submission whose sender sat 9-16 s in chains
//! of slow commits, found no lookup by key on the tasks extension, and handed a live task to a
//! person while the sender's reply waited unread (mcp_ext_replicas seeds 156166, 190786,
//! 194779).
//!
//! A crash leaves the last beat to go stale, which is the point: a dead process's submission is
//! taken up `beat_timeout_ms` after its last sign of life. A process leaving on purpose takes
//! its beat away, so nobody waits for it.

use tokio::time::{Duration, Instant};

use super::SharedLedger;
use crate::ledger::{Beat, LedgerError};

/// Beats one process writes at most: far beyond any run (a beat a second for 30 years), a
/// bound on the loop all the same.
const BEATS_MAX: u64 = 1 << 30;

pub(super) struct Beats {
    pub(super) ledger: SharedLedger,
    pub(super) origin: Instant,
    pub(super) process: u64,
    pub(super) epoch: u64,
    pub(super) interval_ms: u64,
}

impl Beats {
    /// Write one beat now.
    pub(super) fn beat(&self) -> Result<(), LedgerError> {
        let beat = Beat {
            process: self.process,
            epoch: self.epoch,
            at_ms: super::ms_since(self.origin),
        };
        self.ledger.lock().expect("ledger lock").beat(beat)
    }

    /// Beat every interval until the ledger fails (its error) or the bound is reached; never
    /// returns otherwise. A zero interval beats never: this process then never holds a
    /// submission against another's take-up.
    pub(super) async fn run(&self) -> LedgerError {
        if self.interval_ms > 0 {
            for _ in 0..BEATS_MAX {
                tokio::time::sleep(Duration::from_millis(self.interval_ms)).await;
                if let Err(e) = self.beat() {
                    return e;
                }
            }
        }
        std::future::pending().await
    }

    /// This process is leaving: its beat goes, so nobody waits for it. A failure here changes
    /// nothing for this process (it is leaving); the beat then only goes stale.
    pub(super) fn end(&self) {
        let _ = self
            .ledger
            .lock()
            .expect("ledger lock")
            .end_beat(self.process);
    }
}
