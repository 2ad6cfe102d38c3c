//! `toolop-rmcp-peer`: an MCP server on the official Rust SDK (`rmcp` 3.11.0) that speaks the
//! tasks extension (`io.modelcontextprotocol/tasks`), for toolop's interoperability tests.
//! See README.md for the tools, the options, the events file and how it differs from the
//! recorded transcript.
//!
//! ```text
//! toolop-rmcp-peer stdio [OPTIONS]
//! toolop-rmcp-peer http --port N [--path /mcp] [OPTIONS]     # N = 0: any free port
//! ```
//! Over HTTP the first line on stdout is `listening 127.0.0.1:PORT` once the socket is bound.

mod book;
mod server;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use rmcp::task_manager::{TaskManager, DEFAULT_POLL_INTERVAL_MS, DEFAULT_TASK_TTL_MS};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;

use crate::book::Book;
use crate::server::{Peer, Settings};

#[derive(Parser)]
#[command(
    name = "toolop-rmcp-peer",
    about = "MCP tasks-extension test server on rmcp 3.11.0"
)]
struct Cli {
    #[command(subcommand)]
    transport: Transport,
    /// `ttlMs` of every task, or `none` for unlimited retention. A task still running at its
    /// ttl ends `failed`; a finished task is deleted one ttl after it finished.
    #[arg(long, global = true, default_value_t = DEFAULT_TASK_TTL_MS.to_string(), value_parser = parse_ttl)]
    ttl_ms: String,
    /// `pollIntervalMs` of every task.
    #[arg(long, global = true, default_value_t = DEFAULT_POLL_INTERVAL_MS)]
    poll_interval_ms: u64,
    /// Append one JSON line per event (task created, status change, eviction, ...) to this file.
    #[arg(long, global = true)]
    events_file: Option<PathBuf>,
    /// Answer a repeated `_meta["io.toolop/idempotency-key"]` with the task it created, and
    /// advertise `capabilities.experimental["io.toolop/idempotency"]`. Off: every call creates.
    #[arg(long, global = true)]
    dedupe_by_key: bool,
}

#[derive(Subcommand)]
enum Transport {
    /// Newline-delimited JSON-RPC on stdin/stdout; event lines on stderr.
    Stdio,
    /// MCP Streamable HTTP on 127.0.0.1.
    Http {
        #[arg(long)]
        port: u16,
        #[arg(long, default_value = "/mcp")]
        path: String,
        /// No sessions (rmcp's `legacy_session_mode` off): no `Mcp-Session-Id`, no GET stream,
        /// every request served on its own. 2026-07-28 requests are always served this way.
        #[arg(long)]
        stateless: bool,
        /// With `--stateless`: answer simple requests with `application/json` instead of an
        /// SSE stream (rmcp ignores this in session mode).
        #[arg(long, requires = "stateless")]
        json_response: bool,
        /// Largest POST body accepted, in bytes (413 above it).
        #[arg(long, default_value_t = 4 * 1024 * 1024)]
        max_body_bytes: usize,
    },
}

fn parse_ttl(s: &str) -> Result<String, String> {
    if s == "none" || s.parse::<u64>().is_ok_and(|ms| ms > 0) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "\"{s}\" is neither a positive number of milliseconds nor \"none\""
        ))
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolop-rmcp-peer: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let settings = Settings {
        ttl_ms: cli.ttl_ms.parse().ok(),
        poll_interval_ms: cli.poll_interval_ms,
        dedupe_by_key: cli.dedupe_by_key,
    };
    let book = match &cli.events_file {
        Some(path) => {
            Book::new(Some(path)).map_err(|e| format!("events file {}: {e}", path.display()))?
        }
        None => Book::new(None).map_err(|e| e.to_string())?,
    };
    let peer = Peer {
        tasks: TaskManager::new(),
        book: Arc::new(book),
        settings: Arc::new(settings),
    };
    tokio::spawn(book::watch(
        peer.book.clone(),
        peer.tasks.clone(),
        peer.settings.ttl_ms.is_some(),
    ));
    match cli.transport {
        Transport::Stdio => serve_stdio(peer).await,
        Transport::Http {
            port,
            path,
            stateless,
            json_response,
            max_body_bytes,
        } => {
            let config = StreamableHttpServerConfig::default()
                .with_legacy_session_mode(!stateless)
                .with_json_response(json_response)
                .with_max_request_body_bytes(max_body_bytes);
            serve_http(peer, port, &path, config).await
        }
    }
}

async fn serve_stdio(peer: Peer) -> Result<(), String> {
    let book = peer.book.clone();
    let tasks = peer.tasks.clone();
    book.ready("stdio");
    let service = peer
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| format!("stdio: {e}"))?;
    let reason = service.waiting().await.map_err(|e| format!("stdio: {e}"))?;
    let why = match reason {
        rmcp::service::QuitReason::Closed => "closed".to_string(),
        rmcp::service::QuitReason::Cancelled => "cancelled".to_string(),
        rmcp::service::QuitReason::JoinError(e) => format!("join error: {e}"),
        _ => "other".to_string(),
    };
    eprintln!("exit {why}");
    tasks.shutdown();
    Ok(())
}

async fn serve_http(
    peer: Peer,
    port: u16,
    path: &str,
    config: StreamableHttpServerConfig,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("bind 127.0.0.1:{port}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // rmcp's default Host allow-list (localhost, 127.0.0.1, ::1, any port) stays: a fault proxy
    // in front that forwards `Host: 127.0.0.1:<proxy port>` passes it.
    let factory_peer = peer.clone();
    let service = StreamableHttpService::new(
        move || Ok(factory_peer.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(path, service);
    println!("listening {addr}");
    peer.book.ready(&format!("http {addr}{path}"));
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| format!("http: {e}"))
}
