//! The engine contract as one set of checks every engine must pass, the same for each (RocksDB in the unit
//! tests, HBase against a real cluster in `compat-tests/tests/hbase_engine.rs`). Panics on the first breach,
//! with what was expected: this is test support, kept beside the trait it checks.
use std::sync::Arc;

use rtsd_protocol::codec;

use super::{
    CellMap, Combine, Durability, Engine, Merge, MergeContext, Parts, ReadHints, TableSpec, Tuning, WriteBatch,
};

/// What a key of the plain table merges by, from the last part of its key (after the run's `/`): `c...` sums,
/// `hi...` keeps the maximum, `lo...` the minimum (each an 8-byte big-endian number); other keys have values of
/// their own and no merge.
fn plain_kind(key: &[u8]) -> Option<Combine> {
    let name = key.rsplit(|&b| b == b'/').next().unwrap_or(key);
    match name {
        [b'c', ..] => Some(Combine::Sum),
        [b'h', b'i', ..] => Some(Combine::Max),
        [b'l', b'o', ..] => Some(Combine::Min),
        _ => None,
    }
}

/// The plain table's merge as parts (see [`Parts`]): what an engine without merge operators writes blindly.
const PLAIN_PARTS: Parts = Parts {
    parts: &[(b"s", Combine::Sum), (b"x", Combine::Max), (b"n", Combine::Min)],
    split: |key, operand| {
        let i = match plain_kind(key)? {
            Combine::Sum => 0,
            Combine::Max => 1,
            Combine::Min => 2,
        };
        Some(<[u8; 8]>::try_from(operand).map(|b| vec![(i, i64::from_be_bytes(b))]).unwrap_or_default())
    },
    join: |_key, _index, number| number.to_be_bytes().to_vec(),
};

/// The tables the checks use, as the store declares its own: a data-like table of cells merged by OpenTSDB's
/// compaction rule (here: later cell wins, cells sorted), a UID-like table of single cells, and one of rtsd's
/// plain tables with a merge that sums, or keeps the maximum or the minimum, by key (see [`plain_kind`]), with
/// its parts declared.
pub fn tables(data: &str, uid: &str, plain: &str) -> Vec<TableSpec> {
    let latest = Arc::new(|_key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
        let mut cells: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = std::collections::BTreeMap::new();
        for row in existing.into_iter().chain(operands.iter().copied()) {
            for c in codec::columns(row).flatten() {
                cells.insert(c.qualifier.to_vec(), c.value.to_vec());
            }
        }
        let mut out = Vec::new();
        for (q, v) in &cells {
            codec::push_column(&mut out, q, v);
        }
        out
    });
    let sum = Arc::new(|key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], _: MergeContext| {
        let value = |b: &[u8]| b.try_into().ok().map(i64::from_be_bytes);
        let values = existing.into_iter().chain(operands.iter().copied()).filter_map(value);
        let merged = match plain_kind(key) {
            Some(Combine::Max) => values.max(),
            Some(Combine::Min) => values.min(),
            _ => Some(values.sum()),
        };
        merged.map(|n| n.to_be_bytes().to_vec()).unwrap_or_default()
    });
    vec![
        TableSpec::new(data, CellMap::RowColumns, Tuning::Data).with_merge(Merge {
            name: "conformance-latest",
            full: latest,
            partial: None,
        }),
        TableSpec::new(uid, CellMap::QualifierRow, Tuning::Small),
        TableSpec::new(plain, CellMap::Plain, Tuning::Small)
            .with_merge(Merge { name: "conformance-sum", full: sum.clone(), partial: Some(sum) })
            .with_parts(PLAIN_PARTS),
    ]
}

fn columns(cells: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (q, v) in cells {
        codec::push_column(&mut out, q, v);
    }
    out
}

fn write(engine: &dyn Engine, f: impl FnOnce(&mut WriteBatch)) {
    let mut batch = WriteBatch::default();
    f(&mut batch);
    engine.write(batch, Durability::Logged).unwrap_or_else(|e| panic!("{}: write: {e}", engine.name()));
}

/// Every (key, value) a cursor reads from `from` while keys start with `prefix`.
fn scan(engine: &dyn Engine, table: &str, from: &[u8], prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut cursor = engine.cursor(table, ReadHints::default()).expect("declared table");
    cursor.seek(from);
    let mut out = Vec::new();
    while cursor.valid() && cursor.key().starts_with(prefix) {
        out.push((cursor.key().to_vec(), cursor.value().to_vec()));
        cursor.next();
    }
    cursor.status().unwrap_or_else(|e| panic!("{}: scan: {e}", engine.name()));
    out
}

