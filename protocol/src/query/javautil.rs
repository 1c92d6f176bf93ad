//! Small Java behaviours that the query language inherits from OpenTSDB's implementation: string splitting
//! rules, `Long.parseLong`, `Float.toString`, `HashMap` iteration order for maps built with a given capacity, and
//! Jackson's base64 of byte arrays.

/// Java's `String.length()` (UTF-16 code units), which OpenTSDB's length rules count.
pub(crate) fn java_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

/// OpenTSDB's `Tags.splitString`: every separator splits, empty pieces are kept (so the result has
/// `count(sep) + 1` elements).
pub(crate) fn split_string(s: &str, sep: char) -> Vec<&str> {
    s.split(sep).collect()
}

/// Java's `String.split` with a one-character literal separator: like [`split_string`], but trailing empty
/// pieces are dropped; an empty input gives one empty piece.
pub(crate) fn java_split(s: &str, sep: char) -> Vec<&str> {
    if s.is_empty() {
        return vec![""];
    }
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// Java's `String.trim`: strips characters `<= ' '` from both ends.
pub(crate) fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Java's `Long.parseLong`: an optional sign and at least one ASCII digit, no whitespace, overflow rejected.
///
/// Divergence: Java also accepts non-ASCII decimal digits (e.g. Arabic-Indic); rtsd does not.
pub(crate) fn java_parse_long(s: &str) -> Option<i64> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: i64 = 0;
    for b in digits.bytes() {
        let d = i64::from(b - b'0');
        v = v.checked_mul(10)?;
        v = if neg { v.checked_sub(d)? } else { v.checked_add(d)? };
    }
    Some(v)
}

/// Java's `Integer.parseInt`, same rules as [`java_parse_long`] within `i32`.
pub(crate) fn java_parse_int(s: &str) -> Option<i32> {
    java_parse_long(s).and_then(|v| i32::try_from(v).ok())
}

/// Java's `String.toLowerCase()` for the texts we compare (Rust's Unicode lower-casing, which agrees with Java
/// for every character outside a few locale-specific rules).
pub(crate) fn java_lower(s: &str) -> String {
    s.to_lowercase()
}

/// Java's `String.hashCode()` over UTF-16 code units.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// `HashMap.tableSizeFor`: the smallest power of two >= `cap` (at least 1).
fn table_size_for(cap: usize) -> usize {
    cap.max(1).next_power_of_two()
}

/// Iteration order (indexes of first occurrences in `keys`) of a Java 8+ `HashMap` created with
/// `new HashMap<>(initial_capacity)` and filled with `keys` in order.
///
/// Models the capacity growth (the first put allocates `tableSizeFor(initial_capacity)` buckets, each put past
/// 3/4 load doubles it, splits keep relative order), so iteration is by bucket index in the final table, then
/// insertion order. Chains long enough to become tree bins (8+ colliding keys) are not modelled; the texts this
/// orders (echoed tag maps, debug dumps) never hold that many colliding keys in practice.
pub(crate) fn hash_order_with_capacity(keys: &[&str], initial_capacity: usize) -> Vec<usize> {
    let mut firsts: Vec<usize> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if !firsts.iter().any(|&j| keys[j] == *k) {
            firsts.push(i);
        }
    }
    let mut cap = table_size_for(initial_capacity);
    let mut threshold = (cap as f64 * 0.75) as usize;
    for size in 1..=firsts.len() {
        if size > threshold {
            cap *= 2;
            threshold = (cap as f64 * 0.75) as usize;
        }
    }
    let mask = cap - 1;
    let bucket = |k: &str| {
        let h = java_hash(k);
        let spread = h ^ ((h as u32) >> 16) as i32;
        (spread as u32 as usize) & mask
    };
    let mut order = firsts;
    order.sort_by_key(|&i| bucket(keys[i])); // stable: insertion order within a bucket
    order
}

