//! RocksDB storage in OpenTSDB's layout (spec: ingest §4).
//!
//! Each HBase table family is a RocksDB column family named `<table>:<family>`:
//! * `tsdb:t` holds data rows. One RocksDB key is one HBase row key (salt, metric UID, base hour, sorted tag UID
//!   pairs) and its value is that row's columns (qualifier, value) in `codec`'s row encoding. Points are written
//!   as RocksDB merge operands; the merge operator (`codec::merge_row`) applies HBase's overwrite rule and
//!   OpenTSDB's compaction, so rows are compacted by RocksDB's own background work instead of OpenTSDB's hourly
//!   read-rewrite-delete storm (spec: ingest §7 item 3).
//! * `tsdb-uid:id` and `tsdb-uid:name` hold the UID maps. A cell `(row, qualifier)` is the key
//!   `qualifier 0x00 row`, so each kind's names are contiguous and sorted (see [`cells`]).
//! * `rtsd:series` is rtsd's series index (see [`series`]): every series, its newest hour, tag postings.
//! * Every table of data rows has a retention (see [`retention`]): reads start at its cut, and a compaction
//!   filter removes expired rows.
//! * `rtsd:meta` records the layout a data directory was created with, so a config that would misread it is
//!   refused at start-up.
pub mod admin;
pub mod bulk;
pub mod health;
pub mod layout;
pub mod meta;
pub mod pending;
pub mod retention;
pub mod rollup;
pub mod rollup_rows;
pub mod series;
pub mod uid;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rocksdb::{
    BlockBasedOptions, ColumnFamilyDescriptor, DBCompressionType, MergeOperands, Options, WriteBatch, WriteOptions, DB,
};
use rtsd_protocol::annotation;
use rtsd_protocol::codec;
use rtsd_protocol::point::{DataPoint, PutError, UidKind};

use crate::metrics::Metrics;
pub use layout::Layout;
use uid::{Uid, UidError, Uids};

pub const CF_DATA: &str = "tsdb:t";
/// Past this many points in the series table a committing writer flushes it itself (back-pressure that bounds
/// its memory: some 40 MB).
const MAX_PENDING_POINTS: u64 = 3_000_000;
pub const CF_UID_ID: &str = "tsdb-uid:id";
pub const CF_UID_NAME: &str = "tsdb-uid:name";
pub const CF_META: &str = "rtsd:meta";
pub use meta::CF_TSDB_META;
pub use series::CF_SERIES;
/// Chukwa 0.7+'s tables (`chukwa` families `t` and `a`, `chukwa_meta` family `k`) and the Chukwa port's stream
/// de-duplication state (see `crate::chukwa`).
pub const CF_CHUKWA_T: &str = "chukwa:t";
pub const CF_CHUKWA_A: &str = "chukwa:a";
pub const CF_CHUKWA_META: &str = "chukwa_meta:k";
pub const CF_CHUKWA_STREAMS: &str = "rtsd:chukwa_streams";
/// Rows per write of a series-table flush (see [`Store::flush_pending`]).
const FLUSH_SLICE_ROWS: usize = 8192;
/// The smallest memtable budget `rtsd.memtable_mb` may set.
const MIN_MEMTABLE_BYTES: usize = 8 << 20;
const COLUMN_FAMILIES: [&str; 10] = [
    CF_DATA,
    CF_UID_ID,
    CF_UID_NAME,
    CF_META,
    CF_SERIES,
    CF_TSDB_META,
    CF_CHUKWA_T,
    CF_CHUKWA_A,
    CF_CHUKWA_META,
    CF_CHUKWA_STREAMS,
];

/// Unflushed points by row key: their columns (see [`Store::overlay`]).
type Overlay = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// What a store is opened with: the data directory and the settings that shape it (the configuration makes them,
/// `Config::store_options`: the store reads no configuration).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub path: std::path::PathBuf,
    pub layout: Layout,
    /// Assign UIDs to new metrics, tag keys, tag values.
    pub auto_create: [bool; 3],
    pub fix_duplicates: bool,
    /// Names cached per UID kind and direction; also bounds the series-index write cache.
    pub cache_capacity: usize,
    pub block_cache_bytes: usize,
    pub memtable_bytes: usize,
    pub rollups: crate::rollup::RollupSettings,
    pub retention: retention::RetentionSettings,
    /// Below this much free space on the data directory's file system, writes are refused (see [`health`]).
    pub min_free_bytes: u64,
    /// Table files RocksDB keeps open at most.
    pub max_open_files: i32,
}

/// A storage failure: RocksDB refused, or bytes on disk make no sense.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("RocksDB error: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// A file outside RocksDB (the series log) could not be written or read.
    #[error("{context}: {source}")]
    Io { context: &'static str, source: std::io::Error },
    /// Writes are refused for now (the free-space guard, see [`health`]); they will be taken again.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Layout(String),
    /// The reader's [`ReadBudget`] ran out.
    #[error("{0}")]
    Budget(BudgetExceeded),
}

/// What a query may still read: a deadline and point/byte limits (0 = unlimited), checked row by row.
#[derive(Debug, Clone, Default)]
pub struct ReadBudget {
    pub deadline: Option<Instant>,
    /// Set when nobody waits for the answer any more (the HTTP client closed its connection).
    pub cancelled: Option<Arc<std::sync::atomic::AtomicBool>>,
    pub max_points: u64,
    pub max_bytes: u64,
    pub points: u64,
    pub bytes: u64,
    /// Rows read (charged for), and rows a scan met and skipped because their series was not selected: the
    /// `rowsPostFilter` / `rowsPreFilter` of `showStats` (spec: query §1.6).
    pub rows: u64,
    pub rows_skipped: u64,
}

/// Which limit a read ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetExceeded {
    Deadline,
    Cancelled,
    Points(u64),
    Bytes(u64),
}

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetExceeded::Deadline => f.write_str("deadline exceeded"),
            BudgetExceeded::Cancelled => f.write_str("cancelled"),
            BudgetExceeded::Points(n) => write!(f, "more than {n} data points"),
            BudgetExceeded::Bytes(n) => write!(f, "more than {n} bytes"),
        }
    }
}

impl ReadBudget {
    /// A budget for a reader running beside this one (another thread): the same deadline and cancellation, the
    /// same limits on its own reads; [`ReadBudget::join`] adds its reads back.
    pub fn fork(&self) -> ReadBudget {
        ReadBudget {
            deadline: self.deadline,
            cancelled: self.cancelled.clone(),
            max_points: self.max_points,
            max_bytes: self.max_bytes,
            ..ReadBudget::default()
        }
    }

    /// Adds a forked budget's reads; fails if together they passed a limit.
    pub fn join(&mut self, other: ReadBudget) -> Result<(), StoreError> {
        self.rows += other.rows;
        self.rows_skipped += other.rows_skipped;
        self.account(other.points, other.bytes)
    }

    /// Accounts for one row read; fails once a limit is passed.
    fn charge(&mut self, points: usize, bytes: usize) -> Result<(), StoreError> {
        self.rows += 1;
        self.account(points as u64, bytes as u64)
    }

    fn account(&mut self, points: u64, bytes: u64) -> Result<(), StoreError> {
        self.points += points;
        self.bytes += bytes;
        if self.max_points > 0 && self.points > self.max_points {
            return Err(StoreError::Budget(BudgetExceeded::Points(self.max_points)));
        }
        if self.max_bytes > 0 && self.bytes > self.max_bytes {
            return Err(StoreError::Budget(BudgetExceeded::Bytes(self.max_bytes)));
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(StoreError::Budget(BudgetExceeded::Deadline));
        }
        if self.cancelled.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(StoreError::Budget(BudgetExceeded::Cancelled));
        }
        #[cfg(debug_assertions)]
        test_hooks::row_delay();
        Ok(())
    }
}

/// Failpoints for the compat tests, compiled into debug builds only.
#[cfg(debug_assertions)]
mod test_hooks {
    /// `RTSD_TEST_ROW_DELAY_MS`: sleep this long for each row a reader is charged for, so that a test can act
    /// (close its connection, say) while a query is still running.
    pub(super) fn row_delay() {
        static DELAY_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let ms = *DELAY_MS
            .get_or_init(|| std::env::var("RTSD_TEST_ROW_DELAY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0));
        if ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}

/// Why one point could not be added to a batch.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// The client's fault, reported in OpenTSDB's words (unknown metric / tag with auto-creation off).
    #[error(transparent)]
    Put(#[from] PutError),
    /// Ours: UIDs exhausted. OpenTSDB logs these and sends no telnet reply (spec: ingest §1.3).
    #[error("{0}")]
    Internal(String),
    /// The store could not take the point (assigning its UIDs failed): reported to the client as a storage
    /// failure, as a failed commit is (issue 23: it used to go unreported on telnet and be a 400 on HTTP).
    #[error(transparent)]
    Storage(StoreError),
}

impl From<UidError> for AddError {
    fn from(e: UidError) -> Self {
        match e {
            UidError::NoSuchName { kind, name } => AddError::Put(PutError::UnknownName { kind, name }),
            UidError::Store(e) => AddError::Storage(e),
            other => AddError::Internal(other.to_string()),
        }
    }
}

/// The open data directory.
pub struct Store {
    db: Arc<DB>,
    layout: Layout,
    auto_create: [bool; 3],
    uids: Uids,
    series: series::SeriesIndex,
    metrics: Arc<Metrics>,
    /// Bumped whenever a name may map to another UID than before (`dropcaches`, renames): connections that
    /// keep their own [`SeriesKey`] caches drop them when it changes.
    generation: std::sync::atomic::AtomicU64,
    rollups: rollup::Rollups,
    retention: retention::Retention,
    /// The one block cache every table reads through (its usage is reported once, not per table).
    block_cache: rocksdb::Cache,
    /// Acknowledged points not yet in their rows (see [`pending`]).
    pending: pending::PendingTable,
    read_only: bool,
    /// Acknowledged points not in their rows that readers of data rows merge in: row key -> columns. A
    /// read-only open's view of the series log (acknowledged by a running daemon, or left by a crash), so `rtsd
    /// scan` beside a daemon sees every acknowledged point; for the daemon, empty while it settles, and the series
    /// table's points while a flush cannot be written (a full disk), so reads are still served, whole.
    overlay: std::sync::RwLock<Arc<Overlay>>,
    /// The free-space guard and the storage-failure accounting (see [`health`]).
    health: health::Health,
    /// When a flush last failed: readers then retry it at most once a second (see [`Store::settle`]).
    flush_failed_at: std::sync::Mutex<Option<Instant>>,
    fix_duplicates: bool,
    /// [`Store::write_activity`] when [`Store::compact_written`] last ran (0: never since open).
    compacted_at: std::sync::atomic::AtomicU64,
    bulk_options: bulk::BulkOptions,
}

/// Memtable bytes of a table worth flushing in [`Store::compact_written`]: what a burst of writes leaves; a
/// trickle of writes leaves less, and flushing that after every pause would only make small files to compact.
const BURST_MEMTABLE_BYTES: u64 = 8 << 20;

/// Points on their way into one atomic RocksDB write.
pub struct PointBatch {
    /// Everything but raw data points (rollup points, Chukwa rows, series postings of rollup points).
    batch: WriteBatch,
    /// The raw data points, logged as one record and then added to the in-memory series table.
    log: pending::PointLog,
    /// Scratch space of the series table's insert.
    order: pending::InsertOrder,
    points: u64,
    /// Rollup and pre-aggregate points (not data points: OpenTSDB counts them apart).
    rollup_points: u64,
    /// The raw rows changed, for automatic rollups (see [`rollup`]); empty for points of the series table,
    /// whose marks are written when the table is flushed.
    marks: rollup::Marks,
    /// Series-index entries `batch` writes (postings of rollup points), remembered once it is durable.
    noted: series::Noted,
    /// The raw table's retention cut when the batch's first point arrived (`i64::MIN`: kept forever), and the
    /// points older than it: stored, as an HBase TTL would accept them, but no read returns them.
    raw_cut_ms: i64,
    expired: u64,
}

impl PointBatch {
    /// Forgets everything added: the batch was not (and will not be) written.
    fn discard(&mut self) {
        self.batch.clear();
        self.log.clear();
        self.points = 0;
        self.rollup_points = 0;
        self.marks = Default::default();
        self.noted.clear();
        self.expired = 0;
    }

    pub fn len(&self) -> u64 {
        self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0 && self.rollup_points == 0
    }

    /// How many of the pending points are rollup or pre-aggregate points (not in [`PointBatch::len`]).
    pub fn rollup_points(&self) -> u64 {
        self.rollup_points
    }
}

/// A series resolved to UIDs: its row key with the hour left zero. Held inline (a key of three tags is ~25 bytes):
/// connections keep one per series they write and read it for every point, and a pointer to chase would be a
/// cache miss per point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesKey {
    template: smallvec::SmallVec<[u8; 32]>,
}

/// The points of one series read by [`Store::scan_series`].
#[derive(Debug, Clone)]
pub struct StoredSeries {
    /// Metric UID followed by the (tagk, tagv) UID pairs, as OpenTSDB's TSUID.
    pub tsuid: Vec<u8>,
    pub tags: Vec<(Vec<u8>, Vec<u8>)>,
    pub points: Vec<codec::RowPoint>,
    /// JSON of the annotations stored in the series' rows of the scanned hours (deleted ones left out).
    pub annotations: Vec<Vec<u8>>,
}

impl StoredSeries {
    /// The series of `tsuid` with nothing read yet: its (tagk, tagv) pairs split out by `layout`'s UID widths.
    pub fn of_tsuid(tsuid: &[u8], layout: &Layout) -> StoredSeries {
        StoredSeries {
            tsuid: tsuid.to_vec(),
            tags: layout.tsuid_pairs(tsuid).map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
            points: Vec::new(),
            annotations: Vec::new(),
        }
    }
}

/// One stored row, decoded far enough to name its series.
#[derive(Debug)]
pub struct RowRef<'a> {
    pub key: &'a [u8],
    pub metric: &'a [u8],
    pub base_time: u32,
    /// (tagk UID, tagv UID) pairs in row-key order.
    pub tags: Vec<(&'a [u8], &'a [u8])>,
    /// The columns as stored: a closed hour's may be packed, which [`codec::row_points`] reads as it is; readers
    /// that show cells use [`RowRef::cells`].
    pub value: &'a [u8],
}

impl RowRef<'_> {
    /// The row's columns in OpenTSDB's form (a packed column expanded to its compacted column): what `rtsd scan`
    /// prints and fsck checks.
    pub fn cells(&self) -> Result<std::borrow::Cow<'_, [u8]>, StoreError> {
        codec::expand_row(self.value)
            .map_err(|e| StoreError::Corrupt(format!("row {}: {e}", codec::uid_to_string(self.key))))
    }
}

