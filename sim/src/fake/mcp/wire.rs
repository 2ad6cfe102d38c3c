//! JSON-RPC framing, timestamps, task ids and the per-profile texts of the fake MCP server.

use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use toolop::transport::InFrame;

use super::Profile;

pub(super) const PROTOCOL_VERSION: &str = "2025-11-25";
pub(super) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

pub(super) const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const INVALID_PARAMS: i64 = -32602;
pub(super) const INTERNAL_ERROR: i64 = -32603;
/// Code of a scripted `tool_error`.
pub(super) const TOOL_ERROR: i64 = -32000;

pub(in crate::fake) fn frame(id: Option<&Value>, body: &Value) -> InFrame {
    InFrame {
        request_id: id.and_then(Value::as_u64),
        http_status: 200,
        retry_after_ms: None,
        body: serde_json::to_vec(body).expect("Value serialises"),
    }
}

/// A successful response to request `id`.
pub(in crate::fake) fn response(id: &Value, result: Value) -> InFrame {
    frame(
        Some(id),
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

/// An error response to request `id`.
pub(in crate::fake) fn error(id: &Value, code: i64, message: &str) -> InFrame {
    frame(
        Some(id),
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

/// A server-initiated message (request or notification).
pub(super) fn message(body: &Value) -> InFrame {
    frame(None, body)
}

/// `{"io.modelcontextprotocol/related-task": {"taskId": id}}`
pub(super) fn related_meta(task_id: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert(RELATED_TASK.to_string(), json!({ "taskId": task_id }));
    m
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(in crate::fake) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(in crate::fake) fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

/// Simulated time as ISO 8601: 2026-12-01T00:00:00Z plus `ms`. TS and strict print
/// milliseconds (`.123Z`), Python microseconds (`.123000Z`), as observed.
pub(in crate::fake) fn iso8601(profile: Profile, ms: u64) -> String {
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
    match profile {
        Profile::PythonSdk => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
            milli * 1000
        ),
        _ => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z"),
    }
}

/// `n` random bytes as lowercase hex.
pub(in crate::fake) fn hex(rng: &mut ChaCha8Rng, n: usize) -> String {
    let mut b = vec![0u8; n];
    rng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A random UUID version 4, lowercase, hyphenated.
pub(super) fn uuid4(rng: &mut ChaCha8Rng) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// Which `tasks/*` method a not-found error answers (TS words them differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TasksMethod {
    Get,
    Result,
    Cancel,
}

/// Message of the `-32602` for an unknown or deleted task id.
pub(super) fn not_found_message(
    profile: Profile,
    method: TasksMethod,
    task_id: &str,
    expired: bool,
) -> String {
    match profile {
        Profile::TsSdk => match method {
            TasksMethod::Get => {
                "MCP error -32602: Failed to retrieve task: Task not found".to_string()
            }
            TasksMethod::Result | TasksMethod::Cancel => {
                format!("MCP error -32602: Task not found: {task_id}")
            }
        },
        Profile::PythonSdk => format!("Task not found: {task_id}"),
        Profile::SpecStrict if expired => "Task has expired".to_string(),
        Profile::SpecStrict => format!("Task not found: {task_id}"),
    }
}

/// (code, message) for a `tasks/*` request without a string `taskId`.
pub(super) fn missing_task_id(profile: Profile) -> (i64, String) {
    match profile {
        Profile::TsSdk => (
            INTERNAL_ERROR,
            "[\n  {\n    \"expected\": \"string\",\n    \"code\": \"invalid_type\",\n    \"path\": [\n      \"params\",\n      \"taskId\"\n    ],\n    \"message\": \"Invalid input: expected string, received undefined\"\n  }\n]".to_string(),
        ),
        Profile::PythonSdk => (INVALID_PARAMS, "Invalid request parameters".to_string()),
        Profile::SpecStrict => (INVALID_PARAMS, "Missing params.taskId".to_string()),
    }
}

/// Message of the `-32602` for `tasks/cancel` on a terminal task.
pub(super) fn cancel_terminal_message(profile: Profile, status: &str) -> String {
    match profile {
        Profile::TsSdk => {
            format!("MCP error -32602: Cannot cancel task in terminal status: {status}")
        }
        Profile::PythonSdk => format!("Cannot cancel task in terminal state '{status}'"),
        Profile::SpecStrict => format!("Cannot cancel task in terminal status: {status}"),
    }
}

/// The TS SDK's error when a tool without task support answers a task-augmented call.
pub(super) const TS_INVALID_TASK_CREATION: &str = "MCP error -32602: Invalid task creation result: [\n  {\n    \"expected\": \"object\",\n    \"code\": \"invalid_type\",\n    \"path\": [\n      \"task\"\n    ],\n    \"message\": \"Invalid input: expected object, received undefined\"\n  }\n]";

/// A `CallToolResult` with `isError: true` and one text block.
pub(super) fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}
