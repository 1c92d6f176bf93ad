//! Reading a planned sub-query's series (spec: query §1.5 step 3, §6.13, §9): from a rollup table when one
//! answers the downsample, else the raw rows, by key for the series the index names (targeted) or by scanning
//! the metric. Each series goes through its own stages (downsample, rate) as soon as it is read: only the
//! staged points are kept for the aggregation.
use rtsd_protocol::query::SubQuery;

use super::plan::{Names, Plan};
use super::rollup::RollupAnswer;
use super::{Point, Query, QueryError};
use crate::store::{ReadBudget, Store, StoreError, StoredSeries, Tsuid};

/// A series as the aggregation reads it: its points already through their per-series stages.
pub(super) struct ReadSeries {
    pub tsuid: Tsuid,
    pub tags: Vec<(Vec<u8>, Vec<u8>)>,
    /// JSON of the annotations stored in its scanned rows.
    pub annotations: Vec<Vec<u8>>,
    pub points: Vec<Point>,
    /// Its staged values on the sub-query's grid instead of `points`, when the read was onto one (values,
    /// present buckets; see [`super::GridRow`]).
    pub grid: Option<(Vec<f64>, Vec<u64>)>,
    /// How many stored points (or rollup cells) were read for it, before staging.
    pub stored_points: usize,
}

/// What a sub-query read.
pub(super) struct Read {
    pub series: Vec<ReadSeries>,
    /// The bucket grid (first bucket, width in ms) the series were read onto, if they were.
    pub grid: Option<(i64, i64)>,
    /// The rollup interval read (`query.rollupTable`), or `raw`.
    pub table: String,
}

/// Reads the planned sub-query's series. A delete reads raw rows, as 2.4's scanner does whatever table it
/// reads. May change `plan.engine`'s downsample function when a rollup answers (see [`super::rollup::read`]).
pub(super) fn read(
    store: &Store,
    sub: &SubQuery,
    plan: &mut Plan<'_>,
    names: &mut Names<'_>,
    budget: &mut ReadBudget,
    delete: bool,
) -> Result<Read, QueryError> {
    let selection = &plan.selection;
    let mut select = |tags: &[(&[u8], &[u8])]| selection.keeps(names, tags);
    // The index names every series only when every write went through this store; on a shared HBase cluster
    // OpenTSDB's TSDs write too, so the metric's rows are scanned, as OpenTSDB scans them.
    let indexed = store.series_index_is_complete();
    let mut targeted = if indexed { targeted(store, plan, &mut select)? } else { None };
    // A downsample a rollup interval divides may be answered from a rollup table (spec: query §6.13).
    if !delete {
        let keep_all = !plan.filtered && selection.tsuids.is_none() && !selection.explicit_tags;
        let rolled = super::rollup::read(
            store,
            sub,
            &mut plan.engine,
            &plan.metric_uid,
            targeted.as_deref(),
            plan.scan_start,
            plan.scan_end,
            budget,
            keep_all,
            &mut select,
        )?;
        if let Some(answer) = rolled {
            return Ok(rollup_series(answer, &plan.engine));
        }
    }
    // A downsampled query stages each series as soon as it is read; reading raw data series by series, from the
    // index's list of the metric's series with data from the scan start on, holds one series' raw points at a
    // time instead of every series' (a month of 1000 hosts is 43 M points; spec: query §9 item 2).
    if indexed && targeted.is_none() && plan.engine.downsample.is_some() {
        targeted = Some(series_since(store, plan, &mut select)?);
    }
    let engine = &plan.engine;
    let (start, end) = (plan.scan_start, plan.scan_end);
    let series = match targeted {
        Some(selected) => {
            let mut out = Vec::with_capacity(selected.len());
            for tsuid in &selected {
                let read = store.read_series(std::slice::from_ref(tsuid), start, end, budget)?;
                out.extend(read.into_iter().map(|s| staged(engine, s)));
            }
            out
        }
        None => store
            .scan_series(&plan.metric_uid, start, end, budget, select)?
            .into_iter()
            .map(|s| staged(engine, s))
            .collect(),
    };
    Ok(Read { series, grid: None, table: "raw".to_string() })
}

/// A raw series through its stages.
fn staged(engine: &Query, s: StoredSeries) -> ReadSeries {
    ReadSeries {
        stored_points: s.points.len(),
        points: engine.stage(s.points.iter().map(Point::from)),
        grid: None,
        tsuid: s.tsuid,
        tags: s.tags,
        annotations: s.annotations,
    }
}

/// The series a rollup table answered: one point per bucket staged as the raw downsampler would, or values
/// already staged on a grid.
fn rollup_series(answer: RollupAnswer, engine: &Query) -> Read {
    let mut series: Vec<ReadSeries> = answer
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
    let mut grid = None;
    if let Some(g) = answer.grid {
        grid = Some((g.first_ms, g.step_ms));
        series.extend(g.series.into_iter().map(|s| ReadSeries {
            stored_points: s.cells,
            points: Vec::new(),
            grid: Some((s.values, s.present)),
            tsuid: s.series.tsuid,
            tags: s.series.tags,
            annotations: s.series.annotations,
        }));
    }
    Read { series, grid, table: answer.table }
}

/// The series the index selects for the literal filters, to be read by key rather than by scanning the metric:
/// its postings name every candidate series (spec: query §9, the million-series complaint). `None` without a
/// literal filter, or for a `tsuids` sub-query.
fn targeted(
    store: &Store,
    plan: &Plan<'_>,
    select: &mut impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
) -> Result<Option<Vec<Tsuid>>, StoreError> {
    let uids = store.uids();
    let mut candidates: Option<Vec<Tsuid>> = None;
    for (key, group) in plan.selection.literal_groups() {
        let mut values = Vec::new();
        for v in group.iter().filter_map(|filter| filter.literal_values()).flatten() {
            if let Some(vu) = uids.get(rtsd_protocol::point::UidKind::TagValue, v)? {
                values.push(vu);
            }
        }
        let values: Vec<&[u8]> = values.iter().map(|vu| vu.as_bytes()).collect();
        let these = store.series_with_tags(&plan.metric_uid, key, &values)?;
        candidates = Some(match candidates {
            None => these,
            Some(previous) => previous.into_iter().filter(|t| these.contains(t)).collect(),
        });
    }
    match candidates {
        Some(mut tsuids) if plan.selection.tsuids.is_none() => {
            tsuids.sort();
            tsuids.dedup();
            Ok(Some(selected_by(store, tsuids, select)?))
        }
        _ => Ok(None),
    }
}

/// The metric's series the index knows to have data from the scan start's hour on, that `select` keeps.
fn series_since(
    store: &Store,
    plan: &Plan<'_>,
    select: &mut impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
) -> Result<Vec<Tsuid>, StoreError> {
    let start_s = plan.scan_start.div_euclid(1000);
    let first_hour = u32::try_from(start_s - start_s.rem_euclid(3600)).unwrap_or(0);
    let mut all = Vec::new();
    store.for_each_series(Some(&plan.metric_uid), |t, newest| {
        if newest >= first_hour {
            all.push(t.into());
        }
        true
    })?;
    selected_by(store, all, select)
}

/// The series of `tsuids` (of one metric) that `select` keeps, given their tag pairs.
fn selected_by(
    store: &Store,
    tsuids: Vec<Tsuid>,
    select: &mut impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
) -> Result<Vec<Tsuid>, StoreError> {
    let layout = store.layout();
    let mut selected = Vec::new();
    for t in tsuids {
        let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(&t).collect();
        if select(&pairs)? {
            selected.push(t);
        }
    }
    Ok(selected)
}
