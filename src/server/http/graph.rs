//! `/q`, OpenTSDB's graph endpoint (spec: query §6.17, src/tsd/GraphHandler.java): `GET /api/query`'s
//! parameters plus the graph form's, answered as `ascii` lines, the `json` summary or a `png` graph. Without
//! any of the three it sends the browser to the web UI with the same query (`/#start=...&m=...`).
//!
//! The query runs through the `/api/query` engine ([`exec::execute_cancellable`]), so `/q` and `/api/query`
//! cannot disagree. Points are those `/api/query` returns, within [start, end]: OpenTSDB 2.4's `ascii` also
//! printed the rest of the hour-aligned scan window (its issue #997), which its own graphs never showed.
//! Errors are the non-API kind: `{"err":"..."}` with `json`, else an HTML page, always 400 for a bad request.
use std::sync::LazyLock;
use std::time::Instant;

use hyper::{Method, StatusCode};
use regex::Regex;
use rtsd_protocol::http_json::json_string;
use rtsd_protocol::javafmt;
use rtsd_protocol::query::parse_graph_get;

use super::reply::Reply;
use super::request::ApiRequest;
use crate::graph::{self, Key, PlotOptions, PlotSeries, Range, Smooth, Style};
use crate::query::exec;
use crate::query::output::GroupOutput;
use crate::query::{OutValue, QueryError};
use crate::server::Tsd;
use crate::timefmt::now_ms;

/// The graph form's validators, as OpenTSDB 2.4.1 writes them. They are tested with `find()` (anywhere in the
/// value), so e.g. a title needs just one allowed character; rtsd then reads the matched part.
static RANGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\["?-?\d+\.?(\d+)?([eE]-?\d+)?"?:"?-?(\d+\.?\d+?)?([eE]-?\d+)?"?\]"#).expect("valid regex")
});
const LABEL_PATTERN: &str = r"[a-zA-z0-9 \-_]";
static LABEL: LazyLock<Regex> = LazyLock::new(|| Regex::new(LABEL_PATTERN).expect("valid regex"));
const FORMAT_PATTERN: &str = r"(%[a-zA-Z])+[:\/]?\s?";
static FORMAT: LazyLock<Regex> = LazyLock::new(|| Regex::new(FORMAT_PATTERN).expect("valid regex"));
static COLOR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(x|X)[a-fA-F0-9]{6}").expect("valid regex"));
const SMOOTH_PATTERN: &str =
    "unique|frequency|fnormal|cumulative|cnormal|bins|csplines|acsplines|mcsplines|bezier|sbezier|unwrap|zsort";
static SMOOTH: LazyLock<Regex> = LazyLock::new(|| Regex::new(SMOOTH_PATTERN).expect("valid regex"));
const STYLE_PATTERN: &str = "(linespoint|points|circles|dots)";
static STYLE: LazyLock<Regex> = LazyLock::new(|| Regex::new(STYLE_PATTERN).expect("valid regex"));

/// OpenTSDB's `Const.MAX_TIMESPAN`: an end this far in the past gets no more points.
const MAX_TIMESPAN_S: i64 = 3600;

enum Output {
    Ascii,
    Json,
    Png,
}

