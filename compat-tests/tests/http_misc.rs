//! Cross-cutting HTTP behaviour: CORS, method override, compressed responses (spec: query §0.1, §0.3, §0.5).
use rtsd_compat_tests::Daemon;

#[test]
fn cors_is_off_by_default_and_answers_configured_origins() {
    // spec: query §0.5
    let d = Daemon::start();
    let r = d.http("OPTIONS", "/api/query", &[("Origin", "http://grafana.example")], b"");
    assert_eq!(
        (r.status, r.text()),
        (405, r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [OPTIONS] is not permitted"}}"#.to_string())
    );
    let r = d.http("GET", "/api/version", &[("Origin", "http://grafana.example")], b"");
    assert_eq!(r.header("access-control-allow-origin"), None);

    let d = Daemon::start_with(&[("tsd.http.request.cors_domains", "http://grafana.example, http://other")]);
    let r = d.http("OPTIONS", "/api/query", &[("Origin", "http://Grafana.example")], b"");
    assert_eq!((r.status, r.text()), (200, String::new()));
    assert_eq!(r.header("access-control-allow-origin"), Some("http://Grafana.example"));
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST, PUT, DELETE"));
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("Authorization, Content-Type, Accept, Origin, User-Agent, DNT, Cache-Control, X-Mx-ReqToken, Keep-Alive, X-Requested-With, If-Modified-Since")
    );
    let r = d.http("GET", "/api/aggregators", &[("Origin", "http://evil")], b"");
    assert_eq!(
        (r.status, r.text()),
        (200, r#"{"error":{"code":200,"message":"CORS domain not allowed","details":"The domain [http://evil] is not permitted access"}}"#.to_string())
    );
    let r = d.http("GET", "/api/aggregators", &[], b"");
    assert!(r.text().starts_with("[\"mult\""), "no Origin: served normally");
}

#[test]
fn method_override_turns_a_get_into_another_method() {
    // spec: query §0.1
    let d = Daemon::start();
    let r = d.http("GET", "/api/annotation?start_time=1369141261&description=x&method_override=post", &[], b"");
    assert_eq!((r.status, r.text()), (200, r#"{"description":"x","endTime":0,"startTime":1369141261}"#.to_string()));
    let r = d.http("GET", "/api/annotation?start_time=1369141261&method_override=delete", &[], b"");
    assert_eq!(r.status, 204);
    let r = d.http("GET", "/api/annotation?start_time=1369141261&method_override=", &[], b"");
    assert_eq!(r.text(), r#"{"error":{"code":405,"message":"Missing method override value"}}"#);
    let r = d.http("GET", "/api/search/lookup?m=x&method_override=patch", &[], b"");
    assert_eq!(r.text(), r#"{"error":{"code":405,"message":"Unknown or unsupported method override value"}}"#);
    // Only the endpoints that call 2.4's getAPIMethod read it; the others serve the GET, whatever it says.
    for path in
        ["/api/version?method_override=", "/api/version?method_override=patch", "/api/aggregators?method_override=post"]
    {
        let r = d.http("GET", path, &[], b"");
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
    let r = d.http("GET", "/api/uid/assign?metric=override.m&method_override=put", &[], b"");
    assert_eq!((r.status, r.text().as_str()), (200, r#"{"metric":{"override.m":"000001"}}"#));
}

#[test]
fn large_responses_are_gzipped_when_the_client_accepts_it() {
    // spec: query §0.3 (HttpContentCompressor); Grafana and Prometheus send Accept-Encoding: gzip.
    use std::io::Read;
    let d = Daemon::start();
    let r = d.http("GET", "/api/aggregators", &[("Accept-Encoding", "gzip")], b"");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&r.body[..]).read_to_string(&mut text).unwrap();
    assert!(text.starts_with("[\"mult\",\"p90\""), "{text}");
    let r = d.http("GET", "/api/aggregators", &[], b"");
    assert_eq!(r.header("content-encoding"), None);
    let r = d.http("GET", "/api/version", &[("Accept-Encoding", "gzip")], b"");
    assert!(r.text().contains("\"version\":\"2.4.1\""), "small bodies stay plain");
}

// spec: query §6.11 (RpcManager.ShowConfig): any sub-path but `filters` answers the whole configuration.
#[test]
fn config_sub_paths_answer_the_configuration() {
    let d = Daemon::start();
    let whole = d.http("GET", "/api/config", &[], b"");
    assert_eq!(whole.status, 200);
    assert!(whole.text().contains(r#""tsd.network.port":"#), "{}", whole.text());
    let other = d.http("GET", "/api/config/anything", &[], b"");
    assert_eq!((other.status, other.text()), (200, whole.text()));
    assert!(d.http("GET", "/api/config/filters", &[], b"").text().contains(r#""literal_or":{"#));
}
