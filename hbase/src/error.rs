//! The client's errors, and how each one is retried.
//!
//! HBase reports failures as a Java exception class name (in the response header, or per action inside a Multi).
//! What a client must do about one depends on the class only: drop a cached region and look it up again (a split,
//! a move), back off and retry the same place (a region opening, a busy server), forget a server (it stopped), reopen
//! a scanner, or give up. [`Error::retry`] is that table.
use std::time::Duration;

/// Everything a call can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The table has no region in `hbase:meta` (or the server said `TableNotFoundException`).
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// No answer from ZooKeeper or the region servers until the call's deadline.
    #[error("HBase unreachable: {0}")]
    Unreachable(String),
    /// An exception the server raised, by Java class name and message. Shown with the message's first line only:
    /// servers send the whole Java stack trace as the message, which would otherwise end up in every log line and
    /// client error that quotes this one.
    #[error("{class}: {}", .message.lines().next().unwrap_or_default())]
    Remote { class: String, message: String, do_not_retry: bool },
    /// A region server's connection could not be opened or broke while the call was in flight. A write in flight
    /// then has an unknown outcome: it is retried (or reported as this error), never reported as done.
    #[error("connection to {addr}: {detail}")]
    Connection { addr: String, detail: String },
    /// No response within the RPC timeout (the write, if one, may or may not have been applied).
    #[error("no response from {addr} within {timeout:?}")]
    RpcTimeout { addr: String, timeout: Duration },
    /// `hbase:meta` has no open region for the key right now (a split or a merge in progress, a region in
    /// transition, its server dead): retried after a pause.
    #[error("no online region for {0}")]
    RegionNotOnline(String),
    /// ZooKeeper answered, but not with a usable meta location.
    #[error("ZooKeeper: {0}")]
    ZooKeeper(String),
    /// The call's deadline passed while every attempt failed with a retriable error (the last one is kept).
    #[error("gave up after {elapsed:?}: {last}")]
    Deadline { elapsed: Duration, last: Box<Error> },
    /// A response the client cannot decode.
    #[error("malformed response: {0}")]
    Protocol(String),
    /// A request the client refuses to send (an empty row key, no column).
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// What the retry loop does after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The region is not (or no longer) where the cache says: drop it, look it up again, retry.
    Relocate,
    /// The server is gone or going: drop its connection and every region cached on it, look up again, retry.
    ServerGone,
    /// The region is where we think but cannot serve now: pause, retry.
    Backoff,
    /// The scanner's server-side state is gone: reopen it after the last row returned.
    ReopenScanner,
    /// Retrying cannot help.
    Never,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error a server exception maps to: `TableNotFoundException` has its own variant, the rest stay
    /// [`Error::Remote`].
    pub fn remote(class: &str, message: &str, do_not_retry: bool) -> Error {
        if short(class) == "TableNotFoundException" {
            return Error::TableNotFound(message.lines().next().unwrap_or_default().to_string());
        }
        Error::Remote { class: class.to_string(), message: message.to_string(), do_not_retry }
    }

    /// How to retry after this error.
    pub fn retry(&self) -> Retry {
        match self {
            Error::Remote { class, do_not_retry, .. } => remote_retry(class, *do_not_retry),
            Error::Connection { .. } | Error::RpcTimeout { .. } => Retry::ServerGone,
            Error::RegionNotOnline(_) | Error::ZooKeeper(_) => Retry::Backoff,
            Error::TableNotFound(_)
            | Error::Unreachable(_)
            | Error::Deadline { .. }
            | Error::Protocol(_)
            | Error::Invalid(_) => Retry::Never,
        }
    }

    pub fn is_retriable(&self) -> bool {
        self.retry() != Retry::Never
    }

    /// Whether HBase could not be reached at all (as opposed to answering with an error).
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Unreachable(_) => true,
            Error::Deadline { last, .. } => {
                matches!(**last, Error::Connection { .. } | Error::RpcTimeout { .. } | Error::ZooKeeper(_))
            }
            _ => false,
        }
    }

    /// The server exception's short class name, if this is one.
    pub fn remote_class(&self) -> Option<&str> {
        match self {
            Error::Remote { class, .. } => Some(short(class)),
            Error::Deadline { last, .. } => last.remote_class(),
            _ => None,
        }
    }
}

