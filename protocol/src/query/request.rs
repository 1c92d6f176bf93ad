//! `/api/query` requests: the GET query string (`m=`, `tsuid=` and flags) and the POST JSON body, parsed into one
//! [`TsQuery`] and validated with OpenTSDB's rules and texts (spec: query §1.1-§1.4, §1.6 `query` echo).

use super::downsample::DownsampleSpec;
use super::filter::{Filter, NO_SUCH_FILTER};
use super::javautil::{
    base64, float_to_string, hash_order_with_capacity, java_lower, java_split, java_trim, split_string,
};
use super::json::{self, as_bool, as_f32, as_int, as_long, as_string, JVal};
use super::rate::{parse_rate_options_msg, RateOptions};
use super::time::{parse_time_msg, resolve_timezone};
use super::{is_aggregator, RequestError};
use crate::http_json::json_string;

/// How a sub-query may use rollup tables (`rollupUsage`; spec: query §6.13). Only meaningful with rollups on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RollupUsage {
    /// `ROLLUP_RAW`: raw data only.
    Raw,
    /// `ROLLUP_NOFALLBACK` (also what any unrecognised text means).
    NoFallback,
    /// `ROLLUP_FALLBACK`
    Fallback,
    /// `ROLLUP_FALLBACK_RAW`
    FallbackRaw,
}

impl RollupUsage {
    /// OpenTSDB's lenient parse: the enum name in any case; anything else (or null) is `ROLLUP_NOFALLBACK`.
    pub fn parse(s: Option<&str>) -> RollupUsage {
        match s.map(str::to_ascii_uppercase).as_deref() {
            Some("ROLLUP_RAW") => RollupUsage::Raw,
            Some("ROLLUP_FALLBACK") => RollupUsage::Fallback,
            Some("ROLLUP_FALLBACK_RAW") => RollupUsage::FallbackRaw,
            _ => RollupUsage::NoFallback,
        }
    }

    /// The enum name as echoed (`ROLLUP_RAW`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RollupUsage::Raw => "ROLLUP_RAW",
            RollupUsage::NoFallback => "ROLLUP_NOFALLBACK",
            RollupUsage::Fallback => "ROLLUP_FALLBACK",
            RollupUsage::FallbackRaw => "ROLLUP_FALLBACK_RAW",
        }
    }
}

/// One sub-query: a metric (or a list of TSUIDs) with its aggregation, downsampling, rate and filters
/// (spec: query §1.2 sub-query object).
///
/// Fields hold what the client sent; [`SubQuery::downsampler`] and [`SubQuery::index`] are filled in by
/// validation. A `TsQuery` returned by [`parse_get`]/[`parse_post`] is validated.
#[derive(Debug, Clone, PartialEq)]
pub struct SubQuery {
    /// Aggregator name, one of [`crate::query::AGGREGATORS`] once validated.
    pub aggregator: String,
    /// The metric name; `None` for TSUID sub-queries (or when not sent).
    pub metric: Option<String>,
    /// Hex TSUIDs; when non-empty they take precedence over `metric` and filters.
    pub tsuids: Option<Vec<String>>,
    /// The downsample specification as sent (`1m-avg`); `Some("")` means none.
    pub downsample: Option<String>,
    /// The parsed downsampler, with the query's calendar flag and time zone applied.
    pub downsampler: Option<DownsampleSpec>,
    /// Rate conversion on.
    pub rate: bool,
    /// Counter options as sent; `None` means defaults ([`SubQuery::effective_rate_options`]).
    pub rate_options: Option<RateOptions>,
    /// Tag filters, in OpenTSDB's order (for GET: the second brace group's, then the first's).
    pub filters: Vec<Filter>,
    /// Only series whose tag-key set is exactly the filtered keys.
    pub explicit_tags: bool,
    /// Histogram percentiles, sorted ascending.
    pub percentiles: Option<Vec<f32>>,
    /// Histogram query returning buckets.
    pub show_histogram_buckets: bool,
    /// `rollupUsage`, when sent.
    pub rollup_usage: Option<RollupUsage>,
    /// `preAggregate` (rollups).
    pub pre_aggregate: bool,
    /// `useFuzzyFilter` (default true; an HBase scan knob, echoed only).
    pub use_fuzzy_filter: bool,
    /// `useMultiGets` (default true; an HBase scan knob, echoed only).
    pub use_multi_gets: bool,
    /// Position among the de-duplicated sub-queries (`query.index`).
    pub index: usize,
}

impl Default for SubQuery {
    fn default() -> Self {
        SubQuery {
            aggregator: String::new(),
            metric: None,
            tsuids: None,
            downsample: None,
            downsampler: None,
            rate: false,
            rate_options: None,
            filters: Vec::new(),
            explicit_tags: false,
            percentiles: None,
            show_histogram_buckets: false,
            rollup_usage: None,
            pre_aggregate: false,
            use_fuzzy_filter: true,
            use_multi_gets: true,
            index: 0,
        }
    }
}

impl SubQuery {
    /// Tag keys that group results: every key with at least one group-by filter, in first-seen order
    /// (spec: query §1.5 step 4).
    pub fn group_by_tagks(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Vec::new();
        for f in self.filters.iter().filter(|f| f.group_by) {
            if !keys.contains(&f.tagk.as_str()) {
                keys.push(&f.tagk);
            }
        }
        keys
    }

