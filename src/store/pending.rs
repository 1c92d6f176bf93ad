//! The in-memory series table: points that are acknowledged (in the series log, a write-ahead log of their own)
//! but not yet merged into their rows (spec: performance, "the machine's limits"). What follows is the embedded
//! engine's log, files in the data directory; on HBase the log is a table there ([`super::shared_log`]) and the
//! table works the same.
//!
//! Writing every point as its own RocksDB merge operand costs one memtable skip-list insert per point, which
//! capped ingest near 0.6 M points/s on two cores (perf: ~40% of the daemon's time in `InlineSkipList::Insert`
//! and in merging those operands at flush). Instead, a commit appends its batch's points as ONE record to the
//! series log (one `write(2)`; fsynced when the client asked for `sync`), and adds them to their rows here.
//! Like RocksDB's own write-ahead log with its default options, a record is durable against a crash of the
//! process once written: a telnet `version` after puts and an HTTP reply still come after the write.
//! A flush ([`super::Store::flush_pending`]) moves to a new log segment, writes each row's accumulated points as
//! one merge operand (a row fragment) in large RocksDB write batches (rows in key order, each with its rollup
//! mark and series-index notes), and then deletes the older segments. After a crash, the segments left are replayed at
//! open, so nothing acknowledged is lost; a record whose points were flushed already is merged again, which the
//! row merge collapses (identical cells).
//!
//! Readers of data rows and of the series index see the table's points without waiting for a flush: they take
//! the points of the rows they read from the table and from the slices of a flush under way
//! (`PendingTable::unflushed`, `unflushed_of`, `unflushed_keys`), which the
//! flush lists until each slice is written, so every acknowledged point is in one or the other; a daemon with
//! nothing pending pays one atomic load per read. Readers that go to the engine directly settle the table first
//! ([`super::Store::settle`]), and on HBase reads do, to show other nodes what they return. Read-only opens
//! (`rtsd scan` beside a daemon) read the log's segments and merge their points into the rows they read.
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::engine::Durability;
use super::shared_log::SharedLog;
use super::{log_error, StoreError};

/// The series log's directory inside the data directory.
pub const LOG_DIR: &str = "series-log";

/// Independent locks, so connections that commit at once rarely wait for each other.
const SHARDS: usize = 16;

/// The points of a batch as they are logged: per point `u16 key length ‖ row key ‖ u8 column length ‖ column`
/// (the column in `codec::push_column`'s encoding, so a row fragment is the concatenation of its columns).
/// The buffer starts with room for the log record's header, so appending it to the series log copies nothing.
#[derive(Default)]
pub struct PointLog {
    /// Empty, or [`RECORD_HEADER`] bytes (filled by [`SeriesLog::append_record`]) and then the points.
    bytes: Vec<u8>,
}

/// A series log record's header: `u32 length ‖ u32 CRC-32` of its payload (little-endian).
pub(super) const RECORD_HEADER: usize = 8;

impl PointLog {
    pub(super) fn push(&mut self, key: &[u8], qualifier: &[u8], value: &[u8]) {
        if self.bytes.is_empty() {
            self.bytes.resize(RECORD_HEADER, 0);
        }
        self.bytes.extend_from_slice(&(key.len() as u16).to_be_bytes());
        self.bytes.extend_from_slice(key);
        let at = self.bytes.len();
        self.bytes.push(0);
        rtsd_protocol::codec::push_column(&mut self.bytes, qualifier, value);
        self.bytes[at] = (self.bytes.len() - at - 1) as u8;
    }

    /// The logged points (a record's payload).
    pub(super) fn payload(&self) -> &[u8] {
        self.bytes.get(RECORD_HEADER..).unwrap_or_default()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
    }
}

/// Iterates (row key, column) of a logged batch; stops at the first framing error (records are checksummed, so
/// only a bug could produce one).
pub(super) fn entries(mut log: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    std::iter::from_fn(move || {
        let (len, rest) = log.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_be_bytes(*len));
        let key = rest.get(..len)?;
        let col_len = usize::from(*rest.get(len)?);
        let column = rest.get(len + 1..len + 1 + col_len)?;
        log = &rest[len + 1 + col_len..];
        Some((key, column))
    })
}

