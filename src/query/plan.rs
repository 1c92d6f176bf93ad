//! What a sub-query reads (spec: query §1.5 step 1, §5.2): its metric resolved, its filters grouped per tag key,
//! the series it selects, and the engine's view of it (aggregator, downsample, rate) with the scan window that
//! view needs. Nothing is read here but the UID table.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;
use rtsd_protocol::query::{self as request, DownsampleSpec, Filter, SubQuery, TsQuery};

use super::{scan_window, Aggregator, Calendar, Downsampler, FillPolicy, Query, QueryError, RateConfig};
use crate::store::{Store, StoreError, Tsuid};

fn bad(message: String) -> QueryError {
    QueryError::Invalid(message)
}

/// One sub-query, resolved: what to read and how to select, group and compute.
pub(super) struct Plan<'q> {
    pub metric_uid: Vec<u8>,
    pub metric_name: String,
    pub selection: Selection<'q>,
    /// The tag key UIDs of the group-by filters, sorted.
    pub group_keys: Vec<Vec<u8>>,
    /// Whether any filter was given (the rollup read then keeps every series of the metric).
    pub filtered: bool,
    pub engine: Query,
    /// `[scan_start, scan_end)` in ms: the window the engine needs read (§1.5 step 2).
    pub scan_start: i64,
    pub scan_end: i64,
}

/// Which series of the metric a sub-query keeps.
pub(super) struct Selection<'q> {
    /// The TSUIDs a `tsuids` sub-query names (then there are no filters).
    pub tsuids: Option<Vec<Tsuid>>,
    pub metric_width: usize,
    /// The tag key UIDs of all filters, sorted: explicitTags asks for exactly these keys.
    pub filter_keys: Vec<Vec<u8>>,
    pub explicit_tags: bool,
    /// What a series must match, per key: filters are AND-ed, except that the case-sensitive literal_or filters
    /// of one key are one alternation of all their values, as 2.4.1's `TsdbQuery.findGroupBys` merges them
    /// into the row-key regex and checks them no more (`{host=web01,host=web02}` is both hosts; spec: query
    /// §5.2).
    pub matching: Vec<(Vec<u8>, Vec<&'q Filter>)>,
}

