//! One ledger test suite, two implementations: every test in `suite.rs` is written once,
//! generic over [`Ledger`], and run against the in-memory ledger and the SQLite ledger (in
//! memory, both as migrated and as the copy of a migrated database the simulator opens;
//! `sqlite/tests.rs` covers files, WAL, migrations and the database's own constraints).
//! `equivalence.rs` drives both with the same random writes and compares them after every step.

mod equivalence;
pub(crate) mod fixtures;
mod suite;

use super::{MemoryLedger, SqliteLedger};

fn memory() -> MemoryLedger {
    MemoryLedger::new()
}

fn sqlite() -> SqliteLedger {
    SqliteLedger::open_in_memory().expect("an in-memory SQLite ledger opens")
}

fn sqlite_copy() -> SqliteLedger {
    SqliteLedger::open_in_memory_copy().expect("a copied in-memory SQLite ledger opens")
}

/// Instantiate each generic test once per implementation.
macro_rules! both_ledgers {
    ($($name:ident),* $(,)?) => {
        mod memory_ledger {
            $(#[test] fn $name() { super::suite::$name(super::memory); })*
        }
        mod sqlite_ledger {
            $(#[test] fn $name() { super::suite::$name(super::sqlite); })*
        }
        mod sqlite_copied_ledger {
            $(#[test] fn $name() { super::suite::$name(super::sqlite_copy); })*
        }
    };
}

both_ledgers!(
    cas_conflict_is_refused_and_changes_nothing,
    duplicate_call_node_and_key_are_refused,
    acceptance_writes_one_receipt_and_one_ready_outbox_entry,
    a_second_receipt_for_a_call_node_is_refused,
    acceptance_checks_each_bound_field,
    a_cancel_nobody_asked_for_is_accepted_as_the_servers_outcome,
    acceptance_rechecks_what_the_writer_read_against_the_stored_record,
    compare_and_swap_catches_the_same_races_first,
    a_receipted_state_cannot_be_written_without_the_acceptance_transaction,
    a_fenced_writer_is_refused_whatever_the_record_says,
    a_fenced_executor_cannot_commit_a_receipt,
    inserts_are_fenced_too,
    an_unissued_epoch_and_an_overstamped_record_are_refused,
    lookups_by_call_node_operation_id_and_key,
    reconciliation_queue_and_effect_records,
    in_flight_listing_settled_count_and_local_state,
    record_head_answers_as_by_call_node_would,
    every_terminal_state_carries_its_payload_explicitly,
    a_shadow_operation_is_receipted_but_never_reaches_the_outbox,
    outbox_consumer_pages_by_seq_and_acknowledges_idempotently,
    outbox_seq_only_grows,
    cancel_intents_queue_oldest_first_and_are_idempotent,
    snapshot_holds_everything,
    a_beat_replaces_the_last_and_ends_when_taken_away,
);