/// The series log: numbered segment files of records `u32 length ‖ u32 CRC-32 ‖ payload` (little-endian).
pub(super) struct SeriesLog {
    dir: PathBuf,
    /// The segment being appended to, and its number.
    current: Mutex<(File, u64)>,
}

impl SeriesLog {
    /// Opens the log for appending in a new segment after every existing one. Returns the log and the existing
    /// segments' numbers (oldest first), whose records the caller replays.
    pub(super) fn open(data_dir: &Path) -> std::io::Result<(SeriesLog, Vec<u64>)> {
        let dir = data_dir.join(LOG_DIR);
        std::fs::create_dir_all(&dir)?;
        let existing = segments(&dir)?;
        let next = existing.last().map_or(1, |n| n + 1);
        let file = create_segment(&dir, next)?;
        Ok((SeriesLog { dir, current: Mutex::new((file, next)) }, existing))
    }

    /// Appends one record; with `sync`, fsyncs it.
    #[cfg(test)]
    fn append(&self, payload: &[u8], sync: bool) -> std::io::Result<()> {
        let mut record = vec![0; RECORD_HEADER];
        record.extend_from_slice(payload);
        self.append_record(&mut record, sync)
    }

    /// Appends a record whose payload follows [`RECORD_HEADER`] bytes in `record`, which are overwritten with the
    /// header; with `sync`, fsyncs it.
    fn append_record(&self, record: &mut [u8], sync: bool) -> std::io::Result<()> {
        let payload = &record[RECORD_HEADER..];
        let (len, crc) = ((payload.len() as u32).to_le_bytes(), crc32fast::hash(payload).to_le_bytes());
        record[..4].copy_from_slice(&len);
        record[4..RECORD_HEADER].copy_from_slice(&crc);
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let (file, _) = &mut *current;
        let end = file.metadata()?.len();
        let written = file.write_all(record).and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            // A record cut short (a full disk) must not stay in front of the next one: a replay stops at the
            // first torn record and would skip every acknowledged record after it. Cut it off; if even that
            // fails, later records go to a new segment.
            if file.set_len(end).is_err() {
                let next = current.1 + 1;
                if let Ok(f) = create_segment(&self.dir, next) {
                    *current = (f, next);
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Starts a new segment; returns its number (every older segment is complete).
    fn rotate(&self) -> std::io::Result<u64> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let next = current.1 + 1;
        *current = (create_segment(&self.dir, next)?, next);
        Ok(next)
    }

    /// Deletes the segments numbered below `upto` (their points are in RocksDB).
    pub(super) fn delete_before(&self, upto: u64) -> std::io::Result<()> {
        for n in segments(&self.dir)? {
            if n < upto {
                std::fs::remove_file(segment_path(&self.dir, n))?;
            }
        }
        Ok(())
    }
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:020}.log"))
}

fn create_segment(dir: &Path, n: u64) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new().create(true).append(true).open(segment_path(dir, n))?;
    // The new name must survive a crash too, or a replay would miss the segment.
    File::open(dir)?.sync_all()?;
    Ok(file)
}

