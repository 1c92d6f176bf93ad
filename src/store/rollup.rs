//! Rollup tables in RocksDB (spec: ingest §1.7; query §6.13), and rtsd's own rollups of raw points.
//!
//! Each rollup table of the configuration is a column family `<table>:t` keyed like the data table (salt,
//! metric, base time of the interval's row span, tags) whose value is the row's cells in `codec`'s row encoding.
//! Cells are written as merge operands; [`merge_latest`] keeps the last value written per qualifier, as an HBase
//! put does.
//!
//! Automatic rollups never count a point twice. The write batch that stores raw points also stores a mark for
//! each raw row it changes in `rtsd:rollup_dirty`, keyed `generation (8 bytes) ‖ raw row key`, the value the
//! number of points (summed by RocksDB). A row gets one stored mark per generation: later batches only note in
//! memory how many points they added and which instants they touched, which lets the fold recompute just those
//! buckets (a mark without its note, e.g. from before a restart, recomputes the whole row).
//!
//! Folding ([`Store::fold_rollups`]) first moves to a new generation behind a gate that every commit holds
//! while it stamps and writes its marks, so once it is through, every mark of the older generations is written,
//! with its points. It then recomputes the changed buckets of each marked hour from the stored raw row (so
//! overwritten, duplicate, late and out-of-order points come out exactly as a query of the raw row sees them)
//! and writes their cells. Points written meanwhile carry the new generation and are folded next time. A crash
//! before the fold leaves the marks, so the fold happens after the restart. A full fold deletes the marks it
//! handled with one range tombstone, so only marks not yet folded are stored and finding them costs nothing
//! per hour of history; a query's fold of one metric works from the notes and leaves the stored marks to it.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use rocksdb::{MergeOperands, Options, WriteBatch};
use rtsd_protocol::codec::{self, Value};
use rtsd_protocol::point::DataPoint;

use super::rollup_rows::{self, RowView, Slots, COLUMNS};
use super::{AddError, PointBatch, Store, StoreError, StoredSeries, CF_DATA};
use crate::rollup::{RollupInterval, RollupSettings, RollupTarget, RowSpan, AUTO_AGGREGATORS};

/// Raw rows changed since they were last folded (key: generation, big-endian u64, then the raw row key; value:
/// the number of points, i64 little-endian).
pub const CF_ROLLUP_DIRTY: &str = "rtsd:rollup_dirty";

/// The rollup state of an open store.
pub(super) struct Rollups {
    pub(super) settings: RollupSettings,
    /// Column families of the rollup tables (the raw table excluded).
    pub(super) families: Vec<String>,
    /// The intervals rtsd computes, with the IDs of sum, count, min and max.
    auto: Vec<RollupInterval>,
    auto_ids: [u8; 4],
    /// One fold at a time, so a fold that read older raw rows never writes after one that read newer ones.
    fold_lock: Mutex<()>,
    /// The generation new marks get.
    generation: AtomicU64,
    /// Held shared by a commit from reading the generation until its marks are written; taken exclusively by a
    /// fold to move to the next generation.
    gate: RwLock<()>,
    /// Rows with a stored mark not yet handled by a fold, and what was written to them since it was stored.
    pending: Mutex<Notes>,
    /// Whether stored marks may exist that `pending` has no note of (marks from before a restart, or rows past
    /// [`PENDING_CAPACITY`]): then a fold of one metric must read the stored marks too. Cleared by a full fold.
    unnoted: std::sync::atomic::AtomicBool,
    /// Rows a fold of one metric folded, with the generation it went up to: their stored marks of that
    /// generation or older are done, and the next full fold skips them.
    refolded: Mutex<HashMap<Vec<u8>, u64>>,
    /// When the marks' memtable was last flushed (see [`Store::fold_rollups`]).
    marks_flushed: Mutex<std::time::Instant>,
    /// Every mark of this generation and older is deleted (by a full fold): folds start reading after it, not
    /// among the deleted entries still in the memtable.
    folded_through: AtomicU64,
    /// Per automatic table, the time (ms) from which its rollups are complete; before it raw data were written
    /// while it was not maintained (see [`Rollups::resume`]). Read-only opens neither fold nor know the state
    /// of pending work, so they never read automatic rollups.
    complete_since: HashMap<String, i64>,
    read_only: bool,
}

/// `rtsd:meta` key prefix of [`Rollups::complete_since`]: `rollups_since:<table>` -> i64 ms big-endian.
const SINCE_KEY: &str = "rollups_since:";

/// How often the marks' memtable is flushed. Its few live entries would otherwise keep every write-ahead log
/// file since its last flush from being deleted (RocksDB frees a log once all families' data in it is flushed).
const MARKS_FLUSH_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// What was written to a raw row since it was marked: points, and the span of their instants (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Change {
    points: i64,
    first_ms: i64,
    last_ms: i64,
    /// The generation of the stored mark this note belongs to (0: none yet).
    generation: u64,
}

impl Change {
    /// A whole row of unknown changes (a stored mark without its note, after a restart; a bulk load).
    fn whole_row(points: i64) -> Change {
        Change { points, first_ms: i64::MIN, last_ms: i64::MAX, generation: 0 }
    }

    fn merge(&mut self, other: Change) {
        self.points += other.points;
        self.first_ms = self.first_ms.min(other.first_ms);
        self.last_ms = self.last_ms.max(other.last_ms);
    }
}

/// The notes of rows with a stored mark not yet folded, by metric (a row key's metric UID): a query's fold of its
/// metric takes that metric's notes without walking every other metric's (right after a burst of writes that was
/// every raw row of the burst, ~0.5 ms per query for data set B's 96 000 rows).
#[derive(Default)]
struct Notes {
    by_metric: HashMap<Vec<u8>, HashMap<Vec<u8>, Change>>,
    len: usize,
}

impl Notes {
    fn get_mut(&mut self, metric: &[u8], row: &[u8]) -> Option<&mut Change> {
        self.by_metric.get_mut(metric)?.get_mut(row)
    }

    /// Notes a change to `row` (its metric UID at `metric`), merged into its note if it has one.
    fn note(&mut self, metric: std::ops::Range<usize>, row: Vec<u8>, change: Change) {
        let m = row.get(metric).unwrap_or_default();
        let rows = match self.by_metric.get_mut(m) {
            Some(rows) => rows,
            None => self.by_metric.entry(m.to_vec()).or_default(),
        };
        match rows.get_mut(&row) {
            Some(c) => c.merge(change),
            None => {
                rows.insert(row, change);
                self.len += 1;
            }
        }
    }

    /// Takes the notes of `metric`, or of every metric.
    fn take(&mut self, metric: Option<&[u8]>) -> HashMap<Vec<u8>, Change> {
        let taken = match metric {
            Some(m) => self.by_metric.remove(m).unwrap_or_default(),
            None => std::mem::take(&mut self.by_metric).into_values().flatten().collect(),
        };
        self.len -= taken.len();
        taken
    }
}

/// Rows tracked in memory per generation at most; past it, batches store a mark for every row they change.
const PENDING_CAPACITY: usize = 1 << 18;

impl Rollups {
    pub(super) fn new(settings: &RollupSettings) -> Rollups {
        let mut families = Vec::new();
        let mut auto = Vec::new();
        let mut auto_ids = [0u8; 4];
        if let Some(config) = &settings.config {
            for table in config.tables() {
                let family = RollupInterval::family(&table);
                if family != CF_DATA {
                    families.push(family);
                }
            }
            let ids: Option<Vec<u8>> =
                AUTO_AGGREGATORS.iter().map(|a| config.aggregation_ids.get(*a).copied()).collect();
            match ids {
                Some(ids) => {
                    auto_ids.copy_from_slice(&ids);
                    auto = settings.auto_intervals();
                    families
                        .extend(auto.iter().map(|i| RollupInterval::auto_family(&RollupInterval::family(&i.table))));
                }
                None if settings.auto => tracing::warn!(
                    "rtsd.rollups.auto needs aggregation IDs for sum, count, min and max in tsd.rollups.config; \
                     rollups of raw points are not computed"
                ),
                None => {}
            }
        }
        Rollups {
            settings: settings.clone(),
            families,
            auto,
            auto_ids,
            fold_lock: Mutex::new(()),
            generation: AtomicU64::new(1),
            gate: RwLock::new(()),
            pending: Mutex::new(Notes::default()),
            unnoted: std::sync::atomic::AtomicBool::new(false),
            refolded: Mutex::new(HashMap::new()),
            marks_flushed: Mutex::new(std::time::Instant::now()),
            folded_through: AtomicU64::new(0),
            complete_since: HashMap::new(),
            read_only: false,
        }
    }

