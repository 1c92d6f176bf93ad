//! The collector over a real store: replies, exactly-once across resends and restarts, the record mapping as
//! stored, and bad bodies that change nothing (spec: chukwa §8.2-§8.5, §8.7).
use std::path::Path;
use std::sync::Arc;

use rtsd_protocol::chukwa::{encode_body, Chunk, RecordEnds};
use rtsd_protocol::codec::Value;
use rtsd_protocol::point::{Rules, UidKind};

use super::*;
use crate::config::Config;
use crate::store::ReadBudget;

const T: i64 = 1_466_380_800_000;
const TAGS: &str = r#" cluster="demo""#;

/// A stored point: (ms, value, tags sorted).
type StoredPoint = (i64, Value, Vec<(String, String)>);

struct Fixture {
    store: Store,
    collector: Collector,
    metrics: Metrics,
    rules: Rules,
}

fn open(dir: &Path) -> Fixture {
    let config = Config::for_data_dir(dir, &[]).unwrap();
    let metrics = Arc::new(Metrics::new());
    let store = Store::open(&config.store_options(), metrics).unwrap();
    let collector = Collector::open(&store, config.chukwa.clone()).unwrap();
    Fixture { store, collector, metrics: Metrics::new(), rules: config.rules.clone() }
}

impl Fixture {
    fn post(&self, chunks: &[Chunk<'_>]) -> (String, PostSummary) {
        let body = encode_body(chunks).unwrap();
        self.collector.ingest_summary(&self.store, &self.metrics, &self.rules, &body).unwrap()
    }

    fn post_raw(&self, body: &[u8]) -> Result<String, IngestError> {
        self.collector.ingest(&self.store, &self.metrics, &self.rules, body)
    }

    /// Every stored point of `metric`: (ms, value, tags sorted).
    fn points(&self, metric: &str) -> Vec<StoredPoint> {
        let uids = self.store.uids();
        let Some(uid) = uids.get(UidKind::Metric, metric).unwrap() else { return Vec::new() };
        let series =
            self.store.scan_series(uid.as_bytes(), 0, i64::MAX, &mut ReadBudget::default(), |_| Ok(true)).unwrap();
        let mut out = Vec::new();
        for s in series {
            let mut tags: Vec<(String, String)> = s
                .tags
                .iter()
                .map(|(k, v)| {
                    (
                        uids.name_of(UidKind::TagKey, k).unwrap().unwrap(),
                        uids.name_of(UidKind::TagValue, v).unwrap().unwrap(),
                    )
                })
                .collect();
            tags.sort();
            out.extend(s.points.iter().map(|p| (p.timestamp_ms, p.value, tags.clone())));
        }
        out.sort_by_key(|p| p.0);
        out
    }

    /// Number of keys in a column family.
    fn keys(&self, cf: &'static str) -> usize {
        let mut n = 0;
        self.store
            .scan_raw(cf, &[], |_, _| {
                n += 1;
                true
            })
            .unwrap();
        n
    }
}

fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    v.sort();
    v
}

/// Lines `[from, to)` of a log whose line `i` is `line i\n` padded to 20 bytes: a chunk of them with one record
/// per line (CharFileTailingAdaptorUTF8).
fn log_bytes(from: usize, to: usize) -> Vec<u8> {
    (from..to).flat_map(|i| format!("{:<19}\n", format!("line {i}")).into_bytes()).collect()
}

fn log_chunk(data: &[u8], first_line: usize) -> Chunk<'_> {
    let seq = ((first_line * 20) + data.len()) as i64;
    Chunk::new(seq, "host1", TAGS, "/var/log/app.log", "AppLog", data)
        .with_record_ends(RecordEnds::from_lengths(std::iter::repeat_n(20, data.len() / 20)))
}

/// §8.7 vector 1: the §2.1 body, one chunk, one line; vector 2: the empty chunk.
#[test]
fn replies_one_ok_line_per_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let chunk = Chunk::new(8, "host1", TAGS, "/var/log/app.log", "AppLog", b"a=1\nb=2\n").with_record_ends([3, 7]);
    let body = encode_body([&chunk]).unwrap();
    assert_eq!(body.len(), 88);
    assert_eq!(f.post_raw(&body).unwrap(), "ok: 8 bytes ending at offset 7\n");
    let empty = Chunk::new(5, "host1", TAGS, "/x", "AppLog", b"");
    let (reply, summary) = f.post(&[empty.clone(), chunk.clone()]);
    assert_eq!(reply, "ok: 0 bytes ending at offset 4\nok: 8 bytes ending at offset 7\n");
    assert_eq!(summary.new_chunks, 0, "the resent chunk is a duplicate, the empty one ignored");
    assert_eq!(f.post_raw(&encode_body([]).unwrap()).unwrap(), "");
}

