//! Expressions over query answers (spec: query §6.2, §6.3): the join engine that pairs the series of several
//! operands by their tags, the arithmetic of `/api/query/exp`, and the Graphite-style functions of
//! `/api/query/gexp`. Everything here but [`load`] (which turns the engine's answer to the sub-queries into
//! [`Series`], looking up the UIDs the join orders by) is pure; the sub-queries themselves are ordinary
//! `/api/query` sub-queries run by [`super::exec`].
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

use super::series::OutValue;

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
// /api/query/gexp functions (src/query/expression/*.java of 2.4.1).

/// A gexp evaluation error: 2.4 answers them all with 500 (they are `IllegalArgumentException`s and the like).
pub type GexpError = String;

/// Evaluates one `exp=` call; `metric` gives the answer (its groups) of the `i`-th metric query, whose text is
/// `metric_queries[i]`.
pub fn eval_gexp(
    call: &GexpCall,
    metric_queries: &[String],
    metric: &dyn Fn(usize) -> Vec<Series>,
) -> Result<Vec<Series>, GexpError> {
    // 2.4 walks its series arguments by position and fails on a literal that comes before one, before
    // evaluating any (ExpressionTree.evaluate).
    let series_args = call.args.iter().filter(|a| !matches!(a, GexpArg::Literal(_))).count();
    if call.args.iter().take(series_args).any(|a| matches!(a, GexpArg::Literal(_))) {
        return Err(format!("Unknown parameter type: null in tree: {}", tree_string(call, metric_queries)));
    }
    let mut inputs: Vec<Vec<Series>> = Vec::new();
    let mut params: Vec<&str> = Vec::new();
    for arg in &call.args {
        match arg {
            GexpArg::Call(c) => inputs.push(eval_gexp(c, metric_queries, metric)?),
            GexpArg::Metric(i) => inputs.push(metric(*i)),
            GexpArg::Literal(l) => params.push(l),
        }
    }
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let all = || inputs.iter().flatten().cloned();
    match call.function.as_str() {
        "absolute" => Ok(all().map(|s| map_values(s, |v| v.abs(), |i| i.wrapping_abs())).collect()),
        "scale" => {
            let factor = params.first().ok_or("Missing scaling factor")?;
            let ok = !factor.is_empty() && factor.chars().all(|c| c.is_ascii_digit() || c == '-' || c == '.');
            let factor: f64 = if ok {
                rtsd_protocol::number::parse_java_double(factor)
                    .map_err(|_| "Invalid parameter, must be an integer or floating point".to_string())?
            } else {
                // 2.4 prints the factor it did not parse: always its initial 0.
                return Err("Unparseable scale factor value: 0.0".into());
            };
            let whole = factor == factor.floor() && factor.is_finite();
            Ok(all()
                .map(|s| {
                    map_points(s, |v| match v {
                        OutValue::Int(i) if whole => OutValue::Int((factor as i64).wrapping_mul(i)),
                        other => double(factor * other.to_f64()),
                    })
                })
                .collect())
        }
        "alias" => {
            if params.is_empty() {
                return Err("Missing the alias".into());
            }
            let template = params.join(",");
            Ok(all()
                .map(|mut s| {
                    let mut name = template.clone();
                    if name.contains('@') && !s.tags.is_empty() {
                        let keys: Vec<&str> = s.tags.iter().map(|t| t.key.as_str()).collect();
                        for i in javafmt::hashmap_order(&keys) {
                            name = name.replace(&format!("@{}", s.tags[i].key), &s.tags[i].value);
                        }
                    }
                    s.alias = Some(name);
                    s
                })
                .collect())
        }
        "movingAverage" => {
            let (window, timed) = moving_window(params.first().copied())?;
            Ok(all().map(|s| moving_average(s, window, timed)).collect())
        }
        "highestCurrent" | "highestMax" => {
            let n = top_n(params.first().copied())?;
            let current = call.function == "highestCurrent";
            // highestCurrent leaves out series without points before ranking; highestMax ranks them last.
            let candidates: Vec<Series> = all().filter(|s| !current || !s.points.is_empty()).collect();
            let mut ranked: Vec<(f64, usize)> = candidates
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let values = s.points.iter().map(|p| p.1.to_f64()).filter(|v| !v.is_nan());
                    let rank = if current {
                        s.points.last().map_or(f64::NEG_INFINITY, |p| p.1.to_f64())
                    } else {
                        values.fold(f64::NEG_INFINITY, f64::max)
                    };
                    (if rank.is_nan() { f64::NEG_INFINITY } else { rank }, i)
                })
                .collect();
            // Descending and stable, as Java's Arrays.sort on the (value, position) entries.
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            Ok(ranked.into_iter().take(n).map(|(_, i)| candidates[i].clone()).collect())
        }
        "shift" | "timeShift" => {
            let shift = time_shift(params.first().copied())?;
            // Only the first series argument is shifted (2.4 reads results.get(0)).
            Ok(inputs[0]
                .iter()
                .cloned()
                .map(|mut s| {
                    for p in &mut s.points {
                        p.0 += shift;
                    }
                    s
                })
                .collect())
        }
        "sumSeries" | "sum" | "diffSeries" | "difference" | "multiplySeries" | "multiply" | "divideSeries"
        | "divide" => {
            if inputs.len() < 2 || inputs.len() > 26 {
                return Err(format!("Must have 2 to 26 series, got {} instead", inputs.len()));
            }
            let op = match call.function.as_str() {
                "sumSeries" | "sum" => Op::Add,
                "diffSeries" | "difference" => Op::Sub,
                "multiplySeries" | "multiply" => Op::Mul,
                _ => Op::Div,
            };
            series_arithmetic(&inputs, op)
        }
        other => Err(format!("Function {other} has not been implemented")),
    }
}

