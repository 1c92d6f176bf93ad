//! Real OpenTSDB clients against the real daemon: the Python clients from PyPI (in the venv made by
//! `scripts/install-test-deps`), collectd's write_tsdb from Debian, and tcollector's wire behaviour replayed byte
//! for byte from clients.md (tcollector is on no registry these machines reach).
//!
//! Each test starts its own daemon and puts a recording [`Proxy`] in front of it. The real client talks to the
//! proxy; the test then asserts what the client sent (so each test provably exercises the clients.md behaviour
//! it names: gzip, trailing slashes, probe connections, `\r\n` with two blanks, ...) and the exact points rtsd
//! stored (`scan`). Telnet clients never get an acknowledgement, so their points are awaited with `scan_until`.
//! A missing venv or collectd fails the test with instructions; nothing here passes silently.
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtsd_compat_tests::{
    collectd_binary, gunzip, normalize, run_python_client, Daemon, Proxy, RecordedRequest, COLLECTD_PLUGIN_DIR,
    COLLECTD_TYPES_DB,
};
use serde_json::json;

const T: i64 = 1_700_000_000;
const SCAN_START: &str = "1699990000";
const SCAN_END: &str = "1700100000";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(15);

fn scan(d: &Daemon, metric: &str) -> Vec<String> {
    d.scan(&[SCAN_START, SCAN_END, "sum", metric])
}

fn scan_until(d: &Daemon, metric: &str, expected: &[String]) -> Vec<String> {
    d.scan_until(&[SCAN_START, SCAN_END, "sum", metric], expected, ARRIVAL_TIMEOUT)
}

/// The driver's report: the last line of its stdout, as JSON.
fn report(text: &str) -> serde_json::Value {
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {text:?}"))
}

