//! OpenTSDB's telnet-style line protocol: framing, command words and the `put` line (spec: ingest §1.2-§1.6, §2).
//!
//! Lines are bytes read as ISO-8859-1 and split on single spaces, exactly as OpenTSDB's `WordSplitter` does, so
//! that every error a client can provoke comes back with the text OpenTSDB would send. Parsing borrows from the
//! read buffer: an ASCII `put` line with up to 15 words and 8 tags is parsed without touching the heap.
use std::borrow::Cow;

use smallvec::SmallVec;

use crate::codec::Value;
use crate::number;
use crate::point::{self, DataPoint, PutError, RollupSpec, Rules, Tags};

/// OpenTSDB's line length limit: a connection that buffers more than this without a line end is closed
/// without a reply (spec: ingest §1.2).
pub const MAX_LINE: usize = 1024;

/// The words of one line; 16 fit on the stack (`put`, metric, timestamp, value and a dozen tags).
pub type Words<'a> = SmallVec<[&'a [u8]; 16]>;

/// One command line, by its first word (looked up case-sensitively, spec: ingest §1.4).
#[derive(Debug, Clone, PartialEq)]
pub enum Command<'a> {
    Put(Words<'a>),
    Rollup(Words<'a>),
    Histogram(Words<'a>),
    Stats,
    DropCaches,
    Version,
    Exit,
    Help,
    DieDieDie,
    /// Any other first word, including the empty word of an empty line.
    Unknown(&'a [u8]),
}

impl Command<'_> {
    /// The command word, as `help` lists it.
    pub fn name(&self) -> Cow<'_, str> {
        match self {
            Command::Put(_) => "put".into(),
            Command::Rollup(_) => "rollup".into(),
            Command::Histogram(_) => "histogram".into(),
            Command::Stats => "stats".into(),
            Command::DropCaches => "dropcaches".into(),
            Command::Version => "version".into(),
            Command::Exit => "exit".into(),
            Command::Help => "help".into(),
            Command::DieDieDie => "diediedie".into(),
            Command::Unknown(word) => latin1(word),
        }
    }
}

/// Finds the first complete line in `buf`: returns the line without its `\n` (and without a `\r` right before
/// it) and the number of bytes it used up. A lone `\r` stays in the line (spec: ingest §1.2).
pub fn next_line(buf: &[u8]) -> Option<(&[u8], usize)> {
    // SIMD search: framing is a pass over every byte received (perf: ~1% of A ingest with a byte loop).
    let end = memchr::memchr(b'\n', buf)?;
    let line = &buf[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Some((line, end + 1))
}

/// Whether a line (without its `\n` or `\r\n`) is longer than the frame limit: rtsd closes the connection on
/// it. OpenTSDB checks its limit only while no line end is buffered, so whether a long line passed depended on
/// how TCP cut the stream (spec: ingest §1.2); rtsd holds every line to [`MAX_LINE`], however it arrives.
pub fn line_too_long(line: &[u8]) -> bool {
    line.len() > MAX_LINE
}

/// Whether bytes buffered without a `\n` already make a line longer than [`MAX_LINE`] (a final `\r` may still
/// be the start of its `\r\n`).
pub fn partial_too_long(buf: &[u8]) -> bool {
    buf.len() > MAX_LINE + 1 || (buf.len() == MAX_LINE + 1 && buf[MAX_LINE] != b'\r')
}

/// Splits a line on single spaces as OpenTSDB's `Tags.splitString(line, ' ')` does: nothing is dropped, so
/// `"a  b"` gives `["a", "", "b"]` and `""` gives `[""]`. One SIMD scan for the spaces, no allocation for up to
/// 16 words (perf: a byte-at-a-time combinator split was ~4% of A ingest).
pub fn split_words(line: &[u8]) -> Words<'_> {
    let mut words = Words::new();
    let mut start = 0;
    for space in memchr::memchr_iter(b' ', line) {
        words.push(&line[start..space]);
        start = space + 1;
    }
    words.push(&line[start..]);
    words
}

/// Reads a line as a command (spec: ingest §1.4). Which commands are enabled (`tsd.mode`, `tsd.no_diediedie`)
/// is the daemon's decision.
pub fn parse_command(line: &[u8]) -> Command<'_> {
    let words = split_words(line);
    match words[0] {
        b"put" => Command::Put(words),
        b"rollup" => Command::Rollup(words),
        b"histogram" => Command::Histogram(words),
        b"stats" => Command::Stats,
        b"dropcaches" => Command::DropCaches,
        b"version" => Command::Version,
        b"exit" => Command::Exit,
        b"help" => Command::Help,
        b"diediedie" => Command::DieDieDie,
        other => Command::Unknown(other),
    }
}

