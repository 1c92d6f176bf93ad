//! One Chukwa chunk: the value type, its `nom` parser and its encoder (spec: chukwa §1, §2).
//!
//! The layout is `ChunkImpl.write`: fixed-width big-endian integers and `writeUTF` strings, no varints:
//!
//! ```text
//! int32 version (= 1) | int64 seqID | utf source | utf tags | utf streamName | utf dataType | utf debuggingInfo
//! | int32 numRecords | numRecords × int32 record end offset | (last offset + 1) data bytes
//! ```
//!
//! Parsed chunks borrow everything from the body: strings are `Cow::Borrowed` unless modified UTF-8 made them
//! differ from UTF-8, the record end offsets stay big-endian bytes ([`RecordEnds`]), and `data` is a slice.
use std::borrow::Cow;
use std::fmt;

use nom::bytes::complete::take;
use nom::number::complete::{be_i32, be_i64, be_u16};
use nom::{IResult, Parser};

use super::error::{EncodeError, Field, FrameError, FrameErrorKind};
use super::mutf8;

/// `ChunkImpl.PROTOCOL_VERSION`, the only version on the wire from Chukwa 0.1.2 to 0.8.0.
pub const PROTOCOL_VERSION: i32 = 1;

/// The smallest serialized chunk: version, seqID, five empty strings, `numRecords = 1`, offset `-1`, no data.
pub const MIN_CHUNK_LEN: usize = 4 + 8 + 5 * 2 + 4 + 4;

/// One chunk of an adaptor's byte stream (spec: chukwa §1).
///
/// It covers stream bytes `[seq_id - data.len(), seq_id)`: `seq_id` is the offset of the first byte *after* it.
/// The protocol version is not kept: a parsed chunk had version 1 and an encoded one gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// Stream offset just past this chunk's last byte (signed, as Java's `long`; adaptors break the contract, §4).
    pub seq_id: i64,
    /// The agent's host name (lowercased by Java), or `host:Process` for some Hadoop sources.
    pub source: Cow<'a, str>,
    /// Space-separated `name="value"` pairs, usually with a leading space: ` cluster="demo"`.
    pub tags: Cow<'a, str>,
    /// The data source within the adaptor, e.g. a file's absolute path.
    pub stream_name: Cow<'a, str>,
    /// The user's format label, e.g. `SystemMetrics`; it picks the processor.
    pub data_type: Cow<'a, str>,
    /// Always empty from shipped adaptors, carried for fidelity.
    pub debugging_info: Cow<'a, str>,
    /// Index of the last byte of each record within `data`; never empty in a parsed chunk.
    pub record_ends: RecordEnds<'a>,
    /// The payload: exactly `record_ends.last() + 1` bytes.
    pub data: &'a [u8],
}

impl<'a> Chunk<'a> {
    /// A chunk holding `data` as one record, with empty debugging info: what a Java adaptor that never calls
    /// `setRecordOffsets` sends.
    pub fn new(
        seq_id: i64,
        source: impl Into<Cow<'a, str>>,
        tags: impl Into<Cow<'a, str>>,
        stream_name: impl Into<Cow<'a, str>>,
        data_type: impl Into<Cow<'a, str>>,
        data: &'a [u8],
    ) -> Self {
        Chunk {
            seq_id,
            source: source.into(),
            tags: tags.into(),
            stream_name: stream_name.into(),
            data_type: data_type.into(),
            debugging_info: Cow::Borrowed(""),
            record_ends: RecordEnds::single_record(data.len()),
            data,
        }
    }

    /// The same chunk with other record end offsets.
    pub fn with_record_ends(mut self, ends: impl Into<RecordEnds<'a>>) -> Self {
        self.record_ends = ends.into();
        self
    }

    /// Number of data bytes: what the ack line reports.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for the empty chunk (offsets `[-1]`, no data), which the spec says to accept (§2, §8.7 vector 2).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Stream offset of the first byte: `seq_id - len`, negative for adaptors that count chunks (HeartbeatAdaptor).
    /// Saturates instead of wrapping at `i64::MIN`.
    pub fn start(&self) -> i64 {
        self.seq_id.saturating_sub(self.data.len() as i64)
    }

