//! OpenTSDB's layout (spec: ingest §4) over a storage [`engine`]: the store decides every key and value, the
//! engine keeps tables of rows in key order (embedded RocksDB by default, see [`engine::rocks`]).
//!
//! Each HBase table family is a table named `<table>:<family>`:
//! * `tsdb:t` holds data rows. One key is one HBase row key (salt, metric UID, base hour, sorted tag UID pairs)
//!   and its value is that row's columns (qualifier, value) in `codec`'s row encoding. Points are written as
//!   merges; the data row's merge ([`merge_data_row`], `codec::merge_row`) applies HBase's overwrite rule and
//!   OpenTSDB's compaction, so with RocksDB rows are compacted by its own background work instead of OpenTSDB's
//!   hourly read-rewrite-delete storm (spec: ingest §7 item 3).
//! * `tsdb-uid:id` and `tsdb-uid:name` hold the UID maps. A cell `(row, qualifier)` is the key
//!   `qualifier 0x00 row`, so each kind's names are contiguous and sorted (see [`engine::cell_key`]).
//! * `rtsd:series` is rtsd's series index (see [`series`]): every series, its newest hour, tag postings.
//! * Every table of data rows has a retention (see [`retention`]): reads start at its cut, and a compaction
//!   filter removes expired rows.
//! * `rtsd:meta` records the layout a data directory was created with, so a config that would misread it is
//!   refused at start-up.
pub mod admin;
mod annotations;
pub mod bulk;
pub mod engine;
pub mod health;
pub mod layout;
mod maintenance;
pub mod meta;
pub mod pending;
mod read;
pub mod retention;
pub mod rollup;
pub mod rollup_rows;
pub mod series;
pub mod shared_log;
mod tables;
pub mod uid;
mod write;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rtsd_protocol::annotation;
use rtsd_protocol::codec;
use rtsd_protocol::point::{DataPoint, PutError, UidKind};

use crate::metrics::Metrics;
use annotations::annotation_values;
pub use annotations::CellAddress;
use engine::{CellMap, Durability, Engine, Merge, MergeContext, ReadHints, TableSpec, Tuning, WriteBatch};
pub use layout::{Layout, Tsuid};
pub use read::{RowRef, StoredSeries};
use tables::*;
use uid::{Uid, UidError, Uids};
pub use write::{PointBatch, SeriesKey};

pub const CF_DATA: &str = "tsdb:t";
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

/// Points not in their rows, by row key: their columns (see `Store::overlay`).
type UnflushedRows = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// What a store is opened with: the data directory and the settings that shape it (the configuration makes them,
/// `Config::store_options`: the store reads no configuration).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub path: std::path::PathBuf,
    pub layout: Layout,
    /// Assign UIDs to new metrics, tag keys, tag values.
    pub auto_create: [bool; 3],
    pub fix_duplicates: bool,
    /// Keep each series' point counter (TSMeta `totalDatapoints`, `lastReceived`; see [`series`]). Without it a
    /// TSMeta shows the points stored and the newest one's time, counted when asked for.
    pub count_received: bool,
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
    /// Which engine holds the tables (`rtsd.storage.engine`).
    pub engine: EngineChoice,
}

/// Which engine holds the store's tables.
#[derive(Debug, Clone, Default)]
pub enum EngineChoice {
    /// Embedded RocksDB in the data directory: one machine, rtsd's own series log in front of it.
    #[default]
    RocksDb,
    /// OpenTSDB's own tables on an HBase cluster, shared by any number of rtsd nodes and OpenTSDB TSDs: nothing
    /// is kept on the node (a write is acknowledged once HBase has it, in the node's series log there).
    /// Boxed: the options are far larger than the RocksDB variant's nothing.
    HBase(Box<engine::hbase::HBaseOptions>),
}

