//! Configuration: a small TOML file, command-line overrides, and validation that names the file,
//! the field and what is wrong.
//!
//! ```toml
//! seed = 7
//! listen = "127.0.0.1:0"
//! upstream = "http://127.0.0.1:3000"
//! [faults.drop_after]        # forward, let the server finish, then close without a response
//! rate = 0.05
//! hang_ms = 0                # hold the connection open this long first (a client timeout)
//! methods = ["tools/call"]   # optional: only requests with this JSON-RPC method (or HTTP
//!                            # method, "GET", for requests without one)
//! [faults.delay]
//! rate = 0.1
//! min_ms = 10
//! max_ms = 400
//! [faults.reject]            # answered by the proxy itself; the server never sees it
//! rate = 0.05
//! statuses = [429, 503]
//! retry_after_s = 1
//! [faults.truncate]          # body cut short, response ends cleanly
//! rate = 0.05
//! [faults.cut]               # connection closed mid-body
//! rate = 0.05
//! [limits]
//! max_body_bytes = 16777216
//! max_connections = 256
//! ```

use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

/// Upper bound on every configured duration: a typo must not park a connection for a day.
pub const MAX_CONFIGURED_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub seed: Option<u64>,
    pub listen: Option<String>,
    pub upstream: Option<String>,
    /// Path of the decision log (JSON lines, appended); absent: stderr.
    pub log: Option<String>,
    #[serde(default)]
    pub faults: Faults,
    #[serde(default)]
    pub limits: Limits,
}

