//! `/api/search/lookup`'s engine: the series of a metric (or of all metrics) whose tags match, from the series
//! index, never from data rows (spec: query §6.5); on a store other writers share, also from `tsdb-meta`. Within one key, conditions are OR'd; across keys, AND'd; a `*`
//! value for a key overrides literal values for it.
use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;

use super::error::LookupError;
use crate::store::uid::Uid;
use crate::store::{Store, StoreError, Tsuid};

/// One `key=value` condition of a lookup; `None` stands for `*`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub key: Option<String>,
    pub value: Option<String>,
}

/// A series found, with its names.
pub struct LookupResult {
    pub tsuid: Tsuid,
    pub metric: String,
    /// (key, value) names in TSUID order.
    pub tags: Vec<(String, String)>,
}

/// A resolved condition: UIDs, `None` for `*`.
type UidCondition = (Option<Uid>, Option<Uid>);

/// The series of `metric` (every metric when `None`) that match `conditions`, at most `limit` of them (a
/// limit that is not positive does not cap). Fails with [`LookupError::Unresolved`] for a name without a UID.
pub fn lookup(
    store: &Store,
    metric: Option<&str>,
    conditions: &[Condition],
    limit: i64,
) -> Result<Vec<LookupResult>, LookupError> {
    let uids = store.uids();
    let resolve = |kind: UidKind, name: &str| -> Result<Uid, LookupError> {
        uids.get(kind, name)?.ok_or_else(|| LookupError::Unresolved(format!("No such name for '{kind}': '{name}'")))
    };
    let metric_uid = metric.map(|m| resolve(UidKind::Metric, m)).transpose()?;
    let mut resolved: Vec<UidCondition> = Vec::new();
    for c in conditions {
        let k = c.key.as_deref().map(|k| resolve(UidKind::TagKey, k)).transpose()?;
        let v = c.value.as_deref().map(|v| resolve(UidKind::TagValue, v)).transpose()?;
        resolved.push((k, v));
    }
    // Grafana sends limit=0 when its data source has no lookup limit set and still expects values: a limit
    // that is not positive does not cap the answer.
    let limit = if limit > 0 { usize::try_from(limit).unwrap_or(usize::MAX) } else { usize::MAX };
    let matches = matching_series(store, metric_uid.as_ref(), &resolved, limit)?;
    let layout = store.layout();
    let mut results = Vec::with_capacity(matches.len());
    for tsuid in matches {
        let name = |kind: UidKind, uid: &[u8]| -> Result<String, StoreError> {
            Ok(uids.name_of(kind, uid)?.unwrap_or_else(|| codec::uid_to_string(uid)))
        };
        let metric = name(UidKind::Metric, layout.tsuid_metric(&tsuid))?;
        let mut tags = Vec::new();
        for (k, v) in layout.tsuid_pairs(&tsuid) {
            tags.push((name(UidKind::TagKey, k)?, name(UidKind::TagValue, v)?));
        }
        results.push(LookupResult { tsuid, metric, tags });
    }
    Ok(results)
}

/// The TSUIDs of the first `limit` matching series.
fn matching_series(
    store: &Store,
    metric: Option<&Uid>,
    resolved: &[UidCondition],
    limit: usize,
) -> Result<Vec<Tsuid>, StoreError> {
    let layout = store.layout();
    // Other writers' series (OpenTSDB's TSDs on a shared HBase) are in no index of rtsd's; their realtime TS meta
    // keeps them in tsdb-meta, where 2.4's own lookup finds them: read too, and a series found in both is one.
    let shared = !store.series_index_is_complete();
    let mut seen = std::collections::HashSet::new();
    let mut matches: Vec<Tsuid> = Vec::new();
    let mut visit = |tsuid: &[u8]| -> bool {
        if matches.len() >= limit {
            return false;
        }
        if !layout.is_tsuid(tsuid) || (shared && !seen.insert(tsuid.to_vec())) {
            return true;
        }
        let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(tsuid).collect();
        if series_matches(&pairs, resolved) {
            matches.push(tsuid.into());
        }
        matches.len() < limit
    };
    // With a metric and a key whose conditions are all literal, the postings of that key's values (OR-ed, as
    // the series must match one of them) name the only candidates. A key that also has `k=*` gives none: its
    // literal values are moot (2.4's getRowKeyRegex skips them).
    let literal_key = resolved.iter().find_map(|(k, v)| {
        let k = k.as_ref()?;
        v.as_ref()?;
        let all_literal = resolved.iter().filter(|(other, _)| other.as_ref() == Some(k)).all(|(_, v)| v.is_some());
        all_literal.then_some(k)
    });
    match (metric, literal_key) {
        (Some(m), Some(k)) => {
            let mut candidates = Vec::new();
            for (_, v) in resolved.iter().filter(|(other, _)| other.as_ref() == Some(k)) {
                let v = v.as_ref().expect("a literal key's values are all literal");
                candidates.extend(store.series_with_tag(m.as_bytes(), k.as_bytes(), v.as_bytes())?);
            }
            candidates.sort();
            candidates.dedup();
            for tsuid in candidates {
                if !visit(&tsuid) {
                    break;
                }
            }
        }
        (m, _) => store.for_each_series(m.map(|m| m.as_bytes()), |tsuid, _| visit(tsuid))?,
    }
    if shared {
        store.for_each_meta_series(metric.map(|m| m.as_bytes()), &mut visit)?;
        // In TSUID order, as a scan of either table answers.
        matches.sort();
    }
    Ok(matches)
}

/// OR within a key, AND across keys; `*=v` matches any key with that value; a `k=*` makes every literal
/// condition on `k` moot.
fn series_matches(pairs: &[(&[u8], &[u8])], conditions: &[UidCondition]) -> bool {
    let mut keys: Vec<Option<&Uid>> = Vec::new();
    for (k, _) in conditions {
        if !keys.contains(&k.as_ref()) {
            keys.push(k.as_ref());
        }
    }
    keys.iter().all(|key| {
        let for_key: Vec<&UidCondition> = conditions.iter().filter(|(k, _)| k.as_ref() == *key).collect();
        match key {
            Some(k) => {
                let Some((_, value)) = pairs.iter().find(|(pk, _)| *pk == k.as_bytes()) else { return false };
                for_key.iter().any(|(_, v)| v.as_ref().is_none_or(|v| v.as_bytes() == *value))
            }
            // `*=v`: some tag of the series has one of these values (or any value at all).
            None => for_key.iter().any(|(_, v)| match v {
                Some(v) => pairs.iter().any(|(_, pv)| *pv == v.as_bytes()),
                None => !pairs.is_empty(),
            }),
        }
    })
}
