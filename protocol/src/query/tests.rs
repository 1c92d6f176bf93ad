//! Whole-request tests: the GET and POST forms, what real clients send (Grafana, pyopentsdb, the npm client),
//! the requests of the spec's vectors, the `query` echo, and property tests.

use proptest::prelude::*;

use super::*;

const NOW: i64 = 1_357_041_600_000;

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn get(pairs: &[(&str, &str)]) -> TsQuery {
    parse_get(&params(pairs), NOW).unwrap_or_else(|e| panic!("{pairs:?}: {e:?}"))
}

fn get_err(pairs: &[(&str, &str)]) -> RequestError {
    parse_get(&params(pairs), NOW).expect_err("should fail")
}

fn post(body: &str) -> TsQuery {
    parse_post(body.as_bytes(), NOW).unwrap_or_else(|e| panic!("{body}: {e:?}"))
}

fn post_err(body: &str) -> RequestError {
    parse_post(body.as_bytes(), NOW).expect_err("should fail")
}

fn filter(kind: FilterKind, tagk: &str, f: &str, group_by: bool) -> Filter {
    Filter::new(kind, tagk, f, group_by).unwrap()
}

// ---------------------------------------------------------------------------------------------------------------
// GET (spec: query §1.1)

// spec: query §1.1 (parameters and presence flags)
#[test]
fn get_flags_are_presence_based() {
    let q = get(&[
        ("start", "1h-ago"),
        ("m", "sum:sys.cpu.user"),
        ("ms", "false"),
        ("show_tsuids", "0"),
        ("no_annotations", ""),
        ("global_annotations", ""),
        ("show_query", ""),
        ("show_stats", ""),
        ("show_summary", ""),
        ("padding", ""),
        ("arrays", "false"),
    ]);
    assert!(q.ms_resolution && q.show_tsuids && q.no_annotations && q.global_annotations);
    assert!(q.show_query && q.show_stats && q.show_summary && q.padding && q.arrays);
    assert_eq!(q.start_ms, NOW - 3_600_000);
    assert_eq!(q.end_ms, NOW, "end defaults to now");
    let q = get(&[("start", "1h-ago"), ("m", "sum:sys.cpu.user")]);
    assert!(!q.ms_resolution && !q.arrays && !q.show_query && !q.delete);
    // The last `start`/`end` wins; an empty end means now.
    let q = get(&[("start", "2h-ago"), ("start", "1h-ago"), ("end", ""), ("m", "sum:m")]);
    assert_eq!((q.start_ms, q.end_ms), (NOW - 3_600_000, NOW));
}

// spec: query §1.1 (not supported on GET: timezone, useCalendar)
#[test]
fn get_ignores_timezone_and_calendar() {
    let q = get(&[
        ("start", "2013/01/01"),
        ("m", "sum:1h-avg:m"),
        ("timezone", "faketz12345"),
        ("tz", "America/Denver"),
        ("useCalendar", "true"),
    ]);
    assert_eq!(q.timezone, None);
    assert_eq!(q.start_ms, 1_356_998_400_000);
    assert!(!q.queries[0].downsampler.as_ref().unwrap().calendar);
}

// spec: query §1.1 (m= grammar)
#[test]
fn get_m_grammar() {
    let q = get(&[("start", "1h-ago"), ("m", "sum:rate:proc.stat.cpu{host=foo,type=idle}")]);
    let s = &q.queries[0];
    assert_eq!((s.aggregator.as_str(), s.metric.as_deref(), s.rate), ("sum", Some("proc.stat.cpu"), true));
    assert_eq!(s.rate_options, None, "plain rate leaves options unset");
    assert_eq!(s.effective_rate_options(), RateOptions::default());
    assert_eq!(
        s.filters,
        vec![filter(FilterKind::LiteralOr, "host", "foo", true), filter(FilterKind::LiteralOr, "type", "idle", true)]
    );
    assert_eq!(s.group_by_tagks(), vec!["host", "type"]);
    assert_eq!(s.filters[0].literal_values().unwrap(), ["foo"]);

    let q = get(&[("start", "1h-ago"), ("m", "sum:explicit_tags:1m-sum:rate:sys.cpu.0{host=web01}")]);
    let s = &q.queries[0];
    assert!(s.explicit_tags && s.rate);
    assert_eq!(s.downsample.as_deref(), Some("1m-sum"));
    let ds = s.downsampler.as_ref().unwrap();
    assert_eq!((ds.interval_ms, ds.function.as_str()), (60_000, "sum"));

    // Middle parts in any order; unknown ones ignored; case-insensitive keywords.
    let q = get(&[("start", "1h-ago"), ("m", "avg:RATE{counter,100}:whatever:10m-avg-nan:m")]);
    let s = &q.queries[0];
    assert_eq!(s.rate_options, Some(RateOptions { counter: true, counter_max: 100, ..RateOptions::default() }));
    assert_eq!(s.downsampler.as_ref().unwrap().fill, FillPolicy::NaN);

    let q = get(&[("start", "1h-ago"), ("m", "sum:pre-agg:rollup_raw:m")]);
    assert!(q.queries[0].pre_aggregate);
    assert_eq!(q.queries[0].rollup_usage, Some(RollupUsage::Raw));
    let q = get(&[("start", "1h-ago"), ("m", "sum:rollup_whatever:m")]);
    assert_eq!(q.queries[0].rollup_usage, Some(RollupUsage::NoFallback));

    let q = get(&[("start", "1h-ago"), ("m", "sum:percentiles[99.9, 50]:show-histogram-buckets:m")]);
    assert_eq!(q.queries[0].percentiles, Some(vec![50.0, 99.9]));
    assert!(q.queries[0].show_histogram_buckets && q.queries[0].is_histogram_query());
}

// spec: query §1.1 (tag braces), §5.3
#[test]
fn get_tag_braces() {
    let subs = |m: &str| get(&[("start", "1h-ago"), ("m", m)]).queries.remove(0);
    assert!(subs("sum:m{}").filters.is_empty());
    assert_eq!(subs("sum:m{}").metric.as_deref(), Some("m"));
    // First group: group-by; second group: not group-by, and parsed first.
    let s = subs("sum:m{host=*}{dc=lga|lga1}");
    assert_eq!(
        s.filters,
        vec![filter(FilterKind::LiteralOr, "dc", "lga|lga1", false), Filter::from_legacy("host", "*", true).unwrap()]
    );
    assert_eq!(s.group_by_tagks(), vec!["host"]);
    assert_eq!(s.filter_tagks(), vec!["dc", "host"]);
    // Filter only.
    let s = subs("sum:m{}{host=web*}");
    assert_eq!(s.filters.len(), 1);
    assert!(!s.filters[0].group_by && s.filters[0].case_insensitive);
    // Explicit types, type names lower-cased.
    let s = subs("sum:m{host=Regexp(web.*),dc=iliteral_or(LGA)}");
    assert_eq!(s.filters[0].kind, FilterKind::Regexp);
    assert_eq!(s.filters[1].kind, FilterKind::ILiteralOr);
    // The same filter in both groups is kept once, as group-by.
    let s = subs("sum:m{host=web01}{host=web01}");
    assert_eq!(s.filters, vec![filter(FilterKind::LiteralOr, "host", "web01", true)]);
    // Two literal filters on one key stay two filters (the engine ORs them, spec: query §5.2).
    let s = subs("sum:m{host=web01,host=web02}");
    assert_eq!(s.filters.len(), 2);
    // An empty piece ends the first group when there is a second one.
    let s = subs("sum:m{a=b,,c=d}{x=y}");
    assert_eq!(s.filter_tagks(), vec!["x", "a"]);
    // A metric that is only braces is missing.
    assert_eq!(
        get_err(&[("start", "1h-ago"), ("m", "sum:{host=a}")]).message,
        "Missing the metric or tsuids, provide at least one"
    );
}

