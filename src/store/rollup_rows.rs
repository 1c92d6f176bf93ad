//! The rows of rtsd's own rollups (`<table>:a`, see `store::rollup`): one row per series and row span, keyed as
//! the table's rows are, its buckets laid out as columns.
//!
//! OpenTSDB's rollup row (`<table>:t`) holds one cell per bucket and aggregator: a query over a day of 1000
//! series' one-minute rollups walks 2.9 M cells, and while a row still has merge operands (recent hours, always),
//! every read merges them by sorting cells. Here a row is a few arrays, and a merge copies slots:
//!
//! ```text
//! version (1) ‖ slots n (u16 LE) ‖ known bitmap ‖ present bitmap ‖ count column ‖ sum column ‖ min column ‖ max column
//! ```
//!
//! Slot `i` is the bucket starting `i` intervals after the row's base time. `known` marks the slots this row
//! decides (a value, or deleted: known but not present); a slot that is not known is decided by the table's
//! OpenTSDB-style cells, if any (rollups an older rtsd computed, and rollup points written by clients). Bitmaps
//! are `ceil(n / 8)` bytes, slot `i` at bit `i % 8` of byte `i / 8`. Each column holds one value per present
//! slot, in slot order, after a tag byte that gives its encoding: `1`, `2`, `4`, `8`: integers of that many
//! bytes (signed, little-endian); `0x14`: 4-byte floats; `0x18`: 8-byte doubles; `0x20`: mixed, one type byte
//! per value (0 integer, 1 float, 2 double) and then 8 bytes per value (an i64, or the value as an f64);
//! `0x40`: decimal deltas (below). The encodings keep each value's type, so a read gives back exactly the
//! [`Value`] the fold computed.
//!
//! Decimal deltas (`0x40`), written only where RocksDB stores a merged row (flushes, compactions) and only when
//! smaller: `kind` (0 integers, 1 floats, 2 doubles, 3 mixed), `e`, `w`, for mixed one type byte per value as
//! above, the first value's mantissa `m` (a zigzag LEB128 varint), then one `w`-byte signed little-endian
//! integer per further value: the difference of its mantissa from the previous one's. A value is `m / 10^e` in
//! its type (an integer divided exactly, a float or double divided as IEEE divides, correctly rounded). Metric
//! values are mostly decimals with a few digits (`58.97`), counters or small gauges, and a bucket's min or max
//! is close to the previous bucket's: data set B's one-minute rows shrink from 1.52 to 1.18 bytes per point
//! after zstd (bench/RESULTS.md, 2026-11-30 17:00-17:35). A value whose decimal does not give back the same bits
//! (NaN, -0.0, a double sum's rounding) keeps its column in the plain encodings, which the grid reads of q1's
//! sums and counts read without this decoding.
//!
//! A write (a merge operand) is a row that knows only the slots it changes; merging applies operands in order,
//! slot by slot, so full and partial merges are the same function and a row never needs sorting.
use rtsd_protocol::codec::Value;

const VERSION: u8 = 1;
/// Columns, in the order of `AUTO_AGGREGATORS` (sum, count, min, max).
pub const COLUMNS: usize = 4;

const FLOATS: u8 = 0x14;
const DOUBLES: u8 = 0x18;
const MIXED: u8 = 0x20;
const DELTAS: u8 = 0x40;

/// Decimal exponents a [`DELTAS`] column may use.
const MAX_E: usize = 9;
const POW10_I: [i64; MAX_E + 1] =
    [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
const POW10_F: [f64; MAX_E + 1] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
const POW10_F32: [f32; MAX_E + 1] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// One bucket's values, in column order (sum, count, min, max).
pub type Bucket = [Value; COLUMNS];

/// A decoded row: per slot, `None` (not known), `Some(None)` (deleted) or the bucket.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Slots {
    pub slots: Vec<Option<Option<Bucket>>>,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots { slots: vec![None; n] }
    }

    /// Sets slot `i` (growing the row if needed).
    pub fn set(&mut self, i: usize, bucket: Option<Bucket>) {
        if i >= self.slots.len() {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(bucket);
    }

    /// Applies a later write: every slot it knows replaces this row's.
    pub fn apply(&mut self, later: Slots) {
        for (i, s) in later.slots.into_iter().enumerate() {
            if let Some(b) = s {
                self.set(i, b);
            }
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let n = self.slots.len();
        let bytes = n.div_ceil(8);
        let mut out = Vec::with_capacity(3 + 2 * bytes + n * 20);
        out.push(VERSION);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        let (mut known, mut present) = (vec![0u8; bytes], vec![0u8; bytes]);
        let mut buckets: Vec<&Bucket> = Vec::with_capacity(n);
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(b) = s {
                known[i / 8] |= 1 << (i % 8);
                if let Some(b) = b {
                    present[i / 8] |= 1 << (i % 8);
                    buckets.push(b);
                }
            }
        }
        out.extend_from_slice(&known);
        out.extend_from_slice(&present);
        for c in 0..COLUMNS {
            encode_column(&mut out, buckets.iter().map(|b| b[c]), false);
        }
        out
    }

    pub fn decode(row: &[u8]) -> Result<Slots, String> {
        let view = RowView::new(row)?;
        let mut out = Slots::new(view.n);
        let columns: Vec<Vec<Value>> =
            (0..COLUMNS).map(|c| view.column(c).map(|col| col.values())).collect::<Result<_, _>>()?;
        let mut k = 0;
        for i in 0..view.n {
            if !view.known(i) {
                continue;
            }
            if view.present(i) {
                let b = [columns[0][k], columns[1][k], columns[2][k], columns[3][k]];
                out.slots[i] = Some(Some(b));
                k += 1;
            } else {
                out.slots[i] = Some(None);
            }
        }
        Ok(out)
    }
}

