//! Chukwa 0.7+'s own HBase schema, kept in RocksDB beside OpenTSDB's tables (spec: chukwa §5.2-§5.4), and the
//! reads HICC's `MetricsController` makes of it (§6).
//!
//! Column families and keys (an HBase cell `(row, qualifier)` is one RocksDB key):
//! * `chukwa:t`: key = the 14-byte row key `HBaseUtil.buildKey(time, metric, source)` followed by the 8-byte
//!   big-endian millisecond qualifier; value = the decimal string Chukwa writes.
//! * `chukwa:a`: the same key built from the dataType instead of the metric; value = the chunk's tags string.
//! * `chukwa_meta:k`: key = `u32` big-endian length of the row, the row (a dataType), then the qualifier (a full
//!   metric name, a source or a cluster); value = Chukwa's Gson JSON `{"sig":...,"type":"metric"|"source"|...}`.
//!   (The length prefix keeps rows apart; rows and qualifiers come out in HBase's byte order.)
use rtsd_protocol::chukwa::rowkey;
use rtsd_protocol::javafmt::{double_to_string, hashmap_order};
use rtsd_protocol::number::parse_java_double;

use crate::store::{Store, StoreError, CF_CHUKWA_META, CF_CHUKWA_T};

/// Length of a `chukwa:t` / `chukwa:a` key: row key and qualifier.
pub const CELL_KEY_LEN: usize = rowkey::ROW_KEY_LEN + 8;

/// The `chukwa:t` key of `primary_key` (a full metric name) from `source` at `time_ms`; also `chukwa:a`'s, with
/// the dataType as primary key.
pub fn cell_key(time_ms: i64, primary_key: &str, source: &str) -> [u8; CELL_KEY_LEN] {
    let mut key = [0u8; CELL_KEY_LEN];
    key[..rowkey::ROW_KEY_LEN].copy_from_slice(&rowkey::row_key(time_ms, primary_key, source));
    key[rowkey::ROW_KEY_LEN..].copy_from_slice(&rowkey::qualifier(time_ms));
    key
}

/// What a `chukwa_meta` qualifier names (`Reporter.java`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaType {
    Metric,
    Source,
    Cluster,
}

impl MetaType {
    fn as_str(self) -> &'static str {
        match self {
            MetaType::Metric => "metric",
            MetaType::Source => "source",
            MetaType::Cluster => "cluster",
        }
    }
}

/// The `chukwa_meta:k` key of cell (`row`, `qualifier`).
pub fn meta_key(row: &str, qualifier: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + row.len() + qualifier.len());
    k.extend_from_slice(&(row.len() as u32).to_be_bytes());
    k.extend_from_slice(row.as_bytes());
    k.extend_from_slice(qualifier.as_bytes());
    k
}

fn split_meta_key(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_be_bytes(key.get(..4)?.try_into().ok()?) as usize;
    let row = key.get(4..4 + len)?;
    Some((row, &key[4 + len..]))
}

/// The value `Reporter` writes for a qualifier of `row`: Gson of a `HashMap` with the first 5 MD5 bytes of the
/// signed name as a (lossily decoded) string and the type. Metrics are signed as `<dataType>.<full name>`, the
/// type prefix doubled, as Java does.
pub fn meta_value(row: &str, qualifier: &str, kind: MetaType) -> String {
    let signed = match kind {
        MetaType::Metric => format!("{row}.{qualifier}"),
        MetaType::Source | MetaType::Cluster => qualifier.to_string(),
    };
    let md5 = rowkey::md5_prefix(&signed);
    let sig = String::from_utf8_lossy(&md5[..5]).into_owned();
    gson_string_map(&[("sig", &sig), ("type", kind.as_str())])
}

/// Gson's rendering of a `HashMap<String, String>` filled in this order.
fn gson_string_map(pairs: &[(&str, &str)]) -> String {
    let keys: Vec<&str> = pairs.iter().map(|p| p.0).collect();
    let mut out = String::from("{");
    for (n, i) in hashmap_order(&keys).into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        gson_quote(pairs[i].0, &mut out);
        out.push(':');
        gson_quote(pairs[i].1, &mut out);
    }
    out.push('}');
    out
}

