//! The Chukwa collector port (spec: chukwa §3, §6, §8.1-§8.2): a second listener (`rtsd.chukwa.port`, 8080 by
//! default) that unmodified Chukwa agents post to as to their collector, and that answers HICC's metric reads.
//!
//! * `POST` on any path (agents post to `<collector>/chukwa`; Java's servlet took every path): the body, raw or
//!   zlib/gzip (by `rtsd.chukwa.compression`, sniffed by default), goes to [`Collector::ingest`]; the reply is
//!   `200` with one `ok: ...` line per chunk once everything is durable, `500` with the framing error for a body
//!   that can't be read, `503 Commit failed` when storage can't commit, `413` past the size limit.
//! * `GET .../acks`: the async-ack commit page, always empty (we never answer "pending").
//! * `GET /hicc/v1/metrics/...`: HICC's `MetricsController` over Chukwa's tables.
//! * Any other `GET`: "Chukwa servlet running", or with `?ping` the five stats lines. `TRACE` and other methods
//!   get 405.
//!
//! HTTP/1.1 with keep-alive, absolute-form request targets (commons-httpclient's) routed on their path,
//! `Content-Length` or chunked bodies.
use std::convert::Infallible;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use rtsd_protocol::chukwa::{self as wire, Compression};
use tokio::net::{TcpListener, TcpStream};

use super::conn::BodyError;
use super::http::{parse_query, Reply};
use super::Tsd;
use crate::chukwa::config::BodyCompression;
use crate::chukwa::{schema, Collector, IngestError};
use crate::config::Config;

const HTML: &str = "text/html; charset=UTF-8";
const TEXT: &str = "text/plain; charset=UTF-8";
const JSON: &str = "application/json";

/// Binds the Chukwa listener if the configuration asks for one. A port that was only defaulted and can't be bound
/// (another service owns 8080) is logged and skipped; an explicitly configured one is an error with its address.
pub async fn bind_configured(config: &Config) -> Result<Option<TcpListener>, (SocketAddr, std::io::Error)> {
    let c = &config.chukwa;
    if c.port == 0 {
        return Ok(None);
    }
    let addr = SocketAddr::new(c.bind, c.port);
    match super::bind_addr(addr) {
        Ok(listener) => Ok(Some(listener)),
        Err(e) if !c.port_required => {
            tracing::warn!(%addr, error = %e, "Chukwa collector port not opened (set rtsd.chukwa.port, or 0 to turn it off)");
            Ok(None)
        }
        Err(e) => Err((addr, e)),
    }
}

/// Accepts connections until shutdown, then waits for open ones to finish their current request.
pub async fn serve(listener: TcpListener, tsd: Arc<Tsd>, collector: Arc<Collector>) {
    super::accept_loop(listener, tsd, "chukwa", move |stream, _peer, tsd, conn| {
        tsd.metrics.connection("chukwa");
        let collector = collector.clone();
        async move { serve_connection(stream, &tsd, collector, conn).await }
    })
    .await
}

async fn serve_connection(stream: TcpStream, tsd: &Arc<Tsd>, collector: Arc<Collector>, conn: Arc<super::conn::Conn>) {
    conn.set_idle_limit(tsd.config.http_idle_timeout);
    let service_tsd = tsd.clone();
    let service_conn = conn.clone();
    let service = hyper::service::service_fn(move |req| {
        let (tsd, collector) = (service_tsd.clone(), collector.clone());
        let busy = service_conn.busy();
        async move {
            let response = respond(handle(req, tsd, collector).await);
            drop(busy);
            Ok::<_, Infallible>(response)
        }
    });
    super::http::drive(stream, tsd, conn, service).await
}

fn respond(reply: Reply) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(reply.body));
    *response.status_mut() = reply.status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    response
}

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    Reply { status, body: body.into(), content_type, headers: Vec::new() }
}

async fn handle(req: Request<Incoming>, tsd: Arc<Tsd>, collector: Arc<Collector>) -> Reply {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let is_hicc = path.starts_with("/hicc/");
    match method {
        Method::POST if !is_hicc => post(req, tsd, collector).await,
        Method::GET | Method::HEAD if is_hicc => hicc(&path, &query, tsd).await,
        Method::GET | Method::HEAD => {
            if path.trim_end_matches('/').rsplit('/').next() == Some("acks") {
                reply(StatusCode::OK, HTML, wire::ACKS_PAGE)
            } else if parse_query(&query).iter().any(|(k, _)| k == "ping") {
                reply(StatusCode::OK, TEXT, collector.ping_body())
            } else {
                reply(StatusCode::OK, HTML, wire::SERVLET_RUNNING_PAGE)
            }
        }
        other => {
            reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, format!("HTTP method {other} is not supported by this URL\n"))
        }
    }
}