/// §8.5's worked example, stored both ways: OpenTSDB points and Chukwa's `chukwa` rows, and `chukwa_meta`.
#[test]
fn sigar_sample_becomes_points_and_chukwa_rows() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let json = format!(
        r#"{{"timestamp":{T},"cpu":[{{"combined":12.5,"user":10,"sys":2.5,"idle":87.5,"Vendor":"Intel"}}],"memory":{{"UsedPercent":"43.2"}}}}"#
    );
    let chunk = Chunk::new(json.len() as i64, "host1", TAGS, "Sigar", "SystemMetrics", json.as_bytes());
    let (_, summary) = f.post(&[chunk]);
    assert_eq!((summary.new_chunks, summary.records), (1, 1));
    let demo = tags(&[("cluster", "demo"), ("host", "host1")]);
    assert_eq!(f.points("SystemMetrics.cpu.combined.0"), [(T, Value::Float(12.5), demo.clone())]);
    assert_eq!(f.points("SystemMetrics.cpu.combined"), [(T, Value::Float(12.5), demo.clone())]);
    assert_eq!(f.points("SystemMetrics.memory.UsedPercent"), [(T, Value::Double(43.2), demo.clone())]);
    assert_eq!(f.points("SystemMetrics.cpu.user.0"), [(T, Value::Int(10), demo.clone())]);
    assert!(f.points("SystemMetrics.cpu.Vendor.0").is_empty(), "not a number");

    // Chukwa's row for the metric, keyed as HBaseUtil.buildKey (spec §5.3 first example).
    let key = schema::cell_key(T, "SystemMetrics.cpu.combined", "host1");
    assert_eq!(&key[..2], b"17");
    let mut found = None;
    f.store
        .scan_raw(CF_CHUKWA_T, &key, |k, v| {
            found = (k == key).then(|| v.to_vec());
            false
        })
        .unwrap();
    assert_eq!(found.as_deref(), Some(&b"12.5"[..]));
    assert_eq!(schema::read_series(&f.store, "SystemMetrics.cpu.combined", "host1", T, T + 1).unwrap(), [(T, 12.5)]);
    assert_eq!(schema::read_series(&f.store, "SystemMetrics.cpu.combined", "host1", T + 1, T + 2).unwrap(), []);
    assert_eq!(schema::metric_groups(&f.store).unwrap(), ["SystemMetrics"]);
    let names = schema::metric_names(&f.store, "SystemMetrics").unwrap();
    assert!(
        names.contains(&"SystemMetrics.cpu.combined".to_string())
            && names.contains(&"SystemMetrics.cpu.Vendor.0".to_string())
    );
    assert_eq!(schema::source_names(&f.store).unwrap(), ["host1"]);
    // The annotation row holds the tags.
    let mut tags_row = None;
    let akey = schema::cell_key(T, "SystemMetrics", "host1");
    f.store
        .scan_raw(CF_CHUKWA_A, &akey, |k, v| {
            tags_row = (k == akey).then(|| v.to_vec());
            false
        })
        .unwrap();
    assert_eq!(tags_row.as_deref(), Some(TAGS.as_bytes()));
}

/// §8.7 vector 4 with records, then the same after a restart of the collector and store.
#[test]
fn resends_store_each_record_once_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = open(dir.path());
        let (a, b) = (log_bytes(0, 5), log_bytes(5, 12));
        let (_, s) = f.post(&[log_chunk(&a, 0), log_chunk(&b, 5)]);
        assert_eq!((s.new_chunks, s.records), (2, 12));
        // Reply lost: the agent re-reads from line 5 with other boundaries, up to line 15.
        let c = log_bytes(5, 15);
        let (_, s) = f.post(&[log_chunk(&c, 5)]);
        assert_eq!((s.new_chunks, s.records), (1, 3), "only lines 12-14 are new");
    }
    let f = open(dir.path());
    // After a restart: the agent resumes from its older checkpoint (line 5) with smaller reads, in two posts; the
    // second chunk starts at no chunk boundary seen before (a continuation). Only lines 15-17 are new.
    let (d, e) = (log_bytes(5, 9), log_bytes(9, 18));
    assert_eq!(f.post(&[log_chunk(&d, 5)]).1.records, 0);
    let (_, s) = f.post(&[log_chunk(&e, 9)]);
    assert_eq!((s.new_chunks, s.records), (1, 3));
    // A rotation: a new file from 0 with other bytes is new again.
    let rotated: Vec<u8> = (0..3).flat_map(|i| format!("{:<19}\n", format!("new {i}")).into_bytes()).collect();
    let (_, s) = f.post(&[log_chunk(&rotated, 0)]);
    assert_eq!((s.new_chunks, s.records), (1, 3));
}

