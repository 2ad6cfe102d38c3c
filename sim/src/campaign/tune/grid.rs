//! Grid files (TOML): the executor poll settings `tune` varies, each as a list or a range.
//!
//! ```toml
//! description = "poll pacing around the release settings"
//! initial_interval_ms = [250, 500, 1000]                    # a list
//! backoff_multiplier = { from = 1.0, to = 2.0, step = 0.5 } # a linear range, `to` included
//! interval_cap_ms = { from = 5000, to = 20000, factor = 2 } # a geometric range
//! jitter_fraction = 0.2                                     # one value
//! ```
//!
//! Every key but `description` is one [`Knob`]; a knob the grid leaves out keeps the scenario's
//! value. The points are the cartesian product of the axes, the first knob of [`Knob::ALL`]
//! varying slowest. A bad grid is refused with its file, the field and the reason.

use std::fmt;

use serde::Serialize;

use crate::scenario::Scenario;

/// Most values one range may expand to, and most points one grid may have.
pub const MAX_AXIS_VALUES: usize = 1_000;
pub const MAX_POINTS: usize = 10_000;

/// One executor setting a grid can vary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Knob {
    InitialIntervalMs,
    BackoffMultiplier,
    IntervalCapMs,
    JitterFraction,
    HonorServerInterval,
    MaxQps,
    WaitBudgetMs,
    CancelRequeryIntervalMs,
}

/// What values a knob takes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Int { min: u64, max: u64 },
    Float { min: f64, max: f64 },
    Bool,
}

impl Knob {
    pub const ALL: [Knob; 8] = [
        Knob::InitialIntervalMs,
        Knob::BackoffMultiplier,
        Knob::IntervalCapMs,
        Knob::JitterFraction,
        Knob::HonorServerInterval,
        Knob::MaxQps,
        Knob::WaitBudgetMs,
        Knob::CancelRequeryIntervalMs,
    ];

    /// The key in a grid file (and the column in `tune.csv`).
    pub fn name(self) -> &'static str {
        match self {
            Knob::InitialIntervalMs => "initial_interval_ms",
            Knob::BackoffMultiplier => "backoff_multiplier",
            Knob::IntervalCapMs => "interval_cap_ms",
            Knob::JitterFraction => "jitter_fraction",
            Knob::HonorServerInterval => "honor_server_interval",
            Knob::MaxQps => "max_qps",
            Knob::WaitBudgetMs => "wait_budget_ms",
            Knob::CancelRequeryIntervalMs => "cancel_requery_interval_ms",
        }
    }

    /// The field of a scenario file the knob overrides.
    pub fn scenario_field(self) -> &'static str {
        match self {
            Knob::InitialIntervalMs => "executor.core.poll.initial_interval_ms",
            Knob::BackoffMultiplier => "executor.core.poll.backoff_multiplier",
            Knob::IntervalCapMs => "executor.core.poll.interval_cap_ms",
            Knob::JitterFraction => "executor.core.poll.jitter_fraction",
            Knob::HonorServerInterval => "executor.core.poll.honor_server_interval",
            Knob::MaxQps => "executor.max_qps",
            Knob::WaitBudgetMs => "executor.core.wait_budget_ms",
            Knob::CancelRequeryIntervalMs => "executor.core.cancel_requery_interval_ms",
        }
    }

    /// A short name for point labels.
    pub fn short(self) -> &'static str {
        match self {
            Knob::InitialIntervalMs => "initial",
            Knob::BackoffMultiplier => "backoff",
            Knob::IntervalCapMs => "cap",
            Knob::JitterFraction => "jitter",
            Knob::HonorServerInterval => "server_floor",
            Knob::MaxQps => "max_qps",
            Knob::WaitBudgetMs => "budget",
            Knob::CancelRequeryIntervalMs => "requery",
        }
    }

    pub fn from_name(name: &str) -> Option<Knob> {
        Knob::ALL.into_iter().find(|k| k.name() == name)
    }

    fn kind(self) -> Kind {
        const DAY_MS: u64 = 86_400_000;
        match self {
            Knob::InitialIntervalMs | Knob::IntervalCapMs | Knob::CancelRequeryIntervalMs => {
                Kind::Int {
                    min: 1,
                    max: DAY_MS,
                }
            }
            Knob::WaitBudgetMs => Kind::Int {
                min: 1,
                max: 7 * DAY_MS,
            },
            Knob::MaxQps => Kind::Int {
                min: 1,
                max: 1_000_000,
            },
            Knob::BackoffMultiplier => Kind::Float {
                min: 1.0,
                max: 10.0,
            },
            Knob::JitterFraction => Kind::Float { min: 0.0, max: 1.0 },
            Knob::HonorServerInterval => Kind::Bool,
        }
    }
}

