//! The in-process transport: two unbounded channels. The simulator's links use it; tests use it
//! to script a server.

use tokio::sync::mpsc;

use super::{InFrame, OutFrame, Transport, TransportError};

/// A transport over two unbounded channels: the simulator's link and the HTTP bridge both
/// speak to the executor through one of these.
pub struct ChannelTransport {
    pub tx: mpsc::UnboundedSender<OutFrame>,
    pub rx: mpsc::UnboundedReceiver<InFrame>,
}

impl ChannelTransport {
    /// A transport plus the far ends: (executor side, frames the executor sent, sender of frames to it).
    pub fn pair() -> (
        ChannelTransport,
        mpsc::UnboundedReceiver<OutFrame>,
        mpsc::UnboundedSender<InFrame>,
    ) {
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        (
            ChannelTransport {
                tx: out_tx,
                rx: in_rx,
            },
            out_rx,
            in_tx,
        )
    }
}

impl Transport for ChannelTransport {
    fn send(&mut self, frame: OutFrame) -> Result<(), TransportError> {
        self.tx
            .send(frame)
            .map_err(|_| TransportError::Disconnected)
    }

    async fn recv(&mut self) -> Option<InFrame> {
        self.rx.recv().await
    }

    fn received(&mut self) -> Option<InFrame> {
        self.rx.try_recv().ok()
    }
}
