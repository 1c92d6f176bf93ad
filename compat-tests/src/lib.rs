//! Harness for rtsd's compatibility tests: runs the real daemon binary and talks to it the way OpenTSDB clients
//! do, over loopback.
//!
//! * [`Daemon`] spawns `rtsd-compat serve` on 127.0.0.1 with an OS-chosen port and a fresh data directory, waits
//!   for its `rtsd ready` log line, and keeps draining its stderr so the pipe never blocks. Dropping it kills the
//!   process and removes the directory.
//! * Telnet helpers: [`Daemon::telnet`], [`barrier`] (the `version` round trip after which every earlier put is
//!   in the write-ahead log), [`read_line`], [`expect_closed`].
//! * A small HTTP/1.1 client with no dependencies ([`HttpConn`], [`Daemon::http`]) that writes exactly the bytes
//!   the test asks for and parses the reply, so tests can assert status, headers and body bytes.
//! * [`Daemon::scan`]: the stored points via `rtsd-compat scan --import`, normalised (tags sorted within a line,
//!   lines sorted) so assertions can be exact; [`normalize`] applies the same shape to expected lines.
//! * [`Proxy`]: a recording loopback proxy, so client tests can assert what a real client sent
//!   ([`Proxy::connections`], [`Proxy::http_requests`]).
//! * [`webdriver::Browser`]: headless Chromium through chromedriver, for the web UI's tests.
//! * [`venv_python`] / [`collectd_binary`]: the external clients installed by `scripts/install-test-deps`; missing
//!   ones fail the test with instructions.
pub mod chukwa_agent;
pub mod differential;
pub mod engine;
pub mod testbed;
pub mod webdriver;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for the daemon to say it is ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Read timeout on every socket the harness opens: a reply that never comes fails the test instead of hanging it.
/// Generous, since it bounds a hang and times nothing: with both test lanes of scripts/test and builds beside them
/// (load 15-19 on 2 cores), a query against a full disk took over 10 s to answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The daemon binary under test: `$RTSD_COMPAT_BIN` if set, else the `rtsd-compat` that Cargo built next to the
/// running test executable (`target/<profile>/deps/<test>-<hash>` → `target/<profile>/rtsd-compat`). Cargo only
/// tells integration tests the path at compile time (`env!("CARGO_BIN_EXE_rtsd-compat")`, which this library
/// cannot see), so each test file checks that this function finds that very file.
pub fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("RTSD_COMPAT_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current test executable");
    let mut dir = exe.parent().expect("test executable directory").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join(format!("rtsd-compat{}", std::env::consts::EXE_SUFFIX))
}

/// A running rtsd with its own data directory.
pub struct Daemon {
    child: Option<Child>,
    dir: Option<tempfile::TempDir>,
    addr: SocketAddr,
    settings: Vec<(String, String)>,
    log: Arc<Mutex<Vec<String>>>,
    /// The open-file limit the daemon runs under, when a test lowers it (kept across restarts).
    nofile: Option<u64>,
    /// The HBase tables the daemon runs on when the suite runs on HBase (kept across restarts; see [`engine`]).
    tables: Option<engine::TableSet>,
}

impl Daemon {
    /// Starts a daemon with the shipped configuration (auto_create_metrics=true).
    pub fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// Starts a daemon with extra properties, as `--set key=value`.
    pub fn start_with(settings: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::Builder::new().prefix("rtsd-compat-").tempdir().expect("create a temporary data directory");
        Daemon::spawn_on_engine(dir, settings, None)
    }

    /// Starts a daemon whose data directory is a new directory inside `parent` (a small file system a test
    /// mounted), under an open-file limit of `nofile` when given (soft and hard, set with `prlimit`).
    pub fn start_in(parent: &Path, nofile: Option<u64>, settings: &[(&str, &str)]) -> Daemon {
        let dir =
            tempfile::Builder::new().prefix("rtsd-compat-").tempdir_in(parent).expect("create the data directory");
        Daemon::spawn_on_engine(dir, settings, nofile)
    }

