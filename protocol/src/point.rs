//! A data point on its way to storage, and the validation every ingest protocol shares.
//!
//! Telnet `put` (spec: ingest §2), `/api/put` (§3) and the Chukwa port all end in [`check_for_write`], which runs
//! the checks OpenTSDB's `TSDB.addPoint` and `IncomingDataPoints.checkMetricAndTags` run, in their order and with
//! their texts (§2.6 rows 9-14). What differs per protocol is only how words become a [`DataPoint`].
use std::borrow::Cow;
use std::fmt;

use smallvec::SmallVec;

use crate::codec::{Value, MAX_MILLISECONDS};
use crate::javafmt;
use crate::number::{self, NumberError};

/// Tags of one point, in arrival order, keys unique. Eight fit on the stack: OpenTSDB's default maximum.
pub type Tags<'a> = SmallVec<[(Cow<'a, str>, Cow<'a, str>); 8]>;

/// A parsed data point. Names borrow from the request when they can (ASCII telnet lines, unescaped JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint<'a> {
    pub metric: Cow<'a, str>,
    /// Seconds if `<= 4294967295`, else milliseconds (spec: ingest §2.2).
    pub timestamp: i64,
    pub value: Value,
    pub tags: Tags<'a>,
}

impl DataPoint<'_> {
    /// An owned copy, for points that outlive the request buffer.
    pub fn into_owned(self) -> DataPoint<'static> {
        DataPoint {
            metric: Cow::Owned(self.metric.into_owned()),
            timestamp: self.timestamp,
            value: self.value,
            tags: self
                .tags
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
        }
    }

    /// The tags as Java's `AbstractMap.toString` prints OpenTSDB's tag `HashMap`.
    pub fn tags_java(&self) -> String {
        java_map(&self.tags)
    }
}

/// What a `rollup` line or an `/api/rollup` element says besides the point (spec: ingest §1.7):
/// `<interval>-<aggregator>[:<groupby aggregator>]`, or the JSON fields `interval`, `aggregator`,
/// `groupByAggregator`. A group-by aggregator, even empty, makes the point a pre-aggregate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollupSpec {
    pub interval: Option<String>,
    /// The temporal aggregator.
    pub aggregator: Option<String>,
    pub groupby_aggregator: Option<String>,
}

/// Which UID table a name lives in; the texts are OpenTSDB's kind names (`tsdb-uid` qualifiers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UidKind {
    Metric,
    TagKey,
    TagValue,
}

impl UidKind {
    pub const ALL: [UidKind; 3] = [UidKind::Metric, UidKind::TagKey, UidKind::TagValue];

    /// `metrics`, `tagk` or `tagv`: the qualifier in `tsdb-uid` and the word in OpenTSDB's messages.
    pub fn as_str(self) -> &'static str {
        match self {
            UidKind::Metric => "metrics",
            UidKind::TagKey => "tagk",
            UidKind::TagValue => "tagv",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for UidKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a point was refused, in OpenTSDB's three exception classes. `Display` gives the text after `put: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutError {
    /// `NumberFormatException`: `invalid value: <message>`.
    InvalidValue(NumberError),
    /// `IllegalArgumentException`: `illegal argument: <message>`.
    IllegalArgument(String),
    /// `NoSuchUniqueName`: `unknown metric: No such name for '<kind>': '<name>'` (also for tag keys/values).
    UnknownName { kind: UidKind, name: String },
}

impl PutError {
    /// The exception's own message, without the category: what `/api/put?details` reports for illegal
    /// arguments (spec: ingest §3.4).
    pub fn message(&self) -> String {
        match self {
            PutError::InvalidValue(e) => e.to_string(),
            PutError::IllegalArgument(m) => m.clone(),
            PutError::UnknownName { kind, name } => format!("No such name for '{kind}': '{name}'"),
        }
    }

    /// The error text `/api/put?details` shows for this failure (spec: ingest §3.4).
    pub fn http_detail(&self) -> String {
        match self {
            PutError::InvalidValue(_) => "Unable to parse value to a number".to_string(),
            PutError::IllegalArgument(m) => m.clone(),
            PutError::UnknownName { .. } => "Unknown metric".to_string(),
        }
    }

    /// The OpenTSDB stats category this failure is counted under (`rpc.errors type=...`).
    pub fn category(&self) -> ErrorCategory {
        match self {
            PutError::InvalidValue(_) => ErrorCategory::InvalidValues,
            PutError::IllegalArgument(_) => ErrorCategory::IllegalArguments,
            PutError::UnknownName { .. } => ErrorCategory::UnknownMetrics,
        }
    }

