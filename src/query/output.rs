//! The `/api/query` response body (spec: query §1.6): one object per (sub-query, group), fields in OpenTSDB's
//! order, `dps` as an object with string keys or as `[[ts, value], ...]` arrays, seconds or milliseconds.
use rtsd_protocol::http_json::json_string;
use rtsd_protocol::javafmt;

use super::series::{write_value, OutPoint};

/// One result object before rendering: the points are typed values, written as JSON only by [`render`] (one
/// body per answer, no string per point) and read as numbers by expressions, graphs and the CLI.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupOutput {
    pub metric: String,
    /// Tag keys whose value is the same in every series of the group that has the key.
    pub tags: Vec<(String, String)>,
    /// Tag keys whose values differ between series of the group, in tag-key UID order.
    pub aggregate_tags: Vec<String>,
    /// The `query` object (with `showQuery`), already rendered.
    pub query: Option<String>,
    /// Upper-case hex TSUIDs of the group's series, sorted (with `showTSUIDs`).
    pub tsuids: Option<Vec<String>>,
    /// Rendered `annotations` / `globalAnnotations` arrays, when present.
    pub annotations: Option<String>,
    pub global_annotations: Option<String>,
    /// (timestamp in ms, value) in ascending time.
    pub dps: Vec<OutPoint>,
    /// The rendered `stats` object (with `showStats`), written after `dps`.
    pub stats: Option<String>,
    /// Stored points (or rollup cells) the group's series held in the scan window: OpenTSDB's
    /// `DataPoints.aggregatedSize()`, which `/q?json` reports as `points` (spec: query §6.17).
    pub aggregated_size: usize,
    /// The position of the sub-query this group answers (`/q?json` reports aggregated tags per sub-query).
    pub sub_query: usize,
}

/// How `dps` is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpsFormat {
    /// `msResolution` / `ms`: timestamps in ms; otherwise ms are truncated to seconds (duplicate keys and all,
    /// as OpenTSDB 2.4 does).
    pub ms_resolution: bool,
    /// `arrays`: `[[ts, value], ...]` instead of `{"ts": value}`.
    pub arrays: bool,
}

/// Splits a group's series tags into OpenTSDB's `tags` and `aggregateTags` (spec: query §1.6). `series` holds
/// each series' (tag key UID, key name, value name) triples; a key missing from some series but single-valued
/// where present stays in `tags` (OpenTSDB's quirk).
pub fn split_tags(series: &[Vec<(Vec<u8>, String, String)>]) -> (Vec<(String, String)>, Vec<String>) {
    // key UID -> (name, first value, differs)
    let mut keys: Vec<(Vec<u8>, String, String, bool)> = Vec::new();
    for tags in series {
        for (uid, k, v) in tags {
            match keys.iter_mut().find(|(u, ..)| u == uid) {
                Some(entry) => entry.3 |= entry.2 != *v,
                None => keys.push((uid.clone(), k.clone(), v.clone(), false)),
            }
        }
    }
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tags = Vec::new();
    let mut aggregate = Vec::new();
    for (_, k, v, differs) in keys {
        if differs {
            aggregate.push(k);
        } else {
            tags.push((k, v));
        }
    }
    (tags, aggregate)
}

/// Renders the whole response array.
pub fn render(groups: &[GroupOutput], format: DpsFormat) -> String {
    render_with_summary(groups, format, || None)
}

/// Renders the whole response array, then the element `summary` gives, if any, as the last one (`showSummary`
/// appends `{"statsSummary":{...}}`, measured once the results are written, spec: query §1.6).
pub fn render_with_summary(
    groups: &[GroupOutput],
    format: DpsFormat,
    summary: impl FnOnce() -> Option<String>,
) -> String {
    // Sized for the points (about 30 bytes each), so the body is not copied as it grows.
    let points: usize = groups.iter().map(|g| g.dps.len()).sum();
    let mut out = String::with_capacity(256 * groups.len() + 32 * points + 2);
    out.push('[');
    for (i, g) in groups.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        render_group(g, format, &mut out);
    }
    if let Some(s) = summary() {
        if !groups.is_empty() {
            out.push(',');
        }
        out.push_str(&s);
    }
    out.push(']');
    out
}