// spec: query §1.1 (brace errors), §10
#[test]
fn get_brace_errors() {
    let err = |m: &str| get_err(&[("start", "1h-ago"), ("m", m)]);
    let e = err("sum:m{host=a");
    assert_eq!((e.kind, e.message.as_str()), (RequestErrorKind::BadRequest, "Missing '}' at the end of: m{host=a"));
    assert_eq!(err("sum:m{host}").message, "When parsing tag 'host': invalid tag: host");
    assert_eq!(err("sum:m{host=a=b}").message, "When parsing tag 'host=a=b': invalid tag: host=a=b");
    assert_eq!(err("sum:m{host=a,}").message, "When parsing tag '': invalid tag: ");
    assert_eq!(err("sum:m{=a}").message, "When parsing tag '=a': invalid tag: =a");
    assert_eq!(err("sum:m{}{dc}").message, "When parsing filter 'dc': invalid tag: dc");
    assert_eq!(
        err("sum:m{host=wildcard(web)}").message,
        "When parsing tag 'host=wildcard(web)': Filter must contain an asterisk"
    );
    // The one replicated 500: an unknown filter type inside the braces.
    let e = err("sum:m{host=nosuchfilter(x)}");
    assert_eq!(e.kind, RequestErrorKind::Internal);
    assert_eq!(
        e.message,
        "When parsing tag 'host=nosuchfilter(x)': Could not find a tag value filter of the type: nosuchfilter"
    );
    assert_eq!(e.details, None);
    assert_eq!(err("sum:m{}{host=not_key(x)}").kind, RequestErrorKind::Internal);
    assert_eq!(err("sum:").message, "Metric cannot be null or empty");
    // The second group is read first.
    assert_eq!(err("sum:a}b{c}").message, "When parsing filter 'c': invalid tag: c");
    assert_eq!(err("sum:a}b{c=d}").message, "String index out of range: -3");
}

// spec: query §1.1 (m= part-count, rate, empty errors), §1.4
#[test]
fn get_m_errors() {
    let err = |m: &str| get_err(&[("start", "1h-ago"), ("m", m)]).message;
    assert_eq!(err(""), "The query string was empty");
    assert_eq!(err("sum"), "Invalid parameter m=sum (not enough :-separated parts)");
    assert_eq!(err("sum:a:b:c:d:m"), "Invalid parameter m=sum:a:b:c:d:m (too many :-separated parts)");
    assert_eq!(err("sum:rate{:m"), "Invalid rate options specification: rate{");
    assert_eq!(err("sum:rate{counter,x}:m"), "Max value of counter was not a number, received 'x'");
    assert_eq!(err("sum::m"), "String index out of range: 0");
    assert_eq!(err("sum:percentiles:m"), "Malformated percentile query paramater: percentiles");
    assert_eq!(err("sum:percentiles[a]:m"), "For input string: \"a\"");
    assert_eq!(err("foo:m"), "No such aggregation function: foo");
    assert_eq!(err("Sum:m"), "No such aggregation function: Sum");
    assert_eq!(err(":m"), "Missing the aggregation function");
    assert_eq!(err("sum:1m-foo:m"), "No such downsampling function: foo");
    assert_eq!(err("sum:10m-avg-badbadbad:m"), "Unrecognized fill policy: badbadbad");
    assert_eq!(err("avg:percentiles[50]:m"), "Only NONE or SUM aggregation function supported for histogram query");
    assert_eq!(err("sum:1m-avg:percentiles[50]:m"), "Only SUM downsampling aggregation supported for histogram query");
    assert_eq!(err("sum:percentiles[101]:m"), "Invalid percentile parameters: 101.0");
}

// spec: query §1.1, vector V15
#[test]
fn get_missing_things() {
    let e = get_err(&[("m", "sum:m")]);
    assert_eq!(
        (e.kind, e.message.as_str(), e.details),
        (RequestErrorKind::BadRequest, "Missing parameter <code>start</code>", None)
    );
    assert_eq!(get_err(&[("start", ""), ("m", "sum:m")]).message, "Missing parameter <code>start</code>");
    assert_eq!(get_err(&[("start", "1h-ago")]).message, "Missing sub queries");
    assert_eq!(get_err(&[("start", "1h-ago"), ("ms", "")]).message, "Missing sub queries");
    let e = get_err(&[("start", "1356998460"), ("end", "1356998400"), ("m", "sum:m")]);
    assert_eq!(e.message, "End time [1356998400000] must be greater than the start time [1356998460000]");
    let details = e.details.unwrap();
    assert!(details.starts_with("TSQuery(start_time=1356998460, end_time=1356998400, subQueries[TSSubQuery(metric=m"));
    assert_eq!(
        get_err(&[("start", "1356998400"), ("end", "1356998400"), ("m", "sum:m")]).message,
        "End time [1356998400000] must be greater than the start time [1356998400000]"
    );
    assert_eq!(
        get_err(&[("start", "1h-agoo"), ("m", "sum:m")]).message,
        "Invalid time: 1h-agoo. Invalid character 'h' in 1h-agoo"
    );
}

// spec: query §1.1 (tsuid= grammar)
#[test]
fn get_tsuid_grammar() {
    let q = get(&[("start", "1h-ago"), ("tsuid", "sum:000001000002000042,000001000002000043")]);
    let s = &q.queries[0];
    assert_eq!(s.metric, None);
    assert_eq!(s.tsuid_list().unwrap(), ["000001000002000042".to_string(), "000001000002000043".to_string()]);
    let q = get(&[("start", "1h-ago"), ("tsuid", "sum:rate{counter}:1m-avg:000001000002000042,")]);
    let s = &q.queries[0];
    assert!(s.rate && s.rate_options.unwrap().counter);
    assert_eq!(s.downsample.as_deref(), Some("1m-avg"));
    assert_eq!(s.tsuids.as_ref().unwrap().len(), 1, "Java's split drops the trailing empty piece");
    // explicit_tags and pre-agg are m= only: ignored here.
    let q = get(&[("start", "1h-ago"), ("tsuid", "sum:explicit_tags:000001000002000042")]);
    assert!(!q.queries[0].explicit_tags);
    // Errors (note OpenTSDB says m= for tsuid= too).
    let err = |t: &str| get_err(&[("start", "1h-ago"), ("tsuid", t)]).message;
    assert_eq!(err(""), "The tsuid query string was empty");
    assert_eq!(err("sum"), "Invalid parameter m=sum (not enough :-separated parts)");
    assert_eq!(err("sum:,"), "Missing the metric or tsuids, provide at least one");
    // tsuid= sub-queries come before m= ones, whatever the parameter order.
    let q = get(&[("start", "1h-ago"), ("m", "sum:m"), ("tsuid", "avg:000001000002000042")]);
    assert_eq!(q.queries[0].aggregator, "avg");
    assert_eq!((q.queries[0].index, q.queries[1].index), (0, 1));
    assert_eq!(q.queries[1].metric.as_deref(), Some("m"));
}

// spec: query §1.1 (TSUID metric check)
#[test]
fn tsuids_share_metric() {
    let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(check_tsuids_share_metric(&t(&["000001000002000042", "000001000002000043"]), 3).is_ok());
    assert!(check_tsuids_share_metric(&t(&["00000a000002", "00000A000003"]), 3).is_ok());
    assert_eq!(
        check_tsuids_share_metric(&t(&["000001000002000042", "000002000002000043"]), 3).unwrap_err().message,
        "One or more TSUIDs did not share the same metric [000001] [000002]"
    );
    assert_eq!(check_tsuids_share_metric(&t(&["0001"]), 3).unwrap_err().message, "String index out of range: 6");
}

