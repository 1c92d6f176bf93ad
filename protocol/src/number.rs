//! Java-compatible number parsing (spec: ingest §2.2, §2.3, §5.9 T10-T15).
//!
//! OpenTSDB decides what a timestamp or a value *is* with two parsers that are stricter or looser than Rust's:
//! its own `Tags.parseLong` (no whitespace, no exponent, a length limit, wrapping arithmetic that decides which
//! 19-digit inputs overflow) and Java's `Double.parseDouble` (accepts `1.5f`, hex floats and surrounding control
//! characters, but not `inf` or `nan`). Clients see the resulting error texts verbatim in `put:` replies, so both
//! the accepted language and the messages are reproduced here.
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
    /// Java's `Double.parseDouble` meeting a second `.` among the mantissa's digits: `multiple points`
    MultiplePoints,
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
            NumberError::MultiplePoints => f.write_str("multiple points"),
        }
    }
}

impl std::error::Error for NumberError {}

/// Java's `String.length()`: UTF-16 code units, which is what OpenTSDB's length limits count.
fn java_len(s: &str) -> usize {
    // UTF-16 never needs more units than UTF-8 needs bytes, so short strings skip the walk.
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

/// OpenTSDB's `Tags.parseLong`: the integer parser behind timestamps and integer values (spec: ingest §2.2).
///
/// Rules, in the order OpenTSDB applies them: empty -> `Empty string`; a leading `+`/`-` alone -> `Just a sign`;
/// more than 20 characters with a sign or 19 without -> `Value too long`; any non-ASCII-digit -> `Invalid
/// character` (the first one met); out of range -> `Overflow`. Digits are accumulated as a negative number
/// with Java's wrapping 64-bit arithmetic so that `i64::MIN` is reachable, exactly like OpenTSDB; for the at
/// most 19 digits allowed the wrap always ends positive, which is how overflow is detected.
///
/// Divergence: a character outside the Basic Multilingual Plane is reported whole, where Java would print
/// its first UTF-16 surrogate alone.
pub fn parse_long(s: &str) -> Result<i64, NumberError> {
    let mut chars = s.chars();
    let first = match chars.clone().next() {
        None => return Err(NumberError::Empty),
        Some(c) => c,
    };
    let n = java_len(s);
    let signed = first == '+' || first == '-';
    if signed {
        if n == 1 {
            return Err(NumberError::JustSign(s.to_string()));
        }
        if n > 20 {
            return Err(NumberError::TooLong(s.to_string()));
        }
        chars.next();
    } else if n > 19 {
        return Err(NumberError::TooLong(s.to_string()));
    }
    let mut v: i64 = 0;
    let mut started = false;
    for c in chars {
        // OpenTSDB multiplies before looking at the next character, so a wrap caused by earlier digits
        // happens even when the next character turns out to be invalid (the error wins either way).
        if started {
            v = v.wrapping_mul(10);
        }
        started = true;
        match c.to_digit(10) {
            Some(d) => v = v.wrapping_sub(i64::from(d)),
            _ => return Err(NumberError::InvalidChar(c, s.to_string())),
        }
    }
    if v > 0 {
        return Err(NumberError::Overflow(s.to_string()));
    }
    if first == '-' {
        return Ok(v);
    }
    if v == i64::MIN {
        return Err(NumberError::Overflow(s.to_string()));
    }
    Ok(-v)
}

/// OpenTSDB's `Tags.looksLikeInteger`: no `.`, `e` or `E`.
pub fn looks_like_integer(s: &str) -> bool {
    !s.bytes().any(|b| b == b'.' || b == b'e' || b == b'E')
}

/// Java's `Double.parseDouble`: the parser OpenTSDB uses for every value that is not integer-looking
/// (spec: ingest §2.3).
///
/// Accepted, after trimming characters `<= ' '` from both ends (Java's `String.trim`):
/// `[+-]?(NaN|Infinity|D+[.D*]|.D+)([eE][+-]?D+)?[fFdD]?` and hex floats
/// `[+-]?0[xX](H+[.H*]|H*.H+)[pP][+-]?D+[fFdD]?`. Results are correctly rounded; a `f`/`F` suffix does not
/// round to single precision (Java ignores it for `parseDouble`). Out-of-range magnitudes give infinities or
/// zeros, never errors.
///
/// Rust's own parser is only used after the Java grammar has been checked, because it accepts words Java
/// rejects (`inf`, `nan`, `infinity` in any case).
///
/// Errors carry the trimmed string, as Java's message does. Divergence: Java says `empty String` for a
/// string that is empty after trimming; rtsd reports `For input string: ""` (OpenTSDB never gets there:
/// such values look like integers and are rejected by [`parse_long`] first).
pub fn parse_java_double(s: &str) -> Result<f64, NumberError> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let fail = || NumberError::ForInputString(t.to_string());
    let b = t.as_bytes();
    let (negative, body_at) = match b.first() {
        None => return Err(fail()),
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        Some(_) => (false, 0),
    };
    let body = &b[body_at..];
    match body {
        b"NaN" => return Ok(f64::NAN),
        b"Infinity" => return Ok(if negative { f64::NEG_INFINITY } else { f64::INFINITY }),
        [b'0', b'x' | b'X', hex @ ..] => {
            return parse_hex_body(hex).map(|m| if negative { -m } else { m }).ok_or_else(fail)
        }
        _ => {}
    }
    // Java's `FloatingDecimal` reads the mantissa's digits and points first, and throws on a second point
    // there before it looks at anything else (`1.2.3`, `1..5`, `.5.`; not `1e2.3`, whose `e` ends the run).
    if body.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').filter(|b| **b == b'.').nth(1).is_some() {
        return Err(NumberError::MultiplePoints);
    }
    let end = decimal_end(body).ok_or_else(fail)?;
    // The validated prefix (sign included, suffix excluded) is in the subset of Rust's float grammar that
    // means the same thing in both languages.
    t[..body_at + end].parse::<f64>().map_err(|_| fail())
}

