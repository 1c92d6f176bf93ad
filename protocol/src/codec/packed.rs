//! rtsd's packed form of a row's data points as stored: the compacted column of a row, re-encoded column-wise so
//! that RocksDB's compression has little left to do (issue 7 item 4: disk bytes/point).
//!
//! OpenTSDB's compacted column (spec: ingest §4.6) spends 2 or 4 qualifier bytes and 1-8 value bytes on every
//! point; an hour of 10-second doubles is 3600 bytes that zstd only brings to ~1,400. A packed column keeps the
//! same information split into streams of small integers:
//!
//! * per point a *kind* byte: the qualifier's flags nibble, whether it is a millisecond qualifier and its two
//!   reserved bits, and whether the value is stored raw;
//! * per point its offset from the base hour, in seconds when every offset is a whole second, else in ms;
//! * the values that are integers, or floats whose shortest decimal form reproduces their exact bits (data sent
//!   as text like `58.97`), as integer mantissas scaled to one decimal exponent for the whole column — the idea
//!   VictoriaMetrics applies to its blocks. Gorilla's XOR of float bits does poorly on decimal-derived floats,
//!   whose mantissa bits look random; the decimal mantissas of a gauge move by small steps;
//! * the bytes of every other value as they are (NaN is never stored by OpenTSDB, but -0.0, odd float widths and
//!   floats without a short decimal form are possible).
//!
//! Each integer stream is stored as its values, deltas or deltas of deltas (whichever is smallest), bit-packed
//! at one width after subtracting the minimum (frame of reference), or as a bitmap of non-zero entries plus the
//! non-zero ones when most are zero (a gauge that rarely changes). Regular timestamps are a width-0 stream: no
//! bytes at all.
//!
//! [`unpack`] gives back exactly the qualifier and value bytes of the compacted column [`pack`] was given, to
//! the bit: [`pack`] checks every value it turned into a number by decoding it again, and stores it raw when
//! the bits would differ. So every reader that shows cells (scan, export, fsck) expands a packed row into
//! OpenTSDB's form ([`super::expand_row`]) and sees exactly what was compacted.
//!
//! A packed column sits in its row under the empty qualifier, which OpenTSDB never writes (its qualifiers are
//! 2+ bytes), and which sorts before every other column: [`super::is_packed`] reads one byte.

use super::{illegal, walk_compacted, CodecError, QualifierBytes, Value, FLAGS_MASK, FLAG_FLOAT, LENGTH_MASK, MS_FLAG};

/// The first byte of a packed column's value: the layout version, so another layout can come later.
const VERSION: u8 = 1;
/// At most this many points in one packed column: more than an hour of distinct millisecond offsets (2^22), so
/// any compacted row rtsd writes fits, while a corrupt count cannot make [`unpack`] allocate without bound.
const MAX_POINTS: usize = 1 << 23;
/// Kind byte: the value is in the raw bytes, not in the number stream.
const KIND_RAW: u8 = 0x80;
/// Kind byte: a 4-byte millisecond qualifier (else a 2-byte second one).
const KIND_MS: u8 = 0x40;
/// Kind byte: the millisecond qualifier's two reserved bits (spec: ingest §4.3), kept so that decoding is exact.
const KIND_RESERVED_SHIFT: u8 = 4;
/// Powers of ten a double holds exactly (10^22 is the last): the range in which `m / 10^e` is one correctly
/// rounded division.
const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];
/// Powers of ten a single holds exactly (10^10 is the last).
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];
/// Integers a double (single) holds exactly: mantissas up to here divide without a first rounding.
const EXACT_F64: i64 = 1 << 53;
const EXACT_F32: i64 = 1 << 24;

/// What a value is, from its flags: how [`pack`] may turn it into a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Big-endian two's complement on 1..=8 bytes.
    Int(usize),
    F32,
    F64,
    /// Anything else (a float flagged with another width): only raw.
    Other,
}

fn class(flags: u8) -> Class {
    let len = usize::from(flags & LENGTH_MASK) + 1;
    match (flags & FLAG_FLOAT != 0, len) {
        (false, n) => Class::Int(n),
        (true, 4) => Class::F32,
        (true, 8) => Class::F64,
        _ => Class::Other,
    }
}

/// A value's bytes as an integer of `10^-exponent` units, and back.
///
/// Floats: `mantissa / 10^exponent`, computed as one IEEE division of two exactly held numbers, which is the
/// correctly rounded value of the decimal (so the shortest decimal form of a float comes back to its bits).
/// Integers: `mantissa / 10^exponent` exactly.
fn decode_number(class: Class, mantissa: i64, exponent: u8, out: &mut Vec<u8>) -> Result<(), CodecError> {
    match (class, number_value(class, mantissa, exponent)?) {
        (Class::Int(len), Value::Int(v)) => out.extend_from_slice(&v.to_be_bytes()[8 - len..]),
        (_, Value::Float(f)) => out.extend_from_slice(&f.to_bits().to_be_bytes()),
        (_, Value::Double(d)) => out.extend_from_slice(&d.to_bits().to_be_bytes()),
        _ => return Err(bad("number of a raw-only kind")),
    }
    Ok(())
}

