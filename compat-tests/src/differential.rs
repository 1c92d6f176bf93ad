//! The differential machinery shared by the tests that compare rtsd with the real OpenTSDB 2.4.1
//! (`tests/differential.rs`, `tests/layout_vs_opentsdb.rs`): seeded randomness, the list of known differences
//! (`compat-tests/differential/differences.json`) and its tally, the exact comparison of HTTP answers, and the
//! shared query data set with its generated `/api/query` requests (so a migrated copy of the data set can be asked
//! exactly the questions the differential suite asks).
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

use crate::{connect, strip_trace, HttpConn};

/// Entries of differences.json with ids under this prefix belong to `tests/layout_vs_opentsdb.rs` (stored bytes,
/// not answers); the differential suite leaves them alone.
pub const LAYOUT_PREFIX: &str = "layout/";

pub const DEFAULT_SEED: u64 = 0x2024_0020;
pub const DEFAULT_CASES: usize = 400;
/// The shared query data set starts here (2023-11-14T22:13:20Z); generated puts use their own metrics.
pub const T0: i64 = 1_700_000_000;

// ---------------------------------------------------------------------------------------------------------------
// Seeded randomness (splitmix64; no dependency)

pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)] // an endless generator, not an iterator
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next() as u128 % span) as i128) as i64
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The list of known differences and the tally

pub struct Entry {
    pub id: String,
    pub rtsd: String,
    pub opentsdb: String,
    /// `rtsd` / `opentsdb` are globs (`*` = any text) instead of exact answers.
    pub glob: bool,
    pub hits: usize,
    /// Cases with this id whose answers agreed (the difference is gone).
    pub agreed: Vec<String>,
}