    /// The records, split at the end offsets the way Chukwa's processors do: record `i` is
    /// `data[ends[i-1] + 1 ..= ends[i]]` (with `ends[-1] = -1`). Equal offsets give empty records, and the empty
    /// chunk gives one empty record, so there is always one item per offset. On a hand-built chunk whose offsets
    /// do not fit `data`, ranges are clamped to `data` rather than panicking.
    pub fn records(&self) -> Records<'_> {
        Records { data: self.data, ends: self.record_ends.iter(), prev: -1 }
    }

    /// Checks what [`Chunk::write_to`] needs: strings within 65535 encoded bytes, at least one record, offsets
    /// that start at -1 or above and never decrease, and the last offset equal to `data.len() - 1`.
    pub fn validate(&self) -> Result<(), EncodeError> {
        for (field, s) in self.strings() {
            let len = mutf8::encoded_len(s);
            if len > mutf8::MAX_UTF_LEN {
                return Err(EncodeError::StringTooLong { field, len });
            }
        }
        if self.record_ends.is_empty() {
            return Err(EncodeError::NoRecords);
        }
        if self.record_ends.len() > i32::MAX as usize {
            return Err(EncodeError::CountOverflow { count: self.record_ends.len() });
        }
        let mut previous = -1;
        for (index, offset) in self.record_ends.iter().enumerate() {
            if offset < previous {
                return Err(EncodeError::OffsetDecreases { index, offset, previous });
            }
            previous = offset;
        }
        if i64::from(previous) + 1 != self.data.len() as i64 {
            return Err(EncodeError::DataLength { last: previous, len: self.data.len() });
        }
        Ok(())
    }

    /// Size of the serialized chunk in bytes.
    pub fn encoded_len(&self) -> usize {
        let strings: usize = self.strings().iter().map(|(_, s)| 2 + mutf8::encoded_len(s)).sum();
        4 + 8 + strings + 4 + 4 * self.record_ends.len() + self.data.len()
    }

    /// Appends the chunk exactly as Java's `ChunkImpl.write` would. Validates first ([`Chunk::validate`]) and
    /// appends nothing when that fails.
    pub fn write_to(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.validate()?;
        out.reserve(self.encoded_len());
        out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        out.extend_from_slice(&self.seq_id.to_be_bytes());
        for (_, s) in self.strings() {
            // validate() checked the length fits a u16.
            out.extend_from_slice(&(mutf8::encoded_len(s) as u16).to_be_bytes());
            mutf8::encode_into(s, out);
        }
        out.extend_from_slice(&(self.record_ends.len() as i32).to_be_bytes());
        for offset in self.record_ends.iter() {
            out.extend_from_slice(&offset.to_be_bytes());
        }
        out.extend_from_slice(self.data);
        Ok(())
    }

    /// The five strings in wire order.
    fn strings(&self) -> [(Field, &str); 5] {
        [
            (Field::Source, self.source.as_ref()),
            (Field::Tags, self.tags.as_ref()),
            (Field::StreamName, self.stream_name.as_ref()),
            (Field::DataType, self.data_type.as_ref()),
            (Field::DebuggingInfo, self.debugging_info.as_ref()),
        ]
    }
}

/// Iterator over a chunk's records (see [`Chunk::records`]).
#[derive(Debug, Clone)]
pub struct Records<'c> {
    data: &'c [u8],
    ends: RecordEndsIter<'c>,
    prev: i64,
}

impl<'c> Iterator for Records<'c> {
    type Item = &'c [u8];

    fn next(&mut self) -> Option<&'c [u8]> {
        let end = i64::from(self.ends.next()?);
        let len = self.data.len() as i64;
        let start = (self.prev + 1).clamp(0, len);
        let stop = (end + 1).clamp(start, len);
        self.prev = end;
        Some(&self.data[start as usize..stop as usize])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ends.size_hint()
    }
}

