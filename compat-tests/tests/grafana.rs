//! Grafana's OpenTSDB data source, replayed byte for byte (Grafana can't run here): every request of the query
//! spec §7 and clients.md "Grafana", as its three generations build them, and every answer parsed the way Grafana
//! parses it.
//!
//! * G3 – the backend-driven data source (external plugin `grafana/grafana-opentsdb-datasource`, Go backend):
//!   requests as Go's `net/http` writes them (`Host`, `User-Agent`, `Content-Length`, `Content-Type`,
//!   `Accept-Encoding: gzip`), bodies as `encoding/json` marshals them (map keys sorted), query strings as
//!   `url.Values.Encode` builds them (keys sorted, values `QueryEscape`d). Answers decoded into Go's types:
//!   `dps` keys must be base-10 integer seconds, values JSON numbers or null; `"NaN"` fails the whole query.
//! * G2 – the older core Go backend (Grafana 7.x–12.2): the same, with `start`/`end` in milliseconds and all
//!   queries in one POST.
//! * G1 – the browser-side data source (Grafana ≤ 10): bodies as `JSON.stringify` writes them (insertion order),
//!   query strings as Grafana/AngularJS serialise params; results mapped to targets by `query.index` in "==2.3"
//!   mode, dps keys × 1000 unless ms resolution.
use std::collections::BTreeMap;
use std::io::Read;

use rtsd_compat_tests::{gunzip, Daemon, Response};
use serde_json::{json, Value};

const T: i64 = 1356998400;
const GRAFANA_UA: &str = "Grafana/12.3.0";

/// The data set every test queries.
/// * `sys.cpu.user`: web01 (dc=lga) @T=40, @T+10=50, @T+30=70; web02 (dc=lga) @T+10=37, @T+20=48; web03 (dc=phx) @T=5.
/// * `if.bytes` counters: web01 100, 200, 300, 50 (a reset) and web02 1000, 1100, 1300, 1600 at T..T+30 step 10;
///   web03 (dc=lga) 0, 10, 20, 30.
/// * `cpu.idle` (for the "Save & test" suggest of `cpu`) and `events` (annotations).
fn grafana_daemon() -> Daemon {
    let d = Daemon::start();
    let mut lines = String::new();
    for (host, dc, dt, v) in [
        ("web01", "lga", 0, 40),
        ("web01", "lga", 10, 50),
        ("web01", "lga", 30, 70),
        ("web02", "lga", 10, 37),
        ("web02", "lga", 20, 48),
        ("web03", "phx", 0, 5),
    ] {
        lines.push_str(&format!("put sys.cpu.user {} {v} host={host} dc={dc}\n", T + dt));
    }
    for (i, (a, b, c)) in [(100, 1000, 0), (200, 1100, 10), (300, 1300, 20), (50, 1600, 30)].iter().enumerate() {
        let t = T + 10 * i as i64;
        lines.push_str(&format!("put if.bytes {t} {a} host=web01\nput if.bytes {t} {b} host=web02\n"));
        lines.push_str(&format!("put if.bytes {t} {c} host=web03 dc=lga\n"));
    }
    lines.push_str(&format!("put cpu.idle {T} 99 host=web01\nput events {T} 1 host=web01\n"));
    d.put_lines(&lines);
    d
}

// ---------------------------------------------------------------------------------------------------------------
// Requests as Grafana's code writes them

/// A GET as Go's `http.Client` writes it (no body: no Content-Length; the transport adds `Accept-Encoding: gzip`).
fn go_get(d: &Daemon, target: &str) -> Response {
    let head = format!(
        "GET {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {GRAFANA_UA}\r\nAccept-Encoding: gzip\r\n\r\n",
        d.addr()
    );
    raw(d, "GET", head.as_bytes())
}

/// A POST as Go's `http.Client` writes it: Host, User-Agent, Content-Length, the request's headers (sorted), then
/// the transport's `Accept-Encoding: gzip`.
fn go_post(d: &Daemon, target: &str, body: &str) -> Response {
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {GRAFANA_UA}\r\nContent-Length: {}\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n",
        d.addr(),
        body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    raw(d, "POST", &bytes)
}

