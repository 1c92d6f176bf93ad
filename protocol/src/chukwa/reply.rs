//! What the collector answers (spec: chukwa §3.3, §8.1, §8.2), byte for byte as Java's `ServletCollector` and
//! `CommitCheckServlet` wrote it (`PrintStream.println` ends lines with `\n` on Unix).
use std::fmt;

use super::chunk::Chunk;

/// `ServletCollector.ACK_PREFIX`: async-ack agents commit a chunk whose reply line starts with it.
pub const ACK_PREFIX: &str = "ok: ";

/// Body of the 503 answered when storage cannot commit (`COMMIT_FAIL`): no newline, as Java sent it. Sync agents
/// re-send the post; async agents reset their adaptors.
pub const COMMIT_FAILED_BODY: &str = "Commit failed";

/// Body of `GET` on the collector path without `?ping`.
pub const SERVLET_RUNNING_PAGE: &str = "<html><body><h2>Chukwa servlet running</h2>\n</body></html>\n";

/// Body of `GET .../acks` (`CommitCheckServlet`) with no pending commit: we never answer with pending lines, so
/// the list is always empty, and async-ack agents' polls always succeed (spec §8.1).
pub const ACKS_PAGE: &str = "<html><body><h2>Commit status</h2><ul>\n</ul></body></html>\n";

/// The acknowledgement of one chunk: all the reply needs, so the chunk's bytes can be gone by the time the
/// storage commit is durable and the reply is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ack {
    /// `data.length`.
    pub len: usize,
    pub seq_id: i64,
}

impl Ack {
    pub fn of(chunk: &Chunk<'_>) -> Ack {
        Ack { len: chunk.data.len(), seq_id: chunk.seq_id }
    }
}

/// `ok: <len> bytes ending at offset <seqID-1>`, without the newline. `seqID - 1` wraps like Java's `long`.
impl fmt::Display for Ack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ACK_PREFIX}{} bytes ending at offset {}", self.len, self.seq_id.wrapping_sub(1))
    }
}

impl Chunk<'_> {
    /// This chunk's acknowledgement (see [`Ack`]).
    pub fn ack(&self) -> Ack {
        Ack::of(self)
    }
}

/// Appends the 200 reply body for a committed post: one `ok: ...\n` line per chunk, in request order. Dropped
/// duplicates are acked the same way (spec §8.2).
pub fn write_reply_body(acks: impl IntoIterator<Item = Ack>, out: &mut String) {
    use fmt::Write;
    for ack in acks {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{ack}");
    }
}

/// The 200 reply body for a committed post (see [`write_reply_body`]). A post of zero chunks gets an empty body.
pub fn reply_body(acks: impl IntoIterator<Item = Ack>) -> String {
    let mut out = String::new();
    write_reply_body(acks, &mut out);
    out
}

/// The counters shown by `GET <collector>?ping`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PingStats {
    /// When the current stats window started, ms since the epoch (Java's `statTime`, 0 before the first window
    /// closed).
    pub window_start_ms: i64,
    /// The time of the request, ms since the epoch.
    pub now_ms: i64,
    /// POSTs received in the window.
    pub posts_in_window: u64,
    /// Chunks committed in the window.
    pub chunks_in_window: u64,
    /// Chunks committed since start.
    pub lifetime_chunks: u64,
}

/// Body of `GET <collector>?ping`: Java's five lines, names and all (spec §3.3).
pub fn ping_body(stats: &PingStats) -> String {
    format!(
        "Date:{}\nNow:{}\nnumberHTTPConnection in time window:{}\nnumberchunks in time window:{}\nlifetimechunks:{}\n",
        stats.window_start_ms, stats.now_ms, stats.posts_in_window, stats.chunks_in_window, stats.lifetime_chunks
    )
}
