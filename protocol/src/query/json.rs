//! An order-preserving JSON reader for query bodies, with the Jackson 2.9 behaviours OpenTSDB's binding relies on.
//!
//! OpenTSDB applies a body's properties in document order (spec: query §1.2: whichever of `tags`/`filters` comes
//! last wins; a duplicate key's last value wins), keeps a number's literal text when a string is expected
//! (`"start":1356998400` is the string `1356998400`), and enables `NaN`/`Infinity` number tokens. A general
//! purpose JSON value type would sort keys or lose the literal, so bodies are read into [`JVal`], whose objects
//! are lists of pairs in document order and whose numbers keep their text. The coercion helpers below reproduce
//! Jackson's default scalar coercions for `String`, `boolean`, `long` and `int` properties.

use super::javautil::{java_parse_int, java_parse_long, java_trim};

/// Deepest nesting accepted; anything deeper is refused instead of risking the stack.
const MAX_DEPTH: usize = 256;

/// A JSON value with objects in document order and numbers as their literal text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JVal {
    Null,
    Bool(bool),
    /// The number token exactly as written (`1356998400`, `65535.0`, `-1e3`, `NaN`, `-Infinity`).
    Num(String),
    Str(String),
    Arr(Vec<JVal>),
    Obj(Vec<(String, JVal)>),
}

impl JVal {
    /// Jackson's token name, used in coercion error texts.
    pub(crate) fn token_name(&self) -> &'static str {
        match self {
            JVal::Null => "VALUE_NULL",
            JVal::Bool(true) => "VALUE_TRUE",
            JVal::Bool(false) => "VALUE_FALSE",
            JVal::Num(n) if is_integer_literal(n) => "VALUE_NUMBER_INT",
            JVal::Num(_) => "VALUE_NUMBER_FLOAT",
            JVal::Str(_) => "VALUE_STRING",
            JVal::Arr(_) => "START_ARRAY",
            JVal::Obj(_) => "START_OBJECT",
        }
    }
}

fn is_integer_literal(n: &str) -> bool {
    !n.is_empty() && !n.contains(['.', 'e', 'E']) && n.bytes().any(|b| b.is_ascii_digit())
}

/// Parses one JSON value from `text`; trailing content after it is ignored, as Jackson's `readValue` does by
/// default. Errors are the parser's complaint, used as the envelope's `details`.
pub(crate) fn parse(text: &str) -> Result<JVal, String> {
    let mut r = Reader { s: text.as_bytes(), text, pos: 0 };
    r.skip_ws();
    if r.pos >= r.s.len() {
        return Err("No content to map due to end-of-input".into());
    }
    r.value(0)
}