/// An agent's post.
async fn post(req: Request<Incoming>, tsd: Arc<Tsd>, collector: Arc<Collector>) -> Reply {
    collector.note_post();
    let config = collector.config();
    let limit = config.max_body_bytes;
    let too_large = |tsd: &Tsd| {
        tsd.metrics.chukwa_post("too_large");
        reply(StatusCode::PAYLOAD_TOO_LARGE, TEXT, format!("post body exceeds the limit of {limit} bytes\n"))
    };
    // The post's bytes hold their share of rtsd.http.max_buffered_bytes until it is answered, as on the main port.
    let declared = super::conn::declared_length(req.headers());
    let timeout = tsd.config.http_request_timeout;
    let (raw, _held) = match super::conn::receive_body(req.into_body(), declared, limit, &tsd.bodies, timeout).await {
        Ok(received) => received,
        Err(BodyError::TooLarge) => return too_large(&tsd),
        Err(BodyError::Busy) => {
            tsd.metrics.chukwa_post("busy");
            return reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, wire::COMMIT_FAILED_BODY);
        }
        Err(BodyError::TimedOut) => {
            tsd.metrics.chukwa_post("bad_body");
            return reply(StatusCode::REQUEST_TIMEOUT, TEXT, "post body not received in time\n");
        }
        Err(BodyError::Broken(e)) => {
            tsd.metrics.chukwa_post("bad_body");
            return reply(StatusCode::BAD_REQUEST, TEXT, format!("cannot read the post body: {e}\n"));
        }
    };
    let body = match decompress(raw, config.compression, limit) {
        Ok(body) => body,
        Err(Inflate::TooLarge) => return too_large(&tsd),
        Err(Inflate::Bad(what)) => {
            tsd.metrics.chukwa_post("bad_body");
            return reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, what);
        }
    };
    if !tsd.config.mode.writes() {
        tsd.metrics.chukwa_post("commit_failed");
        return reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, wire::COMMIT_FAILED_BODY);
    }
    let ingest_tsd = tsd.clone();
    let result = tokio::task::spawn_blocking(move || {
        collector.ingest(&ingest_tsd.store, &ingest_tsd.metrics, &ingest_tsd.config.rules, &body)
    })
    .await;
    match result {
        Ok(Ok(body)) => {
            tsd.metrics.chukwa_post("ok");
            reply(StatusCode::OK, TEXT, body)
        }
        Ok(Err(IngestError::Frame(e))) => {
            tsd.metrics.chukwa_post("bad_body");
            tracing::debug!(error = %e, "Chukwa post refused");
            reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, e.to_string())
        }
        Ok(Err(IngestError::Unavailable(e))) => {
            tsd.metrics.chukwa_post("commit_failed");
            tracing::error!(error = %e, "Chukwa post not committed");
            reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, wire::COMMIT_FAILED_BODY)
        }
        Err(e) => {
            tsd.metrics.chukwa_post("commit_failed");
            tracing::error!(error = %e, "Chukwa ingest task failed");
            reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, wire::COMMIT_FAILED_BODY)
        }
    }
}

enum Inflate {
    TooLarge,
    Bad(String),
}

/// The body as the agent serialized it: inflated when compressed (whole body, count included, spec §3.2).
fn decompress(raw: Bytes, mode: BodyCompression, limit: usize) -> Result<Bytes, Inflate> {
    let kind = match mode {
        BodyCompression::Auto => wire::sniff_compression(&raw),
        BodyCompression::None => Compression::None,
        BodyCompression::Zlib => Compression::Zlib,
        BodyCompression::Gzip => Compression::Gzip,
    };
    let mut out = Vec::new();
    let cap = limit as u64 + 1;
    let read = match kind {
        Compression::None => return Ok(raw),
        Compression::Zlib => flate2::read::ZlibDecoder::new(&raw[..]).take(cap).read_to_end(&mut out),
        Compression::Gzip => flate2::read::MultiGzDecoder::new(&raw[..]).take(cap).read_to_end(&mut out),
    };
    match read {
        Ok(_) if out.len() > limit => Err(Inflate::TooLarge),
        Ok(_) => Ok(Bytes::from(out)),
        Err(e) => Err(Inflate::Bad(format!("bad post body: cannot inflate the {kind:?} stream: {e}"))),
    }
}

