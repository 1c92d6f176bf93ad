//! `rtsd query [--graph BASEPATH] START [END] AGG [rate [counter[,MAX[,RESET]]]] [downsample N FUNC] METRIC
//! [TAG=VALUE ...] [more queries]`: OpenTSDB's `tsdb query`.
//!
//! The command line is parsed by [`crate::scan::parse_command_line`], each query is turned into the `m=`
//! expression it means (`AGG:rate{counter,MAX,RESET}:Nms-FUNC:METRIC{tags}`) and run by the same engine as
//! `/api/query` ([`crate::query::exec::execute`]), so the CLI and the HTTP API cannot disagree. Output is
//! `tsdb query`'s: one line per point, `metric timestamp value {tags}`, the timestamp in milliseconds, an
//! integer as a long and anything else as Java's `%f` (six decimals), the group's tags as a Java map.
//!
//! `--graph BASEPATH` writes what `tsdb query --graph` writes for Gnuplot: one data file per result
//! (`BASEPATH_0.dat`, ... with `seconds value` lines) and a `BASEPATH.gnuplot` script that plots them.
use std::io::Write;

use rtsd_protocol::javafmt;
use rtsd_protocol::query::{parse_get, TsQuery};

use crate::query::exec::execute;
use crate::query::output::GroupOutput;
use crate::query::OutValue;
use crate::scan::{CliQuery, CliSubQuery};
use crate::store::Store;

/// The `m=` expression of one command-line query.
pub fn m_expression(q: &CliSubQuery) -> String {
    let mut m = q.aggregator.clone();
    if q.rate {
        m.push_str(":rate");
        if let Some((max, reset)) = q.counter {
            m.push_str("{counter");
            if max.is_some() || reset.is_some() {
                m.push(',');
                if let Some(max) = max {
                    m.push_str(&max.to_string());
                }
                if let Some(reset) = reset {
                    m.push(',');
                    m.push_str(&reset.to_string());
                }
            }
            m.push('}');
        }
    }
    if let Some((n, f)) = &q.downsample {
        m.push_str(&format!(":{n}ms-{f}"));
    }
    m.push(':');
    m.push_str(&q.metric);
    if !q.tags.is_empty() {
        m.push('{');
        for (i, (k, v)) in q.tags.iter().enumerate() {
            if i > 0 {
                m.push(',');
            }
            m.push_str(k);
            m.push('=');
            m.push_str(v);
        }
        m.push('}');
    }
    m
}

/// The validated `/api/query` request a command-line query means (one sub-query each, in order).
pub fn to_ts_query(q: &CliQuery, now_ms: i64) -> Result<Vec<TsQuery>, String> {
    let mut out = Vec::with_capacity(q.queries.len());
    for sub in &q.queries {
        let mut params = vec![("start".to_string(), format!("{}ms", q.start_ms)), ("m".to_string(), m_expression(sub))];
        if let Some(end) = q.end_ms {
            params.push(("end".to_string(), format!("{end}ms")));
        }
        out.push(parse_get(&params, now_ms).map_err(|e| e.message)?);
    }
    Ok(out)
}

