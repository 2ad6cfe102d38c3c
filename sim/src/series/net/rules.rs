//! Fault rules, turmoil-style: each looks at a protocol-neutral exchange (its kind, the neutral
//! response, the call node the world attributes it to) and returns a verdict. Which faults a
//! lane can suffer is its protocol's catalogue row; nothing here knows a wire format.
//!
//! Request leg, in order: a replica in front of the server answers a status or result read
//! (429 / 503 with Retry-After, or a lagging 404); a request is lost. (A dropped connection is
//! decided after the request went out.)
//!
//! Reply leg, first rule that fires: a submission's reply is lost after the server created the
//! task; a reply carrying a result is lost or truncated; a status read's reply is held past the
//! request timeout (out of order); a read's reply names another task; a cancel's reply is lost;
//! a read showing an input request is delivered again later; a reply's body names another
//! request in flight on the same connection. After any delivery, an old reply of a settled (or
//! taken-over) call node may be delivered again.

use crate::fake::codec::{
    CallId, CodecCaps, Decoded, ExchangeKind, Outcome, Request, Response, Shape, Throttle,
};
use crate::series::faults::FaultKind;
use crate::trace::{FaultDetail, NetVerdict, Shows};

use super::{Inflight, Net};

/// What a request-leg rule decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    /// The request never arrives.
    Drop,
    /// Something in front of the server answers instead of it.
    Reply(Response),
}

/// What the reply-leg rules decided for one reply.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ReplyVerdict {
    pub verdict: NetVerdict,
    pub shape: Shape,
    /// Cut the encoded body short (the cut is drawn against its length).
    pub cut_bytes: bool,
    pub extra_delay_ms: u64,
    pub duplicate_after_ms: Option<u64>,
}

impl ReplyVerdict {
    fn pass() -> ReplyVerdict {
        ReplyVerdict {
            verdict: NetVerdict::Deliver,
            shape: Shape::default(),
            cut_bytes: false,
            extra_delay_ms: 0,
            duplicate_after_ms: None,
        }
    }

    fn with(verdict: NetVerdict) -> ReplyVerdict {
        ReplyVerdict {
            verdict,
            ..ReplyVerdict::pass()
        }
    }
}

/// The neutral facts about a reply the rules look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyInfo {
    /// A refusal or failure rather than an answer.
    pub error: bool,
    /// A submission's reply that names a task (created or found again).
    pub created: bool,
    /// Carries a terminal task's result (a result read, or a status read of a protocol that
    /// shows results).
    pub carries_result: bool,
    /// The result has content blocks and the server claims a digest, so dropping the last
    /// block is a detectable cut.
    pub block_cut_detectable: bool,
    /// A status read showing a pending input request.
    pub shows_input: bool,
}

impl ReplyInfo {
    /// `shown`: what the codec's reply shows the executor ([`crate::fake::codec::Codec::shows`]),
    /// so that a fault aimed at a result or an input request only fires on a frame that carries
    /// one on the wire.
    pub fn of(
        exchange: ExchangeKind,
        response: &Response,
        caps: CodecCaps,
        shown: &Shows,
    ) -> ReplyInfo {
        let error = matches!(
            response,
            Response::NotFound { .. }
                | Response::CancelRejected { .. }
                | Response::Throttled { .. }
                | Response::InlineRefused
                | Response::NoResult { .. }
                | Response::Outcome(Outcome::ToolError { .. })
        );
        let (carries_result, body) = match (exchange, response) {
            (ExchangeKind::Fetch, Response::Outcome(o)) => (true, Some(o)),
            (ExchangeKind::Fetch, Response::NoResult { .. }) => (true, None),
            (ExchangeKind::Poll, Response::Task(v))
                if matches!(shown, Shows::Task { result: true, .. }) =>
            {
                (true, v.outcome.as_ref())
            }
            _ => (false, None),
        };
        let blocks = matches!(body, Some(Outcome::Result(b)) if b.blocks > 0 && !b.is_error);
        ReplyInfo {
            error,
            created: exchange == ExchangeKind::Submit && matches!(response, Response::Task(_)),
            carries_result,
            block_cut_detectable: blocks && caps.result_digest,
            shows_input: matches!(
                shown,
                Shows::Task {
                    input_round: Some(_),
                    ..
                }
            ),
        }
    }
}

