//! Runs a parsed `/api/query` against the store (spec: query §1.5): per sub-query, [`plan`](super::plan) what to
//! read, [`read`](super::read) the series, group them, run the engine per group and build the response objects.
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtsd_protocol::annotation;
use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;
use rtsd_protocol::query::{SubQuery, TsQuery};

use super::output::{split_tags, GroupOutput};
use super::plan::{plan, Names, Plan};
use super::read::{read, Read, ReadSeries};
use super::stats::{QueryStats, ResultStats, SubStats};
use super::{grid_points, Aggregator, GridRow, OutPoint, Point, QueryError};
use crate::config::QueryLimits;
use crate::store::{ReadBudget, Store, Tsuid};

/// Runs every sub-query in order and returns the result objects of all of them. The limits apply to the whole
/// query: its deadline starts now, and points and bytes read add up across sub-queries.
pub fn execute(store: &Store, query: &TsQuery, limits: QueryLimits) -> Result<Vec<GroupOutput>, QueryError> {
    execute_cancellable(store, query, limits, None).map(|(groups, _)| groups)
}

/// [`execute`], stopping with [`QueryError::Cancelled`] at the next row read once `cancelled` is set; also
/// returns what the query measured (for `showSummary`; `showStats` objects are already in the results).
pub fn execute_cancellable(
    store: &Store,
    query: &TsQuery,
    limits: QueryLimits,
    cancelled: Option<Arc<AtomicBool>>,
) -> Result<(Vec<GroupOutput>, QueryStats), QueryError> {
    let mut stats = QueryStats::default();
    let mut budget = ReadBudget {
        cancelled,
        deadline: (limits.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(limits.timeout_ms)),
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

/// One sub-query: plan -> read (-> delete) -> group -> engine per group -> result objects.
fn execute_sub(
    store: &Store,
    query: &TsQuery,
    sub: &SubQuery,
    budget: &mut ReadBudget,
    stats: &mut SubStats,
) -> Result<Vec<GroupOutput>, QueryError> {
    let mut names = Names::new(store);
    let mut plan = plan(store, &mut names, query, sub)?;

    let scan_started = Instant::now();
    let (rows_before, skipped_before, points_before) = (budget.rows, budget.rows_skipped, budget.points);
    let (resolved_before, resolving_before) = (names.resolved, names.resolving);
    let mut read = read(store, sub, &mut plan, &mut names, budget, query.delete)?;
    if query.delete {
        // 2.4 deletes each whole row its scanner returned for the selected series, after reading it, so the
        // answer is the data as it was (spec: query §1.7). The shared row delete keeps rollups and the series
        // index right.
        let tsuids: Vec<Tsuid> = read.series.iter().map(|s| s.tsuid.clone()).collect();
        store.delete_series_rows(&tsuids, plan.scan_start, plan.scan_end)?;
    }
    let rows_read = budget.rows - rows_before;
    stats.rows_post_filter = rows_read;
    stats.rows_pre_filter = rows_read + budget.rows_skipped - skipped_before;
    stats.dps_post_filter = budget.points - points_before;
    stats.scan = scan_started.elapsed();
    stats.scanner_id = format!(
        "Scanner(table={}, metric={}, start_ms={}, end_ms={})",
        if read.table == "raw" { "tsdb".to_string() } else { format!("rollup {}", read.table) },
        codec::uid_to_string(&plan.metric_uid),
        plan.scan_start,
        plan.scan_end,
    );

    let group_started = Instant::now();
    let groups = group(&read.series, &plan);
    stats.group_by = group_started.elapsed();
    stats.uid_pairs_resolved = names.resolved - resolved_before;
    stats.uid_resolve = names.resolving - resolving_before;

    // 5-7. Run each group and build its result object.
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
        let dps = aggregate(&plan, &mut read, indices)?;
        let aggregation = started.elapsed();
        let members: Vec<&ReadSeries> = indices.iter().map(|&i| &read.series[i]).collect();
        let naming = Instant::now();
        let tag_sets = tag_names(&members, &mut names)?;
        let uid_to_string = naming.elapsed();
        let mut result = result_object(query, sub, &plan, &read.table, &members, &tag_sets, dps);
        result.global_annotations = global_annotations.clone();
        // 2.4 writes a result's stats right after it, including the time it took to write it.
        stats.last_result = Some(ResultStats {
            uid_to_string,
            aggregation,
            serialization: started.elapsed(),
            emitted_dps: result.dps.len() as u64,
        });
        if query.show_stats {
            result.stats = Some(stats.result_json());
        }
        out.push(result);
    }
    Ok(out)
}

/// Step 4: the series' indices by the values of the group-by keys (ordered by tag value UIDs); `none` keeps
/// series apart.
fn group(series: &[ReadSeries], plan: &Plan<'_>) -> BTreeMap<Vec<u8>, Vec<usize>> {
    let mut groups: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for (i, s) in series.iter().enumerate() {
        let key = if plan.engine.aggregator == Aggregator::None {
            s.tsuid.to_vec()
        } else {
            let mut key = Vec::new();
            for g in &plan.group_keys {
                if let Some((_, v)) = s.tags.iter().find(|(k, _)| k == g) {
                    key.extend_from_slice(v);
                }
            }
            key
        };
        groups.entry(key).or_default().push(i);
    }
    groups
}

/// Steps 5-7 for one group: its output points. Series read onto a grid aggregate there when the aggregator can;
/// otherwise they become points. Takes the group's points out of `read`.
fn aggregate(plan: &Plan<'_>, read: &mut Read, indices: &[usize]) -> Result<Vec<OutPoint>, QueryError> {
    let engine = &plan.engine;
    let gridded = read.grid.and_then(|(first_ms, step_ms)| {
        let rows: Option<Vec<GridRow<'_>>> = indices
            .iter()
            .map(|&i| read.series[i].grid.as_ref().map(|(values, present)| GridRow { values, present }))
            .collect();
        engine.run_grid(first_ms, step_ms, &rows?)
    });
    let points = match gridded {
        Some(points) => points,
        None => {
            let staged: Vec<Vec<Point>> = indices
                .iter()
                .map(|&i| match (read.series[i].grid.take(), read.grid) {
                    (Some((values, present)), Some((first_ms, step_ms))) => {
                        grid_points(first_ms, step_ms, GridRow { values: &values, present: &present })
                    }
                    _ => std::mem::take(&mut read.series[i].points),
                })
                .collect();
            match engine.run_aligned(&staged) {
                Some(points) => points,
                None => return engine.run_staged(staged).map(|p| p.map_err(QueryError::from)).collect(),
            }
        }
    };
    points.into_iter().map(|p| p.map_err(QueryError::from)).collect()
}

/// Each member's tags as (tag key UID, key name, value name).
type TagNames = Vec<(Vec<u8>, String, String)>;

fn tag_names(members: &[&ReadSeries], names: &mut Names<'_>) -> Result<Vec<TagNames>, QueryError> {
    let mut tag_sets = Vec::with_capacity(members.len());
    for s in members {
        let mut set = Vec::with_capacity(s.tags.len());
        for (k, v) in &s.tags {
            set.push((k.clone(), names.name(UidKind::TagKey, k)?, names.name(UidKind::TagValue, v)?));
        }
        tag_sets.push(set);
    }
    Ok(tag_sets)
}

/// A group's result object (spec: query §1.6): names, the `query` echo, TSUIDs and annotations as asked.
fn result_object(
    query: &TsQuery,
    sub: &SubQuery,
    plan: &Plan<'_>,
    table: &str,
    members: &[&ReadSeries],
    tag_sets: &[TagNames],
    dps: Vec<OutPoint>,
) -> GroupOutput {
    let (tags, aggregate_tags) = split_tags(tag_sets);
    let tsuids = query.show_tsuids.then(|| {
        let mut t: Vec<String> = members.iter().map(|s| s.tsuid.to_string()).collect();
        t.sort();
        t
    });
    GroupOutput {
        metric: plan.metric_name.clone(),
        tags,
        aggregate_tags,
        query: query.show_query.then(|| sub.to_query_json_with_table(&plan.selection.filter_keys, table)),
        tsuids,
        // Present when any series of the group has annotations in the scanned rows, filtered to the query range
        // (so possibly `[]`), as 2.4 does (spec: query §1.6).
        annotations: (!query.no_annotations && members.iter().any(|s| !s.annotations.is_empty())).then(|| {
            let stored: Vec<Vec<u8>> = members.iter().flat_map(|s| s.annotations.iter().cloned()).collect();
            annotation::render_list(&annotation::in_range(&stored, query.start_ms, query.end_ms))
        }),
        global_annotations: None,
        stats: None,
        dps,
        aggregated_size: members.iter().map(|s| s.stored_points).sum(),
        sub_query: sub.index,
    }
}
