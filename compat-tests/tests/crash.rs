//! Durability: every acknowledged point survives `kill -9`, and UID assignment continues after the restart.
//!
//! rtsd's contract (README "Durability"): on a telnet connection the reply to `version` means every earlier put
//! on that connection is in RocksDB's write-ahead log; an HTTP `/api/put` 2xx means its points are. UIDs are
//! assigned while writing (OpenTSDB's tsdb-uid table, spec: opentsdb-ingest-storage.md §4.10); if the max-id
//! counter went back after a crash, a new name would get an old name's UID and its points would show up under the
//! old name (and the old name's under the new one), which the exact scans below would catch.
use std::io::Write;

use rtsd_compat_tests::{barrier, normalize, replies_to, Daemon};

const T: i64 = 1_700_000_000;
const SCAN_START: &str = "1699990000";
const SCAN_END: &str = "1700100000";

fn scan(d: &Daemon, metric: &str) -> Vec<String> {
    d.scan(&[SCAN_START, SCAN_END, "sum", metric])
}

/// `tsd.uid.ids-used` per kind, from the telnet `stats` reply (spec: opentsdb-ingest-storage.md §1.5.1).
fn ids_used(d: &Daemon) -> (u64, u64, u64) {
    let mut s = d.telnet();
    let text = replies_to(&mut s, "stats\n");
    let get = |kind: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with("tsd.uid.ids-used ") && l.split(' ').any(|w| w == format!("kind={kind}")))
            .and_then(|l| l.split(' ').nth(2))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no tsd.uid.ids-used kind={kind} in stats:\n{text}"))
    };
    (get("metrics"), get("tagk"), get("tagv"))
}

/// Writes `n` points per (metric, host) over telnet in several writes, then the barrier. Returns the expected
/// scan lines per metric.
fn write_telnet(d: &Daemon, metrics: &[&str], hosts: &[&str], n: i64, extra: &str) -> Vec<(String, Vec<String>)> {
    let mut s = d.telnet();
    let mut expected = Vec::new();
    for (mi, metric) in metrics.iter().enumerate() {
        let mut lines = Vec::new();
        let mut wire = String::new();
        for host in hosts {
            for i in 0..n {
                // Seconds and milliseconds, integers and floats.
                let (ts, v) = if i % 4 == 3 {
                    (format!("{}", (T + i * 10) * 1000 + 500), format!("{}.5", i))
                } else {
                    (format!("{}", T + i * 10), format!("{}", i as usize * 1000 + mi))
                };
                wire.push_str(&format!("put {metric} {ts} {v} host={host}{extra}\n"));
                lines.push(format!("{metric} {ts} {v} host={host}{extra}"));
            }
        }
        s.write_all(wire.as_bytes()).unwrap();
        expected.push((metric.to_string(), normalize(lines)));
    }
    assert_eq!(barrier(&mut s), Vec::<String>::new(), "no put may fail");
    expected
}

/// Writes points over HTTP, one POST per metric, each answered 204. Returns the expected scan lines per metric.
fn write_http(d: &Daemon, metrics: &[&str], hosts: &[&str], n: i64) -> Vec<(String, Vec<String>)> {
    let mut conn = d.http_conn();
    let mut expected = Vec::new();
    for metric in metrics {
        let mut points = Vec::new();
        let mut lines = Vec::new();
        for host in hosts {
            for i in 0..n {
                let ts = T + 5 + i * 10;
                points.push(format!(
                    r#"{{"metric":"{metric}","timestamp":{ts},"value":{i},"tags":{{"host":"{host}","dc":"lga"}}}}"#
                ));
                lines.push(format!("{metric} {ts} {i} host={host} dc=lga"));
            }
        }
        let r = conn.request("POST", "/api/put", &[], format!("[{}]", points.join(",")).as_bytes());
        assert_eq!(r.status, 204, "{}", r.text());
        expected.push((metric.to_string(), normalize(lines)));
    }
    expected
}

fn assert_all(d: &Daemon, expected: &[(String, Vec<String>)]) {
    for (metric, lines) in expected {
        let got = scan(d, metric);
        assert_eq!(got.len(), lines.len(), "{metric}: number of points after the crash");
        assert_eq!(&got, lines, "{metric}");
    }
}

// spec: README "Durability"; opentsdb-ingest-storage.md §4.10 (UIDs are never reused).
#[test]
fn acknowledged_points_survive_kill9_and_uids_continue() {
    let mut d = Daemon::start();
    let mut expected = write_telnet(
        &d,
        &["crash.telnet.a", "crash.telnet.b", "crash.telnet.c"],
        &["h0", "h1", "h2", "h3", "h4"],
        40,
        "",
    );
    expected.extend(write_http(&d, &["crash.http.a", "crash.http.b"], &["web0", "web1"], 50));
    assert_all(&d, &expected);
    // metrics: 3 telnet + 2 http; tagk: host, dc; tagv: h0..h4, web0, web1, lga.
    assert_eq!(ids_used(&d), (5, 2, 8));

    d.kill9();
    let mut d = d.restart();
    assert_all(&d, &expected);
    assert_eq!(ids_used(&d), (5, 2, 8), "UID counters after kill -9");

    // New names after the restart get new UIDs: their points appear only under their own names, and every
    // older series is unchanged.
    let after = write_telnet(&d, &["crash.after.a"], &["new-host"], 10, " zone=z9");
    assert_all(&d, &after);
    assert_all(&d, &expected);
    assert_eq!(ids_used(&d), (6, 3, 10));
    expected.extend(after);

    // A second crash right after an HTTP acknowledgement, then a graceful restart: still everything.
    let http_after = write_http(&d, &["crash.http.after"], &["web9"], 20);
    expected.extend(http_after);
    d.kill9();
    let d = d.restart();
    assert_all(&d, &expected);
    assert_eq!(ids_used(&d), (7, 3, 11));
    let d = d.restart();
    assert_all(&d, &expected);
    assert_eq!(ids_used(&d), (7, 3, 11));
}

// spec: README "Durability": a telnet put acknowledged by the `version` barrier is durable even when the same
// connection keeps sending afterwards and the daemon dies mid-stream.
#[test]
fn barrier_covers_puts_on_its_connection_even_while_others_stream() {
    let mut d = Daemon::start();
    let mut acked = d.telnet();
    let mut streaming = d.telnet();
    let mut expected = Vec::new();
    for round in 0..5i64 {
        let mut wire = String::new();
        for i in 0..100i64 {
            let ts = T + round * 1000 + i;
            wire.push_str(&format!("put crash.acked {ts} {i} host=a\n"));
            expected.push(format!("crash.acked {ts} {i} host=a"));
        }
        acked.write_all(wire.as_bytes()).unwrap();
        // Unacknowledged traffic on another connection with new names (UID assignment racing the barrier).
        let noise: String = (0..50).map(|i| format!("put crash.noise.r{round} {} {i} host=n{i}\n", T + i)).collect();
        streaming.write_all(noise.as_bytes()).unwrap();
        assert!(barrier(&mut acked).is_empty());
    }
    d.kill9();
    let d = d.restart();
    assert_eq!(scan(&d, "crash.acked"), normalize(expected));
}

/// The harness runs the binary Cargo built for this test target.
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
