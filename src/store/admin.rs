//! Maintenance access for the command-line tools (`rtsd scan --delete`, `rtsd fsck`, `rtsd uid ...`): raw rows and
//! UID cells as stored, whole-row rewrites and deletes, and rebuilding the series index. Of the daemon's own
//! paths only `DELETE /api/query` uses them (row deletes, so that it keeps rollups and the series index right
//! exactly as `scan --delete` does); every write here is one atomic RocksDB batch, so an interrupted tool leaves
//! each row either as it was or as it was meant to become.
use std::collections::{BTreeMap, HashMap};

use rtsd_protocol::codec;
use rtsd_protocol::point::UidKind;

use super::engine::{cell_key, Durability, ReadHints, WriteBatch};
use super::{Store, StoreError, Tsuid, CF_DATA, CF_SERIES, CF_UID_ID, CF_UID_NAME};

/// Which half of the UID table a cell belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UidFamily {
    /// `id`: forward map, row = name, value = UID (and the max-id counter at row `\0`).
    Id,
    /// `name`: reverse map, row = UID, value = name.
    Name,
}

impl UidFamily {
    fn cf(self) -> &'static str {
        match self {
            UidFamily::Id => CF_UID_ID,
            UidFamily::Name => CF_UID_NAME,
        }
    }
}

/// One UID-cell write for [`Store::write_uid_cells`]: (family, kind qualifier, row, `Some(value)` to put or
/// `None` to delete).
pub type UidCellWrite = (UidFamily, Vec<u8>, Vec<u8>, Option<Vec<u8>>);

impl Store {
    /// Calls `f(key, value)` for every data row (including rows whose keys don't decode), in key order, until
    /// `f` returns false.
    pub fn for_each_raw_row(
        &self,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let Some(mut iter) = self.engine.cursor(CF_DATA, ReadHints::default()) else { return Ok(()) };
        iter.seek(b"");
        while iter.valid() {
            if !f(iter.key(), iter.value())? {
                return Ok(());
            }
            iter.next();
        }
        iter.status()
    }

    /// The number of series in the index (within retention), what `rtsd_series` shows: walks the index, so
    /// callers reuse the answer. The index as it stands, without settling the series table first, so a metrics
    /// scrape never waits for a flush (during data set B's burst a scrape that counted waited up to
    /// 65 ms behind one, and 300-800 ms where flushes did more, bench/RESULTS.md 2026-11-30 12:00-13:00). A
    /// series whose first points still wait in the series table is counted once they are flushed, a few
    /// seconds later at most; series past every retention are left out, as [`Store::for_each_series`] does.
    pub fn series_count(&self) -> Result<u64, StoreError> {
        let (mut n, cut) = (0u64, self.retention.index_cut_ms());
        super::series::for_each_series(self.engine.as_ref(), |_, hour| {
            n += u64::from(super::retention::Retention::lists_series(hour, cut));
            true
        })?;
        Ok(n)
    }

    /// Bytes of the engine's files on disk (SST files, write-ahead logs, manifests): what `du` says of the data
    /// directory; 0 for an engine whose files are elsewhere.
    pub fn disk_bytes(&self) -> u64 {
        self.engine.maintenance().map_or(0, |m| m.disk_bytes())
    }

    /// An estimate of the number of data rows (the engine's key estimate), for progress bars.
    pub fn estimated_rows(&self) -> u64 {
        self.engine.maintenance().and_then(|m| m.table_stats(CF_DATA)).map_or(0, |s| s.estimated_rows)
    }

    /// Replaces whole rows (`Some(value)`) or deletes them (`None`) in one atomic, synced write. A replaced row
    /// is written as a plain value: earlier merge operands are gone, later ones merge on top of it.
    pub fn rewrite_rows(&self, rows: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        let mut marks = super::rollup::Marks::default();
        for (key, value) in rows {
            match value {
                Some(v) => batch.put(CF_DATA, key, v),
                None => batch.delete(CF_DATA, key),
            }
            if self.rollups.auto() {
                // Rollups of the row are recomputed from what is left of it.
                marks.add_row(key, 0);
            }
        }
        // Through the gate with the marks noted, as every raw write: a daemon's next fold (and the fold before a
        // rollup read) sees these rows, not only the background fold that reads stored marks (`DELETE
        // /api/query` runs inside the daemon).
        self.write_marked(batch, &mut marks, Durability::Synced)
    }

    /// Deletes data rows in one atomic, synced write. Rollups of the rows are recomputed at the next fold (see
    /// [`Store::rewrite_rows`]); a series whose newest row went has its newest hour in the series index moved
    /// back to its newest remaining row (or its entry removed when none is left), so `/api/query/last` answers
    /// from what is left.
    pub fn delete_rows(&self, keys: &[Vec<u8>]) -> Result<(), StoreError> {
        let rows: Vec<(Vec<u8>, Option<Vec<u8>>)> = keys.iter().map(|k| (k.clone(), None)).collect();
        self.rewrite_rows(&rows)?;
        self.reindex_after_delete(keys)
    }

