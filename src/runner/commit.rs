//! The step-commit-act cycle for one event on one call node: read the record, step the core,
//! commit the step (one ledger transaction), and only then execute its commands.
//!
//! A commit may take time ([`CommitDelay`]), so another writer (a second executor on the same
//! ledger, an operator's cancel) can land between the read and the commit. The ledger's
//! compare-and-swap refuses the stale write; the runner then reads the record again and steps
//! the *same event* on it, a bounded number of times, each retry observed. A fenced writer (an
//! older epoch) stops acting on the record for good.

use std::future::Future;
use std::pin::Pin;

use super::dispatch::after_own_read;
use super::{CrashPoint, Observation, RetryAfter, Runner};
use crate::core::{self, Command, Ctx, Event, Loss, Outcome, Timer};
use crate::ledger::{LedgerError, Write};
use crate::protocol::{Outbound, Reply};
use crate::record::{LocalState, ToolOperation};

/// What a commit may wait for between reading the record and writing it: a slow disk or a
/// remote ledger in life, simulated time or a test's gate elsewhere. Production uses
/// [`NoCommitDelay`], which costs one virtual call and no allocation.
pub trait CommitDelay: Send {
    /// Called once the step is decided and before its commit; `None` commits at once.
    fn before_commit(
        &mut self,
        node: &str,
        event: &str,
    ) -> Option<Pin<Box<dyn Future<Output = ()> + Send + 'static>>>;
}

pub struct NoCommitDelay;

impl CommitDelay for NoCommitDelay {
    fn before_commit(
        &mut self,
        _node: &str,
        _event: &str,
    ) -> Option<Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
        None
    }
}

/// Whether an event was applied: its step committed (or needed no write) and its commands ran.
/// `Rejected`: applied, and the core refused the event (nothing changed, nothing was sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handled {
    Applied,
    Rejected,
    NotApplied,
}

impl Runner {
    /// Keep, or lift, a Retry-After for `node` as a reply arrives. A refusal holds this process
    /// back from repeating the refused exchange until it runs out, or until the server answers
    /// a request sent after the refused one. A late answer to an older request lifts nothing
    /// (mcp_replicas seed 1535815: a fetch's answer 11 s late, behind a 429 asking for 21 s,
    /// lifted it, and the stall watch then polled 10 s early).
    pub(super) fn note_retry_after(&mut self, node: &str, event: &Event) {
        let Event::Reply {
            kind, seq, reply, ..
        } = event
        else {
            return;
        };
        let held_seq = self.retry_after.get(node).map(|r| r.seq);
        match reply {
            Reply::RateLimited {
                retry_after_ms: Some(ms),
            }
            | Reply::Unavailable {
                retry_after_ms: Some(ms),
            } if held_seq.is_none_or(|held| held <= *seq) => {
                let refused = RetryAfter {
                    until_ms: self.now_ms().saturating_add(*ms),
                    kind: *kind,
                    seq: *seq,
                };
                self.retry_after.insert(node.to_string(), refused);
            }
            _ if held_seq.is_some_and(|held| *seq > held) => {
                self.retry_after.remove(node);
            }
            _ => {}
        }
    }

    /// The fencing token this runner presents with a write about `rec`.
    fn writer_epoch(&self) -> u64 {
        // Planted: an executor that ignores epochs presents whatever epoch the ledger is at. A
        // fence trusts the token it is shown, so nothing but the executor's own check stops it.
        #[cfg(feature = "mutations")]
        if self
            .cfg
            .core
            .mutated(crate::core::mutation::Mutation::IgnoreEpoch)
            || self
                .cfg
                .core
                .mutated(crate::core::mutation::Mutation::ForgedFencingToken)
        {
            return self
                .ledger
                .lock()
                .expect("ledger lock")
                .current_epoch()
                .unwrap_or(self.epoch);
        }
        self.epoch
    }

