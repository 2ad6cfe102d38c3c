//! `toolop-sim list scenarios|faults|checkers|gates`: one line of meaning each.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use toolop_sim::judge::checkers::CHECKERS;
use toolop_sim::scenario::{Protocol, Scenario};
use toolop_sim::series::faults::{catalogue, FaultKind};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum What {
    /// The scenario files in a folder (default `scenarios/`): name, protocol, first comment line.
    Scenarios,
    /// Every fault of the catalogue and the protocols that can express it.
    Faults,
    /// Every always-property checked on every series.
    Checkers,
    /// Every gate a sweep is judged by.
    Gates,
}

/// One line per checker; kept next to the list command so the judge's code stays as it is. A
/// test fails when a checker has no line here.
pub const CHECKER_LINES: &[(&str, &str)] = &[
    (
        "no_send_after_receipt",
        "once a call node has settled, nothing more is sent for it",
    ),
    (
        "outbox_payload_matches_truth",
        "every outbox entry's terminal state and payload are the server's",
    ),
    (
        "clicked_cancel_is_acted_on",
        "a cancel the caller clicked reaches the server while the operation still runs",
    ),
    (
        "no_false_unknown",
        "nothing is handed to manual reconciliation that could still have been resolved",
    ),
    (
        "poll_interval_honoured",
        "no call node is polled sooner than the server's suggested interval allows",
    ),
    (
        "at_most_one_receipt",
        "at most one terminal receipt per call node",
    ),
    (
        "cancel_only_when_asked",
        "the executor cancels on the server only after the caller asked",
    ),
    (
        "completed_needs_verified_result",
        "completed never advances downstream without a fetched, verified result",
    ),
    (
        "input_answer_matches_round",
        "an input round is answered with the answer given for that round",
    ),
    (
        "no_action_from_old_epoch",
        "once a newer execution epoch resumed a call node, the older one acts on it no more",
    ),
    (
        "no_advance_after_cancel",
        "after a successful cancel, a late completion never advances",
    ),
    (
        "no_blind_resubmit",
        "a call node is submitted again only on proof the earlier submission created nothing",
    ),
    (
        "no_divergence",
        "the accepted terminal state equals the server's ground truth",
    ),
    (
        "no_second_operation",
        "no second server operation from a duplicate submission",
    ),
    (
        "no_stale_overwrite",
        "a late answer never overwrites a newer one",
    ),
    (
        "outbox_traceable",
        "every downstream advance traces back to a terminal receipt",
    ),
    (
        "poll_rate_within_bound",
        "never more than max_qps requests in any one-second window",
    ),
    (
        "retired_adapter_drains",
        "a retired adapter starts no new work and its in-flight work settles",
    ),
    (
        "retry_after_honoured",
        "after a 429 or 503 with Retry-After, no request before it has passed",
    ),
    (
        "settles_within_bound",
        "every submitted call node settles within the liveness bound after faults heal",
    ),
    (
        "shadow_never_reaches_outbox",
        "an operation run in shadow mode never advances downstream",
    ),
    (
        "unknown_is_queryable",
        "every UNKNOWN operation is queryable by task id or submission key",
    ),
    (
        "no_lost_update",
        "a ledger write lands only on the version its writer last read (no silent lost update)",
    ),
    (
        "no_write_from_fenced_epoch",
        "once the ledger's epoch moved past a process's, nothing it writes lands",
    ),
    (
        "digest_kept_across_restart",
        "once a result digest is in the ledger, no later write records another for the node",
    ),
    (
        "no_needless_effect_reconciliation",
        "a person is asked about a side effect only after the server showed a cancelled task ending",
    ),
    (
        "stall_only_behind_another_process",
        "a node is rescued from having nothing armed only when another process of its epoch drove it",
    ),
    (
        "task_calls_only_where_listed",
        "a call is task-augmented only for a tool whose listed descriptor allows tasks",
    ),
    (
        "runnable_call_not_refused",
        "a call the executor is configured to run synchronously is never refused by it locally",
    ),
    (
        "nothing_written_after_crash",
        "a process whose crash fail point fired writes nothing more to the ledger",
    ),
    (
        "sync_reply_awaited",
        "a synchronous call of a slow tool is waited for up to the bound the tool published",
    ),
    (
        "effect_reconciliation_raised",
        "a task shown ending after its confirmed cancel, read by the accepting process, reaches a person",
    ),
    (
        "cancel_within_budget",
        "once a cancel is asked for, no more cancels reach the server than max_cancel_attempts allows",
    ),
    (
        "cancel_requeried_on_time",
        "a node whose cancel is out and undecided is read again within the cancel requery interval",
    ),
];