/// The value [`decode_number`]'s bytes read as ([`Value::decode`] of them), without the bytes: an integer is
/// what its `len` bytes hold, sign-extended.
fn number_value(class: Class, mantissa: i64, exponent: u8) -> Result<Value, CodecError> {
    let e = usize::from(exponent);
    Ok(match class {
        Class::Int(len) => {
            let scale = 10i64.checked_pow(u32::from(exponent)).ok_or_else(|| bad("integer exponent"))?;
            if mantissa % scale != 0 {
                return Err(bad("integer not a multiple of its scale"));
            }
            let shift = 64 - 8 * len as u32;
            Value::Int(((mantissa / scale) << shift) >> shift)
        }
        Class::F32 => Value::Float((mantissa as f32) / POW10_F32.get(e).ok_or_else(|| bad("float exponent"))?),
        Class::F64 => Value::Double((mantissa as f64) / POW10_F64.get(e).ok_or_else(|| bad("double exponent"))?),
        Class::Other => return Err(bad("number of a raw-only kind")),
    })
}

/// The smallest `(mantissa, exponent)` whose [`decode_number`] gives back `bytes` exactly, if there is one.
fn to_number(class: Class, bytes: &[u8]) -> Option<(i64, u8)> {
    match class {
        Class::Int(len) => {
            // Sign-extend: truncating back to `len` bytes restores exactly these bytes.
            let mut full = if bytes[0] & 0x80 != 0 { [0xFF; 8] } else { [0; 8] };
            full[8 - len..].copy_from_slice(bytes);
            Some((i64::from_be_bytes(full), 0))
        }
        Class::F32 => {
            let bits = u32::from_be_bytes(bytes.try_into().ok()?);
            let x = f64::from(f32::from_bits(bits));
            (0..POW10_F32.len()).find_map(|e| {
                let m = (x * POW10_F64[e]).round();
                // Also false for NaN and infinities, which have no decimal form.
                if m.abs().partial_cmp(&(EXACT_F32 as f64)) != Some(std::cmp::Ordering::Less) {
                    return None;
                }
                ((m as f32) / POW10_F32[e]).to_bits().eq(&bits).then_some((m as i64, e as u8))
            })
        }
        Class::F64 => {
            let bits = u64::from_be_bytes(bytes.try_into().ok()?);
            let x = f64::from_bits(bits);
            (0..POW10_F64.len()).find_map(|e| {
                let m = (x * POW10_F64[e]).round();
                if m.abs().partial_cmp(&(EXACT_F64 as f64)) != Some(std::cmp::Ordering::Less) {
                    return None;
                }
                (m / POW10_F64[e]).to_bits().eq(&bits).then_some((m as i64, e as u8))
            })
        }
        Class::Other => None,
    }
}

fn bad(what: &str) -> CodecError {
    illegal(format!("Corrupted packed column: {what}"))
}

/// Packs a compacted column (qualifiers ‖, values ‖ meta byte; spec: ingest §4.6) into a packed column's value.
/// `None` when it cannot be split into points as OpenTSDB's readers split it (such a column is kept as it is),
/// or when it holds fewer than two points or more than [`MAX_POINTS`].
pub fn pack(qualifier: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let &meta = value.last()?;
    let mut kinds: Vec<u8> = Vec::with_capacity(qualifier.len() / 2);
    let mut offsets: Vec<i64> = Vec::with_capacity(qualifier.len() / 2);
    let mut numbers: Vec<(usize, i64, u8)> = Vec::with_capacity(qualifier.len() / 2);
    let mut values: Vec<&[u8]> = Vec::with_capacity(qualifier.len() / 2);
    walk_compacted(qualifier, value, |q, v| {
        let (kind, offset_ms) = match *q {
            [a, b] => (b & FLAGS_MASK, i64::from(u16::from_be_bytes([a, b]) >> 4) * 1000),
            [a, b, c, d] => {
                let q = u32::from_be_bytes([a, b, c, d]);
                let kind = KIND_MS | (d & 0x3F);
                (kind, i64::from((q & !MS_FLAG) >> 6))
            }
            _ => return Err(bad("qualifier")),
        };
        if let Some((m, e)) = to_number(class(kind & FLAGS_MASK), v) {
            numbers.push((kinds.len(), m, e));
        }
        kinds.push(kind);
        offsets.push(offset_ms);
        values.push(v);
        Ok(())
    })
    .ok()?;
    let n = kinds.len();
    if !(2..=MAX_POINTS).contains(&n) {
        return None;
    }
    // One exponent for the column: the most decimals any value needs. A value that cannot be scaled to it
    // exactly (its mantissa would pass 2^53, say) is stored raw instead.
    let exponent = numbers.iter().map(|&(_, _, e)| e).max().unwrap_or(0);
    let mut scaled: Vec<i64> = Vec::with_capacity(numbers.len());
    let mut check = Vec::with_capacity(8);
    // Every point is raw unless its number below comes back to its exact bytes.
    for kind in kinds.iter_mut() {
        *kind |= KIND_RAW;
    }
    for (i, m, e) in numbers {
        let class = class(kinds[i] & FLAGS_MASK);
        let Some(s) = 10i64.checked_pow(u32::from(exponent - e)).and_then(|f| m.checked_mul(f)) else { continue };
        check.clear();
        if decode_number(class, s, exponent, &mut check).is_ok() && check == values[i] {
            kinds[i] &= !KIND_RAW;
            // In point order: the number stream holds exactly the points that are not raw.
            scaled.push(s);
        }
    }
    let unit: i64 = if offsets.iter().all(|o| o % 1000 == 0) { 1000 } else { 1 };
    let ticks: Vec<i64> = offsets.iter().map(|o| o / unit).collect();

    let mut out = Vec::with_capacity(16 + n * 2);
    out.push(VERSION);
    put_varint(&mut out, n as u64);
    out.push(meta);
    put_ints(&mut out, &kinds.iter().map(|&k| i64::from(k)).collect::<Vec<_>>());
    out.push(u8::from(unit == 1000));
    put_ints(&mut out, &ticks);
    out.push(exponent);
    put_ints(&mut out, &scaled);
    for (kind, v) in kinds.iter().zip(&values) {
        if kind & KIND_RAW != 0 {
            out.extend_from_slice(v);
        }
    }
    Some(out)
}

