//! HTTP pieces the two HTTP transports share: the client, Retry-After, bodies read under a
//! size cap, and SSE events read under a per-event cap. A hostile or broken server can make a
//! reply fail; it cannot make the process hold more than the cap per reply.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::Duration;

/// Default cap on one reply body (JSON) or one SSE event: 16 MiB.
pub const BODY_LIMIT_BYTES_DEFAULT: usize = 16 * 1024 * 1024;

/// The reqwest client of a transport. TLS is rustls with the ring provider (installed once per
/// process; a second install is a no-op). No proxy from the environment: a live call goes where
/// the operator pointed it.
pub(super) fn client(connect_timeout_ms: u64) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(connect_timeout_ms))
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// `Retry-After` as milliseconds from now: delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
/// A date in the past is 0; anything unreadable is `None` (the adapter then backs off itself).
pub(super) fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs.saturating_mul(1000));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}

/// Why a body could not be read.
#[derive(Debug)]
pub(super) enum BodyError {
    /// Over the cap: reading stopped there, nothing was kept.
    TooLarge {
        limit_bytes: usize,
    },
    Io(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit_bytes } => {
                write!(f, "body larger than the {limit_bytes}-byte cap")
            }
            BodyError::Io(e) => write!(f, "body read failed: {e}"),
        }
    }
}

/// Read a whole body, refusing more than `limit_bytes`. A declared `Content-Length` over the
/// cap is refused before any byte is read.
pub(super) async fn read_capped(
    mut resp: reqwest::Response,
    limit_bytes: usize,
) -> Result<Vec<u8>, BodyError> {
    if resp
        .content_length()
        .is_some_and(|n| n > limit_bytes as u64)
    {
        return Err(BodyError::TooLarge { limit_bytes });
    }
    let mut body = Vec::new();
    // Each chunk is a bounded read; the loop ends at the end of the body or at the cap.
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit_bytes {
                    return Err(BodyError::TooLarge { limit_bytes });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(BodyError::Io(error_text(&e))),
        }
    }
}

/// A byte stream that fails once more than `limit` bytes arrived since the counter was last
/// reset (the SSE reader resets it after every event: the cap is per event).
struct Capped<S> {
    inner: S,
    seen: Arc<AtomicUsize>,
    limit: usize,
}

impl<S> Stream for Capped<S>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                let seen = self.seen.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
                if seen > self.limit {
                    return Poll::Ready(Some(Err(std::io::Error::other("sse event over the cap"))));
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(std::io::Error::other(error_text(&e)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// One SSE event as the transports use it.
pub(super) struct Event {
    pub id: Option<String>,
    pub data: String,
    /// The server's reconnection delay, if it sent one.
    pub retry_ms: Option<u64>,
}

/// How an SSE stream ended.
pub(super) enum SseEnd {
    /// The server closed the stream.
    Closed,
    /// Read error or reset.
    Broken(String),
    /// An event exceeded the cap; the stream was abandoned.
    TooLarge,
}

/// Read an SSE response, calling `on_event` for every event (priming events with empty data
/// included: they carry ids). Stops when `on_event` returns `false`.
pub(super) async fn read_sse(
    resp: reqwest::Response,
    limit_bytes: usize,
    mut on_event: impl FnMut(Event) -> bool,
) -> SseEnd {
    let seen = Arc::new(AtomicUsize::new(0));
    let capped = Capped {
        inner: Box::pin(resp.bytes_stream()),
        seen: seen.clone(),
        limit: limit_bytes,
    };
    let mut events = sse_stream::SseByteStream::new(capped);
    // Bounded by the stream itself: it ends when the server closes it or the cap trips.
    while let Some(item) = events.next().await {
        match item {
            Ok(sse) => {
                seen.store(0, Ordering::Relaxed);
                let event = Event {
                    id: sse.id,
                    data: sse.data.unwrap_or_default(),
                    retry_ms: sse.retry,
                };
                if !on_event(event) {
                    return SseEnd::Closed;
                }
            }
            Err(e) => {
                // The counter is reset only after an event: past the cap here means the cap tripped.
                if seen.load(Ordering::Relaxed) > limit_bytes {
                    return SseEnd::TooLarge;
                }
                return SseEnd::Broken(e.to_string());
            }
        }
    }
    SseEnd::Closed
}

/// A reqwest error as one line of human text (its Display chain, never Debug).
pub(super) fn error_text(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    // Error chains are short; the bound only guards against a cycle.
    for _ in 0..8 {
        let Some(s) = source else { break };
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Whether a Content-Type names an SSE stream.
pub(super) fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}
