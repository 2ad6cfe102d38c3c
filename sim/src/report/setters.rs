//! Which seeds set a failing gate's measured value. A checker violation names its seed in the
//! failing list; a gate over a metric (a p99, a busiest window, a sum) does not, so for each
//! failing metric gate this lists the series with the largest share of it, with replay commands.

use std::fmt::Write as _;

use crate::campaign::sweep::replay_command;
use crate::judge::gates::{SeriesRow, SweepReport};

/// Seeds listed per failing gate.
pub const SETTERS_SHOWN: usize = 3;

/// A series' contribution to a metric gate, or `None` when the gate is not a metric gate (or
/// the series contributed nothing).
fn contribution(gate: &str, r: &SeriesRow) -> Option<u64> {
    let m = &r.metrics;
    let v = match gate {
        "terminal_state_divergence" => u64::from(m.divergences),
        "second_operations" => u64::from(m.second_operations),
        "poll_rate_per_second" => u64::from(m.max_sends_in_window),
        "cancel_confirmation_p99_ms" => m.cancel_confirmation_ms.iter().copied().max()?,
        "unknown_reconciliation_max_ms" => m.unknown_reconciliation_ms.iter().copied().max()?,
        "outbox_traceable_pct" => u64::from(m.untraceable_outbox),
        "receipts_per_call_node" => u64::from(m.extra_receipts),
        _ => return None,
    };
    (v > 0).then_some(v)
}

/// One failing metric gate and the series that set it, largest contribution first.
pub struct GateSetters<'a> {
    pub protocol: &'a str,
    pub gate: &'a str,
    pub seeds: Vec<(&'a SeriesRow, u64)>,
}

pub fn gate_setters(r: &SweepReport) -> Vec<GateSetters<'_>> {
    let mut out = vec![];
    for g in r.gates.iter().filter(|g| !g.pass) {
        let mut seeds: Vec<(&SeriesRow, u64)> = r
            .rows
            .iter()
            .filter(|row| row.protocol == g.protocol)
            .filter_map(|row| contribution(&g.gate, row).map(|v| (row, v)))
            .collect();
        if seeds.is_empty() {
            continue;
        }
        // Largest first; the seed breaks ties so the list does not depend on thread timing.
        seeds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.seed.cmp(&b.0.seed)));
        seeds.truncate(SETTERS_SHOWN);
        out.push(GateSetters {
            protocol: &g.protocol,
            gate: &g.gate,
            seeds,
        });
    }
    out
}

/// The setters as text lines (terminal and summary.md share it).
pub fn setters_text(r: &SweepReport) -> String {
    let mut out = String::new();
    for s in gate_setters(r) {
        let _ = writeln!(
            out,
            "{} {} failed; the series that set it:",
            s.protocol, s.gate
        );
        for (row, v) in &s.seeds {
            let _ = writeln!(
                out,
                "  seed {} ({}): {v}\n    replay: {}",
                row.seed,
                row.scenario_file,
                replay_command(&row.scenario_file, row.seed)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;

    #[test]
    fn a_failing_latency_gate_names_the_seeds_that_set_it() {
        let mut r = sample_report();
        let p = r.rows[0].protocol.clone();
        r.gates = vec![crate::judge::gates::GateRow {
            protocol: p,
            gate: "cancel_confirmation_p99_ms".into(),
            threshold: "< 60000".into(),
            measured: "90000".into(),
            pass: false,
            insufficient: None,
        }];
        for (i, row) in r.rows.iter_mut().enumerate() {
            row.metrics.cancel_confirmation_ms = vec![1_000 * (i as u64 + 1)];
        }
        r.rows[1].metrics.cancel_confirmation_ms = vec![90_000];
        let t = setters_text(&r);
        let first = t.lines().nth(1).unwrap_or_default();
        assert!(
            first.starts_with(&format!("  seed {} (", r.rows[1].seed))
                && first.ends_with(": 90000"),
            "{t}"
        );
        assert!(t.contains("replay: toolop-sim replay --scenario"), "{t}");
        r.gates[0].pass = true;
        assert_eq!(setters_text(&r), "");
    }
}
