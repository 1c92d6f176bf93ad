//! Per-series rate of change with OpenTSDB's counter options (spec: query §4).
//!
//! `rate(t1) = (v1 − v0) / ((t1 − t0) / 1000.0)`, per second, always a double; the difference is taken in
//! wrapping 64-bit integer arithmetic when both values are integers. 2.4 starts from a synthetic point
//! `(0 ms, 0)` and the aggregation discards that first rate, so the first point of a series yields nothing.

use super::series::{Point, Value};

/// `rateOptions` (spec: query §4.4). The defaults are 2.4's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    /// Monotonic counter: a negative difference is a counter wrap or reset.
    pub counter: bool,
    /// The counter's maximum (`Long.MAX_VALUE` by default).
    pub counter_max: i64,
    /// With `counter`, a wrapped rate above this (when > 0) is reported as 0.0.
    pub reset_value: i64,
    /// With `counter`, drop the point after a reset instead (the next rate is taken from it).
    pub drop_resets: bool,
}

impl Default for RateConfig {
    fn default() -> RateConfig {
        RateConfig { counter: false, counter_max: i64::MAX, reset_value: 0, drop_resets: false }
    }
}

/// The rates of a time-ordered series (timestamps must increase; a point that does not is skipped, where 2.4
/// would fail the query).
pub(crate) struct RateIter<I> {
    src: I,
    config: RateConfig,
    prev: Point,
    /// The first rate (against the synthetic `(0, 0)`) is still to be discarded.
    discard_first: bool,
}

impl<I: Iterator<Item = Point>> RateIter<I> {
    pub(crate) fn new(src: I, config: RateConfig) -> Self {
        RateIter { src, config, prev: Point::int(0, 0), discard_first: true }
    }
}

/// The rate from `p0` to `p1`, or `None` when `dropResets` drops `p1`.
pub(crate) fn rate_between(p0: Point, p1: Point, c: &RateConfig) -> Option<f64> {
    let dt_secs = p1.ts.wrapping_sub(p0.ts) as f64 / 1000.0;
    let both_int = p0.value.is_integer() && p1.value.is_integer();
    let diff = match (p0.value, p1.value) {
        (Value::Int(a), Value::Int(b)) => b.wrapping_sub(a) as f64,
        (a, b) => b.as_f64() - a.as_f64(),
    };
    if c.counter && diff < 0.0 {
        if c.drop_resets {
            return None;
        }
        let wrapped = match (p0.value, p1.value) {
            (Value::Int(a), Value::Int(b)) if both_int => c.counter_max.wrapping_sub(a).wrapping_add(b) as f64,
            (a, b) => c.counter_max as f64 - a.as_f64() + b.as_f64(),
        };
        let rate = wrapped / dt_secs;
        if c.reset_value > 0 && rate > c.reset_value as f64 {
            return Some(0.0);
        }
        return Some(rate);
    }
    Some(diff / dt_secs)
}

