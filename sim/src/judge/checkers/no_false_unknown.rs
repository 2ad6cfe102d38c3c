//! Always (and gated as a rate): nothing is handed to manual reconciliation that the executor could
//! still have resolved. A hand-off (the world finds the node's reconciliation item in the store;
//! judged on what had reached the process when it decided it, its write's landing less the time the
//! world held that commit) is false UNKNOWN when, at that moment, the server still held the node's
//! operation (it had created it and not deleted it: the ground truth) and the operation was
//! resolvable: the network had shown it, intact, to an executor of the newest epoch that lived on
//! to write it down, by its id (a submission's reply, a status read) or by the node's key (a lookup
//! that found it). Such an item sends a live operation to a person although one more read would
//! have settled it.
//!
//! What the protocol makes undecidable is excused, and counted apart
//! (`SeriesMetrics::undecidable_unknowns`):
//! - the operation's advertised retention had run out (its ttl, counted from when an executor
//!   first saw it) and the last reply about it said "not found": a server may keep a task
//!   longer, but a 404 then is what expiry looks like (`mcp_faults` seed 61: a TS-style server
//!   kept the completed task past its ttl, a lagging replica said 404);
//! - none of the last `not_found_retries` + 1 requests for the node got back anything showing
//!   the operation alive (each lost, answered by a lagging replica or "not found", or its reply
//!   lost, cut or rewritten): a bounded executor must stop somewhere, and that looks like a
//!   deletion (`mcp_ext_faults` seed 250: three lagging 404s in a row before expiry;
//!   `mcp_faults` seed 1003: its last fetches lost, rewritten and cut; `aip151_faults` seed
//!   3969: two lagging 404s, then the cancel-on-done profile's own 404). A reply whose reader
//!   crashed before writing it down (the world's crash at "after a reply, before its commit")
//!   showed nothing to anyone (`aip151_faults` seed 9177: a good read lost to the crash
//!   between two lagging 404s, then one more).
//!
//! A "not found" that hid a task the server held for another HTTP session (servers that show a
//! task only to the session that created it) excuses nothing: the task was not gone, and an
//! executor that keeps its session across processes reads it (the planted
//! `fresh_session_per_process`).
//!
//! Expiry is counted from the first reply that showed the operation in any shape (a lookup's
//! list included: the executor counts from there; `mcp_faults` seed 6121), or from the first
//! that showed it ended, if later (both SDK stores restart the deletion timer then, and so does
//! the executor's reckoning), with the ttl the server advertised on any view of it.
//!
//! Anything else is false: the executor dropped what it knew (seeds of the planted
//! `not_found_streak_never_reset`: one lagging 404 among good reads sends a live task away).
//! Not false either: an operation the server never created or had already deleted, or one the
//! world never showed a surviving executor (every reply naming it lost, or its only reader
//! crashed before writing it down, or was fenced before it could).

use super::ledger_writes::landed;
use super::view::{
    arrivals, judge, newest_epoch_at, newest_epochs, sends, store_facts, ExecId, Frame,
    RequestTimes, View,
};
use super::Violation;
use std::collections::{BTreeMap, BTreeSet};

use toolop::runner::CrashPoint;

use crate::fake::codec::ExchangeKind;
use crate::series::faults::FaultKind;
use crate::trace::{
    FaultDetail, NetVerdict, Shows, StoreFact, Trace, What, WorldAction, WriteOutcome,
};

pub const NAME: &str = "no_false_unknown";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    judged(v).0
}

/// (false UNKNOWN violations, hand-offs the protocol made undecidable (see the module docs),
/// excused and counted for the metrics).
pub fn judged(v: &View) -> (Vec<Violation>, u32) {
    let lost = lost_with_their_reader(v.trace);
    let epochs = newest_epochs(v.trace);
    let mut down: Vec<(u32, u64)> = vec![];
    // Executor processes as the world started them: (time, epoch, incarnation).
    let mut started: Vec<(u64, ExecId)> = vec![(0, (1, 1))];
    for e in &v.trace.events {
        match &e.what {
            // A replica goes down as `ReplicaStop` (a crash included): `mcp_ext_faults` seed
            // 62339, a replica crashed with two submissions' replies unread.
            What::World {
                action:
                    WorldAction::ExecutorDown { incarnation, .. }
                    | WorldAction::ReplicaStop { incarnation, .. },
            } => down.push((*incarnation, e.t_ms)),
            What::World {
                action:
                    WorldAction::ExecutorRestart { incarnation, epoch }
                    | WorldAction::Rollback { incarnation, epoch },
            } => started.push((e.t_ms, (*epoch, *incarnation))),
            _ => {}
        }
    }
    // A reply that reached its process after the process went down was never read: it showed
    // nothing to anyone (mcp_replicas seed 39495: a reply showing the task alive landed 163 ms
    // after its reader's ledger failed, and three 404s were all the surviving processes saw).
    let read_by_nobody = |a: &Frame| {
        let at = a.arrives_at_ms.unwrap_or(a.t_ms);
        down.iter().any(|(i, t)| *i == a.exec.1 && *t <= at)
    };
    // Nor was a reply that came after its request's timeout (`RequestTimes`; mcp_ext_replicas
    // seed 183847: a poll's reply held 14.5 s arrived 4.5 s past its timeout, just before a
    // 404 past the reckoned expiry).
    let times = RequestTimes::of(v);
    let arrived: Vec<Frame> = arrivals(v.trace)
        .into_iter()
        .filter(|a| !lost.contains(&a.frame) && !read_by_nobody(a) && !times.past_timeout(a))
        .collect();
    // The process that handed over: the writer of the node's last write the world's ledger
    // saw land by then (a replica may hand over while the primary runs: `mcp_ext_faults` seed
    // 418); without ledger writes in the trace, the newest process the world had started (an
    // older epoch's process could not have written to the store).
    let current = |node: &str, at: u64| {
        landed(v.trace)
            .filter(|(t, w)| *t <= at && w.node == node)
            .last()
            .map(|(_, w)| (w.epoch, w.incarnation))
            .unwrap_or_else(|| {
                started
                    .iter()
                    .take_while(|(t, _)| *t <= at)
                    .last()
                    .map_or((1, 1), |(_, e)| *e)
            })
    };
    // Reached a process of the newest epoch (one that went down first is out of `arrived`).
    let survived = |a: &Frame| {
        let at = a.arrives_at_ms.unwrap_or(a.t_ms);
        a.exec.0 >= newest_epoch_at(&epochs, at)
    };
    let (mut out, mut excused) = (vec![], 0);
    for (node, (at, fact)) in store_facts(v.trace) {
        if fact != StoreFact::Reconcile {
            continue;
        }
        let held = v.truth.tasks.iter().filter(|(_, t)| {
            t.call_node == node && t.created_at_ms <= at && t.deleted_at_ms.is_none_or(|d| d > at)
        });
        // What reached the process by the time it decided the hand-off: the hand-off's write
        // landed `delay_ms` after its step (a held commit), and a reply that arrived in between
        // came too late for that step (mcp_replicas seed 1874038: a late fetch's result landed
        // 2 ms after the 404 the hand-off was decided on, during its commit).
        let decided_at = landed(v.trace)
            .filter(|(t, w)| *t == at && w.node == node)
            .last()
            .map_or(at, |(t, w)| t.saturating_sub(w.delay_ms));
        for (task, t) in held {
            let about = |a: &&Frame| {
                a.is(&node) && a.intact() && a.arrives_at_ms.is_some_and(|arr| arr <= decided_at)
            };
            let shows_it = |a: &Frame| alive(a, task);
            let Some(last) = arrived
                .iter()
                .rev()
                .filter(about)
                .find(|a| shows_it(a) && survived(a))
            else {
                continue;
            };
            if excusable(v, &arrived, &node, task, current(&node, at), decided_at) {
                excused += 1;
                break;
            }
            out.push(Violation {
                checker: NAME,
                node: Some(node.clone()),
                detail: format!(
                    "handed to manual reconciliation at {at} ms while the server held task {task} ({}), shown to executor epoch {} incarnation {} at {} ms",
                    t.status.as_str(),
                    last.exec.0,
                    last.exec.1,
                    last.arrives_at_ms.unwrap_or(last.t_ms)
                ),
            });
            break;
        }
    }
    (out, excused)
}

