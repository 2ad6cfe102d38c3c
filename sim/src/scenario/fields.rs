//! Every field a scenario file can set, once: its unit, its bounds, the protocols that can
//! express it, and what it means. The loader validates against this table
//! ([`super::validate`]) and `docs/scenario-reference.md` is rendered from it
//! ([`super::reference`]), so the reference cannot drift from what loads; a test walks a fully
//! populated scenario and fails on any field the table does not list.

use crate::scenario::{Protocol, ServerProfile};

/// What a field's value is, for bounds and for the reference.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    /// Simulated milliseconds.
    Ms,
    /// A probability in [0, 1].
    Rate,
    Percent,
    /// A whole number of things.
    Count,
    /// Requests per second.
    PerSecond,
    /// A multiplier.
    Factor,
    Text,
    Flag,
    /// One of the names the function lists.
    Choice(fn() -> Vec<String>),
    /// A list of those names.
    ChoiceList(fn() -> Vec<String>),
    /// A list of tool names of the workload.
    ToolList,
}

impl Unit {
    pub fn describe(self) -> String {
        match self {
            Unit::Ms => "ms".into(),
            Unit::Rate => "probability".into(),
            Unit::Percent => "%".into(),
            Unit::Count => "count".into(),
            Unit::PerSecond => "requests/s".into(),
            Unit::Factor => "factor".into(),
            Unit::Text => "text".into(),
            Unit::Flag => "true or false".into(),
            Unit::Choice(names) => format!("one of {}", names().join(", ")),
            Unit::ChoiceList(names) => format!("list of {}", names().join(", ")),
            Unit::ToolList => "list of tool names".into(),
        }
    }

    pub fn is_number(self) -> bool {
        matches!(
            self,
            Unit::Ms | Unit::Rate | Unit::Percent | Unit::Count | Unit::PerSecond | Unit::Factor
        )
    }
}

/// One settable field.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Dotted key path; `tools[]` is every element of the `tools` array, `<fault>` every key of
    /// the `faults.rates` table.
    pub path: &'static str,
    pub unit: Unit,
    /// Inclusive bounds of a number (of each end of a `[min, max]` pair); `f64::INFINITY` for
    /// none above.
    pub bounds: (f64, f64),
    /// A `[min, max]` range rather than one value.
    pub pair: bool,
    /// May be left out (no value at all), e.g. "no ttl".
    pub optional: bool,
    /// Protocols that can express the field; empty: every protocol. A scenario none of whose
    /// lanes speaks one of them must leave it at its default.
    pub only: &'static [Protocol],
    /// Why the field may never be set in a scenario (it is decided elsewhere).
    pub never: Option<&'static str>,
    pub doc: &'static str,
    /// A TOML value that loads (the reference test sets every field to it).
    pub example: &'static str,
}

/// Seven days: the longest simulated time a series may be given, and the cap of every time field.
pub const WEEK_MS: u64 = 7 * 24 * 3_600_000;
const WEEK: f64 = WEEK_MS as f64;
const DAY: f64 = 24.0 * 3_600_000.0;
const NONE_ABOVE: f64 = f64::INFINITY;
const MCP: &[Protocol] = &[Protocol::Mcp20251125, Protocol::McpTasksExt];
const AIP: &[Protocol] = &[Protocol::Aip151];