struct Reader<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Reader<'_> {
    fn skip_ws(&mut self) {
        while let Some(&b) = self.s.get(self.pos) {
            if b == b' ' || b == b'\t' || b == b'\n' || b == b'\r' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn err_here(&self, what: &str) -> String {
        match self.text.get(self.pos..).and_then(|r| r.chars().next()) {
            Some(c) => format!("Unexpected character ('{c}' (code {})): {what} at char {}", c as u32, self.pos),
            None => format!("Unexpected end-of-input: {what} at char {}", self.pos),
        }
    }

    fn value(&mut self, depth: usize) -> Result<JVal, String> {
        if depth > MAX_DEPTH {
            return Err(format!("Document nested deeper than {MAX_DEPTH} levels"));
        }
        self.skip_ws();
        match self.s.get(self.pos) {
            None => Err(self.err_here("expected a value")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(JVal::Str(self.string()?)),
            Some(b't') => self.word("true", JVal::Bool(true)),
            Some(b'f') => self.word("false", JVal::Bool(false)),
            Some(b'n') => self.word("null", JVal::Null),
            Some(b'N') => self.word("NaN", JVal::Num("NaN".into())),
            Some(b'I') => self.word("Infinity", JVal::Num("Infinity".into())),
            Some(b'-' | b'+' | b'0'..=b'9') => self.number(),
            Some(_) => {
                Err(self.err_here("expected a valid value (number, String, array, object, 'true', 'false' or 'null')"))
            }
        }
    }

    fn word(&mut self, w: &str, v: JVal) -> Result<JVal, String> {
        if self.s[self.pos..].starts_with(w.as_bytes()) {
            self.pos += w.len();
            Ok(v)
        } else {
            Err(self.err_here(&format!("expected '{w}'")))
        }
    }

    fn number(&mut self) -> Result<JVal, String> {
        let start = self.pos;
        let sign = matches!(self.s[self.pos], b'-' | b'+');
        if sign {
            self.pos += 1;
            if self.s[self.pos..].starts_with(b"Infinity") {
                self.pos += "Infinity".len();
                return Ok(JVal::Num(self.text[start..self.pos].to_string()));
            }
            if self.s[start] == b'+' {
                return Err("Unexpected character ('+' (code 43)) in numeric value: JSON spec does not allow numbers to have plus signs".into());
            }
        }
        let int_start = self.pos;
        while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        let int_len = self.pos - int_start;
        if int_len == 0 {
            return Err(self.err_here("expected digit (0-9) to follow minus sign, for valid numeric value"));
        }
        if int_len > 1 && self.s[int_start] == b'0' {
            return Err("Invalid numeric value: Leading zeroes not allowed".into());
        }
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            let frac_start = self.pos;
            while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
                self.pos += 1;
            }
            if self.pos == frac_start {
                return Err(self.err_here("Decimal point not followed by a digit"));
            }
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let exp_start = self.pos;
            while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
                self.pos += 1;
            }
            if self.pos == exp_start {
                return Err(self.err_here("Exponent indicator not followed by a digit"));
            }
        }
        Ok(JVal::Num(self.text[start..self.pos].to_string()))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.s.get(self.pos..self.pos + 4).ok_or_else(|| self.err_here("expected 4 hex digits"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err_here("expected 4 hex digits"))?;
        let v = u32::from_str_radix(h, 16)
            .map_err(|_| self.err_here("expected a hex-digit for character escape sequence"))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.s.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The run stops only at ASCII bytes, so it is valid UTF-8 on its own.
            out.push_str(&self.text[run_start..self.pos]);
            match self.s.get(self.pos) {
                None => return Err("Unexpected end-of-input: was expecting closing quote for a string value".into()),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let e = *self.s.get(self.pos).ok_or("Unexpected end-of-input in character escape sequence")?;
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let u = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&u) && self.s[self.pos..].starts_with(b"\\u") {
                                let save = self.pos;
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    char::from_u32(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    self.pos = save;
                                    None
                                }
                            } else {
                                char::from_u32(u)
                            };
                            // A lone surrogate has no Rust `char`; it becomes U+FFFD.
                            out.push(c.unwrap_or('\u{FFFD}'));
                        }
                        other => {
                            return Err(format!(
                                "Unrecognized character escape '{}' (code {})",
                                char::from(other),
                                other
                            ))
                        }
                    }
                }
                Some(&b) => {
                    return Err(format!(
                        "Illegal unquoted character ((CTRL-CHAR, code {b})): has to be escaped using backslash to be included in string value"
                    ))
                }
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<JVal, String> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(JVal::Arr(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(JVal::Arr(items));
                }
                _ => return Err(self.err_here("was expecting comma to separate Array entries")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<JVal, String> {
        self.pos += 1;
        let mut pairs = Vec::new();
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(JVal::Obj(pairs));
        }
        loop {
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.err_here("was expecting double-quote to start field name"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b':') {
                return Err(self.err_here("was expecting a colon to separate field name and value"));
            }
            self.pos += 1;
            let v = self.value(depth + 1)?;
            pairs.push((key, v));
            self.skip_ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(JVal::Obj(pairs));
                }
                _ => return Err(self.err_here("was expecting comma to separate Object entries")),
            }
        }
    }
}