    /// Continues after the newest generation a data directory holds marks of, and settles from when each
    /// automatic table is complete: from the start for a directory without raw data, else from the next hour
    /// (raw rows of earlier hours were written while the table was not maintained; a query reaching before
    /// that reads raw data). Turning automatic rollups off forgets these times, so turning them on again
    /// starts over.
    pub(super) fn resume(&mut self, db: &rocksdb::DB, read_only: bool) -> Result<(), StoreError> {
        self.read_only = read_only;
        let meta = db.cf_handle(super::CF_META).expect("column family created at open");
        let mut stored: HashMap<String, i64> = HashMap::new();
        let mut iter = db.raw_iterator_cf(meta);
        iter.seek(SINCE_KEY.as_bytes());
        while let (Some(k), Some(v)) = (iter.key(), iter.value()) {
            let Some(table) = k.strip_prefix(SINCE_KEY.as_bytes()) else { break };
            let since = v.try_into().map(i64::from_be_bytes).unwrap_or(i64::MAX);
            stored.insert(String::from_utf8_lossy(table).into_owned(), since);
            iter.next();
        }
        drop(iter);
        let tables: Vec<String> = self.auto.iter().map(|i| i.table.clone()).collect();
        if !read_only {
            for gone in stored.keys().filter(|t| !tables.contains(t)) {
                db.delete_cf(meta, format!("{SINCE_KEY}{gone}"))?;
            }
        }
        for table in tables {
            let since = match stored.get(&table) {
                Some(&since) => since,
                None if read_only => i64::MAX,
                None => {
                    let mut raw = db.raw_iterator_cf(db.cf_handle(CF_DATA).expect("column family created at open"));
                    raw.seek_to_first();
                    let since = if raw.valid() {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs() as i64);
                        (now - now.rem_euclid(3600) + 3600) * 1000
                    } else {
                        0
                    };
                    db.put_cf(meta, format!("{SINCE_KEY}{table}"), since.to_be_bytes())?;
                    since
                }
            };
            self.complete_since.insert(table, since);
        }
        self.resume_generation(db);
        Ok(())
    }

    fn resume_generation(&self, db: &rocksdb::DB) {
        if let Some(cf) = db.cf_handle(CF_ROLLUP_DIRTY) {
            let mut iter = db.raw_iterator_cf(cf);
            iter.seek_to_last();
            if let Some(key) = iter.key() {
                if let Some(g) = key.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes) {
                    self.generation.store(g + 1, Ordering::Release);
                    self.unnoted.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Whether raw writes must mark their rows for folding.
    pub(super) fn auto(&self) -> bool {
        !self.auto.is_empty()
    }

    /// Whether `table` is computed by rtsd, and if so from when (ms) its rollups are complete (`i64::MAX`: not
    /// usable from this process). `None` for tables only others write (OpenTSDB's rules apply).
    pub(super) fn auto_complete_since(&self, table: &str) -> Option<i64> {
        if !self.auto.iter().any(|i| i.table == table) {
            return None;
        }
        Some(if self.read_only { i64::MAX } else { self.complete_since.get(table).copied().unwrap_or(i64::MAX) })
    }
}

/// Options of a rollup table's column family: compressed as the data table is (rollup cells repeat their
/// qualifiers' patterns row after row, which LZ4 and zstd shrink well).
pub(super) fn table_options(block_cache: &rocksdb::Cache) -> Options {
    let mut opts = compressed_options(block_cache);
    opts.set_merge_operator("rollup-cells-v1", merge_full, merge_partial);
    opts
}

fn compressed_options(block_cache: &rocksdb::Cache) -> Options {
    use rocksdb::DBCompressionType::{Lz4, Zstd};
    let mut opts = Options::default();
    opts.set_block_based_table_factory(&super::table_options(block_cache, false));
    opts.set_compression_per_level(&[Lz4, Lz4, Lz4, Lz4, Zstd, Zstd, Zstd]);
    opts.set_bottommost_compression_type(Zstd);
    opts
}

/// Options of a family of rollups rtsd computes (`<table>:a`): rows of columns merged slot by slot (see
/// [`rollup_rows`]), compressed as the rollup tables are, in data blocks of 16 KB rather than 4: a one-minute row
/// is ~1 KB, so a wide query (every series' rows of a day) met a block, and its cache lookup, every ~4 rows
/// (q1 of data set B: 7 % fewer instructions with 16 KB), and larger blocks compress better (B: 3.46 -> 3.20-3.30
/// bytes per point on disk). Ingest CPU did not change measurably (bench/RESULTS.md, 2026-11-26 19:57).
pub(super) fn auto_table_options(block_cache: &rocksdb::Cache) -> Options {
    let mut opts = compressed_options(block_cache);
    let mut table = super::table_options(block_cache, false);
    table.set_block_size(16 * 1024);
    opts.set_block_based_table_factory(&table);
    opts.set_merge_operator_associative("rollup-columns-v1", |_key, existing, operands| {
        Some(rollup_rows::merge(existing, operands.iter()))
    });
    opts
}

/// Options of [`CF_ROLLUP_DIRTY`]: point counts summed.
pub(super) fn dirty_options(block_cache: &rocksdb::Cache) -> Options {
    let mut opts = Options::default();
    opts.set_block_based_table_factory(&super::table_options(block_cache, false));
    opts.set_merge_operator_associative("i64-sum-v1", sum_counters);
    opts
}

/// The key of a stored mark: `generation ‖ raw row key`, into `key`.
pub(super) fn mark_key(generation: u64, row: &[u8], key: &mut Vec<u8>) {
    key.clear();
    key.extend_from_slice(&generation.to_be_bytes());
    key.extend_from_slice(row);
}

/// Raw rows a batch changed, until [`Store::commit`] stamps them with a generation.
#[derive(Default)]
pub struct Marks {
    /// `u16 length ‖ row key ‖ i64 points ‖ i64 first ms ‖ i64 last ms`, flat so that marking costs no
    /// allocation per row.
    buf: Vec<u8>,
}

impl Marks {
    /// `points` points of one row whose timestamps span `[first_ms, last_ms]` (a series-table flush marks each row
    /// once, not per point).
    pub(super) fn add_span(&mut self, row: &[u8], points: i64, first_ms: i64, last_ms: i64) {
        self.buf.extend_from_slice(&(row.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(row);
        for v in [points, first_ms, last_ms] {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A row written without per-point detail: its whole hour is recomputed.
    pub(super) fn add_row(&mut self, row: &[u8], points: i64) {
        let whole = Change::whole_row(points);
        self.add_span(row, whole.points, whole.first_ms, whole.last_ms);
    }

    /// The entries: (row, change).
    fn drain(&mut self) -> Vec<(Vec<u8>, Change)> {
        let buf = std::mem::take(&mut self.buf);
        let mut out = Vec::new();
        let mut rest = buf.as_slice();
        while rest.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
            let (row, tail) = rest[2..].split_at(len);
            let num = |i: usize| i64::from_le_bytes(tail[i * 8..i * 8 + 8].try_into().unwrap_or_default());
            out.push((row.to_vec(), Change { points: num(0), first_ms: num(1), last_ms: num(2), generation: 0 }));
            rest = &tail[24..];
        }
        out
    }
}

fn counter(value: &[u8]) -> i64 {
    value.try_into().map(i64::from_le_bytes).unwrap_or(0)
}

fn sum_counters(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let total = operands.iter().fold(existing.map_or(0, counter), |acc, op| acc.wrapping_add(counter(op)));
    Some(total.to_le_bytes().to_vec())
}

/// Orders qualifiers as cells: by their bytes with the flag bits (the value's type and length) left out, so a
/// bucket whose minimum was a float and is now an integer has one minimum, not two.
fn cell_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let (Some((la, ha)), Some((lb, hb))) = (a.split_last(), b.split_last()) else { return a.cmp(b) };
    ha.cmp(hb).then((la & !codec::FLAGS_MASK).cmp(&(lb & !codec::FLAGS_MASK))).then(a.len().cmp(&b.len()))
}

/// The full merge of a rollup row: [`merge_latest`], then cells deleted by an empty value are dropped (nothing
/// older is left for them to hide).
fn merge_full(key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    merge_latest(key, existing, operands, true)
}

/// The partial merge of operands: deletions are kept, to hide older cells when the full merge comes.
fn merge_partial(key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    merge_latest(key, existing, operands, false)
}

/// The cells of a rollup row: the last value written per cell (see [`cell_order`]), sorted (HBase put
/// semantics; no compaction, unlike the data table, since rollup qualifiers are not data-point qualifiers).
/// Rows this writes are sorted, so the stored row is walked once beside the sorted new cells. An empty value
/// is a deleted cell; `drop_deleted` leaves them out.
fn merge_latest(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands, drop_deleted: bool) -> Option<Vec<u8>> {
    let keep_as_written = || {
        // A row that can't be framed is kept as written rather than lost.
        let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
        operands.iter().for_each(|op| out.extend_from_slice(op));
        Some(out)
    };
    type Cell<'a> = (&'a [u8], &'a [u8]);
    let mut newer: Vec<(&[u8], &[u8], usize)> = Vec::new();
    for op in operands.iter() {
        for column in codec::columns(op) {
            let Ok(c) = column else { return keep_as_written() };
            newer.push((c.qualifier, c.value, newer.len()));
        }
    }
    newer.sort_unstable_by(|a, b| cell_order(a.0, b.0).then(a.2.cmp(&b.2)));
    // The last write of each cell.
    let mut latest: Vec<Cell> = Vec::with_capacity(newer.len());
    for (q, v, _) in newer {
        match latest.last_mut() {
            Some(last) if cell_order(last.0, q).is_eq() => *last = (q, v),
            _ => latest.push((q, v)),
        }
    }
    let mut old: Vec<Cell> = Vec::new();
    for column in codec::columns(existing.unwrap_or_default()) {
        let Ok(c) = column else { return keep_as_written() };
        old.push((c.qualifier, c.value));
    }
    if old.windows(2).any(|w| !cell_order(w[0].0, w[1].0).is_lt()) {
        // Not written by this function (or by an older rtsd): order it first, the later duplicate winning.
        let mut seq: Vec<(usize, Cell)> = old.into_iter().enumerate().collect();
        seq.sort_by(|a, b| cell_order(a.1 .0, b.1 .0).then(a.0.cmp(&b.0)));
        old = Vec::with_capacity(seq.len());
        for (_, cell) in seq {
            match old.last_mut() {
                Some(last) if cell_order(last.0, cell.0).is_eq() => *last = cell,
                _ => old.push(cell),
            }
        }
    }
    let mut out = Vec::with_capacity(existing.map_or(0, <[u8]>::len) + operands.iter().map(<[u8]>::len).sum::<usize>());
    let (mut a, mut b) = (old.into_iter().peekable(), latest.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match cell_order(x.0, y.0) {
                std::cmp::Ordering::Less => a.next(),
                std::cmp::Ordering::Greater => b.next(),
                std::cmp::Ordering::Equal => {
                    a.next();
                    b.next()
                }
            },
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => break,
        };
        if let Some((q, v)) = next {
            if !(drop_deleted && v.is_empty()) {
                codec::push_column(&mut out, q, v);
            }
        }
    }
    Some(out)
}

/// count, sum, min and max of one bucket of raw points, computed as the query engine's downsampler sees them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub start: i64,
    pub count: i64,
    /// The sum: an integer when every value is one and the sequential double sum is exactly that integer (so
    /// reading it back as a double gives what summing the raw points as doubles gives), else that double sum.
    pub sum: Value,
    pub min: Value,
    pub max: Value,
}

/// Buckets of `interval_secs` over raw points in time order. Points at an instant already seen are skipped, as
/// the query engine skips them.
pub fn buckets(points: &[codec::RowPoint], interval_secs: u32) -> Vec<Bucket> {
    let width = i64::from(interval_secs) * 1000;
    let mut out: Vec<Bucket> = Vec::new();
    let mut last_ts = None;
    let (mut int_sum, mut ints, mut dsum) = (Some(0i64), true, 0f64);
    for p in points {
        if last_ts.is_some_and(|t| p.timestamp_ms <= t) {
            continue;
        }
        last_ts = Some(p.timestamp_ms);
        let start = p.timestamp_ms - p.timestamp_ms.rem_euclid(width);
        let d = as_f64(p.value);
        match out.last_mut() {
            Some(b) if b.start == start => {
                b.count += 1;
                if d < as_f64(b.min) {
                    b.min = p.value;
                }
                if d > as_f64(b.max) {
                    b.max = p.value;
                }
            }
            _ => {
                if let Some(b) = out.last_mut() {
                    b.sum = sum_value(int_sum, ints, dsum);
                }
                (int_sum, ints, dsum) = (Some(0), true, 0.0);
                out.push(Bucket { start, count: 1, sum: Value::Int(0), min: p.value, max: p.value });
            }
        }
        dsum += d;
        match p.value {
            Value::Int(v) => int_sum = int_sum.and_then(|s| s.checked_add(v)),
            _ => ints = false,
        }
    }
    if let Some(b) = out.last_mut() {
        b.sum = sum_value(int_sum, ints, dsum);
    }
    out
}

fn as_f64(v: Value) -> f64 {
    match v {
        Value::Int(i) => i as f64,
        Value::Float(f) => f64::from(f),
        Value::Double(d) => d,
    }
}

fn sum_value(int_sum: Option<i64>, ints: bool, dsum: f64) -> Value {
    match int_sum {
        Some(s) if ints && s as f64 == dsum => Value::Int(s),
        _ => Value::Double(dsum),
    }
}

/// The series of one rollup table read for a query: per series, (bucket start ms, value) per aggregator asked
/// for, in time order.
#[derive(Debug, Clone)]
pub struct RollupSeries {
    pub series: StoredSeries,
    /// One list per requested aggregator ID, in the order asked.
    pub values: Vec<Vec<(i64, Value)>>,
}

/// Rollups rtsd computed, read onto a grid of buckets ([`Store::read_rollup_grid`]).
#[derive(Debug, Clone)]
pub struct RollupGrid {
    /// Start (ms) of bucket 0, and the width of a bucket.
    pub first_ms: i64,
    pub step_ms: i64,
    /// The series with at least one bucket, in TSUID order.
    pub series: Vec<GridSeries>,
}

/// One series' buckets on a [`RollupGrid`].
#[derive(Debug, Clone)]
pub struct GridSeries {
    pub series: StoredSeries,
    /// Per bucket of the grid, its value (0 where the series has none).
    pub values: Vec<f64>,
    /// The buckets the series has: bucket `i` at bit `i % 64` of word `i / 64`.
    pub present: Vec<u64>,
    /// How many buckets it has.
    pub cells: usize,
}

/// Which series a grid read reads ([`Store::read_rollup_grid`]).
pub enum GridSelect<'k, 'a> {
    /// Every series of the metric.
    All,
    /// Those `keep` accepts (decided once per series, from its tags).
    Keep(&'k mut Keep<'a>),
    /// These TSUIDs (sorted), fetched by key.
    Series(&'k [Vec<u8>]),
}

/// A grid read's buffers for one row's columns, reused from row to row.
#[derive(Default)]
struct RowBuffers {
    decoded: [Vec<f64>; COLUMNS],
    staged: Vec<f64>,
}

/// What a grid read reads, and onto which grid.
struct GridRead<'a> {
    /// The `<table>:a` column family.
    family: &'a str,
    metric: &'a [u8],
    first_ms: i64,
    step_ms: i64,
    /// Buckets of the grid: those starting in the read's `[start_ms, end_ms)`.
    len: usize,
    /// The columns (sum, count, min, max) to decode.
    columns: [bool; COLUMNS],
    /// Values charged to the budget per bucket read (the cells the general read would decode).
    charged: usize,
}

impl Store {
    /// Stores a rollup or pre-aggregate point where [`crate::rollup::prepare`] said (UIDs resolved as for `put`).
    pub fn add_rollup_point(
        &self,
        batch: &mut PointBatch,
        point: &DataPoint<'_>,
        target: &RollupTarget,
    ) -> Result<(), AddError> {
        let Some(cf) = self.db.cf_handle(&target.family) else {
            return Err(AddError::Internal(format!("no column family {}", target.family)));
        };
        let series = self.series_key(point)?;
        let mut key = series.template.clone();
        let at = self.layout.salt.width + self.layout.uid_widths[0];
        key[at..at + 4].copy_from_slice(&target.base_time.to_be_bytes());
        let mut column = Vec::with_capacity(16);
        codec::push_column(&mut column, &target.qualifier, &point.value.encode());
        batch.batch.merge_cf(cf, &key, &column);
        let tsuid = codec::tsuid_from_row_key(&key, self.layout.salt.width, self.layout.uid_widths[0]);
        self.series.note_postings(&mut batch.batch, self.cf(super::CF_SERIES), &self.layout, &tsuid, &mut batch.noted);
        batch.rollup_points += 1;
        Ok(())
    }

    /// Writes `batch` with its marks stamped with the current generation, behind the gate (see the module
    /// comment). Every write of raw points goes through here.
    pub(super) fn write_marked(
        &self,
        mut batch: WriteBatch,
        marks: &mut Marks,
        opts: &rocksdb::WriteOptions,
    ) -> Result<(), rocksdb::Error> {
        if !self.rollups.auto() {
            return self.db.write_opt(batch, opts);
        }
        let entries = marks.drain();
        let _gate = self.rollups.gate.read().unwrap_or_else(|e| e.into_inner());
        // Rows already marked in this generation only need their note updated; the others get a stored mark,
        // noted once the write succeeded (a batch that skips its mark must come after a mark that is written).
        let mut fresh = Vec::new();
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        {
            let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
            for (row, change) in entries {
                match pending.get_mut(row.get(sw..sw + mw).unwrap_or_default(), &row) {
                    Some(c) => c.merge(change),
                    None => fresh.push((row, change)),
                }
            }
        }
        let generation = self.stamp_marks(&mut batch, &fresh);
        self.db.write_opt(batch, opts)?;
        let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
        for (row, change) in fresh {
            if pending.len >= PENDING_CAPACITY {
                self.rollups.unnoted.store(true, Ordering::Release);
                break;
            }
            pending.note(sw..sw + mw, row, Change { generation, ..change });
        }
        Ok(())
    }

    /// Adds stored marks of the current generation for `rows` to `batch`; returns the generation.
    fn stamp_marks(&self, batch: &mut WriteBatch, rows: &[(Vec<u8>, Change)]) -> u64 {
        let current = self.rollups.generation.load(Ordering::Acquire);
        let cf = self.cf(CF_ROLLUP_DIRTY);
        let mut key = Vec::with_capacity(64);
        for (row, change) in rows {
            mark_key(current, row, &mut key);
            batch.merge_cf(cf, &key, change.points.to_le_bytes());
        }
        current
    }

    /// The generation a bulk load's marks get, `None` without automatic rollups. A bulk load runs without a
    /// daemon on the directory, so no fold runs meanwhile and no gate is needed; a stored mark without a note
    /// has its whole row recomputed, which is what a bulk load's rows need.
    pub(super) fn bulk_mark_generation(&self) -> Option<u64> {
        self.rollups.auto().then(|| self.rollups.generation.load(Ordering::Acquire))
    }

    /// The rollup settings this store was opened with.
    pub fn rollup_settings(&self) -> &RollupSettings {
        &self.rollups.settings
    }

    /// For a table rtsd computes itself, from when (ms) its rollups hold everything raw data holds; `None` for
    /// other tables. That is from when rtsd started computing it, and, when raw data is kept longer than the
    /// table, from the table's retention cut (before it, raw data knows more).
    pub fn auto_rollups_complete_since(&self, table: &str) -> Option<i64> {
        let since = self.rollups.auto_complete_since(table)?;
        let family = RollupInterval::family(table);
        let (cut, raw_cut) = (self.retention.cut_ms(&family), self.retention.cut_ms(CF_DATA));
        Some(if raw_cut < cut { since.max(cut) } else { since })
    }

    /// Folds every raw row with pending changes (of `metric` only, when given) into the automatic rollup tables.
    /// Returns the rows folded. Queries call it for their metric before reading a rollup table, so rollups never
    /// lag what raw data a query would see; the background task calls it for everything.
    ///
    /// A full fold reads the stored marks of the generations since the last full fold, folds their rows and
    /// deletes them with one range tombstone. A fold of one metric takes its rows from the in-memory notes (and
    /// reads stored marks only when some may lack a note) and leaves the stored marks to the next full fold,
    /// which skips the rows it already did; its cost is the metric's changes, not everyone's.
    pub fn fold_rollups(&self, metric: Option<&[u8]>) -> Result<u64, StoreError> {
        if !self.rollups.auto() || self.rollups.read_only {
            return Ok(0);
        }
        // Raw points still in the series table have no marks yet: write them (with their marks) first.
        self.settle()?;
        self.fold_flushed(metric)
    }

    /// [`Store::fold_rollups`] of the rows written so far, leaving the points still in the series table to the
    /// fold after their flush: what the daemon's periodic fold does, so that it never forces a flush (each flush
    /// costs a merge per row, so fewer and larger flushes make ingest cheaper); a query's fold settles first.
    pub fn fold_flushed(&self, metric: Option<&[u8]>) -> Result<u64, StoreError> {
        if !self.rollups.auto() || self.rollups.read_only {
            return Ok(0);
        }
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let of_metric = |row: &[u8]| metric.is_none_or(|m| row.get(sw..sw + mw) == Some(m));
        let _one_at_a_time = self.rollups.fold_lock.lock().unwrap_or_else(|e| e.into_inner());
        // Through the gate, every mark of generation <= `last` has been written with its points.
        let (last, mut notes, read_marks) = {
            let _gate = self.rollups.gate.write().unwrap_or_else(|e| e.into_inner());
            let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
            let notes = pending.take(metric);
            let read_marks = match metric {
                None => {
                    self.rollups.unnoted.store(false, Ordering::Release);
                    true
                }
                Some(_) => self.rollups.unnoted.load(Ordering::Acquire),
            };
            (self.rollups.generation.fetch_add(1, Ordering::AcqRel), notes, read_marks)
        };
        let dirty_cf = self.cf(CF_ROLLUP_DIRTY);
        let data_cf = self.cf(CF_DATA);
        // Per raw row, what changed: the note, or for a stored mark without one the whole row.
        let mut rows: std::collections::BTreeMap<Vec<u8>, Change> = notes.drain().collect();
        if read_marks {
            let refolded = self.rollups.refolded.lock().unwrap_or_else(|e| e.into_inner());
            let mut iter = self.db.raw_iterator_cf(dirty_cf);
            iter.seek((self.rollups.folded_through.load(Ordering::Acquire) + 1).to_be_bytes());
            while iter.valid() {
                let (Some(key), Some(value)) = (iter.key(), iter.value()) else { break };
                let Some(generation) = key.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes) else {
                    iter.next();
                    continue;
                };
                if generation > last {
                    break;
                }
                let row = &key[8..];
                let done = refolded.get(row).is_some_and(|&g| g >= generation);
                if of_metric(row) && !done {
                    // A mark that is not the one the row's note belongs to (stored before a restart, or past
                    // the notes' capacity) says nothing of what changed: the whole row.
                    match rows.get_mut(row) {
                        Some(note) if note.generation == generation => {}
                        Some(note) => note.merge(Change::whole_row(0)),
                        None => {
                            rows.insert(row.to_vec(), Change::whole_row(counter(value)));
                        }
                    }
                }
                iter.next();
            }
            iter.status()?;
        }
        let rows: Vec<(Vec<u8>, Change)> = rows.into_iter().collect();
        // The fold reads each changed row once: keeping those blocks would fill the block cache with what ingest
        // wrote (RSS) and push out what queries read.
        let mut no_fill = rocksdb::ReadOptions::default();
        no_fill.fill_cache(false);
        for chunk in rows.chunks(256) {
            let mut batch = WriteBatch::default();
            let mut buckets_written = 0u64;
            let mut late = 0u64;
            let raws = self.db.multi_get_cf_opt(chunk.iter().map(|(k, _)| (data_cf, k)), &no_fill);
            for ((key, change), raw) in chunk.iter().zip(raws) {
                let raw = raw?.unwrap_or_default();
                let hour = codec::row_base_time(key, sw, mw);
                let points = match codec::row_points(hour, &raw) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(row = %codec::uid_to_string(key), error = %e, "raw row not rolled up");
                        continue;
                    }
                };
                let (written, was_rolled) = self.fold_row(&mut batch, key, hour, &points, change, &no_fill)?;
                buckets_written += written;
                if was_rolled {
                    late += change.points.max(0) as u64;
                }
            }
            self.db.write(batch)?;
            self.metrics.rollups(buckets_written, late);
        }
        let mut refolded = self.rollups.refolded.lock().unwrap_or_else(|e| e.into_inner());
        match metric {
            Some(_) => {
                for (row, _) in &rows {
                    refolded.insert(row.clone(), last);
                }
            }
            None => {
                // Every mark up to `last` is handled: one range tombstone.
                let mut batch = WriteBatch::default();
                batch.delete_range_cf(dirty_cf, [0u8; 8], (last + 1).to_be_bytes());
                self.db.write(batch)?;
                refolded.retain(|_, g| *g > last);
                self.rollups.folded_through.store(last, Ordering::Release);
                let mut flushed = self.rollups.marks_flushed.lock().unwrap_or_else(|e| e.into_inner());
                if flushed.elapsed() >= MARKS_FLUSH_EVERY {
                    self.db.flush_cf(dirty_cf)?;
                    *flushed = std::time::Instant::now();
                }
            }
        }
        Ok(rows.len() as u64)
    }

    /// Writes the buckets of one raw hour row into every automatic interval (their `<table>:a` rows, see
    /// [`rollup_rows`]). Returns the buckets written and whether rollups of this hour existed before (so the
    /// points now folded arrived late).
    fn fold_row(
        &self,
        batch: &mut WriteBatch,
        raw_key: &[u8],
        hour: u32,
        points: &[codec::RowPoint],
        change: &Change,
        read: &rocksdb::ReadOptions,
    ) -> Result<(u64, bool), StoreError> {
        let at = self.layout.salt.width + self.layout.uid_widths[0];
        let mut written = 0u64;
        let mut was_rolled = false;
        // A raw hour wholly past the raw retention may already have lost its older points to compaction (late
        // points re-create the row): there the rollups are the record, and a bucket is recomputed only from a
        // row that holds at least as many points as the bucket counted, and never deleted.
        let expired = (i64::from(hour) + 3600) * 1000 <= self.retention.cut_ms(CF_DATA);
        for (n, interval) in self.rollups.auto.iter().enumerate() {
            let family = RollupInterval::family(&interval.table);
            let mut key = raw_key.to_vec();
            let base = interval.base_time(i64::from(hour));
            key[at..at + 4].copy_from_slice(&base.to_be_bytes());
            // A row of this one raw hour (a row span of an hour) that `:a` does not hold yet is written whole:
            // reads then have nothing to merge (they merge a row's operands on every read until a compaction
            // does). The fold is the only writer of `:a`, one at a time, and a chunk's raw rows are distinct
            // hours, so nothing written meanwhile is lost. Rows of longer spans get operands (several raw hours
            // of one chunk go to the same row).
            let hourly = interval.row_span == RowSpan::Hours(1);
            let auto_cf = self.cf(&RollupInterval::auto_family(&family));
            let auto = if n == 0 || expired || hourly { self.db.get_pinned_cf_opt(auto_cf, &key, read)? } else { None };
            let fresh = hourly && auto.is_none();
            // The counts the interval's buckets of this hour hold now (bucket start ms -> count).
            let mut counted: HashMap<i64, i64> = HashMap::new();
            if n == 0 || expired {
                let (lo, hi) = (i64::from(hour) * 1000, (i64::from(hour) + 3600) * 1000);
                let count_id = self.rollups.auto_ids[1];
                let table = match self.db.cf_handle(&family) {
                    Some(cf) => self.db.get_pinned_cf_opt(cf, &key, read)?,
                    None => None,
                };
                let mut values = vec![Vec::new()];
                let (auto, table) = (auto.as_deref(), table.as_deref());
                self.rollup_values(&key, auto, table, base, interval, &[count_id], lo, hi, &mut values)?;
                counted = values[0].iter().map(|&(start, count)| (start, as_f64(count) as i64)).collect();
                if n == 0 {
                    // The first interval's counts of this hour tell whether it was folded before.
                    was_rolled = !counted.is_empty();
                }
            }
            let width = i64::from(interval.interval_secs) * 1000;
            let slot =
                |start_ms: i64| ((start_ms / 1000 - i64::from(base)) / i64::from(interval.interval_secs)) as usize;
            let mut row = Slots::new(interval.intervals as usize);
            let mut any = false;
            for b in buckets(points, interval.interval_secs) {
                // Only the buckets the new points fell into changed.
                if b.start > change.last_ms || b.start.saturating_add(width) <= change.first_ms {
                    continue;
                }
                if expired && counted.get(&b.start).is_some_and(|&c| b.count < c) {
                    continue;
                }
                row.set(slot(b.start), Some([b.sum, Value::Int(b.count), b.min, b.max]));
                any = true;
                written += 1;
            }
            if change.first_ms == i64::MIN && !expired {
                // A whole row recomputed (its points may have been removed, e.g. by `fsck --fix`): buckets of the
                // hour without points are deleted (known, no value).
                let hour_ms = i64::from(hour) * 1000;
                for start in (hour_ms..hour_ms + 3_600_000).step_by(width.max(1) as usize) {
                    let i = slot(start);
                    if row.slots.get(i).is_none_or(Option::is_none) {
                        row.set(i, None);
                        any = true;
                    }
                }
            }
            match (any, fresh) {
                (true, true) => batch.put_cf(auto_cf, &key, row.encode()),
                (true, false) => batch.merge_cf(auto_cf, &key, row.encode()),
                _ => {}
            }
        }
        Ok((written, was_rolled))
    }

    /// The values of aggregators `ids` in one row of a rollup table (buckets in `[start_ms, end_ms)`): those rtsd
    /// computed (`auto`, the `<table>:a` row) and, for buckets it did not, the table's cells (`table`). Returns
    /// the values read and the bytes of the rows; `None` when neither row exists.
    #[allow(clippy::too_many_arguments)]
    fn rollup_values(
        &self,
        key: &[u8],
        auto: Option<&[u8]>,
        table: Option<&[u8]>,
        base: u32,
        interval: &RollupInterval,
        ids: &[u8],
        start_ms: i64,
        end_ms: i64,
        values: &mut [Vec<(i64, Value)>],
    ) -> Result<Option<(usize, usize)>, StoreError> {
        if auto.is_none() && table.is_none() {
            return Ok(None);
        }
        let (mut cells, mut bytes, mut shadow) = (0, 0, &[][..]);
        if let Some(row) = auto {
            let view = self.auto_row(key, row)?;
            cells += self.auto_cells(key, &view, base, interval, ids, start_ms, end_ms, values)?;
            bytes += row.len();
            shadow = view.known_bitmap();
        }
        if let Some(row) = table {
            cells += rollup_cells(key, row, base, interval, ids, start_ms, end_ms, shadow, values)?;
            bytes += row.len();
        }
        Ok(Some((cells, bytes)))
    }

    fn auto_row<'a>(&self, key: &[u8], row: &'a [u8]) -> Result<RowView<'a>, StoreError> {
        RowView::new(row).map_err(|e| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key))))
    }

    /// Appends the values of aggregators `ids` in an `<table>:a` row (buckets in `[start_ms, end_ms)`) to
    /// `values` (one list per ID); returns how many.
    #[allow(clippy::too_many_arguments)]
    fn auto_cells(
        &self,
        key: &[u8],
        view: &RowView<'_>,
        base: u32,
        interval: &RollupInterval,
        ids: &[u8],
        start_ms: i64,
        end_ms: i64,
        values: &mut [Vec<(i64, Value)>],
    ) -> Result<usize, StoreError> {
        let mut cells = 0;
        // The bucket start of each value (the present slots), once for every column.
        let (base_ms, width) = (i64::from(base) * 1000, i64::from(interval.interval_secs) * 1000);
        let mut starts: smallvec::SmallVec<[i64; 64]> = smallvec::SmallVec::with_capacity(view.k);
        view.for_each_present(|slot, _| starts.push(base_ms + slot as i64 * width));
        for (which, id) in ids.iter().enumerate() {
            let Some(c) = self.rollups.auto_ids.iter().position(|a| a == id) else { continue };
            let column = view
                .column(c)
                .map_err(|e| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key))))?;
            let out = &mut values[which];
            if starts.first().is_some_and(|&t| t >= start_ms) && starts.last().is_some_and(|&t| t < end_ms) {
                // The whole row is in range (all but a read's first and last rows).
                column.extend_timed(&starts, out);
                cells += starts.len();
                continue;
            }
            column.for_each(|j, v| {
                let ts = starts[j];
                if ts >= start_ms && ts < end_ms {
                    out.push((ts, v));
                    cells += 1;
                }
            });
        }
        Ok(cells)
    }

    /// Reads the cells of aggregators `ids` from rollup table `family` for the given series (TSUIDs of one
    /// metric) or, with `None`, every series of `metric` that `keep` accepts; buckets with `start_ms <= t <
    /// end_ms`. A series without any cell in the range is left out.
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut super::ReadBudget,
        mut keep: impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let Some((start_ms, bases)) = self.rollup_range(family, interval, start_ms, end_ms) else {
            return Ok(Vec::new());
        };
        let out = self.rollup_rows(family, interval, ids, metric, bases, (start_ms, end_ms), budget, &mut keep)?;
        Ok(finish_rollup_series(out))
    }

    /// [`Store::read_rollup`] of every series of the metric, with the rows read in two halves side by side
    /// (decoding cells is most of a wide query's time; with every series kept, the halves need no shared
    /// selection).
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup_all(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut super::ReadBudget,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let Some((start_ms, (first_base, last_base))) = self.rollup_range(family, interval, start_ms, end_ms) else {
            return Ok(Vec::new());
        };
        let middle = interval.base_time((i64::from(first_base) + i64::from(last_base)) / 2 + 1);
        if middle <= first_base || middle > last_base {
            let out = self.rollup_rows(
                family,
                interval,
                ids,
                metric,
                (first_base, last_base),
                (start_ms, end_ms),
                budget,
                &mut |_| Ok(true),
            )?;
            return Ok(finish_rollup_series(out));
        }
        let range = (start_ms, end_ms);
        let (earlier, later) = std::thread::scope(|scope| {
            let mut forked = budget.fork();
            let later = scope.spawn(move || {
                self.rollup_rows(family, interval, ids, metric, (middle, last_base), range, &mut forked, &mut |_| {
                    Ok(true)
                })
                .map(|r| (r, forked))
            });
            let earlier =
                self.rollup_rows(family, interval, ids, metric, (first_base, middle - 1), range, budget, &mut |_| {
                    Ok(true)
                });
            (earlier, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        let mut out = earlier?;
        let (later, forked) = later?;
        budget.join(forked)?;
        let mut at: HashMap<Vec<u8>, usize> =
            out.iter().enumerate().map(|(i, s)| (s.series.tsuid.clone(), i)).collect();
        for s in later {
            match at.get(&s.series.tsuid) {
                Some(&i) => {
                    for (into, more) in out[i].values.iter_mut().zip(s.values) {
                        into.extend(more);
                    }
                }
                None => {
                    at.insert(s.series.tsuid.clone(), out.len());
                    out.push(s);
                }
            }
        }
        Ok(finish_rollup_series(out))
    }

    /// [`Store::read_rollup`] (with `keep` `None`: of every series, in two halves side by side as
    /// [`Store::read_rollup_all`]) onto a grid of the table's buckets, for a downsample of the table's own
    /// interval: each series' bucket `i` (starting `first_ms + i * step_ms`) holds the value `stage_row` computes for
    /// it from the bucket's (sum, count, min, max) as doubles: given a row's columns (only those of `ids` decoded,
    /// the others empty) and which of them hold integers, it replaces its last argument by one value per present
    /// slot. One array per
    /// series instead of a list of timed values per aggregator: a day of 1000 series' one-minute buckets is
    /// 11 MB of doubles rather than 70 MB of cells. Budget and statistics are charged as the cell read charges
    /// them.
    ///
    /// `None` when only the general read can answer: the table is not one rtsd computes, its rows do not start
    /// on bucket boundaries, or it holds cells of its own in the range (rollups written by clients, or by an
    /// rtsd from before `:a` rows), which that read merges.
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup_grid<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>) + Sync>(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut super::ReadBudget,
        select: GridSelect<'_, '_>,
        stage_row: &F,
    ) -> Result<Option<RollupGrid>, StoreError> {
        let auto_family = RollupInterval::auto_family(family);
        let span_unit: u32 = if matches!(interval.row_span, RowSpan::Hours(_)) { 3600 } else { 86_400 };
        let step_ms = i64::from(interval.interval_secs) * 1000;
        if self.db.cf_handle(&auto_family).is_none()
            || step_ms <= 0
            || !span_unit.is_multiple_of(interval.interval_secs)
        {
            return Ok(None);
        }
        let Some((start_ms, (first_base, last_base))) = self.rollup_range(family, interval, start_ms, end_ms) else {
            return Ok(Some(RollupGrid { first_ms: start_ms, step_ms, series: Vec::new() }));
        };
        if self.any_row_in(family, metric, first_base, last_base)? {
            return Ok(None);
        }
        let first_ms =
            start_ms.div_euclid(step_ms) * step_ms + if start_ms.rem_euclid(step_ms) == 0 { 0 } else { step_ms };
        let len = usize::try_from((end_ms - first_ms + step_ms - 1).div_euclid(step_ms)).unwrap_or(0);
        let read = GridRead {
            family: &auto_family,
            metric,
            first_ms,
            step_ms,
            len,
            columns: self.rollups.auto_ids.map(|a| ids.contains(&a)),
            charged: ids.iter().filter(|id| self.rollups.auto_ids.contains(id)).count(),
        };
        let middle = interval.base_time((i64::from(first_base) + i64::from(last_base)) / 2 + 1);
        let mut series = match select {
            GridSelect::Series(tsuids) => {
                // Fetched by key, as `read_rollup_series` does, several series in two halves side by side.
                let bases = bases_from(interval, first_base, last_base);
                let read = &read;
                if tsuids.len() >= SPLIT_SERIES {
                    let (earlier, later) = tsuids.split_at(tsuids.len() / 2);
                    let (out, later) = std::thread::scope(|scope| {
                        let mut forked = budget.fork();
                        let bases = &bases;
                        let later = scope.spawn(move || {
                            self.grid_series(read, bases, later, &mut forked, stage_row).map(|r| (r, forked))
                        });
                        let out = self.grid_series(read, bases, earlier, budget, stage_row);
                        (out, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                    });
                    let (later, forked) = later?;
                    budget.join(forked)?;
                    let mut out = out?;
                    out.extend(later);
                    out
                } else {
                    self.grid_series(read, &bases, tsuids, budget, stage_row)?
                }
            }
            GridSelect::Keep(keep) => {
                self.grid_rows(&read, (first_base, last_base), (0, len), budget, keep, stage_row)?
            }
            GridSelect::All if middle <= first_base || middle > last_base => {
                self.grid_rows(&read, (first_base, last_base), (0, len), budget, &mut |_| Ok(true), stage_row)?
            }
            GridSelect::All => {
                // Buckets from `split` on come from the later half's rows.
                let split =
                    usize::try_from((i64::from(middle) * 1000 - first_ms).div_euclid(step_ms)).unwrap_or(0).min(len);
                let (earlier, later) = std::thread::scope(|scope| {
                    let mut forked = budget.fork();
                    let read = &read;
                    let later = scope.spawn(move || {
                        self.grid_rows(
                            read,
                            (middle, last_base),
                            (split, len),
                            &mut forked,
                            &mut |_| Ok(true),
                            stage_row,
                        )
                        .map(|r| (r, forked))
                    });
                    let earlier = self.grid_rows(
                        read,
                        (first_base, middle - 1),
                        (0, split),
                        budget,
                        &mut |_| Ok(true),
                        stage_row,
                    );
                    (earlier, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                });
                let mut out = earlier?;
                let (later, forked) = later?;
                budget.join(forked)?;
                let at: HashMap<Vec<u8>, usize> =
                    out.iter().enumerate().map(|(i, s)| (s.series.tsuid.clone(), i)).collect();
                let mut added = Vec::new();
                for s in later {
                    match at.get(&s.series.tsuid) {
                        Some(&i) => {
                            let into = &mut out[i];
                            into.values.extend_from_slice(&s.values);
                            into.present.iter_mut().zip(&s.present).for_each(|(a, b)| *a |= b);
                            into.cells += s.cells;
                        }
                        None => {
                            let mut values = vec![0.0; split];
                            values.extend_from_slice(&s.values);
                            added.push(GridSeries { values, ..s });
                        }
                    }
                }
                for s in &mut out {
                    s.values.resize(len, 0.0);
                }
                out.extend(added);
                out
            }
        };
        series.retain(|s| s.cells > 0);
        series.sort_by(|a, b| a.series.tsuid.cmp(&b.series.tsuid));
        Ok(Some(RollupGrid { first_ms, step_ms, series }))
    }

    /// The series of `read.family`'s rows with base times in `bases` (inclusive), their buckets `[lo, hi)` of the
    /// grid filled (`values` holds those buckets only, from `lo`; `present` is the whole grid's); `keep` decides
    /// on each series once.
    fn grid_rows<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        (first_base, last_base): (u32, u32),
        (lo, hi): (usize, usize),
        budget: &mut super::ReadBudget,
        keep: &mut Keep<'_>,
        stage_row: &F,
    ) -> Result<Vec<GridSeries>, StoreError> {
        let tags_offset = self.layout.tags_offset();
        // The series met, in the order met (tags, index in `out` if kept), and where each is in that order. The
        // rows of each base time come in TSUID order, the same series as the previous base time's: the series
        // after the previous row's is nearly always this row's, found without hashing.
        let mut met: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut cursor = 0;
        let mut out: Vec<GridSeries> = Vec::new();
        let mut buffers = RowBuffers::default();
        self.for_each_row_in(read.family, read.metric, first_base, last_base, |row| {
            let tags_bytes = &row.key[tags_offset..];
            let at = match met.get(cursor) {
                Some((tags, _)) if tags.as_slice() == tags_bytes => Some(cursor),
                _ => index.get(tags_bytes).copied(),
            };
            let slot = match at {
                Some(at) => {
                    cursor = at + 1;
                    met[at].1
                }
                None => {
                    let slot = if keep(&row.tags)? {
                        let mut tsuid = read.metric.to_vec();
                        tsuid.extend_from_slice(tags_bytes);
                        out.push(GridSeries {
                            series: StoredSeries {
                                tsuid,
                                tags: row.tags.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                                points: Vec::new(),
                                annotations: Vec::new(),
                            },
                            // Room for the later half's buckets too, appended when the halves are joined.
                            values: Vec::with_capacity(read.len - lo),
                            present: vec![0; read.len.div_ceil(64)],
                            cells: 0,
                        });
                        Some(out.len() - 1)
                    } else {
                        None
                    };
                    index.insert(tags_bytes.to_vec(), met.len());
                    met.push((tags_bytes.to_vec(), slot));
                    cursor = met.len();
                    slot
                }
            };
            let Some(i) = slot else {
                budget.rows_skipped += 1;
                return Ok(true);
            };
            self.grid_row(
                read,
                row.key,
                row.base_time,
                row.value,
                &mut out[i],
                (lo, hi),
                &mut buffers,
                stage_row,
                budget,
            )?;
            Ok(true)
        })?;
        for s in &mut out {
            s.values.resize(hi - lo, 0.0);
        }
        Ok(out)
    }

    /// The given series (TSUIDs of the read's metric), their rows fetched by key (`bases`: the row base times).
    fn grid_series<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        bases: &[u32],
        tsuids: &[Vec<u8>],
        budget: &mut super::ReadBudget,
        stage_row: &F,
    ) -> Result<Vec<GridSeries>, StoreError> {
        let cf = self.cf(read.family);
        let mw = self.layout.uid_widths[0];
        let mut buffers = RowBuffers::default();
        let mut out = Vec::with_capacity(tsuids.len());
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> =
                bases.iter().map(|&b| codec::row_key_from_tsuid(tsuid, i64::from(b), &self.layout.salt, mw)).collect();
            let mut s = GridSeries {
                series: StoredSeries::of_tsuid(tsuid, &self.layout),
                values: Vec::with_capacity(read.len),
                present: vec![0; read.len.div_ceil(64)],
                cells: 0,
            };
            // Keys ascend by base time; pinned rows are read in place, not copied out.
            for ((key, &base), row) in keys.iter().zip(bases).zip(self.db.batched_multi_get_cf(cf, &keys, true)) {
                if let Some(row) = row? {
                    self.grid_row(read, key, base, &row, &mut s, (0, read.len), &mut buffers, stage_row, budget)?;
                }
            }
            s.values.resize(read.len, 0.0);
            out.push(s);
        }
        Ok(out)
    }

    /// Reads one `:a` row of a series onto its grid buckets `[lo, hi)` (see [`Store::read_rollup_grid`]) and
    /// charges it to the budget.
    #[allow(clippy::too_many_arguments)]
    fn grid_row<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        key: &[u8],
        base_time: u32,
        value: &[u8],
        s: &mut GridSeries,
        (lo, hi): (usize, usize),
        buffers: &mut RowBuffers,
        stage_row: &F,
        budget: &mut super::ReadBudget,
    ) -> Result<(), StoreError> {
        let view = self.auto_row(key, value)?;
        let mut integral = [false; COLUMNS];
        for (c, column) in buffers.decoded.iter_mut().enumerate() {
            if read.columns[c] {
                let corrupt = |e| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key)));
                let view = view.column(c).map_err(corrupt)?;
                view.decode_f64(column);
                integral[c] = view.is_integral();
            }
        }
        stage_row(&buffers.decoded, integral, &mut buffers.staged);
        if buffers.staged.len() != view.k {
            return Err(StoreError::Corrupt(format!("rollup row {}: columns missing", codec::uid_to_string(key))));
        }
        // Rows start on bucket boundaries (checked by the caller): slot `i` is bucket `row_first + i`, and the
        // grid's buckets are those in `[start_ms, end_ms)`.
        let row_first = (i64::from(base_time) * 1000 - read.first_ms).div_euclid(read.step_ms);
        let (lo, hi) = (lo as i64, hi as i64);
        let mut cells = 0;
        if view.k == view.n && row_first >= lo && row_first + view.n as i64 <= hi {
            // Every slot present and read (a row of a series that reported all along): one copy.
            let (from, to) = ((row_first - lo) as usize, row_first as usize);
            put_values(&mut s.values, from, &buffers.staged[..view.k]);
            set_bits(&mut s.present, to..to + view.k);
            cells = view.k;
        } else {
            view.for_each_present(|slot, j| {
                let b = row_first + slot as i64;
                if b < lo || b >= hi {
                    // Outside the read (or, not reached, outside this half: the halves split on a row boundary).
                    return;
                }
                let b = b as usize;
                put_values(&mut s.values, b - lo as usize, &buffers.staged[j..j + 1]);
                s.present[b / 64] |= 1 << (b % 64);
                cells += 1;
            });
        }
        s.cells += cells;
        budget.charge(cells * read.charged, value.len())
    }

    /// Whether rollup table `family` has any row of `metric` with a base time in `[first_base, last_base]`.
    fn any_row_in(&self, family: &str, metric: &[u8], first_base: u32, last_base: u32) -> Result<bool, StoreError> {
        let mut any = false;
        self.for_each_row_in(family, metric, first_base, last_base, |_| {
            any = true;
            Ok(false)
        })?;
        Ok(any)
    }

    /// The start (ms, moved up to the table's retention) and the first and last row base times of a rollup
    /// read; `None` when nothing can be read.
    fn rollup_range(
        &self,
        family: &str,
        interval: &RollupInterval,
        start_ms: i64,
        end_ms: i64,
    ) -> Option<(i64, (u32, u32))> {
        let start_ms = start_ms.max(self.retention.cut_ms(family));
        if end_ms <= start_ms {
            return None;
        }
        let start_s = start_ms.div_euclid(1000).max(0);
        let end_s = (end_ms - 1).div_euclid(1000).clamp(0, codec::MAX_SECONDS);
        Some((start_ms, (interval.base_time(start_s), interval.base_time(end_s))))
    }

    /// The rollup series of the rows with base times in `bases` (inclusive), in the order first met, their cells
    /// in `[start_ms, end_ms)`; `keep` decides on each series once.
    #[allow(clippy::too_many_arguments)]
    fn rollup_rows(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        (first_base, last_base): (u32, u32),
        (start_ms, end_ms): (i64, i64),
        budget: &mut super::ReadBudget,
        keep: &mut Keep<'_>,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let tags_offset = self.layout.tags_offset();
        let mut index: HashMap<Vec<u8>, Option<usize>> = HashMap::new();
        let mut out: Vec<RollupSeries> = Vec::new();
        let expected = expected_buckets(interval, start_ms, end_ms);
        let auto_family = RollupInterval::auto_family(family);
        // The buckets of `<table>:a` rows, by key, hide the table's cells for them: kept only when the table has
        // rows here (a directory written before `:a` existed, or rollup points written by clients).
        let table_rows = self.any_row_in(family, metric, first_base, last_base)?;
        let mut shadows: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for auto in [true, false] {
            if !auto && !table_rows {
                break;
            }
            self.for_each_row_in(if auto { &auto_family } else { family }, metric, first_base, last_base, |row| {
                let tags_bytes = &row.key[tags_offset..];
                let slot = match index.get(tags_bytes) {
                    Some(slot) => *slot,
                    None => {
                        let slot = if keep(&row.tags)? {
                            let mut tsuid = metric.to_vec();
                            tsuid.extend_from_slice(tags_bytes);
                            out.push(RollupSeries {
                                series: StoredSeries {
                                    tsuid,
                                    tags: row.tags.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                                    points: Vec::new(),
                                    annotations: Vec::new(),
                                },
                                values: (0..ids.len()).map(|_| Vec::with_capacity(expected)).collect(),
                            });
                            Some(out.len() - 1)
                        } else {
                            None
                        };
                        index.insert(tags_bytes.to_vec(), slot);
                        slot
                    }
                };
                let Some(i) = slot else {
                    budget.rows_skipped += 1;
                    return Ok(true);
                };
                let values = &mut out[i].values;
                let cells = if auto {
                    let view = self.auto_row(row.key, row.value)?;
                    if table_rows {
                        shadows.insert(row.key.to_vec(), view.known_bitmap().to_vec());
                    }
                    self.auto_cells(row.key, &view, row.base_time, interval, ids, start_ms, end_ms, values)?
                } else {
                    let shadow = shadows.get(row.key).map_or(&[][..], Vec::as_slice);
                    rollup_cells(row.key, row.value, row.base_time, interval, ids, start_ms, end_ms, shadow, values)?
                };
                budget.charge(cells, row.value.len())?;
                Ok(true)
            })?;
        }
        Ok(out)
    }
}

