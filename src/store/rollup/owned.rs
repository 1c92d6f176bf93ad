//! Rows the series table's flushes fold themselves (issue 22 item 5).
//!
//! A burst of history (a backfill, a collector catching up, data set B) writes hour after hour of every series
//! faster than the daemon's fold, which runs at a low CPU priority and reads each raw row back, can follow: right
//! after B's burst 15,000-19,500 of the 24,000 rows of a metric's day were not folded, and the first query read
//! them all raw (~20 us each; 218-355 ms against VictoriaMetrics' 139-150). The flush already holds every point
//! of such a row as it writes it, so for a row it saw start it keeps a copy of the row's columns, and once the
//! series moves on to a later hour it queues the row for its seal: [`Store::seal_owned`] computes the row's
//! rollups from the copy (the fold's own [`Store::fold_row`], so bit for bit what the fold would write) and
//! writes them. Seals run off the flush, which readers wait for: the daemon's seal task takes the queue, and
//! writers that find [`SEALING_BOUND`] rows queued seal a chunk themselves, so the seals keep up with the burst
//! (it pays for them: B's ingest ~20% slower) and a query right after it reads rollups, not raw rows.
//!
//! A row is owned only when certain to be whole in the copy:
//! * its hour ended over an hour before the wall clock (live rows stay with the fold: every live series would
//!   otherwise keep a copy of its current hour), and lies inside the raw retention;
//! * its series had no data at that hour or later: the newest hour of the series, read once from the series
//!   index, then kept up to date by every flush (any other writer of raw rows gives every owned row back);
//! * its points arrive in strictly increasing time, each fragment after the last;
//! * the copies hold less than [`COPIES_BUDGET`].
//!
//! An owned row has a stored mark for every fragment (a crash loses the copies, and the fold after the restart
//! reads the marks), but no note: the daemon's folds of passed hours leave it alone, and grid reads list it
//! among the rows not folded yet until its seal is written. A row is given back to the folds as a note of its
//! whole row when a point breaks the order, when a fold of its metric or a full fold takes it (both under the
//! gate, which a seal holds from taking its rows through its write), when another writer changes it or raw rows
//! past the series table, and when a flush's write fails. `rtsd.rollups.fold_on_flush = false` leaves every row
//! to the folds.
use super::fold::Prefetched;
use super::*;
use crate::store::Layout;

/// An owned row's copy, until its rollups are written.
pub(super) struct OpenRow {
    pub(super) key: Vec<u8>,
    hour: u32,
    /// The newest instant in the copy (ms).
    last_ms: i64,
    columns: Vec<u8>,
    pub(super) points: i64,
}

/// The rows the flush folds itself; kept with the notes, under their lock.
#[derive(Default)]
pub(super) struct Owned {
    /// Per series (TSUID): the newest hour with data, known for certain.
    newest: HashMap<Vec<u8>, u32>,
    /// Per series (TSUID): its owned row still being written.
    open: HashMap<Vec<u8>, OpenRow>,
    /// Owned rows whose series moved on, waiting for [`Store::seal_owned`] (oldest first). A row given back
    /// meanwhile stays here until a seal meets it and skips it: it is no longer in `writing`.
    sealing: std::collections::VecDeque<OpenRow>,
    /// The owned rows whose series moved on, by key, with their points, until their rollups are written.
    writing: HashMap<Vec<u8>, i64>,
    /// The copies' bytes.
    bytes: usize,
}

/// How much the copies may hold (B: 4,000 rows of ~1.5 KB being written, and up to [`SEALING_BOUND`] queued).
const COPIES_BUDGET: usize = 32 << 20;

/// Series whose newest hour the flushes remember; past it they forget them all and read the index again.
const NEWEST_CAPACITY: usize = 1 << 20;

/// Owned rows waiting for their seal past which a committing writer seals a chunk itself (B: one hour of its
/// 4,000 series).
pub const SEALING_BOUND: usize = 4096;

/// Rows a writer past [`SEALING_BOUND`] seals at once.
pub const SEAL_CHUNK: usize = 512;

/// A raw hour counts as history once it ended this long before the wall clock.
const HISTORY_AFTER_S: i64 = 3600;

impl Owned {
    /// Every owned row, taken out: (key, points).
    pub(super) fn take_all(&mut self) -> Vec<(Vec<u8>, i64)> {
        let mut rows: Vec<(Vec<u8>, i64)> = self.writing.drain().collect();
        rows.extend(self.open.drain().map(|(_, r)| (r.key, r.points)));
        self.sealing.clear();
        self.bytes = 0;
        rows
    }