/// Table options of every column family. Blocks go through the one shared cache, and so do each SST file's
/// index and bloom filter, cut into partitions of 4 KB behind a small pinned top level: outside the cache they
/// are table-reader memory that grows with the data on disk without bound (22 -> 44 MB in 7 minutes of the churn
/// soak), and whole (unpartitioned) in the cache a lookup of a new name had to load a file's entire filter,
/// evicting data blocks and each other (ingest fell ~5x in that soak, bench/RESULTS.md 11:28). Partitions are
/// loaded one at a time as probes need them and cached at high priority.
pub(crate) fn table_options(block_cache: &rocksdb::Cache, bloom: bool) -> BlockBasedOptions {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(block_cache);
    table.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    if bloom {
        table.set_bloom_filter(10.0, false);
        table.set_partition_filters(true);
        table.set_optimize_filters_for_memory(true);
    }
    table.set_metadata_block_size(4096);
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table
}

/// Where a stored cell is: (row key, qualifier).
pub type CellAddress = (Vec<u8>, Vec<u8>);

impl Store {
    /// Opens (or creates) the data directory. Fails if it was created with another layout.
    pub fn open(options: &StoreOptions, metrics: Arc<Metrics>) -> Result<Store, StoreError> {
        Store::open_with(options, metrics, false)
    }

    /// Opens a data directory for reading while a daemon may be writing to it (`rtsd scan`).
    pub fn open_read_only(options: &StoreOptions, metrics: Arc<Metrics>) -> Result<Store, StoreError> {
        let options = StoreOptions { auto_create: [false; 3], ..options.clone() };
        Store::open_with(&options, metrics, true)
    }

    fn open_with(options: &StoreOptions, metrics: Arc<Metrics>, read_only: bool) -> Result<Store, StoreError> {
        let StoreOptions {
            ref path,
            ref layout,
            auto_create,
            fix_duplicates,
            cache_capacity,
            block_cache_bytes,
            memtable_bytes,
            ref rollups,
            ref retention,
            min_free_bytes,
            max_open_files,
        } = *options;
        let (path, layout, rollup_settings, retention_settings) = (path.as_path(), layout.clone(), rollups, retention);
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.increase_parallelism(2);
        db_opts.set_max_background_jobs(2);
        db_opts.set_bytes_per_sync(1 << 20);
        db_opts.set_keep_log_file_num(5);
        // RocksDB keeps table files open up to this bound, so client sockets cannot starve it of descriptors and
        // it cannot starve them (README: the file-descriptor budget).
        db_opts.set_max_open_files(max_open_files);
        // Memtables of all tables together: past this RocksDB flushes the largest, so write memory stays
        // bounded however many tables there are (each may otherwise hold two 64 MB memtables). Ingest needs
        // little here: the series table gathers each row's points before they reach RocksDB, so a memtable
        // holds a few large operands per row, and a bigger one only delays the flush to disk.
        let memtable_bytes = memtable_bytes.max(MIN_MEMTABLE_BYTES);
        db_opts.set_db_write_buffer_size(memtable_bytes);

        let merge_metrics = metrics.clone();
        let (salt_width, metric_width) = (layout.salt.width, layout.uid_widths[0]);
        let full_merge = move |key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands| {
            let hour = codec::row_base_time(key, salt_width, metric_width);
            // Only what a flush or compaction writes is packed: a read's merge (a query, the rollup fold's
            // MultiGet) is decoded at once, so packing it was pure waste (`perf`, A telnet across a closed hour:
            // two thirds of the packing).
            let pack = on_rocksdb_thread() && hour_closed(hour, unix_now());
            Some(merge_data_row(existing, operands, fix_duplicates, pack, &merge_metrics))
        };
        let mut data_opts = Options::default();
        data_opts.set_merge_operator("opentsdb-row-v1", full_merge, concat_operands);
        data_opts.set_compression_per_level(&[
            DBCompressionType::None,
            DBCompressionType::Lz4,
            DBCompressionType::Lz4,
            DBCompressionType::Lz4,
            DBCompressionType::Zstd,
            DBCompressionType::Zstd,
            DBCompressionType::Zstd,
        ]);
        data_opts.set_bottommost_compression_type(DBCompressionType::Zstd);
        // Half the budget: the data table's memtable fills and flushes on its own before the budget makes
        // RocksDB flush whichever table is largest.
        data_opts.set_write_buffer_size(memtable_bytes / 2);
        // One cache of uncompressed blocks for the data and rollup tables (RocksDB's default is 32 MB per
        // table): a warm query over a day of 1000 series' 1-minute rollups reads ~50 MB of blocks, and finding
        // them decompressed is most of what makes it fast.
        // The UID, series and meta tables share it too, so RocksDB's read memory is this one number however
        // many tables there are (each would otherwise hold its own 32 MB).
        let block_cache = rocksdb::Cache::new_lru_cache(block_cache_bytes.max(1 << 20));
        let table = table_options(&block_cache, true);
        data_opts.set_block_based_table_factory(&table);
        let mut small_opts = Options::default();
        small_opts.set_block_based_table_factory(&table);

        let mut series_opts = small_opts.clone();
        series_opts.set_merge_operator_associative("max-hour-v1", series::merge_max_hour);
        let bulk_options = bulk::BulkOptions {
            data: bulk::data_file_options(&data_opts, &block_cache),
            series: series_opts.clone(),
            dirty: rollup::dirty_options(&block_cache),
        };
        let mut rollups = rollup::Rollups::new(rollup_settings);
        // Rollup tables of the configuration, and any left by an earlier one (RocksDB opens all or nothing).
        let mut extra: Vec<String> = rollups.families.clone();
        extra.push(rollup::CF_ROLLUP_DIRTY.to_string());
        let existing = DB::list_cf(&db_opts, path).unwrap_or_default();
        for name in &existing {
            if name != "default" && !COLUMN_FAMILIES.contains(&name.as_str()) && !extra.contains(name) {
                extra.push(name.clone());
            }
        }
        if read_only && !existing.is_empty() {
            // A read-only open cannot create column families: rollup tables the configuration names but the
            // directory lacks (a daemon with rollups off wrote it) read as empty (readers skip absent handles).
            extra.retain(|name| existing.contains(name));
        }
        let retention = retention::Retention::new(retention_settings, rollup_settings);
        let cfs = COLUMN_FAMILIES.iter().map(|name| name.to_string()).chain(extra).map(|name| {
            let mut opts = match name.as_str() {
                CF_DATA => data_opts.clone(),
                CF_SERIES => series_opts.clone(),
                rollup::CF_ROLLUP_DIRTY => rollup::dirty_options(&block_cache),
                n if COLUMN_FAMILIES.contains(&n) => small_opts.clone(),
                n if crate::rollup::RollupInterval::is_auto_family(n) => rollup::auto_table_options(&block_cache),
                _ => rollup::table_options(&block_cache),
            };
            retention.install(&name, &mut opts, &layout, metrics.clone());
            // No table's memtable may exceed the data table's share of the budget (RocksDB's default is 64 MB
            // each). RocksDB sizes its write-ahead log preallocation and the free space it waits for before
            // resuming after a full disk by the largest one: 70 MB files and a 64 MB wait on a small disk.
            if name != CF_DATA {
                opts.set_write_buffer_size(memtable_bytes / 2);
            }
            ColumnFamilyDescriptor::new(name, opts)
        });
        // A read-only open reads the series log before the database: a segment a running daemon deletes meanwhile
        // has its points in RocksDB by then, so they are seen either way (twice at worst: merged as identical).
        let mut unflushed = Vec::new();
        if read_only {
            pending::read_log(path, |record| unflushed.push(record.to_vec()))
                .map_err(|e| StoreError::Corrupt(format!("reading the series log: {e}")))?;
        }
        let db = if read_only {
            let mut opts = db_opts;
            opts.create_if_missing(false);
            DB::open_cf_descriptors_read_only(&opts, path, cfs, false)?
        } else {
            DB::open_cf_descriptors(&db_opts, path, cfs)?
        };
        let db = Arc::new(db);
        check_layout(&db, &layout, read_only)?;
        let uids = Uids::open(db.clone(), layout.uid_widths, cache_capacity, metrics.clone())?;
        let series = series::SeriesIndex::new(cache_capacity);
        rollups.resume(&db, read_only)?;
        let (log, replay) = if read_only {
            (None, Vec::new())
        } else {
            let (log, old) = pending::SeriesLog::open(path)
                .map_err(|e| StoreError::Corrupt(format!("opening the series log: {e}")))?;
            (Some(log), old)
        };
        let health =
            health::Health::new(path.to_path_buf(), if read_only { 0 } else { min_free_bytes }, metrics.clone());
        let mut store = Store {
            db,
            layout,
            auto_create,
            uids,
            series,
            metrics,
            generation: Default::default(),
            rollups,
            retention,
            block_cache,
            pending: pending::PendingTable::new(log),
            read_only,
            overlay: Default::default(),
            health,
            flush_failed_at: Default::default(),
            fix_duplicates,
            compacted_at: Default::default(),
            bulk_options,
        };
        if read_only {
            store.load_overlay(&unflushed)?;
        } else {
            store.replay_pending(path, &replay)?;
        }
        Ok(store)
    }

