//! `/q`, OpenTSDB's graph endpoint, against the real daemon (spec: query §6.17, §0.1): `ascii` and `json`
//! compared with `/api/query` on the same data, `png` decoded, the graph form's errors, the redirect to the UI.
use rtsd_compat_tests::{binary, Daemon, Response};
use serde_json::Value;

const T: i64 = 1356998400;

fn get(d: &Daemon, path: &str) -> Response {
    d.http("GET", path, &[], b"")
}

/// Two hosts in one data centre, points at T+0, 10, 30, 70, 100: the queries ask for [T+5, T+70], so the scan
/// window's hour row holds a point before and one after.
fn data() -> Daemon {
    let d = Daemon::start();
    let mut lines = String::new();
    for (dt, a, b) in [(0, "40", "37.5"), (10, "50", "38"), (30, "70", "39"), (70, "80", "41.25"), (100, "90", "42")] {
        lines.push_str(&format!("put sys.cpu.user {} {a} host=web01 dc=lga\n", T + dt));
        lines.push_str(&format!("put sys.cpu.user {} {b} host=web02 dc=lga\n", T + dt));
    }
    d.put_lines(&lines);
    d
}

/// (metric, seconds, value, value is a double, tags sorted) of each point.
type Point = (String, i64, f64, bool, Vec<String>);

/// The points of an `ascii` answer, in order.
fn ascii_points(text: &str) -> Vec<Point> {
    text.lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            let mut tags: Vec<String> = parts[3..].iter().map(|s| s.to_string()).collect();
            tags.sort();
            let value = parts[2];
            (parts[0].to_string(), parts[1].parse().unwrap(), value.parse().unwrap(), value.contains(['.', 'E']), tags)
        })
        .collect()
}

/// The points of an `/api/query` answer, in its order (NaN and null left out, as `/q` leaves them out).
fn api_points(answer: &Value) -> Vec<Point> {
    let mut out = Vec::new();
    for group in answer.as_array().unwrap() {
        let metric = group["metric"].as_str().unwrap().to_string();
        let mut tags: Vec<String> =
            group["tags"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap())).collect();
        tags.sort();
        let mut dps: Vec<(i64, &Value)> =
            group["dps"].as_object().unwrap().iter().map(|(k, v)| (k.parse().unwrap(), v)).collect();
        dps.sort_by_key(|(ts, _)| *ts);
        for (ts, v) in dps {
            if let Some(f) = v.as_f64() {
                out.push((metric.clone(), ts, f, v.is_f64(), tags.clone()));
            }
        }
    }
    out
}

/// `/q?<query>&ascii` has exactly `/api/query?<query>`'s points, values and tags.
fn assert_ascii_is_api_query(d: &Daemon, query: &str) -> String {
    let api = get(d, &format!("/api/query?{query}"));
    assert_eq!(api.status, 200, "{}", api.text());
    let q = get(d, &format!("/q?{query}&ascii"));
    assert_eq!(q.status, 200, "{}", q.text());
    assert_eq!(q.header("Content-Type"), Some("text/plain"));
    let expected = api_points(&api.json());
    assert!(!expected.is_empty(), "{query}: the comparison needs points");
    assert_eq!(ascii_points(&q.text()), expected, "{query}");
    q.text()
}

#[test]
fn ascii_prints_one_line_per_point_as_api_query_answers() {
    // spec: query §6.17 (`metric seconds value tagk=tagv...`, tags in the result's HashMap order)
    let d = data();
    let start = format!("start={}&end={}", T + 5, T + 70);
    let text = assert_ascii_is_api_query(&d, &format!("{start}&m=sum:sys.cpu.user%7Bhost=*%7D"));
    assert_eq!(
        text,
        format!(
            "sys.cpu.user {t1} 50 host=web01 dc=lga\n\
             sys.cpu.user {t3} 70 host=web01 dc=lga\nsys.cpu.user {t7} 80 host=web01 dc=lga\n\
             sys.cpu.user {t1} 38 host=web02 dc=lga\n\
             sys.cpu.user {t3} 39.0 host=web02 dc=lga\nsys.cpu.user {t7} 41.25 host=web02 dc=lga\n",
            t1 = T + 10,
            t3 = T + 30,
            t7 = T + 70
        )
    );
    // Aggregation across hosts (interpolated doubles), downsampling, rates, several m= in order.
    assert_ascii_is_api_query(&d, &format!("{start}&m=sum:sys.cpu.user"));
    assert_ascii_is_api_query(&d, &format!("{start}&m=avg:1m-avg:sys.cpu.user&m=max:sys.cpu.user%7Bhost=web02%7D"));
    assert_ascii_is_api_query(&d, &format!("{start}&m=sum:rate:sys.cpu.user%7Bhost=web01%7D"));
    assert_ascii_is_api_query(&d, &format!("{start}&m=zimsum:30s-sum-zero:sys.cpu.user"));
    // Fill policies: NaN (left out, as /api/query's "NaN" strings are not numbers) and null.
    assert_ascii_is_api_query(&d, &format!("{start}&m=zimsum:10s-sum-nan:sys.cpu.user"));
    assert_ascii_is_api_query(&d, &format!("{start}&m=zimsum:10s-sum-null:sys.cpu.user%7Bhost=web01%7D"));
    // Nothing matches: an empty answer.
    let r = get(&d, &format!("/q?{start}&m=sum:sys.cpu.user%7Bhost=db*%7D&ascii"));
    assert_eq!((r.status, r.text()), (200, String::new()));
    // Absolute times over an hour old: cacheable for a day (GraphHandler.computeMaxAge).
    let r = get(&d, &format!("/q?{start}&m=sum:sys.cpu.user&ascii"));
    assert_eq!(r.header("Cache-Control"), Some("max-age=86400"));
    let r = get(&d, &format!("/q?start={T}&end=4102444800&m=sum:sys.cpu.user&ascii"));
    assert_eq!(r.header("Cache-Control"), Some("max-age=0"), "the end is in the future");
}

