//! `/api/put` request bodies and replies (spec: ingest §3).
//!
//! OpenTSDB reads put bodies with Jackson 2.9 configured to accept `NaN`/`Infinity`-style number tokens, binds
//! them to `IncomingDataPoint` with Jackson's lenient coercions (numbers as metric names, numeric strings as
//! timestamps) and keeps a point's `value` as the literal text of its JSON token. A general JSON library would
//! reject those tokens and lose the literal text (`42.0000000` from netdata must stay `42.0000000`), so this is a
//! small single-pass reader that goes straight from bytes to [`IncomingPoint`]s without building a document tree.
//!
//! Replies (`?summary`, `?details`) are written by hand in OpenTSDB's key order (spec: ingest §3.6).
//!
//! ```
//! use rtsd_protocol::json_put::{parse_put_body, BodyPoint};
//! let body = br#"{"metric":"sys.cpu.nice","timestamp":1346846400,"value":18,"tags":{"host":"web01"}}"#;
//! let points = parse_put_body(body).unwrap();
//! match &points[0] {
//!     BodyPoint::Point(p) => assert_eq!(p.value.as_deref(), Some("18")),
//!     BodyPoint::Null => unreachable!(),
//! }
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::http_json::escape_json_string;
use crate::javafmt::hashmap_order;

mod plain;
pub use plain::{parse_plain_put_body, PlainBody, PlainPoint};

/// One element of a put body as OpenTSDB's `IncomingDataPoint` holds it, before any validation.
///
/// Validation (empty metric, bad timestamp, unparseable value, missing tags, ...) happens per point later and
/// produces per-point errors (spec: ingest §3.4), so every field keeps exactly what the client sent, including
/// absence. Text borrows from the request body unless the client escaped characters in it: a put body of many
/// points is read without an allocation per field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncomingPoint<'a> {
    /// `metric`; numbers and booleans are coerced to their text, `null`/missing is `None`.
    pub metric: Option<Cow<'a, str>>,
    /// `timestamp`; `null`/missing is 0 (which later fails as `Invalid timestamp`).
    pub timestamp: i64,
    /// `value` as the literal text of its JSON token (`42.0000000`, `1e-05`, `NaN`, `true`, a string's content).
    pub value: Option<Cow<'a, str>>,
    /// `tags` in the order first seen; a repeated key keeps its first position with the last value.
    pub tags: Option<Vec<(Cow<'a, str>, Cow<'a, str>)>>,
    /// Keys of `tags` whose value is JSON `null` (held there as an empty string): Jackson keeps the null in the
    /// map and 2.4 fails that point alone, `Invalid tag value with key [k]: null`.
    pub null_tags: Vec<Cow<'a, str>>,
    /// `tsuid`; accepted for compatibility, unused for writes.
    pub tsuid: Option<Cow<'a, str>>,
    /// `/api/rollup` only (OpenTSDB's `RollUpDataPoint`): `interval`, `aggregator`, `groupByAggregator`. Boxed:
    /// a put body holds many points, and every one would otherwise carry room for the three texts.
    pub rollup: Option<Box<crate::point::RollupSpec>>,
}

impl IncomingPoint<'_> {
    /// The point with its text copied out of the request body.
    pub fn into_owned(self) -> IncomingPoint<'static> {
        let own = |t: Option<Cow<'_, str>>| t.map(|t| Cow::Owned(t.into_owned()));
        IncomingPoint {
            metric: own(self.metric),
            timestamp: self.timestamp,
            value: own(self.value),
            tags: self.tags.map(|t| {
                t.into_iter().map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned()))).collect()
            }),
            tsuid: own(self.tsuid),
            rollup: self.rollup,
            null_tags: self.null_tags.into_iter().map(|k| Cow::Owned(k.into_owned())).collect(),
        }
    }
}

/// An element of a put body: a data point, or a JSON `null` (which OpenTSDB reports per point as
/// `Unexpected null datapoint encountered in set.` instead of failing the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyPoint<'a> {
    /// A JSON `null` array element.
    Null,
    /// A JSON object.
    Point(IncomingPoint<'a>),
}

impl BodyPoint<'_> {
    /// The tag keys whose value the element gave as JSON `null` (see [`IncomingPoint::null_tags`]).
    pub fn null_tags(&self) -> &[Cow<'_, str>] {
        match self {
            BodyPoint::Point(p) => &p.null_tags,
            BodyPoint::Null => &[],
        }
    }
}

/// Why a whole put body is rejected with 400 before any point is looked at (spec: ingest §3.2).
///
/// `Display` is the `message` of the error envelope; [`BodyError::details`] gives its `details`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Empty or whitespace-only body. OpenTSDB answers a whitespace-only body with a 500 caused by an index
    /// error; we deliberately answer 400 with the message it gives for an empty one.
    #[error("Missing request content")]
    MissingContent,
    /// After trimming, the body does not start with `{` or `[`.
    #[error("The JSON must start as an object or an array")]
    NotObjectOrArray,
    /// A syntax or type error anywhere in the body; nothing from the body may be written.
    #[error("Unable to parse the given JSON")]
    Invalid(JsonError),
}

impl BodyError {
    /// The envelope's `details` text: for [`BodyError::Invalid`], the Jackson-style exception line OpenTSDB
    /// shows (`com.fasterxml.jackson.core.JsonParseException: <what> at [line: L, column: C]`); none otherwise.
    pub fn details(&self) -> Option<String> {
        match self {
            BodyError::Invalid(e) => Some(e.to_string()),
            _ => None,
        }
    }
}

/// Whether Jackson would have failed while tokenising or while binding tokens to `IncomingDataPoint`; only the
/// exception class printed in `details` differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// Malformed JSON (`JsonParseException`).
    Syntax,
    /// Well-formed JSON of the wrong shape, e.g. an object as a metric name (`MismatchedInputException`).
    Mapping,
}

/// A located JSON error, for the `details` of a 400 reply.
///
/// `line` and `column` are 1-based and point at the offending character of the request body; columns count
/// UTF-16 code units like Java does. The wording imitates Jackson but is not contractual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Syntax or mapping failure.
    pub kind: JsonErrorKind,
    /// What went wrong, without the location.
    pub message: String,
    /// 1-based line (`\n`, `\r` and `\r\n` each end a line, as in Jackson).
    pub line: usize,
    /// 1-based column in UTF-16 code units.
    pub column: usize,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.kind {
            JsonErrorKind::Syntax => "com.fasterxml.jackson.core.JsonParseException",
            JsonErrorKind::Mapping => "com.fasterxml.jackson.databind.exc.MismatchedInputException",
        };
        write!(f, "{class}: {} at [line: {}, column: {}]", self.message, self.line, self.column)
    }
}

impl std::error::Error for JsonError {}

/// Parses an `/api/put` body: one object, or an array of objects and `null`s (spec: ingest §3.2).
///
/// Returns the elements in order. An empty array (netdata's `[\n\n]\n`) is `Ok(vec![])`; the daemon turns that
/// into `No datapoints found in content`. Any syntax or type error fails the whole body, like OpenTSDB.
///
/// Beyond OpenTSDB/Jackson 2.9, which would accept them: invalid UTF-8 (Java would substitute U+FFFD) and
/// trailing content after the top-level value are rejected. Lone UTF-16 surrogates from `\u` escapes become
/// U+FFFD, which later fails validation just like the surrogate would in Java.
pub fn parse_put_body(body: &[u8]) -> Result<Vec<BodyPoint<'_>>, BodyError> {
    parse_body(body, false)
}

/// Parses an `/api/rollup` body: as [`parse_put_body`], each point also reading the rollup fields `interval`,
/// `aggregator` and `groupByAggregator` into [`IncomingPoint::rollup`] (spec: query §6.13).
pub fn parse_rollup_body(body: &[u8]) -> Result<Vec<BodyPoint<'_>>, BodyError> {
    parse_body(body, true)
}

fn parse_body(body: &[u8], rollup: bool) -> Result<Vec<BodyPoint<'_>>, BodyError> {
    // Java's String.trim(): everything <= U+0020 at both ends.
    let Some(start) = body.iter().position(|&b| b > b' ') else {
        return Err(BodyError::MissingContent);
    };
    let end = body.iter().rposition(|&b| b > b' ').map_or(body.len(), |i| i + 1);
    let buf = &body[..end];
    // A body that is valid UTF-8 as a whole (every well-behaved client's) is checked once here, so its strings
    // are sliced without a check each; any other body takes the per-string checks that locate the bad byte.
    let text = std::str::from_utf8(buf).ok();
    let mut r = Reader { buf, text, pos: start, rollup };
    let points = match body[start] {
        b'{' => {
            r.pos += 1;
            vec![BodyPoint::Point(r.point().map_err(BodyError::Invalid)?)]
        }
        b'[' => {
            r.pos += 1;
            r.points().map_err(BodyError::Invalid)?
        }
        _ => return Err(BodyError::NotObjectOrArray),
    };
    r.skip_ws();
    if r.pos < r.buf.len() {
        return Err(BodyError::Invalid(r.unexpected("expected end of input")));
    }
    Ok(points)
}

