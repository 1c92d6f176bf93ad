//! Per-series downsampling: fixed epoch-aligned buckets, calendar buckets, `all`, and fill policies
//! (spec: query §3).
//!
//! A bucket's value is the downsample function's double path over the raw values in it, so it is always a
//! double. Buckets are positioned as 2.4 positions them after seeking to the scan start: the first bucket starts
//! at the first boundary `>= scanStart` (the partial leading bucket is skipped, §3.3).

use std::iter::Peekable;

use jiff::Zoned;

use super::aggregators::Aggregator;
use super::calendar::Calendar;
use super::series::{Point, Value};

/// What a downsampler emits for a bucket without data (spec: query §3.4): the request's own type. `scalar`
/// carries no value in a downsample spec (2.4 fails when it runs); the daemon refuses it before a downsampler
/// is built.
pub use rtsd_protocol::query::FillPolicy;

/// The value an empty bucket gets (`zero`: 0.0; `nan`, `null`: NaN).
fn fill_value(fill: FillPolicy) -> f64 {
    match fill {
        FillPolicy::Zero => 0.0,
        _ => f64::NAN,
    }
}

/// A downsampling specification, engine side (the daemon converts a parsed `<interval>[c]-<fn>[-<fill>]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Downsampler {
    /// The interval's fixed length in ms: the bucket width for fixed buckets, and what the scan window aligns
    /// to (also for calendar buckets: `1dc` → 86 400 000, `1nc` → 30 days). 0 for `all`.
    pub interval_ms: i64,
    /// Calendar buckets (`c` suffix, or any downsampler under top-level `useCalendar`).
    pub calendar: Option<Calendar>,
    /// `0all-<fn>`: one bucket per series over `[query start, query end)`, stamped with the query start.
    pub all: bool,
    /// The downsample function (any aggregator but `none`; its double path is used).
    pub function: Aggregator,
    pub fill: FillPolicy,
}

impl Downsampler {
    /// Fixed, epoch-aligned buckets of `interval_ms` (at least 1).
    pub fn fixed(interval_ms: i64, function: Aggregator, fill: FillPolicy) -> Downsampler {
        Downsampler { interval_ms: interval_ms.max(1), calendar: None, all: false, function, fill }
    }

    /// `0all-<fn>[-<fill>]`.
    pub fn all(function: Aggregator, fill: FillPolicy) -> Downsampler {
        Downsampler { interval_ms: 0, calendar: None, all: true, function, fill }
    }

    /// Calendar buckets; the fixed interval used for the scan window is `count` × the unit's fixed length.
    pub fn calendar(calendar: Calendar, function: Aggregator, fill: FillPolicy) -> Downsampler {
        Downsampler {
            interval_ms: calendar.fixed_interval_ms().max(1),
            calendar: Some(calendar),
            all: false,
            function,
            fill,
        }
    }

    /// The timestamps and values one series is downsampled to, given its raw points (time-ordered, inside the
    /// scan window `[scan_start, scan_end)`), the scan window and the query's `[start, end]`.
    pub(crate) fn apply<'a, I>(&'a self, src: I, window: &Window) -> Box<dyn Iterator<Item = Point> + 'a>
    where
        I: Iterator<Item = Point> + 'a,
    {
        if self.all {
            return Box::new(AllBucket {
                src,
                function: self.function,
                start: window.start_ms,
                end: window.end_ms,
                done: false,
                values: Vec::new(),
            });
        }
        let interval = self.interval_ms.max(1);
        match (&self.calendar, self.fill) {
            (None, FillPolicy::None) => Box::new(FixedBuckets::new(src, interval, self.function, window.scan_start_ms)),
            (None, fill) => {
                let data = FixedBuckets::new(src, interval, self.function, window.scan_start_ms).peekable();
                let first = align_up(window.scan_start_ms, interval);
                Box::new(Filling {
                    data,
                    expected: Expected::Fixed { next: first, interval },
                    end_ms: align(window.scan_end_ms, interval),
                    fill: fill_value(fill),
                })
            }
            (Some(cal), FillPolicy::None) => {
                Box::new(CalendarBuckets::new(src, cal, self.function, window.scan_start_ms))
            }
            (Some(cal), fill) => {
                let data = CalendarBuckets::new(src, cal, self.function, window.scan_start_ms).peekable();
                let expected = calendar_fill_range(cal, window.scan_start_ms, window.scan_end_ms);
                match expected {
                    Some((first, end_ms)) => Box::new(Filling {
                        data,
                        expected: Expected::Calendar { next: Some(first), cal },
                        end_ms,
                        fill: fill_value(fill),
                    }),
                    None => Box::new(std::iter::empty()),
                }
            }
        }
    }
}

