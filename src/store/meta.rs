//! UIDMeta and TSMeta: the descriptive records OpenTSDB keeps beside UIDs and series (spec: query §6.7, §6.8;
//! ingest §4.10, §4.11): typed records, and their cells and storage JSON as OpenTSDB 2.4 writes them. The JSON
//! that `/api/uid/uidmeta` and `/api/uid/tsmeta` answer with is another form, rendered by `server/http/meta.rs`.
//!
//! * UIDMeta lives where OpenTSDB puts it: `tsdb-uid:name`, row = UID, qualifier `metric_meta` / `tagk_meta` /
//!   `tagv_meta`, value = OpenTSDB's storage JSON (no name, no UID). rtsd writes it when it assigns a UID (so
//!   `created` is known, as with `tsd.core.meta.enable_realtime_uid`) and when `/api/uid/uidmeta` edits it. The
//!   name always comes from the UID maps, so a rename shows at once.
//! * TSMeta lives in `tsdb-meta:name`, row = TSUID, qualifier `ts_meta`, value = OpenTSDB's storage JSON; an
//!   empty value marks a deleted TSMeta (it stays deleted until re-created with `create=true`).
//! * Every series of the series index has a TSMeta, stored or not, as with OpenTSDB's real-time TS meta tracking
//!   (`tsd.core.meta.enable_tsuid_tracking`, `enable_realtime_ts`, `enable_tsuid_incrementing` all on) but
//!   without its writes per data point (spec: ingest §4.11, §7 item 12), whatever those settings say: `created`
//!   is when the index first saw the series (`F` records of [`super::series`]), `totalDatapoints` the points
//!   received for it (an overwrite counts again, as OpenTSDB's `ts_ctr` increments per put) and `lastReceived`
//!   the wall-clock second they were last received (`C` records, counted on ingest in memory and written about
//!   every second).
//! * A series without a counter record (data written before rtsd kept them) shows the points stored now and
//!   the newest one's time instead, counted when asked for ([`Store::count_points`]); `rtsd uid metasync` sets
//!   its counter from the stored points.
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::engine::{cell_key, Durability, ReadHints, WriteBatch};
use rtsd_protocol::codec;
use rtsd_protocol::http_json::{jackson_double_json, jackson_string_map_json, json_string};
use rtsd_protocol::point::UidKind;
use serde_json::Value as Json;

use super::{series, Store, StoreError, Tsuid, CF_DATA, CF_UID_NAME};

/// OpenTSDB's `tsdb-meta` table, family `name`.
pub const CF_TSDB_META: &str = "tsdb-meta:name";
pub(super) const TS_META: &[u8] = b"ts_meta";
/// OpenTSDB's per-series counter in `tsdb-meta` (realtime TS meta with `tsd.core.meta.enable_tsuid_incrementing`).
const TS_CTR: &[u8] = b"ts_ctr";

/// Above this many series of one metric, counting scans the metric's rows once instead of fetching each
/// series' rows hour by hour.
const SCAN_THRESHOLD: usize = 16;

/// Serialises read-modify-write of meta records (OpenTSDB uses compare-and-set and answers 500 when it loses).
static WRITES: Mutex<()> = Mutex::new(());

/// The `tsdb-uid:name` qualifier of a kind's UIDMeta (`metric_meta`; the docs' `metrics_meta` is not what the
/// code writes, spec: ingest §4.10).
pub fn uid_meta_qualifier(kind: UidKind) -> &'static [u8] {
    match kind {
        UidKind::Metric => b"metric_meta",
        UidKind::TagKey => b"tagk_meta",
        UidKind::TagValue => b"tagv_meta",
    }
}

/// The `type` of a UIDMeta in its JSON (stored and answered): `METRIC`, `TAGK`, `TAGV`.
pub fn type_name(kind: UidKind) -> &'static str {
    match kind {
        UidKind::Metric => "METRIC",
        UidKind::TagKey => "TAGK",
        UidKind::TagValue => "TAGV",
    }
}

pub(crate) fn now_seconds() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// A `custom` map: null, or string pairs (a repeated key keeps its first place and its last value).
pub type Custom = Option<Vec<(String, String)>>;

/// A value a request sets, tracked as OpenTSDB's setters track it: `changed` once a value different from the
/// current one was given (so setting a field to its default is no change, and `NaN` is always one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Field<T> {
    pub value: T,
    pub changed: bool,
}

impl<T: PartialEq + Clone> Field<T> {
    pub fn new(value: T) -> Field<T> {
        Field { value, changed: false }
    }

    pub fn set(&mut self, value: T) {
        if self.value != value {
            self.value = value;
            self.changed = true;
        }
    }

    /// OpenTSDB's `syncMeta`: a merge (POST) keeps the stored value of a field the request did not change; an
    /// overwrite (PUT) takes the request's value, a default when it gave none.
    fn pick(&self, stored: &T, overwrite: bool) -> T {
        if !overwrite && !self.changed {
            stored.clone()
        } else {
            self.value.clone()
        }
    }
}

impl Field<Custom> {
    /// `setCustom`: any non-null map counts as a change (maps are not compared).
    pub fn set_custom(&mut self, custom: Custom) {
        if self.value.is_some() || custom.is_some() {
            self.value = custom;
            self.changed = true;
        }
    }
}

/// `created` after a sync: the stored time wins when it is set and earlier (or the request gave none).
fn merge_created(local: i64, stored: i64) -> i64 {
    if stored > 0 && (stored < local || local == 0) {
        stored
    } else {
        local
    }
}

// ---------------------------------------------------------------------------------------------------------------
// UIDMeta

/// The stored, user-editable part of a UIDMeta.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UidMetaFields {
    pub display_name: String,
    pub description: String,
    pub notes: String,
    /// Seconds; 0 if unknown.
    pub created: i64,
    pub custom: Custom,
}