/// Replies whose reader crashed before writing them down: the world drew a crash at the
/// fail point "after a reply, before its commit" for a node, and the process that went down
/// next had, as its last arrival about that node, this reply. What it showed died with it (the
/// next process resumes the record as it was before).
fn lost_with_their_reader(trace: &Trace) -> BTreeSet<u64> {
    let mut crashes: Vec<(u64, &str)> = vec![];
    let mut downs: Vec<(u64, u32)> = vec![];
    for e in &trace.events {
        match &e.what {
            What::Fault {
                fault: FaultKind::ExecutorCrash,
                node: Some(node),
                detail:
                    FaultDetail::Crash {
                        point: CrashPoint::AfterReplyBeforeCommit,
                    },
                ..
            } => crashes.push((e.t_ms, node.as_str())),
            What::World {
                action:
                    WorldAction::ExecutorDown { incarnation, .. }
                    | WorldAction::ReplicaStop { incarnation, .. },
            } => downs.push((e.t_ms, *incarnation)),
            _ => {}
        }
    }
    let arrived = arrivals(trace);
    let mut out = fenced_with_their_reader(trace, &arrived);
    if crashes.is_empty() {
        return out;
    }
    for (t, node) in crashes {
        let Some(&(_, incarnation)) = downs.iter().find(|(d, _)| *d >= t) else {
            continue;
        };
        if let Some(a) = arrived.iter().rev().find(|a| {
            a.is(node) && a.exec.1 == incarnation && a.arrives_at_ms.is_some_and(|x| x <= t)
        }) {
            out.insert(a.frame);
        }
    }
    out
}

/// Replies whose reader the ledger fenced before it could write them down: a rollback moved
/// the ledger to a newer epoch, and the reader's next write about the node was refused for its
/// old epoch (the world's record of the write, never the executor's). What it read since its
/// last landed write about the node died with the refused write: the new epoch resumes the
/// record as it was.
///
/// Likewise a process the world killed (it stopped it with a lost commit reply, crashed it at any
/// point, or killed a replica that did not stop within the shutdown wait; a process whose
/// connection dropped exits by itself, reading what it had received first): what it read since its
/// last landed write about each node, up to going down, died with it. A reply can reach a process's
/// connection while it is busy (a slow commit) and never be read before a crash elsewhere in it
/// (`mcp_ext_faults` seed 2664: a submission's reply queued 108 ms before a crash after another
/// node's commit). A process that read a reply and wrote anything about the node after it is still
/// judged on it. Judged from the world's record of ledger writes; a trace without them (written
/// before the world recorded the ledger) keeps only the lost-commit-reply case.
fn fenced_with_their_reader(trace: &Trace, arrived: &[Frame]) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    let writes_recorded = trace
        .events
        .iter()
        .any(|e| matches!(e.what, What::Ledger { .. }));
    // Per (process, node): when the process decided its last write that landed.
    // With the operation the record named then.
    let mut landed: BTreeMap<(ExecId, &str), (u64, Option<&str>)> = BTreeMap::new();
    // When the world last killed a process (a lost commit reply, a crash), till it went down.
    let mut lost_reply_at: Option<u64> = None;
    for e in &trace.events {
        match &e.what {
            What::Fault {
                fault: FaultKind::LedgerCommitLostReply,
                ..
            } => lost_reply_at = Some(e.t_ms),
            What::Fault {
                fault: FaultKind::ExecutorCrash,
                ..
            } if writes_recorded => lost_reply_at = Some(e.t_ms),
            // Only a process the world killed (a crash, a lost commit reply, or a replica still
            // busy when its shutdown wait ran out: mcp_ext_replicas seed 229, two submissions'
            // replies unread behind slow commits): one whose connection dropped exits by
            // itself, and reads what it had received first.
            What::World {
                action:
                    action @ (WorldAction::ExecutorDown { incarnation, .. }
                    | WorldAction::ReplicaStop { incarnation, .. }),
            } if lost_reply_at.is_some()
                || (writes_recorded
                    && matches!(action, WorldAction::ReplicaStop { killed: true, .. })) =>
            {
                lost_reply_at = None;
                let theirs = |a: &Frame| a.exec.1 == *incarnation;
                unwritten(arrived, &landed, e.t_ms, theirs, &mut out);
            }
            // A rollback fences every older epoch at once: what a process of one read and had
            // not written down about the node by then dies with it, whether or not it tried to
            // write later (mcp_ext_faults seed 8474: a submission's reply read 249 ms after
            // the rollback, refused by the old process's own epoch check).
            What::World {
                action: WorldAction::Rollback { epoch, .. },
            } if writes_recorded => {
                let older = |a: &Frame| a.exec.0 < *epoch;
                unwritten(arrived, &landed, e.t_ms, older, &mut out);
            }
            _ => {}
        }
        let What::Ledger { write } = &e.what else {
            continue;
        };
        let key = ((write.epoch, write.incarnation), write.node.as_str());
        match write.outcome {
            WriteOutcome::Refused { .. } if write.writer_epoch < write.ledger_epoch => {
                let since = landed.get(&key).map_or(0, |(t, _)| *t);
                for a in arrived.iter().filter(|a| {
                    a.is(key.1)
                        && a.exec == key.0
                        && a.arrives_at_ms.is_some_and(|x| x > since && x <= e.t_ms)
                }) {
                    out.insert(a.frame);
                }
            }
            WriteOutcome::Refused { .. } => {}
            _ => {
                // Counted from when the process decided it: a commit the world held was
                // decided before a reply that arrived while it waited (`mcp_ext_faults` seed
                // 5527: a timer's write held 102 ms landed after the submission's reply came,
                // unread, and the process crashed after it).
                let decided = e.t_ms.saturating_sub(write.delay_ms);
                landed.insert(key, (decided, write.operation_id.as_deref()));
            }
        }
    }
    out
}

