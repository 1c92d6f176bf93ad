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
mod fold;
mod grid;
mod marks;
mod owned;
mod read;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::engine::{CellMap, Durability, Engine, Merge, MergeContext, ReadHints, TableSpec, Tuning, WriteBatch};
use rtsd_protocol::codec::{self, Value};
use rtsd_protocol::point::DataPoint;

use super::rollup_rows::{self, RowView, Slots, COLUMNS};
use super::{AddError, PointBatch, Store, StoreError, StoredSeries, Tsuid, CF_DATA};
use crate::rollup::{RollupInterval, RollupSettings, RollupTarget, RowSpan, AUTO_AGGREGATORS};
pub use fold::{buckets, buckets_each, Bucket};
pub(super) use marks::mark_key;
pub use marks::Marks;
use marks::*;
use owned::*;
pub(super) use owned::{Flushed, SEALING_BOUND, SEAL_CHUNK};
pub use read::Keep;
use read::*;

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
    /// Per interval of `auto`, its table's column family and its `:a` family (named once: a fold names them for
    /// every raw row).
    auto_families: Vec<(String, String)>,
    auto_ids: [u8; 4],
    /// One fold at a time, so a fold that read older raw rows never writes after one that read newer ones.
    fold_lock: Mutex<()>,
    /// Folds other than the daemon's folds of passed hours waiting for `fold_lock` (those step aside for them).
    fold_waiting: AtomicU64,
    /// The metrics of the folds of one metric (a query's) waiting for `fold_lock`: a full fold in progress folds
    /// their rows first and then lets them in (see `Store::fold_selected`).
    wanted: Mutex<Vec<Vec<u8>>>,
    /// Tests: called by a full fold before each chunk of rows, with the rows it has folded so far.
    #[cfg(test)]
    #[allow(clippy::type_complexity)]
    pub(super) before_chunk: Mutex<Option<Box<dyn FnMut(usize) + Send>>>,
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
    /// Rows a fold has taken (out of `pending`, or from stored marks) and not written yet, by metric, with how
    /// many folds hold each: with `pending`, every row whose rollups may lag its raw points (see
    /// [`Store::unfolded_rows`]). Rows are added under the `pending` lock as they are taken.
    in_flight: Mutex<InFlight>,
    /// How many owned rows wait for their seal (`Notes::owned`, whose lock a committing writer should not take
    /// to ask).
    sealing_len: std::sync::atomic::AtomicUsize,
    /// Set while a full fold reads stored marks, whose rows it has not added to `in_flight` yet.
    reading_marks: std::sync::atomic::AtomicBool,
    /// Grid reads under way that read rows not folded yet from their points (see [`Store::grid_unfolded`]): the
    /// daemon's folds wait between chunks while there are any (see [`Store::step_aside_for_grid_reads`]).
    grid_readers: std::sync::atomic::AtomicUsize,
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

/// Raw rows taken by folds and not written yet, by metric UID, with how many folds hold each (see
/// [`Rollups::in_flight`]).
type InFlight = HashMap<Vec<u8>, HashMap<Vec<u8>, u32>>;

/// `rtsd:meta` key prefix of [`Rollups::complete_since`]: `rollups_since:<table>` -> i64 ms big-endian.
const SINCE_KEY: &str = "rollups_since:";