/// `/q`. `raw_query` is the request's query string as sent (for the redirect to the UI).
pub fn q(req: &ApiRequest, tsd: &Tsd, raw_query: &str) -> Reply {
    let began = Instant::now();
    let json = req.has("json");
    let bad = |message: &str| Reply::page_error(StatusCode::BAD_REQUEST, message, json);
    if req.method != Method::GET && req.method != Method::POST {
        return bad("Method not allowed");
    }
    let output = if req.has("ascii") {
        Output::Ascii
    } else if json {
        Output::Json
    } else if req.has("png") {
        Output::Png
    } else {
        // The graph form lives in the UI: hand it the query (GraphHandler's redirect, header and meta refresh).
        let location = format!("/#{raw_query}");
        // Browsers send quotes and angle brackets percent-encoded, but a hand-made request need not. (A bare `&`
        // is safe in an attribute value and keeps OpenTSDB's bytes.)
        let attribute = location.replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;");
        let body = format!("<html></head><meta http-equiv=\"refresh\" content=\"0; url={attribute}\"></head></html>");
        return Reply::new(StatusCode::OK, super::reply::HTML, body).with_header("Location", location);
    };

    let now = now_ms();
    let query = match parse_graph_get(&req.params, now) {
        Ok(q) => q,
        Err(e) => return bad(&e.message),
    };
    let options = all(req, "o");
    if !options.is_empty() && options.len() != query.queries.len() {
        return bad(&format!("{} `o' parameters, but {} `m' parameters.", options.len(), query.queries.len()));
    }
    let (start_s, end_s) = (query.start_ms.div_euclid(1000), query.end_ms.div_euclid(1000));
    if start_s >= end_s {
        // OpenTSDB's Plot works in seconds: a sub-second query has no graph.
        return bad(&format!("start time ({start_s}) is greater than or equal to end time: {end_s}"));
    }
    let mut plot = match plot_options(req) {
        Ok(p) => p,
        Err(message) => return bad(&message),
    };
    (plot.start_s, plot.end_s) = (start_s, end_s);

    let groups =
        match exec::execute_cancellable(&tsd.store, &query, tsd.config.query_limits, Some(req.cancelled.clone())) {
            Ok((groups, _stats)) => groups,
            Err(e @ QueryError::Cancelled) => {
                tsd.metrics.queries_cancelled.inc();
                return bad(&e.to_string());
            }
            Err(e) if super::reply::query_status(&e).is_server_error() => {
                return Reply::page_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), json)
            }
            Err(e) => return bad(&e.to_string()),
        };
    let max_age = max_age(req, start_s, end_s, now.div_euclid(1000));
    let cache = |reply: Reply| reply.with_header("Cache-Control", format!("max-age={max_age}"));
    match output {
        Output::Ascii => cache(Reply::text(StatusCode::OK, ascii(&groups))),
        Output::Json => Reply::json(StatusCode::OK, summary_json(&groups, query.queries.len(), began)),
        Output::Png => {
            let series: Vec<PlotSeries> = groups
                .iter()
                .map(|g| {
                    let mut s =
                        PlotSeries { title: series_title(g), points: plotted_points(g), ..PlotSeries::default() };
                    if let Some(o) = options.get(g.sub_query) {
                        s.apply_option(o);
                    }
                    s
                })
                .collect();
            match graph::render_png(&plot, &series) {
                Ok(png) => cache(Reply::new(StatusCode::OK, "image/png", png)),
                Err(e) => Reply::page_error(StatusCode::INTERNAL_SERVER_ERROR, &e, json),
            }
        }
    }
}

fn all<'a>(req: &'a ApiRequest, name: &str) -> Vec<&'a str> {
    req.params.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
}

/// `ascii`: `metric seconds value tagk=tagv ...` per point (GraphHandler's `respondAsciiQuery`); integers as
/// Java longs, doubles as Java's `Double.toString`, NaN and fill-`null` points left out.
fn ascii(groups: &[GroupOutput]) -> String {
    let mut out = String::new();
    for g in groups {
        let keys: Vec<&str> = g.tags.iter().map(|(k, _)| k.as_str()).collect();
        let mut tags = String::new();
        for i in javafmt::hashmap_order(&keys) {
            tags.push(' ');
            tags.push_str(&g.tags[i].0);
            tags.push('=');
            tags.push_str(&g.tags[i].1);
        }
        for (ts, value) in &g.dps {
            let value = match *value {
                OutValue::Int(v) => v.to_string(),
                OutValue::Double(d) => javafmt::double_to_string(d),
                OutValue::NaN | OutValue::Null => continue,
            };
            out.push_str(&format!("{} {} {value}{tags}\n", g.metric, ts.div_euclid(1000)));
        }
    }
    out
}

/// Points a graph plots: the non-NaN values, as (seconds, value).
fn plotted_points(g: &GroupOutput) -> Vec<(i64, f64)> {
    g.dps
        .iter()
        .filter(|(_, v)| !matches!(v, OutValue::NaN | OutValue::Null))
        .map(|(ts, v)| (ts.div_euclid(1000), v.to_f64()))
        .collect()
}

/// A series' legend: `metric{tag=value, ...}` (Gnuplot's `title`, from Java's `Map.toString`).
fn series_title(g: &GroupOutput) -> String {
    let pairs: Vec<(&str, &str)> = g.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    format!("{}{}", g.metric, javafmt::format_map(&pairs))
}

/// `json`: `{"plotted":N,"points":N,"etags":[[...],...],"timing":MS}` (GraphHandler's `RunGnuplot`). `plotted`
/// counts the points drawn, `points` the stored points read, `etags` per sub-query the aggregated tag keys of
/// its last result (OpenTSDB overwrites the set for each result).
fn summary_json(groups: &[GroupOutput], sub_queries: usize, began: Instant) -> String {
    let plotted: usize = groups.iter().map(|g| plotted_points(g).len()).sum();
    let points: usize = groups.iter().map(|g| g.aggregated_size).sum();
    let mut etags = Vec::with_capacity(sub_queries);
    for i in 0..sub_queries {
        let tags = groups.iter().rev().find(|g| g.sub_query == i).map(|g| g.aggregate_tags.clone()).unwrap_or_default();
        let keys: Vec<&str> = tags.iter().map(String::as_str).collect();
        let ordered: Vec<String> = javafmt::hashmap_order(&keys).into_iter().map(|i| json_string(keys[i])).collect();
        etags.push(format!("[{}]", ordered.join(",")));
    }
    format!(
        "{{\"plotted\":{plotted},\"points\":{points},\"etags\":[{}],\"timing\":{}}}",
        etags.join(","),
        began.elapsed().as_millis()
    )
}

