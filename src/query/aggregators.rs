//! OpenTSDB 2.4's aggregation functions: their names, interpolation methods and integer / double semantics
//! (spec: query §2.1, §2.3).
//!
//! Each function has an integer path (`run_long`, Java `long` arithmetic: wrapping, truncating) and a double path
//! (`run_double`, NaN-aware). The cross-series iterator ([`super::pipeline`]) picks the path per output point;
//! downsampling always uses the double path.

/// How a series that spans an output timestamp without a point there is given a value (spec: query §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interpolation {
    /// Linear interpolation between the previous and the next point (integer arithmetic truncates).
    Lerp,
    /// Zero.
    Zim,
    /// The type's maximum (`Long.MAX_VALUE` / `Double.MAX_VALUE`).
    Max,
    /// The type's minimum (`Long.MIN_VALUE` / `-Double.MAX_VALUE`).
    Min,
    /// The previous point's value.
    Prev,
}

/// The percentile levels OpenTSDB registers (`p50`..`p999`, `ep50r3`.., `ep50r7`..).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PercentileLevel {
    P50,
    P75,
    P90,
    P95,
    P99,
    P999,
}

impl PercentileLevel {
    pub const ALL: [PercentileLevel; 6] = [
        PercentileLevel::P50,
        PercentileLevel::P75,
        PercentileLevel::P90,
        PercentileLevel::P95,
        PercentileLevel::P99,
        PercentileLevel::P999,
    ];

    /// The percentile in (0, 100].
    pub fn percent(self) -> f64 {
        match self {
            PercentileLevel::P50 => 50.0,
            PercentileLevel::P75 => 75.0,
            PercentileLevel::P90 => 90.0,
            PercentileLevel::P95 => 95.0,
            PercentileLevel::P99 => 99.0,
            PercentileLevel::P999 => 99.9,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            PercentileLevel::P50 => "50",
            PercentileLevel::P75 => "75",
            PercentileLevel::P90 => "90",
            PercentileLevel::P95 => "95",
            PercentileLevel::P99 => "99",
            PercentileLevel::P999 => "999",
        }
    }
}

/// commons-math3's `Percentile.EstimationType` as used by OpenTSDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Estimation {
    /// `pNN`: the default (LEGACY) estimation.
    Legacy,
    /// `epNNr3`: R-3 (nearest rank, round half to even).
    R3,
    /// `epNNr7`: R-7 (Excel-style linear).
    R7,
}

/// One of the 35 registered aggregators (spec: query §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aggregator {
    Sum,
    Pfsum,
    Zimsum,
    Min,
    Mimmin,
    Max,
    Mimmax,
    Avg,
    Dev,
    Median,
    Count,
    Mult,
    Diff,
    First,
    Last,
    SquareSum,
    /// No aggregation: every series is its own group; the function passes the single value through.
    None,
    Percentile(PercentileLevel, Estimation),
}

/// The registered names in `/api/aggregators` order: the request parser's list, so there is one list (spec:
/// query §2.1).
pub const AGGREGATOR_NAMES: &[&str] = rtsd_protocol::query::AGGREGATORS;

impl Aggregator {
    /// Looks up a registered name, case-sensitively (`Sum` is unknown; the multiply aggregator is `mult`).
    pub fn from_name(name: &str) -> Option<Aggregator> {
        Some(match name {
            "sum" => Aggregator::Sum,
            "pfsum" => Aggregator::Pfsum,
            "zimsum" => Aggregator::Zimsum,
            "min" => Aggregator::Min,
            "mimmin" => Aggregator::Mimmin,
            "max" => Aggregator::Max,
            "mimmax" => Aggregator::Mimmax,
            "avg" => Aggregator::Avg,
            "dev" => Aggregator::Dev,
            "median" => Aggregator::Median,
            "count" => Aggregator::Count,
            "mult" => Aggregator::Mult,
            "diff" => Aggregator::Diff,
            "first" => Aggregator::First,
            "last" => Aggregator::Last,
            "squareSum" => Aggregator::SquareSum,
            "none" => Aggregator::None,
            _ => return percentile_from_name(name),
        })
    }

