//! rtsd on HBase (issue 21): rtsd nodes with `rtsd.storage.engine=hbase` on the test bed's cluster, sharing
//! OpenTSDB's own tables with the real OpenTSDB 2.4.1 TSD running on it. One test bed for the whole binary (the
//! cluster takes a minute or two to start on two cores); the checks run in order on it:
//!
//! 1. **The engine contract** (`rtsd::store::engine::conformance`, the checks RocksDB passes in its unit tests) on
//!    real HBase tables, through rtsd's native client.
//! 2. **OpenTSDB writes, rtsd reads.** The differential suite's data set goes in through the reference TSD only;
//!    an rtsd node then answers the suite's `/api/query` cases as the reference does, up to the differences
//!    `compat-tests/differential/differences.json` lists for rtsd on RocksDB (the same answers: the engine must not
//!    change one).
//!    Then the series only OpenTSDB writes are found as 2.4 finds them: `/api/query/last` with `back_scan` reads
//!    their rows, `/api/search/lookup` reads the `tsdb-meta` rows the reference's realtime TS meta keeps; rtsd's
//!    answers are the reference's.
//! 3. **rtsd writes, OpenTSDB reads.** The same data set under other metric names (`dr.*`) goes in through rtsd node
//!    A only; node B (a second rtsd, no state of its own) and the reference answer the same cases again.
//! 4. **UIDs assigned at once by three writers.** Two rtsd nodes and the reference assign the same 1,000 new metric
//!    names concurrently (OpenTSDB's protocol: increment, reverse CAS, forward CAS); all three then map every name
//!    to one UID, the same on all three, and every UID's reverse mapping names it.
//!    Then again with the rtsd nodes assigning as their `/api/put`s do (a batch's new names together).
//! 5. **A region server killed under writes.** Node A takes `/api/put?sync` batches while one of the three region
//!    servers is SIGKILLed; then node A is SIGKILLed too, and every batch it acknowledged is read back through a
//!    node started after it.
//!    Then a node is SIGKILLed holding telnet puts it acknowledged but had not written into their rows (its
//!    records in the shared series log): a node started after it takes its records over once its lease expires,
//!    and every point reads back; one SIGKILLed and started again in its data directory writes them as it
//!    opens. A node on an `rtsd` table without the `log` family writes points into their
//!    rows before acknowledging them, and says so.
//! 6. **Appends.** A node with `tsd.storage.enable_appends` writes points as OpenTSDB's append column; OpenTSDB
//!    and the node answer them alike, late and duplicate points included.
//! 7. **rtsd's own rollups.** A node with `rtsd.rollups.auto` folds what it wrote into the rollup tables' `a`
//!    families; downsampled queries read them (`rollupTable` says which) and answer as the raw rows do.
//! 8. **Retention becomes HBase TTLs.** A node with `rtsd.retention.raw_hours=240` sets family `t` of `tsdb` to
//!    `TTL => 864000` (late: a TTL on the shared tables would hide the earlier checks' points from OpenTSDB too).
//! 9. **The README's fleet example** ("rtsd on HBase"), run as it stands but for the quorum and two free ports:
//!    two nodes on the cluster, a put through one, read back through the other.
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Instant;

use rtsd::store::engine::conformance;
use rtsd::store::engine::hbase::{HBaseEngine, HBaseOptions};
use rtsd_compat_tests::differential::*;
use rtsd_compat_tests::testbed::{points_by_host, root, Testbed};
use serde_json::Value;

/// One generated query case in this many is sent (the differential suite sends all of its 400 GET and 200 POST
/// cases; these runs only need every feature met on HBase rows). Cases are generated as the suite generates them,
/// so each id is the suite's case and its listed difference, if any, applies.
const EVERY_NTH_CASE: usize = 3;
/// Names the UID race assigns.
const RACE_NAMES: usize = 1000;

/// Writes the data set (renamed by `rename`) through one server only, as the differential suite writes it.
fn write_through(addr: SocketAddr, series: &[Series], rename: &dyn Fn(&str) -> String) {
    let (assigns, bodies) = data_set_requests(series);
    for (_, path) in assigns {
        // Tag names the other data set assigned already exist: a 400 naming their UID.
        let (status, _, body) = http_answer(addr, "GET", &rename(&path), "");
        assert!(status == 200 || body.contains("Name already exists with UID"), "{path}: {status} {body}");
    }
    for (i, body) in bodies.iter().enumerate() {
        let (status, _, answer) = http_answer(addr, "POST", "/api/put?sync&details", &rename(body));
        assert_eq!(status, 200, "data set batch {i}: {answer}");
    }
}

