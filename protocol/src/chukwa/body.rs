//! The agent → collector POST body: `int32 N`, then `N` serialized chunks (spec: chukwa §3.2, §8.1).
use super::chunk::{self, Chunk, MIN_CHUNK_LEN};
use super::error::{EncodeError, Field, FrameError, FrameErrorKind};

/// Default cap on chunks per post (spec §8.1). Agents send about 2 MiB per post, so real posts stay far below.
pub const DEFAULT_MAX_CHUNKS: usize = 100_000;

/// Default cap on a decompressed body (spec §8.1), for the daemon to enforce while it reads and inflates.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;

/// Limits the parser enforces beyond the format itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest chunk count accepted in one body.
    pub max_chunks: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_chunks: DEFAULT_MAX_CHUNKS }
    }
}

/// A parsed POST body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body<'a> {
    /// The chunks in body order: ack line `i` belongs to chunk `i`.
    pub chunks: Vec<Chunk<'a>>,
    /// Bytes after the last announced chunk. Java ignored them, and so do we; counted for the curious.
    pub trailing: usize,
}

/// Parses a whole (decompressed) POST body with the default [`Limits`]. Any framing error refuses the whole
/// body: the collector answers 500 with the error's `Display` and the agent re-sends.
///
/// ```
/// use rtsd_protocol::chukwa::{encode_body, parse_body, Chunk};
/// let chunk = Chunk::new(8, "host1", r#" cluster="demo""#, "/var/log/app.log", "AppLog", b"a=1\nb=2\n")
///     .with_record_ends([3, 7]);
/// let body = encode_body([&chunk]).unwrap();
/// assert_eq!(body.len(), 88);
/// let parsed = parse_body(&body).unwrap();
/// assert_eq!(parsed.chunks, vec![chunk]);
/// assert_eq!(parsed.chunks[0].records().collect::<Vec<_>>(), [&b"a=1\n"[..], b"b=2\n"]);
/// ```
pub fn parse_body(body: &[u8]) -> Result<Body<'_>, FrameError> {
    parse_body_with(body, &Limits::default())
}

/// [`parse_body`] with explicit limits.
pub fn parse_body_with<'a>(body: &'a [u8], limits: &Limits) -> Result<Body<'a>, FrameError> {
    let body_error = |kind| FrameError { chunk: None, at: 0, kind };
    let (mut rest, count) =
        chunk::int32(Field::ChunkCount)(body).map_err(|e| chunk::into_frame_error(e, body.len(), None))?;
    if count < 0 {
        return Err(body_error(FrameErrorKind::NegativeCount { count }));
    }
    let count = count as usize;
    if count > limits.max_chunks {
        return Err(body_error(FrameErrorKind::TooManyChunks { count: count as u64, limit: limits.max_chunks }));
    }
    // Checked before anything is sized from the count: a 4-byte body cannot make us reserve 2^31 chunks.
    if count > rest.len() / MIN_CHUNK_LEN {
        return Err(body_error(FrameErrorKind::CountBeyondBody { count: count as u64, left: rest.len() }));
    }
    let mut chunks = Vec::with_capacity(count);
    for index in 0..count {
        let (after, c) = chunk::chunk(rest).map_err(|e| chunk::into_frame_error(e, body.len(), Some(index)))?;
        chunks.push(c);
        rest = after;
    }
    Ok(Body { chunks, trailing: rest.len() })
}

/// Appends a POST body (count, then each chunk) to `out`. On error `out` is left as it was.
pub fn write_body<'c, 'a: 'c>(
    chunks: impl IntoIterator<Item = &'c Chunk<'a>>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut count: usize = 0;
    for c in chunks {
        if let Err(e) = c.write_to(out) {
            out.truncate(start);
            return Err(e);
        }
        count += 1;
    }
    let Ok(count) = i32::try_from(count) else {
        out.truncate(start);
        return Err(EncodeError::CountOverflow { count });
    };
    out[start..start + 4].copy_from_slice(&count.to_be_bytes());
    Ok(())
}

/// A POST body holding `chunks`, byte for byte what Java's `ChukwaHttpSender` posts (uncompressed).
pub fn encode_body<'c, 'a: 'c>(chunks: impl IntoIterator<Item = &'c Chunk<'a>>) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    write_body(chunks, &mut out)?;
    Ok(out)
}

/// How a POST body looks compressed (spec §3.2, §8.1 "auto"). Agents send no header saying so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Uncompressed: starts with the big-endian count, whose first byte is `00` in practice.
    None,
    /// RFC 1950 zlib (Hadoop's `DefaultCodec`, the agent's default when compression is on).
    Zlib,
    /// RFC 1952 gzip.
    Gzip,
}

/// Guesses a body's compression from its first two bytes: zlib when `b0 == 0x78` and `(b0·256 + b1) % 31 == 0`,
/// gzip on `1f 8b`, otherwise none. Safe because a raw body starts with a small count.
pub fn sniff_compression(body: &[u8]) -> Compression {
    match body {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x78, b1, ..] if (0x7800 + u16::from(*b1)) % 31 == 0 => Compression::Zlib,
        _ => Compression::None,
    }
}