/// Bounded memory (issue 6 item 5): past `rtsd.chukwa.dedup.streams` the least recently used streams leave
/// memory, and a stream that comes back is reloaded from RocksDB: its resent records are still duplicates.
#[test]
fn streams_beyond_the_memory_bound_are_reloaded_and_still_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::for_data_dir(dir.path(), &[("rtsd.chukwa.dedup.streams", "4")]).unwrap();
    let store = Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap();
    let collector = Collector::open(&store, config.chukwa.clone()).unwrap();
    let f = Fixture { store, collector, metrics: Metrics::new(), rules: config.rules.clone() };
    let data = log_bytes(0, 3);
    let chunk = |i: usize| {
        Chunk::new(60, "host1", TAGS, format!("/var/log/app{i}.log"), "AppLog", &data)
            .with_record_ends(RecordEnds::from_lengths(std::iter::repeat_n(20, 3)))
    };
    for i in 0..20 {
        assert_eq!(f.post(&[chunk(i)]).1.new_chunks, 1);
        assert!(lock(&f.collector.streams).map.len() <= 4, "{i}");
    }
    // Stream 0 left memory long ago; all of them are still known.
    assert!(!lock(&f.collector.streams).map.keys().any(|k| k == &chunk(0).stream_key()));
    for i in 0..20 {
        assert_eq!(f.post(&[chunk(i)]).1.new_chunks, 0, "stream {i} resent");
    }
    // Slots in use by a post are never dropped, even past the bound: all streams of one post stay.
    let (_, s) = f.post(&(20..30).map(chunk).collect::<Vec<_>>());
    assert_eq!(s.new_chunks, 10);
}

/// §8.7 vector 6 through the store: SocketAdaptor events of HadoopMetrics, and the process tag.
#[test]
fn hadoop_metrics_events_are_deduplicated_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let event = |t: i64, v: i64| {
        format!(
            "2016-06-20 00:00:00,000 INFO chukwa.metrics.HadoopMetrics: {{\"timestamp\":{t},\"contextName\":\"jvm\",\"recordName\":\"JvmMetrics\",\"Hostname\":\"nn1\",\"ProcessName\":\"NameNode\",\"GcCount\":{v}}}\n"
        )
        .into_bytes()
    };
    let (e1, e2) = (event(T, 1), event(T + 1000, 2));
    let chunk = |e: &'static [u8]| Chunk::new(e.len() as i64, "agent1", TAGS, "agent1", "HadoopMetrics", e);
    let e1: &'static [u8] = Box::leak(e1.into_boxed_slice());
    let e2: &'static [u8] = Box::leak(e2.into_boxed_slice());
    assert_eq!(f.post(&[chunk(e1)]).1.new_chunks, 1);
    assert_eq!(f.post(&[chunk(e2)]).1.new_chunks, 1);
    assert_eq!(f.post(&[chunk(e1), chunk(e2)]).1.new_chunks, 0);
    let nn = tags(&[("cluster", "demo"), ("host", "nn1"), ("process", "NameNode")]);
    assert_eq!(
        f.points("HadoopMetrics.jvm.JvmMetrics.GcCount"),
        [(T, Value::Int(1), nn.clone()), (T + 1000, Value::Int(2), nn)]
    );
    let mut sources = schema::source_names(&f.store).unwrap();
    sources.sort();
    assert_eq!(sources, ["agent1", "nn1:NameNode"]);
}