/// A request of the browser-side data source as it reaches the TSD through Grafana's data source proxy.
fn browser(d: &Daemon, method: &str, target: &str, body: Option<&str>) -> Response {
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36\r\n",
        d.addr()
    );
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\nContent-Type: application/json\r\n", body.len()));
    }
    head.push_str(
        "Accept: application/json, text/plain, */*\r\nAccept-Encoding: gzip, deflate\r\nX-Grafana-Org-Id: 1\r\n\r\n",
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default().as_bytes());
    raw(d, method, &bytes)
}

fn raw(d: &Daemon, method: &str, bytes: &[u8]) -> Response {
    let mut conn = d.http_conn();
    conn.send_raw(bytes);
    conn.read_response(method)
}

/// The body as the client sees it: Go's transport and browsers inflate gzip/deflate transparently.
fn decoded(r: &Response) -> Vec<u8> {
    match r.header("Content-Encoding").map(str::to_ascii_lowercase).as_deref() {
        Some("gzip") => gunzip(&r.body),
        Some("deflate") => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(&r.body[..]).read_to_end(&mut out).expect("inflate");
            out
        }
        None | Some("identity") => r.body.clone(),
        Some(other) => panic!("Content-Encoding {other} that Grafana did not ask for"),
    }
}

fn decoded_json(r: &Response) -> Value {
    let body = decoded(r);
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("status {}: body is not JSON ({e}): {:?}", r.status, String::from_utf8_lossy(&body)))
}

fn decoded_text(r: &Response) -> String {
    String::from_utf8_lossy(&decoded(r)).into_owned()
}

// ---------------------------------------------------------------------------------------------------------------
// Answers parsed as Grafana's Go backend parses them (pkg/opentsdb/types.go, utils.go ParseResponse*)

/// One data frame Grafana builds from a result object.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    metric: String,
    tags: BTreeMap<String, String>,
    aggregate_tags: Vec<String>,
    /// (seconds, value); Go decodes JSON null into float64 0.
    points: Vec<(i64, f64)>,
    /// (description, startTime) of `annotations`.
    annotations: Vec<(String, f64)>,
    global_annotations: Vec<(String, f64)>,
}

fn go_float(v: &Value, what: &str) -> Result<f64, String> {
    match v {
        Value::Null => Ok(0.0),
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{what}: {n} is no float64")),
        other => Err(format!("json: cannot unmarshal {other} into Go value of type float64 ({what})")),
    }
}

fn go_string_map(v: &Value, what: &str) -> Result<BTreeMap<String, String>, String> {
    match v {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!("{what}.{k}: cannot unmarshal {other} into string")),
            })
            .collect(),
        other => Err(format!("{what}: cannot unmarshal {other} into map[string]string")),
    }
}

fn go_annotations(v: &Value, what: &str) -> Result<Vec<(String, f64)>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) => a
            .iter()
            .map(|ann| {
                let description = match &ann["description"] {
                    Value::Null => String::new(),
                    Value::String(s) => s.clone(),
                    other => return Err(format!("{what}.description: cannot unmarshal {other}")),
                };
                Ok((description, go_float(&ann["startTime"], &format!("{what}.startTime"))?))
            })
            .collect(),
        other => Err(format!("{what}: cannot unmarshal {other} into []OpenTsdbAnnotation")),
    }
}

