//! Grid reads: a metric's rollups read straight onto a common time grid, for the aggregators that can use it.
use super::*;

/// A grid read's buffers for one row's columns, reused from row to row.
#[derive(Default)]
pub(super) struct RowBuffers {
    pub(super) decoded: [Vec<f64>; COLUMNS],
    pub(super) staged: Vec<f64>,
}

/// What a grid read reads, and onto which grid.
pub(super) struct GridRead<'a> {
    /// The `<table>:a` column family.
    pub(super) family: &'a str,
    pub(super) metric: &'a [u8],
    pub(super) first_ms: i64,
    pub(super) step_ms: i64,
    /// Buckets of the grid: those starting in the read's `[start_ms, end_ms)`.
    pub(super) len: usize,
    /// The columns (sum, count, min, max) to decode.
    pub(super) columns: [bool; COLUMNS],
    /// Values charged to the budget per bucket read (the cells the general read would decode).
    pub(super) charged: usize,
}

impl GridRead<'_> {
    /// Where the grid's last bucket ends.
    pub(super) fn end_ms(&self) -> i64 {
        self.first_ms + self.len as i64 * self.step_ms
    }
}

/// Sets bits `range` of a bitmap (bit `i` at bit `i % 64` of word `i / 64`), a word at a time.
pub(super) fn set_bits(bits: &mut [u64], range: std::ops::Range<usize>) {
    let mut i = range.start;
    while i < range.end {
        let (w, from) = (i / 64, i % 64);
        let to = (range.end - w * 64).min(64);
        bits[w] |= (!0u64 >> (64 - (to - from))) << from;
        i = w * 64 + to;
    }
}

/// Writes `values` at `at` of a series' grid values, which are written in time order: usually appended, after
/// zeros for buckets the series does not have.
pub(super) fn put_values(into: &mut Vec<f64>, at: usize, values: &[f64]) {
    if into.len() < at {
        into.resize(at, 0.0);
    }
    if into.len() == at {
        into.extend_from_slice(values);
    } else {
        // Not reached: a series' rows come in time order.
        if into.len() < at + values.len() {
            into.resize(at + values.len(), 0.0);
        }
        into[at..at + values.len()].copy_from_slice(values);
    }
}

