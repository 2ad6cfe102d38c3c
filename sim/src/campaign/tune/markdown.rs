//! `tune.md`: the recommendation and the command that re-checks it, the Pareto frontier, every
//! point, and what the paired comparison holds common.

use std::fmt::Write as _;

use super::analysis::target_bands;
use super::grid::Knob;
use super::{PointResult, TuneReport};

/// What is common to every point of a tune run and what is not. Shared by `tune.md` and `tune.html`.
pub const COMMON: &[&str] = &[
    "the seed range, and everything `series::draw_params` draws from a seed before the executor runs: \
     the call nodes (tool, duration, outcome, input rounds, submission, cancel and detach times), the \
     server profile, toolop extensions and ttl, the network latency range, the fault profile (which \
     faults are on in the series, and at which rate), the rollback time, and the sub-seeds of the \
     server, network/fault, approval and jitter streams",
    "the scenario's gate thresholds, including the poll-rate bound: a point that raises `max_qps` \
     is still judged against the scenario's own bound",
];

/// See [`COMMON`].
pub const NOT_COMMON: &[&str] = &[
    "individual fault firings only per ask: every firing decision is keyed by `(fault, ask)` \
     (`FaultPlan::fire`), so the k-th ask of a fault fires or not identically at every point; \
     but a setting that polls more asks more often, so the k-th poll of one point may be a \
     different request than the k-th poll of another, and tails (p99, max) stay noisier \
     between points than the seeds alone would suggest",
    "values drawn from the series' shape stream in order of use: network latency of each \
     frame, the delay of a held reply, Retry-After of a 429/503, cut positions, crash points",
    "the executor's jitter draws (seeded per series and incarnation, one per poll): these follow \
     the setting under test",
    "the fake server's task ids and the approval agent's delays and answers, drawn in order of \
     arrival: common as long as requests arrive in the same order",
];