impl Store {
    /// [`Store::read_rollup`] for the given series only (TSUIDs of one metric, sorted): fetches exactly their
    /// rows, as a query with literal tag filters does on raw data.
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup_series(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        tsuids: &[Vec<u8>],
        start_ms: i64,
        end_ms: i64,
        budget: &mut super::ReadBudget,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        // Several series: read in two halves side by side, as an unfiltered read is (the halves keep TSUID order).
        if tsuids.len() >= SPLIT_SERIES {
            let (earlier, later) = tsuids.split_at(tsuids.len() / 2);
            let (mut out, later) = std::thread::scope(|scope| {
                let mut forked = budget.fork();
                let later = scope.spawn(move || {
                    self.read_rollup_series_in(family, interval, ids, later, start_ms, end_ms, &mut forked)
                        .map(|r| (r, forked))
                });
                let out = self.read_rollup_series_in(family, interval, ids, earlier, start_ms, end_ms, budget);
                (out, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            });
            let (later, forked) = later?;
            budget.join(forked)?;
            if let Ok(out) = &mut out {
                out.extend(later);
            }
            return out;
        }
        self.read_rollup_series_in(family, interval, ids, tsuids, start_ms, end_ms, budget)
    }

    #[allow(clippy::too_many_arguments)]
    fn read_rollup_series_in(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        tsuids: &[Vec<u8>],
        start_ms: i64,
        end_ms: i64,
        budget: &mut super::ReadBudget,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let (table_cf, auto_cf) = (self.db.cf_handle(family), self.db.cf_handle(&RollupInterval::auto_family(family)));
        if table_cf.is_none() && auto_cf.is_none() {
            return Ok(Vec::new());
        }
        let start_ms = start_ms.max(self.retention.cut_ms(family));
        if end_ms <= start_ms || tsuids.is_empty() {
            return Ok(Vec::new());
        }
        let start_s = start_ms.div_euclid(1000).max(0);
        let end_s = (end_ms - 1).div_euclid(1000).clamp(0, codec::MAX_SECONDS);
        let bases = bases_from(interval, interval.base_time(start_s), interval.base_time(end_s));
        let mw = self.layout.uid_widths[0];
        let mut out = Vec::new();
        let expected = expected_buckets(interval, start_ms, end_ms);
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> =
                bases.iter().map(|&b| codec::row_key_from_tsuid(tsuid, i64::from(b), &self.layout.salt, mw)).collect();
            let mut series = RollupSeries {
                series: StoredSeries::of_tsuid(tsuid, &self.layout),
                values: (0..ids.len()).map(|_| Vec::with_capacity(expected)).collect(),
            };
            // Keys ascend by base time; pinned rows are read in place, not copied out.
            let get = |cf: Option<&rocksdb::ColumnFamily>| match cf {
                Some(cf) => self.db.batched_multi_get_cf(cf, &keys, true),
                None => Vec::new(),
            };
            let (mut autos, mut tables) = (get(auto_cf).into_iter(), get(table_cf).into_iter());
            for (key, base) in keys.iter().zip(&bases) {
                let auto = autos.next().transpose()?.flatten();
                let table = tables.next().transpose()?.flatten();
                let (auto, table) = (auto.as_deref(), table.as_deref());
                let values = &mut series.values;
                if let Some((cells, bytes)) =
                    self.rollup_values(key, auto, table, *base, interval, ids, start_ms, end_ms, values)?
                {
                    budget.charge(cells, bytes)?;
                }
            }
            if series.values.iter().any(|v| !v.is_empty()) {
                for v in &mut series.values {
                    if !v.is_sorted_by_key(|(ts, _)| *ts) {
                        v.sort_by_key(|(ts, _)| *ts);
                    }
                }
                out.push(series);
            }
        }
        Ok(out)
    }
}

