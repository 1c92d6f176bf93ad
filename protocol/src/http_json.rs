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
    fn jsonp_wraps() {
        assert_eq!(jsonp("cb", r#"{"success":1,"failed":0}"#), r#"cb({"success":1,"failed":0})"#);
        assert_eq!(jsonp("f", ""), "f()");
    }
}