/// The reply to an unknown command: `unknown command: foo.  Try `help'.` (spec: ingest §1.5).
pub fn unknown_command_reply(word: &[u8]) -> String {
    format!("unknown command: {}.  Try `help'.\n", latin1(word))
}

/// The reply to `help`: the enabled commands in registration order, each followed by a space.
pub fn help_reply<'a>(commands: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::from("available commands:");
    for c in commands {
        out.push(' ');
        out.push_str(c);
    }
    out.push_str(" \n");
    out
}

/// Bytes as ISO-8859-1 characters, as OpenTSDB decodes telnet lines. Borrows when the bytes are ASCII.
pub fn latin1(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) if bytes.is_ascii() => Cow::Borrowed(s),
        _ => Cow::Owned(bytes.iter().map(|&b| b as char).collect()),
    }
}

/// Parses and validates a `put` line's words (`words[0]` is `put`), running every check of spec: ingest §2.6
/// rows 1-14 in order. UIDs (rows 15-16) are the store's business.
pub fn parse_put<'a>(words: &[&'a [u8]], rules: &Rules) -> Result<DataPoint<'a>, PutError> {
    if words.len() < 5 {
        return Err(PutError::IllegalArgument(format!(
            "not enough arguments (need least 4, got {})",
            words.len().saturating_sub(1)
        )));
    }
    if words[1].is_empty() {
        return Err(PutError::IllegalArgument("empty metric name".into()));
    }
    let timestamp = parse_timestamp(words[2])?;
    if timestamp <= 0 {
        return Err(PutError::IllegalArgument(format!("invalid timestamp: {timestamp}")));
    }
    if words[3].is_empty() {
        return Err(PutError::IllegalArgument("empty value".into()));
    }
    let mut tags = Tags::new();
    for w in &words[4..] {
        if !w.is_empty() {
            point::add_tag(&mut tags, latin1(w))?;
        }
    }
    let value = point::parse_value(&latin1(words[3]))?;
    let point = DataPoint { metric: latin1(words[1]), timestamp, value, tags };
    point::check_for_write(&point, rules)?;
    Ok(point)
}