    /// Every tag key any filter uses, in first-seen order; a matching series must have all of them
    /// (spec: query §1.5 step 3).
    pub fn filter_tagks(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Vec::new();
        for f in &self.filters {
            if !keys.contains(&f.tagk.as_str()) {
                keys.push(&f.tagk);
            }
        }
        keys
    }

    /// The TSUIDs when this is a TSUID sub-query (non-empty list), else `None`.
    pub fn tsuid_list(&self) -> Option<&[String]> {
        self.tsuids.as_deref().filter(|t| !t.is_empty())
    }

    /// The counter options in force: as sent, or OpenTSDB's defaults.
    pub fn effective_rate_options(&self) -> RateOptions {
        self.rate_options.unwrap_or_default()
    }

    /// A histogram query (percentiles given or buckets requested; spec: query §6.12).
    pub fn is_histogram_query(&self) -> bool {
        self.percentiles.as_ref().is_some_and(|p| !p.is_empty()) || self.show_histogram_buckets
    }

    /// OpenTSDB's sub-query equality, used to drop duplicate sub-queries (spec: query §1.1): aggregator, metric,
    /// TSUIDs, downsample text, rate and its options, filters (compared with [`Filter::same_filter`], which ignores
    /// group-by), explicit tags, pre-aggregation, fuzzy filter, percentiles, histogram buckets and multi-gets.
    pub fn same_query(&self, other: &SubQuery) -> bool {
        self.aggregator == other.aggregator
            && self.metric == other.metric
            && self.tsuids == other.tsuids
            && self.downsample == other.downsample
            && self.rate == other.rate
            && self.rate_options == other.rate_options
            && self.filters.len() == other.filters.len()
            && self.filters.iter().zip(&other.filters).all(|(a, b)| a.same_filter(b))
            && self.explicit_tags == other.explicit_tags
            && self.pre_aggregate == other.pre_aggregate
            && self.use_fuzzy_filter == other.use_fuzzy_filter
            && floats_equal(&self.percentiles, &other.percentiles)
            && self.show_histogram_buckets == other.show_histogram_buckets
            && self.use_multi_gets == other.use_multi_gets
    }

    /// The `query` object OpenTSDB echoes with `showQuery` (spec: query §1.6), keys in its order.
    ///
    /// `filter_tagk_uids` are the UIDs of the filtered tag keys (the engine resolved them); they are written,
    /// sorted and de-duplicated, as base64 in `filterTagKs` (`null` when the sub-query has no filters).
    pub fn to_query_json(&self, filter_tagk_uids: &[Vec<u8>]) -> String {
        self.to_query_json_with_table(filter_tagk_uids, "raw")
    }

