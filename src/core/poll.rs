//! Poll pacing and the executor-wide QPS limiter. Both are pure: time and jitter are inputs.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How the executor paces status reads of one operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PollPolicy {
    pub initial_interval_ms: u64,
    /// Growth per poll already sent (1.0 = fixed interval).
    pub backoff_multiplier: f64,
    pub interval_cap_ms: u64,
    /// Jitter added on top, as a fraction of the interval (0.2 = up to +20%).
    pub jitter_fraction: f64,
    /// Never poll faster than the server's suggested interval.
    pub honor_server_interval: bool,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            initial_interval_ms: 1_000,
            backoff_multiplier: 1.5,
            interval_cap_ms: 20_000,
            jitter_fraction: 0.2,
            honor_server_interval: true,
        }
    }
}

impl PollPolicy {
    /// Delay before the next poll, given polls already sent, the server's suggestion, and a
    /// jitter draw in [0, 1000).
    pub fn next_delay_ms(
        &self,
        polls: u32,
        server_interval_ms: Option<u64>,
        jitter_permille: u32,
    ) -> u64 {
        debug_assert!(jitter_permille < 1000);
        // Exponent capped: beyond 64 steps any sane multiplier has long hit the cap.
        let growth = self.backoff_multiplier.max(1.0).powi(polls.min(64) as i32);
        let mut base =
            ((self.initial_interval_ms as f64) * growth).min(self.interval_cap_ms as f64) as u64;
        if self.honor_server_interval {
            if let Some(s) = server_interval_ms {
                base = base.max(s);
            }
        }
        let jitter = (base as f64
            * self.jitter_fraction.max(0.0)
            * (jitter_permille as f64 / 1000.0)) as u64;
        base.saturating_add(jitter).max(1)
    }
}

/// A limiter over a sliding one-second window shared by every operation of one executor:
/// in any window [t, t+999] ms at most `max_qps` sends are admitted.
#[derive(Clone, Debug)]
pub struct QpsLimiter {
    max_qps: u32,
    recent_ms: VecDeque<u64>,
}

pub const QPS_WINDOW_MS: u64 = 1_000;

impl QpsLimiter {
    pub fn new(max_qps: u32) -> QpsLimiter {
        assert!(max_qps > 0, "max_qps must be positive");
        QpsLimiter {
            max_qps,
            recent_ms: VecDeque::with_capacity(max_qps as usize),
        }
    }

    /// Earliest time at or after `now_ms` at which a send would be admitted.
    pub fn next_slot_ms(&mut self, now_ms: u64) -> u64 {
        self.forget_before(now_ms);
        if (self.recent_ms.len() as u32) < self.max_qps {
            now_ms
        } else {
            // The oldest send in the window leaves it one window after it happened.
            self.recent_ms[0] + QPS_WINDOW_MS
        }
    }

    /// Take a slot at `now_ms`. Returns false (and takes nothing) if the window is full.
    pub fn try_admit(&mut self, now_ms: u64) -> bool {
        if self.next_slot_ms(now_ms) > now_ms {
            return false;
        }
        debug_assert!(
            self.recent_ms.back().is_none_or(|&b| b <= now_ms),
            "time went backwards"
        );
        self.recent_ms.push_back(now_ms);
        true
    }

    fn forget_before(&mut self, now_ms: u64) {
        while let Some(&t) = self.recent_ms.front() {
            if t + QPS_WINDOW_MS <= now_ms {
                self.recent_ms.pop_front();
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_grows_caps_and_honours_the_server() {
        let p = PollPolicy {
            jitter_fraction: 0.0,
            ..PollPolicy::default()
        };
        assert_eq!(p.next_delay_ms(0, None, 0), 1_000);
        assert_eq!(p.next_delay_ms(1, None, 0), 1_500);
        assert_eq!(p.next_delay_ms(40, None, 0), 20_000);
        assert_eq!(p.next_delay_ms(0, Some(5_000), 0), 5_000);
        let q = PollPolicy {
            honor_server_interval: false,
            ..p.clone()
        };
        assert_eq!(q.next_delay_ms(0, Some(5_000), 0), 1_000);
        let j = PollPolicy {
            jitter_fraction: 0.5,
            ..p
        };
        assert_eq!(j.next_delay_ms(0, None, 500), 1_250);
    }

    #[test]
    fn limiter_never_admits_more_than_max_in_any_window() {
        let mut l = QpsLimiter::new(3);
        let mut admitted = vec![];
        for t in (0..5_000).step_by(50) {
            if l.try_admit(t) {
                admitted.push(t);
            }
        }
        for &s in &admitted {
            let n = admitted
                .iter()
                .filter(|&&t| t >= s && t < s + QPS_WINDOW_MS)
                .count();
            assert!(n <= 3, "window at {s} has {n}");
        }
        // And it does admit at the full rate: 3 per second over 5 s.
        assert_eq!(admitted.len(), 15);
    }

    #[test]
    fn next_slot_is_one_window_after_the_oldest() {
        let mut l = QpsLimiter::new(2);
        assert!(l.try_admit(100));
        assert!(l.try_admit(200));
        assert!(!l.try_admit(300));
        assert_eq!(l.next_slot_ms(300), 1_100);
        assert!(l.try_admit(1_100));
    }
}