/// The task a request names, if it names one.
pub(super) fn task_of(r: &Request) -> Option<String> {
    match r {
        Request::Poll { task }
        | Request::Fetch { task }
        | Request::Cancel { task }
        | Request::Delete { task } => Some(task.clone()),
        Request::Answer { task, .. } => task.clone(),
        Request::Submit(_) | Request::Lookup { .. } | Request::List => None,
    }
}

impl Net {
    /// The request leg.
    pub(super) fn request_verdict(
        &mut self,
        lane: usize,
        d: &Decoded,
        node: Option<&str>,
    ) -> Verdict {
        let exchange = d.exchange;
        if d.call.is_some() && matches!(exchange, ExchangeKind::Poll | ExchangeKind::Fetch) {
            for (fault, throttle) in [
                (FaultKind::Poll429, Throttle::RateLimited),
                (FaultKind::Poll503, Throttle::Unavailable),
            ] {
                if let Some(v) = self.throttle(lane, fault, throttle, exchange, node, 30_000) {
                    return v;
                }
            }
            let detail = FaultDetail::Replica {
                exchange,
                status: 404,
                retry_after_ms: None,
            };
            if self.fire(lane, FaultKind::NotFoundBeforeExpiry, node, detail) {
                return Verdict::Reply(Response::NotFound {
                    expired: false,
                    hidden: false,
                });
            }
        }
        if d.call.is_some() && exchange == ExchangeKind::Cancel {
            let (fault, throttle) = (FaultKind::Cancel503, Throttle::Unavailable);
            if let Some(v) = self.throttle(lane, fault, throttle, exchange, node, 5_000) {
                return v;
            }
        }
        if d.call.is_some()
            && self.fire(
                lane,
                FaultKind::LostRequest,
                node,
                FaultDetail::Exchange { exchange },
            )
        {
            return Verdict::Drop;
        }
        Verdict::Pass
    }

    /// Whether `fault` fires on this request: if so, the answer of something in front of the
    /// server (`throttle`), with a Retry-After drawn from 1 s to `max_retry_after_ms`.
    fn throttle(
        &mut self,
        lane: usize,
        fault: FaultKind,
        throttle: Throttle,
        exchange: ExchangeKind,
        node: Option<&str>,
        max_retry_after_ms: u64,
    ) -> Option<Verdict> {
        let mut retry_after_ms = 0;
        let fired = self.fire_with(lane, fault, node, |me| {
            retry_after_ms = me.draw(1_000, max_retry_after_ms);
            FaultDetail::Replica {
                exchange,
                status: throttle.http_status(),
                retry_after_ms: Some(retry_after_ms),
            }
        });
        fired.then_some(Verdict::Reply(Response::Throttled {
            throttle,
            retry_after_ms,
        }))
    }