/// The query's time range and its scan window, all in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Query start (inclusive).
    pub start_ms: i64,
    /// Query end (inclusive for output; exclusive for `all` buckets).
    pub end_ms: i64,
    /// First instant scanned (inclusive).
    pub scan_start_ms: i64,
    /// End of the scan (exclusive).
    pub scan_end_ms: i64,
}

/// `ts - (ts mod interval)` on the epoch (Euclidean, so negative times align downwards too).
pub(crate) fn align(ts: i64, interval: i64) -> i64 {
    ts - ts.rem_euclid(interval)
}

/// The first multiple of `interval` that is `>= ts`.
pub(crate) fn align_up(ts: i64, interval: i64) -> i64 {
    let down = align(ts, interval);
    if down == ts {
        ts
    } else {
        down.saturating_add(interval)
    }
}

/// Fixed buckets without fill: only non-empty buckets.
struct FixedBuckets<I: Iterator<Item = Point>> {
    src: Peekable<I>,
    interval: i64,
    function: Aggregator,
    seek: i64,
    seeked: bool,
    values: Vec<f64>,
}

impl<I: Iterator<Item = Point>> FixedBuckets<I> {
    fn new(src: I, interval: i64, function: Aggregator, scan_start: i64) -> Self {
        FixedBuckets {
            src: src.peekable(),
            interval,
            function,
            seek: align_up(scan_start, interval),
            seeked: false,
            values: Vec::new(),
        }
    }
}

impl<I: Iterator<Item = Point>> Iterator for FixedBuckets<I> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        if !self.seeked {
            self.seeked = true;
            let seek = self.seek;
            while self.src.next_if(|p| p.ts < seek).is_some() {}
        }
        let first = self.src.next()?;
        let start = align(first.ts, self.interval);
        let end = start.saturating_add(self.interval);
        self.values.clear();
        self.values.push(first.value.as_f64());
        while let Some(p) = self.src.next_if(|p| p.ts < end) {
            self.values.push(p.value.as_f64());
        }
        Some(Point { ts: start, value: Value::Double(self.function.run_double(&self.values)) })
    }
}

/// Calendar buckets without fill. The first point's bucket comes from `previousInterval`; later buckets step
/// from it by whole intervals (as 2.4's `Downsampler` does, rather than re-anchoring per point).
struct CalendarBuckets<'a, I: Iterator<Item = Point>> {
    src: Peekable<I>,
    cal: &'a Calendar,
    function: Aggregator,
    /// The first bucket boundary `>= scanStart`, once computed.
    seek: Option<i64>,
    scan_start: i64,
    /// The current bucket `[start, end)`.
    bucket: Option<(Zoned, Zoned)>,
    values: Vec<f64>,
}

impl<'a, I: Iterator<Item = Point>> CalendarBuckets<'a, I> {
    fn new(src: I, cal: &'a Calendar, function: Aggregator, scan_start: i64) -> Self {
        CalendarBuckets { src: src.peekable(), cal, function, seek: None, scan_start, bucket: None, values: Vec::new() }
    }

