//! Retention (issue 6 item 4; README "Retention"): data older than `rtsd.retention.raw_hours` leaves queries at
//! once, across a restart, and leaves the disk when compacted (`rtsd fsck --reclaim --fix`, which also removes
//! the series and UIDs nothing within any retention uses). Timestamps are hours away from the cut, so the time
//! the test takes does not matter.
use std::path::Path;
use std::process::{Command, Stdio};

use rtsd_compat_tests::engine::skip_on_hbase;
use rtsd_compat_tests::{binary, Daemon};

const HOUR: i64 = 3600;

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Runs `rtsd-compat SUBCOMMAND --data-dir DIR ARGS...`; returns (exit code, stdout, stderr).
fn tool(dir: &Path, subcommand: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary())
        .arg(subcommand)
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run the tool");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rtsd scan --import` of a metric over the last three days, with retention off: what is physically stored.
fn stored(dir: &Path, metric: &str) -> Vec<String> {
    let start = (now() - 72 * HOUR).to_string();
    let (code, out, err) =
        tool(dir, "scan", &["--set", "rtsd.retention.raw_hours=0", "--import", &start, "sum", metric]);
    assert_eq!(code, 0, "{err}");
    out.lines().map(str::to_string).collect()
}

fn query(d: &Daemon, metric: &str) -> serde_json::Value {
    let r = d.http("GET", &format!("/api/query?start=72h-ago&m=sum:{metric}"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn expired_points_leave_queries_at_once_and_the_disk_when_reclaimed() {
    // Raw tables alone: rollups (on in the shipped rtsd.conf) outlive raw data and keep a series in use; their
    // own retention is tested in src/store/retention.rs.
    let retain = [("rtsd.retention.raw_hours", "10"), ("tsd.rollups.enable", "false")];
    let t = now();
    let (old, new) = (t - 30 * HOUR, t - HOUR);
    // Written while young (the test build keeps data forever), then served with a 10-hour retention.
    let d = Daemon::start_with(&retain[1..]);
    d.put_lines(&format!(
        "put ret.m {old} 1 host=a\nput ret.m {new} 2 host=a\nput ret.gone {old} 3 host=b\nput ret.m {} 4 host=a\n",
        t - 50 * HOUR
    ));
    let mut d = d.restart_with(&retain);
    let expected = serde_json::json!([{"metric": "ret.m", "tags": {"host": "a"}, "aggregateTags": [],
        "dps": {new.to_string(): 2}}]);
    assert_eq!(query(&d, "ret.m"), expected);
    assert_eq!(query(&d, "ret.gone"), serde_json::json!([]));
    // The newest point of a series past the retention is not its last point any more.
    let last = d.http("GET", "/api/query/last?timeseries=ret.gone&back_scan=48", &[], b"");
    assert_eq!((last.status, last.json()), (200, serde_json::json!([])));
    let stats = d.http("GET", "/api/stats", &[], b"").json();
    assert!(stats.as_array().unwrap().iter().any(|s| s["metric"] == "tsd.storage.rows_expired"), "{stats}");

    // Restart in the middle (nothing compacted yet): still hidden, still on disk.
    d = d.restart();
    assert_eq!(query(&d, "ret.m"), expected);
    let _ = d.terminate();
    if skip_on_hbase("the rest reads and reclaims the data directory's files; on HBase the family's TTL reclaims rows")
    {
        return;
    }
    assert_eq!(stored(d.data_dir(), "ret.m").len(), 3);
    assert_eq!(stored(d.data_dir(), "ret.gone"), [format!("ret.gone {old} 3 host=b")]);

    // The report lists what nothing within the retention uses; --fix removes it, and the expired rows.
    let set = ["--set", "rtsd.retention.raw_hours=10", "--set", "tsd.rollups.enable=false", "--reclaim"];
    let (code, out, err) = tool(d.data_dir(), "fsck", &set);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "metrics ret.gone: [0, 0, 2]\ntagv b: [0, 0, 2]\nReclaimable: 1 series, 2 UIDs; expired rows compacted away: 0\n");
    let (code, out, err) = tool(d.data_dir(), "fsck", &[&set[..], &["--fix"]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "metrics ret.gone: [0, 0, 2]\ntagv b: [0, 0, 2]\nReclaimed: 1 series, 2 UIDs; expired rows compacted away: 3\n"
    );
    assert_eq!(stored(d.data_dir(), "ret.m"), [format!("ret.m {new} 2 host=a")]);
    let (code, _, err) = tool(d.data_dir(), "uid", &["grep", "metrics", "ret.gone"]);
    assert_eq!(code, 1, "ret.gone has no UID any more: {err}");

    // After the compaction and another restart: the same answers; new data is unaffected. A point older than
    // the retention is accepted (no error, as OpenTSDB) and never returned.
    let d = d.restart();
    d.put_lines(&format!("put ret.m {} 5 host=a\nput ret.m {old} 6 host=a\n", t - 2 * HOUR));
    let dps = query(&d, "ret.m")[0]["dps"].clone();
    assert_eq!(dps, serde_json::json!({(t - 2 * HOUR).to_string(): 5, new.to_string(): 2}));
}

#[test]
fn bad_retention_values_stop_the_daemon_with_the_property_named() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = tool(dir.path(), "serve", &["--port", "0", "--set", "rtsd.retention.rollup_hours=1m:soon"]);
    assert_ne!(code, 0);
    assert!(err.contains("invalid value for rtsd.retention.rollup_hours: \"1m:soon\""), "{err}");
}

/// A point from 2013 over telnet and one over HTTP (2013-04-03 14:40 and 14:41 UTC).
const OLD_T: i64 = 1_365_000_000;

fn put_2013_points(d: &Daemon) {
    d.put_lines(&format!("put old.telnet {OLD_T} 42 host=a\n"));
    let body = format!(r#"[{{"metric":"old.http","timestamp":{},"value":43.5,"tags":{{"host":"a"}}}}]"#, OLD_T + 60);
    let r = d.post_json("/api/put?details", &body);
    assert_eq!((r.status, r.json()), (200, serde_json::json!({"success": 1, "failed": 0, "errors": []})));
}

fn query_2013(d: &Daemon, metric: &str) -> serde_json::Value {
    query_range(d, &format!("m=sum:{metric}"))
}

fn query_range(d: &Daemon, query: &str) -> serde_json::Value {
    let r = d.http("GET", &format!("/api/query?start=2013/04/03-00:00:00&end=2013/04/04-00:00:00&{query}"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn last_2013(d: &Daemon, metric: &str) -> serde_json::Value {
    let r = d.http("GET", &format!("/api/query/last?timeseries={metric}%7Bhost=a%7D"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn ascii_2013(d: &Daemon, metric: &str) -> String {
    let r =
        d.http("GET", &format!("/q?start=2013/04/03-00:00:00&end=2013/04/04-00:00:00&m=sum:{metric}&ascii"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

fn expired_on_arrival(d: &Daemon) -> String {
    let text = d.http("GET", "/metrics", &[], b"").text();
    text.lines().find(|l| l.starts_with("rtsd_datapoints_expired_on_arrival_total ")).unwrap_or("<missing>").to_string()
}

// Issue 18 item 1: the shipped defaults keep data forever, as OpenTSDB on HBase without a TTL does, so a
// backfill of old history is readable through every read path.
#[test]
fn under_the_shipped_defaults_a_point_from_2013_is_returned_by_every_read() {
    let d = Daemon::start();
    put_2013_points(&d);
    for (metric, t, value) in
        [("old.telnet", OLD_T, serde_json::json!(42)), ("old.http", OLD_T + 60, serde_json::json!(43.5))]
    {
        let expected = serde_json::json!([{"metric": metric, "tags": {"host": "a"}, "aggregateTags": [], "dps": {t.to_string(): value}}]);
        assert_eq!(query_2013(&d, metric), expected);
        let last = last_2013(&d, metric);
        assert_eq!(
            (last[0]["timestamp"].clone(), last[0]["value"].clone()),
            (serde_json::json!(t * 1000), serde_json::json!(value.to_string()))
        );
        assert_eq!(ascii_2013(&d, metric), format!("{metric} {t} {value} host=a\n"));
        assert_eq!(d.scan(&["2013/04/03-00:00:00", "sum", metric]), [format!("{metric} {t} {value} host=a")]);
    }
    assert_eq!(expired_on_arrival(&d), "rtsd_datapoints_expired_on_arrival_total 0");
}

// Issue 18 item 1: with a retention set, an old point is still accepted (an HBase TTL accepts it too), counted
// on /metrics, logged, and returned by no read.
#[test]
fn with_a_retention_an_old_point_is_accepted_counted_logged_and_hidden() {
    let d = Daemon::start_with(&[("rtsd.retention.raw_hours", "24")]);
    put_2013_points(&d);
    assert_eq!(expired_on_arrival(&d), "rtsd_datapoints_expired_on_arrival_total 2");
    for metric in ["old.telnet", "old.http"] {
        assert_eq!(query_2013(&d, metric), serde_json::json!([]));
        assert_eq!(last_2013(&d, metric), serde_json::json!([]));
        assert_eq!(ascii_2013(&d, metric), "");
        assert_eq!(d.scan(&["2013/04/03-00:00:00", "sum", metric]), Vec::<String>::new());
    }
    let log = d.log_text();
    assert_eq!(log.matches("stored points older than rtsd.retention.raw_hours").count(), 1, "one line a minute: {log}");
}
