//! Faults and hostile clients (issue 23; README "Durability" and "Limits"): a full disk loses nothing
//! acknowledged and heals by itself, descriptors running out starve nothing, idle and slow clients cannot lock
//! others out, held bodies cannot take the memory, and the telnet line limit does not depend on how TCP cuts the
//! stream. Every case asserts counts: points sent, acknowledged, readable. (`kill -9` under acknowledged load is
//! tests/crash.rs.)
//!
//! The disk cases mount a small tmpfs, which needs root: CI runs as root; elsewhere they fail unless
//! `RTSD_SKIP_ROOT_TESTS=1` says to skip them (and they say so).
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rtsd_compat_tests::{barrier, connect, expect_closed, Daemon, HttpConn};

const T0: i64 = 1_700_000_000;

/// A tmpfs of a given size mounted on a temporary directory; unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` when the test may skip (not root and `RTSD_SKIP_ROOT_TESTS` set).
    fn mount(size_mb: u64) -> Option<Tmpfs> {
        let dir = tempfile::Builder::new().prefix("rtsd-tmpfs-").tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).into_owned();
            if std::env::var_os("RTSD_SKIP_ROOT_TESTS").is_some() {
                eprintln!("SKIPPED: mounting a tmpfs needs root ({why})");
                return None;
            }
            panic!("mounting a tmpfs failed (needs root; RTSD_SKIP_ROOT_TESTS=1 skips this test): {why}");
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// Fills the file system holding `dir` with a ballast file until it is full, then gives back `leave` bytes.
fn fill(dir: &Path, leave: u64) -> PathBuf {
    let path = dir.join("ballast");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0xa5u8; 1 << 20];
    loop {
        match f.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = f.flush();
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(leave)).unwrap();
    path
}

/// A put body of `n` points, one per new series `fault.m{s=<first+i>}`, at T0.
fn body(first: u64, n: u64) -> String {
    let points: Vec<String> = (first..first + n)
        .map(|i| format!(r#"{{"metric":"fault.m","timestamp":{T0},"value":{i},"tags":{{"s":"s{i:07}"}}}}"#))
        .collect();
    format!("[{}]", points.join(","))
}

/// The series of `fault.m` `/api/query` returns at T0 and their values.
fn stored_series(d: &Daemon) -> Vec<(String, i64)> {
    let r = d.http("GET", &format!("/api/query?start={}&end={}&m=sum:fault.m%7Bs=*%7D", T0 - 1, T0 + 1), &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let mut out: Vec<(String, i64)> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["tags"]["s"].as_str().unwrap().to_string(), s["dps"][T0.to_string()].as_i64().unwrap()))
        .collect();
    out.sort();
    out
}

/// [`stored_series`] through a downsampled query (`1m-sum`), which reads the automatic rollups where they are
/// complete and rows not folded yet raw: each point alone in its minute, so each series' value is its point's
/// (an integer, answered as a double).
fn stored_series_1m(d: &Daemon) -> Vec<(String, i64)> {
    let path = format!("/api/query?start={}&end={}&m=sum:1m-sum:fault.m%7Bs=*%7D", T0 - 60, T0 + 60);
    let r = d.http("GET", &path, &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let minute = (T0 - T0.rem_euclid(60)).to_string();
    let mut out: Vec<(String, i64)> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            // Downsampled values are doubles (`5.0`), as in OpenTSDB 2.4.
            let v = s["dps"][&minute].as_f64().unwrap_or_else(|| panic!("{s}: {path}"));
            (s["tags"]["s"].as_str().unwrap().to_string(), v as i64)
        })
        .collect();
    out.sort();
    out
}

/// The series the series index lists for `fault.m` (`/api/search/lookup`).
fn indexed_series(d: &Daemon) -> usize {
    let r = d.http("GET", "/api/search/lookup?m=fault.m&limit=1000000", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["results"].as_array().unwrap().len()
}

fn expected(acked: &[u64]) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = acked.iter().map(|&i| (format!("s{i:07}"), i as i64)).collect();
    out.sort();
    out
}

