//! toolop: an executor for long-running tool calls that never loses, duplicates or mislabels
//! the outcome of an operation. The module list is the code map, in data-flow order.

/// The approval gate's answers, checked against the requested schema before they are sent.
pub mod approval;
/// The live CLI `toolop` (call, resume, status, reconcile, cancel); real processes only.
#[cfg(not(madsim))]
pub mod cli;
/// The sans-IO state machine: (record, event, ctx) -> (record', commands).
pub mod core;
/// Canonical digests of requests and results.
pub mod digest;
/// The durable ledger: CAS writes, the single acceptance transaction, outbox, reconciliation.
pub mod ledger;
/// Wire formats, one adapter per protocol version; protocol-neutral replies out.
pub mod protocol;
/// `toolOperation.v1`: the durable record; local state and protocol status as two types.
pub mod record;
/// The async shell on tokio (madsim's tokio in the simulator): ledger first, then sends.
pub mod runner;
/// Bytes in, bytes out: the executor's only window on a server.
pub mod transport;
