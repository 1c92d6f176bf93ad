//! The Chukwa collector port against an emulated agent (spec: chukwa.md §3, §6, §8; the emulator is
//! `rtsd_compat_tests::chukwa_agent`).
//!
//! The agent tails a log (one record per line) and sends sigar samples; replies get lost, posts are re-executed
//! byte for byte, the agent crashes and re-reads from its checkpoint with other read sizes, the log is rotated,
//! posts go compressed and chunked, and the daemon is killed with SIGKILL mid-stream and restarted. Every record
//! the collector received must be stored exactly once: the points are queryable through `/api/query` and HICC,
//! and the `chukwa.ingest.records` series (written in the same atomic write as the data) must add up to exactly
//! the number of distinct records, which a single duplicate would break.
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

use rtsd_compat_tests::chukwa_agent::{
    encode_post, sigar_cpu_combined, Adaptor, Agent, ChunkOut, CollectorConn, Fate, FileTailer, Sigar,
};
use rtsd_compat_tests::engine::skip_on_rocksdb;
use rtsd_compat_tests::{Daemon, HttpConn};

/// 2023-11-14T22:13:20Z.
const T0: i64 = 1_700_000_000_000;
const LINE_RULE: &str = r"^(?P<time>\S+ \S+) \w+ \w+ latency=(?P<latency>\d+)";

/// A port nobody listens on now (the daemon keeps it across restarts, as an agent's collector URL does).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(port: u16, extra: &[(&str, &str)]) -> Daemon {
    let port = port.to_string();
    let mut settings = vec![
        ("rtsd.chukwa.port", port.as_str()),
        ("rtsd.chukwa.hicc.timezone", "UTC"),
        ("rtsd.chukwa.rule.AppLog.regex", LINE_RULE),
        ("rtsd.chukwa.rule.AppLog.timezone", "UTC"),
    ];
    settings.extend_from_slice(extra);
    let d = Daemon::start_with(&settings);
    assert!(d.log_text().contains("Chukwa collector port listening"), "{}", d.log_text());
    d
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// UTC calendar fields of `ms` (H. Hinnant's `civil_from_days`): year, month, day, hour, minute, second, ms.
fn civil(ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Line `i` of the test log: its time is `T0 + i s`, its latency `i % 50 + 1`.
fn log_line(i: i64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(T0 + i * 1000);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02},{ms:03} INFO app latency={} id={i}\n", i % 50 + 1)
}

fn append(path: &Path, lines: std::ops::Range<i64>) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    for i in lines {
        f.write_all(log_line(i).as_bytes()).unwrap();
    }
}

/// `dps` of a `/api/query` with millisecond keys: (ms, value) per series.
fn query(d: &Daemon, m: &str, start: i64, end: i64) -> Vec<(BTreeMap<String, String>, BTreeMap<i64, f64>)> {
    let path = format!("/api/query?start={start}&end={end}&ms=true&m={m}");
    let r = d.http("GET", &path, &[], b"");
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let tags = s["tags"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()));
            let dps = s["dps"].as_object().unwrap().iter().map(|(t, v)| (t.parse().unwrap(), v.as_f64().unwrap()));
            (tags.collect(), dps.collect())
        })
        .collect()
}

/// The sum of every point of the `chukwa.ingest.*` series of a dataType (written at server time).
fn ingested(d: &Daemon, what: &str, data_type: &str) -> f64 {
    let now = now_ms();
    let series =
        query(d, &format!("sum:chukwa.ingest.{what}%7Bdatatype={data_type}%7D"), now - 3_600_000, now + 60_000);
    series.iter().flat_map(|(_, dps)| dps.values()).sum()
}

/// A HICC read on the Chukwa port, checked to be answered byte for byte the same on the main HTTP port (issue
/// 18 item 4: dashboards may point at either).
fn hicc(d: &Daemon, port: u16, path: &str) -> (u16, String) {
    let r = HttpConn::new(addr(port)).request("GET", path, &[], b"");
    let main = d.http("GET", path, &[], b"");
    assert_eq!(
        (main.status, main.header("content-type"), main.body.as_slice()),
        (r.status, r.header("content-type"), r.body.as_slice()),
        "{path} on the main port"
    );
    (r.status, r.text())
}

