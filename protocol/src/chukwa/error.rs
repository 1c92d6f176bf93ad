//! Errors of the Chukwa chunk codec. A [`FrameError`] fails a whole POST with HTTP 500, as Java's
//! `ServletCollector` did on any exception while reading (spec: chukwa §3.3, §8.1); its `Display` is the text the
//! collector answers with.
use std::fmt;

use super::mutf8::Mutf8Error;

/// The field of the wire format (spec: chukwa §2) that a framing error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The `int32` that starts a POST body.
    ChunkCount,
    ProtocolVersion,
    SeqId,
    Source,
    Tags,
    StreamName,
    DataType,
    DebuggingInfo,
    /// `numRecords`.
    RecordCount,
    RecordEndOffsets,
    Data,
}

impl Field {
    /// The name used in error texts: Java's field names, as the spec's table has them.
    pub fn name(self) -> &'static str {
        match self {
            Field::ChunkCount => "chunk count",
            Field::ProtocolVersion => "protocol version",
            Field::SeqId => "seqID",
            Field::Source => "source",
            Field::Tags => "tags",
            Field::StreamName => "streamName",
            Field::DataType => "dataType",
            Field::DebuggingInfo => "debuggingInfo",
            Field::RecordCount => "numRecords",
            Field::RecordEndOffsets => "record end offsets",
            Field::Data => "data",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong, without the position (see [`FrameError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameErrorKind {
    /// The input ends inside a field. Java threw `EOFException` here.
    #[error("truncated {field}: needs {need} bytes, {left} left")]
    Truncated { field: Field, need: u64, left: usize },
    /// The POST body's chunk count is negative. (Java read no chunk and answered 200 with an empty body; spec §8.1
    /// asks for `N ≥ 0`.)
    #[error("negative chunk count {count}")]
    NegativeCount { count: i32 },
    /// More chunks than [`super::Limits::max_chunks`] allows.
    #[error("{count} chunks in one post, more than the limit of {limit}")]
    TooManyChunks { count: u64, limit: usize },
    /// The count cannot be true: even empty chunks take [`super::MIN_CHUNK_LEN`] bytes each.
    #[error("chunk count {count} cannot fit in the {left} bytes that follow it")]
    CountBeyondBody { count: u64, left: usize },
    /// Java's text, spaces and all (`ChunkImpl.readFields`).
    #[error("Protocol version mismatched, drop data.  source version: {version}, collector version:1")]
    ProtocolVersion { version: i32 },
    /// A string that `readUTF` would refuse; `Display` carries Java's `UTFDataFormatException` message.
    #[error("{error} in {field}")]
    Utf { field: Field, error: Mutf8Error },
    /// `numRecords` is 0 (Java indexed `offsets[-1]` and failed the post) or negative.
    #[error("numRecords is {count}, must be at least 1")]
    NoRecords { count: i32 },
    /// A record end offset below -1 or below the one before it (Java did not check; records would overlap).
    #[error("record end offset #{index} is {offset}, before the previous end {previous}")]
    OffsetDecreases { index: usize, offset: i32, previous: i32 },
}

/// A framing error: the whole POST body is refused with HTTP 500 (spec: chukwa §8.1).
///
/// `Display` is `bad chunk <i> at byte <at>: <what>` for errors inside a chunk and `bad post body at byte <at>:
/// <what>` for the count. `at` is the offset, in the (decompressed) body, of the field that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// Which chunk (0-based, in body order), or `None` for the chunk count itself.
    pub chunk: Option<usize>,
    /// Byte offset of the failing field from the start of the parsed input.
    pub at: usize,
    pub kind: FrameErrorKind,
}

impl FrameError {
    /// True when the input simply ended too early: a reader of a stream without a count (the SocketTee format,
    /// spec §2.2) can wait for more bytes instead of failing.
    pub fn is_truncated(&self) -> bool {
        matches!(self.kind, FrameErrorKind::Truncated { .. })
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.chunk {
            Some(i) => write!(f, "bad chunk {i} at byte {}: {}", self.at, self.kind),
            None => write!(f, "bad post body at byte {}: {}", self.at, self.kind),
        }
    }
}

impl std::error::Error for FrameError {}

/// Why a chunk cannot be written in the wire format. Java's writer throws on the first two (`writeUTF`'s
/// `UTFDataFormatException` and an array index error); the others would make a body our parser refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// Java's `writeUTF` message, with the field.
    #[error("encoded string too long: {len} bytes ({field})")]
    StringTooLong { field: Field, len: usize },
    /// The record end offsets do not describe `data` exactly: the last one must be `data.len() - 1`.
    #[error("last record end offset {last} does not match {len} data bytes")]
    DataLength { last: i32, len: usize },
    /// A chunk needs at least one record end offset.
    #[error("no record end offsets")]
    NoRecords,
    /// Offsets must not go below -1 or decrease.
    #[error("record end offset #{index} is {offset}, before the previous end {previous}")]
    OffsetDecreases { index: usize, offset: i32, previous: i32 },
    /// More chunks or records than an `int32` count can say.
    #[error("{count} items do not fit an int32 count")]
    CountOverflow { count: usize },
}
