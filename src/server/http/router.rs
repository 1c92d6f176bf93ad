//! Routing as OpenTSDB does it (spec: query §0.1): `/api/...` by version and endpoint, the old routes, the UI and
//! `/q`; handlers that touch the store run on the blocking pool.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use rtsd_protocol::http_json;

use super::body::read_body;
use super::reply::{Reply, JSON, JSON_V0};
use super::request::{parse_query, ApiRequest};
use super::{annotation, discovery, graph, put, query, stats, ui, uid};
use crate::ingest::SeriesCache;
use crate::server::Tsd;

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

pub(super) async fn route(
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
        return crate::server::chukwa::hicc(&path, &raw_query, tsd.clone()).await;
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
                Reply::new(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", tsd.metrics_text())
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
        // 2.4's version-0 routes send JSON typed `application/json`, without the charset its /api replies carry.
        ["suggest"] if tsd.config.mode.reads() => {
            let reply = discovery::suggest_v0(&request, tsd);
            if reply.content_type == JSON {
                Reply { content_type: JSON_V0, ..reply }
            } else {
                reply
            }
        }
        ["aggregators"] => Reply::new(StatusCode::OK, JSON_V0, rtsd_protocol::query::aggregators_json()),
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
pub(super) async fn blocking(
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
        Some("put") if writes => put::put(req, tsd, false),
        Some("rollup") if writes => put::put(req, tsd, true),
        // 2.4 refuses before looking at the method or body when histograms are off (HistogramDataPointRpc).
        Some("histogram") if writes => {
            Reply::error(StatusCode::SERVICE_UNAVAILABLE, crate::server::HISTOGRAMS_DISABLED, None)
        }
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
        Some("uid") if writes => uid::handle(&segments[1..], req, tsd),
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
