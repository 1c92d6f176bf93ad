//! Marks: which raw rows changed since they were last folded (see the parent module), stamped with a
//! generation in the same write as their points.
use super::*;

/// What was written to a raw row since it was marked: points, and the span of their instants (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Change {
    pub(super) points: i64,
    pub(super) first_ms: i64,
    pub(super) last_ms: i64,
    /// The generation of the stored mark this note belongs to (0: none yet).
    pub(super) generation: u64,
}

impl Change {
    /// A whole row of unknown changes (a stored mark without its note, after a restart; a bulk load).
    pub(super) fn whole_row(points: i64) -> Change {
        Change { points, first_ms: i64::MIN, last_ms: i64::MAX, generation: 0 }
    }

    pub(super) fn merge(&mut self, other: Change) {
        self.points += other.points;
        self.first_ms = self.first_ms.min(other.first_ms);
        self.last_ms = self.last_ms.max(other.last_ms);
    }
}

/// The notes of rows with a stored mark not yet folded, by metric (a row key's metric UID): a query's fold of its
/// metric takes that metric's notes without walking every other metric's (right after a burst of writes that was
/// every raw row of the burst, ~0.5 ms per query for data set B's 96 000 rows).
///
/// They also count the rows per raw hour and know the newest hour noted, so the daemon can fold the hours a burst
/// has moved past while it goes on ([`Store::fold_closed`]) instead of leaving them to the next query.
pub(super) struct Notes {
    pub(super) by_metric: HashMap<Vec<u8>, HashMap<Vec<u8>, Change>>,
    /// Rows the series table's flushes fold themselves (see [`owned`](super::owned)).
    pub(super) owned: super::owned::Owned,
    pub(super) len: usize,
    /// Noted rows per raw hour (base time, seconds).
    by_hour: std::collections::BTreeMap<u32, usize>,
    /// The newest instant (ms) noted, of changes that know theirs.
    newest_ms: i64,
}

/// How long after the newest instant written passed its end an hour counts as passed ([`Notes::closed`]): points
/// of a collector a little behind the others still land in the hour before.
const PASSED_AFTER_MS: i64 = 60_000;

/// A row key's raw hour (base time), read right after the metric UID at `metric`.
fn hour_of(row: &[u8], metric: &std::ops::Range<usize>) -> u32 {
    row.get(metric.end..metric.end + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_be_bytes)
}

impl Default for Notes {
    fn default() -> Notes {
        Notes {
            by_metric: HashMap::new(),
            owned: Default::default(),
            len: 0,
            by_hour: Default::default(),
            newest_ms: i64::MIN,
        }
    }
}

impl Notes {
    pub(super) fn get_mut(&mut self, metric: &[u8], row: &[u8]) -> Option<&mut Change> {
        self.by_metric.get_mut(metric)?.get_mut(row)
    }

