//! `/api/query/exp`: arithmetic expressions over joined metrics, and the response body (spec: query §6.3).

use super::*;

/// A value as Jackson writes it: integers plain (unless `as_double`), doubles the Java way, NaN and the
/// infinities as quoted strings (`QUOTE_NON_NUMERIC_NUMBERS`), `null` for fill policy null (NaN if `as_double`).
fn json_value(v: OutValue, as_double: bool) -> String {
    match v {
        OutValue::Int(i) if as_double => javafmt::double_to_string(i as f64),
        OutValue::Null if as_double => "\"NaN\"".to_string(),
        other => crate::query::series::format_value(&other),
    }
}

/// An `/api/query/exp` evaluation failure: 2.4's message (a 400 there, raised in its query callback).
pub type ExpError = String;

/// Evaluates an `/api/query/exp` request over its sub-queries' answers (one per metric, in order) and renders
/// the response body (spec: query §6.3).
pub fn run_exp(q: &rtsd_protocol::query::exp::ExpQuery, answers: &[SubAnswer]) -> Result<String, ExpError> {
    use rtsd_protocol::query::exp::{Join, NumericFill};
    let body = &q.body;
    let metrics = body.metrics.as_deref().unwrap_or_default();
    let expressions = body.expressions.as_deref().unwrap_or_default();
    let metric_index = |id: &str| metrics.iter().position(|m| m.id.as_deref() == Some(id));
    let expr_index = |id: &str| expressions.iter().position(|e| e.id.as_deref() == Some(id));
    check_graph(q)?;
    // Every expression is evaluated, in dependency order (2.4 compiles them all, outputs or not).
    let mut results: Vec<Option<Vec<Series>>> = vec![None; expressions.len()];
    let mut pending: Vec<usize> = (0..expressions.len()).collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut i = 0;
        while i < pending.len() {
            let e = pending[i];
            let vars = q.parsed[e].variables();
            let ready = vars.iter().all(|v| expr_index(v).is_none_or(|x| results[x].is_some()));
            if !ready {
                i += 1;
                continue;
            }
            let spec = expressions[e].join.unwrap_or(Join::DEFAULT);
            let operands: Vec<Operand> = vars
                .iter()
                .map(|v| match (metric_index(v), expr_index(v)) {
                    (Some(m), _) => Operand {
                        name: v,
                        series: &answers[m].series,
                        fill: metrics[m].fill_policy.unwrap_or(NumericFill::ZERO).value,
                        query_tagks: Some(&answers[m].query_tagks),
                    },
                    (None, Some(x)) => Operand {
                        name: v,
                        series: results[x].as_deref().unwrap_or_default(),
                        fill: expressions[x].fill_policy.unwrap_or(NumericFill::NAN).value,
                        query_tagks: None,
                    },
                    (None, None) => unreachable!("validated: every variable is a metric or an expression"),
                })
                .collect();
            let join_spec = JoinSpec {
                operator: spec.operator.unwrap_or(SetOperator::Union),
                use_query_tags: spec.use_query_tags,
                include_agg_tags: spec.include_agg_tags,
            };
            let sets = join(expressions[e].id.as_deref().unwrap_or_default(), &operands, &join_spec)?;
            let out = combine(&operands, &sets, Timestamps::Shared, |v| eval(&q.parsed[e], &vars, v));
            results[e] = Some(out);
            pending.remove(i);
        }
        if pending.len() == before {
            return Err(format!("Circular reference found: {}", expressions[pending[0]].id.as_deref().unwrap_or("")));
        }
    }

    let (start, end) = (q.ts_query.start_ms, q.ts_query.end_ms);
    let outputs: Vec<(String, Option<String>)> = match body.outputs.as_deref() {
        Some(o) if !o.is_empty() => o.iter().map(|o| (o.id.clone().unwrap_or_default(), o.alias.clone())).collect(),
        _ if !expressions.is_empty() => expressions.iter().map(|e| (e.id.clone().unwrap_or_default(), None)).collect(),
        _ => metrics.iter().map(|m| (m.id.clone().unwrap_or_default(), None)).collect(),
    };
    let mut json = String::from("{\"outputs\":[");
    let mut first = true;
    for (id, alias) in &outputs {
        let (series, is_expression) = if let Some(x) = expr_index(id) {
            (results[x].as_deref().unwrap_or_default(), true)
        } else if let Some(m) = metric_index(id) {
            (&answers[m].series[..], false)
        } else {
            // 2.4 skips an output that names nothing.
            continue;
        };
        if !first {
            json.push(',');
        }
        first = false;
        render_output(&mut json, id, alias.as_deref(), series, is_expression, (start, end));
    }
    json.push_str("],\"query\":");
    json.push_str(&body.to_json());
    json.push('}');
    Ok(json)
}