    /// A new daemon on the suite's engine ([`engine::engine`]): on HBase, with a table set of its own whose
    /// properties come before the test's (so a test's own `rtsd.storage.*` wins).
    fn spawn_on_engine(dir: tempfile::TempDir, settings: &[(&str, &str)], nofile: Option<u64>) -> Daemon {
        let settings: Vec<(String, String)> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        match engine::engine() {
            engine::Engine::RocksDb => Daemon::spawn(dir, settings, nofile, None),
            engine::Engine::HBase => {
                let tables = engine::TableSet::lease(&settings);
                let all = tables.settings().into_iter().chain(settings).collect();
                Daemon::spawn(dir, all, nofile, Some(tables))
            }
        }
    }

    fn spawn(
        dir: tempfile::TempDir,
        settings: Vec<(String, String)>,
        nofile: Option<u64>,
        tables: Option<engine::TableSet>,
    ) -> Daemon {
        let mut cmd = match nofile {
            // prlimit sets the limit and execs the daemon: the child's PID is the daemon's.
            Some(n) => {
                let mut cmd = Command::new("prlimit");
                cmd.arg(format!("--nofile={n}:{n}")).arg("--").arg(binary());
                cmd
            }
            None => Command::new(binary()),
        };
        cmd.arg("serve").arg("--data-dir").arg(dir.path()).args(["--port", "0", "--bind", "127.0.0.1"]);
        for (k, v) in &settings {
            cmd.arg("--set").arg(format!("{k}={v}"));
        }
        // Plain log lines: no colour codes between `addr` and its value.
        cmd.env("NO_COLOR", "1");
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", binary().display()));
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = mpsc::channel::<Option<SocketAddr>>();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut ready_tx = Some(ready_tx);
                let mut reader = BufReader::new(stderr);
                let mut raw = Vec::new();
                loop {
                    raw.clear();
                    match reader.read_until(b'\n', &mut raw) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let line = strip_ansi(&String::from_utf8_lossy(&raw)).trim_end().to_string();
                    if ready_tx.is_some() && line.contains("rtsd ready") {
                        if let Some(addr) = parse_addr(&line) {
                            let _ = ready_tx.take().map(|tx| tx.send(Some(addr)));
                        }
                    }
                    if std::env::var_os("RTSD_COMPAT_ECHO").is_some() {
                        eprintln!("[rtsd] {line}");
                    }
                    log.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
                if let Some(tx) = ready_tx {
                    let _ = tx.send(None);
                }
            });
        }
        let mut daemon = Daemon {
            child: Some(child),
            dir: Some(dir),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            settings,
            log,
            nofile,
            tables,
        };
        match ready_rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(addr)) => daemon.addr = addr,
            Ok(None) => {
                let status = daemon.child.as_mut().and_then(|c| c.wait().ok());
                panic!("rtsd exited before it was ready ({status:?}); its log:\n{}", daemon.log_text());
            }
            Err(_) => panic!("rtsd was not ready within {START_TIMEOUT:?}; its log:\n{}", daemon.log_text()),
        }
        daemon
    }

    /// A second node on this daemon's HBase tables, with a data directory of its own and `settings` (given
    /// alone: the first node's are not copied), as the nodes of a fleet share one cluster. Only when the suite
    /// runs on HBase ([`engine::skip_on_rocksdb`]). Drop it before `self`, whose lease keeps the tables.
    pub fn start_beside(&self, settings: &[(&str, &str)]) -> Daemon {
        let tables = self.tables.as_ref().expect("start_beside: a second node shares a store only on HBase");
        let dir = tempfile::Builder::new().prefix("rtsd-compat-").tempdir().expect("create a temporary data directory");
        let given = settings.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Daemon::spawn(dir, tables.settings().into_iter().chain(given).collect(), None, None)
    }

    /// Stops this daemon (SIGTERM if it still runs) and starts a new one on the same data directory and settings.
    pub fn restart(mut self) -> Daemon {
        if self.is_running() {
            let status = self.terminate();
            assert!(status.success(), "rtsd did not stop cleanly on SIGTERM ({status}); its log:\n{}", self.log_text());
        }
        let dir = self.dir.take().expect("data directory");
        let settings = std::mem::take(&mut self.settings);
        Daemon::spawn(dir, settings, self.nofile, self.tables.take())
    }

    /// [`Daemon::restart`] with other settings (e.g. a feature turned on for a directory written without it).
    pub fn restart_with(mut self, settings: &[(&str, &str)]) -> Daemon {
        let given = settings.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        self.settings = self.tables.iter().flat_map(|t| t.settings()).chain(given).collect();
        self.restart()
    }

    /// The address the daemon listens on (127.0.0.1 and the port it reported).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.as_ref().expect("data directory").path()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon process").id()
    }

    /// Everything the daemon logged so far, one line per entry.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn log_text(&self) -> String {
        self.log_lines().join("\n")
    }

    /// Whether the process is still alive.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// A telnet-style connection (plain TCP) with read and write timeouts.
    pub fn telnet(&self) -> TcpStream {
        connect(self.addr)
    }

    /// A fresh HTTP connection.
    pub fn http_conn(&self) -> HttpConn {
        HttpConn::new(self.addr)
    }

    /// One request on a new connection. `Host` and `Content-Length` are added unless `headers` has them (or
    /// `Transfer-Encoding`).
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        self.http_conn().request(method, path, headers, body)
    }

    /// `POST path` with a JSON body and no Content-Type, as opentsdb-py and pyopentsdb send it.
    pub fn post(&self, path: &str, body: &str) -> Response {
        self.http("POST", path, &[], body.as_bytes())
    }

    /// `POST path` with `Content-Type: application/json`, as the query spec's vectors (§8) are sent.
    pub fn post_json(&self, path: &str, body: &str) -> Response {
        self.http("POST", path, &[("Content-Type", "application/json")], body.as_bytes())
    }

    /// Writes a data set as telnet `put` lines on one connection and waits for the [`barrier`];
    /// panics if any line got an error reply. Once it returns, every point is visible to queries.
    pub fn put_lines(&self, lines: &str) {
        let mut stream = self.telnet();
        stream.write_all(lines.as_bytes()).expect("send put lines");
        let errors = barrier(&mut stream);
        assert!(errors.is_empty(), "put errors: {errors:?}\nfor lines:\n{lines}");
    }

    /// SIGKILL: the daemon gets no chance to flush anything.
    pub fn kill9(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM (graceful shutdown) through `kill -TERM <pid>`, then waits up to 30 s for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("daemon process");
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        let ok = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().map(|s| s.success());
        assert!(matches!(ok, Ok(true)), "kill -TERM {} failed: {ok:?}", child.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("rtsd did not exit within 30 s of SIGTERM; its log:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `rtsd-compat scan --data-dir DIR --import ARGS...`, with this daemon's settings; returns the normalised lines
    /// (see [`normalize`]) or the command's error output.
    pub fn try_scan(&self, args: &[&str]) -> Result<Vec<String>, String> {
        let mut cmd = Command::new(binary());
        cmd.arg("scan").arg("--data-dir").arg(self.data_dir());
        for (k, v) in &self.settings {
            cmd.arg("--set").arg(format!("{k}={v}"));
        }
        cmd.arg("--import").args(args).env("NO_COLOR", "1").env("RUST_LOG", "warn").stdin(Stdio::null());
        let out = cmd.output().map_err(|e| format!("cannot run scan: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "scan {args:?} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr),
                stdout
            ));
        }
        Ok(normalize(stdout.lines()))
    }

    /// Like [`Daemon::try_scan`], panicking (with the daemon's log) when the scan fails.
    pub fn scan(&self, args: &[&str]) -> Vec<String> {
        self.try_scan(args).unwrap_or_else(|e| panic!("{e}\nrtsd log:\n{}", self.log_text()))
    }

    /// Scans until the output equals `expected` (normalised) or `timeout` passes; returns the last output, for
    /// the caller's `assert_eq!`. For clients that give no acknowledgement (fire-and-forget telnet clients).
    pub fn scan_until(&self, args: &[&str], expected: &[String], timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.try_scan(args).unwrap_or_else(|e| vec![format!("<{e}>")]);
            if got == expected || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() && std::env::var_os("RTSD_COMPAT_KEEP").is_some() {
            if let Some(dir) = self.dir.take() {
                eprintln!("keeping data directory {}", dir.keep().display());
            }
        }
    }
}