/// 2.4's `ExpressionTree.toString()`: the function's name as its class writes it, with the nested calls and then
/// the metric names (tags and everything before the last `:` dropped) inside; `alias` adds its parameters.
fn tree_string(call: &GexpCall, metric_queries: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut params: Vec<&str> = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    for arg in &call.args {
        match arg {
            GexpArg::Call(c) => parts.push(tree_string(c, metric_queries)),
            GexpArg::Metric(i) => metrics.push(metric_queries.get(*i).map_or("", String::as_str)),
            GexpArg::Literal(l) => params.push(l),
        }
    }
    let cleaned: Vec<&str> = metrics
        .iter()
        .map(|m| {
            // Java's replaceAll("\\{.*\\}", ""): from the first `{` to the last `}`.
            let m = match (m.find('{'), m.rfind('}')) {
                (Some(a), Some(b)) if a < b => &m[..a],
                _ => m,
            };
            m.rsplit(':').next().unwrap_or(m)
        })
        .collect();
    if !cleaned.is_empty() && !cleaned.join(",").is_empty() {
        parts.push(cleaned.join(","));
    }
    let inner = parts.join(",");
    let name = match call.function.as_str() {
        "shift" | "timeShift" => "timeshift",
        "divide" => "divideSeries",
        "sum" => "sumSeries",
        "difference" => "diffSeries",
        "multiply" => "multiplySeries",
        other => other,
    };
    if name == "alias" && !params.is_empty() {
        return format!("alias({inner},{})", params.join(","));
    }
    format!("{name}({inner})")
}

/// `a <op> b <op> c ...` over the arguments, each argument one operand (`a`, `b`, ...): a union join on all tags
/// without aggregated tags, missing and NaN values read as 0, each set at its own members' timestamps.
fn series_arithmetic(inputs: &[Vec<Series>], op: Op) -> Result<Vec<Series>, GexpError> {
    let names: Vec<String> = (0..inputs.len()).map(|i| char::from(b'a' + i as u8).to_string()).collect();
    let operands: Vec<Operand> = inputs
        .iter()
        .zip(&names)
        .map(|(series, name)| Operand { name, series, fill: 0.0, query_tagks: None })
        .collect();
    let spec = JoinSpec { operator: SetOperator::Union, use_query_tags: false, include_agg_tags: false };
    let sets = join("", &operands, &spec)?;
    let mut expr = Expr::Var(names[0].clone());
    for n in &names[1..] {
        expr = Expr::Bin(op, Box::new(expr), Box::new(Expr::Var(n.clone())));
    }
    let mut out = combine(&operands, &sets, Timestamps::PerSet, |v| eval(&expr, &names, v));
    // EDPtoDPS names a set after one metric only: the lowest UID.
    for s in &mut out {
        s.metrics.truncate(1);
    }
    Ok(out)
}

