//! Answering a downsampled sub-query from a rollup table (spec: query §6.13; OpenTSDB 2.4's
//! `TsdbQuery.transformDownSamplerToRollupQuery` and `FallbackRollupOnEmptyResult`).
//!
//! A fixed downsample whose interval is a multiple of a rollup interval, with `sum`, `count`, `min`, `max` or
//! `avg` (and `zimsum`, `mimmin`, `mimmax`, which downsample alike), reads the largest such interval unless
//! `rollupUsage` is `ROLLUP_RAW`. An empty answer stays empty (`ROLLUP_NOFALLBACK`, the default), moves to the
//! next best interval (`ROLLUP_FALLBACK`; the default interval means raw data) or to raw data
//! (`ROLLUP_FALLBACK_RAW`).
//!
//! Pre-aggregates (`preAggregate`, or a literal filter on the aggregate tag other than its raw value) are read
//! the same way from the intervals' pre-aggregate tables, and otherwise from the default interval's
//! pre-aggregate table, as OpenTSDB's `tableToBeScanned` picks.
//!
//! The rollup cells are turned into exactly the values the raw downsampler would give for each bucket (for
//! `avg`, the bucket's sum over its count), one point per bucket, and the engine then downsamples those single
//! points (with `sum` for `count`), so fill policies, rate, aggregation across series and the output are the
//! raw path's. Rollups rtsd computes sum each bucket's points in time order as the downsampler does, so a
//! downsample interval equal to a rollup interval gives the raw answer bit for bit, and so do `count`, `min`,
//! `max` and integer sums at any multiple. Adding the sums of several rollup buckets of floating-point values
//! can round differently from adding their points one by one; such a bucket is computed from the raw points
//! instead while they are all still stored (their number equals the rollup count), and from the rollups once
//! raw data has expired.
//!
//! A downsample of the interval's own width, without fill or rate, reads the rollups rtsd computes onto a grid
//! instead (by scanning, or by key for the series the index selected) ([`Store::read_rollup_grid`]): per series one double per bucket,
//! already the staged value ([`grid_cells`]), which the sum aggregators add up on the grid
//! ([`Query::run_grid`]); the cell lists and point lists of the general read are never built.
use rtsd_protocol::codec::{self, Value};
use rtsd_protocol::query::{FilterKind, RollupUsage, SubQuery};

use super::{Aggregator, FillPolicy, Point, Query};
use crate::rollup::{RollupConfig, RollupInterval};
use crate::store::rollup::{GridSelect, RollupGrid, Unfolded};
use crate::store::{ReadBudget, Store, StoreError, StoredSeries, Tsuid};

/// Which cells a downsample function needs, and how a bucket's value is made of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Sum,
    Count,
    Min,
    Max,
    /// sum and count
    Avg,
}

fn need(function: Aggregator) -> Option<Need> {
    Some(match function {
        Aggregator::Sum | Aggregator::Zimsum => Need::Sum,
        Aggregator::Count => Need::Count,
        Aggregator::Min | Aggregator::Mimmin => Need::Min,
        Aggregator::Max | Aggregator::Mimmax => Need::Max,
        Aggregator::Avg => Need::Avg,
        _ => return None,
    })
}

/// What a rollup read gave: the series with their points (one per downsample bucket, at its start, unless raw
/// points were read for a bucket) and the interval read, echoed as `query.rollupTable`.
pub struct RollupAnswer {
    pub series: Vec<(StoredSeries, Vec<Point>)>,
    /// The answer read onto a grid instead (then `series` is empty): per series and bucket the value
    /// [`Query::stage_bucketed`] gives it, so the series are already staged.
    pub grid: Option<RollupGrid>,
    pub table: String,
}

/// Reads the sub-query from a rollup table when it can and should; `None` means "read raw data". On `Some`,
/// `engine`'s downsample function is adjusted to pass the per-bucket values through. `targeted` lists the
/// series when the index already selected them; otherwise `keep` selects while scanning (`keep_all`: it keeps
/// every series).
#[allow(clippy::too_many_arguments)]
pub fn read(
    store: &Store,
    sub: &SubQuery,
    engine: &mut Query,
    metric: &[u8],
    targeted: Option<&[Tsuid]>,
    scan_start: i64,
    scan_end: i64,
    budget: &mut ReadBudget,
    keep_all: bool,
    mut keep: impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
) -> Result<Option<RollupAnswer>, StoreError> {
    let settings = store.rollup_settings();
    let Some(config) = &settings.config else { return Ok(None) };
    let usage = sub.rollup_usage.unwrap_or(RollupUsage::NoFallback);
    // OpenTSDB reads pre-aggregates when asked (`preAggregate`) or when a literal filter on the aggregate tag asks
    // for something else than raw data.
    let pre_aggregate = sub.pre_aggregate
        || sub.filters.iter().any(|f| {
            matches!(f.kind, FilterKind::LiteralOr | FilterKind::ILiteralOr)
                && f.tagk == settings.agg_tag_key
                && f.raw != settings.raw_agg_tag_value
        });
    let plan = if usage == RollupUsage::Raw { None } else { plan(config, engine) };
    let mut last_tried = None;
    if let Some((need, ids, candidates)) = plan {
        // Pre-aggregates are written by clients, never folded.
        let mut folded = if pre_aggregate { Folded::Yes } else { Folded::No };
        for interval in candidates {
            if interval.default {
                // The default interval is the raw table (OpenTSDB: "a scan on raw data").
                break;
            }
            let table = if pre_aggregate { &interval.preagg_table } else { &interval.table };
            // Rollups rtsd computes are complete only from when it started computing them (never, read-only).
            // (They are of intervals that divide an hour, so their buckets tile the hour-aligned scan window.)
            if store.auto_rollups_complete_since(table).is_some_and(|since| scan_start < since) {
                last_tried = None;
                break;
            }
            let family = RollupInterval::family(table);
            let t = std::time::Instant::now();
            let Some(answer) = read_interval(
                store,
                engine,
                (need, &ids, interval, &family),
                (pre_aggregate, &mut folded),
                (metric, targeted, keep_all, &mut keep),
                (scan_start, scan_end),
                budget,
            )?
            else {
                // The rollups lack points a failing flush holds back: the raw read merges those in.
                last_tried = None;
                break;
            };
            tracing::debug!(ms = t.elapsed().as_secs_f64() * 1e3, table = %interval.interval, "query: rollups read");
            last_tried = Some(interval.interval.clone());
            if !answer.series.is_empty() || answer.grid.as_ref().is_some_and(|g| !g.series.is_empty()) {
                pass_through(engine);
                return Ok(Some(answer));
            }
            match usage {
                RollupUsage::Fallback => continue,
                RollupUsage::FallbackRaw => {
                    last_tried = None;
                    break;
                }
                _ => break,
            }
        }
    }
    match last_tried {
        // Nothing in the rollup table and no fallback: an empty answer from that table.
        Some(table) if usage == RollupUsage::NoFallback => {
            pass_through(engine);
            Ok(Some(RollupAnswer { series: Vec::new(), grid: None, table }))
        }
        // Otherwise the base table: raw data, or for pre-aggregates the default interval's pre-aggregate table
        // (raw-style cells in hourly rows).
        _ if pre_aggregate => {
            let family = RollupInterval::family(&config.default_interval().preagg_table);
            let series = store.scan_series_in(&family, metric, scan_start, scan_end, budget, keep)?;
            let series = series
                .into_iter()
                .map(|mut s| {
                    let points = s.points.iter().map(Point::from).collect();
                    s.points = Vec::new();
                    (s, points)
                })
                .collect();
            Ok(Some(RollupAnswer { series, grid: None, table: "raw".to_string() }))
        }
        _ => Ok(None),
    }
}

