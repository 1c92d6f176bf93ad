//! OpenTSDB's storage layout (spec: ingest §4, §5).
//!
//! Cells of OpenTSDB's `tsdb` table: row keys, 2/4-byte qualifiers, value widths, compacted columns; UID
//! helpers of `tsdb-uid`; and rtsd's own row encoding (a RocksDB value holding the columns of one HBase row).
//!
//! Everything here is byte-exact with what OpenTSDB 2.4 writes to HBase, so that data can move between the two
//! and so that the spec's test vectors (§5) can be asserted literally. The row encoding and [`merge_row`] are
//! rtsd's: RocksDB has no columns, so one RocksDB value carries all columns of one HBase row, and the merge
//! operator plays the part of both HBase's "same qualifier overwrites" and OpenTSDB's compaction queue. A closed
//! hour's compacted column may be stored [`packed`] (rtsd's denser form); [`expand_row`] gives back OpenTSDB's.
use std::borrow::Cow;

use smallvec::SmallVec;

pub mod packed;

/// Flag bit: the value is a floating point number (spec: ingest §4.3).
pub const FLAG_FLOAT: u8 = 0x08;
/// Mask of the "value length - 1" bits of a qualifier's flags.
pub const LENGTH_MASK: u8 = 0x07;
/// Mask of all flag bits in a qualifier's last byte.
pub const FLAGS_MASK: u8 = 0x0F;
/// Largest timestamp that is read as seconds; anything above is milliseconds (spec: ingest §2.2).
pub const MAX_SECONDS: i64 = 0xFFFF_FFFF;
/// Largest millisecond timestamp OpenTSDB accepts (13 digits).
pub const MAX_MILLISECONDS: i64 = 9_999_999_999_999;
/// Seconds covered by one row (spec: ingest §4.2): rows are hourly.
pub const MAX_TIMESPAN: i64 = 3600;
/// Width of the base time in a row key.
pub const TIMESTAMP_BYTES: usize = 4;
/// Marker of a millisecond qualifier: the top four bits of its first byte (spec: ingest §4.3).
pub const MS_BYTE_FLAG: u8 = 0xF0;
/// Meta byte closing a compacted column that mixes second and millisecond qualifiers (spec: ingest §4.6).
pub const MS_MIXED_COMPACT: u8 = 0x01;
/// rtsd's meta byte closing a cells run ([`cells_run`]): a compacted column that stands for its points written as
/// single cells. Never stored outside rtsd's own engine: any merge gives back OpenTSDB's `00` or `01`.
pub const CELLS_RUN: u8 = 0x80;
/// First byte of an append column's qualifier (spec: ingest §4.7, §4.8).
pub const APPEND_PREFIX: u8 = 0x05;
/// The one qualifier OpenTSDB appends to.
pub const APPEND_QUALIFIER: [u8; 3] = [APPEND_PREFIX, 0x00, 0x00];

/// Unsigned 64-bit mask of the bits that make a timestamp milliseconds; negative values have them set too.
const SECOND_MASK: u64 = 0xFFFF_FFFF_0000_0000;
/// Bits of a millisecond qualifier holding the offset.
const MS_OFFSET_MASK: u32 = 0x0FFF_FFC0;
const MS_FLAG: u32 = 0xF000_0000;
const MS_FLAG_BITS: u32 = 6;
const SECOND_FLAG_BITS: u32 = 4;

/// A data point's value as OpenTSDB stores it (spec: ingest §2.3, §4.4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// Stored on the fewest of 1, 2, 4 or 8 bytes.
    Int(i64),
    /// 4-byte IEEE-754 single (flags 0x0B).
    Float(f32),
    /// 8-byte IEEE-754 double (flags 0x0F).
    Double(f64),
}

/// A value's stored bytes, on the stack.
pub type ValueBytes = SmallVec<[u8; 8]>;
/// A qualifier (2 or 4 bytes for one point), on the stack.
pub type QualifierBytes = SmallVec<[u8; 4]>;

/// Why stored bytes can't be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// OpenTSDB's `IllegalDataException` (and the argument errors of its byte helpers): the text says what is
    /// wrong, in OpenTSDB's words where it has them.
    #[error("{0}")]
    IllegalData(String),
}

fn illegal(msg: impl Into<String>) -> CodecError {
    CodecError::IllegalData(msg.into())
}

impl Value {
    /// The flags nibble (length bits and float bit), e.g. 0x00, 0x01, 0x03, 0x07, 0x0B, 0x0F.
    pub fn flags(&self) -> u8 {
        match *self {
            Value::Int(v) => int_width(v) - 1,
            Value::Float(_) => FLAG_FLOAT | 0x03,
            Value::Double(_) => FLAG_FLOAT | 0x07,
        }
    }

    /// The stored bytes (big-endian, smallest integer width).
    pub fn encode(&self) -> ValueBytes {
        match *self {
            Value::Int(v) => {
                let be = v.to_be_bytes();
                SmallVec::from_slice(&be[8 - usize::from(int_width(v))..])
            }
            Value::Float(f) => SmallVec::from_slice(&f.to_be_bytes()),
            Value::Double(d) => SmallVec::from_buf(d.to_be_bytes()),
        }
    }

    /// Reads a value back from its flags and bytes, with OpenTSDB's read tolerance (spec: ingest §4.3).
    ///
    /// The legacy float fix is applied first (4-byte-flagged float on 8 bytes with 4 leading zeros), then the
    /// actual length wins over the length bits: integers must be 1, 2, 4 or 8 bytes, floats 4 or 8.
    #[inline]
    pub fn decode(flags: u8, bytes: &[u8]) -> Result<Value, CodecError> {
        // The well-formed cases, inlined into every row walk: a call returning the 32-byte result through memory
        // stalled each point's copy of it (perf: ~40% of decoding a compacted row). The rest goes the full way.
        if flags & FLAG_FLOAT != 0 {
            match *bytes {
                [a, b, c, d] => return Ok(Value::Float(f32::from_be_bytes([a, b, c, d]))),
                [a, b, c, d, e, f, g, h] if flags & LENGTH_MASK != 0x03 => {
                    return Ok(Value::Double(f64::from_be_bytes([a, b, c, d, e, f, g, h])))
                }
                _ => {}
            }
        } else {
            match *bytes {
                [a] => return Ok(Value::Int(i64::from(a as i8))),
                [a, b] => return Ok(Value::Int(i64::from(i16::from_be_bytes([a, b])))),
                [a, b, c, d] => return Ok(Value::Int(i64::from(i32::from_be_bytes([a, b, c, d])))),
                [a, b, c, d, e, f, g, h] => return Ok(Value::Int(i64::from_be_bytes([a, b, c, d, e, f, g, h]))),
                _ => {}
            }
        }
        Value::decode_in_full(flags, bytes)
    }

    /// [`Value::decode`] of every case: the legacy float fix, and the errors.
    #[cold]
    #[inline(never)]
    fn decode_in_full(flags: u8, bytes: &[u8]) -> Result<Value, CodecError> {
        let bytes = fixed_float_slice(flags, bytes)?;
        if flags & FLAG_FLOAT != 0 {
            match *bytes {
                [a, b, c, d] => Ok(Value::Float(f32::from_be_bytes([a, b, c, d]))),
                [a, b, c, d, e, f, g, h] => Ok(Value::Double(f64::from_be_bytes([a, b, c, d, e, f, g, h]))),
                _ => Err(illegal(format!(
                    "Floating point value is not 4 or 8 bytes: {} bytes, flags=0x{flags:x}",
                    bytes.len()
                ))),
            }
        } else {
            match *bytes {
                [a] => Ok(Value::Int(i64::from(a as i8))),
                [a, b] => Ok(Value::Int(i64::from(i16::from_be_bytes([a, b])))),
                [a, b, c, d] => Ok(Value::Int(i64::from(i32::from_be_bytes([a, b, c, d])))),
                [a, b, c, d, e, f, g, h] => Ok(Value::Int(i64::from_be_bytes([a, b, c, d, e, f, g, h]))),
                _ => Err(illegal(format!(
                    "Integer value is not 1, 2, 4 or 8 bytes: {} bytes, flags=0x{flags:x}",
                    bytes.len()
                ))),
            }
        }
    }

    /// The value as a double, the common type queries aggregate in.
    pub fn as_f64(&self) -> f64 {
        match *self {
            Value::Int(v) => v as f64,
            Value::Float(f) => f64::from(f),
            Value::Double(d) => d,
        }
    }

    /// Whether the value was written as an integer (queries keep integer results integer, like OpenTSDB).
    pub fn is_integer(&self) -> bool {
        matches!(self, Value::Int(_))
    }

    /// The value OpenTSDB stores for a parsed double: single precision when that loses nothing (spec: ingest
    /// §2.3, `Tags.fitsInFloat`), else double.
    pub fn from_java_double(d: f64) -> Value {
        if crate::number::fits_in_float(d) {
            Value::Float(d as f32)
        } else {
            Value::Double(d)
        }
    }
}