/// The fault kinds, each optional. Rates are probabilities per request; they must sum to ≤ 1
/// (the rest passes untouched).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    pub drop_after: Option<DropAfter>,
    pub delay: Option<Delay>,
    pub reject: Option<Reject>,
    pub truncate: Option<Shape>,
    pub cut: Option<Shape>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DropAfter {
    pub rate: f64,
    #[serde(default)]
    pub hang_ms: u64,
    pub methods: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Delay {
    pub rate: f64,
    #[serde(default = "default_delay_min_ms")]
    pub min_ms: u64,
    #[serde(default = "default_delay_max_ms")]
    pub max_ms: u64,
    pub methods: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Reject {
    pub rate: f64,
    #[serde(default = "default_statuses")]
    pub statuses: Vec<u16>,
    #[serde(default = "default_retry_after_s")]
    pub retry_after_s: u64,
    pub methods: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub rate: f64,
    pub methods: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, and largest non-SSE response body (413 / cut above it).
    pub max_body_bytes: usize,
    /// Concurrent client connections; more wait in the accept backlog.
    pub max_connections: usize,
    /// From forwarding a request to the upstream's response head (504 after it).
    pub upstream_timeout_ms: u64,
    /// Longest gap between two body frames of a response (the stream is cut after it).
    pub stream_idle_ms: u64,
    /// Longest life of one response body, SSE streams included.
    pub stream_max_ms: u64,
    /// Time a client has to send its whole request (head and body).
    pub request_read_timeout_ms: u64,
}

fn default_delay_min_ms() -> u64 {
    50
}
fn default_delay_max_ms() -> u64 {
    500
}
fn default_statuses() -> Vec<u16> {
    vec![429, 503]
}
fn default_retry_after_s() -> u64 {
    1
}

impl Default for Delay {
    fn default() -> Self {
        Delay {
            rate: 0.0,
            min_ms: default_delay_min_ms(),
            max_ms: default_delay_max_ms(),
            methods: None,
        }
    }
}

impl Default for Reject {
    fn default() -> Self {
        Reject {
            rate: 0.0,
            statuses: default_statuses(),
            retry_after_s: default_retry_after_s(),
            methods: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 * 1024 * 1024,
            max_connections: 256,
            upstream_timeout_ms: 30_000,
            stream_idle_ms: 60_000,
            stream_max_ms: 600_000,
            request_read_timeout_ms: 10_000,
        }
    }
}

/// Where a configuration came from, for error messages.
pub fn origin(path: Option<&Path>) -> String {
    path.map_or_else(|| "command line".to_string(), |p| p.display().to_string())
}

impl FileConfig {
    pub fn from_toml(text: &str, origin: &str) -> Result<FileConfig, String> {
        toml::from_str(text).map_err(|e| format!("{origin}: {}", e.to_string().trim_end()))
    }

    pub fn load(path: &Path) -> Result<FileConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_toml(&text, &path.display().to_string())
    }
}

/// `(name, rate)` of every configured fault, in decision order.
pub fn rates(faults: &Faults) -> [(&'static str, f64); 5] {
    [
        (
            "drop_after",
            faults.drop_after.as_ref().map_or(0.0, |f| f.rate),
        ),
        ("delay", faults.delay.as_ref().map_or(0.0, |f| f.rate)),
        ("reject", faults.reject.as_ref().map_or(0.0, |f| f.rate)),
        ("truncate", faults.truncate.as_ref().map_or(0.0, |f| f.rate)),
        ("cut", faults.cut.as_ref().map_or(0.0, |f| f.rate)),
    ]
}

fn check_ms(origin: &str, field: &str, ms: u64) -> Result<(), String> {
    if ms > MAX_CONFIGURED_MS {
        return Err(format!(
            "{origin}: {field}: {ms} is above the limit of {MAX_CONFIGURED_MS} ms"
        ));
    }
    Ok(())
}

/// Checks every field; the first problem is the error.
pub fn validate(faults: &Faults, limits: &Limits, origin: &str) -> Result<(), String> {
    let mut sum = 0.0;
    for (name, rate) in rates(faults) {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!(
                "{origin}: faults.{name}.rate: {rate} is not a probability in [0, 1]"
            ));
        }
        sum += rate;
    }
    if sum > 1.0 + 1e-9 {
        return Err(format!("{origin}: faults: the rates sum to {sum}, above 1"));
    }
    if let Some(d) = &faults.drop_after {
        check_ms(origin, "faults.drop_after.hang_ms", d.hang_ms)?;
    }
    if let Some(d) = &faults.delay {
        check_ms(origin, "faults.delay.max_ms", d.max_ms)?;
        if d.min_ms > d.max_ms {
            return Err(format!(
                "{origin}: faults.delay.min_ms: {} is above max_ms {}",
                d.min_ms, d.max_ms
            ));
        }
    }
    if let Some(r) = &faults.reject {
        if r.statuses.is_empty() {
            return Err(format!("{origin}: faults.reject.statuses: empty"));
        }
        if let Some(s) = r.statuses.iter().find(|s| !matches!(s, 429 | 503)) {
            return Err(format!("{origin}: faults.reject.statuses: {s} is not 429 or 503 (the statuses Retry-After means something on)"));
        }
        if r.retry_after_s > MAX_CONFIGURED_MS / 1000 {
            return Err(format!(
                "{origin}: faults.reject.retry_after_s: {} is above the limit",
                r.retry_after_s
            ));
        }
    }
    let positive = [
        ("max_body_bytes", limits.max_body_bytes as u64),
        ("max_connections", limits.max_connections as u64),
        ("upstream_timeout_ms", limits.upstream_timeout_ms),
        ("stream_idle_ms", limits.stream_idle_ms),
        ("stream_max_ms", limits.stream_max_ms),
        ("request_read_timeout_ms", limits.request_read_timeout_ms),
    ];
    for (field, value) in positive {
        if value == 0 {
            return Err(format!("{origin}: limits.{field}: must be above 0"));
        }
    }
    for (field, ms) in [
        ("limits.upstream_timeout_ms", limits.upstream_timeout_ms),
        ("limits.stream_idle_ms", limits.stream_idle_ms),
        ("limits.stream_max_ms", limits.stream_max_ms),
        (
            "limits.request_read_timeout_ms",
            limits.request_read_timeout_ms,
        ),
    ] {
        check_ms(origin, field, ms)?;
    }
    Ok(())
}