/// Jackson's coercion of a token to a `String` property: strings as is, numbers and booleans as their text,
/// `null` as absent; arrays and objects are errors.
pub(crate) fn as_string(v: &JVal) -> Result<Option<String>, String> {
    match v {
        JVal::Null => Ok(None),
        JVal::Str(s) | JVal::Num(s) => Ok(Some(s.clone())),
        JVal::Bool(b) => Ok(Some(b.to_string())),
        JVal::Arr(_) | JVal::Obj(_) => Err(cannot("java.lang.String", v)),
    }
}

fn cannot(class: &str, v: &JVal) -> String {
    format!("Cannot deserialize instance of `{class}` out of {} token", v.token_name())
}

/// Jackson 2.9's coercion to a primitive `boolean`: `true`/`false`; `null` is false; an integer is true unless 0;
/// the strings `true`/`True` and `false`/`False` (trimmed), with `""` and `"null"` false.
pub(crate) fn as_bool(v: &JVal) -> Result<bool, String> {
    match v {
        JVal::Bool(b) => Ok(*b),
        JVal::Null => Ok(false),
        JVal::Num(n) if is_integer_literal(n) => Ok(n.trim_start_matches('-').bytes().any(|b| b != b'0')),
        JVal::Str(s) => match java_trim(s) {
            "true" | "True" => Ok(true),
            "false" | "False" | "" | "null" => Ok(false),
            t => Err(format!(
                "Cannot deserialize value of type `boolean` from String \"{t}\": only \"true\" or \"false\" recognized"
            )),
        },
        _ => Err(cannot("boolean", v)),
    }
}

/// Jackson's coercion to a primitive `long`: integers (range-checked), floats truncated toward zero, numeric
/// strings (trimmed; `""`/`"null"` are 0), `null` is 0.
pub(crate) fn as_long(v: &JVal) -> Result<i64, String> {
    match v {
        JVal::Null => Ok(0),
        JVal::Num(n) if is_integer_literal(n) => {
            java_parse_long(n).ok_or_else(|| format!("Numeric value ({n}) out of range of long"))
        }
        JVal::Num(n) => {
            let d = float_value(n);
            if d.is_nan() {
                Ok(0)
            } else if !(-9.223372036854776E18..=9.223372036854776E18).contains(&d) {
                Err(format!("Numeric value ({n}) out of range of long"))
            } else {
                Ok(d as i64)
            }
        }
        JVal::Str(s) => {
            let t = java_trim(s);
            if t.is_empty() || t == "null" {
                return Ok(0);
            }
            java_parse_long(t).ok_or_else(|| {
                format!("Cannot deserialize value of type `long` from String \"{t}\": not a valid Long value")
            })
        }
        _ => Err(cannot("long", v)),
    }
}

/// Jackson's coercion to a primitive `int`, as [`as_long`] within `i32`.
pub(crate) fn as_int(v: &JVal) -> Result<i32, String> {
    match v {
        JVal::Str(s) => {
            let t = java_trim(s);
            if t.is_empty() || t == "null" {
                return Ok(0);
            }
            java_parse_int(t).ok_or_else(|| {
                format!("Cannot deserialize value of type `int` from String \"{t}\": not a valid Integer value")
            })
        }
        JVal::Num(n) if is_integer_literal(n) => {
            java_parse_int(n).ok_or_else(|| format!("Numeric value ({n}) out of range of int"))
        }
        JVal::Num(n) => {
            let d = float_value(n);
            if d.is_nan() {
                Ok(0)
            } else if d < f64::from(i32::MIN) || d > f64::from(i32::MAX) {
                Err(format!("Numeric value ({n}) out of range of int"))
            } else {
                Ok(d as i32)
            }
        }
        _ => as_long(v).map(|l| l as i32),
    }
}

