//! What a handler answers, before transport details ([`Reply`]), OpenTSDB's error envelope and HTML pages, and
//! the one place an error of a layer below becomes a status: a refused write ([`Reply::storage_status`]), a
//! query that has no answer ([`query_status`], [`Reply::query_error`]), a request the protocol refused
//! ([`request_status`]).
use bytes::Bytes;
use hyper::{Method, StatusCode};
use rtsd_protocol::http_json;
use rtsd_protocol::query::{RequestError, RequestErrorKind};

use crate::query::error::LookupError;
use crate::query::QueryError;
use crate::store::StoreError;

/// JSON as 2.4's version-0 routes (`/suggest`, `/aggregators`) type it: no charset.
pub const JSON_V0: &str = "application/json";
pub const JSON: &str = "application/json; charset=UTF-8";

pub const HTML: &str = "text/html; charset=UTF-8";

/// OpenTSDB's `HttpQuery.makePage`: the small HTML page its non-API routes answer with (the header image it
/// links, `s/opentsdb_header.jpg`, is left out).
pub fn make_page(title: &str, subtitle: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta http-equiv=content-type content=\"text/html;charset=utf-8\"><title>{title}\
         </title>\n<style><!--\nbody{{font-family:arial,sans-serif;margin-left:2em}}A.l:link{{color:#6f6f6f}}\
         A.u:link{{color:green}}.fwf{{font-family:monospace;white-space:pre-wrap}}//--></style></head>\n<body \
         text=#000000 bgcolor=#ffffff><table border=0 cellpadding=2 cellspacing=0 width=100%><tr><td rowspan=3 \
         width=1% nowrap><td>&nbsp;</td></tr><tr><td><font color=#507e9b><b>{subtitle}</b></td></tr><tr><td>&nbsp;\
         </td></tr></table>{body}<table width=100% cellpadding=0 cellspacing=0><tr><td class=subg><img alt=\"\" \
         width=1 height=6></td></tr></table></body></html>"
    )
}

/// An error message inside an HTML page. OpenTSDB pastes it raw; rtsd escapes it (messages quote the request,
/// so a link could otherwise run script on the daemon's origin) except for the `<code>` tags OpenTSDB's own
/// texts contain (`Missing parameter <code>start</code>`).
fn html_message(message: &str) -> String {
    message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace("&lt;code&gt;", "<code>")
        .replace("&lt;/code&gt;", "</code>")
}

/// A reply before transport details: status, body, content type.
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    pub content_type: &'static str,
    /// Headers beyond the content type (`Location`, `Cache-Control`).
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
        Reply { status, body: body.into(), content_type, headers: Vec::new() }
    }

    pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Reply {
        Reply::new(status, JSON, body)
    }

    /// A plain-text reply typed as 2.4 types it: its old routes (`/version`, `/stats`, `/logs`, `/q?ascii`) send
    /// through content sniffing, which answers a body not starting with `<`, `{` or `[` with `text/plain` and no
    /// charset (spec: query §0.3, HttpQuery.guessMimeTypeFromContents).
    pub fn text(status: StatusCode, body: impl Into<Bytes>) -> Reply {
        Reply::new(status, "text/plain", body)
    }

    /// The status of a write the store could not take: 503 when the condition heals by itself (a nearly full or
    /// full disk, no file descriptors), so the client resends later; 500 otherwise. Never a 400, which tells a
    /// client not to resend (issue 23).
    pub fn storage_status(e: &StoreError) -> StatusCode {
        if crate::store::health::FailureKind::of(e).is_transient() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }

    /// A query's error as OpenTSDB's envelope with the status of [`query_status`]. The details are the parser's
    /// for a refused request, the message again for an unknown name or a failed evaluation (2.4's
    /// `BadRequestException(message)`), absent otherwise.
    pub fn query_error(e: &QueryError) -> Reply {
        let message = e.to_string();
        let details = match e {
            QueryError::Request(r) => r.details.clone(),
            QueryError::Invalid(m) => Some(m.clone()),
            _ => None,
        };
        Reply::error(query_status(e), &message, details.as_deref())
    }

    /// `/api/search/lookup`'s errors: 2.4's 404 for a name without a UID, a 500 when the store fails.
    pub fn lookup_error(e: &LookupError) -> Reply {
        match e {
            LookupError::Unresolved(text) => {
                Reply::error(StatusCode::NOT_FOUND, "Unable to resolve one or more UIDs", Some(text))
            }
            LookupError::Storage(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        }
    }

    /// A 503 tells the client when to come back (`Retry-After`).
    pub fn retry_later_if_unavailable(self) -> Reply {
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            self.with_header("Retry-After", RETRY_AFTER_SECS.to_string())
        } else {
            self
        }
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// An error of the non-`/api` routes ("API version 0", spec: query §0.1): `{"err":"..."}` when the request
    /// has the `json` parameter, else OpenTSDB's HTML error page. `status` is 400 or 500 (OpenTSDB answers
    /// every bad request of these routes with 400, whatever the cause).
    pub fn page_error(status: StatusCode, message: &str, json: bool) -> Reply {
        if json {
            return Reply::json(status, format!("{{\"err\":{}}}", http_json::json_string(message)));
        }
        let body = if status == StatusCode::BAD_REQUEST {
            make_page(
                "Bad Request",
                "Looks like it's your fault this time",
                &format!(
                    "<blockquote><h1>Bad Request</h1>Sorry but your request was rejected as being invalid.<br/><br/>\
                     The reason provided was:<blockquote>{}</blockquote></blockquote>",
                    html_message(message)
                ),
            )
        } else {
            make_page(
                "Internal Server Error",
                "Houston, we have a problem",
                &format!(
                    "<blockquote><h1>Internal Server Error</h1>Oops, sorry but your request failed due to a server \
                     error.<br/><br/>Please try again in 30 seconds.<pre>{}</pre></blockquote>",
                    html_message(message)
                ),
            )
        };
        Reply::new(status, HTML, body)
    }

    /// The 404 of the non-`/api` routes.
    pub fn page_not_found(json: bool) -> Reply {
        if json {
            return Reply::json(StatusCode::NOT_FOUND, r#"{"err":"Page Not Found"}"#);
        }
        let body = make_page(
            "Page Not Found",
            "Error 404",
            "<blockquote><h1>Page Not Found</h1>The requested URL was not found on this server.</blockquote>",
        );
        Reply::new(StatusCode::NOT_FOUND, HTML, body)
    }

    /// OpenTSDB's error envelope (spec: ingest §3.7).
    pub fn error(status: StatusCode, message: &str, details: Option<&str>) -> Reply {
        Reply::json(status, http_json::error_envelope(status.as_u16(), message, details))
    }

    pub fn not_found() -> Reply {
        Reply::error(StatusCode::NOT_FOUND, "Endpoint not found", None)
    }

    /// 2.4's serializers (`HttpJsonSerializer.parse*V1`) refusing an empty body.
    pub fn missing_content() -> Reply {
        Reply::error(
            StatusCode::BAD_REQUEST,
            "Missing message content",
            Some("Supply valid JSON formatted data in the body of your request"),
        )
    }

    /// 2.4's serializers refusing a body Jackson cannot read into the endpoint's object; `details` is the
    /// parser's complaint.
    pub fn unparsable_json(details: &str) -> Reply {
        Reply::error(StatusCode::BAD_REQUEST, "Unable to parse the given JSON", Some(details))
    }

    pub fn method_not_allowed(method: &Method) -> Reply {
        Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed",
            Some(&format!("The HTTP method [{method}] is not permitted for this endpoint")),
        )
    }
}

