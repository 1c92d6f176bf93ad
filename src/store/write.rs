//! The write path's end: points into a batch, the batch into the series log and the engine, the series table
//! flushed into rows (see [`super::pending`]).
use super::*;

/// Past this many points in the series table a committing writer flushes it itself (back-pressure that bounds
/// its memory: some 40 MB).
pub(super) const MAX_PENDING_POINTS: u64 = 3_000_000;

/// Rows per write of a series-table flush (see [`Store::flush_pending`]).
pub(super) const FLUSH_SLICE_ROWS: usize = 8192;

/// Points on their way into one atomic RocksDB write.
pub struct PointBatch {
    /// Everything but raw data points (rollup points, Chukwa rows, series postings of rollup points).
    pub(super) batch: WriteBatch,
    /// The raw data points, logged as one record and then added to the in-memory series table.
    pub(super) log: pending::PointLog,
    /// Scratch space of the series table's insert.
    pub(super) order: pending::InsertOrder,
    pub(super) points: u64,
    /// Rollup and pre-aggregate points (not data points: OpenTSDB counts them apart).
    pub(super) rollup_points: u64,
    /// The raw rows changed, for automatic rollups (see [`rollup`]); empty for points of the series table,
    /// whose marks are written when the table is flushed.
    pub(super) marks: rollup::Marks,
    /// Series-index entries `batch` writes (postings of rollup points), remembered once it is durable.
    pub(super) noted: series::Noted,
    /// The raw table's retention cut when the batch's first point arrived (`i64::MIN`: kept forever), and the
    /// points older than it: stored, as an HBase TTL would accept them, but no read returns them.
    pub(super) raw_cut_ms: i64,
    pub(super) expired: u64,
}

impl PointBatch {
    /// Forgets everything added: the batch was not (and will not be) written.
    pub(super) fn discard(&mut self) {
        self.batch.clear();
        self.log.clear();
        self.points = 0;
        self.rollup_points = 0;
        self.marks = Default::default();
        self.noted.clear();
        self.expired = 0;
    }

    pub fn len(&self) -> u64 {
        self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0 && self.rollup_points == 0
    }

    /// How many of the pending points are rollup or pre-aggregate points (not in [`PointBatch::len`]).
    pub fn rollup_points(&self) -> u64 {
        self.rollup_points
    }
}

/// A series resolved to UIDs: its row key with the hour left zero. Held inline (a key of three tags is ~25 bytes):
/// connections keep one per series they write and read it for every point, and a pointer to chase would be a
/// cache miss per point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesKey {
    pub(super) template: smallvec::SmallVec<[u8; 32]>,
}

impl Store {
    /// Puts the series log's records (read before the database was opened) into `Store::overlay` (read-only
    /// opens).
    pub(super) fn load_overlay(&mut self, records: &[Vec<u8>]) -> Result<(), StoreError> {
        let mut order = Vec::new();
        for record in records {
            self.pending.replay(record, &mut order);
        }
        let (_, rows, _) = self.pending.take()?;
        let rows = rows.into_iter().map(|row| (row.key.to_vec(), row.fragment.columns)).collect();
        self.overlay = rows;
        Ok(())
    }

    /// Puts the points a crash left in the series log's `segments` into their rows.
    pub(super) fn replay_pending(&self, data_dir: &Path, segments: &[u64]) -> Result<(), StoreError> {
        if segments.is_empty() {
            return Ok(());
        }
        let mut order = Vec::new();
        let mut records = 0u64;
        pending::read_log(data_dir, |record| {
            self.pending.replay(record, &mut order);
            records += 1;
        })
        .map_err(log_error)?;
        tracing::info!(records, points = self.pending.points(), "replaying acknowledged points into their rows");
        // Even with nothing to replay, the old segments are deleted by the flush.
        self.flush_pending_always()?;
        Ok(())
    }

    /// Writes the series table's points into their rows: one merge operand per row, each written with its rollup
    /// mark and series-index notes, then deletes the log segments they came from. Returns the points written.
    /// The daemon calls it when the table is large or old enough; readers call it through [`Store::settle`].
    pub fn flush_pending(&self) -> Result<u64, StoreError> {
        if self.pending.points() == 0 {
            // Nothing acknowledged is waiting (a commit not yet in the table stays in the current segment).
            return Ok(0);
        }
        self.flush_pending_always()
    }