/// A value token. Containers are reported by their opening bracket, which has been consumed.
enum Token<'a> {
    Str(Cow<'a, str>),
    /// A JSON number, as written; `float` when it has a fraction or an exponent.
    Num {
        text: &'a str,
        float: bool,
    },
    /// One of Jackson's non-numeric number tokens (`NaN`, `Infinity`, `-INF`, ...).
    NonNumeric(&'static str),
    True,
    False,
    Null,
    ObjectStart,
    ArrayStart,
}

impl Token<'_> {
    /// Jackson's name for the token, for mapping-error messages.
    fn jackson_name(&self) -> &'static str {
        match self {
            Token::Str(_) => "VALUE_STRING",
            Token::Num { float: false, .. } => "VALUE_NUMBER_INT",
            Token::Num { float: true, .. } | Token::NonNumeric(_) => "VALUE_NUMBER_FLOAT",
            Token::True => "VALUE_TRUE",
            Token::False => "VALUE_FALSE",
            Token::Null => "VALUE_NULL",
            Token::ObjectStart => "START_OBJECT",
            Token::ArrayStart => "START_ARRAY",
        }
    }
}

/// Tags collected for one point. A side index is only built for large maps so the common few-tag case stays a
/// plain vector while a hostile body with thousands of keys cannot make de-duplication quadratic.
struct TagBuilder<'a> {
    tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    index: Option<HashMap<Cow<'a, str>, usize>>,
}

impl<'a> TagBuilder<'a> {
    const INDEX_AFTER: usize = 16;

    /// Jackson's `HashMap.put`: a repeated key keeps its first position and takes the new value.
    fn put(&mut self, key: Cow<'a, str>, value: Cow<'a, str>) {
        let found = match &self.index {
            Some(index) => index.get(&key).copied(),
            None => self.tags.iter().position(|(k, _)| *k == key),
        };
        if let Some(i) = found {
            if let Some(slot) = self.tags.get_mut(i) {
                slot.1 = value;
            }
            return;
        }
        if let Some(index) = &mut self.index {
            index.insert(key.clone(), self.tags.len());
        }
        self.tags.push((key, value));
        if self.index.is_none() && self.tags.len() > Self::INDEX_AFTER {
            let index = self.tags.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
            self.index = Some(index);
        }
    }
}