    /// [`SubQuery::to_query_json`] of a sub-query answered from a rollup table: `rollupTable` names its
    /// interval (e.g. `1h`) instead of `raw` (spec: query §6.13).
    pub fn to_query_json_with_table(&self, filter_tagk_uids: &[Vec<u8>], rollup_table: &str) -> String {
        let mut o = String::with_capacity(512);
        o.push_str("{\"aggregator\":");
        o.push_str(&json_string(&self.aggregator));
        o.push_str(",\"metric\":");
        push_opt_str(&mut o, self.metric.as_deref());
        o.push_str(",\"tsuids\":");
        match &self.tsuids {
            None => o.push_str("null"),
            Some(list) => push_str_array(&mut o, list.iter().map(String::as_str)),
        }
        o.push_str(",\"downsample\":");
        push_opt_str(&mut o, self.downsample.as_deref());
        o.push_str(",\"rate\":");
        o.push_str(bool_str(self.rate));
        o.push_str(",\"filters\":[");
        for (i, f) in self.filters.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            o.push_str(&f.to_json());
        }
        o.push_str("],\"percentiles\":");
        match &self.percentiles {
            None => o.push_str("null"),
            Some(p) => {
                o.push('[');
                for (i, v) in p.iter().enumerate() {
                    if i > 0 {
                        o.push(',');
                    }
                    if v.is_finite() {
                        o.push_str(&float_to_string(*v));
                    } else {
                        o.push_str(&json_string(&float_to_string(*v)));
                    }
                }
                o.push(']');
            }
        }
        o.push_str(",\"index\":");
        o.push_str(&self.index.to_string());
        o.push_str(",\"rateOptions\":");
        match &self.rate_options {
            None => o.push_str("null"),
            Some(r) => o.push_str(&r.to_json()),
        }
        o.push_str(",\"filterTagKs\":");
        if self.filters.is_empty() {
            o.push_str("null");
        } else {
            let mut uids: Vec<&Vec<u8>> = filter_tagk_uids.iter().collect();
            uids.sort();
            uids.dedup();
            let encoded: Vec<String> = uids.into_iter().map(|u| base64(u)).collect();
            push_str_array(&mut o, encoded.iter().map(String::as_str));
        }
        o.push_str(",\"explicitTags\":");
        o.push_str(bool_str(self.explicit_tags));
        o.push_str(",\"useFuzzyFilter\":");
        o.push_str(bool_str(self.use_fuzzy_filter));
        o.push_str(",\"preAggregate\":");
        o.push_str(bool_str(self.pre_aggregate));
        o.push_str(",\"rollupUsage\":");
        push_opt_str(&mut o, self.rollup_usage.map(RollupUsage::name));
        o.push_str(",\"rollupTable\":");
        push_opt_str(&mut o, Some(rollup_table));
        o.push_str(",\"showHistogramBuckets\":");
        o.push_str(bool_str(self.show_histogram_buckets));
        o.push_str(",\"useMultiGets\":");
        o.push_str(bool_str(self.use_multi_gets));
        o.push_str(",\"tags\":{");
        // OpenTSDB builds this map as `new HashMap<>(filters.size())` of the group-by filters, later puts
        // replacing earlier values of the same key in place.
        let group: Vec<&Filter> = self.filters.iter().filter(|f| f.group_by).collect();
        let keys: Vec<&str> = group.iter().map(|f| f.tagk.as_str()).collect();
        for (n, i) in hash_order_with_capacity(&keys, self.filters.len()).into_iter().enumerate() {
            if n > 0 {
                o.push(',');
            }
            let last = group.iter().rev().find(|f| f.tagk == keys[i]).unwrap_or(&group[i]);
            o.push_str(&json_string(keys[i]));
            o.push(':');
            o.push_str(&json_string(&format!("{}({})", last.kind.name(), last.raw)));
        }
        o.push_str("},\"histogramQuery\":");
        o.push_str(bool_str(self.is_histogram_query()));
        o.push('}');
        o
    }

    /// OpenTSDB's per-sub-query validation (`TSSubQuery.validateAndSetQuery`), in its order.
    fn validate(&mut self) -> Result<(), String> {
        if self.aggregator.is_empty() {
            return Err("Missing the aggregation function".into());
        }
        if !is_aggregator(&self.aggregator) {
            return Err(format!("No such aggregation function: {}", self.aggregator));
        }
        if self.tsuid_list().is_none() && self.metric.as_deref().is_none_or(str::is_empty) {
            return Err("Missing the metric or tsuids, provide at least one".into());
        }
        self.downsampler = match self.downsample.as_deref() {
            Some(d) if !d.is_empty() => Some(DownsampleSpec::parse_msg(d)?),
            _ => None,
        };
        if self.is_histogram_query() {
            if self.aggregator != "none" && self.aggregator != "sum" {
                return Err("Only NONE or SUM aggregation function supported for histogram query".into());
            }
            if self.downsampler.as_ref().is_some_and(|d| !d.function.eq_ignore_ascii_case("sum")) {
                return Err("Only SUM downsampling aggregation supported for histogram query".into());
            }
            for p in self.percentiles.iter().flatten() {
                if *p < 0.0 || *p > 100.0 {
                    return Err(format!("Invalid percentile parameters: {}", float_to_string(*p)));
                }
            }
        }
        Ok(())
    }

    /// Java's `TSSubQuery.toString()`, for the `details` of validation errors.
    fn java_string(&self) -> String {
        let filters: Vec<String> = self.filters.iter().map(Filter::java_string).collect();
        let tsuids = self.tsuids.as_ref().map(|t| t.join(", ")).unwrap_or_default();
        let percentiles = match &self.percentiles {
            None => "null".to_string(),
            Some(p) => format!("[{}]", p.iter().map(|v| float_to_string(*v)).collect::<Vec<_>>().join(", ")),
        };
        format!(
            "TSSubQuery(metric={}, filters=[{}], tsuids=[{}], agg={}, downsample={}, ds_interval={}, rate={}, \
             rate_options={}, explicit_tags=explicit_tags, index={}, percentiles={}, show_histogram_buckets={})",
            self.metric.as_deref().unwrap_or(""),
            filters.join(", "),
            tsuids,
            self.aggregator,
            self.downsample.as_deref().unwrap_or("null"),
            self.downsampler.as_ref().map_or(0, |d| d.interval_ms),
            self.rate,
            self.rate_options.map_or("null".to_string(), |r| r.java_string()),
            self.index,
            percentiles,
            self.show_histogram_buckets
        )
    }
}

fn floats_equal(a: &Option<Vec<f32>>, b: &Option<Vec<f32>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
        _ => false,
    }
}

fn bool_str(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

fn push_opt_str(o: &mut String, s: Option<&str>) {
    match s {
        None => o.push_str("null"),
        Some(s) => o.push_str(&json_string(s)),
    }
}

fn push_str_array<'a>(o: &mut String, items: impl Iterator<Item = &'a str>) {
    o.push('[');
    for (i, s) in items.enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&json_string(s));
    }
    o.push(']');
}

/// The request as Jackson writes OpenTSDB's `TSQuery` where it shows a query (`/api/stats/query`, spec: query
/// §6.14): the fields that have getters of the same name first (`start`, `end`, `timezone`, `options`,
/// `padding`, `queries`, `delete`), then the other getters in declaration order. `options` (the serializer
/// options map) is never set by the JSON serializer, so it is `null`.
pub fn tsquery_json(q: &TsQuery) -> String {
    let mut o = String::with_capacity(256 + 512 * q.queries.len());
    o.push_str("{\"start\":");
    push_opt_str(&mut o, q.start.as_deref());
    o.push_str(",\"end\":");
    push_opt_str(&mut o, q.end.as_deref());
    o.push_str(",\"timezone\":");
    push_opt_str(&mut o, q.timezone.as_deref());
    o.push_str(",\"options\":null,\"padding\":");
    o.push_str(bool_str(q.padding));
    o.push_str(",\"queries\":[");
    for (i, sub) in q.queries.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&sub.to_query_json(&[]));
    }
    o.push(']');
    for (name, value) in [
        ("delete", q.delete),
        ("noAnnotations", q.no_annotations),
        ("globalAnnotations", q.global_annotations),
        ("showTSUIDs", q.show_tsuids),
        ("msResolution", q.ms_resolution),
        ("showQuery", q.show_query),
        ("showStats", q.show_stats),
        ("showSummary", q.show_summary),
        ("useCalendar", q.use_calendar),
    ] {
        o.push_str(&format!(",\"{name}\":{}", bool_str(value)));
    }
    o.push('}');
    o
}

