//! Real OpenTSDB client libraries reading from the real daemon: pyopentsdb 0.2.1 (PyPI, in the venv made by
//! `scripts/install-test-deps`) and the npm `opentsdb` 0.5.7 client (installed by the same script with `npm ci`
//! under `compat-tests/clients/node`).
//!
//! Each test writes a small data set with telnet puts, puts a recording [`Proxy`] in front of the daemon, runs the
//! client's driver script (which prints what every call returned), and asserts both the answers the client got
//! and the requests it sent (the clients.md captures: trailing slashes, no Content-Type, `start` as a string,
//! presence flags with `=false`, percent-encoded braces, ...). A missing client fails the test with instructions.
use std::time::Duration;

use rtsd_compat_tests::{run_node_client, run_python_client, Daemon, Proxy, RecordedRequest};
use serde_json::{json, Value};

const T: i64 = 1356998400;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// D1 of the query spec (§8) on `sys.cpu.user`, then the counter `if.bytes{host=web01}` = 45, 75, 5 at T+30..T+90.
fn daemon_with_data() -> Daemon {
    let d = Daemon::start();
    let mut lines = String::new();
    for (host, dt, v) in [("web01", 0, 40), ("web01", 10, 50), ("web01", 30, 70), ("web02", 10, 37), ("web02", 20, 48)]
    {
        lines.push_str(&format!("put sys.cpu.user {} {v} host={host}\n", T + dt));
    }
    for (dt, v) in [(30, 45), (60, 75), (90, 5)] {
        lines.push_str(&format!("put if.bytes {} {v} host=web01\n", T + dt));
    }
    d.put_lines(&lines);
    d
}

/// The driver's report: the last line of its stdout, as JSON.
fn report(text: &str) -> Value {
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {text:?}"))
}

fn requests(proxy: &Proxy) -> Vec<RecordedRequest> {
    proxy.http_requests().into_iter().flatten().collect()
}

fn body_json(r: &RecordedRequest) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| {
        panic!("{} {}: body is not JSON ({e}): {:?}", r.method, r.target, String::from_utf8_lossy(&r.body))
    })
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

fn sum_result() -> Value {
    json!([{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],
            "dps":{"1356998400":40,"1356998410":87,"1356998420":108,"1356998430":70}}])
}

// spec: clients.md "pyopentsdb 0.2.1" (POST /api/query/ with `"start":"<s>"` as a string, `end` an int,
// `"delete":false`, `"timezone":"UTC"`, no Content-Type; POST /api/suggest/; GETs with a trailing `/`; 200 → the
// body, 400 → ArgumentError(error.message)); query spec §7.3.
#[test]
fn pyopentsdb_reads() {
    let d = daemon_with_data();
    let proxy = Proxy::start(d.addr());
    let port = proxy.port().to_string();
    let t = T.to_string();
    let mut got = report(&run_python_client("pyopentsdb_query_driver.py", &["127.0.0.1", &port, &t], CLIENT_TIMEOUT));

    // pyopentsdb returns the object as is (its exact key set is checked in query.rs `version_object`).
    let version = got.as_object_mut().and_then(|o| o.remove("version")).unwrap_or_default();
    assert!(version.as_object().is_some_and(|o| o.values().all(Value::is_string)), "{version}");
    assert_eq!(version["version"], "2.4.1");

    assert_eq!(
        got,
        json!({
            "query_sum": sum_result(),
            "query_group_by": [
                {"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1356998400":40,"1356998410":50,"1356998430":70}},
                {"metric":"sys.cpu.user","tags":{"host":"web02"},"aggregateTags":[],"dps":{"1356998410":37,"1356998420":48}}
            ],
            "query_filters_ms": [
                {"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1356998400000":40,"1356998410000":50,"1356998430000":70}}
            ],
            "query_downsample": [
                {"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":{"1356998400":175.0,"1356998430":70.0}}
            ],
            "query_rate_counter": [
                {"metric":"if.bytes","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1356998460":1.0,"1356998490":1.0}}
            ],
            "query_again": sum_result(),
            "query_unknown_metric": "ArgumentError: No such name for 'metrics': 'nosuch.metric'",
            "multiquery": [
                {"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":{"1356998400":40,"1356998410":50,"1356998420":60,"1356998430":70}},
                {"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":{"1356998400":40,"1356998410":37,"1356998420":48,"1356998430":70}}
            ],
            "suggest": ["sys.cpu.user"],
            "suggest_tagv": ["web01", "web02"],
            "suggest_bad_type": "ArgumentError: Invalid 'type' parameter:foo",
            "metrics": ["sys.cpu.user"],
            "aggregators": AGGREGATORS_SORTED.to_vec(),
            "config_is_dict": true,
            "filters": ["iliteral_or", "iwildcard", "literal_or", "not_iliteral_or", "not_literal_or", "regexp", "wildcard"],
        })
    );

    // What pyopentsdb sent: every URL ends in `/`, bodies without Content-Type.
    let sent = requests(&proxy);
    let lines: Vec<String> = sent.iter().map(|r| format!("{} {}", r.method, r.target)).collect();
    let mut expected = vec!["POST /api/query/"; 9];
    expected.extend(["POST /api/suggest/"; 4]);
    expected.extend(["GET /api/aggregators/", "GET /api/version/", "GET /api/config/", "GET /api/config/filters/"]);
    assert_eq!(lines, expected);
    for r in sent.iter().filter(|r| r.method == "POST") {
        assert_eq!(r.header("Content-Type"), None, "pyopentsdb sends no Content-Type: {} {}", r.method, r.target);
    }
    assert_eq!(
        body_json(&sent[0]),
        json!({"start":"1356998400","msResolution":false,"showTSUIDs":false,"noAnnotations":false,
               "globalAnnotations":false,"showSummary":false,"showStats":false,"showQuery":false,"delete":false,
               "timezone":"UTC","useCalendar":false,"queries":[{"metric":"sys.cpu.user","aggregator":"sum"}],
               "end":1356998460})
    );
    assert_eq!(body_json(&sent[9]), json!({"type":"metrics","q":"sys","max":10}));
    assert_eq!(body_json(&sent[12]), json!({"type":"metrics","q":"sys","max":10000}));
}