impl ExactSizeIterator for Records<'_> {}

/// Record end offsets: borrowed big-endian `int32`s straight from the body when parsed, or owned values when
/// built by hand. Compares, hashes and prints as the list of offsets either way.
#[derive(Clone)]
pub struct RecordEnds<'a>(Repr<'a>);

#[derive(Clone)]
enum Repr<'a> {
    /// `4 × n` bytes, each group a big-endian `int32`.
    Wire(&'a [u8]),
    Owned(Vec<i32>),
}

impl<'a> RecordEnds<'a> {
    /// The offsets Java defaults to when none were set: one record covering all `data_len` bytes (`[-1]` when
    /// there are none).
    pub fn single_record(data_len: usize) -> RecordEnds<'static> {
        RecordEnds(Repr::Owned(vec![(data_len as i64 - 1) as i32]))
    }

    /// Offsets for consecutive records of the given lengths: `[3, 4]` gives `[2, 6]`. No lengths gives no
    /// offsets (not a valid chunk); zero lengths give empty records.
    pub fn from_lengths(lengths: impl IntoIterator<Item = usize>) -> RecordEnds<'static> {
        let mut end: i64 = -1;
        RecordEnds(Repr::Owned(
            lengths
                .into_iter()
                .map(|len| {
                    end += len as i64;
                    end as i32
                })
                .collect(),
        ))
    }

    /// A view of big-endian `int32`s; `None` when the length is not a multiple of 4.
    pub fn from_be_bytes(bytes: &'a [u8]) -> Option<Self> {
        bytes.len().is_multiple_of(4).then_some(RecordEnds(Repr::Wire(bytes)))
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Wire(b) => b.len() / 4,
            Repr::Owned(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, index: usize) -> Option<i32> {
        match &self.0 {
            Repr::Wire(b) => b.get(index * 4..index * 4 + 4).map(be_i32_at),
            Repr::Owned(v) => v.get(index).copied(),
        }
    }

    /// The last offset: `data.len() - 1` in a valid chunk.
    pub fn last(&self) -> Option<i32> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn iter(&self) -> RecordEndsIter<'_> {
        match &self.0 {
            Repr::Wire(b) => RecordEndsIter(IterRepr::Wire(b.chunks_exact(4))),
            Repr::Owned(v) => RecordEndsIter(IterRepr::Owned(v.iter())),
        }
    }

    pub fn to_vec(&self) -> Vec<i32> {
        self.iter().collect()
    }

    /// Copies a borrowed view so the offsets outlive the body.
    pub fn into_owned(self) -> RecordEnds<'static> {
        match self.0 {
            Repr::Wire(_) => RecordEnds(Repr::Owned(self.to_vec())),
            Repr::Owned(v) => RecordEnds(Repr::Owned(v)),
        }
    }
}

fn be_i32_at(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Iterator over [`RecordEnds`].
#[derive(Debug, Clone)]
pub struct RecordEndsIter<'r>(IterRepr<'r>);

#[derive(Debug, Clone)]
enum IterRepr<'r> {
    Wire(std::slice::ChunksExact<'r, u8>),
    Owned(std::slice::Iter<'r, i32>),
}

impl Iterator for RecordEndsIter<'_> {
    type Item = i32;

    fn next(&mut self) -> Option<i32> {
        match &mut self.0 {
            IterRepr::Wire(it) => it.next().map(be_i32_at),
            IterRepr::Owned(it) => it.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterRepr::Wire(it) => it.size_hint(),
            IterRepr::Owned(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for RecordEndsIter<'_> {}

impl PartialEq for RecordEnds<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for RecordEnds<'_> {}

impl std::hash::Hash for RecordEnds<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        for offset in self.iter() {
            offset.hash(state);
        }
    }
}

impl fmt::Debug for RecordEnds<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<i32>> for RecordEnds<'_> {
    fn from(v: Vec<i32>) -> Self {
        RecordEnds(Repr::Owned(v))
    }
}

impl From<&[i32]> for RecordEnds<'_> {
    fn from(v: &[i32]) -> Self {
        RecordEnds(Repr::Owned(v.to_vec()))
    }
}