/// A whole `/api/query` request (spec: query §1.1, §1.2), validated: times resolved to ms, sub-queries
/// de-duplicated and indexed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TsQuery {
    /// `start` as sent.
    pub start: Option<String>,
    /// `end` as sent (`None` or empty: now).
    pub end: Option<String>,
    /// Start in epoch ms.
    pub start_ms: i64,
    /// End in epoch ms (now when not given); always > `start_ms`.
    pub end_ms: i64,
    /// `timezone` (POST only): for absolute dates and calendar downsampling. `None`: UTC.
    pub timezone: Option<String>,
    /// `useCalendar` (POST only): every downsampler aligns to the calendar.
    pub use_calendar: bool,
    /// `msResolution` / `ms`: millisecond timestamps in `dps`.
    pub ms_resolution: bool,
    /// `showTSUIDs` / `show_tsuids`
    pub show_tsuids: bool,
    /// `showSummary` / `show_summary`
    pub show_summary: bool,
    /// `showStats` / `show_stats`
    pub show_stats: bool,
    /// `showQuery` / `show_query`
    pub show_query: bool,
    /// `noAnnotations` / `no_annotations`
    pub no_annotations: bool,
    /// `globalAnnotations` / `global_annotations`
    pub global_annotations: bool,
    /// Delete the matched data: a POST body's `"delete"` key (Jackson binds it in 2.4); the daemon also sets it
    /// for `DELETE /api/query`. Either needs `tsd.http.query.allow_delete` (spec: query §1.2, §1.7).
    pub delete: bool,
    /// `padding`: accepted, no effect.
    pub padding: bool,
    /// `arrays`: `dps` as `[[ts,value],...]`. An HTTP parameter: [`parse_get`] reads it; for POST the daemon
    /// sets it from the query string.
    pub arrays: bool,
    /// `overrideByteLimit` (POST).
    pub override_byte_limit: bool,
    /// `overrideDataPointLimit` (POST).
    pub override_data_point_limit: bool,
    /// The sub-queries, de-duplicated, `index` = position.
    pub queries: Vec<SubQuery>,
}

impl TsQuery {
    /// OpenTSDB's `TSQuery.validateAndSetQuery` (spec: query §1.3, §1.4): times, sub-queries, time zone and
    /// calendar flags, indexes. Errors are 400 with the query dump as `details`.
    pub(crate) fn validate(&mut self, now_ms: i64) -> Result<(), RequestError> {
        self.validate_msg(now_ms).map_err(|m| RequestError::bad_request_with(m, self.java_string()))
    }

    fn validate_msg(&mut self, now_ms: i64) -> Result<(), String> {
        let tz = self.timezone.clone();
        let start = self.start.as_deref().filter(|s| !s.is_empty()).ok_or("Missing start time")?;
        self.start_ms = parse_time_msg(start, now_ms, tz.as_deref())?;
        self.end_ms = match self.end.as_deref() {
            Some(e) if !e.is_empty() => parse_time_msg(e, now_ms, tz.as_deref())?,
            _ => now_ms,
        };
        if self.end_ms <= self.start_ms {
            return Err(format!("End time [{}] must be greater than the start time [{}]", self.end_ms, self.start_ms));
        }
        if self.queries.is_empty() {
            return Err("Missing queries".into());
        }
        let use_calendar = self.use_calendar;
        for (i, sub) in self.queries.iter_mut().enumerate() {
            sub.validate()?;
            if let Some(ds) = sub.downsampler.as_mut() {
                if let Some(zone) = tz.as_deref().filter(|z| !z.is_empty()) {
                    resolve_timezone(zone).map_err(|_| "The timezone specification could not be found")?;
                    ds.timezone = Some(zone.to_string());
                }
                if use_calendar {
                    ds.calendar = true;
                }
                // rtsd checks here what OpenTSDB only discovers while running the query.
                if ds.calendar && !ds.run_all {
                    ds.calendar_interval_msg()?;
                }
            }
            sub.index = i;
        }
        Ok(())
    }

    /// Java's `TSQuery.toString()` (the `details` of validation errors).
    pub(crate) fn java_string(&self) -> String {
        let subs: Vec<String> = self.queries.iter().map(SubQuery::java_string).collect();
        format!(
            "TSQuery(start_time={}, end_time={}, subQueries[{}] padding={}, no_annotations={}, \
             with_global_annotations={}, show_tsuids={}, ms_resolution={}, options=[])",
            self.start.as_deref().unwrap_or("null"),
            self.end.as_deref().unwrap_or("null"),
            subs.join(", "),
            self.padding,
            self.no_annotations,
            self.global_annotations,
            self.show_tsuids,
            self.ms_resolution
        )
    }

    /// Drops sub-queries equal to an earlier one ([`SubQuery::same_query`]), keeping the first.
    fn dedupe(&mut self) {
        let mut kept: Vec<SubQuery> = Vec::with_capacity(self.queries.len());
        for q in self.queries.drain(..) {
            if !kept.iter().any(|k| k.same_query(&q)) {
                kept.push(q);
            }
        }
        self.queries = kept;
    }
}

/// The last value of a query-string parameter (OpenTSDB's `getQueryStringParam`).
pub(crate) fn param_last<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Every value of a repeatable parameter, in order.
pub(crate) fn param_all<'a>(params: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    params.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
}