/// Framing errors refuse the whole post and change nothing, not even the chunks before the bad one.
#[test]
fn bad_bodies_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let json = format!(r#"{{"timestamp":{T},"cpu":[{{"combined":1,"user":1,"sys":1,"idle":1}}]}}"#);
    let good = Chunk::new(json.len() as i64, "host1", TAGS, "Sigar", "SystemMetrics", json.as_bytes());
    let body = encode_body([&good]).unwrap();
    let with_count = |n: i32, rest: &[u8]| [&n.to_be_bytes()[..], rest].concat();
    let chunk_bytes = &body[4..];
    let mut wrong_version = chunk_bytes.to_vec();
    wrong_version[3] = 2;
    // The source's first byte made an invalid UTF-8 lead byte.
    let mut bad_utf8 = chunk_bytes.to_vec();
    bad_utf8[14] = 0xff;
    let no_records = {
        let c = Chunk::new(0, "host1", TAGS, "stream", "AppLog", b"");
        let mut b = encode_body([&c]).unwrap();
        let n = b.len();
        b[n - 8..n - 4].copy_from_slice(&0i32.to_be_bytes());
        b.truncate(n - 4);
        b
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", body[..body.len() - 1].to_vec(), "truncated data"),
        ("wrong version", with_count(1, &wrong_version), "Protocol version mismatched"),
        ("bad UTF-8", with_count(1, &bad_utf8), "in source"),
        ("absurd count", with_count(1 << 30, chunk_bytes), "more than the limit of 100000"),
        ("count beyond body", with_count(1000, chunk_bytes), "cannot fit"),
        ("negative count", with_count(-1, chunk_bytes), "negative chunk count"),
        ("good then truncated", with_count(2, &[chunk_bytes, &chunk_bytes[..20]].concat()), "bad chunk 1"),
        ("no records", no_records, "numRecords is 0"),
        ("empty body", Vec::new(), "truncated chunk count"),
    ];
    for (what, body, text) in cases {
        match f.post_raw(&body) {
            Err(IngestError::Frame(e)) => assert!(e.to_string().contains(text), "{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    for cf in [CF_CHUKWA_STREAMS, CF_CHUKWA_T, CF_CHUKWA_A, CF_CHUKWA_META] {
        assert_eq!(f.keys(cf), 0, "{cf}");
    }
    assert!(f.points("SystemMetrics.cpu.combined").is_empty());
    // Framed but unparsable content is acknowledged and counted, not stored.
    let junk = Chunk::new(9, "host1", TAGS, "Sigar", "SystemMetrics", b"not json!");
    assert_eq!(f.post(&[junk]).0, "ok: 9 bytes ending at offset 8\n");
    assert_eq!(f.keys(CF_CHUKWA_T), 0);
    assert!(f.metrics.encode().contains("rtsd_chukwa_dropped_total{type=\"unparsable\"} 1"));
}

/// The `chukwa.ingest.*` series count what was new, durably and with the data.
#[test]
fn ingest_series_count_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let a = log_bytes(0, 4);
    f.post(&[log_chunk(&a, 0)]);
    f.post(&[log_chunk(&a, 0)]);
    let records = f.points("chukwa.ingest.records");
    let lines = tags(&[("cluster", "demo"), ("datatype", "AppLog"), ("host", "host1")]);
    assert_eq!(records.len(), 1);
    assert_eq!((records[0].1, &records[0].2), (Value::Int(4), &lines));
    let dups = f.points("chukwa.dedup.duplicate");
    assert_eq!((dups.len(), dups[0].1), (1, Value::Int(1)));
    let text = f.metrics.encode();
    assert!(text.contains("rtsd_chukwa_records_total{datatype=\"AppLog\"} 4"), "{text}");
    assert!(text.contains("rtsd_chukwa_dedup_total{type=\"duplicate\"} 1"), "{text}");
}

/// A failed commit answers 503 and leaves nothing behind, in storage or in memory: the agent's re-send of the
/// same post is then stored whole, once.
#[test]
fn a_failed_commit_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let a = log_bytes(0, 4);
    f.post(&[log_chunk(&a, 0)]);
    let b = log_bytes(4, 9);
    let body = encode_body([&log_chunk(&b, 4), &log_chunk(&a, 0)]).unwrap();
    f.collector.fail_next_commit.store(true, Ordering::Relaxed);
    assert!(matches!(f.post_raw(&body), Err(IngestError::Unavailable(_))));
    let (_, s) = f.collector.ingest_summary(&f.store, &f.metrics, &f.rules, &body).unwrap();
    assert_eq!((s.new_chunks, s.records), (1, 5), "the failed post's chunk is still new");
    let (_, s) = f.collector.ingest_summary(&f.store, &f.metrics, &f.rules, &body).unwrap();
    assert_eq!((s.new_chunks, s.records), (0, 0));
    let records: i64 = f
        .points("chukwa.ingest.records")
        .iter()
        .map(|p| match p.1 {
            Value::Int(n) => n,
            _ => 0,
        })
        .sum();
    assert_eq!(records, 9);
}

