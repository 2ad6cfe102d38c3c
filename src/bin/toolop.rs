//! The live CLI. See `toolop --help` and `src/cli/`.

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(toolop::cli::main())
}

/// The simulator build has no sockets or processes: no live CLI there.
#[cfg(madsim)]
fn main() {}