    /// Notes a change to `row` (its metric UID at `metric`), merged into its note if it has one.
    pub(super) fn note(&mut self, metric: std::ops::Range<usize>, row: Vec<u8>, change: Change) {
        let hour = hour_of(&row, &metric);
        let last_ms = change.last_ms;
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
                *self.by_hour.entry(hour).or_default() += 1;
            }
        }
        self.saw(last_ms);
    }

    /// Notes the newest instant of a write (`i64::MAX`: unknown), also of a row that is not noted (one a flush
    /// folds itself): hours older than it pass all the same (see [`Notes::closed`]).
    pub(super) fn saw(&mut self, last_ms: i64) {
        if last_ms != i64::MAX {
            self.newest_ms = self.newest_ms.max(last_ms);
        }
    }

    /// Takes the notes of `metric`, or of every metric.
    pub(super) fn take(&mut self, metric: Option<&[u8]>, at: std::ops::Range<usize>) -> HashMap<Vec<u8>, Change> {
        let taken: HashMap<Vec<u8>, Change> = match metric {
            Some(m) => self.by_metric.remove(m).unwrap_or_default(),
            None => std::mem::take(&mut self.by_metric).into_values().flatten().collect(),
        };
        match metric {
            None => self.by_hour.clear(),
            Some(_) => taken.keys().for_each(|row| self.forget_hour(hour_of(row, &at))),
        }
        self.len -= taken.len();
        taken
    }

    /// Raw hours before this one (base time) are passed: they ended [`PASSED_AFTER_MS`] or more before the newest
    /// instant noted.
    fn passed_before(&self) -> u32 {
        let end = self.newest_ms.saturating_sub(PASSED_AFTER_MS).div_euclid(1000);
        // Hours whose end (base + 3600) is at or before `end`.
        u32::try_from(end - 3600 + 1).unwrap_or(0)
    }

    /// Rows noted of passed hours (see [`Notes::passed_before`]): hours a burst of writes in time order has moved
    /// past.
    pub(super) fn closed(&self) -> usize {
        self.by_hour.range(..self.passed_before()).map(|(_, n)| n).sum()
    }

    /// Takes at most `limit` notes of passed hours (see [`Notes::closed`]), the oldest hours first, of every
    /// metric alike.
    pub(super) fn take_closed(&mut self, at: std::ops::Range<usize>, limit: usize) -> HashMap<Vec<u8>, Change> {
        // The hours to take from: the oldest passed ones that hold `limit` rows, or all passed ones.
        let mut through = None;
        let mut rows_seen = 0;
        for (&hour, &n) in self.by_hour.range(..self.passed_before()) {
            through = Some(hour);
            rows_seen += n;
            if rows_seen >= limit {
                break;
            }
        }
        let Some(through) = through else { return HashMap::new() };
        // Every metric gets its share of the limit first, then what is left goes to any: taking each metric's
        // rows whole, in the map's order, left a burst's backlog on the metrics it lists last (after B's burst
        // one metric still had 19,440 of its 24,000 rows to fold, the first query of it folding them all).
        let share = limit.div_ceil(self.by_metric.len().max(1));
        let mut taken = HashMap::new();
        for quota in [share, limit] {
            for rows in self.by_metric.values_mut() {
                if taken.len() >= limit {
                    break;
                }
                let passed: Vec<Vec<u8>> = rows
                    .keys()
                    .filter(|row| hour_of(row, &at) <= through)
                    .take(quota.min(limit - taken.len()))
                    .cloned()
                    .collect();
                for row in passed {
                    if let Some(change) = rows.remove(&row) {
                        taken.insert(row, change);
                    }
                }
            }
        }
        self.by_metric.retain(|_, rows| !rows.is_empty());
        taken.keys().for_each(|row| self.forget_hour(hour_of(row, &at)));
        self.len -= taken.len();
        taken
    }

    fn forget_hour(&mut self, hour: u32) {
        if let Some(n) = self.by_hour.get_mut(&hour) {
            *n -= 1;
            if *n == 0 {
                self.by_hour.remove(&hour);
            }
        }
    }
}

/// Rows tracked in memory per generation at most; past it, batches store a mark for every row they change.
pub(super) const PENDING_CAPACITY: usize = 1 << 18;

/// The key of a stored mark: `generation ‖ raw row key`, into `key`.
pub(in crate::store) fn mark_key(generation: u64, row: &[u8], key: &mut Vec<u8>) {
    key.clear();
    key.extend_from_slice(&generation.to_be_bytes());
    key.extend_from_slice(row);
}

/// Raw rows a batch changed, until [`Store::commit`] stamps them with a generation.
#[derive(Default)]
pub struct Marks {
    /// `u16 length ‖ row key ‖ i64 points ‖ i64 first ms ‖ i64 last ms`, flat so that marking costs no
    /// allocation per row.
    pub(super) buf: Vec<u8>,
}

