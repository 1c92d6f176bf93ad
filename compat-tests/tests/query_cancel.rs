//! A query whose client goes away stops reading (issue 3 item 5: "cancellation when the client disconnects").
//!
//! Its own test binary: it sets `RTSD_TEST_ROW_DELAY_MS` (a failpoint of debug builds: each row a query reads
//! takes that long), which every daemon started from this process inherits.
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use rtsd_compat_tests::Daemon;

fn cancelled_count(d: &Daemon) -> String {
    let metrics = d.http("GET", "/metrics", &[], b"").text();
    let line = metrics.lines().find(|l| l.starts_with("rtsd_queries_cancelled_total "));
    line.unwrap_or_else(|| panic!("no rtsd_queries_cancelled_total in {metrics}")).to_string()
}

#[test]
fn a_query_stops_when_its_client_closes_the_connection() {
    std::env::set_var("RTSD_TEST_ROW_DELAY_MS", "200");
    let d = Daemon::start();
    // 40 series of one hour: 40 rows, 8 s of reading with the failpoint.
    let lines: String = (0..40).map(|h| format!("put slow.metric 1700000000 {h} host=h{h}\n")).collect();
    d.put_lines(&lines);
    d.put_lines("put quick.metric 1700000000 7 host=a\n");
    assert_eq!(cancelled_count(&d), "rtsd_queries_cancelled_total 0");

    let mut client = TcpStream::connect(d.addr()).unwrap();
    client
        .write_all(b"GET /api/query?start=1700000000&end=1700003600&m=sum:slow.metric HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Let the request reach the handler, then go away without reading the answer.
    std::thread::sleep(Duration::from_millis(300));
    client.shutdown(Shutdown::Both).unwrap();
    drop(client);

    // The query notices at its next row; counted once. (Waiting, not timing: the bound is far above 8 s.)
    let mut seen = cancelled_count(&d);
    for _ in 0..300 {
        if seen != "rtsd_queries_cancelled_total 0" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        seen = cancelled_count(&d);
    }
    assert_eq!(seen, "rtsd_queries_cancelled_total 1");

    // The daemon goes on answering; a query whose client waits is not cancelled.
    let r = d.http("GET", "/api/query?start=1700000000&end=1700003600&m=sum:quick.metric", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        r#"[{"metric":"quick.metric","tags":{"host":"a"},"aggregateTags":[],"dps":{"1700000000":7}}]"#
    );
    assert_eq!(cancelled_count(&d), "rtsd_queries_cancelled_total 1");
}
