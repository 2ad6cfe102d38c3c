//! JSON-RPC framing, timestamps and task ids of the fake extension server (small copies of the
//! MCP fake's, which are private to it).

use rand::RngCore;
use rand_chacha::ChaCha8Rng;
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

fn frame(id: Option<&Value>, body: &Value) -> InFrame {
    InFrame {
        request_id: id.and_then(Value::as_u64),
        http_status: 200,
        retry_after_ms: None,
        body: serde_json::to_vec(body).expect("Value serialises"),
    }
}

/// A successful response to request `id`.
pub(super) fn response(id: &Value, result: Value) -> InFrame {
    frame(
        Some(id),
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

/// An error response to request `id`.
pub(super) fn error(id: &Value, code: i64, message: &str) -> InFrame {
    frame(
        Some(id),
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

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

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Simulated time as ISO 8601 with milliseconds: 2026-12-01T00:00:00.000Z plus `ms`.
pub(super) fn iso8601(ms: u64) -> String {
    const DAY_MS: u64 = 86_400_000;
    let days = days_from_civil(2026, 12, 1) + (ms / DAY_MS) as i64;
    let (y, mo, d) = civil_from_days(days);
    let rem = ms % DAY_MS;
    let (h, mi, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

/// `n` random bytes as lowercase hex.
pub(super) fn hex(rng: &mut ChaCha8Rng, n: usize) -> String {
    let mut b = vec![0u8; n];
    rng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