/// Runs every check on `engine`, whose tables are [`tables`]`(data, uid, plain)`. `run` makes keys unique to one
/// run, so a shared cluster can be checked more than once.
pub fn check(engine: &dyn Engine, (data, uid, plain): (&str, &str, &str), run: &str) {
    check_rows(engine, data, plain, run);
    check_plain(engine, plain, run);
    check_uid_cells(engine, uid, run);
}

/// Rows of cells (the data table): merges, puts, batches over tables, cursors both ways, deletes, get_many.
fn check_rows(engine: &dyn Engine, data: &str, plain: &str, run: &str) {
    let name = engine.name();
    let key = |k: &str| format!("{run}{k}").into_bytes();
    let get = |table: &str, k: &[u8]| engine.get(table, k, ReadHints::default()).unwrap();

    // Cells added by merges read back merged, later cell winning (OpenTSDB's puts of one qualifier).
    let row = key("row1");
    write(engine, |b| b.merge(data, &row, &columns(&[(b"\x00\x10", b"\x01"), (b"\x00\x20", b"\x02")])));
    write(engine, |b| b.merge(data, &row, &columns(&[(b"\x00\x10", b"\x07"), (b"\x00\x30", b"\x03")])));
    let want = columns(&[(b"\x00\x10", b"\x07"), (b"\x00\x20", b"\x02"), (b"\x00\x30", b"\x03")]);
    assert_eq!(get(data, &row), Some(want.clone()), "{name}: merged row");
    // A put replaces the whole row.
    write(engine, |b| b.put(data, &row, &columns(&[(b"\x00\x40", b"\x04")])));
    assert_eq!(get(data, &row), Some(columns(&[(b"\x00\x40", b"\x04")])), "{name}: replaced row");

    // A batch over several tables lands; cursors read in key order from a key; deletes remove.
    let (r2, r3, r4) = (key("row2"), key("row3"), key("row4"));
    write(engine, |b| {
        b.merge(data, &r3, &columns(&[(b"\x00\x10", b"\x03")]));
        b.merge(data, &r2, &columns(&[(b"\x00\x10", b"\x02")]));
        b.merge(data, &r4, &columns(&[(b"\x00\x10", b"\x04")]));
        b.put(plain, &key("p1"), b"one");
    });
    let keys: Vec<Vec<u8>> = scan(engine, data, &r2, run.as_bytes()).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![r2.clone(), r3.clone(), r4.clone()], "{name}: scan from row2");
    write(engine, |b| b.delete(data, &r3));
    let keys: Vec<Vec<u8>> = scan(engine, data, &r2, run.as_bytes()).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![r2.clone(), r4.clone()], "{name}: scan after a delete");
    // Backward reads: the last row at or before a key, then the one before it (`row3` is gone: `row2`, `row1`).
    let mut cursor = engine.cursor(data, ReadHints::default()).expect("declared table");
    cursor.seek_for_prev_from(&r3, run.as_bytes());
    assert_eq!(cursor.valid().then(|| cursor.key().to_vec()), Some(r2.clone()), "{name}: seek_for_prev");
    cursor.prev();
    assert_eq!(cursor.valid().then(|| cursor.key().to_vec()), Some(row.clone()), "{name}: prev");
    cursor.status().unwrap_or_else(|e| panic!("{name}: backward read: {e}"));
    drop(cursor);
    let mut many = Vec::new();
    engine
        .get_many(data, &[&r2, &r3, &r4], true, ReadHints::default(), &mut |i, v| {
            many.push((i, v.map(<[u8]>::to_vec)));
            Ok(())
        })
        .unwrap();
    assert_eq!(
        many,
        vec![(0, Some(columns(&[(b"\x00\x10", b"\x02")]))), (1, None), (2, Some(columns(&[(b"\x00\x10", b"\x04")])))],
        "{name}: get_many"
    );
}