/// Whether the raw points written so far are in the rollups a read is about to read: they must be, or be read
/// from the raw rows instead.
enum Folded {
    No,
    /// These raw rows of the metric are not folded yet, or not flushed ([`Store::unfolded_rows`]): a grid read
    /// takes their buckets from their points.
    Unfolded(Unfolded),
    Yes,
    /// Folded, but a failing flush (a full disk) holds points back that the rollups cannot have: only the raw
    /// read, which merges them in, answers.
    HeldBack,
}

/// Nothing to read raw.
static NONE_UNFOLDED: Unfolded = Unfolded { rows: Vec::new(), unflushed: std::collections::BTreeMap::new() };

impl Folded {
    /// Folds the metric's raw rows written so far, unless done. False when the rollups cannot be complete (see
    /// [`Folded::HeldBack`]).
    fn fold(&mut self, store: &Store, metric: &[u8]) -> Result<bool, StoreError> {
        if !matches!(self, Folded::Yes | Folded::HeldBack) {
            let t = std::time::Instant::now();
            let rows = store.fold_rollups(Some(metric))?;
            tracing::debug!(ms = t.elapsed().as_secs_f64() * 1e3, rows, "query: metric's rollups folded");
            // The fold settled first: a flush that failed then left points in the series table.
            *self = if store.holds_unflushed()? { Folded::HeldBack } else { Folded::Yes };
        }
        Ok(matches!(self, Folded::Yes))
    }

    /// The raw rows a grid read takes from raw points: none once folded; `None` when only raw rows can answer.
    /// Right after a burst of writes a query waits neither for its metric's backlog to be folded nor for the
    /// series table's flush (issue 22 item 5); it folds only when the rows cannot be told (see
    /// [`Store::unfolded_rows`]).
    fn unfolded(&mut self, store: &Store, metric: &[u8]) -> Result<Option<&Unfolded>, StoreError> {
        if matches!(self, Folded::No) {
            match store.unfolded_rows(metric)? {
                Some(unfolded) => {
                    tracing::debug!(rows = unfolded.rows.len(), "query: metric's rows not folded yet are read raw");
                    *self = Folded::Unfolded(unfolded);
                }
                None => {
                    self.fold(store, metric)?;
                }
            }
        }
        Ok(match self {
            Folded::Unfolded(unfolded) => Some(unfolded),
            Folded::HeldBack => None,
            _ => Some(&NONE_UNFOLDED),
        })
    }
}

/// Reads one rollup interval's `family` for the series (from `select`: the metric, the targeted TSUIDs, whether
/// every series is kept, the filter otherwise): onto a grid when the interval's cells can be staged there, else
/// per series with one point per bucket. The answer is empty when the table holds nothing for them, and `None`
/// when only the raw rows can answer (see [`Folded::HeldBack`]). Raw rows not folded yet are read raw onto a
/// grid; the general read folds them first (`folded`).
fn read_interval<K>(
    store: &Store,
    engine: &Query,
    (need, ids, interval, family): (Need, &[u8], &RollupInterval, &str),
    (pre_aggregate, folded): (bool, &mut Folded),
    (metric, targeted, keep_all, keep): (&[u8], Option<&[Tsuid]>, bool, &mut K),
    (scan_start, scan_end): (i64, i64),
    budget: &mut ReadBudget,
) -> Result<Option<RollupAnswer>, StoreError>
where
    K: FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
{
    let table = interval.interval.clone();
    let stage_row = (!pre_aggregate).then(|| grid_cells(engine, need, interval)).flatten();
    if let Some(stage_row) = stage_row {
        let select = match targeted {
            Some(tsuids) => GridSelect::Series(tsuids),
            None if keep_all => GridSelect::All,
            None => GridSelect::Keep(keep),
        };
        let Some(unfolded) = folded.unfolded(store, metric)? else { return Ok(None) };
        let read = store.read_rollup_grid(
            family, interval, ids, metric, scan_start, scan_end, budget, select, unfolded, &stage_row,
        )?;
        if let Some(grid) = read {
            return Ok(Some(RollupAnswer { series: Vec::new(), grid: Some(grid), table }));
        }
    }
    if !folded.fold(store, metric)? {
        return Ok(None);
    }
    let found = match targeted {
        Some(tsuids) => store.read_rollup_series(family, interval, ids, tsuids, scan_start, scan_end, budget)?,
        // Nothing to select: read in two halves side by side.
        None if keep_all => store.read_rollup_all(family, interval, ids, metric, scan_start, scan_end, budget)?,
        None => store.read_rollup(family, interval, ids, metric, scan_start, scan_end, budget, keep)?,
    };
    let interval_ms = engine.downsample.as_ref().map_or(1, |d| d.interval_ms);
    let mut series = Vec::with_capacity(found.len());
    for r in found {
        let (points, inexact) = per_bucket(&r.values, need, interval_ms);
        // Pre-aggregates have no raw points to check against.
        let inexact = if pre_aggregate { &[][..] } else { &inexact[..] };
        let points = exact_from_raw(store, &r.series, points, inexact, interval_ms, scan_start, scan_end, budget)?;
        series.push((r.series, points));
    }
    Ok(Some(RollupAnswer { series, grid: None, table }))
}