/// Adds to `out` the frames that reached a process `whose` by `at` and that it had not written
/// down by then (no write of it about the frame's node, decided when or after the frame
/// arrived, landed).
///
/// A submission's reply is written down only by a write that names its operation: a process
/// steps one event at a time, and a write it decided after the reply came may be another
/// event's, taken first (`mcp_ext_faults` seed 5527: the caller's detach, an input, written
/// while the submission's reply waited unread, then a crash).
fn unwritten(
    arrived: &[Frame],
    landed: &BTreeMap<(ExecId, &str), (u64, Option<&str>)>,
    at: u64,
    whose: impl Fn(&Frame) -> bool,
    out: &mut BTreeSet<u64>,
) {
    let written = |a: &Frame, x: u64| {
        let Some(&(decided, op)) = a.node.and_then(|n| landed.get(&(a.exec, n))) else {
            return false;
        };
        match (a.exchange, a.shows) {
            (ExchangeKind::Submit, Some(Shows::Task { task, .. })) => {
                decided >= x && op == Some(task.as_str())
            }
            // In the same millisecond counts: the process reads and decides within one step
            // (`mcp_ext_faults` seed 9741: a 404 read at 33,562 ms and the hand-off it caused,
            // decided then and held 2 ms, before a rollback).
            _ => decided >= x,
        }
    };
    for a in arrived
        .iter()
        .filter(|a| whose(a) && a.arrives_at_ms.is_some_and(|x| x <= at && !written(a, x)))
    {
        out.insert(a.frame);
    }
}

/// Whether a reply about the node is evidence that its operation `task` exists: a view of it,
/// a lookup that found it, or any answer to a request about it that did not deny it (a result,
/// an accepted cancel, an input request, an acknowledged answer). A not-found denies; a 429/503
/// says nothing; and so does a cancel refused because the operation is done, which some
/// servers say with a 404 (AIP-151's cancel-done-not-found profile). A status notification
/// is evidence of nothing the executor was shown: notifications are advisory (spec section 7)
/// and it reads none (mcp_replicas seed 2070776: a notification of the task's end came between
/// the executor's poll and that poll's 404, which it read as expiry).
fn alive(a: &Frame, task: &str) -> bool {
    if a.exchange == ExchangeKind::Notification {
        return false;
    }
    match a.shows {
        Some(Shows::Task { task: shown, .. }) => shown == task,
        Some(Shows::Tasks { tasks, .. }) => tasks.iter().any(|t| t == task),
        Some(Shows::Input { task: shown, .. }) => shown == task,
        // The answer to a request that named the node's operation (a codec's own answer, such
        // as "no such method" to a lookup, names nothing).
        Some(Shows::Outcome | Shows::NoResult) => {
            matches!(a.exchange, ExchangeKind::Fetch | ExchangeKind::Poll)
        }
        Some(Shows::CancelAccepted) => a.exchange == ExchangeKind::Cancel,
        Some(Shows::Ack) => a.exchange == ExchangeKind::Answer,
        Some(
            Shows::NotFound { .. }
            | Shows::Throttled { .. }
            | Shows::SessionGone
            | Shows::CancelRejected { .. }
            | Shows::InlineRefused,
        )
        | None => false,
    }
}

/// Whether the hand-off was a decision the executor could not have made better (see the module
/// docs): the operation's advertised retention had run out and the last reply about it said
/// "not found", or the world spoiled each of the executor's last requests for the node.
fn excusable(v: &View, arrived: &[Frame], node: &str, task: &str, exec: ExecId, at: u64) -> bool {
    // First sight in any shape (a lookup's list included: the executor counts from it), the
    // ttl from the first view that carries one (a list entry too: mcp_replicas seed 675834, a
    // ts-sdk list advertised the ttl the executor counted with, and no status read followed).
    let first_sight = arrived
        .iter()
        .filter(|a| a.is(node) && a.intact() && alive(a, task))
        .find_map(|a| a.arrives_at_ms);
    let ttl = arrived
        .iter()
        .filter(|a| a.is(node) && a.intact())
        .find_map(|a| match a.shows {
            Some(Shows::Task {
                task: shown,
                ttl_ms: Some(ttl),
                ..
            }) if shown == task => Some(*ttl),
            Some(Shows::Tasks { ttl_ms, .. }) => ttl_ms.get(task).copied(),
            _ => None,
        });
    // Both SDK stores start the deletion timer again when a task ends, and the executor counts
    // the ttl again from its first sight of the end (mcp_replicas seed 128402): a 404 before
    // that is no longer what expiry looks like. Seen by the process that handed over (another
    // one's sight reaches it only if that process lived to write it down), in the reply to its
    // newest request for the node, within the request timeout: status notifications are
    // advisory (spec section 7) and the executor reads none; a reply past its request's
    // timeout reaches nobody (mcp_replicas seed 6639: a completed status held 11.8 s); and an
    // answer to a request older than one the process sent since is set aside unread
    // (mcp_replicas seeds 128469, 163771, 173230: a cancel refused as the task had ended, then
    // the poll sent before it answered "completed").
    let own: Vec<Frame> = sends(v.trace)
        .filter(|r| r.is(node) && r.exec == exec && r.exchange != ExchangeKind::Answer)
        .collect();
    let first_end = own
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let arr = answers(arrived, r)
                .find(|a| match a.shows {
                    Some(Shows::Task {
                        task: shown,
                        status,
                        ..
                    }) => shown == task && status.is_terminal(),
                    // A list entry is a view too: the executor reads its status and ttl.
                    Some(Shows::Tasks { status, .. }) => {
                        status.get(task).is_some_and(|s| s.is_terminal())
                    }
                    _ => false,
                })
                .and_then(|a| a.arrives_at_ms)?;
            let in_time = arr < r.t_ms.saturating_add(v.config.request_timeout_ms);
            let newest = own.get(i + 1).is_none_or(|next| next.t_ms > arr);
            (in_time && newest && !overtaken_elsewhere(v.trace, arrived, node, r, arr))
                .then_some(arr)
        })
        .min();
    let first_seen = first_sight
        .max(first_end)
        .zip(ttl)
        .map(|(at, ttl)| at.saturating_add(ttl));
    let latest = arrived.iter().rev().find(|a| {
        a.is(node)
            && a.exec == exec
            && a.intact()
            && a.arrives_at_ms.is_some_and(|arr| arr <= at)
            && (alive(a, task) || matches!(a.shows, Some(Shows::NotFound { .. })))
    });
    let expired = first_seen.is_some_and(|expiry| at >= expiry)
        && latest.is_some_and(|a| matches!(a.shows, Some(Shows::NotFound { .. })));
    expired
        || nothing_alive_lately(v, arrived, node, task, at)
        || no_cancel_taken(v, arrived, node, task, at)
}