    /// The registered name (`mult` for multiply).
    pub fn name(self) -> String {
        let fixed = match self {
            Aggregator::Sum => "sum",
            Aggregator::Pfsum => "pfsum",
            Aggregator::Zimsum => "zimsum",
            Aggregator::Min => "min",
            Aggregator::Mimmin => "mimmin",
            Aggregator::Max => "max",
            Aggregator::Mimmax => "mimmax",
            Aggregator::Avg => "avg",
            Aggregator::Dev => "dev",
            Aggregator::Median => "median",
            Aggregator::Count => "count",
            Aggregator::Mult => "mult",
            Aggregator::Diff => "diff",
            Aggregator::First => "first",
            Aggregator::Last => "last",
            Aggregator::SquareSum => "squareSum",
            Aggregator::None => "none",
            Aggregator::Percentile(level, est) => {
                return match est {
                    Estimation::Legacy => format!("p{}", level.suffix()),
                    Estimation::R3 => format!("ep{}r3", level.suffix()),
                    Estimation::R7 => format!("ep{}r7", level.suffix()),
                }
            }
        };
        fixed.to_string()
    }

    /// How a spanning series without a point at the output timestamp contributes (spec: query §2.3 table).
    pub fn interpolation(self) -> Interpolation {
        match self {
            Aggregator::Sum
            | Aggregator::Min
            | Aggregator::Max
            | Aggregator::Avg
            | Aggregator::Dev
            | Aggregator::Median
            | Aggregator::Mult
            | Aggregator::Diff
            | Aggregator::Percentile(..) => Interpolation::Lerp,
            Aggregator::Zimsum
            | Aggregator::Count
            | Aggregator::First
            | Aggregator::Last
            | Aggregator::SquareSum
            | Aggregator::None => Interpolation::Zim,
            Aggregator::Pfsum => Interpolation::Prev,
            Aggregator::Mimmin => Interpolation::Max,
            Aggregator::Mimmax => Interpolation::Min,
        }
    }

    /// The integer path over the contributed values, in series order. Java `long` semantics: overflow wraps,
    /// division truncates. An empty slice (which the engine never passes) gives 0.
    pub fn run_long(self, values: &[i64]) -> i64 {
        let Some((&first, rest)) = values.split_first() else {
            return 0;
        };
        match self {
            Aggregator::Sum | Aggregator::Pfsum | Aggregator::Zimsum => {
                rest.iter().fold(first, |acc, &v| acc.wrapping_add(v))
            }
            Aggregator::SquareSum => {
                rest.iter().fold(first.wrapping_mul(first), |acc, &v| acc.wrapping_add(v.wrapping_mul(v)))
            }
            Aggregator::Min | Aggregator::Mimmin => rest.iter().fold(first, |m, &v| if v < m { v } else { m }),
            Aggregator::Max | Aggregator::Mimmax => rest.iter().fold(first, |m, &v| if v > m { v } else { m }),
            Aggregator::Avg => {
                let sum = rest.iter().fold(first, |acc, &v| acc.wrapping_add(v));
                // Java counts in an `int`.
                sum.wrapping_div(i64::from(values.len() as i32))
            }
            Aggregator::Dev => {
                if rest.is_empty() {
                    return 0;
                }
                let (m2, n) = welford(first as f64, rest.iter().map(|&v| v as f64));
                (m2 / n as f64).sqrt() as i64
            }
            Aggregator::Median => {
                let mut sorted = values.to_vec();
                sorted.sort_unstable();
                sorted[sorted.len() / 2]
            }
            Aggregator::Count => values.len() as i64,
            Aggregator::Mult => rest.iter().fold(first, |acc, &v| acc.wrapping_mul(v)),
            Aggregator::Diff => match rest.last() {
                Some(&last) => last.wrapping_sub(first),
                None => 0,
            },
            Aggregator::First | Aggregator::None => first,
            Aggregator::Last => *rest.last().unwrap_or(&first),
            Aggregator::Percentile(level, est) => {
                let mut work: Vec<f64> = values.iter().map(|&v| v as f64).collect();
                percentile(&mut work, level.percent(), est) as i64
            }
        }
    }

    /// [`Aggregator::run_double`] of one value (a downsample bucket of one point, as rollup reads give one per
    /// bucket).
    #[inline]
    pub fn run_double_one(self, v: f64) -> f64 {
        let mut one = [v];
        self.run_double_each(&mut one);
        one[0]
    }