/// The segment numbers in `dir`, oldest first.
fn segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(n) = name.to_str().and_then(|n| n.strip_suffix(".log")).and_then(|n| n.parse().ok()) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Calls `f` with each intact record of the series log in `data_dir` (oldest first), without changing anything.
/// A record cut short or failing its checksum ends its segment: it was being written when the process died, so
/// it was never acknowledged. A segment deleted meanwhile (a daemon flushed it) is skipped.
pub(super) fn read_log(data_dir: &Path, mut f: impl FnMut(&[u8])) -> std::io::Result<()> {
    let dir = data_dir.join(LOG_DIR);
    let list = match segments(&dir) {
        Ok(list) => list,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for n in list {
        let mut bytes = Vec::new();
        match File::open(segment_path(&dir, n)) {
            Ok(mut file) => file.read_to_end(&mut bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut rest = bytes.as_slice();
        while let Some((head, tail)) = rest.split_first_chunk::<8>() {
            let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
            let Some(payload) = tail.get(..len) else { break };
            if crc32fast::hash(payload) != crc {
                tracing::warn!(segment = n, "series log record fails its checksum; the rest of the segment is skipped");
                break;
            }
            f(payload);
            rest = &tail[len..];
        }
    }
    Ok(())
}

/// One row's points not yet written to it.
#[derive(Clone)]
pub(super) struct Fragment {
    /// Columns in arrival order (later wins on the same qualifier, as the row merge applies them).
    pub(super) columns: Vec<u8>,
    pub(super) points: u64,
}

/// A row key, inline up to 32 bytes (a key with three tags is ~25): no pointer to chase per point.
pub(super) type RowKey = smallvec::SmallVec<[u8; 32]>;

/// A row of the table: its key, its pending points, and the row of its shard appended to after it last time.
#[derive(Clone)]
pub(super) struct Row {
    pub(super) key: RowKey,
    pub(super) fragment: Fragment,
    next: u32,
}

/// No row (the end of a chain of successors).
const NONE: u32 = u32::MAX;

/// A logged batch's points grouped into rows, in key order, each row's columns in arrival order: what a store
/// without a series table writes at once.
pub(super) fn rows_of(log: &[u8]) -> Vec<Row> {
    let mut rows: std::collections::BTreeMap<&[u8], Fragment> = std::collections::BTreeMap::new();
    for (key, column) in entries(log) {
        let fragment = rows.entry(key).or_insert_with(|| Fragment { columns: Vec::new(), points: 0 });
        fragment.columns.extend_from_slice(column);
        fragment.points += 1;
    }
    rows.into_iter().map(|(key, fragment)| Row { key: RowKey::from_slice(key), fragment, next: NONE }).collect()
}

/// What [`PendingTable::take`] took: the first log segment it did not cover, the rows, their point count.
pub(super) type Taken = (u64, Vec<Row>, u64);

/// Rows a flush writes in one write, shared with the readers that read them before they are written (see
/// [`PendingTable::unflushed`]).
pub(super) type Slice = Arc<Vec<Row>>;

/// Scratch space of a commit's insert, reused across commits: per point its key's hash and offset in the log,
/// twice (as logged, then grouped by shard).
pub type InsertOrder = Vec<(u64, u32)>;

/// The rows of one shard, in the order they were first appended to, found by key through `index`.
///
/// Collectors send their series in the same order every interval, so each row remembers the row appended to
/// after it last time and a point first tries that one: rows sit in a vector in first-touch order, so a batch
/// walks them sequentially, which the CPU prefetches, where a hash probe per point cost two or three cache misses
/// in a table of 100 k rows (perf: 12% of A telnet ingest). The index is for points out of their usual order.
struct Shard {
    rows: Vec<Row>,
    index: hashbrown::HashTable<u32>,
    /// The row appended to last, or [`NONE`].
    last: u32,
}

impl Shard {
    fn new() -> Shard {
        Shard { rows: Vec::new(), index: hashbrown::HashTable::new(), last: NONE }
    }

    /// Adds a column to the row `key` (whose hash is `hash`); returns the heap bytes that took (see
    /// [`PendingTable::bytes`]).
    fn append(&mut self, hasher: &foldhash::fast::FixedState, hash: u64, key: &[u8], column: &[u8]) -> usize {
        let guess = self.rows.get(self.last as usize).map_or(NONE, |r| r.next);
        let (at, bytes) = match self.rows.get(guess as usize) {
            Some(row) if row.key.as_slice() == key => (guess, 0),
            _ => {
                let rows = &mut self.rows;
                let (at, bytes) = match self.index.find(hash, |&i| rows[i as usize].key.as_slice() == key) {
                    Some(&i) => (i, 0),
                    None => {
                        let i = rows.len() as u32;
                        rows.push(Row {
                            key: RowKey::from_slice(key),
                            fragment: Fragment { columns: Vec::with_capacity(column.len() * 8), points: 0 },
                            next: NONE,
                        });
                        self.index.insert_unique(hash, i, |&j| hasher.hash_one(rows[j as usize].key.as_slice()));
                        (i, row_bytes(&rows[i as usize]))
                    }
                };
                if let Some(previous) = rows.get_mut(self.last as usize) {
                    previous.next = at;
                }
                (at, bytes)
            }
        };
        self.last = at;
        let f = &mut self.rows[at as usize].fragment;
        let before = f.columns.capacity();
        f.columns.extend_from_slice(column);
        f.points += 1;
        bytes + f.columns.capacity() - before
    }
}

/// Where a commit's points are logged before they join the table.
pub(super) enum Log {
    /// The embedded engine's: segment files in the data directory.
    Files(SeriesLog),
    /// A shared engine's (HBase): records in a table of the engine (see [`super::shared_log`]).
    Shared(SharedLog),
}

pub(super) struct PendingTable {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::FixedState,
    /// None for a read-only open, a shared engine without its log table (points go into their rows at once),
    /// and in unit tests of the table alone.
    log: Option<Log>,
    /// Held shared by a commit from its log append until its points are in the table; taken exclusively by a
    /// flush to start a new segment, so that every older segment's points are in the table.
    gate: RwLock<()>,
    /// Points in the table or being flushed: a flush subtracts its points only after its write, so a reader
    /// that sees zero knows every acknowledged point is in RocksDB.
    points: AtomicU64,
    /// The heap bytes of the rows counted in `points` (their keys, columns and table entries; approximate:
    /// allocator rounding and the tables' own arrays are left out), for `/api/stats/jvm`.
    bytes: AtomicU64,
    /// One flush at a time, so a reader's flush also waits for one already under way.
    pub(super) flush_lock: Mutex<()>,
    /// The slices of the flush under way not written yet, in write order: with the table, every acknowledged
    /// point not yet in its row is in one or the other. Held by a flush from its take until the slices are
    /// listed here, and by a reader while it copies, so a reader never finds a point in neither.
    flushing: Mutex<VecDeque<Slice>>,
}

impl PendingTable {
    pub(super) fn new(log: Option<Log>) -> PendingTable {
        PendingTable {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::new())).collect(),
            hasher: foldhash::fast::FixedState::default(),
            log,
            gate: RwLock::new(()),
            points: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            flush_lock: Mutex::new(()),
            flushing: Mutex::new(VecDeque::new()),
        }
    }

    pub(super) fn points(&self) -> u64 {
        self.points.load(Ordering::Acquire)
    }

    /// Whether commits go through the table (a log is kept): false for a shared engine without its log table.
    pub(super) fn logged(&self) -> bool {
        self.log.is_some()
    }

    /// The shared engine's log, when the points are logged there.
    pub(super) fn shared(&self) -> Option<&SharedLog> {
        match &self.log {
            Some(Log::Shared(log)) => Some(log),
            _ => None,
        }
    }

    /// The heap bytes the table's rows hold (see `bytes`).
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Logs a batch's points (fsynced with `sync`), then runs `write_rest` (the batch's other writes, which
    /// must come after the points they go with: Chukwa's de-duplication state says "stored"); once both are done
    /// the points join the table. `order` is scratch space (reused across commits).
    pub(super) fn commit(
        &self,
        log: &mut PointLog,
        points: u64,
        order: &mut InsertOrder,
        sync: bool,
        write_rest: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let _gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        match &self.log {
            Some(Log::Files(l)) => l.append_record(&mut log.bytes, sync).map_err(log_error)?,
            Some(Log::Shared(l)) => {
                l.append_record(&log.bytes, if sync { Durability::Synced } else { Durability::Logged })?
            }
            None => {}
        }
        write_rest()?;
        self.insert(log.payload(), points, order);
        Ok(())
    }

    /// Adds logged points to their rows, taking each shard's lock once.
    fn insert(&self, log: &[u8], points: u64, order: &mut InsertOrder) {
        order.clear();
        let mut counts = [0u32; SHARDS];
        let mut offset = 0usize;
        for (key, column) in entries(log) {
            let hash = self.hasher.hash_one(key);
            counts[shard_of(hash)] += 1;
            order.push((hash, offset as u32));
            offset += 2 + key.len() + 1 + column.len();
        }
        // Grouped by shard into the second half of `order` (a counting sort; stable, so points of one row keep
        // their order within the batch).
        let n = order.len();
        let mut starts = [0u32; SHARDS];
        let mut sum = n as u32;
        for (start, count) in starts.iter_mut().zip(counts) {
            *start = sum;
            sum += count;
        }
        order.resize(2 * n, (0, 0));
        for i in 0..n {
            let entry = order[i];
            let at = &mut starts[shard_of(entry.0)];
            order[*at as usize] = entry;
            *at += 1;
        }
        let mut i = n;
        let mut bytes = 0;
        while i < order.len() {
            let shard = shard_of(order[i].0);
            let mut rows = self.shards[shard].lock().unwrap_or_else(|e| e.into_inner());
            while i < order.len() && shard_of(order[i].0) == shard {
                let (hash, offset) = order[i];
                if let Some((key, column)) = entries(&log[offset as usize..]).next() {
                    bytes += rows.append(&self.hasher, hash, key, column);
                }
                i += 1;
            }
        }
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.points.fetch_add(points, Ordering::AcqRel);
    }

    /// Adds a log record found at open (already in the log: nothing is appended).
    pub(super) fn replay(&self, record: &[u8], order: &mut InsertOrder) {
        let points = entries(record).count() as u64;
        self.insert(record, points, order);
    }

    /// Takes every row out of the table. Returns the log segment below which every segment's points were taken,
    /// the rows, and their point count. The caller holds `flush_lock` and, once its write is done, calls
    /// [`PendingTable::flushed`] or [`PendingTable::restore`].
    pub(super) fn take(&self) -> Result<Taken, StoreError> {
        // Through the gate, every commit that appended to an older segment has its points in the table.
        let cut = {
            let _gate = self.gate.write().unwrap_or_else(|e| e.into_inner());
            match &self.log {
                Some(Log::Files(l)) => l.rotate().map_err(log_error)?,
                Some(Log::Shared(l)) => l.rotate(),
                None => 0,
            }
        };
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            // The new table grows as points arrive rather than starting at the old one's size: both tables live
            // through the flush, and two full-size tables were ~15 MB more at the peak (bench: A ingest RSS).
            let taken = std::mem::replace(&mut *shard, Shard::new());
            drop(shard);
            out.extend(taken.rows);
        }
        let points = out.iter().map(|r| r.fragment.points).sum();
        Ok((cut, out, points))
    }

    /// [`PendingTable::take`] for a flush: the rows in key order (RocksDB's memtable skip list reuses the
    /// previous insert's position for the next key, so sorted keys cost a few comparisons each where the shards'
    /// hash order cost a walk from the top; perf: ~25% of the daemon's time under A ingest went to
    /// `InlineSkipList::FindSpliceForLevel`), cut into slices of `slice_rows` that readers find in
    /// [`PendingTable::unflushed`] until [`PendingTable::written`] or [`PendingTable::give_back`].
    pub(super) fn take_to_flush(&self, slice_rows: usize) -> Result<(u64, Vec<Slice>, u64), StoreError> {
        let mut flushing = self.flushing.lock().unwrap_or_else(|e| e.into_inner());
        let (cut, mut rows, points) = self.take()?;
        rows.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let slice_rows = slice_rows.max(1);
        let mut slices = Vec::with_capacity(rows.len().div_ceil(slice_rows));
        let mut rest = rows.into_iter().peekable();
        while rest.peek().is_some() {
            slices.push(Arc::new(rest.by_ref().take(slice_rows).collect::<Vec<Row>>()));
        }
        flushing.extend(slices.iter().cloned());
        Ok((cut, slices, points))
    }

    /// A flush's slice is in RocksDB with its rows' rollup marks and index notes: readers find its points there
    /// from now on.
    pub(super) fn written(&self, slice: &Slice) {
        let points = slice.iter().map(|row| row.fragment.points).sum();
        self.flushed(points, PendingTable::bytes_of(slice));
        let mut flushing = self.flushing.lock().unwrap_or_else(|e| e.into_inner());
        flushing.retain(|s| !Arc::ptr_eq(s, slice));
    }

    /// A flush failed: the slices it did not write go back into the table, in front of whatever arrived
    /// meanwhile (see [`PendingTable::restore`]), where readers find them.
    pub(super) fn give_back(&self, slices: Vec<Slice>) {
        let mut flushing = self.flushing.lock().unwrap_or_else(|e| e.into_inner());
        flushing.clear();
        for slice in slices {
            // A reader's copy may still hold the slice: then its rows are copied.
            self.restore(Arc::try_unwrap(slice).unwrap_or_else(|shared| (*shared).clone()));
        }
    }

    /// The points not yet in RocksDB of the rows `wanted` selects (by key): the flush's under way, then the
    /// table's, each row's columns in arrival order (later wins on the same qualifier, as the row merge applies
    /// them). What a reader merges into the stored rows instead of waiting for the flush.
    pub(super) fn unflushed(&self, wanted: impl Fn(&[u8]) -> bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut add = |row: &Row| {
            if !row.fragment.columns.is_empty() && wanted(&row.key) {
                out.entry(row.key.to_vec()).or_default().extend_from_slice(&row.fragment.columns);
            }
        };
        let flushing = self.flushing.lock().unwrap_or_else(|e| e.into_inner());
        flushing.iter().flat_map(|slice| slice.iter()).for_each(&mut add);
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            shard.rows.iter().for_each(&mut add);
        }
        drop(flushing);
        out
    }

    /// The points not yet in RocksDB of the rows `keys` (sorted, distinct), as [`PendingTable::unflushed`]
    /// gives them, found by key: a binary search per slice of the flush under way (sorted by key) and a hash
    /// probe in the table. What a read of a few series' rows merges in instead of waiting for the flush.
    pub(super) fn unflushed_of(&self, keys: &[&[u8]]) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut out: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        if self.points() == 0 {
            // Every acknowledged point is in RocksDB (`points` drops only after a slice's write).
            return out;
        }
        let mut add = |row: &Row| {
            if !row.fragment.columns.is_empty() {
                out.entry(row.key.to_vec()).or_default().extend_from_slice(&row.fragment.columns);
            }
        };
        let flushing = self.flushing.lock().unwrap_or_else(|e| e.into_inner());
        for slice in flushing.iter() {
            for key in keys {
                if let Ok(i) = slice.binary_search_by(|row| row.key.as_slice().cmp(key)) {
                    add(&slice[i]);
                }
            }
        }
        for key in keys {
            let hash = self.hasher.hash_one(key);
            let shard = self.shards[shard_of(hash)].lock().unwrap_or_else(|e| e.into_inner());
            if let Some(&i) = shard.index.find(hash, |&i| shard.rows[i as usize].key.as_slice() == *key) {
                add(&shard.rows[i as usize]);
            }
        }
        drop(flushing);
        out
    }

    /// Calls `f` with the key of every row holding points not yet in RocksDB (the flush's under way and the
    /// table's; a key may come twice). Readers of the series index take the series of those rows from here,
    /// before reading the index: a slice written meanwhile is then in the index, and none is missed.
    pub(super) fn unflushed_keys(&self, mut f: impl FnMut(&[u8])) {
        if self.points() == 0 {
            return;
        }
        let flushing = self.flushing.lock().unwrap_or_else(|e| e.into_inner());
        flushing.iter().flat_map(|slice| slice.iter()).for_each(|row| f(&row.key));
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            shard.rows.iter().filter(|row| !row.fragment.columns.is_empty()).for_each(|row| f(&row.key));
        }
        drop(flushing);
    }

    /// The bytes [`PendingTable::bytes`] counts for `rows` (what a flush frees).
    pub(super) fn bytes_of(rows: &[Row]) -> u64 {
        rows.iter().map(|row| row_bytes(row) as u64).sum()
    }

    /// Deletes the log segments older than `cut` (a flush wrote their points into their rows).
    pub(super) fn release(&self, cut: u64) -> Result<(), StoreError> {
        match &self.log {
            Some(Log::Files(l)) => l.delete_before(cut).map_err(log_error),
            Some(Log::Shared(l)) => l.delete_before(cut),
            None => Ok(()),
        }
    }

    /// The taken points (holding `bytes`, see [`PendingTable::bytes_of`]) are in RocksDB.
    pub(super) fn flushed(&self, points: u64, bytes: u64) {
        self.bytes.fetch_sub(bytes.min(self.bytes()), Ordering::Relaxed);
        self.points.fetch_sub(points, Ordering::AcqRel);
    }

    /// A flush failed: its rows go back in front of whatever arrived meanwhile.
    pub(super) fn restore(&self, taken: Vec<Row>) {
        for mut row in taken {
            let hash = self.hasher.hash_one(row.key.as_slice());
            let mut shard = self.shards[shard_of(hash)].lock().unwrap_or_else(|e| e.into_inner());
            let Shard { rows, index, .. } = &mut *shard;
            match index.find(hash, |&i| rows[i as usize].key == row.key) {
                Some(&i) => {
                    let newer = &mut rows[i as usize].fragment;
                    row.fragment.columns.extend_from_slice(&newer.columns);
                    row.fragment.points += newer.points;
                    *newer = row.fragment;
                }
                None => {
                    let i = rows.len() as u32;
                    row.next = NONE;
                    rows.push(row);
                    index.insert_unique(hash, i, |&j| self.hasher.hash_one(rows[j as usize].key.as_slice()));
                }
            }
        }
    }
}