fn metric_value(d: &Daemon, line_start: &str) -> u64 {
    let text = d.http("GET", "/metrics", &[], b"").text();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A daemon whose data directory is on `fs`, with the free-space reserve `min_free_mb` and small memtables.
fn start_on_small_disk(fs: &Tmpfs, min_free_mb: &str) -> Daemon {
    let settings =
        [("rtsd.storage.min_free_mb", min_free_mb), ("rtsd.memtable_mb", "8"), ("tsd.rollups.enable", "false")];
    Daemon::start_in(fs.path(), None, &settings)
}

/// Puts `batches` batches of `size` new series while the disk has room, each acknowledged; returns the next series
/// number and the acknowledged ones.
fn put_on_empty_disk(d: &Daemon, batches: u64, size: u64) -> (u64, Vec<u64>) {
    let mut next = 0;
    for _ in 0..batches {
        let r = d.post_json("/api/put", &body(next, size));
        assert_eq!(r.status, 204, "{}", r.text());
        next += size;
    }
    (next, (0..next).collect())
}

/// One request on a new connection, with short timeouts: the status, or `None` when the connection was closed
/// or refused before an answer.
fn try_request(addr: std::net::SocketAddr, method: &str, path: &str, body: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).ok()?;
    let text = String::from_utf8_lossy(&reply);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Puts batches of new series until one is refused; returns the acknowledged series and the refusal.
fn put_until_refused(
    d: &Daemon,
    next: &mut u64,
    batch: u64,
    max_batches: usize,
) -> (Vec<u64>, rtsd_compat_tests::Response) {
    let mut acked = Vec::new();
    for _ in 0..max_batches {
        let r = d.post_json("/api/put", &body(*next, batch));
        match r.status {
            204 => acked.extend(*next..*next + batch),
            _ => return (acked, r),
        }
        *next += batch;
    }
    panic!("the disk never filled after {} points", acked.len());
}

/// `tsd.connectionmgr.exceptions type=<kind>` from `/api/stats` (values are strings there, as in 2.4).
fn exceptions(d: &Daemon, kind: &str) -> u64 {
    let stats = d.http("GET", "/api/stats", &[], b"").json();
    let entry = stats
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "tsd.connectionmgr.exceptions" && s["tags"]["type"] == kind)
        .unwrap_or_else(|| panic!("no exceptions type={kind} in {stats}"));
    entry["value"].as_str().unwrap().parse().unwrap()
}

fn poll_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

// Issue 23 items 1-4 and 7: the free-space guard refuses writes as transient (503, telnet error line), reads go
// on, writes come back by themselves once space is freed, and every acknowledged point stays readable.
#[test]
fn a_nearly_full_disk_refuses_writes_serves_reads_and_heals_without_a_restart() {
    let Some(fs) = Tmpfs::mount(96) else { return };
    let d = start_on_small_disk(&fs, "24");
    let (mut next, mut acked) = put_on_empty_disk(&d, 5, 200);
    // 8 MB free: below the 24 MB reserve.
    let ballast = fill(fs.path(), 8 << 20);
    // The guard looks at the free space every 100 ms: puts until then are stored (and acknowledged).
    let refused = poll_until(Duration::from_secs(5), || match d.post_json("/api/put", &body(next, 10)).status {
        204 => {
            acked.extend(next..next + 10);
            next += 10;
            false
        }
        status => status == 503,
    });
    assert!(refused, "puts were not refused below the reserve");
    let r = d.post_json("/api/put?details", &body(next, 3));
    assert_eq!((r.status, r.header("retry-after")), (503, Some("5")), "{}", r.text());
    let details = r.json();
    assert_eq!((details["success"].as_u64(), details["failed"].as_u64()), (Some(0), Some(3)), "{details}");
    assert_eq!(details["errors"].as_array().unwrap().len(), 3);
    assert!(details["errors"][0]["error"].as_str().unwrap().contains("rtsd.storage.min_free_mb"), "{details}");
    let r = d.post_json("/api/put", &body(next, 3));
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["code"], 503, "{}", r.text());
    // Telnet: a new series and a known one each get OpenTSDB's error line before the barrier's reply.
    let mut s = d.telnet();
    s.write_all(format!("put fault.m {T0} 1 s=new\nput fault.m {T0} 1 s=s0000000\n").as_bytes()).unwrap();
    let errors = barrier(&mut s);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| e.starts_with("put: HBase error: ") && e.contains("min_free_mb")), "{errors:?}");
    // Reads are served, whole; health says read-only; the refusals are counted.
    assert_eq!(stored_series(&d), expected(&acked));
    let health = d.http("GET", "/health", &[], b"");
    assert_eq!((health.status, health.json()["status"].as_str()), (503, Some("read-only")));
    assert!(metric_value(&d, "rtsd_storage_errors_total{kind=\"low_space\"}") >= 3);

    // Space comes back: writes are taken again within seconds, no restart.
    std::fs::remove_file(ballast).unwrap();
    let healed = poll_until(Duration::from_secs(10), || d.post_json("/api/put", &body(next, 10)).status == 204);
    assert!(healed, "writes did not resume after space was freed");
    acked.extend(next..next + 10);
    assert_eq!(d.http("GET", "/health", &[], b"").status, 200);
    assert_eq!(stored_series(&d), expected(&acked));
    assert_eq!(indexed_series(&d), acked.len());
    // The log says it once, not once per refused point.
    let lines = d.log_lines().iter().filter(|l| l.contains("storage failure")).count();
    assert!(lines <= 3, "{lines} storage-failure lines:\n{}", d.log_text());
}

