//! Latency gates whose verdict does not flip with the number of series.
//!
//! A percentile gate "p99 < T" is the claim "fewer than 1% of samples take T or longer". It is
//! decided on the count of samples at or over T, never on one order statistic: with `n` samples
//! of which `k` reach T, a one-sided 95% Wilson score interval bounds the true share.
//! - FAIL when the lower bound is above 1% (the tail is too heavy, whatever more samples say);
//! - PASS when the upper bound is below 1% (with no sample over T this needs at least
//!   [`min_samples`] samples: 268 for a p99);
//! - INSUFFICIENT otherwise: not a failure, never a PASS; the row says how many samples the
//!   observed share would need.
//!
//! One slow sample therefore moves the verdict by one sample's weight: a healthy executor reads
//! INSUFFICIENT at small N and PASS at large N, never FAIL, and a p99 over ~170 samples (the
//! second-largest one) decides nothing. The point estimate is shown for reading only, and only
//! once at least 10 samples lie above its rank (n >= 1000 for a p99).
//!
//! A maximum gate "max < T" fails on any sample at or over T and reports INSUFFICIENT with no
//! samples at all.

use super::GateRow;

/// One-sided 95% normal quantile.
const Z: f64 = 1.644_853_626_951_472_2;

/// Samples above the percentile's rank before the point estimate is shown.
const TAIL_SAMPLES_FOR_ESTIMATE: f64 = 10.0;

/// The one-sided 95% Wilson bounds on a share of `k` in `n` (n > 0): (lower, upper).
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    assert!(n > 0 && k <= n, "wilson({k}, {n})");
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = Z * Z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At the ends the bound is the share itself; float error must not put it on the wrong side.
    let lower = if k == 0.0 {
        0.0
    } else {
        (center - half).clamp(0.0, p)
    };
    let upper = if k == n {
        1.0
    } else {
        (center + half).clamp(p, 1.0)
    };
    (lower, upper)
}

/// Fewest samples, none over the bound, that can PASS a `p`-th percentile gate.
pub fn min_samples(p: f64) -> u64 {
    samples_needed(0.0, 1.0 - p / 100.0).expect("a zero share always passes eventually")
}