    /// [`Aggregator::run_double_one`] of every value, in place: the common functions' answer for one value given
    /// directly, the function matched once rather than per value.
    pub fn run_double_each(self, values: &mut [f64]) {
        match self {
            // The sum starts at 0.0 (so -0.0 gives 0.0); an average of one divides that by 1; NaN is skipped,
            // leaving nothing: NaN.
            Aggregator::Sum | Aggregator::Pfsum | Aggregator::Zimsum | Aggregator::Avg => {
                values.iter_mut().for_each(|v| *v = if v.is_nan() { f64::NAN } else { 0.0 + *v })
            }
            // The fold starts at the infinity, which alone (or NaN, skipped) gives NaN.
            Aggregator::Min | Aggregator::Mimmin => {
                values.iter_mut().for_each(|v| *v = if *v < f64::INFINITY { *v } else { f64::NAN })
            }
            Aggregator::Max | Aggregator::Mimmax => {
                values.iter_mut().for_each(|v| *v = if *v > f64::NEG_INFINITY { *v } else { f64::NAN })
            }
            _ => values.iter_mut().for_each(|v| *v = self.run_double(&[*v])),
        }
    }

    /// The double path over the contributed values, in series order; NaNs (from fill policies) are skipped as
    /// each Java function does (spec: query §2.3). An empty slice gives NaN.
    pub fn run_double(self, values: &[f64]) -> f64 {
        if values.is_empty() {
            return match self {
                Aggregator::Count => 0.0,
                _ => f64::NAN,
            };
        }
        match self {
            Aggregator::Sum | Aggregator::Pfsum | Aggregator::Zimsum => {
                let mut sum = 0.0;
                let mut n = 0u64;
                for &v in values.iter().filter(|v| !v.is_nan()) {
                    sum += v;
                    n += 1;
                }
                if n == 0 {
                    f64::NAN
                } else {
                    sum
                }
            }
            Aggregator::SquareSum => {
                let mut sum = 0.0;
                let mut n = 0u64;
                for &v in values.iter().filter(|v| !v.is_nan()) {
                    sum += v * v;
                    n += 1;
                }
                if n == 0 {
                    f64::NAN
                } else {
                    sum
                }
            }
            Aggregator::Min | Aggregator::Mimmin => {
                let mut min = f64::INFINITY;
                for &v in values {
                    if !v.is_nan() && v < min {
                        min = v;
                    }
                }
                if min == f64::INFINITY {
                    f64::NAN
                } else {
                    min
                }
            }
            Aggregator::Max | Aggregator::Mimmax => {
                let mut max = f64::NEG_INFINITY;
                for &v in values {
                    if !v.is_nan() && v > max {
                        max = v;
                    }
                }
                if max == f64::NEG_INFINITY {
                    f64::NAN
                } else {
                    max
                }
            }
            Aggregator::Avg => {
                let mut sum = 0.0;
                let mut n = 0i32;
                for &v in values.iter().filter(|v| !v.is_nan()) {
                    sum += v;
                    n = n.wrapping_add(1);
                }
                if n == 0 {
                    f64::NAN
                } else {
                    sum / f64::from(n)
                }
            }
            Aggregator::Dev => {
                let mut it = values.iter().copied().skip_while(|v| v.is_nan());
                let Some(first) = it.next() else {
                    return f64::NAN;
                };
                let (m2, n) = welford(first, it.filter(|v| !v.is_nan()));
                if n == 1 {
                    0.0
                } else {
                    (m2 / n as f64).sqrt()
                }
            }
            Aggregator::Median => {
                let mut kept: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
                if kept.is_empty() {
                    return f64::NAN;
                }
                kept.sort_unstable_by(|a, b| a.total_cmp(b));
                kept[kept.len() / 2]
            }
            Aggregator::Count => values.iter().filter(|v| !v.is_nan()).count() as f64,
            Aggregator::Mult => values[1..].iter().fold(values[0], |acc, &v| acc * v),
            Aggregator::Diff => {
                let Some(start) = values.iter().position(|v| !v.is_nan()) else {
                    return f64::NAN;
                };
                if start + 1 == values.len() {
                    0.0
                } else {
                    // Java takes the last value as is, NaN or not.
                    values[values.len() - 1] - values[start]
                }
            }
            Aggregator::First | Aggregator::None => values[0],
            Aggregator::Last => values[values.len() - 1],
            Aggregator::Percentile(level, _) => {
                // 2.4 bug kept (spec: query §2.3): the double path ignores the estimation type.
                let mut kept: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
                if kept.is_empty() {
                    return f64::NAN;
                }
                percentile(&mut kept, level.percent(), Estimation::Legacy)
            }
        }
    }
}