// Issue 23 items 1-3: with no reserve, the disk really fills. Every acknowledged point stays readable and in
// the series index (once, the first 8,192 series went missing from the index), nothing refused is stored, and
// once space is freed the store heals by itself; a restart changes nothing.
#[test]
fn a_full_disk_loses_nothing_acknowledged_and_heals_by_itself() {
    let Some(fs) = Tmpfs::mount(96) else { return };
    let d = start_on_small_disk(&fs, "0");
    let (mut next, mut acked) = put_on_empty_disk(&d, 4, 500);
    // Leave 6 MB and keep writing new series until rtsd's own writes fill the disk (series log, flushes, the
    // series index): refusals are server errors, never 400.
    let ballast = fill(fs.path(), 6 << 20);
    let (more, refused) = put_until_refused(&d, &mut next, 1000, 400);
    assert!(!more.is_empty(), "some puts fit in the last 6 MB");
    acked.extend(more);
    assert!(matches!(refused.status, 503 | 500), "{} {}", refused.status, refused.text());
    let refused_first = next;
    // Reads while the disk is full are answered, with every acknowledged point, downsampled ones too.
    assert_eq!(stored_series(&d), expected(&acked));
    let (downsampled, want) = (stored_series_1m(&d), expected(&acked));
    assert_eq!(downsampled.len(), want.len(), "series of acknowledged points a downsampled query answers");
    assert_eq!(downsampled, want);
    assert_eq!(indexed_series(&d), acked.len(), "lookup lists the series the failing flush holds back");
    assert!(metric_value(&d, "rtsd_storage_errors_total{kind=\"no_space\"}") >= 1, "counted as no_space");

    // Free the space: within seconds puts are taken again and every acknowledged point is indexed and readable.
    std::fs::remove_file(ballast).unwrap();
    next = refused_first + 1000;
    let healed = poll_until(Duration::from_secs(30), || {
        let r = d.post_json("/api/put", &body(next, 10));
        if r.status == 204 {
            acked.extend(next..next + 10);
            true
        } else {
            false
        }
    });
    assert!(healed, "writes did not resume after space was freed:\n{}", d.log_text());
    assert!(
        poll_until(Duration::from_secs(30), || indexed_series(&d) == acked.len()),
        "index: {} of {}",
        indexed_series(&d),
        acked.len()
    );
    assert_eq!(stored_series(&d), expected(&acked));
    let d = d.restart();
    assert_eq!(stored_series(&d), expected(&acked), "after a restart");
    assert_eq!(indexed_series(&d), acked.len());
    eprintln!("full disk: {} points acknowledged, {} readable and indexed", acked.len(), acked.len());
}

// Issue 23 item 3: sockets cannot starve RocksDB of descriptors. Under an open-file limit of 256, hundreds of
// idle connections are held while a client writes and reads: every write is acknowledged and readable, and
// once the sockets close nothing is stuck.
#[test]
fn idle_sockets_at_the_descriptor_limit_starve_neither_writes_nor_reads() {
    let d = Daemon::start_in(&std::env::temp_dir(), Some(256), &[("tsd.rollups.enable", "false")]);
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..400 {
        match TcpStream::connect_timeout(&d.addr(), Duration::from_secs(2)) {
            Ok(s) => held.push(s),
            Err(_) => break,
        }
    }
    let mut acked = Vec::new();
    for b in 0..20u64 {
        // A fresh connection each time: at the cap, the longest-idle held socket makes room for it.
        let mut last = None;
        let put = || try_request(d.addr(), "POST", "/api/put", body(b * 50, 50).as_bytes());
        assert!(
            poll_until(Duration::from_secs(10), || {
                last = put();
                last == Some(204)
            }),
            "a put under the descriptor limit failed: {last:?}\n{}",
            d.log_text()
        );
        acked.extend(b * 50..b * 50 + 50);
    }
    assert_eq!(stored_series(&d), expected(&acked));
    assert_eq!(metric_value(&d, "rtsd_storage_errors_total{kind=\"no_files\"}"), 0, "RocksDB never ran out");
    drop(held);
    let r = d.post_json("/api/put", &body(5000, 10));
    assert_eq!(r.status, 204);
    acked.extend(5000..5010);
    assert_eq!(stored_series(&d), expected(&acked));
    let log = d.log_text();
    assert!(log.contains("file descriptors shared out") && log.contains("limit=256"), "{log}");
}

