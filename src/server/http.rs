//! HTTP on the shared port: routing as OpenTSDB does it, `/api/put`, and the endpoints that exist so far
//! (spec: ingest §3, query §0).
//!
//! Bodies may be chunked or compressed (gzip, deflate); requests may use absolute-form targets; `Host` is never
//! checked (netdata sends `Host: tcp:127.0.0.1:4242`). Keep-alive connections stay open until the client closes
//! them.
use std::borrow::Cow;
use std::convert::Infallible;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_ENCODING, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rtsd_protocol::http_json;
use rtsd_protocol::json_put::{self, BodyPoint, IncomingPoint, PutDetail};
use rtsd_protocol::point::{self, DataPoint, ErrorCategory, PutError, Tags};
use tokio::net::TcpStream;

use super::conn::{ActiveIo, BodyBudget, Conn};
use super::{annotation, discovery, graph, query, stats, ui, Tsd};
use crate::ingest::{IngestError, SeriesCache, Writer};
use crate::metrics::Protocol;
use crate::store::StoreError;

const JSON: &str = "application/json; charset=UTF-8";
pub const HTML: &str = "text/html; charset=UTF-8";

/// OpenTSDB's `HttpQuery.makePage`: the small HTML page its non-API routes answer with (the header image it
/// links, `s/opentsdb_header.jpg`, is left out).
pub fn make_page(title: &str, subtitle: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta http-equiv=content-type content=\"text/html;charset=utf-8\"><title>{title}\
         </title>\n<style><!--\nbody{{font-family:arial,sans-serif;margin-left:2em}}A.l:link{{color:#6f6f6f}}\
         A.u:link{{color:green}}.fwf{{font-family:monospace;white-space:pre-wrap}}//--></style></head>\n<body \
         text=#000000 bgcolor=#ffffff><table border=0 cellpadding=2 cellspacing=0 width=100%><tr><td rowspan=3 \
         width=1% nowrap><td>&nbsp;</td></tr><tr><td><font color=#507e9b><b>{subtitle}</b></td></tr><tr><td>&nbsp;\
         </td></tr></table>{body}<table width=100% cellpadding=0 cellspacing=0><tr><td class=subg><img alt=\"\" \
         width=1 height=6></td></tr></table></body></html>"
    )
}

/// An error message inside an HTML page. OpenTSDB pastes it raw; rtsd escapes it (messages quote the request,
/// so a link could otherwise run script on the daemon's origin) except for the `<code>` tags OpenTSDB's own
/// texts contain (`Missing parameter <code>start</code>`).
fn html_message(message: &str) -> String {
    message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace("&lt;code&gt;", "<code>")
        .replace("&lt;/code&gt;", "</code>")
}

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

/// A reply before transport details: status, body, content type.
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    pub content_type: &'static str,
    /// Headers beyond the content type (`Location`, `Cache-Control`).
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
        Reply { status, body: body.into(), content_type, headers: Vec::new() }
    }

    pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Reply {
        Reply::new(status, JSON, body)
    }

    /// A plain-text reply typed as 2.4 types it: its old routes (`/version`, `/stats`, `/logs`, `/q?ascii`) send
    /// through content sniffing, which answers a body not starting with `<`, `{` or `[` with `text/plain` and no
    /// charset (spec: query §0.3, HttpQuery.guessMimeTypeFromContents).
    pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Reply {
        Reply::new(status, "text/plain", body)
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// An error of the non-`/api` routes ("API version 0", spec: query §0.1): `{"err":"..."}` when the request
    /// has the `json` parameter, else OpenTSDB's HTML error page. `status` is 400 or 500 (OpenTSDB answers
    /// every bad request of these routes with 400, whatever the cause).
    pub fn page_error(status: StatusCode, message: &str, json: bool) -> Reply {
        if json {
            return Reply::json(status, format!("{{\"err\":{}}}", http_json::json_string(message)));
        }
        let body = if status == StatusCode::BAD_REQUEST {
            make_page(
                "Bad Request",
                "Looks like it's your fault this time",
                &format!(
                    "<blockquote><h1>Bad Request</h1>Sorry but your request was rejected as being invalid.<br/><br/>\
                     The reason provided was:<blockquote>{}</blockquote></blockquote>",
                    html_message(message)
                ),
            )
        } else {
            make_page(
                "Internal Server Error",
                "Houston, we have a problem",
                &format!(
                    "<blockquote><h1>Internal Server Error</h1>Oops, sorry but your request failed due to a server \
                     error.<br/><br/>Please try again in 30 seconds.<pre>{}</pre></blockquote>",
                    html_message(message)
                ),
            )
        };
        Reply::new(status, HTML, body)
    }

    /// The 404 of the non-`/api` routes.
    pub fn page_not_found(json: bool) -> Reply {
        if json {
            return Reply::json(StatusCode::NOT_FOUND, r#"{"err":"Page Not Found"}"#);
        }
        let body = make_page(
            "Page Not Found",
            "Error 404",
            "<blockquote><h1>Page Not Found</h1>The requested URL was not found on this server.</blockquote>",
        );
        Reply::new(StatusCode::NOT_FOUND, HTML, body)
    }

    /// OpenTSDB's error envelope (spec: ingest §3.7).
    pub fn error(status: StatusCode, message: &str, details: Option<&str>) -> Reply {
        Reply::json(status, http_json::error_envelope(status.as_u16(), message, details))
    }

    pub fn not_found() -> Reply {
        Reply::error(StatusCode::NOT_FOUND, "Endpoint not found", None)
    }

    /// 2.4's serializers (`HttpJsonSerializer.parse*V1`) refusing an empty body.
    pub fn missing_content() -> Reply {
        Reply::error(
            StatusCode::BAD_REQUEST,
            "Missing message content",
            Some("Supply valid JSON formatted data in the body of your request"),
        )
    }

    /// 2.4's serializers refusing a body Jackson cannot read into the endpoint's object; `details` is the
    /// parser's complaint.
    pub fn unparsable_json(details: &str) -> Reply {
        Reply::error(StatusCode::BAD_REQUEST, "Unable to parse the given JSON", Some(details))
    }

    pub fn method_not_allowed(method: &Method) -> Reply {
        Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed",
            Some(&format!("The HTTP method [{method}] is not permitted for this endpoint")),
        )
    }
}