/// Presence flags: any occurrence, whatever its value (`&ms=false` turns ms on; spec: query §0.2).
pub(crate) fn param_has(params: &[(String, String)], name: &str) -> bool {
    params.iter().any(|(k, _)| k == name)
}

/// Parses and validates the query of the old `/q` endpoint (spec: query §6.17): `GET /api/query`'s parameters,
/// with absolute `start` / `end` read in the `tz` zone (GraphHandler parses them itself with `tz`; an unknown
/// zone is UTC, as Java's `TimeZone.getTimeZone` makes it). Downsamplers stay in UTC, as on GET.
pub fn parse_graph_get(params: &[(String, String)], now_ms: i64) -> Result<TsQuery, RequestError> {
    let mut q = parse_get(params, now_ms)?;
    let Some(tz) = param_last(params, "tz").filter(|z| resolve_timezone(z).is_ok()) else { return Ok(q) };
    let details = q.java_string();
    let zoned = |s: &str| parse_time_msg(s, now_ms, Some(tz)).map_err(|m| RequestError::bad_request_with(m, &details));
    q.start_ms = zoned(q.start.as_deref().unwrap_or_default())?;
    if let Some(end) = q.end.as_deref().filter(|e| !e.is_empty()) {
        q.end_ms = zoned(end)?;
    }
    if q.end_ms <= q.start_ms {
        let m = format!("End time [{}] must be greater than the start time [{}]", q.end_ms, q.start_ms);
        return Err(RequestError::bad_request_with(m, details));
    }
    Ok(q)
}

/// Parses and validates `GET /api/query` (spec: query §1.1). `params` are the decoded query-string pairs in
/// order; `now_ms` is the server clock.
///
/// `tsuid=` sub-queries come first, then `m=` ones, each group in parameter order; identical sub-queries are
/// dropped. As in OpenTSDB 2.4, `timezone`, `tz` and `useCalendar` are not read on GET.
pub fn parse_get(params: &[(String, String)], now_ms: i64) -> Result<TsQuery, RequestError> {
    let start = param_last(params, "start").filter(|s| !s.is_empty());
    let Some(start) = start else {
        return Err(RequestError::bad_request("Missing parameter <code>start</code>"));
    };
    let mut q = TsQuery {
        start: Some(start.to_string()),
        end: param_last(params, "end").map(str::to_string),
        padding: param_has(params, "padding"),
        no_annotations: param_has(params, "no_annotations"),
        global_annotations: param_has(params, "global_annotations"),
        show_tsuids: param_has(params, "show_tsuids"),
        ms_resolution: param_has(params, "ms"),
        show_query: param_has(params, "show_query"),
        show_stats: param_has(params, "show_stats"),
        show_summary: param_has(params, "show_summary"),
        arrays: param_has(params, "arrays"),
        ..TsQuery::default()
    };
    for t in param_all(params, "tsuid") {
        q.queries.push(parse_tsuid_sub(t)?);
    }
    for m in param_all(params, "m") {
        q.queries.push(parse_m_sub(m)?);
    }
    if q.queries.is_empty() {
        return Err(RequestError::bad_request("Missing sub queries"));
    }
    q.dedupe();
    q.validate(now_ms)?;
    Ok(q)
}

/// The `:`-separated parts of an `m=`/`tsuid=` value, with OpenTSDB's count check.
fn sub_parts(value: &str) -> Result<Vec<&str>, RequestError> {
    let parts = split_string(value, ':');
    if parts.len() < 2 || parts.len() > 5 {
        return Err(RequestError::bad_request(format!(
            "Invalid parameter m={value} ({} :-separated parts)",
            if parts.len() < 2 { "not enough" } else { "too many" }
        )));
    }
    Ok(parts)
}

