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
    // Deleting it again (or any note that is not there) is still a 204: 2.4 deletes unconditionally.
    let r = d.http("DELETE", "/api/annotation?start_time=1369141261&tsuid=000001000001000001", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (204, ""));
    // The plural route is the same AnnotationRpc: POST creates one, DELETE deletes it.
    let r = d.post("/api/annotations", r#"{"startTime":1369141300,"description":"plural"}"#);
    assert_eq!((r.status, r.text().as_str()), (200, r#"{"description":"plural","endTime":0,"startTime":1369141300}"#));
    let r = d.http("DELETE", "/api/annotations?start_time=1369141300", &[], b"");
    assert_eq!(r.status, 204);
    let r = d.http("GET", "/api/annotation?start_time=1369141300", &[], b"");
    assert_eq!(r.status, 404, "{}", r.text());
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

/// Two series (TSUIDs ...0001 and ...0002) with notes at 1388450562 (both) and 1388450563 (the first), and
/// global notes at 1328140799 and 1328140800: the fixture of OpenTSDB's TestAnnotationRpc bulk tests.
fn bulk_fixture() -> Daemon {
    let d = Daemon::start();
    write_lines(&d, "put sys.cpu.user 1388450560 1 host=web01\nput sys.cpu.user 1388450560 2 host=web02\n");
    let r = d.post(
        "/api/annotation/bulk",
        r#"[{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo","notes":"My Notes"},
            {"tsuid":"000001000001000002","startTime":1388450562,"description":"Gum"},
            {"tsuid":"000001000001000001","startTime":1388450563,"description":"Later"},
            {"startTime":1328140799,"description":"Global one"},
            {"startTime":1328140800,"description":"Global two"}]"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    d
}

#[test]
fn bulk_post_and_put_store_lists_and_answer_with_what_changed() {
    // spec: query §6.9 (TestAnnotationRpc bulkModifyPOST / bulkModifyPut / bulkModifyGlobalPOST)
    let d = Daemon::start();
    write_lines(&d, "put sys.cpu.user 1388450560 1 host=web01\nput sys.cpu.user 1388450560 2 host=web02\n");
    let body = r#"[{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo","notes":"My Notes"},{"tsuid":"000001000001000002","startTime":1388450562,"description":"Gum"},{"startTime":1328140800,"description":"Global"}]"#;
    let r = d.post("/api/annotation/bulk", body);
    assert_eq!(
        (r.status, r.text()),
        (
            200,
            r#"[{"tsuid":"000001000001000001","description":"Boo","notes":"My Notes","endTime":0,"startTime":1388450562},{"tsuid":"000001000001000002","description":"Gum","endTime":0,"startTime":1388450562},{"description":"Global","endTime":0,"startTime":1328140800}]"#
                .to_string()
        )
    );
    assert_eq!(r.header("content-type"), Some("application/json; charset=UTF-8"));
    // Each is stored where /api/annotation finds it.
    let r = d.http("GET", "/api/annotation?start_time=1388450562&tsuid=000001000001000002", &[], b"");
    assert_eq!(r.text(), r#"{"tsuid":"000001000001000002","description":"Gum","endTime":0,"startTime":1388450562}"#);
    let r = d.http("GET", "/api/annotation?start_time=1328140800", &[], b"");
    assert_eq!(r.text(), r#"{"description":"Global","endTime":0,"startTime":1328140800}"#);
    // The same list again changes nothing: nothing is listed (one annotation would answer 304).
    let r = d.post("/api/annotation/bulk", body);
    assert_eq!((r.status, r.text()), (200, "[]".to_string()));
    // POST merges into what is stored: the notes stay.
    let r = d.post(
        "/api/annotation/bulk",
        r#"[{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo2"}]"#,
    );
    assert_eq!(
        r.text(),
        r#"[{"tsuid":"000001000001000001","description":"Boo2","notes":"My Notes","endTime":0,"startTime":1388450562}]"#
    );
    // PUT replaces: the notes go. A later element of one request sees the earlier one.
    let r = d.http(
        "PUT",
        "/api/annotation/bulk",
        &[],
        br#"[{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo3"},{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo3","endTime":1388450600}]"#,
    );
    assert_eq!(
        r.text(),
        r#"[{"tsuid":"000001000001000001","description":"Boo3","endTime":1388450600,"startTime":1388450562}]"#
    );
    // The series' query returns the bulk-written note.
    let q = d.http("GET", "/api/query?start=1388450000&end=1388451000&m=sum:sys.cpu.user{host=web01}", &[], b"");
    assert_eq!(
        q.json()[0]["annotations"],
        serde_json::json!([{"tsuid":"000001000001000001","description":"Boo3","endTime":1388450600,"startTime":1388450562}])
    );
    // /api/annotations/bulk is the same handler, as in 2.4.
    let r = d.post("/api/annotations/bulk", r#"[{"startTime":1328140801,"description":"Plural"}]"#);
    assert_eq!(r.text(), r#"[{"description":"Plural","endTime":0,"startTime":1328140801}]"#);
}

#[test]
fn bulk_update_errors_store_nothing() {
    // spec: query §6.9, §0.3, §0.4 (TestAnnotationRpc bulkBadMethodGet, bulkMissingContent, ...)
    let d = Daemon::start();
    let r = d.http("GET", "/api/annotation/bulk", &[], b"");
    assert_eq!(
        (r.status, r.text()),
        (
            405,
            r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [GET] is not permitted for this endpoint"}}"#
                .to_string()
        )
    );
    let r = d.post("/api/annotation/bulk", "");
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            r#"{"error":{"code":400,"message":"Missing message content","details":"Supply valid JSON formatted data in the body of your request"}}"#
                .to_string()
        )
    );
    for bad in ["Not a json object", r#"{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo"}"#] {
        let r = d.post("/api/annotation/bulk", bad);
        assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some("Unable to parse the given JSON")));
    }
    // The second element has no start time: the request is refused with that element in the details, and the
    // first one is not stored either (2.4 may have stored it; rtsd writes the list atomically).
    let r = d.post(
        "/api/annotation/bulk",
        r#"[{"tsuid":"000001000001000001","startTime":1388450562,"description":"Boo"},{"tsuid":"000001000001000002","description":"Gum"}]"#,
    );
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            r#"{"error":{"code":400,"message":"The start timestamp has not been set","details":"Annotation error: TSUID: 000001000001000002 Start: 0  Description: Gum"}}"#
                .to_string()
        )
    );
    let r = d.http("GET", "/api/annotation?start_time=1388450562&tsuid=000001000001000001", &[], b"");
    assert_eq!(r.status, 404);
    let r = d.post("/api/annotation/bulk", r#"[{"tsuid":"XYZ","startTime":1388450562}]"#);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["details"], "Annotation error: TSUID: XYZ Start: 1388450562  Description: ");
}

#[test]
fn bulk_delete_by_query_string() {
    // spec: query §6.9 (TestAnnotationRpc bulkDelete*, with method_override)
    let d = bulk_fixture();
    let del = |qs: &str| d.http("GET", &format!("/api/annotation/bulk?{qs}&method_override=delete"), &[], b"");
    let r = del("tsuids=000001000001000001,000001000001000002&start_time=1388450550000&end_time=1388450560000");
    assert_eq!(
        (r.status, r.text()),
        (
            200,
            r#"{"tsuids":["000001000001000001","000001000001000002"],"global":false,"startTime":1388450550000,"endTime":1388450560000,"totalDeleted":0}"#
                .to_string()
        )
    );
    let r = del("tsuids=000001000001000001,000001000001000002&start_time=1388450560000&end_time=1388450562000");
    assert_eq!(
        r.text(),
        r#"{"tsuids":["000001000001000001","000001000001000002"],"global":false,"startTime":1388450560000,"endTime":1388450562000,"totalDeleted":2}"#
    );
    // The later note of the first series and the global ones are still there.
    let get = |qs: &str| d.http("GET", &format!("/api/annotation?{qs}"), &[], b"").status;
    assert_eq!(get("start_time=1388450562&tsuid=000001000001000001"), 404);
    assert_eq!(get("start_time=1388450562&tsuid=000001000001000002"), 404);
    assert_eq!(get("start_time=1388450563&tsuid=000001000001000001"), 200);
    assert_eq!(get("start_time=1328140800"), 200);
    // Deleted ones are not counted again; seconds are read as seconds; no end means now.
    let r = del("tsuids=000001000001000001,%20000001000001000002&start_time=1000000000");
    let v = r.json();
    assert_eq!((v["totalDeleted"].as_u64(), v["startTime"].as_i64()), (Some(1), Some(1000000000000)));
    assert_eq!(v["tsuids"], serde_json::json!(["000001000001000001", "000001000001000002"]));
    assert!(v["endTime"].as_i64().unwrap() > 1700000000000);
    // Global notes in range, by the presence of `global`.
    let r = del("start_time=1328140799000&end_time=1328140799000&global=false");
    assert_eq!(
        r.text(),
        r#"{"tsuids":null,"global":true,"startTime":1328140799000,"endTime":1328140799000,"totalDeleted":1}"#
    );
    assert_eq!(get("start_time=1328140799"), 404);
    assert_eq!(get("start_time=1328140800"), 200);
    let r = del("start_time=1000000000000&global");
    assert_eq!(r.json()["totalDeleted"], 1);
    assert_eq!(get("start_time=1328140800"), 404);
}

#[test]
fn bulk_delete_by_body_and_its_errors() {
    // spec: query §6.9 (TestAnnotationRpc bulkDeleteDELETE, bulkDeleteGlobalDELETE and the error cases)
    let d = bulk_fixture();
    let del = |body: &str| d.http("DELETE", "/api/annotation/bulk", &[], body.as_bytes());
    let r = del(
        r#"{"tsuids":["000001000001000001","000001000001000002"],"startTime":"1388450560000","endTime":"1388450562000"}"#,
    );
    assert_eq!(
        (r.status, r.text()),
        (
            200,
            r#"{"tsuids":["000001000001000001","000001000001000002"],"global":false,"startTime":1388450560000,"endTime":1388450562000,"totalDeleted":2}"#
                .to_string()
        )
    );
    let r = del(r#"{"startTime":"1328140799000","endTime":"1328140800000","global":true}"#);
    assert_eq!(
        r.text(),
        r#"{"tsuids":null,"global":true,"startTime":1328140799000,"endTime":1328140800000,"totalDeleted":2}"#
    );
    let error = |r: rtsd_compat_tests::Response| (r.status, r.text());
    let envelope = |m: &str| (400, format!(r#"{{"error":{{"code":400,"message":"{m}"}}}}"#));
    let both = |m: &str| (400, format!(r#"{{"error":{{"code":400,"message":"{m}","details":"{m}"}}}}"#));
    assert_eq!(
        error(del(r#"{"tsuids":["000001000001000001"],"endTime":"1388450562000"}"#)),
        envelope("Missing the start time value")
    );
    assert_eq!(
        error(del(r#"{"startTime":"1328140799000","endTime":"1328140800000"}"#)),
        envelope("Missing the TSUIDs or global annotations flag")
    );
    assert_eq!(
        error(del(r#"{"startTime":"1328140799000","tsuids":[]}"#)),
        envelope("Missing the TSUIDs or global annotations flag")
    );
    assert_eq!(
        error(del(r#"{"startTime":"1328140800000","endTime":"1328140799000","global":true}"#)),
        both("The end timestamp cannot be less than the start timestamp")
    );
    let r = del("{thisisnotjson}");
    assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some("Unable to parse the given JSON")));
    let r = del(r#"{"startTime":"1328140799000","global":true,"purge":true}"#);
    assert_eq!(r.json()["error"]["details"], r#"Unrecognized field "purge""#);
    // Without a body the query string is read, and start_time is required there.
    assert_eq!(error(del("")), envelope("Missing parameter <code>start_time</code>"));
    let r = d.http("GET", "/api/annotation/bulk?start_time=1388450562000&method_override=delete", &[], b"");
    assert_eq!(error(r), envelope("Missing the TSUIDs or global annotations flag"));
    let r = d.http("GET", "/api/annotation/bulk?start_time=1388450562000&tsuids=&method_override=delete", &[], b"");
    assert_eq!(error(r), both("UID was empty"));
    // Nothing was deleted by the refused requests: the later series note is still there.
    let r = d.http("GET", "/api/annotation?start_time=1388450563&tsuid=000001000001000001", &[], b"");
    assert_eq!(r.status, 200);
}
