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

/// One fault firing: the `ask`-th time (1-based, counted per fault kind within the safety
/// phase) the series asked whether `fault` fires, and it did. `(fault, ask)` names a decision
/// point; it is more stable under edits of a schedule than a global counter, because removing
/// one fault's firings leaves the other kinds' numbering alone as far as the run stays the same.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Firing {
    pub fault: FaultKind,
    pub ask: u64,
    /// Informational, ignored on replay: the trace's `decision` number of this firing (the
    /// series-wide decision counter, which `What::Fault` has always carried) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<u64>,
    /// ... and its simulated time, to find it in the timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ms: Option<u64>,
}

/// How a [`FaultPlan`] decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PlanMode {
    /// Draw every decision from the rate (the normal run); firings are recorded.
    #[default]
    Draw,
    /// Replay a schedule: a fault fires iff its `(fault, ask)` is in the set. The schedule is
    /// authoritative for every fault kind: a kind it does not name never fires.
    Replay(std::collections::BTreeSet<(FaultKind, u64)>),
}

/// A series' fault schedule as data: which fault fired at which decision point, plus the
/// fault-like parameters the seed drew (rollback, short server ttl) and the call nodes kept.
/// Stored as TOML (see [`Schedule::to_toml`]); `toolop-sim replay --schedule FILE` replays it.
///
/// Fields a hand-written file leaves out mean "off" (no firings, no rollback, no short ttl),
/// except `nodes`, which means "every node the seed drew".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The scenario file, as given on the command line (relative to the working directory).
    pub scenario: String,
    pub seed: u64,
    /// The checker that failed (set on shrunk schedules): what a replay should reproduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker: Option<String>,
    /// Whether the operator rollback happens ...
    #[serde(default)]
    pub rollback: bool,
    /// ... and when (kept when `rollback` is off, so switching it back on is a one-word edit).
    /// Missing with `rollback = true`: the time the seed drew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_at_ms: Option<u64>,
    /// Whether the server's ttl is shortened so that it deletes running tasks ...
    #[serde(default)]
    pub server_deletes_running_task: bool,
    /// ... and to what (kept when off). Missing with the fault on: the ttl the seed drew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_ttl_ms: Option<u64>,
    /// The call nodes kept, by id; missing: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Sizes before shrinking (shrunk schedules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrunk_from: Option<ScheduleSize>,
    /// The firings, in the order they happened.
    #[serde(default, rename = "firing")]
    pub firings: Vec<Firing>,
}

/// The size of a schedule: what shrinking minimizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSize {
    pub firings: usize,
    pub nodes: usize,
    pub rollback: bool,
    pub server_deletes_running_task: bool,
}

impl std::fmt::Display for ScheduleSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} firing(s), {} node(s)", self.firings, self.nodes)?;
        if self.rollback {
            write!(f, ", rollback")?;
        }
        if self.server_deletes_running_task {
            write!(f, ", short server ttl")?;
        }
        Ok(())
    }
}

impl Schedule {
    /// The decision points that fire.
    pub fn decisions(&self) -> std::collections::BTreeSet<(FaultKind, u64)> {
        self.firings.iter().map(|f| (f.fault, f.ask)).collect()
    }

    /// `all_nodes`: how many nodes the seed drew (for a schedule that keeps them all).
    pub fn size(&self, all_nodes: usize) -> ScheduleSize {
        ScheduleSize {
            firings: self.firings.len(),
            nodes: self.nodes.as_ref().map_or(all_nodes, Vec::len),
            rollback: self.rollback,
            server_deletes_running_task: self.server_deletes_running_task,
        }
    }

    /// The file form: a comment header, then TOML.
    pub fn to_toml(&self) -> Result<String, String> {
        let body = toml::to_string(self).map_err(|e| format!("cannot serialise the schedule: {e}"))?;
        Ok(format!(
            "# toolop-sim fault schedule. Replay: toolop-sim replay --schedule <this file>\n\
             # A fault fires iff its (fault, ask) is listed: ask = the n-th time (from 1) the series\n\
             # asked whether that fault fires. `decision` and `t_ms` only help find a firing in the\n\
             # timeline; replay ignores them.\n{body}"
        ))
    }

