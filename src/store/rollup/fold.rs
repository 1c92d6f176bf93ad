//! The fold: changed buckets of each marked raw hour recomputed from the stored raw row and written to the
//! automatic rollup rows.
use super::*;

/// The longest a daemon's fold waits for grid reads between two chunks (see
/// [`Store::step_aside_for_grid_reads`]): dashboards that never stop reading do not stop the folds.
pub(super) const STEP_ASIDE_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the marks' memtable is flushed. Its few live entries would otherwise keep every write-ahead log
/// file since its last flush from being deleted (RocksDB frees a log once all families' data in it is flushed).
pub(super) const MARKS_FLUSH_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

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
pub fn buckets(points: &[codec::TimedValue], interval_secs: u32) -> Vec<Bucket> {
    buckets_each(points, [interval_secs]).pop().unwrap_or_default()
}

/// One interval's bucket being built by [`buckets_each`]: the open bucket's running aggregates, kept here and
/// written out when the next bucket opens (a fold computes three intervals of every point of a burst).
struct Building {
    width: i64,
    /// Where the open bucket ends: a point before it (and after the last point) falls in it.
    end: i64,
    start: i64,
    count: i64,
    /// The exact integer sum while every value is an integer and none overflowed (`ints`), and the sequential
    /// double sum.
    int_sum: i64,
    ints: bool,
    dsum: f64,
    /// The open bucket's min and max as doubles, and the points they came from (indexes: a point's value is
    /// taken once, when the bucket closes, not copied at every new min or max).
    min: f64,
    max: f64,
    min_at: usize,
    max_at: usize,
    out: Vec<Bucket>,
}

impl Building {
    fn new(secs: u32, points: usize) -> Building {
        let width = (i64::from(secs) * 1000).max(1);
        // A raw row spans an hour: at most one bucket per interval of it (plus one at an unaligned edge).
        let most = (3_600_000 / width) as usize + 1;
        Building {
            width,
            end: i64::MIN,
            start: 0,
            count: 0,
            int_sum: 0,
            ints: true,
            dsum: 0.0,
            min: 0.0,
            max: 0.0,
            min_at: 0,
            max_at: 0,
            out: Vec::with_capacity(most.min(points)),
        }
    }

    /// Writes out the open bucket, if any (`points`: those the indexes of its min and max point into).
    fn close(&mut self, points: &[codec::TimedValue]) {
        if self.count > 0 {
            self.out.push(Bucket {
                start: self.start,
                count: self.count,
                sum: sum_value(self.ints.then_some(self.int_sum), self.dsum),
                min: points[self.min_at].value,
                max: points[self.max_at].value,
            });
        }
    }

    /// Adds `points[at]` (`value`, as the double `d`: what the caller already read of it; reading them again from
    /// `points` here measured 25-90% slower for 1m buckets in criterion `row_buckets`, 2026-11-29). `SELECT`: a new min or max is taken with selects instead
    /// of branches, for buckets of a few points, where on noisy values it is a coin toss the branch predictor
    /// loses (criterion `row_buckets`: 1m buckets of 10 s points 2.2x faster); in wide buckets a new min or max is
    /// rare and a predicted branch is cheaper than the selects' dependency from point to point.
    #[inline]
    fn add<const SELECT: bool>(&mut self, points: &[codec::TimedValue], at: usize, ts: i64, value: Value, d: f64) {
        // Points come in time order: one before the open bucket's end is in it.
        if ts < self.end {
            self.count += 1;
            if SELECT {
                let (lower, higher) = (d < self.min, d > self.max);
                self.min = if lower { d } else { self.min };
                self.min_at = if lower { at } else { self.min_at };
                self.max = if higher { d } else { self.max };
                self.max_at = if higher { at } else { self.max_at };
            } else {
                if d < self.min {
                    (self.min, self.min_at) = (d, at);
                }
                if d > self.max {
                    (self.max, self.max_at) = (d, at);
                }
            }
            self.dsum += d;
        } else {
            self.close(points);
            self.start = ts - ts.rem_euclid(self.width);
            self.end = self.start.saturating_add(self.width);
            // `0.0 + d`, as the sum starts from zero: a lone -0.0 sums to 0.0.
            (self.count, self.int_sum, self.ints, self.dsum) = (1, 0, true, 0.0 + d);
            (self.min, self.max, self.min_at, self.max_at) = (d, d, at, at);
        }
        match value {
            Value::Int(v) if self.ints => match self.int_sum.checked_add(v) {
                Some(sum) => self.int_sum = sum,
                None => self.ints = false,
            },
            _ => self.ints = false,
        }
    }
}

/// [`buckets`] of each of `intervals_secs` (the fold builds every automatic interval of a raw row; each bucket's
/// sum is still its own points' sum in time order). One pass over the points per interval: the open bucket then
/// lives in registers, which the selects of [`Building::add`] need to be cheap.
pub fn buckets_each(points: &[codec::TimedValue], intervals_secs: impl IntoIterator<Item = u32>) -> Vec<Vec<Bucket>> {
    intervals_secs.into_iter().map(|secs| buckets_of(points, secs)).collect()
}

