//! A small WebDriver client: drives Debian's headless Chromium through `chromedriver` (W3C WebDriver over
//! HTTP/JSON), for the web UI's end-to-end tests. Only the commands those tests use: sessions, navigation,
//! finding elements, clicks, keys, script execution, pointer moves, screenshots.
//!
//! [`Browser::start`] finds `chromium` and `chromedriver`; when either is missing it returns `None` (the test
//! then says it skipped) unless `RTSD_REQUIRE_BROWSER` is set, in which case the test fails with the install
//! command (`scripts/test` sets it, so CI cannot skip silently).
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::HttpConn;

/// The key W3C WebDriver names element references with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Chromium's start and a page's scripts on a loaded 2-core machine.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
pub const WAIT: Duration = Duration::from_secs(20);

/// The first of these paths that exists, else the name looked up on `PATH`.
fn find_binary(candidates: &[&str], name: &str) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file()).or_else(|| {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
    })
}

/// A chromedriver process and one browser session.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
}

/// An element of the page (its WebDriver reference).
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver and a headless Chromium session; `None` (after saying why) when they are not
    /// installed and `RTSD_REQUIRE_BROWSER` is unset.
    pub fn start(test: &str) -> Option<Browser> {
        let chromium = find_binary(&["/usr/bin/chromium", "/usr/bin/chromium-browser"], "chromium");
        let driver = find_binary(&["/usr/bin/chromedriver"], "chromedriver");
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            let message = "headless Chromium is not installed: `apt-get install -y chromium chromium-driver` \
                           (scripts/install-test-deps does it)";
            if std::env::var_os("RTSD_REQUIRE_BROWSER").is_some_and(|v| !v.is_empty()) {
                panic!("{test}: {message}; RTSD_REQUIRE_BROWSER is set, so this is a failure");
            }
            eprintln!("SKIPPED {test}: {message}");
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", driver.display()));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut browser = Browser { driver: child, addr, session: String::new() };
        let deadline = Instant::now() + WAIT;
        // While it starts, chromedriver may also accept a connection and reset it (seen under load in CI), which
        // HttpConn reports by panicking: that too is an answer to wait on.
        let not_ready = |browser: &Browser| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| browser.raw("GET", "/status", None)))
                .map_or(true, |answer| answer.map(|v| v["value"]["ready"] != true).unwrap_or(true))
        };
        while not_ready(&browser) {
            assert!(Instant::now() < deadline, "chromedriver did not become ready on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1000", "--lang=en-US"],
            },
        }}});
        let answer = browser.command("POST", "/session", Some(caps));
        browser.session = answer["sessionId"].as_str().expect("a session id").to_string();
        Some(browser)
    }

    /// One WebDriver request; `Err` when the connection fails (chromedriver not up yet).
    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        // HttpConn panics when it cannot connect; while chromedriver starts, that is an answer to wait on.
        drop(std::net::TcpStream::connect(self.addr).map_err(|e| e.to_string())?);
        let mut conn = HttpConn::new(self.addr);
        conn.stream().set_read_timeout(Some(COMMAND_TIMEOUT)).map_err(|e| e.to_string())?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let headers: &[(&str, &str)] = &[("Content-Type", "application/json; charset=utf-8")];
        let r = conn.request(method, path, headers, body.as_bytes());
        serde_json::from_slice(&r.body).map_err(|e| format!("{method} {path}: {e}: {}", r.text()))
    }

    /// A WebDriver command; panics with the driver's error.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let v = self.raw(method, path, body).unwrap_or_else(|e| panic!("{e}"));
        if let Some(error) = v["value"]["error"].as_str() {
            panic!("WebDriver {method} {path}: {error}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    fn session_command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.command(method, &format!("/session/{}{path}", self.session), body)
    }

    pub fn goto(&self, url: &str) {
        self.session_command("POST", "/url", Some(json!({ "url": url })));
    }

    /// Runs a script in the page (`arguments` as given) and returns what it returns.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        self.session_command("POST", "/execute/sync", Some(json!({ "script": script, "args": args })))
    }

    /// The elements matching a CSS selector, in document order.
    pub fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self.session_command("POST", "/elements", Some(json!({"using": "css selector", "value": css})));
        found
            .as_array()
            .map(|a| a.iter().filter_map(|e| e[ELEMENT].as_str().map(|s| Element(s.to_string()))).collect())
            .unwrap_or_default()
    }

    /// The first element matching `css`, waiting for it to appear.
    pub fn find(&self, css: &str) -> Element {
        self.wait_for(&format!("an element {css}"), || self.find_all(css).into_iter().next())
    }

    pub fn click(&self, e: &Element) {
        self.session_command("POST", &format!("/element/{}/click", e.0), Some(json!({})));
    }

    pub fn clear(&self, e: &Element) {
        self.session_command("POST", &format!("/element/{}/clear", e.0), Some(json!({})));
    }

    pub fn type_text(&self, e: &Element, text: &str) {
        self.session_command("POST", &format!("/element/{}/value", e.0), Some(json!({ "text": text })));
    }

    pub fn text(&self, e: &Element) -> String {
        self.session_command("GET", &format!("/element/{}/text", e.0), None).as_str().unwrap_or_default().to_string()
    }

    /// Moves the mouse to `(dx, dy)` pixels from the element's centre.
    pub fn hover(&self, e: &Element, dx: i64, dy: i64) {
        let origin = json!({ ELEMENT: e.0 });
        let actions = json!({"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "duration": 0, "origin": origin, "x": dx, "y": dy}]}]});
        self.session_command("POST", "/actions", Some(actions));
    }

    /// The page as a PNG.
    pub fn screenshot(&self) -> Vec<u8> {
        let data = self.session_command("GET", "/screenshot", None);
        base64_decode(data.as_str().expect("base64 screenshot"))
    }

    /// Polls `f` until it gives `Some`, for up to [`WAIT`].
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if Instant::now() > deadline {
                let page = self.execute("return document.body ? document.body.innerText : ''", json!([]));
                panic!("timed out waiting for {what}; the page shows:\n{}", page.as_str().unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.raw("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (screenshots).
fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes() {
        assert_eq!(super::base64_decode("aGVsbG8="), b"hello");
        assert_eq!(super::base64_decode("iVBORw0KGgo="), b"\x89PNG\r\n\x1a\n");
    }
}