/// A storage failure: RocksDB refused, or bytes on disk make no sense.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The engine failed (its own words, prefixed with its name).
    #[error("{0}")]
    Engine(#[from] engine::EngineError),
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
    engine: Arc<dyn Engine>,
    /// The data directory (the series log, bulk-load files, the free-space guard; RocksDB's files).
    path: std::path::PathBuf,
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
    /// Acknowledged points not yet in their rows (see [`pending`]), logged in the series log: files in the data
    /// directory on the embedded engine, a table of the engine on HBase (see [`shared_log`]).
    pending: pending::PendingTable,
    /// Whether the engine keeps its data on this node (RocksDB). Otherwise (HBase) nothing that matters lives on
    /// the node: its series log is in HBase, and other nodes take it over when the node dies.
    node_local: bool,
    read_only: bool,
    /// A read-only open's view of the series log: acknowledged points not in their rows (by a running daemon,
    /// or left by a crash), row key -> columns, which its readers of data rows merge in, so `rtsd scan` beside a
    /// daemon sees every acknowledged point. Empty for the writer, whose readers take such points from its
    /// series table.
    overlay: UnflushedRows,
    /// The free-space guard and the storage-failure accounting (see [`health`]).
    health: health::Health,
    /// When a flush last failed, until one succeeds: retried at most once a second (see [`Store::settle`]).
    flush_failed_at: std::sync::Mutex<Option<Instant>>,
    /// Tests: every flush of the series table fails, as on a full disk, while set.
    #[cfg(test)]
    pub(crate) fail_flushes: std::sync::atomic::AtomicBool,
    /// Tests: a flush's writes of its rows fail (after it planned them), while set.
    #[cfg(test)]
    pub(crate) fail_flush_writes: std::sync::atomic::AtomicBool,
    /// Tests: the writes of sealed rows' rollups fail (see `Store::seal_owned`), while set.
    #[cfg(test)]
    pub(crate) fail_seal_writes: std::sync::atomic::AtomicBool,
    /// Tests: rows per slice of a flush (0: [`write::FLUSH_SLICE_ROWS`]), and what runs on the flush's thread
    /// before each slice's write (`false`) and after it, before readers are told (`true`).
    #[cfg(test)]
    pub(crate) flush_slice_rows: std::sync::atomic::AtomicUsize,
    #[cfg(test)]
    #[allow(clippy::type_complexity)]
    pub(crate) flush_step: std::sync::Mutex<Option<Box<dyn Fn(&Store, usize, bool) + Send + Sync>>>,
    fix_duplicates: bool,
    /// [`Store::write_activity`] when [`Store::compact_written`] last ran (0: never since open).
    compacted_at: std::sync::atomic::AtomicU64,
    /// Set by [`Store::abandon_folds`]: folds stop between chunks.
    folds_abandoned: std::sync::atomic::AtomicBool,
}

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
            count_received,
            cache_capacity,
            block_cache_bytes,
            memtable_bytes,
            ref rollups,
            ref retention,
            min_free_bytes,
            max_open_files,
            engine: ref choice,
        } = *options;
        let node_local = matches!(choice, EngineChoice::RocksDb);
        let (path, layout, rollup_settings, retention_settings) = (path.as_path(), layout.clone(), rollups, retention);
        let mut rollups = rollup::Rollups::new(rollup_settings);
        let retention = retention::Retention::new(retention_settings, rollup_settings);
        // Rollup tables of the configuration, and any left by an earlier one (RocksDB opens all or nothing).
        let existing = if node_local { engine::rocks::list_tables(path) } else { Vec::new() };
        let mut names: Vec<String> = COLUMN_FAMILIES.iter().map(|n| n.to_string()).collect();
        names.extend(rollups.families.iter().cloned());
        names.push(rollup::CF_ROLLUP_DIRTY.to_string());
        if !node_local {
            names.push(shared_log::CF_LOG.to_string());
        }
        for name in &existing {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        if read_only && !existing.is_empty() {
            // A read-only open cannot create tables: rollup tables the configuration names but the directory
            // lacks (a daemon with rollups off wrote it) read as empty (readers skip absent tables).
            names.retain(|name| existing.contains(name));
        }
        let specs: Vec<TableSpec> = names
            .iter()
            .map(|name| {
                let mut spec = table_spec(name, &layout, fix_duplicates, &metrics);
                retention.install(&mut spec, &layout, metrics.clone());
                spec
            })
            .collect();
        // A read-only open reads the series log before the database: a segment a running daemon deletes meanwhile
        // has its points in the tables by then, so they are seen either way (twice at worst: merged as identical).
        let mut unflushed = Vec::new();
        if read_only && node_local {
            pending::read_log(path, |record| unflushed.push(record.to_vec()))
                .map_err(|e| StoreError::Corrupt(format!("reading the series log: {e}")))?;
        }
        let engine: Arc<dyn Engine> = match choice {
            EngineChoice::RocksDb => {
                let options =
                    engine::rocks::RocksOptions { memtable_bytes, block_cache_bytes, max_open_files, read_only };
                Arc::new(engine::rocks::RocksEngine::open(path, &specs, &options)?)
            }
            EngineChoice::HBase(options) => {
                let hbase = engine::hbase::HBaseEngine::connect(options, &specs)?;
                // Retention becomes the families' HBase TTLs (in the background: a master that is down or a
                // user without admin rights only costs a warning).
                if !read_only {
                    hbase.ensure_ttls(retention.ttl_seconds());
                }
                Arc::new(hbase)
            }
        };
        check_layout(engine.as_ref(), &layout, read_only)?;
        let uids = Uids::open(engine.clone(), layout.uid_widths, cache_capacity, metrics.clone())?;
        let series = series::SeriesIndex::new(cache_capacity, count_received);
        rollups.resume(engine.as_ref(), read_only)?;
        let (log, replay) = match choice {
            _ if read_only => (None, Vec::new()),
            EngineChoice::RocksDb => {
                let (log, old) = pending::SeriesLog::open(path)
                    .map_err(|e| StoreError::Corrupt(format!("opening the series log: {e}")))?;
                (Some(pending::Log::Files(log)), old)
            }
            EngineChoice::HBase(options) => {
                (shared_log::SharedLog::open(engine.clone(), options.log, path)?.map(pending::Log::Shared), Vec::new())
            }
        };
        // The free-space guard watches the data directory's disk, which only a node-local engine fills.
        let min_free_bytes = if read_only || !node_local { 0 } else { min_free_bytes };
        let health = health::Health::new(path.to_path_buf(), min_free_bytes, metrics.clone());
        let mut store = Store {
            engine,
            path: path.to_path_buf(),
            layout,
            auto_create,
            uids,
            series,
            metrics,
            generation: Default::default(),
            rollups,
            retention,
            pending: pending::PendingTable::new(log),
            node_local,
            read_only,
            overlay: Default::default(),
            health,
            flush_failed_at: Default::default(),
            #[cfg(test)]
            fail_flushes: Default::default(),
            #[cfg(test)]
            fail_flush_writes: Default::default(),
            #[cfg(test)]
            fail_seal_writes: Default::default(),
            #[cfg(test)]
            flush_slice_rows: Default::default(),
            #[cfg(test)]
            flush_step: Default::default(),
            fix_duplicates,
            compacted_at: Default::default(),
            folds_abandoned: Default::default(),
        };
        if read_only {
            store.load_overlay(&unflushed)?;
        } else {
            store.replay_pending(path, &replay)?;
            store.resume_shared_log()?;
        }
        Ok(store)
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

    /// The retention of each table (see [`retention`]).
    pub fn retention(&self) -> &retention::Retention {
        &self.retention
    }

    /// Whether the series index names every series with data: true when every write goes through this store (the
    /// embedded engine). On HBase other writers share the tables (OpenTSDB's TSDs, which keep no such index), so
    /// readers that must see every series scan the data table instead.
    pub fn series_index_is_complete(&self) -> bool {
        self.node_local
    }

    /// Whether a rollup fold may be left unfinished when the daemon stops ([`Store::abandon_folds`]): on an
    /// engine other nodes share (HBase), whose folds are round trips, a fold of a large backlog takes minutes,
    /// and the rows it leaves keep their stored marks for the next start, or any other node's full fold. On the
    /// embedded engine the daemon folds what is left before it stops (fast there, and the rollups are then whole
    /// for tools that open the directory after it).
    pub fn folds_resume_elsewhere(&self) -> bool {
        !self.node_local
    }

    /// Makes folds in progress, and every later one, stop after the chunk of rows they are writing: the rows not
    /// folded keep their stored marks (written with their points, deleted only once a full fold has folded
    /// every row up to them), so the next full fold of this or another process folds them (see `rollup::fold`).
    pub fn abandon_folds(&self) {
        self.folds_abandoned.store(true, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn folds_abandoned(&self) -> bool {
        self.folds_abandoned.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether the store is on this node's disk (RocksDB), not a shared cluster's (HBase).
    pub fn node_local(&self) -> bool {
        self.node_local
    }

    /// The storage engine under the store.
    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }
}

fn log_error(e: std::io::Error) -> StoreError {
    StoreError::Io { context: "series log", source: e }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        log_error(e)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use rtsd_protocol::codec::Value;
    use rtsd_protocol::point::Tags;

    use super::write::FLUSH_SLICE_ROWS;
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

    // Issue 21 item 5: a fold abandoned at shutdown (what a node on HBase does) leaves every row it did not fold
    // to the next full fold, of a later start of the store: their marks stay stored.
    #[test]
    fn a_fold_abandoned_at_shutdown_is_resumed_by_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let marks = |store: &Store| {
            let mut n = 0;
            store
                .scan_raw(rollup::CF_ROLLUP_DIRTY, b"", |_, _| {
                    n += 1;
                    true
                })
                .unwrap();
            n
        };
        {
            let store = open(dir.path(), &[("tsd.rollups.enable", "true")]);
            let points: Vec<DataPoint<'_>> = ["a", "b", "c"]
                .iter()
                .flat_map(|h| (0..3).map(move |i| point("m", 1356998400 + i * 3600, Value::Int(i), &[("host", h)])))
                .collect();
            write(&store, &points);
            store.flush_pending().unwrap();
            assert_eq!(marks(&store), 9, "one mark per raw row");
            store.abandon_folds();
            assert_eq!(store.fold_rollups(None).unwrap(), 0, "an abandoned fold folds nothing more");
            assert_eq!(marks(&store), 9, "the marks stay for the next fold");
            assert_eq!(store.fold_backlog(), 0, "the notes were taken");
        }
        let store = open(dir.path(), &[("tsd.rollups.enable", "true")]);
        assert_eq!(store.fold_rollups(None).unwrap(), 9, "the next start folds every row left");
        assert_eq!(marks(&store), 0);
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
    /// (qualifier, value) pairs.
    type Columns = Vec<(Vec<u8>, Vec<u8>)>;

    /// Calls `f` with every row of `metric` as a reader sees it.
    fn each_row(store: &Store, metric: &str, mut f: impl FnMut(RowRef<'_>)) {
        let uid = store.uids().get(UidKind::Metric, metric).unwrap().unwrap();
        store
            .for_each_row(uid.as_bytes(), 0, u32::MAX, |row| {
                f(row);
                Ok(true)
            })
            .unwrap();
    }

    fn rows(store: &Store, metric: &str) -> Vec<(Vec<u8>, Columns)> {
        let mut out = Vec::new();
        each_row(store, metric, |row| {
            let cells = row.cells().unwrap();
            let cols = codec::columns(&cells).map(|c| c.map(|c| (c.qualifier.to_vec(), c.value.to_vec())));
            out.push((row.key.to_vec(), cols.collect::<Result<Vec<_>, _>>().unwrap()));
        });
        out
    }

    /// The points of `metric`'s rows as a reader sees them: (timestamp s, value), in row order.
    fn points_read(store: &Store, metric: &str) -> Vec<(i64, Value)> {
        let mut out = Vec::new();
        each_row(store, metric, |row| {
            let points = codec::row_points(row.base_time, &row.cells().unwrap()).unwrap();
            out.extend(points.into_iter().map(|p| (p.timestamp_ms / 1000, p.value)));
        });
        out
    }

    /// 100 points of series m{host=a}, one a second from `t0`, each valued its timestamp.
    fn hundred_points(t0: i64) -> Vec<DataPoint<'static>> {
        (0..100).map(|i| point("m", t0 + i, Value::Int(t0 + i), &[("host", "a")])).collect()
    }

    /// What `points_read` gives for m after [`hundred_points`] batches from 1356998400 up to `upto`.
    fn hundreds_up_to(upto: i64) -> Vec<(i64, Value)> {
        (1356998400..upto).map(|t| (t, Value::Int(t))).collect()
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
        let a = reader
            .read_series(&[vec![0, 0, 1, 0, 0, 1, 0, 0, 1].into()], 0, i64::MAX, &mut ReadBudget::default())
            .unwrap();
        let values: Vec<_> = a[0].points.iter().map(|p| p.timestamp_ms).collect();
        assert_eq!(values, [1356998401000, 1356998403000, 1357002000000]);
        assert_eq!(store.pending.points(), 3, "the writer's table is untouched");
    }

    // issue 22 item 5: a flush writes a fragment of several points as a cells run (codec::cells_run), which a
    // merge copies whole; a point sent again with a new value in a later flush still replaces the old one, as a
    // cell overwrites a cell (spec: ingest §4.5 W8), in an hour going on as in one that has ended, and the stored
    // row is OpenTSDB's compacted column. A row compacted before keeps OpenTSDB's duplicate rule (§4.9).
    #[test]
    fn a_point_sent_again_overwrites_a_point_a_flush_wrote_as_a_cells_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let hour = |secs: i64| secs - secs.rem_euclid(3600);
        let open_hour = hour(crate::store::tables::unix_now());
        let passed_hour = open_hour - 2 * 3600;
        for (host, base) in [("open", open_hour), ("passed", passed_hour)] {
            write(&store, &[point("m", base, Value::Int(1), &[("host", host)])]);
            write(&store, &[point("m", base + 10, Value::Int(2), &[("host", host)])]);
            store.flush_pending().unwrap();
            write(&store, &[point("m", base + 10, Value::Int(3), &[("host", host)])]);
            store.flush_pending().unwrap();
        }
        let rows = rows(&store, "m");
        assert_eq!(rows.len(), 2);
        let by_hour = |base: i64| {
            let at = rows.iter().find(|(key, _)| codec::row_base_time(key, 0, 3) == base as u32).unwrap();
            at.1.clone()
        };
        for base in [open_hour, passed_hour] {
            assert_eq!(by_hour(base), vec![(vec![0x00, 0x00, 0x00, 0xA0], vec![1, 3, 0])], "{base}");
        }
    }

    // A scan joins the series table's points with the stored rows instead of flushing the table: a point of a
    // row not stored yet, and one of a row stored already.
    #[test]
    fn a_scan_sees_points_still_in_the_series_table_without_flushing_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(&store, &[point("m", 1356998403, Value::Int(4), &[("host", "a")])]);
        store.flush_pending().unwrap();
        write(
            &store,
            &[
                point("m", 1356998405, Value::Int(5), &[("host", "a")]),
                point("m", 1356998407, Value::Int(6), &[("host", "b")]),
            ],
        );
        assert_eq!(store.pending.points(), 2);
        let expected = vec![(1356998403, Value::Int(4)), (1356998405, Value::Int(5)), (1356998407, Value::Int(6))];
        assert_eq!(points_read(&store, "m"), expected);
        assert_eq!(store.pending.points(), 2, "the scan flushed");
        store.flush_pending().unwrap();
        assert_eq!(points_read(&store, "m"), expected, "after the flush");
    }

    // Found by rtsd_on_hbase_faults (CI, 11-30): reads within a second of a failed flush used a copy of the series
    // table, taken again only when its point count changed; a writer's own flush (a `sync` put on HBase) wrote the
    // copied points, as many new ones arrived, and a read missed them. Reads now take the table itself.
    #[test]
    fn a_read_after_a_failed_flush_sees_points_that_arrived_after_another_flush_emptied_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(&store, &hundred_points(1356998400));
        store.fail_flushes.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(points_read(&store, "m"), hundreds_up_to(1356998500), "read while flushes fail");
        store.fail_flushes.store(false, std::sync::atomic::Ordering::Release);
        // A writer's own flush (not the settle's retry, which waits a second) empties the table.
        assert_eq!(store.flush_pending().unwrap(), 100);
        write(&store, &hundred_points(1356998500));
        assert_eq!(store.pending.points(), 100);
        assert_eq!(points_read(&store, "m"), hundreds_up_to(1356998600), "the second 100 points");
    }

    // A read within a second of a failed flush finds the points of a flush under way (a `sync` writer's own, on a
    // shared engine): until its slices are written their points are in neither the table nor their rows.
    #[test]
    fn a_read_after_a_failed_flush_sees_the_points_of_a_flush_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(&store, &hundred_points(1356998400));
        store.fail_flushes.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(points_read(&store, "m"), hundreds_up_to(1356998500));
        store.fail_flushes.store(false, std::sync::atomic::Ordering::Release);
        write(&store, &hundred_points(1356998500));
        // A writer's flush stops before writing its first slice until the read is done.
        let at_slice = Arc::new(std::sync::Barrier::new(2));
        let go_on = Arc::new(std::sync::Barrier::new(2));
        *store.flush_step.lock().unwrap() = Some(Box::new({
            let (at_slice, go_on) = (at_slice.clone(), go_on.clone());
            move |_: &Store, slice: usize, written: bool| {
                if (slice, written) == (0, false) {
                    at_slice.wait();
                    go_on.wait();
                }
            }
        }));
        std::thread::scope(|s| {
            let flusher = s.spawn(|| store.flush_pending().unwrap());
            at_slice.wait();
            assert_eq!(store.pending.points(), 200, "taken, not written");
            let read = points_read(&store, "m");
            go_on.wait();
            assert_eq!(flusher.join().unwrap(), 200);
            *store.flush_step.lock().unwrap() = None;
            assert_eq!(read, hundreds_up_to(1356998600), "read while the flush held the points");
        });
    }

    // Issue 22 item 5: readers of the series index and of a few series' rows (queries with literal tag filters,
    // `last`) take the points not flushed yet from the series table instead of waiting for its flush.
    #[test]
    fn index_and_series_reads_see_unflushed_points_without_flushing() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let (h1, h2): (u32, u32) = (1356998400, 1356998400 + 7200);
        let (t1, t2) = (h1 as i64, h2 as i64);
        write(&store, &[point("m", t1 + 5, Value::Int(1), &[("host", "a")])]);
        store.flush_pending().unwrap();
        write(
            &store,
            &[point("m", t2 + 7, Value::Int(2), &[("host", "a")]), point("m", t2 + 9, Value::Int(3), &[("host", "b")])],
        );
        let uid = |kind, name: &str| store.uids().get(kind, name).unwrap().unwrap().as_bytes().to_vec();
        let (m, host) = (uid(UidKind::Metric, "m"), uid(UidKind::TagKey, "host"));
        let tsuid = |v: &str| [m.clone(), host.clone(), uid(UidKind::TagValue, v)].concat();
        let (a, b) = (tsuid("a"), tsuid("b"));
        assert_eq!(store.series_of_metric(&m).unwrap(), vec![(a.clone(), h2), (b.clone(), h2)]);
        assert_eq!(
            store.series_with_tag(&m, &host, &uid(UidKind::TagValue, "b")).unwrap(),
            vec![Tsuid::from(b.clone())]
        );
        let (va, vb) = (uid(UidKind::TagValue, "a"), uid(UidKind::TagValue, "b"));
        let both = vec![Tsuid::from(a.clone()), Tsuid::from(b.clone())];
        assert_eq!(store.series_with_tags(&m, &host, &[&vb, &va]).unwrap(), both, "a stored, b not yet");
        assert_eq!(store.last_hour(&a).unwrap(), Some(h2));
        let read = store
            .read_series(
                &[a.clone().into(), b.clone().into()],
                t1 * 1000,
                (t2 + 3600) * 1000,
                &mut ReadBudget::default(),
            )
            .unwrap();
        let points: Vec<Vec<(i64, Value)>> =
            read.iter().map(|s| s.points.iter().map(|p| (p.timestamp_ms / 1000, p.value)).collect()).collect();
        assert_eq!(points, vec![vec![(t1 + 5, Value::Int(1)), (t2 + 7, Value::Int(2))], vec![(t2 + 9, Value::Int(3))]]);
        assert_eq!(store.pending.points(), 2, "no read flushed");
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
            .scan_series(metric.as_bytes(), 1_356_998_400_000, 1_357_005_600_000, &mut ReadBudget::default(), |_| {
                Ok(true)
            })
            .unwrap();
        assert_eq!(all.len(), 2);
        let values = |s: &StoredSeries| s.points.iter().map(|p| (p.timestamp_ms, p.value)).collect::<Vec<_>>();
        assert_eq!(values(&all[0]), vec![(1_356_998_400_000, Value::Int(1)), (1_357_002_000_000, Value::Int(2))]);
        assert_eq!(values(&all[1]), vec![(1_356_998_410_000, Value::Int(3))]);
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
        let m = store.engine.maintenance().unwrap();
        m.flush_table(CF_DATA).unwrap();
        m.compact_table(CF_DATA, true).unwrap();
        store.engine.get(CF_DATA, key, ReadHints::default()).unwrap()
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
        assert!(!engine::rocks::on_rocksdb_thread(), "a test's thread is not one of RocksDB's");
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let points = gauge_hour(1356998400, "a");
        write(&store, &points);
        store.settle().unwrap();
        let read = store.engine.get(CF_DATA, &G_ROW, ReadHints::default()).unwrap().unwrap();
        assert_eq!(read, compacted_row(&points));
        let stored = compacted_value(&store, &G_ROW).unwrap();
        assert!(codec::is_packed(&stored));
        assert_eq!(codec::expand_row(&stored).unwrap().as_ref(), read.as_slice());
    }

    // A row is packed once its newest point is a minute old, whatever its hour: a backfill into the hour still
    // open (points up to two minutes ago, bench data set A) is packed by the compaction that stores it, and
    // later points merge into it; a live series' row (points up to now) stays OpenTSDB's compacted column, so
    // reads merging its next points do not unpack it.
    #[test]
    fn rows_are_packed_once_quiet_whatever_their_hour() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        let now = unix_now();
        let backfill_hour = (now - 130) - (now - 130) % 3600;
        let mut backfill: Vec<_> =
            (0..20).map(|i| point("g", backfill_hour + i, Value::Int(i * 3), &[("host", "a")])).collect();
        write(&store, &backfill);
        let mut key = G_ROW;
        key[3..7].copy_from_slice(&(backfill_hour as u32).to_be_bytes());
        let stored = compacted_value(&store, &key).unwrap();
        assert!(codec::is_packed(&stored), "a backfill is packed once a compaction stores it");
        assert_eq!(codec::expand_row(&stored).unwrap().as_ref(), compacted_row(&backfill).as_slice());
        let more: Vec<_> =
            (20..25).map(|i| point("g", backfill_hour + i, Value::Double(i as f64 / 4.0), &[("host", "a")])).collect();
        write(&store, &more);
        backfill.extend(more);
        assert_eq!(queried(&store), as_written(&backfill), "read before any compaction");
        let stored = compacted_value(&store, &key).unwrap();
        assert!(codec::is_packed(&stored));
        assert_eq!(codec::expand_row(&stored).unwrap().as_ref(), compacted_row(&backfill).as_slice());

        // Host "b" is the second tag value: UID 2.
        let live_hour = now - now % 3600;
        let live: Vec<_> =
            (live_hour.max(now - 19)..=now).map(|t| point("g", t, Value::Int(t % 7), &[("host", "b")])).collect();
        write(&store, &live);
        let mut key = G_ROW;
        key[3..7].copy_from_slice(&(live_hour as u32).to_be_bytes());
        key[12] = 2;
        let stored = compacted_value(&store, &key).unwrap();
        assert_eq!(stored, compacted_row(&live), "a live series' row stays in OpenTSDB's form");
    }

    #[test]
    fn a_row_is_quiet_a_minute_after_its_newest_point() {
        let hour = 1356998400u32;
        let row = compacted_row(&gauge_hour(i64::from(hour), "a"));
        let newest = i64::from(hour) + 3590;
        assert!(!row_quiet(hour, &row, (newest + PACK_QUIET_SECS - 1) * 1000));
        assert!(row_quiet(hour, &row, (newest + PACK_QUIET_SECS) * 1000));
        // Millisecond points count to the millisecond.
        let ms = compacted_row(&[point("g", i64::from(hour) * 1000 + 1_234_567, Value::Int(1), &[("host", "a")])]);
        assert!(!row_quiet(hour, &ms, i64::from(hour) * 1000 + 1_234_567 + PACK_QUIET_SECS * 1000 - 1));
        assert!(row_quiet(hour, &ms, i64::from(hour) * 1000 + 1_234_567 + PACK_QUIET_SECS * 1000));
        // A row without data points (an annotation alone) is never packed.
        let mut note = Vec::new();
        codec::push_column(&mut note, &[1, 0, 0], b"{}");
        assert!(!row_quiet(hour, &note, i64::MAX));
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
        assert!(codec::is_packed(&store.engine.get(CF_DATA, &G_ROW, ReadHints::default()).unwrap().unwrap()));
        store.delete_rows(&[G_ROW.to_vec()]).unwrap();
        assert_eq!(queried(&store), as_written(&points[360..]));
        assert_eq!(compacted_value(&store, &G_ROW), None);
    }

    // `rtsd_series` counts the index as it stands: a metrics scrape never waits for the series table's flush.
    #[test]
    fn counting_series_does_not_wait_for_the_series_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        write(&store, &[gauge_hour(1356998400, "a"), gauge_hour(1356998400, "b")].concat());
        let pending = store.pending_points();
        assert_eq!(pending, 720);
        assert_eq!(store.series_count().unwrap(), 0);
        assert_eq!(store.pending_points(), pending, "counting flushed the series table");
        store.settle().unwrap();
        assert_eq!(store.series_count().unwrap(), 2);
    }

    #[test]
    fn the_compaction_after_a_burst_packs_what_the_burst_left_in_level_0() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), &[]);
        assert!(!store.compaction_owed(), "nothing written");
        assert_eq!(store.background_work(), 0);
        write(&store, &gauge_hour(1356998400, "a"));
        assert!(store.pending_points() > 0 && !store.compaction_owed());
        assert_eq!(store.background_work(), 1, "points waiting in the series table are owed work");
        store.settle().unwrap();
        // A memtable flushed by RocksDB: the row's fragments sit in a level-0 file as merge operands.
        let m = store.engine.maintenance().unwrap();
        m.flush_table(CF_DATA).unwrap();
        let level0 = || m.table_stats(CF_DATA).unwrap().level0_files;
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
        assert_eq!(store.engine.get(CF_DATA, &G_ROW, ReadHints::default()).unwrap().unwrap(), plain);
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
