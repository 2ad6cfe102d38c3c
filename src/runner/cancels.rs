//! Cancel requests written into the ledger by another process (the live CLI's `toolop cancel
//! NODE`). The runner looks for them when it starts and then every `cancel_request_check_ms`,
//! turns each into the caller's cancel click, and takes the request
//! out of the ledger only once the record's cancel is committed (or the cancel is moot). A crash
//! in between leaves the request for the next look: the click is idempotent.

use super::commit::Handled;
use super::{Observation, Runner};
use crate::core::Event;

/// Requests handled per look, so a flood of them cannot starve replies and timers.
const CANCEL_REQUESTS_PER_CHECK: usize = 64;

impl Runner {
    pub(super) async fn pick_up_cancel_requests(&mut self) {
        let now = self.now_ms();
        if now < self.next_cancel_check_ms {
            return;
        }
        let only_at_start = planted!(self, CancelRequestsOnlyAtStart);
        self.next_cancel_check_ms = match self.cfg.cancel_request_check_ms {
            _ if only_at_start => u64::MAX,
            0 => u64::MAX,
            every_ms => now.saturating_add(every_ms),
        };
        let pending = self.ledger.lock().expect("ledger lock").cancel_requests();
        let pending = match pending {
            Ok(p) => p,
            Err(e) => return self.ledger_failed(e),
        };
        for req in pending.into_iter().take(CANCEL_REQUESTS_PER_CHECK) {
            let node = req.call_node_id;
            let read = self.ledger.lock().expect("ledger lock").by_call_node(&node);
            let rec = match read {
                Ok(Some(rec)) => rec,
                // Records are never deleted and a request needs one: nothing to act on.
                Ok(None) => continue,
                Err(e) => return self.ledger_failed(e),
            };
            let moot = rec.local_state.is_final();
            // Another executor's record (a lane this one does not speak, a newer epoch's, or
            // fenced here) is left for that executor.
            let ours = self.lane_of(rec.adapter).is_some()
                && rec.execution_epoch <= self.epoch
                && !self.fenced.contains(&node);
            if !moot && !ours {
                continue;
            }
            self.observe(Observation::CancelRequestPicked {
                node: node.clone(),
                requested_at_ms: req.at_ms,
                moot,
            });
            let applied =
                moot || self.handle(&node, Event::CancelClicked).await != Handled::NotApplied;
            // A runner that crashed in the step never got to take it: the next one will.
            if applied && self.stopped().is_none() {
                let taken = self
                    .ledger
                    .lock()
                    .expect("ledger lock")
                    .take_cancel_request(&node);
                if let Err(e) = taken {
                    return self.ledger_failed(e);
                }
            }
            if self.stopped().is_some() {
                return;
            }
        }
    }
}
