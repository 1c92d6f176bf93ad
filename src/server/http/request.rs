//! A request as handlers see it ([`ApiRequest`]), and query-string decoding as Netty's `QueryStringDecoder` does it.
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::Method;
use rtsd_protocol::http_json;

use super::reply::Reply;
use crate::ingest::SeriesCache;

/// A request as handlers see it: method, route segments, query parameters, decoded body.
pub struct ApiRequest {
    pub method: Method,
    pub params: Vec<(String, String)>,
    pub body: Bytes,
    /// Set once the client is gone (its connection closed before the answer): long reads stop early.
    pub cancelled: Arc<AtomicBool>,
    /// The client's address (for `/api/stats/query`).
    pub remote: Option<std::net::SocketAddr>,
    /// The request headers as sent, in order (for `/api/stats/query`).
    pub headers: Vec<(String, String)>,
    /// The connection's series cache (for `/api/put`).
    pub series: Arc<Mutex<SeriesCache>>,
}

impl ApiRequest {
    /// Presence-based flags, as OpenTSDB tests them (`?summary=false` still turns summary on).
    pub fn has(&self, name: &str) -> bool {
        self.params.iter().any(|(k, _)| k == name)
    }

    /// The last occurrence of a parameter (OpenTSDB's `getQueryStringParam`).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The body as the JSON object an endpoint's serializer reads (spec: query §0.3), or 2.4's reply for an
    /// empty body or one that is not an object.
    pub fn json_object(&self) -> Result<serde_json::Map<String, serde_json::Value>, Reply> {
        if self.body.is_empty() {
            return Err(Reply::missing_content());
        }
        match serde_json::from_slice::<serde_json::Value>(&self.body) {
            Ok(serde_json::Value::Object(obj)) => Ok(obj),
            Ok(other) => {
                Err(Reply::unparsable_json(&format!("expected a JSON object, got {}", http_json::json_kind(&other))))
            }
            Err(e) => Err(Reply::unparsable_json(&e.to_string())),
        }
    }
}

/// Decodes a query string as Netty's `QueryStringDecoder` does: `+` is a space, `%xx` escapes.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// `%xx` escapes decoded (a malformed escape is kept as written); `+` is a space in query strings (Netty's
/// `QueryStringDecoder`) but stays `+` in path segments (JAX-RS `@PathParam`, the Chukwa port's HICC routes).
pub fn percent_decode(s: &str, plus_as_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_as_space => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode_like_netty() {
        assert_eq!(
            parse_query("details&summary=false&m=sum:a%7Bhost=x%7D&q=a+b&bad=%zz&end=%4"),
            vec![
                ("details".to_string(), "".to_string()),
                ("summary".to_string(), "false".to_string()),
                ("m".to_string(), "sum:a{host=x}".to_string()),
                ("q".to_string(), "a b".to_string()),
                ("bad".to_string(), "%zz".to_string()),
                ("end".to_string(), "%4".to_string()),
            ]
        );
    }
}