/// The cores this process may run on, read once: `available_parallelism` reads the cgroup's CPU quota from
/// /proc and /sys on every call (perf: ~5% of a grid read of 200 rows), and folds and grid reads ask each time.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

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
                }
                None if settings.auto => tracing::warn!(
                    "rtsd.rollups.auto needs aggregation IDs for sum, count, min and max in tsd.rollups.config; \
                     rollups of raw points are not computed"
                ),
                None => {}
            }
        }
        let auto_families: Vec<(String, String)> = auto
            .iter()
            .map(|i| {
                let family = RollupInterval::family(&i.table);
                let auto_family = RollupInterval::auto_family(&family);
                (family, auto_family)
            })
            .collect();
        families.extend(auto_families.iter().map(|(_, auto_family)| auto_family.clone()));
        Rollups {
            settings: settings.clone(),
            families,
            auto,
            auto_families,
            auto_ids,
            fold_lock: Mutex::new(()),
            fold_waiting: AtomicU64::new(0),
            wanted: Mutex::new(Vec::new()),
            #[cfg(test)]
            before_chunk: Mutex::new(None),
            generation: AtomicU64::new(1),
            gate: RwLock::new(()),
            pending: Mutex::new(Notes::default()),
            unnoted: std::sync::atomic::AtomicBool::new(false),
            in_flight: Mutex::new(HashMap::new()),
            reading_marks: std::sync::atomic::AtomicBool::new(false),
            sealing_len: Default::default(),
            grid_readers: std::sync::atomic::AtomicUsize::new(0),
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
    pub(super) fn resume(&mut self, db: &dyn Engine, read_only: bool) -> Result<(), StoreError> {
        self.read_only = read_only;
        let mut stored: HashMap<String, i64> = HashMap::new();
        if let Some(mut iter) = db.cursor(super::CF_META, ReadHints::default()) {
            iter.seek(SINCE_KEY.as_bytes());
            while iter.valid() {
                let Some(table) = iter.key().strip_prefix(SINCE_KEY.as_bytes()) else { break };
                let since = iter.value().try_into().map(i64::from_be_bytes).unwrap_or(i64::MAX);
                stored.insert(String::from_utf8_lossy(table).into_owned(), since);
                iter.next();
            }
            iter.status()?;
        }
        let tables: Vec<String> = self.auto.iter().map(|i| i.table.clone()).collect();
        let mut batch = WriteBatch::default();
        if !read_only {
            for gone in stored.keys().filter(|t| !tables.contains(t)) {
                batch.delete(super::CF_META, format!("{SINCE_KEY}{gone}").as_bytes());
            }
        }
        for table in tables {
            let since = match stored.get(&table) {
                Some(&since) => since,
                None if read_only => i64::MAX,
                None => {
                    let has_raw = match db.cursor(CF_DATA, ReadHints::default()) {
                        Some(mut raw) => {
                            raw.seek(b"");
                            raw.status()?;
                            raw.valid()
                        }
                        None => false,
                    };
                    let since = if has_raw {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs() as i64);
                        (now - now.rem_euclid(3600) + 3600) * 1000
                    } else {
                        0
                    };
                    batch.put(super::CF_META, format!("{SINCE_KEY}{table}").as_bytes(), &since.to_be_bytes());
                    since
                }
            };
            self.complete_since.insert(table, since);
        }
        if !batch.is_empty() {
            db.write(batch, Durability::Logged)?;
        }
        self.resume_generation(db);
        Ok(())
    }

    fn resume_generation(&self, db: &dyn Engine) {
        if let Some(mut iter) = db.cursor(CF_ROLLUP_DIRTY, ReadHints::default()) {
            iter.seek_to_last();
            if iter.valid() {
                if let Some(g) = iter.key().get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes) {
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

/// A rollup or pre-aggregate table (OpenTSDB's cells, compressed as the data table is: rollup cells repeat their
/// qualifiers' patterns row after row, which LZ4 and zstd shrink well).
pub(super) fn table_spec(name: &str) -> TableSpec {
    let full = Arc::new(|key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
        merge_latest(key, existing, operands, true)
    });
    let partial = Arc::new(|key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
        merge_latest(key, existing, operands, false)
    });
    let merge = Merge { name: "rollup-cells-v1", full, partial: Some(partial) };
    TableSpec::new(name, CellMap::RowColumns, Tuning::Rollup).with_merge(merge)
}

/// A family of rollups rtsd computes (`<table>:a`): rows of columns merged slot by slot (see [`rollup_rows`]).
pub(super) fn slots_spec(name: &str) -> TableSpec {
    // Rows RocksDB stores (flushes, compactions) take the smallest encodings; a read's merge copies bytes.
    let full = Arc::new(|_key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], context: MergeContext| {
        rollup_rows::merge(existing, operands.iter().copied(), context.stored)
    });
    let merge = Merge { name: "rollup-columns-v1", full: full.clone(), partial: Some(full) };
    // A later operand wins slot by slot: on HBase each is a blind Put (a read and a compare-and-set per row and
    // interval made the fold the dearest part of rtsd-on-HBase's writes, bench/RESULTS.md).
    TableSpec::new(name, CellMap::Plain, Tuning::RollupSlots).with_merge(merge).with_blind_operands()
}

/// [`CF_ROLLUP_DIRTY`]: point counts summed.
pub(super) fn marks_spec() -> TableSpec {
    let full = Arc::new(|_key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
        sum_counters(existing, operands)
    });
    let merge = Merge { name: "i64-sum-v1", full: full.clone(), partial: Some(full) };
    TableSpec::new(CF_ROLLUP_DIRTY, CellMap::Plain, Tuning::Marks).with_merge(merge)
}

fn counter(value: &[u8]) -> i64 {
    value.try_into().map(i64::from_le_bytes).unwrap_or(0)
}

fn sum_counters(existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
    let total = operands.iter().fold(existing.map_or(0, counter), |acc, op| acc.wrapping_add(counter(op)));
    total.to_le_bytes().to_vec()
}

/// Orders qualifiers as cells: by their bytes with the flag bits (the value's type and length) left out, so a
/// bucket whose minimum was a float and is now an integer has one minimum, not two.
fn cell_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let (Some((la, ha)), Some((lb, hb))) = (a.split_last(), b.split_last()) else { return a.cmp(b) };
    ha.cmp(hb).then((la & !codec::FLAGS_MASK).cmp(&(lb & !codec::FLAGS_MASK))).then(a.len().cmp(&b.len()))
}

