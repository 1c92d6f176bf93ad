//! rtsd on HBase under faults (issue 21 §6), the ones `rtsd_on_hbase.rs` does not cover (a region server SIGKILLed
//! under writes, a writing node SIGKILLed). One test bed for the whole binary; the scenarios run in order on it,
//! each on metrics of its own, and each counts points sent, acknowledged and stored:
//!
//! 1. **A region split and a balancer move during ingest and during long queries through rtsd.** Node A takes
//!    `/api/put?sync` batches into the region being split and moved while node B answers the same query again and
//!    again (a scan of 2,400 rows over both halves of the split): every acknowledged point is read back, and every
//!    answer is complete to the point and to the sum, or an error; never a short 200.
//! 2. **A ZooKeeper restart under ingest.** ZooKeeper is stopped and started again (its data kept) while node A
//!    takes batches: ingest goes on or recovers by itself, and a node started afterwards (it finds `hbase:meta`
//!    through ZooKeeper) reads back every acknowledged point.
//! 3. **HBase entirely down** (every region server and the master stopped, their data kept; ZooKeeper up): HTTP puts
//!    get a 503 with OpenTSDB's error JSON and `Retry-After`, telnet puts get one `put: HBase error: ...` line per
//!    point, queries get a 424 error (also through a node that never resolved the metric's name), each within a
//!    bound set by `hbase.client.operation.timeout`; once HBase is back, ingest resumes by itself and every point
//!    acknowledged before and after the outage is read back, through the writer and through the other node.
//!
//! Telnet puts are held by their node (logged in HBase) until its next flush, `rtsd.storage.hbase.flush_ms`; a
//! read through the writer writes them into their rows first, so each scenario reads through the writer before
//! another node reads what it took over telnet (`sync` puts are in their rows when answered).
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rtsd_compat_tests::testbed::{points_by_host, script, Testbed};
use rtsd_compat_tests::{barrier, connect, HttpConn, Response};

/// `hbase.client.operation.timeout` of the nodes (ms): how long a storage call retries before the request fails.
/// Short, so the outage is reported in seconds; long enough for a split's or a move's few seconds offline.
const OPERATION_TIMEOUT_MS: u64 = 6000;
/// The bound on any answer while HBase is down: a few storage calls' deadlines, never a hang.
const ANSWER_BOUND: Duration = Duration::from_secs(3 * OPERATION_TIMEOUT_MS / 1000 + 5);

/// Points by (host, timestamp).
type Points = BTreeMap<(String, i64), f64>;
/// Points in the order they are sent: ((host, timestamp), value).
type PointList = Vec<((String, i64), f64)>;

/// What a writer sent, what was acknowledged, and what was refused (with an error: may or may not be stored).
#[derive(Default, Debug)]
struct Ledger {
    sent: usize,
    acked: Points,
    refused: Points,
    refused_batches: usize,
    /// The first few refusals' answers, for the report.
    refusals: Vec<String>,
}

impl Ledger {
    fn absorb(&mut self, other: Ledger) {
        self.sent += other.sent;
        self.acked.extend(other.acked);
        self.refused.extend(other.refused);
        self.refused_batches += other.refused_batches;
        self.refusals.extend(other.refusals);
    }

