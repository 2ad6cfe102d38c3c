//! Moves a response body from the server to the client, frame by frame, and applies the body
//! faults on the way: pass untouched, truncate (end cleanly, short), cut (abort mid-body), or
//! drain (read until the server has answered, send nothing: the drop fault).
//!
//! Where a body fault lands: inside the whole body for a plain body (known at its end); for an
//! SSE stream, inside the first event that is a JSON-RPC response (a POST stream) or the first
//! event with data (the GET stream). Bytes before that event pass as they come, so server
//! requests interleaved before a response still reach the client in time.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::config::Limits;
use crate::log::Record;
use crate::plan::cut_point;
use crate::sse::{EventSpan, Scanner};

/// Frames queued between the pump and the client connection.
const CHANNEL_FRAMES: usize = 16;
/// Longest wait for the client connection to take the frames before a cut.
const FLUSH_GRACE: Duration = Duration::from_secs(2);
/// Time given to the connection to write the last frame it took before a cut.
const FLUSH_SETTLE: Duration = Duration::from_millis(20);

/// Why a client body ended early (hyper aborts the connection on it).
#[derive(Debug)]
pub struct Aborted(pub &'static str);

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fault proxy aborted the body: {}", self.0)
    }
}

impl std::error::Error for Aborted {}

/// The client side of a pump.
pub struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, Aborted>>,
    exact_len: Option<u64>,
}

impl ChannelBody {
    /// A body fed through the returned sender: `Ok` frames, then the sender dropped (a clean
    /// end) or an `Err` (hyper aborts the connection).
    pub fn channel(exact_len: Option<u64>) -> (mpsc::Sender<Result<Bytes, Aborted>>, ChannelBody) {
        let (tx, rx) = mpsc::channel(CHANNEL_FRAMES);
        (tx, ChannelBody { rx, exact_len })
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Aborted;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Aborted>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        self.exact_len
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Truncate(u16),
    Cut(u16),
    Drain,
}

/// What kind of body this is, which decides where a fault lands.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    pub sse: bool,
    /// The request was a GET (the standalone SSE stream): no response event will come.
    pub get: bool,
}

impl Kind {
    fn is_target(&self, span: &EventSpan) -> bool {
        if self.get {
            span.has_data
        } else {
            span.is_response
        }
    }
}

/// Starts a task that pumps `upstream` into the returned body and writes `record` when done.
/// `exact_len`: the upstream's Content-Length, kept on the client response (not for truncation).
pub fn spawn(
    upstream: Incoming,
    mode: Mode,
    kind: Kind,
    limits: Limits,
    exact_len: Option<u64>,
    mut record: Record,
) -> ChannelBody {
    assert!(mode != Mode::Drain, "drain sends nothing: call drain()");
    let (tx, body) = ChannelBody::channel(exact_len);
    tokio::spawn(async move {
        let outcome = run(upstream, mode, kind, &limits, Some(&tx), &mut record).await;
        record.finish(outcome);
    });
    body
}

/// Reads `upstream` until the server has answered (see module docs) and discards it: the drop
/// fault's "the server processed the request". Returns the outcome of the read.
pub async fn drain(
    upstream: Incoming,
    kind: Kind,
    limits: &Limits,
    record: &mut Record,
) -> &'static str {
    run(upstream, Mode::Drain, kind, limits, None, record).await
}

struct Pump<'a> {
    mode: Mode,
    kind: Kind,
    max_body_bytes: usize,
    tx: Option<&'a mpsc::Sender<Result<Bytes, Aborted>>>,
    deadline: Instant,
    /// Bytes read but not yet released to the client (truncate/cut wait for their target).
    held: Vec<u8>,
    /// Stream offset of `held[0]`.
    held_from: usize,
    read: usize,
}

enum Step {
    Continue,
    Done(&'static str),
}

async fn run(
    mut upstream: Incoming,
    mode: Mode,
    kind: Kind,
    limits: &Limits,
    tx: Option<&mpsc::Sender<Result<Bytes, Aborted>>>,
    record: &mut Record,
) -> &'static str {
    let idle = Duration::from_millis(limits.stream_idle_ms);
    let mut pump = Pump {
        mode,
        kind,
        max_body_bytes: limits.max_body_bytes,
        tx,
        deadline: Instant::now() + Duration::from_millis(limits.stream_max_ms),
        held: Vec::new(),
        held_from: 0,
        read: 0,
    };
    let mut scanner = kind.sse.then(|| Scanner::new(limits.max_body_bytes));
    if mode == Mode::Drain && kind.get {
        // The GET stream is "processed" once its head came: nothing to wait for.
        return "dropped";
    }
    loop {
        // Upstream before client: a body that has ended (an empty 202, say) counts as passed
        // even when the client has already hung up on it.
        let frame = tokio::select! {
            biased;
            () = tokio::time::sleep_until(pump.deadline) => return pump.abort("stream_max", record).await,
            frame = tokio::time::timeout(idle, upstream.frame()) => frame,
            () = client_gone(tx) => return "client_gone",
        };
        let data = match frame {
            Err(_) => return pump.abort("stream_idle", record).await,
            Ok(None) => {
                let spans = scanner.as_mut().map(Scanner::finish).unwrap_or_default();
                if let Step::Done(outcome) = pump.spans(&spans, record).await {
                    return outcome;
                }
                return pump.end_of_body(record).await;
            }
            Ok(Some(Err(_))) => return pump.abort("upstream_error", record).await,
            // Trailers are not forwarded (HTTP/1.1 servers of this kind send none).
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        let spans = scanner.as_mut().map(|s| s.feed(&data)).unwrap_or_default();
        if let Step::Done(outcome) = pump.data(data, record).await {
            return outcome;
        }
        if let Step::Done(outcome) = pump.spans(&spans, record).await {
            return outcome;
        }
    }
}

async fn client_gone(tx: Option<&mpsc::Sender<Result<Bytes, Aborted>>>) {
    match tx {
        Some(tx) => tx.closed().await,
        None => std::future::pending().await,
    }
}

impl Pump<'_> {
    /// Sends to the client (bounded by the body's deadline); `false` if the client is gone.
    async fn send(&self, item: Result<Bytes, Aborted>, record: &mut Record) -> bool {
        let Some(tx) = self.tx else { return true };
        let len = item.as_ref().map_or(0, |b| b.len() as u64);
        tokio::select! {
            biased;
            sent = tx.send(item) => {
                record.bytes(len);
                sent.is_ok()
            }
            () = tokio::time::sleep_until(self.deadline) => false,
        }
    }

