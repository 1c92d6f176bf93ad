//! One group's computation: per series downsample → rate, then aggregation across the series with
//! interpolation, filtered to the query's `[start, end]` (spec: query §1.5 steps 2, 5–7, §2.2, §3.5, §4.3).
//!
//! The daemon scans `[scanStart, scanEnd)` ([`scan_window`]), groups the series, and calls [`Query::run`] per
//! group with each series' points in time order. The result is an iterator of output points in time order, so
//! it can be serialized as it is computed; each point is already typed ([`OutValue`]) the way §1.6 prints it.

use super::aggregators::{Aggregator, Interpolation};
use super::downsample::{Downsampler, FillPolicy, Window};
use super::rate::{RateConfig, RateIter};
use super::series::{OutPoint, OutValue, Point, Value};

/// What the engine needs of one sub-query (the daemon converts the parsed request into this).
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Query start in ms (inclusive).
    pub start_ms: i64,
    /// Query end in ms (inclusive).
    pub end_ms: i64,
    /// Cross-series aggregator. With [`Aggregator::None`] the daemon passes one series per group.
    pub aggregator: Aggregator,
    pub downsample: Option<Downsampler>,
    /// `Some` when `rate` is on (with the default [`RateConfig`] when no `rateOptions` were given).
    pub rate: Option<RateConfig>,
}

/// A value that 2.4 refuses to print: it throws `Got Infinity` while serializing the point.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("Got Infinity: {value} at {timestamp_ms}")]
pub struct Infinity {
    pub timestamp_ms: i64,
    pub value: f64,
}

/// §1.5 step 2: the `[scanStart, scanEnd)` window (ms) whose points take part in the computation.
///
/// * scanStart: the start in seconds, aligned down to the downsample interval (epoch modulo; calendar
///   downsamplers use their fixed length, `all` none), then down to the hour; never negative.
/// * scanEnd: from `end/1000 + 1` s (2.4.1's `getScanEndTimeSeconds`): without downsampling the next hour
///   boundary strictly after it; with an interval, aligned up to the *following* interval boundary (always
///   advancing), then up to the hour unless already on one.
///
/// Times are taken as ms whatever their size (2.4 takes values below 2^32 as seconds, a bug near the epoch).
pub fn scan_window(start_ms: i64, end_ms: i64, downsample: Option<&Downsampler>) -> (i64, i64) {
    const HOUR: i128 = 3600;
    let interval = downsample.map_or(0, |d| if d.all { 0 } else { d.interval_ms.max(0) }) as i128;
    let start_s = (start_ms.max(0) / 1000) as i128;
    let mut aligned = start_s;
    if interval > 0 {
        aligned -= ((1000 * start_s) % interval) / 1000;
    }
    let scan_start = (aligned - aligned % HOUR).max(0);

    let end_s = (end_ms.max(0) / 1000) as i128 + 1;
    let scan_end = if interval > 0 {
        let aligned = end_s + (interval - (1000 * end_s) % interval) / 1000;
        if aligned % HOUR == 0 {
            aligned
        } else {
            aligned + HOUR - aligned % HOUR
        }
    } else {
        end_s + (HOUR - end_s % HOUR)
    };
    let ms = |s: i128| (s * 1000).clamp(0, i64::MAX as i128) as i64;
    (ms(scan_start), ms(scan_end))
}

/// §1.5 step 7: whether an output point is written (both ends inclusive, ms).
pub fn in_output_window(ts_ms: i64, start_ms: i64, end_ms: i64) -> bool {
    start_ms <= ts_ms && ts_ms <= end_ms
}

impl Query {
    /// [`scan_window`] for this query.
    pub fn scan_window(&self) -> (i64, i64) {
        scan_window(self.start_ms, self.end_ms, self.downsample.as_ref())
    }

    /// The query range and its scan window.
    pub fn window(&self) -> Window {
        let (scan_start_ms, scan_end_ms) = self.scan_window();
        Window { start_ms: self.start_ms, end_ms: self.end_ms, scan_start_ms, scan_end_ms }
    }

    /// NaN prints as `null` (fill policy `null`) rather than `"NaN"`.
    pub fn null_for_nan(&self) -> bool {
        self.downsample.as_ref().is_some_and(|d| d.fill == FillPolicy::Null)
    }

