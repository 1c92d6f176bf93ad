//! The HBase test bed (README "Test bed: HBase and OpenTSDB 2.4.1"): a real HBase cluster (`scripts/hbase-cluster`,
//! ZooKeeper + HMaster + 3 region servers) and the real OpenTSDB 2.4.1 TSD on it (`scripts/opentsdb-ref`).
//!
//! Starting the cluster costs about a minute on two cores, so this binary starts it once and runs its checks in
//! order inside one test: (a) points put through the reference TSD (`/api/put?sync`, telnet) are read back
//! exactly by `/api/query` and by OpenTSDB's `tsdb scan --import`, (b) every point HBase acknowledged survives SIGKILLed region servers once their regions reopen elsewhere, (c) `down` leaves no
//! process. A detached watcher stops the cluster and removes its directory if this test binary dies first.
//!
//! The harness (starting, the watcher, the Drop guard) is `rtsd_compat_tests::testbed`, shared with
//! tests/differential.rs.
//!
//! Java 17, Maven and Maven Central are required (`scripts/install-test-deps`); without them the test fails with
//! what is missing. It never skips.
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use rtsd_compat_tests::testbed::{pid_running, processes_mentioning, script, Testbed};
use serde_json::{json, Value};

const T0: i64 = 1_700_000_000;
/// Points per metric in the durability check, sent in /api/put batches of BATCH (asynchbase flushes buffered
/// puts once a second, so a `sync` request takes about a second whatever its size).
const POINTS: i64 = 600;
const BATCH: i64 = 200;

/// `metric`'s points from the reference TSD: timestamp -> value. Retries while regions move (asynchbase finds the
/// new locations by itself, after its own retries).
fn read_points(tb: &Testbed, metric: &str, end: i64, deadline: Duration) -> BTreeMap<i64, f64> {
    let path = format!("/api/query?start={}&end={end}&m=sum:{metric}", T0 - 10);
    let started = Instant::now();
    loop {
        let r = tb.http("GET", &path, "", Duration::from_secs(60));
        if r.status == 200 {
            let v = r.json();
            let series = v.as_array().unwrap_or_else(|| panic!("query answer is no array: {v}"));
            assert_eq!(series.len(), 1, "one series expected for {metric}: {v}");
            return series[0]["dps"]
                .as_object()
                .expect("dps object")
                .iter()
                .map(|(k, v)| (k.parse().expect("timestamp"), v.as_f64().expect("number")))
                .collect();
        }
        assert!(started.elapsed() < deadline, "{path} still fails after {:?}: {} {}", deadline, r.status, r.text());
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The metric's UID (hex) from `show_tsuids`.
fn metric_uid(tb: &Testbed, metric: &str) -> String {
    let path = format!("/api/query?start={}&end={}&m=sum:{metric}&show_tsuids=true", T0 - 10, T0 + POINTS);
    let v = tb.http("GET", &path, "", Duration::from_secs(60)).json();
    let tsuid = v[0]["tsuids"][0].as_str().unwrap_or_else(|| panic!("no tsuid in {v}"));
    tsuid[..6].to_ascii_lowercase()
}

/// (start, end, rsN) of each `tsdb` region, keys in hex ("-" = open end).
fn tsdb_regions(tb: &Testbed) -> Vec<(String, String, String)> {
    script("hbase-cluster", &["regions", tb.dir(), "tsdb"])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| (f[0].to_ascii_lowercase(), f[1].to_ascii_lowercase(), f[2].to_string()))
        })
        .collect()
}

fn server_of(regions: &[(String, String, String)], key: &str) -> String {
    regions
        .iter()
        .find(|(s, e, _)| (s == "-" || s.as_str() <= key) && (e == "-" || key < e.as_str()))
        .map(|(_, _, rs)| rs.clone())
        .unwrap_or_else(|| panic!("no tsdb region holds {key}: {regions:?}"))
}

