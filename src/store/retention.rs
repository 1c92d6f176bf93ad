//! Retention: how long each table keeps its rows, and how expired rows leave (issue 6 item 4).
//!
//! Every table keyed like OpenTSDB's data table (salt, metric UID, base time, tags) has a retention: the raw
//! table `rtsd.retention.raw_hours`, each rollup interval's temporal and pre-aggregate tables the hours
//! `rtsd.retention.rollup_hours` gives that interval. A row is expired once all of it is older than
//! `now - retention`.
//!
//! * Reads never see expired data: the store's scans start at the cut ([`Retention::cut_ms`]), for every
//!   reader (queries, `/api/query/last`, rollup reads, tools) and at point granularity, so a query gives the
//!   same answer before and after the rows are physically gone.
//! * RocksDB removes the rows itself: a compaction filter on each retained family drops rows whose base time
//!   (read at its fixed offset in the key) lies before the cut, so expiry costs no scan and never blocks
//!   ingest. `periodic_compaction_seconds` makes RocksDB rewrite (and so filter) every file at least every
//!   quarter retention, so cold files do not keep expired rows forever. [`super::Store::compact_expired`] is
//!   the explicit nudge (`rtsd fsck --reclaim`, tests).
//! * Writes of points already older than the retention are accepted, as OpenTSDB accepts them (HBase TTLs
//!   apply later too): they are stored, folded into rollups (whose retention is longer; a fold never shrinks
//!   the rollups of an hour whose raw data expired, see `store::rollup`), never returned by a raw read, and
//!   removed by the next compaction.
//!
//! The cut follows the wall clock at the time of the read or the compaction, so a restart changes nothing.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;

use super::engine::{cell_key, Durability, FilterDecision, FilterFactory, RowFilter, TableSpec, Tuning, WriteBatch};
use super::meta::TS_META;
use super::series::{COUNTER, FIRST_SEEN, POSTING, SERIES};
use super::{Layout, StoreError, CF_DATA, CF_SERIES, CF_TSDB_META, CF_UID_ID, CF_UID_NAME};
use crate::metrics::Metrics;
use crate::rollup::{RollupInterval, RollupSettings};

/// The properties read here and their defaults: every table keeps its rows forever, as OpenTSDB does on HBase
/// tables without a TTL. A team moving to rtsd backfills last year's history first; a default retention would
/// accept those points and hide them from every read (issue 18). Storm's metric store's retention is one line
/// away ([`STORM_STYLE`]).
pub const DEFAULTS: &[(&str, &str)] = &[("rtsd.retention.raw_hours", "0"), ("rtsd.retention.rollup_hours", "0")];

/// The retention Storm's metric store keeps, as the README shows it: 10 days of raw data, rollups far longer,
/// coarser ones longest.
pub const STORM_STYLE: &[(&str, &str)] =
    &[("rtsd.retention.raw_hours", "240"), ("rtsd.retention.rollup_hours", "1m:720,10m:2160,1h:17520,*:17520")];

/// `rtsd.retention.*` resolved. A retention is in milliseconds; `None` keeps rows forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionSettings {
    /// The raw data table (and the default interval's pre-aggregate table).
    pub raw_ms: Option<i64>,
    /// Per rollup interval as configured (`1m`, `10m`, ...).
    pub rollup_ms: BTreeMap<String, Option<i64>>,
    /// Intervals not listed (`*`); without `*`, they keep rows forever.
    pub other_rollup_ms: Option<i64>,
}

/// A retention property that cannot be read (the configuration reports it as its own `ConfigError::Invalid`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for {key}: {value:?}: {why}")]
pub struct InvalidSetting {
    pub key: String,
    pub value: String,
    pub why: String,
}

impl RetentionSettings {
    /// Reads the properties. Hours are decimal (`0.5` is half an hour; tests use small fractions); 0 keeps rows
    /// forever.
    pub fn from_properties(properties: &BTreeMap<String, String>) -> Result<RetentionSettings, InvalidSetting> {
        let get = |k: &str| properties.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
        let invalid = |key: &str, why: &str| InvalidSetting { key: key.into(), value: get(key), why: why.into() };
        let raw_ms =
            hours_ms(&get("rtsd.retention.raw_hours")).map_err(|why| invalid("rtsd.retention.raw_hours", &why))?;
        let mut rollup_ms = BTreeMap::new();
        let mut other_rollup_ms = None;
        let key = "rtsd.retention.rollup_hours";
        for entry in get(key).split(',').map(str::trim).filter(|e| !e.is_empty()) {
            // `interval:hours`; a bare number applies to every interval, as `*:hours`.
            let (interval, hours) = entry.rsplit_once(':').unwrap_or(("*", entry));
            let ms = hours_ms(hours).map_err(|why| invalid(key, &why))?;
            match interval.trim() {
                "*" => other_rollup_ms = ms,
                "" => return Err(invalid(key, "expected interval:hours entries, e.g. 1m:720,1h:17520,*:17520")),
                i => {
                    rollup_ms.insert(i.to_string(), ms);
                }
            }
        }
        // A bare `0` (or `*:0` alone) means every rollup forever; listed intervals keep their own.
        Ok(RetentionSettings { raw_ms, rollup_ms, other_rollup_ms })
    }