// Issue 23 items 5-6: silent connections, and connections stuck in their headers or bodies, cannot hold the
// connection limit; a silent connection is closed after the first-byte timeout.
#[test]
fn idle_and_slow_clients_cannot_lock_others_out() {
    let d = Daemon::start_with(&[
        ("tsd.core.connections.limit", "10"),
        ("rtsd.network.first_byte_timeout_secs", "3"),
        ("rtsd.http.request_timeout_secs", "30"),
    ]);
    let mut holders = Vec::new();
    for i in 0..10 {
        let mut s = connect(d.addr());
        match i % 3 {
            0 => {}                                                                               // silent
            1 => s.write_all(b"POST /api/put HTTP/1.1\r\nHost: x\r\n").unwrap(),                  // partial headers
            _ => s.write_all(b"POST /api/put HTTP/1.1\r\nContent-Length: 100\r\n\r\n[").unwrap(), // partial body
        }
        holders.push(s);
    }
    std::thread::sleep(Duration::from_millis(1200));
    // Eleven clients in turn each get an answer: the idle holders make room.
    for _ in 0..11 {
        let r = HttpConn::new(d.addr()).request("GET", "/api/version", &[], b"");
        assert_eq!(r.status, 200);
    }
    let mut silent = connect(d.addr());
    let started = Instant::now();
    expect_closed(&mut silent);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(2), "closed too early: {waited:?}");
    assert!(exceptions(&d, "timeout") >= 1);
}

// Issue 23 items 5 and 7: request bodies share one budget, a declared length over the limit is refused before
// reading, and a body that never completes is answered 408 once its time is up.
#[test]
fn held_bodies_share_a_budget_and_time_out() {
    let d = Daemon::start_with(&[
        ("rtsd.http.max_buffered_bytes", "1048576"),
        ("rtsd.http.request_timeout_secs", "3"),
        ("rtsd.http.max_body_bytes", "1000000"),
    ]);
    // A declared 10 GB: 413 at once, nothing read.
    let mut c = HttpConn::new(d.addr());
    c.send_raw(b"POST /api/put HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n[");
    let r = c.read_response("POST");
    assert_eq!(r.status, 413, "{}", r.text());
    // Three bodies of 900 KB each send 400 KB and hold: 1.2 MB would exceed the 1 MB budget.
    let chunk = vec![b' '; 400_000];
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = HttpConn::new(d.addr());
        c.send_raw(b"POST /api/put HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n");
        c.send_raw(&chunk);
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut third = HttpConn::new(d.addr());
    third.send_raw(b"POST /api/put HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n");
    third.send_raw(&chunk);
    let r = third.read_response("POST");
    assert_eq!((r.status, r.header("retry-after")), (503, Some("5")), "{}", r.text());
    // The held ones time out (408) and give their room back: a whole body goes through afterwards.
    for mut c in held {
        let r = c.read_response("POST");
        assert_eq!(r.status, 408, "{}", r.text());
    }
    let r = d.post_json("/api/put", &body(0, 1000));
    assert_eq!(r.status, 204, "{}", r.text());
}

// Issue 23 items 6-7 and spec ingest §1.2: a 1025-byte line closes the connection without a reply and a
// 1024-byte one is stored, whatever byte the stream is cut at.
#[test]
fn the_telnet_line_limit_holds_at_every_segmentation() {
    let d = Daemon::start();
    let head = format!("put line.m {T0} 1 k=");
    let line = |len: usize| format!("{head}{}\n", "v".repeat(len - head.len()));
    let (ok, long) = (line(1024), line(1025));
    assert_eq!((ok.len(), long.len()), (1025, 1026));
    // Two writes with a pause between them: two TCP segments, two reads on the daemon's side.
    let send_split = |text: &str, at: usize| -> TcpStream {
        let mut s = connect(d.addr());
        s.set_nodelay(true).unwrap();
        s.write_all(&text.as_bytes()[..at]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        // The daemon may have closed already (the first part was over the limit).
        let _ = s.write_all(&text.as_bytes()[at..]);
        s
    };
    for at in 1..long.len() {
        let mut s = send_split(&long, at);
        // No reply of any kind, the `version` included: the connection is closed.
        let _ = s.write_all(b"version\n");
        expect_closed(&mut s);
    }
    for at in (1..ok.len()).step_by(37) {
        let mut s = send_split(&ok, at);
        assert_eq!(barrier(&mut s), Vec::<String>::new(), "cut at {at}");
    }
    let r = d.http("GET", &format!("/api/query?start={}&end={}&m=sum:line.m", T0 - 1, T0 + 1), &[], b"");
    assert_eq!(r.json()[0]["dps"][T0.to_string()], 1, "{}", r.text());
    assert_eq!(exceptions(&d, "closed"), long.len() as u64 - 1, "one closed connection per cut");
}
