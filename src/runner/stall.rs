//! A call node nothing will wake. Every non-final node normally has something of this runner's
//! that brings its next event: a request in flight (its reply or its timeout), a send queued,
//! or a timer. Two executors on one epoch (a `toolop resume` started while a `toolop call`
//! still runs) can leave a node with none: A sends a fetch and dies before its reply, B's own
//! older request is then answered as not the latest, and B holds nothing for the node; before
//! this watch, B waited until the CLI's deadline (31 min by default) and exited 4.
//!
//! Now such a node is resumed as after a restart once the record has been quiet: nobody wrote
//! it for `request_timeout_ms` (the time any reply would have taken), and past any Retry-After
//! this process was given for it. A record that changed
//! means another process is driving the node (the simulator's replicas, mcp_ext_faults seed
//! 1474: resuming there polled inside a 429's Retry-After): the watch looks again later.
//!
//! The watch must not become a hiding place for a core that forgets to arm a timer: the
//! simulator's `stall_only_behind_another_process` fails every rescue that no other process of
//! the same epoch explains (planted bug `poll_not_rearmed`).
//!
//! The check rides on the loop's other wake-ups (at most `idle_wake_ms` late; the CLI wakes
//! every 100 ms for cancel requests) rather than adding its own: an extra wake-up reorders
//! same-millisecond work, and a single executor, which never leaves a node uncovered, would see
//! its traces change for nothing.

use super::{Observation, Runner};
use crate::core::{Ctx, Event, Timer};
use crate::record::{LocalState, ToolOperation};

/// A watched node: when to look again, and the record version seen when the watch started.
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    pub(super) at_ms: u64,
    pub(super) version: u64,
    /// Shorter than a request timeout (a cancel another process committed): the loop wakes for
    /// it. Only two executors on one epoch make such a watch, so a single executor's traces
    /// keep their wake-ups.
    pub(super) urgent: bool,
}

impl Runner {
    /// After a step on `node` that left the record at `version`: watch the node for a request
    /// timeout of quiet if it is not final and nothing of ours covers it. A watch already due
    /// sooner is kept.
    pub(super) fn watch_stall(&mut self, node: &str, is_final: bool, version: u64) {
        if is_final || self.covered(node) {
            self.stall_at.remove(node);
            return;
        }
        let at_ms = self.now_ms() + self.cfg.request_timeout_ms;
        self.arm(node, at_ms, version, false);
    }

    /// Watch `node` from `at_ms` unless a watch already falls due sooner.
    pub(super) fn arm(&mut self, node: &str, at_ms: u64, version: u64, urgent: bool) {
        if self.stall_at.get(node).is_none_or(|w| w.at_ms > at_ms) {
            self.stall_at.insert(
                node.to_string(),
                Watch {
                    at_ms,
                    version,
                    urgent,
                },
            );
        }
    }

    /// After a step that left `rec` (at `version`) asking for a cancel another process committed
    /// (`Runner::cancel_of_another`): watch the node for `cancel_take_up_ms`. A timer counts as
    /// cover only if the record's state acts on it (`Runner::drives_otherwise`): in
    /// mcp_replicas seed 18757 the approval deadline of a round answered long before, 36 s off,
    /// covered the node, and the cancel the dead committer never sent waited 7 s for a restart.
    pub(super) fn watch_cancel_of_another(
        &mut self,
        node: &str,
        rec: &ToolOperation,
        ctx: &Ctx,
        lane: usize,
        version: u64,
    ) {
        if self.drives_otherwise(node, rec, ctx, lane, true) {
            self.stall_at.remove(node);
            return;
        }
        let at_ms = self.now_ms() + self.cfg.cancel_take_up_ms;
        self.arm(node, at_ms, version, true);
    }

    /// Whether the urgent watch on `node` (a cancel another process committed) is covered here:
    /// by something that will step the node from `rec`, as `watch_cancel_of_another` judged.
    fn covered_for_cancel(&self, node: &str, rec: &ToolOperation) -> bool {
        let Some(lane) = self.lane_of(rec.adapter) else {
            return self.covered(node);
        };
        // Judging timers draws no jitter: the draw would shift the seeded sequence.
        self.drives_otherwise(node, rec, &self.ctx(0), lane, true)
    }