/// Sorts the tags within each line (words 4..) and then the lines, trimming trailing blanks. Both scan output and
/// expected lines go through this, so they compare exactly whatever the daemon's HashMap order.
pub fn normalize<I, S>(lines: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out: Vec<String> = lines
        .into_iter()
        .map(|l| l.as_ref().trim_end().to_string())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            if words.len() <= 3 {
                return l;
            }
            let mut tags = words[3..].to_vec();
            tags.sort_unstable();
            let mut line = words[..3].join(" ");
            for t in tags {
                line.push(' ');
                line.push_str(t);
            }
            line
        })
        .collect();
    out.sort();
    out
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The `addr=IP:PORT` field of the ready line.
fn parse_addr(line: &str) -> Option<SocketAddr> {
    let start = line.find("addr=")? + "addr=".len();
    let rest = &line[start..];
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    rest[..end].trim_matches('"').parse().ok()
}

/// A TCP connection to `addr` with the harness's timeouts.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set read timeout");
    stream.set_write_timeout(Some(IO_TIMEOUT)).expect("set write timeout");
    stream
}

// ---------------------------------------------------------------------------------------------------------------
// Telnet helpers

/// Reads one line (through `\n`, kept) byte by byte, so nothing after it is consumed. Panics on timeout or EOF
/// before a full line.
pub fn read_line(stream: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => panic!("connection closed after {:?} (expected a full line)", String::from_utf8_lossy(&line)),
            Ok(_) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    return String::from_utf8_lossy(&line).into_owned();
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("reading a line failed after {:?}: {e}", String::from_utf8_lossy(&line)),
        }
    }
}