/// Java's `AbstractCollection.toString` of a `HashSet<String>` built with `new HashSet<>(Arrays.asList(items))`:
/// `[a, b]` in hash order.
pub(crate) fn hashset_to_string(items: &[&str]) -> String {
    let cap = ((items.len() as f32 / 0.75) as usize + 1).max(16);
    let order = hash_order_with_capacity(items, cap);
    let mut out = String::from("[");
    for (n, i) in order.into_iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(items[i]);
    }
    out.push(']');
    out
}

/// Java's `Float.toString(f)`: `99.9`, `50.0`, `1.0E7`, `1.0E-4`, `NaN`, `Infinity`.
///
/// Uses the shortest digits that round-trip through `f32` (what the JDK prints for practically every value),
/// laid out in Java's plain notation for magnitudes in [1e-3, 1e7) and computerized scientific otherwise.
pub(crate) fn float_to_string(f: f32) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "9.99e1", "-1e-4".
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let abs = f.abs();
    if (1e-3..1e7).contains(&abs) {
        if exp >= 0 {
            let int_len = (exp + 1) as usize;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        if digits.len() > 1 {
            out.push_str(&digits[1..]);
        } else {
            out.push('0');
        }
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

/// Standard base64 with padding, as Jackson writes a `byte[]` (e.g. `[0,0,1]` -> `AAAB`).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b0 = chunk[0];
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        out.push(char::from(ALPHABET[(n >> 18) as usize & 63]));
        out.push(char::from(ALPHABET[(n >> 12) as usize & 63]));
        out.push(if chunk.len() > 1 { char::from(ALPHABET[(n >> 6) as usize & 63]) } else { '=' });
        out.push(if chunk.len() > 2 { char::from(ALPHABET[n as usize & 63]) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_java() {
        assert_eq!(split_string("a::b:", ':'), vec!["a", "", "b", ""]);
        assert_eq!(java_split("a||b|", '|'), vec!["a", "", "b"]);
        assert_eq!(java_split("|a", '|'), vec!["", "a"]);
        assert_eq!(java_split("||", '|'), Vec::<&str>::new());
        assert_eq!(java_split("", ','), vec![""]);
    }

    #[test]
    fn parse_long_like_java() {
        assert_eq!(java_parse_long("+5"), Some(5));
        assert_eq!(java_parse_long("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(java_parse_long("9223372036854775808"), None);
        assert_eq!(java_parse_long("00000000000000000000001"), Some(1));
        assert_eq!(java_parse_long(""), None);
        assert_eq!(java_parse_long("-"), None);
        assert_eq!(java_parse_long(" 1"), None);
        assert_eq!(java_parse_int("2147483648"), None);
    }

    #[test]
    fn floats_like_java() {
        assert_eq!(float_to_string(99.9), "99.9");
        assert_eq!(float_to_string(50.0), "50.0");
        assert_eq!(float_to_string(0.5), "0.5");
        assert_eq!(float_to_string(0.001), "0.001");
        assert_eq!(float_to_string(1e-4), "1.0E-4");
        assert_eq!(float_to_string(1e7), "1.0E7");
        assert_eq!(float_to_string(1.25e8), "1.25E8");
        assert_eq!(float_to_string(-101.0), "-101.0");
        assert_eq!(float_to_string(f32::NAN), "NaN");
    }

    #[test]
    fn base64_like_jackson() {
        assert_eq!(base64(&[0, 0, 1]), "AAAB");
        assert_eq!(base64(&[0, 0, 1, 2]), "AAABAg==");
        assert_eq!(base64(&[0xFF, 0xFE]), "//4=");
        assert_eq!(base64(&[]), "");
    }

    #[test]
    fn hash_order_matches_default_hashmap_model() {
        // With 16 buckets from the start, our capacity model agrees with javafmt's full HashMap model.
        let keys = ["host", "dc", "type", "cpu", "zone", "a", "b", "rack"];
        assert_eq!(hash_order_with_capacity(&keys, 16), crate::javafmt::hashmap_order(&keys));
    }
}
