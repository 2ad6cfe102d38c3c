//! HdrHistogram views: the `hist_*.hgrm` percentile-distribution files and the percentile helpers
//! the gates use. Every number goes through an [`hdrhistogram::Histogram`] with
//! [`SIGFIG`] significant digits, so a gate and the histogram file never disagree.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use crate::judge::gates::{SeriesRow, SweepReport};
use crate::judge::metrics::SeriesMetrics;

/// Significant decimal digits kept by every histogram here.
pub const SIGFIG: u8 = 3;

/// Quantile ticks per half distance to 100% in the `.hgrm` files (HdrHistogram's usual 5).
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// Picks one measurement's values out of a series' metrics.
pub type Values = fn(&SeriesMetrics) -> &[u64];

/// The histogram files: file name, and the per-series values aggregated into it.
pub const HISTOGRAMS: [(&str, Values); 4] = [
    ("hist_cancel_confirmation_ms.hgrm", |m| {
        &m.cancel_confirmation_ms
    }),
    ("hist_unknown_reconciliation_ms.hgrm", |m| {
        &m.unknown_reconciliation_ms
    }),
    ("hist_end_to_end_ms.hgrm", |m| &m.end_to_end_ms),
    ("hist_polls_per_operation.hgrm", |m| &m.polls_per_operation),
];

/// For each of [`HISTOGRAMS`], its file name and the values of all rows of `r`, in row order.
pub fn histogram_values(r: &SweepReport) -> Vec<(&'static str, Vec<u64>)> {
    histogram_values_of(&r.rows)
}

/// [`histogram_values`] of some rows (a shard's).
pub fn histogram_values_of(rows: &[SeriesRow]) -> Vec<(&'static str, Vec<u64>)> {
    HISTOGRAMS
        .iter()
        .map(|&(file, values)| {
            (
                file,
                rows.iter()
                    .flat_map(|row| values(&row.metrics).iter().copied())
                    .collect(),
            )
        })
        .collect()
}

/// The lossless file beside a `.hgrm` view: `hist_x.hgrm` -> `hist_x.hdr`, the histogram in
/// HdrHistogram's V2 serialization (readable by every HdrHistogram implementation; shards'
/// files are added up by `toolop-sim merge`).
pub fn hdr_file(hgrm_file: &str) -> String {
    format!("{}.hdr", hgrm_file.trim_end_matches(".hgrm"))
}

/// `h` in the V2 serialization, in a canonical form: the same counts give the same bytes
/// whatever the histogram's history. (An auto-resizing histogram's highest trackable value,
/// which the V2 header carries, depends on the order it grew in: the sum of a sweep's parts
/// and the histogram of the whole sweep hold the same counts but grew differently.)
pub fn to_v2(h: &Histogram<u64>) -> Vec<u8> {
    use hdrhistogram::serialization::Serializer as _;
    let high = h.max().max(2);
    let mut canonical = Histogram::<u64>::new_with_bounds(1, high, SIGFIG)
        .expect("1 <= 2 <= high and sigfig 3 are valid bounds");
    canonical
        .add(h)
        .expect("every value of h is at most its own maximum");
    let mut out = Vec::new();
    hdrhistogram::serialization::V2Serializer::new()
        .serialize(&canonical, &mut out)
        .expect("a histogram with no more than u64 counts serializes into memory");
    out
}

/// A histogram back from [`to_v2`] bytes; the error says what is wrong with them.
pub fn from_v2(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    let mut reader = bytes;
    let mut h: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut reader)
        .map_err(|e| format!("not an HdrHistogram V2 serialization ({e})"))?;
    // Serialized bounded by its own maximum; it grows again when another part is added to it.
    h.auto(true);
    if !reader.is_empty() {
        return Err(format!("{} bytes after the histogram", reader.len()));
    }
    Ok(h)
}

/// An auto-resizing histogram of `values` with [`SIGFIG`] significant digits.
pub fn histogram(values: &[u64]) -> Histogram<u64> {
    // new(3) is valid (sigfig <= 5), so it cannot fail.
    let mut h = Histogram::<u64>::new(SIGFIG).expect("sigfig 3 is valid");
    for &v in values {
        // An auto-resizing histogram takes any u64; should a value still be refused, count it
        // at the histogram's top rather than drop it.
        if h.record(v).is_err() {
            let top = h.high();
            h.saturating_record(top);
        }
    }
    h
}

/// The `p`-th percentile (`p` in 0..=100; larger is taken as 100, smaller as 0) of `values`,
/// computed through an HdrHistogram with [`SIGFIG`] significant digits: the smallest recorded
/// value (as the highest value equivalent to it at that precision; exact below 2048) such that
/// at least `p`% of the values are at most it. `None` when `values` is empty or `p` is NaN.
///
/// The rank is taken as `ceil(p * n / 100)` with a tolerance of 1e-9 for float error, so
/// `percentile(1..=100, 55.0)` is 55 (`Histogram::value_at_percentile` would say 56, because
/// `0.55 * 100.0` is `55.00000000000001` in floats).
pub fn percentile(values: &[u64], p: f64) -> Option<u64> {
    if values.is_empty() || p.is_nan() {
        return None;
    }
    let h = histogram(values);
    Some(value_at_rank(&h, rank(h.len(), p)))
}

