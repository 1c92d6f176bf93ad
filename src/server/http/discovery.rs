//! Discovery endpoints: `/api/suggest` from the in-memory name index and `/api/search/lookup` from the series
//! index (spec: query §6.4, §6.5, §7.2). Neither ever scans data rows.
use std::time::Instant;

use hyper::{Method, StatusCode};
use rtsd_protocol::http_json::{jackson_int, jackson_string, json_string};
use rtsd_protocol::javafmt;
use rtsd_protocol::point::UidKind;

use super::reply::Reply;
use super::request::ApiRequest;
use crate::query::lookup::{Condition, LookupResult};
use crate::server::Tsd;

/// `/api/suggest` and `/suggest`: assigned names by prefix, from the in-memory name index (spec: query §6.4).
pub fn suggest(req: &ApiRequest, tsd: &Tsd) -> Reply {
    suggest_from(req, tsd, true)
}

/// The deprecated `/suggest`: 2.4 reads its query string whatever the method.
pub fn suggest_v0(req: &ApiRequest, tsd: &Tsd) -> Reply {
    suggest_from(req, tsd, false)
}

fn suggest_from(req: &ApiRequest, tsd: &Tsd, api: bool) -> Reply {
    let bad = |m: &str| Reply::error(StatusCode::BAD_REQUEST, m, None);
    // 2.4's SuggestRpc: `max` empty or absent is the default, else Integer.parseInt's (no trimming, 32 bits).
    let parse_max = |m: Option<&str>| -> Result<Option<i64>, Reply> {
        match m.filter(|m| !m.is_empty()) {
            None => Ok(None),
            Some(m) => {
                m.parse::<i32>().map(|n| Some(i64::from(n))).map_err(|_| bad("Unable to parse 'max' as a number"))
            }
        }
    };
    let (kind, q, max) = match req.method {
        Method::POST if api => {
            // 2.4's `parseSuggestV1` reads a map of strings: any scalar is taken as its text.
            let body = match req.json_object() {
                Ok(body) => body,
                Err(reply) => return reply,
            };
            let text = |key: &str| -> Result<Option<String>, Reply> {
                body.get(key).map_or(Ok(None), |v| jackson_string(v).map_err(|e| Reply::unparsable_json(&e)))
            };
            let (kind, q, max) = match (text("type"), text("q"), text("max")) {
                (Ok(kind), Ok(q), Ok(max)) => (kind, q, max),
                (Err(reply), ..) | (_, Err(reply), _) | (.., Err(reply)) => return reply,
            };
            let Some(kind) = kind.filter(|k| !k.is_empty()) else {
                return bad("Missing 'type' parameter");
            };
            let max = match parse_max(max.as_deref()) {
                Ok(max) => max,
                Err(reply) => return reply,
            };
            (kind, q.unwrap_or_default(), max)
        }
        Method::GET | Method::POST => {
            let Some(kind) = req.param("type").filter(|k| !k.is_empty()) else {
                return bad("Missing parameter <code>type</code>");
            };
            let max = match parse_max(req.param("max")) {
                Ok(max) => max,
                Err(reply) => return reply,
            };
            (kind.to_string(), req.param("q").unwrap_or("").to_string(), max)
        }
        _ => return Reply::method_not_allowed(&req.method),
    };
    let kind = match kind.as_str() {
        "metrics" => UidKind::Metric,
        "tagk" => UidKind::TagKey,
        "tagv" => UidKind::TagValue,
        other => return bad(&format!("Invalid 'type' parameter:{other}")),
    };
    let max = match max {
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
        _ => 25,
    };
    match tsd.store.uids().suggest(kind, &q, max) {
        Ok(names) => Reply::json(StatusCode::OK, serde_json::Value::from(names).to_string()),
        Err(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}

/// `/api/search/<type>` other than `lookup`: 2.4 answers these from a search plugin, and without one (rtsd has
/// none) refuses them as SearchRpc does, after its own checks of the method, the type and the query string.
pub fn search_without_plugin(kind: Option<&str>, req: &ApiRequest) -> Reply {
    let bad = |m: &str, details: Option<&str>| Reply::error(StatusCode::BAD_REQUEST, m, details);
    if req.method != Method::GET && req.method != Method::POST {
        return bad(&format!("Unsupported method: {}", req.method), None);
    }
    // (The router has lower-cased the type already, as SearchQuery.parseSearchType compares it.)
    match kind {
        None | Some("") => return bad("Invalid search query type supplied", Some("Type provided was null or empty")),
        Some("tsmeta" | "tsmeta_summary" | "tsuids" | "uidmeta" | "annotation") => {}
        Some(kind) => return bad("Invalid search query type supplied", Some(&format!("Unknown type: {kind}"))),
    }
    if req.body.is_empty() {
        if req.param("query").is_none_or(str::is_empty) {
            return bad("Missing parameter <code>query</code>", None);
        }
        for name in ["limit", "start_index"] {
            if let Err(reply) = search_int_param(req, name) {
                return reply;
            }
        }
    } else if let Err(reply) = req.json_object() {
        return reply;
    }
    bad("Searching is not enabled", Some("Searching has not been enabled on this TSD"))
}

/// A numeric query-string parameter of `/api/search/*` as 2.4's SearchRpc reads it (Integer.parseInt), `None`
/// when absent.
fn search_int_param(req: &ApiRequest, name: &str) -> Result<Option<i32>, Reply> {
    match req.param(name) {
        None => Ok(None),
        Some(v) => v.parse::<i32>().map(Some).map_err(|_| {
            Reply::error(StatusCode::BAD_REQUEST, &format!("Unable to convert '{name}' to a valid number"), None)
        }),
    }
}

/// `/api/search/lookup`: the series of a metric (or of all metrics) whose tags match, from the series index
/// (spec: query §6.5; the engine is [`crate::query::lookup`]). Parses `m=` or the JSON body and renders the
/// answer.
pub fn lookup(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let started = Instant::now();
    let bad = |m: &str| Reply::error(StatusCode::BAD_REQUEST, m, None);
    if req.method != Method::GET && req.method != Method::POST {
        return bad(&format!("Unsupported method: {}", req.method));
    }
    // 2.4's SearchRpc reads the body when there is one, whatever the method, else the query string; a
    // SearchQuery starts with the metric `*` (every metric) and no tags list.
    let (metric, conditions, limit) = if req.body.is_empty() {
        let Some(m) = req.param("m").filter(|m| !m.is_empty()) else {
            return bad("Missing parameter <code>m</code>");
        };
        let limit = match search_int_param(req, "limit") {
            Ok(limit) => limit.map_or(25, i64::from),
            Err(reply) => return reply,
        };
        match parse_lookup_m(m) {
            Ok((metric, conditions)) => (metric, Some(conditions), limit),
            Err(e) => return Reply::error(StatusCode::BAD_REQUEST, "Unable to parse query", Some(&e)),
        }
    } else {
        let body = match req.json_object() {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let metric = match body.get("metric") {
            None => Some("*".to_string()),
            Some(m) => m.as_str().map(str::to_string),
        };
        let star = |v: Option<&serde_json::Value>| match v.and_then(|v| v.as_str()) {
            None | Some("*") | Some("") => None,
            Some(s) => Some(s.to_string()),
        };
        let conditions = body.get("tags").and_then(|t| t.as_array()).map(|pairs| {
            pairs.iter().map(|p| Condition { key: star(p.get("key")), value: star(p.get("value")) }).collect()
        });
        let limit = match body.get("limit").map(jackson_int) {
            None => 25,
            Some(Ok(n)) => i64::from(n),
            Some(Err(e)) => return Reply::unparsable_json(&e),
        };
        (metric, conditions, limit)
    };
    let no_conditions = conditions.as_ref().is_none_or(Vec::is_empty);
    if metric.is_none() && no_conditions {
        return bad("Missing metric and tags. Please supply at least one value.");
    }
    // `*` is every metric (2.4's TimeSeriesLookup does not resolve it), echoed as given.
    let lookup_metric = metric.as_deref().filter(|m| *m != "*");
    let all = conditions.as_deref().unwrap_or_default();
    match crate::query::lookup::lookup(&tsd.store, lookup_metric, all, limit) {
        Ok(results) => {
            Reply::json(StatusCode::OK, lookup_json(metric.as_deref(), conditions.as_deref(), limit, &results, started))
        }
        Err(e) => Reply::lookup_error(&e),
    }
}

/// `m=` as 2.4's `Tags.parseWithMetric(String, List)` reads it: `metric`, `metric{k=v,...}` or `{k=v,...}`;
/// a pair `=v` or `*=v` has any key, `k=` or `k=*` any value. Errors are that method's texts (the details of
/// 2.4's "Unable to parse query").
fn parse_lookup_m(m: &str) -> Result<(Option<String>, Vec<Condition>), String> {
    let Some(curly) = m.find('{') else { return Ok((Some(m.to_string()), Vec::new())) };
    if !m.ends_with('}') {
        return Err(format!("Missing '}}' at the end of: {m}"));
    }
    if curly == m.len() - 2 {
        if curly == 0 {
            return Err(format!("Missing metric and tags: {m}"));
        }
        return Ok((Some(m[..curly].to_string()), Vec::new()));
    }
    let star = |s: &str| if s == "*" || s.is_empty() { None } else { Some(s.to_string()) };
    let mut conditions = Vec::new();
    for tag in m[curly + 1..m.len() - 1].split(',') {
        let pair = if tag.chars().count() < 2 {
            Err("Missing tag pair".to_string())
        } else if let Some(v) = tag.strip_prefix('=') {
            Ok(Condition { key: None, value: star(v) })
        } else if let Some(k) = tag.strip_suffix('=') {
            Ok(Condition { key: star(k), value: None })
        } else {
            match tag.split('=').collect::<Vec<_>>().as_slice() {
                [k, v] if !k.is_empty() && !v.is_empty() => Ok(Condition { key: star(k), value: star(v) }),
                _ => Err(format!("invalid tag: {tag}")),
            }
        };
        conditions.push(pair.map_err(|e| format!("When parsing tag '{tag}': {e}"))?);
    }
    let metric = (curly > 0).then(|| m[..curly].to_string());
    Ok((metric, conditions))
}

/// The answer, keys in 2.4's order; `tags` only when the request had a list (Jackson leaves out null fields).
fn lookup_json(
    metric: Option<&str>,
    conditions: Option<&[Condition]>,
    limit: i64,
    results: &[LookupResult],
    started: Instant,
) -> String {
    let mut out = String::from("{\"type\":\"LOOKUP\"");
    if let Some(m) = metric {
        out.push_str(",\"metric\":");
        out.push_str(&json_string(m));
    }
    if let Some(conditions) = conditions {
        out.push_str(",\"tags\":[");
        for (i, c) in conditions.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let star = |s: &Option<String>| json_string(s.as_deref().unwrap_or("*"));
            out.push_str(&format!("{{\"key\":{},\"value\":{}}}", star(&c.key), star(&c.value)));
        }
        out.push(']');
    }
    // 2.4 keeps the time as a float of whole milliseconds (System.currentTimeMillis differences).
    let elapsed = started.elapsed().as_millis() as f64;
    out.push_str(&format!(
        ",\"limit\":{limit},\"startIndex\":0,\"totalResults\":{},\"time\":{},\"results\":[",
        results.len(),
        javafmt::double_to_string(elapsed)
    ));
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{{\"tsuid\":\"{}\",\"metric\":{},\"tags\":{{", r.tsuid, json_string(&r.metric)));
        // 2.4 resolves a result's tags into `new HashMap<>(tags.size())` (Tags.resolveIdsAsync), in tsuid order.
        let keys: Vec<&str> = r.tags.iter().map(|(k, _)| k.as_str()).collect();
        for (n, i) in javafmt::sized_hashmap_order(&keys).into_iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&format!("{}:{}", json_string(&r.tags[i].0), json_string(&r.tags[i].1)));
        }
        out.push_str("}}");
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_m_grammar() {
        // spec: query §6.5: metric may be omitted, either side of a pair may be `*`
        let c = |k: Option<&str>, v: Option<&str>| Condition { key: k.map(String::from), value: v.map(String::from) };
        assert_eq!(parse_lookup_m("sys.cpu.user").unwrap(), (Some("sys.cpu.user".into()), vec![]));
        assert_eq!(
            parse_lookup_m("sys.cpu.user{host=*,dc=lga}").unwrap(),
            (Some("sys.cpu.user".into()), vec![c(Some("host"), None), c(Some("dc"), Some("lga"))])
        );
        assert_eq!(parse_lookup_m("{*=web01}").unwrap(), (None, vec![c(None, Some("web01"))]));
        assert_eq!(parse_lookup_m("{=web01,dc=}").unwrap(), (None, vec![c(None, Some("web01")), c(Some("dc"), None)]));
        assert_eq!(parse_lookup_m("*").unwrap(), (Some("*".into()), vec![]));
        assert_eq!(parse_lookup_m("m{}").unwrap(), (Some("m".into()), vec![]));
        // 2.4.1's Tags.parseWithMetric texts.
        assert_eq!(parse_lookup_m("m{host=a").unwrap_err(), "Missing '}' at the end of: m{host=a");
        assert_eq!(parse_lookup_m("{}").unwrap_err(), "Missing metric and tags: {}");
        assert_eq!(parse_lookup_m("m{host}").unwrap_err(), "When parsing tag 'host': invalid tag: host");
        assert_eq!(parse_lookup_m("m{a=b=c}").unwrap_err(), "When parsing tag 'a=b=c': invalid tag: a=b=c");
        assert_eq!(parse_lookup_m("m{a=b,,c=d}").unwrap_err(), "When parsing tag '': Missing tag pair");
    }
}
