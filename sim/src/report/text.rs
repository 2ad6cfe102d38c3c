//! Plain-text tables for the terminal: fixed-width columns, two spaces apart.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{coverage_grids, seed_range, Cell};
use crate::judge::gates::{FailingSeed, SweepReport};

/// The gate rows as a fixed-width table: PROTOCOL, GATE, THRESHOLD, MEASURED, VERDICT
/// (PASS/FAIL), then a line with the overall verdict.
pub fn gate_table(r: &SweepReport) -> String {
    let rows: Vec<Vec<String>> = r
        .gates
        .iter()
        .map(|g| {
            vec![
                g.protocol.clone(),
                g.gate.clone(),
                g.threshold.clone(),
                g.measured.clone(),
                match &g.insufficient {
                    Some(missing) if g.pass => format!("INSUFFICIENT ({missing})"),
                    _ => g.verdict().to_string(),
                },
            ]
        })
        .collect();
    let mut out = table(
        &["PROTOCOL", "GATE", "THRESHOLD", "MEASURED", "VERDICT"],
        &rows,
        &[false; 5],
    );
    let failed = r.gates.iter().filter(|g| !g.pass).count();
    let _ = writeln!(
        out,
        "{}: {failed} of {} gate(s) failing ({}, {} series)",
        if r.passed() { "PASS" } else { "FAIL" },
        r.gates.len(),
        seed_range(r),
        r.series
    );
    out
}

/// The coverage matrix per protocol as fixed-width tables: rows are faults, columns the local
/// states of the reachable cells, cells the hits. `n!` marks a reachable cell under
/// `coverage_min_hits`, `·` an unreachable cell.
pub fn coverage_table(r: &SweepReport) -> String {
    let grids = coverage_grids(r);
    if grids.is_empty() {
        return "coverage: none recorded\n".into();
    }
    let mut out = String::new();
    for (i, grid) in grids.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "coverage {}: {} reachable cell(s) below {} hits (n! below minimum, off: fault not enabled, · not declared)",
            grid.protocol,
            grid.below_min(),
            grid.min_hits
        );
        let mut headers = vec!["FAULT"];
        headers.extend(grid.states.iter().map(|s| s.name()));
        let rows: Vec<Vec<String>> = grid
            .rows
            .iter()
            .map(|(fault, cells)| {
                let mut row = vec![fault.name()];
                row.extend(cells.iter().map(|c| match *c {
                    Cell::Reachable {
                        hits,
                        below_min: true,
                    } => format!("{hits}!"),
                    Cell::Reachable {
                        hits,
                        below_min: false,
                    } => hits.to_string(),
                    Cell::Off { hits: 0 } => "off".into(),
                    Cell::Off { hits } => format!("off {hits}"),
                    Cell::Unreachable { hits: 0 } => "·".into(),
                    Cell::Unreachable { hits } => hits.to_string(),
                }));
                row
            })
            .collect();
        let mut right = vec![true; headers.len()];
        right[0] = false;
        out.push_str(&table(&headers, &rows, &right));
    }
    out
}

/// How many failing seeds per checker the terminal, `summary.md` and `junit.xml` list in full;
/// the rest are counted, and `failing.txt` holds every one. A 10,000-series canary that fails
/// everywhere must not write megabytes where a CI job summary (1 MiB at most) or a log reads it.
pub const FAILING_SHOWN_PER_CHECKER: usize = 5;

/// The name a failing seed is grouped under: its first reason's checker or gate (the text before
/// the first `:`).
pub fn failing_group(f: &FailingSeed) -> &str {
    f.reasons
        .first()
        .and_then(|r| r.split(':').next())
        .unwrap_or("(no reason given)")
}

/// The failing seeds to list in full (the first [`FAILING_SHOWN_PER_CHECKER`] of each group, in
/// sweep order) and, per group, how many more there are.
pub fn capped_failing(r: &SweepReport) -> (Vec<&FailingSeed>, BTreeMap<&str, usize>) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut shown = vec![];
    let mut hidden: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &r.failing {
        let n = seen.entry(failing_group(f)).or_default();
        *n += 1;
        if *n <= FAILING_SHOWN_PER_CHECKER {
            shown.push(f);
        } else {
            *hidden.entry(failing_group(f)).or_default() += 1;
        }
    }
    (shown, hidden)
}

fn failing_entry(out: &mut String, f: &FailingSeed) {
    let _ = writeln!(out, "seed {} ({})", f.seed, f.scenario_file);
    for reason in &f.reasons {
        let _ = writeln!(out, "  - {}", reason.replace('\n', "\n    "));
    }
    let _ = writeln!(out, "  replay: {}", f.replay);
}