/// Bytes needed by the smallest two's-complement encoding of `v` (spec: ingest §2.3 width table).
fn int_width(v: i64) -> u8 {
    if i8::try_from(v).is_ok() {
        1
    } else if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

/// OpenTSDB's `fixQualifierFlags`: rewrites the length bits of a qualifier's last byte to the value's actual
/// length, because OpenTSDB 1.x wrote floats flagged 8 bytes that were really 4 (spec: ingest §4.3, §5.3 V11).
///
/// `flags` may be the whole last byte: bits above the length bits (float bit, offset bits) are kept. A length
/// outside 1..=8 cannot be expressed; its low three bits are used, and the value will fail to decode anyway.
pub fn fix_qualifier_flags(flags: u8, value_len: usize) -> u8 {
    (flags & !LENGTH_MASK) | ((value_len.wrapping_sub(1) as u8) & LENGTH_MASK)
}

/// OpenTSDB's `fixFloatingPointValue`: a float flagged 4 bytes but holding 8 whose first 4 are zero is the
/// legacy 1.x encoding and reads as its last 4 bytes; non-zero leading bytes mean corruption (spec: ingest
/// §4.3, §5.3 V12-V14). Anything else is returned unchanged.
pub fn fix_floating_point_value(flags: u8, value: &[u8]) -> Result<ValueBytes, CodecError> {
    fixed_float_slice(flags, value).map(SmallVec::from_slice)
}

#[inline]
fn fixed_float_slice(flags: u8, value: &[u8]) -> Result<&[u8], CodecError> {
    if flags & FLAG_FLOAT == 0 || flags & LENGTH_MASK != 0x03 || value.len() != 8 {
        return Ok(value);
    }
    if value[..4] == [0, 0, 0, 0] {
        Ok(&value[4..])
    } else {
        Err(illegal(format!(
            "Corrupted floating point value: {} flags=0x{:x} -- first 4 bytes are expected to be zeros.",
            java_byte_array(value),
            flags
        )))
    }
}

/// Java's `Arrays.toString(byte[])`, the way OpenTSDB prints bytes in its error messages.
fn java_byte_array(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|&b| (b as i8).to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// Whether OpenTSDB reads a timestamp as milliseconds: any of the upper 32 bits set, which includes every
/// negative value (spec: ingest §2.2; S17 relies on the negative case).
fn is_ms_timestamp(timestamp: i64) -> bool {
    (timestamp as u64) & SECOND_MASK != 0
}

/// A timestamp in seconds or milliseconds (as OpenTSDB tells them apart) in milliseconds.
pub fn timestamp_ms(timestamp: i64) -> i64 {
    if is_ms_timestamp(timestamp) {
        timestamp
    } else {
        timestamp.saturating_mul(1000)
    }
}

/// The unwrapped hour, in seconds, of a timestamp in seconds or milliseconds (Java's truncating arithmetic).
fn base_seconds(timestamp: i64) -> i64 {
    let secs = if is_ms_timestamp(timestamp) { timestamp / 1000 } else { timestamp };
    secs - secs % MAX_TIMESPAN
}

/// The hour a timestamp (seconds or milliseconds, by magnitude) belongs to, in seconds, as written into the row
/// key: low 32 bits (wraps past 2106, spec: ingest §4.2).
pub fn base_time(timestamp: i64) -> u32 {
    base_seconds(timestamp) as u32
}

/// The qualifier of one point (spec: ingest §4.3, §5.1).
///
/// Seconds: `(offset_s << 4) | flags` on 2 bytes; milliseconds: `0xF0000000 | (offset_ms << 6) | flags` on 4
/// bytes, the offset taken from the unwrapped hour so that timestamps past 2106 keep a valid offset (W14).
/// Only the low four bits of `flags` are used.
pub fn build_qualifier(timestamp: i64, flags: u8) -> QualifierBytes {
    let flags = flags & FLAGS_MASK;
    let base = base_seconds(timestamp);
    if is_ms_timestamp(timestamp) {
        let offset = timestamp.wrapping_sub(base.wrapping_mul(1000));
        let q = (offset.wrapping_shl(MS_FLAG_BITS) as u32) | MS_FLAG | u32::from(flags);
        SmallVec::from_slice(&q.to_be_bytes())
    } else {
        let offset = timestamp - base;
        let q = (offset.wrapping_shl(SECOND_FLAG_BITS) as u16) | u16::from(flags);
        SmallVec::from_slice(&q.to_be_bytes())
    }
}

/// Whether a qualifier (or a qualifier inside a compacted column) starting with this byte is a 4-byte
/// millisecond one (spec: ingest §4.3, §5.2 D17).
pub fn is_ms_qualifier(first_byte: u8) -> bool {
    first_byte & MS_BYTE_FLAG == MS_BYTE_FLAG
}

/// OpenTSDB's bounds check before reading a qualifier at `index`: at least two bytes must remain.
// Inlined, with its errors built out of line: every point of every row read passes here.
#[inline]
fn validate_index(q: &[u8], index: usize) -> Result<(), CodecError> {
    if index + 1 >= q.len() {
        return Err(index_out_of_bounds(index, q.len()));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn index_out_of_bounds(index: usize, len: usize) -> CodecError {
    illegal(format!("Offset of [{index}] is out of bounds for the qualifier length of [{len}]"))
}

#[cold]
#[inline(never)]
fn ms_qualifier_too_short() -> CodecError {
    illegal("Detected a millisecond flag but qualifier length is too short")
}

/// Length (2 or 4) of the qualifier at `index` of a single or compacted qualifier (spec: ingest §5.2 D12-D15).
#[inline]
pub fn qualifier_len_at(q: &[u8], index: usize) -> Result<usize, CodecError> {
    validate_index(q, index)?;
    if is_ms_qualifier(q[index]) {
        if index + 4 > q.len() {
            return Err(ms_qualifier_too_short());
        }
        Ok(4)
    } else {
        Ok(2)
    }
}

/// The offset in milliseconds of one point's qualifier as [`extract_qualifier`], a compacted column's walk or a
/// fixed single cell gives it: 4 bytes with the millisecond flag, else 2 (spec: ingest §5.2 D3-D10). Without the
/// checks those already made.
#[inline]
fn point_offset_ms(q: &[u8]) -> u32 {
    match *q {
        [a, b, c, d] => (u32::from_be_bytes([a, b, c, d]) & MS_OFFSET_MASK) >> MS_FLAG_BITS,
        [a, b, ..] => u32::from(u16::from_be_bytes([a, b]) >> SECOND_FLAG_BITS) * 1000,
        _ => 0,
    }
}

/// The 2 or 4 bytes of the qualifier at `index` (spec: ingest §5.2 D8, D9).
#[inline]
pub fn extract_qualifier(q: &[u8], index: usize) -> Result<&[u8], CodecError> {
    let len = qualifier_len_at(q, index)?;
    Ok(&q[index..index + len])
}

/// Offset in milliseconds from the row's base time of the qualifier at `index` (spec: ingest §5.2 D3-D10).
pub fn qualifier_offset_ms(q: &[u8], index: usize) -> Result<u32, CodecError> {
    // extract_qualifier gives 2 bytes, or 4 with the millisecond flag: what point_offset_ms reads.
    Ok(point_offset_ms(extract_qualifier(q, index)?))
}

/// Absolute time in milliseconds of the qualifier at `index` in a row whose base time is `base_time`
/// (spec: ingest §5.2 D1, D2, D18).
pub fn qualifier_timestamp_ms(base_time: u32, q: &[u8], index: usize) -> Result<i64, CodecError> {
    Ok(i64::from(base_time) * 1000 + i64::from(qualifier_offset_ms(q, index)?))
}

/// The flags nibble of the qualifier at `index` (spec: ingest §5.2 D16).
pub fn qualifier_flags_at(q: &[u8], index: usize) -> Result<u8, CodecError> {
    let one = extract_qualifier(q, index)?;
    Ok(one[one.len() - 1] & FLAGS_MASK)
}

/// Value length, in bytes, that a qualifier's flags announce: length bits + 1 (spec: ingest §5.2 D11).
pub fn value_len_from_flags(flags: u8) -> usize {
    usize::from(flags & LENGTH_MASK) + 1
}

// ---------------------------------------------------------------------------------------------------------------
// Row keys and salt (spec: ingest §4.2, §5.7)

/// `tsd.storage.salt.width` and `tsd.storage.salt.buckets`: how row keys are spread over key ranges.
///
/// Validation (width 0..=8, buckets >= 1, spec §5.9 T18) belongs to configuration; with `buckets == 0` the
/// functions here use bucket 0 where OpenTSDB would throw `ArithmeticException` (S15), so they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaltConfig {
    /// Salt bytes in front of every data row key; 0 disables salting.
    pub width: usize,
    /// Number of distinct salt values (key ranges) series are spread over.
    pub buckets: u32,
}

impl SaltConfig {
    /// OpenTSDB's default: no salt (width 0; the 20 buckets only matter once a width is set).
    pub const NONE: SaltConfig = SaltConfig { width: 0, buckets: 20 };
}

impl Default for SaltConfig {
    fn default() -> Self {
        SaltConfig::NONE
    }
}

/// Java's `Arrays.hashCode(byte[])` over a byte sequence: `h = 31·h + b` with signed bytes and 32-bit wrap.
pub fn java_bytes_hash<'a>(bytes: impl IntoIterator<Item = &'a u8>) -> i32 {
    bytes.into_iter().fold(1i32, |h, &b| h.wrapping_mul(31).wrapping_add(i32::from(b as i8)))
}

/// The salt bucket of a series from its metric UID and its tag pairs as they appear in the key (spec: ingest
/// §4.2 steps 1-3): `|hash % buckets|` with Java's remainder. `buckets == 0` gives 0 (see [`SaltConfig`]).
pub fn salt_bucket(metric: &[u8], tags: &[u8], buckets: u32) -> u32 {
    let h = i64::from(java_bytes_hash(metric.iter().chain(tags)));
    match h.checked_rem(i64::from(buckets)) {
        Some(m) => m.unsigned_abs() as u32,
        None => 0,
    }
}

/// OpenTSDB's `getSaltBytes`: the bucket big-endian in `width` bytes. Java shifts an `int`, so shift counts
/// wrap at 32 and widths above 4 repeat the low bytes (`00 00 00 14 00 00 00 14` for bucket 20 on 8 bytes);
/// reproduced because it is what such tables hold.
pub fn salt_bytes(bucket: i32, width: usize) -> SmallVec<[u8; 8]> {
    let mut out: SmallVec<[u8; 8]> = SmallVec::from_elem(0, width);
    for (i, byte) in out.iter_mut().rev().enumerate() {
        let shift = ((i * 8) % 32) as u32;
        *byte = ((bucket as u32) >> shift) as u8;
    }
    out
}

/// OpenTSDB's `prefixKeyWithSalt`: overwrites the first `salt.width` bytes of a complete row key with the
/// series' salt (spec: ingest §4.2, §5.7 S1-S13).
///
/// Left unchanged: keys when salting is off, keys too short to hold salt and metric, the global-annotation
/// row (metric bytes all zero), and keys too short to hold the base time (OpenTSDB would throw on those).
pub fn prefix_salt(key: &mut [u8], salt: &SaltConfig, metric_width: usize) {
    let sw = salt.width;
    if sw == 0 || key.len() < sw + metric_width + TIMESTAMP_BYTES {
        return;
    }
    let metric = &key[sw..sw + metric_width];
    if metric.iter().all(|&b| b == 0) {
        return;
    }
    let bucket = salt_bucket(metric, &key[sw + metric_width + TIMESTAMP_BYTES..], salt.buckets);
    let bytes = salt_bytes(bucket as i32, sw);
    key[..sw].copy_from_slice(&bytes);
}

/// The row key of a series' hour: salt, metric UID, base time, tag pairs sorted by the unsigned bytes of
/// `tagk ‖ tagv` (by UID, not by name: spec: ingest §4.2, §5.4).
pub fn row_key(salt: &SaltConfig, metric: &[u8], base_time: u32, tags: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut sorted: SmallVec<[(&[u8], &[u8]); 8]> = SmallVec::from_slice(tags);
    sorted.sort_by(|a, b| a.0.iter().chain(a.1).cmp(b.0.iter().chain(b.1)));
    let tags_len: usize = sorted.iter().map(|(k, v)| k.len() + v.len()).sum();
    let mut key = Vec::with_capacity(salt.width + metric.len() + TIMESTAMP_BYTES + tags_len);
    key.resize(salt.width, 0);
    key.extend_from_slice(metric);
    key.extend_from_slice(&base_time.to_be_bytes());
    for (k, v) in sorted {
        key.extend_from_slice(k);
        key.extend_from_slice(v);
    }
    prefix_salt(&mut key, salt, metric.len());
    key
}

/// The TSUID (metric ‖ tag pairs, the series' identity in APIs and `tsdb-meta`) of a row key (spec: ingest §4.2,
/// §5.7 S19). Bytes a short key lacks are simply absent from the result.
pub fn tsuid_from_row_key(key: &[u8], salt_width: usize, metric_width: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len());
    tsuid_from_row_key_into(key, salt_width, metric_width, &mut out);
    out
}

/// [`tsuid_from_row_key`] into `out` (cleared first), for loops that reuse one buffer.
pub fn tsuid_from_row_key_into(key: &[u8], salt_width: usize, metric_width: usize, out: &mut Vec<u8>) {
    let metric_end = (salt_width + metric_width).min(key.len());
    out.clear();
    out.extend_from_slice(key.get(salt_width..metric_end).unwrap_or_default());
    out.extend_from_slice(key.get(metric_end + TIMESTAMP_BYTES..).unwrap_or_default());
}

/// OpenTSDB's `rowKeyFromTSUID`: the row key of a series at a timestamp (seconds or ms), salted (spec: ingest
/// §5.7 S16-S18). The TSUID's tag order is kept as given.
pub fn row_key_from_tsuid(tsuid: &[u8], timestamp: i64, salt: &SaltConfig, metric_width: usize) -> Vec<u8> {
    let split = metric_width.min(tsuid.len());
    let mut key = Vec::with_capacity(salt.width + tsuid.len() + TIMESTAMP_BYTES);
    key.resize(salt.width, 0);
    key.extend_from_slice(&tsuid[..split]);
    key.extend_from_slice(&base_time(timestamp).to_be_bytes());
    key.extend_from_slice(&tsuid[split..]);
    prefix_salt(&mut key, salt, metric_width);
    key
}

/// The base time (seconds, unsigned) written in a row key. A key too short to hold it reads as 0: keys of
/// the data table are always long enough, and callers scanning them check lengths first.
pub fn row_base_time(key: &[u8], salt_width: usize, metric_width: usize) -> u32 {
    let at = salt_width + metric_width;
    match key.get(at..at + TIMESTAMP_BYTES) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// UIDs (spec: ingest §4.10, §5.8)

/// A UID as APIs print it: upper-case hex, two digits per byte (spec: ingest §5.8 U1).
pub fn uid_to_string(uid: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(uid.len() * 2);
    for &b in uid {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0x0F)]));
    }
    s
}

/// OpenTSDB's `stringToUid`: hex (either case) to bytes, left-padded with `0` digits to `width` bytes when a
/// width is given, else to an even digit count (spec: ingest §5.8 U2-U4). Longer strings are not truncated.
pub fn string_to_uid(s: &str, width: Option<usize>) -> Result<Vec<u8>, CodecError> {
    if s.is_empty() {
        return Err(illegal("UID was empty"));
    }
    let digits = s.len();
    let pad = match width {
        Some(w) if w > 0 => (w * 2).saturating_sub(digits),
        _ => digits % 2,
    };
    if !(pad + digits).is_multiple_of(2) {
        return Err(illegal(format!("hexBinary needs to be even-length: {s}")));
    }
    let nibble = |c: u8| -> Result<u8, CodecError> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(illegal(format!("contains illegal character for hexBinary: {s}"))),
        }
    };
    let padded = std::iter::repeat_n(b'0', pad).chain(s.bytes());
    let mut out = Vec::with_capacity((pad + digits) / 2);
    let mut high = None;
    for c in padded {
        let n = nibble(c)?;
        match high.take() {
            None => high = Some(n),
            Some(h) => out.push((h << 4) | n),
        }
    }
    Ok(out)
}

/// A UID's numeric id: its bytes big-endian, unsigned (spec: ingest §5.8 U5). Only the last 8 bytes of a
/// longer input count.
pub fn uid_to_long(uid: &[u8]) -> u64 {
    uid.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// OpenTSDB's `longToUID`: an id on exactly `width` bytes, refused when it does not fit (spec: ingest §5.8 U6).
pub fn long_to_uid(uid: u64, width: usize) -> Result<Vec<u8>, CodecError> {
    if width > 8 {
        return Err(illegal(format!("UID width {width} is more than 8 bytes")));
    }
    let be = uid.to_be_bytes();
    if be[..8 - width].iter().any(|&b| b != 0) {
        return Err(illegal(format!("UID {} was too large for {width} bytes", uid as i64)));
    }
    Ok(be[8 - width..].to_vec())
}

/// Largest UID on `width` bytes: 2^(8·width) − 1, except that 8 bytes give `i64::MAX` (ids are Java longs,
/// and the id counter is a signed 8-byte integer). Widths above 8 give the same as 8; [`checked_max_uid`]
/// refuses them like OpenTSDB (spec: ingest §5.3 V15).
pub fn max_uid(width: usize) -> u64 {
    checked_max_uid(width.min(8)).unwrap_or(i64::MAX as u64)
}

/// OpenTSDB's `getMaxUnsignedValueOnBytes`: [`max_uid`] with widths above 8 refused (spec: ingest §5.3 V15).
pub fn checked_max_uid(width: usize) -> Result<u64, CodecError> {
    match width {
        0..=7 => Ok((1u64 << (width * 8)) - 1),
        8 => Ok(i64::MAX as u64),
        _ => Err(illegal(format!("Width must be between 0 and 8 bytes: {width}"))),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// rtsd's row encoding: the columns of one HBase row in one RocksDB value

/// One HBase cell of a row: what a column family holds at (row, qualifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column<'a> {
    /// The column qualifier (family `t` implied): data point, compacted, or odd-length special column.
    pub qualifier: &'a [u8],
    /// The cell value.
    pub value: &'a [u8],
}

fn push_leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Appends one column to a row value: `LEB128(len) qualifier LEB128(len) value`. A RocksDB merge operand is
/// such a list too, so a point write is one `push_column` into a reused buffer.
pub fn push_column(out: &mut Vec<u8>, qualifier: &[u8], value: &[u8]) {
    push_leb128(out, qualifier.len());
    out.extend_from_slice(qualifier);
    push_leb128(out, value.len());
    out.extend_from_slice(value);
}

/// Iterates the columns of a row value in stored order; see [`columns`].
#[derive(Debug, Clone)]
pub struct Columns<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Columns<'a> {
    // Inlined across crates: row readers call this for every cell (a query over rollups, millions of times).
    #[inline]
    fn take_field(&mut self) -> Result<&'a [u8], CodecError> {
        // Almost every field is shorter than 128 bytes: a one-byte length (qualifiers and values always are).
        if let Some((&byte, rest)) = self.rest.split_first() {
            if byte < 0x80 && usize::from(byte) <= rest.len() {
                let (field, rest) = rest.split_at(usize::from(byte));
                self.rest = rest;
                return Ok(field);
            }
        }
        let mut len: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some((&byte, rest)) = self.rest.split_first() else {
                return Err(illegal("Truncated row: length cut short"));
            };
            self.rest = rest;
            if shift >= 63 && byte > 1 {
                return Err(illegal("Corrupted row: length does not fit 64 bits"));
            }
            len |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let len = usize::try_from(len).map_err(|_| illegal("Corrupted row: length too large"))?;
        if len > self.rest.len() {
            return Err(illegal(format!("Truncated row: field of {len} bytes but only {} left", self.rest.len())));
        }
        let (field, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(field)
    }
}

impl<'a> Iterator for Columns<'a> {
    type Item = Result<Column<'a>, CodecError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let column = self.take_field().and_then(|qualifier| Ok(Column { qualifier, value: self.take_field()? }));
        // After a framing error nothing that follows can be trusted: stop rather than resynchronise on garbage.
        self.failed = column.is_err();
        Some(column)
    }
}

/// The columns of a row value, in stored order. Truncated or corrupt framing yields one error and ends.
pub fn columns(row: &[u8]) -> Columns<'_> {
    Columns { rest: row, failed: false }
}

/// What a merge produced, with the duplicate counts OpenTSDB reports as `compaction.duplicates`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MergedRow {
    /// The row value (columns sorted by qualifier).
    pub row: Vec<u8>,
    /// Points at the same instant with equal flags and bytes, collapsed (`type=identical`).
    pub identical_duplicates: u32,
    /// Points at the same instant that differ (`type=variant`): resolved with `fix_duplicates`, else left.
    pub variant_duplicates: u32,
    /// Data-point columns that could not be split or fixed; when non-zero the row was left uncompacted.
    pub corrupt_columns: u32,
}

/// A data point read from a row.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPoint {
    /// Absolute time in milliseconds.
    pub timestamp_ms: i64,
    /// Its qualifier after OpenTSDB's fixes: 2 bytes for a second point, 4 for a millisecond one.
    pub qualifier: QualifierBytes,
    /// The decoded value, read with OpenTSDB's tolerance ([`Value::decode`]).
    pub value: Value,
}

