//! HTTP `/api/put` on the shared port, byte for byte, against the real daemon.
//!
//! Requests are written by hand ([`HttpConn`]), so every header and body byte is the one the test names.
use rtsd_compat_tests::{gzip, normalize, Daemon, HttpConn, Response};

const SCAN_START: &str = "1699990000";
const SCAN_END: &str = "1700100000";

fn scan(d: &Daemon, metric: &str) -> Vec<String> {
    d.scan(&[SCAN_START, SCAN_END, "sum", metric])
}

fn assert_204(r: &Response, what: &str) {
    assert_eq!(r.status, 204, "{what}: body {:?}", r.text());
    assert!(r.body.is_empty(), "{what}: 204 with a body {:?}", r.text());
}

/// An error envelope (spec: opentsdb-ingest-storage.md §3.7): `code`, `message` and optional `details`, compared
/// exactly; OpenTSDB's Java `trace` may be present or not (the spec leaves it to us), nothing else may be.
fn assert_error_envelope(r: &Response, status: u16, message: &str, details: Option<&str>) {
    assert_eq!(r.status, status, "body {:?}", r.text());
    let mut v = r.json();
    let error =
        v.get_mut("error").and_then(|e| e.as_object_mut()).unwrap_or_else(|| panic!("no error object: {:?}", r.text()));
    error.remove("trace");
    let mut expected = serde_json::json!({"code": status, "message": message});
    if let Some(d) = details {
        expected["details"] = d.into();
    }
    assert_eq!(serde_json::Value::Object(error.clone()), expected, "body {:?}", r.text());
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "body {:?}", r.text());
}

// spec: opentsdb-ingest-storage.md §3.5 (204, no body), §3.8 (Content-Type on all /api replies); clients.md
// opentsdb-http-client (single object, Content-Type: application/json), pyopentsdb (array, no Content-Type).
#[test]
fn put_single_object_and_array_answer_204() {
    let d = Daemon::start();
    let r = d.http(
        "POST",
        "/api/put",
        &[("Content-Type", "application/json")],
        br#"{"metric":"http.basic","timestamp":1700000000,"value":42,"tags":{"host":"web01","dc":"lga"}}"#,
    );
    assert_204(&r, "single object");
    assert_eq!(r.header("Content-Type"), Some("application/json; charset=UTF-8"));
    let r = d.post(
        "/api/put",
        r#"[{"metric":"http.basic","timestamp":1700000010,"value":43.5,"tags":{"host":"web01","dc":"lga"}},
            {"metric":"http.basic","timestamp":1700000020123,"value":-7,"tags":{"host":"web02","dc":"lga"}}]"#,
    );
    assert_204(&r, "array");
    // Values as numeric strings (opentsdb-py passes "12.5" through), integral floats, exponents.
    let r = d.post(
        "/api/put",
        r#"[{"metric":"http.basic","timestamp":1700000030,"value":"12.5","tags":{"host":"web01","dc":"lga"}},
            {"metric":"http.basic","timestamp":1700000040,"value":42.0,"tags":{"host":"web01","dc":"lga"}},
            {"metric":"http.basic","timestamp":1700000050,"value":1e-05,"tags":{"host":"web01","dc":"lga"}},
            {"metric":"http.basic","timestamp":1700000060,"value":"-3","tags":{"host":"web01","dc":"lga"}}]"#,
    );
    assert_204(&r, "string values");
    assert_eq!(
        scan(&d, "http.basic"),
        normalize([
            "http.basic 1700000000 42 host=web01 dc=lga",
            "http.basic 1700000010 43.5 host=web01 dc=lga",
            "http.basic 1700000020123 -7 host=web02 dc=lga",
            "http.basic 1700000030 12.5 host=web01 dc=lga",
            "http.basic 1700000040 42.0 host=web01 dc=lga",
            "http.basic 1700000050 1.0E-5 host=web01 dc=lga",
            "http.basic 1700000060 -3 host=web01 dc=lga",
        ])
    );
}