/// Runs every query and returns each one's result groups, in order.
pub fn run_queries(
    store: &Store,
    q: &CliQuery,
    now_ms: i64,
    limits: crate::config::QueryLimits,
) -> Result<Vec<Vec<GroupOutput>>, String> {
    let mut out = Vec::new();
    for ts in to_ts_query(q, now_ms)? {
        out.push(execute(store, &ts, limits).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// Prints groups as `tsdb query` does; returns the number of lines.
pub fn print_groups(groups: &[GroupOutput], out: &mut impl Write) -> std::io::Result<u64> {
    let mut n = 0;
    for g in groups {
        let pairs: Vec<(&str, &str)> = g.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let tags = javafmt::format_map(&pairs);
        for (ts, value) in &g.dps {
            let Some(value) = cli_value(value) else { continue };
            writeln!(out, "{} {ts} {value} {tags}", g.metric)?;
            n += 1;
        }
    }
    Ok(n)
}

/// A point's value as `CliQuery` prints it: a long as is, a double with `%f` (NaN and the infinities by name);
/// `null` (no value) is not a point.
fn cli_value(value: &OutValue) -> Option<String> {
    match *value {
        OutValue::Null => None,
        OutValue::NaN => Some("NaN".into()),
        OutValue::Int(v) => Some(v.to_string()),
        OutValue::Double(d) => Some(java_percent_f(d)),
    }
}

/// Java's `String.format("%f", d)`: six decimals, rounding half-up on the shortest decimal that round-trips
/// (Java's `FormattedFloatingDecimal`), not on the exact binary value.
pub fn java_percent_f(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    // Shortest round-trip digits and exponent: `{:e}` gives e.g. `1.2345e-7`.
    let sci = format!("{:e}", d.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect();
    // Value = 0.d1d2d3... * 10^(exp+1). Integer part has exp+1 digits (or none when exp < 0).
    let point = exp + 1; // position of the decimal point within `digits`
    let keep = point + 6; // digits kept (may be <= 0)
    let mut kept: Vec<u8> = if keep <= 0 { Vec::new() } else { digits.iter().take(keep as usize).copied().collect() };
    while (kept.len() as i64) < keep {
        kept.push(0);
    }
    let round_up = keep >= 0 && digits.get(keep as usize).is_some_and(|&d| d >= 5);
    let mut point = point;
    if round_up {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                point += 1;
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    // Now kept holds digits with the decimal point after `point` digits (point may be <= 0), and 6 decimals.
    let total_decimals = 6usize;
    let mut int_part = String::new();
    let mut frac_part = String::new();
    let shift = if point < 0 { (-point) as usize } else { 0 };
    let mut all: Vec<u8> = vec![0; shift];
    all.extend(&kept);
    let point = point.max(0) as usize;
    for (i, d) in all.iter().enumerate() {
        if i < point {
            int_part.push((b'0' + d) as char);
        } else if frac_part.len() < total_decimals {
            frac_part.push((b'0' + d) as char);
        }
    }
    while frac_part.len() < total_decimals {
        frac_part.push('0');
    }
    let int_part = int_part.trim_start_matches('0');
    let int_part = if int_part.is_empty() { "0" } else { int_part };
    // Java keeps the sign of negative values that round to zero (`-0.000000`), and of -0.0.
    let sign = if d.is_sign_negative() { "-" } else { "" };
    format!("{sign}{int_part}.{frac_part}")
}

/// Writes Gnuplot files for `--graph BASEPATH`: one `.dat` per group and a script; returns the points written.
pub fn write_graph(basepath: &str, groups: &[GroupOutput], plot_params: &[String]) -> std::io::Result<u64> {
    let mut points = 0;
    let mut script =
        String::from("set terminal png\nset xdata time\nset timefmt \"%s\"\nset format x \"%Y/%m/%d %H:%M\"\n");
    for p in plot_params {
        if let Some((k, v)) = p.trim_start_matches('+').split_once('=') {
            script.push_str(&format!("set {k} {v}\n"));
        }
    }
    script.push_str(&format!("set output \"{basepath}.png\"\n"));
    let mut plots = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let path = format!("{basepath}_{i}.dat");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for (ts, value) in &g.dps {
            if let Some(v) = cli_value(value) {
                writeln!(f, "{} {v}", ts / 1000)?;
                points += 1;
            }
        }
        f.flush()?;
        let pairs: Vec<(&str, &str)> = g.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        plots.push(format!(
            "\"{path}\" using 1:2 title \"{}{}\" with linespoints",
            g.metric,
            javafmt::format_map(&pairs)
        ));
    }
    if plots.is_empty() {
        script.push_str("set label \"No data\" at graph 0.5,0.5 center\nplot 0 notitle\n");
    } else {
        script.push_str("plot ");
        script.push_str(&plots.join(", \\\n     "));
        script.push('\n');
    }
    std::fs::write(format!("{basepath}.gnuplot"), script)?;
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_f_rounds_like_java() {
        assert_eq!(java_percent_f(1.5), "1.500000");
        assert_eq!(java_percent_f(0.0), "0.000000");
        assert_eq!(java_percent_f(-2.25), "-2.250000");
        assert_eq!(java_percent_f(1234567.1234567), "1234567.123457");
        assert_eq!(java_percent_f(0.0000005), "0.000001"); // half-up on the decimal 5.0E-7
        assert_eq!(java_percent_f(0.125), "0.125000");
        assert_eq!(java_percent_f(9.9999995), "10.000000");
        assert_eq!(java_percent_f(1e-9), "0.000000");
        assert_eq!(java_percent_f(1e20), "100000000000000000000.000000");
        assert_eq!(java_percent_f(0.3333333333333333), "0.333333");
        assert_eq!(java_percent_f(2.0 / 3.0), "0.666667");
    }

    #[test]
    fn command_lines_become_m_expressions() {
        let q = crate::scan::parse_command_line(
            &"1356998400 sum rate counter,65535 downsample 60000 avg sys.cpu.user host=web01 dc=*"
                .split(' ')
                .map(String::from)
                .collect::<Vec<_>>(),
            0,
        )
        .unwrap();
        assert_eq!(m_expression(&q.queries[0]), "sum:rate{counter,65535}:60000ms-avg:sys.cpu.user{host=web01,dc=*}");
        let ts = to_ts_query(&q, 1357000000000).unwrap();
        assert_eq!(ts[0].start_ms, 1356998400000);
        assert_eq!(ts[0].end_ms, 1357000000000);
    }

    #[test]
    fn values_print_as_long_or_percent_f() {
        assert_eq!(cli_value(&OutValue::Int(42)).as_deref(), Some("42"));
        assert_eq!(cli_value(&OutValue::Int(-7)).as_deref(), Some("-7"));
        assert_eq!(cli_value(&OutValue::Double(42.5)).as_deref(), Some("42.500000"));
        assert_eq!(cli_value(&OutValue::Double(1.0e7)).as_deref(), Some("10000000.000000"));
        assert_eq!(cli_value(&OutValue::Double(f64::INFINITY)).as_deref(), Some("Infinity"));
        assert_eq!(cli_value(&OutValue::NaN).as_deref(), Some("NaN"));
        assert_eq!(cli_value(&OutValue::Null), None);
    }
}