/// One line per gate (the rows of every gate table).
pub const GATE_LINES: &[(&str, &str)] = &[
    ("terminal_state_divergence", "series whose accepted terminal state differs from the server's: must be 0"),
    ("second_operations", "duplicate server operations from one call node: must be 0"),
    ("poll_rate_per_second", "the busiest one-second window of requests, against max_qps"),
    ("cancel_confirmation_p99_ms", "p99 time from a cancel request to its confirmation, executor downtime and waits a 429/503 asked for left out"),
    ("unknown_reconciliation_max_ms", "longest time an operation stayed UNKNOWN before it was reconciled"),
    ("outbox_traceable_pct", "share of downstream advances traceable to a receipt, against gates.outbox_traceable_min_pct"),
    ("receipts_per_call_node", "terminal receipts per call node: at most 1"),
    ("checker_violations", "series with any checker violation: must be 0 (`toolop-sim list checkers`)"),
    ("coverage", "every reachable (fault, state) cell of each protocol hit at least the minimum number of times"),
];

pub fn list(what: What, folder: &Path) -> ExitCode {
    let out = match what {
        What::Scenarios => match scenarios(folder) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        What::Faults => faults(),
        What::Checkers => lines(CHECKERS.iter().map(|(n, _)| {
            let line = CHECKER_LINES.iter().find(|(c, _)| c == n).map(|(_, l)| *l);
            (n.to_string(), line.unwrap_or("").to_string())
        })),
        What::Gates => lines(
            GATE_LINES
                .iter()
                .map(|(n, l)| (n.to_string(), l.to_string())),
        ),
    };
    print!("{out}");
    ExitCode::SUCCESS
}

fn lines(rows: impl Iterator<Item = (String, String)>) -> String {
    let rows: Vec<(String, String)> = rows.collect();
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (n, l) in rows {
        let _ = writeln!(out, "{n:width$}  {l}");
    }
    out
}

fn faults() -> String {
    lines(FaultKind::ALL.iter().map(|&f| {
        let by: Vec<&str> = Protocol::ALL
            .iter()
            .filter(|&&p| catalogue::expresses(p, f))
            .map(|p| p.name())
            .collect();
        let by = if by.is_empty() {
            "no protocol".to_string()
        } else {
            by.join(", ")
        };
        (f.name(), format!("{} [{by}]", f.summary()))
    }))
}

fn scenarios(folder: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(folder)
        .map_err(|e| format!("cannot read the folder {}: {e}", folder.display()))?;
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(lines(files.iter().map(|p| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let first = text
            .lines()
            .find_map(|l| l.strip_prefix('#'))
            .map(str::trim)
            .unwrap_or("")
            .to_string();
        let head = match Scenario::load(p) {
            Ok(s) => format!("{} ({})", s.name, s.protocol),
            Err(_) => "does not load: run `toolop-sim run` on it for the error".into(),
        };
        (p.display().to_string(), format!("{head}: {first}"))
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_checker_has_a_line_and_no_line_is_stale() {
        for (name, _) in CHECKERS {
            assert!(
                CHECKER_LINES.iter().any(|(c, _)| *c == name),
                "checker {name} has no line in cli/list.rs"
            );
        }
        for (c, _) in CHECKER_LINES {
            assert!(CHECKERS.iter().any(|(n, _)| n == c), "{c} is no checker");
        }
    }
}
