//! Constants and wire helpers of the fake extension server. Framing, timestamps and task-id
//! hex are the MCP fake's own (`fake::mcp::wire`).

use serde_json::{json, Value};
use toolop::transport::InFrame;

pub(super) const PROTOCOL_VERSION: &str = "2026-07-28";
pub(super) const EXTENSION_ID: &str = "io.modelcontextprotocol/tasks";
pub(super) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

pub(super) const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const INVALID_PARAMS: i64 = -32602;
/// MCP 2026-07-28: the request needs a client capability it did not declare.
pub(super) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// Code of a scripted `tool_error`.
pub(super) const TOOL_ERROR: i64 = -32000;

/// The empty acknowledgement of `tasks/cancel` and `tasks/update`.
pub(super) fn ack(id: &Value) -> InFrame {
    response(id, json!({"resultType": "complete"}))
}

/// Whether request params declare the tasks extension in their per-request capabilities.
pub(super) fn declares_tasks(params: &Value) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION_ID))
        .is_some_and(Value::is_object)
}

pub(super) use crate::fake::mcp::wire::{error, hex, response};

/// Simulated time as ISO 8601 with milliseconds: 2026-12-01T00:00:00.000Z plus `ms` (the TS
/// SDK's spelling, which the extension era keeps).
pub(super) fn iso8601(ms: u64) -> String {
    crate::fake::mcp::wire::iso8601(crate::fake::mcp::Profile::TsSdk, ms)
}
