//! Expressions over query answers (spec: query §6.2, §6.3): the join engine that pairs the series of several
//! operands by their tags, the arithmetic of `/api/query/exp`, and the Graphite-style functions of
//! `/api/query/gexp`. Everything here but [`load`] (which turns the engine's answer to the sub-queries into
//! [`Series`], looking up the UIDs the join orders by) is pure; the sub-queries themselves are ordinary
//! `/api/query` sub-queries run by [`crate::query::exec`].
//!
//! One join serves both endpoints, as one (`ExpressionIterator` over `Union`/`IntersectionIterator`) serves
//! both in OpenTSDB 2.4:
//! * every series of an operand gets a key: its tag (key UID, value UID) pairs in key-UID order (only the keys
//!   the operand's query filtered on, with `useQueryTags`), then its aggregated tag key UIDs (with
//!   `includeAggTags`); a series without tags has the empty key whatever its aggregated tags;
//! * a *set* is one key with at most one series per operand (a later series with the same key replaces an
//!   earlier one); sets are ordered by key bytes; `union` keeps every key, `intersection` only keys every
//!   operand has;
//! * at each timestamp a member's value is its point there if it has one that is not NaN, else the operand's
//!   fill value; a set with no series for an operand reads 0 for it (2.4's union filler).
//!
//! A set's description is 2.4's: its metrics and aggregated tags are the union of its members', its tags are
//! those of the member for the operand that comes first in Java `HashMap` order of the operand names, and
//! empty when that operand has no series in the set.

use std::collections::BTreeMap;

use rtsd_protocol::javafmt;
use rtsd_protocol::query::exp::{Expr, Op, SetOperator};
use rtsd_protocol::query::gexp::{GexpArg, GexpCall};

use crate::query::series::OutValue;

mod exp;
mod gexp;
pub use exp::{run_exp, ExpError};
pub use gexp::{eval_gexp, GexpError};

/// One tag of a series, with the UIDs that order and key it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    pub key_uid: Vec<u8>,
    pub value_uid: Vec<u8>,
    pub key: String,
    pub value: String,
}

/// One series entering or leaving an expression: a group of a sub-query's answer or a result set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// (metric UID, name), by UID, no duplicates.
    pub metrics: Vec<(Vec<u8>, String)>,
    /// Common tags, by key UID.
    pub tags: Vec<Tag>,
    /// (tag key UID, name) of the aggregated tags, by UID.
    pub aggregate_tags: Vec<(Vec<u8>, String)>,
    /// Points in ascending time.
    pub points: Vec<(i64, OutValue)>,
    /// gexp's `alias`: the name to print instead of the metric (tags and aggregated tags then print empty).
    pub alias: Option<String>,
}

impl Series {
    /// The value at `ts`, if the series has a point there.
    fn at(&self, ts: i64) -> Option<f64> {
        self.points.binary_search_by_key(&ts, |p| p.0).ok().map(|i| self.points[i].1.to_f64())
    }

    /// The metric name 2.4 prints for a series: the alias, else the metric with the lowest UID.
    pub fn metric_name(&self) -> String {
        match &self.alias {
            Some(a) => a.clone(),
            None => self.metrics.first().map(|m| m.1.clone()).unwrap_or_default(),
        }
    }
}

/// One side of a join: the series of a variable.
#[derive(Debug, Clone, Copy)]
pub struct Operand<'a> {
    /// The variable name (orders operands the Java `HashMap` way for the set's tags).
    pub name: &'a str,
    pub series: &'a [Series],
    /// The value a member reads where it has no point, or a NaN one.
    pub fill: f64,
    /// Tag key UIDs the operand's query filtered on (`None` for an expression result).
    pub query_tagks: Option<&'a [Vec<u8>]>,
}

/// How sets are formed (2.4's `Join`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinSpec {
    pub operator: SetOperator,
    pub use_query_tags: bool,
    pub include_agg_tags: bool,
}

/// Which timestamps a set is evaluated at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamps {
    /// Every timestamp of every member of every set (exp: one row of values per timestamp).
    Shared,
    /// Each set at the timestamps of its own members (gexp's series functions).
    PerSet,
}

fn join_key(series: &Series, spec: &JoinSpec, query_tagks: Option<&[Vec<u8>]>) -> Vec<u8> {
    if series.tags.is_empty() {
        return Vec::new();
    }
    let mut key = Vec::new();
    for t in &series.tags {
        if spec.use_query_tags && !query_tagks.unwrap_or_default().contains(&t.key_uid) {
            continue;
        }
        key.extend_from_slice(&t.key_uid);
        key.extend_from_slice(&t.value_uid);
    }
    if spec.include_agg_tags {
        for (uid, _) in &series.aggregate_tags {
            key.extend_from_slice(uid);
        }
    }
    key
}

