//! Differential test of both put paths under garbage: valid `put` lines (hosts h0-h4) and `/api/put` batches
//! (hosts h5-h9) of random values, widths and timestamps, interleaved with mutated lines and bodies, are queried
//! back point by point, then again after `kill -9` and a restart.
//!
//! It pins what the unit tests cannot see together: bad input next to good input never costs an accepted point
//! nor takes the daemon down (spec: ingest §1.7 "errors keep the connection"), duplicates resolve to the later
//! write with `tsd.storage.fix_duplicates=true` (spec: ingest §4.9), seconds and milliseconds of one instant are
//! one cell (ingest §4.9), values come back exactly as Java parses them (ingest §2.3: a float is stored on 4 bytes
//! only when that is exact) and typed as 2.4 types them (query §1.6: an integer followed by a float prints as a
//! double), and all of it survives a crash (README "Durability").
//!
//! The mutated lines and bodies use the metric prefix `xq.bad`, which a few byte edits cannot turn into the
//! checked `fz.m` metrics, so whatever of them is accepted cannot alias a checked point.
use std::collections::BTreeMap;
use std::io::Write;

use rtsd_compat_tests::{barrier, Daemon};

/// Data starts here: six closed hours, so rows are packed by compactions as well as read while open.
const BASE: i64 = 1_700_000_000 / 3600 * 3600;
const SPAN: i64 = 6 * 3600;
const METRICS: [&str; 4] = ["fz.m0", "fz.m1", "fz.m2", "fz.m3"];
const DCS: [&str; 2] = ["d0", "d1"];
const ROUNDS: usize = 200;

/// xorshift64*: deterministic, so a failure reproduces from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A stored value as the query prints it: integer or double.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
}

/// A value word valid for both telnet and JSON: integers of every width, floats that fit in 4 bytes and floats
/// that need 8, exponents, negative zero.
fn value_word(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=3 => {
            let bits = *rng.pick(&[7u32, 15, 31, 63]);
            let magnitude = rng.next() >> (64 - bits);
            if rng.chance(50) {
                format!("-{}", magnitude.max(1))
            } else {
                magnitude.to_string()
            }
        }
        4..=5 => rng
            .pick(&[
                "42.5",
                "0.1",
                "1e3",
                "-42.22e3",
                "12.3",
                "0.6116398572921753",
                "1.01417856E9",
                "4.508277154265837E7",
                "-0.0",
                "0.0",
                "1E-7",
                "100.25",
            ])
            .to_string(),
        _ => {
            let digits = 1 + rng.below(17) as u32;
            let mantissa = rng.next() % 10u64.pow(digits.min(19));
            let text = format!("{mantissa:0width$}", width = digits as usize);
            let point = rng.below(u64::from(digits) + 1) as usize;
            let (int, frac) = text.split_at(point);
            let int = int.trim_start_matches('0');
            let int = if int.is_empty() { "0" } else { int };
            let frac = if frac.is_empty() { "0" } else { frac };
            let sign = if rng.chance(30) { "-" } else { "" };
            format!("{sign}{int}.{frac}")
        }
    }
}

/// How Java reads the word (spec: ingest §2.3): no `.`/`e`/`E` means a long; Rust's f64 parse is correctly
/// rounded, as `Double.parseDouble` is.
fn parse_word(word: &str) -> Num {
    if word.contains(['.', 'e', 'E']) {
        Num::Float(word.parse().unwrap())
    } else {
        Num::Int(word.parse().unwrap())
    }
}

/// Up to four random byte edits, never a line break.
fn mutate(rng: &mut Rng, text: &str) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() as u64 + 1) as usize;
        match rng.below(3) {
            0 if at < b.len() => {
                b.remove(at);
            }
            1 => b.insert(at, *rng.pick(b" =.-_/\t\x00\xff{}\"eE+xN1,:[]")),
            _ if at < b.len() => b[at] = rng.below(256) as u8,
            _ => {}
        }
    }
    for c in &mut b {
        if *c == b'\n' || *c == b'\r' {
            *c = b' ';
        }
    }
    b
}

type Expected = BTreeMap<(String, String, String), BTreeMap<i64, Num>>;

struct Point {
    metric: &'static str,
    host: String,
    dc: &'static str,
    /// As sent: seconds or milliseconds.
    ts: i64,
    word: String,
}

impl Point {
    fn random(rng: &mut Rng, hosts: std::ops::Range<u64>) -> Point {
        let seconds = BASE + rng.below(SPAN as u64) as i64;
        // A few fixed instants collide on purpose: duplicates in seconds, in ms, and across the two.
        let seconds = if rng.chance(5) { BASE + 60 * rng.below(4) as i64 } else { seconds };
        let ts = if rng.chance(40) { seconds * 1000 + rng.below(1000) as i64 } else { seconds };
        Point {
            metric: rng.pick::<&str>(&METRICS),
            host: format!("h{}", hosts.start + rng.below(hosts.end - hosts.start)),
            dc: rng.pick::<&str>(&DCS),
            ts,
            word: value_word(rng),
        }
    }
    fn ms(&self) -> i64 {
        if self.ts > 9_999_999_999 {
            self.ts
        } else {
            self.ts * 1000
        }
    }
    fn record(&self, expected: &mut Expected) {
        let series = (self.metric.to_string(), self.host.clone(), self.dc.to_string());
        expected.entry(series).or_default().insert(self.ms(), parse_word(&self.word));
    }
    fn line(&self, metric: &str) -> String {
        format!("put {metric} {} {} host={} dc={}", self.ts, self.word, self.host, self.dc)
    }
    fn json(&self, metric: &str) -> String {
        format!(
            r#"{{"metric":"{metric}","timestamp":{},"value":{},"tags":{{"host":"{}","dc":"{}"}}}}"#,
            self.ts, self.word, self.host, self.dc
        )
    }
}