/// HICC's `/hicc/v1/metrics/...` (spec §6), read from Chukwa's tables; served on the Chukwa port and the main one.
pub(crate) async fn hicc(path: &str, query: &str, tsd: Arc<Tsd>) -> Reply {
    let segments: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(percent_decode_path).collect();
    let Some(rest) = segments.strip_prefix(&["hicc".to_string(), "v1".to_string(), "metrics".to_string()]) else {
        return reply(StatusCode::NOT_FOUND, TEXT, "Not Found\n");
    };
    let rest = rest.to_vec();
    let params = parse_query(query);
    let param = |name: &str| params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let (start, end) = (param("start"), param("end"));
    let hicc_tz = tsd.config.chukwa.hicc_tz.clone();
    let work = move || -> Result<Reply, crate::store::StoreError> {
        let store = &tsd.store;
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        Ok(match rest.as_slice() {
            ["series", metric, source] => {
                let now = jiff::Timestamp::now().as_millisecond();
                let start = match start.as_deref().map(|s| hicc_time(s, &hicc_tz)) {
                    None => now - 3_600_000,
                    Some(Some(t)) => t,
                    Some(None) => return Ok(date_error()),
                };
                let end = match end.as_deref().map(|s| hicc_time(s, &hicc_tz)) {
                    None => now,
                    Some(Some(t)) => t,
                    Some(None) => return Ok(date_error()),
                };
                let points = schema::read_series(store, metric, source, start, end)?;
                reply(StatusCode::OK, JSON, schema::series_json(&format!("{metric}:{source}"), &points))
            }
            // Sources come from an HTTP session attribute in HICC; rtsd keeps no sessions, so there are none.
            ["series", _, _, "session", _] => reply(StatusCode::OK, JSON, "[]"),
            ["schema"] => reply(StatusCode::OK, JSON, schema::gson_list(&schema::metric_groups(store)?)),
            ["schema", group] => reply(StatusCode::OK, JSON, schema::gson_list(&schema::metric_names(store, group)?)),
            ["source", _group] => reply(StatusCode::OK, JSON, schema::gson_list(&schema::source_names(store)?)),
            _ => reply(StatusCode::NOT_FOUND, TEXT, "Not Found\n"),
        })
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("{e}\n")),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("{e}\n")),
    }
}

fn date_error() -> Reply {
    reply(StatusCode::BAD_REQUEST, JSON, "Start/End date parse error.  Format: yyyyMMddHHmmss.")
}

/// A HICC time, `yyyyMMddHHmmss` in the server's zone, read as Java's lenient `SimpleDateFormat` reads it:
/// fields may overflow (month 13 is next January), text after the 14 digits is ignored.
pub fn hicc_time(s: &str, tz: &jiff::tz::TimeZone) -> Option<i64> {
    let digits = s.as_bytes().get(..14)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let field = |from: usize, to: usize| s[from..to].parse::<i64>().ok();
    crate::chukwa::rules::lenient_ms(
        field(0, 4)?,
        field(4, 6)?,
        field(6, 8)?,
        field(8, 10)?,
        field(10, 12)?,
        field(12, 14)?,
        0,
        tz,
    )
}

/// A path segment decoded as JAX-RS decodes `@PathParam`s: `%xx` escapes, `+` kept.
fn percent_decode_path(s: &str) -> String {
    super::http::percent_decode(s, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hicc_times_are_lenient_and_zoned() {
        let utc = jiff::tz::TimeZone::UTC;
        assert_eq!(hicc_time("20160620000000", &utc), Some(1_466_380_800_000));
        assert_eq!(hicc_time("20160620000000junk", &utc), Some(1_466_380_800_000));
        assert_eq!(hicc_time("20151301000000", &utc), hicc_time("20160101000000", &utc));
        assert_eq!(hicc_time("2016062000000", &utc), None);
        assert_eq!(hicc_time("2016-06-20 00:00", &utc), None);
        let tokyo = jiff::tz::TimeZone::get("Asia/Tokyo").unwrap();
        assert_eq!(hicc_time("20160620090000", &tokyo), Some(1_466_380_800_000));
    }

    #[test]
    fn path_segments_decode() {
        assert_eq!(percent_decode_path("nn1.example.com%3ANameNode"), "nn1.example.com:NameNode");
        assert_eq!(percent_decode_path("a+b%2"), "a+b%2");
        assert_eq!(percent_decode_path("%zz%41"), "%zzA");
    }

    #[test]
    fn bodies_inflate_by_sniffing() {
        use std::io::Write;
        let body = b"\0\0\0\0".to_vec();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&body).unwrap();
        let zlib = z.finish().unwrap();
        assert_eq!(&decompress(Bytes::from(zlib.clone()), BodyCompression::Auto, 100).ok().unwrap()[..], &body[..]);
        assert_eq!(&decompress(Bytes::from(body.clone()), BodyCompression::Auto, 100).ok().unwrap()[..], &body[..]);
        assert!(matches!(decompress(Bytes::from(zlib.clone()), BodyCompression::Auto, 3), Err(Inflate::TooLarge)));
        assert!(matches!(
            decompress(Bytes::from_static(b"\x78\x9c\xff\xff"), BodyCompression::Auto, 100),
            Err(Inflate::Bad(_))
        ));
        assert!(matches!(decompress(Bytes::from(body.clone()), BodyCompression::Gzip, 100), Err(Inflate::Bad(_))));
        // Raw mode hands zlib bytes to the parser untouched.
        assert_eq!(&decompress(Bytes::from(zlib.clone()), BodyCompression::None, 100).ok().unwrap()[..], &zlib[..]);
    }
}