    /// The retention of a rollup interval's tables.
    pub fn for_interval(&self, interval: &str) -> Option<i64> {
        self.rollup_ms.get(interval).copied().unwrap_or(self.other_rollup_ms)
    }
}

/// `hours` as milliseconds; 0 (keep forever) as `None`.
fn hours_ms(hours: &str) -> Result<Option<i64>, String> {
    let h: f64 = hours.trim().parse().map_err(|_| format!("not a number of hours: {hours:?}"))?;
    if !h.is_finite() || h < 0.0 {
        return Err("hours must be 0 (keep forever) or more".into());
    }
    let ms = (h * 3_600_000.0).round();
    if ms > 1e15 {
        return Err("more hours than a row key's base time can hold".into());
    }
    Ok((ms >= 1.0).then_some(ms as i64))
}

/// How one family's rows span time: hourly raw rows, or a rollup interval's row span.
#[derive(Debug, Clone)]
enum Span {
    Hour,
    Rollup(RollupInterval),
}

impl Span {
    /// The base time of the row holding second `t`: rows with a smaller base time end before `t`.
    fn row_start(&self, t: i64) -> u32 {
        let t = t.clamp(0, i64::from(u32::MAX));
        match self {
            Span::Hour => (t - t % 3600) as u32,
            Span::Rollup(interval) => interval.base_time(t),
        }
    }
}

#[derive(Debug, Clone)]
struct FamilyRetention {
    keep_ms: i64,
    span: Span,
}

/// The retention of every family of an open store.
#[derive(Debug, Clone, Default)]
pub struct Retention {
    families: HashMap<String, FamilyRetention>,
    /// Whether some family keeps rows forever (then the series index never hides a series).
    some_forever: bool,
    /// The families of data rows that keep them forever.
    forever: Vec<String>,
}

impl Retention {
    /// The families of the raw table and of every configured rollup table with their retentions.
    pub(super) fn new(settings: &RetentionSettings, rollups: &RollupSettings) -> Retention {
        let mut r = Retention::default();
        let add = |family: String, keep: Option<i64>, span: Span, r: &mut Retention| match keep {
            Some(keep_ms) => {
                r.families.entry(family).or_insert(FamilyRetention { keep_ms, span });
            }
            None => {
                r.some_forever = true;
                if !r.forever.contains(&family) {
                    r.forever.push(family);
                }
            }
        };
        add(CF_DATA.to_string(), settings.raw_ms, Span::Hour, &mut r);
        if let Some(config) = &rollups.config {
            for i in &config.intervals {
                let (keep, span) = if i.default {
                    (settings.raw_ms, Span::Hour)
                } else {
                    (settings.for_interval(&i.interval), Span::Rollup(i.clone()))
                };
                for table in [&i.table, &i.preagg_table] {
                    add(RollupInterval::family(table), keep, span.clone(), &mut r);
                }
                if i.is_auto() {
                    let family = RollupInterval::auto_family(&RollupInterval::family(&i.table));
                    add(family, keep, span.clone(), &mut r);
                }
            }
        }
        r
    }

    /// The earliest instant (ms) whose data `family` still returns; `i64::MIN` when it keeps rows forever.
    pub fn cut_ms(&self, family: &str) -> i64 {
        match self.families.get(family) {
            Some(f) => crate::timefmt::now_ms().saturating_sub(f.keep_ms),
            None => i64::MIN,
        }
    }

    /// `family`'s retention in hours (0: forever), for log lines.
    pub fn hours(&self, family: &str) -> f64 {
        self.families.get(family).map_or(0.0, |f| f.keep_ms as f64 / 3_600_000.0)
    }

    /// The smallest base time of `family` rows that may still hold data; 0 when it keeps rows forever.
    pub fn first_kept_base(&self, family: &str) -> u32 {
        match self.families.get(family) {
            Some(f) => f.span.row_start(self.cut_ms(family).div_euclid(1000)),
            None => 0,
        }
    }

    /// The earliest instant (ms) any table still holds data for: series whose newest raw hour ends before it
    /// have nothing left anywhere. `i64::MIN` when some table keeps rows forever.
    pub fn index_cut_ms(&self) -> i64 {
        if self.some_forever {
            return i64::MIN;
        }
        let longest = self.families.values().map(|f| f.keep_ms).max().unwrap_or(0);
        crate::timefmt::now_ms().saturating_sub(longest)
    }

    /// Whether a series whose newest raw hour is `hour` still has data in some table, given the instant
    /// [`Retention::index_cut_ms`] gave: what lists of series (lookups, `rtsd_series`) leave out.
    pub fn lists_series(hour: u32, index_cut_ms: i64) -> bool {
        (i64::from(hour) + 3600) * 1000 > index_cut_ms
    }