/// A JSON string as Gson writes it (HTML-safe escaping, its default).
pub fn gson_quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '=' | '\'' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Gson's rendering of a list of strings.
pub fn gson_list(items: &[String]) -> String {
    let mut out = String::from("[");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        gson_quote(item, &mut out);
    }
    out.push(']');
    out
}

/// A JSON string as json-simple's `JSONValue.escape` writes it: `/` escaped too, control and some Unicode ranges
/// as upper-case `\uXXXX`.
fn json_simple_quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2000}'..='\u{20ff}' => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// HICC's `Series.toString()`: a json-simple `JSONObject` (a `HashMap`) with `name` and, when there are points,
/// `data` as `[[ms,value],...]`, values by `Double.toString` (NaN and infinities as `null`).
pub fn series_json(name: &str, points: &[(i64, f64)]) -> String {
    let keys: &[&str] = if points.is_empty() { &["name"] } else { &["name", "data"] };
    let mut out = String::from("{");
    for (n, i) in hashmap_order(keys).into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        json_simple_quote(keys[i], &mut out);
        out.push(':');
        if keys[i] == "name" {
            json_simple_quote(name, &mut out);
        } else {
            out.push('[');
            for (j, (t, v)) in points.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                let v = if v.is_finite() { double_to_string(*v) } else { "null".to_string() };
                out.push_str(&format!("[{t},{v}]"));
            }
            out.push(']');
        }
    }
    out.push('}');
    out
}

const MS_PER_DAY: i64 = 86_400_000;

/// `ChukwaHBaseStore.getSeries(metric, source, start, end)`: the `chukwa:t` cells of (metric, source) with
/// `start <= time < end` (HBase's time range), as (ms, value). Values that don't parse as a double are skipped
/// (Java failed the request). Java's quirks are not copied: it advanced its day loop wrongly and skipped ranges
/// crossing a new year; here every day's row is read once and the points come out in time order. Java's
/// start/end swap, which left both equal to `end`, is kept: an inverted range is empty.
pub fn read_series(
    store: &Store,
    metric: &str,
    source: &str,
    start: i64,
    end: i64,
) -> Result<Vec<(i64, f64)>, StoreError> {
    let start = start.min(end);
    let mut rows: Vec<[u8; rowkey::ROW_KEY_LEN]> = Vec::new();
    let mut day = start.div_euclid(MS_PER_DAY) * MS_PER_DAY;
    // At most a year and a day of row keys: the 2-byte day prefix repeats after that.
    let mut days = 0;
    while day < end && days <= 367 {
        let row = rowkey::row_key(day.max(start), metric, source);
        if !rows.contains(&row) {
            rows.push(row);
        }
        day += MS_PER_DAY;
        days += 1;
    }
    let mut out = Vec::new();
    for row in rows {
        let mut from = row.to_vec();
        from.extend_from_slice(&rowkey::qualifier(start));
        store.scan_raw(CF_CHUKWA_T, &from, |key, value| {
            if key.len() != CELL_KEY_LEN || key[..rowkey::ROW_KEY_LEN] != row {
                return false;
            }
            let t = i64::from_be_bytes(key[rowkey::ROW_KEY_LEN..].try_into().unwrap_or_default());
            if t < start || t >= end {
                return t < end;
            }
            if let Ok(v) = parse_java_double(String::from_utf8_lossy(value).trim()) {
                out.push((t, v));
            }
            true
        })?;
    }
    out.sort_by_key(|&(t, _)| t);
    Ok(out)
}