impl<const N: usize> From<[i32; N]> for RecordEnds<'_> {
    fn from(v: [i32; N]) -> Self {
        RecordEnds(Repr::Owned(v.to_vec()))
    }
}

impl FromIterator<i32> for RecordEnds<'_> {
    fn from_iter<T: IntoIterator<Item = i32>>(iter: T) -> Self {
        RecordEnds(Repr::Owned(iter.into_iter().collect()))
    }
}

/// Undoes the escaping of `CharFileTailingAdaptorUTF8NewLineEscaped`: every `\x04\n` becomes `\n` (Java's
/// `RecordConstants.recoverRecordSeparators`, spec §4, §8.5). Borrows when there is nothing to undo.
pub fn unescape_newlines(record: &[u8]) -> Cow<'_, [u8]> {
    if !record.windows(2).any(|w| w == b"\x04\n") {
        return Cow::Borrowed(record);
    }
    let mut out = Vec::with_capacity(record.len());
    let mut i = 0;
    while i < record.len() {
        if record[i] == 0x04 && record.get(i + 1) == Some(&b'\n') {
            out.push(b'\n');
            i += 2;
        } else {
            out.push(record[i]);
            i += 1;
        }
    }
    Cow::Owned(out)
}

// ---- parser ----------------------------------------------------------------------------------------------------

/// The parser's error: what went wrong and how much input was left at the field that failed (turned into a byte
/// offset by the caller, which knows where the input started).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParseErr {
    pub(crate) left: usize,
    pub(crate) kind: FrameErrorKind,
}

impl ParseErr {
    pub(crate) fn into_frame_error(self, input_len: usize, chunk: Option<usize>) -> FrameError {
        FrameError { chunk, at: input_len.saturating_sub(self.left), kind: self.kind }
    }
}

impl<'a> nom::error::ParseError<&'a [u8]> for ParseErr {
    fn from_error_kind(input: &'a [u8], _kind: nom::error::ErrorKind) -> Self {
        // Only reached if a nom combinator fails on its own; every field maps its errors explicitly.
        ParseErr {
            left: input.len(),
            kind: FrameErrorKind::Truncated { field: Field::Data, need: 0, left: input.len() },
        }
    }

    fn append(_input: &'a [u8], _kind: nom::error::ErrorKind, other: Self) -> Self {
        other
    }
}

pub(crate) type PResult<'a, T> = IResult<&'a [u8], T, ParseErr>;

/// A failure at `input`, the start of the failing field. `Failure`, not `Error`: no alternative can recover.
pub(crate) fn fail<T>(input: &[u8], kind: FrameErrorKind) -> PResult<'_, T> {
    Err(nom::Err::Failure(ParseErr { left: input.len(), kind }))
}

fn truncated<T>(input: &[u8], field: Field, need: u64) -> PResult<'_, T> {
    fail(input, FrameErrorKind::Truncated { field, need, left: input.len() })
}

/// A big-endian `int32` (`DataInput.readInt`).
pub(crate) fn int32(field: Field) -> impl Fn(&[u8]) -> PResult<'_, i32> {
    move |input| be_i32::<_, nom::error::Error<&[u8]>>(input).or_else(|_| truncated(input, field, 4))
}

fn int64(field: Field) -> impl Fn(&[u8]) -> PResult<'_, i64> {
    move |input| be_i64::<_, nom::error::Error<&[u8]>>(input).or_else(|_| truncated(input, field, 8))
}

/// Exactly `n` bytes, refused before anything is sliced or allocated when fewer are left.
fn bytes<'a>(field: Field, n: u64) -> impl Fn(&'a [u8]) -> PResult<'a, &'a [u8]> {
    move |input: &'a [u8]| {
        if (input.len() as u64) < n {
            return truncated(input, field, n);
        }
        take::<_, _, nom::error::Error<&[u8]>>(n as usize).parse(input).or_else(|_| truncated(input, field, n))
    }
}