/// The names serde reads for a value: what a scenario file must spell.
fn spelled<T: serde::Serialize>(values: impl IntoIterator<Item = T>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for v in values {
        let name = serde_json::to_value(v)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

fn protocols() -> Vec<String> {
    spelled(Protocol::ALL)
}

fn profiles() -> Vec<String> {
    spelled(
        Protocol::ALL
            .iter()
            .flat_map(|p| p.profiles().iter().copied()),
    )
}

/// The adapters' spelling in `executor.launch.new_adapter` (not the protocol names).
fn adapters() -> Vec<String> {
    spelled(Protocol::ALL.map(Protocol::adapter_id))
}

fn ledgers() -> Vec<String> {
    use crate::scenario::LedgerKind::*;
    spelled([Memory, Sqlite])
}

fn transports() -> Vec<String> {
    use crate::scenario::ServerTransport::*;
    spelled([Stream, Http])
}

fn task_support() -> Vec<String> {
    use toolop::protocol::TaskSupport::*;
    spelled([Required, Optional, Forbidden])
}

fn no_task_support() -> Vec<String> {
    use toolop::runner::NoTaskSupport::*;
    spelled([Reject, RunSync])
}

const fn f(path: &'static str, unit: Unit, bounds: (f64, f64), doc: &'static str) -> Field {
    Field {
        path,
        unit,
        bounds,
        pair: false,
        optional: false,
        only: &[],
        never: None,
        doc,
        example: "",
    }
}

impl Field {
    const fn pair(mut self) -> Field {
        self.pair = true;
        self
    }
    const fn optional(mut self) -> Field {
        self.optional = true;
        self
    }
    const fn only(mut self, p: &'static [Protocol]) -> Field {
        self.only = p;
        self
    }
    const fn never(mut self, why: &'static str) -> Field {
        self.never = Some(why);
        self
    }
    const fn ex(mut self, example: &'static str) -> Field {
        self.example = example;
        self
    }
}

const RATE: (f64, f64) = (0.0, 1.0);
const ANY: (f64, f64) = (0.0, 0.0);

/// The table, in file order.
pub const FIELDS: &[Field] = &[
    f("name", Unit::Text, ANY, "The scenario's name: names its report folder and appears in every trace. One path segment: letters, digits, `.`, `_`, `-`; at most 64 characters.").ex("\"my_scenario\""),
    f("protocol", Unit::Choice(protocols), ANY, "The protocol of the primary lane: the executor's adapter and the fake server's codec.").ex("\"mcp-2025-11-25\""),
    f("successor", Unit::Choice(protocols), ANY, "A second protocol the executor speaks at the same time (its own lane and fake server, with that protocol's first profile); `executor.launch` sends a fraction of new work there.").optional().ex("\"aip-151\""),
    f("retire_primary_at_ms", Unit::Ms, (0.0, WEEK), "When the operator retires the primary adapter: no new work on it from then on; its in-flight work drains. Needs a successor.").optional().ex("8000"),

    f("ledger", Unit::Choice(ledgers), ANY, "The ledger every executor process of a series shares: `memory` (the reference ledger) or `sqlite` (SQLite in memory, no file, deterministic: the same checkers judge the SQL transaction logic).").ex("\"sqlite\""),

    f("aip.submit_path", Unit::Text, ANY, "AIP-151 route template of the submitting method; must start with `/` and contain `{tool}`.").only(AIP).ex("\"/v1/projects/p/locations/l/reports:{tool}\""),
    f("aip.operation_path", Unit::Text, ANY, "AIP-151 route template of an operation; must start with `/` and contain `{name}`.").only(AIP).ex("\"/v1/{name}\""),
    f("aip.operations_collection", Unit::Text, ANY, "AIP-151 route of the operations collection (lookups by request id).").only(AIP).ex("\"/v1/projects/p/locations/l/operations\""),
    f("aip.dedupe_window_ms", Unit::Ms, (0.0, WEEK), "How long the service deduplicates an AIP-155 request id; left out: no deduplication.").optional().only(AIP).ex("3600000"),
    f("aip.cancel_supported", Unit::Flag, ANY, "Whether the service implements CancelOperation.").only(AIP).ex("true"),
    f("aip.preempt_rate", Unit::Rate, RATE, "Fraction of operations the service pre-empts (they end ABORTED).").only(AIP).ex("0.05"),
    f("aip.retention_after_done_ms", Unit::Ms, (0.0, WEEK), "Done operations are deleted this long after completion; left out: kept.").optional().only(AIP).ex("600000"),

    f("server.profiles", Unit::ChoiceList(profiles), ANY, "Which real servers the fake imitates; the seed picks one per series. Each must be a profile of `protocol` (see `toolop-sim list scenarios` and the fault table below).").ex("[\"spec-strict\"]"),
    f("server.toolop_extensions_rate", Unit::Rate, RATE, "Probability that a series' server offers the toolop extensions (idempotency key, lookup by key, result digest).").ex("1.0"),
    f("server.poll_interval_ms", Unit::Ms, (1.0, DAY), "The poll interval the server suggests; left out: the profile's own. The python-sdk profile says 500 whatever is set, as the SDK does.").optional().only(MCP).ex("500"),
    f("server.transport", Unit::Choice(transports), ANY, "How the executor reaches the server: `stream` (one connection per executor process, as stdio: a server restart closes it and the process is restarted) or `http` (Streamable HTTP sessions: a restart forgets them, later requests on an old session get HTTP 404 and the executor's transport re-initializes; a `connection_drop` loses the POSTs in flight and the process lives on). AIP-151 lanes are always plain HTTP, without sessions: a drop loses the requests in flight there too.").only(MCP).ex("\"http\""),
    f("server.max_ttl_ms", Unit::Ms, (1.0, WEEK), "The longest ttl the server grants (it deletes tasks past it); left out: no limit.").optional().ex("3600000"),

    f("executor.max_qps", Unit::PerSecond, (1.0, 100_000.0), "The executor's limit on requests per second, shared by every operation.").ex("20"),
    f("executor.request_timeout_ms", Unit::Ms, (1.0, DAY), "How long the executor waits for one reply.").ex("10000"),
    f("executor.handshake_attempts", Unit::Count, (1.0, 100.0), "Connection handshakes tried before an executor process gives up.").ex("5"),
    f("executor.handshake_first_timeout_ms", Unit::Ms, (1.0, DAY), "How long the first handshake attempt waits; each retry waits twice as long, at most `request_timeout_ms`.").ex("1000"),
    f("executor.commit_conflict_retries", Unit::Count, (0.0, 1000.0), "Times an event is stepped again on a re-read record after another writer's commit landed between the read and this executor's commit.").ex("8"),
    f("executor.cancel_request_check_ms", Unit::Ms, (0.0, DAY), "How often the executor looks for cancel requests other processes wrote into the ledger; 0: only when it starts.").ex("1000"),
    f("executor.idle_wake_ms", Unit::Ms, (1.0, DAY), "The longest the executor sleeps with nothing due.").ex("60000"),
    f("executor.cancel_take_up_ms", Unit::Ms, (1.0, DAY), "How long a record asking for a cancel another executor process committed (not yet taken by the server) must stay quiet before this process sends that cancel itself: the other may have died between its commit and its send.").ex("500"),
    f("executor.beat_interval_ms", Unit::Ms, (0.0, DAY), "How often an executor process writes its beat (proof it is alive, however long its commits hold it) into the shared ledger; 0: never (the library allows it; the `toolop` CLI always beats), and another process then takes its sent submissions up as soon as it starts, and concludes a request timeout after the later of the send's step and the take-up: the sender must have committed its reply by then, slow commits and pauses included, or a live task goes to a person (`mcp_ext_replicas_nobeat` seeds 10217, 19382, 25685).").ex("1000"),
    f("executor.beat_timeout_ms", Unit::Ms, (1.0, DAY), "How long after its newest beat a process counts as gone: only then does another process of the same epoch take up a submission it sent.").ex("5000"),
    f("executor.no_task_support", Unit::Choice(no_task_support), ANY, "What the executor does with a tool whose descriptor forbids tasks: refuse it, or call it synchronously within its published upper bound.").only(MCP).ex("\"run_sync\""),
    f("executor.max_events", Unit::Count, (1.0, 100_000_000.0), "Loop iterations one executor process may take; a runaway loop ends instead of hanging.").ex("1000000"),
    f("executor.launch.new_adapter", Unit::Choice(adapters), ANY, "The adapter being launched: a fraction of new long tasks go to it. Must be the successor's.").optional().ex("\"aip151\""),
    f("executor.launch.new_adapter_fraction", Unit::Rate, RATE, "Fraction of new long tasks sent to `new_adapter` (a stable hash of the call node id decides).").ex("0.05"),
    f("executor.launch.long_tools", Unit::ToolList, ANY, "Tools whose calls count as long tasks for the launch fraction; empty: every tool.").ex("[\"build_report\"]"),
    f("executor.launch.shadow_tools", Unit::ToolList, ANY, "Side-effect-free tools run in shadow mode: recorded, checked and receipted, never sent to the outbox.").ex("[\"build_report\"]"),
    f("executor.core.wait_budget_ms", Unit::Ms, (1.0, WEEK), "Total time the executor waits for one call node before handing it to reconciliation.").ex("1800000"),
    f("executor.core.approval_timeout_ms", Unit::Ms, (1.0, DAY), "How long an input round waits for the approval gate before it declines.").only(MCP).ex("60000"),
    f("executor.core.cancel_requery_interval_ms", Unit::Ms, (1.0, DAY), "How often the executor re-reads a task whose cancel is not yet confirmed.").ex("2000"),
    f("executor.core.retry_interval_ms", Unit::Ms, (1.0, DAY), "Delay before retrying a lookup, fetch or submission after a loss.").ex("1000"),
    f("executor.core.task_ttl_ms", Unit::Ms, (1.0, WEEK), "The retention the executor asks for; the server may grant less. Left out: none asked.").optional().ex("1800000"),
    f("executor.core.max_submit_attempts", Unit::Count, (1.0, 1_000.0), "Submissions of one call node (same key) before it goes to reconciliation.").ex("3"),
    f("executor.core.max_lookup_attempts", Unit::Count, (1.0, 1_000.0), "Lookups by submission key before giving up.").ex("20"),
    f("executor.core.max_fetch_attempts", Unit::Count, (1.0, 1_000.0), "Result fetches that came back without a verified result, or got none by their deadline, before giving up (a fetch lost with its connection is not counted).").ex("8"),
    f("executor.core.max_cancel_attempts", Unit::Count, (1.0, 1_000.0), "Cancel sends before giving up.").ex("5"),
    f("executor.core.not_found_retries", Unit::Count, (0.0, 1_000.0), "Not-found answers tolerated in a row, before the reckoned expiry or after it (a lagging replica's 404 is no proof).").ex("2"),
    f("executor.core.key_lookup", Unit::Flag, ANY, "Whether the server answers lookups by submission key.").never("the executor learns it from the server's capabilities (toolop extensions)").ex("false"),
    f("executor.core.key_retention_ms", Unit::Ms, (0.0, WEEK), "How long the server keeps keys answerable.").optional().never("the executor learns it from the server's capabilities").ex("60000"),
    f("executor.core.mutation", Unit::Text, ANY, "A planted anti-pattern.").optional().never("plant one with `toolop-sim replay --mutation NAME` or run `toolop-sim mutants`").ex("\"fresh_key_on_submit_timeout\""),
    f("executor.core.poll.initial_interval_ms", Unit::Ms, (1.0, DAY), "The first poll delay.").ex("500"),
    f("executor.core.poll.backoff_multiplier", Unit::Factor, (1.0, 10.0), "Growth of the poll delay per poll already sent (1.0: fixed).").ex("1.5"),
    f("executor.core.poll.interval_cap_ms", Unit::Ms, (1.0, DAY), "The longest poll delay; at least `initial_interval_ms`.").ex("10000"),
    f("executor.core.poll.jitter_fraction", Unit::Rate, RATE, "Jitter added to each poll delay, as a fraction of it (0.2: up to +20%).").ex("0.2"),
    f("executor.core.poll.honor_server_interval", Unit::Flag, ANY, "Never poll faster than the server's suggested interval.").ex("true"),

    f("network.latency_ms", Unit::Ms, (0.0, 60_000.0), "One-way latency; each message draws its own in the range.").pair().ex("[2, 40]"),

    f("workload.call_nodes", Unit::Count, (1.0, 1_000.0), "Call nodes per series, drawn per series in the range.").pair().ex("[4, 8]"),
    f("workload.start_spread_ms", Unit::Ms, (0.0, WEEK), "Each call node is submitted at a time drawn in [0, this]; less than `limits.sim_time_ms`.").ex("5000"),
    f("workload.tools[].name", Unit::Text, ANY, "The tool's name, unique in the workload.").ex("\"build_report\""),
    f("workload.tools[].task_support", Unit::Choice(task_support), ANY, "What the tool's descriptor says about tasks; left out: forbidden.").optional().only(MCP).ex("\"required\""),
    f("workload.tools[].sync_upper_bound_ms", Unit::Ms, (1.0, DAY), "The run time the tool's descriptor promises for a synchronous call.").optional().only(MCP).ex("5000"),
    f("workload.tools[].weight", Unit::Count, (1.0, 1_000_000.0), "Relative share of call nodes calling this tool.").ex("4"),
    f("workload.tools[].duration_ms", Unit::Ms, (0.0, WEEK), "How long the work runs on the server, drawn per call node.").pair().ex("[2000, 120000]"),
    f("workload.tools[].fail_rate", Unit::Rate, RATE, "Probability the work ends failed. With `tool_error_rate` at most 1.").ex("0.1"),
    f("workload.tools[].tool_error_rate", Unit::Rate, RATE, "Probability the work completes with a tool error (`isError`).").ex("0.05"),
    f("workload.tools[].input_rate", Unit::Rate, RATE, "Probability the work asks for input (one or two rounds) while it runs.").only(MCP).ex("0.3"),
    f("workload.tools[].blocks", Unit::Count, (0.0, 100.0), "Content blocks in the result, drawn per call node.").pair().ex("[1, 3]"),
    f("workload.caller.cancel_rate", Unit::Rate, RATE, "Probability the caller cancels a call node.").ex("0.2"),
    f("workload.caller.cancel_by_request_rate", Unit::Rate, RATE, "Of the cancels, the share an operator makes through the ledger (`toolop cancel NODE` from another terminal) instead of clicking in the caller; drawn per cancelled call node. A running executor finds the request on its next look (`executor.cancel_request_check_ms`), one that starts at once. A call node the ledger does not hold yet is cancelled by a click.").ex("0.5"),
    f("workload.caller.cancel_after_ms", Unit::Ms, (0.0, WEEK), "How long after its submission a cancel or detach comes, drawn per call node.").pair().ex("[500, 60000]"),
    f("workload.caller.detach_rate", Unit::Rate, RATE, "Probability the caller stops waiting (never a server-side cancel).").ex("0.1"),

    f("approval.delay_ms", Unit::Ms, (0.0, DAY), "How long the approval agent takes to answer, drawn per round.").pair().only(MCP).ex("[100, 5000]"),
    f("approval.decline_rate", Unit::Rate, RATE, "Probability the approval agent declines.").only(MCP).ex("0.1"),
    f("approval.silent_rate", Unit::Rate, RATE, "Probability the approval agent never answers (the executor's deadline must decline).").only(MCP).ex("0.05"),

    f("limits.sim_time_ms", Unit::Ms, (1_000.0, WEEK), "Simulated time a series may use. The world ends the series at this time whatever it is doing, and says so in its end reason.").ex("14400000"),
    f("limits.max_events", Unit::Count, (1.0, 10_000_000.0), "Trace events a series may record; past it the trace stops and the series ends.").ex("200000"),

    f("faults.rates.<fault>", Unit::Rate, RATE, "The MAXIMUM rate of a fault, not its rate. Each series enables the fault with probability `faults.swarm_enable_rate` and then draws its rate uniformly in [0, this]; the rate is the probability that the fault fires at each of its decision points. So `poll_503 = 0.8` gives a series no 503s at all half the time (at the default enable rate) and otherwise a rate somewhere in [0, 0.8]; `run` and `replay` print the drawn rates. Keys: the fault names below; a fault no lane's protocol can express is refused.").ex("0.1"),
    f("faults.swarm_enable_rate", Unit::Rate, RATE, "Probability that a configured fault is enabled in a given series (swarm testing: a few faults hard per series rather than all thinly).").ex("0.5"),
    f("faults.safety_window_ms", Unit::Ms, (0.0, WEEK), "Faults fire only during [0, this); then they are healed (the liveness phase).").ex("600000"),
    f("faults.liveness_bound_ms", Unit::Ms, (0.0, WEEK), "After the safety window every call node must settle within this long.").ex("3600000"),
    f("faults.restart_delay_ms", Unit::Ms, (0.0, DAY), "Downtime of a crashed or disconnected executor before it restarts, drawn per restart.").pair().ex("[100, 20000]"),
    f("faults.rollback_overlap_ms", Unit::Ms, (0.0, DAY), "How long a rolled-back executor keeps running beside its successor, drawn per rollback.").pair().ex("[1000, 30000]"),
    f("faults.rollback_at_ms", Unit::Ms, (0.0, WEEK), "When the operator rolls back (drawn per series, inside the safety window).").pair().ex("[1000, 120000]"),
    f("faults.short_ttl_ms", Unit::Ms, (1.0, DAY), "The server's maximum ttl when `server_deletes_running_task` is enabled, drawn per series.").pair().ex("[5000, 60000]"),
    f("faults.ledger_commit_ms", Unit::Ms, (0.0, DAY), "Simulated time every ledger commit takes between the executor's read and its write, drawn per commit, so other writers act in between; `[0, 0]`: commits are instant.").pair().ex("[0, 200]"),
    f("faults.process_pause_ms", Unit::Ms, (0.0, DAY), "How long an executor process hit by `process_pause` stays frozen (no steps, no beats), drawn per pause. The executor's guarantees hold for pauses shorter than its request timeout plus its beat timeout, less a beat interval (14 s by default): a replica takes a frozen sender's submission up only once its beat is stale, and concludes a request timeout later. Without beats (`executor.beat_interval_ms = 0`) no such bound holds: see that field. Pauses do not chain: a thawed process runs for the longest pause before it may freeze again.").pair().ex("[2000, 8000]"),
    f("faults.slow_commit_ms", Unit::Ms, (0.0, DAY), "How long a commit hit by `ledger_slow_commit` takes, drawn per commit.").pair().ex("[1000, 15000]"),
    f("faults.second_executor_ms", Unit::Ms, (0.0, DAY), "How long a `second_executor` replica runs beside the current executor, drawn per replica.").pair().ex("[5000, 120000]"),

    f("gates.max_divergences", Unit::Count, (0.0, NONE_ABOVE), "Accepted terminal states that differ from the server's ground truth, over the sweep.").ex("0"),
    f("gates.max_second_operations", Unit::Count, (0.0, NONE_ABOVE), "Second server operations for one call node, over the sweep.").ex("0"),
    f("gates.max_qps", Unit::PerSecond, (1.0, 100_000.0), "The poll-rate bound per one-second window the gate checks; left out: `executor.max_qps`.").optional().ex("20"),
    f("gates.cancel_confirmation_p99_ms", Unit::Ms, (1.0, WEEK), "The p99 of cancel click to outcome known (less time every executor was down) must be below this.").ex("60000"),
    f("gates.unknown_reconciliation_max_ms", Unit::Ms, (1.0, WEEK), "Every UNKNOWN call node must reach reconciliation within this.").ex("900000"),
    f("gates.outbox_traceable_min_pct", Unit::Percent, (0.0, 100.0), "Share of outbox entries that trace back to a receipt.").ex("100.0"),
    f("gates.max_false_unknown_pct", Unit::Percent, (0.0, 100.0), "Share of hand-offs to manual reconciliation that `no_false_unknown` finds false (the server still held the operation and had shown it); undecidable ones are excused and counted apart.").ex("0.0"),
    f("gates.max_receipts_per_node", Unit::Count, (1.0, 1.0), "Receipts a call node may have: always 1 (the property is not negotiable).").ex("1"),
    f("gates.coverage_min_hits", Unit::Count, (1.0, NONE_ABOVE), "Each reachable (fault, executor state) cell of an enabled fault must be hit this often over the sweep.").ex("1"),
    f("gates.coverage", Unit::Flag, ANY, "Judge the coverage matrix at all (off for fault-free scenarios).").ex("true"),
];

/// The field a concrete path (`workload.tools[2].weight`, `faults.rates.poll_503`) belongs to.
pub fn field_of(concrete: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| normalise(concrete) == f.path)
}

/// `workload.tools[2].weight` -> `workload.tools[].weight`; `faults.rates.x` -> `faults.rates.<fault>`.
pub fn normalise(concrete: &str) -> String {
    let mut out = String::with_capacity(concrete.len());
    let mut in_index = false;
    for c in concrete.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            c => out.push(c),
        }
    }
    match out.strip_prefix("faults.rates.") {
        Some(_) => "faults.rates.<fault>".into(),
        None => out,
    }
}

/// The profile names of a protocol (for messages).
pub fn profile_names(p: Protocol) -> Vec<&'static str> {
    p.profiles()
        .iter()
        .map(|f: &ServerProfile| f.name())
        .collect()
}
