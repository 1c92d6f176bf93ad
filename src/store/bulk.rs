//! Bulk loads (`rtsd import`): rows built whole in memory and handed to the engine as sorted table files
//! ([`super::engine::TableFiles`], RocksDB's), or as ordinary writes to an engine that takes no files.
//!
//! The daemon's write path ends with every row merged (OpenTSDB's compaction, [`codec::merge_row`]) and, once
//! quiet, packed, by RocksDB's flushes and compactions; on the way each row costs memtable inserts, a
//! write-ahead log record and the merge itself. A bulk load knows every point of a row before it writes it, so
//! it builds the row's final value directly ([`codec::FreshRow::merged`], packed as the merge operator would pack
//! it) and writes the rows of a batch, sorted, into table files that RocksDB takes in whole
//! (`ingest_external_file`): no memtable, no log, no later merge. A row that may already be stored (a data
//! directory with data, or a second batch of the same load) is written as a merge operand holding the new
//! points instead, which RocksDB merges with what is stored exactly as it merges a daemon's writes.
//!
//! Beside the rows, each batch writes what the daemon's series-table flush writes per row
//! ([`super::Store::flush_pending`]): the series index (newest hour, postings, first-seen time, the TSMeta point
//! counter, see [`super::series`]) and, with automatic rollups on, a dirty mark per row (whole row: the daemon
//! folds it after its next start), each as a table file of its family. A batch's files are ingested data first,
//! then index, then marks; an import interrupted in between is completed by running it again (points land on
//! their cells, so nothing is duplicated).
use std::collections::HashMap;
use std::path::PathBuf;

use rtsd_protocol::codec::{self, FreshRow, Value};

use super::engine::{Durability, Engine, ReadHints, TableFileWriter, WriteBatch};
use super::{rollup, series, SeriesKey, Store, StoreError, CF_DATA, CF_SERIES};

// How a load's data rows are written (see `engine::rocks`'s bulk table files): the data table's options (merge
// operator, compression by level), with zstd at level 1 instead of 3 and 16 KB blocks instead of 4 KB. An
// ingested file goes to the bottommost level and stays as written until something overlaps it, so these choices
// are what an import leaves on disk. On data set A (10 M points, 100 k rows) they took the files from 346 to ~230
// ms and the directory from 44.7 to 36.8 MB: level 1 compresses these rows as small as level 3 does, and larger
// blocks share zstd's tables and repeated qualifiers among more rows.

/// Where a load's table files are made before RocksDB takes them (inside the data directory: same file system,
/// so ingesting moves them instead of copying). Left-overs of an interrupted load are removed at the next.
const BULK_DIR: &str = "bulk-load";

/// What a row costs in a load's memory count besides its points' buffer (its entry and bookkeeping).
const ROW_OVERHEAD_BYTES: usize = 64;

/// Points of a bulk load not yet written, grouped by row.
pub struct BulkLoad {
    /// Series by row-key template, so that a series reached through different names (tag order) is one.
    ids: HashMap<Vec<u8>, u32>,
    series: Vec<SeriesState>,
    /// Rows a series left for another hour, in the order they were left; a row is reached again (a second
    /// entry) when its series goes back to its hour. Each series' current row is in its [`SeriesState`].
    rows: Vec<(u32, u32, FreshRow)>,
    points: u64,
    bytes: usize,
    /// Whether a row of this load may already be stored: the data table was not empty when the load began, or a
    /// batch was written.
    may_exist: bool,
    dir: PathBuf,
    files: u64,
}

#[derive(Debug, Clone)]
struct SeriesState {
    template: Vec<u8>,
    /// The series' current row (kept here: the next point of a series finds it without another lookup) and
    /// its hour; empty when the series has no point in this batch yet.
    row: FreshRow,
    hour: u32,
    /// The newest hour and the points of this batch.
    newest: u32,
    points: u64,
}

impl BulkLoad {
    /// The load's number of a resolved series (see [`Store::series_key`]).
    pub fn series(&mut self, key: &SeriesKey) -> u32 {
        if let Some(&id) = self.ids.get(key.template.as_slice()) {
            return id;
        }
        let id = self.series.len() as u32;
        let template = key.template.to_vec();
        self.series.push(SeriesState { template, row: FreshRow::default(), hour: 0, newest: 0, points: 0 });
        self.ids.insert(key.template.to_vec(), id);
        id
    }

