//! The fault catalogue: one closed enum, each variant documented, named in scenario files
//! (snake_case), with the executor local states it can meet (the coverage matrix's reachable
//! cells). Rates live in the scenario; the seed draws which faults a series enables (swarm).

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use toolop::record::LocalState::{self, *};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The server created the task, and its reply to `tools/call` is lost.
    LostResponseAfterCreation,
    /// A request never reaches the server.
    LostRequest,
    /// A poll reply is held past the request timeout, so it arrives after a newer poll's reply.
    PollsOutOfOrder,
    /// An input request (elicitation) already delivered is delivered again later.
    InputRequiredReplay,
    /// The task completes at the very instant the executor's cancel reaches the server.
    CompletionCancelRace,
    /// The reply to `tasks/cancel` is lost.
    CancelAckLost,
    /// The reply to `tasks/result` is lost after `tasks/get` saw a terminal status.
    ResultLost,
    /// The reply to `tasks/result` arrives cut short.
    ResultTruncated,
    /// A reply reaches an executor of an older execution epoch after a rollback took over.
    OldEpochMessage,
    /// A reply names a task of another call node, session or server.
    TaskIdMisuse,
    /// A lagging replica answers "not found" for a task that exists.
    NotFoundBeforeExpiry,
    /// The server answers "not found" because the task expired and was deleted.
    NotFoundAfterExpiry,
    /// A poll is answered 429 with Retry-After.
    #[serde(rename = "poll_429")]
    Poll429,
    /// A poll is answered 503 with Retry-After.
    #[serde(rename = "poll_503")]
    Poll503,
    /// The connection drops; whatever was in flight is lost.
    ConnectionDrop,
    /// The executor crashes (between a ledger write and its send, between a reply and its
    /// write, or anywhere) and restarts from the ledger alone.
    ExecutorCrash,
    /// The server deletes a task at its ttl while it is still running (seen in real SDKs).
    ServerDeletesRunningTask,
    /// An operator rolls back: a new executor with a higher epoch takes over the in-flight items.
    Rollback,
    /// The approval agent sends an answer for an older input round again (a replayed click).
    ApprovalReplay,
    /// A non-compliant server reports `completed` for a cancelled task once its work finishes
    /// (the spec says cancelled stays cancelled; servers that keep working get this wrong).
    StatusAfterCancel,
}

impl FaultKind {
    pub const ALL: [FaultKind; 20] = [
        FaultKind::LostResponseAfterCreation,
        FaultKind::LostRequest,
        FaultKind::PollsOutOfOrder,
        FaultKind::InputRequiredReplay,
        FaultKind::CompletionCancelRace,
        FaultKind::CancelAckLost,
        FaultKind::ResultLost,
        FaultKind::ResultTruncated,
        FaultKind::OldEpochMessage,
        FaultKind::TaskIdMisuse,
        FaultKind::NotFoundBeforeExpiry,
        FaultKind::NotFoundAfterExpiry,
        FaultKind::Poll429,
        FaultKind::Poll503,
        FaultKind::ConnectionDrop,
        FaultKind::ExecutorCrash,
        FaultKind::ServerDeletesRunningTask,
        FaultKind::Rollback,
        FaultKind::ApprovalReplay,
        FaultKind::StatusAfterCancel,
    ];

    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
    }

    pub fn from_name(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Executor states this fault can meet: the reachable cells of the coverage matrix. The
    /// coverage gate demands each be hit, so the list is what a correct executor does meet.
    pub fn reachable(self) -> &'static [LocalState] {
        match self {
            FaultKind::LostResponseAfterCreation => &[Submitting],
            FaultKind::LostRequest => &[Submitting, Working, FetchingResult],
            FaultKind::PollsOutOfOrder => &[Working],
            FaultKind::InputRequiredReplay => &[Working],
            FaultKind::CompletionCancelRace => &[CancelRequested],
            FaultKind::CancelAckLost => &[CancelRequested],
            FaultKind::ResultLost => &[FetchingResult],
            FaultKind::ResultTruncated => &[FetchingResult],
            FaultKind::OldEpochMessage => &[Working],
            FaultKind::TaskIdMisuse => &[Working],
            FaultKind::NotFoundBeforeExpiry => &[Working],
            FaultKind::NotFoundAfterExpiry => &[Working],
            FaultKind::Poll429 => &[Working],
            FaultKind::Poll503 => &[Working],
            FaultKind::ConnectionDrop => &[Working],
            FaultKind::ExecutorCrash => &[Working],
            FaultKind::ServerDeletesRunningTask => &[Working],
            FaultKind::Rollback => &[Working],
            FaultKind::ApprovalReplay => &[InputRequired, Working],
            FaultKind::StatusAfterCancel => &[CancelledAccepted],
        }
    }
}

