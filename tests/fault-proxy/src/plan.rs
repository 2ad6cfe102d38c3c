//! Seeded decisions. The decision for request `n` is a pure function of `(seed, n)`: a ChaCha8
//! stream per request (`set_stream(n)`), so concurrency cannot shift one request's draws into
//! another's, and a replay of the same request sequence gets the same decisions.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::config::Faults;

/// What the seed drew for one request. Fractions are per mille of the body (or of the SSE event
/// the fault targets), so logs stay integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    None,
    DropAfter { hang_ms: u64 },
    Delay { delay_ms: u64 },
    Reject { status: u16, retry_after_s: u64 },
    Truncate { at_permille: u16 },
    Cut { at_permille: u16 },
}

impl Fault {
    pub fn name(&self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::DropAfter { .. } => "drop_after",
            Fault::Delay { .. } => "delay",
            Fault::Reject { .. } => "reject",
            Fault::Truncate { .. } => "truncate",
            Fault::Cut { .. } => "cut",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    seed: u64,
    faults: Faults,
}

impl Plan {
    pub fn new(seed: u64, faults: Faults) -> Plan {
        Plan { seed, faults }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The decision for request number `n`.
    pub fn decide(&self, n: u64) -> Fault {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(n);
        let u: f64 = rng.gen();
        let f = &self.faults;
        let mut edge = 0.0;
        let mut hit = |rate: f64| {
            edge += rate;
            u < edge
        };
        // Fixed order (the same as config::rates): a configuration change moves every edge
        // after it, but a given configuration always cuts [0, 1) the same way.
        if let Some(d) = f.drop_after.as_ref().filter(|d| hit(d.rate)) {
            return Fault::DropAfter { hang_ms: d.hang_ms };
        }
        if let Some(d) = f.delay.as_ref().filter(|d| hit(d.rate)) {
            return Fault::Delay {
                delay_ms: rng.gen_range(d.min_ms..=d.max_ms),
            };
        }
        if let Some(r) = f.reject.as_ref().filter(|r| hit(r.rate)) {
            let status = r.statuses[rng.gen_range(0..r.statuses.len())];
            return Fault::Reject {
                status,
                retry_after_s: r.retry_after_s,
            };
        }
        if f.truncate.as_ref().is_some_and(|t| hit(t.rate)) {
            return Fault::Truncate {
                at_permille: rng.gen_range(1..=999),
            };
        }
        if f.cut.as_ref().is_some_and(|c| hit(c.rate)) {
            return Fault::Cut {
                at_permille: rng.gen_range(1..=999),
            };
        }
        Fault::None
    }

    /// Whether `fault` may hit a request whose target key is `key` (its JSON-RPC method, or its
    /// HTTP method when it has none): a fault with a `methods` list only hits those.
    pub fn targets(&self, fault: &Fault, key: &str) -> bool {
        let f = &self.faults;
        let methods = match fault {
            Fault::None => return true,
            Fault::DropAfter { .. } => f.drop_after.as_ref().and_then(|d| d.methods.as_ref()),
            Fault::Delay { .. } => f.delay.as_ref().and_then(|d| d.methods.as_ref()),
            Fault::Reject { .. } => f.reject.as_ref().and_then(|r| r.methods.as_ref()),
            Fault::Truncate { .. } => f.truncate.as_ref().and_then(|t| t.methods.as_ref()),
            Fault::Cut { .. } => f.cut.as_ref().and_then(|c| c.methods.as_ref()),
        };
        methods.is_none_or(|m| m.iter().any(|m| m == key))
    }
}

/// The byte where a fault at `permille` cuts a span of `len` bytes: inside it, never at its
/// start or end (so a cut always removes something and always keeps something). `None` when
/// the span is too short to be cut inside.
pub fn cut_point(len: usize, permille: u16) -> Option<usize> {
    if len < 2 {
        return None;
    }
    let at = len * usize::from(permille) / 1000;
    Some(at.clamp(1, len - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Delay, DropAfter, Reject, Shape};

    fn faults() -> Faults {
        Faults {
            drop_after: Some(DropAfter {
                rate: 0.1,
                ..Default::default()
            }),
            delay: Some(Delay {
                rate: 0.2,
                ..Default::default()
            }),
            reject: Some(Reject {
                rate: 0.1,
                ..Default::default()
            }),
            truncate: Some(Shape {
                rate: 0.1,
                methods: Some(vec!["tasks/get".into()]),
            }),
            cut: Some(Shape {
                rate: 0.1,
                methods: None,
            }),
        }
    }

    #[test]
    fn a_seed_decides_the_same_way_every_time_in_any_order() {
        let plan = Plan::new(7, faults());
        let forward: Vec<Fault> = (0..500).map(|n| plan.decide(n)).collect();
        let backward: Vec<Fault> = (0..500).rev().map(|n| plan.decide(n)).collect();
        assert!(forward.iter().eq(backward.iter().rev()));
        let again = Plan::new(7, faults());
        assert!((0..500).all(|n| again.decide(n) == forward[n as usize]));
        let other = Plan::new(8, faults());
        assert!((0..500).any(|n| other.decide(n) != forward[n as usize]));
    }

    #[test]
    fn rates_are_honoured_roughly() {
        let plan = Plan::new(1, faults());
        let n = 10_000;
        let count = |name: &str| {
            (0..n).filter(|&i| plan.decide(i).name() == name).count() as f64 / n as f64
        };
        for (name, rate) in [
            ("drop_after", 0.1),
            ("delay", 0.2),
            ("reject", 0.1),
            ("truncate", 0.1),
            ("cut", 0.1),
            ("none", 0.4),
        ] {
            let seen = count(name);
            assert!((seen - rate).abs() < 0.02, "{name}: {seen} vs {rate}");
        }
    }

    #[test]
    fn drawn_parameters_stay_in_their_ranges() {
        let plan = Plan::new(3, faults());
        for n in 0..5_000 {
            match plan.decide(n) {
                Fault::Delay { delay_ms } => assert!((50..=500).contains(&delay_ms)),
                Fault::Reject {
                    status,
                    retry_after_s,
                } => assert!(matches!(status, 429 | 503) && retry_after_s == 1),
                Fault::Truncate { at_permille } | Fault::Cut { at_permille } => {
                    assert!((1..=999).contains(&at_permille))
                }
                Fault::None | Fault::DropAfter { .. } => {}
            }
        }
    }

    #[test]
    fn method_lists_limit_where_a_fault_lands() {
        let plan = Plan::new(1, faults());
        let truncate = Fault::Truncate { at_permille: 5 };
        assert!(plan.targets(&truncate, "tasks/get"));
        assert!(!plan.targets(&truncate, "tools/call"));
        assert!(plan.targets(&Fault::Cut { at_permille: 5 }, "GET"));
    }

    #[test]
    fn cut_points_are_strictly_inside() {
        assert_eq!(cut_point(0, 500), None);
        assert_eq!(cut_point(1, 500), None);
        assert_eq!(cut_point(2, 1), Some(1));
        assert_eq!(cut_point(2, 999), Some(1));
        assert_eq!(cut_point(1000, 250), Some(250));
    }
}