// spec: opentsdb-ingest-storage.md §3.3 (presence-based flags), §3.5, §3.6 (key order success, failed, errors);
// clients.md opentsdb-py (`?details=true`, counts successes from the body).
#[test]
fn details_and_summary_replies() {
    let d = Daemon::start();
    let point = |ts: i64| format!(r#"{{"metric":"http.flags","timestamp":{ts},"value":1,"tags":{{"host":"web01"}}}}"#);
    for (i, query) in ["?details", "?details=true", "?details=false", "?summary&details"].iter().enumerate() {
        let r = d.post(&format!("/api/put{query}"), &point(1700000000 + i as i64));
        assert_eq!((r.status, r.text().as_str()), (200, r#"{"success":1,"failed":0,"errors":[]}"#), "{query}");
        assert_eq!(r.header("Content-Type"), Some("application/json; charset=UTF-8"), "{query}");
    }
    for (i, query) in ["?summary", "?summary=false", "?summary=true&sync"].iter().enumerate() {
        let body = format!("[{},{}]", point(1700000100 + 2 * i as i64), point(1700000101 + 2 * i as i64));
        let r = d.post(&format!("/api/put{query}"), &body);
        assert_eq!((r.status, r.text().as_str()), (200, r#"{"success":2,"failed":0}"#), "{query}");
    }
    // `timeouts` only for a positive sync_timeout (2.4 arms its timer only then); an unparseable one is
    // Integer.parseInt's exception, a 500, and nothing is written.
    for (i, (query, reply)) in [
        ("?summary&sync_timeout=30000", r#"{"success":1,"timeouts":0,"failed":0}"#),
        ("?summary&sync_timeout=0", r#"{"success":1,"failed":0}"#),
        ("?summary&sync_timeout=-5", r#"{"success":1,"failed":0}"#),
    ]
    .iter()
    .enumerate()
    {
        let r = d.post(&format!("/api/put{query}"), &point(1700000200 + i as i64));
        assert_eq!((r.status, r.text().as_str()), (200, *reply), "{query}");
    }
    let r = d.post("/api/put?summary&sync_timeout=abc", &point(1700000300));
    assert_eq!((r.status, r.text().as_str()), (500, r#"{"error":{"code":500,"message":"For input string: \"abc\""}}"#));
    assert_eq!(scan(&d, "http.flags").len(), 4 + 6 + 3);
}

// spec: opentsdb-ingest-storage.md §3.4 (per-point errors; valid points are still written), §3.5 (400 with
// details / summary / error envelope), §3.6 (datapoint shape: value is always a JSON string); §5.10 P12-P18.
#[test]
fn bad_points_answer_400_with_opentsdb_errors() {
    let d = Daemon::start();
    let good = r#"{"metric":"http.errors","timestamp":1700000000,"value":42,"tags":{"host":"web01"}}"#;
    let bad = r#"{"metric":"http.errors","timestamp":1700000010,"value":"notanumber","tags":{"host":"web01"}}"#;
    let r = d.post("/api/put?details", &format!("[{good},{bad}]"));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text(),
        r#"{"success":1,"failed":1,"errors":[{"datapoint":{"metric":"http.errors","timestamp":1700000010,"value":"notanumber","tags":{"host":"web01"}},"error":"Unable to parse value to a number"}]}"#
    );
    let r = d.post("/api/put?summary", bad);
    assert_eq!((r.status, r.text().as_str()), (400, r#"{"success":0,"failed":1}"#));
    // A tag value of JSON null fails its point only (Jackson keeps the null; 2.4's Tags.validateString), and
    // the point is echoed with the null.
    let null_tag = r#"{"metric":"http.errors","timestamp":1700000020,"value":1,"tags":{"host":"web01","zz":null}}"#;
    let good2 = r#"{"metric":"http.errors","timestamp":1700000030,"value":7,"tags":{"host":"web01"}}"#;
    let r = d.post("/api/put?details", &format!("[{good2},{null_tag}]"));
    assert_eq!(
        (r.status, r.text().as_str()),
        (
            400,
            r#"{"success":1,"failed":1,"errors":[{"datapoint":{"metric":"http.errors","timestamp":1700000020,"value":"1","tags":{"zz":null,"host":"web01"}},"error":"Invalid tag value with key [zz]: null"}]}"#
        )
    );
    let r = d.post("/api/put", bad);
    assert_error_envelope(
        &r,
        400,
        "One or more data points had errors",
        Some("Please see the TSD logs or append \"details\" to the put request"),
    );

    // One error string per check (§3.4), each exact.
    let cases: &[(&str, &str)] = &[
        (r#"{"timestamp":1700000020,"value":1,"tags":{"host":"web01"}}"#, "Metric name was empty"),
        (r#"{"metric":"","timestamp":1700000020,"value":1,"tags":{"host":"web01"}}"#, "Metric name was empty"),
        (r#"{"metric":"http.errors","value":1,"tags":{"host":"web01"}}"#, "Invalid timestamp"),
        (r#"{"metric":"http.errors","timestamp":-1,"value":1,"tags":{"host":"web01"}}"#, "Invalid timestamp"),
        (r#"{"metric":"http.errors","timestamp":1700000020,"tags":{"host":"web01"}}"#, "Empty value"),
        (r#"{"metric":"http.errors","timestamp":1700000020,"value":"","tags":{"host":"web01"}}"#, "Empty value"),
        (r#"{"metric":"http.errors","timestamp":1700000020,"value":1}"#, "Missing tags"),
        (r#"{"metric":"http.errors","timestamp":1700000020,"value":1,"tags":{}}"#, "Missing tags"),
        (
            r#"{"metric":"http.errors","timestamp":1700000020,"value":NaN,"tags":{"host":"web01"}}"#,
            "Unable to parse value to a number",
        ),
        (
            r#"{"metric":"http.errors!","timestamp":1700000020,"value":1,"tags":{"host":"web01"}}"#,
            "Invalid metric name (\"http.errors!\"): illegal character: !",
        ),
        (
            r#"{"metric":"http.errors","timestamp":1700000020,"value":1,"tags":{"host":"web 01"}}"#,
            "Invalid tag value with key [host] (\"web 01\"): illegal character:  ",
        ),
    ];
    for (point, error) in cases {
        let r = d.post("/api/put?details", point);
        assert_eq!(r.status, 400, "{point}: {}", r.text());
        let v = r.json();
        assert_eq!(v["success"], 0, "{point}: {}", r.text());
        assert_eq!(v["failed"], 1, "{point}: {}", r.text());
        assert_eq!(v["errors"][0]["error"], *error, "{point}: {}", r.text());
    }
    // A null element (§3.4), checked whole.
    let r = d.post("/api/put?details", "[null]");
    assert_eq!(
        (r.status, r.text().as_str()),
        (
            400,
            r#"{"success":0,"failed":1,"errors":[{"datapoint":null,"error":"Unexpected null datapoint encountered in set."}]}"#
        )
    );
    // Whole-request errors (§3.2).
    assert_error_envelope(
        &d.post("/api/put", "Hello World"),
        400,
        "The JSON must start as an object or an array",
        None,
    );
    let r = d.post("/api/put", "");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["message"], "Missing request content");
    let r =
        d.post("/api/put", r#"[{"metric":"http.errors","timestamp":1700000030,"value":1,"tags":{"host":"web01"}},"#);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["message"], "Unable to parse the given JSON");

    // The valid points beside the bad ones are stored (the null-tag batch's too); nothing of refused bodies.
    assert_eq!(
        scan(&d, "http.errors"),
        ["http.errors 1700000000 42 host=web01", "http.errors 1700000030 7 host=web01"]
    );
}

// rtsd remembers per connection the series it wrote (metric and tag strings -> UIDs) and skips their name
// lookups: a later point of such a series, in the same request or a later one on the connection, still gets
// every per-point check of §3.4 with the reply a fresh connection gets, byte for byte.
#[test]
fn a_known_series_still_gets_every_point_check() {
    let d = Daemon::start();
    let mut conn = d.http_conn();
    let point = |ts: &str, value: &str| {
        format!(r#"{{"metric":"http.known","timestamp":{ts},"value":{value},"tags":{{"host":"web01","dc":"x"}}}}"#)
    };
    let r = conn.request("POST", "/api/put?details", &[], format!("[{}]", point("1700000000", "1")).as_bytes());
    assert_eq!((r.status, r.text().as_str()), (200, r#"{"success":1,"failed":0,"errors":[]}"#));
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("0", "2", Some("Invalid timestamp")),
        ("-1", "2", Some("Invalid timestamp")),
        ("1700000001", "\"\"", Some("Empty value")),
        ("1700000001", "\"abc\"", Some("Unable to parse value to a number")),
        ("1700000001", "NaN", Some("Unable to parse value to a number")),
        ("1700000001", "1e999", None),
        ("99999999999999", "2", None),
    ];
    for (ts, value, error) in cases {
        let body = format!("[{},{}]", point("1700000002", "3"), point(ts, value));
        let cached = conn.request("POST", "/api/put?details", &[], body.as_bytes());
        let fresh = d.post("/api/put?details", &body);
        assert_eq!((cached.status, cached.text()), (fresh.status, fresh.text()), "{ts} {value}");
        assert_eq!(cached.status, 400, "{ts} {value}: {}", cached.text());
        assert_eq!(cached.json()["success"], 1, "{}", cached.text());
        if let Some(error) = error {
            assert_eq!(cached.json()["errors"][0]["error"], *error, "{}", cached.text());
        }
    }
    // The same tags in another order are the same series.
    let other_order = r#"{"metric":"http.known","timestamp":1700000004,"value":4,"tags":{"dc":"x","host":"web01"}}"#;
    let r = conn.request("POST", "/api/put", &[], other_order.as_bytes());
    assert_204(&r, "tags in another order");
    assert_eq!(
        scan(&d, "http.known"),
        [
            "http.known 1700000000 1 dc=x host=web01",
            "http.known 1700000002 3 dc=x host=web01",
            "http.known 1700000004 4 dc=x host=web01"
        ]
    );
}

// spec: clients.md netdata ("When there is nothing to send it still POSTs `[\n\n]\n`" → 400 `No datapoints found in
// content`; `Host: tcp:127.0.0.1:4242`; one kept-alive connection, next POST on it); opentsdb-ingest-storage.md §3.2.
#[test]
fn netdata_empty_batch_host_header_and_keep_alive() {
    let d = Daemon::start();
    let mut conn = d.http_conn();
    let post = |conn: &mut HttpConn, body: &str| {
        conn.send_raw(
            format!(
                "POST /api/put HTTP/1.1\r\nHost: tcp:127.0.0.1:4242\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        conn.read_response("POST")
    };
    let r = post(&mut conn, "[\n\n]\n");
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), r#"{"error":{"code":400,"message":"No datapoints found in content"}}"#);
    let batch = "[\n{\"metric\":\"netdatahttp.statsd_harness.gauge_gauge.gauge\",\"timestamp\":1700000000,\"value\":42.0000000,\"tags\":{\"host\":\"netdata-r1\"}},\n{\"metric\":\"netdatahttp.statsd_harness.gauge_gauge.gauge\",\"timestamp\":1700000002,\"value\":41.5000000,\"tags\":{\"host\":\"netdata-r1\"}}\n]\n";
    assert_204(&post(&mut conn, batch), "netdata batch on the same connection");
    assert_eq!(post(&mut conn, "[\n\n]\n").status, 400);
    let batch2 = "[\n{\"metric\":\"netdatahttp.statsd_harness.gauge_gauge.gauge\",\"timestamp\":1700000004,\"value\":40.0000000,\"tags\":{\"host\":\"netdata-r1\"}}\n]\n";
    assert_204(&post(&mut conn, batch2), "third POST on the same connection");
    assert_eq!(
        scan(&d, "netdatahttp.statsd_harness.gauge_gauge.gauge"),
        normalize([
            "netdatahttp.statsd_harness.gauge_gauge.gauge 1700000000 42.0 host=netdata-r1",
            "netdatahttp.statsd_harness.gauge_gauge.gauge 1700000002 41.5 host=netdata-r1",
            "netdatahttp.statsd_harness.gauge_gauge.gauge 1700000004 40.0 host=netdata-r1",
        ])
    );
}

// spec: opentsdb-ingest-storage.md §3.1 (POST only → 405; routes /api/put/, /api/v1/put, /api/v2/put → 501,
// unknown → 404); clients.md pyopentsdb (trailing slash).
#[test]
fn routing_methods_and_versions() {
    let d = Daemon::start();
    let point = |ts: i64| format!(r#"{{"metric":"http.routes","timestamp":{ts},"value":1,"tags":{{"host":"web01"}}}}"#);
    assert_204(&d.post("/api/put/", &point(1700000000)), "/api/put/");
    assert_204(&d.post("/api/v1/put", &point(1700000010)), "/api/v1/put");
    assert_204(&d.post("/API/PUT", &point(1700000020)), "/API/PUT");
    let r = d.post("/api/v2/put", &point(1700000030));
    assert_eq!(r.status, 501, "{}", r.text());
    assert_eq!(r.json()["error"]["message"], "Requested API version is greater than the max implemented");
    // spec: query §0.1 (HttpQuery.getQueryBaseRoute): a version that is no integer.
    let r = d.post("/api/v1x/put", &point(1700000030));
    assert_eq!(
        (r.status, r.text().as_str()),
        (
            400,
            r#"{"error":{"code":400,"message":"Invalid API version format supplied","details":"API version [1x] cannot be parsed to an integer"}}"#
        )
    );
    let r = d.http("GET", "/api/put", &[], b"");
    assert_error_envelope(
        &r,
        405,
        "Method not allowed",
        Some("The HTTP method [GET] is not permitted for this endpoint"),
    );
    let r = d.http("PUT", "/api/put", &[], point(1700000040).as_bytes());
    assert_error_envelope(
        &r,
        405,
        "Method not allowed",
        Some("The HTTP method [PUT] is not permitted for this endpoint"),
    );
    let r = d.http("GET", "/api/nosuch", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (404, r#"{"error":{"code":404,"message":"Endpoint not found"}}"#));
    let r = d.post("/api/nosuch", "{}");
    assert_eq!((r.status, r.text().as_str()), (404, r#"{"error":{"code":404,"message":"Endpoint not found"}}"#));
    // spec: query §0.3: `serializer=` names the serializer, before the endpoint is looked up; `json` is the only
    // one, anything else is a 400 and nothing is written.
    assert_204(&d.post("/api/put?serializer=json", &point(1700000050)), "serializer=json");
    for path in ["/api/put?serializer=foo", "/api/nosuch?serializer=foo"] {
        assert_error_envelope(
            &d.post(path, &point(1700000060)),
            400,
            "Requested serializer was not found",
            Some("Could not find a serializer with the name: foo"),
        );
    }
    assert_eq!(
        scan(&d, "http.routes"),
        normalize([
            "http.routes 1700000000 1 host=web01",
            "http.routes 1700000010 1 host=web01",
            "http.routes 1700000020 1 host=web01",
            "http.routes 1700000050 1 host=web01"
        ])
    );
}

// spec: opentsdb-ingest-storage.md §1.1, §3.8 (Content-Encoding gzip inflated); clients.md opentsdb-py (gzip body,
// no Content-Type; a bodyless GET /api/version that carries Content-Encoding: gzip).
#[test]
fn gzip_bodies() {
    let d = Daemon::start();
    let body = br#"[{"metric": "http.gzip", "timestamp": 1700000000, "value": 42, "tags": {"host": "h", "variant": "http_gzip"}}]"#;
    let r = d.http("POST", "/api/put?details=true", &[("Content-Encoding", "gzip")], &gzip(body));
    assert_eq!((r.status, r.text().as_str()), (200, r#"{"success":1,"failed":0,"errors":[]}"#));
    let r = d.http(
        "POST",
        "/api/put",
        &[("Content-Encoding", "x-gzip")],
        &gzip(br#"{"metric":"http.gzip","timestamp":1700000010,"value":1.5,"tags":{"host":"h","variant":"x"}}"#),
    );
    assert_204(&r, "x-gzip");
    let r = d.http("GET", "/api/version", &[("Content-Encoding", "gzip"), ("Accept-Encoding", "identity")], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["version"], "2.4.1");
    assert_eq!(
        scan(&d, "http.gzip"),
        normalize(["http.gzip 1700000000 42 host=h variant=http_gzip", "http.gzip 1700000010 1.5 host=h variant=x"])
    );
}

// rtsd README "Chunked and large HTTP bodies are accepted ... without enabling tsd.http.request.enable_chunked"
// (a deliberate difference from opentsdb-ingest-storage.md §3.8, where OpenTSDB's default answers 400).
#[test]
fn chunked_body_written_by_hand() {
    let d = Daemon::start();
    let mut conn = d.http_conn();
    let part1 = r#"[{"metric":"http.chunked","timestamp":1700000000,"value":1,"#;
    let part2 = r#""tags":{"host":"web01"}},{"metric":"http.chunked","timestamp":1700000010,"value":2,"tags":{"host":"web01"}}]"#;
    let request = format!(
        "POST /api/put?details HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{part1}\r\n{:x};ext=1\r\n{part2}\r\n0\r\n\r\n",
        part1.len(),
        part2.len()
    );
    conn.send_raw(request.as_bytes());
    let r = conn.read_response("POST");
    assert_eq!((r.status, r.text().as_str()), (200, r#"{"success":2,"failed":0,"errors":[]}"#));
    // The connection stays usable after a chunked request.
    let r = conn.request(
        "POST",
        "/api/put",
        &[],
        br#"{"metric":"http.chunked","timestamp":1700000020,"value":3,"tags":{"host":"web01"}}"#,
    );
    assert_204(&r, "after chunked");
    assert_eq!(
        scan(&d, "http.chunked"),
        normalize([
            "http.chunked 1700000000 1 host=web01",
            "http.chunked 1700000010 2 host=web01",
            "http.chunked 1700000020 3 host=web01"
        ])
    );
}

// spec: clients.md "HTTP/1.1 keep-alive is required ... `Connection: close` must also work (Python urllib in
// tcollector)"; opentsdb-ingest-storage.md §3.8. (tcollector --http is replayed in clients.rs.)
#[test]
fn keep_alive_and_connection_close() {
    let d = Daemon::start();
    let mut conn = d.http_conn();
    for i in 0..3 {
        let body = format!(
            r#"[{{"metric":"http.keepalive","timestamp":{},"value":{i},"tags":{{"host":"web01"}}}}]"#,
            1700000000 + i
        );
        let r = conn.request(
            "POST",
            "/api/put",
            &[
                ("User-Agent", "python-requests/2.34.2"),
                ("Accept-Encoding", "gzip, deflate"),
                ("Accept", "*/*"),
                ("Connection", "keep-alive"),
            ],
            body.as_bytes(),
        );
        assert_204(&r, "keep-alive POST");
    }

    // `Connection: close` (Python urllib, as tcollector --http sends it): the server answers, then closes.
    let mut conn = d.http_conn();
    let r = conn.request(
        "POST",
        "/api/put",
        &[("Connection", "close")],
        br#"{"metric":"http.keepalive","timestamp":1700000003,"value":3,"tags":{"host":"web01"}}"#,
    );
    assert_204(&r, "Connection: close");
    assert!(conn.is_closed(), "the server must close the connection after a `Connection: close` request");

    assert_eq!(
        scan(&d, "http.keepalive"),
        normalize([
            "http.keepalive 1700000000 0 host=web01",
            "http.keepalive 1700000001 1 host=web01",
            "http.keepalive 1700000002 2 host=web01",
            "http.keepalive 1700000003 3 host=web01",
        ])
    );
}

// spec: opentsdb-ingest-storage.md §3.4 (`Unknown metric` when auto-create is off), §5.10 P12.
#[test]
fn unknown_metric_without_auto_create() {
    let d = Daemon::start_with(&[("tsd.core.auto_create_metrics", "false")]);
    let r = d.post(
        "/api/put?details",
        r#"{"metric":"sys.cpu.nice","timestamp":1700000000,"value":"12.5","tags":{"host":"web01"}}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text(),
        r#"{"success":0,"failed":1,"errors":[{"datapoint":{"metric":"sys.cpu.nice","timestamp":1700000000,"value":"12.5","tags":{"host":"web01"}},"error":"Unknown metric"}]}"#
    );
    assert!(d.try_scan(&[SCAN_START, SCAN_END, "sum", "sys.cpu.nice"]).is_err(), "no point may be stored");
}

/// The harness runs the binary Cargo built for this test target.
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
