//! stdio: a local server as a child process, newline-delimited JSON-RPC on its stdin/stdout
//! (MCP `basic/transports`, stdio). Its stderr goes to `tracing`. The child is killed when the
//! transport is dropped; its exit closes the transport (`recv` answers `None`).

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

use super::body::BODY_LIMIT_BYTES_DEFAULT;
use super::live::{Deliver, DriverParts, LiveTransport, TransportStats};
use super::InFrame;

/// How to start a local server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdioConfig {
    /// Program and arguments, already split.
    pub argv: Vec<String>,
    /// Cap on one line from the server.
    pub line_limit_bytes: usize,
}

impl StdioConfig {
    /// Split a command line the way a POSIX shell would (quotes, escapes), without a shell.
    pub fn from_command_line(line: &str) -> Result<StdioConfig, String> {
        let argv =
            shell_words::split(line).map_err(|e| format!("stdio command \"{line}\": {e}"))?;
        if argv.is_empty() {
            return Err("stdio command is empty".into());
        }
        Ok(StdioConfig {
            argv,
            line_limit_bytes: BODY_LIMIT_BYTES_DEFAULT,
        })
    }
}

/// Spawn the server and connect to it. Must be called inside a tokio runtime.
pub fn spawn(cfg: StdioConfig) -> Result<LiveTransport, String> {
    let mut child = Command::new(&cfg.argv[0])
        .args(&cfg.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start \"{}\": {e}", cfg.argv[0]))?;
    let program = cfg.argv[0].clone();
    let limit = cfg.line_limit_bytes;
    Ok(LiveTransport::start(move |parts| {
        drive(child_parts(&mut child), child, program, limit, parts)
    }))
}

type Pipes = (
    Option<tokio::process::ChildStdin>,
    Option<ChildStdout>,
    Option<tokio::process::ChildStderr>,
);

fn child_parts(child: &mut Child) -> Pipes {
    (child.stdin.take(), child.stdout.take(), child.stderr.take())
}

async fn drive(
    pipes: Pipes,
    mut child: Child,
    program: String,
    limit: usize,
    mut parts: DriverParts,
) {
    let (Some(mut stdin), Some(stdout), Some(stderr)) = pipes else {
        tracing::error!("{program}: pipes missing");
        return;
    };
    let mut set = tokio::task::JoinSet::new();
    let name = program.clone();
    set.spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        // Ends when the child closes stderr.
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(target: "toolop::stdio", "{name}: {line}");
        }
    });
    // The reader owns the receive side: when the child's stdout closes, dropping `deliver`
    // closes the runner's channel.
    set.spawn(read_lines(
        stdout,
        limit,
        parts.deliver.clone(),
        program.clone(),
    ));
    let deliver = parts.deliver;
    drop(deliver);
    while let Some(frame) = parts.out.recv().await {
        let mut line = frame.body;
        // JSON-RPC messages are serialised without raw newlines; a body with one would split.
        if line.contains(&b'\n') {
            tracing::warn!("{program}: message with a raw newline not sent");
            continue;
        }
        line.push(b'\n');
        if let Err(e) = stdin.write_all(&line).await {
            tracing::warn!("{program}: write to stdin failed: {e}");
            break;
        }
        let _ = stdin.flush().await;
    }
    // The runner dropped the transport or the child stopped reading: end the child.
    drop(stdin);
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// Lines from the child's stdout, each one frame; a line over `limit` is skipped whole.
async fn read_lines(stdout: ChildStdout, limit: usize, deliver: Deliver, program: String) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok(buf) => buf,
            Err(e) => {
                tracing::warn!("{program}: read from stdout failed: {e}");
                return;
            }
        };
        if buf.is_empty() {
            tracing::info!("{program}: stdout closed");
            return;
        }
        let (chunk, newline) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i)),
            None => (buf, None),
        };
        if !skipping {
            if line.len() + chunk.len() > limit {
                TransportStats::bump(&deliver.stats.oversize);
                tracing::warn!("{program}: a line over the {limit}-byte cap was dropped");
                line.clear();
                skipping = true;
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = newline.map_or(chunk.len(), |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            if !skipping && !line.iter().all(u8::is_ascii_whitespace) {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if !deliver.frame(InFrame::message(std::mem::take(&mut line))) {
                    return;
                }
            }
            line.clear();
            skipping = false;
        }
    }
}
