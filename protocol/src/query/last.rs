//! `/api/query/last` requests (spec: query §6.1).

use super::javautil::{java_parse_int, java_split};
use super::json::{as_bool, as_int, as_string, JVal};
use super::request::{param_all, param_has, param_last, parse_with_metric, read_body, unable_to_parse};
use super::RequestError;

/// A `/api/query/last` request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LastPointQuery {
    /// `resolve` / `resolveNames`: include `metric` and `tags` in the answer.
    pub resolve_names: bool,
    /// `back_scan` / `backScan`: hours to look back; 0 (or negative) means "use the series index".
    pub back_scan: i32,
    /// The series to look up, never empty.
    pub queries: Vec<LastPointSubQuery>,
}

/// One series selector of a last-point request: TSUIDs, or a metric with its tags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LastPointSubQuery {
    /// The metric name (absent for TSUID selectors).
    pub metric: Option<String>,
    /// Exact tag values, in the order given, keys unique.
    pub tags: Vec<(String, String)>,
    /// Hex TSUIDs; when non-empty they win over `metric`/`tags`.
    pub tsuids: Vec<String>,
}

/// Parses `GET /api/query/last` (spec: query §6.1): repeatable `timeseries=<metric>[{k=v,...}]` and
/// `tsuids=<hex>[,<hex>...]` (time series first, then TSUIDs), `resolve` (presence), `back_scan` (an int).
pub fn parse_last_get(params: &[(String, String)]) -> Result<LastPointQuery, RequestError> {
    let mut q = LastPointQuery { resolve_names: param_has(params, "resolve"), ..Default::default() };
    if param_has(params, "back_scan") {
        q.back_scan = param_last(params, "back_scan")
            .and_then(java_parse_int)
            .ok_or_else(|| RequestError::bad_request("Unable to parse back_scan parameter"))?;
    }
    for ts in param_all(params, "timeseries") {
        let (metric, tags) = parse_with_metric(ts).map_err(RequestError::bad_request)?;
        q.queries.push(LastPointSubQuery { metric: Some(metric), tags, tsuids: Vec::new() });
    }
    for t in param_all(params, "tsuids") {
        let tsuids = java_split(t, ',').into_iter().map(str::to_string).collect();
        q.queries.push(LastPointSubQuery { metric: None, tags: Vec::new(), tsuids });
    }
    if q.queries.is_empty() {
        return Err(RequestError::bad_request("Missing sub queries"));
    }
    Ok(q)
}

/// Parses a `POST /api/query/last` body (spec: query §6.1):
/// `{"queries":[{"metric":"m","tags":{"k":"v"}},{"tsuids":["..."]}],"resolveNames":true,"backScan":24}`.
/// Unknown keys are ignored.
pub fn parse_last_post(body: &[u8]) -> Result<LastPointQuery, RequestError> {
    let root = read_body(body)?;
    let q = last_from_json(&root).map_err(unable_to_parse)?;
    if q.queries.is_empty() {
        return Err(RequestError::bad_request("Missing sub queries"));
    }
    Ok(q)
}

fn last_from_json(root: &JVal) -> Result<LastPointQuery, String> {
    let JVal::Obj(pairs) = root else {
        return Err(format!("Cannot deserialize a last point query out of {} token", root.token_name()));
    };
    let mut q = LastPointQuery::default();
    for (key, v) in pairs {
        match key.as_str() {
            "resolveNames" => q.resolve_names = as_bool(v)?,
            "backScan" => q.back_scan = as_int(v)?,
            "queries" => {
                q.queries = match v {
                    JVal::Null => Vec::new(),
                    JVal::Arr(items) => items.iter().map(last_sub_from_json).collect::<Result<_, _>>()?,
                    other => return Err(format!("Cannot deserialize `queries` out of {} token", other.token_name())),
                }
            }
            _ => {}
        }
    }
    Ok(q)
}