#[test]
fn json_summarises_what_the_graph_plots() {
    // spec: query §6.17: {"plotted":N,"points":N,"etags":[[...] per m=],"timing":MS}
    let d = data();
    let start = format!("start={}&end={}", T + 5, T + 70);
    let query = format!("{start}&m=sum:sys.cpu.user%7Bhost=*%7D&m=sum:sys.cpu.user%7Bdc=lga%7D");
    let api = get(&d, &format!("/api/query?{query}")).json();
    let r = get(&d, &format!("/q?{query}&json"));
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("application/json; charset=UTF-8")));
    let body = r.json();
    let plotted = api_points(&api).len() as u64;
    assert_eq!(plotted, 9, "3 points of each host, 3 of their sum");
    assert_eq!(body["plotted"], plotted);
    // Stored points read: both series' 5 points (the whole hour row), once per m=.
    assert_eq!(body["points"], 20);
    assert_eq!(body["etags"], serde_json::json!([[], ["host"]]));
    assert!(body["timing"].is_u64(), "{body}");
    let text = r.text();
    assert!(text.starts_with(r#"{"plotted":9,"points":20,"etags":[[],["host"]],"timing":"#), "{text}");
}

/// Width, height and RGB bytes of a PNG answer.
fn decode_png(r: &Response) -> (u32, u32, Vec<u8>) {
    let reason = r.text().split("<blockquote>").nth(2).map(str::to_string).unwrap_or_default();
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("image/png")), "{reason}");
    let mut reader = png::Decoder::new(&r.body[..]).read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

#[test]
fn png_is_a_graph_of_the_requested_size_that_changes_with_the_data() {
    // spec: query §6.17 (`wxh`, default 1024x768)
    let d = data();
    let start = format!("start={}&end={}", T + 5, T + 70);
    let path = format!("/q?{start}&m=sum:sys.cpu.user%7Bhost=*%7D&wxh=640x480&png");
    let (w, h, before) = decode_png(&get(&d, &path));
    assert_eq!((w, h), (640, 480));
    assert_eq!(before.len(), 640 * 480 * 3);
    // Same query, same picture.
    assert_eq!(decode_png(&get(&d, &path)).2, before);
    // A changed value redraws the line.
    d.put_lines(&format!("put sys.cpu.user {} 5 host=web01 dc=lga\n", T + 30));
    let (_, _, after) = decode_png(&get(&d, &path));
    assert_ne!(after, before);

    let (w, h, _) = decode_png(&get(&d, &format!("/q?{start}&m=sum:sys.cpu.user&png")));
    assert_eq!((w, h), (1024, 768));
    // Everything the graph form sends, and an old dashboard's o= with a right-hand axis.
    let all = format!(
        "/q?{start}&m=sum:sys.cpu.user%7Bhost=web01%7D&o=&m=sum:sys.cpu.user%7Bhost=web02%7D&o=axis+x1y2&\
         wxh=300x200&yrange=%5B0:100%5D&y2range=%5B0:%5D&ylabel=percent&y2label=other&title=CPU+use&key=out+left+box&\
         ylog&yformat=%25s%25c&xformat=%25H:%25M&smooth=csplines&style=points&bgcolor=x000000&fgcolor=xFFFFFF&\
         tz=America/New_York&png"
    );
    let (w, h, pixels) = decode_png(&get(&d, &all));
    assert_eq!((w, h), (300, 200));
    assert_eq!(&pixels[..3], &[0, 0, 0], "bgcolor");
    // No data: still a picture ("No data"), as Gnuplot draws one.
    let (w, h, _) = decode_png(&get(&d, &format!("/q?{start}&m=sum:sys.cpu.user%7Bhost=db*%7D&wxh=200x100&png")));
    assert_eq!((w, h), (200, 100));
}

/// A non-API error: status 400 and `{"err":"..."}` with `json`.
fn assert_err(d: &Daemon, path: &str, message: &str) {
    let r = get(d, &format!("{path}&json"));
    assert_eq!((r.status, r.json()), (400, serde_json::json!({ "err": message })), "{path}");
}

