//! Rollups against the real daemon: the telnet `rollup` command and `/api/rollup` with OpenTSDB 2.4's texts and
//! status codes (spec: ingest §1.7, §6; query §6.13), and queries answered from rollup tables.
use rtsd_compat_tests::{replies_to, Daemon};

const ON: &[(&str, &str)] = &[("tsd.rollups.enable", "true")];

// spec: opentsdb-ingest-storage.md §1.7 (rollups disabled: OpenTSDB 2.4's default).
#[test]
fn telnet_rollup_without_rollups_configured() {
    let d = Daemon::start();
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
    let r = d.post("/api/rollup", bad);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text(),
        r#"{"error":{"code":400,"message":"One or more data points had errors","details":"Please see the TSD logs or append \"details\" to the put request"}}"#
    );
    let r = d.http("GET", "/api/rollup", &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(
        r.text(),
        r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [GET] is not permitted for this endpoint"}}"#
    );
    let r = d.post("/api/rollup", "");
    assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some("Missing request content")));
    // Rollups off: the interval is refused with OpenTSDB's text.
    let off = Daemon::start();
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
