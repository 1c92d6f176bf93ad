//! Annotations: stored in the data rows, served by /api/annotation(s) and returned by /api/query
//! (spec: query §6.9, §1.6; ingest §4.8).
use rtsd_compat_tests::{barrier, Daemon};
use std::io::Write;

fn write_lines(d: &Daemon, lines: &str) {
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new(), "no put errors");
}

#[test]
fn a_series_annotation_is_stored_read_updated_and_deleted() {
    let d = Daemon::start();
    write_lines(&d, "put sys.cpu.user 1369141200 1 host=web01\n");
    let body = r#"{"startTime":1369141261,"tsuid":"000001000001000001","description":"Testing Annotations","notes":"details","custom":{"owner":"jdoe"}}"#;
    let r = d.post("/api/annotation", body);
    let stored = r#"{"tsuid":"000001000001000001","description":"Testing Annotations","notes":"details","custom":{"owner":"jdoe"},"endTime":0,"startTime":1369141261}"#;
    assert_eq!((r.status, r.text()), (200, stored.to_string()));
    // The same again changes nothing: 304 with no body.
    let r = d.post("/api/annotation", body);
    assert_eq!((r.status, r.text()), (304, String::new()));
    let r = d.http("GET", "/api/annotation?start_time=1369141261&tsuid=000001000001000001", &[], b"");
    assert_eq!((r.status, r.text()), (200, stored.to_string()));
    // POST merges: only the description changes.
    let r = d.post("/api/annotation", r#"{"startTime":1369141261,"tsuid":"000001000001000001","description":"New"}"#);
    assert_eq!(r.json()["notes"], "details");
    assert_eq!(r.json()["description"], "New");
    // PUT replaces the whole object.
    let r = d.http(
        "PUT",
        "/api/annotation",
        &[],
        br#"{"startTime":1369141261,"tsuid":"000001000001000001","description":"Only"}"#,
    );
    assert_eq!(r.text(), r#"{"tsuid":"000001000001000001","description":"Only","endTime":0,"startTime":1369141261}"#);
    // The query returns it with the series' points.
    let q = d.post(
        "/api/query",
        r#"{"start":1369141200,"end":1369141300,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#,
    );
    assert_eq!(
        q.text(),
        r#"[{"metric":"sys.cpu.user","tags":{"host":"web01"},"aggregateTags":[],"annotations":[{"tsuid":"000001000001000001","description":"Only","endTime":0,"startTime":1369141261}],"dps":{"1369141200":1}}]"#
    );
    let q = d.http("GET", "/api/query?start=1369141200&end=1369141300&m=sum:sys.cpu.user&no_annotations", &[], b"");
    assert!(!q.text().contains("annotations"), "{}", q.text());
    // Outside the query range the annotation is filtered out but the (empty) list stays, as in 2.4.
    let q = d.http("GET", "/api/query?start=1369141200&end=1369141220&m=sum:sys.cpu.user", &[], b"");
    assert!(q.text().contains(r#""annotations":[]"#), "{}", q.text());
    // Delete, then it is gone.
    let r = d.http("DELETE", "/api/annotation?start_time=1369141261&tsuid=000001000001000001", &[], b"");
    assert_eq!(r.status, 204);
    let r = d.http("GET", "/api/annotation?start_time=1369141261&tsuid=000001000001000001", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (404, r#"{"error":{"code":404,"message":"Unable to locate annotation in storage"}}"#.to_string())
    );
}

#[test]
fn global_annotations_are_listed_by_range_and_in_queries() {
    let d = Daemon::start();
    write_lines(&d, "put sys.cpu.user 1369141200 1 host=web01\n");
    for (t, text) in [(1369141261, "deploy"), (1369144900, "rollback")] {
        let r = d.post("/api/annotation", &format!(r#"{{"startTime":{t},"description":"{text}"}}"#));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = d.http("GET", "/api/annotations?start_time=1369141200&end_time=1369148000", &[], b"");
    assert_eq!(
        r.text(),
        r#"[{"description":"deploy","endTime":0,"startTime":1369141261},{"description":"rollback","endTime":0,"startTime":1369144900}]"#
    );
    let r = d.http("GET", "/api/annotations?start_time=1369144000&end_time=1369148000", &[], b"");
    assert_eq!(r.json().as_array().unwrap().len(), 1);
    // Grafana <= 7 asks for globalAnnotations in its query body.
    let q = d.post(
        "/api/query",
        r#"{"start":1369141200000,"end":1369141300000,"globalAnnotations":true,"msResolution":false,"queries":[{"aggregator":"sum","metric":"sys.cpu.user"}]}"#,
    );
    assert_eq!(
        q.json()[0]["globalAnnotations"],
        serde_json::json!([{"description":"deploy","endTime":0,"startTime":1369141261}])
    );
    // Survives a restart.
    let d = d.restart();
    let r = d.http("GET", "/api/annotation?start_time=1369141261", &[], b"");
    assert_eq!(r.text(), r#"{"description":"deploy","endTime":0,"startTime":1369141261}"#);
}

#[test]
fn annotation_errors() {
    // spec: query §6.9
    let d = Daemon::start();
    let r = d.http("GET", "/api/annotation", &[], b"");
    assert_eq!((r.status, r.text()), (400, r#"{"error":{"code":400,"message":"Missing start time"}}"#.to_string()));
    let r = d.post("/api/annotation", r#"{"description":"no time"}"#);
    assert_eq!(r.text(), r#"{"error":{"code":400,"message":"Missing start time"}}"#);
    let r = d.post("/api/annotation", "not json");
    assert_eq!(r.json()["error"]["message"], "Unable to parse the given JSON");
    let r = d.http("GET", "/api/annotations", &[], b"");
    assert_eq!(r.status, 400);
}
