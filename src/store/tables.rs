//! How the store declares its tables to the engine, and the data row's merge (OpenTSDB's compaction).
use super::*;

pub(super) fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// How long a row's newest point must be in the past before a stored merge packs the row (see [`merge_data_row`]).
pub(super) const PACK_QUIET_SECS: i64 = 60;

/// Whether `row` (of the hour starting at `hour`, in seconds) is quiet at `now_ms`: its newest point is at least
/// [`PACK_QUIET_SECS`] old, because its series moved on to the next hour, stopped, or is being backfilled.
pub(super) fn row_quiet(hour: u32, row: &[u8], now_ms: i64) -> bool {
    codec::newest_offset_ms(row)
        .is_some_and(|offset| i64::from(hour) * 1000 + i64::from(offset) + PACK_QUIET_SECS * 1000 <= now_ms)
}

/// How the store declares each of its tables to the engine: OpenTSDB's tables with their cells, rtsd's own with
/// their merges (see [`engine::TableSpec`]).
pub(super) fn table_spec(name: &str, layout: &Layout, fix_duplicates: bool, metrics: &Arc<Metrics>) -> TableSpec {
    match name {
        CF_DATA => {
            let metrics = metrics.clone();
            let (salt_width, metric_width) = (layout.salt.width, layout.uid_widths[0]);
            let full = move |key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]], context: MergeContext| {
                // Only what a flush or compaction stores is packed: a read's merge (a query, the rollup fold's
                // MultiGet) is decoded at once, so packing it was pure waste (`perf`, A telnet across a closed
                // hour: two thirds of the packing).
                let pack = context
                    .stored
                    .then(|| (codec::row_base_time(key, salt_width, metric_width), crate::timefmt::now_ms()));
                merge_data_row(existing, operands, fix_duplicates, pack, &metrics)
            };
            let merge = Merge { name: "opentsdb-row-v1", full: Arc::new(full), partial: None };
            TableSpec::new(name, CellMap::RowColumns, Tuning::Data).with_merge(merge)
        }
        CF_SERIES => {
            TableSpec::new(name, CellMap::Plain, Tuning::Small).with_merge(series::merge()).with_parts(series::PARTS)
        }
        CF_UID_ID | CF_UID_NAME | CF_TSDB_META => TableSpec::new(name, CellMap::QualifierRow, Tuning::Small),
        n if COLUMN_FAMILIES.contains(&n) => TableSpec::new(name, CellMap::Plain, Tuning::Small),
        shared_log::CF_LOG => TableSpec::new(name, CellMap::Plain, Tuning::Log),
        // On HBase a mark is a blind Put of its count in a cell of its own (an Increment reads the cell under the
        // row lock first); the sum part is still read, as marks stored before.
        rollup::CF_ROLLUP_DIRTY => rollup::marks_spec().with_parts(MARK_PARTS).with_blind_operands(),
        n if crate::rollup::RollupInterval::is_auto_family(n) => rollup::slots_spec(n),
        _ => rollup::table_spec(name),
    }
}

/// The rollup marks' merge (point counts summed, each an i64 little-endian) as one sum part (see
/// [`engine::Parts`]): an engine without merge operators (HBase) increments a mark's count blindly instead of
/// reading it and setting it by compare-and-set.
pub(super) const MARK_PARTS: engine::Parts =
    engine::Parts { parts: &[(b"+", engine::Combine::Sum)], split: split_mark, join: join_mark };

/// See [`MARK_PARTS`]; a count that does not parse adds nothing, as the marks' merge reads it as 0.
fn split_mark(_key: &[u8], operand: &[u8]) -> Option<Vec<(usize, i64)>> {
    Some(<[u8; 8]>::try_from(operand).map(|b| vec![(0, i64::from_le_bytes(b))]).unwrap_or_default())
}

/// See [`MARK_PARTS`].
fn join_mark(_key: &[u8], _index: usize, count: i64) -> Vec<u8> {
    count.to_le_bytes().to_vec()
}