// spec: clients.md "npm opentsdb 0.5.7" (GETs only; `/api/query?ms=true&arrays=true&show_tsuids=false&
// no_annotations=true&global_annotations=false&start=<ms>&end=<ms>&m=...` with `{`/`}` percent-encoded, flags by
// presence so `show_tsuids=false` turns TSUIDs on; dps as [[ms, value]]; an empty body or `[]` becomes the
// client's 404 error); query spec §0.2, §1.1.
#[test]
fn npm_opentsdb_reads() {
    let d = daemon_with_data();
    let proxy = Proxy::start(d.addr());
    let port = proxy.port().to_string();
    let t = T.to_string();
    let mut got =
        report(&run_node_client("npm_opentsdb_driver.js", "opentsdb", &["127.0.0.1", &port, &t], CLIENT_TIMEOUT));
    let obj = got.as_object_mut().expect("report object");

    let version = obj.remove("version").unwrap_or_default();
    assert_eq!(version["data"]["version"], "2.4.1", "{version}");
    let aggregators = obj.remove("aggregators").unwrap_or_default();
    let mut names: Vec<&str> =
        aggregators["data"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    names.sort_unstable();
    assert_eq!(names, AGGREGATORS_SORTED, "{aggregators}");
    let config = obj.remove("config").unwrap_or_default();
    assert!(config["data"].is_object(), "{config}");
    let tsuids = obj.remove("query_tsuids").unwrap_or_default();
    assert_eq!(tsuids["data"]["error"]["message"], "Missing sub queries", "{tsuids}");
    let unknown = obj.remove("query_unknown_metric").unwrap_or_default();
    // The client ignores the status: the 400 envelope arrives as data.
    assert_eq!(unknown["data"]["error"]["message"], "No such name for 'metrics': 'nosuch.metric'", "{unknown}");

    assert_eq!(
        got,
        json!({
            "metrics": {"data": ["if.bytes", "sys.cpu.user"]},
            "query_sum": {"data": [{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],
                "tsuids":["000001000001000001","000001000001000002"],
                "dps":[[1356998400000u64,40],[1356998410000u64,87],[1356998420000u64,108],[1356998430000u64,70]]}]},
            "query_group_by": {"data": [
                {"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"tsuids":["000001000001000001"],
                 "dps":[[1356998400000u64,40],[1356998410000u64,50],[1356998430000u64,70]]},
                {"metric":"sys.cpu.user","tags":{"host":"web02"},"aggregateTags":[],"tsuids":["000001000001000002"],
                 "dps":[[1356998410000u64,37],[1356998420000u64,48]]}]},
            "query_downsample": {"data": [{"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],
                "tsuids":["000001000001000001"],"dps":[[1356998400000u64,45],[1356998430000u64,70]]}]},
            // `rate{true,100,0}`: the first option does not end in "counter", so OpenTSDB (and rtsd) compute a
            // plain rate and the client's counter/counterMax are ignored (spec §1.1).
            "query_rate": {"data": [{"metric":"if.bytes","tags":{"host":"web01"},"aggregateTags":[],
                "tsuids":["000002000001000001"],"dps":[[1356998460000u64,1],[1356998490000u64,-2.3333333333333335]]}]},
            "query_empty": {"error": {"status": 404,
                "message": "No data returned. Empty data array. Ensure all query parameters are correct."}},
        })
    );

    let sent = requests(&proxy);
    let targets: Vec<&str> = sent.iter().map(|r| r.target.as_str()).collect();
    let q = "/api/query?ms=true&arrays=true&show_tsuids=false&no_annotations=true&global_annotations=false";
    assert_eq!(
        targets,
        [
            "/api/version".to_string(),
            "/api/aggregators".to_string(),
            "/api/suggest?type=metrics&max=1000000000&q=".to_string(),
            "/api/config".to_string(),
            format!("{q}&start=1356998400000&end=1356998460000&m=sum:sys.cpu.user"),
            format!("{q}&start=1356998400000&end=1356998460000&m=sum:sys.cpu.user%7Bhost=*%7D"),
            format!("{q}&start=1356998400000&end=1356998460000&m=avg:30s-avg:sys.cpu.user%7Bhost=web01%7D"),
            format!("{q}&start=1356998400000&end=1357041600000&m=sum:rate%7Btrue,100,0%7D:if.bytes%7Bhost=web01%7D"),
            format!("{q}&start=1357084800000&end=1357084860000&m=sum:sys.cpu.user"),
            format!("{q}&start=1356998400000&end=1356998460000&m=sum:nosuch.metric"),
            format!("{q}&start=1356998400000&end=1356998460000&tsuids=sum:000001000001000001"),
        ]
    );
    assert!(sent.iter().all(|r| r.method == "GET"), "the npm client only GETs");
}

// The harness finds the daemon binary Cargo built for this test run (see `rtsd_compat_tests::binary`).
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