    /// The ledger could not be read or written: stop, as a process whose disk failed would.
    /// A restart resumes from whatever the ledger holds.
    pub(super) fn ledger_failed(&mut self, e: LedgerError) {
        let error = e.to_string();
        self.observe(Observation::LedgerFailed {
            error: error.clone(),
        });
        self.failed.get_or_insert(error);
    }

    /// A fenced writer: the ledger moved to a newer epoch. Nothing more is done for this record:
    /// no write, no send, no timer.
    pub(super) fn fence(&mut self, node: &str, e: LedgerError) {
        self.observe(Observation::Fenced {
            node: node.to_string(),
            error: e.to_string(),
        });
        self.fenced.insert(node.to_string());
        let timers: Vec<(core::Timer, u64)> = self
            .timer_at
            .iter()
            .filter(|((n, _), _)| n == node)
            .map(|((_, t), at)| (*t, *at))
            .collect();
        for (timer, at_ms) in timers {
            self.timers.remove(&(at_ms, node.to_string(), timer));
            self.timer_at.remove(&(node.to_string(), timer));
        }
    }

    pub(super) fn read(&mut self, node: &str) -> Option<ToolOperation> {
        let read = self.ledger.lock().expect("ledger lock").by_call_node(node);
        match read {
            Ok(Some(rec)) => Some(rec),
            Ok(None) => None,
            Err(e) => {
                self.ledger_failed(e);
                None
            }
        }
    }

    /// The plant `blind_cancel_write` is on and `event` is a cancel click: its write, if it
    /// loses its compare-and-swap, is written again blindly. Plant-only (`.cargo/mutants.toml`).
    #[cfg(feature = "mutations")]
    fn blind_cancel_write(&self, event: &str) -> bool {
        event == "cancel_clicked"
            && self
                .cfg
                .core
                .mutated(crate::core::mutation::Mutation::BlindCancelWrite)
    }

