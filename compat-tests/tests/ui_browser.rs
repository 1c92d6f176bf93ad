//! The web UI end to end in headless Chromium (through chromedriver, see `rtsd_compat_tests::webdriver`):
//! what a newcomer does — type a metric, pick a tag, graph it, hover the chart, share the URL — checked against
//! `/api/query` on the same data. Screenshots go to `$CARGO_TARGET_TMPDIR/ui_browser/`.
//!
//! Without Chromium the tests say they skipped, unless `RTSD_REQUIRE_BROWSER` is set (scripts/test sets it).
use std::path::PathBuf;

use rtsd_compat_tests::webdriver::Browser;
use rtsd_compat_tests::Daemon;
use serde_json::{json, Value};

/// `sys.cpu.user` for web01 (integers) and web02 (doubles) every minute over the last ten minutes, and one
/// `sys.mem.free` series.
fn data() -> Daemon {
    let d = Daemon::start();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let mut lines = String::new();
    for i in 0..=10u64 {
        let t = now - 600 + i * 60;
        lines.push_str(&format!("put sys.cpu.user {t} {} host=web01\n", 10 + 3 * i));
        lines.push_str(&format!("put sys.cpu.user {t} {}.5 host=web02\n", 40 - i));
        lines.push_str(&format!("put sys.mem.free {t} {} host=web01\n", 1000 + i));
    }
    d.put_lines(&lines);
    d
}

fn screenshot(browser: &Browser, name: &str) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui_browser");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    let png = browser.screenshot();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG screenshot");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// The legend's entries, read in one script (auto-refresh may redraw the legend between two commands).
fn legend(browser: &Browser) -> Vec<String> {
    let v = browser.execute("return [...document.querySelectorAll('#legend li')].map(li => li.textContent)", json!([]));
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// Waits until the legend lists `n` series.
fn wait_for_series(browser: &Browser, n: usize) -> Vec<String> {
    browser.wait_for(&format!("{n} series in the legend"), || Some(legend(browser)).filter(|l| l.len() == n))
}

/// `/api/query`'s answer as {series label: {ms timestamp: value}}, labelled as the UI labels results.
fn api_values(d: &Daemon, query: &str) -> Vec<(String, Vec<(i64, f64)>)> {
    let answer = d.http("GET", &format!("/api/query?{query}&ms&arrays"), &[], b"").json();
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let tags: Vec<String> =
                g["tags"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap())).collect();
            let label = format!("{}{{{}}}", g["metric"].as_str().unwrap(), tags.join(", "));
            let dps = g["dps"].as_array().unwrap().iter().map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()));
            (label, dps.collect())
        })
        .collect()
}

#[test]
fn a_metric_typed_and_tagged_in_the_form_is_graphed_with_api_query_values() {
    let Some(browser) = Browser::start("ui_browser::a_metric_typed_and_tagged_in_the_form") else { return };
    let d = data();
    browser.goto(&format!("http://{}/", d.addr()));
    browser.find("body[data-ready=true]");

    // Type the start of a name: the suggestions come from /api/suggest.
    let name = browser.find("#metrics .metric-name");
    browser.type_text(&name, "sys.c");
    browser.wait_for("metric suggestions", || {
        let options = browser
            .execute("return [...document.querySelectorAll('#metric-names option')].map(o => o.value)", json!([]));
        Some(()).filter(|_| options == json!(["sys.cpu.user"]))
    });
    browser.type_text(&name, "pu.user");
    // Leaving the field loads the metric's tags (/api/search/lookup) into the tag pickers.
    browser.click(&browser.find("#start"));
    browser.click(&browser.find("#metrics .add-tag"));
    let host = browser.find("#metrics .tag select.tagk option[value=host]");
    browser.click(&host);
    let values = browser
        .execute("return [...document.querySelector('#metrics .tag datalist').options].map(o => o.value)", json!([]));
    assert_eq!(values, json!(["*", "web01", "web02"]));
    browser.type_text(&browser.find("#metrics .tag .tagv"), "*");
    browser.click(&browser.find("#run"));

    // One series per host, named as /api/query names them.
    let query = "start=1h-ago&m=sum:sys.cpu.user%7Bhost=*%7D";
    let expected = api_values(&d, query);
    let labels = wait_for_series(&browser, 2);
    assert_eq!(labels, expected.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>());
    // The URL holds the query: the /q and /api/query query string.
    let hash = browser.execute("return decodeURIComponent(location.hash)", json!([]));
    assert_eq!(hash, json!("#start=1h-ago&m=sum:sys.cpu.user{host=*}"));

    // Hovering shows each series' value at that time, exactly /api/query's.
    let chart = browser.find("#chart");
    for dx in [-300, 0, 250] {
        browser.hover(&chart, dx, 0);
        let rows = browser.wait_for("hover values", || {
            let rows = browser.execute(
                "const t = document.getElementById('tooltip'); if (t.hidden) return null;
                 return [...t.querySelectorAll('.tip-row')].map(r => [r.dataset.series, Number(r.dataset.ts), r.dataset.value]);",
                json!([]),
            );
            rows.as_array().filter(|r| r.len() == 2).cloned()
        });
        for row in rows {
            let (label, ts, value) = (row[0].as_str().unwrap(), row[1].as_i64().unwrap(), row[2].as_str().unwrap());
            let (_, dps) = expected.iter().find(|(l, _)| l == label).unwrap_or_else(|| panic!("series {label}"));
            let api = dps.iter().find(|(t, _)| *t == ts).unwrap_or_else(|| panic!("{label} has no point at {ts}"));
            assert_eq!(value.parse::<f64>().unwrap(), api.1, "{label} at {ts}");
        }
    }
    screenshot(&browser, "graph");
}

