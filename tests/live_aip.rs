//! AIP-151 over real HTTP/JSON: the adapter's URL templates from `aip.toml`, sent by the AIP
//! transport to a live service; completion, failure, a cancel from a second process, and kill
//! -9 then resume with one operation per key.
#![cfg(not(madsim))]

mod common;

use common::{code, run, status, text, wait_status, Peer, Sdk, TempLedger};

fn config() -> String {
    common::root()
        .join("tests/peers/python/aip.toml")
        .display()
        .to_string()
}

fn call(
    ledger: &TempLedger,
    peer: &Peer,
    node: &str,
    tool: &str,
    args: &str,
) -> std::process::Output {
    let cfg = config();
    let base = peer.base();
    run(
        ledger,
        &[
            "call",
            "--aip",
            &base,
            "--aip-config",
            &cfg,
            "--tool",
            tool,
            "--args",
            args,
            "--node",
            node,
        ],
    )
}

#[test]
fn aip_operations_complete_fail_and_count_one_creation_per_key() {
    let peer = Peer::start(Sdk::Aip, &[]);
    let ledger = TempLedger::new("aip");
    let out = call(
        &ledger,
        &peer,
        "a1",
        "build_report",
        r#"{"month":"2026-11"}"#,
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let s = status(&ledger, "a1");
    assert_eq!(s["receipt"]["terminal_state"], "completed");
    assert_eq!(s["payload"]["text"], "report for 2026-11");
    assert_eq!(peer.creations(s["submission_key"].as_str().unwrap()), 1);
    let out = call(&ledger, &peer, "a2", "failing_job", "{}");
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert_eq!(status(&ledger, "a2")["receipt"]["terminal_state"], "failed");
    // A tool the configuration does not list is refused before anything is sent.
    let out = call(&ledger, &peer, "a3", "unlisted", "{}");
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert_eq!(status(&ledger, "a3")["local_state"], "REJECTED");
    assert_eq!(peer.stats()["operations_created"], 2);
}

#[test]
fn aip_cancel_and_kill_9_then_resume() {
    let peer = Peer::start(Sdk::Aip, &[]);
    let ledger = TempLedger::new("aip-kill");
    let (base, cfg) = (peer.base(), config());
    let spawn = |node: &str, args: &str| {
        common::spawn(
            &ledger,
            &[
                "call",
                "--aip",
                &base,
                "--aip-config",
                &cfg,
                "--tool",
                "slow_job",
                "--args",
                args,
                "--node",
                node,
            ],
        )
    };
    let child = spawn("c1", r#"{"ms":20000}"#);
    wait_status(&ledger, "c1", "WORKING", |s| s["local_state"] == "WORKING");
    assert_eq!(code(&run(&ledger, &["cancel", "c1"])), 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out));
    // AIP cancel is best effort: the done operation (error code 1) says who won.
    assert_eq!(
        status(&ledger, "c1")["receipt"]["terminal_state"],
        "cancelled"
    );

    let mut child = spawn("k1", r#"{"ms":3000}"#);
    let s = wait_status(&ledger, "k1", "WORKING with a poll", |s| {
        s["local_state"] == "WORKING" && s["polls"].as_u64() >= Some(1)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let out = run(&ledger, &["resume"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(
        status(&ledger, "k1")["receipt"]["terminal_state"],
        "completed"
    );
    assert_eq!(peer.creations(s["submission_key"].as_str().unwrap()), 1);
}

#[test]
fn a_bad_aip_config_is_refused_naming_file_and_field() {
    let ledger = TempLedger::new("aip-bad");
    let cfg = ledger.dir().join("aip.toml");
    std::fs::write(&cfg, "submit_path = \"/v1/x\"\noperation_path = \"/v1/{name}\"\noperations_collection = \"/v1/operations\"\ntools = [\"t\"]\n").unwrap();
    let out = run(
        &ledger,
        &[
            "call",
            "--aip",
            "http://127.0.0.1:9",
            "--aip-config",
            cfg.to_str().unwrap(),
            "--tool",
            "t",
        ],
    );
    assert_eq!(code(&out), 2, "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("aip.toml") && err.contains("submit_path"),
        "{err}"
    );
}