    /// Positions `self.bucket` on the bucket holding `ts`, or returns false when the calendar can't.
    fn position(&mut self, ts: i64) -> bool {
        let ms = |z: &Zoned| z.timestamp().as_millisecond();
        match self.bucket.take() {
            Some((mut start, mut end)) if ts >= ms(&start) => {
                if ts >= ms(&end) && elapsed_unit(self.cal) {
                    // Elapsed-time steps: jump.
                    let step = ms(&end) - ms(&start);
                    if step > 0 {
                        let k = (ts - ms(&end)) / step;
                        if k > 0 {
                            let shift = jiff::Span::new().try_milliseconds(k.saturating_mul(step)).ok();
                            match shift.and_then(|s| Some((start.checked_add(s).ok()?, end.checked_add(s).ok()?))) {
                                Some((s, e)) => {
                                    start = s;
                                    end = e;
                                }
                                None => return false,
                            }
                        }
                    }
                }
                while ts >= ms(&end) {
                    match (self.cal.step(&start, true), self.cal.step(&end, true)) {
                        (Some(s), Some(e)) => {
                            start = s;
                            end = e;
                        }
                        _ => return false,
                    }
                }
                self.bucket = Some((start, end));
                true
            }
            _ => {
                let Some(start) = self.cal.previous_interval(ts) else {
                    return false;
                };
                let Some(end) = self.cal.step(&start, true) else {
                    return false;
                };
                self.bucket = Some((start, end));
                true
            }
        }
    }
}

fn elapsed_unit(cal: &Calendar) -> bool {
    use super::calendar::CalendarUnit::*;
    matches!(cal.unit, Millisecond | Second | Minute | Hour)
}

impl<I: Iterator<Item = Point>> Iterator for CalendarBuckets<'_, I> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        if self.seek.is_none() {
            // Seek: the first calendar boundary >= scanStart.
            let seek = match self.cal.previous_interval(self.scan_start) {
                Some(b) if b.timestamp().as_millisecond() < self.scan_start => {
                    self.cal.step(&b, true).map(|z| z.timestamp().as_millisecond())
                }
                Some(b) => Some(b.timestamp().as_millisecond()),
                None => None,
            };
            let seek = seek.unwrap_or(i64::MAX);
            self.seek = Some(seek);
            while self.src.next_if(|p| p.ts < seek).is_some() {}
        }
        loop {
            let first = self.src.next()?;
            if !self.position(first.ts) {
                continue;
            }
            let (start, end) =
                self.bucket.as_ref().map(|(s, e)| (s.timestamp().as_millisecond(), e.timestamp().as_millisecond()))?;
            self.values.clear();
            self.values.push(first.value.as_f64());
            while let Some(p) = self.src.next_if(|p| p.ts < end) {
                self.values.push(p.value.as_f64());
            }
            return Some(Point { ts: start, value: Value::Double(self.function.run_double(&self.values)) });
        }
    }
}

/// `all`: a single bucket over `[query start, query end)`, stamped with the query start.
struct AllBucket<I: Iterator<Item = Point>> {
    src: I,
    function: Aggregator,
    start: i64,
    end: i64,
    done: bool,
    values: Vec<f64>,
}

impl<I: Iterator<Item = Point>> Iterator for AllBucket<I> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        if self.done {
            return None;
        }
        self.done = true;
        for p in self.src.by_ref() {
            if p.ts < self.start {
                continue;
            }
            if p.ts >= self.end {
                break;
            }
            self.values.push(p.value.as_f64());
        }
        if self.values.is_empty() {
            return None;
        }
        Some(Point { ts: self.start, value: Value::Double(self.function.run_double(&self.values)) })
    }
}

/// The expected bucket starts of a filling downsampler.
enum Expected<'a> {
    Fixed { next: i64, interval: i64 },
    Calendar { next: Option<Zoned>, cal: &'a Calendar },
}

impl Expected<'_> {
    fn peek(&self) -> Option<i64> {
        match self {
            Expected::Fixed { next, .. } => Some(*next),
            Expected::Calendar { next, .. } => next.as_ref().map(|z| z.timestamp().as_millisecond()),
        }
    }

    fn advance(&mut self) {
        match self {
            Expected::Fixed { next, interval } => *next = next.checked_add(*interval).unwrap_or(i64::MAX),
            Expected::Calendar { next, cal } => *next = next.as_ref().and_then(|z| cal.step(z, true)),
        }
    }
}

