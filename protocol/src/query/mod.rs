//! The request side of OpenTSDB 2.4's query API: `/api/query` (GET and POST), `/api/query/last`, the time,
//! downsample, rate and filter languages they carry, and the small fixed answers that describe them
//! (`/api/aggregators`, `/api/config/filters`). Spec: query §1.1-§1.4, §2.1, §3.1, §4.4, §5, §6.1.
//!
//! Everything here is pure: "now" is always a parameter, and nothing touches storage. The daemon's engine
//! takes a validated [`TsQuery`] and uses its [`SubQuery`]s (aggregator, [`DownsampleSpec`], [`RateOptions`],
//! [`Filter`]s) to plan scans; errors are [`RequestError`]s whose `message` is OpenTSDB's text, ready for the
//! error envelope ([`RequestError::to_envelope`]).
//!
//! ```
//! use rtsd_protocol::query::{parse_get, parse_post};
//! let now = 1_357_000_000_000;
//! let params = vec![
//!     ("start".to_string(), "1356998400".to_string()),
//!     ("m".to_string(), "sum:rate:sys.cpu.user{host=*}".to_string()),
//! ];
//! let get = parse_get(&params, now).unwrap();
//! let post = parse_post(
//!     br#"{"start":1356998400,"queries":[{"aggregator":"sum","metric":"sys.cpu.user","rate":true,"tags":{"host":"*"}}]}"#,
//!     now,
//! )
//! .unwrap();
//! assert_eq!(get.queries, post.queries);
//! assert_eq!(get.start_ms, 1_356_998_400_000);
//! assert_eq!(get.queries[0].group_by_tagks(), vec!["host"]);
//! ```

mod downsample;
pub mod exp;
mod filter;
pub mod gexp;
mod javautil;
mod json;
mod last;
mod rate;
mod request;
mod time;

#[cfg(test)]
mod tests;

pub use downsample::{CalendarInterval, CalendarUnit, DownsampleSpec, FillPolicy};
pub use filter::{config_filters_json, Filter, FilterKind};
pub use last::{parse_last_get, parse_last_post, LastPointQuery, LastPointSubQuery};
pub use rate::{parse_rate_spec, RateOptions};
pub use request::{
    check_tsuids_share_metric, parse_get, parse_graph_get, parse_post, parse_with_metric, tsquery_json, RollupUsage,
    SubQuery, TsQuery,
};
pub use time::{parse_duration, parse_time, resolve_timezone};

/// The aggregator names OpenTSDB 2.4 registers, in the exact order `/api/aggregators` prints them (the key order
/// of a Java 8+ `HashMap`; spec: query §2.1). Names are case-sensitive; `mult` is the multiply aggregator.
pub const AGGREGATORS: &[&str] = &[
    "mult",
    "p90",
    "zimsum",
    "mimmax",
    "sum",
    "p50",
    "none",
    "p95",
    "ep99r7",
    "pfsum",
    "p75",
    "p99",
    "ep99r3",
    "ep95r7",
    "min",
    "avg",
    "ep75r7",
    "dev",
    "ep95r3",
    "ep75r3",
    "ep50r7",
    "ep90r7",
    "mimmin",
    "p999",
    "ep50r3",
    "ep90r3",
    "ep999r7",
    "last",
    "max",
    "count",
    "diff",
    "median",
    "squareSum",
    "ep999r3",
    "first",
];

/// Whether `name` is a registered aggregator (case-sensitive, spec: query §2.1).
pub fn is_aggregator(name: &str) -> bool {
    AGGREGATORS.contains(&name)
}

/// The `/api/aggregators` (and deprecated `/aggregators`) body: the JSON array of [`AGGREGATORS`].
pub fn aggregators_json() -> String {
    let mut out = String::from("[");
    for (i, a) in AGGREGATORS.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(a);
        out.push('"');
    }
    out.push(']');
    out
}

/// A rejected query request: the HTTP status, OpenTSDB's `message`, and the optional `details` of the error
/// envelope (spec: query §0.4, §1.4).
///
/// Status is 400 for everything a client can get wrong, with one replicated quirk: an unknown filter type inside
/// the tag braces of a GET `m=` escapes OpenTSDB as an internal error, 500 (spec: query §1.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// HTTP status code of the reply.
    pub status: u16,
    /// The envelope's `message`, OpenTSDB's text.
    pub message: String,
    /// The envelope's `details`; OpenTSDB puts a dump of the parsed query here for validation failures and the
    /// JSON parser's complaint for unparseable bodies.
    pub details: Option<String>,
}

impl RequestError {
    /// A 400 with no details (OpenTSDB's `new BadRequestException(message)`).
    pub fn bad_request(message: impl Into<String>) -> RequestError {
        RequestError { status: 400, message: message.into(), details: None }
    }

    /// A 400 with details.
    pub fn bad_request_with(message: impl Into<String>, details: impl Into<String>) -> RequestError {
        RequestError { status: 400, message: message.into(), details: Some(details.into()) }
    }

    /// A 500, as OpenTSDB answers when an unexpected exception escapes a handler (no details).
    pub fn internal(message: impl Into<String>) -> RequestError {
        RequestError { status: 500, message: message.into(), details: None }
    }

    /// The `{"error":{...}}` body for this error (spec: query §0.4).
    pub fn to_envelope(&self) -> String {
        crate::http_json::error_envelope(self.status, &self.message, self.details.as_deref())
    }
}