/// `json.Unmarshal` into `[]OpenTsdbResponse` (tsdbVersion 1–3) or `[]OpenTsdbResponse24` (4), then the frames.
fn go_parse(body: &[u8], tsdb_version: u8) -> Result<Vec<Frame>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => return Err(format!("cannot unmarshal {other} into []OpenTsdbResponse")),
    };
    let mut frames = Vec::new();
    for item in &items {
        if !item.is_object() {
            return Err(format!("cannot unmarshal {item} into OpenTsdbResponse"));
        }
        let metric = match &item["metric"] {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => return Err(format!("metric: cannot unmarshal {other} into string")),
        };
        let tags = go_string_map(&item["tags"], "tags")?;
        let mut aggregate_tags: Vec<String> = match &item["aggregateTags"] {
            Value::Null => Vec::new(),
            Value::Array(a) => a
                .iter()
                .map(|t| t.as_str().map(str::to_string).ok_or_else(|| format!("aggregateTags: {t} is no string")))
                .collect::<Result<_, _>>()?,
            other => return Err(format!("aggregateTags: cannot unmarshal {other} into []string")),
        };
        // Grafana only remembers these keys for its query editor; their order is not specified (spec §1.6), so
        // the frames compare them sorted.
        aggregate_tags.sort();
        let mut points = Vec::new();
        if tsdb_version == 4 {
            // DataPoints [][]float64; the frame uses point[0] as seconds and point[1] as the value.
            match &item["dps"] {
                Value::Null => {}
                Value::Array(a) => {
                    for p in a {
                        let p = p.as_array().ok_or_else(|| format!("dps: cannot unmarshal {p} into []float64"))?;
                        let p: Vec<f64> = p.iter().map(|x| go_float(x, "dps")).collect::<Result<_, _>>()?;
                        if p.len() < 2 {
                            return Err(format!("dps point {p:?}: index out of range"));
                        }
                        points.push((p[0] as i64, p[1]));
                    }
                }
                other => return Err(format!("dps: cannot unmarshal {other} into [][]float64")),
            }
        } else {
            // DataPoints map[string]float64; keys sorted as strings, then strconv.ParseInt(key, 10, 64).
            match &item["dps"] {
                Value::Null => {}
                Value::Object(o) => {
                    let mut keys: Vec<&String> = o.keys().collect();
                    keys.sort();
                    for k in keys {
                        let ts: i64 =
                            k.parse().map_err(|_| format!("strconv.ParseInt: parsing {k:?}: invalid syntax"))?;
                        points.push((ts, go_float(&o[k.as_str()], "dps")?));
                    }
                }
                other => return Err(format!("dps: cannot unmarshal {other} into map[string]float64")),
            }
        }
        frames.push(Frame {
            metric,
            tags,
            aggregate_tags,
            points,
            annotations: go_annotations(&item["annotations"], "annotations")?,
            global_annotations: go_annotations(&item["globalAnnotations"], "globalAnnotations")?,
        });
    }
    Ok(frames)
}

/// ParseResponse: a non-2xx status is the error `request failed, status: ...`; otherwise the decoded frames.
fn go_frames(r: &Response, tsdb_version: u8) -> Vec<Frame> {
    assert!((200..300).contains(&r.status), "request failed, status: {} — body {}", r.status, decoded_text(r));
    go_parse(&decoded(r), tsdb_version)
        .unwrap_or_else(|e| panic!("Grafana could not decode the answer: {e}\nbody: {}", decoded_text(r)))
}

fn frame(metric: &str, tags: &[(&str, &str)], aggregate_tags: &[&str], points: &[(i64, f64)]) -> Frame {
    Frame {
        metric: metric.to_string(),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        aggregate_tags: aggregate_tags.iter().map(|s| s.to_string()).collect(),
        points: points.iter().map(|(dt, v)| (T + dt, *v)).collect(),
        annotations: Vec::new(),
        global_annotations: Vec::new(),
    }
}

/// A JSON string array, as `json.Unmarshal(body, &[]string)` wants it.
fn string_array(r: &Response) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", decoded_text(r));
    serde_json::from_slice(&decoded(r)).unwrap_or_else(|e| panic!("not a JSON string array ({e}): {}", decoded_text(r)))
}

/// The lookup answer as G3's HandleKeyLookup / HandleKeyValueLookup decode it: `results[].tags`.
fn lookup_tags(r: &Response) -> Vec<BTreeMap<String, String>> {
    assert_eq!(r.status, 200, "{}", decoded_text(r));
    let v = decoded_json(r);
    let results = v["results"].as_array().unwrap_or_else(|| panic!("no results array: {v}"));
    results.iter().map(|x| go_string_map(&x["tags"], "results[].tags").unwrap()).collect()
}