/// Runs the query cases against `rtsd` and the reference, with `rename` applied to each request and `undo` to each
/// answer; panics listing every difference the list does not explain.
fn compare_queries(
    label: &str,
    rtsd: SocketAddr,
    reference: SocketAddr,
    rename: &dyn Fn(&str) -> String,
    undo: &dyn Fn(&str) -> String,
) {
    let mut tally = Tally::load(|id| !id.starts_with(LAYOUT_PREFIX));
    {
        let mut pair = Pair { rtsd, reference, tally: &mut tally };
        for (id, method, path, body) in query_cases(DEFAULT_SEED, DEFAULT_CASES) {
            let n: Option<usize> = id.rsplit('/').next().and_then(|n| n.parse().ok());
            if n.is_some_and(|n| n % EVERY_NTH_CASE != 0) {
                continue;
            }
            pair.http_normalised(&id, method, &rename(&path), &rename(&body), |answer| undo(answer));
        }
    }
    for (id, req, a, b) in tally.new.iter().chain(&tally.changed).take(40) {
        eprintln!("{label}: DIFFERENT {id}\n  request:  {req}\n  rtsd:     {a:?}\n  opentsdb: {b:?}");
    }
    eprintln!(
        "{label}: {} requests compared, {} identical, {} listed differences, {} new, {} changed",
        tally.compared,
        tally.identical,
        tally.listed,
        tally.new.len(),
        tally.changed.len()
    );
    assert!(tally.compared > DEFAULT_CASES / 2, "{label}: only {} requests compared", tally.compared);
    assert!(
        tally.new.is_empty() && tally.changed.is_empty(),
        "{label}: {} new and {} changed differences (see above)",
        tally.new.len(),
        tally.changed.len()
    );
}

/// Series only the reference writes, in the current hour and two hours before: rtsd's `/api/query/last` (with
/// `back_scan`, which reads rows as 2.4 does) and `/api/search/lookup` (from tsdb-meta) answer as the reference.
fn last_and_lookup_of_opentsdb_series(tb: &Testbed, rtsd: SocketAddr) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let hour = now - now % 3600;
    let body = format!(
        r#"[{{"metric":"dl.last","timestamp":{},"value":1,"tags":{{"host":"a"}}}},
            {{"metric":"dl.last","timestamp":{},"value":2.5,"tags":{{"host":"a"}}}},
            {{"metric":"dl.last","timestamp":{},"value":7,"tags":{{"host":"b","dc":"x"}}}}]"#,
        hour + 1,
        hour + 2,
        hour - 2 * 3600 + 60
    );
    let (status, _, answer) = http_answer(tb.tsd, "POST", "/api/put?sync&details", &body);
    assert_eq!(status, 200, "{answer}");
    let json = |addr: SocketAddr, path: &str| -> Value {
        let (status, _, body) = http_answer(addr, "GET", path, "");
        assert_eq!(status, 200, "{addr} {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{addr} {path}: {e}: {body}"))
    };
    let expected_a = serde_json::json!([{"metric": "dl.last", "tags": {"host": "a"}, "timestamp": (hour + 2) * 1000,
        "value": "2.5", "tsuid": json(tb.tsd, "/api/query/last?timeseries=dl.last%7Bhost=a%7D&back_scan=3")[0]["tsuid"]}]);
    for (path, hits) in [
        ("/api/query/last?timeseries=dl.last%7Bhost=a%7D&back_scan=3&resolve", 1),
        ("/api/query/last?timeseries=dl.last%7Bhost=b,dc=x%7D&back_scan=3", 1),
        // The point two hours back is outside one hour's back scan.
        ("/api/query/last?timeseries=dl.last%7Bhost=b,dc=x%7D&back_scan=1", 0),
    ] {
        let reference = json(tb.tsd, path);
        assert_eq!(reference.as_array().map(Vec::len), Some(hits), "the reference's {path}: {reference}");
        assert_eq!(json(rtsd, path), reference, "rtsd's {path}");
    }
    assert_eq!(json(rtsd, "/api/query/last?timeseries=dl.last%7Bhost=a%7D&back_scan=3&resolve"), expected_a);
    // Realtime TS meta is written after the put is answered: wait for the reference to find both series.
    let lookup = "/api/search/lookup?m=dl.last";
    let started = Instant::now();
    let reference = loop {
        let v = json(tb.tsd, lookup);
        if v["totalResults"] == 2 {
            break v;
        }
        assert!(started.elapsed().as_secs() < 60, "the reference's lookup after 60 s: {v}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let results = |v: &Value| -> Vec<Value> {
        let mut r = v["results"].as_array().cloned().unwrap_or_default();
        r.sort_by_key(|x| x["tsuid"].as_str().unwrap_or_default().to_string());
        r
    };
    let ours = json(rtsd, lookup);
    assert_eq!(results(&ours), results(&reference), "rtsd's {lookup}: {ours}");
    assert_eq!(ours["totalResults"], 2);
    let tagged = json(rtsd, "/api/search/lookup?m=dl.last%7Bdc=x%7D");
    assert_eq!(tagged["results"].as_array().map(Vec::len), Some(1), "{tagged}");
    assert_eq!(tagged["results"][0]["tags"], serde_json::json!({"host": "b", "dc": "x"}));
}