    /// One series through its own stages (§1.5 steps 5-6): the scan window, strictly increasing times,
    /// downsampling, rate. This is all the cross-series aggregation reads of it, so a reader can stage each series
    /// as soon as it has its points and drop the raw ones (a downsampled series is far smaller).
    pub fn stage(&self, points: impl IntoIterator<Item = Point>) -> Vec<Point> {
        let window = self.window();
        let raw = Sanitized { src: points.into_iter(), last: None, window };
        let staged: Box<dyn Iterator<Item = Point> + '_> = match &self.downsample {
            Some(ds) => {
                let scan_start = window.scan_start_ms;
                Box::new(ds.apply(raw, &window).filter(move |p| p.ts >= scan_start))
            }
            None => Box::new(raw),
        };
        match self.rate {
            Some(config) => RateIter::new(staged, config).collect(),
            None => staged.collect(),
        }
    }

    /// [`Query::stage`] of points already downsampled elsewhere (a rollup answer: one point per bucket, at the
    /// bucket's start): each bucket holds one point, so downsampling is the function of that one value, with
    /// no bucketing. Gives exactly what [`Query::stage`] gives; a series that is not one point per bucket
    /// (raw points read for inexact buckets), a fill policy or calendar buckets take [`Query::stage`].
    pub fn stage_bucketed(&self, points: Vec<Point>) -> Vec<Point> {
        let Some(ds) =
            self.downsample.as_ref().filter(|d| !d.all && d.calendar.is_none() && d.fill == FillPolicy::None)
        else {
            return self.stage(points);
        };
        let interval = ds.interval_ms.max(1);
        if points.iter().any(|p| p.ts.rem_euclid(interval) != 0) {
            return self.stage(points);
        }
        let window = self.window();
        // What `Sanitized` and the downsampler's seek leave: inside the scan window, from the first bucket
        // boundary at or after its start, strictly increasing (aligned, so one point per bucket).
        let first = super::downsample::align_up(window.scan_start_ms, interval).max(window.scan_start_ms);
        let mut last = None;
        // In place: a series' points are not copied again.
        let mut out = points;
        let mut kept = 0;
        for at in 0..out.len() {
            let p = out[at];
            if p.ts < first || p.ts >= window.scan_end_ms || last.is_some_and(|l| p.ts <= l) {
                continue;
            }
            last = Some(p.ts);
            out[kept] = Point { ts: p.ts, value: Value::Double(ds.function.run_double_one(p.value.as_f64())) };
            kept += 1;
        }
        out.truncate(kept);
        match self.rate {
            Some(config) => RateIter::new(out.into_iter(), config).collect(),
            None => out,
        }
    }

    /// The group's output when every staged series has a floating-point value at exactly the same times (rollup
    /// buckets of series reported together, the common case): at each time every series contributes its own
    /// value, so the aggregate is the aggregator over them in series order, with none of [`GroupIter`]'s
    /// per-point bookkeeping. `None` when the series are not so aligned (then [`Query::run_staged`]). The
    /// result is [`GroupIter`]'s, point for point.
    pub fn run_aligned(&self, staged: &[Vec<Point>]) -> Option<Vec<Result<OutPoint, Infinity>>> {
        let first = staged.first()?;
        let aligned = staged
            .iter()
            .all(|s| s.len() == first.len() && s.iter().zip(first).all(|(a, b)| a.ts == b.ts && !a.value.is_integer()));
        if !aligned {
            return None;
        }
        let null_for_nan = self.null_for_nan();
        // A sum adds each time's values in series order, skipping NaN (`Aggregator::run_double`): done series by
        // series over the whole time range, the additions per time come in the same order, so the sums are the
        // same bits, without gathering one value from every series per time.
        let sums = matches!(self.aggregator, Aggregator::Sum | Aggregator::Pfsum | Aggregator::Zimsum).then(|| {
            let mut sums = vec![(0.0f64, false); first.len()];
            for s in staged {
                for (acc, p) in sums.iter_mut().zip(s) {
                    let v = p.value.as_f64();
                    if !v.is_nan() {
                        *acc = (acc.0 + v, true);
                    }
                }
            }
            sums
        });
        let mut floats = Vec::with_capacity(staged.len());
        let mut out = Vec::new();
        for (i, p) in first.iter().enumerate() {
            let t = p.ts;
            if t > self.end_ms {
                break;
            }
            if t < self.start_ms {
                continue;
            }
            let v = match &sums {
                Some(sums) => match sums[i] {
                    (sum, true) => sum,
                    (_, false) => f64::NAN,
                },
                None => {
                    floats.clear();
                    floats.extend(staged.iter().map(|s| s[i].value.as_f64()));
                    self.aggregator.run_double(&floats)
                }
            };
            if !push_double(&mut out, t, v, null_for_nan) {
                break;
            }
        }
        Some(out)
    }

    /// The group's output from series staged onto one grid of bucket times (a rollup read: bucket `i` at
    /// `first_ms + i * step_ms`), for the sum aggregators (`sum`, `zimsum`, `pfsum`), as [`GroupIter`] computes
    /// it: at every time some series has a value, each series between its first and last value adds its value
    /// there or, in a gap, the one its interpolation gives, skipping NaN. Done series by series over the whole
    /// grid, the additions per time come in series order as in [`GroupIter`], so the sums are the same bits,
    /// with no per-point bookkeeping and no point lists. `None` for other aggregators and with a rate (then
    /// [`grid_points`] and [`Query::run_staged`]).
    pub fn run_grid(
        &self,
        first_ms: i64,
        step_ms: i64,
        rows: &[GridRow<'_>],
    ) -> Option<Vec<Result<OutPoint, Infinity>>> {
        self.run_grid_from(first_ms, step_ms, rows, PARALLEL_GRID_WORDS)
    }

    /// [`Query::run_grid`], on two threads from `parallel` (series x words) on.
    fn run_grid_from(
        &self,
        first_ms: i64,
        step_ms: i64,
        rows: &[GridRow<'_>],
        parallel: usize,
    ) -> Option<Vec<Result<OutPoint, Infinity>>> {
        if self.rate.is_some() || !matches!(self.aggregator, Aggregator::Sum | Aggregator::Pfsum | Aggregator::Zimsum) {
            return None;
        }
        let words = rows.iter().map(|r| r.present.len()).max().unwrap_or(0);
        let mut union = vec![0u64; words];
        for r in rows {
            union.iter_mut().zip(r.present).for_each(|(u, &w)| *u |= w);
        }
        let at = |i: usize| first_ms.saturating_add((i as i64).saturating_mul(step_ms));
        let grid = Grid { first_ms, step_ms, rows, union: &union, interpolation: self.aggregator.interpolation() };
        // Per bucket: the sum, and whether any value (not NaN) was added. Buckets add up independently: a large
        // grid is added in two halves side by side (each series' values are read, not changed).
        let (mut sums, mut added) = (vec![0.0f64; words * 64], vec![false; words * 64]);
        let half = words / 2;
        if rows.len() * words >= parallel && half > 0 {
            let (sums_lo, sums_hi) = sums.split_at_mut(half * 64);
            let (added_lo, added_hi) = added.split_at_mut(half * 64);
            std::thread::scope(|scope| {
                let grid = &grid;
                scope.spawn(move || grid.add(half..words, sums_hi, added_hi));
                grid.add(0..half, sums_lo, added_lo);
            });
        } else {
            grid.add(0..words, &mut sums, &mut added);
        }
        let null_for_nan = self.null_for_nan();
        let mut out = Vec::new();
        'words: for (w, &word) in union.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let t = at(i);
                if t > self.end_ms {
                    break 'words;
                }
                if t < self.start_ms {
                    continue;
                }
                let v = if added[i] { sums[i] } else { f64::NAN };
                if !push_double(&mut out, t, v, null_for_nan) {
                    break 'words;
                }
            }
        }
        Some(out)
    }

    /// Runs one group. `series` are the group's series in row-key (TSUID) order, which is the order values are
    /// fed to the aggregator (it matters for `first`, `last`, `diff` and float rounding); each yields its points
    /// in time order. Points outside the scan window, and points not after the previous one, are ignored.
    pub fn run<S>(&self, series: impl IntoIterator<Item = S>) -> GroupIter
    where
        S: IntoIterator<Item = Point>,
    {
        self.run_staged(series.into_iter().map(|s| self.stage(s)).collect())
    }

    /// [`Query::run`] for series already through [`Query::stage`], in row-key order.
    pub fn run_staged(&self, staged: Vec<Vec<Point>>) -> GroupIter {
        let series = staged
            .into_iter()
            .map(|points| {
                let mut iter = points.into_iter();
                let next = iter.next();
                SeriesState { iter, cur: None, next }
            })
            .collect();
        GroupIter {
            series,
            aggregator: self.aggregator,
            interpolation: self.aggregator.interpolation(),
            rate: self.rate.is_some(),
            start_ms: self.start_ms,
            end_ms: self.end_ms,
            null_for_nan: self.null_for_nan(),
            done: false,
            next_ts: None,
            ints: Vec::new(),
            floats: Vec::new(),
        }
    }
}

/// From how many (series x 64 buckets) [`Query::run_grid`] adds on two threads (a thread costs tens of
/// microseconds; 16 K words are a million buckets).
const PARALLEL_GRID_WORDS: usize = 1 << 14;

/// What [`Query::run_grid`] adds up: the series' rows, every output time (`union`), and the interpolation.
struct Grid<'a> {
    first_ms: i64,
    step_ms: i64,
    rows: &'a [GridRow<'a>],
    union: &'a [u64],
    interpolation: Interpolation,
}

impl Grid<'_> {
    /// Adds, series by series, each series' contribution at every output time of the words `range` (buckets
    /// `range.start * 64..`) into `sums` and `added` (which start at that bucket).
    fn add(&self, range: std::ops::Range<usize>, sums: &mut [f64], added: &mut [bool]) {
        let at = |i: usize| self.first_ms.saturating_add((i as i64).saturating_mul(self.step_ms));
        let base = range.start * 64;
        for r in self.rows {
            let (Some(first), Some(last)) = (first_bit(r.present), last_bit(r.present)) else { continue };
            let (from, to) = ((first / 64).max(range.start), (last / 64 + 1).min(range.end));
            if from >= to {
                continue;
            }
            // The series' latest value before the range (or its first), and its next one after a gap (found
            // when first needed).
            let mut prev = if from * 64 > first { prev_bit(r.present, from * 64 - 1).unwrap_or(first) } else { first };
            let mut next = 0;
            for w in from..to {
                let mut bits = self.union[w];
                if w == first / 64 {
                    bits &= !0u64 << (first % 64);
                }
                if w == last / 64 {
                    bits &= !0u64 >> (63 - last % 64);
                }
                if bits == !0 && r.present[w] == !0 {
                    // 64 buckets the series has, all of them output times (the common case): a straight loop.
                    let (values, into) = (&r.values[w * 64..w * 64 + 64], w * 64 - base..w * 64 - base + 64);
                    for ((acc, any), &v) in sums[into.clone()].iter_mut().zip(&mut added[into]).zip(values) {
                        if !v.is_nan() {
                            *acc += v;
                            *any = true;
                        }
                    }
                    prev = w * 64 + 63;
                    continue;
                }
                while bits != 0 {
                    let t = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let v = if r.present[w] & (1 << (t % 64)) != 0 {
                        prev = t;
                        r.values[t]
                    } else {
                        // A gap: the series has a value before (`prev`) and after (`t < last`).
                        if next <= t {
                            next = next_bit(r.present, t + 1).unwrap_or(last);
                        }
                        let cur = Point::float(at(prev), r.values[prev]);
                        double_at(at(t), cur, Some(Point::float(at(next), r.values[next])), self.interpolation)
                    };
                    if !v.is_nan() {
                        sums[t - base] += v;
                        added[t - base] = true;
                    }
                }
            }
        }
    }
}

/// The last set bit at or before `at`.
fn prev_bit(bits: &[u64], at: usize) -> Option<usize> {
    let mut w = at / 64;
    let mut word = *bits.get(w)? & (!0u64 >> (63 - at % 64));
    loop {
        if word != 0 {
            return Some(w * 64 + 63 - word.leading_zeros() as usize);
        }
        w = w.checked_sub(1)?;
        word = bits[w];
    }
}

/// One series staged onto a grid of bucket times (see [`Query::run_grid`]): its value per bucket, meaningful
/// where its `present` bitmap (bucket `i` at bit `i % 64` of word `i / 64`) has the bucket.
#[derive(Debug, Clone, Copy)]
pub struct GridRow<'a> {
    pub values: &'a [f64],
    pub present: &'a [u64],
}

