//! Scenario validation: every field against its row of [`super::fields::FIELDS`] (bounds, pairs,
//! the protocols that can express it, fields decided elsewhere), then the cross-field
//! [`RULES`]. The first problem found is reported with its field.

use std::sync::OnceLock;

use serde_json::Value;

use super::fields::{Field, Unit, FIELDS};
use super::Scenario;
use crate::series::faults::{catalogue, FaultKind};

type Problem = (String, String);

/// A rule between fields, with the sentence the reference prints for it.
pub struct Rule {
    pub doc: &'static str,
    pub check: fn(&Scenario) -> Result<(), Problem>,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> Result<(), Problem> {
    Err((field.into(), problem.into()))
}

/// Whether `name` can be one path segment of a report folder: letters, digits, `.`, `_`, `-`,
/// 1 to 64 characters, not `.` or `..`, not starting with `-` or `.`.
pub fn is_safe_segment(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.starts_with(['.', '-'])
}

/// The sentence every refused name gets.
pub const SAFE_SEGMENT: &str =
    "must be one path segment of letters, digits, `.`, `_` and `-` (at most 64, not starting with `.` or `-`)";

/// The cross-field rules, in the order they are checked.
pub const RULES: &[Rule] = &[
    Rule {
        doc: "`name` is one path segment (it names the report folder): letters, digits, `.`, `_`, `-`, at most 64 characters, not starting with `.` or `-`.",
        check: |s| {
            if is_safe_segment(&s.name) {
                Ok(())
            } else {
                bad("name", format!("{:?} {SAFE_SEGMENT}", s.name))
            }
        },
    },
    Rule {
        doc: "`successor` is another protocol than `protocol`.",
        check: |s| match s.successor {
            Some(p) if p == s.protocol => bad(
                "successor",
                format!("{p} is the primary protocol already; a successor must be another one"),
            ),
            _ => Ok(()),
        },
    },
    Rule {
        doc: "`retire_primary_at_ms` needs a `successor` (retiring the only adapter leaves nothing to run new work) and is before `limits.sim_time_ms`.",
        check: |s| match s.retire_primary_at_ms {
            Some(_) if s.successor.is_none() => bad(
                "retire_primary_at_ms",
                "retiring the only adapter leaves nothing to run new work",
            ),
            Some(t) if t >= s.limits.sim_time_ms => bad(
                "retire_primary_at_ms",
                format!("{t} is not before limits.sim_time_ms ({})", s.limits.sim_time_ms),
            ),
            _ => Ok(()),
        },
    },
    Rule {
        doc: "`aip.submit_path` and `aip.operation_path` are absolute path templates containing `{tool}` and `{name}`.",
        check: |s| {
            for (field, t, var) in [
                ("aip.submit_path", &s.aip.submit_path, "{tool}"),
                ("aip.operation_path", &s.aip.operation_path, "{name}"),
            ] {
                if !t.starts_with('/') || !t.contains(var) {
                    return bad(
                        field,
                        format!("`{t}` must be an absolute path template containing {var}"),
                    );
                }
            }
            Ok(())
        },
    },
    Rule {
        doc: "`server.profiles` is not empty and each is a profile of `protocol`.",
        check: |s| {
            if s.server.profiles.is_empty() {
                return bad("server.profiles", "needs at least one profile");
            }
            match s
                .server
                .profiles
                .iter()
                .find(|p| !s.protocol.profiles().contains(p))
            {
                Some(p) => bad(
                    "server.profiles",
                    format!(
                        "{} is not a profile of {}; its profiles: {}",
                        p.name(),
                        s.protocol,
                        super::fields::profile_names(s.protocol).join(", ")
                    ),
                ),
                None => Ok(()),
            }
        },
    },
    Rule {
        doc: "`workload.tools` has at least one tool; tool names are unique and not empty.",
        check: |s| {
            if s.workload.tools.is_empty() {
                return bad("workload.tools", "needs at least one tool");
            }
            for (i, t) in s.workload.tools.iter().enumerate() {
                if t.name.is_empty() {
                    return bad(format!("workload.tools[{i}].name"), "is empty");
                }
                if s.workload.tools[..i].iter().any(|o| o.name == t.name) {
                    return bad(
                        format!("workload.tools[{i}].name"),
                        format!("{} is listed twice", t.name),
                    );
                }
            }
            Ok(())
        },
    },
    Rule {
        doc: "`fail_rate + tool_error_rate` of a tool is at most 1.",
        check: |s| {
            for (i, t) in s.workload.tools.iter().enumerate() {
                if t.fail_rate + t.tool_error_rate > 1.0 {
                    return bad(
                        format!("workload.tools[{i}].fail_rate"),
                        "fail_rate + tool_error_rate exceeds 1",
                    );
                }
            }
            Ok(())
        },
    },
    Rule {
        doc: "`workload.start_spread_ms` is less than `limits.sim_time_ms` (every call node is submitted before the series ends).",
        check: |s| {
            if s.workload.start_spread_ms < s.limits.sim_time_ms {
                Ok(())
            } else {
                bad(
                    "workload.start_spread_ms",
                    format!(
                        "{} is not less than limits.sim_time_ms ({}): call nodes would be submitted after the series ends",
                        s.workload.start_spread_ms, s.limits.sim_time_ms
                    ),
                )
            }
        },
    },
    Rule {
        doc: "`workload.caller.cancel_by_request_rate` above 0 needs `executor.cancel_request_check_ms` above 0 (with 0 a running executor never looks for requests).",
        check: |s| {
            if s.workload.caller.cancel_by_request_rate > 0.0 && s.executor.cancel_request_check_ms == 0 {
                bad(
                    "workload.caller.cancel_by_request_rate",
                    "needs executor.cancel_request_check_ms above 0: with 0 a running executor never looks for cancel requests, so an operator's request waits for the next restart",
                )
            } else {
                Ok(())
            }
        },
    },
    Rule {
        doc: "`executor.core.poll.initial_interval_ms` is at most `interval_cap_ms`.",
        check: |s| {
            let p = &s.executor.core.poll;
            if p.initial_interval_ms <= p.interval_cap_ms {
                Ok(())
            } else {
                bad(
                    "executor.core.poll",
                    format!(
                        "initial_interval_ms {} exceeds interval_cap_ms {}",
                        p.initial_interval_ms, p.interval_cap_ms
                    ),
                )
            }
        },
    },
    Rule {
        doc: "`executor.launch.new_adapter`, when set, is the successor's adapter; `long_tools` and `shadow_tools` name tools of the workload.",
        check: |s| {
            let l = &s.executor.launch;
            if let Some(a) = l.new_adapter {
                if s.successor.map(|p| p.adapter_id()) != Some(a) {
                    return bad(
                        "executor.launch.new_adapter",
                        format!(
                            "{} is not the successor's adapter (successor: {})",
                            a.name(),
                            s.successor.map_or("none", |p| p.name())
                        ),
                    );
                }
            }
            for (field, names) in [
                ("executor.launch.long_tools", &l.long_tools),
                ("executor.launch.shadow_tools", &l.shadow_tools),
            ] {
                if let Some(n) = names
                    .iter()
                    .find(|n| !s.workload.tools.iter().any(|t| &t.name == *n))
                {
                    return bad(field, format!("{n} is not a tool of the workload"));
                }
            }
            Ok(())
        },
    },
    Rule {
        doc: "Every key of `faults.rates` is a fault name, and every lane's protocol can express it (see the fault table).",
        check: |s| {
            for name in s.faults.rates.keys() {
                let field = format!("faults.rates.{name}");
                let Some(fault) = FaultKind::from_name(name) else {
                    let known: Vec<String> = FaultKind::ALL.iter().map(|f| f.name()).collect();
                    return bad(
                        field,
                        format!("unknown fault `{name}`; known: {}", known.join(", ")),
                    );
                };
                for p in s.lanes() {
                    if !catalogue::expresses(p, fault) {
                        let can: Vec<String> =
                            catalogue::row(p).iter().map(|c| c.fault.name()).collect();
                        return bad(
                            field,
                            format!(
                                "{p} cannot express {name}; it can express: {}",
                                can.join(", ")
                            ),
                        );
                    }
                }
            }
            Ok(())
        },
    },
];

/// Validate a parsed scenario: the field table, then the rules.
pub(super) fn validate(sc: &Scenario) -> Result<(), Problem> {
    let doc = serde_json::to_value(sc).map_err(|e| ("(document)".to_string(), e.to_string()))?;
    // Bounds first, then the rules between fields, then what the lanes cannot express: a
    // setting to remove is the last thing worth saying about a file.
    for f in FIELDS {
        for (at, v) in values_at(&doc, f.path) {
            check_bounds(f, &at, v)?;
        }
    }
    for r in RULES {
        (r.check)(sc)?;
    }
    for f in FIELDS {
        for (at, v) in values_at(&doc, f.path) {
            check_expressible(sc, f, &at, v)?;
        }
    }
    Ok(())
}

/// A field decided elsewhere, or one no lane's protocol can express, stays at its default.
fn check_expressible(sc: &Scenario, f: &Field, at: &str, v: &Value) -> Result<(), Problem> {
    if default_of(f.path).is_some_and(|d| d == v) {
        return Ok(());
    }
    if let Some(why) = f.never {
        return bad(at, format!("cannot be set in a scenario: {why}"));
    }
    if !f.only.is_empty() && !sc.lanes().iter().any(|p| f.only.contains(p)) {
        let lanes: Vec<&str> = sc.lanes().iter().map(|p| p.name()).collect();
        let can: Vec<&str> = f.only.iter().map(|p| p.name()).collect();
        return bad(
            at,
            format!(
                "{} cannot express this setting (only {} can); remove it",
                lanes.join(" and "),
                can.join(", ")
            ),
        );
    }
    Ok(())
}

fn check_bounds(f: &Field, at: &str, v: &Value) -> Result<(), Problem> {
    if v.is_null() || !f.unit.is_number() {
        return Ok(());
    }
    let (lo, hi) = f.bounds;
    let in_bounds = |x: &Value| x.as_f64().is_some_and(|n| n >= lo && n <= hi);
    let bounds = describe_bounds(f);
    if f.pair {
        let pair = v.as_array().filter(|a| a.len() == 2);
        let Some(pair) = pair else {
            return bad(at, "must be a [min, max] pair");
        };
        if let Some(x) = pair.iter().find(|x| !in_bounds(x)) {
            return bad(at, format!("{x} is outside {bounds}"));
        }
        if pair[0].as_f64() > pair[1].as_f64() {
            return bad(
                at,
                format!(
                    "range [{}, {}] has min > max; need min <= max",
                    pair[0], pair[1]
                ),
            );
        }
        return Ok(());
    }
    if in_bounds(v) {
        Ok(())
    } else {
        let what = if matches!(f.unit, Unit::Rate) {
            "rate "
        } else {
            ""
        };
        bad(at, format!("{what}{v} is outside {bounds}"))
    }
}

/// "[0, 1]", "[1, 604800000] ms", "[0, ∞)".
pub fn describe_bounds(f: &Field) -> String {
    let (lo, hi) = f.bounds;
    let num = |x: f64| {
        if x.fract() == 0.0 {
            format!("{}", x as u64)
        } else {
            format!("{x}")
        }
    };
    let unit = match f.unit {
        Unit::Ms => " ms",
        Unit::PerSecond => " requests/s",
        Unit::Percent => " %",
        _ => "",
    };
    if hi.is_infinite() {
        format!("[{}, no maximum]{unit}", num(lo))
    } else {
        format!("[{}, {}]{unit}", num(lo), num(hi))
    }
}

/// The values at a table path in a scenario's JSON form, each with its concrete path.
pub fn values_at<'a>(doc: &'a Value, path: &str) -> Vec<(String, &'a Value)> {
    let mut out = vec![(String::new(), doc)];
    for seg in path.split('.') {
        let mut next = vec![];
        for (at, v) in out {
            let join = |k: &str| {
                if at.is_empty() {
                    k.to_string()
                } else {
                    format!("{at}.{k}")
                }
            };
            if seg == "<fault>" {
                if let Some(m) = v.as_object() {
                    next.extend(m.iter().map(|(k, x)| (join(k), x)));
                }
            } else if let Some(key) = seg.strip_suffix("[]") {
                if let Some(items) = v.get(key).and_then(Value::as_array) {
                    next.extend(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, x)| (format!("{}[{i}]", join(key)), x)),
                    );
                }
            } else if let Some(x) = v.get(seg) {
                next.push((join(seg), x));
            }
        }
        out = next;
    }
    out
}

/// The minimal scenario: only what has no default. Its JSON form gives every default.
pub const MINIMAL: &str = r#"name = "minimal"
[server]
profiles = ["spec-strict"]
[workload]
call_nodes = [1, 1]
[[workload.tools]]
name = "build_report"
duration_ms = [0, 0]
"#;

fn defaults() -> &'static Value {
    static DEFAULTS: OnceLock<Value> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        let sc: Scenario = toml::from_str(MINIMAL).expect("the minimal scenario parses");
        serde_json::to_value(&sc).expect("a scenario serialises")
    })
}

/// The default of a field (`None` for fields without one: required, or keys of a map).
pub fn default_of(path: &str) -> Option<&'static Value> {
    match path {
        "name" | "server.profiles" | "workload.call_nodes" => None,
        "workload.tools[].name" | "workload.tools[].duration_ms" => None,
        _ => values_at(defaults(), path).first().map(|(_, v)| *v),
    }
}