/// Parses a `rollup` line's words (`words[0]` is `rollup`) as OpenTSDB's `RollupDataPointRpc.importDataPoint`
/// does (spec: ingest §1.7): `rollup <interval>-<agg>[:<groupby agg>] <metric> <ts> <value> <tags...>` or
/// `rollup <groupby agg> <metric> <ts> <value> <tags...>`. Checks the syntax, the number and that it is finite;
/// the rollup configuration's checks are the daemon's. `Ok(None)` is a line on which OpenTSDB fails with an
/// unexpected exception (a second word of only colons) and writes no reply.
pub fn parse_rollup<'a>(words: &[&'a [u8]]) -> Result<Option<(DataPoint<'a>, RollupSpec)>, PutError> {
    if words.len() < 6 {
        return Err(PutError::IllegalArgument(format!(
            "not enough arguments (need least 7, got {})",
            words.len().saturating_sub(1)
        )));
    }
    if words[1].is_empty() {
        return Err(PutError::IllegalArgument("Missing interval or aggregator".into()));
    }
    let interval_agg = latin1(words[1]);
    // Java's String.split(":") drops trailing empty parts.
    let mut parts: Vec<&str> = interval_agg.split(':').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    let Some(first) = parts.first() else { return Ok(None) };
    let mut spec = RollupSpec::default();
    if let Some(dash) = first.find('-') {
        spec.interval = Some(first[..dash].to_string());
        spec.aggregator = Some(first[dash + 1..].to_string());
    } else if parts.len() == 1 {
        spec.groupby_aggregator = Some(first.to_string());
    }
    if let Some(groupby) = parts.get(1) {
        spec.groupby_aggregator = Some(groupby.to_string());
    }
    if words[2].is_empty() {
        return Err(PutError::IllegalArgument("empty metric name".into()));
    }
    let timestamp = parse_timestamp(words[3])?;
    if timestamp <= 0 {
        return Err(PutError::IllegalArgument(format!("invalid timestamp: {timestamp}")));
    }
    if words[4].is_empty() {
        return Err(PutError::IllegalArgument("empty value".into()));
    }
    let mut tags = Tags::new();
    for w in &words[5..] {
        if !w.is_empty() {
            point::add_tag(&mut tags, latin1(w))?;
        }
    }
    if spec.groupby_aggregator.is_some() && spec.aggregator.is_none() {
        spec.aggregator = spec.groupby_aggregator.clone();
    }
    let value = point::parse_value(&latin1(words[4]))?;
    let point = DataPoint { metric: latin1(words[2]), timestamp, value, tags };
    point::check_finite(&point)?;
    Ok(Some((point, spec)))
}

/// The timestamp and value of a `put` line whose metric and tag words are byte-for-byte those of a line that
/// already passed [`parse_put`]: only the checks that depend on the timestamp and value can fail (spec: ingest
/// §2.6 rows 1-5 and 8-10; rows 6-7 and 11-14 depend on the same words and passed before). Returns None when any
/// check fails, so the caller runs [`parse_put`] for OpenTSDB's exact error.
pub fn parse_put_known_series(words: &[&[u8]]) -> Option<(i64, Value)> {
    if words.len() < 5 || words[1].is_empty() || words[3].is_empty() {
        return None;
    }
    if let Some(point) = plain_point(words[2], words[3]) {
        return Some(point);
    }
    let timestamp = parse_timestamp(words[2]).ok()?;
    Some((timestamp, point::known_series_value(timestamp, &latin1(words[3]))?))
}

/// The timestamp and value of the words almost every line has: a timestamp of 1-13 digits and a value of
/// digits, with an optional `-` and an optional fraction, at most 15 digits in all. For those the general
/// parsers' answer is plain arithmetic: an integer, or the decimal's digits as an exact integer divided by an
/// exact power of ten (one correctly rounded division, so Java's correctly rounded `parseDouble` agrees), stored
/// as a float when that loses nothing. `None` for anything else (the general path decides); the property test
/// below holds the two paths to the same answers.
#[inline]
fn plain_point(timestamp: &[u8], value: &[u8]) -> Option<(i64, Value)> {
    const POW10: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    if timestamp.is_empty() || timestamp.len() > 13 {
        return None;
    }
    let mut ts: i64 = 0;
    for &b in timestamp {
        if !b.is_ascii_digit() {
            return None;
        }
        ts = ts * 10 + i64::from(b - b'0');
    }
    if ts == 0 {
        return None;
    }
    let (negative, digits) = match value.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, value),
    };
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let (mut m, mut frac, mut n, mut point) = (0i64, 0usize, 0usize, false);
    for (i, &b) in digits.iter().enumerate() {
        if b.is_ascii_digit() {
            m = m * 10 + i64::from(b - b'0');
            n += 1;
            frac += usize::from(point);
        } else if b == b'.' && !point && i > 0 && i + 1 < digits.len() {
            point = true;
        } else {
            return None;
        }
    }
    if n > 15 {
        return None;
    }
    let value = if point {
        let d = m as f64 / POW10[frac];
        let d = if negative { -d } else { d };
        if crate::number::fits_in_float(d) {
            Value::Float(d as f32)
        } else {
            Value::Double(d)
        }
    } else {
        Value::Int(if negative { -m } else { m })
    };
    Some((ts, value))
}