    /// Every family of data rows with its retention in whole seconds, rounded up (`None`: forever): the TTLs an
    /// engine with its own expiry (HBase) is given.
    pub fn ttl_seconds(&self) -> Vec<(String, Option<u64>)> {
        let mut out: Vec<(String, Option<u64>)> =
            self.families.iter().map(|(f, r)| (f.clone(), Some((r.keep_ms.max(1) as u64).div_ceil(1000)))).collect();
        out.extend(self.forever.iter().filter(|f| !self.families.contains_key(*f)).map(|f| (f.clone(), None)));
        out.sort();
        out
    }

    /// The families with a retention (those [`super::Store::compact_expired`] compacts).
    pub fn families(&self) -> impl Iterator<Item = &str> {
        self.families.keys().map(String::as_str)
    }

    /// Installs the table filter on `spec`: expiry if the table has a retention, for the data table packing of
    /// rows that the engine's rewrites meet unpacked, and for rtsd's own rollup tables (`:a`) the smallest
    /// encoding of rows they meet in a larger one.
    pub(super) fn install(&self, spec: &mut TableSpec, layout: &Layout, metrics: Arc<Metrics>) {
        let retention = self.families.get(&spec.name);
        let pack = spec.name == CF_DATA;
        let compact_slots = spec.tuning == Tuning::RollupSlots;
        if retention.is_none() && !pack && !compact_slots {
            return;
        }
        spec.filter = Some(Arc::new(ExpiryFactory {
            keep: retention.map(|f| (f.keep_ms, f.span.clone())),
            pack,
            compact_slots,
            base_at: layout.salt.width + layout.uid_widths[0],
            tags_at: layout.tags_offset(),
            pair: layout.uid_widths[1] + layout.uid_widths[2],
            metrics,
        }));
        if let Some(f) = retention {
            // Files older than this are rewritten even when nothing else would compact them, so expired rows in
            // cold files leave too: a quarter of the retention, between an hour and a week.
            spec.rewrite_every_secs = Some((f.keep_ms / 4 / 1000).clamp(3600, 7 * 86_400) as u64);
        }
    }
}

/// Makes one [`ExpiryFilter`] per rewrite (compaction), with the cut of the moment it starts.
struct ExpiryFactory {
    /// The retention and row span, if the family has one.
    keep: Option<(i64, Span)>,
    /// Whether rows are data rows to pack (see [`ExpiryFilter`]).
    pack: bool,
    /// Whether rows are rtsd's rollup rows to store in their smallest encoding (see [`ExpiryFilter`]).
    compact_slots: bool,
    base_at: usize,
    tags_at: usize,
    pair: usize,
    metrics: Arc<Metrics>,
}

impl FilterFactory for ExpiryFactory {
    fn create(&self) -> Box<dyn RowFilter> {
        let now_ms = crate::timefmt::now_ms();
        let first_kept_base = match &self.keep {
            Some((keep_ms, span)) => span.row_start(now_ms.saturating_sub(*keep_ms).div_euclid(1000)),
            None => 0,
        };
        Box::new(ExpiryFilter {
            first_kept_base,
            pack_now_ms: self.pack.then_some(now_ms),
            compact_slots: self.compact_slots,
            packed: Vec::new(),
            base_at: self.base_at,
            tags_at: self.tags_at,
            pair: self.pair,
            last_removed: Vec::new(),
            removed: 0,
            metrics: self.metrics.clone(),
        })
    }
}

/// Drops the entries of rows that end before the cut. Keys of another shape are kept: nothing but a data row
/// is ever removed.
///
/// In the data table it also packs a quiet row's merged value that is not packed yet (see
/// `tables::merge_data_row`): a row whose last merge ran while it was still taking points, a row fsck rewrote,
/// or a row of a data directory written before rows were packed. Those are never merged again unless a late
/// point arrives;
/// every compaction that meets them (periodic ones included) packs them instead. Merge operands are not seen
/// here (RocksDB filters values only); their row is packed by the merge operator.
///
/// In rtsd's rollup tables it re-encodes a row whose columns have smaller encodings (decimal deltas, see
/// `rollup_rows`): rows the fold writes whole (a put, never merged again) and rows of a directory written
/// before those encodings. Rows merged by a flush or compaction got them from the merge operator.
struct ExpiryFilter {
    first_kept_base: u32,
    /// For the data table, the time (ms) the compaction started, against which a row is quiet (packed).
    pack_now_ms: Option<i64>,
    compact_slots: bool,
    /// The last packed (or re-encoded) value handed to the engine.
    packed: Vec<u8>,
    base_at: usize,
    tags_at: usize,
    pair: usize,
    /// The last row removed, so a row with several entries (merge operands, a merged value) counts once.
    last_removed: Vec<u8>,
    removed: u64,
    metrics: Arc<Metrics>,
}

