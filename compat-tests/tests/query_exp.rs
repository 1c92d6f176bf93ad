//! `/api/query/exp` and `/api/query/gexp` against the running daemon (spec: query §6.2, §6.3).
//!
//! The exp cases port OpenTSDB 2.4.1's test/tsd/TestQueryExecutor.java: the same data (metrics `A` and `B`,
//! tags `D` and `E`, three points a minute apart from 1431561600) and the same requests, with the whole response
//! body asserted where 2.4's test checks fragments. Error envelopes are compared with the optional `trace` cut
//! out (spec: query §0.4).
use rtsd_compat_tests::{strip_trace, Daemon, Response};

const T0: i64 = 1431561600;

fn put(d: &Daemon, metric: &str, points: &[(i64, i64)], tags: &str) {
    let lines: String = points.iter().map(|(t, v)| format!("put {metric} {t} {v} {tags}\n")).collect();
    d.put_lines(&lines);
}

/// TestQueryExecutor's `oneExtraSameE`: A and B for D=D and D=F, B also for D=G.
fn one_extra_same_e() -> Daemon {
    let d = Daemon::start();
    let (t0, t1, t2) = (T0, T0 + 60, T0 + 120);
    put(&d, "A", &[(t0, 1), (t1, 2), (t2, 3)], "D=D E=E");
    put(&d, "A", &[(t0, 4), (t1, 5), (t2, 6)], "D=F E=E");
    put(&d, "B", &[(t0, 11), (t1, 12), (t2, 13)], "D=D E=E");
    put(&d, "B", &[(t0, 14), (t1, 15), (t2, 16)], "D=F E=E");
    put(&d, "B", &[(t0, 17), (t1, 18), (t2, 19)], "D=G E=E");
    d
}

/// TestQueryExecutor's `threeSameEGaps`: three series per metric with points missing.
fn three_same_e_gaps() -> Daemon {
    let d = Daemon::start();
    let (t0, t1, t2) = (T0, T0 + 60, T0 + 120);
    put(&d, "A", &[(t0, 1), (t2, 3)], "D=D E=E");
    put(&d, "A", &[(t0, 4), (t1, 5)], "D=F E=E");
    put(&d, "A", &[(t1, 8), (t2, 9)], "D=G E=E");
    put(&d, "B", &[(t2, 13)], "D=D E=E");
    put(&d, "B", &[(t1, 15)], "D=F E=E");
    put(&d, "B", &[(t2, 19)], "D=G E=E");
    d
}

const TIME: &str = r#"{"start":"1431561600","aggregator":"sum"}"#;
const FILTERS: &str = r#"[{"id":"f1","tags":[{"type":"wildcard","tagk":"D","filter":"*","groupBy":true}]}]"#;
const METRICS: &str = r#"[{"metric":"A","id":"a","filter":"f1"},{"metric":"B","id":"b","filter":"f1"}]"#;
const E_INTERSECTION: &str = r#"[{"id":"e","expr":"a + b","join":{"operator":"intersection"}}]"#;
const OUTPUT_ALIAS: &str = r#"[{"id":"e","alias":"A plus B"}]"#;

