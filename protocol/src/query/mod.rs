//! The request side of OpenTSDB 2.4's query API: `/api/query` (GET and POST), `/api/query/last`, the time,
//! downsample, rate and filter languages they carry, and the small fixed answers that describe them
//! (`/api/aggregators`, `/api/config/filters`). Spec: query §1.1-§1.4, §2.1, §3.1, §4.4, §5, §6.1.
//!
//! Everything here is pure: "now" is always a parameter, and nothing touches storage. The daemon's engine
//! takes a validated [`TsQuery`] and uses its [`SubQuery`]s (aggregator, [`DownsampleSpec`], [`RateOptions`],
//! [`Filter`]s) to plan scans; errors are [`RequestError`]s whose `message` is OpenTSDB's text and whose
//! [`RequestErrorKind`] says whose fault it is (the daemon's HTTP layer turns that into a status).
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

/// Which of OpenTSDB's two answers a rejected request gets; the protocol names it, the daemon's HTTP layer
/// decides its status (spec: query §0.4, §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestErrorKind {
    /// Everything a client can get wrong: OpenTSDB's `BadRequestException` (400).
    BadRequest,
    /// Where 2.4 lets an exception escape its handler and answers with an internal error (500): an unknown filter
    /// type inside the tag braces of a GET `m=` (spec: query §1.1), most refusals of `/api/query/exp` and
    /// `/api/query/gexp` (spec: query §6.2, §6.3).
    Internal,
}

/// A rejected query request: its [`RequestErrorKind`], OpenTSDB's `message`, and the optional `details` of the
/// error envelope (spec: query §0.4, §1.4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub kind: RequestErrorKind,
    /// The envelope's `message`, OpenTSDB's text.
    pub message: String,
    /// The envelope's `details`; OpenTSDB puts a dump of the parsed query here for validation failures and the
    /// JSON parser's complaint for unparseable bodies.
    pub details: Option<String>,
}

impl RequestError {
    /// A client's mistake with no details (OpenTSDB's `new BadRequestException(message)`).
    pub fn bad_request(message: impl Into<String>) -> RequestError {
        RequestError { kind: RequestErrorKind::BadRequest, message: message.into(), details: None }
    }

    /// A client's mistake with details.
    pub fn bad_request_with(message: impl Into<String>, details: impl Into<String>) -> RequestError {
        RequestError { kind: RequestErrorKind::BadRequest, message: message.into(), details: Some(details.into()) }
    }

    /// An exception escaping OpenTSDB's handler (no details).
    pub fn internal(message: impl Into<String>) -> RequestError {
        RequestError { kind: RequestErrorKind::Internal, message: message.into(), details: None }
    }

    /// The same refusal, as an exception escaping the handler (where 2.4 does not catch it).
    pub fn into_internal(self) -> RequestError {
        RequestError { kind: RequestErrorKind::Internal, ..self }
    }
}