/// Plain tables: one value per key, merges by the table's function, range deletes (`p1` was put by
/// [`check_rows`]'s batch over tables).
fn check_plain(engine: &dyn Engine, plain: &str, run: &str) {
    let name = engine.name();
    let key = |k: &str| format!("{run}{k}").into_bytes();
    let get = |table: &str, k: &[u8]| engine.get(table, k, ReadHints::default()).unwrap();
    assert_eq!(get(plain, &key("p1")), Some(b"one".to_vec()), "{name}: plain put");
    let counter = key("c");
    for n in [5i64, 7, -2] {
        write(engine, |b| b.merge(plain, &counter, &n.to_be_bytes()));
    }
    assert_eq!(get(plain, &counter), Some(10i64.to_be_bytes().to_vec()), "{name}: plain merge");
    // Merges that are maxima and minima, in any order, several to a batch; a put replaces what they made (also
    // with a smaller maximum or a larger minimum) and later merges apply to it; a delete removes the value, and
    // later merges start afresh, whatever their number (an engine that writes them blindly must not mask them).
    let be = |n: i64| Some(n.to_be_bytes().to_vec());
    let (hi, lo) = (key("hi1"), key("lo1"));
    for n in [3i64, 9, 4] {
        write(engine, |b| {
            b.merge(plain, &hi, &n.to_be_bytes());
            b.merge(plain, &lo, &(n + 100).to_be_bytes());
        });
    }
    write(engine, |b| {
        b.merge(plain, &hi, &1i64.to_be_bytes());
        b.merge(plain, &hi, &8i64.to_be_bytes());
        b.merge(plain, &lo, &(200i64).to_be_bytes());
    });
    assert_eq!((get(plain, &hi), get(plain, &lo)), (be(9), be(103)), "{name}: max and min merges");
    write(engine, |b| {
        b.put(plain, &hi, &2i64.to_be_bytes());
        b.put(plain, &lo, &150i64.to_be_bytes());
    });
    assert_eq!((get(plain, &hi), get(plain, &lo)), (be(2), be(150)), "{name}: a put replaces max and min");
    write(engine, |b| {
        b.merge(plain, &hi, &5i64.to_be_bytes());
        b.merge(plain, &lo, &160i64.to_be_bytes());
    });
    assert_eq!((get(plain, &hi), get(plain, &lo)), (be(5), be(150)), "{name}: merges after a put");
    // The number the put replaced, written again, counts again.
    write(engine, |b| b.merge(plain, &hi, &9i64.to_be_bytes()));
    assert_eq!(get(plain, &hi), be(9), "{name}: the replaced maximum written again");
    write(engine, |b| {
        b.delete(plain, &hi);
        b.delete(plain, &lo);
    });
    assert_eq!((get(plain, &hi), get(plain, &lo)), (None, None), "{name}: deleted max and min");
    write(engine, |b| {
        b.merge(plain, &hi, &1i64.to_be_bytes());
        b.merge(plain, &lo, &900i64.to_be_bytes());
    });
    assert_eq!((get(plain, &hi), get(plain, &lo)), (be(1), be(900)), "{name}: merges after a delete");
    // A put of a sum, then merges onto it; read through every read path.
    write(engine, |b| b.put(plain, &counter, &40i64.to_be_bytes()));
    write(engine, |b| b.merge(plain, &counter, &2i64.to_be_bytes()));
    assert_eq!(get(plain, &counter), be(42), "{name}: a sum put, then merged");
    let mut many = Vec::new();
    engine
        .get_many(plain, &[&counter, &hi, &lo, &key("lo-absent")], false, ReadHints::default(), &mut |i, v| {
            many.push((i, v.map(<[u8]>::to_vec)));
            Ok(())
        })
        .unwrap();
    assert_eq!(many, vec![(0, be(42)), (1, be(1)), (2, be(900)), (3, None)], "{name}: get_many of merged values");
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = scan(engine, plain, &key("hi"), &key("hi"));
    assert_eq!(scanned, vec![(hi.clone(), 1i64.to_be_bytes().to_vec())], "{name}: scan of a merged value");
    let (m1, m2, m3) = (key("m1"), key("m2"), key("m3"));
    write(engine, |b| {
        for k in [&m1, &m2, &m3] {
            b.put(plain, k, b"");
        }
    });
    write(engine, |b| b.delete_range(plain, &m1, &m3));
    let marks: Vec<Vec<u8>> = scan(engine, plain, &key("m"), &key("m")).into_iter().map(|(k, _)| k).collect();
    assert_eq!(marks, vec![m3.clone()], "{name}: delete_range keeps the end");
    // The table's last row (runs are checked in key order, so this run's keys are the last).
    let mut cursor = engine.cursor(plain, ReadHints::default()).expect("declared table");
    cursor.seek_to_last();
    assert_eq!(cursor.valid().then(|| cursor.key().to_vec()), Some(key("p1")), "{name}: seek_to_last");
    drop(cursor);
}