/// Sends `version\n` and reads its two-line reply. Once it returns, every `put` sent earlier on this connection
/// is in RocksDB's write-ahead log (rtsd's durability contract). Returns the lines that arrived before the
/// version reply (error replies to earlier commands), each with its `\n`.
pub fn barrier(stream: &mut TcpStream) -> Vec<String> {
    stream.write_all(b"version\n").expect("send version");
    let mut before = Vec::new();
    loop {
        let line = read_line(stream);
        if line.starts_with("net.opentsdb.tools ") {
            let built = read_line(stream);
            assert!(built.starts_with("Built on "), "second line of the version reply: {built:?}");
            return before;
        }
        before.push(line);
    }
}

/// Sends `text` (lines of commands) and returns what the daemon wrote back before the `version` reply that
/// follows them: the exact reply bytes to those commands.
pub fn replies_to(stream: &mut TcpStream, text: &str) -> String {
    stream.write_all(text.as_bytes()).expect("send lines");
    barrier(stream).concat()
}

/// Asserts the peer closes the connection without sending anything more (EOF or reset within the timeout).
pub fn expect_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 256];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("expected the connection to close, got {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => {}
        Err(e) => panic!("expected the connection to close, got {e}"),
    }
}

/// Reads whatever arrives within `wait` (for asserting that nothing is sent).
pub fn read_available(stream: &mut TcpStream, wait: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(wait)).expect("set read timeout");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set read timeout");
    out
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names as sent (case preserved), in order.
    pub headers: Vec<(String, String)>,
    /// The body after de-chunking (never decompressed).
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?} (status {})", self.text(), self.status))
    }
}