    /// Puts the series log's records (read before the database was opened) into [`Store::overlay`] (read-only
    /// opens).
    fn load_overlay(&mut self, records: &[Vec<u8>]) -> Result<(), StoreError> {
        let mut order = Vec::new();
        for record in records {
            self.pending.replay(record, &mut order);
        }
        let (_, rows, _) = self.pending.take().map_err(log_error)?;
        let overlay = rows.into_iter().map(|row| (row.key.to_vec(), row.fragment.columns)).collect();
        *self.overlay.get_mut().unwrap_or_else(|e| e.into_inner()) = Arc::new(overlay);
        Ok(())
    }

    /// Puts the points a crash left in the series log's `segments` into their rows.
    fn replay_pending(&self, data_dir: &Path, segments: &[u64]) -> Result<(), StoreError> {
        if segments.is_empty() {
            return Ok(());
        }
        let mut order = Vec::new();
        let mut records = 0u64;
        pending::read_log(data_dir, |record| {
            self.pending.replay(record, &mut order);
            records += 1;
        })
        .map_err(log_error)?;
        tracing::info!(records, points = self.pending.points(), "replaying acknowledged points into their rows");
        // Even with nothing to replay, the old segments are deleted by the flush.
        self.flush_pending_always()?;
        Ok(())
    }

    /// Writes the series table's points into their rows: one merge operand per row, each written with its rollup
    /// mark and series-index notes, then deletes the log segments they came from. Returns the points written.
    /// The daemon calls it when the table is large or old enough; readers call it through [`Store::settle`].
    pub fn flush_pending(&self) -> Result<u64, StoreError> {
        if self.pending.points() == 0 {
            // Nothing acknowledged is waiting (a commit not yet in the table stays in the current segment).
            return Ok(0);
        }
        self.flush_pending_always()
    }

    fn flush_pending_always(&self) -> Result<u64, StoreError> {
        let _one_at_a_time = self.pending.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let (cut, rows, points) = self.pending.take().map_err(log_error)?;
        if rows.is_empty() {
            self.pending.release(cut).map_err(log_error)?;
            return Ok(0);
        }
        // In key order: RocksDB's memtable skip list reuses the previous insert's position for the next key, so
        // sorted keys cost a few comparisons each where the shards' hash order cost a walk from the top (perf:
        // ~25% of the daemon's time under A ingest went to `InlineSkipList::FindSpliceForLevel`).
        let mut rows = rows;
        rows.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        // Written in slices, each row freed once its slice is written: one batch of every row would hold a second
        // copy of the whole table at the flush (peak RSS). A row's merge, its rollup mark and its series-index
        // notes stay in one write; rows need no atomicity between them (a crash before the last slice replays
        // the log, whose points merge into the rows already written as identical cells).
        let started = Instant::now();
        let mut rest = rows.into_iter().peekable();
        let mut slice = Vec::with_capacity(FLUSH_SLICE_ROWS);
        while rest.peek().is_some() {
            slice.clear();
            slice.extend(rest.by_ref().take(FLUSH_SLICE_ROWS));
            if let Err(e) = self.write_rows(&slice) {
                self.metrics.rocksdb_write_seconds.observe(started.elapsed().as_secs_f64());
                // The slice and the rows after it go back; the log keeps them all until a flush succeeds.
                self.pending.restore(slice.drain(..).chain(rest).collect());
                return Err(e);
            }
            let points: u64 = slice.iter().map(|row| row.fragment.points).sum();
            self.pending.flushed(points, pending::PendingTable::bytes_of(&slice));
        }
        // The log segments go once their points are as durable in RocksDB's write-ahead log as they were in the
        // segments (fsynced, for points a client asked to `sync`).
        let synced = self.db.flush_wal(true);
        self.metrics.rocksdb_write_seconds.observe(started.elapsed().as_secs_f64());
        synced?;
        self.pending.release(cut).map_err(log_error)?;
        Ok(points)
    }

    /// Writes rows of the series table (in key order) in one write: each row's points as one merge operand, with
    /// its rollup mark and series-index notes.
    fn write_rows(&self, rows: &[pending::Row]) -> Result<(), StoreError> {
        let (data, series_cf) = (self.cf(CF_DATA), self.cf(CF_SERIES));
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let mut batch = WriteBatch::default();
        let mut marks = rollup::Marks::default();
        let mut noted = series::Noted::default();
        let mut tsuid = Vec::with_capacity(64);
        for pending::Row { key, fragment, .. } in rows {
            batch.merge_cf(data, key, &fragment.columns);
            let hour = codec::row_base_time(key, sw, mw);
            if self.rollups.auto() {
                // One mark per row: the span of the fragment's points.
                let (mut first, mut last) = (i64::MAX, i64::MIN);
                for column in codec::columns(&fragment.columns).flatten() {
                    if let Ok(ms) = codec::qualifier_timestamp_ms(hour, column.qualifier, 0) {
                        (first, last) = (first.min(ms), last.max(ms));
                    }
                }
                if first <= last {
                    marks.add_span(key, fragment.points as i64, first, last);
                }
            }
            // The TSUID is the row key without salt and base time.
            tsuid.clear();
            tsuid.extend_from_slice(&key[sw..sw + mw]);
            tsuid.extend_from_slice(&key[sw + mw + 4..]);
            // Counted here, once per row fragment: the put path adds nothing per point for the counters.
            let mut writes = series::IndexWrites { batch: &mut batch, cf: series_cf, noted: &mut noted };
            self.series.note(&mut writes, &self.layout, &tsuid, hour, fragment.points);
        }
        // The rows' index entries are in the same write as their points: both are stored, or neither.
        self.write_marked(batch, &mut marks, &WriteOptions::default())?;
        self.series.remember(&mut noted);
        Ok(())
    }

    /// Points acknowledged but not yet written into their rows (the series table's size).
    pub fn pending_points(&self) -> u64 {
        self.pending.points()
    }

    /// Makes every acknowledged point readable in RocksDB: what each read of data rows or of the series index
    /// does first (see [`pending`]). Costs one atomic load when nothing is pending.
    ///
    /// When the flush fails (a full disk, no file descriptors), the points stay where they are (the series log
    /// and the table) and readers see them through [`Store::overlay`], so reads are served while writes cannot
    /// be; the flush is retried at most once a second meanwhile. Index readers do not see series first written
    /// during the failure until a flush succeeds.
    pub fn settle(&self) -> Result<(), StoreError> {
        if !self.read_only {
            self.flush_or_overlay();
        }
        Ok(())
    }