impl ExpiryFilter {
    /// The base time of a key shaped like a data row's; `None` for any other key.
    fn base(&self, key: &[u8]) -> Option<u32> {
        if key.len() < self.tags_at || !(key.len() - self.tags_at).is_multiple_of(self.pair.max(1)) {
            return None;
        }
        Some(u32::from_be_bytes([
            key[self.base_at],
            key[self.base_at + 1],
            key[self.base_at + 2],
            key[self.base_at + 3],
        ]))
    }

    fn expired(&self, key: &[u8]) -> bool {
        self.base(key).is_some_and(|base| base < self.first_kept_base)
    }
}

impl RowFilter for ExpiryFilter {
    fn filter(&mut self, key: &[u8], value: &[u8]) -> FilterDecision<'_> {
        if !self.expired(key) {
            let quiet = |base| self.pack_now_ms.is_some_and(|now| super::tables::row_quiet(base, value, now));
            if !codec::is_packed(value) && self.base(key).is_some_and(quiet) {
                if let Some(packed) = codec::pack_row(value) {
                    self.packed = packed;
                    return FilterDecision::Change(&self.packed);
                }
            }
            if self.compact_slots {
                if let Some(compacted) = super::rollup_rows::compacted(value) {
                    self.packed = compacted;
                    return FilterDecision::Change(&self.packed);
                }
            }
            return FilterDecision::Keep;
        }
        if self.last_removed != key {
            self.removed += 1;
            self.last_removed.clear();
            self.last_removed.extend_from_slice(key);
        }
        FilterDecision::Remove
    }
}

impl Drop for ExpiryFilter {
    fn drop(&mut self) {
        self.metrics.rows_expired.inc_by(self.removed);
    }
}

/// What [`super::Store::reclaim_expired`] found (and, when fixing, removed).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reclaimed {
    /// Expired rows the compaction removed (fixing only).
    pub rows_removed: u64,
    /// Series whose newest hour is past every table's retention.
    pub series: u64,
    /// UIDs used only by those series: (kind, name, UID).
    pub uids: Vec<(UidKind, String, Vec<u8>)>,
    /// Whether some table keeps rows forever, so nothing can be past every retention.
    pub kept_forever: bool,
}