/// A packed column's header: its version (checked), point count (checked against the bounds [`pack`] writes)
/// and the compacted value's meta byte.
fn header(r: &mut Reader<'_>) -> Result<(usize, u8), CodecError> {
    if r.byte()? != VERSION {
        return Err(bad("unknown version"));
    }
    let n = usize::try_from(r.varint()?).map_err(|_| bad("count"))?;
    if !(2..=MAX_POINTS).contains(&n) {
        return Err(bad("count"));
    }
    Ok((n, r.byte()?))
}

/// How many points a packed column holds, from its header alone (for sizing what its points go into).
pub fn point_count(packed: &[u8]) -> Result<usize, CodecError> {
    header(&mut Reader { rest: packed }).map(|(n, _)| n)
}

/// One point of a packed column, as [`walk`] finds it: its value still as stored.
enum Stored<'a> {
    Raw(&'a [u8]),
    Number { class: Class, mantissa: i64, exponent: u8 },
}

/// Walks a packed column's points in column order: each one's qualifier (exactly as in the compacted column it
/// was packed from) and value as stored. Returns the meta byte.
fn walk<'p>(
    packed: &'p [u8],
    mut each: impl FnMut(QualifierBytes, Stored<'p>) -> Result<(), CodecError>,
) -> Result<u8, CodecError> {
    let mut r = Reader { rest: packed };
    let (n, meta) = header(&mut r)?;
    let kinds = get_ints(&mut r, n)?;
    let unit: i64 = match r.byte()? {
        0 => 1,
        1 => 1000,
        _ => return Err(bad("time unit")),
    };
    let ticks = get_ints(&mut r, n)?;
    let exponent = r.byte()?;
    let numbers = kinds.iter().filter(|&&k| k & i64::from(KIND_RAW) == 0).count();
    let scaled = get_ints(&mut r, numbers)?;
    let mut scaled = scaled.into_iter();
    for (&kind, &tick) in kinds.iter().zip(&ticks) {
        let kind = u8::try_from(kind).map_err(|_| bad("kind"))?;
        let flags = kind & FLAGS_MASK;
        let offset_ms = tick.checked_mul(unit).ok_or_else(|| bad("offset"))?;
        let qualifier = if kind & KIND_MS != 0 {
            let offset = u32::try_from(offset_ms).ok().filter(|o| *o < 1 << 22).ok_or_else(|| bad("offset"))?;
            let reserved = u32::from((kind >> KIND_RESERVED_SHIFT) & 0x03) << KIND_RESERVED_SHIFT;
            QualifierBytes::from_slice(&(MS_FLAG | offset << 6 | reserved | u32::from(flags)).to_be_bytes())
        } else {
            if offset_ms % 1000 != 0 {
                return Err(bad("second offset"));
            }
            let offset = u16::try_from(offset_ms / 1000).ok().filter(|o| *o < 0xF00).ok_or_else(|| bad("offset"))?;
            QualifierBytes::from_slice(&(offset << 4 | u16::from(flags)).to_be_bytes())
        };
        let value = if kind & KIND_RAW != 0 {
            Stored::Raw(r.bytes(usize::from(flags & LENGTH_MASK) + 1)?)
        } else {
            let mantissa = scaled.next().ok_or_else(|| bad("numbers"))?;
            Stored::Number { class: class(flags), mantissa, exponent }
        };
        each(qualifier, value)?;
    }
    if !r.rest.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(meta)
}

