//! The live CLI `toolop`: one tool call (or the unfinished ones of a ledger) against a real
//! server, with the same executor the simulator tests. Subcommands: `call`, `resume`,
//! `status`, `reconcile`, `cancel`.
//!
//! Exit codes: 0 accepted completed; 1 accepted failed, cancelled, rejected or a tool error
//! result; 2 bad usage or input (a `--ledger` path that cannot be a ledger included); 3 handed
//! to manual reconciliation; 4 not finished (the server could not be reached, the wait was
//! interrupted, or a newer executor epoch took the call over: `toolop resume` picks it up);
//! 5 the ledger failed (a disk or database error, or a ledger written by a newer toolop): nothing
//! was lost, the calls stay where the ledger last recorded them.

mod approve;
mod crash_hook;
mod progress;
mod report;
mod run;
mod scoped;
mod show;
pub mod store;
pub mod target;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::record::AdapterId;

pub const EXIT_COMPLETED: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_RECONCILE: u8 = 3;
pub const EXIT_UNFINISHED: u8 = 4;
pub const EXIT_LEDGER: u8 = 5;

#[derive(Parser, Debug)]
#[command(
    name = "toolop",
    version,
    about = "Run long-running tool calls against MCP and AIP-151 servers: exactly one outcome per call, across crashes"
)]
pub struct Cli {
    /// The ledger: one SQLite file (WAL) holding every call node's record, receipts, outbox and
    /// the CLI's own state (created if missing).
    #[arg(long, global = true, default_value = "toolop.db")]
    pub ledger: PathBuf,
    /// Machine-readable output on stdout; no progress display.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunOpts {
    /// Who answers a server's request for input: decline, accept-file=FILE (a JSON object) or
    /// prompt (only on a terminal).
    #[arg(long, default_value = "decline")]
    pub approve: String,
    /// Per-request deadline before the executor treats a request as lost.
    #[arg(long, default_value_t = 10_000)]
    pub request_timeout_ms: u64,
    /// Total time to wait for one call node before handing it to manual reconciliation.
    #[arg(long, default_value_t = 30 * 60 * 1000)]
    pub wait_budget_ms: u64,
    /// Executor-wide bound on requests per second.
    #[arg(long, default_value_t = 20)]
    pub max_qps: u32,
    /// First poll interval (the server's suggestion wins when it gives one).
    #[arg(long, default_value_t = 500)]
    pub poll_interval_ms: u64,
    /// How long after its last beat in the ledger another `toolop` process counts as gone, so
    /// this one takes up a submission it sent (each process beats at a quarter of this, at
    /// most once a second).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(4..))]
    pub beat_timeout_ms: u64,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one tool call to its outcome.
    Call {
        /// MCP server: http(s)://HOST/PATH (Streamable HTTP) or stdio:'COMMAND ARGS'.
        #[arg(long, conflicts_with = "aip", required_unless_present = "aip")]
        server: Option<String>,
        /// AIP-151 service base URL (with --aip-config).
        #[arg(long, requires = "aip_config")]
        aip: Option<String>,
        /// AIP-151 service configuration (TOML: paths, tools, dedupe window, cancel, auth).
        #[arg(long)]
        aip_config: Option<PathBuf>,
        /// MCP protocol: mcp-2025-11-25 (tasks) or mcp-tasks-ext (the tasks extension).
        #[arg(long, default_value = "mcp-2025-11-25")]
        protocol: String,
        #[arg(long, required_unless_present = "batch", conflicts_with = "batch")]
        tool: Option<String>,
        /// Tool arguments, a JSON object.
        #[arg(long, default_value = "{}", conflicts_with = "batch")]
        args: String,
        /// Call node id (default: derived from the time and process). Running `call` again
        /// with the same id resumes that node; it never starts a second operation.
        #[arg(long, conflicts_with = "batch")]
        node: Option<String>,
        /// Many calls on one executor: a file with one JSON object per line,
        /// {"node": "n1", "tool": "build_report", "args": {...}} ("node" optional).
        #[arg(long)]
        batch: Option<PathBuf>,
        #[command(flatten)]
        run: RunOpts,
    },
    /// Pick up every unfinished call node of the ledger where its record says.
    Resume {
        #[command(flatten)]
        run: RunOpts,
    },
    /// Local state, protocol status, polls, epoch and receipt of call nodes.
    Status {
        /// One call node (default: all).
        node: Option<String>,
    },
    /// The manual reconciliation queue and effect-reconciliation records.
    Reconcile {
        #[command(subcommand)]
        action: ReconcileAction,
    },
    /// Ask for a call node to be cancelled (the executor running it sends the cancel).
    Cancel { node: String },
}