/// Streams idle past `rtsd.chukwa.dedup.idle_secs` are forgotten at start-up (and when they come back).
#[test]
fn idle_streams_are_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let a = log_bytes(0, 4);
    let other = Chunk::new(a.len() as i64, "host2", TAGS, "/var/log/other.log", "AppLog", &a);
    f.post(&[log_chunk(&a, 0), other.clone()]);
    assert!(f.keys(CF_CHUKWA_STREAMS) >= 4);
    // A collector that keeps state for a day still knows both streams.
    let again = Collector::open(&f.store, f.collector.config().clone()).unwrap();
    let body = encode_body([&other]).unwrap();
    let (_, s) = again.ingest_summary(&f.store, &f.metrics, &f.rules, &body).unwrap();
    assert_eq!(s.new_chunks, 0);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let mut config = f.collector.config().clone();
    config.dedup.idle_ms = 1;
    let forgetful = Collector::open(&f.store, config).unwrap();
    assert_eq!(f.keys(CF_CHUKWA_STREAMS), 0);
    let (_, s) = forgetful.ingest_summary(&f.store, &f.metrics, &f.rules, &body).unwrap();
    assert_eq!(s.new_chunks, 1, "a forgotten stream is new");
    // Idle while in memory: forgotten on its next post, its old ring deleted.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let (_, s) = forgetful.ingest_summary(&f.store, &f.metrics, &f.rules, &body).unwrap();
    assert_eq!(s.new_chunks, 1);
    let again = Collector::open(&f.store, f.collector.config().clone()).unwrap();
    assert_eq!(again.ingest_summary(&f.store, &f.metrics, &f.rules, &body).unwrap().1.new_chunks, 0);
}

#[test]
fn kept_records_and_bytes() {
    let data = log_bytes(0, 3);
    let c = log_chunk(&data, 0);
    assert_eq!(Kept::of(&c, None), Kept { records: 3, record_from: 0, byte_from: 0 });
    assert_eq!(Kept::of(&c, Some(20)), Kept { records: 2, record_from: 20, byte_from: 20 });
    assert_eq!(Kept::of(&c, Some(30)), Kept { records: 2, record_from: 20, byte_from: 30 });
    assert_eq!(Kept::of(&c, Some(40)), Kept { records: 1, record_from: 40, byte_from: 40 });
    assert_eq!(Kept::of(&c, Some(60)), Kept { records: 0, record_from: 60, byte_from: 60 });
    // One record straddling: whole for JSON, the bytes past the mark for raw lines.
    let one = Chunk::new(60, "h", "", "s", "T", &data);
    assert_eq!(Kept::of(&one, Some(25)), Kept { records: 1, record_from: 0, byte_from: 25 });
}

#[test]
fn sanitising() {
    let rules = Rules::default();
    assert_eq!(sanitize("nn1.example.com:NameNode", &rules, "x"), "nn1.example.com_NameNode");
    assert_eq!(sanitize("java.lang:type=Memory", &rules, "x"), "java.lang_type_Memory");
    assert_eq!(sanitize("ünïcode/ok-_", &rules, "x"), "ünïcode/ok-_");
    assert_eq!(sanitize("", &rules, "undefined"), "undefined");
    assert_eq!(tsdb_value("12.5"), Some(Value::Float(12.5)));
    assert_eq!(tsdb_value("8589934592"), Some(Value::Int(8_589_934_592)));
    assert_eq!(tsdb_value("true"), Some(Value::Int(1)));
    assert_eq!(tsdb_value("NaN"), None);
    assert_eq!(tsdb_value("Intel"), None);
}

/// What an agent does next in [`exactly_once_against_an_agent_model`].
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Read up to this many lines from where the adaptor is and post them; the reply arrives or is lost.
    Send { lines: usize, reply_lost: bool },
    /// Several reads in one post.
    SendTwo { first: usize, second: usize },
    /// The agent restarts from its checkpoint (the last acknowledged offset).
    Crash,
    /// The collector restarts: its state is what was written.
    Restart,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (1usize..6, proptest::bool::weighted(0.3)).prop_map(|(lines, reply_lost)| Step::Send { lines, reply_lost }),
        1 => (1usize..4, 1usize..4).prop_map(|(first, second)| Step::SendTwo { first, second }),
        1 => Just(Step::Crash),
        1 => Just(Step::Restart),
    ]
}

