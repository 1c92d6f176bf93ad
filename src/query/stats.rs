//! `showStats` and `showSummary` (spec: query §1.6): the statistics OpenTSDB 2.4's `QueryStats` reports, with
//! its keys, its nesting and its arithmetic, so tools that read them find what they expect.
//!
//! What 2.4 emits on its default path (one `SaltScanner` per sub-query, unsalted: one scanner):
//! * with `showStats`, a `stats` object after each result's `dps`: the sub-query's stats as they stand when the
//!   result is written: `aggregationTime`, `emittedDPs`, `groupByTime`, `queryIndex`, `queryScanTime`,
//!   `saltScannerMergeTime`, `serializationTime`, `uidToStringTime` (the per-result ones of that result);
//! * with `showSummary`, one more array element `{"statsSummary":{...}}` after the results: counters summed over
//!   the sub-queries, time averages and maxima (under 2.4's swapped names: its `AGG_MAP` pairs store the average
//!   under `max*` for some stats), `processingPreWriteTime`, and a `queryIdx_NN` map per sub-query with its
//!   scanner's stats under `scannerStats`.
//!
//! Keys are sorted (2.4 serializes `TreeMap`s), times are milliseconds as Java doubles, counts are integers.
//! 2.4 quirks kept: a sub-query's `emittedDPs` (and its times) are those of its *last* result (each result
//! replaces them), and the summary adds those up.
//!
//! What the numbers mean in rtsd: `queryScanTime`, `hbaseTime` and `scannerTime` are the time spent reading and
//! decoding rows (RocksDB plays HBase); `rowsPostFilter` / `dpsPostFilter` count the rows and points read,
//! `rowsPreFilter` adds the rows a scan met and skipped because a filter rejected their series (rtsd skips them
//! by key without decoding, so `dpsPreFilter` equals `dpsPostFilter`); `uidPairsResolved` /
//! `scannerUidToStringTime` count and time the tag-value names looked up to evaluate filters; `groupByTime` is
//! the grouping of series; `compactionTime` and `saltScannerMergeTime` are 0 (RocksDB's merge operator compacts
//! rows, and rtsd reads one ordered iterator per sub-query, so neither step exists).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rtsd_protocol::http_json::json_string;
use rtsd_protocol::javafmt::double_to_string;

/// One value of a stats map.
enum Stat {
    /// Nanoseconds, written as milliseconds (Java's `(double) ns / 1000000`).
    Time(u64),
    Count(u64),
    Text(String),
    Map(BTreeMap<String, Stat>),
}

type Map = BTreeMap<String, Stat>;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The per-result numbers of one written result object.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResultStats {
    pub uid_to_string: Duration,
    pub aggregation: Duration,
    pub serialization: Duration,
    pub emitted_dps: u64,
}

/// What one sub-query's scan and grouping measured.
#[derive(Debug, Clone, Default)]
pub struct SubStats {
    pub index: usize,
    pub scan: Duration,
    pub group_by: Duration,
    /// A description of what was read (2.4 prints its HBase scanner here).
    pub scanner_id: String,
    pub rows_pre_filter: u64,
    pub rows_post_filter: u64,
    pub dps_post_filter: u64,
    pub uid_pairs_resolved: u64,
    pub uid_resolve: Duration,
    /// The last result written for this sub-query (2.4 replaces these per result).
    pub last_result: Option<ResultStats>,
}

impl SubStats {
    /// The `stats` object of a result, written right after it (its numbers are already in `last_result`).
    pub fn result_json(&self) -> String {
        let mut map = BTreeMap::new();
        map.insert("queryIndex".into(), Stat::Count(self.index as u64));
        self.base(&mut map);
        render(&Stat::Map(map))
    }

    /// The stats 2.4 records for a sub-query before aggregation: scan, group-by, merge and the last result's.
    fn base(&self, map: &mut Map) {
        map.insert("queryScanTime".into(), Stat::Time(nanos(self.scan)));
        map.insert("groupByTime".into(), Stat::Time(nanos(self.group_by)));
        map.insert("saltScannerMergeTime".into(), Stat::Time(0));
        if let Some(r) = &self.last_result {
            map.insert("uidToStringTime".into(), Stat::Time(nanos(r.uid_to_string)));
            map.insert("aggregationTime".into(), Stat::Time(nanos(r.aggregation)));
            map.insert("serializationTime".into(), Stat::Time(nanos(r.serialization)));
            map.insert("emittedDPs".into(), Stat::Count(r.emitted_dps));
        }
    }