fn yyyymmddhhmmss(ms: i64) -> String {
    let (y, mo, d, h, mi, s, _) = civil(ms);
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}")
}

// issue 21 item 4: the streams' de-duplication state lives in HBase with the data, so an agent whose collector
// dies after a post it never saw answered, and which fails over to another rtsd node, still stores every record
// exactly once. Two nodes share one store only on HBase.
#[test]
fn an_agent_failing_over_to_another_node_stores_every_record_once() {
    if skip_on_rocksdb("two rtsd nodes share one store only on HBase") {
        return;
    }
    let (port_a, port_b) = (free_port(), free_port());
    // The points node A acknowledged and had not written into their rows when it died are in its series log in
    // HBase; node B writes them once A's lease (3 s here) has expired.
    let lease = ("rtsd.storage.hbase.log_lease_ms", "3000");
    let mut a = start(port_a, &[lease]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut agent =
        Agent::new(addr(port_a), "agent1", "test", vec![Adaptor::File(FileTailer::new(log.clone(), "AppLog", 300))]);
    append(&log, 0..20);
    agent.step(2, Fate::Committed);
    // Node A commits a post and dies before the agent hears the answer.
    agent.step(1, Fate::ReplyLost);
    a.kill9();
    let port_b_text = port_b.to_string();
    let b = a.start_beside(&[
        ("rtsd.chukwa.port", port_b_text.as_str()),
        ("rtsd.chukwa.hicc.timezone", "UTC"),
        ("rtsd.chukwa.rule.AppLog.regex", LINE_RULE),
        ("rtsd.chukwa.rule.AppLog.timezone", "UTC"),
        lease,
    ]);
    // The agent moves on to node B and sends the unanswered post again, then the rest.
    agent.fail_over(addr(port_b));
    agent.resend_last();
    append(&log, 20..30);
    while agent.step(1, Fate::Committed) > 0 {}
    assert_eq!(agent.delivered_lines("AppLog"), (0..30).map(|i| log_line(i).trim_end().to_string()).collect());
    // Exactly once: node B counts what both nodes stored, each record once.
    assert_eq!(ingested(&b, "records", "AppLog"), 30.0);
    let (start, end) = (T0 / 1000 - 10, T0 / 1000 + 1000);
    let expected: BTreeMap<i64, f64> = (0..30).map(|i| (T0 + i * 1000, (i % 50 + 1) as f64)).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut latency = query(&b, "sum:AppLog.latency%7Bhost=agent1%7D", start, end);
    while latency.first().map(|l| &l.1) != Some(&expected) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(500));
        latency = query(&b, "sum:AppLog.latency%7Bhost=agent1%7D", start, end);
    }
    assert_eq!(latency.len(), 1);
    assert_eq!(latency[0].1, expected);
    drop(b);
}

