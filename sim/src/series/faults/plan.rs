//! The fault plan of one series: which faults the seed enabled at which rate (swarm testing),
//! and every decision whether a fault fires, keyed by `(fault, ask)` so that replaying a
//! schedule reproduces the run.

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::catalogue::FaultKind;
use super::schedule::{Firing, PlanMode};

/// The faults one series runs with: each enabled fault and its rate (probability per decision).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultProfile {
    pub rates: BTreeMap<FaultKind, f64>,
}

impl FaultProfile {
    /// Swarm testing: each configured fault is on with `enable_rate`, at a rate drawn in
    /// [0, configured max]. A series thus tests a few faults hard rather than all of them thinly.
    pub fn draw(
        max_rates: &BTreeMap<FaultKind, f64>,
        enable_rate: f64,
        rng: &mut ChaCha8Rng,
    ) -> FaultProfile {
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
        self.rates
            .iter()
            .map(|(f, r)| format!("{}={r:.3}", f.name()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

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
    /// Asks per (fault, call node): the ordinal that addresses a firing (see [`Firing`]).
    node_asks: BTreeMap<(FaultKind, Option<String>), u64>,
    fired: Vec<Firing>,
}

pub type SharedPlan = std::sync::Arc<std::sync::Mutex<FaultPlan>>;

impl FaultPlan {
    pub fn new(profile: FaultProfile, rng: ChaCha8Rng, safety_until_ms: u64) -> FaultPlan {
        FaultPlan::with_mode(profile, rng, safety_until_ms, PlanMode::Draw)
    }

    pub fn with_mode(
        profile: FaultProfile,
        mut rng: ChaCha8Rng,
        safety_until_ms: u64,
        mode: PlanMode,
    ) -> FaultPlan {
        let key = rng.gen();
        FaultPlan {
            profile,
            rng,
            key,
            decisions: 0,
            safety_until_ms,
            mode,
            asks: BTreeMap::new(),
            node_asks: BTreeMap::new(),
            fired: vec![],
        }
    }

    /// A uniform draw in [0, 1) for the `ask`-th ask of `fault`, keyed by the series, not by
    /// how many other draws came before: the k-th 429 decision is the same whatever the other
    /// faults or the executor's settings did (common random numbers for `tune`, stable asks for
    /// `shrink`).
    fn keyed_uniform(&self, fault: FaultKind, ask: u64) -> f64 {
        let mut z = self.key
            ^ (fault as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ ask.wrapping_mul(0xD1B5_4A32_D192_ED03);
        // SplitMix64 finaliser: every input bit moves every output bit.
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether `fault` fires at this decision point, asked on behalf of call node `node` (none
    /// for a series-wide ask). Returns the decision number when it does. A fault that is off in
    /// this series costs no decision (and no draw), so enabling one fault does not reshuffle the
    /// decisions of the others beyond its own asks.
    ///
    /// A drawn decision is keyed by `(fault, ask)` (the fault's series-wide ask count) and
    /// consumes nothing from the shape stream (latency, delays, cut positions). A firing is
    /// addressed by `(fault, node, ask within that node)`, and a replay decides by that address,
    /// so dropping a call node's asks (the shrinker removing the node) does not re-aim the
    /// firings of the others. A replayed schedule may name a fault the profile has off (a hand
    /// edit): its asks are then counted.
    pub fn fire(&mut self, fault: FaultKind, node: Option<&str>, now_ms: u64) -> Option<u64> {
        if now_ms >= self.safety_until_ms {
            return None;
        }
        let rate = self.profile.rate(fault);
        let ask = self.asks.get(&fault).copied().unwrap_or(0) + 1;
        let address = (fault, node.map(str::to_string));
        let node_ask = self.node_asks.get(&address).copied().unwrap_or(0) + 1;
        let fires = match &self.mode {
            PlanMode::Draw if rate <= 0.0 => return None,
            PlanMode::Draw => {
                self.decisions += 1;
                self.keyed_uniform(fault, ask) < rate.min(1.0)
            }
            PlanMode::Replay(set) => {
                if rate <= 0.0 && !set.iter().any(|(f, _, _)| *f == fault) {
                    return None;
                }
                self.decisions += 1;
                set.contains(&(fault, address.1.clone(), node_ask))
            }
        };
        self.asks.insert(fault, ask);
        if fires {
            self.fired.push(Firing {
                fault,
                node: address.1.clone(),
                ask: node_ask,
                decision: Some(self.decisions),
                t_ms: Some(now_ms),
            });
        }
        self.node_asks.insert(address, node_ask);
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
        (
            std::mem::take(&mut self.fired),
            std::mem::take(&mut self.asks),
        )
    }
}

#[cfg(test)]
mod plan_tests {
    use std::collections::BTreeSet;

    use rand::SeedableRng;

    use super::*;
    use crate::series::faults::schedule::{Schedule, ScheduleSize};

    fn plan(mode: PlanMode) -> FaultPlan {
        let rates = [(FaultKind::LostRequest, 0.3), (FaultKind::Poll429, 0.5)]
            .into_iter()
            .collect();
        FaultPlan::with_mode(
            FaultProfile { rates },
            ChaCha8Rng::seed_from_u64(7),
            1_000,
            mode,
        )
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

    /// Asks alternate between two call nodes (and a series-wide ask at t = 3).
    fn node_of(t: u64) -> Option<&'static str> {
        match t {
            3 => None,
            t if t % 2 == 0 => Some("n0"),
            _ => Some("n1"),
        }
    }

    fn run(p: &mut FaultPlan) -> Vec<(Option<u64>, u64)> {
        ASKS.iter()
            .map(|&(f, t)| (p.fire(f, node_of(t), t), p.draw(0, 1 << 40)))
            .collect()
    }

    #[test]
    fn replaying_the_recorded_firings_gives_the_same_decisions_and_draws() {
        let mut a = plan(PlanMode::Draw);
        let drawn = run(&mut a);
        assert!(!a.firings().is_empty());
        let set = a
            .firings()
            .iter()
            .map(|f| (f.fault, f.node.clone(), f.ask))
            .collect();
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
        let n1 = || Some("n1".to_string());
        let set = [
            (FaultKind::LostRequest, n1(), 2),
            (FaultKind::ConnectionDrop, None, 1),
            (FaultKind::Poll429, n1(), 9),
        ]
        .into_iter()
        .collect();
        let mut p = plan(PlanMode::Replay(set));
        run(&mut p);
        let fired: Vec<(FaultKind, Option<String>, u64)> = p
            .firings()
            .iter()
            .map(|f| (f.fault, f.node.clone(), f.ask))
            .collect();
        // n1's lost_request asks are at t = 1, 5 and 7: its second is at t = 5.
        assert_eq!(
            fired,
            [
                (FaultKind::ConnectionDrop, None, 1),
                (FaultKind::LostRequest, n1(), 2)
            ]
        );
        assert_eq!(p.firings()[1].t_ms, Some(5));
    }

    #[test]
    fn a_firing_stays_aimed_when_another_nodes_asks_go_away() {
        // n1's second lost_request fires; then n0 is removed (its asks never happen): the
        // firing still lands on n1's second ask, not on whatever is now the fault's second ask.
        let set: BTreeSet<_> = [(FaultKind::LostRequest, Some("n1".to_string()), 2)].into();
        let mut p = plan(PlanMode::Replay(set));
        for &(f, t) in ASKS.iter().filter(|(_, t)| node_of(*t) != Some("n0")) {
            p.fire(f, node_of(t), t);
        }
        assert_eq!(p.firings().len(), 1);
        assert_eq!(p.firings()[0].t_ms, Some(5));
    }

    #[test]
    fn schedule_file_round_trips_and_rejects_bad_input() {
        let s = Schedule {
            scenario: "scenarios/x.toml".into(),
            sets: vec!["executor.max_qps=7".into()],
            seed: 9,
            checker: Some("poll_rate_within_bound".into()),
            rollback: false,
            rollback_at_ms: Some(1234),
            server_deletes_running_task: true,
            short_ttl_ms: Some(30_000),
            nodes: Some(vec!["n000".into(), "n003".into()]),
            shrunk_from: Some(ScheduleSize {
                firings: 12,
                nodes: 6,
                rollback: true,
                server_deletes_running_task: true,
            }),
            firings: vec![
                Firing {
                    fault: FaultKind::Poll429,
                    node: Some("n003".into()),
                    ask: 3,
                    decision: Some(8),
                    t_ms: Some(100),
                },
                Firing {
                    fault: FaultKind::LostRequest,
                    node: None,
                    ask: 1,
                    decision: None,
                    t_ms: None,
                },
            ],
        };
        let text = s.to_toml().unwrap();
        assert_eq!(Schedule::from_toml(&text).unwrap(), s, "{text}");
        // The minimal hand-written file: everything off, every node.
        let min = Schedule::from_toml("scenario = \"a.toml\"\nseed = 1\n").unwrap();
        assert!(min.firings.is_empty() && !min.rollback && min.nodes.is_none());
        assert!(Schedule::from_toml(
            "scenario = \"a\"\nseed = 1\n[[firing]]\nfault = \"lost_request\"\nask = 0\n"
        )
        .is_err());
        assert!(Schedule::from_toml(
            "scenario = \"a\"\nseed = 1\n[[firing]]\nfault = \"no_such\"\nask = 1\n"
        )
        .is_err());
        assert!(Schedule::from_toml("scenario = \"a\"\nseed = 1\nsurprise = 2\n").is_err());
        // The same ask of one fault for two nodes is two firings; for one node, one listed twice.
        let firing = |node: &str| {
            format!("[[firing]]\nfault = \"lost_request\"\nnode = \"{node}\"\nask = 1\n")
        };
        let head = "scenario = \"a\"\nseed = 1\n";
        let two = Schedule::from_toml(&format!("{head}{}{}", firing("n0"), firing("n1")));
        assert_eq!(two.map(|s| s.firings.len()), Ok(2));
        let twice = Schedule::from_toml(&format!("{head}{}{}", firing("n0"), firing("n0")));
        assert!(twice.is_err_and(|e| e.contains("listed twice")));
    }
}

#[cfg(test)]
mod plan_props {
    use proptest::prelude::*;
    use rand::SeedableRng;

    use super::*;

    const NODES: [Option<&str>; 3] = [None, Some("n0"), Some("n1")];

    const KINDS: [FaultKind; 4] = [
        FaultKind::LostRequest,
        FaultKind::Poll429,
        FaultKind::ExecutorCrash,
        FaultKind::ConnectionDrop,
    ];

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
                let out: Vec<_> = asks.iter().map(|&(k, t)| (p.fire(KINDS[k], NODES[(t % 3) as usize], t), p.draw(0, 99))).collect();
                (out, p.firings().to_vec())
            };
            let (drawn, fired) = go(PlanMode::Draw);
            let address = |f: &Firing| (f.fault, f.node.clone(), f.ask);
            let (replayed, refired) = go(PlanMode::Replay(fired.iter().map(address).collect()));
            prop_assert_eq!(&drawn, &replayed);
            prop_assert_eq!(&fired, &refired);
            let subset: Vec<_> = fired.iter().zip(&keep).filter(|(_, &k)| k).map(|(f, _)| address(f)).collect();
            let (_, sub_fired) = go(PlanMode::Replay(subset.iter().cloned().collect()));
            prop_assert_eq!(sub_fired.iter().map(address).collect::<Vec<_>>(), subset);
        }
    }
}
