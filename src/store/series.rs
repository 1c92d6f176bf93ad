//! rtsd's series index: which series exist, the newest hour each has data in, and postings from a metric's tag
//! pairs to its series. OpenTSDB answers lookups and `last` queries from `tsdb-meta` (empty unless real-time meta
//! tracking is on, which overloads it, spec: ingest §7 item 12) or from full data scans; rtsd keeps this index
//! on ingest at the cost of one cache probe per point and one small write per series-hour.
//!
//! Column family `rtsd:series`:
//! * `S tsuid` -> newest base hour with data (u32 big-endian; merged with `max`, so late points never move it
//!   back). A prefix scan on `S metric` lists a metric's series.
//! * `T metric tagk tagv tsuid-tags` -> empty: the series of a metric carrying one tag pair, so a literal tag
//!   filter reads only its series (spec: query §9, the million-series complaint).
//! * `F tsuid` -> when the series was first indexed (u32 big-endian Unix seconds, wall clock; merged with `min`,
//!   so re-noting a series after a restart never moves it forward): the `created` of its TSMeta (spec: ingest
//!   §4.11). Written with the postings, i.e. once per series per process lifetime, never per point.
//! * `C tsuid` -> the series' point counter, OpenTSDB's `ts_ctr` (spec: ingest §4.11): u64 big-endian points
//!   received ‖ u32 big-endian Unix seconds when points were last received (merged: counts add, the later time
//!   wins). Its TSMeta's `totalDatapoints` and `lastReceived`. Points are counted in memory on ingest
//!   (two atomic operations per point on a counter hanging off the series' index cache entry, no write; the
//!   time is the second its batch started) and written as one merge per active series every [`COUNTER_WRITE_SECS`]
//!   ([`SeriesIndex::drain_counts`]), so the put path gains no write. Reads of a TSMeta and shutdown write what
//!   is pending first; a crash loses at most the counts of the last interval, as OpenTSDB's fire-and-forget
//!   increments can be lost.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::engine::{Combine, Engine, Merge, MergeContext, Parts, ReadHints, WriteBatch};
use quick_cache::sync::Cache;

use super::{Layout, StoreError, Tsuid};

pub const CF_SERIES: &str = "rtsd:series";
pub(super) const SERIES: u8 = b'S';
pub(super) const POSTING: u8 = b'T';
pub(super) const FIRST_SEEN: u8 = b'F';
pub(super) const COUNTER: u8 = b'C';

/// How often the daemon writes the counters: each write costs one merge per series that received points, so
/// with many series a longer interval keeps that small beside the points themselves (bench/RESULTS.md).
pub const COUNTER_WRITE_SECS: u64 = 30;

/// A series' points counted since the counters were last written, and the last second points arrived. It
/// hangs off the series' entry in the index cache, which the put path probes for every point anyway, so
/// counting costs two atomic operations and no extra lookup.
#[derive(Debug, Default)]
struct Counter {
    points: AtomicU64,
    seconds: AtomicU32,
}

impl Counter {
    fn add(&self, points: u64, now: u32) {
        if points == 0 {
            return;
        }
        self.points.fetch_add(points, Ordering::Relaxed);
        if self.seconds.load(Ordering::Relaxed) < now {
            self.seconds.store(now, Ordering::Relaxed);
        }
    }
}

/// Where [`SeriesIndex::note`] adds its writes: the batch, the index's column family, and the record of what the
/// batch writes (remembered once it is durable).
pub struct IndexWrites<'a> {
    pub batch: &'a mut WriteBatch,
    pub noted: &'a mut Noted,
}

/// What a batch wrote to the series index, remembered once the batch is durable ([`SeriesIndex::remember`]).
#[derive(Default)]
pub struct Noted {
    entries: Vec<NotedEntry>,
    /// Entries of series new to the index cache, by TSUID: a batch holding several hours of one series (a
    /// rebuild, a flush across an hour) writes its postings once.
    new_series: std::collections::HashMap<Vec<u8>, usize>,
    /// Points of series whose entries were already written, counted once the batch is durable.
    counts: Vec<(Arc<Counter>, u64)>,
}