/// Length of the decimal number in `body` (without its optional `fFdD` suffix) if `body` is exactly
/// `(D+[.D*]|.D+)([eE][+-]?D+)?[fFdD]?`.
fn decimal_end(body: &[u8]) -> Option<usize> {
    let digits = |from: usize| body[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = digits(0);
    let mut mantissa_digits = i;
    if body.get(i) == Some(&b'.') {
        i += 1;
        let frac = digits(i);
        i += frac;
        mantissa_digits += frac;
    }
    if mantissa_digits == 0 {
        return None;
    }
    if matches!(body.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(body.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp = digits(i);
        if exp == 0 {
            return None;
        }
        i += exp;
    }
    let end = i;
    if matches!(body.get(i), Some(b'f' | b'F' | b'd' | b'D')) {
        i += 1;
    }
    (i == body.len()).then_some(end)
}

/// Magnitude of a hex float after its `0x`: `(H+[.H*]|H*.H+)[pP][+-]?D+[fFdD]?`, correctly rounded
/// (round half to even, subnormals included). `None` if the grammar does not match.
fn parse_hex_body(body: &[u8]) -> Option<f64> {
    // Significant hex digits are kept in a u64 up to 15 of them (60 bits: more than the 53 a double keeps
    // plus guard bits); anything below only matters as a sticky "was there more" bit.
    let mut mantissa: u64 = 0;
    let mut kept = 0u32;
    let mut sticky = false;
    // Binary exponent to apply to `mantissa`, before the `p` exponent.
    let mut exp_adjust: i64 = 0;
    let mut digit_count = 0usize;
    let mut seen_point = false;
    let mut i = 0;
    while let Some(&c) = body.get(i) {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b'.' if !seen_point => {
                seen_point = true;
                i += 1;
                continue;
            }
            _ => break,
        };
        digit_count += 1;
        if mantissa == 0 && d == 0 {
            // Leading zeros carry no bits; in the fraction they still shift the value down.
            if seen_point {
                exp_adjust = exp_adjust.saturating_sub(4);
            }
        } else if kept < 15 {
            mantissa = (mantissa << 4) | u64::from(d);
            kept += 1;
            if seen_point {
                exp_adjust = exp_adjust.saturating_sub(4);
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp_adjust = exp_adjust.saturating_add(4);
            }
        }
        i += 1;
    }
    if digit_count == 0 || !matches!(body.get(i), Some(b'p' | b'P')) {
        return None;
    }
    i += 1;
    let exp_negative = match body.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let exp_start = i;
    // Saturate: beyond ±2^40 the result is already 0 or infinity for any input that fits in memory.
    let mut exp: i64 = 0;
    while let Some(&c) = body.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
        i += 1;
    }
    if i == exp_start {
        return None;
    }
    if matches!(body.get(i), Some(b'f' | b'F' | b'd' | b'D')) {
        i += 1;
    }
    if i != body.len() {
        return None;
    }
    if mantissa == 0 {
        return Some(0.0);
    }
    let exp = if exp_negative { -exp } else { exp };
    Some(round_binary(mantissa, exp_adjust.saturating_add(exp), sticky))
}