/// What a downsample can read from rollups: the function's cells and the intervals that divide its interval,
/// best first. `None` when no rollup can answer it (no or calendar or `all` downsampling, another function,
/// aggregation IDs missing from the configuration).
fn plan<'c>(config: &'c RollupConfig, engine: &Query) -> Option<(Need, Vec<u8>, Vec<&'c RollupInterval>)> {
    let ds = engine.downsample.as_ref()?;
    if ds.all || ds.calendar.is_some() {
        return None;
    }
    let need = need(ds.function)?;
    let names: &[&str] = match need {
        // The count tells whether the raw points of a bucket are all still there (see the module comment).
        Need::Sum => &["sum", "count"],
        Need::Count => &["count"],
        Need::Min => &["min"],
        Need::Max => &["max"],
        Need::Avg => &["sum", "count"],
    };
    // A sum can do without its count (0xFF: no cell has it, IDs are 0..=127); the others need theirs.
    let ids: Option<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| config.aggregation_ids.get(*n).copied().or((need == Need::Sum && i == 1).then_some(0xFF)))
        .collect();
    Some((need, ids?, config.best_matches(ds.interval_ms)))
}

/// The engine downsamples one point per bucket: every function gives that point back, except `count`.
fn pass_through(engine: &mut Query) {
    if let Some(ds) = &mut engine.downsample {
        ds.function = passed(ds.function);
    }
}

/// The function [`pass_through`] gives a downsample of one point per bucket.
fn passed(function: Aggregator) -> Aggregator {
    match function {
        Aggregator::Count => Aggregator::Sum,
        f => f,
    }
}

/// How the buckets of a grid read ([`Store::read_rollup_grid`]) get their values from a row's columns (sum,
/// count, min, max): as [`per_bucket`] and then [`Query::stage_bucketed`] make the value of a downsample bucket
/// that is exactly one rollup bucket. `None` when a grid cannot hold the staged series: the downsample is not of
/// the interval's own width, or a fill policy or a rate adds or changes points.
// The closure's signature is the grid's contract, spelled out once here; a type alias cannot name an `impl Fn`.
#[allow(clippy::type_complexity)]
fn grid_cells(
    engine: &Query,
    need: Need,
    interval: &RollupInterval,
) -> Option<impl Fn(&[Vec<f64>; 4], [bool; 4], &mut Vec<f64>) + Sync> {
    let ds = engine.downsample.as_ref()?;
    if ds.interval_ms != i64::from(interval.interval_secs) * 1000
        || ds.fill != FillPolicy::None
        || ds.all
        || ds.calendar.is_some()
        || engine.rate.is_some()
    {
        return None;
    }
    let function = passed(ds.function);
    Some(move |[sum, count, min, max]: &[Vec<f64>; 4], integral: [bool; 4], out: &mut Vec<f64>| {
        out.clear();
        match need {
            Need::Sum => out.extend(sum.iter().map(|&s| 0.0 + s)),
            // The count read as `per_bucket` reads it, through an integer, which leaves a whole count as it is.
            Need::Avg if integral[1] => out.extend(sum.iter().zip(count).map(|(&s, &n)| (0.0 + s) / n)),
            Need::Avg => out.extend(sum.iter().zip(count).map(|(&s, &n)| (0.0 + s) / (n as i64) as f64)),
            Need::Count => out.extend(count.iter().map(|&n| 0.0 + n)),
            Need::Min => out.extend_from_slice(min),
            Need::Max => out.extend_from_slice(max),
        }
        function.run_double_each(out);
    })
}

/// Replaces the points of `inexact` buckets (start, count) by the raw points of the series in them, where the
/// raw row still holds all of them.
#[allow(clippy::too_many_arguments)]
fn exact_from_raw(
    store: &Store,
    series: &StoredSeries,
    bucketed: Vec<Point>,
    inexact: &[(i64, i64)],
    interval_ms: i64,
    scan_start: i64,
    scan_end: i64,
    budget: &mut ReadBudget,
) -> Result<Vec<Point>, StoreError> {
    let (Some(first), Some(last)) = (inexact.first(), inexact.last()) else { return Ok(bucketed) };
    let raw = store.read_series(
        std::slice::from_ref(&series.tsuid),
        first.0.max(scan_start),
        (last.0 + interval_ms).min(scan_end),
        budget,
    )?;
    let Some(raw) = raw.into_iter().next() else { return Ok(bucketed) };
    // Raw points of each inexact bucket, one per instant (the first, as the engine keeps).
    let mut replaced: std::collections::HashMap<i64, Vec<codec::RowPoint>> = std::collections::HashMap::new();
    let mut last_ts = None;
    for p in raw.points {
        if last_ts.is_some_and(|t| p.timestamp_ms <= t) {
            continue;
        }
        last_ts = Some(p.timestamp_ms);
        replaced.entry(p.timestamp_ms - p.timestamp_ms.rem_euclid(interval_ms)).or_default().push(p);
    }
    replaced.retain(|start, points| inexact.iter().any(|&(s, count)| s == *start && points.len() as i64 == count));
    if replaced.is_empty() {
        return Ok(bucketed);
    }
    let mut points = Vec::with_capacity(bucketed.len());
    for p in bucketed {
        match replaced.remove(&p.ts) {
            Some(raw) => points.extend(raw.iter().map(Point::from)),
            None => points.push(p),
        }
    }
    Ok(points)
}