/// The status of a query that has no answer (spec: query §0.4, §1.4).
pub fn query_status(e: &QueryError) -> StatusCode {
    match e {
        QueryError::Request(r) => request_status(r),
        QueryError::Invalid(_) => StatusCode::BAD_REQUEST,
        // OpenTSDB 2.4's 413 for its query limits.
        QueryError::TooManyPoints(_) | QueryError::TooManyBytes(_) => StatusCode::PAYLOAD_TOO_LARGE,
        // The 408 2.4 uses for storage timeouts.
        QueryError::TimedOut => StatusCode::REQUEST_TIMEOUT,
        // Nobody reads it; 499 is what proxies log for a client that went away.
        QueryError::Cancelled => CLIENT_CLOSED_REQUEST,
        // OpenTSDB's "failed dependency" for storage failures.
        QueryError::Storage(_) => StatusCode::FAILED_DEPENDENCY,
        // 2.4 throws while serializing the point: an internal error.
        QueryError::Infinity(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The status of a request the protocol refused: 400, or 500 where 2.4 lets an exception escape (spec: query
/// §1.1, §6.2, §6.3).
pub fn request_status(e: &RequestError) -> StatusCode {
    match e.kind {
        RequestErrorKind::BadRequest => StatusCode::BAD_REQUEST,
        RequestErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// nginx's 499 (client closed request); not a standard status, so built from its number.
const CLIENT_CLOSED_REQUEST: StatusCode = match StatusCode::from_u16(499) {
    Ok(s) => s,
    Err(_) => StatusCode::BAD_REQUEST,
};

/// What a 503 asks a client to wait before resending.
pub const RETRY_AFTER_SECS: u64 = 5;

#[cfg(test)]
mod tests {
    use rtsd_protocol::query::{parse_get, parse_post};

    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    // spec: query §0.4, §1.4: a refused request's status and envelope, decided here from the protocol's kind.
    #[test]
    fn refused_requests_answer_with_their_kinds_status() {
        let e = parse_post(b"", 1_357_000_000_000).unwrap_err();
        let reply = Reply::query_error(&QueryError::Request(e));
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            reply.body,
            r#"{"error":{"code":400,"message":"Missing message content","details":"Supply valid JSON formatted data in the body of your request"}}"#
        );
        let e =
            parse_get(&params(&[("start", "1h-ago"), ("m", "sum:m{host=nosuch(x)}")]), 1_357_000_000_000).unwrap_err();
        let reply = Reply::query_error(&QueryError::Request(e));
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            reply.body,
            r#"{"error":{"code":500,"message":"When parsing tag 'host=nosuch(x)': Could not find a tag value filter of the type: nosuch"}}"#
        );
    }
}