    pub(super) fn flush_pending_always(&self) -> Result<u64, StoreError> {
        let _one_at_a_time = self.pending.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        #[cfg(test)]
        if self.fail_flushes.load(std::sync::atomic::Ordering::Acquire) {
            let source = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left (test)");
            return Err(StoreError::Io { context: "flushing the series table", source });
        }
        #[cfg(test)]
        let _flushing = test_hooks::Flushing::here();
        #[cfg(test)]
        let slice_rows = match self.flush_slice_rows.load(std::sync::atomic::Ordering::Acquire) {
            0 => FLUSH_SLICE_ROWS,
            rows => rows,
        };
        #[cfg(not(test))]
        let slice_rows = FLUSH_SLICE_ROWS;
        let (cut, slices, points) = self.pending.take_to_flush(slice_rows)?;
        if slices.is_empty() {
            self.pending.release(cut)?;
            return Ok(0);
        }
        let row_count: usize = slices.iter().map(|slice| slice.len()).sum();
        let cpu_started = thread_cpu_ms();
        // Written a slice at a time, each freed once written (unless a reader's copy still holds it): one batch
        // of every row would hold a second copy of the whole table at the flush (peak RSS). A row's merge, its
        // rollup mark and its series-index notes stay in one write; rows need no atomicity between them (a
        // crash before the last slice replays the log, whose points merge into the rows already written as
        // identical cells). Readers do not wait for this: they find a slice's points in it until it is written
        // (`PendingTable::unflushed`).
        let started = Instant::now();
        let mut slices = std::collections::VecDeque::from(slices);
        #[cfg(test)]
        let mut step = 0;
        while let Some(slice) = slices.front() {
            #[cfg(test)]
            self.flush_step(step, false);
            if let Err(e) = self.write_rows(slice) {
                self.metrics.rocksdb_write_seconds.observe(started.elapsed().as_secs_f64());
                // The slice and the rows after it go back; the log keeps them all until a flush succeeds.
                self.pending.give_back(slices.into());
                return Err(e);
            }
            #[cfg(test)]
            {
                self.flush_step(step, true);
                step += 1;
            }
            self.pending.written(slice);
            slices.pop_front();
        }
        // The log segments go once their points are as durable in RocksDB's write-ahead log as they were in the
        // segments (fsynced, for points a client asked to `sync`).
        let written = started.elapsed();
        let synced = self.engine.sync();
        self.metrics.rocksdb_write_seconds.observe(started.elapsed().as_secs_f64());
        // A read waits for this (see `settle`): how long it took, and how much of that was this thread's own CPU.
        // During B's burst on two cores a flush of ~5,000 rows took 107 ms (median) for 44 ms of its own CPU, and
        // the last ones, up to 1.6 M points behind a burst's end, 280-440 ms (bench/RESULTS.md, 2026-11-30
        // 12:00-13:00).
        tracing::debug!(
            rows = row_count,
            points,
            write_ms = written.as_secs_f64() * 1e3,
            sync_ms = (started.elapsed() - written).as_secs_f64() * 1e3,
            cpu_ms = thread_cpu_ms() - cpu_started,
            "series table flushed"
        );
        synced?;
        self.pending.release(cut)?;
        Ok(points)
    }

