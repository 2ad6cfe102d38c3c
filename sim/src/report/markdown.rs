//! `summary.md`: the sweep in Markdown, sized for a CI job summary (e.g. `$GITHUB_STEP_SUMMARY`).

use std::fmt::Write as _;

use super::{coverage_grids, seed_range, wall_time, Cell};
use crate::judge::gates::SweepReport;

/// The Markdown summary: a title with PASS/FAIL, the run (name, seed range, series count, wall
/// time), the gate table, one coverage matrix per protocol (reachable cells under
/// `coverage_min_hits` in bold with a warning sign, unreachable cells as "·"), and every failing
/// seed with its replay command in a code span.
pub fn summary_markdown(r: &SweepReport) -> String {
    let mut out = String::new();
    let verdict = match (r.passed(), r.insufficient()) {
        (false, _) => "❌ FAIL".to_string(),
        (true, 0) => "✅ PASS".to_string(),
        (true, n) => format!("✅ PASS ({n} gate(s) INSUFFICIENT: too few samples to decide)"),
    };
    let _ = writeln!(out, "# toolop-sim gate: {verdict}\n");
    let rows_note = if r.rows.len() as u64 == r.series {
        String::new()
    } else {
        format!(" ({} rows)", r.rows.len())
    };
    let _ = writeln!(
        out,
        "Run {}: {}, {} series{rows_note}, {} failing seed(s), wall time {}.\n",
        code(&r.run, false),
        seed_range(r),
        r.series,
        r.failing.len(),
        wall_time(r.wall_ms),
    );

    let failed = r.gates.iter().filter(|g| !g.pass).count();
    let _ = writeln!(out, "## Gates ({failed} of {} failing)\n", r.gates.len());
    if r.gates.is_empty() {
        out.push_str("No gates.\n\n");
    } else {
        out.push_str(
            "| Protocol | Gate | Threshold | Measured | Verdict |\n|---|---|---|---|---|\n",
        );
        for g in &r.gates {
            let verdict = match (g.verdict(), &g.insufficient) {
                ("FAIL", _) => "❌ **FAIL**".to_string(),
                (_, Some(missing)) => format!("⚠ INSUFFICIENT: {}", text(missing)),
                _ => "✅ PASS".to_string(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {verdict} |",
                text(&g.protocol),
                code(&g.gate, true),
                text(&g.threshold),
                text(&g.measured),
            );
        }
        out.push('\n');
    }

    let _ = writeln!(out, "## Coverage\n");
    let _ = writeln!(
        out,
        "Fault firings per executor local state. **⚠ n**: reachable cell with fewer than {} hits; \
         off: declared, but its fault was not enabled; ·: cell the catalogue does not declare.\n",
        r.coverage_min_hits
    );
    let grids = coverage_grids(r);
    if grids.is_empty() {
        out.push_str("No coverage recorded.\n\n");
    }
    for grid in &grids {
        let below = grid.below_min();
        let _ = writeln!(
            out,
            "### {} ({below} reachable cell(s) below minimum)\n",
            text(&grid.protocol)
        );
        if grid.states.is_empty() {
            out.push_str("No reachable cells declared.\n\n");
            continue;
        }
        out.push_str("| Fault |");
        for s in &grid.states {
            let _ = write!(out, " {} |", code(s.name(), true));
        }
        out.push_str("\n|---|");
        out.push_str(&"--:|".repeat(grid.states.len()));
        out.push('\n');
        for (fault, cells) in &grid.rows {
            let _ = write!(out, "| {} |", code(&fault.name(), true));
            for cell in cells {
                let cell = match *cell {
                    Cell::Reachable {
                        hits,
                        below_min: true,
                    } => format!("**⚠ {hits}**"),
                    Cell::Reachable {
                        hits,
                        below_min: false,
                    } => hits.to_string(),
                    Cell::Off { hits: 0 } => "off".into(),
                    Cell::Off { hits } => format!("off {hits}"),
                    Cell::Unreachable { hits: 0 } => "·".into(),
                    Cell::Unreachable { hits } => hits.to_string(),
                };
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
        out.push('\n');
    }

    let _ = writeln!(out, "## Failing seeds ({})\n", r.failing.len());
    if r.failing.is_empty() {
        out.push_str("No failing seeds.\n");
    }
    let (shown, hidden) = super::text::capped_failing(r);
    for f in shown {
        let _ = writeln!(
            out,
            "- seed {} of {}: {}",
            f.seed,
            code(&f.scenario_file, false),
            if f.reasons.is_empty() {
                "(no reason given)".to_string()
            } else {
                text(&f.reasons.join("; "))
            },
        );
        let _ = writeln!(out, "  replay: {}", code(&f.replay, false));
    }
    for (group, n) in &hidden {
        let _ = writeln!(
            out,
            "- ... and {n} more failing {} (every one in `failing.txt`)",
            text(group)
        );
    }
    out
}

/// Plain text for Markdown: ASCII punctuation that could format or open HTML is backslash-escaped
/// (which also escapes `|` in table cells), line breaks become spaces.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\r' | '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A code span holding `s` verbatim: fenced with one more backtick than the longest run inside,
/// padded when `s` starts or ends with a backtick. In a table cell `|` is escaped (GFM splits
/// cells on it even inside code spans).
fn code(s: &str, in_table: bool) -> String {
    let s = s.replace(['\r', '\n'], " ");
    let s = if in_table { s.replace('|', "\\|") } else { s };
    if s.is_empty() {
        return String::new();
    }
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;

    #[test]
    fn summary_has_verdict_gates_coverage_and_replay() {
        let r = sample_report();
        let md = summary_markdown(&r);
        assert!(md.starts_with("# toolop-sim gate: ❌ FAIL\n"), "{md}");
        assert!(md.contains("seeds 100..=102, 3 series"), "{md}");
        assert!(md.contains("wall time 12.345 s"), "{md}");
        assert!(
            md.contains("| mcp | `violations` | == 0 | 1 | ❌ **FAIL** |"),
            "{md}"
        );
        assert!(
            md.contains("### aip151 (3 reachable cell(s) below minimum)"),
            "{md}"
        );
        assert!(
            md.contains(
                "| all | `coverage \"cells\" <min>` | \\>= 2 \\& reachable | 5/6 | ✅ PASS |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| Fault | `SUBMITTING` | `WORKING` | `FETCHING_RESULT` |"),
            "{md}"
        );
        assert!(
            md.contains("| `lost_request` | 3 | **⚠ 1** | **⚠ 0** |"),
            "{md}"
        );
        assert!(
            md.contains(&format!(
                "| `{}` | · | 4 | · |",
                crate::series::faults::FaultKind::Poll429.name()
            )),
            "{md}"
        );
        assert!(
            md.contains("### mcp (2 reachable cell(s) below minimum)"),
            "{md}"
        );
        assert!(
            md.contains("`cargo run -p toolop-sim -- run scenarios/smoke.toml --seed 101`"),
            "{md}"
        );
        assert!(md.contains("- seed 101 of `scenarios/smoke.toml`: at\\_most\\_one\\_receipt: two receipts \\<a\\&b\\>"), "{md}");
    }

    #[test]
    fn passing_summary_says_pass() {
        let mut r = sample_report();
        r.gates.iter_mut().for_each(|g| g.pass = true);
        r.failing.clear();
        let md = summary_markdown(&r);
        assert!(md.starts_with("# toolop-sim gate: ✅ PASS\n"));
        assert!(!md.contains("FAIL"));
        assert!(md.contains("No failing seeds."));
    }

    #[test]
    fn code_spans_and_text_escape() {
        assert_eq!(code("a`b", false), "``a`b``");
        assert_eq!(code("`x`", false), "`` `x` ``");
        assert_eq!(code("a|b", true), "`a\\|b`");
        assert_eq!(text("a|b\n*c*"), "a\\|b \\*c\\*");
    }
}