/// The shard of a row key's hash: its high bits (a shard's index uses the low ones).
fn shard_of(hash: u64) -> usize {
    (hash >> 60) as usize % SHARDS
}

/// A row's heap bytes: its entry, its key if longer than the inline room, its columns' buffer, its index slot.
fn row_bytes(row: &Row) -> usize {
    let key = if row.key.spilled() { row.key.capacity() } else { 0 };
    std::mem::size_of::<Row>() + key + row.fragment.columns.capacity() + std::mem::size_of::<u32>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_batch_reads_back_in_order() {
        let mut log = PointLog::default();
        log.push(b"row-a", &[0, 0x10], &[1]);
        log.push(b"row-b", &[0, 0x20], &[2, 3]);
        let got: Vec<_> = entries(log.payload()).collect();
        let (mut ca, mut cb) = (Vec::new(), Vec::new());
        rtsd_protocol::codec::push_column(&mut ca, &[0, 0x10], &[1]);
        rtsd_protocol::codec::push_column(&mut cb, &[0, 0x20], &[2, 3]);
        assert_eq!(got, vec![(&b"row-a"[..], ca.as_slice()), (&b"row-b"[..], cb.as_slice())]);
        // A cut record yields its whole entries only.
        assert_eq!(entries(&log.payload()[..log.payload().len() - 1]).count(), 1);
    }

    #[test]
    fn rows_keep_arrival_order_and_take_empties_the_table() {
        let table = PendingTable::new(None);
        let mut order = Vec::new();
        let mut log = PointLog::default();
        for i in 0..100u8 {
            log.push(&[i % 7], &[0, i << 4], &[i]);
        }
        table.commit(&mut log, 100, &mut order, false, || Ok(())).unwrap();
        assert_eq!(table.points(), 100);
        let held = table.bytes();
        let (_, rows, points) = table.take().unwrap();
        assert_eq!((points, rows.len()), (100, 7));
        // What the table counts is what its rows hold: keys, column buffers, entries.
        let bytes = PendingTable::bytes_of(&rows);
        assert_eq!(held, bytes);
        // Keys up to 32 bytes are held inline in the entry; the index holds a row number per row.
        let entry = (std::mem::size_of::<Row>() + std::mem::size_of::<u32>()) as u64;
        let capacities: u64 = rows.iter().map(|r| r.fragment.columns.capacity() as u64).sum();
        assert_eq!(bytes, 7 * entry + capacities);
        for Row { key, fragment, .. } in rows {
            let values: Vec<u8> =
                rtsd_protocol::codec::columns(&fragment.columns).map(|c| c.unwrap().value[0]).collect();
            let want: Vec<u8> = (0..100u8).filter(|i| i % 7 == key[0]).collect();
            assert_eq!(values, want);
        }
        assert_eq!((table.points(), table.bytes()), (100, bytes), "counted until the flush is written");
        table.flushed(100, bytes);
        assert_eq!((table.points(), table.bytes()), (0, 0));
        assert_eq!(table.take().unwrap().1.len(), 0);
    }

    #[test]
    fn rows_find_their_points_whatever_order_the_series_come_in() {
        // A row's successor is only a guess: batches in a changed order, with new and long keys, still put every
        // point in its own row, in arrival order.
        let table = PendingTable::new(None);
        let mut order = Vec::new();
        let key = |i: u32| -> Vec<u8> {
            let mut k = i.to_be_bytes().to_vec();
            k.resize(if i.is_multiple_of(5) { 40 } else { 4 }, b'x');
            k
        };
        let rounds: [Vec<u32>; 4] =
            [(0..50).collect(), (0..50).rev().collect(), (0..60).step_by(2).collect(), (0..60).collect()];
        let mut want: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = Default::default();
        for (round, series) in rounds.iter().enumerate() {
            let mut log = PointLog::default();
            for &i in series {
                log.push(&key(i), &[0, (round as u8) << 4], &[i as u8]);
                want.entry(key(i)).or_default().push(round as u8);
            }
            table.commit(&mut log, series.len() as u64, &mut order, false, || Ok(())).unwrap();
        }
        let (_, rows, points) = table.take().unwrap();
        assert_eq!(points, 50 + 50 + 30 + 60);
        let got: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = rows
            .iter()
            .map(|r| {
                let rounds = rtsd_protocol::codec::columns(&r.fragment.columns).map(|c| c.unwrap().qualifier[1] >> 4);
                (r.key.to_vec(), rounds.collect())
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(table.bytes(), PendingTable::bytes_of(&rows));
    }

    #[test]
    fn a_failed_commit_adds_nothing() {
        let table = PendingTable::new(None);
        let mut log = PointLog::default();
        log.push(b"k", &[0, 0], &[1]);
        let full = || Err(StoreError::from(std::io::Error::other("disk full")));
        assert!(table.commit(&mut log, 1, &mut Vec::new(), false, full).is_err());
        assert_eq!(table.points(), 0);
        assert!(table.take().unwrap().1.is_empty());
    }

    #[test]
    fn the_log_keeps_whole_records_and_drops_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (log, old) = SeriesLog::open(dir.path()).unwrap();
        assert!(old.is_empty());
        log.append(b"one", false).unwrap();
        let cut = log.rotate().unwrap();
        log.append(b"two", true).unwrap();
        log.append(b"three", false).unwrap();
        let read = || {
            let mut got = Vec::new();
            read_log(dir.path(), |r| got.push(String::from_utf8(r.to_vec()).unwrap())).unwrap();
            got
        };
        assert_eq!(read(), ["one", "two", "three"]);
        // A crash in the middle of an append leaves part of a record: it was never acknowledged.
        let last = segment_path(&dir.path().join(LOG_DIR), cut);
        let len = std::fs::metadata(&last).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&last).unwrap().set_len(len - 2).unwrap();
        assert_eq!(read(), ["one", "two"]);
        // A flipped byte fails the checksum.
        let mut bytes = std::fs::read(&last).unwrap();
        bytes[9] ^= 1;
        std::fs::write(&last, bytes).unwrap();
        assert_eq!(read(), ["one"]);
        log.delete_before(cut).unwrap();
        assert!(read().is_empty());
        drop(log);
        let (_, old) = SeriesLog::open(dir.path()).unwrap();
        assert_eq!(old, [cut], "reopening appends to a new segment after the old ones");
    }

    #[test]
    fn restore_puts_older_points_first() {
        let table = PendingTable::new(None);
        let mut order = Vec::new();
        let one = |v: u8| {
            let mut log = PointLog::default();
            log.push(b"k", &[0, 0], &[v]);
            log
        };
        table.commit(&mut one(1), 1, &mut order, false, || Ok(())).unwrap();
        let (_, taken, _) = table.take().unwrap();
        table.commit(&mut one(2), 1, &mut order, false, || Ok(())).unwrap();
        table.restore(taken);
        let (_, rows, points) = table.take().unwrap();
        assert_eq!(points, 2);
        let values: Vec<u8> =
            rtsd_protocol::codec::columns(&rows[0].fragment.columns).map(|c| c.unwrap().value[0]).collect();
        assert_eq!(values, [1, 2]);
    }
}