impl UidMetaFields {
    /// OpenTSDB's `UIDMeta.getStorageJSON`.
    fn storage_json(&self, kind: UidKind) -> String {
        format!(
            "{{\"type\":\"{}\",\"displayName\":{},\"description\":{},\"notes\":{},\"created\":{},\"custom\":{}}}",
            type_name(kind),
            json_string(&self.display_name),
            json_string(&self.description),
            json_string(&self.notes),
            self.created,
            jackson_string_map_json(self.custom.as_deref())
        )
    }

    /// Reads stored JSON leniently: a field that is missing or of the wrong type keeps its default.
    fn from_storage(bytes: &[u8]) -> UidMetaFields {
        let Ok(Json::Object(obj)) = serde_json::from_slice::<Json>(bytes) else {
            tracing::warn!("unreadable UIDMeta JSON in storage; using defaults");
            return UidMetaFields::default();
        };
        UidMetaFields {
            display_name: stored_text(obj.get("displayName")),
            description: stored_text(obj.get("description")),
            notes: stored_text(obj.get("notes")),
            created: obj.get("created").and_then(Json::as_i64).unwrap_or(0),
            custom: stored_custom(obj.get("custom")),
        }
    }
}

/// The JSON OpenTSDB stores for a UIDMeta made at assignment time (`created` in seconds).
pub fn uid_meta_storage_json(kind: UidKind, created: i64) -> String {
    UidMetaFields { created, ..UidMetaFields::default() }.storage_json(kind)
}

fn stored_text(v: Option<&Json>) -> String {
    v.and_then(Json::as_str).unwrap_or_default().to_string()
}

fn stored_custom(v: Option<&Json>) -> Custom {
    let obj = v?.as_object()?;
    Some(
        obj.iter().map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect(),
    )
}

/// A UIDMeta with its UID and current name: what `/api/uid/uidmeta` and TSMeta objects show.
#[derive(Debug, Clone, PartialEq)]
pub struct UidMeta {
    pub uid: Vec<u8>,
    pub kind: UidKind,
    pub name: String,
    pub fields: UidMetaFields,
}

/// What a UIDMeta POST or PUT sets: OpenTSDB's `UIDMeta` as a request fills it, starting from defaults.
#[derive(Debug, Clone, Default)]
pub struct UidMetaEdit {
    pub display_name: Field<String>,
    pub description: Field<String>,
    pub notes: Field<String>,
    pub created: Field<i64>,
    pub custom: Field<Custom>,
}

impl UidMetaEdit {
    /// False means OpenTSDB's "No changes detected" (a 304).
    pub fn has_changes(&self) -> bool {
        self.display_name.changed
            || self.description.changed
            || self.notes.changed
            || self.created.changed
            || self.custom.changed
    }