    /// The scanner's own stats (2.4: one map per scanner, `scannerIdx_NN`).
    fn scanner(&self) -> Map {
        let scan = nanos(self.scan);
        let mut m = BTreeMap::new();
        m.insert("scannerId".into(), Stat::Text(self.scanner_id.clone()));
        m.insert("scannerTime".into(), Stat::Time(scan));
        m.insert("hbaseTime".into(), Stat::Time(scan));
        m.insert("successfulScan".into(), Stat::Count(1));
        m.insert("rowsPreFilter".into(), Stat::Count(self.rows_pre_filter));
        m.insert("dpsPreFilter".into(), Stat::Count(self.dps_post_filter));
        m.insert("rowsPostFilter".into(), Stat::Count(self.rows_post_filter));
        m.insert("dpsPostFilter".into(), Stat::Count(self.dps_post_filter));
        m.insert("scannerUidToStringTime".into(), Stat::Time(nanos(self.uid_resolve)));
        m.insert("uidPairsResolved".into(), Stat::Count(self.uid_pairs_resolved));
        m.insert("compactionTime".into(), Stat::Time(0));
        m
    }

    /// The sub-query's map after 2.4's `aggQueryStats`: its own stats, the scanner's counters, averages and
    /// maxima of the scanner's times, and (`queryIdx_NN` only) the scanner maps.
    fn aggregated(&self) -> Map {
        let mut map = BTreeMap::new();
        self.base(&mut map);
        let scanner = self.scanner();
        for key in
            ["successfulScan", "rowsPreFilter", "dpsPreFilter", "rowsPostFilter", "dpsPostFilter", "uidPairsResolved"]
        {
            if let Some(Stat::Count(n)) = scanner.get(key) {
                map.insert(key.to_string(), Stat::Count(*n));
            }
        }
        // One scanner: every average and maximum is its value. (2.4's pairs put scannerTime's maximum under
        // maxHBaseTime as well; rtsd's scanner and storage times are the same number.)
        let scan = nanos(self.scan);
        let uid = nanos(self.uid_resolve);
        map.insert("avgHBaseTime".into(), Stat::Time(scan));
        map.insert("maxHBaseTime".into(), Stat::Time(scan));
        map.insert("avgScannerTime".into(), Stat::Time(scan));
        map.insert("maxScannerUidToStringTime".into(), Stat::Time(uid));
        map.insert("avgScannerUidToStringTime".into(), Stat::Time(uid));
        map
    }
}

/// The stats of a whole query.
#[derive(Debug)]
pub struct QueryStats {
    started: Instant,
    pub subs: Vec<SubStats>,
}

impl Default for QueryStats {
    fn default() -> Self {
        QueryStats { started: Instant::now(), subs: Vec::new() }
    }
}