/// A validated configuration, ready to start a proxy.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    /// `http://host:port` of the server behind the proxy (no path: the client's path is kept).
    pub upstream: hyper::Uri,
    pub seed: u64,
    pub faults: Faults,
    pub limits: Limits,
}

impl ProxyConfig {
    pub fn new(file: FileConfig, origin: &str) -> Result<ProxyConfig, String> {
        validate(&file.faults, &file.limits, origin)?;
        let listen = file.listen.as_deref().unwrap_or("127.0.0.1:0");
        let listen: SocketAddr = listen
            .parse()
            .map_err(|e| format!("{origin}: listen: \"{listen}\" is not an address: {e}"))?;
        if !listen.ip().is_loopback() {
            return Err(format!(
                "{origin}: listen: {listen} is not a loopback address (this is a test tool)"
            ));
        }
        let upstream = file
            .upstream
            .ok_or_else(|| format!("{origin}: upstream: missing"))?;
        let uri: hyper::Uri = upstream
            .parse()
            .map_err(|e| format!("{origin}: upstream: \"{upstream}\" is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            return Err(format!(
                "{origin}: upstream: \"{upstream}\" is not an http://host:port URL"
            ));
        }
        if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
            return Err(format!(
                "{origin}: upstream: \"{upstream}\" has a path; give host and port only"
            ));
        }
        let seed = file
            .seed
            .ok_or_else(|| format!("{origin}: seed: missing (every run is seeded)"))?;
        Ok(ProxyConfig {
            listen,
            upstream: uri,
            seed,
            faults: file.faults,
            limits: file.limits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<ProxyConfig, String> {
        ProxyConfig::new(FileConfig::from_toml(text, "f.toml")?, "f.toml")
    }

    const BASE: &str = "seed = 1\nupstream = \"http://127.0.0.1:9\"\n";

    #[test]
    fn a_full_file_parses_with_defaults_filled_in() {
        let c = config(&format!(
            "{BASE}[faults.delay]\nrate = 0.5\n[faults.reject]\nrate = 0.25\n"
        ))
        .unwrap();
        assert_eq!(
            c.faults.delay,
            Some(Delay {
                rate: 0.5,
                ..Delay::default()
            })
        );
        assert_eq!(c.faults.reject.unwrap().statuses, [429, 503]);
        assert_eq!(c.limits, Limits::default());
        assert!(c.listen.ip().is_loopback());
    }

    #[test]
    fn errors_name_the_file_the_field_and_the_problem() {
        let cases = [
            (
                "[faults.cut]\nrate = 1.5\n",
                "f.toml: faults.cut.rate: 1.5 is not a probability",
            ),
            (
                "[faults.cut]\nrate = 0.6\n[faults.delay]\nrate = 0.6\n",
                "f.toml: faults: the rates sum to 1.2",
            ),
            (
                "[faults.delay]\nrate = 0.1\nmin_ms = 9\nmax_ms = 2\n",
                "f.toml: faults.delay.min_ms: 9 is above max_ms 2",
            ),
            (
                "[faults.reject]\nrate = 0.1\nstatuses = [500]\n",
                "f.toml: faults.reject.statuses: 500 is not 429 or 503",
            ),
            (
                "[limits]\nmax_connections = 0\n",
                "f.toml: limits.max_connections: must be above 0",
            ),
            ("[faults.drop]\nrate = 0.1\n", "unknown field `drop`"),
        ];
        for (extra, want) in cases {
            let err = config(&format!("{BASE}{extra}")).unwrap_err();
            assert!(err.contains(want), "{extra:?}: {err}");
        }
        let err = config("upstream = \"http://127.0.0.1:9\"\n").unwrap_err();
        assert!(err.contains("f.toml: seed: missing"), "{err}");
        let err = config("seed = 1\nupstream = \"http://127.0.0.1:9/mcp\"\n").unwrap_err();
        assert!(err.contains("has a path"), "{err}");
        let err = config(&format!("{BASE}listen = \"0.0.0.0:80\"\n")).unwrap_err();
        assert!(err.contains("not a loopback address"), "{err}");
    }
}
