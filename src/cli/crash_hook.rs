//! Fault injection for the kill -9 proof (`tests/crash_kill9.rs`), and nothing else. Off unless
//! the environment variable [`CRASH_HOOK_ENV`] is set to `POINT:N`, where `POINT` is a
//! [`CrashPoint`] name (`after_commit_before_send`, `after_reply_before_commit`) and `N >= 1`:
//! the process then aborts at the N-th time any of its runners reaches that point, with no
//! destructor, flush or shutdown run, as a kill -9 there would leave it. The driver cannot time a
//! SIGKILL to land between a commit and its send; the process can, so it stops itself there.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::runner::{CrashPoint, CrashPoints};

pub const CRASH_HOOK_ENV: &str = "TOOLOP_FAULT_INJECT_CRASH";

/// Hits of the armed point in this process, across every runner it starts.
static HITS: AtomicU64 = AtomicU64::new(0);

pub struct EnvCrash {
    point: CrashPoint,
    at_hit: u64,
}

fn point_named(name: &str) -> Option<CrashPoint> {
    match name {
        "after_commit_before_send" => Some(CrashPoint::AfterCommitBeforeSend),
        "after_reply_before_commit" => Some(CrashPoint::AfterReplyBeforeCommit),
        _ => None,
    }
}

/// The armed hook, `None` when the variable is unset; a malformed value is an error naming it.
pub fn from_env() -> Result<Option<EnvCrash>, String> {
    let Ok(value) = std::env::var(CRASH_HOOK_ENV) else {
        return Ok(None);
    };
    parse(&value).map(Some).ok_or_else(|| {
        format!(
            "{CRASH_HOOK_ENV}={value}: expected after_commit_before_send:N or \
             after_reply_before_commit:N with N >= 1"
        )
    })
}

fn parse(value: &str) -> Option<EnvCrash> {
    let (name, n) = value.split_once(':')?;
    let at_hit = n.parse::<u64>().ok().filter(|n| *n >= 1)?;
    Some(EnvCrash {
        point: point_named(name)?,
        at_hit,
    })
}

impl CrashPoints for EnvCrash {
    fn crash_here(&mut self, point: CrashPoint, node: &str) -> bool {
        if point == self.point && HITS.fetch_add(1, Ordering::SeqCst) + 1 == self.at_hit {
            let name = serde_json::to_value(point).unwrap_or_default();
            eprintln!(
                "toolop: fault injection ({CRASH_HOOK_ENV}): aborting at {} hit {} (call node {node})",
                name.as_str().unwrap_or("?"),
                self.at_hit
            );
            std::process::abort();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_points_and_refuses_anything_else() {
        let armed = parse("after_commit_before_send:3").unwrap();
        assert_eq!(
            (armed.point, armed.at_hit),
            (CrashPoint::AfterCommitBeforeSend, 3)
        );
        let armed = parse("after_reply_before_commit:1").unwrap();
        assert_eq!(armed.point, CrashPoint::AfterReplyBeforeCommit);
        for bad in [
            "after_commit_before_send",
            "after_commit_before_send:0",
            "after_commit_before_send:x",
            "before_anything:2",
            "",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
