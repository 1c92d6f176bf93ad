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
use quick_cache::sync::Cache;
use rocksdb::{MergeOperands, WriteBatch, DB};

use super::{Layout, StoreError};

pub const CF_SERIES: &str = "rtsd:series";
pub(super) const SERIES: u8 = b'S';
pub(super) const POSTING: u8 = b'T';
pub(super) const FIRST_SEEN: u8 = b'F';

/// The write side's memory of which series it has indexed, and up to which hour.
pub struct SeriesIndex {
    known: Cache<Vec<u8>, u32>,
}

impl SeriesIndex {
    pub fn new(capacity: usize) -> SeriesIndex {
        SeriesIndex { known: Cache::new(capacity) }
    }

    /// Adds index writes for a point of series `tsuid` (metric UID + tag UID pairs) in hour `hour` to `batch`,
    /// unless the index already has this series at this hour or later.
    pub fn note(&self, batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, layout: &Layout, tsuid: &[u8], hour: u32) {
        match self.known.get(tsuid) {
            Some(h) if h >= hour => return,
            Some(_) => {}
            None => {
                // New to this process (or evicted from the cache): (re)write the postings; they are idempotent.
                write_postings(batch, cf, layout, tsuid);
                let mut key = Vec::with_capacity(1 + tsuid.len());
                key.push(FIRST_SEEN);
                key.extend_from_slice(tsuid);
                batch.merge_cf(cf, key, now_seconds().to_be_bytes());
            }
        }
        let mut key = Vec::with_capacity(1 + tsuid.len());
        key.push(SERIES);
        key.extend_from_slice(tsuid);
        batch.merge_cf(cf, key, hour.to_be_bytes());
        self.known.insert(tsuid.to_vec(), hour);
    }

    /// Adds only the postings of series `tsuid` to `batch` (not its `S` entry: it has no raw data): rollup points,
    /// so that literal tag filters, which select series by their postings, find series that exist only in rollup
    /// tables.
    pub fn note_postings(&self, batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, layout: &Layout, tsuid: &[u8]) {
        if self.known.get(tsuid).is_some() {
            return;
        }
        write_postings(batch, cf, layout, tsuid);
        // Hour 0: a raw point of the series still writes its `S` entry (any hour is later).
        self.known.insert(tsuid.to_vec(), 0);
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
pub fn set_last_hour(batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, tsuid: &[u8], hour: Option<u32>) {
    let mut key = Vec::with_capacity(1 + tsuid.len());
    key.push(SERIES);
    key.extend_from_slice(tsuid);
    match hour {
        Some(h) => batch.put_cf(cf, key, h.to_be_bytes()),
        None => batch.delete_cf(cf, key),
    }
}

/// `T metric tagk tagv tsuid-tags` for every tag pair of `tsuid`.
fn write_postings(batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, layout: &Layout, tsuid: &[u8]) {
    let metric_width = layout.uid_widths[0];
    let pair = layout.uid_widths[1] + layout.uid_widths[2];
    let (metric, tags) = tsuid.split_at(metric_width.min(tsuid.len()));
    for p in tags.chunks_exact(pair) {
        let mut key = Vec::with_capacity(1 + tsuid.len() + pair);
        key.push(POSTING);
        key.extend_from_slice(metric);
        key.extend_from_slice(p);
        key.extend_from_slice(tags);
        batch.put_cf(cf, key, []);
    }
}

/// Every series of a metric with its newest hour, in TSUID order. `f` returns false to stop.
pub fn for_each_series_of_metric(
    db: &DB,
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
pub fn for_each_series(db: &DB, f: impl FnMut(&[u8], u32) -> bool) -> Result<(), StoreError> {
    for_each_series_of_metric(db, &[], f)
}

/// The TSUIDs of a metric's series carrying the tag pair (tagk, tagv), in TSUID order.
pub fn series_with_tag(db: &DB, metric: &[u8], tagk: &[u8], tagv: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
    let mut prefix = vec![POSTING];
    prefix.extend_from_slice(metric);
    prefix.extend_from_slice(tagk);
    prefix.extend_from_slice(tagv);
    let mut out = Vec::new();
    scan_prefix(db, &prefix, |key, _| {
        let mut tsuid = metric.to_vec();
        tsuid.extend_from_slice(&key[prefix.len()..]);
        out.push(tsuid);
        true
    })?;
    Ok(out)
}

/// The newest hour with data of one series, if the index knows it.
pub fn last_hour(db: &DB, tsuid: &[u8]) -> Result<Option<u32>, StoreError> {
    let cf = db.cf_handle(CF_SERIES).expect("column family created at open");
    let mut key = vec![SERIES];
    key.extend_from_slice(tsuid);
    Ok(db.get_cf(cf, key)?.and_then(|v| v.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))))
}

/// When a series was first indexed (Unix seconds), if the index knows it.
pub fn first_seen(db: &DB, tsuid: &[u8]) -> Result<Option<u32>, StoreError> {
    let cf = db.cf_handle(CF_SERIES).expect("column family created at open");
    let mut key = vec![FIRST_SEEN];
    key.extend_from_slice(tsuid);
    Ok(db.get_cf(cf, key)?.and_then(|v| v.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))))
}

fn now_seconds() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as u32).unwrap_or(0)
}

fn scan_prefix(db: &DB, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<(), StoreError> {
    let cf = db.cf_handle(CF_SERIES).expect("column family created at open");
    let mut iter = db.raw_iterator_cf(cf);
    iter.seek(prefix);
    while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
        if !key.starts_with(prefix) || !f(key, value) {
            break;
        }
        iter.next();
    }
    iter.status()?;
    Ok(())
}

/// Merge for `S` keys: the largest hour wins, whatever order the operands arrive in; for `F` keys the earliest
/// time wins. `T` keys are plain puts.
pub fn merge_max_hour(key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let hour = |b: &[u8]| b.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let values = existing.into_iter().chain(operands.iter()).filter_map(hour);
    let merged = if key.first() == Some(&FIRST_SEEN) { values.min() } else { values.max() };
    Some(merged.map(|h| h.to_be_bytes().to_vec()).unwrap_or_default())
}