    /// One event for one call node: step, commit, then act. Nothing is sent unless the write
    /// that explains it is in the ledger.
    pub(super) async fn handle(&mut self, node: &str, event: Event) -> Handled {
        if self.crashed.is_some() || self.failed.is_some() || self.fenced.contains(node) {
            // A crashed process does nothing more; what it had not written is lost.
            return Handled::NotApplied;
        }
        if matches!(event, Event::Reply { .. })
            && self
                .crash
                .crash_here(CrashPoint::AfterReplyBeforeCommit, node)
        {
            self.crashed = Some(CrashPoint::AfterReplyBeforeCommit);
            return Handled::NotApplied;
        }
        self.note_retry_after(node, &event);
        // Stepped by reference, never copied (a reply can carry a whole result): a conflict
        // steps the given event again, a take-up steps a resume instead.
        let given = event;
        let resume = Event::Resume;
        // Named by each attempt (a take-up renames it); the loop runs at least once.
        let mut name = String::new();
        let attempts = self.cfg.commit_conflict_retries.saturating_add(1);
        for attempt in 1..=attempts {
            // Each attempt (a conflict re-reads the record) steps the event it was given:
            // whether to take the node up is decided afresh on the newer record (mcp_ext_faults
            // seed 8164: a take-up decided on one version, re-stepped as a resume on a record
            // whose cancel the other process had meanwhile sent, polled at once).
            let mut event = &given;
            name = event.name();
            let Some(rec) = self.read(node) else {
                if self.failed.is_none() {
                    self.observe(Observation::Unrouted {
                        what: format!("event {name} for unknown call node {node}"),
                    });
                }
                return Handled::NotApplied;
            };
            if self
                .seen_version
                .get(node)
                .is_some_and(|v| *v != rec.version)
            {
                self.submit_timer_outdated.insert(node.to_string());
            }
            let Some(lane) = self.lane_of(rec.adapter) else {
                self.observe(Observation::Unrouted {
                    what: format!(
                        "{node}: this executor does not speak {}",
                        rec.adapter.name()
                    ),
                });
                return Handled::NotApplied;
            };
            let jitter_permille = self.jitter.permille();
            let mut ctx = self.ctx(jitter_permille);
            ctx.overtaken_sender_until_ms = self.overtaken_sender_until_ms(&rec);
            let mut step = core::step(&rec, event, &ctx, &self.lanes[lane].core);
            if self.adopt(node, &rec, event, &step, &ctx, lane) {
                let resumed = core::step(&rec, &Event::Resume, &ctx, &self.lanes[lane].core);
                let wait_until = self
                    .retry_after
                    .get(node)
                    .map(|r| r.until_ms)
                    .max(self.own_read_not_before(node, &rec, &resumed, &ctx, lane))
                    .filter(|u| *u > ctx.now_ms);
                if let (Some(at_ms), Event::Timer(timer)) = (wait_until, event) {
                    // A Retry-After this process was given still runs, or the resume would read
                    // the status sooner after this process's own last read than the polling
                    // policy allows: look again then.
                    self.execute(
                        node,
                        lane,
                        Command::Schedule {
                            at_ms,
                            timer: *timer,
                        },
                    );
                    return Handled::NotApplied;
                }
                // Another process moved the node since this one last saw it, and this timer
                // (set for the state it left) drives nothing from there: take the node up
                // from the record as a restarted executor would, or nothing here ever acts on
                // it again once that process is gone (mcp_sqlite seed 233: a replica that moved
                // a node to CANCEL_REQUESTED died; the primary's poll timer for WORKING was
                // dropped and the cancel waited 70 s for another replica).
                event = &resume;
                name = event.name();
                step = resumed;
            }
            if self.submission_left_to_other(node, &rec, event, &step) {
                self.observe(Observation::SubmissionLeftToOther {
                    node: node.to_string(),
                    event: name.clone(),
                });
                // Seen now; if the other process dies, the stall watch takes the node up
                // from the record (a resume: a lookup by key before any new submission).
                self.seen_version.insert(node.to_string(), rec.version);
                self.watch_stall(node, false, rec.version);
                return Handled::NotApplied;
            }
            let cancel_generation_sent = step
                .commands
                .iter()
                .any(|c| {
                    matches!(
                        c,
                        Command::Send {
                            out: Outbound::Cancel { .. },
                            ..
                        }
                    )
                })
                .then_some(step.record.cancel_generation);
            // The record as written, kept only for the cancel take-up watch (rare: two
            // processes on one epoch), which judges the timers it holds against it.
            let others_cancel = self
                .cancel_of_another(node, &step.record)
                .then(|| step.record.clone());
            let changed = step.record != rec;
            let is_final = step.record.local_state.is_final();
            let read_floor_ms = self.own_read_floor_ms(node, lane, &step.record);
            let hold_fetch = self.fetch_after_own_read(node, lane, event);
            let mut write = Write {
                expected_version: rec.version,
                writer_epoch: self.writer_epoch(),
                record: step.record,
                accept: None,
                reconcile: None,
                effect: None,
                now_ms: ctx.now_ms,
            };
            for c in &step.commands {
                match c {
                    Command::Accept(spec) => write.accept = Some(spec.clone()),
                    Command::Reconcile { reason } => write.reconcile = Some(reason.clone()),
                    Command::EffectReconciliation { reason } => write.effect = Some(reason.clone()),
                    _ => {}
                }
            }
            // A record that changed, or anything the write records beside it. An acceptance or a
            // hand-off always moves the record too (so `||` to `&&` between them is an equivalent
            // mutant), but a write must not depend on that: it would lose a receipt silently.
            let needs_write = changed
                || write.accept.is_some()
                || write.reconcile.is_some()
                || write.effect.is_some();
            let version = if needs_write {
                if let Some(delay) = self.commit_delay.before_commit(node, &name) {
                    delay.await;
                }
                // Planted: a cancel write that lost its compare-and-swap is written again at the
                // version the ledger reported, on the record it read before (a lost update).
                #[cfg(feature = "mutations")]
                let blind = self.blind_cancel_write(&name).then(|| write.clone());
                let committed = self.ledger.lock().expect("ledger lock").commit(write);
                #[cfg(feature = "mutations")]
                let committed = match (committed, blind) {
                    (Err(LedgerError::VersionConflict { found, .. }), Some(mut again)) => {
                        again.expected_version = found;
                        self.ledger.lock().expect("ledger lock").commit(again)
                    }
                    (committed, _) => committed,
                };
                match committed {
                    Ok(stored) => stored.version,
                    Err(LedgerError::VersionConflict {
                        expected, found, ..
                    }) => {
                        self.observe(Observation::CommitConflict {
                            node: node.to_string(),
                            event: name.clone(),
                            attempt,
                            expected,
                            found,
                        });
                        continue;
                    }
                    Err(
                        e @ (LedgerError::StaleEpoch { .. } | LedgerError::UnissuedEpoch { .. }),
                    ) => {
                        self.fence(node, e);
                        return Handled::NotApplied;
                    }
                    Err(e @ LedgerError::Storage(_)) => {
                        self.ledger_failed(e);
                        return Handled::NotApplied;
                    }
                    Err(e) => {
                        self.observe(Observation::LedgerRefused {
                            node: node.to_string(),
                            error: e.to_string(),
                        });
                        return Handled::NotApplied;
                    }
                }
            } else {
                rec.version
            };
            if let Some(generation) = cancel_generation_sent {
                self.cancel_sent_generation
                    .insert(node.to_string(), generation);
            }
            let refused = matches!(step.outcome, Outcome::Rejected(_));
            self.seen_version.insert(node.to_string(), version);
            let commands = after_own_read(read_floor_ms, hold_fetch, step.commands);
            self.act(node, lane, &name, step.outcome, commands, version);
            match others_cancel {
                Some(rec) => self.watch_cancel_of_another(node, &rec, &ctx, lane, version),
                None => self.watch_stall(node, is_final, version),
            }
            if is_final {
                self.forget_if_settled(node);
            }
            // A crash point inside `act` stopped the commands: the step is in the ledger, its
            // sends are not.
            return if self.crashed.is_some() {
                Handled::NotApplied
            } else if refused {
                Handled::Rejected
            } else {
                Handled::Applied
            };
        }
        // Every attempt lost its race: say so, loudly. The event's own retry path (a timer, a
        // request timeout, the wait budget) takes over from here.
        let error = format!("{attempts} conflicting writes in a row; event {name} not applied");
        self.observe(Observation::LedgerRefused {
            node: node.to_string(),
            error,
        });
        Handled::NotApplied
    }

