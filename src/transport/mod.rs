//! Transport: protocol messages as bytes, both directions. The executor never sees sockets;
//! the simulator plugs a fault layer in here (`channel`), production plugs in MCP Streamable
//! HTTP (`http`), plain HTTP/JSON for AIP-151 (`aip_http`) or a child process (`stdio`).
//!
//! A frame may carry transport-level facts an HTTP exchange has (status, Retry-After) and the
//! JSON-RPC id of the request it answers (an HTTP response belongs to its POST). Only protocol
//! adapters read those fields.
//!
//! The live transports run their I/O in spawned tasks that feed the receive channel, so
//! `send` stays synchronous and the runner's loop is the same on every transport. They build
//! only outside `--cfg madsim`: the simulator never opens a socket.

#[cfg(not(madsim))]
pub mod aip_http;
#[cfg(not(madsim))]
mod body;
mod channel;
#[cfg(not(madsim))]
pub mod http;
#[cfg(not(madsim))]
mod live;
#[cfg(not(madsim))]
pub mod stdio;

pub use channel::ChannelTransport;
#[cfg(not(madsim))]
pub use live::{LiveTransport, TransportStats};

/// A message the executor sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutFrame {
    /// Id of the JSON-RPC request in `body`, if it is a request (lets HTTP answer a POST).
    /// For a plain HTTP protocol (AIP-151) it is the executor's correlation id of the exchange.
    pub request_id: Option<u64>,
    pub body: Vec<u8>,
    /// Method and path for protocols mapped onto plain HTTP; `None` for JSON-RPC, whose
    /// transport decides the endpoint itself.
    pub http: Option<HttpTarget>,
}

/// Where a plain-HTTP request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTarget {
    pub method: String,
    pub path: String,
}

/// A message the executor receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFrame {
    /// The request this frame answers at transport level, when known (HTTP status replies).
    pub request_id: Option<u64>,
    /// 200 for an ordinary message; 202, 404, 429, 503 ... as the HTTP layer reported them.
    pub http_status: u16,
    pub retry_after_ms: Option<u64>,
    pub body: Vec<u8>,
}

impl InFrame {
    pub fn message(body: Vec<u8>) -> InFrame {
        InFrame {
            request_id: None,
            http_status: 200,
            retry_after_ms: None,
            body,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// The connection is gone; what was sent may or may not have arrived.
    Disconnected,
}

/// Both directions of one connection to one server.
#[allow(async_fn_in_trait)]
pub trait Transport {
    fn send(&mut self, frame: OutFrame) -> Result<(), TransportError>;
    /// Next inbound frame; `None` when the connection is closed for good.
    async fn recv(&mut self) -> Option<InFrame>;
    /// A frame already delivered, without waiting; `None` when none is queued (open or closed).
    /// Not `recv` polled once: on real tokio that looks empty after the task's cooperative
    /// budget (128 ready polls) is spent, which cut a drain of more frames short.
    fn received(&mut self) -> Option<InFrame>;
}
