//! Why a query has no answer, as kinds. The query layer names what went wrong; the HTTP status and OpenTSDB's
//! error envelope of each kind are decided in one place, `server::http::reply` (and the CLI prints the text).
use rtsd_protocol::query::RequestError;

use super::pipeline::Infinity;
use crate::store::{BudgetExceeded, StoreError};

/// A query that cannot be answered. `Display` is OpenTSDB's `message` text.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request as the parser refused it (OpenTSDB's message and details as the parser wrote them).
    #[error("{}", .0.message)]
    Request(#[from] RequestError),
    /// The request names something that does not exist or cannot run (an unknown metric, tag, aggregator or
    /// time zone), or an expression that cannot be evaluated: 2.4's `BadRequestException(message)`, whose
    /// details repeat the message.
    #[error("{0}")]
    Invalid(String),
    /// The read passed the data point limit (`tsd.query.limits.data_points`); 2.4's text names the limit.
    #[error(
        "Sorry, you have attempted to fetch more than our limit of {0} data points. Please try filtering using more \
         tags or decrease your time range."
    )]
    TooManyPoints(u64),
    /// The read passed the byte limit (`tsd.query.limits.bytes`), named in MB as 2.4 does.
    #[error(
        "Sorry, you have attempted to fetch more than our maximum amount of {} MB from storage. Please try \
         filtering using more tags or decrease your time range.",
        .0 / (1024 * 1024)
    )]
    TooManyBytes(u64),
    /// The query ran past `tsd.query.timeout` (2.4 never enforces it; rtsd does).
    #[error("Query timed out: it ran longer than tsd.query.timeout allows")]
    TimedOut,
    /// The client closed the connection; nobody reads the answer.
    #[error("Query cancelled: the client closed the connection")]
    Cancelled,
    /// The store failed (OpenTSDB's "failed dependency").
    #[error("{0}")]
    Storage(StoreError),
    /// A value 2.4 refuses to print (the engine's own error, which stays free of the store's types).
    #[error("{0}")]
    Infinity(#[from] Infinity),
}

impl From<StoreError> for QueryError {
    /// A read that ran out of its budget is the limit it ran into; anything else is a storage failure.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Budget(BudgetExceeded::Points(n)) => QueryError::TooManyPoints(n),
            StoreError::Budget(BudgetExceeded::Bytes(n)) => QueryError::TooManyBytes(n),
            StoreError::Budget(BudgetExceeded::Deadline) => QueryError::TimedOut,
            StoreError::Budget(BudgetExceeded::Cancelled) => QueryError::Cancelled,
            other => QueryError::Storage(other),
        }
    }
}

/// Why `/api/search/lookup` has no answer.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// A metric, tag key or value without a UID: OpenTSDB's `NoSuchUniqueName` text.
    #[error("{0}")]
    Unresolved(String),
    #[error("{0}")]
    Storage(#[from] StoreError),
}
