//! The listener, the per-connection HTTP/1.1 server, and the per-request decision: read the
//! request (bounded), decide, forward, apply the fault, log.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST, RETRY_AFTER};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::config::{Limits, ProxyConfig};
use crate::log::{LogSink, Record};
use crate::plan::{Fault, Plan};
use crate::pump::{self, Aborted, Kind, Mode};

type ProxyBody = BoxBody<Bytes, Aborted>;

/// Headers that belong to one hop (RFC 9110 §7.6.1), never forwarded either way.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

struct Shared {
    plan: Plan,
    upstream: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    limits: Limits,
    log: LogSink,
    next: AtomicU64,
}

/// A running proxy. Dropping it stops the listener and every connection it holds.
pub struct Running {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting, closes every connection, and waits (bounded) for the listener task.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = &mut self.task;
        if tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `config.listen` and serves until the returned [`Running`] is stopped or dropped.
pub async fn start(config: ProxyConfig, log: LogSink) -> std::io::Result<Running> {
    let listener = TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_millis(
        config.limits.upstream_timeout_ms,
    )));
    connector.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    let shared = Arc::new(Shared {
        plan: Plan::new(config.seed, config.faults),
        upstream: config.upstream,
        client,
        limits: config.limits,
        log,
        next: AtomicU64::new(0),
    });
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(accept_loop(listener, shared, rx));
    Ok(Running {
        addr,
        shutdown: Some(tx),
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections));
    // Dropped when this loop ends: every connection task is aborted with it.
    let mut connections = JoinSet::new();
    loop {
        // A connection beyond the limit waits in the kernel backlog until one closes.
        let permit = tokio::select! {
            biased;
            _ = &mut shutdown => return,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            biased;
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    eprintln!("toolop-fault-proxy: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        connections.spawn(serve_connection(stream, shared.clone(), permit));
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>, _permit: OwnedSemaphorePermit) {
    let _ = stream.set_nodelay(true);
    let read_timeout = Duration::from_millis(shared.limits.request_read_timeout_ms);
    let service = service_fn(move |req| handle(shared.clone(), req));
    // Errors here are the client's connection ending (or our deliberate aborts): nothing to do.
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A response the proxy makes itself.
fn own_response(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut resp = Response::new(full(text));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// The JSON-RPC method and id of a request body, if it is one (the first of a batch).
fn jsonrpc(body: &[u8]) -> (Option<String>, Option<Value>) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (None, None);
    };
    let message = match &value {
        Value::Array(batch) => batch.first().cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    (method, message.get("id").cloned())
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Aborted> {
    let n = shared.next.fetch_add(1, Ordering::SeqCst);
    let drawn = shared.plan.decide(n);
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let method = req.method().clone();
    let mut record = Record::new(
        shared.log.clone(),
        n,
        shared.plan.seed(),
        drawn,
        method.as_str(),
        &path,
    );
    let limits = &shared.limits;

    let (mut parts, body) = req.into_parts();
    let read = tokio::time::timeout(
        Duration::from_millis(limits.request_read_timeout_ms),
        Limited::new(body, limits.max_body_bytes).collect(),
    )
    .await;
    let body = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) | Err(_) => {
            record.status(413);
            record.finish("request_too_large");
            let text = format!(
                "fault proxy: request body above {} bytes or not sent in time\n",
                limits.max_body_bytes
            );
            return Ok(own_response(StatusCode::PAYLOAD_TOO_LARGE, text));
        }
    };
    let (rpc_method, rpc_id) = jsonrpc(&body);
    let key = rpc_method
        .clone()
        .unwrap_or_else(|| method.as_str().to_string());
    record.rpc(rpc_method, rpc_id);
    let fault = if shared.plan.targets(&drawn, &key) {
        drawn
    } else {
        Fault::None
    };
    record.fault(&fault);

    if let Fault::Reject {
        status,
        retry_after_s,
    } = fault
    {
        record.applied();
        record.status(status);
        record.finish("rejected");
        let status = StatusCode::from_u16(status).expect("validated: 429 or 503");
        let mut resp = own_response(
            status,
            format!("fault proxy: injected {}\n", status.as_u16()),
        );
        resp.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
        return Ok(resp);
    }

    // Forward: same method, path and headers (less hop-by-hop ones), Host of the upstream.
    let mut uri = shared.upstream.clone().into_parts();
    uri.path_and_query = parts.uri.path_and_query().cloned();
    parts.uri = Uri::from_parts(uri).expect("upstream authority and a client path make a URI");
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(CONTENT_LENGTH);
    let authority = shared
        .upstream
        .authority()
        .expect("validated: upstream has an authority")
        .as_str();
    parts.headers.insert(
        HOST,
        HeaderValue::from_str(authority).expect("an authority is a header value"),
    );
    parts.version = hyper::Version::HTTP_11;
    let forwarded = Request::from_parts(parts, Full::new(body));
    let answer = tokio::time::timeout(
        Duration::from_millis(limits.upstream_timeout_ms),
        shared.client.request(forwarded),
    )
    .await;
    let resp = match answer {
        Ok(Ok(resp)) => resp,
        Ok(Err(e)) => {
            record.status(502);
            record.finish("upstream_error");
            return Ok(own_response(
                StatusCode::BAD_GATEWAY,
                format!("fault proxy: upstream: {e}\n"),
            ));
        }
        Err(_) => {
            record.status(504);
            record.finish("upstream_timeout");
            return Ok(own_response(
                StatusCode::GATEWAY_TIMEOUT,
                "fault proxy: upstream timed out\n".into(),
            ));
        }
    };
    record.upstream_status(resp.status().as_u16());
    let (mut head, upstream_body) = resp.into_parts();
    let sse = head
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let kind = Kind {
        sse,
        get: method == hyper::Method::GET,
    };

    let mode = match fault {
        Fault::DropAfter { hang_ms } => {
            let outcome = pump::drain(upstream_body, kind, limits, &mut record).await;
            if outcome == "dropped" {
                record.applied();
            }
            tokio::time::sleep(Duration::from_millis(hang_ms)).await;
            record.finish(outcome);
            // An error from the service makes hyper close the connection without a response.
            return Err(Aborted("drop_after"));
        }
        Fault::Delay { delay_ms } => {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            record.applied();
            Mode::Pass
        }
        Fault::Truncate { at_permille } => Mode::Truncate(at_permille),
        Fault::Cut { at_permille } => Mode::Cut(at_permille),
        Fault::None | Fault::Reject { .. } => Mode::Pass,
    };
    strip_hop_by_hop(&mut head.headers);
    let mut exact_len = head
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    if matches!(mode, Mode::Truncate(_)) {
        // A truncated body ends cleanly: its length is not the server's any more (chunked).
        head.headers.remove(CONTENT_LENGTH);
        exact_len = None;
    }
    record.status(head.status.as_u16());
    let body = pump::spawn(upstream_body, mode, kind, limits.clone(), exact_len, record);
    Ok(Response::from_parts(head, body.boxed()))
}
