//! A call node nothing will wake. Every non-final node normally has something of this runner's
//! that brings its next event: a request in flight (its reply or its timeout), a send queued,
//! or a timer. Two executors on one epoch (a `toolop resume` started while a `toolop call`
//! still runs) can leave a node with none: A sends a fetch and dies before its reply, B's own
//! older request is then answered as not the latest, and B holds nothing for the node; before
//! this watch, B waited until the CLI's deadline (31 min by default) and exited 4. Now such a
//! node is looked at again after `request_timeout_ms` (the time any reply of ours would have
//! taken) and, if still uncovered, resumed as after a restart. The check rides on the loop's
//! other wake-ups (at most `idle_wake_ms` late; the CLI wakes every 100 ms for cancel
//! requests) rather than adding its own: an extra wake-up reorders same-millisecond work, and
//! a single executor, which never leaves a node uncovered, would see its traces change for
//! nothing (10,000 gate series: identical trace hashes with the watch in place).

use super::{Observation, Runner};
use crate::core::{Event, Timer};

impl Runner {
    /// After a step on `node`: watch it if it is not final and nothing of ours covers it.
    pub(super) fn watch_stall(&mut self, node: &str, is_final: bool) {
        if is_final || self.covered(node) {
            self.stall_at.remove(node);
            return;
        }
        let at_ms = self.now_ms() + self.cfg.request_timeout_ms;
        self.stall_at.entry(node.to_string()).or_insert(at_ms);
    }

    /// A pending request, a queued send or a timer of this runner for `node`.
    fn covered(&self, node: &str) -> bool {
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

    /// Resume every watched node whose time has come and that is still uncovered and unsettled.
    pub(super) async fn fire_stalls(&mut self) {
        let now = self.now_ms();
        let due: Vec<String> = self
            .stall_at
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for node in due {
            self.stall_at.remove(&node);
            if self.covered(&node) || self.fenced.contains(&node) {
                continue;
            }
            let Some(rec) = self.read(&node) else {
                continue;
            };
            // Final, or another epoch's now (this process is fenced and will learn it on its
            // next write): nothing to resume, and no reason to look again.
            if rec.local_state.is_final() || rec.execution_epoch > self.epoch {
                continue;
            }
            self.observe(Observation::Stalled {
                node: node.clone(),
                state: rec.local_state.name(),
            });
            self.handle(&node, Event::Resume).await;
        }
    }
}
