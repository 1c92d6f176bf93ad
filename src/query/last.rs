//! `/api/query/last`'s engine: the newest point of each addressed series, from the series index (spec: query
//! §6.1). Unlike 2.4, `backScan` 0 needs no meta table: the index knows each series' newest hour.
//!
//! On a store other writers share (HBase, beside OpenTSDB's TSDs), a series they alone write is in no index of
//! rtsd's. Such a series is addressed as 2.4 addresses it: by the metric and its complete tag set, or through the
//! `tsdb-meta` rows their realtime TS meta keeps; and with `backScan` its newest point is read from its rows, the
//! current hour's and `backScan` hours before, as 2.4 reads them.
use rtsd_protocol::codec::{self, Value};
use rtsd_protocol::point::UidKind;
use rtsd_protocol::query::LastPointQuery;

use super::QueryError;
use crate::store::{ReadBudget, Store, StoreError, Tsuid};

/// The newest point of one series.
pub struct LastPoint {
    pub tsuid: Tsuid,
    pub timestamp_ms: i64,
    pub value: Value,
    /// The metric name and the (key, value) tag names in TSUID order, when the query resolves names.
    pub names: Option<(String, Vec<(String, String)>)>,
}

/// The newest point of every series the query addresses (by TSUID, or by metric and a subset of its tags), in
/// the order addressed; a series without a point in its newest hour is left out.
pub fn last_points(store: &Store, q: &LastPointQuery) -> Result<Vec<LastPoint>, QueryError> {
    let tsuids = addressed(store, q)?;
    let mut out = Vec::new();
    for tsuid in tsuids {
        let Some(p) = newest(store, &tsuid, q.back_scan).map_err(QueryError::Storage)? else { continue };
        let names = if q.resolve_names { Some(names(store, &tsuid).map_err(QueryError::Storage)?) } else { None };
        out.push(LastPoint { tsuid, timestamp_ms: p.timestamp_ms, value: p.value, names });
    }
    Ok(out)
}

/// The TSUIDs the sub-queries address. Unknown names fail with OpenTSDB's texts (a 400 with the text as
/// details); store failures are [`QueryError::Storage`] whatever they are (this read has no budget).
fn addressed(store: &Store, q: &LastPointQuery) -> Result<Vec<Tsuid>, QueryError> {
    let invalid = |m: String| QueryError::Invalid(m);
    let uids = store.uids();
    let layout = store.layout();
    let mut tsuids: Vec<Tsuid> = Vec::new();
    for sub in &q.queries {
        if !sub.tsuids.is_empty() {
            for t in &sub.tsuids {
                tsuids.push(Tsuid::parse(t).map_err(|e| invalid(format!("Invalid TSUID: {e}")))?);
            }
            continue;
        }
        let Some(metric) = &sub.metric else { continue };
        let Some(m) = uids.get(UidKind::Metric, metric).map_err(QueryError::Storage)? else {
            return Err(invalid(format!("No such name for 'metrics': '{metric}'")));
        };
        let mut wanted = Vec::new();
        for (k, v) in &sub.tags {
            let Some(ku) = uids.get(UidKind::TagKey, k).map_err(QueryError::Storage)? else {
                return Err(invalid(format!("No such name for 'tagk': '{k}'")));
            };
            let Some(vu) = uids.get(UidKind::TagValue, v).map_err(QueryError::Storage)? else {
                return Err(invalid(format!("No such name for 'tagv': '{v}'")));
            };
            wanted.push((ku, vu));
        }
        // The tags are matched as a subset of each series' tags (2.4's meta-table behaviour, the useful one).
        let mut visit = |tsuid: &[u8]| {
            let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(tsuid).collect();
            if wanted.iter().all(|(k, v)| pairs.iter().any(|(pk, pv)| *pk == k.as_bytes() && *pv == v.as_bytes())) {
                tsuids.push(tsuid.into());
            }
            true
        };
        store.for_each_series(Some(m.as_bytes()), |tsuid, _| visit(tsuid)).map_err(QueryError::Storage)?;
        if !store.series_index_is_complete() {
            // Other writers' series: those their TS meta records, and the one the tags name completely (2.4's
            // backScan reads that series' rows; tag pairs sorted by tag key UID, as in the row key).
            store.for_each_meta_series(Some(m.as_bytes()), visit).map_err(QueryError::Storage)?;
            wanted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let mut exact = m.as_bytes().to_vec();
            for (k, v) in &wanted {
                exact.extend_from_slice(k.as_bytes());
                exact.extend_from_slice(v.as_bytes());
            }
            tsuids.push(exact.into());
        }
    }
    // A series found twice (in the index and in tsdb-meta) is answered once, where it was first addressed.
    let mut seen = std::collections::HashSet::new();
    tsuids.retain(|t| seen.insert(t.clone()));
    Ok(tsuids)
}

/// The newest point stored in the series' newest hour; for a series the index does not know on a shared store,
/// the newest in its rows of the current hour and `back_scan` hours before (none when `back_scan` is 0).
fn newest(store: &Store, tsuid: &Tsuid, back_scan: i32) -> Result<Option<codec::RowPoint>, StoreError> {
    let Some(hour) = store.last_hour(tsuid)? else {
        if store.series_index_is_complete() || back_scan <= 0 {
            return Ok(None);
        }
        let now = crate::timefmt::now_ms();
        let current_hour_ms = now - now.rem_euclid(3_600_000);
        let from = current_hour_ms - i64::from(back_scan) * 3_600_000;
        let read = store.read_series(
            std::slice::from_ref(tsuid),
            from,
            current_hour_ms + 3_600_000,
            &mut ReadBudget::default(),
        )?;
        return Ok(read.into_iter().flat_map(|s| s.points).max_by_key(|p| p.timestamp_ms));
    };
    let layout = store.layout();
    let mw = layout.uid_widths[0];
    let metric = layout.tsuid_metric(tsuid);
    let hour_ms = hour as i64 * 1000;
    let mut newest = None;
    store
        .scan_series(metric, hour_ms, hour_ms + 3_600_000, &mut ReadBudget::default(), |tags| {
            let series_tags: Vec<u8> = tags.iter().flat_map(|(k, v)| k.iter().chain(v.iter()).copied()).collect();
            Ok(series_tags == tsuid[mw..])
        })?
        .into_iter()
        .for_each(|s| newest = s.points.into_iter().max_by_key(|p| p.timestamp_ms));
    Ok(newest)
}

/// The series' metric name and tag names; a UID without a name is shown as its hex.
fn names(store: &Store, tsuid: &[u8]) -> Result<(String, Vec<(String, String)>), StoreError> {
    let uids = store.uids();
    let layout = store.layout();
    let name = |kind, uid: &[u8]| -> Result<String, StoreError> {
        Ok(uids.name_of(kind, uid)?.unwrap_or_else(|| codec::uid_to_string(uid)))
    };
    let metric = name(UidKind::Metric, layout.tsuid_metric(tsuid))?;
    let mut tags = Vec::new();
    for (k, v) in layout.tsuid_pairs(tsuid) {
        tags.push((name(UidKind::TagKey, k)?, name(UidKind::TagValue, v)?));
    }
    Ok((metric, tags))
}
