//! Rollups against the real daemon: the telnet `rollup` command and `/api/rollup` with OpenTSDB 2.4's texts and
//! status codes (spec: ingest §1.7, §6; query §6.13), and queries answered from rollup tables.
use rtsd_compat_tests::{replies_to, Daemon};

const ON: &[(&str, &str)] = &[("tsd.rollups.enable", "true")];
/// OpenTSDB's default; rtsd's shipped rtsd.conf turns rollups on.
const OFF: &[(&str, &str)] = &[("tsd.rollups.enable", "false")];

// spec: opentsdb-ingest-storage.md §1.7 (rollups disabled: OpenTSDB 2.4's default).
#[test]
fn telnet_rollup_without_rollups_configured() {
    let d = Daemon::start_with(OFF);
    let mut s = d.telnet();
    let cases = [
        ("rollup 1h-sum m 1700000000 1\n", "rollup: illegal argument: not enough arguments (need least 7, got 4)\n"),
        ("rollup\n", "rollup: illegal argument: not enough arguments (need least 7, got 0)\n"),
        ("rollup  m 1700000000 1 host=a\n", "rollup: illegal argument: Missing interval or aggregator\n"),
        (
            "rollup 1h-sum m 1700000000 1 host=a\n",
            "rollup: illegal argument: No rollup or aggregations were configured\n",
        ),
        // A pre-aggregate: with no aggregate tag key configured, OpenTSDB's tag check meets a null tag name.
        ("rollup sum m 1700000000 1 host=a\n", "rollup: illegal argument: Invalid tag name with value [SUM]: null\n"),
        (
            "rollup nope m 1700000000 1 host=a\n",
            "rollup: illegal argument: Invalid group by aggregator nope with metric m {host=a}\n",
        ),
    ];
    for (line, reply) in cases {
        assert_eq!(replies_to(&mut s, line), reply, "{line:?}");
    }
}