fn last_sub_from_json(v: &JVal) -> Result<LastPointSubQuery, String> {
    let JVal::Obj(pairs) = v else {
        return Err("Cannot deserialize a last point sub query from a value that is not an object".into());
    };
    let mut sub = LastPointSubQuery::default();
    for (key, v) in pairs {
        match key.as_str() {
            "metric" => sub.metric = as_string(v)?,
            "tags" => {
                sub.tags.clear();
                match v {
                    JVal::Null => {}
                    JVal::Obj(tags) => {
                        for (k, tv) in tags {
                            let tv = as_string(tv)?.unwrap_or_default();
                            match sub.tags.iter_mut().find(|(ek, _)| ek == k) {
                                Some(e) => e.1 = tv,
                                None => sub.tags.push((k.clone(), tv)),
                            }
                        }
                    }
                    other => return Err(format!("Cannot deserialize `tags` out of {} token", other.token_name())),
                }
            }
            "tsuids" => {
                sub.tsuids = match v {
                    JVal::Null => Vec::new(),
                    JVal::Arr(items) => {
                        items.iter().map(|i| as_string(i).map(Option::unwrap_or_default)).collect::<Result<_, _>>()?
                    }
                    other => return Err(format!("Cannot deserialize `tsuids` out of {} token", other.token_name())),
                }
            }
            _ => {}
        }
    }
    Ok(sub)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::RequestErrorKind;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    // spec: query §6.1 (GET), vector V16
    #[test]
    fn get_forms() {
        let q = parse_last_get(&params(&[
            ("timeseries", "sys.cpu.user{host=web01}"),
            ("back_scan", "24"),
            ("resolve", ""),
            ("tsuids", "000001000001000001,000001000001000002"),
            ("timeseries", "sys.cpu.nice"),
        ]))
        .unwrap();
        assert!(q.resolve_names);
        assert_eq!(q.back_scan, 24);
        assert_eq!(
            q.queries,
            vec![
                LastPointSubQuery {
                    metric: Some("sys.cpu.user".into()),
                    tags: vec![("host".into(), "web01".into())],
                    tsuids: vec![]
                },
                LastPointSubQuery { metric: Some("sys.cpu.nice".into()), tags: vec![], tsuids: vec![] },
                LastPointSubQuery {
                    metric: None,
                    tags: vec![],
                    tsuids: vec!["000001000001000001".into(), "000001000001000002".into()]
                },
            ]
        );
        let q = parse_last_get(&params(&[("timeseries", "m{}"), ("back_scan", "+3")])).unwrap();
        assert_eq!((q.queries[0].metric.as_deref(), q.back_scan, q.resolve_names), (Some("m"), 3, false));
    }

    // spec: query §6.1 (GET errors)
    #[test]
    fn get_errors() {
        let err = |p: &[(&str, &str)]| parse_last_get(&params(p)).unwrap_err();
        assert_eq!(err(&[]).message, "Missing sub queries");
        assert_eq!(err(&[("resolve", "")]).message, "Missing sub queries");
        for bad in ["x", "", "1.5", "99999999999"] {
            assert_eq!(err(&[("timeseries", "m"), ("back_scan", bad)]).message, "Unable to parse back_scan parameter");
        }
        assert_eq!(err(&[("timeseries", "m{host=a")]).message, "Missing '}' at the end of: m{host=a");
        assert_eq!(err(&[("timeseries", "m{host}")]).message, "When parsing tag 'host': invalid tag: host");
        assert_eq!(
            err(&[("timeseries", "m{host=a,host=b}")]).message,
            "When parsing tag 'host=b': duplicate tag: host=b, tags={host=a}"
        );
        let same = parse_last_get(&params(&[("timeseries", "m{host=a,host=a}")])).unwrap();
        assert_eq!(same.queries[0].tags, vec![("host".to_string(), "a".to_string())]);
        assert_eq!(err(&[("timeseries", "m{x}")]).kind, RequestErrorKind::BadRequest);
    }

    // spec: query §6.1 (POST)
    #[test]
    fn post_forms() {
        let q = parse_last_post(
            br#"{"queries":[{"metric":"sys.cpu.0","tags":{"host":"web01","dc":"lga"}},{"tsuids":["000001000002000042"]}],"resolveNames":true,"backScan":24}"#,
        )
        .unwrap();
        assert!(q.resolve_names);
        assert_eq!(q.back_scan, 24);
        assert_eq!(q.queries[0].metric.as_deref(), Some("sys.cpu.0"));
        assert_eq!(
            q.queries[0].tags,
            vec![("host".to_string(), "web01".to_string()), ("dc".to_string(), "lga".to_string())]
        );
        assert_eq!(q.queries[1].tsuids, vec!["000001000002000042".to_string()]);
        let q = parse_last_post(br#"{"queries":[{"metric":"m"}],"backScan":"6","resolveNames":"true","x":1}"#).unwrap();
        assert_eq!((q.back_scan, q.resolve_names), (6, true));
    }

    // spec: query §6.1 (POST errors), §0.3
    #[test]
    fn post_errors() {
        let err = |b: &[u8]| parse_last_post(b).unwrap_err();
        assert_eq!(err(b"").message, "Missing message content");
        assert_eq!(err(b"{}").message, "Missing sub queries");
        assert_eq!(err(br#"{"queries":[]}"#).message, "Missing sub queries");
        assert_eq!(err(b"{").message, "Unable to parse the given JSON");
        assert_eq!(err(br#"{"queries":[{"metric":"m"}],"backScan":"x"}"#).message, "Unable to parse the given JSON");
        assert_eq!(err(b"[]").message, "Unable to parse the given JSON");
    }
}
