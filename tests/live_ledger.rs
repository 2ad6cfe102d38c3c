//! `toolop` on its SQLite ledger, real processes: the executor epoch comes from the ledger (a
//! bump fences a running `toolop call`, and `toolop resume` takes the call over under the new
//! epoch), and a ledger that cannot be used is a clear error with its own exit code.
#![cfg(not(madsim))]

mod common;

use common::{code, run, spawn, status, text, wait_status, Peer, Sdk, TempLedger};
use toolop::ledger::{Ledger, SqliteLedger};

/// A rollback while `toolop call` polls: the ledger moves to epoch 2 behind the running
/// process. Its next write is refused, it stops waiting and exits 4 saying why; `toolop
/// resume` (a new process, epoch 2) finishes the call: one receipt, one task on the server.
#[test]
fn an_epoch_bump_fences_a_running_call_and_resume_takes_it_over() {
    let peer = Peer::start(Sdk::Ts, &[]);
    let ledger = TempLedger::new("fence");
    let url = peer.url();
    let child = spawn(
        &ledger,
        &[
            "call",
            "--server",
            &url,
            "--tool",
            "slow_job",
            "--args",
            r#"{"ms":3000}"#,
            "--node",
            "f1",
        ],
    );
    let s = wait_status(&ledger, "f1", "WORKING with a poll", |s| {
        s["local_state"] == "WORKING" && s["polls"].as_u64() >= Some(1)
    });
    assert_eq!(s["epoch"], 1);
    let key = s["submission_key"].as_str().unwrap().to_string();
    let bumped = SqliteLedger::open(ledger.path())
        .unwrap()
        .bump_epoch()
        .unwrap();
    assert_eq!(bumped, 2);
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 4, "{}", text(&out));
    assert!(
        text(&out).contains("left to a newer executor epoch") && text(&out).contains("epoch 2"),
        "{}",
        text(&out)
    );
    let s = status(&ledger, "f1");
    assert_eq!(
        s["receipt"],
        serde_json::Value::Null,
        "the fenced process wrote no outcome"
    );
    assert_eq!(s["epoch"], 1);
    let out = run(&ledger, &["resume"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let s = status(&ledger, "f1");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(
        s["receipt"]["execution_epoch"], 2,
        "accepted by the new epoch"
    );
    let l = SqliteLedger::open(ledger.path()).unwrap();
    assert_eq!(l.receipts().unwrap().len(), 1);
    assert_eq!(l.outbox().unwrap().len(), 1);
    assert_eq!(peer.creations(&key), 1, "exactly one task for the key");
}

/// A path that cannot be a ledger is bad usage (exit 2) and is left as it was; a file that
/// claims to be SQLite but is broken is a ledger failure (exit 5). Both name the file.
#[test]
fn an_unusable_ledger_is_refused_with_its_own_exit_code() {
    let ledger = TempLedger::new("broken");
    let path = ledger.path();
    let shown = path.display().to_string();
    std::fs::write(&path, "{\"op\":\"insert\"}\n").unwrap();
    for args in [vec!["status"], vec!["resume"], vec!["cancel", "n1"]] {
        let out = run(&ledger, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not an SQLite database") && err.contains(&shown),
            "{err}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"op\":\"insert\"}\n"
    );
    // The SQLite header, then garbage: SQLite itself refuses it.
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(std::iter::repeat_n(0xA5u8, 8192));
    std::fs::write(&path, &bytes).unwrap();
    let out = run(&ledger, &["status"]);
    assert_eq!(code(&out), 5, "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&shown) && err.contains("ledger storage failed"),
        "{err}"
    );
    assert!(
        !err.contains("Storage(") && !err.contains("{ "),
        "Debug text in {err}"
    );
}