    pub(crate) fn illegal(message: impl Into<String>) -> PutError {
        PutError::IllegalArgument(message.into())
    }
}

impl fmt::Display for PutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PutError::InvalidValue(e) => write!(f, "invalid value: {e}"),
            PutError::IllegalArgument(m) => write!(f, "illegal argument: {m}"),
            PutError::UnknownName { .. } => write!(f, "unknown metric: {}", self.message()),
        }
    }
}

impl std::error::Error for PutError {}

impl From<NumberError> for PutError {
    fn from(e: NumberError) -> Self {
        PutError::InvalidValue(e)
    }
}

/// OpenTSDB's `rpc.errors` categories (spec: ingest §1.5.1), also rtsd's `/metrics` label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCategory {
    HbaseErrors,
    InvalidValues,
    IllegalArguments,
    UnknownMetrics,
}

impl ErrorCategory {
    pub const ALL: [ErrorCategory; 4] = [
        ErrorCategory::HbaseErrors,
        ErrorCategory::InvalidValues,
        ErrorCategory::IllegalArguments,
        ErrorCategory::UnknownMetrics,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::HbaseErrors => "hbase_errors",
            ErrorCategory::InvalidValues => "invalid_values",
            ErrorCategory::IllegalArguments => "illegal_arguments",
            ErrorCategory::UnknownMetrics => "unknown_metrics",
        }
    }
}

/// The configuration that changes what [`check_for_write`] accepts.
#[derive(Debug, Clone)]
pub struct Rules {
    /// `tsd.storage.max_tags` (default 8, at least 1).
    pub max_tags: usize,
    /// `tsd.core.tag.allow_specialchars`: extra characters allowed in names.
    pub allow_specialchars: Vec<char>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules { max_tags: 8, allow_specialchars: Vec::new() }
    }
}

/// Parses a value word as OpenTSDB does (spec: ingest §2.3): no `.`, `e` or `E` means an integer
/// (`Tags.parseLong`), anything else a double, kept on 4 bytes when a float holds it exactly.
pub fn parse_value(word: &str) -> Result<Value, NumberError> {
    if number::looks_like_integer(word) {
        Ok(Value::Int(number::parse_long(word)?))
    } else {
        let d = number::parse_java_double(word)?;
        if number::fits_in_float(d) {
            Ok(Value::Float(d as f32))
        } else {
            Ok(Value::Double(d))
        }
    }
}

/// Adds one `k=v` tag as OpenTSDB's `Tags.parse` does (spec: ingest §2.4): exactly two non-empty parts, a
/// repeated identical tag is ignored, a conflicting one refused.
pub fn add_tag<'a>(tags: &mut Tags<'a>, word: Cow<'a, str>) -> Result<(), PutError> {
    let split = match word.find('=') {
        Some(eq) if eq > 0 && eq + 1 < word.len() && !word[eq + 1..].contains('=') => eq,
        _ => return Err(PutError::illegal(format!("invalid tag: {word}"))),
    };
    let (key, value) = match word {
        Cow::Borrowed(s) => (Cow::Borrowed(&s[..split]), Cow::Borrowed(&s[split + 1..])),
        Cow::Owned(s) => (Cow::Owned(s[..split].to_string()), Cow::Owned(s[split + 1..].to_string())),
    };
    insert_tag(tags, key, value)
}

/// Adds a tag pair that arrived already split (JSON), with `Tags.parse`'s duplicate rule.
pub fn insert_tag<'a>(tags: &mut Tags<'a>, key: Cow<'a, str>, value: Cow<'a, str>) -> Result<(), PutError> {
    if let Some((_, existing)) = tags.iter().find(|(k, _)| *k == key) {
        if *existing == value {
            return Ok(());
        }
        return Err(PutError::illegal(format!("duplicate tag: {key}={value}, tags={}", java_map(tags))));
    }
    tags.push((key, value));
    Ok(())
}

