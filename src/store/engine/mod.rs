//! The storage engine boundary: what the store needs from whatever keeps its bytes.
//!
//! Everything OpenTSDB-specific sits above this line, in the store: row keys, qualifiers, compacting an hour,
//! folding rollups, the series index, UID assignment. An engine below it only keeps **tables of rows in key
//! order**: `get`, ordered scans from a key (a [`Cursor`]), atomic [`WriteBatch`]es of puts, deletes and merges,
//! and the two atomic single-row operations OpenTSDB's UID assignment is built on, [`Engine::increment`] and
//! [`Engine::check_and_put`]. That is the subset of HBase's API OpenTSDB uses (spec hbase §3–4), so an HBase
//! engine implements the same trait; the embedded RocksDB engine ([`rocks`]) is the default.
//!
//! Each table is declared by the store with a [`TableSpec`]: its name (`<table>:<family>`, as OpenTSDB names
//! HBase tables and families), how its keys and values stand for HBase cells ([`CellMap`]), and what a merge means
//! in it ([`Merge`]). Merges are how the store adds to a row without reading it: in RocksDB a merge operand
//! the engine folds in its background work; in HBase a merge of [`CellMap::RowColumns`] is a put of those
//! columns, which is exactly OpenTSDB's own write.
//!
//! RocksDB-only strengths stay reachable as capabilities an engine may have ([`Engine::maintenance`],
//! [`Engine::table_files`]) and as per-table hooks that need an engine that runs them ([`Merge`],
//! [`TableSpec::filter`]); the store asks for them and does without when they are absent.
pub mod batch;
#[doc(hidden)]
pub mod conformance;
pub mod hbase;
pub mod rocks;

use std::sync::Arc;

pub use batch::{Op, WriteBatch};

use super::StoreError;

/// How durable a write is when [`Engine::write`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// In the engine's log: survives a crash of the process (RocksDB's write-ahead log, HBase's WAL).
    Logged,
    /// In the log and synced to disk: survives a crash of the machine.
    Synced,
}

/// What a read tells the engine about the bytes it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadHints {
    /// Whether the blocks read should stay cached (false for one-pass reads of cold data: a fold, a scan).
    pub fill_cache: bool,
}

impl Default for ReadHints {
    fn default() -> Self {
        ReadHints { fill_cache: true }
    }
}

/// How a table's keys and values stand for HBase rows and cells: what an engine that stores real cells (HBase)
/// translates, and what RocksDB stores as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellMap {
    /// Key = the HBase row key; value = the row's cells as OpenTSDB columns (`codec::columns`: qualifier and
    /// value of each cell, in qualifier order once merged). `tsdb`, the rollup tables.
    RowColumns,
    /// Key = `qualifier 0x00 row` ([`cell_key`]); value = the one cell's value. `tsdb-uid`, `tsdb-meta`: the
    /// qualifier comes first so that all names of one UID kind are one key range.
    QualifierRow,
    /// rtsd's own tables (the series index, rollup marks, settings, Chukwa state): key = row, value = one cell.
    Plain,
}

/// The key of a [`CellMap::QualifierRow`] cell `(row, qualifier)`.
pub fn cell_key(qualifier: &[u8], row: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(qualifier.len() + 1 + row.len());
    k.extend_from_slice(qualifier);
    k.push(0);
    k.extend_from_slice(row);
    k
}

/// What a merge into a table means. The store's merge functions are OpenTSDB's (compaction) or rtsd's (rollup
/// slots, counters); an engine with merge operators (RocksDB) runs them lazily, one that has none applies
/// [`Merge::full`] by read-modify-write or maps the merge to its own operation (see [`CellMap::RowColumns`]).
#[derive(Clone)]
pub struct Merge {
    /// A stable name: RocksDB refuses to open a table whose merge operator was renamed.
    pub name: &'static str,
    /// The value of `key` after `operands` (oldest first) are applied to `existing`.
    pub full: Arc<MergeFn>,
    /// How operands are combined with each other before the stored value is known (RocksDB's partial merge);
    /// `None`: concatenated, for operands that are lists whose concatenation keeps "later wins".
    pub partial: Option<Arc<MergeFn>>,
}