/// The row base times of `interval` from `first` to `last` (inclusive).
fn bases_from(interval: &RollupInterval, first: u32, last: u32) -> Vec<u32> {
    let mut bases = vec![first];
    while let Some(&b) = bases.last().filter(|&&b| b < last) {
        let next = interval.next_base_time(b);
        if next <= b {
            break;
        }
        bases.push(next);
    }
    bases
}

/// Sets bits `range` of a bitmap (bit `i` at bit `i % 64` of word `i / 64`), a word at a time.
fn set_bits(bits: &mut [u64], range: std::ops::Range<usize>) {
    let mut i = range.start;
    while i < range.end {
        let (w, from) = (i / 64, i % 64);
        let to = (range.end - w * 64).min(64);
        bits[w] |= (!0u64 >> (64 - (to - from))) << from;
        i = w * 64 + to;
    }
}

/// Writes `values` at `at` of a series' grid values, which are written in time order: usually appended, after
/// zeros for buckets the series does not have.
fn put_values(into: &mut Vec<f64>, at: usize, values: &[f64]) {
    if into.len() < at {
        into.resize(at, 0.0);
    }
    if into.len() == at {
        into.extend_from_slice(values);
    } else {
        // Not reached: a series' rows come in time order.
        if into.len() < at + values.len() {
            into.resize(at + values.len(), 0.0);
        }
        into[at..at + values.len()].copy_from_slice(values);
    }
}