#[derive(Subcommand, Debug)]
pub enum ReconcileAction {
    /// Unresolved items.
    List,
    /// Everything known about one item.
    Show { node: String },
    /// Record an operator's decision for an item.
    Resolve {
        node: String,
        /// What the operator established: completed, failed, cancelled or never-ran.
        #[arg(long)]
        outcome: String,
        #[arg(long, default_value = "")]
        note: String,
    },
}

pub fn parse_protocol(s: &str) -> Result<AdapterId, String> {
    match s {
        "mcp-2025-11-25" => Ok(AdapterId::Mcp20251125),
        "mcp-tasks-ext" => Ok(AdapterId::McpTasksExt),
        other => Err(format!(
            "--protocol \"{other}\": expected mcp-2025-11-25 or mcp-tasks-ext"
        )),
    }
}

/// Parse the command line and run it; the process exit code.
pub fn main() -> u8 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                EXIT_USAGE
            } else {
                EXIT_COMPLETED
            };
        }
    };
    init_tracing();
    match run_cli(cli) {
        Ok(code) => code,
        Err(Failure { code, message }) => {
            eprintln!("toolop: {message}");
            code
        }
    }
}

/// An error for the user: a message and the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
}

fn run_cli(cli: Cli) -> Result<u8, Failure> {
    let store = store::LedgerStore::open(&cli.ledger)?;
    match cli.command {
        Command::Call {
            server,
            aip,
            aip_config,
            protocol,
            tool,
            args,
            node,
            batch,
            run,
        } => {
            let target = match (server, aip, aip_config) {
                (Some(server), None, _) => target::Target::parse_server(
                    &server,
                    parse_protocol(&protocol).map_err(Failure::usage)?,
                ),
                (None, Some(base), Some(cfg)) => {
                    target::AipFile::load(&cfg).map_err(Failure::usage)?;
                    reqwest::Url::parse(&base)
                        .map_err(|e| format!("--aip \"{base}\": {e}"))
                        .map(|_| target::Target::Aip {
                            base_url: base,
                            config_path: std::fs::canonicalize(&cfg).unwrap_or(cfg),
                        })
                }
                _ => Err("give --server, or --aip with --aip-config".to_string()),
            }
            .map_err(Failure::usage)?;
            let wanted = match (batch, tool) {
                (Some(path), _) => run::read_batch(&path).map_err(Failure::usage)?,
                (None, Some(tool)) => {
                    let args: serde_json::Value = serde_json::from_str(&args)
                        .map_err(|e| Failure::usage(format!("--args is not JSON: {e}")))?;
                    if !args.is_object() {
                        return Err(Failure::usage("--args must be a JSON object"));
                    }
                    vec![run::Wanted { node, tool, args }]
                }
                (None, None) => return Err(Failure::usage("give --tool, or --batch FILE")),
            };
            run::call(&store, target, wanted, &run, cli.json)
        }
        Command::Resume { run } => run::resume(&store, &run, cli.json),
        Command::Status { node } => show::status(&store, node.as_deref(), cli.json),
        Command::Reconcile { action } => show::reconcile(&store, action, cli.json),
        Command::Cancel { node } => show::cancel(&store, &node, cli.json),
    }
}

/// Logs to stderr; `RUST_LOG` picks the level (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
