//! Runs a parsed `/api/query` against the store (spec: query §1.5): resolve names, read the scan window, select
//! series by their filters, group, run the engine per group, build the response objects.
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use rtsd_protocol::annotation;
use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;
use rtsd_protocol::query::{self as request, DownsampleSpec, SubQuery, TsQuery};

use super::output::{split_tags, GroupOutput};
use super::stats::{QueryStats, ResultStats, SubStats};
use super::QueryError;
use super::{
    grid_points, scan_window, Aggregator, Calendar, Downsampler, FillPolicy, GridRow, Point, Query, RateConfig,
};
use crate::config::QueryLimits;
use crate::store::{ReadBudget, Store, StoreError, StoredSeries};

fn bad(message: String) -> QueryError {
    QueryError::Invalid(message)
}

/// Runs every sub-query in order and returns the result objects of all of them. The limits apply to the whole
/// query: its deadline starts now, and points and bytes read add up across sub-queries.
pub fn execute(store: &Store, query: &TsQuery, limits: QueryLimits) -> Result<Vec<GroupOutput>, QueryError> {
    execute_cancellable(store, query, limits, None).map(|(groups, _)| groups)
}

/// [`execute`], stopping with [`QueryError::Cancelled`] at the next row read once `cancelled` is set; also returns what the
/// query measured (for `showSummary`; `showStats` objects are already in the results).
pub fn execute_cancellable(
    store: &Store,
    query: &TsQuery,
    limits: QueryLimits,
    cancelled: Option<Arc<AtomicBool>>,
) -> Result<(Vec<GroupOutput>, QueryStats), QueryError> {
    let mut stats = QueryStats::default();
    let mut budget = ReadBudget {
        cancelled,
        deadline: (limits.timeout_ms > 0)
            .then(|| std::time::Instant::now() + std::time::Duration::from_millis(limits.timeout_ms)),
        max_points: if query.override_data_point_limit && limits.allow_override_data_points {
            0
        } else {
            limits.max_data_points
        },
        max_bytes: if query.override_byte_limit && limits.allow_override_bytes { 0 } else { limits.max_bytes },
        ..ReadBudget::default()
    };
    let mut out = Vec::new();
    for (index, sub) in query.queries.iter().enumerate() {
        let mut sub_stats = SubStats { index, ..SubStats::default() };
        out.extend(execute_sub(store, query, sub, &mut budget, &mut sub_stats)?);
        stats.subs.push(sub_stats);
    }
    Ok((out, stats))
}

/// The series of `tsuids` (of one metric) that `select` keeps, given their tag pairs.
fn selected_by(
    tsuids: Vec<Vec<u8>>,
    layout: &crate::store::Layout,
    select: &mut impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let mut selected = Vec::new();
    for t in tsuids {
        let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(t.as_slice()).collect();
        if select(&pairs)? {
            selected.push(t.clone());
        }
    }
    Ok(selected)
}

/// A series as the aggregation reads it: its points already through their per-series stages.
struct ReadSeries {
    tsuid: Vec<u8>,
    tags: Vec<(Vec<u8>, Vec<u8>)>,
    /// JSON of the annotations stored in its scanned rows.
    annotations: Vec<Vec<u8>>,
    points: Vec<Point>,
    /// Its staged values on the sub-query's grid instead of `points`, when the read was onto one (values,
    /// present buckets; see [`super::GridRow`]).
    grid: Option<(Vec<f64>, Vec<u64>)>,
    /// How many stored points (or rollup cells) were read for it, before staging.
    stored_points: usize,
}

/// Caches UID -> name for one query: rows of a series repeat the same UIDs.
struct Names<'a> {
    store: &'a Store,
    /// Per kind (metric, tag key, tag value), by UID: looked up by slice, with no key built per lookup (a wide
    /// query names thousands of series' tags).
    cache: [HashMap<Vec<u8>, String>; 3],
    /// Names looked up in the store (cache misses), and the time they took.
    resolved: u64,
    resolving: std::time::Duration,
}