/// The full merge of a data row: OpenTSDB's compaction ([`codec::merge_row`]), and with `pack` (a merge a flush
/// or compaction stores: the row's base hour and the time now, ms) the compacted column packed once the row is
/// quiet ([`row_quiet`], [`codec::pack_row`]; readers that show cells expand it back).
///
/// RocksDB runs a full merge when a compaction reaches the bottom of a row's data: the row is decoded and
/// compacted then anyway, so packing costs one more pass over its points, and it lands on disk only in files
/// that live long. A point arriving after that (a late point, a backfill) is one more operand: the next full
/// merge unpacks the row, merges the point in as it would into the compacted column, and packs the result again.
/// That is why a row is packed only once its newest point is a minute old: a live series' row takes a new point
/// every few seconds, and every read of it (a dashboard of the last hour) would unpack it again, ~2x the cost
/// of merging into the compacted column (criterion `row_decode/merge a point into a packed row of 360`). Rows
/// of a closed hour are quiet a minute after the hour, and so is a burst of past points into the hour still open
/// (a backfill up to now, bench data set A), which packing only closed hours left in OpenTSDB's 2-plus-value
/// bytes a point until the hour closed and some later compaction met the row (bench/RESULTS.md, 2026-11-29
/// 11:33: A 7.38 -> 5.04 bytes a point on disk).
///
/// If the stored bytes can't be decoded, the columns are kept concatenated as they are rather than failing the
/// read: nothing written is ever dropped by a merge.
pub(super) fn merge_data_row(
    existing: Option<&[u8]>,
    operands: &[&[u8]],
    fix_duplicates: bool,
    pack: Option<(u32, i64)>,
    metrics: &Metrics,
) -> Vec<u8> {
    match codec::merge_row(existing, operands, fix_duplicates) {
        Ok(merged) => {
            metrics.compaction_duplicates(merged.identical_duplicates, merged.variant_duplicates);
            match pack
                .filter(|&(hour, now)| row_quiet(hour, &merged.row, now))
                .and_then(|_| codec::pack_row(&merged.row))
            {
                Some(packed) => packed,
                None => merged.row,
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "row could not be compacted; keeping its columns as written");
            let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
            for op in operands {
                out.extend_from_slice(op);
            }
            out
        }
    }
}

pub(super) fn check_layout(engine: &dyn Engine, layout: &Layout, read_only: bool) -> Result<(), StoreError> {
    let want = layout.describe();
    match engine.get(CF_META, b"layout", ReadHints::default())? {
        Some(have) if have == want.as_bytes() => Ok(()),
        Some(have) => Err(StoreError::Layout(format!(
            "data directory was created with {} but the configuration says {want}; these settings cannot change \
             once data is written",
            String::from_utf8_lossy(&have)
        ))),
        None if read_only => Ok(()),
        None => {
            let mut batch = WriteBatch::default();
            batch.put(CF_META, b"layout", want.as_bytes());
            engine.write(batch, Durability::Logged)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21 item 5: on HBase a mark's count is a blind increment; read back it is the marks' merge of the
    /// same counts, onto a count stored whole before (by earlier rtsd) or none.
    #[test]
    fn a_mark_read_through_its_part_is_its_sum() {
        let spec = rollup::marks_spec();
        let merge = spec.merge.as_ref().unwrap();
        let counts: Vec<[u8; 8]> = [5i64, 7, -2, 1000].map(i64::to_le_bytes).to_vec();
        let ops: Vec<&[u8]> = counts.iter().map(|c| c.as_slice()).collect();
        for whole in [None, Some(40i64.to_le_bytes())] {
            let want = (merge.full)(b"k", whole.as_ref().map(|w| w.as_slice()), &ops, MergeContext { stored: false });
            let got = engine::conformance::read_through_parts(
                merge,
                &MARK_PARTS,
                b"k",
                whole.as_ref().map(|w| w.as_slice()),
                &ops,
            );
            assert_eq!(got, Some(want.clone()));
            assert_eq!(i64::from_le_bytes(want.try_into().unwrap()), 1010 + whole.map_or(0, i64::from_le_bytes));
        }
    }
}