/// The raw `dps` of a one-series `/api/query` answer with `ms`: (timestamp, value text). Read from the text, not
/// through a JSON library, so the number text is compared exactly as the daemon formatted it.
fn raw_dps(body: &str) -> Vec<(i64, String)> {
    let Some(start) = body.find("\"dps\":{") else {
        assert_eq!(body, "[]", "a query answer without dps");
        return Vec::new();
    };
    let rest = &body[start + 7..];
    let object = &rest[..rest.find('}').expect("dps object ends")];
    if object.is_empty() {
        return Vec::new();
    }
    object
        .split(',')
        .map(|entry| {
            let (ts, value) = entry.split_once(':').expect("ts:value");
            (ts.trim_matches('"').parse().expect("ms timestamp"), value.to_string())
        })
        .collect()
}

fn check(d: &Daemon, expected: &Expected, when: &str) {
    let mut checked = 0;
    for ((metric, host, dc), points) in expected {
        let path = format!(
            "/api/query?start={}&end={}&m=sum:{metric}%7Bhost={host},dc={dc}%7D&ms",
            BASE - 3600,
            BASE + SPAN + 3600
        );
        let r = d.http("GET", &path, &[], b"");
        assert_eq!(r.status, 200, "{when}: {path}: {}", r.text());
        let got = raw_dps(&r.text());
        assert_eq!(
            got.iter().map(|(ts, _)| *ts).collect::<Vec<_>>(),
            points.keys().copied().collect::<Vec<_>>(),
            "{when}: timestamps of {metric} host={host} dc={dc}"
        );
        // spec: query §1.6 value typing: an integer prints as a double when the series' next point is a float.
        let values: Vec<Num> = points.values().copied().collect();
        for (i, ((ts, text), want)) in got.iter().zip(&values).enumerate() {
            let next_is_float = matches!(values.get(i + 1), Some(Num::Float(_)));
            let printed = if text.contains(['.', 'E']) {
                Num::Float(text.parse().unwrap_or_else(|e| panic!("{when}: {text}: {e}")))
            } else {
                Num::Int(text.parse().unwrap_or_else(|e| panic!("{when}: {text}: {e}")))
            };
            let want = match *want {
                Num::Int(v) if next_is_float => Num::Float(v as f64),
                // `sum`'s double path starts from 0.0 (Aggregators.Sum.runDouble), so a stored -0.0 prints 0.0.
                Num::Float(v) => Num::Float(0.0 + v),
                w => w,
            };
            let same = match (printed, want) {
                // -0.0 and 0.0 differ in their text but not as numbers; compare bits otherwise.
                (Num::Float(a), Num::Float(b)) => a == b && (a != 0.0 || a.is_sign_negative() == b.is_sign_negative()),
                (a, b) => a == b,
            };
            assert!(same, "{when}: {metric} host={host} dc={dc} at {ts}: got {text}, want {want:?}");
            checked += 1;
        }
    }
    assert!(checked > 40_000, "{when}: only {checked} points checked");
}

// spec: ingest §1.7, §2.3, §4.9; query §1.6; README "Durability".
#[test]
fn accepted_points_survive_garbage_duplicates_and_kill9() {
    let mut d = Daemon::start_with(&[("tsd.storage.fix_duplicates", "true")]);
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut expected = Expected::new();
    let mut telnet = d.telnet();
    let mut http = d.http_conn();
    let mut bad_replies = 0;
    for round in 0..ROUNDS {
        let mut wire = Vec::new();
        for _ in 0..300 {
            let p = Point::random(&mut rng, 0..5);
            if rng.chance(80) {
                p.record(&mut expected);
                wire.extend_from_slice(p.line(p.metric).as_bytes());
            } else {
                let mut line = mutate(&mut rng, &p.line(&p.metric.replace("fz.m", "xq.bad")));
                // Longer lines close the connection (ingest §1.2); that is another test's subject.
                line.truncate(1000);
                wire.extend_from_slice(&line);
            }
            wire.push(b'\n');
        }
        telnet.write_all(&wire).unwrap();
        let replies = barrier(&mut telnet);
        // Every reply is an error about a mutated line: none names a checked metric.
        let about_valid: Vec<&String> = replies.iter().filter(|l| l.contains("fz.m")).collect();
        assert!(about_valid.is_empty(), "round {round}: errors on valid lines: {about_valid:?}");
        bad_replies += replies.len();

        let points: Vec<Point> = (0..1 + rng.below(150)).map(|_| Point::random(&mut rng, 5..10)).collect();
        let body = format!("[{}]", points.iter().map(|p| p.json(p.metric)).collect::<Vec<_>>().join(","));
        let r = http.request("POST", "/api/put?details", &[("Content-Type", "application/json")], body.as_bytes());
        assert_eq!(r.status, 200, "round {round}: {}", r.text());
        assert_eq!(r.text(), format!(r#"{{"success":{},"failed":0,"errors":[]}}"#, points.len()));
        points.iter().for_each(|p| p.record(&mut expected));
        if rng.chance(50) {
            let bad = mutate(&mut rng, &body.replace("\"fz.m", "\"xq.bad"));
            let r = d.http("POST", "/api/put?details", &[("Content-Type", "application/json")], &bad);
            assert!(r.status < 500, "round {round}: a mutated body got {}: {}", r.status, r.text());
        }
    }
    assert!(bad_replies > 1000, "the mutated lines drew only {bad_replies} error replies");
    check(&d, &expected, "before the crash");
    d.kill9();
    let d = d.restart();
    check(&d, &expected, "after kill -9 and a restart");
}