/// A request as handlers see it: method, route segments, query parameters, decoded body.
pub struct ApiRequest {
    pub method: Method,
    pub params: Vec<(String, String)>,
    pub body: Bytes,
    /// Set once the client is gone (its connection closed before the answer): long reads stop early.
    pub cancelled: Arc<AtomicBool>,
    /// The client's address (for `/api/stats/query`).
    pub remote: Option<std::net::SocketAddr>,
    /// The request headers as sent, in order (for `/api/stats/query`).
    pub headers: Vec<(String, String)>,
    /// The connection's series cache (for `/api/put`).
    pub series: Arc<Mutex<SeriesCache>>,
}

impl ApiRequest {
    /// Presence-based flags, as OpenTSDB tests them (`?summary=false` still turns summary on).
    pub fn has(&self, name: &str) -> bool {
        self.params.iter().any(|(k, _)| k == name)
    }

    /// The last occurrence of a parameter (OpenTSDB's `getQueryStringParam`).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The body as the JSON object an endpoint's serializer reads (spec: query §0.3), or 2.4's reply for an
    /// empty body or one that is not an object.
    pub fn json_object(&self) -> Result<serde_json::Map<String, serde_json::Value>, Reply> {
        if self.body.is_empty() {
            return Err(Reply::missing_content());
        }
        match serde_json::from_slice::<serde_json::Value>(&self.body) {
            Ok(serde_json::Value::Object(obj)) => Ok(obj),
            Ok(other) => {
                Err(Reply::unparsable_json(&format!("expected a JSON object, got {}", http_json::json_kind(&other))))
            }
            Err(e) => Err(Reply::unparsable_json(&e.to_string())),
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

/// Whether the endpoint at `segments` takes its method from `method_override`: 2.4's `getAPIMethod` is called
/// by the annotation, search, uidmeta/tsmeta handlers and by the query handler for DELETE (/api/query and
/// /gexp); every other one (suggest, version, uid/assign, query/last, dropcaches, ...) reads the request's own
/// method and ignores the parameter, malformed or not.
fn reads_method_override(segments: &[String]) -> bool {
    let api: Vec<&str> = match segments.split_first() {
        Some((first, rest)) if first == "api" => rest.iter().map(String::as_str).collect(),
        _ => return false,
    };
    let api = match api.split_first() {
        Some((first, rest)) if api_version(first).is_some() => rest.to_vec(),
        _ => api,
    };
    matches!(
        api.as_slice(),
        ["annotation" | "annotations" | "search", ..] | ["query"] | ["query", "gexp"] | ["uid", "uidmeta" | "tsmeta"]
    )
}

/// The version of an `/api/vN/...` path's first segment after `api` (`N`, still text: `1`, `2`, `1x`), or `None`
/// when the segment names an endpoint (2.4: a `v` followed by a digit).
fn api_version(segment: &str) -> Option<&str> {
    segment.strip_prefix('v').filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
}

async fn route(
    req: Request<Incoming>,
    tsd: &Arc<Tsd>,
    remote: Option<std::net::SocketAddr>,
    series: Arc<Mutex<SeriesCache>>,
) -> Reply {
    let mut method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let params = parse_query(&raw_query);
    // Split on `/`, drop empty segments (so a trailing slash is harmless), compare lower-cased (spec: query §0.1).
    let segments: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(|s| s.to_ascii_lowercase()).collect();
    // GET with method_override acts as the named method on the endpoints that read it (spec: query §0.1).
    if method == Method::GET && reads_method_override(&segments) {
        if let Some((_, v)) = params.iter().rev().find(|(k, _)| k == "method_override") {
            method = match v.to_ascii_lowercase().as_str() {
                "get" => Method::GET,
                "post" => Method::POST,
                "put" => Method::PUT,
                "delete" => Method::DELETE,
                "" => return Reply::error(StatusCode::METHOD_NOT_ALLOWED, "Missing method override value", None),
                _ => {
                    return Reply::error(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "Unknown or unsupported method override value",
                        None,
                    )
                }
            };
        }
    }
    // HICC's metric reads, the same handler and answers as on the Chukwa collector port: dashboards find every
    // read on the main port. Its paths are case-sensitive (JAX-RS), unlike OpenTSDB's.
    if path.starts_with("/hicc/") && (method == Method::GET || method == Method::HEAD) {
        return super::chukwa::hicc(&path, &raw_query, tsd.clone()).await;
    }
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    // The body's bytes hold their share of the process-wide budget until the reply is made.
    let (body, _held) =
        match read_body(req, tsd.config.max_body_bytes, &tsd.bodies, tsd.config.http_request_timeout).await {
            Ok(read) => read,
            Err(reply) => return reply,
        };
    let request = Arc::new(ApiRequest { method, params, body, cancelled: Arc::default(), remote, headers, series });
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    // The UI and /q (tsd.core.enable_ui); OpenTSDB registers them only where queries run.
    let ui = tsd.config.enable_ui && tsd.config.mode.reads();
    let reply = match segs.as_slice() {
        ["metrics"] => {
            let reply = blocking(&request, tsd, |_, tsd| {
                tsd.refresh_store_gauges();
                Reply::new(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", tsd.metrics.encode())
            });
            reply.await.unwrap_or_else(|| Reply::text(StatusCode::INTERNAL_SERVER_ERROR, "Internal error"))
        }
        ["api", ..] => {
            let rest: Vec<String> = segments[1..].to_vec();
            let reply = blocking(&request, tsd, move |request, tsd| {
                let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                api(&rest, request, tsd)
            })
            .await;
            reply.unwrap_or_else(|| Reply::error(StatusCode::INTERNAL_SERVER_ERROR, "Internal error", None))
        }
        ["version"] => Reply::text(StatusCode::OK, crate::version::telnet_reply()),
        ["health"] => health(tsd),
        ["suggest"] if tsd.config.mode.reads() => discovery::suggest_v0(&request, tsd),
        ["aggregators"] => Reply::json(StatusCode::OK, rtsd_protocol::query::aggregators_json()),
        ["stats", ..] => stats::old_stats(&request, tsd),
        ["logs", ..] => stats::logs(&request),
        [] if ui => ui::index(),
        ["favicon.ico"] if ui => ui::favicon(),
        ["s", rest @ ..] if ui => ui::static_file(rest, &request),
        ["q"] if ui => {
            let reply = blocking(&request, tsd, move |request, tsd| graph::q(request, tsd, &raw_query)).await;
            reply.unwrap_or_else(|| {
                Reply::page_error(StatusCode::INTERNAL_SERVER_ERROR, "Internal error", request.has("json"))
            })
        }
        _ => Reply::page_not_found(request.has("json")),
    };
    match request.param("jsonp") {
        Some(callback) if reply.content_type == JSON && !reply.body.is_empty() => {
            Reply { body: http_json::jsonp(callback, &String::from_utf8_lossy(&reply.body)).into(), ..reply }
        }
        _ => reply,
    }
}

/// `GET /health`: whether this daemon takes writes (200) or refuses them for now (503: a nearly full disk,
/// failing writes; reads are still served), for load balancers and operators.
fn health(tsd: &Tsd) -> Reply {
    let health = tsd.store.health();
    let writable = health.writable();
    let free = health.free_bytes();
    let body = serde_json::json!({
        "status": if writable { "ok" } else { "read-only" },
        "writable": writable,
        "diskFreeBytes": if free == u64::MAX { serde_json::Value::Null } else { free.into() },
    });
    let status = if writable { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    Reply::json(status, body.to_string())
}

/// Runs a handler that does synchronous RocksDB work (writes, scans) on the blocking pool. Hyper drops this
/// future when the client closes its connection mid-request; the guard then cancels the handler's reads.
/// `None` when the handler panicked (logged; the daemon carries on).
async fn blocking(
    request: &Arc<ApiRequest>,
    tsd: &Arc<Tsd>,
    handler: impl FnOnce(&ApiRequest, &Tsd) -> Reply + Send + 'static,
) -> Option<Reply> {
    let _cancel_when_dropped = CancelOnDrop(request.cancelled.clone());
    let (request, tsd) = (request.clone(), tsd.clone());
    match tokio::task::spawn_blocking(move || handler(&request, &tsd)).await {
        Ok(reply) => Some(reply),
        Err(e) => {
            tracing::error!(error = %e, "HTTP handler failed");
            None
        }
    }
}

/// Sets the flag when dropped. A request future dropped before its handler finished means the client is gone;
/// after the handler finished, nobody reads the flag any more.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `/api/...` routes, with OpenTSDB's API version handling (spec: query §0.1).
fn api(segments: &[&str], req: &ApiRequest, tsd: &Tsd) -> Reply {
    if !tsd.config.enable_api {
        return Reply::not_found();
    }
    let mut segments = segments;
    if let Some(first) = segments.first() {
        if let Some(version) = api_version(first) {
            match version.parse::<u32>() {
                Ok(1) => segments = &segments[1..],
                Ok(v) => {
                    return Reply::error(
                        StatusCode::NOT_IMPLEMENTED,
                        "Requested API version is greater than the max implemented",
                        Some(&format!("API version [{v}] is greater than the max [1]")),
                    )
                }
                Err(_) => {
                    return Reply::error(
                        StatusCode::BAD_REQUEST,
                        "Invalid API version format supplied",
                        Some(&format!("API version [{version}] cannot be parsed to an integer")),
                    )
                }
            }
        }
    }
    // 2.4 picks the serializer named by `serializer=` before it looks up the endpoint (HttpQuery.setSerializer);
    // JSON is the only one (spec: query §0.3).
    if let Some(name) = req.param("serializer").filter(|name| *name != "json") {
        return Reply::error(
            StatusCode::BAD_REQUEST,
            "Requested serializer was not found",
            Some(&format!("Could not find a serializer with the name: {name}")),
        );
    }
    let writes = tsd.config.mode.writes();
    match segments.first().copied() {
        Some("put") if writes => put(req, tsd, false),
        Some("rollup") if writes => put(req, tsd, true),
        // 2.4 refuses before looking at the method or body when histograms are off (HistogramDataPointRpc).
        Some("histogram") if writes => Reply::error(StatusCode::SERVICE_UNAVAILABLE, super::HISTOGRAMS_DISABLED, None),
        Some("suggest") if tsd.config.mode.reads() => discovery::suggest(req, tsd),
        Some("query") if tsd.config.mode.reads() => match segments.get(1).copied() {
            Some("last") => query::last(req, tsd),
            Some("exp") => query::exp(req, tsd),
            Some("gexp") => query::gexp(req, tsd),
            _ => query::query(req, tsd),
        },
        // OpenTSDB's AnnotationRpc serves both routes and sends any second segment ending in `bulk` to the bulk
        // handler (spec: query §0.1, §6.9).
        Some("annotation") | Some("annotations") if writes && segments.get(1).is_some_and(|s| s.ends_with("bulk")) => {
            annotation::bulk(req, tsd)
        }
        // One AnnotationRpc serves both: only a GET of the plural lists a range; its other methods create,
        // update and delete one annotation, as on the singular route.
        Some("annotation") if writes => annotation::annotation(req, tsd),
        Some("annotations") if writes && req.method != Method::GET => annotation::annotation(req, tsd),
        Some("uid") if writes => super::uid::handle(&segments[1..], req, tsd),
        Some("annotations") => annotation::global_annotations(req, tsd),
        Some("aggregators") => {
            get_or_post(req, || Reply::json(StatusCode::OK, rtsd_protocol::query::aggregators_json()))
        }
        Some("config") if segments.get(1) == Some(&"filters") => {
            get_or_post(req, || Reply::json(StatusCode::OK, rtsd_protocol::query::config_filters_json()))
        }
        Some("search") if tsd.config.mode.reads() && segments.get(1) == Some(&"lookup") => discovery::lookup(req, tsd),
        Some("search") if tsd.config.mode.reads() => discovery::search_without_plugin(segments.get(1).copied(), req),
        Some("version") => get_or_post(req, || Reply::json(StatusCode::OK, crate::version::json())),
        Some("stats") => stats::api(segments.get(1).copied(), req, tsd),
        // 2.4's ShowConfig answers the whole configuration for any other sub-path.
        Some("config") => get_or_post(req, || Reply::json(StatusCode::OK, config_json(tsd))),
        Some("dropcaches") => {
            // GET or DELETE only; POST is refused despite the docs (spec: query §6.15).
            if req.method == Method::GET || req.method == Method::DELETE {
                tsd.store.drop_caches();
                Reply::json(StatusCode::OK, r#"{"message":"Caches dropped","status":"200"}"#)
            } else {
                Reply::method_not_allowed(&req.method)
            }
        }
        _ => Reply::not_found(),
    }
}

fn get_or_post(req: &ApiRequest, f: impl FnOnce() -> Reply) -> Reply {
    if req.method == Method::GET || req.method == Method::POST {
        f()
    } else {
        Reply::method_not_allowed(&req.method)
    }
}

/// `/api/config`: every effective property, sorted, passwords masked (spec: query §6.11).
fn config_json(tsd: &Tsd) -> String {
    let mut map = serde_json::Map::new();
    for (k, v) in &tsd.config.properties {
        let value = if k.to_ascii_uppercase().contains("PASS") { "********".to_string() } else { v.clone() };
        map.insert(k.clone(), serde_json::Value::String(value));
    }
    serde_json::Value::Object(map).to_string()
}

/// `POST /api/put` (spec: ingest §3), and with `rollup` `POST /api/rollup`, which takes the same bodies with the
/// rollup fields and answers the same way (spec: query §6.13; OpenTSDB's `RollupDataPointRpc` shares
/// `PutDataPointRpc.processDataPoint`).
fn put(req: &ApiRequest, tsd: &Tsd, rollup: bool) -> Reply {
    if req.method != Method::POST {
        return Reply::method_not_allowed(&req.method);
    }
    tsd.metrics.rpc(if rollup { "rollup" } else { "put" });
    // Collectors' bodies take the plain reader, which builds no per-point values; anything else the general one.
    let plain = if rollup { None } else { json_put::parse_plain_put_body(&req.body) };
    let parsed = match plain {
        Some(body) => Ok(PutBody::Plain(body)),
        None if rollup => json_put::parse_rollup_body(&req.body).map(PutBody::General),
        None => json_put::parse_put_body(&req.body).map(PutBody::General),
    };
    let body = match parsed {
        Ok(body) => body,
        Err(e) => {
            let details = e.details();
            return Reply::error(StatusCode::BAD_REQUEST, &e.to_string(), details.as_deref());
        }
    };
    if body.is_empty() {
        return Reply::error(StatusCode::BAD_REQUEST, "No datapoints found in content", None);
    }
    let show_details = req.has("details");
    let show_summary = req.has("summary");
    let sync = req.has("sync");
    // 2.4 reads it with Integer.parseInt (an unparseable one is an internal error: 500 with Java's message) and
    // arms its timer, and reports `timeouts`, only for a positive one (spec: ingest §3.3).
    let timeouts = match req.param("sync_timeout") {
        None => None,
        Some(v) => match v.parse::<i32>() {
            Ok(ms) if ms > 0 => Some(0),
            Ok(_) => None,
            Err(_) => {
                let message = format!("For input string: \"{v}\"");
                return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &message, None);
            }
        },
    };

    let mut tally = Tally {
        tsd,
        show_details,
        errors: Vec::new(),
        accepted: Vec::new(),
        storage: None,
        success: 0,
        failed: 0,
        unstored: 0,
    };
    let mut series = req.series.lock().unwrap_or_else(|e| e.into_inner());
    let mut writer = Writer::new(&tsd.store, &tsd.config.rules, &tsd.metrics, &mut series);
    match body {
        PutBody::Plain(body) => {
            for p in &body.points {
                let tags = body.tags(p).iter().copied();
                if add_known_point(&mut writer, p.metric, tags, p.timestamp, p.value) {
                    tally.success += 1;
                    if show_details {
                        tally.accepted.push(BodyPoint::Point(body.incoming(p)));
                    }
                    continue;
                }
                let body_point = BodyPoint::Point(body.incoming(p));
                let added = add_http_point(&body_point, &mut writer);
                tally.record(added, body_point);
            }
        }
        PutBody::General(points) => {
            for body_point in points {
                let added = if rollup {
                    add_http_rollup_point(&body_point, &mut writer)
                } else {
                    add_http_point(&body_point, &mut writer)
                };
                tally.record(added, body_point);
            }
        }
    }
    // The batch is one atomic write: either every accepted point is stored or none is, and then the client hears
    // a server error and can resend (spec: ingest §3.5 leaves storage failures without `sync` invisible; rtsd
    // writes synchronously, so it can and does tell). A point whose UIDs could not be assigned fails the whole
    // batch the same way: storing the rest would answer a status that tells the client not to resend them.
    let committed = match tally.storage.take() {
        Some(e) => Err(e),
        None => writer.commit(sync),
    };
    if let Err(e) = committed {
        return storage_failure(tally, &e, show_summary, timeouts);
    }
    let Tally { success, failed, errors, .. } = tally;
    if !rollup {
        // Rollup points are no data points (OpenTSDB counts them apart).
        tsd.metrics.point_added(Protocol::Http, success);
    }

    if !show_summary && !show_details {
        if failed > 0 {
            return Reply::error(
                StatusCode::BAD_REQUEST,
                "One or more data points had errors",
                Some("Please see the TSD logs or append \"details\" to the put request"),
            );
        }
        return Reply::json(StatusCode::NO_CONTENT, Bytes::new());
    }
    let status = if failed > 0 { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let details = if show_details { Some(errors.as_slice()) } else { None };
    Reply::json(status, json_put::summary_json(success, failed, timeouts, details))
}

/// A put body as read: by the plain reader (the common shape) or the general one.
enum PutBody<'a> {
    Plain(json_put::PlainBody<'a>),
    General(Vec<BodyPoint<'a>>),
}

impl PutBody<'_> {
    fn is_empty(&self) -> bool {
        match self {
            PutBody::Plain(body) => body.points.is_empty(),
            PutBody::General(points) => points.is_empty(),
        }
    }
}

/// The counts and `details` of one put request.
struct Tally<'t, 'a> {
    tsd: &'t Tsd,
    show_details: bool,
    errors: Vec<PutDetail<'a>>,
    /// With `details`, the points accepted into the batch: each is reported failed if the batch is not stored.
    accepted: Vec<BodyPoint<'a>>,
    /// The storage failure that keeps the batch from being written.
    storage: Option<StoreError>,
    success: u64,
    failed: u64,
    /// Points that failed for want of storage (their UIDs could not be assigned).
    unstored: u64,
}

impl<'a> Tally<'_, 'a> {
    fn record(&mut self, added: Result<(), PointError>, point: BodyPoint<'a>) {
        match added {
            Ok(()) => {
                self.success += 1;
                if self.show_details {
                    self.accepted.push(point);
                }
            }
            Err(PointError::Ingest(IngestError::Storage(e))) => {
                self.unstored += 1;
                if self.show_details {
                    self.accepted.push(point);
                }
                self.storage.get_or_insert(e);
            }
            Err(e) => {
                self.failed += 1;
                let message = match e {
                    PointError::Invalid((category, message)) => {
                        if let Some(category) = category {
                            self.tsd.metrics.put_error(category);
                        }
                        message
                    }
                    // Counted by the writer.
                    PointError::Ingest(e) => e.http_detail(),
                };
                tracing::debug!(error = %message, "put point refused");
                if self.show_details {
                    self.errors.push(PutDetail { point, error: message });
                }
            }
        }
    }
}

/// Why one element of a put body was refused: the stats category it counts under (none for our own failures)
/// and the `details` text.
type PointFailure = (Option<ErrorCategory>, String);

/// Why one element of a put body was not added to the batch: refused while reading it (counted here), or by
/// the write path (counted there; a storage failure fails the whole batch).
enum PointError {
    Invalid(PointFailure),
    Ingest(IngestError),
}

impl From<PointFailure> for PointError {
    fn from(f: PointFailure) -> Self {
        PointError::Invalid(f)
    }
}

/// The reply to a put whose batch could not be stored: nothing of it was written. A transient condition (a
/// nearly full or full disk, no file descriptors) is a 503 with `Retry-After`, anything else a 500: a server
/// error, never the 400 that tells a client not to resend. With `details`, every point is listed: refused ones
/// with their own error, the others with the storage failure.
fn storage_failure(tally: Tally<'_, '_>, e: &StoreError, show_summary: bool, timeouts: Option<u64>) -> Reply {
    let tsd = tally.tsd;
    let points = tally.success + tally.failed + tally.unstored;
    tsd.metrics.put_error(ErrorCategory::HbaseErrors);
    let transient = crate::store::health::FailureKind::of(e).is_transient();
    let status = if transient { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::INTERNAL_SERVER_ERROR };
    let message = format!("Storage exception: {e}");
    let reply = if tally.show_details {
        let mut errors = tally.errors;
        errors.extend(tally.accepted.into_iter().map(|point| PutDetail { point, error: message.clone() }));
        Reply::json(status, json_put::summary_json(0, points, timeouts, Some(&errors)))
    } else if show_summary {
        Reply::json(status, json_put::summary_json(0, points, timeouts, None))
    } else {
        let details =
            if transient { "The points were not stored: send them again later" } else { "The points were not stored" };
        Reply::error(status, &message, Some(details))
    };
    if transient {
        reply.with_header("Retry-After", RETRY_AFTER_SECS.to_string())
    } else {
        reply
    }
}

/// What a 503 asks a client to wait before resending.
const RETRY_AFTER_SECS: u64 = 5;

/// The checks every `/api/put` and `/api/rollup` element goes through first (OpenTSDB's
/// `IncomingDataPoint.validate`, then `extra`, the subclass's own, then the value parse), in OpenTSDB's order
/// (spec: ingest §3.4).
fn http_data_point<'a>(
    body_point: &'a BodyPoint<'_>,
    extra: impl FnOnce(&IncomingPoint<'_>) -> Result<(), String>,
) -> Result<DataPoint<'a>, PointFailure> {
    let illegal = |m: &str| (Some(ErrorCategory::IllegalArguments), m.to_string());
    let p = match body_point {
        BodyPoint::Null => return Err(illegal("Unexpected null datapoint encountered in set.")),
        BodyPoint::Point(p) => p,
    };
    let metric = match p.metric.as_deref() {
        Some(m) if !m.is_empty() => m,
        _ => return Err(illegal("Metric name was empty")),
    };
    if p.timestamp <= 0 {
        return Err(illegal("Invalid timestamp"));
    }
    let value = match p.value.as_deref() {
        Some(v) if !v.is_empty() => v,
        _ => return Err(illegal("Empty value")),
    };
    let pairs = match &p.tags {
        Some(tags) if !tags.is_empty() => tags,
        _ => return Err(illegal("Missing tags")),
    };
    extra(p).map_err(|m| illegal(&m))?;
    let value = point::parse_value(value)
        .map_err(|_| (Some(ErrorCategory::InvalidValues), "Unable to parse value to a number".to_string()))?;
    let mut tags = Tags::new();
    for (k, v) in pairs {
        point::insert_tag(&mut tags, Cow::Borrowed(k.as_ref()), Cow::Borrowed(v.as_ref()))
            .map_err(|e| (Some(e.category()), e.http_detail()))?;
    }
    Ok(DataPoint { metric: Cow::Borrowed(metric), timestamp: p.timestamp, value, tags })
}

/// Adds a point of a series this connection wrote before (same metric and tag strings in the same order),
/// skipping the name lookups and series checks; false when the point needs [`add_http_point`]: its series is
/// new to the connection, or its timestamp or value is not one the shortcut takes. Either way the cache's key is
/// left set to the point's series.
fn add_known_point<'s>(
    writer: &mut Writer<'_>,
    metric: &str,
    tags: impl Iterator<Item = (&'s str, &'s str)>,
    timestamp: i64,
    value: &str,
) -> bool {
    let pairs = tags.flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]);
    let key = std::iter::once(metric.as_bytes()).chain(pairs);
    writer.known(key, || point::known_series_value(timestamp, value).map(|v| (timestamp, v)))
}

/// Validates one `/api/put` element (spec: ingest §3.4) and adds it to the batch.
fn add_http_point(body_point: &BodyPoint<'_>, writer: &mut Writer<'_>) -> Result<(), PointError> {
    // Only a point with a metric and tags can be of a known series.
    let keyed = match body_point {
        BodyPoint::Point(IncomingPoint { metric: Some(metric), tags: Some(tags), timestamp, value, .. }) => {
            let tags = tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref()));
            if add_known_point(writer, metric, tags, *timestamp, value.as_deref().unwrap_or("")) {
                return Ok(());
            }
            true
        }
        _ => false,
    };
    let dp = http_data_point(body_point, |_| Ok(()))?;
    point::check_for_write(&dp, writer.rules()).map_err(|e: PutError| {
        let e = point::null_tag_value_error(e, body_point.null_tags());
        PointError::Invalid((Some(e.category()), e.http_detail()))
    })?;
    writer.put(&dp, keyed, "put").map_err(PointError::Ingest)
}