    /// Adds a point of series `id` (from [`BulkLoad::series`]). Points of one cell keep their order: the later
    /// one wins, as with puts.
    #[inline]
    pub fn add(&mut self, id: u32, timestamp: i64, value: &Value) {
        let s = &mut self.series[id as usize];
        let hour = codec::base_time(timestamp);
        if s.row.is_empty() || s.hour != hour {
            if s.points == 0 || hour > s.newest {
                s.newest = hour;
            }
            // Room for as many points as the series' last row had (few reallocations as rows fill up).
            let room = if s.row.is_empty() { 16 } else { s.row.points() as usize };
            let left = std::mem::replace(&mut s.row, FreshRow::with_capacity(room));
            if !left.is_empty() {
                self.rows.push((id, s.hour, left));
            }
            s.hour = hour;
            self.bytes += ROW_OVERHEAD_BYTES + s.row.capacity();
        }
        s.points += 1;
        let before = s.row.capacity();
        s.row.push(timestamp, value);
        self.bytes += s.row.capacity() - before;
        self.points += 1;
    }

    /// Asks the CPU to fetch what [`BulkLoad::add`] reads of series `id` (its state) into the cache.
    #[inline]
    pub fn prefetch_series(&self, id: u32) {
        if let Some(s) = self.series.get(id as usize) {
            // A state spans two cache lines.
            let at = s as *const SeriesState as *const u8;
            prefetch(at);
            prefetch(at.wrapping_add(std::mem::size_of::<SeriesState>() - 1));
        }
    }

    /// Asks the CPU to fetch the ends of series `id`'s current row, where [`BulkLoad::add`] writes its next point.
    #[inline]
    pub fn prefetch_row(&self, id: u32) {
        if let Some(s) = self.series.get(id as usize) {
            let (q, v) = s.row.ends();
            prefetch(q);
            prefetch(v);
        }
    }