/// The Markdown report.
pub fn tune_markdown(r: &TuneReport) -> String {
    let mut out = String::new();
    let rec = r.recommended_point();
    let title = match rec {
        Some(p) => format!("recommended {} ({})", p.id, text(&p.label)),
        None => "no recommendation".into(),
    };
    let _ = writeln!(
        out,
        "# toolop-sim tune: {}: {title}\n",
        text(&r.scenario_name)
    );
    let passing = r.points.iter().filter(|p| p.passes()).count();
    let _ = writeln!(
        out,
        "Scenario {}, grid {}{}: {} points x {} series, {} at every point (paired), {} of {} points pass every gate, \
         {} jobs, wall time {:.3} s.\n",
        code(&r.scenario_file.display().to_string()),
        code(&r.grid_file.display().to_string()),
        r.grid_description.as_deref().map(|d| format!(" ({})", text(d))).unwrap_or_default(),
        r.points.len(),
        r.series,
        r.seed_range(),
        passing,
        r.points.len(),
        r.jobs,
        r.wall_ms as f64 / 1000.0,
    );
    let _ = writeln!(
        out,
        "Latency is completion detection: from the server-side terminal time of an operation to the executor's \
         acceptance, p99 over every accepted operation of the sweep. Polls are status reads per operation. The \
         poll-rate gate bounds every send in any one-second window at {} (the scenario's bound).\n",
        r.qps_bound
    );

    let detections: Vec<usize> = r.points.iter().map(|p| p.detection_ms.len()).collect();
    if let (Some(lo), Some(hi)) = (detections.iter().min(), detections.iter().max()) {
        let _ = writeln!(
            out,
            "Each point's p99 rests on its slowest 1% of {lo} to {hi} detected completions (about {} values). Under \
             faults the tail follows fault recovery (lost replies, Retry-After, restarts) as much as pacing, and \
             fault firings are not fully paired (see the end): treat p99 differences of a few percent as noise, or \
             run more series.\n",
            hi.div_ceil(100).max(1)
        );
    }
    let mut same: Vec<Vec<&str>> = vec![];
    for (i, p) in r.points.iter().enumerate() {
        if r.points[..i]
            .iter()
            .any(|q| q.traces_digest == p.traces_digest)
        {
            continue;
        }
        let group: Vec<&str> = r.points[i..]
            .iter()
            .filter(|q| q.traces_digest == p.traces_digest)
            .map(|q| q.id.as_str())
            .collect();
        if group.len() > 1 {
            same.push(group);
        }
    }
    if !same.is_empty() {
        let groups: Vec<String> = same.iter().map(|g| g.join(" = ")).collect();
        let _ = writeln!(
            out,
            "Identical traces: {}. Within each group every series ran byte for byte the same, so the settings that \
             differ made no difference on these seeds (e.g. an initial interval below the server's suggested interval \
             with the server floor on, or a cap a fixed interval never reaches).\n",
            groups.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "## Recommendation for `--latency-p99-max-ms {}`\n",
        r.latency_p99_max_ms
    );
    match rec {
        Some(p) => {
            let m = &p.metrics;
            let _ = writeln!(
                out,
                "**{}** ({}): the fewest polls per operation among the points that pass every gate with completion \
                 detection p99 at most {} ms: {} polls/op on average (p99 {}), completion detection p50 {} ms and \
                 p99 {} ms, busiest second {} sends, cancel confirmation p99 {} ms, UNKNOWN reconciliation max {} ms, \
                 {} 429s.\n",
                p.id,
                text(&p.label),
                r.latency_p99_max_ms,
                float(m.polls_per_op_mean),
                opt(m.polls_per_op_p99),
                opt(m.detection_p50_ms),
                opt(m.detection_p99_ms),
                m.busiest_window_sends,
                opt(m.cancel_p99_ms),
                opt(m.unknown_max_ms),
                m.rate_limited,
            );
            out.push_str("| Setting | Scenario field | Value |\n|---|---|--:|\n");
            for k in Knob::ALL {
                let mark = if r.varied.contains(&k.name()) {
                    ""
                } else {
                    " (not varied)"
                };
                let _ = writeln!(
                    out,
                    "| {}{mark} | {} | {} |",
                    code(k.name()),
                    code(k.scenario_field()),
                    p.setting.get(k)
                );
            }
            let _ = writeln!(
                out,
                "\nIt is written as a full scenario file, {}. Re-check it with the release gate on the same seeds \
                 (expect PASS; the traces are the same, digest {}):\n",
                code(&r.recommended_file().display().to_string()),
                code(&p.traces_digest[..16.min(p.traces_digest.len())]),
            );
            let _ = writeln!(out, "```sh\n{}\n```\n", r.recheck_command());
        }
        None => {
            let _ = writeln!(
                out,
                "No point passes every gate with completion detection p99 at most {} ms. {}\n",
                r.latency_p99_max_ms,
                match r.frontier.last() {
                    Some(&i) => format!(
                        "The fastest passing point is {} at p99 {} ms: raise the target or widen the grid.",
                        r.points[i].id,
                        opt(r.points[i].metrics.detection_p99_ms)
                    ),
                    None => "No point passes every gate at all: see the failing gates below.".into(),
                }
            );
        }
    }

    let _ = writeln!(out, "## Pareto frontier\n");
    let _ = writeln!(
        out,
        "The points that pass every gate and that no other passing point beats on one of (completion detection \
         p99, mean polls per operation) without losing on the other, cheapest first. The last column is the range of \
         `--latency-p99-max-ms` for which each is the recommendation.\n"
    );
    if r.frontier.is_empty() {
        out.push_str("Empty: no point passes every gate.\n\n");
    } else {
        out.push_str("| Point | Setting | Polls/op (mean) | Completion detection p99 (ms) | Recommended for targets (ms) |\n|---|---|--:|--:|---|\n");
        let bands = target_bands(&r.points, &r.frontier);
        for (&i, (lo, hi)) in r.frontier.iter().zip(bands) {
            let p = &r.points[i];
            let band = match hi {
                Some(hi) if hi <= lo => "none (ties with a cheaper point)".to_string(),
                Some(hi) => format!("{lo} to {}", hi - 1),
                None => format!("{lo} and above"),
            };
            let mark = if r.recommended == Some(i) { " ⭐" } else { "" };
            let _ = writeln!(
                out,
                "| {}{mark} | {} | {} | {} | {band} |",
                p.id,
                text(&p.label),
                float(p.metrics.polls_per_op_mean),
                opt(p.metrics.detection_p99_ms)
            );
        }
        out.push('\n');
    }

    let _ = writeln!(out, "## All points\n");
    out.push_str(
        "| Point | Setting | Detect p50 | Detect p99 | Polls/op | Polls/op p99 | Busiest 1 s | Cancel p99 | UNKNOWN p99 | UNKNOWN max | 429s | Verdict |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n",
    );
    for (i, p) in r.points.iter().enumerate() {
        let m = &p.metrics;
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.id,
            if r.recommended == Some(i) { " ⭐" } else { "" },
            text(&p.label),
            opt(m.detection_p50_ms),
            opt(m.detection_p99_ms),
            float(m.polls_per_op_mean),
            opt(m.polls_per_op_p99),
            m.busiest_window_sends,
            opt(m.cancel_p99_ms),
            opt(m.unknown_p99_ms),
            opt(m.unknown_max_ms),
            m.rate_limited,
            verdict(p, r.frontier.contains(&i)),
        );
    }
    out.push('\n');

    let failing: Vec<&PointResult> = r.points.iter().filter(|p| !p.passes()).collect();
    let _ = writeln!(out, "## Failing points ({})\n", failing.len());
    if failing.is_empty() {
        out.push_str("Every point passes every gate.\n\n");
    }
    for p in failing {
        let _ = writeln!(
            out,
            "- **{}** ({}), scenario file {}:",
            p.id,
            text(&p.label),
            code(&p.file.display().to_string())
        );
        for g in p.gates.iter().filter(|g| !g.pass) {
            let _ = writeln!(
                out,
                "  - {} measured {}, threshold {}",
                code(&g.gate),
                text(&g.measured),
                text(&g.threshold)
            );
        }
        for f in &p.failing {
            let _ = writeln!(out, "  - seed {}: {}", f.seed, code(&f.replay));
        }
    }
    if !out.ends_with("\n\n") {
        out.push('\n');
    }

    let _ = writeln!(out, "## Paired comparison\n");
    let _ = writeln!(
        out,
        "Every point ran the same {} series, {}, so differences between points come from the settings, not \
         from different workloads. Common to every point:\n",
        r.series,
        r.seed_range()
    );
    for c in COMMON {
        let _ = writeln!(out, "- {c}.");
    }
    if r.crn.differing.is_empty() {
        let _ = writeln!(
            out,
            "\nChecked: the parameters each seed draws are identical at every point ({} point-seed pairs compared \
             with the first point).\n",
            r.crn.compared
        );
    } else {
        let shown: Vec<String> = r
            .crn
            .differing
            .iter()
            .take(10)
            .map(|(p, s)| format!("{p} seed {s}"))
            .collect();
        let _ = writeln!(
            out,
            "\n**Warning**: {} of {} point-seed pairs drew different parameters from the first point ({}); \
             those comparisons are not paired.\n",
            r.crn.differing.len(),
            r.crn.compared,
            shown.join(", ")
        );
    }
    out.push_str("Not common:\n\n");
    for c in NOT_COMMON {
        let _ = writeln!(out, "- {c}.");
    }
    out
}

fn verdict(p: &PointResult, on_frontier: bool) -> String {
    let mut v = if p.passes() {
        "✅ pass".to_string()
    } else {
        format!(
            "❌ {}",
            p.failed_gates()
                .iter()
                .map(|g| code(g))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if on_frontier {
        v.push_str(", frontier");
    }
    v
}

fn opt(v: Option<u64>) -> String {
    v.map_or("n/a".into(), |v| v.to_string())
}

fn float(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}"))
}

/// Markdown-inert text: punctuation that could format is backslash-escaped, line breaks become spaces.
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

/// A code span holding `s` verbatim (`|` escaped, as GFM tables split on it even in code).
fn code(s: &str) -> String {
    let s = s.replace(['\r', '\n'], " ").replace('|', "\\|");
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