/// Whether an answer to `r` that arrived at `arr` was set aside as stale because of another
/// process's request: one numbered after `r` (requests are numbered by the commit that sends
/// them, so committed after `r`'s), whose answer, one that said something of the operation,
/// that process had written down before `arr` (mcp_ext_replicas seed 115566: a poll committed
/// before a replica's, but held 5.6 s before it left, showed the task's end after the
/// replica's poll was answered and written; the executor set it aside unread, as every stale
/// answer, and its 404 past the reckoned expiry was excusable).
fn overtaken_elsewhere(trace: &Trace, arrived: &[Frame], node: &str, r: &Frame, arr: u64) -> bool {
    // The commit that numbered a request: its process's last write of the node before it left.
    let commit_of = |exec: ExecId, sent: u64| {
        landed(trace)
            .filter(|(t, w)| *t <= sent && w.node == node && (w.epoch, w.incarnation) == exec)
            .map(|(t, _)| t)
            .max()
    };
    let Some(r_commit) = commit_of(r.exec, r.t_ms) else {
        return false;
    };
    sends(trace)
        .filter(|o| o.is(node) && o.exec != r.exec && o.exchange != ExchangeKind::Answer)
        .filter(|o| commit_of(o.exec, o.t_ms).is_some_and(|c| c > r_commit))
        .any(|o| {
            answers(arrived, &o)
                .filter(|a| !matches!(a.shows, Some(Shows::Throttled { .. } | Shows::SessionGone)))
                .filter_map(|a| a.arrives_at_ms)
                .any(|o_arr| {
                    landed(trace).any(|(t, w)| {
                        w.node == node
                            && (w.epoch, w.incarnation) == o.exec
                            && t >= o_arr
                            && t < arr
                    })
                })
        })
}

/// Whether none of the last `not_found_retries + 1` requests sent for `node` before `at` (by any
/// executor: what the earlier ones learnt is in the record the later ones resume) got back
/// anything showing `task` alive: each was lost on the way, answered by a replica in front of
/// the server, answered "not found", or answered by a reply that was lost, cut, rewritten or
/// had not arrived by `at` or within the executor's request timeout. A bounded executor must give up somewhere; that many requests in a
/// row that said nothing else is what a deleted operation looks like.
fn nothing_alive_lately(v: &View, arrived: &[Frame], node: &str, task: &str, at: u64) -> bool {
    let want = v.config.not_found_retries as usize + 1;
    last_said_nothing_alive(v, arrived, node, task, at, want, |s| {
        s.exchange != ExchangeKind::Answer
    })
}

/// Whether each of the last `max_cancel_attempts` cancels sent for `node` before `at` (by any
/// executor: the count of attempts lives in the record) went untaken: lost on the way, answered
/// by a replica, or answered by nothing that showed `task` alive (an acknowledgement, the task
/// itself) in time. The executor is cancelling a running operation at a person's request, and a
/// status read cannot settle that; a bounded executor stops sending cancels somewhere, and then
/// a person must stop the operation (`mcp_ext_faults` seed 977025: five cancels in a row lost on
/// the way, each followed by a read showing the task working). One cancel taken is a cancel the
/// executor had to wait out, not give up on: no excuse then.
fn no_cancel_taken(v: &View, arrived: &[Frame], node: &str, task: &str, at: u64) -> bool {
    let want = v.config.max_cancel_attempts as usize;
    want > 0
        && last_said_nothing_alive(v, arrived, node, task, at, want, |s| {
            s.exchange == ExchangeKind::Cancel
        })
}

/// Whether there were at least `want` requests for `node` sent before `at` that `counts`, and
/// none of the last `want` of them got back anything showing `task` alive: each was lost on the
/// way, answered by a replica in front of the server, or answered by nothing alive that arrived
/// by `at` within the executor's request timeout.
fn last_said_nothing_alive(
    v: &View,
    arrived: &[Frame],
    node: &str,
    task: &str,
    at: u64,
    want: usize,
    counts: impl Fn(&Frame) -> bool,
) -> bool {
    let requests: Vec<Frame> = sends(v.trace)
        .filter(|s| s.is(node) && s.t_ms <= at && counts(s))
        .collect();
    if requests.len() < want {
        return false;
    }
    requests[requests.len() - want..].iter().all(|r| {
        if matches!(r.verdict, NetVerdict::Lost | NetVerdict::Replica { .. }) {
            return true;
        }
        // A reply past the request's timeout answers a request the executor had given up on
        // (an HTTP client aborts it; `mcp_ext_faults` seed 9783: a poll's reply held 14.7 s).
        // A submission may be given longer (a synchronous tool's bound), so not judged so.
        let in_time = |arr: u64| {
            r.exchange == ExchangeKind::Submit
                || arr < r.t_ms.saturating_add(v.config.request_timeout_ms)
        };
        // A not-found that hid a task held for another session says nothing of deletion: it
        // counts as the task shown alive.
        let hidden = |a: &Frame| matches!(a.shows, Some(Shows::NotFound { hidden: true, .. }));
        !answers(arrived, r).any(|a| {
            a.arrives_at_ms
                .is_some_and(|arr| arr <= at && (hidden(a) || (in_time(arr) && alive(a, task))))
        })
    })
}

