//! OpenTSDB's storage layout (spec: ingest §4, §5). STUB: signatures fixed, bodies being written.
//!
//! Cells of OpenTSDB's `tsdb` table: row keys, 2/4-byte qualifiers, value widths, compacted columns; UID
//! helpers of `tsdb-uid`; and rtsd's own row encoding (a RocksDB value holding the columns of one HBase row).
use smallvec::SmallVec;

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
    #[error("{0}")]
    IllegalData(String),
}

impl Value {
    /// The flags nibble (length bits and float bit), e.g. 0x00, 0x01, 0x03, 0x07, 0x0B, 0x0F.
    pub fn flags(&self) -> u8 {
        todo!()
    }
    /// The stored bytes (big-endian, smallest integer width).
    pub fn encode(&self) -> ValueBytes {
        todo!()
    }
    /// Reads a value back from its flags and bytes, with OpenTSDB's read tolerance (spec: ingest §4.3).
    pub fn decode(_flags: u8, _bytes: &[u8]) -> Result<Value, CodecError> {
        todo!()
    }
}

/// The hour a timestamp (seconds or milliseconds, by magnitude) belongs to, in seconds, as written into the row
/// key: low 32 bits (wraps past 2106, spec: ingest §4.2).
pub fn base_time(_timestamp: i64) -> u32 {
    todo!()
}

/// The qualifier of one point (spec: ingest §4.3, §5.1).
pub fn build_qualifier(_timestamp: i64, _flags: u8) -> QualifierBytes {
    todo!()
}