/// How a table's merge splits into updates of independent parts of the value, each an engine without merge
/// operators can apply blindly, with no read: a sum (HBase: an Increment), a maximum or a minimum (HBase: a Put
/// whose version orders the values, so that the version HBase serves is the one wanted). Declared by the store for
/// tables whose merges are sums, maxima and minima of numbers (the series index, the rollup marks); an engine that
/// can apply them writes each merge as its parts' mutations in the batch's own round trip, instead of a read and
/// a compare-and-set after it. An engine with merge operators (RocksDB) ignores it.
///
/// The value of a key is always [`Merge::full`] of what the engine stores whole for it (merges applied by
/// read-modify-write, puts) and of one [`Parts::join`] operand per stored part: so both forms may meet in one key
/// (rows written before the parts existed, operands [`Parts::split`] declines), and `full` must be commutative and
/// associative, which sums, maxima and minima are.
#[derive(Clone, Copy)]
pub struct Parts {
    /// The parts a key's value may have: a short name each (HBase: the qualifier of its cell; never empty) and
    /// how its updates combine.
    pub parts: &'static [(&'static [u8], Combine)],
    /// The updates an operand makes, as `(index into parts, number)`; `None` when it cannot be said so (the
    /// engine then merges it whole). A value is split as an operand merged into nothing, so `full(key, None,
    /// [v]) == v` must hold for a value that splits. Maxima and minima are numbers in `0..=u32::MAX`.
    pub split: SplitFn,
    /// The operand that stands for part `index` holding `number`.
    pub join: fn(key: &[u8], index: usize, number: i64) -> Vec<u8>,
}

/// [`Parts::split`]: `(key, operand) -> updates as (index into parts, number)`, `None` for a key without parts.
pub type SplitFn = fn(key: &[u8], operand: &[u8]) -> Option<Vec<(usize, i64)>>;

/// How the updates of one [`Parts`] part combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    Sum,
    Max,
    Min,
}

/// A merge function: `(key, existing value, operands oldest first, context) -> new value`.
pub type MergeFn = dyn Fn(&[u8], Option<&[u8]>, &[&[u8]], MergeContext) -> Vec<u8> + Send + Sync;

/// Where a merge runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeContext {
    /// The engine's background work (a flush or compaction), whose result is stored; false for a read's merge,
    /// whose result is used once and dropped.
    pub stored: bool,
}

/// What a table filter decides about one row when the engine rewrites its files (RocksDB's compactions).
pub enum FilterDecision<'a> {
    Keep,
    Remove,
    Change(&'a [u8]),
}

/// Decides, row by row, what survives the engine's rewrite of a table's files: retention, and packing of closed
/// hours. One [`RowFilter`] is made per rewrite, with the cut of the moment it starts.
pub trait FilterFactory: Send + Sync {
    fn create(&self) -> Box<dyn RowFilter>;
}

pub trait RowFilter: Send {
    fn filter(&mut self, key: &[u8], value: &[u8]) -> FilterDecision<'_>;
}

/// The physical shape of a table, as a hint to the engine's tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// OpenTSDB's data table: large, written fast, read by wide scans; compressed harder the older it gets.
    Data,
    /// Small tables read by point lookups (UIDs, meta, the series index, Chukwa state).
    Small,
    /// OpenTSDB rollup and pre-aggregate tables (cells per row, like the data table).
    Rollup,
    /// rtsd's own rollup rows (one column per slot, merged slot by slot): larger rows, larger blocks.
    RollupSlots,
    /// Short-lived bookkeeping (rollup marks).
    Marks,
    /// An ingest log: large values written once, read back only to recover them, deleted soon after.
    Log,
}

/// A table as the store declares it.
#[derive(Clone)]
pub struct TableSpec {
    /// `<table>:<family>`.
    pub name: String,
    pub cells: CellMap,
    pub tuning: Tuning,
    pub merge: Option<Merge>,
    /// Run over rows whenever the engine rewrites the table's files.
    pub filter: Option<Arc<dyn FilterFactory>>,
    /// Rewrite files at least this often even when nothing else would (so a filter's expiry reaches cold files).
    pub rewrite_every_secs: Option<u64>,
    /// The merge's parts, for an engine that applies them blindly (see [`Parts`]).
    pub parts: Option<Parts>,
    /// The merge takes its operands in order and each later one wins where it speaks (rtsd's rollup rows, slot by
    /// slot), so an engine without merge operators may store each operand blindly as a cell of its own, ordered
    /// by when it was written, and merge the cells on read (HBase: a Put in the batch's Multi instead of a read and
    /// a compare-and-set after it). An engine with merge operators (RocksDB) ignores it.
    pub blind_operands: bool,
}