    /// The reply leg.
    pub(super) fn reply_verdict(
        &mut self,
        lane: usize,
        call: CallId,
        r: &Inflight,
        info: &ReplyInfo,
    ) -> ReplyVerdict {
        let node = r.node.as_deref();
        let exchange = r.exchange;
        let fire =
            |me: &Net, f: FaultKind| me.fire(lane, f, node, FaultDetail::Exchange { exchange });
        if info.created && fire(self, FaultKind::LostResponseAfterCreation) {
            return ReplyVerdict::with(NetVerdict::Lost);
        }
        if info.carries_result {
            if fire(self, FaultKind::ResultLost) {
                return ReplyVerdict::with(NetVerdict::Lost);
            }
            if !info.error && fire(self, FaultKind::ResultTruncated) {
                // Half the firings keep the message well formed and drop the last content block
                // (the server's digest then no longer matches); the others cut bytes.
                if info.block_cut_detectable && self.draw(0, 1) == 1 {
                    let shape = Shape {
                        drop_last_block: true,
                        ..Shape::default()
                    };
                    return ReplyVerdict {
                        shape,
                        ..ReplyVerdict::with(NetVerdict::LastBlockDropped)
                    };
                }
                // Where to cut is drawn once the reply is encoded: at least one byte, short of all.
                return ReplyVerdict {
                    cut_bytes: true,
                    ..ReplyVerdict::with(NetVerdict::Truncated { to_bytes: 0 })
                };
            }
        }
        // A read that shows the end with its result is held too (one the result faults spared):
        // networks reorder any reply, and a late end after the executor settled from a newer
        // read is what an effect reconciliation must not be raised for (before, the extension
        // and AIP-151, whose reads carry results, never saw one).
        if exchange == ExchangeKind::Poll && !info.error && fire(self, FaultKind::PollsOutOfOrder) {
            let extra_ms = self.ctx.request_timeout_ms + self.draw(1, 5_000);
            return ReplyVerdict {
                extra_delay_ms: extra_ms,
                ..ReplyVerdict::with(NetVerdict::Held { extra_ms })
            };
        }
        if matches!(exchange, ExchangeKind::Poll | ExchangeKind::Fetch)
            && !info.error
            && fire(self, FaultKind::TaskIdMisuse)
        {
            let own = r.task.clone().unwrap_or_default();
            let others: Vec<String> = self.ctx.servers[lane]
                .lock()
                .expect("server lock")
                .service()
                .task_ids()
                .filter(|t| *t != own)
                .map(String::from)
                .collect();
            let to = match others.len() {
                0 => "foreign-server-task".to_string(),
                n => others[self.draw(0, n as u64 - 1) as usize].clone(),
            };
            let shape = Shape {
                task_id: Some(to.clone()),
                ..Shape::default()
            };
            return ReplyVerdict {
                shape,
                ..ReplyVerdict::with(NetVerdict::TaskIdRewritten { to })
            };
        }
        if exchange == ExchangeKind::Cancel && fire(self, FaultKind::CancelAckLost) {
            return ReplyVerdict::with(NetVerdict::Lost);
        }
        if info.shows_input && fire(self, FaultKind::InputRequiredReplay) {
            let after_ms = self.draw(1_000, 30_000);
            return ReplyVerdict {
                duplicate_after_ms: Some(after_ms),
                ..ReplyVerdict::with(NetVerdict::Duplicated { after_ms })
            };
        }
        let other = self
            .inflight
            .iter()
            .find(|((l, c), o)| *l == lane && *c != call && o.conn == r.conn)
            .map(|((_, c), _)| *c);
        if let Some(other) = other.filter(|_| {
            self.ctx.servers[lane]
                .lock()
                .expect("server lock")
                .caps()
                .body_ids
        }) {
            if fire(self, FaultKind::ReplyToOtherExchange) {
                let shape = Shape {
                    body_call: Some(other),
                    ..Shape::default()
                };
                return ReplyVerdict {
                    shape,
                    ..ReplyVerdict::with(NetVerdict::BodyNamesOtherRequest)
                };
            }
        }
        ReplyVerdict::pass()
    }