impl Selection<'_> {
    /// Whether a series with these tag pairs is kept: its TSUID listed, or every filtered key present (exactly
    /// those with explicitTags) and every filter group matching.
    pub fn keeps(&self, names: &mut Names<'_>, tags: &[(&[u8], &[u8])]) -> Result<bool, StoreError> {
        if let Some(tsuids) = &self.tsuids {
            let series_tags: Vec<u8> = tags.iter().flat_map(|(k, v)| k.iter().chain(v.iter()).copied()).collect();
            return Ok(tsuids.iter().any(|t| t.get(self.metric_width..) == Some(&series_tags[..])));
        }
        if self.explicit_tags
            && (tags.len() != self.filter_keys.len()
                || !tags.iter().all(|(k, _)| self.filter_keys.iter().any(|f| f == k)))
        {
            return Ok(false);
        }
        for (key, group) in &self.matching {
            let value = match tags.iter().find(|(k, _)| k == key) {
                Some((_, v)) => Some(names.name(UidKind::TagValue, v)?),
                None => None,
            };
            if !group.iter().any(|filter| filter.matches_series(value.as_deref())) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The groups of literal filters, whose values the series index can look up.
    pub fn literal_groups(&self) -> impl Iterator<Item = &(Vec<u8>, Vec<&Filter>)> {
        self.matching.iter().filter(|(_, group)| group[0].literal_values().is_some())
    }
}

/// Resolves a sub-query: the metric (or the TSUIDs' metric), the filtered tag keys and literal values (every
/// one must exist, §5.2), the aggregator and downsample. Fails with OpenTSDB's message for the first unknown
/// name, in that order.
pub(super) fn plan<'q>(
    store: &Store,
    names: &mut Names<'_>,
    query: &TsQuery,
    sub: &'q SubQuery,
) -> Result<Plan<'q>, QueryError> {
    let uids = store.uids();
    let mw = store.layout().uid_widths[0];
    let tsuids: Option<Vec<Tsuid>> = match sub.tsuid_list() {
        Some(list) => {
            request::check_tsuids_share_metric(list, mw)?;
            let parsed: Result<Vec<Tsuid>, _> = list.iter().map(|t| Tsuid::parse(t)).collect();
            Some(parsed.map_err(|e| bad(format!("Invalid TSUID: {e}")))?)
        }
        None => None,
    };
    let metric_uid: Vec<u8> = match (&tsuids, &sub.metric) {
        (Some(tsuids), _) => tsuids.first().and_then(|t| t.get(..mw)).map(<[u8]>::to_vec).unwrap_or_default(),
        (None, Some(m)) => match uids.get(UidKind::Metric, m)? {
            Some(uid) => uid.as_bytes().to_vec(),
            None => return Err(bad(format!("No such name for 'metrics': '{m}'"))),
        },
        (None, None) => return Err(bad("Missing the metric or tsuids, provide at least one".into())),
    };
    let metric_name = names.name(UidKind::Metric, &metric_uid)?;

    let filters: &'q [Filter] = if tsuids.is_some() { &[] } else { &sub.filters };
    // (tagk UID, filter) for every filter.
    let mut keyed = Vec::with_capacity(filters.len());
    for f in filters {
        let Some(k) = uids.get(UidKind::TagKey, &f.tagk)? else {
            return Err(bad(format!("No such name for 'tagk': '{}'", f.tagk)));
        };
        if let Some(values) = f.literal_values() {
            for v in values {
                if uids.get(UidKind::TagValue, v)?.is_none() {
                    return Err(bad(format!("No such name for 'tagv': '{v}'")));
                }
            }
        }
        keyed.push((k.as_bytes().to_vec(), f));
    }
    let sorted_keys = |group_by_only: bool| {
        let mut keys: Vec<Vec<u8>> =
            keyed.iter().filter(|(_, f)| !group_by_only || f.group_by).map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let filter_keys = sorted_keys(false);
    let group_keys = sorted_keys(true);
    // 2.4.1 applies explicitTags only to a sub-query with filters; without, it answers every series (the
    // differential suite against the real 2.4.1 showed it; the spec's reading had every tagged series excluded).
    let explicit_tags = sub.explicit_tags && !filter_keys.is_empty();
    let mut matching: Vec<(Vec<u8>, Vec<&'q Filter>)> = Vec::with_capacity(keyed.len());
    for (key, filter) in &keyed {
        let literal = filter.literal_values().is_some();
        match matching.iter_mut().find(|(k, group)| literal && k == key && group[0].literal_values().is_some()) {
            Some((_, group)) => group.push(*filter),
            None => matching.push((key.clone(), vec![*filter])),
        }
    }

    let engine = engine_query(query, sub)?;
    let (scan_start, scan_end) = scan_window(query.start_ms, query.end_ms, engine.downsample.as_ref());
    let filtered = !keyed.is_empty();
    Ok(Plan {
        metric_uid,
        metric_name,
        selection: Selection { tsuids, metric_width: mw, filter_keys, explicit_tags, matching },
        group_keys,
        filtered,
        engine,
        scan_start,
        scan_end,
    })
}

/// Converts a parsed sub-query into the engine's [`Query`].
fn engine_query(query: &TsQuery, sub: &SubQuery) -> Result<Query, QueryError> {
    let aggregator = Aggregator::from_name(&sub.aggregator)
        .ok_or_else(|| bad(format!("No such aggregation function: {}", sub.aggregator)))?;
    let downsample = sub.downsampler.as_ref().map(downsampler).transpose()?;
    let rate = sub.rate.then(|| {
        let o = sub.effective_rate_options();
        RateConfig {
            counter: o.counter,
            counter_max: o.counter_max,
            reset_value: o.reset_value,
            drop_resets: o.drop_resets,
        }
    });
    Ok(Query { start_ms: query.start_ms, end_ms: query.end_ms, aggregator, downsample, rate })
}

fn downsampler(spec: &DownsampleSpec) -> Result<Downsampler, QueryError> {
    let function = Aggregator::from_name(&spec.function)
        .ok_or_else(|| bad(format!("No such downsampling function: {}", spec.function)))?;
    // `scalar` is a member of OpenTSDB's enum but carries no value in a downsample spec; 2.4 fails when it runs.
    if spec.fill == FillPolicy::Scalar {
        return Err(bad(format!("Unrecognized fill policy: {}", spec.fill.name())));
    }
    let fill = spec.fill;
    if spec.run_all {
        return Ok(Downsampler::all(function, fill));
    }
    if spec.calendar {
        let step = spec.calendar_interval()?;
        let tz = match &spec.timezone {
            Some(name) => request::resolve_timezone(name)
                .map_err(|_| bad("The timezone specification could not be found".to_string()))?,
            None => jiff::tz::TimeZone::UTC,
        };
        return Ok(Downsampler::calendar(Calendar::new(step.count, step.unit, tz), function, fill));
    }
    Ok(Downsampler::fixed(spec.interval_ms, function, fill))
}

/// Caches UID -> name for one query: rows of a series repeat the same UIDs.
pub(super) struct Names<'a> {
    store: &'a Store,
    /// Per kind (metric, tag key, tag value), by UID: looked up by slice, with no key built per lookup (a wide
    /// query names thousands of series' tags).
    cache: [HashMap<Vec<u8>, String>; 3],
    /// Names looked up in the store (cache misses), and the time they took.
    pub resolved: u64,
    pub resolving: Duration,
}

impl<'a> Names<'a> {
    pub fn new(store: &'a Store) -> Names<'a> {
        Names { store, cache: Default::default(), resolved: 0, resolving: Duration::ZERO }
    }

    pub fn name(&mut self, kind: UidKind, uid: &[u8]) -> Result<String, StoreError> {
        let cache = match kind {
            UidKind::Metric => 0,
            UidKind::TagKey => 1,
            UidKind::TagValue => 2,
        };
        if let Some(n) = self.cache[cache].get(uid) {
            return Ok(n.clone());
        }
        let started = Instant::now();
        let n = self.store.uids().name_of(kind, uid)?.unwrap_or_else(|| codec::uid_to_string(uid));
        self.resolved += 1;
        self.resolving += started.elapsed();
        self.cache[cache].insert(uid.to_vec(), n.clone());
        Ok(n)
    }
}