    /// Whether to take the node up again from the record (see `handle`): another process
    /// wrote it since this one last saw it, the event is a timer that drives nothing from the
    /// record's state (this process's last driver for the node), and that state is one a resume
    /// drives by a send or a timer alone (an open approval round is left to its own deadline:
    /// asking again would put a second question to the gate). A reply is not taken up: the
    /// process that made it stale is driving the node, and a resume would poll at once, inside
    /// the server's suggested interval (a cancel another process committed is the stall
    /// watch's, [`Runner::cancel_of_another`]).
    ///
    /// Nor is a node taken up that this process still drives by something else: a request in
    /// flight, a send queued, or another timer the record's state acts on. A resume would then
    /// schedule its read at once over that timer and poll inside the wait it kept: in
    /// mcp_ext_faults seed 2412 a poll timer left from WORKING fired in CANCEL_REQUESTED after a
    /// replica's writes, and the resume polled 643 ms after a 404 whose retry (and the server's
    /// 1000 ms interval) the cancel re-query timer was still waiting out.
    fn adopt(
        &self,
        node: &str,
        rec: &ToolOperation,
        event: &Event,
        step: &core::Step,
        ctx: &Ctx,
        lane: usize,
    ) -> bool {
        let moved_elsewhere = self
            .seen_version
            .get(node)
            .is_some_and(|v| *v != rec.version);
        let resumable = match rec.local_state {
            LocalState::InputRequired => rec.pending_input.is_none(),
            s => !s.is_final(),
        };
        moved_elsewhere
            && idle(step)
            && resumable
            && matches!(event, Event::Timer(_))
            && !self.drives_otherwise(node, rec, ctx, lane, false)
    }

