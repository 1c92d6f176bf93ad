//! Micro-benchmarks of rtsd's hot paths: put-line parse, JSON put parse, UID lookup, row encode, row decode, a
//! raw row's rollup buckets, downsample + aggregate, the rollup fold of a burst's raw rows, q1 over a burst not
//! folded yet, and a rollup row's read in each encoding. `cargo bench -p rtsd-bench` (or
//! `-- <filter>`, e.g. `-- put_line`).
//!
//! Inputs come from the same data sets as the side-by-side runner (`rtsd_bench::data`), so a line here is a line
//! there. Each benchmark reports elements (points or lines) per second.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rtsd::config::Config;
use rtsd::metrics::Metrics;
use rtsd::query::{run_group, Aggregator, Downsampler, FillPolicy, Point, Query};
use rtsd::store::Store;
use rtsd_bench::data::{self, DataSet};
use rtsd_protocol::codec::{self, SaltConfig, Value};
use rtsd_protocol::json_put;
use rtsd_protocol::point::{Rules, UidKind};
use rtsd_protocol::telnet::{self, Command};
use std::sync::Arc;

/// 1000 points of data set A: 100 metrics x 10 hosts, one round.
fn sample() -> DataSet {
    DataSet { name: "A", metrics: 100, hosts: 10, rounds: 1, last_ts: 1_795_302_470, names: "" }
}

fn put_line_parse(c: &mut Criterion) {
    let set = sample();
    let buf = set.render_telnet(1).concat();
    let rules = Rules::default();
    let mut g = c.benchmark_group("put_line_parse");
    g.throughput(Throughput::Elements(set.points()));
    g.bench_function("1000 lines", |b| {
        b.iter(|| {
            let mut pos = 0;
            let mut ok = 0u32;
            while let Some((line, used)) = telnet::next_line(&buf[pos..]) {
                pos += used;
                if let Command::Put(words) = telnet::parse_command(line) {
                    ok += telnet::parse_put(&words, &rules).is_ok() as u32;
                }
            }
            assert_eq!(ok, 1000);
            black_box(ok)
        })
    });
    g.finish();
}

fn json_put_parse(c: &mut Criterion) {
    let set = sample();
    let req = set.render_http(1, 1000).concat().concat();
    let body = &req[req.windows(4).position(|w| w == b"\r\n\r\n").expect("a request head") + 4..];
    let mut g = c.benchmark_group("json_put_parse");
    g.throughput(Throughput::Elements(set.points()));
    g.bench_function("1000-point body", |b| {
        b.iter(|| {
            let points = json_put::parse_put_body(black_box(body)).expect("the body parses");
            assert_eq!(points.len(), 1000);
            points
        })
    });
    g.bench_function("1000-point body, plain reader", |b| {
        b.iter(|| {
            let plain = json_put::parse_plain_put_body(black_box(body)).expect("a plain body");
            assert_eq!(plain.points.len(), 1000);
            plain
        })
    });
    g.finish();
}

fn open_store(dir: &std::path::Path, overrides: &[(&str, &str)]) -> Store {
    let config = Config::for_data_dir(dir, overrides).expect("a test config");
    Store::open(&config.store_options(), Arc::new(Metrics::new())).expect("a fresh store")
}

fn uid_lookup(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(dir.path(), &[]);
    let hosts: Vec<String> = (0..1000).map(data::host_name).collect();
    for h in &hosts {
        store.uids().get_or_create(UidKind::TagValue, h, true).expect("assigned");
    }
    let mut g = c.benchmark_group("uid_lookup");
    g.throughput(Throughput::Elements(hosts.len() as u64));
    g.bench_function("1000 cached tag values", |b| {
        b.iter(|| {
            for h in &hosts {
                black_box(store.uids().get_or_create(UidKind::TagValue, h, true).expect("cached"));
            }
        })
    });
    g.finish();
}

/// One hour of one series at 10 s: 360 float points.
fn hour_points() -> Vec<(i64, Value)> {
    let mut s = data::Series::new(7, 0);
    (0..360).map(|i| (1_795_298_400 + i * 10, Value::Float(s.next_value().as_f64() as f32))).collect()
}

