//! Always: a process whose crash fail point fired writes nothing more. A real crash (kill -9, a
//! power cut) runs no clean-up, so an executor that writes on its way down (ends its beat, marks
//! a record, commits what it was holding) would pass the simulator and behave otherwise in life.
//! The world's ledger front of the crashed process refuses every such write and records it
//! (`WorldAction::WriteAfterCrash`); each record is a violation.

use super::view::{judge, View};
use super::Violation;
use crate::trace::{Trace, What, WorldAction};

pub const NAME: &str = "nothing_written_after_crash";

pub fn check(trace: &Trace) -> Vec<Violation> {
    judge(trace, violations)
}

pub fn violations(v: &View) -> Vec<Violation> {
    v.trace
        .events
        .iter()
        .filter_map(|e| match &e.what {
            What::World {
                action:
                    WorldAction::WriteAfterCrash {
                        incarnation,
                        write,
                        node,
                    },
            } => Some(Violation {
                checker: NAME,
                node: node.clone(),
                detail: format!(
                    "executor incarnation {incarnation} crashed and then tried a ledger {write} at {} ms: a dead process writes nothing",
                    e.t_ms
                ),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::checkers::testkit::{assert_clean, happy, SETTLED};

    #[test]
    fn a_write_after_a_crash_is_a_violation_and_a_crash_alone_is_not() {
        assert_clean(check);
        let mut b = happy("n1", 0);
        b.at(10).push(What::World {
            action: WorldAction::ExecutorDown {
                incarnation: 1,
                exit: "crashed".into(),
            },
        });
        assert_eq!(check(&b.build(SETTLED)), vec![]);
        b.at(10).push(What::World {
            action: WorldAction::WriteAfterCrash {
                incarnation: 1,
                write: "end_beat".into(),
                node: None,
            },
        });
        let v = check(&b.build(SETTLED));
        assert_eq!(v.len(), 1);
        assert!(
            v[0].detail.contains("tried a ledger end_beat at 10 ms"),
            "{}",
            v[0].detail
        );
    }
}