fn run_driver(script: &str, proxy: &Proxy, extra: &[&str]) -> serde_json::Value {
    let port = proxy.port().to_string();
    let ts = T.to_string();
    let mut args = vec!["127.0.0.1", port.as_str(), ts.as_str()];
    args.extend_from_slice(extra);
    report(&run_python_client(script, &args, CLIENT_TIMEOUT))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Request bodies as JSON (inflated when `Content-Encoding: gzip`).
fn body_json(r: &RecordedRequest) -> serde_json::Value {
    let body = if r.header("Content-Encoding") == Some("gzip") { gunzip(&r.body) } else { r.body.clone() };
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{} {}: body is not JSON ({e}): {:?}", r.method, r.target, text(&body)))
}

// spec: clients.md "potsdb 1.0.3": check_host probe connection (opens and closes without a byte), then one
// connection with one `put %s %d %s %s\n` per point; never reads; integral floats printed as ints; a repeated
// metric+timestamp+tags is dropped by the client.
#[test]
fn potsdb() {
    let d = Daemon::start();
    let proxy = Proxy::start(d.addr());
    let sent = run_driver("potsdb_driver.py", &proxy, &[]);
    let lines = [
        "put compat.potsdb.gauge 1700000000 42 run=r1 host=harness-potsdb\n",
        "put compat.potsdb.gauge 1700000010 43.25 run=r1 host=harness-potsdb\n",
        "put compat.potsdb.gauge 1700000020 7 run=r1 host=harness-potsdb\n",
        "put compat.potsdb.float 1700000000 0.001 run=r1 dc=eu-1 host=harness-potsdb\n",
        "put compat.potsdb.float 1700000010 -3.5 run=r1 dc=eu-1 host=harness-potsdb\n",
    ];
    let mut queued: Vec<serde_json::Value> = lines.iter().map(|l| json!(l)).collect();
    queued.push(serde_json::Value::Null);
    assert_eq!(sent, serde_json::Value::Array(queued));

    let gauge = normalize([
        "compat.potsdb.gauge 1700000000 42 run=r1 host=harness-potsdb",
        "compat.potsdb.gauge 1700000010 43.25 run=r1 host=harness-potsdb",
        "compat.potsdb.gauge 1700000020 7 run=r1 host=harness-potsdb",
    ]);
    assert_eq!(scan_until(&d, "compat.potsdb.gauge", &gauge), gauge);
    let float = normalize([
        "compat.potsdb.float 1700000000 0.001 run=r1 dc=eu-1 host=harness-potsdb",
        "compat.potsdb.float 1700000010 -3.5 run=r1 dc=eu-1 host=harness-potsdb",
    ]);
    assert_eq!(scan_until(&d, "compat.potsdb.float", &float), float);
    // On the wire: the empty probe first, then exactly the five lines on one connection.
    let conns: Vec<String> = proxy.connections().iter().map(|c| text(c)).collect();
    assert_eq!(conns, vec![String::new(), lines.concat()]);
}

fn opentsdb_py(mode: &str) {
    let d = Daemon::start();
    let proxy = Proxy::start(d.addr());
    let report = run_driver("opentsdb_py_driver.py", &proxy, &[mode]);
    // HTTP: successes are counted from the `?details=true` reply body, so 5 here means rtsd's JSON was read.
    // Telnet: a success is a returned sendall.
    assert_eq!(report["statuses"], json!({"success": 5, "failed": 0, "queued": 5}), "{report}");
    assert_eq!(report["alive"], true, "is_alive() ({mode})");
    let metric = format!("compat.opentsdb_py.{mode}");
    let tags = format!("host=harness-opentsdb-py variant={mode}");
    let expected = normalize([
        format!("{metric} 1700000000 42 {tags}"),
        format!("{metric} 1700000010 43.5 {tags}"),
        format!("{metric} 1700000020 -7 {tags}"),
        format!("{metric} 1700000030 12.5 {tags}"),
        format!("{metric} 1700000040 1.0E-5 {tags}"),
    ]);
    assert_eq!(scan_until(&d, &metric, &expected), expected);

    if mode == "telnet" {
        // Two probe connections without a byte (check_tsdb_alive, is_alive) and one with the puts.
        let mut conns: Vec<String> = proxy.connections().iter().map(|c| text(c)).collect();
        conns.sort();
        let puts: String = [
            ("1700000000", "42"),
            ("1700000010", "43.5"),
            ("1700000020", "-7"),
            ("1700000030", "12.5"),
            ("1700000040", "1e-05"),
        ]
        .iter()
        .map(|(ts, v)| format!("put {metric} {ts} {v} host=harness-opentsdb-py variant=telnet\n"))
        .collect();
        assert_eq!(conns, vec![String::new(), String::new(), puts]);
        return;
    }
    // HTTP: one kept-alive connection: GET /api/version (bodyless; with the session's Content-Encoding: gzip when
    // compressing), then POST /api/put?details=true batches without Content-Type.
    let conns = proxy.http_requests();
    assert_eq!(conns.len(), 1, "requests' session reuses one connection: {conns:#?}");
    let requests = &conns[0];
    let gzip = mode == "http_gzip";
    let version = &requests[0];
    assert_eq!((version.method.as_str(), version.target.as_str()), ("GET", "/api/version"));
    assert!(version.body.is_empty());
    assert_eq!(version.header("Content-Encoding"), gzip.then_some("gzip"));
    let mut points = Vec::new();
    for r in &requests[1..] {
        assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/api/put?details=true"));
        assert_eq!(r.header("Content-Type"), None, "opentsdb-py sends no Content-Type");
        assert_eq!(r.header("Content-Encoding"), gzip.then_some("gzip"));
        match body_json(r) {
            serde_json::Value::Array(batch) => points.extend(batch),
            other => panic!("batch is not an array: {other}"),
        }
    }
    let point = |ts: i64, value: serde_json::Value| json!({"metric": metric, "timestamp": ts, "value": value, "tags": {"host": "harness-opentsdb-py", "variant": mode}});
    assert_eq!(
        points,
        vec![
            point(1700000000, json!(42)),
            point(1700000010, json!(43.5)),
            point(1700000020, json!(-7)),
            // The string value is sent as a JSON string.
            point(1700000030, json!("12.5")),
            point(1700000040, json!(1e-05)),
        ]
    );
}

// spec: clients.md "opentsdb-py 0.6.0": telnet mode, one put per sendall, check_tsdb_alive probe connection.
#[test]
fn opentsdb_py_telnet() {
    opentsdb_py("telnet");
}

// spec: clients.md "opentsdb-py 0.6.0": HTTP (default), gzip body, no Content-Type, `?details=true` reply counted,
// keep-alive session, bodyless GET /api/version with Content-Encoding: gzip, "value": "12.5" as a string.
#[test]
fn opentsdb_py_http_gzip() {
    opentsdb_py("http_gzip");
}

// spec: clients.md "opentsdb-py 0.6.0" with http_compression=None.
#[test]
fn opentsdb_py_http_plain() {
    opentsdb_py("http_plain");
}

// spec: clients.md "pyopentsdb 0.2.1": every URL ends in `/` (POST /api/put/, GET /api/version/), bodies without
// Content-Type, array or single object; 204 → None, 400 → ArgumentError(error.message); `details=True` crashes.
#[test]
fn pyopentsdb() {
    let d = Daemon::start();
    let proxy = Proxy::start(d.addr());
    assert_eq!(
        run_driver("pyopentsdb_driver.py", &proxy, &[]),
        json!({
            "put_array": null,
            "put_object": null,
            "put_ms": null,
            "version": "2.4.1",
            "put_bad": "ArgumentError: One or more data points had errors",
            // Client bug recorded in clients.md: the flag is forwarded to requests and crashes the call.
            "put_details": "UncaughtError",
        })
    );
    let tags = "host=harness-pyopentsdb run=r1";
    let expected = normalize([
        format!("compat.pyopentsdb.gauge 1700000000 42 {tags}"),
        format!("compat.pyopentsdb.gauge 1700000010 43.5 {tags}"),
        format!("compat.pyopentsdb.gauge 1700000020 -7 {tags}"),
        format!("compat.pyopentsdb.gauge 1700000000250 1 {tags}"),
    ]);
    assert_eq!(scan(&d, "compat.pyopentsdb.gauge"), expected);

    let requests: Vec<RecordedRequest> = proxy.http_requests().into_iter().flatten().collect();
    let lines: Vec<String> = requests.iter().map(|r| format!("{} {}", r.method, r.target)).collect();
    assert_eq!(lines, ["POST /api/put/", "POST /api/put/", "POST /api/put/", "GET /api/version/", "POST /api/put/"]);
    for r in requests.iter().filter(|r| r.method == "POST") {
        assert_eq!(r.header("Content-Type"), None, "pyopentsdb sends no Content-Type");
    }
    assert!(body_json(&requests[0]).is_array(), "first put is an array");
    assert!(body_json(&requests[1]).is_object(), "second put is a single object");
}

// spec: clients.md "opentsdb-http-client 0.2.0": check_host GET /api/version; every point its own POST /api/put on
// a new connection, one JSON object, Content-Type: application/json, integral values as ints; 200/204 are success,
// anything else is retried forever.
#[test]
fn opentsdb_http_client() {
    let d = Daemon::start();
    let proxy = Proxy::start(d.addr());
    assert_eq!(run_driver("opentsdb_http_client_driver.py", &proxy, &[]), json!({"queued": 3}));
    let tags = "host=harness-http-client run=r1";
    assert_eq!(
        scan(&d, "compat.http_client.gauge"),
        normalize([
            format!("compat.http_client.gauge 1700000000 42 {tags}"),
            format!("compat.http_client.gauge 1700000010 43.5 {tags}"),
            format!("compat.http_client.gauge 1700000020 7 {tags}"),
        ])
    );
    assert_eq!(
        scan(&d, "compat.http_client.sync"),
        normalize([format!("compat.http_client.sync 1700000000 0.25 {tags}")])
    );

    let conns = proxy.http_requests();
    assert!(conns.iter().all(|c| c.len() == 1), "one request per connection: {conns:#?}");
    assert_eq!((conns[0][0].method.as_str(), conns[0][0].target.as_str()), ("GET", "/api/version"));
    let mut posted = Vec::new();
    for c in &conns[1..] {
        let r = &c[0];
        assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/api/put"));
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        let body = body_json(r);
        assert!(body.is_object(), "one JSON object per POST: {body}");
        posted.push((
            body["metric"].as_str().unwrap_or_default().to_string(),
            body["timestamp"].clone(),
            body["value"].clone(),
        ));
    }
    // The synchronous put may overtake the background thread's posts.
    posted.sort_by_key(|(m, ts, _)| (m.clone(), ts.as_i64()));
    assert_eq!(
        posted,
        vec![
            ("compat.http_client.gauge".to_string(), json!(1700000000), json!(42)),
            ("compat.http_client.gauge".to_string(), json!(1700000010), json!(43.5)),
            ("compat.http_client.gauge".to_string(), json!(1700000020), json!(7)),
            ("compat.http_client.sync".to_string(), json!(1700000000), json!(0.25)),
        ]
    );
}

// ---------------------------------------------------------------------------------------------------------------
// collectd write_tsdb

/// A collectd process with its own config, socket and log in a temporary directory; killed on drop.
struct Collectd {
    child: Child,
    dir: tempfile::TempDir,
}

impl Collectd {
    fn start(port: u16) -> Collectd {
        let bin = collectd_binary();
        let dir = tempfile::Builder::new().prefix("rtsd-collectd-").tempdir().unwrap();
        let d = dir.path().display();
        // Two nodes: the default config (no HostTags: two blanks before \r\n) and one with HostTags. write_tsdb
        // names its callbacks by host and port, so the second node reaches the same daemon as "localhost".
        let conf = format!(
            r#"Hostname "collectd-compat"
FQDNLookup false
BaseDir "{d}"
PIDFile "{d}/collectd.pid"
PluginDir "{COLLECTD_PLUGIN_DIR}"
TypesDB "{COLLECTD_TYPES_DB}"
Interval 1
AutoLoadPlugin false
LoadPlugin logfile
<Plugin logfile>
  LogLevel info
  File "{d}/collectd.log"
  Timestamp true
</Plugin>
LoadPlugin unixsock
<Plugin unixsock>
  SocketFile "{d}/collectd.sock"
  SocketGroup "root"
  SocketPerms "0600"
</Plugin>
<LoadPlugin write_tsdb>
  FlushInterval 1
</LoadPlugin>
<Plugin write_tsdb>
  <Node "default">
    Host "127.0.0.1"
    Port "{port}"
  </Node>
  <Node "hosttags">
    Host "localhost"
    Port "{port}"
    HostTags "run=r1 env=harness"
  </Node>
</Plugin>
"#
        );
        let conf_path = dir.path().join("collectd.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(bin)
            .arg("-f")
            .arg("-C")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start collectd");
        let c = Collectd { child, dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !c.socket().exists() {
            assert!(Instant::now() < deadline, "collectd's unixsock did not appear; log:\n{}", c.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("collectd.sock")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("collectd.log")).unwrap_or_default()
    }

    /// Sends `PUTVAL` commands over collectd's unixsock and checks each is dispatched.
    fn putval(&self, commands: &[&str]) {
        let stream = UnixStream::connect(self.socket()).expect("connect to collectd's unixsock");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        for cmd in commands {
            writer.write_all(format!("{cmd}\n").as_bytes()).unwrap();
            let mut reply = String::new();
            reader.read_line(&mut reply).unwrap();
            assert!(reply.starts_with("0 "), "collectd refused {cmd:?}: {reply:?}");
        }
    }

    /// SIGTERM and wait: write_tsdb flushes its buffers at shutdown.
    fn stop(mut self) -> String {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(self.child.try_wait(), Ok(None)) {
            assert!(Instant::now() < deadline, "collectd did not stop; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        self.log()
    }
}

impl Drop for Collectd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// spec: clients.md "collectd write_tsdb (Debian collectd-core 5.12.0)": `put <metric> <ts> <value> fqdn=<host>
// <meta tags> <HostTags>\r\n`, two blanks when those are empty, `%.15g` gauges (1e-05), integer derives, NaN
// gauges skipped, out-of-order points, one long-lived connection per node that never reads.
#[test]
fn collectd_write_tsdb() {
    let d = Daemon::start();
    let proxy = Proxy::start(d.addr());
    let collectd = Collectd::start(proxy.port());
    collectd.putval(&[
        r#"PUTVAL "collectd-compat/compat-a/gauge-temp" 1700000000:42.5"#,
        r#"PUTVAL "collectd-compat/compat-a/gauge-temp" 1700000020:1e-05"#,
        // Older than the previous value: collectd's cache complains ("Value too old") but write_tsdb still sends it.
        r#"PUTVAL "collectd-compat/compat-a/gauge-temp" 1700000010:-1.25"#,
        r#"PUTVAL "collectd-compat/compat-a/derive-bytes" 1700000000:123456789"#,
        r#"PUTVAL "collectd-compat/compat-a/gauge-missing" 1700000000:U"#,
        r#"PUTVAL "collectd-compat/compat/if_octets-eth0" 1700000000:100:200"#,
    ]);
    let expect = |metric: &str, points: &[(&str, &str)]| {
        let mut lines = Vec::new();
        for (ts, v) in points {
            lines.push(format!("{metric} {ts} {v} fqdn=collectd-compat"));
            lines.push(format!("{metric} {ts} {v} fqdn=collectd-compat run=r1 env=harness"));
        }
        normalize(lines)
    };
    let temp =
        expect("compat.a.gauge.temp", &[("1700000000", "42.5"), ("1700000020", "1.0E-5"), ("1700000010", "-1.25")]);
    let bytes = expect("compat.a.derive.bytes", &[("1700000000", "123456789")]);
    let rx = expect("compat.if_octets.eth0.rx", &[("1700000000", "100")]);
    let tx = expect("compat.if_octets.eth0.tx", &[("1700000000", "200")]);
    // FlushInterval 1: the points arrive while collectd keeps running and its connections stay open.
    assert_eq!(scan_until(&d, "compat.a.gauge.temp", &temp), temp, "collectd log:\n{}", collectd.log());
    assert_eq!(scan_until(&d, "compat.a.derive.bytes", &bytes), bytes);
    assert_eq!(scan_until(&d, "compat.if_octets.eth0.rx", &rx), rx);
    assert_eq!(scan_until(&d, "compat.if_octets.eth0.tx", &tx), tx);
    // The NaN gauge is never sent.
    assert!(d.try_scan(&[SCAN_START, SCAN_END, "sum", "compat.a.gauge.missing"]).is_err());

    // More values on the same long-lived connections, then shutdown (which flushes).
    collectd.putval(&[r#"PUTVAL "collectd-compat/compat-a/gauge-temp" 1700000030:0.001"#]);
    let log = collectd.stop();
    let mut temp2 = temp.clone();
    temp2.extend(expect("compat.a.gauge.temp", &[("1700000030", "0.001")]));
    let temp2 = normalize(temp2);
    assert_eq!(scan_until(&d, "compat.a.gauge.temp", &temp2), temp2, "collectd log:\n{log}");
    // No write_tsdb failure (send failed, Connecting ... failed, errors) in collectd's log.
    for line in log.lines().filter(|l| l.contains("write_tsdb")) {
        let l = line.to_ascii_lowercase();
        assert!(!l.contains("fail") && !l.contains("error"), "collectd logged {line:?}; log:\n{log}");
    }

    // On the wire: one connection per node, `\r\n` endings, two blanks after `fqdn=...` (nothing or HostTags
    // follow), `%.15g` gauges, integer derives.
    let conns: Vec<String> = proxy.connections().iter().map(|c| text(c)).collect();
    assert_eq!(conns.len(), 2, "one connection per <Node>: {conns:#?}");
    let wire_points = [
        "compat.a.gauge.temp 1700000000 42.5",
        "compat.a.gauge.temp 1700000020 1e-05",
        "compat.a.gauge.temp 1700000010 -1.25",
        "compat.a.derive.bytes 1700000000 123456789",
        "compat.if_octets.eth0.rx 1700000000 100",
        "compat.if_octets.eth0.tx 1700000000 200",
        "compat.a.gauge.temp 1700000030 0.001",
    ];
    for (suffix, conn) in [
        ("", conns.iter().find(|c| !c.contains("env=harness"))),
        ("run=r1 env=harness", conns.iter().find(|c| c.contains("env=harness"))),
    ] {
        let conn = conn.unwrap_or_else(|| panic!("no connection with {suffix:?}: {conns:#?}"));
        assert!(conn.ends_with("\r\n"), "{conn:?}");
        let mut got: Vec<&str> = conn.split_inclusive("\r\n").collect();
        let mut want: Vec<String> =
            wire_points.iter().map(|p| format!("put {p} fqdn=collectd-compat  {suffix}\r\n")).collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// tcollector (replayed)

/// tcollector's `verify_conn`: `version\n`, then one `recv(4096)` with a 15 s timeout that must be non-empty.
fn tcollector_verify_conn(sock: &mut std::net::TcpStream) -> Vec<u8> {
    sock.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    sock.write_all(b"version\n").unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.read(&mut buf).expect("tcollector would blacklist this host: no reply to `version` within 15 s");
    assert!(n > 0, "tcollector would blacklist this host: empty reply to `version`");
    buf[..n].to_vec()
}

// spec: clients.md "tcollector ... Telnet mode": version handshake, then one sendall of `put <line> <global tags>\n`
// lines (self-stats with two blanks), never reading put replies (drained by the next `version`).
#[test]
fn tcollector_telnet_replay() {
    let d = Daemon::start();
    let mut sock = d.telnet();
    let reply = tcollector_verify_conn(&mut sock);
    assert!(reply.starts_with(b"net.opentsdb.tools "), "{:?}", String::from_utf8_lossy(&reply));
    // Read the rest of the two-line reply so the next recv starts clean (tcollector itself just drains it later).
    let mut reply = reply;
    while reply.iter().filter(|&&b| b == b'\n').count() < 2 {
        let mut buf = [0u8; 4096];
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0);
        reply.extend_from_slice(&buf[..n]);
    }
    assert_eq!(reply.iter().filter(|&&b| b == b'\n').count(), 2, "{:?}", String::from_utf8_lossy(&reply));

    let batch = concat!(
        "put tcollector.reader.lines_collected 1700000000 6  host=harness-tcollector run=r1\n",
        "put tcollector.collector.lines_sent 1700000000 6 collector=harness_lines.sh host=harness-tcollector run=r1\n",
        "put harness.tcollector.telnet.gauge 1700000000 42 iface=eth0 host=harness-tcollector run=r1\n",
        "put harness.tcollector.telnet.gauge 1700000020 -3.25e2 iface=eth0 host=harness-tcollector run=r1\n",
        "put harness.tcollector.telnet.ms 1700000000123 7 host=harness-tcollector run=r1\n",
    );
    sock.write_all(batch.as_bytes()).unwrap();
    // The re-verify before a later send: its reply covers the batch (nothing but the version lines came back).
    let reply = tcollector_verify_conn(&mut sock);
    assert!(
        reply.starts_with(b"net.opentsdb.tools "),
        "unexpected reply after the batch: {:?}",
        String::from_utf8_lossy(&reply)
    );

    assert_eq!(
        scan(&d, "tcollector.reader.lines_collected"),
        normalize(["tcollector.reader.lines_collected 1700000000 6 host=harness-tcollector run=r1"])
    );
    assert_eq!(
        scan(&d, "tcollector.collector.lines_sent"),
        normalize([
            "tcollector.collector.lines_sent 1700000000 6 collector=harness_lines.sh host=harness-tcollector run=r1"
        ])
    );
    assert_eq!(
        scan(&d, "harness.tcollector.telnet.gauge"),
        normalize([
            "harness.tcollector.telnet.gauge 1700000000 42 iface=eth0 host=harness-tcollector run=r1",
            "harness.tcollector.telnet.gauge 1700000020 -325.0 iface=eth0 host=harness-tcollector run=r1",
        ])
    );
    assert_eq!(
        scan(&d, "harness.tcollector.telnet.ms"),
        normalize(["harness.tcollector.telnet.ms 1700000000123 7 host=harness-tcollector run=r1"])
    );
}

// spec: clients.md "tcollector ... HTTP mode (--http)": Python urllib, `Connection: close`, float values, int
// timestamps (s and ms); any 2xx is success.
#[test]
fn tcollector_http_replay() {
    let d = Daemon::start();
    let body = r#"[{"metric": "harness.tcollector.http.gauge", "timestamp": 1700000000, "value": 42.0, "tags": {"host": "harness-tcollector", "run": "r1", "iface": "eth0"}}, {"metric": "harness.tcollector.http.gauge", "timestamp": 1700000020, "value": -325.0, "tags": {"host": "harness-tcollector", "run": "r1", "iface": "eth0"}}, {"metric": "harness.tcollector.http.ms", "timestamp": 1700000000123, "value": 7.0, "tags": {"host": "harness-tcollector", "run": "r1"}}]"#;
    let mut conn = d.http_conn();
    conn.send_raw(
        format!(
            "POST /api/put HTTP/1.1\r\nAccept-Encoding: identity\r\nContent-Length: {}\r\nHost: {}\r\nUser-Agent: Python-urllib/3.11\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{body}",
            body.len(),
            d.addr()
        )
        .as_bytes(),
    );
    let r = conn.read_response("POST");
    assert!((200..300).contains(&r.status), "tcollector needs a 2xx, got {} {:?}", r.status, r.text());
    assert_eq!(r.status, 204);
    assert!(conn.is_closed(), "`Connection: close` must close the connection after the reply");
    assert_eq!(
        scan(&d, "harness.tcollector.http.gauge"),
        normalize([
            "harness.tcollector.http.gauge 1700000000 42.0 host=harness-tcollector run=r1 iface=eth0",
            "harness.tcollector.http.gauge 1700000020 -325.0 host=harness-tcollector run=r1 iface=eth0",
        ])
    );
    assert_eq!(
        scan(&d, "harness.tcollector.http.ms"),
        normalize(["harness.tcollector.http.ms 1700000000123 7.0 host=harness-tcollector run=r1"])
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
