use super::*;
use crate::ledger::tests::fixtures::rec;
use crate::record::AdapterId;

fn target(port: u16) -> Target {
    Target::Mcp {
        url: format!("http://127.0.0.1:{port}/mcp"),
        protocol: AdapterId::Mcp20251125,
    }
}

#[test]
fn one_file_holds_ledger_and_cli_tables_for_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let a = LedgerStore::open(&path).unwrap();
    let b = LedgerStore::open(&path).unwrap();
    assert_eq!(
        a.origin_unix_ms(),
        b.origin_unix_ms(),
        "the first origin stays"
    );
    // Targets: written by one handle, read by the other; the first one stays.
    a.set_target("n1", &target(1)).unwrap();
    b.set_target("n1", &target(2)).unwrap();
    assert_eq!(b.targets().unwrap().get("n1"), Some(&target(1)));
    // Sessions: shared through the swap (a_kept_session_is_swapped_only_from_the_one_expected).
    assert_eq!(a.kept_session(&target(1)).unwrap(), None);
    // The ledger is shared too: a record and a cancel request written through one are seen by
    // the other, and the epoch is the ledger's.
    a.with(|l| l.insert(rec("n1"), 1)).unwrap();
    b.with(|l| l.request_cancel("n1", 5)).unwrap();
    assert_eq!(a.with(|l| l.cancel_requests()).unwrap().len(), 1);
    b.with(|l| l.bump_epoch()).unwrap();
    assert_eq!(a.with(|l| l.current_epoch()).unwrap(), 2);
    // Resolutions: only for a call node the ledger has; the last decision stands.
    let r = |outcome: &str| Resolution {
        call_node_id: "n1".into(),
        outcome: outcome.into(),
        note: String::new(),
        at_unix_ms: 9,
    };
    a.resolve(&r("failed")).unwrap();
    b.resolve(&r("completed")).unwrap();
    assert_eq!(a.resolutions().unwrap()["n1"].outcome, "completed");
    let ghost = Resolution {
        call_node_id: "ghost".into(),
        ..r("failed")
    };
    assert_eq!(a.resolve(&ghost).err().map(|f| f.code), Some(EXIT_LEDGER));
    drop((a, b));
    // Reopened: everything is still there, nothing but the one file was written (WAL files
    // aside).
    let c = LedgerStore::open(&path).unwrap();
    assert_eq!(c.targets().unwrap().len(), 1);
    assert_eq!(c.resolutions().unwrap().len(), 1);
    assert_eq!(c.with(|l| l.records()).unwrap().len(), 1);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect();
    assert_eq!(names, ["toolop.db"]);
}

#[test]
fn a_path_that_cannot_be_a_ledger_is_bad_usage_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("old.db");
    std::fs::write(&journal, "{\"op\":\"insert\"}\n").unwrap();
    let missing = dir.path().join("no/such/dir/toolop.db");
    for (path, says) in [
        (dir.path().to_path_buf(), "is a directory"),
        (missing, "does not exist"),
        (journal.clone(), "not an SQLite database"),
    ] {
        let f = LedgerStore::open(&path).err().expect("refused");
        assert_eq!(f.code, crate::cli::EXIT_USAGE, "{}", f.message);
        assert!(f.message.contains(says), "{}", f.message);
        assert!(
            f.message.contains(&path.display().to_string()),
            "{}",
            f.message
        );
    }
    // Nothing was written over the file that is not a ledger.
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap(),
        "{\"op\":\"insert\"}\n"
    );
}

#[test]
fn cli_tables_from_a_newer_toolop_are_refused_as_a_ledger_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    drop(LedgerStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute("UPDATE cli_meta SET schema_version = 99", [])
        .unwrap();
    drop(conn);
    let f = LedgerStore::open(&path).err().expect("refused");
    assert_eq!(f.code, EXIT_LEDGER);
    assert!(f.message.contains("newer toolop"), "{}", f.message);
}

/// The session store processes share swaps: a new session replaces the kept one only if that
/// is still the one the process expected; otherwise the process is told the one kept.
#[test]
fn a_kept_session_is_swapped_only_from_the_one_expected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolop.db");
    let (a, b) = (
        LedgerStore::open(&path).unwrap(),
        LedgerStore::open(&path).unwrap(),
    );
    let s = |id: &str| KeptSession {
        session_id: id.into(),
        initialize_reply: format!("{{\"id\":\"{id}\"}}"),
    };
    let (sa, sb) = (
        a.session_store(&target(1)).unwrap(),
        b.session_store(&target(1)).unwrap(),
    );
    // Nothing kept: the first process to open one keeps it; the second, expecting nothing too,
    // is told the first's.
    assert_eq!(sa.swap(None, &s("s1")), Some(s("s1")));
    assert_eq!(sb.swap(None, &s("s2")), Some(s("s1")));
    // Both lose s1: the first to swap from it keeps its own, the second adopts it.
    assert_eq!(sb.swap(Some("s1"), &s("s3")), Some(s("s3")));
    assert_eq!(sa.swap(Some("s1"), &s("s4")), Some(s("s3")));
    assert_eq!(a.kept_session(&target(1)).unwrap(), Some(s("s3")));
    // Per target.
    let other = a.session_store(&target(2)).unwrap();
    assert_eq!(other.swap(Some("s3"), &s("s5")), Some(s("s5")));
    assert_eq!(b.kept_session(&target(1)).unwrap(), Some(s("s3")));
}
