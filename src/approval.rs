//! The approval gate's answers, checked before anything is sent: an accepted answer must
//! conform to the schema the server asked for.
//!
//! MCP form elicitation asks with a *restricted* JSON Schema (schema `ElicitRequestFormParams`:
//! "only top-level properties are allowed, without nesting"): an object whose properties are
//! primitive definitions (string with length and `format`, number/integer with bounds, boolean,
//! single-select enums as `enum` or `oneOf` of `const`s, multi-select enums as an array of such
//! strings). An answer is checked in two steps:
//! 1. the requested schema must be of that restricted form, or no answer can be vouched for
//!    (a nested object, a `$ref`, an unknown property type: refused, with the reason);
//! 2. the content is validated against it with the `jsonschema` crate (draft 2020-12, the MCP
//!    default dialect, `format` asserted), which knows `format: email`, `uri`, `date`,
//!    `date-time` and every keyword of the subset.
//!
//! Declining and cancelling carry no content and always pass. Pure functions: the runner calls
//! them when the gate's answer arrives; the core never sees an answer that failed. (The compiled
//! validators are kept, by schema, in a small process-wide cache: compiling one cost more than
//! every other step of an answer's check together.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde_json::{Map, Value};

use crate::protocol::{type_name, ApprovalReply};

/// At most this many validation errors are named in one refusal.
const ERRORS_SHOWN_MAX: usize = 5;

/// Whether `reply` may be sent as the answer to a request for `requested_schema`; the error
/// says why not, in words the gate's operator can act on.
pub fn check_answer(requested_schema: &Value, reply: &ApprovalReply) -> Result<(), String> {
    let content = match reply {
        ApprovalReply::Accept { content } => content,
        ApprovalReply::Decline | ApprovalReply::Cancel => return Ok(()),
    };
    let schema = restricted_schema(requested_schema)
        .map_err(|why| format!("the requested schema is not an MCP elicitation schema ({why}): no accepted answer can be validated"))?;
    if !content.is_object() {
        return Err(format!(
            "an accepted answer's content must be an object, not {}",
            type_name(content)
        ));
    }
    let validator = compiled(schema)?;
    let errors: Vec<String> = validator
        .iter_errors(content)
        .take(ERRORS_SHOWN_MAX)
        .map(|e| {
            let at = e.instance_path.to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the answer does not conform to the requested schema: {}",
            errors.join("; ")
        ))
    }
}

/// Compiled schemas kept at most: a server asks with a schema per tool and question, so a
/// process meets a handful; past the limit the cache starts again rather than grow.
const VALIDATORS_KEPT_MAX: usize = 64;

/// The validator of `schema`, compiled once per process. Keyed by the schema's JSON text:
/// `Map` is ordered, so equal schemas have one text.
fn compiled(schema: Map<String, Value>) -> Result<Arc<Validator>, String> {
    static KEPT: Mutex<BTreeMap<String, Arc<Validator>>> = Mutex::new(BTreeMap::new());
    let schema = Value::Object(schema);
    let key = schema.to_string();
    // A poisoned lock only means another thread panicked mid-insert; the map is still whole.
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(v) = kept.get(&key) {
        return Ok(Arc::clone(v));
    }
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .map(Arc::new)
        .map_err(|e| format!("the requested schema does not compile: {e}"))?;
    if kept.len() >= VALIDATORS_KEPT_MAX {
        kept.clear();
    }
    kept.insert(key, Arc::clone(&validator));
    Ok(validator)
}

/// The requested schema, checked to be of the restricted elicitation form, without `$schema`
/// (the dialect is fixed: a server's dialect URL must not make the validator fetch or refuse).
fn restricted_schema(schema: &Value) -> Result<Map<String, Value>, String> {
    let Some(obj) = schema.as_object() else {
        return Err(format!("it is {}, not an object", type_name(schema)));
    };
    if obj.get("type") != Some(&Value::from("object")) {
        return Err("its \"type\" is not \"object\"".into());
    }
    let Some(props) = obj.get("properties").and_then(Value::as_object) else {
        return Err("it has no \"properties\" object".into());
    };
    if obj.contains_key("$ref") || obj.contains_key("$defs") || obj.contains_key("definitions") {
        return Err("it uses references".into());
    }
    for (name, prop) in props {
        primitive(prop).map_err(|why| format!("property {name:?}: {why}"))?;
    }
    match obj.get("required") {
        None => {}
        Some(Value::Array(names)) if names.iter().all(Value::is_string) => {}
        Some(_) => return Err("\"required\" is not an array of strings".into()),
    }
    let mut out = obj.clone();
    out.remove("$schema");
    Ok(out)
}