/// Pairs the operands' series into sets: for each set, the index of its series in each operand (spec: query
/// §6.3). An intersection that pairs nothing while some operand has series is 2.4's error
/// `No intersections found: <its iterator>` (`id` names the expression there).
pub fn join(id: &str, operands: &[Operand], spec: &JoinSpec) -> Result<Vec<Vec<Option<usize>>>, String> {
    let mut sets: BTreeMap<Vec<u8>, Vec<Option<usize>>> = BTreeMap::new();
    let keys: Vec<Vec<Vec<u8>>> =
        operands.iter().map(|o| o.series.iter().map(|s| join_key(s, spec, o.query_tagks)).collect()).collect();
    for (j, op_keys) in keys.iter().enumerate() {
        for (i, key) in op_keys.iter().enumerate() {
            sets.entry(key.clone()).or_insert_with(|| vec![None; operands.len()])[j] = Some(i);
        }
    }
    if spec.operator == SetOperator::Intersection {
        if operands.iter().all(|o| o.series.is_empty()) {
            return Ok(Vec::new());
        }
        sets.retain(|_, members| members.iter().all(Option::is_some));
        if sets.is_empty() {
            return Err(format!("No intersections found: {}", intersection_string(id, operands, spec)));
        }
    }
    Ok(sets.into_values().collect())
}

/// 2.4's `IntersectionIterator.toString()`, operands in its `HashMap` order.
fn intersection_string(id: &str, operands: &[Operand], spec: &JoinSpec) -> String {
    let names: Vec<&str> = operands.iter().map(|o| o.name).collect();
    let queries: Vec<String> = javafmt::hashmap_order(&names)
        .into_iter()
        .enumerate()
        .map(|(index, j)| {
            let o = &operands[j];
            let kind = if o.query_tagks.is_some() { "TimeSyncedIterator" } else { "ExpressionIterator" };
            format!("{}={kind}(id={}, index={index}, dpsSize={})", o.name, o.name, o.series.len())
        })
        .collect();
    format!(
        "IntersectionIterator(id={id}, useQueryTags={}, includeAggTags={}, index=0, queries={{{}}})",
        spec.use_query_tags,
        spec.include_agg_tags,
        queries.join(", ")
    )
}

