//! Scenario files (TOML): workload, executor settings, server profile, network, limits.
//! A bad file is refused with its path, the field and what is wrong; nothing runs on a guess.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toolop::protocol::TaskSupport;
use toolop::record::AdapterId;
use toolop::runner::RunnerConfig;

use crate::series::faults::FaultKind;
pub use crate::series::ledger::LedgerKind;

/// Every field a scenario can set: unit, bounds, protocols, meaning (the one table validation
/// and the reference share).
pub mod fields;
/// `--set FIELD=VALUE`: fields changed on the command line.
pub mod overrides;
/// `docs/scenario-reference.md`, rendered from [`fields`] and [`validate::RULES`].
pub mod reference;
/// Validation against the field table and the rules between fields.
pub mod validate;

/// The protocols a lane can speak: the executor's adapter and the fake server's codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Protocol {
    /// MCP 2025-11-25 with Tasks (SEP-1686).
    #[serde(rename = "mcp-2025-11-25")]
    Mcp20251125,
    /// The MCP tasks extension `io.modelcontextprotocol/tasks` (SEP-2663, 2026-07-28).
    #[serde(rename = "mcp-tasks-ext")]
    McpTasksExt,
    /// Google AIP-151 long-running operations over HTTP/JSON.
    #[serde(rename = "aip-151")]
    Aip151,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [
        Protocol::Mcp20251125,
        Protocol::McpTasksExt,
        Protocol::Aip151,
    ];

    /// The name scenario files, reports and traces use.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Mcp20251125 => "mcp-2025-11-25",
            Protocol::McpTasksExt => "mcp-tasks-ext",
            Protocol::Aip151 => "aip-151",
        }
    }

    /// The executor adapter that speaks it.
    pub fn adapter_id(self) -> AdapterId {
        match self {
            Protocol::Mcp20251125 => AdapterId::Mcp20251125,
            Protocol::McpTasksExt => AdapterId::McpTasksExt,
            Protocol::Aip151 => AdapterId::Aip151,
        }
    }

    /// The server profiles its fake can imitate; the first is the default.
    pub fn profiles(self) -> &'static [ServerProfile] {
        match self {
            Protocol::Mcp20251125 => &[
                ServerProfile::SpecStrict,
                ServerProfile::TsSdk,
                ServerProfile::PythonSdk,
            ],
            Protocol::McpTasksExt => &[ServerProfile::SpecStrict, ServerProfile::Rmcp],
            Protocol::Aip151 => &[
                ServerProfile::CancelDoneOk,
                ServerProfile::CancelDoneFailedPrecondition,
                ServerProfile::CancelDoneNotFound,
            ],
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which real server a fake imitates where its protocol leaves room ([`Protocol::profiles`]
/// says which apply to which protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerProfile {
    /// The protocol text read strictly.
    SpecStrict,
    /// MCP: `@modelcontextprotocol/sdk@1.32.2`.
    TsSdk,
    /// MCP: `mcp==1.30.0`.
    PythonSdk,
    /// The tasks extension: crates.io `rmcp =3.11.0` (its `TaskManager`).
    Rmcp,
    /// AIP-151: CancelOperation on a done operation answers `200 {}`.
    CancelDoneOk,
    /// AIP-151: ... answers `400 FAILED_PRECONDITION`.
    CancelDoneFailedPrecondition,
    /// AIP-151: ... answers `404 NOT_FOUND`.
    CancelDoneNotFound,
}

impl ServerProfile {
    pub fn name(self) -> &'static str {
        match self {
            ServerProfile::SpecStrict => "spec-strict",
            ServerProfile::TsSdk => "ts-sdk",
            ServerProfile::PythonSdk => "python-sdk",
            ServerProfile::Rmcp => "rmcp",
            ServerProfile::CancelDoneOk => "cancel-done-ok",
            ServerProfile::CancelDoneFailedPrecondition => "cancel-done-failed-precondition",
            ServerProfile::CancelDoneNotFound => "cancel-done-not-found",
        }
    }

    /// One line: the server it imitates.
    pub fn summary(self) -> &'static str {
        match self {
            ServerProfile::SpecStrict => "the protocol text read strictly",
            ServerProfile::TsSdk => "`@modelcontextprotocol/sdk@1.32.2` (ids, error texts, ttl quirks, pushed elicitations). Elicitations are numbered 0, 1, 2, ... per server, as the SDK numbers a session's requests (the peer in `tests/peers/ts`, two tasks in one session: ids 0 and 1; every executor process shares the node's session), and an answer is paired by its id alone, whatever task its related-task `_meta` names. Until session 27 the profile asked every round with id `0`, which MCP forbids within a session",
            ServerProfile::PythonSdk => "`mcp==1.30.0` (ids, error texts, status messages, ttl quirks)",
            ServerProfile::Rmcp => "crates.io `rmcp =3.11.0` (`TaskManager`): a task still running at its ttl ends `failed` with `-32603` \"task expired: TTL elapsed before completion\" and its work is aborted; a terminal task goes one ttl after it ended; both only when a request reaches the server, which has no background sweeper; a cancel withdraws a pending input round at once (spec/mcp-tasks.md section 16); `initialize` answers `2025-11-25`. The strict profile deletes a running task at its ttl instead, as the extension allows",
            ServerProfile::CancelDoneOk => "CancelOperation on a done operation answers `200 {}`",
            ServerProfile::CancelDoneFailedPrecondition => {
                "CancelOperation on a done operation answers `400 FAILED_PRECONDITION`"
            }
            ServerProfile::CancelDoneNotFound => {
                "CancelOperation on a done operation answers `404 NOT_FOUND`"
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default = "default_protocol")]
    pub protocol: Protocol,
    /// A second protocol version the executor speaks at the same time (its own lane and server,
    /// with that protocol's first profile): `executor.launch` sends a fraction of new work there.
    #[serde(default)]
    pub successor: Option<Protocol>,
    /// When the operator retires the primary adapter: no new work on it from then on.
    #[serde(default)]
    pub retire_primary_at_ms: Option<u64>,
    /// AIP-151 routes and service behaviour (used when a lane speaks aip-151).
    #[serde(default)]
    pub aip: AipSpec,
    /// The ledger the executors share: `memory` (default) or `sqlite` (SQLite in memory).
    #[serde(default)]
    pub ledger: LedgerKind,
    pub server: ServerSpec,
    #[serde(default)]
    pub executor: RunnerConfig,
    #[serde(default)]
    pub network: NetworkSpec,
    pub workload: Workload,
    #[serde(default)]
    pub approval: ApprovalSpec,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub faults: FaultsSpec,
    #[serde(default)]
    pub gates: GatesSpec,
}

