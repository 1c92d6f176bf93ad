//! JSON output helpers shared by every HTTP endpoint of the daemon (spec: ingest §3.6, §3.7).
//!
//! OpenTSDB's replies are small, fixed-shape objects whose key order is part of what clients and byte-exact
//! tests see, so the daemon writes them by hand instead of through a serializer that might reorder keys. These
//! helpers make sure every hand-written body escapes strings the same way (Jackson's default escaping) and uses
//! the same error envelope.

/// The kind of a JSON value as request-body error texts name it ("a string", "an object", ...).
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

// Jackson's default coercions for the scalar fields OpenTSDB's request objects declare (UIDMeta, TSMeta,
// Annotation; spec: query §0.3): a String field takes any scalar's text, a number field takes a number or a
// numeric string, `null` gives the Java default. The texts are the details of 2.4's "Unable to parse the given
// JSON" errors.

/// A `String` field: any scalar's text, `None` for null.
pub fn jackson_string(v: &serde_json::Value) -> Result<Option<String>, String> {
    use serde_json::Value;
    match v {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Null => Ok(None),
        other => Err(format!("Cannot deserialize a String out of {} token", json_kind(other))),
    }
}

/// A `long` field: a number (a fraction truncated, as Jackson's ACCEPT_FLOAT_AS_INT does) or a numeric string.
pub fn jackson_long(v: &serde_json::Value) -> Result<i64, String> {
    use serde_json::Value;
    match v {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).ok_or_else(|| format!("not a long: {n}"))
        }
        Value::String(s) => s.trim().parse::<i64>().map_err(|_| format!("not a valid long value: {s}")),
        Value::Null => Ok(0),
        other => Err(format!("Cannot deserialize a long out of {} token", json_kind(other))),
    }
}

/// An `int` field: as [`jackson_long`], then range-checked.
pub fn jackson_int(v: &serde_json::Value) -> Result<i32, String> {
    let n = jackson_long(v)?;
    i32::try_from(n).map_err(|_| format!("value {n} is out of range of int"))
}

/// A `double` field: a number or a string Java's `Double.parseDouble` reads.
pub fn jackson_double(v: &serde_json::Value) -> Result<f64, String> {
    use serde_json::Value;
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("not a double: {n}")),
        Value::String(s) => crate::number::parse_java_double(s).map_err(|_| format!("not a valid double value: {s}")),
        Value::Null => Ok(0.0),
        other => Err(format!("Cannot deserialize a double out of {} token", json_kind(other))),
    }
}

/// A `Map<String, String>` field (`custom`): the object's pairs in key order, each value as a String field
/// (null becomes ""); `None` for null.
pub fn jackson_string_map(v: &serde_json::Value) -> Result<Option<Vec<(String, String)>>, String> {
    use serde_json::Value;
    match v {
        Value::Null => Ok(None),
        Value::Object(m) => {
            let mut pairs = Vec::with_capacity(m.len());
            for (k, v) in m {
                pairs.push((k.clone(), jackson_string(v)?.unwrap_or_default()));
            }
            Ok(Some(pairs))
        }
        other => Err(format!("Cannot deserialize a Map out of {} token", json_kind(other))),
    }
}

