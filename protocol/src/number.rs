//! Java-compatible number parsing (spec: ingest §2.2, §2.3, §5.9 T10-T15). STUB: being written.
use std::fmt;

/// A number that OpenTSDB would reject, rendered as the `NumberFormatException` message it would print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumberError {
    /// `Empty string`
    Empty,
    /// `Just a sign, no value: <s>`
    JustSign(String),
    /// `Value too long: <s>`
    TooLong(String),
    /// `Invalid character '<c>' in <s>`
    InvalidChar(char, String),
    /// `Overflow in <s>`
    Overflow(String),
    /// Java's `Double.parseDouble` failure: `For input string: "<s>"`
    ForInputString(String),
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumberError::Empty => f.write_str("Empty string"),
            NumberError::JustSign(s) => write!(f, "Just a sign, no value: {s}"),
            NumberError::TooLong(s) => write!(f, "Value too long: {s}"),
            NumberError::InvalidChar(c, s) => write!(f, "Invalid character '{c}' in {s}"),
            NumberError::Overflow(s) => write!(f, "Overflow in {s}"),
            NumberError::ForInputString(s) => write!(f, "For input string: \"{s}\""),
        }
    }
}

impl std::error::Error for NumberError {}

/// OpenTSDB's `Tags.parseLong`.
pub fn parse_long(_s: &str) -> Result<i64, NumberError> {
    todo!()
}

/// OpenTSDB's `Tags.looksLikeInteger`: no `.`, `e` or `E`.
pub fn looks_like_integer(s: &str) -> bool {
    !s.bytes().any(|b| b == b'.' || b == b'e' || b == b'E')
}

/// Java's `Double.parseDouble`.
pub fn parse_java_double(_s: &str) -> Result<f64, NumberError> {
    todo!()
}

/// OpenTSDB's `Tags.fitsInFloat` on an already parsed double: `(double)(float)d == d`.
pub fn fits_in_float(d: f64) -> bool {
    (d as f32) as f64 == d
}