#[test]
fn every_record_is_stored_once_through_lost_replies_crashes_rotation_and_kill9() {
    let port = free_port();
    let mut d = start(port, &[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut sigar = Sigar::new();
    sigar.sample_at((0..40).map(|k| T0 + k * 10_000));
    let adaptors = vec![Adaptor::File(FileTailer::new(log.clone(), "AppLog", 300)), Adaptor::Sigar(sigar)];
    let mut agent = Agent::new(addr(port), "agent1", "test", adaptors);

    append(&log, 0..20);
    agent.step(2, Fate::Committed);
    // The collector commits, the agent never hears: it carries on, then re-executes the same POST.
    agent.step(1, Fate::ReplyLost);
    agent.resend_last();
    agent.step(1, Fate::ReplyLost);
    // The agent crashes: the file is re-read from the checkpoint with other chunk boundaries; sigar starts a new
    // run at offset 0 with other samples.
    agent.crash(170);
    agent.step(3, Fate::Committed);

    // SIGKILL right after a post the agent never saw answered; the restarted daemon must still know it.
    append(&log, 20..40);
    agent.step(2, Fate::ReplyLost);
    d.kill9();
    let mut d = d.restart();
    agent.crash(230);
    agent.step(2, Fate::Committed);

    // Compressed posts (chukwaAgent.output.compress: zlib, chunked transfer coding).
    agent.compress = true;
    append(&log, 40..50);
    agent.step(2, Fate::Committed);
    agent.compress = false;
    while agent.step(1, Fate::Committed) > 0 {}

    // Rotation: the file starts over while the stream's offsets restart below what was stored.
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    append(&log, 50..60);
    agent.file(0).rotated();
    agent.step(1, Fate::ReplyLost);
    d.kill9();
    d = d.restart();
    agent.reconnect();
    agent.resend_last();
    while agent.step(1, Fate::Committed) > 0 {}

    // A graceful restart, and the last samples.
    d = d.restart();
    agent.reconnect();
    agent.sigar(1).sample_at((40..45).map(|k| T0 + k * 10_000));
    while agent.step(1, Fate::Committed) > 0 {}

    // What reached the collector: every log line, and the sigar samples that were sent.
    let lines = agent.delivered_lines("AppLog");
    assert_eq!(lines, (0..60).map(|i| log_line(i).trim_end().to_string()).collect::<BTreeSet<_>>());
    let samples = agent.delivered_samples();
    assert!(samples.len() >= 20, "{samples:?}");

    // Exactly once: the per-post record counts, stored with the data, add up to the distinct records.
    assert_eq!(ingested(&d, "records", "AppLog"), 60.0);
    assert_eq!(ingested(&d, "records", "SystemMetrics"), samples.len() as f64);

    // Queryable through /api/query: one point per line at the line's time, one per sample.
    let (start, end) = (T0 / 1000 - 10, T0 / 1000 + 1000);
    let latency = query(&d, "sum:AppLog.latency%7Bhost=agent1%7D", start, end);
    assert_eq!(latency.len(), 1);
    let expected: BTreeMap<i64, f64> = (0..60).map(|i| (T0 + i * 1000, (i % 50 + 1) as f64)).collect();
    assert_eq!(latency[0].1, expected);
    assert_eq!(latency[0].0.get("cluster").map(String::as_str), Some("test"));
    let cpu = query(&d, "sum:SystemMetrics.cpu.combined%7Bhost=agent1,cluster=test%7D", start, end);
    let expected: BTreeMap<i64, f64> = samples.iter().map(|&t| (t, sigar_cpu_combined(t))).collect();
    assert_eq!(cpu[0].1, expected);
    // Sums skip interface 0; PercentUsed is a fraction.
    let rx = query(&d, "sum:SystemMetrics.network.RxBytes%7Bhost=agent1%7D", start, end);
    assert!(rx[0].1.values().all(|&v| v == 120.0), "{rx:?}");
    let used = query(&d, "sum:SystemMetrics.disk.PercentUsed%7Bhost=agent1%7D", start, end);
    assert!(used[0].1.values().all(|&v| v == 0.25), "{used:?}");

    // And through HICC, from Chukwa's own tables.
    let (from, to) = (yyyymmddhhmmss(T0 - 1000), yyyymmddhhmmss(T0 + 1_000_000));
    let (status, body) =
        hicc(&d, port, &format!("/hicc/v1/metrics/series/SystemMetrics.cpu.combined/agent1?start={from}&end={to}"));
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["name"], "SystemMetrics.cpu.combined:agent1");
    let data: Vec<(i64, f64)> =
        json["data"].as_array().unwrap().iter().map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap())).collect();
    assert_eq!(data, expected.into_iter().collect::<Vec<_>>());
    let (_, body) = hicc(&d, port, &format!("/hicc/v1/metrics/series/AppLog.latency/agent1?start={from}&end={to}"));
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["data"].as_array().unwrap().len(), 60);
    assert_eq!(hicc(&d, port, "/hicc/v1/metrics/schema"), (200, r#"["AppLog","SystemMetrics"]"#.to_string()));
    assert_eq!(hicc(&d, port, "/hicc/v1/metrics/schema/AppLog"), (200, r#"["AppLog.latency"]"#.to_string()));
    assert_eq!(hicc(&d, port, "/hicc/v1/metrics/source/SystemMetrics"), (200, r#"["agent1"]"#.to_string()));
    let (_, names) = hicc(&d, port, "/hicc/v1/metrics/schema/SystemMetrics");
    assert!(
        names.contains("\"SystemMetrics.cpu.combined\"") && names.contains("\"SystemMetrics.cpu.Vendor.1\""),
        "{names}"
    );
    assert_eq!(
        hicc(&d, port, "/hicc/v1/metrics/series/SystemMetrics.cpu.combined/agent1?start=2023-11-14"),
        (400, "Start/End date parse error.  Format: yyyyMMddHHmmss.".to_string())
    );
    // The de-duplication outcomes are on /metrics (counters restart with the process; only this run's posts).
    let metrics = d.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("rtsd_chukwa_posts_total{type=\"ok\"}"), "{metrics}");
    assert!(metrics.contains("rtsd_chukwa_records_total{datatype=\"SystemMetrics\"}"), "{metrics}");
    // The series of de-duplication outcomes saw the resends and the rotation.
    let now = now_ms();
    let dups = query(&d, "sum:chukwa.dedup.duplicate", now - 3_600_000, now + 60_000);
    assert!(dups.iter().flat_map(|s| s.1.values()).sum::<f64>() >= 3.0, "{dups:?}");
    let resets = query(&d, "sum:chukwa.dedup.reset%7Bdatatype=AppLog%7D", now - 3_600_000, now + 60_000);
    assert!(!resets.is_empty(), "the rotation is a reset");
}

/// Bodies that can't be framed get 500 with the reason (413 past the size limit) and change nothing.
#[test]
fn bad_bodies_are_refused_and_change_nothing() {
    let port = free_port();
    let d = start(port, &[("rtsd.chukwa.max_body_bytes", "100000")]);
    let line = log_line(0);
    let good = ChunkOut {
        seq_id: line.len() as i64,
        source: "agent1".into(),
        tags: " cluster=\"test\"".into(),
        stream_name: "/var/log/app.log".into(),
        data_type: "AppLog".into(),
        record_ends: vec![line.len() as i32 - 1],
        data: line.clone().into_bytes(),
    };
    let body = encode_post(std::slice::from_ref(&good));
    let mut conn = CollectorConn::new(addr(port));
    let ok = format!("ok: {} bytes ending at offset {}\n", line.len(), line.len() - 1);
    let r = conn.post(&body, false);
    assert_eq!((r.status, r.text()), (200, ok.clone()));

    let later = ChunkOut { seq_id: 2 * line.len() as i64, data: log_line(1).into_bytes(), ..good.clone() };
    let mut two = encode_post(std::slice::from_ref(&later));
    two[3] = 2;
    let mut wrong_version = encode_post(std::slice::from_ref(&later));
    wrong_version[7] = 2;
    let mut bad_utf8 = encode_post(std::slice::from_ref(&later));
    bad_utf8[4 + 14] = 0xC0; // a lead byte followed by ASCII
    let with_count = |n: i32| [&n.to_be_bytes()[..], &body[4..]].concat();
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("truncated", body[..body.len() - 3].to_vec(), 500, "bad chunk 0 at byte"),
        ("a good chunk, then a truncated one", two, 500, "bad chunk 1 at byte"),
        (
            "wrong version",
            wrong_version,
            500,
            "Protocol version mismatched, drop data.  source version: 2, collector version:1",
        ),
        ("bad modified UTF-8", bad_utf8, 500, "in source"),
        ("absurd count", with_count(i32::MAX), 500, "more than the limit of 100000"),
        ("count beyond the body", with_count(5000), 500, "cannot fit"),
        ("negative count", with_count(-3), 500, "negative chunk count -3"),
        ("corrupt zlib", vec![0x78, 0x9c, 0xff, 0xff, 0xff], 500, "cannot inflate"),
        ("too large", vec![0; 100_001], 413, "exceeds the limit of 100000 bytes"),
    ];
    for (what, bytes, status, text) in cases {
        let r = CollectorConn::new(addr(port)).post(&bytes, false);
        assert_eq!(r.status, status, "{what}: {}", r.text());
        assert!(r.text().contains(text), "{what}: {}", r.text());
    }
    // Nothing changed: the later chunk is still new, the first still a duplicate.
    assert_eq!(ingested(&d, "records", "AppLog"), 1.0);
    let r = conn.post(&encode_post(&[good, later]), false);
    assert_eq!(r.status, 200);
    assert_eq!(ingested(&d, "records", "AppLog"), 2.0);
    let metrics = d.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("rtsd_chukwa_posts_total{type=\"bad_body\"} 8"), "{metrics}");
}

/// The collector's other answers, keep-alive, the §2.1 example, an empty chunk, and opaque streams.
#[test]
fn collector_pages_and_wire_details() {
    let port = free_port();
    let d = start(port, &[]);
    let mut conn = HttpConn::new(addr(port));
    let r = conn.request("GET", "/chukwa", &[], b"");
    assert_eq!((r.status, r.text()), (200, "<html><body><h2>Chukwa servlet running</h2>\n</body></html>\n".into()));
    let r = conn.request("GET", "/acks", &[], b"");
    assert_eq!(r.text(), "<html><body><h2>Commit status</h2><ul>\n</ul></body></html>\n");
    let r = conn.request("GET", "http://127.0.0.1/foo/acks", &[], b"");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("Commit status"));
    let r = conn.request("TRACE", "/chukwa", &[], b"");
    assert_eq!(r.status, 405);

    // §2.1's body on the same connection, absolute-form target; the reply is exact.
    let example = ChunkOut {
        seq_id: 8,
        source: "host1".into(),
        tags: " cluster=\"demo\"".into(),
        stream_name: "/var/log/app.log".into(),
        data_type: "AppLog".into(),
        record_ends: vec![3, 7],
        data: b"a=1\nb=2\n".to_vec(),
    };
    let empty =
        ChunkOut { seq_id: 5, record_ends: vec![-1], data: Vec::new(), stream_name: "/e".into(), ..example.clone() };
    let target = format!("http://127.0.0.1:{port}/chukwa");
    let r = conn.request("POST", &target, &[], &encode_post(std::slice::from_ref(&example)));
    assert_eq!((r.status, r.text()), (200, "ok: 8 bytes ending at offset 7\n".into()));
    let r = conn.request("POST", &target, &[], &encode_post(&[empty, example.clone()]));
    assert_eq!(r.text(), "ok: 0 bytes ending at offset 4\nok: 8 bytes ending at offset 7\n");
    let r = conn.request("POST", "/", &[], &encode_post(&[]));
    assert_eq!((r.status, r.text()), (200, String::new()));

    // Ping: Java's five lines, counting this window's posts and chunks.
    let r = conn.request("GET", "/chukwa?ping", &[], b"");
    let text = r.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("Date:") && lines[1].starts_with("Now:"));
    assert_eq!(
        &lines[2..],
        ["numberHTTPConnection in time window:3", "numberchunks in time window:3", "lifetimechunks:3"]
    );

    // Hadoop metrics through the agent's SocketAdaptor: every event has seqID = its length. Different events are
    // all stored, a repeated one is not; the source is `host:ProcessName`, split into tags.
    let event = |t: i64, gc: i64| {
        let line = format!(
            "2023-11-14 22:13:20,000 INFO chukwa.metrics.HadoopMetrics: {{\"timestamp\":{t},\"contextName\":\"jvm\",\
             \"recordName\":\"JvmMetrics\",\"Hostname\":\"NN1.example.com\",\"ProcessName\":\"NameNode\",\"GcCount\":{gc}}}\n"
        );
        ChunkOut {
            seq_id: line.len() as i64,
            source: "agent1".into(),
            tags: " cluster=\"prod\"".into(),
            stream_name: "agent1".into(),
            data_type: "HadoopMetrics".into(),
            record_ends: vec![line.len() as i32 - 1],
            data: line.into_bytes(),
        }
    };
    let (e1, e2, e3) = (event(T0, 10), event(T0 + 10_000, 11), event(T0 + 20_000, 12));
    for chunks in [vec![e1.clone()], vec![e2.clone(), e1.clone()], vec![e3, e2]] {
        let r = conn.request("POST", &target, &[], &encode_post(&chunks));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let gc = query(&d, "sum:HadoopMetrics.jvm.JvmMetrics.GcCount%7Bprocess=NameNode%7D", T0 / 1000 - 1, T0 / 1000 + 60);
    assert_eq!(gc.len(), 1);
    assert_eq!(gc[0].1, BTreeMap::from([(T0, 10.0), (T0 + 10_000, 11.0), (T0 + 20_000, 12.0)]));
    assert_eq!(gc[0].0.get("host").map(String::as_str), Some("nn1.example.com"));
    assert_eq!(gc[0].0.get("cluster").map(String::as_str), Some("prod"));
    let now = now_ms();
    let records = query(&d, "sum:chukwa.ingest.records%7Bdatatype=HadoopMetrics%7D", now - 3_600_000, now + 60_000);
    assert_eq!(records[0].1.values().sum::<f64>(), 3.0);
    let (from, to) = (yyyymmddhhmmss(T0), yyyymmddhhmmss(T0 + 60_000));
    let (status, body) = hicc(&d, port,
        &format!("/hicc/v1/metrics/series/HadoopMetrics.jvm.JvmMetrics.GcCount/nn1.example.com%3ANameNode?start={from}&end={to}"),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        format!(
            r#"{{"data":[[{T0},10.0],[{},11.0],[{},12.0]],"name":"HadoopMetrics.jvm.JvmMetrics.GcCount:nn1.example.com:NameNode"}}"#,
            T0 + 10_000,
            T0 + 20_000
        )
    );

    // A heartbeat (seqID - len < 0): opaque, de-duplicated by content only.
    let beat = |t: i64, seq: i64| ChunkOut {
        seq_id: seq,
        stream_name: "STATUS".into(),
        data_type: "Heartbeat".into(),
        data: format!("{{\"time\":{t},\"components\":[]}}").into_bytes(),
        record_ends: vec![],
        ..example.clone()
    };
    let with_ends = |mut c: ChunkOut| {
        c.record_ends = vec![c.data.len() as i32 - 1];
        c
    };
    let (b1, b2) = (with_ends(beat(T0, 1)), with_ends(beat(T0 + 1000, 2)));
    for body in [encode_post(std::slice::from_ref(&b1)), encode_post(&[b1, b2.clone()]), encode_post(&[b2])] {
        assert_eq!(conn.request("POST", &target, &[], &body).status, 200);
    }
    let now = now_ms();
    let chunks = query(&d, "sum:chukwa.ingest.chunks%7Bdatatype=Heartbeat%7D", now - 3_600_000, now + 60_000);
    assert_eq!(chunks[0].1.values().sum::<f64>(), 2.0);
}

#[test]
fn port_zero_turns_the_collector_off() {
    let d = Daemon::start_with(&[("rtsd.chukwa.port", "0")]);
    assert!(!d.log_text().contains("Chukwa collector port listening"));
}

/// The harness runs the binary Cargo built for this test target.
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