    /// Points added since the last write.
    pub fn len(&self) -> u64 {
        self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Bytes of points and rows buffered (for a caller's memory bound).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[inline]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl Drop for BulkLoad {
    fn drop(&mut self) {
        // Files of a batch that was not ingested are of no use to anyone.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// For an engine that takes no table files: the "file" is a batch written when it is finished.
struct BatchSink<'e> {
    engine: &'e dyn Engine,
    table: String,
    batch: WriteBatch,
}

impl TableFileWriter for BatchSink<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.batch.put(&self.table, key, value);
        Ok(())
    }

    fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<(), StoreError> {
        self.batch.merge(&self.table, key, operand);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Option<PathBuf>, StoreError> {
        if !self.batch.is_empty() {
            self.engine.write(self.batch, Durability::Synced)?;
        }
        Ok(None)
    }
}

impl Store {
    /// Starts a bulk load. Only for a store no daemon serves (the tools' writable open).
    pub fn bulk_load(&self) -> Result<BulkLoad, StoreError> {
        let dir = self.path.join(BULK_DIR);
        let io = |e: std::io::Error| StoreError::Corrupt(format!("bulk load directory {}: {e}", dir.display()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io)?;
        }
        std::fs::create_dir_all(&dir).map_err(io)?;
        let may_exist = match self.engine.cursor(CF_DATA, ReadHints::default()) {
            Some(mut iter) => {
                iter.seek(b"");
                iter.status()?;
                iter.valid()
            }
            None => false,
        };
        Ok(BulkLoad {
            ids: HashMap::new(),
            series: Vec::new(),
            rows: Vec::new(),
            points: 0,
            bytes: 0,
            may_exist,
            dir,
            files: 0,
        })
    }

    /// Writes the points added to `load` so far (see the module comment) and returns how many; the load goes on
    /// with the next points. Durable when it returns: the table files are synced by RocksDB, and the UIDs they
    /// refer to are made durable first.
    pub fn bulk_write(&self, load: &mut BulkLoad) -> Result<u64, StoreError> {
        // A series' current row comes after every row it left: a row reached twice keeps its points in order.
        let mut rows = std::mem::take(&mut load.rows);
        for (id, s) in load.series.iter_mut().enumerate() {
            if !s.row.is_empty() {
                rows.push((id as u32, s.hour, std::mem::take(&mut s.row)));
            }
        }
        self.bulk_write_rows(load, rows)
    }

    /// Writes only the rows the load's series have left for a later hour, and returns their points; each
    /// series' current row stays in memory. In input ordered by time (exports, collectors' logs) a row left is
    /// complete, so a load that cuts its batches here writes every row once, whole (packed if its hour has
    /// closed), where cutting through the current rows leaves each of them in two pieces that reads then merge
    /// until a compaction does (bench: 50 M points over two hours, 3.78 bytes/point against 3.53 for the same
    /// points sent to the daemon). A row the input comes back to later is written again as a merge operand, as
    /// in any second batch.
    pub fn bulk_write_left(&self, load: &mut BulkLoad) -> Result<u64, StoreError> {
        let rows = std::mem::take(&mut load.rows);
        self.bulk_write_rows(load, rows)
    }

    fn bulk_write_rows(&self, load: &mut BulkLoad, mut rows: Vec<(u32, u32, FreshRow)>) -> Result<u64, StoreError> {
        let written: u64 = rows.iter().map(|(_, _, row)| u64::from(row.points())).sum();
        if written == 0 {
            return Ok(0);
        }
        // Rows written past the series table: no flush may go on folding a row from its own copy.
        self.give_back_owned();
        // The rows refer to UIDs assigned by ordinary (logged) writes: those must survive a crash whenever the
        // rows do.
        let started = std::time::Instant::now();
        self.engine.sync()?;
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let now = super::unix_now();
        // Sorted by row key; a row reached twice keeps its entries in the order they were written to.
        let mut keys: Vec<(Vec<u8>, u32)> = rows
            .iter()
            .enumerate()
            .map(|(i, (id, hour, _))| {
                let mut key = load.series[*id as usize].template.clone();
                key[sw + mw..sw + mw + 4].copy_from_slice(&hour.to_be_bytes());
                (key, i as u32)
            })
            .collect();
        keys.sort_unstable();
        // Rows reached twice become one: later entries appended to the first.
        let mut order: Vec<(Vec<u8>, u32)> = Vec::with_capacity(keys.len());
        for (key, i) in keys {
            match order.last() {
                Some((last, first)) if *last == key => {
                    let later = std::mem::take(&mut rows[i as usize].2);
                    rows[*first as usize].2.extend(&later);
                }
                _ => order.push((key, i)),
            }
        }
        let batch = load.files;
        load.files += 1;
        let path = |name: &str, part: usize| load.dir.join(format!("{batch:06}-{name}-{part}.sst"));
        let may_exist = load.may_exist;
        let fix = self.fix_duplicates;
        // The rows' table files, in two halves of the key range built on two threads (import machines have
        // cores to spare once the input is parsed), and meanwhile the index and the marks.
        let halves = if order.len() >= 1024 { 2 } else { 1 };
        let per = order.len().div_ceil(halves);
        let rows_ref = &rows;
        let (data_files, index_file, marks_file) = std::thread::scope(|scope| {
            let mut workers = Vec::new();
            for (part, chunk) in order.chunks(per).enumerate() {
                let path = path("data", part);
                workers.push(scope.spawn(move || -> Result<Option<PathBuf>, StoreError> {
                    let mut sst = self.table_file(CF_DATA, &path)?;
                    let mut value = Vec::new();
                    for (key, i) in chunk {
                        let row = &rows_ref[*i as usize].2;
                        value.clear();
                        if may_exist && self.engine.table_files().is_none_or(|f| f.may_exist(CF_DATA, key)) {
                            // Merged with what is stored, as the daemon's writes are.
                            row.columns(&mut value);
                            sst.merge(key, &value)?;
                        } else {
                            // Packed as a compaction would store it (see `tables::merge_data_row`).
                            let merged = row.merged(fix);
                            let hour = codec::row_base_time(key, sw, mw);
                            let quiet = super::tables::row_quiet(hour, &merged, now * 1000);
                            let packed = if quiet { codec::pack_row(&merged) } else { None };
                            sst.put(key, packed.as_deref().unwrap_or(&merged))?;
                        }
                    }
                    sst.finish()
                }));
            }
            let index = self.bulk_index(&load.series, &path("series", 0), now);
            let marks = self.bulk_marks(&order, rows_ref, &path("marks", 0));
            let data: Result<Vec<PathBuf>, StoreError> = workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err(StoreError::Corrupt("a bulk writer panicked".into()))))
                .filter_map(Result::transpose)
                .collect();
            (data, index, marks)
        });
        let (data_files, index_file, marks_file) = (data_files?, index_file?, marks_file?);
        let built = started.elapsed();
        if let Some(files) = self.engine.table_files() {
            if !data_files.is_empty() {
                files.ingest(CF_DATA, data_files)?;
            }
            if let Some(file) = index_file {
                files.ingest(CF_SERIES, vec![file])?;
            }
            if let Some(file) = marks_file {
                files.ingest(rollup::CF_ROLLUP_DIRTY, vec![file])?;
            }
        }
        tracing::debug!(
            rows = order.len(),
            points = written,
            files_ms = built.as_millis() as u64,
            ingest_ms = (started.elapsed() - built).as_millis() as u64,
            "bulk batch written"
        );
        // What stays in memory: the current rows a partial write left.
        load.points -= written;
        load.bytes =
            load.series.iter().filter(|s| !s.row.is_empty()).map(|s| ROW_OVERHEAD_BYTES + s.row.capacity()).sum();
        load.may_exist = true;
        for s in &mut load.series {
            s.points = 0;
        }
        Ok(written)
    }