/// One point per downsample bucket (epoch-aligned `interval_ms`) with the value the raw downsampler computes
/// for it, from the rollup buckets inside it (each list sorted by time). Also returns the buckets (start,
/// count) whose value adds several floating-point sums, which may differ from the raw answer in the last bits.
fn per_bucket(values: &[Vec<(i64, Value)>], need: Need, interval_ms: i64) -> (Vec<Point>, Vec<(i64, i64)>) {
    let bucket = |ts: i64| ts - ts.rem_euclid(interval_ms);
    let mut out: Vec<Point> = Vec::with_capacity(values.first().map_or(0, Vec::len));
    let mut inexact: Vec<(i64, i64)> = Vec::new();
    match need {
        Need::Sum | Need::Avg => {
            // Join sum and count by bucket. Without its count a bucket has no average (left out); its sum is
            // used as it is, unverifiable (rollups written by others may carry sums only).
            let (sums, counts) = (&values[0], &values[1]);
            // (start, sum, count if every part has one, rollup buckets, any floating-point sum)
            type Acc = (i64, f64, Option<i64>, u32, bool);
            let mut acc: Option<Acc> = None;
            let mut finish = |(start, s, n, parts, float): Acc| {
                let value = match n {
                    Some(n) if need == Need::Avg => s / n as f64,
                    _ => s,
                };
                out.push(Point::float(start, value));
                if let (Some(n), true) = (n, parts > 1 && float) {
                    inexact.push((start, n));
                }
            };
            let mut c = 0;
            for &(ts, sum) in sums {
                while c < counts.len() && counts[c].0 < ts {
                    c += 1;
                }
                let n = match counts.get(c) {
                    Some(&(cts, count)) if cts == ts => Some(count.as_f64() as i64),
                    _ if need == Need::Avg => continue,
                    _ => None,
                };
                let b = bucket(ts);
                let float = !matches!(sum, Value::Int(_));
                match &mut acc {
                    Some((start, s, total, parts, any_float)) if *start == b => {
                        *s += sum.as_f64();
                        *total = total.zip(n).map(|(a, b)| a + b);
                        *parts += 1;
                        *any_float |= float;
                    }
                    _ => {
                        if let Some(done) = acc.take() {
                            finish(done);
                        }
                        acc = Some((b, 0.0 + sum.as_f64(), n, 1, float));
                    }
                }
            }
            if let Some(done) = acc {
                finish(done);
            }
        }
        _ => {
            for &(ts, v) in &values[0] {
                let (b, d) = (bucket(ts), v.as_f64());
                match out.last_mut() {
                    Some(Point { ts, value: Value::Double(acc) }) if *ts == b => match need {
                        Need::Min => *acc = acc.min(d),
                        Need::Max => *acc = acc.max(d),
                        _ => *acc += d,
                    },
                    _ => out.push(Point::float(b, if need == Need::Count { 0.0 + d } else { d })),
                }
            }
        }
    }
    (out, inexact)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;

    use proptest::prelude::*;
    use rtsd_protocol::codec::Value as Stored;
    use rtsd_protocol::point::{DataPoint, Tags};

    use crate::config::{Config, QueryLimits};
    use crate::metrics::Metrics;
    use crate::query::exec::execute;

    const BASE: i64 = 1_356_998_400;

    /// Per group: its tags and its (timestamp, printed value) points.
    type Answer = Vec<(Vec<(String, String)>, Vec<crate::query::OutPoint>)>;

    fn run(store: &crate::store::Store, m: &str, usage: &str) -> Answer {
        let params = vec![
            ("start".to_string(), BASE.to_string()),
            ("end".to_string(), (BASE + 4 * 3600).to_string()),
            ("m".to_string(), m.replacen(":m", &format!(":{usage}m"), 1)),
        ];
        let query = rtsd_protocol::query::parse_get(&params, 0).expect("query parses");
        let out = execute(store, &query, QueryLimits::default()).expect("query runs");
        out.into_iter().map(|g| (g.tags, g.dps)).collect()
    }

    // issue 22 item 5: a query issued right after a burst written in time order, with the burst's passed hours
    // folded while it went on (the daemon's `fold_closed`) and its newest hour not, answers what the raw points
    // give, and its own fold takes only the newest hour's rows.
    #[test]
    fn a_query_after_a_burst_folds_only_the_newest_hour_and_answers_exactly() {
        let dir = tempfile::tempdir().unwrap();
        // The daemon's folds of passed hours, not the flushes' own (see `a_backfill_is_folded_as_it_is_flushed`).
        let store = open_with(dir.path(), &[("rtsd.rollups.fold_on_flush", "false")]);
        // Four hours of 3 hosts, the passed hours folded after each flush as the daemon does during a burst.
        backfill(&store, 4, |store| {
            while store.closed_backlog() > 0 {
                store.fold_closed(2).unwrap();
            }
        });
        // Left for the query: the newest hour of each host.
        assert_eq!(store.fold_backlog(), 3);
        answers_as_raw(&store, "right after");
        assert_eq!(store.fold_backlog(), 0);
    }

    fn put(store: &crate::store::Store, host: &str, offset: i64, value: Stored) {
        let tags: Tags = [(Cow::Borrowed("host"), Cow::Borrowed(host))].into_iter().collect();
        let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: BASE + offset, value, tags };
        let mut batch = store.new_batch();
        store.add_point(&mut batch, &p).unwrap();
        store.commit(&mut batch, false).unwrap();
    }

    fn open(dir: &std::path::Path) -> crate::store::Store {
        open_with(dir, &[])
    }

    fn open_with(dir: &std::path::Path, overrides: &[(&str, &str)]) -> crate::store::Store {
        let mut all = vec![("tsd.rollups.enable", "true")];
        all.extend_from_slice(overrides);
        let config = Config::for_data_dir(dir, &all).unwrap();
        crate::store::Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
    }

    /// The downsamples a grid read answers (see `grid_cells`), with filters that read every series, the series
    /// a filter keeps while scanning, and series selected by the index.
    const GRID_QUERIES: [&str; 7] = [
        "sum:1m-avg:m",
        "sum:1m-sum:m{host=*}",
        "sum:1m-count:m{host=d}",
        "max:1m-max:m{}{host=literal_or(a|d)}",
        "min:1m-min:m{}{host=regexp(b|d)}",
        "sum:1h-avg:m",
        "zimsum:10m-sum:m{host=*}",
    ];

    // issue 22 item 5: a grid read (q1's kind) right after writes reads the raw rows not folded yet instead of
    // folding them first: the answer is the raw answer bit for bit, the same as after the fold, and the backlog
    // is left to the daemon's fold.
    #[test]
    fn a_grid_query_reads_rows_not_folded_yet_from_their_points_and_leaves_them_to_the_fold() {
        let dir = tempfile::tempdir().unwrap();
        // Rows noted for the folds (the flushes' own folds would take d's and the e's hour 3).
        let store = open_with(dir.path(), &[("rtsd.rollups.fold_on_flush", "false")]);
        // Three hours of hosts a, b, c (integers and floats, a point every 30 s) and a point of d, folded.
        for i in 0..3 * 120i64 {
            for (h, host) in ["a", "b", "c"].iter().enumerate() {
                let value = if i % 4 == 0 { Stored::Int(i * 3 + h as i64) } else { Stored::Double(i as f64 / 7.0) };
                put(&store, host, i * 30, value);
            }
        }
        put(&store, "d", 2 * 3600 + 600, Stored::Int(11));
        store.fold_rollups(None).unwrap();
        assert_eq!(store.fold_backlog(), 0);
        let folded_before: Vec<Answer> = GRID_QUERIES.iter().map(|m| run(&store, m, "")).collect();
        // Then, not folded: a late point and an overwrite into folded hours of a (its first and second hour), a
        // point of b after its last, and host d, whose other rows are not folded (one lone point in hour 0, a
        // fourth hour of points).
        put(&store, "a", 15, Stored::Double(1e6));
        put(&store, "a", 3600 + 30, Stored::Int(-40));
        put(&store, "b", 3 * 3600 + 5, Stored::Float(2.5));
        put(&store, "d", 59, Stored::Int(7));
        for i in 0..120i64 {
            put(&store, "d", 3 * 3600 + i * 30, Stored::Double(i as f64 * 0.25 - 3.0));
        }
        // And c's hour 1 deleted: its buckets go.
        let c = tsuid_of(&store, "c");
        let hour_1 = (BASE + 3600) * 1000;
        assert_eq!(store.delete_series_rows(&[c], hour_1, hour_1 + 3_600_000).unwrap(), 1);
        // And enough new series that the rows not folded are read on several threads (a chunk is 256 rows).
        for e in 0..600 {
            put(&store, &format!("e{e:03}"), 3 * 3600 + e, Stored::Int(e));
        }
        store.settle().unwrap();
        let backlog = store.fold_backlog();
        assert_eq!(backlog, 606, "a's hours 0 and 1, b's hour 3, c's hour 1, d's hours 0 and 3, the e's");
        let mut unfolded = Vec::new();
        for m in GRID_QUERIES {
            let answer = run(&store, m, "");
            assert_eq!(answer, run(&store, m, "rollup_raw:"), "{m}");
            unfolded.push(answer);
        }
        assert_eq!(store.fold_backlog(), backlog, "the queries folded nothing");
        // What they answered differs from before the writes (so the raw rows were read) ...
        for ((m, before), now) in GRID_QUERIES.iter().zip(&folded_before).zip(&unfolded) {
            assert_ne!(before, now, "{m}");
        }
        // ... and is what they answer once the rows are folded.
        store.fold_rollups(None).unwrap();
        assert_eq!(store.fold_backlog(), 0);
        for (m, answer) in GRID_QUERIES.iter().zip(&unfolded) {
            assert_eq!(&run(&store, m, ""), answer, "{m}");
        }
    }

    /// Writes `hours` hours of hosts a, b and c from `BASE` (a point every 20 s, integers and floats) in time
    /// order, flushing every 40 minutes; after each flush, `then` does what the daemon would.
    fn backfill(store: &crate::store::Store, hours: i64, then: impl Fn(&crate::store::Store)) {
        for chunk in (0..hours * 180).collect::<Vec<_>>().chunks(120) {
            let mut batch = store.new_batch();
            for &i in chunk {
                for (h, host) in ["a", "b", "c"].iter().enumerate() {
                    let tags: Tags = [(Cow::Borrowed("host"), Cow::Borrowed(*host))].into_iter().collect();
                    let value = if i % 3 == 0 { Stored::Int(i + h as i64) } else { Stored::Double(i as f64 / 7.0) };
                    let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: BASE + i * 20, value, tags };
                    store.add_point(&mut batch, &p).unwrap();
                }
            }
            store.commit(&mut batch, false).unwrap();
            store.flush_pending().unwrap();
            then(store);
        }
    }

    /// The daemon's step after a flush during a backfill: writing the seals the flush queued.
    fn seal(store: &crate::store::Store) {
        store.seal_in_background(usize::MAX);
    }

    /// The TSUID of metric `m`'s series of host `host`.
    fn tsuid_of(store: &crate::store::Store, host: &str) -> crate::store::Tsuid {
        use rtsd_protocol::point::UidKind;
        let uid = |kind, name| store.uids().get(kind, name).unwrap().unwrap().as_bytes().to_vec();
        [uid(UidKind::Metric, "m"), uid(UidKind::TagKey, "host"), uid(UidKind::TagValue, host)]
            .concat()
            .as_slice()
            .into()
    }

    /// The base times (s) of the rows of metric `m` not folded yet.
    fn unfolded_hours(store: &crate::store::Store) -> Vec<i64> {
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let rows = store.unfolded_rows(metric.as_bytes()).unwrap().expect("the notes tell").rows;
        let layout = store.layout();
        let (sw, mw) = (layout.salt.width, layout.uid_widths[0]);
        rows.iter().map(|row| i64::from(rtsd_protocol::codec::row_base_time(row, sw, mw)) - BASE).collect()
    }

    /// Downsamples a grid read answers (as [`GRID_QUERIES`], of hosts a, b and c) and some it does not, each
    /// checked against the raw rows' answer.
    fn answers_as_raw(store: &crate::store::Store, when: &str) -> Vec<Answer> {
        const QUERIES: [&str; 10] = [
            "sum:1m-avg:m",
            "sum:1m-sum:m{host=*}",
            "sum:1m-count:m{host=b}",
            "max:1m-max:m{}{host=literal_or(a|c)}",
            "min:1m-min:m{}{host=regexp(b|c)}",
            "sum:1h-avg:m",
            "zimsum:10m-sum:m{host=*}",
            "max:10m-min:m",
            "sum:1h-count:m",
            "avg:30m-avg:m",
        ];
        QUERIES
            .iter()
            .map(|m| {
                let answer = run(store, m, "");
                assert_eq!(answer, run(store, m, "rollup_raw:"), "{when}: {m}");
                answer
            })
            .collect()
    }

    // issue 22 item 5: a backfill (hours long past, each series in time order) has its rollups as it goes: a
    // flush folds each row it saw start, from its own copy, once the series moves on to the next hour. A query
    // right after the backfill reads only the newest hour's rows raw, answers what the raw rows answer, and
    // leaves the folds nothing but that hour.
    #[test]
    fn a_backfill_is_folded_as_it_is_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        backfill(&store, 4, seal);
        assert_eq!(store.fold_backlog(), 0, "nothing was noted for the folds");
        assert_eq!(unfolded_hours(&store), vec![3 * 3600; 3], "the newest hour of a, b and c, still written");
        let right_after = answers_as_raw(&store, "right after");
        // A full fold takes the newest hour's rows back from the flushes and folds them; the rest is as the
        // flushes wrote it.
        store.fold_rollups(None).unwrap();
        assert!(unfolded_hours(&store).is_empty());
        assert_eq!(answers_as_raw(&store, "folded"), right_after);
        // With the flushes' folds off, the same writes give the same rollups (the daemon's folds write them).
        let dir = tempfile::tempdir().unwrap();
        let plain = open_with(dir.path(), &[("rtsd.rollups.fold_on_flush", "false")]);
        backfill(&plain, 4, seal);
        assert_eq!(unfolded_hours(&plain).len(), 12);
        plain.fold_rollups(None).unwrap();
        assert_eq!(answers_as_raw(&plain, "plain"), right_after);
    }

    // issue 22 item 5: a row a flush folds itself goes back to the folds, whole, as soon as it may not be whole
    // in the flush's copy: a late point into an hour already sealed, a point out of order in the hour being
    // written, another writer (a delete) changing an owned row, a full fold, a restart. Every answer stays the
    // raw rows' answer throughout.
    #[test]
    fn rows_the_flushes_fold_go_back_to_the_folds_when_written_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            backfill(&store, 3, seal);
            assert_eq!(unfolded_hours(&store), vec![2 * 3600; 3]);
            // A late point into a's sealed hour 0, and one out of order into b's hour 2 (its newest point is at
            // 2:59:40).
            put(&store, "a", 15, Stored::Double(1e6));
            put(&store, "b", 2 * 3600 + 30, Stored::Int(-40));
            store.flush_pending().unwrap();
            // And a delete of c's hour 2, owned while it is written.
            let c = tsuid_of(&store, "c");
            let hour_2 = (BASE + 2 * 3600) * 1000;
            assert_eq!(store.delete_series_rows(&[c], hour_2, hour_2 + 3_600_000).unwrap(), 1);
            let mut hours = unfolded_hours(&store);
            hours.sort_unstable();
            assert_eq!(hours, vec![0, 2 * 3600, 2 * 3600, 2 * 3600], "a's hour 0, and hour 2 of a, b and c");
            assert_eq!(store.fold_backlog(), 3, "a's hour 0 noted, b's and c's hour 2 given back (a's still owned)");
            // Hour 3 of a and b, ten minutes in: a's hour 2 is sealed as the flush moves it on, and hour 2 has
            // passed, so the daemon's fold of passed hours folds the rows given back (c's from what the delete
            // left: nothing).
            for host in ["a", "b"] {
                put(&store, host, 3 * 3600 + 600, Stored::Int(5));
            }
            store.flush_pending().unwrap();
            store.seal_in_background(usize::MAX);
            while store.closed_backlog() > 0 {
                store.fold_closed(512).unwrap();
            }
            // Then c moves on too: its hour 2 went back to the folds with the delete, so no flush writes its
            // rollups from the copy it had (which still held the deleted points).
            put(&store, "c", 3 * 3600 + 600, Stored::Int(5));
            store.flush_pending().unwrap();
            store.seal_in_background(usize::MAX);
            assert_eq!(unfolded_hours(&store), vec![3 * 3600; 3]);
            answers_as_raw(&store, "moved on");
            // Stopped without the last fold (a crash): the copies are gone, the stored marks are not.
        }
        let store = open(dir.path());
        let after_restart = answers_as_raw(&store, "after the restart");
        store.fold_rollups(None).unwrap();
        assert!(unfolded_hours(&store).is_empty());
        assert_eq!(answers_as_raw(&store, "folded"), after_restart);
    }

    // issue 22 item 5: a grid read (q1's kind) does not wait for the series table's flush. It reads the points
    // the table holds, and those of a flush under way, before and after each of its slices is written, and
    // answers what it answers once everything is flushed and folded: a late point into a sealed hour, points of
    // the hour being written, and a series new to the index.
    #[test]
    fn a_grid_query_reads_points_not_flushed_yet_without_waiting_for_the_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        backfill(&store, 3, seal);
        let more = |store: &crate::store::Store, shift: i64| {
            put(store, "a", 30 + shift, Stored::Int(1000));
            for (i, host) in ["a", "b", "c", "d"].iter().enumerate() {
                // Off the backfill's 20 s grid: no point at an instant already written.
                put(store, host, 2 * 3600 + 3001 + shift + i as i64, Stored::Double(0.25 * i as f64));
            }
        };
        more(&store, 0);
        let held = store.pending_points();
        assert_eq!(held, 5);
        // Grid reads, queries whose series come from the index (literal tag filters: d is new to it), with
        // rollups and raw (no downsampling: the series' rows are read by key), and scans of the metric's rows (no
        // downsampling, no literal filter).
        const QUERIES: [&str; 8] = [
            "sum:1m-avg:m",
            "sum:1h-avg:m",
            "max:10m-min:m",
            "sum:1m-avg:m{host=a}",
            "max:10m-max:m{host=b|d}",
            "sum:m{host=d}",
            "sum:m",
            "max:m{host=*}",
        ];
        let answers =
            |store: &crate::store::Store| -> Vec<Answer> { QUERIES.iter().map(|m| run(store, m, "")).collect() };
        let from_the_table = answers(&store);
        assert_eq!(store.pending_points(), held, "the queries flushed");
        let raw = |store: &crate::store::Store| -> Vec<Answer> {
            QUERIES.iter().map(|m| run(store, m, "rollup_raw:")).collect()
        };
        assert_eq!(from_the_table, raw(&store), "the raw rows' answer (settled)");
        // During a flush of one row a slice (the five rows above, each with a second point): what queries answer
        // before each slice's write and after it, before readers are told.
        more(&store, 1);
        // (slice, written, answers)
        type Steps = Vec<(usize, bool, Vec<Answer>)>;
        let during: Arc<std::sync::Mutex<Steps>> = Arc::default();
        let seen = during.clone();
        store.flush_slice_rows.store(1, std::sync::atomic::Ordering::Release);
        *store.flush_step.lock().unwrap() =
            Some(Box::new(move |store, slice, written| seen.lock().unwrap().push((slice, written, answers(store)))));
        store.flush_pending().unwrap();
        *store.flush_step.lock().unwrap() = None;
        let during = std::mem::take(&mut *during.lock().unwrap());
        assert_eq!(during.len(), 2 * 5, "five rows (a's hour 0, hour 2 of a, b, c, d), a step before and after each");
        // What the raw rows answer now that everything is flushed, and what the rollups answer once folded.
        let raw = raw(&store);
        assert_ne!(raw, from_the_table, "the second points changed the answers");
        for (slice, written, answer) in during {
            assert_eq!(answer, raw, "slice {slice}, written {written}");
        }
        store.fold_rollups(None).unwrap();
        assert_eq!(answers(&store), raw);
    }

    // issue 22 item 5: a flush whose write fails (a full disk) gives every row it folds itself back to the
    // folds: its fragments went into the copies but not into the rows. Once the flush succeeds the rows are
    // folded from what is stored, and the next hour is owned again.
    #[test]
    fn a_failed_flush_write_gives_the_rows_the_flushes_fold_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        backfill(&store, 2, seal);
        assert_eq!(unfolded_hours(&store), vec![3600; 3]);
        assert_eq!(store.fold_backlog(), 0);
        store.fail_flush_writes.store(true, std::sync::atomic::Ordering::Release);
        for host in ["a", "b", "c"] {
            put(&store, host, 3600 + 3590, Stored::Int(9));
        }
        assert!(store.flush_pending().is_err());
        store.fail_flush_writes.store(false, std::sync::atomic::Ordering::Release);
        assert_eq!(store.fold_backlog(), 3, "hour 1 of a, b and c, given back whole");
        store.flush_pending().unwrap();
        assert_eq!(unfolded_hours(&store), vec![3600; 3]);
        let given_back = answers_as_raw(&store, "given back");
        // Hour 2: owned again, and sealed as the series move on to hour 3.
        for host in ["a", "b", "c"] {
            put(&store, host, 2 * 3600 + 5, Stored::Int(1));
            put(&store, host, 3 * 3600 + 5, Stored::Int(2));
        }
        store.flush_pending().unwrap();
        store.seal_in_background(usize::MAX);
        // (The queries above folded hour 1.) Hour 2 was sealed, not noted: only hour 3, owned, is left.
        assert_eq!(unfolded_hours(&store), vec![3 * 3600; 3]);
        assert_eq!(store.fold_backlog(), 0);
        assert_ne!(answers_as_raw(&store, "moved on"), given_back);
        store.fold_rollups(None).unwrap();
        assert!(unfolded_hours(&store).is_empty());
        answers_as_raw(&store, "folded");
    }

    // issue 22 item 5: grid reads that do not wait for flushes still see every point acknowledged before they
    // started, whatever the flushes (a row a slice), seals and folds are doing meanwhile: a writer puts a point
    // a second into three series and counts what it was told was stored; each query's count of points is at
    // least what was counted when it began, and never less than an earlier query's.
    #[test]
    fn grid_reads_beside_flushes_see_every_point_acknowledged_before_them() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.flush_slice_rows.store(1, Ordering::Release);
        let (acked, done) = (AtomicU64::new(0), AtomicBool::new(false));
        let count = |store: &crate::store::Store| -> i64 {
            let answer = run(store, "zimsum:1m-count:m", "");
            let dps = answer.into_iter().flat_map(|(_, dps)| dps);
            dps.map(|(_, value)| match value {
                crate::query::OutValue::Int(n) => n,
                crate::query::OutValue::Double(d) if d.fract() == 0.0 => d as i64,
                other => panic!("a count is a whole number: {other:?}"),
            })
            .sum()
        };
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..3 * 3600i64 {
                    put(&store, ["a", "b", "c"][(i % 3) as usize], i, Stored::Int(1));
                    acked.store(i as u64 + 1, Ordering::Release);
                }
                done.store(true, Ordering::Release);
            });
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    store.flush_pending().unwrap();
                    store.seal_in_background(usize::MAX);
                    store.fold_closed(64).unwrap();
                }
            });
            let (mut queries, mut last) = (0, 0);
            while !done.load(Ordering::Acquire) || queries < 5 {
                let before = acked.load(Ordering::Acquire) as i64;
                if before == 0 {
                    // The metric has no UID yet.
                    std::thread::yield_now();
                    continue;
                }
                let seen = count(&store);
                assert!(
                    seen >= before && seen >= last,
                    "query {queries}: {seen} points, {before} acknowledged before it, {last} seen before"
                );
                (queries, last) = (queries + 1, seen);
            }
        });
        assert_eq!(count(&store), 3 * 3600);
    }

    // issue 22 item 5: a point not flushed yet that differs from a stored one at the same instant (an integer
    // and a double, say) is left as written by the row merge without `fix_duplicates`, and which of the two a
    // read takes then depends on how the row's writes were grouped. A grid read then does not merge it itself:
    // it folds after the flush, and answers as the raw rows do.
    #[test]
    fn a_grid_query_with_points_that_conflict_with_stored_ones_answers_as_the_raw_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        put(&store, "c", 8690, Stored::Int(5));
        put(&store, "c", 8698, Stored::Double(-11.142857142857142));
        store.fold_rollups(None).unwrap();
        put(&store, "c", 8698, Stored::Int(273));
        let grid = run(&store, "sum:1m-sum:m", "");
        assert_eq!(store.pending_points(), 0, "the grid read flushed");
        assert_eq!(grid, run(&store, "sum:1m-sum:m", "rollup_raw:"));
        assert_eq!(grid[0].1, [((BASE + 8640) * 1000, crate::query::OutValue::Double(278.0))]);
    }

    // issue 22 item 5: a seal whose write fails (a full disk) leaves its rows to the folds, whole (their
    // fragments were never noted): answers stay the raw rows' throughout, and once the disk has room a fold
    // writes their rollups.
    #[test]
    fn a_failed_seal_write_leaves_its_rows_to_the_folds() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.fail_seal_writes.store(true, std::sync::atomic::Ordering::Release);
        backfill(&store, 3, seal);
        // Hours 0 and 1 of a, b and c, queued as their series moved on and not written: noted. Hour 2, still
        // being written, stays the flushes'.
        assert_eq!(store.fold_backlog(), 6);
        assert_eq!(unfolded_hours(&store), [0, 0, 0, 3600, 3600, 3600, 7200, 7200, 7200]);
        let during = answers_as_raw(&store, "seals failed");
        store.fail_seal_writes.store(false, std::sync::atomic::Ordering::Release);
        store.fold_rollups(None).unwrap();
        assert!(unfolded_hours(&store).is_empty());
        assert_eq!(answers_as_raw(&store, "folded"), during);
    }

    // Issue 23 and 22: while the series table cannot be flushed (a full disk) its points are read from it. A
    // downsampled query must see them whether it would read the rollups (which lack them), rows not folded yet
    // (listed as they are flushed) or the index's series (a new series has no entry yet): it answers during the
    // failure what it answers once the flush succeeds and the rows are folded.
    #[test]
    fn downsampled_queries_see_points_a_failing_flush_holds_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for i in 0..240i64 {
            put(&store, ["a", "b"][(i % 2) as usize], i * 30, Stored::Int(i));
        }
        put(&store, "d", 3 * 3600 + 100, Stored::Int(2));
        store.fold_rollups(None).unwrap();
        assert_eq!(store.fold_backlog(), 0);
        let before: Vec<Answer> = GRID_QUERIES.iter().map(|m| run(&store, m, "")).collect();
        store.fail_flushes.store(true, std::sync::atomic::Ordering::Release);
        // Into a folded hour of a, after b's last point, new rows of d (in every query's filter), and a series
        // new to the index, e (in those without a host filter).
        put(&store, "a", 45, Stored::Int(1000));
        put(&store, "b", 2 * 3600 + 15, Stored::Double(0.5));
        put(&store, "d", 600, Stored::Int(7));
        put(&store, "d", 3600 + 20, Stored::Int(-3));
        // A read copies the held points (the flush failed), then e arrives: the next read sees it at once, not
        // with the flush's next try a second later.
        run(&store, GRID_QUERIES[0], "");
        put(&store, "e", 1200, Stored::Int(40));
        let during: Vec<Answer> = GRID_QUERIES.iter().map(|m| run(&store, m, "")).collect();
        assert!(store.pending_points() > 0 && store.holds_unflushed().unwrap(), "the points were not flushed");
        for ((m, before), during) in GRID_QUERIES.iter().zip(&before).zip(&during) {
            assert_ne!(before, during, "{m}: the held points are in the answer");
        }
        // The index's readers (lookup, query/last, literal filters) take the held series from the table too.
        use rtsd_protocol::point::UidKind;
        let uid = |kind, name: &str| store.uids().get(kind, name).unwrap().unwrap().as_bytes().to_vec();
        let (m, host) = (uid(UidKind::Metric, "m"), uid(UidKind::TagKey, "host"));
        let tsuid = |h: &str| [m.clone(), host.clone(), uid(UidKind::TagValue, h)].concat();
        let listed: Vec<(Vec<u8>, u32)> = store.series_of_metric(&m).unwrap();
        let hour = |h: i64| (BASE + h * 3600) as u32;
        let want = vec![(tsuid("a"), hour(1)), (tsuid("b"), hour(2)), (tsuid("d"), hour(3)), (tsuid("e"), hour(0))];
        let mut listed_sorted = listed.clone();
        listed_sorted.sort();
        assert_eq!(listed, listed_sorted, "in TSUID order");
        assert_eq!(listed_sorted, {
            let mut w = want.clone();
            w.sort();
            w
        });
        assert_eq!(store.last_hour(&tsuid("b")).unwrap(), Some(hour(2)), "b's newest hour is held back");
        let e: crate::store::Tsuid = tsuid("e").as_slice().into();
        assert_eq!(store.series_with_tag(&m, &host, &uid(UidKind::TagValue, "e")).unwrap(), vec![e]);
        store.fail_flushes.store(false, std::sync::atomic::Ordering::Release);
        // A second after the failure the next read flushes again.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        store.settle().unwrap();
        assert_eq!(store.pending_points(), 0);
        store.fold_rollups(None).unwrap();
        for (m, during) in GRID_QUERIES.iter().zip(&during) {
            assert_eq!(&run(&store, m, ""), during, "{m}");
        }
    }

    // A store reopened with marks not folded has no notes of them: a grid query then folds first (its answer
    // still exact), since it cannot tell which rows to read raw.
    #[test]
    fn a_grid_query_folds_first_when_marks_from_before_a_restart_are_unfolded() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            for i in 0..240i64 {
                put(&store, ["a", "b"][(i % 2) as usize], i * 30, Stored::Int(i));
            }
            store.flush_pending().unwrap();
        }
        let store = open(dir.path());
        let metric = store.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
        let metric = metric.as_bytes();
        assert_eq!(store.unfolded_rows(metric).unwrap(), None);
        let m = "sum:1m-sum:m";
        assert_eq!(run(&store, m, ""), run(&store, m, "rollup_raw:"));
        assert_eq!(store.fold_rollups(Some(metric)).unwrap(), 0, "the query folded");
        // Once a full fold has read the stored marks, the notes tell again.
        store.fold_rollups(None).unwrap();
        assert_eq!(store.unfolded_rows(metric).unwrap(), Some(Default::default()));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        // issue 6 item 3: a query answered from rollups gives the raw answer, for random data (integers and
        // floats, late, out-of-order and duplicate points, several hosts), downsamples and aggregators.
        #[test]
        fn rollup_answers_equal_raw_answers(
            points in prop::collection::vec(
                (0i64..4 * 3600, 0u8..3, prop_oneof![(-500i64..500).prop_map(Stored::Int),
                    (-4000i32..4000).prop_map(|v| Stored::Float(v as f32 / 8.0)),
                    (-1000i64..1000).prop_map(|v| Stored::Double(v as f64 / 7.0))]),
                1..150),
            folds in prop::collection::vec(0usize..150, 0..3),
            fix_duplicates in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let fix = if fix_duplicates { "true" } else { "false" };
            let config = Config::for_data_dir(dir.path(), &[("tsd.rollups.enable", "true"), ("tsd.storage.fix_duplicates", fix)]).unwrap();
            let store = crate::store::Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap();
            // Every host has a point, so the literal filter's values all exist.
            let points: Vec<(i64, u8, Stored)> =
                (0..3).map(|h| (i64::from(h) * 7, h, Stored::Int(1))).chain(points).collect();
            for (i, (offset, host, value)) in points.iter().enumerate() {
                let host = ["a", "b", "c"][*host as usize];
                let tags: Tags = [(Cow::Borrowed("host"), Cow::Borrowed(host))].into_iter().collect();
                let p = DataPoint { metric: Cow::Borrowed("m"), timestamp: BASE + offset, value: *value, tags };
                let mut batch = store.new_batch();
                store.add_point(&mut batch, &p).unwrap();
                store.commit(&mut batch, false).unwrap();
                if folds.contains(&i) {
                    store.fold_rollups(None).unwrap();
                }
            }
            // One-minute and one-hour downsamples without fill are read onto a grid (`Store::read_rollup_grid`),
            // the others cell by cell; the sums aggregate on the grid, the other aggregators on its points.
            for ds in ["1m-sum", "1m-avg", "1m-count", "1m-min", "1m-zimsum", "1m-avg-nan", "10m-count", "10m-min",
                "1h-max", "1h-avg", "2h-avg", "20m-sum", "30m-avg-zero"] {
                for (agg, filter) in [("sum", ""), ("none", ""), ("avg", "{host=a|c}"), ("max", "{host=*}"),
                    ("zimsum", "{host=*}"), ("pfsum", ""), ("sum", "{}{host=regexp(a|c)}")] {
                    let m = format!("{agg}:{ds}:m{filter}");
                    prop_assert_eq!(run(&store, &m, ""), run(&store, &m, "rollup_raw:"), "{}", m);
                }
            }
        }
    }
}