/// `*` matches any run of characters; everything else literally.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// The README's list of the differences the suites know (section "Differences found against OpenTSDB 2.4.1"),
/// made from `compat-tests/differential/differences.json`: one bullet per reason, naming the cases that have
/// it. `tests/readme.rs` checks that the README holds exactly this text, so the list a reader sees is the list
/// the suites check.
pub fn readme_list() -> String {
    let path = crate::testbed::root().join("compat-tests/differential/differences.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    // Reasons in the order the file first gives them, each with its case ids.
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for e in v["differences"].as_array().expect("differences array") {
        let (id, why) = (e["id"].as_str().unwrap_or_default(), e["why"].as_str().unwrap_or_default());
        match reasons.iter_mut().find(|(w, _)| w == why) {
            Some((_, ids)) => ids.push(id.to_string()),
            None => reasons.push((why.to_string(), vec![id.to_string()])),
        }
    }
    let mut out = String::new();
    for (why, ids) in &reasons {
        let named: Vec<String> = ids.iter().take(4).map(|id| format!("`{id}`")).collect();
        let more = if ids.len() > 4 { format!(" and {} more", ids.len() - 4) } else { String::new() };
        out.push_str(&format!("- {}{more}: {}\n", named.join(", "), why.trim()));
    }
    out
}

pub struct Tally {
    pub entries: Vec<Entry>,
    pub compared: usize,
    pub identical: usize,
    pub listed: usize,
    /// (id, request, rtsd, opentsdb)
    pub new: Vec<(String, String, String, String)>,
    /// A listed id whose answers are not the listed ones: (id, request, rtsd, opentsdb).
    pub changed: Vec<(String, String, String, String)>,
}

impl Tally {
    /// Loads the entries whose id `mine` accepts: each test binary checks its own part of the one list.
    pub fn load(mine: impl Fn(&str) -> bool) -> Tally {
        let path = crate::testbed::root().join("compat-tests/differential/differences.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        let entries = v["differences"]
            .as_array()
            .expect("differences array")
            .iter()
            .filter(|e| mine(e["id"].as_str().unwrap_or_default()))
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("entry without {k}: {e}")).to_string();
                assert!(!s("why").is_empty(), "entry without a reason: {e}");
                Entry {
                    id: s("id"),
                    rtsd: s("rtsd"),
                    opentsdb: s("opentsdb"),
                    glob: e["glob"].as_bool().unwrap_or(false),
                    hits: 0,
                    agreed: Vec::new(),
                }
            })
            .collect();
        Tally { entries, compared: 0, identical: 0, listed: 0, new: Vec::new(), changed: Vec::new() }
    }

    /// Writes the new and changed differences to `path` in differences.json's shape (reasons left empty), for a
    /// reviewer to fix or list them.
    pub fn write_report(&self, path: &std::path::Path) {
        let report: Vec<Value> = self
            .new
            .iter()
            .chain(&self.changed)
            .map(|(id, req, a, b)| json!({"id": id, "request": req, "rtsd": a, "opentsdb": b, "why": ""}))
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&json!({"differences": report})).unwrap())
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    pub fn record(&mut self, id: &str, request: &str, rtsd: &str, reference: &str) {
        self.compared += 1;
        if rtsd == reference {
            self.identical += 1;
            // An entry naming exactly this case lists a difference that is gone.
            for e in self.entries.iter_mut().filter(|e| e.id == id) {
                e.agreed.push(id.to_string());
            }
            return;
        }
        let row = (id.to_string(), request.to_string(), rtsd.to_string(), reference.to_string());
        let mut named = false;
        for e in self.entries.iter_mut().filter(|e| glob_match(&e.id, id)) {
            // Only an entry naming this very case makes a mismatch "changed"; a pattern that does not fit is
            // simply not this difference.
            named |= e.id == id;
            let ok = if e.glob {
                glob_match(&e.rtsd, rtsd) && glob_match(&e.opentsdb, reference)
            } else {
                e.rtsd == rtsd && e.opentsdb == reference
            };
            if ok {
                e.hits += 1;
                self.listed += 1;
                return;
            }
        }
        if named {
            self.changed.push(row);
        } else {
            self.new.push(row);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Talking to both servers

/// One telnet connection per server, reused while it stays open; every command is followed by `version` so its
/// replies end where the version reply starts.
pub struct Telnet {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

impl Telnet {
    pub fn new(addr: SocketAddr) -> Telnet {
        Telnet { addr, conn: None }
    }

    /// Sends `line` (which carries its own line end) and then `version\n`; returns the bytes that came back before
    /// the version reply, as ISO-8859-1 text (one char per byte, as 2.4 decodes telnet), or with `<closed>` /
    /// `<error ...>` appended when the connection ended.
    pub fn exchange(&mut self, line: &[u8]) -> String {
        let addr = self.addr;
        let conn = self.conn.get_or_insert_with(|| BufReader::new(connect(addr)));
        let mut out = String::new();
        let mut bytes = line.to_vec();
        bytes.extend_from_slice(b"version\n");
        if let Err(e) = conn.get_mut().write_all(&bytes) {
            self.conn = None;
            return format!("<write error {:?}>", e.kind());
        }
        let mut after_version = false;
        loop {
            let mut buf = Vec::new();
            match conn.read_until(b'\n', &mut buf) {
                Ok(0) => {
                    self.conn = None;
                    out.push_str("<closed>");
                    return out;
                }
                Ok(_) => {}
                Err(e) => {
                    self.conn = None;
                    out.push_str(&format!("<error {:?}>", e.kind()));
                    return out;
                }
            }
            let text: String = buf.iter().map(|&b| b as char).collect();
            if after_version {
                return out;
            }
            if text.starts_with("net.opentsdb.tools ") {
                after_version = true;
                continue;
            }
            out.push_str(&text);
        }
    }
}

/// The answer to an HTTP request on a fresh connection, as compared: `status [content-type] body`. 2.4 appends a
/// Java stack trace to error envelopes (`"trace"`); a compatible server may send any or none (query spec §0.4), so
/// it is cut out, and only that.
pub fn http_answer(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let mut conn = HttpConn::new(addr);
    conn.stream().set_read_timeout(Some(Duration::from_secs(60))).expect("read timeout");
    // The same bytes to both: a fixed Host header rather than each server's address.
    let mut headers = vec![("Host", "localhost")];
    if !body.is_empty() {
        headers.push(("Content-Type", "application/json"));
    }
    let r = conn.request(method, path, &headers, body.as_bytes());
    let ct = r.header("Content-Type").unwrap_or("-").to_string();
    (r.status, ct, sort_query_echoes(&strip_trace(&r.text())))
}

/// `showQuery`'s `"query":{...}` echoes with their keys sorted. 2.4.1's key order there is Jackson's walk over
/// TSSubQuery's fields and getters, which the JVM does not keep stable from run to run (two runs of this suite
/// got two orders, so a listed order would flake); the echo's content is still compared, key by key.
pub fn sort_query_echoes(body: &str) -> String {
    const KEY: &str = "\"query\":{";
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.find(KEY) {
        let start = at + KEY.len() - 1;
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        // The object's end: its matching brace, outside strings.
        let (mut depth, mut in_str, mut escaped, mut end) = (0usize, false, false, None);
        for (i, c) in tail.char_indices() {
            match (in_str, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => in_str = false,
                (true, false, _) => {}
                (false, _, '"') => in_str = true,
                (false, _, '{') => depth += 1,
                (false, _, '}') => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            out.push_str(tail);
            return out;
        };
        // serde_json's map (no preserve_order in this workspace) writes keys sorted.
        match serde_json::from_str::<serde_json::Value>(&tail[..end]) {
            Ok(v) => out.push_str(&v.to_string()),
            Err(_) => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

pub struct Pair<'a> {
    pub rtsd: SocketAddr,
    pub reference: SocketAddr,
    pub tally: &'a mut Tally,
}

impl Pair<'_> {
    /// Sends the request to both and records the comparison; returns (rtsd, reference) answers.
    pub fn http(&mut self, id: &str, method: &str, path: &str, body: &str) -> (String, String) {
        self.http_normalised(id, method, path, body, |s| s.to_string())
    }

    pub fn http_normalised(
        &mut self,
        id: &str,
        method: &str,
        path: &str,
        body: &str,
        normalise: impl Fn(&str) -> String,
    ) -> (String, String) {
        let a = http_answer(self.rtsd, method, path, body);
        let b = http_answer(self.reference, method, path, body);
        let fmt = |(s, ct, body): (u16, String, String)| format!("{s} [{ct}] {}", normalise(&body));
        let (a, b) = (fmt(a), fmt(b));
        let request = if body.is_empty() { format!("{method} {path}") } else { format!("{method} {path} {body}") };
        self.tally.record(id, &request, &a, &b);
        (a, b)
    }
}

/// Percent-encodes what a request line should not carry raw (braces, pipes, quotes, spaces, non-ASCII).
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:=,()*!/+@$&;'".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// The shared data set and /api/query

pub struct Series {
    pub metric: &'static str,
    pub tags: Vec<(&'static str, &'static str)>,
    /// (timestamp, value) as JSON number text
    pub points: Vec<(i64, String)>,
}

pub fn data_set(rng: &mut Rng) -> Vec<Series> {
    let mut out = Vec::new();
    let walk = |rng: &mut Rng, step: (i64, i64), n: usize, start: i64, value: &mut dyn FnMut(&mut Rng) -> String| {
        let mut t = start;
        (0..n)
            .map(|_| {
                t += rng.range(step.0, step.1);
                (t, value(rng))
            })
            .collect::<Vec<_>>()
    };
    for host in ["web01", "web02", "web03"] {
        for cpu in ["0", "1"] {
            let floats = host == "web02";
            let points = walk(rng, (45, 130), 80, T0, &mut |r: &mut Rng| {
                if floats {
                    format!("{}.{}", r.range(0, 99), r.range(0, 99))
                } else {
                    r.range(0, 100).to_string()
                }
            });
            out.push(Series { metric: "dq.cpu", tags: vec![("host", host), ("cpu", cpu)], points });
        }
    }
    for (host, start) in [("web01", 0i64), ("web02", 4_294_960_000)] {
        let mut c = start;
        let mut i = 0;
        let points = walk(rng, (30, 90), 80, T0, &mut |r: &mut Rng| {
            i += 1;
            c += r.range(0, 2000);
            if i == 40 {
                c = r.range(0, 50); // a reset (or a 32-bit rollover for web02)
            }
            c.to_string()
        });
        out.push(Series { metric: "dq.counter", tags: vec![("host", host)], points });
    }
    for host in ["a", "b"] {
        let points = walk(rng, (60, 200), 60, T0, &mut |r: &mut Rng| {
            (*r.pick(&["0.1", "1e-5", "-3.25", "12345.678", "2.5E10", "0.333", "-0.0", "7"])).to_string()
        });
        out.push(Series { metric: "dq.float", tags: vec![("host", host)], points });
    }
    let points = walk(rng, (37, 700), 150, T0 * 1000 + 123, &mut |r: &mut Rng| {
        if r.chance(50) {
            r.range(-50, 50).to_string()
        } else {
            format!("{}.5", r.range(-50, 50))
        }
    });
    out.push(Series { metric: "dq.ms", tags: vec![("host", "web01")], points });
    for host in ["web01", "web02"] {
        for dc in ["lga", "sjc"] {
            let mut points = Vec::new();
            for block in 0..24 {
                if rng.chance(40) {
                    let base = T0 + block * 300;
                    for k in 0..rng.range(1, 4) {
                        points.push((base + k * 20 + rng.range(0, 15), rng.range(1, 9).to_string()));
                    }
                }
            }
            out.push(Series { metric: "dq.sparse", tags: vec![("host", host), ("dc", dc)], points });
        }
    }
    let big = [
        "9223372036854775807",
        "-9223372036854775808",
        "2147483648",
        "1.7976931348623157E308",
        "4.9E-324",
        "-1",
        "65536",
        "1e15",
        "123456789.123",
    ];
    let points = big.iter().enumerate().map(|(i, v)| (T0 + 100 * i as i64, v.to_string())).collect();
    out.push(Series { metric: "dq.big", tags: vec![("host", "web01")], points });
    out
}

pub const AGGREGATORS: &[&str] = &[
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "zimsum",
    "mimmin",
    "mimmax",
    "dev",
    "first",
    "last",
    "none",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "p999",
    "ep50r3",
    "ep75r7",
    "ep99r7",
    "squareSum",
    "diff",
    "multiply",
];
pub const DS_AGGREGATORS: &[&str] =
    &["sum", "avg", "min", "max", "count", "dev", "first", "last", "p50", "p95", "zimsum", "mimmax"];
pub const FILLS: &[&str] = &["", "-none", "-nan", "-null", "-zero"];
/// Downsample intervals no rollup interval (1m, 10m, 1h) divides, so both servers read raw data; the rollup path
/// has its own cases (`rollup_queries`).
pub const INTERVALS: &[&str] = &["30s", "45s", "90s", "17s", "150s", "0all", "5s", "1s"];
pub const METRICS: &[&str] = &["dq.cpu", "dq.counter", "dq.float", "dq.ms", "dq.sparse", "dq.big"];
pub const TAG_SPECS: &[&str] = &[
    "",
    "{host=*}",
    "{host=web01}",
    "{host=web01|web02}",
    "{host=*,cpu=*}",
    "{cpu=*}",
    "{}{host=wildcard(web0*)}",
    "{host=wildcard(*2)}",
    "{host=regexp(web0[12])}",
    "{host=literal_or(web01|web03)}",
    "{host=not_literal_or(web01)}",
    "{host=iliteral_or(WEB01)}",
    "{host=not_iliteral_or(WEB02)}",
    "{host=iwildcard(WEB*)}",
    "{cpu=*}{host=web01}",
    "{dc=*}",
    "{dc=lga,host=*}",
    "{host=a|b}",
    "{host=*}{dc=literal_or(sjc)}",
    "{host=regexp(.*)}",
];

pub fn gen_m(rng: &mut Rng) -> String {
    let mut parts = vec![rng.pick(AGGREGATORS).to_string()];
    if rng.chance(8) {
        parts.push("explicit_tags".into());
    }
    if rng.chance(45) {
        let agg = rng.pick(DS_AGGREGATORS);
        let fill = rng.pick(FILLS);
        parts.push(format!("{}-{agg}{fill}", rng.pick(INTERVALS)));
    }
    if rng.chance(25) {
        parts.push(
            rng.pick(&[
                "rate",
                "rate{counter}",
                "rate{counter,4294967296}",
                "rate{counter,,100}",
                "rate{dropcounter}",
                "rate{counter,4294967296,1000}",
            ])
            .to_string(),
        );
    }
    parts.push(format!("{}{}", rng.pick(METRICS), rng.pick(TAG_SPECS)));
    parts.join(":")
}

pub fn gen_range(rng: &mut Rng) -> (String, String) {
    let s = T0 - 600 + rng.range(0, 7200);
    let e = s + rng.range(1, 10_800);
    match rng.below(8) {
        0 => ((s * 1000 + rng.range(0, 999)).to_string(), (e * 1000).to_string()),
        1 => ("2023/11/14-22:00:00".into(), "2023/11/15-01:30:00".into()),
        _ => (s.to_string(), e.to_string()),
    }
}

pub fn gen_get_query(rng: &mut Rng) -> String {
    let (s, e) = gen_range(rng);
    let mut q = format!("/api/query?start={s}&end={e}&m={}", enc(&gen_m(rng)));
    if rng.chance(15) {
        q.push_str(&format!("&m={}", enc(&gen_m(rng))));
    }
    for flag in ["ms", "arrays", "show_tsuids", "show_query", "no_annotations", "global_annotations"] {
        if rng.chance(12) {
            q.push_str(&format!("&{flag}"));
        }
    }
    q
}

pub fn gen_post_query(rng: &mut Rng) -> String {
    let (s, e) = gen_range(rng);
    let mut sub = serde_json::Map::new();
    sub.insert("aggregator".into(), json!(rng.pick(AGGREGATORS)));
    sub.insert("metric".into(), json!(rng.pick(METRICS)));
    if rng.chance(40) {
        sub.insert(
            "downsample".into(),
            json!(format!("{}-{}{}", rng.pick(INTERVALS), rng.pick(DS_AGGREGATORS), rng.pick(FILLS))),
        );
    }
    if rng.chance(20) {
        sub.insert("rate".into(), json!(true));
        if rng.chance(50) {
            sub.insert("rateOptions".into(), json!({"counter": true, "counterMax": 4294967296u64, "resetValue": rng.pick(&[0, 100]), "dropResets": rng.chance(50)}));
        }
    }
    if rng.chance(60) {
        let filters: Vec<Value> = (0..rng.range(1, 2))
            .map(|_| {
                let (tagk, values): (&str, &[&str]) = *rng.pick(&[
                    ("host", &["web01", "web01|web02", "web0*", "*", "WEB01", "a|b"][..]),
                    ("cpu", &["0", "1", "*"][..]),
                    ("dc", &["lga", "*"][..]),
                ]);
                let ty = rng.pick(&[
                    "literal_or",
                    "iliteral_or",
                    "not_literal_or",
                    "not_iliteral_or",
                    "wildcard",
                    "iwildcard",
                    "regexp",
                ]);
                json!({"type": ty, "tagk": tagk, "filter": rng.pick(values), "groupBy": rng.chance(50)})
            })
            .collect();
        sub.insert("filters".into(), Value::from(filters));
    } else if rng.chance(30) {
        sub.insert("tags".into(), json!({"host": rng.pick(&["*", "web01", "web01|web02"])}));
    }
    if rng.chance(15) {
        sub.insert("explicitTags".into(), json!(true));
    }
    // The top level is written by hand in a fixed order (serde_json's map sorts keys; the sub-query's sorted keys
    // are as good an order as any, the same bytes go to both).
    let time = |t: &str| t.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::from(t));
    let mut text = format!("{{\"start\":{},\"end\":{}", time(&s), time(&e));
    // No `delete`: 2.4 honours it even with tsd.http.query.allow_delete=false and would delete the data set
    // (one case at the very end checks that difference, on a metric of its own).
    for flag in ["msResolution", "showTSUIDs", "showQuery", "noAnnotations", "globalAnnotations"] {
        if rng.chance(12) {
            text.push_str(&format!(",\"{flag}\":true"));
        }
    }
    text.push_str(&format!(",\"queries\":[{}]}}", Value::Object(sub)));
    text
}

pub fn query_errors() -> Vec<(&'static str, &'static str, &'static str, String)> {
    let s = format!("start={}&end={}", T0, T0 + 3600);
    let g = |q: &str| format!("/api/query?{q}");
    vec![
        ("unknown-metric", "GET", "", g(&format!("{s}&m=sum:dq.nope"))),
        ("bad-aggregator", "GET", "", g(&format!("{s}&m=foo:dq.cpu"))),
        ("missing-start", "GET", "", g("m=sum:dq.cpu")),
        ("empty-start", "GET", "", g("start=&m=sum:dq.cpu")),
        ("missing-m", "GET", "", g(&s)),
        ("start-after-end", "GET", "", g(&format!("start={}&end={}&m=sum:dq.cpu", T0 + 3600, T0))),
        ("bad-start", "GET", "", g("start=yesterday&m=sum:dq.cpu")),
        ("relative-start", "GET", "", g("start=1h-ago&m=sum:dq.cpu")),
        ("bad-downsample", "GET", "", g(&format!("{s}&m=sum:1x-sum:dq.cpu"))),
        ("downsample-no-fn", "GET", "", g(&format!("{s}&m=sum:1m:dq.cpu"))),
        ("downsample-bad-fn", "GET", "", g(&format!("{s}&m=sum:1m-foo:dq.cpu"))),
        ("downsample-none", "GET", "", g(&format!("{s}&m=sum:1m-none:dq.cpu"))),
        ("bad-fill", "GET", "", g(&format!("{s}&m=sum:1m-avg-bogus:dq.cpu"))),
        ("one-part-m", "GET", "", g(&format!("{s}&m=dq.cpu"))),
        ("too-many-parts", "GET", "", g(&format!("{s}&m=sum:rate:1m-avg:explicit_tags:pre-agg:dq.cpu"))),
        ("bad-filter-type", "GET", "", g(&format!("{s}&m=sum:dq.cpu%7Bhost=nosuch(x)%7D"))),
        ("unknown-tagk", "GET", "", g(&format!("{s}&m=sum:dq.cpu%7Bnope=*%7D"))),
        ("unknown-tagv", "GET", "", g(&format!("{s}&m=sum:dq.cpu%7Bhost=web99%7D"))),
        ("unclosed-brace", "GET", "", g(&format!("{s}&m=sum:dq.cpu%7Bhost=*"))),
        ("bad-tag-pair", "GET", "", g(&format!("{s}&m=sum:dq.cpu%7Bhost%7D"))),
        ("rate-bad-options", "GET", "", g(&format!("{s}&m=sum:rate%7Bcounter,a%7D:dq.cpu"))),
        ("rate-too-many", "GET", "", g(&format!("{s}&m=sum:rate%7Bcounter,1,2,3%7D:dq.cpu"))),
        ("rate-short", "GET", "", g(&format!("{s}&m=sum:rat:dq.cpu"))),
        ("bad-tsuid", "GET", "", g(&format!("{s}&tsuid=sum:zz"))),
        ("tsuid-query", "GET", "", g(&format!("{s}&tsuid=sum:000001000001000001000002000002"))),
        ("put-method", "PUT", "", g(&format!("{s}&m=sum:dq.cpu"))),
        ("delete-disabled", "DELETE", "", g(&format!("{s}&m=sum:dq.cpu"))),
        ("post-empty", "POST", "", "/api/query".into()),
        ("post-bad-json", "POST", "{", "/api/query".into()),
        ("post-no-queries", "POST", r#"{"start":1700000000}"#, "/api/query".into()),
        ("post-empty-queries", "POST", r#"{"start":1700000000,"queries":[]}"#, "/api/query".into()),
        ("post-no-start", "POST", r#"{"queries":[{"aggregator":"sum","metric":"dq.cpu"}]}"#, "/api/query".into()),
        ("post-no-aggregator", "POST", r#"{"start":1700000000,"queries":[{"metric":"dq.cpu"}]}"#, "/api/query".into()),
        (
            "post-bad-filter",
            "POST",
            r#"{"start":1700000000,"queries":[{"aggregator":"sum","metric":"dq.cpu","filters":[{"type":"nosuch","tagk":"host","filter":"x"}]}]}"#,
            "/api/query".into(),
        ),
        (
            "post-null-metric",
            "POST",
            r#"{"start":1700000000,"queries":[{"aggregator":"sum","metric":null}]}"#,
            "/api/query".into(),
        ),
        (
            "post-timezone",
            "POST",
            r#"{"start":1700000000,"end":1700007200,"timezone":"America/New_York","useCalendar":true,"queries":[{"aggregator":"sum","metric":"dq.cpu","downsample":"1h-sum"}]}"#,
            "/api/query".into(),
        ),
        (
            "post-bad-timezone",
            "POST",
            r#"{"start":1700000000,"timezone":"Nowhere/Else","queries":[{"aggregator":"sum","metric":"dq.cpu","downsample":"1h-sum"}]}"#,
            "/api/query".into(),
        ),
    ]
}

/// Downsamples that a rollup interval divides: both servers read the (empty) rollup tables, or refuse
/// aggregators the rollup config has no ID for.
pub fn rollup_queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for ds in [
        "1m-sum",
        "1m-avg",
        "5m-max",
        "10m-count",
        "15m-min-nan",
        "1h-sum",
        "1h-max-none",
        "2h-avg",
        "1d-sum",
        "1n-zimsum",
        "1m-first",
        "5m-p95",
        "1h-dev",
        "1dc-sum",
        "1m-sum-zero",
    ] {
        for tags in ["", "{host=*}"] {
            let m = format!("sum:{ds}:dq.cpu{tags}");
            out.push((
                format!("query/rollup/{ds}{tags}"),
                format!("/api/query?start={}&end={}&m={}", T0, T0 + 7200, enc(&m)),
            ));
        }
    }
    for usage in ["ROLLUP_RAW", "ROLLUP_NOFALLBACK", "ROLLUP_FALLBACK", "ROLLUP_FALLBACK_RAW"] {
        let m = format!("sum:1h-sum:rollup_{}:dq.cpu", usage.trim_start_matches("ROLLUP_").to_lowercase());
        out.push((
            format!("query/rollup/usage-{usage}"),
            format!("/api/query?start={}&end={}&m={}", T0, T0 + 7200, enc(&m)),
        ));
    }
    out
}

/// The `/api/query` cases over the data set: (id, method, path, body), the error cases, the rollup-path cases and
/// `cases` GET + `cases / 2` POST queries generated from `seed`.
pub fn query_cases(seed: u64, cases: usize) -> Vec<(String, &'static str, String, String)> {
    let mut out = Vec::new();
    for (id, method, body, path) in query_errors() {
        out.push((format!("query/error/{id}"), method, path, body.to_string()));
    }
    for (id, path) in rollup_queries() {
        out.push((id, "GET", path, String::new()));
    }
    let mut rng = Rng(seed ^ 0x0e7);
    for n in 0..cases {
        out.push((format!("query/get/{n}"), "GET", gen_get_query(&mut rng), String::new()));
    }
    for n in 0..cases / 2 {
        out.push((format!("query/post/{n}"), "POST", "/api/query".to_string(), gen_post_query(&mut rng)));
    }
    out
}

pub fn run_queries(pair: &mut Pair, seed: u64, cases: usize) {
    for (id, method, path, body) in query_cases(seed, cases) {
        pair.http(&id, method, &path, &body);
    }
}

/// The requests that write the data set: `/api/uid/assign` paths, one name each in first-use order (so the UIDs
/// are the counter's next value on every server written to the same way), then `/api/put?sync&details` bodies.
pub fn data_set_requests(series: &[Series]) -> (Vec<(String, String)>, Vec<String>) {
    let mut names: Vec<(&str, &str)> = Vec::new();
    for s in series {
        names.push(("metric", s.metric));
        for (k, v) in &s.tags {
            names.push(("tagk", k));
            names.push(("tagv", v));
        }
    }
    let mut seen = BTreeSet::new();
    let mut assigns = Vec::new();
    for (kind, name) in names {
        if seen.insert((kind, name)) {
            assigns.push((format!("uid/assign/{kind}/{name}"), format!("/api/uid/assign?{kind}={name}")));
        }
    }
    let mut points: Vec<String> = Vec::new();
    for s in series {
        let tags: Vec<String> = s.tags.iter().map(|(k, v)| format!("\"{k}\":\"{v}\"")).collect();
        for (t, v) in &s.points {
            points.push(format!(
                "{{\"metric\":\"{}\",\"timestamp\":{t},\"value\":{v},\"tags\":{{{}}}}}",
                s.metric,
                tags.join(",")
            ));
        }
    }
    let bodies = points.chunks(400).map(|batch| format!("[{}]", batch.join(","))).collect();
    (assigns, bodies)
}

/// Writes the data set identically to both servers (see [`data_set_requests`]), comparing the answers.
pub fn write_data_set(pair: &mut Pair, series: &[Series]) {
    let (assigns, bodies) = data_set_requests(series);
    for (id, path) in assigns {
        pair.http(&id, "GET", &path, "");
    }
    for (i, body) in bodies.iter().enumerate() {
        let (a, b) = pair.http(&format!("dataset/put/{i}"), "POST", "/api/put?sync&details", body);
        assert!(a.starts_with("200 ") && b.starts_with("200 "), "data set batch {i}: rtsd {a}\nOpenTSDB {b}");
    }
}
