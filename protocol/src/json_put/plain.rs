//! The put bodies collectors send, read without building [`IncomingPoint`]s (spec: ingest §3.2).
//!
//! Nearly every `/api/put` body is an array of objects with exactly `metric`, `timestamp`, `value` and `tags`,
//! plain ASCII strings and JSON numbers. For those, this scanner records each point as borrowed slices of the
//! body (no per-point allocation, no token values, no tag vectors) at a fraction of the general reader's cost.
//! It gives up ([`parse_plain_put_body`] returns `None`) on anything else — escapes, non-ASCII or control
//! characters below the space, other or repeated fields, repeated tag keys, `null`s, non-numeric values, fractional or huge
//! timestamps, empty arrays or tag maps, any syntax error — and the caller then reads the body with
//! [`super::parse_put_body`], which owns every coercion and every error text. So when it answers, it answers
//! exactly what the general reader would (tests below and the `plain_agrees_with_general` property hold it to
//! that), and it never has to produce an error of its own.

use std::borrow::Cow;
use std::ops::Range;

use super::IncomingPoint;

/// A put body of the common shape: its points in order, their tags in one shared list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainBody<'a> {
    pub points: Vec<PlainPoint<'a>>,
    tags: Vec<(&'a str, &'a str)>,
}

/// One point of a [`PlainBody`]: the fields as the general reader would hold them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainPoint<'a> {
    pub metric: &'a str,
    pub timestamp: i64,
    /// The literal text of the JSON number, or a string's content.
    pub value: &'a str,
    tags: Range<usize>,
}

impl<'a> PlainBody<'a> {
    /// The point's tags in body order (keys distinct).
    pub fn tags(&self, p: &PlainPoint<'a>) -> &[(&'a str, &'a str)] {
        self.tags.get(p.tags.clone()).unwrap_or(&[])
    }

    /// The point as [`super::parse_put_body`] reads it (for the paths that need the general form: new series,
    /// per-point errors, `details`).
    pub fn incoming(&self, p: &PlainPoint<'a>) -> IncomingPoint<'a> {
        IncomingPoint {
            metric: Some(Cow::Borrowed(p.metric)),
            timestamp: p.timestamp,
            value: Some(Cow::Borrowed(p.value)),
            tags: Some(self.tags(p).iter().map(|&(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v))).collect()),
            tsuid: None,
            rollup: None,
            null_tags: Vec::new(),
        }
    }
}

/// Reads an `/api/put` body of the common shape (see the module docs), or `None` for any other body.
pub fn parse_plain_put_body(body: &[u8]) -> Option<PlainBody<'_>> {
    // As the general reader: Java's String.trim() at both ends, JSON whitespace between tokens.
    let start = body.iter().position(|&b| b > b' ')?;
    let end = body.iter().rposition(|&b| b > b' ')? + 1;
    // One UTF-8 check for the whole body (fast for ASCII), so that slicing text out of it costs nothing more.
    let text = std::str::from_utf8(&body[..end]).ok()?;
    let mut s = Scan { buf: text.as_bytes(), text, pos: start };
    // Each point of a collector's body takes 80-130 bytes.
    let mut out = PlainBody { points: Vec::with_capacity(end / 96 + 1), tags: Vec::with_capacity(end / 24 + 1) };
    match s.buf[start] {
        b'{' => s.point(&mut out)?,
        b'[' => {
            s.pos += 1;
            loop {
                s.point(&mut out)?;
                s.ws();
                match s.next()? {
                    b',' => {}
                    b']' => break,
                    _ => return None,
                }
            }
        }
        _ => return None,
    }
    s.ws();
    (s.pos == s.buf.len()).then_some(out)
}

#[derive(Clone, Copy)]
enum Field {
    Metric,
    Timestamp,
    Value,
    Tags,
}

/// More tag keys than this in one point: left to the general reader (which indexes large maps), so repeated-key
/// checks here stay a short linear scan.
const MAX_TAGS: usize = 32;

/// Bytes that may stand in a plain string: ASCII from the space up, except `"` and `\\` (DEL too: the general
/// reader takes it raw, and so the same text results).
static PLAIN_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = b' ';
    while b < 0x80 {
        t[b as usize] = b != b'"' && b != b'\\';
        b += 1;
    }
    t
};