/// The calendar fill range: the first expected bucket start `>= scanStart` and the exclusive end, per 2.4's
/// `FillingDownsampler` (end = `previousInterval(scanEnd)`, one interval further when that equals
/// `previousInterval(scanStart)`).
fn calendar_fill_range(cal: &Calendar, scan_start: i64, scan_end: i64) -> Option<(Zoned, i64)> {
    let mut first = cal.previous_interval(scan_start)?;
    let start_ms = first.timestamp().as_millisecond();
    let mut end = cal.previous_interval(scan_end)?;
    if end.timestamp().as_millisecond() == start_ms {
        end = cal.step(&end, true)?;
    }
    // 2.4 emits the bucket before scanStart too, and the aggregation then drops it (< scanStart).
    while first.timestamp().as_millisecond() < scan_start {
        first = cal.step(&first, true)?;
    }
    Some((first, end.timestamp().as_millisecond()))
}

/// Every expected bucket from the first boundary `>= scanStart` up to (excluding) the aligned scan end: the
/// bucket's value when the data has it, the fill value otherwise. (2.4 can lose every bucket for intervals that
/// don't divide the hour-aligned scan start, issues #970/#1216; this produces the intended buckets, §10.)
struct Filling<'a, D: Iterator<Item = Point>> {
    data: Peekable<D>,
    expected: Expected<'a>,
    end_ms: i64,
    fill: f64,
}

impl<D: Iterator<Item = Point>> Iterator for Filling<'_, D> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        let ts = self.expected.peek()?;
        if ts >= self.end_ms {
            return None;
        }
        // Data buckets before the expected one can't be placed (only on irregular calendar grids).
        while self.data.next_if(|p| p.ts < ts).is_some() {}
        let value = match self.data.next_if(|p| p.ts == ts) {
            Some(p) => p.value,
            None => Value::Double(self.fill),
        };
        self.expected.advance();
        Some(Point { ts, value })
    }
}

#[cfg(test)]
mod tests {
    use super::super::calendar::{time_zone, CalendarUnit};
    use super::*;

    const T: i64 = 1_356_998_400_000;

    fn window(start: i64, end: i64, ds: &Downsampler) -> Window {
        let (scan_start_ms, scan_end_ms) = super::super::pipeline::scan_window(start, end, Some(ds));
        Window { start_ms: start, end_ms: end, scan_start_ms, scan_end_ms }
    }

    fn run(ds: &Downsampler, w: &Window, pts: &[Point]) -> Vec<(i64, f64)> {
        ds.apply(pts.iter().copied(), w).map(|p| (p.ts, p.value.as_f64())).collect()
    }

    fn sum() -> Aggregator {
        Aggregator::Sum
    }

    // spec: query §3.2 — 1000s buckets are epoch-aligned (V12 `testDownsampler`).
    #[test]
    fn fixed_epoch_alignment() {
        let s = 1000;
        let pts = [
            Point::int(T, 40),
            Point::int(T + 2000 * s, 50),
            Point::int(T + 3600 * s, 40),
            Point::int(T + 3605 * s, 50),
            Point::int(T + 7200 * s, 40),
            Point::int(T + 9200 * s, 50),
        ];
        let ds = Downsampler::fixed(1_000_000, Aggregator::Avg, FillPolicy::None);
        let w = window(T - 400 * s, T + 8600 * s, &ds);
        assert_eq!(
            run(&ds, &w, &pts),
            vec![
                (T - 400 * s, 40.0),
                (T + 1600 * s, 50.0),
                (T + 3600 * s, 45.0),
                (T + 6600 * s, 40.0),
                (T + 8600 * s, 50.0)
            ]
        );
    }