fn sorted_dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

const AGGREGATORS_SORTED: [&str; 35] = [
    "avg",
    "count",
    "dev",
    "diff",
    "ep50r3",
    "ep50r7",
    "ep75r3",
    "ep75r7",
    "ep90r3",
    "ep90r7",
    "ep95r3",
    "ep95r7",
    "ep999r3",
    "ep999r7",
    "ep99r3",
    "ep99r7",
    "first",
    "last",
    "max",
    "median",
    "mimmax",
    "mimmin",
    "min",
    "mult",
    "none",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "p999",
    "pfsum",
    "squareSum",
    "sum",
    "zimsum",
];

const FILTER_TYPES_SORTED: [&str; 7] =
    ["iliteral_or", "iwildcard", "literal_or", "not_iliteral_or", "not_literal_or", "regexp", "wildcard"];

// ---------------------------------------------------------------------------------------------------------------
// G3: health check, resources

// spec: query §7.2 ("Save & test": G3 CheckHealth `GET /api/suggest?q=cpu&type=metrics`, only the status counts).
#[test]
fn g3_save_and_test() {
    let d = grafana_daemon();
    let r = go_get(&d, "/api/suggest?q=cpu&type=metrics");
    assert_eq!(r.status, 200, "{}", decoded_text(&r));
    assert_eq!(decoded_json(&r), json!(["cpu.idle"]));
}

// spec: query §7.2 (aggregator dropdown: a JSON string array, which Grafana sorts).
#[test]
fn g3_aggregator_dropdown() {
    let d = grafana_daemon();
    let mut names = string_array(&go_get(&d, "/api/aggregators"));
    names.sort();
    assert_eq!(names, AGGREGATORS_SORTED);
}

// spec: query §7.2, §5.4 (filter-type dropdown: the object's keys, sorted).
#[test]
fn g3_filter_type_dropdown() {
    let d = grafana_daemon();
    let r = go_get(&d, "/api/config/filters");
    assert_eq!(r.status, 200, "{}", decoded_text(&r));
    let v = decoded_json(&r);
    let mut keys: Vec<&str> =
        v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().map(|k| k.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, FILTER_TYPES_SORTED);
}

// spec: query §7.2 (metric / tagk / tagv autocomplete: the browser's query string `type,q,max` passed through).
#[test]
fn g3_suggest_autocomplete() {
    let d = grafana_daemon();
    assert_eq!(string_array(&go_get(&d, "/api/suggest?type=metrics&q=sys&max=1000")), ["sys.cpu.user"]);
    assert_eq!(string_array(&go_get(&d, "/api/suggest?type=tagk&q=&max=1000")), ["dc", "host"]);
    assert_eq!(string_array(&go_get(&d, "/api/suggest?type=tagv&q=web&max=1000")), ["web01", "web02", "web03"]);
    assert_eq!(string_array(&go_get(&d, "/api/suggest?type=metrics&q=nosuch&max=1000")), Vec::<String>::new());
}

// spec: query §7.2 (`tag_names(metric)`: G3 HandleKeyLookup sends `limit=1000&m=<metric>`; keys of results[].tags).
#[test]
fn g3_tag_names() {
    let d = grafana_daemon();
    let tags = lookup_tags(&go_get(&d, "/api/search/lookup?limit=1000&m=sys.cpu.user"));
    assert_eq!(tags.len(), 3, "{tags:?}");
    let keys = sorted_dedup(tags.iter().flat_map(|t| t.keys().cloned()).collect());
    assert_eq!(keys, ["dc", "host"]);
}