/// The compacted column (qualifier, value with its meta byte) that [`pack`] was given.
pub fn unpack(packed: &[u8]) -> Result<(Vec<u8>, Vec<u8>), CodecError> {
    let n = point_count(packed)?;
    let mut qualifier = Vec::with_capacity(n * 2);
    let mut value = Vec::with_capacity(n * 4 + 1);
    let meta = walk(packed, |q, stored| {
        qualifier.extend_from_slice(&q);
        match stored {
            Stored::Raw(bytes) => value.extend_from_slice(bytes),
            Stored::Number { class, mantissa, exponent } => decode_number(class, mantissa, exponent, &mut value)?,
        }
        Ok(())
    })?;
    value.push(meta);
    Ok((qualifier, value))
}

/// The points of a packed column, in column order: each one's qualifier and value exactly as walking the
/// compacted column [`unpack`] gives back reads them (see `super::row_points`), without building that column:
/// a raw query over closed hours decodes every point of every row it reads (issue 22 item 5: expanding and
/// parsing again was ~30% of a raw q1 of data set B).
pub fn for_each_point(
    packed: &[u8],
    mut each: impl FnMut(QualifierBytes, Value) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    walk(packed, |q, stored| {
        let flags = q[q.len() - 1] & FLAGS_MASK;
        let value = match stored {
            Stored::Raw(bytes) => Value::decode(flags, bytes)?,
            Stored::Number {
                class: class @ (Class::Int(1 | 2 | 4 | 8) | Class::F32 | Class::F64),
                mantissa,
                exponent,
            } => number_value(class, mantissa, exponent)?,
            Stored::Number { class, mantissa, exponent } => {
                // A width no reader takes (an integer of 3 bytes): the compacted column's error, from its bytes.
                let mut bytes = Vec::with_capacity(8);
                decode_number(class, mantissa, exponent, &mut bytes)?;
                Value::decode(flags, &bytes)?
            }
        };
        each(q, value)
    })?;
    Ok(())
}

/// The lengths (qualifier, value with its meta byte) of the compacted column [`unpack`] gives back, read from the
/// point kinds alone: what a packed row counts as against a byte limit, which is about OpenTSDB's cells.
pub fn unpacked_lens(packed: &[u8]) -> Result<(usize, usize), CodecError> {
    let mut r = Reader { rest: packed };
    let (n, _meta) = header(&mut r)?;
    let (mut qualifier, mut value) = (0, 1);
    for kind in get_ints(&mut r, n)? {
        qualifier += if kind & i64::from(KIND_MS) != 0 { 4 } else { 2 };
        value += usize::from(kind as u8 & LENGTH_MASK) + 1;
    }
    Ok((qualifier, value))
}

// ---------------------------------------------------------------------------------------------------------------
// Integer streams

/// How a stream's residuals are stored (the header byte's bits 2-3).
const PACK_FRAME: u8 = 0;
const PACK_SPARSE: u8 = 1;

/// Transforms tried on a stream (the header byte's bits 0-1): how many values lead before the residuals.
const TRANSFORMS: [usize; 3] = [0, 1, 2];

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).max(1).div_ceil(7)
}

/// `values` after `order` rounds of differencing, with wrapping arithmetic so that every i64 sequence goes
/// through: the first `order` entries are the leading values (first value, first delta), the rest residuals.
fn difference(values: &[i64], order: usize) -> Vec<i64> {
    let mut v = values.to_vec();
    for round in 0..order {
        for i in (round + 1..v.len()).rev() {
            v[i] = v[i].wrapping_sub(v[i - 1]);
        }
    }
    v
}

fn undifference(v: &mut [i64], order: usize) {
    for round in (0..order).rev() {
        for i in round + 1..v.len() {
            v[i] = v[i].wrapping_add(v[i - 1]);
        }
    }
}

/// Bits needed for every `r - min` of `residuals`, and that minimum.
fn frame(residuals: impl Iterator<Item = i64>) -> (i64, u32) {
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    for r in residuals {
        (min, max) = (min.min(r), max.max(r));
    }
    if min > max {
        return (0, 0);
    }
    // min <= r <= max, so r - min is at most max - min, which fits in u64.
    (min, 64 - (max.wrapping_sub(min) as u64).leading_zeros())
}

fn frame_size(count: usize, min: i64, width: u32) -> usize {
    varint_len(zigzag(min)) + 1 + (count * width as usize).div_ceil(8)
}