/// 2.4's dependency checks between expressions: a self reference, then cycles, found in the order its
/// `HashMap`s iterate.
fn check_graph(q: &rtsd_protocol::query::exp::ExpQuery) -> Result<(), ExpError> {
    let expressions = q.body.expressions.as_deref().unwrap_or_default();
    let ids: Vec<&str> = expressions.iter().map(|e| e.id.as_deref().unwrap_or("")).collect();
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let reaches = |edges: &[(usize, usize)], from: usize, to: usize| {
        let mut stack = vec![from];
        let mut seen = vec![false; ids.len()];
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if !std::mem::replace(&mut seen[n], true) {
                stack.extend(edges.iter().filter(|e| e.0 == n).map(|e| e.1));
            }
        }
        false
    };
    for e in javafmt::hashmap_order(&ids) {
        let vars = q.parsed[e].variables();
        let names: Vec<&str> = vars.iter().map(String::as_str).collect();
        for v in javafmt::hashmap_order(&names) {
            let Some(target) = ids.iter().position(|id| *id == names[v]) else { continue };
            if target == e {
                return Err(format!("Self referencing expression found: {}", ids[e]));
            }
            if reaches(&edges, target, e) {
                return Err(format!("Circular reference found: {}", ids[e]));
            }
            edges.push((e, target));
        }
    }
    Ok(())
}

/// One element of `outputs` (2.4's `SerializeExpressionIterator` / `SerializeSubIterator`): rows of
/// `[timestamp, value per series...]`, `dpsMeta`, and `meta` when there is a series.
fn render_output(
    json: &mut String,
    id: &str,
    alias: Option<&str>,
    series: &[Series],
    is_expression: bool,
    (start, end): (i64, i64),
) {
    use rtsd_protocol::http_json::json_string;
    json.push_str("{\"id\":");
    json.push_str(&json_string(id));
    if let Some(a) = alias {
        json.push_str(",\"alias\":");
        json.push_str(&json_string(a));
    }
    // An expression's series share their timestamps; a metric's are joined here, missing points reading 0.
    let mut times: Vec<i64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    times.sort_unstable();
    times.dedup();
    if is_expression {
        times.retain(|t| (start..=end).contains(t));
    }
    json.push_str(",\"dps\":[");
    for (r, &ts) in times.iter().enumerate() {
        if r > 0 {
            json.push(',');
        }
        json.push('[');
        json.push_str(&ts.to_string());
        for s in series {
            json.push(',');
            let v = match s.points.binary_search_by_key(&ts, |p| p.0) {
                Ok(i) => s.points[i].1,
                Err(_) => OutValue::Double(0.0),
            };
            json.push_str(&json_value(v, true));
        }
        json.push(']');
    }
    // 2.4's bookkeeping: an expression's last timestamp is only recorded from its second row on; a metric's first
    // timestamp is Long.MAX_VALUE when it has no series.
    let (first_ts, last_ts) = if is_expression {
        (times.first().copied().unwrap_or(0), if times.len() > 1 { times[times.len() - 1] } else { 0 })
    } else {
        (
            times.first().copied().unwrap_or(if series.is_empty() { i64::MAX } else { 0 }),
            times.last().copied().unwrap_or(0),
        )
    };
    json.push_str(&format!(
        "],\"dpsMeta\":{{\"firstTimestamp\":{first_ts},\"lastTimestamp\":{last_ts},\"setCount\":{},\"series\":{}}}",
        times.len(),
        series.len()
    ));
    if let Some(head) = series.first() {
        let mut names: Vec<&str> = head.metrics.iter().map(|m| m.1.as_str()).collect();
        names.sort_unstable();
        json.push_str(",\"meta\":[{\"index\":0,\"metrics\":[\"timestamp\"]}");
        for (i, s) in series.iter().enumerate() {
            json.push_str(&format!(",{{\"index\":{},\"metrics\":[", i + 1));
            json.push_str(&names.iter().map(|n| json_string(n)).collect::<Vec<_>>().join(","));
            json.push_str("],\"commonTags\":{");
            let keys: Vec<&str> = s.tags.iter().map(|t| t.key.as_str()).collect();
            let tags: Vec<String> = javafmt::hashmap_order(&keys)
                .into_iter()
                .map(|k| format!("{}:{}", json_string(&s.tags[k].key), json_string(&s.tags[k].value)))
                .collect();
            json.push_str(&tags.join(","));
            json.push_str("},\"aggregatedTags\":[");
            json.push_str(&s.aggregate_tags.iter().map(|t| json_string(&t.1)).collect::<Vec<_>>().join(","));
            json.push_str("]}");
        }
        json.push(']');
    }
    json.push('}');
}