/// From how many series a targeted rollup read goes over two threads (a thread costs tens of microseconds; a
/// series' day of one-minute rollups about as much to read).
const SPLIT_SERIES: usize = 8;

/// Decides from a series' (tag key UID, tag value UID) pairs whether a read keeps it.
pub type Keep<'a> = dyn FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError> + 'a;

/// Rollup series as a read returns them: those with cells, each list in time order, in TSUID order.
fn finish_rollup_series(mut out: Vec<RollupSeries>) -> Vec<RollupSeries> {
    out.retain(|s| s.values.iter().any(|v| !v.is_empty()));
    for s in &mut out {
        for v in &mut s.values {
            // Rows come in time order and cells by offset, so this is nearly always sorted already.
            if !v.is_sorted_by_key(|(ts, _)| *ts) {
                v.sort_by_key(|(ts, _)| *ts);
            }
        }
    }
    out.sort_by(|a, b| a.series.tsuid.cmp(&b.series.tsuid));
    out
}

/// How many buckets of `interval` a series can have in `[start_ms, end_ms)`: the capacity its cell lists start
/// with (bounded, so a long range costs no more than growing would).
fn expected_buckets(interval: &RollupInterval, start_ms: i64, end_ms: i64) -> usize {
    let width = i64::from(interval.interval_secs.max(1)) * 1000;
    usize::try_from((end_ms - start_ms) / width + 1).unwrap_or(0).min(1 << 16)
}