/// One HTTP/1.1 connection; several requests may be sent on it (keep-alive).
pub struct HttpConn {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
}

impl HttpConn {
    pub fn new(addr: SocketAddr) -> HttpConn {
        HttpConn { addr, reader: BufReader::new(connect(addr)) }
    }

    pub fn stream(&mut self) -> &mut TcpStream {
        self.reader.get_mut()
    }

    /// Writes raw bytes (hand-made requests, chunked framing).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("send request bytes");
    }

    /// Sends a request and reads its response. Adds `Host` and `Content-Length` unless given (a
    /// `Transfer-Encoding` header suppresses Content-Length; then `body` must already be framed).
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !has("Host") {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !has("Content-Length")
            && !has("Transfer-Encoding")
            && (!body.is_empty() || method == "POST" || method == "PUT")
        {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.send_raw(&bytes);
        self.read_response(method)
    }

    /// Reads one response. Bodies are framed by Content-Length, chunked encoding, or the end of the connection.
    pub fn read_response(&mut self, method: &str) -> Response {
        let status_line = self.read_head_line();
        assert!(!status_line.is_empty(), "connection closed before a response arrived");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        assert!(version.starts_with("HTTP/1."), "bad status line {status_line:?}");
        let status: u16 =
            parts.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = self.read_head_line();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap_or_else(|| panic!("bad header line {line:?}"));
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        let mut response = Response { status, headers, body: Vec::new() };
        if method == "HEAD" || status == 204 || status == 304 || (100..200).contains(&status) {
            return response;
        }
        if response.header("Transfer-Encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let size_line = self.read_head_line();
                let size_hex = size_line.split(';').next().unwrap_or_default().trim();
                let size =
                    usize::from_str_radix(size_hex, 16).unwrap_or_else(|_| panic!("bad chunk size {size_line:?}"));
                if size == 0 {
                    while !self.read_head_line().is_empty() {}
                    break;
                }
                let mut chunk = vec![0u8; size];
                self.reader.read_exact(&mut chunk).expect("read chunk");
                response.body.extend_from_slice(&chunk);
                let crlf = self.read_head_line();
                assert!(crlf.is_empty(), "chunk not followed by CRLF: {crlf:?}");
            }
        } else if let Some(len) = response.header("Content-Length") {
            let len: usize = len.parse().unwrap_or_else(|_| panic!("bad Content-Length {len:?}"));
            response.body.resize(len, 0);
            self.reader.read_exact(&mut response.body).expect("read body");
        } else {
            self.reader.read_to_end(&mut response.body).expect("read body to end of connection");
        }
        response
    }

    fn read_head_line(&mut self) -> String {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).expect("read response head");
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        String::from_utf8_lossy(&line).into_owned()
    }

    /// Whether the server has closed this connection (EOF or reset) within the read timeout.
    pub fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        match self.reader.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted),
        }
    }

    pub fn close(mut self) {
        let _ = self.reader.get_mut().shutdown(Shutdown::Both);
    }
}

/// `body` with the error envelope's optional `,"trace":"..."` member cut out (query spec §0.4: 2.4
/// adds a Java stack trace by default, a compatible server may emit any string or none), so the rest
/// can be compared byte for byte.
pub fn strip_trace(body: &str) -> String {
    const KEY: &str = ",\"trace\":\"";
    let Some(start) = body.find(KEY) else {
        return body.to_string();
    };
    let mut escaped = false;
    for (i, c) in body[start + KEY.len()..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => {
                let end = start + KEY.len() + i + 1;
                return format!("{}{}", &body[..start], &body[end..]);
            }
            _ => {}
        }
    }
    body.to_string()
}

/// Gzip of `data` (what opentsdb-py sends with `Content-Encoding: gzip`).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

// ---------------------------------------------------------------------------------------------------------------
// Recording proxy

/// The client-to-server bytes of each proxied connection, in accept order.
type Recordings = Arc<Mutex<Vec<Arc<Mutex<Vec<u8>>>>>>;

