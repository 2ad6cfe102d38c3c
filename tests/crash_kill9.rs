//! The kill -9 proof (issue 10, item 6), on real processes: `toolop` on a SQLite ledger file
//! against real TypeScript SDK peers, killed at every `CrashPoint` and at seeded random instants,
//! restarted, with an outbox consumer process killed too; then judged from the servers' records
//! and the ledger file. `make test` runs it with at least 200 kills; `make crash-soak KILLS=N`
//! runs N. The seed and the command that reproduces a failure are printed with it.
//!
//! Its own `main` (harness = false): the binary is also the consumer process (started with
//! `TOOLOP_CRASH_CONSUMER=consume|drain` and `TOOLOP_CRASH_LEDGER=FILE`).

#[cfg(not(madsim))]
mod common;
#[cfg(not(madsim))]
mod crash;

/// Real processes, sockets and files only: nothing to run in a simulation build.
#[cfg(madsim)]
fn main() {}

#[cfg(not(madsim))]
use std::time::Instant;

#[cfg(not(madsim))]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    match crash::consumer::role_from_env() {
        Some((drain, ledger)) => {
            if let Err(e) = crash::consumer::run(&ledger, drain) {
                eprintln!("crash_kill9 consumer: {e}");
                std::process::exit(1);
            }
        }
        _ if selected(&args[1..]) => prove(),
        // Filtered out, as libtest would: `cargo test some_other_test` does not pay a minute.
        _ => println!("crash_kill9: filtered out"),
    }
}

/// libtest's selection for this binary's one test, `crash_kill9`: every positional argument
/// is a filter (a substring, or the whole name with `--exact`), `--skip F` drops it when F
/// matches, `--ignored` selects ignored tests only (this one is not), `--list` lists it. The
/// other options that take a value are passed over with it.
#[cfg(not(madsim))]
fn selected(args: &[String]) -> bool {
    const NAME: &str = "crash_kill9";
    const WITH_VALUE: [&str; 6] = [
        "--test-threads",
        "--color",
        "--format",
        "--logfile",
        "--shuffle-seed",
        "-Z",
    ];
    let exact = args.iter().any(|a| a == "--exact");
    let matches = |f: &str| if exact { f == NAME } else { NAME.contains(f) };
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--list" => {
                println!("{NAME}: test");
                return false;
            }
            "--ignored" => return false,
            "--skip" => {
                if it.next().is_some_and(|f| matches(f)) {
                    return false;
                }
            }
            opt if WITH_VALUE.contains(&opt) => {
                it.next();
            }
            opt if opt.starts_with('-') => {}
            filter => filters.push(filter),
        }
    }
    filters.is_empty() || filters.iter().any(|f| matches(f))
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
    // Any panic (a peer that does not start, a process that cannot be spawned) names the seed
    // and the command too, not only the verdict's failures.
    let repro = settings.repro();
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        eprintln!("crash_kill9: reproduce: {repro}");
    }));
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
        "crash_kill9: PASS seed {}: {} executor kills ({} after_commit_before_send, {} after_reply_before_commit, {} random SIGKILL), {} consumer kills, {} cancels from another process, {} overlapping executors, {} attempts in {} rounds, {:.1} s ({:.1} kills/s); armed but not reached {}, SIGKILL after exit {}",
        settings.seed,
        t.kills(),
        t.kills_commit_before_send,
        t.kills_reply_before_commit,
        t.kills_random,
        t.consumer_kills,
        t.cancels,
        t.overlaps,
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
        "crash_kill9: {} call nodes: receipts {}; {} in manual reconciliation ({} of them on the lookup peer after the submission bound); {} outbox entries consumed exactly once",
        verdict.nodes,
        outcomes.join(", "),
        verdict.reconciliation,
        verdict.crash_loop_bound,
        verdict.consumed
    );
    let _ = std::fs::remove_dir_all(&driver.dir);
}