/// Cursor over the trimmed body. Every method leaves `pos` just after what it consumed.
struct Reader<'a> {
    buf: &'a [u8],
    /// `buf` as text when all of it is valid UTF-8.
    text: Option<&'a str>,
    pos: usize,
    /// Whether the rollup fields are read (`/api/rollup`).
    rollup: bool,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// JSON whitespace only; other control characters between tokens are errors, as in Jackson.
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Builds an error located at byte offset `at`.
    fn error_at(&self, at: usize, kind: JsonErrorKind, message: String) -> JsonError {
        let at = at.min(self.buf.len());
        let mut line = 1;
        let mut line_start = 0;
        let mut i = 0;
        while i < at {
            match self.buf[i] {
                b'\n' => {
                    line += 1;
                    line_start = i + 1;
                }
                b'\r' => {
                    line += 1;
                    if self.buf.get(i + 1) == Some(&b'\n') && i + 1 < at {
                        i += 1;
                    }
                    line_start = i + 1;
                }
                _ => {}
            }
            i += 1;
        }
        // UTF-16 units: one per character, two for four-byte (astral) sequences.
        let column = 1 + self.buf[line_start.min(at)..at]
            .iter()
            .map(|&b| match b {
                0x80..=0xBF => 0,
                0xF0..=0xFF => 2,
                _ => 1,
            })
            .sum::<usize>();
        JsonError { kind, message, line, column }
    }

    fn syntax(&self, at: usize, message: impl Into<String>) -> JsonError {
        self.error_at(at, JsonErrorKind::Syntax, message.into())
    }

    fn mapping(&self, at: usize, message: impl Into<String>) -> JsonError {
        self.error_at(at, JsonErrorKind::Mapping, message.into())
    }

    /// "Unexpected character" (or end of input) at the current position.
    fn unexpected(&self, expected: &str) -> JsonError {
        match self.buf.get(self.pos..) {
            Some(rest) if !rest.is_empty() => {
                let shown = describe_char(rest);
                self.syntax(self.pos, format!("Unexpected character ({shown}): {expected}"))
            }
            _ => self.syntax(self.pos, format!("Unexpected end-of-input: {expected}")),
        }
    }

    /// The elements of a top-level array; `[` has been consumed.
    fn points(&mut self) -> Result<Vec<BodyPoint<'a>>, JsonError> {
        // A point with a metric, a timestamp, a value and a tag takes 50 bytes or more: sized so that a batch of
        // points is collected without growing the vector, and a body of tiny elements grows it a few times.
        let mut out = Vec::with_capacity((self.buf.len() - self.pos) / 64);
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(out);
        }
        loop {
            self.skip_ws();
            let at = self.pos;
            match self.token()? {
                Token::Null => out.push(BodyPoint::Null),
                Token::ObjectStart => out.push(BodyPoint::Point(self.point()?)),
                other => {
                    return Err(self.mapping(
                        at,
                        format!(
                            "Cannot deserialize instance of `net.opentsdb.core.IncomingDataPoint` out of {} token",
                            other.jackson_name()
                        ),
                    ))
                }
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(out);
                }
                _ => return Err(self.unexpected("was expecting comma to separate Array entries")),
            }
        }
    }

    /// One `IncomingDataPoint` object; `{` has been consumed. Repeated fields: the last one wins (Jackson calls
    /// the setter again).
    fn point(&mut self) -> Result<IncomingPoint<'a>, JsonError> {
        let mut p = IncomingPoint { rollup: self.rollup.then(Default::default), ..IncomingPoint::default() };
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(p);
        }
        loop {
            let key = self.field_name()?;
            self.skip_ws();
            let at = self.pos;
            let tok = self.token()?;
            match key.as_ref() {
                "metric" => p.metric = self.text_field(at, tok)?,
                "timestamp" => p.timestamp = self.timestamp_field(at, tok)?,
                "value" => p.value = self.text_field(at, tok)?,
                "tags" => (p.tags, p.null_tags) = self.tags_field(at, tok)?,
                "tsuid" => p.tsuid = self.text_field(at, tok)?,
                "interval" | "aggregator" | "groupByAggregator" if p.rollup.is_some() => {
                    let text = self.text_field(at, tok)?.map(Cow::into_owned);
                    if let Some(r) = p.rollup.as_mut() {
                        match key.as_ref() {
                            "interval" => r.interval = text,
                            "aggregator" => r.aggregator = text,
                            _ => r.groupby_aggregator = text,
                        }
                    }
                }
                _ => self.skip(tok)?,
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(p);
                }
                _ => return Err(self.unexpected("was expecting comma to separate Object entries")),
            }
        }
    }

    /// `"name"` followed by `:`, leaving the cursor at the value.
    fn field_name(&mut self) -> Result<Cow<'a, str>, JsonError> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("was expecting double-quote to start field name"));
        }
        let key = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.unexpected("was expecting a colon to separate field name and value"));
        }
        self.pos += 1;
        Ok(key)
    }

    /// A `String` property: scalars become their text (Jackson's coercion), `null` is absent.
    fn text_field(&self, at: usize, tok: Token<'a>) -> Result<Option<Cow<'a, str>>, JsonError> {
        match tok {
            Token::Null => Ok(None),
            other => self.scalar_text(at, other, "java.lang.String").map(Some),
        }
    }

    fn scalar_text(&self, at: usize, tok: Token<'a>, target: &str) -> Result<Cow<'a, str>, JsonError> {
        match tok {
            Token::Str(s) => Ok(s),
            Token::Num { text, .. } => Ok(Cow::Borrowed(text)),
            Token::NonNumeric(text) => Ok(Cow::Borrowed(text)),
            Token::True => Ok(Cow::Borrowed("true")),
            Token::False => Ok(Cow::Borrowed("false")),
            other => Err(self.mapping(
                at,
                format!("Cannot deserialize instance of `{target}` out of {} token", other.jackson_name()),
            )),
        }
    }

    /// The `long timestamp` property with Jackson 2.9's default coercions: integers as is, floats truncated
    /// toward zero, strings parsed as a Java long after trimming (empty or `"null"` mean 0), `null` is 0.
    fn timestamp_field(&self, at: usize, tok: Token<'a>) -> Result<i64, JsonError> {
        let out_of_range = |text: &str| self.mapping(at, format!("Numeric value ({text}) out of range of long"));
        match tok {
            Token::Null => Ok(0),
            Token::Num { text, float: false } => text.parse::<i64>().map_err(|_| out_of_range(text)),
            Token::Num { text, float: true } => match text.parse::<f64>() {
                Ok(d) => double_to_long(d).ok_or_else(|| out_of_range(text)),
                Err(_) => Err(out_of_range(text)),
            },
            // Java's (long) cast of NaN is 0; the infinities are out of range.
            Token::NonNumeric("NaN") => Ok(0),
            Token::NonNumeric(text) => Err(out_of_range(text)),
            Token::Str(s) => {
                let t = s.trim_matches(|c: char| c <= ' ');
                if t.is_empty() || t == "null" {
                    return Ok(0);
                }
                java_parse_long(t).ok_or_else(|| {
                    self.mapping(
                        at,
                        format!("Cannot deserialize value of type `long` from String \"{t}\": not a valid Long value"),
                    )
                })
            }
            other => Err(self
                .mapping(at, format!("Cannot deserialize instance of `long` out of {} token", other.jackson_name()))),
        }
    }

    /// The `HashMap<String, String> tags` property.
    #[allow(clippy::type_complexity)]
    fn tags_field(
        &mut self,
        at: usize,
        tok: Token<'a>,
    ) -> Result<(Option<Vec<(Cow<'a, str>, Cow<'a, str>)>>, Vec<Cow<'a, str>>), JsonError> {
        match tok {
            Token::Null => return Ok((None, Vec::new())),
            Token::ObjectStart => {}
            other => {
                return Err(self.mapping(
                    at,
                    format!("Cannot deserialize instance of `java.util.HashMap` out of {} token", other.jackson_name()),
                ))
            }
        }
        let mut tags = TagBuilder { tags: Vec::new(), index: None };
        let mut nulls: Vec<Cow<'a, str>> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok((Some(tags.tags), nulls));
        }
        loop {
            let key = self.field_name()?;
            self.skip_ws();
            let at = self.pos;
            // A null is kept (as Jackson keeps it in the map) and fails the point later, not the body.
            nulls.retain(|k| *k != key);
            let value = match self.token()? {
                Token::Null => {
                    nulls.push(key.clone());
                    Cow::Borrowed("")
                }
                tok => self.scalar_text(at, tok, "java.lang.String")?,
            };
            tags.put(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok((Some(tags.tags), nulls));
                }
                _ => return Err(self.unexpected("was expecting comma to separate Object entries")),
            }
        }
    }

    /// Skips the rest of a value whose first token has been read, validating it. Iterative with an explicit
    /// stack so that arbitrarily deep nesting in unknown fields cannot overflow the thread's stack.
    fn skip(&mut self, first: Token<'a>) -> Result<(), JsonError> {
        let mut stack: Vec<u8> = match first {
            Token::ObjectStart => vec![b'}'],
            Token::ArrayStart => vec![b']'],
            _ => return Ok(()),
        };
        let mut just_opened = true;
        while let Some(&close) = stack.last() {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                stack.pop();
                just_opened = false;
                continue;
            }
            if !just_opened {
                if self.peek() != Some(b',') {
                    return Err(self.unexpected(if close == b'}' {
                        "was expecting comma to separate Object entries"
                    } else {
                        "was expecting comma to separate Array entries"
                    }));
                }
                self.pos += 1;
            }
            just_opened = false;
            if close == b'}' {
                self.field_name()?;
            }
            self.skip_ws();
            match self.token()? {
                Token::ObjectStart => {
                    stack.push(b'}');
                    just_opened = true;
                }
                Token::ArrayStart => {
                    stack.push(b']');
                    just_opened = true;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads one value token at the cursor.
    fn token(&mut self) -> Result<Token<'a>, JsonError> {
        let Some(b) = self.peek() else {
            return Err(self.unexpected("expected a value"));
        };
        match b {
            b'{' => {
                self.pos += 1;
                Ok(Token::ObjectStart)
            }
            b'[' => {
                self.pos += 1;
                Ok(Token::ArrayStart)
            }
            b'"' => Ok(Token::Str(self.string()?)),
            b'-' | b'0'..=b'9' => self.number(),
            b'+' => self.signed_non_numeric(),
            b't' => self.literal("true", Token::True),
            b'f' => self.literal("false", Token::False),
            b'n' => self.literal("null", Token::Null),
            b'N' => self.literal("NaN", Token::NonNumeric("NaN")),
            b'I' => self.literal("Infinity", Token::NonNumeric("Infinity")),
            _ => {
                Err(self
                    .unexpected("expected a valid value (number, String, array, object, 'true', 'false' or 'null')"))
            }
        }
    }

    fn literal(&mut self, word: &'static str, tok: Token<'a>) -> Result<Token<'a>, JsonError> {
        if self.buf[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(tok)
        } else {
            Err(self.unrecognized_token())
        }
    }

    fn unrecognized_token(&self) -> JsonError {
        let rest = &self.buf[self.pos..];
        let len = rest
            .iter()
            .take(256)
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'_' | b'.'))
            .count()
            .max(1);
        let word = String::from_utf8_lossy(&rest[..len.min(rest.len())]);
        self.syntax(self.pos, format!("Unrecognized token '{word}': was expecting ('true', 'false' or 'null')"))
    }

    /// `+INF`, `+Infinity` (Jackson 2.9 accepts no other leading `+`).
    fn signed_non_numeric(&mut self) -> Result<Token<'a>, JsonError> {
        let rest = &self.buf[self.pos..];
        if rest.starts_with(b"+Infinity") {
            self.pos += 9;
            Ok(Token::NonNumeric("+Infinity"))
        } else if rest.starts_with(b"+INF") {
            self.pos += 4;
            Ok(Token::NonNumeric("+INF"))
        } else {
            Err(self.unexpected_number_start())
        }
    }

    fn unexpected_number_start(&self) -> JsonError {
        let at = self.pos + 1;
        let shown =
            self.buf.get(at..).filter(|r| !r.is_empty()).map_or_else(|| "end-of-input".to_owned(), describe_char);
        self.syntax(
            at,
            format!(
                "Unexpected character ({shown}) in numeric value: expected digit (0-9) to follow minus sign, for valid numeric value"
            ),
        )
    }

    /// A JSON number (no leading zeros, no leading `+`, no bare `.`), or `-INF`/`-Infinity`.
    fn number(&mut self) -> Result<Token<'a>, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            let rest = &self.buf[self.pos..];
            if rest.starts_with(b"-Infinity") {
                self.pos += 9;
                return Ok(Token::NonNumeric("-Infinity"));
            }
            if rest.starts_with(b"-INF") {
                self.pos += 4;
                return Ok(Token::NonNumeric("-INF"));
            }
            if !matches!(rest.get(1), Some(b'0'..=b'9')) {
                return Err(self.unexpected_number_start());
            }
            self.pos += 1;
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
            if matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.syntax(self.pos, "Invalid numeric value: Leading zeroes not allowed"));
            }
        } else {
            self.digits();
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            float = true;
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.unexpected_in_number("Decimal point not followed by a digit"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            float = true;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.unexpected_in_number("Exponent indicator not followed by a digit"));
            }
        }
        // Only ASCII bytes were consumed, so this cannot fail; an error is still handled rather than unwrapped.
        match self.utf8(start, self.pos) {
            Ok(text) => Ok(Token::Num { text, float }),
            Err(_) => Err(self.syntax(start, "Invalid numeric value")),
        }
    }

    fn digits(&mut self) -> usize {
        let n = self.buf[self.pos..].iter().take_while(|b| b.is_ascii_digit()).count();
        self.pos += n;
        n
    }

    fn unexpected_in_number(&self, what: &str) -> JsonError {
        let shown =
            self.buf.get(self.pos..).filter(|r| !r.is_empty()).map_or_else(|| "end-of-input".to_owned(), describe_char);
        self.syntax(self.pos, format!("Unexpected character ({shown}) in numeric value: {what}"))
    }

    /// A string literal at the cursor (which is on the opening quote). Borrows from the body unless it has
    /// escapes. Raw control characters and invalid UTF-8 are errors.
    fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let buf = self.buf;
        self.pos += 1;
        let mut owned: Option<String> = None;
        let mut run = self.pos;
        loop {
            let Some(off) = buf[self.pos..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20) else {
                self.pos = buf.len();
                return Err(
                    self.syntax(buf.len(), "Unexpected end-of-input: was expecting closing quote for a string value")
                );
            };
            let i = self.pos + off;
            let chunk = self.utf8(run, i)?;
            match buf[i] {
                b'"' => {
                    self.pos = i + 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(chunk),
                        Some(mut s) => {
                            s.push_str(chunk);
                            Cow::Owned(s)
                        }
                    });
                }
                b'\\' => {
                    self.pos = i + 1;
                    let c = self.escape()?;
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(chunk);
                    s.push(c);
                    run = self.pos;
                }
                b => {
                    return Err(self.syntax(
                        i,
                        format!(
                            "Illegal unquoted character ((CTRL-CHAR, code {b})): has to be escaped using backslash to be included in string value"
                        ),
                    ))
                }
            }
        }
    }

    /// `buf[from..to]` as text, or Jackson's complaint about the first bad byte.
    fn utf8(&self, from: usize, to: usize) -> Result<&'a str, JsonError> {
        // Callers cut at ASCII bytes (quotes, backslashes, number ends): always character boundaries.
        if let Some(text) = self.text.and_then(|t| t.get(from..to)) {
            return Ok(text);
        }
        let bytes: &'a [u8] = &self.buf[from..to];
        std::str::from_utf8(bytes).map_err(|e| {
            let at = from + e.valid_up_to();
            let b = bytes.get(e.valid_up_to()).copied().unwrap_or(0);
            let what = if (0x80..=0xBF).contains(&b) || b >= 0xF8 { "start" } else { "middle" };
            self.syntax(at, format!("Invalid UTF-8 {what} byte 0x{b:02x}"))
        })
    }

    /// The character after a backslash (cursor just past the backslash).
    fn escape(&mut self) -> Result<char, JsonError> {
        let Some(b) = self.peek() else {
            return Err(self.syntax(self.pos, "Unexpected end-of-input in character escape sequence"));
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        // A high surrogate combines with an immediately following escaped low surrogate.
                        let rest = &self.buf[self.pos..];
                        let low = if rest.starts_with(b"\\u") {
                            let save = self.pos;
                            self.pos += 2;
                            match self.hex4()? {
                                l @ 0xDC00..=0xDFFF => Some(l),
                                _ => {
                                    self.pos = save;
                                    None
                                }
                            }
                        } else {
                            None
                        };
                        match low {
                            Some(l) => {
                                let cp = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(l) - 0xDC00);
                                char::from_u32(cp).unwrap_or('\u{FFFD}')
                            }
                            None => '\u{FFFD}',
                        }
                    }
                    other => char::from_u32(u32::from(other)).unwrap_or('\u{FFFD}'),
                }
            }
            _ => {
                let shown = describe_char(&self.buf[self.pos - 1..]);
                return Err(self.syntax(self.pos - 1, format!("Unrecognized character escape ({shown})")));
            }
        };
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                Some(_) => return Err(self.unexpected("expected a hex-digit for character escape sequence")),
                None => return Err(self.syntax(self.pos, "Unexpected end-of-input in character escape sequence")),
            };
            v = (v << 4) | u16::from(d);
            self.pos += 1;
        }
        Ok(v)
    }
}