/// One point on its way through a merge: where it sits in time and in write order.
#[derive(Debug, Clone)]
struct Piece<'a> {
    offset_ms: u32,
    /// Write order of the column it came from: later columns replace earlier ones when fixing duplicates.
    seq: usize,
    qualifier: QualifierBytes,
    value: &'a [u8],
}

impl Piece<'_> {
    fn flags(&self) -> u8 {
        self.qualifier.last().map_or(0, |b| b & FLAGS_MASK)
    }
}

/// A column as HBase keeps it after overwrites and appends, with the write order of its last write.
type Cell<'a> = (&'a [u8], Cow<'a, [u8]>, usize);

/// Whether an even-length qualifier is one point rather than a compacted column.
fn is_single(q: &[u8]) -> bool {
    q.len() == 2 || (q.len() == 4 && is_ms_qualifier(q[0]))
}

fn is_append(q: &[u8]) -> bool {
    q.len() % 2 == 1 && q.first() == Some(&APPEND_PREFIX)
}

/// A single cell with OpenTSDB's reader fixes applied (spec: ingest §4.3, §5.6 C3/C4): legacy float bytes
/// trimmed, then the length bits set from the actual length.
fn fixed_single<'v>(q: &[u8], value: &'v [u8]) -> Result<(QualifierBytes, &'v [u8]), CodecError> {
    let last = q.len() - 1;
    let value = fixed_float_slice(q[last], value)?;
    if value.is_empty() || value.len() > 8 {
        return Err(illegal(format!("Data point value of {} bytes cannot be stored", value.len())));
    }
    let mut fixed = QualifierBytes::from_slice(q);
    fixed[last] = fix_qualifier_flags(q[last], value.len());
    Ok((fixed, value))
}

/// Walks the points of a compacted column: each qualifier's flags give its value length, and exactly the meta
/// byte must be left over (spec: ingest §4.6).
fn walk_compacted<'a>(
    quals: &[u8],
    value: &'a [u8],
    mut each: impl FnMut(&[u8], &'a [u8]) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    let Some(expected) = value.len().checked_sub(1) else {
        return Err(corrupted_value(0, 0));
    };
    let values = &value[..expected];
    let (mut qi, mut vi) = (0, 0);
    while qi < quals.len() {
        let q = extract_qualifier(quals, qi)?;
        let vlen = value_len_from_flags(q[q.len() - 1]);
        let Some(v) = values.get(vi..vi + vlen) else {
            return Err(corrupted_value(vi, expected));
        };
        each(q, v)?;
        qi += q.len();
        vi += vlen;
    }
    if vi != expected {
        return Err(corrupted_value(vi, expected));
    }
    Ok(())
}

fn corrupted_value(consumed: usize, expected: usize) -> CodecError {
    illegal(format!(
        "Corrupted value: couldn't break down into individual values (consumed {consumed} bytes, but was \
         expecting to consume {expected})"
    ))
}

/// Splits a compacted column into its points, as OpenTSDB's readers do (spec: ingest §4.6): walk the
/// qualifier, take length-bits + 1 value bytes per point, and require that exactly the final meta byte is left
/// ("Corrupted value" otherwise).
pub fn split_compacted(qualifier: &[u8], value: &[u8]) -> Result<Vec<(QualifierBytes, ValueBytes)>, CodecError> {
    let mut out = Vec::with_capacity(qualifier.len() / 2);
    walk_compacted(qualifier, value, |q, v| {
        out.push((QualifierBytes::from_slice(q), SmallVec::from_slice(v)));
        Ok(())
    })?;
    Ok(out)
}

/// The records of an append column (spec: ingest §4.7): `qualifier ‖ value` in arrival order, returned sorted
/// by time with the later record winning at equal offsets (A8, A9).
pub fn split_append(value: &[u8]) -> Result<Vec<(QualifierBytes, ValueBytes)>, CodecError> {
    let mut records: Vec<(u32, QualifierBytes, &[u8])> = Vec::new();
    let mut at = 0;
    while at < value.len() {
        let q = extract_qualifier(value, at).map_err(|e| illegal(format!("Corrupted append column: {e}")))?;
        let vlen = value_len_from_flags(q[q.len() - 1]);
        let start = at + q.len();
        let Some(v) = value.get(start..start + vlen) else {
            return Err(illegal(format!(
                "Corrupted append column: record at {at} needs {vlen} value bytes, {} left",
                value.len() - start
            )));
        };
        records.push((qualifier_offset_ms(q, 0)?, QualifierBytes::from_slice(q), v));
        at = start + vlen;
    }
    // Stable sort keeps arrival order among equal offsets, so the last of each run is the latest record.
    records.sort_by_key(|r| r.0);
    let mut out: Vec<(QualifierBytes, ValueBytes)> = Vec::with_capacity(records.len());
    let mut last_offset = None;
    for (offset, q, v) in records {
        if last_offset == Some(offset) {
            out.pop();
        }
        last_offset = Some(offset);
        out.push((q, SmallVec::from_slice(v)));
    }
    Ok(out)
}

/// Calls `each` with the points of one data-point column (even-length qualifier), in column order, fixed as
/// OpenTSDB's compaction and readers fix them. On an error some points may have been given already.
/// The qualifier is lent, not built: a walk of a compacted column gives each point's bytes of it.
pub fn each_point<'a>(
    q: &[u8],
    value: &'a [u8],
    mut each: impl FnMut(&[u8], &'a [u8]) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    if q.is_empty() {
        return Err(illegal("Empty data point qualifier"));
    }
    if is_single(q) {
        let (qualifier, value) = fixed_single(q, value)?;
        return each(&qualifier, value);
    }
    walk_compacted(q, value, each)
}

/// The points of one data-point column (even-length qualifier), in column order, fixed as OpenTSDB's
/// compaction and readers fix them.
fn explode<'a>(q: &[u8], value: &'a [u8], seq: usize, out: &mut Vec<Piece<'a>>) -> Result<(), CodecError> {
    let start = out.len();
    let result = each_point(q, value, |qualifier, v| {
        out.push(Piece {
            offset_ms: point_offset_ms(qualifier),
            seq,
            qualifier: QualifierBytes::from_slice(qualifier),
            value: v,
        });
        Ok(())
    });
    if result.is_err() {
        // A column is used whole or not at all.
        out.truncate(start);
    }
    result
}

/// The body of rtsd's RocksDB merge operator for data rows: HBase's write semantics followed by OpenTSDB's
/// compaction (spec: ingest §4.5, §4.6, §4.9, §5.6).
///
/// `existing` then `operands` (oldest first) are row values. Their columns are applied in order: a column
/// replaces an earlier one with exactly the same qualifier (HBase overwrite, W8), except append columns
/// (odd length, prefix `0x05`) whose values are concatenated, like HBase `Append`. Then the row is compacted:
/// every data-point column (even-length qualifier, single or compacted) is split into points, ordered by
/// millisecond offset; points at the same offset are duplicates: identical flags and bytes collapse (earlier
/// kept), differing ones are variants, and with `fix_duplicates` the later-written one wins. The result holds
/// one compacted column (qualifiers ‖, values ‖ meta byte `00`, or `01` when seconds and milliseconds mix), or
/// the single cell when one point is left, plus the other odd-length columns as they are.
///
/// The row is left uncompacted (every surviving column as written, sorted by qualifier) when OpenTSDB would
/// not rewrite it either: variants without `fix_duplicates` (OpenTSDB's compaction fails on them, C5/C7), an
/// append column present (C9), or a data-point column that cannot be split (counted in `corrupt_columns`).
/// Merging a result again changes nothing.
///
/// A packed column ([`packed`], a row stored before) takes part as the compacted column it was packed
/// from, so late points merge into a packed row exactly as into the compacted one; the result is never packed
/// (the store packs it, see [`pack_row`]).
///
/// Errors only when the row framing itself is broken ([`columns`]); the caller must then keep the inputs.
pub fn merge_row(existing: Option<&[u8]>, operands: &[&[u8]], fix_duplicates: bool) -> Result<MergedRow, CodecError> {
    // A packed input (a row stored before) takes part as the compacted column it stands for. One that
    // cannot be unpacked stays as it is: its empty-qualifier column is then a corrupt data column (below).
    let inputs: Vec<Cow<'_, [u8]>> = existing
        .into_iter()
        .chain(operands.iter().copied())
        .map(|input| expand_row(input).unwrap_or(Cow::Borrowed(input)))
        .collect();
    if let Some(row) = merge_in_time_order(&inputs, false) {
        return Ok(MergedRow { row, ..MergedRow::default() });
    }
    // Cells runs take part as the cells they stand for: a later cell at one of their instants overwrites it.
    let inputs: Vec<Cow<'_, [u8]>> = inputs.into_iter().map(runs_as_cells).collect();
    merge_columns(&inputs, fix_duplicates)
}

/// A row value with each [`cells_run`] column written out as the single cells it stands for.
fn runs_as_cells(input: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    if !has_cells_run(&input) {
        return input;
    }
    let mut out = Vec::with_capacity(input.len() * 2);
    for c in columns(&input) {
        let Ok(Column { qualifier, value }) = c else { return input };
        if is_cells_run(qualifier, value) {
            let split = each_point(qualifier, value, |q, v| {
                push_column(&mut out, q, v);
                Ok(())
            });
            if split.is_err() {
                return input;
            }
        } else {
            push_column(&mut out, qualifier, value);
        }
    }
    Cow::Owned(out)
}

fn is_cells_run(qualifier: &[u8], value: &[u8]) -> bool {
    qualifier.len().is_multiple_of(2) && !is_single(qualifier) && value.last() == Some(&CELLS_RUN)
}

/// Whether a row value holds a [`cells_run`] column: what must go through a merge before leaving rtsd's engine
/// (an HBase write), which gives OpenTSDB's compacted column for it.
pub fn has_cells_run(row: &[u8]) -> bool {
    columns(row).any(|c| c.is_ok_and(|c| is_cells_run(c.qualifier, c.value)))
}

/// A row fragment's cells (a flush's points of one row, in arrival order) as one cells run, when there are
/// several and their points are in strictly increasing time; `None` otherwise (one point, an overwrite or a
/// point out of order: the cells stay). A cells run is the compacted column the row merge would make of the
/// cells, closed by [`CELLS_RUN`] instead of OpenTSDB's meta byte: merges of rows in time order copy it whole
/// instead of taking it a cell at a time (issue 22 item 5: ~28% of the first query's CPU after B's burst, a
/// quarter of a fold's), and any other merge takes it as the cells it stands for, so a later cell at one of its
/// instants overwrites the point as HBase overwrites a cell (spec: ingest §4.5 W8). Every merge gives exactly
/// what the same merge of the cells gives.
pub fn cells_run(cells: &[u8]) -> Option<Vec<u8>> {
    merge_in_time_order(&[Cow::Borrowed(cells)], true)
}