/// `epNNrM` / `pNN` names.
fn percentile_from_name(name: &str) -> Option<Aggregator> {
    let (digits, est) = if let Some(rest) = name.strip_prefix("ep") {
        if let Some(d) = rest.strip_suffix("r3") {
            (d, Estimation::R3)
        } else if let Some(d) = rest.strip_suffix("r7") {
            (d, Estimation::R7)
        } else {
            return None;
        }
    } else if let Some(d) = name.strip_prefix('p') {
        (d, Estimation::Legacy)
    } else {
        return None;
    };
    PercentileLevel::ALL.into_iter().find(|l| l.suffix() == digits).map(|l| Aggregator::Percentile(l, est))
}

/// Welford's running variance as OpenTSDB's `StdDev` runs it: returns (M2, number of values).
fn welford(first: f64, rest: impl Iterator<Item = f64>) -> (f64, u64) {
    let mut old_mean = first;
    let mut m2 = 0.0;
    let mut n = 1u64;
    for x in rest {
        n += 1;
        let new_mean = old_mean + (x - old_mean) / n as f64;
        m2 += (x - old_mean) * (x - new_mean);
        old_mean = new_mean;
    }
    (m2, n)
}

/// commons-math3 3.4.1 `Percentile(p).evaluate()` over `work` (reordered in place), for the three estimation
/// types OpenTSDB registers. `work` must be non-empty and NaN-free.
pub fn percentile(work: &mut [f64], p: f64, est: Estimation) -> f64 {
    let n = work.len();
    if n == 0 {
        return f64::NAN;
    }
    if n == 1 {
        return work[0];
    }
    let q = p / 100.0;
    let pos = match est {
        Estimation::Legacy => {
            if q == 0.0 {
                0.0
            } else if q == 1.0 {
                n as f64
            } else {
                q * (n as f64 + 1.0)
            }
        }
        Estimation::R7 => {
            if q == 0.0 {
                0.0
            } else if q == 1.0 {
                n as f64
            } else {
                1.0 + (n as f64 - 1.0) * q
            }
        }
        Estimation::R3 => {
            let min_limit = 1.0 / 2.0 / n as f64;
            if q <= min_limit {
                0.0
            } else {
                // FastMath.rint: round half to even.
                (n as f64 * q).round_ties_even()
            }
        }
    };
    work.sort_unstable_by(|a, b| a.total_cmp(b));
    let fpos = pos.floor();
    let int_pos = fpos as usize;
    let dif = pos - fpos;
    if pos < 1.0 {
        return work[0];
    }
    if pos >= n as f64 {
        return work[n - 1];
    }
    let lower = work[int_pos - 1];
    let upper = work[int_pos];
    lower + dif * (upper - lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(name: &str) -> Aggregator {
        Aggregator::from_name(name).unwrap_or_else(|| panic!("{name} registered"))
    }

    // spec: query §2.1 — 35 names, case-sensitive, `mult` not `multiply`.
    #[test]
    fn every_registered_name_round_trips() {
        for &name in AGGREGATOR_NAMES {
            assert_eq!(agg(name).name(), name);
        }
        let mut sorted = AGGREGATOR_NAMES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 35);
        for bad in ["Sum", "multiply", "p", "p51", "ep50", "ep50r5", "e50r3", "raw", "", "squaresum", "p999r3"] {
            assert_eq!(Aggregator::from_name(bad), None, "{bad}");
        }
        assert_eq!(agg("ep999r3"), Aggregator::Percentile(PercentileLevel::P999, Estimation::R3));
        assert_eq!(agg("p75"), Aggregator::Percentile(PercentileLevel::P75, Estimation::Legacy));
    }

    proptest::proptest! {
        // One value through the short path gives run_double's bits, for every aggregator.
        #[test]
        fn one_value_runs_as_a_slice_of_one(
            name in proptest::sample::select(AGGREGATOR_NAMES.to_vec()),
            v in proptest::prop_oneof![
                proptest::num::f64::ANY,
                proptest::sample::select(vec![f64::NAN, -f64::NAN, 0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, f64::MIN]),
            ],
        ) {
            let a = Aggregator::from_name(name).unwrap();
            proptest::prop_assert_eq!(a.run_double_one(v).to_bits(), a.run_double(&[v]).to_bits(), "{} of {}", name, v);
        }
    }

    // spec: query §2.3 — interpolation column.
    #[test]
    fn interpolation_methods() {
        use Interpolation::*;
        let expect = [
            ("sum", Lerp),
            ("zimsum", Zim),
            ("pfsum", Prev),
            ("min", Lerp),
            ("mimmin", Max),
            ("max", Lerp),
            ("mimmax", Min),
            ("avg", Lerp),
            ("dev", Lerp),
            ("median", Lerp),
            ("count", Zim),
            ("mult", Lerp),
            ("diff", Lerp),
            ("first", Zim),
            ("last", Zim),
            ("squareSum", Zim),
            ("none", Zim),
            ("p50", Lerp),
            ("ep90r3", Lerp),
            ("ep99r7", Lerp),
        ];
        for (name, interp) in expect {
            assert_eq!(agg(name).interpolation(), interp, "{name}");
        }
    }

    // spec: query §2.3 — integer path of every function.
    #[test]
    fn long_path() {
        let v = [50, 37, 12];
        let cases = [
            ("sum", 99),
            ("pfsum", 99),
            ("zimsum", 99),
            ("min", 12),
            ("mimmin", 12),
            ("max", 50),
            ("mimmax", 50),
            ("avg", 33), // 99 / 3
            ("dev", 15), // population sd 15.77.. truncated
            ("median", 37),
            ("count", 3),
            ("mult", 22200),
            ("diff", -38),
            ("first", 50),
            ("last", 12),
            ("squareSum", 2500 + 1369 + 144),
            ("none", 50),
            ("p50", 37),
        ];
        for (name, want) in cases {
            assert_eq!(agg(name).run_long(&v), want, "{name}");
        }
        // Single values.
        for &name in AGGREGATOR_NAMES {
            let want = match name {
                "dev" | "diff" => 0,
                "count" => 1,
                "squareSum" => 49,
                _ => 7,
            };
            assert_eq!(agg(name).run_long(&[7]), want, "{name}");
        }
        // Integer division truncates toward zero; even-length median takes the upper one.
        assert_eq!(agg("avg").run_long(&[-7, 2]), -2);
        assert_eq!(agg("median").run_long(&[4, 1, 3, 2]), 3);
        // Java long overflow wraps instead of failing.
        assert_eq!(agg("sum").run_long(&[i64::MAX, 1]), i64::MIN);
        assert_eq!(agg("mult").run_long(&[i64::MAX, 2]), -2);
        assert_eq!(agg("squareSum").run_long(&[i64::MIN]), 0);
        assert_eq!(agg("dev").run_long(&[i64::MAX, i64::MIN]), 9223372036854775807);
    }

    // spec: query §2.3 — double path of every function, NaN handling.
    #[test]
    fn double_path() {
        let v = [50.5, f64::NAN, 37.0, 12.25];
        let cases: [(&str, f64); 17] = [
            ("sum", 99.75),
            ("pfsum", 99.75),
            ("zimsum", 99.75),
            ("min", 12.25),
            ("mimmin", 12.25),
            ("max", 50.5),
            ("mimmax", 50.5),
            ("avg", 33.25),
            ("median", 37.0),
            ("count", 3.0),
            ("mult", f64::NAN),
            ("diff", 12.25 - 50.5),
            ("first", 50.5),
            ("last", 12.25),
            ("squareSum", 50.5 * 50.5 + 37.0 * 37.0 + 12.25 * 12.25),
            ("none", 50.5),
            ("p50", 37.0),
        ];
        for (name, want) in cases {
            let got = agg(name).run_double(&v);
            assert!(got == want || (got.is_nan() && want.is_nan()), "{name}: {got} != {want}");
        }
        let dev = agg("dev").run_double(&v);
        assert!((dev - 250.875f64.sqrt()).abs() < 1e-12, "{dev}");
        // All NaN.
        let nans = [f64::NAN, f64::NAN];
        for &name in AGGREGATOR_NAMES {
            let got = agg(name).run_double(&nans);
            if name == "count" {
                assert_eq!(got, 0.0);
            } else {
                assert!(got.is_nan(), "{name}: {got}");
            }
        }
        // One non-NaN value: dev and diff give 0.0.
        assert_eq!(agg("dev").run_double(&[f64::NAN, 3.0, f64::NAN]), 0.0);
        assert_eq!(agg("diff").run_double(&[f64::NAN, 3.0]), 0.0);
        // diff keeps a trailing NaN; first/last don't skip NaN.
        assert!(agg("diff").run_double(&[1.0, f64::NAN]).is_nan());
        assert!(agg("first").run_double(&[f64::NAN, 1.0]).is_nan());
        assert!(agg("last").run_double(&[1.0, f64::NAN]).is_nan());
        assert_eq!(agg("avg").run_double(&[1.0, 2.0]), 1.5);
        assert_eq!(agg("median").run_double(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        // Interpolated extremes of mimmin/mimmax are real contributions.
        assert_eq!(agg("mimmin").run_double(&[f64::MAX, 5.0]), 5.0);
        assert_eq!(agg("mimmax").run_double(&[-f64::MAX, 5.0]), 5.0);
    }

    // spec: query §2.3 — values 1..1000 give p50=500, p75=750, p90=900, p95=950, p99=990, p999=999 for all three
    // families on the integer path (test/core/TestAggregators.java).
    #[test]
    fn percentiles_of_one_to_thousand() {
        let values: Vec<i64> = (1..=1000).collect();
        let want = [("50", 500), ("75", 750), ("90", 900), ("95", 950), ("99", 990), ("999", 999)];
        for (suffix, w) in want {
            for name in [format!("p{suffix}"), format!("ep{suffix}r3"), format!("ep{suffix}r7")] {
                assert_eq!(agg(&name).run_long(&values), w, "{name}");
            }
        }
    }

    #[test]
    fn percentile_estimations() {
        // LEGACY: pos = p(n+1); n=4, p50 -> 2.5 -> x2 + .5(x3-x2).
        assert_eq!(percentile(&mut [4.0, 1.0, 3.0, 2.0], 50.0, Estimation::Legacy), 2.5);
        // pos < 1 -> min, pos >= n -> max.
        assert_eq!(percentile(&mut [4.0, 1.0, 3.0, 2.0], 10.0, Estimation::Legacy), 1.0);
        assert_eq!(percentile(&mut [4.0, 1.0, 3.0, 2.0], 99.0, Estimation::Legacy), 4.0);
        // R7: h = 1 + (n-1)p = 2.5.
        assert_eq!(percentile(&mut [4.0, 1.0, 3.0, 2.0], 50.0, Estimation::R7), 2.5);
        assert_eq!(percentile(&mut [5.0, 4.0, 1.0, 3.0, 2.0], 75.0, Estimation::R7), 4.0);
        // R3: rint(np) = rint(2.0) = 2 -> x2; rint(2.5) = 2 (half even) for n=5 p50.
        assert_eq!(percentile(&mut [4.0, 1.0, 3.0, 2.0], 50.0, Estimation::R3), 2.0);
        assert_eq!(percentile(&mut [5.0, 4.0, 1.0, 3.0, 2.0], 50.0, Estimation::R3), 2.0);
        assert_eq!(percentile(&mut [5.0, 4.0, 1.0, 3.0, 2.0], 10.0, Estimation::R3), 1.0);
        assert_eq!(percentile(&mut [9.0], 99.9, Estimation::R3), 9.0);
        // The integer path of ep* honours the estimation; the double path uses LEGACY for all (2.4 bug).
        let ep50r3 = agg("ep50r3");
        assert_eq!(ep50r3.run_long(&[1, 2, 3, 4, 5, 6]), 3);
        assert_eq!(agg("p50").run_long(&[1, 2, 3, 4, 5, 6]), 3); // 3.5 truncated
        assert_eq!(ep50r3.run_double(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), 3.5);
        assert_eq!(agg("ep90r7").run_double(&[1.0, 2.0, 3.0, 4.0]), agg("p90").run_double(&[1.0, 2.0, 3.0, 4.0]));
    }
}
