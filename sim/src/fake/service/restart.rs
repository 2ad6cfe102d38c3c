//! The server process restarts (the `server_restart` fault): an SDK's in-memory task store
//! starts empty. What the old process held is gone, and what it was doing stops.

use super::{Ev, IdStyle, TaskService, WorkState};
use crate::fake::truth::WorkEnd;

impl TaskService {
    /// Restart at `t` (events due by then already processed). Every task the old process still
    /// held is lost: a read of its id is answered "not found" as for an id never seen (not as
    /// expired), its stored result and pending input round are gone, and its work, if still
    /// running or waiting for input, is aborted without a side effect. Inline runs are aborted
    /// too, and nobody waiting on the old process gets an answer: held reads, callers of inline
    /// runs and anything queued for sending are dropped. Returns the ids of the tasks lost, in
    /// creation order.
    pub fn restart(&mut self, t: u64) -> Vec<String> {
        let held: Vec<u64> = self
            .tasks
            .iter()
            .filter(|(_, task)| task.live())
            .map(|(&seq, _)| seq)
            .collect();
        let mut lost = Vec::with_capacity(held.len());
        for seq in held {
            if self.task(seq).work.state != WorkState::Ended {
                self.end_work(seq, t, WorkEnd::LostInRestart);
            }
            self.abandon_round(seq, t);
            let task = self.task_mut(seq);
            task.deleted = true;
            task.lost = true;
            task.held.clear();
            task.cancel_at = None;
            task.preempt_at = None;
            task.delete_at = None;
            lost.push(task.id.clone());
            self.tt(seq).deleted_at_ms.get_or_insert(t);
            self.reschedule(seq);
        }
        for (seq, run) in std::mem::take(&mut self.inline) {
            self.schedule.retain(|&(_, ev)| ev != Ev::Inline(seq));
            self.truth.sync_runs[run.truth_idx].lost_at_ms = Some(t);
        }
        // Keyed inline runs only exist where the server deduplicates by key, which a server that
        // restarts does not offer (the fault is never asked of one); their waiters lose their
        // answer with the process all the same.
        self.inline_by_key.clear();
        self.out.clear();
        // A Python SDK task id is scoped by its session, and the new process has new sessions.
        if self.cfg.ids == IdStyle::ScopedUuid {
            self.scope = super::hex(&mut self.rng, 16);
        }
        self.truth.server_restarts_at_ms.push(t);
        lost
    }

    /// Whether the server holds the task `task_id` (created, not deleted, not lost).
    pub fn holds_task(&self, task_id: &str) -> bool {
        self.live(task_id).is_ok()
    }

    /// Whether the server holds a task (one not deleted): a restart then loses something.
    pub fn holds_a_task(&self) -> bool {
        self.tasks.values().any(|t| t.live())
    }
}
