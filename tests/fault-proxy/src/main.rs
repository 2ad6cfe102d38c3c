//! `toolop-fault-proxy`: see lib.rs and tests/fault-proxy/README.md.
//!
//! ```text
//! toolop-fault-proxy --upstream http://127.0.0.1:3000 --seed 7 [--listen 127.0.0.1:0]
//!     [--config faults.toml] [--log decisions.jsonl]
//!     [--drop-after RATE] [--delay RATE] [--reject RATE] [--truncate RATE] [--cut RATE]
//! ```
//! The first stdout line is `listening 127.0.0.1:PORT`. Exit 2 on a bad configuration.

#[cfg(madsim)]
fn main() {
    eprintln!(
        "toolop-fault-proxy uses real sockets and is not built for the simulator (--cfg madsim)"
    );
    std::process::exit(2);
}

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    real::main()
}

#[cfg(not(madsim))]
mod real {
    use std::path::PathBuf;
    use std::process::ExitCode;

    use clap::Parser;
    use toolop_fault_proxy::config::{
        self, Delay, DropAfter, FileConfig, ProxyConfig, Reject, Shape,
    };
    use toolop_fault_proxy::log::LogSink;

    #[derive(Parser)]
    #[command(
        name = "toolop-fault-proxy",
        about = "Seeded fault-injecting HTTP reverse proxy (127.0.0.1 only)"
    )]
    struct Cli {
        /// TOML file with seed, upstream, faults and limits; flags override it.
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        seed: Option<u64>,
        /// http://host:port of the server behind the proxy.
        #[arg(long)]
        upstream: Option<String>,
        /// Address to listen on (loopback only; port 0 = any free port).
        #[arg(long)]
        listen: Option<String>,
        /// Decision log (JSON lines, appended); default stderr.
        #[arg(long)]
        log: Option<PathBuf>,
        /// Rate of "drop the response after the server processed the request".
        #[arg(long)]
        drop_after: Option<f64>,
        /// Rate of delayed responses (delay drawn from faults.delay.min_ms..=max_ms).
        #[arg(long)]
        delay: Option<f64>,
        /// Rate of 429/503 + Retry-After answered by the proxy without forwarding.
        #[arg(long)]
        reject: Option<f64>,
        /// Rate of truncated bodies (the response ends cleanly, short).
        #[arg(long)]
        truncate: Option<f64>,
        /// Rate of connections cut mid-body.
        #[arg(long)]
        cut: Option<f64>,
    }

    fn merge(cli: &Cli) -> Result<(FileConfig, String), String> {
        let mut file = match &cli.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let origin = config::origin(cli.config.as_deref());
        file.seed = cli.seed.or(file.seed);
        file.upstream = cli.upstream.clone().or(file.upstream);
        file.listen = cli.listen.clone().or(file.listen);
        let f = &mut file.faults;
        if let Some(rate) = cli.drop_after {
            f.drop_after.get_or_insert_with(DropAfter::default).rate = rate;
        }
        if let Some(rate) = cli.delay {
            f.delay.get_or_insert_with(Delay::default).rate = rate;
        }
        if let Some(rate) = cli.reject {
            f.reject.get_or_insert_with(Reject::default).rate = rate;
        }
        if let Some(rate) = cli.truncate {
            f.truncate.get_or_insert_with(Shape::default).rate = rate;
        }
        if let Some(rate) = cli.cut {
            f.cut.get_or_insert_with(Shape::default).rate = rate;
        }
        Ok((file, origin))
    }

    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        let (config, log_path) = match merge(&cli).and_then(|(file, origin)| {
            let log = cli
                .log
                .clone()
                .or_else(|| file.log.as_ref().map(PathBuf::from));
            Ok((ProxyConfig::new(file, &origin)?, log))
        }) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("toolop-fault-proxy: {e}");
                return ExitCode::from(2);
            }
        };
        let sink = match &log_path {
            Some(path) => match LogSink::file(path) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("toolop-fault-proxy: log {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            },
            None => LogSink::stderr(),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        runtime.block_on(async {
            let running = match toolop_fault_proxy::start(config, sink).await {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("toolop-fault-proxy: listen: {e}");
                    return ExitCode::from(1);
                }
            };
            println!("listening {}", running.addr);
            let _ = tokio::signal::ctrl_c().await;
            running.stop().await;
            ExitCode::SUCCESS
        })
    }
}
