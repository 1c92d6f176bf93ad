//! `/api/query`, `/api/query/last`, `/api/aggregators` and `/api/config/filters` (spec: query §1, §2.1, §5.4,
//! §6.1).
use hyper::{Method, StatusCode};
use rtsd_protocol::codec;
use rtsd_protocol::http_json::json_string;
use rtsd_protocol::query as request;

use super::reply::Reply;
use super::request::ApiRequest;
use crate::query::last::LastPoint;
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
    match crate::query::last::last_points(&tsd.store, &q) {
        Ok(points) => Reply::json(StatusCode::OK, last_json(&points)),
        Err(e) => error(e),
    }
}

/// The answer: per point `metric`, `timestamp`, `value`, `tags` (with resolved names) or `timestamp`, `value`,
/// then `tsuid`.
fn last_json(points: &[LastPoint]) -> String {
    let mut out = String::from("[");
    for (i, p) in points.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('{');
        let value = last_value(&p.value);
        match &p.names {
            Some((metric, tags)) => {
                out.push_str(&format!("\"metric\":{},", json_string(metric)));
                out.push_str(&format!("\"timestamp\":{},\"value\":{},\"tags\":{{", p.timestamp_ms, value));
                for (i, (k, v)) in tags.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&format!("{}:{}", json_string(k), json_string(v)));
                }
                out.push_str("},");
            }
            None => out.push_str(&format!("\"timestamp\":{},\"value\":{},", p.timestamp_ms, value)),
        }
        out.push_str(&format!("\"tsuid\":\"{}\"}}", p.tsuid));
    }
    out.push(']');
    out
}

/// A last point's value: always a JSON string, Java's `Long.toString` or `Double.toString`.
fn last_value(v: &codec::Value) -> String {
    let text = match v {
        codec::Value::Int(i) => i.to_string(),
        codec::Value::Float(f) => rtsd_protocol::javafmt::double_to_string(*f as f64),
        codec::Value::Double(d) => rtsd_protocol::javafmt::double_to_string(*d),
    };
    json_string(&text)
}
