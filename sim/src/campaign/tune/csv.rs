//! `tune.csv`: one row per grid point. Empty cells mean the sweep produced no value of that kind.
//! Nothing here depends on wall time or `--jobs`: the same grid and seeds give the same file.

use super::grid::{fmt_float, Knob};
use super::TuneReport;

/// The columns before the gates: the point, its settings (every knob, varied or not), then the
/// measurements.
pub fn header(r: &TuneReport) -> Vec<String> {
    let mut h: Vec<String> = vec!["point".into(), "label".into()];
    h.extend(Knob::ALL.iter().map(|k| k.name().to_string()));
    h.extend(
        [
            "series",
            "start_seed",
            "operations",
            "completion_detection_p50_ms",
            "completion_detection_p99_ms",
            "polls_per_operation_mean",
            "polls_per_operation_p99",
            "busiest_1s_window_sends",
            "cancel_confirmation_p99_ms",
            "unknown_reconciliation_p99_ms",
            "unknown_reconciliation_max_ms",
            "rate_limited_429",
            "checker_violations",
            "failing_seeds",
        ]
        .map(String::from),
    );
    h.extend(r.gate_names().iter().map(|g| format!("gate_{g}")));
    h.extend(["pass_all", "on_frontier", "recommended", "traces_digest"].map(String::from));
    h
}

/// The whole file.
pub fn to_string(r: &TuneReport) -> std::io::Result<String> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(header(r))?;
    let gate_names = r.gate_names();
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    for (i, p) in r.points.iter().enumerate() {
        let m = &p.metrics;
        let mut rec: Vec<String> = vec![p.id.clone(), p.label.clone()];
        rec.extend(Knob::ALL.iter().map(|&k| p.setting.get(k).to_string()));
        rec.extend([
            m.series.to_string(),
            r.start_seed.to_string(),
            m.operations.to_string(),
            opt(m.detection_p50_ms),
            opt(m.detection_p99_ms),
            m.polls_per_op_mean
                .map(|v| fmt_float((v * 1000.0).round() / 1000.0))
                .unwrap_or_default(),
            opt(m.polls_per_op_p99),
            m.busiest_window_sends.to_string(),
            opt(m.cancel_p99_ms),
            opt(m.unknown_p99_ms),
            opt(m.unknown_max_ms),
            m.rate_limited.to_string(),
            m.checker_violations.to_string(),
            m.failing_seeds.to_string(),
        ]);
        for g in &gate_names {
            let verdict = match p.gates.iter().find(|row| &row.gate == g) {
                Some(row) if row.pass && row.insufficient.is_some() => "insufficient",
                Some(row) if row.pass => "pass",
                Some(_) => "fail",
                None => "",
            };
            rec.push(verdict.into());
        }
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        rec.push(if p.passes() { "pass" } else { "fail" }.into());
        rec.push(yes(r.frontier.contains(&i)));
        rec.push(yes(r.recommended == Some(i)));
        rec.push(p.traces_digest.clone());
        w.write_record(&rec)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