/// Fault rates (maximum per-decision probability, by catalogue name) and the phase bounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultsSpec {
    pub rates: BTreeMap<String, f64>,
    /// Probability that a configured fault is enabled in a given series (swarm testing).
    pub swarm_enable_rate: f64,
    /// Faults fire only during [0, safety_window_ms); then they are healed.
    pub safety_window_ms: u64,
    /// After the safety window every call node must settle within this long.
    pub liveness_bound_ms: u64,
    /// Downtime of a crashed or disconnected executor before it restarts.
    pub restart_delay_ms: [u64; 2],
    /// How long a rolled-back executor keeps running beside its successor.
    pub rollback_overlap_ms: [u64; 2],
    /// When the operator rolls back, drawn in this range (and within the safety window): while
    /// call nodes are in flight, so the takeover meets them.
    pub rollback_at_ms: [u64; 2],
    /// Server maximum ttl drawn when `server_deletes_running_task` is enabled.
    pub short_ttl_ms: [u64; 2],
    /// Simulated time every ledger commit takes between the executor's read and its write,
    /// drawn per commit. `[0, 0]`: commits are instant.
    pub ledger_commit_ms: [u64; 2],
    /// How long a commit hit by `ledger_slow_commit` takes.
    pub slow_commit_ms: [u64; 2],
    /// How long a `second_executor` replica runs beside the current executor.
    pub second_executor_ms: [u64; 2],
    /// How long a process hit by `process_pause` stays frozen.
    pub process_pause_ms: [u64; 2],
}

impl Default for FaultsSpec {
    fn default() -> Self {
        FaultsSpec {
            rates: BTreeMap::new(),
            swarm_enable_rate: 0.5,
            safety_window_ms: 600_000,
            liveness_bound_ms: 3_600_000,
            restart_delay_ms: [100, 20_000],
            rollback_overlap_ms: [1_000, 30_000],
            rollback_at_ms: [1_000, 120_000],
            short_ttl_ms: [5_000, 60_000],
            ledger_commit_ms: [0, 0],
            slow_commit_ms: [1_000, 15_000],
            second_executor_ms: [5_000, 120_000],
            process_pause_ms: [2_000, 8_000],
        }
    }
}