impl Marks {
    /// `points` points of one row whose timestamps span `[first_ms, last_ms]` (a series-table flush marks each row
    /// once, not per point).
    pub(in crate::store) fn add_span(&mut self, row: &[u8], points: i64, first_ms: i64, last_ms: i64) {
        self.buf.extend_from_slice(&(row.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(row);
        for v in [points, first_ms, last_ms] {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A row written without per-point detail: its whole hour is recomputed.
    pub(in crate::store) fn add_row(&mut self, row: &[u8], points: i64) {
        let whole = Change::whole_row(points);
        self.add_span(row, whole.points, whole.first_ms, whole.last_ms);
    }

    /// The entries: (row, change).
    pub(super) fn drain(&mut self) -> Vec<(Vec<u8>, Change)> {
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

impl Store {
    /// Writes `batch` with its marks stamped with the current generation, behind the gate (see the module
    /// comment). Every write of raw points goes through here.
    pub(in crate::store) fn write_marked(
        &self,
        batch: WriteBatch,
        marks: &mut Marks,
        durability: Durability,
    ) -> Result<(), StoreError> {
        if !self.rollups.auto() {
            return self.engine.write(batch, durability);
        }
        let entries = marks.drain();
        let _gate = self.rollups.gate.read().unwrap_or_else(|e| e.into_inner());
        self.write_marked_gated(batch, entries, Vec::new(), MarkedBy::OtherWriter, durability)
    }

    /// [`Store::write_marked`] of a series-table flush slice (`rows`: key and columns), whose flush may fold
    /// some rows itself (see [`owned`](super::owned)): their fragments get a stored mark but no note, and those
    /// whose series moved on are queued for their seal.
    pub(in crate::store) fn write_flushed(
        &self,
        batch: WriteBatch,
        marks: &mut Marks,
        rows: &[Flushed<'_>],
    ) -> Result<(), StoreError> {
        if !self.owns_rows() {
            return self.write_marked(batch, marks, Durability::Logged);
        }
        let entries = marks.drain();
        // Held from the plan through the write: no fold takes notes or owned rows in between.
        let _gate = self.rollups.gate.read().unwrap_or_else(|e| e.into_inner());
        let plan = self.plan_owned(rows);
        let mut owned = std::collections::HashSet::new();
        let mut given_back = std::collections::HashSet::new();
        for (row, planned) in rows.iter().zip(&plan) {
            match planned {
                RowPlan::Owned => owned.insert(row.key),
                RowPlan::GivenBack => given_back.insert(row.key),
                RowPlan::Noted => false,
            };
        }
        let (stored_only, mut noted): (Vec<_>, Vec<_>) =
            entries.into_iter().partition(|(row, _)| owned.contains(row.as_slice()));
        for (row, change) in &mut noted {
            if given_back.contains(row.as_slice()) {
                // Its earlier fragments were never noted.
                *change = Change::whole_row(change.points);
            }
        }
        let written = match self.failing_flush_write() {
            Some(e) => Err(e),
            None => self.write_marked_gated(batch, noted, stored_only, MarkedBy::Flush, Durability::Logged),
        };
        if written.is_err() {
            self.give_back_owned();
        }
        written
    }

    /// Tests: the failure a flush's write meets while `fail_flush_writes` is set (a full disk).
    #[cfg(test)]
    fn failing_flush_write(&self) -> Option<StoreError> {
        test_full_disk(&self.fail_flush_writes, "writing the series table's rows")
    }

    #[cfg(not(test))]
    fn failing_flush_write(&self) -> Option<StoreError> {
        None
    }

    /// Tests: the failure a seal's write meets while `fail_seal_writes` is set (a full disk).
    #[cfg(test)]
    pub(super) fn failing_seal_write(&self) -> Option<StoreError> {
        test_full_disk(&self.fail_seal_writes, "writing the rollups of sealed rows")
    }

    #[cfg(not(test))]
    pub(super) fn failing_seal_write(&self) -> Option<StoreError> {
        None
    }

    /// Writes `batch` with stored marks for `entries` (noted once written) and for `stored_only` (never noted),
    /// stamped with the current generation. The caller holds the gate shared.
    fn write_marked_gated(
        &self,
        mut batch: WriteBatch,
        entries: Vec<(Vec<u8>, Change)>,
        stored_only: Vec<(Vec<u8>, Change)>,
        by: MarkedBy,
        durability: Durability,
    ) -> Result<(), StoreError> {
        // Rows already marked in this generation only need their note updated; the others get a stored mark,
        // noted once the write succeeded (a batch that skips its mark must come after a mark that is written).
        let mut fresh = Vec::new();
        {
            let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
            for (row, mut change) in entries {
                if by == MarkedBy::OtherWriter && pending.owned.owns(&row, &self.layout) {
                    // Another writer (a delete, a rewrite) changes a row a flush folds itself: the folds take
                    // it back, whole (its earlier fragments were never noted).
                    pending.owned.give_back(&row, &self.layout);
                    change = Change::whole_row(change.points);
                }
                match pending.get_mut(self.layout.metric_of(&row).unwrap_or_default(), &row) {
                    Some(c) => c.merge(change),
                    None => fresh.push((row, change)),
                }
            }
        }
        let generation = self.stamp_marks(&mut batch, &fresh);
        self.stamp_marks(&mut batch, &stored_only);
        self.engine.write(batch, durability)?;
        let mut pending = self.rollups.pending.lock().unwrap_or_else(|e| e.into_inner());
        for (_, change) in &stored_only {
            pending.saw(change.last_ms);
        }
        for (row, change) in fresh {
            if pending.len >= PENDING_CAPACITY {
                self.rollups.unnoted.store(true, Ordering::Release);
                break;
            }
            pending.note(self.layout.metric_at(), row, Change { generation, ..change });
        }
        Ok(())
    }

    /// Adds stored marks of the current generation for `rows` to `batch`; returns the generation.
    pub(super) fn stamp_marks(&self, batch: &mut WriteBatch, rows: &[(Vec<u8>, Change)]) -> u64 {
        let current = self.rollups.generation.load(Ordering::Acquire);
        let mut key = Vec::with_capacity(64);
        for (row, change) in rows {
            mark_key(current, row, &mut key);
            batch.merge(CF_ROLLUP_DIRTY, &key, &change.points.to_le_bytes());
        }
        current
    }

    /// The generation a bulk load's marks get, `None` without automatic rollups. A bulk load runs without a
    /// daemon on the directory, so no fold runs meanwhile and no gate is needed; a stored mark without a note
    /// has its whole row recomputed, which is what a bulk load's rows need.
    pub(in crate::store) fn bulk_mark_generation(&self) -> Option<u64> {
        self.rollups.auto().then(|| self.rollups.generation.load(Ordering::Acquire))
    }
}

/// Who writes marked rows ([`Store::write_marked_gated`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum MarkedBy {
    /// A series-table flush: it planned its rows already, those it folds itself apart (`write_flushed`).
    Flush,
    /// Any other writer (a delete, a rewrite, a bulk import): a row a flush folds itself goes back to the folds.
    OtherWriter,
}

/// Tests: a full disk's error for a write of `context`, while `fail` is set.
#[cfg(test)]
fn test_full_disk(fail: &std::sync::atomic::AtomicBool, context: &'static str) -> Option<StoreError> {
    fail.load(Ordering::Acquire).then(|| StoreError::Io {
        context,
        source: std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left (test)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row key without salt: metric UID (3 bytes), base time, one tag pair.
    fn row(metric: u8, hour: u32, series: u8) -> Vec<u8> {
        let mut key = vec![0, 0, metric];
        key.extend_from_slice(&hour.to_be_bytes());
        key.extend_from_slice(&[0, 0, 1, 0, 0, series]);
        key
    }

    // The daemon's folds of passed hours during a burst take a share of every metric's rows, so no metric is
    // left with the whole backlog for its first query to fold.
    #[test]
    fn passed_hours_are_taken_from_every_metric_alike() {
        let mut notes = Notes::default();
        let base = 1_356_998_400u32;
        // 4 metrics x 10 series x 3 hours; the newest point in the third hour: the first two have passed.
        for metric in 1..=4 {
            for hour in 0..3u32 {
                for series in 0..10 {
                    let at = i64::from(base + hour * 3600) * 1000;
                    let change = Change { points: 1, first_ms: at, last_ms: at + 3_599_000, generation: 1 };
                    notes.note(0..3, row(metric, base + hour * 3600, series), change);
                }
            }
        }
        assert_eq!(notes.closed(), 80);
        let per_metric = |taken: &HashMap<Vec<u8>, Change>| {
            (1..=4).map(|m| taken.keys().filter(|r| r[2] == m).count()).collect::<Vec<_>>()
        };
        let taken = notes.take_closed(0..3, 20);
        assert_eq!(per_metric(&taken), [5, 5, 5, 5]);
        assert!(taken.keys().all(|r| hour_of(r, &(0..3)) < base + 2 * 3600));
        // A limit that does not divide evenly: exactly the limit, no metric more than its share (10 / 4, rounded
        // up), every metric some.
        let taken = notes.take_closed(0..3, 10);
        assert_eq!(taken.len(), 10);
        assert!(per_metric(&taken).iter().all(|&n| (1..=3).contains(&n)), "{:?}", per_metric(&taken));
        assert_eq!(notes.closed(), 50);
        // What is left of the passed hours, then nothing: the newest hour is not taken.
        assert_eq!(notes.take_closed(0..3, 100).len(), 50);
        assert_eq!(notes.closed(), 0);
        assert!(notes.take_closed(0..3, 100).is_empty());
        assert_eq!(notes.len, 40);
    }
}