impl super::Store {
    /// Finds the series and UIDs unused for longer than every retention and, with `fix`, removes them: the
    /// expired rows (a compaction), the series' index entries and TSMeta, and the name <-> UID mappings and
    /// UIDMeta of UIDs no other series uses. A UID no series ever used (assigned but not written yet) is kept:
    /// its last use is unknown. Series known only from rollup points (postings without an `S` entry) keep their
    /// UIDs. UIDs are never handed out again (the max-id counters stay), as OpenTSDB's `uid delete`.
    pub fn reclaim_expired(&self, fix: bool) -> Result<Reclaimed, StoreError> {
        let mut out = Reclaimed::default();
        if fix {
            out.rows_removed = self.compact_expired()?;
        }
        let cut = self.retention.index_cut_ms();
        if cut == i64::MIN {
            out.kept_forever = true;
            return Ok(out);
        }
        let (mw, kw, vw) = (self.layout.uid_widths[0], self.layout.uid_widths[1], self.layout.uid_widths[2]);
        // UIDs by kind: used by a live series, and used by a stale one.
        let mut live: [HashSet<Vec<u8>>; 3] = Default::default();
        let mut stale_uids: [HashSet<Vec<u8>>; 3] = Default::default();
        let mut stale: HashSet<Vec<u8>> = HashSet::new();
        let note = |tsuid: &[u8], sets: &mut [HashSet<Vec<u8>>; 3]| {
            if !self.layout.is_tsuid(tsuid) {
                return;
            }
            sets[0].insert(self.layout.tsuid_metric(tsuid).to_vec());
            for (k, v) in self.layout.tsuid_pairs(tsuid) {
                sets[1].insert(k.to_vec());
                sets[2].insert(v.to_vec());
            }
        };
        self.scan_raw(CF_SERIES, &[SERIES], |key, value| {
            if key.first() != Some(&SERIES) {
                return false;
            }
            let hour = value.get(..4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let tsuid = &key[1..];
            if (i64::from(hour) + 3600) * 1000 <= cut {
                stale.insert(tsuid.to_vec());
                note(tsuid, &mut stale_uids);
            } else {
                note(tsuid, &mut live);
            }
            true
        })?;
        out.series = stale.len() as u64;
        let mut batch = WriteBatch::default();
        // Postings: drop a stale series' ones; any other series (also one with only rollup points) is live.
        self.scan_raw(CF_SERIES, &[POSTING], |key, _| {
            if key.first() != Some(&POSTING) || key.len() < 1 + mw + kw + vw {
                return key.first() == Some(&POSTING);
            }
            let mut tsuid = key[1..1 + mw].to_vec();
            tsuid.extend_from_slice(&key[1 + mw + kw + vw..]);
            if stale.contains(&tsuid) {
                batch.delete(CF_SERIES, key);
            } else {
                note(&tsuid, &mut live);
            }
            true
        })?;
        for tsuid in &stale {
            for tag in [SERIES, FIRST_SEEN, COUNTER] {
                let mut key = vec![tag];
                key.extend_from_slice(tsuid);
                batch.delete(CF_SERIES, &key);
            }
            batch.delete(CF_TSDB_META, &cell_key(TS_META, tsuid));
        }
        for (i, kind) in UidKind::ALL.into_iter().enumerate() {
            let mut uids: Vec<&Vec<u8>> = stale_uids[i].iter().filter(|u| !live[i].contains(*u)).collect();
            uids.sort();
            for uid in uids {
                let Some(name) = self.uids.name_of(kind, uid)? else { continue };
                let q = kind.as_str().as_bytes();
                batch.delete(CF_UID_ID, &cell_key(q, name.as_bytes()));
                batch.delete(CF_UID_NAME, &cell_key(q, uid));
                batch.delete(CF_UID_NAME, &cell_key(super::meta::uid_meta_qualifier(kind), uid));
                out.uids.push((kind, name, uid.clone()));
            }
        }
        if fix {
            self.engine.write(batch, Durability::Synced)?;
            self.drop_caches();
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(raw: &str, rollup: &str) -> Result<RetentionSettings, InvalidSetting> {
        let props: BTreeMap<String, String> =
            [("rtsd.retention.raw_hours", raw), ("rtsd.retention.rollup_hours", rollup)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        RetentionSettings::from_properties(&props)
    }

    #[test]
    fn retention_properties_parse_hours_per_interval() {
        // The defaults keep everything forever.
        let defaults: BTreeMap<String, String> = DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let s = RetentionSettings::from_properties(&defaults).unwrap();
        assert_eq!((s.raw_ms, s.for_interval("1m"), s.for_interval("1h"), s.other_rollup_ms), (None, None, None, None));
        let storm: BTreeMap<String, String> = STORM_STYLE.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let s = RetentionSettings::from_properties(&storm).unwrap();
        assert_eq!(s.raw_ms, Some(240 * 3_600_000));
        assert_eq!(s.for_interval("1m"), Some(720 * 3_600_000));
        assert_eq!(s.for_interval("10m"), Some(2160 * 3_600_000));
        assert_eq!(s.for_interval("1h"), Some(17520 * 3_600_000));
        assert_eq!(s.for_interval("30m"), Some(17520 * 3_600_000));
        // 0 keeps forever; a bare number applies to every interval; fractions are allowed.
        let s = settings("0", "0").unwrap();
        assert_eq!((s.raw_ms, s.for_interval("1m")), (None, None));
        let s = settings("0.5", "2, 1h:0").unwrap();
        assert_eq!((s.raw_ms, s.for_interval("1m"), s.for_interval("1h")), (Some(1_800_000), Some(7_200_000), None));
        // Only listed intervals: the others keep forever.
        assert_eq!(settings("1", "1m:1").unwrap().for_interval("1h"), None);
    }

    #[test]
    fn ttl_seconds_round_up_and_name_every_data_family() {
        let rollups = |on: &str| {
            let props: BTreeMap<String, String> =
                [("tsd.rollups.enable", on), ("rtsd.rollups.flush_interval_ms", "60000")]
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
            RollupSettings::from_properties(&props).unwrap()
        };
        let ttl = |raw: &str, rollup: &str, on: &str| Retention::new(&settings(raw, rollup).unwrap(), &rollups(on));
        assert_eq!(ttl("240", "0", "false").ttl_seconds(), vec![("tsdb:t".to_string(), Some(864_000))]);
        assert_eq!(ttl("0", "0", "false").ttl_seconds(), vec![("tsdb:t".to_string(), None)]);
        // 0.0003 h is 1.08 s: a TTL of 2 s, never less than the retention.
        let r = ttl("0.0003", "1h:1,1m:0", "true").ttl_seconds();
        let of = |f: &str| r.iter().find(|(name, _)| name == f).map(|(_, s)| *s);
        assert_eq!(of("tsdb:t"), Some(Some(2)));
        assert_eq!(of("tsdb-agg:t"), Some(Some(2)), "the default interval keeps the raw retention");
        assert_eq!(of("tsdb-rollup-1h:t"), Some(Some(3600)));
        assert_eq!(of("tsdb-rollup-agg-1h:t"), Some(Some(3600)));
        assert_eq!(of("tsdb-rollup-1m:t"), Some(None));
        assert_eq!(of("tsdb-rollup-10m:t"), Some(None), "unlisted intervals keep forever");
    }

    #[test]
    fn bad_retention_properties_are_refused_naming_the_property() {
        let e = settings("ten", "0").unwrap_err().to_string();
        assert_eq!(e, "invalid value for rtsd.retention.raw_hours: \"ten\": not a number of hours: \"ten\"");
        let e = settings("-1", "0").unwrap_err().to_string();
        assert!(e.ends_with("hours must be 0 (keep forever) or more"), "{e}");
        let e = settings("1", "1m:x").unwrap_err().to_string();
        assert!(e.starts_with("invalid value for rtsd.retention.rollup_hours: \"1m:x\""), "{e}");
        assert!(settings("1", ":5").is_err());
        assert!(settings("NaN", "0").is_err());
    }

    #[test]
    fn rows_expire_whole_at_their_span() {
        assert_eq!(Span::Hour.row_start(7200 + 59), 7200);
        let config = crate::rollup::RollupConfig::parse(crate::rollup::BUILTIN_CONFIG).unwrap();
        let day = Span::Rollup(config.interval("1h").unwrap().clone());
        assert_eq!(day.row_start(86_400 * 3 + 5000), 86_400 * 3);
    }

    mod store {
        use std::borrow::Cow;
        use std::path::Path;
        use std::sync::Arc;

        use rtsd_protocol::codec::{self, Value};
        use rtsd_protocol::point::{DataPoint, UidKind};

        use crate::config::Config;
        use crate::metrics::Metrics;
        use crate::rollup::RollupConfig;
        use crate::store::{ReadBudget, Store, CF_DATA};

        const HOUR: i64 = 3600;

        /// Raw tables alone unless a test turns rollups on (the shipped rtsd.conf does): rollups outlive raw
        /// data, so they would keep expired series alive.
        fn open(dir: &Path, overrides: &[(&str, &str)]) -> Store {
            let settings: Vec<(&str, &str)> =
                std::iter::once(("tsd.rollups.enable", "false")).chain(overrides.iter().copied()).collect();
            let config = Config::for_data_dir(dir, &settings).unwrap();
            Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
        }

        fn write(store: &Store, host: &str, points: &[(i64, i64)]) {
            let mut batch = store.new_batch();
            for &(ts, v) in points {
                let tags = [(Cow::Borrowed("host"), Cow::Borrowed(host))].into_iter().collect();
                let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: ts, value: Value::Int(v), tags };
                store.add_point(&mut batch, &p).unwrap();
            }
            store.commit(&mut batch, false).unwrap();
        }

        /// What a query of all time reads: (host UID's last byte, timestamp s, value).
        fn read(store: &Store) -> Vec<(u8, i64, i64)> {
            let metric = store.uids().get(UidKind::Metric, "m").unwrap().unwrap();
            let series =
                store.scan_series(metric.as_bytes(), 0, i64::MAX, &mut ReadBudget::default(), |_| Ok(true)).unwrap();
            let mut out = Vec::new();
            for s in series {
                for p in s.points {
                    let Value::Int(v) = p.value else { panic!("int points only") };
                    out.push((*s.tsuid.last().unwrap(), p.timestamp_ms / 1000, v));
                }
            }
            out
        }

        /// The base hours of the raw rows physically in RocksDB, in key order.
        fn stored_hours(store: &Store) -> Vec<i64> {
            let mut out = Vec::new();
            store
                .scan_raw(CF_DATA, &[], |key, _| {
                    out.push(i64::from(codec::row_base_time(key, 0, 3)));
                    true
                })
                .unwrap();
            out
        }

        fn hour_of(t: i64) -> i64 {
            t - t.rem_euclid(HOUR)
        }

        #[test]
        fn expired_rows_vanish_from_reads_at_once_and_from_disk_when_compacted_also_across_restarts() {
            // issue 6 item 4. Ten hours of raw data; points ten minutes either side of the cut and hours away
            // from it, so the test does not depend on how long it runs (short of ten minutes).
            let dir = tempfile::tempdir().unwrap();
            let retain = [("rtsd.retention.raw_hours", "10")];
            let now = crate::timefmt::now_ms() / 1000;
            let cut = now - 10 * HOUR;
            let (old, just_old, just_new, new) = (now - 30 * HOUR, cut - 600, cut + 600, now - HOUR);
            {
                // Written while it was all young (no retention yet), then read with the retention.
                let store = open(dir.path(), &[("rtsd.retention.raw_hours", "0")]);
                write(&store, "a", &[(old, 1), (just_old, 2), (just_new, 3), (new, 4)]);
                write(&store, "b", &[(old - 5 * HOUR, 5)]);
                drop(store);
                let store = open(dir.path(), &retain);
                // Reads stop at the cut at once, to the point; the old rows are still on disk.
                assert_eq!(read(&store), vec![(1, just_new, 3), (1, new, 4)]);
                let all_hours = stored_hours(&store);
                assert!(all_hours.contains(&hour_of(old)) && all_hours.contains(&hour_of(old - 5 * HOUR)));
                // Series b has nothing left in any table: the series index leaves it out.
                let metric = store.uids().get(UidKind::Metric, "m").unwrap().unwrap();
                let series: Vec<u8> = store
                    .series_of_metric(metric.as_bytes())
                    .unwrap()
                    .iter()
                    .map(|(t, _)| *t.last().unwrap())
                    .collect();
                assert_eq!(series, vec![1]);
            }
            // Restart before any compaction: still hidden.
            let store = open(dir.path(), &retain);
            assert_eq!(read(&store), vec![(1, just_new, 3), (1, new, 4)]);
            // A compaction removes the rows wholly before the cut (old, b's and just_old's hour if it is not the
            // cut's hour); the row holding the cut stays, its older point still hidden.
            let expired_hours: std::collections::BTreeSet<i64> =
                [old, old - 5 * HOUR, just_old].iter().map(|&t| hour_of(t)).filter(|&h| h < hour_of(cut)).collect();
            let removed = store.compact_expired().unwrap();
            assert_eq!(removed, expired_hours.len() as u64);
            let hours = stored_hours(&store);
            assert!(hours.iter().all(|h| *h >= hour_of(cut)), "{hours:?} after the cut {cut}");
            let mut kept: Vec<i64> = [just_new, new].iter().map(|&t| hour_of(t)).collect();
            if hour_of(just_old) == hour_of(cut) {
                kept.push(hour_of(just_old));
            }
            kept.sort();
            kept.dedup();
            assert_eq!(hours, kept);
            assert_eq!(read(&store), vec![(1, just_new, 3), (1, new, 4)]);
            // Newer data written after the compaction, and a restart: all as before.
            write(&store, "a", &[(now - 2 * HOUR, 6)]);
            drop(store);
            let store = open(dir.path(), &retain);
            assert_eq!(read(&store), vec![(1, just_new, 3), (1, now - 2 * HOUR, 6), (1, new, 4)]);
            assert_eq!(store.compact_expired().unwrap(), 0);
            assert_eq!(stored_hours(&store).len(), kept.len() + usize::from(!kept.contains(&hour_of(now - 2 * HOUR))));
        }

        #[test]
        fn writes_older_than_the_retention_are_accepted_but_never_read() {
            // README: Retention. OpenTSDB accepts them; rtsd stores them (for the rollups), hides them, and
            // compacts them away.
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), &[("rtsd.retention.raw_hours", "1")]);
            let now = crate::timefmt::now_ms() / 1000;
            write(&store, "a", &[(now - 5 * HOUR, 1), (now - 600, 2)]);
            assert_eq!(read(&store), vec![(1, now - 600, 2)]);
            store.flush_pending().unwrap();
            assert_eq!(read(&store), vec![(1, now - 600, 2)], "once stored");
            assert_eq!(stored_hours(&store), vec![hour_of(now - 5 * HOUR), hour_of(now - 600)]);
            assert_eq!(store.compact_expired().unwrap(), 1);
            assert_eq!(stored_hours(&store), vec![hour_of(now - 600)]);
        }

        #[test]
        fn a_retention_of_zero_keeps_everything() {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), &[("rtsd.retention.raw_hours", "0")]);
            write(&store, "a", &[(1356998400, 1)]);
            assert_eq!(store.compact_expired().unwrap(), 0);
            assert_eq!(read(&store), vec![(1, 1356998400, 1)]);
            assert_eq!(stored_hours(&store), vec![1356998400]);
        }

