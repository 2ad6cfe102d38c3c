//! `junit.xml`: the gate verdicts as one JUnit test suite, for CI test reporters.

use std::fmt::Write as _;

use super::{seed_range, text::failing_list};
use crate::judge::gates::SweepReport;

/// The suite's name.
pub const SUITE: &str = "toolop-sim gate";

/// One `<testsuite name="toolop-sim gate">` with one `<testcase name="protocol/gate">` per gate
/// row; a failing gate carries a `<failure>` whose message and text name the threshold and the
/// measured value. The run's properties and the failing seeds (with replay commands) go in
/// `<properties>` and `<system-out>`. Everything is XML-escaped; characters XML 1.0 cannot carry
/// become U+FFFD.
pub fn junit_xml(r: &SweepReport) -> String {
    let failures = r.gates.iter().filter(|g| !g.pass).count();
    let skipped = r.insufficient();
    let secs = format!("{}.{:03}", r.wall_ms / 1000, r.wall_ms % 1000);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{secs}\">",
        attr(SUITE),
        r.gates.len(),
    );
    out.push_str("  <properties>\n");
    for (name, value) in [
        ("run", r.run.clone()),
        ("seeds", seed_range(r)),
        ("series", r.series.to_string()),
        ("failing_seeds", r.failing.len().to_string()),
        ("coverage_min_hits", r.coverage_min_hits.to_string()),
    ] {
        let _ = writeln!(
            out,
            "    <property name=\"{}\" value=\"{}\"/>",
            attr(name),
            attr(&value)
        );
    }
    out.push_str("  </properties>\n");
    for g in &r.gates {
        let name = format!("{}/{}", g.protocol, g.gate);
        let classname = format!("toolop-sim.gate.{}", g.protocol);
        let open = format!(
            "  <testcase name=\"{}\" classname=\"{}\" time=\"0\"",
            attr(&name),
            attr(&classname)
        );
        if let (true, Some(missing)) = (g.pass, &g.insufficient) {
            // Not decided: a skipped test case, never a passed one.
            let message = format!("INSUFFICIENT: {missing}; measured {}", g.measured);
            let _ = writeln!(out, "{open}>");
            let _ = writeln!(out, "    <skipped message=\"{}\"/>", attr(&message));
            out.push_str("  </testcase>\n");
        } else if g.pass {
            let _ = writeln!(out, "{open}/>");
        } else {
            let message = format!("threshold {}, measured {}", g.threshold, g.measured);
            let body = format!(
                "gate {name} failed: threshold {}, measured {}",
                g.threshold, g.measured
            );
            let _ = writeln!(out, "{open}>");
            let _ = writeln!(
                out,
                "    <failure message=\"{}\" type=\"gate\">{}</failure>",
                attr(&message),
                text(&body)
            );
            out.push_str("  </testcase>\n");
        }
    }
    if !r.failing.is_empty() {
        let _ = writeln!(out, "  <system-out>{}</system-out>", text(&failing_list(r)));
    }
    out.push_str("</testsuite>\n");
    out
}

/// Escapes character data: `&`, `<`, `>` (and quotes, harmlessly).
fn text(s: &str) -> String {
    escape(s, false)
}

/// Escapes an attribute value; tabs and line breaks become character references so attribute
/// normalisation keeps them.
fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, in_attr: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' if in_attr => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            '\t' | '\n' | '\r' => out.push(c),
            c if is_xml_char(c) => out.push(c),
            _ => out.push('\u{FFFD}'),
        }
    }
    out
}

/// XML 1.0 `Char` (tab, line breaks and the ranges below; no other controls, no U+FFFE/U+FFFF).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;

    #[test]
    fn one_testcase_per_gate_and_a_failure_for_the_failing_one() {
        let r = sample_report();
        let xml = junit_xml(&r);
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"toolop-sim gate\" tests=\"3\" failures=\"1\""), "{xml}");
        assert_eq!(xml.matches("<testsuite ").count(), 1);
        assert_eq!(xml.matches("<testcase ").count(), r.gates.len());
        assert_eq!(xml.matches("<failure ").count(), 1);
        assert_eq!(xml.matches("</failure>").count(), 1);
        // The failure sits inside the failing gate's test case.
        let case = xml.find("<testcase name=\"mcp/violations\"").unwrap();
        let failure = xml
            .find("<failure message=\"threshold == 0, measured 1\"")
            .unwrap();
        let close = xml[case..].find("</testcase>").unwrap() + case;
        assert!(case < failure && failure < close, "{xml}");
        assert!(xml.contains(">gate mcp/violations failed: threshold == 0, measured 1</failure>"));
        assert!(xml.trim_end().ends_with("</testsuite>"));
    }

    #[test]
    fn special_characters_are_escaped() {
        let mut r = sample_report();
        r.gates[2].pass = false;
        let xml = junit_xml(&r);
        assert!(
            xml.contains("name=\"all/coverage &quot;cells&quot; &lt;min&gt;\""),
            "{xml}"
        );
        assert!(
            xml.contains("message=\"threshold &gt;= 2 &amp; reachable, measured 5/6\""),
            "{xml}"
        );
        assert!(xml.contains("two receipts &lt;a&amp;b&gt;"), "{xml}");
        // No raw special characters remain: every `&` starts a reference, and angle brackets
        // pair up as tags.
        let body = &xml[xml.find("<testsuite").unwrap()..];
        for (i, _) in body.match_indices('&') {
            let rest = &body[i + 1..];
            assert!(
                ["amp;", "lt;", "gt;", "quot;", "apos;", "#"]
                    .iter()
                    .any(|e| rest.starts_with(e)),
                "{rest}"
            );
        }
        assert_eq!(body.matches('<').count(), body.matches('>').count());
        for tag in body
            .split('<')
            .skip(1)
            .map(|p| p.split_once('>').unwrap().0)
        {
            assert_eq!(tag.matches('"').count() % 2, 0, "{tag}");
        }
        assert_eq!(escape("a\u{1}b\nc", true), "a\u{FFFD}b&#10;c");
        assert_eq!(escape("a\u{1}b\nc", false), "a\u{FFFD}b\nc");
        assert_eq!(escape("'\"", false), "&apos;&quot;");
    }
}
