//! Reads of rollups: rtsd's own rows (`<table>:a`) and OpenTSDB's cells, per series or per metric.
use super::*;
use crate::store::read::SeriesSlots;
use crate::store::ReadBudget;

/// The row base times of `interval` from `first` to `last` (inclusive).
pub(super) fn bases_from(interval: &RollupInterval, first: u32, last: u32) -> Vec<u32> {
    let mut bases = vec![first];
    while let Some(&b) = bases.last().filter(|&&b| b < last) {
        let next = interval.next_base_time(b);
        if next <= b {
            break;
        }
        bases.push(next);
    }
    bases
}

/// From how many series a targeted rollup read goes over two threads (a thread costs tens of microseconds; a
/// series' day of one-minute rollups about as much to read).
pub(super) const SPLIT_SERIES: usize = 8;

/// Reads two halves side by side: `earlier` on this thread with `budget`, `later` on another with a fork of it,
/// whose reads are added back ([`ReadBudget::join`]) when it succeeds. Both results are returned: each caller
/// reports the halves' errors in its own order.
pub(super) fn read_halves<A, B: Send>(
    budget: &mut ReadBudget,
    earlier: impl FnOnce(&mut ReadBudget) -> Result<A, StoreError>,
    later: impl FnOnce(&mut ReadBudget) -> Result<B, StoreError> + Send,
) -> (Result<A, StoreError>, Result<B, StoreError>) {
    let (earlier, later) = std::thread::scope(|scope| {
        let mut forked = budget.fork();
        let later = scope.spawn(move || later(&mut forked).map(|r| (r, forked)));
        let earlier = earlier(budget);
        (earlier, later.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    let later = later.and_then(|(r, forked)| budget.join(forked).map(|()| r));
    (earlier, later)
}

/// Decides from a series' (tag key UID, tag value UID) pairs whether a read keeps it.
pub type Keep<'a> = dyn FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError> + 'a;

/// Rollup series as a read returns them: those with cells, each list in time order, in TSUID order.
pub(super) fn finish_rollup_series(mut out: Vec<RollupSeries>) -> Vec<RollupSeries> {
    out.retain(|s| s.values.iter().any(|v| !v.is_empty()));
    for s in &mut out {
        for v in &mut s.values {
            // Rows come in time order and cells by offset, so this is nearly always sorted already.
            if !v.is_sorted_by_key(|(ts, _)| *ts) {
                v.sort_by_key(|(ts, _)| *ts);
            }
        }
    }
    out.sort_by(|a, b| a.series.tsuid.cmp(&b.series.tsuid));
    out
}

/// How many buckets of `interval` a series can have in `[start_ms, end_ms)`: the capacity its cell lists start
/// with (bounded, so a long range costs no more than growing would).
pub(super) fn expected_buckets(interval: &RollupInterval, start_ms: i64, end_ms: i64) -> usize {
    let width = i64::from(interval.interval_secs.max(1)) * 1000;
    usize::try_from((end_ms - start_ms) / width + 1).unwrap_or(0).min(1 << 16)
}

/// Decodes the cells of aggregators `ids` in one rollup row into `values` (one list per ID), keeping buckets
/// with `start_ms <= t < end_ms` that `shadow` (a bitmap of slots, see `rollup_rows`) does not hide; returns
/// how many.
#[allow(clippy::too_many_arguments)]
pub(super) fn rollup_cells(
    key: &[u8],
    row: &[u8],
    base: u32,
    interval: &RollupInterval,
    ids: &[u8],
    start_ms: i64,
    end_ms: i64,
    shadow: &[u8],
    values: &mut [Vec<(i64, Value)>],
) -> Result<usize, StoreError> {
    let corrupt = |e: codec::CodecError| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key)));
    let mut cells = 0usize;
    // The merge operator keeps a row's cells sorted by aggregator ID first (`cell_order`): past the last ID
    // asked for nothing more is wanted (reading sum and count skips the min and max cells).
    let last_wanted = ids.iter().copied().filter(|id| id & 0x80 == 0).max();
    for column in codec::columns(row) {
        let column = column.map_err(corrupt)?;
        let q = column.qualifier;
        // Rollup cells only: aggregator ID, then (offset << 4 | flags); compacted columns (high bit of the first
        // byte, sorted after every ID) are not written by rtsd.
        if q.len() != 3 || q[0] & 0x80 != 0 {
            continue;
        }
        if last_wanted.is_none_or(|last| q[0] > last) {
            break;
        }
        let Some(which) = ids.iter().position(|&id| id == q[0]) else { continue };
        if column.value.is_empty() {
            // A deleted cell (see `merge_partial`).
            continue;
        }
        let packed = u16::from_be_bytes([q[1], q[2]]);
        let slot = usize::from(packed >> 4);
        if shadow.get(slot / 8).is_some_and(|b| b & (1 << (slot % 8)) != 0) {
            // A bucket rtsd computed (see `rollup_rows`).
            continue;
        }
        let ts = (i64::from(base) + i64::from(packed >> 4) * i64::from(interval.interval_secs)) * 1000;
        if ts < start_ms || ts >= end_ms {
            continue;
        }
        let v = Value::decode((packed & 0x0F) as u8, column.value).map_err(corrupt)?;
        values[which].push((ts, v));
        cells += 1;
    }
    Ok(cells)
}

