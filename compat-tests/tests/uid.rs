//! `/api/uid/assign`, `/api/uid/rename`, `/api/uid/uidmeta`, `/api/uid/tsmeta` (spec: query §0.1, §6.6-§6.8,
//! V16; ingest §4.10, §4.11), with OpenTSDB 2.4's examples and texts (src/tsd/UniqueIdRpc.java and
//! test/tsd/TestUniqueIdRpc.java).
use rtsd_compat_tests::{barrier, Daemon, Response};
use std::io::Write;

fn write_lines(d: &Daemon, lines: &str) {
    let mut t = d.telnet();
    t.write_all(lines.as_bytes()).unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new(), "no put errors");
}

fn get(d: &Daemon, path: &str) -> Response {
    d.http("GET", path, &[], b"")
}

fn answer(r: &Response) -> (u16, String) {
    (r.status, r.text())
}

fn reply(status: u16, body: &str) -> (u16, String) {
    (status, body.to_string())
}

fn error(code: u16, message: &str, details: Option<&str>) -> (u16, String) {
    let details = details.map(|d| format!(",\"details\":{}", serde_json::Value::from(d))).unwrap_or_default();
    (code, format!("{{\"error\":{{\"code\":{code},\"message\":{}{details}}}}}", serde_json::Value::from(message)))
}

/// The body with every `"created":<n>` set to 0 after checking each is a plausible wall-clock time (they are set
/// when a UID is assigned or a series first indexed), so the rest can be compared byte for byte.
fn without_created(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(i) = rest.find("\"created\":") {
        let start = i + "\"created\":".len();
        out.push_str(&rest[..start]);
        let digits = rest[start..].chars().take_while(char::is_ascii_digit).count();
        let value: i64 = rest[start..start + digits].parse().unwrap();
        assert!(value == 0 || value > 1_600_000_000, "created {value} in {body}");
        out.push('0');
        rest = &rest[start + digits..];
    }
    out.push_str(rest);
    out
}

fn uid_meta(uid: &str, kind: &str, name: &str) -> String {
    format!(
        r#"{{"uid":"{uid}","type":"{kind}","name":"{name}","description":"","notes":"","created":0,"custom":null,"displayName":""}}"#
    )
}