    /// The series index entries of the series that got points in this batch, as one table file.
    fn bulk_index(
        &self,
        series: &[SeriesState],
        path: &std::path::Path,
        now: i64,
    ) -> Result<Option<PathBuf>, StoreError> {
        let mut touched: Vec<series::BulkSeries> = series
            .iter()
            .filter(|s| s.points > 0)
            .map(|s| series::BulkSeries {
                tsuid: self.layout.tsuid_of_row(&s.template).into_bytes(),
                hour: s.newest,
                points: s.points,
            })
            .collect();
        let mut sst = self.table_file(CF_SERIES, path)?;
        series::bulk_entries(&self.layout, &mut touched, now as u32, |key, merge, value| {
            if merge {
                sst.merge(key, value)
            } else {
                sst.put(key, value)
            }
        })?;
        sst.finish()
    }

    /// The rollup dirty marks of the rows (whole rows: the daemon's next fold recomputes them), as one table
    /// file; `None` without automatic rollups.
    fn bulk_marks(
        &self,
        order: &[(Vec<u8>, u32)],
        rows: &[(u32, u32, FreshRow)],
        path: &std::path::Path,
    ) -> Result<Option<PathBuf>, StoreError> {
        let Some(generation) = self.bulk_mark_generation() else { return Ok(None) };
        let mut sst = self.table_file(rollup::CF_ROLLUP_DIRTY, path)?;
        let mut key = Vec::with_capacity(64);
        for (row, i) in order {
            rollup::mark_key(generation, row, &mut key);
            sst.merge(&key, &i64::from(rows[*i as usize].2.points()).to_le_bytes())?;
        }
        sst.finish()
    }