/// [`merge_row`]'s common case, in one pass: data-point columns only, whose points, read input after input and
/// column after column, are in strictly increasing time (fragments of a series written as time went on, a
/// compacted row and the points after it). Then no cell overwrites another, no point duplicates another and
/// nothing needs sorting, so the general merge would give one compacted column of the points in that order;
/// this builds it without sorting the cells and the points (most of a merge's cost). `None` for anything else,
/// which the general merge handles.
/// With `run`, the inputs must be single cells, a column of several points is closed as a cells run
/// ([`cells_run`]), and one point gives `None`.
fn merge_in_time_order(inputs: &[Cow<'_, [u8]>], run: bool) -> Option<Vec<u8>> {
    let capacity: usize = inputs.iter().map(|input| input.len()).sum();
    let mut column = CompactedColumn {
        qualifiers: Vec::with_capacity(capacity / 3),
        values: Vec::with_capacity(capacity / 2),
        ..CompactedColumn::default()
    };
    let mut last_offset: Option<u32> = None;
    // Adds a point after the last one, or says it is not after it.
    let take = |column: &mut CompactedColumn, last_offset: &mut Option<u32>, qualifier: &[u8], value: &[u8]| {
        let offset = point_offset_ms(qualifier);
        if last_offset.is_some_and(|last| offset <= last) {
            return false;
        }
        *last_offset = Some(offset);
        column.push(qualifier, value);
        true
    };
    for input in inputs {
        for c in columns(input) {
            let Column { qualifier, value } = c.ok()?;
            match *qualifier {
                // A second's single cell whose length bits match its value (the series table writes nothing
                // else): the cell `fixed_single` gives back unchanged, taken without building its qualifier
                // (perf: building it was ~half of merging a flush's fragment).
                [_, flags] if usize::from(flags & LENGTH_MASK) + 1 == value.len() => {
                    if !take(&mut column, &mut last_offset, qualifier, value) {
                        return None;
                    }
                }
                _ if qualifier.len() % 2 == 1 => return None,
                // A compacted column (a flush's fragment, a row compacted before): its points copied whole once
                // its qualifiers say they are in time order after the last point taken, as a walk would take them.
                // A run is made of cells only: a compacted column is not a cell, and its points stay a column.
                _ if !is_single(qualifier) && run => return None,
                _ if !is_single(qualifier) => {
                    let span = in_order_span(qualifier, value)?;
                    if last_offset.is_some_and(|last| span.first <= last) {
                        return None;
                    }
                    last_offset = Some(span.last);
                    column.push_span(qualifier, &value[..value.len() - 1], &span);
                }
                _ => each_point(qualifier, value, |q, v| {
                    // A run holds its cells as written: one that reading fixes (length bits that do not match
                    // its value, a legacy float) would come back from the run as its fixed form, which another
                    // cell at its qualifier no longer overwrites.
                    if run && (q != qualifier || v.len() != value.len()) {
                        return Err(illegal("a cell a run would change"));
                    }
                    if take(&mut column, &mut last_offset, q, v) {
                        Ok(())
                    } else {
                        Err(illegal("not in time order"))
                    }
                })
                .ok()?,
            }
        }
    }
    if column.points == 0 {
        return None;
    }
    if run && column.points < 2 {
        return None;
    }
    let (qualifiers, mut values) = column.finish();
    if run {
        *values.last_mut()? = CELLS_RUN;
    }
    let mut row = Vec::with_capacity(qualifiers.len() + values.len() + 6);
    push_column(&mut row, &qualifiers, &values);
    Some(row)
}

/// What [`in_order_span`] found in a compacted column whose points are in strictly increasing time.
struct Span {
    first: u32,
    last: u32,
    points: usize,
    seconds: bool,
    millis: bool,
}

/// The time span of a compacted column's points when a walk of it ([`walk_compacted`]) gives every point and
/// they are in strictly increasing time; `None` otherwise (the walk's errors included).
fn in_order_span(quals: &[u8], value: &[u8]) -> Option<Span> {
    let mut span = Span { first: 0, last: 0, points: 0, seconds: false, millis: false };
    walk_compacted(quals, value, |q, _| {
        let offset = point_offset_ms(q);
        if span.points > 0 && offset <= span.last {
            return Err(illegal("not in time order"));
        }
        if span.points == 0 {
            span.first = offset;
        }
        span.last = offset;
        span.points += 1;
        if q.len() == 4 {
            span.millis = true;
        } else {
            span.seconds = true;
        }
        Ok(())
    })
    .ok()?;
    (span.points > 0).then_some(span)
}

/// One compacted column built from points in time order (spec: ingest §4.6): the qualifiers concatenated, the
/// values concatenated, and after them the meta byte once the column holds more than one point (`01` when it
/// mixes second and millisecond qualifiers, else `00`).
#[derive(Default)]
struct CompactedColumn {
    qualifiers: Vec<u8>,
    values: Vec<u8>,
    points: usize,
    seconds: bool,
    millis: bool,
}

impl CompactedColumn {
    fn push(&mut self, qualifier: &[u8], value: &[u8]) {
        if qualifier.len() == 4 {
            self.millis = true;
        } else {
            self.seconds = true;
        }
        // Copies of a known length: no call to `memcpy` per point.
        match *qualifier {
            [a, b] => self.qualifiers.extend_from_slice(&[a, b]),
            [a, b, c, d] => self.qualifiers.extend_from_slice(&[a, b, c, d]),
            _ => self.qualifiers.extend_from_slice(qualifier),
        }
        match *value {
            [a] => self.values.push(a),
            [a, b] => self.values.extend_from_slice(&[a, b]),
            [a, b, c, d] => self.values.extend_from_slice(&[a, b, c, d]),
            [a, b, c, d, e, f, g, h] => self.values.extend_from_slice(&[a, b, c, d, e, f, g, h]),
            _ => self.values.extend_from_slice(value),
        }
        self.points += 1;
    }

    /// The points of a compacted column in time order (its qualifiers and values without the meta byte, and its
    /// [`in_order_span`]), after the others.
    fn push_span(&mut self, qualifiers: &[u8], values: &[u8], span: &Span) {
        self.qualifiers.extend_from_slice(qualifiers);
        self.values.extend_from_slice(values);
        self.points += span.points;
        self.seconds |= span.seconds;
        self.millis |= span.millis;
    }

    /// (qualifier, value) of the column: one point's own cell when it holds one.
    fn finish(mut self) -> (Vec<u8>, Vec<u8>) {
        if self.points > 1 {
            self.values.push(if self.seconds && self.millis { MS_MIXED_COMPACT } else { 0x00 });
        }
        (self.qualifiers, self.values)
    }
}

/// [`merge_row`] in general: HBase's overwrites and appends, then OpenTSDB's compaction.
fn merge_columns(inputs: &[Cow<'_, [u8]>], fix_duplicates: bool) -> Result<MergedRow, CodecError> {
    // Every column with its write order.
    let mut cells: Vec<(Column<'_>, usize)> = Vec::new();
    for input in inputs {
        for column in columns(input) {
            let seq = cells.len();
            cells.push((column?, seq));
        }
    }
    // HBase order, and within one qualifier write order: the last of each run is the cell HBase keeps.
    cells.sort_by(|a, b| a.0.qualifier.cmp(b.0.qualifier).then(a.1.cmp(&b.1)));
    let mut latest: Vec<Cell<'_>> = Vec::with_capacity(cells.len());
    for (Column { qualifier, value }, seq) in cells {
        match latest.last_mut() {
            Some(last) if last.0 == qualifier => {
                if is_append(qualifier) {
                    last.1.to_mut().extend_from_slice(value);
                } else {
                    last.1 = Cow::Borrowed(value);
                }
                last.2 = seq;
            }
            _ => latest.push((qualifier, Cow::Borrowed(value), seq)),
        }
    }

    let mut pieces: Vec<Piece<'_>> = Vec::new();
    let mut merged = MergedRow::default();
    let mut has_append = false;
    for (q, v, seq) in &latest {
        let (q, v, seq) = (*q, v.as_ref(), *seq);
        if q.len() % 2 == 1 {
            has_append |= is_append(q);
            continue;
        }
        if explode(q, v, seq, &mut pieces).is_err() {
            merged.corrupt_columns += 1;
        }
    }
    // Stable: points of one column keep their column order.
    pieces.sort_by_key(|p| (p.offset_ms, p.seq));
    let mut kept: Vec<Piece<'_>> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        match kept.last_mut() {
            Some(last) if last.offset_ms == piece.offset_ms => {
                if last.flags() == piece.flags() && last.value == piece.value {
                    merged.identical_duplicates += 1;
                } else {
                    merged.variant_duplicates += 1;
                    if fix_duplicates {
                        *last = piece;
                    }
                }
            }
            _ => kept.push(piece),
        }
    }

    let leave_as_is = merged.corrupt_columns > 0 || has_append || (merged.variant_duplicates > 0 && !fix_duplicates);
    let total: usize = latest.iter().map(|(q, v, _)| q.len() + v.len() + 4).sum();
    let mut row = Vec::with_capacity(total);
    if leave_as_is {
        for (q, v, _) in &latest {
            push_column(&mut row, q, v);
        }
        merged.row = row;
        return Ok(merged);
    }

    let mut column = CompactedColumn::default();
    for p in &kept {
        column.push(&p.qualifier, p.value);
    }
    let (data_q, data_v) = column.finish();
    let mut out: Vec<(&[u8], &[u8])> =
        latest.iter().filter(|(q, _, _)| q.len() % 2 == 1).map(|(q, v, _)| (*q, v.as_ref())).collect();
    if !kept.is_empty() {
        out.push((&data_q, &data_v));
    }
    out.sort_by(|a, b| a.0.cmp(b.0));
    for (q, v) in out {
        push_column(&mut row, q, v);
    }
    merged.row = row;
    Ok(merged)
}

/// Whether a row value holds a packed column ([`packed`]): it is always the row's first column (the empty
/// qualifier sorts first), so the first byte, its qualifier's length, is 0.
#[inline]
pub fn is_packed(row: &[u8]) -> bool {
    row.first() == Some(&0)
}

/// A row value in OpenTSDB's form: the packed column, if any, replaced by the compacted column it was packed
/// from, in qualifier order. What every reader that shows cells uses (scan, export, fsck); rows without a packed
/// column come back as they are, without a copy.
pub fn expand_row(row: &[u8]) -> Result<Cow<'_, [u8]>, CodecError> {
    if !is_packed(row) {
        return Ok(Cow::Borrowed(row));
    }
    // (qualifier, value): borrowed from `row`, or unpacked.
    type Expanded<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);
    let mut cells: Vec<Expanded<'_>> = Vec::new();
    for column in columns(row) {
        let Column { qualifier, value } = column?;
        if qualifier.is_empty() {
            let (q, v) = packed::unpack(value)?;
            cells.push((q.into(), v.into()));
        } else {
            cells.push((qualifier.into(), value.into()));
        }
    }
    // Stable: columns with one qualifier (a row left uncompacted) keep their order.
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::with_capacity(cells.iter().map(|(q, v)| q.len() + v.len() + 4).sum());
    for (q, v) in &cells {
        push_column(&mut out, q, v);
    }
    Ok(Cow::Owned(out))
}

