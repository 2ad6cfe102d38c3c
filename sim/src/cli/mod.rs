//! The command line's shared parts: loading inputs (exit 2 on anything wrong), writing traces,
//! colour, and the Ctrl-C flag. Each command lives in its own module.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use toolop_sim::campaign::sweep::Loaded;
use toolop_sim::scenario::overrides::{self, Setting};
use toolop_sim::scenario::validate::{is_safe_segment, SAFE_SEGMENT};

pub mod gate;
pub mod hashes;
pub mod list;
pub mod shard;
pub mod single;

/// Exit codes, the same for every command (docs/cli.md).
pub const EXIT_FAIL: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// 128 + SIGINT, as shells report a Ctrl-C'd command.
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE)
}

pub use toolop_sim::scenario::overrides::SetArgs;

/// The settings of `--set`, or the usage error when there are too many.
pub fn checked_sets(a: &SetArgs) -> Result<&[Setting], ExitCode> {
    a.checked().map_err(usage_error)
}

pub fn load(path: &Path, sets: &[Setting]) -> Result<Loaded, ExitCode> {
    overrides::load(path, sets)
        .map(|scenario| Loaded {
            file: path.to_path_buf(),
            scenario,
            sets: sets.to_vec(),
        })
        .map_err(usage_error)
}

pub fn load_all(paths: &[PathBuf], sets: &[Setting]) -> Result<Vec<Loaded>, ExitCode> {
    paths.iter().map(|p| load(p, sets)).collect()
}

/// A name that becomes a folder under --reports (`--run`): one safe path segment, so nothing is
/// ever written outside the reports folder.
pub fn check_run_name(flag: &str, name: &str) -> Result<(), ExitCode> {
    if is_safe_segment(name) {
        Ok(())
    } else {
        Err(usage_error(format!("{flag} {name:?} {SAFE_SEGMENT}")))
    }
}

/// `<reports>/<scenario>/<seed>/<file_name>`; the scenario name was validated as one segment.
pub fn write_trace(
    reports: &Path,
    name: &str,
    seed: u64,
    file_name: &str,
    trace: &toolop_sim::trace::Trace,
) -> Result<PathBuf, ExitCode> {
    let dir = reports.join(name).join(seed.to_string());
    let file = dir.join(file_name);
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(&file, trace.canonical_bytes()))
        .map_err(|e| usage_error(format!("cannot write {}: {e}", file.display())))?;
    Ok(file)
}

/// When verdicts are coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    Always,
    Never,
}

static COLOR_ON: AtomicBool = AtomicBool::new(false);

pub fn set_color(c: Color) {
    let on = match c {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stdout().is_terminal()
        }
    };
    COLOR_ON.store(on, Ordering::Relaxed);
}

/// `text` in green (good) or red (bad) when colour is on.
pub fn paint(good: bool, text: &str) -> String {
    if !COLOR_ON.load(Ordering::Relaxed) {
        return text.to_string();
    }
    let colour = if good {
        anstyle::AnsiColor::Green
    } else {
        anstyle::AnsiColor::Red
    };
    let style = anstyle::Style::new().fg_color(Some(colour.into())).bold();
    format!("{}{text}{}", style.render(), style.render_reset())
}

/// Why a sweep stopped early: 0 it did not, 1 Ctrl-C, 2 --fail-fast.
static STOPPED: AtomicU8 = AtomicU8::new(0);
/// Set by Ctrl-C or --fail-fast: no new series starts.
pub static STOP: AtomicBool = AtomicBool::new(false);

pub const STOPPED_BY_INTERRUPT: u8 = 1;
pub const STOPPED_BY_FAIL_FAST: u8 = 2;

pub fn stop(why: u8) {
    let _ = STOPPED.compare_exchange(0, why, Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

pub fn stopped() -> u8 {
    STOPPED.load(Ordering::SeqCst)
}

/// First Ctrl-C: stop taking series and write what is done (marked partial). A second: exit at
/// once with 130.
pub fn on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        if STOP.load(Ordering::SeqCst) && stopped() == STOPPED_BY_INTERRUPT {
            std::process::exit(EXIT_INTERRUPTED as i32);
        }
        eprintln!("\ninterrupted: finishing the series in flight, then writing a partial report (Ctrl-C again to quit now)");
        stop(STOPPED_BY_INTERRUPT);
    });
}
