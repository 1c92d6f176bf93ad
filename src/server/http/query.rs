//! `/api/query`, `/api/query/last`, `/api/aggregators` and `/api/config/filters` (spec: query §1, §2.1, §5.4,
//! §6.1).
use hyper::{Method, StatusCode};
use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;
use rtsd_protocol::query as request;

use super::reply::Reply;
use super::request::ApiRequest;
use crate::query::output::{render_with_summary, DpsFormat};
use crate::query::{exec, QueryError};
use crate::server::Tsd;
use crate::timefmt::now_ms;

fn error(e: impl Into<QueryError>) -> Reply {
    Reply::query_error(&e.into())
}

/// `/api/query` (GET query string, POST JSON body).
pub fn query(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let not_enabled = || {
        Reply::error(
            StatusCode::BAD_REQUEST,
            "Bad request",
            Some("Deleting data is not enabled (tsd.http.query.allow_delete=false)"),
        )
    };
    // A read-only daemon (`tsd.mode=ro`) deletes nothing, whatever the setting says.
    let allow_delete = tsd.config.allow_delete && tsd.config.mode.writes();
    let parsed = match req.method {
        Method::GET => request::parse_get(&req.params, now_ms()),
        Method::POST => request::parse_post(&req.body, now_ms()).map(|mut q| {
            // `arrays` is a query-string flag on POST too (Grafana's tsdbVersion 4).
            q.arrays = req.has("arrays");
            q
        }),
        // The DELETE verb takes its query from the query string, as GET does (2.4 parses a body only for POST).
        // 2.4 refuses the verb when deleting is off, but a GET with `method_override=delete` then runs as a plain
        // query (spec: query §0.1, §1.7).
        Method::DELETE if !allow_delete && req.param("method_override").is_none() => return not_enabled(),
        Method::DELETE => request::parse_get(&req.params, now_ms()).map(|mut q| {
            q.delete = allow_delete;
            q
        }),
        _ => return Reply::method_not_allowed(&req.method),
    };
    let q = match parsed {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    // A POST body's `"delete":true` deletes in 2.4 whatever the setting says (Jackson binds it); rtsd holds it
    // to the setting like the verb, with the verb's error.
    if q.delete && !allow_delete {
        return not_enabled();
    }
    let format = DpsFormat { ms_resolution: q.ms_resolution, arrays: q.arrays };
    let rendered = run_tracked(req, tsd, &q, |groups, stats| {
        Ok(render_with_summary(&groups, format, || q.show_summary.then(|| stats.summary_json())))
    });
    match rendered {
        Ok(body) => Reply::json(StatusCode::OK, body),
        Err(reply) => reply,
    }
}

/// Runs a parsed query, tracked in `/api/stats/query` (and counted when its client went away), and hands the
/// result objects to `then`; a failure of either is the error reply.
fn run_tracked<T>(
    req: &ApiRequest,
    tsd: &Tsd,
    q: &request::TsQuery,
    then: impl FnOnce(Vec<crate::query::output::GroupOutput>, crate::query::stats::QueryStats) -> Result<T, QueryError>,
) -> Result<T, Reply> {
    let running = tsd.queries.start(request::tsquery_json(q), req.remote, &req.headers);
    let answered = exec::execute_cancellable(&tsd.store, q, tsd.config.query_limits, Some(req.cancelled.clone()))
        .and_then(|(groups, stats)| then(groups, stats));
    let connected = !req.cancelled.load(std::sync::atomic::Ordering::Relaxed);
    match answered {
        Ok(answer) => {
            running.finish(StatusCode::OK, None, connected);
            Ok(answer)
        }
        Err(e) => {
            if matches!(e, QueryError::Cancelled) {
                tsd.metrics.queries_cancelled.inc();
            }
            let reply = Reply::query_error(&e);
            running.finish(reply.status, Some(e.to_string()), connected);
            Err(reply)
        }
    }
}

/// Runs a parsed query for an expression endpoint: each sub-query's series, ready for the join.
fn run_for_expressions(
    req: &ApiRequest,
    tsd: &Tsd,
    q: &request::TsQuery,
) -> Result<Vec<crate::query::expr::SubAnswer>, Reply> {
    run_tracked(req, tsd, q, |groups, _| crate::query::expr::load(&tsd.store, q, groups).map_err(QueryError::from))
}

/// `GET /api/query/gexp`: Graphite-style functions over `m=`-style metric queries (spec: query §6.2). The
/// answer is `/api/query`'s array, holding only the expressions' results, in `exp=` order.
///
/// 2.4 only reads expressions from a GET query string; a POST fails there with a null pointer (500). rtsd
/// answers other verbs with 405.
pub fn gexp(req: &ApiRequest, tsd: &Tsd) -> Reply {
    if req.method != Method::GET {
        return Reply::method_not_allowed(&req.method);
    }
    let q = match request::gexp::parse_gexp_get(&req.params, now_ms()) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let answers = match run_for_expressions(req, tsd, &q.ts_query) {
        Ok(a) => a,
        Err(reply) => return reply,
    };
    let metric = |i: usize| answers[q.metric_subs[i]].series.clone();
    let mut groups = Vec::new();
    for call in &q.expressions {
        match crate::query::expr::eval_gexp(call, &q.metric_queries, &metric) {
            Ok(series) => groups.extend(series.iter().map(crate::query::expr::to_group_output)),
            // Evaluation runs in 2.4's query callback, whose error handler makes any exception a 400.
            Err(message) => return error(QueryError::Invalid(message)),
        }
    }
    let format = DpsFormat { ms_resolution: q.ts_query.ms_resolution, arrays: q.ts_query.arrays };
    Reply::json(StatusCode::OK, render_with_summary(&groups, format, || None))
}

/// `/api/query/exp`: a JSON body of metrics, filters, arithmetic expressions over them and outputs (spec:
/// query §6.3). As in 2.4, the body is read whatever the verb; a validation failure is a 500 with OpenTSDB's
/// message, an evaluation failure (cycles, no intersection) a 400, unknown names and storage errors keep
/// `/api/query`'s statuses.
pub fn exp(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let q = match request::exp::parse_exp(&req.body, now_ms()) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let answers = match run_for_expressions(req, tsd, &q.ts_query) {
        Ok(a) => a,
        Err(reply) => return reply,
    };
    match crate::query::expr::run_exp(&q, &answers) {
        Ok(body) => Reply::json(StatusCode::OK, body),
        // Evaluation runs in 2.4's query callback, whose error handler makes any exception a 400.
        Err(message) => error(QueryError::Invalid(message)),
    }
}

/// `/api/query/last`: the newest point of each addressed series, from the series index (spec: query §6.1).
/// Unlike 2.4, `backScan` 0 needs no meta table: the index knows each series' newest hour.
pub fn last(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let parsed = match req.method {
        Method::GET => request::parse_last_get(&req.params),
        Method::POST => request::parse_last_post(&req.body),
        _ => return Reply::method_not_allowed(&req.method),
    };
    let q = match parsed {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    match last_points(tsd, &q) {
        Ok(Ok(body)) => Reply::json(StatusCode::OK, body),
        Ok(Err(message)) => error(QueryError::Invalid(message)),
        // Every store failure here is one (no read budget): not a limit.
        Err(e) => error(QueryError::Storage(e)),
    }
}

fn last_points(tsd: &Tsd, q: &request::LastPointQuery) -> Result<Result<String, String>, crate::store::StoreError> {
    let store = &tsd.store;
    let uids = store.uids();
    let layout = store.layout();
    let mw = layout.uid_widths[0];
    let mut tsuids: Vec<Vec<u8>> = Vec::new();
    for sub in &q.queries {
        if !sub.tsuids.is_empty() {
            for t in &sub.tsuids {
                match codec::string_to_uid(t, None) {
                    Ok(t) => tsuids.push(t),
                    Err(e) => return Ok(Err(format!("Invalid TSUID: {e}"))),
                }
            }
            continue;
        }
        let Some(metric) = &sub.metric else { continue };
        let Some(m) = uids.get(UidKind::Metric, metric)? else {
            return Ok(Err(format!("No such name for 'metrics': '{metric}'")));
        };
        let mut wanted = Vec::new();
        for (k, v) in &sub.tags {
            let Some(ku) = uids.get(UidKind::TagKey, k)? else {
                return Ok(Err(format!("No such name for 'tagk': '{k}'")));
            };
            let Some(vu) = uids.get(UidKind::TagValue, v)? else {
                return Ok(Err(format!("No such name for 'tagv': '{v}'")));
            };
            wanted.push((ku, vu));
        }
        // The tags are matched as a subset of each series' tags (2.4's meta-table behaviour, the useful one).
        store.for_each_series(Some(m.as_bytes()), |tsuid, _| {
            let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(tsuid).collect();
            if wanted.iter().all(|(k, v)| pairs.iter().any(|(pk, pv)| *pk == k.as_bytes() && *pv == v.as_bytes())) {
                tsuids.push(tsuid.to_vec());
            }
            true
        })?;
    }
    let mut out = String::from("[");
    let mut first = true;
    for tsuid in tsuids {
        let Some(hour) = store.last_hour(&tsuid)? else { continue };
        let metric = layout.tsuid_metric(tsuid.as_slice());
        let mut newest = None;
        let hour_ms = hour as i64 * 1000;
        store
            .scan_series(metric, hour_ms, hour_ms + 3_600_000, &mut crate::store::ReadBudget::default(), |tags| {
                let series_tags: Vec<u8> = tags.iter().flat_map(|(k, v)| k.iter().chain(v.iter()).copied()).collect();
                Ok(series_tags == tsuid[mw..])
            })?
            .into_iter()
            .for_each(|s| newest = s.points.into_iter().max_by_key(|p| p.timestamp_ms));
        let Some(p) = newest else { continue };
        if !first {
            out.push(',');
        }
        first = false;
        out.push('{');
        if q.resolve_names {
            let name = |kind, uid: &[u8]| -> Result<String, crate::store::StoreError> {
                Ok(uids.name_of(kind, uid)?.unwrap_or_else(|| codec::uid_to_string(uid)))
            };
            out.push_str(&format!(
                "\"metric\":{},",
                rtsd_protocol::http_json::json_string(&name(UidKind::Metric, metric)?)
            ));
            out.push_str(&format!("\"timestamp\":{},\"value\":{},\"tags\":{{", p.timestamp_ms, last_value(&p.value)));
            for (i, (k, v)) in layout.tsuid_pairs(tsuid.as_slice()).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!(
                    "{}:{}",
                    rtsd_protocol::http_json::json_string(&name(UidKind::TagKey, k)?),
                    rtsd_protocol::http_json::json_string(&name(UidKind::TagValue, v)?)
                ));
            }
            out.push_str("},");
        } else {
            out.push_str(&format!("\"timestamp\":{},\"value\":{},", p.timestamp_ms, last_value(&p.value)));
        }
        out.push_str(&format!("\"tsuid\":\"{}\"}}", codec::uid_to_string(&tsuid)));
    }
    out.push(']');
    Ok(Ok(out))
}

/// A last point's value: always a JSON string, Java's `Long.toString` or `Double.toString`.
fn last_value(v: &codec::Value) -> String {
    let text = match v {
        codec::Value::Int(i) => i.to_string(),
        codec::Value::Float(f) => rtsd_protocol::javafmt::double_to_string(*f as f64),
        codec::Value::Double(d) => rtsd_protocol::javafmt::double_to_string(*d),
    };
    rtsd_protocol::http_json::json_string(&text)
}
