//! `DELETE /api/query` and a POST body's `"delete":true` against the real daemon (spec: query §1.7, §0.1, §1.4).
//!
//! With `tsd.http.query.allow_delete=true` the query runs, answers its normal body, and every row it read of the
//! matched series is deleted: whole hour rows, as OpenTSDB 2.4's scanner deletes each row it returns, so points
//! of those hours outside the query's range go too. Afterwards queries, `/api/query/last` (rtsd's series index)
//! and rollup answers all see only what is left.
use rtsd_compat_tests::{strip_trace, Daemon};

const T: i64 = 1356998400;
const ALLOW: &[(&str, &str)] = &[("tsd.http.query.allow_delete", "true")];
const NOT_ENABLED: &str = r#"{"error":{"code":400,"message":"Bad request","details":"Deleting data is not enabled (tsd.http.query.allow_delete=false)"}}"#;

/// web01 in three hours (T-3600, T.., T+3600), web02 in hour T only.
fn data(d: &Daemon) {
    let lines: String = [
        ("web01", -3600, 30),
        ("web01", 0, 40),
        ("web01", 10, 50),
        ("web01", 30, 70),
        ("web01", 3600, 80),
        ("web02", 10, 37),
        ("web02", 20, 48),
    ]
    .iter()
    .map(|(host, dt, v)| format!("put sys.cpu.user {} {v} host={host}\n", T + dt))
    .collect();
    d.put_lines(&lines);
}

fn get(d: &Daemon, method: &str, path: &str) -> (u16, String) {
    let r = d.http(method, path, &[], b"");
    (r.status, strip_trace(&r.text()))
}

/// Every point of both hosts, grouped by host, over the three hours.
fn everything(d: &Daemon) -> String {
    get(d, "GET", &format!("/api/query?start={}&end={}&m=sum:sys.cpu.user%7Bhost=*%7D", T - 3600, T + 7199)).1
}