/// One property definition of the subset (`PrimitiveSchemaDefinition`).
fn primitive(prop: &Value) -> Result<(), String> {
    let Some(p) = prop.as_object() else {
        return Err(format!(
            "its definition is {}, not an object",
            type_name(prop)
        ));
    };
    if p.contains_key("$ref") || p.contains_key("properties") {
        return Err("nested definitions are not allowed".into());
    }
    match p.get("type").and_then(Value::as_str) {
        Some("string" | "number" | "integer" | "boolean") => Ok(()),
        // Multi-select enums: an array of strings drawn from an enum (or titled consts).
        Some("array") => match p.get("items").and_then(Value::as_object) {
            Some(items) if items.contains_key("enum") || items.contains_key("anyOf") => Ok(()),
            _ => Err("an array property must be a multi-select enum (\"items\" with \"enum\" or \"anyOf\")".into()),
        },
        Some(other) => Err(format!("type {other:?} is not a primitive")),
        None => Err("it has no string \"type\"".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn accept(content: Value) -> ApprovalReply {
        ApprovalReply::Accept { content }
    }

    /// The schemas real servers sent (transcripts: TS/Python `needs_input`, server-everything,
    /// rmcp) and the ones the spec's subset allows.
    fn ok_schema() -> Value {
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
    }

    /// A schema compiles once per process; another schema gets its own validator, and a
    /// kept validator still judges (the cache must never answer for another schema).
    #[test]
    fn a_schema_compiles_once_and_only_for_itself() {
        let only = |s: Value| restricted_schema(&s).unwrap();
        let narrow =
            json!({"type": "object", "properties": {"k": {"type": "integer", "maximum": 3}}});
        let wide =
            json!({"type": "object", "properties": {"k": {"type": "integer", "maximum": 30}}});
        let first = compiled(only(narrow.clone())).unwrap();
        assert!(Arc::ptr_eq(
            &first,
            &compiled(only(narrow.clone())).unwrap()
        ));
        assert!(!Arc::ptr_eq(&first, &compiled(only(wide.clone())).unwrap()));
        for _ in 0..2 {
            assert!(check_answer(&narrow, &accept(json!({"k": 9}))).is_err());
            assert_eq!(check_answer(&wide, &accept(json!({"k": 9}))), Ok(()));
        }
    }

    #[test]
    fn conforming_answers_pass_and_declines_always_do() {
        assert_eq!(
            check_answer(&ok_schema(), &accept(json!({"ok": true}))),
            Ok(())
        );
        for reply in [ApprovalReply::Decline, ApprovalReply::Cancel] {
            assert_eq!(
                check_answer(
                    &json!({"type": "object", "properties": {"n": {"type": "object"}}}),
                    &reply
                ),
                Ok(())
            );
            assert_eq!(check_answer(&Value::Null, &reply), Ok(()));
        }
        let rich = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email", "title": "Email"},
                "when": {"type": "string", "format": "date"},
                "n": {"type": "integer", "minimum": 1, "maximum": 9},
                "x": {"type": "number"},
                "color": {"type": "string", "enum": ["red", "green"]},
                "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2}
            },
            "required": ["email", "n"]
        });
        let good = json!({"email": "ada@example.org", "when": "2026-12-03", "n": 3, "x": 2.5, "color": "red", "size": "l", "tags": ["a"]});
        assert_eq!(check_answer(&rich, &accept(good)), Ok(()));
        for (bad, what) in [
            (json!({"n": 3}), "email"),
            (json!({"email": "not an address", "n": 3}), "email"),
            (json!({"email": "a@b.org", "n": 10}), "/n"),
            (json!({"email": "a@b.org", "n": 1.5}), "/n"),
            (
                json!({"email": "a@b.org", "n": 1, "when": "yesterday"}),
                "/when",
            ),
            (
                json!({"email": "a@b.org", "n": 1, "color": "blue"}),
                "/color",
            ),
            (json!({"email": "a@b.org", "n": 1, "size": "m"}), "/size"),
            (
                json!({"email": "a@b.org", "n": 1, "tags": ["a", "z"]}),
                "/tags",
            ),
        ] {
            let err = check_answer(&rich, &accept(bad.clone())).expect_err(&bad.to_string());
            assert!(
                err.contains("does not conform") && err.contains(what),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn wrong_answers_are_refused_with_the_reason() {
        let err = check_answer(&ok_schema(), &accept(json!({}))).expect_err("missing ok");
        assert!(err.contains("\"ok\" is a required property"), "{err}");
        let err = check_answer(&ok_schema(), &accept(json!({"ok": "yes"}))).expect_err("string");
        assert!(err.contains("/ok") && err.contains("boolean"), "{err}");
        let err = check_answer(&ok_schema(), &accept(json!(true))).expect_err("not an object");
        assert!(err.contains("must be an object"), "{err}");
    }

    #[test]
    fn schemas_outside_the_restricted_subset_accept_nothing() {
        for (schema, why) in [
            (Value::Null, "not an object"),
            (json!({"type": "array", "properties": {}}), "\"type\""),
            (json!({"type": "object"}), "no \"properties\""),
            (
                json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
                "nested",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}}),
                "nested",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}}),
                "multi-select",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "null"}}}),
                "primitive",
            ),
            (
                json!({"type": "object", "properties": {"a": true}}),
                "not an object",
            ),
            (
                json!({"type": "object", "properties": {}, "required": "a"}),
                "required",
            ),
            (
                json!({"type": "object", "properties": {}, "$ref": "http://example.org/s.json"}),
                "references",
            ),
        ] {
            let err =
                check_answer(&schema, &accept(json!({"a": 1}))).expect_err(&schema.to_string());
            assert!(
                err.contains("not an MCP elicitation schema") && err.contains(why),
                "{schema}: {err}"
            );
        }
    }
}