/// Validates one `/api/rollup` element as OpenTSDB's `RollUpDataPoint.validate` and `addAggregatePoint` do
/// (spec: ingest §1.7, query §6.13) and adds it to the batch.
fn add_http_rollup_point(body_point: &BodyPoint<'_>, writer: &mut Writer<'_>) -> Result<(), PointError> {
    let spec = match body_point {
        BodyPoint::Point(p) => p.rollup.clone().unwrap_or_default(),
        BodyPoint::Null => Default::default(),
    };
    let dp = http_data_point(body_point, |_| {
        let groupby = spec.groupby_aggregator.as_deref().is_some_and(|g| !g.is_empty());
        if !groupby && spec.interval.as_deref().unwrap_or("").is_empty() {
            return Err("Missing interval".to_string());
        }
        if !groupby && spec.aggregator.as_deref().unwrap_or("").is_empty() {
            return Err("Missing aggregator".to_string());
        }
        Ok(())
    })?;
    point::check_finite(&dp).map_err(|e| {
        let e = point::null_tag_value_error(e, body_point.null_tags());
        PointError::Invalid((Some(e.category()), e.http_detail()))
    })?;
    writer.rollup(dp, &spec).map_err(|e| match e {
        // A tag the rollup configuration refuses is named as the element gave it (a JSON null).
        IngestError::Refused(e) => {
            PointError::Ingest(IngestError::Refused(point::null_tag_value_error(e, body_point.null_tags())))
        }
        e => PointError::Ingest(e),
    })
}