    async fn abort(&self, why: &'static str, record: &mut Record) -> &'static str {
        self.send(Err(Aborted(why)), record).await;
        why
    }

    async fn data(&mut self, data: Bytes, record: &mut Record) -> Step {
        self.read += data.len();
        // A plain body is bounded as a whole; a stream only in what it holds back (one event).
        if (!self.kind.sse && self.read > self.max_body_bytes)
            || self.held.len() > self.max_body_bytes
        {
            return Step::Done(self.abort("response_too_large", record).await);
        }
        match self.mode {
            Mode::Pass => {
                if !self.send(Ok(data), record).await {
                    return Step::Done("client_gone");
                }
            }
            Mode::Truncate(_) | Mode::Cut(_) => self.held.extend_from_slice(&data),
            Mode::Drain => {}
        }
        Step::Continue
    }

    /// Releases held bytes up to stream offset `to`.
    async fn release(&mut self, to: usize, record: &mut Record) -> bool {
        let n = to.saturating_sub(self.held_from).min(self.held.len());
        if n == 0 {
            return true;
        }
        let bytes = Bytes::copy_from_slice(&self.held[..n]);
        self.held.drain(..n);
        self.held_from += n;
        self.send(Ok(bytes), record).await
    }

    /// Reacts to SSE events that completed.
    async fn spans(&mut self, spans: &[EventSpan], record: &mut Record) -> Step {
        for span in spans {
            let target = self.kind.is_target(span);
            match self.mode {
                Mode::Pass => {}
                Mode::Drain if target => return Step::Done("dropped"),
                Mode::Drain => {}
                Mode::Truncate(permille) | Mode::Cut(permille) => {
                    if !target {
                        if !self.release(span.end, record).await {
                            return Step::Done("client_gone");
                        }
                        continue;
                    }
                    let at = span.start + cut_point(span.end - span.start, permille).unwrap_or(0);
                    return Step::Done(self.land(at, record).await);
                }
            }
        }
        Step::Continue
    }

    /// A truncate or cut lands at stream offset `at`.
    async fn land(&mut self, at: usize, record: &mut Record) -> &'static str {
        if !self.release(at, record).await {
            return "client_gone";
        }
        record.applied();
        match self.mode {
            // Dropping the sender ends the client body cleanly after what was sent.
            Mode::Truncate(_) => "truncated",
            _ => {
                self.flushed().await;
                self.abort("cut", record).await
            }
        }
    }

    /// Waits until the connection has taken every queued frame, and a moment more for it to
    /// write them: hyper drops what it has buffered when a body fails, and a cut must deliver
    /// the bytes before the cut point. Bounded by the body's deadline and [`FLUSH_GRACE`].
    async fn flushed(&self) {
        let Some(tx) = self.tx else { return };
        let until = self.deadline.min(Instant::now() + FLUSH_GRACE);
        while tx.capacity() < tx.max_capacity() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep_until(until.min(Instant::now() + FLUSH_SETTLE)).await;
    }

    async fn end_of_body(&mut self, record: &mut Record) -> &'static str {
        match self.mode {
            Mode::Pass => "passed",
            Mode::Drain => "dropped",
            // A plain body is the target as a whole; a stream whose target never came passes.
            Mode::Truncate(permille) | Mode::Cut(permille) if !self.kind.sse => {
                match cut_point(self.read, permille) {
                    Some(at) => self.land(at, record).await,
                    None => self.flush(record).await,
                }
            }
            Mode::Truncate(_) | Mode::Cut(_) => self.flush(record).await,
        }
    }

    async fn flush(&mut self, record: &mut Record) -> &'static str {
        let end = self.held_from + self.held.len();
        if self.release(end, record).await {
            "passed"
        } else {
            "client_gone"
        }
    }
}