fn buckets_of(points: &[codec::TimedValue], secs: u32) -> Vec<Bucket> {
    // A raw row spans an hour: about this many points fall in a bucket.
    let per_bucket = points.len() as u64 * u64::from(secs) / 3600;
    if per_bucket <= NARROW_BUCKET_POINTS {
        build_buckets::<true>(points, secs)
    } else {
        build_buckets::<false>(points, secs)
    }
}

/// Points per bucket up to which [`Building::add`] takes a new min or max with selects.
const NARROW_BUCKET_POINTS: u64 = 16;

pub(super) fn build_buckets<const SELECT: bool>(points: &[codec::TimedValue], secs: u32) -> Vec<Bucket> {
    let mut building = Building::new(secs, points.len());
    let mut last_ts = None;
    for (at, p) in points.iter().enumerate() {
        let ts = p.timestamp_ms;
        if last_ts.is_some_and(|t| ts <= t) {
            continue;
        }
        last_ts = Some(ts);
        building.add::<SELECT>(points, at, ts, p.value, p.value.as_f64());
    }
    building.close(points);
    building.out
}

/// A bucket's sum: the exact integer sum (`None` once a value was not an integer or the sum overflowed) when
/// reading it back as a double gives the sequential double sum, else that double sum.
fn sum_value(int_sum: Option<i64>, dsum: f64) -> Value {
    match int_sum {
        Some(s) if s as f64 == dsum => Value::Int(s),
        _ => Value::Double(dsum),
    }
}

/// Which rows a fold takes.
#[derive(Debug, Clone, Copy)]
enum Select<'m> {
    /// Every row with a mark (a full fold).
    All,
    /// The rows of one metric (a query's).
    Metric(&'m [u8]),
    /// At most this many rows of hours older than the newest hour written.
    Closed(usize),
}

/// Raw rows a fold reads and writes the rollups of at a time: a fold waiting for the lock waits for one chunk.
pub(super) const FOLD_CHUNK: usize = 256;

/// Threads a query's fold of its metric uses at most (see [`Store::fold_chunks_side_by_side`]).
const QUERY_FOLD_THREADS: usize = 4;

/// How long a full fold that handed the lock to queries' folds (see `Store::fold_selected`) waits for them to take
/// it before going on; they take it at once, so this only bounds a query that gave up meanwhile.
const HAND_OFF_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The rollup rows one chunk of a fold reads, by family and key: present ones only (see
/// [`Store::prefetch_rollups`]).
#[derive(Default)]
pub(super) struct Prefetched {
    by_family: HashMap<String, HashMap<Vec<u8>, Vec<u8>>>,
}

impl Prefetched {
    fn get(&self, family: &str, key: &[u8]) -> Option<&[u8]> {
        self.by_family.get(family)?.get(key).map(Vec::as_slice)
    }
}

/// Where a fold's time went, for its debug line.
#[derive(Default)]
struct FoldTiming {
    /// Reading the rollup rows the raw rows fold into.
    in_prefetch: std::time::Duration,
    /// Decoding the raw rows and building their buckets (the rest of the reads is the raw rows themselves).
    in_rows: std::time::Duration,
    in_write: std::time::Duration,
}

/// Adds the time since its start to a total when dropped (on every return path of a callback).
struct Elapsed<'a>(&'a mut std::time::Duration, std::time::Instant);

impl Drop for Elapsed<'_> {
    fn drop(&mut self) {
        *self.0 += self.1.elapsed();
    }
}

