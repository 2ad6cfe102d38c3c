//! `tune.html`: one self-contained page (no scripts, no external files). The plots are inline
//! SVG drawn by `plotters` (SVG backend): latency against polls with the Pareto frontier, the
//! latency target and the recommended point; per point, histograms of polls per operation and
//! of completion-detection latency on shared axes so points compare at a glance.

use std::fmt::Write as _;

use plotters::prelude::*;

use super::grid::Knob;
use super::markdown::{COMMON, NOT_COMMON};
use super::{PointResult, TuneReport};

const FONT: &str = "sans-serif";
const PASS_COLOUR: RGBColor = RGBColor(31, 119, 180);
const FAIL_COLOUR: RGBColor = RGBColor(214, 39, 40);
const FRONTIER_COLOUR: RGBColor = RGBColor(44, 160, 44);
const TARGET_COLOUR: RGBColor = RGBColor(255, 127, 14);
const LATENCY_COLOUR: RGBColor = RGBColor(148, 103, 189);

/// Bars per histogram at most.
const BINS: u64 = 24;

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("cannot draw a plot: {e}")
}

/// The page.
pub fn tune_html(r: &TuneReport) -> Result<String, String> {
    let mut out = String::new();
    let title = format!("toolop-sim tune: {}", r.scenario_name);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(&title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", esc(&title));
    let passing = r.points.iter().filter(|p| p.passes()).count();
    let _ = writeln!(
        out,
        "<p class=\"run\">Scenario <code>{}</code>, grid <code>{}</code>{}: {} points &times; {} series, <b>{} at every point</b> \
         (paired comparison), {} of {} points pass every gate, {} jobs, wall time {:.3} s. Poll-rate bound: {} sends in any \
         one-second window (the scenario's own).</p>",
        esc(&r.scenario_file.display().to_string()),
        esc(&r.grid_file.display().to_string()),
        r.grid_description.as_deref().map(|d| format!(" ({})", esc(d))).unwrap_or_default(),
        r.points.len(),
        r.series,
        esc(&r.seed_range()),
        passing,
        r.points.len(),
        r.jobs,
        r.wall_ms as f64 / 1000.0,
        r.qps_bound,
    );
    match r.recommended_point() {
        Some(p) => {
            let _ = writeln!(
                out,
                "<div class=\"verdict ok\"><b>Recommended for p99 completion detection &le; {} ms: {} ({})</b>: {} polls per operation \
                 on average, completion detection p99 {} ms. It passes every gate. Re-check it with the release gate:\
                 <pre>{}</pre></div>",
                r.latency_p99_max_ms,
                esc(&p.id),
                esc(&p.label),
                float(p.metrics.polls_per_op_mean),
                opt(p.metrics.detection_p99_ms),
                esc(&r.recheck_command()),
            );
        }
        None => {
            let _ = writeln!(
                out,
                "<div class=\"verdict bad\"><b>No recommendation</b>: no point passes every gate with p99 completion detection \
                 &le; {} ms.</div>",
                r.latency_p99_max_ms
            );
        }
    }

    out.push_str("<h2>Latency against polls</h2>\n");
    out.push_str(
        "<p>Each point is one setting: mean status reads per operation (x) against the p99 of completion detection, from the \
         server-side terminal time to the executor's acceptance (y). Points that fail a gate are crosses; the line joins \
         the Pareto frontier of the passing points; the ring marks the recommendation, the dashed line the latency target.</p>\n",
    );
    let _ = writeln!(out, "<figure class=\"main\">{}</figure>", scatter_svg(r)?);

    out.push_str("<h2>Settings</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th>Point</th><th class=\"v\">Verdict</th>");
    let varied: Vec<Knob> = Knob::ALL
        .into_iter()
        .filter(|k| r.varied.contains(&k.name()))
        .collect();
    for k in &varied {
        let _ = write!(
            out,
            "<th title=\"{}\">{}</th>",
            esc(k.scenario_field()),
            esc(k.name()).replace('_', "_<wbr>")
        );
    }
    out.push_str(
        "<th>Detect p50 (ms)</th><th>Detect p99 (ms)</th><th>Polls/op</th><th>Polls/op p99</th><th>Busiest 1 s</th>\
         <th>Cancel p99 (ms)</th><th>UNKNOWN p99 (ms)</th><th>UNKNOWN max (ms)</th><th>429s</th></tr></thead>\n<tbody>\n",
    );
    for (i, p) in r.points.iter().enumerate() {
        let class = if r.recommended == Some(i) {
            "rec"
        } else if !p.passes() {
            "fail"
        } else {
            ""
        };
        let mut verdict = if p.passes() {
            "pass".to_string()
        } else {
            format!("fail: {}", esc(&p.failed_gates().join(", ")))
        };
        if r.frontier.contains(&i) {
            verdict.push_str(" &middot; frontier");
        }
        if r.recommended == Some(i) {
            verdict.push_str(" &middot; <b>recommended</b>");
        }
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td class=\"v\">{}</td>",
            esc(&p.id),
            verdict.replace('_', "_<wbr>")
        );
        for &k in &varied {
            let _ = write!(out, "<td class=\"n\">{}</td>", p.setting.get(k));
        }
        let m = &p.metrics;
        let _ = writeln!(
            out,
            "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            opt(m.detection_p50_ms),
            opt(m.detection_p99_ms),
            float(m.polls_per_op_mean),
            opt(m.polls_per_op_p99),
            m.busiest_window_sends,
            opt(m.cancel_p99_ms),
            opt(m.unknown_p99_ms),
            opt(m.unknown_max_ms),
            m.rate_limited,
        );
    }
    out.push_str("</tbody>\n</table></div>\n");

    out.push_str("<h2>Per-setting histograms</h2>\n");
    out.push_str(
        "<p>Per point: polls per operation (left) and completion detection (right), as a share of operations. Axes are \
         shared by every point; the last bar holds everything beyond the axis.</p>\n<div class=\"cards\">\n",
    );
    let polls_axis = Axis::of(r.points.iter().map(|p| p.metrics.polls_per_op_p99), 1);
    let latency_axis = Axis::of(r.points.iter().map(|p| p.metrics.detection_p99_ms), 100);
    for (i, p) in r.points.iter().enumerate() {
        let class = if r.recommended == Some(i) {
            "card rec"
        } else if !p.passes() {
            "card fail"
        } else {
            "card"
        };
        let _ = writeln!(
            out,
            "<div class=\"{class}\"><h3>{} <span>{}</span></h3>{}{}</div>",
            esc(&p.id),
            esc(&p.label),
            histogram_svg(
                &p.polls_per_operation,
                &polls_axis,
                "polls per operation",
                PASS_COLOUR,
                1.0
            )?,
            histogram_svg(
                &p.detection_ms,
                &latency_axis,
                "completion detection (s)",
                LATENCY_COLOUR,
                1000.0
            )?,
        );
    }
    out.push_str("</div>\n");

    out.push_str("<h2>Paired comparison</h2>\n");
    let _ = writeln!(
        out,
        "<p>Every point ran the same {} series ({}), so differences between points come from the settings. Common to every point:</p><ul>",
        r.series,
        esc(&r.seed_range())
    );
    for c in COMMON {
        let _ = writeln!(out, "<li>{}.</li>", md_code(c));
    }
    out.push_str("</ul>\n");
    if r.crn.differing.is_empty() {
        let _ = writeln!(
            out,
            "<p>Checked: the parameters each seed draws are identical at every point ({} point-seed pairs compared).</p>",
            r.crn.compared
        );
    } else {
        let _ = writeln!(
            out,
            "<p class=\"warn\">Warning: {} of {} point-seed pairs drew different parameters; those comparisons are not paired.</p>",
            r.crn.differing.len(),
            r.crn.compared
        );
    }
    out.push_str("<p>Not common:</p><ul>\n");
    for c in NOT_COMMON {
        let _ = writeln!(out, "<li>{}.</li>", md_code(c));
    }
    out.push_str("</ul>\n</body>\n</html>\n");
    Ok(out)
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1180px;padding:0 16px;color:#222;background:#fff}\
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
h3{font-size:1em;margin:.2em 0}h3 span{font-weight:normal;color:#555}\
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em}\
pre{background:#f4f4f4;padding:8px 10px;border-radius:4px;overflow-x:auto;margin:.5em 0 0}\
.verdict{padding:10px 14px;border-radius:6px;margin:1em 0}.ok{background:#e8f5e9;border:1px solid #a5d6a7}\
.bad{background:#ffebee;border:1px solid #ef9a9a}.warn{color:#b71c1c}\
figure{margin:0}.scroll{overflow-x:auto}svg{max-width:100%;height:auto}\
table{border-collapse:collapse;font-size:.85em;width:100%}th,td{border:1px solid #ddd;padding:3px 6px;text-align:left}\
th{background:#f4f4f4}th.v,td.v{min-width:11em}td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.fail td{background:#fff3f3}tr.rec td{background:#eaf7ea}\
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ddd;border-radius:6px;padding:6px;width:560px}\
.card.fail{border-color:#ef9a9a;background:#fffafa}.card.rec{border-color:#66bb6a;box-shadow:0 0 0 2px #a5d6a7}\
.card svg{width:270px}";

/// A shared histogram axis: `bins` bars of `width` units from 0; the last bar also holds
/// everything beyond.
#[derive(Clone, Copy, Debug)]
struct Axis {
    width: u64,
    bins: u64,
}

impl Axis {
    /// Wide enough for the largest p99 of the points (plus a margin), in steps of `unit`.
    fn of(p99s: impl Iterator<Item = Option<u64>>, unit: u64) -> Axis {
        let top = p99s.flatten().max().unwrap_or(1).max(1);
        let top = top + top / 5 + 1;
        let width = top.div_ceil(BINS).max(1).div_ceil(unit) * unit;
        Axis {
            width,
            bins: top.div_ceil(width).clamp(1, BINS),
        }
    }

    fn bin(&self, v: u64) -> u64 {
        (v / self.width).min(self.bins - 1)
    }
}

/// A histogram (share of values per bar) as SVG.
fn histogram_svg(
    values: &[u64],
    axis: &Axis,
    caption: &str,
    colour: RGBColor,
    x_scale: f64,
) -> Result<String, String> {
    let mut counts = vec![0u64; axis.bins as usize];
    for &v in values {
        counts[axis.bin(v) as usize] += 1;
    }
    let n = values.len().max(1) as f64;
    let shares: Vec<f64> = counts.iter().map(|&c| 100.0 * c as f64 / n).collect();
    let top = shares.iter().copied().fold(0.0, f64::max).max(5.0) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (270, 170)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let x_end = (axis.bins * axis.width) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{caption}, n={}", values.len()), (FONT, 13))
            .margin(6)
            .x_label_area_size(22)
            .y_label_area_size(34)
            .build_cartesian_2d(0f64..x_end, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(5)
            .y_labels(4)
            .x_label_formatter(&|v| fmt_axis(*v / x_scale))
            .y_label_formatter(&|v| format!("{v:.0}%"))
            .label_style((FONT, 10))
            .draw()
            .map_err(err)?;
        let w = axis.width as f64;
        chart
            .draw_series(
                shares
                    .iter()
                    .enumerate()
                    .filter(|(_, &s)| s > 0.0)
                    .map(|(b, &s)| {
                        let x0 = b as f64 * w;
                        Rectangle::new([(x0 + w * 0.06, 0.0), (x0 + w * 0.94, s)], colour.filled())
                    }),
            )
            .map_err(err)?;
        if values.is_empty() {
            chart
                .draw_series(std::iter::once(Text::new(
                    "no values",
                    (x_end * 0.35, top * 0.5),
                    (FONT, 12),
                )))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn fmt_axis(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A padded axis range around `values` (and `extra`), never below 0.
fn padded(values: impl Iterator<Item = f64>, extra: Option<f64>) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .chain(extra)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-9 * hi.abs().max(1.0) {
        lo -= (0.1 * lo.abs()).max(1.0);
        hi += (0.1 * hi.abs()).max(1.0);
    }
    let pad = 0.08 * (hi - lo);
    ((lo - pad).max(0.0), hi + pad)
}

/// The main plot: p99 completion detection against mean polls per operation, zoomed on the
/// points, with the legend in a panel of its own so it never hides a point.
fn scatter_svg(r: &TuneReport) -> Result<String, String> {
    let measured: Vec<(usize, &PointResult, f64, f64)> = r
        .points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            Some((
                i,
                p,
                p.metrics.polls_per_op_mean?,
                p.metrics.detection_p99_ms? as f64,
            ))
        })
        .collect();
    let target = r.latency_p99_max_ms as f64;
    let (y_min, y_max) = padded(measured.iter().map(|m| m.3), None);
    // Draw the target line when it is near the points; otherwise say where it is.
    let near = target >= y_min - (y_max - y_min) && target <= y_max + (y_max - y_min);
    let (x_lo, x_hi) = padded(measured.iter().map(|m| m.2), None);
    let (y_lo, y_hi) = padded(measured.iter().map(|m| m.3), near.then_some(target));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = root.split_horizontally(770);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                "p99 completion detection against mean polls per operation",
                (FONT, 20),
            )
            .margin(14)
            .x_label_area_size(46)
            .y_label_area_size(72)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("mean polls per operation")
            .y_desc("p99 completion detection (ms)")
            .x_label_formatter(&|v| fmt_axis(*v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(err)?;
        let target_style = TARGET_COLOUR.stroke_width(2);
        if near {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x_lo, target), (x_hi, target)],
                    10,
                    6,
                    target_style,
                ))
                .map_err(err)?;
        }
        let frontier: Vec<(f64, f64)> = r
            .frontier
            .iter()
            .filter_map(|&i| measured.iter().find(|m| m.0 == i).map(|m| (m.2, m.3)))
            .collect();
        let frontier_style = FRONTIER_COLOUR.stroke_width(3);
        chart
            .draw_series(LineSeries::new(frontier.clone(), frontier_style))
            .map_err(err)?;
        chart
            .draw_series(
                measured
                    .iter()
                    .filter(|m| m.1.passes())
                    .map(|m| Circle::new((m.2, m.3), 6, PASS_COLOUR.filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(
                measured
                    .iter()
                    .filter(|m| !m.1.passes())
                    .map(|m| Cross::new((m.2, m.3), 7, FAIL_COLOUR.stroke_width(3))),
            )
            .map_err(err)?;
        let rec = r
            .recommended
            .and_then(|i| measured.iter().find(|m| m.0 == i));
        if let Some(m) = rec {
            chart
                .draw_series(std::iter::once(Circle::new(
                    (m.2, m.3),
                    13,
                    FRONTIER_COLOUR.stroke_width(3),
                )))
                .map_err(err)?;
        }
        // One label per position: points that measured the same ("p01=p02") share it.
        let mut labels: Vec<(f64, f64, Vec<&str>)> = vec![];
        for m in &measured {
            match labels.iter_mut().find(|l| l.0 == m.2 && l.1 == m.3) {
                Some(l) => l.2.push(&m.1.id),
                None => labels.push((m.2, m.3, vec![&m.1.id])),
            }
        }
        chart
            .draw_series(labels.iter().map(|(x, y, ids)| {
                EmptyElement::at((*x, *y))
                    + Text::new(
                        ids.join("="),
                        (8, -18),
                        (FONT, 13).into_font().color(&RGBColor(60, 60, 60)),
                    )
            }))
            .map_err(err)?;

        // The legend panel.
        let font = (FONT, 14).into_font();
        let mut y = 70;
        let mut entry =
            |label: String, symbol: &dyn Fn(i32) -> Result<(), String>| -> Result<(), String> {
                symbol(y)?;
                side.draw(&Text::new(label, (44, y - 8), font.clone()))
                    .map_err(err)?;
                y += 30;
                Ok(())
            };
        entry("passes every gate".into(), &|y| {
            side.draw(&Circle::new((22, y), 6, PASS_COLOUR.filled()))
                .map_err(err)
        })?;
        if measured.iter().any(|m| !m.1.passes()) {
            entry("fails a gate".into(), &|y| {
                side.draw(&Cross::new((22, y), 7, FAIL_COLOUR.stroke_width(3)))
                    .map_err(err)
            })?;
        }
        entry("Pareto frontier".into(), &|y| {
            side.draw(&PathElement::new(vec![(8, y), (36, y)], frontier_style))
                .map_err(err)
        })?;
        if let Some(m) = rec {
            entry(format!("recommended: {}", m.1.id), &|y| {
                side.draw(&Circle::new((22, y), 11, FRONTIER_COLOUR.stroke_width(3)))
                    .map_err(err)
            })?;
        }
        let where_target = if near {
            String::new()
        } else if target < y_lo {
            " (below the plot)".into()
        } else {
            " (above the plot)".into()
        };
        entry(
            format!("target p99 <= {} ms{where_target}", r.latency_p99_max_ms),
            &|y| {
                side.draw(&plotters::element::DashedPathElement::new(
                    vec![(8, y), (36, y)],
                    7,
                    4,
                    target_style,
                ))
                .map_err(err)
            },
        )?;
        let unmeasured = r.points.len() - measured.len();
        if unmeasured > 0 {
            entry(format!("{unmeasured} point(s) without values"), &|_| Ok(()))?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn opt(v: Option<u64>) -> String {
    v.map_or("n/a".into(), |v| v.to_string())
}

fn float(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}"))
}

/// HTML-escape text.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escaped text with Markdown-style `code` spans turned into `<code>`.
fn md_code(s: &str) -> String {
    esc(s)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_covers_the_largest_p99_in_at_most_bins_bars() {
        let a = Axis::of([Some(10), Some(40), None].into_iter(), 1);
        assert!(a.bins * a.width >= 40 && a.bins <= BINS, "{a:?}");
        assert_eq!(a.bin(10_000), a.bins - 1);
        let l = Axis::of([Some(12_345)].into_iter(), 100);
        assert_eq!(l.width % 100, 0);
        assert!(l.bins * l.width >= 12_345);
    }

    #[test]
    fn escaping() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(md_code("a `x<y` b"), "a <code>x&lt;y</code> b");
    }
}