impl Store {
    /// The values of aggregators `ids` in one row of a rollup table (buckets in `[start_ms, end_ms)`): those rtsd
    /// computed (`auto`, the `<table>:a` row) and, for buckets it did not, the table's cells (`table`). Returns
    /// the values read and the bytes of the rows; `None` when neither row exists.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rollup_values(
        &self,
        key: &[u8],
        auto: Option<&[u8]>,
        table: Option<&[u8]>,
        base: u32,
        interval: &RollupInterval,
        ids: &[u8],
        start_ms: i64,
        end_ms: i64,
        values: &mut [Vec<(i64, Value)>],
    ) -> Result<Option<(usize, usize)>, StoreError> {
        if auto.is_none() && table.is_none() {
            return Ok(None);
        }
        let (mut cells, mut bytes, mut shadow) = (0, 0, &[][..]);
        if let Some(row) = auto {
            let view = self.auto_row(key, row)?;
            cells += self.auto_cells(key, &view, base, interval, ids, start_ms, end_ms, values)?;
            bytes += row.len();
            shadow = view.known_bitmap();
        }
        if let Some(row) = table {
            cells += rollup_cells(key, row, base, interval, ids, start_ms, end_ms, shadow, values)?;
            bytes += row.len();
        }
        Ok(Some((cells, bytes)))
    }

    pub(super) fn auto_row<'a>(&self, key: &[u8], row: &'a [u8]) -> Result<RowView<'a>, StoreError> {
        RowView::new(row).map_err(|e| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key))))
    }

    /// Appends the values of aggregators `ids` in an `<table>:a` row (buckets in `[start_ms, end_ms)`) to
    /// `values` (one list per ID); returns how many.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn auto_cells(
        &self,
        key: &[u8],
        view: &RowView<'_>,
        base: u32,
        interval: &RollupInterval,
        ids: &[u8],
        start_ms: i64,
        end_ms: i64,
        values: &mut [Vec<(i64, Value)>],
    ) -> Result<usize, StoreError> {
        let mut cells = 0;
        // The bucket start of each value (the present slots), once for every column.
        let (base_ms, width) = (i64::from(base) * 1000, i64::from(interval.interval_secs) * 1000);
        let mut starts: smallvec::SmallVec<[i64; 64]> = smallvec::SmallVec::with_capacity(view.k);
        view.for_each_present(|slot, _| starts.push(base_ms + slot as i64 * width));
        for (which, id) in ids.iter().enumerate() {
            let Some(c) = self.rollups.auto_ids.iter().position(|a| a == id) else { continue };
            let column = view
                .column(c)
                .map_err(|e| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key))))?;
            let out = &mut values[which];
            if starts.first().is_some_and(|&t| t >= start_ms) && starts.last().is_some_and(|&t| t < end_ms) {
                // The whole row is in range (all but a read's first and last rows).
                column.extend_timed(&starts, out);
                cells += starts.len();
                continue;
            }
            column.for_each(|j, v| {
                let ts = starts[j];
                if ts >= start_ms && ts < end_ms {
                    out.push((ts, v));
                    cells += 1;
                }
            });
        }
        Ok(cells)
    }

    /// Reads the cells of aggregators `ids` from rollup table `family` for the given series (TSUIDs of one
    /// metric) or, with `None`, every series of `metric` that `keep` accepts; buckets with `start_ms <= t <
    /// end_ms`. A series without any cell in the range is left out.
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut crate::store::ReadBudget,
        mut keep: impl FnMut(&[(&[u8], &[u8])]) -> Result<bool, StoreError>,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let Some((start_ms, bases)) = self.rollup_range(family, interval, start_ms, end_ms) else {
            return Ok(Vec::new());
        };
        let out = self.rollup_rows(family, interval, ids, metric, bases, (start_ms, end_ms), budget, &mut keep)?;
        Ok(finish_rollup_series(out))
    }

    /// [`Store::read_rollup`] of every series of the metric, with the rows read in two halves side by side
    /// (decoding cells is most of a wide query's time; with every series kept, the halves need no shared
    /// selection).
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup_all(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut crate::store::ReadBudget,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let Some((start_ms, (first_base, last_base))) = self.rollup_range(family, interval, start_ms, end_ms) else {
            return Ok(Vec::new());
        };
        let middle = interval.base_time((i64::from(first_base) + i64::from(last_base)) / 2 + 1);
        if middle <= first_base || middle > last_base {
            let out = self.rollup_rows(
                family,
                interval,
                ids,
                metric,
                (first_base, last_base),
                (start_ms, end_ms),
                budget,
                &mut |_| Ok(true),
            )?;
            return Ok(finish_rollup_series(out));
        }
        let range = (start_ms, end_ms);
        let (earlier, later) = read_halves(
            budget,
            |budget| {
                self.rollup_rows(family, interval, ids, metric, (first_base, middle - 1), range, budget, &mut |_| {
                    Ok(true)
                })
            },
            |forked| {
                self.rollup_rows(family, interval, ids, metric, (middle, last_base), range, forked, &mut |_| Ok(true))
            },
        );
        let mut out = earlier?;
        let later = later?;
        let mut at: HashMap<Tsuid, usize> = out.iter().enumerate().map(|(i, s)| (s.series.tsuid.clone(), i)).collect();
        for s in later {
            match at.get(&s.series.tsuid) {
                Some(&i) => {
                    for (into, more) in out[i].values.iter_mut().zip(s.values) {
                        into.extend(more);
                    }
                }
                None => {
                    at.insert(s.series.tsuid.clone(), out.len());
                    out.push(s);
                }
            }
        }
        Ok(finish_rollup_series(out))
    }

    /// Whether rollup table `family` has any row of `metric` with a base time in `[first_base, last_base]`.
    pub(super) fn any_row_in(
        &self,
        family: &str,
        metric: &[u8],
        first_base: u32,
        last_base: u32,
    ) -> Result<bool, StoreError> {
        let mut any = false;
        self.for_each_row_in(family, metric, first_base, last_base, |_| {
            any = true;
            Ok(false)
        })?;
        Ok(any)
    }

    /// The start (ms, moved up to the table's retention) and the first and last row base times of a rollup
    /// read; `None` when nothing can be read.
    pub(super) fn rollup_range(
        &self,
        family: &str,
        interval: &RollupInterval,
        start_ms: i64,
        end_ms: i64,
    ) -> Option<(i64, (u32, u32))> {
        let start_ms = start_ms.max(self.retention.cut_ms(family));
        if end_ms <= start_ms {
            return None;
        }
        let start_s = start_ms.div_euclid(1000).max(0);
        let end_s = (end_ms - 1).div_euclid(1000).clamp(0, codec::MAX_SECONDS);
        Some((start_ms, (interval.base_time(start_s), interval.base_time(end_s))))
    }

    /// The rollup series of the rows with base times in `bases` (inclusive), in the order first met, their cells
    /// in `[start_ms, end_ms)`; `keep` decides on each series once.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rollup_rows(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        (first_base, last_base): (u32, u32),
        (start_ms, end_ms): (i64, i64),
        budget: &mut crate::store::ReadBudget,
        keep: &mut Keep<'_>,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let mut slots = SeriesSlots::new(metric, self.layout.tags_offset());
        let mut out: Vec<RollupSeries> = Vec::new();
        let expected = expected_buckets(interval, start_ms, end_ms);
        let auto_family = RollupInterval::auto_family(family);
        // The buckets of `<table>:a` rows, by key, hide the table's cells for them: kept only when the table has
        // rows here (a directory written before `:a` existed, or rollup points written by clients).
        let table_rows = self.any_row_in(family, metric, first_base, last_base)?;
        let mut shadows: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for auto in [true, false] {
            if !auto && !table_rows {
                break;
            }
            self.for_each_row_in(if auto { &auto_family } else { family }, metric, first_base, last_base, |row| {
                let new = |series| RollupSeries {
                    series,
                    values: (0..ids.len()).map(|_| Vec::with_capacity(expected)).collect(),
                };
                let Some(i) = slots.slot(&row, &mut out, keep, new)? else {
                    budget.rows_skipped += 1;
                    return Ok(true);
                };
                let values = &mut out[i].values;
                let cells = if auto {
                    let view = self.auto_row(row.key, row.value)?;
                    if table_rows {
                        shadows.insert(row.key.to_vec(), view.known_bitmap().to_vec());
                    }
                    self.auto_cells(row.key, &view, row.base_time, interval, ids, start_ms, end_ms, values)?
                } else {
                    let shadow = shadows.get(row.key).map_or(&[][..], Vec::as_slice);
                    rollup_cells(row.key, row.value, row.base_time, interval, ids, start_ms, end_ms, shadow, values)?
                };
                budget.charge(cells, row.value.len())?;
                Ok(true)
            })?;
        }
        Ok(out)
    }

    /// [`Store::read_rollup`] for the given series only (TSUIDs of one metric, sorted): fetches exactly their
    /// rows, as a query with literal tag filters does on raw data.
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup_series(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        tsuids: &[Tsuid],
        start_ms: i64,
        end_ms: i64,
        budget: &mut crate::store::ReadBudget,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        // Several series: read in two halves side by side, as an unfiltered read is (the halves keep TSUID order).
        if tsuids.len() >= SPLIT_SERIES {
            let (earlier, later) = tsuids.split_at(tsuids.len() / 2);
            let (out, later) = read_halves(
                budget,
                |budget| self.read_rollup_series_in(family, interval, ids, earlier, start_ms, end_ms, budget),
                |forked| self.read_rollup_series_in(family, interval, ids, later, start_ms, end_ms, forked),
            );
            let later = later?;
            let mut out = out?;
            out.extend(later);
            return Ok(out);
        }
        self.read_rollup_series_in(family, interval, ids, tsuids, start_ms, end_ms, budget)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_rollup_series_in(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        tsuids: &[Tsuid],
        start_ms: i64,
        end_ms: i64,
        budget: &mut crate::store::ReadBudget,
    ) -> Result<Vec<RollupSeries>, StoreError> {
        let auto_family = RollupInterval::auto_family(family);
        let (has_table, has_auto) = (self.engine.has_table(family), self.engine.has_table(&auto_family));
        if !has_table && !has_auto {
            return Ok(Vec::new());
        }
        let start_ms = start_ms.max(self.retention.cut_ms(family));
        if end_ms <= start_ms || tsuids.is_empty() {
            return Ok(Vec::new());
        }
        let start_s = start_ms.div_euclid(1000).max(0);
        let end_s = (end_ms - 1).div_euclid(1000).clamp(0, codec::MAX_SECONDS);
        let bases = bases_from(interval, interval.base_time(start_s), interval.base_time(end_s));
        let mut out = Vec::new();
        let expected = expected_buckets(interval, start_ms, end_ms);
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> = bases.iter().map(|&b| self.layout.row_key(tsuid, i64::from(b))).collect();
            let mut series = RollupSeries {
                series: StoredSeries::of_tsuid(tsuid, &self.layout),
                values: (0..ids.len()).map(|_| Vec::with_capacity(expected)).collect(),
            };
            // Keys ascend by base time. The table's cells (rows OpenTSDB or a client wrote; usually none) are
            // copied out, rtsd's own rows are read in place.
            let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let mut tables: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
            if has_table {
                self.engine.get_many(family, &key_refs, true, ReadHints::default(), &mut |i, row| {
                    tables[i] = row.map(<[u8]>::to_vec);
                    Ok(())
                })?;
            }
            let mut visit = |i: usize, auto: Option<&[u8]>| {
                let values = &mut series.values;
                let table = tables[i].as_deref();
                if let Some((cells, bytes)) =
                    self.rollup_values(&keys[i], auto, table, bases[i], interval, ids, start_ms, end_ms, values)?
                {
                    budget.charge(cells, bytes)?;
                }
                Ok(())
            };
            if has_auto {
                self.engine.get_many(&auto_family, &key_refs, true, ReadHints::default(), &mut visit)?;
            } else {
                (0..keys.len()).try_for_each(|i| visit(i, None))?;
            }
            if series.values.iter().any(|v| !v.is_empty()) {
                for v in &mut series.values {
                    if !v.is_sorted_by_key(|(ts, _)| *ts) {
                        v.sort_by_key(|(ts, _)| *ts);
                    }
                }
                out.push(series);
            }
        }
        Ok(out)
    }
}
