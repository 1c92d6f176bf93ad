//! Reads of data rows: scans of a metric's rows, targeted reads of series, the series index, raw tables. Points
//! acknowledged but not in their rows yet (the series table's and a flush's under way, see [`super::pending`];
//! on a read-only open, the writer's series log, see `overlay`) are in every answer, merged into the rows read,
//! so no read waits for a flush on the embedded engine, and reads are served while a flush cannot be written (a
//! full disk). On HBase a read through a node writes the points it holds first (see `publish_if_shared`).
use super::*;

/// The points of one series read by [`Store::scan_series`].
#[derive(Debug, Clone)]
pub struct StoredSeries {
    /// Metric UID followed by the (tagk, tagv) UID pairs, as OpenTSDB's TSUID.
    pub tsuid: Tsuid,
    pub tags: Vec<(Vec<u8>, Vec<u8>)>,
    pub points: Vec<codec::RowPoint>,
    /// JSON of the annotations stored in the series' rows of the scanned hours (deleted ones left out).
    pub annotations: Vec<Vec<u8>>,
}

impl StoredSeries {
    /// The series of `tsuid` with nothing read yet: its (tagk, tagv) pairs split out by `layout`'s UID widths.
    pub fn of_tsuid(tsuid: &[u8], layout: &Layout) -> StoredSeries {
        StoredSeries {
            tsuid: tsuid.into(),
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
    /// The columns as stored: a compacted row may be packed, which [`codec::row_points`] reads as it is; readers
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

/// Which series a scan of a metric's rows keeps, asked once per series: the first row of a series met offers
/// it to the scan's `keep` and, if kept, adds it to the scan's output; its later rows find it there (or find it
/// left out) by their tags.
pub(super) struct SeriesSlots<'m> {
    metric: &'m [u8],
    /// Where the tags start in a row key.
    tags_offset: usize,
    /// A series' tags (its row keys' bytes from `tags_offset`) -> its index in the output, `None` if left out.
    index: std::collections::HashMap<Vec<u8>, Option<usize>>,
}

impl<'m> SeriesSlots<'m> {
    pub(super) fn new(metric: &'m [u8], tags_offset: usize) -> SeriesSlots<'m> {
        SeriesSlots { metric, tags_offset, index: std::collections::HashMap::new() }
    }

    /// The index in `out` of `row`'s series, `None` when `keep` left it out. A series met for the first time is
    /// offered to `keep`; if kept, `new` makes its entry of `out` from the series with nothing read yet.
    pub(super) fn slot<T, K>(
        &mut self,
        row: &RowRef<'_>,
        out: &mut Vec<T>,
        keep: &mut K,
        new: impl FnOnce(StoredSeries) -> T,
    ) -> Result<Option<usize>, StoreError>
    where
        K: FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError> + ?Sized,
    {
        let tags_bytes = &row.key[self.tags_offset..];
        if let Some(slot) = self.index.get(tags_bytes) {
            return Ok(*slot);
        }
        let slot = if keep(&row.tags)? {
            let mut tsuid = self.metric.to_vec();
            tsuid.extend_from_slice(tags_bytes);
            out.push(new(StoredSeries {
                tsuid: tsuid.into(),
                tags: row.tags.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                points: Vec::new(),
                annotations: Vec::new(),
            }));
            Some(out.len() - 1)
        } else {
            None
        };
        self.index.insert(tags_bytes.to_vec(), slot);
        Ok(slot)
    }
}

impl Store {
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
        self.publish_if_shared()?;
        // The series of points not in their rows yet, merged in TSUID order (see `unflushed_series`).
        let mut held = self.unflushed_series(metric).into_iter().peekable();
        let cut = self.retention.index_cut_ms();
        let mut f =
            move |tsuid: &[u8], hour: u32| !super::retention::Retention::lists_series(hour, cut) || f(tsuid, hour);
        let mut go = true;
        let mut indexed = |tsuid: &[u8], hour: u32| {
            while let Some((t, h)) = held.next_if(|(t, _)| t.as_slice() < tsuid) {
                if !f(&t, h) {
                    go = false;
                    return false;
                }
            }
            let hour = match held.next_if(|(t, _)| t.as_slice() == tsuid) {
                Some((_, h)) => hour.max(h),
                None => hour,
            };
            go = f(tsuid, hour);
            go
        };
        match metric {
            Some(m) => series::for_each_series_of_metric(self.engine.as_ref(), m, &mut indexed)?,
            None => series::for_each_series(self.engine.as_ref(), &mut indexed)?,
        }
        if go {
            for (t, h) in held {
                if !f(&t, h) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The series of a metric that carry one tag pair (from the postings).
    pub fn series_with_tag(&self, metric: &[u8], tagk: &[u8], tagv: &[u8]) -> Result<Vec<Tsuid>, StoreError> {
        self.series_with_tags(metric, tagk, &[tagv])
    }

    /// The series of a metric that carry `tagk` with any of `tagvs` (from the postings), sorted: a `literal_or`
    /// takes the unflushed rows' series once for all its values.
    pub fn series_with_tags(&self, metric: &[u8], tagk: &[u8], tagvs: &[&[u8]]) -> Result<Vec<Tsuid>, StoreError> {
        self.publish_if_shared()?;
        let held = if tagvs.is_empty() { Vec::new() } else { self.unflushed_series(Some(metric)) };
        let mut out = Vec::new();
        for tagv in tagvs {
            out.extend(series::series_with_tag(self.engine.as_ref(), metric, tagk, tagv)?);
        }
        let carries = |tsuid: &[u8]| self.layout.tsuid_pairs(tsuid).any(|(k, v)| k == tagk && tagvs.contains(&v));
        out.extend(held.into_iter().map(|(t, _)| t).filter(|t| carries(t)).map(Tsuid::from));
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The newest hour with data of a series, if indexed or among the points not in their rows yet.
    pub fn last_hour(&self, tsuid: &[u8]) -> Result<Option<u32>, StoreError> {
        self.publish_if_shared()?;
        // Compared in place, key by key: `last` queries ask this for each of a metric's series.
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let tags_at = sw + mw + codec::TIMESTAMP_BYTES;
        let mut held = None;
        let of_series = |key: &[u8]| {
            if tsuid.len() >= mw
                && key.len() >= tags_at
                && key[sw..sw + mw] == tsuid[..mw]
                && key[tags_at..] == tsuid[mw..]
            {
                held = held.max(Some(codec::row_base_time(key, sw, mw)));
            }
        };
        self.for_each_unflushed_key(of_series);
        let indexed = series::last_hour(self.engine.as_ref(), tsuid)?;
        Ok(indexed.max(held))
    }

    /// The series (TSUID, newest hour) of the points not in their rows yet, of `metric` or every metric, in
    /// TSUID order: the index gets their entries with their rows, so until then its readers take them from
    /// here, without waiting for the flush (a query right after a burst would wait for its last flush, 0.3-0.4 s
    /// on B). Taken before the index is read: a flush that writes rows meanwhile writes their entries too.
    /// Free when nothing waits.
    fn unflushed_series(&self, metric: Option<&[u8]>) -> Vec<(Vec<u8>, u32)> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let mut series: std::collections::BTreeMap<Vec<u8>, u32> = std::collections::BTreeMap::new();
        let add = |key: &[u8]| {
            if key.len() < sw + mw + codec::TIMESTAMP_BYTES || metric.is_some_and(|m| key[sw..sw + mw] != *m) {
                return;
            }
            let hour = codec::row_base_time(key, sw, mw);
            let newest = series.entry(self.layout.tsuid_of_row(key).as_bytes().to_vec()).or_insert(hour);
            *newest = (*newest).max(hour);
        };
        self.for_each_unflushed_key(add);
        series.into_iter().collect()
    }

    /// On a shared engine (HBase), writes the points this node holds into their rows before a read through it:
    /// once a read through the node that took them has returned them, every node (and OpenTSDB) reads them too
    /// (README: rtsd on HBase). Without a read they wait for `rtsd.storage.hbase.flush_ms`. The embedded engine
    /// has no other reader (read-only tools read its series log), so its reads never wait.
    fn publish_if_shared(&self) -> Result<(), StoreError> {
        if !self.node_local {
            self.settle()?;
        }
        Ok(())
    }

    /// Calls `f` with the key of every row holding points not in RocksDB yet (see
    /// [`PendingTable::unflushed_keys`](super::pending::PendingTable::unflushed_keys)); on a read-only open, the
    /// writer's from its series log (the overlay).
    fn for_each_unflushed_key(&self, mut f: impl FnMut(&[u8])) {
        if self.read_only {
            self.overlay.keys().for_each(|key| f(key));
        } else {
            self.pending.unflushed_keys(f);
        }
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
        // The raw points acknowledged but not in their rows yet (the series table's and a flush's under way),
        // joined in key order with the stored rows, so a scan does not wait for the flush. Taken before the
        // cursor: a slice written meanwhile is read twice (the same cells), never missed. Only raw points wait in
        // the series table; a rollup table's reader that needs the rollups of every raw point written folds first
        // or reads the rows not folded yet raw ([`Store::unfolded_rows`]).
        if family == CF_DATA {
            self.publish_if_shared()?;
        }
        static NONE: UnflushedRows = UnflushedRows::new();
        let taken;
        let unflushed_rows: &UnflushedRows = if family != CF_DATA {
            &NONE
        } else if self.read_only {
            &self.overlay
        } else {
            taken = self.unflushed_of_metric(metric);
            &taken
        };
        let Some(mut cursor) = self.engine.cursor(family, ReadHints::default()) else { return Ok(()) };
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
            let mut unflushed = unflushed_rows.range(start.clone()..).take_while(|(k, _)| in_range(k)).peekable();
            let mut emit = |key: &[u8], stored: Option<&[u8]>, extra: Option<&Vec<u8>>| {
                let Some(value) = self.with_unflushed(stored, extra) else { return Ok(true) };
                match self.decode_row(key, &value) {
                    Some(row) => f(row),
                    None => Ok(true),
                }
            };
            // Keys stop before the hour after `end_hour` (the last hour wraps to the next metric's prefix).
            let mut end = start[..prefix_len].to_vec();
            match end_hour.checked_add(1) {
                Some(next) => end.extend_from_slice(&next.to_be_bytes()),
                None => end = prefix_successor(end),
            }
            cursor.seek_until(&start, &end);
            while cursor.valid() {
                let (key, value) = (cursor.key(), cursor.value());
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
                cursor.next();
            }
            cursor.status()?;
            for (k, extra) in unflushed {
                if !emit(k, None, Some(extra))? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The points of the rows `keys` (sorted, distinct) not stored yet: the series table's and a flush's under
    /// way, or on a read-only open the writer's from its series log (see `Store::overlay`).
    fn unflushed_of(&self, keys: &[&[u8]]) -> UnflushedRows {
        if self.read_only {
            return keys.iter().filter_map(|k| self.overlay.get(*k).map(|v| (k.to_vec(), v.clone()))).collect();
        }
        self.pending.unflushed_of(keys)
    }

    /// The rows of `metric` holding points not in RocksDB yet, with those points (the series table's and a
    /// flush's under way): what scans join in and grid reads take their raw buckets from. The writer's only.
    pub(super) fn unflushed_of_metric(&self, metric: &[u8]) -> UnflushedRows {
        let at = self.layout.metric_at();
        self.pending.unflushed(|key| key.get(at.clone()) == Some(metric))
    }

    /// A row as readers see it: the stored value, with the row's points not stored yet merged in when there are
    /// any; `None` when neither exists.
    pub(super) fn with_unflushed<'v>(
        &self,
        stored: Option<&'v [u8]>,
        unflushed: Option<&Vec<u8>>,
    ) -> Option<std::borrow::Cow<'v, [u8]>> {
        match (stored, unflushed) {
            (stored, Some(extra)) => {
                Some(std::borrow::Cow::Owned(match codec::merge_row(stored, &[extra], self.fix_duplicates) {
                    Ok(merged) => merged.row,
                    Err(_) => [stored.unwrap_or_default(), extra].concat(),
                }))
            }
            (Some(stored), None) => Some(std::borrow::Cow::Borrowed(stored)),
            (None, None) => None,
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
        let start_ms = start_ms.max(self.retention.cut_ms(family));
        if end_ms <= start_ms {
            return Ok(Vec::new());
        }
        // Clamp to the last instant whose hour fits the row key's 32 bits, so an open-ended range cannot wrap.
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last));
        let end_hour = codec::base_time((end_ms - 1).clamp(0, last));
        let mut slots = SeriesSlots::new(metric, self.layout.tags_offset());
        let mut series: Vec<StoredSeries> = Vec::new();
        self.for_each_row_in(family, metric, start_hour, end_hour, |row| {
            if let Some(i) = slots.slot(&row, &mut series, &mut keep, |s| s)? {
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
        tsuids: &[Tsuid],
        start_ms: i64,
        end_ms: i64,
        budget: &mut ReadBudget,
    ) -> Result<Vec<StoredSeries>, StoreError> {
        let start_ms = start_ms.max(self.retention.cut_ms(CF_DATA));
        self.publish_if_shared()?;
        if end_ms <= start_ms || tsuids.is_empty() {
            return Ok(Vec::new());
        }
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last)) as i64;
        let end_hour = codec::base_time((end_ms - 1).clamp(0, last)) as i64;
        let mw = self.layout.uid_widths[0];
        let mut out = Vec::with_capacity(tsuids.len());
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> =
                (start_hour..=end_hour).step_by(3600).map(|hour| self.layout.row_key(tsuid, hour)).collect();
            let mut series = StoredSeries::of_tsuid(tsuid, &self.layout);
            let mut found = false;
            // Keys ascend by hour; values are read in place, not copied out.
            let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            // The rows' points not stored yet, merged in instead of waiting for the flush; taken before the rows
            // are read, so a slice written meanwhile is read twice (the same cells), never missed.
            let unflushed = self.unflushed_of(&key_refs);
            self.engine.get_many(CF_DATA, &key_refs, true, ReadHints::default(), &mut |i, stored| {
                let key = &keys[i];
                let Some(value) = self.with_unflushed(stored, unflushed.get(key)) else { return Ok(()) };
                let value: &[u8] = &value;
                found = true;
                let base = codec::row_base_time(key, self.layout.salt.width, mw);
                let points = codec::row_points(base, value)
                    .map_err(|e| StoreError::Corrupt(format!("row {}: {e}", codec::uid_to_string(key))))?;
                budget.charge(points.len(), codec::expanded_len(value))?;
                series
                    .points
                    .extend(points.into_iter().filter(|p| p.timestamp_ms >= start_ms && p.timestamp_ms < end_ms));
                series.annotations.extend(annotation_values(value));
                Ok(())
            })?;
            if found {
                out.push(series);
            }
        }
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

    /// Calls `f` with each (key, value) of table `cf` from `from` on, in key order, until it returns false.
    pub fn scan_raw(&self, cf: &str, from: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<(), StoreError> {
        let Some(mut cursor) = self.engine.cursor(cf, ReadHints::default()) else { return Ok(()) };
        cursor.seek(from);
        while cursor.valid() {
            if !f(cursor.key(), cursor.value()) {
                return Ok(());
            }
            cursor.next();
        }
        cursor.status()
    }
}

/// The first key after every key that starts with `prefix` (empty: no such key, the scan runs to the end).
fn prefix_successor(mut prefix: Vec<u8>) -> Vec<u8> {
    while let Some(last) = prefix.pop() {
        if last < 0xFF {
            prefix.push(last + 1);
            return prefix;
        }
    }
    prefix
}