/// `'x' (code 120)` as Jackson describes a character in messages; decodes a UTF-8 sequence when there is one.
fn describe_char(rest: &[u8]) -> String {
    let len = match rest.first() {
        Some(0xC0..=0xDF) => 2,
        Some(0xE0..=0xEF) => 3,
        Some(0xF0..=0xF7) => 4,
        _ => 1,
    };
    let decoded = rest.get(..len).and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| s.chars().next());
    match decoded {
        Some(c) if c < ' ' => format!("CTRL-CHAR, code {}", u32::from(c)),
        Some(c) => format!("'{c}' (code {})", u32::from(c)),
        None => format!(
            "'\u{FFFD}' (code {} / 0x{:x})",
            rest.first().copied().unwrap_or(0),
            rest.first().copied().unwrap_or(0)
        ),
    }
}

/// Java's `(long)` of a double, with Jackson's range check: NaN is 0, values beyond ±2^63 are errors,
/// everything else is truncated toward zero.
fn double_to_long(d: f64) -> Option<i64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() {
        Some(0)
    } else if (-TWO_63..=TWO_63).contains(&d) {
        // `as` truncates toward zero and saturates at 2^63, exactly like Java's cast.
        Some(d as i64)
    } else {
        None
    }
}

/// Java's `Long.parseLong` for ASCII input: an optional sign, at least one digit, within range.
fn java_parse_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Rust's i64 parser accepts the same sign forms, so it does the range check.
    s.parse::<i64>().ok()
}

/// A data point rendered as OpenTSDB's `?details` reply shows it (spec: ingest §3.6): keys `metric`, `timestamp`,
/// `value` (always a JSON string), `tags` in Java `HashMap` order, `tsuid`; absent fields are left out.
///
/// Exists so that each error in `"errors":[...]` echoes the client's point exactly as a real TSD would.
pub fn datapoint_json(p: &IncomingPoint<'_>, out: &mut String) {
    out.push('{');
    if let Some(m) = &p.metric {
        out.push_str("\"metric\":\"");
        escape_json_string(m, out);
        out.push_str("\",");
    }
    out.push_str("\"timestamp\":");
    out.push_str(&p.timestamp.to_string());
    if let Some(v) = &p.value {
        out.push_str(",\"value\":\"");
        escape_json_string(v, out);
        out.push('"');
    }
    if let Some(tags) = &p.tags {
        out.push_str(",\"tags\":{");
        let keys: Vec<&str> = tags.iter().map(|(k, _)| k.as_ref()).collect();
        for (n, i) in hashmap_order(&keys).into_iter().enumerate() {
            let Some((k, v)) = tags.get(i) else { continue };
            if n > 0 {
                out.push(',');
            }
            out.push('"');
            escape_json_string(k, out);
            if p.null_tags.contains(k) {
                out.push_str("\":null");
                continue;
            }
            out.push_str("\":\"");
            escape_json_string(v, out);
            out.push('"');
        }
        out.push('}');
    }
    if let Some(t) = &p.tsuid {
        out.push_str(",\"tsuid\":\"");
        escape_json_string(t, out);
        out.push('"');
    }
    // RollUpDataPoint's own properties follow the inherited ones (Jackson: fields, then getter-only ones).
    if let Some(r) = &p.rollup {
        for (name, v) in
            [("interval", &r.interval), ("aggregator", &r.aggregator), ("groupByAggregator", &r.groupby_aggregator)]
        {
            if let Some(v) = v {
                out.push_str(",\"");
                out.push_str(name);
                out.push_str("\":\"");
                escape_json_string(v, out);
                out.push('"');
            }
        }
    }
    out.push('}');
}

/// One entry of the `"errors"` list of a `?details` reply: the point as received and why it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutDetail<'a> {
    /// The element as parsed (a `null` element renders as `"datapoint":null`).
    pub point: BodyPoint<'a>,
    /// The per-point error text (spec: ingest §3.4), e.g. `Unable to parse value to a number`.
    pub error: String,
}

