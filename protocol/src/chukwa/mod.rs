//! Apache Chukwa's agent → collector wire format, so that unmodified Chukwa agents can post to rtsd
//! (spec: `chukwa.md` §1-§3, §5.3, §8).
//!
//! An agent's `HttpConnector` POSTs `int32 N` followed by `N` serialized `ChunkImpl`s; the collector answers 200
//! with one `ok: <len> bytes ending at offset <seqID-1>` line per chunk once they are durable, 503
//! `Commit failed` when storage cannot commit, and 500 when the body cannot be framed.
//!
//! * [`parse_body`] / [`parse_chunk`]: the `nom` parser, borrowing every field from the body; a [`FrameError`]
//!   fails the whole post and its `Display` is the 500 text.
//! * [`Chunk::write_to`] / [`encode_body`]: the encoder, byte for byte what Java writes (for tests and the agent
//!   emulator).
//! * [`Ack`], [`reply_body`], [`ACKS_PAGE`], ...: the collector's answers.
//! * [`Chunk::stream_key`], [`Fingerprint`], [`OpaqueKey`]: pure inputs of the de-duplication rules of §8.4.
//! * [`rowkey`]: Chukwa 0.7+'s 14-byte HBase row key (§5.3), for cross-checks and exports.
//!
//! ```
//! use rtsd_protocol::chukwa::{encode_body, parse_body, reply_body, Chunk};
//! let records = b"a=1\nb=2\n";
//! let sent = Chunk::new(8, "host1", r#" cluster="demo""#, "/var/log/app.log", "AppLog", records)
//!     .with_record_ends([3, 7]);
//! let body = encode_body([&sent]).unwrap();
//! let post = parse_body(&body).unwrap();
//! let chunk = &post.chunks[0];
//! assert_eq!((chunk.start(), chunk.seq_id, chunk.cluster()), (0, 8, "demo"));
//! assert_eq!(reply_body(post.chunks.iter().map(|c| c.ack())), "ok: 8 bytes ending at offset 7\n");
//! ```
mod body;
mod chunk;
mod error;
pub mod mutf8;
mod reply;
pub mod rowkey;
mod stream;

pub use body::{
    encode_body, parse_body, parse_body_with, sniff_compression, write_body, Body, Compression, Limits,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CHUNKS,
};
pub use chunk::{
    parse_chunk, unescape_newlines, Chunk, RecordEnds, RecordEndsIter, Records, MIN_CHUNK_LEN, PROTOCOL_VERSION,
};
pub use error::{EncodeError, Field, FrameError, FrameErrorKind};
pub use mutf8::Mutf8Error;
pub use reply::{
    ping_body, reply_body, write_reply_body, Ack, PingStats, ACKS_PAGE, ACK_PREFIX, COMMIT_FAILED_BODY,
    SERVLET_RUNNING_PAGE,
};
pub use stream::{
    cluster_name, content_hash, fingerprint_lengths, get_tag, Fingerprint, OpaqueKey, StreamKey, FINGERPRINT_BASE,
    UNDEFINED_CLUSTER,
};

#[cfg(test)]
mod tests;