    /// A sorted file of `table` at `path` for the engine to take whole, or for an engine that takes no files a
    /// batch written when finished (then nothing is left to ingest). Data files are tuned for a load.
    fn table_file(&self, table: &str, path: &std::path::Path) -> Result<Box<dyn TableFileWriter + '_>, StoreError> {
        match self.engine.table_files() {
            Some(files) => files.writer(table, path, table == CF_DATA),
            None => Ok(Box::new(BatchSink {
                engine: self.engine.as_ref(),
                table: table.to_string(),
                batch: WriteBatch::default(),
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::metrics::Metrics;
    use rtsd_protocol::point::DataPoint;
    use std::borrow::Cow;
    use std::sync::Arc;

    fn open(dir: &std::path::Path) -> Store {
        // fix_duplicates: a cell written again after its row was compacted (in an earlier batch, or flushed by the
        // daemon) is a variant duplicate, which only this setting resolves by write order, as within one batch.
        let config =
            Config::for_data_dir(dir, &[("tsd.rollups.enable", "true"), ("tsd.storage.fix_duplicates", "true")])
                .unwrap();
        Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
    }

    /// Three series over three closed hours, out of order, then overwrites of some of their cells.
    fn points() -> Vec<(String, i64, Value)> {
        let mut out = Vec::new();
        for i in 0..900i64 {
            let host = format!("h{}", i % 3);
            let ts = 1356998400 + (i * 37) % 10800;
            let value = if i % 5 == 0 { Value::Double(i as f64 / 4.0) } else { Value::Int(i % 7) };
            out.push((host, ts, value));
        }
        // Later points of cells written before (same type and width: the later one wins).
        for j in (1..900).step_by(29).filter(|j| j % 5 != 0) {
            let (host, ts, _) = out[j].clone();
            out.push((host, ts, Value::Int(100 + j as i64 % 7)));
        }
        out
    }

    /// A data row as it reads: the compacted column, whether it is stored packed (a write of a closed hour, a
    /// compaction) or comes out of a read's merge (never packed: the reader decodes it at once).
    fn as_read(row: &[u8]) -> Vec<u8> {
        codec::expand_row(row).unwrap().into_owned()
    }

    fn stored(s: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut rows = Vec::new();
        for cf in [CF_DATA, CF_SERIES, rollup::CF_ROLLUP_DIRTY] {
            s.scan_raw(cf, &[], |k, v| {
                // First-seen times and counters' times are wall-clock.
                if cf == CF_DATA {
                    rows.push((k.to_vec(), as_read(v)));
                } else if cf != CF_SERIES || k[0] == b'S' || k[0] == b'T' {
                    rows.push((k.to_vec(), v.to_vec()));
                }
                true
            })
            .unwrap();
        }
        rows
    }

    fn load(s: &Store, points: &[(String, i64, Value)], batches: usize) {
        let mut load = s.bulk_load().unwrap();
        let per = points.len().div_ceil(batches);
        for chunk in points.chunks(per) {
            for (host, ts, value) in chunk {
                let tags = vec![(Cow::Borrowed("host"), Cow::Borrowed(host.as_str()))];
                let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: *ts, value: *value, tags: tags.into() };
                let id = load.series(&s.series_key(&p).unwrap());
                load.add(id, *ts, value);
            }
            assert_eq!(s.bulk_write(&mut load).unwrap(), chunk.len() as u64);
        }
    }

    // A load written in several batches (rows reached again become merge operands over the rows already
    // ingested) stores what one batch stores, and what the daemon's writes of the same points store.
    #[test]
    fn batches_merge_into_rows_already_written_as_one_batch_and_the_daemon_do() {
        let dir = tempfile::tempdir().unwrap();
        let points = points();
        let one = open(&dir.path().join("one"));
        load(&one, &points, 1);
        let many = open(&dir.path().join("many"));
        load(&many, &points, 7);
        assert_eq!(stored(&many), stored(&one));

        let daemon = open(&dir.path().join("daemon"));
        let mut batch = daemon.new_batch();
        for (host, ts, value) in &points {
            let tags = vec![(Cow::Borrowed("host"), Cow::Borrowed(host.as_str()))];
            let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: *ts, value: *value, tags: tags.into() };
            daemon.add_point(&mut batch, &p).unwrap();
        }
        daemon.commit(&mut batch, false).unwrap();
        daemon.settle().unwrap();
        let rows = |s: &Store| -> Vec<(Vec<u8>, Vec<u8>)> {
            let mut rows = Vec::new();
            s.scan_raw(CF_DATA, &[], |k, v| {
                rows.push((k.to_vec(), v.to_vec()));
                true
            })
            .unwrap();
            rows
        };
        let rows_as_read = |rows: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<(Vec<u8>, Vec<u8>)> {
            rows.into_iter().map(|(k, v)| (k, as_read(&v))).collect()
        };
        assert_eq!(rows_as_read(rows(&one)), rows_as_read(rows(&daemon)));
        assert!(rows(&one).iter().all(|(_, v)| codec::is_packed(v)), "closed hours are packed");
        // Once compacted, the daemon's rows are stored as the load wrote them, byte for byte.
        daemon.engine.maintenance().unwrap().flush_table(CF_DATA).unwrap();
        daemon.compact_written().unwrap();
        assert_eq!(rows(&one), rows(&daemon));
    }

    // A load cut at the rows its series have left (time-ordered input, three closed hours) writes each row once,
    // whole: every row reads packed, as no merge assembles it; and it stores what one batch stores.
    #[test]
    fn rows_left_are_written_whole_and_the_current_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut points: Vec<(String, i64, Value)> = Vec::new();
        for step in 0..(3 * 3600 / 60) {
            for host in ["h0", "h1", "h2"] {
                points.push((host.to_string(), 1356998400 + step * 60, Value::Int(step % 11)));
            }
        }
        let one = open(&dir.path().join("one"));
        load(&one, &points, 1);
        let cut = open(&dir.path().join("cut"));
        let mut load = cut.bulk_load().unwrap();
        let mut written = Vec::new();
        for (n, (host, ts, value)) in points.iter().enumerate() {
            let tags = vec![(Cow::Borrowed("host"), Cow::Borrowed(host.as_str()))];
            let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: *ts, value: *value, tags: tags.into() };
            let id = load.series(&cut.series_key(&p).unwrap());
            load.add(id, *ts, value);
            // Mid-hour cuts: a quarter past each hour, and once more before a row was left at all.
            if n % 180 == 45 || n == 10 {
                written.push(cut.bulk_write_left(&mut load).unwrap());
            }
        }
        // The first cut came before any series left a row; each later one wrote the three rows of the hour
        // before (60 points each); what is left in memory is the last hour's points.
        assert_eq!(written, vec![0, 0, 180, 180]);
        assert_eq!(load.len(), 180);
        assert_eq!(cut.bulk_write(&mut load).unwrap(), 180);
        assert!(load.is_empty());
        assert_eq!(stored(&cut), stored(&one));
        let mut packed = 0;
        cut.scan_raw(CF_DATA, &[], |_, v| {
            assert!(codec::is_packed(v), "a row assembled by a merge reads unpacked");
            packed += 1;
            true
        })
        .unwrap();
        assert_eq!(packed, 9);
    }
}
