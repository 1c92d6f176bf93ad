//! Queries with literal tag filters read only their series' rows through the series index; the answers must be
//! exactly those of a full scan of the metric (spec: query §1.5, §9).
use rtsd_compat_tests::{barrier, Daemon};
use std::io::Write;

#[test]
fn postings_and_scans_give_the_same_answers() {
    let d = Daemon::start();
    let mut lines = String::new();
    // 30 hosts over three hours, two dcs, with a float and an int metric sharing tags.
    for h in 0..30 {
        for i in 0..20 {
            let t = 1356998400 + i * 500;
            lines.push_str(&format!("put q.int {t} {} host=h{h:02} dc=dc{}\n", h * 100 + i, h % 2));
            lines.push_str(&format!("put q.float {t} {}.5 host=h{h:02} dc=dc{}\n", h + i, h % 2));
        }
    }
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new());
    let cases = [
        // (literal filter form: postings, equivalent regexp form: full scan)
        ("host=literal_or(h03|h07|h11)", "host=regexp(^h(03|07|11)$)"),
        ("host=h05", "host=regexp(^h05$)"),
        ("dc=literal_or(dc1),host=literal_or(h01|h02|h03)", "dc=regexp(^dc1$),host=regexp(^h0[123]$)"),
    ];
    for metric in ["q.int", "q.float"] {
        for agg in ["sum", "avg:1h-max", "none", "max:rate"] {
            for (literal, regexp) in cases {
                for braces in [format!("{{{literal}}}"), format!("{{}}{{{literal}}}")] {
                    let scan_braces = braces.replace(literal, regexp);
                    let q = |b: &str| {
                        let path = format!("/api/query?start=1356998400&end=1357008400&m={agg}:{metric}{b}");
                        let r =
                            d.http("GET", &path.replace('{', "%7B").replace('}', "%7D").replace('|', "%7C"), &[], b"");
                        assert_eq!(r.status, 200, "{path}: {}", r.text());
                        r.text()
                    };
                    let via_index = q(&braces);
                    assert!(via_index.len() > 10 && via_index.contains("\"dps\":{\""), "{via_index}");
                    assert_eq!(via_index, q(&scan_braces), "{agg}:{metric}{braces}");
                }
            }
        }
    }
}

#[test]
fn query_limits_answer_413() {
    // spec: query §1.4 (413 texts), §9 item 2
    let d = Daemon::start_with(&[
        ("tsd.query.limits.data_points.default", "10"),
        ("tsd.query.limits.data_points.allow_override", "true"),
    ]);
    let mut lines = String::new();
    for i in 0..20 {
        lines.push_str(&format!("put lim {} {i} host=a\n", 1356998400 + i));
    }
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    barrier(&mut t);
    let r = d.http("GET", "/api/query?start=1356998400&end=1356998500&m=sum:lim", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (413, r#"{"error":{"code":413,"message":"Sorry, you have attempted to fetch more than our limit of 10 data points. Please try filtering using more tags or decrease your time range."}}"#.to_string())
    );
    // overrideDataPointLimit lifts it when tsd.query.limits.data_points.allow_override is on.
    let r = d.post(
        "/api/query",
        r#"{"start":1356998400,"end":1356998500,"overrideDataPointLimit":true,"queries":[{"aggregator":"sum","metric":"lim"}]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());

    let d = Daemon::start_with(&[("tsd.query.limits.data_points.default", "10")]);
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    barrier(&mut t);
    let r = d.post(
        "/api/query",
        r#"{"start":1356998400,"end":1356998500,"overrideDataPointLimit":true,"queries":[{"aggregator":"sum","metric":"lim"}]}"#,
    );
    assert_eq!(r.status, 413, "no override without allow_override");

    // The byte limit counts stored row bytes; its message names the limit in whole MB as 2.4 does. The values
    // are scattered so that a closed hour's packed form (delta-of-delta, decimal streams) still takes well over
    // the limit: a regular series would pack its hour into a few dozen bytes.
    let d = Daemon::start_with(&[("tsd.query.limits.bytes.default", "2000")]);
    let mut lines = String::new();
    for i in 0..3600u64 {
        let scattered = (i.wrapping_mul(2_654_435_761) % 1_000_003) as f64 / 7.0;
        lines.push_str(&format!("put big {} {scattered} host=a\n", 1356998400 + i));
    }
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new());
    let r = d.http("GET", "/api/query?start=1356998400&end=1357002000&m=sum:big", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (413, r#"{"error":{"code":413,"message":"Sorry, you have attempted to fetch more than our maximum amount of 0 MB from storage. Please try filtering using more tags or decrease your time range."}}"#.to_string())
    );
    let r = d.http("GET", "/api/query?start=1356998400&end=1356998410&m=sum:big", &[], b"");
    assert_eq!(r.status, 413, "the whole hour row is read even for a short range");
}