    /// The owned rows of metric `metric` (a row key's metric UID at `at`), taken out.
    pub(super) fn take_metric(&mut self, metric: &[u8], at: std::ops::Range<usize>) -> Vec<(Vec<u8>, i64)> {
        let of = |key: &[u8]| key.get(at.clone()) == Some(metric);
        let mut rows = Vec::new();
        let series: Vec<Vec<u8>> = self.open.iter().filter(|(_, r)| of(&r.key)).map(|(s, _)| s.clone()).collect();
        for s in series {
            if let Some(r) = self.open.remove(&s) {
                self.bytes -= r.columns.capacity();
                rows.push((r.key, r.points));
            }
        }
        let bytes = &mut self.bytes;
        self.sealing.retain(|r| {
            let keep = !of(&r.key);
            if !keep {
                *bytes -= r.columns.capacity();
            }
            keep
        });
        let keys: Vec<Vec<u8>> = self.writing.keys().filter(|k| of(k)).cloned().collect();
        for k in keys {
            if let Some(points) = self.writing.remove(&k) {
                rows.push((k, points));
            }
        }
        rows
    }

    /// Whether raw row `key` is owned.
    pub(super) fn owns(&self, key: &[u8], layout: &Layout) -> bool {
        if self.open.is_empty() && self.writing.is_empty() {
            return false;
        }
        self.writing.contains_key(key)
            || self.open.get(layout.tsuid_of_row(key).as_bytes()).is_some_and(|r| r.key == key)
    }

    /// Stops owning raw row `key` (see [`Owned::owns`]); the caller notes its whole row.
    pub(super) fn give_back(&mut self, key: &[u8], layout: &Layout) {
        let tsuid = layout.tsuid_of_row(key);
        if self.open.get(tsuid.as_bytes()).is_some_and(|r| r.key == key) {
            if let Some(r) = self.open.remove(tsuid.as_bytes()) {
                self.bytes -= r.columns.capacity();
            }
        }
        self.writing.remove(key);
    }

    /// Owned rows waiting for their seal.
    pub(super) fn sealing_len(&self) -> usize {
        self.sealing.len()
    }

    /// The keys of the owned rows of `metric`: all of them are not folded yet.
    pub(super) fn rows_of<'a>(
        &'a self,
        metric: &'a [u8],
        at: std::ops::Range<usize>,
    ) -> impl Iterator<Item = &'a Vec<u8>> + 'a {
        let of = move |key: &&Vec<u8>| key.get(at.clone()) == Some(metric);
        let open = self.open.values().map(|r| &r.key);
        open.chain(self.writing.keys()).filter(of)
    }
}

/// One row a flush slice writes, as [`Store::plan_owned`] needs it.
pub(in crate::store) struct Flushed<'r> {
    pub(in crate::store) key: &'r [u8],
    /// The fragment's cells.
    pub(in crate::store) columns: &'r [u8],
    /// Whether its points are in strictly increasing time.
    pub(in crate::store) in_order: bool,
    /// Its first and last instants (ms).
    pub(in crate::store) first_ms: i64,
    pub(in crate::store) last_ms: i64,
    pub(in crate::store) points: i64,
}

/// What a flush does with one row of a slice (see [`Store::plan_owned`]).
pub(in crate::store) enum RowPlan {
    /// Not owned: marked and noted as every write is.
    Noted,
    /// Owned: a stored mark, no note.
    Owned,
    /// Was owned, given back: noted as its whole row.
    GivenBack,
}

impl Store {
    /// Whether flushes own rows here: automatic rollups on the embedded engine (on a shared engine other nodes
    /// write the same rows).
    pub(in crate::store) fn owns_rows(&self) -> bool {
        self.rollups.auto() && self.rollups.settings.fold_on_flush && !self.rollups.read_only && self.node_local
    }