/// The length of [`expand_row`]'s result without building it: a row's size in OpenTSDB's form, what query byte
/// limits count (so a query's limit does not depend on whether its hours were packed yet). A packed column that
/// cannot be read counts as stored.
pub fn expanded_len(row: &[u8]) -> usize {
    if !is_packed(row) {
        return row.len();
    }
    let leb = |n: usize| (usize::BITS - n.leading_zeros()).max(1).div_ceil(7) as usize;
    columns(row)
        .map(|column| match column {
            Ok(Column { qualifier: [], value }) => match packed::unpacked_lens(value) {
                Ok((q, v)) => leb(q) + q + leb(v) + v,
                Err(_) => 1 + leb(value.len()) + value.len(),
            },
            Ok(Column { qualifier, value }) => leb(qualifier.len()) + qualifier.len() + leb(value.len()) + value.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The offset in milliseconds from the row's base time of its newest data point, read from the qualifiers of its
/// data columns (single cells and compacted columns; packed columns and odd-length columns are skipped); `None`
/// when it has none or a qualifier cannot be read. The store packs a row once it has been quiet for a while.
pub fn newest_offset_ms(row: &[u8]) -> Option<u32> {
    let mut newest = None;
    for column in columns(row) {
        let q = column.ok()?.qualifier;
        if q.is_empty() || q.len() % 2 == 1 {
            continue;
        }
        let mut at = 0;
        while at < q.len() {
            let len = qualifier_len_at(q, at).ok()?;
            newest = newest.max(Some(point_offset_ms(&q[at..at + len])));
            at += len;
        }
    }
    newest
}

/// A compacted row (what [`merge_row`] makes of a row without variants, appends or corrupt columns) with its
/// compacted column packed ([`packed`]); `None` when there is nothing to pack (one point, no compacted column,
/// already packed, a row left uncompacted) or packing would not make it smaller. [`expand_row`] of the result
/// is `row` again, byte for byte.
pub fn pack_row(row: &[u8]) -> Option<Vec<u8>> {
    if is_packed(row) {
        return None;
    }
    let mut data: Option<Column<'_>> = None;
    for column in columns(row) {
        let column = column.ok()?;
        if is_append(column.qualifier) {
            return None;
        }
        if column.qualifier.len() % 2 == 0 {
            if data.is_some() {
                // Several data columns: a row left uncompacted, whose cells are kept as written.
                return None;
            }
            data = Some(column);
        }
    }
    let data = data.filter(|d| !is_single(d.qualifier))?;
    let packed = packed::pack(data.qualifier, data.value)?;
    let mut out = Vec::with_capacity(row.len());
    push_column(&mut out, &[], &packed);
    for column in columns(row).flatten() {
        if column.qualifier.len() % 2 == 1 {
            push_column(&mut out, column.qualifier, column.value);
        }
    }
    (out.len() < row.len()).then_some(out)
}

/// The points of one row as a writer receives them, fresh from a parser (each stored as [`build_qualifier`] and
/// [`Value::encode`] give it), kept in arrival order as a compacted column under construction: qualifiers ‖ and
/// values ‖. When they arrive in time order without two at one instant, which is nearly always, the row's
/// merged value is that column as it stands ([`FreshRow::merged`]), without [`merge_row`]'s general machinery;
/// otherwise it is [`merge_row`] of the points written one after the other, as a stream of puts would leave it.
#[derive(Debug, Clone, Default)]
pub struct FreshRow {
    qualifiers: Vec<u8>,
    values: Vec<u8>,
    /// Offset (ms) of the last point pushed, + 1 (0 before the first point).
    next_ms: u64,
    /// Some point did not come strictly after the one before it.
    unordered: bool,
    seconds: bool,
    millis: bool,
    points: u32,
}

impl FreshRow {
    /// Adds a point (timestamp in seconds or milliseconds, by magnitude) of this row's hour.
    #[inline]
    pub fn push(&mut self, timestamp: i64, value: &Value) {
        // The qualifier's bytes and offset as `build_qualifier` and `qualifier_offset_ms` make and read them,
        // without their slices and checks (this runs once per imported point); the proptest below holds them
        // to the same bytes.
        let q = build_qualifier(timestamp, value.flags());
        let offset_ms = match *q {
            [a, b] => {
                self.seconds = true;
                self.qualifiers.extend_from_slice(&[a, b]);
                u64::from(u16::from_be_bytes([a, b]) >> SECOND_FLAG_BITS) * 1000
            }
            [a, b, c, d] => {
                self.millis = true;
                self.qualifiers.extend_from_slice(&[a, b, c, d]);
                u64::from((u32::from_be_bytes([a, b, c, d]) & MS_OFFSET_MASK) >> MS_FLAG_BITS)
            }
            _ => 0,
        };
        if offset_ms < self.next_ms {
            self.unordered = true;
        }
        self.next_ms = offset_ms + 1;
        match *value {
            Value::Int(v) => {
                let b = v.to_be_bytes();
                match int_width(v) {
                    1 => self.values.push(b[7]),
                    2 => self.values.extend_from_slice(&[b[6], b[7]]),
                    4 => self.values.extend_from_slice(&[b[4], b[5], b[6], b[7]]),
                    _ => self.values.extend_from_slice(&b),
                }
            }
            Value::Float(f) => self.values.extend_from_slice(&f.to_be_bytes()),
            Value::Double(d) => self.values.extend_from_slice(&d.to_be_bytes()),
        }
        self.points += 1;
    }

    /// An empty row with room for `points` points of a few bytes each.
    pub fn with_capacity(points: usize) -> FreshRow {
        FreshRow {
            qualifiers: Vec::with_capacity(2 * points),
            values: Vec::with_capacity(4 * points),
            ..Default::default()
        }
    }

    /// Where the next point's qualifier and value will be written (for a caller's prefetch).
    pub fn ends(&self) -> (*const u8, *const u8) {
        (
            self.qualifiers.as_ptr().wrapping_add(self.qualifiers.len()),
            self.values.as_ptr().wrapping_add(self.values.len()),
        )
    }

    /// Bytes allocated (for a caller's memory bound).
    pub fn capacity(&self) -> usize {
        self.qualifiers.capacity() + self.values.capacity()
    }

    pub fn points(&self) -> u32 {
        self.points
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.qualifiers.len() + self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Appends another row's points after this one's (the same row reached again later).
    pub fn extend(&mut self, later: &FreshRow) {
        for (q, v) in later.cells() {
            let offset_ms = u64::from(qualifier_offset_ms(q, 0).unwrap_or(0));
            if offset_ms < self.next_ms {
                self.unordered = true;
            }
            self.next_ms = offset_ms + 1;
            self.qualifiers.extend_from_slice(q);
            self.values.extend_from_slice(v);
        }
        self.seconds |= later.seconds;
        self.millis |= later.millis;
        self.points += later.points;
    }

    /// (qualifier, value) of each point in arrival order.
    fn cells(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let (mut qi, mut vi) = (0, 0);
        std::iter::from_fn(move || {
            let first = *self.qualifiers.get(qi)?;
            let q = &self.qualifiers[qi..qi + if is_ms_qualifier(first) { 4 } else { 2 }];
            let v = &self.values[vi..vi + value_len_from_flags(q[q.len() - 1])];
            qi += q.len();
            vi += v.len();
            Some((q, v))
        })
    }

    /// The points as one merge operand: a column per point, in arrival order (what a stream of puts writes).
    pub fn columns(&self, out: &mut Vec<u8>) {
        out.reserve(self.len() + 2 * self.points as usize);
        for (q, v) in self.cells() {
            push_column(out, q, v);
        }
    }

    /// The row value [`merge_row`] makes of these points written one after the other into an empty row.
    pub fn merged(&self, fix_duplicates: bool) -> Vec<u8> {
        if self.unordered {
            let mut columns = Vec::new();
            self.columns(&mut columns);
            // Well-formed by construction: `merge_row` cannot fail on it.
            return merge_row(None, &[&columns], fix_duplicates).map(|m| m.row).unwrap_or(columns);
        }
        let mut out = Vec::with_capacity(self.len() + 8);
        match self.points {
            0 => {}
            1 => push_column(&mut out, &self.qualifiers, &self.values),
            _ => {
                push_leb128(&mut out, self.qualifiers.len());
                out.extend_from_slice(&self.qualifiers);
                push_leb128(&mut out, self.values.len() + 1);
                out.extend_from_slice(&self.values);
                out.push(if self.seconds && self.millis { MS_MIXED_COMPACT } else { 0x00 });
            }
        }
        out
    }
}

/// Every data point of a row value, in time order, for queries and exports. Columns are read as OpenTSDB's
/// readers do: single cells fixed, compacted columns split, append columns parsed (later record wins); other
/// odd-length columns (annotations, histograms) are skipped; a packed column is read as the compacted column it
/// was packed from. Duplicates a row still holds (see [`merge_row`])
/// are all listed, in column order.
pub fn row_points(base_time: u32, row: &[u8]) -> Result<Vec<RowPoint>, CodecError> {
    let mut points = Vec::new();
    decode_row(base_time, row, &mut points, |timestamp_ms, qualifier, value| RowPoint {
        timestamp_ms,
        qualifier: QualifierBytes::from_slice(qualifier),
        value,
    })?;
    points.sort_by_key(|p| p.timestamp_ms);
    Ok(points)
}

/// A point's time and value, without its qualifier: what the rollup fold reads a raw row into.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedValue {
    /// Absolute time in milliseconds.
    pub timestamp_ms: i64,
    pub value: Value,
}

impl From<&RowPoint> for TimedValue {
    fn from(p: &RowPoint) -> TimedValue {
        TimedValue { timestamp_ms: p.timestamp_ms, value: p.value }
    }
}

/// [`row_points`] without the qualifiers, into `out` (cleared first): the same points in the same order, with
/// the same errors. A fold reads every raw row of a burst (issue 22 item 5): this moves fewer bytes
/// per point, and one buffer serves every row.
pub fn row_values(base_time: u32, row: &[u8], out: &mut Vec<TimedValue>) -> Result<(), CodecError> {
    out.clear();
    decode_row(base_time, row, out, |timestamp_ms, _, value| TimedValue { timestamp_ms, value })?;
    // Stable, as `row_points`' sort: duplicates stay in column order (a row already in time order, nearly every
    // one, is a single run the sort finds in one pass).
    out.sort_by_key(|p| p.timestamp_ms);
    Ok(())
}

/// The points of a row in column order, each made by `point(timestamp ms, qualifier, value)` and pushed to
/// `points` (see [`row_points`]).
#[inline]
fn decode_row<P>(
    base_time: u32,
    row: &[u8],
    points: &mut Vec<P>,
    point: impl Fn(i64, &[u8], Value) -> P,
) -> Result<(), CodecError> {
    let base_ms = i64::from(base_time) * 1000;
    // At most one point per 3 bytes (a 2-byte qualifier and a 1-byte value) of plain columns: never grown while
    // filled (a packed column reserves its own count).
    points.reserve(row.len() / 3);
    let point = |q: &[u8], value: Value| {
        let offset = point_offset_ms(q);
        point(base_ms + i64::from(offset), q, value)
    };
    for column in columns(row) {
        let Column { qualifier, value } = column?;
        let mut push = |q: &[u8], v: &[u8]| -> Result<(), CodecError> {
            let flags = q.last().map_or(0, |b| b & FLAGS_MASK);
            let value = Value::decode(flags, v)?;
            points.push(point(q, value));
            Ok(())
        };
        if is_append(qualifier) {
            for (q, v) in split_append(value)? {
                push(&q, &v)?;
            }
        } else if qualifier.is_empty() {
            // Straight from the packed form: the points its compacted column holds, without building it.
            points.reserve(packed::point_count(value)?);
            packed::for_each_point(value, |q, value| {
                points.push(point(&q, value));
                Ok(())
            })?;
        } else if qualifier.len() % 2 == 0 {
            each_point(qualifier, value, &mut push)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes from the spec's notation: `"00 37"`.
    fn h(s: &str) -> Vec<u8> {
        s.split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("test hex")).collect()
    }

    fn long(v: i64) -> Vec<u8> {
        v.to_be_bytes().to_vec()
    }

    fn row_of(cols: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (q, v) in cols {
            push_column(&mut out, q, v);
        }
        out
    }

    fn cols(row: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        columns(row)
            .map(|c| c.map(|c| (c.qualifier.to_vec(), c.value.to_vec())))
            .collect::<Result<_, _>>()
            .expect("well-formed row")
    }

    /// Merges cells written one after the other, each as its own operand (HBase: one `Put` each).
    fn merge_cells(cells: &[(Vec<u8>, Vec<u8>)], fix: bool) -> MergedRow {
        let ops: Vec<Vec<u8>> = cells.iter().map(|(q, v)| row_of(&[(q, v)])).collect();
        let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        merge_row(None, &refs, fix).expect("well-formed operands")
    }

    const R0_BASE: u32 = 1356998400;

    // spec: ingest §5.1 Q1-Q28
    #[test]
    fn qualifier_encoding_vectors() {
        let cases: [(&str, i64, u8, &str); 28] = [
            ("Q1", 1356998403, 7, "00 37"),
            ("Q2", 1357001999, 7, "E0 F7"),
            ("Q3", 1356998403, 5, "00 35"),
            ("Q4", 1357001999, 5, "E0 F5"),
            ("Q5", 1356998403, 3, "00 33"),
            ("Q6", 1357001999, 3, "E0 F3"),
            ("Q7", 1356998403, 1, "00 31"),
            ("Q8", 1357001999, 1, "E0 F1"),
            ("Q9", 1356998403, 0, "00 30"),
            ("Q10", 1357001999, 0, "E0 F0"),
            ("Q11", 1356998403, 0x0F, "00 3F"),
            ("Q12", 1357001999, 0x0F, "E0 FF"),
            ("Q13", 1356998403, 0x0B, "00 3B"),
            ("Q14", 1357001999, 0x0B, "E0 FB"),
            ("Q15", 1356998400008, 7, "F0 00 02 07"),
            ("Q16", 1357001999999, 7, "FD BB 9F C7"),
            ("Q17", 1356998400008, 5, "F0 00 02 05"),
            ("Q18", 1357001999999, 5, "FD BB 9F C5"),
            ("Q19", 1356998400008, 3, "F0 00 02 03"),
            ("Q20", 1357001999999, 3, "FD BB 9F C3"),
            ("Q21", 1356998400008, 1, "F0 00 02 01"),
            ("Q22", 1357001999999, 1, "FD BB 9F C1"),
            ("Q23", 1356998400008, 0, "F0 00 02 00"),
            ("Q24", 1357001999999, 0, "FD BB 9F C0"),
            ("Q25", 1356998400008, 0x0F, "F0 00 02 0F"),
            ("Q26", 1357001999999, 0x0F, "FD BB 9F CF"),
            ("Q27", 1356998400008, 0x0B, "F0 00 02 0B"),
            ("Q28", 1357001999999, 0x0B, "FD BB 9F CB"),
        ];
        for (id, ts, flags, want) in cases {
            assert_eq!(build_qualifier(ts, flags).as_slice(), h(want).as_slice(), "{id}");
        }
    }

    // spec: ingest §5.2 D1, D2
    #[test]
    fn qualifier_timestamps() {
        assert_eq!(qualifier_timestamp_ms(R0_BASE, &h("00 37"), 0), Ok(1356998403000));
        assert_eq!(qualifier_timestamp_ms(R0_BASE, &h("F0 00 02 07"), 0), Ok(1356998400008));
    }

    // spec: ingest §5.2 D3-D10
    #[test]
    fn qualifier_offsets() {
        assert_eq!(qualifier_offset_ms(&h("00 37"), 0), Ok(3000)); // D3
        assert_eq!(qualifier_offset_ms(&h("F0 00 00 47"), 0), Ok(1)); // D4
        assert_eq!(qualifier_offset_ms(&h("F0 00 02 07"), 0), Ok(8)); // D5
        assert_eq!(qualifier_offset_ms(&h("F0 00 02 07 F0 00 03 07"), 4), Ok(12)); // D6
        assert_eq!(qualifier_offset_ms(&h("00 37 00 47"), 2), Ok(4000)); // D7
        let mixed = h("00 37 F0 00 02 07 00 47");
        assert_eq!(qualifier_offset_ms(&mixed, 2), Ok(8)); // D8
        assert_eq!(extract_qualifier(&mixed, 2), Ok(h("F0 00 02 07").as_slice())); // D8
        assert_eq!(extract_qualifier(&mixed, 6), Ok(h("00 47").as_slice())); // D9
        assert_eq!(
            qualifier_offset_ms(&h("00 37 00 47"), 3), // D10
            Err(CodecError::IllegalData("Offset of [3] is out of bounds for the qualifier length of [4]".into()))
        );
    }

    // spec: ingest §5.2 D11-D17
    #[test]
    fn qualifier_lengths_and_flags() {
        for (q, len) in
            [("00 07", 8), ("00 0F", 8), ("00 00", 1), ("00 4B", 4), ("00 0B", 4), ("00 1B", 4), ("00 1F", 8)]
        {
            assert_eq!(value_len_from_flags(h(q)[1]), len, "D11 {q}");
        }
        assert_eq!(qualifier_len_at(&h("00 0F"), 0), Ok(2)); // D12
        assert_eq!(qualifier_len_at(&h("F0 00 00 07"), 0), Ok(4)); // D13
        assert!(matches!(qualifier_len_at(&h("0F"), 0), Err(CodecError::IllegalData(_)))); // D14
        assert_eq!(
            qualifier_len_at(&h("F0 00 00"), 0), // D15
            Err(CodecError::IllegalData("Detected a millisecond flag but qualifier length is too short".into()))
        );
        assert_eq!(qualifier_flags_at(&h("00 37"), 0), Ok(7)); // D16
        assert_eq!(qualifier_flags_at(&h("00 1B"), 0), Ok(11)); // D16
        assert!(is_ms_qualifier(0xFF)); // D17
        assert!(!is_ms_qualifier(0xEF)); // D17
    }

    // spec: ingest §5.2 D18
    #[test]
    fn long_ms_compacted_qualifier() {
        let mut q = Vec::with_capacity(64000 * 4);
        for i in 0..64000i64 {
            q.extend_from_slice(&build_qualifier(1356998400500 + 50 * i, 7));
        }
        assert_eq!(qualifier_offset_ms(&q, 4), Ok(550));
        assert_eq!(qualifier_timestamp_ms(R0_BASE, &q, 4), Ok(1356998400550));
        let last = q.len() - 4;
        assert_eq!(qualifier_offset_ms(&q, last), Ok(3200450));
        assert_eq!(qualifier_timestamp_ms(R0_BASE, &q, last), Ok(1357001600450));
    }

    // spec: ingest §5.3 V1-V9
    #[test]
    fn integer_encoding_vectors() {
        let cases: [(&str, i64, &str, u8); 9] = [
            ("V1", 0, "00", 0),
            ("V2", 42, "2A", 0),
            ("V3", -42, "D6", 0),
            ("V4", 257, "01 01", 1),
            ("V5", -257, "FE FF", 1),
            ("V6", 65537, "00 01 00 01", 3),
            ("V7", -65537, "FF FE FF FF", 3),
            ("V8", 4294967296, "00 00 00 01 00 00 00 00", 7),
            ("V9", -4294967296, "FF FF FF FF 00 00 00 00", 7),
        ];
        for (id, v, bytes, flags) in cases {
            let value = Value::Int(v);
            assert_eq!(value.encode().as_slice(), h(bytes).as_slice(), "{id}");
            assert_eq!(value.flags(), flags, "{id}");
            assert_eq!(Value::decode(flags, &h(bytes)), Ok(value), "{id}");
        }
        // Width boundaries.
        for (v, w) in [(127, 1), (-128, 1), (128, 2), (-129, 2), (32767, 2), (-32768, 2), (32768, 4)] {
            assert_eq!(Value::Int(v).encode().len(), w, "{v}");
        }
        assert_eq!(Value::Int(i64::from(i32::MAX) + 1).encode().len(), 8);
        assert_eq!(Value::Int(i64::from(i32::MIN)).encode().len(), 4);
    }

    // spec: ingest §5.3 V10, §4.4
    #[test]
    fn float_encoding_vectors() {
        assert_eq!(Value::Float(42.5).encode().as_slice(), h("42 2A 00 00").as_slice());
        assert_eq!(Value::Float(42.5).flags(), 0x0B);
        assert_eq!(Value::Double(12.3).encode().as_slice(), h("40 28 99 99 99 99 99 9A").as_slice());
        assert_eq!(Value::Double(12.3).flags(), 0x0F);
        assert_eq!(Value::Float(-0.0).encode().as_slice(), h("80 00 00 00").as_slice());
        assert_eq!(Value::from_java_double(42.5), Value::Float(42.5));
        assert_eq!(Value::from_java_double(12.3), Value::Double(12.3));
        assert_eq!(Value::decode(0x0B, &h("42 2A 00 00")), Ok(Value::Float(42.5)));
        assert_eq!(Value::decode(0x0F, &h("40 28 99 99 99 99 99 9A")), Ok(Value::Double(12.3)));
        assert_eq!(Value::Float(42.5).as_f64(), 42.5);
        assert_eq!(Value::Int(-3).as_f64(), -3.0);
        assert!(Value::Int(1).is_integer() && !Value::Double(1.0).is_integer());
    }

    // spec: ingest §5.3 V11-V14, §4.3 read tolerance
    #[test]
    fn value_fixes() {
        assert_eq!(fix_qualifier_flags(0x0F, 4), 0x0B); // V11
        assert_eq!(fix_qualifier_flags(0x37, 1), 0x30);
        assert_eq!(fix_qualifier_flags(0x03, 8), 0x07);
        assert_eq!(
            fix_floating_point_value(0x0B, &h("00 00 00 00 00 00 00 01")).map(|v| v.to_vec()),
            Ok(h("00 00 00 01"))
        ); // V12
        assert_eq!(fix_floating_point_value(0x0B, &h("00 00 00 01")).map(|v| v.to_vec()), Ok(h("00 00 00 01"))); // V13
        assert_eq!(fix_floating_point_value(0x03, &h("00 00 00 01")).map(|v| v.to_vec()), Ok(h("00 00 00 01"))); // V13
        assert_eq!(
            fix_floating_point_value(0x0B, &h("00 02 00 00 00 00 00 01")), // V14
            Err(CodecError::IllegalData(
                "Corrupted floating point value: [0, 2, 0, 0, 0, 0, 0, 1] flags=0xb -- first 4 bytes are expected \
                 to be zeros."
                    .into()
            ))
        );
        // Reads: actual length wins for integers; the legacy float layout reads as its last 4 bytes.
        assert_eq!(Value::decode(0x07, &[0x2A]), Ok(Value::Int(42)));
        assert_eq!(Value::decode(0x00, &long(4)), Ok(Value::Int(4)));
        assert_eq!(Value::decode(0x0F, &42.5f32.to_be_bytes()), Ok(Value::Float(42.5)));
        let legacy = [[0u8; 4], 4.2f32.to_be_bytes()].concat();
        assert_eq!(Value::decode(0x0B, &legacy), Ok(Value::Float(4.2)));
        assert!(Value::decode(0x0B, &h("00 02 00 00 00 00 00 01")).is_err());
        assert!(Value::decode(0x00, &[]).is_err());
        assert!(Value::decode(0x05, &[1, 2, 3]).is_err());
        assert!(Value::decode(0x08, &[1, 2]).is_err());
        assert!(Value::decode(0x0F, &[0; 9]).is_err());
    }

    // spec: ingest §5.3 V15
    #[test]
    fn max_uid_per_width() {
        let want = [
            0u64,
            255,
            65535,
            16777215,
            4294967295,
            1099511627775,
            281474976710655,
            72057594037927935,
            i64::MAX as u64,
        ];
        for (width, max) in want.iter().enumerate() {
            assert_eq!(checked_max_uid(width), Ok(*max), "width {width}");
            assert_eq!(max_uid(width), *max, "width {width}");
        }
        assert!(checked_max_uid(9).is_err());
        assert_eq!(max_uid(9), i64::MAX as u64);
    }

    fn r(base: &str) -> Vec<u8> {
        [h("00 00 01"), h(base), h("00 00 01 00 00 01")].concat()
    }

    /// OpenTSDB's `addPoint` for `sys.cpu.user host=web01` with BaseTsdbTest's UIDs: (row, qualifier, value).
    fn add_point(ts: i64, value: Value) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let tags: [(&[u8], &[u8]); 1] = [(&[0, 0, 1], &[0, 0, 1])];
        let key = row_key(&SaltConfig::NONE, &[0, 0, 1], base_time(ts), &tags);
        (key, build_qualifier(ts, value.flags()).to_vec(), value.encode().to_vec())
    }

    // spec: ingest §5.4 W1-W14, W17-W19
    #[test]
    fn full_write_vectors() {
        let r0 = "50 E2 27 00";
        let cases: [(&str, i64, Value, &str, &str, &str); 17] = [
            ("W1", 1356998400, Value::Int(42), r0, "00 00", "2A"),
            ("W2", 1356998400, Value::Int(-42), r0, "00 00", "D6"),
            ("W3", 1356998400, Value::Int(257), r0, "00 01", "01 01"),
            ("W4", 1356998400, Value::Int(65537), r0, "00 03", "00 01 00 01"),
            ("W5", 1356998400, Value::Int(4294967296), r0, "00 07", "00 00 00 01 00 00 00 00"),
            ("W6", 1356998400500, Value::Int(42), r0, "F0 00 7D 00", "2A"),
            ("W7", 1357001999, Value::Int(42), r0, "E0 F0", "2A"),
            ("W9", 0, Value::Int(42), "00 00 00 00", "00 00", "2A"),
            ("W10", 1, Value::Int(42), "00 00 00 00", "00 10", "2A"),
            ("W11", 4294967295, Value::Int(42), "FF FF F9 60", "69 F0", "2A"),
            ("W12", 4294967296, Value::Int(42), "00 41 88 90", "F0 A3 60 00", "2A"),
            ("W13", 4294967295000, Value::Int(42), "FF FF F9 60", "F6 77 46 00", "2A"),
            ("W14", 9999999999999, Value::Int(42), "54 0B D9 10", "FA AE 5F C0", "2A"),
            ("W17", 1356998400, Value::Float(42.5), r0, "00 0B", "42 2A 00 00"),
            ("W18", 1356998400500, Value::Float(42.5), r0, "F0 00 7D 0B", "42 2A 00 00"),
            ("W19", 1357001999, Value::Float(42.5), r0, "E0 FB", "42 2A 00 00"),
            ("W24", 1356998400, Value::Int(1), r0, "00 00", "01"),
        ];
        for (id, ts, value, base, q, v) in cases {
            let (key, qual, val) = add_point(ts, value);
            assert_eq!(key, r(base), "{id} row");
            assert_eq!(qual, h(q), "{id} qualifier");
            assert_eq!(val, h(v), "{id} value");
        }
        assert_eq!(base_time(9999999999999), 1410062608);
    }

    // spec: ingest §5.4 W24: 50 points in one hour, 50 cells before compaction, one column after.
    #[test]
    fn fifty_points_one_row() {
        let cells: Vec<(Vec<u8>, Vec<u8>)> = (0..50)
            .map(|i| {
                let (key, q, v) = add_point(1356998400 + i, Value::Int(i + 1));
                assert_eq!(key, r("50 E2 27 00"));
                (q, v)
            })
            .collect();
        assert_eq!(cells[0], (h("00 00"), h("01")));
        let merged = merge_cells(&cells, false);
        let c = cols(&merged.row);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0.len(), 100);
        assert_eq!(c[0].1.len(), 51);
        let points = row_points(R0_BASE, &merged.row).unwrap();
        assert_eq!(points.len(), 50);
        assert_eq!(points[49].timestamp_ms, 1356998449000);
        assert_eq!(points[49].value, Value::Int(50));
    }

    // spec: ingest §5.4 derived vector (tags sorted by UID, not by name)
    #[test]
    fn tags_sorted_by_uid() {
        let owner: (&[u8], &[u8]) = (&[0, 0, 3], &[0, 0, 2]);
        let host: (&[u8], &[u8]) = (&[0, 0, 1], &[0, 0, 1]);
        let key = row_key(&SaltConfig::NONE, &[0, 0, 1], base_time(1356998460), &[owner, host]);
        assert_eq!(key, h("00 00 01 50 E2 27 00 00 00 01 00 00 01 00 00 03 00 00 02"));
        assert_eq!(build_qualifier(1356998460, Value::Float(42.5).flags()).as_slice(), h("03 CB").as_slice());
        let twelve = Value::from_java_double(12.3);
        assert_eq!(build_qualifier(1356998460, twelve.flags()).as_slice(), h("03 CF").as_slice());
        assert_eq!(twelve.encode().as_slice(), h("40 28 99 99 99 99 99 9A").as_slice());
    }

    // spec: ingest §5.4 W8: the same cell written twice keeps the last value
    #[test]
    fn same_qualifier_overwrites() {
        let merged = merge_cells(&[(h("00 00"), h("2A")), (h("00 00"), h("18"))], false);
        assert_eq!(cols(&merged.row), vec![(h("00 00"), h("18"))]);
        assert_eq!((merged.identical_duplicates, merged.variant_duplicates), (0, 0));
        // Also when the first write was already merged into the stored row.
        let first = merge_cells(&[(h("00 00"), h("2A"))], false);
        let second = row_of(&[(&h("00 00"), &h("18"))]);
        let merged = merge_row(Some(&first.row), &[&second], false).unwrap();
        assert_eq!(cols(&merged.row), vec![(h("00 00"), h("18"))]);
    }

    // spec: ingest §5.4 W20: int and float at the same second are two cells, then variant duplicates
    #[test]
    fn int_and_float_same_second() {
        let (_, q1, v1) = add_point(1356998400, Value::Int(42));
        let (_, q2, v2) = add_point(1356998400, Value::Float(42.5));
        assert_eq!((q1.clone(), v1.clone()), (h("00 00"), h("2A")));
        assert_eq!((q2.clone(), v2.clone()), (h("00 0B"), h("42 2A 00 00")));
        let cells = [(q1, v1), (q2, v2)];
        let left = merge_cells(&cells, false);
        assert_eq!(left.variant_duplicates, 1);
        assert_eq!(cols(&left.row), vec![(h("00 00"), h("2A")), (h("00 0B"), h("42 2A 00 00"))]);
        let points = row_points(R0_BASE, &left.row).unwrap();
        assert_eq!(points.iter().map(|p| p.value).collect::<Vec<_>>(), [Value::Int(42), Value::Float(42.5)]);
        let fixed = merge_cells(&cells, true);
        assert_eq!(cols(&fixed.row), vec![(h("00 0B"), h("42 2A 00 00"))]);
    }

    // spec: ingest §5.4 W21: 42 at a second and at the same instant in ms: two cells, identical duplicates
    #[test]
    fn seconds_and_ms_same_instant() {
        let (k1, q1, v1) = add_point(1356998400, Value::Int(42));
        let (k2, q2, v2) = add_point(1356998400000, Value::Int(42));
        assert_eq!(k1, k2);
        assert_eq!((q1.clone(), q2.clone()), (h("00 00"), h("F0 00 00 00")));
        assert_eq!((v1.clone(), v2.clone()), (h("2A"), h("2A")));
        let merged = merge_cells(&[(q1, v1), (q2, v2)], false);
        assert_eq!((merged.identical_duplicates, merged.variant_duplicates), (1, 0));
        assert_eq!(cols(&merged.row), vec![(h("00 00"), h("2A"))]);
    }

    fn append_op(q: &str, v: &str) -> Vec<u8> {
        row_of(&[(&APPEND_QUALIFIER, &[h(q), h(v)].concat())])
    }

    fn merge_ops(ops: &[Vec<u8>]) -> MergedRow {
        let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        merge_row(None, &refs, false).unwrap()
    }

    // spec: ingest §5.5 A1-A7: appends concatenate records in arrival order
    #[test]
    fn append_vectors() {
        let q = |ts: i64| build_qualifier(ts, 0).iter().map(|b| format!("{b:02X} ")).collect::<String>();
        let cases = [
            ("A1", vec![(1356998400, "2A")], "00 00 2A"),
            ("A2", vec![(1356998430, "2A")], "01 E0 2A"),
            ("A3", vec![(1356998400, "2A"), (1356998430, "18"), (1356998460, "01")], "00 00 2A 01 E0 18 03 C0 01"),
            ("A4", vec![(1356998400, "2A"), (1356998460, "01"), (1356998430, "18")], "00 00 2A 03 C0 01 01 E0 18"),
            ("A5", vec![(1356998400, "2A"), (1356998430, "18"), (1356998430, "01")], "00 00 2A 01 E0 18 01 E0 01"),
            ("A6", vec![(1356998400050, "2A")], "F0 00 0C 80 2A"),
            (
                "A7",
                vec![(1356998400, "2A"), (1356998400050, "01"), (1356998430, "18")],
                "00 00 2A F0 00 0C 80 01 01 E0 18",
            ),
        ];
        for (id, writes, want) in cases {
            let ops: Vec<Vec<u8>> = writes.iter().map(|(ts, v)| append_op(&q(*ts), v)).collect();
            let merged = merge_ops(&ops);
            assert_eq!(cols(&merged.row), vec![(APPEND_QUALIFIER.to_vec(), h(want))], "{id}");
        }
        // A5 read back: the later record at +30 s wins.
        let merged = merge_ops(&[append_op("00 00", "2A"), append_op("01 E0", "18"), append_op("01 E0", "01")]);
        let points = row_points(R0_BASE, &merged.row).unwrap();
        let got: Vec<(i64, Value)> = points.iter().map(|p| (p.timestamp_ms, p.value)).collect();
        assert_eq!(got, [(1356998400000, Value::Int(42)), (1356998430000, Value::Int(1))]);
    }

    // spec: ingest §5.5 A8, A9: reading an append column sorts records and the later duplicate wins
    #[test]
    fn append_parsing() {
        let want = vec![
            (QualifierBytes::from_slice(&h("F0 00 20 00")), ValueBytes::from_slice(&h("2A"))),
            (QualifierBytes::from_slice(&h("00 20")), ValueBytes::from_slice(&h("18"))),
        ];
        assert_eq!(split_append(&h("00 20 18 F0 00 20 00 2A")), Ok(want.clone())); // A8
        assert_eq!(split_append(&h("F0 00 20 00 2A 00 20 18 00 20 18")), Ok(want)); // A9
        let row = row_of(&[(&APPEND_QUALIFIER, &h("00 20 18 F0 00 20 00 2A"))]);
        let points = row_points(R0_BASE, &row).unwrap();
        let q: Vec<u8> = points.iter().flat_map(|p| p.qualifier.to_vec()).collect();
        let v: Vec<u8> = points.iter().flat_map(|p| p.value.encode().to_vec()).collect();
        assert_eq!((q, v), (h("F0 00 20 00 00 20"), h("2A 18")));
        assert!(split_append(&h("00 20")).is_err());
        assert!(split_append(&h("F0 00 20")).is_err());
    }

    // spec: ingest §5.6 C1
    #[test]
    fn compaction_two_seconds() {
        let merged = merge_cells(&[(h("00 07"), long(4)), (h("00 17"), long(5))], false);
        assert_eq!(cols(&merged.row), vec![(h("00 07 00 17"), [long(4), long(5), vec![0]].concat())]);
    }

    // spec: ingest §5.6 C2
    #[test]
    fn compaction_mixed_precision() {
        let merged = merge_cells(&[(h("00 07"), long(4)), (h("F0 00 01 07"), long(5))], false);
        assert_eq!(cols(&merged.row), vec![(h("00 07 F0 00 01 07"), [long(4), long(5), vec![1]].concat())]);
    }

    // spec: ingest §5.6 C3
    #[test]
    fn compaction_fixes_length_bits() {
        let merged = merge_cells(&[(h("00 03"), long(4)), (h("00 17"), long(5))], false);
        assert_eq!(cols(&merged.row), vec![(h("00 07 00 17"), [long(4), long(5), vec![0]].concat())]);
    }

    // spec: ingest §5.6 C4
    #[test]
    fn compaction_fixes_legacy_float() {
        let legacy = [vec![0, 0, 0, 0], 4.2f32.to_be_bytes().to_vec()].concat();
        let merged = merge_cells(&[(h("00 07"), long(4)), (h("00 1B"), legacy)], false);
        let want_value = [long(4), 4.2f32.to_be_bytes().to_vec(), vec![0]].concat();
        assert_eq!(cols(&merged.row), vec![(h("00 07 00 1B"), want_value)]);
        let points = row_points(R0_BASE, &merged.row).unwrap();
        assert_eq!(points[1].value, Value::Float(4.2));
    }

    // spec: ingest §5.6 C5, C6
    #[test]
    fn duplicate_second_and_ms() {
        let cells = [(h("00 07"), long(4)), (h("F0 00 00 07"), long(5))];
        // C5: OpenTSDB's compaction fails and the row stays as written.
        let left = merge_cells(&cells, false);
        assert_eq!((left.identical_duplicates, left.variant_duplicates), (0, 1));
        assert_eq!(cols(&left.row), cells.to_vec());
        // C6: the newer cell wins, alone, without meta byte.
        let fixed = merge_cells(&cells, true);
        assert_eq!(fixed.variant_duplicates, 1);
        assert_eq!(cols(&fixed.row), vec![(h("F0 00 00 07"), long(5))]);
    }

    // spec: ingest §5.6 C7, C8
    #[test]
    fn duplicate_widths() {
        let cells = [(h("00 07"), long(4)), (h("00 03"), h("00 00 00 04"))];
        let left = merge_cells(&cells, false);
        assert_eq!(left.variant_duplicates, 1);
        assert_eq!(cols(&left.row), vec![cells[1].clone(), cells[0].clone()]);
        let fixed = merge_cells(&cells, true);
        assert_eq!(cols(&fixed.row), vec![(h("00 03"), h("00 00 00 04"))]);
        // Written the other way round, the 8-byte cell is the newer one.
        let fixed = merge_cells(&[cells[1].clone(), cells[0].clone()], true);
        assert_eq!(cols(&fixed.row), vec![(h("00 07"), long(4))]);
    }

    // spec: ingest §5.6 C9: rows with an append column are read merged but never rewritten
    #[test]
    fn rows_with_appends_are_left_alone() {
        let append = [h("00 07"), long(42), h("00 17"), long(5)].concat();
        let cells = [(APPEND_QUALIFIER.to_vec(), append.clone()), (h("00 27"), long(3)), (h("00 37"), long(2))];
        let merged = merge_cells(&cells, false);
        assert_eq!(
            cols(&merged.row),
            vec![(h("00 27"), long(3)), (h("00 37"), long(2)), (APPEND_QUALIFIER.to_vec(), append)]
        );
        let points = row_points(R0_BASE, &merged.row).unwrap();
        let q: Vec<u8> = points.iter().flat_map(|p| p.qualifier.to_vec()).collect();
        let v: Vec<u8> = points.iter().flat_map(|p| p.value.encode().to_vec()).collect();
        assert_eq!(q, h("00 07 00 17 00 27 00 37"));
        // Values are re-encoded on their smallest width here; the stored bytes stay 8-byte.
        assert_eq!(v, h("2A 05 03 02"));
    }

    #[test]
    fn other_odd_columns_are_kept() {
        let note = (h("01 00 7B"), b"{\"description\":\"x\"}".to_vec());
        let cells = [(h("00 07"), long(4)), note.clone(), (h("00 17"), long(5))];
        let merged = merge_cells(&cells, false);
        assert_eq!(cols(&merged.row), vec![(h("00 07 00 17"), [long(4), long(5), vec![0]].concat()), note.clone()]);
        assert_eq!(row_points(R0_BASE, &merged.row).unwrap().len(), 2);
        // An annotation written again with the same qualifier replaces the first.
        let note2 = (note.0.clone(), b"{}".to_vec());
        let merged = merge_cells(&[note, note2.clone()], false);
        assert_eq!(cols(&merged.row), vec![note2]);
    }

    #[test]
    fn corrupt_data_columns_leave_the_row_alone() {
        let cells = [(h("00 07 00 17"), long(4)), (h("00 27"), long(3)), (h("00 37"), long(2))];
        let merged = merge_cells(&cells, false);
        assert_eq!(merged.corrupt_columns, 1);
        assert_eq!(cols(&merged.row), cells.to_vec());
        assert!(row_points(R0_BASE, &merged.row).is_err());
        assert!(merge_row(None, &[&[0x05, 1]], false).is_err());
    }

    // spec: ingest §4.6 "Readers split a compacted column"
    #[test]
    fn splitting_compacted_columns() {
        let value = [long(4), h("2A"), vec![0]].concat();
        let parts = split_compacted(&h("00 07 F0 00 02 00"), &value).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].0.as_slice(), h("F0 00 02 00").as_slice());
        assert_eq!(parts[1].1.as_slice(), h("2A").as_slice());
        let err = split_compacted(&h("00 07 00 17"), &[long(4), vec![0]].concat()).unwrap_err();
        assert!(err.to_string().starts_with("Corrupted value"), "{err}");
        let err = split_compacted(&h("00 07"), &[long(4), vec![0, 0]].concat()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Corrupted value: couldn't break down into individual values (consumed 8 bytes, but was expecting to \
             consume 9)"
        );
        assert!(split_compacted(&h("00 07"), &[]).is_err());
    }

    fn salted(key: &str, width: usize, buckets: u32) -> Vec<u8> {
        let mut k = [vec![0; width], h(key)].concat();
        prefix_salt(&mut k, &SaltConfig { width, buckets }, 3);
        k
    }

    // spec: ingest §5.7 S1-S13
    #[test]
    fn salt_vectors() {
        let s1 = "00 00 01 50 E2 27 00 00 00 01 00 00 01";
        let pair = " 00 00 01 00 00 01";
        let cases: [(&str, String, u8); 9] = [
            ("S1", s1.to_string(), 0x08),
            ("S2", format!("{s1}{pair}"), 0x10),
            // The spec says "(4 pairs)" but its own S2 already has 2: TestRowKey's key has 3 pairs in all.
            ("S3", format!("{s1}{pair}{pair}"), 0x00),
            ("S4", "00 00 01 50 E2 27 00 00 00 01 00 00 02".into(), 0x09),
            ("S5", "00 00 01 50 E2 27 00 00 00 01 00 00 01 00 00 02 00 00 03".into(), 0x03),
            ("S6", "00 00 01 50 E2 27 00".into(), 0x0C),
            ("S7", "00 00 02 50 E2 27 00 00 00 01 00 00 01".into(), 0x09),
            ("S8", "00 00 03 50 E2 27 00 00 00 01 00 00 01".into(), 0x06),
            ("S9", "0B 14 20 50 E2 27 00 00 00 01 00 00 01".into(), 0x06),
        ];
        for (id, key, salt) in cases {
            assert_eq!(salted(&key, 1, 20), [vec![salt], h(&key)].concat(), "{id}");
        }
        for base in ["50 E2 35 10", "51 0B 13 90", "00 00 00 00"] {
            let key = format!("00 00 01 {base} 00 00 01 00 00 01");
            assert_eq!(salted(&key, 1, 20)[0], 0x08, "S10 {base}");
        }
        for old in [0x02u8, 0xFF, 0x0E] {
            let mut k = [vec![old], h(s1)].concat();
            prefix_salt(&mut k, &SaltConfig { width: 1, buckets: 20 }, 3);
            assert_eq!(k[0], 0x08, "S11 {old:02X}");
        }
        // S12: the global annotation row and keys too short keep their bytes.
        let mut global = [vec![0x07], h("00 00 00 50 E2 27 00")].concat();
        let before = global.clone();
        prefix_salt(&mut global, &SaltConfig { width: 1, buckets: 20 }, 3);
        assert_eq!(global, before);
        let mut short = h("07 00 01");
        prefix_salt(&mut short, &SaltConfig { width: 1, buckets: 20 }, 3);
        assert_eq!(short, h("07 00 01"));
        assert_eq!(salted(s1, 1, 2)[0], 0x00, "S13");
        // TestRowKey: a cut-off tag pair and a key without tags are still hashed.
        assert_eq!(salted("00 00 01 50 E2 27 00 00 00 01", 1, 20)[0], 0x0D);
        assert_eq!(salted("00 00 01 50 E2 27 00", 1, 20)[0], 0x0C);
        // Salting off: nothing written.
        assert_eq!(salted(s1, 0, 20), h(s1));
    }

    // spec: ingest §5.7 S14, S15
    #[test]
    fn salt_bytes_vectors() {
        assert_eq!(salt_bytes(20, 1).as_slice(), h("14").as_slice());
        assert_eq!(salt_bytes(20, 2).as_slice(), h("00 14").as_slice());
        assert_eq!(salt_bytes(20, 4).as_slice(), h("00 00 00 14").as_slice());
        assert_eq!(salt_bytes(-2, 1).as_slice(), h("FE").as_slice());
        // Java's int shift wraps at 32 bits.
        assert_eq!(salt_bytes(20, 8).as_slice(), h("00 00 00 14 00 00 00 14").as_slice());
        assert_eq!(salt_bytes(20, 0).as_slice(), &[] as &[u8]);
        // S15: OpenTSDB divides by zero; rtsd writes bucket 0 instead of panicking.
        assert_eq!(salt_bucket(&[0, 0, 1], &[], 0), 0);
        assert_eq!(salted("00 00 01 50 E2 27 00 00 00 01 00 00 01", 1, 0)[0], 0);
    }

    #[test]
    fn java_hash_matches_arrays_hash_code() {
        assert_eq!(java_bytes_hash(&[]), 1);
        assert_eq!(java_bytes_hash(&[0xFF]), 31 - 1);
        // Salt of S1 by hand: metric ‖ tags.
        let h1 = java_bytes_hash(&h("00 00 01 00 00 01 00 00 01"));
        assert_eq!((h1 % 20).unsigned_abs(), 8);
    }

    // spec: ingest §5.7 S16-S18
    #[test]
    fn row_key_from_tsuid_vectors() {
        let tsuid = h("00 00 01 00 00 01 00 00 02");
        let want = h("00 00 01 50 E2 27 00 00 00 01 00 00 02");
        assert_eq!(row_key_from_tsuid(&tsuid, 1356998400, &SaltConfig::NONE, 3), want); // S16
        assert_eq!(row_key_from_tsuid(&tsuid, 1356998400123, &SaltConfig::NONE, 3), want); // S16
        assert_eq!(row_key_from_tsuid(&tsuid, 0, &SaltConfig::NONE, 3), h("00 00 01 00 00 00 00 00 00 01 00 00 02")); // S17
        assert_eq!(
            row_key_from_tsuid(&tsuid, -1356998400, &SaltConfig::NONE, 3),
            h("00 00 01 FF EB 58 80 00 00 01 00 00 02")
        ); // S17
        let one = SaltConfig { width: 1, buckets: 2 };
        assert_eq!(row_key_from_tsuid(&tsuid, 1356998400, &one, 3), [vec![1], want.clone()].concat()); // S18
        let four = SaltConfig { width: 4, buckets: 2 };
        assert_eq!(row_key_from_tsuid(&tsuid, 1356998400, &four, 3), [h("00 00 00 01"), want].concat());
        // S18
    }

    // spec: ingest §5.7 S19
    #[test]
    fn tsuid_from_key() {
        let key = h("00 00 01 01 01 01 01 00 00 02 00 00 03");
        assert_eq!(tsuid_from_row_key(&key, 0, 3), h("00 00 01 00 00 02 00 00 03"));
        let salted_key = [vec![9], key.clone()].concat();
        assert_eq!(tsuid_from_row_key(&salted_key, 1, 3), h("00 00 01 00 00 02 00 00 03"));
        assert_eq!(row_base_time(&salted_key, 1, 3), 0x01010101);
        assert_eq!(row_base_time(&h("00 00 01 50"), 0, 3), 0);
        assert_eq!(tsuid_from_row_key(&h("00 00"), 0, 3), h("00 00"));
    }

    #[test]
    fn salted_row_key_round_trip() {
        let salt = SaltConfig { width: 1, buckets: 20 };
        let tags: [(&[u8], &[u8]); 1] = [(&[0, 0, 1], &[0, 0, 1])];
        let key = row_key(&salt, &[0, 0, 1], R0_BASE, &tags);
        assert_eq!(key, h("08 00 00 01 50 E2 27 00 00 00 01 00 00 01"));
        assert_eq!(row_base_time(&key, 1, 3), R0_BASE);
        let tsuid = tsuid_from_row_key(&key, 1, 3);
        assert_eq!(row_key_from_tsuid(&tsuid, 1356998400, &salt, 3), key);
    }

    // spec: ingest §5.8 U1-U6
    #[test]
    fn uid_vectors() {
        for (bytes, s) in [("01", "01"), ("0A 0B", "0A0B"), ("1A 1B", "1A1B"), ("00", "00"), ("FF", "FF")] {
            assert_eq!(uid_to_string(&h(bytes)), s, "U1");
        }
        assert_eq!(string_to_uid("0A0B", None), Ok(h("0A 0B"))); // U2
        assert_eq!(string_to_uid("AB", None), Ok(h("AB"))); // U2
        assert_eq!(string_to_uid("B", None), Ok(h("0B"))); // U2
        assert_eq!(string_to_uid("ab", None), Ok(h("AB")));
        assert_eq!(string_to_uid("2A0C", Some(3)), Ok(h("00 2A 0C"))); // U3
        assert_eq!(string_to_uid("0", Some(3)), Ok(h("00 00 00"))); // U3
        assert_eq!(string_to_uid("", None), Err(CodecError::IllegalData("UID was empty".into()))); // U4
        assert!(string_to_uid("HelloWorld", None).is_err()); // U4
        assert!(string_to_uid(" ", None).is_err()); // U4
        assert!(string_to_uid("ABC", Some(1)).is_err());
        assert!(string_to_uid("é", None).is_err());
        assert_eq!(uid_to_long(&h("00 00 2A")), 42); // U5
        assert_eq!(string_to_uid("00002A", Some(3)).map(|u| uid_to_long(&u)), Ok(42)); // U5
        assert_eq!(long_to_uid(42, 3), Ok(h("00 00 2A"))); // U6
        assert_eq!(long_to_uid(257, 1), Err(CodecError::IllegalData("UID 257 was too large for 1 bytes".into()))); // U6
        assert_eq!(long_to_uid(u64::MAX, 8), Ok(vec![0xFF; 8]));
        assert!(long_to_uid(1, 9).is_err());
    }

    #[test]
    fn row_encoding_framing() {
        let mut row = Vec::new();
        push_column(&mut row, &h("00 07"), &[7; 200]);
        push_column(&mut row, &[], &[]);
        assert_eq!(&row[..3], &[2, 0x00, 0x07]);
        assert_eq!(&row[3..5], &[0xC8, 0x01]); // 200 in LEB128
        let c: Vec<_> = columns(&row).collect();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], Ok(Column { qualifier: &h("00 07"), value: &[7; 200] }));
        assert_eq!(c[1], Ok(Column { qualifier: &[], value: &[] }));
        for cut in 1..row.len() - 2 {
            let errors = columns(&row[..cut]).filter(Result::is_err).count();
            assert_eq!(errors, 1, "cut at {cut}");
        }
        assert!(columns(&[0xFF; 12]).next().unwrap().is_err());
        assert_eq!(columns(&[]).count(), 0);
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::Int),
            (-300i64..300).prop_map(Value::Int),
            any::<f32>().prop_filter("not NaN", |f| !f.is_nan()).prop_map(Value::Float),
            any::<f64>().prop_filter("not NaN", |f| !f.is_nan()).prop_map(Value::Double),
        ]
    }

    /// A point in the R0 hour on a coarse grid so that duplicates are frequent: (is_ms, offset in ms, value).
    fn arb_point() -> impl Strategy<Value = (bool, i64, Value)> {
        (any::<bool>(), 0i64..12, arb_value()).prop_map(|(ms, step, v)| {
            if ms {
                (true, step * 500, v)
            } else {
                (false, step * 1000, v)
            }
        })
    }

    fn point_cell(p: &(bool, i64, Value)) -> (Vec<u8>, Vec<u8>) {
        let (ms, offset, value) = *p;
        let ts = if ms { i64::from(R0_BASE) * 1000 + offset } else { i64::from(R0_BASE) + offset / 1000 };
        (build_qualifier(ts, value.flags()).to_vec(), value.encode().to_vec())
    }

    /// `cells` (in write order) as merge operands, one per stretch between random boundaries `cuts`.
    fn operands_cut_at(cells: &[(Vec<u8>, Vec<u8>)], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
        let mut bounds: Vec<usize> = cuts.iter().map(|i| i.index(cells.len() + 1)).collect();
        bounds.extend([0, cells.len()]);
        bounds.sort_unstable();
        bounds
            .windows(2)
            .map(|w| {
                let mut op = Vec::new();
                for (q, v) in &cells[w[0]..w[1]] {
                    push_column(&mut op, q, v);
                }
                op
            })
            .collect()
    }

    /// Last write wins per millisecond instant: (timestamp, flags, bytes).
    fn last_write_wins(points: &[(bool, i64, Value)]) -> Vec<(i64, u8, Vec<u8>)> {
        let mut map = std::collections::BTreeMap::new();
        for p in points {
            map.insert(p.1, (p.2.flags(), p.2.encode().to_vec()));
        }
        map.into_iter().map(|(o, (f, b))| (i64::from(R0_BASE) * 1000 + o, f, b)).collect()
    }

    fn read_back(row: &[u8]) -> Vec<(i64, u8, Vec<u8>)> {
        row_points(R0_BASE, row)
            .expect("merged rows read back")
            .into_iter()
            .map(|p| (p.timestamp_ms, p.value.flags(), p.value.encode().to_vec()))
            .collect()
    }

    /// `row_values` is `row_points` without the qualifiers: the same points in the same order, or the same error.
    fn values_as_points(row: &[u8], reused: &mut Vec<TimedValue>) -> Result<(), TestCaseError> {
        let want = row_points(R0_BASE, row).map(|ps| ps.iter().map(TimedValue::from).collect::<Vec<_>>());
        let got = row_values(R0_BASE, row, reused).map(|()| reused.clone());
        // Bits, not float equality: -0.0 and 0.0 are different points.
        let bits = |r: Result<Vec<TimedValue>, CodecError>| {
            r.map(|ps| {
                ps.iter().map(|p| (p.timestamp_ms, p.value.flags(), p.value.encode().to_vec())).collect::<Vec<_>>()
            })
        };
        prop_assert_eq!(bits(got), bits(want));
        Ok(())
    }

    // A run is made of cells as they were written: a cell that reading fixes (length bits that do not match its
    // value) keeps the fragment as cells, so that a later cell at its qualifier still overwrites it (spec: ingest
    // §4.3 fixes, §4.5 W8).
    #[test]
    fn a_cell_reading_would_fix_keeps_its_fragment_as_cells() {
        let mut cells = Vec::new();
        push_column(&mut cells, &h("00 00"), &[0, 0, 0, 0, 0, 0, 0, 5]);
        push_column(&mut cells, &h("00 10"), &[6]);
        assert_eq!(cells_run(&cells), None);
        let mut fine = Vec::new();
        push_column(&mut fine, &h("00 07"), &[0, 0, 0, 0, 0, 0, 0, 5]);
        push_column(&mut fine, &h("00 10"), &[6]);
        let run = cells_run(&fine).expect("well-formed cells make a run");
        let mut later = Vec::new();
        push_column(&mut later, &h("00 07"), &[0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!(merge_row(None, &[&run, &later], false).unwrap(), merge_row(None, &[&fine, &later], false).unwrap());
    }

    // A compacted column is copied whole by the one-pass merge only when its own points are in strictly
    // increasing time: one with two points at an instant (or out of order) goes to the general merge.
    #[test]
    fn a_compacted_column_out_of_order_is_not_copied_whole() {
        for quals in ["00 10 00 10", "00 20 00 10", "00 10 00 20 00 20"] {
            let n = quals.split_whitespace().count() / 2;
            let mut row = Vec::new();
            push_column(&mut row, &h(quals), &[vec![7u8; n], vec![0]].concat());
            assert_eq!(merge_in_time_order(&[Cow::Borrowed(&row[..])], false), None, "{quals}");
        }
        let mut row = Vec::new();
        push_column(&mut row, &h("00 10 00 20"), &h("07 08 00"));
        assert_eq!(merge_in_time_order(&[Cow::Borrowed(&row[..])], false), Some(row.clone()));
    }

    proptest! {
        // spec: ingest §4.6 (compacted columns), §4.3 (single cells); the fold reads raw rows through row_values.
        #[test]
        fn row_values_are_row_points_without_qualifiers(
            points in prop::collection::vec(arb_point(), 1..40),
            noise in prop::collection::vec(any::<u8>(), 0..24),
        ) {
            let cells: Vec<(Vec<u8>, Vec<u8>)> = points.iter().map(point_cell).collect();
            let mut single_cells = Vec::new();
            for (q, v) in &cells {
                push_column(&mut single_cells, q, v);
            }
            // One buffer across rows, as the fold uses it: nothing of an earlier row may leak into the next.
            let mut reused = Vec::new();
            values_as_points(&single_cells, &mut reused)?;
            let merged = merge_row(None, &[&single_cells], false).expect("well-formed cells merge").row;
            values_as_points(&merged, &mut reused)?;
            if let Some(packed) = pack_row(&merged) {
                values_as_points(&packed, &mut reused)?;
            }
            values_as_points(&noise, &mut reused)?;
            let mut cut = merged.clone();
            cut.truncate(merged.len().saturating_sub(1 + noise.len() % 4));
            values_as_points(&cut, &mut reused)?;
        }
    }

    proptest! {
        #[test]
        fn value_round_trip(v in arb_value()) {
            let bytes = v.encode();
            prop_assert_eq!(value_len_from_flags(v.flags()), bytes.len());
            prop_assert_eq!(Value::decode(v.flags(), &bytes), Ok(v));
        }

        #[test]
        fn second_qualifier_round_trip(hour in 0i64..1_193_046, offset in 0i64..3600, flags in 0u8..16) {
            let base = hour * 3600;
            let q = build_qualifier(base + offset, flags);
            prop_assert_eq!(q.len(), 2);
            prop_assert_eq!(qualifier_offset_ms(&q, 0), Ok(offset as u32 * 1000));
            prop_assert_eq!(qualifier_flags_at(&q, 0), Ok(flags));
            prop_assert_eq!(base_time(base + offset), base as u32);
        }

        #[test]
        fn ms_qualifier_round_trip(hour in 1194i64..2_777_778, offset in 0i64..3_600_000, flags in 0u8..16) {
            let base = hour * 3600;
            let ts = base * 1000 + offset;
            let q = build_qualifier(ts, flags);
            prop_assert_eq!(q.len(), 4);
            prop_assert!(is_ms_qualifier(q[0]));
            prop_assert_eq!(qualifier_offset_ms(&q, 0), Ok(offset as u32));
            prop_assert_eq!(qualifier_flags_at(&q, 0), Ok(flags));
            prop_assert_eq!(base_time(ts), base as u32);
            prop_assert_eq!(qualifier_timestamp_ms(base_time(ts), &q, 0), Ok((base as u32) as i64 * 1000 + offset));
        }

        // A row built from fresh points (the bulk import's rows) is what the merge of the same points written
        // one after the other makes of it, in time order (the fast path) or not, split in two (`extend`) or not.
        #[test]
        fn fresh_rows_merge_as_points_written_one_by_one(
            points in prop::collection::vec(arb_point(), 0..24),
            ordered in any::<bool>(),
            cut in any::<prop::sample::Index>(),
            fix in any::<bool>(),
        ) {
            let mut points = points;
            if ordered {
                points.sort_by_key(|p| p.1);
                points.dedup_by_key(|p| p.1);
            }
            let ts = |p: &(bool, i64, Value)| {
                if p.0 { i64::from(R0_BASE) * 1000 + p.1 } else { i64::from(R0_BASE) + p.1 / 1000 }
            };
            let cells: Vec<(Vec<u8>, Vec<u8>)> = points.iter().map(point_cell).collect();
            let mut whole = FreshRow::default();
            for p in &points {
                whole.push(ts(p), &p.2);
            }
            let at = cut.index(points.len() + 1);
            let (mut first, mut second) = (FreshRow::default(), FreshRow::default());
            for p in &points[..at] {
                first.push(ts(p), &p.2);
            }
            for p in &points[at..] {
                second.push(ts(p), &p.2);
            }
            first.extend(&second);
            let expected = merge_cells(&cells, fix).row;
            prop_assert_eq!(whole.points() as usize, points.len());
            prop_assert_eq!(&whole.merged(fix), &expected);
            prop_assert_eq!(&first.merged(fix), &expected);
            let mut columns = Vec::new();
            whole.columns(&mut columns);
            let as_written: Vec<(Vec<u8>, Vec<u8>)> = cols(&columns);
            prop_assert_eq!(as_written, cells);
        }

        #[test]
        fn merge_is_split_independent_idempotent_and_last_write_wins(
            points in prop::collection::vec(arb_point(), 0..24),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            fix in any::<bool>(),
        ) {
            let cells: Vec<(Vec<u8>, Vec<u8>)> = points.iter().map(point_cell).collect();
            let one_each = merge_cells(&cells, fix);

            let ops = operands_cut_at(&cells, &cuts);
            let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
            let split = merge_row(None, &refs, fix).unwrap();
            prop_assert_eq!(&split, &one_each);
            if let Some((first, rest)) = refs.split_first() {
                prop_assert_eq!(&merge_row(Some(first), rest, fix).unwrap(), &one_each);
            }

            let again = merge_row(Some(&one_each.row), &[], fix).unwrap();
            prop_assert_eq!(&again.row, &one_each.row);
            prop_assert_eq!(&merge_row(None, &[&one_each.row], fix).unwrap().row, &one_each.row);

            if fix || one_each.variant_duplicates == 0 {
                prop_assert_eq!(read_back(&one_each.row), last_write_wins(&points));
                // Compacted: at most one data column.
                prop_assert!(cols(&one_each.row).len() <= 1);
            } else {
                // Left as written: every surviving cell is listed.
                prop_assert!(read_back(&one_each.row).len() > last_write_wins(&points).len());
            }
        }

        // merge_row's one-pass case (points in time order, fragment after fragment) must give exactly what the
        // general merge gives; points in random order (duplicates, overwrites) must leave it to the general one.
        #[test]
        fn the_one_pass_merge_gives_what_the_general_merge_gives(
            points in prop::collection::vec(arb_point(), 0..24),
            in_time_order in any::<bool>(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            compact_first in any::<bool>(),
            compact_fragments in any::<bool>(),
            fix in any::<bool>(),
        ) {
            let mut points = points;
            if in_time_order {
                points.sort_by_key(|p| p.1);
                points.dedup_by_key(|p| p.1);
            }
            let cells: Vec<(Vec<u8>, Vec<u8>)> = points.iter().map(point_cell).collect();
            let mut ops = operands_cut_at(&cells, &cuts);
            if compact_first {
                // A compacted row (as a flush or compaction leaves it) followed by later fragments.
                ops[0] = merge_columns(&[Cow::Borrowed(&ops[0][..])], fix).unwrap().row;
            }
            let as_cells = ops.clone();
            if compact_fragments {
                // Fragments as a flush writes them: a cells run when their points are in time order. Merged
                // alone it gives what merging its cells gives.
                for op in &mut ops {
                    if let Some(run) = cells_run(op) {
                        prop_assert_eq!(&merge_row(None, &[&run[..]], fix).unwrap(), &merge_row(None, &[&op[..]], fix).unwrap());
                        *op = run;
                    }
                }
            }
            let inputs: Vec<Cow<'_, [u8]>> = ops.iter().map(|op| Cow::Borrowed(&op[..])).collect();
            let one_pass = merge_in_time_order(&inputs, false);
            if in_time_order && !points.is_empty() {
                prop_assert!(one_pass.is_some());
            }
            let general = merge_columns(&inputs.iter().cloned().map(runs_as_cells).collect::<Vec<_>>(), fix).unwrap();
            if let Some(row) = one_pass {
                prop_assert_eq!(&row, &general.row);
                prop_assert_eq!((general.identical_duplicates, general.variant_duplicates), (0, 0));
            }
            let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(&merge_row(None, &refs, fix).unwrap(), &general);
            // Runs or their cells: the same merge.
            let cell_refs: Vec<&[u8]> = as_cells.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(&merge_row(None, &cell_refs, fix).unwrap(), &general);
        }

        // Fragments as a flush writes them (issue 22 item 5): each one's cells in time order become a cells run.
        // Merged, in any order of the fragments against each other, they give exactly what their cells give
        // (overwrites and duplicate counts included), and the one-pass merge copies them whole only when they
        // follow each other in time.
        #[test]
        fn compacted_fragments_merge_as_their_cells_do(
            points in prop::collection::vec(arb_point(), 0..24),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            fix in any::<bool>(),
        ) {
            let cells: Vec<(Vec<u8>, Vec<u8>)> = points.iter().map(point_cell).collect();
            let mut ops = operands_cut_at(&cells, &cuts);
            for op in &mut ops {
                // Each fragment's own points in time order (the later of two at an instant kept), as cells.
                let mut own: Vec<(u32, Vec<u8>, Vec<u8>)> = Vec::new();
                for c in columns(op) {
                    let c = c.unwrap();
                    let offset = point_offset_ms(c.qualifier);
                    own.retain(|(o, _, _)| *o != offset);
                    own.push((offset, c.qualifier.to_vec(), c.value.to_vec()));
                }
                own.sort_by_key(|(o, _, _)| *o);
                op.clear();
                for (_, q, v) in &own {
                    push_column(op, q, v);
                }
            }
            let as_cells: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
            // A fragment of several points becomes a run; one of one point stays its cell.
            let compacted: Vec<Vec<u8>> = ops.iter().map(|op| cells_run(op).unwrap_or_else(|| op.clone())).collect();
            let as_columns: Vec<&[u8]> = compacted.iter().map(Vec::as_slice).collect();
            let from_cells = merge_row(None, &as_cells, fix).unwrap();
            prop_assert_eq!(&merge_row(None, &as_columns, fix).unwrap(), &from_cells);
            let inputs: Vec<Cow<'_, [u8]>> = as_columns.iter().map(|c| Cow::Borrowed(*c)).collect();
            let one_pass = merge_in_time_order(&inputs, false);
            let general = merge_columns(&inputs.iter().cloned().map(runs_as_cells).collect::<Vec<_>>(), fix).unwrap();
            let offsets: Vec<u32> =
                ops.iter().flat_map(|op| columns(op).map(|c| point_offset_ms(c.unwrap().qualifier))).collect();
            let in_order = offsets.windows(2).all(|w| w[0] < w[1]);
            prop_assert_eq!(one_pass.is_some(), in_order && !offsets.is_empty());
            if let Some(row) = one_pass {
                prop_assert_eq!(&row, &general.row);
            }
        }

        #[test]
        fn columns_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            for c in columns(&bytes) {
                let _ = c;
            }
        }

        #[test]
        fn merge_and_read_never_panic(
            existing in prop::option::of(prop::collection::vec(any::<u8>(), 0..48)),
            ops in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..32), 0..4),
            base in any::<u32>(),
            fix in any::<bool>(),
        ) {
            let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
            let _ = merge_row(existing.as_deref(), &refs, fix);
            for op in &ops {
                let _ = row_points(base, op);
            }
        }

        #[test]
        fn garbage_columns_merge_idempotently(
            garbage in prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..7), prop::collection::vec(any::<u8>(), 0..10)),
                0..6,
            ),
            base in any::<u32>(),
            fix in any::<bool>(),
        ) {
            // Well-framed rows with arbitrary qualifiers and values exercise every compaction branch.
            let ops: Vec<Vec<u8>> = garbage.iter().map(|(q, v)| row_of(&[(q, v)])).collect();
            let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
            let merged = merge_row(None, &refs, fix).unwrap();
            let again = merge_row(Some(&merged.row), &[], fix).unwrap();
            prop_assert_eq!(&again.row, &merged.row);
            let _ = row_points(base, &merged.row);
            for (q, v) in &garbage {
                let _ = split_compacted(q, v);
                let _ = split_append(v);
                let _ = Value::decode(q.first().copied().unwrap_or(0), v);
                let _ = qualifier_offset_ms(q, 0);
                let _ = string_to_uid(&String::from_utf8_lossy(v), Some(q.len()));
            }
        }
    }
}