/// Every `chukwa_meta:k` cell as (row, qualifier, type), rows and qualifiers in byte order.
fn meta_cells(store: &Store, row: Option<&str>) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
    let mut cells = Vec::new();
    let from = row.map(|r| meta_key(r, "")).unwrap_or_default();
    store.scan_raw(CF_CHUKWA_META, &from, |key, value| {
        let Some((r, q)) = split_meta_key(key) else { return true };
        if row.is_some_and(|want| want.as_bytes() != r) {
            return false;
        }
        let kind = serde_json::from_slice::<serde_json::Value>(value)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string));
        cells.push((String::from_utf8_lossy(r).into_owned(), String::from_utf8_lossy(q).into_owned(), kind));
        true
    })?;
    // The length prefix sorts short rows first; HBase sorts rows by their bytes.
    cells.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()).then_with(|| a.1.as_bytes().cmp(b.1.as_bytes())));
    Ok(cells)
}

/// `getMetricGroups`: every row of `chukwa_meta` family `k` (the data types).
pub fn metric_groups(store: &Store) -> Result<Vec<String>, StoreError> {
    let mut groups: Vec<String> = meta_cells(store, None)?.into_iter().map(|c| c.0).collect();
    groups.dedup();
    Ok(groups)
}

/// `getMetricNames(group)`: the qualifiers of row `group` whose type is `metric`.
pub fn metric_names(store: &Store, group: &str) -> Result<Vec<String>, StoreError> {
    Ok(meta_cells(store, Some(group))?.into_iter().filter(|c| c.2.as_deref() == Some("metric")).map(|c| c.1).collect())
}

/// `getSourceNames(group)`: every qualifier of type `source`, of every row (Java ignores the group), in the
/// iteration order of the Java `HashSet` it fills in scan order.
pub fn source_names(store: &Store) -> Result<Vec<String>, StoreError> {
    let sources: Vec<String> =
        meta_cells(store, None)?.into_iter().filter(|c| c.2.as_deref() == Some("source")).map(|c| c.1).collect();
    let keys: Vec<&str> = sources.iter().map(String::as_str).collect();
    Ok(hashmap_order(&keys).into_iter().map(|i| sources[i].clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_keys_are_row_key_and_qualifier() {
        let key = cell_key(1_466_380_800_000, "SystemMetrics.cpu.combined", "host1");
        assert_eq!(&key[..14], &[0x31, 0x37, 0xcb, 0x75, 0xb6, 0x4b, 0xe1, 0x65, 0x81, 0x5a, 0xd1, 0xc0, 0x58, 0xdf]);
        assert_eq!(&key[14..], &[0, 0, 1, 0x55, 0x6b, 0x1b, 0x50, 0]);
    }

    #[test]
    fn meta_values_are_gson_maps() {
        let v = meta_value("SystemMetrics", "host1", MetaType::Source);
        assert!(v.starts_with("{\"sig\":\"") && v.ends_with("\",\"type\":\"source\"}"), "{v}");
        let parsed: serde_json::Value = serde_json::from_str(&v).unwrap();
        assert_eq!(parsed["type"], "source");
        let mut s = String::new();
        gson_quote("a<b>=&'\"\\\n\u{1}é", &mut s);
        assert_eq!(s, r#""a\u003cb\u003e\u003d\u0026\u0027\"\\\n\u0001é""#);
        assert_eq!(gson_list(&["a".into(), "b=c".into()]), r#"["a","b\u003dc"]"#);
        assert_eq!(gson_list(&[]), "[]");
        let key = meta_key("Hadoop", "x:y");
        let (row, q) = split_meta_key(&key).unwrap();
        assert_eq!((row, q), (&b"Hadoop"[..], &b"x:y"[..]));
    }

    #[test]
    fn series_json_as_json_simple_prints_it() {
        assert_eq!(
            series_json(
                "SystemMetrics.cpu.combined:host1",
                &[(1_466_380_800_000, 12.5), (1_466_380_860_000, 8.589934592E9)]
            ),
            r#"{"data":[[1466380800000,12.5],[1466380860000,8.589934592E9]],"name":"SystemMetrics.cpu.combined:host1"}"#
        );
        assert_eq!(series_json("m:/a/b", &[]), r#"{"name":"m:\/a\/b"}"#);
        assert_eq!(series_json("m:h", &[(1, f64::NAN)]), r#"{"data":[[1,null]],"name":"m:h"}"#);
    }
}