impl<I: Iterator<Item = Point>> Iterator for RateIter<I> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        loop {
            let p = self.src.next()?;
            if p.ts <= self.prev.ts {
                if self.discard_first {
                    // A first point at or before the epoch: nothing to rate it against; it is the discarded one.
                    self.discard_first = false;
                    self.prev = p;
                }
                continue;
            }
            let rate = rate_between(self.prev, p, &self.config);
            self.prev = p;
            let Some(rate) = rate else {
                // dropResets: no output; the next rate starts from this point.
                continue;
            };
            if self.discard_first {
                self.discard_first = false;
                continue;
            }
            return Some(Point { ts: p.ts, value: Value::Double(rate) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_356_998_400_000;

    fn rates(points: &[Point], c: RateConfig) -> Vec<(i64, f64)> {
        RateIter::new(points.iter().copied(), c).map(|p| (p.ts, p.value.as_f64())).collect()
    }

    fn at(secs: &[i64], values: &[i64]) -> Vec<Point> {
        secs.iter().zip(values).map(|(&s, &v)| Point::int(T + s * 1000, v)).collect()
    }

    fn counter() -> RateConfig {
        RateConfig { counter: true, ..RateConfig::default() }
    }

    // spec: query §4.2 — the first point yields nothing; 300 points 1..300 every 30 s give 299 rates of 1/30.
    #[test]
    fn first_point_yields_nothing() {
        let pts: Vec<Point> = (0..300).map(|i| Point::int(1_356_998_430_000 + 30_000 * i, i + 1)).collect();
        let got = rates(&pts, RateConfig::default());
        assert_eq!(got.len(), 299);
        assert_eq!(got[0], (1_356_998_460_000, 0.03333333333333333));
        assert!(got.iter().all(|&(_, r)| r == 0.03333333333333333));
        // ms data every 500 ms with +1 -> 2.0 per second.
        let pts: Vec<Point> = (0..10).map(|i| Point::int(T + 500 * i, i)).collect();
        assert!(rates(&pts, RateConfig::default()).iter().all(|&(_, r)| r == 2.0));
        assert_eq!(rates(&pts[..1], RateConfig::default()), vec![]);
    }

    // spec: query §4.4 — the table of examples.
    #[test]
    fn counter_examples() {
        let s = [30, 60, 90, 120];
        assert_eq!(rates(&at(&s, &[30, 60, 90]), counter()), vec![(T + 60_000, 1.0), (T + 90_000, 1.0)]);
        assert_eq!(
            rates(&at(&s, &[i64::MAX - 55, i64::MAX - 25, 5]), counter()),
            vec![(T + 60_000, 1.0), (T + 90_000, 1.0)]
        );
        let max100 = RateConfig { counter_max: 100, ..counter() };
        assert_eq!(rates(&at(&s, &[45, 75, 5]), max100), vec![(T + 60_000, 1.0), (T + 90_000, 1.0)]);
        let reset = RateConfig { counter_max: 10_000, reset_value: 35, ..counter() };
        assert_eq!(rates(&at(&s, &[45, 75, 25]), reset), vec![(T + 60_000, 1.0), (T + 90_000, 0.0)]);
        let drop = RateConfig { drop_resets: true, ..reset };
        assert_eq!(rates(&at(&s, &[45, 75, 25, 55]), drop), vec![(T + 60_000, 1.0), (T + 120_000, 1.0)]);
        assert_eq!(
            rates(&at(&s, &[45, 75, 25]), RateConfig::default()),
            vec![(T + 60_000, 1.0), (T + 90_000, -1.6666666666666667)]
        );
        // dropResets, counterMax and resetValue do nothing without `counter`.
        let not_counter = RateConfig { counter: false, counter_max: 100, reset_value: 1, drop_resets: true };
        assert_eq!(
            rates(&at(&s, &[45, 75, 25]), not_counter),
            vec![(T + 60_000, 1.0), (T + 90_000, -1.6666666666666667)]
        );
        // resetValue: a wrapped rate at or below it is kept.
        let lenient = RateConfig { counter_max: 100, reset_value: 5, ..counter() };
        assert_eq!(rates(&at(&s, &[45, 75, 5]), lenient), vec![(T + 60_000, 1.0), (T + 90_000, 1.0)]);
    }

    #[test]
    fn float_and_mixed_differences() {
        let pts = [Point::float(T, 1.5), Point::int(T + 2000, 3), Point::float(T + 4000, 2.0)];
        assert_eq!(rates(&pts, RateConfig::default()), vec![(T + 2000, 0.75), (T + 4000, -0.5)]);
        // Counter wrap on doubles: counterMax - v0 + v1 in double arithmetic.
        let c = RateConfig { counter_max: 10, ..counter() };
        assert_eq!(rates(&pts, c), vec![(T + 2000, 0.75), (T + 4000, 4.5)]);
    }

    #[test]
    fn nan_rates_propagate() {
        let pts = [Point::float(T, 1.0), Point::float(T + 1000, f64::NAN), Point::float(T + 2000, 3.0)];
        let got = rates(&pts, counter());
        assert_eq!(got.len(), 2);
        assert!(got[0].1.is_nan() && got[1].1.is_nan());
    }

    #[test]
    fn first_point_dropped_as_reset_shifts_the_discard() {
        // A negative first counter value is a "reset" against the synthetic (0, 0): dropped, so the second
        // point's rate is the discarded first one (2.4 behaviour).
        let drop = RateConfig { drop_resets: true, ..counter() };
        assert_eq!(rates(&at(&[30, 60, 90], &[-5, 10, 40]), drop), vec![(T + 90_000, 1.0)]);
    }

    #[test]
    fn non_increasing_timestamps_are_skipped() {
        let pts = [Point::int(T, 1), Point::int(T + 1000, 2), Point::int(T + 1000, 9), Point::int(T + 2000, 3)];
        assert_eq!(rates(&pts, RateConfig::default()), vec![(T + 1000, 1.0), (T + 2000, 1.0)]);
        let pts = [Point::int(0, 1), Point::int(1000, 2)];
        assert_eq!(rates(&pts, RateConfig::default()), vec![(1000, 1.0)]);
    }
}