    /// When a status read the `resumed` step schedules may leave at the earliest: the polling
    /// policy's delay (the server's interval, the backoff) after this process's own last read of
    /// the node. Another process's reads set the record's schedule, not this one's: a take-up
    /// that read at once polled 472 ms after this process's own poll, inside the server's
    /// 1000 ms (mcp_ext_faults seed 428000: a replica wrote the record, and a timer of this
    /// process that drove nothing from it was taken up as a resume). None when the step reads
    /// nothing or this process has not read the node.
    fn own_read_not_before(
        &self,
        node: &str,
        rec: &ToolOperation,
        resumed: &core::Step,
        ctx: &Ctx,
        lane: usize,
    ) -> Option<u64> {
        let reads = resumed.commands.iter().any(|c| {
            matches!(
                c,
                Command::Schedule {
                    timer: Timer::PollDue | Timer::CancelRequery,
                    ..
                }
            )
        });
        let last_ms = *self.last_read_sent_ms.get(node).filter(|_| reads)?;
        let c = &rec.poll_cursor;
        let delay_ms = self.lanes[lane].core.poll.next_delay_ms(
            c.polls,
            c.server_interval_ms,
            ctx.jitter_permille,
        );
        Some(last_ms.saturating_add(delay_ms))
    }

    /// Whether `rec` asks for a cancel of a generation this process never sent, that the
    /// server has not taken and that a resume would send: another process committed it, and
    /// may have died between the commit and the send. The newer request a reply of ours is
    /// then left to is that cancel, which nobody would ever answer (mcp_faults seed 55633: the
    /// primary committed the click's cancel and crashed before sending it; the replica's poll
    /// reply showed the task working and the cancel waited 2.5 s for the restart). The stall
    /// watch then takes the node up after `cancel_take_up_ms` of quiet instead of a request
    /// timeout: a live committer records the server's answer to its cancel well within that,
    /// and the watch stands down. Whatever the attempts the record counts: the last attempt
    /// too may have died with its committer (aip151_faults seed 18528, session 46).
    pub(super) fn cancel_of_another(&self, node: &str, rec: &ToolOperation) -> bool {
        rec.local_state == LocalState::CancelRequested
            && !rec.cancel_pending
            && self.cancel_sent_generation.get(node) != Some(&rec.cancel_generation)
    }

    /// Whether a timer of this process would send a submission over a record another process
    /// wrote since this one last saw it. The timer was set for the state this process knew (a
    /// 429's retry, the next step after "not found by key"); the writer has since submitted,
    /// or is proving that nothing exists, and a submission from here would be one nobody
    /// proved safe: against a server that does not dedupe by key, a second operation
    /// (mcp_replicas seed 918: a replica's submit timer lost its commit to the restarted
    /// primary's submission, was stepped again on the primary's SUBMITTING record, and sent
    /// a second submission 77 ms after the primary's). Nor may such a timer conclude from
    /// the other's SUBMITTING record (its submission may be in flight): mcp_sqlite seed 73974,
    /// a restarted primary's submit timer found the attempts spent on the replica's record and
    /// handed the node to a person 56 ms after the replica got 'submitted'.
    pub(super) fn submission_left_to_other(
        &self,
        node: &str,
        rec: &ToolOperation,
        event: &Event,
        step: &core::Step,
    ) -> bool {
        let moved_elsewhere = self
            .seen_version
            .get(node)
            .is_some_and(|v| *v != rec.version)
            || (matches!(event, Event::Timer(crate::core::Timer::SubmitDue))
                && self.submit_timer_outdated.contains(node));
        let concludes_on_submitting = rec.local_state == LocalState::Submitting
            && step
                .commands
                .iter()
                .any(|c| matches!(c, Command::Reconcile { .. }));
        moved_elsewhere
            && matches!(event, Event::Timer(_))
            && (concludes_on_submitting
                || step.commands.iter().any(|c| {
                    matches!(
                        c,
                        Command::Send {
                            out: Outbound::Submit { .. } | Outbound::SubmitSync { .. },
                            ..
                        }
                    )
                }))
    }