/// The options shared by `m=` and `tsuid=` middle parts. Returns false when the part is not one of them.
fn apply_common_part(sub: &mut SubQuery, part: &str, lower: &str) -> Result<bool, RequestError> {
    if lower.starts_with("rate") {
        sub.rate = true;
        if part.contains('{') {
            sub.rate_options = Some(parse_rate_options_msg(part).map_err(RequestError::bad_request)?);
        }
    } else if part.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        sub.downsample = Some(part.to_string());
    } else if part.is_empty() {
        // OpenTSDB reads the first character of the empty part.
        return Err(RequestError::bad_request("String index out of range: 0"));
    } else if lower.starts_with("percentiles") {
        sub.percentiles = Some(parse_percentiles(part)?);
    } else if lower.starts_with("show-histogram-buckets") {
        sub.show_histogram_buckets = true;
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// `m=<agg>:[opts:]<metric>[{groupby filters}][{filters}]` (spec: query §1.1).
pub(crate) fn parse_m_sub(value: &str) -> Result<SubQuery, RequestError> {
    if value.is_empty() {
        return Err(RequestError::bad_request("The query string was empty"));
    }
    let parts = sub_parts(value)?;
    let mut sub = SubQuery { aggregator: parts[0].to_string(), ..SubQuery::default() };
    let (metric, filters) = parse_metric_and_filters(parts[parts.len() - 1])?;
    sub.metric = Some(metric);
    sub.filters = filters;
    for part in &parts[1..parts.len() - 1] {
        let lower = java_lower(part);
        if apply_common_part(&mut sub, part, &lower)? {
            continue;
        }
        if part.eq_ignore_ascii_case("pre-agg") {
            sub.pre_aggregate = true;
        } else if lower.starts_with("rollup_") {
            sub.rollup_usage = Some(RollupUsage::parse(Some(part)));
        } else if lower.starts_with("explicit_tags") {
            sub.explicit_tags = true;
        }
        // Anything else is silently ignored.
    }
    Ok(sub)
}

/// `tsuid=<agg>:[opts:]<tsuid>[,<tsuid>...]` (spec: query §1.1).
fn parse_tsuid_sub(value: &str) -> Result<SubQuery, RequestError> {
    if value.is_empty() {
        return Err(RequestError::bad_request("The tsuid query string was empty"));
    }
    let parts = sub_parts(value)?;
    let mut sub = SubQuery {
        aggregator: parts[0].to_string(),
        tsuids: Some(java_split(parts[parts.len() - 1], ',').into_iter().map(str::to_string).collect()),
        ..SubQuery::default()
    };
    for part in &parts[1..parts.len() - 1] {
        let lower = java_lower(part);
        apply_common_part(&mut sub, part, &lower)?;
    }
    Ok(sub)
}

/// `percentiles[<float>,...]` of a GET sub-query, sorted ascending.
fn parse_percentiles(spec: &str) -> Result<Vec<f32>, RequestError> {
    let (Some(open), Some(close)) = (spec.find('['), spec.find(']')) else {
        return Err(RequestError::bad_request(format!("Malformated percentile query paramater: {spec}")));
    };
    if close < open + 1 {
        return Err(RequestError::bad_request(format!(
            "String index out of range: {}",
            close as i64 - open as i64 - 1
        )));
    }
    let mut out = Vec::new();
    for s in split_string(&spec[open + 1..close], ',') {
        let t = java_trim(s);
        if t.is_empty() {
            return Err(RequestError::bad_request("empty String"));
        }
        let v = crate::number::parse_java_double(t)
            .map_err(|_| RequestError::bad_request(format!("For input string: \"{t}\"")))?;
        out.push(v as f32);
    }
    sort_floats(&mut out);
    Ok(out)
}

/// Java's `Collections.sort` of `Float`s: ascending, `-0.0` before `0.0`, NaN last.
fn sort_floats(v: &mut [f32]) {
    v.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.total_cmp(b),
    });
}

/// Splits `tagk=value` into its two non-empty halves (OpenTSDB's `Tags.parse`).
pub(crate) fn parse_tag_pair(tag: &str) -> Result<(&str, &str), String> {
    let kv = split_string(tag, '=');
    if kv.len() != 2 || kv[0].is_empty() || kv[1].is_empty() {
        return Err(format!("invalid tag: {tag}"));
    }
    Ok((kv[0], kv[1]))
}

/// OpenTSDB's `Tags.parseWithMetric`: `metric` or `metric{k=v,...}` with exact values into the metric and its
/// tags in order; a key repeated with the same value is ignored, with another value it is an error (spec: query
/// §6.1, §6.8: `/api/query/last` and `/api/uid/tsmeta` name series this way).
pub fn parse_with_metric(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    let Some(curly) = s.find('{') else {
        return Ok((s.to_string(), Vec::new()));
    };
    let len = s.len();
    if !s.ends_with('}') {
        return Err(format!("Missing '}}' at the end of: {s}"));
    }
    if curly == len - 2 {
        return Ok((s[..len - 2].to_string(), Vec::new()));
    }
    let mut tags: Vec<(String, String)> = Vec::new();
    for tag in split_string(&s[curly + 1..len - 1], ',') {
        let wrap = |m: String| format!("When parsing tag '{tag}': {m}");
        let (k, v) = parse_tag_pair(tag).map_err(wrap)?;
        match tags.iter().find(|(ek, _)| ek == k) {
            Some((_, ev)) if ev == v => {}
            Some(_) => {
                let pairs: Vec<(&str, &str)> = tags.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
                return Err(wrap(format!("duplicate tag: {tag}, tags={}", crate::javafmt::format_map(&pairs))));
            }
            None => tags.push((k.to_string(), v.to_string())),
        }
    }
    Ok((s[..curly].to_string(), tags))
}

/// Adds the legacy filter for `tagk=value` (OpenTSDB's `mapToFilters` for one entry): group-by filters equal to
/// an existing filter only mark that one group-by.
fn add_legacy_filter(filters: &mut Vec<Filter>, tagk: &str, value: &str, group_by: bool) -> Result<(), String> {
    let f = Filter::from_legacy(tagk, value, group_by)?;
    if group_by {
        if let Some(existing) = filters.iter_mut().find(|e| e.same_filter(&f)) {
            existing.group_by = true;
            return Ok(());
        }
    }
    filters.push(f);
    Ok(())
}

/// The error for a failure inside the tag braces of a GET `m=`: 400, except an unknown filter type, which
/// escapes OpenTSDB as a 500 (spec: query §1.1).
fn brace_error(context: &str, piece: &str, msg: String) -> RequestError {
    let message = format!("When parsing {context} '{piece}': {msg}");
    if msg.starts_with(NO_SUCH_FILTER) {
        RequestError::internal(message)
    } else {
        RequestError::bad_request(message)
    }
}

