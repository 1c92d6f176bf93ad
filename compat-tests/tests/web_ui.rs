//! The web UI's routes against the real daemon (spec: query §6.18): the page, its embedded assets, the
//! favicon, and the store gauges its status view reads from `/metrics`.
use rtsd_compat_tests::{Daemon, Response};

fn get(d: &Daemon, path: &str) -> Response {
    d.http("GET", path, &[], b"")
}

#[test]
fn the_page_and_its_assets_are_served_from_the_binary() {
    // spec: query §6.18
    let d = Daemon::start();
    let page = get(&d, "/");
    assert_eq!((page.status, page.header("Content-Type")), (200, Some("text/html; charset=UTF-8")));
    let html = page.text();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    // Nothing is loaded from another origin: the page works offline.
    assert!(!html.contains("http://") && !html.contains("https://"), "{html}");
    let version = html.split("s/app.js?v=").nth(1).map(|s| s[..12].to_string()).expect("the script's link");
    for (path, content_type, needle) in [
        ("/s/app.js", "application/javascript; charset=UTF-8", "async function runQuery"),
        ("/s/app.css", "text/css; charset=UTF-8", "#chart"),
    ] {
        let r = get(&d, &format!("{path}?v={version}"));
        assert_eq!((r.status, r.header("Content-Type")), (200, Some(content_type)), "{path}");
        assert_eq!(r.header("Cache-Control"), Some("max-age=31536000"), "{path}");
        let text = r.text();
        assert!(text.contains(needle), "{path}");
        assert!(!text.contains("http://") && !text.contains("https://"), "{path} fetches nothing from elsewhere");
    }
    let icon = get(&d, "/favicon.ico");
    assert_eq!((icon.status, icon.header("Content-Type")), (200, Some("image/x-icon")));
    assert_eq!(&icon.body[..4], &[0, 0, 1, 0], "an ICO file");
    // OpenTSDB's static-file rules: `..` is refused, unknown names are 404s (non-API format).
    let r = get(&d, "/s/../Cargo.toml?json");
    assert_eq!((r.status, r.text()), (400, r#"{"err":"Malformed path"}"#.to_string()));
    let r = get(&d, "/s/nosuch.js?json");
    assert_eq!((r.status, r.text()), (404, r#"{"err":"Page Not Found"}"#.to_string()));
}

#[test]
fn the_ui_is_off_with_enable_ui_false() {
    // spec: ingest §6 (`tsd.core.enable_ui`)
    let d = Daemon::start_with(&[("tsd.core.enable_ui", "false")]);
    for path in ["/", "/s/app.js", "/favicon.ico"] {
        assert_eq!(get(&d, path).status, 404, "{path}");
    }
    assert_eq!(get(&d, "/api/version").status, 200, "the API stays");
}

/// A sample's value in Prometheus text.
fn sample(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_count_series_and_disk_bytes_for_the_status_view() {
    let d = Daemon::start();
    let before = get(&d, "/metrics").text();
    assert_eq!(sample(&before, "rtsd_series"), Some(0));
    assert!(sample(&before, "rtsd_disk_bytes").is_some_and(|b| b > 0), "{before}");
    // The allocator's heap: allocated, and at least that much kept resident.
    let allocated = sample(&before, "rtsd_heap_allocated_bytes").unwrap_or(0);
    assert!(allocated > 1 << 20, "{before}");
    assert!(sample(&before, "rtsd_heap_resident_bytes").is_some_and(|r| r >= allocated), "{before}");
    // Recent points: series past every retention are not listed.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    d.put_lines(&format!("put a {now} 1 host=x\nput a {now} 1 host=y\nput b {now} 1 host=x\n"));
    // The count is reused for 10 s; a fresh daemon on the same directory counts again.
    let d = d.restart();
    let after = get(&d, "/metrics").text();
    assert_eq!(sample(&after, "rtsd_series"), Some(3), "{after}");
}
