//! Fake servers. Each is a pure state machine over simulated time: frames in, frames out,
//! and a ground-truth log of every operation it created.

pub mod mcp;