    /// Deletes every stored row of these series (TSUIDs of one metric) whose hour lies in `[start_ms, end_ms)`:
    /// what `DELETE /api/query` removes, as 2.4 deletes each whole row its scanner returned (so points of those
    /// hours outside the query's range go too, spec: query §1.7). Returns how many rows went.
    pub fn delete_series_rows(&self, tsuids: &[Tsuid], start_ms: i64, end_ms: i64) -> Result<u64, StoreError> {
        let start_ms = start_ms.max(self.retention.cut_ms(CF_DATA));
        if end_ms <= start_ms || tsuids.is_empty() {
            return Ok(0);
        }
        // Every acknowledged point into its row first: the query's read took the series table's points without
        // flushing them (`Store::read_series`), and a flush after the delete would write them into deleted rows.
        self.flush_pending()?;
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = i64::from(codec::base_time(start_ms.clamp(0, last)));
        let end_hour = i64::from(codec::base_time((end_ms - 1).clamp(0, last)));
        let mut existing = Vec::new();
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> =
                (start_hour..=end_hour).step_by(3600).map(|hour| self.layout.row_key(tsuid, hour)).collect();
            let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            self.engine.get_many(CF_DATA, &key_refs, true, ReadHints::default(), &mut |i, value| {
                if value.is_some() {
                    existing.push(keys[i].clone());
                }
                Ok(())
            })?;
        }
        for chunk in existing.chunks(1024) {
            self.delete_rows(chunk)?;
        }
        Ok(existing.len() as u64)
    }

    /// After `keys` were deleted: for each series whose indexed newest hour was among them, finds its newest
    /// remaining row (one backward scan per metric and salt bucket for all such series, stopping once each is
    /// found) and rewrites its index entry. A point written concurrently into an hour older than the deleted one
    /// can be missed by the scan and then reported again only once a newer point arrives.
    fn reindex_after_delete(&self, keys: &[Vec<u8>]) -> Result<(), StoreError> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        // metric -> salt bucket -> tsuid -> the deleted newest hour
        type DeletedNewest = HashMap<Tsuid, u32>;
        let mut pending: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, DeletedNewest>> = BTreeMap::new();
        for key in keys {
            if key.len() < sw + mw + 4 {
                continue;
            }
            let tsuid = self.layout.tsuid_of_row(key);
            let hour = codec::row_base_time(key, sw, mw);
            if self.last_hour(&tsuid)? == Some(hour) {
                pending
                    .entry(tsuid[..mw].to_vec())
                    .or_default()
                    .entry(key[..sw].to_vec())
                    .or_default()
                    .insert(tsuid, hour);
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        let first_kept = self.retention.first_kept_base(CF_DATA);
        let tags_offset = self.layout.tags_offset();
        let mut batch = WriteBatch::default();
        let mut forget = Vec::new();
        for (metric, buckets) in pending {
            for (salt, mut series) in buckets {
                let mut prefix = salt.clone();
                prefix.extend_from_slice(&metric);
                let newest = series.values().copied().max().unwrap_or(0);
                let mut seek = prefix.clone();
                seek.extend_from_slice(&newest.to_be_bytes());
                let Some(mut iter) = self.engine.cursor(CF_DATA, ReadHints::default()) else { break };
                // The last key before `seek`: rows of hours before the newest deleted one, newest first.
                iter.seek_for_prev_from(&seek, &prefix);
                while !series.is_empty() && iter.valid() {
                    let key = iter.key();
                    if key.len() < tags_offset || !key.starts_with(&prefix) {
                        break;
                    }
                    let hour = codec::row_base_time(key, sw, mw);
                    if hour < first_kept {
                        break;
                    }
                    let mut tsuid = metric.clone();
                    tsuid.extend_from_slice(&key[tags_offset..]);
                    if series.get(tsuid.as_slice()).is_some_and(|&deleted| hour < deleted) {
                        let tsuid = series.remove_entry(tsuid.as_slice()).map_or_else(|| tsuid.into(), |(t, _)| t);
                        super::series::set_last_hour(&mut batch, &tsuid, Some(hour));
                        forget.push(tsuid);
                    }
                    iter.prev();
                }
                iter.status()?;
                for tsuid in series.into_keys() {
                    super::series::set_last_hour(&mut batch, &tsuid, None);
                    forget.push(tsuid);
                }
            }
        }
        self.engine.write(batch, Durability::Synced)?;
        for tsuid in forget {
            self.series.forget(&tsuid);
        }
        Ok(())
    }

    /// Merges raw columns (`codec` row encoding) into a row, as a point write does but with any qualifier and
    /// value: for tests that need rows the write path would never produce.
    pub fn merge_raw_columns(&self, key: &[u8], columns: &[u8]) -> Result<(), StoreError> {
        // Unmarked: no flush may go on folding a row from its own copy.
        self.give_back_owned();
        let mut batch = WriteBatch::default();
        batch.merge(CF_DATA, key, columns);
        self.engine.write(batch, Durability::Logged)
    }

    /// Calls `f(kind qualifier, row, value)` for every cell of one UID family, in key order. Cells whose key has
    /// no `0x00` separator are passed with an empty qualifier and the whole key as row.
    pub fn for_each_uid_cell(
        &self,
        family: UidFamily,
        mut f: impl FnMut(&[u8], &[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let Some(mut iter) = self.engine.cursor(family.cf(), ReadHints::default()) else { return Ok(()) };
        iter.seek(b"");
        while iter.valid() {
            let (key, value) = (iter.key(), iter.value());
            let (qualifier, row) = match key.iter().position(|&b| b == 0) {
                Some(i) => (&key[..i], &key[i + 1..]),
                None => (&key[..0], key),
            };
            if !f(qualifier, row, value)? {
                return Ok(());
            }
            iter.next();
        }
        iter.status()
    }

    /// Applies UID-cell puts (`Some`) and deletes (`None`) as one atomic, synced write: `(family, qualifier,
    /// row, value)`.
    pub fn write_uid_cells(&self, cells_to_write: &[UidCellWrite]) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for (family, qualifier, row, value) in cells_to_write {
            let key = cell_key(qualifier, row);
            match value {
                Some(v) => batch.put(family.cf(), &key, v),
                None => batch.delete(family.cf(), &key),
            }
        }
        self.engine.write(batch, Durability::Synced)?;
        self.uids.drop_caches();
        Ok(())
    }

    /// Deletes a name's UID (forward and reverse mapping) as OpenTSDB's `uid delete` does: the id is not reused
    /// and data rows that carry it are left in place (orphaned; `rtsd fsck --delete-orphans` removes them).
    pub fn delete_uid(&self, kind: UidKind, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(uid) = self.uids.get(kind, name)? else { return Ok(None) };
        let q = kind.as_str().as_bytes().to_vec();
        let uid = uid.as_bytes().to_vec();
        self.write_uid_cells(&[
            (UidFamily::Id, q.clone(), name.as_bytes().to_vec(), None),
            (UidFamily::Name, q, uid.clone(), None),
        ])?;
        Ok(Some(uid))
    }

    /// Sets a kind's max-id counter (the next assignment continues after it).
    pub fn set_max_uid(&self, kind: UidKind, max: u64) -> Result<(), StoreError> {
        self.write_uid_cells(&[(
            UidFamily::Id,
            kind.as_str().as_bytes().to_vec(),
            vec![0],
            Some(max.to_be_bytes().to_vec()),
        )])
    }

    /// Re-creates the series index entries of every decodable data row (OpenTSDB's `uid metasync` creates
    /// missing TSMeta the same way, from a full data scan), and sets each series' point counter to its stored
    /// points, last received at its newest point. Idempotent; returns (rows, series).
    pub fn rebuild_series_index(&self, mut progress: impl FnMut(u64)) -> Result<(u64, u64), StoreError> {
        let mut batch = WriteBatch::default();
        let mut rows = 0u64;
        // Per series: stored points and the newest one's second.
        let mut series: std::collections::HashMap<Tsuid, (u64, i64)> = std::collections::HashMap::new();
        let mut noted = super::series::Noted::default();
        let Some(mut iter) = self.engine.cursor(CF_DATA, ReadHints::default()) else { return Ok((0, 0)) };
        iter.seek(b"");
        while iter.valid() {
            let (key, value) = (iter.key(), iter.value());
            if let Some(row) = self.decode_row(key, value) {
                if row.metric.iter().any(|&b| b != 0) {
                    let tsuid = self.layout.tsuid_of_row(key);
                    // Points of stored rows, not received ones: the counter is set below, not counted.
                    let mut writes = super::series::IndexWrites { batch: &mut batch, noted: &mut noted };
                    self.series.note(&mut writes, &self.layout, &tsuid, row.base_time, 0);
                    let points = codec::row_points(row.base_time, value).unwrap_or_default();
                    let newest = points.iter().map(|p| p.timestamp_ms.div_euclid(1000)).max().unwrap_or(0);
                    let tally = series.entry(tsuid).or_default();
                    *tally = (tally.0 + points.len() as u64, tally.1.max(newest));
                }
            }
            rows += 1;
            if batch.len() >= 4096 {
                self.engine.write(std::mem::take(&mut batch), Durability::Logged)?;
                self.series.remember(&mut noted);
                progress(rows);
            }
            iter.next();
        }
        iter.status()?;
        for (tsuid, (points, newest)) in &series {
            let seconds = u32::try_from(*newest).unwrap_or(0);
            batch.put(CF_SERIES, &super::series::counter_key(tsuid), &super::series::counter_value(*points, seconds));
        }
        self.engine.write(batch, Durability::Logged)?;
        progress(rows);
        Ok((rows, series.len() as u64))
    }

    /// Makes every write so far durable by syncing the write-ahead log, without flushing memtables (the end of a
    /// bulk load: what is still in memtables is replayed from the log at the next open).
    pub fn sync_wal(&self) -> Result<(), StoreError> {
        self.flush_counters()?;
        self.engine.sync()
    }
}