    /// Whether this process holds something else that will step `node` from `rec`: a request
    /// in flight or a send queued (its answer or its timeout steps the node), or a timer still
    /// set that the record's state acts on. A timer is judged by stepping it on the record (the
    /// core is pure): one left from a state the record has since left drives nothing, and must
    /// not keep the node from being taken up (mcp_sqlite seed 233).
    ///
    /// A request in flight covers the node, except, for a cancel another process committed
    /// (`for_cancel`), one the record has moved past: judged as a timer is, by stepping its
    /// timeout, it is answered as stale whatever comes back (mcp_replicas seed 592590: a fetch
    /// sent 10 s before, long overtaken, covered a cancel whose committer had died, and the
    /// cancel waited 6.5 s for that fetch's timeout). Elsewhere it keeps covering: a timer
    /// taken up past this process's own request in flight, overtaken by another process's
    /// newer one, read the status 830 ms after this process's last read, inside the server's
    /// interval (mcp_ext_faults seed 567261).
    pub(super) fn drives_otherwise(
        &self,
        node: &str,
        rec: &ToolOperation,
        ctx: &Ctx,
        lane: usize,
        for_cancel: bool,
    ) -> bool {
        let core = &self.lanes[lane].core;
        let live_request = self.pending.values().filter(|p| p.node == node).any(|p| {
            let lost = Event::Lost {
                kind: p.kind,
                seq: p.seq,
                epoch: p.epoch,
                loss: Loss::Deadline,
            };
            !for_cancel || !idle(&core::step(rec, &lost, ctx, core))
        });
        if live_request || self.queue.iter().any(|q| q.node == node) {
            return true;
        }
        self.timer_at
            .keys()
            .filter(|(n, _)| n == node)
            .any(|(_, timer)| !idle(&core::step(rec, &Event::Timer(*timer), ctx, core)))
    }

    /// The step is in the ledger: report it, then run its commands.
    fn act(
        &mut self,
        node: &str,
        lane: usize,
        name: &str,
        outcome: Outcome,
        commands: Vec<Command>,
        version: u64,
    ) {
        let (node_s, name) = (node.to_string(), name.to_string());
        let obs = match outcome {
            Outcome::Moved(path) => Observation::Moved {
                node: node_s,
                event: name,
                path,
                version,
            },
            Outcome::Stayed => Observation::Stayed {
                node: node_s,
                event: name,
            },
            Outcome::Rejected(r) => Observation::Rejected {
                node: node_s,
                event: name,
                reason: r,
            },
            Outcome::Refused { from, to } => Observation::Refused {
                node: node_s,
                event: name,
                from,
                to,
            },
        };
        self.observe(obs);
        let sends = commands.iter().any(|c| matches!(c, Command::Send { .. }));
        if sends
            && self
                .crash
                .crash_here(CrashPoint::AfterCommitBeforeSend, node)
        {
            self.crashed = Some(CrashPoint::AfterCommitBeforeSend);
            return;
        }
        if commands
            .iter()
            .any(|c| matches!(c, Command::Accept(_) | Command::Reconcile { .. }))
        {
            // Settled here: what earlier steps queued for the node is stale, and a cancel may
            // have overtaken it in the queue (the sends of this step itself still go).
            self.drop_queued(node, false);
        }
        for c in commands {
            if matches!(
                c,
                Command::Schedule {
                    timer: crate::core::Timer::SubmitDue,
                    ..
                }
            ) {
                self.submit_timer_outdated.remove(node);
            }
            self.execute(node, lane, c);
        }
        self.check_drained();
    }
}

/// A step that sends nothing, schedules nothing and moves nothing.
fn idle(step: &core::Step) -> bool {
    step.commands.is_empty() && matches!(step.outcome, Outcome::Stayed | Outcome::Rejected(_))
}
