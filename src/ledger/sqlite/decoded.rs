//! Records already decoded, by call node, each beside the exact JSON text it was decoded from.
//!
//! A row is decoded again only when its text differs from the remembered one, so a hit can never
//! return what the row does not hold: the comparison is on the stored bytes, not on a version
//! number another writer (or a hand edit) might reuse. Decoding a record's JSON was a sixth of
//! the CPU of a simulated series on SQLite, and a live executor reads the same record several
//! times per step (before the step, inside the commit's transaction, after it).

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::rows;
use crate::ledger::{LedgerError, RecordHead};
use crate::record::ToolOperation;

/// At most this many records are remembered; past it the memory starts over (a clear, not an
/// eviction order: the executor's working set is the nodes in flight, and a miss costs one decode).
const MAX_ENTRIES: usize = 1024;

#[derive(Default)]
pub(super) struct Decoded {
    by_node: RefCell<BTreeMap<String, (String, ToolOperation)>>,
}

impl Decoded {
    /// The record a row holds (`json`, and the row's `version` column). `node` is the call node
    /// the row was looked up by, when the query was by call node; other lookups decode.
    pub(super) fn record(
        &self,
        node: Option<&str>,
        json: &str,
        version: u64,
    ) -> Result<ToolOperation, LedgerError> {
        if let Some(rec) = node.and_then(|n| self.remembered(n, json, version)) {
            return Ok(rec.clone());
        }
        self.decode(json, version)
    }

    /// The head of the record a row looked up by call node holds: what [`Decoded::record`]
    /// would return, cut down, without copying a remembered record whole.
    pub(super) fn head(
        &self,
        node: &str,
        json: &str,
        version: u64,
    ) -> Result<RecordHead, LedgerError> {
        if let Some(rec) = self.remembered(node, json, version) {
            return Ok(RecordHead::of(&rec));
        }
        self.decode(json, version).map(|rec| RecordHead::of(&rec))
    }

    /// The remembered record of `node`, if the row still holds the very text it came from: the
    /// same text decodes to the same record, and that record passed the checks `rows::record`
    /// makes; the version column is checked again, as it would be.
    fn remembered(
        &self,
        node: &str,
        json: &str,
        version: u64,
    ) -> Option<std::cell::Ref<'_, ToolOperation>> {
        std::cell::Ref::filter_map(self.by_node.borrow(), |by_node| {
            by_node
                .get(node)
                .filter(|(text, rec)| text == json && rec.version == version)
                .map(|(_, rec)| rec)
        })
        .ok()
    }

    /// Decode a row's record and remember it.
    fn decode(&self, json: &str, version: u64) -> Result<ToolOperation, LedgerError> {
        let rec = rows::record(json, version)?;
        self.remember(json, &rec);
        Ok(rec)
    }

    /// `rec` is now stored as `json` (a committed write).
    pub(super) fn remember(&self, json: &str, rec: &ToolOperation) {
        let mut by_node = self.by_node.borrow_mut();
        if by_node.len() >= MAX_ENTRIES && !by_node.contains_key(&rec.call_node_id) {
            by_node.clear();
        }
        match by_node.get_mut(&rec.call_node_id) {
            Some(entry) => {
                entry.0.clear();
                entry.0.push_str(json);
                entry.1 = rec.clone();
            }
            None => {
                by_node.insert(rec.call_node_id.clone(), (json.to_string(), rec.clone()));
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_node.borrow().len()
    }
}

/// Reads a record row (`record_json`, `version`) through `decoded`. The outer result is
/// SQLite's, the inner one the decoding's.
pub(super) fn row(
    r: &rusqlite::Row<'_>,
    node: Option<&str>,
    decoded: &Decoded,
) -> rusqlite::Result<Result<ToolOperation, LedgerError>> {
    let (json, version) = json_and_version(r)?;
    Ok(decoded.record(node, json, version))
}

/// Reads the head of a record row looked up by call node `node`, as [`row`] reads the record.
pub(super) fn head_row(
    r: &rusqlite::Row<'_>,
    node: &str,
    decoded: &Decoded,
) -> rusqlite::Result<Result<RecordHead, LedgerError>> {
    let (json, version) = json_and_version(r)?;
    Ok(decoded.head(node, json, version))
}

/// A record row's JSON text, borrowed from the row, and its version column.
fn json_and_version<'r>(r: &'r rusqlite::Row<'_>) -> rusqlite::Result<(&'r str, u64)> {
    let version: u64 = r.get(1)?;
    let json = r.get_ref(0)?.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok((json, version))
}