impl Noted {
    pub fn clear(&mut self) {
        self.entries.clear();
        self.new_series.clear();
        self.counts.clear();
    }
}

struct NotedEntry {
    tsuid: Vec<u8>,
    hour: u32,
    /// The series' counter when it was known already (`None`: a new one is made when remembered).
    counter: Option<Arc<Counter>>,
    points: u64,
}

/// The write side's memory of which series it has indexed, and up to which hour, with each series' counter.
pub struct SeriesIndex {
    known: Cache<Vec<u8>, (u32, Arc<Counter>)>,
    /// Every counter that may hold counts: those of the cached series, and of series evicted from the cache
    /// since the counters were last written.
    counters: Mutex<Vec<(Vec<u8>, Arc<Counter>)>>,
    /// The second the current batch started: the receive time of the points counted (set once per batch, so
    /// the put path does not read the clock per point).
    clock: AtomicU32,
    /// Whether points are counted at all (`StoreOptions::count_received`): without, counters stay at zero and
    /// nothing is written for them.
    counting: bool,
}

impl SeriesIndex {
    pub fn new(capacity: usize, counting: bool) -> SeriesIndex {
        SeriesIndex {
            known: Cache::new(capacity),
            counters: Mutex::default(),
            clock: AtomicU32::new(now_seconds()),
            counting,
        }
    }

    /// Sets the receive time of the points counted from now on (each batch calls it as it starts).
    pub fn tick(&self) {
        self.clock.store(now_seconds(), Ordering::Relaxed);
    }

    fn new_counter(&self, tsuid: &[u8], points: u64) -> Arc<Counter> {
        let counter = Arc::new(Counter::default());
        if !self.counting {
            return counter;
        }
        self.count(&counter, points, self.clock.load(Ordering::Relaxed));
        self.counters.lock().unwrap_or_else(|e| e.into_inner()).push((tsuid.to_vec(), counter.clone()));
        counter
    }

    /// Counts `points` received at `now` into a series' counter, when this index counts at all.
    fn count(&self, counter: &Counter, points: u64, now: u32) {
        if self.counting {
            counter.add(points, now);
        }
    }

    /// Whether points were counted since the counters were last written.
    pub fn has_counts(&self) -> bool {
        let counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        counters.iter().any(|(_, c)| c.points.load(Ordering::Relaxed) > 0)
    }

    /// One counter merge per series counted since the last call, in batches of at most `per_batch` merges, and
    /// the counts zeroed; counters of series no longer cached (nobody can count into them any more) are
    /// forgotten. Written as one batch, a drain of many series made one write of them all: on HBase each merge
    /// is a mutation and its protobuf (~850 bytes while the write is in flight), a spike of ~150 MB every
    /// [`COUNTER_WRITE_SECS`] for data set A's 100,000 series.
    pub fn drain_counts(&self, per_batch: usize) -> Vec<WriteBatch> {
        let mut batches: Vec<WriteBatch> = Vec::new();
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        counters.retain(|(tsuid, counter)| {
            // Checked before taking the count: a counter only this list holds gets no more points.
            let orphan = Arc::strong_count(counter) == 1;
            let points = counter.points.swap(0, Ordering::Relaxed);
            if points > 0 {
                if batches.last().is_none_or(|b| b.len() >= per_batch.max(1)) {
                    batches.push(WriteBatch::default());
                }
                let batch = batches.last_mut().expect("pushed above when missing");
                batch.merge(
                    CF_SERIES,
                    &counter_key(tsuid),
                    &counter_value(points, counter.seconds.load(Ordering::Relaxed)),
                );
            }
            !orphan
        });
        batches
    }