/// The replies that reached `r`'s executor intact, answering `r` (by its request id).
fn answers<'f>(arrived: &'f [Frame<'f>], r: &Frame) -> impl Iterator<Item = &'f Frame<'f>> {
    let (exec, id) = (r.exec, r.request_id);
    arrived
        .iter()
        .filter(move |a| a.exec == exec && id.is_some() && a.request_id == id && a.intact())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::codec::ExchangeKind;
    use crate::fake::truth::TaskStatus;
    use crate::judge::checkers::ledger_writes::build;
    use crate::judge::checkers::testkit::{assert_clean, Tb, SETTLED};
    use crate::trace::{Dir, NetVerdict};
    use toolop::record::LocalState;

    fn working() -> Shows {
        Shows::Task {
            task: "t-n1".into(),
            status: TaskStatus::Working,
            poll_interval_ms: None,
            input_round: None,
            ttl_ms: None,
            result: false,
        }
    }

    #[test]
    fn clean_traces_pass() {
        // The clean unknown story: the submission's reply was never seen, nothing to look up.
        assert_clean(check);
        // A task the server deleted before the hand-off is gone, whatever was shown.
        let mut b = Tb::new();
        b.at(0).submit("n1").sent("n1", "submit");
        b.at(10).recv_shows("n1", "submit", "submitted", working());
        b.unknown_path("n1", 0);
        b.truth.tasks.get_mut("t-n1").expect("task").deleted_at_ms = Some(4_000);
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    /// Three not-founds in a row from the server itself before expiry are what a deleted task
    /// looks like, unless they hid a task the server held for another HTTP session: the task
    /// was there, and an executor that kept its session would have read it.
    #[test]
    fn a_not_found_that_hid_a_task_of_another_session_excuses_nothing() {
        let hand_off_after = |hidden: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10).net_in("n1", ExchangeKind::Poll, working());
            for t in [5_010, 5_015, 5_020] {
                b.at(t).net_out("n1", ExchangeKind::Poll).net_in(
                    "n1",
                    ExchangeKind::Poll,
                    Shows::NotFound {
                        expired: false,
                        hidden,
                    },
                );
            }
            check(&b.build(SETTLED))
        };
        assert_eq!(hand_off_after(false), vec![]);
        assert_eq!(hand_off_after(true).len(), 1);
    }

    #[test]
    fn what_the_executor_could_not_tell_from_gone_is_excused() {
        let not_found = Shows::NotFound {
            expired: false,
            hidden: false,
        };
        // Three polls in a row answered by a lagging replica (the configured two retries, and
        // one more) before expiry.
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10).net_in("n1", ExchangeKind::Poll, working());
        for t in [5_010, 5_015, 5_020] {
            lagging_404(&mut b, t);
        }
        let trace = b.build(SETTLED);
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
        // The metrics count it, from the same judgement the sweep's checkers make.
        assert_eq!(
            crate::judge::metrics::measure(&trace).undecidable_unknowns,
            1
        );
        // Two of them, after a good read: the executor had a retry left.
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(5_000).net_out("n1", ExchangeKind::Poll);
        b.net_in("n1", ExchangeKind::Poll, working());
        for t in [5_010, 5_020] {
            lagging_404(&mut b, t);
        }
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        // One not-found after the advertised retention ran out.
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        let mut shown = working();
        if let Shows::Task { ttl_ms, .. } = &mut shown {
            *ttl_ms = Some(2_000);
        }
        b.at(10).net_in("n1", ExchangeKind::Poll, shown);
        b.at(3_000)
            .net_in("n1", ExchangeKind::Poll, not_found.clone());
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        // One not-found before expiry is not enough: the executor had retries left.
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10).net_in("n1", ExchangeKind::Poll, working());
        b.at(3_000)
            .net_out("n1", ExchangeKind::Poll)
            .net_in("n1", ExchangeKind::Poll, not_found);
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
    }

    #[test]
    fn a_reply_past_its_request_timeout_leaves_the_not_founds_in_a_row() {
        // A poll whose reply (the live task) was held past the executor's request timeout,
        // then two lagging 404s and an unanswerable lookup: the executor had given the poll up,
        // so it saw four requests in a row say nothing else (mcp_ext_faults seed 9783). In
        // time, the reply counts.
        let build = |held_ms: u64| {
            let mut b = Tb::new();
            b.config.request_timeout_ms = 2_000;
            // The poll, two 404s and the hand-off's own lookup: the last four requests.
            b.config.not_found_retries = 3;
            b.unknown_path("n1", 0);
            b.at(100).net_out("n1", ExchangeKind::Poll);
            b.net(
                Dir::ToExecutor,
                "n1",
                ExchangeKind::Poll,
                NetVerdict::Deliver,
                Some(held_ms),
                Some(working()),
            );
            for t in [4_000, 4_010] {
                lagging_404(&mut b, t);
            }
            b.build(SETTLED)
        };
        let late = build(3_000);
        assert_eq!(check(&late), vec![]);
        // Past its timeout the reply reaches nobody at all: nothing was shown, so the hand-off
        // needs no excuse (it was counted undecidable before session 31).
        assert_eq!(judge_undecidable(&late), 0);
        assert_eq!(check(&build(1_000)).len(), 1);
    }

    #[test]
    fn a_good_read_that_died_with_its_reader_leaves_the_not_founds_in_a_row() {
        // aip151_faults seed 9177: 404, a good read whose reader crashed before its commit,
        // 404, 404: the resumed executor had seen three not-founds in a row.
        let build = |crash: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10)
                .net_out("n1", ExchangeKind::Poll)
                .net_in("n1", ExchangeKind::Poll, working());
            lagging_404(&mut b, 5_001);
            b.at(5_005).net_out("n1", ExchangeKind::Poll).net_in(
                "n1",
                ExchangeKind::Poll,
                working(),
            );
            if crash {
                b.push(What::Fault {
                    decision: 0,
                    fault: FaultKind::ExecutorCrash,
                    node: Some("n1".into()),
                    state: None,
                    detail: FaultDetail::Crash {
                        point: CrashPoint::AfterReplyBeforeCommit,
                    },
                });
                b.push(What::World {
                    action: WorldAction::ExecutorDown {
                        incarnation: 1,
                        exit: "crashed after a reply, before its commit".into(),
                    },
                });
                b.exec(1, 2);
            }
            for t in [5_010, 5_020] {
                lagging_404(&mut b, t);
            }
            b.build(SETTLED)
        };
        let trace = build(true);
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
        // The same good read, written down: the executor had a retry left.
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn a_good_read_that_landed_after_its_reader_went_down_showed_nothing() {
        // mcp_replicas seed 39495: a good read, 404, 404, a good read that reached its process
        // 163 ms after the process went down (its ledger failed), then a 404 to the restarted
        // process.
        let build = |lands_after_down: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10)
                .net_out("n1", ExchangeKind::Poll)
                .net_in("n1", ExchangeKind::Poll, working());
            lagging_404(&mut b, 5_001);
            lagging_404(&mut b, 5_002);
            let arrives_after_ms = if lands_after_down { 10 } else { 3 };
            b.at(5_005).net_out("n1", ExchangeKind::Poll).net(
                Dir::ToExecutor,
                "n1",
                ExchangeKind::Poll,
                NetVerdict::Deliver,
                Some(arrives_after_ms),
                Some(working()),
            );
            b.at(5_012).push(What::World {
                action: WorldAction::ExecutorDown {
                    incarnation: 1,
                    exit: "ledger failed".into(),
                },
            });
            b.exec(1, 2);
            lagging_404(&mut b, 5_020);
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        // Landed while its reader was up: the operation was shown alive, and the hand-off is
        // false.
        assert_eq!(check(&build(false)).len(), 1);
    }

    /// A lookup's list with task t-n1 in it, its entry showing `status` and `ttl_ms` if given.
    fn listed(status: Option<TaskStatus>, ttl_ms: Option<u64>) -> Shows {
        Shows::Tasks {
            tasks: vec!["t-n1".into()],
            status: status
                .map(|s| ("t-n1".to_string(), s))
                .into_iter()
                .collect(),
            ttl_ms: ttl_ms
                .map(|t| ("t-n1".to_string(), t))
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn expiry_counts_from_the_first_sight_in_any_shape() {
        // mcp_faults seed 6121: found by key at 10 ms (a list, no ttl), then a view advertising
        // a 2 s ttl at 1,000 ms; one not-found at 2,500 ms is after expiry as the executor
        // counts it.
        let mut shown = working();
        if let Shows::Task { ttl_ms, .. } = &mut shown {
            *ttl_ms = Some(2_000);
        }
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10)
            .net_in("n1", ExchangeKind::Lookup, listed(None, None));
        b.at(1_000).net_in("n1", ExchangeKind::Poll, shown);
        b.at(2_500).net_out("n1", ExchangeKind::Poll).net_in(
            "n1",
            ExchangeKind::Poll,
            Shows::NotFound {
                expired: false,
                hidden: false,
            },
        );
        let trace = b.build(SETTLED);
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
    }

    #[test]
    fn a_ttl_a_list_entry_advertises_counts() {
        // mcp_replicas seed 675834: found by key at 10 ms, the list entry advertising a 2 s
        // ttl, and no status read after it; one not-found at 2,500 ms is what expiry looks
        // like. Without a ttl on the entry nothing had run out, and the hand-off is false.
        let build = |ttl: Option<u64>| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10)
                .net_in("n1", ExchangeKind::Lookup, listed(None, ttl));
            b.at(2_500).net_out("n1", ExchangeKind::Poll).net_in(
                "n1",
                ExchangeKind::Poll,
                Shows::NotFound {
                    expired: false,
                    hidden: false,
                },
            );
            b.build(SETTLED)
        };
        let trace = build(Some(2_000));
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
        assert_eq!(check(&build(None)).len(), 1);
        // Another task's ttl on the list is not this one's.
        let mut other = build(Some(2_000));
        for e in &mut other.events {
            if let What::Net {
                shows: Some(shows), ..
            } = &mut e.what
            {
                if let Shows::Tasks { ttl_ms, .. } = &mut **shows {
                    *ttl_ms = [("t-other".to_string(), 2_000)].into_iter().collect();
                }
            }
        }
        assert_eq!(check(&other).len(), 1);
    }

    #[test]
    fn a_list_entry_showing_the_end_restarts_retention() {
        // As the next test, the end seen on a list entry (a lookup by key) instead of a status
        // read: the executor reads a list entry's status and ttl like any view. A 5 s ttl, first
        // sight at 10 ms, the end on the list at 3,000 ms, one 404 at 5,020 ms and the hand-off
        // at 5,030 ms: within the end's retention, no expiry, and the hand-off is false. If the
        // list showed the task still working, the 404 came past the retention: excused.
        let build = |ended: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10).net_in(
                "n1",
                ExchangeKind::Lookup,
                listed(Some(TaskStatus::Working), Some(5_000)),
            );
            b.at(3_000).net_out("n1", ExchangeKind::Lookup);
            let lookup = b.last_frame();
            let shown = if ended {
                TaskStatus::Completed
            } else {
                TaskStatus::Working
            };
            b.push(What::Net {
                dir: Dir::ToExecutor,
                exchange: ExchangeKind::Lookup,
                node: Some("n1".into()),
                lane: 0,
                epoch: 1,
                incarnation: 1,
                frame: lookup + 100,
                request_id: Some(lookup),
                bytes: 1,
                verdict: NetVerdict::Deliver,
                arrives_after_ms: Some(0),
                shows: Some(Box::new(listed(Some(shown), Some(5_000)))),
            });
            b.at(5_020).net_out("n1", ExchangeKind::Poll).net_in(
                "n1",
                ExchangeKind::Poll,
                Shows::NotFound {
                    expired: false,
                    hidden: false,
                },
            );
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)).len(), 1);
        assert_eq!(check(&build(false)), vec![]);
    }

    /// n1's task as a view advertising a 5 s ttl.
    fn with_ttl(status: TaskStatus) -> Shows {
        Shows::Task {
            task: "t-n1".into(),
            status,
            poll_interval_ms: None,
            input_round: None,
            ttl_ms: Some(5_000),
            result: false,
        }
    }

    /// The answer to poll frame `request` of process (1, `incarnation`), arriving at once.
    fn poll_answer(b: &mut Tb, incarnation: u32, request: u64, shows: Shows) {
        b.push(What::Net {
            dir: Dir::ToExecutor,
            exchange: ExchangeKind::Poll,
            node: Some("n1".into()),
            lane: 0,
            epoch: 1,
            incarnation,
            frame: request + 100,
            request_id: Some(request),
            bytes: 1,
            verdict: NetVerdict::Deliver,
            arrives_after_ms: Some(0),
            shows: Some(Box::new(shows)),
        });
    }

    #[test]
    fn retention_counts_again_from_the_first_sight_of_the_end() {
        // mcp_replicas seed 128402: a 5 s ttl, the task seen working at 10 ms and completed at
        // `end_at`; one 404 at `not_found_at` (a lagging replica: the server still held the
        // task); the hand-off at 5,030 ms. Past creation's retention (5,010 ms) but within the
        // end's, it is no expiry: the executor had retries left. Past the end's, it is what
        // expiry looks like: excused. `overtaken`: the process sent a cancel after that poll
        // and before its answer came, which then answers a request older than the newest and
        // is set aside unread: no sight of the end (mcp_replicas seed 128469).
        let build_with = |end_at: u64, not_found_at: u64, overtaken: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10)
                .net_in("n1", ExchangeKind::Poll, with_ttl(TaskStatus::Working));
            b.at(end_at).net_out("n1", ExchangeKind::Poll);
            let poll = b.last_frame();
            if overtaken {
                b.net_out("n1", ExchangeKind::Cancel);
            }
            poll_answer(&mut b, 1, poll, with_ttl(TaskStatus::Completed));
            b.at(not_found_at)
                .net_out("n1", ExchangeKind::Fetch)
                .net_in(
                    "n1",
                    ExchangeKind::Fetch,
                    Shows::NotFound {
                        expired: false,
                        hidden: false,
                    },
                );
            b.build(SETTLED)
        };
        let build = |end_at, not_found_at| build_with(end_at, not_found_at, false);
        assert_eq!(check(&build(1_500, 5_020)).len(), 1);
        let trace = build_with(1_500, 5_020, true);
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
        let trace = build(20, 5_025);
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
    }

    #[test]
    fn an_end_shown_after_another_processs_newer_request_was_written_is_set_aside() {
        // mcp_ext_replicas seed 115566: this process (incarnation 1) committed its poll at
        // 1,400 ms and it left at 1,500 ms, after a replica (1000) committed (1,450), sent and
        // wrote down (1,480) a newer poll. The answer showing the end, at 1,500 ms, answered a
        // request older than one already answered in the record: set aside unread, so no
        // sight of the end, and a 404 past creation's retention (5,010 ms) is what expiry
        // looks like. Had the replica not written its answer down yet, the end counts.
        let run = |replica_wrote_first: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10)
                .net_in("n1", ExchangeKind::Poll, with_ttl(TaskStatus::Working));
            b.at(1_400).push(build::ev(build::write("n1", 1, 1, 2)));
            b.exec(1, 1000)
                .at(1_450)
                .push(build::ev(build::write("n1", 1, 1000, 3)));
            b.at(1_460).net_out("n1", ExchangeKind::Poll);
            let replicas = b.last_frame();
            b.at(1_470);
            poll_answer(&mut b, 1000, replicas, with_ttl(TaskStatus::Working));
            let written_at = if replica_wrote_first { 1_480 } else { 1_600 };
            b.at(written_at)
                .push(build::ev(build::write("n1", 1, 1000, 4)));
            b.exec(1, 1).at(1_500).net_out("n1", ExchangeKind::Poll);
            let ours = b.last_frame();
            poll_answer(&mut b, 1, ours, with_ttl(TaskStatus::Completed));
            b.at(5_020).net_out("n1", ExchangeKind::Fetch).net_in(
                "n1",
                ExchangeKind::Fetch,
                Shows::NotFound {
                    expired: false,
                    hidden: false,
                },
            );
            // The hand-off, written by this process.
            b.at(5_030).push(build::ev(build::write("n1", 1, 1, 5)));
            let mut t = b.build(SETTLED);
            t.events.sort_by_key(|e| e.t_ms);
            t
        };
        assert_eq!(check(&run(true)), vec![]);
        assert_eq!(check(&run(false)).len(), 1);
    }

    #[test]
    fn the_process_that_handed_over_is_the_one_the_ledger_saw_write() {
        // mcp_ext_faults seed 418: a second executor (incarnation 1000) got one 404 after the
        // advertised retention ran out and handed over, while the primary (incarnation 1) had
        // last read the task alive, before expiry. The replica's 404 after expiry is what
        // expiry looks like: excused. Judged as if the primary had handed over (no ledger
        // write says who did), its last read showed the task alive: false.
        let build = |replica_wrote_it: bool| {
            let mut shown = working();
            if let Shows::Task { ttl_ms, .. } = &mut shown {
                *ttl_ms = Some(3_000);
            }
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10).net_in("n1", ExchangeKind::Poll, shown.clone());
            b.at(2_500)
                .net_out("n1", ExchangeKind::Poll)
                .net_in("n1", ExchangeKind::Poll, shown);
            b.exec(1, 1000);
            b.at(3_100).net_out("n1", ExchangeKind::Poll).net_in(
                "n1",
                ExchangeKind::Poll,
                Shows::NotFound {
                    expired: false,
                    hidden: false,
                },
            );
            if replica_wrote_it {
                let mut w = build::write("n1", 1, 1000, 7);
                w.state = LocalState::Unknown;
                b.at(3_200).push(build::ev(w));
            }
            b.build(SETTLED)
        };
        let trace = build(true);
        assert_eq!(check(&trace), vec![]);
        assert_eq!(judge_undecidable(&trace), 1);
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn a_read_whose_reader_was_fenced_or_lost_its_commit_reply_shows_nothing() {
        // A rollback moved the ledger to epoch 2; the epoch-1 reader's next write about n1 was
        // refused, so its read of the live task died with it. Likewise a reader stopped by a
        // lost commit reply. Written down, the same read makes the hand-off false.
        let build = |how: &str| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10).net_in("n1", ExchangeKind::Poll, working());
            match how {
                "fenced" => {
                    let mut w = build::write("n1", 1, 1, 3);
                    w.ledger_epoch = 2;
                    w.outcome = WriteOutcome::Refused {
                        error: "fenced".into(),
                    };
                    b.at(20).push(build::ev(w));
                }
                "reply lost" | "down" => {
                    if how == "reply lost" {
                        b.at(20)
                            .fault(FaultKind::LedgerCommitLostReply, Some("n1"), None);
                    }
                    b.at(20).push(What::World {
                        action: WorldAction::ExecutorDown {
                            incarnation: 1,
                            exit: "commit reply lost".into(),
                        },
                    });
                }
                _ => {
                    b.at(20).push(build::ev(build::write("n1", 1, 1, 3)));
                }
            }
            b.build(SETTLED)
        };
        assert_eq!(check(&build("fenced")), vec![]);
        assert_eq!(check(&build("reply lost")), vec![]);
        assert_eq!(check(&build("written")).len(), 1);
        // A later stop with no lost commit reply drawn leaves the read counted.
        assert_eq!(check(&build("down")).len(), 1);
    }

    #[test]
    fn a_reply_that_lands_while_the_hand_off_commits_came_too_late_for_it() {
        // mcp_replicas seed 1874038: the hand-off was decided at 5,000 (its write, held 30 ms,
        // landed at 5,030); a view of the live task that reached the process at 5,010 came
        // too late for that step. One that reached it at 4,990 was there to be read.
        let build = |shown_at: u64| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            let mut w = build::write("n1", 1, 1, 3);
            w.delay_ms = 30;
            b.at(5_030).push(build::ev(w));
            b.at(shown_at).net_in("n1", ExchangeKind::Poll, working());
            check(&b.build(SETTLED))
        };
        assert_eq!(build(5_010), vec![]);
        assert_eq!(build(4_990).len(), 1);
    }

    #[test]
    fn a_read_its_process_lost_before_writing_it_down_shows_nothing() {
        // The world records the ledger: the reader wrote n1 at 5 and was shown the live task
        // at 10; at 20 it went down (a crash elsewhere in it) or a rollback to epoch 2 fenced
        // it. A write that lands at 15 but was decided at 9 (held 6 ms) was not about the
        // read; one decided at 11 (held 4 ms), or at 10 itself (held 5 ms: a process reads and
        // decides in one step), was, and then the hand-off is false.
        let build_held = |held_ms: u64, end: WorldAction| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(5).push(build::ev(build::write("n1", 1, 1, 2)));
            b.at(10).net_in("n1", ExchangeKind::Poll, working());
            let mut w = build::write("n1", 1, 1, 3);
            w.delay_ms = held_ms;
            b.at(15).push(build::ev(w));
            if matches!(end, WorldAction::ExecutorDown { .. }) {
                b.at(20).fault(FaultKind::ExecutorCrash, Some("n2"), None);
            }
            b.at(20).push(What::World { action: end });
            b.build(SETTLED)
        };
        let build = |decided_after: bool, end: WorldAction| {
            build_held(if decided_after { 4 } else { 6 }, end)
        };
        let down = || WorldAction::ExecutorDown {
            incarnation: 1,
            exit: "crashed after a commit, before its sends".into(),
        };
        let rollback = || WorldAction::Rollback {
            incarnation: 2,
            epoch: 2,
        };
        assert_eq!(check(&build(false, down())), vec![]);
        // A process whose connection dropped exits by itself, having read what it received.
        let dropped = WorldAction::ExecutorDown {
            incarnation: 1,
            exit: "connection dropped".into(),
        };
        let mut t = build(false, dropped);
        t.events.retain(|e| {
            !matches!(
                e.what,
                What::Fault {
                    fault: FaultKind::ExecutorCrash,
                    ..
                }
            )
        });
        assert_eq!(check(&t).len(), 1);
        assert_eq!(check(&build(true, down())).len(), 1);
        assert_eq!(check(&build(false, rollback())), vec![]);
        assert_eq!(check(&build(true, rollback())).len(), 1);
        assert_eq!(check(&build_held(5, rollback())).len(), 1);
        assert_eq!(check(&build_held(5, down())).len(), 1);
    }

    #[test]
    fn a_replica_that_crashes_loses_what_it_read_like_any_process() {
        // mcp_ext_faults seed 62339: a replica (incarnation 1000) was shown the live task at 10
        // and crashed at 20 before writing it down; the world reports a replica's end as
        // `ReplicaStop`, not `ExecutorDown`. A replica the world stopped without a crash is
        // still judged on what it read.
        let build = |crashed: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.exec(1, 1_000);
            b.at(5).push(build::ev(build::write("n1", 1, 1_000, 2)));
            b.at(10).net_in("n1", ExchangeKind::Poll, working());
            if crashed {
                b.at(20).fault(FaultKind::ExecutorCrash, Some("n2"), None);
            }
            b.at(20).push(What::World {
                action: WorldAction::ReplicaStop {
                    incarnation: 1_000,
                    exit: if crashed { "crashed" } else { "shut down" }.into(),
                    killed: false,
                },
            });
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn a_replica_killed_at_its_shutdown_wait_loses_what_it_read() {
        // mcp_ext_replicas seed 229: a replica told to stop was still busy in slow commits when
        // the world's wait ran out, and was killed with a live task's reply unread. Stopped
        // cleanly, it reads and writes down what it received first: judged on it.
        let build = |killed: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.exec(1, 1_000);
            b.at(5).push(build::ev(build::write("n1", 1, 1_000, 2)));
            b.at(10).net_in("n1", ExchangeKind::Poll, working());
            b.at(20).push(What::World {
                action: WorldAction::ReplicaStop {
                    incarnation: 1_000,
                    exit: "shut down".into(),
                    killed,
                },
            });
            b.build(SETTLED)
        };
        assert_eq!(check(&build(true)), vec![]);
        assert_eq!(check(&build(false)).len(), 1);
    }

    #[test]
    fn a_submission_reply_is_written_down_only_by_a_write_naming_its_operation() {
        // The submission's reply reached the process at 10; it then wrote n1 for another event
        // (decided at 11, the record still without an operation) and went down at 20. Had the
        // write named the task, the reply was written down and the hand-off is false.
        let build = |names_it: bool| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(5).push(build::ev(build::write("n1", 1, 1, 2)));
            b.at(10).net_in("n1", ExchangeKind::Submit, working());
            let mut w = build::write("n1", 1, 1, 3);
            w.delay_ms = 4;
            w.operation_id = names_it.then(|| "t-n1".to_string());
            b.at(15).push(build::ev(w));
            b.at(20).fault(FaultKind::ExecutorCrash, Some("n2"), None);
            b.at(20).push(What::World {
                action: WorldAction::ExecutorDown {
                    incarnation: 1,
                    exit: "crashed after a commit, before its sends".into(),
                },
            });
            b.build(SETTLED)
        };
        assert_eq!(check(&build(false)), vec![]);
        assert_eq!(check(&build(true)).len(), 1);
    }

    /// A poll answered 404 by a lagging replica in front of the server, at `t`.
    fn lagging_404(b: &mut Tb, t: u64) {
        let replica = NetVerdict::Replica {
            status: 404,
            retry_after_ms: None,
        };
        b.at(t)
            .net(Dir::ToServer, "n1", ExchangeKind::Poll, replica, None, None)
            .net_in(
                "n1",
                ExchangeKind::Poll,
                Shows::NotFound {
                    expired: false,
                    hidden: false,
                },
            );
    }

    fn judge_undecidable(trace: &Trace) -> u32 {
        let v = crate::judge::checkers::view::View::of(trace).expect("complete");
        judged(&v).1
    }

    #[test]
    fn knowledge_that_died_with_its_executor_resolves_nothing() {
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10).net_in("n1", ExchangeKind::Poll, working());
        b.at(10).push(What::World {
            action: WorldAction::ExecutorDown {
                incarnation: 1,
                exit: "crashed after a reply, before its commit".into(),
            },
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_live_task_the_executor_had_been_shown_is_a_false_unknown() {
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10).net_in("n1", ExchangeKind::Poll, working());
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("held task t-n1"), "{v:?}");
        // Found by its key counts as shown; a reply that never arrived does not.
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10).net_in(
            "n1",
            ExchangeKind::Lookup,
            Shows::Tasks {
                tasks: vec!["t-n1".into()],
                status: BTreeMap::new(),
                ttl_ms: BTreeMap::new(),
            },
        );
        assert_eq!(check(&b.build(SETTLED)).len(), 1);
        let mut b = Tb::new();
        b.unknown_path("n1", 0);
        b.at(10).net(
            Dir::ToExecutor,
            "n1",
            ExchangeKind::Poll,
            NetVerdict::Lost,
            None,
            Some(working()),
        );
        assert_eq!(check(&b.build(SETTLED)), vec![]);
    }

    #[test]
    fn a_reply_past_its_requests_timeout_shows_nothing() {
        // mcp_ext_replicas seed 183847: a poll's reply, held 14.5 s, reached the process 4.5 s
        // after the request's timeout; the executor had given the poll up and never read it.
        // The same reply a millisecond within the timeout is a sight of the task.
        let run = |late: bool| {
            let mut b = Tb::new();
            b.config.request_timeout_ms = 2_000;
            b.unknown_path("n1", 0);
            b.at(1_000).net_out("n1", ExchangeKind::Poll);
            let timeout_ms = b.config.request_timeout_ms;
            let at = if late {
                1_000 + timeout_ms
            } else {
                1_000 + timeout_ms - 1
            };
            b.at(at).net_in("n1", ExchangeKind::Poll, working());
            check(&b.build(SETTLED))
        };
        assert_eq!(run(true), vec![]);
        assert_eq!(run(false).len(), 1);
    }

    #[test]
    fn a_status_notification_shows_the_executor_nothing() {
        // mcp_replicas seed 2070776: the only frame showing the task between the executor's
        // poll and that poll's 404 was a status notification, which the executor reads none of
        // (advisory, spec section 7). The same view as a poll's answer is a false unknown.
        let run = |exchange: ExchangeKind| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10).net_in("n1", exchange, working());
            check(&b.build(SETTLED))
        };
        assert_eq!(run(ExchangeKind::Notification), vec![]);
        assert_eq!(run(ExchangeKind::Poll).len(), 1);
    }

    /// A person asked for a cancel and the executor sent `max_cancel_attempts` (3 here) of them,
    /// each lost on the way, each followed by a read showing the task working: handing the
    /// running task to a person is what a bounded executor must do (mcp_ext_faults seed
    /// 977025), counted as undecidable. One cancel that came back acknowledged, or fewer cancels
    /// than the bound, leaves no excuse.
    #[test]
    fn cancels_none_of_which_was_taken_excuse_handing_a_running_task_over() {
        let build = |verdicts: &[NetVerdict]| {
            let mut b = Tb::new();
            b.unknown_path("n1", 0);
            b.at(10).net_in("n1", ExchangeKind::Poll, working());
            let mut t = 1_000;
            for verdict in verdicts {
                b.at(t).net(
                    Dir::ToServer,
                    "n1",
                    ExchangeKind::Cancel,
                    verdict.clone(),
                    None,
                    None,
                );
                if *verdict == NetVerdict::Deliver {
                    b.net_in("n1", ExchangeKind::Cancel, Shows::CancelAccepted);
                }
                b.at(t + 500).net_out("n1", ExchangeKind::Poll).net_in(
                    "n1",
                    ExchangeKind::Poll,
                    working(),
                );
                t += 1_000;
            }
            b.build(SETTLED)
        };
        let lost = NetVerdict::Lost;
        let all_lost = build(&[lost.clone(), lost.clone(), lost.clone()]);
        assert_eq!(check(&all_lost), vec![]);
        assert_eq!(judge_undecidable(&all_lost), 1);
        let one_taken = build(&[lost.clone(), NetVerdict::Deliver, lost.clone()]);
        assert_eq!(check(&one_taken).len(), 1);
        assert_eq!(check(&build(&[lost.clone(), lost])).len(), 1);
    }
}
