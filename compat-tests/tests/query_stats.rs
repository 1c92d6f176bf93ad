//! `showStats` and `showSummary` against the real daemon (spec: query §1.6; OpenTSDB 2.4's `QueryStats` and
//! `HttpJsonSerializer.formatQueryAsyncV1`): a `stats` object after each result's `dps`, and one extra array
//! element `{"statsSummary":{...}}` after the results.
//!
//! Times cannot be asserted, so every `"...Time":<number>` is checked to be a Java-formatted double and replaced
//! by `T` (and the free-text `scannerId` by `S`); everything else, key order and counts included, is compared
//! byte for byte.
use rtsd_compat_tests::Daemon;

const T: i64 = 1356998400;

/// Dataset D1 (spec §8): web01 @T=40, @T+10=50, @T+30=70; web02 @T+10=37, @T+20=48.
fn d1() -> Daemon {
    let d = Daemon::start();
    let lines: String = [("web01", 0, 40), ("web01", 10, 50), ("web01", 30, 70), ("web02", 10, 37), ("web02", 20, 48)]
        .iter()
        .map(|(host, dt, v)| format!("put sys.cpu.user {} {v} host={host}\n", T + dt))
        .collect();
    d.put_lines(&lines);
    d
}

/// Masks times (asserting each is a non-negative Java double: digits with a `.`, maybe an exponent) and the
/// scanner description.
fn mask(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(i) = rest.find("\":") {
        let key_start = rest[..i].rfind('"').expect("a key");
        let key = &rest[key_start + 1..i];
        out.push_str(&rest[..i + 2]);
        rest = &rest[i + 2..];
        if key.ends_with("Time") {
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'E' || c == '-')).unwrap();
            let number = &rest[..end];
            assert!(number.contains('.') && number.parse::<f64>().is_ok_and(|t| t >= 0.0), "{key}: {number}");
            out.push('T');
            rest = &rest[end..];
        } else if key == "scannerId" {
            assert!(rest.starts_with('"'), "scannerId is a string: {rest}");
            let end = rest[1..].find('"').unwrap() + 2;
            out.push('S');
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn the_mask_checks_times() {
    assert_eq!(
        mask(r#"{"aTime":0.25,"b":1,"scannerId":"x y","cTime":1.0E-4}"#),
        r#"{"aTime":T,"b":1,"scannerId":S,"cTime":T}"#
    );
}

/// A result's `stats` (spec: query §1.6): the sub-query's stats as they stand when the result is written.
fn result_stats(emitted: u64, index: usize) -> String {
    format!(
        r#""stats":{{"aggregationTime":T,"emittedDPs":{emitted},"groupByTime":T,"queryIndex":{index},"queryScanTime":T,"saltScannerMergeTime":T,"serializationTime":T,"uidToStringTime":T}}"#
    )
}

/// A `queryIdx_NN` map: (emittedDPs of its last result if any, rows pre/post filter, points, UID pairs).
fn sub_summary(index: usize, emitted: Option<u64>, rows_pre: u64, rows_post: u64, dps: u64, pairs: u64) -> String {
    let scanner = format!(
        r#"{{"scannerIdx_00":{{"compactionTime":T,"dpsPostFilter":{dps},"dpsPreFilter":{dps},"hbaseTime":T,"rowsPostFilter":{rows_post},"rowsPreFilter":{rows_pre},"scannerId":S,"scannerTime":T,"scannerUidToStringTime":T,"successfulScan":1,"uidPairsResolved":{pairs}}}}}"#
    );
    let (aggregation, emitted, serialization, uid) = match emitted {
        Some(n) => (
            r#""aggregationTime":T,"#,
            format!(r#""emittedDPs":{n},"#),
            r#""serializationTime":T,"#,
            r#","uidToStringTime":T"#,
        ),
        None => ("", String::new(), "", ""),
    };
    format!(
        r#""queryIdx_{index:02}":{{{aggregation}"avgHBaseTime":T,"avgScannerTime":T,"avgScannerUidToStringTime":T,"dpsPostFilter":{dps},"dpsPreFilter":{dps},{emitted}"groupByTime":T,"maxHBaseTime":T,"maxScannerUidToStringTime":T,"queryIndex":{index},"queryScanTime":T,"rowsPostFilter":{rows_post},"rowsPreFilter":{rows_pre},"saltScannerMergeTime":T,"scannerStats":{scanner},{serialization}"successfulScan":1,"uidPairsResolved":{pairs}{uid}}}"#
    )
}

#[test]
fn show_stats_and_summary_report_opentsdbs_keys_and_counts() {
    // spec: query §1.6. Sub-query 0 groups by host (two results, 3 and 2 points, both series read); sub-query 1
    // keeps web01 by a regexp, so the scan meets web02's row and skips it.
    let d = d1();
    let r = d.post_json(
        "/api/query",
        &format!(
            r#"{{"start":{T},"end":{},"showStats":true,"showSummary":true,"queries":[
                {{"aggregator":"sum","metric":"sys.cpu.user","tags":{{"host":"*"}}}},
                {{"aggregator":"sum","metric":"sys.cpu.user","filters":[{{"type":"regexp","tagk":"host","filter":"web01","groupBy":false}}]}}]}}"#,
            T + 60
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let web01 = format!(r#""dps":{{"{T}":40,"{}":50,"{}":70}}"#, T + 10, T + 30);
    let web02 = format!(r#""dps":{{"{}":37,"{}":48}}"#, T + 10, T + 20);
    let expected = [
        format!(r#"[{{"metric":"sys.cpu.user","tags":{{"host":"web01"}},"aggregateTags":[],{web01},{}}}"#, result_stats(3, 0)),
        format!(r#"{{"metric":"sys.cpu.user","tags":{{"host":"web02"}},"aggregateTags":[],{web02},{}}}"#, result_stats(2, 0)),
        format!(r#"{{"metric":"sys.cpu.user","tags":{{"host":"web01"}},"aggregateTags":[],{web01},{}}}"#, result_stats(3, 1)),
        // 2.4 keeps each sub-query's last result's emittedDPs (2 and 3) and adds those up.
        format!(
            r#"{{"statsSummary":{{"avgAggregationTime":T,"avgHBaseTime":T,"avgQueryScanTime":T,"avgScannerTime":T,"avgScannerUidToStringTime":T,"avgSerializationTime":T,"dpsPostFilter":8,"dpsPreFilter":8,"emittedDPs":5,"maxAggregationTime":T,"maxHBaseTime":T,"maxQueryScanTime":T,"maxScannerUidToStringTime":T,"maxSerializationTime":T,"maxUidToStringTime":T,"processingPreWriteTime":T,{},{},"rowsPostFilter":3,"rowsPreFilter":4,"successfulScan":2,"uidPairsResolved":4}}}}]"#,
            sub_summary(0, Some(2), 2, 2, 5, 2),
            sub_summary(1, Some(3), 2, 1, 3, 2)
        ),
    ]
    .join(",");
    assert_eq!(mask(&r.text()), expected);

    // Each flag alone: stats without the summary element, the summary without per-result stats.
    let body = |flags: &str| {
        format!(
            r#"{{"start":{T},"end":{},{flags}"queries":[{{"aggregator":"sum","metric":"sys.cpu.user","tags":{{"host":"web02"}}}}]}}"#,
            T + 60
        )
    };
    let r = d.post_json("/api/query", &body(r#""showStats":true,"#));
    assert_eq!(
        mask(&r.text()),
        format!(
            r#"[{{"metric":"sys.cpu.user","tags":{{"host":"web02"}},"aggregateTags":[],{web02},{}}}]"#,
            result_stats(2, 0)
        )
    );
    // A literal filter reads its series' rows by key through the index: nothing met is skipped; the one
    // candidate's tag value is still named to check the filter.
    let r = d.post_json("/api/query", &body(r#""showSummary":true,"#));
    let text = mask(&r.text());
    let summary_at = text.find(r#",{"statsSummary":"#).expect("summary element");
    assert_eq!(
        &text[..summary_at],
        format!(r#"[{{"metric":"sys.cpu.user","tags":{{"host":"web02"}},"aggregateTags":[],{web02}}}"#)
    );
    assert!(
        text.ends_with(&format!(
            r#"{},"rowsPostFilter":1,"rowsPreFilter":1,"successfulScan":1,"uidPairsResolved":1}}}}]"#,
            sub_summary(0, Some(2), 1, 1, 2, 1)
        )),
        "{text}"
    );

    // GET flags (`show_stats`, `show_summary`) do the same.
    let r = d.http(
        "GET",
        &format!("/api/query?start={T}&end={}&m=sum:sys.cpu.user{{host=web02}}&show_stats&show_summary", T + 60),
        &[],
        b"",
    );
    let text = mask(&r.text());
    assert!(text.starts_with(&format!(r#"[{{"metric":"sys.cpu.user","tags":{{"host":"web02"}},"aggregateTags":[],{web02},{}}},{{"statsSummary":{{"#, result_stats(2, 0))), "{text}");
}

#[test]
fn a_summary_without_results_is_the_only_element() {
    // spec: query §1.6: 2.4 appends the summary even when nothing matched; the sub-query was scanned (its scan
    // stats are there) but wrote no result, so no result stats and no emittedDPs.
    let d = d1();
    let r = d.post_json(
        "/api/query",
        &format!(
            r#"{{"start":{},"end":{},"showSummary":true,"showStats":true,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user"}}]}}"#,
            T + 7200,
            T + 7260
        ),
    );
    assert_eq!(
        (r.status, mask(&r.text())),
        (
            200,
            format!(
                r#"[{{"statsSummary":{{"avgHBaseTime":T,"avgQueryScanTime":T,"avgScannerTime":T,"avgScannerUidToStringTime":T,"dpsPostFilter":0,"dpsPreFilter":0,"maxHBaseTime":T,"maxQueryScanTime":T,"maxScannerUidToStringTime":T,"processingPreWriteTime":T,{},"rowsPostFilter":0,"rowsPreFilter":0,"successfulScan":1,"uidPairsResolved":0}}}}]"#,
                sub_summary(0, None, 0, 0, 0, 0)
            )
        )
    );
    // Errors carry no stats.
    let r = d.post_json(
        "/api/query",
        &format!(r#"{{"start":{T},"showSummary":true,"queries":[{{"aggregator":"sum","metric":"nope"}}]}}"#),
    );
    assert_eq!(r.status, 400);
    assert!(!r.text().contains("statsSummary"));
}