impl Store {
    /// Folds every raw row with pending changes (of `metric` only, when given) into the automatic rollup tables.
    /// Returns the rows folded. A query reading a rollup table cell by cell calls it for its metric first, so
    /// rollups never lag what raw data it would see (a grid read reads the rows not folded yet raw instead, see
    /// [`Store::unfolded_rows`]); the background task calls it for everything.
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
        let t = std::time::Instant::now();
        self.settle()?;
        tracing::debug!(ms = t.elapsed().as_secs_f64() * 1e3, "fold: settled");
        self.fold_flushed(metric)
    }

    /// [`Store::fold_rollups`] of the rows written so far, leaving the points still in the series table to the
    /// fold after their flush: what the daemon's periodic fold does, so that it never forces a flush (each flush
    /// costs a merge per row, so fewer and larger flushes make ingest cheaper); a query's fold settles first.
    pub fn fold_flushed(&self, metric: Option<&[u8]>) -> Result<u64, StoreError> {
        self.fold_selected(match metric {
            Some(m) => Select::Metric(m),
            None => Select::All,
        })
    }

    /// Waits (at most [`STEP_ASIDE_MAX`]) while grid reads take buckets from rows not folded yet: what the
    /// daemon's folds of passed hours (the folds that run during and right after a burst) do between chunks.
    /// Such a read computes the buckets a fold would, for a query someone waits for, and the fold got ~17% of the
    /// two cores while q1 read B's burst raw (perf, bench/RESULTS.md 2026-11-29 19:30); the fold takes the rows
    /// up again after it. A query's own fold does not wait.
    pub(super) fn step_aside_for_grid_reads(&self) {
        let started = std::time::Instant::now();
        // Not while another fold waits for the lock this one holds (a cell read's fold of its metric).
        while self.rollups.grid_readers.load(Ordering::Acquire) > 0
            && self.rollups.fold_waiting.load(Ordering::Acquire) == 0
            && started.elapsed() < STEP_ASIDE_MAX
            && !self.folds_abandoned()
        {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Rows of raw hours older than the newest hour written, noted and not folded yet (see
    /// [`Store::fold_closed`]).
    pub fn closed_backlog(&self) -> usize {
        if !self.rollups.auto() || self.rollups.read_only {
            return 0;
        }
        self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner()).closed()
    }

    /// Raw rows written and not folded yet that the notes know of (a query's fold of their metric folds them).
    pub fn fold_backlog(&self) -> usize {
        self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner()).len
    }

    /// Folds at most `limit` of the rows [`Store::closed_backlog`] counts: what the daemon does while a burst of
    /// writes goes on (issue 22 item 5). A burst in time order (a backfill, a collector catching up) moves past
    /// its hours one after the other; folding each as it is passed leaves a query right after the burst only
    /// the newest hour to fold, where waiting for the periodic fold left it the whole burst. Rows of the newest
    /// hour, which are still being written, are left to the periodic fold (folding them now would fold them
    /// again at every flush). Like a query's fold of one metric, it folds from the notes and leaves the stored
    /// marks to the next full fold, which skips the rows folded here.
    pub fn fold_closed(&self, limit: usize) -> Result<u64, StoreError> {
        self.fold_selected(Select::Closed(limit))
    }

    /// The raw rows of `metric` whose rollups may not hold all their points yet, in key order, with the points
    /// of theirs not in RocksDB yet: a query reading a grid takes their buckets from the raw rows themselves
    /// ([`Store::read_rollup_grid`]) instead of folding them first, which right after a burst of writes was most
    /// of its time (issue 22 item 5: ~1 s to fold ~17-20 k rows of data set B's q1). The daemon folds them
    /// meanwhile, as it would anyway.
    ///
    /// Nor does it wait for the series table's flush ([`Store::settle`]: 25-90 ms right after B's burst, one
    /// flush under way and the reader's own): the rows of the metric's points that the table and the flush under
    /// way hold are listed with those points, copied first. A point is in the table, in the flush, or written
    /// with its row's note (listed below) when the copy is made, so the list misses none; a row written
    /// meanwhile is in both, and merging the same points again changes nothing.
    ///
    /// `None` when the rows cannot be told from the notes, and the query has to fold: stored marks may lack a
    /// note (from before a restart, or a fold that stopped on an error or a shutdown), a full fold is reading
    /// them, or a row's hour reaches past the raw retention: its older raw points may be gone while its rollups
    /// keep them (the fold recomputes only the buckets that changed).
    pub fn unfolded_rows(&self, metric: &[u8]) -> Result<Option<Unfolded>, StoreError> {
        if !self.rollups.auto() || self.rollups.read_only {
            return Ok(Some(Unfolded::default()));
        }
        let t = std::time::Instant::now();
        let unflushed = self.unflushed_of_metric(metric);
        tracing::debug!(
            ms = t.elapsed().as_secs_f64() * 1e3,
            rows = unflushed.len(),
            "query: copied the metric's points not flushed yet"
        );
        // A row whose rollups may lag its points is noted (`pending`) or taken by a fold that has not written it
        // yet (`in_flight`): rows move from the first to the second under the `pending` lock, and leave the second
        // once written. So no fold is waited for, not even a full fold of every metric's backlog.
        let mut rows: Vec<Vec<u8>> = {
            let pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
            let in_flight = self.rollups.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            // Checked with both lists locked: a fold that lets rows go unwritten sets `unnoted` first.
            if self.rollups.unnoted.load(Ordering::Acquire) || self.rollups.reading_marks.load(Ordering::Acquire) {
                return Ok(None);
            }
            let noted = pending.by_metric.get(metric).into_iter().flat_map(|rows| rows.keys());
            // Rows the series table's flushes fold themselves are not folded until they are sealed.
            let owned = pending.owned.rows_of(metric, self.layout.metric_at());
            noted
                .chain(in_flight.get(metric).into_iter().flat_map(|rows| rows.keys()))
                .chain(owned)
                .chain(unflushed.keys())
                .cloned()
                .collect()
        };
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let cut_ms = self.retention.cut_ms(CF_DATA);
        if rows.iter().any(|row| i64::from(codec::row_base_time(row, sw, mw)) * 1000 < cut_ms) {
            return Ok(None);
        }
        rows.sort_unstable();
        rows.dedup();
        Ok(Some(Unfolded { rows, unflushed }))
    }

    fn fold_selected(&self, select: Select<'_>) -> Result<u64, StoreError> {
        if !self.rollups.auto() || self.rollups.read_only {
            return Ok(0);
        }
        let mut one_at_a_time = Some(self.fold_lock_for(&select));
        let Some((last, mut rows)) = self.rows_to_fold(&select)? else { return Ok(0) };
        let started = std::time::Instant::now();
        let mut timing = FoldTiming::default();
        // A full fold holds the lock for its whole backlog (a minute after a burst on a busy machine), so when a
        // query's fold of one metric waits, the rows of that metric go next, and once they are folded the lock is
        // handed to the query: it then finds its metric's rows of this fold done, and folds only what was written
        // since. Every fold reads the raw rows as they are, so the order rows are folded in does not matter.
        let mut hand_off: Option<(usize, Vec<Vec<u8>>)> = None;
        let mut done = 0;
        if matches!(select, Select::Metric(_)) && rows.len() > FOLD_CHUNK {
            // A query waits for this fold: every core takes chunks (the daemon's own folds step aside meanwhile).
            done = self.fold_chunks_side_by_side(&rows, &mut timing)?;
            if done < rows.len() {
                return Ok(done as u64);
            }
        }
        while done < rows.len() {
            if matches!(select, Select::Closed(_)) {
                self.step_aside_for_grid_reads();
            }
            if self.folds_abandoned() {
                // Left to the next full fold, which reads the stored marks (kept: see Store::abandon_folds).
                self.land_in_flight(rows[done..].iter().map(|(row, _)| row), false);
                tracing::info!(folded = done, left = rows.len() - done, "fold abandoned: stopping");
                return Ok(done as u64);
            }
            if matches!(select, Select::All) && hand_off.is_none() {
                let wanted = self.rollups.wanted.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if !wanted.is_empty() {
                    let is_wanted =
                        |row: &[u8]| wanted.iter().any(|m| self.layout.metric_of(row) == Some(m.as_slice()));
                    let (mut first, later): (Vec<_>, Vec<_>) =
                        rows.split_off(done).into_iter().partition(|(row, _)| is_wanted(row));
                    let until = done + first.len();
                    rows.append(&mut first);
                    rows.extend(later);
                    hand_off = Some((until, wanted));
                }
            }
            if let Some((until, metrics)) = &hand_off {
                if done >= *until {
                    drop(one_at_a_time.take());
                    self.wait_for_hand_off(metrics);
                    one_at_a_time = Some(self.fold_lock_ahead_of_passed_hours());
                    hand_off = None;
                    continue;
                }
            }
            #[cfg(test)]
            if matches!(select, Select::All) {
                if let Some(hook) = self.rollups.before_chunk.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    hook(done);
                }
            }
            // A chunk ends where the rows of a hand-off end, so the waiting folds get the lock as soon as can be.
            let end = hand_off.as_ref().map_or(rows.len(), |(until, _)| *until);
            let chunk = &rows[done..(done + FOLD_CHUNK).min(end)];
            if let Err(e) = self.fold_chunk(chunk, &mut timing) {
                self.land_in_flight(rows[done..].iter().map(|(row, _)| row), false);
                return Err(e);
            }
            self.land_in_flight(chunk.iter().map(|(row, _)| row), true);
            done += chunk.len();
        }
        tracing::debug!(
            ?select,
            rows = rows.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            prefetch_ms = timing.in_prefetch.as_secs_f64() * 1e3,
            fold_row_ms = timing.in_rows.as_secs_f64() * 1e3,
            write_ms = timing.in_write.as_secs_f64() * 1e3,
            "fold: rows folded"
        );
        self.finish_fold(&select, &rows, last)?;
        drop(one_at_a_time);
        Ok(rows.len() as u64)
    }

    /// The fold lock for a fold of `select`. The lock is not fair: the daemon's folds of passed hours, one chunk
    /// after the other, step aside for a query's (or a full) fold waiting for it, which otherwise waited for the
    /// whole backlog.
    fn fold_lock_for(&self, select: &Select<'_>) -> std::sync::MutexGuard<'_, ()> {
        match select {
            Select::Closed(_) => {
                while self.rollups.fold_waiting.load(Ordering::Acquire) > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                self.rollups.fold_lock.lock().unwrap_or_else(|e| e.into_inner())
            }
            Select::Metric(m) => {
                // A full fold in progress folds this metric's rows next and then lets this fold in.
                self.rollups.wanted.lock().unwrap_or_else(|e| e.into_inner()).push(m.to_vec());
                let locked = self.fold_lock_ahead_of_passed_hours();
                let mut wanted = self.rollups.wanted.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(i) = wanted.iter().position(|w| w.as_slice() == *m) {
                    wanted.swap_remove(i);
                }
                locked
            }
            Select::All => self.fold_lock_ahead_of_passed_hours(),
        }
    }

    /// The raw rows a fold of `select` folds, in key order, with what changed in each, and the generation of
    /// marks it handles through; `None` when there is nothing to fold. Called with the fold lock held.
    #[allow(clippy::type_complexity)]
    fn rows_to_fold(&self, select: &Select<'_>) -> Result<Option<(u64, Vec<(Vec<u8>, Change)>)>, StoreError> {
        let metric = match select {
            Select::Metric(m) => Some(*m),
            _ => None,
        };
        let of_metric = |row: &[u8]| metric.is_none_or(|m| self.layout.metric_of(row) == Some(m));
        // Through the gate, every mark of generation <= `last` has been written with its points.
        let (last, mut notes, read_marks) = {
            let _gate = self.rollups.gate.write().unwrap_or_else(|e| e.into_inner());
            let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
            // Rows the flushes fold themselves (none is being sealed: that holds the gate) are taken back by a full
            // fold, whose range tombstone deletes their stored marks, and by a fold of their metric, whose query
            // reads their rollups next; as whole rows, their earlier fragments were never noted.
            let owned = match select {
                Select::All => pending.owned.take_all(),
                Select::Metric(m) => pending.owned.take_metric(m, self.layout.metric_at()),
                Select::Closed(_) => Vec::new(),
            };
            self.rollups.sealing_len.store(pending.owned.sealing_len(), Ordering::Release);
            let (mut notes, read_marks) = match select {
                Select::All => {
                    self.rollups.unnoted.store(false, Ordering::Release);
                    (pending.take(None, self.layout.metric_at()), true)
                }
                Select::Metric(m) => {
                    let mut notes = pending.take(Some(m), self.layout.metric_at());
                    // Rows of the metric another fold has taken and not written yet (a full fold that let go of
                    // the lock to hand it to a waiting query of some other metric) are folded here too, whole:
                    // otherwise this fold would find them in no note and its query read their old buckets.
                    let in_flight = self.rollups.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                    for row in in_flight.get(*m).into_iter().flat_map(|rows| rows.keys()) {
                        // A row written again since it was taken has a new note of the new points only.
                        notes
                            .entry(row.clone())
                            .and_modify(|note| note.merge(Change::whole_row(0)))
                            .or_insert(Change::whole_row(0));
                    }
                    (notes, self.rollups.unnoted.load(Ordering::Acquire))
                }
                // Stored marks without a note are left to the full fold.
                Select::Closed(limit) => (pending.take_closed(self.layout.metric_at(), *limit), false),
            };
            for (row, points) in owned {
                notes
                    .entry(row)
                    .and_modify(|n| n.merge(Change::whole_row(points)))
                    .or_insert(Change::whole_row(points));
            }
            if notes.is_empty() && !read_marks {
                return Ok(None);
            }
            // Taken rows stay listed for queries until written (see `Store::unfolded_rows`), and while stored marks
            // are read, queries cannot list their rows and fold instead.
            self.take_in_flight(notes.keys());
            if read_marks {
                self.rollups.reading_marks.store(true, Ordering::Release);
            }
            (self.rollups.generation.fetch_add(1, Ordering::AcqRel), notes, read_marks)
        };
        // Per raw row, what changed: the note, or for a stored mark without one the whole row.
        let mut rows: std::collections::BTreeMap<Vec<u8>, Change> = notes.drain().collect();
        if read_marks {
            let mut from_marks = Vec::new();
            let read = self.read_marks(last, &of_metric, &mut rows, &mut from_marks);
            if let Err(e) = read {
                // Marks not read are marks without notes (a full fold cleared `unnoted` as it took the notes), set
                // again before readers may trust the lists.
                self.rollups.unnoted.store(true, Ordering::Release);
                self.land_in_flight(rows.keys(), false);
                self.rollups.reading_marks.store(false, Ordering::Release);
                return Err(e);
            }
            self.take_in_flight(from_marks.iter());
            self.rollups.reading_marks.store(false, Ordering::Release);
        }
        Ok(Some((last, rows.into_iter().collect())))
    }

    /// Adds to `rows` the rows of the stored marks of generations up to `last` (of the rows `of_metric` takes)
    /// that a fold has not done yet; rows it adds are also pushed to `added`.
    fn read_marks(
        &self,
        last: u64,
        of_metric: &dyn Fn(&[u8]) -> bool,
        rows: &mut std::collections::BTreeMap<Vec<u8>, Change>,
        added: &mut Vec<Vec<u8>>,
    ) -> Result<(), StoreError> {
        let refolded = self.rollups.refolded.lock().unwrap_or_else(|e| e.into_inner());
        let mut iter = self
            .engine
            .cursor(CF_ROLLUP_DIRTY, ReadHints::default())
            .ok_or_else(|| StoreError::Corrupt(format!("no table {CF_ROLLUP_DIRTY}")))?;
        iter.seek(&(self.rollups.folded_through.load(Ordering::Acquire) + 1).to_be_bytes());
        while iter.valid() {
            let (key, value) = (iter.key(), iter.value());
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
                // A mark that is not the one the row's note belongs to (stored before a restart, or past the
                // notes' capacity) says nothing of what changed: the whole row.
                match rows.get_mut(row) {
                    Some(note) if note.generation == generation => {}
                    Some(note) => note.merge(Change::whole_row(0)),
                    None => {
                        rows.insert(row.to_vec(), Change::whole_row(counter(value)));
                        added.push(row.to_vec());
                    }
                }
            }
            iter.next();
        }
        iter.status()
    }

    /// Lists rows a fold has taken as in flight (see `Rollups::in_flight`). Rows taken from the notes are added
    /// while the `pending` lock is held.
    pub(super) fn take_in_flight<'r>(&self, rows: impl Iterator<Item = &'r Vec<u8>>) {
        let at = self.layout.metric_at();
        let mut in_flight = self.rollups.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        for row in rows {
            let metric = row.get(at.clone()).unwrap_or_default();
            let of_metric = match in_flight.get_mut(metric) {
                Some(rows) => rows,
                None => in_flight.entry(metric.to_vec()).or_default(),
            };
            *of_metric.entry(row.clone()).or_default() += 1;
        }
    }

    /// Takes rows off the in-flight list: once their buckets are written, or when the fold stops before
    /// writing them (`written` false), leaving them to a fold that reads the stored marks (their marks stay
    /// until a full fold has done them).
    pub(super) fn land_in_flight<'r>(&self, rows: impl Iterator<Item = &'r Vec<u8>>, written: bool) {
        let at = self.layout.metric_at();
        let mut in_flight = self.rollups.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows = rows.peekable();
        if !written && rows.peek().is_some() {
            // Before any row leaves the list: a reader that no longer finds one finds `unnoted` set.
            self.rollups.unnoted.store(true, Ordering::Release);
        }
        for row in rows {
            let metric = row.get(at.clone()).unwrap_or_default();
            if let Some(of_metric) = in_flight.get_mut(metric) {
                if let Some(n) = of_metric.get_mut(row) {
                    *n -= 1;
                    if *n == 0 {
                        of_metric.remove(row);
                    }
                }
                if of_metric.is_empty() {
                    in_flight.remove(metric);
                }
            }
        }
    }

    /// Folds one chunk of raw rows: reads them and the rollup rows they fold into, and writes the buckets in one
    /// batch.
    fn fold_chunk(&self, chunk: &[(Vec<u8>, Change)], timing: &mut FoldTiming) -> Result<(), StoreError> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        // The fold reads each changed row once: keeping those blocks would fill the block cache with what ingest
        // wrote (RSS) and push out what queries read.
        let no_fill = ReadHints { fill_cache: false };
        let mut batch = WriteBatch::default();
        let mut buckets_written = 0u64;
        let mut late = 0u64;
        let keys: Vec<&[u8]> = chunk.iter().map(|(k, _)| k.as_slice()).collect();
        let t = std::time::Instant::now();
        let read = self.prefetch_rollups(&keys, no_fill)?;
        timing.in_prefetch += t.elapsed();
        // One point buffer for the chunk's rows.
        let mut points = Vec::new();
        self.engine.get_many(CF_DATA, &keys, true, no_fill, &mut |i, raw| {
            let t = std::time::Instant::now();
            let _time = Elapsed(&mut timing.in_rows, t);
            let (key, change) = &chunk[i];
            let raw = raw.unwrap_or_default();
            let hour = codec::row_base_time(key, sw, mw);
            if let Err(e) = codec::row_values(hour, raw, &mut points) {
                tracing::warn!(row = %codec::uid_to_string(key), error = %e, "raw row not rolled up");
                return Ok(());
            }
            let (written, was_rolled) = self.fold_row(&mut batch, key, hour, &points, change, &read)?;
            buckets_written += written;
            if was_rolled {
                late += change.points.max(0) as u64;
            }
            Ok(())
        })?;
        let t = std::time::Instant::now();
        self.engine.write(batch, Durability::Logged)?;
        timing.in_write += t.elapsed();
        self.metrics.rollups(buckets_written, late);
        Ok(())
    }

    /// Folds `rows` in chunks on as many threads as there are cores (at most [`QUERY_FOLD_THREADS`]), each
    /// thread taking the next chunk: raw rows are independent (a chunk writes only the rollup rows of its own raw
    /// rows; rows of longer spans get operands, which commute). Returns the rows folded: fewer than all when the
    /// folds were abandoned (the rest is then left to the next full fold, as the one-thread loop leaves it).
    fn fold_chunks_side_by_side(
        &self,
        rows: &[(Vec<u8>, Change)],
        timing: &mut FoldTiming,
    ) -> Result<usize, StoreError> {
        let threads = cores().clamp(1, QUERY_FOLD_THREADS);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let folded = std::sync::atomic::AtomicUsize::new(0);
        let work = || -> Result<FoldTiming, StoreError> {
            let mut timing = FoldTiming::default();
            while !self.folds_abandoned() {
                let start = next.fetch_add(FOLD_CHUNK, Ordering::Relaxed);
                if start >= rows.len() {
                    break;
                }
                let chunk = &rows[start..(start + FOLD_CHUNK).min(rows.len())];
                let outcome = self.fold_chunk(chunk, &mut timing);
                self.land_in_flight(chunk.iter().map(|(row, _)| row), outcome.is_ok());
                outcome?;
                folded.fetch_add(chunk.len(), Ordering::Relaxed);
            }
            Ok(timing)
        };
        let results: Vec<Result<FoldTiming, StoreError>> = std::thread::scope(|scope| {
            let others: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
            let mut results = vec![work()];
            results.extend(others.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
            results
        });
        // Chunks are taken in order, and every chunk taken is written or let go by its thread.
        let taken = next.into_inner().min(rows.len());
        self.land_in_flight(rows[taken..].iter().map(|(row, _)| row), false);
        for result in results {
            let t = result?;
            timing.in_prefetch += t.in_prefetch;
            timing.in_rows += t.in_rows;
            timing.in_write += t.in_write;
        }
        let folded = folded.into_inner();
        if folded < rows.len() {
            tracing::info!(folded, left = rows.len() - folded, "fold abandoned: stopping");
        }
        Ok(folded)
    }

    /// Waits (at most [`HAND_OFF_WAIT`]) until the folds of `metrics` a full fold let in have taken the lock.
    fn wait_for_hand_off(&self, metrics: &[Vec<u8>]) {
        let asked = std::time::Instant::now();
        while asked.elapsed() < HAND_OFF_WAIT
            && self.rollups.wanted.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|w| metrics.contains(w))
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Records a finished fold: the rows a fold of one metric or of passed hours did (the next full fold skips
    /// their marks), or for a full fold the deletion of every mark through `last`.
    fn finish_fold(&self, select: &Select<'_>, rows: &[(Vec<u8>, Change)], last: u64) -> Result<(), StoreError> {
        let mut refolded = self.rollups.refolded.lock().unwrap_or_else(|e| e.into_inner());
        match select {
            Select::Closed(_) if self.rollups.unnoted.load(Ordering::Acquire) => {
                // Stored marks without a note (from before a restart) may be older marks of these rows, which a
                // fold of passed hours, working from the notes' changes only, did not handle: recording the rows
                // as done through `last` would make the next folds skip those marks. They stay for the next full
                // fold, or a query's fold, which read the stored marks. (Only a full fold clears `unnoted`, and
                // it waits for this fold's lock.)
            }
            Select::Metric(_) | Select::Closed(_) => {
                for (row, _) in rows {
                    refolded.insert(row.clone(), last);
                }
            }
            Select::All => {
                // Every mark up to `last` is handled: one range tombstone.
                let mut batch = WriteBatch::default();
                batch.delete_range(CF_ROLLUP_DIRTY, &[0u8; 8], &(last + 1).to_be_bytes());
                self.engine.write(batch, Durability::Logged)?;
                refolded.retain(|_, g| *g > last);
                self.rollups.folded_through.store(last, Ordering::Release);
                let mut flushed = self.rollups.marks_flushed.lock().unwrap_or_else(|e| e.into_inner());
                if flushed.elapsed() >= MARKS_FLUSH_EVERY {
                    if let Some(m) = self.engine.maintenance() {
                        m.flush_table(CF_ROLLUP_DIRTY)?;
                    }
                    *flushed = std::time::Instant::now();
                }
            }
        }
        Ok(())
    }

    /// The fold lock, for a fold that the daemon's folds of passed hours step aside for (see `fold_waiting`).
    fn fold_lock_ahead_of_passed_hours(&self) -> std::sync::MutexGuard<'_, ()> {
        self.rollups.fold_waiting.fetch_add(1, Ordering::AcqRel);
        let locked = self.rollups.fold_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.rollups.fold_waiting.fetch_sub(1, Ordering::AcqRel);
        locked
    }

    /// The rollup rows [`Store::fold_row`] reads for the raw rows `keys` (one chunk of a fold), read with one
    /// batched read per family instead of a read per row and interval: on HBase each of those was a round trip
    /// of its own, two per raw row for the first interval alone (bench/RESULTS.md, the 22:40 breakdown).
    fn prefetch_rollups(&self, keys: &[&[u8]], read: ReadHints) -> Result<Prefetched, StoreError> {
        // Keyed by the family names Rollups keeps: no name is copied per raw row.
        let mut wanted: HashMap<&str, Vec<Vec<u8>>> = HashMap::new();
        for raw_key in keys {
            let hour = codec::row_base_time(raw_key, self.layout.salt.width, self.layout.uid_widths[0]);
            let expired = self.fold_expired(hour);
            for (n, (interval, (family, auto_family))) in
                self.rollups.auto.iter().zip(&self.rollups.auto_families).enumerate()
            {
                let key = self.rollup_key(raw_key, hour, interval);
                if n == 0 || expired || interval.row_span == RowSpan::Hours(1) {
                    wanted.entry(auto_family.as_str()).or_default().push(key.clone());
                }
                if n == 0 || expired {
                    wanted.entry(family.as_str()).or_default().push(key);
                }
            }
        }
        let mut by_family = HashMap::new();
        for (family, mut rows) in wanted {
            rows.sort_unstable();
            rows.dedup();
            let row_refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
            let mut found = Vec::with_capacity(rows.len());
            self.engine.get_many(family, &row_refs, true, read, &mut |i, value| {
                found.push((i, value.map(<[u8]>::to_vec)));
                Ok(())
            })?;
            let values: HashMap<Vec<u8>, Vec<u8>> =
                found.into_iter().filter_map(|(i, value)| Some((std::mem::take(&mut rows[i]), value?))).collect();
            by_family.insert(family.to_string(), values);
        }
        Ok(Prefetched { by_family })
    }

    /// Whether raw hour `hour` lies wholly past the raw retention (see [`Store::fold_row`]).
    pub(super) fn fold_expired(&self, hour: u32) -> bool {
        (i64::from(hour) + 3600) * 1000 <= self.retention.cut_ms(CF_DATA)
    }

    /// The key of the row of `interval` that raw row `raw_key` (of raw hour `hour`) folds into.
    fn rollup_key(&self, raw_key: &[u8], hour: u32, interval: &RollupInterval) -> Vec<u8> {
        let at = self.layout.salt.width + self.layout.uid_widths[0];
        let mut key = raw_key.to_vec();
        key[at..at + 4].copy_from_slice(&interval.base_time(i64::from(hour)).to_be_bytes());
        key
    }

    /// Writes the buckets of one raw hour row into every automatic interval (their `<table>:a` rows, see
    /// [`rollup_rows`]). Returns the buckets written and whether rollups of this hour existed before (so the
    /// points now folded arrived late).
    pub(super) fn fold_row(
        &self,
        batch: &mut WriteBatch,
        raw_key: &[u8],
        hour: u32,
        points: &[codec::TimedValue],
        change: &Change,
        read: &Prefetched,
    ) -> Result<(u64, bool), StoreError> {
        let mut written = 0u64;
        let mut was_rolled = false;
        // A raw hour wholly past the raw retention may already have lost its older points to compaction (late
        // points re-create the row): there the rollups are the record, and a bucket is recomputed only from a
        // row that holds at least as many points as the bucket counted, and never deleted.
        let expired = self.fold_expired(hour);
        let mut each_interval = buckets_each(points, self.rollups.auto.iter().map(|i| i.interval_secs)).into_iter();
        for (n, (interval, (family, auto_family))) in
            self.rollups.auto.iter().zip(&self.rollups.auto_families).enumerate()
        {
            let interval_buckets = each_interval.next().unwrap_or_default();
            let key = self.rollup_key(raw_key, hour, interval);
            let base = interval.base_time(i64::from(hour));
            // A row of this one raw hour (a row span of an hour) that `:a` does not hold yet is written whole:
            // reads then have nothing to merge (they merge a row's operands on every read until a compaction
            // does). Folds are the only writers of `:a`, one fold at a time, and the raw rows of a fold's chunks
            // are distinct (series, hour)s, so nothing written meanwhile is lost. Rows of longer spans get
            // operands (several raw hours of one chunk go to the same row).
            let hourly = interval.row_span == RowSpan::Hours(1);
            let auto = if n == 0 || expired || hourly { read.get(auto_family, &key) } else { None };
            let fresh = hourly && auto.is_none();
            // The counts the interval's buckets of this hour hold now (bucket start ms -> count).
            let mut counted: HashMap<i64, i64> = HashMap::new();
            if n == 0 || expired {
                let (lo, hi) = (i64::from(hour) * 1000, (i64::from(hour) + 3600) * 1000);
                let count_id = self.rollups.auto_ids[1];
                let table = read.get(family, &key);
                let mut values = vec![Vec::new()];
                self.rollup_values(&key, auto, table, base, interval, &[count_id], lo, hi, &mut values)?;
                if n == 0 {
                    // The first interval's counts of this hour tell whether it was folded before.
                    was_rolled = !values[0].is_empty();
                }
                // Only an expired hour looks its buckets' counts up (a map per raw row was ~6% of a fold).
                if expired {
                    counted = values[0].iter().map(|&(start, count)| (start, count.as_f64() as i64)).collect();
                }
            }
            let width = i64::from(interval.interval_secs) * 1000;
            let slot =
                |start_ms: i64| ((start_ms / 1000 - i64::from(base)) / i64::from(interval.interval_secs)) as usize;
            let mut row = Slots::new(interval.intervals as usize);
            let mut any = false;
            for b in interval_buckets {
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
                // Where the engine has no merge operator (HBase) a merge is the blind write and a put a delete
                // first; the row is absent anyway.
                (true, true) if self.node_local => batch.put(auto_family, &key, &row.encode()),
                (true, _) => batch.merge(auto_family, &key, &row.encode()),
                _ => {}
            }
        }
        Ok((written, was_rolled))
    }
}