/// The faults one series runs with: each enabled fault and its rate (probability per decision).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultProfile {
    pub rates: BTreeMap<FaultKind, f64>,
}

impl FaultProfile {
    /// Swarm testing: each configured fault is on with `enable_rate`, at a rate drawn in
    /// [0, configured max]. A series thus tests a few faults hard rather than all of them thinly.
    pub fn draw(max_rates: &BTreeMap<FaultKind, f64>, enable_rate: f64, rng: &mut ChaCha8Rng) -> FaultProfile {
        let mut rates = BTreeMap::new();
        for (&f, &max) in max_rates {
            let on = rng.gen_bool(enable_rate);
            let rate = rng.gen_range(0.0..=max);
            if on && rate > 0.0 {
                rates.insert(f, rate);
            }
        }
        FaultProfile { rates }
    }

    pub fn rate(&self, f: FaultKind) -> f64 {
        self.rates.get(&f).copied().unwrap_or(0.0)
    }

    pub fn render(&self) -> String {
        if self.rates.is_empty() {
            return "none".into();
        }
        self.rates.iter().map(|(f, r)| format!("{}={r:.3}", f.name())).collect::<Vec<_>>().join(" ")
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn names_round_trip_and_every_fault_has_a_reachable_cell() {
        for f in FaultKind::ALL {
            assert_eq!(FaultKind::from_name(&f.name()), Some(f));
            assert!(!f.reachable().is_empty(), "{f:?}");
        }
        assert_eq!(FaultKind::from_name("no_such_fault"), None);
    }

    #[test]
    fn swarm_draw_is_seeded_and_within_bounds() {
        let max: BTreeMap<_, _> = FaultKind::ALL.iter().map(|&f| (f, 0.1)).collect();
        let a = FaultProfile::draw(&max, 0.5, &mut ChaCha8Rng::seed_from_u64(1));
        let b = FaultProfile::draw(&max, 0.5, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(a, b);
        assert!(!a.rates.is_empty() && a.rates.len() < FaultKind::ALL.len());
        assert!(a.rates.values().all(|&r| r > 0.0 && r <= 0.1));
    }
}

/// The series' fault decisions. Every place that may inject a fault asks [`FaultPlan::fire`];
/// each ask is one numbered decision point, so a schedule of firings can be recorded and
/// replayed. Faults fire only in the safety phase.
#[derive(Debug)]
pub struct FaultPlan {
    pub profile: FaultProfile,
    rng: ChaCha8Rng,
    decisions: u64,
    safety_until_ms: u64,
}

pub type SharedPlan = std::sync::Arc<std::sync::Mutex<FaultPlan>>;

impl FaultPlan {
    pub fn new(profile: FaultProfile, rng: ChaCha8Rng, safety_until_ms: u64) -> FaultPlan {
        FaultPlan { profile, rng, decisions: 0, safety_until_ms }
    }

    /// Whether `fault` fires at this decision point. Returns the decision number when it does.
    /// A fault that is off in this series costs no decision, so enabling one fault does not
    /// reshuffle the decisions of the others beyond its own asks.
    pub fn fire(&mut self, fault: FaultKind, now_ms: u64) -> Option<u64> {
        let rate = self.profile.rate(fault);
        if rate <= 0.0 || now_ms >= self.safety_until_ms {
            return None;
        }
        self.decisions += 1;
        self.rng.gen_bool(rate.min(1.0)).then_some(self.decisions)
    }

    /// A draw for the shape of a fault that fired (delay, cut position ...), from the same stream.
    pub fn draw(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng.gen_range(lo..=hi.max(lo))
    }

    pub fn healed(&self, now_ms: u64) -> bool {
        now_ms >= self.safety_until_ms
    }
}