/// Writes a stream of integers (their count is known to the reader) in the smallest of the forms described in
/// the module docs.
fn put_ints(out: &mut Vec<u8>, values: &[i64]) {
    // (size, packing, order) of the smallest form; each order's differences are made from the previous ones.
    let mut best: Option<(usize, u8, usize)> = None;
    let mut v = values.to_vec();
    for order in TRANSFORMS {
        if order > values.len() {
            break;
        }
        if order > 0 {
            for i in (order..v.len()).rev() {
                v[i] = v[i].wrapping_sub(v[i - 1]);
            }
        }
        let residuals = &v[order..];
        let lead: usize = v[..order].iter().map(|&x| varint_len(zigzag(x))).sum();
        let (min, width) = frame(residuals.iter().copied());
        let dense = frame_size(residuals.len(), min, width);
        let nonzero = residuals.iter().copied().filter(|&r| r != 0);
        let (nmin, nwidth) = frame(nonzero.clone());
        let sparse = residuals.len().div_ceil(8) + frame_size(nonzero.count(), nmin, nwidth);
        for (packing, size) in [(PACK_FRAME, dense), (PACK_SPARSE, sparse)] {
            if best.is_none_or(|b| lead + size < b.0) {
                best = Some((lead + size, packing, order));
            }
        }
    }
    let Some((_, packing, order)) = best else { return };
    let v = difference(values, order);
    out.push(order as u8 | packing << 2);
    for &x in &v[..order] {
        put_varint(out, zigzag(x));
    }
    let residuals = &v[order..];
    if packing == PACK_SPARSE {
        let mut bitmap = vec![0u8; residuals.len().div_ceil(8)];
        for (i, &r) in residuals.iter().enumerate() {
            if r != 0 {
                bitmap[i / 8] |= 1 << (i % 8);
            }
        }
        out.extend_from_slice(&bitmap);
        let nonzero: Vec<i64> = residuals.iter().copied().filter(|&r| r != 0).collect();
        put_frame(out, &nonzero);
    } else {
        put_frame(out, residuals);
    }
}

fn put_frame(out: &mut Vec<u8>, residuals: &[i64]) {
    let (min, width) = frame(residuals.iter().copied());
    put_varint(out, zigzag(min));
    out.push(width as u8);
    let mut bits = BitWriter { out, acc: 0, filled: 0 };
    for &r in residuals {
        bits.put(r.wrapping_sub(min) as u64, width);
    }
    bits.finish();
}

fn get_ints(r: &mut Reader<'_>, count: usize) -> Result<Vec<i64>, CodecError> {
    let header = r.byte()?;
    let (order, packing) = (usize::from(header & 0x03), header >> 2);
    if order > 2 || order > count || packing > PACK_SPARSE {
        return Err(bad("stream header"));
    }
    let mut v = Vec::with_capacity(count);
    for _ in 0..order {
        v.push(unzigzag(r.varint()?));
    }
    let residuals = count - order;
    if packing == PACK_SPARSE {
        let bitmap = r.bytes(residuals.div_ceil(8))?;
        let nonzero = (0..residuals).filter(|i| bitmap[i / 8] & (1 << (i % 8)) != 0).count();
        let mut values = Vec::with_capacity(nonzero);
        get_frame(r, nonzero, &mut values)?;
        let mut values = values.into_iter();
        for i in 0..residuals {
            let set = bitmap[i / 8] & (1 << (i % 8)) != 0;
            v.push(if set { values.next().ok_or_else(|| bad("sparse stream"))? } else { 0 });
        }
    } else {
        get_frame(r, residuals, &mut v)?;
    }
    undifference(&mut v, order);
    Ok(v)
}

/// Appends a frame's `count` values to `out`.
fn get_frame(r: &mut Reader<'_>, count: usize, out: &mut Vec<i64>) -> Result<(), CodecError> {
    let min = unzigzag(r.varint()?);
    let width = u32::from(r.byte()?);
    if width > 64 {
        return Err(bad("bit width"));
    }
    let packed = r.bytes((count * width as usize).div_ceil(8))?;
    let mut bits = BitReader { bytes: packed, acc: 0, filled: 0 };
    out.extend((0..count).map(|_| min.wrapping_add(bits.get(width) as i64)));
    Ok(())
}

/// Little-endian bit packing: values of `width` bits, least significant first.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    filled: u32,
}

impl BitWriter<'_> {
    fn put(&mut self, v: u64, width: u32) {
        if width == 0 {
            return;
        }
        self.acc |= u128::from(v) << self.filled;
        self.filled += width;
        while self.filled >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.filled -= 8;
        }
    }

    fn finish(self) {
        if self.filled > 0 {
            self.out.push(self.acc as u8);
        }
    }
}

struct BitReader<'a> {
    bytes: &'a [u8],
    acc: u128,
    filled: u32,
}

