//! The table of allowed local-state transitions. The core consults it on every hop; a hop not
//! listed here is refused and reported, never taken.

use crate::record::LocalState::{self, *};

/// Every allowed (from, to) pair. Beyond design.md section 3 this adds, each for a reason:
/// - SUBMITTING -> REJECTED: the server refused the submission outright (nothing was created).
/// - SUBMITTING -> ACCEPTED: a tool without task support ran synchronously under its upper
///   bound; its reply is the result.
/// - NOT_FOUND_SAFE -> SUBMITTING: re-submission with the same key after proof by key.
/// - X -> UNKNOWN: the executor cannot prove an outcome (budget spent, operation vanished,
///   no lookup by key): the item goes to manual reconciliation instead of being guessed.
pub const ALLOWED: &[(LocalState, LocalState)] = &[
    (Submitting, Working),
    (Submitting, SubmissionUnknown),
    (Submitting, Rejected),
    (Submitting, Accepted),
    (SubmissionUnknown, Working),
    (SubmissionUnknown, NotFoundSafe),
    (SubmissionUnknown, Unknown),
    (NotFoundSafe, Submitting),
    (NotFoundSafe, Unknown),
    (Working, InputRequired),
    (Working, CancelRequested),
    (Working, TerminalObserved),
    (Working, Unknown),
    (InputRequired, Working),
    (InputRequired, CancelRequested),
    (InputRequired, TerminalObserved),
    (InputRequired, Unknown),
    (CancelRequested, CancelledAccepted),
    (CancelRequested, TerminalObserved),
    (CancelRequested, Unknown),
    (TerminalObserved, FetchingResult),
    (TerminalObserved, Unknown),
    (FetchingResult, Accepted),
    (FetchingResult, Unknown),
];

pub fn is_allowed(from: LocalState, to: LocalState) -> bool {
    ALLOWED.iter().any(|&(f, t)| f == from && t == to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_states_have_no_way_out() {
        for &(from, _) in ALLOWED {
            assert!(
                !from.is_final(),
                "{from} is final but has an outgoing transition"
            );
        }
    }

    #[test]
    fn every_non_final_state_can_reach_a_final_state() {
        for s in LocalState::ALL {
            let mut seen = vec![s];
            let mut i = 0;
            while i < seen.len() {
                let cur = seen[i];
                for &(f, t) in ALLOWED {
                    if f == cur && !seen.contains(&t) {
                        seen.push(t);
                    }
                }
                i += 1;
            }
            assert!(
                seen.iter().any(|x| x.is_final()),
                "{s} cannot reach a final state"
            );
        }
    }

    #[test]
    fn receipts_are_only_reached_through_a_fetch_a_confirmed_cancel_a_refusal_or_a_sync_reply() {
        let into_accepted: Vec<_> = ALLOWED
            .iter()
            .filter(|(_, t)| *t == Accepted)
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(into_accepted, vec![Submitting, FetchingResult]);
        let into_cancelled: Vec<_> = ALLOWED
            .iter()
            .filter(|(_, t)| *t == CancelledAccepted)
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(into_cancelled, vec![CancelRequested]);
    }
}
