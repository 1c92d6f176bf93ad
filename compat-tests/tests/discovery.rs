//! Discovery endpoints answered from rtsd's in-memory indexes (spec: query §6.4, §7.2, V16).
use rtsd_compat_tests::{barrier, Daemon, Response};
use std::io::Write;

fn write_lines(d: &Daemon, lines: &str) {
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new(), "no put errors");
}

#[test]
fn suggest_lists_names_by_prefix_in_byte_order() {
    // spec: query §8 V16 and §6.4
    let d = Daemon::start();
    write_lines(
        &d,
        "put sys.cpu.user 1356998400 1 host=web01\nput sys.cpu.system 1356998400 1 host=web02\n\
         put sys.mem 1356998400 1 host=web01\nput web.hits 1356998400 1 host=web01 dc=lga\n",
    );
    let r = d.http("GET", "/api/suggest?type=metrics&q=sys", &[], b"");
    assert_eq!((r.status, r.text()), (200, r#"["sys.cpu.system","sys.cpu.user","sys.mem"]"#.to_string()));
    let r = d.http("GET", "/api/suggest?type=metrics&q=sys&max=2", &[], b"");
    assert_eq!(r.text(), r#"["sys.cpu.system","sys.cpu.user"]"#);
    // max <= 0 means the default of 25; an empty q lists from the beginning (npm client: max=1000000000&q=).
    let r = d.http("GET", "/api/suggest?type=metrics&max=1000000000&q=", &[], b"");
    assert_eq!(r.text(), r#"["sys.cpu.system","sys.cpu.user","sys.mem","web.hits"]"#);
    let r = d.http("GET", "/api/suggest?type=tagk&max=0", &[], b"");
    assert_eq!(r.text(), r#"["dc","host"]"#);
    let r = d.http("GET", "/api/suggest/?type=tagv&q=web0", &[], b"");
    assert_eq!(r.text(), r#"["web01","web02"]"#);
    // Grafana's "Save & test" and the deprecated non-api route.
    let r = d.http("GET", "/api/suggest?q=cpu&type=metrics", &[], b"");
    assert_eq!((r.status, r.text()), (200, "[]".to_string()));
    let r = d.http("GET", "/suggest?type=metrics&q=web", &[], b"");
    assert_eq!(r.text(), r#"["web.hits"]"#);
    // POST form with numbers accepted for max (pyopentsdb).
    let r = d.post("/api/suggest/", r#"{"type": "metrics", "q": "sys.c", "max": 10}"#);
    assert_eq!((r.status, r.text()), (200, r#"["sys.cpu.system","sys.cpu.user"]"#.to_string()));
}

#[test]
fn suggest_errors_are_opentsdbs() {
    // spec: query §6.4
    let d = Daemon::start();
    let cases: &[(&str, &str, &str)] = &[
        ("GET", "/api/suggest?type=foo", r#"{"error":{"code":400,"message":"Invalid 'type' parameter:foo"}}"#),
        ("GET", "/api/suggest?q=x", r#"{"error":{"code":400,"message":"Missing parameter <code>type</code>"}}"#),
        (
            "GET",
            "/api/suggest?type=tagk&max=ten",
            r#"{"error":{"code":400,"message":"Unable to parse 'max' as a number"}}"#,
        ),
        ("POST", "/api/suggest", r#"{"error":{"code":400,"message":"Missing 'type' parameter"}}"#),
    ];
    for (method, path, want) in cases {
        let body: &[u8] = if *method == "POST" { b"{\"q\":\"x\"}" } else { b"" };
        let r = d.http(method, path, &[], body);
        assert_eq!((r.status, r.text()), (400, want.to_string()), "{method} {path}");
    }
    let r = d.http("PUT", "/api/suggest?type=metrics", &[], b"");
    assert_eq!(r.status, 405);
    // The POST body as 2.4's `parseSuggestV1` reads it (spec: query §0.3): empty, not JSON, not an object.
    let missing = r#"{"error":{"code":400,"message":"Missing message content","details":"Supply valid JSON formatted data in the body of your request"}}"#;
    assert_eq!(d.post("/api/suggest", "").text(), missing);
    let r = d.post("/api/suggest", "[1]");
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            r#"{"error":{"code":400,"message":"Unable to parse the given JSON","details":"expected a JSON object, got an array"}}"#
                .to_string()
        )
    );
    let r = d.post("/api/suggest", "{type");
    assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some("Unable to parse the given JSON")));
    // Scalars are taken as their text: a number for max, and an unparsable max.
    write_lines(&d, "put s.a 1356998400 1 host=x\nput s.b 1356998400 1 host=x\n");
    assert_eq!(d.post("/api/suggest", r#"{"type":"metrics","q":"s.","max":1}"#).text(), r#"["s.a"]"#);
    assert_eq!(
        d.post("/api/suggest", r#"{"type":"metrics","max":"one"}"#).text(),
        r#"{"error":{"code":400,"message":"Unable to parse 'max' as a number"}}"#
    );
    // 2.4's SuggestRpc: an empty max is the default, a max is Integer.parseInt's, an empty type is missing.
    assert_eq!(d.http("GET", "/api/suggest?type=metrics&q=s.&max=", &[], b"").text(), r#"["s.a","s.b"]"#);
    assert_eq!(d.post("/api/suggest", r#"{"type":"metrics","q":"s.","max":""}"#).text(), r#"["s.a","s.b"]"#);
    for max in ["%201", "99999999999"] {
        let r = d.http("GET", &format!("/api/suggest?type=metrics&max={max}"), &[], b"");
        assert_eq!(r.text(), r#"{"error":{"code":400,"message":"Unable to parse 'max' as a number"}}"#, "{max}");
    }
    let r = d.http("GET", "/api/suggest?type=&q=s", &[], b"");
    assert_eq!(r.text(), r#"{"error":{"code":400,"message":"Missing parameter <code>type</code>"}}"#);
    // Without q, 2.4 scans names from `!` to `~` only: one that starts past ASCII needs a prefix.
    let r = d.http("GET", "/api/uid/assign?metric=%C3%A9metric", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(d.http("GET", "/api/suggest?type=metrics", &[], b"").text(), r#"["s.a","s.b"]"#);
    assert_eq!(d.http("GET", "/api/suggest?type=metrics&q=%C3%A9", &[], b"").text(), r#"["émetric"]"#);
    // The deprecated /suggest reads the query string, whatever the method and body.
    let r = d.post("/suggest?type=metrics&q=s.", r#"{"type":"tagk"}"#);
    assert_eq!(r.text(), r#"["s.a","s.b"]"#);
}

#[test]
fn new_names_are_suggested_at_once_and_after_a_restart() {
    let d = Daemon::start();
    write_lines(&d, "put a.b 1356998400 1 host=x\n");
    assert_eq!(d.http("GET", "/api/suggest?type=metrics", &[], b"").text(), r#"["a.b"]"#);
    let d = d.restart();
    write_lines(&d, "put a.c 1356998400 1 host=x\n");
    assert_eq!(d.http("GET", "/api/suggest?type=metrics&q=a.", &[], b"").text(), r#"["a.b","a.c"]"#);
}

#[test]
fn lookup_answers_from_the_series_index() {
    // spec: query §8 V16 (S1/S2 of V14: sys.cpu.user host=web01 and host=web02), §6.5, §7.2
    let d = Daemon::start();
    write_lines(
        &d,
        "put sys.cpu.user 1356998400 1 host=web01\nput sys.cpu.user 1356998400 2 host=web02\n\
         put sys.cpu.user 1357002000 3 host=web01\nput sys.cpu.nice 1356998400 1 host=web01 dc=lga\n",
    );
    let r = d.http("GET", "/api/search/lookup?m=sys.cpu.user%7Bhost=*%7D", &[], b"");
    assert_eq!(r.status, 200);
    let mut body = r.json();
    assert!(body["time"].is_f64(), "time is a float: {body}");
    body["time"] = serde_json::json!(0.0);
    assert_eq!(
        body,
        serde_json::json!({"type":"LOOKUP","metric":"sys.cpu.user","tags":[{"key":"host","value":"*"}],"limit":25,
            "startIndex":0,"totalResults":2,"time":0.0,"results":[
            {"tsuid":"000001000001000001","metric":"sys.cpu.user","tags":{"host":"web01"}},
            {"tsuid":"000001000001000002","metric":"sys.cpu.user","tags":{"host":"web02"}}]})
    );
    // Key order is Jackson's: type, metric, tags, limit, startIndex, totalResults, time, results.
    assert!(r.text().starts_with(r#"{"type":"LOOKUP","metric":"sys.cpu.user","tags":[{"key":"host","value":"*"}],"limit":25,"startIndex":0,"totalResults":2,"time":"#));

    // Grafana's tag_values(sys.cpu.nice, host, dc=lga) request, url.Values-encoded with lookupLimit 0.
    let r = d.http("GET", "/api/search/lookup?limit=0&m=sys.cpu.nice%7Bhost%3D%2A%2Cdc%3Dlga%7D", &[], b"");
    let body = r.json();
    assert_eq!(
        body["results"],
        serde_json::json!([{"tsuid":"000002000001000001000002000003","metric":"sys.cpu.nice","tags":{"host":"web01","dc":"lga"}}])
    );
    // Grafana's tag_names(metric): the metric alone.
    let r = d.http("GET", "/api/search/lookup?limit=1000&m=sys.cpu.user", &[], b"");
    assert_eq!(r.json()["totalResults"], 2);
    // A literal value, a value for any key, limit, and the POST form.
    let r = d.http("GET", "/api/search/lookup?m=sys.cpu.user%7Bhost=web02%7D", &[], b"");
    assert_eq!(r.json()["results"][0]["tags"], serde_json::json!({"host":"web02"}));
    let r = d.http("GET", "/api/search/lookup?m=%7B*=lga%7D", &[], b"");
    assert_eq!(r.json()["results"][0]["metric"], "sys.cpu.nice");
    // Two values of one key are OR-ed, and `host=*` makes a literal host moot (2.4's
    // TimeSeriesLookup.getRowKeyRegex), in both forms.
    let tsuids = |r: &Response| -> Vec<String> {
        r.json()["results"].as_array().unwrap().iter().map(|x| x["tsuid"].as_str().unwrap().to_string()).collect()
    };
    let both = ["000001000001000001", "000001000001000002"];
    for m in ["sys.cpu.user%7Bhost=web01,host=web02%7D", "sys.cpu.user%7Bhost=web01,host=*%7D"] {
        assert_eq!(tsuids(&d.http("GET", &format!("/api/search/lookup?m={m}"), &[], b"")), both, "{m}");
    }
    let r = d.post(
        "/api/search/lookup",
        r#"{"metric":"sys.cpu.user","tags":[{"key":"host","value":"web02"},{"key":"host","value":"web01"}]}"#,
    );
    assert_eq!(tsuids(&r), both);
    let r = d.http("GET", "/api/search/lookup?m=sys.cpu.user&limit=1", &[], b"");
    assert_eq!(r.json()["totalResults"], 1);
    let r = d
        .post("/api/search/lookup", r#"{"metric":"sys.cpu.user","tags":[{"key":"host","value":"web01"}],"limit":100}"#);
    assert_eq!(
        r.json()["results"],
        serde_json::json!([{"tsuid":"000001000001000001","metric":"sys.cpu.user","tags":{"host":"web01"}}])
    );
}

#[test]
fn lookup_errors_are_opentsdbs() {
    // spec: query §6.5
    let d = Daemon::start();
    write_lines(&d, "put m 1356998400 1 host=web01\n");
    let r = d.http("GET", "/api/search/lookup", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (400, r#"{"error":{"code":400,"message":"Missing parameter <code>m</code>"}}"#.to_string())
    );
    // 2.4's SearchRpc reads the body when there is one, else the query string, whatever the method.
    let r = d.post("/api/search/lookup", "");
    assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some("Missing parameter <code>m</code>")));
    let r = d.post("/api/search/lookup?m=m", "");
    assert_eq!((r.status, r.json()["totalResults"].as_i64()), (200, Some(1)), "{}", r.text());
    // The metric `*` is every metric; a body without a metric means `*`, without tags no `tags` key.
    let r = d.http("GET", "/api/search/lookup?m=*", &[], b"");
    assert_eq!((r.json()["metric"].as_str(), r.json()["totalResults"].as_i64()), (Some("*"), Some(1)));
    let r = d.post("/api/search/lookup", r#"{"limit":2}"#);
    assert!(
        r.text().starts_with(r#"{"type":"LOOKUP","metric":"*","limit":2,"startIndex":0,"totalResults":1,"time":"#),
        "{}",
        r.text()
    );
    // The time is a float of whole milliseconds.
    assert!(r.json()["time"].as_f64().is_some_and(|t| t.fract() == 0.0), "{}", r.text());
    let r = d.post("/api/search/lookup", r#"{"metric":"m","limit":"x"}"#);
    assert_eq!(
        r.text(),
        r#"{"error":{"code":400,"message":"Unable to parse the given JSON","details":"not a valid long value: x"}}"#
    );
    assert_eq!(d.post("/api/search/lookup", r#"{"metric":"m","limit":"1"}"#).json()["limit"], 1);
    let r = d.http("GET", "/api/search/lookup?m=m&limit=x", &[], b"");
    assert_eq!(r.text(), r#"{"error":{"code":400,"message":"Unable to convert 'limit' to a valid number"}}"#);
    // m= parse errors: 2.4's "Unable to parse query" with Tags.parseWithMetric's text as details.
    for (m, details) in [
        ("%7B%7D", "Missing metric and tags: {}"),
        ("m%7Bhost", "Missing '}' at the end of: m{host"),
        ("m%7Bhost%7D", "When parsing tag 'host': invalid tag: host"),
    ] {
        let r = d.http("GET", &format!("/api/search/lookup?m={m}"), &[], b"");
        let expected = format!(r#"{{"error":{{"code":400,"message":"Unable to parse query","details":"{details}"}}}}"#);
        assert_eq!((r.status, r.text()), (400, expected), "{m}");
    }
    let r = d.post("/api/search/lookup", r#"{"metric":null}"#);
    assert_eq!(
        r.text(),
        r#"{"error":{"code":400,"message":"Missing metric and tags. Please supply at least one value."}}"#
    );
    let r = d.http("GET", "/api/search/lookup?m=nosuch", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (404, r#"{"error":{"code":404,"message":"Unable to resolve one or more UIDs","details":"No such name for 'metrics': 'nosuch'"}}"#.to_string())
    );
    let r = d.http("GET", "/api/search/lookup?m=m%7Bhost=web99%7D", &[], b"");
    assert_eq!(r.json()["error"]["details"], "No such name for 'tagv': 'web99'");
    let r = d.http("PUT", "/api/search/lookup?m=m", &[], b"");
    assert_eq!(r.text(), r#"{"error":{"code":400,"message":"Unsupported method: PUT"}}"#);
    // The other search types need a search plugin: 2.4's SearchRpc checks the type and query, then refuses.
    for (path, message, details) in [
        ("/api/search/foo", "Invalid search query type supplied", Some("Unknown type: foo")),
        ("/api/search", "Invalid search query type supplied", Some("Type provided was null or empty")),
        ("/api/search/tsmeta", "Missing parameter <code>query</code>", None),
        ("/api/search/tsmeta?query=name:*&limit=x", "Unable to convert 'limit' to a valid number", None),
        (
            "/api/search/tsmeta?query=name:*",
            "Searching is not enabled",
            Some("Searching has not been enabled on this TSD"),
        ),
    ] {
        let r = d.http("GET", path, &[], b"");
        let details = details.map(|d| format!(r#","details":"{d}""#)).unwrap_or_default();
        let expected = format!(r#"{{"error":{{"code":400,"message":"{message}"{details}}}}}"#);
        assert_eq!((r.status, r.text()), (400, expected), "{path}");
    }
}