    /// Late duplicates: an old reply of a call node the trace shows settled, or kept from an
    /// executor older than the newest epoch, may be delivered again — to the lane's newest
    /// connection, and also to its own connection when that one (an old epoch) still lingers.
    /// Each kept reply gets one decision.
    ///
    /// The reply chosen is the first, in node order, of `history`; `eligible` only spares the
    /// walk over every node per reply (quadratic in the call nodes: at 1,000 nodes it was most
    /// of a series' time), so the choice and the trace are the same as without it.
    pub(super) fn late_duplicates(&mut self, lane: usize) {
        let newest = self.newest_epoch;
        let candidate = {
            let trace = self.ctx.trace.lock().expect("trace lock");
            let (settled_now, seen) = trace.settled_since(self.settled_seen);
            for node in settled_now {
                if self.history.contains_key(node) {
                    self.eligible.insert(node.clone());
                }
            }
            self.settled_seen = seen;
            let mut found = None;
            // Bounded by the set's size: each turn finds the candidate or drops a node.
            while let Some(node) = self.eligible.first() {
                let settled = trace.state_of(node).is_some_and(|s| s.is_final());
                let at = self
                    .history
                    .get(node)
                    .and_then(|past| past.iter().position(|p| settled || p.epoch < newest));
                match at {
                    Some(i) => {
                        found = Some((node.clone(), i));
                        break;
                    }
                    None => {
                        self.eligible.pop_first();
                    }
                }
            }
            found
        };
        let Some((node, i)) = candidate else { return };
        let past = self
            .history
            .get_mut(&node)
            .expect("candidate node")
            .remove(i);
        if self.history.get(&node).is_some_and(Vec::is_empty) {
            self.history.remove(&node);
        }
        let Some(to) = self.latest_connection(lane) else {
            return;
        };
        if !self.fire(
            lane,
            FaultKind::LateDuplicateReply,
            Some(&node),
            FaultDetail::Exchange {
                exchange: past.exchange,
            },
        ) {
            return;
        }
        let mut targets = vec![to];
        if past.conn != to && self.conns.contains_key(&past.conn) {
            targets.push(past.conn);
        }
        for conn in targets {
            let latency = self.latency();
            let no = self.record(super::Leg {
                dir: crate::trace::Dir::ToExecutor,
                exchange: past.exchange,
                node: Some(&node),
                conn,
                request_id: past.frame.request_id,
                bytes: past.frame.body.len(),
                verdict: NetVerdict::LateDuplicate,
                arrives_after_ms: Some(latency),
                shows: Some(past.shows.clone()),
            });
            self.deliver_to(conn, past.frame.clone(), latency, Some(no));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::codec::{ResultBody, TaskView};
    use crate::fake::truth::TaskStatus;

    fn view(status: TaskStatus, outcome: Option<Outcome>, pending_round: Option<u32>) -> TaskView {
        TaskView::for_test("t", status, outcome, pending_round)
    }

    /// The facts for a codec whose wire carries each response as the service gave it.
    fn info_of(exchange: ExchangeKind, response: &Response, caps: CodecCaps) -> ReplyInfo {
        let shown = crate::fake::codec::neutral_shows(response, caps);
        ReplyInfo::of(exchange, response, caps, &shown)
    }

    const MCP: CodecCaps = CodecCaps {
        body_ids: true,
        poll_shows_result: false,
        poll_shows_input: false,
        result_digest: true,
        poll_interval_ms: Some(1000),
    };
    const AIP: CodecCaps = CodecCaps {
        body_ids: false,
        poll_shows_result: true,
        poll_shows_input: false,
        result_digest: false,
        poll_interval_ms: None,
    };
    const EXT: CodecCaps = CodecCaps {
        body_ids: true,
        poll_shows_result: true,
        poll_shows_input: true,
        result_digest: true,
        poll_interval_ms: Some(1000),
    };

    #[test]
    fn what_a_reply_carries_is_read_from_the_neutral_response_and_the_codec_caps() {
        let result = Outcome::Result(ResultBody {
            text: "r".into(),
            blocks: 2,
            is_error: false,
        });
        let done = Response::Task(view(TaskStatus::Completed, Some(result.clone()), None));
        // A result read carries a result everywhere; a status read only where it shows one.
        assert!(
            info_of(ExchangeKind::Fetch, &Response::Outcome(result.clone()), MCP).carries_result
        );
        assert!(!info_of(ExchangeKind::Poll, &done, MCP).carries_result);
        assert!(info_of(ExchangeKind::Poll, &done, AIP).carries_result);
        // Dropping the last block is only a detectable cut where the server claims a digest.
        assert!(info_of(ExchangeKind::Fetch, &Response::Outcome(result), MCP).block_cut_detectable);
        assert!(!info_of(ExchangeKind::Poll, &done, AIP).block_cut_detectable);
        // A submission's reply that names a task is a creation; an input request shows only
        // where reads show them.
        let working = Response::Task(view(TaskStatus::InputRequired, None, Some(1)));
        assert!(info_of(ExchangeKind::Submit, &working, AIP).created);
        assert!(info_of(ExchangeKind::Poll, &working, EXT).shows_input);
        assert!(!info_of(ExchangeKind::Poll, &working, MCP).shows_input);
        // Refusals are errors.
        for r in [
            Response::NotFound {
                expired: true,
                hidden: false,
            },
            Response::CancelRejected {
                status: TaskStatus::Completed,
            },
            Response::NoResult { cancelled: true },
        ] {
            assert!(info_of(ExchangeKind::Fetch, &r, MCP).error, "{r:?}");
        }
        assert!(!info_of(ExchangeKind::Poll, &done, MCP).error);
    }
}
