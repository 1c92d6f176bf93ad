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
use std::net::SocketAddr;
use std::time::Instant;

use rtsd_compat_tests::differential::*;
use rtsd_compat_tests::testbed::Testbed;
use rtsd_compat_tests::Daemon;
use serde_json::Value;

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

#[test]
fn differential_against_opentsdb_2_4_1() {
    assert_eq!(rtsd_compat_tests::binary(), std::path::PathBuf::from(env!("CARGO_BIN_EXE_rtsd-compat")));
    let started = Instant::now();
    let seed = std::env::var("RTSD_DIFF_SEED").ok().map(|s| s.parse::<u64>().expect("RTSD_DIFF_SEED: a number"));
    let cases = std::env::var("RTSD_DIFF_CASES").ok().map(|s| s.parse::<usize>().expect("RTSD_DIFF_CASES: a number"));
    let default_run = seed.unwrap_or(DEFAULT_SEED) == DEFAULT_SEED && cases.unwrap_or(DEFAULT_CASES) == DEFAULT_CASES;
    let (seed, cases) = (seed.unwrap_or(DEFAULT_SEED), cases.unwrap_or(DEFAULT_CASES));

    let tb = Testbed::start("differential");
    let settings = tb.rtsd_settings();
    let rtsd = Daemon::start_with(&settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>());
    let up = started.elapsed();
    // The layout test's entries (`layout/...`) are its own.
    let mut tally = Tally::load(|id| !id.starts_with(LAYOUT_PREFIX));
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
    let report_path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential-new.json");
    tally.write_report(&report_path);
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