/// Eight copies of a byte in a word.
const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// A bit set in the high bit of each byte of `w` that is not a [`PLAIN_BYTE`]; bits above the lowest set one may
/// be spurious (borrows), the lowest is exact.
#[inline]
fn special_bytes(w: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(splat(1)) & !v & splat(0x80);
    let control = w.wrapping_sub(splat(0x20)) & !w & splat(0x80);
    zero(w ^ splat(b'"')) | zero(w ^ splat(b'\\')) | control | (w & splat(0x80))
}

struct Scan<'a> {
    buf: &'a [u8],
    /// `buf` as text.
    text: &'a str,
    pos: usize,
}

impl<'a> Scan<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.buf.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The byte at the cursor, consumed.
    #[inline]
    fn next(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Whitespace, then `b`.
    #[inline]
    fn expect(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.next()? == b).then_some(())
    }

    /// Whitespace, then a string of ASCII from the space up, without escapes.
    #[inline]
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        let rest = self.buf.get(start..)?;
        // Eight bytes at a time while there are eight, then byte by byte.
        let mut len = 0;
        let end = loop {
            match rest.get(len..len + 8) {
                Some(chunk) => {
                    let mut word = [0u8; 8];
                    word.copy_from_slice(chunk);
                    let special = special_bytes(u64::from_le_bytes(word));
                    if special != 0 {
                        break len + (special.trailing_zeros() / 8) as usize;
                    }
                    len += 8;
                }
                None => break len + rest.get(len..)?.iter().position(|&b| !PLAIN_BYTE[usize::from(b)])?,
            }
        };
        if rest[end] != b'"' {
            return None;
        }
        self.pos += end + 1;
        self.text.get(start..start + end)
    }

    /// Whitespace, then a JSON number as the general reader's grammar has it (no leading zeros, digits after `.`
    /// and after the exponent): its text and whether it is an integer.
    #[inline]
    fn number(&mut self) -> Option<(&'a str, bool)> {
        self.ws();
        let buf = self.buf;
        let start = self.pos;
        let digits = |mut i: usize| {
            while buf.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let mut i = start;
        if buf.get(i) == Some(&b'-') {
            i += 1;
        }
        match buf.get(i)? {
            b'0' if buf.get(i + 1).is_some_and(u8::is_ascii_digit) => return None,
            b'0' => i += 1,
            b'1'..=b'9' => i = digits(i + 1),
            _ => return None,
        }
        let mut int = true;
        if buf.get(i) == Some(&b'.') {
            int = false;
            let end = digits(i + 1);
            if end == i + 1 {
                return None;
            }
            i = end;
        }
        if let Some(b'e' | b'E') = buf.get(i) {
            int = false;
            i += 1;
            if let Some(b'+' | b'-') = buf.get(i) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return None;
            }
            i = end;
        }
        self.pos = i;
        Some((self.text.get(start..i)?, int))
    }

    /// Whitespace, then a value as text: a plain string's content or a number's literal text.
    #[inline]
    fn text(&mut self) -> Option<&'a str> {
        self.ws();
        match self.buf.get(self.pos)? {
            b'"' => self.string(),
            _ => self.number().map(|(text, _)| text),
        }
    }

    /// An integer timestamp, as `str::parse::<i64>` reads the general reader's integer token.
    #[inline]
    fn timestamp(&mut self) -> Option<i64> {
        let (text, int) = self.number()?;
        if !int {
            return None;
        }
        let (negative, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text),
        };
        if digits.len() > 18 {
            // Near or beyond the range of a long: the standard parser decides.
            return text.parse().ok();
        }
        let n = digits.bytes().fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
        Some(if negative { -n } else { n })
    }

    /// A field name at the cursor, compared as bytes: only the four fields' plain spellings are taken.
    #[inline]
    fn field_name(&mut self) -> Option<Field> {
        let rest = self.buf.get(self.pos..)?;
        let (field, len) = match rest.get(1)? {
            b'm' if rest.starts_with(b"\"metric\"") => (Field::Metric, 8),
            b't' if rest.starts_with(b"\"timestamp\"") => (Field::Timestamp, 11),
            b't' if rest.starts_with(b"\"tags\"") => (Field::Tags, 6),
            b'v' if rest.starts_with(b"\"value\"") => (Field::Value, 7),
            _ => return None,
        };
        self.pos += len;
        Some(field)
    }

    /// One object with exactly `metric`, `timestamp`, `value` and `tags`, in any order.
    fn point(&mut self, out: &mut PlainBody<'a>) -> Option<()> {
        self.expect(b'{')?;
        let (mut metric, mut timestamp, mut value, mut tags) = (None, None, None, None);
        loop {
            self.ws();
            let key = self.field_name()?;
            self.expect(b':')?;
            // A repeated field is the general reader's case (the last one wins there).
            match key {
                Field::Metric if metric.is_none() => metric = Some(self.string()?),
                Field::Timestamp if timestamp.is_none() => timestamp = Some(self.timestamp()?),
                Field::Value if value.is_none() => value = Some(self.text()?),
                Field::Tags if tags.is_none() => tags = Some(self.tags(out)?),
                _ => return None,
            }
            self.ws();
            match self.next()? {
                b',' => {}
                b'}' => break,
                _ => return None,
            }
        }
        out.points.push(PlainPoint { metric: metric?, timestamp: timestamp?, value: value?, tags: tags? });
        Some(())
    }

    /// A non-empty object of string keys (distinct) and string or number values, appended to `out.tags`.
    fn tags(&mut self, out: &mut PlainBody<'a>) -> Option<Range<usize>> {
        self.expect(b'{')?;
        let first = out.tags.len();
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            let value = self.text()?;
            let seen = &out.tags[first..];
            if seen.len() >= MAX_TAGS || seen.iter().any(|&(k, _)| k == key) {
                return None;
            }
            out.tags.push((key, value));
            self.ws();
            match self.next()? {
                b',' => {}
                b'}' => return Some(first..out.tags.len()),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_put_body, BodyPoint};
    use super::*;

    /// The plain reading of `body` as general points, checked against the general reader; `None` when the plain
    /// reader declined.
    fn plain(body: &str) -> Option<Vec<IncomingPoint<'_>>> {
        let plain = parse_plain_put_body(body.as_bytes())?;
        let points: Vec<IncomingPoint<'_>> = plain.points.iter().map(|p| plain.incoming(p)).collect();
        let general = parse_put_body(body.as_bytes()).unwrap_or_else(|e| panic!("{body:?}: general says {e}"));
        let general: Vec<IncomingPoint<'_>> = general
            .into_iter()
            .map(|p| match p {
                BodyPoint::Point(p) => p,
                BodyPoint::Null => panic!("{body:?}: null"),
            })
            .collect();
        assert_eq!(points, general, "{body:?}");
        Some(points)
    }

    fn declined(body: &str) {
        assert!(parse_plain_put_body(body.as_bytes()).is_none(), "{body:?} was read by the plain reader");
    }

    // spec: ingest §3.2, §3.8 — the common shapes: one object, an array, any field order, whitespace.
    #[test]
    fn common_bodies_read_as_the_general_reader_does() {
        let one = r#"{"metric":"sys.cpu.nice","timestamp":1346846400,"value":18,"tags":{"host":"web01","dc":"lga"}}"#;
        assert_eq!(plain(one).map(|p| p.len()), Some(1));
        let many = "  [\n {\"tags\" : {\"host\":\"a\"} , \"value\":\"42.0000000\",\r\n\t\"timestamp\":-0,\"metric\":\"m\"},\
                    {\"metric\":\"m.2\",\"timestamp\":1795302480000,\"value\":-1.5e-3,\"tags\":{\"h\":\"b\",\"x\":7}}\n]\n";
        let points = plain(many).expect("read");
        assert_eq!(points[0].value.as_deref(), Some("42.0000000"));
        assert_eq!(points[0].timestamp, 0);
        assert_eq!(points[1].value.as_deref(), Some("-1.5e-3"));
        assert_eq!(points[1].tags.as_ref().map(|t| t[1].1.as_ref()), Some("7"));
        // Numbers keep their text, whatever their size.
        let big =
            r#"{"metric":"m","timestamp":9223372036854775807,"value":123456789012345678901234567890,"tags":{"h":"x"}}"#;
        assert_eq!(plain(big).expect("read")[0].timestamp, i64::MAX);
        let min = r#"{"metric":"m","timestamp":-9223372036854775808,"value":0,"tags":{"h":"x"}}"#;
        assert_eq!(plain(min).expect("read")[0].timestamp, i64::MIN);
        let ok18 = r#"{"metric":"m","timestamp":-999999999999999999,"value":0.0,"tags":{"h":"x"}}"#;
        assert_eq!(plain(ok18).expect("read")[0].timestamp, -999_999_999_999_999_999);
    }

    // Everything else is the general reader's, which gives the points or the exact error (spec: ingest §3.2-3.4).
    #[test]
    fn unusual_bodies_are_left_to_the_general_reader() {
        let p = |fields: &str| format!("[{{{fields}}}]");
        for body in [
            // Escapes, non-ASCII, control characters in strings.
            p(r#""metric":"a\u0062","timestamp":1,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"a\"b","timestamp":1,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h\/":"x"}"#),
            p(r#""metric":"métrique","timestamp":1,"value":1,"tags":{"h":"x"}"#),
            p("\"metric\":\"a\tb\",\"timestamp\":1,\"value\":1,\"tags\":{\"h\":\"x\"}"),
            // Numbers and other scalars where strings are expected, strings where numbers are.
            p(r#""metric":42,"timestamp":1,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":"1","value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1.5,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1e3,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":9223372036854775808,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":-9223372036854775809,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":true,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":NaN,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":-Infinity,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":+1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":null,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h":null}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h":true}"#),
            p(r#""metric":null,"timestamp":1,"value":1,"tags":{"h":"x"}"#),
            // Malformed numbers.
            p(r#""metric":"m","timestamp":01,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":01,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":1.,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":.5,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":1e,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":1.5.3,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":-,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":12abc,"tags":{"h":"x"}"#),
            // Missing, repeated, unknown and nested fields.
            p(r#""metric":"m","timestamp":1,"value":1"#),
            p(r#""metric":"m","value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","metric":"n","timestamp":1,"value":1,"tags":{"h":"x"}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h":"x","h":"y"}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h":"x"},"tsuid":"0001""#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h":"x"},"x":{"y":[1,{"z":null}]}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":{"h":{"x":1}}"#),
            p(r#""metric":"m","timestamp":1,"value":1,"tags":null"#),
            // Array and object structure.
            "[]".to_string(),
            "[null]".to_string(),
            r#"[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}},]"#.to_string(),
            r#"[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}"#.to_string(),
            r#"{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}}"#.to_string(),
            r#"{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"},}"#.to_string(),
            r#"[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}] x"#.to_string(),
            r#"[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}][]"#.to_string(),
            r#"[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}} {"metric":"m"}]"#.to_string(),
            r#"[[{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}]]"#.to_string(),
            "\u{b}[]".to_string(),
            String::new(),
            "   ".to_string(),
            "x".to_string(),
        ] {
            declined(&body);
        }
        // Bad UTF-8 anywhere in a string.
        let mut bytes = br#"{"metric":"m","timestamp":1,"value":1,"tags":{"h":"x"}}"#.to_vec();
        bytes[11] = 0xff;
        assert!(parse_plain_put_body(&bytes).is_none());
        // Many tags are the general reader's (which indexes them).
        let many: Vec<String> = (0..=MAX_TAGS).map(|i| format!("\"k{i}\":\"v\"")).collect();
        declined(&p(&format!(r#""metric":"m","timestamp":1,"value":1,"tags":{{{}}}"#, many.join(","))));
        let fewer = &many[..MAX_TAGS];
        assert!(plain(&p(&format!(r#""metric":"m","timestamp":1,"value":1,"tags":{{{}}}"#, fewer.join(",")))).is_some());
    }

    // Strings are scanned eight bytes at a time: every length and every position of a byte that ends a plain
    // string must come out as the byte-by-byte reading would.
    #[test]
    fn strings_of_every_length_and_special_byte_position() {
        for len in 0..26 {
            let text: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            let body = format!(
                r#"{{"metric":"{text}","timestamp":1,"value":1,"tags":{{"h":"{text}~{del}"}}}}"#,
                del = '\u{7f}'
            );
            let points = plain(&body).expect("read");
            assert_eq!(points[0].metric.as_deref(), Some(text.as_str()));
            for at in 0..len {
                for special in [b'\\', b'\n', 0x1f, 0x00, 0x80, 0xc3, 0xff] {
                    let mut bytes = body.clone().into_bytes();
                    bytes[11 + at] = special;
                    assert!(parse_plain_put_body(&bytes).is_none(), "{len} {at} {special}");
                }
                // A quote inside ends the string early: the rest is no longer a plain body.
                let mut bytes = body.clone().into_bytes();
                bytes[11 + at] = b'"';
                assert!(parse_plain_put_body(&bytes).is_none(), "{len} {at}");
            }
        }
    }

    // Java's trim() removes any byte <= U+0020 around the body, as the general reader does.
    #[test]
    fn trimmed_like_java() {
        let body = "\u{1}\u{b} {\"metric\":\"m\",\"timestamp\":1,\"value\":1,\"tags\":{\"h\":\"x\"}}\u{0}\u{1f}";
        assert_eq!(plain(body).map(|p| p.len()), Some(1));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use proptest::strategy::ValueTree;

        /// Bodies near the common shape with random edits: wherever the plain reader answers, the general reader
        /// must answer the same points.
        fn agree(body: &[u8]) -> Result<(), TestCaseError> {
            if let Some(plain) = parse_plain_put_body(body) {
                let points: Vec<BodyPoint<'_>> =
                    plain.points.iter().map(|p| BodyPoint::Point(plain.incoming(p))).collect();
                prop_assert_eq!(Ok(points), parse_put_body(body), "{}", String::from_utf8_lossy(body));
            }
            Ok(())
        }

        /// The four fields with random texts (some of them not what the plain reader takes), in random order,
        /// sometimes one of them twice.
        fn object() -> impl Strategy<Value = String> {
            let name = || prop_oneof![8 => "[a-z.]{1,8}", 1 => "\"|h|k"];
            let fields = (
                name().prop_map(|m| format!("\"metric\":\"{m}\"")),
                prop_oneof![8 => "[1-9][0-9]{0,12}", 1 => "-?[0-9]{1,20}(\\.[0-9])?"]
                    .prop_map(|t| format!("\"timestamp\":{t}")),
                prop_oneof![
                    6 => "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][-+]?[0-9]{1,2})?",
                    1 => "-?[0-9]{1,4}(\\.[0-9]{0,3})?([eE][-+]?[0-9]{0,2})?",
                    1 => "\"[0-9.]{0,4}\"",
                ]
                .prop_map(|v| format!("\"value\":{v}")),
                proptest::collection::vec((name(), "\"[a-z0-9]{0,3}\"|[0-9]{1,3}"), 0..4).prop_map(|tags| {
                    let tags: Vec<String> = tags.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("\"tags\":{{{}}}", tags.join(","))
                }),
            );
            (fields, 0usize..16)
                .prop_flat_map(|((m, t, v, g), twice)| {
                    let mut all = vec![m, t, v, g];
                    if let Some(f) = all.get(twice).cloned() {
                        all.push(f);
                    }
                    Just(all).prop_shuffle()
                })
                .prop_map(|f| format!("{{{}}}", f.join(",")))
        }

        /// The property below only means something if many generated bodies take the plain reader.
        #[test]
        fn generated_bodies_often_take_the_plain_reader() {
            let mut runner = proptest::test_runner::TestRunner::deterministic();
            let (mut read, total) = (0, 400);
            for _ in 0..total {
                let body = object().new_tree(&mut runner).map(|t| t.current()).unwrap_or_default();
                read += usize::from(parse_plain_put_body(body.as_bytes()).is_some());
            }
            assert!(read * 5 > total, "{read} of {total}");
        }

        proptest! {
            #[test]
            fn plain_agrees_with_general(
                objects in proptest::collection::vec(object(), 1..4),
                edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 0..4),
            ) {
                let mut body = format!("[{}]", objects.join(",")).into_bytes();
                agree(&body)?;
                for (at, byte, op) in edits {
                    let at = at % (body.len() + 1);
                    let byte = if op == 3 { b" \t\n\r,:{}[]\"\\-.0e"[usize::from(byte) % 16] } else { byte };
                    match op {
                        0 | 3 => body.insert(at, byte),
                        1 if at < body.len() => { body.remove(at); }
                        _ if at < body.len() => body[at] = byte,
                        _ => body.push(byte),
                    }
                    agree(&body)?;
                }
            }

            #[test]
            fn never_panics(body in proptest::collection::vec(any::<u8>(), 0..256)) {
                agree(&body)?;
            }
        }
    }
}
