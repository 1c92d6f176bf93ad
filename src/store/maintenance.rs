//! The engine's background work as the store steers it: settling after bursts, retention compactions, memory
//! and work figures, durability at shutdown.
use super::*;

/// Memtable bytes of a table worth flushing in [`Store::compact_written`]: what a burst of writes leaves; a
/// trickle of writes leaves less, and flushing that after every pause would only make small files to compact.
pub(super) const BURST_MEMTABLE_BYTES: u64 = 8 << 20;

/// Counter merges per write when the counters are written (see `SeriesIndex::drain_counts`): a bounded write, as
/// the flush of the series table writes its rows in slices.
const COUNTER_MERGES_PER_WRITE: usize = 4096;

impl Store {
    /// Every table this store opened (its own tables, the configured rollup tables, the rollup marks).
    pub(super) fn family_names(&self) -> Vec<&str> {
        COLUMN_FAMILIES
            .iter()
            .copied()
            .chain(self.rollups.families.iter().map(String::as_str))
            .chain([rollup::CF_ROLLUP_DIRTY])
            .collect()
    }

    /// The stats of every table the engine has, for an engine that runs its own background work.
    pub(super) fn table_stats(&self) -> Vec<(&str, engine::TableStats)> {
        let Some(m) = self.engine.maintenance() else { return Vec::new() };
        self.family_names().into_iter().filter_map(|f| Some((f, m.table_stats(f)?))).collect()
    }

    /// The engine's background work in progress or owed: running compactions and flushes, tables whose
    /// compaction or memtable flush is pending, 1 while [`Store::compact_written`] is owed, and 1 while points
    /// wait in the series table (on HBase the only work a node owes: its rows, 5 s after a burst). 0 once the
    /// store has settled after a burst of writes (what a benchmark waits for before timing reads and measuring
    /// the disk, as it waits for VictoriaMetrics' forced merge).
    pub fn background_work(&self) -> u64 {
        let mut work = self.engine.maintenance().map_or(0, |m| m.running_jobs());
        work += u64::from(!self.read_only && self.compaction_owed());
        work += u64::from(self.pending.points() > 0);
        for (_, stats) in self.table_stats() {
            work += u64::from(stats.compaction_pending) + u64::from(stats.flush_pending);
        }
        work
    }

    /// A number that moves whenever data, rollups, the index or the UIDs are written (their memtables grow, are
    /// flushed, or level-0 files come and go), so while it stands still nothing is written. RocksDB's sequence
    /// number would not do: the rollup fold writes its bookkeeping every few seconds even when idle.
    pub fn write_activity(&self) -> u64 {
        let mut activity = 0u64;
        for (_, stats) in self.table_stats().into_iter().filter(|(f, _)| *f != rollup::CF_ROLLUP_DIRTY) {
            activity = activity.wrapping_add(stats.memtable_bytes);
            activity = activity.wrapping_add(stats.level0_files << 48);
        }
        activity
    }

    /// What a burst of writes left in a table: level-0 files (flushed memtables not yet compacted into the tree
    /// below; for the data table, row fragments as uncompressed merge operands) and a memtable of at least
    /// [`BURST_MEMTABLE_BYTES`]. Returns (flush, compact).
    pub(super) fn burst_left(stats: &engine::TableStats) -> (bool, bool) {
        (stats.active_memtable_bytes >= BURST_MEMTABLE_BYTES, stats.level0_files > 0)
    }

    /// Whether writes happened since the last [`Store::compact_written`] and left something it would do.
    pub fn compaction_owed(&self) -> bool {
        self.write_activity() != self.compacted_at.load(std::sync::atomic::Ordering::Acquire)
            && self.table_stats().iter().any(|(_, stats)| {
                let (flush, compact) = Store::burst_left(stats);
                flush || compact
            })
    }

    /// Brings every table to its settled form after a burst of writes (an import, a backfill, a benchmark's
    /// ingest): the burst's rows are folded into the automatic rollups, a large memtable is flushed, and level-0
    /// files are compacted into the tree below, as RocksDB would do only once more files pile up. Until then the
    /// data table's newest rows are merge operands in uncompressed files, merged again on every read; compacted,
    /// they are merged once, compressed, and packed. The daemon calls this once writes have
    /// paused (see `daemon`); the bottom level is not rewritten (only what level 0 overlaps), so a large store
    /// pays what its next level-0 compaction costs. Nothing to do for an engine without background work of its
    /// own.
    pub fn compact_written(&self) -> Result<(), StoreError> {
        // The burst's rollups first (settling the series table on the way), so they are compacted with it rather
        // than left in level 0 by the next background fold.
        self.fold_rollups(None)?;
        let Some(m) = self.engine.maintenance() else { return Ok(()) };
        for table in self.family_names() {
            let Some(stats) = m.table_stats(table) else { continue };
            if Store::burst_left(&stats).0 {
                m.flush_table(table)?;
            }
            if m.table_stats(table).is_some_and(|stats| Store::burst_left(&stats).1) {
                m.compact_table(table, false)?;
            }
        }
        self.compacted_at.store(self.write_activity(), std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Memory by use (`/api/stats/jvm`'s pools): the engine's memtables and table readers' indexes and filters
    /// summed over the tables, the one block cache they share, and the series table's points not yet written.
    pub fn memory_usage(&self) -> Vec<(&'static str, u64)> {
        let stats = self.table_stats();
        vec![
            ("rocksdbMemtables", stats.iter().map(|(_, s)| s.memtable_bytes).sum()),
            ("rocksdbBlockCache", self.engine.maintenance().map_or(0, |m| m.cache_bytes())),
            ("rocksdbTableReaders", stats.iter().map(|(_, s)| s.table_readers_bytes).sum()),
            ("rtsdSeriesTable", self.pending.bytes()),
        ]
    }

    /// Compacts every retained table now, so rows past their retention leave the disk at once instead of at
    /// RocksDB's next compaction of their files (`rtsd fsck --reclaim`, tests). Rows written as merge operands
    /// are first merged into one value and filtered when compacted again, hence the forced bottommost pass.
    /// Returns the rows removed.
    pub fn compact_expired(&self) -> Result<u64, StoreError> {
        self.settle()?;
        let before = self.metrics.rows_expired.get();
        if let Some(m) = self.engine.maintenance() {
            for family in self.retention.families() {
                if self.engine.has_table(family) {
                    m.flush_table(family)?;
                    m.compact_table(family, true)?;
                }
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
        for batch in self.series.drain_counts(COUNTER_MERGES_PER_WRITE) {
            self.engine.write(batch, Durability::Logged)?;
        }
        Ok(())
    }

    /// Makes everything written so far durable on disk (graceful shutdown).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.settle()?;
        if let Some(log) = self.pending.shared() {
            // Every record is deleted once its points are in their rows: the lease has nothing left to guard.
            log.retire()?;
        }
        self.flush_counters()?;
        self.engine.sync()?;
        if let Some(m) = self.engine.maintenance() {
            for name in self.family_names() {
                m.flush_table(name)?;
            }
        }
        Ok(())
    }
}