/// OpenTSDB's `Tags.parseWithMetricAndFilters`: `metric`, `metric{}`, `metric{gb filters}`,
/// `metric{gb filters}{filters}`, `metric{}{filters}` (spec: query §1.1). The second group is parsed first, so
/// its filters come first.
fn parse_metric_and_filters(metric: &str) -> Result<(String, Vec<Filter>), RequestError> {
    if metric.is_empty() {
        return Err(RequestError::bad_request("Metric cannot be null or empty"));
    }
    let Some(curly) = metric.find('{') else {
        return Ok((metric.to_string(), Vec::new()));
    };
    let len = metric.len();
    if !metric.ends_with('}') {
        return Err(RequestError::bad_request(format!("Missing '}}' at the end of: {metric}")));
    }
    if curly == len - 2 {
        return Ok((metric[..len - 2].to_string(), Vec::new()));
    }
    // Braces are ASCII, so these byte offsets are character boundaries.
    let close = metric.find('}').unwrap_or(len - 1);
    let mut filters = Vec::new();
    if close != len - 1 {
        let filter_bracket = metric.rfind('{').unwrap_or(curly);
        for piece in split_string(&metric[filter_bracket + 1..len - 1], ',') {
            if piece.is_empty() {
                break;
            }
            parse_tag_pair(piece)
                .and_then(|(k, v)| add_legacy_filter(&mut filters, k, v, false))
                .map_err(|m| brace_error("filter", piece, m))?;
        }
    }
    if close < curly {
        return Err(RequestError::bad_request(format!(
            "String index out of range: {}",
            close as i64 - curly as i64 - 1
        )));
    }
    for tag in split_string(&metric[curly + 1..close], ',') {
        if tag.is_empty() && close != len - 1 {
            break;
        }
        parse_tag_pair(tag)
            .and_then(|(k, v)| add_legacy_filter(&mut filters, k, v, true))
            .map_err(|m| brace_error("tag", tag, m))?;
    }
    Ok((metric[..curly].to_string(), filters))
}

/// The 400 OpenTSDB gives for a body it cannot bind (spec: query §0.3).
pub(crate) fn unable_to_parse(details: impl Into<String>) -> RequestError {
    RequestError::bad_request_with("Unable to parse the given JSON", details)
}

/// Reads a body as text (UTF-8, invalid bytes replaced) and parses it, with OpenTSDB's empty-body error.
pub(crate) fn read_body(body: &[u8]) -> Result<JVal, RequestError> {
    if body.is_empty() {
        return Err(RequestError::bad_request_with(
            "Missing message content",
            "Supply valid JSON formatted data in the body of your request",
        ));
    }
    let text = String::from_utf8_lossy(body);
    json::parse(&text).map_err(unable_to_parse)
}

/// Parses and validates a `POST /api/query` JSON body (spec: query §1.2).
///
/// Properties apply in document order, like OpenTSDB's Jackson binding: a repeated key's last value wins, and of
/// `tags` and `filters` the one that comes last wins (`"filters":[...]` then `"tags":{}` leaves no filters).
/// Unknown keys are ignored; numbers are accepted where strings are expected (`"start":1356998400`), strings
/// where booleans or numbers are (`"rate":"true"`). Identical sub-queries are dropped.
pub fn parse_post(body: &[u8], now_ms: i64) -> Result<TsQuery, RequestError> {
    let root = read_body(body)?;
    let mut q = query_from_json(&root).map_err(unable_to_parse)?;
    q.dedupe();
    q.validate(now_ms)?;
    Ok(q)
}

fn query_from_json(root: &JVal) -> Result<TsQuery, String> {
    let JVal::Obj(pairs) = root else {
        return Err(format!(
            "Cannot deserialize instance of `net.opentsdb.core.TSQuery` out of {} token",
            root.token_name()
        ));
    };
    let mut q = TsQuery::default();
    for (key, v) in pairs {
        match key.as_str() {
            "start" => q.start = as_string(v)?,
            "end" => q.end = as_string(v)?,
            "timezone" => q.timezone = as_string(v)?,
            "useCalendar" => q.use_calendar = as_bool(v)?,
            "msResolution" => q.ms_resolution = as_bool(v)?,
            "showTSUIDs" => q.show_tsuids = as_bool(v)?,
            "showSummary" => q.show_summary = as_bool(v)?,
            "showStats" => q.show_stats = as_bool(v)?,
            "showQuery" => q.show_query = as_bool(v)?,
            "noAnnotations" => q.no_annotations = as_bool(v)?,
            "globalAnnotations" => q.global_annotations = as_bool(v)?,
            "padding" => q.padding = as_bool(v)?,
            "overrideByteLimit" => q.override_byte_limit = as_bool(v)?,
            "overrideDataPointLimit" => q.override_data_point_limit = as_bool(v)?,
            "delete" => q.delete = as_bool(v)?,
            "queries" => {
                q.queries = match v {
                    JVal::Null => Vec::new(),
                    JVal::Arr(items) => items.iter().map(sub_from_json).collect::<Result<_, _>>()?,
                    other => {
                        return Err(format!(
                            "Cannot deserialize instance of `java.util.ArrayList` out of {} token",
                            other.token_name()
                        ))
                    }
                }
            }
            _ => {}
        }
    }
    Ok(q)
}

