//! The query side against the real daemon: the test vectors V1–V16 of the query spec (opentsdb-query.md §8), plus
//! the error catalogue (§1.4) and `/api/query/last` (§6.1).
//!
//! Every data set is written with telnet `put`s at the spec's timestamps (T = 1356998400) and read back over HTTP.
//! Bodies are compared byte for byte as the spec prints them (key order included); only where the spec says an
//! order is unspecified (a group's `tags`, lookup results) or a value varies (`time`) is parsed JSON compared, and
//! only the optional Java stack `trace` of an error envelope is cut out (§0.4).
//!
//! Where rtsd's answer differs from the spec the test still asserts the spec and is `#[ignore]`d with the reason.
use rtsd_compat_tests::{strip_trace, Daemon, Response};
use serde_json::{json, Value};

const T: i64 = 1356998400;

/// `put sys.cpu.user <T+dt> <value> host=<host>` lines.
fn cpu(points: &[(&str, i64, &str)]) -> String {
    points.iter().map(|(host, dt, v)| format!("put sys.cpu.user {} {v} host={host}\n", T + dt)).collect()
}

/// Dataset D1 (spec §8): web01 @T=40, @T+10=50, @T+30=70; web02 @T+10=37, @T+20=48.
fn d1() -> Daemon {
    let d = Daemon::start();
    d.put_lines(&cpu(&[
        ("web01", 0, "40"),
        ("web01", 10, "50"),
        ("web01", 30, "70"),
        ("web02", 10, "37"),
        ("web02", 20, "48"),
    ]));
    d
}

/// `POST /api/query` with `Content-Type: application/json` (the convention of §8).
fn query(d: &Daemon, body: &str) -> Response {
    d.post_json("/api/query", body)
}

fn get(d: &Daemon, path: &str) -> Response {
    d.http("GET", path, &[], b"")
}

/// Asserts status and exact body bytes.
fn assert_body(r: &Response, status: u16, expected: &str, what: &str) {
    assert_eq!((r.status, r.text().as_str()), (status, expected), "{what}");
}

/// Asserts status and the body with an error envelope's optional `trace` cut out, byte for byte.
fn assert_error_body(r: &Response, status: u16, expected: &str) {
    assert_eq!((r.status, strip_trace(&r.text())), (status, expected.to_string()), "raw body {:?}", r.text());
}

/// Asserts status, `error.code` and `error.message` (for errors whose `details` the spec leaves open, e.g. the
/// Java `TSQuery(...)` dump of validation errors).
fn assert_error_message(r: &Response, status: u16, message: &str) {
    let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    assert_eq!(
        (r.status, &v["error"]["code"], v["error"]["message"].as_str()),
        (status, &json!(status), Some(message)),
        "body {:?}",
        r.text()
    );
}

/// The one-group aggregated answer over `sys.cpu.user` (tags `{}`, aggregateTags `["host"]`) with these dps.
fn aggregated(dps: &str) -> String {
    format!(r#"[{{"metric":"sys.cpu.user","tags":{{}},"aggregateTags":["host"],"dps":{{{dps}}}}}]"#)
}

/// The answer for the single series `sys.cpu.user{host=web01}` with these dps.
fn web01(dps: &str) -> String {
    format!(r#"[{{"metric":"sys.cpu.user","tags":{{"host":"web01"}},"aggregateTags":[],"dps":{{{dps}}}}}]"#)
}

/// `"<T+dt>":<value>` pairs joined with commas.
fn dps(points: &[(i64, &str)]) -> String {
    points.iter().map(|(dt, v)| format!(r#""{}":{v}"#, T + dt)).collect::<Vec<_>>().join(",")
}

// ---------------------------------------------------------------------------------------------------------------
// V1 – sum with linear interpolation (D1)

// spec: query §8 V1, §2.2, §2.4.
#[test]
fn v1_sum_interpolates_linearly() {
    let d = d1();
    let r =
        query(&d, r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":{"1356998400":40,"1356998410":87,"1356998420":108,"1356998430":70}}]"#,
        "V1 sum",
    );
}

/// V1 with another aggregator: the dps at T, T+10, T+20, T+30, all JSON integers.
fn v1_aggregator(agg: &str, values: [i64; 4]) {
    let d = d1();
    let body = format!(
        r#"{{"start":1356998400,"end":1356998460,"queries":[{{"aggregator":"{agg}","metric":"sys.cpu.user"}}]}}"#
    );
    let r = query(&d, &body);
    let expected = aggregated(&dps(&[
        (0, &values[0].to_string()),
        (10, &values[1].to_string()),
        (20, &values[2].to_string()),
        (30, &values[3].to_string()),
    ]));
    assert_body(&r, 200, &expected, &format!("V1 {agg}"));
}

macro_rules! v1_aggregators {
    ($($name:ident: $agg:literal => $values:expr;)*) => {$(
        // spec: query §8 V1 ("Same request with other aggregators"), §2.3, §2.4.
        #[test]
        fn $name() {
            v1_aggregator($agg, $values);
        }
    )*};
}

v1_aggregators! {
    v1_zimsum: "zimsum" => [40, 87, 48, 70];
    v1_min: "min" => [40, 37, 48, 70];
    v1_max: "max" => [40, 50, 60, 70];
    v1_avg: "avg" => [40, 43, 54, 70];
    v1_dev: "dev" => [0, 6, 6, 0];
    v1_count: "count" => [1, 2, 2, 1];
    v1_mimmin: "mimmin" => [40, 37, 48, 70];
    v1_mimmax: "mimmax" => [40, 50, 48, 70];
    v1_median: "median" => [40, 50, 60, 70];
    v1_mult: "mult" => [40, 1850, 2880, 70];
    v1_diff: "diff" => [0, -13, -12, 0];
    v1_squaresum: "squareSum" => [1600, 3869, 2304, 4900];
    v1_first: "first" => [40, 50, 0, 70];
    v1_last: "last" => [40, 37, 48, 70];
}

// ---------------------------------------------------------------------------------------------------------------
// V2 – pfsum

// spec: query §8 V2, §2.3 (pfsum: PREV interpolation).
#[test]
fn v2_pfsum_fills_with_the_previous_value() {
    let d = Daemon::start();
    d.put_lines(&cpu(&[("web01", 0, "40"), ("web01", 30, "70"), ("web02", 10, "37"), ("web02", 20, "48")]));
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"pfsum","metric":"sys.cpu.user"}]}"#,
    );
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":{"1356998400":40,"1356998410":77,"1356998420":88,"1356998430":70}}]"#,
        "V2",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V3 – group-by (D1)

const V3: &str = r#"[{"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1356998400":40,"1356998410":50,"1356998430":70}},{"metric":"sys.cpu.user","tags":{"host":"web02"},"aggregateTags":[],"dps":{"1356998410":37,"1356998420":48}}]"#;

// spec: query §8 V3, §5.3 (`*` → group-by wildcard).
#[test]
fn v3_group_by_tags_map() {
    let d = d1();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"*"}}]}"#,
    );
    assert_body(&r, 200, V3, "V3 tags");
}