    pub fn from_toml(text: &str) -> Result<Schedule, String> {
        let s: Schedule = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut seen = std::collections::BTreeSet::new();
        for f in &s.firings {
            if f.ask == 0 {
                return Err(format!("firing {}: ask counts from 1", f.fault.name()));
            }
            if !seen.insert((f.fault, f.ask)) {
                return Err(format!("firing {} ask {} is listed twice", f.fault.name(), f.ask));
            }
        }
        Ok(s)
    }

    pub fn load(path: &std::path::Path) -> Result<Schedule, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        Schedule::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn save(&self, path: &std::path::Path) -> Result<(), String> {
        let text = self.to_toml()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// The series' fault decisions. Every place that may inject a fault asks [`FaultPlan::fire`];
/// each ask is a decision point, named `(fault, ask)` (see [`Firing`]) and also numbered
/// series-wide (the trace's `decision`). In [`PlanMode::Draw`] a decision is drawn from the
/// fault's rate; in [`PlanMode::Replay`] the schedule decides. Either way every firing is
/// recorded, so a run yields its own schedule. Faults fire only in the safety phase.
#[derive(Debug)]
pub struct FaultPlan {
    pub profile: FaultProfile,
    rng: ChaCha8Rng,
    /// Seed of the keyed firing decisions (see [`FaultPlan::fire`]).
    key: u64,
    decisions: u64,
    safety_until_ms: u64,
    mode: PlanMode,
    asks: BTreeMap<FaultKind, u64>,
    fired: Vec<Firing>,
}

pub type SharedPlan = std::sync::Arc<std::sync::Mutex<FaultPlan>>;

impl FaultPlan {
    pub fn new(profile: FaultProfile, rng: ChaCha8Rng, safety_until_ms: u64) -> FaultPlan {
        FaultPlan::with_mode(profile, rng, safety_until_ms, PlanMode::Draw)
    }

    pub fn with_mode(profile: FaultProfile, mut rng: ChaCha8Rng, safety_until_ms: u64, mode: PlanMode) -> FaultPlan {
        let key = rng.gen();
        FaultPlan { profile, rng, key, decisions: 0, safety_until_ms, mode, asks: BTreeMap::new(), fired: vec![] }
    }

    /// A uniform draw in [0, 1) for the `ask`-th ask of `fault`, keyed by the series, not by
    /// how many other draws came before: the k-th 429 decision is the same whatever the other
    /// faults or the executor's settings did (common random numbers for `tune`, stable asks for
    /// `shrink`).
    fn keyed_uniform(&self, fault: FaultKind, ask: u64) -> f64 {
        let mut z = self.key ^ (fault as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ask.wrapping_mul(0xD1B5_4A32_D192_ED03);
        // SplitMix64 finaliser: every input bit moves every output bit.
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether `fault` fires at this decision point. Returns the decision number when it does.
    /// A fault that is off in this series costs no decision (and no draw), so enabling one
    /// fault does not reshuffle the decisions of the others beyond its own asks.
    ///
    /// Firing decisions are keyed by `(fault, ask)` and consume nothing from the shape stream
    /// (latency, delays, cut positions), in `Draw` and `Replay` alike, so a schedule replayed
    /// unmodified reproduces its run exactly. A replayed schedule may name a fault the profile
    /// has off (a hand edit): its asks are then counted.
    pub fn fire(&mut self, fault: FaultKind, now_ms: u64) -> Option<u64> {
        if now_ms >= self.safety_until_ms {
            return None;
        }
        let rate = self.profile.rate(fault);
        let fires = match &self.mode {
            PlanMode::Draw if rate <= 0.0 => return None,
            PlanMode::Draw => {
                self.decisions += 1;
                let ask = self.asks.get(&fault).copied().unwrap_or(0) + 1;
                self.keyed_uniform(fault, ask) < rate.min(1.0)
            }
            PlanMode::Replay(set) => {
                if rate <= 0.0 && set.range((fault, 1)..=(fault, u64::MAX)).next().is_none() {
                    return None;
                }
                self.decisions += 1;
                let ask = self.asks.get(&fault).copied().unwrap_or(0) + 1;
                set.contains(&(fault, ask))
            }
        };
        let ask = self.asks.entry(fault).or_insert(0);
        *ask += 1;
        if fires {
            self.fired.push(Firing { fault, ask: *ask, decision: Some(self.decisions), t_ms: Some(now_ms) });
        }
        fires.then_some(self.decisions)
    }

    /// A draw for the shape of a fault that fired (delay, cut position ...), from the same stream.
    pub fn draw(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng.gen_range(lo..=hi.max(lo))
    }

    pub fn healed(&self, now_ms: u64) -> bool {
        now_ms >= self.safety_until_ms
    }

    /// The firings so far, in order.
    pub fn firings(&self) -> &[Firing] {
        &self.fired
    }

    /// Asks per fault kind so far (the decision points, fired or not).
    pub fn asks(&self) -> &BTreeMap<FaultKind, u64> {
        &self.asks
    }

    /// Take the record of firings and asks out of the plan (at the end of a series).
    pub fn take_record(&mut self) -> (Vec<Firing>, BTreeMap<FaultKind, u64>) {
        (std::mem::take(&mut self.fired), std::mem::take(&mut self.asks))
    }
}

#[cfg(test)]
mod plan_tests {
    use rand::SeedableRng;

    use super::*;

    fn plan(mode: PlanMode) -> FaultPlan {
        let rates = [(FaultKind::LostRequest, 0.3), (FaultKind::Poll429, 0.5)].into_iter().collect();
        FaultPlan::with_mode(FaultProfile { rates }, ChaCha8Rng::seed_from_u64(7), 1_000, mode)
    }

    /// The asks of a made-up series: (fault, time), some after the safety phase.
    const ASKS: [(FaultKind, u64); 9] = [
        (FaultKind::LostRequest, 1),
        (FaultKind::Poll429, 2),
        (FaultKind::ConnectionDrop, 3),
        (FaultKind::LostRequest, 4),
        (FaultKind::LostRequest, 5),
        (FaultKind::Poll429, 6),
        (FaultKind::LostRequest, 7),
        (FaultKind::Poll429, 8),
        (FaultKind::LostRequest, 2_000),
    ];

    fn run(p: &mut FaultPlan) -> Vec<(Option<u64>, u64)> {
        ASKS.iter().map(|&(f, t)| (p.fire(f, t), p.draw(0, 1 << 40))).collect()
    }

    #[test]
    fn replaying_the_recorded_firings_gives_the_same_decisions_and_draws() {
        let mut a = plan(PlanMode::Draw);
        let drawn = run(&mut a);
        assert!(!a.firings().is_empty());
        let set = a.firings().iter().map(|f| (f.fault, f.ask)).collect();
        let mut b = plan(PlanMode::Replay(set));
        assert_eq!(run(&mut b), drawn);
        assert_eq!(a.firings(), b.firings());
        assert_eq!(a.asks(), b.asks());
        // Off faults and asks after the safety phase are no decision points.
        assert_eq!(a.asks().get(&FaultKind::ConnectionDrop), None);
        assert_eq!(a.asks()[&FaultKind::LostRequest], 4);
    }

    #[test]
    fn replay_fires_exactly_the_schedule_even_for_a_fault_the_profile_has_off() {
        let set = [(FaultKind::LostRequest, 2), (FaultKind::ConnectionDrop, 1), (FaultKind::Poll429, 9)].into_iter().collect();
        let mut p = plan(PlanMode::Replay(set));
        run(&mut p);
        let fired: Vec<(FaultKind, u64)> = p.firings().iter().map(|f| (f.fault, f.ask)).collect();
        assert_eq!(fired, [(FaultKind::ConnectionDrop, 1), (FaultKind::LostRequest, 2)]);
    }

    #[test]
    fn schedule_file_round_trips_and_rejects_bad_input() {
        let s = Schedule {
            scenario: "scenarios/x.toml".into(),
            seed: 9,
            checker: Some("poll_rate_within_bound".into()),
            rollback: false,
            rollback_at_ms: Some(1234),
            server_deletes_running_task: true,
            short_ttl_ms: Some(30_000),
            nodes: Some(vec!["n000".into(), "n003".into()]),
            shrunk_from: Some(ScheduleSize { firings: 12, nodes: 6, rollback: true, server_deletes_running_task: true }),
            firings: vec![
                Firing { fault: FaultKind::Poll429, ask: 3, decision: Some(8), t_ms: Some(100) },
                Firing { fault: FaultKind::LostRequest, ask: 1, decision: None, t_ms: None },
            ],
        };
        let text = s.to_toml().unwrap();
        assert_eq!(Schedule::from_toml(&text).unwrap(), s, "{text}");
        // The minimal hand-written file: everything off, every node.
        let min = Schedule::from_toml("scenario = \"a.toml\"\nseed = 1\n").unwrap();
        assert!(min.firings.is_empty() && !min.rollback && min.nodes.is_none());
        assert!(Schedule::from_toml("scenario = \"a\"\nseed = 1\n[[firing]]\nfault = \"lost_request\"\nask = 0\n").is_err());
        assert!(Schedule::from_toml("scenario = \"a\"\nseed = 1\n[[firing]]\nfault = \"no_such\"\nask = 1\n").is_err());
        assert!(Schedule::from_toml("scenario = \"a\"\nseed = 1\nsurprise = 2\n").is_err());
    }
}

#[cfg(test)]
mod plan_props {
    use proptest::prelude::*;
    use rand::SeedableRng;

    use super::*;

    const KINDS: [FaultKind; 4] = [FaultKind::LostRequest, FaultKind::Poll429, FaultKind::ExecutorCrash, FaultKind::ConnectionDrop];

    proptest! {
        /// Any sequence of asks: replaying what `Draw` recorded gives the same firings, decision
        /// numbers and shape draws; replaying a subset fires exactly that subset (of the asks made).
        #[test]
        fn replay_reproduces_draw(seed in any::<u64>(), rates in proptest::collection::vec(0.0f64..1.0, 4),
                                  asks in proptest::collection::vec((0usize..4, 0u64..1_500), 0..60),
                                  keep in proptest::collection::vec(any::<bool>(), 60)) {
            let profile = FaultProfile { rates: KINDS.iter().zip(&rates).filter(|(_, &r)| r > 0.3).map(|(&k, &r)| (k, r)).collect() };
            let go = |mode: PlanMode| {
                let mut p = FaultPlan::with_mode(profile.clone(), ChaCha8Rng::seed_from_u64(seed), 1_000, mode);
                let out: Vec<_> = asks.iter().map(|&(k, t)| (p.fire(KINDS[k], t), p.draw(0, 99))).collect();
                (out, p.firings().to_vec())
            };
            let (drawn, fired) = go(PlanMode::Draw);
            let (replayed, refired) = go(PlanMode::Replay(fired.iter().map(|f| (f.fault, f.ask)).collect()));
            prop_assert_eq!(&drawn, &replayed);
            prop_assert_eq!(&fired, &refired);
            let subset: Vec<(FaultKind, u64)> = fired.iter().zip(&keep).filter(|(_, &k)| k).map(|(f, _)| (f.fault, f.ask)).collect();
            let (_, sub_fired) = go(PlanMode::Replay(subset.iter().copied().collect()));
            prop_assert_eq!(sub_fired.iter().map(|f| (f.fault, f.ask)).collect::<Vec<_>>(), subset);
        }
    }
}

/// The trace event of a fault firing, with the executor state it met (read from the ledger).
pub fn fault_event(
    ledger: &std::sync::Mutex<toolop::ledger::MemoryLedger>,
    decision: u64,
    fault: FaultKind,
    node: Option<&str>,
    detail: String,
) -> crate::trace::What {
    use toolop::ledger::Ledger;
    let state = node.and_then(|n| ledger.lock().expect("ledger lock").local_state(n).expect("in-memory ledger reads cannot fail"));
    crate::trace::What::Fault { decision, fault, node: node.map(String::from), state, detail }
}