/// `ceil(p * n / 100)` within [1, n], forgiving float error of relative size 1e-9.
fn rank(n: u64, p: f64) -> u64 {
    let x = p.clamp(0.0, 100.0) * n as f64 / 100.0;
    let k = (x - 1e-9 * x.max(1.0)).ceil();
    (k.max(1.0) as u64).min(n)
}

/// The value holding the `k`-th smallest recording (1-based, `1 <= k <= len`), as the highest
/// equivalent value. Asks the histogram at quantile `(k - 0.5) / n`, so float error in the
/// histogram's `quantile * n` cannot move the rank.
fn value_at_rank(h: &Histogram<u64>, k: u64) -> u64 {
    let n = h.len();
    h.value_at_quantile((k as f64 - 0.5) / n as f64)
}

/// p50, p99 and max of a set of values, at hdr precision (see [`percentile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    /// The highest value equivalent to the true maximum at hdr precision.
    pub max: u64,
}

/// [`Percentiles`] of `values` from one histogram; `None` when `values` is empty.
pub fn percentiles(values: &[u64]) -> Option<Percentiles> {
    if values.is_empty() {
        return None;
    }
    let h = histogram(values);
    let n = h.len();
    Some(Percentiles {
        count: n,
        p50: value_at_rank(&h, rank(n, 50.0)),
        p99: value_at_rank(&h, rank(n, 99.0)),
        max: value_at_rank(&h, n),
    })
}

/// The classic HdrHistogram percentile-distribution text of `values` (the layout of Java's
/// `outputPercentileDistribution` with 5 ticks per half distance and a scaling ratio of 1): a
/// header line, one line per percentile tick with Value, Percentile, TotalCount and
/// 1/(1-Percentile) (the last line, at percentile 1, has no fourth column), then the
/// `#[Mean ...]`, `#[Max ...]` and `#[Buckets ...]` footer. An empty `values` gives the header
/// and the footer only.
///
/// Ticks step as HdrHistogram's quantile iteration does (0, 0.1, ..., 0.5, 0.55, ..., 0.75,
/// 0.775, ...: [`TICKS_PER_HALF_DISTANCE`] per half distance to 100%), but the levels are kept
/// as exact fractions and each value is [`percentile`] at its level, so every line agrees with
/// [`percentile`] (the crate's own iterator adds floats and drifts: its "0.3" tick lands on the
/// 31st of 100 values). TotalCount is the number of recordings at or below the line's value.
pub fn hgrm(values: &[u64]) -> String {
    let h = histogram(values);
    let mut out = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let n = h.len();
    if n > 0 {
        let line = |out: &mut String, k: u64, q: f64, inverse: Option<f64>| {
            let value = value_at_rank(&h, k);
            let total = h.count_between(0, value);
            let _ = write!(out, "{:12.3} {q:14.12} {total:10}", value as f64);
            match inverse {
                Some(inv) => {
                    let _ = writeln!(out, " {inv:14.2}");
                }
                None => out.push('\n'),
            }
        };
        // The level is num / den with den = ticks * 2^j; u128 holds any level reached before
        // the rank covers all of n <= u64::MAX recordings.
        let ticks = u128::from(TICKS_PER_HALF_DISTANCE);
        let (mut num, mut den) = (0u128, ticks * 2);
        loop {
            let k = (num * u128::from(n)).div_ceil(den).max(1) as u64;
            line(
                &mut out,
                k,
                num as f64 / den as f64,
                Some(den as f64 / (den - num) as f64),
            );
            if k >= n {
                break;
            }
            // Halvings so far: the largest j with (den - num) * 2^j <= den.
            let mut halvings = 0u32;
            while (den - num) << (halvings + 1) <= den {
                halvings += 1;
            }
            let step_den = ticks << (halvings + 1);
            if step_den > den {
                num *= step_den / den;
                den = step_den;
            }
            num += den / step_den;
        }
        line(&mut out, n, 1.0, None);
    }
    let max = if h.is_empty() { 0 } else { h.max() };
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean(),
        h.stdev()
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        max as f64,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_buckets(h.sigfig())
    );
    out
}

/// Sub-buckets per bucket for `sigfig` digits (with a lowest discernible value of 1): the power
/// of two that covers single-unit resolution up to 2 * 10^sigfig. The crate keeps it private.
fn sub_buckets(sigfig: u8) -> u64 {
    let largest = 2 * 10u64.pow(u32::from(sigfig));
    largest.next_power_of_two()
}