// spec: query §7.2 (`tag_values(metric, key[, k=v])`: `m=<metric>{<key>=*[,k=v]}`, url.Values.Encode escaping).
#[test]
fn g3_tag_values() {
    let d = grafana_daemon();
    let values = |target: &str| {
        sorted_dedup(lookup_tags(&go_get(&d, target)).iter().filter_map(|t| t.get("host").cloned()).collect())
    };
    assert_eq!(values("/api/search/lookup?limit=1000&m=sys.cpu.user%7Bhost%3D%2A%7D"), ["web01", "web02", "web03"]);
    assert_eq!(values("/api/search/lookup?limit=1000&m=sys.cpu.user%7Bhost%3D%2A%2Cdc%3Dlga%7D"), ["web01", "web02"]);
}

// spec: query §7.2 / clients.md (G3 sends `limit=0` when the data source's jsonData lacks lookupLimit): the answer
// must still be a 200 lookup object Grafana can decode. (The spec does not say what 2.4 returns for limit 0.)
#[test]
fn g3_tag_values_without_lookup_limit() {
    let d = grafana_daemon();
    let tags = lookup_tags(&go_get(&d, "/api/search/lookup?limit=0&m=sys.cpu.user%7Bhost%3D%2A%7D"));
    assert!(tags.iter().all(|t| t.contains_key("host")), "{tags:?}");
}

// ---------------------------------------------------------------------------------------------------------------
// G3: panel queries

// spec: query §7.1 G3 (tsdbVersion 1–3: POST /api/query, seconds, sorted keys, one request per query; dps object).
#[test]
fn g3_panel_query() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","downsample":"10s-avg","metric":"sys.cpu.user","tags":{"host":"*"}}]}"#,
    );
    assert_eq!(
        go_frames(&r, 3),
        [
            frame("sys.cpu.user", &[("dc", "lga"), ("host", "web01")], &[], &[(0, 40.0), (10, 50.0), (30, 70.0)]),
            frame("sys.cpu.user", &[("dc", "lga"), ("host", "web02")], &[], &[(10, 37.0), (20, 48.0)]),
            frame("sys.cpu.user", &[("dc", "phx"), ("host", "web03")], &[], &[(0, 5.0)]),
        ]
    );
}

// spec: query §7.1 G3 (a fractional-second interval is sent in ms, `0.5s` → `500ms`), §3.1.
#[test]
fn g3_panel_query_ms_interval() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","downsample":"500ms-avg","metric":"sys.cpu.user"}]}"#,
    );
    assert_eq!(
        go_frames(&r, 1),
        [frame("sys.cpu.user", &[], &["dc", "host"], &[(0, 45.0), (10, 87.0), (20, 108.0), (30, 70.0)])]
    );
}

// spec: query §7.1 G3 tsdbVersion 4 ("==2.4": `?arrays=true`, filters, explicitTags, rate with
// counter+dropResets, fill policy `zero`); dps decoded as [[seconds, value], ...].
#[test]
fn g3_panel_query_24_arrays() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query?arrays=true",
        r#"{"start":1356998400,"end":1356998430,"queries":[{"aggregator":"sum","downsample":"10s-max-zero","explicitTags":true,"filters":[{"filter":"web01|web02|web03","groupBy":true,"tagk":"host","type":"literal_or"}],"metric":"if.bytes","rate":true,"rateOptions":{"counter":true,"dropResets":true}}]}"#,
    );
    // web03 has a second tag key (explicitTags drops it); web01's reset at T+30 is dropped.
    assert_eq!(
        decoded_text(&r),
        r#"[{"metric":"if.bytes","tags":{"host":"web01"},"aggregateTags":[],"dps":[[1356998410,10.0],[1356998420,10.0]]},{"metric":"if.bytes","tags":{"host":"web02"},"aggregateTags":[],"dps":[[1356998410,10.0],[1356998420,20.0],[1356998430,30.0]]}]"#
    );
    assert_eq!(
        go_frames(&r, 4),
        [
            frame("if.bytes", &[("host", "web01")], &[], &[(10, 10.0), (20, 10.0)]),
            frame("if.bytes", &[("host", "web02")], &[], &[(10, 10.0), (20, 20.0), (30, 30.0)]),
        ]
    );
}