/// UID-like cells: `qualifier 0 row`; a counter by increment; mappings by compare-and-set, absent = None.
fn check_uid_cells(engine: &dyn Engine, uid: &str, run: &str) {
    let name = engine.name();
    let key = |k: &str| format!("{run}{k}").into_bytes();
    let get = |table: &str, k: &[u8]| engine.get(table, k, ReadHints::default()).unwrap();
    let counter_key = super::cell_key(b"metrics", format!("\0{run}").as_bytes());
    assert_eq!(engine.increment(uid, &counter_key, 1).unwrap(), 1, "{name}: first increment");
    assert_eq!(engine.increment(uid, &counter_key, 2).unwrap(), 3, "{name}: increment by 2");
    assert_eq!(get(uid, &counter_key), Some(3i64.to_be_bytes().to_vec()), "{name}: counter bytes");
    let forward = super::cell_key(b"metrics", &key("sys.cpu"));
    assert!(engine.check_and_put(uid, &forward, None, b"\0\0\x01").unwrap(), "{name}: CAS on absent");
    assert!(!engine.check_and_put(uid, &forward, None, b"\0\0\x02").unwrap(), "{name}: CAS lost");
    assert!(!engine.check_and_put(uid, &forward, Some(b"\0\0\x09"), b"\0\0\x02").unwrap(), "{name}: CAS mismatch");
    assert!(engine.check_and_put(uid, &forward, Some(b"\0\0\x01"), b"\0\0\x02").unwrap(), "{name}: CAS match");
    assert_eq!(get(uid, &forward), Some(b"\0\0\x02".to_vec()), "{name}: CAS value");
    // One kind's names, in name order, from a prefix (what `suggest` reads).
    write(engine, |b| {
        b.put(uid, &super::cell_key(b"metrics", &key("sys.mem")), b"\0\0\x03");
        b.put(uid, &super::cell_key(b"tagk", &key("sys.host")), b"\0\0\x01");
    });
    let names: Vec<Vec<u8>> =
        scan(engine, uid, &super::cell_key(b"metrics", &key("sys.")), &super::cell_key(b"metrics", &key("sys.")))
            .into_iter()
            .map(|(k, _)| k)
            .collect();
    assert_eq!(
        names,
        vec![super::cell_key(b"metrics", &key("sys.cpu")), super::cell_key(b"metrics", &key("sys.mem"))],
        "{name}: one kind's names from a prefix"
    );
    write(engine, |b| b.delete(uid, &forward));
    assert_eq!(get(uid, &forward), None, "{name}: cell delete");
    assert!(engine.cursor("no:such", ReadHints::default()).is_none(), "{name}: undeclared table");
}

/// What an engine that applies `parts` blindly (see [`Parts`]) reads for `key` after `whole` (the value stored
/// whole, if any) and then `operands` were merged into it: each part kept as a sum, a maximum or a minimum of
/// its updates, then joined with `merge`. Test support for tables that declare parts: this must equal
/// `merge(key, whole, operands)`.
pub fn read_through_parts(
    merge: &Merge,
    parts: &Parts,
    key: &[u8],
    whole: Option<&[u8]>,
    operands: &[&[u8]],
) -> Option<Vec<u8>> {
    let mut held: Vec<Option<i64>> = vec![None; parts.parts.len()];
    for op in operands {
        for (i, n) in (parts.split)(key, op).expect("a key with parts") {
            held[i] = Some(match (held[i], parts.parts[i].1) {
                (None, _) => n,
                (Some(h), Combine::Sum) => h + n,
                (Some(h), Combine::Max) => h.max(n),
                (Some(h), Combine::Min) => h.min(n),
            });
        }
    }
    let joined: Vec<Vec<u8>> =
        held.iter().enumerate().filter_map(|(i, h)| h.map(|n| (parts.join)(key, i, n))).collect();
    if joined.is_empty() {
        return whole.map(<[u8]>::to_vec);
    }
    let joined: Vec<&[u8]> = joined.iter().map(Vec::as_slice).collect();
    Some((merge.full)(key, whole, &joined, MergeContext { stored: false }))
}