/// `mantissa × 2^exp` (plus "a little more" when `sticky`) rounded to the nearest double, ties to even.
fn round_binary(mantissa: u64, exp: i64, sticky: bool) -> f64 {
    let bits = i64::from(64 - mantissa.leading_zeros());
    let lead = exp + bits - 1;
    if lead > 1023 {
        return f64::INFINITY;
    }
    // Exponent of the last bit the result can hold: 53 significant bits for normals, fixed for subnormals.
    let lsb = (lead - 52).max(-1074);
    let shift = lsb - exp;
    let kept = if shift <= 0 {
        // Exact: at most 60 bits, shifted left by at most 53 - bits.
        mantissa << (-shift)
    } else if shift > 64 {
        // The value is below a quarter of the smallest step: rounds to zero.
        0
    } else {
        let wide = u128::from(mantissa);
        let kept = wide >> shift;
        let rest = wide & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        let up = rest > half || (rest == half && (sticky || kept & 1 == 1));
        (kept + u128::from(up)) as u64
    };
    // `kept` < 2^54 and 2^lsb is a power of two in range, so the product is exact (or overflows to
    // infinity exactly when rounding carried past the largest double).
    kept as f64 * pow2(lsb)
}

/// 2^e as a double, for e in -1074..=1023.
fn pow2(e: i64) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// OpenTSDB's `Tags.fitsInFloat` on an already parsed double: `(double)(float)d == d`.
pub fn fits_in_float(d: f64) -> bool {
    (d as f32) as f64 == d
}