/// The merge of `<table>:a` rows: the existing row, then each operand in order. A value that does not decode
/// (not written by this module) is dropped rather than failing the read; the fold rewrites what it needs.
///
/// Reads merge every row that still has operands (recent hours, always), so this copies each present slot's
/// bytes from the row that decides it, column by column; only a column whose rows encode it differently (say,
/// counts on one byte in one and two in another) goes through [`Value`]s. With `stored` (RocksDB's flushes and
/// compactions, whose result goes to disk) each column takes the smallest encoding, decimal deltas included.
pub fn merge<R: AsRef<[u8]>>(existing: Option<&[u8]>, operands: impl IntoIterator<Item = R>, stored: bool) -> Vec<u8> {
    let merged = merge_rows(existing, operands);
    if stored {
        compacted(&merged).unwrap_or(merged)
    } else {
        merged
    }
}

/// `row` with each column in its smallest encoding; `None` when it does not decode or nothing gets smaller.
pub fn compacted(row: &[u8]) -> Option<Vec<u8>> {
    let view = RowView::new(row).ok()?;
    let head = row.len() - view.columns.len();
    let mut out = Vec::with_capacity(row.len());
    out.extend_from_slice(&row[..head]);
    for c in 0..COLUMNS {
        let column = view.column(c).ok()?;
        let values = column.values();
        encode_column(&mut out, values.iter().copied(), true);
    }
    (out.len() < row.len()).then_some(out)
}

fn merge_rows<R: AsRef<[u8]>>(existing: Option<&[u8]>, operands: impl IntoIterator<Item = R>) -> Vec<u8> {
    let operands: Vec<R> = operands.into_iter().collect();
    let rows: Vec<&[u8]> = existing.into_iter().chain(operands.iter().map(AsRef::as_ref)).collect();
    let views: Vec<(RowView<'_>, &[u8])> =
        rows.iter().filter_map(|r| RowView::new(r).ok().filter(|v| v.columns_ok()).map(|v| (v, *r))).collect();
    let n = views.iter().map(|(v, _)| v.n).max().unwrap_or(0);
    match views.last() {
        None => return Slots::default().encode(),
        // The last write decides every slot (or is the only row).
        Some((last, bytes)) if views.len() == 1 || (last.n == n && (0..n).all(|i| last.known(i))) => {
            return bytes.to_vec()
        }
        _ => {}
    }
    // Per output slot: the row deciding it (the last that knows it) and, if present, the value's index there.
    let mut source: Vec<Option<(usize, Option<usize>)>> = vec![None; n];
    for (at, (view, _)) in views.iter().enumerate() {
        let mut k = 0;
        for (i, s) in source.iter_mut().enumerate().take(view.n) {
            let present = view.present(i);
            if view.known(i) {
                *s = Some((at, present.then_some(k)));
            }
            k += usize::from(present);
        }
    }
    let bytes = n.div_ceil(8);
    let (mut known, mut present) = (vec![0u8; bytes], vec![0u8; bytes]);
    let mut values: Vec<(usize, usize)> = Vec::with_capacity(n);
    for (i, s) in source.iter().enumerate() {
        if let Some((at, j)) = s {
            known[i / 8] |= 1 << (i % 8);
            if let Some(j) = j {
                present[i / 8] |= 1 << (i % 8);
                values.push((*at, *j));
            }
        }
    }
    let mut out = Vec::with_capacity(3 + 2 * bytes + values.len() * 24);
    out.push(VERSION);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&known);
    out.extend_from_slice(&present);
    for c in 0..COLUMNS {
        let columns: Vec<Option<ColumnView<'_>>> = views.iter().map(|(v, _)| v.column(c).ok()).collect();
        let tag = |at: usize| columns[at].map(|col| col.tag);
        let first = values.first().and_then(|&(at, _)| tag(at));
        let width = match first {
            Some(t @ (1 | 2 | 4 | 8)) => usize::from(t),
            Some(FLOATS) => 4,
            Some(DOUBLES) => 8,
            _ => 0,
        };
        if width > 0 && values.iter().all(|&(at, _)| tag(at) == first) {
            out.push(first.unwrap_or_default());
            for &(at, j) in &values {
                if let Some(col) = &columns[at] {
                    out.extend_from_slice(&col.body[j * width..(j + 1) * width]);
                }
            }
        } else {
            // Each row's column decoded once (decimal deltas are read in order, not by index).
            let decoded: Vec<Vec<Value>> =
                columns.iter().map(|col| col.map(|col| col.values()).unwrap_or_default()).collect();
            let get = |&(at, j): &(usize, usize)| decoded[at].get(j).copied().unwrap_or(Value::Int(0));
            encode_column(&mut out, values.iter().map(get), false);
        }
    }
    out
}

