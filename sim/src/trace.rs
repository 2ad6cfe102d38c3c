//! The trace: the only input to checkers and reports. An ordered list of typed events with a
//! canonical byte form (one JSON object per line, fields in declaration order, map keys sorted)
//! and a SHA-256 hash over those bytes.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use toolop::ledger::LedgerSnapshot;
use toolop::record::LocalState;
use toolop::runner::Observation;

use crate::fake::mcp::GroundTruth;
use crate::series::faults::FaultKind;

/// One thing that happened in a series, at simulated time `t_ms`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    pub t_ms: u64,
    #[serde(flatten)]
    pub what: What,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "src", rename_all = "snake_case")]
pub enum What {
    /// First event of every series: the bounds the checkers judge against.
    Begin {
        scenario: String,
        seed: u64,
        protocol: String,
        call_nodes: u32,
        /// The poll-rate bound (gates.max_qps) checked in every one-second window.
        max_qps: u32,
        /// Faults fire only before this time (the safety phase); after it they are healed.
        safety_window_ms: u64,
        /// After the safety phase every call node must settle within this long.
        liveness_bound_ms: u64,
        faults: String,
    },
    /// A fault fired at decision point `decision`, meeting `node` in local state `state`.
    Fault { decision: u64, fault: FaultKind, node: Option<String>, state: Option<LocalState>, detail: String },
    /// Last event before `End`: the ledger and the server's ground truth as they stand.
    Final { ledger: LedgerSnapshot, truth: GroundTruth },
    /// The executor (incarnation `epoch`) reported an observation.
    Exec { epoch: u64, incarnation: u32, obs: Observation },
    /// A frame crossed the simulated network.
    Net { dir: Dir, request_id: Option<u64>, bytes: usize, verdict: String },
    /// The caller acted.
    Caller { action: String, node: String },
    /// The approval agent answered (or chose silence).
    Approval { node: String, round: u32, action: String },
    /// The world crashed, restarted or rolled back an executor.
    World { action: String, detail: String },
    /// The series ended.
    End { reason: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    ToServer,
    ToExecutor,
}

#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub events: Vec<TraceEvent>,
    /// Set once the event limit is reached; later events are dropped, not recorded.
    pub truncated: bool,
    pub max_events: u64,
}

impl Trace {
    pub fn new(max_events: u64) -> Trace {
        Trace { events: Vec::new(), truncated: false, max_events }
    }

    pub fn push(&mut self, t_ms: u64, what: What) {
        if self.events.len() as u64 >= self.max_events {
            self.truncated = true;
            return;
        }
        self.events.push(TraceEvent { t_ms, what });
    }

    /// Canonical bytes: one JSON line per event.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.events.len() * 96);
        for e in &self.events {
            // A TraceEvent holds only plain data; serialisation cannot fail.
            serde_json::to_writer(&mut out, e).expect("trace event serialises");
            out.push(b'\n');
        }
        out
    }

    pub fn hash(&self) -> String {
        toolop::digest::sha256_hex(&self.canonical_bytes())
    }
}

pub type SharedTrace = Arc<Mutex<Trace>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_over_canonical_bytes_and_changes_with_any_event() {
        let mut a = Trace::new(10);
        a.push(1, What::Caller { action: "submit".into(), node: "n1".into() });
        let mut b = a.clone();
        assert_eq!(a.hash(), b.hash());
        b.push(2, What::End { reason: "done".into() });
        assert_ne!(a.hash(), b.hash());
        let line = String::from_utf8(a.canonical_bytes()).unwrap();
        assert_eq!(line, "{\"t_ms\":1,\"src\":\"caller\",\"action\":\"submit\",\"node\":\"n1\"}\n");
    }

    #[test]
    fn event_limit_truncates_instead_of_growing() {
        let mut t = Trace::new(2);
        for i in 0..5 {
            t.push(i, What::End { reason: "x".into() });
        }
        assert_eq!(t.events.len(), 2);
        assert!(t.truncated);
    }
}