proptest::proptest! {
    /// The core claim of spec §8.4 against a model agent: a log of lines (one record each, as
    /// CharFileTailingAdaptorUTF8 sends them) posted through lost replies, crashes that resume from the last
    /// acknowledged offset with other chunk boundaries, and collector restarts that keep only what was written,
    /// ends with every line kept exactly once. (Lines are at least 32 bytes, as a resend shorter than 32 bytes
    /// and than the chunk first sent at its offset can't be compared and is stored as new.)
    #[test]
    fn exactly_once_against_an_agent_model(
        lengths in proptest::collection::vec(32usize..90, 5..40),
        steps in proptest::collection::vec(step(), 0..50),
    ) {
        let mut file = Vec::new();
        let mut line_at = std::collections::BTreeMap::new();
        for (i, len) in lengths.iter().enumerate() {
            let mut line = format!("{i:06} ").into_bytes();
            line.resize(len - 1, b'a' + (i % 26) as u8);
            line.push(b'\n');
            file.extend_from_slice(&line);
            line_at.insert(file.len() as i64, i);
        }
        let ends: Vec<i64> = line_at.keys().copied().collect();
        let limits = dedup::DedupLimits::default();
        let mut stored: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = Default::default();
        let mut state = StreamState::new();
        let mut kept = vec![0u32; lengths.len()];
        let (mut committed, mut sent) = (0i64, 0i64);
        // The next `n` lines from `from`: the chunk's end.
        let read = |from: i64, n: usize| -> Option<i64> {
            let i = ends.iter().position(|&e| e > from)?;
            Some(ends[(i + n - 1).min(ends.len() - 1)])
        };
        let post = |state: &mut StreamState, chunks: &[(i64, i64)], kept: &mut Vec<u32>, stored: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>| {
            for &(s, e) in chunks {
                let data = &file[s as usize..e as usize];
                let ends_in: Vec<i32> = ends.iter().filter(|&&x| x > s && x <= e).map(|&x| (x - s - 1) as i32).collect();
                let chunk = Chunk::new(e, "h", "", "/f", "T", data).with_record_ends(ends_in.clone());
                let verdict = state.observe(e, data, false, 1, &limits);
                if verdict.drop_all() {
                    continue;
                }
                let k = Kept::of(&chunk, verdict.trim_at);
                let skip = ends_in.len() - k.records as usize;
                for off in &ends_in[skip..] {
                    kept[line_at[&(s + *off as i64 + 1)]] += 1;
                }
            }
            for (k, v) in state.drain_writes(b"P") {
                match v {
                    Some(v) => stored.insert(k, v),
                    None => stored.remove(&k),
                };
            }
        };
        for step in steps.iter().copied().chain(std::iter::repeat_n(Step::Send { lines: 3, reply_lost: false }, lengths.len())) {
            match step {
                Step::Send { lines, reply_lost } => {
                    let Some(e) = read(sent, lines) else { continue };
                    post(&mut state, &[(sent, e)], &mut kept, &mut stored);
                    sent = e;
                    if !reply_lost {
                        committed = committed.max(e);
                    }
                }
                Step::SendTwo { first, second } => {
                    let Some(e1) = read(sent, first) else { continue };
                    let chunks = match read(e1, second) {
                        Some(e2) => vec![(sent, e1), (e1, e2)],
                        None => vec![(sent, e1)],
                    };
                    post(&mut state, &chunks, &mut kept, &mut stored);
                    sent = chunks.last().map_or(sent, |c| c.1);
                    committed = committed.max(sent);
                }
                Step::Crash => sent = committed,
                Step::Restart => {
                    let entries: Vec<(Vec<u8>, Vec<u8>)> = stored.iter().map(|(k, v)| (k[1..].to_vec(), v.clone())).collect();
                    state = StreamState::load(entries.iter().map(|(k, v)| (&k[..], &v[..]))).unwrap().unwrap_or_default();
                }
            }
        }
        proptest::prop_assert!(kept.iter().all(|&n| n == 1), "kept counts per line: {kept:?}");
    }
}