/// The `?summary` / `?details` reply body in OpenTSDB's (Java 8 `HashMap`) key order (spec: ingest §3.5, §3.6):
/// `{"success":S,"failed":F}`, with `"timeouts"` between them when `sync_timeout` is in effect, and `"errors"` last
/// when details were requested (an empty list is written as `[]`).
pub fn summary_json(success: u64, failed: u64, timeouts: Option<u64>, errors: Option<&[PutDetail<'_>]>) -> String {
    let mut out = String::with_capacity(48 + errors.map_or(0, |e| e.len() * 128));
    out.push_str("{\"success\":");
    out.push_str(&success.to_string());
    if let Some(t) = timeouts {
        out.push_str(",\"timeouts\":");
        out.push_str(&t.to_string());
    }
    out.push_str(",\"failed\":");
    out.push_str(&failed.to_string());
    if let Some(errors) = errors {
        out.push_str(",\"errors\":[");
        for (n, d) in errors.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str("{\"datapoint\":");
            match &d.point {
                BodyPoint::Null => out.push_str("null"),
                BodyPoint::Point(p) => datapoint_json(p, &mut out),
            }
            out.push_str(",\"error\":\"");
            escape_json_string(&d.error, &mut out);
            out.push_str("\"}");
        }
        out.push(']');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<Vec<BodyPoint<'_>>, BodyError> {
        parse_put_body(body.as_bytes())
    }

    fn points(body: &str) -> Vec<IncomingPoint<'static>> {
        match parse(body) {
            Ok(v) => v
                .into_iter()
                .map(|p| match p {
                    BodyPoint::Point(p) => p.into_owned(),
                    BodyPoint::Null => panic!("unexpected null in {body:?}"),
                })
                .collect(),
            Err(e) => panic!("{body:?} failed: {e} {:?}", e.details()),
        }
    }

    fn one(body: &str) -> IncomingPoint<'static> {
        let mut v = points(body);
        assert_eq!(v.len(), 1, "{body:?}");
        v.remove(0)
    }

    // spec: query §6.13; OpenTSDB 2.4 RollUpDataPoint (its properties after IncomingDataPoint's, nulls left out).
    #[test]
    fn rollup_bodies_keep_their_fields_and_put_bodies_ignore_them() {
        let body = br#"{"metric":"m","timestamp":1,"value":2,"tags":{"h":"w"},"groupByAggregator":"max","interval":"1h","aggregator":7}"#;
        let Ok(mut parsed) = parse_rollup_body(body) else { panic!("parses") };
        let BodyPoint::Point(p) = parsed.remove(0) else { panic!("a point") };
        let spec = p.rollup.clone().expect("rollup fields");
        assert_eq!(
            (spec.interval.as_deref(), spec.aggregator.as_deref(), spec.groupby_aggregator.as_deref()),
            (Some("1h"), Some("7"), Some("max"))
        );
        let mut out = String::new();
        datapoint_json(&p, &mut out);
        assert_eq!(
            out,
            r#"{"metric":"m","timestamp":1,"value":"2","tags":{"h":"w"},"interval":"1h","aggregator":"7","groupByAggregator":"max"}"#
        );
        let put = one(std::str::from_utf8(body).unwrap());
        assert_eq!(put.rollup, None);
        let mut out = String::new();
        datapoint_json(&put, &mut out);
        assert_eq!(out, r#"{"metric":"m","timestamp":1,"value":"2","tags":{"h":"w"}}"#);
    }

    fn value_of(token: &str) -> Option<String> {
        one(&format!(r#"{{"metric":"m","timestamp":1,"value":{token},"tags":{{"h":"w"}}}}"#)).value.map(Cow::into_owned)
    }

    fn timestamp_of(token: &str) -> Result<i64, BodyError> {
        let body = format!(r#"{{"metric":"m","timestamp":{token}}}"#);
        parse(&body).map(|v| match v.first() {
            Some(BodyPoint::Point(p)) => p.timestamp,
            _ => panic!("no point"),
        })
    }

    fn assert_invalid(body: &str) -> JsonError {
        match parse(body) {
            Err(BodyError::Invalid(e)) => e,
            other => panic!("{body:?}: expected a parse error, got {other:?}"),
        }
    }

    #[allow(clippy::type_complexity)]
    fn tags(pairs: &[(&str, &str)]) -> Option<Vec<(Cow<'static, str>, Cow<'static, str>)>> {
        Some(pairs.iter().map(|(k, v)| (Cow::Owned(k.to_string()), Cow::Owned(v.to_string()))).collect())
    }

    // Text without escapes borrows from the body (no allocation per field); escaped text is decoded into its
    // own string. Either way the content is what the client meant.
    #[test]
    fn plain_text_borrows_from_the_body() {
        let body = br#"{"metric":"sys.cpu","timestamp":1,"value":1.5,"tags":{"host":"a\u0062","dc":"lga"}}"#;
        let Ok(parsed) = parse_put_body(body) else { panic!("parses") };
        let Some(BodyPoint::Point(p)) = parsed.first() else { panic!("a point") };
        assert!(matches!(p.metric, Some(Cow::Borrowed("sys.cpu"))));
        assert!(matches!(p.value, Some(Cow::Borrowed("1.5"))));
        let tags = p.tags.as_ref().unwrap();
        assert!(matches!(&tags[0], (Cow::Borrowed("host"), Cow::Owned(v)) if v == "ab"));
        assert!(matches!(&tags[1], (Cow::Borrowed("dc"), Cow::Borrowed("lga"))));
        assert_eq!(p.clone().into_owned(), *p);
    }

    // spec: ingest §3.8 — the docs' example request.
    #[test]
    fn single_object() {
        let p =
            one(r#"{"metric":"sys.cpu.nice","timestamp":1346846400,"value":18,"tags":{"host":"web01","dc":"lga"}}"#);
        assert_eq!(
            p,
            IncomingPoint {
                metric: Some("sys.cpu.nice".into()),
                timestamp: 1346846400,
                value: Some("18".into()),
                tags: tags(&[("host", "web01"), ("dc", "lga")]),
                tsuid: None,
                rollup: None,
                null_tags: Vec::new(),
            }
        );
    }

    // spec: ingest §5.10 P7 — an array of two.
    #[test]
    fn array_of_two() {
        let v = points(
            r#"[{"metric":"a","timestamp":1,"value":1,"tags":{"h":"x"}},
                {"metric":"b","timestamp":2,"value":"2","tags":{"h":"y"}}]"#,
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].metric.as_deref(), Some("b"));
        assert_eq!(v[1].value.as_deref(), Some("2"));
    }

    // clients.md netdata: the empty batch `[\n\n]\n`; the daemon answers `No datapoints found in content`.
    #[test]
    fn netdata_empty_batch() {
        assert_eq!(parse("[\n\n]\n"), Ok(vec![]));
        assert_eq!(parse("[]"), Ok(vec![]));
        assert_eq!(parse(" [ ] "), Ok(vec![]));
    }

    // clients.md netdata: 7-decimal values and keep-alive batches separated by newlines.
    #[test]
    fn netdata_batch_keeps_literal_values() {
        let v = points(
            "[\n{\"metric\":\"netdatahttp.statsd_harness.gauge_gauge.gauge\",\"timestamp\":1795303110,\"value\":42.0000000,\"tags\":{\"host\":\"netdata-r1\"}},\n{\"metric\":\"n.c\",\"timestamp\":1795303110,\"value\":5.9409075,\"tags\":{\"host\":\"netdata-r1\"}}\n]\n",
        );
        assert_eq!(v[0].value.as_deref(), Some("42.0000000"));
        assert_eq!(v[1].value.as_deref(), Some("5.9409075"));
    }

    // clients.md tcollector --http: floats, spaces after separators, ms timestamps.
    #[test]
    fn tcollector_floats() {
        let v = points(
            r#"[{"metric": "harness.tcollector.http.gauge", "timestamp": 1795302420, "value": 42.0, "tags": {"host": "harness-tcollector", "run": "r1", "iface": "eth0"}}, {"metric": "harness.tcollector.http.ms", "timestamp": 1795302420123, "value": 7.0, "tags": {"host": "h"}}]"#,
        );
        assert_eq!(v[0].value.as_deref(), Some("42.0"));
        assert_eq!(v[0].tags.as_ref().map(Vec::len), Some(3));
        assert_eq!(v[1].timestamp, 1795302420123);
        assert_eq!(v[1].value.as_deref(), Some("7.0"));
    }

    // clients.md opentsdb-py / pyopentsdb: string values and string timestamps.
    #[test]
    fn string_values_and_timestamps() {
        let p = one(r#"{"metric":"m","timestamp":"1795302119","value":"12.5","tags":{"host":"a"}}"#);
        assert_eq!(p.timestamp, 1795302119);
        assert_eq!(p.value.as_deref(), Some("12.5"));
    }

    // clients.md values and spec: ingest §5.10 P9 — the token text is kept verbatim.
    #[test]
    fn numeric_values_keep_their_text() {
        for v in [
            "42",
            "43.5",
            "-7",
            "0.001",
            "1e-05",
            "-3.25e2",
            "42.0000000",
            "123456789",
            "42.2",
            "-42.2",
            "42.22e3",
            "42.22E3",
            "-42.22e3",
            "42.22e-3",
            "-4.2e-3",
            "-4.2E-3",
            "-42",
            "0",
            "-0",
            "1E+2",
            "123456789012345678901234567890",
            "1e999",
        ] {
            assert_eq!(value_of(v).as_deref(), Some(v), "value {v}");
        }
    }

    // spec: ingest §3.2, §5.10 P16 — Jackson's non-numeric tokens are accepted (and later fail as
    // `Unable to parse value to a number`), as is any string and `true`.
    #[test]
    fn non_numeric_tokens_accepted() {
        for v in ["NaN", "+INF", "-INF", "Infinity", "+Infinity", "-Infinity"] {
            assert_eq!(value_of(v).as_deref(), Some(v), "token {v}");
        }
        assert_eq!(value_of(r#""notanumber""#).as_deref(), Some("notanumber"));
        assert_eq!(value_of("true").as_deref(), Some("true"));
        assert_eq!(value_of("false").as_deref(), Some("false"));
    }

    // spec: ingest §3.2, §5.10 P17 — anything else is a JSON syntax error for the whole request.
    #[test]
    fn other_non_numeric_spellings_rejected() {
        for v in [
            "Nan",
            "INF",
            "+inf",
            "nan",
            "inf",
            "-inf",
            "infinity",
            "-NaN",
            "+NaN",
            "NaNx",
            "-INFINITY",
            "Infinit",
            "+1",
            "+",
            "-",
            "01",
            "-01",
            "1.",
            ".5",
            "1e",
            "1e+",
            "1.e3",
            "0x10",
            "True",
            "NULL",
            "tru",
            "'x'",
            "1.5.3",
            "- 1",
        ] {
            let body = format!(r#"{{"metric":"m","timestamp":1,"value":{v},"tags":{{"h":"w"}}}}"#);
            let e = assert_invalid(&body);
            assert_eq!(e.kind, JsonErrorKind::Syntax, "{v}: {e}");
        }
    }

    // spec: ingest §3.2, §5.10 P11 — malformed JSON, `Hello World`, empty body.
    #[test]
    fn whole_body_errors() {
        assert_eq!(parse(""), Err(BodyError::MissingContent));
        // Deliberate: OpenTSDB answers whitespace-only bodies with a 500.
        assert_eq!(parse(" \r\n\t "), Err(BodyError::MissingContent));
        assert_eq!(parse("Hello World"), Err(BodyError::NotObjectOrArray));
        assert_eq!(parse("\"x\""), Err(BodyError::NotObjectOrArray));
        assert_eq!(parse("null"), Err(BodyError::NotObjectOrArray));
        assert_eq!(parse("\u{feff}[]"), Err(BodyError::NotObjectOrArray));
        for body in [
            "{",
            "[",
            r#"{"metric":"x","#,
            r#"{"metric":"x"]"#,
            r#"[{"metric":"x"}"#,
            r#"{"metric" "x"}"#,
            r#"{metric:"x"}"#,
            r#"{'metric':"x"}"#,
            r#"{"metric":"x",}"#,
            r#"[{},]"#,
            r#"[,]"#,
            r#"{"metric":"x""#,
            r#"{"metric":"x}"#,
            "[{\"value\":1}\u{0b}]",
        ] {
            assert_invalid(body);
        }
    }

    // spec: ingest §3.7 — Display is the envelope message; details carry the Jackson-style location.
    #[test]
    fn error_texts() {
        assert_eq!(BodyError::MissingContent.to_string(), "Missing request content");
        assert_eq!(BodyError::NotObjectOrArray.to_string(), "The JSON must start as an object or an array");
        assert_eq!(BodyError::MissingContent.details(), None);
        let e = parse("[\n{\"value\": Nan}\n]");
        let Err(e) = e else { panic!("accepted") };
        assert_eq!(e.to_string(), "Unable to parse the given JSON");
        // `{"value": Nan}`: '{' is column 1, 'N' column 11.
        assert_eq!(
            e.details().as_deref(),
            Some("com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'Nan': was expecting ('true', 'false' or 'null') at [line: 2, column: 11]")
        );
    }

    #[test]
    fn error_locations() {
        // \r\n is one line break; a lone \r is one too.
        // Lines: "[", "{},", "{}", ",x]".
        let e = assert_invalid("[\r\n{},\r{}\r\n,x]");
        assert_eq!((e.line, e.column), (4, 2));
        // Columns count UTF-16 units: 'é' is one, '😀' is two.
        let e = assert_invalid(r#"{"metric":"é😀",x}"#);
        assert_eq!((e.line, e.column), (1, 17));
        // Errors point at the offending character of the body as sent, leading blanks included.
        let e = assert_invalid("  {\"a\":tru}");
        assert_eq!((e.line, e.column), (1, 8));
        let e = assert_invalid("[{}");
        assert_eq!((e.line, e.column), (1, 4));
    }

    // spec: ingest §3.4, §5.10 P13-P15, P18 — absent and null fields stay absent; validation happens later.
    #[test]
    fn missing_and_null_fields() {
        let p = one("{}");
        assert_eq!(p, IncomingPoint::default());
        let p = one(r#"{"metric":null,"timestamp":null,"value":null,"tags":null,"tsuid":null}"#);
        assert_eq!(p, IncomingPoint::default());
        let p = one(r#"{"metric":"","timestamp":-1,"value":"","tags":{}}"#);
        assert_eq!(p.metric.as_deref(), Some(""));
        assert_eq!(p.timestamp, -1);
        assert_eq!(p.value.as_deref(), Some(""));
        assert_eq!(p.tags, Some(vec![]));
        let p = one(r#"{"tsuid":"000001000001000001"}"#);
        assert_eq!(p.tsuid.as_deref(), Some("000001000001000001"));
    }

    // spec: ingest §3.4 — a null array element is reported per point.
    #[test]
    fn null_elements() {
        let v = parse(r#"[null, {"metric":"m"}, null]"#);
        let Ok(v) = v else { panic!("{v:?}") };
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], BodyPoint::Null);
        assert!(matches!(&v[1], BodyPoint::Point(p) if p.metric.as_deref() == Some("m")));
        assert_eq!(v[2], BodyPoint::Null);
    }

    // spec: ingest §3.2 — an array element must be an object (or null).
    #[test]
    fn non_object_elements_rejected() {
        for body in ["[1]", r#"["x"]"#, "[[]]", "[true]", "[{}, 2]", "[NaN]"] {
            let e = assert_invalid(body);
            assert_eq!(e.kind, JsonErrorKind::Mapping, "{body}");
        }
        let e = assert_invalid("[x]");
        assert_eq!(e.kind, JsonErrorKind::Syntax);
    }

    // spec: ingest §3.2 — timestamp coercions (Jackson 2.9 defaults).
    #[test]
    fn timestamp_coercions() {
        assert_eq!(timestamp_of("1365465600"), Ok(1365465600));
        assert_eq!(timestamp_of("-1"), Ok(-1));
        assert_eq!(timestamp_of("-0"), Ok(0));
        assert_eq!(timestamp_of(r#""1795302119""#), Ok(1795302119));
        assert_eq!(timestamp_of(r#"" 17 ""#), Ok(17));
        assert_eq!(timestamp_of(r#""+5""#), Ok(5));
        assert_eq!(timestamp_of(r#""-5""#), Ok(-5));
        assert_eq!(timestamp_of(r#""""#), Ok(0));
        assert_eq!(timestamp_of(r#""null""#), Ok(0));
        assert_eq!(timestamp_of("null"), Ok(0));
        // Floats are truncated toward zero.
        assert_eq!(timestamp_of("1700000000.5"), Ok(1700000000));
        assert_eq!(timestamp_of("1.9"), Ok(1));
        assert_eq!(timestamp_of("-1.9"), Ok(-1));
        assert_eq!(timestamp_of("1e9"), Ok(1_000_000_000));
        assert_eq!(timestamp_of("1.5E3"), Ok(1500));
        assert_eq!(timestamp_of("NaN"), Ok(0));
        assert_eq!(timestamp_of("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(timestamp_of("-9223372036854775808"), Ok(i64::MIN));
        // 2^63 as a double saturates, like Java's cast; beyond it is out of range.
        assert_eq!(timestamp_of("9.223372036854775808e18"), Ok(i64::MAX));
        for bad in [
            "9223372036854775808",
            "99999999999999999999",
            "9.3e18",
            "-9.3e18",
            "1e400",
            "Infinity",
            "-INF",
            r#""1.5""#,
            r#""12a""#,
            r#""1e9""#,
            r#""+""#,
            r#""99999999999999999999""#,
            "true",
            "false",
            "{}",
            "[]",
            "[1]",
        ] {
            let e = match timestamp_of(bad) {
                Err(BodyError::Invalid(e)) => e,
                other => panic!("timestamp {bad}: {other:?}"),
            };
            assert_eq!(e.kind, JsonErrorKind::Mapping, "{bad}");
        }
    }

    // spec: ingest §3.2 — numbers and booleans are coerced to text for String fields.
    #[test]
    fn metric_coercions() {
        let metric = |tok: &str| one(&format!(r#"{{"metric":{tok}}}"#)).metric;
        assert_eq!(metric("123").as_deref(), Some("123"));
        assert_eq!(metric("1.50").as_deref(), Some("1.50"));
        assert_eq!(metric("-2e3").as_deref(), Some("-2e3"));
        assert_eq!(metric("true").as_deref(), Some("true"));
        assert_eq!(metric("false").as_deref(), Some("false"));
        assert_eq!(metric("NaN").as_deref(), Some("NaN"));
        for bad in
            [r#"{"metric":{}}"#, r#"{"metric":["a"]}"#, r#"{"value":{"a":1}}"#, r#"{"value":[1]}"#, r#"{"tsuid":{}}"#]
        {
            assert_eq!(assert_invalid(bad).kind, JsonErrorKind::Mapping, "{bad}");
        }
    }

    // spec: ingest §3.2 — tags: object of string -> scalar; HashMap put semantics for repeated keys.
    #[test]
    fn tag_maps() {
        let p = one(r#"{"tags":{"port":8080,"up":true,"ratio":0.5,"name":"x"}}"#);
        assert_eq!(p.tags, tags(&[("port", "8080"), ("up", "true"), ("ratio", "0.5"), ("name", "x")]));
        let p = one(r#"{"tags":{"host":"a","dc":"lga","host":"b"}}"#);
        assert_eq!(p.tags, tags(&[("host", "b"), ("dc", "lga")]));
        // A second `tags` replaces the first entirely (setter called again).
        let p = one(r#"{"tags":{"a":"1"},"tags":{"b":"2"}}"#);
        assert_eq!(p.tags, tags(&[("b", "2")]));
        // Keys with escapes decode before matching, for tags and field names alike.
        let p = one(r#"{"met\u0072ic":"m","tags":{"\u0068ost":"w"}}"#);
        assert_eq!(p.metric.as_deref(), Some("m"));
        assert_eq!(p.tags, tags(&[("host", "w")]));
        for bad in [
            r#"{"tags":{"a":{}}}"#,
            r#"{"tags":{"a":["x"]}}"#,
            r#"{"tags":"host=web01"}"#,
            r#"{"tags":["host","web01"]}"#,
            r#"{"tags":1}"#,
        ] {
            assert_eq!(assert_invalid(bad).kind, JsonErrorKind::Mapping, "{bad}");
        }
        // A null value stays in the map (as Jackson's) and fails only its point later; a later value replaces it.
        let p = one(r#"{"tags":{"a":null,"b":"x"}}"#);
        assert_eq!((p.tags, p.null_tags), (tags(&[("a", ""), ("b", "x")]), vec![Cow::Borrowed("a")]));
        let p = one(r#"{"tags":{"a":null,"a":"y"}}"#);
        assert_eq!((p.tags, p.null_tags), (tags(&[("a", "y")]), vec![]));
        assert_invalid(r#"{"tags":{"a":"1",}}"#);
        assert_invalid(r#"{"tags":{"a" "1"}}"#);
    }

    // Many distinct and repeated tag keys: the side index keeps put semantics.
    #[test]
    fn many_tags() {
        let mut body = String::from(r#"{"tags":{"#);
        for i in 0..100 {
            body.push_str(&format!(r#""k{i}":"{i}","#));
        }
        body.push_str(r#""k3":"last","k50":"x"}}"#);
        let p = one(&body);
        let t = p.tags.unwrap_or_default();
        assert_eq!(t.len(), 100);
        assert_eq!(t[3], ("k3".into(), "last".into()));
        assert_eq!(t[50], ("k50".into(), "x".into()));
        assert_eq!(t[99].0, "k99");
    }

    // spec: ingest §3.2 — repeated fields: the last one wins.
    #[test]
    fn repeated_fields() {
        let p = one(r#"{"metric":"a","value":1,"metric":"b","timestamp":5,"timestamp":"6","value":null}"#);
        assert_eq!(p.metric.as_deref(), Some("b"));
        assert_eq!(p.timestamp, 6);
        assert_eq!(p.value, None);
    }

    // spec: ingest §3.2 — unknown fields are ignored, whatever they hold, but must still be valid JSON.
    #[test]
    fn unknown_fields_skipped() {
        let p = one(
            r#"{"x":{"a":[1,{"b":null,"c":[true,false,"s\"]"]}],"d":{}},"metric":"m","y":[[[]],[]],"z":-1.5e3,"w":NaN,"v":"\u00e9","tags":{"h":"w"},"u":{"":-INF}}"#,
        );
        assert_eq!(p.metric.as_deref(), Some("m"));
        assert_eq!(p.tags, tags(&[("h", "w")]));
        // Case matters: `Metric` is an unknown field.
        assert_eq!(one(r#"{"Metric":"m"}"#).metric, None);
        for bad in [
            r#"{"x":[1,]}"#,
            r#"{"x":{"a" 1}}"#,
            r#"{"x":{"a":1,}}"#,
            r#"{"x":[1 2]}"#,
            r#"{"x":{1:2}}"#,
            r#"{"x":[}"#,
            r#"{"x":{]}"#,
            r#"{"x":Nan}"#,
            r#"{"x":"\q"}"#,
            r#"{"x":[[[["#,
        ] {
            assert_invalid(bad);
        }
    }

    // Deep nesting in an unknown field must neither overflow the stack nor be misparsed.
    #[test]
    fn deep_nesting() {
        let depth = 200_000;
        let body = format!(r#"{{"metric":"m","deep":{}{}}}"#, "[".repeat(depth), "]".repeat(depth));
        assert_eq!(one(&body).metric.as_deref(), Some("m"));
        let body = format!(r#"{{"deep":{}"#, r#"{"a":"#.repeat(depth));
        assert_invalid(&body);
        let body = format!(r#"{{"deep":{}1{}}}"#, "[".repeat(depth), "]".repeat(depth - 1));
        assert_invalid(&body);
    }

    // Trailing content after the top-level value is rejected (Jackson 2.9's default would ignore it).
    #[test]
    fn trailing_content() {
        for body in ["{} x", "[]]", "[],[]", "{}{}", r#"[{"metric":"m"}] garbage"#, "{}\u{0}x"] {
            assert_invalid(body);
        }
        // Java's trim() removes every char <= U+0020 at both ends, not just JSON whitespace.
        assert_eq!(parse("\u{0}\u{b} [] \u{1f}\u{0}"), Ok(vec![]));
    }

    // Strings: escapes, surrogates, UTF-8 validity, raw control characters.
    #[test]
    fn strings() {
        let metric = |s: &str| one(&format!(r#"{{"metric":"{s}"}}"#)).metric;
        assert_eq!(metric(r#"\u0041\n\"\\\/\b\f\r\t"#).as_deref(), Some("A\n\"\\/\u{8}\u{c}\r\t"));
        assert_eq!(metric(r#"\ud83d\ude00"#).as_deref(), Some("😀"));
        assert_eq!(metric(r#"\uD83D\uDE00x"#).as_deref(), Some("😀x"));
        // Lone surrogates cannot live in a Rust string; U+FFFD fails validation just as they would in Java.
        assert_eq!(metric(r#"\ud83dx"#).as_deref(), Some("\u{FFFD}x"));
        assert_eq!(metric(r#"\ude00"#).as_deref(), Some("\u{FFFD}"));
        assert_eq!(metric(r#"\ud83d\u0041"#).as_deref(), Some("\u{FFFD}A"));
        assert_eq!(metric(r#"\u0000"#).as_deref(), Some("\u{0}"));
        assert_eq!(metric("中国 é").as_deref(), Some("中国 é"));
        for bad in [r#"\x"#, r#"\u12"#, r#"\u12G4"#, r#"\U0041"#, "a\u{1}b", "a\tb", "a\nb"] {
            assert_invalid(&format!(r#"{{"metric":"{bad}"}}"#));
        }
        assert_invalid(r#"{"metric":"\"#);
        assert_invalid(r#"{"metric":"\u"#);
        // Invalid UTF-8 inside a string, and stray non-ASCII outside one.
        let mut body = br#"{"metric":"ab"#.to_vec();
        body.extend_from_slice(&[0xC3, 0x28]);
        body.extend_from_slice(br#""}"#);
        assert!(matches!(parse_put_body(&body), Err(BodyError::Invalid(_))));
        for bad in [&[0x80][..], &[0xFF], &[0xE4, 0xB8], &[0xED, 0xA0, 0x80]] {
            let mut body = br#"{"metric":""#.to_vec();
            body.extend_from_slice(bad);
            body.extend_from_slice(br#""}"#);
            assert!(matches!(parse_put_body(&body), Err(BodyError::Invalid(_))), "{bad:?}");
        }
        let mut body = br#"{"metric":1"#.to_vec();
        body.push(0xE9);
        body.push(b'}');
        assert!(matches!(parse_put_body(&body), Err(BodyError::Invalid(_))));
    }

    // spec: ingest §3.2 — a body that is valid UTF-8 as a whole is sliced without per-string checks; one with a bad
    // byte anywhere takes the per-string checks, so the error still names the first bad byte inside a string and
    // its line and column (UTF-16 units: `中` is one, `😀` two), and valid text before it reads as before.
    #[test]
    fn utf8_errors_are_located_whether_or_not_the_body_is_valid_text() {
        let good = "[{\"metric\":\"中国\",\"tags\":{\"😀\":\"é\"},\"value\":1.5}]";
        let v = points(good);
        assert_eq!(v[0].metric.as_deref(), Some("中国"));
        assert_eq!(v[0].tags, tags(&[("😀", "é")]));
        assert_eq!(v[0].value.as_deref(), Some("1.5"));
        let mut body = "[{\"metric\":\"中国\",\"tags\":{\"😀\":\"é\"}},\n {\"metric\":\"ab".as_bytes().to_vec();
        body.extend_from_slice(&[0xC3, 0x28]);
        body.extend_from_slice(b"\"}]");
        let Err(e) = parse_put_body(&body) else { panic!("a bad byte parses") };
        assert_eq!(
            e.details().as_deref(),
            Some("com.fasterxml.jackson.core.JsonParseException: Invalid UTF-8 middle byte 0xc3 at [line: 2, column: 15]")
        );
        // The bad byte in an ignored field's string fails the body too.
        let mut body = b"[{\"metric\":\"m\",\"x\":\"".to_vec();
        body.push(0xFF);
        body.extend_from_slice(b"\"}]");
        let Err(e) = parse_put_body(&body) else { panic!("a bad byte parses") };
        assert_eq!(
            e.details().as_deref(),
            Some(
                "com.fasterxml.jackson.core.JsonParseException: Invalid UTF-8 start byte 0xff at [line: 1, column: 21]"
            )
        );
    }

    // spec: ingest §3.6 — exact reply bytes.
    #[test]
    fn summary_exact_bytes() {
        assert_eq!(summary_json(1, 0, None, None), r#"{"success":1,"failed":0}"#);
        assert_eq!(summary_json(2, 0, Some(0), None), r#"{"success":2,"timeouts":0,"failed":0}"#);
        // spec: ingest §5.10 P8 — details with nothing failed.
        assert_eq!(summary_json(1, 0, None, Some(&[])), r#"{"success":1,"failed":0,"errors":[]}"#);
        let nan = IncomingPoint {
            metric: Some("sys.cpu.nice".into()),
            timestamp: 1365465600,
            value: Some("NaN".into()),
            tags: tags(&[("host", "web01")]),
            tsuid: None,
            rollup: None,
            null_tags: Vec::new(),
        };
        let detail =
            PutDetail { point: BodyPoint::Point(nan.clone()), error: "Unable to parse value to a number".into() };
        assert_eq!(
            summary_json(0, 1, None, Some(std::slice::from_ref(&detail))),
            r#"{"success":0,"failed":1,"errors":[{"datapoint":{"metric":"sys.cpu.nice","timestamp":1365465600,"value":"NaN","tags":{"host":"web01"}},"error":"Unable to parse value to a number"}]}"#
        );
        // spec: ingest §3.4 — a null element, and §5.10 P25 — timeouts with errors last.
        let null = PutDetail { point: BodyPoint::Null, error: "Unexpected null datapoint encountered in set.".into() };
        let timedout = PutDetail { point: BodyPoint::Point(nan), error: "Write timedout".into() };
        assert_eq!(
            summary_json(0, 1, Some(1), Some(&[null, timedout])),
            r#"{"success":0,"timeouts":1,"failed":1,"errors":[{"datapoint":null,"error":"Unexpected null datapoint encountered in set."},{"datapoint":{"metric":"sys.cpu.nice","timestamp":1365465600,"value":"NaN","tags":{"host":"web01"}},"error":"Write timedout"}]}"#
        );
    }

    // spec: ingest §3.6 — datapoint shape: value always a string, tags in HashMap order, absent fields omitted.
    #[test]
    fn datapoint_exact_bytes() {
        let mut out = String::new();
        datapoint_json(&IncomingPoint::default(), &mut out);
        assert_eq!(out, r#"{"timestamp":0}"#);

        let p = IncomingPoint {
            metric: Some("a\"b".into()),
            timestamp: -1,
            value: Some("42".into()),
            // "dc" lands in bucket 15 and "host" in bucket 8, so host prints first (see javafmt tests).
            tags: tags(&[("dc", "lga"), ("host", "web01")]),
            tsuid: Some("000001".into()),
            rollup: None,
            null_tags: Vec::new(),
        };
        let mut out = String::new();
        datapoint_json(&p, &mut out);
        assert_eq!(
            out,
            r#"{"metric":"a\"b","timestamp":-1,"value":"42","tags":{"host":"web01","dc":"lga"},"tsuid":"000001"}"#
        );

        let p = IncomingPoint { value: Some("1e-05".into()), tags: Some(vec![]), ..IncomingPoint::default() };
        let mut out = String::new();
        datapoint_json(&p, &mut out);
        assert_eq!(out, r#"{"timestamp":0,"value":"1e-05","tags":{}}"#);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn in_java_order(p: &IncomingPoint<'static>) -> IncomingPoint<'static> {
            let mut p = p.clone();
            if let Some(t) = p.tags.as_mut() {
                let keys: Vec<&str> = t.iter().map(|(k, _)| k.as_ref()).collect();
                let order = crate::javafmt::hashmap_order(&keys);
                *t = order.into_iter().filter_map(|i| t.get(i).cloned()).collect();
            }
            p
        }

        fn point() -> impl Strategy<Value = IncomingPoint<'static>> {
            let text = || proptest::option::of(any::<String>());
            (
                text(),
                any::<i64>(),
                text(),
                proptest::option::of(proptest::collection::btree_map(any::<String>(), any::<String>(), 0..12)),
                text(),
            )
                .prop_map(|(metric, timestamp, value, tags, tsuid)| IncomingPoint {
                    metric: metric.map(Cow::Owned),
                    timestamp,
                    value: value.map(Cow::Owned),
                    tags: tags.map(|m| m.into_iter().map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))).collect()),
                    tsuid: tsuid.map(Cow::Owned),
                    rollup: None,
                    null_tags: Vec::new(),
                })
        }

        fn body_point() -> impl Strategy<Value = BodyPoint<'static>> {
            prop_oneof![
                1 => Just(BodyPoint::Null),
                8 => point().prop_map(BodyPoint::Point),
            ]
        }

        fn serialize(points: &[BodyPoint]) -> String {
            let mut out = String::from("[");
            for (i, p) in points.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n ");
                }
                match p {
                    BodyPoint::Null => out.push_str("null"),
                    BodyPoint::Point(p) => datapoint_json(p, &mut out),
                }
            }
            out.push(']');
            out
        }

        /// JSON number texts (and Jackson's extra tokens) that must come back verbatim as values.
        fn number_token() -> impl Strategy<Value = String> {
            prop_oneof![
                "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,10})?([eE][+-]?[0-9]{1,3})?",
                Just("NaN".to_string()),
                Just("Infinity".to_string()),
                Just("-Infinity".to_string()),
                Just("+Infinity".to_string()),
                Just("+INF".to_string()),
                Just("-INF".to_string()),
            ]
        }

        proptest! {
            #[test]
            fn never_panics_on_bytes(body in proptest::collection::vec(any::<u8>(), 0..512)) {
                let _ = parse_put_body(&body);
            }

            #[test]
            fn never_panics_on_jsonish(body in "[\\[\\]{}\",:0-9a-zA-Z\\\\ \n.+-]{0,256}") {
                let _ = parse_put_body(body.as_bytes());
            }

            #[test]
            fn never_panics_on_mutations(
                points in proptest::collection::vec(body_point(), 0..4),
                edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..8),
            ) {
                let mut body = serialize(&points).into_bytes();
                for (at, byte, op) in edits {
                    let at = if body.is_empty() { 0 } else { at % (body.len() + 1) };
                    match op {
                        0 => body.insert(at, byte),
                        1 if at < body.len() => { body.remove(at); }
                        _ if at < body.len() => body[at] = byte,
                        _ => body.push(byte),
                    }
                }
                if let Err(BodyError::Invalid(e)) = parse_put_body(&body) {
                    prop_assert!(e.line >= 1 && e.column >= 1);
                    let _ = e.to_string();
                }
            }

            #[test]
            fn round_trips(points in proptest::collection::vec(body_point(), 0..6)) {
                let body = serialize(&points);
                let parsed = parse_put_body(body.as_bytes());
                prop_assert!(parsed.is_ok(), "{:?} for {}", parsed, body);
                let parsed = parsed.unwrap_or_default();
                prop_assert_eq!(parsed.len(), points.len());
                for (got, want) in parsed.iter().zip(&points) {
                    match (got, want) {
                        // Replies list tags in Java HashMap order, so that is the order read back.
                        (BodyPoint::Point(g), BodyPoint::Point(w)) => prop_assert_eq!(g, &in_java_order(w)),
                        (g, w) => prop_assert_eq!(g, w),
                    }
                }
                // A single object at the top level is one point.
                if let Some(BodyPoint::Point(p)) = points.first() {
                    let mut one = String::new();
                    datapoint_json(p, &mut one);
                    match parse_put_body(one.as_bytes()) {
                        Ok(v) if v.len() == 1 => prop_assert_eq!(&v[0], &BodyPoint::Point(in_java_order(p))),
                        other => prop_assert!(false, "{:?}", other),
                    }
                }
            }

            #[test]
            fn number_tokens_kept_verbatim(tok in number_token(), metric in any::<String>()) {
                let body = format!(
                    r#"{{"metric":{},"timestamp":1,"value":{tok},"tags":{{"h":{tok}}}}}"#,
                    crate::http_json::json_string(&metric)
                );
                let parsed = parse_put_body(body.as_bytes());
                match parsed {
                    Ok(v) => match v.first() {
                        Some(BodyPoint::Point(p)) => {
                            prop_assert_eq!(p.value.as_deref(), Some(tok.as_str()));
                            prop_assert_eq!(p.metric.as_deref(), Some(metric.as_str()));
                            prop_assert_eq!(p.tags.clone(), Some(vec![("h".into(), tok.clone().into())]));
                        }
                        other => prop_assert!(false, "{:?}", other),
                    },
                    Err(e) => prop_assert!(false, "{} {:?} for {}", e, e.details(), body),
                }
            }
        }
    }
}