    fn apply(&self, stored: Option<&UidMetaFields>, overwrite: bool) -> UidMetaFields {
        let local = UidMetaFields {
            display_name: self.display_name.value.clone(),
            description: self.description.value.clone(),
            notes: self.notes.value.clone(),
            created: self.created.value,
            custom: self.custom.value.clone(),
        };
        let Some(s) = stored else { return local };
        UidMetaFields {
            display_name: self.display_name.pick(&s.display_name, overwrite),
            description: self.description.pick(&s.description, overwrite),
            notes: self.notes.pick(&s.notes, overwrite),
            created: merge_created(local.created, s.created),
            custom: self.custom.pick(&s.custom, overwrite),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// TSMeta

/// The stored, user-editable part of a TSMeta.
#[derive(Debug, Clone, PartialEq)]
pub struct TsMetaFields {
    pub display_name: String,
    pub description: String,
    pub notes: String,
    /// Seconds; 0 if unknown.
    pub created: i64,
    pub custom: Custom,
    pub units: String,
    pub data_type: String,
    pub retention: i32,
    pub max: f64,
    pub min: f64,
}

impl Default for TsMetaFields {
    fn default() -> Self {
        TsMetaFields {
            display_name: String::new(),
            description: String::new(),
            notes: String::new(),
            created: 0,
            custom: None,
            units: String::new(),
            data_type: String::new(),
            retention: 0,
            max: f64::NAN,
            min: f64::NAN,
        }
    }
}

impl TsMetaFields {
    /// OpenTSDB's `TSMeta.getStorageJSON`.
    fn storage_json(&self, tsuid: &[u8]) -> String {
        format!(
            "{{\"tsuid\":\"{}\",\"displayName\":{},\"description\":{},\"notes\":{},\"created\":{},\"custom\":{},\
             \"units\":{},\"dataType\":{},\"retention\":{},\"max\":{},\"min\":{}}}",
            codec::uid_to_string(tsuid),
            json_string(&self.display_name),
            json_string(&self.description),
            json_string(&self.notes),
            self.created,
            jackson_string_map_json(self.custom.as_deref()),
            json_string(&self.units),
            json_string(&self.data_type),
            self.retention,
            jackson_double_json(self.max),
            jackson_double_json(self.min)
        )
    }

    fn from_storage(bytes: &[u8]) -> TsMetaFields {
        let Ok(Json::Object(obj)) = serde_json::from_slice::<Json>(bytes) else {
            tracing::warn!("unreadable TSMeta JSON in storage; using defaults");
            return TsMetaFields::default();
        };
        let double = |k: &str| match obj.get(k) {
            Some(Json::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(Json::String(s)) => match s.as_str() {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other.parse().unwrap_or(f64::NAN),
            },
            _ => f64::NAN,
        };
        TsMetaFields {
            display_name: stored_text(obj.get("displayName")),
            description: stored_text(obj.get("description")),
            notes: stored_text(obj.get("notes")),
            created: obj.get("created").and_then(Json::as_i64).unwrap_or(0),
            custom: stored_custom(obj.get("custom")),
            units: stored_text(obj.get("units")),
            data_type: stored_text(obj.get("dataType")),
            retention: obj.get("retention").and_then(Json::as_i64).map(|r| r as i32).unwrap_or(0),
            max: double("max"),
            min: double("min"),
        }
    }
}

/// What a TSMeta POST or PUT sets: OpenTSDB's `TSMeta` as a request fills it, starting from defaults.
#[derive(Debug, Clone)]
pub struct TsMetaEdit {
    /// The TSUID as given (hex), empty when the request named none.
    pub tsuid: String,
    pub display_name: Field<String>,
    pub description: Field<String>,
    pub notes: Field<String>,
    pub created: Field<i64>,
    pub custom: Field<Custom>,
    pub units: Field<String>,
    pub data_type: Field<String>,
    pub retention: Field<i32>,
    pub max: Field<f64>,
    pub min: Field<f64>,
}

impl Default for TsMetaEdit {
    fn default() -> Self {
        TsMetaEdit {
            tsuid: String::new(),
            display_name: Field::default(),
            description: Field::default(),
            notes: Field::default(),
            created: Field::default(),
            custom: Field::default(),
            units: Field::default(),
            data_type: Field::default(),
            retention: Field::default(),
            max: Field::new(f64::NAN),
            min: Field::new(f64::NAN),
        }
    }
}

impl TsMetaEdit {
    /// False means OpenTSDB's "No changes detected" (a 304).
    pub fn has_changes(&self) -> bool {
        self.display_name.changed
            || self.description.changed
            || self.notes.changed
            || self.created.changed
            || self.custom.changed
            || self.units.changed
            || self.data_type.changed
            || self.retention.changed
            || self.max.changed
            || self.min.changed
    }

    /// The request's values alone (a new TSMeta).
    fn fields(&self) -> TsMetaFields {
        TsMetaFields {
            display_name: self.display_name.value.clone(),
            description: self.description.value.clone(),
            notes: self.notes.value.clone(),
            created: self.created.value,
            custom: self.custom.value.clone(),
            units: self.units.value.clone(),
            data_type: self.data_type.value.clone(),
            retention: self.retention.value,
            max: self.max.value,
            min: self.min.value,
        }
    }

    fn apply(&self, s: &TsMetaFields, overwrite: bool) -> TsMetaFields {
        TsMetaFields {
            display_name: self.display_name.pick(&s.display_name, overwrite),
            description: self.description.pick(&s.description, overwrite),
            notes: self.notes.pick(&s.notes, overwrite),
            created: merge_created(self.created.value, s.created),
            custom: self.custom.pick(&s.custom, overwrite),
            units: self.units.pick(&s.units, overwrite),
            data_type: self.data_type.pick(&s.data_type, overwrite),
            retention: self.retention.pick(&s.retention, overwrite),
            max: self.max.pick(&s.max, overwrite),
            min: self.min.pick(&s.min, overwrite),
        }
    }
}

/// A TSMeta with its UIDMetas and point counts: what `/api/uid/tsmeta` shows.
#[derive(Debug, Clone)]
pub struct TsMeta {
    pub tsuid: Tsuid,
    pub metric: UidMeta,
    /// tagk, tagv, tagk, tagv... in TSUID order.
    pub tags: Vec<UidMeta>,
    pub fields: TsMetaFields,
    /// Seconds; 0 when no point is stored.
    pub last_received: i64,
    pub total_datapoints: u64,
}

/// A TSUID's metric UID and its (tagk, tagv) UID pairs.
pub type SplitTsuid<'a> = (&'a [u8], Vec<(&'a [u8], &'a [u8])>);

/// Where a series' TSMeta stands.
enum TsState {
    /// No stored TSMeta and no indexed series.
    Missing,
    /// Deleted through the API.
    Deleted,
    /// Stored or implied by the series index; `created` already falls back to the index's first-seen time.
    Present(TsMetaFields),
}

// ---------------------------------------------------------------------------------------------------------------
// Storage

impl Store {
    /// The UIDMeta of a UID (defaults where nothing is stored); None if the UID has no name.
    pub fn uid_meta(&self, kind: UidKind, uid: &[u8]) -> Result<Option<UidMeta>, StoreError> {
        let Some(name) = self.uids.name_of(kind, uid)? else { return Ok(None) };
        let fields = self.stored_uid_fields(kind, uid)?.unwrap_or_default();
        Ok(Some(UidMeta { uid: uid.to_vec(), kind, name, fields }))
    }

    fn stored_uid_fields(&self, kind: UidKind, uid: &[u8]) -> Result<Option<UidMetaFields>, StoreError> {
        let stored = self.engine.get(CF_UID_NAME, &cell_key(uid_meta_qualifier(kind), uid), ReadHints::default())?;
        Ok(stored.map(|bytes| UidMetaFields::from_storage(&bytes)))
    }

    /// Applies a UIDMeta POST (`overwrite` false: merge) or PUT (overwrite) durably and returns the result; None if
    /// the UID has no name.
    pub fn update_uid_meta(
        &self,
        kind: UidKind,
        uid: &[u8],
        edit: &UidMetaEdit,
        overwrite: bool,
    ) -> Result<Option<UidMeta>, StoreError> {
        let _guard = WRITES.lock().unwrap_or_else(|p| p.into_inner());
        if self.uids.name_of(kind, uid)?.is_none() {
            return Ok(None);
        }
        let stored = self.stored_uid_fields(kind, uid)?;
        let fields = edit.apply(stored.as_ref(), overwrite);
        let mut batch = WriteBatch::default();
        batch.put(CF_UID_NAME, &cell_key(uid_meta_qualifier(kind), uid), fields.storage_json(kind).as_bytes());
        self.write_synced(batch)?;
        self.uid_meta(kind, uid)
    }

    /// Deletes a UIDMeta (the UID and its name stay).
    pub fn delete_uid_meta(&self, kind: UidKind, uid: &[u8]) -> Result<(), StoreError> {
        let _guard = WRITES.lock().unwrap_or_else(|p| p.into_inner());
        let mut batch = WriteBatch::default();
        batch.delete(CF_UID_NAME, &cell_key(uid_meta_qualifier(kind), uid));
        self.write_synced(batch)
    }

    /// Splits a TSUID into its metric UID and (tagk, tagv) pairs, refusing what OpenTSDB's
    /// `UniqueId.getTagsFromTSUID` refuses, with its texts.
    pub fn split_tsuid<'a>(&self, tsuid: &'a [u8]) -> Result<SplitTsuid<'a>, String> {
        let [mw, kw, vw] = self.layout.uid_widths;
        if tsuid.is_empty() {
            return Err("Missing TSUID".to_string());
        }
        if tsuid.len() <= mw {
            return Err("TSUID is too short, may be missing tags".to_string());
        }
        if !(tsuid.len() - mw).is_multiple_of(kw + vw) {
            return Err("The TSUID appears to be malformed, improper tag width".to_string());
        }
        let pairs = self.layout.tsuid_pairs(tsuid).collect();
        Ok((self.layout.tsuid_metric(tsuid), pairs))
    }

    fn ts_state(&self, tsuid: &[u8]) -> Result<TsState, StoreError> {
        self.settle()?;
        let stored = self.engine.get(CF_TSDB_META, &cell_key(TS_META, tsuid), ReadHints::default())?;
        let first_seen =
            || -> Result<i64, StoreError> { Ok(series::first_seen(self.engine.as_ref(), tsuid)?.map_or(0, i64::from)) };
        Ok(match stored {
            Some(bytes) if bytes.is_empty() => TsState::Deleted,
            Some(bytes) => {
                let mut fields = TsMetaFields::from_storage(&bytes);
                if fields.created == 0 {
                    fields.created = first_seen()?;
                }
                TsState::Present(fields)
            }
            None if series::last_hour(self.engine.as_ref(), tsuid)?.is_some() => {
                TsState::Present(TsMetaFields { created: first_seen()?, ..TsMetaFields::default() })
            }
            None => TsState::Missing,
        })
    }

    /// Whether a series has a TSMeta (stored, or implied by the series index and not deleted).
    pub fn ts_meta_exists(&self, tsuid: &[u8]) -> Result<bool, StoreError> {
        Ok(matches!(self.ts_state(tsuid)?, TsState::Present(_)))
    }

    /// The TSMeta of a series with its UIDMetas and point counts; None if it has none.
    pub fn ts_meta(&self, tsuid: &[u8]) -> Result<Option<TsMeta>, StoreError> {
        let TsState::Present(fields) = self.ts_state(tsuid)? else { return Ok(None) };
        let counts = self.ts_counters(&[tsuid.into()])?;
        Ok(Some(self.assemble_ts_meta(tsuid, fields, counts[0])?))
    }

    /// For each TSUID: `totalDatapoints` and `lastReceived` (seconds) from its counter, or for a series without
    /// one, from its stored points (see the module docs).
    fn ts_counters(&self, tsuids: &[Tsuid]) -> Result<Vec<(u64, i64)>, StoreError> {
        // Points still in the series table are counted when it is flushed into rows.
        self.settle()?;
        self.flush_counters()?;
        let mut out = Vec::with_capacity(tsuids.len());
        let mut uncounted = Vec::new();
        for (i, tsuid) in tsuids.iter().enumerate() {
            match series::counter(self.engine.as_ref(), tsuid)? {
                Some((points, seconds)) => out.push((points, i64::from(seconds))),
                None => {
                    out.push((0, 0));
                    uncounted.push(i);
                }
            }
        }
        if !uncounted.is_empty() {
            let wanted: Vec<Tsuid> = uncounted.iter().map(|&i| tsuids[i].clone()).collect();
            for (i, (points, newest_ms)) in uncounted.into_iter().zip(self.count_points(&wanted)?) {
                out[i] = (points, if points > 0 { newest_ms.div_euclid(1000) } else { 0 });
            }
        }
        Ok(out)
    }

    fn assemble_ts_meta(&self, tsuid: &[u8], fields: TsMetaFields, counts: (u64, i64)) -> Result<TsMeta, StoreError> {
        let (metric, pairs) = self.split_tsuid(tsuid).map_err(StoreError::Corrupt)?;
        let uid_meta = |kind: UidKind, uid: &[u8]| -> Result<UidMeta, StoreError> {
            self.uid_meta(kind, uid)?.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "TSUID {} holds {kind} UID {} which has no name",
                    codec::uid_to_string(tsuid),
                    codec::uid_to_string(uid)
                ))
            })
        };
        let mut tags = Vec::with_capacity(pairs.len() * 2);
        for (k, v) in pairs {
            tags.push(uid_meta(UidKind::TagKey, k)?);
            tags.push(uid_meta(UidKind::TagValue, v)?);
        }
        let (total, last_received) = counts;
        Ok(TsMeta {
            tsuid: tsuid.into(),
            metric: uid_meta(UidKind::Metric, metric)?,
            tags,
            fields,
            last_received,
            total_datapoints: total,
        })
    }

    /// The TSUIDs `tsdb-meta` has a row for (a TSMeta or OpenTSDB's counter), of one metric or of all, in TSUID
    /// order: where OpenTSDB's TSDs record their series when realtime TS meta is on, and where 2.4's lookup
    /// finds them. What readers that must see other writers' series ask besides the series index.
    pub fn for_each_meta_series(
        &self,
        metric: Option<&[u8]>,
        mut f: impl FnMut(&[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let mut found = std::collections::BTreeSet::new();
        for qualifier in [TS_META, TS_CTR] {
            self.for_each_meta_row(qualifier, metric, |tsuid| {
                found.insert(tsuid.to_vec());
                true
            })?;
        }
        for tsuid in &found {
            if !f(tsuid) {
                break;
            }
        }
        Ok(())
    }

    /// The rows of `tsdb-meta` holding a `qualifier` cell (of one metric's TSUIDs, or all), in row order, until `f`
    /// says stop.
    fn for_each_meta_row(
        &self,
        qualifier: &[u8],
        metric: Option<&[u8]>,
        mut f: impl FnMut(&[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let prefix = cell_key(qualifier, metric.unwrap_or_default());
        let mut iter = self
            .engine
            .cursor(CF_TSDB_META, ReadHints::default())
            .ok_or_else(|| StoreError::Corrupt(format!("no table {CF_TSDB_META}")))?;
        iter.seek(&prefix);
        while iter.valid() {
            let key = iter.key();
            if !key.starts_with(&prefix) || !f(&key[qualifier.len() + 1..]) {
                break;
            }
            iter.next();
        }
        iter.status()?;
        Ok(())
    }

    /// The TSMetas of a metric's series that carry every given (tagk, tagv) pair, in TSUID order (OpenTSDB's
    /// `TSUIDQuery.getTSMetas`: a series may have more tags than asked for).
    pub fn ts_metas_of_metric(&self, metric: &[u8], tags: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<TsMeta>, StoreError> {
        let matches = |tsuid: &[u8]| match self.split_tsuid(tsuid) {
            Ok((_, pairs)) => tags.iter().all(|(k, v)| pairs.iter().any(|(pk, pv)| pk == k && pv == v)),
            Err(_) => false,
        };
        let mut candidates: Vec<Tsuid> = Vec::new();
        self.for_each_series(Some(metric), |tsuid, _| {
            if matches(tsuid) {
                candidates.push(tsuid.into());
            }
            true
        })?;
        // TSMetas created through the API for series without data yet.
        self.for_each_meta_row(TS_META, Some(metric), |tsuid| {
            if matches(tsuid) {
                candidates.push(tsuid.into());
            }
            true
        })?;
        candidates.sort();
        candidates.dedup();
        let mut present = Vec::with_capacity(candidates.len());
        for tsuid in candidates {
            if let TsState::Present(fields) = self.ts_state(&tsuid)? {
                present.push((tsuid, fields));
            }
        }
        let tsuids: Vec<Tsuid> = present.iter().map(|(t, _)| t.clone()).collect();
        let counts = self.ts_counters(&tsuids)?;
        present.into_iter().zip(counts).map(|((tsuid, fields), c)| self.assemble_ts_meta(&tsuid, fields, c)).collect()
    }

    /// Applies a TSMeta POST (`overwrite` false: merge) or PUT (overwrite) durably and returns the result; None if
    /// the series has no TSMeta.
    pub fn update_ts_meta(
        &self,
        tsuid: &[u8],
        edit: &TsMetaEdit,
        overwrite: bool,
    ) -> Result<Option<TsMeta>, StoreError> {
        {
            let _guard = WRITES.lock().unwrap_or_else(|p| p.into_inner());
            let TsState::Present(current) = self.ts_state(tsuid)? else { return Ok(None) };
            self.put_ts_fields(tsuid, &edit.apply(&current, overwrite))?;
        }
        self.ts_meta(tsuid)
    }

    /// Stores a new TSMeta from a request's values (`create=true`); the caller checked that the UIDs exist.
    pub fn create_ts_meta(&self, tsuid: &[u8], edit: &TsMetaEdit) -> Result<Option<TsMeta>, StoreError> {
        {
            let _guard = WRITES.lock().unwrap_or_else(|p| p.into_inner());
            self.put_ts_fields(tsuid, &edit.fields())?;
        }
        self.ts_meta(tsuid)
    }

    /// Deletes a series' TSMeta (its data and UIDs stay); it stays deleted until created again.
    pub fn delete_ts_meta(&self, tsuid: &[u8]) -> Result<(), StoreError> {
        let _guard = WRITES.lock().unwrap_or_else(|p| p.into_inner());
        let mut batch = WriteBatch::default();
        batch.put(CF_TSDB_META, &cell_key(TS_META, tsuid), &[]);
        self.write_synced(batch)
    }

    fn put_ts_fields(&self, tsuid: &[u8], fields: &TsMetaFields) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        batch.put(CF_TSDB_META, &cell_key(TS_META, tsuid), fields.storage_json(tsuid).as_bytes());
        self.write_synced(batch)
    }

    fn write_synced(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.engine.write(batch, Durability::Synced)
    }

    /// For each TSUID: how many points it has stored and the newest one's timestamp (ms), counted from the data
    /// rows between the metric's oldest hour and the series' newest indexed hour. Few series of a metric are read
    /// row by row (one multi-get per series); many are counted in one scan of the metric's rows.
    pub fn count_points(&self, tsuids: &[Tsuid]) -> Result<Vec<(u64, i64)>, StoreError> {
        self.settle()?;
        let mw = self.layout.uid_widths[0];
        let mut out = vec![(0u64, 0i64); tsuids.len()];
        let mut by_metric: BTreeMap<&[u8], Vec<usize>> = BTreeMap::new();
        for (i, t) in tsuids.iter().enumerate() {
            if t.len() > mw {
                by_metric.entry(&t[..mw]).or_default().push(i);
            }
        }
        for (metric, idxs) in by_metric {
            let Some(first) = self.first_hour_of_metric(metric)? else { continue };
            if idxs.len() > SCAN_THRESHOLD {
                let offset = self.layout.tags_offset();
                let mut wanted: HashMap<&[u8], Vec<usize>> = HashMap::new();
                for &i in &idxs {
                    wanted.entry(&tsuids[i][mw..]).or_default().push(i);
                }
                self.for_each_row(metric, first, u32::MAX, |row| {
                    if let Some(slots) = wanted.get(&row.key[offset..]) {
                        let mut tally = (0, 0);
                        count_row(row.base_time, row.value, &mut tally);
                        for &i in slots {
                            out[i] = (out[i].0 + tally.0, out[i].1.max(tally.1));
                        }
                    }
                    Ok(true)
                })?;
                continue;
            }
            for i in idxs {
                let tsuid = &tsuids[i];
                let Some(last) = series::last_hour(self.engine.as_ref(), tsuid)? else { continue };
                let hours: Vec<u32> = (first..=last.max(first)).step_by(3600).collect();
                for chunk in hours.chunks(1024) {
                    let keys: Vec<Vec<u8>> = chunk.iter().map(|&h| self.layout.row_key(tsuid, i64::from(h))).collect();
                    let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                    self.engine.get_many(CF_DATA, &key_refs, true, ReadHints::default(), &mut |j, value| {
                        if let Some(value) = value {
                            count_row(chunk[j], value, &mut out[i]);
                        }
                        Ok(())
                    })?;
                }
            }
        }
        Ok(out)
    }

    /// The earliest base hour with a data row of `metric`, over every salt bucket.
    fn first_hour_of_metric(&self, metric: &[u8]) -> Result<Option<u32>, StoreError> {
        let salt = &self.layout.salt;
        let buckets = if salt.width == 0 { 1 } else { salt.buckets };
        let mut first: Option<u32> = None;
        for bucket in 0..buckets {
            let mut prefix = Vec::with_capacity(salt.width + metric.len());
            if salt.width > 0 {
                prefix.extend_from_slice(&(bucket as u64).to_be_bytes()[8 - salt.width..]);
            }
            prefix.extend_from_slice(metric);
            let Some(mut iter) = self.engine.cursor(CF_DATA, ReadHints::default()) else { break };
            iter.seek(&prefix);
            if iter.valid() {
                let key = iter.key();
                if key.len() >= prefix.len() + 4 && key.starts_with(&prefix) {
                    let h = &key[prefix.len()..prefix.len() + 4];
                    let hour = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
                    first = Some(first.map_or(hour, |f| f.min(hour)));
                }
            }
            iter.status()?;
        }
        Ok(first)
    }
}

/// Adds a row's points to a (count, newest ms) tally; an undecodable row is logged and skipped.
fn count_row(base_time: u32, value: &[u8], acc: &mut (u64, i64)) {
    match codec::row_points(base_time, value) {
        Ok(points) => {
            acc.0 += points.len() as u64;
            if let Some(last) = points.last() {
                acc.1 = acc.1.max(last.timestamp_ms);
            }
        }
        Err(e) => tracing::warn!(error = %e, base_time, "row skipped while counting points"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_meta_storage_json_is_opentsdbs() {
        // OpenTSDB's `UIDMeta.getStorageJSON`: no UID and no name, `type` first.
        assert_eq!(
            uid_meta_storage_json(UidKind::TagValue, 5),
            r#"{"type":"TAGV","displayName":"","description":"","notes":"","created":5,"custom":null}"#
        );
        let fields = UidMetaFields {
            display_name: "CPU".into(),
            created: 7,
            custom: Some(vec![("owner".into(), "Jane".into())]),
            ..UidMetaFields::default()
        };
        let stored = fields.storage_json(UidKind::Metric);
        assert_eq!(
            stored,
            r#"{"type":"METRIC","displayName":"CPU","description":"","notes":"","created":7,"custom":{"owner":"Jane"}}"#
        );
        assert_eq!(UidMetaFields::from_storage(stored.as_bytes()), fields);
    }

    #[test]
    fn uid_meta_edits_merge_or_overwrite() {
        let stored = UidMetaFields {
            display_name: "CPU".into(),
            description: "desc".into(),
            notes: "n".into(),
            created: 100,
            custom: Some(vec![("owner".into(), "jane".into())]),
        };
        let mut edit = UidMetaEdit::default();
        assert!(!edit.has_changes());
        edit.display_name.set(String::new()); // the default: no change
        assert!(!edit.has_changes());
        edit.notes.set("new".into());
        assert!(edit.has_changes());
        let merged = edit.apply(Some(&stored), false);
        assert_eq!(merged, UidMetaFields { notes: "new".into(), ..stored.clone() });
        let replaced = edit.apply(Some(&stored), true);
        assert_eq!(replaced, UidMetaFields { notes: "new".into(), created: 100, ..UidMetaFields::default() });
        // A later request time never replaces an earlier stored one; an earlier one does.
        edit.created.set(200);
        assert_eq!(edit.apply(Some(&stored), false).created, 100);
        edit.created.set(50);
        assert_eq!(edit.apply(Some(&stored), false).created, 50);
    }

    #[test]
    fn ts_meta_edits_track_changes_like_the_java_setters() {
        let mut edit = TsMetaEdit::default();
        edit.retention.set(0);
        edit.units.set(String::new());
        edit.custom.set_custom(None);
        assert!(!edit.has_changes());
        // NaN != NaN: setting max to NaN is a change in OpenTSDB too.
        edit.max.set(f64::NAN);
        assert!(edit.has_changes());
        let fields = TsMetaFields::default();
        assert_eq!(
            fields.storage_json(&[0, 0, 1, 0, 0, 1, 0, 0, 1]),
            r#"{"tsuid":"000001000001000001","displayName":"","description":"","notes":"","created":0,"custom":null,"units":"","dataType":"","retention":0,"max":"NaN","min":"NaN"}"#
        );
        let back = TsMetaFields::from_storage(fields.storage_json(&[0, 0, 1]).as_bytes());
        assert!(back.max.is_nan() && back.min.is_nan());
        let with =
            TsMetaFields { max: 1024.0, custom: Some(vec![("a".into(), "b".into())]), ..TsMetaFields::default() };
        let back = TsMetaFields::from_storage(with.storage_json(&[0, 0, 1]).as_bytes());
        assert_eq!(back.max, 1024.0);
        assert_eq!(back.custom, with.custom);
    }

    mod store {
        use std::borrow::Cow;
        use std::path::Path;
        use std::sync::Arc;

        use rtsd_protocol::codec::Value;
        use rtsd_protocol::point::{DataPoint, Tags};

        use super::super::*;
        use crate::config::Config;
        use crate::metrics::Metrics;
        use crate::store::uid::{AssignError, RenameError};

        fn open(dir: &Path, overrides: &[(&str, &str)]) -> Store {
            let config = Config::for_data_dir(dir, overrides).unwrap();
            Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
        }

        fn put(store: &Store, points: &[(&str, i64, i64, &str)]) {
            let mut batch = store.new_batch();
            for (metric, ts, v, host) in points {
                let tags: Tags<'_> = [(Cow::Borrowed("host"), Cow::Borrowed(*host))].into_iter().collect();
                let p = DataPoint { metric: Cow::Borrowed(*metric), timestamp: *ts, value: Value::Int(*v), tags };
                store.add_point(&mut batch, &p).unwrap();
            }
            store.commit(&mut batch, false).unwrap();
        }

        const S1: [u8; 9] = [0, 0, 1, 0, 0, 1, 0, 0, 1];

        #[test]
        fn indexed_series_have_a_ts_meta_with_counted_points() {
            for salt in ["0", "1"] {
                let dir = tempfile::tempdir().unwrap();
                let store = open(dir.path(), &[("tsd.storage.salt.width", salt)]);
                let before = now_seconds();
                put(&store, &[("m", 1356998400, 1, "a"), ("m", 1356998460, 2, "a"), ("m", 1357005600, 3, "a")]);
                put(&store, &[("m", 1356998460, 5, "a"), ("m", 1356990000, 4, "a"), ("m", 1356998400, 9, "b")]);
                let m = store.ts_meta(&S1).unwrap().expect("a TSMeta for an indexed series");
                // Every point received counts, an overwrite too (OpenTSDB's ts_ctr counts puts), and
                // lastReceived is the wall-clock second they arrived.
                assert_eq!(m.total_datapoints, 5, "salt {salt}");
                assert!(m.last_received >= before && m.last_received <= now_seconds(), "salt {salt}");
                assert!(m.fields.created >= before && m.fields.created <= now_seconds() + 1);
                assert_eq!(m.metric.name, "m");
                assert_eq!(m.tags.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["host", "a"]);
                assert!(m.metric.fields.created >= before, "UIDMeta written at assignment");
                assert!(store.ts_meta(&[0, 0, 1, 0, 0, 1, 0, 0, 9]).unwrap().is_none());
                let all = store.ts_metas_of_metric(&[0, 0, 1], &[]).unwrap();
                assert_eq!(all.iter().map(|m| m.total_datapoints).collect::<Vec<_>>(), [5, 1]);
                // Counters survive a reopen and keep adding.
                drop(store);
                let store = open(dir.path(), &[("tsd.storage.salt.width", salt)]);
                put(&store, &[("m", 1356998461, 1, "a")]);
                assert_eq!(store.ts_meta(&S1).unwrap().unwrap().total_datapoints, 6);
                // Stored points, counted on request (a series written before counters existed), and what
                // `uid metasync` sets the counter to: an overwritten timestamp counts once.
                assert_eq!(store.count_points(&[S1[..].into()]).unwrap(), [(5, 1_357_005_600_000)]);
                let mut batch = WriteBatch::default();
                batch.delete(series::CF_SERIES, &series::counter_key(&S1));
                store.engine.write(batch, Durability::Logged).unwrap();
                let m = store.ts_meta(&S1).unwrap().unwrap();
                assert_eq!((m.total_datapoints, m.last_received), (5, 1357005600), "salt {salt}");
                store.rebuild_series_index(|_| {}).unwrap();
                assert_eq!(series::counter(store.engine.as_ref(), &S1).unwrap(), Some((5, 1357005600)));
                // The scan path (many series) counts as the per-series path does.
                let many: Vec<Tsuid> = (0..=SCAN_THRESHOLD as u8).map(|_| S1[..].into()).collect();
                assert!(store.count_points(&many).unwrap().iter().all(|c| *c == (5, 1_357_005_600_000)));
            }
        }

        #[test]
        fn ts_meta_edits_persist_and_delete_leaves_a_tombstone() {
            let dir = tempfile::tempdir().unwrap();
            {
                let store = open(dir.path(), &[]);
                put(&store, &[("m", 1356998400, 1, "a")]);
                let created = store.ts_meta(&S1).unwrap().unwrap().fields.created;
                let mut edit = TsMetaEdit::default();
                edit.display_name.set("CPU".into());
                edit.units.set("%".into());
                let m = store.update_ts_meta(&S1, &edit, false).unwrap().unwrap();
                assert_eq!((m.fields.display_name.as_str(), m.fields.units.as_str()), ("CPU", "%"));
                assert_eq!(m.fields.created, created, "created kept from the index");
                let mut edit = TsMetaEdit::default();
                edit.notes.set("n".into());
                let m = store.update_ts_meta(&S1, &edit, false).unwrap().unwrap();
                assert_eq!((m.fields.display_name.as_str(), m.fields.notes.as_str()), ("CPU", "n"));
                let m = store.update_ts_meta(&S1, &edit, true).unwrap().unwrap();
                assert_eq!((m.fields.display_name.as_str(), m.fields.notes.as_str()), ("", "n"), "PUT resets");
            }
            let store = open(dir.path(), &[]);
            assert_eq!(store.ts_meta(&S1).unwrap().unwrap().fields.notes, "n", "kept across a restart");
            store.delete_ts_meta(&S1).unwrap();
            assert!(store.ts_meta(&S1).unwrap().is_none());
            assert!(!store.ts_meta_exists(&S1).unwrap());
            put(&store, &[("m", 1356998401, 1, "a")]);
            assert!(store.ts_meta(&S1).unwrap().is_none(), "new points do not undo a delete");
            let m = store.create_ts_meta(&S1, &TsMetaEdit::default()).unwrap().unwrap();
            assert_eq!(m.total_datapoints, 2);
        }

        #[test]
        fn uid_meta_merges_and_survives_rename() {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), &[]);
            put(&store, &[("sys.cpu.0", 1356998400, 1, "a")]);
            let uid = [0, 0, 1];
            let mut edit = UidMetaEdit::default();
            edit.display_name.set("System CPU".into());
            edit.custom.set_custom(Some(vec![("owner".into(), "Jane".into())]));
            let m = store.update_uid_meta(UidKind::Metric, &uid, &edit, false).unwrap().unwrap();
            assert_eq!(m.fields.display_name, "System CPU");
            assert!(m.fields.created > 0);
            assert!(store.update_uid_meta(UidKind::Metric, &[0, 0, 9], &edit, false).unwrap().is_none());
            store.uids().rename(UidKind::Metric, "sys.cpu.0", "sys.cpu.zero").unwrap();
            let m = store.uid_meta(UidKind::Metric, &uid).unwrap().unwrap();
            assert_eq!((m.name.as_str(), m.fields.display_name.as_str()), ("sys.cpu.zero", "System CPU"));
            assert!(store.uids().get(UidKind::Metric, "sys.cpu.0").unwrap().is_none());
            assert_eq!(store.uids().suggest(UidKind::Metric, "sys", 10).unwrap(), ["sys.cpu.zero"]);
            store.delete_uid_meta(UidKind::Metric, &uid).unwrap();
            assert_eq!(store.uid_meta(UidKind::Metric, &uid).unwrap().unwrap().fields, UidMetaFields::default());
        }

        #[test]
        fn suggest_reads_one_kind_in_byte_order_up_to_max() {
            // spec: query §6.4 (byte-wise prefix, ascending UTF-8 byte order, at most `max`, per kind)
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), &[]);
            let uids = store.uids();
            for name in ["sys.b", "sys.a", "sys", "sysz", "Sys.c", "sys.é", "sy"] {
                uids.assign_new(UidKind::Metric, name).unwrap();
            }
            uids.assign_new(UidKind::TagKey, "sys.k").unwrap();
            uids.assign_new(UidKind::TagValue, "sys.v").unwrap();
            assert_eq!(uids.suggest(UidKind::Metric, "sys", 25).unwrap(), ["sys", "sys.a", "sys.b", "sys.é", "sysz"]);
            assert_eq!(uids.suggest(UidKind::Metric, "sys.", 2).unwrap(), ["sys.a", "sys.b"]);
            assert_eq!(uids.suggest(UidKind::Metric, "", 3).unwrap(), ["Sys.c", "sy", "sys"]);
            assert_eq!(uids.suggest(UidKind::Metric, "sys.é", 25).unwrap(), ["sys.é"]);
            assert_eq!(uids.suggest(UidKind::Metric, "x", 25).unwrap(), Vec::<String>::new());
            assert_eq!(uids.suggest(UidKind::TagKey, "", 25).unwrap(), ["sys.k"]);
            assert_eq!(uids.suggest(UidKind::TagValue, "sys", 25).unwrap(), ["sys.v"]);
            // A kind's id counter shares the forward map's key space; it is never a name.
            assert_eq!(uids.suggest(UidKind::TagKey, "\0", 25).unwrap(), Vec::<String>::new());
        }

        #[test]
        fn assign_reports_existing_names_and_rename_refuses_like_opentsdb() {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), &[]);
            let uids = store.uids();
            assert_eq!(uids.assign_new(UidKind::Metric, "a").unwrap().as_bytes(), [0, 0, 1]);
            let e = uids.assign_new(UidKind::Metric, "a").unwrap_err();
            assert!(matches!(e, AssignError::Exists(_)));
            assert_eq!(e.to_string(), "Name already exists with UID: 000001");
            assert_eq!(uids.assign_new(UidKind::Metric, "b").unwrap().as_bytes(), [0, 0, 2]);
            assert!(matches!(uids.rename(UidKind::Metric, "x", "y"), Err(RenameError::NoSuchName(_))));
            assert_eq!(uids.rename(UidKind::Metric, "x", "y").unwrap_err().to_string(), "Name(\"x\") does not exist");
            assert_eq!(
                uids.rename(UidKind::Metric, "a", "b").unwrap_err().to_string(),
                "When trying rename(\"a\", \"b\") on UniqueId(tsdb-uid, metrics, 3): new name already assigned ID=[0, 0, 2]"
            );
            uids.rename(UidKind::Metric, "a", "c").unwrap();
            drop(store);
            let store = open(dir.path(), &[]);
            assert_eq!(store.uids().get(UidKind::Metric, "c").unwrap().unwrap().as_bytes(), [0, 0, 1]);
            assert!(store.uids().get(UidKind::Metric, "a").unwrap().is_none());
            assert_eq!(store.uids().name_of(UidKind::Metric, &[0, 0, 1]).unwrap().as_deref(), Some("c"));
            assert_eq!(store.uids().suggest(UidKind::Metric, "", 10).unwrap(), ["b", "c"]);
        }
    }
}