/// Appends a column of `values` in its plain encoding or, with `compact`, in decimal deltas when those are smaller.
fn encode_column(out: &mut Vec<u8>, values: impl Iterator<Item = Value> + Clone, compact: bool) {
    if compact {
        let mut plain = Vec::new();
        encode_plain(&mut plain, values.clone());
        let at = out.len();
        if encode_deltas(out, values).is_some() && out.len() - at < plain.len() {
            return;
        }
        out.truncate(at);
        out.extend_from_slice(&plain);
        return;
    }
    encode_plain(out, values)
}

/// The decimal mantissa of `v` with exponent `e`, if [`decimal_value`] gives `v` back bit for bit.
fn mantissa(v: Value, e: usize) -> Option<i64> {
    let m = match v {
        Value::Int(i) => i.checked_mul(POW10_I[e])?,
        Value::Float(f) => scaled(f64::from(f), e)?,
        Value::Double(d) => scaled(d, e)?,
    };
    same_bits(decimal_value(type_code(v), m, e), v).then_some(m)
}

fn scaled(x: f64, e: usize) -> Option<i64> {
    let m = (x * POW10_F[e]).round();
    // Mantissas beyond 2^53 do not convert to doubles exactly.
    (m.is_finite() && m.abs() < 9.0e15).then_some(m as i64)
}

/// 0 integer, 1 float, 2 double (as in [`MIXED`] columns).
fn type_code(v: Value) -> u8 {
    match v {
        Value::Int(_) => 0,
        Value::Float(_) => 1,
        Value::Double(_) => 2,
    }
}

fn same_bits(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => false,
    }
}

/// The value of mantissa `m` with exponent `e` in the type of `code`.
fn decimal_value(code: u8, m: i64, e: usize) -> Value {
    match code {
        0 => Value::Int(m / POW10_I[e]),
        1 => Value::Float(m as f32 / POW10_F32[e]),
        _ => Value::Double(m as f64 / POW10_F[e]),
    }
}

/// Appends `values` as decimal deltas (see the module comment), with the smallest exponent that gives every value
/// back; `None` (and nothing appended) when none does.
fn encode_deltas(out: &mut Vec<u8>, values: impl Iterator<Item = Value> + Clone) -> Option<()> {
    let codes: Vec<u8> = values.clone().map(type_code).collect();
    let kind = match (codes.iter().min(), codes.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => *lo,
        (Some(_), Some(_)) => 3,
        _ => return None,
    };
    // Integers alone need no exponent.
    let exponents = if kind == 0 { 0..=0 } else { 0..=MAX_E };
    let (e, mantissas) = exponents
        .into_iter()
        .find_map(|e| values.clone().map(|v| mantissa(v, e)).collect::<Option<Vec<i64>>>().map(|m| (e, m)))?;
    let mut previous = 0i64;
    let deltas: Vec<i64> = mantissas
        .iter()
        .map(|&m| {
            let d = m.wrapping_sub(previous);
            previous = m;
            d
        })
        .collect();
    let w = deltas.iter().skip(1).map(|&d| int_width(d)).max().unwrap_or(1);
    out.extend_from_slice(&[DELTAS, kind, e as u8, w as u8]);
    if kind == 3 {
        out.extend_from_slice(&codes);
    }
    let mut first = ((mantissas[0] << 1) ^ (mantissas[0] >> 63)) as u64;
    while first >= 0x80 {
        out.push(first as u8 | 0x80);
        first >>= 7;
    }
    out.push(first as u8);
    for d in &deltas[1..] {
        out.extend_from_slice(&d.to_le_bytes()[..w]);
    }
    Some(())
}