/// (a) `/api/put?sync` through the reference TSD, read back by `/api/query`, byte for byte.
fn check_put_and_query(tb: &Testbed) {
    let body = r#"{"metric":"testbed.a","timestamp":1700000000,"value":42.5,"tags":{"host":"web01"}}"#;
    let r = tb.http("POST", "/api/put?sync", body, Duration::from_secs(60));
    assert_eq!(r.status, 204, "put: {}", r.text());
    let r = tb.http(
        "GET",
        "/api/query?start=1699999990&end=1700000010&m=sum:testbed.a%7Bhost=*%7D",
        "",
        Duration::from_secs(60),
    );
    assert_eq!(r.status, 200, "query: {}", r.text());
    assert_eq!(
        r.text(),
        r#"[{"metric":"testbed.a","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1700000000":42.5}}]"#
    );

    // A telnet put (no reply on success; asynchbase writes it within a second or so), then OpenTSDB's own
    // `tsdb scan --import` (DumpSeries) reads both points from HBase.
    let mut telnet = rtsd_compat_tests::connect(tb.tsd);
    telnet.write_all(b"put testbed.a 1700000001 7 host=web01\n").expect("telnet put");
    let started = Instant::now();
    while read_points(tb, "testbed.a", T0 + 10, Duration::from_secs(60)).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "the telnet put never became readable");
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(telnet);
    // The queries above made the TSD compact the row (2.4 compacts rows it reads once their hour is over): it
    // writes the compacted cell first and deletes the single cells a moment later, so for that moment the scan
    // shows every point twice. Scan until the row has settled.
    let expected = ["testbed.a 1700000000 42.5 host=web01", "testbed.a 1700000001 7 host=web01"];
    let started = Instant::now();
    loop {
        let dump = script(
            "opentsdb-ref",
            &[
                "tool",
                tb.dir(),
                "net.opentsdb.tools.DumpSeries",
                "--import",
                "1699999990",
                "1700000010",
                "sum",
                "testbed.a",
            ],
        );
        let mut lines: Vec<&str> = dump.lines().filter(|l| !l.trim().is_empty()).collect();
        lines.sort();
        if lines == expected {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "tsdb scan --import after 60 s:\n{dump}");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// (b) Points acknowledged by `/api/put?sync&details` survive SIGKILLed region servers.
fn check_durability(tb: &Testbed) {
    let metrics = ["testbed.dur1", "testbed.dur2", "testbed.dur3"];
    let (mut sent, mut acked) = (0i64, 0i64);
    for m in metrics {
        for start in (0..POINTS).step_by(BATCH as usize) {
            let batch: Vec<Value> = (start..start + BATCH)
                .map(|i| json!({"metric": m, "timestamp": T0 + i, "value": i, "tags": {"host": "h1"}}))
                .collect();
            sent += batch.len() as i64;
            let r = tb.http("POST", "/api/put?sync&details", &Value::from(batch).to_string(), Duration::from_secs(60));
            assert_eq!(r.status, 200, "put: {}", r.text());
            let v = r.json();
            assert_eq!(v["failed"], 0, "put: {v}");
            acked += v["success"].as_i64().expect("success count");
        }
    }
    assert_eq!((sent, acked), (3 * POINTS, 3 * POINTS), "sent, acknowledged");

    // The region servers holding the data; kill all of them but one (at least one must stay to take the regions).
    let regions = tsdb_regions(tb);
    let mut holders: Vec<String> = metrics.iter().map(|m| server_of(&regions, &metric_uid(tb, m))).collect();
    holders.sort();
    holders.dedup();
    let victims: Vec<String> = holders.iter().take(2).cloned().collect();
    assert!(!victims.is_empty() && victims.len() < 3, "victims {victims:?} of {regions:?}");
    let killed_at = Instant::now();
    for v in &victims {
        script("hbase-cluster", &["kill-rs", tb.dir(), v.trim_start_matches("rs")]);
    }
    let live = (3 - victims.len()).to_string();
    script("hbase-cluster", &["wait", tb.dir(), &live]);
    let reassigned = killed_at.elapsed();

    let mut readable = 0i64;
    for m in metrics {
        let points = read_points(tb, m, T0 + POINTS, Duration::from_secs(180));
        let expected: BTreeMap<i64, f64> = (0..POINTS).map(|i| (T0 + i, i as f64)).collect();
        readable += points.len() as i64;
        assert_eq!(points, expected, "{m}: acknowledged points lost or changed after killing {victims:?}");
    }
    eprintln!(
        "hbase_testbed: durability: sent {sent}, acknowledged {acked}, readable {readable} after SIGKILL of \
         {victims:?} (holders {holders:?}); regions reopened {:.1}s after the kill, all read back after {:.1}s",
        reassigned.as_secs_f64(),
        killed_at.elapsed().as_secs_f64()
    );
    assert_eq!((sent, acked, readable), (3 * POINTS, 3 * POINTS, 3 * POINTS), "sent, acknowledged, readable");

    // The killed servers come back and the cluster is whole again; the data stays readable.
    for v in &victims {
        script("hbase-cluster", &["start-rs", tb.dir(), v.trim_start_matches("rs")]);
    }
    script("hbase-cluster", &["wait", tb.dir(), "3"]);
    for m in metrics {
        assert_eq!(read_points(tb, m, T0 + POINTS, Duration::from_secs(180)).len() as i64, POINTS, "{m} after restart");
    }
}

/// (c) `down` stops every process it started, by PID.
fn check_down(tb: &mut Testbed) {
    let pids = tb.recorded_pids();
    let names: Vec<&str> = pids.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["master", "rs1", "rs2", "rs3", "tsd", "zk"], "recorded pids {pids:?}");
    for (name, pid) in &pids {
        assert!(pid_running(*pid), "{name} (pid {pid}) is not running before down");
    }
    tb.stop();
    for (name, pid) in &pids {
        assert!(!pid_running(*pid), "{name} (pid {pid}) still runs after down");
    }
    let left = processes_mentioning(tb.path());
    assert!(left.is_empty(), "processes left after down: {left:?}");
}

#[test]
fn hbase_cluster_and_reference_tsd() {
    let mut tb = Testbed::start("hbase_testbed");
    check_put_and_query(&tb);
    check_durability(&tb);
    check_down(&mut tb);
}