/// How long clients may cache the answer (GraphHandler's `computeMaxAge`): not at all when the end is in the
/// future; a day when both times are absolute and the end is over an hour old; else ~0.1% of the span.
fn max_age(req: &ApiRequest, start_s: i64, end_s: i64, now_s: i64) -> i64 {
    let relative = |name: &str| req.param(name).is_none_or(|v| v.ends_with("-ago"));
    if end_s > now_s {
        0
    } else if end_s < now_s - MAX_TIMESPAN_S && !relative("start") && !relative("end") {
        86400
    } else {
        (end_s - start_s) >> 10
    }
}

/// A graph-form parameter as GraphHandler's `popParam` reads it: the last value, trimmed and URL-decoded once
/// more, refused when it holds a back-tick (2.4 passed these to Gnuplot).
fn graph_param(req: &ApiRequest, name: &str) -> Result<Option<String>, String> {
    let Some(value) = req.param(name) else { return Ok(None) };
    let value = super::request::percent_decode(value.trim(), true);
    if value.contains('`') || value.contains("%60") || value.contains("&#96;") {
        return Err(format!("Parameter {name} contained a back-tick. That's a no-no."));
    }
    Ok(Some(value))
}

/// The part of `value` a validator finds, or OpenTSDB's error text.
fn found<'a>(value: &'a str, re: &Regex, name: &str, must: &str) -> Result<&'a str, String> {
    re.find(value).map(|m| m.as_str()).ok_or_else(|| format!("'{name}' was invalid. {must}"))
}

/// The graph form's parameters, validated in GraphHandler's order (`wxh`, then `setPlotParams`).
fn plot_options(req: &ApiRequest) -> Result<PlotOptions, String> {
    let mut o = PlotOptions::default();
    if let Some(wxh) = req.param("wxh").filter(|w| !w.is_empty()) {
        (o.width, o.height) = dimensions(wxh)?;
    }
    let must = |pattern: &str| format!("Must satisfy the pattern {pattern}");
    let range = |name: &str| -> Result<Range, String> {
        match graph_param(req, name)? {
            None => Ok(Range::default()),
            Some(v) => {
                let m = found(&v, &RANGE, name, "Must be in the format [min:max].")?;
                Ok(Range::parse(m).unwrap_or_default())
            }
        }
    };
    let label = |name: &str| -> Result<Option<String>, String> {
        match graph_param(req, name)? {
            None => Ok(None),
            Some(v) => found(&v, &LABEL, name, &must(LABEL_PATTERN)).map(|_| Some(v.clone())),
        }
    };
    let format = |name: &str| -> Result<Option<String>, String> {
        match graph_param(req, name)? {
            None => Ok(None),
            Some(v) => found(&v, &FORMAT, name, &must(FORMAT_PATTERN)).map(|_| Some(v.clone())),
        }
    };
    let color = |name: &str| -> Result<Option<plotters::style::RGBColor>, String> {
        match graph_param(req, name)? {
            None => Ok(None),
            Some(v) => {
                let m = found(&v, &COLOR, name, "Must be a hex value e.g. 'xFFFFFF'")?;
                Ok(graph::parse_color(m))
            }
        }
    };
    o.yrange = range("yrange")?;
    o.y2range = range("y2range")?;
    o.ylabel = label("ylabel")?;
    o.y2label = label("y2label")?;
    o.yformat = format("yformat")?;
    o.y2format = format("y2format")?;
    o.xformat = format("xformat")?;
    o.ylog = graph_param(req, "ylog")?.is_some();
    o.y2log = graph_param(req, "y2log")?.is_some();
    if let Some(words) = graph_param(req, "key")? {
        // OpenTSDB's key validator matches any text (every part of it is optional).
        o.key = Key::from_words(&words);
    }
    o.title = label("title")?;
    if let Some(c) = color("bgcolor")? {
        o.background = c;
    }
    if let Some(c) = color("fgcolor")? {
        o.foreground = c;
    }
    if let Some(v) = graph_param(req, "smooth")? {
        o.smooth = Smooth::from_word(found(&v, &SMOOTH, "smooth", &must(SMOOTH_PATTERN))?);
    }
    if let Some(v) = graph_param(req, "style")? {
        o.style = Style::from_word(found(&v, &STYLE, "style", &must(STYLE_PATTERN))?).unwrap_or_default();
    }
    if graph_param(req, "nokey")?.is_some() {
        o.key.shown = false;
    }
    if let Some(tz) = req.param("tz").and_then(|z| rtsd_protocol::query::resolve_timezone(z).ok()) {
        o.zone = tz;
    } else {
        o.zone = jiff::tz::TimeZone::system();
    }
    Ok(o)
}