/// The cells of a rollup row: the last value written per cell (see [`cell_order`]), sorted (HBase put
/// semantics; no compaction, unlike the data table, since rollup qualifiers are not data-point qualifiers).
/// Rows this writes are sorted, so the stored row is walked once beside the sorted new cells. An empty value
/// is a deleted cell; `drop_deleted` leaves them out.
fn merge_latest(_key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], drop_deleted: bool) -> Vec<u8> {
    let keep_as_written = || {
        // A row that can't be framed is kept as written rather than lost.
        let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
        operands.iter().for_each(|op| out.extend_from_slice(op));
        out
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
    let mut out =
        Vec::with_capacity(existing.map_or(0, <[u8]>::len) + operands.iter().map(|op| op.len()).sum::<usize>());
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
    out
}

/// The series of one rollup table read for a query: per series, (bucket start ms, value) per aggregator asked
/// for, in time order.
#[derive(Debug, Clone)]
pub struct RollupSeries {
    pub series: StoredSeries,
    /// One list per requested aggregator ID, in the order asked.
    pub values: Vec<Vec<(i64, Value)>>,
}

/// Raw rows of a metric whose rollups may not hold all their points yet ([`Store::unfolded_rows`]).
#[derive(Debug, Default, PartialEq)]
pub struct Unfolded {
    /// Their keys, in order.
    pub rows: Vec<Vec<u8>>,
    /// Their points not in RocksDB yet (in the series table, or in its flush under way), by row key: merged into
    /// what is stored when the rows are read.
    pub unflushed: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
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
    Series(&'k [Tsuid]),
}

impl Store {
    /// Stores a rollup or pre-aggregate point where [`crate::rollup::prepare`] said (UIDs resolved as for `put`).
    pub fn add_rollup_point(
        &self,
        batch: &mut PointBatch,
        point: &DataPoint<'_>,
        target: &RollupTarget,
    ) -> Result<(), AddError> {
        if !self.engine.has_table(&target.family) {
            return Err(AddError::Internal(format!("no column family {}", target.family)));
        }
        let series = self.series_key(point)?;
        let mut key = series.template.clone();
        let at = self.layout.salt.width + self.layout.uid_widths[0];
        key[at..at + 4].copy_from_slice(&target.base_time.to_be_bytes());
        let mut column = Vec::with_capacity(16);
        codec::push_column(&mut column, &target.qualifier, &point.value.encode());
        batch.batch.merge(&target.family, &key, &column);
        let tsuid = self.layout.tsuid_of_row(&key);
        self.series.note_postings(&mut batch.batch, &self.layout, &tsuid, &mut batch.noted);
        batch.rollup_points += 1;
        Ok(())
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
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;

    use proptest::prelude::*;
    use rtsd_protocol::point::{RollupSpec, Rules, Tags};

    use super::grid::{put_values, set_bits};
    use super::*;
    use crate::config::Config;
    use crate::metrics::Metrics;

    fn p(ts_ms: i64, value: Value) -> codec::TimedValue {
        codec::TimedValue { timestamp_ms: ts_ms, value }
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

    /// rtsd's own rollup tables of the test configuration, by interval.
    const AUTO_FAMILIES: [&str; 3] = ["tsdb-rollup-1m:a", "tsdb-rollup-10m:a", "tsdb-rollup-1h:a"];

    /// The (key, bytes) of every row of [`AUTO_FAMILIES`], by interval.
    fn auto_rows(store: &Store) -> Vec<Cells> {
        AUTO_FAMILIES
            .iter()
            .map(|family| {
                let mut rows = Vec::new();
                store
                    .scan_raw(family, b"", |k, v| {
                        rows.push((k.to_vec(), v.to_vec()));
                        true
                    })
                    .unwrap();
                rows
            })
            .collect()
    }

    /// (key, columns) of every row of a column family.
    fn family_rows(store: &Store, family: &str) -> Vec<(Vec<u8>, Cells)> {
        let mut out = Vec::new();
        store
            .scan_raw(family, b"", |k, v| {
                let cols = codec::columns(v).map(|c| c.map(|c| (c.qualifier.to_vec(), c.value.to_vec())));
                out.push((k.to_vec(), cols.collect::<Result<Vec<_>, _>>().unwrap()));
                true
            })
            .unwrap();
        out
    }

    /// A metric's rollups of interval `iv` over all time, aggregators `ids` (indexes into the auto aggregators).
    fn read_whole(store: &Store, iv: &RollupInterval, ids: &[u8], metric: &[u8]) -> Vec<RollupSeries> {
        let family = RollupInterval::family(&iv.table);
        let all = (0, i64::MAX / 2);
        store.read_rollup(&family, iv, ids, metric, all.0, all.1, &mut Default::default(), |_| Ok(true)).unwrap()
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
        let got = read_whole(&store, iv, &[0, 1], metric.as_bytes());
        let (sum, count) = (&got[0].values[0], &got[0].values[1]);
        assert_eq!(sum, &vec![(1356998400000, Value::Int(1)), (1356998460000, Value::Int(5))]);
        assert_eq!(count, &vec![(1356998400000, Value::Int(1)), (1356998460000, Value::Int(2))]);
    }

    // issue 22 item 5: while a grid read takes rows not folded yet from their points, the daemon's folds of
    // passed hours wait between chunks; they go on once it ends, or at once when a query's fold of one metric
    // waits for the lock they hold. Full folds (periodic, and the last one at shutdown) do not wait.
    #[test]
    fn the_daemons_folds_wait_while_a_grid_read_reads_rows_not_folded_yet() {
        let dir = tempfile::tempdir().unwrap();
        // The folds of passed hours, not the flushes (which would fold these rows of 2013 themselves).
        let store = Arc::new(open(dir.path(), &[("rtsd.rollups.fold_on_flush", "false")]));
        let base = 1356998400i64;
        let mut batch = store.new_batch();
        for (h, host) in ["a", "b", "c"].iter().enumerate() {
            for i in 0..10i64 {
                store
                    .add_point(&mut batch, &point("m", base + i * 60, Value::Int(i + h as i64), &[("host", host)]))
                    .unwrap();
            }
        }
        // A point ten minutes into the next hour: the three rows of the first are of a passed hour.
        store.add_point(&mut batch, &point("n", base + 3600 + 600, Value::Int(1), &[("host", "a")])).unwrap();
        store.commit(&mut batch, false).unwrap();
        store.settle().unwrap();
        assert_eq!(store.closed_backlog(), 3);
        let reading = || store.rollups.grid_readers.fetch_add(1, Ordering::AcqRel);
        let done_reading = || store.rollups.grid_readers.fetch_sub(1, Ordering::AcqRel);
        reading();
        let passed = std::thread::spawn({
            let store = store.clone();
            move || store.fold_closed(512).unwrap()
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!passed.is_finished(), "the fold of passed hours waits for the grid read");
        // A full fold does not.
        let mut batch = store.new_batch();
        store.add_point(&mut batch, &point("o", base, Value::Int(1), &[("host", "a")])).unwrap();
        store.commit(&mut batch, false).unwrap();
        store.settle().unwrap();
        done_reading();
        assert_eq!(passed.join().unwrap(), 3);
        reading();
        assert_eq!(store.fold_flushed(None).unwrap(), 2, "o's row and n's");
        done_reading();
        assert_eq!(store.fold_backlog(), 0);
        // A query's fold of its metric is not held up by a waiting fold of passed hours.
        let mut batch = store.new_batch();
        for h in ["a", "b"] {
            store.add_point(&mut batch, &point("m", base + 3600, Value::Int(1), &[("host", h)])).unwrap();
        }
        store.add_point(&mut batch, &point("n", base + 7200 + 600, Value::Int(1), &[("host", "a")])).unwrap();
        store.commit(&mut batch, false).unwrap();
        store.settle().unwrap();
        reading();
        let passed = std::thread::spawn({
            let store = store.clone();
            move || store.fold_closed(512).unwrap()
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let started = std::time::Instant::now();
        store.fold_rollups(Some(metric.as_bytes())).unwrap();
        assert!(started.elapsed() < fold::STEP_ASIDE_MAX / 2, "the query's fold waited {:?}", started.elapsed());
        done_reading();
        passed.join().unwrap();
        assert_eq!(store.fold_backlog(), 1, "n's row of the newest hour");
    }

    // issue 22 item 5: a burst in time order leaves the daemon hours it has moved past, which it folds while the
    // burst goes on (`fold_closed`, by backlog size); a query right after the burst then folds only the newest
    // hour's rows, not the burst's, and reads what a fold of everything gives.
    #[test]
    fn passed_hours_are_folded_during_a_burst_and_a_query_folds_only_the_newest_hour() {
        let dir = tempfile::tempdir().unwrap();
        // With the flushes' own folds off (see `owned`), as when a burst's rows are not whole in the flushes.
        let store = open(dir.path(), &[("rtsd.rollups.fold_on_flush", "false")]);
        let base = 1356998400i64;
        let hosts = ["a", "b", "c", "d"];
        // Six hours of 4 series, a point every 5 minutes, written in time order and flushed every 50 minutes (as
        // the series table flushes every 400,000 points).
        for chunk in (0..6 * 12i64).collect::<Vec<_>>().chunks(10) {
            let mut batch = store.new_batch();
            for &i in chunk {
                for (h, host) in hosts.iter().enumerate() {
                    let p = point("m", base + i * 300, Value::Int(i * 10 + h as i64), &[("host", host)]);
                    store.add_point(&mut batch, &p).unwrap();
                }
            }
            store.commit(&mut batch, false).unwrap();
            store.flush_pending().unwrap();
        }
        // Newest point: 05:55. Hours 00..04 ended more than a minute before it: 5 hours x 4 series passed.
        assert_eq!(store.closed_backlog(), 20);
        assert_eq!(store.fold_closed(8).unwrap(), 8);
        assert_eq!(store.closed_backlog(), 12);
        while store.closed_backlog() > 0 {
            assert!(store.fold_closed(8).unwrap() > 0);
        }
        // What is left for the query: the newest hour of each series, and nothing of the passed hours.
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        assert_eq!(store.fold_rollups(Some(metric.as_bytes())).unwrap(), 4);
        let config = store.rollup_settings().config.clone().unwrap();
        let read = |store: &Store| {
            ["1m", "10m", "1h"]
                .iter()
                .map(|iv| {
                    let iv = config.interval(iv).unwrap();
                    let got = read_whole(store, iv, &[0, 1, 2, 3], metric.as_bytes());
                    got.into_iter().map(|s| s.values).collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        let got = read(&store);
        // The 1h buckets: per series and hour, 12 points i*10+h, i = 12*hour .. 12*hour+11.
        for (h, series) in got[2].iter().enumerate() {
            let want: Vec<(i64, Value)> = (0..6i64)
                .map(|hour| {
                    ((base + hour * 3600) * 1000, Value::Int((0..12).map(|k| (hour * 12 + k) * 10 + h as i64).sum()))
                })
                .collect();
            assert_eq!(series[0], want, "host {h}");
        }
        // A full fold (the periodic one, which also drops the stored marks) changes nothing.
        store.fold_rollups(None).unwrap();
        assert!(family_rows(&store, CF_ROLLUP_DIRTY).is_empty());
        assert_eq!(read(&store), got);
        // A late point into a passed hour is folded again, by the next fold of passed hours.
        let mut batch = store.new_batch();
        store.add_point(&mut batch, &point("m", base + 1, Value::Int(1000), &[("host", "a")])).unwrap();
        store.commit(&mut batch, false).unwrap();
        store.flush_pending().unwrap();
        assert_eq!(store.closed_backlog(), 1);
        assert_eq!(store.fold_closed(8).unwrap(), 1);
        assert_eq!(store.fold_rollups(Some(metric.as_bytes())).unwrap(), 0);
        let after = read(&store);
        assert_eq!(after[2][0][1][0], (base * 1000, Value::Int(13)), "count of host a's first hour");
    }

    // issue 22 item 5: rows a flush folds itself wait in a queue for their seal once their series moves on;
    // a writer that finds more than `SEALING_BOUND` queued seals a chunk before its commit returns, so a burst
    // that outruns the seal task is held back instead of queueing without bound.
    #[test]
    fn a_writer_seals_a_chunk_when_too_many_rows_wait_for_their_seal() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let base = 1356998400i64;
        let series = SEALING_BOUND + 100;
        let hosts: Vec<String> = (0..series).map(|h| format!("h{h:05}")).collect();
        for hour in 0..2i64 {
            let mut batch = store.new_batch();
            for host in &hosts {
                store
                    .add_point(&mut batch, &point("m", base + hour * 3600, Value::Int(hour), &[("host", host)]))
                    .unwrap();
            }
            store.commit(&mut batch, false).unwrap();
            store.flush_pending().unwrap();
        }
        // Every series moved on to its second hour: its first is queued (the first commit of the second hour
        // found nothing queued yet).
        assert_eq!(store.sealing_backlog(), series);
        assert_eq!(store.fold_backlog(), 0, "owned rows are not noted");
        let mut batch = store.new_batch();
        store.add_point(&mut batch, &point("n", base, Value::Int(1), &[("host", "x")])).unwrap();
        store.commit(&mut batch, false).unwrap();
        assert_eq!(store.sealing_backlog(), series - SEAL_CHUNK, "the writer sealed one chunk");
        store.seal_in_background(usize::MAX);
        assert_eq!(store.sealing_backlog(), 0);
        // The sealed hour reads as a fold of the raw rows writes it: each series' one point.
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let config = store.rollup_settings().config.clone().unwrap();
        let got = read_whole(&store, config.interval("1h").unwrap(), &[1], metric.as_bytes());
        assert_eq!(got.len(), series);
        assert!(got.iter().all(|s| s.values[0].first() == Some(&(base * 1000, Value::Int(1)))), "{:?}", got[0].values);
    }

    // issue 22 item 5: a query's fold of its metric (more rows than a chunk) runs on every core, chunk by chunk;
    // the rollups it writes are exactly those a full fold, one chunk after the other, writes.
    #[test]
    fn a_querys_fold_on_several_threads_writes_what_one_thread_writes() {
        let base = 1356998400i64;
        let write = |store: &Store| {
            // 300 series x 2 hours = 600 raw rows of points every 70 s (a bucket of one point, or two).
            let mut batch = store.new_batch();
            for host in 0..300 {
                let host = format!("h{host}");
                for i in 0..103i64 {
                    let v = if i % 3 == 0 { Value::Float(i as f32 / 4.0) } else { Value::Int(i * host.len() as i64) };
                    store.add_point(&mut batch, &point("m", base + i * 70, v, &[("host", &host)])).unwrap();
                }
            }
            store.commit(&mut batch, false).unwrap();
            store.flush_pending().unwrap();
        };
        let (one_dir, many_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (one, many) = (open(one_dir.path(), &[]), open(many_dir.path(), &[]));
        write(&one);
        write(&many);
        assert_eq!(one.fold_rollups(None).unwrap(), 600);
        let metric = many.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        assert_eq!(many.fold_rollups(Some(metric.as_bytes())).unwrap(), 600);
        let (want, got) = (auto_rows(&one), auto_rows(&many));
        assert_eq!(want.iter().map(Vec::len).collect::<Vec<_>>(), [600, 300, 300]);
        assert_eq!(got, want);
        // Nothing is left to fold, and a full fold after it changes nothing.
        assert_eq!(many.fold_rollups(Some(metric.as_bytes())).unwrap(), 0);
        many.fold_rollups(None).unwrap();
        assert_eq!(auto_rows(&many), want);
    }

    // issue 22 item 5: a query right after a burst waited for the daemon's full fold of the whole backlog (34 of the
    // 38 s of q1's first answer on a busy machine). A full fold in progress now folds the waiting query's metric
    // next and hands it the lock, and finishes the other metrics after.
    #[test]
    fn a_full_fold_in_progress_folds_a_waiting_querys_metric_next_and_lets_it_in() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path(), &[]));
        let base = 1356998400i64;
        // "busy": 300 series x 2 hours = 600 raw rows, sorted before "asked"'s 100 rows (its metric UID is lower).
        let mut batch = store.new_batch();
        for host in 0..300 {
            let host = format!("h{host}");
            for (ts, v) in [(base, 1), (base + 3600, 2)] {
                store.add_point(&mut batch, &point("busy", ts, Value::Int(v), &[("host", &host)])).unwrap();
            }
        }
        for host in 0..100 {
            let host = format!("h{host}");
            for (ts, v) in [(base, 3), (base + 60, 4)] {
                store.add_point(&mut batch, &point("asked", ts, Value::Int(v), &[("host", &host)])).unwrap();
            }
        }
        store.commit(&mut batch, false).unwrap();
        store.flush_pending().unwrap();
        let uid = |name| store.uids().get(rtsd_protocol::point::UidKind::Metric, name).unwrap().unwrap();
        let (busy, asked) = (uid("busy"), uid("asked"));

        // Before the full fold's first chunk a query's fold of "asked" starts and waits for the lock; the hook
        // then notes, for each later chunk, whether that fold had returned by then.
        let (query_done, returned_by) =
            (Arc::new(std::sync::atomic::AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let query: Arc<Mutex<Option<std::thread::JoinHandle<u64>>>> = Arc::default();
        let hook = {
            let (store, query, query_done, returned_by) =
                (Arc::downgrade(&store), query.clone(), query_done.clone(), returned_by.clone());
            let asked = asked.as_bytes().to_vec();
            move |done: usize| {
                let store = store.upgrade().unwrap();
                if done == 0 {
                    let (store2, query_done, asked) = (store.clone(), query_done.clone(), asked.clone());
                    *query.lock().unwrap() = Some(std::thread::spawn(move || {
                        let folded = store2.fold_rollups(Some(&asked)).unwrap();
                        query_done.store(true, Ordering::Release);
                        folded
                    }));
                    while store.rollups.wanted.lock().unwrap().is_empty() {
                        std::thread::yield_now();
                    }
                } else if done > fold::FOLD_CHUNK {
                    // Past the chunk of "busy" that was under way and "asked"'s rows: the query is done (waited
                    // for up to 10 s, so that a full fold which never lets it in fails here instead of hanging).
                    let waited = std::time::Instant::now();
                    while !query_done.load(Ordering::Acquire) && waited.elapsed() < std::time::Duration::from_secs(10) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                returned_by.lock().unwrap().push((done, query_done.load(Ordering::Acquire)));
            }
        };
        *store.rollups.before_chunk.lock().unwrap() = Some(Box::new(hook));
        assert_eq!(store.fold_rollups(None).unwrap(), 700);
        *store.rollups.before_chunk.lock().unwrap() = None;
        // The query's fold found its rows folded by the full fold (nothing left for it), and returned before the
        // full fold went on with "busy": chunks at 0 and 256 ("busy", the one under way when it asked), then
        // "asked"'s 100 rows, then the hand-off, then the rest of "busy" (600 - 256 rows).
        assert_eq!(query.lock().unwrap().take().unwrap().join().unwrap(), 0);
        assert_eq!(*returned_by.lock().unwrap(), vec![(0, false), (256, false), (356, true), (612, true)]);
        // Both metrics' rollups are complete.
        let config = store.rollup_settings().config.clone().unwrap();
        let iv = config.interval("1h").unwrap();
        let sums = |metric: &[u8]| -> Vec<Vec<(i64, Value)>> {
            read_whole(&store, iv, &[0], metric).into_iter().map(|s| s.values[0].clone()).collect()
        };
        let (busy_sums, asked_sums) = (sums(busy.as_bytes()), sums(asked.as_bytes()));
        assert_eq!(busy_sums.len(), 300);
        assert!(busy_sums
            .iter()
            .all(|s| s == &vec![(base * 1000, Value::Int(1)), ((base + 3600) * 1000, Value::Int(2))]));
        assert_eq!(asked_sums.len(), 100);
        assert!(asked_sums.iter().all(|s| s == &vec![(base * 1000, Value::Int(7))]));
    }

    // issue 22 items 2 and 6: rtsd's rollup rows are stored in decimal deltas where those are smaller. The fold
    // writes them plain (a put of a new row, never merged again) and the engine's rewrite re-encodes them, as it
    // would rows of a directory written before; every row reads back the same, bit for bit.
    #[test]
    fn rollup_rows_are_re_encoded_smaller_by_compactions_and_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let base = 1356998400i64;
        let mut batch = store.new_batch();
        for host in ["a", "b", "c"] {
            // A gauge with two decimals (a walk of up to 0.20 a step) for a and b, a counter for c.
            let mut hundredths = 5000i64;
            for i in 0..360i64 {
                hundredths += (i * 37 + host.len() as i64 * 11) % 41 - 20;
                let value = match host {
                    "c" => Value::Int(1_000_000 + i * 1000 + i % 7),
                    _ => Value::Double(format!("{}", hundredths as f64 / 100.0).parse().unwrap()),
                };
                store.add_point(&mut batch, &point("m", base + i * 10, value, &[("host", host)])).unwrap();
            }
        }
        store.commit(&mut batch, false).unwrap();
        store.flush_pending().unwrap();
        assert_eq!(store.fold_rollups(None).unwrap(), 3);
        let decoded = |rows: &[Cells]| -> Vec<String> {
            // Debug output shows each value's type and, for floats, its shortest exact digits.
            rows.iter().flatten().map(|(k, v)| format!("{k:?} {:?}", Slots::decode(v).unwrap())).collect()
        };
        let plain = auto_rows(&store);
        let m = store.engine.maintenance().unwrap();
        for family in AUTO_FAMILIES {
            m.flush_table(family).unwrap();
            m.compact_table(family, true).unwrap();
        }
        let stored = auto_rows(&store);
        assert_eq!(decoded(&stored), decoded(&plain));
        // The one-minute rows (a, b and c): sums of the gauge stay doubles (their rounding is no decimal's) and
        // the counter's stay four-byte integers (they grow by ~36,000 a minute: as deltas no smaller); mins and
        // maxes take decimal deltas; counts stay one byte each.
        let tags = |row: &[u8]| -> Vec<u8> {
            let view = rollup_rows::RowView::new(row).unwrap();
            (0..COLUMNS).map(|c| view.column(c).unwrap().tag()).collect()
        };
        let one_minute: Vec<Vec<u8>> = stored[0].iter().map(|(_, v)| tags(v)).collect();
        assert_eq!(one_minute, [[0x18, 1, 0x40, 0x40], [0x18, 1, 0x40, 0x40], [4, 1, 0x40, 0x40]]);
        let (plain_bytes, stored_bytes): (usize, usize) =
            (plain[0].iter().map(|(_, v)| v.len()).sum(), stored[0].iter().map(|(_, v)| v.len()).sum());
        assert!(stored_bytes * 10 < plain_bytes * 7, "{plain_bytes} -> {stored_bytes} bytes");
    }

    // issue 22 item 5: a grid read takes the rows it reads raw from the notes and from the folds' rows in
    // flight, without waiting for any fold. A full fold that has taken every noted row and written none of
    // them yet (and, on the way, stops before its last chunk) must leave them all listed.
    #[test]
    fn rows_taken_by_a_fold_and_not_written_stay_listed_as_unfolded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path(), &[]));
        let base = 1356998400i64;
        let mut batch = store.new_batch();
        for host in 0..300 {
            let host = format!("h{host}");
            store.add_point(&mut batch, &point("m", base, Value::Int(1), &[("host", &host)])).unwrap();
        }
        store.commit(&mut batch, false).unwrap();
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let metric = metric.as_bytes().to_vec();
        let noted = store.unfolded_rows(&metric).unwrap().unwrap().rows;
        assert_eq!(noted.len(), 300);
        // What a grid read would list before each chunk of the full fold: all 300, then the 44 not written.
        // (rows folded so far, rows listed or None)
        type Listed = Vec<(usize, Option<usize>)>;
        let listed: Arc<Mutex<Listed>> = Arc::default();
        let hook = {
            let (store, listed, metric) = (Arc::downgrade(&store), listed.clone(), metric.clone());
            move |done: usize| {
                let store = store.upgrade().unwrap();
                let rows = store.unfolded_rows(&metric).unwrap();
                listed.lock().unwrap().push((done, rows.map(|r| r.rows.len())));
            }
        };
        *store.rollups.before_chunk.lock().unwrap() = Some(Box::new(hook));
        assert_eq!(store.fold_rollups(None).unwrap(), 300);
        *store.rollups.before_chunk.lock().unwrap() = None;
        assert_eq!(*listed.lock().unwrap(), vec![(0, Some(300)), (256, Some(44))]);
        assert_eq!(store.unfolded_rows(&metric).unwrap(), Some(Default::default()));
        assert!(store.rollups.in_flight.lock().unwrap().is_empty());

        // A fold that stops before writing what it took (here: a shutdown) lets its rows go and leaves them to a
        // fold that reads the stored marks: until then a grid read folds instead of listing them.
        let mut batch = store.new_batch();
        store.add_point(&mut batch, &point("m", base + 60, Value::Int(2), &[("host", "h0")])).unwrap();
        store.commit(&mut batch, false).unwrap();
        store.abandon_folds();
        assert_eq!(store.fold_rollups(None).unwrap(), 0);
        assert!(store.rollups.in_flight.lock().unwrap().is_empty());
        assert_eq!(store.unfolded_rows(&metric).unwrap(), None);
    }

    // A fold of one metric (a cell read folds first) also folds the metric's rows another fold has taken and
    // not written yet: a full fold that let go of the lock to hand it to a waiting query of some other metric
    // holds them, and they are in no note (review of 86659fe).
    #[test]
    fn a_fold_of_one_metric_folds_its_rows_another_fold_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let base = 1356998400i64;
        let put = |ts: i64, v: i64| {
            let mut batch = store.new_batch();
            store.add_point(&mut batch, &point("m", ts, Value::Int(v), &[("host", "a")])).unwrap();
            store.commit(&mut batch, false).unwrap();
        };
        put(base, 1);
        store.fold_rollups(None).unwrap();
        // A late point, whose note a (simulated) full fold takes and holds without writing it.
        put(base + 60, 2);
        store.settle().unwrap();
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let metric = metric.as_bytes();
        let held = store.rollups.pending.lock().unwrap().take(Some(metric), store.layout.metric_at());
        assert_eq!(held.len(), 1);
        store.take_in_flight(held.keys());
        // And the row written again meanwhile: its new note covers only the new point's buckets.
        put(base + 120, 4);
        store.settle().unwrap();
        assert_eq!(store.fold_rollups(Some(metric)).unwrap(), 1);
        let config = store.rollup_settings().config.clone().unwrap();
        let sums = |interval| -> Vec<_> {
            read_whole(&store, config.interval(interval).unwrap(), &[0], metric)
                .into_iter()
                .map(|s| s.values[0].clone())
                .collect()
        };
        assert_eq!(sums("1h"), vec![vec![(base * 1000, Value::Int(7))]]);
        let minutes = [(base, 1), (base + 60, 2), (base + 120, 4)];
        assert_eq!(sums("1m"), vec![minutes.map(|(t, v)| (t * 1000, Value::Int(v))).to_vec()]);
        // The holder lets go once it has written: nothing is left in flight.
        store.land_in_flight(held.keys(), true);
        assert!(store.rollups.in_flight.lock().unwrap().is_empty());
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
            let got = read_whole(&store, iv, &[0, 1], metric.as_bytes());
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
            let mut rows = Vec::new();
            store
                .scan_raw(&auto, b"", |k, v| {
                    rows.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap();
            for (k, v) in &rows {
                let (k, v) = (k.as_slice(), v.as_slice());
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
                batch.merge(&family, k, &cells);
                batch.delete(&auto, k);
            }
            store.engine.write(batch, Durability::Logged).unwrap();
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
            let whole = read_whole(&store, iv, &[0, 1, 2, 3], metric.as_bytes());
            let tsuids: Vec<Tsuid> = whole.iter().map(|s| s.series.tsuid.clone()).collect();
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
            let raw: Vec<codec::TimedValue> = sorted.iter().map(|&(ts, v)| p(ts * 1000, v)).collect();
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
            let read = read_whole(&store, iv, &[0, 1, 2, 3], metric.as_bytes());
            let model = model_buckets(&writes, i64::from(iv.interval_secs));
            let got: Vec<(i64, f64, i64, f64, f64)> = (0..read[0].values[0].len())
                .map(|i| {
                    let v = &read[0].values;
                    let count = match v[1][i].1 {
                        Value::Int(c) => c,
                        other => panic!("count {other:?}"),
                    };
                    (v[0][i].0, v[0][i].1.as_f64(), count, v[2][i].1.as_f64(), v[3][i].1.as_f64())
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
            let got = read_whole(&store, iv, &[1], metric().as_bytes());
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
        // Several intervals in one pass: each as it alone gives it.
        let each = fold::buckets_each(&pts, [60, 3600]);
        assert_eq!(each[0], b);
        assert_eq!(
            each[1],
            [Bucket { start: 0, count: 4, sum: Value::Double(6.5), min: Value::Int(-2), max: Value::Int(5) }]
        );
    }

    /// The edges of a bucket's sum: it starts from zero, as the query engine's sum does (a lone -0.0 sums to
    /// 0.0; min and max keep -0.0), and an integer sum that overflows becomes the double sum, for that bucket
    /// only.
    #[test]
    fn bucket_sums_start_from_zero_and_leave_integers_on_overflow() {
        let b = buckets(&[p(0, Value::Double(-0.0))], 60);
        assert_eq!(b.len(), 1);
        assert!(matches!(b[0].sum, Value::Double(s) if s.to_bits() == 0.0f64.to_bits()), "{:?}", b[0].sum);
        assert!(matches!(b[0].min, Value::Double(m) if m.to_bits() == (-0.0f64).to_bits()), "{:?}", b[0].min);
        let b = buckets(
            &[p(0, Value::Int(i64::MAX)), p(1_000, Value::Int(1)), p(2_000, Value::Int(-1)), p(60_000, Value::Int(2))],
            60,
        );
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].count, b[0].sum), (3, Value::Double(i64::MAX as f64 + 1.0 - 1.0)));
        assert_eq!((b[0].min, b[0].max), (Value::Int(-1), Value::Int(i64::MAX)));
        assert_eq!(b[1].sum, Value::Int(2));
    }

    /// The model: the last value written at each instant (fix_duplicates), bucketed independently of the store.
    fn model_buckets(writes: &[(i64, Value)], interval_secs: i64) -> BTreeMap<i64, (i64, f64, f64, f64)> {
        let mut last: BTreeMap<i64, Value> = BTreeMap::new();
        for (ts, v) in writes {
            last.insert(*ts, *v);
        }
        let mut out: BTreeMap<i64, (i64, f64, f64, f64)> = BTreeMap::new();
        for (ts, v) in last {
            let d = v.as_f64();
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
        // The bucket builder's two ways of taking a new min or max (selects for narrow buckets, branches for
        // wide ones) give the same buckets, value types and first-of-equal picks included, for any width.
        #[test]
        fn buckets_are_the_same_built_with_selects_or_branches(
            points in prop::collection::vec((0i64..3600, prop_oneof![
                (-5i64..5).prop_map(Value::Int),
                (-5i32..5).prop_map(|v| Value::Float(v as f32 / 2.0)),
                prop_oneof![Just(f64::NAN), Just(-0.0), Just(0.0), (-5i32..5).prop_map(f64::from)].prop_map(Value::Double),
            ]), 0..400),
            secs in prop_oneof![Just(1u32), Just(60), Just(600), Just(3600), 1u32..4000],
        ) {
            let mut points: Vec<codec::TimedValue> =
                points.into_iter().map(|(s, value)| codec::TimedValue { timestamp_ms: s * 1000, value }).collect();
            points.sort_by_key(|p| p.timestamp_ms);
            let with_selects = fold::build_buckets::<true>(&points, secs);
            let with_branches = fold::build_buckets::<false>(&points, secs);
            prop_assert_eq!(format!("{with_selects:?}"), format!("{with_branches:?}"));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        // Rollup = raw aggregation for random data with late points, out-of-order points and duplicates that
        // overwrite earlier values, whatever the interleaving of writes and folds (issue 6).
        #[test]
        fn rollups_equal_the_aggregation_of_the_raw_points(
            writes in prop::collection::vec((0i64..3 * 3600, value_strategy(), any::<bool>()), 1..120),
            folds in prop::collection::vec((0usize..120, 0u8..3), 0..6),
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
                for (at, kind) in &folds {
                    if *at == i {
                        // A query's fold of one metric, the background's full fold, or (issue 22 item 5) the
                        // background's fold of passed hours, a few rows at a time.
                        if *kind == 2 {
                            store.settle().unwrap();
                            store.fold_closed(2).unwrap();
                            continue;
                        }
                        let m = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap();
                        let m = m.filter(|_| *kind == 1);
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
                    let read = read_whole(store, iv, &[0, 1, 2, 3], metric.as_bytes());
                    prop_assert_eq!(read.len(), 1);
                    let model = model_buckets(&writes, i64::from(iv.interval_secs));
                    let got = &read[0].values;
                    prop_assert_eq!(got[1].len(), model.len());
                    for (n, (start, (count, sum, min, max))) in model.iter().enumerate() {
                        let at = format!("{interval} bucket {n}: {got:?}");
                        prop_assert_eq!(got[0][n].0, *start, "{}", at);
                        prop_assert_eq!(got[0][n].1.as_f64(), *sum, "{}", at);
                        prop_assert_eq!(got[1][n].1, Value::Int(*count), "{}", at);
                        prop_assert_eq!(got[2][n].1.as_f64(), *min, "{}", at);
                        prop_assert_eq!(got[3][n].1.as_f64(), *max, "{}", at);
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