/// `org.apache.hadoop.hbase.NotServingRegionException` -> `NotServingRegionException`.
fn short(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

fn remote_retry(class: &str, do_not_retry: bool) -> Retry {
    match short(class) {
        "NotServingRegionException" | "RegionMovedException" | "WrongRegionException" => Retry::Relocate,
        // Opening: the region is on its way to this server or another one; the meta row says which once done.
        "RegionOpeningException" => Retry::Relocate,
        "RegionTooBusyException"
        | "CallQueueTooBigException"
        | "CallDroppedException"
        | "RetryImmediatelyException"
        | "PleaseHoldException"
        | "RpcThrottlingException"
        | "MultiActionResultTooLarge"
        | "RegionServerOverloadedException" => Retry::Backoff,
        "RegionServerAbortedException"
        | "RegionServerStoppedException"
        | "ServerNotRunningYetException"
        | "ConnectionClosingException" => Retry::ServerGone,
        "UnknownScannerException" | "OutOfOrderScannerNextException" | "ScannerResetException" => Retry::ReopenScanner,
        _ if do_not_retry => Retry::Never,
        // Anything else that the server did not mark do-not-retry is an IOException of the server's own (a WAL
        // roll, a flush): worth another attempt within the deadline.
        "DoNotRetryIOException" | "TableNotFoundException" | "UnknownProtocolException" => Retry::Never,
        "NoSuchColumnFamilyException" | "FailedSanityCheckException" | "UnsupportedOperationException" => Retry::Never,
        _ => Retry::Backoff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_map_to_their_retry() {
        let r = |c: &str, dnr| Error::remote(c, "m", dnr).retry();
        assert_eq!(r("org.apache.hadoop.hbase.NotServingRegionException", true), Retry::Relocate);
        assert_eq!(r("org.apache.hadoop.hbase.exceptions.RegionMovedException", false), Retry::Relocate);
        assert_eq!(r("org.apache.hadoop.hbase.RegionTooBusyException", false), Retry::Backoff);
        assert_eq!(r("org.apache.hadoop.hbase.UnknownScannerException", true), Retry::ReopenScanner);
        assert_eq!(r("org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException", true), Retry::Never);
        assert_eq!(r("org.apache.hadoop.hbase.DoNotRetryIOException", true), Retry::Never);
        assert!(matches!(Error::remote("org.apache.hadoop.hbase.TableNotFoundException", "t\nx", true),
            Error::TableNotFound(t) if t == "t"));
    }

    #[test]
    fn a_remote_error_shows_the_first_line_of_the_servers_stack_trace() {
        let trace = "org.apache.hadoop.hbase.NotServingRegionException: tsdb,,1.abc. is not online on rs1\n\
                     \tat org.apache.hadoop.hbase.regionserver.HRegionServer.getRegion(HRegionServer.java:3662)\n";
        let e = Error::remote("org.apache.hadoop.hbase.NotServingRegionException", trace, false);
        assert_eq!(
            e.to_string(),
            "org.apache.hadoop.hbase.NotServingRegionException: org.apache.hadoop.hbase.NotServingRegionException: \
             tsdb,,1.abc. is not online on rs1"
        );
        // The whole trace is kept for whoever wants it.
        assert!(matches!(&e, Error::Remote { message, .. } if message == trace));
        let deadline = Error::Deadline { elapsed: Duration::from_secs(5), last: Box::new(e) };
        assert!(!deadline.to_string().contains('\n'), "{deadline}");
    }
}