// spec: opentsdb-ingest-storage.md §1.6-§1.7; OpenTSDB 2.4 TSDB.addAggregatePointInternal, RollupConfig.
#[test]
fn telnet_rollup_with_rollups_configured() {
    let d = Daemon::start_with(ON);
    let mut s = d.telnet();
    let cases = [
        // Stored: no reply.
        ("rollup 1h-sum sys.cpu 1700000000 42 host=a\n", ""),
        ("rollup 10m-count:sum sys.cpu 1700000000 42 host=a\n", ""),
        ("rollup sum sys.cpu 1700000000 42 host=a\n", ""),
        // Dots are deleted before the timestamp is read (spec: ingest §2.2): milliseconds, refused for rollups.
        (
            "rollup 1h-sum sys.cpu 1700000000.5 42 host=a\n",
            "rollup: illegal argument: bad timestamp=17000000005 when trying to add value=[42]/0 to metric=sys.cpu, tags={host=a}\n",
        ),
        ("rollup : sys.cpu 1700000000 42 host=a\n", ""),
        ("rollup 2h-sum sys.cpu 1700000000 42 host=a\n", "rollup: No such rollup: No rollups configured for the interval: 2h\n"),
        // rtsd keeps the raw table raw: no rollup cells in the default interval's table (a deliberate difference).
        (
            "rollup 1s-count sys.cpu 1700000000 42 host=a\n",
            "rollup: illegal argument: The default rollup interval 1s is the raw data table; write its points with put\n",
        ),
        ("rollup 1h-avg sys.cpu 1700000000 42 host=a\n", "rollup: illegal argument: No ID found mapping to aggregator: avg\n"),
        ("rollup 1h-foo sys.cpu 1700000000 42 host=a\n", "rollup: illegal argument: No ID found mapping to aggregator: foo\n"),
        ("rollup 1h- sys.cpu 1700000000 42 host=a\n", "rollup: illegal argument: Aggregator cannot be null or empty.\n"),
        (
            "rollup avg sys.cpu 1700000000 42 host=a\n",
            "rollup: illegal argument: Derived group by aggregations are not allowed avg with metric sys.cpu {_aggregate=AVG, host=a}\n",
        ),
        (
            "rollup 1h-sum:sum sys.cpu 1700000000 42 host=a _aggregate=max\n",
            "rollup: illegal argument: Given tag value for _aggregate of max did not match the group by aggregator of sum for sys.cpu {_aggregate=max, host=a}\n",
        ),
        (
            "rollup 1h-sum sys.cpu 1700000000 42 host=a _aggregate=sum\n",
            "rollup: illegal argument: Given tag value for _aggregate of sum did not match the group by aggregator of null for sys.cpu {_aggregate=sum, host=a}\n",
        ),
        (
            "rollup 1h-sum sys.cpu 1700000000123 42 host=a\n",
            "rollup: illegal argument: bad timestamp=1700000000123 when trying to add value=[42]/0 to metric=sys.cpu, tags={host=a}\n",
        ),
        ("rollup 1h-sum sys.cpu 0 42 host=a\n", "rollup: illegal argument: invalid timestamp: 0\n"),
        ("rollup 1h-sum sys.cpu 17x 42 host=a\n", "rollup: invalid value: Invalid character 'x' in 17x\n"),
        ("rollup 1h-sum sys.cpu 1700000000 4x host=a\n", "rollup: invalid value: Invalid character 'x' in 4x\n"),
        ("rollup 1h-sum  1700000000 4 host=a\n", "rollup: illegal argument: empty metric name\n"),
        ("rollup 1h-sum sys.cpu 1700000000 4 hosta\n", "rollup: illegal argument: invalid tag: hosta\n"),
        (
            "rollup 1h-sum sys.cpu 1700000000 1e999 host=a\n",
            "rollup: illegal argument: value is NaN or Infinite: Infinity for metric=sys.cpu timestamp=1700000000\n",
        ),
        (
            "rollup 1h-sum sys.cpu 1700000000 1 host=a!\n",
            "rollup: illegal argument: Invalid tag value with key [host] (\"a!\"): illegal character: !\n",
        ),
    ];
    for (line, reply) in cases {
        assert_eq!(replies_to(&mut s, line), reply, "{line:?}");
    }
    // Read-only mode has no `rollup` command.
    let ro = Daemon::start_with(&[("tsd.rollups.enable", "true"), ("tsd.mode", "ro")]);
    let mut s = ro.telnet();
    assert_eq!(
        replies_to(&mut s, "rollup 1h-sum sys.cpu 1700000000 42 host=a\n"),
        "unknown command: rollup.  Try `help'.\n"
    );
}

