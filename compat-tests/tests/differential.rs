//! Differential suite (issue 20 item 3): the same bytes go to rtsd and to the real OpenTSDB 2.4.1 (the HBase test
//! bed, README "Test bed: HBase and OpenTSDB 2.4.1"), and the answers are compared exactly: telnet reply bytes,
//! HTTP status + Content-Type + body text (so JSON key order counts).
//!
//! Every difference is either identical-or-listed: `compat-tests/differential/differences.json` lists the known
//! ones (case id glob, rtsd's answer, 2.4.1's answer, why). The test fails when (a) an unlisted difference appears,
//! (b) a listed difference's answers changed, or (c) a listed difference no longer appears (its case now agrees, or,
//! in the default run, no case has its id any more), so the list cannot go stale.
//!
//! The cases: the telnet `put` error catalogue of the ingest spec §2.6 and seeded generated put lines; `/api/put`
//! bodies x flags and generated bodies; `/api/uid/assign` of a shared data set written identically to both (same
//! points, same order, so the UIDs agree), then seeded generated `/api/query` requests over it (GET `m=` and POST
//! bodies) and the query error cases; suggest, search/lookup, query/last, version, aggregators, config/filters,
//! serializers and a few old routes.
//!
//! `RTSD_DIFF_SEED` (default [`DEFAULT_SEED`]) and `RTSD_DIFF_CASES` (generated cases per kind, default
//! [`DEFAULT_CASES`]) run a larger sweep; then only (a) and (b) fail the test, as the generated ids differ.
//! New differences are also written to `$CARGO_TARGET_TMPDIR/differential-new.json` in the list's format;
//! `python3 compat-tests/differential/build_list.py` classifies them into the list (each rule with its reason).
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rtsd_compat_tests::testbed::Testbed;
use rtsd_compat_tests::{connect, strip_trace, Daemon, HttpConn};
use serde_json::{json, Value};

const DEFAULT_SEED: u64 = 0x2024_0020;
const DEFAULT_CASES: usize = 400;
/// The shared query data set starts here (2023-11-14T22:13:20Z); generated puts use their own metrics.
const T0: i64 = 1_700_000_000;

// ---------------------------------------------------------------------------------------------------------------
// Seeded randomness (splitmix64; no dependency)

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next() as u128 % span) as i128) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The list of known differences and the tally

struct Entry {
    id: String,
    rtsd: String,
    opentsdb: String,
    /// `rtsd` / `opentsdb` are globs (`*` = any text) instead of exact answers.
    glob: bool,
    hits: usize,
    /// Cases with this id whose answers agreed (the difference is gone).
    agreed: Vec<String>,
}