fn sub_from_json(v: &JVal) -> Result<SubQuery, String> {
    let JVal::Obj(pairs) = v else {
        return Err("Cannot deserialize a sub query from a value that is not an object".into());
    };
    let mut sub = SubQuery::default();
    // OpenTSDB's filter list starts out null; `"tags":null` on a null list fails, on a list clears it.
    let mut filters: Option<Vec<Filter>> = None;
    for (key, v) in pairs {
        match key.as_str() {
            "aggregator" => sub.aggregator = as_string(v)?.unwrap_or_default(),
            "metric" => sub.metric = as_string(v)?,
            "tsuids" => {
                sub.tsuids = match v {
                    JVal::Null => None,
                    JVal::Arr(items) => Some(
                        items
                            .iter()
                            .map(|i| as_string(i)?.ok_or_else(|| "null TSUID in tsuids".to_string()))
                            .collect::<Result<_, _>>()?,
                    ),
                    other => return Err(format!("Cannot deserialize `tsuids` out of {} token", other.token_name())),
                }
            }
            "downsample" => sub.downsample = as_string(v)?,
            "rate" => sub.rate = as_bool(v)?,
            "rateOptions" => sub.rate_options = rate_options_from_json(v)?,
            "filters" => {
                filters = match v {
                    JVal::Null => None,
                    JVal::Arr(items) => Some(items.iter().map(filter_from_json).collect::<Result<_, _>>()?),
                    other => return Err(format!("Cannot deserialize `filters` out of {} token", other.token_name())),
                }
            }
            "tags" => {
                let JVal::Obj(tags) = v else {
                    if matches!(v, JVal::Null) && filters.is_some() {
                        filters = Some(Vec::new());
                        continue;
                    }
                    return Err(format!("Cannot deserialize `tags` out of {} token", v.token_name()));
                };
                // A Java LinkedHashMap: a repeated key keeps its first position and its last value.
                let mut entries: Vec<(&str, Option<String>)> = Vec::new();
                for (k, tv) in tags {
                    let tv = as_string(tv)?;
                    match entries.iter_mut().find(|(ek, _)| *ek == k.as_str()) {
                        Some(e) => e.1 = tv,
                        None => entries.push((k.as_str(), tv)),
                    }
                }
                let mut list = Vec::new();
                for (k, tv) in entries {
                    add_legacy_filter(&mut list, k, tv.as_deref().unwrap_or(""), true)?;
                }
                filters = Some(list);
            }
            "explicitTags" => sub.explicit_tags = as_bool(v)?,
            "percentiles" => {
                sub.percentiles = match v {
                    JVal::Null => None,
                    JVal::Arr(items) => {
                        let mut p: Vec<f32> = items.iter().map(as_f32).collect::<Result<_, _>>()?;
                        sort_floats(&mut p);
                        Some(p)
                    }
                    other => {
                        return Err(format!("Cannot deserialize `percentiles` out of {} token", other.token_name()))
                    }
                }
            }
            "showHistogramBuckets" => sub.show_histogram_buckets = as_bool(v)?,
            "rollupUsage" => sub.rollup_usage = Some(RollupUsage::parse(as_string(v)?.as_deref())),
            "preAggregate" => sub.pre_aggregate = as_bool(v)?,
            "useFuzzyFilter" => sub.use_fuzzy_filter = as_bool(v)?,
            "useMultiGets" => sub.use_multi_gets = as_bool(v)?,
            // Overwritten with the position after de-duplication, but still type-checked.
            "index" => {
                as_int(v)?;
            }
            _ => {}
        }
    }
    sub.filters = filters.unwrap_or_default();
    Ok(sub)
}

/// A `rateOptions` object; `counter` and `isCounter` are both accepted (spec: query §1.2).
pub(crate) fn rate_options_from_json(v: &JVal) -> Result<Option<RateOptions>, String> {
    let pairs = match v {
        JVal::Null => return Ok(None),
        JVal::Obj(p) => p,
        other => return Err(format!("Cannot deserialize `rateOptions` out of {} token", other.token_name())),
    };
    let mut o = RateOptions::default();
    for (key, v) in pairs {
        match key.as_str() {
            "counter" | "isCounter" => o.counter = as_bool(v)?,
            "counterMax" => o.counter_max = as_long(v)?,
            "resetValue" => o.reset_value = as_long(v)?,
            "dropResets" => o.drop_resets = as_bool(v)?,
            _ => {}
        }
    }
    Ok(Some(o))
}

/// A filter object `{"type":..,"tagk":..,"filter":..,"groupBy":..}` (`group_by` also accepted).
pub(crate) fn filter_from_json(v: &JVal) -> Result<Filter, String> {
    let JVal::Obj(pairs) = v else {
        return Err("Cannot deserialize a filter from a value that is not an object".into());
    };
    let (mut type_name, mut tagk, mut filter, mut group_by) = (None, None, None, false);
    for (key, v) in pairs {
        match key.as_str() {
            "type" => type_name = as_string(v)?,
            "tagk" => tagk = as_string(v)?,
            "filter" => filter = as_string(v)?,
            "groupBy" | "group_by" => group_by = as_bool(v)?,
            _ => {}
        }
    }
    Filter::from_type_name(type_name.as_deref(), tagk.as_deref(), filter.as_deref(), group_by)
}

/// Checks that every TSUID of a TSUID sub-query starts with the same metric UID (`metric_width` bytes, i.e.
/// twice as many hex digits, compared case-insensitively), as OpenTSDB does when it plans the query: 400
/// `One or more TSUIDs did not share the same metric [A] [B]` (spec: query §1.1).
pub fn check_tsuids_share_metric(tsuids: &[String], metric_width: usize) -> Result<(), RequestError> {
    let width = metric_width * 2;
    let mut first: Option<String> = None;
    for t in tsuids {
        if t.chars().count() < width {
            return Err(RequestError::bad_request(format!("String index out of range: {width}")));
        }
        let metric: String = t.chars().take(width).collect::<String>().to_uppercase();
        match &first {
            None => first = Some(metric),
            Some(f) if *f != metric => {
                return Err(RequestError::bad_request(format!(
                    "One or more TSUIDs did not share the same metric [{f}] [{metric}]"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}