/// Hex digits Jackson uses for `\u00XX` escapes (upper case).
const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `s` to `out` escaped for use inside a JSON string literal, as Jackson's default generator does.
///
/// Exists so that user-controlled text (metric names, tag values, error messages quoting them) can never break
/// out of a string in our replies. Escapes `"` and `\`, uses the short forms `\b \t \n \f \r` and `\u00XX` for
/// the other control characters below U+0020; everything else, including `/`, DEL and all non-ASCII text, is
/// written as is (Jackson does not escape non-ASCII by default and our bodies are UTF-8).
pub fn escape_json_string(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            0x08 => Some('b'),
            b'\t' => Some('t'),
            b'\n' => Some('n'),
            0x0C => Some('f'),
            b'\r' => Some('r'),
            0x00..=0x1F => None,
            _ => continue,
        };
        // Every byte that needs escaping is ASCII, so `start..i` always falls on char boundaries.
        out.push_str(&s[start..i]);
        out.push('\\');
        match short {
            Some(c) => out.push(c),
            None => {
                out.push_str("u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0x0F)]));
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// `s` as a complete, quoted JSON string literal; a convenience over [`escape_json_string`] for one-off values.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    escape_json_string(s, &mut out);
    out.push('"');
    out
}

/// A Java `HashMap<String, String>` as Jackson writes it (`null` for None): the pairs in that map's iteration
/// order. OpenTSDB's meta records write their `custom` map this way, in storage and in API replies alike.
pub fn jackson_string_map_json(map: Option<&[(String, String)]>) -> String {
    let Some(pairs) = map else { return "null".to_string() };
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let body: Vec<String> = crate::javafmt::hashmap_order(&keys)
        .into_iter()
        .map(|i| format!("{}:{}", json_string(&pairs[i].0), json_string(&pairs[i].1)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// A `double` as Jackson writes it: Java's `Double.toString`, the non-finite values as quoted strings
/// (`"NaN"`, `"Infinity"`, `"-Infinity"`).
pub fn jackson_double_json(d: f64) -> String {
    if d.is_nan() {
        "\"NaN\"".to_string()
    } else if d.is_infinite() {
        if d > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" }.to_string()
    } else {
        crate::javafmt::double_to_string(d)
    }
}

/// OpenTSDB's API error body: `{"error":{"code":400,"message":"...","details":"..."}}` (spec: ingest §3.7).
///
/// Every `/api/*` failure uses this one shape, and clients such as pyopentsdb read `message` from it. `details` is
/// left out when absent or empty, as OpenTSDB does. OpenTSDB also appends a Java stack `trace`; a re-implementation
/// has none to give, so it is omitted rather than faked.
pub fn error_envelope(code: u16, message: &str, details: Option<&str>) -> String {
    let mut out = String::with_capacity(48 + message.len() + details.map_or(0, str::len));
    out.push_str("{\"error\":{\"code\":");
    out.push_str(&code.to_string());
    out.push_str(",\"message\":\"");
    escape_json_string(message, &mut out);
    out.push('"');
    if let Some(d) = details.filter(|d| !d.is_empty()) {
        out.push_str(",\"details\":\"");
        escape_json_string(d, &mut out);
        out.push('"');
    }
    out.push_str("}}");
    out
}

/// Wraps a JSON reply as `callback(body)` for the `jsonp=<callback>` query parameter (spec: ingest §3.3).
///
/// Exists because OpenTSDB honours `jsonp` on API replies, including error bodies, and browsers' JSONP loaders
/// expect exactly this shape. The callback name is used verbatim, as OpenTSDB does; the caller decides whether to
/// restrict it.
pub fn jsonp(callback: &str, body: &str) -> String {
    let mut out = String::with_capacity(callback.len() + body.len() + 2);
    out.push_str(callback);
    out.push('(');
    out.push_str(body);
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // spec: query §0.3 (Jackson's coercions of request fields)
    #[test]
    fn request_fields_coerce_like_jackson() {
        assert_eq!(jackson_string(&json!(12.5)).unwrap(), Some("12.5".to_string()));
        assert_eq!(jackson_string(&json!(true)).unwrap(), Some("true".to_string()));
        assert_eq!(jackson_string(&json!(null)).unwrap(), None);
        assert_eq!(jackson_string(&json!([1])).unwrap_err(), "Cannot deserialize a String out of an array token");
        assert_eq!(jackson_long(&json!(" 42 ")).unwrap(), 42);
        assert_eq!(jackson_long(&json!(7.9)).unwrap(), 7);
        assert_eq!(jackson_long(&json!(null)).unwrap(), 0);
        assert_eq!(jackson_long(&json!("x")).unwrap_err(), "not a valid long value: x");
        assert_eq!(jackson_long(&json!({})).unwrap_err(), "Cannot deserialize a long out of an object token");
        assert_eq!(jackson_int(&json!(3_000_000_000_i64)).unwrap_err(), "value 3000000000 is out of range of int");
        assert_eq!(jackson_double(&json!("1e3")).unwrap(), 1000.0);
        assert_eq!(jackson_double(&json!(false)).unwrap_err(), "Cannot deserialize a double out of a boolean token");
        assert_eq!(
            jackson_string_map(&json!({"b": 1, "a": null})).unwrap(),
            Some(vec![("a".to_string(), String::new()), ("b".to_string(), "1".to_string())])
        );
        assert_eq!(jackson_string_map(&json!("x")).unwrap_err(), "Cannot deserialize a Map out of a string token");
    }

    #[test]
    fn escapes_like_jackson() {
        assert_eq!(json_string("plain"), r#""plain""#);
        assert_eq!(json_string(""), r#""""#);
        assert_eq!(json_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(json_string("\u{8}\t\n\u{c}\r"), r#""\b\t\n\f\r""#);
        assert_eq!(json_string("\u{0}\u{1}\u{1f}"), r#""\u0000\u0001\u001F""#);
        // Not escaped by Jackson's defaults: '/', DEL, non-ASCII (including U+2028 and astral characters).
        assert_eq!(json_string("a/b\u{7f}"), "\"a/b\u{7f}\"");
        assert_eq!(json_string("中国 é 😀 \u{2028}"), "\"中国 é 😀 \u{2028}\"");
    }

    #[test]
    fn escape_appends() {
        let mut out = String::from("x=");
        escape_json_string("\"q\"", &mut out);
        assert_eq!(out, r#"x=\"q\""#);
    }

    // spec: ingest §3.7 — details omitted when empty; no trace.
    #[test]
    fn envelope_exact_bytes() {
        assert_eq!(
            error_envelope(404, "Endpoint not found", None),
            r#"{"error":{"code":404,"message":"Endpoint not found"}}"#
        );
        assert_eq!(
            error_envelope(400, "Missing request content", Some("")),
            r#"{"error":{"code":400,"message":"Missing request content"}}"#
        );
        // spec: ingest §3.5 — the default-mode failure reply.
        assert_eq!(
            error_envelope(
                400,
                "One or more data points had errors",
                Some("Please see the TSD logs or append \"details\" to the put request")
            ),
            r#"{"error":{"code":400,"message":"One or more data points had errors","details":"Please see the TSD logs or append \"details\" to the put request"}}"#
        );
        // spec: ingest §3.1
        assert_eq!(
            error_envelope(405, "Method not allowed", Some("The HTTP method [GET] is not permitted for this endpoint")),
            r#"{"error":{"code":405,"message":"Method not allowed","details":"The HTTP method [GET] is not permitted for this endpoint"}}"#
        );
    }

    #[test]
    fn jackson_maps_and_doubles() {
        assert_eq!(jackson_string_map_json(None), "null");
        assert_eq!(jackson_string_map_json(Some(&[])), "{}");
        let pairs = [("owner".to_string(), "Jane \"J\"".to_string())];
        assert_eq!(jackson_string_map_json(Some(&pairs)), r#"{"owner":"Jane \"J\""}"#);
        assert_eq!(jackson_double_json(f64::NAN), r#""NaN""#);
        assert_eq!(jackson_double_json(f64::INFINITY), r#""Infinity""#);
        assert_eq!(jackson_double_json(f64::NEG_INFINITY), r#""-Infinity""#);
        assert_eq!(jackson_double_json(1024.0), "1024.0");
        assert_eq!(jackson_double_json(0.5), "0.5");
    }

    #[test]
    fn jsonp_wraps() {
        assert_eq!(jsonp("cb", r#"{"success":1,"failed":0}"#), r#"cb({"success":1,"failed":0})"#);
        assert_eq!(jsonp("f", ""), "f()");
    }
}
