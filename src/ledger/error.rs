//! Why a ledger refused a write or could not answer. Every variant is an operating error the
//! caller handles; none is a panic.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerError {
    /// Someone else wrote the record since it was read: re-read and decide again.
    VersionConflict {
        call_node_id: String,
        expected: u64,
        found: u64,
    },
    /// The writer's epoch is older than the ledger's: it was rolled back or taken over.
    StaleEpoch {
        call_node_id: String,
        writer: u64,
        current: u64,
    },
    /// The writer presents an epoch the ledger never issued (a misconfigured executor).
    UnissuedEpoch {
        call_node_id: String,
        writer: u64,
        current: u64,
    },
    DuplicateCallNode(String),
    DuplicateSubmissionKey(String),
    UnknownCallNode(String),
    UnknownReceipt(String),
    /// A consumer acknowledged an entry another consumer already took.
    AlreadyDelivered {
        receipt_id: String,
        delivered_to: String,
        consumer_id: String,
    },
    /// The acceptance checks failed; nothing was written.
    AcceptRefused {
        call_node_id: String,
        why: String,
    },
    /// Programmer-visible misuse caught at the boundary (e.g. changing a record's identity).
    Invalid(String),
    /// The storage itself failed (an SQLite error, a row that does not decode). The
    /// transaction, if any, was rolled back.
    Storage(String),
}

impl std::fmt::Display for LedgerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LedgerError::VersionConflict {
                call_node_id,
                expected,
                found,
            } => {
                write!(f, "call node {call_node_id}: written by someone else since it was read (expected version {expected}, found {found})")
            }
            LedgerError::StaleEpoch {
                call_node_id,
                writer,
                current,
            } => {
                write!(f, "call node {call_node_id}: writer of epoch {writer} is fenced, the ledger is at epoch {current}")
            }
            LedgerError::UnissuedEpoch {
                call_node_id,
                writer,
                current,
            } => {
                write!(f, "call node {call_node_id}: writer claims epoch {writer}, which the ledger (at epoch {current}) never issued")
            }
            LedgerError::DuplicateCallNode(id) => write!(f, "call node {id} already has a record"),
            LedgerError::DuplicateSubmissionKey(key) => {
                write!(f, "submission key {key} already belongs to another record")
            }
            LedgerError::UnknownCallNode(id) => write!(f, "no record for call node {id}"),
            LedgerError::UnknownReceipt(id) => write!(f, "no outbox entry for receipt {id}"),
            LedgerError::AlreadyDelivered {
                receipt_id,
                delivered_to,
                consumer_id,
            } => {
                write!(f, "outbox entry {receipt_id} was delivered to {delivered_to}, not to {consumer_id}")
            }
            LedgerError::AcceptRefused { call_node_id, why } => {
                write!(f, "call node {call_node_id}: acceptance refused: {why}")
            }
            LedgerError::Invalid(why) => write!(f, "invalid ledger write: {why}"),
            LedgerError::Storage(why) => write!(f, "ledger storage failed: {why}"),
        }
    }
}

impl std::error::Error for LedgerError {}
