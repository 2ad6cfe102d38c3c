//! The runner-facing half of every live transport: frames go into a channel that a driver task
//! reads, frames come out of a channel that the driver's I/O tasks feed. Dropping the transport
//! aborts the driver and everything it spawned (a child process is killed with it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{InFrame, OutFrame, Transport, TransportError};

/// What a live transport did, for tests and `toolop status`. Counters only ever grow.
#[derive(Debug, Default)]
pub struct TransportStats {
    /// HTTP requests sent (POST, GET, DELETE; AIP calls) or lines written (stdio).
    pub requests: AtomicU64,
    /// Messages delivered to the runner.
    pub frames_in: AtomicU64,
    /// Sessions established (`Mcp-Session-Id` received on an initialize reply).
    pub sessions: AtomicU64,
    /// HTTP 404 on a request that carried a session id: the session is gone.
    pub sessions_lost: AtomicU64,
    /// Re-initializations the transport performed after a lost session.
    pub reinitializations: AtomicU64,
    /// GET streams opened for server-initiated messages.
    pub get_streams: AtomicU64,
    /// GET streams reopened with `Last-Event-ID` after a drop.
    pub get_resumptions: AtomicU64,
    /// Replies or events dropped because they exceeded the body cap.
    pub oversize: AtomicU64,
    /// Requests that failed below HTTP (refused, reset, timed out): what was sent may or may not
    /// have arrived; the runner's own deadline turns them into lost requests.
    pub failures: AtomicU64,
}

impl TransportStats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(super) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A transport whose I/O runs in tasks of the current tokio runtime.
pub struct LiveTransport {
    tx: Option<mpsc::UnboundedSender<OutFrame>>,
    rx: mpsc::UnboundedReceiver<InFrame>,
    stats: Arc<TransportStats>,
    /// The driver and its helpers; aborted on drop.
    tasks: JoinSet<()>,
}

/// What a driver gets: the frames to send, where to deliver what comes back, the counters, and a
/// set to spawn its helpers into (aborted with the transport).
pub(super) struct DriverParts {
    pub out: mpsc::UnboundedReceiver<OutFrame>,
    pub deliver: Deliver,
}

/// The sending half of the receive channel plus the counters.
#[derive(Clone)]
pub(super) struct Deliver {
    tx: mpsc::UnboundedSender<InFrame>,
    pub stats: Arc<TransportStats>,
}

impl Deliver {
    /// Hand a frame to the runner; `false` once the runner has gone.
    pub fn frame(&self, frame: InFrame) -> bool {
        TransportStats::bump(&self.stats.frames_in);
        self.tx.send(frame).is_ok()
    }

    pub fn closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl LiveTransport {
    /// Start `driver` on the current runtime. Must be called inside a tokio runtime.
    pub(super) fn start<F, Fut>(driver: F) -> LiveTransport
    where
        F: FnOnce(DriverParts) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let stats = Arc::new(TransportStats::default());
        let deliver = Deliver {
            tx: in_tx,
            stats: stats.clone(),
        };
        let mut tasks = JoinSet::new();
        tasks.spawn(driver(DriverParts {
            out: out_rx,
            deliver,
        }));
        LiveTransport {
            tx: Some(out_tx),
            rx: in_rx,
            stats,
            tasks,
        }
    }

    pub fn stats(&self) -> Arc<TransportStats> {
        self.stats.clone()
    }

    /// Stop sending; frames already in flight may still arrive. Used by tests to model a
    /// client that goes away.
    pub fn close(&mut self) {
        self.tx = None;
    }
}

impl Drop for LiveTransport {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}

impl Transport for LiveTransport {
    fn send(&mut self, frame: OutFrame) -> Result<(), TransportError> {
        match &self.tx {
            Some(tx) => tx.send(frame).map_err(|_| TransportError::Disconnected),
            None => Err(TransportError::Disconnected),
        }
    }

    async fn recv(&mut self) -> Option<InFrame> {
        self.rx.recv().await
    }

    fn received(&mut self) -> Option<InFrame> {
        self.rx.try_recv().ok()
    }
}
