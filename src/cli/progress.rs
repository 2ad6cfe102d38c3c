//! Progress on a terminal: one spinner per call node with its local state and poll count.
//! Nothing when stderr is not a terminal, under CI (`CI` set) or with `--json`.

use std::collections::BTreeMap;
use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::record::ToolOperation;

pub struct Progress {
    multi: Option<MultiProgress>,
    bars: BTreeMap<String, ProgressBar>,
}

impl Progress {
    pub fn new(json: bool) -> Progress {
        let quiet = json || std::env::var_os("CI").is_some() || !std::io::stderr().is_terminal();
        let multi = (!quiet).then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress {
            multi,
            bars: BTreeMap::new(),
        }
    }

    /// Show where each record stands.
    pub fn update(&mut self, records: &[ToolOperation]) {
        let Some(multi) = &self.multi else { return };
        for r in records {
            let bar = self.bars.entry(r.call_node_id.clone()).or_insert_with(|| {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix} {msg} [{elapsed}]")
                        .expect("template is valid"),
                );
                bar.set_prefix(r.call_node_id.clone());
                bar.enable_steady_tick(std::time::Duration::from_millis(120));
                bar
            });
            let status = r
                .last_server_status
                .map(|s| format!(" server={}", super::show::status_name(s)))
                .unwrap_or_default();
            bar.set_message(format!(
                "{}{status} polls={}",
                r.local_state, r.poll_cursor.polls
            ));
            if r.local_state.is_final() && !bar.is_finished() {
                bar.finish();
            }
        }
    }

    pub fn finish(&mut self) {
        for bar in self.bars.values() {
            if !bar.is_finished() {
                bar.finish();
            }
        }
    }
}