// spec: opentsdb-query.md §6.13, opentsdb-ingest-storage.md §3.4-§3.5 (the put reply matrix applies).
#[test]
fn http_rollup_status_codes_and_details() {
    let d = Daemon::start_with(ON);
    let ok = r#"[{"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"},"interval":"1h","aggregator":"SUM"},
                 {"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"},"groupByAggregator":"sum"}]"#;
    let r = d.post("/api/rollup", ok);
    assert_eq!((r.status, r.text()), (204, String::new()));
    let bad = r#"[{"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"}},
                  {"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"},"interval":"1h"},
                  {"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"},"interval":"3h","aggregator":"sum"},
                  {"metric":"sys.cpu","timestamp":1700000000,"value":"x","tags":{"host":"b"},"interval":"1h","aggregator":"sum"},
                  {"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"},"interval":"1h","aggregator":"sum","groupByAggregator":""},
                  {"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b"},"interval":"1h","aggregator":"sum"}]"#;
    let r = d.post("/api/rollup?details", bad);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text(),
        concat!(
            r#"{"success":1,"failed":5,"errors":["#,
            r#"{"datapoint":{"metric":"sys.cpu","timestamp":1700000000,"value":"5","tags":{"host":"b"}},"error":"Missing interval"},"#,
            r#"{"datapoint":{"metric":"sys.cpu","timestamp":1700000000,"value":"5","tags":{"host":"b"},"interval":"1h"},"error":"Missing aggregator"},"#,
            r#"{"datapoint":{"metric":"sys.cpu","timestamp":1700000000,"value":"5","tags":{"host":"b"},"interval":"3h","aggregator":"sum"},"error":"Unexpected exception"},"#,
            r#"{"datapoint":{"metric":"sys.cpu","timestamp":1700000000,"value":"x","tags":{"host":"b"},"interval":"1h","aggregator":"sum"},"error":"Unable to parse value to a number"},"#,
            r#"{"datapoint":{"metric":"sys.cpu","timestamp":1700000000,"value":"5","tags":{"host":"b"},"interval":"1h","aggregator":"sum","groupByAggregator":""},"error":"Cannot write a group by data point without specifying the aggregation function. Metric=sys.cpu tags={host=b}"}"#,
            r#"]}"#
        )
    );
    // A null tag value fails its point with 2.4's text (Tags.validateString), as on /api/put.
    let null_tag = r#"{"metric":"sys.cpu","timestamp":1700000000,"value":5,"tags":{"host":"b","zz":null},"interval":"1h","aggregator":"sum"}"#;
    let r = d.post("/api/rollup?details", null_tag);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["errors"][0]["error"], "Invalid tag value with key [zz]: null", "{}", r.text());
    let r = d.post("/api/rollup", bad);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text(),
        r#"{"error":{"code":400,"message":"One or more data points had errors","details":"Please see the TSD logs or append \"details\" to the put request"}}"#
    );
    // Rollup points are not data points (OpenTSDB counts them apart): datapoints.added stays 0.
    let stats = d.http("GET", "/api/stats", &[], b"").json();
    let added = stats.as_array().unwrap().iter().find(|s| s["metric"] == "tsd.datapoints.added").unwrap().clone();
    assert_eq!(added["value"], "0", "{added}");
    let r = d.http("GET", "/api/rollup", &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(
        r.text(),
        r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [GET] is not permitted for this endpoint"}}"#
    );
    let r = d.post("/api/rollup", "");
    assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some("Missing request content")));
    // Rollups off: the interval is refused with OpenTSDB's text.
    let off = Daemon::start_with(OFF);
    let r = off.post(
        "/api/rollup?details",
        r#"{"metric":"m","timestamp":1700000000,"value":1,"tags":{"h":"a"},"interval":"1h","aggregator":"sum"}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["errors"][0]["error"], "No rollup or aggregations were configured");
    // Read-only mode has no /api/rollup.
    let ro = Daemon::start_with(&[("tsd.mode", "ro")]);
    assert_eq!(ro.post("/api/rollup", "{}").status, 404);
}

fn get(d: &Daemon, path: &str) -> (u16, String) {
    let r = d.http("GET", path, &[], b"");
    (r.status, r.text())
}