fn render_group(g: &GroupOutput, format: DpsFormat, out: &mut String) {
    out.push_str("{\"metric\":");
    out.push_str(&json_string(&g.metric));
    out.push_str(",\"tags\":{");
    // OpenTSDB's tags object is a Java HashMap: Jackson writes it in HashMap order.
    let keys: Vec<&str> = g.tags.iter().map(|(k, _)| k.as_str()).collect();
    for (n, i) in javafmt::hashmap_order(&keys).into_iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&json_string(&g.tags[i].0));
        out.push(':');
        out.push_str(&json_string(&g.tags[i].1));
    }
    out.push_str("},\"aggregateTags\":[");
    for (i, k) in g.aggregate_tags.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&json_string(k));
    }
    out.push(']');
    if let Some(q) = &g.query {
        out.push_str(",\"query\":");
        out.push_str(q);
    }
    if let Some(tsuids) = &g.tsuids {
        out.push_str(",\"tsuids\":[");
        for (i, t) in tsuids.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&json_string(t));
        }
        out.push(']');
    }
    if let Some(a) = &g.annotations {
        out.push_str(",\"annotations\":");
        out.push_str(a);
    }
    if let Some(a) = &g.global_annotations {
        out.push_str(",\"globalAnnotations\":");
        out.push_str(a);
    }
    out.push_str(",\"dps\":");
    out.push(if format.arrays { '[' } else { '{' });
    for (i, (ts, value)) in g.dps.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let ts = if format.ms_resolution { *ts } else { ts.div_euclid(1000) };
        // Written in place (a day of one-minute points is 1440 of these per result), the timestamp by itoa.
        let mut digits = itoa::Buffer::new();
        let ts = digits.format(ts);
        if format.arrays {
            out.push('[');
            out.push_str(ts);
            out.push(',');
            write_value(out, value);
            out.push(']');
        } else {
            out.push('"');
            out.push_str(ts);
            out.push_str("\":");
            write_value(out, value);
        }
    }
    out.push(if format.arrays { ']' } else { '}' });
    if let Some(stats) = &g.stats {
        out.push_str(",\"stats\":");
        out.push_str(stats);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::series::OutValue;

    fn group() -> GroupOutput {
        GroupOutput {
            metric: "tsd.hbase.puts".into(),
            tags: vec![],
            aggregate_tags: vec!["host".into()],
            dps: vec![(1365966001000, OutValue::Int(25595461080)), (1365966061000, OutValue::Int(25595542522))],
            ..GroupOutput::default()
        }
    }

    #[test]
    fn renders_the_documented_aggregated_example() {
        // spec: query §1.6
        assert_eq!(
            render(&[group()], DpsFormat::default()),
            r#"[{"metric":"tsd.hbase.puts","tags":{},"aggregateTags":["host"],"dps":{"1365966001":25595461080,"1365966061":25595542522}}]"#
        );
        assert_eq!(
            render(&[group()], DpsFormat { ms_resolution: true, arrays: true }),
            r#"[{"metric":"tsd.hbase.puts","tags":{},"aggregateTags":["host"],"dps":[[1365966001000,25595461080],[1365966061000,25595542522]]}]"#
        );
        assert_eq!(render(&[], DpsFormat::default()), "[]");
    }

    #[test]
    fn optional_fields_come_in_opentsdbs_order() {
        let g = GroupOutput {
            tags: vec![("host".into(), "web01".into())],
            aggregate_tags: vec![],
            query: Some(r#"{"index":0}"#.into()),
            tsuids: Some(vec!["000001000001000001".into()]),
            annotations: Some("[]".into()),
            global_annotations: Some("[]".into()),
            dps: vec![(1365966001500, OutValue::Double(1.5)), (1365966001900, OutValue::Double(2.0))],
            ..group()
        };
        assert_eq!(
            render(&[g], DpsFormat::default()),
            r#"[{"metric":"tsd.hbase.puts","tags":{"host":"web01"},"aggregateTags":[],"query":{"index":0},"tsuids":["000001000001000001"],"annotations":[],"globalAnnotations":[],"dps":{"1365966001":1.5,"1365966001":2.0}}]"#
        );
    }

    #[test]
    fn tags_split_into_common_and_aggregated() {
        // spec: query §1.6, including the quirk: `rack` appears in one series only, with one value, so it stays.
        let t = |k: u8, name: &str, v: &str| (vec![0, 0, k], name.to_string(), v.to_string());
        let series = vec![
            vec![t(1, "host", "web01"), t(2, "dc", "lga"), t(3, "rack", "r1")],
            vec![t(1, "host", "web02"), t(2, "dc", "lga")],
        ];
        let (tags, aggregate) = split_tags(&series);
        assert_eq!(tags, vec![("dc".to_string(), "lga".to_string()), ("rack".to_string(), "r1".to_string())]);
        assert_eq!(aggregate, vec!["host".to_string()]);
    }
}
