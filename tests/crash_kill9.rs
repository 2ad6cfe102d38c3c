//! The kill -9 proof (issue 10, item 6), on real processes: `toolop` on a SQLite ledger file
//! against real TypeScript SDK peers, killed at every `CrashPoint` and at seeded random instants,
//! restarted, with an outbox consumer process killed too; then judged from the servers' records
//! and the ledger file. `make test` runs it with at least 200 kills; `make crash-soak KILLS=N`
//! runs N. The seed and the command that reproduces a failure are printed with it.
//!
//! Its own `main` (harness = false): the binary is also the consumer process
//! (`crash_kill9 consumer LEDGER`, `crash_kill9 drain LEDGER`).

#[cfg(not(madsim))]
mod common;
#[cfg(not(madsim))]
mod crash;

/// Real processes, sockets and files only: nothing to run in a simulation build.
#[cfg(madsim)]
fn main() {}

#[cfg(not(madsim))]
use std::path::Path;
#[cfg(not(madsim))]
use std::time::Instant;

#[cfg(not(madsim))]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(mode @ ("consumer" | "drain")) => {
            let ledger = args
                .get(2)
                .expect("usage: crash_kill9 consumer|drain LEDGER");
            if let Err(e) = crash::consumer::run(Path::new(ledger), mode == "drain") {
                eprintln!("crash_kill9 {mode}: {e}");
                std::process::exit(1);
            }
        }
        _ => prove(),
    }
}

#[cfg(not(madsim))]
fn prove() {
    let settings = crash::Settings::from_env();
    println!(
        "crash_kill9: seed {}, {} kills wanted (reproduce: {})",
        settings.seed,
        settings.kills,
        settings.repro()
    );
    let started = Instant::now();
    let mut driver = crash::Driver::new(settings);
    driver.run();
    let verdict = crash::world::judge(&driver);
    let t = &driver.tally;
    // Each way to die must have happened, or the run proved less than it says.
    let floor = (settings.kills / 10).max(1);
    for (what, n) in [
        ("after_commit_before_send", t.kills_commit_before_send),
        ("after_reply_before_commit", t.kills_reply_before_commit),
        ("random SIGKILL", t.kills_random),
    ] {
        if n < floor {
            driver.fail(&format!("only {n} kills at {what} (want at least {floor})"));
        }
    }
    if t.consumer_kills == 0 || verdict.consumed == 0 {
        driver.fail("the outbox consumer was never killed or never consumed anything");
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "crash_kill9: PASS seed {}: {} executor kills ({} after_commit_before_send, {} after_reply_before_commit, {} random SIGKILL), {} consumer kills, {} cancels from another process, {} processes in {} rounds, {:.1} s ({:.1} kills/s); armed but not reached {}, SIGKILL after exit {}",
        settings.seed,
        t.kills(),
        t.kills_commit_before_send,
        t.kills_reply_before_commit,
        t.kills_random,
        t.consumer_kills,
        t.cancels,
        t.attempts,
        t.rounds,
        secs,
        t.kills() as f64 / secs,
        t.armed_but_not_hit,
        t.random_too_late
    );
    let outcomes: Vec<String> = verdict
        .receipts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    println!(
        "crash_kill9: {} call nodes: receipts {}; {} in manual reconciliation; {} outbox entries consumed exactly once",
        verdict.nodes,
        outcomes.join(", "),
        verdict.reconciliation,
        verdict.consumed
    );
    let _ = std::fs::remove_dir_all(&driver.dir);
}