    /// Adds index writes for `points` points of series `tsuid` (metric UID + tag UID pairs) received in hour
    /// `hour` to `batch`, unless the index already has this series at this hour or later. What the batch writes
    /// is remembered, and the points counted, only once it is durable ([`SeriesIndex::remember`]): remembered
    /// before, a failed write would leave the series out of the index for good while its points reach their rows
    /// on the retry (issue 23: after a full disk, 8,192 acknowledged series were missing from every lookup).
    pub fn note(&self, writes: &mut IndexWrites<'_>, layout: &Layout, tsuid: &[u8], hour: u32, points: u64) {
        let IndexWrites { batch, noted } = writes;
        let counter = match self.known.get(tsuid) {
            Some((h, counter)) => {
                if h >= hour {
                    noted.counts.push((counter, points));
                    return;
                }
                Some(counter)
            }
            None => {
                if let Some(&i) = noted.new_series.get(tsuid) {
                    // Noted earlier in this batch: only a later hour adds anything.
                    let entry = &mut noted.entries[i];
                    entry.points += points;
                    if entry.hour >= hour {
                        return;
                    }
                    entry.hour = hour;
                    let mut key = Vec::with_capacity(1 + tsuid.len());
                    key.push(SERIES);
                    key.extend_from_slice(tsuid);
                    batch.merge(CF_SERIES, &key, &hour.to_be_bytes());
                    return;
                }
                noted.new_series.insert(tsuid.to_vec(), noted.entries.len());
                // New to this process (or evicted from the cache): (re)write the postings; they are idempotent.
                write_postings(batch, layout, tsuid);
                let mut key = Vec::with_capacity(1 + tsuid.len());
                key.push(FIRST_SEEN);
                key.extend_from_slice(tsuid);
                batch.merge(CF_SERIES, &key, &now_seconds().to_be_bytes());
                None
            }
        };
        let mut key = Vec::with_capacity(1 + tsuid.len());
        key.push(SERIES);
        key.extend_from_slice(tsuid);
        batch.merge(CF_SERIES, &key, &hour.to_be_bytes());
        noted.entries.push(NotedEntry { tsuid: tsuid.to_vec(), hour, counter, points });
    }

    /// Adds only the postings of series `tsuid` to `batch` (not its `S` entry: it has no raw data): rollup points,
    /// so that literal tag filters, which select series by their postings, find series that exist only in rollup
    /// tables. Remembered once the batch is durable, as [`SeriesIndex::note`].
    pub fn note_postings(&self, batch: &mut WriteBatch, layout: &Layout, tsuid: &[u8], noted: &mut Noted) {
        if self.known.get(tsuid).is_some() || noted.new_series.contains_key(tsuid) {
            return;
        }
        noted.new_series.insert(tsuid.to_vec(), noted.entries.len());
        write_postings(batch, layout, tsuid);
        // Hour 0: a raw point of the series still writes its `S` entry (any hour is later).
        noted.entries.push(NotedEntry { tsuid: tsuid.to_vec(), hour: 0, counter: None, points: 0 });
    }

    /// Remembers what a durable batch wrote to the index (see [`SeriesIndex::note`]) and counts its points.
    pub fn remember(&self, noted: &mut Noted) {
        noted.new_series.clear();
        let now = self.clock.load(Ordering::Relaxed);
        for (counter, points) in noted.counts.drain(..) {
            self.count(&counter, points, now);
        }
        for NotedEntry { tsuid, hour, counter, points } in noted.entries.drain(..) {
            let counter = match counter {
                Some(counter) => {
                    self.count(&counter, points, now);
                    counter
                }
                None => self.new_counter(&tsuid, points),
            };
            // A series noted twice in one batch (two hours) keeps its newest hour.
            let hour = match self.known.get(&tsuid) {
                Some((h, _)) if h > hour => h,
                _ => hour,
            };
            self.known.insert(tsuid, (hour, counter));
        }
    }

    /// Forgets what was indexed (e.g. `dropcaches`); the next points re-write their entries.
    pub fn clear(&self) {
        self.known.clear();
    }

    /// Forgets one series, whose newest hour moved back (its newest rows were deleted): its next point
    /// re-writes its entry even at an hour this cache had already noted.
    pub fn forget(&self, tsuid: &[u8]) {
        self.known.remove(tsuid);
    }
}