    // spec: query §3.3 — the partial leading bucket before the first boundary >= scanStart is skipped.
    #[test]
    fn partial_leading_bucket_skipped() {
        // 45m buckets; scanStart H = T+1h is not on a 45m boundary (3600 mod 2700 = 900), the first one
        // after it is T+5400 s.
        let h = T + 3_600_000;
        let b = T + 5_400_000;
        let pts = [Point::int(h + 1000, 1), Point::int(b + 1, 2), Point::int(b + 100_000, 3)];
        let ds = Downsampler::fixed(2_700_000, sum(), FillPolicy::None);
        let w = Window { start_ms: h, end_ms: h + 3_600_000, scan_start_ms: h, scan_end_ms: h + 7_200_000 };
        assert_eq!(run(&ds, &w, &pts), vec![(b, 5.0)]);
    }

    // spec: query §3.4 — fill policies produce every bucket of the scan window.
    #[test]
    fn fill_policies() {
        let s = 1000;
        let pts = [Point::int(T + 30 * s, 15), Point::int(T + 50 * s, 5)];
        for (fill, gap) in [(FillPolicy::NaN, f64::NAN), (FillPolicy::Null, f64::NAN), (FillPolicy::Zero, 0.0)] {
            let ds = Downsampler::fixed(10_000, sum(), fill);
            let w = window(T, T + 60 * s, &ds);
            let got = run(&ds, &w, &pts);
            assert_eq!(got.len(), 360, "{fill:?}: every 10 s bucket of the hour");
            assert_eq!(got[0].0, T);
            assert_eq!(got[359].0, T + 3590 * s);
            for (i, (ts, v)) in got.iter().enumerate() {
                assert_eq!(*ts, T + 10 * s * i as i64);
                let want = match i {
                    3 => 15.0,
                    5 => 5.0,
                    _ => gap,
                };
                assert!(v == &want || (v.is_nan() && want.is_nan()), "{fill:?} {i}: {v}");
            }
        }
    }

    // §10: fill with an interval that doesn't divide the hour-aligned scan start still yields its buckets.
    #[test]
    fn fill_with_45m_interval_is_not_empty() {
        let ds = Downsampler::fixed(2_700_000, Aggregator::Avg, FillPolicy::Zero);
        let start = 1_492_610_400_000;
        let w = window(start, 1_492_691_642_000, &ds);
        let pts: Vec<Point> =
            (0..100).map(|i| Point::int(w.scan_start_ms + i * 900_000, 10)).filter(|p| p.ts < w.scan_end_ms).collect();
        let got = run(&ds, &w, &pts);
        assert!(!got.is_empty());
        assert!(got.iter().all(|(ts, _)| ts % 2_700_000 == 0 && *ts >= w.scan_start_ms && *ts < w.scan_end_ms));
        // The first bucket with data starts at the first 45m boundary >= scanStart: 1492608600.
        assert_eq!(got[0], (1_492_608_600_000, 10.0));
        assert!(got.windows(2).all(|p| p[1].0 - p[0].0 == 2_700_000));
    }

    // spec: query §3.2 — `0all-sum` over [start, end) stamped with start (V11).
    #[test]
    fn all_bucket() {
        let pts: Vec<Point> = (1..=300).map(|i| Point::int(T + 30_000 * i, i)).collect();
        let ds = Downsampler::all(sum(), FillPolicy::None);
        let w = window(T + 100_000, T + 200_000, &ds);
        let inside: Vec<Point> =
            pts.iter().copied().filter(|p| p.ts >= w.scan_start_ms && p.ts < w.scan_end_ms).collect();
        assert_eq!(run(&ds, &w, &inside), vec![(T + 100_000, 15.0)]);
        let w = window(T, T + 43_200_000, &ds);
        assert_eq!(run(&ds, &w, &pts), vec![(T, 45150.0)]);
        // With a fill policy `all` behaves the same; without points there is no bucket.
        let ds = Downsampler::all(Aggregator::Count, FillPolicy::Null);
        assert_eq!(run(&ds, &w, &pts), vec![(T, 300.0)]);
        assert_eq!(run(&ds, &w, &[]), vec![]);
    }

    fn denver_day(fill: FillPolicy) -> Downsampler {
        let cal = Calendar::new(1, CalendarUnit::Day, time_zone("America/Denver").unwrap());
        Downsampler::calendar(cal, sum(), fill)
    }

