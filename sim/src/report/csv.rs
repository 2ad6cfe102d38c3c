//! `series.csv`: one row per series, written with the csv crate.

use std::collections::BTreeMap;
use std::path::Path;

use crate::judge::gates::{SeriesRow, SweepReport};

/// The columns of `series.csv`, in order.
pub const HEADER: [&str; 16] = [
    "seed",
    "scenario",
    "protocol",
    "call_nodes",
    "faults_fired",
    "faults",
    "terminal_states",
    "polls",
    "max_sends_in_window",
    "cancel_confirmation_ms_max",
    "unknown_reconciliation_ms_max",
    "divergences",
    "second_operations",
    "violations",
    "trace_hash",
    "end_reason",
];

/// Writes `series.csv` for `r` at `path`: the [`HEADER`] line, then one record per row.
pub fn write(path: &Path, r: &SweepReport) -> std::io::Result<()> {
    let mut w = ::csv::Writer::from_path(path)?;
    write_records(&mut w, r)?;
    w.flush()
}

/// `series.csv` as a string (same content as [`write`]).
pub fn to_string(r: &SweepReport) -> std::io::Result<String> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    write_records(&mut w, r)?;
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn write_records<W: std::io::Write>(
    w: &mut ::csv::Writer<W>,
    r: &SweepReport,
) -> std::io::Result<()> {
    w.write_record(HEADER)?;
    for row in &r.rows {
        w.write_record(record(row))?;
    }
    Ok(())
}

/// The fields of one row, in [`HEADER`] order.
pub fn record(row: &SeriesRow) -> [String; 16] {
    let m = &row.metrics;
    let opt_max = |v: &[u64]| v.iter().max().map(u64::to_string).unwrap_or_default();
    [
        row.seed.to_string(),
        row.scenario.clone(),
        row.protocol.clone(),
        m.call_nodes.to_string(),
        m.faults
            .values()
            .map(|&n| u64::from(n))
            .sum::<u64>()
            .to_string(),
        counts(m.faults.iter().map(|(f, &n)| (f.name(), n))),
        counts(m.terminal_states.iter().map(|(s, &n)| (s.clone(), n))),
        m.polls.to_string(),
        m.max_sends_in_window.to_string(),
        opt_max(&m.cancel_confirmation_ms),
        opt_max(&m.unknown_reconciliation_ms),
        m.divergences.to_string(),
        m.second_operations.to_string(),
        row.violations.len().to_string(),
        row.trace_hash.clone(),
        row.end_reason.clone(),
    ]
}

/// "name:n;name:n" over the non-zero counts, in the map's order; empty when there are none.
fn counts(it: impl Iterator<Item = (String, u32)>) -> String {
    it.filter(|&(_, n)| n > 0)
        .map(|(k, n)| format!("{k}:{n}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// Parses a "name:n;name:n" cell back (for scripts and tests).
pub fn parse_counts(cell: &str) -> BTreeMap<String, u32> {
    cell.split(';')
        .filter_map(|kv| {
            let (k, n) = kv.rsplit_once(':')?;
            Some((k.to_string(), n.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;
    use crate::series::faults::FaultKind;

    #[test]
    fn series_csv_parses_back() {
        let r = sample_report();
        let text = to_string(&r).unwrap();
        let mut rd = ::csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(header, HEADER);
        let records: Vec<::csv::StringRecord> = rd.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(records.len(), r.rows.len());

        let first = &records[0];
        assert_eq!(&first[0], "100");
        assert_eq!(&first[4], "4");
        let poll_429 = FaultKind::Poll429.name();
        assert_eq!(first[5], format!("lost_request:3;{poll_429}:1"));
        assert_eq!(&first[6], "cancelled:1;completed:4");
        assert_eq!(&first[9], "450");
        assert_eq!(&first[10], "", "no unknown reconciliation: empty cell");
        assert_eq!(&records[1][13], "1");
        assert_eq!(&records[2][5], "");
        assert_eq!(
            parse_counts(&first[5]),
            [("lost_request".to_string(), 3), (poll_429, 1)].into()
        );
    }

    #[test]
    fn series_csv_file_matches_string() {
        let r = sample_report();
        let path =
            std::env::temp_dir().join(format!("toolop-sim-series-{}.csv", std::process::id()));
        write(&path, &r).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            to_string(&r).unwrap()
        );
        std::fs::remove_file(&path).unwrap();
    }
}
