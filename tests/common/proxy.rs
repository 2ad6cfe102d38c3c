//! The seeded fault proxy (`tests/fault-proxy`) in front of a peer, for the live tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn proxy_bin() -> PathBuf {
    let bin = super::root().join("target/debug/toolop-fault-proxy");
    assert!(
        bin.exists(),
        "{} missing: run `make peers` (it builds the fault proxy) first",
        bin.display()
    );
    bin
}

/// The fault proxy in front of `upstream_port`, killed on drop.
pub struct Proxy {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Proxy {
    /// Start it with `faults`, the `[faults.*]` tables of its TOML configuration
    /// (tests/fault-proxy/src/config.rs); its configuration and decision log go in `dir`.
    pub fn start(dir: &Path, seed: u64, upstream_port: u16, faults: &str) -> Proxy {
        let port = super::free_port();
        let log = dir.join("proxy-decisions.jsonl");
        let config = dir.join("faults.toml");
        std::fs::write(
            &config,
            format!(
                "seed = {seed}\nlisten = \"127.0.0.1:{port}\"\nupstream = \"http://127.0.0.1:{upstream_port}\"\nlog = \"{log}\"\n{faults}",
                log = log.display()
            ),
        )
        .unwrap();
        let child = Command::new(proxy_bin())
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the fault proxy");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "fault proxy did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Proxy { child, port, log }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Faults applied per kind, from the decision log.
    pub fn applied(&self) -> BTreeMap<String, u64> {
        let mut n = BTreeMap::new();
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["applied"] == true {
                let kind = v["fault"].as_str().unwrap_or("?");
                *n.entry(kind.to_string()).or_default() += 1;
            }
            *n.entry("requests".into()).or_default() += 1;
        }
        n
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