/// A grid row as the staged points it stands for.
pub fn grid_points(first_ms: i64, step_ms: i64, row: GridRow<'_>) -> Vec<Point> {
    let mut out = Vec::with_capacity(row.present.iter().map(|w| w.count_ones() as usize).sum());
    for (w, &word) in row.present.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let i = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            out.push(Point::float(first_ms.saturating_add((i as i64).saturating_mul(step_ms)), row.values[i]));
        }
    }
    out
}

fn first_bit(bits: &[u64]) -> Option<usize> {
    next_bit(bits, 0)
}

/// The first set bit at or after `from`.
fn next_bit(bits: &[u64], from: usize) -> Option<usize> {
    let mut w = from / 64;
    let mut word = *bits.get(w)? & (!0u64 << (from % 64));
    loop {
        if word != 0 {
            return Some(w * 64 + word.trailing_zeros() as usize);
        }
        w += 1;
        word = *bits.get(w)?;
    }
}

fn last_bit(bits: &[u64]) -> Option<usize> {
    let w = bits.iter().rposition(|&w| w != 0)?;
    Some(w * 64 + 63 - bits[w].leading_zeros() as usize)
}

/// Appends a double output point as [`GroupIter`] gives it (NaN as null or NaN, infinity an error); `false` once
/// the output ends (after an error).
fn push_double(out: &mut Vec<Result<OutPoint, Infinity>>, t: i64, v: f64, null_for_nan: bool) -> bool {
    if v.is_nan() {
        out.push(Ok((t, if null_for_nan { OutValue::Null } else { OutValue::NaN })));
    } else if v.is_infinite() {
        out.push(Err(Infinity { timestamp_ms: t, value: v }));
        return false;
    } else {
        out.push(Ok((t, OutValue::Double(v))));
    }
    true
}

/// [`Query::run`] collected; stops at the first error.
pub fn run_group<S>(query: &Query, series: impl IntoIterator<Item = S>) -> Result<Vec<OutPoint>, Infinity>
where
    S: IntoIterator<Item = Point>,
{
    query.run(series).collect()
}

/// Raw points restricted to the scan window, strictly increasing in time.
struct Sanitized<I> {
    src: I,
    last: Option<i64>,
    window: Window,
}

impl<I: Iterator<Item = Point>> Iterator for Sanitized<I> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        loop {
            let p = self.src.next()?;
            if p.ts < self.window.scan_start_ms || p.ts >= self.window.scan_end_ms {
                continue;
            }
            if self.last.is_some_and(|last| p.ts <= last) {
                continue;
            }
            self.last = Some(p.ts);
            return Some(p);
        }
    }
}

/// One series inside the aggregation: its latest point at or before the output time (`cur`, `None` before the
/// series starts and after it ends) and its next point.
struct SeriesState {
    iter: std::vec::IntoIter<Point>,
    cur: Option<Point>,
    next: Option<Point>,
}

/// The output points of one group, ascending in time, inside `[start, end]`.
pub struct GroupIter {
    series: Vec<SeriesState>,
    aggregator: Aggregator,
    interpolation: Interpolation,
    rate: bool,
    start_ms: i64,
    end_ms: i64,
    null_for_nan: bool,
    done: bool,
    /// The next output time, found while moving to the current one.
    next_ts: Option<i64>,
    ints: Vec<i64>,
    floats: Vec<f64>,
}

impl Iterator for GroupIter {
    type Item = Result<OutPoint, Infinity>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(t) = self.next_ts.take().or_else(|| self.series.iter().filter_map(|s| s.next.map(|p| p.ts)).min())
            else {
                self.done = true;
                break;
            };
            // One pass: a series whose last point was the previous output time has ended and no longer
            // contributes; those with a point at `t` move to it; and the next output time is found.
            let mut next_ts: Option<i64> = None;
            for s in &mut self.series {
                match s.next {
                    None => s.cur = None,
                    Some(p) if p.ts == t => {
                        s.cur = Some(p);
                        s.next = s.iter.next();
                    }
                    Some(_) => {}
                }
                if let Some(p) = s.next {
                    next_ts = Some(next_ts.map_or(p.ts, |n| n.min(p.ts)));
                }
            }
            // `None` (every series done) is found again by the scan above, which then ends the iteration.
            self.next_ts = next_ts;
            if t > self.end_ms {
                self.done = true;
                break;
            }
            if t < self.start_ms {
                continue;
            }
            let value = self.value_at(t);
            if value.is_err() {
                self.done = true;
            }
            return Some(value.map(|v| (t, v)));
        }
        None
    }
}

impl GroupIter {
    /// The aggregate at output time `t` (§2.2): every series that has started and not ended contributes its
    /// value at `t`, or an interpolated one; integer arithmetic iff no rate and every current and next point of
    /// every series is an integer (downsampled values never are).
    fn value_at(&mut self, t: i64) -> Result<OutValue, Infinity> {
        let is_int = !self.rate
            && self
                .series
                .iter()
                .all(|s| s.cur.is_none_or(|p| p.value.is_integer()) && s.next.is_none_or(|p| p.value.is_integer()));
        if is_int {
            self.ints.clear();
            for s in &self.series {
                let Some(cur) = s.cur else { continue };
                self.ints.push(long_at(t, cur, s.next, self.interpolation));
            }
            return Ok(OutValue::Int(self.aggregator.run_long(&self.ints)));
        }
        self.floats.clear();
        for s in &self.series {
            let Some(cur) = s.cur else { continue };
            let v = if self.rate { cur.value.as_f64() } else { double_at(t, cur, s.next, self.interpolation) };
            self.floats.push(v);
        }
        let v = self.aggregator.run_double(&self.floats);
        if v.is_nan() {
            Ok(if self.null_for_nan { OutValue::Null } else { OutValue::NaN })
        } else if v.is_infinite() {
            Err(Infinity { timestamp_ms: t, value: v })
        } else {
            Ok(OutValue::Double(v))
        }
    }
}

fn as_long(v: Value) -> i64 {
    match v {
        Value::Int(i) => i,
        // Not reached: the integer path requires integer points.
        Value::Float(f) => f as i64,
        Value::Double(d) => d as i64,
    }
}

/// A series' integer contribution at `t` (Java `long` arithmetic; LERP multiplies before it divides).
fn long_at(t: i64, cur: Point, next: Option<Point>, interp: Interpolation) -> i64 {
    let y0 = as_long(cur.value);
    let Some(next) = next else { return y0 };
    if cur.ts == t {
        return y0;
    }
    let y1 = as_long(next.value);
    if next.ts == t {
        return y1;
    }
    match interp {
        Interpolation::Lerp => {
            let dx = next.ts.wrapping_sub(cur.ts);
            if dx == 0 {
                return y0;
            }
            y0.wrapping_add(t.wrapping_sub(cur.ts).wrapping_mul(y1.wrapping_sub(y0)).wrapping_div(dx))
        }
        Interpolation::Zim => 0,
        Interpolation::Max => i64::MAX,
        Interpolation::Min => i64::MIN,
        Interpolation::Prev => y0,
    }
}