        #[test]
        fn rollup_tables_expire_by_their_own_interval() {
            // 1m rollups kept 2 hours, 1h rollups forever, raw 30 hours: a point 5 hours old has its 1m
            // bucket hidden and compacted away while its raw point and 1h bucket stay.
            let dir = tempfile::tempdir().unwrap();
            let store = open(
                dir.path(),
                &[
                    ("tsd.rollups.enable", "true"),
                    ("rtsd.retention.raw_hours", "30"),
                    ("rtsd.retention.rollup_hours", "1m:2,*:0"),
                ],
            );
            let now = crate::timefmt::now_ms() / 1000;
            let t = now - 5 * HOUR;
            write(&store, "a", &[(t, 7)]);
            store.fold_rollups(None).unwrap();
            let config = RollupConfig::parse(crate::rollup::BUILTIN_CONFIG).unwrap();
            let metric = store.uids().get(UidKind::Metric, "m").unwrap().unwrap();
            let buckets = |interval: &str| {
                let i = config.interval(interval).unwrap();
                let family = crate::rollup::RollupInterval::family(&i.table);
                let rows = store
                    .read_rollup(&family, i, &[0], metric.as_bytes(), 0, i64::MAX, &mut ReadBudget::default(), |_| {
                        Ok(true)
                    })
                    .unwrap();
                rows.iter().map(|r| r.values[0].len()).sum::<usize>()
            };
            assert_eq!((buckets("1m"), buckets("1h")), (0, 1));
            // The rollups rtsd computed, in `<table>:a`.
            let on_disk = |table: &str| {
                let family = crate::rollup::RollupInterval::auto_family(&crate::rollup::RollupInterval::family(table));
                let mut n = 0;
                store
                    .scan_raw(&family, b"", |_, _| {
                        n += 1;
                        true
                    })
                    .unwrap();
                n
            };
            assert_eq!((on_disk("tsdb-rollup-1m"), on_disk("tsdb-rollup-1h")), (1, 1));
            assert_eq!(store.compact_expired().unwrap(), 1);
            assert_eq!((on_disk("tsdb-rollup-1m"), on_disk("tsdb-rollup-1h")), (0, 1));
            assert_eq!(read(&store), vec![(1, t, 7)]);
        }