/// One value of a knob.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(u64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{}", fmt_float(*v)),
            Value::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// A float as written by a person: at most 6 decimals, no trailing zeros, "1" not "1.0".
pub fn fmt_float(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Every executor setting a grid can vary, as one point runs them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setting {
    pub initial_interval_ms: u64,
    pub backoff_multiplier: f64,
    pub interval_cap_ms: u64,
    pub jitter_fraction: f64,
    pub honor_server_interval: bool,
    pub max_qps: u32,
    pub wait_budget_ms: u64,
    pub cancel_requery_interval_ms: u64,
}

impl Setting {
    /// The scenario's own settings.
    pub fn of(sc: &Scenario) -> Setting {
        let e = &sc.executor;
        let p = &e.core.poll;
        Setting {
            initial_interval_ms: p.initial_interval_ms,
            backoff_multiplier: p.backoff_multiplier,
            interval_cap_ms: p.interval_cap_ms,
            jitter_fraction: p.jitter_fraction,
            honor_server_interval: p.honor_server_interval,
            max_qps: e.max_qps,
            wait_budget_ms: e.core.wait_budget_ms,
            cancel_requery_interval_ms: e.core.cancel_requery_interval_ms,
        }
    }

    pub fn get(&self, k: Knob) -> Value {
        match k {
            Knob::InitialIntervalMs => Value::Int(self.initial_interval_ms),
            Knob::BackoffMultiplier => Value::Float(self.backoff_multiplier),
            Knob::IntervalCapMs => Value::Int(self.interval_cap_ms),
            Knob::JitterFraction => Value::Float(self.jitter_fraction),
            Knob::HonorServerInterval => Value::Bool(self.honor_server_interval),
            Knob::MaxQps => Value::Int(u64::from(self.max_qps)),
            Knob::WaitBudgetMs => Value::Int(self.wait_budget_ms),
            Knob::CancelRequeryIntervalMs => Value::Int(self.cancel_requery_interval_ms),
        }
    }

    /// Set one knob; values were checked against the knob's kind when the grid was parsed.
    fn set(&mut self, k: Knob, v: Value) {
        let int = |v: Value| match v {
            Value::Int(i) => i,
            Value::Float(f) => f as u64,
            Value::Bool(b) => u64::from(b),
        };
        let float = |v: Value| match v {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
            Value::Bool(b) => f64::from(u8::from(b)),
        };
        match k {
            Knob::InitialIntervalMs => self.initial_interval_ms = int(v),
            Knob::BackoffMultiplier => self.backoff_multiplier = float(v),
            Knob::IntervalCapMs => self.interval_cap_ms = int(v),
            Knob::JitterFraction => self.jitter_fraction = float(v),
            Knob::HonorServerInterval => {
                self.honor_server_interval = matches!(v, Value::Bool(true))
            }
            Knob::MaxQps => self.max_qps = u32::try_from(int(v)).unwrap_or(u32::MAX),
            Knob::WaitBudgetMs => self.wait_budget_ms = int(v),
            Knob::CancelRequeryIntervalMs => self.cancel_requery_interval_ms = int(v),
        }
    }

    /// A copy of `sc` running these settings. The gate keeps judging the poll rate against the
    /// scenario's own bound (`gates.max_qps`, or `executor.max_qps` when that is unset): a
    /// point that raises `max_qps` past the release bar must fail, not move the bar.
    pub fn apply(&self, sc: &Scenario) -> Scenario {
        let mut out = sc.clone();
        let bound = sc.gates.max_qps.unwrap_or(sc.executor.max_qps);
        out.gates.max_qps = Some(bound);
        let e = &mut out.executor;
        e.max_qps = self.max_qps;
        e.core.wait_budget_ms = self.wait_budget_ms;
        e.core.cancel_requery_interval_ms = self.cancel_requery_interval_ms;
        let p = &mut e.core.poll;
        p.initial_interval_ms = self.initial_interval_ms;
        p.backoff_multiplier = self.backoff_multiplier;
        p.interval_cap_ms = self.interval_cap_ms;
        p.jitter_fraction = self.jitter_fraction;
        p.honor_server_interval = self.honor_server_interval;
        out
    }

    /// "initial=250 backoff=1.5" over the knobs in `varied`.
    pub fn label(&self, varied: &[Knob]) -> String {
        if varied.is_empty() {
            return "as in the scenario".into();
        }
        varied
            .iter()
            .map(|&k| format!("{}={}", k.short(), self.get(k)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A grid problem: which file, which field, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridError {
    pub file: String,
    pub field: String,
    pub reason: String,
}

impl fmt::Display for GridError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: field `{}`: {}", self.file, self.field, self.reason)
    }
}

impl std::error::Error for GridError {}

/// A parsed grid: the axes it varies, in [`Knob::ALL`] order.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub file: String,
    pub description: Option<String>,
    pub axes: Vec<(Knob, Vec<Value>)>,
}

impl Grid {
    pub fn load(path: &std::path::Path) -> Result<Grid, GridError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| GridError {
            file: file.clone(),
            field: "(file)".into(),
            reason: format!("cannot read: {e}"),
        })?;
        Grid::parse(&file, &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<Grid, GridError> {
        let err = |field: &str, reason: String| GridError {
            file: file.into(),
            field: field.into(),
            reason,
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|sp| text[..sp.start.min(text.len())].matches('\n').count() + 1);
            let field = e
                .span()
                .map(|sp| key_on_line(text, sp.start))
                .unwrap_or_else(|| "(document)".into());
            let reason = match line {
                Some(l) => format!("not valid TOML: {} (line {l})", e.message().trim()),
                None => format!("not valid TOML: {}", e.message().trim()),
            };
            err(&field, reason)
        })?;
        let mut description = None;
        let mut axes = vec![];
        for (key, value) in &table {
            if key == "description" {
                match value {
                    toml::Value::String(s) => description = Some(s.clone()),
                    other => {
                        return Err(err(
                            key,
                            format!("must be a string, not {}", other.type_str()),
                        ))
                    }
                }
                continue;
            }
            let Some(knob) = Knob::from_name(key) else {
                let known: Vec<&str> = Knob::ALL.iter().map(|k| k.name()).collect();
                return Err(err(
                    key,
                    format!(
                        "unknown setting; a grid varies {} (and may have a `description`)",
                        known.join(", ")
                    ),
                ));
            };
            let values = axis(knob, value).map_err(|(field, reason)| err(&field, reason))?;
            axes.push((knob, values));
        }
        axes.sort_by_key(|(k, _)| *k);
        if axes.is_empty() {
            return Err(err(
                "(document)",
                "the grid varies nothing: give at least one setting a list or a range".into(),
            ));
        }
        let mut points: usize = 1;
        for (k, v) in &axes {
            points = points.saturating_mul(v.len());
            if points > MAX_POINTS {
                return Err(err(
                    k.name(),
                    format!("the grid has more than {MAX_POINTS} points; narrow an axis"),
                ));
            }
        }
        Ok(Grid {
            file: file.into(),
            description,
            axes,
        })
    }

    pub fn varied(&self) -> Vec<Knob> {
        self.axes.iter().map(|(k, _)| *k).collect()
    }

    pub fn len(&self) -> usize {
        self.axes.iter().map(|(_, v)| v.len()).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every point of the grid over `base`'s settings, the first axis varying slowest. Every
    /// point must be a valid executor setting: `initial_interval_ms <= interval_cap_ms`.
    pub fn settings(&self, base: &Scenario) -> Result<Vec<Setting>, GridError> {
        let mut out = vec![Setting::of(base)];
        for (k, values) in &self.axes {
            out = out
                .iter()
                .flat_map(|s| {
                    values.iter().map(move |&v| {
                        let mut s = s.clone();
                        s.set(*k, v);
                        s
                    })
                })
                .collect();
        }
        let varied = self.varied();
        for s in &out {
            if s.initial_interval_ms > s.interval_cap_ms {
                let field = if varied.contains(&Knob::IntervalCapMs)
                    || !varied.contains(&Knob::InitialIntervalMs)
                {
                    Knob::IntervalCapMs
                } else {
                    Knob::InitialIntervalMs
                };
                return Err(GridError {
                    file: self.file.clone(),
                    field: field.name().into(),
                    reason: format!(
                        "interval_cap_ms {} is below initial_interval_ms {} in the point {}; every point must be a valid \
                         executor setting (initial_interval_ms <= interval_cap_ms), so narrow the axes",
                        s.interval_cap_ms,
                        s.initial_interval_ms,
                        s.label(&varied)
                    ),
                });
            }
        }
        Ok(out)
    }
}

/// The values of one axis: a list, a range table, or a single value.
fn axis(knob: Knob, value: &toml::Value) -> Result<Vec<Value>, (String, String)> {
    let name = knob.name();
    let values = match value {
        toml::Value::Array(items) => {
            if items.is_empty() {
                return Err((
                    name.into(),
                    "the list is empty; give at least one value".into(),
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, v)| one(knob, v, &format!("{name}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?
        }
        toml::Value::Table(t) => range(knob, t)?,
        v => vec![one(knob, v, name)?],
    };
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err((
                name.into(),
                format!("the value {v} appears twice; every point must differ"),
            ));
        }
    }
    Ok(values)
}

fn one(knob: Knob, v: &toml::Value, field: &str) -> Result<Value, (String, String)> {
    let bad = |why: String| Err((field.to_string(), why));
    match (knob.kind(), v) {
        (Kind::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
        (Kind::Bool, other) => bad(format!("must be true or false, not {}", other.type_str())),
        (Kind::Int { min, max }, toml::Value::Integer(i)) => match u64::try_from(*i) {
            Ok(u) if (min..=max).contains(&u) => Ok(Value::Int(u)),
            _ => bad(format!("{i} is outside [{min}, {max}]")),
        },
        (Kind::Int { .. }, toml::Value::Float(f)) => {
            bad(format!("must be a whole number, not {}", fmt_float(*f)))
        }
        (Kind::Int { .. }, other) => {
            bad(format!("must be a whole number, not {}", other.type_str()))
        }
        (Kind::Float { min, max }, toml::Value::Integer(_) | toml::Value::Float(_)) => {
            let f = v
                .as_float()
                .or_else(|| v.as_integer().map(|i| i as f64))
                .unwrap_or(f64::NAN);
            if f.is_finite() && (min..=max).contains(&f) {
                Ok(Value::Float(f))
            } else {
                bad(format!(
                    "{} is outside [{}, {}]",
                    fmt_float(f),
                    fmt_float(min),
                    fmt_float(max)
                ))
            }
        }
        (Kind::Float { .. }, other) => bad(format!("must be a number, not {}", other.type_str())),
    }
}

/// `{ from, to, step }` (linear) or `{ from, to, factor }` (geometric), `to` included when hit.
fn range(knob: Knob, t: &toml::Table) -> Result<Vec<Value>, (String, String)> {
    let name = knob.name();
    let field = |k: &str| format!("{name}.{k}");
    if knob.kind() == Kind::Bool {
        return Err((
            name.into(),
            "a true/false setting takes a list, e.g. [true, false], not a range".into(),
        ));
    }
    for k in t.keys() {
        if !["from", "to", "step", "factor"].contains(&k.as_str()) {
            return Err((
                field(k),
                "unknown range key; a range is { from, to, step } or { from, to, factor }".into(),
            ));
        }
    }
    let num = |k: &str| -> Result<f64, (String, String)> {
        let v = t.get(k).ok_or_else(|| {
            (
                field(k),
                "missing; a range is { from, to, step } or { from, to, factor }".to_string(),
            )
        })?;
        let f = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
        f.filter(|f| f.is_finite())
            .ok_or_else(|| (field(k), format!("must be a number, not {}", v.type_str())))
    };
    let from = num("from")?;
    let to = num("to")?;
    one(knob, &t["from"], &field("from"))?;
    one(knob, &t["to"], &field("to"))?;
    if to < from {
        return Err((
            field("to"),
            format!("{} is below from = {}", fmt_float(to), fmt_float(from)),
        ));
    }
    let is_int = matches!(knob.kind(), Kind::Int { .. });
    let mut values = vec![];
    let eps = 1e-9 * to.abs().max(1.0);
    match (t.get("step"), t.get("factor")) {
        (Some(_), Some(_)) => {
            return Err((
                name.into(),
                "give either step (linear) or factor (geometric), not both".into(),
            ))
        }
        (None, None) => {
            return Err((
                name.into(),
                "a range needs step (linear) or factor (geometric)".into(),
            ))
        }
        (Some(sv), None) => {
            let step = num("step")?;
            if step <= 0.0 {
                return Err((
                    field("step"),
                    format!("{} must be positive", fmt_float(step)),
                ));
            }
            if is_int && !(sv.is_integer()) {
                return Err((
                    field("step"),
                    "must be a whole number for a setting in whole units".into(),
                ));
            }
            let mut i = 0u64;
            loop {
                let v = from + step * i as f64;
                if v > to + eps {
                    break;
                }
                values.push(v);
                i += 1;
                if values.len() > MAX_AXIS_VALUES {
                    return Err((
                        field("step"),
                        format!("the range expands to more than {MAX_AXIS_VALUES} values"),
                    ));
                }
            }
        }
        (None, Some(_)) => {
            let factor = num("factor")?;
            if factor <= 1.0 {
                return Err((
                    field("factor"),
                    format!("{} must be greater than 1", fmt_float(factor)),
                ));
            }
            if from <= 0.0 {
                return Err((field("from"), "a geometric range starts above 0".into()));
            }
            let mut v = from;
            while v <= to + eps {
                values.push(v);
                v *= factor;
                if values.len() > MAX_AXIS_VALUES {
                    return Err((
                        field("factor"),
                        format!("the range expands to more than {MAX_AXIS_VALUES} values"),
                    ));
                }
            }
        }
    }
    let mut out: Vec<Value> = vec![];
    for v in values {
        let v = if is_int {
            Value::Int(v.round() as u64)
        } else {
            // Clean float noise from repeated addition: 0.1 + 0.2 is 0.3 here.
            Value::Float((v * 1e9).round() / 1e9)
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

/// The key written on the line holding byte `offset` (best effort, for TOML syntax errors).
fn key_on_line(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[start..]
        .find('\n')
        .map(|i| start + i)
        .unwrap_or(text.len());
    let line = text[start..end].trim();
    match line.split('=').next().map(str::trim) {
        Some(k) if line.contains('=') && !k.is_empty() => k.to_string(),
        _ => "(document)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, field: &str, part: &str) {
        let e = Grid::parse("g.toml", text).expect_err("should be refused");
        assert_eq!(e.file, "g.toml");
        assert_eq!(e.field, field, "{e}");
        assert!(e.reason.contains(part), "{e} should mention {part:?}");
    }

    #[test]
    fn lists_ranges_and_single_values_expand() {
        let g = Grid::parse(
            "g.toml",
            "description = \"d\"\ninitial_interval_ms = [250, 500]\nbackoff_multiplier = { from = 1.0, to = 2.0, step = 0.5 }\n\
             interval_cap_ms = { from = 5000, to = 20000, factor = 2 }\njitter_fraction = 0.1\nhonor_server_interval = [true, false]\n",
        )
        .unwrap();
        assert_eq!(g.description.as_deref(), Some("d"));
        let vals = |k| {
            g.axes
                .iter()
                .find(|(x, _)| *x == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(
            vals(Knob::BackoffMultiplier),
            [Value::Float(1.0), Value::Float(1.5), Value::Float(2.0)]
        );
        assert_eq!(
            vals(Knob::IntervalCapMs),
            [Value::Int(5000), Value::Int(10000), Value::Int(20000)]
        );
        assert_eq!(vals(Knob::JitterFraction), [Value::Float(0.1)]);
        assert_eq!(g.len(), 2 * 3 * 3 * 2);
        let r = Grid::parse(
            "g.toml",
            "jitter_fraction = { from = 0.0, to = 0.3, step = 0.1 }",
        )
        .unwrap();
        assert_eq!(
            r.axes[0].1,
            [
                Value::Float(0.0),
                Value::Float(0.1),
                Value::Float(0.2),
                Value::Float(0.3)
            ]
        );
    }

    #[test]
    fn bad_grids_name_file_field_and_reason() {
        check(
            "initial_interval_ms = [250, 0]",
            "initial_interval_ms[1]",
            "outside [1,",
        );
        check(
            "initial_interval_ms = [250.5]",
            "initial_interval_ms[0]",
            "whole number",
        );
        check(
            "backoff_multiplier = [0.5]",
            "backoff_multiplier[0]",
            "outside [1, 10]",
        );
        check(
            "jitter_fraction = [\"a\"]",
            "jitter_fraction[0]",
            "must be a number",
        );
        check(
            "poll_interval_ms = [1]",
            "poll_interval_ms",
            "unknown setting",
        );
        check("max_qps = []", "max_qps", "empty");
        check("max_qps = [20, 20]", "max_qps", "appears twice");
        check(
            "max_qps = { from = 10, to = 5, step = 1 }",
            "max_qps.to",
            "below from",
        );
        check("max_qps = { from = 10, to = 50 }", "max_qps", "needs step");
        check(
            "max_qps = { from = 10, to = 50, step = 0 }",
            "max_qps.step",
            "positive",
        );
        check(
            "max_qps = { from = 10, to = 50, factor = 1 }",
            "max_qps.factor",
            "greater than 1",
        );
        check(
            "max_qps = { from = 10, to = 50, by = 1 }",
            "max_qps.by",
            "unknown range key",
        );
        check(
            "honor_server_interval = { from = 0, to = 1, step = 1 }",
            "honor_server_interval",
            "takes a list",
        );
        check(
            "honor_server_interval = [1]",
            "honor_server_interval[0]",
            "true or false",
        );
        check("description = \"x\"", "(document)", "varies nothing");
        check("max_qps = [1, 2\n", "max_qps", "not valid TOML");
        check(
            "max_qps = { from = 1, to = 1000000, step = 1 }",
            "max_qps.step",
            "more than 1000 values",
        );
    }

    #[test]
    fn every_point_must_be_a_valid_setting() {
        let sc = crate::scenario::Scenario::parse(
            "s.toml",
            "name = \"t\"\n[server]\nprofiles = [\"ts-sdk\"]\n[workload]\ncall_nodes = [1, 2]\n[[workload.tools]]\nname = \"r\"\n\
             task_support = \"required\"\nduration_ms = [100, 200]\n",
        )
        .unwrap();
        let g = Grid::parse(
            "g.toml",
            "initial_interval_ms = [500, 4000]\ninterval_cap_ms = [2000, 8000]",
        )
        .unwrap();
        let e = g.settings(&sc).unwrap_err();
        assert_eq!(e.field, "interval_cap_ms");
        assert!(
            e.reason.contains("2000 is below initial_interval_ms 4000"),
            "{e}"
        );
        let g = Grid::parse(
            "g.toml",
            "initial_interval_ms = [500, 1000]\nmax_qps = [10, 40]",
        )
        .unwrap();
        let s = g.settings(&sc).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s[1].label(&g.varied()), "initial=500 max_qps=40");
        let applied = s[3].apply(&sc);
        assert_eq!(applied.executor.max_qps, 40);
        assert_eq!(
            applied.gates.max_qps,
            Some(20),
            "the bound stays at the scenario's"
        );
        assert_eq!(applied.executor.core.poll.initial_interval_ms, 1000);
    }
}
