//! `toolop-fault-proxy`: a seeded, bounded HTTP/1.1 reverse proxy that sits between toolop and a
//! real MCP Streamable HTTP server (or an AIP-151 HTTP/JSON service) on 127.0.0.1 and injects the
//! faults the simulator models, so the live interop sweep can check the same properties.
//!
//! Each request gets a decision number `n` (arrival order) and a decision that depends only on
//! `(seed, n)` ([`plan`]): the same seed gives the same decisions for the same request sequence.
//! Faults: drop the response after the server processed the request, delay, answer 429/503 with
//! `Retry-After` without forwarding, truncate a body (the response ends cleanly, short), cut the
//! connection mid-body. SSE bodies stream through untouched unless a fault targets them. Every
//! request is logged as one JSON line ([`log`]) saying what was drawn, what was applied and what
//! the client got. Bounds everywhere ([`config::Limits`]).
//!
//! Real sockets only: under `--cfg madsim` this crate is empty (it is never part of the simulator).
#![cfg(not(madsim))]

pub mod config;
pub mod log;
pub mod plan;
mod proxy;
mod pump;
pub mod sse;

pub use proxy::{start, Running};
pub use pump::{Aborted, ChannelBody};