    /// A call for `node` came while the ledger already held it. If another process made it (this
    /// one never stepped it) and it is still open, watch it as one of ours: should that process
    /// go quiet, this one takes it up. Otherwise nothing here ever acts on it (mcp_replicas seed
    /// 68025: the restarted primary was handed two nodes a replica had just inserted; the last
    /// replica crashed at 112 s, and both nodes sat unsettled until the series' time limit).
    pub(super) fn watch_duplicate(&mut self, node: &str) {
        if self.seen_version.contains_key(node) {
            return;
        }
        let Some(rec) = self.read(node) else {
            return;
        };
        if rec.local_state.is_final() || rec.execution_epoch > self.epoch {
            return;
        }
        self.watch_stall(node, false, rec.version);
    }

    /// A pending request, a queued send or a timer of this runner for `node`.
    pub(super) fn covered(&self, node: &str) -> bool {
        // `SubmitDue` is the smallest timer, so the range starts at the node's first timer.
        let timer = self
            .timer_at
            .range((node.to_string(), Timer::SubmitDue)..)
            .next()
            .is_some_and(|((n, _), _)| n == node);
        timer
            || self.pending.values().any(|p| p.node == node)
            || self.queue.iter().any(|q| q.node == node)
    }

    /// When a quiet, uncovered `rec` may be resumed: not before a Retry-After this process was
    /// given for it. (The record's `poll_cursor.next_poll_at_ms` would say when its next poll
    /// is due, but the core never fills it in.)
    fn resume_not_before_ms(&self, rec: &ToolOperation) -> u64 {
        self.retry_after
            .get(&rec.call_node_id)
            .map_or(0, |r| r.until_ms)
    }

    /// Resume every watched node whose record stayed quiet and that is still uncovered and
    /// unsettled; look again later at one another process is driving.
    pub(super) async fn fire_stalls(&mut self) {
        let now = self.now_ms();
        let due: Vec<(String, Watch)> = self
            .stall_at
            .iter()
            .filter(|(_, w)| w.at_ms <= now)
            .map(|(n, w)| (n.clone(), *w))
            .collect();
        for (node, watch) in due {
            self.stall_at.remove(&node);
            if (!watch.urgent && self.covered(&node)) || self.fenced.contains(&node) {
                continue;
            }
            let Some(rec) = self.read(&node) else {
                continue;
            };
            if watch.urgent && self.covered_for_cancel(&node, &rec) {
                continue;
            }
            // Final, or another epoch's now (this process is fenced and will learn it on its
            // next write): nothing to resume, and no reason to look again.
            if rec.local_state.is_final() || rec.execution_epoch > self.epoch {
                continue;
            }
            let still_cancel_of_another = watch.urgent
                && self.lane_of(rec.adapter).is_some()
                && self.cancel_of_another(&node, &rec);
            let again = if rec.version != watch.version && still_cancel_of_another {
                // The committer wrote again and the record still asks for its cancel, unanswered
                // (its request lost, say): keep the short watch. A committer that died right
                // after that write leaves it quiet (mcp_replicas seed 99124: the cancel's loss
                // written, then the connection dropped; a request-timeout watch, 10 s, outlived
                // this process too).
                Some((now + self.cfg.cancel_take_up_ms, true))
            } else if rec.version != watch.version {
                // Someone wrote it meanwhile: a live process drives it. Watch from here.
                Some((now + self.cfg.request_timeout_ms, false))
            } else {
                Some(self.resume_not_before_ms(&rec))
                    .filter(|t| *t > now)
                    .map(|t| (t, false))
            };
            if let Some((at_ms, urgent)) = again {
                // The entry was removed above, so this always arms.
                self.arm(&node, at_ms, rec.version, urgent);
                continue;
            }
            if self.hold_for_live_sender(&node, &rec) {
                continue;
            }
            self.observe(Observation::Stalled {
                node: node.clone(),
                state: rec.local_state.name(),
            });
            self.handle(&node, Event::Resume).await;
        }
    }

    /// At start: resume `node` from the ledger, unless its submission is a live sender's
    /// (`sender_alive_until_ms`); then watch it instead, and take it up only once the record
    /// goes quiet with the sender gone.
    pub(super) async fn resume_unless_held(&mut self, node: &str) {
        if !self.held_for_live_sender(node) {
            self.handle(node, Event::Resume).await;
        }
    }

    /// A submission lease ran out on `node`, taken up from another process: if that sender
    /// beats again (it thawed, mcp_ext_replicas seed 45102: frozen 11.6 s, then 6 s of slow
    /// commits before it read its reply), the submission is its own again and nothing is
    /// concluded here; the node is watched as at the start, and taken up afresh (a new lease)
    /// once the sender goes quiet.
    pub(super) fn held_for_live_sender(&mut self, node: &str) -> bool {
        self.read(node)
            .is_some_and(|rec| self.hold_for_live_sender(node, &rec))
    }