impl Store {
    /// [`Store::read_rollup`] (with `keep` `None`: of every series, in two halves side by side as
    /// [`Store::read_rollup_all`]) onto a grid of the table's buckets, for a downsample of the table's own
    /// interval: each series' bucket `i` (starting `first_ms + i * step_ms`) holds the value `stage_row` computes for
    /// it from the bucket's (sum, count, min, max) as doubles: given a row's columns (only those of `ids` decoded,
    /// the others empty) and which of them hold integers, it replaces its last argument by one value per present
    /// slot. One array per
    /// series instead of a list of timed values per aggregator: a day of 1000 series' one-minute buckets is
    /// 11 MB of doubles rather than 70 MB of cells. Budget and statistics are charged as the cell read charges
    /// them.
    ///
    /// `unfolded` lists raw rows of the metric not folded yet ([`Store::unfolded_rows`]): their hours' buckets
    /// come from their raw points (stored, and not flushed yet), computed as the fold computes them, so the grid
    /// holds what it would hold after the fold and the flush without waiting for either.
    ///
    /// `None` when only the general read can answer: the table is not one rtsd computes, its rows do not start
    /// on bucket boundaries, it holds cells of its own in the range (rollups written by clients, or by an rtsd
    /// from before `:a` rows), which that read merges, or a row's points not flushed yet differ from its stored
    /// ones at one instant (that read folds, after the flush).
    #[allow(clippy::too_many_arguments)]
    pub fn read_rollup_grid<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>) + Sync>(
        &self,
        family: &str,
        interval: &RollupInterval,
        ids: &[u8],
        metric: &[u8],
        start_ms: i64,
        end_ms: i64,
        budget: &mut crate::store::ReadBudget,
        mut select: GridSelect<'_, '_>,
        unfolded: &Unfolded,
        stage_row: &F,
    ) -> Result<Option<RollupGrid>, StoreError> {
        let auto_family = RollupInterval::auto_family(family);
        let span_unit: u32 = if matches!(interval.row_span, RowSpan::Hours(_)) { 3600 } else { 86_400 };
        let step_ms = i64::from(interval.interval_secs) * 1000;
        if !self.engine.has_table(&auto_family) || step_ms <= 0 || !span_unit.is_multiple_of(interval.interval_secs) {
            return Ok(None);
        }
        let Some((start_ms, (first_base, last_base))) = self.rollup_range(family, interval, start_ms, end_ms) else {
            return Ok(Some(RollupGrid { first_ms: start_ms, step_ms, series: Vec::new() }));
        };
        if self.any_row_in(family, metric, first_base, last_base)? {
            return Ok(None);
        }
        let first_ms =
            start_ms.div_euclid(step_ms) * step_ms + if start_ms.rem_euclid(step_ms) == 0 { 0 } else { step_ms };
        let len = usize::try_from((end_ms - first_ms + step_ms - 1).div_euclid(step_ms)).unwrap_or(0);
        let read = GridRead {
            family: &auto_family,
            metric,
            first_ms,
            step_ms,
            len,
            columns: self.rollups.auto_ids.map(|a| ids.contains(&a)),
            charged: ids.iter().filter(|id| self.rollups.auto_ids.contains(id)).count(),
        };
        let middle = interval.base_time((i64::from(first_base) + i64::from(last_base)) / 2 + 1);
        let started = std::time::Instant::now();
        let mut series = match &mut select {
            GridSelect::Series(tsuids) => {
                let tsuids: &[Tsuid] = tsuids;
                // Fetched by key, as `read_rollup_series` does, several series in two halves side by side.
                let bases = bases_from(interval, first_base, last_base);
                let read = &read;
                if tsuids.len() >= SPLIT_SERIES {
                    let (earlier, later) = tsuids.split_at(tsuids.len() / 2);
                    let bases = &bases;
                    let (out, later) = read_halves(
                        budget,
                        |budget| self.grid_series(read, bases, earlier, budget, stage_row),
                        |forked| self.grid_series(read, bases, later, forked, stage_row),
                    );
                    let later = later?;
                    let mut out = out?;
                    out.extend(later);
                    out
                } else {
                    self.grid_series(read, &bases, tsuids, budget, stage_row)?
                }
            }
            GridSelect::Keep(keep) => {
                self.grid_rows(&read, (first_base, last_base), (0, len), budget, &mut **keep, stage_row)?
            }
            GridSelect::All if middle <= first_base || middle > last_base => {
                self.grid_rows(&read, (first_base, last_base), (0, len), budget, &mut |_| Ok(true), stage_row)?
            }
            GridSelect::All => {
                // Buckets from `split` on come from the later half's rows.
                let split =
                    usize::try_from((i64::from(middle) * 1000 - first_ms).div_euclid(step_ms)).unwrap_or(0).min(len);
                let read = &read;
                // Each half's time (us), for the debug line below.
                let took = [AtomicU64::new(0), AtomicU64::new(0)];
                let timed = |half: usize, started: std::time::Instant| {
                    took[half].store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                };
                let (earlier, later) = read_halves(
                    budget,
                    |budget| {
                        let t = std::time::Instant::now();
                        let all: &mut Keep<'_> = &mut |_| Ok(true);
                        let r = self.grid_rows(read, (first_base, middle - 1), (0, split), budget, all, stage_row);
                        timed(0, t);
                        r
                    },
                    |forked| {
                        let t = std::time::Instant::now();
                        let all: &mut Keep<'_> = &mut |_| Ok(true);
                        let r = self.grid_rows(read, (middle, last_base), (split, len), forked, all, stage_row);
                        timed(1, t);
                        r
                    },
                );
                tracing::debug!(
                    earlier_ms = took[0].load(Ordering::Relaxed) as f64 / 1e3,
                    later_ms = took[1].load(Ordering::Relaxed) as f64 / 1e3,
                    "grid read: halves"
                );
                let mut out = earlier?;
                let later = later?;
                let at: HashMap<Tsuid, usize> =
                    out.iter().enumerate().map(|(i, s)| (s.series.tsuid.clone(), i)).collect();
                let mut added = Vec::new();
                for s in later {
                    match at.get(&s.series.tsuid) {
                        Some(&i) => {
                            let into = &mut out[i];
                            into.values.extend_from_slice(&s.values);
                            into.present.iter_mut().zip(&s.present).for_each(|(a, b)| *a |= b);
                            into.cells += s.cells;
                        }
                        None => {
                            let mut values = vec![0.0; split];
                            values.extend_from_slice(&s.values);
                            added.push(GridSeries { values, ..s });
                        }
                    }
                }
                for s in &mut out {
                    s.values.resize(len, 0.0);
                }
                out.extend(added);
                out
            }
        };
        // Where a grid read's time goes (issue 22 item 5: the first query after a burst): the rollup rows, then
        // the rows not folded yet.
        let rollups_ms = started.elapsed().as_secs_f64() * 1e3;
        if !unfolded.rows.is_empty()
            && !self.grid_unfolded(
                &read,
                interval.interval_secs,
                unfolded,
                &mut series,
                &mut select,
                stage_row,
                budget,
            )?
        {
            return Ok(None);
        }
        tracing::debug!(
            rollups_ms,
            unfolded_ms = started.elapsed().as_secs_f64() * 1e3 - rollups_ms,
            unfolded = unfolded.rows.len(),
            "grid read"
        );
        series.retain(|s| s.cells > 0);
        series.sort_by(|a, b| a.series.tsuid.cmp(&b.series.tsuid));
        Ok(Some(RollupGrid { first_ms, step_ms, series }))
    }

    /// The series of `read.family`'s rows with base times in `bases` (inclusive), their buckets `[lo, hi)` of the
    /// grid filled (`values` holds those buckets only, from `lo`; `present` is the whole grid's); `keep` decides
    /// on each series once.
    pub(super) fn grid_rows<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        (first_base, last_base): (u32, u32),
        (lo, hi): (usize, usize),
        budget: &mut crate::store::ReadBudget,
        keep: &mut Keep<'_>,
        stage_row: &F,
    ) -> Result<Vec<GridSeries>, StoreError> {
        let tags_offset = self.layout.tags_offset();
        // The series met, in the order met (tags, index in `out` if kept), and where each is in that order. The
        // rows of each base time come in TSUID order, the same series as the previous base time's: the series
        // after the previous row's is nearly always this row's, found without hashing.
        let mut met: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut cursor = 0;
        let mut out: Vec<GridSeries> = Vec::new();
        let mut buffers = RowBuffers::default();
        self.for_each_row_in(read.family, read.metric, first_base, last_base, |row| {
            let tags_bytes = &row.key[tags_offset..];
            let at = match met.get(cursor) {
                Some((tags, _)) if tags.as_slice() == tags_bytes => Some(cursor),
                _ => index.get(tags_bytes).copied(),
            };
            let slot = match at {
                Some(at) => {
                    cursor = at + 1;
                    met[at].1
                }
                None => {
                    let slot = if keep(&row.tags)? {
                        let mut tsuid = read.metric.to_vec();
                        tsuid.extend_from_slice(tags_bytes);
                        out.push(GridSeries {
                            series: StoredSeries {
                                tsuid: tsuid.into(),
                                tags: row.tags.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect(),
                                points: Vec::new(),
                                annotations: Vec::new(),
                            },
                            // Room for the later half's buckets too, appended when the halves are joined.
                            values: Vec::with_capacity(read.len - lo),
                            present: vec![0; read.len.div_ceil(64)],
                            cells: 0,
                        });
                        Some(out.len() - 1)
                    } else {
                        None
                    };
                    index.insert(tags_bytes.to_vec(), met.len());
                    met.push((tags_bytes.to_vec(), slot));
                    cursor = met.len();
                    slot
                }
            };
            let Some(i) = slot else {
                budget.rows_skipped += 1;
                return Ok(true);
            };
            self.grid_row(
                read,
                row.key,
                row.base_time,
                row.value,
                &mut out[i],
                (lo, hi),
                &mut buffers,
                stage_row,
                budget,
            )?;
            Ok(true)
        })?;
        for s in &mut out {
            s.values.resize(hi - lo, 0.0);
        }
        Ok(out)
    }

    /// The given series (TSUIDs of the read's metric), their rows fetched by key (`bases`: the row base times).
    pub(super) fn grid_series<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        bases: &[u32],
        tsuids: &[Tsuid],
        budget: &mut crate::store::ReadBudget,
        stage_row: &F,
    ) -> Result<Vec<GridSeries>, StoreError> {
        let mut buffers = RowBuffers::default();
        let mut out = Vec::with_capacity(tsuids.len());
        for tsuid in tsuids {
            let keys: Vec<Vec<u8>> = bases.iter().map(|&b| self.layout.row_key(tsuid, i64::from(b))).collect();
            let mut s = GridSeries {
                series: StoredSeries::of_tsuid(tsuid, &self.layout),
                values: Vec::with_capacity(read.len),
                present: vec![0; read.len.div_ceil(64)],
                cells: 0,
            };
            // Keys ascend by base time; rows are read in place, not copied out.
            let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            self.engine.get_many(read.family, &key_refs, true, ReadHints::default(), &mut |i, row| match row {
                Some(row) => {
                    self.grid_row(read, &keys[i], bases[i], row, &mut s, (0, read.len), &mut buffers, stage_row, budget)
                }
                None => Ok(()),
            })?;
            s.values.resize(read.len, 0.0);
            out.push(s);
        }
        Ok(out)
    }

    /// Reads one `:a` row of a series onto its grid buckets `[lo, hi)` (see [`Store::read_rollup_grid`]) and
    /// charges it to the budget.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn grid_row<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        key: &[u8],
        base_time: u32,
        value: &[u8],
        s: &mut GridSeries,
        (lo, hi): (usize, usize),
        buffers: &mut RowBuffers,
        stage_row: &F,
        budget: &mut crate::store::ReadBudget,
    ) -> Result<(), StoreError> {
        let view = self.auto_row(key, value)?;
        let mut integral = [false; COLUMNS];
        for (c, column) in buffers.decoded.iter_mut().enumerate() {
            if read.columns[c] {
                let corrupt = |e| StoreError::Corrupt(format!("rollup row {}: {e}", codec::uid_to_string(key)));
                let view = view.column(c).map_err(corrupt)?;
                view.decode_f64(column);
                integral[c] = view.is_integral();
            }
        }
        stage_row(&buffers.decoded, integral, &mut buffers.staged);
        if buffers.staged.len() != view.k {
            return Err(StoreError::Corrupt(format!("rollup row {}: columns missing", codec::uid_to_string(key))));
        }
        // Rows start on bucket boundaries (checked by the caller): slot `i` is bucket `row_first + i`, and the
        // grid's buckets are those in `[start_ms, end_ms)`.
        let row_first = (i64::from(base_time) * 1000 - read.first_ms).div_euclid(read.step_ms);
        let (lo, hi) = (lo as i64, hi as i64);
        let mut cells = 0;
        if view.k == view.n && row_first >= lo && row_first + view.n as i64 <= hi {
            // Every slot present and read (a row of a series that reported all along): one copy.
            let (from, to) = ((row_first - lo) as usize, row_first as usize);
            put_values(&mut s.values, from, &buffers.staged[..view.k]);
            set_bits(&mut s.present, to..to + view.k);
            cells = view.k;
        } else {
            view.for_each_present(|slot, j| {
                let b = row_first + slot as i64;
                if b < lo || b >= hi {
                    // Outside the read (or, not reached, outside this half: the halves split on a row boundary).
                    return;
                }
                let b = b as usize;
                put_values(&mut s.values, b - lo as usize, &buffers.staged[j..j + 1]);
                s.present[b / 64] |= 1 << (b % 64);
                cells += 1;
            });
        }
        s.cells += cells;
        budget.charge(cells * read.charged, value.len())
    }

    /// Puts the buckets of the raw rows `rows` (of the read's metric, not folded yet, in key order) onto the
    /// grid in place of what the rollup rows gave for their hours: each row's buckets computed from its points
    /// as the fold computes them ([`buckets`]) and staged as `stage_row` stages a rollup row's columns, so the
    /// values are bit for bit those of a read after the fold. A series only these rows have is added when
    /// `select` takes it. Rows are read on every core when there are many (right after a burst, thousands).
    #[allow(clippy::too_many_arguments)]
    fn grid_unfolded<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>) + Sync>(
        &self,
        read: &GridRead<'_>,
        interval_secs: u32,
        unfolded: &Unfolded,
        series: &mut Vec<GridSeries>,
        select: &mut GridSelect<'_, '_>,
        stage_row: &F,
        budget: &mut crate::store::ReadBudget,
    ) -> Result<bool, StoreError> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let grid_end = read.end_ms();
        let rows: Vec<&[u8]> = unfolded
            .rows
            .iter()
            .map(Vec::as_slice)
            .filter(|row| {
                let hour_ms = i64::from(codec::row_base_time(row, sw, mw)) * 1000;
                hour_ms < grid_end && hour_ms + 3_600_000 > read.first_ms
            })
            .collect();
        // The series the selection takes, decided before any raw row is read: those the rollup rows gave, and of
        // the others those `select` takes (decided once each).
        let mut at: HashMap<Tsuid, usize> =
            series.iter().enumerate().map(|(i, s)| (s.series.tsuid.clone(), i)).collect();
        let mut left_out: std::collections::HashSet<Tsuid> = std::collections::HashSet::new();
        let mut taken = Vec::with_capacity(rows.len());
        for row in rows {
            let tsuid = self.layout.tsuid_of_row(row);
            if at.contains_key(&tsuid) {
                taken.push(row);
                continue;
            }
            if left_out.contains(&tsuid) {
                budget.rows_skipped += 1;
                continue;
            }
            let take = match select {
                GridSelect::Series(tsuids) => tsuids.binary_search(&tsuid).is_ok(),
                GridSelect::Keep(keep) => {
                    let pairs: Vec<(&[u8], &[u8])> = self.layout.tsuid_pairs(&tsuid).collect();
                    keep(&pairs)?
                }
                GridSelect::All => true,
            };
            if !take {
                budget.rows_skipped += 1;
                left_out.insert(tsuid);
                continue;
            }
            series.push(GridSeries {
                series: StoredSeries::of_tsuid(&tsuid, &self.layout),
                values: vec![0.0; read.len],
                present: vec![0; read.len.div_ceil(64)],
                cells: 0,
            });
            at.insert(tsuid, series.len() - 1);
            taken.push(row);
        }
        let rows = taken;
        if rows.is_empty() {
            return Ok(true);
        }
        // Set when a row's points not flushed yet conflict with its stored ones (see `unfolded_hours`).
        let conflict = std::sync::atomic::AtomicBool::new(false);
        let conflict = &conflict;
        // The daemon's folds wait while this read runs (see Store::step_aside_for_grid_reads).
        let _reading = GridReading::new(&self.rollups.grid_readers);
        let threads = cores().clamp(1, UNFOLDED_THREADS);
        let hours = if rows.len() > UNFOLDED_CHUNK && threads > 1 {
            // Each thread takes the next chunk: rows cost unevenly (the newest hours' rows are fresh fragments
            // to merge, older ones compacted), so fixed halves left one thread working alone for most of the
            // read (issue 22 item 5).
            let next = std::sync::atomic::AtomicUsize::new(0);
            let work = |budget: &mut crate::store::ReadBudget| -> Result<Vec<UnfoldedHour>, StoreError> {
                let mut out = Vec::new();
                loop {
                    let start = next.fetch_add(UNFOLDED_CHUNK, Ordering::Relaxed);
                    let Some(chunk) = rows.get(start..(start + UNFOLDED_CHUNK).min(rows.len())) else { break };
                    if chunk.is_empty() {
                        break;
                    }
                    let mut hours =
                        self.unfolded_hours(read, interval_secs, chunk, (unfolded, conflict), stage_row, budget)?;
                    hours.iter_mut().for_each(|h| h.row += start);
                    out.append(&mut hours);
                }
                Ok(out)
            };
            let work = &work;
            let (mine, others) = std::thread::scope(|scope| {
                let others: Vec<_> = (1..threads)
                    .map(|_| {
                        let mut forked = budget.fork();
                        scope.spawn(move || work(&mut forked).map(|hours| (hours, forked)))
                    })
                    .collect();
                let mine = work(budget);
                let others: Vec<_> = others
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                    .collect();
                (mine, others)
            });
            let mut hours = mine?;
            for other in others {
                let (more, forked) = other?;
                budget.join(forked)?;
                hours.extend(more);
            }
            hours
        } else {
            self.unfolded_hours(read, interval_secs, &rows, (unfolded, conflict), stage_row, budget)?
        };
        if conflict.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut touched = Vec::new();
        for hour in hours {
            let Some(&i) = at.get(&self.layout.tsuid_of_row(rows[hour.row])) else { continue };
            let s = &mut series[i];
            // The hour's buckets on the grid: what the rollup rows gave for them goes.
            let index = |ms: i64| (ms - read.first_ms).div_euclid(read.step_ms).clamp(0, read.len as i64) as usize;
            for b in index(hour.hour_ms)..index(hour.hour_ms + 3_600_000) {
                s.values[b] = 0.0;
                s.present[b / 64] &= !(1 << (b % 64));
            }
            for (start, value) in hour.buckets {
                let b = (start - read.first_ms).div_euclid(read.step_ms);
                if (0..read.len as i64).contains(&b) {
                    let b = b as usize;
                    s.values[b] = value;
                    s.present[b / 64] |= 1 << (b % 64);
                }
            }
            touched.push(i);
        }
        for i in touched {
            let s = &mut series[i];
            s.cells = s.present.iter().map(|w| w.count_ones() as usize).sum();
        }
        Ok(true)
    }

    /// The staged buckets of each raw row of `rows` (see [`Store::grid_unfolded`]), charged to the budget as the
    /// rollup cells they stand for.
    fn unfolded_hours<F: Fn(&[Vec<f64>; COLUMNS], [bool; COLUMNS], &mut Vec<f64>)>(
        &self,
        read: &GridRead<'_>,
        interval_secs: u32,
        rows: &[&[u8]],
        (unfolded, conflict): (&Unfolded, &std::sync::atomic::AtomicBool),
        stage_row: &F,
        budget: &mut crate::store::ReadBudget,
    ) -> Result<Vec<UnfoldedHour>, StoreError> {
        let (sw, mw) = (self.layout.salt.width, self.layout.uid_widths[0]);
        let grid_end = read.end_ms();
        let mut out = Vec::with_capacity(rows.len());
        let mut points = Vec::new();
        let mut columns: [Vec<f64>; COLUMNS] = Default::default();
        let mut staged = Vec::new();
        self.engine.get_many(CF_DATA, rows, true, ReadHints::default(), &mut |i, stored| {
            let key = rows[i];
            let value = match unfolded.unflushed.get(key) {
                None => std::borrow::Cow::Borrowed(stored.unwrap_or_default()),
                Some(extra) => match codec::merge_row(stored, &[extra], self.fix_duplicates) {
                    Ok(merged) if merged.variant_duplicates == 0 || self.fix_duplicates => {
                        std::borrow::Cow::Owned(merged.row)
                    }
                    // Points that differ at one instant (left as written without `fix_duplicates`), or a column
                    // that does not split: which point a read takes then depends on how the row's writes were
                    // grouped into merges, so only a read after the flush answers as the raw rows do.
                    _ => {
                        conflict.store(true, Ordering::Release);
                        return Ok(());
                    }
                },
            };
            let value: &[u8] = &value;
            let hour = codec::row_base_time(key, sw, mw);
            if let Err(e) = codec::row_values(hour, value, &mut points) {
                // As the fold does: the row is not rolled up, and its hour keeps what the rollups hold.
                tracing::warn!(row = %codec::uid_to_string(key), error = %e, "raw row not rolled up");
                return Ok(());
            }
            let buckets = buckets(&points, interval_secs);
            for c in &mut columns {
                c.clear();
            }
            let mut integral = [true; COLUMNS];
            for b in &buckets {
                for (c, v) in [b.sum, Value::Int(b.count), b.min, b.max].into_iter().enumerate() {
                    columns[c].push(v.as_f64());
                    integral[c] &= matches!(v, Value::Int(_));
                }
            }
            for (c, column) in columns.iter_mut().enumerate() {
                // Only the columns a rollup row read decodes are given, as there.
                if !read.columns[c] {
                    column.clear();
                    integral[c] = false;
                }
            }
            stage_row(&columns, integral, &mut staged);
            // Charged as the rollup cells of the grid's buckets they stand for.
            let in_grid = buckets.iter().filter(|b| b.start >= read.first_ms && b.start < grid_end).count();
            budget.charge(in_grid * read.charged, value.len())?;
            out.push(UnfoldedHour {
                row: i,
                hour_ms: i64::from(hour) * 1000,
                buckets: buckets.iter().map(|b| b.start).zip(staged.iter().copied()).collect(),
            });
            Ok(())
        })?;
        Ok(out)
    }
}

/// A grid read of rows not folded yet, counted while it lives (see [`Rollups::grid_readers`]).
struct GridReading<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> GridReading<'a> {
    fn new(readers: &'a std::sync::atomic::AtomicUsize) -> GridReading<'a> {
        readers.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        GridReading(readers)
    }
}

impl Drop for GridReading<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Raw rows not folded yet a thread of a grid read takes at a time (see [`Store::grid_unfolded`]).
const UNFOLDED_CHUNK: usize = 256;
/// Threads a grid read reads raw rows not folded yet on, at most (as many as there are cores).
const UNFOLDED_THREADS: usize = 4;

/// One raw row's buckets as a grid read takes them from its points (see [`Store::grid_unfolded`]).
struct UnfoldedHour {
    /// The row's index in the rows read.
    row: usize,
    /// Its hour's start.
    hour_ms: i64,
    /// (bucket start ms, staged value) of each bucket with points.
    buckets: Vec<(i64, f64)>,
}
