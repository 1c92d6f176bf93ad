//! Discovery endpoints answered from rtsd's in-memory indexes (spec: query §6.4, §7.2, V16).
use rtsd_compat_tests::{barrier, Daemon};
use std::io::Write;

fn write_lines(d: &Daemon, lines: &str) {
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new(), "no put errors");
}

#[test]
fn suggest_lists_names_by_prefix_in_byte_order() {
    // spec: query §8 V16 and §6.4
    let d = Daemon::start();
    write_lines(
        &d,
        "put sys.cpu.user 1356998400 1 host=web01\nput sys.cpu.system 1356998400 1 host=web02\n\
         put sys.mem 1356998400 1 host=web01\nput web.hits 1356998400 1 host=web01 dc=lga\n",
    );
    let r = d.http("GET", "/api/suggest?type=metrics&q=sys", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (
            200,
            r#"["sys.cpu.system","sys.cpu.user","sys.mem"]"#.to_string()
        )
    );
    let r = d.http("GET", "/api/suggest?type=metrics&q=sys&max=2", &[], b"");
    assert_eq!(r.text(), r#"["sys.cpu.system","sys.cpu.user"]"#);
    // max <= 0 means the default of 25; an empty q lists from the beginning (npm client: max=1000000000&q=).
    let r = d.http(
        "GET",
        "/api/suggest?type=metrics&max=1000000000&q=",
        &[],
        b"",
    );
    assert_eq!(
        r.text(),
        r#"["sys.cpu.system","sys.cpu.user","sys.mem","web.hits"]"#
    );
    let r = d.http("GET", "/api/suggest?type=tagk&max=0", &[], b"");
    assert_eq!(r.text(), r#"["dc","host"]"#);
    let r = d.http("GET", "/api/suggest/?type=tagv&q=web0", &[], b"");
    assert_eq!(r.text(), r#"["web01","web02"]"#);
    // Grafana's "Save & test" and the deprecated non-api route.
    let r = d.http("GET", "/api/suggest?q=cpu&type=metrics", &[], b"");
    assert_eq!((r.status, r.text()), (200, "[]".to_string()));
    let r = d.http("GET", "/suggest?type=metrics&q=web", &[], b"");
    assert_eq!(r.text(), r#"["web.hits"]"#);
    // POST form with numbers accepted for max (pyopentsdb).
    let r = d.post(
        "/api/suggest/",
        r#"{"type": "metrics", "q": "sys.c", "max": 10}"#,
    );
    assert_eq!(
        (r.status, r.text()),
        (200, r#"["sys.cpu.system","sys.cpu.user"]"#.to_string())
    );
}

#[test]
fn suggest_errors_are_opentsdbs() {
    // spec: query §6.4
    let d = Daemon::start();
    let cases: &[(&str, &str, &str)] = &[
        (
            "GET",
            "/api/suggest?type=foo",
            r#"{"error":{"code":400,"message":"Invalid 'type' parameter:foo"}}"#,
        ),
        (
            "GET",
            "/api/suggest?q=x",
            r#"{"error":{"code":400,"message":"Missing parameter <code>type</code>"}}"#,
        ),
        (
            "GET",
            "/api/suggest?type=tagk&max=ten",
            r#"{"error":{"code":400,"message":"Unable to parse 'max' as a number"}}"#,
        ),
        (
            "POST",
            "/api/suggest",
            r#"{"error":{"code":400,"message":"Missing 'type' parameter"}}"#,
        ),
    ];
    for (method, path, want) in cases {
        let body: &[u8] = if *method == "POST" {
            b"{\"q\":\"x\"}"
        } else {
            b""
        };
        let r = d.http(method, path, &[], body);
        assert_eq!(
            (r.status, r.text()),
            (400, want.to_string()),
            "{method} {path}"
        );
    }
    let r = d.http("PUT", "/api/suggest?type=metrics", &[], b"");
    assert_eq!(r.status, 405);
}

#[test]
fn new_names_are_suggested_at_once_and_after_a_restart() {
    let d = Daemon::start();
    write_lines(&d, "put a.b 1356998400 1 host=x\n");
    assert_eq!(
        d.http("GET", "/api/suggest?type=metrics", &[], b"").text(),
        r#"["a.b"]"#
    );
    let d = d.restart();
    write_lines(&d, "put a.c 1356998400 1 host=x\n");
    assert_eq!(
        d.http("GET", "/api/suggest?type=metrics&q=a.", &[], b"")
            .text(),
        r#"["a.b","a.c"]"#
    );
}