/// `wxh` (GraphHandler's `setPlotDimensions` and Plot's `setDimensions`), plus rtsd's pixel bound.
fn dimensions(wxh: &str) -> Result<(u32, u32), String> {
    let invalid = || "'wxh' was invalid. Must satisfy the pattern ^\\d+x\\d+$".to_string();
    let (w, h) = wxh.split_once('x').ok_or_else(invalid)?;
    if w.is_empty() || h.is_empty() || !w.bytes().chain(h.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    if wxh.len() < 7 {
        return Err(format!("Parameter wxh too short: {wxh}"));
    }
    if w.len() < 3 {
        // GraphHandler looks for the `x` from the fourth character on.
        return Err(format!("Invalid wxh parameter: {wxh}"));
    }
    // Java's Short.parseShort.
    let short = |s: &str| {
        s.parse::<i16>().map_err(|_| format!("Can't parse wxh '{wxh}': Value out of range. Value:\"{s}\" Radix:10"))
    };
    let (width, height) = (short(w)?, short(h)?);
    let min = graph::MIN_SIDE as i16;
    if width < min || height < min {
        let what = if width < min { "width" } else { "height" };
        return Err(format!("Invalid wxh parameter: {wxh}, {what} smaller than {min} in {width}x{height}"));
    }
    let (width, height) = (width as u32, height as u32);
    if width as u64 * height as u64 > graph::MAX_PIXELS {
        return Err(format!("Invalid wxh parameter: {wxh}, more than {} pixels", graph::MAX_PIXELS));
    }
    Ok((width, height))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::OutPoint;

    fn group(sub_query: usize, tags: &[(&str, &str)], aggregate: &[&str], dps: &[OutPoint]) -> GroupOutput {
        GroupOutput {
            metric: "m".into(),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            aggregate_tags: aggregate.iter().map(|k| k.to_string()).collect(),
            dps: dps.to_vec(),
            aggregated_size: 7,
            sub_query,
            ..GroupOutput::default()
        }
    }

    #[test]
    fn ascii_and_json_leave_out_what_is_not_plotted() {
        // spec: query §6.17: NaN points (and fill-null ones) are skipped; seconds; tags in HashMap order
        let groups = [
            group(
                0,
                &[("dc", "lga"), ("host", "a")],
                &[],
                &[
                    (1000, OutValue::Int(1)),
                    (2500, OutValue::NaN),
                    (3000, OutValue::Null),
                    (4000, OutValue::Double(2.5)),
                ],
            ),
            group(1, &[], &["host", "dc"], &[(5000, OutValue::Int(3))]),
            group(1, &[], &["dc"], &[]),
        ];
        assert_eq!(ascii(&groups), "m 1 1 host=a dc=lga\nm 4 2.5 host=a dc=lga\nm 5 3\n");
        let json = summary_json(&groups, 3, Instant::now());
        // etags: the last result of each sub-query (an empty set for a sub-query with none).
        assert!(json.starts_with(r#"{"plotted":3,"points":21,"etags":[[],["dc"],[]],"timing":"#), "{json}");
    }

    #[test]
    fn dimensions_are_checked_as_opentsdb_does() {
        // spec: query §6.17 (GraphHandler.setPlotDimensions, Plot.setDimensions)
        assert_eq!(dimensions("1286x836"), Ok((1286, 836)));
        assert_eq!(dimensions("100x100"), Ok((100, 100)));
        assert_eq!(dimensions("12x34"), Err("Parameter wxh too short: 12x34".into()));
        assert_eq!(dimensions("800by600"), Err("'wxh' was invalid. Must satisfy the pattern ^\\d+x\\d+$".into()));
        assert_eq!(dimensions("99x1000"), Err("Invalid wxh parameter: 99x1000".into()));
        assert_eq!(
            dimensions("1000x99999"),
            Err("Can't parse wxh '1000x99999': Value out of range. Value:\"99999\" Radix:10".into())
        );
        assert_eq!(
            dimensions("1000x050"),
            Err("Invalid wxh parameter: 1000x050, height smaller than 100 in 1000x50".into())
        );
        assert_eq!(dimensions("8000x8000"), Err("Invalid wxh parameter: 8000x8000, more than 16777216 pixels".into()));
    }
}