/// The failing seeds, capped: each with its reasons and the command that replays it, the first
/// few per checker, then a count of the rest per checker. "no failing seeds" when there are none.
pub fn failing_list(r: &SweepReport) -> String {
    if r.failing.is_empty() {
        return "no failing seeds\n".into();
    }
    let (shown, hidden) = capped_failing(r);
    let mut out = format!("{} failing seed(s):\n", r.failing.len());
    for f in shown {
        failing_entry(&mut out, f);
    }
    for (group, n) in &hidden {
        let _ = writeln!(out, "... and {n} more failing {group} (all in failing.txt)");
    }
    out
}

/// Every failing seed, uncapped: what `failing.txt` holds.
pub fn failing_full(r: &SweepReport) -> String {
    let mut out = format!("{} failing seed(s):\n", r.failing.len());
    for f in &r.failing {
        failing_entry(&mut out, f);
    }
    out
}

/// A fixed-width table: header, a dashed rule, rows. Widths count chars, not bytes; `right`
/// right-aligns a column. Trailing spaces are trimmed.
fn table(headers: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = " ".repeat(widths[i].saturating_sub(width(cell)));
            if right.get(i).copied().unwrap_or(false) {
                s.push_str(&pad);
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&pad);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&mut headers.iter().copied());
    out.push_str(&line(
        &mut widths
            .iter()
            .map(|&w| "-".repeat(w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str),
    ));
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;

    #[test]
    fn gate_table_is_fixed_width() {
        let r = sample_report();
        let t = gate_table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("PROTOCOL  GATE"), "{t}");
        assert!(lines[1].starts_with("--------  ----"), "{t}");
        assert_eq!(lines.len(), 2 + r.gates.len() + 1);
        let verdict_col = lines[0].find("VERDICT").unwrap();
        assert_eq!(&lines[2][verdict_col..], "FAIL");
        assert_eq!(&lines[3][verdict_col..], "PASS");
        assert!(
            lines[5].starts_with("FAIL: 1 of 3 gate(s) failing (seeds 100..=102, 3 series)"),
            "{t}"
        );
    }

    #[test]
    fn coverage_table_marks_cells() {
        let t = coverage_table(&sample_report());
        assert!(
            t.contains("coverage mcp: 2 reachable cell(s) below 2 hits"),
            "{t}"
        );
        let mcp = &t[t.find("coverage mcp:").unwrap()..];
        let row = mcp.lines().find(|l| l.starts_with("lost_request")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["lost_request", "3", "1!", "0!"]
        );
        let header = mcp.lines().find(|l| l.starts_with("FAULT")).unwrap();
        // Right-aligned cells end under their header.
        assert_eq!(row.chars().count(), header.chars().count());
        assert!(t.contains('·'));
    }

    #[test]
    fn failing_list_names_reasons_and_replay() {
        let r = sample_report();
        let t = failing_list(&r);
        assert!(t.contains("seed 101 (scenarios/smoke.toml)"));
        assert!(t.contains("  - at_most_one_receipt: two receipts <a&b>"));
        assert!(
            t.contains("  replay: cargo run -p toolop-sim -- run scenarios/smoke.toml --seed 101")
        );
        let mut ok = r.clone();
        ok.failing.clear();
        assert_eq!(failing_list(&ok), "no failing seeds\n");
    }

    #[test]
    fn failing_list_is_capped_per_checker_and_failing_txt_is_not() {
        let mut r = sample_report();
        let one = r.failing[0].clone();
        r.failing = (0..10_000)
            .map(|i| FailingSeed {
                seed: i,
                ..one.clone()
            })
            .collect();
        let t = failing_list(&r);
        assert_eq!(
            t.matches("  replay: ").count(),
            FAILING_SHOWN_PER_CHECKER,
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "... and {} more failing at_most_one_receipt (all in failing.txt)",
                10_000 - FAILING_SHOWN_PER_CHECKER
            )),
            "{t}"
        );
        assert!(t.len() < 4_000, "{} bytes", t.len());
        assert_eq!(failing_full(&r).matches("  replay: ").count(), 10_000);
        let md = crate::report::summary_markdown(&r);
        assert!(md.len() < 64 * 1024, "summary.md is {} bytes", md.len());
        let xml = crate::report::junit_xml(&r);
        assert!(xml.len() < 64 * 1024, "junit.xml is {} bytes", xml.len());
    }
}