/// Sets a series' newest hour (`Some`), replacing what merges made of it, or removes its entry (`None`: no
/// data left): for deletes, the one way the newest hour moves back.
pub fn set_last_hour(batch: &mut WriteBatch, tsuid: &[u8], hour: Option<u32>) {
    let mut key = Vec::with_capacity(1 + tsuid.len());
    key.push(SERIES);
    key.extend_from_slice(tsuid);
    match hour {
        Some(h) => batch.put(CF_SERIES, &key, &h.to_be_bytes()),
        None => batch.delete(CF_SERIES, &key),
    }
}

/// `T metric tagk tagv tsuid-tags` for every tag pair of `tsuid` (a bulk load writes the same keys, see
/// [`bulk_entries`]).
fn write_postings(batch: &mut WriteBatch, layout: &Layout, tsuid: &[u8]) {
    let metric_width = layout.uid_widths[0];
    let pair = layout.uid_widths[1] + layout.uid_widths[2];
    let (metric, tags) = tsuid.split_at(metric_width.min(tsuid.len()));
    for p in tags.chunks_exact(pair) {
        let mut key = Vec::with_capacity(1 + tsuid.len() + pair);
        key.push(POSTING);
        key.extend_from_slice(metric);
        key.extend_from_slice(p);
        key.extend_from_slice(tags);
        batch.put(CF_SERIES, &key, &[]);
    }
}

/// One series of a bulk load for [`bulk_entries`]: its TSUID, the newest hour and the number of its points the
/// load writes.
pub(super) struct BulkSeries {
    pub tsuid: Vec<u8>,
    pub hour: u32,
    pub points: u64,
}

/// What the index gets for the series of a bulk load at `now` (Unix seconds): what [`SeriesIndex::note`] and the
/// counters write for the same points (postings, first-seen time, newest hour, counter), as `f(key, merge,
/// value)` (`merge` false: a put) in key order, for a sorted table file. Sorts `series` by TSUID (each once).
pub(super) fn bulk_entries<E>(
    layout: &Layout,
    series: &mut [BulkSeries],
    now: u32,
    mut f: impl FnMut(&[u8], bool, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    series.sort_unstable_by(|a, b| a.tsuid.cmp(&b.tsuid));
    let mut key = Vec::with_capacity(64);
    // `C`, `F` and `S` keys are the prefix and the TSUID: in TSUID order.
    for prefix in [COUNTER, FIRST_SEEN, SERIES] {
        for s in series.iter() {
            key.clear();
            key.push(prefix);
            key.extend_from_slice(&s.tsuid);
            match prefix {
                COUNTER if s.points > 0 => f(&key, true, &counter_value(s.points, now))?,
                COUNTER => {}
                FIRST_SEEN => f(&key, true, &now.to_be_bytes())?,
                _ => f(&key, true, &s.hour.to_be_bytes())?,
            }
        }
    }
    // `T metric tagk tagv tags`: every (series, pair) in the order of those keys.
    let metric_width = layout.uid_widths[0];
    let pair = layout.uid_widths[1] + layout.uid_widths[2];
    let split = |tsuid: &[u8]| -> (usize, usize) { (metric_width.min(tsuid.len()), pair) };
    let mut postings: Vec<(u32, u32)> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let (m, _) = split(&s.tsuid);
        for p in 0..(s.tsuid.len() - m) / pair {
            postings.push((i as u32, p as u32));
        }
    }
    let parts = |&(i, p): &(u32, u32)| {
        let tsuid = &series[i as usize].tsuid;
        let (m, _) = split(tsuid);
        let at = m + p as usize * pair;
        (&tsuid[..m], &tsuid[at..at + pair], &tsuid[m..])
    };
    postings.sort_unstable_by(|a, b| parts(a).cmp(&parts(b)));
    for posting in &postings {
        let (metric, pair, tags) = parts(posting);
        key.clear();
        key.push(POSTING);
        key.extend_from_slice(metric);
        key.extend_from_slice(pair);
        key.extend_from_slice(tags);
        f(&key, false, &[])?;
    }
    Ok(())
}