fn row_encode(c: &mut Criterion) {
    let points = hour_points();
    let salt = SaltConfig::default();
    let (metric, tagk, tagv) = ([0u8, 0, 1], [0u8, 0, 1], [0u8, 0, 7]);
    let mut g = c.benchmark_group("row_encode");
    g.throughput(Throughput::Elements(points.len() as u64));
    g.bench_function("codec: row key + 360 cells", |b| {
        let mut out = Vec::with_capacity(8192);
        b.iter(|| {
            out.clear();
            let key = codec::row_key(&salt, &metric, codec::base_time(points[0].0), &[(&tagk, &tagv)]);
            for (ts, v) in &points {
                let q = codec::build_qualifier(*ts, v.flags());
                codec::push_column(&mut out, &q, &v.encode());
            }
            black_box((key, out.len()))
        })
    });
    // The daemon's write path without the commit: UIDs (cached), row key, qualifier, value, merge operand.
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(dir.path(), &[]);
    let set = sample();
    let buf = set.render_telnet(1).concat();
    let rules = Rules::default();
    let lines: Vec<&[u8]> = buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let parsed: Vec<_> = lines
        .iter()
        .map(|l| match telnet::parse_command(l) {
            Command::Put(words) => telnet::parse_put(&words, &rules).expect("valid").into_owned(),
            _ => unreachable!("put lines only"),
        })
        .collect();
    let mut warm = store.new_batch();
    for p in &parsed {
        store.add_point(&mut warm, p).expect("added");
    }
    g.throughput(Throughput::Elements(parsed.len() as u64));
    g.bench_function("store: add_point x1000 into a batch", |b| {
        b.iter_batched(
            || store.new_batch(),
            |mut batch| {
                for p in &parsed {
                    store.add_point(&mut batch, p).expect("added");
                }
                batch
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn row_decode(c: &mut Criterion) {
    let points = hour_points();
    let base = codec::base_time(points[0].0);
    let mut cells = Vec::new();
    for (ts, v) in &points {
        codec::push_column(&mut cells, &codec::build_qualifier(*ts, v.flags()), &v.encode());
    }
    let compacted = codec::merge_row(None, &[&cells], false).expect("merges").row;
    let mut g = c.benchmark_group("row_decode");
    g.throughput(Throughput::Elements(points.len() as u64));
    g.bench_function("compacted row, 360 points", |b| {
        b.iter(|| {
            let p = codec::row_points(base, black_box(&compacted)).expect("decodes");
            assert_eq!(p.len(), 360);
            p
        })
    });
    // What the rollup fold reads each raw row into (issue 22 item 5): the points without their qualifiers, into
    // one reused buffer.
    let mut values = Vec::new();
    g.bench_function("compacted row, 360 points, values only", |b| {
        b.iter(|| {
            codec::row_values(base, black_box(&compacted), &mut values).expect("decodes");
            assert_eq!(values.len(), 360);
        })
    });
    g.bench_function("360 single cells", |b| {
        b.iter(|| {
            let p = codec::row_points(base, black_box(&cells)).expect("decodes");
            assert_eq!(p.len(), 360);
            p
        })
    });
    g.bench_function("merge 360 cells into one compacted column", |b| {
        b.iter(|| codec::merge_row(None, &[black_box(&cells)], false).expect("merges"))
    });
    // A closed hour as stored (issue 7 item 4): what reading it costs against the compacted column above, and
    // what packing costs the merge operator.
    let packed = codec::pack_row(&compacted).expect("packs");
    g.bench_function("packed row, 360 points", |b| {
        b.iter(|| {
            let p = codec::row_points(base, black_box(&packed)).expect("decodes");
            assert_eq!(p.len(), 360);
            p
        })
    });
    g.bench_function("pack a compacted row of 360 points", |b| {
        b.iter(|| codec::pack_row(black_box(&compacted)).expect("packs"))
    });
    // A series' next point merging into its row as a read or a compaction meets it: the row stored as the
    // compacted column (a live series' row), or packed (a row once quiet, see `store::tables::row_quiet`).
    let (last_ts, last) = points[359];
    let mut next = Vec::new();
    codec::push_column(&mut next, &codec::build_qualifier(last_ts + 5, last.flags()), &last.encode());
    for (name, stored) in [("compacted", &compacted), ("packed", &packed)] {
        g.bench_function(format!("merge a point into a {name} row of 360"), |b| {
            b.iter(|| codec::merge_row(Some(black_box(stored)), &[&next], false).expect("merges"))
        });
    }
    g.finish();
}

/// The buckets of one raw row as a fold and a grid read take them (issue 22 item 5): 360 points of an hour at
/// 10 s, into 1m buckets, and into the fold's 1m, 10m and 1h at once.
fn row_buckets(c: &mut Criterion) {
    let points: Vec<codec::TimedValue> =
        hour_points().into_iter().map(|(ts, value)| codec::TimedValue { timestamp_ms: ts * 1000, value }).collect();
    let mut g = c.benchmark_group("row_buckets");
    g.throughput(Throughput::Elements(points.len() as u64));
    g.bench_function("360 points into 1m buckets", |b| {
        b.iter(|| {
            let out = rtsd::store::rollup::buckets(black_box(&points), 60);
            assert_eq!(out.len(), 60);
            out
        })
    });
    g.bench_function("360 points into 1m, 10m and 1h buckets", |b| {
        b.iter(|| rtsd::store::rollup::buckets_each(black_box(&points), [60, 600, 3600]))
    });
    g.finish();
}

fn downsample_aggregate(c: &mut Criterion) {
    // q1 in miniature: 100 hosts x 1 hour at 10 s, sum:1m-avg.
    let start_ms = 1_795_298_400_000i64;
    let series: Vec<Vec<Point>> = (0..100)
        .map(|h| {
            let mut s = data::Series::new(h, 0);
            (0..360).map(|i| Point::float(start_ms + i * 10_000, s.next_value().as_f64())).collect()
        })
        .collect();
    let query = Query {
        start_ms,
        end_ms: start_ms + 3_599_999,
        aggregator: Aggregator::Sum,
        downsample: Some(Downsampler::fixed(60_000, Aggregator::Avg, FillPolicy::None)),
        rate: None,
    };
    let mut g = c.benchmark_group("downsample_aggregate");
    g.throughput(Throughput::Elements(100 * 360));
    g.bench_function("sum:1m-avg, 100 series x 360 points", |b| {
        b.iter(|| {
            let out = run_group(&query, series.iter().map(|s| s.iter().copied())).expect("finite");
            assert_eq!(out.len(), 60);
            out
        })
    });
    g.finish();
}

/// `HOSTS` series of data set B's first metric, one hour at 10 s, written round after round as B sends them and
/// flushed every `rounds_per_flush` rounds, so each raw row holds as many unmerged fragments as it does after a
/// burst (or one), with rollups on and nothing folded yet: the flushes do not fold the hour themselves (it is
/// history by now, which they would, see `rtsd.rollups.fold_on_flush`), so the folds and grid reads measured
/// here have it all.
const BURST_HOSTS: u32 = 200;
const BURST_HOUR: i64 = 1_795_298_400;
fn burst(rounds_per_flush: i64) -> (tempfile::TempDir, Store) {
    const ROUNDS: i64 = 360;
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = open_store(dir.path(), &[("tsd.rollups.enable", "true"), ("rtsd.rollups.fold_on_flush", "false")]);
    let hosts: Vec<String> = (0..BURST_HOSTS).map(data::host_name).collect();
    let mut series: Vec<data::Series> = (0..BURST_HOSTS).map(|h| data::Series::new(h, 0)).collect();
    for round in 0..ROUNDS {
        let mut batch = store.new_batch();
        for (h, s) in series.iter_mut().enumerate() {
            let point = rtsd_protocol::point::DataPoint {
                metric: "sys.cpu.user".into(),
                timestamp: BURST_HOUR + round * 10,
                value: Value::Float(s.next_value().as_f64() as f32),
                tags: [("host".into(), hosts[h].as_str().into())].into_iter().collect(),
            };
            store.add_point(&mut batch, &point).expect("added");
        }
        store.commit(&mut batch, false).expect("committed");
        if (round + 1) % rounds_per_flush == 0 {
            store.flush_pending().expect("flushed");
        }
    }
    store.flush_pending().expect("flushed");
    (dir, store)
}

/// The rollup fold of one hour of a burst (issue 22 item 5: the fold has to keep up with ingest, or the first
/// query after a burst pays for the rest). Throughput is raw rows folded.
fn rollup_fold(c: &mut Criterion) {
    // RUST_LOG=rtsd::store::rollup=debug shows where each fold's time went.
    rtsd::logs::init("warn");
    let mut g = c.benchmark_group("rollup_fold");
    g.sample_size(10);
    g.throughput(Throughput::Elements(u64::from(BURST_HOSTS)));
    for (name, rounds_per_flush) in [("200 rows of 30 fragments", 12), ("200 rows of 1 fragment", 360)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || burst(rounds_per_flush),
                |(dir, store)| {
                    assert_eq!(store.fold_rollups(None).expect("folded"), u64::from(BURST_HOSTS));
                    (dir, store)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// q1 over one hour of a burst that no fold has reached yet (issue 22 item 5: the first dashboard after a burst):
/// the grid read takes each raw row's buckets from its points; beside it, the same query once folded and the
/// query answered from raw points (`rollup_raw`). Throughput is raw rows (series-hours) answered.
fn burst_query(c: &mut Criterion) {
    rtsd::logs::init("warn");
    let q1 = |store: &Store, usage: &str| {
        let params = vec![
            ("start".to_string(), BURST_HOUR.to_string()),
            ("end".to_string(), (BURST_HOUR + 3599).to_string()),
            ("m".to_string(), format!("sum:1m-avg:{usage}sys.cpu.user")),
        ];
        let query = rtsd_protocol::query::parse_get(&params, 0).expect("q1 parses");
        let out = rtsd::query::exec::execute(store, &query, Default::default()).expect("q1 runs");
        assert_eq!(out[0].dps.len(), 60);
        out
    };
    let mut g = c.benchmark_group("burst_query");
    g.throughput(Throughput::Elements(u64::from(BURST_HOSTS)));
    let (_dir, store) = burst(12);
    let backlog = store.fold_backlog();
    assert_eq!(backlog, BURST_HOSTS as usize);
    g.bench_function("q1, 200 rows of 30 fragments not folded", |b| b.iter(|| q1(&store, "")));
    assert_eq!(store.fold_backlog(), backlog, "the grid read folded nothing");
    g.bench_function("q1 from raw points (rollup_raw), 200 rows of 30 fragments", |b| {
        b.iter(|| q1(&store, "rollup_raw:"))
    });
    store.fold_rollups(None).expect("folded");
    g.bench_function("q1, 200 rows folded", |b| b.iter(|| q1(&store, "")));
    g.finish();
}

/// One hour of one-minute buckets of data set B's two-decimal gauge (six points a bucket): sums as doubles,
/// counts, mins and maxes as decimals parsed from text.
fn gauge_hour() -> rtsd::store::rollup_rows::Slots {
    let mut row = rtsd::store::rollup_rows::Slots::new(60);
    let mut hundredths = 5000i64;
    let value = |h: i64| Value::Double(format!("{}", h as f64 / 100.0).parse().unwrap());
    for i in 0..60 {
        let points: Vec<i64> = (0..6)
            .map(|j| {
                hundredths = (hundredths + (i * 37 + j * 11) % 41 - 20).clamp(0, 10_000);
                hundredths
            })
            .collect();
        let sum: f64 = points.iter().map(|&h| h as f64 / 100.0).sum();
        let (lo, hi) = (*points.iter().min().unwrap(), *points.iter().max().unwrap());
        row.set(i as usize, Some([Value::Double(sum), Value::Int(6), value(lo), value(hi)]));
    }
    row
}

/// What a rollup row costs to read and to store in each encoding (issue 22 items 2 and 4): the grid read of
/// q1's columns (sum and count: plain doubles and bytes either way), of min and max (decimal deltas once
/// RocksDB has stored the row), and the re-encoding a flush or compaction does.
fn rollup_row(c: &mut Criterion) {
    use rtsd::store::rollup_rows::{self, RowView};
    let plain = gauge_hour().encode();
    let stored = rollup_rows::compacted(&plain).expect("mins and maxes take decimal deltas");
    let mut g = c.benchmark_group("rollup_row");
    g.throughput(Throughput::Elements(60));
    for (name, row) in [("plain", &plain), ("stored", &stored)] {
        for (columns, which) in [("sum and count", [0, 1]), ("min and max", [2, 3])] {
            g.bench_function(format!("grid read of a {name} row, {columns}"), |b| {
                let mut out = Vec::with_capacity(60);
                b.iter(|| {
                    let view = RowView::new(black_box(row)).unwrap();
                    for c in which {
                        view.column(c).unwrap().decode_f64(&mut out);
                        black_box(&out);
                    }
                })
            });
        }
    }
    g.bench_function("re-encode a plain row as RocksDB stores it", |b| {
        b.iter(|| rollup_rows::compacted(black_box(&plain)))
    });
    g.finish();
    eprintln!("rollup_row: {} bytes plain, {} stored", plain.len(), stored.len());
}

criterion_group!(
    benches,
    put_line_parse,
    json_put_parse,
    uid_lookup,
    row_encode,
    row_decode,
    row_buckets,
    downsample_aggregate,
    rollup_fold,
    burst_query,
    rollup_row
);
criterion_main!(benches);
