//! Ledger throughput on this machine (a benchmark, not a test): plain commits per second and
//! acceptance transactions per second, for SQLite on a file (WAL with synchronous NORMAL and
//! FULL), SQLite in memory, and the in-memory ledger.
//!
//! `cargo run --release --example ledger_bench -- [--records N]` (or `make ledger-bench`).
//! Each record is inserted, committed `COMMITS_PER_RECORD` times (what polling writes), then
//! accepted (receipt + outbox entry in one transaction). One writer, one thread: this is the
//! cost of one transaction, not of contention.

// Simulation builds compile only the stub `main` below.
#![cfg_attr(madsim, allow(dead_code, unused_imports))]

use std::time::Instant;

use toolop::core::{AcceptBasis, AcceptSpec};
use toolop::ledger::{
    Ledger, MemoryLedger, SqliteLedger, SqliteOptions, Synchronous, Write, INITIAL_EPOCH,
};
use toolop::record::{AdapterId, LocalState, TerminalState, ToolOperation};

const COMMITS_PER_RECORD: u64 = 4;

struct Figures {
    commits_per_s: f64,
    accepts_per_s: f64,
}

fn write(r: &ToolOperation, next: ToolOperation, accept: Option<AcceptSpec>) -> Write {
    Write {
        expected_version: r.version,
        writer_epoch: INITIAL_EPOCH,
        record: next,
        accept,
        reconcile: None,
        effect: None,
        now_ms: 1,
    }
}

fn run(l: &mut dyn Ledger, records: u64) -> Result<Figures, String> {
    let fail = |e: toolop::ledger::LedgerError| e.to_string();
    let mut ready = Vec::with_capacity(records as usize);
    let started = Instant::now();
    let mut commits = 0u64;
    for i in 0..records {
        let id = format!("n{i:07}");
        let rec = ToolOperation::new(
            &id,
            "report",
            "v1",
            serde_json::json!({"month": "2026-10", "i": i}),
            AdapterId::Mcp20251125,
            &format!("k-{id}"),
            INITIAL_EPOCH,
            0,
            60_000,
        );
        let mut r = l.insert(rec, INITIAL_EPOCH).map_err(fail)?;
        for c in 0..COMMITS_PER_RECORD {
            let mut next = r.clone();
            next.local_state = LocalState::Working;
            next.operation_id = Some(format!("op-{id}"));
            next.poll_cursor.sent_seq = c + 1;
            next.poll_cursor.applied_seq = c + 1;
            r = l.commit(write(&r, next, None)).map_err(fail)?;
            commits += 1;
        }
        ready.push(r);
    }
    let commit_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for r in &ready {
        let mut next = r.clone();
        next.local_state = LocalState::Accepted;
        next.result_digest = Some("d".into());
        let spec = AcceptSpec {
            terminal: TerminalState::Completed,
            result_digest: Some("d".into()),
            payload: Some(
                serde_json::json!({"content": [{"type": "text", "text": "report ready"}]}),
            ),
            basis: AcceptBasis::of(r),
        };
        l.commit(write(r, next, Some(spec))).map_err(fail)?;
    }
    let accept_s = started.elapsed().as_secs_f64();
    // Inserts are transactions too; they are counted with the commits.
    Ok(Figures {
        commits_per_s: (commits + records) as f64 / commit_s,
        accepts_per_s: records as f64 / accept_s,
    })
}

#[cfg(not(madsim))]
fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut records = 2_000u64;
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--records", Some(n)) => {
                records = n
                    .parse()
                    .map_err(|_| format!("--records: {n:?} is not a number"))?
            }
            _ => {
                return Err(format!(
                    "unknown argument {a:?}; usage: ledger_bench [--records N]"
                ))
            }
        }
    }
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    println!("{records} records, {COMMITS_PER_RECORD} commits each (+ the insert), then one acceptance each");
    println!(
        "{:<28} {:>14} {:>18}",
        "LEDGER", "COMMITS/S", "ACCEPTANCES/S"
    );
    let file = |name: &str, synchronous| {
        SqliteLedger::open_with(
            dir.path().join(name),
            SqliteOptions {
                synchronous,
                ..SqliteOptions::default()
            },
        )
        .map_err(|e| e.to_string())
    };
    let mut ledgers: Vec<(&str, Box<dyn Ledger>)> = vec![
        (
            "sqlite file, WAL + NORMAL",
            Box::new(file("normal.db", Synchronous::Normal)?),
        ),
        (
            "sqlite file, WAL + FULL",
            Box::new(file("full.db", Synchronous::Full)?),
        ),
        (
            "sqlite in memory",
            Box::new(SqliteLedger::open_in_memory().map_err(|e| e.to_string())?),
        ),
        ("memory ledger", Box::new(MemoryLedger::new())),
    ];
    for (name, l) in &mut ledgers {
        let f = run(l.as_mut(), records)?;
        println!(
            "{name:<28} {:>14.0} {:>18.0}",
            f.commits_per_s, f.accepts_per_s
        );
    }
    Ok(())
}

/// Files are compiled out of simulation builds; this benchmark measures real ones.
#[cfg(madsim)]
fn main() {
    eprintln!("ledger_bench measures SQLite files: build it without --cfg madsim");
}
