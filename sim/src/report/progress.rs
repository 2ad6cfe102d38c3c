//! The sweep's progress bar on stderr.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over a sweep's series. Hidden (counting, drawing nothing) when stderr is not a
/// terminal or the environment variable `CI` is set to anything non-empty, so logs and CI output
/// stay clean.
#[derive(Clone, Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` series; hidden per [`Progress`]'s rules.
    pub fn new(total: u64) -> Progress {
        let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
        if ci || !std::io::stderr().is_terminal() {
            return Progress::hidden(total);
        }
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} series ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        Progress {
            bar: ProgressBar::new(total).with_style(style),
        }
    }

    /// A bar that never draws (it still counts).
    pub fn hidden(total: u64) -> Progress {
        let bar = ProgressBar::hidden();
        bar.set_length(total);
        Progress { bar }
    }

    /// `n` more series done.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// The sweep is over: leave the bar at its final state.
    pub fn finish(&self) {
        self.bar.finish();
    }

    /// Series done so far.
    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    /// Whether the bar draws nothing.
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_bar_counts() {
        let p = Progress::hidden(10);
        assert!(p.is_hidden());
        p.inc(3);
        p.inc(2);
        assert_eq!(p.position(), 5);
        p.finish();
        // Under `cargo test` stderr is captured or CI is set: the bar hides itself.
        if std::env::var_os("CI").is_some() || !std::io::stderr().is_terminal() {
            assert!(Progress::new(10).is_hidden());
        }
    }
}