/// The checks of `TSDB.addPoint` and `checkMetricAndTags`, in OpenTSDB's order (spec: ingest §2.6 rows 9-14).
/// Telnet and HTTP run their own syntax checks first; every protocol runs this before resolving UIDs.
pub fn check_for_write(point: &DataPoint<'_>, rules: &Rules) -> Result<(), PutError> {
    check_finite(point)?;
    // Seconds end at MAX_SECONDS, so one upper bound covers both resolutions.
    if point.timestamp < 0 || point.timestamp > MAX_MILLISECONDS {
        return Err(PutError::illegal(format!(
            "bad timestamp={} when trying to add value={}/{} to metric={}, tags={}",
            point.timestamp,
            javafmt::byte_array(&point.value.encode()),
            point.value.flags(),
            point.metric,
            point.tags_java()
        )));
    }
    if point.tags.is_empty() {
        return Err(PutError::illegal(format!("Need at least one tag (metric={}, tags={{}})", point.metric)));
    }
    if point.tags.len() > rules.max_tags {
        return Err(PutError::illegal(format!(
            "Too many tags: {} maximum allowed: {}, tags: {}",
            point.tags.len(),
            rules.max_tags,
            point.tags_java()
        )));
    }
    validate_string(&"metric name", &point.metric, rules)?;
    // OpenTSDB checks tags in its HashMap's order, which decides which of several bad tags is reported. Valid
    // tags (the hot path) are checked in arrival order; the HashMap order is worked out only to name the error.
    let valid = |c: char| is_allowed_char(c, rules);
    if point.tags.iter().all(|(k, v)| !k.is_empty() && !v.is_empty() && k.chars().all(valid) && v.chars().all(valid)) {
        return Ok(());
    }
    let keys: SmallVec<[&str; 8]> = point.tags.iter().map(|(k, _)| k.as_ref()).collect();
    for i in javafmt::hashmap_order(&keys) {
        let (k, v) = &point.tags[i];
        validate_string(&format_args!("tag name with value [{v}]"), k, rules)?;
        validate_string(&format_args!("tag value with key [{k}]"), v, rules)?;
    }
    Ok(())
}

/// The value of a point whose series (metric and tags) a connection already had accepted: `Some` only when the
/// point passes every other check of a write (a timestamp above 0 and within range, a value that parses and is
/// finite). `None` sends the point through the full checks, which name its error in OpenTSDB's order.
pub fn known_series_value(timestamp: i64, value: &str) -> Option<Value> {
    if timestamp <= 0 || timestamp > MAX_MILLISECONDS || value.is_empty() {
        return None;
    }
    let value = parse_value(value).ok()?;
    let finite = match value {
        Value::Float(f) => f.is_finite(),
        Value::Double(d) => d.is_finite(),
        Value::Int(_) => true,
    };
    finite.then_some(value)
}

/// `TSDB.addPoint`'s first check: a floating-point value must be finite (spec: ingest §2.6 row 9).
pub fn check_finite(point: &DataPoint<'_>) -> Result<(), PutError> {
    let float = match point.value {
        Value::Float(f) => Some(f as f64),
        Value::Double(d) => Some(d),
        Value::Int(_) => None,
    };
    match float {
        Some(d) if !d.is_finite() => Err(PutError::illegal(format!(
            "value is NaN or Infinite: {} for metric={} timestamp={}",
            java_double(d),
            point.metric,
            point.timestamp
        ))),
        _ => Ok(()),
    }
}

/// 2.4's error for a tag value that is JSON `null` (`/api/put`, `/api/rollup`): such a value is carried as an empty
/// string, and the empty-value error [`check_for_write`] gives it, at the same place in its HashMap-ordered
/// checks, becomes `Tags.validateString`'s null text, `Invalid tag value with key [k]: null`.
pub fn null_tag_value_error<K: AsRef<str>>(e: PutError, null_keys: &[K]) -> PutError {
    let PutError::IllegalArgument(m) = &e else { return e };
    match null_keys.iter().map(AsRef::as_ref).find(|k| *m == format!("Invalid tag value with key [{k}]: empty string"))
    {
        Some(k) => PutError::illegal(format!("Invalid tag value with key [{k}]: null")),
        None => e,
    }
}

/// OpenTSDB's `Tags.validateString` (spec: ingest §2.5): ASCII letters and digits, `-_./`, Unicode letters, and
/// the configured special characters.
pub fn validate_string(what: &dyn fmt::Display, s: &str, rules: &Rules) -> Result<(), PutError> {
    if s.is_empty() {
        return Err(PutError::illegal(format!("Invalid {what}: empty string")));
    }
    if let Some(c) = s.chars().find(|&c| !is_allowed_char(c, rules)) {
        return Err(PutError::illegal(format!("Invalid {what} (\"{s}\"): illegal character: {c}")));
    }
    Ok(())
}

/// Whether OpenTSDB accepts `c` in a metric or tag name.
pub fn is_allowed_char(c: char, rules: &Rules) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '-' | '_' | '.' | '/')
        || (!c.is_ascii() && is_java_letter(c))
        || rules.allow_specialchars.contains(&c)
}