/// Evaluates `f` over joined sets: one output series per set, described as the module doc says, with a point
/// at each timestamp of `when`. `f` gets each operand's value in operand order.
pub fn combine(
    operands: &[Operand],
    sets: &[Vec<Option<usize>>],
    when: Timestamps,
    mut f: impl FnMut(&[f64]) -> f64,
) -> Vec<Series> {
    let names: Vec<&str> = operands.iter().map(|o| o.name).collect();
    let head = javafmt::hashmap_order(&names).first().copied().unwrap_or(0);
    let member_times = |set: &Vec<Option<usize>>| -> Vec<i64> {
        let mut ts: Vec<i64> = set
            .iter()
            .enumerate()
            .filter_map(|(j, m)| m.map(|i| &operands[j].series[i]))
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        ts.sort_unstable();
        ts.dedup();
        ts
    };
    let shared: Vec<i64> = if when == Timestamps::Shared {
        let mut all: Vec<i64> = sets.iter().flat_map(member_times).collect();
        all.sort_unstable();
        all.dedup();
        all
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(sets.len());
    let mut values = vec![0.0; operands.len()];
    for set in sets {
        let members: Vec<Option<&Series>> =
            set.iter().enumerate().map(|(j, m)| m.map(|i| &operands[j].series[i])).collect();
        let mut result = Series::default();
        for s in members.iter().flatten() {
            result.metrics.extend(s.metrics.iter().cloned());
            result.aggregate_tags.extend(s.aggregate_tags.iter().cloned());
        }
        result.metrics.sort();
        result.metrics.dedup();
        result.aggregate_tags.sort();
        result.aggregate_tags.dedup();
        if let Some(first) = members[head] {
            result.tags = first.tags.clone();
        }
        let own;
        let times = match when {
            Timestamps::Shared => &shared,
            Timestamps::PerSet => {
                own = member_times(set);
                &own
            }
        };
        for &ts in times {
            for (j, m) in members.iter().enumerate() {
                values[j] = match m {
                    None => 0.0,
                    Some(s) => match s.at(ts) {
                        Some(v) if !v.is_nan() => v,
                        _ => operands[j].fill,
                    },
                };
            }
            let v = f(&values);
            result.points.push((ts, if v.is_nan() { OutValue::NaN } else { OutValue::Double(v) }));
        }
        out.push(result);
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// /api/query/exp arithmetic (JEXL 2 semantics on the subset the parser accepts).

#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i64),
    Double(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Double(d) => d,
        }
    }
}

/// Evaluates `expr` with the value of variable `names[i]` in `values[i]`, with JEXL 2's lenient arithmetic as 2.4
/// runs it: division and remainder by zero give 0, integer literals combine as Java longs, comparisons and logic
/// give 1 or 0 (a value is true when it is neither 0 nor NaN).
pub fn eval(expr: &Expr, names: &[String], values: &[f64]) -> f64 {
    eval_num(expr, names, values).f()
}

fn truth(n: Num) -> bool {
    match n {
        Num::Int(i) => i != 0,
        Num::Double(d) => d != 0.0 && !d.is_nan(),
    }
}

fn flag(b: bool) -> Num {
    Num::Int(i64::from(b))
}

fn eval_num(expr: &Expr, names: &[String], values: &[f64]) -> Num {
    match expr {
        Expr::Num { value, int: true } if value.fract() == 0.0 && value.abs() < 9.0e18 => Num::Int(*value as i64),
        Expr::Num { value, .. } => Num::Double(*value),
        Expr::Var(v) => Num::Double(names.iter().position(|n| n == v).map_or(f64::NAN, |i| values[i])),
        Expr::Neg(e) => match eval_num(e, names, values) {
            Num::Int(i) => Num::Int(i.wrapping_neg()),
            Num::Double(d) => Num::Double(-d),
        },
        Expr::Not(e) => flag(!truth(eval_num(e, names, values))),
        Expr::Bin(Op::And, l, r) => flag(truth(eval_num(l, names, values)) && truth(eval_num(r, names, values))),
        Expr::Bin(Op::Or, l, r) => flag(truth(eval_num(l, names, values)) || truth(eval_num(r, names, values))),
        Expr::Bin(op, l, r) => {
            let (l, r) = (eval_num(l, names, values), eval_num(r, names, values));
            if let (Num::Int(a), Num::Int(b)) = (l, r) {
                match op {
                    Op::Add => return a.checked_add(b).map_or(Num::Double(a as f64 + b as f64), Num::Int),
                    Op::Sub => return a.checked_sub(b).map_or(Num::Double(a as f64 - b as f64), Num::Int),
                    Op::Mul => return a.checked_mul(b).map_or(Num::Double(a as f64 * b as f64), Num::Int),
                    Op::Div if b == 0 => return Num::Double(0.0),
                    Op::Div => return Num::Int(a.wrapping_div(b)),
                    Op::Mod if b == 0 => return Num::Double(0.0),
                    Op::Mod => return Num::Int(a.wrapping_rem(b)),
                    _ => {}
                }
            }
            let (a, b) = (l.f(), r.f());
            match op {
                Op::Add => Num::Double(a + b),
                Op::Sub => Num::Double(a - b),
                Op::Mul => Num::Double(a * b),
                Op::Div if b == 0.0 => Num::Double(0.0),
                Op::Div => Num::Double(a / b),
                Op::Mod if b == 0.0 => Num::Double(0.0),
                // Java's `%` on doubles is the truncated remainder, as Rust's.
                Op::Mod => Num::Double(a % b),
                Op::Eq => flag(a == b),
                Op::Ne => flag(a != b),
                Op::Lt => flag(a < b),
                Op::Gt => flag(a > b),
                Op::Le => flag(a <= b),
                Op::Ge => flag(a >= b),
                Op::And | Op::Or => unreachable!("handled above"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// From the engine's answer to series, and out again.

/// One sub-query's answer as expressions see it.
#[derive(Debug, Clone, Default)]
pub struct SubAnswer {
    pub series: Vec<Series>,
    /// UIDs of the tag keys the sub-query filters on (`useQueryTags` joins on these).
    pub query_tagks: Vec<Vec<u8>>,
}

/// Turns the engine's result objects for `query` into one [`SubAnswer`] per sub-query, with the UIDs the join
/// orders and keys by.
pub fn load(
    store: &crate::store::Store,
    query: &rtsd_protocol::query::TsQuery,
    groups: Vec<crate::query::output::GroupOutput>,
) -> Result<Vec<SubAnswer>, crate::store::StoreError> {
    use rtsd_protocol::point::UidKind;
    let uids = store.uids();
    let uid = |kind, name: &str| -> Result<Vec<u8>, crate::store::StoreError> {
        Ok(uids.get(kind, name)?.map(|u| u.as_bytes().to_vec()).unwrap_or_default())
    };
    let mut out: Vec<SubAnswer> = Vec::with_capacity(query.queries.len());
    for sub in &query.queries {
        let mut query_tagks = Vec::new();
        for f in &sub.filters {
            query_tagks.push(uid(UidKind::TagKey, &f.tagk)?);
        }
        out.push(SubAnswer { series: Vec::new(), query_tagks });
    }
    for g in groups {
        let mut tags = Vec::with_capacity(g.tags.len());
        for (k, v) in &g.tags {
            tags.push(Tag {
                key_uid: uid(UidKind::TagKey, k)?,
                value_uid: uid(UidKind::TagValue, v)?,
                key: k.clone(),
                value: v.clone(),
            });
        }
        tags.sort_by(|a, b| a.key_uid.cmp(&b.key_uid));
        let mut aggregate_tags = Vec::with_capacity(g.aggregate_tags.len());
        for k in &g.aggregate_tags {
            aggregate_tags.push((uid(UidKind::TagKey, k)?, k.clone()));
        }
        aggregate_tags.sort();
        let series = Series {
            metrics: vec![(uid(UidKind::Metric, &g.metric)?, g.metric.clone())],
            tags,
            aggregate_tags,
            points: g.dps.clone(),
            alias: None,
        };
        if let Some(answer) = out.get_mut(g.sub_query) {
            answer.series.push(series);
        }
    }
    Ok(out)
}

/// A series as an `/api/query` result object (gexp answers in that format). An aliased series prints its
/// alias as the metric and no tags, as 2.4's `PostAggregatedDataPoints` does.
pub fn to_group_output(s: &Series) -> crate::query::output::GroupOutput {
    let aliased = s.alias.is_some();
    crate::query::output::GroupOutput {
        metric: s.metric_name(),
        tags: if aliased { Vec::new() } else { s.tags.iter().map(|t| (t.key.clone(), t.value.clone())).collect() },
        aggregate_tags: if aliased { Vec::new() } else { s.aggregate_tags.iter().map(|t| t.1.clone()).collect() },
        dps: s.points.clone(),
        ..crate::query::output::GroupOutput::default()
    }
}

/// A double output value; NaN as OpenTSDB prints it.
fn double(v: f64) -> OutValue {
    if v.is_nan() {
        OutValue::NaN
    } else {
        OutValue::Double(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtsd_protocol::query::exp::parse_expression;

    fn tag(k: u8, v: u8, key: &str, value: &str) -> Tag {
        Tag { key_uid: vec![k], value_uid: vec![v], key: key.into(), value: value.into() }
    }

    fn series(metric: &str, muid: u8, tags: Vec<Tag>, points: &[(i64, f64)]) -> Series {
        Series {
            metrics: vec![(vec![muid], metric.into())],
            tags,
            points: points.iter().map(|&(t, v)| (t, double(v))).collect(),
            ..Series::default()
        }
    }

    fn ints(metric: &str, points: &[(i64, i64)]) -> Series {
        Series {
            metrics: vec![(vec![1], metric.into())],
            points: points.iter().map(|&(t, v)| (t, OutValue::Int(v))).collect(),
            ..Series::default()
        }
    }

    fn values(s: &Series) -> Vec<(i64, OutValue)> {
        s.points.clone()
    }

    const UNION: JoinSpec = JoinSpec { operator: SetOperator::Union, use_query_tags: false, include_agg_tags: true };
    const INTERSECTION: JoinSpec =
        JoinSpec { operator: SetOperator::Intersection, use_query_tags: false, include_agg_tags: true };

    fn exp(text: &str, operands: &[Operand], spec: JoinSpec) -> Result<Vec<Series>, String> {
        let e = parse_expression(text).unwrap();
        let names: Vec<String> = operands.iter().map(|o| o.name.to_string()).collect();
        let sets = join("e", operands, &spec)?;
        Ok(combine(operands, &sets, Timestamps::Shared, |v| eval(&e, &names, v)))
    }

    // spec: query §6.3 — JEXL arithmetic: precedence, division and remainder by zero are 0, integer literals.
    #[test]
    fn operators() {
        let names = vec!["a".to_string(), "b".to_string()];
        let ev = |t: &str, a: f64, b: f64| eval(&parse_expression(t).unwrap(), &names, &[a, b]);
        assert_eq!(ev("a + b * 2", 1.0, 3.0), 7.0);
        assert_eq!(ev("(a + b) * 2", 1.0, 3.0), 8.0);
        assert_eq!(ev("a - b", 1.0, 3.0), -2.0);
        assert_eq!(ev("a / b", 1.0, 4.0), 0.25);
        assert_eq!(ev("a / b", 1.0, 0.0), 0.0);
        assert_eq!(ev("a % b", 7.5, 2.0), 1.5);
        assert_eq!(ev("a % b", -7.5, 2.0), -1.5);
        assert_eq!(ev("a % b", 7.0, 0.0), 0.0);
        assert_eq!(ev("-a + b", 1.0, 3.0), 2.0);
        assert_eq!(ev("a + 7 / 2", 0.0, 0.0), 3.0);
        assert_eq!(ev("a + 7 / 0", 1.0, 0.0), 1.0);
        assert_eq!(ev("a + 7.0 / 2", 0.0, 0.0), 3.5);
        assert!(ev("a + b", f64::NAN, 1.0).is_nan());
        assert!(ev("a / b", 1.0, f64::NAN).is_nan());
        assert_eq!(ev("a / b", f64::NAN, 0.0), 0.0);
        // 2.4's TestExpressionIterator.aGreaterThanb / aLessThanb: comparisons give 1 or 0.
        assert_eq!(ev("a > b", 1.0, 11.0), 0.0);
        assert_eq!(ev("a < b", 1.0, 11.0), 1.0);
        assert_eq!(ev("a >= b", 2.0, 2.0), 1.0);
        assert_eq!(ev("a <= b", 3.0, 2.0), 0.0);
        assert_eq!(ev("a == b", 2.0, 2.0), 1.0);
        assert_eq!(ev("a != b", 2.0, 2.0), 0.0);
        assert_eq!(ev("a == b", f64::NAN, f64::NAN), 0.0);
        assert_eq!(ev("(a > b) * 10 + 1", 3.0, 2.0), 11.0);
        assert_eq!(ev("a && b", 1.0, 0.0), 0.0);
        assert_eq!(ev("a || b", 1.0, 0.0), 1.0);
        assert_eq!(ev("!a", f64::NAN, 0.0), 1.0);
        assert_eq!(ev("not a or b", 5.0, 0.0), 0.0);
    }

    // spec: query §6.3 — TestQueryExecutor's threeSameEGaps fixture: sets by tag, a missing point reads the
    // metric's fill (zero by default), rows at every timestamp of any set.
    #[test]
    fn union_with_default_fill() {
        let (t0, t1, t2) = (1431561600000, 1431561660000, 1431561720000);
        let d = |v: u8, name: &str| vec![tag(1, v, "D", name), tag(2, 9, "E", "E")];
        let a = vec![
            series("A", 1, d(1, "D"), &[(t0, 1.0), (t2, 3.0)]),
            series("A", 1, d(2, "F"), &[(t0, 4.0), (t1, 5.0)]),
            series("A", 1, d(3, "G"), &[(t1, 8.0), (t2, 9.0)]),
        ];
        let b = vec![
            series("B", 2, d(1, "D"), &[(t2, 13.0)]),
            series("B", 2, d(2, "F"), &[(t1, 15.0)]),
            series("B", 2, d(3, "G"), &[(t2, 19.0)]),
        ];
        let ops = [
            Operand { name: "a", series: &a, fill: 0.0, query_tagks: None },
            Operand { name: "b", series: &b, fill: 0.0, query_tagks: None },
        ];
        for spec in [UNION, INTERSECTION] {
            let out = exp("a + b", &ops, spec).unwrap();
            let rows: Vec<Vec<f64>> = (0..3).map(|r| out.iter().map(|s| s.points[r].1.to_f64()).collect()).collect();
            assert_eq!(rows, vec![vec![1.0, 4.0, 0.0], vec![0.0, 20.0, 8.0], vec![16.0, 0.0, 28.0]]);
            assert_eq!(out[0].metrics, vec![(vec![1], "A".to_string()), (vec![2], "B".to_string())]);
            assert_eq!(out[1].tags, d(2, "F"));
        }
        // A NaN fill is infectious; a scalar fill is used as is.
        let ops_nan = [
            Operand { name: "a", series: &a, fill: f64::NAN, query_tagks: None },
            Operand { name: "b", series: &b, fill: 10.0, query_tagks: None },
        ];
        let out = exp("a + b", &ops_nan, UNION).unwrap();
        assert_eq!(
            values(&out[0]),
            vec![(t0, OutValue::Double(11.0)), (t1, OutValue::NaN), (t2, OutValue::Double(16.0))]
        );
    }

    // spec: query §6.3 — union keeps a series with no partner (the partner reads 0), intersection drops it; an
    // intersection that pairs nothing is an error, an empty operand gives nothing.
    #[test]
    fn join_modes() {
        let a = vec![series("A", 1, vec![tag(1, 1, "host", "x")], &[(1000, 1.0)])];
        let b = vec![
            series("B", 2, vec![tag(1, 1, "host", "x")], &[(1000, 10.0)]),
            series("B", 2, vec![tag(1, 2, "host", "y")], &[(1000, 20.0)]),
        ];
        let ops = |a, b| {
            [
                Operand { name: "a", series: a, fill: 0.0, query_tagks: None },
                Operand { name: "b", series: b, fill: 0.0, query_tagks: None },
            ]
        };
        let out = exp("a * b + b", &ops(&a, &b), UNION).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(values(&out[1]), vec![(1000, OutValue::Double(20.0))]);
        // The set's tags come from `a`, which has no series in it.
        assert!(out[1].tags.is_empty());
        assert_eq!(out[1].metrics, vec![(vec![2], "B".to_string())]);
        let out = exp("a * b", &ops(&a, &b), INTERSECTION).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Double(10.0))]);
        let c = vec![series("C", 3, vec![tag(1, 3, "host", "z")], &[(1000, 1.0)])];
        assert_eq!(
            exp("a * b", &ops(&a, &c), INTERSECTION).unwrap_err(),
            "No intersections found: IntersectionIterator(id=e, useQueryTags=false, includeAggTags=true, index=0, \
             queries={a=ExpressionIterator(id=a, index=0, dpsSize=1), b=ExpressionIterator(id=b, index=1, dpsSize=1)})"
        );
        // Only when every operand is empty is an intersection empty without an error.
        assert!(exp("a * b", &ops(&[], &[]), INTERSECTION).unwrap().is_empty());
        assert!(exp("a * b", &ops(&a, &[]), INTERSECTION).unwrap_err().starts_with("No intersections found: "));
    }

    // spec: query §6.3 — useQueryTags joins on the filtered keys only; includeAggTags keys on aggregated tags.
    #[test]
    fn join_keys() {
        let mut a = series("A", 1, vec![tag(1, 1, "host", "x"), tag(2, 5, "dc", "lga")], &[(1000, 1.0)]);
        let b = series("B", 2, vec![tag(1, 1, "host", "x"), tag(2, 6, "dc", "sjc")], &[(1000, 2.0)]);
        let tagks = vec![vec![1u8]];
        let ops = |a: &[Series], b: &[Series], q: bool| -> Vec<Vec<Option<usize>>> {
            let o = [
                Operand { name: "a", series: a, fill: 0.0, query_tagks: Some(&tagks) },
                Operand { name: "b", series: b, fill: 0.0, query_tagks: Some(&tagks) },
            ];
            join("e", &o, &JoinSpec { use_query_tags: q, ..UNION }).unwrap()
        };
        assert_eq!(ops(std::slice::from_ref(&a), std::slice::from_ref(&b), false).len(), 2);
        assert_eq!(ops(std::slice::from_ref(&a), std::slice::from_ref(&b), true), vec![vec![Some(0), Some(0)]]);
        a.aggregate_tags = vec![(vec![3], "rack".into())];
        assert_eq!(ops(std::slice::from_ref(&a), std::slice::from_ref(&b), true).len(), 2);
        let o = [
            Operand { name: "a", series: std::slice::from_ref(&a), fill: 0.0, query_tagks: Some(&tagks) },
            Operand { name: "b", series: std::slice::from_ref(&b), fill: 0.0, query_tagks: Some(&tagks) },
        ];
        let spec = JoinSpec { use_query_tags: true, include_agg_tags: false, ..UNION };
        assert_eq!(join("e", &o, &spec).unwrap().len(), 1);
    }

    // spec: query §6.3 — the join key, case by case as 2.4's TestUnionIterator.flattenTags* check it: tags in
    // key order, aggregated keys appended on request, only the query's keys with useQueryTags, and a series
    // without tags keyed empty whatever its aggregated tags.
    #[test]
    fn join_key_cases() {
        let s = Series {
            tags: vec![tag(1, 1, "host", "web01"), tag(2, 2, "dc", "lga")],
            aggregate_tags: vec![(vec![3], "rack".into())],
            ..Series::default()
        };
        let q = vec![vec![1u8]];
        let key = |s: &Series, use_query_tags, include_agg_tags, tagks: Option<&[Vec<u8>]>| {
            join_key(s, &JoinSpec { operator: SetOperator::Union, use_query_tags, include_agg_tags }, tagks)
        };
        assert_eq!(key(&s, false, false, Some(&q)), vec![1, 1, 2, 2]);
        assert_eq!(key(&s, false, true, Some(&q)), vec![1, 1, 2, 2, 3]);
        assert_eq!(key(&s, true, false, Some(&q)), vec![1, 1]);
        assert_eq!(key(&s, true, true, Some(&q)), vec![1, 1, 3]);
        assert_eq!(key(&s, true, false, Some(&[])), Vec::<u8>::new());
        assert_eq!(key(&s, true, true, None), vec![3]);
        let untagged = Series { tags: vec![], ..s.clone() };
        assert_eq!(key(&untagged, false, true, Some(&q)), Vec::<u8>::new());
        let no_agg = Series { aggregate_tags: vec![], ..s };
        assert_eq!(key(&no_agg, false, true, Some(&q)), vec![1, 1, 2, 2]);
    }

    fn call(text: &str, groups: Vec<Vec<Series>>) -> Result<Vec<Series>, String> {
        let mut mq = Vec::new();
        let c = rtsd_protocol::query::gexp::parse_gexp(text, &mut mq).unwrap();
        eval_gexp(&c, &mq, &|i| groups[i].clone())
    }

    // spec: query §6.2 — scale keeps integers integral for a whole factor; its errors.
    #[test]
    fn scale() {
        let s = ints("m", &[(1000, 2), (2000, -3)]);
        let out = call("scale(sum:m,3)", vec![vec![s.clone()]]).unwrap();
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Int(6)), (2000, OutValue::Int(-9))]);
        let out = call("scale(sum:m,0.5)", vec![vec![s.clone()]]).unwrap();
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Double(1.0)), (2000, OutValue::Double(-1.5))]);
        assert_eq!(call("scale(sum:m,'x')", vec![vec![s.clone()]]).unwrap_err(), "Unparseable scale factor value: 0.0");
        assert_eq!(call("scale(sum:m)", vec![vec![s.clone()]]).unwrap_err(), "Missing scaling factor");
        assert_eq!(
            call("scale(2,sum:m)", vec![vec![s.clone()]]).unwrap_err(),
            "Unknown parameter type: null in tree: scale(m)"
        );
        assert_eq!(
            call("sum(2,sum:m{host=*},absolute(sum:x:y),sum:n)", vec![vec![], vec![], vec![]]).unwrap_err(),
            "Unknown parameter type: null in tree: sumSeries(absolute(y),m,n)"
        );
        let nan = Series { points: vec![(1000, OutValue::NaN), (2000, OutValue::Null)], ..s };
        assert_eq!(
            values(&call("scale(sum:m,2)", vec![vec![nan]]).unwrap()[0]),
            vec![(1000, OutValue::NaN), (2000, OutValue::Null)]
        );
    }

    // spec: query §6.2 — absolute, alias (with @tag templates; values untouched, unlike 2.4.1's copy of absolute).
    #[test]
    fn absolute_and_alias() {
        let s = Series { tags: vec![tag(1, 1, "host", "web01")], ..ints("m", &[(1000, -2)]) };
        let out = call("absolute(sum:m)", vec![vec![s.clone()]]).unwrap();
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Int(2))]);
        let out = call("alias(sum:m,cpu.@host)", vec![vec![s.clone()]]).unwrap();
        assert_eq!(out[0].metric_name(), "cpu.web01");
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Int(-2))]);
        assert_eq!(call("alias(sum:m)", vec![vec![s]]).unwrap_err(), "Missing the alias");
    }

    // spec: query §6.2 — the series functions pair series by tags and keep each set's own timestamps.
    #[test]
    fn series_functions() {
        let a = vec![
            series("a", 1, vec![tag(1, 1, "host", "x")], &[(1000, 6.0), (2000, 8.0)]),
            series("a", 1, vec![tag(1, 2, "host", "y")], &[(3000, 1.0)]),
        ];
        let b = vec![series("b", 2, vec![tag(1, 1, "host", "x")], &[(1000, 2.0), (2000, 0.0)])];
        let out = call("divideSeries(sum:a,sum:b)", vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Double(3.0)), (2000, OutValue::Double(0.0))]);
        assert_eq!(values(&out[1]), vec![(3000, OutValue::Double(0.0))]);
        assert_eq!(out[0].metric_name(), "a");
        let out = call("sumSeries(sum:a,sum:b)", vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Double(8.0)), (2000, OutValue::Double(8.0))]);
        let out = call("diffSeries(sum:a,sum:b)", vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(values(&out[1]), vec![(3000, OutValue::Double(1.0))]);
        let out = call("multiply(sum:a,sum:b)", vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(values(&out[0]), vec![(1000, OutValue::Double(12.0)), (2000, OutValue::Double(0.0))]);
        assert_eq!(call("sumSeries(sum:a)", vec![a]).unwrap_err(), "Must have 2 to 26 series, got 1 instead");
    }

    // spec: query §6.2 — movingAverage by count and by time.
    #[test]
    fn moving_averages() {
        let s = series("m", 1, vec![], &[(0, 1.0), (60_000, 2.0), (120_000, f64::NAN), (180_000, 4.0), (240_000, 6.0)]);
        let out = call("movingAverage(sum:m,2)", vec![vec![s.clone()]]).unwrap();
        let v: Vec<f64> = out[0].points.iter().map(|p| p.1.to_f64()).collect();
        assert_eq!(v, vec![0.0, 1.5, 1.5, 3.0, 5.0]);
        let out = call("movingAverage(sum:m,'2min')", vec![vec![s.clone()]]).unwrap();
        let v: Vec<f64> = out[0].points.iter().map(|p| p.1.to_f64()).collect();
        assert_eq!(v, vec![0.0, 0.0, 2.0, 4.0, 5.0]);
        for (p, e) in [
            ("movingAverage(sum:m)", "Missing moving average window size"),
            ("movingAverage(sum:m,0)", "Moving average window must be an integer greater than zero"),
            ("movingAverage(sum:m,x)", "Unparseable window size: x"),
            ("movingAverage(sum:m,'x')", "Invalid moving window parameter: 'x'"),
            ("movingAverage(sum:m,'5y')", "Unknown time unit=y in window='5y'"),
        ] {
            assert_eq!(call(p, vec![vec![s.clone()]]).unwrap_err(), e, "{p}");
        }
    }

    // spec: query §6.2 — highestCurrent ranks by the last value, highestMax by the largest.
    #[test]
    fn highest() {
        let a = series("m", 1, vec![tag(1, 1, "host", "a")], &[(1000, 9.0), (2000, 1.0)]);
        let b = series("m", 1, vec![tag(1, 2, "host", "b")], &[(1000, 2.0), (2000, 3.0)]);
        let out = call("highestCurrent(sum:m,1)", vec![vec![a.clone(), b.clone()]]).unwrap();
        assert_eq!(out, vec![b.clone()]);
        let out = call("highestMax(sum:m,1)", vec![vec![a.clone(), b.clone()]]).unwrap();
        assert_eq!(out, vec![a.clone()]);
        assert_eq!(call("highestMax(sum:m,5)", vec![vec![a.clone(), b.clone()]]).unwrap().len(), 2);
        for (p, e) in [
            ("highestMax(sum:m)", "Need aggregation window for moving average"),
            ("highestMax(sum:m,0)", "Top n value must be greater than zero: 0"),
            ("highestMax(sum:m,-1)", "Unparseable top n value: -1"),
        ] {
            assert_eq!(call(p, vec![vec![a.clone()]]).unwrap_err(), e, "{p}");
        }
    }

    // spec: query §6.2 — timeShift moves timestamps forward; its parameter errors.
    #[test]
    fn time_shifts() {
        let s = ints("m", &[(1000, 5)]);
        let out = call("timeShift(sum:m,'1day')", vec![vec![s.clone()]]).unwrap();
        assert_eq!(values(&out[0]), vec![(86_401_000, OutValue::Int(5))]);
        assert_eq!(values(&call("shift(sum:m,'2min')", vec![vec![s.clone()]]).unwrap()[0])[0].0, 121_000);
        let f = series("m", 1, vec![], &[(1000, 0.5)]);
        assert_eq!(
            values(&call("shift(sum:m,'1sec')", vec![vec![f]]).unwrap()[0]),
            vec![(2000, OutValue::Double(0.5))]
        );
        for (p, e) in [
            ("timeShift(sum:m)", "Need amount of timeshift to perform timeshift"),
            ("timeShift(sum:m,1d)", "Invalid timeshift parameter: eg '10min'"),
            ("timeShift(sum:m,'d')", "Invalid Parameter: 'd'"),
            ("timeShift(sum:m,'1y')", "unknown time unit=y"),
            ("timeShift(sum:m,'0min')", "timeshift <= 0"),
        ] {
            assert_eq!(call(p, vec![vec![s.clone()]]).unwrap_err(), e, "{p}");
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn arb_series(metric: &'static str, muid: u8) -> impl Strategy<Value = Series> {
            (0u8..4, proptest::collection::btree_map(0i64..20, -5i64..5, 0..6)).prop_map(move |(host, points)| {
                let points: Vec<(i64, f64)> = points.into_iter().map(|(t, v)| (t * 1000, v as f64)).collect();
                series(metric, muid, vec![tag(1, host, "host", "h")], &points)
            })
        }

        proptest! {
            // spec: query §6.3 — a union puts every series in a set; every result has one point per shared
            // timestamp, in order; an intersection keeps only sets both sides have.
            #[test]
            fn joins_cover_their_inputs(
                a in proptest::collection::vec(arb_series("A", 1), 0..5),
                b in proptest::collection::vec(arb_series("B", 2), 0..5),
            ) {
                let ops = [
                    Operand { name: "a", series: &a, fill: 0.0, query_tagks: None },
                    Operand { name: "b", series: &b, fill: f64::NAN, query_tagks: None },
                ];
                let sets = join("e", &ops, &UNION).unwrap();
                let mut keys_a: Vec<u8> = a.iter().map(|s| s.tags[0].value_uid[0]).collect();
                let mut keys_b: Vec<u8> = b.iter().map(|s| s.tags[0].value_uid[0]).collect();
                keys_a.sort_unstable();
                keys_a.dedup();
                keys_b.sort_unstable();
                keys_b.dedup();
                let mut all = keys_a.clone();
                all.extend(&keys_b);
                all.sort_unstable();
                all.dedup();
                prop_assert_eq!(sets.len(), all.len());
                let out = combine(&ops, &sets, Timestamps::Shared, |v| v[0] - v[1]);
                for s in &out {
                    prop_assert!(s.points.windows(2).all(|w| w[0].0 < w[1].0));
                    prop_assert_eq!(s.points.len(), out[0].points.len());
                }
                match join("e", &ops, &INTERSECTION) {
                    Ok(sets) => {
                        let both = keys_a.iter().filter(|k| keys_b.contains(k)).count();
                        prop_assert_eq!(sets.len(), both);
                    }
                    Err(m) => prop_assert!(m.starts_with("No intersections found: ")),
                }
            }
        }
    }
}