#[test]
fn assign_gives_uids_per_type_and_reports_existing_names() {
    // spec: query §6.6 and V16; TestUniqueIdRpc assignQs*/assignPost*
    let d = Daemon::start();
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?metric=sys.cpu.0")),
        reply(200, r#"{"metric":{"sys.cpu.0":"000001"}}"#)
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?metric=sys.cpu.1")),
        reply(200, r#"{"metric":{"sys.cpu.1":"000002"}}"#)
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?metric=sys.cpu.1")),
        reply(400, r#"{"metric":{},"metric_errors":{"sys.cpu.1":"Name already exists with UID: 000002"}}"#)
    );
    // Two good, one taken: the good ones are still assigned.
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?metric=sys.cpu.2,sys.cpu.1,sys.cpu.3")),
        reply(
            400,
            r#"{"metric":{"sys.cpu.2":"000003","sys.cpu.3":"000004"},"metric_errors":{"sys.cpu.1":"Name already exists with UID: 000002"}}"#
        )
    );
    assert_eq!(answer(&get(&d, "/api/uid/assign?tagk=host")), reply(200, r#"{"tagk":{"host":"000001"}}"#));
    assert_eq!(
        answer(&d.post("/api/uid/assign", r#"{"tagv":["localhost"]}"#)),
        reply(200, r#"{"tagv":{"localhost":"000001"}}"#)
    );
    // POST answers 400 with the same map when something failed.
    assert_eq!(
        answer(&d.post("/api/uid/assign", r#"{"tagk":["host","fqdn"]}"#)),
        reply(400, r#"{"tagk":{"fqdn":"000002"},"tagk_errors":{"host":"Name already exists with UID: 000001"}}"#)
    );
    // Several types at once; every given type has its map, even when empty.
    let r = get(&d, "/api/uid/assign?tagv=web01,web02&metric=sys.mem&tagk=dc");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        serde_json::json!({"tagv":{"web01":"000002","web02":"000003"},"metric":{"sys.mem":"000005"},"tagk":{"dc":"000003"}})
    );
    // Bad names, with 2.4's wording.
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?metric=illegal!character")),
        reply(
            400,
            r#"{"metric":{},"metric_errors":{"illegal!character":"Invalid metric (\"illegal!character\"): illegal character: !"}}"#
        )
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?tagk=,a1")),
        reply(400, r#"{"tagk":{"a1":"000004"},"tagk_errors":{"":"Invalid tagk: empty string"}}"#)
    );
    assert_eq!(
        answer(&d.post("/api/uid/assign", r#"{"metrics":["x"]}"#)),
        reply(400, r#"{"metrics":{},"metrics_errors":{"x":"Unknown type name"}}"#)
    );
    // Assigned names are suggested at once.
    assert_eq!(
        get(&d, "/api/suggest?type=metrics&q=sys.cpu").text(),
        r#"["sys.cpu.0","sys.cpu.1","sys.cpu.2","sys.cpu.3"]"#
    );
    // And points written with them use the assigned UIDs.
    write_lines(&d, "put sys.cpu.3 1356998400 1 host=web02\n");
    let r = get(&d, "/api/search/lookup?m=sys.cpu.3");
    assert_eq!(r.json()["results"][0]["tsuid"], "000004000001000003");
}

#[test]
fn assign_errors() {
    let d = Daemon::start();
    let missing = error(400, "Missing values to assign UIDs", None);
    assert_eq!(answer(&get(&d, "/api/uid/assign")), missing);
    assert_eq!(answer(&get(&d, "/api/uid/assign?tagv=")), missing);
    assert_eq!(answer(&get(&d, "/api/uid/assign?metric=,")), missing);
    assert_eq!(answer(&d.post("/api/uid/assign", "{}")), missing);
    assert_eq!(
        answer(&d.post("/api/uid/assign", "")),
        error(400, "Missing message content", Some("Supply valid JSON formatted data in the body of your request"))
    );
    let r = d.post("/api/uid/assign", "Hello");
    assert_eq!((r.status, r.json()["error"]["message"].clone()), (400, "Unable to parse the given JSON".into()));
    let r = d.post("/api/uid/assign", r#"{"metric":"sys.cpu.0"}"#);
    assert_eq!((r.status, r.json()["error"]["message"].clone()), (400, "Unable to parse the given JSON".into()));
    assert_eq!(
        answer(&d.http("PUT", "/api/uid/assign", &[], b"")),
        error(405, "Method not allowed", Some("The HTTP method [PUT] is not permitted for this endpoint"))
    );
}

#[test]
fn other_uid_endpoints_are_not_implemented_and_read_only_mode_has_none() {
    // spec: query §0.1
    let d = Daemon::start();
    let none = error(501, "Other UID endpoints have not been implemented yet", None);
    assert_eq!(answer(&get(&d, "/api/uid")), none);
    assert_eq!(answer(&get(&d, "/api/uid/foo")), none);
    assert_eq!(answer(&get(&d, "/api/v1/uid/assign/")), error(400, "Missing values to assign UIDs", None));
    let ro = Daemon::start_with(&[("tsd.mode", "ro")]);
    for path in ["/api/uid/assign?metric=a", "/api/uid/uidmeta?uid=000001&type=metric", "/api/uid"] {
        assert_eq!(answer(&get(&ro, path)), error(404, "Endpoint not found", None), "{path}");
    }
}

#[test]
fn rename_changes_the_name_everywhere() {
    // TestUniqueIdRpc rename*; the data keeps its UIDs, so suggest, lookup and queries see the new names.
    let d = Daemon::start();
    // One telnet connection before and after the renames: what it cached about the old names must not outlive them.
    let mut t = d.telnet();
    t.write_all(b"put sys.cpu.1 1356998400 1 host=web01\nput sys.cpu.1 1356998460 2 host=web01\n").unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new());
    assert_eq!(answer(&get(&d, "/api/uid/rename?metric=sys.cpu.1&name=sys.cpu.2")), reply(200, r#"{"result":"true"}"#));
    assert_eq!(
        answer(&d.post("/api/uid/rename", r#"{"tagk":"host","name":"hostname"}"#)),
        reply(200, r#"{"result":"true"}"#)
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/rename?tagv=web01&name=127.0.0.1&drop=db")),
        reply(200, r#"{"result":"true"}"#)
    );
    assert_eq!(get(&d, "/api/suggest?type=metrics&q=sys").text(), r#"["sys.cpu.2"]"#);
    assert_eq!(get(&d, "/api/suggest?type=tagk").text(), r#"["hostname"]"#);
    let r = get(&d, "/api/search/lookup?m=sys.cpu.2");
    assert_eq!(
        r.json()["results"],
        serde_json::json!([{"tsuid":"000001000001000001","metric":"sys.cpu.2","tags":{"hostname":"127.0.0.1"}}])
    );
    let r = get(&d, "/api/query?start=1356998400&end=1356998500&m=sum:sys.cpu.2%7Bhostname=127.0.0.1%7D");
    assert_eq!(
        answer(&r),
        reply(
            200,
            r#"[{"metric":"sys.cpu.2","tags":{"hostname":"127.0.0.1"},"aggregateTags":[],"dps":{"1356998400":1,"1356998460":2}}]"#
        )
    );
    let r = get(&d, "/api/query?start=1356998400&m=sum:sys.cpu.1");
    assert_eq!(
        answer(&r),
        error(400, "No such name for 'metrics': 'sys.cpu.1'", Some("No such name for 'metrics': 'sys.cpu.1'"))
    );
    // New points under the new name join the same series; the old name is free to be assigned again.
    t.write_all(b"put sys.cpu.2 1356998520 3 hostname=127.0.0.1\nput sys.cpu.1 1356998400 7 host=web01\n").unwrap();
    assert_eq!(barrier(&mut t), Vec::<String>::new());
    let r = get(&d, "/api/query?start=1356998400&end=1356998600&m=sum:sys.cpu.2");
    assert_eq!(r.json()[0]["dps"], serde_json::json!({"1356998400":1,"1356998460":2,"1356998520":3}));
    assert_eq!(
        answer(&get(&d, "/api/uid/assign?metric=sys.cpu.1")).1,
        r#"{"metric":{},"metric_errors":{"sys.cpu.1":"Name already exists with UID: 000002"}}"#
    );
    let r = get(&d, "/api/search/lookup?m=sys.cpu.1");
    assert_eq!(
        r.json()["results"],
        serde_json::json!([{"tsuid":"000002000002000002","metric":"sys.cpu.1","tags":{"host":"web01"}}])
    );
    drop(t);
    // A restart keeps the renames.
    let d = d.restart();
    assert_eq!(get(&d, "/api/suggest?type=metrics&q=sys").text(), r#"["sys.cpu.1","sys.cpu.2"]"#);
    assert_eq!(get(&d, "/api/uid/uidmeta?uid=000001&type=metric").json()["name"], "sys.cpu.2");
}

#[test]
fn rename_errors() {
    let d = Daemon::start();
    write_lines(&d, "put sys.cpu.1 1356998400 1 host=localhost\nput sys.cpu.3 1356998400 1 host=web01\n");
    assert_eq!(
        answer(&get(&d, "/api/uid/rename?tagv=localhost&name=localhost")),
        reply(
            400,
            r#"{"result":"false","error":"When trying rename(\"localhost\", \"localhost\") on UniqueId(tsdb-uid, tagv, 3): new name already assigned ID=[0, 0, 1]"}"#
        )
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/rename?metric=sys.cpu.1&name=sys.cpu.3")),
        reply(
            400,
            r#"{"result":"false","error":"When trying rename(\"sys.cpu.1\", \"sys.cpu.3\") on UniqueId(tsdb-uid, metrics, 3): new name already assigned ID=[0, 0, 2]"}"#
        )
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/rename?metric=nope&name=x")),
        reply(400, r#"{"result":"false","error":"Name(\"nope\") does not exist"}"#)
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/rename?metric=sys.cpu.1&name=bad!name")),
        reply(400, r#"{"result":"false","error":"Invalid metric (\"bad!name\"): illegal character: !"}"#)
    );
    assert_eq!(
        answer(&d.post("/api/uid/rename", r#"{"not_a_type":"a","name":"b"}"#)),
        reply(400, r#"{"result":"false","error":"Unknown type name"}"#)
    );
    let missing = error(400, "Missing necessary values to rename UID", None);
    for path in [
        "/api/uid/rename?name=127.0.0.1",
        "/api/uid/rename?metric=sys.cpu.1",
        "/api/uid/rename?metric=&name=a",
        "/api/uid/rename?",
    ] {
        assert_eq!(answer(&get(&d, path)), missing, "{path}");
    }
    assert_eq!(answer(&d.post("/api/uid/rename", "{}")), missing);
    assert_eq!(answer(&d.post("/api/uid/rename", r#"{"tagk":"host","not_name":"x"}"#)), missing);
    assert_eq!(
        answer(&d.post("/api/uid/rename", "")),
        error(400, "Missing message content", Some("Supply valid JSON formatted data in the body of your request"))
    );
    let r = d.post("/api/uid/rename", "Not JSON");
    assert_eq!((r.status, r.json()["error"]["message"].clone()), (400, "Unable to parse the given JSON".into()));
    // 2.4's text for this endpoint has no space after "method".
    assert_eq!(
        answer(&d.http("PUT", "/api/uid/rename", &[], b"")),
        error(405, "Method not allowed", Some("The HTTP method[PUT] is not permitted for this endpoint"))
    );
}

#[test]
fn uidmeta_get_post_put_delete() {
    // spec: query §6.7; TestUniqueIdRpc uid*
    let d = Daemon::start();
    write_lines(&d, "put sys.cpu.0 1356998400 1 host=web01\n");
    let r = get(&d, "/api/uid/uidmeta?uid=000001&type=metric");
    assert_eq!(r.status, 200);
    assert!(r.json()["created"].as_i64().unwrap() > 1_600_000_000, "created when the UID was assigned");
    assert_eq!(without_created(&r.text()), uid_meta("000001", "METRIC", "sys.cpu.0"));
    // type is case-insensitive, `metrics` is accepted too; tag keys and values have theirs.
    assert_eq!(get(&d, "/api/uid/uidmeta?uid=000001&type=Metrics").text(), r.text());
    assert_eq!(
        without_created(&get(&d, "/api/uid/uidmeta?uid=000001&type=tagk").text()),
        uid_meta("000001", "TAGK", "host")
    );
    assert_eq!(
        without_created(&get(&d, "/api/uid/uidmeta?uid=1&type=tagv&uid=000001").text()),
        uid_meta("000001", "TAGV", "web01")
    );
    // Errors.
    assert_eq!(
        answer(&get(&d, "/api/uid/uidmeta?uid=000002&type=metric")),
        error(404, "Could not find the requested UID", Some("No such unique ID for 'metrics': [0, 0, 2]"))
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/uidmeta?type=metric")),
        error(400, "Missing parameter <code>uid</code>", None)
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/uidmeta?uid=000001")),
        error(400, "Missing parameter <code>type</code>", None)
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/uidmeta?uid=000001&type=foo")),
        error(400, "Invalid type requested: foo", None)
    );

    // POST merges the given fields.
    let r = d.post(
        "/api/uid/uidmeta",
        r#"{"uid":"000001","type":"metric","displayName":"System CPU Time","custom":{"owner":"Jane"}}"#,
    );
    assert_eq!(r.status, 200);
    let posted = r#"{"uid":"000001","type":"METRIC","name":"sys.cpu.0","description":"","notes":"","created":0,"custom":{"owner":"Jane"},"displayName":"System CPU Time"}"#;
    assert_eq!(without_created(&r.text()), posted);
    assert_eq!(r.json()["created"], get(&d, "/api/uid/uidmeta?uid=000001&type=metric").json()["created"]);
    // Nothing to change: 304, empty body.
    assert_eq!(answer(&d.post("/api/uid/uidmeta", r#"{"uid":"000001","type":"metric"}"#)), reply(304, ""));
    assert_eq!(answer(&d.post("/api/uid/uidmeta", r#"{"uid":"000001","type":"metric","notes":""}"#)), reply(304, ""));
    // Query-string form with method_override.
    let r = get(&d, "/api/uid/uidmeta?uid=000001&type=metric&description=Desc&method_override=post");
    assert_eq!(r.status, 200);
    assert_eq!(
        (r.json()["description"].clone(), r.json()["displayName"].clone()),
        ("Desc".into(), "System CPU Time".into())
    );
    assert_eq!(answer(&get(&d, "/api/uid/uidmeta?uid=000001&type=metric&method_override=post")), reply(304, ""));
    // PUT resets what it does not give.
    let r = d.http("PUT", "/api/uid/uidmeta", &[], br#"{"uid":"000001","type":"metric","notes":"N"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(
        without_created(&r.text()),
        r#"{"uid":"000001","type":"METRIC","name":"sys.cpu.0","description":"","notes":"N","created":0,"custom":null,"displayName":""}"#
    );
    assert_eq!(answer(&d.http("PUT", "/api/uid/uidmeta", &[], br#"{"uid":"000001","type":"metric"}"#)), reply(304, ""));
    // POST/PUT errors.
    assert_eq!(
        answer(&d.post("/api/uid/uidmeta", r#"{"type":"metric","displayName":"Hello!"}"#)),
        error(400, "Missing UID", Some("Missing UID"))
    );
    assert_eq!(
        answer(&d.post("/api/uid/uidmeta", r#"{"uid":"000001","displayName":"Hello!"}"#)),
        error(400, "Missing type", Some("Missing type"))
    );
    assert_eq!(
        answer(&d.post("/api/uid/uidmeta", r#"{"uid":"000002","type":"metric","displayName":"Hello!"}"#)),
        error(404, "Could not find the requested UID", Some("No such unique ID for 'metrics': [0, 0, 2]"))
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/uidmeta?type=metric&method_override=post")),
        error(400, "Missing parameter <code>uid</code>", None)
    );
    let r = d.post("/api/uid/uidmeta", r#"{"uid":"000001","type":"nope","displayName":"x"}"#);
    assert_eq!((r.status, r.json()["error"]["message"].clone()), (400, "Unable to parse the given JSON".into()));

    // A restart keeps it.
    let d = d.restart();
    assert_eq!(get(&d, "/api/uid/uidmeta?uid=000001&type=metric").json()["notes"], "N");
    // DELETE: 204; the UID stays, its meta is back to defaults (created unknown).
    assert_eq!(
        answer(&d.http(
            "DELETE",
            "/api/uid/uidmeta",
            &[],
            br#"{"uid":"000001","type":"metric","displayName":"Hello!"}"#
        )),
        reply(204, "")
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/uidmeta?uid=000001&type=metric")),
        reply(200, &uid_meta("000001", "METRIC", "sys.cpu.0"))
    );
    assert_eq!(answer(&get(&d, "/api/uid/uidmeta?uid=000001&type=tagk&method_override=delete")), reply(204, ""));
    assert_eq!(
        answer(&d.http("DELETE", "/api/uid/uidmeta", &[], br#"{"type":"metric"}"#)),
        error(400, "Unable to delete UIDMeta information", Some("Missing UID"))
    );
    assert_eq!(
        answer(&d.http("DELETE", "/api/uid/uidmeta", &[], br#"{"uid":"000001"}"#)),
        error(400, "Unable to delete UIDMeta information", Some("Missing type"))
    );
    assert_eq!(
        answer(&d.http("PATCH", "/api/uid/uidmeta", &[], b"")),
        error(405, "Method not allowed", Some("The HTTP method [PATCH] is not permitted for this endpoint"))
    );
}

/// The wall clock in seconds.
fn now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A TSMeta's `lastReceived`, checked to lie in `[since, now]`: the wall-clock second its points arrived.
fn last_received(r: &rtsd_compat_tests::Response, since: i64) -> i64 {
    let t = r.json()["lastReceived"].as_i64().unwrap();
    assert!(t >= since && t <= now_s(), "lastReceived {t} not in [{since}, now]: {}", r.text());
    t
}

#[test]
fn tsmeta_of_written_series_counts_their_points() {
    // spec: query §6.8, ingest §4.11; TestUniqueIdRpc tsuid*
    let d = Daemon::start();
    let since = now_s();
    write_lines(
        &d,
        "put sys.cpu.0 1356998400 1 host=web01\nput sys.cpu.0 1356998460 2 host=web01\nput sys.cpu.0 1357002000 3 host=web01\n\
         put sys.cpu.0 1356998460 5 host=web01\nput sys.cpu.0 1356998400 1 host=web02 dc=lga\n",
    );
    let r = get(&d, "/api/uid/tsmeta?tsuid=000001000001000001");
    assert_eq!(r.status, 200);
    assert!(r.json()["created"].as_i64().unwrap() > 1_600_000_000, "created when the series was first indexed");
    // Four puts, one of them overwriting a point: 2.4's ts_ctr counts every put, and lastReceived is when they
    // arrived (the counter cell's write time in 2.4).
    let received = last_received(&r, since);
    let s1 = format!(
        r#"{{"tsuid":"000001000001000001","metric":{},"tags":[{},{}],"description":"","notes":"","created":0,"units":"","retention":0,"max":"NaN","min":"NaN","displayName":"","dataType":"","lastReceived":{received},"totalDatapoints":4}}"#,
        uid_meta("000001", "METRIC", "sys.cpu.0"),
        uid_meta("000001", "TAGK", "host"),
        uid_meta("000001", "TAGV", "web01")
    );
    assert_eq!(without_created(&r.text()), s1);
    // By metric and tags: an array of every series carrying the tags.
    let r = get(&d, "/api/uid/tsmeta?m=sys.cpu.0");
    assert_eq!(r.status, 200);
    let all = r.json();
    assert_eq!(all.as_array().unwrap().len(), 2);
    assert_eq!(all[0]["tsuid"], "000001000001000001");
    assert_eq!(
        (all[1]["tsuid"].clone(), all[1]["totalDatapoints"].clone()),
        ("000001000001000002000002000003".into(), 1.into())
    );
    assert_eq!(without_created(&get(&d, "/api/uid/tsmeta?m=sys.cpu.0%7Bhost=web01%7D").text()), format!("[{s1}]"));
    let r = get(&d, "/api/uid/tsmeta?m=sys.cpu.0{dc=lga}");
    assert_eq!(
        r.json().as_array().unwrap().iter().map(|m| m["tsuid"].clone()).collect::<Vec<_>>(),
        ["000001000001000002000002000003"]
    );
    // Errors.
    assert_eq!(
        answer(&get(&d, "/api/uid/tsmeta?tsuid=000001000001000002")),
        error(404, "Could not find Timeseries meta data", None)
    );
    assert_eq!(answer(&get(&d, "/api/uid/tsmeta")), error(400, "Missing parameter <code>m</code>", None));
    assert_eq!(answer(&get(&d, "/api/uid/tsmeta?m=")), error(400, "Missing parameter <code>m</code>", None));
    let text = "Missing '}' at the end of: sys.cpu.0{datacenter=dc";
    assert_eq!(answer(&get(&d, "/api/uid/tsmeta?m=sys.cpu.0{datacenter=dc")), error(400, text, Some(text)));
    assert_eq!(
        answer(&get(&d, "/api/uid/tsmeta?m=sys.cpu.0{host=web03}")),
        error(404, "Unable to find one of the UIDs", Some("No such name for 'tagv': 'web03'"))
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/tsmeta?m=nope")),
        error(404, "Unable to find one of the UIDs", Some("No such name for 'metrics': 'nope'"))
    );
}

#[test]
fn tsmeta_post_put_create_delete_and_restart() {
    let d = Daemon::start();
    let since = now_s();
    write_lines(&d, "put sys.cpu.0 1356998400 1 host=web01\n");
    let body = r#"{"tsuid":"000001000001000001","displayName":"Hello World","custom":{"owner":"Jane Doe"},"max":1024}"#;
    let r = d.post("/api/uid/tsmeta", body);
    assert_eq!(r.status, 200);
    let received = last_received(&r, since);
    let tail = format!(
        r#""custom":{{"owner":"Jane Doe"}},"units":"","retention":0,"max":1024.0,"min":"NaN","displayName":"Hello World","dataType":"","lastReceived":{received},"totalDatapoints":1}}"#
    );
    assert!(r.text().ends_with(&tail), "{}", r.text());
    // Nothing to change: 304.
    assert_eq!(answer(&d.post("/api/uid/tsmeta", r#"{"tsuid":"000001000001000001"}"#)), reply(304, ""));
    assert_eq!(answer(&d.http("PUT", "/api/uid/tsmeta", &[], br#"{"tsuid":"000001000001000001"}"#)), reply(304, ""));
    // Query-string POST merges; the stored fields stay.
    let r = get(&d, "/api/uid/tsmeta?tsuid=000001000001000001&units=%25&method_override=post");
    assert_eq!((r.json()["units"].clone(), r.json()["displayName"].clone()), ("%".into(), "Hello World".into()));
    // Float.parseFloat on the query string: 0.1 passes through single precision, as in 2.4.
    let r = get(&d, "/api/uid/tsmeta?tsuid=000001000001000001&min=0.1&method_override=post");
    assert!(r.text().contains(r#""min":0.10000000149011612,"#), "{}", r.text());
    assert_eq!(
        answer(&get(&d, "/api/uid/tsmeta?tsuid=000001000001000001&retention=x&method_override=post")),
        error(400, "Unable to parse 'retention' value", None)
    );
    // PUT resets every field it does not give.
    let r = d.http("PUT", "/api/uid/tsmeta", &[], br#"{"tsuid":"000001000001000001","displayName":"42"}"#);
    let tail = format!(
        r#""units":"","retention":0,"max":"NaN","min":"NaN","displayName":"42","dataType":"","lastReceived":{received},"totalDatapoints":1}}"#
    );
    assert!(r.text().ends_with(&tail), "{}", r.text());
    // Errors.
    assert_eq!(
        answer(&d.post("/api/uid/tsmeta", r#"{"displayName":"Hello World"}"#)),
        error(400, "Missing parameter <code>m</code>", None)
    );
    assert_eq!(
        answer(&d.post("/api/uid/tsmeta", r#"{"tsuid":"000001000001000009","displayName":"x"}"#)),
        error(404, "Unable to find one or more UIDs", Some("No such unique ID for 'tagv': [0, 0, 9]"))
    );
    assert_eq!(
        answer(&d.post("/api/uid/tsmeta", r#"{"tsuid":"000001","displayName":"x"}"#)),
        error(400, "TSUID is too short, may be missing tags", Some("TSUID is too short, may be missing tags"))
    );

    // create=true makes a TSMeta for a series whose UIDs exist but which has no data yet.
    assert_eq!(get(&d, "/api/uid/assign?tagv=web02").status, 200);
    assert_eq!(
        answer(&d.post("/api/uid/tsmeta?m=sys.cpu.0{host=web02}", r#"{"displayName":"Hello World"}"#)),
        error(400, "Could not find TSMeta, specify \"create=true\" to create a new one.", None)
    );
    let r = d.post("/api/uid/tsmeta?m=sys.cpu.0{host=web02}&create=true", r#"{"displayName":"Hello World"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(
        without_created(&r.text()),
        format!(
            r#"{{"tsuid":"000001000001000002","metric":{},"tags":[{},{}],"description":"","notes":"","created":0,"units":"","retention":0,"max":"NaN","min":"NaN","displayName":"Hello World","dataType":"","lastReceived":0,"totalDatapoints":0}}"#,
            uid_meta("000001", "METRIC", "sys.cpu.0"),
            uid_meta("000001", "TAGK", "host"),
            uid_meta("000002", "TAGV", "web02")
        )
    );
    assert_eq!(r.json()["displayName"], "Hello World");
    // It exists now: the m= form updates it (and 304s on no change); GET by m lists it beside the written one.
    assert_eq!(answer(&d.post("/api/uid/tsmeta?m=sys.cpu.0{host=web02}", "{}")), reply(304, ""));
    let r =
        get(&d, "/api/uid/tsmeta?display_name=Testing&m=sys.cpu.0%7Bhost=web02%7D&create=true&method_override=post");
    assert_eq!(r.json()["displayName"], "Testing");
    let r = get(&d, "/api/uid/tsmeta?m=sys.cpu.0");
    let names: Vec<_> = r.json().as_array().unwrap().iter().map(|m| m["displayName"].clone()).collect();
    assert_eq!(names, ["42", "Testing"]);
    // Unknown names in m=.
    assert_eq!(
        answer(&d.post("/api/uid/tsmeta?m=sys.cpu.0{host=web09}&create=true", "{}")),
        error(404, "Unable to find one or more UIDs", Some("No such name for 'tagv': 'web09'"))
    );

    // A restart keeps everything; new points keep being counted.
    let d = d.restart();
    let since = now_s();
    write_lines(&d, "put sys.cpu.0 1356998401 1 host=web01\nput sys.cpu.0 1356998402 1 host=web02\n");
    let r = get(&d, "/api/uid/tsmeta?tsuid=000001000001000001");
    assert_eq!((r.json()["displayName"].clone(), r.json()["totalDatapoints"].clone()), ("42".into(), 2.into()));
    let r = get(&d, "/api/uid/tsmeta?tsuid=000001000001000002");
    let j = r.json();
    assert_eq!((j["displayName"].clone(), j["totalDatapoints"].clone()), ("Testing".into(), 1.into()));
    last_received(&r, since);
    assert!(j["created"].as_i64().unwrap() > 1_600_000_000, "created once data arrived");

    // DELETE: 204, then 404; it stays deleted until created again.
    assert_eq!(
        answer(&d.http("DELETE", "/api/uid/tsmeta", &[], br#"{"tsuid":"000001000001000001","displayName":"x"}"#)),
        reply(204, "")
    );
    assert_eq!(
        answer(&get(&d, "/api/uid/tsmeta?tsuid=000001000001000001")),
        error(404, "Could not find Timeseries meta data", None)
    );
    write_lines(&d, "put sys.cpu.0 1356998403 1 host=web01\n");
    assert_eq!(get(&d, "/api/uid/tsmeta?tsuid=000001000001000001").status, 404);
    assert_eq!(get(&d, "/api/uid/tsmeta?tsuid=000001000001000002&method_override=delete").status, 204);
    assert_eq!(answer(&get(&d, "/api/uid/tsmeta?m=sys.cpu.0")), reply(200, "[]"));
    let r = get(&d, "/api/uid/tsmeta?m=sys.cpu.0%7Bhost=web01%7D&create=true&method_override=post");
    assert_eq!((r.status, r.json()["totalDatapoints"].clone()), (200, 3.into()));
    assert_eq!(
        answer(&d.http("DELETE", "/api/uid/tsmeta", &[], br#"{"displayName":"x"}"#)),
        error(400, "Unable to delete TSMeta information", Some("Missing UID"))
    );
}

/// The harness runs the binary Cargo built for this test target.
#[test]
fn harness_runs_the_binary_cargo_built() {
    assert_eq!(
        std::fs::canonicalize(rtsd_compat_tests::binary()).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rtsd-compat")).unwrap()
    );
}