        #[test]
        fn series_and_uids_unused_past_every_retention_are_reclaimed() {
            // issue 6 item 4: `rtsd fsck --reclaim --fix`.
            let dir = tempfile::tempdir().unwrap();
            let retain = [("rtsd.retention.raw_hours", "10")];
            let now = crate::timefmt::now_ms() / 1000;
            // Written while young (no retention yet); reclaimed with the retention below.
            let store = open(dir.path(), &[("rtsd.retention.raw_hours", "0")]);
            let put = |metric: &str, host: &str, ts: i64| {
                let mut batch = store.new_batch();
                let tags = [(Cow::Borrowed("host"), Cow::Borrowed(host))].into_iter().collect();
                let p = DataPoint { metric: Cow::Borrowed(metric), timestamp: ts, value: Value::Int(1), tags };
                store.add_point(&mut batch, &p).unwrap();
                store.commit(&mut batch, false).unwrap();
            };
            put("m", "old1", now - 30 * HOUR); // m=1 host=1 old1=1
            put("m", "new", now - HOUR); // new=2
            put("gone", "old2", now - 20 * HOUR); // gone=2 old2=3
            put("m", "both", now - 20 * HOUR); // both=4, used by a live series below
            put("gone2", "both", now - 2 * HOUR); // gone2=3
            store.uids().get_or_create(UidKind::TagValue, "never", true).unwrap(); // never=5, no series yet
            drop(store);
            let store = open(dir.path(), &retain);
            let names = |r: &super::super::Reclaimed| {
                r.uids
                    .iter()
                    .map(|(k, n, u)| format!("{} {n} {}", k.as_str(), codec::uid_to_string(u)))
                    .collect::<Vec<_>>()
            };
            let report = store.reclaim_expired(false).unwrap();
            assert_eq!((report.series, report.rows_removed), (3, 0));
            assert_eq!(names(&report), ["metrics gone 000002", "tagv old1 000001", "tagv old2 000003"]);
            // A report changes nothing.
            assert!(store.uids().get(UidKind::Metric, "gone").unwrap().is_some());
            let fixed = store.reclaim_expired(true).unwrap();
            assert_eq!(names(&fixed), names(&report));
            assert_eq!((fixed.series, fixed.rows_removed), (3, 3));
            drop(store);
            let store = open(dir.path(), &retain);
            assert!(store.uids().get(UidKind::Metric, "gone").unwrap().is_none());
            assert!(store.uids().get(UidKind::TagValue, "old1").unwrap().is_none());
            assert_eq!(store.uids().name_of(UidKind::TagValue, &[0, 0, 3]).unwrap(), None);
            for (kind, name) in [(UidKind::Metric, "m"), (UidKind::TagKey, "host"), (UidKind::TagValue, "both")] {
                assert!(store.uids().get(kind, name).unwrap().is_some(), "{name} is still used");
            }
            assert!(store.uids().get(UidKind::TagValue, "never").unwrap().is_some());
            // The series index lists the live series only, even with every retention turned off.
            drop(store);
            let store = open(dir.path(), &[("rtsd.retention.raw_hours", "0")]);
            let mut all = Vec::new();
            store
                .for_each_series(None, |tsuid, _| {
                    all.push(codec::uid_to_string(tsuid));
                    true
                })
                .unwrap();
            assert_eq!(all, ["000001000001000002", "000003000001000004"]);
            assert_eq!(store.series_with_tag(&[0, 0, 1], &[0, 0, 1], &[0, 0, 1]).unwrap(), Vec::<Vec<u8>>::new());
            // A reclaimed name comes back with a new UID; old ones are never reused.
            let mut batch = store.new_batch();
            let tags = [(Cow::Borrowed("host"), Cow::Borrowed("x"))].into_iter().collect();
            let p = DataPoint { metric: Cow::Borrowed("gone"), timestamp: now, value: Value::Int(1), tags };
            store.add_point(&mut batch, &p).unwrap();
            store.commit(&mut batch, false).unwrap();
            assert_eq!(store.uids().get(UidKind::Metric, "gone").unwrap().unwrap().as_bytes(), &[0, 0, 4]);
            // Nothing to reclaim while some table keeps rows forever.
            assert!(store.reclaim_expired(false).unwrap().kept_forever);
        }
    }
}