    /// Writes rows of the series table (in key order) in one write: each row's points as one merge operand, with
    /// its rollup mark and series-index notes.
    pub(super) fn write_rows(&self, rows: &[pending::Row]) -> Result<(), StoreError> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let mut batch = WriteBatch::default();
        let mut marks = rollup::Marks::default();
        let mut noted = series::Noted::default();
        let mut tsuid = Vec::with_capacity(64);
        let owning = self.owns_rows();
        let mut flushed = Vec::with_capacity(if owning { rows.len() } else { 0 });
        for pending::Row { key, fragment, .. } in rows {
            let hour = codec::row_base_time(key, sw, mw);
            // Points in time order (nearly always) go as one cells run: merges of the row copy it whole instead
            // of taking it a cell at a time, and take it as its cells otherwise (see codec::cells_run).
            let run = if fragment.points > 1 { codec::cells_run(&fragment.columns) } else { None };
            batch.merge(CF_DATA, key, run.as_deref().unwrap_or(&fragment.columns));
            if self.rollups.auto() {
                // One mark per row: the span of the fragment's points.
                let (mut first, mut last) = (i64::MAX, i64::MIN);
                for column in codec::columns(&fragment.columns).flatten() {
                    if let Ok(ms) = codec::qualifier_timestamp_ms(hour, column.qualifier, 0) {
                        (first, last) = (first.min(ms), last.max(ms));
                    }
                }
                if first <= last {
                    marks.add_span(key, fragment.points as i64, first, last);
                    if owning {
                        let in_order = run.is_some() || fragment.points == 1;
                        let points = fragment.points as i64;
                        let columns = fragment.columns.as_slice();
                        flushed.push(rollup::Flushed {
                            key,
                            columns,
                            in_order,
                            first_ms: first,
                            last_ms: last,
                            points,
                        });
                    }
                }
            }
            // The TSUID is the row key without salt and base time.
            codec::tsuid_from_row_key_into(key, sw, mw, &mut tsuid);
            // Counted here, once per row fragment: the put path adds nothing per point for the counters.
            let mut writes = series::IndexWrites { batch: &mut batch, noted: &mut noted };
            self.series.note(&mut writes, &self.layout, &tsuid, hour, fragment.points);
        }
        // The rows' index entries are in the same write as their points: both are stored, or neither.
        self.write_flushed(batch, &mut marks, &flushed)?;
        self.series.remember(&mut noted);
        Ok(())
    }

    /// Points acknowledged but not yet written into their rows (the series table's size).
    pub fn pending_points(&self) -> u64 {
        self.pending.points()
    }

    /// How a node of a shared engine holds the points it acknowledged (see [`super::shared_log`]); `None` on the
    /// embedded engine, whose series log is on the node.
    pub fn shared_log_options(&self) -> Option<super::shared_log::LogOptions> {
        self.pending.shared().map(|log| log.options())
    }

    /// Writes every acknowledged point into its row (see [`pending`]): what readers that go to the engine
    /// directly do first (meta, annotations, the fold, maintenance). Costs one atomic load when nothing is
    /// pending. Reads of data rows and of the series index need not: they take the points not written yet from
    /// the series table and a flush under way (`Store::for_each_row_in`, `Store::read_series`,
    /// `Store::unflushed_series`), so no query waits for a flush.
    ///
    /// When the flush fails (a full disk, no file descriptors), the points stay where they are (the series log
    /// and the table), where those reads still find them, so reads are served while writes cannot be; the flush
    /// is retried at most once a second meanwhile.
    pub fn settle(&self) -> Result<(), StoreError> {
        #[cfg(test)]
        assert!(!test_hooks::Flushing::on_this_thread(), "a read on the flush's own thread waits for that flush");
        if !self.read_only {
            let started = Instant::now();
            self.flush_unless_failing();
            let waited = started.elapsed();
            if waited > std::time::Duration::from_millis(1) {
                tracing::debug!(ms = waited.as_secs_f64() * 1e3, "a read waited for the series table's flush");
            }
        }
        Ok(())
    }

    /// The daemon's periodic flush of the series table (see [`Store::settle`]).
    pub fn flush_in_background(&self) {
        if !self.read_only {
            self.flush_unless_failing();
        }
    }

    /// Flushes the series table, unless a flush failed less than a second ago (a full disk is not hammered).
    pub(super) fn flush_unless_failing(&self) {
        let mut failed_at = self.flush_failed_at.lock().unwrap_or_else(|e| e.into_inner());
        if failed_at.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
            return;
        }
        match self.flush_pending() {
            Ok(_) => *failed_at = None,
            Err(e) => {
                self.health.failed("flush", &e);
                *failed_at = Some(Instant::now());
            }
        }
    }

    /// Whether acknowledged points wait in the series table because its flush is failing (a full disk): raw reads
    /// merge them in, but the automatic rollups cannot have them, so a rollup read that folds goes to the raw
    /// rows meanwhile (a grid read takes them from the table itself, see [`Store::unfolded_rows`]). Settles first.
    pub fn holds_unflushed(&self) -> Result<bool, StoreError> {
        self.settle()?;
        let failing = self.flush_failed_at.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        Ok(failing && self.pending.points() > 0)
    }

    pub fn new_batch(&self) -> PointBatch {
        PointBatch {
            batch: WriteBatch::default(),
            log: Default::default(),
            order: Vec::new(),
            points: 0,
            rollup_points: 0,
            marks: Default::default(),
            noted: Default::default(),
            raw_cut_ms: i64::MIN,
            expired: 0,
        }
    }

    /// Resolves a validated point's UIDs (assigning new ones as configured) and adds its cell to `batch`.
    pub fn add_point(&self, batch: &mut PointBatch, point: &DataPoint<'_>) -> Result<(), AddError> {
        let series = self.series_key(point)?;
        self.add_to_series(batch, &series, point.timestamp, point.value);
        Ok(())
    }

    /// Resolves a point's series to UIDs once, so a connection that sends the same series again can skip the
    /// name lookups and validation (`add_to_series`).
    pub fn series_key(&self, point: &DataPoint<'_>) -> Result<SeriesKey, AddError> {
        self.series_key_inner(point).inspect_err(|e| {
            if let AddError::Storage(e) = e {
                self.health.failed("uid", e);
            }
        })
    }

    pub(super) fn series_key_inner(&self, point: &DataPoint<'_>) -> Result<SeriesKey, AddError> {
        // UID lookup order as OpenTSDB: metric first, then each tag key and value (spec: ingest §2.6).
        let metric = self.uids.get_or_create(UidKind::Metric, &point.metric, self.auto_create[0])?;
        let mut tags: smallvec::SmallVec<[(Uid, Uid); 8]> = smallvec::SmallVec::new();
        for (k, v) in &point.tags {
            let k = self.uids.get_or_create(UidKind::TagKey, k, self.auto_create[1])?;
            let v = self.uids.get_or_create(UidKind::TagValue, v, self.auto_create[2])?;
            tags.push((k, v));
        }
        let pairs: smallvec::SmallVec<[(&[u8], &[u8]); 8]> =
            tags.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        // A row key at hour 0 carries everything but the hour: salt, metric, sorted pairs.
        let template = codec::row_key(&self.layout.salt, metric.as_bytes(), 0, &pairs);
        Ok(SeriesKey { template: smallvec::SmallVec::from_slice(&template) })
    }

    /// The series with `metric_of`'s metric and `tags_of`'s tags, both resolved before: no UID to look up.
    pub fn series_key_crossed(&self, metric_of: &SeriesKey, tags_of: &SeriesKey) -> SeriesKey {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let tags = &tags_of.template[sw + mw + codec::TIMESTAMP_BYTES..];
        let mut tsuid: smallvec::SmallVec<[u8; 32]> = smallvec::SmallVec::with_capacity(mw + tags.len());
        tsuid.extend_from_slice(&metric_of.template[sw..sw + mw]);
        tsuid.extend_from_slice(tags);
        let template = self.layout.row_key(&tsuid, 0);
        SeriesKey { template: smallvec::SmallVec::from_slice(&template) }
    }

    /// Adds one point of an already resolved series to `batch`.
    pub fn add_to_series(&self, batch: &mut PointBatch, series: &SeriesKey, timestamp: i64, value: codec::Value) {
        let hour = codec::base_time(timestamp);
        let metric_end = self.layout.salt.width + self.layout.uid_widths[0];
        let mut key: smallvec::SmallVec<[u8; 64]> = smallvec::SmallVec::from_slice(&series.template);
        key[metric_end..metric_end + 4].copy_from_slice(&hour.to_be_bytes());
        let qualifier = codec::build_qualifier(timestamp, value.flags());
        if batch.points == 0 {
            // A batch's points are received when it starts: one clock read per batch, not per point.
            self.series.tick();
            batch.raw_cut_ms = self.retention.cut_ms(CF_DATA);
        }
        if batch.raw_cut_ms != i64::MIN && codec::timestamp_ms(timestamp) < batch.raw_cut_ms {
            batch.expired += 1;
        }
        // Rollup marks, series-index notes and point counts are written per row when the series table is flushed.
        batch.log.push(&key, &qualifier, &value.encode());
        batch.points += 1;
    }

    /// Writes a batch atomically. When this returns Ok the points are in RocksDB's write-ahead log (fsynced too
    /// when `sync`): a crash of the process cannot lose them.
    pub fn commit(&self, batch: &mut PointBatch, sync: bool) -> Result<u64, StoreError> {
        let points = batch.points;
        batch.rollup_points = 0;
        if points == 0 && batch.batch.is_empty() {
            return Ok(0);
        }
        if let Err(e) = self.health.check_writable() {
            batch.discard();
            return Err(e);
        }
        let durability = if sync { Durability::Synced } else { Durability::Logged };
        let started = Instant::now();
        let write = std::mem::take(&mut batch.batch);
        let result = if batch.log.is_empty() {
            self.write_marked(write, &mut batch.marks, durability)
        } else if !self.pending.logged() {
            // A shared engine without its log table (an `rtsd` table created before it): the points go into their
            // rows now, then the batch's other writes, which come after the points they go with (Chukwa's
            // "stored" state).
            let rows = pending::rows_of(batch.log.payload());
            self.write_rows(&rows).and_then(|()| {
                if write.is_empty() {
                    return Ok(());
                }
                self.write_marked(write, &mut batch.marks, durability)
            })
        } else {
            // One series-log record for all the batch's points; they join the series table once it and the rest of
            // the batch are written (see [`pending`]).
            let (log, order, marks) = (&mut batch.log, &mut batch.order, &mut batch.marks);
            let logged = self.pending.commit(log, points, order, sync, || {
                if write.is_empty() {
                    return Ok(());
                }
                self.write_marked(write, marks, durability)
            });
            if logged.is_ok() && sync && self.pending.shared().is_some() {
                // On a shared engine `sync` also means "readable through every node": the batch's rows are
                // written before it is answered. Should that fail, the points stay logged and are written later;
                // the client hears of the failure and may send them again (the same cells).
                self.flush_pending().map(|_| ())
            } else {
                logged
            }
        };
        self.metrics.rocksdb_write_seconds.observe(started.elapsed().as_secs_f64());
        batch.points = 0;
        batch.log.clear();
        let expired = std::mem::take(&mut batch.expired);
        if let Err(e) = result {
            batch.discard();
            self.health.failed("write", &e);
            return Err(e);
        }
        self.health.succeeded();
        self.series.remember(&mut batch.noted);
        if expired > 0 {
            self.metrics.datapoints_expired_on_arrival.inc_by(expired);
            static EXPIRED: crate::logs::Throttle = crate::logs::Throttle::new(std::time::Duration::from_secs(60));
            if let Some(earlier) = EXPIRED.allow() {
                tracing::warn!(
                    points = expired,
                    earlier_batches = earlier,
                    retention_hours = self.retention.hours(CF_DATA),
                    "stored points older than rtsd.retention.raw_hours: no read returns them (set it to 0 to keep data \
                     forever; see rtsd_datapoints_expired_on_arrival_total)"
                );
            }
        }
        if self.pending.points() > MAX_PENDING_POINTS {
            // Writers outrun the background flush: the writer that finds the table full flushes it (back-pressure
            // that bounds the table's memory). The batch is acknowledged whatever the flush does: its points are
            // in the series log.
            self.flush_unless_failing();
        }
        if self.sealing_backlog() > rollup::SEALING_BOUND {
            // Likewise for the rollups of rows the flushes folded themselves: a burst of history queues them
            // faster than the flush task alone writes them.
            self.seal_in_background(rollup::SEAL_CHUNK);
        }
        Ok(points)
    }

    /// Adds a plain put to `batch`, written atomically with its points: how the Chukwa port stores its stream
    /// state and Chukwa's own tables in the same write as the points they go with. `cf` is one of the `CF_*`.
    pub fn put_raw(&self, batch: &mut PointBatch, cf: &'static str, key: &[u8], value: &[u8]) {
        batch.batch.put(cf, key, value);
    }

    /// Adds a delete to `batch` (see [`Store::put_raw`]).
    pub fn delete_raw(&self, batch: &mut PointBatch, cf: &'static str, key: &[u8]) {
        batch.batch.delete(cf, key);
    }
}