/// Bodies being received hold all of `rtsd.http.max_buffered_bytes`: 503, come back later.
fn buffered_too_much() -> Reply {
    Reply::error(
        StatusCode::SERVICE_UNAVAILABLE,
        "Too many request bytes are being received at once",
        Some("Send the request again later (rtsd.http.max_buffered_bytes)"),
    )
    .with_header("Retry-After", RETRY_AFTER_SECS.to_string())
}

/// A body over `rtsd.http.max_body_bytes`: 413, before reading it when its `Content-Length` says so.
fn body_too_large(limit: usize) -> Reply {
    Reply::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("Request body exceeds the limit of {limit} bytes"),
        Some("Raise rtsd.http.max_body_bytes or send smaller batches"),
    )
}

/// Reads the whole body (chunked or not) up to `limit` bytes, holding room for its bytes in `budget` (503 when
/// all connections together buffer too much), within `timeout` (408), and inflates gzip/deflate encodings.
/// Returns the body and the room it holds.
async fn read_body(
    req: Request<Incoming>,
    limit: usize,
    budget: &BodyBudget,
    timeout: std::time::Duration,
) -> Result<(Bytes, super::conn::BodyPermit), Reply> {
    let encoding =
        req.headers().get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_ascii_lowercase());
    let declared =
        req.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(body_too_large(limit));
    }
    let mut held = BodyBudget::empty_permit();
    let mut body = req.into_body();
    let mut raw = bytes::BytesMut::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => {
                return Err(Reply::error(
                    StatusCode::REQUEST_TIMEOUT,
                    "Request body not received in time",
                    Some(&format!(
                        "The body must arrive within rtsd.http.request_timeout_secs ({} s)",
                        timeout.as_secs()
                    )),
                ))
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(Reply::error(
                    StatusCode::BAD_REQUEST,
                    "Unable to read the request body",
                    Some(&e.to_string()),
                ))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        if raw.len() + data.len() > limit {
            return Err(body_too_large(limit));
        }
        if budget.grow(&mut held, data.len()).is_none() {
            return Err(buffered_too_much());
        }
        raw.extend_from_slice(&data);
    }
    let raw = raw.freeze();
    if raw.is_empty() {
        // A GET that advertises gzip but carries nothing (opentsdb-py's /api/version).
        return Ok((raw, held));
    }
    let mut inflated = Vec::new();
    let inflated_result = match encoding.as_deref() {
        Some("gzip") | Some("x-gzip") => {
            flate2::read::MultiGzDecoder::new(&raw[..]).take(limit as u64 + 1).read_to_end(&mut inflated)
        }
        Some("deflate") | Some("x-deflate") => {
            // HTTP's "deflate" is zlib-wrapped; some clients send raw deflate. Try zlib first.
            let zlib = flate2::read::ZlibDecoder::new(&raw[..]).take(limit as u64 + 1).read_to_end(&mut inflated);
            if zlib.is_err() {
                inflated.clear();
                flate2::read::DeflateDecoder::new(&raw[..]).take(limit as u64 + 1).read_to_end(&mut inflated)
            } else {
                zlib
            }
        }
        _ => return Ok((raw, held)),
    };
    match inflated_result {
        Ok(_) if inflated.len() > limit => Err(body_too_large(limit)),
        Ok(_) => {
            // The inflated body is held too (the compressed one is freed with the reply).
            if budget.grow(&mut held, inflated.len()).is_none() {
                return Err(buffered_too_much());
            }
            Ok((Bytes::from(inflated), held))
        }
        Err(e) => {
            Err(Reply::error(StatusCode::BAD_REQUEST, "Unable to decompress the request body", Some(&e.to_string())))
        }
    }
}

/// Decodes a query string as Netty's `QueryStringDecoder` does: `+` is a space, `%xx` escapes.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// `%xx` escapes decoded (a malformed escape is kept as written); `+` is a space in query strings (Netty's
/// `QueryStringDecoder`) but stays `+` in path segments (JAX-RS `@PathParam`, the Chukwa port's HICC routes).
pub fn percent_decode(s: &str, plus_as_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_as_space => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode_like_netty() {
        assert_eq!(
            parse_query("details&summary=false&m=sum:a%7Bhost=x%7D&q=a+b&bad=%zz&end=%4"),
            vec![
                ("details".to_string(), "".to_string()),
                ("summary".to_string(), "false".to_string()),
                ("m".to_string(), "sum:a{host=x}".to_string()),
                ("q".to_string(), "a b".to_string()),
                ("bad".to_string(), "%zz".to_string()),
                ("end".to_string(), "%4".to_string()),
            ]
        );
    }
}