fn encode_plain(out: &mut Vec<u8>, values: impl Iterator<Item = Value> + Clone) {
    let (mut ints, mut floats, mut doubles, mut width) = (true, true, true, 1usize);
    for v in values.clone() {
        match v {
            Value::Int(i) => {
                (floats, doubles) = (false, false);
                width = width.max(int_width(i));
            }
            Value::Float(_) => (ints, doubles) = (false, false),
            Value::Double(_) => (ints, floats) = (false, false),
        }
    }
    match (ints, floats, doubles) {
        (true, _, _) => {
            out.push(width as u8);
            for v in values {
                if let Value::Int(i) = v {
                    out.extend_from_slice(&i.to_le_bytes()[..width]);
                }
            }
        }
        (_, true, _) => {
            out.push(FLOATS);
            for v in values {
                if let Value::Float(f) = v {
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
        }
        (_, _, true) => {
            out.push(DOUBLES);
            for v in values {
                if let Value::Double(d) = v {
                    out.extend_from_slice(&d.to_le_bytes());
                }
            }
        }
        _ => {
            out.push(MIXED);
            out.extend(values.clone().map(type_code));
            for v in values {
                let bytes = match v {
                    Value::Int(i) => i.to_le_bytes(),
                    Value::Float(f) => f64::from(f).to_le_bytes(),
                    Value::Double(d) => d.to_le_bytes(),
                };
                out.extend_from_slice(&bytes);
            }
        }
    }
}

/// A zigzag LEB128 varint at the start of `bytes`: its value and length; `None` when cut short or too long.
fn varint(bytes: &[u8]) -> Option<(i64, usize)> {
    let mut u = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        u |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Some((((u >> 1) as i64) ^ -((u & 1) as i64), i + 1));
        }
    }
    None
}

fn int_width(i: i64) -> usize {
    if i8::try_from(i).is_ok() {
        1
    } else if i16::try_from(i).is_ok() {
        2
    } else if i32::try_from(i).is_ok() {
        4
    } else {
        8
    }
}

/// A row read in place: its bitmaps and columns, without copying.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    pub n: usize,
    known: &'a [u8],
    present: &'a [u8],
    /// Present slots (values per column).
    pub k: usize,
    columns: &'a [u8],
}

impl<'a> RowView<'a> {
    pub fn new(row: &'a [u8]) -> Result<RowView<'a>, String> {
        let (&version, rest) = row.split_first().ok_or("empty row")?;
        if version != VERSION {
            return Err(format!("unknown rollup row version {version}"));
        }
        let n = usize::from(u16::from_le_bytes([*rest.first().ok_or("short row")?, *rest.get(1).ok_or("short row")?]));
        let bytes = n.div_ceil(8);
        let rest = &rest[2..];
        if rest.len() < 2 * bytes {
            return Err("short row".into());
        }
        let (known, rest) = rest.split_at(bytes);
        let (present, columns) = rest.split_at(bytes);
        let k = present.iter().map(|b| b.count_ones() as usize).sum();
        Ok(RowView { n, known, present, k, columns })
    }

    pub fn known(&self, i: usize) -> bool {
        self.known.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    pub fn present(&self, i: usize) -> bool {
        self.present.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// Column `c` (0..4: sum, count, min, max).
    pub fn column(&self, c: usize) -> Result<ColumnView<'a>, String> {
        let mut rest = self.columns;
        for at in 0..=c {
            let (&tag, body) = rest.split_first().ok_or("short row")?;
            let len = match tag {
                1 | 2 | 4 | 8 => usize::from(tag) * self.k,
                FLOATS => 4 * self.k,
                DOUBLES => 8 * self.k,
                MIXED => 9 * self.k,
                DELTAS => {
                    let (kind, e, w) = match body {
                        [kind, e, w, ..] => (*kind, usize::from(*e), usize::from(*w)),
                        _ => return Err("short row".into()),
                    };
                    if kind > 3 || e > MAX_E || !matches!(w, 1 | 2 | 4 | 8) || self.k == 0 {
                        return Err(format!("bad decimal column ({kind}, {e}, {w})"));
                    }
                    let first_at = 3 + if kind == 3 { self.k } else { 0 };
                    let first = body.get(first_at..).and_then(varint).ok_or("short row")?.1;
                    first_at + first + w * (self.k - 1)
                }
                _ => return Err(format!("unknown rollup column encoding {tag}")),
            };
            if body.len() < len {
                return Err("short row".into());
            }
            if at == c {
                return Ok(ColumnView { tag, body: &body[..len], k: self.k });
            }
            rest = &body[len..];
        }
        Err("no such column".into())
    }

    /// Whether every column is there, whole.
    fn columns_ok(&self) -> bool {
        self.column(COLUMNS - 1).is_ok()
    }

    /// Calls `f(slot, value index)` for each present slot in order.
    pub fn for_each_present(&self, mut f: impl FnMut(usize, usize)) {
        let mut k = 0;
        for (byte_at, &byte) in self.present.iter().enumerate() {
            let mut bits = byte;
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                f(byte_at * 8 + bit, k);
                k += 1;
                bits &= bits - 1;
            }
        }
    }

    /// The slots this row knows, as a bitmap (slot `i` at bit `i % 8` of byte `i / 8`).
    pub fn known_bitmap(&self) -> &'a [u8] {
        self.known
    }
}