/// The calling thread's CPU time so far (ms; 0 where the clock cannot be read).
fn thread_cpu_ms() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given, which lives on this stack frame.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}

#[cfg(test)]
mod tests {
    // The flush's debug line reports its own CPU apart from its wall time (waiting for cores is not cost): the
    // clock counts this thread's work and not its sleep.
    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        let start = super::thread_cpu_ms();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = super::thread_cpu_ms() - start;
        assert!(slept < 20.0, "sleeping took {slept} ms of CPU");
        // Work until the clock shows 30 ms, or give up after 5 s of wall time (a clock that does not move).
        let (busy_from, wall) = (super::thread_cpu_ms(), std::time::Instant::now());
        let mut x = 0u64;
        while super::thread_cpu_ms() - busy_from < 30.0 && wall.elapsed().as_secs() < 5 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let busy = super::thread_cpu_ms() - busy_from;
        assert!((30.0..1000.0).contains(&busy), "30 ms of work counted as {busy} ms");
    }
}

/// What tests use to stop a flush between its slices (see `Store::flush_step`).
#[cfg(test)]
pub(crate) mod test_hooks {
    use super::*;

    thread_local! {
        static FLUSHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Marks the thread as running a flush while it lives: a read that waited for the flush from there (see
    /// `Store::flush_step`) would wait for itself.
    pub(crate) struct Flushing;

    impl Flushing {
        pub(crate) fn here() -> Flushing {
            FLUSHING.with(|f| f.set(true));
            Flushing
        }

        pub(crate) fn on_this_thread() -> bool {
            FLUSHING.with(|f| f.get())
        }
    }

    impl Drop for Flushing {
        fn drop(&mut self) {
            FLUSHING.with(|f| f.set(false));
        }
    }

    impl Store {
        /// Runs the test's `flush_step` hook, if any.
        pub(super) fn flush_step(&self, slice: usize, written: bool) {
            if let Some(step) = self.flush_step.lock().unwrap().as_ref() {
                step(self, slice, written);
            }
        }
    }
}