/// One data line of an `.hgrm` file: (value, percentile as a fraction, total count).
pub fn parse_hgrm_line(line: &str) -> Option<(f64, f64, u64)> {
    let mut it = line.split_whitespace();
    let value = it.next()?.parse().ok()?;
    let q = it.next()?.parse().ok()?;
    let total = it.next()?.parse().ok()?;
    Some((value, q, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;

    #[test]
    fn percentile_of_one_to_hundred() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 250.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&v, 55.0), Some(55), "no float off-by-one");
        assert_eq!(percentile(&v, 30.0), Some(30));
        assert_eq!(percentile(&v, 99.5), Some(100));
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, f64::NAN), None);
        assert_eq!(
            percentiles(&v),
            Some(Percentiles {
                count: 100,
                p50: 50,
                p99: 99,
                max: 100
            })
        );
        assert_eq!(percentiles(&[]), None);
    }

    #[test]
    fn percentile_is_within_hdr_precision_for_large_values() {
        let v: Vec<u64> = (1..=100).map(|i| i * 100_000).collect();
        let p99 = percentile(&v, 99.0).unwrap();
        let exact = 9_900_000f64;
        assert!((p99 as f64 - exact).abs() / exact < 1e-3, "{p99}");
        assert_eq!(percentiles(&[u64::MAX / 4]).map(|p| p.count), Some(1));
    }

    #[test]
    fn hgrm_lines_agree_with_percentile() {
        let v: Vec<u64> = (1..=100).collect();
        let text = hgrm(&v);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
        );
        assert_eq!(lines.next(), Some(""));
        let data: Vec<(f64, f64, u64)> = text.lines().filter_map(parse_hgrm_line).collect();
        assert!(data.len() > 20, "{text}");
        assert!(data
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1 && w[0].2 <= w[1].2));
        assert_eq!(data[0], (1.0, 0.0, 1));
        assert_eq!(*data.last().unwrap(), (100.0, 1.0, 100));
        // Every tick agrees with percentile() at that tick's level, and counts what lies below.
        for &(value, q, total) in &data {
            assert_eq!(Some(value as u64), percentile(&v, q * 100.0), "tick {q}");
            assert_eq!(total, value as u64, "tick {q}");
        }
        let levels: Vec<f64> = data.iter().map(|d| d.1).collect();
        assert_eq!(levels[..8], [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6]);
        assert!(levels.contains(&0.775) && levels.contains(&0.8875));
        // p99 lies between the ticks around it.
        let p99 = percentile(&v, 99.0).unwrap();
        let i = data.iter().position(|&(_, q, _)| q >= 0.99).unwrap();
        assert!(data[i - 1].0 as u64 <= p99 && p99 <= data[i].0 as u64);
        assert!(
            text.contains("#[Mean    =       50.500, StdDeviation   ="),
            "{text}"
        );
        assert!(
            text.contains("#[Max     =      100.000, Total count    =          100]"),
            "{text}"
        );
        assert!(
            text.contains("#[Buckets =            1, SubBuckets     =         2048]"),
            "{text}"
        );
        // Data lines have four columns, the last one three.
        let data_lines: Vec<&str> = text
            .lines()
            .filter(|l| parse_hgrm_line(l).is_some())
            .collect();
        assert!(data_lines[..data_lines.len() - 1]
            .iter()
            .all(|l| l.split_whitespace().count() == 4));
        assert_eq!(data_lines.last().unwrap().split_whitespace().count(), 3);
    }

    /// The `.hdr` files are lossless, and adding the histograms of parts gives the bytes of the
    /// histogram of the whole (what `merge` relies on).
    #[test]
    fn v2_round_trips_and_parts_add_up_to_the_whole() {
        let all: Vec<u64> = (0..5_000u64).map(|i| (i * 7_919) % 1_000_003).collect();
        let whole = histogram(&all);
        assert_eq!(from_v2(&to_v2(&whole)).unwrap(), whole);
        // Parts with small values first: the sum read back from the first must still grow.
        let mut sorted = all.clone();
        sorted.sort_unstable();
        let parts: Vec<Histogram<u64>> = sorted
            .chunks(1_250)
            .map(|part| from_v2(&to_v2(&histogram(part))).unwrap())
            .collect();
        let mut sum = parts[0].clone();
        for p in &parts[1..] {
            sum.add(p).unwrap();
        }
        assert_eq!(to_v2(&sum), to_v2(&whole));
        assert!(from_v2(b"not a histogram").is_err());
        let mut long = to_v2(&whole);
        long.push(0);
        assert!(from_v2(&long).unwrap_err().contains("1 bytes after"));
        assert_eq!(
            hdr_file("hist_end_to_end_ms.hgrm"),
            "hist_end_to_end_ms.hdr"
        );
    }

    #[test]
    fn hgrm_of_nothing_has_header_and_footer() {
        let text = hgrm(&[]);
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
        assert_eq!(text.lines().filter_map(parse_hgrm_line).count(), 0);
        assert!(text.contains("Total count    =            0]"));
    }

    #[test]
    fn histogram_values_aggregate_all_rows() {
        let r = sample_report();
        let hv = histogram_values(&r);
        assert_eq!(
            hv[0],
            ("hist_cancel_confirmation_ms.hgrm", vec![120, 450, 9000])
        );
        assert_eq!(hv[1].1, Vec::<u64>::new());
        assert_eq!(hv[2].1, vec![1000, 2000, 3000, 1500, 2500, 800]);
        assert_eq!(hv[3].1, vec![3, 4, 7, 1, 2, 3]);
    }
}