// spec: query §1.1 (de-duplication and re-indexing)
#[test]
fn get_dedupes_and_reindexes() {
    let q = get(&[
        ("start", "1h-ago"),
        ("m", "sum:m{host=*}"),
        ("m", "avg:m"),
        ("m", "sum:m{host=*}"),
        // Equal to the first: filter equality ignores group-by.
        ("m", "sum:m{}{host=*}"),
        ("m", "avg:m"),
        ("m", "max:m"),
    ]);
    let aggs: Vec<&str> = q.queries.iter().map(|s| s.aggregator.as_str()).collect();
    assert_eq!(aggs, ["sum", "avg", "max"]);
    let idx: Vec<usize> = q.queries.iter().map(|s| s.index).collect();
    assert_eq!(idx, [0, 1, 2]);
    assert!(q.queries[0].filters[0].group_by, "the first of the duplicates survives");
    // Literal sets compare as sets.
    let q = get(&[("start", "1h-ago"), ("m", "sum:m{host=a|b}"), ("m", "sum:m{host=b|a}")]);
    assert_eq!(q.queries.len(), 1);
    // Different downsample text is different, even when it means the same.
    let q = get(&[("start", "1h-ago"), ("m", "sum:60s-avg:m"), ("m", "sum:1m-avg:m")]);
    assert_eq!(q.queries.len(), 2);
}

// ---------------------------------------------------------------------------------------------------------------
// POST (spec: query §1.2)

// spec: query §1.2 (docs example bodies)
#[test]
fn post_docs_examples() {
    let q = post(
        r#"{"start":1356998400,"end":1356998460,"queries":[
          {"aggregator":"sum","metric":"sys.cpu.0","rate":"true","tags":{"host":"*","dc":"lga"}},
          {"aggregator":"sum","tsuids":["000001000002000042","000001000002000043"]}]}"#,
    );
    assert_eq!((q.start_ms, q.end_ms), (1_356_998_400_000, 1_356_998_460_000));
    assert_eq!((q.start.as_deref(), q.end.as_deref()), (Some("1356998400"), Some("1356998460")));
    let s = &q.queries[0];
    assert!(s.rate);
    assert_eq!(
        s.filters,
        vec![Filter::from_legacy("host", "*", true).unwrap(), filter(FilterKind::LiteralOr, "dc", "lga", true)]
    );
    assert_eq!(q.queries[1].tsuid_list().unwrap().len(), 2);
    assert_eq!(q.queries[1].index, 1);

    let q = post(
        r#"{"start":1356998400,"end":1356998460,"queries":[
          {"aggregator":"sum","metric":"sys.cpu.0","rate":"true","filters":[
             {"type":"wildcard","tagk":"host","filter":"*","groupBy":true},
             {"type":"literal_or","tagk":"dc","filter":"lga|lga1|lga2","groupBy":false}]}]}"#,
    );
    assert_eq!(
        q.queries[0].filters,
        vec![
            filter(FilterKind::Wildcard, "host", "*", true),
            filter(FilterKind::LiteralOr, "dc", "lga|lga1|lga2", false)
        ]
    );
    assert_eq!(q.queries[0].group_by_tagks(), vec!["host"]);
}