/// After a race of `writers` (rtsd node A, rtsd node B, the reference) over `names`: all three map every name to
/// one UID, the same on all three, no UID is shared, and every UID's reverse mapping names its name on every
/// server. `how` tells the race's checks apart in a failure.
fn one_uid_per_name(writers: &[SocketAddr; 3], names: &[String], how: &str) {
    let maps: Vec<BTreeMap<String, String>> = writers.iter().map(|&addr| assigned_uids(addr, names)).collect();
    assert_eq!(maps[0], maps[2], "rtsd node A{how} and OpenTSDB map the names to the same UIDs");
    assert_eq!(maps[1], maps[2], "rtsd node B{how} and OpenTSDB map the names to the same UIDs");
    let mut uids: Vec<&String> = maps[2].values().collect();
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), names.len(), "one UID per name, none shared{how}");
    for (name, uid) in maps[2].iter().step_by(50) {
        for &addr in writers {
            let (status, _, body) = http_answer(addr, "GET", &format!("/api/uid/uidmeta?uid={uid}&type=metric"), "");
            assert_eq!(status, 200, "{addr} uidmeta {uid}: {body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["name"], name.as_str(), "{addr}: UID {uid}");
        }
    }
}

/// Each name's UID as `/api/uid/assign` reports it for a name that already has one (OpenTSDB's "Name already
/// exists with UID: 00000A"), asked of one server for all names at once.
fn assigned_uids(addr: SocketAddr, names: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for chunk in names.chunks(100) {
        let (status, _, body) = http_answer(addr, "GET", &format!("/api/uid/assign?metric={}", chunk.join(",")), "");
        assert_eq!(status, 400, "every name exists by now, so each is an error: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let errors = v["metric_errors"].as_object().unwrap_or_else(|| panic!("no metric_errors in {body}"));
        for name in chunk {
            let text = errors[name.as_str()].as_str().unwrap_or_else(|| panic!("{name} missing in {body}"));
            let uid = text.strip_prefix("Name already exists with UID: ").unwrap_or_else(|| panic!("{name}: {text}"));
            out.insert(name.clone(), uid.to_string());
        }
    }
    out
}

/// Posts batches of points to `addr` with `sync`, SIGKILLing region server 2 after the first few; returns every
/// point of every acknowledged batch. A batch refused meanwhile (the regions of the killed server not yet
/// reopened within the client's deadline) must be refused with OpenTSDB's error envelope, never lost silently.
fn writes_through_a_killed_region_server(tb: &Testbed, addr: SocketAddr) -> BTreeMap<(String, i64), f64> {
    const BATCHES: i64 = 40;
    let mut acked = BTreeMap::new();
    let mut refused = 0;
    for batch in 0..BATCHES {
        if batch == 8 {
            rtsd_compat_tests::testbed::script("hbase-cluster", &["kill-rs", tb.dir(), "2"]);
        }
        let mut points = Vec::new();
        let mut body = Vec::new();
        for i in 0..20 {
            let (host, t) = (format!("h{}", i % 5), 1_690_000_000 + batch * 100 + i);
            let v = (batch * 20 + i) as f64 + 0.5;
            body.push(format!(r#"{{"metric":"fault.m","timestamp":{t},"value":{v},"tags":{{"host":"{host}"}}}}"#));
            points.push(((host, t), v));
        }
        let (status, _, answer) = http_answer(addr, "POST", "/api/put?sync&details", &format!("[{}]", body.join(",")));
        match status {
            200 => acked.extend(points),
            500 | 503 => {
                assert!(answer.contains("\"error\""), "batch {batch}: {status} without an error envelope: {answer}");
                refused += 1;
            }
            other => panic!("batch {batch}: {other} {answer}"),
        }
    }
    rtsd_compat_tests::testbed::script("hbase-cluster", &["wait", tb.dir(), "2"]);
    eprintln!("rtsd_on_hbase: {} of {BATCHES} batches acknowledged, {refused} refused", BATCHES - refused);
    assert!(refused < BATCHES / 2, "most batches were refused: the client did not ride out the reassignment");
    acked
}

/// Sends `n` telnet puts of `metric` to `addr` (host `<prefix><i % hosts>`, time `t0 + i * step`, value
/// `value(i)`), asserts every one is acknowledged, and returns them by (host, timestamp).
fn put_over_telnet(
    addr: SocketAddr,
    metric: &str,
    (prefix, hosts): (&str, i64),
    (t0, step): (i64, i64),
    n: i64,
    value: impl Fn(i64) -> f64,
) -> BTreeMap<(String, i64), f64> {
    let mut sent = BTreeMap::new();
    let mut lines = String::new();
    for i in 0..n {
        let (host, t, v) = (format!("{prefix}{}", i % hosts), t0 + i * step, value(i));
        lines.push_str(&format!("put {metric} {t} {v} host={host}\n"));
        sent.insert((host, t), v);
    }
    let mut tn = rtsd_compat_tests::connect(addr);
    tn.write_all(lines.as_bytes()).expect("send puts");
    let answered = rtsd_compat_tests::barrier(&mut tn);
    assert!(answered.is_empty(), "every put acknowledged: {answered:?}");
    sent
}

/// Without `tsd.core.meta.enable_tsuid_incrementing` a node keeps no point counters on HBase (an Increment per
/// active series every 30 s on one region server; OpenTSDB keeps no `ts_ctr` then either): a TSMeta shows the
/// points stored and the newest one's time, so an overwrite counts once.
fn tsmeta_without_counters_shows_stored_points(addr: SocketAddr) {
    let mut tn = rtsd_compat_tests::connect(addr);
    tn.write_all(b"put ctr.m 1690200000 1 host=a\nput ctr.m 1690200060 2 host=a\nput ctr.m 1690200000 3 host=a\n")
        .expect("send puts");
    assert!(rtsd_compat_tests::barrier(&mut tn).is_empty(), "every put acknowledged");
    let (status, _, body) = http_answer(addr, "GET", "/api/uid/tsmeta?m=ctr.m", "");
    assert_eq!(status, 200, "{body}");
    let all: Value = serde_json::from_str(&body).unwrap();
    let counted: Vec<(Value, Value)> =
        all.as_array().unwrap().iter().map(|m| (m["totalDatapoints"].clone(), m["lastReceived"].clone())).collect();
    assert_eq!(counted, [(2.into(), 1_690_200_060i64.into())], "{body}");
}

/// Telnet puts a node acknowledged and still held (its series table and its records in the shared series log, its
/// flush far off) when it is SIGKILLed: another node reads none of them before, and all of them once a node
/// started after the kill has taken over the dead node's records (its lease, shortened here to 3 s, expired).
fn a_killed_nodes_log_is_taken_over(tb: &Testbed, reader: SocketAddr) {
    let lease = ("rtsd.storage.hbase.log_lease_ms", "3000");
    let mut holder = tb.start_rtsd(&[("rtsd.storage.hbase.flush_ms", "3600000"), lease]);
    let sent = put_over_telnet(holder.addr(), "logged.m", ("h", 6), (1_690_200_000, 5), 600, |i| i as f64 * 0.25);
    let query = "/api/query?start=1690200000&end=1690204000&m=sum:logged.m%7Bhost=*%7D";
    let read = || points_by_host(reader, query).unwrap_or_else(|(status, body)| panic!("{status} {body}"));
    assert_eq!(read(), BTreeMap::new(), "acknowledged points not yet in their rows are the holder's alone");
    holder.kill9();
    let started = Instant::now();
    let _rescuer = tb.start_rtsd(&[lease]);
    let mut stored = read();
    while stored != sent && started.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(500));
        stored = read();
    }
    assert_eq!(stored.len(), sent.len(), "points read back after the holder was killed");
    assert_eq!(stored, sent);
    eprintln!(
        "rtsd_on_hbase: {} telnet points a killed node held in the shared series log read back {:.1}s after its kill",
        sent.len(),
        started.elapsed().as_secs_f64()
    );

    // A node SIGKILLed and started again in its data directory (the default lease: 30 s) is the same node: it
    // writes what it held into their rows as it opens, before it answers anything.
    let mut holder = tb.start_rtsd(&[("rtsd.storage.hbase.flush_ms", "3600000")]);
    let again = put_over_telnet(holder.addr(), "logged.m", ("r", 3), (1_690_200_000, 5), 300, |i| i as f64 + 0.5);
    holder.kill9();
    let restarted = Instant::now();
    let holder = holder.restart();
    let mut want = sent.clone();
    want.extend(again);
    assert_eq!(read(), want, "read through another node once the restarted node answers");
    eprintln!(
        "rtsd_on_hbase: a node killed and started again in its directory wrote the 300 points it held as it opened ({:.1}s)",
        restarted.elapsed().as_secs_f64()
    );
    drop(holder);
}

/// A node whose `rtsd` table predates the series log (no family `log`) says so once and writes each batch's
/// points into their rows before acknowledging them: telnet puts it took read through another node at once.
fn a_table_without_the_log_family_writes_through(tb: &Testbed, reader: SocketAddr) {
    tb.hbase_tool(&["create", "rtsd_nolog", "meta,series,rollup_dirty,chukwa_streams"]);
    let old = tb.start_rtsd(&[("rtsd.storage.hbase.rtsd_table", "rtsd_nolog")]);
    let sent = put_over_telnet(old.addr(), "nolog.m", ("h", 3), (1_690_300_000, 7), 60, |i| i as f64 + 0.125);
    let query = "/api/query?start=1690300000&end=1690301000&m=sum:nolog.m%7Bhost=*%7D";
    let stored = points_by_host(reader, query).unwrap_or_else(|(status, body)| panic!("{status} {body}"));
    assert_eq!(stored, sent, "acknowledged = in their rows, read by another node at once");
    let log = old.log_text();
    assert_eq!(log.matches("the rtsd table has no family `log`").count(), 1, "{log}");
    eprintln!("rtsd_on_hbase: a node on an rtsd table without the log family writes through, and says so");
}

/// The README's fleet example (issue 21: "the README's fleet example is run by a test"): the shell block after
/// the marker that names this file, with the test bed's quorum for `ZK=` and free ports for 4242 and 4243, the
/// binary under test as `rtsd` on `PATH`, in a temporary directory. Its output is the read through node 2.
fn run_readme_fleet_example(tb: &Testbed) {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let block = readme
        .split_once("tests/rtsd_on_hbase.rs runs this block")
        .and_then(|(_, after)| after.split_once("```sh\n"))
        .and_then(|(_, after)| after.split_once("```"))
        .map(|(block, _)| block)
        .expect("the README's fleet example after its marker");
    let free_port = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let script = block
        .replace("ZK=127.0.0.1:2181", &format!("ZK={}", tb.zk_quorum()))
        .replace("4242", &free_port())
        .replace("4243", &free_port());
    assert_ne!(script, block, "the example's ZK= and ports were not found");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(rtsd_compat_tests::binary(), dir.path().join("rtsd")).unwrap();
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    // The nodes the block starts in the background are its jobs: stopped when it ends, whatever happened.
    let out = std::process::Command::new("timeout")
        .args(["120", "bash", "-c", &format!("trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n{script}")])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the fleet example failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        r#"[{"metric":"web.hits","tags":{"host":"web01"},"aggregateTags":[],"dps":{"1700000000":42}}]"#,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("rtsd_on_hbase: the README's fleet example answers through node 2 what node 1 took");
}

/// Rows of a plain table written before its merges were blind parts (by rtsd up to issue 21 item 5: the value
/// whole in the empty-qualifier cell, merged by read and compare-and-set) read as that value with the parts
/// written since merged onto it, through every read path.
fn old_cells_read_with_parts(tb: &Testbed, engine: &HBaseEngine, plain: &str) {
    use rtsd::store::engine::{Durability, Engine, ReadHints, WriteBatch};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = rt.block_on(rtsd_hbase::Client::connect(&tb.zk_quorum(), "/hbase")).expect("connect");
    for (row, n) in [(b"old/c1".as_slice(), 100i64), (b"old/hi1", 50), (b"old/lo1", 50)] {
        let cell = vec![(Vec::new(), n.to_be_bytes().to_vec())];
        rt.block_on(client.put("rtsd_conformance", row, b"plain", cell)).expect("an old cell");
    }
    let write = |ops: &[(&[u8], i64)]| {
        let mut batch = WriteBatch::default();
        for (key, n) in ops {
            batch.merge(plain, key, &n.to_be_bytes());
        }
        engine.write(batch, Durability::Logged).expect("merges");
    };
    let get = |key: &[u8]| engine.get(plain, key, ReadHints::default()).unwrap();
    let be = |n: i64| Some(n.to_be_bytes().to_vec());
    assert_eq!((get(b"old/c1"), get(b"old/hi1"), get(b"old/lo1")), (be(100), be(50), be(50)), "old cells alone");
    write(&[(b"old/c1", 5), (b"old/hi1", 7), (b"old/lo1", 70)]);
    assert_eq!((get(b"old/c1"), get(b"old/hi1"), get(b"old/lo1")), (be(105), be(50), be(50)), "parts below");
    write(&[(b"old/c1", -10), (b"old/hi1", 60), (b"old/lo1", 40)]);
    assert_eq!((get(b"old/c1"), get(b"old/hi1"), get(b"old/lo1")), (be(95), be(60), be(40)), "parts past");
    let mut cursor = engine.cursor(plain, ReadHints::default()).expect("declared");
    cursor.seek(b"old/");
    let mut scanned = Vec::new();
    while cursor.valid() && cursor.key().starts_with(b"old/") {
        scanned.push((cursor.key().to_vec(), cursor.value().to_vec()));
        cursor.next();
    }
    cursor.status().unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = [(b"old/c1".as_slice(), 95i64), (b"old/hi1", 60), (b"old/lo1", 40)]
        .iter()
        .map(|(k, n)| (k.to_vec(), n.to_be_bytes().to_vec()))
        .collect();
    assert_eq!(scanned, want, "old cells and parts, scanned");
    eprintln!("rtsd_on_hbase: old cells read with the parts merged onto them");
}

#[test]
fn rtsd_on_hbase_shares_opentsdb_tables() {
    let started = Instant::now();
    // Realtime TS meta: the reference records each series it writes in tsdb-meta, as deployments that serve
    // `/api/search/lookup` (Grafana's tag queries) run it. 2.4.1 records it only with tracking on as well.
    let tb = Testbed::start_with(
        "rtsd_on_hbase",
        &[("tsd.core.meta.enable_tsuid_tracking", "true"), ("tsd.core.meta.enable_realtime_ts", "true")],
    );

    // 1. The engine contract on real HBase tables.
    tb.hbase_tool(&["create", "rtsd_conformance", "data,uid,plain"]);
    let names = ("rtsd_conformance:data", "rtsd_conformance:uid", "rtsd_conformance:plain");
    let specs = conformance::tables(names.0, names.1, names.2);
    let options = HBaseOptions::new(&tb.zk_quorum());
    let engine = HBaseEngine::connect(&options, &specs).expect("connect the HBase engine");
    assert_eq!(engine.family_ttl("tsdb:t").unwrap(), None, "a fresh test bed keeps tsdb forever");
    conformance::check(&engine, names, "run1/");
    conformance::check(&engine, names, "run2/");
    old_cells_read_with_parts(&tb, &engine, names.2);
    drop(engine);
    eprintln!("rtsd_on_hbase: engine contract kept on HBase ({:.0}s)", started.elapsed().as_secs_f64());

    // 2. OpenTSDB writes, rtsd reads.
    let series = data_set(&mut Rng(DEFAULT_SEED));
    let same = |s: &str| s.to_string();
    write_through(tb.tsd, &series, &same);
    let mut a = tb.start_rtsd(&[]);
    compare_queries("opentsdb-written", a.addr(), tb.tsd, &same, &same);
    last_and_lookup_of_opentsdb_series(&tb, a.addr());

    // 3. rtsd writes (node A), a second node and OpenTSDB read.
    let rename = |s: &str| s.replace("dq.", "dr.");
    write_through(a.addr(), &series, &rename);
    let b = tb.start_rtsd(&[]);
    // Answers name the `dq.` metrics again, and their TSUIDs carry the `dq.` metrics' UIDs: the listed
    // differences are the suite's, written for the `dq.` data set.
    let metric_uids = |prefix: &str| -> Vec<String> {
        let names: Vec<String> = METRICS.iter().map(|m| m.replace("dq.", prefix)).collect();
        let uids = assigned_uids(b.addr(), &names);
        names.iter().map(|n| uids[n].clone()).collect()
    };
    let uid_pairs: Vec<(String, String)> = metric_uids("dr.").into_iter().zip(metric_uids("dq.")).collect();
    let undo = |answer: &str| {
        let mut answer = answer.replace("dr.", "dq.");
        for (dr, dq) in &uid_pairs {
            // A TSUID is the metric's UID then tag key UIDs (which start with 0 here), quoted.
            answer = answer.replace(&format!("\"{dr}0"), &format!("\"{dq}0"));
        }
        answer
    };
    compare_queries("rtsd-written", b.addr(), tb.tsd, &rename, &undo);
    eprintln!("rtsd_on_hbase: both directions compared ({:.0}s)", started.elapsed().as_secs_f64());

    // 4. Three writers assign the same new names at once, each in its own order.
    let names: Vec<String> = (0..RACE_NAMES).map(|i| format!("race.m{i:04}")).collect();
    let writers = [a.addr(), b.addr(), tb.tsd];
    std::thread::scope(|s| {
        for (w, addr) in writers.iter().enumerate() {
            let mut order = names.clone();
            let mut rng = Rng(0x5eed + w as u64);
            for i in (1..order.len()).rev() {
                order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
            }
            s.spawn(move || {
                for chunk in order.chunks(25) {
                    // 200 when this writer assigned them all, 400 when another writer got some first.
                    let path = format!("/api/uid/assign?metric={}", chunk.join(","));
                    let (status, _, body) = http_answer(*addr, "GET", &path, "");
                    assert!(status == 200 || status == 400, "writer {w}: {status} {body}");
                }
            });
        }
    });
    one_uid_per_name(&writers, &names, "");
    eprintln!(
        "rtsd_on_hbase: {RACE_NAMES} names raced by 3 writers, one UID each ({:.0}s)",
        started.elapsed().as_secs_f64()
    );

    // 4b. The same, with the rtsd nodes assigning as their puts do: each `/api/put` of 25 points of new metrics
    // resolves its new names together (one increment reserving a block of ids, then the compare-and-sets of all
    // of them at once), while OpenTSDB assigns the same names one by one.
    let names: Vec<String> = (0..RACE_NAMES).map(|i| format!("race.p{i:04}")).collect();
    std::thread::scope(|s| {
        for (w, addr) in writers.iter().enumerate() {
            let mut order = names.clone();
            let mut rng = Rng(0xba7c + w as u64);
            for i in (1..order.len()).rev() {
                order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
            }
            let is_rtsd = *addr != tb.tsd;
            s.spawn(move || {
                for chunk in order.chunks(25) {
                    if is_rtsd {
                        let points: Vec<String> = chunk
                            .iter()
                            .map(|m| {
                                format!(
                                    r#"{{"metric":"{m}","timestamp":1700000000,"value":1,"tags":{{"host":"race"}}}}"#
                                )
                            })
                            .collect();
                        let (status, _, body) =
                            http_answer(*addr, "POST", "/api/put?sync", &format!("[{}]", points.join(",")));
                        assert_eq!(status, 204, "writer {w}: {body}");
                    } else {
                        let path = format!("/api/uid/assign?metric={}", chunk.join(","));
                        let (status, _, body) = http_answer(*addr, "GET", &path, "");
                        assert!(status == 200 || status == 400, "writer {w}: {status} {body}");
                    }
                }
            });
        }
    });
    one_uid_per_name(&writers, &names, " (puts)");
    eprintln!(
        "rtsd_on_hbase: {RACE_NAMES} names raced by 2 rtsd nodes' puts and OpenTSDB, one UID each ({:.0}s)",
        started.elapsed().as_secs_f64()
    );

    // 5. A region server killed while node A writes.
    let acked = writes_through_a_killed_region_server(&tb, a.addr());
    // Node A is SIGKILLed too: what it acknowledged is in HBase, not in A. A new node reads it all back.
    a.kill9();
    let replacement = tb.start_rtsd(&[]);
    let stored =
        points_by_host(replacement.addr(), "/api/query?start=1690000000&end=1690010000&m=sum:fault.m%7Bhost=*%7D")
            .unwrap_or_else(|(status, body)| panic!("{status} {body}"));
    let missing: Vec<&(String, i64)> = acked.keys().filter(|k| stored.get(*k) != acked.get(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged points not read back, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "rtsd_on_hbase: {} points acknowledged across a killed region server, all read back after their node was killed ({:.0}s)",
        acked.len(),
        started.elapsed().as_secs_f64()
    );

    // 5b. A node killed with acknowledged points still in its series log: another node takes them over.
    a_killed_nodes_log_is_taken_over(&tb, b.addr());
    a_table_without_the_log_family_writes_through(&tb, b.addr());
    tsmeta_without_counters_shows_stored_points(b.addr());

    // 6. Appends: written by a node with enable_appends, read by OpenTSDB and by the node.
    let c = tb.start_rtsd(&[("tsd.storage.enable_appends", "true")]);
    let mut lines = String::new();
    for i in 0..30i64 {
        // Out of order within the hour, and every tenth point sent twice with a new value (later wins).
        let t = 1_690_100_000 + (i * 37) % 1800;
        lines.push_str(&format!("put app.m {t} {} host=h{}\n", i * 3, i % 2));
        if i % 10 == 0 {
            lines.push_str(&format!("put app.m {t} {}.5 host=h{}\n", i * 3, i % 2));
        }
    }
    c.put_lines(&lines);
    let path = "/api/query?start=1690099000&end=1690110000&m=sum:app.m%7Bhost=*%7D";
    let (status, _, from_rtsd) = http_answer(c.addr(), "GET", path, "");
    let (_, _, from_opentsdb) = http_answer(tb.tsd, "GET", path, "");
    assert_eq!(status, 200, "{from_rtsd}");
    assert_eq!(from_rtsd, from_opentsdb, "appends written by rtsd: rtsd and OpenTSDB answer alike");
    let answer: Value = serde_json::from_str(&from_rtsd).unwrap();
    let points: usize = answer.as_array().unwrap().iter().map(|s| s["dps"].as_object().unwrap().len()).sum();
    assert_eq!(points, 30, "{from_rtsd}");
    let h0 = answer.as_array().unwrap().iter().find(|s| s["tags"]["host"] == "h0").expect("series h0");
    assert_eq!(h0["dps"]["1690100000"], 0.5, "the later of two values at one instant: {from_rtsd}");
    eprintln!("rtsd_on_hbase: appends read alike by OpenTSDB ({:.0}s)", started.elapsed().as_secs_f64());
    drop(c);

    // 7. rtsd's own rollups on HBase. The data table already has rows, so the first node to compute rollups
    // records that they are complete from the next hour on (earlier hours are read raw): the points go after it.
    let d = tb.start_rtsd(&[("rtsd.rollups.auto", "true")]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let base = now - now % 3600 + 2 * 3600;
    let mut lines = String::new();
    for i in 0..240i64 {
        for host in ["a", "b"] {
            lines.push_str(&format!("put ru.m {} {} host={host}\n", base + i * 30, i % 17));
        }
    }
    d.put_lines(&lines);
    for (ds, table) in [("1h-sum", "1h"), ("10m-avg", "10m"), ("1m-max", "1m"), ("2h-count", "1h")] {
        let q = format!("/api/query?start={base}&end={}&m=sum:{ds}:ru.m%7Bhost=*%7D&show_query", base + 7200);
        let (status, _, rolled) = http_answer(d.addr(), "GET", &q, "");
        assert_eq!(status, 200, "{q}: {rolled}");
        assert!(rolled.contains(&format!(r#""rollupTable":"{table}""#)), "{q} read no rollup table: {rolled}");
        let raw_q = q.replace(&format!(":{ds}:"), &format!(":{ds}:rollup_raw:"));
        let (_, _, raw) = http_answer(d.addr(), "GET", &raw_q, "");
        let series = |answer: &str| -> Vec<(Value, Value)> {
            let v: Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
            v.as_array().unwrap().iter().map(|s| (s["tags"].clone(), s["dps"].clone())).collect()
        };
        assert_eq!(series(&rolled), series(&raw), "{q}: rollups answer as the raw rows");
        assert_eq!(series(&raw).len(), 2, "{raw}");
    }
    eprintln!("rtsd_on_hbase: rollups folded and read on HBase ({:.0}s)", started.elapsed().as_secs_f64());
    drop(d);

    // 8. Retention becomes HBase TTLs (set in the background once the node is up).
    let admin = HBaseEngine::connect(&options, &[]).expect("connect the HBase engine");
    let e = tb.start_rtsd(&[("rtsd.retention.raw_hours", "240")]);
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    while admin.family_ttl("tsdb:t").unwrap() != Some(864_000) {
        assert!(
            Instant::now() < deadline,
            "tsdb:t TTL still {:?} 120 s after the node started",
            admin.family_ttl("tsdb:t")
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // Stopped before the reset, so its read-back of the change does not race it.
    drop(e);
    for family in ["tsdb:t", "tsdb-agg:t"] {
        admin.set_family_ttl(family, None).unwrap();
    }
    assert_eq!(admin.family_ttl("tsdb:t").unwrap(), None);
    eprintln!("rtsd_on_hbase: retention set as tsdb's TTL ({:.0}s)", started.elapsed().as_secs_f64());

    // 9. The README's fleet example (last: its metric's UID would shift the TSUIDs the differences list).
    run_readme_fleet_example(&tb);
    drop(a);
    drop(b);
    drop(tb);
}