/// Every series of a metric with its newest hour, in TSUID order. `f` returns false to stop.
pub fn for_each_series_of_metric(
    db: &dyn Engine,
    metric: &[u8],
    mut f: impl FnMut(&[u8], u32) -> bool,
) -> Result<(), StoreError> {
    let mut prefix = vec![SERIES];
    prefix.extend_from_slice(metric);
    scan_prefix(db, &prefix, |key, value| {
        let hour = value.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
        f(&key[1..], hour)
    })
}

/// Every series of every metric with its newest hour, in TSUID order. `f` returns false to stop.
pub fn for_each_series(db: &dyn Engine, f: impl FnMut(&[u8], u32) -> bool) -> Result<(), StoreError> {
    for_each_series_of_metric(db, &[], f)
}

/// The TSUIDs of a metric's series carrying the tag pair (tagk, tagv), in TSUID order.
pub fn series_with_tag(db: &dyn Engine, metric: &[u8], tagk: &[u8], tagv: &[u8]) -> Result<Vec<Tsuid>, StoreError> {
    let mut prefix = vec![POSTING];
    prefix.extend_from_slice(metric);
    prefix.extend_from_slice(tagk);
    prefix.extend_from_slice(tagv);
    let mut out = Vec::new();
    scan_prefix(db, &prefix, |key, _| {
        let mut tsuid = metric.to_vec();
        tsuid.extend_from_slice(&key[prefix.len()..]);
        out.push(tsuid.into());
        true
    })?;
    Ok(out)
}

/// The newest hour with data of one series, if the index knows it.
pub fn last_hour(db: &dyn Engine, tsuid: &[u8]) -> Result<Option<u32>, StoreError> {
    let mut key = vec![SERIES];
    key.extend_from_slice(tsuid);
    Ok(db
        .get(CF_SERIES, &key, ReadHints::default())?
        .and_then(|v| v.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))))
}

/// `C tsuid`.
pub(super) fn counter_key(tsuid: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + tsuid.len());
    key.push(COUNTER);
    key.extend_from_slice(tsuid);
    key
}

/// A counter record: points ‖ seconds.
pub(super) fn counter_value(points: u64, seconds: u32) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..8].copy_from_slice(&points.to_be_bytes());
    v[8..].copy_from_slice(&seconds.to_be_bytes());
    v
}

fn parse_counter(v: &[u8]) -> Option<(u64, u32)> {
    let points = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    let seconds = u32::from_be_bytes(v.get(8..12)?.try_into().ok()?);
    Some((points, seconds))
}

/// A series' written counter: points received and when (Unix seconds) points were last received.
pub fn counter(db: &dyn Engine, tsuid: &[u8]) -> Result<Option<(u64, u32)>, StoreError> {
    Ok(db.get(CF_SERIES, &counter_key(tsuid), ReadHints::default())?.as_deref().and_then(parse_counter))
}

/// When a series was first indexed (Unix seconds), if the index knows it.
pub fn first_seen(db: &dyn Engine, tsuid: &[u8]) -> Result<Option<u32>, StoreError> {
    let mut key = vec![FIRST_SEEN];
    key.extend_from_slice(tsuid);
    Ok(db
        .get(CF_SERIES, &key, ReadHints::default())?
        .and_then(|v| v.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))))
}

fn now_seconds() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as u32).unwrap_or(0)
}

fn scan_prefix(db: &dyn Engine, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<(), StoreError> {
    let Some(mut cursor) = db.cursor(CF_SERIES, ReadHints::default()) else { return Ok(()) };
    cursor.seek(prefix);
    while cursor.valid() {
        if !cursor.key().starts_with(prefix) || !f(cursor.key(), cursor.value()) {
            break;
        }
        cursor.next();
    }
    cursor.status()
}

/// Merge for `S` keys: the largest hour wins, whatever order the operands arrive in; for `F` keys the earliest
/// time wins; `C` counters add their points and keep the latest time. `T` keys are plain puts.
/// The series table's merge (see [`merge_max_hour`]).
pub(super) fn merge() -> Merge {
    let full = std::sync::Arc::new(|key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
        merge_max_hour(key, existing, operands)
    });
    Merge { name: "max-hour-v1", full: full.clone(), partial: Some(full) }
}

