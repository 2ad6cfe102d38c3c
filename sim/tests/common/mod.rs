//! What the end-to-end tests of the `toolop-sim` binary share: the repository root, a run of
//! the binary from there, and a fresh temporary folder per test and process.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `toolop-sim ARGS` from the repository root.
pub fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolop-sim"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap()
}

/// An empty temporary folder `toolop-<suite>-<name>-<pid>` (removed first if left over).
pub fn tmp(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("toolop-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