impl Names<'_> {
    fn name(&mut self, kind: UidKind, uid: &[u8]) -> Result<String, StoreError> {
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

fn execute_sub(
    store: &Store,
    query: &TsQuery,
    sub: &SubQuery,
    budget: &mut ReadBudget,
    stats: &mut SubStats,
) -> Result<Vec<GroupOutput>, QueryError> {
    let uids = store.uids();
    let layout = store.layout();
    let mw = layout.uid_widths[0];

    // 1. Resolve the metric (or the TSUIDs' metric), the filtered tag keys and literal values.
    let tsuid_filter: Option<Vec<Vec<u8>>> = match sub.tsuid_list() {
        Some(list) => {
            request::check_tsuids_share_metric(list, mw)?;
            let parsed: Result<Vec<Vec<u8>>, _> = list.iter().map(|t| codec::string_to_uid(t, None)).collect();
            Some(parsed.map_err(|e| bad(format!("Invalid TSUID: {e}")))?)
        }
        None => None,
    };
    let metric_uid: Vec<u8> = match (&tsuid_filter, &sub.metric) {
        (Some(tsuids), _) => tsuids.first().and_then(|t| t.get(..mw)).map(<[u8]>::to_vec).unwrap_or_default(),
        (None, Some(m)) => match uids.get(UidKind::Metric, m)? {
            Some(uid) => uid.as_bytes().to_vec(),
            None => return Err(bad(format!("No such name for 'metrics': '{m}'"))),
        },
        (None, None) => return Err(bad("Missing the metric or tsuids, provide at least one".into())),
    };
    let mut names = Names { store, cache: Default::default(), resolved: 0, resolving: std::time::Duration::ZERO };
    let metric_name = names.name(UidKind::Metric, &metric_uid)?;

    let filters = if tsuid_filter.is_some() { Vec::new() } else { sub.filters.clone() };
    // (tagk UID, filter) for every filter; every filtered key must exist on a series (§5.2).
    let mut keyed = Vec::with_capacity(filters.len());
    for f in &filters {
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
    let mut filter_keys: Vec<Vec<u8>> = keyed.iter().map(|(k, _)| k.clone()).collect();
    filter_keys.sort();
    filter_keys.dedup();
    // 2.4.1 applies explicitTags only to a sub-query with filters; without, it answers every series (the
    // differential suite against the real 2.4.1 showed it; the spec's reading had every tagged series excluded).
    let explicit_tags = sub.explicit_tags && !filter_keys.is_empty();
    let mut group_keys: Vec<Vec<u8>> = keyed.iter().filter(|(_, f)| f.group_by).map(|(k, _)| k.clone()).collect();
    group_keys.sort();
    group_keys.dedup();
    // What a series must match, per key: filters are AND-ed, except that the case-sensitive literal_or filters of
    // one key are one alternation of all their values, as 2.4.1's `TsdbQuery.findGroupBys` merges them into the
    // row-key regex and checks them no more (`{host=web01,host=web02}` is both hosts; spec: query §5.2).
    let mut matching: Vec<(&[u8], Vec<&request::Filter>)> = Vec::with_capacity(keyed.len());
    for (key, filter) in &keyed {
        let literal = filter.literal_values().is_some();
        match matching
            .iter_mut()
            .find(|(k, group)| literal && *k == key.as_slice() && group[0].literal_values().is_some())
        {
            Some((_, group)) => group.push(filter),
            None => matching.push((key.as_slice(), vec![*filter])),
        }
    }

    // 2. The engine's view of the sub-query, and the window it needs read.
    let mut engine = engine_query(query, sub)?;
    let (scan_start, scan_end) = scan_window(query.start_ms, query.end_ms, engine.downsample.as_ref());

    let scan_started = Instant::now();
    let (rows_before, skipped_before, points_before) = (budget.rows, budget.rows_skipped, budget.points);
    let (resolved_before, resolving_before) = (names.resolved, names.resolving);
    // 3. Select series: every filtered key present, explicitTags, every filter matching.
    let mut select = |tags: &[(&[u8], &[u8])]| -> Result<bool, StoreError> {
        if let Some(tsuids) = &tsuid_filter {
            let series_tags: Vec<u8> = tags.iter().flat_map(|(k, v)| k.iter().chain(v.iter()).copied()).collect();
            return Ok(tsuids.iter().any(|t| t.get(mw..) == Some(&series_tags[..])));
        }
        if explicit_tags
            && (tags.len() != filter_keys.len() || !tags.iter().all(|(k, _)| filter_keys.iter().any(|f| f == k)))
        {
            return Ok(false);
        }
        for (key, group) in &matching {
            let value = match tags.iter().find(|(k, _)| k == key) {
                Some((_, v)) => Some(names.name(UidKind::TagValue, v)?),
                None => None,
            };
            if !group.iter().any(|filter| filter.matches_series(value.as_deref())) {
                return Ok(false);
            }
        }
        Ok(true)
    };
    // With a literal_or filter the index's postings name every candidate series: read only their rows
    // instead of every row of the metric (spec: query §9, the million-series complaint).
    let mut candidates: Option<Vec<Vec<u8>>> = None;
    for (key, group) in &matching {
        if group[0].literal_values().is_none() {
            continue;
        }
        let mut these = Vec::new();
        for v in group.iter().filter_map(|filter| filter.literal_values()).flatten() {
            if let Some(vu) = uids.get(UidKind::TagValue, v)? {
                these.extend(store.series_with_tag(&metric_uid, key, vu.as_bytes())?);
            }
        }
        candidates = Some(match candidates {
            None => these,
            Some(previous) => previous.into_iter().filter(|t| these.contains(t)).collect(),
        });
    }
    // Series the index selected (literal filters), to be read by key rather than by scanning the metric.
    let mut targeted: Option<Vec<Vec<u8>>> = match candidates {
        Some(mut tsuids) if tsuid_filter.is_none() => {
            tsuids.sort();
            tsuids.dedup();
            Some(selected_by(tsuids, layout, &mut select)?)
        }
        _ => None,
    };
    // A downsample a rollup interval divides may be answered from a rollup table (spec: query §6.13).
    // A delete reads (and then deletes) raw rows, as 2.4's scanner does whatever table it reads.
    let rolled = if query.delete {
        None
    } else {
        super::rollup::read(
            store,
            sub,
            &mut engine,
            &metric_uid,
            targeted.as_deref(),
            scan_start,
            scan_end,
            budget,
            keyed.is_empty() && tsuid_filter.is_none() && !explicit_tags,
            &mut select,
        )?
    };
    // A downsampled query stages each series as soon as it is read (see below); reading raw data series by series, from
    // the index's list of the metric's series with data from the scan start on, holds one series' raw points
    // at a time instead of every series' (a month of 1000 hosts is 43 M points; spec: query §9 item 2).
    if rolled.is_none() && targeted.is_none() && engine.downsample.is_some() {
        let first_hour =
            u32::try_from(scan_start.div_euclid(1000) - scan_start.div_euclid(1000).rem_euclid(3600)).unwrap_or(0);
        let mut all = Vec::new();
        store.for_each_series(Some(&metric_uid), |t, newest| {
            if newest >= first_hour {
                all.push(t.to_vec());
            }
            true
        })?;
        targeted = Some(selected_by(all, layout, &mut select)?);
    }
    let rollup_table = rolled.as_ref().map_or_else(|| "raw".to_string(), |r| r.table.clone());
    // Each series through its own stages (downsample, rate) as soon as it is read: only the staged points are
    // kept for the aggregation.
    let stage = |s: StoredSeries| ReadSeries {
        stored_points: s.points.len(),
        points: engine.stage(s.points.iter().map(Point::from)),
        grid: None,
        tsuid: s.tsuid,
        tags: s.tags,
        annotations: s.annotations,
    };
    // The bucket grid (first bucket, width) the series were read onto, if they were.
    let mut grid = None;
    let mut series: Vec<ReadSeries> = match (rolled, targeted) {
        (Some(answer), _) => {
            let mut out: Vec<ReadSeries> = answer
                .series
                .into_iter()
                .map(|(s, points)| ReadSeries {
                    stored_points: points.len(),
                    points: engine.stage_bucketed(points),
                    grid: None,
                    tsuid: s.tsuid,
                    tags: s.tags,
                    annotations: s.annotations,
                })
                .collect();
            if let Some(g) = answer.grid {
                grid = Some((g.first_ms, g.step_ms));
                out.extend(g.series.into_iter().map(|s| ReadSeries {
                    stored_points: s.cells,
                    points: Vec::new(),
                    grid: Some((s.values, s.present)),
                    tsuid: s.series.tsuid,
                    tags: s.series.tags,
                    annotations: s.series.annotations,
                }));
            }
            out
        }
        (None, Some(selected)) => {
            let mut out = Vec::with_capacity(selected.len());
            for tsuid in &selected {
                let read = store.read_series(std::slice::from_ref(tsuid), scan_start, scan_end, budget)?;
                out.extend(read.into_iter().map(stage));
            }
            out
        }
        (None, None) => {
            store.scan_series(&metric_uid, scan_start, scan_end, budget, select)?.into_iter().map(stage).collect()
        }
    };
    if query.delete {
        // 2.4 deletes each whole row its scanner returned for the selected series, after reading it, so the
        // answer is the data as it was (spec: query §1.7). The shared row delete keeps rollups and the series
        // index right.
        let tsuids: Vec<Vec<u8>> = series.iter().map(|s| s.tsuid.clone()).collect();
        store.delete_series_rows(&tsuids, scan_start, scan_end)?;
    }

    let rows_read = budget.rows - rows_before;
    stats.rows_post_filter = rows_read;
    stats.rows_pre_filter = rows_read + budget.rows_skipped - skipped_before;
    stats.dps_post_filter = budget.points - points_before;
    stats.scan = scan_started.elapsed();
    stats.scanner_id = format!(
        "Scanner(table={}, metric={}, start_ms={scan_start}, end_ms={scan_end})",
        if rollup_table == "raw" { "tsdb".to_string() } else { format!("rollup {rollup_table}") },
        codec::uid_to_string(&metric_uid),
    );
    let group_started = Instant::now();

    // 4. Group by the values of the group-by keys (ordered by tag value UIDs); `none` keeps series apart.
    let mut groups: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for (i, s) in series.iter().enumerate() {
        let key = if engine.aggregator == Aggregator::None {
            s.tsuid.clone()
        } else {
            let mut key = Vec::new();
            for g in &group_keys {
                match s.tags.iter().find(|(k, _)| k == g) {
                    Some((_, v)) => key.extend_from_slice(v),
                    None => continue,
                }
            }
            key
        };
        groups.entry(key).or_default().push(i);
    }

    stats.group_by = group_started.elapsed();
    stats.uid_pairs_resolved = names.resolved - resolved_before;
    stats.uid_resolve = names.resolving - resolving_before;

    // 5-7. Run each group and build its result object.
    let filter_tagk_uids: Vec<Vec<u8>> = filter_keys.clone();
    let global_annotations = if query.global_annotations && !query.no_annotations {
        let list = annotation::in_range(
            &store.global_annotations(query.start_ms, query.end_ms)?,
            query.start_ms,
            query.end_ms,
        );
        (!list.is_empty()).then(|| annotation::render_list(&list))
    } else {
        None
    };
    let mut out = Vec::with_capacity(groups.len());
    for indices in groups.values() {
        let started = Instant::now();
        let mut dps = Vec::new();
        let mut emit = |p: Result<super::OutPoint, super::Infinity>| -> Result<(), QueryError> {
            let (ts, value) = p?;
            dps.push((ts, value));
            Ok(())
        };
        // Series read onto a grid aggregate there when the aggregator can; otherwise they become points.
        let gridded = grid.and_then(|(first_ms, step_ms)| {
            let rows: Option<Vec<GridRow<'_>>> = indices
                .iter()
                .map(|&i| series[i].grid.as_ref().map(|(values, present)| GridRow { values, present }))
                .collect();
            engine.run_grid(first_ms, step_ms, &rows?)
        });
        match gridded {
            Some(points) => points.into_iter().try_for_each(&mut emit)?,
            None => {
                let staged: Vec<Vec<Point>> = indices
                    .iter()
                    .map(|&i| match (series[i].grid.take(), grid) {
                        (Some((values, present)), Some((first_ms, step_ms))) => {
                            grid_points(first_ms, step_ms, GridRow { values: &values, present: &present })
                        }
                        _ => std::mem::take(&mut series[i].points),
                    })
                    .collect();
                match engine.run_aligned(&staged) {
                    Some(points) => points.into_iter().try_for_each(&mut emit)?,
                    None => engine.run_staged(staged).try_for_each(&mut emit)?,
                }
            }
        }
        let members: Vec<&ReadSeries> = indices.iter().map(|&i| &series[i]).collect();
        let aggregation = started.elapsed();
        let naming = Instant::now();
        let mut tag_sets = Vec::with_capacity(members.len());
        for s in &members {
            let mut set = Vec::with_capacity(s.tags.len());
            for (k, v) in &s.tags {
                set.push((k.clone(), names.name(UidKind::TagKey, k)?, names.name(UidKind::TagValue, v)?));
            }
            tag_sets.push(set);
        }
        let uid_to_string = naming.elapsed();
        let (tags, aggregate_tags) = split_tags(&tag_sets);
        let tsuids = query.show_tsuids.then(|| {
            let mut t: Vec<String> = members.iter().map(|s| codec::uid_to_string(&s.tsuid)).collect();
            t.sort();
            t
        });
        out.push(GroupOutput {
            metric: metric_name.clone(),
            tags,
            aggregate_tags,
            query: query.show_query.then(|| sub.to_query_json_with_table(&filter_tagk_uids, &rollup_table)),
            tsuids,
            // Present when any series of the group has annotations in the scanned rows, filtered to the query
            // range (so possibly `[]`), as 2.4 does (spec: query §1.6).
            annotations: (!query.no_annotations && members.iter().any(|s| !s.annotations.is_empty())).then(|| {
                let stored: Vec<Vec<u8>> = members.iter().flat_map(|s| s.annotations.iter().cloned()).collect();
                annotation::render_list(&annotation::in_range(&stored, query.start_ms, query.end_ms))
            }),
            global_annotations: global_annotations.clone(),
            stats: None,
            dps,
            aggregated_size: members.iter().map(|s| s.stored_points).sum(),
            sub_query: sub.index,
        });
        // 2.4 writes a result's stats right after it, including the time it took to write it.
        let result = out.last_mut().expect("just pushed");
        stats.last_result = Some(ResultStats {
            uid_to_string,
            aggregation,
            serialization: started.elapsed(),
            emitted_dps: result.dps.len() as u64,
        });
        if query.show_stats {
            result.stats = Some(stats.result_json());
        }
    }
    Ok(out)
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