/// The request body of TestQueryExecutor's `getDefaultQueryBuilder()`, with parts replaced.
fn body(time: &str, metrics: &str, expressions: &str, outputs: Option<&str>) -> String {
    let outputs = outputs.map(|o| format!(r#","outputs":{o}"#)).unwrap_or_default();
    format!(
        r#"{{"name":"q1","time":{time},"filters":{FILTERS},"metrics":{metrics},"expressions":{expressions}{outputs}}}"#
    )
}

/// The `query` echo 2.4 appends: the bound request with every property.
const ECHO_TIME: &str =
    r#"{"start":"1431561600","end":null,"timezone":null,"downsampler":null,"aggregator":"sum","rate":false}"#;
const ECHO_FILTERS: &str =
    r#"[{"id":"f1","tags":[{"tagk":"D","filter":"*","group_by":true,"type":"wildcard"}],"explicitTags":false}]"#;

fn echo_metric(metric: &str, id: &str, filter: &str) -> String {
    let filter = if filter.is_empty() { "null".to_string() } else { format!("\"{filter}\"") };
    format!(
        r#"{{"metric":"{metric}","id":"{id}","filter":{filter},"aggregator":null,"timeOffset":null,"fillPolicy":null}}"#
    )
}

fn echo_expression(id: &str, expr: &str, operator: &str) -> String {
    format!(
        r#"{{"id":"{id}","expr":"{expr}","join":{{"operator":"{operator}","useQueryTags":false,"includeAggTags":true}},"fillPolicy":null}}"#
    )
}

fn echo(time: &str, metrics: &[String], expressions: &[String], outputs: &str) -> String {
    format!(
        r#"{{"name":"q1","time":{time},"filters":{ECHO_FILTERS},"metrics":[{}],"expressions":[{}],"outputs":{outputs}}}"#,
        metrics.join(","),
        expressions.join(",")
    )
}

fn default_echo(outputs: &str) -> String {
    echo(
        ECHO_TIME,
        &[echo_metric("A", "a", "f1"), echo_metric("B", "b", "f1")],
        &[echo_expression("e", "a + b", "intersection")],
        outputs,
    )
}

/// `{"index":i,"metrics":[..],"commonTags":{..},"aggregatedTags":[..]}` entries after the timestamp entry.
fn meta(metrics: &str, sets: &[(&str, &str)]) -> String {
    let mut out = String::from(r#""meta":[{"index":0,"metrics":["timestamp"]}"#);
    for (i, (tags, agg)) in sets.iter().enumerate() {
        out.push_str(&format!(
            r#",{{"index":{},"metrics":[{metrics}],"commonTags":{{{tags}}},"aggregatedTags":[{agg}]}}"#,
            i + 1
        ));
    }
    out.push(']');
    out
}

fn output(id_alias: &str, dps: &str, meta_part: &str, first: i64, last: i64, rows: usize, series: usize) -> String {
    let meta_part = if meta_part.is_empty() { String::new() } else { format!(",{meta_part}") };
    format!(
        r#"{{{id_alias},"dps":[{dps}],"dpsMeta":{{"firstTimestamp":{first},"lastTimestamp":{last},"setCount":{rows},"series":{series}}}{meta_part}}}"#
    )
}

const FIRST: i64 = T0 * 1000;
const LAST: i64 = (T0 + 120) * 1000;
const DF: [(&str, &str); 2] = [(r#""D":"D","E":"E""#, ""), (r#""D":"F","E":"E""#, "")];
const DFG: [(&str, &str); 3] = [(r#""D":"D","E":"E""#, ""), (r#""D":"F","E":"E""#, ""), (r#""D":"G","E":"E""#, "")];

fn exp(d: &Daemon, body: &str) -> Response {
    d.post_json("/api/query/exp", body)
}

fn assert_ok(r: &Response, expected: &str) {
    assert_eq!((r.status, r.text()), (200, expected.to_string()));
}

fn assert_error(r: &Response, status: u16, message: &str, details: Option<&str>) {
    let json = |s: &str| serde_json::to_string(s).unwrap();
    let details = details.map(|d| format!(",\"details\":{}", json(d))).unwrap_or_default();
    let expected = format!(r#"{{"error":{{"code":{status},"message":{}{details}}}}}"#, json(message));
    assert_eq!((r.status, strip_trace(&r.text())), (status, expected), "raw {:?}", r.text());
}

fn e_a_plus_b_df() -> String {
    output(
        r#""id":"e","alias":"A plus B""#,
        &format!("[{FIRST},12.0,18.0],[{},14.0,20.0],[{LAST},16.0,22.0]", FIRST + 60_000),
        &meta(r#""A","B""#, &DF),
        FIRST,
        LAST,
        3,
        2,
    )
}

// spec: query §6.3 — TestQueryExecutor.oneExpressionWithOutputAlias: an intersection joins D=D and D=F (B's
// D=G has no partner); values are doubles; `meta` describes each set.
#[test]
fn one_expression_with_output_alias() {
    let d = one_extra_same_e();
    let r = exp(&d, &body(TIME, METRICS, E_INTERSECTION, Some(OUTPUT_ALIAS)));
    assert_ok(
        &r,
        &format!(
            r#"{{"outputs":[{}],"query":{}}}"#,
            e_a_plus_b_df(),
            default_echo(r#"[{"id":"e","alias":"A plus B"}]"#)
        ),
    );
}

// spec: query §6.3 — TestQueryExecutor.oneExpressionDefaultOutput: without outputs every expression is output.
#[test]
fn one_expression_default_output() {
    let d = one_extra_same_e();
    let r = exp(&d, &body(TIME, METRICS, E_INTERSECTION, None));
    let out = e_a_plus_b_df().replace(r#""id":"e","alias":"A plus B""#, r#""id":"e""#);
    assert_ok(&r, &format!(r#"{{"outputs":[{out}],"query":{}}}"#, default_echo("null")));
}

// spec: query §6.3 — TestQueryExecutor.oneExpressionOutputAndBAlso: metrics can be outputs too, one column per
// series of the metric.
#[test]
fn expression_and_metrics_as_outputs() {
    let d = one_extra_same_e();
    let outputs = r#"[{"id":"e","alias":"A plus B"},{"id":"a"},{"id":"b"}]"#;
    let r = exp(&d, &body(TIME, METRICS, E_INTERSECTION, Some(outputs)));
    let a = output(
        r#""id":"a""#,
        &format!("[{FIRST},1.0,4.0],[{},2.0,5.0],[{LAST},3.0,6.0]", FIRST + 60_000),
        &meta(r#""A""#, &DF),
        FIRST,
        LAST,
        3,
        2,
    );
    let b = output(
        r#""id":"b""#,
        &format!("[{FIRST},11.0,14.0,17.0],[{},12.0,15.0,18.0],[{LAST},13.0,16.0,19.0]", FIRST + 60_000),
        &meta(r#""B""#, &DFG),
        FIRST,
        LAST,
        3,
        3,
    );
    let echo_outputs = r#"[{"id":"e","alias":"A plus B"},{"id":"a","alias":null},{"id":"b","alias":null}]"#;
    assert_ok(&r, &format!(r#"{{"outputs":[{},{a},{b}],"query":{}}}"#, e_a_plus_b_df(), default_echo(echo_outputs)));
}

fn gaps_output() -> String {
    output(
        r#""id":"e","alias":"A plus B""#,
        &format!("[{FIRST},1.0,4.0,0.0],[{},0.0,20.0,8.0],[{LAST},16.0,0.0,28.0]", FIRST + 60_000),
        &meta(r#""A","B""#, &DFG),
        FIRST,
        LAST,
        3,
        3,
    )
}

// spec: query §6.3 — TestQueryExecutor.oneExpressionDefaultFill: a missing point reads the metric's default
// fill, zero.
#[test]
fn missing_points_read_zero_by_default() {
    let d = three_same_e_gaps();
    let r = exp(&d, &body(TIME, METRICS, E_INTERSECTION, Some(OUTPUT_ALIAS)));
    assert_ok(
        &r,
        &format!(r#"{{"outputs":[{}],"query":{}}}"#, gaps_output(), default_echo(r#"[{"id":"e","alias":"A plus B"}]"#)),
    );
}

// spec: query §6.3, §3 — TestQueryExecutor.oneExpressionDownsamplingMissingTimestampNoFill: the time's
// downsampler reaches every metric; empty buckets stay missing without a fill policy.
#[test]
fn downsampler_without_fill() {
    let d = three_same_e_gaps();
    let time = r#"{"start":"1431561600","aggregator":"sum","downsampler":{"interval":"1m","aggregator":"sum"}}"#;
    let r = exp(&d, &body(time, METRICS, E_INTERSECTION, Some(OUTPUT_ALIAS)));
    let echo_time = r#"{"start":"1431561600","end":null,"timezone":null,"downsampler":{"interval":"1m","aggregator":"sum","fillPolicy":null},"aggregator":"sum","rate":false}"#;
    let e = echo(
        echo_time,
        &[echo_metric("A", "a", "f1"), echo_metric("B", "b", "f1")],
        &[echo_expression("e", "a + b", "intersection")],
        r#"[{"id":"e","alias":"A plus B"}]"#,
    );
    assert_ok(&r, &format!(r#"{{"outputs":[{}],"query":{e}}}"#, gaps_output()));
}

// spec: query §6.3, §9 item 5 — the downsampler's fill policy, which 2.4 drops (its #898; the upstream test
// oneExpressionDownsamplingMissingTimestampZeroFill is commented out for it), is applied: empty buckets inside
// the query window are zero. (The query has an end here so the window is bounded.)
#[test]
fn downsampler_fill_policy_is_applied() {
    let d = three_same_e_gaps();
    let time = r#"{"start":"1431561540","end":"1431561780","aggregator":"sum","downsampler":{"interval":"1m","aggregator":"sum","fillPolicy":{"policy":"zero"}}}"#;
    let r = exp(&d, &body(time, METRICS, E_INTERSECTION, Some(OUTPUT_ALIAS)));
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        v["outputs"][0]["dps"],
        serde_json::json!([
            [1431561540000i64, 0.0, 0.0, 0.0],
            [1431561600000i64, 1.0, 4.0, 0.0],
            [1431561660000i64, 0.0, 20.0, 8.0],
            [1431561720000i64, 16.0, 0.0, 28.0],
            [1431561780000i64, 0.0, 0.0, 0.0]
        ])
    );
    assert_eq!(v["query"]["time"]["downsampler"]["fillPolicy"], serde_json::json!({"policy":"zero","value":0.0}));
}

// spec: query §6.3 — without expressions (or outputs) every metric is output, one column per series, a missing
// point reading 0, rows only where the metric has points (B's start a minute later).
#[test]
fn metrics_only() {
    let d = three_same_e_gaps();
    let v = exp_json(&d, &format!(r#"{{"time":{TIME},"filters":{FILTERS},"metrics":{METRICS},"expressions":[]}}"#));
    let t1 = FIRST + 60_000;
    assert_eq!(v["outputs"][0]["id"], "a");
    assert_eq!(
        rows(&v["outputs"][0]["dps"]),
        format!("[[{FIRST},1.0,4.0,0.0],[{t1},0.0,5.0,8.0],[{LAST},3.0,0.0,9.0]]")
    );
    assert_eq!(
        v["outputs"][1]["dpsMeta"],
        serde_json::json!({"firstTimestamp":FIRST + 60_000,"lastTimestamp":LAST,"setCount":2,"series":3})
    );
    assert_eq!(
        v["outputs"][1]["meta"][3],
        serde_json::json!({"index":3,"metrics":["B"],"commonTags":{"D":"G","E":"E"},"aggregatedTags":[]})
    );
    assert_eq!(v["outputs"].as_array().unwrap().len(), 2);
}

// spec: query §6.3 — TestQueryExecutor.oneExpressionNoFilter: one group per metric, joined on the common tag E
// and the aggregated tag key D.
#[test]
fn one_expression_no_filter() {
    let d = one_extra_same_e();
    let metrics = r#"[{"metric":"A","id":"a"},{"metric":"B","id":"b"}]"#;
    let r = exp(&d, &body(TIME, metrics, E_INTERSECTION, Some(OUTPUT_ALIAS)));
    let out = output(
        r#""id":"e","alias":"A plus B""#,
        &format!("[{FIRST},47.0],[{},52.0],[{LAST},57.0]", FIRST + 60_000),
        &meta(r#""A","B""#, &[(r#""E":"E""#, r#""D""#)]),
        FIRST,
        LAST,
        3,
        1,
    );
    let e = echo(
        ECHO_TIME,
        &[echo_metric("A", "a", ""), echo_metric("B", "b", "")],
        &[echo_expression("e", "a + b", "intersection")],
        r#"[{"id":"e","alias":"A plus B"}]"#,
    );
    assert_ok(&r, &format!(r#"{{"outputs":[{out}],"query":{e}}}"#));
}

fn rows(dps: &serde_json::Value) -> String {
    dps.to_string()
}

fn exp_json(d: &Daemon, body: &str) -> serde_json::Value {
    let r = exp(d, body);
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

// spec: query §6.3 — TestQueryExecutor.twoExpressionsDefaultOutput.
#[test]
fn two_expressions_default_output() {
    let d = one_extra_same_e();
    let exprs = r#"[{"id":"e","expr":"a + b","join":{"operator":"intersection"}},
        {"id":"e2","expr":"a * b","join":{"operator":"intersection"}}]"#;
    let v = exp_json(&d, &body(TIME, METRICS, exprs, None));
    assert_eq!(v["outputs"][0]["id"], "e");
    assert_eq!(
        rows(&v["outputs"][1]["dps"]),
        format!("[[{FIRST},11.0,56.0],[{},24.0,75.0],[{LAST},39.0,96.0]]", FIRST + 60_000)
    );
    assert_eq!(v["outputs"][1]["id"], "e2");
}

// spec: query §6.3 — TestQueryExecutor.twoExpressionsOneWithoutResultsDefaultOutput: an expression over
// metrics without data in the window has no series and no `meta`.
#[test]
fn expression_without_results() {
    let d = one_extra_same_e();
    put(&d, "D", &[(T0 - 86400, 1)], "D=D E=E");
    put(&d, "F", &[(T0 - 86400, 1)], "D=D E=E");
    let metrics = r#"[{"metric":"A","id":"a","filter":"f1","aggregator":"sum"},{"metric":"B","id":"b","filter":"f1","aggregator":"sum"},
        {"metric":"D","id":"d","filter":"f1","aggregator":"sum"},{"metric":"F","id":"f","filter":"f1","aggregator":"sum"}]"#;
    let exprs = r#"[{"id":"e","expr":"a + b","join":{"operator":"intersection"}},
        {"id":"x","expr":"d + f","join":{"operator":"intersection"}}]"#;
    let r = exp(&d, &body(TIME, metrics, exprs, None));
    let text = r.text();
    assert_eq!(r.status, 200, "{text}");
    assert!(
        text.contains(
            r#"{"id":"x","dps":[],"dpsMeta":{"firstTimestamp":0,"lastTimestamp":0,"setCount":0,"series":0}}"#
        ),
        "{text}"
    );
}

// spec: query §6.3 — TestQueryExecutor.nestedExpressions*: expressions over expressions, in any order of
// declaration.
#[test]
fn nested_expressions() {
    let d = one_extra_same_e();
    for exprs in [
        r#"[{"id":"e","expr":"a + b","join":{"operator":"intersection"}},{"id":"e2","expr":"e * 2","join":{"operator":"intersection"}},
            {"id":"e3","expr":"e * 2","join":{"operator":"intersection"}},{"id":"e4","expr":"e2 + e3","join":{"operator":"intersection"}}]"#,
        r#"[{"id":"e2","expr":"e * 2","join":{"operator":"intersection"}},{"id":"e4","expr":"e2 + e3","join":{"operator":"intersection"}},
            {"id":"e3","expr":"e * 2","join":{"operator":"intersection"}},{"id":"e","expr":"a + b","join":{"operator":"intersection"}}]"#,
    ] {
        let v = exp_json(&d, &body(TIME, METRICS, exprs, None));
        let by_id = |id: &str| v["outputs"].as_array().unwrap().iter().find(|o| o["id"] == id).cloned().unwrap();
        let t1 = FIRST + 60_000;
        assert_eq!(rows(&by_id("e")["dps"]), format!("[[{FIRST},12.0,18.0],[{t1},14.0,20.0],[{LAST},16.0,22.0]]"));
        assert_eq!(rows(&by_id("e2")["dps"]), format!("[[{FIRST},24.0,36.0],[{t1},28.0,40.0],[{LAST},32.0,44.0]]"));
        assert_eq!(rows(&by_id("e4")["dps"]), format!("[[{FIRST},48.0,72.0],[{t1},56.0,80.0],[{LAST},64.0,88.0]]"));
        assert_eq!(by_id("e4")["meta"][2]["metrics"], serde_json::json!(["A", "B"]));
        assert_eq!(by_id("e4")["meta"][2]["commonTags"], serde_json::json!({"D":"F","E":"E"}));
    }
}

// spec: query §6.3 — TestQueryExecutor.emptyResultSet: no data in the window is an empty output, not an error.
#[test]
fn empty_result_set() {
    let d = Daemon::start();
    put(&d, "A", &[(T0 - 86400, 1)], "D=D E=E");
    put(&d, "B", &[(T0 - 86400, 1)], "D=D E=E");
    let r = exp(&d, &body(TIME, METRICS, E_INTERSECTION, Some(OUTPUT_ALIAS)));
    let out = r#"{"id":"e","alias":"A plus B","dps":[],"dpsMeta":{"firstTimestamp":0,"lastTimestamp":0,"setCount":0,"series":0}}"#;
    assert_ok(&r, &format!(r#"{{"outputs":[{out}],"query":{}}}"#, default_echo(r#"[{"id":"e","alias":"A plus B"}]"#)));
}

// spec: query §6.3, §1.4 — TestQueryExecutor.nsunMetric: an unknown metric is /api/query's 400.
#[test]
fn unknown_metric() {
    let d = one_extra_same_e();
    let metrics = r#"[{"metric":"A","id":"a","filter":"f1"},{"metric":"nosuch","id":"b","filter":"f1"}]"#;
    let r = exp(&d, &body(TIME, metrics, E_INTERSECTION, None));
    let m = "No such name for 'metrics': 'nosuch'";
    assert_error(&r, 400, m, Some(m));
}

// spec: query §6.3 — TestQueryExecutor.selfReferencingExpression / circularReferenceExpression /
// noIntersectionsFound*: 400s raised while evaluating.
#[test]
fn evaluation_errors() {
    let d = one_extra_same_e();
    put(&d, "X", &[(T0, 1)], "D=Q E=E");
    let cases = [
        (
            body(
                TIME,
                METRICS,
                r#"[{"id":"e","expr":"a + b"},{"id":"e2","expr":"e * 2"},{"id":"e3","expr":"e * 2"},{"id":"e4","expr":"e2 + e4"}]"#,
                None,
            ),
            "Self referencing expression found: e4".to_string(),
        ),
        (
            body(
                TIME,
                METRICS,
                r#"[{"id":"e","expr":"a + e4"},{"id":"e2","expr":"e * 2"},{"id":"e3","expr":"e * 2"},{"id":"e4","expr":"e2 + e3"}]"#,
                None,
            ),
            "Circular reference found: e4".to_string(),
        ),
        (
            body(
                TIME,
                r#"[{"metric":"A","id":"a","filter":"f1"},{"metric":"X","id":"b","filter":"f1"}]"#,
                E_INTERSECTION,
                None,
            ),
            "No intersections found: IntersectionIterator(id=e, useQueryTags=false, includeAggTags=true, index=0, \
             queries={a=TimeSyncedIterator(id=a, index=0, dpsSize=2), b=TimeSyncedIterator(id=b, index=1, dpsSize=1)})"
                .to_string(),
        ),
    ];
    for (b, message) in cases {
        assert_error(&exp(&d, &b), 400, &message, Some(&message));
    }
}

// spec: query §6.3, §0.4 — validation errors are 500s with 2.4's messages (details: the inner complaint).
#[test]
fn validation_errors() {
    let d = one_extra_same_e();
    let m = r#""metrics":[{"metric":"A","id":"a"}]"#;
    let t = r#""time":{"start":"1431561600","aggregator":"sum"}"#;
    let cases: Vec<(String, &str, Option<&str>)> = vec![
        (String::new(), "Incoming data was null or empty", None),
        (format!("{{{m}}}"), "missing time", None),
        (r#"{"time":{"aggregator":"sum"}}"#.into(), "Invalid time", Some("missing or empty start")),
        (format!("{{{t}}}"), "missing or empty metrics", None),
        (
            format!(r#"{{{t},"metrics":[{{"metric":"A","id":"a"}},{{"metric":"B","id":"a"}}]}}"#),
            "duplicated metric id: a",
            None,
        ),
        (
            format!(r#"{{{t},"metrics":[{{"metric":"A","id":"a-1"}}]}}"#),
            "Unable to parse the given JSON",
            Some("Invalid id (\"a-1\"): illegal character: -"),
        ),
        (
            format!(r#"{{{t},{m},"expressions":[{{"id":"e","expr":"a + c"}}]}}"#),
            "Expression [a + c] was missing input c",
            None,
        ),
        (
            format!(r#"{{{t},{m},"expressions":[{{"id":"e","expr":"a >"}}]}}"#),
            "Invalid expression at index 0",
            Some("Failed to parse expression [a >]: unexpected end of expression"),
        ),
        (format!(r#"{{{t},"metrics":[{{"metric":"A","id":"a","filter":"nope"}}]}}"#), "No filter defined: nope", None),
    ];
    for (b, message, details) in cases {
        assert_error(&exp(&d, &b), 500, message, details);
    }
}

// spec: query §6.3 — fill policies: a metric's scalar fill, NaN written as "NaN", an expression's fill used
// where it feeds another expression, division by zero is 0.
#[test]
fn fill_policies_and_division_by_zero() {
    let d = three_same_e_gaps();
    let metrics = r#"[{"metric":"A","id":"a","filter":"f1","fillPolicy":{"policy":"scalar","value":100}},
        {"metric":"B","id":"b","filter":"f1","fillPolicy":{"policy":"nan"}}]"#;
    let exprs = r#"[{"id":"e","expr":"a + b","fillPolicy":{"policy":"scalar","value":-1}},{"id":"q","expr":"a / (a - a)"},
        {"id":"n","expr":"e * 1"}]"#;
    let v = exp_json(&d, &body(TIME, metrics, exprs, None));
    let t1 = FIRST + 60_000;
    // Union join (no `join`): D, F, G; b's missing points are NaN, which is infectious.
    assert_eq!(
        rows(&v["outputs"][0]["dps"]),
        format!(r#"[[{FIRST},"NaN","NaN","NaN"],[{t1},"NaN",20.0,"NaN"],[{LAST},16.0,"NaN",28.0]]"#)
    );
    assert_eq!(
        rows(&v["outputs"][1]["dps"]),
        format!("[[{FIRST},0.0,0.0,0.0],[{t1},0.0,0.0,0.0],[{LAST},0.0,0.0,0.0]]")
    );
    // e's NaNs read as e's fill, -1, in n.
    assert_eq!(
        rows(&v["outputs"][2]["dps"]),
        format!("[[{FIRST},-1.0,-1.0,-1.0],[{t1},-1.0,20.0,-1.0],[{LAST},16.0,-1.0,28.0]]")
    );
    assert_eq!(v["query"]["metrics"][0]["fillPolicy"], serde_json::json!({"policy":"scalar","value":100.0}));
    assert_eq!(v["query"]["metrics"][1]["fillPolicy"], serde_json::json!({"policy":"nan","value":"NaN"}));
    assert_eq!(
        v["query"]["expressions"][1]["join"],
        serde_json::json!({"operator":"union","useQueryTags":false,"includeAggTags":true})
    );
}

// spec: query §6.3 — a union keeps a set only one side has; the other side reads 0 there, and the set takes its
// tags from the first variable, so they are empty when that variable has no series in it. `metrics` is the first
// set's for every set, as in 2.4.
#[test]
fn union_join() {
    let d = one_extra_same_e();
    let v = exp_json(&d, &body(TIME, METRICS, r#"[{"id":"e","expr":"a + b","join":{"operator":"union"}}]"#, None));
    let t1 = FIRST + 60_000;
    assert_eq!(
        rows(&v["outputs"][0]["dps"]),
        format!("[[{FIRST},12.0,18.0,17.0],[{t1},14.0,20.0,18.0],[{LAST},16.0,22.0,19.0]]")
    );
    assert_eq!(
        v["outputs"][0]["meta"][3],
        serde_json::json!({"index":3,"metrics":["A","B"],"commonTags":{},"aggregatedTags":[]})
    );
}

// spec: query §6.3 — TestExpressionIterator.aLessThanb: comparisons give 1.0 or 0.0; ids may have capitals
// (2.4 looks variables up lower-cased and fails on them).
#[test]
fn comparisons_and_capitalised_ids() {
    let d = one_extra_same_e();
    let metrics = r#"[{"metric":"A","id":"A1","filter":"f1"},{"metric":"B","id":"b","filter":"f1"}]"#;
    let exprs = r#"[{"id":"lt","expr":"A1 < b","join":{"operator":"intersection"}},
        {"id":"Big","expr":"(A1 * 10 > b) && b != 12","join":{"operator":"intersection"}}]"#;
    let v = exp_json(&d, &body(TIME, metrics, exprs, None));
    let t1 = FIRST + 60_000;
    assert_eq!(rows(&v["outputs"][0]["dps"]), format!("[[{FIRST},1.0,1.0],[{t1},1.0,1.0],[{LAST},1.0,1.0]]"));
    assert_eq!(rows(&v["outputs"][1]["dps"]), format!("[[{FIRST},0.0,1.0],[{t1},0.0,1.0],[{LAST},1.0,1.0]]"));
}

// spec: query §6.3 — TestUnionIterator.setAMissingE / setAMissingEQueryTags: A lacks the tag E that B has, so
// on all tags nothing pairs (six sets, the missing side reading 0), while `useQueryTags` joins on the filtered
// key D only (three sets). An intersection on all tags finds nothing.
#[test]
fn join_on_query_tags() {
    let d = Daemon::start();
    let (t0, t1, t2) = (T0, T0 + 60, T0 + 120);
    put(&d, "A", &[(t0, 1), (t1, 2), (t2, 3)], "D=D");
    put(&d, "A", &[(t0, 4), (t1, 5), (t2, 6)], "D=F");
    put(&d, "A", &[(t0, 7), (t1, 8), (t2, 9)], "D=G");
    put(&d, "B", &[(t0, 11), (t1, 12), (t2, 13)], "D=D E=E");
    put(&d, "B", &[(t0, 14), (t1, 15), (t2, 16)], "D=F E=E");
    put(&d, "B", &[(t0, 17), (t1, 18), (t2, 19)], "D=G E=E");
    let t1 = FIRST + 60_000;
    let exprs = r#"[{"id":"e","expr":"a + b","join":{"operator":"union"}}]"#;
    let v = exp_json(&d, &body(TIME, METRICS, exprs, None));
    assert_eq!(
        rows(&v["outputs"][0]["dps"]),
        format!(
            "[[{FIRST},1.0,11.0,4.0,14.0,7.0,17.0],[{t1},2.0,12.0,5.0,15.0,8.0,18.0],[{LAST},3.0,13.0,6.0,16.0,9.0,19.0]]"
        )
    );
    for operator in ["union", "intersection"] {
        let exprs = format!(r#"[{{"id":"e","expr":"a + b","join":{{"operator":"{operator}","useQueryTags":true}}}}]"#);
        let v = exp_json(&d, &body(TIME, METRICS, &exprs, None));
        assert_eq!(
            rows(&v["outputs"][0]["dps"]),
            format!("[[{FIRST},12.0,18.0,24.0],[{t1},14.0,20.0,26.0],[{LAST},16.0,22.0,28.0]]"),
            "{operator}"
        );
        assert_eq!(v["outputs"][0]["meta"][1]["commonTags"], serde_json::json!({"D":"D"}));
    }
    let r = exp(&d, &body(TIME, METRICS, E_INTERSECTION, None));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains(r#""message":"No intersections found: IntersectionIterator(id=e, useQueryTags=false"#));
}

// ------------------------------------------------------------------------------------------------------------
// /api/query/gexp

const T: i64 = 1356998400;

/// `m` for host a: 2, -4, 6 and host b: 10, 20, 30 a minute apart; `n` for host a: 1, 2 (no third point) and
/// host b: 5, 0, 0.
fn gexp_data() -> Daemon {
    let d = Daemon::start();
    put(&d, "m", &[(T, 2), (T + 60, -4), (T + 120, 6)], "host=a");
    put(&d, "m", &[(T, 10), (T + 60, 20), (T + 120, 30)], "host=b");
    put(&d, "n", &[(T, 1), (T + 60, 2)], "host=a");
    put(&d, "n", &[(T, 5), (T + 60, 0), (T + 120, 0)], "host=b");
    d
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn gexp(d: &Daemon, exps: &[&str], extra: &str) -> Response {
    let mut path = format!("/api/query/gexp?start={T}&end={}{extra}", T + 3600);
    for e in exps {
        path.push_str(&format!("&exp={}", encode(e)));
    }
    d.http("GET", &path, &[], b"")
}

/// One `/api/query` result object.
fn group(metric: &str, tags: &str, agg: &str, values: &[&str]) -> String {
    let dps: Vec<String> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(i, v)| format!(r#""{}":{v}"#, T + 60 * i as i64))
        .collect();
    format!(r#"{{"metric":"{metric}","tags":{{{tags}}},"aggregateTags":[{agg}],"dps":{{{}}}}}"#, dps.join(","))
}

fn answer(groups: &[String]) -> String {
    format!("[{}]", groups.join(","))
}

// spec: query §6.2 — scale, absolute, alias (with an @tag template), the per-series functions.
#[test]
fn gexp_per_series_functions() {
    let d = gexp_data();
    let a = r#""host":"a""#;
    let b = r#""host":"b""#;
    assert_ok(
        &gexp(&d, &["scale(sum:m{host=*},2)"], ""),
        &answer(&[group("m", a, "", &["4", "-8", "12"]), group("m", b, "", &["20", "40", "60"])]),
    );
    assert_ok(&gexp(&d, &["scale(sum:m{host=a},0.5)"], ""), &answer(&[group("m", a, "", &["1.0", "-2.0", "3.0"])]));
    assert_ok(&gexp(&d, &["absolute(sum:m{host=a})"], ""), &answer(&[group("m", a, "", &["2", "4", "6"])]));
    assert_ok(
        &gexp(&d, &["alias(sum:m{host=*},cpu.@host)"], ""),
        &answer(&[group("cpu.a", "", "", &["2", "-4", "6"]), group("cpu.b", "", "", &["10", "20", "30"])]),
    );
    assert_ok(
        &gexp(&d, &["movingAverage(sum:m{host=b},2)"], ""),
        &answer(&[group("m", b, "", &["0.0", "15.0", "25.0"])]),
    );
    assert_ok(
        &gexp(&d, &["movingAverage(sum:m{host=b},'2min')"], ""),
        &answer(&[group("m", b, "", &["0.0", "0.0", "25.0"])]),
    );
    assert_ok(&gexp(&d, &["highestMax(sum:m{host=*},1)"], ""), &answer(&[group("m", b, "", &["10", "20", "30"])]));
    assert_ok(
        &gexp(&d, &["highestCurrent(sum:m{host=*},5)"], ""),
        &answer(&[group("m", b, "", &["10", "20", "30"]), group("m", a, "", &["2", "-4", "6"])]),
    );
    assert_ok(
        &gexp(&d, &["timeShift(sum:m{host=a},'1min')"], ""),
        &answer(&[group("m", a, "", &["", "2", "-4", "6"])]),
    );
}

// spec: query §6.2 — the series functions pair series by tags; a missing point reads 0, division by zero is 0.
#[test]
fn gexp_series_functions() {
    let d = gexp_data();
    let a = r#""host":"a""#;
    let b = r#""host":"b""#;
    assert_ok(
        &gexp(&d, &["sumSeries(sum:m{host=*},sum:n{host=*})"], ""),
        &answer(&[group("m", a, "", &["3.0", "-2.0", "6.0"]), group("m", b, "", &["15.0", "20.0", "30.0"])]),
    );
    assert_ok(
        &gexp(&d, &["divideSeries(sum:m{host=*},sum:n{host=*})"], ""),
        &answer(&[group("m", a, "", &["2.0", "-2.0", "0.0"]), group("m", b, "", &["2.0", "0.0", "0.0"])]),
    );
    assert_ok(
        &gexp(&d, &["multiply(sum:m{host=*},sum:n{host=*})"], ""),
        &answer(&[group("m", a, "", &["2.0", "-8.0", "0.0"]), group("m", b, "", &["50.0", "0.0", "0.0"])]),
    );
    assert_ok(
        &gexp(&d, &["diffSeries(sum:m,sum:n)"], ""),
        &answer(&[group("m", "", r#""host""#, &["6.0", "14.0", "36.0"])]),
    );
    // m= alone runs, but only expressions are answered.
    assert_ok(&gexp(&d, &[], "&m=sum:m"), "[]");
    // Nested, and two exp= in one request, answered in order; m= results are not part of the answer.
    assert_ok(
        &gexp(&d, &["scale(sumSeries(sum:m{host=*},sum:n{host=*}),2)", "absolute(sum:m{host=a})"], "&m=sum:n"),
        &answer(&[
            group("m", a, "", &["6.0", "-4.0", "12.0"]),
            group("m", b, "", &["30.0", "40.0", "60.0"]),
            group("m", a, "", &["2", "4", "6"]),
        ]),
    );
}

// spec: query §6.2, §1.6 — the usual output flags: ms and arrays.
#[test]
fn gexp_output_formats() {
    let d = gexp_data();
    let r = gexp(&d, &["scale(sum:m{host=a},2)"], "&ms&arrays");
    assert_ok(
        &r,
        &format!(
            r#"[{{"metric":"m","tags":{{"host":"a"}},"aggregateTags":[],"dps":[[{},4],[{},-8],[{},12]]}}]"#,
            T * 1000,
            (T + 60) * 1000,
            (T + 120) * 1000
        ),
    );
}

// spec: query §6.2, §0.4 — parse errors are 500s, evaluation errors 400s (details = message), the usual query
// errors keep their statuses; POST is refused.
#[test]
fn gexp_errors() {
    let d = gexp_data();
    assert_error(&gexp(&d, &["nope(sum:m)"], ""), 500, "Function nope has not been implemented", None);
    assert_error(&gexp(&d, &["scale(sum:m"], ""), 500, "Failed to parse scale(sum:m", None);
    for (e, m) in [
        ("scale(sum:m,x)", "Unparseable scale factor value: 0.0"),
        ("sumSeries(sum:m)", "Must have 2 to 26 series, got 1 instead"),
        ("scale(2,sum:m{host=a})", "Unknown parameter type: null in tree: scale(m)"),
        ("timeShift(sum:m,1min)", "Invalid timeshift parameter: eg '10min'"),
        ("movingAverage(sum:m,0)", "Moving average window must be an integer greater than zero"),
        ("highestMax(sum:m,x)", "Unparseable top n value: x"),
        ("scale(sum:nosuch,2)", "No such name for 'metrics': 'nosuch'"),
    ] {
        assert_error(&gexp(&d, &[e], ""), 400, m, Some(m));
    }
    let r = d.http("GET", &format!("/api/query/gexp?start={T}"), &[], b"");
    assert_eq!((r.status, r.text().contains("\"message\":\"Missing sub queries\"")), (400, true), "{}", r.text());
    let r = d.http("GET", "/api/query/gexp?exp=absolute(sum:m)", &[], b"");
    assert_error(&r, 400, "Missing parameter <code>start</code>", None);
    let r = d.post_json("/api/query/gexp", r#"{"start":1356998400,"queries":[{"aggregator":"sum","metric":"m"}]}"#);
    assert_error(&r, 405, "Method not allowed", Some("The HTTP method [POST] is not permitted for this endpoint"));
}
