//! `/api/query/gexp`'s Graphite-style functions over the series of metric queries (src/query/expression/*.java
//! of 2.4.1; spec: query §6.2).

use super::*;
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
        "scale" => scale(all(), &params),
        "alias" => alias(all(), &params),
        "movingAverage" => {
            let (window, timed) = moving_window(params.first().copied())?;
            Ok(all().map(|s| moving_average(s, window, timed)).collect())
        }
        "highestCurrent" | "highestMax" => {
            let n = top_n(params.first().copied())?;
            Ok(highest(all(), n, call.function == "highestCurrent"))
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

/// `scale(series, factor)`: every value times the factor; integers stay integers when the factor is whole.
fn scale(series: impl Iterator<Item = Series>, params: &[&str]) -> Result<Vec<Series>, GexpError> {
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
    Ok(series
        .map(|s| {
            map_points(s, |v| match v {
                OutValue::Int(i) if whole => OutValue::Int((factor as i64).wrapping_mul(i)),
                other => double(factor * other.to_f64()),
            })
        })
        .collect())
}

/// `alias(series, name...)`: the parameters joined by commas name each series, `@tagk` replaced by the series'
/// value of that tag (in the tags' `HashMap` order, as 2.4 replaces them).
fn alias(series: impl Iterator<Item = Series>, params: &[&str]) -> Result<Vec<Series>, GexpError> {
    if params.is_empty() {
        return Err("Missing the alias".into());
    }
    let template = params.join(",");
    Ok(series
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

/// `highestCurrent(series, n)` / `highestMax(series, n)` (`current` false): the `n` series with the highest last
/// (or largest) value, highest first.
fn highest(series: impl Iterator<Item = Series>, n: usize, current: bool) -> Vec<Series> {
    // highestCurrent leaves out series without points before ranking; highestMax ranks them last.
    let candidates: Vec<Series> = series.filter(|s| !current || !s.points.is_empty()).collect();
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
    ranked.into_iter().take(n).map(|(_, i)| candidates[i].clone()).collect()
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