impl BitReader<'_> {
    /// The next `width` bits; zeros past the end (the caller sized `bytes` for every value it reads).
    fn get(&mut self, width: u32) -> u64 {
        if width == 0 {
            return 0;
        }
        while self.filled < width {
            let (&b, rest) = self.bytes.split_first().unwrap_or((&0, &[]));
            self.bytes = rest;
            self.acc |= u128::from(b) << self.filled;
            self.filled += 8;
        }
        let v = (self.acc & ((1u128 << width) - 1)) as u64;
        self.acc >>= width;
        self.filled -= width;
        v
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, CodecError> {
        let (&b, rest) = self.rest.split_first().ok_or_else(|| bad("truncated"))?;
        self.rest = rest;
        Ok(b)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if n > self.rest.len() {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{build_qualifier, expand_row, merge_row, pack_row, push_column, row_points, Value};
    use super::*;
    use proptest::prelude::*;

    const BASE: i64 = 1356998400;

    /// A compacted column from (qualifier, value) cells, with its meta byte.
    fn compacted(cells: &[(Vec<u8>, Vec<u8>)], meta: u8) -> (Vec<u8>, Vec<u8>) {
        let mut q = Vec::new();
        let mut v = Vec::new();
        for (cq, cv) in cells {
            q.extend_from_slice(cq);
            v.extend_from_slice(cv);
        }
        v.push(meta);
        (q, v)
    }

    fn second(offset: i64, value: Value) -> (Vec<u8>, Vec<u8>) {
        (build_qualifier(BASE + offset, value.flags()).to_vec(), value.encode().to_vec())
    }

    // A frame of every bit width (0-64) and count (partial last bytes included) reads back the values written,
    // at the end of a stream and followed by more bytes, appended to what the output held.
    #[test]
    fn frames_of_every_width_read_back_what_was_written() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for width in 0..=64u32 {
            for count in [1usize, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 360] {
                let min = (next() as i64) >> 2;
                let span = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
                let mut values: Vec<i64> = (0..count).map(|_| min.wrapping_add((next() & span) as i64)).collect();
                // The widest value, so the frame's width is `width` exactly (with two values or more).
                values[count / 2] = min.wrapping_add(span as i64);
                values[0] = min;
                let mut bytes = Vec::new();
                put_frame(&mut bytes, &values);
                for trailing in [&[][..], &[0xFF; 9][..]] {
                    let mut stream = bytes.clone();
                    stream.extend_from_slice(trailing);
                    let mut r = Reader { rest: &stream };
                    let mut got = vec![42];
                    get_frame(&mut r, count, &mut got).unwrap();
                    assert_eq!(got[0], 42, "appended after what was there");
                    assert_eq!(&got[1..], &values[..], "width {width}, {count} values");
                    assert_eq!(r.rest, trailing, "width {width}, {count} values");
                }
            }
        }
    }

    fn milli(offset_ms: i64, value: Value) -> (Vec<u8>, Vec<u8>) {
        (build_qualifier(BASE * 1000 + offset_ms, value.flags()).to_vec(), value.encode().to_vec())
    }

    /// A value's type and bits (NaN compared by its bits).
    fn value_bits(value: Value) -> u64 {
        match value {
            Value::Int(i) => i as u64,
            Value::Float(f) => u64::from(f.to_bits()),
            Value::Double(d) => d.to_bits(),
        }
    }

    fn round_trip(cells: &[(Vec<u8>, Vec<u8>)], meta: u8) -> Vec<u8> {
        let (q, v) = compacted(cells, meta);
        let packed = pack(&q, &v).expect("packable");
        assert_eq!(unpack(&packed).expect("unpacks"), (q, v), "cells {cells:?}");
        packed
    }

    #[test]
    fn every_value_kind_comes_back_to_the_bit() {
        let values = [
            Value::Int(0),
            Value::Int(-1),
            Value::Int(127),
            Value::Int(-128),
            Value::Int(300),
            Value::Int(-32768),
            Value::Int(70_000),
            Value::Int(i64::from(i32::MIN)),
            Value::Int(1 << 40),
            Value::Int(i64::MAX),
            Value::Int(i64::MIN),
            Value::Float(42.5),
            Value::Float(58.97),
            Value::Float(0.1),
            Value::Float(-0.0),
            Value::Float(f32::MAX),
            Value::Float(f32::MIN_POSITIVE),
            Value::Float(1e-45),
            Value::Float(std::f32::consts::PI),
            Value::Double(58.97),
            Value::Double(12.3),
            Value::Double(-0.0),
            Value::Double(0.1 + 0.2),
            Value::Double(1e300),
            Value::Double(5e-324),
            Value::Double(f64::MAX),
            Value::Double(-123456.789),
            Value::Double(std::f64::consts::E),
            Value::Double(f64::INFINITY),
        ];
        let cells: Vec<_> = values.iter().enumerate().map(|(i, v)| second(i as i64 * 7, *v)).collect();
        round_trip(&cells, 0);
        let cells: Vec<_> = values.iter().enumerate().map(|(i, v)| milli(i as i64 * 7 + 3, *v)).collect();
        round_trip(&cells, 0);
        // Each value next to a decimal neighbour, so the column's exponent is not 0.
        for v in values {
            round_trip(&[second(0, Value::Double(1.25)), second(10, v), milli(10_001, Value::Float(0.5))], 1);
        }
    }

    #[test]
    fn odd_widths_reserved_bits_nan_and_disorder_come_back() {
        let cells = vec![
            // A 3-byte integer and a 2-byte "float": flags OpenTSDB's readers reject, kept as they are.
            (vec![0x00, 0x12], vec![0x80, 0x00, 0x01]),
            (vec![0x00, 0x29], vec![0x12, 0x34]),
            // A millisecond qualifier with its reserved bits set.
            (vec![0xF0, 0x00, 0x02, 0x37], vec![0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
            // NaN bits (never stored by OpenTSDB, but bytes on disk can be anything).
            (vec![0x00, 0x5F], f64::NAN.to_bits().to_be_bytes().to_vec()),
            (vec![0x00, 0x6B], 0x7FC0_0001u32.to_be_bytes().to_vec()),
            // Offsets out of order and a duplicate instant.
            (vec![0x00, 0x30], vec![0x05]),
            (vec![0x00, 0x30], vec![0x05]),
            (vec![0x00, 0x20], vec![0xFF]),
        ];
        round_trip(&cells, 0x01);
        round_trip(&cells, 0x7E);
    }

    #[test]
    fn a_regular_hour_of_decimal_gauges_packs_its_timestamps_into_nothing() {
        // An hour every 10 s of a 2-decimal gauge moving by at most 2.00: what data set B's metric 0 looks like.
        let mut x: i64 = 5897;
        let cells: Vec<_> = (0..360)
            .map(|i| {
                x = (x + (i * 37 % 401) - 200).clamp(0, 10_000);
                second(i * 10, Value::Double(x as f64 / 100.0))
            })
            .collect();
        let packed = round_trip(&cells, 0);
        let (q, v) = compacted(&cells, 0);
        assert_eq!(q.len() + v.len(), 360 * 10 + 1);
        // Version, 360 points, meta 0, kinds (no transform, frame of min 0x0F (zigzag 30), width 0), time unit s;
        // then times (delta form: offset 0 leads, every step 10 (zigzag 20) at width 0), exponent 2, and the values:
        // 359 steps of 9 bits.
        let expected = [1, 0xE8, 0x02, 0, 0, 30, 0, 1, 1, 0, 20, 0, 2];
        assert_eq!(&packed[..expected.len()], &expected[..]);
        assert!(packed.len() <= 20 + (359 * 9usize).div_ceil(8), "{} bytes", packed.len());
    }

    #[test]
    fn exact_bytes_of_a_small_column() {
        // 3 integer points at +0, +10, +20 s: 1, 2, 3.
        let cells = [second(0, Value::Int(1)), second(10, Value::Int(2)), second(20, Value::Int(3))];
        let packed = round_trip(&cells, 0);
        #[rustfmt::skip]
        let expected = [
            1, 3, 0,          // version, 3 points, meta byte 0
            0, 0, 0,          // kinds: no transform, frame of min 0, width 0 (all 0x00: 1-byte integers)
            1,                // times in seconds
            1, 0, 20, 0,      // times: delta form, lead 0, frame min 10 (zigzag 20) width 0
            0,                // exponent 0
            0, 2, 2, 0b100100, // values: no transform, frame min 1 (zigzag 2), width 2: 00 01 10
        ];
        assert_eq!(packed, expected);
    }

    #[test]
    fn unpacked_lengths_come_from_the_kinds_alone() {
        let cells = [second(0, Value::Int(5)), milli(2_500, Value::Double(0.1 + 0.2)), second(3, Value::Float(1.5))];
        let (q, v) = compacted(&cells, 1);
        assert_eq!(unpacked_lens(&pack(&q, &v).unwrap()), Ok((q.len(), v.len())));
        assert_eq!((q.len(), v.len()), (8, 1 + 8 + 4 + 1));
    }

    #[test]
    fn columns_that_are_not_compacted_are_not_packed() {
        // One point, a column that does not split, a missing meta byte.
        assert_eq!(pack(&[0x00, 0x00], &[0x01, 0x00]), None);
        assert_eq!(pack(&[0x00, 0x00, 0x00, 0x10], &[0x01, 0x02]), None);
        assert_eq!(pack(&[], &[]), None);
    }

    #[test]
    fn corrupt_packed_columns_are_errors_not_panics() {
        let cells = [second(0, Value::Double(1.5)), second(10, Value::Double(2.25))];
        let packed = round_trip(&cells, 0);
        for cut in 0..packed.len() {
            assert!(unpack(&packed[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = packed.clone();
        longer.push(0);
        assert!(unpack(&longer).is_err());
        let mut version = packed;
        version[0] = 2;
        assert_eq!(unpack(&version).unwrap_err().to_string(), "Corrupted packed column: unknown version");
    }

    #[test]
    fn packed_rows_expand_to_the_row_they_were_packed_from() {
        let mut cells = vec![second(0, Value::Int(5)), milli(2_500, Value::Double(0.25)), second(3, Value::Float(1.5))];
        cells.extend((1..20).map(|i| second(i * 60, Value::Double(i as f64 / 4.0))));
        let (q, v) = compacted(&cells, 1);
        // Columns in qualifier order, as a merge leaves them: the data column (00 ..) before an annotation.
        let mut row = Vec::new();
        push_column(&mut row, &q, &v);
        push_column(&mut row, &[0x01, 0x00, 0x00], b"{\"description\":\"note\"}");
        let packed = pack_row(&row).expect("packs");
        assert!(super::super::is_packed(&packed));
        assert_eq!(expand_row(&packed).unwrap().as_ref(), row.as_slice());
        assert_eq!(super::super::expanded_len(&packed), row.len());
        assert_eq!(row_points(BASE as u32, &packed).unwrap(), row_points(BASE as u32, &row).unwrap());
        // Packing again changes nothing; a row of one point is not packed.
        assert_eq!(pack_row(&packed), None);
        let mut single = Vec::new();
        push_column(&mut single, &cells[0].0, &cells[0].1);
        assert_eq!(pack_row(&single), None);
    }

    /// A point: second or millisecond qualifier, offset, and a value of any kind (with raw odd ones).
    fn arb_cell() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
        let value = prop_oneof![
            any::<i64>().prop_map(Value::Int),
            (-300i64..300).prop_map(Value::Int),
            any::<f32>().prop_map(Value::Float),
            any::<f64>().prop_map(Value::Double),
            (-100_000i64..100_000, 0i32..4).prop_map(|(m, e)| Value::Double(m as f64 / 10f64.powi(e))),
            (-100_000i64..100_000, 0i32..4).prop_map(|(m, e)| Value::Float((m as f64 / 10f64.powi(e)) as f32)),
        ];
        prop_oneof![
            (0i64..3600, value.clone()).prop_map(|(o, v)| second(o, v)),
            (0i64..3_600_000, value).prop_map(|(o, v)| milli(o, v)),
            // Any flags, any bytes of the length they announce, any reserved bits.
            (any::<bool>(), 0u32..3_600_000, 0u8..64, prop::collection::vec(any::<u8>(), 8)).prop_map(
                |(ms, o, low, bytes)| {
                    let len = usize::from(low & 0x07) + 1;
                    let q = if ms {
                        (MS_FLAG | o << 6 | u32::from(low)).to_be_bytes().to_vec()
                    } else {
                        ((((o / 1000) as u16) << 4) | u16::from(low & 0x0F)).to_be_bytes().to_vec()
                    };
                    (q, bytes[..len].to_vec())
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn any_compacted_column_comes_back_to_the_bit(
            cells in prop::collection::vec(arb_cell(), 2..200),
            meta in any::<u8>(),
        ) {
            let (q, v) = compacted(&cells, meta);
            let packed = pack(&q, &v).expect("packable");
            prop_assert_eq!(unpack(&packed).expect("unpacks"), (q.clone(), v.clone()));
            // Points read straight from the packed column are those of the compacted column, bit for bit.
            let mut direct = Vec::new();
            let read = for_each_point(&packed, |q, value| {
                direct.push((q.to_vec(), value.flags(), value_bits(value)));
                Ok(())
            });
            let mut walked = Vec::new();
            let expected = walk_compacted(&q, &v, |q, bytes| {
                let value = Value::decode(q[q.len() - 1] & FLAGS_MASK, bytes)?;
                walked.push((q.to_vec(), value.flags(), value_bits(value)));
                Ok(())
            });
            prop_assert_eq!(read.is_ok(), expected.is_ok());
            if expected.is_ok() {
                prop_assert_eq!(direct, walked);
            }
        }

        #[test]
        fn late_points_merge_into_a_packed_row_as_into_the_compacted_one(
            first in prop::collection::vec(arb_cell(), 2..60),
            late in prop::collection::vec(arb_cell(), 0..10),
            fix in any::<bool>(),
        ) {
            let op = |cells: &[(Vec<u8>, Vec<u8>)]| {
                let mut row = Vec::new();
                for (q, v) in cells {
                    push_column(&mut row, q, v);
                }
                row
            };
            let Ok(merged) = merge_row(None, &[&op(&first)], fix) else { return Ok(()) };
            let Some(packed) = pack_row(&merged.row) else { return Ok(()) };
            let expanded = expand_row(&packed).unwrap();
            prop_assert_eq!(expanded.as_ref(), merged.row.as_slice());
            prop_assert_eq!(super::super::expanded_len(&packed), merged.row.len());
            let late = op(&late);
            let plain = merge_row(Some(&merged.row), &[&late], fix);
            let from_packed = merge_row(Some(&packed), &[&late], fix);
            prop_assert_eq!(from_packed, plain);
            prop_assert_eq!(row_points(BASE as u32, &packed), row_points(BASE as u32, &merged.row));
        }

        #[test]
        fn unpack_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = unpack(&bytes);
            let mut framed = vec![VERSION];
            framed.extend_from_slice(&bytes);
            let _ = unpack(&framed);
        }
    }
}
