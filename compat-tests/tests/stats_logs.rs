//! `/logs`, `/stats` and the `/api/stats` sub-routes (spec: query §6.14, §6.18).
use rtsd_compat_tests::Daemon;

/// The `rtsd ready` record as `/logs` prints it, given the seconds it carries.
fn ready_line(d: &Daemon, seconds: &str) -> String {
    format!(
        "{seconds}\tINFO\tmain\trtsd::daemon\trtsd ready: telnet put and HTTP on one port addr={} data_dir={}",
        d.addr(),
        d.data_dir().display()
    )
}

#[test]
fn logs_serve_recent_records_newest_first() {
    // spec: query §6.18 (LogsRpc: `seconds TAB LEVEL TAB thread TAB logger TAB message`, newest first)
    let d = Daemon::start();
    let r = d.http("GET", "/logs", &[], b"");
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/plain")));
    let text = r.text();
    assert!(text.ends_with('\n'));
    let ready = text.lines().find(|l| l.contains("rtsd ready")).expect("the start-up record");
    let seconds = ready.split('\t').next().unwrap();
    assert!(seconds.parse::<u64>().unwrap() > 1_700_000_000, "{ready}");
    assert_eq!(ready, ready_line(&d, seconds));
    // Newest first: every line's seconds are at most those of the line before.
    let times: Vec<u64> = text.lines().map(|l| l.split('\t').next().unwrap().parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{text}");
    // A warning logged now comes first: a rollup point for an interval that has no table (logged, then refused).
    let r = d.post(
        "/api/rollup",
        r#"{"metric":"m","timestamp":1700000000,"value":1,"tags":{"h":"a"},"interval":"7m","aggregator":"sum"}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let r = d.http("GET", "/logs?json", &[], b"");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let lines: Vec<String> = serde_json::from_value(r.json()).unwrap();
    let fields: Vec<&str> = lines[0].split('\t').collect();
    assert_eq!(fields.len(), 5, "{lines:?}");
    assert_eq!(&fields[1..4], &["WARN", "tokio-rt-worker", "rtsd::ingest"][..], "{lines:?}");
    assert!(fields[4].starts_with("rollup point refused"), "{lines:?}");
    assert!(lines.contains(&ready_line(&d, seconds)));
}

#[test]
fn logs_change_levels_at_run_time() {
    // spec: query §6.18 (LogsRpc `level`, `logger`)
    let d = Daemon::start();
    let r = d.http("GET", "/logs?level=warn&logger=rtsd::daemon", &[], b"");
    assert_eq!(
        (r.status, r.header("content-type"), r.text()),
        (200, Some("text/plain"), "Set the log level to WARN on 1 logger.\n".to_string())
    );
    // A parent of a known logger exists too (logback creates the parents of its loggers).
    let r = d.http("GET", "/logs?level=Debug&logger=rtsd", &[], b"");
    assert_eq!(r.text(), "Set the log level to DEBUG on 1 logger.\n");
    // The root (no logger, or ROOT) sets every logger.
    let r = d.http("GET", "/logs?level=OFF&logger=ROOT", &[], b"");
    assert!(r.text().starts_with("Set the log level to OFF on "), "{}", r.text());
    let before = d.http("GET", "/logs?json", &[], b"").json();
    d.post(
        "/api/rollup",
        r#"{"metric":"m","timestamp":1700000000,"value":1,"tags":{"h":"a"},"interval":"7m","aggregator":"sum"}"#,
    );
    assert_eq!(d.http("GET", "/logs?json", &[], b"").json(), before, "nothing is recorded with logging off");
    let r = d.http("GET", "/logs?level=info", &[], b"");
    assert_eq!(r.status, 200);
    d.post(
        "/api/rollup",
        r#"{"metric":"m","timestamp":1700000000,"value":1,"tags":{"h":"a"},"interval":"7m","aggregator":"sum"}"#,
    );
    assert_ne!(d.http("GET", "/logs?json", &[], b"").json(), before);
    for (query, reason) in
        [("level=loud", "Invalid level: loud"), ("level=info&logger=no.such.logger", "Invalid logger: no.such.logger")]
    {
        let r = d.http("GET", &format!("/logs?{query}"), &[], b"");
        assert_eq!((r.status, r.header("content-type")), (400, Some("text/html; charset=UTF-8")));
        // OpenTSDB's `HttpQuery.badRequest` page (makePage).
        let page = r.text();
        assert!(
            page.starts_with("<!DOCTYPE html><html><head>") && page.contains("<title>Bad Request</title>"),
            "{page}"
        );
        assert!(
            page.contains(&format!(
                "<blockquote><h1>Bad Request</h1>Sorry but your request was rejected as being invalid.<br/><br/>\
                 The reason provided was:<blockquote>{reason}</blockquote></blockquote>"
            )),
            "{page}"
        );
    }
}

#[test]
fn stats_sub_routes_answer_from_the_process() {
    // spec: query §6.14
    let d = Daemon::start();
    // rtsd talks to no HBase: no region clients.
    let r = d.http("GET", "/api/stats/region_clients", &[], b"");
    assert_eq!((r.status, r.text()), (200, "[]".to_string()));
    assert_eq!(r.header("content-type"), Some("application/json; charset=UTF-8"));
    // GET and POST only, as 2.4's StatsRpc.
    let r = d.http("PUT", "/api/stats/jvm", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (405, r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [PUT] is not permitted for this endpoint"}}"#.to_string())
    );
    // An unknown sub-route is the plain list.
    let plain = d.http("GET", "/api/stats", &[], b"").json();
    let other = d.http("POST", "/api/stats/other", &[], b"").json();
    assert_eq!(other.as_array().unwrap().len(), plain.as_array().unwrap().len());

    let threads = d.http("GET", "/api/stats/threads", &[], b"").json();
    let threads = threads.as_array().unwrap();
    let keys = |t: &serde_json::Value| t.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&threads[0]), ["interrupted", "name", "priority", "state", "threadID"]);
    assert!(threads.iter().any(|t| t["threadID"] == d.pid()), "the main thread's id is the process's: {threads:?}");
    assert!(threads.iter().any(|t| t["name"] == "tokio-rt-worker" && t["state"] == "RUNNABLE"), "{threads:?}");

    let r = d.http("GET", "/api/stats/jvm", &[], b"");
    let text = r.text();
    assert!(text.starts_with(r#"{"memory":{"virtualBytes":"#), "Java HashMap order: {text}");
    let jvm = r.json();
    assert_eq!(jvm["runtime"]["vmName"], "rtsd");
    assert!(jvm["memory"]["residentBytes"].as_u64().unwrap() > 1 << 20);
    assert!(jvm["memory"]["peakResidentBytes"].as_u64() >= jvm["memory"]["residentBytes"].as_u64());
    assert_eq!(jvm["gc"], serde_json::json!({}));
    assert!(jvm["pools"]["rocksdbMemtables"]["usage"].as_u64().is_some());
    assert!(jvm["pools"]["rtsdSeriesTable"]["usage"].as_u64().is_some());
    // The allocator's view of the heap (jemalloc): allocated <= active <= resident.
    let pool = |name: &str| jvm["pools"][name]["usage"].as_u64().unwrap_or(0);
    assert!(pool("heapAllocated") > 1 << 20, "{text}");
    assert!(pool("heapActive") >= pool("heapAllocated") && pool("heapResident") >= pool("heapActive"), "{text}");
    assert!(pool("heapMetadata") > 0, "{text}");
    assert!(jvm["os"]["systemLoadAverage"].as_f64().is_some());

    // The old /stats: text lines, or with `json` those lines as strings; typed by 2.4's content sniffing
    // (spec: query §0.3, §6.18): `text/plain`, no charset.
    let r = d.http("GET", "/stats", &[], b"");
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/plain")));
    let text = r.text();
    let r = d.http("GET", "/stats?json", &[], b"");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let lines: Vec<String> = serde_json::from_value(r.json()).unwrap();
    assert_eq!(lines.len(), text.lines().count());
    assert!(lines.iter().all(|l| l.starts_with("tsd.") && !l.ends_with('\n')), "{lines:?}");
}

#[test]
fn the_query_stats_list_completed_queries() {
    // spec: query §6.14 (/api/stats/query: QueryStats.getRunningAndCompleteStats)
    let d = Daemon::start();
    d.put_lines("put sys.cpu.user 1700000000 1 host=web01\n");
    let r = d.http("GET", "/api/stats/query", &[], b"");
    assert_eq!(r.text(), r#"{"completed":[],"running":[]}"#);
    let q = r#"{"start":1700000000,"end":1700000100,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#;
    let mut conn = d.http_conn();
    for _ in 0..2 {
        assert_eq!(conn.request("POST", "/api/query", &[], q.as_bytes()).status, 200);
    }
    let r = d.http("GET", "/api/query?start=1700000000&m=sum:no.such.metric", &[("X-Dashboard", "ops")], b"");
    assert_eq!(r.status, 400);
    let stats = d.http("GET", "/api/stats/query", &[], b"").json();
    assert_eq!(stats["running"], serde_json::json!([]));
    let done = stats["completed"].as_array().unwrap();
    assert_eq!(done.len(), 2, "{stats}");
    let keys: Vec<&String> = done[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "exception",
            "executed",
            "httpResponse",
            "numRunningQueries",
            "query",
            "queryCompletedTimestamp",
            "queryStartTimestamp",
            "requestHeaders",
            "sentToClient",
            "stats",
            "user"
        ]
    );
    // The same query twice from the same connection is one entry, executed twice (2.4 keys them by address and
    // query).
    assert_eq!(done[0]["executed"], 2);
    assert_eq!(done[0]["exception"], "null");
    assert_eq!(done[0]["httpResponse"], serde_json::json!({"code":200,"reasonPhrase":"OK"}));
    assert_eq!(done[0]["sentToClient"], true);
    assert_eq!(done[0]["query"]["start"], "1700000000");
    assert_eq!(done[0]["query"]["queries"][0]["metric"], "sys.cpu.user");
    assert!(done[0]["stats"]["totalTime"].as_f64().unwrap() >= 0.0);
    assert!(done[0]["queryCompletedTimestamp"].as_i64() >= done[0]["queryStartTimestamp"].as_i64());
    assert_eq!(done[1]["exception"], "No such name for 'metrics': 'no.such.metric'");
    assert_eq!(done[1]["httpResponse"]["code"], 400);
    assert_eq!(done[1]["requestHeaders"]["x-dashboard"], "ops");
}
