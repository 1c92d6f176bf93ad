//! HTTP on the shared port (spec: ingest §3, query §0): the connection, CORS and gzip here; routing in [`router`],
//! request bodies in [`body`], answers in [`reply`], the endpoints in their own modules.
//!
//! Imports go one way: this module hands each request to [`router`], which reads its body ([`body`]) and calls
//! the endpoints; neither the router nor an endpoint imports from here.
//!
//! Bodies may be chunked or compressed (gzip, deflate); requests may use absolute-form targets; `Host` is never
//! checked (netdata sends `Host: tcp:127.0.0.1:4242`). Keep-alive connections stay open until they idle past
//! `rtsd.http.idle_timeout_secs` (see `super::conn`).
pub mod annotation;
pub mod body;
pub mod discovery;
pub mod graph;
pub mod meta;
pub mod put;
pub mod query;
pub mod reply;
pub mod request;
pub mod router;
pub mod stats;
pub mod ui;
pub mod uid;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_ENCODING, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

pub use reply::{Reply, HTML};
pub use request::{parse_query, percent_decode, ApiRequest};

use super::conn::{ActiveIo, Conn};
use super::Tsd;
use crate::ingest::SeriesCache;
use router::route;

pub async fn serve_connection(stream: TcpStream, tsd: Arc<Tsd>, conn: Arc<Conn>) {
    let peer = stream.peer_addr().ok();
    let service_tsd = tsd.clone();
    let service_conn = conn.clone();
    // One per connection: its requests come one after another, so the lock is never contended.
    let series = Arc::new(Mutex::new(SeriesCache::new(&tsd.store)));
    let service = hyper::service::service_fn(move |req| {
        let tsd = service_tsd.clone();
        let series = series.clone();
        let busy = service_conn.busy();
        async move {
            let response = handle(req, &tsd, peer, series).await;
            drop(busy);
            Ok::<_, Infallible>(response)
        }
    });
    drive(stream, &tsd, conn, service).await
}

/// Serves one HTTP/1 connection of either listener with `service` until the client closes it, it idles past its
/// limit or is evicted (`conn.closed`, see [`super::conn`]), or the daemon stops (then the request in flight
/// finishes first). Headers must arrive within `rtsd.http.request_timeout_secs`; every byte in or out counts
/// as activity.
pub(crate) async fn drive<S, B>(stream: TcpStream, tsd: &Tsd, conn: Arc<Conn>, service: S)
where
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(ActiveIo::new(stream, conn.clone()));
    let mut builder = hyper::server::conn::http1::Builder::new();
    // OpenTSDB sends no Date header.
    builder
        .keep_alive(true)
        .auto_date_header(false)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(tsd.config.http_request_timeout);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
                tsd.metrics.connection_exception("closed");
            }
        }
        _ = conn.closed.cancelled() => {}
        _ = tsd.shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// What CORS says about a request (spec: query §0.5).
enum Cors {
    /// `tsd.http.request.cors_domains` is empty: no headers, `OPTIONS` is refused.
    Off,
    /// No `Origin` header: nothing to do.
    NoOrigin,
    Allowed(String),
    Denied(String),
}

fn cors(tsd: &Tsd, origin: Option<&str>) -> Cors {
    let domains = &tsd.config.cors_domains;
    match origin {
        _ if domains.is_empty() => Cors::Off,
        None => Cors::NoOrigin,
        Some(o) if domains.iter().any(|d| d == "*" || *d == o.to_ascii_lowercase()) => Cors::Allowed(o.to_string()),
        Some(o) => Cors::Denied(o.to_string()),
    }
}

async fn handle(
    req: Request<Incoming>,
    tsd: &Arc<Tsd>,
    peer: Option<std::net::SocketAddr>,
    series: Arc<Mutex<SeriesCache>>,
) -> Response<Full<Bytes>> {
    tsd.metrics.rpc("http");
    let origin = req.headers().get(hyper::header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_string);
    let gzip = req
        .headers()
        .get(hyper::header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().split(';').next() == Some("gzip")));
    let cors = cors(tsd, origin.as_deref());
    let reply = match (&cors, req.method() == Method::OPTIONS) {
        (Cors::Off, true) => Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed",
            Some("The HTTP method [OPTIONS] is not permitted"),
        ),
        (Cors::Denied(o), _) => Reply::error(
            StatusCode::OK,
            "CORS domain not allowed",
            Some(&format!("The domain [{o}] is not permitted access")),
        ),
        (_, true) => Reply::json(StatusCode::OK, Bytes::new()),
        _ => route(req, tsd, peer, series).await,
    };
    tsd.metrics.http_response(reply.status.as_u16());
    // Compress as OpenTSDB's HttpContentCompressor does when the client allows it; tiny bodies aren't worth it.
    let compress = gzip && reply.body.len() > 256;
    let body = if compress { gzip_bytes(&reply.body) } else { None };
    let mut response = Response::new(Full::new(body.clone().unwrap_or(reply.body)));
    *response.status_mut() = reply.status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    for (name, value) in &reply.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(*name, v);
        }
    }
    if body.is_some() {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if let Cors::Allowed(o) = &cors {
        if let Ok(v) = HeaderValue::from_str(o) {
            headers.insert(hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        }
        headers.insert(hyper::header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, DELETE"));
        if let Ok(v) = HeaderValue::from_str(&tsd.config.cors_headers) {
            headers.insert(hyper::header::ACCESS_CONTROL_ALLOW_HEADERS, v);
        }
    }
    response
}

fn gzip_bytes(body: &[u8]) -> Option<Bytes> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4), flate2::Compression::fast());
    encoder.write_all(body).ok()?;
    encoder.finish().ok().map(Bytes::from)
}