/// One column of a row: value `j` is the `j`-th present slot's.
#[derive(Debug, Clone, Copy)]
pub struct ColumnView<'a> {
    tag: u8,
    body: &'a [u8],
    k: usize,
}

impl ColumnView<'_> {
    /// The column's encoding (see the module comment).
    pub fn tag(&self) -> u8 {
        self.tag
    }

    /// Every value, in order.
    pub fn values(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(self.k);
        self.for_each(|_, v| out.push(v));
        out
    }

    /// A decimal deltas column's (kind, exponent, width, type codes if mixed, first mantissa, deltas); the
    /// column was checked whole when [`RowView::column`] made it.
    fn deltas(&self) -> (u8, usize, usize, &[u8], i64, &[u8]) {
        let (kind, e, w) = (self.body[0], usize::from(self.body[1]), usize::from(self.body[2]));
        let codes = if kind == 3 { &self.body[3..3 + self.k] } else { &[][..] };
        let rest = &self.body[3 + codes.len()..];
        let (first, len) = varint(rest).unwrap_or_default();
        (kind, e, w, codes, first, &rest[len..])
    }

    /// The mantissas of a decimal deltas column, in order: one tight loop per delta width (a read of q1's kind
    /// decodes millions of them).
    fn mantissas(&self) -> Vec<i64> {
        let (_, _, w, _, first, deltas) = self.deltas();
        let mut out = Vec::with_capacity(self.k);
        out.push(first);
        let mut m = first;
        let mut add = |d: i64| {
            m = m.wrapping_add(d);
            out.push(m);
        };
        match w {
            1 => deltas.iter().for_each(|&d| add(i64::from(d as i8))),
            2 => deltas.chunks_exact(2).for_each(|d| add(i64::from(i16::from_le_bytes([d[0], d[1]])))),
            4 => deltas.chunks_exact(4).for_each(|d| add(i64::from(i32::from_le_bytes([d[0], d[1], d[2], d[3]])))),
            _ => deltas.chunks_exact(8).for_each(|d| add(i64::from_le_bytes(d.try_into().unwrap_or_default()))),
        }
        out
    }

    /// Calls `f(j, value j)` for every value in order (the encoding matched once, not per value).
    pub fn for_each(&self, mut f: impl FnMut(usize, Value)) {
        let b = self.body;
        match self.tag {
            DELTAS => {
                let (kind, e, _, codes, ..) = self.deltas();
                for (j, m) in self.mantissas().into_iter().enumerate() {
                    f(j, decimal_value(if kind == 3 { codes[j] } else { kind }, m, e));
                }
            }
            DOUBLES => b
                .chunks_exact(8)
                .enumerate()
                .for_each(|(j, c)| f(j, Value::Double(f64::from_le_bytes(c.try_into().unwrap_or_default())))),
            FLOATS => b
                .chunks_exact(4)
                .enumerate()
                .for_each(|(j, c)| f(j, Value::Float(f32::from_le_bytes(c.try_into().unwrap_or_default())))),
            1 => b.iter().enumerate().for_each(|(j, &v)| f(j, Value::Int(i64::from(v as i8)))),
            _ => (0..self.k).for_each(|j| f(j, self.get(j))),
        }
    }

    /// Appends `(times[j], value j)` for every value (`times` has one per value): one reservation and a
    /// straight copy loop per encoding, for rows wholly inside a read's range.
    pub fn extend_timed(&self, times: &[i64], out: &mut Vec<(i64, Value)>) {
        let b = self.body;
        let f64_at = |c: &[u8]| f64::from_le_bytes(c.try_into().unwrap_or_default());
        let f32_at = |c: &[u8]| f32::from_le_bytes(c.try_into().unwrap_or_default());
        match self.tag {
            DOUBLES => out.extend(times.iter().zip(b.chunks_exact(8)).map(|(&t, c)| (t, Value::Double(f64_at(c))))),
            FLOATS => out.extend(times.iter().zip(b.chunks_exact(4)).map(|(&t, c)| (t, Value::Float(f32_at(c))))),
            1 => out.extend(times.iter().zip(b).map(|(&t, &v)| (t, Value::Int(i64::from(v as i8))))),
            _ => {
                out.reserve(times.len());
                self.for_each(|j, v| out.push((times[j], v)));
            }
        }
    }

    /// Whether the values are integers (so every double [`ColumnView::decode_f64`] gives is a whole number).
    pub fn is_integral(&self) -> bool {
        matches!(self.tag, 1 | 2 | 4 | 8) || (self.tag == DELTAS && self.body[0] == 0)
    }

    /// Every value as a double (`i as f64`, `f64::from(f)` or the double, as the query engine converts a
    /// [`Value`]) into `out`, replacing what it held: one straight loop per encoding.
    pub fn decode_f64(&self, out: &mut Vec<f64>) {
        out.clear();
        let b = self.body;
        match self.tag {
            DOUBLES => out.extend(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))),
            FLOATS => {
                out.extend(b.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap_or_default()))))
            }
            1 => out.extend(b.iter().map(|&v| f64::from(v as i8))),
            2 => out.extend(b.chunks_exact(2).map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])))),
            4 => out.extend(b.chunks_exact(4).map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap_or_default())))),
            // One loop per kind: integers and doubles divided as `decimal_value` divides, without the Value.
            DELTAS => match self.deltas() {
                (0, e, ..) => out.extend(self.mantissas().into_iter().map(|m| (m / POW10_I[e]) as f64)),
                (2, e, ..) => out.extend(self.mantissas().into_iter().map(|m| m as f64 / POW10_F[e])),
                _ => self.for_each(|_, v| out.push(v.as_f64())),
            },
            _ => out.extend((0..self.k).map(|j| self.get(j).as_f64())),
        }
    }

    /// Value `j` (a decimal deltas column is read from its start).
    pub fn get(&self, j: usize) -> Value {
        let b = self.body;
        match self.tag {
            DELTAS => {
                let (kind, e, _, codes, ..) = self.deltas();
                let m = self.mantissas().get(j).copied().unwrap_or_default();
                decimal_value(if kind == 3 { codes[j] } else { kind }, m, e)
            }
            1 => Value::Int(i64::from(b[j] as i8)),
            2 => Value::Int(i64::from(i16::from_le_bytes([b[2 * j], b[2 * j + 1]]))),
            4 => Value::Int(i64::from(i32::from_le_bytes(b[4 * j..4 * j + 4].try_into().unwrap_or_default()))),
            8 => Value::Int(i64::from_le_bytes(b[8 * j..8 * j + 8].try_into().unwrap_or_default())),
            FLOATS => Value::Float(f32::from_le_bytes(b[4 * j..4 * j + 4].try_into().unwrap_or_default())),
            DOUBLES => Value::Double(f64::from_le_bytes(b[8 * j..8 * j + 8].try_into().unwrap_or_default())),
            _ => {
                let at = self.k + 8 * j;
                let bytes: [u8; 8] = b[at..at + 8].try_into().unwrap_or_default();
                match b[j] {
                    0 => Value::Int(i64::from_le_bytes(bytes)),
                    1 => Value::Float(f64::from_le_bytes(bytes) as f32),
                    _ => Value::Double(f64::from_le_bytes(bytes)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::Int),
            (-200i64..200).prop_map(Value::Int),
            (-1e6f32..1e6).prop_map(Value::Float),
            (-1e12f64..1e12).prop_map(Value::Double),
            decimal(),
            special(),
        ]
    }

    /// Values parsed from decimals with a few digits, as metrics mostly are (what decimal deltas hold).
    fn decimal() -> impl Strategy<Value = Value> {
        (-1_000_000i64..1_000_000, 0u32..5, any::<bool>()).prop_map(|(m, e, float)| {
            let text = format!("{}", m as f64 / 10f64.powi(e as i32));
            if float {
                Value::Float(text.parse().unwrap())
            } else {
                Value::Double(text.parse().unwrap())
            }
        })
    }

    /// Values no decimal gives back bit for bit, and the extremes.
    fn special() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Double(f64::NAN)),
            Just(Value::Double(-0.0)),
            Just(Value::Float(-0.0)),
            Just(Value::Float(f32::NAN)),
            Just(Value::Double(f64::INFINITY)),
            Just(Value::Double(f64::MIN_POSITIVE)),
            Just(Value::Double(f64::MAX)),
            Just(Value::Float(f32::MAX)),
            Just(Value::Int(i64::MIN)),
            Just(Value::Int(i64::MAX)),
            Just(Value::Double(0.1 + 0.2)),
        ]
    }

    /// Rows of decimals (whose columns take decimal deltas where RocksDB stores them).
    fn decimal_slots() -> impl Strategy<Value = Slots> {
        let bucket = (decimal(), 1i64..100, decimal(), decimal(), 0u8..4).prop_map(|(s, c, lo, hi, n)| {
            // Some columns of integers, as counters' are.
            let int = |v: Value| match v {
                Value::Double(d) if n == 0 => Value::Int(d as i64),
                v => v,
            };
            [int(s), Value::Int(c), int(lo), int(hi)]
        });
        prop::collection::vec(prop::option::of(prop::option::of(bucket)), 0..70).prop_map(|slots| Slots { slots })
    }

    /// Decodes bit for bit: values compared by their bits (NaN equals NaN, -0.0 is not 0.0).
    /// Per slot, each value's type and bits.
    type Bits = Vec<Option<Option<[(u8, u64); COLUMNS]>>>;

    fn bits(row: &Slots) -> Bits {
        let b = |v: Value| match v {
            Value::Int(i) => (0, i as u64),
            Value::Float(f) => (1, u64::from(f.to_bits())),
            Value::Double(d) => (2, d.to_bits()),
        };
        row.slots.iter().map(|s| s.map(|b2| b2.map(|x| x.map(b)))).collect()
    }

    // Decimal deltas, laid out as the module comment says: a double column of 58.97, 59.01, 58.5 is exponent 2,
    // mantissas 5897, 5901, 5850, stored as 5897 (a varint) and deltas 4, -51 on one byte each; counts of 6 stay
    // on one byte each (as deltas they would take more); a row is stored so only when RocksDB stores a merge.
    #[test]
    fn decimal_deltas_are_laid_out_as_documented() {
        let mut row = Slots::new(3);
        for (i, (sum, lo)) in [(58.97, 100_000i64), (59.01, 100_005), (58.5, 99_990)].into_iter().enumerate() {
            row.set(i, Some([Value::Double(sum), Value::Int(6), Value::Int(lo), Value::Double(sum)]));
        }
        let plain = row.encode();
        let stored = merge(None, [plain.clone()], true);
        let mut want = vec![1, 3, 0, 0b111, 0b111];
        // 5897 as a zigzag varint is 11794: 0x92 0x5C.
        let sums = [DELTAS, 2, 2, 1, 0x92, 0x5C, 4, 0xCD];
        want.extend_from_slice(&sums);
        want.extend_from_slice(&[1, 6, 6, 6]);
        // 100000, 100005, 99990: 200000 as a varint (0xC0 0x9A 0x0C), then 5 and -15 on one byte each; plain
        // they would take four bytes each.
        want.extend_from_slice(&[DELTAS, 0, 0, 1, 0xC0, 0x9A, 0x0C, 5, 0xF1]);
        want.extend_from_slice(&sums);
        assert_eq!(stored, want);
        assert_eq!(Slots::decode(&stored).unwrap(), row);
        // A read's merge copies bytes; a double that no decimal gives back keeps its column plain.
        assert_eq!(merge(None, [plain.clone()], false), plain);
        row.set(1, Some([Value::Double(0.1 + 0.2), Value::Int(6), Value::Int(100_005), Value::Double(59.01)]));
        let stored = merge(None, [row.encode()], true);
        assert_eq!(RowView::new(&stored).unwrap().column(0).unwrap().tag, DOUBLES);
        assert_eq!(Slots::decode(&stored).unwrap(), row);
    }

    fn slots() -> impl Strategy<Value = Slots> {
        prop::collection::vec(prop::option::of(prop::option::of([value(), value(), value(), value()])), 0..70)
            .prop_map(|slots| Slots { slots })
    }

    #[test]
    fn a_row_of_one_minute_buckets_is_laid_out_as_documented() {
        let mut row = Slots::new(60);
        row.set(0, Some([Value::Double(1.5), Value::Int(6), Value::Float(0.25), Value::Float(0.5)]));
        row.set(2, None);
        row.set(9, Some([Value::Double(-2.0), Value::Int(300), Value::Float(-1.0), Value::Float(0.0)]));
        let bytes = row.encode();
        let mut want = vec![1, 60, 0];
        want.extend_from_slice(&[0b0000_0101, 0b10, 0, 0, 0, 0, 0, 0]); // known: 0, 2, 9
        want.extend_from_slice(&[0b0000_0001, 0b10, 0, 0, 0, 0, 0, 0]); // present: 0, 9
        want.push(DOUBLES);
        want.extend_from_slice(&1.5f64.to_le_bytes());
        want.extend_from_slice(&(-2.0f64).to_le_bytes());
        want.extend_from_slice(&[2, 6, 0, 0x2C, 1]); // counts on 2 bytes: 6, 300
        want.push(FLOATS);
        want.extend_from_slice(&0.25f32.to_le_bytes());
        want.extend_from_slice(&(-1.0f32).to_le_bytes());
        want.push(FLOATS);
        want.extend_from_slice(&0.5f32.to_le_bytes());
        want.extend_from_slice(&0.0f32.to_le_bytes());
        assert_eq!(bytes, want);
        assert_eq!(Slots::decode(&bytes).unwrap(), row);
    }

    #[test]
    fn bad_rows_are_errors_not_panics() {
        for bad in [&[][..], &[2, 1, 0, 0, 0][..], &[1, 60, 0][..], &[1, 8, 0, 1, 1, 9][..], &[1, 8, 0, 1, 1, 8, 0][..]]
        {
            assert!(Slots::decode(bad).is_err(), "{bad:?}");
        }
        // A merge keeps what decodes.
        let mut one = Slots::new(2);
        one.set(1, None);
        assert_eq!(merge(Some(&[9u8][..]), [one.encode()], false), one.encode());
    }

    /// Rows as the fold writes them: each column of one type (merges copy their bytes).
    fn uniform_slots() -> impl Strategy<Value = Slots> {
        let bucket = (-1e9f64..1e9, 1i64..100, -1e6f32..1e6, -1e6f32..1e6)
            .prop_map(|(s, c, lo, hi)| [Value::Double(s), Value::Int(c), Value::Float(lo), Value::Float(hi)]);
        prop::collection::vec(prop::option::of(prop::option::of(bucket)), 0..70).prop_map(|slots| Slots { slots })
    }

    /// Slots past the last known one say nothing (a row's length only bounds its offsets).
    fn trimmed(mut s: Slots) -> Slots {
        while s.slots.last().is_some_and(Option::is_none) {
            s.slots.pop();
        }
        s
    }

    proptest! {
        #[test]
        fn rows_decode_to_what_was_encoded(row in slots()) {
            prop_assert_eq!(bits(&Slots::decode(&row.encode()).unwrap()), bits(&row));
        }

        // issue 22: decode(encode(x)) == x for every value kind, NaN and -0.0 included, in the encodings RocksDB
        // stores (decimal deltas where smaller), and never larger than the plain row.
        #[test]
        fn stored_rows_decode_bit_for_bit_and_are_never_larger(row in prop_oneof![slots(), decimal_slots()]) {
            let plain = row.encode();
            let stored = merge(None, [plain.clone()], true);
            prop_assert!(stored.len() <= plain.len());
            prop_assert_eq!(bits(&Slots::decode(&stored).unwrap()), bits(&row));
        }

        // Every way of reading a column gives the same values, in whichever encoding it is stored.
        #[test]
        fn a_columns_readers_agree(row in prop_oneof![slots(), decimal_slots()], stored in any::<bool>()) {
            let bytes = merge(None, [row.encode()], stored);
            let view = RowView::new(&bytes).unwrap();
            let bits_of = |values: &[Value]| bits(&Slots { slots: values.iter().map(|&v| Some(Some([v; COLUMNS]))).collect() });
            for c in 0..COLUMNS {
                let column = view.column(c).unwrap();
                let values = column.values();
                prop_assert_eq!(values.len(), view.k);
                let by_index: Vec<Value> = (0..view.k).map(|j| column.get(j)).collect();
                let times: Vec<i64> = (0..view.k as i64).collect();
                let mut timed = Vec::new();
                column.extend_timed(&times, &mut timed);
                prop_assert!(timed.iter().enumerate().all(|(j, (t, _))| *t == j as i64));
                let timed: Vec<Value> = timed.into_iter().map(|(_, v)| v).collect();
                prop_assert_eq!(bits_of(&by_index), bits_of(&values));
                prop_assert_eq!(bits_of(&timed), bits_of(&values));
            }
        }

        // A column read as doubles gives each value as the query engine converts it.
        #[test]
        fn columns_decode_to_doubles_as_values_convert(
            row in prop_oneof![slots(), uniform_slots(), decimal_slots()],
            stored in any::<bool>(),
        ) {
            let bytes = merge(None, [row.encode()], stored);
            let view = RowView::new(&bytes).unwrap();
            let mut doubles = Vec::new();
            for c in 0..COLUMNS {
                let column = view.column(c).unwrap();
                column.decode_f64(&mut doubles);
                let want: Vec<u64> = (0..view.k)
                    .map(|j| match column.get(j) {
                        Value::Int(i) => i as f64,
                        Value::Float(f) => f64::from(f),
                        Value::Double(d) => d,
                    }.to_bits())
                    .collect();
                prop_assert_eq!(doubles.iter().map(|d| d.to_bits()).collect::<Vec<_>>(), want);
            }
        }

        #[test]
        fn merging_applies_writes_in_order_slot_by_slot(
            base in prop::option::of(prop_oneof![slots(), uniform_slots(), decimal_slots()]),
            ops in prop::collection::vec(prop_oneof![slots(), uniform_slots(), decimal_slots()], 0..4),
            split in 0usize..4,
            stored in any::<bool>(),
        ) {
            let mut want = base.clone().unwrap_or_default();
            for op in &ops {
                want.apply(op.clone());
            }
            // Rows and operands as RocksDB may hold them: stored merges write decimal deltas.
            let encoded: Vec<Vec<u8>> = ops.iter().map(|op| merge(None, [op.encode()], stored)).collect();
            let base_bytes = base.as_ref().map(|b| merge(None, [b.encode()], stored));
            let full = merge(base_bytes.as_deref(), &encoded, stored);
            prop_assert_eq!(bits(&trimmed(Slots::decode(&full).unwrap())), bits(&trimmed(want.clone())));
            // A partial merge of some operands first gives the same row.
            let split = split.min(encoded.len());
            let partial = merge(None, &encoded[..split], stored);
            let rest = std::iter::once(partial).chain(encoded[split..].iter().cloned());
            let merged = merge(base_bytes.as_deref(), rest, !stored);
            prop_assert_eq!(bits(&trimmed(Slots::decode(&merged).unwrap())), bits(&trimmed(want)));
        }
    }
}