/// A loopback TCP proxy in front of the daemon that records what clients send, connection by connection. Client
/// tests point the real client at the proxy and then assert both what the client sent (the clients.md captures)
/// and what rtsd stored. Half-closes are passed through; dropping the proxy stops accepting.
pub struct Proxy {
    addr: SocketAddr,
    conns: Recordings,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let conns: Recordings = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let conns = conns.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let record = Arc::new(Mutex::new(Vec::new()));
                    conns.lock().unwrap_or_else(|e| e.into_inner()).push(record.clone());
                    let (c2, s2) = match (client.try_clone(), server.try_clone()) {
                        (Ok(c), Ok(s)) => (c, s),
                        _ => continue,
                    };
                    std::thread::spawn(move || pipe(client, server, Some(record)));
                    std::thread::spawn(move || pipe(s2, c2, None));
                }
            });
        }
        Proxy { addr, conns, stop }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The bytes each accepted connection sent so far, in accept order.
    pub fn connections(&self) -> Vec<Vec<u8>> {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.iter().map(|c| c.lock().unwrap_or_else(|e| e.into_inner()).clone()).collect()
    }

    /// Every HTTP request sent through the proxy, per connection.
    pub fn http_requests(&self) -> Vec<Vec<RecordedRequest>> {
        self.connections().iter().map(|c| parse_requests(c)).collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream, record: Option<Arc<Mutex<Vec<u8>>>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(r) = &record {
            r.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&buf[..n]);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// One HTTP request as a client sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target as sent (path and query).
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// The body as sent (not inflated, not de-chunked).
    pub body: Vec<u8>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Splits a client's byte stream into requests (bodies framed by Content-Length; chunked bodies run to the
/// terminating `0\r\n\r\n`).
pub fn parse_requests(mut bytes: &[u8]) -> Vec<RecordedRequest> {
    let mut out = Vec::new();
    while let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        bytes = &bytes[end + 4..];
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default();
        let mut parts = request_line.split(' ');
        let method = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let mut req = RecordedRequest { method, target, headers, body: Vec::new() };
        let len = if let Some(len) = req.header("Content-Length").and_then(|v| v.parse::<usize>().ok()) {
            len
        } else if req.header("Transfer-Encoding").is_some() {
            bytes.windows(5).position(|w| w == b"0\r\n\r\n").map(|p| p + 5).unwrap_or(bytes.len())
        } else {
            0
        };
        let len = len.min(bytes.len());
        req.body = bytes[..len].to_vec();
        bytes = &bytes[len..];
        out.push(req);
    }
    out
}

/// Inflates a gzip body.
pub fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data).read_to_end(&mut out).expect("gunzip");
    out
}

// ---------------------------------------------------------------------------------------------------------------
// External clients

const INSTALL_HINT: &str = "run `scripts/install-test-deps` (as root) to install the compat-test clients";

/// The venv made by `scripts/install-test-deps`: `$RTSD_VENV`, else `$HOME/.cache/rtsd-venv`.
pub fn venv_dir() -> PathBuf {
    match std::env::var_os("RTSD_VENV") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache").join("rtsd-venv")
        }
    }
}