impl QueryStats {
    /// The `{"statsSummary":{...}}` element, as of now (its `processingPreWriteTime` ends here).
    pub fn summary_json(&self) -> String {
        let mut overall: Map = BTreeMap::new();
        overall.insert("processingPreWriteTime".into(), Stat::Time(nanos(self.started.elapsed())));
        // Scanner times over every scanner of every sub-query: 2.4 divides the sum by 1 when unsalted (its
        // divisor's precedence makes it SALT_BUCKETS or 1, never the scanner count).
        let scans: Vec<u64> = self.subs.iter().map(|s| nanos(s.scan)).collect();
        let uids: Vec<u64> = self.subs.iter().map(|s| nanos(s.uid_resolve)).collect();
        if !self.subs.is_empty() {
            let sum = |v: &[u64]| v.iter().sum::<u64>();
            let max = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
            overall.insert("avgHBaseTime".into(), Stat::Time(sum(&scans)));
            overall.insert("avgScannerTime".into(), Stat::Time(sum(&scans)));
            overall.insert("maxHBaseTime".into(), Stat::Time(max(&scans)));
            overall.insert("maxScannerUidToStringTime".into(), Stat::Time(sum(&uids)));
            overall.insert("avgScannerUidToStringTime".into(), Stat::Time(max(&uids)));
        }
        // Sub-query counters add up; their times give an average (over all sub-queries) and a maximum, under
        // 2.4's names: (name of the average, name of the maximum).
        let n = self.subs.len() as u64;
        let timed: [(&str, &'static str, &'static str); 4] = [
            ("queryScanTime", "maxQueryScanTime", "avgQueryScanTime"),
            ("uidToStringTime", "maxUidToStringTime", "maxUidToStringTime"),
            ("aggregationTime", "maxAggregationTime", "avgAggregationTime"),
            ("serializationTime", "maxSerializationTime", "avgSerializationTime"),
        ];
        let mut cumulations: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut maps = Vec::new();
        for sub in &self.subs {
            let mut map = sub.aggregated();
            for (key, value) in &map {
                match value {
                    Stat::Count(c) => {
                        let total = match overall.get(key) {
                            Some(Stat::Count(t)) => t + c,
                            _ => *c,
                        };
                        overall.insert(key.clone(), Stat::Count(total));
                    }
                    Stat::Time(t) if timed.iter().any(|(k, ..)| k == key) => {
                        let entry = cumulations.entry(key.clone()).or_insert((0, 0));
                        entry.0 += t;
                        entry.1 = entry.1.max(*t);
                    }
                    _ => {}
                }
            }
            map.insert("queryIndex".into(), Stat::Count(sub.index as u64));
            let mut scanners = BTreeMap::new();
            scanners.insert("scannerIdx_00".into(), Stat::Map(sub.scanner()));
            map.insert("scannerStats".into(), Stat::Map(scanners));
            maps.push((sub.index, map));
        }
        for (key, avg_name, max_name) in timed {
            if let Some((total, max)) = cumulations.get(key) {
                overall.insert(avg_name.into(), Stat::Time(total / n.max(1)));
                overall.insert(max_name.into(), Stat::Time(*max));
            }
        }
        for (index, map) in maps {
            overall.insert(format!("queryIdx_{index:02}"), Stat::Map(map));
        }
        format!("{{\"statsSummary\":{}}}", render(&Stat::Map(overall)))
    }
}

/// Renders a stat as JSON.
fn render(stat: &Stat) -> String {
    let mut out = String::new();
    write(stat, &mut out);
    out
}

fn write(stat: &Stat, out: &mut String) {
    match stat {
        Stat::Time(ns) => out.push_str(&double_to_string(*ns as f64 / 1_000_000.0)),
        Stat::Count(n) => out.push_str(&n.to_string()),
        Stat::Text(s) => out.push_str(&json_string(s)),
        Stat::Map(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&json_string(k));
                out.push(':');
                write(v, out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(index: usize, scan_ms: u64, emitted: Option<u64>) -> SubStats {
        SubStats {
            index,
            scan: Duration::from_millis(scan_ms),
            last_result: emitted.map(|n| ResultStats { emitted_dps: n, ..ResultStats::default() }),
            ..SubStats::default()
        }
    }

    #[test]
    fn summary_times_use_opentsdbs_pairs_and_divisors() {
        // spec: query §1.6 (2.4's QueryStats.aggQueryStats): a sub-query time's sum over the number of sub-queries
        // goes under the first name of its pair and the maximum under the second, so `maxQueryScanTime` holds the
        // average; scanner times are summed (divided by 1 when unsalted); counters add up.
        let stats = QueryStats { started: Instant::now(), subs: vec![sub(0, 1, Some(4)), sub(1, 3, None)] };
        let json = stats.summary_json();
        for part in [
            r#""maxQueryScanTime":2.0,"#,
            r#""avgQueryScanTime":3.0,"#,
            r#""avgHBaseTime":4.0,"#,
            r#""maxHBaseTime":3.0,"#,
            r#""emittedDPs":4,"#,
            r#""successfulScan":2,"#,
        ] {
            assert!(json.contains(part), "{part} in {json}");
        }
        assert!(json.starts_with(r#"{"statsSummary":{"avgAggregationTime":0.0,"#), "{json}");
        assert_eq!(
            sub(3, 2, Some(7)).result_json(),
            r#"{"aggregationTime":0.0,"emittedDPs":7,"groupByTime":0.0,"queryIndex":3,"queryScanTime":2.0,"saltScannerMergeTime":0.0,"serializationTime":0.0,"uidToStringTime":0.0}"#
        );
    }
}