// spec: query §7.4 item 5, §0.6 (fill `null` → JSON null, which Go decodes as 0; works with G3).
#[test]
fn g3_null_fill_decodes() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400,"end":1356998430,"queries":[{"aggregator":"sum","downsample":"10s-avg-null","metric":"sys.cpu.user","tags":{"host":"web02"}}]}"#,
    );
    // The order of the two tags is unspecified (§8 V14), so the body is compared as parsed JSON.
    assert_eq!(
        decoded_json(&r),
        json!([{"metric":"sys.cpu.user","tags":{"host":"web02","dc":"lga"},"aggregateTags":[],
                "dps":{"1356998400":null,"1356998410":37.0,"1356998420":48.0,"1356998430":null}}])
    );
    assert_eq!(
        go_frames(&r, 3),
        [frame(
            "sys.cpu.user",
            &[("dc", "lga"), ("host", "web02")],
            &[],
            &[(0, 0.0), (10, 37.0), (20, 48.0), (30, 0.0)]
        )]
    );
}

// spec: query §7.4 item 5, §0.6, §10 (fill `nan` keeps 2.4's `"NaN"` strings, which G2/G3 fail to decode exactly
// as they do against a real OpenTSDB — grafana#13048).
#[test]
fn g3_nan_fill_fails_as_with_opentsdb() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400,"end":1356998430,"queries":[{"aggregator":"sum","downsample":"10s-avg-nan","metric":"sys.cpu.user","tags":{"host":"web02"}}]}"#,
    );
    assert_eq!(r.status, 200);
    assert!(decoded_text(&r).contains(r#""1356998400":"NaN""#), "{}", decoded_text(&r));
    let err = go_parse(&decoded(&r), 3).expect_err("a \"NaN\" string must not decode into float64");
    assert!(err.contains("cannot unmarshal"), "{err}");
}

// spec: query §7.1 G3 annotations (POST with `{"aggregator":"sum","metric":<target>}`, no downsample; reads
// `annotations[].description/startTime`).
#[test]
fn g3_annotations() {
    let d = grafana_daemon();
    let lookup = d.http("GET", "/api/search/lookup?m=events", &[], b"");
    let tsuid = lookup.json()["results"][0]["tsuid"].as_str().expect("events' tsuid").to_string();
    let r = d
        .post("/api/annotation", &format!(r#"{{"startTime":1356998405,"tsuid":"{tsuid}","description":"deploy v1"}}"#));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"events"}]}"#,
    );
    let mut expected = frame("events", &[("host", "web01")], &[], &[(0, 1.0)]);
    expected.annotations = vec![("deploy v1".to_string(), 1356998405.0)];
    assert_eq!(go_frames(&r, 3), [expected]);
}

// spec: query §7.1, §1.4 (a non-2xx answer is a query error; the message is read from `error.message`).
#[test]
fn g3_error_answer() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","downsample":"1m-avg","metric":"nosuch.metric"}]}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(decoded_json(&r)["error"]["message"], "No such name for 'metrics': 'nosuch.metric'");
}

// ---------------------------------------------------------------------------------------------------------------
// G2: the core Go backend of Grafana 7.x–12.2

// spec: query §7.1 G2 (one POST for all queries, start/end in ms, counterMax/resetValue as float64 numbers,
// dropResets only when neither is set; dps object with second keys decoded into float64).
#[test]
fn g2_alerting_query_in_ms() {
    let d = grafana_daemon();
    let r = go_post(
        &d,
        "/api/query",
        r#"{"start":1356998400000,"end":1356998460000,"queries":[{"aggregator":"sum","downsample":"10s-avg","metric":"if.bytes","rate":true,"rateOptions":{"counter":true,"counterMax":65535,"resetValue":0},"tags":{"host":"web01"}},{"aggregator":"sum","downsample":"1m-avg","metric":"sys.cpu.user"}]}"#,
    );
    let frames = go_frames(&r, 3);
    assert_eq!(frames.len(), 2, "{frames:?}");
    // (65535 − 300 + 50) / 10 s for the wrap at T+30.
    assert_eq!(frames[0], frame("if.bytes", &[("host", "web01")], &[], &[(10, 10.0), (20, 10.0), (30, 6528.5)]));
    let cpu = &frames[1];
    assert_eq!(
        (cpu.metric.as_str(), cpu.tags.is_empty(), &cpu.aggregate_tags[..]),
        ("sys.cpu.user", true, &["dc".to_string(), "host".to_string()][..])
    );
    assert_eq!(cpu.points.len(), 1, "{cpu:?}");
    let (ts, v) = cpu.points[0];
    assert_eq!(ts, T);
    assert!((v - (160.0 / 3.0 + 42.5 + 5.0)).abs() < 1e-9, "{v}");
}

// ---------------------------------------------------------------------------------------------------------------
// G1: the browser-side data source (Grafana ≤ 10)

/// The G1 `performTimeSeriesQuery` body: `{"start":ms,"queries":[...],"msResolution":..,"globalAnnotations":true,
/// ["showQuery":true,] "end":ms}` in JSON.stringify's insertion order.
fn g1_body(queries: &str, ms_resolution: bool, show_query: bool, end: Option<i64>) -> String {
    let mut body = format!(
        r#"{{"start":1356998400000,"queries":[{queries}],"msResolution":{ms_resolution},"globalAnnotations":true"#
    );
    if show_query {
        body.push_str(r#","showQuery":true"#);
    }
    if let Some(end) = end {
        body.push_str(&format!(r#","end":{end}"#));
    }
    body.push('}');
    body
}

/// `transformMetricData`: dps object → [(ms, value)] (keys × 1000 unless tsdbResolution is ms).
fn g1_points(result: &Value, ms_resolution: bool) -> Vec<(i64, Value)> {
    let dps = result["dps"].as_object().unwrap_or_else(|| panic!("G1 needs dps as an object: {result}"));
    dps.iter()
        .map(|(k, v)| {
            let n: i64 = k.parse().unwrap_or_else(|_| panic!("dps key {k:?} is not a number"));
            (if ms_resolution { n } else { n * 1000 }, v.clone())
        })
        .collect()
}

// spec: query §7.1 G1 with tsdbVersion 3 ("==2.3"): `showQuery` → every result carries `query.index`, which
// `mapMetricsToTargets` uses to map results to the panel's targets.
#[test]
fn g1_query_index_maps_results_to_targets() {
    let d = grafana_daemon();
    let queries = r#"{"metric":"sys.cpu.user","aggregator":"sum","downsample":"10s-avg","tags":{"host":"*"}},{"metric":"if.bytes","aggregator":"sum","rate":true,"rateOptions":{"counter":true,"dropResets":true},"downsample":"10s-avg","tags":{}}"#;
    let r = browser(&d, "POST", "/api/query", Some(&g1_body(queries, false, true, Some(1356998460000))));
    assert_eq!(r.status, 200, "{}", decoded_text(&r));
    let v = decoded_json(&r);
    let results = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    let targets = ["sys.cpu.user", "if.bytes"];
    let mut per_target = [0, 0];
    for result in results {
        let index = result["query"]["index"].as_u64().unwrap_or_else(|| panic!("no query.index: {result}")) as usize;
        assert_eq!(result["metric"], targets[index], "query.index {index} points at the wrong target: {result}");
        per_target[index] += 1;
        assert!(!g1_points(result, false).is_empty() || index == 1, "{result}");
    }
    assert_eq!(per_target, [3, 1], "three host groups for target 0, one group for target 1: {v}");
    let web01 = results.iter().find(|x| x["tags"]["host"] == "web01").expect("web01 group");
    assert_eq!(
        g1_points(web01, false),
        [(1356998400000, json!(40.0)), (1356998410000, json!(50.0)), (1356998430000, json!(70.0))]
    );
}

// spec: query §7.1 G1 (relative range: no `end`; tsdbResolution 2: `msResolution:true` → ms keys used as is).
#[test]
fn g1_ms_resolution_without_end() {
    let d = grafana_daemon();
    let queries = r#"{"metric":"sys.cpu.user","aggregator":"avg","downsample":"10s-avg","tags":{"host":"web01"}}"#;
    let r = browser(&d, "POST", "/api/query", Some(&g1_body(queries, true, false, None)));
    assert_eq!(r.status, 200, "{}", decoded_text(&r));
    let v = decoded_json(&r);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        g1_points(&v[0], true),
        [(1356998400000, json!(40.0)), (1356998410000, json!(50.0)), (1356998430000, json!(70.0))]
    );
}

// spec: query §7.1 G1 annotations: `{"aggregator":"sum","metric":<target>}` with `globalAnnotations:true`; a
// global annotation comes back in `globalAnnotations[]` (`description`, `startTime` in seconds).
#[test]
fn g1_global_annotations() {
    let d = grafana_daemon();
    let r = d.post("/api/annotation", r#"{"startTime":1356998407,"description":"global maintenance"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let body = g1_body(r#"{"aggregator":"sum","metric":"events"}"#, false, false, Some(1356998460000));
    let r = browser(&d, "POST", "/api/query", Some(&body));
    assert_eq!(r.status, 200, "{}", decoded_text(&r));
    let v = decoded_json(&r);
    let global = &v[0]["globalAnnotations"];
    assert_eq!(global.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        (&global[0]["description"], &global[0]["startTime"]),
        (&json!("global maintenance"), &json!(1356998407))
    );
}

// spec: query §7.2 G1 (suggest with `max=<lookupLimit>`; lookups with `m` encoded by the browser: AngularJS
// leaves `*` and `,` as they are, Grafana ≥ 7's serializer escapes `*`).
#[test]
fn g1_suggest_and_lookups() {
    let d = grafana_daemon();
    let r = browser(&d, "GET", "/api/suggest?type=metrics&q=cpu&max=1000", None);
    assert_eq!(decoded_json(&r), json!(["cpu.idle"]));
    let r = browser(&d, "GET", "/api/suggest?type=tagv&q=web0&max=1000", None);
    assert_eq!(decoded_json(&r), json!(["web01", "web02", "web03"]));
    let keys = |target: &str| {
        sorted_dedup(lookup_tags(&browser(&d, "GET", target, None)).iter().flat_map(|t| t.keys().cloned()).collect())
    };
    assert_eq!(keys("/api/search/lookup?m=sys.cpu.user&limit=1000"), ["dc", "host"]);
    let hosts = |target: &str| {
        sorted_dedup(
            lookup_tags(&browser(&d, "GET", target, None)).iter().filter_map(|t| t.get("host").cloned()).collect(),
        )
    };
    assert_eq!(hosts("/api/search/lookup?m=sys.cpu.user%7Bhost%3D*%7D&limit=1000"), ["web01", "web02", "web03"]);
    assert_eq!(hosts("/api/search/lookup?m=sys.cpu.user%7Bhost%3D*,dc%3Dlga%7D&limit=1000"), ["web01", "web02"]);
    assert_eq!(hosts("/api/search/lookup?m=sys.cpu.user%7Bhost%3D%2A,dc%3Dphx%7D&limit=1000"), ["web03"]);
}

// spec: query §7.1 G1 (errors: Grafana shows `error.message` from the body).
#[test]
fn g1_error_message() {
    let d = grafana_daemon();
    let body = g1_body(r#"{"metric":"sys.cpu.user","aggregator":"avg","downsample":"1m-foo"}"#, false, false, None);
    let r = browser(&d, "POST", "/api/query", Some(&body));
    assert_eq!(r.status, 400, "{}", decoded_text(&r));
    assert_eq!(decoded_json(&r)["error"]["message"], "No such downsampling function: foo");
}

// The harness finds the daemon binary Cargo built for this test run (see `rtsd_compat_tests::binary`).
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