/// A telnet timestamp: every `.` is deleted before the integer is read, so `1365465600.250` is milliseconds
/// and `1.2.3` is 123 seconds (spec: ingest §2.2, a quirk kept for compatibility).
fn parse_timestamp(word: &[u8]) -> Result<i64, PutError> {
    if !word.contains(&b'.') {
        return Ok(number::parse_long(&latin1(word))?);
    }
    let digits: SmallVec<[u8; 24]> = word.iter().copied().filter(|&b| b != b'.').collect();
    Ok(number::parse_long(&latin1(&digits))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_limit_is_1024_bytes_without_the_line_end() {
        let line = vec![b'x'; MAX_LINE];
        assert!(!line_too_long(&line));
        assert!(line_too_long(&[line.as_slice(), b"x"].concat()));
        // Buffered without a line end: 1024 bytes may still end with \r\n or \n; 1025 may only if the last is \r.
        assert!(!partial_too_long(&line));
        assert!(!partial_too_long(&[line.as_slice(), b"\r"].concat()));
        assert!(partial_too_long(&[line.as_slice(), b"x"].concat()));
        assert!(partial_too_long(&[line.as_slice(), b"\rx"].concat()));
    }

    /// The reply OpenTSDB writes for a put line, or None for a silent success.
    fn reply(line: &str) -> Option<String> {
        reply_with(line, &Rules::default())
    }

    fn reply_with(line: &str, rules: &Rules) -> Option<String> {
        let bytes = line.as_bytes();
        match parse_command(bytes) {
            Command::Put(words) => parse_put(&words, rules).err().map(|e| format!("put: {e}\n")),
            other => panic!("not a put: {other:?}"),
        }
    }

    #[test]
    fn splits_on_single_spaces_and_keeps_empty_words() {
        // spec: ingest §1.2
        assert_eq!(split_words(b"a  b").as_slice(), &[&b"a"[..], b"", b"b"]);
        assert_eq!(split_words(b"").as_slice(), &[&b""[..]]);
        assert_eq!(split_words(b" a ").as_slice(), &[&b""[..], b"a", b""]);
        assert_eq!(split_words(b"a\tb").as_slice(), &[&b"a\tb"[..]]);
    }

    #[test]
    fn frames_end_at_newline_and_strip_one_cr() {
        // spec: ingest §1.2
        assert_eq!(next_line(b"put a\r\nrest"), Some((&b"put a"[..], 7)));
        assert_eq!(next_line(b"put a\nrest"), Some((&b"put a"[..], 6)));
        assert_eq!(next_line(b"a\rb\n"), Some((&b"a\rb"[..], 4)));
        assert_eq!(next_line(b"a\r\r\n"), Some((&b"a\r"[..], 4)));
        assert_eq!(next_line(b"no end"), None);
    }

    #[test]
    fn commands_are_case_sensitive() {
        // spec: ingest §1.4, §1.5
        assert_eq!(parse_command(b"version"), Command::Version);
        assert_eq!(parse_command(b"version extra words"), Command::Version);
        assert_eq!(parse_command(b"Version"), Command::Unknown(b"Version"));
        assert_eq!(unknown_command_reply(b"foo"), "unknown command: foo.  Try `help'.\n");
        assert_eq!(unknown_command_reply(b""), "unknown command: .  Try `help'.\n");
        // Bytes >= 0x80 are echoed as the UTF-8 of their Latin-1 character (spec: ingest §1.2 quirk).
        assert_eq!(unknown_command_reply(b"caf\xe9").as_bytes(), b"unknown command: caf\xc3\xa9.  Try `help'.\n");
    }

    #[test]
    fn help_lists_commands_with_a_trailing_space() {
        // spec: ingest §1.5
        let all = ["stats", "dropcaches", "version", "exit", "help", "put", "rollup", "histogram", "diediedie"];
        assert_eq!(
            help_reply(all),
            "available commands: stats dropcaches version exit help put rollup histogram diediedie \n"
        );
    }

    #[test]
    fn a_valid_put_is_silent() {
        // spec: ingest §5.10 P1, §2.6 worked examples
        assert_eq!(reply("put sys.cpu.user 1365465600 42 host=web01"), None);
        assert_eq!(reply("put sys.if.bytes.out 1479496100 1.3E3 host=web01 interface=eth0"), None);
    }

    #[test]
    fn parses_fields_and_value_widths() {
        // spec: ingest §2.3
        let words = split_words(b"put sys.cpu.user 1356998460 42.5 owner=web02  host=web01 ");
        let p = parse_put(&words, &Rules::default()).unwrap();
        assert_eq!(p.metric, "sys.cpu.user");
        assert_eq!(p.timestamp, 1356998460);
        assert_eq!(p.value, Value::Float(42.5));
        assert_eq!(p.tags.as_slice(), &[("owner".into(), "web02".into()), ("host".into(), "web01".into())]);
        let value = |v: &str| {
            let line = format!("put m 1356998460 {v} host=a");
            let words = split_words(line.as_bytes());
            let p = parse_put(&words, &Rules::default()).unwrap();
            p.value
        };
        assert_eq!(value("42"), Value::Int(42));
        assert_eq!(value("-7"), Value::Int(-7));
        assert_eq!(value("12.3"), Value::Double(12.3));
        assert_eq!(value("1e-05"), Value::Double(1e-05));
        assert_eq!(value("-3.25e2"), Value::Float(-325.0));
        assert_eq!(value("42.0000000"), Value::Float(42.0));
    }

    #[test]
    fn timestamps_drop_every_dot() {
        // spec: ingest §2.2
        let ts = |t: &str| {
            let line = format!("put m {t} 1 host=a");
            let words = split_words(line.as_bytes());
            parse_put(&words, &Rules::default()).map(|p| p.timestamp)
        };
        assert_eq!(ts("1365465600.250"), Ok(1365465600250));
        assert_eq!(ts("1365465600.5"), Ok(13654656005));
        assert_eq!(ts("1.2.3"), Ok(123));
        assert_eq!(ts("1365465600123"), Ok(1365465600123));
    }

    #[test]
    fn every_error_of_the_catalogue_in_order() {
        // spec: ingest §2.6, one line per row, §5.10 P2-P5
        let cases: &[(&str, &str)] = &[
            ("put", "put: illegal argument: not enough arguments (need least 4, got 0)\n"),
            ("put ", "put: illegal argument: not enough arguments (need least 4, got 1)\n"),
            ("put sys.cpu.user 1365465600 42", "put: illegal argument: not enough arguments (need least 4, got 3)\n"),
            ("put  1365465600 42 host=web01", "put: illegal argument: empty metric name\n"),
            ("put metric.foo notatime 42 host=web01", "put: invalid value: Invalid character 'n' in notatime\n"),
            ("put m  42 host=web01", "put: invalid value: Empty string\n"),
            ("put m 1.2a 42 host=web01", "put: invalid value: Invalid character 'a' in 12a\n"),
            ("put m + 42 host=web01", "put: invalid value: Just a sign, no value: +\n"),
            ("put m 99999999999999999999 42 host=web01", "put: invalid value: Value too long: 99999999999999999999\n"),
            ("put m 9223372036854775808 42 host=web01", "put: invalid value: Overflow in 9223372036854775808\n"),
            ("put m 0 42 host=web01", "put: illegal argument: invalid timestamp: 0\n"),
            ("put m -5 42 host=web01", "put: illegal argument: invalid timestamp: -5\n"),
            ("put m 1365465600  host=web01", "put: illegal argument: empty value\n"),
            ("put m 1365465600 42 hostweb01", "put: illegal argument: invalid tag: hostweb01\n"),
            ("put m 1365465600 42 host=a=b", "put: illegal argument: invalid tag: host=a=b\n"),
            ("put m 1365465600 42 host=a host=b", "put: illegal argument: duplicate tag: host=b, tags={host=a}\n"),
            ("put sys.cpu.user 1365465600 notanum host=web01", "put: invalid value: Invalid character 'n' in notanum\n"),
            ("put m 1365465600 NaN host=web01", "put: invalid value: Invalid character 'N' in NaN\n"),
            ("put m 1365465600 1.5NaN host=web01", "put: invalid value: For input string: \"1.5NaN\"\n"),
            (
                "put m 1365465600 1e999 host=web01",
                "put: illegal argument: value is NaN or Infinite: Infinity for metric=m timestamp=1365465600\n",
            ),
            (
                "put m 10000000000000 42 host=web01",
                "put: illegal argument: bad timestamp=10000000000000 when trying to add value=[42]/0 to metric=m, tags={host=web01}\n",
            ),
            ("put m 1365465600 42 ", "put: illegal argument: Need at least one tag (metric=m, tags={})\n"),
            (
                "put m 1365465600 42 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9",
                "put: illegal argument: Too many tags: 9 maximum allowed: 8, tags: {a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9}\n",
            ),
            (
                "put bad!metric 1365465600 42 host=web01",
                "put: illegal argument: Invalid metric name (\"bad!metric\"): illegal character: !\n",
            ),
            (
                "put m 1365465600 42 ho:st=web01",
                "put: illegal argument: Invalid tag name with value [web01] (\"ho:st\"): illegal character: :\n",
            ),
            (
                "put m 1365465600 42 host=web#01",
                "put: illegal argument: Invalid tag value with key [host] (\"web#01\"): illegal character: #\n",
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(reply(line).as_deref(), Some(*expected), "line {line:?}");
        }
    }

    #[test]
    fn earlier_checks_win() {
        // spec: ingest §2.6: the first failing row decides the reply.
        assert_eq!(reply("put  notatime  bad").unwrap(), "put: illegal argument: empty metric name\n");
        assert_eq!(reply("put m notatime  bad").unwrap(), "put: invalid value: Invalid character 'n' in notatime\n");
        assert_eq!(reply("put m 1 x bad").unwrap(), "put: illegal argument: invalid tag: bad\n");
        assert_eq!(
            reply("put bad! 1 x host=a").unwrap(),
            "put: invalid value: Invalid character 'x' in x\n",
            "value parse precedes name validation"
        );
    }

    #[test]
    fn the_known_series_shortcut_agrees_with_the_full_parse() {
        // Whenever the shortcut answers, the full parser gives the same timestamp and value; whenever the full
        // parser refuses a line, the shortcut does not answer.
        let lines = [
            "put m 1365465600 42 host=a",
            "put m 1365465600.250 4.5 host=a",
            "put m 0 1 host=a",
            "put m x 1 host=a",
            "put m 1365465600 1e999 host=a",
            "put m 10000000000000 1 host=a",
            "put m 1365465600  host=a",
            "put m 1365465600 NaN host=a",
            "put m 1365465600",
            "put  1 1 host=a",
            "put m 1365465600 -0.0 host=a",
            "put m 1365465600 0.1 host=a",
            "put m 1365465600 -123456789.012345 host=a",
            "put m 1365465600 1234567890123456 host=a",
            "put m 1365465600 9999999999999999999 host=a",
            "put m 1365465600 5. host=a",
            "put m 1365465600 .5 host=a",
            "put m 1365465600 - host=a",
            "put m 0001365465600 1 host=a",
            "put m 9999999999999 1 host=a",
        ];
        for line in lines {
            let words = split_words(line.as_bytes());
            let full = parse_put(&words, &Rules::default()).map(|p| (p.timestamp, p.value)).ok();
            assert_eq!(parse_put_known_series(&words), full, "{line}");
        }
    }

    #[test]
    fn max_tags_is_configurable() {
        // spec: ingest §5.9 T16
        let rules = Rules { max_tags: 12, ..Rules::default() };
        assert_eq!(reply_with("put m 1365465600 42 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9", &rules), None);
    }

    #[test]
    fn latin1_bytes_in_names() {
        // spec: ingest §2.5: byte E9 is the letter é; a UTF-8 continuation byte is not a letter.
        let words = split_words(b"put caf\xe9 1365465600 1 host=a");
        let p = parse_put(&words, &Rules::default()).unwrap();
        assert_eq!(p.metric, "café");
        let words = split_words("put 中 1365465600 1 host=a".as_bytes());
        let e = parse_put(&words, &Rules::default()).unwrap_err();
        assert_eq!(e.to_string(), "illegal argument: Invalid metric name (\"ä¸\u{ad}\"): illegal character: \u{b8}");
    }

    #[test]
    fn parsing_an_ascii_line_borrows() {
        let words = split_words(b"put sys.cpu.user 1365465600 42 host=web01 dc=lga");
        let p = parse_put(&words, &Rules::default()).unwrap();
        assert!(matches!(p.metric, Cow::Borrowed(_)));
        assert!(p.tags.iter().all(|(k, v)| matches!(k, Cow::Borrowed(_)) && matches!(v, Cow::Borrowed(_))));
        assert!(!p.tags.spilled());
    }

    fn rollup(line: &str) -> Result<Option<(DataPoint<'static>, RollupSpec)>, PutError> {
        let Command::Rollup(words) = parse_command(line.as_bytes()) else { panic!("not a rollup line: {line}") };
        parse_rollup(&words).map(|r| r.map(|(p, s)| (p.into_owned(), s)))
    }

    fn spec(interval: Option<&str>, aggregator: Option<&str>, groupby: Option<&str>) -> RollupSpec {
        RollupSpec {
            interval: interval.map(str::to_string),
            aggregator: aggregator.map(str::to_string),
            groupby_aggregator: groupby.map(str::to_string),
        }
    }

    // spec: ingest §1.7; OpenTSDB 2.4 RollupDataPointRpc.importDataPoint (how the second word splits).
    #[test]
    fn rollup_lines_split_interval_and_aggregators_as_opentsdb() {
        let (p, s) = rollup("rollup 1h-sum sys.cpu 1700000000 42 host=a").unwrap().unwrap();
        assert_eq!((p.metric.as_ref(), p.timestamp, p.value), ("sys.cpu", 1700000000, Value::Int(42)));
        assert_eq!(s, spec(Some("1h"), Some("sum"), None));
        let (_, s) = rollup("rollup 1h-sum:max m 1 1.5 host=a").unwrap().unwrap();
        assert_eq!(s, spec(Some("1h"), Some("sum"), Some("max")));
        // Only a group-by aggregator: a pre-aggregate whose temporal aggregator is the same.
        let (_, s) = rollup("rollup sum m 1 1 host=a").unwrap().unwrap();
        assert_eq!(s, spec(None, Some("sum"), Some("sum")));
        // Java's split drops trailing empty parts; `:sum` has an empty first part and no dash.
        let (_, s) = rollup("rollup 1h-sum: m 1 1 host=a").unwrap().unwrap();
        assert_eq!(s, spec(Some("1h"), Some("sum"), None));
        let (_, s) = rollup("rollup :sum m 1 1 host=a").unwrap().unwrap();
        assert_eq!(s, spec(None, Some("sum"), Some("sum")));
        let (_, s) = rollup("rollup 1h- m 1 1 host=a").unwrap().unwrap();
        assert_eq!(s, spec(Some("1h"), Some(""), None));
        // Only colons: OpenTSDB fails with an unexpected exception (no reply).
        assert_eq!(rollup("rollup ::: m 1 1 host=a").unwrap(), None);
    }

    // spec: ingest §1.7 (error texts, in OpenTSDB's order).
    #[test]
    fn rollup_line_errors() {
        let err = |line: &str| rollup(line).unwrap_err().to_string();
        assert_eq!(err("rollup 1h-sum m 1 1"), "illegal argument: not enough arguments (need least 7, got 4)");
        assert_eq!(err("rollup  m 1 1 host=a"), "illegal argument: Missing interval or aggregator");
        assert_eq!(err("rollup 1h-sum  1 1 host=a"), "illegal argument: empty metric name");
        assert_eq!(err("rollup 1h-sum m x 1 host=a"), "invalid value: Invalid character 'x' in x");
        assert_eq!(err("rollup 1h-sum m 0 1 host=a"), "illegal argument: invalid timestamp: 0");
        assert_eq!(err("rollup 1h-sum m 1  host=a"), "illegal argument: empty value");
        assert_eq!(err("rollup 1h-sum m 1 1 host"), "illegal argument: invalid tag: host");
        assert_eq!(err("rollup 1h-sum m 1 1y host=a"), "invalid value: Invalid character 'y' in 1y");
        assert_eq!(
            err("rollup 1h-sum m 1 1e999 host=a"),
            "illegal argument: value is NaN or Infinite: Infinity for metric=m timestamp=1"
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn rollup_lines_never_panic(
                agg in "[a-z0-9:-]{0,10}", metric in "[a-z.]{0,6}", ts in "[0-9.]{0,12}", value in "[0-9eE.+-]{0,8}",
                tags in proptest::collection::vec("[a-z=_]{0,6}", 0..6),
            ) {
                let line = format!("rollup {agg} {metric} {ts} {value} {}", tags.join(" "));
                let parsed = parse_command(line.as_bytes());
                if let Command::Rollup(words) = &parsed {
                    let _ = parse_rollup(words);
                }
            }
        }

        proptest! {
            // The plain-words fast path of `parse_put_known_series` answers as the general parsers do.
            #[test]
            fn known_series_fast_path_agrees_with_parse_put(
                ts in "[0-9]{1,14}", value in "-?[0-9]{0,9}\\.?[0-9]{0,9}", int in any::<i64>(), zeros in 0usize..3,
            ) {
                let value = if value.is_empty() { int.to_string() } else { format!("{}{value}", "0".repeat(zeros)) };
                let line = format!("put m {ts} {value} host=a");
                let words = split_words(line.as_bytes());
                let full = parse_put(&words, &Rules::default()).map(|p| (p.timestamp, p.value)).ok();
                let known = parse_put_known_series(&words);
                // Bit for bit: -0.0 and 0.0 differ.
                let bits = |r: Option<(i64, Value)>| r.map(|(t, v)| (t, v.flags(), v.encode()));
                prop_assert_eq!(bits(known), bits(full), "{}", line);
            }

            #[test]
            fn never_panics_on_arbitrary_lines(line in proptest::collection::vec(any::<u8>(), 0..200)) {
                if let Command::Put(words) = parse_command(&line) {
                    let _ = parse_put(&words, &Rules::default());
                }
            }

            #[test]
            fn never_panics_on_put_shaped_lines(
                metric in "[a-z.!]{0,8}", ts in "[0-9.+-]{0,15}", value in "[0-9eE.+-]{0,10}",
                tags in proptest::collection::vec("[a-z=]{0,6}", 0..10), spaces in 1usize..3,
            ) {
                let sep = " ".repeat(spaces);
                let line = format!("put{sep}{metric}{sep}{ts}{sep}{value}{sep}{}", tags.join(&sep));
                let words = split_words(line.as_bytes());
                let _ = parse_put(&words, &Rules::default());
            }

            #[test]
            fn valid_points_round_trip(
                metric in "[a-zA-Z0-9._/-]{1,20}", ts in 1i64..=9_999_999_999_999, int in any::<i64>(),
                tags in proptest::collection::btree_map("[a-z]{1,6}", "[a-zA-Z0-9]{1,6}", 1..8),
            ) {
                let rendered: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let line = format!("put {metric} {ts} {int} {}", rendered.join(" "));
                let words = split_words(line.as_bytes());
                let p = parse_put(&words, &Rules::default()).unwrap();
                prop_assert_eq!(p.metric.as_ref(), metric.as_str());
                prop_assert_eq!(p.timestamp, ts);
                prop_assert_eq!(p.value, Value::Int(int));
                prop_assert_eq!(p.tags.len(), tags.len());
            }
        }
    }
}
