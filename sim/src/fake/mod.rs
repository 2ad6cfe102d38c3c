//! Fake servers. Each is a pure state machine over simulated time: frames in, frames out,
//! and a ground-truth log of every operation it created.

pub mod aip151;
pub mod mcp;
pub mod mcp_ext;
pub mod server;
