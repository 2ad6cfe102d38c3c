//! Reports of a sweep under reports/<run>/: series.csv, histograms, summary.md, junit.xml.
