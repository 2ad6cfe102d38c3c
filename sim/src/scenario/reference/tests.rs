use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::*;
use crate::scenario::fields::normalise;
use crate::scenario::validate::MINIMAL;
use crate::scenario::Scenario;

/// A TOML literal as JSON.
fn literal(ex: &str) -> Value {
    let t: toml::Table = toml::from_str(&format!("v = {ex}")).expect("example is TOML");
    serde_json::to_value(&t["v"]).expect("TOML value as JSON")
}

/// Put `v` at a table path (`tools[]` = the first element, `<fault>` = `lost_request`).
fn set(doc: &mut Value, path: &str, v: Value) {
    let segs: Vec<&str> = path.split('.').collect();
    let mut at = doc;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let key = if *seg == "<fault>" {
            "lost_request"
        } else {
            seg.trim_end_matches("[]")
        };
        let map = at.as_object_mut().expect("a table");
        if last {
            map.insert(key.into(), v);
            return;
        }
        if seg.ends_with("[]") {
            let arr = map
                .entry(key)
                .or_insert_with(|| Value::Array(vec![Value::Object(Map::new())]));
            at = &mut arr.as_array_mut().expect("an array")[0];
        } else {
            at = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
        }
    }
}

/// The minimal scenario with a successor, so every protocol-specific field can load.
fn base() -> Value {
    let t: toml::Table = toml::from_str(MINIMAL).unwrap();
    let mut doc = serde_json::to_value(t).unwrap();
    set(&mut doc, "successor", literal("\"aip-151\""));
    doc
}

fn parse(doc: &Value) -> Result<Scenario, crate::scenario::ScenarioError> {
    let text = toml::to_string(doc).expect("JSON tree as TOML");
    Scenario::parse("reference.toml", &text)
}

/// Every field set to its example, at once.
fn full() -> Value {
    let mut doc = base();
    for f in FIELDS.iter().filter(|f| f.never.is_none()) {
        set(&mut doc, f.path, literal(f.example));
    }
    doc
}

#[test]
fn every_field_in_the_reference_loads_alone_and_together() {
    for f in FIELDS {
        assert!(!f.example.is_empty(), "{}: no example", f.path);
        let mut doc = base();
        set(&mut doc, f.path, literal(f.example));
        match (f.never, parse(&doc)) {
            (None, Ok(_)) => {}
            (None, Err(e)) => panic!("{}: the example {} does not load: {e}", f.path, f.example),
            (Some(_), Ok(_)) => panic!("{}: a field decided elsewhere was accepted", f.path),
            (Some(why), Err(e)) => {
                assert_eq!(normalise(&e.field), f.path, "{e}");
                assert!(e.problem.contains(why), "{e}");
            }
        }
    }
    parse(&full()).unwrap_or_else(|e| panic!("every example together: {e}"));
}

/// Leaf key paths of a scenario's JSON form (arrays of scalars are leaves).
fn leaves(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                leaves(x, &join(k), out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for x in items {
                leaves(x, &format!("{at}[]"), out);
            }
        }
        _ => {
            out.insert(normalise(at));
        }
    }
}

#[test]
fn the_table_lists_every_field_a_scenario_has_and_no_other() {
    let sc = parse(&full()).unwrap();
    let mut found = BTreeSet::new();
    leaves(&serde_json::to_value(&sc).unwrap(), "", &mut found);
    let listed: BTreeSet<String> = FIELDS.iter().map(|f| f.path.to_string()).collect();
    let missing: Vec<&String> = found.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "fields a scenario loads that the reference does not list (add them to scenario/fields.rs): {missing:?}"
    );
    let stale: Vec<&String> = listed.difference(&found).collect();
    assert!(stale.is_empty(), "listed fields no scenario has: {stale:?}");
}

#[test]
fn the_committed_reference_is_the_rendered_one() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(PATH);
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        committed == render(),
        "{} is out of date: run `make docs` and commit it",
        file.display()
    );
}

#[test]
fn protocol_settings_the_lanes_cannot_express_are_refused() {
    let aip = |extra: &str| {
        format!(
            "name = \"a\"\nprotocol = \"aip-151\"\n[server]\nprofiles = [\"cancel-done-ok\"]\n\
             [workload]\ncall_nodes = [1, 2]\n[[workload.tools]]\nname = \"t\"\nduration_ms = [1, 2]\n{extra}"
        )
    };
    Scenario::parse("a.toml", &aip("")).unwrap();
    for (extra, field) in [
        ("input_rate = 0.3\n", "workload.tools[0].input_rate"),
        (
            "task_support = \"required\"\n",
            "workload.tools[0].task_support",
        ),
        (
            "sync_upper_bound_ms = 100\n",
            "workload.tools[0].sync_upper_bound_ms",
        ),
        ("[approval]\nsilent_rate = 0.1\n", "approval.silent_rate"),
        ("[approval]\ndelay_ms = [1, 2]\n", "approval.delay_ms"),
        (
            "[executor]\nno_task_support = \"run_sync\"\n",
            "executor.no_task_support",
        ),
        (
            "[executor.core]\napproval_timeout_ms = 1000\n",
            "executor.core.approval_timeout_ms",
        ),
        (
            "[faults.rates]\napproval_replay = 0.1\n",
            "faults.rates.approval_replay",
        ),
        (
            "[faults.rates]\ninput_required_replay = 0.1\n",
            "faults.rates.input_required_replay",
        ),
        (
            "[faults.rates]\nreply_to_other_exchange = 0.1\n",
            "faults.rates.reply_to_other_exchange",
        ),
    ] {
        let text = aip(extra);
        let e = Scenario::parse("a.toml", &text).expect_err(extra);
        assert_eq!(e.field, field, "{e}");
        assert!(e.file == "a.toml" && !e.problem.is_empty(), "{e}");
    }
    // The same settings on an MCP scenario load; and an AIP lane beside an MCP one is fine too.
    let mcp = aip("input_rate = 0.3\n")
        .replace("aip-151", "mcp-2025-11-25")
        .replace("cancel-done-ok", "spec-strict");
    Scenario::parse("m.toml", &mcp).unwrap();
    let mcp = |extra: &str| {
        "name = \"m\"\n[server]\nprofiles = [\"spec-strict\"]\n[workload]\ncall_nodes = [1, 2]\n\
         [[workload.tools]]\nname = \"t\"\nduration_ms = [1, 2]\n"
            .to_string()
            + extra
    };
    let e = Scenario::parse("m.toml", &mcp("[aip]\npreempt_rate = 0.1\n")).unwrap_err();
    assert_eq!(e.field, "aip.preempt_rate", "{e}");
    Scenario::parse(
        "m.toml",
        &mcp("[aip]\npreempt_rate = 0.1\n")
            .replace("name = \"m\"", "name = \"m\"\nsuccessor = \"aip-151\""),
    )
    .unwrap();
}