impl TableSpec {
    pub fn new(name: impl Into<String>, cells: CellMap, tuning: Tuning) -> TableSpec {
        TableSpec {
            name: name.into(),
            cells,
            tuning,
            merge: None,
            filter: None,
            rewrite_every_secs: None,
            parts: None,
            blind_operands: false,
        }
    }

    /// Declares that the merge's operands may be stored blindly, each on its own (see
    /// [`TableSpec::blind_operands`]).
    pub fn with_blind_operands(mut self) -> TableSpec {
        self.blind_operands = true;
        self
    }

    pub fn with_merge(mut self, merge: Merge) -> TableSpec {
        self.merge = Some(merge);
        self
    }

    /// Declares how the merge splits into parts (see [`Parts`]); only with a merge, whose `full` joins them.
    pub fn with_parts(mut self, parts: Parts) -> TableSpec {
        self.parts = Some(parts);
        self
    }
}

/// An ordered read of one table: RocksDB's iterator, an HBase scanner.
pub trait Cursor {
    /// Positions at the first row whose key is >= `key`.
    fn seek(&mut self, key: &[u8]);
    /// [`Cursor::seek`], telling the engine that no key at or past `end` will be read: one that fetches rows
    /// ahead of the reader (HBase's scanner) stops there instead of reading on to the end of the table.
    fn seek_until(&mut self, key: &[u8], end: &[u8]) {
        let _ = end;
        self.seek(key);
    }
    /// Positions at the last row of the table.
    fn seek_to_last(&mut self);
    /// Positions at the last row whose key is <= `key` (a reversed scan).
    fn seek_for_prev(&mut self, key: &[u8]);
    /// [`Cursor::seek_for_prev`], telling the engine that no key before `floor` will be read (by [`Cursor::prev`]):
    /// an engine without reversed scans (HBase here) reads `floor..=key` forward instead of the whole table.
    fn seek_for_prev_from(&mut self, key: &[u8], floor: &[u8]) {
        let _ = floor;
        self.seek_for_prev(key);
    }
    fn valid(&self) -> bool;
    /// The current row's key; only while [`Cursor::valid`].
    fn key(&self) -> &[u8];
    /// The current row's value (merged); only while [`Cursor::valid`].
    fn value(&self) -> &[u8];
    fn next(&mut self);
    /// Moves to the previous row (reversed scans).
    fn prev(&mut self);
    /// Why the cursor stopped, when it stopped on an error rather than at the end of the table.
    fn status(&self) -> Result<(), StoreError>;
}

/// One compare-and-set of [`Engine::check_and_put_many`].
#[derive(Debug, Clone, Copy)]
pub struct CheckAndPut<'a> {
    pub key: &'a [u8],
    /// `None`: the key must have no value.
    pub expected: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// What [`Engine::get_many`] calls with each key's index and value.
pub type RowVisitor<'a> = dyn FnMut(usize, Option<&[u8]>) -> Result<(), StoreError> + 'a;

/// An engine: tables of rows in key order. Every method is safe to call from many threads.
pub trait Engine: Send + Sync {
    /// The engine's name in messages and `/api/stats` ("rocksdb", "hbase").
    fn name(&self) -> &'static str;

    /// Whether the table exists (a read-only open may lack tables a newer configuration declares).
    fn has_table(&self, table: &str) -> bool;

    /// The value of one row (merged), if stored.
    fn get(&self, table: &str, key: &[u8], hints: ReadHints) -> Result<Option<Vec<u8>>, StoreError>;

    /// Reads many rows of one table (`sorted`: the keys ascend, which lets the engine read them in one pass) and
    /// calls `f(i, value)` for each key in order, the value borrowed in place.
    fn get_many(
        &self,
        table: &str,
        keys: &[&[u8]],
        sorted: bool,
        hints: ReadHints,
        f: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError>;

    /// An ordered read of a table, positioned nowhere until [`Cursor::seek`]; `None` if the table is absent.
    fn cursor(&self, table: &str, hints: ReadHints) -> Option<Box<dyn Cursor + '_>>;

    /// Applies a batch atomically: every operation or none.
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), StoreError>;

    /// Makes every write acknowledged so far survive a crash of the machine.
    fn sync(&self) -> Result<(), StoreError>;

    /// Adds `delta` to the 8-byte big-endian counter in `key` (0 when absent), atomically, and returns the new
    /// value (HBase's Increment; OpenTSDB's UID counter).
    fn increment(&self, table: &str, key: &[u8], delta: i64) -> Result<i64, StoreError>;