/// Fewest samples at which a share `share` of them over the bound gives an upper bound below
/// `q`; `None` when no sample count would (the share itself is not below `q`).
fn samples_needed(share: f64, q: f64) -> Option<u64> {
    if share >= q {
        return None;
    }
    let passes = |n: u64| wilson((share * n as f64).ceil() as u64, n).1 < q;
    let mut hi = 1u64;
    while !passes(hi) {
        hi = hi.checked_mul(2).filter(|h| *h <= 1 << 40)?;
    }
    let mut lo = hi / 2;
    // passes(hi), and lo == 0 or !passes(lo): find the first passing count.
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if passes(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// "p`p` < `bound_ms`" over `samples` (see the module docs).
pub fn percentile_gate(
    protocol: &str,
    gate: &str,
    samples: &[u64],
    p: f64,
    bound_ms: u64,
) -> GateRow {
    let q = 1.0 - p / 100.0;
    let n = samples.len() as u64;
    let k = samples.iter().filter(|&&s| s >= bound_ms).count() as u64;
    let threshold = format!("< {bound_ms}");
    let mut row = GateRow {
        protocol: protocol.into(),
        gate: gate.into(),
        threshold,
        measured: String::new(),
        pass: true,
        insufficient: None,
    };
    if n == 0 {
        row.measured = "no samples".into();
        row.insufficient = Some(format!(
            "no samples; a PASS needs at least {}",
            min_samples(p)
        ));
        return row;
    }
    let (lower, upper) = wilson(k, n);
    let estimate = if n as f64 * q >= TAIL_SAMPLES_FOR_ESTIMATE {
        format!(
            "p{p} {}",
            crate::report::percentile(samples, p).map_or_else(|| "n/a".into(), |v| v.to_string())
        )
    } else {
        format!(
            "p{p} not estimated (n < {})",
            (TAIL_SAMPLES_FOR_ESTIMATE / q).round()
        )
    };
    row.measured = format!(
        "{estimate}; {k} of {n} >= {bound_ms} (share {:.2}%, 95% bounds {:.2}%..{:.2}%)",
        100.0 * k as f64 / n as f64,
        100.0 * lower,
        100.0 * upper
    );
    if lower > q {
        row.pass = false;
    } else if upper >= q {
        row.insufficient = Some(match samples_needed(k as f64 / n as f64, q) {
            Some(need) => format!("{n} samples; at this share a PASS needs about {need}"),
            None => format!(
                "{n} samples; the observed share is not below {:.2}%",
                100.0 * q
            ),
        });
    }
    row
}

/// "max < `bound_ms`" over `samples`: any sample at or over the bound fails it.
pub fn max_gate(protocol: &str, gate: &str, samples: &[u64], bound_ms: u64) -> GateRow {
    let max = samples.iter().copied().max();
    GateRow {
        protocol: protocol.into(),
        gate: gate.into(),
        threshold: format!("< {bound_ms}"),
        measured: max.map_or_else(
            || "no samples".into(),
            |m| format!("{m} (n = {})", samples.len()),
        ),
        pass: max.is_none_or(|m| m < bound_ms),
        insufficient: max.is_none().then(|| "no samples".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_p99_gate_needs_268_clean_samples_to_pass() {
        assert_eq!(min_samples(99.0), 268);
        let gate = |samples: &[u64]| percentile_gate("p", "g", samples, 99.0, 100);
        assert_eq!(gate(&[]).verdict(), "INSUFFICIENT");
        assert_eq!(gate(&[1; 267]).verdict(), "INSUFFICIENT");
        assert_eq!(gate(&[1; 268]).verdict(), "PASS");
        let row = gate(&[1; 100]);
        assert!(
            row.insufficient
                .as_deref()
                .is_some_and(|m| m.contains("268")),
            "{row:?}"
        );
    }

    #[test]
    fn one_slow_sample_does_not_flip_a_healthy_verdict_as_n_grows() {
        // A healthy tail: 0.3% of samples over the bound, at every N. The nearest-rank p99 of
        // 170 samples with one slow one is that slow one's neighbour; here nothing fails.
        let mut verdicts = vec![];
        for n in [170u64, 340, 1_000, 2_000, 5_000, 10_000] {
            let slow = (n * 3).div_ceil(1_000);
            let samples: Vec<u64> = (0..n).map(|i| if i < slow { 200 } else { 50 }).collect();
            let row = percentile_gate("p", "g", &samples, 99.0, 100);
            assert!(row.pass, "n = {n}: {row:?}");
            verdicts.push(row.verdict());
        }
        assert_eq!(
            verdicts,
            [
                "INSUFFICIENT",
                "INSUFFICIENT",
                "PASS",
                "PASS",
                "PASS",
                "PASS"
            ]
        );
    }

    #[test]
    fn a_heavy_tail_fails_even_on_few_samples() {
        // 10% over the bound in 60 samples: the lower bound is well above 1%.
        let samples: Vec<u64> = (0..60).map(|i| if i % 10 == 0 { 500 } else { 5 }).collect();
        let row = percentile_gate("p", "g", &samples, 99.0, 100);
        assert_eq!(row.verdict(), "FAIL", "{row:?}");
        // A share at 1% never passes, however many samples.
        let samples: Vec<u64> = (0..1_000)
            .map(|i| if i % 100 == 0 { 500 } else { 5 })
            .collect();
        let row = percentile_gate("p", "g", &samples, 99.0, 100);
        assert_eq!(row.verdict(), "INSUFFICIENT");
        assert!(
            row.insufficient
                .as_deref()
                .is_some_and(|m| m.contains("not below")),
            "{row:?}"
        );
    }

    #[test]
    fn a_max_gate_fails_on_one_sample_and_has_no_pass_without_samples() {
        assert_eq!(max_gate("p", "g", &[], 10).verdict(), "INSUFFICIENT");
        assert_eq!(max_gate("p", "g", &[9, 3], 10).verdict(), "PASS");
        assert_eq!(max_gate("p", "g", &[9, 10], 10).verdict(), "FAIL");
    }

    #[test]
    fn wilson_bounds_contain_the_share() {
        for (k, n) in [(0, 1), (1, 1), (3, 170), (50, 100), (1_000, 1_000)] {
            let (lo, hi) = wilson(k, n);
            let share = k as f64 / n as f64;
            assert!(lo <= share && share <= hi && (0.0..=1.0).contains(&lo) && hi <= 1.0);
        }
    }
}