fn host(name: &str, dps: &[(i64, i64)]) -> String {
    let dps: Vec<String> = dps.iter().map(|(dt, v)| format!(r#""{}":{v}"#, T + dt)).collect();
    format!(r#"{{"metric":"sys.cpu.user","tags":{{"host":"{name}"}},"aggregateTags":[],"dps":{{{}}}}}"#, dps.join(","))
}

fn last(d: &Daemon, name: &str) -> String {
    get(d, "GET", &format!("/api/query/last?timeseries=sys.cpu.user%7Bhost={name}%7D&back_scan=24")).1
}

// spec: query §1.7, §1.4 (`Deleting data is not enabled`), §0.1 (method_override).
#[test]
fn without_allow_delete_nothing_is_deleted() {
    let d = Daemon::start();
    data(&d);
    let before = everything(&d);
    let q = format!("/api/query?start={T}&end={}&m=sum:sys.cpu.user", T + 60);
    assert_eq!(get(&d, "DELETE", &q), (400, NOT_ENABLED.to_string()));
    // 2.4 binds a POST body's "delete" and deletes even when the setting is off; rtsd refuses it like the verb.
    let r = d.post_json(
        "/api/query",
        &format!(r#"{{"start":{T},"delete":true,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user"}}]}}"#),
    );
    assert_eq!((r.status, strip_trace(&r.text())), (400, NOT_ENABLED.to_string()));
    // A GET overridden to DELETE is not refused by 2.4: it runs as a plain query.
    let (status, body) = get(&d, "GET", &format!("{q}&method_override=delete"));
    assert_eq!((status, body.contains(r#""aggregateTags":["host"]"#)), (200, true), "{body}");
    assert_eq!(everything(&d), before);
    // A read-only daemon deletes nothing even when allowed.
    let ro = Daemon::start_with(&[("tsd.http.query.allow_delete", "true"), ("tsd.mode", "ro")]);
    assert_eq!(get(&ro, "DELETE", &q), (400, NOT_ENABLED.to_string()));
}

// spec: query §1.7 (answer as usual, delete the whole rows read), §6.1 (last point from what is left).
#[test]
fn delete_answers_the_query_and_removes_the_rows_it_read() {
    let d = Daemon::start_with(ALLOW);
    data(&d);
    assert_eq!(
        everything(&d),
        format!(
            "[{},{}]",
            host("web01", &[(-3600, 30), (0, 40), (10, 50), (30, 70), (3600, 80)]),
            host("web02", &[(10, 37), (20, 48)])
        )
    );

    // [T, T+20] of web01: the answer is those points; the row of hour T goes, 70 at T+30 with it.
    let (status, body) =
        get(&d, "DELETE", &format!("/api/query?start={T}&end={}&m=sum:sys.cpu.user%7Bhost=web01%7D", T + 20));
    assert_eq!((status, body), (200, format!("[{}]", host("web01", &[(0, 40), (10, 50)]))));
    assert_eq!(
        everything(&d),
        format!("[{},{}]", host("web01", &[(-3600, 30), (3600, 80)]), host("web02", &[(10, 37), (20, 48)]))
    );
    let newest = format!(r#"[{{"timestamp":{},"value":"80","tsuid":"000001000001000001"}}]"#, (T + 3600) * 1000);
    assert_eq!(last(&d, "web01"), newest);

    // The newest row, by a POST with "delete":true: /api/query/last falls back to the hour before.
    let r = d.post_json(
        "/api/query",
        &format!(
            r#"{{"start":{},"end":{},"delete":true,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user","tags":{{"host":"web01"}}}}]}}"#,
            T + 3600,
            T + 3700
        ),
    );
    assert_eq!((r.status, r.text()), (200, format!("[{}]", host("web01", &[(3600, 80)]))));
    let older = format!(r#"[{{"timestamp":{},"value":"30","tsuid":"000001000001000001"}}]"#, (T - 3600) * 1000);
    assert_eq!(last(&d, "web01"), older);
    // A point written later into an hour the index had already seen is found again.
    d.put_lines(&format!("put sys.cpu.user {} 90 host=web01\n", T + 3601));
    let again = format!(r#"[{{"timestamp":{},"value":"90","tsuid":"000001000001000001"}}]"#, (T + 3601) * 1000);
    assert_eq!(last(&d, "web01"), again);

    // Everything of both hosts (GET with method_override=delete): an empty answer afterwards, and no last point.
    let all =
        format!("/api/query?start={}&end={}&m=sum:sys.cpu.user%7Bhost=*%7D&method_override=delete", T - 3600, T + 7199);
    let (status, body) = get(&d, "GET", &all);
    assert_eq!(
        (status, body),
        (200, format!("[{},{}]", host("web01", &[(-3600, 30), (3601, 90)]), host("web02", &[(10, 37), (20, 48)])))
    );
    assert_eq!(everything(&d), "[]");
    assert_eq!(last(&d, "web01"), "[]");
    assert_eq!(last(&d, "web02"), "[]");
    // Deleting nothing answers nothing.
    assert_eq!(get(&d, "DELETE", &format!("/api/query?start={T}&m=sum:sys.cpu.user")), (200, "[]".to_string()));
}

// spec: query §1.7. A delete right after the puts, before anything flushed the daemon's series table: reads of
// a few series' rows take the table's points without flushing it, and the delete still removes them (it flushes
// the table before deleting, so no acknowledged point is written into a deleted row afterwards).
#[test]
fn a_delete_right_after_the_puts_removes_points_not_flushed_yet() {
    let d = Daemon::start_with(ALLOW);
    data(&d);
    let (status, body) = get(
        &d,
        "DELETE",
        &format!("/api/query?start={}&end={}&m=sum:sys.cpu.user%7Bhost=web01%7D", T - 3600, T + 7199),
    );
    assert_eq!(
        (status, body),
        (200, format!("[{}]", host("web01", &[(-3600, 30), (0, 40), (10, 50), (30, 70), (3600, 80)])))
    );
    assert_eq!(everything(&d), format!("[{}]", host("web02", &[(10, 37), (20, 48)])));
    assert_eq!(last(&d, "web01"), "[]");
}

// spec: query §1.7, §6.13: rollups of deleted rows are recomputed, so a rollup answer still equals the raw one.
#[test]
fn rollup_answers_agree_with_raw_after_a_delete() {
    let d = Daemon::start_with(&[("tsd.http.query.allow_delete", "true"), ("tsd.rollups.enable", "true")]);
    let mut lines = String::new();
    for i in 0..360 {
        for (host, v) in [("a", format!("{}.5", i % 7)), ("b", format!("{}", i % 5))] {
            lines.push_str(&format!("put m {} {v} host={host}\n", T + i * 10));
        }
    }
    d.put_lines(&lines);
    let q = |ds: &str| format!("/api/query?start={T}&end={}&m=sum:{ds}:m&show_query", T + 3599);
    let (_, before) = get(&d, "GET", &q("1m-sum"));
    assert!(before.contains(r#""rollupTable":"1m""#), "{before}");
    // Delete host a's row.
    let (status, _) = get(&d, "DELETE", &format!("/api/query?start={T}&end={}&m=sum:m%7Bhost=a%7D", T + 60));
    assert_eq!(status, 200);
    for ds in ["1m-sum", "10m-avg", "1h-count"] {
        let (_, rolled) = get(&d, "GET", &q(ds));
        let (_, raw) = get(&d, "GET", &q(&format!("{ds}:rollup_raw")));
        let strip = |s: &str| s.replace(r#""rollupUsage":null,"#, "").replace(r#""rollupUsage":"ROLLUP_RAW","#, "");
        let rolled_table = ["1m", "10m", "1h"].iter().find(|t| rolled.contains(&format!(r#""rollupTable":"{t}""#)));
        assert!(rolled_table.is_some(), "{ds} read a rollup table: {rolled}");
        assert_eq!(
            strip(&rolled).replace(&format!(r#""rollupTable":"{}""#, rolled_table.unwrap()), ""),
            strip(&raw).replace(r#""rollupTable":"raw""#, ""),
            "{ds}"
        );
        // Only host b is left: no aggregateTags, b's tags.
        assert!(raw.contains(r#""tags":{"host":"b"},"aggregateTags":[]"#), "{ds}: {raw}");
    }
    assert_ne!(before, get(&d, "GET", &q("1m-sum")).1);
}
