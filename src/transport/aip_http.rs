//! AIP-151 over HTTP/JSON: each frame carries its own method and path (the adapter's URL
//! templates); this transport sends it to a base URL and hands back status, Retry-After and
//! body, tied to the frame's request id. No sessions, no server push.

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::Duration;

use super::body::{self, error_text, read_capped, retry_after_ms, BODY_LIMIT_BYTES_DEFAULT};
use super::live::{Deliver, DriverParts, LiveTransport, TransportStats};
use super::{InFrame, OutFrame};

/// How to reach one AIP-151 service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AipHttpConfig {
    /// Scheme, host and optional prefix; frame paths are appended (`https://svc.example/v1`).
    pub base_url: String,
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub body_limit_bytes: usize,
    /// Extra headers on every request (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
}

impl Default for AipHttpConfig {
    fn default() -> Self {
        AipHttpConfig {
            base_url: String::new(),
            connect_timeout_ms: 10_000,
            request_timeout_ms: 60_000,
            body_limit_bytes: BODY_LIMIT_BYTES_DEFAULT,
            headers: Vec::new(),
        }
    }
}

/// Open a transport to `cfg.base_url`. Must be called inside a tokio runtime.
pub fn connect(cfg: AipHttpConfig) -> Result<LiveTransport, String> {
    reqwest::Url::parse(&cfg.base_url)
        .map_err(|e| format!("AIP base URL \"{}\": {e}", cfg.base_url))?;
    let client = body::client(cfg.connect_timeout_ms)?;
    Ok(LiveTransport::start(move |parts| drive(cfg, client, parts)))
}

/// `base` + `path`, with exactly one `/` between them.
fn join(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

async fn drive(cfg: AipHttpConfig, client: reqwest::Client, mut parts: DriverParts) {
    let mut set = JoinSet::new();
    while let Some(frame) = parts.out.recv().await {
        while set.try_join_next().is_some() {}
        if parts.deliver.closed() {
            return;
        }
        // Frames without a target carry nothing to send (AIP has no input answers).
        if frame.http.is_none() {
            continue;
        }
        set.spawn(exchange(
            cfg.clone(),
            client.clone(),
            parts.deliver.clone(),
            frame,
        ));
    }
}

async fn exchange(cfg: AipHttpConfig, client: reqwest::Client, deliver: Deliver, frame: OutFrame) {
    let target = frame.http.expect("filtered by the driver");
    let Ok(method) = reqwest::Method::from_bytes(target.method.as_bytes()) else {
        tracing::warn!(
            "AIP frame with an invalid HTTP method \"{}\": not sent",
            target.method
        );
        return;
    };
    let url = join(&cfg.base_url, &target.path);
    let mut req = client
        .request(method, &url)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(Duration::from_millis(cfg.request_timeout_ms));
    if !frame.body.is_empty() {
        req = req
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(frame.body);
    }
    for (k, v) in &cfg.headers {
        req = req.header(k, v);
    }
    TransportStats::bump(&deliver.stats.requests);
    let resp = match req.send().await {
        Ok(resp) => resp,
        Err(e) => {
            TransportStats::bump(&deliver.stats.failures);
            tracing::warn!("{} {url} failed: {}", target.method, error_text(&e));
            return;
        }
    };
    let status = resp.status().as_u16();
    let retry_after_ms = retry_after_ms(resp.headers());
    match read_capped(resp, cfg.body_limit_bytes).await {
        Ok(body) => {
            deliver.frame(InFrame {
                request_id: frame.request_id,
                http_status: status,
                retry_after_ms,
                body,
            });
        }
        Err(e) => {
            if matches!(e, body::BodyError::TooLarge { .. }) {
                TransportStats::bump(&deliver.stats.oversize);
            }
            tracing::warn!("{} {url}: {e}", target.method);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn join_puts_exactly_one_slash_between_base_and_path() {
        assert_eq!(super::join("http://h/v1", "/ops/1"), "http://h/v1/ops/1");
        assert_eq!(super::join("http://h/v1/", "ops/1"), "http://h/v1/ops/1");
        assert_eq!(
            super::join("http://h", "/v1/x:cancel"),
            "http://h/v1/x:cancel"
        );
    }
}
