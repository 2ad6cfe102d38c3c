//! The simulated network between executor incarnations and the fake server. Every frame gets a
//! verdict here; this is where the fault layer slots in, with no change on either side.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use toolop::transport::{InFrame, OutFrame, Transport, TransportError};

use crate::trace::{Dir, SharedTrace, What};

/// What happens to one frame (turmoil-style).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Deliver { latency_ms: u64 },
    Drop,
}

impl Verdict {
    pub fn name(self) -> String {
        match self {
            Verdict::Deliver { latency_ms } => format!("deliver+{latency_ms}ms"),
            Verdict::Drop => "drop".into(),
        }
    }
}

/// The network: one server inbox, one inbox per open executor connection.
pub struct Net {
    rng: ChaCha8Rng,
    latency_ms: [u64; 2],
    to_server: mpsc::UnboundedSender<(u32, OutFrame)>,
    connections: BTreeMap<u32, mpsc::UnboundedSender<InFrame>>,
    trace: SharedTrace,
    origin: tokio::time::Instant,
}

pub type SharedNet = Arc<Mutex<Net>>;

impl Net {
    pub fn new(
        rng: ChaCha8Rng,
        latency_ms: [u64; 2],
        to_server: mpsc::UnboundedSender<(u32, OutFrame)>,
        trace: SharedTrace,
        origin: tokio::time::Instant,
    ) -> Net {
        Net { rng, latency_ms, to_server, connections: BTreeMap::new(), trace, origin }
    }

    fn now_ms(&self) -> u64 {
        tokio::time::Instant::now().duration_since(self.origin).as_millis() as u64
    }

    fn verdict(&mut self, _dir: Dir) -> Verdict {
        Verdict::Deliver { latency_ms: self.rng.gen_range(self.latency_ms[0]..=self.latency_ms[1]) }
    }

    fn record(&self, dir: Dir, request_id: Option<u64>, bytes: usize, v: Verdict) {
        let now = self.now_ms();
        self.trace.lock().expect("trace lock").push(now, What::Net { dir, request_id, bytes, verdict: v.name() });
    }

    /// Open a connection for a new executor incarnation.
    pub fn connect(net: &SharedNet, conn: u32) -> SimTransport {
        let (tx, rx) = mpsc::unbounded_channel();
        net.lock().expect("net lock").connections.insert(conn, tx);
        SimTransport { net: net.clone(), conn, rx }
    }

    /// Close a connection: frames in flight to it are lost, as on a real dropped socket.
    pub fn disconnect(&mut self, conn: u32) {
        self.connections.remove(&conn);
    }

    fn to_server(&mut self, conn: u32, frame: OutFrame) -> Result<(), TransportError> {
        if !self.connections.contains_key(&conn) {
            return Err(TransportError::Disconnected);
        }
        let v = self.verdict(Dir::ToServer);
        self.record(Dir::ToServer, frame.request_id, frame.body.len(), v);
        if let Verdict::Deliver { latency_ms } = v {
            let tx = self.to_server.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(latency_ms)).await;
                // The server outlives every delivery in a series; a send after it ends is moot.
                let _ = tx.send((conn, frame));
            });
        }
        Ok(())
    }

    /// A frame from the server to connection `conn`.
    pub fn to_executor(&mut self, conn: u32, frame: InFrame) {
        let v = self.verdict(Dir::ToExecutor);
        self.record(Dir::ToExecutor, frame.request_id, frame.body.len(), v);
        let (Verdict::Deliver { latency_ms }, Some(tx)) = (v, self.connections.get(&conn).cloned()) else {
            return;
        };
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(latency_ms)).await;
            let _ = tx.send(frame);
        });
    }

    /// The newest open connection: where the server sends what it initiates.
    pub fn latest_connection(&self) -> Option<u32> {
        self.connections.keys().next_back().copied()
    }
}

/// The executor's end of one connection.
pub struct SimTransport {
    net: SharedNet,
    conn: u32,
    rx: mpsc::UnboundedReceiver<InFrame>,
}

impl Transport for SimTransport {
    fn send(&mut self, frame: OutFrame) -> Result<(), TransportError> {
        self.net.lock().expect("net lock").to_server(self.conn, frame)
    }

    async fn recv(&mut self) -> Option<InFrame> {
        self.rx.recv().await
    }
}
