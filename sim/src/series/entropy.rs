//! Process-wide state that dependencies seed from OS entropy on first use, created before any
//! series runs.
//!
//! Inside a simulation madsim answers `getrandom` from the running series' RNG, the RNG its
//! scheduler draws from to order tasks that are ready at the same instant. A dependency that
//! seeds a process-wide lazy from `getrandom` the first time it is used therefore takes those
//! bytes from whichever series uses it first, and that series orders its ties differently from
//! the same seed run anywhere else. The one known today: `jsonschema` (the approval gate's answer
//! check, [`toolop::approval::check_answer`]) keys its maps with `ahash`, whose process-wide
//! seeds come from `getrandom`. It showed as a seed that replayed alone to another trace hash
//! than it had in its sweep, and as `tune` digests that changed with `--jobs` (which point's
//! series validated the first answer depended on thread timing).
//!
//! [`settle`] runs that code once, outside any simulation, so its entropy comes from the OS and
//! every series' RNG stays its own. `tests/determinism.rs` checks the effect: the first series of
//! a fresh process draws exactly what the same seed draws later.

use std::sync::Once;

use serde_json::json;
use toolop::protocol::ApprovalReply;

/// Create, once per process, the entropy-seeded state of the code the simulated executor runs.
/// Call it outside any madsim runtime (before `block_on`); [`super::run_series`] does.
pub fn settle() {
    static SETTLED: Once = Once::new();
    SETTLED.call_once(|| {
        assert!(
            madsim::runtime::Handle::try_current().is_err(),
            "settle() must run outside a simulation, or the series pays for the entropy"
        );
        // Every keyword family the elicitation subset allows, formats asserted: whatever the
        // validator builds lazily, it builds here.
        let schema = json!({
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email", "minLength": 3, "maxLength": 64},
                "site": {"type": "string", "format": "uri"},
                "day": {"type": "string", "format": "date"},
                "at": {"type": "string", "format": "date-time"},
                "count": {"type": "integer", "minimum": 0, "maximum": 9},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean"},
                "pick": {"type": "string", "enum": ["a", "b"]},
                "titled": {"type": "string", "oneOf": [{"const": "x", "title": "X"}]},
                "many": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "uniqueItems": true}
            },
            "required": ["email"]
        });
        let answer = ApprovalReply::Accept {
            content: json!({
                "email": "a@example.com", "site": "https://example.com/", "day": "2025-11-25",
                "at": "2025-11-25T00:00:00Z", "count": 1, "ratio": 0.5, "ok": true, "pick": "a",
                "titled": "x", "many": ["a", "b"]
            }),
        };
        if let Err(why) = toolop::approval::check_answer(&schema, &answer) {
            panic!("the warm-up answer must conform to its schema: {why}");
        }
    });
}