// spec: query §8 V3 (equivalent filters form).
#[test]
fn v3_group_by_filter() {
    let d = d1();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"wildcard","tagk":"host","filter":"*","groupBy":true}]}]}"#,
    );
    assert_body(&r, 200, V3, "V3 filters");
}

// spec: query §8 V3 (GET form), §7.3 (curl scripts percent-encode the braces).
#[test]
fn v3_group_by_get() {
    let d = d1();
    let r = get(&d, "/api/query?start=1356998400&end=1356998460&m=sum:sys.cpu.user%7Bhost=*%7D");
    assert_body(&r, 200, V3, "V3 GET");
}

// ---------------------------------------------------------------------------------------------------------------
// V4 – output window + arrays + ms

// spec: query §8 V4, §1.5 step 7 (output clipped to [start,end], inclusive), §1.6 (arrays, msResolution).
#[test]
fn v4_window_arrays_and_ms() {
    let d = d1();
    let r = d.post_json(
        "/api/query?arrays",
        r#"{"start":1356998410,"end":1356998420,"msResolution":true,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#,
    );
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":[[1356998410000,87],[1356998420000,108]]}]"#,
        "V4",
    );
}

// spec: query §0.2, §1.1 (GET flags are presence-based: `ms=false` and `arrays=false` still switch them on).
#[test]
fn get_flags_are_presence_based() {
    let d = d1();
    let r = get(&d, "/api/query?start=1356998410&end=1356998420&m=sum:sys.cpu.user&ms=false&arrays=false");
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":[[1356998410000,87],[1356998420000,108]]}]"#,
        "presence flags",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V5 – docs interpolation table

// spec: query §8 V5, §2.2 (series before their first / after their last point are skipped).
#[test]
fn v5_docs_interpolation_table() {
    let d = Daemon::start();
    d.put_lines(&cpu(&[
        ("web01", 10, "5"),
        ("web01", 30, "15"),
        ("web01", 50, "5"),
        ("web02", 0, "10"),
        ("web02", 20, "20"),
        ("web02", 40, "10"),
        ("web02", 60, "20"),
    ]));
    let r =
        query(&d, r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_body(
        &r,
        200,
        &aggregated(
            r#""1356998400":10,"1356998410":20,"1356998420":30,"1356998430":30,"1356998440":20,"1356998450":20,"1356998460":20"#,
        ),
        "V5",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V6 – integer LERP truncation

fn v6_daemon(float: bool) -> Daemon {
    let d = Daemon::start();
    let v = |i: i64| if float { format!("{i}.0") } else { i.to_string() };
    let mut lines = String::new();
    for (dt, value) in [(30, 1), (60, 2), (90, 3)] {
        lines.push_str(&format!("put sys.cpu.user {} {} host=web01\n", T + dt, v(value)));
    }
    for (dt, value) in [(45, 300), (75, 299), (105, 298)] {
        lines.push_str(&format!("put sys.cpu.user {} {} host=web02\n", T + dt, v(value)));
    }
    d.put_lines(&lines);
    d
}

fn v6_query(d: &Daemon, agg: &str) -> Response {
    query(
        d,
        &format!(
            r#"{{"start":1356998400,"end":1357002000,"queries":[{{"aggregator":"{agg}","metric":"sys.cpu.user"}}]}}"#
        ),
    )
}

// spec: query §8 V6, §2.2 (LERP in Java long arithmetic: multiply, then divide, truncating).
#[test]
fn v6_integer_lerp_truncates() {
    let d = v6_daemon(false);
    assert_body(
        &v6_query(&d, "sum"),
        200,
        &aggregated(
            r#""1356998430":1,"1356998445":301,"1356998460":302,"1356998475":301,"1356998490":302,"1356998505":298"#,
        ),
        "V6 ints",
    );
}

// spec: query §8 V6 (same data as floats: double LERP, Java double formatting §0.6).
#[test]
fn v6_float_lerp() {
    let d = v6_daemon(true);
    assert_body(
        &v6_query(&d, "sum"),
        200,
        &aggregated(
            r#""1356998430":1.0,"1356998445":301.5,"1356998460":301.5,"1356998475":301.5,"1356998490":301.5,"1356998505":298.0"#,
        ),
        "V6 floats",
    );
}

// spec: query §8 V6 (zimsum and count over the integer data).
#[test]
fn v6_zimsum_and_count() {
    let d = v6_daemon(false);
    let times = [30, 45, 60, 75, 90, 105];
    for (agg, values) in [("zimsum", ["1", "300", "2", "299", "3", "298"]), ("count", ["1", "2", "2", "2", "2", "1"])] {
        let points: Vec<(i64, &str)> = times.iter().copied().zip(values).collect();
        assert_body(&v6_query(&d, agg), 200, &aggregated(&dps(&points)), &format!("V6 {agg}"));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// V7 – downsample then sum

// spec: query §8 V7, §3.2 (bucket values are doubles), §3.5 (downsample before aggregation).
#[test]
fn v7_downsample_then_sum() {
    let d = Daemon::start();
    let mut lines = String::new();
    for (i, (a, b)) in [(5, 10), (5, 5), (10, 20), (15, 15), (20, 10), (5, 0), (1, 5)].iter().enumerate() {
        let dt = 10 * i as i64;
        lines.push_str(&cpu(&[("web01", dt, &a.to_string()), ("web02", dt, &b.to_string())]));
    }
    d.put_lines(&lines);
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"30s-sum"}]}"#,
    );
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{},"aggregateTags":["host"],"dps":{"1356998400":55.0,"1356998430":65.0,"1356998460":6.0}}]"#,
        "V7",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V8 – fill policies

fn v8(downsample: &str) -> Response {
    let d = Daemon::start();
    d.put_lines(&cpu(&[
        ("web01", 30, "15"),
        ("web01", 50, "5"),
        ("web02", 0, "10"),
        ("web02", 20, "20"),
        ("web02", 60, "20"),
    ]));
    query(
        &d,
        &format!(
            r#"{{"start":1356998400,"end":1356998460,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user","downsample":"{downsample}"}}]}}"#
        ),
    )
}

// spec: query §8 V8 (`nan` → the string "NaN"), §3.4, §0.6.
#[test]
fn v8_fill_nan() {
    assert_body(
        &v8("10s-sum-nan"),
        200,
        &aggregated(
            r#""1356998400":10.0,"1356998410":"NaN","1356998420":20.0,"1356998430":15.0,"1356998440":"NaN","1356998450":5.0,"1356998460":20.0"#,
        ),
        "V8 nan",
    );
}

// spec: query §8 V8 (`null` → JSON null).
#[test]
fn v8_fill_null() {
    assert_body(
        &v8("10s-sum-null"),
        200,
        &aggregated(
            r#""1356998400":10.0,"1356998410":null,"1356998420":20.0,"1356998430":15.0,"1356998440":null,"1356998450":5.0,"1356998460":20.0"#,
        ),
        "V8 null",
    );
}

// spec: query §8 V8 (`zero` → 0.0).
#[test]
fn v8_fill_zero() {
    assert_body(
        &v8("10s-sum-zero"),
        200,
        &aggregated(
            r#""1356998400":10.0,"1356998410":0.0,"1356998420":20.0,"1356998430":15.0,"1356998440":0.0,"1356998450":5.0,"1356998460":20.0"#,
        ),
        "V8 zero",
    );
}

// spec: query §8 V8 (no fill: only non-empty buckets, then interpolation across series).
#[test]
fn v8_no_fill_interpolates() {
    assert_body(
        &v8("10s-sum"),
        200,
        &aggregated(r#""1356998400":10.0,"1356998420":20.0,"1356998430":35.0,"1356998450":25.0,"1356998460":20.0"#),
        "V8 none",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V9 – rate and counters

/// web01 with `values` at T+30, T+60, T+90[, T+120].
fn v9_daemon(values: &[&str]) -> Daemon {
    let d = Daemon::start();
    let points: Vec<(&str, i64, &str)> =
        values.iter().enumerate().map(|(i, v)| ("web01", 30 * (i as i64 + 1), *v)).collect();
    d.put_lines(&cpu(&points));
    d
}

fn v9_post(d: &Daemon, rate: &str) -> Response {
    query(
        d,
        &format!(
            r#"{{"start":1356998400,"end":1357041600,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user","rate":true{rate}}}]}}"#
        ),
    )
}

// spec: query §8 V9 (first vector), §4.4 (counter wrap: counterMax − v0 + v1).
#[test]
fn v9_counter_max() {
    let d = v9_daemon(&["45", "75", "5"]);
    let r = v9_post(&d, r#","rateOptions":{"counter":true,"counterMax":100}"#);
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1356998460":1.0,"1356998490":1.0}}]"#,
        "V9 counterMax",
    );
}

// spec: query §8 V9 (resetValue: a rate above it becomes 0.0).
#[test]
fn v9_counter_reset_value() {
    let d = v9_daemon(&["45", "75", "25"]);
    let r = v9_post(&d, r#","rateOptions":{"counter":true,"counterMax":10000,"resetValue":35}"#);
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998490":0.0"#), "V9 resetValue");
}

// spec: query §8 V9 (dropResets: the reset point is dropped, the next rate starts from it).
#[test]
fn v9_counter_drop_resets() {
    let d = v9_daemon(&["45", "75", "25", "55"]);
    let r = v9_post(&d, r#","rateOptions":{"counter":true,"counterMax":10000,"resetValue":35,"dropResets":true}"#);
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998520":1.0"#), "V9 dropResets");
}

// spec: query §8 V9 (plain rate: negative rates allowed).
#[test]
fn v9_plain_rate_goes_negative() {
    let d = v9_daemon(&["45", "75", "25"]);
    let r = v9_post(&d, "");
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998490":-1.6666666666666667"#), "V9 plain rate");
}

// spec: query §8 V9 (GET form `rate{counter,100}`), §1.1 (rate options grammar).
#[test]
fn v9_get_counter_max() {
    let d = v9_daemon(&["45", "75", "5"]);
    let r =
        get(&d, "/api/query?start=1356998400&end=1357041600&m=sum:rate%7Bcounter,100%7D:sys.cpu.user%7Bhost=web01%7D");
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998490":1.0"#), "V9 GET rate{counter,100}");
}

// spec: query §8 V9 (GET form `rate{dropcounter,10000,35}` = counter + dropResets).
#[test]
fn v9_get_dropcounter() {
    let d = v9_daemon(&["45", "75", "25", "55"]);
    let r = get(
        &d,
        "/api/query?start=1356998400&end=1357041600&m=sum:rate%7Bdropcounter,10000,35%7D:sys.cpu.user%7Bhost=web01%7D",
    );
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998520":1.0"#), "V9 GET rate{dropcounter,10000,35}");
}

// spec: query §8 V9 (last bullet), §4.2 (the hour-aligned scan window supplies the point before `start`).
#[test]
fn v9_rate_uses_points_before_start() {
    let d = Daemon::start();
    d.put_lines(&cpu(&[
        ("web01", 30, "1"),
        ("web01", 60, "2"),
        ("web01", 90, "3"),
        ("web01", 120, "4"),
        ("web01", 150, "5"),
    ]));
    let r = query(
        &d,
        r#"{"start":1356998500,"end":1357041600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","rate":true}]}"#,
    );
    assert_body(&r, 200, &web01(r#""1356998520":0.03333333333333333,"1356998550":0.03333333333333333"#), "V9 in-hour");
}

// spec: query §4.4 table (counter with default options on a monotonic series).
#[test]
fn counter_defaults_on_a_monotonic_series() {
    let d = v9_daemon(&["30", "60", "90"]);
    let r = v9_post(&d, r#","rateOptions":{"counter":true}"#);
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998490":1.0"#), "§4.4 defaults");
}

// spec: query §4.4 table (wrap at the default counterMax, Long.MAX_VALUE, in integer arithmetic).
#[test]
fn counter_wraps_at_long_max() {
    let d = v9_daemon(&["9223372036854775752", "9223372036854775782", "5"]);
    let r = v9_post(&d, r#","rateOptions":{"counter":true}"#);
    assert_body(&r, 200, &web01(r#""1356998460":1.0,"1356998490":1.0"#), "§4.4 MAX wrap");
}

// ---------------------------------------------------------------------------------------------------------------
// V10 / V11 – downsample then rate; `0all`

/// web01 value i at T+30·i, i = 1..300.
fn v10_daemon() -> Daemon {
    let d = Daemon::start();
    let lines: String = (1..=300).map(|i| format!("put sys.cpu.user {} {i} host=web01\n", T + 30 * i)).collect();
    d.put_lines(&lines);
    d
}

// spec: query §8 V10, §1.5 step 5 (downsample, then rate).
#[test]
fn v10_downsample_then_rate() {
    let d = v10_daemon();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1357041600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web01"},"downsample":"1m-avg","rate":true}]}"#,
    );
    let mut points = vec![r#""1356998460":0.025"#.to_string()];
    for t in (1356998520..=1357007340).step_by(60) {
        points.push(format!(r#""{t}":0.03333333333333333"#));
    }
    points.push(r#""1357007400":0.025"#.to_string());
    assert_eq!(points.len(), 150);
    assert_body(&r, 200, &web01(&points.join(",")), "V10");
}

// spec: query §8 V11, §3.2 ("all": one bucket per series, end exclusive, stamped with the query start).
#[test]
fn v11_all_downsampling() {
    let d = v10_daemon();
    let r = query(
        &d,
        r#"{"start":1356998500,"end":1356998600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web01"},"downsample":"0all-sum"}]}"#,
    );
    assert_body(&r, 200, &web01(r#""1356998500":15.0"#), "V11 subset");
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1357041600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web01"},"downsample":"0all-sum"}]}"#,
    );
    assert_body(&r, 200, &web01(r#""1356998400":45150.0"#), "V11 whole range");
}

// ---------------------------------------------------------------------------------------------------------------
// V12 – calendar downsampling and fixed epoch alignment

fn v12_daemon() -> Daemon {
    let d = Daemon::start();
    d.put_lines(&cpu(&[
        ("web01", 5, "1"),
        ("web01", 15, "2"),
        ("web01", 25, "4"),
        ("web01", 35, "8"),
        ("web01", 45, "16"),
        ("web01", 55, "32"),
    ]));
    d
}

// spec: query §8 V12, §3.2 (calendar buckets in the query timezone).
#[test]
fn v12_calendar_day_in_denver() {
    let d = v12_daemon();
    let r = query(
        &d,
        r#"{"start":1356937200,"end":1356998460,"timezone":"America/Denver","queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"1dc-sum"}]}"#,
    );
    assert_body(&r, 200, &web01(r#""1356937200":63.0"#), "V12 1dc-sum");
}

// spec: query §8 V12 (bucket before the start is dropped: the group stays with empty dps), §3.3 (c).
#[test]
fn v12_calendar_bucket_before_start_is_dropped() {
    let d = v12_daemon();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"timezone":"America/Denver","queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"1dc-sum"}]}"#,
    );
    assert_body(&r, 200, &web01(""), "V12 bucket before start");
}

// spec: query §8 V12 (fixed `1000s-avg`: epoch-modulo buckets, the first one starting before T).
#[test]
fn v12_fixed_buckets_align_to_the_epoch() {
    let d = Daemon::start();
    d.put_lines(&cpu(&[
        ("web01", 0, "40"),
        ("web01", 2000, "50"),
        ("web01", 3600, "40"),
        ("web01", 3605, "50"),
        ("web01", 7200, "40"),
        ("web01", 9200, "50"),
    ]));
    let r = query(
        &d,
        r#"{"start":1356998000,"end":1357007000,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"1000s-avg"}]}"#,
    );
    assert_body(
        &r,
        200,
        &web01(r#""1356998000":40.0,"1357000000":50.0,"1357002000":45.0,"1357005000":40.0,"1357007000":50.0"#),
        "V12 1000s-avg",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V13 – tags / aggregateTags quirk

// spec: query §8 V13, §1.6 (a key present in only some series of a group, with one value, stays in `tags`).
#[test]
fn v13_tags_keep_keys_of_some_series() {
    let d = Daemon::start();
    d.put_lines(&format!("put sys.cpu.user {T} 1 host=web01 dc=lga\nput sys.cpu.user {T} 2 host=web02\n"));
    let r =
        query(&d, r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{"dc":"lga"},"aggregateTags":["host"],"dps":{"1356998400":3}}]"#,
        "V13",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V14 – filter semantics

/// S1 {host=web01}, S2 {host=web02}, S3 {dc=lga}, S4 {host=web01,dc=lga}, each @T=1.
fn v14_daemon() -> Daemon {
    let d = Daemon::start();
    d.put_lines(&format!(
        "put sys.cpu.user {T} 1 host=web01\nput sys.cpu.user {T} 1 host=web02\nput sys.cpu.user {T} 1 dc=lga\nput sys.cpu.user {T} 1 host=web01 dc=lga\n"
    ));
    d
}

/// POST a V14 sub-query (the part after `"metric":"sys.cpu.user"`).
fn v14_query(d: &Daemon, rest: &str) -> Response {
    query(
        d,
        &format!(
            r#"{{"start":1356998400,"end":1356998460,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user"{rest}}}]}}"#
        ),
    )
}

fn filter(kind: &str, value: &str) -> String {
    format!(r#","filters":[{{"type":"{kind}","tagk":"host","filter":"{value}","groupBy":false}}]"#)
}

/// Compares parsed JSON (the order of keys inside `tags` is not significant, spec §8 V14).
fn assert_json(r: &Response, expected: Value, what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.text());
    assert_eq!(r.json(), expected, "{what}: body {}", r.text());
}

// spec: query §8 V14, §5.2 (every filtered key must exist, even for not_literal_or: S3 is excluded).
#[test]
fn v14_not_literal_or_needs_the_key() {
    let d = v14_daemon();
    let r = v14_query(&d, &filter("not_literal_or", "web01"));
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{"host":"web02"},"aggregateTags":[],"dps":{"1356998400":1}}]"#,
        "V14 not_literal_or",
    );
}

// spec: query §8 V14 (explicitTags: S4 has an extra key).
#[test]
fn v14_literal_or_explicit_tags() {
    let d = v14_daemon();
    let r = v14_query(&d, &format!(r#"{},"explicitTags":true"#, filter("literal_or", "web01")));
    assert_body(
        &r,
        200,
        r#"[{"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1356998400":1}}]"#,
        "V14 explicitTags",
    );
}

// spec: query §8 V14 (without explicitTags: S1+S4 in one group; `dc` of S4 alone stays in tags).
#[test]
fn v14_literal_or_without_explicit_tags() {
    let d = v14_daemon();
    let r = v14_query(&d, &filter("literal_or", "web01"));
    assert_json(
        &r,
        json!([{"metric":"sys.cpu.user","tags":{"host":"web01","dc":"lga"},"aggregateTags":[],"dps":{"1356998400":2}}]),
        "V14 literal_or",
    );
}

/// S1, S2 and S4 in one group: `host` differs, `dc` (S4 only) stays in tags (§1.6), dps 3.
fn s1_s2_s4() -> Value {
    json!([{"metric":"sys.cpu.user","tags":{"dc":"lga"},"aggregateTags":["host"],"dps":{"1356998400":3}}])
}

// spec: query §8 V14 (regexp is an unanchored find).
#[test]
fn v14_regexp_is_unanchored() {
    let d = v14_daemon();
    assert_json(&v14_query(&d, &filter("regexp", "eb0")), s1_s2_s4(), "V14 regexp eb0");
}

// spec: query §8 V14 (wildcard is case-sensitive, iwildcard is not).
#[test]
fn v14_wildcards() {
    let d = v14_daemon();
    assert_json(&v14_query(&d, &filter("wildcard", "web*")), s1_s2_s4(), "V14 wildcard web*");
    assert_json(&v14_query(&d, &filter("iwildcard", "WEB*")), s1_s2_s4(), "V14 iwildcard WEB*");
    assert_body(&v14_query(&d, &filter("wildcard", "WEB*")), 200, "[]", "V14 wildcard WEB*");
}

// spec: query §8 V14 (legacy `tags` with `a|b` → group-by literal_or: two groups).
#[test]
fn v14_legacy_tags_pipe_groups() {
    let d = v14_daemon();
    let r = v14_query(&d, r#","tags":{"host":"web01|web02"}"#);
    assert_json(
        &r,
        json!([
            {"metric":"sys.cpu.user","tags":{"host":"web01","dc":"lga"},"aggregateTags":[],"dps":{"1356998400":2}},
            {"metric":"sys.cpu.user","tags":{"host":"web02"},"aggregateTags":[],"dps":{"1356998400":1}}
        ]),
        "V14 legacy tags",
    );
}

// spec: query §5.2: two case-sensitive literal_or filters on one key are one alternation (2.4.1's findGroupBys
// merges their values into the row-key regex), in JSON filters, in one brace group and across the two; a
// literal_or with another kind of filter on the same key is still AND-ed.
#[test]
fn literal_or_filters_on_one_key_are_ored() {
    let d = v14_daemon();
    let two = r#","filters":[{"type":"literal_or","tagk":"host","filter":"web01"},{"type":"literal_or","tagk":"host","filter":"web02"}]"#;
    assert_json(&v14_query(&d, two), s1_s2_s4(), "two literal_or filters");
    let get = |m: &str| get(&d, &format!("/api/query?start=1356998400&end=1356998460&m=sum:sys.cpu.user{m}"));
    let by_host = json!([
        {"metric":"sys.cpu.user","tags":{"host":"web01","dc":"lga"},"aggregateTags":[],"dps":{"1356998400":2}},
        {"metric":"sys.cpu.user","tags":{"host":"web02"},"aggregateTags":[],"dps":{"1356998400":1}}
    ]);
    assert_json(&get("%7Bhost=web01,host=web02%7D"), by_host.clone(), "one brace group");
    assert_json(&get("%7Bhost=web01%7D%7Bhost=web02%7D"), by_host, "group-by and non-group-by");
    assert_json(&get("%7B%7D%7Bhost=web01,host=web02%7D"), s1_s2_s4(), "second brace group");
    // literal_or AND regexp on host: only web01's series (S1, S4) match both.
    let mixed = r#","filters":[{"type":"literal_or","tagk":"host","filter":"web01|web02"},{"type":"regexp","tagk":"host","filter":"01$"}]"#;
    assert_json(
        &v14_query(&d, mixed),
        json!([{"metric":"sys.cpu.user","tags":{"host":"web01","dc":"lga"},"aggregateTags":[],"dps":{"1356998400":2}}]),
        "literal_or and regexp",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// V15 – empty and error responses

// spec: query §8 V15 (known metric, nothing in range → 200 []), §1.4.
#[test]
fn v15_no_data_in_range_is_an_empty_array() {
    let d = d1();
    let r =
        query(&d, r#"{"start":1357084800,"end":1357088400,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_body(&r, 200, "[]", "V15 empty");
}

// spec: query §8 V15 (unknown metric: exact envelope, details == message).
#[test]
fn v15_unknown_metric() {
    let d = d1();
    let r =
        query(&d, r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"nosuch.metric"}]}"#);
    assert_error_body(
        &r,
        400,
        r#"{"error":{"code":400,"message":"No such name for 'metrics': 'nosuch.metric'","details":"No such name for 'metrics': 'nosuch.metric'"}}"#,
    );
}

// spec: query §8 V15 (unknown tag key in a filter).
#[test]
fn v15_unknown_tagk() {
    let d = d1();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"literal_or","tagk":"nosuchkey","filter":"web01","groupBy":false}]}]}"#,
    );
    assert_error_message(&r, 400, "No such name for 'tagk': 'nosuchkey'");
}

// spec: query §8 V15 (unknown literal tag value).
#[test]
fn v15_unknown_tagv() {
    let d = d1();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web99"}}]}"#,
    );
    assert_error_message(&r, 400, "No such name for 'tagv': 'web99'");
}

// spec: query §8 V15 (unknown aggregator).
#[test]
fn v15_unknown_aggregator() {
    let d = d1();
    let r =
        query(&d, r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"foo","metric":"sys.cpu.user"}]}"#);
    assert_error_message(&r, 400, "No such aggregation function: foo");
}

// spec: query §8 V15 (unknown fill policy).
#[test]
fn v15_unknown_fill_policy() {
    let d = d1();
    let r = query(
        &d,
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"10m-avg-badbadbad"}]}"#,
    );
    assert_error_message(&r, 400, "Unrecognized fill policy: badbadbad");
}

// spec: query §8 V15 (POST without start).
#[test]
fn v15_post_missing_start() {
    let d = d1();
    let r = query(&d, r#"{"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_error_message(&r, 400, "Missing start time");
}

// spec: query §8 V15 (GET without start), §0.2 (the message literally contains `<code>` tags).
#[test]
fn v15_get_missing_start() {
    let d = d1();
    let r = get(&d, "/api/query?m=sum:sys.cpu.user");
    assert_error_message(&r, 400, "Missing parameter <code>start</code>");
}

// spec: query §8 V15 (GET without m/tsuid).
#[test]
fn v15_get_missing_sub_queries() {
    let d = d1();
    let r = get(&d, "/api/query?start=1356998400&end=1356998460");
    assert_error_message(&r, 400, "Missing sub queries");
}

// spec: query §8 V15 (end ≤ start; the times are printed in ms, §1.3).
#[test]
fn v15_end_before_start() {
    let d = d1();
    let r =
        query(&d, r#"{"start":1356998460,"end":1356998400,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_error_message(&r, 400, "End time [1356998400000] must be greater than the start time [1356998460000]");
    let r =
        query(&d, r#"{"start":1356998400,"end":1356998400,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#);
    assert_error_message(&r, 400, "End time [1356998400000] must be greater than the start time [1356998400000]");
}

// spec: query §8 V15 (PUT → 405, exact envelope), §0.4.
#[test]
fn v15_put_is_not_allowed() {
    let d = d1();
    let r = d.http(
        "PUT",
        "/api/query",
        &[("Content-Type", "application/json")],
        br#"{"start":1356998400,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#,
    );
    assert_error_body(
        &r,
        405,
        r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [PUT] is not permitted for this endpoint"}}"#,
    );
}

// spec: query §8 V15 (unknown /api endpoint → 404, no details), §0.1.
#[test]
fn v15_unknown_endpoint() {
    let d = Daemon::start();
    let r = get(&d, "/api/nosuch");
    assert_error_body(&r, 404, r#"{"error":{"code":404,"message":"Endpoint not found"}}"#);
}

// ---------------------------------------------------------------------------------------------------------------
// V16 – other endpoints

fn v16_suggest_daemon() -> Daemon {
    let d = Daemon::start();
    d.put_lines(&format!(
        "put sys.cpu.user {T} 1 host=web01\nput sys.cpu.system {T} 1 host=web01\nput sys.mem {T} 1 host=web01\nput web.hits {T} 1 host=web01\n"
    ));
    d
}

// spec: query §8 V16 (suggest: prefix match, ascending byte order), §6.4.
#[test]
fn v16_suggest_metrics() {
    let d = v16_suggest_daemon();
    let r = get(&d, "/api/suggest?type=metrics&q=sys");
    assert_body(&r, 200, r#"["sys.cpu.system","sys.cpu.user","sys.mem"]"#, "V16 suggest");
}

// spec: query §8 V16 (invalid type; no space after the colon), §6.4.
#[test]
fn v16_suggest_invalid_type() {
    let d = v16_suggest_daemon();
    let r = get(&d, "/api/suggest?type=foo&q=sys");
    assert_error_message(&r, 400, "Invalid 'type' parameter:foo");
}

// spec: query §8 V16 (uid/assign: new name → 200; existing name → 400 with the same map shape), §6.6.
#[test]
fn v16_uid_assign() {
    let d = Daemon::start();
    let r = get(&d, "/api/uid/assign?metric=sys.cpu.0");
    assert_body(&r, 200, r#"{"metric":{"sys.cpu.0":"000001"}}"#, "V16 uid/assign new");
    let r = get(&d, "/api/uid/assign?metric=sys.cpu.1");
    assert_body(&r, 200, r#"{"metric":{"sys.cpu.1":"000002"}}"#, "V16 uid/assign second");
    let r = get(&d, "/api/uid/assign?metric=sys.cpu.1");
    assert_body(
        &r,
        400,
        r#"{"metric":{},"metric_errors":{"sys.cpu.1":"Name already exists with UID: 000002"}}"#,
        "V16 uid/assign existing",
    );
}

// spec: query §8 V16 (search/lookup with S1/S2 of V14; `time` varies, results' key order unspecified), §6.5.
#[test]
fn v16_search_lookup() {
    let d = Daemon::start();
    d.put_lines(&format!("put sys.cpu.user {T} 1 host=web01\nput sys.cpu.user {T} 1 host=web02\n"));
    let r = get(&d, "/api/search/lookup?m=sys.cpu.user%7Bhost=*%7D");
    assert_eq!(r.status, 200, "{}", r.text());
    let mut v = r.json();
    let time = v.as_object_mut().and_then(|o| o.remove("time"));
    assert!(time.as_ref().is_some_and(Value::is_number), "`time` must be a number: {}", r.text());
    assert_eq!(
        v,
        json!({"type":"LOOKUP","metric":"sys.cpu.user","tags":[{"key":"host","value":"*"}],"limit":25,"startIndex":0,"totalResults":2,
               "results":[{"tsuid":"000001000001000001","metric":"sys.cpu.user","tags":{"host":"web01"}},
                          {"tsuid":"000001000001000002","metric":"sys.cpu.user","tags":{"host":"web02"}}]}),
        "V16 lookup: {}",
        r.text()
    );
    // The members the spec prints before `time` come in that order.
    assert!(
        r.text().starts_with(
            r#"{"type":"LOOKUP","metric":"sys.cpu.user","tags":[{"key":"host","value":"*"}],"limit":25,"startIndex":0,"totalResults":2,"time":"#
        ),
        "V16 lookup key order: {}",
        r.text()
    );
}

/// D1 shifted so its points lie in the hour before the current one (within `back_scan=24`); returns the daemon
/// and web01's newest point in ms.
fn shifted_d1() -> (Daemon, i64) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let base = now - now % 3600 - 3600;
    let d = Daemon::start();
    d.put_lines(&format!(
        "put sys.cpu.user {} 40 host=web01\nput sys.cpu.user {} 50 host=web01\nput sys.cpu.user {} 70 host=web01\nput sys.cpu.user {} 37 host=web02\nput sys.cpu.user {} 48 host=web02\n",
        base,
        base + 10,
        base + 30,
        base + 10,
        base + 20
    ));
    (d, (base + 30) * 1000)
}

// spec: query §8 V16 (/api/query/last GET with resolve and back_scan), §6.1.
#[test]
fn v16_query_last() {
    let (d, ms) = shifted_d1();
    let r = get(&d, "/api/query/last?timeseries=sys.cpu.user%7Bhost=web01%7D&back_scan=24&resolve");
    assert_body(
        &r,
        200,
        &format!(
            r#"[{{"metric":"sys.cpu.user","timestamp":{ms},"value":"70","tags":{{"host":"web01"}},"tsuid":"000001000001000001"}}]"#
        ),
        "V16 query/last",
    );
}

// ---------------------------------------------------------------------------------------------------------------
// /api/query/last beyond V16 (§6.1)

// spec: query §6.1 (POST body form with resolveNames and backScan; same answer as the GET).
#[test]
fn last_post_form() {
    let (d, ms) = shifted_d1();
    let r = d.post_json(
        "/api/query/last",
        r#"{"queries":[{"metric":"sys.cpu.user","tags":{"host":"web02"}}],"resolveNames":true,"backScan":24}"#,
    );
    assert_body(
        &r,
        200,
        &format!(
            r#"[{{"metric":"sys.cpu.user","timestamp":{},"value":"48","tags":{{"host":"web02"}},"tsuid":"000001000001000002"}}]"#,
            ms - 10_000
        ),
        "last POST",
    );
}

// spec: query §6.1 (without resolve: no metric/tags; fields timestamp, value, tsuid in the docs' order).
#[test]
fn last_without_resolve() {
    let (d, ms) = shifted_d1();
    let r = get(&d, "/api/query/last?timeseries=sys.cpu.user%7Bhost=web01%7D&back_scan=24");
    assert_body(&r, 200, &format!(r#"[{{"timestamp":{ms},"value":"70","tsuid":"000001000001000001"}}]"#), "last GET");
}

// spec: query §6.1 (no sub-queries → 400 `Missing sub queries`).
#[test]
fn last_without_sub_queries() {
    let (d, _) = shifted_d1();
    assert_error_message(&get(&d, "/api/query/last?back_scan=24"), 400, "Missing sub queries");
}

// ---------------------------------------------------------------------------------------------------------------
// /api/aggregators and /api/config/filters (§2.1, §5.4)

// spec: query §2.1 (the byte-exact 2.4 answer: 35 names in JDK HashMap order).
#[test]
fn aggregators_list() {
    let d = Daemon::start();
    let r = get(&d, "/api/aggregators");
    assert_body(
        &r,
        200,
        r#"["mult","p90","zimsum","mimmax","sum","p50","none","p95","ep99r7","pfsum","p75","p99","ep99r3","ep95r7","min","avg","ep75r7","dev","ep95r3","ep75r3","ep50r7","ep90r7","mimmin","p999","ep50r3","ep90r3","ep999r7","last","max","count","diff","median","squareSum","ep999r3","first"]"#,
        "aggregators",
    );
}

// spec: query §6.10 (`/api/version`: an object of string values with exactly these keys).
#[test]
fn version_object() {
    let d = Daemon::start();
    let r = get(&d, "/api/version");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let obj = v.as_object().unwrap_or_else(|| panic!("not an object: {}", r.text()));
    assert!(obj.values().all(Value::is_string), "{v}");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["branch", "full_revision", "host", "repo", "repo_status", "short_revision", "timestamp", "user", "version"],
        "{v}"
    );
    assert_eq!(v["version"], "2.4.1");
}

// spec: query §5.4 (the seven filter types, each with `examples` and `description`; literal_or's text verbatim).
#[test]
fn config_filters() {
    let d = Daemon::start();
    let r = get(&d, "/api/config/filters");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let obj = v.as_object().unwrap_or_else(|| panic!("not an object: {}", r.text()));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["iliteral_or", "iwildcard", "literal_or", "not_iliteral_or", "not_literal_or", "regexp", "wildcard"]
    );
    for (name, value) in obj {
        let o = value.as_object().unwrap_or_else(|| panic!("{name}: {value}"));
        let mut fields: Vec<&str> = o.keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["description", "examples"], "{name}");
        assert!(o.values().all(Value::is_string), "{name}: {value}");
    }
    assert_eq!(
        v["literal_or"],
        json!({"examples":"host=literal_or(web01),  host=literal_or(web01|web02|web03)  {\"type\":\"literal_or\",\"tagk\":\"host\",\"filter\":\"web01|web02|web03\",\"groupBy\":false}","description":"Accepts one or more exact values and matches if the series contains any of them. Multiple values can be included and must be separated by the | (pipe) character. The filter is case sensitive and will not allow characters that TSDB does not allow at write time."})
    );
}

// The harness finds the daemon binary Cargo built for this test run (see `rtsd_compat_tests::binary`).
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