fn double(v: f64) -> OutValue {
    if v.is_nan() {
        OutValue::NaN
    } else {
        OutValue::Double(v)
    }
}

fn map_points(mut s: Series, f: impl Fn(OutValue) -> OutValue) -> Series {
    for p in &mut s.points {
        // A `null` (fill policy null) stays null: it is NaN with a different spelling.
        if p.1 != OutValue::Null {
            p.1 = f(p.1);
        }
    }
    s
}

fn map_values(s: Series, fd: impl Fn(f64) -> f64, fi: impl Fn(i64) -> i64) -> Series {
    map_points(s, |v| match v {
        OutValue::Int(i) => OutValue::Int(fi(i)),
        other => double(fd(other.to_f64())),
    })
}

/// `movingAverage`'s window: a point count (`5`) or a quoted time (`'5min'`).
fn moving_window(param: Option<&str>) -> Result<(i64, bool), GexpError> {
    let param = param.map(str::trim).filter(|p| !p.is_empty()).ok_or("Missing moving average window size")?;
    let (window, timed) = if param.bytes().all(|b| b.is_ascii_digit()) {
        (param.parse::<i32>().map_err(|_| "Invalid parameter, must be an integer".to_string())? as i64, false)
    } else if param.len() >= 2 && param.starts_with('\'') && param.ends_with('\'') {
        let digits = param[1..].bytes().take_while(u8::is_ascii_digit).count();
        if digits < 1 {
            return Err(format!("Invalid moving window parameter: {param}"));
        }
        let time: i64 = param[1..1 + digits]
            .parse::<i32>()
            .map_err(|_| format!("Unable to parse moving window parameter: {param}"))?
            .into();
        let unit = &param[1 + digits..param.len() - 1];
        let ms = match unit {
            "day" | "d" => 86_400_000,
            "hr" | "hour" | "h" => 3_600_000,
            "min" | "m" => 60_000,
            "sec" | "s" => 1_000,
            _ => return Err(format!("Unknown time unit={unit} in window={param}")),
        };
        (time * ms, true)
    } else {
        return Err(format!("Unparseable window size: {param}"));
    };
    if window <= 0 {
        return Err("Moving average window must be an integer greater than zero".into());
    }
    Ok((window, timed))
}

/// 2.4's `MovingAverageAggregator` over one series, point by point: with a count window, the mean of the last
/// `window` non-NaN values (0 until there are that many); with a time window, the mean of the points less than
/// `window` ms older than the current one (0 for the first point and until the window has been covered).
fn moving_average(mut s: Series, window: i64, timed: bool) -> Series {
    // Newest first, as 2.4's accumulation list.
    let mut acc: std::collections::VecDeque<(i64, f64)> = std::collections::VecDeque::new();
    let mut started = false;
    for p in &mut s.points {
        let value = p.1.to_f64();
        acc.push_front((p.0, value));
        if timed && !started {
            started = true;
            p.1 = OutValue::Double(0.0);
            continue;
        }
        let (mut sum, mut count, mut met) = (0.0, 0i64, false);
        let mut last_ts: Option<i64> = None;
        let mut covered = 0i64;
        let mut keep = acc.len();
        for (i, &(ts, v)) in acc.iter().enumerate() {
            if timed {
                if let Some(prev) = last_ts {
                    covered += prev - ts;
                    if covered >= window {
                        met = true;
                        keep = i + 1;
                        break;
                    }
                }
                last_ts = Some(ts);
            }
            if !v.is_nan() {
                sum += v;
                count += 1;
            }
            if !timed && count >= window {
                met = true;
                keep = i + 1;
                break;
            }
        }
        acc.truncate(keep);
        p.1 = OutValue::Double(if !met || count == 0 { 0.0 } else { sum / count as f64 });
    }
    s
}