    /// Puts `value` at `key` if the stored value is `expected` (`None`: no value), atomically; returns whether it
    /// did (HBase's CheckAndPut; OpenTSDB's UID mappings).
    fn check_and_put(&self, table: &str, key: &[u8], expected: Option<&[u8]>, value: &[u8])
        -> Result<bool, StoreError>;

    /// [`Engine::check_and_put`] of each `(key, expected, value)`, each atomic on its own (not as a group): one
    /// outcome per entry, in order. An engine whose calls are round trips (HBase) has them all in flight at once;
    /// the default runs them one after the other, which is as fast as it gets for an embedded engine.
    fn check_and_put_many(&self, table: &str, cells: &[CheckAndPut<'_>]) -> Vec<Result<bool, StoreError>> {
        cells.iter().map(|c| self.check_and_put(table, c.key, c.expected, c.value)).collect()
    }

    /// Control of background work, for an engine that has its own (RocksDB); `None` for one that runs it
    /// elsewhere (HBase's region servers).
    fn maintenance(&self) -> Option<&dyn Maintenance> {
        None
    }

    /// Loading sorted table files built outside the engine (`rtsd import`), for an engine that can.
    fn table_files(&self) -> Option<&dyn TableFiles> {
        None
    }

    /// The engine's own counters for `stats` and `/api/stats` (`tsd.` is prepended): a cluster client's retries,
    /// relocations and lookups. None for an embedded engine.
    fn client_stats(&self) -> Vec<crate::metrics::Stat> {
        Vec::new()
    }
}

/// Figures of one table's in-memory and on-disk state (see [`Maintenance::table_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Bytes of all its memtables, and of the one taking writes.
    pub memtable_bytes: u64,
    pub active_memtable_bytes: u64,
    /// Files written by flushes and not yet compacted into the levels below.
    pub level0_files: u64,
    /// Whether a compaction or a memtable flush is owed.
    pub compaction_pending: bool,
    pub flush_pending: bool,
    /// Bytes of the indexes and filters of its open files.
    pub table_readers_bytes: u64,
    /// An estimate of its rows.
    pub estimated_rows: u64,
}

/// An engine's background work, which the store steers after bursts and for retention.
pub trait Maintenance {
    fn table_stats(&self, table: &str) -> Option<TableStats>;
    /// Compactions and flushes running now.
    fn running_jobs(&self) -> u64;
    /// Writes a table's memtable to disk.
    fn flush_table(&self, table: &str) -> Result<(), StoreError>;
    /// Compacts a table's whole key range; with `bottommost`, the bottom level is rewritten too (so every
    /// [`TableSpec::filter`] sees every row).
    fn compact_table(&self, table: &str, bottommost: bool) -> Result<(), StoreError>;
    /// Bytes held by the engine's block cache.
    fn cache_bytes(&self) -> u64;
    /// Bytes of the engine's files on disk.
    fn disk_bytes(&self) -> u64;
}

/// A sorted table file in the making (see [`TableFiles`]).
pub trait TableFileWriter: Send {
    /// Adds a row; keys must ascend.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Adds a merge operand; keys must ascend.
    fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<(), StoreError>;
    /// Finishes the file; `None` when nothing was added.
    fn finish(self: Box<Self>) -> Result<Option<std::path::PathBuf>, StoreError>;
}

/// Bulk loading: rows written into sorted files and handed to the engine whole.
pub trait TableFiles: Sync {
    /// A writer of one file for `table` at `path`; `bulk` tunes it for a load (larger blocks, a dictionary).
    fn writer(
        &self,
        table: &str,
        path: &std::path::Path,
        bulk: bool,
    ) -> Result<Box<dyn TableFileWriter + '_>, StoreError>;
    /// Whether `key` may be stored in `table` (false: certainly not; no I/O).
    fn may_exist(&self, table: &str, key: &[u8]) -> bool;
    /// Takes the files into `table` (moved, not copied); durable when it returns.
    fn ingest(&self, table: &str, files: Vec<std::path::PathBuf>) -> Result<(), StoreError>;
}

/// A failure inside an engine, classified so that the store can tell a full disk from a fault.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct EngineError {
    pub kind: EngineErrorKind,
    /// The engine's own words, prefixed with its name ("RocksDB error: ...").
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineErrorKind {
    NoSpace,
    NoFiles,
    /// The engine cannot be reached for now (a storage cluster down); it heals by itself.
    Unavailable,
    Other,
}
