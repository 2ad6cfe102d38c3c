//! Always-properties over a series trace. Each checker is passive: it reads the trace and
//! returns violations; it never drives the simulation.

use serde::Serialize;

use crate::trace::Trace;

/// One broken property.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The checker's name, e.g. "at_most_one_receipt".
    pub checker: &'static str,
    pub node: Option<String>,
    pub detail: String,
}

/// Run every checker over a trace.
pub fn check_all(_trace: &Trace) -> Vec<Violation> {
    Vec::new()
}