#[test]
fn shared_links_q_links_errors_and_status() {
    let Some(browser) = Browser::start("ui_browser::shared_links_q_links_errors_and_status") else { return };
    let d = data();
    // A shared address opens with its query graphed: two metrics, downsampled, one grouped by host, the second
    // on a right-hand scale (one `o=` per `m=`, as /q takes them).
    let shared =
        "#start=1h-ago&m=sum:sys.cpu.user%7Bhost=*%7D&m=max:5m-avg-zero:sys.mem.free&o=&o=axis+x1y2&autoreload=10";
    browser.goto(&format!("http://{}/{shared}", d.addr()));
    let labels = wait_for_series(&browser, 3);
    assert_eq!(labels[2], "sys.mem.free{host=web01} (right axis)");
    let scales = browser.execute("return [view.left.y0, view.left.y1, view.right.y0, view.right.y1]", json!([]));
    // cpu 10..40.5 on the left; memory (1000..1010, zero-filled buckets before it) on the right.
    assert_eq!(scales, json!([10, 45, 0, 1200]));
    let png_link = browser.execute("return document.getElementById('png-link').getAttribute('href')", json!([]));
    let png_link = png_link.as_str().unwrap();
    assert!(png_link.contains("&o=&o=axis+x1y2&"), "{png_link}");
    let png = d.http("GET", &format!("/{png_link}"), &[], b"");
    assert_eq!((png.status, png.header("Content-Type")), (200, Some("image/png")), "{png_link}");
    let form = browser
        .execute("return readForm().map(buildM).concat([document.getElementById('autoreload').value])", json!([]));
    assert_eq!(form, json!(["sum:sys.cpu.user{host=*}", "max:5m-avg-zero:sys.mem.free", "10"]));
    // Auto-refresh (every 10 s here) picks up a series written after the page loaded.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    d.put_lines(&format!("put sys.cpu.user {now} 7 host=web03\n"));
    let labels = wait_for_series(&browser, 4);
    assert_eq!(labels[2], "sys.cpu.user{host=web03}");
    // The form reads back every m= it can write.
    let m = "zimsum:rate{counter,1000,0}:1m-sum-nan:sys.cpu.user{host=web01|web02}{dc=wildcard(l*)}";
    assert_eq!(browser.execute("return buildM(parseM(arguments[0]))", json!([m])), json!(m));

    // An old /q link without an output flag lands in the UI with its query.
    browser.goto(&format!("http://{}/q?start=1h-ago&m=sum:sys.cpu.user", d.addr()));
    let labels = wait_for_series(&browser, 1);
    assert_eq!(labels, vec!["sys.cpu.user{} (over host)".to_string()]);

    // API errors are shown as OpenTSDB words them.
    let name = browser.find("#metrics .metric-name");
    browser.clear(&name);
    browser.type_text(&name, "no.such.metric");
    browser.click(&browser.find("#run"));
    let error = browser.wait_for("the error", || {
        let e = browser.find("#error");
        Some(browser.text(&e)).filter(|t| !t.is_empty())
    });
    assert!(error.starts_with("Error 400: No such name for 'metrics': 'no.such.metric'"), "{error}");
    screenshot(&browser, "error");

    // Status: rtsd's own counters.
    browser.click(&browser.find("#tab-status"));
    let status = browser.wait_for("the status table", || {
        let v: Value = browser.execute(
            "return Object.fromEntries([...document.querySelectorAll('#status td')].map(td => [td.dataset.name, td.textContent]))",
            json!([]),
        );
        Some(v).filter(|v| v.get("Series").is_some())
    });
    assert_eq!(status["Series"], "4", "{status}");
    assert_eq!(status["UIDs: metrics"], "2", "{status}");
    assert_eq!(status["UIDs: tagk"], "1", "{status}");
    assert_eq!(status["UIDs: tagv"], "3", "{status}");
    assert_eq!(status["Points written since start"], "34", "{status}");
    assert!(status["Disk use"].as_str().unwrap().ends_with("iB"), "{status}");
    // The ingest rate needs two readings (one every 5 s); nothing is being written now.
    let rate = browser.wait_for("an ingest rate", || {
        let v = browser
            .execute("return document.querySelector('#status td[data-name=\"Ingest rate\"]').textContent", json!([]));
        v.as_str().filter(|t| t.ends_with("points/s")).map(str::to_string)
    });
    assert_eq!(rate, "0.0 points/s");
    screenshot(&browser, "status");
}
