//! `rtsd scan --import`: stored points printed in OpenTSDB's import format, one per line, as
//! `tsdb scan --import` prints them: `metric timestamp value tag=value ...` (timestamps in seconds for
//! second-resolution cells, milliseconds for millisecond cells; tags in OpenTSDB's HashMap order).
//!
//! Arguments follow OpenTSDB's command-line query: `START [END] AGG [rate] [downsample N FUNC] METRIC
//! [TAG=VALUE ...]`. The aggregator and any rate/downsample words are accepted and ignored: a scan dumps rows.
//! A tag value may be `*` (any value) or `a|b` (any of several).
use std::io::Write;

use rtsd_protocol::codec::{self, Value};
use rtsd_protocol::javafmt;
use rtsd_protocol::point::UidKind;

use crate::store::{Store, StoreError};
use crate::timefmt;

/// A parsed scan request.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanQuery {
    pub start_ms: i64,
    pub end_ms: i64,
    pub metric: String,
    /// (tag key, accepted values; empty means any value).
    pub tags: Vec<(String, Vec<String>)>,
}

/// Parses `START [END] AGG [rate] [downsample N FUNC] METRIC [TAG=VALUE ...]`; `now_ms` fills a missing END.
pub fn parse_args(args: &[String], now_ms: i64) -> Result<ScanQuery, String> {
    let mut it = args.iter().peekable();
    let start = it.next().ok_or("missing START time")?;
    let start_ms = timefmt::parse_time_ms(start)?;
    let mut end_ms = now_ms;
    if let Some(next) = it.peek() {
        if let Ok(end) = timefmt::parse_time_ms(next) {
            end_ms = end;
            it.next();
        }
    }
    it.next().ok_or("missing aggregator")?;
    let mut metric = None;
    while let Some(word) = it.next() {
        match word.as_str() {
            "rate" => {}
            "downsample" => {
                it.next();
                it.next();
            }
            w if w.starts_with("rate{") => {}
            w => {
                metric = Some(w.to_string());
                break;
            }
        }
    }
    let metric = metric.ok_or("missing METRIC")?;
    let mut tags = Vec::new();
    for word in it {
        let (k, v) = word.split_once('=').ok_or_else(|| format!("invalid tag: {word} (expected TAG=VALUE)"))?;
        let values = if v == "*" { Vec::new() } else { v.split('|').map(str::to_string).collect() };
        tags.push((k.to_string(), values));
    }
    if end_ms < start_ms {
        return Err("END is before START".to_string());
    }
    Ok(ScanQuery { start_ms, end_ms, metric, tags })
}

/// Writes every stored point of the query's rows to `out` in import format; returns the number of points.
pub fn scan_import(store: &Store, query: &ScanQuery, out: &mut impl Write) -> Result<u64, ScanError> {
    let uids = store.uids();
    let Some(metric) = uids.get(UidKind::Metric, &query.metric)? else {
        return Err(ScanError::Usage(format!("No such name for 'metrics': '{}'", query.metric)));
    };
    // Resolve the tag filter to UIDs once; a name without a UID matches nothing.
    let mut filters: Vec<(Vec<u8>, Option<Vec<Vec<u8>>>)> = Vec::new();
    for (k, values) in &query.tags {
        let Some(kuid) = uids.get(UidKind::TagKey, k)? else { return Ok(0) };
        let allowed = if values.is_empty() {
            None
        } else {
            let mut ids = Vec::new();
            for v in values {
                if let Some(vuid) = uids.get(UidKind::TagValue, v)? {
                    ids.push(vuid.as_bytes().to_vec());
                }
            }
            Some(ids)
        };
        filters.push((kuid.as_bytes().to_vec(), allowed));
    }
    let start_hour = codec::base_time(query.start_ms);
    let end_hour = codec::base_time(query.end_ms);
    let mut count = 0u64;
    let mut line = String::new();
    let mut write_error = None;
    store.for_each_row(metric.as_bytes(), start_hour, end_hour, |row| {
        let matches = filters.iter().all(|(k, allowed)| {
            row.tags.iter().any(|(tk, tv)| *tk == k.as_slice() && allowed.as_ref().is_none_or(|a| a.iter().any(|v| v == tv)))
        });
        if !matches {
            return Ok(true);
        }
        let mut names = Vec::with_capacity(row.tags.len());
        for (k, v) in &row.tags {
            let k = uids.name_of(UidKind::TagKey, k)?.unwrap_or_else(|| codec::uid_to_string(k));
            let v = uids.name_of(UidKind::TagValue, v)?.unwrap_or_else(|| codec::uid_to_string(v));
            names.push((k, v));
        }
        let keys: Vec<&str> = names.iter().map(|(k, _)| k.as_str()).collect();
        let mut tags = String::new();
        for i in javafmt::hashmap_order(&keys) {
            tags.push(' ');
            tags.push_str(&names[i].0);
            tags.push('=');
            tags.push_str(&names[i].1);
        }
        let points = codec::row_points(row.base_time, row.value).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        for p in points {
            line.clear();
            let ts = if p.qualifier.len() == 4 { p.timestamp_ms } else { p.timestamp_ms / 1000 };
            line.push_str(&query.metric);
            line.push(' ');
            line.push_str(&ts.to_string());
            line.push(' ');
            line.push_str(&import_value(p.value));
            line.push_str(&tags);
            line.push('\n');
            if let Err(e) = out.write_all(line.as_bytes()) {
                write_error = Some(e);
                return Ok(false);
            }
            count += 1;
        }
        Ok(true)
    })?;
    match write_error {
        Some(e) => Err(ScanError::Io(e)),
        None => Ok(count),
    }
}

/// A value as `Cell.parseValue()` prints: a Java long, or a Java double (floats widened to double first).
fn import_value(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => javafmt::double_to_string(f as f64),
        Value::Double(d) => javafmt::double_to_string(d),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("write failed: {0}")]
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_opentsdb_command_line_queries() {
        let q = parse_args(&args("1356998400 1357002000 sum sys.cpu.user host=web01 dc=*"), 0).unwrap();
        assert_eq!(q.start_ms, 1356998400000);
        assert_eq!(q.end_ms, 1357002000000);
        assert_eq!(q.metric, "sys.cpu.user");
        assert_eq!(q.tags, vec![("host".to_string(), vec!["web01".to_string()]), ("dc".to_string(), vec![])]);
        let q = parse_args(&args("2013/01/01-00:00:00 sum rate downsample 60 avg m host=a|b"), 1357002000000).unwrap();
        assert_eq!(q.start_ms, 1356998400000);
        assert_eq!(q.end_ms, 1357002000000);
        assert_eq!(q.metric, "m");
        assert_eq!(q.tags, vec![("host".to_string(), vec!["a".to_string(), "b".to_string()])]);
        assert!(parse_args(&args("1356998400 sum"), 0).is_err());
        assert!(parse_args(&args("soon sum m"), 0).is_err());
        assert!(parse_args(&args("1356998400 sum m hostweb01"), 0).is_err());
    }
}