fn top_n(param: Option<&str>) -> Result<usize, GexpError> {
    let param = param.ok_or("Need aggregation window for moving average")?;
    if param.is_empty() {
        return Err("Missing top n value (number of series to return)".into());
    }
    if !param.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("Unparseable top n value: {param}"));
    }
    let n: i32 = param.parse().map_err(|_| "Invalid parameter, must be an integer".to_string())?;
    if n < 1 {
        return Err(format!("Top n value must be greater than zero: {n}"));
    }
    Ok(n as usize)
}

/// `timeShift`'s amount: a quoted `'<n><unit>'`, units `sec`, `min`, `hr`, `day(s)`, `week(s)`.
///
/// 2.4.1 keeps the closing quote in the unit (`'1day'` has unit `day'`), so every quoted shift fails there with
/// `unknown time unit=day'`; rtsd reads the unit without the quote, which is what 2.4's own tests expect.
fn time_shift(param: Option<&str>) -> Result<i64, GexpError> {
    let param = param.ok_or("Need amount of timeshift to perform timeshift")?;
    if param.is_empty() {
        return Err(format!("Invalid timeshift='{param}'"));
    }
    let param = param.trim();
    if !(param.len() >= 2 && param.starts_with('\'') && param.ends_with('\'')) {
        return Err("Invalid timeshift parameter: eg '10min'".into());
    }
    let digits = param[1..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!("Invalid Parameter: {param}"));
    }
    let time: i64 = param[1..1 + digits]
        .parse::<i32>()
        .map_err(|_| format!("For input string: \"{}\"", &param[1..1 + digits]))?
        .into();
    let unit = param[1 + digits..param.len() - 1].trim();
    let ms = match unit {
        "sec" => 1_000,
        "min" => 60_000,
        "hr" => 3_600_000,
        "day" | "days" => 86_400_000,
        "week" | "weeks" => 7 * 86_400_000,
        _ => return Err(format!("unknown time unit={unit}")),
    };
    let shift = time * ms;
    if shift <= 0 {
        return Err("timeshift <= 0".into());
    }
    Ok(shift)
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
    groups: Vec<super::output::GroupOutput>,
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
pub fn to_group_output(s: &Series) -> super::output::GroupOutput {
    let aliased = s.alias.is_some();
    super::output::GroupOutput {
        metric: s.metric_name(),
        tags: if aliased { Vec::new() } else { s.tags.iter().map(|t| (t.key.clone(), t.value.clone())).collect() },
        aggregate_tags: if aliased { Vec::new() } else { s.aggregate_tags.iter().map(|t| t.1.clone()).collect() },
        dps: s.points.clone(),
        ..super::output::GroupOutput::default()
    }
}

/// A value as Jackson writes it: integers plain (unless `as_double`), doubles the Java way, NaN and the
/// infinities as quoted strings (`QUOTE_NON_NUMERIC_NUMBERS`), `null` for fill policy null (NaN if `as_double`).
fn json_value(v: OutValue, as_double: bool) -> String {
    match v {
        OutValue::Int(i) if as_double => javafmt::double_to_string(i as f64),
        OutValue::Null if as_double => "\"NaN\"".to_string(),
        other => super::series::format_value(&other),
    }
}

/// An `/api/query/exp` evaluation failure: 2.4's message (a 400 there, raised in its query callback).
pub type ExpError = String;