/// The series table's merge as parts (see [`Parts`]), so that an engine without merge operators (HBase) writes
/// each entry blindly in the batch's own round trip: `S` a maximum (part 0), `F` a minimum (part 1), `C` a sum of
/// points (part 2) and a maximum of seconds (part 0). `T` postings are plain puts and have none.
pub(super) const PARTS: Parts =
    Parts { parts: &[(b"M", Combine::Max), (b"m", Combine::Min), (b"+", Combine::Sum)], split, join };

/// See [`PARTS`]. An operand that does not parse makes no update, as [`merge_max_hour`] ignores it.
fn split(key: &[u8], operand: &[u8]) -> Option<Vec<(usize, i64)>> {
    let seconds = || <[u8; 4]>::try_from(operand).ok().map(|b| i64::from(u32::from_be_bytes(b)));
    Some(match key.first() {
        Some(&SERIES) => seconds().map(|h| (0, h)).into_iter().collect(),
        Some(&FIRST_SEEN) => seconds().map(|t| (1, t)).into_iter().collect(),
        Some(&COUNTER) => match parse_counter(operand).filter(|_| operand.len() == 12) {
            Some((points, seconds)) => vec![(2, i64::try_from(points).unwrap_or(i64::MAX)), (0, i64::from(seconds))],
            None => Vec::new(),
        },
        _ => return None,
    })
}

/// See [`PARTS`].
fn join(key: &[u8], index: usize, number: i64) -> Vec<u8> {
    match (key.first(), index) {
        (Some(&COUNTER), 0) => counter_value(0, number as u32).to_vec(),
        (Some(&COUNTER), _) => counter_value(number.max(0) as u64, 0).to_vec(),
        _ => (number as u32).to_be_bytes().to_vec(),
    }
}