/// The venv's python, after checking that the pinned client modules import. Panics (the test fails) with
/// instructions when they are missing: client tests never pass silently.
pub fn venv_python() -> PathBuf {
    let python = venv_dir().join("bin").join("python");
    assert!(python.exists(), "no Python venv at {}: {INSTALL_HINT}", venv_dir().display());
    let check = Command::new(&python)
        .args(["-c", "import potsdb, opentsdb, pyopentsdb, opentsdb_http_client"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; {INSTALL_HINT}", python.display()));
    assert!(
        check.status.success(),
        "the venv at {} lacks the client packages ({}): {INSTALL_HINT}",
        venv_dir().display(),
        String::from_utf8_lossy(&check.stderr).trim()
    );
    python
}

/// collectd (Debian `collectd-core`) and its write_tsdb plugin. Panics with instructions when missing.
pub fn collectd_binary() -> PathBuf {
    let bin = ["/usr/sbin/collectd", "/usr/bin/collectd"].iter().map(PathBuf::from).find(|p| p.exists());
    let bin = bin.unwrap_or_else(|| panic!("collectd is not installed: {INSTALL_HINT}"));
    assert!(
        Path::new(COLLECTD_PLUGIN_DIR).join("write_tsdb.so").exists(),
        "collectd's write_tsdb plugin is missing: {INSTALL_HINT}"
    );
    bin
}

/// Where Debian's collectd-core puts its plugins and types.db.
pub const COLLECTD_PLUGIN_DIR: &str = "/usr/lib/collectd";
pub const COLLECTD_TYPES_DB: &str = "/usr/share/collectd/types.db";

/// A driver script in `compat-tests/clients/`.
pub fn client_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients").join(name)
}

/// Runs a client driver script with the venv's python and `args`; panics with its output unless it exits 0
/// within `timeout`. Returns its stdout.
pub fn run_python_client(script: &str, args: &[&str], timeout: Duration) -> String {
    let python = venv_python();
    let mut child = Command::new(&python)
        .arg(client_script(script))
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => stdout,
        Some(s) => panic!("{script} {args:?} failed ({s})\nstdout:\n{stdout}\nstderr:\n{stderr}"),
        None => panic!("{script} {args:?} did not finish within {timeout:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
    }
}

/// Where `scripts/install-test-deps` installs the npm clients (`npm ci` in `compat-tests/clients/node`).
pub fn node_client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients").join("node")
}

/// Runs `compat-tests/clients/node/<script>` with `node` and `args`; panics with its output unless it
/// exits 0 within `timeout`. Fails with instructions when node or the npm package `package` is
/// missing: client tests never pass silently. Returns its stdout.
pub fn run_node_client(script: &str, package: &str, args: &[&str], timeout: Duration) -> String {
    let dir = node_client_dir();
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node is not installed ({node:?}): the npm client tests need Node.js; {INSTALL_HINT}"
    );
    assert!(
        dir.join("node_modules").join(package).join("package.json").exists(),
        "the npm package {package} is not installed under {}: {INSTALL_HINT} (it runs `npm ci` there)",
        dir.display()
    );
    let mut child = Command::new("node")
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run node {script}: {e}"));
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => stdout,
        Some(s) => panic!("node {script} {args:?} failed ({s})\nstdout:\n{stdout}\nstderr:\n{stderr}"),
        None => {
            panic!("node {script} {args:?} did not finish within {timeout:?}\nstdout:\n{stdout}\nstderr:\n{stderr}")
        }
    }
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_trace_cuts_only_the_trace() {
        assert_eq!(
            strip_trace(r#"{"error":{"code":400,"message":"m","details":"d","trace":"a\"b\\\"}c"}}"#),
            r#"{"error":{"code":400,"message":"m","details":"d"}}"#
        );
        let plain = r#"{"error":{"code":404,"message":"x"}}"#;
        assert_eq!(strip_trace(plain), plain);
    }

    #[test]
    fn normalize_sorts_tags_and_lines() {
        assert_eq!(
            normalize(["m 2 1 b=2 a=1", "m 1 1 host=x  ", "", "a 1 1"]),
            vec!["a 1 1".to_string(), "m 1 1 host=x".to_string(), "m 2 1 a=1 b=2".to_string()]
        );
    }

    #[test]
    fn ready_line_addr() {
        let line = "2026-11-22T00:00:00Z  INFO rtsd::daemon: rtsd ready: telnet put and HTTP on one port addr=127.0.0.1:40123 data_dir=/tmp/x";
        assert_eq!(parse_addr(line), Some("127.0.0.1:40123".parse().unwrap()));
        assert_eq!(strip_ansi("\u{1b}[3maddr\u{1b}[0m\u{1b}[2m=\u{1b}[0m1"), "addr=1");
    }
}