/// Evaluates an `/api/query/exp` request over its sub-queries' answers (one per metric, in order) and renders
/// the response body (spec: query §6.3).
pub fn run_exp(q: &rtsd_protocol::query::exp::ExpQuery, answers: &[SubAnswer]) -> Result<String, ExpError> {
    use rtsd_protocol::query::exp::{Join, NumericFill};
    let body = &q.body;
    let metrics = body.metrics.as_deref().unwrap_or_default();
    let expressions = body.expressions.as_deref().unwrap_or_default();
    let metric_index = |id: &str| metrics.iter().position(|m| m.id.as_deref() == Some(id));
    let expr_index = |id: &str| expressions.iter().position(|e| e.id.as_deref() == Some(id));
    check_graph(q)?;
    // Every expression is evaluated, in dependency order (2.4 compiles them all, outputs or not).
    let mut results: Vec<Option<Vec<Series>>> = vec![None; expressions.len()];
    let mut pending: Vec<usize> = (0..expressions.len()).collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut i = 0;
        while i < pending.len() {
            let e = pending[i];
            let vars = q.parsed[e].variables();
            let ready = vars.iter().all(|v| expr_index(v).is_none_or(|x| results[x].is_some()));
            if !ready {
                i += 1;
                continue;
            }
            let spec = expressions[e].join.unwrap_or(Join::DEFAULT);
            let operands: Vec<Operand> = vars
                .iter()
                .map(|v| match (metric_index(v), expr_index(v)) {
                    (Some(m), _) => Operand {
                        name: v,
                        series: &answers[m].series,
                        fill: metrics[m].fill_policy.unwrap_or(NumericFill::ZERO).value,
                        query_tagks: Some(&answers[m].query_tagks),
                    },
                    (None, Some(x)) => Operand {
                        name: v,
                        series: results[x].as_deref().unwrap_or_default(),
                        fill: expressions[x].fill_policy.unwrap_or(NumericFill::NAN).value,
                        query_tagks: None,
                    },
                    (None, None) => unreachable!("validated: every variable is a metric or an expression"),
                })
                .collect();
            let join_spec = JoinSpec {
                operator: spec.operator.unwrap_or(SetOperator::Union),
                use_query_tags: spec.use_query_tags,
                include_agg_tags: spec.include_agg_tags,
            };
            let sets = join(expressions[e].id.as_deref().unwrap_or_default(), &operands, &join_spec)?;
            let out = combine(&operands, &sets, Timestamps::Shared, |v| eval(&q.parsed[e], &vars, v));
            results[e] = Some(out);
            pending.remove(i);
        }
        if pending.len() == before {
            return Err(format!("Circular reference found: {}", expressions[pending[0]].id.as_deref().unwrap_or("")));
        }
    }

    let (start, end) = (q.ts_query.start_ms, q.ts_query.end_ms);
    let outputs: Vec<(String, Option<String>)> = match body.outputs.as_deref() {
        Some(o) if !o.is_empty() => o.iter().map(|o| (o.id.clone().unwrap_or_default(), o.alias.clone())).collect(),
        _ if !expressions.is_empty() => expressions.iter().map(|e| (e.id.clone().unwrap_or_default(), None)).collect(),
        _ => metrics.iter().map(|m| (m.id.clone().unwrap_or_default(), None)).collect(),
    };
    let mut json = String::from("{\"outputs\":[");
    let mut first = true;
    for (id, alias) in &outputs {
        let (series, is_expression) = if let Some(x) = expr_index(id) {
            (results[x].as_deref().unwrap_or_default(), true)
        } else if let Some(m) = metric_index(id) {
            (&answers[m].series[..], false)
        } else {
            // 2.4 skips an output that names nothing.
            continue;
        };
        if !first {
            json.push(',');
        }
        first = false;
        render_output(&mut json, id, alias.as_deref(), series, is_expression, (start, end));
    }
    json.push_str("],\"query\":");
    json.push_str(&body.to_json());
    json.push('}');
    Ok(json)
}