    /// Plans a flush slice (`rows`, in key order) with the gate held: takes rows it may own, appends fragments
    /// to owned rows, and queues for [`Store::seal_owned`] the owned rows whose series moved on. Rows it starts
    /// owning are listed before their first fragment is readable, so a grid read never takes them for folded.
    pub(super) fn plan_owned(&self, rows: &[Flushed<'_>]) -> Vec<RowPlan> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let now_s = crate::store::tables::unix_now();
        let cut_ms = self.retention.cut_ms(CF_DATA);
        let history = |hour: u32| {
            let hour_ms = i64::from(hour) * 1000;
            i64::from(hour) + 3600 + HISTORY_AFTER_S <= now_s && hour_ms >= cut_ms && !self.fold_expired(hour)
        };
        let mut plan = Vec::with_capacity(rows.len());
        let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
        let owned = &mut pending.owned;
        let mut tsuid = Vec::with_capacity(64);
        for &Flushed { key, columns, in_order, first_ms, last_ms, points } in rows {
            let hour = codec::row_base_time(key, sw, mw);
            if owned.open.is_empty() && owned.newest.is_empty() && !history(hour) {
                // Live writes with nothing owned: the common case costs nothing more.
                plan.push(RowPlan::Noted);
                continue;
            }
            if owned.writing.contains_key(key) {
                // Points for an hour whose series had moved on: the fold reads the row as stored.
                owned.give_back(key, &self.layout);
                plan.push(RowPlan::GivenBack);
                continue;
            }
            codec::tsuid_from_row_key_into(key, sw, mw, &mut tsuid);
            let mut row_plan = RowPlan::Noted;
            match owned.open.get_mut(tsuid.as_slice()) {
                Some(open) if open.key == key => {
                    if in_order && first_ms > open.last_ms {
                        let before = open.columns.capacity();
                        open.columns.extend_from_slice(columns);
                        open.last_ms = last_ms;
                        open.points += points;
                        owned.bytes += open.columns.capacity() - before;
                        row_plan = RowPlan::Owned;
                    } else {
                        // Out of order or repeated: the fold reads the row as stored.
                        owned.give_back(key, &self.layout);
                        row_plan = RowPlan::GivenBack;
                    }
                }
                Some(open) if open.hour < hour => {
                    // The series moved on: its owned row is whole.
                    if let Some(open) = owned.open.remove(tsuid.as_slice()) {
                        owned.writing.insert(open.key.clone(), open.points);
                        owned.sealing.push_back(open);
                    }
                }
                // A write to an hour before the owned one: that row is not owned, the owned one stays.
                Some(_) => {}
                None => {}
            }
            if matches!(row_plan, RowPlan::Noted) && !owned.open.contains_key(tsuid.as_slice()) && history(hour) {
                let newest = match owned.newest.get(tsuid.as_slice()) {
                    Some(&n) => Some(n),
                    // The first time: the index tells (`None` when it cannot be read: nothing is assumed).
                    None => crate::store::series::last_hour(self.engine.as_ref(), &tsuid).ok().map(|n| n.unwrap_or(0)),
                };
                if let Some(newest) = newest {
                    if hour > newest && owned.bytes < COPIES_BUDGET && in_order {
                        owned.bytes += columns.len();
                        let open = OpenRow { key: key.to_vec(), hour, last_ms, columns: columns.to_vec(), points };
                        owned.open.insert(tsuid.clone(), open);
                        row_plan = RowPlan::Owned;
                    }
                    if owned.newest.len() >= NEWEST_CAPACITY {
                        owned.newest.clear();
                    }
                    owned.newest.insert(tsuid.clone(), newest.max(hour));
                }
            } else if let Some(n) = owned.newest.get_mut(tsuid.as_slice()) {
                *n = (*n).max(hour);
            }
            plan.push(row_plan);
        }
        self.rollups.sealing_len.store(owned.sealing.len(), Ordering::Release);
        plan
    }

    /// Adds to `batch` the rollups of owned rows whose series moved on (`Store::fold_row` on their copies, so
    /// exactly what a fold of the stored rows writes). Returns the buckets written and the rows whose copies
    /// could not be decoded (not sealed: the folds take them back).
    fn seal_into(&self, batch: &mut WriteBatch, rows: &[OpenRow]) -> (u64, Vec<usize>) {
        let (empty, mut points, mut buckets, mut failed) = (Prefetched::default(), Vec::new(), 0, Vec::new());
        for (i, row) in rows.iter().enumerate() {
            // With an empty prefetch `fold_row` reads nothing, so only a copy that does not decode fails (and
            // then nothing of it is in the batch); its whole row goes back to the folds.
            let folded = codec::row_values(row.hour, &row.columns, &mut points)
                .map_err(|e| StoreError::Corrupt(format!("owned row {}: {e}", codec::uid_to_string(&row.key))))
                .and_then(|()| {
                    self.fold_row(batch, &row.key, row.hour, &points, &Change::whole_row(row.points), &empty)
                });
            match folded {
                Ok((written, _)) => buckets += written,
                Err(e) => {
                    tracing::warn!(error = %e, "a row the flush folds could not be folded from its copy; the folds take it");
                    failed.push(i);
                }
            }
        }
        (buckets, failed)
    }

    /// Owned rows whose series moved on and whose rollups are not written yet.
    pub fn sealing_backlog(&self) -> usize {
        if !self.owns_rows() {
            return 0;
        }
        self.rollups.sealing_len.load(Ordering::Acquire)
    }

    /// Writes the rollups of up to `limit` owned rows whose series moved on, from their copies; returns the rows
    /// taken. Off the flush, so that readers settling the series table never wait for it (with the seals in
    /// the flush, a settle right after data set B's burst waited 7-225 ms, and the flushes fell behind): the
    /// daemon's seal task takes the queue, and writers that find [`SEALING_BOUND`] rows queued seal a chunk
    /// themselves (back-pressure, as past the series table's bound), so the seals keep up with a burst. It holds
    /// the gate shared from taking the rows through the write: a fold takes owned rows back only under the gate,
    /// so its write of a row given back comes after this one.
    pub fn seal_owned(&self, limit: usize) -> Result<usize, StoreError> {
        if !self.owns_rows() {
            return Ok(0);
        }
        let _gate = self.rollups.gate.read().unwrap_or_else(|e| e.into_inner());
        let rows: Vec<OpenRow> = {
            let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
            let owned = &mut pending.owned;
            let mut rows = Vec::with_capacity(limit.min(owned.sealing.len()));
            while rows.len() < limit {
                let Some(row) = owned.sealing.pop_front() else { break };
                owned.bytes -= row.columns.capacity();
                // Not given back since it was queued.
                if owned.writing.contains_key(&row.key) {
                    rows.push(row);
                }
            }
            self.rollups.sealing_len.store(owned.sealing.len(), Ordering::Release);
            rows
        };
        if rows.is_empty() {
            return Ok(0);
        }
        let mut batch = WriteBatch::default();
        let (buckets, failed) = self.seal_into(&mut batch, &rows);
        let written = match self.failing_seal_write() {
            Some(e) => Err(e),
            None => self.engine.write(batch, Durability::Logged),
        };
        let generation = self.rollups.generation.load(Ordering::Acquire);
        let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = Vec::with_capacity(rows.len());
        let taken = rows.len();
        for (i, row) in rows.into_iter().enumerate() {
            // A row given back meanwhile (another writer changed it) left `writing` with a note of its own.
            if pending.owned.writing.remove(&row.key).is_none() {
                continue;
            }
            if written.is_ok() && failed.binary_search(&i).is_err() {
                done.push(row.key);
            } else {
                // Its earlier fragments were never noted.
                pending.note(self.layout.metric_at(), row.key, Change::whole_row(row.points));
            }
        }
        drop(pending);
        written?;
        // Their stored marks through this generation are done: the next full fold skips them.
        let mut refolded = self.rollups.refolded.lock().unwrap_or_else(|e| e.into_inner());
        for row in done {
            refolded.insert(row, generation);
        }
        drop(refolded);
        self.metrics.rollups(buckets, 0);
        Ok(taken)
    }

    /// [`Store::seal_owned`] in chunks, up to `limit` rows; a failure is logged (once a minute) and leaves the
    /// rows to the folds.
    pub fn seal_in_background(&self, limit: usize) {
        let mut sealed = 0;
        while sealed < limit {
            match self.seal_owned(SEAL_CHUNK.min(limit - sealed)) {
                Ok(0) => break,
                Ok(n) => sealed += n,
                Err(e) => {
                    static FAILED: crate::logs::Throttle =
                        crate::logs::Throttle::new(std::time::Duration::from_secs(60));
                    if let Some(earlier) = FAILED.allow() {
                        tracing::warn!(error = %e, earlier, "writing the rollups of rows the flushes folded failed; the folds take them");
                    }
                    break;
                }
            }
        }
    }

    /// Gives every owned row back to the folds: another writer changed raw rows, or a flush's write failed
    /// (its fragments went into the copies but not into the rows).
    pub(in crate::store) fn give_back_owned(&self) {
        if !self.owns_rows() {
            return;
        }
        let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
        let rows = pending.owned.take_all();
        pending.owned.newest.clear();
        self.rollups.sealing_len.store(0, Ordering::Release);
        for (row, points) in rows {
            pending.note(self.layout.metric_at(), row, Change::whole_row(points));
        }
    }
}