/// `*` matches any run of characters; everything else literally.
fn glob_match(pattern: &str, text: &str) -> bool {
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

struct Tally {
    entries: Vec<Entry>,
    compared: usize,
    identical: usize,
    listed: usize,
    /// (id, request, rtsd, opentsdb)
    new: Vec<(String, String, String, String)>,
    /// A listed id whose answers are not the listed ones: (id, request, rtsd, opentsdb).
    changed: Vec<(String, String, String, String)>,
}

impl Tally {
    fn load() -> Tally {
        let path = rtsd_compat_tests::testbed::root().join("compat-tests/differential/differences.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        let entries = v["differences"]
            .as_array()
            .expect("differences array")
            .iter()
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

    fn record(&mut self, id: &str, request: &str, rtsd: &str, reference: &str) {
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
struct Telnet {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

impl Telnet {
    fn new(addr: SocketAddr) -> Telnet {
        Telnet { addr, conn: None }
    }

    /// Sends `line` (which carries its own line end) and then `version\n`; returns the bytes that came back before
    /// the version reply, as ISO-8859-1 text (one char per byte, as 2.4 decodes telnet), or with `<closed>` /
    /// `<error ...>` appended when the connection ended.
    fn exchange(&mut self, line: &[u8]) -> String {
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
fn http_answer(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String, String) {
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
fn sort_query_echoes(body: &str) -> String {
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

struct Pair<'a> {
    rtsd: SocketAddr,
    reference: SocketAddr,
    tally: &'a mut Tally,
}

impl Pair<'_> {
    /// Sends the request to both and records the comparison; returns (rtsd, reference) answers.
    fn http(&mut self, id: &str, method: &str, path: &str, body: &str) -> (String, String) {
        self.http_normalised(id, method, path, body, |s| s.to_string())
    }

    fn http_normalised(
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
fn enc(s: &str) -> String {
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
// Telnet put lines

/// The ingest spec's §2.6 catalogue (and §2.2-2.5's examples), one line each, with a stable id.
fn telnet_catalogue() -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("bare-put", b"put\n".to_vec()),
        ("put-space", b"put \n".to_vec()),
        ("three-args", b"put tel.a 1700000000 1\n".to_vec()),
        ("empty-metric", b"put  1700000000 1 host=a\n".to_vec()),
        ("ts-notatime", b"put tel.a notatime 42 host=web01\n".to_vec()),
        ("ts-empty", b"put tel.a  42 host=a\n".to_vec()),
        ("ts-zero", b"put tel.a 0 1 host=a\n".to_vec()),
        ("ts-negative", b"put tel.a -5 1 host=a\n".to_vec()),
        ("ts-sign-only", b"put tel.a + 1 host=a\n".to_vec()),
        ("ts-minus-only", b"put tel.a - 1 host=a\n".to_vec()),
        ("ts-too-long", b"put tel.a 12345678901234567890 1 host=a\n".to_vec()),
        ("ts-overflow", b"put tel.a 9999999999999999999 1 host=a\n".to_vec()),
        ("ts-plus", b"put tel.a +1700000000 1 host=a\n".to_vec()),
        ("ts-leading-zeros", b"put tel.a 0001700000000 1 host=a\n".to_vec()),
        ("ts-dot-ms", b"put tel.a 1365465600.250 1 host=a\n".to_vec()),
        ("ts-dot-quirk", b"put tel.a 1365465600.5 1 host=a\n".to_vec()),
        ("ts-dots", b"put tel.a 1.2.3 1 host=a\n".to_vec()),
        ("ts-max-seconds", b"put tel.a 4294967295 1 host=a\n".to_vec()),
        ("ts-min-ms", b"put tel.a 4294967296 1 host=a\n".to_vec()),
        ("ts-max-ms", b"put tel.a 9999999999999 1 host=a\n".to_vec()),
        ("ts-hex", b"put tel.a 0x10 1 host=a\n".to_vec()),
        ("value-empty", b"put tel.a 1700000000  host=a\n".to_vec()),
        ("tag-no-eq", b"put tel.a 1700000000 1 host\n".to_vec()),
        ("tag-two-eq", b"put tel.a 1700000000 1 host=a=b\n".to_vec()),
        ("tag-empty-key", b"put tel.a 1700000000 1 =a\n".to_vec()),
        ("tag-empty-value", b"put tel.a 1700000000 1 host=\n".to_vec()),
        ("tag-dup-conflict", b"put tel.a 1700000000 1 host=a host=b\n".to_vec()),
        ("tag-dup-same", b"put tel.a 1700000000 1 host=a host=a\n".to_vec()),
        ("tag-dup-conflict-map", b"put tel.a 1700000000 1 dc=x host=a cpu=1 host=b\n".to_vec()),
        ("value-nan", b"put tel.a 1700000000 NaN host=a\n".to_vec()),
        ("value-infinity", b"put tel.a 1700000000 Infinity host=a\n".to_vec()),
        ("value-hex", b"put tel.a 1700000000 0x10 host=a\n".to_vec()),
        ("value-1f", b"put tel.a 1700000000 1f host=a\n".to_vec()),
        ("value-comma", b"put tel.a 1700000000 12,5 host=a\n".to_vec()),
        ("value-1.5NaN", b"put tel.a 1700000000 1.5NaN host=a\n".to_vec()),
        ("value-1e999", b"put tel.a 1700000000 1e999 host=a\n".to_vec()),
        ("value-neg-1e999", b"put tel.a 1700000000 -1e999 host=a\n".to_vec()),
        ("value-1.5f", b"put tel.a 1700000001 1.5f host=a\n".to_vec()),
        ("value-1.5d", b"put tel.a 1700000002 1.5D host=a\n".to_vec()),
        ("value-hexfloat", b"put tel.a 1700000003 0x1.8p1 host=a\n".to_vec()),
        ("value-dot5", b"put tel.a 1700000004 .5 host=a\n".to_vec()),
        ("value-5dot", b"put tel.a 1700000005 5. host=a\n".to_vec()),
        ("value-plus-float", b"put tel.a 1700000006 +1.5 host=a\n".to_vec()),
        ("value-plus-int", b"put tel.a 1700000007 +5 host=a\n".to_vec()),
        ("value-minus-zero", b"put tel.a 1700000008 -0 host=a\n".to_vec()),
        ("value-int-overflow", b"put tel.a 1700000000 99999999999999999999 host=a\n".to_vec()),
        ("value-int-too-long", b"put tel.a 1700000000 123456789012345678901 host=a\n".to_vec()),
        ("value-sign-only", b"put tel.a 1700000000 - host=a\n".to_vec()),
        ("value-1e", b"put tel.a 1700000000 1e host=a\n".to_vec()),
        ("value-e5", b"put tel.a 1700000000 e5 host=a\n".to_vec()),
        ("value-1.2.3", b"put tel.a 1700000000 1.2.3 host=a\n".to_vec()),
        ("value-1e3", b"put tel.a 1700000009 1e3 host=a\n".to_vec()),
        ("value-big-exp", b"put tel.a 1700000010 1.0e39 host=a\n".to_vec()),
        ("bad-ts-int", b"put tel.a 10000000000000 42 host=a\n".to_vec()),
        ("bad-ts-float", b"put tel.a 10000000000000 1.5 host=a\n".to_vec()),
        ("bad-ts-short", b"put tel.a 10000000000000 300 host=a\n".to_vec()),
        ("bad-ts-int4", b"put tel.a 10000000000000 70000 host=a\n".to_vec()),
        ("bad-ts-long", b"put tel.a 10000000000000 5000000000 host=a\n".to_vec()),
        ("bad-ts-double", b"put tel.a 10000000000000 12.3 host=a\n".to_vec()),
        ("bad-ts-negative", b"put tel.a 10000000000000 -1 host=a\n".to_vec()),
        ("bad-ts-two-tags", b"put tel.a 10000000000000 1 host=a dc=b\n".to_vec()),
        ("no-tags", b"put tel.a 1700000000 1 \n".to_vec()),
        ("no-tags-spaces", b"put tel.a 1700000000 1    \n".to_vec()),
        ("eight-tags", b"put tel.a 1700000011 1 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8\n".to_vec()),
        ("nine-tags", b"put tel.a 1700000000 1 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9\n".to_vec()),
        ("pr467-tags", b"put tel.a 1700000000 1 a=a b=b c=c d=d e=e f=f g=g host=thursday i=i\n".to_vec()),
        ("metric-bang", b"put tel.a! 1700000000 1 host=a\n".to_vec()),
        ("metric-colon", b"put tel:a 1700000000 1 host=a\n".to_vec()),
        ("tagk-at", b"put tel.a 1700000000 1 h@st=a\n".to_vec()),
        ("tagv-hash", b"put tel.a 1700000000 1 host=a#b\n".to_vec()),
        ("tags-two-bad", b"put tel.a 1700000000 1 host=a#b dc=c$d\n".to_vec()),
        ("latin1-letter", b"put tel.\xe9 1700000012 1 host=\xe9t\xe9\n".to_vec()),
        ("latin1-non-letter", b"put tel.a 1700000000 1 host=\xa7\n".to_vec()),
        ("utf8-cjk", "put tel.a 1700000000 1 host=\u{4e2d}\u{56fd}\n".as_bytes().to_vec()),
        ("byte-0x80", b"put tel.a 1700000000 1 host=\x80\n".to_vec()),
        ("crlf", b"put tel.a 1700000013 1 host=a\r\n".to_vec()),
        ("crlf-error", b"put tel.a x 1 host=a\r\n".to_vec()),
        ("double-space-tags", b"put tel.a 1700000014 1 host=a  dc=b\n".to_vec()),
        ("trailing-spaces", b"put tel.a 1700000015 1 host=a   \n".to_vec()),
        ("tab-separated", b"put\ttel.a\t1700000000\t1\thost=a\n".to_vec()),
        ("leading-space", b" put tel.a 1700000016 1 host=a\n".to_vec()),
        ("uppercase-put", b"PUT tel.a 1700000000 1 host=a\n".to_vec()),
        ("unknown-command", b"foo bar\n".to_vec()),
        ("empty-line", b"\n".to_vec()),
        ("rollup-short", b"rollup 1m-sum tel.r 1700000000 1\n".to_vec()),
        ("rollup-empty-interval", b"rollup  tel.r 1700000000 1 host=a\n".to_vec()),
        ("rollup-1m-sum", b"rollup 1m-sum tel.r 1700000000 1 host=a\n".to_vec()),
        ("rollup-1h-max", b"rollup 1h-max tel.r 1700000000 2 host=a\n".to_vec()),
        ("rollup-preagg", b"rollup sum tel.r 1700000000 3 host=a\n".to_vec()),
        ("rollup-no-such-interval", b"rollup 2m-sum tel.r 1700000000 1 host=a\n".to_vec()),
        ("rollup-bad-agg", b"rollup 1m-foo tel.r 1700000000 1 host=a\n".to_vec()),
        ("rollup-ms", b"rollup 1m-sum tel.r 1700000000000 1 host=a\n".to_vec()),
        ("rollup-default-interval", b"rollup 1s-sum tel.r 1700000000 1 host=a\n".to_vec()),
        ("histogram", b"histogram tel.h 1700000000 1 host=a\n".to_vec()),
        ("histogram-short", b"histogram tel.h\n".to_vec()),
    ];
    // The auto-created metric check comes last: a fresh metric that is fine.
    cases.push(("new-metric", b"put tel.new.metric 1479496160 1.3e3 host=web01\n".to_vec()));
    cases.into_iter().map(|(id, line)| (format!("telnet/catalogue/{id}"), line)).collect()
}

const NAME_POOL: &[&str] = &["gen.cpu", "gen.mem", "gen.disk.io", "gen.net_rx", "gen.a-b/c"];
const TAGK_POOL: &[&str] = &["host", "cpu", "dc", "env", "k1", "k2", "k3", "k4", "k5", "rack"];
const TAGV_POOL: &[&str] = &["web01", "web02", "0", "1", "lga", "prod", "a.b", "x_y", "z-9", "v/1"];
/// Bytes that fail validation (or not: the Latin-1 letter 0xE9), as telnet would carry them.
const BAD_BYTES: &[&[u8]] = &[
    b"!",
    b"@",
    b"#",
    b"$",
    b"%",
    b"^",
    b"&",
    b"*",
    b"(",
    b"+",
    b"?",
    b"~",
    b"\xe9",
    b"\xe4\xb8\xad",
    b"\x7f",
    b"|",
    b"\"",
];
const GOOD_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-_./";

fn gen_name(rng: &mut Rng, pool: &[&str]) -> Vec<u8> {
    let mut name: Vec<u8> = if rng.chance(75) {
        rng.pick(pool).as_bytes().to_vec()
    } else {
        let len = rng.range(1, 12);
        (0..len).map(|_| *rng.pick(GOOD_CHARS)).collect()
    };
    if rng.chance(6) {
        let at = rng.below(name.len() as u64 + 1) as usize;
        let bad = rng.pick(BAD_BYTES);
        name.splice(at..at, bad.iter().copied());
    }
    name
}

fn gen_timestamp(rng: &mut Rng) -> String {
    let secs = 1_600_000_000 + rng.range(0, 86_400 * 3);
    match rng.below(20) {
        0..=8 => secs.to_string(),
        9..=12 => (secs * 1000 + rng.range(0, 999)).to_string(),
        13 => format!("{secs}.{:03}", rng.range(0, 999)),
        14 => format!("{secs}.{}", rng.range(0, 9)),
        15 => rng
            .pick(&["0", "-1", "4294967295", "4294967296", "9999999999999", "10000000000000", "+1600000000"])
            .to_string(),
        16 => rng.pick(&["", "abc", "1e9", "16000000x0", "-", "99999999999999999999", "1600000000 "]).to_string(),
        17 => rng.range(1, i64::MAX).to_string(),
        18 => format!("-{}", rng.range(1, 1_700_000_000)),
        _ => (secs * 1000).to_string(),
    }
}

fn gen_int(rng: &mut Rng) -> i64 {
    let (lo, hi): (i64, i64) =
        *rng.pick(&[(-128, 127), (-32768, 32767), (i32::MIN as i64, i32::MAX as i64), (i64::MIN, i64::MAX), (0, 10)]);
    match rng.below(4) {
        0 => lo,
        1 => hi,
        _ => {
            let span = (hi as i128 - lo as i128 + 1) as u128;
            (lo as i128 + (rng.next() as u128 % span) as i128) as i64
        }
    }
}

/// A value word: ints of every width, floats in several spellings, and broken ones.
fn gen_value(rng: &mut Rng) -> String {
    match rng.below(20) {
        0..=6 => gen_int(rng).to_string(),
        7..=9 => format!("{}.{}", rng.range(-100_000, 100_000), rng.range(0, 99_999)),
        10 => format!("{}e{}", rng.range(-9, 9), rng.range(-45, 45)),
        11 => format!("{}.{}E{}", rng.range(0, 9), rng.range(0, 999), rng.range(-310, 310)),
        12 => {
            let x = f64::from_bits(rng.next());
            if x.is_finite() {
                format!("{x:e}")
            } else {
                "1.5".to_string()
            }
        }
        13 => format!("{}", (rng.range(-1_000_000, 1_000_000) as f64) / 1024.0),
        14 => rng
            .pick(&["0.1", "12.3", "42.5", "3.14159", "1.0e39", "4.508277154265837E7", "0.6116398572921753"])
            .to_string(),
        15 => rng
            .pick(&["NaN", "Infinity", "-Infinity", "1e999", "0x10", "1,5", "", "--1", "1e", "1.5f", ".", "+"])
            .to_string(),
        16 => format!("{}", rng.range(i64::MIN / 2, i64::MAX / 2) as i128 * 4),
        17 => format!("0{}", rng.range(0, 99999)),
        _ => rng.range(-1000, 1000).to_string(),
    }
}

fn gen_telnet_line(rng: &mut Rng) -> (String, Vec<u8>) {
    let mut kind = Vec::new();
    let mut line = b"put ".to_vec();
    if rng.chance(2) {
        kind.push("empty-metric");
    } else {
        line.extend(gen_name(rng, NAME_POOL));
    }
    line.push(b' ');
    line.extend(gen_timestamp(rng).into_bytes());
    line.push(b' ');
    line.extend(gen_value(rng).into_bytes());
    let ntags = *rng.pick(&[0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 8, 9, 10]);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for _ in 0..ntags {
        line.push(b' ');
        if rng.chance(3) {
            line.push(b' ');
            kind.push("double-space");
        }
        let mut k = gen_name(rng, TAGK_POOL);
        if rng.chance(4) && !keys.is_empty() {
            k = rng.pick(&keys).clone();
            kind.push("dup-key");
        }
        keys.push(k.clone());
        let v = gen_name(rng, TAGV_POOL);
        match rng.below(40) {
            0 => kind.push("no-eq"),
            1 => line.push(b'='),
            _ => {}
        }
        line.extend(&k);
        line.push(b'=');
        if rng.below(40) == 0 {
            line.push(b'=');
            kind.push("two-eq");
        }
        if rng.below(40) != 0 {
            line.extend(v);
        }
    }
    if rng.chance(4) {
        line.push(b' ');
    }
    if rng.chance(5) {
        line.extend(b"\r\n");
    } else {
        line.push(b'\n');
    }
    kind.dedup();
    (kind.join("+"), line)
}

fn run_telnet(rtsd: SocketAddr, reference: SocketAddr, tally: &mut Tally, seed: u64, cases: usize) {
    let (mut a, mut b) = (Telnet::new(rtsd), Telnet::new(reference));
    let mut lines = telnet_catalogue();
    let mut rng = Rng(seed ^ 0x7e1e);
    for n in 0..cases * 3 {
        let (kind, line) = gen_telnet_line(&mut rng);
        lines.push((format!("telnet/gen/{n}{}{kind}", if kind.is_empty() { "" } else { ":" }), line));
    }
    for (id, line) in lines {
        let (ra, rb) = (a.exchange(&line), b.exchange(&line));
        let shown: String = line.iter().map(|&b| b as char).collect();
        tally.record(&id, &format!("telnet {shown:?}"), &ra, &rb);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// /api/put

fn put_bodies() -> Vec<(&'static str, String)> {
    let p = |fields: &str| format!("{{{fields}}}");
    let ok = r#""metric":"put.a","timestamp":1700000000,"value":42,"tags":{"host":"web01"}"#;
    vec![
        ("single", p(ok)),
        (
            "array",
            format!(
                "[{},{}]",
                p(ok),
                p(r#""metric":"put.a","timestamp":1700000001,"value":1.5,"tags":{"host":"web02","dc":"lga"}"#)
            ),
        ),
        ("empty-array", "[]".into()),
        ("empty-object", "{}".into()),
        ("null", "null".into()),
        ("string", "\"x\"".into()),
        ("number", "42".into()),
        ("whitespace", "   ".into()),
        ("empty", String::new()),
        ("array-null", "[null]".into()),
        ("array-null-and-ok", format!("[null,{}]", p(ok))),
        ("truncated", r#"{"metric":"put.a","timestamp":17"#.into()),
        ("trailing-comma", format!("[{},]", p(ok))),
        ("unquoted-key", r#"{metric:"put.a","timestamp":1700000000,"value":1,"tags":{"host":"a"}}"#.into()),
        ("no-metric", p(r#""timestamp":1700000000,"value":1,"tags":{"host":"a"}"#)),
        ("empty-metric", p(r#""metric":"","timestamp":1700000000,"value":1,"tags":{"host":"a"}"#)),
        ("null-metric", p(r#""metric":null,"timestamp":1700000000,"value":1,"tags":{"host":"a"}"#)),
        ("number-metric", p(r#""metric":42,"timestamp":1700000000,"value":1,"tags":{"host":"a"}"#)),
        ("no-timestamp", p(r#""metric":"put.a","value":1,"tags":{"host":"a"}"#)),
        ("zero-timestamp", p(r#""metric":"put.a","timestamp":0,"value":1,"tags":{"host":"a"}"#)),
        ("negative-timestamp", p(r#""metric":"put.a","timestamp":-1,"value":1,"tags":{"host":"a"}"#)),
        ("string-timestamp", p(r#""metric":"put.a","timestamp":"1700000002","value":1,"tags":{"host":"a"}"#)),
        ("float-timestamp", p(r#""metric":"put.a","timestamp":1700000003.7,"value":1,"tags":{"host":"a"}"#)),
        (
            "dotted-string-timestamp",
            p(r#""metric":"put.a","timestamp":"1700000003.250","value":1,"tags":{"host":"a"}"#),
        ),
        ("ms-timestamp", p(r#""metric":"put.a","timestamp":1700000004123,"value":1,"tags":{"host":"a"}"#)),
        ("too-big-timestamp", p(r#""metric":"put.a","timestamp":10000000000000,"value":1,"tags":{"host":"a"}"#)),
        ("bad-string-timestamp", p(r#""metric":"put.a","timestamp":"abc","value":1,"tags":{"host":"a"}"#)),
        ("null-value", p(r#""metric":"put.a","timestamp":1700000000,"value":null,"tags":{"host":"a"}"#)),
        ("empty-value", p(r#""metric":"put.a","timestamp":1700000000,"value":"","tags":{"host":"a"}"#)),
        ("text-value", p(r#""metric":"put.a","timestamp":1700000000,"value":"abc","tags":{"host":"a"}"#)),
        ("string-number-value", p(r#""metric":"put.a","timestamp":1700000005,"value":"17","tags":{"host":"a"}"#)),
        ("true-value", p(r#""metric":"put.a","timestamp":1700000000,"value":true,"tags":{"host":"a"}"#)),
        ("nan-token", p(r#""metric":"put.a","timestamp":1700000000,"value":NaN,"tags":{"host":"a"}"#)),
        ("infinity-token", p(r#""metric":"put.a","timestamp":1700000000,"value":Infinity,"tags":{"host":"a"}"#)),
        ("minus-infinity-token", p(r#""metric":"put.a","timestamp":1700000000,"value":-Infinity,"tags":{"host":"a"}"#)),
        ("inf-token", p(r#""metric":"put.a","timestamp":1700000000,"value":INF,"tags":{"host":"a"}"#)),
        ("1e999", p(r#""metric":"put.a","timestamp":1700000000,"value":1e999,"tags":{"host":"a"}"#)),
        ("big-int", p(r#""metric":"put.a","timestamp":1700000006,"value":9223372036854775807,"tags":{"host":"a"}"#)),
        (
            "too-big-int",
            p(r#""metric":"put.a","timestamp":1700000000,"value":9223372036854775808,"tags":{"host":"a"}"#),
        ),
        ("float-value", p(r#""metric":"put.a","timestamp":1700000007,"value":0.1,"tags":{"host":"a"}"#)),
        ("exp-value", p(r#""metric":"put.a","timestamp":1700000008,"value":1.5E3,"tags":{"host":"a"}"#)),
        ("no-tags", p(r#""metric":"put.a","timestamp":1700000000,"value":1"#)),
        ("null-tags", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":null"#)),
        ("empty-tags", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":{}"#)),
        ("number-tag-value", p(r#""metric":"put.a","timestamp":1700000009,"value":1,"tags":{"host":42}"#)),
        ("null-tag-value", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":{"host":null}"#)),
        ("array-tags", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":["host"]"#)),
        (
            "nine-tags",
            p(
                r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9"}"#,
            ),
        ),
        ("bad-metric-char", p(r#""metric":"put a","timestamp":1700000000,"value":1,"tags":{"host":"a"}"#)),
        ("bad-tagk-char", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":{"ho st":"a"}"#)),
        ("bad-tagv-char", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":{"host":"a!"}"#)),
        ("empty-tagv", p(r#""metric":"put.a","timestamp":1700000000,"value":1,"tags":{"host":""}"#)),
        ("latin1-name", p(r#""metric":"put.é","timestamp":1700000010,"value":1,"tags":{"host":"é"}"#)),
        ("unknown-field", p(r#""metric":"put.a","timestamp":1700000011,"value":1,"tags":{"host":"a"},"extra":[1,2]"#)),
        ("tsuid-field", p(r#""metric":"put.a","timestamp":1700000012,"value":1,"tags":{"host":"a"},"tsuid":"000001""#)),
        (
            "mixed-good-bad",
            format!(
                "[{},{},{}]",
                p(ok),
                p(r#""metric":"put.a","timestamp":0,"value":1,"tags":{"host":"a"}"#),
                p(r#""metric":"put.b","timestamp":1700000000,"value":"x","tags":{"host":"a","dc":"b"}"#)
            ),
        ),
    ]
}

const PUT_FLAGS: &[&str] = &["", "?summary", "?details", "?summary&details", "?details=false", "?summary=false"];

/// A JSON data point with every field possibly odd (raw text, so tokens like NaN can be sent).
fn gen_put_point(rng: &mut Rng) -> String {
    let s = |b: Vec<u8>| serde_json::to_string(&String::from_utf8_lossy(&b)).unwrap();
    let mut fields = Vec::new();
    match rng.below(30) {
        0 => {}
        1 => fields.push(r#""metric":null"#.to_string()),
        2 => fields.push(r#""metric":"""#.to_string()),
        _ => fields.push(format!(r#""metric":{}"#, s(gen_name(rng, NAME_POOL)))),
    }
    match rng.below(30) {
        0 => {}
        1 => fields.push(r#""timestamp":null"#.to_string()),
        2 => fields.push(format!(r#""timestamp":"{}""#, 1_600_000_000 + rng.range(0, 86_400))),
        3 => fields.push(format!(r#""timestamp":"{}""#, gen_timestamp(rng))),
        _ => {
            let t = gen_timestamp(rng);
            if t.parse::<i64>().is_ok() {
                fields.push(format!(r#""timestamp":{t}"#));
            } else {
                fields.push(format!(r#""timestamp":{}"#, serde_json::to_string(&t).unwrap()));
            }
        }
    }
    let v = gen_value(rng);
    match rng.below(30) {
        0 => {}
        1 => fields.push(r#""value":null"#.to_string()),
        2..=9 => fields.push(format!(r#""value":{}"#, serde_json::to_string(&v).unwrap())),
        _ => {
            // As a JSON number when it is one (or one of the non-numeric tokens 2.4's parser allows).
            let n = serde_json::from_str::<Value>(&v).is_ok_and(|x| x.is_number())
                || ["NaN", "Infinity", "-Infinity"].contains(&v.as_str());
            fields.push(if n {
                format!(r#""value":{v}"#)
            } else {
                format!(r#""value":{}"#, serde_json::to_string(&v).unwrap())
            });
        }
    }
    match rng.below(30) {
        0 => {}
        1 => fields.push(r#""tags":null"#.to_string()),
        2 => fields.push(r#""tags":{}"#.to_string()),
        _ => {
            let n = *rng.pick(&[1, 1, 2, 2, 3, 4, 9]);
            let tags: Vec<String> =
                (0..n).map(|_| format!("{}:{}", s(gen_name(rng, TAGK_POOL)), s(gen_name(rng, TAGV_POOL)))).collect();
            fields.push(format!(r#""tags":{{{}}}"#, tags.join(",")));
        }
    }
    // Field order varies too: the reply's datapoint echo has its own order.
    if rng.chance(30) {
        fields.reverse();
    }
    format!("{{{}}}", fields.join(","))
}

fn run_put(pair: &mut Pair, seed: u64, cases: usize) {
    for (name, body) in put_bodies() {
        for flags in PUT_FLAGS {
            pair.http(&format!("put/catalogue/{name}{flags}"), "POST", &format!("/api/put{flags}"), &body);
        }
    }
    let ok = r#"{"metric":"put.s","timestamp":1700000000,"value":1,"tags":{"host":"a"}}"#;
    let bad = r#"[{"metric":"put.s","timestamp":1700000001,"value":1,"tags":{"host":"a"}},{"metric":"put.s","timestamp":0,"value":1,"tags":{"host":"a"}}]"#;
    for (id, method, path, body) in [
        ("sync", "POST", "/api/put?sync", ok),
        ("sync-details", "POST", "/api/put?sync&details", bad),
        ("sync-summary", "POST", "/api/put?sync=false&summary", ok),
        ("sync-timeout-summary", "POST", "/api/put?sync_timeout=5000&summary", ok),
        ("sync-timeout-details", "POST", "/api/put?sync&sync_timeout=5000&details", bad),
        ("sync-timeout-bad", "POST", "/api/put?sync_timeout=abc", ok),
        ("jsonp-summary", "POST", "/api/put?summary&jsonp=cb", ok),
        ("get", "GET", "/api/put", ""),
        ("delete", "DELETE", "/api/put", ""),
        ("uppercase-path", "POST", "/API/PUT", ok),
        ("trailing-slash", "POST", "/api/put/", ok),
        ("v1", "POST", "/api/v1/put", ok),
        ("v2", "POST", "/api/v2/put", ok),
        ("unknown-serializer", "POST", "/api/put?serializer=nope", ok),
    ] {
        pair.http(&format!("put/flags/{id}"), method, path, body);
    }
    let mut rng = Rng(seed ^ 0x9a7);
    for n in 0..cases {
        let points: Vec<String> = (0..rng.range(1, 4)).map(|_| gen_put_point(&mut rng)).collect();
        let body =
            if points.len() == 1 && rng.chance(50) { points[0].clone() } else { format!("[{}]", points.join(",")) };
        let flags = rng.pick(PUT_FLAGS);
        pair.http(&format!("put/gen/{n}{flags}"), "POST", &format!("/api/put{flags}"), &body);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The shared data set and /api/query

struct Series {
    metric: &'static str,
    tags: Vec<(&'static str, &'static str)>,
    /// (timestamp, value) as JSON number text
    points: Vec<(i64, String)>,
}

fn data_set(rng: &mut Rng) -> Vec<Series> {
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

const AGGREGATORS: &[&str] = &[
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
const DS_AGGREGATORS: &[&str] =
    &["sum", "avg", "min", "max", "count", "dev", "first", "last", "p50", "p95", "zimsum", "mimmax"];
const FILLS: &[&str] = &["", "-none", "-nan", "-null", "-zero"];
/// Downsample intervals no rollup interval (1m, 10m, 1h) divides, so both servers read raw data; the rollup path
/// has its own cases (`rollup_queries`).
const INTERVALS: &[&str] = &["30s", "45s", "90s", "17s", "150s", "0all", "5s", "1s"];
const METRICS: &[&str] = &["dq.cpu", "dq.counter", "dq.float", "dq.ms", "dq.sparse", "dq.big"];
const TAG_SPECS: &[&str] = &[
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

fn gen_m(rng: &mut Rng) -> String {
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

fn gen_range(rng: &mut Rng) -> (String, String) {
    let s = T0 - 600 + rng.range(0, 7200);
    let e = s + rng.range(1, 10_800);
    match rng.below(8) {
        0 => ((s * 1000 + rng.range(0, 999)).to_string(), (e * 1000).to_string()),
        1 => ("2023/11/14-22:00:00".into(), "2023/11/15-01:30:00".into()),
        _ => (s.to_string(), e.to_string()),
    }
}

fn gen_get_query(rng: &mut Rng) -> String {
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

fn gen_post_query(rng: &mut Rng) -> String {
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

fn query_errors() -> Vec<(&'static str, &'static str, &'static str, String)> {
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
fn rollup_queries() -> Vec<(String, String)> {
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

fn run_queries(pair: &mut Pair, seed: u64, cases: usize) {
    for (id, method, body, path) in query_errors() {
        pair.http(&format!("query/error/{id}"), method, &path, body);
    }
    for (id, path) in rollup_queries() {
        pair.http(&id, "GET", &path, "");
    }
    let mut rng = Rng(seed ^ 0x0e7);
    for n in 0..cases {
        pair.http(&format!("query/get/{n}"), "GET", &gen_get_query(&mut rng), "");
    }
    for n in 0..cases / 2 {
        pair.http(&format!("query/post/{n}"), "POST", "/api/query", &gen_post_query(&mut rng));
    }
}

/// `/api/uid/assign` of every name of the data set, one request per name (the UIDs are the counter's next value
/// on both sides), then the data set by `/api/put?sync` in the same order to both.
fn write_data_set(pair: &mut Pair, series: &[Series]) {
    let mut names: Vec<(&str, &str)> = Vec::new();
    for s in series {
        names.push(("metric", s.metric));
        for (k, v) in &s.tags {
            names.push(("tagk", k));
            names.push(("tagv", v));
        }
    }
    let mut seen = BTreeSet::new();
    for (kind, name) in names {
        if seen.insert((kind, name)) {
            pair.http(&format!("uid/assign/{kind}/{name}"), "GET", &format!("/api/uid/assign?{kind}={name}"), "");
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
    for (i, batch) in points.chunks(400).enumerate() {
        let (a, b) =
            pair.http(&format!("dataset/put/{i}"), "POST", "/api/put?sync&details", &format!("[{}]", batch.join(",")));
        assert!(a.starts_with("200 ") && b.starts_with("200 "), "data set batch {i}: rtsd {a}\nOpenTSDB {b}");
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Other endpoints

fn run_misc(pair: &mut Pair) {
    // /api/version: the values are each server's own (version strings, build host, timestamps); the key set is
    // compared.
    // A text answer (the telnet-style `version` lines) carries the build's revision, time, user and host: only its
    // line count and first word are kept.
    let keys = |body: &str| match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(m)) => format!("keys {:?}", m.keys().collect::<Vec<_>>()),
        _ => format!(
            "text: {} lines, first word {:?}",
            body.lines().count(),
            body.split_whitespace().next().unwrap_or_default()
        ),
    };
    pair.http_normalised("misc/version", "GET", "/api/version", "", keys);
    pair.http_normalised("misc/version-post", "POST", "/api/version", "", keys);
    pair.http_normalised("misc/old-version", "GET", "/version?json", "", keys);
    for (id, path) in [
        ("aggregators", "/api/aggregators"),
        ("old-aggregators", "/aggregators?json"),
        ("config-filters", "/api/config/filters"),
        ("serializers", "/api/serializers"),
        ("suggest-metrics", "/api/suggest?type=metrics&q=dq"),
        ("suggest-all", "/api/suggest?type=metrics"),
        ("suggest-max", "/api/suggest?type=metrics&q=dq.&max=2"),
        ("suggest-max-bad", "/api/suggest?type=metrics&max=x"),
        ("suggest-tagk", "/api/suggest?type=tagk&q=h"),
        ("suggest-tagv", "/api/suggest?type=tagv&q=web"),
        ("suggest-bad-type", "/api/suggest?type=Metrics&q=dq"),
        ("suggest-no-type", "/api/suggest?q=dq"),
        ("suggest-none", "/api/suggest?type=metrics&q=zzz"),
        ("old-suggest", "/suggest?type=metrics&q=dq"),
        ("query-last", "/api/query/last?timeseries=dq.cpu%7Bhost=web01,cpu=0%7D"),
        ("query-last-resolve", "/api/query/last?timeseries=dq.cpu%7Bhost=web01,cpu=0%7D&resolve"),
        ("query-last-unknown", "/api/query/last?timeseries=dq.nope"),
        ("query-last-tsuids", "/api/query/last?tsuids=000001000001000001000002000002"),
        ("query-last-none", "/api/query/last"),
        ("uid-assign-existing", "/api/uid/assign?metric=dq.cpu"),
        ("uid-assign-mixed", "/api/uid/assign?metric=dq.cpu,misc.new1&tagk=host,misc_k&tagv=bad!v"),
        ("uid-assign-nothing", "/api/uid/assign"),
        ("uid-assign-empty", "/api/uid/assign?metric="),
        ("uidmeta-missing", "/api/uid/uidmeta?uid=FFFFFF&type=metric"),
        ("unknown-endpoint", "/api/nope"),
        ("v2-endpoint", "/api/v2/query"),
    ] {
        pair.http(&format!("misc/{id}"), "GET", path, "");
    }
    // UID meta's `created` is the time the UID was assigned when a server records it (rtsd: this run's clock): a
    // non-zero value becomes `<now>`; 0 (not recorded, 2.4.1 without realtime UID meta) stays, so that difference
    // still shows.
    let created = |body: &str| match body.find("\"created\":") {
        Some(i) => {
            let rest = &body[i + 10..];
            let end = rest.find([',', '}']).unwrap_or(rest.len());
            if &rest[..end] == "0" {
                body.to_string()
            } else {
                format!("{}\"created\":<now>{}", &body[..i], &rest[end..])
            }
        }
        None => body.to_string(),
    };
    pair.http_normalised("misc/uidmeta", "GET", "/api/uid/uidmeta?uid=000001&type=metric", "", created);
    pair.http(
        "misc/uid-assign-post",
        "POST",
        "/api/uid/assign",
        r#"{"metric":["misc.new2"],"tagk":["dc"],"tagv":["misc_v"]}"#,
    );
    pair.http("misc/suggest-post", "POST", "/api/suggest", r#"{"type":"metrics","q":"dq","max":3}"#);
    // search/lookup: `time` is how long the lookup took on each server; only its value is replaced.
    let time = |body: &str| match body.find("\"time\":") {
        Some(i) => {
            let rest = &body[i + 7..];
            let end = rest.find([',', '}']).unwrap_or(rest.len());
            format!("{}\"time\":<t>{}", &body[..i], &rest[end..])
        }
        None => body.to_string(),
    };
    pair.http_normalised(
        "misc/lookup-post-no-meta",
        "POST",
        "/api/search/lookup",
        r#"{"metric":"dq.cpu","tags":[{"key":"host","value":"web01"}],"useMeta":false}"#,
        time,
    );
    for (id, path) in [
        ("lookup", "/api/search/lookup?m=dq.cpu%7Bhost=*%7D"),
        ("lookup-metric", "/api/search/lookup?m=dq.sparse"),
        ("lookup-tag-only", "/api/search/lookup?m=%7Bhost=web01%7D"),
        ("lookup-limit", "/api/search/lookup?m=dq.cpu&limit=2"),
        ("lookup-bad-limit", "/api/search/lookup?m=dq.cpu&limit=x"),
        ("lookup-unknown", "/api/search/lookup?m=dq.nope"),
        ("lookup-missing", "/api/search/lookup"),
    ] {
        pair.http_normalised(&format!("misc/{id}"), "GET", path, "", time);
    }
}

fn settings_like_reference(tb: &Testbed) -> Vec<(String, String)> {
    // The reference's own opentsdb.conf, for every property that changes what the compared requests answer.
    let conf = std::fs::read_to_string(tb.path().join("tsd/opentsdb.conf")).expect("reference opentsdb.conf");
    let wanted = [
        "tsd.core.auto_create_metrics",
        "tsd.core.auto_create_tagks",
        "tsd.core.auto_create_tagvs",
        "tsd.storage.fix_duplicates",
        "tsd.storage.max_tags",
        "tsd.storage.uid.width.metric",
        "tsd.storage.uid.width.tagk",
        "tsd.storage.uid.width.tagv",
        "tsd.storage.salt.width",
        "tsd.storage.salt.buckets",
        "tsd.rollups.enable",
        "tsd.rollups.config",
        "tsd.core.enable_api",
        "tsd.no_diediedie",
        "tsd.http.query.allow_delete",
        "tsd.rpc.telnet.return_errors",
        "tsd.http.request.enable_chunked",
    ];
    conf.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| wanted.contains(&k.as_str()))
        .collect()
}

#[test]
fn differential_against_opentsdb_2_4_1() {
    assert_eq!(rtsd_compat_tests::binary(), std::path::PathBuf::from(env!("CARGO_BIN_EXE_rtsd-compat")));
    let started = Instant::now();
    let seed = std::env::var("RTSD_DIFF_SEED").ok().map(|s| s.parse::<u64>().expect("RTSD_DIFF_SEED: a number"));
    let cases = std::env::var("RTSD_DIFF_CASES").ok().map(|s| s.parse::<usize>().expect("RTSD_DIFF_CASES: a number"));
    let default_run = seed.unwrap_or(DEFAULT_SEED) == DEFAULT_SEED && cases.unwrap_or(DEFAULT_CASES) == DEFAULT_CASES;
    let (seed, cases) = (seed.unwrap_or(DEFAULT_SEED), cases.unwrap_or(DEFAULT_CASES));

    let tb = Testbed::start("differential");
    let settings = settings_like_reference(&tb);
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let rtsd = Daemon::start_with(&settings);
    let up = started.elapsed();
    let mut tally = Tally::load();
    {
        let mut pair = Pair { rtsd: rtsd.addr(), reference: tb.tsd, tally: &mut tally };
        let mut rng = Rng(seed);
        let series = data_set(&mut rng);
        write_data_set(&mut pair, &series);
        run_queries(&mut pair, seed, cases);
        run_misc(&mut pair);
        run_put(&mut pair, seed, cases);
    }
    run_telnet(rtsd.addr(), tb.tsd, &mut tally, seed, cases);
    {
        // Last, as 2.4 deletes what it matched: a POST body's `"delete":true` with deleting disabled.
        let mut pair = Pair { rtsd: rtsd.addr(), reference: tb.tsd, tally: &mut tally };
        let body =
            r#"{"start":1700000000,"end":1700000100,"delete":true,"queries":[{"aggregator":"sum","metric":"put.a"}]}"#;
        pair.http("query/error/post-delete-disabled", "POST", "/api/query", body);
    }

    // (c) listed differences that no longer appear.
    let mut stale = Vec::new();
    for e in &tally.entries {
        if !e.agreed.is_empty() {
            stale.push(format!("{}: now identical in {:?}", e.id, &e.agreed[..e.agreed.len().min(5)]));
        } else if e.hits == 0 && default_run {
            stale.push(format!("{}: no case had this difference", e.id));
        }
    }
    let report: Vec<Value> = tally
        .new
        .iter()
        .chain(&tally.changed)
        .map(|(id, req, a, b)| json!({"id": id, "request": req, "rtsd": a, "opentsdb": b, "why": ""}))
        .collect();
    let report_path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential-new.json");
    std::fs::write(&report_path, serde_json::to_string_pretty(&json!({"differences": report})).unwrap())
        .expect("write report");
    for (id, req, a, b) in tally.new.iter().take(60) {
        eprintln!("NEW {id}\n  request:  {req}\n  rtsd:     {a:?}\n  opentsdb: {b:?}");
    }
    for (id, req, a, b) in &tally.changed {
        eprintln!("CHANGED {id}\n  request:  {req}\n  rtsd:     {a:?}\n  opentsdb: {b:?}");
    }
    for s in &stale {
        eprintln!("STALE {s}");
    }
    eprintln!(
        "differential: {} requests compared, {} identical, {} listed differences, {} new differences, {} changed, \
         {} stale list entries (seed {seed}, {cases} cases per kind; test bed + rtsd up in {:.0}s, total {:.0}s; \
         new ones written to {})",
        tally.compared,
        tally.identical,
        tally.listed,
        tally.new.len(),
        tally.changed.len(),
        stale.len(),
        up.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        report_path.display()
    );
    assert!(
        tally.new.is_empty() && tally.changed.is_empty() && stale.is_empty(),
        "{} new, {} changed differences, {} stale entries in compat-tests/differential/differences.json (see above)",
        tally.new.len(),
        tally.changed.len(),
        stale.len()
    );
    drop(rtsd);
    drop(tb);
}