/// Decodes the cells of aggregators `ids` in one rollup row into `values` (one list per ID), keeping buckets
/// with `start_ms <= t < end_ms` that `shadow` (a bitmap of slots, see `rollup_rows`) does not hide; returns
/// how many.
#[allow(clippy::too_many_arguments)]
fn rollup_cells(
    key: &[u8],
    row: &[u8],
    base: u32,
    interval: &RollupInterval,
    ids: &[u8],
    start_ms: i64,
    end_ms: i64,
    shadow: &[u8],
    values: &mut [Vec<(i64, Value)>],
) -> Result<usize, StoreError> {
    let corrupt = |e: codec::CodecError| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key)));
    let mut cells = 0usize;
    // The merge operator keeps a row's cells sorted by aggregator ID first (`cell_order`): past the last ID
    // asked for nothing more is wanted (reading sum and count skips the min and max cells).
    let last_wanted = ids.iter().copied().filter(|id| id & 0x80 == 0).max();
    for column in codec::columns(row) {
        let column = column.map_err(corrupt)?;
        let q = column.qualifier;
        // Rollup cells only: aggregator ID, then (offset << 4 | flags); compacted columns (high bit of the first
        // byte, sorted after every ID) are not written by rtsd.
        if q.len() != 3 || q[0] & 0x80 != 0 {
            continue;
        }
        if last_wanted.is_none_or(|last| q[0] > last) {
            break;
        }
        let Some(which) = ids.iter().position(|&id| id == q[0]) else { continue };
        if column.value.is_empty() {
            // A deleted cell (see `merge_partial`).
            continue;
        }
        let packed = u16::from_be_bytes([q[1], q[2]]);
        let slot = usize::from(packed >> 4);
        if shadow.get(slot / 8).is_some_and(|b| b & (1 << (slot % 8)) != 0) {
            // A bucket rtsd computed (see `rollup_rows`).
            continue;
        }
        let ts = (i64::from(base) + i64::from(packed >> 4) * i64::from(interval.interval_secs)) * 1000;
        if ts < start_ms || ts >= end_ms {
            continue;
        }
        let v = Value::decode((packed & 0x0F) as u8, column.value).map_err(corrupt)?;
        values[which].push((ts, v));
        cells += 1;
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;

    use proptest::prelude::*;
    use rtsd_protocol::point::{RollupSpec, Rules, Tags};

    use super::*;
    use crate::config::Config;
    use crate::metrics::Metrics;

    fn p(ts_ms: i64, value: Value) -> codec::RowPoint {
        codec::RowPoint { timestamp_ms: ts_ms, qualifier: Default::default(), value }
    }

    fn open(dir: &Path, overrides: &[(&str, &str)]) -> Store {
        let mut all = vec![("tsd.rollups.enable", "true")];
        all.extend_from_slice(overrides);
        let config = Config::for_data_dir(dir, &all).unwrap();
        Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
    }

    fn point<'a>(metric: &'a str, ts: i64, value: Value, tags: &[(&'a str, &'a str)]) -> DataPoint<'a> {
        let tags: Tags<'a> = tags.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v))).collect();
        DataPoint { metric: Cow::Borrowed(metric), timestamp: ts, value, tags }
    }

    type Cells = Vec<(Vec<u8>, Vec<u8>)>;

    /// (key, columns) of every row of a column family.
    fn family_rows(store: &Store, family: &str) -> Vec<(Vec<u8>, Cells)> {
        let mut out = Vec::new();
        let mut iter = store.db.raw_iterator_cf(store.cf(family));
        iter.seek_to_first();
        while let (Some(k), Some(v)) = (iter.key(), iter.value()) {
            let cols = codec::columns(v).map(|c| c.map(|c| (c.qualifier.to_vec(), c.value.to_vec())));
            out.push((k.to_vec(), cols.collect::<Result<Vec<_>, _>>().unwrap()));
            iter.next();
        }
        out
    }

    fn rollup_point(store: &Store, line: &DataPoint<'_>, spec: RollupSpec) {
        let mut dp = line.clone();
        let target = crate::rollup::prepare(store.rollup_settings(), &mut dp, &spec, &Rules::default()).unwrap();
        let mut batch = store.new_batch();
        store.add_rollup_point(&mut batch, &dp, &target).unwrap();
        store.commit(&mut batch, false).unwrap();
    }

    fn spec(interval: Option<&str>, agg: Option<&str>, groupby: Option<&str>) -> RollupSpec {
        RollupSpec {
            interval: interval.map(str::to_string),
            aggregator: agg.map(str::to_string),
            groupby_aggregator: groupby.map(str::to_string),
        }
    }

    #[test]
    fn grid_bitmaps_and_values_are_written_by_range() {
        let mut bits = vec![0u64; 3];
        set_bits(&mut bits, 60..130);
        let want: Vec<bool> = (0..192).map(|i| (60..130).contains(&i)).collect();
        assert_eq!((0..192).map(|i| bits[i / 64] & (1 << (i % 64)) != 0).collect::<Vec<_>>(), want);
        set_bits(&mut bits, 0..64);
        assert_eq!(bits[0], !0);
        let mut values = Vec::new();
        put_values(&mut values, 2, &[1.0, 2.0]);
        put_values(&mut values, 4, &[3.0]);
        put_values(&mut values, 1, &[9.0]);
        assert_eq!(values, [0.0, 9.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn rollup_and_pre_aggregate_cells_are_laid_out_as_opentsdb_lays_them_out() {
        // spec: ingest §1.7; OpenTSDB 2.4 TSDB.addAggregatePointInternal + RollupUtils: row key as a data row
        // with the row span's base time, qualifier = aggregator ID, (offset << 4 | flags).
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[("rtsd.rollups.auto", "false")]);
        let ts = 1356998400 + 5 * 3600;
        rollup_point(
            &store,
            &point("sys.cpu.user", ts, Value::Int(42), &[("host", "web01")]),
            spec(Some("1h"), Some("sum"), None),
        );
        let rows = family_rows(&store, "tsdb-rollup-1h:t");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0, [0, 0, 1, 0x50, 0xE2, 0x27, 0x00, 0, 0, 1, 0, 0, 1]);
        assert_eq!(rows[0].1, vec![(vec![0x00, 0x00, 0x50], vec![42])]);
        // count (ID 1) of 10m bucket 3 (00:30) in a float: flags 0x0B, offset 3.
        rollup_point(
            &store,
            &point("sys.cpu.user", 1356998400 + 1800, Value::Float(1.5), &[("host", "web01")]),
            spec(Some("10m"), Some("count"), None),
        );
        let rows = family_rows(&store, "tsdb-rollup-10m:t");
        assert_eq!(rows[0].1, vec![(vec![0x01, 0x00, 0x3B], 1.5f32.to_be_bytes().to_vec())]);
        // A pre-aggregate without interval: the default interval's pre-aggregate table, a raw qualifier, and the
        // `_aggregate` tag (tagk UID 2, tagv `SUM` UID 2).
        rollup_point(
            &store,
            &point("sys.cpu.user", ts + 1, Value::Int(7), &[("host", "web01")]),
            spec(None, Some("sum"), Some("sum")),
        );
        let rows = family_rows(&store, "tsdb-agg:t");
        assert_eq!(rows[0].0, [0, 0, 1, 0x50, 0xE2, 0x6D, 0x50, 0, 0, 1, 0, 0, 1, 0, 0, 2, 0, 0, 2]);
        assert_eq!(rows[0].1, vec![(vec![0x00, 0x10], vec![7])]);
        assert_eq!(
            store.uids().name_of(rtsd_protocol::point::UidKind::TagKey, &[0, 0, 2]).unwrap().as_deref(),
            Some("_aggregate")
        );
        // The same cell written again: the later value wins.
        rollup_point(
            &store,
            &point("sys.cpu.user", ts, Value::Int(43), &[("host", "web01")]),
            spec(Some("1h"), Some("sum"), None),
        );
        assert_eq!(family_rows(&store, "tsdb-rollup-1h:t")[0].1, vec![(vec![0x00, 0x00, 0x50], vec![43])]);
        // Nothing was written to the raw table.
        assert!(family_rows(&store, CF_DATA).is_empty());
    }

    // The daemon's periodic fold (`fold_flushed`) takes only what the series table's flushes wrote, so it never
    // forces a flush; points still in the table are folded after their flush, and `fold_rollups` (a query's)
    // settles first.
    #[test]
    fn a_fold_of_flushed_rows_leaves_the_series_table_to_its_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let write = |points: &[(i64, i64)]| {
            let mut batch = store.new_batch();
            for &(ts, v) in points {
                store.add_point(&mut batch, &point("m", ts, Value::Int(v), &[("host", "a")])).unwrap();
            }
            store.commit(&mut batch, false).unwrap();
        };
        write(&[(1356998400, 1), (1356998460, 2)]);
        assert_eq!(store.fold_flushed(None).unwrap(), 0);
        assert_eq!(store.pending_points(), 2);
        assert_eq!(store.flush_pending().unwrap(), 2);
        assert_eq!(store.fold_flushed(None).unwrap(), 1);
        assert_eq!(store.fold_flushed(None).unwrap(), 0);
        write(&[(1356998470, 3)]);
        assert_eq!(store.fold_rollups(None).unwrap(), 1);
        assert_eq!(store.pending_points(), 0);
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let config = store.rollup_settings().config.clone().unwrap();
        let iv = config.interval("1m").unwrap();
        let got = store
            .read_rollup(
                &RollupInterval::family(&iv.table),
                iv,
                &[0, 1],
                metric.as_bytes(),
                0,
                i64::MAX / 2,
                &mut Default::default(),
                |_| Ok(true),
            )
            .unwrap();
        let (sum, count) = (&got[0].values[0], &got[0].values[1]);
        assert_eq!(sum, &vec![(1356998400000, Value::Int(1)), (1356998460000, Value::Int(5))]);
        assert_eq!(count, &vec![(1356998400000, Value::Int(1)), (1356998460000, Value::Int(2))]);
    }

    // `fsck --fix` and `scan --delete` rewrite or delete raw rows: the rollups follow what is left.
    #[test]
    fn rewritten_and_deleted_raw_rows_are_rolled_up_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let mut batch = store.new_batch();
        for (ts, v) in [(1356998400, 1), (1356998460, 2), (1357002000, 5)] {
            store.add_point(&mut batch, &point("m", ts, Value::Int(v), &[("host", "a")])).unwrap();
        }
        store.commit(&mut batch, false).unwrap();
        store.fold_rollups(None).unwrap();
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let config = store.rollup_settings().config.clone().unwrap();
        let read = |iv: &str| {
            let iv = config.interval(iv).unwrap();
            let got = store
                .read_rollup(
                    &RollupInterval::family(&iv.table),
                    iv,
                    &[0, 1],
                    metric.as_bytes(),
                    0,
                    i64::MAX / 2,
                    &mut Default::default(),
                    |_| Ok(true),
                )
                .unwrap();
            got.into_iter().map(|s| s.values).collect::<Vec<_>>()
        };
        assert_eq!(read("1m")[0][0].len(), 3);
        // Hour 0 keeps only its second point; hour 1 is deleted.
        let rows = family_rows(&store, CF_DATA);
        let mut kept = Vec::new();
        codec::push_column(&mut kept, &codec::build_qualifier(1356998460, 0), &[2]);
        store.rewrite_rows(&[(rows[0].0.clone(), Some(kept)), (rows[1].0.clone(), None)]).unwrap();
        store.fold_rollups(None).unwrap();
        for iv in ["1m", "10m", "1h"] {
            let got = read(iv);
            assert_eq!(got.len(), 1, "{iv}");
            let start = if iv == "1m" { 1356998460 * 1000 } else { 1356998400 * 1000 };
            assert_eq!(got[0][0], vec![(start, Value::Int(2))], "{iv}");
            assert_eq!(got[0][1], vec![(start, Value::Int(1))], "{iv}");
        }
    }

    /// Moves every `<table>:a` row of the automatic intervals into OpenTSDB-style cells in `<table>:t`: what the
    /// rollups rtsd computed looked like on disk before `rollup_rows` (one cell per bucket and aggregator).
    fn to_cells_as_before(store: &Store) {
        for interval in &store.rollups.auto {
            let family = RollupInterval::family(&interval.table);
            let auto = RollupInterval::auto_family(&family);
            let mut batch = WriteBatch::default();
            let mut iter = store.db.raw_iterator_cf(store.cf(&auto));
            iter.seek_to_first();
            while let (Some(k), Some(v)) = (iter.key(), iter.value()) {
                let base = codec::row_base_time(k, store.layout.salt.width, store.layout.uid_widths[0]);
                let mut cells = Vec::new();
                for (c, id) in store.rollups.auto_ids.iter().enumerate() {
                    for (slot, bucket) in Slots::decode(v).unwrap().slots.iter().enumerate() {
                        if let Some(Some(b)) = bucket {
                            let ts = i64::from(base) + slot as i64 * i64::from(interval.interval_secs);
                            codec::push_column(
                                &mut cells,
                                &interval.qualifier(ts, base, b[c].flags(), *id),
                                &b[c].encode(),
                            );
                        }
                    }
                }
                batch.merge_cf(store.cf(&family), k, cells);
                batch.delete_cf(store.cf(&auto), k);
                iter.next();
            }
            drop(iter);
            store.db.write(batch).unwrap();
        }
    }

    // A data directory written before `<table>:a` existed holds rtsd's rollups as cells of `<table>:t`: they are
    // read as they are, and buckets folded again (late points, deleted raw rows) come from `:a` instead.
    #[test]
    fn rollups_written_as_cells_before_are_read_and_refolded_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let write = |points: &[(i64, Value)]| {
            let mut batch = store.new_batch();
            for &(ts, v) in points {
                store.add_point(&mut batch, &point("m", ts, v, &[("host", "a")])).unwrap();
            }
            store.commit(&mut batch, false).unwrap();
            store.fold_rollups(None).unwrap();
        };
        let base = 1356998400i64;
        let mut points: Vec<(i64, Value)> = (0..240)
            .map(|i| (base + i * 30, if i % 3 == 0 { Value::Float(i as f32 / 4.0) } else { Value::Int(i) }))
            .collect();
        write(&points);
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let config = store.rollup_settings().config.clone().unwrap();
        let read = |iv: &str| {
            let iv = config.interval(iv).unwrap();
            let family = RollupInterval::family(&iv.table);
            let whole = store
                .read_rollup(
                    &family,
                    iv,
                    &[0, 1, 2, 3],
                    metric.as_bytes(),
                    0,
                    i64::MAX / 2,
                    &mut Default::default(),
                    |_| Ok(true),
                )
                .unwrap();
            let tsuids: Vec<Vec<u8>> = whole.iter().map(|s| s.series.tsuid.clone()).collect();
            let targeted = store
                .read_rollup_series(&family, iv, &[0, 1, 2, 3], &tsuids, 0, i64::MAX / 2, &mut Default::default())
                .unwrap();
            let whole: Vec<_> = whole.into_iter().map(|s| s.values).collect();
            assert_eq!(whole, targeted.into_iter().map(|s| s.values).collect::<Vec<_>>());
            whole
        };
        // What the raw points give, per interval: (sum, count, min, max) lists.
        let expect = |points: &[(i64, Value)], secs: u32| {
            let mut sorted = points.to_vec();
            sorted.sort_by_key(|p| p.0);
            let raw: Vec<codec::RowPoint> = sorted.iter().map(|&(ts, v)| p(ts * 1000, v)).collect();
            let b = buckets(&raw, secs);
            vec![vec![
                b.iter().map(|b| (b.start, b.sum)).collect::<Vec<_>>(),
                b.iter().map(|b| (b.start, Value::Int(b.count))).collect(),
                b.iter().map(|b| (b.start, b.min)).collect(),
                b.iter().map(|b| (b.start, b.max)).collect(),
            ]]
        };
        let all = [("1m", 60), ("10m", 600), ("1h", 3600)];
        for (iv, secs) in all {
            assert_eq!(read(iv), expect(&points, secs), "{iv}");
        }
        to_cells_as_before(&store);
        assert!(family_rows(&store, "tsdb-rollup-1m:a").is_empty());
        assert_eq!(family_rows(&store, "tsdb-rollup-1m:t").len(), 2);
        for (iv, secs) in all {
            assert_eq!(read(iv), expect(&points, secs), "{iv} as cells");
        }
        // A late point: its buckets are folded into `:a`, the others still come from the cells.
        let late = (base + 3600 + 7, Value::Double(1e6));
        points.push(late);
        write(&[late]);
        for (iv, secs) in all {
            assert_eq!(read(iv), expect(&points, secs), "{iv} after a late point");
        }
        // The second hour's raw row rewritten to hold one point: every other bucket of that hour is deleted,
        // hiding its old cell.
        let rows = family_rows(&store, CF_DATA);
        let mut kept = Vec::new();
        codec::push_column(&mut kept, &codec::build_qualifier(base + 3600 + 7, late.1.flags()), &late.1.encode());
        store.rewrite_rows(&[(rows[1].0.clone(), Some(kept))]).unwrap();
        store.fold_rollups(None).unwrap();
        points.retain(|&(ts, _)| ts < base + 3600);
        points.push(late);
        for (iv, secs) in all {
            assert_eq!(read(iv), expect(&points, secs), "{iv} after a rewrite");
        }
    }

    // The gate: writers on several threads and folds (full and of one metric) running meanwhile never lose a
    // point or count one twice.
    #[test]
    fn concurrent_writes_and_folds_give_the_aggregation_of_every_point() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path(), &[]));
        let base = 1356998400i64;
        let writers: Vec<_> = (0..4i64)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    // Thread t writes instants t, t+4, t+8, ... (distinct across threads) in a scrambled order,
                    // a few points per batch, into the same rows as the others.
                    for chunk in (0..2400i64).map(|i| (i * 7919) % 2400).collect::<Vec<_>>().chunks(2) {
                        let mut batch = store.new_batch();
                        for &i in chunk {
                            let ts = base + (i * 4 + t) * 3;
                            store.add_point(&mut batch, &point("m", ts, Value::Int(i + t), &[("host", "a")])).unwrap();
                        }
                        store.commit(&mut batch, false).unwrap();
                    }
                })
            })
            .collect();
        let metric = loop {
            if let Some(m) = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap() {
                break m;
            }
            std::thread::yield_now();
        };
        let mut n = 0;
        while writers.iter().any(|w| !w.is_finished()) {
            store.fold_rollups(if n % 2 == 0 { None } else { Some(metric.as_bytes()) }).unwrap();
            n += 1;
        }
        for w in writers {
            w.join().unwrap();
        }
        store.fold_rollups(Some(metric.as_bytes())).unwrap();
        let writes: Vec<(i64, Value)> = (0..4i64)
            .flat_map(|t| (0..2400i64).map(move |i| ((base + (i * 4 + t) * 3) * 1000, Value::Int(i + t))))
            .collect();
        let config = store.rollup_settings().config.clone().unwrap();
        for interval in ["1m", "10m", "1h"] {
            let iv = config.interval(interval).unwrap();
            let read = store
                .read_rollup(
                    &RollupInterval::family(&iv.table),
                    iv,
                    &[0, 1, 2, 3],
                    metric.as_bytes(),
                    0,
                    i64::MAX / 2,
                    &mut Default::default(),
                    |_| Ok(true),
                )
                .unwrap();
            let model = model_buckets(&writes, i64::from(iv.interval_secs));
            let got: Vec<(i64, f64, i64, f64, f64)> = (0..read[0].values[0].len())
                .map(|i| {
                    let v = &read[0].values;
                    let count = match v[1][i].1 {
                        Value::Int(c) => c,
                        other => panic!("count {other:?}"),
                    };
                    (v[0][i].0, as_f64(v[0][i].1), count, as_f64(v[2][i].1), as_f64(v[3][i].1))
                })
                .collect();
            let want: Vec<(i64, f64, i64, f64, f64)> =
                model.iter().map(|(s, (c, sum, min, max))| (*s, *sum, *c, *min, *max)).collect();
            assert_eq!(got, want, "{interval} after {n} folds");
        }
    }

    // With raw data past its retention, the rollups are the record: a late point into such an hour, after the
    // raw row's older points were compacted away, must not shrink the bucket, and nothing is deleted.
    #[test]
    fn late_points_into_expired_raw_hours_never_shrink_the_rollups() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[("rtsd.retention.raw_hours", "1"), ("rtsd.retention.rollup_hours", "0")]);
        let write = |points: &[(i64, i64)]| {
            let mut batch = store.new_batch();
            for &(ts, v) in points {
                store.add_point(&mut batch, &point("m", ts, Value::Int(v), &[("host", "a")])).unwrap();
            }
            store.commit(&mut batch, false).unwrap();
            store.fold_rollups(None).unwrap();
        };
        let metric = || store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let config = store.rollup_settings().config.clone().unwrap();
        let counts = || {
            let iv = config.interval("1m").unwrap();
            let got = store
                .read_rollup(
                    &RollupInterval::family(&iv.table),
                    iv,
                    &[1],
                    metric().as_bytes(),
                    0,
                    i64::MAX / 2,
                    &mut Default::default(),
                    |_| Ok(true),
                )
                .unwrap();
            got.into_iter().flat_map(|s| s.values[0].clone()).collect::<Vec<_>>()
        };
        // A backlog of an hour long past the raw retention: rolled up.
        write(&[(1356998400, 1), (1356998410, 2), (1356998420, 3)]);
        assert_eq!(counts(), vec![(1356998400 * 1000, Value::Int(3))]);
        // Compaction drops the expired raw row (as the retention filter does); nothing is deleted from rollups.
        let rows = family_rows(&store, CF_DATA);
        store.rewrite_rows(&[(rows[0].0.clone(), None)]).unwrap();
        store.fold_rollups(None).unwrap();
        assert_eq!(counts(), vec![(1356998400 * 1000, Value::Int(3))]);
        // A late point re-creates the row with only itself: the bucket keeps its three points.
        write(&[(1356998430, 4)]);
        assert_eq!(counts(), vec![(1356998400 * 1000, Value::Int(3))]);
        // A bucket the rollups have not seen is still rolled up from a late point.
        write(&[(1356998460, 5)]);
        assert_eq!(counts(), vec![(1356998400 * 1000, Value::Int(3)), (1356998460 * 1000, Value::Int(1))]);
    }

    #[test]
    fn buckets_count_each_instant_once_and_keep_value_types() {
        let pts = [
            p(0, Value::Int(5)),
            p(0, Value::Int(7)), // a duplicate the engine skips
            p(30_000, Value::Int(-2)),
            p(60_000, Value::Float(1.5)),
            p(61_000, Value::Int(2)),
        ];
        let b = buckets(&pts, 60);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0], Bucket { start: 0, count: 2, sum: Value::Int(3), min: Value::Int(-2), max: Value::Int(5) });
        assert_eq!(
            b[1],
            Bucket { start: 60_000, count: 2, sum: Value::Double(3.5), min: Value::Float(1.5), max: Value::Int(2) }
        );
    }

    /// The model: the last value written at each instant (fix_duplicates), bucketed independently of the store.
    fn model_buckets(writes: &[(i64, Value)], interval_secs: i64) -> BTreeMap<i64, (i64, f64, f64, f64)> {
        let mut last: BTreeMap<i64, Value> = BTreeMap::new();
        for (ts, v) in writes {
            last.insert(*ts, *v);
        }
        let mut out: BTreeMap<i64, (i64, f64, f64, f64)> = BTreeMap::new();
        for (ts, v) in last {
            let d = as_f64(v);
            let b = out.entry(ts - ts.rem_euclid(interval_secs * 1000)).or_insert((0, 0.0, f64::MAX, f64::MIN));
            b.0 += 1;
            b.1 += d;
            b.2 = b.2.min(d);
            b.3 = b.3.max(d);
        }
        out
    }

    fn value_strategy() -> impl Strategy<Value = Value> {
        prop_oneof![(-1000i64..1000).prop_map(Value::Int), (-1000i32..1000).prop_map(|v| Value::Float(v as f32 / 4.0))]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        // Rollup = raw aggregation for random data with late points, out-of-order points and duplicates that
        // overwrite earlier values, whatever the interleaving of writes and folds (issue 6).
        #[test]
        fn rollups_equal_the_aggregation_of_the_raw_points(
            writes in prop::collection::vec((0i64..3 * 3600, value_strategy(), any::<bool>()), 1..120),
            folds in prop::collection::vec((0usize..120, any::<bool>()), 0..6),
            restart in prop::option::of(0usize..120),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let overrides = [("tsd.storage.fix_duplicates", "true")];
            let mut store = open(dir.path(), &overrides);
            let base = 1356998400i64;
            // Points of `m` (checked) and of `other`, in the order written.
            let writes: Vec<(i64, Value, bool)> =
                writes.into_iter().map(|(s, v, other)| ((base + s) * 1000, v, other)).collect();
            for (i, (ts, v, other)) in writes.iter().enumerate() {
                let mut batch = store.new_batch();
                let metric = if *other { "other" } else { "m" };
                store.add_point(&mut batch, &point(metric, ts / 1000, *v, &[("host", "a")])).unwrap();
                store.commit(&mut batch, false).unwrap();
                for (at, one_metric) in &folds {
                    if *at == i {
                        // A query's fold of one metric, or the background's full fold.
                        let m = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap();
                        let m = m.filter(|_| *one_metric);
                        store.fold_rollups(m.as_ref().map(|u| u.as_bytes())).unwrap();
                    }
                }
                if restart == Some(i) {
                    // Marks written before the restart carry no in-memory note.
                    drop(store);
                    store = open(dir.path(), &overrides);
                }
            }
            let writes: Vec<(i64, Value)> = writes.into_iter().filter(|w| !w.2).map(|(t, v, _)| (t, v)).collect();
            if writes.is_empty() {
                return Ok(());
            }
            // A query folds its metric first.
            let m = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
            store.fold_rollups(Some(m.as_bytes())).unwrap();
            let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
            let config = store.rollup_settings().config.clone().unwrap();
            let check = |store: &Store| -> Result<(), TestCaseError> {
                for interval in ["1m", "10m", "1h"] {
                    let iv = config.interval(interval).unwrap();
                    let family = RollupInterval::family(&iv.table);
                    let read = store
                        .read_rollup(&family, iv, &[0, 1, 2, 3], metric.as_bytes(), 0, i64::MAX / 2, &mut Default::default(), |_| Ok(true))
                        .unwrap();
                    prop_assert_eq!(read.len(), 1);
                    let model = model_buckets(&writes, i64::from(iv.interval_secs));
                    let got = &read[0].values;
                    prop_assert_eq!(got[1].len(), model.len());
                    for (n, (start, (count, sum, min, max))) in model.iter().enumerate() {
                        let at = format!("{interval} bucket {n}: {got:?}");
                        prop_assert_eq!(got[0][n].0, *start, "{}", at);
                        prop_assert_eq!(as_f64(got[0][n].1), *sum, "{}", at);
                        prop_assert_eq!(got[1][n].1, Value::Int(*count), "{}", at);
                        prop_assert_eq!(as_f64(got[2][n].1), *min, "{}", at);
                        prop_assert_eq!(as_f64(got[3][n].1), *max, "{}", at);
                    }
                }
                Ok(())
            };
            check(&store)?;
            // A full fold handles the rest (the other metric, the marks the query's fold left); then nothing is
            // left to fold and no mark is kept, and the rollups of `m` are unchanged (checked again below).
            store.fold_rollups(None).unwrap();
            prop_assert_eq!(store.fold_rollups(None).unwrap(), 0);
            prop_assert!(family_rows(&store, CF_ROLLUP_DIRTY).is_empty());
            check(&store)?;
        }
    }
}