impl FaultsSpec {
    /// Rates by fault kind; names were validated when the file was loaded.
    pub fn max_rates(&self) -> BTreeMap<FaultKind, f64> {
        self.rates
            .iter()
            .filter_map(|(n, &r)| FaultKind::from_name(n).map(|f| (f, r)))
            .collect()
    }

    /// Whether `f` may fire in this scenario (a positive rate).
    pub fn enabled(&self, f: FaultKind) -> bool {
        self.max_rates().get(&f).is_some_and(|&r| r > 0.0)
    }
}

/// Gate thresholds over a sweep. Defaults are the release bar of design.md section 4.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatesSpec {
    pub max_divergences: u64,
    pub max_second_operations: u64,
    /// Poll-rate bound per one-second window; defaults to executor.max_qps.
    pub max_qps: Option<u32>,
    pub cancel_confirmation_p99_ms: u64,
    pub unknown_reconciliation_max_ms: u64,
    pub outbox_traceable_min_pct: f64,
    pub max_receipts_per_node: u32,
    /// Share of hand-offs to manual reconciliation that `no_false_unknown` finds false, in
    /// percent. 0: the protocols modelled here leave no false hand-off undecidable (those they
    /// do are excused by the checker and counted apart).
    pub max_false_unknown_pct: f64,
    /// Each reachable (fault, state) cell must be hit at least this often over the sweep.
    pub coverage_min_hits: u64,
    /// Check the coverage matrix at all (off for fault-free scenarios).
    pub coverage: bool,
}

impl Default for GatesSpec {
    fn default() -> Self {
        GatesSpec {
            max_divergences: 0,
            max_second_operations: 0,
            max_qps: None,
            cancel_confirmation_p99_ms: 60_000,
            unknown_reconciliation_max_ms: 15 * 60_000,
            outbox_traceable_min_pct: 100.0,
            max_receipts_per_node: 1,
            max_false_unknown_pct: 0.0,
            coverage_min_hits: 1,
            coverage: true,
        }
    }
}

fn default_protocol() -> Protocol {
    Protocol::Mcp20251125
}

/// The AIP-151 service: URL templates (configuration, never guessed) and its behaviour.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AipSpec {
    pub submit_path: String,
    pub operation_path: String,
    pub operations_collection: String,
    /// AIP-155 request_id dedupe window.
    pub dedupe_window_ms: Option<u64>,
    pub cancel_supported: bool,
    /// Fraction of operations pre-empted (ending ABORTED).
    pub preempt_rate: f64,
    /// Operations are deleted this long after completion.
    pub retention_after_done_ms: Option<u64>,
}