/// A query's body with the rollup echo taken out, to compare a rollup answer with the raw one.
fn without_rollup_echo(body: &str) -> String {
    let mut out = body.to_string();
    for usage in ["null", "\"ROLLUP_RAW\""] {
        for table in ["raw", "1m", "10m", "1h"] {
            out = out.replace(&format!(r#""rollupUsage":{usage},"rollupTable":"{table}""#), "");
        }
    }
    out
}

/// A deterministic stream of points: three hosts, every 30 s over two days, integers and floats, sent out of
/// order, with late points, identical duplicates and (fix_duplicates) overwrites of earlier values.
fn mixed_points() -> String {
    let mut lines = Vec::new();
    let mut x: u64 = 42;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for host in ["a", "b", "c"] {
        for i in 0..(2 * 86_400 / 30) {
            let r = next();
            let value =
                if r % 2 == 0 { format!("{}", (r >> 8) % 1000) } else { format!("{}.{:03}", (r >> 8) % 100, r % 1000) };
            lines.push(format!("put m {} {value} host={host}", 1_700_000_000 + i * 30));
        }
    }
    // Out of order: a deterministic shuffle.
    for i in (1..lines.len()).rev() {
        let j = (next() as usize) % (i + 1);
        lines.swap(i, j);
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

// spec: opentsdb-query.md §6.13 (rollupUsage, query.rollupTable), §0.6 (number format); issue 6 item 3.
#[test]
fn downsampled_queries_read_rollups_and_give_the_raw_answer() {
    let d = Daemon::start_with(&[("tsd.rollups.enable", "true"), ("tsd.storage.fix_duplicates", "true")]);
    d.put_lines(&mixed_points());
    // Late points and overwrites after the first rollups exist.
    let (status, _) = get(&d, "/api/query?start=1700000000&end=1700172800&m=sum:1h-sum:m");
    assert_eq!(status, 200);
    d.put_lines("put m 1700000030 7 host=a\nput m 1700003615 1.5 host=b\nput m 1700086400 99 host=c\nput m 1700000000 0.25 host=a\n");
    let start_end = [("1700000000", "1700172800"), ("1700001234", "1700090000")];
    let downsamples = [
        ("1h-avg", "1h"),
        ("1h-sum", "1h"),
        ("1h-count", "1h"),
        ("1h-min", "1h"),
        ("1h-max", "1h"),
        ("10m-avg", "10m"),
        ("1m-sum", "1m"),
        ("2h-avg", "1h"),
        ("30m-sum", "10m"),
        ("1d-avg", "1h"),
        ("6h-count", "1h"),
        ("1h-avg-zero", "1h"),
        ("5m-max-null", "1m"),
    ];
    for (start, end) in start_end {
        for (ds, table) in downsamples {
            for (agg, filter) in [("sum", "*"), ("avg", "a|c"), ("none", "*"), ("sum", "b")] {
                for rate in ["", "rate:"] {
                    let q = format!(
                        "/api/query?start={start}&end={end}&m={agg}:{ds}:{rate}m%7Bhost={filter}%7D&show_query"
                    );
                    let (status, rolled) = get(&d, &q);
                    assert_eq!(status, 200, "{q}: {rolled}");
                    assert!(
                        rolled.contains(&format!(r#""rollupUsage":null,"rollupTable":"{table}""#)),
                        "{q}: {rolled}"
                    );
                    let raw_q = q.replace(&format!(":{ds}:"), &format!(":{ds}:rollup_raw:"));
                    let (_, raw) = get(&d, &raw_q);
                    assert!(raw.contains(r#""rollupUsage":"ROLLUP_RAW","rollupTable":"raw""#), "{raw_q}: {raw}");
                    assert_eq!(without_rollup_echo(&rolled), without_rollup_echo(&raw), "{q}");
                }
            }
        }
    }
    // Without any filter every series is kept and rtsd reads the rollup rows in two halves side by side: the
    // same answers.
    for (start, end) in start_end {
        for (ds, table) in downsamples {
            for agg in ["sum", "avg", "none"] {
                let q = format!("/api/query?start={start}&end={end}&m={agg}:{ds}:m&show_query");
                let (status, rolled) = get(&d, &q);
                assert_eq!(status, 200, "{q}: {rolled}");
                assert!(rolled.contains(&format!(r#""rollupTable":"{table}""#)), "{q}: {rolled}");
                let (_, raw) = get(&d, &q.replace(&format!(":{ds}:"), &format!(":{ds}:rollup_raw:")));
                assert_eq!(without_rollup_echo(&rolled), without_rollup_echo(&raw), "{q}");
            }
        }
    }
    // A literal filter naming eight series or more: their rows are read in two halves side by side, the same
    // answers, in the same order.
    let mut wide = String::new();
    for h in 0..12 {
        for i in 0..200 {
            wide.push_str(&format!("put wide {} {}.{h} host=h{h:02}\n", 1_700_000_000 + i * 37 + h, i % 17));
        }
    }
    d.put_lines(&wide);
    let hosts = (0..11).map(|h| format!("h{h:02}")).collect::<Vec<_>>().join("|");
    for agg in ["sum", "none", "max"] {
        for filter in [format!("%7Bhost={hosts}%7D"), format!("%7B%7D%7Bhost=literal_or({hosts})%7D")] {
            let q = format!("/api/query?start=1700000000&end=1700010000&m={agg}:1m-avg:wide{filter}&show_query");
            let (status, rolled) = get(&d, &q);
            assert_eq!(status, 200, "{q}: {rolled}");
            assert!(rolled.contains(r#""rollupTable":"1m""#), "{q}: {rolled}");
            let (_, raw) = get(&d, &q.replace(":1m-avg:", ":1m-avg:rollup_raw:"));
            assert_eq!(without_rollup_echo(&rolled), without_rollup_echo(&raw), "{q}");
        }
    }
    // A downsample no rollup interval divides, or another function, reads raw data.
    for ds in ["90s-avg", "1h-dev", "1hc-avg", "0all-sum"] {
        let (_, body) = get(&d, &format!("/api/query?start=1700000000&end=1700090000&m=sum:{ds}:m&show_query"));
        assert!(body.contains(r#""rollupUsage":null,"rollupTable":"raw""#), "{ds}: {body}");
    }
}

// spec: opentsdb-query.md §6.13; OpenTSDB 2.4 TsdbQuery.FallbackRollupOnEmptyResult (each rollupUsage mode).
#[test]
fn rollup_usage_modes_with_externally_written_rollups() {
    let d = Daemon::start_with(&[("tsd.rollups.enable", "true"), ("rtsd.rollups.auto", "false")]);
    // Raw points over hours 0-3; rollups of hour 0 in the 1h table, hours 2-3 in the 10m table only.
    let mut lines = String::new();
    for i in 0..(4 * 60) {
        lines.push_str(&format!("put m {} 1 host=a\n", 1_700_006_400 + i * 60));
    }
    d.put_lines(&lines);
    let r = d.post(
        "/api/rollup",
        r#"[{"metric":"m","timestamp":1700006400,"value":1000,"tags":{"host":"a"},"interval":"1h","aggregator":"sum"},
            {"metric":"m","timestamp":1700013600,"value":500,"tags":{"host":"a"},"interval":"10m","aggregator":"sum"},
            {"metric":"m","timestamp":1700014200,"value":600,"tags":{"host":"a"},"interval":"10m","aggregator":"sum"}]"#,
    );
    assert_eq!(r.status, 204);
    let q = |usage: &str, start: u64, end: u64| {
        let usage = if usage.is_empty() { String::new() } else { format!("{usage}:") };
        get(&d, &format!("/api/query?start={start}&end={end}&m=sum:1h-sum:{usage}m"))
    };
    // Default (ROLLUP_NOFALLBACK): the 1h table's value, not the raw sum (60).
    assert_eq!(
        q("", 1700006400, 1700009999),
        (200, r#"[{"metric":"m","tags":{"host":"a"},"aggregateTags":[],"dps":{"1700006400":1000.0}}]"#.to_string())
    );
    assert_eq!(q("rollup_nofallback", 1700006400, 1700009999).1, q("", 1700006400, 1700009999).1);
    // Hours 2-3 have no 1h rollups: nothing, without fallback.
    assert_eq!(q("", 1700013600, 1700020799), (200, "[]".to_string()));
    // ROLLUP_FALLBACK: the next best interval that has data (10m: 500 + 600).
    assert_eq!(
        q("rollup_fallback", 1700013600, 1700020799),
        (200, r#"[{"metric":"m","tags":{"host":"a"},"aggregateTags":[],"dps":{"1700013600":1100.0}}]"#.to_string())
    );
    // ROLLUP_FALLBACK_RAW: raw data (60 points of 1 per hour).
    assert_eq!(
        q("rollup_fallback_raw", 1700013600, 1700020799),
        (
            200,
            r#"[{"metric":"m","tags":{"host":"a"},"aggregateTags":[],"dps":{"1700013600":60.0,"1700017200":60.0}}]"#
                .to_string()
        )
    );
    // ROLLUP_RAW: raw data even where rollups exist.
    assert_eq!(
        q("rollup_raw", 1700006400, 1700009999),
        (200, r#"[{"metric":"m","tags":{"host":"a"},"aggregateTags":[],"dps":{"1700006400":60.0}}]"#.to_string())
    );
    // The echo names the interval read, or raw (POST with showQuery).
    let body = |usage: &str| {
        format!(
            r#"{{"start":1700013600,"end":1700020799,"showQuery":true,"queries":[{{"aggregator":"sum","metric":"m","downsample":"1h-sum","rollupUsage":"{usage}"}}]}}"#
        )
    };
    let r = d.post("/api/query", &body("ROLLUP_FALLBACK"));
    assert_eq!(r.json()[0]["query"]["rollupTable"], "10m", "{}", r.text());
    assert_eq!(r.json()[0]["query"]["rollupUsage"], "ROLLUP_FALLBACK");
    let r = d.post("/api/query", &body("ROLLUP_FALLBACK_RAW"));
    assert_eq!(r.json()[0]["query"]["rollupTable"], "raw", "{}", r.text());
    // A series that exists only in a rollup table is found by a literal tag filter too (its postings are indexed).
    let r = d.post(
        "/api/rollup",
        r#"{"metric":"m","timestamp":1700006400,"value":7,"tags":{"host":"z"},"interval":"1h","aggregator":"sum"}"#,
    );
    assert_eq!(r.status, 204);
    for filter in ["z", "z|a", "*"] {
        let (status, body) =
            get(&d, &format!("/api/query?start=1700006400&end=1700009999&m=sum:1h-sum:m%7Bhost={filter}%7D"));
        assert_eq!(status, 200);
        assert!(
            body.contains(r#"{"metric":"m","tags":{"host":"z"},"aggregateTags":[],"dps":{"1700006400":7.0}}"#),
            "{filter}: {body}"
        );
    }
    // Rollups off: rollupUsage is accepted and ignored.
    let off = Daemon::start_with(OFF);
    off.put_lines("put m 1700006400 1 host=a\n");
    let (status, body) =
        get(&off, "/api/query?start=1700006400&end=1700009999&m=sum:1h-sum:rollup_fallback:m&show_query");
    assert_eq!(status, 200);
    assert!(body.contains(r#""rollupUsage":"ROLLUP_FALLBACK","rollupTable":"raw""#), "{body}");
}

// issue 6 item 1: pending rollup work is stored with the points, so kill -9 before any fold loses nothing.
#[test]
fn rollups_pending_at_a_crash_are_computed_after_the_restart() {
    // No background fold during the test: only the restart's queries fold.
    let mut d = Daemon::start_with(&[("tsd.rollups.enable", "true"), ("rtsd.rollups.flush_interval_ms", "3600000")]);
    d.put_lines(&mixed_points());
    d.kill9();
    let d = d.restart();
    // A grid read (a downsample of the interval's own width) reads the rows not folded yet raw (issue 22 item
    // 5); a cell read (2h of 1h rollups) folds them first. Both give the raw answer.
    let q =
        |d: &Daemon, usage: &str| get(d, &format!("/api/query?start=1700000000&end=1700172800&m=sum:1h-avg:{usage}m"));
    let q2h =
        |d: &Daemon, usage: &str| get(d, &format!("/api/query?start=1700000000&end=1700172800&m=sum:2h-avg:{usage}m"));
    let (status, rolled) = q(&d, "");
    assert_eq!(status, 200);
    assert!(rolled.len() > 100, "{rolled}");
    assert_eq!(rolled, q(&d, "rollup_raw:").1);
    // (Whether the grid read folded depends on whether a flush stored marks before the kill: marks the restart
    // has no notes of make every read fold first.)
    let (status, rolled_2h) = q2h(&d, "");
    assert_eq!(status, 200);
    assert_eq!(rolled_2h, q2h(&d, "rollup_raw:").1);
    let metrics = d.http("GET", "/metrics", &[], b"").text();
    assert!(!metrics.contains("rtsd_rollup_buckets_written_total 0\n"), "the cell read folded: {metrics}");
    // Points into hours already rolled up, after the restart: read raw, then folded again; still the raw answer.
    d.put_lines("put m 1700003015 123456 host=a\nput m 1700090015 -5.5 host=b\n");
    let (_, rolled_again) = q(&d, "");
    assert_ne!(rolled_again, rolled);
    assert_eq!(rolled_again, q(&d, "rollup_raw:").1);
    let (_, rolled_2h_again) = q2h(&d, "");
    assert_ne!(rolled_2h_again, rolled_2h);
    assert_eq!(rolled_2h_again, q2h(&d, "rollup_raw:").1);
    let metrics = d.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("rtsd_rollup_late_points_total 2\n"), "{metrics}");
}

// Rollups turned on for a directory that already holds raw data: until the tables are complete, queries that
// reach back before that read raw data instead of answering from rollups that lack the history.
#[test]
fn rollups_turned_on_later_never_hide_older_raw_data() {
    let d = Daemon::start_with(OFF);
    d.put_lines(&mixed_points());
    let q = "/api/query?start=1700000000&end=1700172800&m=sum:1h-avg:m&show_query";
    let (_, before) = get(&d, q);
    let d = d.restart_with(&[("tsd.rollups.enable", "true")]);
    let (status, after) = get(&d, q);
    assert_eq!(status, 200);
    assert!(after.contains(r#""rollupUsage":null,"rollupTable":"raw""#), "{after}");
    assert_eq!(after, before);
    // Also after late points into those hours: still the raw answer.
    d.put_lines("put m 1700003015 5 host=a\n");
    let (_, late) = get(&d, q);
    assert!(late.contains(r#""rollupTable":"raw""#), "{late}");
    assert_eq!(late, get(&d, &q.replace(":1h-avg:", ":1h-avg:rollup_raw:")).1.replace("\"ROLLUP_RAW\"", "null"));
}

// spec: opentsdb-query.md §6.13; OpenTSDB 2.4 TsdbQuery.tableToBeScanned (pre-aggregate tables) and
// resolveTagFilters (a literal filter on the aggregate tag asks for pre-aggregates).
#[test]
fn pre_aggregates_are_queried_from_their_tables() {
    let d = Daemon::start_with(ON);
    let mut s = d.telnet();
    let lines = "rollup sum m.pre 1700006400 10 host=a\nrollup sum m.pre 1700006460 20 host=a\n\
                 rollup 1h-sum:sum m.pre 1700006400 30 host=a\nput m.pre 1700006400 1 host=a\n";
    assert_eq!(replies_to(&mut s, lines), "");
    let q = |m: &str| get(&d, &format!("/api/query?start=1700006400&end=1700009999&m={m}"));
    // A literal filter on _aggregate: the default interval's pre-aggregate table, points as written.
    assert_eq!(
        q("sum:m.pre%7B_aggregate=SUM%7D"),
        (200, r#"[{"metric":"m.pre","tags":{"_aggregate":"SUM","host":"a"},"aggregateTags":[],"dps":{"1700006400":10,"1700006460":20}}]"#.to_string())
    );
    // With a downsample an interval matches: that interval's pre-aggregate table.
    let (status, body) = q("sum:1h-sum:m.pre%7B_aggregate=SUM%7D&show_query");
    assert_eq!(status, 200);
    assert!(body.contains(r#""rollupTable":"1h""#), "{body}");
    assert!(body.ends_with(r#""dps":{"1700006400":30.0}}]"#), "{body}");
    // preAggregate asks for them without a filter.
    let r = d.post(
        "/api/query",
        r#"{"start":1700006400,"end":1700009999,"queries":[{"aggregator":"sum","metric":"m.pre","downsample":"1h-sum","preAggregate":true}]}"#,
    );
    assert_eq!(
        r.text(),
        r#"[{"metric":"m.pre","tags":{"_aggregate":"SUM","host":"a"},"aggregateTags":[],"dps":{"1700006400":30.0}}]"#
    );
    // The aggregate tag's raw value, or no such filter: raw data.
    assert_eq!(
        q("sum:m.pre%7Bhost=a%7D").1,
        r#"[{"metric":"m.pre","tags":{"host":"a"},"aggregateTags":[],"dps":{"1700006400":1}}]"#
    );
}

// spec: ingest §6 (tsd.rollups.config inline); OpenTSDB 2.4 RollupInterval (day intervals in month rows).
#[test]
fn a_configured_day_interval_is_written_and_read() {
    let config = r#"{"aggregationIds":{"sum":0,"count":1},"intervals":[
        {"table":"tsdb","preAggregationTable":"tsdb-agg","interval":"1m","rowSpan":"1h","defaultInterval":true},
        {"table":"rollup-1d","preAggregationTable":"rollup-agg-1d","interval":"1d","rowSpan":"1n"}]}"#;
    let d = Daemon::start_with(&[("tsd.rollups.enable", "true"), ("tsd.rollups.config", config)]);
    let mut s = d.telnet();
    // 2023-11-14 and 2023-11-15, in one month row.
    let lines = "rollup 1d-sum m 1699920000 5 host=a\nrollup 1d-sum m 1700006400 7 host=a\nrollup 1h-sum m 1700006400 7 host=a\n";
    assert_eq!(replies_to(&mut s, lines), "rollup: No such rollup: No rollups configured for the interval: 1h\n");
    let (status, body) = get(&d, "/api/query?start=1699920000&end=1700092799&m=sum:1d-sum:m&show_query");
    assert_eq!(status, 200);
    assert!(body.contains(r#""rollupTable":"1d""#), "{body}");
    assert!(body.ends_with(r#""dps":{"1699920000":5.0,"1700006400":7.0}}]"#), "{body}");
    // 1m is the default interval (the raw table): nothing is computed for it, 1d is not computed either (it
    // does not divide an hour), so no raw point leads to rollup cells.
    d.put_lines("put m 1700006400 1 host=a\n");
    let metrics = d.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("rtsd_rollup_buckets_written_total 0\n"), "{metrics}");
}

// Retention (issue 6 item 4) and rollups: where raw data is kept longer than a rollup table, a query reaching past
// the table's retention reads raw data instead of answering from what the table has left.
#[test]
fn rollup_tables_kept_shorter_than_raw_data_fall_back_to_it() {
    let d = Daemon::start_with(&[
        ("tsd.rollups.enable", "true"),
        ("rtsd.retention.raw_hours", "0"),
        ("rtsd.retention.rollup_hours", "1"),
    ]);
    d.put_lines(&mixed_points());
    let q = "/api/query?start=1700000000&end=1700172800&m=sum:1h-avg:m&show_query";
    let (status, body) = get(&d, q);
    assert_eq!(status, 200);
    assert!(body.contains(r#""rollupUsage":null,"rollupTable":"raw""#), "{body}");
    assert!(body.contains(r#""dps":{"1700002800":"#), "{body}");
}