/// A `writeUTF` string: `u16` byte count, then modified UTF-8 (`DataInput.readUTF`).
fn utf<'a>(field: Field) -> impl Fn(&'a [u8]) -> PResult<'a, Cow<'a, str>> {
    move |input: &'a [u8]| {
        let (rest, len) = be_u16::<_, nom::error::Error<&[u8]>>(input).or_else(|_| truncated(input, field, 2))?;
        let (after, raw) = bytes(field, u64::from(len))(rest)?;
        match mutf8::decode(raw) {
            Ok(s) => Ok((after, s)),
            Err(error) => fail(rest, FrameErrorKind::Utf { field, error }),
        }
    }
}

/// The record end offsets, checked to start at -1 or above and never decrease; borrowed, not copied.
fn record_ends(input: &[u8]) -> PResult<'_, RecordEnds<'_>> {
    let (rest, count) = int32(Field::RecordCount)(input)?;
    if count < 1 {
        return fail(input, FrameErrorKind::NoRecords { count });
    }
    let (after, raw) = bytes(Field::RecordEndOffsets, 4 * count as u64)(rest)?;
    let mut previous = -1;
    for (index, group) in raw.chunks_exact(4).enumerate() {
        let offset = be_i32_at(group);
        if offset < previous {
            return fail(&rest[index * 4..], FrameErrorKind::OffsetDecreases { index, offset, previous });
        }
        previous = offset;
    }
    Ok((after, RecordEnds(Repr::Wire(raw))))
}

/// One serialized chunk (`ChunkImpl.readFields`), as a `nom` parser over complete input.
pub(crate) fn chunk(input: &[u8]) -> PResult<'_, Chunk<'_>> {
    let (rest, version) = int32(Field::ProtocolVersion)(input)?;
    if version != PROTOCOL_VERSION {
        return fail(input, FrameErrorKind::ProtocolVersion { version });
    }
    let (rest, seq_id) = int64(Field::SeqId)(rest)?;
    let (rest, (source, tags, stream_name, data_type, debugging_info)) =
        (utf(Field::Source), utf(Field::Tags), utf(Field::StreamName), utf(Field::DataType), utf(Field::DebuggingInfo))
            .parse(rest)?;
    let (rest, record_ends) = record_ends(rest)?;
    // Offsets were checked to be >= -1, so the data length is 0..=2^31.
    let data_len = record_ends.last().map_or(0, |last| i64::from(last) + 1) as u64;
    let (rest, data) = bytes(Field::Data, data_len)(rest)?;
    Ok((rest, Chunk { seq_id, source, tags, stream_name, data_type, debugging_info, record_ends, data }))
}

/// Parses one chunk from the start of `input` and returns it with the bytes after it. For streams of chunks
/// without a count (the SocketTee `WRITABLE` format, spec §2.2): a [`FrameError::is_truncated`] error there means
/// "read more". Errors name chunk 0 and count bytes from the start of `input`.
pub fn parse_chunk(input: &[u8]) -> Result<(Chunk<'_>, &[u8]), FrameError> {
    match chunk(input) {
        Ok((rest, c)) => Ok((c, rest)),
        Err(e) => Err(into_frame_error(e, input.len(), Some(0))),
    }
}

pub(crate) fn into_frame_error(e: nom::Err<ParseErr>, input_len: usize, chunk: Option<usize>) -> FrameError {
    match e {
        nom::Err::Error(e) | nom::Err::Failure(e) => e.into_frame_error(input_len, chunk),
        // Only `complete` parsers are used; kept total all the same.
        nom::Err::Incomplete(_) => FrameError {
            chunk,
            at: input_len,
            kind: FrameErrorKind::Truncated { field: Field::Data, need: 1, left: 0 },
        },
    }
}