    /// Reads the metric back through `addr` and checks every acknowledged point is there with its value, and
    /// that nothing is there that was never sent. Returns how many points are stored.
    fn check_stored(&self, label: &str, addr: SocketAddr, metric: &str, start: i64, end: i64) -> usize {
        let path = format!("/api/query?start={start}&end={end}&m=sum:{metric}%7Bhost=*%7D");
        // An error (regions still opening after a restart) is asked again; a 200 must hold everything.
        let deadline = Instant::now() + Duration::from_secs(90);
        let stored = loop {
            match points_by_host(addr, &path) {
                Ok(stored) => break stored,
                Err((s, b)) if Instant::now() < deadline => {
                    eprintln!("rtsd_on_hbase_faults: {label}: read back answered {s}, asking again: {b}");
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err((s, b)) => panic!("{label}: read back {s}: {b}"),
            }
        };
        let missing: Vec<_> = self.acked.iter().filter(|(k, v)| stored.get(*k) != Some(*v)).collect();
        assert!(
            missing.is_empty(),
            "{label}: {} of {} acknowledged points not read back (or another value), e.g. {:?}",
            missing.len(),
            self.acked.len(),
            &missing[..missing.len().min(5)]
        );
        let unknown: Vec<_> =
            stored.iter().filter(|(k, v)| self.acked.get(*k) != Some(*v) && self.refused.get(*k) != Some(*v)).collect();
        assert!(
            unknown.is_empty(),
            "{label}: points stored that were never sent: {:?}",
            &unknown[..unknown.len().min(5)]
        );
        let stored_refused = stored.len() - self.acked.len();
        eprintln!(
            "rtsd_on_hbase_faults: {label}: {} points sent, {} acknowledged, {} refused ({} batches), {} stored \
             ({} of the refused)",
            self.sent,
            self.acked.len(),
            self.refused.len(),
            self.refused_batches,
            stored.len(),
            stored_refused
        );
        for refusal in &self.refusals {
            eprintln!("rtsd_on_hbase_faults: {label}: a batch refused: {refusal}");
        }
        stored.len()
    }
}

/// A `/api/put` body of `points` of `metric`.
fn put_body(metric: &str, points: &[((String, i64), f64)]) -> String {
    let items: Vec<String> = points
        .iter()
        .map(|((host, t), v)| {
            format!(r#"{{"metric":"{metric}","timestamp":{t},"value":{v},"tags":{{"host":"{host}"}}}}"#)
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// One request on a fresh connection, with a read timeout well past [`ANSWER_BOUND`]; the answer and its time.
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (Response, Duration) {
    let started = Instant::now();
    let mut conn = HttpConn::new(addr);
    conn.stream().set_read_timeout(Some(Duration::from_secs(120))).expect("set read timeout");
    let headers: &[(&str, &str)] = if body.is_empty() { &[] } else { &[("Content-Type", "application/json")] };
    let r = conn.request(method, path, headers, body.as_bytes());
    (r, started.elapsed())
}

/// Posts one batch with `sync`; records it as acknowledged (200) or refused (a 503 with OpenTSDB's error JSON).
/// Anything else fails the test: a 2xx for a batch not stored, or an error a client would not resend.
fn post_batch(ledger: &mut Ledger, addr: SocketAddr, metric: &str, points: PointList) -> u16 {
    ledger.sent += points.len();
    let (r, _) = request(addr, "POST", "/api/put?sync&details", &put_body(metric, &points));
    match r.status {
        200 => {
            let v = r.json();
            assert_eq!((v["success"].as_u64(), v["failed"].as_u64()), (Some(points.len() as u64), Some(0)), "{v}");
            ledger.acked.extend(points);
        }
        503 => {
            check_refused(&r, points.len());
            ledger.refused.extend(points);
            ledger.refused_batches += 1;
            if ledger.refusals.len() < 3 {
                let v = r.json();
                ledger.refusals.push(v["errors"][0]["error"].as_str().unwrap_or_default().to_string());
            }
        }
        other => panic!("{metric}: a put batch answered {other}: {}", r.text()),
    }
    r.status
}

/// A put batch of `n` points refused for want of storage, as `/api/put?details` answers it: 503, `Retry-After`,
/// every point failed with OpenTSDB's `Storage exception: ...`.
fn check_refused(r: &Response, n: usize) {
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("Retry-After").is_some(), "a 503 without Retry-After: {:?}", r.headers);
    let v = r.json();
    assert_eq!((v["success"].as_u64(), v["failed"].as_u64()), (Some(0), Some(n as u64)), "{v}");
    let errors = v["errors"].as_array().unwrap_or_else(|| panic!("no errors list: {v}"));
    assert_eq!(errors.len(), n, "{v}");
    for e in errors {
        let text = e["error"].as_str().unwrap_or_default();
        assert!(text.starts_with("Storage exception: "), "{e}");
    }
}

/// `n` points of hosts `w0..w4` from timestamp `t0` on, one per second, values unique to the timestamp.
fn batch_points(t0: i64, n: usize) -> PointList {
    (0..n as i64).map(|i| ((format!("w{}", i % 5), t0 + i), (t0 + i) as f64 * 0.5)).collect()
}

/// Posts batches of 20 points every `pause` until `stop` is set, each batch's timestamps after the last.
fn writer(addr: SocketAddr, metric: &str, t0: i64, stop: &AtomicBool, pause: Duration) -> Ledger {
    let mut ledger = Ledger::default();
    let mut t = t0;
    while !stop.load(Ordering::Relaxed) {
        post_batch(&mut ledger, addr, metric, batch_points(t, 20));
        t += 20;
        std::thread::sleep(pause);
    }
    ledger
}

/// A counter of a node's `/api/stats` (`tsd.hbase.nsre`: regions its HBase client found split, moved or opening).
fn stat(addr: SocketAddr, metric: &str) -> u64 {
    let (r, _) = request(addr, "GET", "/api/stats", "");
    let v = r.json();
    let found = v.as_array().expect("stats").iter().find(|s| s["metric"] == metric);
    let value = found.unwrap_or_else(|| panic!("no {metric} in /api/stats: {v}"))["value"].clone();
    value.as_str().and_then(|s| s.parse().ok()).or(value.as_u64()).unwrap_or_else(|| panic!("{metric}: {value}"))
}

/// Sets the flag when dropped: a check failing on the main thread inside `std::thread::scope` stops the writer
/// and query loops, so the scope can join them and the failure is reported instead of the test hanging.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The UID of an existing metric, as `/api/uid/assign` reports it ("Name already exists with UID: 00000A").
fn metric_uid(addr: SocketAddr, metric: &str) -> String {
    let (r, _) = request(addr, "GET", &format!("/api/uid/assign?metric={metric}"), "");
    let v = r.json();
    let text = v["metric_errors"][metric].as_str().unwrap_or_else(|| panic!("{metric}: {v}"));
    text.strip_prefix("Name already exists with UID: ").unwrap_or_else(|| panic!("{metric}: {text}")).to_string()
}

/// A row key prefix (metric UID, base hour) as HBaseTool's row argument (`\xNN` for every byte).
fn binary_row(uid_hex: &str, hour: i64) -> String {
    let mut bytes: Vec<u8> =
        (0..uid_hex.len()).step_by(2).map(|i| u8::from_str_radix(&uid_hex[i..i + 2], 16).unwrap()).collect();
    bytes.extend_from_slice(&(hour as u32).to_be_bytes());
    bytes.iter().map(|b| format!("\\x{b:02X}")).collect()
}

// --- 1. split and move --------------------------------------------------------------------------------------------

const Q_HOSTS: i64 = 100;
const Q_HOURS: i64 = 24;
const Q_STEP: i64 = 300;
const Q_BASE: i64 = 1_700_000_000 - 1_700_000_000 % 3600;

/// The long query's point of host `h` at `t`: not linear in time, so an interpolation cannot stand in for a lost
/// row.
fn q_value(h: i64, t: i64) -> i64 {
    h * 1000 + (t / Q_STEP) * (t / Q_STEP) % 97
}

/// What `zimsum:fq.m` answers over the whole data set: timestamp -> sum over hosts.
fn q_expected() -> BTreeMap<i64, f64> {
    let mut sums = BTreeMap::new();
    for t in (Q_BASE..Q_BASE + Q_HOURS * 3600).step_by(Q_STEP as usize) {
        sums.insert(t, (0..Q_HOSTS).map(|h| q_value(h, t)).sum::<i64>() as f64);
    }
    sums
}

/// Writes the long query's data set through telnet (2,400 rows of 12 points).
fn load_query_data(addr: SocketAddr) -> usize {
    let mut tn = connect(addr);
    // The barrier answers once HBase has every point: on a loaded machine that took longer than the harness's
    // 10 s read timeout.
    tn.set_read_timeout(Some(std::time::Duration::from_secs(120))).expect("set read timeout");
    let mut sent = 0;
    for h in 0..Q_HOSTS {
        let mut lines = String::new();
        for t in (Q_BASE..Q_BASE + Q_HOURS * 3600).step_by(Q_STEP as usize) {
            lines.push_str(&format!("put fq.m {t} {} host=q{h:03}\n", q_value(h, t)));
            sent += 1;
        }
        tn.write_all(lines.as_bytes()).expect("send puts");
    }
    let errors = barrier(&mut tn);
    assert!(errors.is_empty(), "loading the query data: {errors:?}");
    sent
}

/// Asks the long query once: true for a complete answer, false for an error (OpenTSDB's envelope, kept in
/// `errors`). A 200 that differs from the data set in any point fails the test.
fn long_query(addr: SocketAddr, expected: &BTreeMap<i64, f64>, errors: &mut Vec<String>) -> bool {
    let path = format!("/api/query?start={Q_BASE}&end={}&m=zimsum:fq.m", Q_BASE + Q_HOURS * 3600 - 1);
    let (r, _) = request(addr, "GET", &path, "");
    if r.status != 200 {
        assert!(r.text().contains("\"error\""), "a {} without OpenTSDB's error envelope: {}", r.status, r.text());
        errors.push(format!("{} {}", r.status, r.text().chars().take(200).collect::<String>()));
        return false;
    }
    let v = r.json();
    let series = v.as_array().expect("series");
    assert_eq!(series.len(), 1, "{}", r.text().chars().take(300).collect::<String>());
    let got: BTreeMap<i64, f64> = series[0]["dps"]
        .as_object()
        .expect("dps")
        .iter()
        .map(|(t, v)| (t.parse().unwrap(), v.as_f64().unwrap()))
        .collect();
    let wrong: Vec<_> = expected.iter().filter(|(t, v)| got.get(t) != Some(v)).take(5).collect();
    assert!(
        wrong.is_empty() && got.len() == expected.len(),
        "a short or wrong 200 for the long query: {} timestamps (expected {}), e.g. expected {wrong:?}",
        got.len(),
        expected.len()
    );
    true
}

/// Asks the long query until `stop`; returns (complete answers, error answers' texts).
fn query_loop(addr: SocketAddr, stop: &AtomicBool, expected: &BTreeMap<i64, f64>) -> (usize, Vec<String>) {
    let (mut complete, mut errors) = (0, Vec::new());
    while !stop.load(Ordering::Relaxed) {
        complete += long_query(addr, expected, &mut errors) as usize;
    }
    (complete, errors)
}

fn split_and_move(tb: &Testbed, a: SocketAddr, b: SocketAddr) {
    // issue 21 §6: "A region split and a balancer move during ingest and during a long query".
    let started = Instant::now();
    let loaded = load_query_data(a);
    let expected = q_expected();
    assert_eq!(loaded, (Q_HOSTS * Q_HOURS * 3600 / Q_STEP) as usize);
    // Telnet puts are held by their node (logged in HBase) until its next flush; a read through that node writes
    // them into their rows first, after which every node reads them.
    let mut errors = Vec::new();
    assert!(long_query(a, &expected, &mut errors), "the writer's own read: {errors:?}");
    let uid = metric_uid(a, "fq.m");
    // The split point: the metric's rows of hour 12 on; the upper daughter (which the writer's rows, hours 24 and
    // later, are in too) is then moved to another server.
    let split_row = binary_row(&uid, Q_BASE + 12 * 3600);
    let writer_t0 = Q_BASE + Q_HOURS * 3600;
    let nsre_before = (stat(a, "tsd.hbase.nsre"), stat(b, "tsd.hbase.nsre"));
    let stop = AtomicBool::new(false);
    let (ledger, (complete, errors), tool) = std::thread::scope(|s| {
        let w = s.spawn(|| writer(a, "fq.m", writer_t0, &stop, Duration::from_millis(50)));
        let q = s.spawn(|| query_loop(b, &stop, &expected));
        let _stop = StopOnDrop(&stop);
        // One HBaseTool JVM: the regions, the split (it waits until both daughters are open), the move of the upper
        // daughter to another server (it waits until the region is open there), the regions again.
        let tool = tb.hbase_tool_each(&[
            &["regions", "tsdb"],
            &["split", "tsdb", &split_row],
            &["move", "tsdb", &split_row],
            &["regions", "tsdb"],
        ]);
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        (w.join().unwrap(), q.join().unwrap(), tool)
    });
    let (before, moved_to, after) = (&tool[0], tool[2].trim(), &tool[3]);
    eprintln!(
        "rtsd_on_hbase_faults: tsdb regions before:\n{before}after the split and the move (to {moved_to}):\n{after}"
    );
    assert_eq!(after.lines().count(), before.lines().count() + 1, "no split happened");
    let split_hex = split_row.replace("\\x", "").to_ascii_lowercase();
    assert!(
        after.lines().any(|l| l.starts_with(&format!("{split_hex} ")) && l.ends_with(moved_to)),
        "the upper daughter ({split_hex}) is not on {moved_to}"
    );
    // Both nodes met the regions as they changed: each found the split parent or the moved daughter gone from
    // where its client had cached it (the writer's rows and the query's second half are in the moved daughter).
    let nsre = (stat(a, "tsd.hbase.nsre") - nsre_before.0, stat(b, "tsd.hbase.nsre") - nsre_before.1);
    eprintln!(
        "rtsd_on_hbase_faults: regions found split or moved: {} by the writing node, {} by the querying node",
        nsre.0, nsre.1
    );
    assert!(nsre.0 > 0 && nsre.1 > 0, "a node never met the split or the move: {nsre:?}");
    for t in &errors {
        eprintln!("rtsd_on_hbase_faults: a query during the split/move failed: {t}");
    }
    eprintln!(
        "rtsd_on_hbase_faults: split+move: {complete} long queries answered completely ({} points each), {} \
         with an error, none short ({:.0}s)",
        loaded,
        errors.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(complete >= 3, "only {complete} queries answered during the split and the move");
    let stored = ledger.check_stored("split+move ingest", b, "fq.m", writer_t0, writer_t0 + 100_000);
    assert!(stored >= ledger.acked.len());
    // And the whole data set once more, after the regions settled.
    let mut errors = Vec::new();
    assert!(long_query(b, &expected, &mut errors), "after the split and the move: {errors:?}");
}

// --- 2. ZooKeeper restart ------------------------------------------------------------------------------------------

fn zookeeper_restart(tb: &Testbed, a: SocketAddr) {
    // issue 21 §6: "A ZooKeeper restart".
    let started = Instant::now();
    let t0 = 1_700_200_000;
    let stop = AtomicBool::new(false);
    let (mut ledger, after_restart) = std::thread::scope(|s| {
        let w = s.spawn(|| writer(a, "fz.m", t0, &stop, Duration::from_millis(100)));
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(1));
        let stopping = Instant::now();
        script("hbase-cluster", &["stop-zk", tb.dir()]);
        let stopped = stopping.elapsed();
        // Down for less than HBase's ZooKeeper session timeout (10 s): the region servers keep their sessions.
        std::thread::sleep(Duration::from_secs(3));
        let starting = Instant::now();
        script("hbase-cluster", &["start-zk", tb.dir()]);
        eprintln!(
            "rtsd_on_hbase_faults: ZooKeeper stopped in {:.1}s, down 3s, started again in {:.1}s",
            stopped.as_secs_f64(),
            starting.elapsed().as_secs_f64()
        );
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        let during = w.join().unwrap();
        // After the restart: every batch is acknowledged.
        let mut after = Ledger::default();
        let t_after = t0 + during.sent as i64;
        for i in 0..10 {
            let status = post_batch(&mut after, a, "fz.m", batch_points(t_after + i * 20, 20));
            assert_eq!(status, 200, "a batch after ZooKeeper came back was refused");
        }
        (during, after)
    });
    let after_acked = after_restart.acked.len();
    ledger.absorb(after_restart);
    // The cluster kept its region servers and master (their sessions outlived the restart).
    let status = script("hbase-cluster", &["status", tb.dir()]);
    for name in ["master", "rs1", "rs2", "rs3", "zk"] {
        assert!(
            status.lines().any(|l| l.starts_with(&format!("{name} running"))),
            "{name} after the restart: {status}"
        );
    }
    // A node started now finds hbase:meta through the restarted ZooKeeper and reads everything back.
    let c = tb.start_rtsd(&[("hbase.client.operation.timeout", &OPERATION_TIMEOUT_MS.to_string())]);
    ledger.check_stored("zookeeper restart", c.addr(), "fz.m", t0, t0 + 100_000);
    eprintln!(
        "rtsd_on_hbase_faults: zookeeper restart: {after_acked} points after it all acknowledged ({:.0}s)",
        started.elapsed().as_secs_f64()
    );
}

// --- 3. HBase entirely down ----------------------------------------------------------------------------------------

/// Sends `n` telnet puts of known series (hosts `w0..w4`) from `t0` on, then `version`; returns the lines answered
/// before the version reply.
fn telnet_puts(tn: &mut TcpStream, metric: &str, t0: i64, n: usize) -> (PointList, Vec<String>) {
    let points = batch_points(t0, n);
    let mut lines = String::new();
    for ((host, t), v) in &points {
        lines.push_str(&format!("put {metric} {t} {v} host={host}\n"));
    }
    tn.write_all(lines.as_bytes()).expect("send puts");
    (points, barrier(tn))
}

fn hbase_down(tb: &Testbed, a: SocketAddr, b: SocketAddr) {
    // issue 21 §6: "HBase entirely down".
    let started = Instant::now();
    let metric = "fd.m";
    let t0 = 1_700_400_000;
    let mut http = Ledger::default();
    let mut telnet = Ledger::default();
    let mut t = t0;
    // Before: 5 batches over HTTP and 100 puts over telnet, all acknowledged.
    for _ in 0..5 {
        assert_eq!(post_batch(&mut http, a, metric, batch_points(t, 40)), 200);
        t += 40;
    }
    let mut tn = connect(a);
    tn.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let (points, errors) = telnet_puts(&mut tn, metric, t, 100);
    assert!(errors.is_empty(), "{errors:?}");
    telnet.sent += points.len();
    telnet.acked.extend(points);
    t += 100;

    let down_at = Instant::now();
    script("hbase-cluster", &["stop-hbase", tb.dir()]);
    eprintln!(
        "rtsd_on_hbase_faults: HBase stopped (region servers and master) in {:.0}s",
        down_at.elapsed().as_secs_f64()
    );

    // While it is down, all at once: HTTP puts (with details, plain, and a new metric whose UID cannot be
    // assigned), telnet puts, and queries through node A and through node B, which never resolved the metric.
    let query = format!("/api/query?start={t0}&end={}&m=sum:{metric}%7Bhost=*%7D", t0 + 100_000);
    let (details, plain, new_name, (tn_points, tn_lines), (qa, qa_time), (qb, qb_time)) = std::thread::scope(|s| {
        let tb0 = t;
        let details = s.spawn(move || {
            let points = batch_points(tb0, 40);
            let (r, took) = request(a, "POST", "/api/put?sync&details", &put_body(metric, &points));
            (points, r, took)
        });
        let plain = s.spawn(move || {
            let points = batch_points(tb0 + 40, 40);
            let (r, took) = request(a, "POST", "/api/put?sync", &put_body(metric, &points));
            (points, r, took)
        });
        let new_name = s.spawn(move || {
            let points = batch_points(tb0, 10);
            let (r, took) = request(a, "POST", "/api/put?sync&details", &put_body("fd.never", &points));
            (points, r, took)
        });
        let tn_ref = &mut tn;
        let telnet_during = s.spawn(move || telnet_puts(tn_ref, metric, tb0 + 80, 50));
        let q = query.clone();
        let qa = s.spawn(move || request(a, "GET", &q, ""));
        let q = query.clone();
        let qb = s.spawn(move || request(b, "GET", &q, ""));
        (
            details.join().unwrap(),
            plain.join().unwrap(),
            new_name.join().unwrap(),
            telnet_during.join().unwrap(),
            qa.join().unwrap(),
            qb.join().unwrap(),
        )
    });
    t += 130;
    let outage_answered = down_at.elapsed();
    let slowest_put = [details.2, plain.2, new_name.2].into_iter().max().unwrap();
    // HTTP: 503 with OpenTSDB's error forms, within the bound.
    let (points, r, took) = details;
    check_refused(&r, points.len());
    assert!(took < ANSWER_BOUND, "?details put answered after {took:?}");
    http.sent += points.len();
    http.refused.extend(points);
    http.refused_batches += 1;
    let (points, r, took) = plain;
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("Retry-After").is_some());
    let v = r.json();
    assert_eq!(v["error"]["code"], 503, "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or_default().starts_with("Storage exception: "), "{v}");
    assert!(took < ANSWER_BOUND, "plain put answered after {took:?}");
    http.sent += points.len();
    http.refused.extend(points);
    http.refused_batches += 1;
    let (points, r, took) = new_name;
    check_refused(&r, points.len());
    assert!(took < ANSWER_BOUND, "put of a new name answered after {took:?}");
    // Telnet: one error line per put, never silence.
    let refused_lines = tn_lines.iter().filter(|l| l.starts_with("put: HBase error: ")).count();
    assert_eq!(refused_lines, tn_points.len(), "telnet puts while HBase is down answered {tn_lines:?}");
    assert_eq!(tn_lines.len(), tn_points.len(), "{tn_lines:?}");
    telnet.sent += tn_points.len();
    telnet.refused.extend(tn_points);
    telnet.refused_batches += 1;
    // Queries: a clear error, no 200 with what could be read, no 400 "No such name".
    for (node, r, took) in [("A", &qa, qa_time), ("B (cold caches)", &qb, qb_time)] {
        assert_eq!(r.status, 424, "query through node {node} while HBase is down: {}", r.text());
        let v = r.json();
        assert_eq!(v["error"]["code"], 424, "{v}");
        assert!(took < ANSWER_BOUND, "query through node {node} answered after {took:?}");
    }
    eprintln!(
        "rtsd_on_hbase_faults: HBase down: 3 HTTP batches 503 (slowest {:.1}s), {} telnet puts answered with errors, \
         queries 424 in {:.1}s (A) and {:.1}s (B), all within {:.0}s",
        slowest_put.as_secs_f64(),
        refused_lines,
        qa_time.as_secs_f64(),
        qb_time.as_secs_f64(),
        outage_answered.as_secs_f64()
    );

    let up_at = Instant::now();
    script("hbase-cluster", &["start-hbase", tb.dir()]);
    let restarted = up_at.elapsed();
    // Recovery by itself: the first batch after HBase is back is acknowledged (retried while regions open).
    let mut first_ack = None;
    while first_ack.is_none() {
        assert!(up_at.elapsed() < Duration::from_secs(180), "no put acknowledged 180 s after HBase was started again");
        if post_batch(&mut http, a, metric, batch_points(t, 40)) == 200 {
            first_ack = Some(up_at.elapsed());
        }
        t += 40;
    }
    for _ in 0..4 {
        assert_eq!(post_batch(&mut http, a, metric, batch_points(t, 40)), 200, "a batch after recovery was refused");
        t += 40;
    }
    // The same telnet connection takes puts again.
    let (points, errors) = telnet_puts(&mut tn, metric, t, 100);
    assert!(errors.is_empty(), "telnet puts after recovery: {errors:?}");
    telnet.sent += points.len();
    telnet.acked.extend(points);
    eprintln!(
        "rtsd_on_hbase_faults: HBase started again in {:.0}s; first put acknowledged {:.1}s after the start began",
        restarted.as_secs_f64(),
        first_ack.unwrap().as_secs_f64()
    );
    // Exact counts: 300 points acknowledged before, 300 after; 80 HTTP and 50 telnet points refused while HBase
    // was down, plus the batches refused while it came back.
    let probes_refused = http.refused_batches - 2;
    assert_eq!((http.acked.len(), telnet.acked.len()), (400, 200), "points acknowledged over HTTP and telnet");
    assert_eq!((http.refused.len(), telnet.refused.len()), (80 + 40 * probes_refused, 50), "points refused");
    let mut all = http;
    all.absorb(telnet);
    // Through the writer (whose read writes the telnet points it holds into their rows), then through node B,
    // which failed its query during the outage and now answers it.
    all.check_stored("HBase down (HTTP and telnet), node A", a, metric, t0, t0 + 100_000);
    let stored = all.check_stored("HBase down (HTTP and telnet)", b, metric, t0, t0 + 100_000);
    assert!(stored >= all.acked.len());
    eprintln!("rtsd_on_hbase_faults: HBase down scenario done ({:.0}s)", started.elapsed().as_secs_f64());
}

#[test]
fn rtsd_on_hbase_rides_out_faults() {
    let started = Instant::now();
    let tb = Testbed::start("rtsd_on_hbase_faults");
    let timeout = OPERATION_TIMEOUT_MS.to_string();
    let settings = [("hbase.client.operation.timeout", timeout.as_str()), ("hbase.rpc.timeout", "3000")];
    // Node A writes, node B reads.
    let a = tb.start_rtsd(&settings);
    let b = tb.start_rtsd(&settings);

    split_and_move(&tb, a.addr(), b.addr());
    zookeeper_restart(&tb, a.addr());
    hbase_down(&tb, a.addr(), b.addr());

    eprintln!("rtsd_on_hbase_faults: all scenarios passed in {:.0}s", started.elapsed().as_secs_f64());
    drop(a);
    drop(b);
    drop(tb);
}