/// 2.4's dependency checks between expressions: a self reference, then cycles, found in the order its
/// `HashMap`s iterate.
fn check_graph(q: &rtsd_protocol::query::exp::ExpQuery) -> Result<(), ExpError> {
    let expressions = q.body.expressions.as_deref().unwrap_or_default();
    let ids: Vec<&str> = expressions.iter().map(|e| e.id.as_deref().unwrap_or("")).collect();
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let reaches = |edges: &[(usize, usize)], from: usize, to: usize| {
        let mut stack = vec![from];
        let mut seen = vec![false; ids.len()];
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if !std::mem::replace(&mut seen[n], true) {
                stack.extend(edges.iter().filter(|e| e.0 == n).map(|e| e.1));
            }
        }
        false
    };
    for e in javafmt::hashmap_order(&ids) {
        let vars = q.parsed[e].variables();
        let names: Vec<&str> = vars.iter().map(String::as_str).collect();
        for v in javafmt::hashmap_order(&names) {
            let Some(target) = ids.iter().position(|id| *id == names[v]) else { continue };
            if target == e {
                return Err(format!("Self referencing expression found: {}", ids[e]));
            }
            if reaches(&edges, target, e) {
                return Err(format!("Circular reference found: {}", ids[e]));
            }
            edges.push((e, target));
        }
    }
    Ok(())
}

/// One element of `outputs` (2.4's `SerializeExpressionIterator` / `SerializeSubIterator`): rows of
/// `[timestamp, value per series...]`, `dpsMeta`, and `meta` when there is a series.
fn render_output(
    json: &mut String,
    id: &str,
    alias: Option<&str>,
    series: &[Series],
    is_expression: bool,
    (start, end): (i64, i64),
) {
    use rtsd_protocol::http_json::json_string;
    json.push_str("{\"id\":");
    json.push_str(&json_string(id));
    if let Some(a) = alias {
        json.push_str(",\"alias\":");
        json.push_str(&json_string(a));
    }
    // An expression's series share their timestamps; a metric's are joined here, missing points reading 0.
    let mut times: Vec<i64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    times.sort_unstable();
    times.dedup();
    if is_expression {
        times.retain(|t| (start..=end).contains(t));
    }
    json.push_str(",\"dps\":[");
    for (r, &ts) in times.iter().enumerate() {
        if r > 0 {
            json.push(',');
        }
        json.push('[');
        json.push_str(&ts.to_string());
        for s in series {
            json.push(',');
            let v = match s.points.binary_search_by_key(&ts, |p| p.0) {
                Ok(i) => s.points[i].1,
                Err(_) => OutValue::Double(0.0),
            };
            json.push_str(&json_value(v, true));
        }
        json.push(']');
    }
    // 2.4's bookkeeping: an expression's last timestamp is only recorded from its second row on; a metric's first
    // timestamp is Long.MAX_VALUE when it has no series.
    let (first_ts, last_ts) = if is_expression {
        (times.first().copied().unwrap_or(0), if times.len() > 1 { times[times.len() - 1] } else { 0 })
    } else {
        (
            times.first().copied().unwrap_or(if series.is_empty() { i64::MAX } else { 0 }),
            times.last().copied().unwrap_or(0),
        )
    };
    json.push_str(&format!(
        "],\"dpsMeta\":{{\"firstTimestamp\":{first_ts},\"lastTimestamp\":{last_ts},\"setCount\":{},\"series\":{}}}",
        times.len(),
        series.len()
    ));
    if let Some(head) = series.first() {
        let mut names: Vec<&str> = head.metrics.iter().map(|m| m.1.as_str()).collect();
        names.sort_unstable();
        json.push_str(",\"meta\":[{\"index\":0,\"metrics\":[\"timestamp\"]}");
        for (i, s) in series.iter().enumerate() {
            json.push_str(&format!(",{{\"index\":{},\"metrics\":[", i + 1));
            json.push_str(&names.iter().map(|n| json_string(n)).collect::<Vec<_>>().join(","));
            json.push_str("],\"commonTags\":{");
            let keys: Vec<&str> = s.tags.iter().map(|t| t.key.as_str()).collect();
            let tags: Vec<String> = javafmt::hashmap_order(&keys)
                .into_iter()
                .map(|k| format!("{}:{}", json_string(&s.tags[k].key), json_string(&s.tags[k].value)))
                .collect();
            json.push_str(&tags.join(","));
            json.push_str("},\"aggregatedTags\":[");
            json.push_str(&s.aggregate_tags.iter().map(|t| json_string(&t.1)).collect::<Vec<_>>().join(","));
            json.push_str("]}");
        }
        json.push(']');
    }
    json.push('}');
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