impl Default for AipSpec {
    fn default() -> Self {
        AipSpec {
            submit_path: "/v1/projects/p/locations/l/reports:{tool}".into(),
            operation_path: "/v1/{name}".into(),
            operations_collection: "/v1/projects/p/locations/l/operations".into(),
            dedupe_window_ms: Some(3_600_000),
            cancel_supported: true,
            preempt_rate: 0.0,
            retention_after_done_ms: Some(3_600_000),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Profiles the seed draws from; each must be one of the protocol's ([`Protocol::profiles`]).
    pub profiles: Vec<ServerProfile>,
    /// The toolop extensions (idempotency key, lookup by key, result digest): drawn with this probability.
    #[serde(default = "one")]
    pub toolop_extensions_rate: f64,
    #[serde(default)]
    pub poll_interval_ms: Option<u64>,
    #[serde(default)]
    pub max_ttl_ms: Option<u64>,
    /// How the executor reaches an MCP server (see [`ServerTransport`]).
    #[serde(default)]
    pub transport: ServerTransport,
}

/// How the executor reaches an MCP server, as far as the simulator tells them apart: what a
/// server restart does to the executor's side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerTransport {
    /// One connection per executor process (stdio, or a kept stream): a restart closes it, and
    /// the process ends with it and is restarted from the ledger.
    #[default]
    Stream,
    /// MCP Streamable HTTP: a POST per message under a session id. A restart forgets the
    /// sessions; the executor process lives on, every later request on an old session is
    /// answered HTTP 404, and its transport re-initializes, as the live one does.
    Http,
}

fn one() -> f64 {
    1.0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkSpec {
    /// One-way latency range [min, max].
    pub latency_ms: [u64; 2],
}

impl Default for NetworkSpec {
    fn default() -> Self {
        NetworkSpec {
            latency_ms: [2, 40],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Number of call nodes per series, [min, max].
    pub call_nodes: [u32; 2],
    /// Submissions start within this window.
    #[serde(default = "default_spread")]
    pub start_spread_ms: u64,
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub caller: CallerSpec,
}

fn default_spread() -> u64 {
    5_000
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    /// `required`, `optional`, `forbidden`, or absent (= forbidden).
    #[serde(default)]
    pub task_support: Option<TaskSupport>,
    #[serde(default)]
    pub sync_upper_bound_ms: Option<u64>,
    #[serde(default = "one_u32")]
    pub weight: u32,
    pub duration_ms: [u64; 2],
    #[serde(default)]
    pub fail_rate: f64,
    #[serde(default)]
    pub tool_error_rate: f64,
    #[serde(default)]
    pub input_rate: f64,
    #[serde(default = "default_blocks")]
    pub blocks: [u32; 2],
}

fn one_u32() -> u32 {
    1
}

fn default_blocks() -> [u32; 2] {
    [1, 3]
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CallerSpec {
    pub cancel_rate: f64,
    /// Of the cancels, the share an operator makes through the ledger (`toolop cancel NODE`
    /// from another terminal) instead of clicking in the caller: a running executor finds it
    /// on its next look (`executor.cancel_request_check_ms`).
    pub cancel_by_request_rate: f64,
    pub cancel_after_ms: [u64; 2],
    /// The caller stops waiting (never a server-side cancel).
    pub detach_rate: f64,
}

impl Default for CallerSpec {
    fn default() -> Self {
        CallerSpec {
            cancel_rate: 0.0,
            cancel_by_request_rate: 0.0,
            cancel_after_ms: [500, 30_000],
            detach_rate: 0.0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalSpec {
    pub delay_ms: [u64; 2],
    pub decline_rate: f64,
    /// The approver never answers; the executor's deadline must decline.
    pub silent_rate: f64,
}

impl Default for ApprovalSpec {
    fn default() -> Self {
        ApprovalSpec {
            delay_ms: [100, 5_000],
            decline_rate: 0.1,
            silent_rate: 0.0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Simulated time a series may use; past it the series ends and says so.
    pub sim_time_ms: u64,
    /// Trace events a series may produce.
    pub max_events: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sim_time_ms: 4 * 3_600_000,
            max_events: 200_000,
        }
    }
}

/// A scenario problem: which file, which field, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub field: String,
    pub problem: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: field `{}`: {}", self.file, self.field, self.problem)
    }
}

impl std::error::Error for ScenarioError {}

impl Scenario {
    /// The protocols of the scenario's lanes, in lane order: the primary, then the successor.
    pub fn lanes(&self) -> Vec<Protocol> {
        let mut out = vec![self.protocol];
        out.extend(self.successor);
        out
    }

    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let (file, text) = Scenario::read(path)?;
        Scenario::parse(&file, &text)
    }

    /// A scenario file's name (as errors give it) and text.
    pub fn read(path: &Path) -> Result<(String, String), ScenarioError> {
        let file = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Ok((file, text)),
            Err(e) => Err(ScenarioError {
                file,
                field: "(file)".into(),
                problem: format!("cannot read: {e}"),
            }),
        }
    }

    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| {
            // toml names the key path in its message; keep its line/column text as the problem.
            let field = e
                .span()
                .map(|sp| field_at(text, sp.start))
                .unwrap_or_else(|| "(document)".into());
            let line = e
                .span()
                .map(|sp| text[..sp.start.min(text.len())].matches('\n').count() + 1);
            let problem = match line {
                Some(l) => format!("{} (line {l})", e.message().trim()),
                None => e.message().trim().to_string(),
            };
            ScenarioError {
                file: file.into(),
                field,
                problem,
            }
        })?;
        validate::validate(&s).map_err(|(field, problem)| ScenarioError {
            file: file.into(),
            field,
            problem,
        })?;
        Ok(s)
    }
}

/// The dotted key path whose value or header contains byte `offset`, best effort: the nearest
/// `[table]` header above plus the key on the offending line.
fn field_at(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = text[line_start..]
        .find('\n')
        .map(|i| line_start + i)
        .unwrap_or(text.len());
    let line = text[line_start..line_end].trim();
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').to_string());
    let key = line
        .split('=')
        .next()
        .map(str::trim)
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    match (table, key) {
        (Some(t), Some(k)) => format!("{t}.{k}"),
        (None, Some(k)) => k.to_string(),
        (Some(t), None) => t,
        (None, None) => "(document)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
[server]
profiles = ["ts-sdk"]
[workload]
call_nodes = [1, 2]
[[workload.tools]]
name = "report"
task_support = "required"
duration_ms = [100, 200]
"#;

    fn check(text: &str, field: &str, problem_part: &str) {
        let e = Scenario::parse("x.toml", text).expect_err("should be refused");
        assert_eq!(e.file, "x.toml");
        assert_eq!(e.field, field, "field for {e}");
        assert!(
            e.problem.contains(problem_part),
            "problem {:?} should mention {problem_part:?}",
            e.problem
        );
    }

    #[test]
    fn good_file_parses_with_defaults() {
        let s = Scenario::parse("x.toml", GOOD).unwrap();
        assert_eq!(s.executor.max_qps, 20);
        assert_eq!(s.protocol, Protocol::Mcp20251125);
    }

    #[test]
    fn bad_files_name_file_field_and_problem() {
        check(
            &GOOD.replace("[1, 2]", "[3, 2]"),
            "workload.call_nodes",
            "min <= max",
        );
        check(
            &GOOD.replace("\"ts-sdk\"", "\"go-sdk\""),
            "server.profiles",
            "unknown variant `go-sdk`",
        );
        check(
            &GOOD.replace("name = \"t\"", "name = \"t\"\nprotocol = \"mcp-2024\""),
            "protocol",
            "unknown variant `mcp-2024`",
        );
        check(
            &GOOD.replace("name = \"t\"", "name = \"t\"\nprotocol = \"aip-151\""),
            "server.profiles",
            "ts-sdk is not a profile of aip-151",
        );
        check(
            &GOOD.replace("\"required\"", "\"always\""),
            "workload.tools.task_support",
            "unknown variant `always`",
        );
        let aip = GOOD
            .replace("name = \"t\"", "name = \"t\"\nprotocol = \"aip-151\"")
            .replace("task_support = \"required\"\n", "")
            .replace("\"ts-sdk\"", "\"cancel-done-ok\"");
        check(
            &format!("{aip}\n[faults.rates]\napproval_replay = 0.1\n"),
            "faults.rates.approval_replay",
            "aip-151 cannot express approval_replay",
        );
        check(
            &format!("{aip}\n[faults.rates]\nreply_to_other_exchange = 0.1\n"),
            "faults.rates.reply_to_other_exchange",
            "aip-151 cannot express",
        );
        assert!(Scenario::parse(
            "x.toml",
            &format!("{aip}\n[faults.rates]\nlate_duplicate_reply = 0.1\n")
        )
        .is_ok());
        check(
            &GOOD.replace(
                "duration_ms = [100, 200]",
                "duration_ms = [100, 200]\ninput_rate = 1.5",
            ),
            "workload.tools[0].input_rate",
            "outside [0, 1]",
        );
        check(
            &GOOD.replace("name = \"report\"", "name = \"report\"\ncolour = 1"),
            "workload.tools.colour",
            "unknown field",
        );
        check(
            &GOOD.replace("call_nodes = [1, 2]", "call_nodes = \"many\""),
            "workload.call_nodes",
            "invalid type",
        );
        check(
            &format!("{GOOD}\n[executor]\nmax_qps = 0\n"),
            "executor.max_qps",
            "0 is outside [1, 100000]",
        );
        check(
            &format!("{GOOD}\n[faults.rates]\nlost_requests = 0.1\n"),
            "faults.rates.lost_requests",
            "unknown fault",
        );
        check(
            &format!("{GOOD}\n[faults.rates]\nlost_request = 2.0\n"),
            "faults.rates.lost_request",
            "outside [0, 1]",
        );
        // Operators' cancel requests need executors that look for them while they run.
        let requests =
            format!("{GOOD}\n[workload.caller]\ncancel_rate = 0.3\ncancel_by_request_rate = 0.5\n");
        assert!(Scenario::parse("x.toml", &requests).is_ok());
        check(
            &format!("{requests}\n[executor]\ncancel_request_check_ms = 0\n"),
            "workload.caller.cancel_by_request_rate",
            "needs executor.cancel_request_check_ms above 0",
        );
    }
}