/// OpenTSDB's `Tags.fitsInFloat(String)`: whether a float-looking value is stored on 4 bytes (spec: ingest
/// §2.3, §5.9 T14/T15). Parse failures are Java's `NumberFormatException`.
pub fn fits_in_float_str(s: &str) -> Result<bool, NumberError> {
    parse_java_double(s).map(fits_in_float)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // spec: ingest §5.9 T10
    #[test]
    fn parse_long_small_values() {
        for (s, v) in [
            ("0", 0),
            ("+0", 0),
            ("-0", 0),
            ("1", 1),
            ("+1", 1),
            ("-1", -1),
            ("4242", 4242),
            ("+4242", 4242),
            ("-4242", -4242),
        ] {
            assert_eq!(parse_long(s), Ok(v), "{s}");
        }
    }

    // spec: ingest §5.9 T11
    #[test]
    fn parse_long_extremes() {
        assert_eq!(parse_long("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_long("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_long("+9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_long("0000000000000000042"), Ok(42));
        assert_eq!(parse_long("-0000000000000000042"), Ok(-42));
    }

    // spec: ingest §5.9 T12, with each message's exact text
    #[test]
    fn parse_long_errors() {
        let cases = [
            ("", "Empty string"),
            ("42a51", "Invalid character 'a' in 42a51"),
            ("+", "Just a sign, no value: +"),
            ("-", "Just a sign, no value: -"),
            ("18446744073709551616", "Value too long: 18446744073709551616"),
            ("9223372036854775808", "Overflow in 9223372036854775808"),
            ("-9223372036854775809", "Overflow in -9223372036854775809"),
            ("+9223372036854775808", "Overflow in +9223372036854775808"),
            ("9999999999999999999", "Overflow in 9999999999999999999"),
            ("+12345678901234567890", "Value too long: +12345678901234567890"),
            ("NaN", "Invalid character 'N' in NaN"),
            ("0x10", "Invalid character 'x' in 0x10"),
            ("1f", "Invalid character 'f' in 1f"),
            ("12,5", "Invalid character ',' in 12,5"),
            (" 1", "Invalid character ' ' in  1"),
            ("--1", "Invalid character '-' in --1"),
            ("+-", "Invalid character '-' in +-"),
            ("١٢", "Invalid character '١' in ١٢"),
        ];
        for (s, msg) in cases {
            assert_eq!(parse_long(s).map_err(|e| e.to_string()), Err(msg.to_string()), "{s:?}");
        }
        assert_eq!(parse_long(""), Err(NumberError::Empty));
        assert_eq!(parse_long("-"), Err(NumberError::JustSign("-".into())));
    }

    #[test]
    fn parse_long_counts_java_chars() {
        // 19 UTF-16 units: reaches the character check rather than the length check.
        let s = "é".repeat(19);
        assert_eq!(parse_long(&s), Err(NumberError::InvalidChar('é', s.clone())));
        let s = "é".repeat(20);
        assert_eq!(parse_long(&s), Err(NumberError::TooLong(s.clone())));
    }

    // spec: ingest §5.9 T13
    #[test]
    fn looks_like_integer_examples() {
        assert!(looks_like_integer("123"));
        assert!(!looks_like_integer("12.3"));
        assert!(!looks_like_integer("1e10"));
        assert!(!looks_like_integer("1E10"));
    }

    // spec: ingest §5.9 T14
    #[test]
    fn fits_in_float_vectors() {
        for (s, fits) in [
            ("12.3", false),
            ("1.234556789123456", false),
            ("0.6116398572921753", true),
            ("1.01417856E9", true),
            ("4.508277154265837E7", false),
            ("8.208611994536002E8", false),
        ] {
            assert_eq!(fits_in_float_str(s), Ok(fits), "{s}");
        }
    }

    // spec: ingest §5.9 T15
    #[test]
    fn fits_in_float_rejects_garbage() {
        assert_eq!(
            fits_in_float_str("1.2abc34").map_err(|e| e.to_string()),
            Err("For input string: \"1.2abc34\"".to_string())
        );
    }

    // spec: ingest §2.3 storage-width examples
    #[test]
    fn float_width_examples() {
        for s in ["42.5", "1.5", "1e3", "-42.22e3", "1.01417856E9", "0.6116398572921753"] {
            assert_eq!(fits_in_float_str(s), Ok(true), "{s}");
        }
        for s in ["12.3", "0.1", "42.22e-3", "3.14159", "4.508277154265837E7", "1.0e39"] {
            assert_eq!(fits_in_float_str(s), Ok(false), "{s}");
        }
    }

    // spec: ingest §2.3 Java quirks
    #[test]
    fn java_double_quirks_accepted() {
        for (s, v) in [
            ("1.5f", 1.5),
            ("1.5d", 1.5),
            ("1.5F", 1.5),
            ("1.5D", 1.5),
            ("0x1.8p1", 3.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("+1.5", 1.5),
            ("-1.5", -1.5),
            ("1e3", 1000.0),
            ("1E+3", 1000.0),
            ("1e-3", 0.001),
            ("42.22e3", 42220.0),
            ("\t1.5\n", 1.5),
            ("  .5e1  ", 5.0),
            ("007.5", 7.5),
            ("1.1f", 1.1),
        ] {
            assert_eq!(parse_java_double(s), Ok(v), "{s:?}");
        }
        assert_eq!(parse_java_double("1e999"), Ok(f64::INFINITY));
        assert_eq!(parse_java_double("-1e999"), Ok(f64::NEG_INFINITY));
        assert_eq!(parse_java_double("1e-999"), Ok(0.0));
        assert_eq!(parse_java_double("1e99999999999999999999999"), Ok(f64::INFINITY));
        assert_eq!(parse_java_double("0e99999999999999999999999"), Ok(0.0));
        assert!(parse_java_double("-0.0").unwrap().is_sign_negative());
        assert!(parse_java_double("NaN").unwrap().is_nan());
        assert!(parse_java_double("-NaN").unwrap().is_nan());
        assert_eq!(parse_java_double("Infinity"), Ok(f64::INFINITY));
        assert_eq!(parse_java_double("+Infinity"), Ok(f64::INFINITY));
        assert_eq!(parse_java_double("-Infinity"), Ok(f64::NEG_INFINITY));
        assert!(fits_in_float_str("1e999").unwrap());
    }

    #[test]
    fn java_double_rejects() {
        for s in [
            "1.5NaN",
            "inf",
            "nan",
            "infinity",
            "INF",
            "Inf",
            "NAN",
            "+inf",
            "Infinityd",
            "NaNf",
            "1_0",
            ".",
            "e5",
            "1e",
            "1e+",
            "1.5ff",
            "--1.5",
            "+-1.5",
            "1.5 2",
            "0x1.8",
            "0x.p1",
            "0xp1",
            "0x1.8p",
            "0x1g.0p1",
            "1.5e3.0",
            "١.٥",
            "1,5",
            "",
            "   ",
            "0x1p1.5",
            "f",
            ".f",
            "1.5x",
        ] {
            let trimmed = s.trim_matches(|c: char| c <= ' ');
            assert_eq!(parse_java_double(s), Err(NumberError::ForInputString(trimmed.to_string())), "{s:?}");
        }
        assert_eq!(parse_java_double("1.5NaN").unwrap_err().to_string(), "For input string: \"1.5NaN\"");
        // spec: ingest §2.3 (Java's message): a second point among the mantissa's digits.
        for s in ["1.2.3", "1.0.0", "1..5", ".5.", "-0.0.0", "12.3.4e5"] {
            assert_eq!(parse_java_double(s).unwrap_err().to_string(), "multiple points", "{s}");
        }
        assert_eq!(parse_java_double("1e2.3").unwrap_err().to_string(), "For input string: \"1e2.3\"");
        assert_eq!(parse_java_double("1.2x.3").unwrap_err().to_string(), "For input string: \"1.2x.3\"");
        // Java's message carries the trimmed string.
        assert_eq!(parse_java_double(" 1.5x\t").unwrap_err().to_string(), "For input string: \"1.5x\"");
    }

    #[test]
    fn hex_floats() {
        for (s, v) in [
            ("0x1p0", 1.0),
            ("0x1.8p1", 3.0),
            ("0X1.8P1", 3.0),
            ("-0x1.8p1", -3.0),
            ("0x.8p1", 1.0),
            ("0x1.p1", 2.0),
            ("0xAp0", 10.0),
            ("0x1p-1d", 0.5),
            ("0x1p+4f", 16.0),
            ("0x000.0001p16", 1.0),
            ("0x1.fffffffffffffp1023", f64::MAX),
            ("0x1p-1022", f64::MIN_POSITIVE),
            ("0x1p-1074", f64::from_bits(1)),
            ("0x0.0000000000001p-1022", f64::from_bits(1)),
            ("0x1p1024", f64::INFINITY),
            ("0x1p-1076", 0.0),
            ("0x0p99999999999", 0.0),
            ("0x1p99999999999", f64::INFINITY),
            ("0x1p-99999999999", 0.0),
            // 2^53 + 1: tie, rounds to even (down); 2^53 + 3: tie, rounds up.
            ("0x20000000000001p0", 9007199254740992.0),
            ("0x20000000000003p0", 9007199254740996.0),
            // A tie broken by a far-away non-zero digit (sticky bit).
            ("0x20000000000001000000000001p-48", 9007199254740994.0),
            // Rounding that carries into the exponent, and past the largest double.
            ("0x1.fffffffffffff8p0", 2.0),
            ("0x1.fffffffffffff8p1023", f64::INFINITY),
            // Half of the smallest subnormal ties to zero; anything above rounds up.
            ("0x1p-1075", 0.0),
            ("0x1.0000000000001p-1075", f64::from_bits(1)),
            ("0x3p-1075", f64::from_bits(2)),
        ] {
            assert_eq!(parse_java_double(s), Ok(v), "{s}");
        }
        assert!(parse_java_double("-0x0p0").unwrap().is_sign_negative());
    }

    proptest! {
        #[test]
        fn parse_long_agrees_with_rust_on_short_inputs(s in "[+-]?[0-9]{0,18}") {
            prop_assert_eq!(parse_long(&s).ok(), s.parse::<i64>().ok());
        }

        #[test]
        fn parse_long_agrees_on_any_i64(v in any::<i64>()) {
            prop_assert_eq!(parse_long(&v.to_string()), Ok(v));
        }

        #[test]
        fn parse_long_never_panics(s in "\\PC{0,25}") {
            let _ = parse_long(&s);
        }

        #[test]
        fn parse_long_19_digits_matches_range(s in "[+-]?[0-9]{19}") {
            prop_assert_eq!(parse_long(&s).ok(), s.parse::<i64>().ok());
        }

        #[test]
        fn parse_java_double_never_panics(s in "\\PC{0,30}") {
            let _ = parse_java_double(&s);
        }

        #[test]
        fn parse_java_double_never_panics_on_numberish(s in "[ +\\-0-9.eExXpPfFdDa-c]{0,30}") {
            let _ = parse_java_double(&s);
        }

        #[test]
        fn parse_java_double_round_trips_rust_display(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            prop_assert_eq!(parse_java_double(&format!("{v:e}")), Ok(v));
            prop_assert_eq!(parse_java_double(&format!("{v:?}")), Ok(v));
        }

        #[test]
        fn hex_float_round_trips(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            prop_assert_eq!(parse_java_double(&to_hex(v)).map(f64::to_bits), Ok(bits));
        }
    }

    /// Java's `Double.toHexString`-like rendering, to feed the hex parser exact values.
    fn to_hex(v: f64) -> String {
        let bits = v.to_bits();
        let sign = if bits >> 63 == 1 { "-" } else { "" };
        let e = ((bits >> 52) & 0x7FF) as i64;
        let m = bits & ((1 << 52) - 1);
        if e == 0 {
            format!("{sign}0x0.{m:013x}p-1022")
        } else {
            format!("{sign}0x1.{m:013x}p{}", e - 1023)
        }
    }
}