/// Java's `Character.isLetter`, closely: Rust's `is_alphabetic` also admits letter-like numbers and marks, which
/// Java does not; for Latin-1 (all a telnet line can carry) the two agree once `ª` (U+00AA) and `º` (U+00BA),
/// letters to both, are in.
fn is_java_letter(c: char) -> bool {
    c.is_alphabetic() && !matches!(c, '\u{2160}'..='\u{2188}' | '\u{3007}' | '\u{3021}'..='\u{3029}')
}

/// Java's tag map printing for an error text.
fn java_map(tags: &Tags<'_>) -> String {
    let pairs: SmallVec<[(&str, &str); 8]> = tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect();
    javafmt::format_map(&pairs)
}

/// Java's `Double.toString` for the non-finite values OpenTSDB names in its NaN/Infinity error.
fn java_double(d: f64) -> String {
    if d.is_nan() {
        "NaN".to_string()
    } else if d == f64::INFINITY {
        "Infinity".to_string()
    } else if d == f64::NEG_INFINITY {
        "-Infinity".to_string()
    } else {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The fast path of a known series takes only points every check would pass; the rest get the full checks.
    #[test]
    fn known_series_values_pass_every_check_or_none() {
        assert_eq!(known_series_value(1700000000, "42"), Some(Value::Int(42)));
        assert_eq!(known_series_value(1700000000000, "1.5"), Some(Value::Float(1.5)));
        for (ts, v) in [(0, "1"), (-1, "1"), (MAX_MILLISECONDS + 1, "1"), (1, ""), (1, "abc"), (1, "NaN"), (1, "1e999")]
        {
            assert_eq!(known_series_value(ts, v), None, "{ts} {v}");
        }
    }

    fn point(metric: &'static str, ts: i64, value: Value, tags: &[(&'static str, &'static str)]) -> DataPoint<'static> {
        DataPoint {
            metric: Cow::Borrowed(metric),
            timestamp: ts,
            value,
            tags: tags.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v))).collect(),
        }
    }

    fn err(p: &DataPoint<'_>) -> String {
        check_for_write(p, &Rules::default()).unwrap_err().to_string()
    }

    #[test]
    fn accepts_a_valid_point() {
        // spec: ingest §5.9 T1
        let p = point("omg-TSDB/42._foo_", 1356998400, Value::Int(42), &[("host", "web01")]);
        assert_eq!(check_for_write(&p, &Rules::default()), Ok(()));
    }

    #[test]
    fn nan_and_infinity_are_refused() {
        // spec: ingest §2.6 row 9
        let p = point("m", 1356998400, Value::Float(f32::INFINITY), &[("host", "web01")]);
        assert_eq!(err(&p), "illegal argument: value is NaN or Infinite: Infinity for metric=m timestamp=1356998400");
        let p = point("m", 1356998400, Value::Double(f64::NEG_INFINITY), &[("host", "web01")]);
        assert_eq!(err(&p), "illegal argument: value is NaN or Infinite: -Infinity for metric=m timestamp=1356998400");
    }

    #[test]
    fn millisecond_timestamps_past_13_digits_are_refused() {
        // spec: ingest §2.6 row 10, §5.4 W15
        let p = point("m", 10000000000000, Value::Int(42), &[("host", "web01")]);
        assert_eq!(
            err(&p),
            "illegal argument: bad timestamp=10000000000000 when trying to add value=[42]/0 to metric=m, tags={host=web01}"
        );
        let p = point("m", 10000000000000, Value::Float(1.5), &[("host", "web01")]);
        assert_eq!(
            err(&p),
            "illegal argument: bad timestamp=10000000000000 when trying to add value=[63, -64, 0, 0]/11 to metric=m, tags={host=web01}"
        );
        let p = point("m", 9999999999999, Value::Int(42), &[("host", "web01")]);
        assert_eq!(check_for_write(&p, &Rules::default()), Ok(()));
        // spec: ingest §5.4 W16: negative timestamps have the upper bits set, so they are "bad" milliseconds.
        let p = point("m", -2147483648, Value::Int(42), &[("host", "web01")]);
        assert_eq!(
            err(&p),
            "illegal argument: bad timestamp=-2147483648 when trying to add value=[42]/0 to metric=m, tags={host=web01}"
        );
    }

    #[test]
    fn tag_count_limits() {
        // spec: ingest §2.6 rows 11 and 12
        let p = point("m", 1356998400, Value::Int(1), &[]);
        assert_eq!(err(&p), "illegal argument: Need at least one tag (metric=m, tags={})");
        let tags: Vec<(&str, &str)> = vec![
            ("a", "a"),
            ("b", "b"),
            ("c", "c"),
            ("d", "d"),
            ("e", "e"),
            ("f", "f"),
            ("g", "g"),
            ("host", "thursday"),
            ("i", "i"),
        ];
        let p = point("m", 1356998400, Value::Int(1), &tags);
        assert_eq!(
            err(&p),
            "illegal argument: Too many tags: 9 maximum allowed: 8, tags: {a=a, b=b, c=c, d=d, e=e, f=f, g=g, host=thursday, i=i}"
        );
        let rules = Rules { max_tags: 9, ..Rules::default() };
        assert_eq!(check_for_write(&p, &rules), Ok(()));
    }

    #[test]
    fn illegal_characters_name_the_offender() {
        // spec: ingest §2.5, §5.9 T2, T4
        let p = point("Not!A:Valid@Name", 1356998400, Value::Int(1), &[("host", "web01")]);
        assert_eq!(err(&p), "illegal argument: Invalid metric name (\"Not!A:Valid@Name\"): illegal character: !");
        let p = point("m", 1356998400, Value::Int(1), &[("ho st", "web01")]);
        assert_eq!(err(&p), "illegal argument: Invalid tag name with value [web01] (\"ho st\"): illegal character:  ");
        let p = point("m", 1356998400, Value::Int(1), &[("host", "web:01")]);
        assert_eq!(err(&p), "illegal argument: Invalid tag value with key [host] (\"web:01\"): illegal character: :");
        let p = point("m", 1356998400, Value::Int(1), &[("host", "")]);
        assert_eq!(err(&p), "illegal argument: Invalid tag value with key [host]: empty string");
    }

    #[test]
    fn latin1_letters_are_allowed_and_other_latin1_is_not() {
        // spec: ingest §2.5: of the bytes 0x80-0xFF only AA B5 BA C0-D6 D8-F6 F8-FF are letters
        let rules = Rules::default();
        for b in 0x80u8..=0xFF {
            let c = b as char;
            let letter = matches!(b, 0xAA | 0xB5 | 0xBA | 0xC0..=0xD6 | 0xD8..=0xF6 | 0xF8..=0xFF);
            assert_eq!(is_allowed_char(c, &rules), letter, "byte {b:#x}");
        }
    }

    #[test]
    fn special_characters_can_be_allowed() {
        // spec: ingest §5.9 T9
        let rules = Rules { allow_specialchars: "!)(%".chars().collect(), ..Rules::default() };
        let p = point("a!b(c%", 1356998400, Value::Int(1), &[("host", "web01")]);
        assert_eq!(check_for_write(&p, &rules), Ok(()));
    }

    #[test]
    fn tags_parse_like_opentsdb() {
        // spec: ingest §5.9 T5-T8
        let mut tags = Tags::new();
        add_tag(&mut tags, "foo=bar".into()).unwrap();
        add_tag(&mut tags, "qux=baz".into()).unwrap();
        assert_eq!(tags.len(), 2);
        for bad in ["foo", "foo=bar=qux", "=bar", "foo="] {
            let mut tags = Tags::new();
            assert_eq!(
                add_tag(&mut tags, bad.into()).unwrap_err().to_string(),
                format!("illegal argument: invalid tag: {bad}")
            );
        }
        let mut tags = Tags::new();
        add_tag(&mut tags, "foo=bar".into()).unwrap();
        assert_eq!(
            add_tag(&mut tags, "foo=qux".into()).unwrap_err().to_string(),
            "illegal argument: duplicate tag: foo=qux, tags={foo=bar}"
        );
        add_tag(&mut tags, "foo=bar".into()).unwrap();
        assert_eq!(tags.len(), 1);
    }

    #[test]
    fn error_categories_and_http_details() {
        // spec: ingest §3.4
        let e = PutError::UnknownName { kind: UidKind::Metric, name: "sys.cpu.nice".into() };
        assert_eq!(e.to_string(), "unknown metric: No such name for 'metrics': 'sys.cpu.nice'");
        assert_eq!(e.http_detail(), "Unknown metric");
        let e = PutError::InvalidValue(NumberError::InvalidChar('n', "notanum".into()));
        assert_eq!(e.to_string(), "invalid value: Invalid character 'n' in notanum");
        assert_eq!(e.http_detail(), "Unable to parse value to a number");
    }
}