    // spec: query §3.2 — `1dc-sum` in America/Denver (V12 `testDownsampler_calendar`).
    #[test]
    fn calendar_day_in_denver() {
        let pts: Vec<Point> = [1, 2, 4, 8, 16, 32]
            .iter()
            .enumerate()
            .map(|(i, &v)| Point::int(T + 5_000 + 10_000 * i as i64, v))
            .collect();
        let ds = denver_day(FillPolicy::None);
        assert_eq!(ds.interval_ms, 86_400_000);
        let w = window(1_356_937_200_000, 1_356_998_460_000, &ds);
        assert_eq!(run(&ds, &w, &pts), vec![(1_356_937_200_000, 63.0)]);
        // Starting at T the scan starts at T and the first Denver midnight >= T is the next day: nothing.
        let w = window(T, 1_356_998_460_000, &ds);
        assert_eq!(run(&ds, &w, &pts), vec![]);
    }

    #[test]
    fn calendar_fill_and_dst() {
        // Daily buckets in Denver across the spring-forward day 2013-03-10, fill zero.
        let mar9 = 1_362_812_400_000; // 2013-03-09T00:00-07:00
        let day = 86_400_000;
        let ds = denver_day(FillPolicy::Zero);
        let pts = [Point::int(mar9 + 3_600_000, 1), Point::int(mar9 + 2 * day + 3_600_000, 2)];
        let w = Window { start_ms: mar9, end_ms: mar9 + 3 * day, scan_start_ms: mar9, scan_end_ms: mar9 + 3 * day };
        let got = run(&ds, &w, &pts);
        // Mar 9 (24h), Mar 10 (23h), Mar 11 starts 23 h after Mar 10 does.
        assert_eq!(got, vec![(mar9, 1.0), (mar9 + day, 0.0), (mar9 + 2 * day - 3_600_000, 2.0)]);
    }

    #[test]
    fn calendar_weeks_and_months() {
        let utc = time_zone("UTC").unwrap();
        // 2-week buckets start on the Sunday of the first point's week and step 14 days.
        let ds = Downsampler::calendar(Calendar::new(2, CalendarUnit::Week, utc.clone()), sum(), FillPolicy::None);
        let day = 86_400_000;
        let sun = T - 2 * day; // 2012-12-30
        let pts = [Point::int(T, 1), Point::int(T + 10 * day, 2), Point::int(T + 13 * day, 4)];
        let w = Window { start_ms: sun, end_ms: T + 30 * day, scan_start_ms: sun, scan_end_ms: T + 31 * day };
        assert_eq!(run(&ds, &w, &pts), vec![(sun, 3.0), (sun + 14 * day, 4.0)]);
        // Months: January (31 days) then February.
        let ds = Downsampler::calendar(Calendar::new(1, CalendarUnit::Month, utc), Aggregator::Count, FillPolicy::None);
        let pts = [Point::int(T, 1), Point::int(T + 30 * day, 1), Point::int(T + 31 * day, 1)];
        let w = Window { start_ms: T, end_ms: T + 60 * day, scan_start_ms: T, scan_end_ms: T + 61 * day };
        assert_eq!(run(&ds, &w, &pts), vec![(T, 2.0), (T + 31 * day, 1.0)]);
    }

    #[test]
    fn downsampled_values_are_doubles() {
        let ds = Downsampler::fixed(60_000, Aggregator::Avg, FillPolicy::None);
        let w = Window { start_ms: T, end_ms: T + 120_000, scan_start_ms: T, scan_end_ms: T + 3_600_000 };
        let out: Vec<Point> = ds.apply([Point::int(T, 1), Point::int(T + 1000, 2)].into_iter(), &w).collect();
        assert_eq!(out, vec![Point::float(T, 1.5)]);
    }

    #[test]
    fn empty_buckets_get_zero_or_nan() {
        assert_eq!(fill_value(FillPolicy::Zero), 0.0);
        assert!(fill_value(FillPolicy::NaN).is_nan() && fill_value(FillPolicy::Null).is_nan());
    }
}
