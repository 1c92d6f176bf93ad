//! `/api/query/last`'s engine: the newest point of each addressed series, from the series index (spec: query
//! §6.1). Unlike 2.4, `backScan` 0 needs no meta table: the index knows each series' newest hour.
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
        let Some(p) = newest(store, &tsuid).map_err(QueryError::Storage)? else { continue };
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
        store
            .for_each_series(Some(m.as_bytes()), |tsuid, _| {
                let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(tsuid).collect();
                if wanted.iter().all(|(k, v)| pairs.iter().any(|(pk, pv)| *pk == k.as_bytes() && *pv == v.as_bytes())) {
                    tsuids.push(tsuid.into());
                }
                true
            })
            .map_err(QueryError::Storage)?;
    }
    Ok(tsuids)
}

/// The newest point stored in the series' newest hour.
fn newest(store: &Store, tsuid: &[u8]) -> Result<Option<codec::RowPoint>, StoreError> {
    let Some(hour) = store.last_hour(tsuid)? else { return Ok(None) };
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