    /// A submission lease ran out on `node`: it holds on while the sender beats
    /// (`held_for_live_sender`), and runs on until a full lease (`request_timeout_ms`) has
    /// passed since the sender's beat went stale: a process that takes a submission up while
    /// its sender still beats (a duplicate call stepped after a refused write) starts its lease
    /// early, and a sender frozen whole reads its reply after the thaw (mcp_ext_replicas seed
    /// 79259: the sender froze 11.4 s right after its reply came; the replica's lease, counted
    /// from 21.4 s, ran out at 31.4 s, 1.6 s before the thaw, and the task went to a person).
    /// Then a sender silent for less than a beat timeout plus a request timeout is always
    /// waited for, as at start-up (held while it beats, then a lease from the take-up).
    pub(super) fn lease_held(&mut self, node: &str) -> bool {
        let Some(rec) = self.read(node) else {
            return false;
        };
        if self.hold_for_live_sender(node, &rec) {
            return true;
        }
        let now_ms = self.now_ms();
        let Some(end_ms) = self
            .sender_beat_until_ms(&rec)
            .map(|until_ms| until_ms.saturating_add(self.cfg.request_timeout_ms))
            .filter(|end_ms| *end_ms > now_ms)
        else {
            return false;
        };
        self.set_timer(node, Timer::SubmissionLease, end_ms);
        true
    }

    /// If `rec`'s submission is a live sender's, watch `node` until its beat would go stale
    /// and say so; otherwise nothing.
    fn hold_for_live_sender(&mut self, node: &str, rec: &ToolOperation) -> bool {
        let Some(until_ms) = self.sender_alive_until_ms(rec) else {
            return false;
        };
        self.arm(node, until_ms, rec.version, false);
        true
    }

    /// Until when `rec`'s submission belongs to the process that sent it: another process of
    /// this epoch whose beat is fresh (`beat.rs`). It will read the reply, or give up on it
    /// itself; taking it up here only races it to a hand-off. `None`: nobody holds it (no
    /// submission in flight, sent here, sent by a process gone quiet or fenced, or unknown).
    pub(super) fn sender_alive_until_ms(&mut self, rec: &ToolOperation) -> Option<u64> {
        let now_ms = self.now_ms();
        self.sender_beat_until_ms(rec)
            .filter(|until_ms| *until_ms > now_ms)
    }

    /// Until when the last beat of `rec`'s sender (another process of this epoch, whose
    /// submission is in flight) said it lives, fresh or not. `None` as for
    /// `sender_alive_until_ms`, and when the sender has no beat (it never beat, or left).
    fn sender_beat_until_ms(&mut self, rec: &ToolOperation) -> Option<u64> {
        let sender = rec.submitted_by.filter(|p| *p != self.process)?;
        if rec.local_state != LocalState::Submitting || rec.submit_attempts == 0 {
            return None;
        }
        self.beat_until_ms(sender)
    }

    /// For the core (`Ctx::overtaken_sender_until_ms`): until when the sender of the request
    /// `rec` overtook unanswered, another process of this epoch, was said alive by its beat,
    /// while a not-found streak or the result's fetches could conclude on it. Beats later than
    /// a request lease after the overtaking do not count: a live sender's request has been
    /// answered or timed out by then, and a sender that keeps beating would otherwise hold the
    /// conclusion for as long as it lives.
    pub(super) fn overtaken_sender_until_ms(&mut self, rec: &ToolOperation) -> Option<u64> {
        let c = &rec.poll_cursor;
        let fetching = matches!(
            rec.local_state,
            LocalState::TerminalObserved | LocalState::FetchingResult
        );
        if c.not_found_streak == 0 && !fetching {
            return None;
        }
        let o = c.overtaken?;
        let sender = o.by.filter(|p| *p != self.process)?;
        let until_ms = self.beat_until_ms(sender)?;
        let last_counted_ms = o
            .at_ms
            .saturating_add(self.cfg.request_timeout_ms)
            .saturating_add(self.cfg.beat_timeout_ms);
        Some(until_ms.min(last_counted_ms))
    }

    /// Until when `process`'s last beat says it lives, if it beats on this epoch.
    fn beat_until_ms(&mut self, process: u64) -> Option<u64> {
        let read = self.ledger.lock().expect("ledger lock").beat_of(process);
        let beat = match read {
            Ok(beat) => beat?,
            Err(e) => {
                self.ledger_failed(e);
                return None;
            }
        };
        (beat.epoch == self.epoch).then(|| beat.at_ms.saturating_add(self.cfg.beat_timeout_ms))
    }
}