    /// Flushes the series table, unless a flush failed less than a second ago; when it fails, readers get its
    /// points through the overlay (see [`Store::settle`]).
    fn flush_or_overlay(&self) {
        let mut failed_at = self.flush_failed_at.lock().unwrap_or_else(|e| e.into_inner());
        if failed_at.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
            return;
        }
        match self.flush_pending() {
            Ok(_) => {
                if failed_at.take().is_some() {
                    *self.overlay.write().unwrap_or_else(|e| e.into_inner()) = Arc::default();
                }
            }
            Err(e) => {
                self.health.failed("flush", &e);
                *self.overlay.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(self.pending.snapshot());
                *failed_at = Some(Instant::now());
            }
        }
    }

    /// The unflushed points readers merge in (see [`Store::overlay`]).
    fn overlay(&self) -> Arc<Overlay> {
        self.overlay.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the store takes writes, and its failure accounting (see [`health`]).
    pub fn health(&self) -> &health::Health {
        &self.health
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn uids(&self) -> &Uids {
        &self.uids
    }

    /// Every series of a metric with its newest hour, in TSUID order (from the series index).
    pub fn series_of_metric(&self, metric: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, StoreError> {
        let mut out = Vec::new();
        self.for_each_series(Some(metric), |tsuid, hour| {
            out.push((tsuid.to_vec(), hour));
            true
        })?;
        Ok(out)
    }

    /// Calls `f` with every indexed series (TSUID, newest hour) of `metric`, or of every metric when `None`, in
    /// TSUID order, until `f` returns false. Series whose newest hour is past every table's retention are left
    /// out: nothing of them can be read any more.
    pub fn for_each_series(
        &self,
        metric: Option<&[u8]>,
        mut f: impl FnMut(&[u8], u32) -> bool,
    ) -> Result<(), StoreError> {
        self.settle()?;
        let cut = self.retention.index_cut_ms();
        let f = move |tsuid: &[u8], hour: u32| (i64::from(hour) + 3600) * 1000 <= cut || f(tsuid, hour);
        match metric {
            Some(m) => series::for_each_series_of_metric(&self.db, m, f),
            None => series::for_each_series(&self.db, f),
        }
    }

    /// The series of a metric that carry one tag pair (from the postings).
    pub fn series_with_tag(&self, metric: &[u8], tagk: &[u8], tagv: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.settle()?;
        series::series_with_tag(&self.db, metric, tagk, tagv)
    }

    /// The newest hour with data of a series, if indexed.
    pub fn last_hour(&self, tsuid: &[u8]) -> Result<Option<u32>, StoreError> {
        self.settle()?;
        series::last_hour(&self.db, tsuid)
    }

    /// Forgets cached UIDs and indexed-series memory (`dropcaches`), and tells connections to drop theirs.
    pub fn drop_caches(&self) {
        self.uids.drop_caches();
        self.series.clear();
        self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Changes whenever cached name -> UID resolutions may be stale (see [`Store::drop_caches`]).
    pub fn cache_generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn new_batch(&self) -> PointBatch {
        PointBatch {
            batch: WriteBatch::default(),
            log: Default::default(),
            order: Vec::new(),
            points: 0,
            rollup_points: 0,
            marks: Default::default(),
            noted: Default::default(),
            raw_cut_ms: i64::MIN,
            expired: 0,
        }
    }

    /// Resolves a validated point's UIDs (assigning new ones as configured) and adds its cell to `batch`.
    pub fn add_point(&self, batch: &mut PointBatch, point: &DataPoint<'_>) -> Result<(), AddError> {
        let series = self.series_key(point)?;
        self.add_to_series(batch, &series, point.timestamp, point.value);
        Ok(())
    }

    /// Resolves a point's series to UIDs once, so a connection that sends the same series again can skip the
    /// name lookups and validation (`add_to_series`).
    pub fn series_key(&self, point: &DataPoint<'_>) -> Result<SeriesKey, AddError> {
        self.series_key_inner(point).inspect_err(|e| {
            if let AddError::Storage(e) = e {
                self.health.failed("uid", e);
            }
        })
    }

    fn series_key_inner(&self, point: &DataPoint<'_>) -> Result<SeriesKey, AddError> {
        // UID lookup order as OpenTSDB: metric first, then each tag key and value (spec: ingest §2.6).
        let metric = self.uids.get_or_create(UidKind::Metric, &point.metric, self.auto_create[0])?;
        let mut tags: smallvec::SmallVec<[(Uid, Uid); 8]> = smallvec::SmallVec::new();
        for (k, v) in &point.tags {
            let k = self.uids.get_or_create(UidKind::TagKey, k, self.auto_create[1])?;
            let v = self.uids.get_or_create(UidKind::TagValue, v, self.auto_create[2])?;
            tags.push((k, v));
        }
        let pairs: smallvec::SmallVec<[(&[u8], &[u8]); 8]> =
            tags.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        // A row key at hour 0 carries everything but the hour: salt, metric, sorted pairs.
        let template = codec::row_key(&self.layout.salt, metric.as_bytes(), 0, &pairs);
        Ok(SeriesKey { template: smallvec::SmallVec::from_slice(&template) })
    }

    /// The series with `metric_of`'s metric and `tags_of`'s tags, both resolved before: no UID to look up.
    pub fn series_key_crossed(&self, metric_of: &SeriesKey, tags_of: &SeriesKey) -> SeriesKey {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let tags = &tags_of.template[sw + mw + codec::TIMESTAMP_BYTES..];
        let mut tsuid: smallvec::SmallVec<[u8; 32]> = smallvec::SmallVec::with_capacity(mw + tags.len());
        tsuid.extend_from_slice(&metric_of.template[sw..sw + mw]);
        tsuid.extend_from_slice(tags);
        let template = codec::row_key_from_tsuid(&tsuid, 0, &self.layout.salt, mw);
        SeriesKey { template: smallvec::SmallVec::from_slice(&template) }
    }

    /// Adds one point of an already resolved series to `batch`.
    pub fn add_to_series(&self, batch: &mut PointBatch, series: &SeriesKey, timestamp: i64, value: codec::Value) {
        let hour = codec::base_time(timestamp);
        let metric_end = self.layout.salt.width + self.layout.uid_widths[0];
        let mut key: smallvec::SmallVec<[u8; 64]> = smallvec::SmallVec::from_slice(&series.template);
        key[metric_end..metric_end + 4].copy_from_slice(&hour.to_be_bytes());
        let qualifier = codec::build_qualifier(timestamp, value.flags());
        if batch.points == 0 {
            // A batch's points are received when it starts: one clock read per batch, not per point.
            self.series.tick();
            batch.raw_cut_ms = self.retention.cut_ms(CF_DATA);
        }
        if batch.raw_cut_ms != i64::MIN && codec::timestamp_ms(timestamp) < batch.raw_cut_ms {
            batch.expired += 1;
        }
        // Rollup marks, series-index notes and point counts are written per row when the series table is flushed.
        batch.log.push(&key, &qualifier, &value.encode());
        batch.points += 1;
    }

    /// Writes a batch atomically. When this returns Ok the points are in RocksDB's write-ahead log (fsynced too
    /// when `sync`): a crash of the process cannot lose them.
    pub fn commit(&self, batch: &mut PointBatch, sync: bool) -> Result<u64, StoreError> {
        let points = batch.points;
        batch.rollup_points = 0;
        if points == 0 && batch.batch.is_empty() {
            return Ok(0);
        }
        if let Err(e) = self.health.check_writable() {
            batch.discard();
            return Err(e);
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(sync);
        let started = Instant::now();
        let write = std::mem::take(&mut batch.batch);
        let result = if batch.log.is_empty() {
            self.write_marked(write, &mut batch.marks, &opts).map_err(StoreError::from)
        } else {
            // One series-log record for all the batch's points; they join the series table once it and the rest of
            // the batch are written (see [`pending`]).
            let (log, order, marks) = (&mut batch.log, &mut batch.order, &mut batch.marks);
            self.pending.commit(log, points, order, sync, || {
                if write.is_empty() {
                    return Ok(());
                }
                self.write_marked(write, marks, &opts).map_err(StoreError::from)
            })
        };
        self.metrics.rocksdb_write_seconds.observe(started.elapsed().as_secs_f64());
        batch.points = 0;
        batch.log.clear();
        let expired = std::mem::take(&mut batch.expired);
        if let Err(e) = result {
            batch.discard();
            self.health.failed("write", &e);
            return Err(e);
        }
        self.health.succeeded();
        self.series.remember(&mut batch.noted);
        if expired > 0 {
            self.metrics.datapoints_expired_on_arrival.inc_by(expired);
            static EXPIRED: crate::logs::Throttle = crate::logs::Throttle::new(std::time::Duration::from_secs(60));
            if let Some(earlier) = EXPIRED.allow() {
                tracing::warn!(
                    points = expired,
                    earlier_batches = earlier,
                    retention_hours = self.retention.hours(CF_DATA),
                    "stored points older than rtsd.retention.raw_hours: no read returns them (set it to 0 to keep data \
                     forever; see rtsd_datapoints_expired_on_arrival_total)"
                );
            }
        }
        if self.pending.points() > MAX_PENDING_POINTS {
            // Writers outrun the background flush: the writer that finds the table full flushes it (back-pressure
            // that bounds the table's memory). The batch is acknowledged whatever the flush does: its points are
            // in the series log.
            self.flush_or_overlay();
        }
        Ok(points)
    }

    /// Calls `f` with every data row of `metric` whose base hour lies in `[start_hour, end_hour]` (seconds), in
    /// key order per salt bucket. `f` returns false to stop.
    pub fn for_each_row(
        &self,
        metric: &[u8],
        start_hour: u32,
        end_hour: u32,
        f: impl FnMut(RowRef<'_>) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.for_each_row_in(CF_DATA, metric, start_hour, end_hour, f)
    }

    /// [`Store::for_each_row`] in another table keyed like the data table (rollup and pre-aggregate tables,
    /// whose base times are those of their row spans).
    pub fn for_each_row_in(
        &self,
        family: &str,
        metric: &[u8],
        start_hour: u32,
        end_hour: u32,
        mut f: impl FnMut(RowRef<'_>) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        self.settle()?;
        let overlay = self.overlay();
        let Some(cf) = self.db.cf_handle(family) else { return Ok(()) };
        // Rows wholly past the family's retention are never read, even before a compaction removed them.
        let start_hour = start_hour.max(self.retention.first_kept_base(family));
        let salt = &self.layout.salt;
        let buckets = if salt.width == 0 { 1 } else { salt.buckets };
        for bucket in 0..buckets {
            let mut start = Vec::with_capacity(salt.width + metric.len() + 4);
            if salt.width > 0 {
                start.extend_from_slice(&(bucket as u64).to_be_bytes()[8 - salt.width..]);
            }
            start.extend_from_slice(metric);
            let prefix_len = start.len();
            start.extend_from_slice(&start_hour.to_be_bytes());
            let in_range = |key: &[u8]| {
                key.len() >= prefix_len + 4
                    && key[..prefix_len] == start[..prefix_len]
                    && u32::from_be_bytes([
                        key[prefix_len],
                        key[prefix_len + 1],
                        key[prefix_len + 2],
                        key[prefix_len + 3],
                    ]) <= end_hour
            };
            // Unflushed points (see `overlay`), joined in key order with the stored rows.
            let mut unflushed = match family {
                CF_DATA => overlay.range(start.clone()..),
                _ => std::collections::btree_map::Range::default(),
            }
            .take_while(|(k, _)| in_range(k))
            .peekable();
            let mut emit = |key: &[u8], stored: Option<&[u8]>, extra: Option<&Vec<u8>>| {
                let merged;
                let value = match (stored, extra) {
                    (_, Some(extra)) => {
                        merged = self.merge_unflushed(stored, extra);
                        merged.as_slice()
                    }
                    (Some(v), None) => v,
                    (None, None) => return Ok(true),
                };
                match self.decode_row(key, value) {
                    Some(row) => f(row),
                    None => Ok(true),
                }
            };
            let mut iter = self.db.raw_iterator_cf(cf);
            iter.seek(&start);
            while iter.valid() {
                let (Some(key), Some(value)) = (iter.key(), iter.value()) else { break };
                if !in_range(key) {
                    break;
                }
                while let Some((k, extra)) = unflushed.next_if(|(k, _)| k.as_slice() < key) {
                    if !emit(k, None, Some(extra))? {
                        return Ok(());
                    }
                }
                let extra = unflushed.next_if(|(k, _)| k.as_slice() == key).map(|(_, v)| v);
                if !emit(key, Some(value), extra)? {
                    return Ok(());
                }
                iter.next();
            }
            iter.status()?;
            for (k, extra) in unflushed {
                if !emit(k, None, Some(extra))? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A row as a read-only open sees it: the stored value with the unflushed points merged in.
    fn merge_unflushed(&self, stored: Option<&[u8]>, unflushed: &[u8]) -> Vec<u8> {
        match codec::merge_row(stored, &[unflushed], self.fix_duplicates) {
            Ok(merged) => merged.row,
            Err(_) => [stored.unwrap_or_default(), unflushed].concat(),
        }
    }

    /// Reads the points of `metric` with `start_ms <= ts < end_ms`, one [`StoredSeries`] per series (TSUID order),
    /// each in time order. `keep` sees a series' (tagk UID, tagv UID) pairs the first time one of its rows is met
    /// and decides whether it is read at all; rejected series cost one call, not one per row.
    pub fn scan_series(
        &self,
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut ReadBudget,
        keep: impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
    ) -> Result<Vec<StoredSeries>, StoreError> {
        self.scan_series_in(CF_DATA, metric, start_ms, end_ms, budget, keep)
    }

    /// [`Store::scan_series`] in another table with data-point cells in hourly rows (a pre-aggregate table).
    pub fn scan_series_in(
        &self,
        family: &str,
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut ReadBudget,
        mut keep: impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
    ) -> Result<Vec<StoredSeries>, StoreError> {
        self.settle()?;
        let start_ms = start_ms.max(self.retention.cut_ms(family));
        if end_ms <= start_ms {
            return Ok(Vec::new());
        }
        // Clamp to the last instant whose hour fits the row key's 32 bits, so an open-ended range cannot wrap.
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last));
        let end_hour = codec::base_time((end_ms - 1).clamp(0, last));
        let tags_offset = self.layout.tags_offset();
        let mut index: std::collections::HashMap<Vec<u8>, Option<usize>> = std::collections::HashMap::new();
        let mut series: Vec<StoredSeries> = Vec::new();
        self.for_each_row_in(family, metric, start_hour, end_hour, |row| {
            let tags_bytes = &row.key[tags_offset..];
            let slot = match index.get(tags_bytes) {
                Some(slot) => *slot,
                None => {
                    let slot = if keep(&row.tags)? {
                        let mut tsuid = metric.to_vec();
                        tsuid.extend_from_slice(tags_bytes);
                        series.push(StoredSeries {
                            tsuid,
                            tags: row.tags.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                            points: Vec::new(),
                            annotations: Vec::new(),
                        });
                        Some(series.len() - 1)
                    } else {
                        None
                    };
                    index.insert(tags_bytes.to_vec(), slot);
                    slot
                }
            };
            if let Some(i) = slot {
                let points = codec::row_points(row.base_time, row.value)
                    .map_err(|e| StoreError::Corrupt(format!("row {}: {e}", codec::uid_to_string(row.key))))?;
                // Bytes in OpenTSDB's form, as the limit means them (packed or not).
                budget.charge(points.len(), codec::expanded_len(row.value))?;
                series[i]
                    .points
                    .extend(points.into_iter().filter(|p| p.timestamp_ms >= start_ms && p.timestamp_ms < end_ms));
                series[i].annotations.extend(annotation_values(row.value));
            } else {
                budget.rows_skipped += 1;
            }
            Ok(true)
        })?;
        // A series keeps one salt in every hour, so its rows come in time order even across salt buckets.
        series.sort_by(|a, b| a.tsuid.cmp(&b.tsuid));
        Ok(series)
    }

    /// Reads the points of the given series (TSUIDs of one metric, sorted) with `start_ms <= ts < end_ms` by
    /// fetching exactly their rows of each hour: what a query with literal tag filters reads instead of every
    /// row of the metric (the series come from the index's postings). A series none of whose rows exist in the
    /// window is left out, as a scan would leave it out.
    pub fn read_series(
        &self,
        tsuids: &[Vec<u8>],
        start_ms: i64,
        end_ms: i64,
        budget: &mut ReadBudget,
    ) -> Result<Vec<StoredSeries>, StoreError> {
        let start_ms = start_ms.max(self.retention.cut_ms(CF_DATA));
        self.settle()?;
        let overlay = self.overlay();
        if end_ms <= start_ms || tsuids.is_empty() {
            return Ok(Vec::new());
        }
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last)) as i64;
        let end_hour = codec::base_time((end_ms - 1).clamp(0, last)) as i64;
        let mw = self.layout.uid_widths[0];
        let cf = self.cf(CF_DATA);
        let mut out = Vec::with_capacity(tsuids.len());
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> = (start_hour..=end_hour)
                .step_by(3600)
                .map(|hour| codec::row_key_from_tsuid(tsuid, hour, &self.layout.salt, mw))
                .collect();
            let mut series = StoredSeries::of_tsuid(tsuid, &self.layout);
            let mut found = false;
            // Keys ascend by hour; pinned values are read in place, not copied out.
            for (key, value) in keys.iter().zip(self.db.batched_multi_get_cf(cf, &keys, true)) {
                let stored = value?;
                let merged;
                let value: &[u8] = match (stored.as_deref(), overlay.get(key)) {
                    (stored, Some(extra)) => {
                        merged = self.merge_unflushed(stored, extra);
                        &merged
                    }
                    (Some(stored), None) => stored,
                    (None, None) => continue,
                };
                found = true;
                let base = codec::row_base_time(key, self.layout.salt.width, mw);
                let points = codec::row_points(base, value)
                    .map_err(|e| StoreError::Corrupt(format!("row {}: {e}", codec::uid_to_string(key))))?;
                budget.charge(points.len(), codec::expanded_len(value))?;
                series
                    .points
                    .extend(points.into_iter().filter(|p| p.timestamp_ms >= start_ms && p.timestamp_ms < end_ms));
                series.annotations.extend(annotation_values(value));
            }
            if found {
                out.push(series);
            }
        }
        Ok(out)
    }

    /// The data row an annotation lives in: the series' row for its hour, or for a global annotation (no TSUID)
    /// the row of the all-zero metric, never salted (spec: ingest §4.8).
    pub fn annotation_row_key(&self, tsuid: Option<&[u8]>, start_time: i64) -> Vec<u8> {
        let hour = codec::base_time(start_time);
        match tsuid {
            Some(t) => codec::row_key_from_tsuid(t, start_time, &self.layout.salt, self.layout.uid_widths[0]),
            None => {
                let mut key = vec![0u8; self.layout.salt.width + self.layout.uid_widths[0]];
                key.extend_from_slice(&hour.to_be_bytes());
                key
            }
        }
    }

    /// Stores (or, with `None`, deletes) the annotation column `qualifier` of row `key`, durably.
    pub fn put_annotation(&self, key: &[u8], qualifier: &[u8], json: Option<&[u8]>) -> Result<(), StoreError> {
        self.write_annotations([(key, qualifier, json)])
    }

    /// Stores or deletes several annotation columns (row key, qualifier, JSON or `None`) in one durable atomic
    /// write: a bulk request lands whole or not at all. A deletion writes an empty value, which the row's merge
    /// keeps in place of the column (merge operands can replace a column but not remove it).
    pub fn write_annotations<'a>(
        &self,
        columns: impl IntoIterator<Item = (&'a [u8], &'a [u8], Option<&'a [u8]>)>,
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        let cf = self.cf(CF_DATA);
        for (key, qualifier, json) in columns {
            let mut column = Vec::new();
            codec::push_column(&mut column, qualifier, json.unwrap_or_default());
            batch.merge_cf(cf, key, column);
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(batch, &opts)?;
        Ok(())
    }

    /// The stored annotation columns (row key, qualifier) of one series, or with `None` the global ones, whose
    /// time lies in `[start_ms, end_ms]`: what a bulk delete removes. Like OpenTSDB's `Annotation.deleteRange` it
    /// reads the metric's rows of the hours in range and keeps the series' own.
    pub fn annotations_between(
        &self,
        tsuid: Option<&[u8]>,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<CellAddress>, StoreError> {
        let mw = self.layout.uid_widths[0];
        let global_metric = vec![0u8; mw];
        let (metric, tags) = match tsuid {
            Some(t) if t.len() >= mw => (&t[..mw], &t[mw..]),
            // No series has a TSUID shorter than a metric UID: nothing of it is stored.
            Some(_) => return Ok(Vec::new()),
            None => (&global_metric[..], &[][..]),
        };
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last));
        let end_hour = codec::base_time(end_ms.clamp(0, last));
        let tags_offset = self.layout.tags_offset();
        let mut out = Vec::new();
        self.for_each_row(metric, start_hour, end_hour, |row| {
            if &row.key[tags_offset..] != tags {
                return Ok(true);
            }
            for column in codec::columns(row.value).filter_map(Result::ok) {
                if !annotation::is_annotation_qualifier(column.qualifier) || column.value.is_empty() {
                    continue;
                }
                let at = annotation::time_from_qualifier(column.qualifier, row.base_time);
                if at.is_some_and(|t| (start_ms..=end_ms).contains(&t)) {
                    out.push((row.key.to_vec(), column.qualifier.to_vec()));
                }
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// The stored JSON of one annotation column, if present and not deleted.
    pub fn get_annotation(&self, key: &[u8], qualifier: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.settle()?;
        let Some(row) = self.db.get_cf(self.cf(CF_DATA), key)? else { return Ok(None) };
        let found = codec::columns(&row)
            .filter_map(Result::ok)
            .filter(|c| c.qualifier == qualifier && !c.value.is_empty())
            .last()
            .map(|c| c.value.to_vec());
        Ok(found)
    }

    /// Global annotations stored in the hours covering `[start_ms, end_ms]`, as JSON.
    pub fn global_annotations(&self, start_ms: i64, end_ms: i64) -> Result<Vec<Vec<u8>>, StoreError> {
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last));
        let end_hour = codec::base_time(end_ms.clamp(0, last));
        let mut out = Vec::new();
        let metric = vec![0u8; self.layout.uid_widths[0]];
        self.for_each_row(&metric, start_hour, end_hour, |row| {
            if row.tags.is_empty() {
                out.extend(annotation_values(row.value));
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// Splits a row key into metric, base time and tag pairs; None for a key of the wrong shape.
    pub fn decode_row<'a>(&self, key: &'a [u8], value: &'a [u8]) -> Option<RowRef<'a>> {
        let l = &self.layout;
        let offset = l.tags_offset();
        if key.len() < offset || !(key.len() - offset).is_multiple_of(l.pair_width()) {
            return None;
        }
        let metric = &key[l.salt.width..l.salt.width + l.uid_widths[0]];
        let base_time = u32::from_be_bytes(key[offset - 4..offset].try_into().ok()?);
        let tags = l.pairs(&key[offset..]).collect();
        Some(RowRef { key, metric, base_time, tags, value })
    }

    /// Every column family this store opened (its own tables, the configured rollup tables, the rollup marks).
    fn family_names(&self) -> Vec<&str> {
        COLUMN_FAMILIES
            .iter()
            .copied()
            .chain(self.rollups.families.iter().map(String::as_str))
            .chain([rollup::CF_ROLLUP_DIRTY])
            .collect()
    }

    /// RocksDB's background work in progress or owed: running compactions and flushes, column families whose
    /// compaction or memtable flush is pending, and 1 while [`Store::compact_written`] is owed. 0 once the store
    /// has settled after a burst of writes (what a benchmark waits for before timing reads and measuring the disk,
    /// as it waits for VictoriaMetrics' forced merge).
    pub fn background_work(&self) -> u64 {
        let db_int = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        let mut work = db_int("rocksdb.num-running-compactions") + db_int("rocksdb.num-running-flushes");
        work += u64::from(!self.read_only && self.compaction_owed());
        for cf in self.family_names().into_iter().filter_map(|f| self.db.cf_handle(f)) {
            for property in ["rocksdb.compaction-pending", "rocksdb.mem-table-flush-pending"] {
                work += self.db.property_int_value_cf(cf, property).ok().flatten().unwrap_or(0);
            }
        }
        work
    }

    /// A number that moves whenever data, rollups, the index or the UIDs are written (their memtables grow, are
    /// flushed, or level-0 files come and go), so while it stands still nothing is written. RocksDB's sequence
    /// number would not do: the rollup fold writes its bookkeeping every few seconds even when idle.
    pub fn write_activity(&self) -> u64 {
        let mut activity = 0u64;
        for cf in self.family_names().into_iter().filter(|f| *f != rollup::CF_ROLLUP_DIRTY) {
            let Some(cf) = self.db.cf_handle(cf) else { continue };
            let int = |p: &str| self.db.property_int_value_cf(cf, p).ok().flatten().unwrap_or(0);
            activity = activity.wrapping_add(int("rocksdb.cur-size-all-mem-tables"));
            activity = activity.wrapping_add(int("rocksdb.num-files-at-level0") << 48);
        }
        activity
    }

    /// What a burst of writes left in a table: level-0 files (flushed memtables not yet compacted into the tree
    /// below; for the data table, row fragments as uncompressed merge operands) and a memtable of at least
    /// [`BURST_MEMTABLE_BYTES`]. Returns (flush, compact).
    fn burst_left(&self, cf: &rocksdb::ColumnFamily) -> (bool, bool) {
        let int = |p: &str| self.db.property_int_value_cf(cf, p).ok().flatten().unwrap_or(0);
        (int("rocksdb.cur-size-active-mem-table") >= BURST_MEMTABLE_BYTES, int("rocksdb.num-files-at-level0") > 0)
    }

    /// Whether writes happened since the last [`Store::compact_written`] and left something it would do.
    pub fn compaction_owed(&self) -> bool {
        self.write_activity() != self.compacted_at.load(std::sync::atomic::Ordering::Acquire)
            && self.family_names().into_iter().filter_map(|f| self.db.cf_handle(f)).any(|cf| {
                let (flush, compact) = self.burst_left(cf);
                flush || compact
            })
    }

    /// Brings every table to its settled form after a burst of writes (an import, a backfill, a benchmark's
    /// ingest): the burst's rows are folded into the automatic rollups, a large memtable is flushed, and level-0 files are compacted into the tree below, as RocksDB would
    /// do only once more files pile up. Until then the data table's newest rows are merge operands in
    /// uncompressed files, merged again on every read; compacted, they are merged once, compressed, and a closed
    /// hour's rows packed. The daemon calls this once writes have paused (see `daemon`); the bottom level is not
    /// rewritten (only what level 0 overlaps), so a large store pays what its next level-0 compaction costs.
    pub fn compact_written(&self) -> Result<(), StoreError> {
        // The burst's rollups first (settling the series table on the way), so they are compacted with it rather
        // than left in level 0 by the next background fold.
        self.fold_rollups(None)?;
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Skip);
        for cf in self.family_names().into_iter().filter_map(|f| self.db.cf_handle(f)) {
            let (flush, _) = self.burst_left(cf);
            if flush {
                self.db.flush_cf(cf)?;
            }
            if self.burst_left(cf).1 {
                self.db.compact_range_cf_opt(cf, None::<&[u8]>, None::<&[u8]>, &opts);
            }
        }
        self.compacted_at.store(self.write_activity(), std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Memory by use (`/api/stats/jvm`'s pools): RocksDB's memtables and table readers' indexes and filters
    /// summed over the tables, the one block cache they share, and the series table's points not yet in RocksDB.
    pub fn memory_usage(&self) -> Vec<(&'static str, u64)> {
        let families = self.family_names();
        let sum = |property: &str| -> u64 {
            families
                .iter()
                .filter_map(|f| self.db.cf_handle(f))
                .filter_map(|cf| self.db.property_int_value_cf(cf, property).ok().flatten())
                .sum()
        };
        vec![
            ("rocksdbMemtables", sum("rocksdb.cur-size-all-mem-tables")),
            ("rocksdbBlockCache", self.block_cache.get_usage() as u64),
            ("rocksdbTableReaders", sum("rocksdb.estimate-table-readers-mem")),
            ("rtsdSeriesTable", self.pending.bytes()),
        ]
    }

    /// The retention of each table (see [`retention`]).
    pub fn retention(&self) -> &retention::Retention {
        &self.retention
    }

    /// Compacts every retained table now, so rows past their retention leave the disk at once instead of at
    /// RocksDB's next compaction of their files (`rtsd fsck --reclaim`, tests). Rows written as merge operands
    /// are first merged into one value and filtered when compacted again, hence the forced bottommost pass.
    /// Returns the rows removed.
    pub fn compact_expired(&self) -> Result<u64, StoreError> {
        self.settle()?;
        let before = self.metrics.rows_expired.get();
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        for family in self.retention.families() {
            if let Some(cf) = self.db.cf_handle(family) {
                self.db.flush_cf(cf)?;
                self.db.compact_range_cf_opt(cf, None::<&[u8]>, None::<&[u8]>, &opts);
            }
        }
        Ok(self.metrics.rows_expired.get() - before)
    }

    /// Writes the series' point counters counted in memory since the last call (see [`series`]): the daemon
    /// does it about every second, [`Store::flush`] at the end, and TSMeta reads first, so they see every
    /// point received. Cheap when nothing was counted.
    pub fn flush_counters(&self) -> Result<(), StoreError> {
        if !self.series.has_counts() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        self.series.drain_counts(&mut batch, self.cf(CF_SERIES));
        self.db.write(batch)?;
        Ok(())
    }

    /// Makes everything written so far durable on disk (graceful shutdown).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.settle()?;
        self.flush_counters()?;
        self.db.flush_wal(true)?;
        let rollup_families = self.rollups.families.iter().map(String::as_str).chain([rollup::CF_ROLLUP_DIRTY]);
        for name in COLUMN_FAMILIES.iter().copied().chain(rollup_families) {
            self.db.flush_cf(self.cf(name))?;
        }
        Ok(())
    }

    /// Adds a plain put to `batch`, written atomically with its points: how the Chukwa port stores its stream
    /// state and Chukwa's own tables in the same write as the points they go with. `cf` is one of the `CF_*`.
    pub fn put_raw(&self, batch: &mut PointBatch, cf: &'static str, key: &[u8], value: &[u8]) {
        batch.batch.put_cf(self.cf(cf), key, value);
    }

    /// Adds a delete to `batch` (see [`Store::put_raw`]).
    pub fn delete_raw(&self, batch: &mut PointBatch, cf: &'static str, key: &[u8]) {
        batch.batch.delete_cf(self.cf(cf), key);
    }

    /// Calls `f` with each (key, value) of column family `cf` from `from` on, in key order, until it returns
    /// false.
    pub fn scan_raw(
        &self,
        cf: &'static str,
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let mut iter = self.db.raw_iterator_cf(self.cf(cf));
        iter.seek(from);
        while iter.valid() {
            let (Some(key), Some(value)) = (iter.key(), iter.value()) else { break };
            if !f(key, value) {
                return Ok(());
            }
            iter.next();
        }
        iter.status()?;
        Ok(())
    }

    fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        // The families are created at open, so the handle always exists.
        self.db.cf_handle(name).expect("column family created at open")
    }
}

/// The non-deleted annotation columns of a row (a deleted annotation is an empty value: merge operands can
/// replace a column but not remove it).
fn annotation_values(row: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    codec::columns(row)
        .filter_map(Result::ok)
        .filter(|c| annotation::is_annotation_qualifier(c.qualifier) && !c.value.is_empty())
        .map(|c| c.value.to_vec())
}

/// Seconds past the end of an hour after which its rows are written packed (see [`merge_data_row`]).
///
/// Packing happens in the merge operator's full merge, which RocksDB runs when a compaction reaches the bottom of
/// a row's data (and on reads of rows with operands not yet merged): the row is then decoded and compacted
/// anyway, so packing it costs one more pass over its points, and it lands on disk only in files that live long.
/// A point arriving after that (a late point, a backfill) is one more operand: the next full merge unpacks the
/// row, merges the point in as it would into the compacted column, and packs the result again. So the grace
/// only saves that repacking for the stragglers of the hour just ended (the series table flushes about every
/// second); it is not needed for correctness.
const PACK_GRACE_SECS: i64 = 60;

/// Whether this thread is one of RocksDB's background threads, which run its flushes and compactions (RocksDB
/// names them `rocksdb:low`, `rocksdb:high`, `rocksdb:bottom`); a merge on any other thread is part of a read.
/// Where the name cannot be read, no merge packs, and the data table's compaction filter packs the rows the
/// next compaction meets ([`retention`]).
fn on_rocksdb_thread() -> bool {
    thread_local! {
        static ROCKSDB: bool = std::fs::read_to_string("/proc/thread-self/comm")
            .is_ok_and(|name| name.starts_with("rocksdb:"));
    }
    ROCKSDB.with(|on| *on)
}

/// Whether the hour starting at `hour` (seconds) has ended at least [`PACK_GRACE_SECS`] before `now` (seconds).
pub(super) fn hour_closed(hour: u32, now: i64) -> bool {
    i64::from(hour) + 3600 + PACK_GRACE_SECS <= now
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The full merge of a data row: OpenTSDB's compaction ([`codec::merge_row`]), and with `pack` (a stored merge
/// of a closed hour) the compacted column packed ([`codec::pack_row`]; readers that show cells expand it back). If the stored bytes
/// can't be decoded, the columns are kept concatenated as they are rather than failing the read: nothing written
/// is ever dropped by a merge.
fn merge_data_row(
    existing: Option<&[u8]>,
    operands: &MergeOperands,
    fix_duplicates: bool,
    pack: bool,
    metrics: &Metrics,
) -> Vec<u8> {
    let ops: Vec<&[u8]> = operands.iter().collect();
    match codec::merge_row(existing, &ops, fix_duplicates) {
        Ok(merged) => {
            metrics.compaction_duplicates(merged.identical_duplicates, merged.variant_duplicates);
            match pack.then(|| codec::pack_row(&merged.row)).flatten() {
                Some(packed) => packed,
                None => merged.row,
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "row could not be compacted; keeping its columns as written");
            let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
            for op in ops {
                out.extend_from_slice(op);
            }
            out
        }
    }
}

/// Partial merge: operands are lists of columns, so concatenating them in order preserves "later wins".
fn concat_operands(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands.iter() {
        out.extend_from_slice(op);
    }
    Some(out)
}

fn log_error(e: std::io::Error) -> StoreError {
    StoreError::Io { context: "series log", source: e }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        log_error(e)
    }
}

fn check_layout(db: &DB, layout: &Layout, read_only: bool) -> Result<(), StoreError> {
    let want = layout.describe();
    let cf = db.cf_handle(CF_META).expect("column family created at open");
    match db.get_cf(cf, b"layout")? {
        Some(have) if have == want.as_bytes() => Ok(()),
        Some(have) => Err(StoreError::Layout(format!(
            "data directory was created with {} but the configuration says {want}; these settings cannot change \
             once data is written",
            String::from_utf8_lossy(&have)
        ))),
        None if read_only => Ok(()),
        None => Ok(db.put_cf(cf, b"layout", want.as_bytes())?),
    }
}

/// `tsdb-uid` cells: HBase `(row, qualifier)` stored at the RocksDB key `qualifier 0x00 row`.
pub mod cells {
    use rocksdb::{WriteBatch, DB};

    use super::StoreError;

    pub fn key(qualifier: &[u8], row: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(qualifier.len() + 1 + row.len());
        k.extend_from_slice(qualifier);
        k.push(0);
        k.extend_from_slice(row);
        k
    }

    pub fn get(db: &DB, cf: &str, qualifier: &[u8], row: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let handle = db.cf_handle(cf).expect("column family created at open");
        Ok(db.get_cf(handle, key(qualifier, row))?)
    }

    pub fn put(
        db: &DB,
        batch: &mut WriteBatch,
        cf: &str,
        qualifier: &[u8],
        row: &[u8],
        value: &[u8],
    ) -> Result<(), StoreError> {
        let handle = db.cf_handle(cf).expect("column family created at open");
        batch.put_cf(handle, key(qualifier, row), value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use rtsd_protocol::codec::Value;
    use rtsd_protocol::point::Tags;

    use super::*;

    fn open(dir: &Path, overrides: &[(&str, &str)]) -> Store {
        let config = crate::config::Config::for_data_dir(dir, overrides).unwrap();
        Store::open(&config.store_options(), Arc::new(Metrics::new())).unwrap()
    }

    fn point<'a>(metric: &'a str, ts: i64, value: Value, tags: &[(&'a str, &'a str)]) -> DataPoint<'a> {
        let tags: Tags<'a> = tags.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v))).collect();
        DataPoint { metric: Cow::Borrowed(metric), timestamp: ts, value, tags }
    }

    fn write(store: &Store, points: &[DataPoint<'_>]) {
        let mut batch = store.new_batch();
        for p in points {
            store.add_point(&mut batch, p).unwrap();
        }
        store.commit(&mut batch, false).unwrap();
    }

    // A series made of one series' metric and another's tags is the one the UIDs of its names give, salt
    // included (spec: ingest §4.2, the salt a hash of the metric and tags).
    #[test]
    fn a_crossed_series_key_is_the_key_of_its_names() {
        for salt in ["0", "1", "2"] {
            let dir = tempfile::tempdir().unwrap();
            let s = open(dir.path(), &[("tsd.core.auto_create_metrics", "true"), ("tsd.storage.salt.width", salt)]);
            let key =
                |m: &str, tags: &[(&str, &str)]| s.series_key(&point(m, 1356998400, Value::Int(1), tags)).unwrap();
            let (a, b) = (key("a", &[("host", "x"), ("dc", "1")]), key("bb", &[("host", "yy")]));
            assert_eq!(s.series_key_crossed(&a, &b), key("a", &[("host", "yy")]), "salt width {salt}");
            assert_eq!(s.series_key_crossed(&b, &a), key("bb", &[("dc", "1"), ("host", "x")]), "salt width {salt}");
            assert_eq!(s.series_key_crossed(&a, &a), a);
        }
    }

    /// Every row of a metric as (key, columns).
    fn rows(store: &Store, metric: &str) -> Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)> {
        let uid = store.uids().get(UidKind::Metric, metric).unwrap().unwrap();
        let mut out = Vec::new();
        store
            .for_each_row(uid.as_bytes(), 0, u32::MAX, |row| {
                let cells = row.cells().unwrap();
                let cols = codec::columns(&cells).map(|c| c.map(|c| (c.qualifier.to_vec(), c.value.to_vec())));
                out.push((row.key.to_vec(), cols.collect::<Result<Vec<_>, _>>().unwrap()));
                Ok(true)
            })
            .unwrap();
        out
    }

    #[test]
    fn uids_are_assigned_in_order_and_rows_match_opentsdb() {
        // spec: ingest §5.4 W1 with the UIDs of BaseTsdbTest: sys.cpu.user=1, host=1, web01=1
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(&store, &[point("sys.cpu.user", 1356998400, Value::Int(42), &[("host", "web01")])]);
        let r = rows(&store, "sys.cpu.user");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, [0, 0, 1, 0x50, 0xE2, 0x27, 0x00, 0, 0, 1, 0, 0, 1]);
        assert_eq!(r[0].1, vec![(vec![0x00, 0x00], vec![0x2A])]);
    }

    #[test]
    fn derived_vector_sorts_tags_by_uid_and_stores_float_widths() {
        // spec: ingest §5.4 derived vector: owner=web02 host=web01 with host=1, owner=3 (after a tagk `x` = 2)
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(
            &store,
            &[
                point("sys.cpu.user", 1356998400, Value::Int(1), &[("host", "web01")]),
                point("sys.cpu.system", 1356998400, Value::Int(1), &[("x", "web02")]),
                point("sys.cpu.user", 1356998460, Value::Float(42.5), &[("owner", "web02"), ("host", "web01")]),
            ],
        );
        let r = rows(&store, "sys.cpu.user");
        let key = [0, 0, 1, 0x50, 0xE2, 0x27, 0x00, 0, 0, 1, 0, 0, 1, 0, 0, 3, 0, 0, 2];
        let row = r.iter().find(|(k, _)| k[..] == key[..]).expect("row with both tags");
        assert_eq!(row.1, vec![(vec![0x03, 0xCB], vec![0x42, 0x2A, 0x00, 0x00])]);
    }

    #[test]
    fn points_of_a_row_are_compacted_into_one_column() {
        // spec: ingest §4.6, §5.6 C1 shape: qualifiers concatenated, values concatenated, meta byte 0
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let p = |ts, v| point("m", ts, Value::Int(v), &[("host", "a")]);
        write(&store, &[p(1356998403, 4)]);
        write(&store, &[p(1356998401, 5)]);
        write(&store, &[p(1356998403, 6)]); // same qualifier: overwrites (W8)
        let r = rows(&store, "m");
        assert_eq!(r[0].1, vec![(vec![0x00, 0x10, 0x00, 0x30], vec![5, 6, 0])]);
    }

    #[test]
    fn acknowledged_points_survive_a_store_dropped_before_its_table_was_flushed() {
        // What kill -9 leaves: points in the series table's log, not in their rows. The next open replays them,
        // in order (the overwrite of W8 holds across records), and the log is empty afterwards.
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), &[]);
            let p = |ts, v| point("m", ts, Value::Int(v), &[("host", "a")]);
            write(&store, &[p(1356998403, 4), p(1356998401, 5)]);
            write(&store, &[p(1356998403, 6)]);
            assert_eq!(store.pending.points(), 3, "nothing flushed yet");
        }
        let store = open(dir.path(), &[]);
        assert_eq!(store.pending.points(), 0, "replayed at open");
        let r = rows(&store, "m");
        assert_eq!(r[0].1, vec![(vec![0x00, 0x10, 0x00, 0x30], vec![5, 6, 0])]);
        let mut log = 0;
        pending::read_log(dir.path(), |_| log += 1).unwrap();
        assert_eq!(log, 0, "the replayed records are deleted");
        assert_eq!(store.last_hour(&[0, 0, 1, 0, 0, 1, 0, 0, 1]).unwrap(), Some(1356998400), "series indexed");
    }

    #[test]
    fn a_read_only_open_beside_the_writer_sees_unflushed_points() {
        // `rtsd scan` beside a running daemon: points acknowledged but still in the series table are merged into
        // the stored rows they belong to, and rows that exist only there are read too.
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let p = |ts, v, host| point("m", ts, Value::Int(v), &[("host", host)]);
        write(&store, &[p(1356998401, 5, "a")]);
        store.flush_pending().unwrap();
        write(&store, &[p(1356998403, 6, "a"), p(1356998400, 7, "b"), p(1357002000, 8, "a")]);
        let config = crate::config::Config::for_data_dir(dir.path(), &[]).unwrap();
        let reader = Store::open_read_only(&config.store_options(), Arc::new(Metrics::new())).unwrap();
        assert_eq!(
            rows(&reader, "m").into_iter().map(|(_, cols)| cols).collect::<Vec<_>>(),
            vec![
                vec![(vec![0x00, 0x10, 0x00, 0x30], vec![5, 6, 0])],
                vec![(vec![0x00, 0x00], vec![7])],
                vec![(vec![0x00, 0x00], vec![8])],
            ]
        );
        let a =
            reader.read_series(&[vec![0, 0, 1, 0, 0, 1, 0, 0, 1]], 0, i64::MAX, &mut ReadBudget::default()).unwrap();
        let values: Vec<_> = a[0].points.iter().map(|p| p.timestamp_ms).collect();
        assert_eq!(values, [1356998401000, 1356998403000, 1357002000000]);
        assert_eq!(store.pending.points(), 3, "the writer's table is untouched");
    }

    #[test]
    fn a_read_sees_points_still_in_the_series_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(&store, &[point("m", 1356998403, Value::Int(4), &[("host", "a")])]);
        assert_eq!(store.pending.points(), 1);
        assert_eq!(rows(&store, "m").len(), 1);
        assert_eq!(store.pending.points(), 0, "the read settled the table");
    }

    // A flush writes the table in slices of FLUSH_SLICE_ROWS rows: rows of every slice arrive whole, the
    // counters return to zero, and the series index lists every series.
    #[test]
    fn a_flush_of_more_rows_than_a_slice_writes_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let hosts: Vec<String> = (0..FLUSH_SLICE_ROWS + 100).map(|h| format!("h{h}")).collect();
        for ts in [1356998400, 1356998410] {
            let points: Vec<_> =
                hosts.iter().map(|h| point("m", ts, Value::Int(ts - 1356998400), &[("host", h)])).collect();
            write(&store, &points);
        }
        assert_eq!(store.pending.points(), 2 * hosts.len() as u64);
        assert!(store.pending.bytes() > 0);
        assert_eq!(store.flush_pending().unwrap(), 2 * hosts.len() as u64);
        assert_eq!((store.pending.points(), store.pending.bytes()), (0, 0));
        let rows = rows(&store, "m");
        assert_eq!(rows.len(), hosts.len());
        assert!(rows.iter().all(|(_, cols)| cols.len() == 1), "both points compacted into one column per row");
        let metric = store.uids().get(UidKind::Metric, "m").unwrap().unwrap();
        assert_eq!(store.series_of_metric(metric.as_bytes()).unwrap().len(), hosts.len());
    }

    #[test]
    fn unknown_names_are_refused_without_auto_create() {
        // spec: ingest §2.6 rows 15-16
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[("tsd.core.auto_create_metrics", "false")]);
        let mut batch = store.new_batch();
        let e = store.add_point(&mut batch, &point("new.metric", 1479496160, Value::Int(1), &[("host", "web01")]));
        assert_eq!(e.unwrap_err().to_string(), "unknown metric: No such name for 'metrics': 'new.metric'");
        assert!(batch.is_empty());
    }

    #[test]
    fn uid_counters_survive_reopen_and_continue() {
        // spec: ingest §4.10: the max-id row continues; ids are never handed out twice
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path(), &[]);
            write(&store, &[point("a", 1356998400, Value::Int(1), &[("host", "x")])]);
        }
        let store = open(dir.path(), &[]);
        assert_eq!(store.uids().table(UidKind::Metric).ids_used(), 1);
        write(&store, &[point("b", 1356998400, Value::Int(1), &[("host", "x")])]);
        assert_eq!(store.uids().get(UidKind::Metric, "a").unwrap().unwrap().as_bytes(), &[0, 0, 1]);
        assert_eq!(store.uids().get(UidKind::Metric, "b").unwrap().unwrap().as_bytes(), &[0, 0, 2]);
        assert_eq!(store.uids().name_of(UidKind::Metric, &[0, 0, 2]).unwrap().as_deref(), Some("b"));
    }

    #[test]
    fn concurrent_first_use_assigns_one_uid() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path(), &[]));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .map(|i| store.uids().get_or_create(UidKind::TagValue, &format!("v{i}"), true).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Vec<Vec<Uid>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(results.iter().all(|r| *r == results[0]));
        assert_eq!(store.uids().table(UidKind::TagValue).ids_used(), 50);
    }

    #[test]
    fn scan_series_joins_hours_and_filters_by_tags() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[("tsd.storage.salt.width", "1"), ("tsd.storage.salt.buckets", "4")]);
        let p = |ts, host, v| point("m", ts, Value::Int(v), &[("host", host)]);
        write(&store, &[p(1356998400, "a", 1), p(1357002000, "a", 2), p(1356998410, "b", 3), p(1357005600, "a", 9)]);
        let metric = store.uids().get(UidKind::Metric, "m").unwrap().unwrap();
        let a = store.uids().get(UidKind::TagValue, "a").unwrap().unwrap();
        let all = store
            .scan_series(metric.as_bytes(), 1356998400_000, 1357005600_000, &mut ReadBudget::default(), |_| Ok(true))
            .unwrap();
        assert_eq!(all.len(), 2);
        let values = |s: &StoredSeries| s.points.iter().map(|p| (p.timestamp_ms, p.value)).collect::<Vec<_>>();
        assert_eq!(values(&all[0]), vec![(1356998400_000, Value::Int(1)), (1357002000_000, Value::Int(2))]);
        assert_eq!(values(&all[1]), vec![(1356998410_000, Value::Int(3))]);
        let only_a = store
            .scan_series(metric.as_bytes(), 0, i64::MAX, &mut ReadBudget::default(), |tags| {
                Ok(tags.iter().any(|(_, v)| *v == a.as_bytes()))
            })
            .unwrap();
        assert_eq!(only_a.len(), 1);
        assert_eq!(only_a[0].points.len(), 3);
        assert_eq!(only_a[0].tsuid, [0, 0, 1, 0, 0, 1, 0, 0, 1]);
    }

    #[test]
    fn the_series_index_lists_series_their_last_hour_and_tag_postings() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let p = |ts, host, dc, v| point("m", ts, Value::Int(v), &[("host", host), ("dc", dc)]);
        write(&store, &[p(1356998400, "a", "x", 1), p(1357005600, "a", "x", 2), p(1356998400, "b", "x", 3)]);
        write(&store, &[p(1357002000, "a", "x", 4)]); // a late point must not move the last hour back
        drop(store);
        let store = open(dir.path(), &[]);
        write(&store, &[p(1356998400, "a", "x", 5)]); // after a restart, too
        let metric = store.uids().get(UidKind::Metric, "m").unwrap().unwrap();
        let series = store.series_of_metric(metric.as_bytes()).unwrap();
        // host=1 dc=2 (tagk), a=1 x=2 b=3 (tagv); pairs sorted by tagk UID.
        assert_eq!(
            series,
            vec![
                (vec![0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 2, 0, 0, 2], 1357005600),
                (vec![0, 0, 1, 0, 0, 1, 0, 0, 3, 0, 0, 2, 0, 0, 2], 1356998400)
            ]
        );
        let with_x = store.series_with_tag(metric.as_bytes(), &[0, 0, 2], &[0, 0, 2]).unwrap();
        assert_eq!(with_x.len(), 2);
        let with_b = store.series_with_tag(metric.as_bytes(), &[0, 0, 1], &[0, 0, 3]).unwrap();
        assert_eq!(with_b, vec![series[1].0.clone()]);
        assert_eq!(store.last_hour(&series[0].0).unwrap(), Some(1357005600));
    }

    #[test]
    fn read_budgets_stop_at_their_limits() {
        // spec: query §1.4, §10: limits and a deadline checked row by row (no clock races: the deadline is past).
        let mut b = ReadBudget { max_points: 10, ..ReadBudget::default() };
        assert!(b.charge(10, 100).is_ok());
        assert!(matches!(b.charge(1, 1), Err(StoreError::Budget(BudgetExceeded::Points(10)))));
        let mut b = ReadBudget { max_bytes: 100, ..ReadBudget::default() };
        assert!(matches!(b.charge(1, 101), Err(StoreError::Budget(BudgetExceeded::Bytes(100)))));
        let mut b =
            ReadBudget { deadline: Some(Instant::now() - std::time::Duration::from_secs(1)), ..ReadBudget::default() };
        assert!(matches!(b.charge(0, 0), Err(StoreError::Budget(BudgetExceeded::Deadline))));
        let mut unlimited = ReadBudget::default();
        assert!(unlimited.charge(1 << 40, 1 << 40).is_ok());
    }

    #[test]
    fn a_data_dir_refuses_a_different_layout() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), &[]));
        let config = crate::config::Config::for_data_dir(dir.path(), &[("tsd.storage.uid.width.metric", "4")]).unwrap();
        let e = Store::open(&config.store_options(), Arc::new(Metrics::new())).err().unwrap();
        assert!(e.to_string().contains("cannot change once data is written"), "{e}");
    }

    #[test]
    fn salted_rows_carry_the_bucket() {
        // spec: ingest §5.7 S1: key 00 00 01 50 E2 27 00 00 00 01 00 00 01 salts to 08 with 20 buckets
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[("tsd.storage.salt.width", "1")]);
        write(&store, &[point("sys.cpu.user", 1356998400, Value::Int(42), &[("host", "web01")])]);
        let r = rows(&store, "sys.cpu.user");
        assert_eq!(r[0].0, [8, 0, 0, 1, 0x50, 0xE2, 0x27, 0x00, 0, 0, 1, 0, 0, 1]);
    }

    // Packed closed hours (issue 7 item 4): what is stored, and that every reader still sees the cells written.

    /// An hour of a gauge every 10 s from `hour`, as data set B sends it: doubles parsed from 2-decimal text.
    fn gauge_hour(hour: i64, host: &str) -> Vec<DataPoint<'_>> {
        let mut x: i64 = 5897;
        (0..360)
            .map(|i| {
                x = (x + (i * 37 % 401) - 200).clamp(0, 10_000);
                point("g", hour + i * 10, Value::Double(x as f64 / 100.0), &[("host", host)])
            })
            .collect()
    }

    /// The row of `points` as OpenTSDB compacts it (one merge operand per point, in write order).
    fn compacted_row(points: &[DataPoint<'_>]) -> Vec<u8> {
        let ops: Vec<Vec<u8>> = points
            .iter()
            .map(|p| {
                let mut op = Vec::new();
                codec::push_column(&mut op, &codec::build_qualifier(p.timestamp, p.value.flags()), &p.value.encode());
                op
            })
            .collect();
        let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        codec::merge_row(None, &refs, false).unwrap().row
    }

    /// What RocksDB holds for a row once a compaction has merged its operands at the bottom of the tree.
    fn compacted_value(store: &Store, key: &[u8]) -> Option<Vec<u8>> {
        store.settle().unwrap();
        let cf = store.cf(CF_DATA);
        store.db.flush_cf(cf).unwrap();
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        store.db.compact_range_cf_opt(cf, None::<&[u8]>, None::<&[u8]>, &opts);
        store.db.get_cf(cf, key).unwrap()
    }

    /// (timestamp ms, value) of every point of metric `g` read by a query.
    fn queried(store: &Store) -> Vec<(i64, Value)> {
        let metric = store.uids().get(UidKind::Metric, "g").unwrap().unwrap();
        let series =
            store.scan_series(metric.as_bytes(), 0, i64::MAX, &mut ReadBudget::default(), |_| Ok(true)).unwrap();
        series.iter().flat_map(|s| s.points.iter().map(|p| (p.timestamp_ms, p.value))).collect()
    }

    fn as_written(points: &[DataPoint<'_>]) -> Vec<(i64, Value)> {
        points.iter().map(|p| (p.timestamp * 1000, p.value)).collect()
    }

    const G_ROW: [u8; 13] = [0, 0, 1, 0x50, 0xE2, 0x27, 0x00, 0, 0, 1, 0, 0, 1];

    #[test]
    fn closed_hours_are_packed_and_read_as_the_cells_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let points = gauge_hour(1356998400, "a");
        write(&store, &points);
        let stored = compacted_value(&store, &G_ROW).unwrap();
        assert!(codec::is_packed(&stored), "a closed hour is stored packed");
        let plain = compacted_row(&points);
        assert_eq!(plain.len(), 2 + 720 + 2 + 360 * 8 + 1, "OpenTSDB's compacted column: 2 + 8 bytes a point");
        assert!(stored.len() < 460, "packed: 9 bits a point and a header, not {} bytes", stored.len());
        // Every reader that shows cells sees OpenTSDB's compacted column; queries read the points written.
        let r = rows(&store, "g");
        assert_eq!(r.len(), 1);
        let mut shown = Vec::new();
        for (q, v) in &r[0].1 {
            codec::push_column(&mut shown, q, v);
        }
        assert_eq!(shown, plain);
        assert_eq!(queried(&store), as_written(&points));
    }

    #[test]
    fn a_late_point_merges_into_a_packed_hour_and_the_row_is_packed_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let mut points = gauge_hour(1356998400, "a");
        write(&store, &points);
        assert!(codec::is_packed(&compacted_value(&store, &G_ROW).unwrap()));
        // A point between two others (+5 s), written after the hour was packed: read at once, and packed with
        // the others at the next compaction.
        let late = point("g", 1356998405, Value::Int(7), &[("host", "a")]);
        write(&store, std::slice::from_ref(&late));
        points.insert(1, late);
        assert_eq!(queried(&store), as_written(&points));
        let stored = compacted_value(&store, &G_ROW).unwrap();
        assert!(codec::is_packed(&stored));
        assert_eq!(codec::expand_row(&stored).unwrap().as_ref(), compacted_row(&points).as_slice());
        assert_eq!(queried(&store), as_written(&points));
        // Another value for an instant already packed is a variant duplicate, as against a compacted column:
        // without tsd.storage.fix_duplicates the row is left uncompacted (both cells kept, as OpenTSDB leaves it),
        // so it is no longer packed; reads list both points, as before.
        write(&store, &[point("g", 1356998410, Value::Int(8), &[("host", "a")])]);
        let stored = compacted_value(&store, &G_ROW).unwrap();
        assert!(!codec::is_packed(&stored));
        let r = rows(&store, "g");
        assert_eq!(r[0].1.len(), 2, "the compacted column and the later cell");
        assert_eq!(queried(&store).len(), points.len() + 1);
    }

    // A read that merges a closed hour's operands (a query, the rollup fold's MultiGet) decodes the row at
    // once: it gets OpenTSDB's compacted column, unpacked; what a compaction writes is packed.
    #[test]
    fn a_read_merges_a_closed_hour_without_packing_it_and_a_compaction_packs_it() {
        assert!(!on_rocksdb_thread(), "a test's thread is not one of RocksDB's");
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let points = gauge_hour(1356998400, "a");
        write(&store, &points);
        store.settle().unwrap();
        let read = store.db.get_cf(store.cf(CF_DATA), G_ROW).unwrap().unwrap();
        assert_eq!(read, compacted_row(&points));
        let stored = compacted_value(&store, &G_ROW).unwrap();
        assert!(codec::is_packed(&stored));
        assert_eq!(codec::expand_row(&stored).unwrap().as_ref(), read.as_slice());
    }

    #[test]
    fn open_hours_are_not_packed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let now = unix_now();
        let hour = now - now % 3600;
        let points: Vec<_> = (0..20).map(|i| point("g", hour + i, Value::Int(i), &[("host", "a")])).collect();
        write(&store, &points);
        let mut key = G_ROW;
        key[3..7].copy_from_slice(&(hour as u32).to_be_bytes());
        let stored = compacted_value(&store, &key).unwrap();
        assert!(!codec::is_packed(&stored), "the current hour stays in OpenTSDB's form");
        assert_eq!(stored, compacted_row(&points));
        assert!(!hour_closed(hour as u32, hour + 3600 + PACK_GRACE_SECS - 1));
        assert!(hour_closed(hour as u32, hour + 3600 + PACK_GRACE_SECS));
    }

    #[test]
    fn packed_rows_survive_a_restart_and_are_deleted_like_any_row() {
        let dir = tempfile::tempdir().unwrap();
        let points = [gauge_hour(1356998400, "a"), gauge_hour(1357002000, "a")].concat();
        {
            let store = open(dir.path(), &[]);
            write(&store, &points);
            assert!(codec::is_packed(&compacted_value(&store, &G_ROW).unwrap()));
        }
        let store = open(dir.path(), &[]);
        assert_eq!(queried(&store), as_written(&points));
        assert!(codec::is_packed(&store.db.get_cf(store.cf(CF_DATA), G_ROW).unwrap().unwrap()));
        store.delete_rows(&[G_ROW.to_vec()]).unwrap();
        assert_eq!(queried(&store), as_written(&points[360..]));
        assert_eq!(compacted_value(&store, &G_ROW), None);
    }

    #[test]
    fn the_compaction_after_a_burst_packs_what_the_burst_left_in_level_0() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        assert!(!store.compaction_owed(), "nothing written");
        write(&store, &gauge_hour(1356998400, "a"));
        store.settle().unwrap();
        // A memtable flushed by RocksDB: the row's fragments sit in a level-0 file as merge operands.
        let cf = store.cf(CF_DATA);
        store.db.flush_cf(cf).unwrap();
        let level0 = || store.db.property_int_value_cf(cf, "rocksdb.num-files-at-level0").unwrap().unwrap();
        assert_eq!(level0(), 1);
        assert!(store.compaction_owed());
        assert!(store.background_work() >= 1, "owed work keeps a benchmark waiting");
        store.compact_written().unwrap();
        assert_eq!(level0(), 0);
        // (background_work() may still count RocksDB's own follow-up work for a moment: not asserted.)
        assert!(!store.compaction_owed());
        // Compacted at the bottom: merged once, and packed without another read.
        let mut stored = Vec::new();
        store
            .scan_raw(CF_DATA, &[], |_, v| {
                stored.push(v.to_vec());
                true
            })
            .unwrap();
        assert_eq!(stored.len(), 1);
        assert!(codec::is_packed(&stored[0]));
        // A write makes it owed again only once it leaves something behind.
        write(&store, &[point("g", 1356998405, Value::Int(7), &[("host", "a")])]);
        store.settle().unwrap();
        assert!(!store.compaction_owed(), "a small memtable is left to RocksDB");
    }

    #[test]
    fn compactions_pack_closed_rows_stored_unpacked() {
        // A row of OpenTSDB's compacted form stored as a whole value (what fsck rewrites, what a data directory
        // from before packing holds): never merged again, so the compaction filter packs it.
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let points = gauge_hour(1356998400, "a");
        // (A point first, so that the series and its UIDs exist; settled before the row is replaced.)
        write(&store, &points[..1]);
        store.settle().unwrap();
        let plain = compacted_row(&points);
        store.rewrite_rows(&[(G_ROW.to_vec(), Some(plain.clone()))]).unwrap();
        assert_eq!(store.db.get_cf(store.cf(CF_DATA), G_ROW).unwrap().unwrap(), plain);
        let stored = compacted_value(&store, &G_ROW).unwrap();
        assert!(codec::is_packed(&stored), "packed by the compaction that met it");
        assert_eq!(codec::expand_row(&stored).unwrap().as_ref(), plain.as_slice());
        assert_eq!(queried(&store), as_written(&points));
    }

    #[test]
    fn packed_rows_past_the_retention_are_cut_and_compacted_away() {
        let dir = tempfile::tempdir().unwrap();
        {
            // Written (and packed) with rows kept forever.
            let store = open(dir.path(), &[("rtsd.retention.raw_hours", "0")]);
            write(&store, &gauge_hour(1356998400, "a"));
            assert!(codec::is_packed(&compacted_value(&store, &G_ROW).unwrap()));
        }
        // Served with a retention the 2013 hour is past: not read, and gone at the next compaction.
        let store = open(dir.path(), &[("rtsd.retention.raw_hours", "240")]);
        assert_eq!(queried(&store), vec![]);
        assert_eq!(compacted_value(&store, &G_ROW), None);
    }
}