// spec: query §1.2 (tags vs filters: the last one wins)
#[test]
fn post_tags_and_filters_last_wins() {
    let f = r#"[{"type":"literal_or","tagk":"host","filter":"web01","groupBy":false}]"#;
    let body = |sub: String| format!(r#"{{"start":1356998400,"queries":[{{"aggregator":"sum","metric":"m",{sub}}}]}}"#);
    // filters then an empty tags map: no filters at all.
    let q = post(&body(format!(r#""filters":{f},"tags":{{}}"#)));
    assert!(q.queries[0].filters.is_empty());
    // filters then tags: the tags.
    let q = post(&body(format!(r#""filters":{f},"tags":{{"dc":"lga"}}"#)));
    assert_eq!(q.queries[0].filters, vec![filter(FilterKind::LiteralOr, "dc", "lga", true)]);
    // tags then filters: the filters.
    let q = post(&body(format!(r#""tags":{{"dc":"lga"}},"filters":{f}"#)));
    assert_eq!(q.queries[0].filters, vec![filter(FilterKind::LiteralOr, "host", "web01", false)]);
    // tags then filters then null tags: a cleared list.
    let q = post(&body(format!(r#""tags":{{"dc":"lga"}},"filters":{f},"tags":null"#)));
    assert!(q.queries[0].filters.is_empty());
    // A repeated key: the last value.
    let q = post(&body(r#""metric":"other","tags":{"dc":"a","dc":"b"}"#.to_string()));
    assert_eq!(q.queries[0].metric.as_deref(), Some("other"));
    assert_eq!(q.queries[0].filters, vec![filter(FilterKind::LiteralOr, "dc", "b", true)]);
    // `null` tags with no filter list before: OpenTSDB fails on its null list.
    assert_eq!(post_err(&body(r#""tags":null"#.to_string())).message, "Unable to parse the given JSON");
    // `filters: null` is no filters.
    assert!(post(&body(r#""filters":null"#.to_string())).queries[0].filters.is_empty());
}

// spec: query §1.2 (coercions, aliases, unknown keys)
#[test]
fn post_coercions_and_aliases() {
    let q = post(
        r#"{"start":"1356998400","end":"1356998460000","unknown":{"x":[1,2]},"padding":true,"options":{},
            "queries":[{"aggregator":"sum","metric":"m","rate":"True","explicitTags":1,"index":7,"foo":"bar",
              "rateOptions":{"isCounter":"true","counterMax":65535.0,"resetValue":"35","dropResets":false,"x":1},
              "filters":[{"type":"iwildcard","tagk":"host","filter":"WEB*","group_by":true,"extra":1}],
              "useFuzzyFilter":false,"useMultiGets":"false","preAggregate":true,"rollupUsage":"rollup_fallback"}]}"#,
    );
    assert_eq!((q.start_ms, q.end_ms), (1_356_998_400_000, 1_356_998_460_000));
    assert!(q.padding);
    let s = &q.queries[0];
    assert!(s.rate && s.explicit_tags && !s.use_fuzzy_filter && !s.use_multi_gets && s.pre_aggregate);
    assert_eq!(s.index, 0);
    assert_eq!(s.rollup_usage, Some(RollupUsage::Fallback));
    assert_eq!(
        s.rate_options,
        Some(RateOptions { counter: true, counter_max: 65535, reset_value: 35, drop_resets: false })
    );
    assert_eq!(s.filters, vec![filter(FilterKind::IWildcard, "host", "WEB*", true)]);
    assert!(s.filters[0].matches("web01"));
    // Start as a float token keeps its text: seconds.millis.
    assert_eq!(
        post(r#"{"start":1356998400.123,"queries":[{"aggregator":"sum","metric":"m"}]}"#).start_ms,
        1_356_998_400_123
    );
    // rollupUsage null is OpenTSDB's default.
    let q = post(r#"{"start":1,"queries":[{"aggregator":"sum","metric":"m","rollupUsage":null}]}"#);
    assert_eq!(q.queries[0].rollup_usage, Some(RollupUsage::NoFallback));
    // JSON "delete" is bound as 2.4's Jackson binds it; the daemon decides whether deleting is allowed (§1.7).
    assert!(post(r#"{"start":1,"delete":true,"queries":[{"aggregator":"sum","metric":"m"}]}"#).delete);
    assert!(!post(r#"{"start":1,"delete":false,"queries":[{"aggregator":"sum","metric":"m"}]}"#).delete);
    // Percentiles are sorted.
    let q = post(r#"{"start":1,"queries":[{"aggregator":"sum","metric":"m","percentiles":[99.9,"50",95]}]}"#);
    assert_eq!(q.queries[0].percentiles, Some(vec![50.0, 95.0, 99.9]));
}

// spec: query §1.2, §1.4, §0.3, vector V15
#[test]
fn post_errors() {
    let e = post_err("");
    assert_eq!(
        (e.kind, e.message.as_str(), e.details.as_deref()),
        (
            RequestErrorKind::BadRequest,
            "Missing message content",
            Some("Supply valid JSON formatted data in the body of your request")
        )
    );
    let e = post_err("{");
    assert_eq!((e.kind, e.message.as_str()), (RequestErrorKind::BadRequest, "Unable to parse the given JSON"));
    assert!(e.details.is_some());
    assert_eq!(post_err("   ").message, "Unable to parse the given JSON");
    assert_eq!(post_err("[]").message, "Unable to parse the given JSON");
    assert_eq!(post_err(r#"{"queries":[{"aggregator":"sum","metric":"m"}]}"#).message, "Missing start time");
    assert_eq!(
        post_err(r#"{"start":null,"queries":[{"aggregator":"sum","metric":"m"}]}"#).message,
        "Missing start time"
    );
    assert_eq!(post_err(r#"{"start":1356998400}"#).message, "Missing queries");
    assert_eq!(post_err(r#"{"start":1356998400,"queries":[]}"#).message, "Missing queries");
    let e = post_err(r#"{"start":1356998400,"queries":[{"aggregator":"foo","metric":"m"}]}"#);
    assert_eq!((e.kind, e.message.as_str()), (RequestErrorKind::BadRequest, "No such aggregation function: foo"));
    assert!(e.details.unwrap().contains("TSSubQuery(metric=m, filters=[], tsuids=[], agg=foo"));
    assert_eq!(
        post_err(r#"{"start":1356998400,"queries":[{"metric":"m"}]}"#).message,
        "Missing the aggregation function"
    );
    assert_eq!(
        post_err(r#"{"start":1356998400,"queries":[{"aggregator":"sum"}]}"#).message,
        "Missing the metric or tsuids, provide at least one"
    );
    assert_eq!(
        post_err(
            r#"{"start":1356998400,"queries":[{"aggregator":"sum","metric":"m","downsample":"10m-avg-badbadbad"}]}"#
        )
        .message,
        "Unrecognized fill policy: badbadbad"
    );
    // Filter construction failures are binding failures: 400 with the reason in details.
    let e = post_err(
        r#"{"start":1,"queries":[{"aggregator":"sum","metric":"m","filters":[{"type":"nosuch","tagk":"host","filter":"x"}]}]}"#,
    );
    assert_eq!((e.kind, e.message.as_str()), (RequestErrorKind::BadRequest, "Unable to parse the given JSON"));
    assert_eq!(e.details.as_deref(), Some("Could not find a tag value filter of the type: nosuch"));
    let filter_err = |f: &str| {
        post_err(&format!(r#"{{"start":1,"queries":[{{"aggregator":"sum","metric":"m","filters":[{f}]}}]}}"#))
            .details
            .unwrap()
    };
    assert_eq!(filter_err(r#"{"tagk":"host","filter":"x"}"#), "The filter type cannot be null or empty");
    assert_eq!(
        filter_err(r#"{"type":"Literal_or","tagk":"host","filter":"x"}"#),
        "Could not find a tag value filter of the type: Literal_or"
    );
    assert_eq!(filter_err(r#"{"type":"literal_or","filter":"x"}"#), "The tagk cannot be null or empty");
    assert_eq!(filter_err(r#"{"type":"literal_or","tagk":"host"}"#), "Filter cannot be null or empty");
    assert_eq!(filter_err(r#"{"type":"wildcard","tagk":"host","filter":"web"}"#), "Filter must contain an asterisk");
    assert!(post_err(r#"{"start":1,"queries":[{"aggregator":"sum","metric":"m","tags":{"host":"nosuch(x)"}}]}"#)
        .details
        .unwrap()
        .contains("Could not find a tag value filter of the type: nosuch"));
    assert_eq!(
        post_err(r#"{"start":1,"queries":[{"aggregator":"sum","metric":"m","rate":"yes"}]}"#).kind,
        RequestErrorKind::BadRequest
    );
    assert_eq!(post_err(r#"{"start":[1],"queries":[]}"#).message, "Unable to parse the given JSON");
    assert_eq!(post_err(r#"{"start":1,"queries":[null]}"#).message, "Unable to parse the given JSON");
    // Time zones (POST only).
    assert_eq!(
        post_err(r#"{"start":"2013/01/01","timezone":"Nowhere/Land","queries":[{"aggregator":"sum","metric":"m"}]}"#)
            .message,
        "Invalid timezone name: Nowhere/Land"
    );
    assert_eq!(
        post_err(r#"{"start":"1h-ago","timezone":"Nowhere/Land","queries":[{"aggregator":"sum","metric":"m","downsample":"1h-avg"}]}"#)
            .message,
        "The timezone specification could not be found"
    );
    // Without a downsampler or an absolute date the zone is never looked up.
    assert!(parse_post(
        br#"{"start":"1h-ago","timezone":"Nowhere/Land","queries":[{"aggregator":"sum","metric":"m"}]}"#,
        NOW
    )
    .is_ok());
    // Calendar steps OpenTSDB could not take are refused up front.
    assert_eq!(
        post_err(
            r#"{"start":1,"useCalendar":true,"queries":[{"aggregator":"sum","metric":"m","downsample":"5min-avg"}]}"#
        )
        .message,
        "For input string: \"5mi\""
    );
}

// spec: query §1.2 (timezone, useCalendar), §3.1, vector V12
#[test]
fn post_timezone_and_calendar() {
    let q = post(
        r#"{"start":1356937200,"end":1356998460,"timezone":"America/Denver","queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"1dc-sum"}]}"#,
    );
    let ds = q.queries[0].downsampler.as_ref().unwrap();
    assert!(ds.calendar);
    assert_eq!(ds.timezone.as_deref(), Some("America/Denver"));
    assert_eq!(ds.calendar_interval().unwrap(), CalendarInterval { count: 1, unit: CalendarUnit::Day });
    let q = post(
        r#"{"start":"2012/12/31","end":"2013/01/01-00:01","timezone":"America/Denver","useCalendar":true,"queries":[{"aggregator":"sum","metric":"m","downsample":"1h-avg"},{"aggregator":"sum","metric":"m"}]}"#,
    );
    assert_eq!(q.start_ms, 1_356_937_200_000);
    assert_eq!(q.end_ms, 1_357_023_660_000);
    let ds = q.queries[0].downsampler.as_ref().unwrap();
    assert!(ds.calendar, "useCalendar turns calendar mode on for every downsampler");
    assert_eq!(ds.calendar_interval().unwrap(), CalendarInterval { count: 1, unit: CalendarUnit::Hour });
    assert!(q.queries[1].downsampler.is_none());
    assert!(q.use_calendar);
    assert_eq!(q.timezone.as_deref(), Some("America/Denver"));
}

// spec: query §1.1/§1.2 (POST de-duplication)
#[test]
fn post_dedupes() {
    let q = post(
        r#"{"start":1,"queries":[
          {"aggregator":"sum","metric":"m","tags":{"host":"*"}},
          {"aggregator":"sum","metric":"m","filters":[{"type":"wildcard","tagk":"host","filter":"*","groupBy":false}]},
          {"aggregator":"sum","metric":"m","filters":[{"type":"iwildcard","tagk":"host","filter":"*","groupBy":false}]},
          {"aggregator":"sum","metric":"m","tags":{"host":"*"}}]}"#,
    );
    // The legacy `*` is a case-insensitive wildcard: it equals the iwildcard one, not the plain wildcard.
    assert_eq!(q.queries.len(), 2);
    assert_eq!(q.queries[1].filters[0].kind, FilterKind::Wildcard);
    assert!(!q.queries[1].filters[0].case_insensitive);
}

// ---------------------------------------------------------------------------------------------------------------
// Real clients (spec: query §7.1, §7.3; clients.md)

// spec: query §7.1 G1 (browser-side Grafana, ms times, showQuery in 2.3 mode)
#[test]
fn grafana_g1_bodies() {
    let q = post(
        r#"{"start":1356998400000,"queries":[{"metric":"sys.cpu.user","aggregator":"avg","downsample":"30s-avg","filters":[{"type":"literal_or","tagk":"host","filter":"web01|web02","groupBy":true}],"explicitTags":true,"rate":true,"rateOptions":{"counter":true,"counterMax":65535,"resetValue":0,"dropResets":true}},{"metric":"sys.mem","aggregator":"sum","tags":{"host":"web01|web02"}}],"msResolution":true,"globalAnnotations":true,"showQuery":true,"end":1357002000000}"#,
    );
    assert_eq!((q.start_ms, q.end_ms), (1_356_998_400_000, 1_357_002_000_000));
    assert!(q.ms_resolution && q.global_annotations && q.show_query);
    let s = &q.queries[0];
    assert_eq!((s.aggregator.as_str(), s.explicit_tags, s.index), ("avg", true, 0));
    assert_eq!(
        s.rate_options,
        Some(RateOptions { counter: true, counter_max: 65535, reset_value: 0, drop_resets: true })
    );
    assert_eq!(s.filters, vec![filter(FilterKind::LiteralOr, "host", "web01|web02", true)]);
    assert_eq!(q.queries[1].filters, vec![filter(FilterKind::LiteralOr, "host", "web01|web02", true)]);
    assert_eq!(q.queries[1].index, 1);
    // "end" omitted when the range ends now; fractional-second intervals come as ms.
    let q = post(
        r#"{"start":1357041000000,"queries":[{"metric":"m","aggregator":"sum","downsample":"500ms-avg"}],"msResolution":false,"globalAnnotations":true}"#,
    );
    assert_eq!(q.end_ms, NOW);
    assert_eq!(q.queries[0].downsampler.as_ref().unwrap().interval_ms, 500);
}

// spec: query §7.1 G2 (alerting backend: counterMax/resetValue may carry decimals)
#[test]
fn grafana_g2_body() {
    let q = post(
        r#"{"start":1356998400000,"end":1357002000000,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"1m-avg","rate":true,"rateOptions":{"counter":true,"counterMax":65535.5,"resetValue":1.0,"dropResets":false}}]}"#,
    );
    assert_eq!(
        q.queries[0].rate_options,
        Some(RateOptions { counter: true, counter_max: 65535, reset_value: 1, drop_resets: false })
    );
}

// spec: query §7.1 G3, clients.md (backend plugin: alphabetical keys, seconds, `?arrays=true` in 2.4 mode)
#[test]
fn grafana_g3_bodies() {
    // tsdbVersion 1-3.
    let q = post(
        r#"{"end":1356998460,"queries":[{"aggregator":"sum","downsample":"10s-avg","metric":"m","tags":{"host":"*"}}],"start":1356998400}"#,
    );
    assert_eq!((q.start_ms, q.end_ms), (1_356_998_400_000, 1_356_998_460_000));
    assert_eq!(q.queries[0].filters, vec![Filter::from_legacy("host", "*", true).unwrap()]);
    assert!(!q.ms_resolution);
    // tsdbVersion 4: POST /api/query?arrays=true; the daemon carries `arrays` over from the query string.
    let mut q = post(
        r#"{"end":1356998460,"queries":[{"aggregator":"sum","downsample":"10s-max-zero","explicitTags":true,"filters":[{"filter":"web01|web02","groupBy":true,"tagk":"host","type":"literal_or"}],"metric":"m","rate":true,"rateOptions":{"counter":true,"dropResets":true}}],"start":1356998400}"#,
    );
    q.arrays = true;
    let s = &q.queries[0];
    assert!(s.explicit_tags && s.rate);
    assert_eq!(s.downsampler.as_ref().unwrap().fill, FillPolicy::Zero);
    assert_eq!(
        s.rate_options,
        Some(RateOptions { counter: true, counter_max: i64::MAX, reset_value: 0, drop_resets: true })
    );
    assert_eq!(s.filters, vec![filter(FilterKind::LiteralOr, "host", "web01|web02", true)]);
    // Sorted keys put `tags` after `filters`: when a target has both, the tags win.
    let q = post(
        r#"{"end":1356998460,"queries":[{"aggregator":"sum","filters":[{"filter":"web01","groupBy":false,"tagk":"host","type":"literal_or"}],"metric":"m","tags":{"dc":"lga"}}],"start":1356998400}"#,
    );
    assert_eq!(q.queries[0].filters, vec![filter(FilterKind::LiteralOr, "dc", "lga", true)]);
    // Annotation query: no downsample.
    let q = post(r#"{"end":1356998460,"queries":[{"aggregator":"sum","metric":"events"}],"start":1356998400}"#);
    assert!(q.queries[0].downsampler.is_none());
}

// clients.md pyopentsdb: string start, int end, every flag false, timezone UTC
#[test]
fn pyopentsdb_body() {
    let q = post(
        r#"{"start": "1795302119", "msResolution": false, "showTSUIDs": false, "noAnnotations": false, "globalAnnotations": false, "showSummary": false, "showStats": false, "showQuery": false, "delete": false, "timezone": "UTC", "useCalendar": false, "queries": [{"aggregator": "sum", "metric": "harness.pyopentsdb.gauge", "tags": {"host": "*"}, "downsample": "10s-avg"}], "end": 1795302180}"#,
    );
    assert_eq!((q.start_ms, q.end_ms), (1_795_302_119_000, 1_795_302_180_000));
    assert!(!q.delete && !q.ms_resolution && !q.use_calendar);
    assert_eq!(q.timezone.as_deref(), Some("UTC"));
    let ds = q.queries[0].downsampler.as_ref().unwrap();
    assert_eq!((ds.timezone.as_deref(), ds.calendar), (Some("UTC"), false));
}

// clients.md npm `opentsdb`: presence flags with "false" values, ms times, percent-decoded braces
#[test]
fn npm_client_get() {
    let q = get(&[
        ("ms", "true"),
        ("arrays", "true"),
        ("show_tsuids", "false"),
        ("no_annotations", "true"),
        ("global_annotations", "false"),
        ("start", "1795302179000"),
        ("end", "1795302240000"),
        ("m", "avg:1m-avg:harness.npm_opentsdb.gauge{host=harness-npm,run=r1795}"),
    ]);
    assert!(q.ms_resolution && q.arrays && q.show_tsuids && q.no_annotations && q.global_annotations);
    assert_eq!((q.start_ms, q.end_ms), (1_795_302_179_000, 1_795_302_240_000));
    assert_eq!(q.queries[0].group_by_tagks(), vec!["host", "run"]);
}

// ---------------------------------------------------------------------------------------------------------------
// The requests of the spec's vectors (spec: query §8)

#[test]
fn vector_requests() {
    // V1/V2 (every aggregator of §2.3 is accepted).
    for agg in AGGREGATORS {
        let q = post(&format!(
            r#"{{"start":1356998400,"end":1356998460,"queries":[{{"aggregator":"{agg}","metric":"sys.cpu.user"}}]}}"#
        ));
        assert_eq!(q.queries[0].aggregator, *agg);
        assert!(q.queries[0].filters.is_empty());
    }
    // V3: three equivalent forms.
    let a = post(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"*"}}]}"#,
    );
    let b = post(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"wildcard","tagk":"host","filter":"*","groupBy":true}]}]}"#,
    );
    let c = get(&[("start", "1356998400"), ("end", "1356998460"), ("m", "sum:sys.cpu.user{host=*}")]);
    assert_eq!(a.queries, c.queries);
    for q in [&a, &b, &c] {
        assert_eq!(q.queries[0].group_by_tagks(), vec!["host"]);
        assert!(q.queries[0].filters[0].is_match_all());
    }
    // V4: arrays (a query parameter) + msResolution.
    let q = post(
        r#"{"start":1356998410,"end":1356998420,"msResolution":true,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#,
    );
    assert!(q.ms_resolution);
    assert_eq!((q.start_ms, q.end_ms), (1_356_998_410_000, 1_356_998_420_000));
    // V7/V8: downsample and fills.
    for (spec, fill) in [
        ("30s-sum", FillPolicy::None),
        ("10s-sum-nan", FillPolicy::NaN),
        ("10s-sum-null", FillPolicy::Null),
        ("10s-sum-zero", FillPolicy::Zero),
    ] {
        let q = post(&format!(
            r#"{{"start":1356998400,"end":1356998460,"queries":[{{"aggregator":"sum","metric":"sys.cpu.user","downsample":"{spec}"}}]}}"#
        ));
        assert_eq!(q.queries[0].downsampler.as_ref().unwrap().fill, fill);
    }
    // V9: rate and counters, POST and GET forms.
    let q = post(
        r#"{"start":1356998400,"end":1357041600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","rate":true,"rateOptions":{"counter":true,"counterMax":100}}]}"#,
    );
    let g =
        get(&[("start", "1356998400"), ("end", "1357041600"), ("m", "sum:rate{counter,100}:sys.cpu.user{host=web01}")]);
    assert_eq!(q.queries[0].rate_options, g.queries[0].rate_options);
    let q = post(
        r#"{"start":1356998400,"end":1357041600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","rate":true,"rateOptions":{"counter":true,"counterMax":10000,"resetValue":35,"dropResets":true}}]}"#,
    );
    let g =
        get(&[("start", "1356998400"), ("end", "1357041600"), ("m", "sum:rate{dropcounter,10000,35}:sys.cpu.user")]);
    assert_eq!(q.queries[0].rate_options, g.queries[0].rate_options);
    assert_eq!(
        q.queries[0].rate_options,
        Some(RateOptions { counter: true, counter_max: 10000, reset_value: 35, drop_resets: true })
    );
    // V10/V11: downsample then rate; all.
    let q = post(
        r#"{"start":1356998400,"end":1357041600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web01"},"downsample":"1m-avg","rate":true}]}"#,
    );
    assert!(q.queries[0].rate && q.queries[0].downsampler.is_some());
    let q = post(
        r#"{"start":1356998500,"end":1356998600,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web01"},"downsample":"0all-sum"}]}"#,
    );
    assert!(q.queries[0].downsampler.as_ref().unwrap().run_all);
    assert_eq!(q.queries[0].filters[0].literal_values().unwrap(), ["web01"]);
    // V12: fixed 1000s.
    let q = post(
        r#"{"start":1356998000,"end":1357007000,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","downsample":"1000s-avg"}]}"#,
    );
    assert_eq!(q.queries[0].downsampler.as_ref().unwrap().interval_ms, 1_000_000);
    // V14: filter semantics.
    let series = [("S1", Some("web01")), ("S2", Some("web02")), ("S3", None), ("S4", Some("web01"))];
    let selected =
        |f: &Filter| -> Vec<&str> { series.iter().filter(|(_, h)| f.matches_series(*h)).map(|(n, _)| *n).collect() };
    let one = |body: &str| post(body).queries.remove(0).filters.remove(0);
    let f = one(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"not_literal_or","tagk":"host","filter":"web01","groupBy":false}]}]}"#,
    );
    assert_eq!(selected(&f), ["S2"]);
    let f = one(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"regexp","tagk":"host","filter":"eb0"}]}]}"#,
    );
    assert_eq!(selected(&f), ["S1", "S2", "S4"]);
    let f = one(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"wildcard","tagk":"host","filter":"web*"}]}]}"#,
    );
    assert_eq!(selected(&f), ["S1", "S2", "S4"]);
    let f = one(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"iwildcard","tagk":"host","filter":"WEB*"}]}]}"#,
    );
    assert_eq!(selected(&f), ["S1", "S2", "S4"]);
    let f = one(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"wildcard","tagk":"host","filter":"WEB*"}]}]}"#,
    );
    assert!(selected(&f).is_empty());
    let q = post(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","filters":[{"type":"literal_or","tagk":"host","filter":"web01","groupBy":false}],"explicitTags":true}]}"#,
    );
    assert!(q.queries[0].explicit_tags);
    assert!(q.queries[0].group_by_tagks().is_empty());
    let q = post(
        r#"{"start":1356998400,"end":1356998460,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","tags":{"host":"web01|web02"}}]}"#,
    );
    assert_eq!(q.queries[0].group_by_tagks(), vec!["host"]);
    assert_eq!(q.queries[0].filters[0].literal_values().unwrap(), ["web01", "web02"]);
}

// ---------------------------------------------------------------------------------------------------------------
// Echo, envelopes, fixed answers

// spec: query §1.6 (the `query` object as 2.4 emits it)
#[test]
fn query_echo_matches_opentsdb() {
    let q =
        post(r#"{"start":1,"showQuery":true,"queries":[{"aggregator":"last","metric":"cpu","tags":{"host":"*"}}]}"#);
    assert_eq!(
        q.queries[0].to_query_json(&[vec![0, 0, 1]]),
        r#"{"aggregator":"last","metric":"cpu","tsuids":null,"downsample":null,"rate":false,"filters":[{"tagk":"host","filter":"*","group_by":true,"type":"wildcard"}],"percentiles":null,"index":0,"rateOptions":null,"filterTagKs":["AAAB"],"explicitTags":false,"useFuzzyFilter":true,"preAggregate":false,"rollupUsage":null,"rollupTable":"raw","showHistogramBuckets":false,"useMultiGets":true,"tags":{"host":"wildcard(*)"},"histogramQuery":false}"#
    );
    let q = get(&[
        ("start", "1h-ago"),
        ("m", "sum:m"),
        ("m", "sum:rate{counter,,1}:1m-sum:percentiles[99,50]:m{host=web01,dc=*}{rack=r1}"),
    ]);
    let echo = q.queries[1].to_query_json(&[vec![0, 0, 2], vec![0, 0, 1], vec![0, 0, 2]]);
    let v: serde_json::Value = serde_json::from_str(&echo).unwrap();
    assert_eq!(v["index"], 1);
    assert_eq!(v["downsample"], "1m-sum");
    assert_eq!(v["rate"], true);
    assert_eq!(v["percentiles"], serde_json::json!([50.0, 99.0]));
    assert_eq!(v["histogramQuery"], true);
    assert_eq!(v["filterTagKs"], serde_json::json!(["AAAB", "AAAC"]));
    assert_eq!(
        v["rateOptions"],
        serde_json::json!({"counter":true,"counterMax":i64::MAX,"resetValue":1,"dropResets":false})
    );
    assert_eq!(v["tags"], serde_json::json!({"host":"literal_or(web01)","dc":"wildcard(*)"}));
    assert!(echo.contains(r#""tags":{"host":"literal_or(web01)","dc":"wildcard(*)"}"#), "{echo}");
    assert_eq!(v["filters"][0]["tagk"], "rack");
    assert_eq!(v["filters"][0]["group_by"], false);
    // No filters: `filterTagKs` is null.
    assert!(q.queries[0].to_query_json(&[]).contains(r#""filterTagKs":null"#));
    // TSUID sub-queries echo their list.
    let q = get(&[("start", "1h-ago"), ("tsuid", "sum:000001000002000042")]);
    assert!(q.queries[0].to_query_json(&[]).contains(r#""metric":null,"tsuids":["000001000002000042"]"#));
}

// spec: query §0.4, §1.4
#[test]
fn errors_carry_kind_message_and_details() {
    let e = post_err(r#"{"start":1356998400,"queries":[{"aggregator":"foo","metric":"m"}]}"#);
    assert_eq!(
        (e.kind, e.message.as_str(), e.details.as_deref()),
        (
            RequestErrorKind::BadRequest,
            "No such aggregation function: foo",
            Some("TSQuery(start_time=1356998400, end_time=null, subQueries[TSSubQuery(metric=m, filters=[], tsuids=[], agg=foo, downsample=null, ds_interval=0, rate=false, rate_options=null, explicit_tags=explicit_tags, index=0, percentiles=null, show_histogram_buckets=false)] padding=false, no_annotations=false, with_global_annotations=false, show_tsuids=false, ms_resolution=false, options=[])")
        )
    );
    let e = get_err(&[("start", "1h-ago"), ("m", "sum:m{host=nosuch(x)}")]);
    assert_eq!(
        (e.kind, e.message.as_str(), e.details.as_deref()),
        (
            RequestErrorKind::Internal,
            "When parsing tag 'host=nosuch(x)': Could not find a tag value filter of the type: nosuch",
            None
        )
    );
    assert_eq!(format!("{e}"), e.message);
}

// spec: query §2.1
#[test]
fn aggregators_list() {
    assert_eq!(
        aggregators_json(),
        r#"["mult","p90","zimsum","mimmax","sum","p50","none","p95","ep99r7","pfsum","p75","p99","ep99r3","ep95r7","min","avg","ep75r7","dev","ep95r3","ep75r3","ep50r7","ep90r7","mimmin","p999","ep50r3","ep90r3","ep999r7","last","max","count","diff","median","squareSum","ep999r3","first"]"#
    );
    assert_eq!(AGGREGATORS.len(), 35);
    assert!(is_aggregator("squareSum") && !is_aggregator("Sum") && !is_aggregator("multiply"));
    // The order is Java's HashMap order over the registered names.
    let order = crate::javafmt::hashmap_order(AGGREGATORS);
    assert_eq!(order, (0..AGGREGATORS.len()).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------------------------
// Property tests

/// `rate` of a generated sub-query: none, plain, or `(dropResets, counterMax, resetValue)` options.
type GenRate = Option<Option<(bool, Option<i64>, Option<i64>)>>;

/// A sub-query description that both request forms can express.
#[derive(Debug, Clone)]
struct GenSub {
    aggregator: &'static str,
    metric: String,
    downsample: Option<&'static str>,
    rate: GenRate,
    explicit_tags: bool,
    /// (tagk, type, filter text, group_by); keys are distinct.
    filters: Vec<(String, FilterKind, String, bool)>,
}

fn gen_filter_text(kind: FilterKind) -> BoxedStrategy<String> {
    match kind {
        FilterKind::Wildcard | FilterKind::IWildcard => {
            prop_oneof![Just("*".to_string()), "[a-z]{1,4}\\*", "\\*[a-z]{1,4}", "[a-z]{1,3}\\*[a-z]{1,3}"].boxed()
        }
        FilterKind::Regexp => prop_oneof![Just("web.*".to_string()), "\\^[a-z]{1,4}", "[a-z]{1,4}\\$"].boxed(),
        _ => "[a-zA-Z0-9._-]{1,6}(\\|[a-zA-Z0-9._-]{1,6}){0,2}".boxed(),
    }
}

fn gen_sub() -> impl Strategy<Value = GenSub> {
    let kinds = prop::sample::select(FilterKind::ALL.to_vec());
    let one_filter = (kinds, any::<bool>()).prop_flat_map(|(k, gb)| gen_filter_text(k).prop_map(move |t| (k, t, gb)));
    (
        prop::sample::select(AGGREGATORS.iter().copied().filter(|a| *a != "none").collect::<Vec<_>>()),
        "[a-z][a-z0-9._-]{0,10}",
        prop::option::of(prop::sample::select(vec![
            "1m-avg",
            "10s-sum-nan",
            "1h-max-zero",
            "0all-count",
            "1dc-sum",
            "500ms-p99-null",
        ])),
        prop::option::of(prop::option::of((
            any::<bool>(),
            prop::option::of(0i64..1_000_000),
            prop::option::of(0i64..100),
        ))),
        any::<bool>(),
        prop::collection::vec(one_filter, 0..4),
    )
        .prop_map(|(aggregator, metric, downsample, rate, explicit_tags, fs)| GenSub {
            aggregator,
            metric,
            downsample,
            rate,
            explicit_tags,
            filters: fs.into_iter().enumerate().map(|(i, (k, t, gb))| (format!("k{i}"), k, t, gb)).collect(),
        })
}

impl GenSub {
    fn rate_part(&self) -> Option<String> {
        match self.rate {
            None => None,
            Some(None) => Some("rate".into()),
            Some(Some((drop, max, reset))) => Some(format!(
                "rate{{{},{},{}}}",
                if drop { "dropcounter" } else { "counter" },
                max.map(|m| m.to_string()).unwrap_or_default(),
                reset.map(|r| r.to_string()).unwrap_or_default()
            )),
        }
    }

    fn to_m(&self) -> String {
        let mut parts = vec![self.aggregator.to_string()];
        parts.extend(self.rate_part());
        parts.extend(self.downsample.map(str::to_string));
        if self.explicit_tags {
            parts.push("explicit_tags".into());
        }
        let brace = |gb: bool| -> String {
            self.filters
                .iter()
                .filter(|f| f.3 == gb)
                .map(|(k, kind, t, _)| format!("{k}={}({t})", kind.name()))
                .collect::<Vec<_>>()
                .join(",")
        };
        let (g, n) = (brace(true), brace(false));
        let mut metric = self.metric.clone();
        if !n.is_empty() {
            metric.push_str(&format!("{{{g}}}{{{n}}}"));
        } else if !g.is_empty() {
            metric.push_str(&format!("{{{g}}}"));
        }
        parts.push(metric);
        parts.join(":")
    }

    fn to_json(&self) -> String {
        let mut o = format!(r#"{{"aggregator":"{}","metric":"{}""#, self.aggregator, self.metric);
        if let Some(d) = self.downsample {
            o.push_str(&format!(r#","downsample":"{d}""#));
        }
        if let Some(r) = self.rate {
            o.push_str(r#","rate":true"#);
            if let Some((drop, max, reset)) = r {
                o.push_str(&format!(r#","rateOptions":{{"counter":true,"dropResets":{drop}"#));
                if let Some(m) = max {
                    o.push_str(&format!(r#","counterMax":{m}"#));
                }
                if let Some(r) = reset {
                    o.push_str(&format!(r#","resetValue":{r}"#));
                }
                o.push('}');
            }
        }
        if self.explicit_tags {
            o.push_str(r#","explicitTags":true"#);
        }
        // GET parses the non-group-by braces first.
        let ordered: Vec<_> = self.filters.iter().filter(|f| !f.3).chain(self.filters.iter().filter(|f| f.3)).collect();
        if !ordered.is_empty() {
            let fs: Vec<String> = ordered
                .iter()
                .map(|(k, kind, t, gb)| {
                    format!(
                        r#"{{"type":"{}","tagk":"{k}","filter":{},"groupBy":{gb}}}"#,
                        kind.name(),
                        crate::http_json::json_string(t)
                    )
                })
                .collect();
            o.push_str(&format!(r#","filters":[{}]"#, fs.join(",")));
        }
        o.push('}');
        o
    }
}

fn gen_flags() -> impl Strategy<Value = Vec<bool>> {
    prop::collection::vec(any::<bool>(), 8)
}

const FLAGS: [(&str, &str); 8] = [
    ("ms", "msResolution"),
    ("show_tsuids", "showTSUIDs"),
    ("no_annotations", "noAnnotations"),
    ("global_annotations", "globalAnnotations"),
    ("show_query", "showQuery"),
    ("show_stats", "showStats"),
    ("show_summary", "showSummary"),
    ("padding", "padding"),
];

/// Strings built from the characters that matter to the GET grammar.
fn grammar_noise() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec![
                ":",
                "{",
                "}",
                "=",
                ",",
                "|",
                "*",
                "(",
                ")",
                "[",
                "]",
                "-",
                ".",
                "rate",
                "counter",
                "dropcounter",
                "sum",
                "avg",
                "1m",
                "all",
                "c",
                "ms",
                "h",
                "ago",
                "regexp",
                "wildcard",
                "literal_or",
                "percentiles",
                "explicit_tags",
                "/",
                " ",
                "é",
                "😀",
                "0",
                "9",
                "host",
                "web",
            ])
            .prop_map(str::to_string),
            "\\PC{0,3}",
        ],
        0..14,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // The GET and POST forms of the same query parse to equal queries.
    #[test]
    fn get_and_post_agree(subs in prop::collection::vec(gen_sub(), 1..4), dup in any::<bool>(),
                          start in 1_000_000_000i64..1_700_000_000, span in 1i64..100_000, flags in gen_flags()) {
        let mut subs = subs;
        if dup {
            subs.push(subs[0].clone());
        }
        let end = start + span;
        let mut p = vec![("start".to_string(), start.to_string()), ("end".to_string(), end.to_string())];
        for ((param, _), on) in FLAGS.iter().zip(&flags) {
            if *on {
                p.push((param.to_string(), "false".to_string()));
            }
        }
        for s in &subs {
            p.push(("m".to_string(), s.to_m()));
        }
        let mut body = format!(r#"{{"start":{start},"end":"{end}""#);
        for ((_, key), on) in FLAGS.iter().zip(&flags) {
            body.push_str(&format!(r#","{key}":{on}"#));
        }
        body.push_str(r#","queries":["#);
        body.push_str(&subs.iter().map(GenSub::to_json).collect::<Vec<_>>().join(","));
        body.push_str("]}");
        let g = parse_get(&p, NOW);
        let b = parse_post(body.as_bytes(), NOW);
        match (g, b) {
            (Ok(g), Ok(b)) => {
                prop_assert_eq!(&g, &b);
                prop_assert!(g.queries.len() <= subs.len() - usize::from(dup));
            }
            (g, b) => prop_assert!(false, "GET {:?}\nPOST {:?}\n{:?}\n{}", g, b, p, body),
        }
    }

    #[test]
    fn parse_get_never_panics(pairs in prop::collection::vec((
        prop::sample::select(vec!["start", "end", "m", "tsuid", "ms", "arrays", "timezone", "x"]),
        grammar_noise()), 0..6)) {
        let p: Vec<(String, String)> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let _ = parse_get(&p, NOW);
        let mut with_start = p.clone();
        with_start.push(("start".into(), "1h-ago".into()));
        let _ = parse_get(&with_start, NOW);
        let _ = parse_last_get(&p);
    }

    #[test]
    fn m_grammar_never_panics(m in grammar_noise(), start in grammar_noise()) {
        let _ = parse_get(&params(&[("start", "1h-ago"), ("m", &m)]), NOW);
        let _ = parse_get(&params(&[("start", &start), ("m", "sum:m")]), NOW);
        let _ = parse_get(&params(&[("start", "1h-ago"), ("tsuid", &m)]), NOW);
        let _ = parse_time(&start, NOW, Some("America/Denver"));
        let _ = DownsampleSpec::parse(&m);
        let _ = parse_rate_spec(&m);
        let _ = Filter::from_legacy("k", &m, true);
    }

    #[test]
    fn parse_post_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_post(&bytes, NOW);
        let _ = parse_last_post(&bytes);
    }

    #[test]
    fn parse_post_never_panics_on_near_json(sub in gen_sub(), cut in 0usize..400, noise in grammar_noise(),
                                            key in prop::sample::select(vec!["start", "end", "timezone", "queries", "tags", "filters", "rateOptions", "percentiles", "downsample", "aggregator"])) {
        let body = format!(r#"{{"start":1356998400,"queries":[{}]}}"#, sub.to_json());
        let cut = cut.min(body.len());
        let _ = parse_post(&body.as_bytes()[..cut], NOW);
        let mutated = body.replacen(&format!(r#""{key}":"#), &format!(r#""{key}":{},"x":"#, crate::http_json::json_string(&noise)), 1);
        let _ = parse_post(mutated.as_bytes(), NOW);
        let _ = parse_post(format!(r#"{{"start":"{}","timezone":"America/Denver","queries":[{{"aggregator":"sum","metric":"m","downsample":{}}}]}}"#,
            noise.replace(['"', '\\'], ""), crate::http_json::json_string(&noise)).as_bytes(), NOW);
    }
}

#[test]
fn tsquery_shows_as_jackson_writes_it() {
    // spec: query §6.14 (/api/stats/query shows each query as its TSQuery)
    let q = post(r#"{"start":"1h-ago","msResolution":true,"queries":[{"aggregator":"sum","metric":"cpu"}]}"#);
    let json = tsquery_json(&q);
    let sub = q.queries[0].to_query_json(&[]);
    assert_eq!(
        json,
        format!(
            r#"{{"start":"1h-ago","end":null,"timezone":null,"options":null,"padding":false,"queries":[{sub}],"delete":false,"noAnnotations":false,"globalAnnotations":false,"showTSUIDs":false,"msResolution":true,"showQuery":false,"showStats":false,"showSummary":false,"useCalendar":false}}"#
        )
    );
}

#[test]
fn graph_queries_read_absolute_times_in_tz() {
    // spec: query §6.17 (`tz` for absolute dates on /q), §1.1 (GET /api/query ignores it)
    let p = params(&[
        ("start", "2013/01/01-00:00:00"),
        ("end", "2013/01/01-01:00:00"),
        ("m", "sum:m"),
        ("tz", "Asia/Tokyo"),
    ]);
    assert_eq!(parse_get(&p, NOW).unwrap().start_ms, 1_356_998_400_000);
    let q = parse_graph_get(&p, NOW).unwrap();
    assert_eq!((q.start_ms, q.end_ms), (1_356_998_400_000 - 9 * 3_600_000, 1_356_998_400_000 - 8 * 3_600_000));
    // An unknown zone is UTC (Java's TimeZone.getTimeZone); relative times don't care.
    let p = params(&[("start", "2013/01/01-00:00:00"), ("m", "sum:m"), ("tz", "Nowhere/Else")]);
    assert_eq!(parse_graph_get(&p, NOW).unwrap().start_ms, 1_356_998_400_000);
    let p = params(&[("start", "1h-ago"), ("m", "sum:m"), ("tz", "Asia/Tokyo")]);
    assert_eq!(parse_graph_get(&p, NOW).unwrap().start_ms, NOW - 3_600_000);
}

// spec: query §6.1, §6.8 (`Tags.parseWithMetric`)
#[test]
fn parse_with_metric_as_opentsdb() {
    assert_eq!(parse_with_metric("sys.cpu.0").unwrap(), ("sys.cpu.0".to_string(), vec![]));
    assert_eq!(parse_with_metric("m{}").unwrap(), ("m".to_string(), vec![]));
    assert_eq!(
        parse_with_metric("m{host=a,dc=b,host=a}").unwrap(),
        ("m".to_string(), vec![("host".into(), "a".into()), ("dc".into(), "b".into())])
    );
    assert_eq!(
        parse_with_metric("sys.cpu.0{datacenter=dc").unwrap_err(),
        "Missing '}' at the end of: sys.cpu.0{datacenter=dc"
    );
    assert_eq!(parse_with_metric("m{host}").unwrap_err(), "When parsing tag 'host': invalid tag: host");
    assert_eq!(
        parse_with_metric("m{host=a,host=b}").unwrap_err(),
        "When parsing tag 'host=b': duplicate tag: host=b, tags={host=a}"
    );
}