pub fn merge_max_hour(key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
    if key.first() == Some(&COUNTER) {
        let (points, seconds) = existing
            .into_iter()
            .chain(operands.iter().copied())
            .filter_map(parse_counter)
            .fold((0u64, 0u32), |(p, s), (op, os)| (p.saturating_add(op), s.max(os)));
        return counter_value(points, seconds).to_vec();
    }
    let hour = |b: &[u8]| b.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let values = existing.into_iter().chain(operands.iter().copied()).filter_map(hour);
    let merged = if key.first() == Some(&FIRST_SEEN) { values.min() } else { values.max() };
    merged.map(|h| h.to_be_bytes().to_vec()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_in_memory_whether_the_series_is_cached_or_not() {
        let index = SeriesIndex::new(100, true);
        let (a, b) = (vec![0, 0, 1, 0, 0, 1, 0, 0, 1], vec![0, 0, 1, 0, 0, 1, 0, 0, 2]);
        let pending = |index: &SeriesIndex| -> u64 {
            let counters = index.counters.lock().unwrap();
            counters.iter().map(|(_, c)| c.points.load(Ordering::Relaxed)).sum()
        };
        // Not indexed yet (an evicted series gets a fresh counter).
        index.new_counter(&a, 2);
        index.new_counter(&b, 1);
        assert!(index.has_counts());
        assert_eq!(pending(&index), 3);
        // Cached: counts go to the entry's counter, no new one.
        index.known.insert(a.clone(), (0, index.new_counter(&a, 0)));
        let before = index.counters.lock().unwrap().len();
        index.known.get(&a).unwrap().1.add(4, now_seconds());
        let after = index.counters.lock().unwrap().len();
        assert_eq!((after, pending(&index)), (before, 7));
    }

    // On HBase without `tsd.core.meta.enable_tsuid_incrementing`: nothing counted, nothing to write.
    #[test]
    fn an_index_that_does_not_count_writes_no_counters() {
        let index = SeriesIndex::new(100, false);
        let (a, b) = (vec![0, 0, 1, 0, 0, 1, 0, 0, 1], vec![0, 0, 1, 0, 0, 1, 0, 0, 2]);
        let mut batch = WriteBatch::default();
        let mut noted = Noted::default();
        let layout = Layout { uid_widths: [3, 3, 3], salt: rtsd_protocol::codec::SaltConfig::NONE };
        for (tsuid, points) in [(&a, 5), (&b, 7)] {
            let mut writes = IndexWrites { batch: &mut batch, noted: &mut noted };
            index.note(&mut writes, &layout, tsuid, 100, points);
        }
        index.remember(&mut noted);
        // Known now: a later batch's points go to the cached entry.
        let mut writes = IndexWrites { batch: &mut batch, noted: &mut noted };
        index.note(&mut writes, &layout, &a, 100, 3);
        index.remember(&mut noted);
        assert!(!index.has_counts());
        assert_eq!(index.drain_counts(4).len(), 0);
        assert_eq!(index.counters.lock().unwrap().len(), 0, "no counter is kept for writing");
        // The same notes on a counting index leave 15 points to write.
        let counting = SeriesIndex::new(100, true);
        for (tsuid, points) in [(&a, 5), (&b, 7), (&a, 3)] {
            let mut writes = IndexWrites { batch: &mut batch, noted: &mut noted };
            counting.note(&mut writes, &layout, tsuid, 100, points);
            counting.remember(&mut noted);
        }
        let batches = counting.drain_counts(4);
        let written: u64 = batches.iter().flat_map(|b| b.iter()).map(|(_, _, _, v)| parse_counter(v).unwrap().0).sum();
        assert_eq!(written, 15);
    }

    #[test]
    fn a_drain_writes_counters_in_bounded_batches() {
        let index = SeriesIndex::new(100, true);
        let tsuids: Vec<Vec<u8>> = (0..10u8).map(|i| vec![0, 0, 1, 0, 0, 1, 0, 0, i]).collect();
        let held: Vec<Arc<Counter>> = tsuids.iter().enumerate().map(|(i, t)| index.new_counter(t, i as u64)).collect();
        // Series 0 counted nothing: no merge for it.
        let batches = index.drain_counts(4);
        assert_eq!(batches.iter().map(WriteBatch::len).collect::<Vec<_>>(), vec![4, 4, 1]);
        let mut written: Vec<(Vec<u8>, u64)> = Vec::new();
        for b in &batches {
            for (op, table, key, value) in b.iter() {
                assert_eq!((op, table), (super::super::engine::Op::Merge, CF_SERIES));
                written.push((key.to_vec(), parse_counter(value).unwrap().0));
            }
        }
        let want: Vec<(Vec<u8>, u64)> =
            tsuids.iter().enumerate().skip(1).map(|(i, t)| (counter_key(t), i as u64)).collect();
        assert_eq!(written, want);
        assert!(index.drain_counts(4).is_empty(), "the counts were taken");
        drop(held);
    }

    // Issue 23 item 1: an index entry is remembered only once the batch that writes it is durable.
    #[test]
    fn entries_of_a_failed_write_are_written_again_and_counts_wait_for_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let spec = super::super::engine::TableSpec::new(
            CF_SERIES,
            super::super::engine::CellMap::Plain,
            super::super::engine::Tuning::Small,
        )
        .with_merge(merge());
        let options = super::super::engine::rocks::RocksOptions {
            memtable_bytes: 8 << 20,
            block_cache_bytes: 1 << 20,
            max_open_files: 64,
            read_only: false,
        };
        let db = super::super::engine::rocks::RocksEngine::open(dir.path(), &[spec], &options).unwrap();
        let layout = Layout { uid_widths: [3, 3, 3], salt: rtsd_protocol::codec::SaltConfig::NONE };
        let index = SeriesIndex::new(100, true);
        let tsuid = [0, 0, 1, 0, 0, 1, 0, 0, 1];
        let counted = |index: &SeriesIndex| -> u64 {
            let counters = index.counters.lock().unwrap();
            counters.iter().map(|(_, c)| c.points.load(Ordering::Relaxed)).sum()
        };
        // A new series: one posting, its first-seen time and its newest hour.
        let (mut batch, mut noted) = (WriteBatch::default(), Noted::default());
        let mut w = IndexWrites { batch: &mut batch, noted: &mut noted };
        index.note(&mut w, &layout, &tsuid, 3600, 5);
        // The same series at a later hour in the same batch adds only the newer hour.
        index.note(&mut w, &layout, &tsuid, 7200, 2);
        assert_eq!(batch.len(), 4);
        // The write failed: nothing remembered, nothing counted; the retry writes the same entries again.
        noted.clear();
        assert_eq!(counted(&index), 0);
        let (mut retry, mut noted) = (WriteBatch::default(), Noted::default());
        index.note(&mut IndexWrites { batch: &mut retry, noted: &mut noted }, &layout, &tsuid, 7200, 7);
        assert_eq!(retry.len(), 3);
        db.write(retry, super::super::engine::Durability::Logged).unwrap();
        index.remember(&mut noted);
        assert_eq!(counted(&index), 7);
        // Remembered: the same hour writes nothing more and only counts, once written.
        let (mut again, mut noted) = (WriteBatch::default(), Noted::default());
        index.note(&mut IndexWrites { batch: &mut again, noted: &mut noted }, &layout, &tsuid, 7200, 1);
        assert_eq!((again.len(), counted(&index)), (0, 7));
        index.remember(&mut noted);
        assert_eq!(counted(&index), 8);
    }

    /// Issue 21 item 5: on HBase the index's merges are blind parts; what they read back must be what the
    /// merge makes of the same operands, on a value stored whole before (rows written by earlier rtsd) or none.
    #[test]
    fn the_index_read_through_its_parts_is_its_merge() {
        let merge = merge();
        let tsuid = [0, 0, 1, 0, 0, 1, 0, 0, 2];
        let key = |prefix: u8| [&[prefix][..], &tsuid].concat();
        let u32s = |ns: &[u32]| ns.iter().map(|n| n.to_be_bytes().to_vec()).collect::<Vec<_>>();
        // (key, value stored whole, operands)
        type Case = (Vec<u8>, Option<Vec<u8>>, Vec<Vec<u8>>);
        let cases: Vec<Case> = vec![
            (key(SERIES), None, u32s(&[7200, 3600, 10800, 7200])),
            (key(SERIES), Some(14400u32.to_be_bytes().to_vec()), u32s(&[7200, 18000])),
            (key(FIRST_SEEN), None, u32s(&[1700000500, 1700000100, 1700000900])),
            (key(FIRST_SEEN), Some(1600000000u32.to_be_bytes().to_vec()), u32s(&[1700000100])),
            (
                key(COUNTER),
                Some(counter_value(10, 1700000000).to_vec()),
                vec![counter_value(5, 1700000100).to_vec(), counter_value(7, 1600000000).to_vec()],
            ),
            (key(COUNTER), None, vec![counter_value(3, 1700000100).to_vec(), b"junk".to_vec()]),
            // An operand that does not parse is ignored by both.
            (key(SERIES), Some(3600u32.to_be_bytes().to_vec()), vec![b"x".to_vec(), 7200u32.to_be_bytes().to_vec()]),
        ];
        for (key, whole, operands) in cases {
            let ops: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let want = (merge.full)(&key, whole.as_deref(), &ops, MergeContext { stored: false });
            let got =
                super::super::engine::conformance::read_through_parts(&merge, &PARTS, &key, whole.as_deref(), &ops);
            assert_eq!(got, Some(want), "{key:?} {whole:?} {operands:?}");
        }
        // The postings are plain puts: no parts.
        assert_eq!((PARTS.split)(&key(POSTING), b""), None);
        // A value splits as an operand (a put of `S` or `C` is reset and written as parts).
        let v = counter_value(9, 1700000000);
        let got = super::super::engine::conformance::read_through_parts(&merge, &PARTS, &key(COUNTER), None, &[&v]);
        assert_eq!(got, Some(v.to_vec()));
    }

    #[test]
    fn counter_records_add_and_keep_the_latest_time() {
        assert_eq!(parse_counter(&counter_value(5, 1700000000)), Some((5, 1700000000)));
        assert_eq!(parse_counter(&[1, 2]), None);
        assert_eq!(counter_key(&[0, 0, 1]), vec![COUNTER, 0, 0, 1]);
    }
}