/// A series' double contribution at `t`.
fn double_at(t: i64, cur: Point, next: Option<Point>, interp: Interpolation) -> f64 {
    let y0 = cur.value.as_f64();
    let Some(next) = next else { return y0 };
    if cur.ts == t {
        return y0;
    }
    let y1 = next.value.as_f64();
    if next.ts == t {
        return y1;
    }
    match interp {
        Interpolation::Lerp => y0 + (t.wrapping_sub(cur.ts) as f64 * (y1 - y0)) / next.ts.wrapping_sub(cur.ts) as f64,
        Interpolation::Zim => 0.0,
        Interpolation::Max => f64::MAX,
        Interpolation::Min => -f64::MAX,
        Interpolation::Prev => y0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::calendar::{time_zone, Calendar, CalendarUnit};
    use super::*;

    const T: i64 = 1_356_998_400_000;
    const S: i64 = 1000;

    fn agg(name: &str) -> Aggregator {
        Aggregator::from_name(name).unwrap()
    }

    fn query(start_s: i64, end_s: i64, aggregator: &str) -> Query {
        Query { start_ms: start_s * S, end_ms: end_s * S, aggregator: agg(aggregator), downsample: None, rate: None }
    }

    fn ints(points: &[(i64, i64)]) -> Vec<Point> {
        points.iter().map(|&(s, v)| Point::int(T + s * S, v)).collect()
    }

    fn floats(points: &[(i64, f64)]) -> Vec<Point> {
        points.iter().map(|&(s, v)| Point::float(T + s * S, v)).collect()
    }

    fn run(q: &Query, series: &[Vec<Point>]) -> Vec<OutPoint> {
        run_group(q, series.iter().cloned()).expect("finite")
    }

    /// dps as (seconds, value) for compact expectations.
    fn secs(out: &[OutPoint]) -> Vec<(i64, OutValue)> {
        out.iter().map(|&(ts, v)| (ts / 1000, v)).collect()
    }

    fn int_dps(start_s: i64, values: &[(i64, i64)]) -> Vec<(i64, OutValue)> {
        values.iter().map(|&(s, v)| (start_s + s, OutValue::Int(v))).collect()
    }

    fn dbl_dps(values: &[(i64, f64)]) -> Vec<(i64, OutValue)> {
        values.iter().map(|&(s, v)| (s, OutValue::Double(v))).collect()
    }

    const TS: i64 = 1_356_998_400;

    /// Dataset D1 (spec: query §8).
    fn d1() -> Vec<Vec<Point>> {
        vec![ints(&[(0, 40), (10, 50), (30, 70)]), ints(&[(10, 37), (20, 48)])]
    }

    // spec: query §2.4 — the worked example (`testAggregate_doubleSpans`) and V1's other aggregators.
    #[test]
    fn worked_example_and_v1_every_aggregator() {
        let expect: [(&str, [i64; 4]); 16] = [
            ("sum", [40, 87, 108, 70]),
            ("zimsum", [40, 87, 48, 70]),
            ("min", [40, 37, 48, 70]),
            ("max", [40, 50, 60, 70]),
            ("avg", [40, 43, 54, 70]),
            ("dev", [0, 6, 6, 0]),
            ("count", [1, 2, 2, 1]),
            ("mimmin", [40, 37, 48, 70]),
            ("mimmax", [40, 50, 48, 70]),
            ("median", [40, 50, 60, 70]),
            ("mult", [40, 1850, 2880, 70]),
            ("diff", [0, -13, -12, 0]),
            ("squareSum", [1600, 3869, 2304, 4900]),
            ("first", [40, 50, 0, 70]),
            ("last", [40, 37, 48, 70]),
            ("pfsum", [40, 87, 98, 70]),
        ];
        for (name, values) in expect {
            let q = query(TS, TS + 60, name);
            let want: Vec<(i64, i64)> = values.iter().enumerate().map(|(i, &v)| (10 * i as i64, v)).collect();
            assert_eq!(secs(&run(&q, &d1())), int_dps(TS, &want), "{name}");
        }
    }

    // spec: query §2.4 / V2 — pfsum carries the previous value of a spanning series.
    #[test]
    fn v2_pfsum() {
        let series = vec![ints(&[(0, 40), (30, 70)]), ints(&[(10, 37), (20, 48)])];
        let q = query(TS, TS + 60, "pfsum");
        assert_eq!(secs(&run(&q, &series)), int_dps(TS, &[(0, 40), (10, 77), (20, 88), (30, 70)]));
    }

    // spec: query §8 V3 — each group alone (group-by host).
    #[test]
    fn v3_group_by() {
        let q = query(TS, TS + 60, "sum");
        let d = d1();
        assert_eq!(secs(&run(&q, &d[..1])), int_dps(TS, &[(0, 40), (10, 50), (30, 70)]));
        assert_eq!(secs(&run(&q, &d[1..])), int_dps(TS, &[(10, 37), (20, 48)]));
    }

    // spec: query §8 V4 — the output window filter; T+20 still interpolates with T+30 outside it.
    #[test]
    fn v4_output_window() {
        let q = query(TS + 10, TS + 20, "sum");
        let out = run(&q, &d1());
        assert_eq!(out, vec![(1_356_998_410_000, OutValue::Int(87)), (1_356_998_420_000, OutValue::Int(108))]);
    }

    // spec: query §8 V5 — the docs' interpolation table (t0+30 is 30, not the docs' 25).
    #[test]
    fn v5_docs_interpolation() {
        let series = vec![ints(&[(10, 5), (30, 15), (50, 5)]), ints(&[(0, 10), (20, 20), (40, 10), (60, 20)])];
        let q = query(TS, TS + 60, "sum");
        assert_eq!(
            secs(&run(&q, &series)),
            int_dps(TS, &[(0, 10), (10, 20), (20, 30), (30, 30), (40, 20), (50, 20), (60, 20)])
        );
    }

    // spec: query §2.2, §8 V6 — integer LERP truncates; with floats the halves survive.
    #[test]
    fn v6_integer_lerp_truncation() {
        let a = [(30, 1), (60, 2), (90, 3)];
        let b = [(45, 300), (75, 299), (105, 298)];
        let q = query(TS, TS + 3600, "sum");
        assert_eq!(
            secs(&run(&q, &[ints(&a), ints(&b)])),
            int_dps(TS, &[(30, 1), (45, 301), (60, 302), (75, 301), (90, 302), (105, 298)])
        );
        let fa: Vec<(i64, f64)> = a.iter().map(|&(s, v)| (s, v as f64)).collect();
        let fb: Vec<(i64, f64)> = b.iter().map(|&(s, v)| (s, v as f64)).collect();
        assert_eq!(
            secs(&run(&q, &[floats(&fa), floats(&fb)])),
            dbl_dps(&[
                (TS + 30, 1.0),
                (TS + 45, 301.5),
                (TS + 60, 301.5),
                (TS + 75, 301.5),
                (TS + 90, 301.5),
                (TS + 105, 298.0)
            ])
        );
        let q = query(TS, TS + 3600, "zimsum");
        assert_eq!(
            secs(&run(&q, &[ints(&a), ints(&b)])),
            int_dps(TS, &[(30, 1), (45, 300), (60, 2), (75, 299), (90, 3), (105, 298)])
        );
        let q = query(TS, TS + 3600, "count");
        assert_eq!(
            secs(&run(&q, &[ints(&a), ints(&b)])),
            int_dps(TS, &[(30, 1), (45, 2), (60, 2), (75, 2), (90, 2), (105, 1)])
        );
    }

    // spec: query §2.4 — `runInterpolationSeconds`: 600 points alternating 301/302, first and last 1.
    #[test]
    fn run_interpolation_seconds() {
        let a: Vec<Point> = (0..300).map(|k| Point::int((1_356_998_430 + 30 * k) * S, k + 1)).collect();
        let b: Vec<Point> = (0..300).map(|k| Point::int((1_356_998_445 + 30 * k) * S, 300 - k)).collect();
        let q = query(TS, 1_357_041_600, "sum");
        let out = secs(&run(&q, &[a, b]));
        assert_eq!(out.len(), 600);
        assert_eq!(out[0], (1_356_998_430, OutValue::Int(1)));
        for k in 0..299 {
            assert_eq!(out[1 + 2 * k as usize], (1_356_998_445 + 30 * k, OutValue::Int(301)));
            assert_eq!(out[2 + 2 * k as usize], (1_356_998_460 + 30 * k, OutValue::Int(302)));
        }
        assert_eq!(out[599], (1_357_007_415, OutValue::Int(1)));
    }

    // spec: query §2.2 — series that haven't started or have ended are skipped, for ZIM/MAX/MIN/PREV too.
    #[test]
    fn no_interpolation_outside_a_series() {
        let series = vec![ints(&[(0, 1), (10, 2)]), ints(&[(20, 100), (30, 200)])];
        for name in ["sum", "zimsum", "pfsum", "mimmin", "mimmax", "count"] {
            let q = query(TS, TS + 60, name);
            let out = secs(&run(&q, &series));
            let want: Vec<i64> = match name {
                "count" => vec![1, 1, 1, 1],
                _ => vec![1, 2, 100, 200],
            };
            let want: Vec<(i64, i64)> = want.iter().enumerate().map(|(i, &v)| (10 * i as i64, v)).collect();
            assert_eq!(out, int_dps(TS, &want), "{name}");
        }
    }

    // spec: query §2.2 — MAX/MIN interpolation values on both paths.
    #[test]
    fn mim_interpolation_values() {
        let series = vec![ints(&[(0, 5), (20, 5)]), ints(&[(10, 9)])];
        let q = query(TS, TS + 60, "mimmin");
        assert_eq!(secs(&run(&q, &series)), int_dps(TS, &[(0, 5), (10, 9), (20, 5)]));
        let q = query(TS, TS + 60, "mimmax");
        assert_eq!(secs(&run(&q, &series)), int_dps(TS, &[(0, 5), (10, 9), (20, 5)]));
        let fseries = vec![floats(&[(0, 5.0), (20, 5.0)]), floats(&[(10, 9.0)])];
        let q = query(TS, TS + 60, "mimmin");
        assert_eq!(secs(&run(&q, &fseries)), dbl_dps(&[(TS, 5.0), (TS + 10, 9.0), (TS + 20, 5.0)]));
        // Only interpolated values with ZIM: the 0 counts for `first`.
        let q = query(TS, TS + 60, "first");
        assert_eq!(secs(&run(&q, &series)), int_dps(TS, &[(0, 5), (10, 0), (20, 5)]));
    }

    // spec: query §1.6 — `runMixedSingleTS`: 1.25, 1.5, ... 76 every 30 s, whole numbers written as integers
    // when even; avg of one series. An integer followed by a float prints as a double; only the last (76) is an
    // integer.
    #[test]
    fn run_mixed_single_ts() {
        let mut points = Vec::new();
        let mut i = 1.25f32;
        let mut ts = 1_356_998_400;
        while i <= 76.0 {
            ts += 30;
            if i % 2.0 == 0.0 {
                points.push(Point::int(ts * S, i as i64));
            } else {
                points.push(Point::float(ts * S, f64::from(i)));
            }
            i += 0.25;
        }
        let q = query(1_356_998_400, 1_357_041_600, "avg");
        let out = run(&q, &[points]);
        assert_eq!(out.len(), 300);
        let mut expected = 1.25;
        for (k, &(ts, v)) in out.iter().enumerate() {
            assert_eq!(ts, (1_356_998_430 + 30 * k as i64) * S);
            if k == 299 {
                assert_eq!(v, OutValue::Int(76));
            } else {
                assert_eq!(v, OutValue::Double(expected), "{k}");
            }
            expected += 0.25;
        }
        // The value 2 (an integer followed by 2.25) is printed as `2.0`.
        assert_eq!(out[3], (1_356_998_520_000, OutValue::Double(2.0)));
    }

    // spec: query §1.6 — a float that is only the *next* point of a series that hasn't started yet still makes
    // the point a double (2.4 checks every current and next value of the group).
    #[test]
    fn typing_looks_at_next_points_of_every_series() {
        let series = vec![ints(&[(0, 1), (10, 2)]), floats(&[(20, 3.0)])];
        let q = query(TS, TS + 60, "sum");
        assert_eq!(
            secs(&run(&q, &series)),
            vec![(TS, OutValue::Double(1.0)), (TS + 10, OutValue::Double(2.0)), (TS + 20, OutValue::Double(3.0))]
        );
        // Once a float series has ended it no longer matters.
        let series = vec![floats(&[(0, 1.5)]), ints(&[(0, 1), (10, 2)])];
        assert_eq!(secs(&run(&q, &series)), vec![(TS, OutValue::Double(2.5)), (TS + 10, OutValue::Int(2))]);
    }

    fn ds(spec_ms: i64, f: &str, fill: FillPolicy) -> Option<Downsampler> {
        Some(Downsampler::fixed(spec_ms, agg(f), fill))
    }

    // spec: query §8 V7 — downsample (30s-sum) then sum.
    #[test]
    fn v7_downsample_then_sum() {
        let times = [0, 10, 20, 30, 40, 50, 60];
        let a: Vec<(i64, i64)> = times.iter().copied().zip([5, 5, 10, 15, 20, 5, 1]).collect();
        let b: Vec<(i64, i64)> = times.iter().copied().zip([10, 5, 20, 15, 10, 0, 5]).collect();
        let q = Query { downsample: ds(30_000, "sum", FillPolicy::None), ..query(TS, TS + 60, "sum") };
        assert_eq!(secs(&run(&q, &[ints(&a), ints(&b)])), dbl_dps(&[(TS, 55.0), (TS + 30, 65.0), (TS + 60, 6.0)]));
    }

    fn v8_series() -> Vec<Vec<Point>> {
        vec![ints(&[(30, 15), (50, 5)]), ints(&[(0, 10), (20, 20), (60, 20)])]
    }

    // spec: query §3.4, §8 V8 — fill policies nan / null / zero and no fill.
    #[test]
    fn v8_fill_policies() {
        let q = Query { downsample: ds(10_000, "sum", FillPolicy::NaN), ..query(TS, TS + 60, "sum") };
        let gap = OutValue::NaN;
        let d = |v: f64| OutValue::Double(v);
        let with_gaps = |gap: OutValue| {
            vec![
                (TS, d(10.0)),
                (TS + 10, gap),
                (TS + 20, d(20.0)),
                (TS + 30, d(15.0)),
                (TS + 40, gap),
                (TS + 50, d(5.0)),
                (TS + 60, d(20.0)),
            ]
        };
        assert_eq!(secs(&run(&q, &v8_series())), with_gaps(gap));
        let q = Query { downsample: ds(10_000, "sum", FillPolicy::Null), ..q };
        assert!(q.null_for_nan());
        assert_eq!(secs(&run(&q, &v8_series())), with_gaps(OutValue::Null));
        let q = Query { downsample: ds(10_000, "sum", FillPolicy::Zero), ..q };
        assert_eq!(secs(&run(&q, &v8_series())), with_gaps(d(0.0)));
        let q = Query { downsample: ds(10_000, "sum", FillPolicy::None), ..q };
        assert_eq!(
            secs(&run(&q, &v8_series())),
            dbl_dps(&[(TS, 10.0), (TS + 20, 20.0), (TS + 30, 35.0), (TS + 50, 25.0), (TS + 60, 20.0)])
        );
    }

    #[test]
    fn fill_nan_skipped_by_aggregators() {
        // avg/min/max/count over filled buckets skip NaN; zeros are real values.
        let series = v8_series();
        let expect = [
            ("avg", FillPolicy::NaN, [Some(10.0), None, Some(20.0), Some(15.0), None, Some(5.0), Some(20.0)]),
            ("count", FillPolicy::NaN, [Some(1.0), Some(0.0), Some(1.0), Some(1.0), Some(0.0), Some(1.0), Some(1.0)]),
            ("avg", FillPolicy::Zero, [Some(5.0), Some(0.0), Some(10.0), Some(7.5), Some(0.0), Some(2.5), Some(10.0)]),
            ("min", FillPolicy::Zero, [Some(0.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0)]),
        ];
        for (name, fill, want) in expect {
            let q = Query { downsample: ds(10_000, "sum", fill), ..query(TS, TS + 60, name) };
            let got = secs(&run(&q, &series));
            let want: Vec<(i64, OutValue)> = want
                .iter()
                .enumerate()
                .map(|(i, v)| (TS + 10 * i as i64, v.map_or(OutValue::NaN, OutValue::Double)))
                .collect();
            assert_eq!(got, want, "{name} {fill:?}");
        }
    }

    // spec: query §3.4 — TestTsdbQueryDownsample's `run*LongSingleTSDownsampleWNulls`: two series with missing
    // points, 30s buckets with fill; 100 buckets of data, then the fill value up to the end.
    #[test]
    fn fill_with_missing_data_like_2_4() {
        let web01: Vec<Point> = (0..300).filter(|i| i % 3 != 0).map(|i| Point::int(T + 10 * S * i, i + 1)).collect();
        let web02: Vec<Point> = (0..300)
            .map(|k| (k, 300 - k))
            .filter(|(_, v)| v % 2 != 0)
            .map(|(k, v)| Point::int(T + 10 * S * k, v))
            .collect();
        let series = [web01, web02];
        type Case = (&'static str, &'static str, FillPolicy, fn(usize) -> f64);
        let cases: [Case; 3] = [
            ("sum", "sum", FillPolicy::NaN, |k| if k % 2 == 0 { 304.0 + 6.0 * (k / 2) as f64 } else { 603.0 }),
            ("sum", "avg", FillPolicy::NaN, |_| 301.5),
            ("avg", "avg", FillPolicy::Zero, |_| 150.75),
        ];
        for (aggregator, function, fill, want) in cases {
            let q = Query { downsample: ds(30_000, function, fill), ..query(TS, 1_357_041_600, aggregator) };
            let out = run(&q, &series);
            assert_eq!(out.len(), 1441, "{aggregator}/{function}");
            for (k, &(ts, v)) in out.iter().enumerate() {
                assert_eq!(ts, T + 30 * S * k as i64);
                let want = if k < 100 {
                    OutValue::Double(want(k))
                } else if fill == FillPolicy::Zero {
                    OutValue::Double(0.0)
                } else {
                    OutValue::NaN
                };
                assert_eq!(v, want, "{aggregator}/{function} bucket {k}");
            }
        }
    }

    fn web01(values: &[i64]) -> Vec<Vec<Point>> {
        let pts: Vec<(i64, i64)> = values.iter().enumerate().map(|(i, &v)| (30 * (i as i64 + 1), v)).collect();
        vec![ints(&pts)]
    }

    fn rate_query(config: RateConfig) -> Query {
        Query { rate: Some(config), ..query(TS, 1_357_041_600, "sum") }
    }

    // spec: query §4, §8 V9 — rates and counters through the pipeline.
    #[test]
    fn v9_rate_and_counters() {
        let counter = RateConfig { counter: true, counter_max: 100, ..RateConfig::default() };
        assert_eq!(secs(&run(&rate_query(counter), &web01(&[45, 75, 5]))), dbl_dps(&[(TS + 60, 1.0), (TS + 90, 1.0)]));
        let reset = RateConfig { counter: true, counter_max: 10_000, reset_value: 35, drop_resets: false };
        assert_eq!(secs(&run(&rate_query(reset), &web01(&[45, 75, 25]))), dbl_dps(&[(TS + 60, 1.0), (TS + 90, 0.0)]));
        let drop = RateConfig { drop_resets: true, ..reset };
        assert_eq!(
            secs(&run(&rate_query(drop), &web01(&[45, 75, 25, 55]))),
            dbl_dps(&[(TS + 60, 1.0), (TS + 120, 1.0)])
        );
        assert_eq!(
            secs(&run(&rate_query(RateConfig::default()), &web01(&[45, 75, 25]))),
            dbl_dps(&[(TS + 60, 1.0), (TS + 90, -1.6666666666666667)])
        );
        // Rate uses in-hour points before `start`.
        let q = Query { start_ms: 1_356_998_500 * S, ..rate_query(RateConfig::default()) };
        let out = secs(&run(&q, &web01(&[1, 2, 3, 4, 5])));
        assert_eq!(out, dbl_dps(&[(TS + 120, 0.03333333333333333), (TS + 150, 0.03333333333333333)]));
    }

    // spec: query §4.3 — with rate there is no interpolation: a series contributes its latest rate; before its
    // first real rate it contributes nothing (§10: the discarded first rate is not used).
    #[test]
    fn rate_aggregation_uses_previous_rates() {
        let a = ints(&[(0, 0), (10, 10), (30, 30)]); // rates 1.0 @10, 1.0 @30
        let b = ints(&[(5, 0), (20, 30)]); // rate 2.0 @20
        let q = Query { rate: Some(RateConfig::default()), ..query(TS, TS + 60, "sum") };
        assert_eq!(secs(&run(&q, &[a, b])), dbl_dps(&[(TS + 10, 1.0), (TS + 20, 3.0), (TS + 30, 1.0)]));
        // zimsum with rate also takes the previous rate (no zero).
        let a = ints(&[(0, 0), (10, 10), (30, 30)]);
        let b = ints(&[(5, 0), (20, 30), (40, 50)]);
        let q = Query { rate: Some(RateConfig::default()), ..query(TS, TS + 60, "zimsum") };
        assert_eq!(secs(&run(&q, &[a, b])), dbl_dps(&[(TS + 10, 1.0), (TS + 20, 3.0), (TS + 30, 3.0), (TS + 40, 1.0)]));
    }

    // spec: query §1.5 step 5, §8 V10 — downsample (1m-avg) then rate.
    #[test]
    fn v10_downsample_then_rate() {
        let pts: Vec<(i64, i64)> = (1..=300).map(|i| (30 * i, i)).collect();
        let q = Query {
            downsample: ds(60_000, "avg", FillPolicy::None),
            rate: Some(RateConfig::default()),
            ..query(TS, 1_357_041_600, "sum")
        };
        let out = secs(&run(&q, &[ints(&pts)]));
        assert_eq!(out.len(), 150);
        assert_eq!(out[0], (1_356_998_460, OutValue::Double(0.025)));
        for (k, &(ts, v)) in out.iter().enumerate().take(149).skip(1) {
            assert_eq!(ts, 1_356_998_460 + 60 * k as i64);
            assert_eq!(v, OutValue::Double(0.03333333333333333));
        }
        assert_eq!(out[149], (1_357_007_400, OutValue::Double(0.025)));
    }

    // spec: query §3.5 — `0all` + rate: the single bucket has no predecessor.
    #[test]
    fn all_then_rate_is_empty() {
        let pts: Vec<(i64, i64)> = (1..=300).map(|i| (30 * i, i)).collect();
        let q = Query {
            downsample: Some(Downsampler::all(agg("sum"), FillPolicy::None)),
            rate: Some(RateConfig::default()),
            ..query(TS, 1_357_041_600, "sum")
        };
        assert_eq!(run(&q, &[ints(&pts)]), vec![]);
    }

    // spec: query §8 V11 — `0all-sum`.
    #[test]
    fn v11_all_downsampling() {
        let pts: Vec<(i64, i64)> = (1..=300).map(|i| (30 * i, i)).collect();
        let all = Some(Downsampler::all(agg("sum"), FillPolicy::None));
        let q = Query { downsample: all.clone(), ..query(1_356_998_500, 1_356_998_600, "sum") };
        let (scan_start, scan_end) = q.scan_window();
        let inside: Vec<Point> = ints(&pts).into_iter().filter(|p| p.ts >= scan_start && p.ts < scan_end).collect();
        assert_eq!(secs(&run(&q, &[inside])), dbl_dps(&[(1_356_998_500, 15.0)]));
        let q = Query { downsample: all, ..query(TS, 1_357_041_600, "sum") };
        assert_eq!(secs(&run(&q, &[ints(&pts)])), dbl_dps(&[(TS, 45150.0)]));
    }

    // spec: query §3.2, §3.3, §8 V12 — calendar `1dc-sum` in America/Denver, and the fixed 1000s-avg case.
    #[test]
    fn v12_calendar_and_fixed() {
        let pts = ints(&[(5, 1), (15, 2), (25, 4), (35, 8), (45, 16), (55, 32)]);
        let cal = Calendar::new(1, CalendarUnit::Day, time_zone("America/Denver").unwrap());
        let ds1 = Some(Downsampler::calendar(cal, agg("sum"), FillPolicy::None));
        let q = Query { downsample: ds1.clone(), ..query(1_356_937_200, 1_356_998_460, "sum") };
        assert_eq!(secs(&run(&q, std::slice::from_ref(&pts))), dbl_dps(&[(1_356_937_200, 63.0)]));
        let q = Query { downsample: ds1, ..query(TS, 1_356_998_460, "sum") };
        assert_eq!(run(&q, &[pts]), vec![]);

        let pts = ints(&[(0, 40), (2000, 50), (3600, 40), (3605, 50), (7200, 40), (9200, 50)]);
        let q = Query { downsample: ds(1_000_000, "avg", FillPolicy::None), ..query(TS - 400, TS + 8600, "sum") };
        assert_eq!(
            secs(&run(&q, &[pts])),
            dbl_dps(&[(TS - 400, 40.0), (TS + 1600, 50.0), (TS + 3600, 45.0), (TS + 6600, 40.0), (TS + 8600, 50.0)])
        );
    }

    // spec: query §3.2 — calendar with a fill policy, across a DST change.
    #[test]
    fn calendar_fill_in_a_timezone() {
        // 2013-03-09..11 in Denver, 1dc-sum-null; data only on the 9th and 11th.
        let mar9 = 1_362_812_400; // 00:00 MST
        let day = 86_400;
        let cal = Calendar::new(1, CalendarUnit::Day, time_zone("America/Denver").unwrap());
        let q = Query {
            start_ms: mar9 * S,
            end_ms: (mar9 + 3 * day - 3600 - 1) * S,
            aggregator: agg("sum"),
            downsample: Some(Downsampler::calendar(cal, agg("sum"), FillPolicy::Null)),
            rate: None,
        };
        let series = vec![vec![Point::int((mar9 + 3600) * S, 1), Point::int((mar9 + 2 * day) * S, 2)]];
        assert_eq!(
            secs(&run(&q, &series)),
            vec![
                (mar9, OutValue::Double(1.0)),
                (mar9 + day, OutValue::Null),
                (mar9 + 2 * day - 3600, OutValue::Double(2.0))
            ]
        );
    }

    // spec: query §8 V13 — aggregation across two series at one instant.
    #[test]
    fn v13_sum_at_one_instant() {
        let q = query(TS, TS + 60, "sum");
        assert_eq!(secs(&run(&q, &[ints(&[(0, 1)]), ints(&[(0, 2)])])), int_dps(TS, &[(0, 3)]));
    }

    // spec: query §1.5 step 2 — scan window examples.
    #[test]
    fn scan_windows() {
        let h = 3_600_000;
        // No downsampling: hour below start; next hour strictly after end + 1 s.
        assert_eq!(scan_window(T + 1234, T + 60_000, None), (T, T + h));
        assert_eq!(scan_window(T, T + h, None), (T, T + 2 * h));
        assert_eq!(scan_window(T, T + h - 1000, None), (T, T + 2 * h));
        assert_eq!(scan_window(T, T + h - 2000, None), (T, T + h));
        // Downsampling: end aligned to the following interval, then the hour.
        let m10 = Downsampler::fixed(600_000, agg("avg"), FillPolicy::None);
        assert_eq!(scan_window(T + 100_000, T + 600_000, Some(&m10)), (T, T + h));
        assert_eq!(scan_window(T, T + h - 2000, Some(&m10)), (T, T + h));
        assert_eq!(scan_window(T, T + h - 1000, Some(&m10)), (T, T + 2 * h));
        assert_eq!(scan_window(T, T + h, Some(&m10)), (T, T + 2 * h));
        // 1d: start aligned down to the UTC day first.
        let d1 = Downsampler::fixed(86_400_000, agg("avg"), FillPolicy::None);
        assert_eq!(scan_window(T + 5 * h + 1, T + 6 * h, Some(&d1)), (T, T + 24 * h));
        // 45m: 1492610400 -> 1492608600 -> hour 1492606800.
        let m45 = Downsampler::fixed(2_700_000, agg("avg"), FillPolicy::Zero);
        assert_eq!(
            scan_window(1_492_610_400_000, 1_492_691_642_000, Some(&m45)),
            (1_492_606_800_000, 1_492_693_200_000)
        );
        // `all` has no interval: like no downsampling.
        let all = Downsampler::all(agg("sum"), FillPolicy::None);
        assert_eq!(scan_window(T + 100_000, T + 200_000, Some(&all)), (T, T + h));
        // Calendar downsamplers align the scan to their fixed length.
        let cal = Calendar::new(1, CalendarUnit::Day, time_zone("America/Denver").unwrap());
        let dc = Downsampler::calendar(cal, agg("sum"), FillPolicy::None);
        assert_eq!(scan_window(1_356_937_200_000, 1_356_998_460_000, Some(&dc)), (1_356_912_000_000, T + 24 * h));
        // TestTsdbQueryDownsample's scan bounds: fully aligned (1m), unaligned (15m), weirdly (1d).
        let s = |secs: i64| secs * 1000;
        let m1 = Downsampler::fixed(60_000, agg("sum"), FillPolicy::None);
        assert_eq!(scan_window(s(1356998400), s(1357041600), Some(&m1)), (s(1356998400), s(1357045200)));
        let now = 1427415547;
        let m15 = Downsampler::fixed(900_000, agg("sum"), FillPolicy::None);
        assert_eq!(scan_window(s(now - 43200), s(now), Some(&m15)), (s(1427371200), s(1427418000)));
        assert_eq!(scan_window(s(now - 43200), s(now), Some(&d1)), (s(1427328000), s(1427500800)));
        // Near the epoch: never negative.
        assert_eq!(scan_window(0, 1000, None), (0, h));
        assert!(
            in_output_window(T, T, T + 1) && in_output_window(T + 1, T, T + 1) && !in_output_window(T + 2, T, T + 1)
        );
    }

    #[test]
    fn infinity_is_an_error_inside_the_window_only() {
        let big = vec![floats(&[(0, f64::MAX), (10, 1.0)]), floats(&[(0, f64::MAX)])];
        let q = query(TS, TS + 60, "sum");
        let err = run_group(&q, big.clone()).unwrap_err();
        assert_eq!(err, Infinity { timestamp_ms: T, value: f64::INFINITY });
        let q = query(TS + 5, TS + 60, "sum");
        assert_eq!(secs(&run_group(&q, big).unwrap()), dbl_dps(&[(TS + 10, 1.0)]));
    }

    #[test]
    fn none_aggregator_passes_values_through() {
        let q = query(TS, TS + 60, "none");
        assert_eq!(secs(&run(&q, &[ints(&[(0, 40), (10, 50)])])), int_dps(TS, &[(0, 40), (10, 50)]));
        let q = Query { downsample: ds(20_000, "sum", FillPolicy::None), ..q };
        assert_eq!(secs(&run(&q, &[ints(&[(0, 40), (10, 50)])])), dbl_dps(&[(TS, 90.0)]));
    }

    #[test]
    fn inputs_outside_the_scan_window_and_duplicates_are_ignored() {
        let q = query(TS, TS + 60, "sum");
        let series = vec![vec![
            Point::int(T - 1, 1000),
            Point::int(T, 1),
            Point::int(T, 99),
            Point::int(T + 10 * S, 2),
            Point::int(T + 5 * S, 77),
            Point::int(T + 3600 * S, 1000),
        ]];
        assert_eq!(secs(&run(&q, &series)), int_dps(TS, &[(0, 1), (10, 2)]));
        assert_eq!(run(&q, &Vec::<Vec<Point>>::new()), vec![]);
        assert_eq!(run(&q, &[vec![]]), vec![]);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<i64>().prop_map(Value::Int),
                prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(0i64), -5i64..5].prop_map(Value::Int),
                any::<f64>().prop_map(Value::Double),
                prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(f64::MAX), Just(-0.0)]
                    .prop_map(Value::Double),
            ]
        }

        /// Floats (downsampled values always are), now and then an integer.
        fn mostly_floats() -> impl Strategy<Value = Value> {
            prop_oneof![
                60 => (-1e6f64..1e6).prop_map(Value::Double),
                6 => Just(Value::Double(f64::NAN)),
                3 => value(),
            ]
        }

        fn series() -> impl Strategy<Value = Vec<Point>> {
            // Random, possibly duplicated, possibly unordered timestamps around and outside a 2-hour window.
            prop::collection::vec(
                (prop_oneof![T - 7_200_000..T + 14_400_000, any::<i64>(), Just(T), Just(T + 1)], value()),
                0..40,
            )
            .prop_map(|mut pts| {
                // Mostly ordered (as the store gives them), with duplicates left in.
                pts.sort_by_key(|p| p.0);
                pts.into_iter().map(|(ts, value)| Point { ts, value }).collect()
            })
        }

        fn downsampler() -> impl Strategy<Value = Option<Downsampler>> {
            let fill = prop_oneof![
                Just(FillPolicy::None),
                Just(FillPolicy::NaN),
                Just(FillPolicy::Null),
                Just(FillPolicy::Zero)
            ];
            let function = prop::sample::select(crate::query::aggregators::AGGREGATOR_NAMES.to_vec())
                .prop_map(|n| Aggregator::from_name(n).unwrap());
            let unit = prop::sample::select(vec![
                CalendarUnit::Millisecond,
                CalendarUnit::Second,
                CalendarUnit::Minute,
                CalendarUnit::Hour,
                CalendarUnit::Day,
                CalendarUnit::Week,
                CalendarUnit::Month,
                CalendarUnit::Year,
            ]);
            let tz = prop::sample::select(vec!["UTC", "America/Denver", "Asia/Kolkata", "Australia/Lord_Howe"]);
            prop_oneof![
                Just(None),
                (prop_oneof![1i64..5000, 5000i64..10_000_000, Just(2_700_000i64)], function.clone(), fill.clone())
                    .prop_map(|(i, f, fill)| {
                        // A filled window has (scan length / interval) buckets per series: keep it small.
                        let i = if fill == FillPolicy::None { i } else { i.max(10_000) };
                        Some(Downsampler::fixed(i, f, fill))
                    }),
                (function.clone(), fill.clone()).prop_map(|(f, fill)| Some(Downsampler::all(f, fill))),
                (prop_oneof![Just(1i32), 1i32..40, Just(1000)], unit, tz, function, fill).prop_filter_map(
                    "cheap calendar",
                    |(n, unit, tz, f, fill)| {
                        // Keep fill over tiny calendar units out: it walks every bucket of the window in jiff.
                        let cal = Calendar::new(n, unit, time_zone(tz).unwrap());
                        if fill != FillPolicy::None && cal.fixed_interval_ms() < 60_000 {
                            return None;
                        }
                        Some(Some(Downsampler::calendar(cal, f, fill)))
                    }
                ),
            ]
        }

        fn rate() -> impl Strategy<Value = Option<RateConfig>> {
            prop_oneof![
                Just(None),
                (any::<bool>(), any::<i64>(), any::<i64>(), any::<bool>()).prop_map(
                    |(counter, counter_max, reset_value, drop_resets)| {
                        Some(RateConfig { counter, counter_max, reset_value, drop_resets })
                    }
                ),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

            // Downsample + rate + aggregate never panic on arbitrary data, and the output is ascending and inside
            // the query window.
            #[test]
            fn never_panics(
                group in prop::collection::vec(series(), 0..5),
                aggregator in prop::sample::select(crate::query::aggregators::AGGREGATOR_NAMES.to_vec()),
                downsample in downsampler(),
                rate in rate(),
                start_off in 0i64..3_600_000,
                len in 1i64..7_200_000,
            ) {
                let start_ms = T + start_off;
                let end_ms = start_ms + len;
                let q = Query { start_ms, end_ms, aggregator: Aggregator::from_name(aggregator).unwrap(), downsample, rate };
                let mut last = i64::MIN;
                for item in q.run(group) {
                    let Ok((ts, v)) = item else { break };
                    prop_assert!(ts > last);
                    prop_assert!(in_output_window(ts, start_ms, end_ms));
                    if let OutValue::Double(d) = v {
                        prop_assert!(d.is_finite());
                    }
                    last = ts;
                }
            }

            // A rollup answer (one point per bucket, at its start) staged without bucketing gives what staging
            // gives, whatever the function, fill, rate and values (unaligned points included: they fall back).
            #[test]
            fn bucketed_staging_equals_staging(
                slots in prop::collection::vec((-30i64..150, mostly_floats(), 0u8..200), 0..60),
                interval in prop_oneof![Just(60_000i64), Just(600_000), 1i64..100_000],
                function in prop::sample::select(crate::query::aggregators::AGGREGATOR_NAMES.to_vec()),
                fill in prop_oneof![Just(FillPolicy::None), Just(FillPolicy::NaN)],
                rate in rate(),
                start_off in 0i64..3_600_000,
                len in 1i64..7_200_000,
            ) {
                let function = Aggregator::from_name(function).unwrap();
                prop_assume!(function != Aggregator::None);
                let mut points: Vec<Point> = slots
                    .into_iter()
                    .map(|(i, value, odd)| Point { ts: T + i * interval + if odd == 0 { 1 } else { 0 }, value })
                    .collect();
                points.sort_by_key(|p| p.ts);
                let start_ms = T + start_off;
                let ds = Downsampler::fixed(interval, function, fill);
                let q = Query { start_ms, end_ms: start_ms + len, aggregator: Aggregator::Sum, downsample: Some(ds), rate };
                prop_assert_eq!(format!("{:?}", q.stage_bucketed(points.clone())), format!("{:?}", q.stage(points)));
            }

            // Series with values at the same times aggregate as `GroupIter` aggregates them.
            #[test]
            fn aligned_groups_equal_group_iter(
                times in prop::collection::btree_set(T - 3_600_000..T + 10_800_000, 0..30),
                values in prop::collection::vec(prop::collection::vec(mostly_floats(), 30), 1..6),
                aggregator in prop_oneof![
                    prop::sample::select(crate::query::aggregators::AGGREGATOR_NAMES.to_vec()),
                    prop::sample::select(vec!["sum", "zimsum", "pfsum"]),
                ],
                fill in prop_oneof![Just(FillPolicy::None), Just(FillPolicy::Null)],
                start_off in 0i64..3_600_000,
                len in 1i64..7_200_000,
                shorter in any::<bool>(),
            ) {
                let mut staged: Vec<Vec<Point>> = values
                    .iter()
                    .map(|vs| times.iter().zip(vs).map(|(&ts, &value)| Point { ts, value }).collect())
                    .collect();
                if shorter && staged.len() > 1 {
                    staged[1].pop();
                }
                let start_ms = T + start_off;
                let ds = Downsampler::fixed(60_000, Aggregator::Sum, fill);
                let aggregator = Aggregator::from_name(aggregator).unwrap();
                let q = Query { start_ms, end_ms: start_ms + len, aggregator, downsample: Some(ds), rate: None };
                let general: Vec<Result<OutPoint, Infinity>> = q.run_staged(staged.clone()).collect();
                match q.run_aligned(&staged) {
                    Some(aligned) => prop_assert_eq!(format!("{aligned:?}"), format!("{general:?}")),
                    None => prop_assert!(
                        (shorter && staged.len() > 1 && !times.is_empty())
                            || staged.iter().flatten().any(|p| p.value.is_integer())
                    ),
                }
            }

            // spec: query §2.2 — series staged onto a grid (rollup reads) aggregate as `GroupIter` aggregates their
            // points: gaps interpolated, series that have not started or have ended left out, NaN skipped, the
            // output window and NaN printing applied; other aggregators are left to it.
            #[test]
            fn grid_groups_equal_group_iter(
                cells in prop::collection::vec(
                    prop_oneof![
                        // Series with gaps, and (the common case) series with every bucket from some time on.
                        prop::collection::vec(prop_oneof![
                            3 => Just(None),
                            10 => (-1e6f64..1e6).prop_map(Some),
                            1 => prop_oneof![Just(f64::NAN), Just(-0.0), Just(f64::MAX), Just(f64::INFINITY)]
                                .prop_map(Some),
                        ], 0..150),
                        (0usize..70, prop::collection::vec(prop_oneof![
                            30 => (-1e6f64..1e6).prop_map(Some),
                            1 => Just(Some(f64::NAN)),
                        ], 0..192)).prop_map(|(skip, mut v)| {
                            v.iter_mut().take(skip).for_each(|c| *c = None);
                            v
                        }),
                    ],
                    0..6),
                aggregator in prop_oneof![
                    prop::sample::select(vec!["sum", "zimsum", "pfsum"]),
                    prop::sample::select(crate::query::aggregators::AGGREGATOR_NAMES.to_vec()),
                ],
                step in prop_oneof![Just(60_000i64), Just(3_600_000), 1i64..100_000],
                fill in prop_oneof![Just(FillPolicy::None), Just(FillPolicy::Null)],
                start_off in -3_600_000i64..3_600_000,
                len in 1i64..10_000_000,
            ) {
                let first_ms = T;
                let rows: Vec<(Vec<f64>, Vec<u64>)> = cells
                    .iter()
                    .map(|c| {
                        let mut present = vec![0u64; 3];
                        let mut values = vec![0.0; 192];
                        for (i, v) in c.iter().enumerate() {
                            if let Some(v) = v {
                                present[i / 64] |= 1 << (i % 64);
                                values[i] = *v;
                            }
                        }
                        (values, present)
                    })
                    .collect();
                let grid: Vec<GridRow<'_>> =
                    rows.iter().map(|(values, present)| GridRow { values, present }).collect();
                let staged: Vec<Vec<Point>> = grid.iter().map(|&r| grid_points(first_ms, step, r)).collect();
                let start_ms = T + start_off;
                let aggregator = Aggregator::from_name(aggregator).unwrap();
                let ds = Downsampler::fixed(step, Aggregator::Sum, fill);
                let q = Query { start_ms, end_ms: start_ms + len, aggregator, downsample: Some(ds), rate: None };
                let general: Vec<Result<OutPoint, Infinity>> = q.run_staged(staged).collect();
                // Added on one thread and in two halves side by side alike.
                let split = q.run_grid_from(first_ms, step, &grid, 0);
                prop_assert_eq!(format!("{split:?}"), format!("{:?}", q.run_grid(first_ms, step, &grid)));
                match q.run_grid(first_ms, step, &grid) {
                    Some(gridded) => prop_assert_eq!(format!("{gridded:?}"), format!("{general:?}")),
                    None => prop_assert!(!matches!(aggregator, Aggregator::Sum | Aggregator::Zimsum | Aggregator::Pfsum)),
                }
            }

            // Extreme query windows don't overflow.
            #[test]
            fn scan_window_never_panics(start in any::<i64>(), end in any::<i64>(), interval in any::<i64>()) {
                let ds = Downsampler::fixed(interval, Aggregator::Sum, FillPolicy::None);
                let (s, e) = scan_window(start, end, Some(&ds));
                prop_assert!(s >= 0 && e >= 0);
                let (s, e) = scan_window(start, end, None);
                prop_assert!(s >= 0 && e >= 0);
            }
        }
    }
}