#[test]
fn errors_are_opentsdbs_non_api_errors() {
    // spec: query §0.1 (API version 0 errors), §6.17 (GraphHandler's texts)
    let d = data();
    let m = format!("start={T}&end={}&m=sum:sys.cpu.user", T + 70);
    assert_err(&d, "/q?m=sum:sys.cpu.user", "Missing parameter <code>start</code>");
    assert_err(&d, &format!("/q?start={T}&m=sum:nosuch.metric"), "No such name for 'metrics': 'nosuch.metric'");
    assert_err(&d, &format!("/q?start={T}&m=nosuch:sys.cpu.user"), "No such aggregation function: nosuch");
    assert_err(&d, &format!("/q?{m}&o=&o="), "2 `o' parameters, but 1 `m' parameters.");
    assert_err(&d, &format!("/q?{m}&wxh=50x50"), "Parameter wxh too short: 50x50");
    assert_err(
        &d,
        &format!("/q?{m}&wxh=1000x50"),
        "Invalid wxh parameter: 1000x50, height smaller than 100 in 1000x50",
    );
    assert_err(&d, &format!("/q?{m}&wxh=big"), "'wxh' was invalid. Must satisfy the pattern ^\\d+x\\d+$");
    assert_err(&d, &format!("/q?{m}&yrange=0-10"), "'yrange' was invalid. Must be in the format [min:max].");
    assert_err(&d, &format!("/q?{m}&ylabel=%60id%60"), "Parameter ylabel contained a back-tick. That's a no-no.");
    assert_err(&d, &format!("/q?{m}&title=%21%21"), "'title' was invalid. Must satisfy the pattern [a-zA-z0-9 \\-_]");
    assert_err(&d, &format!("/q?{m}&bgcolor=red"), "'bgcolor' was invalid. Must be a hex value e.g. 'xFFFFFF'");
    assert_err(&d, &format!("/q?{m}&smooth=wobbly"), "'smooth' was invalid. Must satisfy the pattern unique|frequency|fnormal|cumulative|cnormal|bins|csplines|acsplines|mcsplines|bezier|sbezier|unwrap|zsort");
    assert_err(
        &d,
        &format!("/q?{m}&style=bars"),
        "'style' was invalid. Must satisfy the pattern (linespoint|points|circles|dots)",
    );
    let r = d.http("PUT", &format!("/q?{m}&json"), &[], b"");
    assert_eq!((r.status, r.text()), (400, r#"{"err":"Method not allowed"}"#.to_string()));
    // Without `json`: OpenTSDB's HTML error page, the message escaped except OpenTSDB's own <code> tags.
    let r = get(&d, "/q?m=sum:sys.cpu.user&png");
    assert_eq!((r.status, r.header("Content-Type")), (400, Some("text/html; charset=UTF-8")));
    assert!(r.text().contains("The reason provided was:<blockquote>Missing parameter <code>start</code></blockquote>"));
    let r = get(&d, &format!("/q?start={T}&m=sum:%3Cscript%3E&png"));
    assert!(r.text().contains("No such name for 'metrics': '&lt;script&gt;'"), "{}", r.text());
}

#[test]
fn without_an_output_q_sends_the_browser_to_the_ui() {
    // spec: query §6.17 (redirect to `/#<query>`), §0.1 (non-API 404s)
    let d = Daemon::start();
    let r = get(&d, "/q?start=1h-ago&m=sum:sys.cpu.user%7Bhost=*%7D");
    let location = "/#start=1h-ago&m=sum:sys.cpu.user%7Bhost=*%7D";
    assert_eq!((r.status, r.header("Location")), (200, Some(location)));
    assert_eq!(
        r.text(),
        format!("<html></head><meta http-equiv=\"refresh\" content=\"0; url={location}\"></head></html>")
    );
    let r = get(&d, "/nosuch");
    assert_eq!((r.status, r.header("Content-Type")), (404, Some("text/html; charset=UTF-8")));
    assert!(r.text().contains("<h1>Page Not Found</h1>"));
    let r = get(&d, "/nosuch?json");
    assert_eq!((r.status, r.text()), (404, r#"{"err":"Page Not Found"}"#.to_string()));
}

#[test]
fn q_is_part_of_the_ui() {
    // spec: ingest §6 (`tsd.core.enable_ui`), query §0.1 (`tsd.mode=wo` drops the query routes)
    assert_eq!(binary(), std::path::Path::new(env!("CARGO_BIN_EXE_rtsd-compat")));
    for setting in [("tsd.core.enable_ui", "false"), ("tsd.mode", "wo")] {
        let d = Daemon::start_with(&[setting]);
        let r = get(&d, &format!("/q?start={T}&m=sum:sys.cpu.user&json"));
        assert_eq!((r.status, r.text()), (404, r#"{"err":"Page Not Found"}"#.to_string()), "{setting:?}");
    }
}