/// Jackson's coercion to a `Float` element: numbers, numeric strings (Java's float grammar), `null` refused.
pub(crate) fn as_f32(v: &JVal) -> Result<f32, String> {
    match v {
        JVal::Num(n) => Ok(float_value(n) as f32),
        JVal::Str(s) => crate::number::parse_java_double(s).map(|d| d as f32).map_err(|_| {
            format!("Cannot deserialize value of type `java.lang.Float` from String \"{s}\": not a valid Float value")
        }),
        _ => Err(cannot("java.lang.Float", v)),
    }
}

/// The double value of a number token (including `NaN` and the infinities).
pub(crate) fn float_value(n: &str) -> f64 {
    match n {
        "NaN" => f64::NAN,
        "Infinity" | "+Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => n.parse().unwrap_or(f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_duplicates_and_literals() {
        let v = parse(r#"{"b":1,"a":[1.50,-2e3,NaN,-Infinity],"b":"x","c":{"k":null,"t":true}}"#).unwrap();
        let JVal::Obj(pairs) = v else { panic!("object") };
        let keys: Vec<&str> = pairs.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(keys, vec!["b", "a", "b", "c"]);
        assert_eq!(
            pairs[1].1,
            JVal::Arr(vec![
                JVal::Num("1.50".into()),
                JVal::Num("-2e3".into()),
                JVal::Num("NaN".into()),
                JVal::Num("-Infinity".into())
            ])
        );
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(parse(r#""a\"b\\c\/\n\u00e9\ud83d\ude00""#).unwrap(), JVal::Str("a\"b\\c/\né😀".into()));
        assert_eq!(parse(r#""\ud800x""#).unwrap(), JVal::Str("\u{FFFD}x".into()));
        assert!(parse("\"a\u{1}\"").is_err());
        assert!(parse(r#""\q""#).is_err());
        assert!(parse(r#""abc"#).is_err());
    }

    #[test]
    fn rejects_malformed_and_accepts_trailing() {
        for bad in ["", "   ", "{", "[1,]", "{\"a\"}", "{\"a\":}", "01", "1.", "1e", "-", "tru", "{a:1}", "+1"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("{} trailing").unwrap(), JVal::Obj(vec![]));
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn coercions() {
        assert_eq!(as_string(&JVal::Num("1356998400".into())).unwrap().as_deref(), Some("1356998400"));
        assert_eq!(as_string(&JVal::Bool(true)).unwrap().as_deref(), Some("true"));
        assert_eq!(as_string(&JVal::Null).unwrap(), None);
        assert!(as_string(&JVal::Arr(vec![])).is_err());
        assert!(as_bool(&JVal::Str("true".into())).unwrap());
        assert!(as_bool(&JVal::Str(" True ".into())).unwrap());
        assert!(!as_bool(&JVal::Str("".into())).unwrap());
        assert!(as_bool(&JVal::Str("yes".into())).is_err());
        assert!(as_bool(&JVal::Num("2".into())).unwrap());
        assert!(!as_bool(&JVal::Num("0".into())).unwrap());
        assert!(as_bool(&JVal::Num("1.0".into())).is_err());
        assert_eq!(as_long(&JVal::Num("65535.0".into())).unwrap(), 65535);
        assert_eq!(as_long(&JVal::Num("65535.9".into())).unwrap(), 65535);
        assert_eq!(as_long(&JVal::Str(" 42 ".into())).unwrap(), 42);
        assert_eq!(as_long(&JVal::Null).unwrap(), 0);
        assert!(as_long(&JVal::Num("1e30".into())).is_err());
        assert!(as_long(&JVal::Num("9223372036854775808".into())).is_err());
        assert_eq!(as_int(&JVal::Num("24".into())).unwrap(), 24);
        assert!(as_int(&JVal::Num("2147483648".into())).is_err());
        assert_eq!(as_f32(&JVal::Str("99.9".into())).unwrap(), 99.9f32);
    }
}
