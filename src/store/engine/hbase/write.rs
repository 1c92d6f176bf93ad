//! A batch on HBase: its operations as mutations, one Multi per region server, and what cannot be one (resets of
//! keys with parts, read-modify-write merges by compare-and-set).
use super::*;

/// The mutations of one batch operation.
pub(super) fn mutations(op: Op, table: &Table, key: &[u8], value: &[u8]) -> Result<Vec<Mutation>, StoreError> {
    let (name, family) = (table.hbase.as_str(), table.family.as_slice());
    // A packed row (the embedded engine's form of a stored row, which bulk loads may hand over) goes to HBase
    // as OpenTSDB's cells: OpenTSDB reads these tables too.
    let expanded;
    let value = match (table.cells, op) {
        (CellMap::RowColumns, Op::Put | Op::Merge) => {
            expanded = codec::expand_row(value).map_err(|e| StoreError::Corrupt(format!("a row to write: {e}")))?;
            expanded.as_ref()
        }
        _ => value,
    };
    Ok(match (table.cells, op) {
        (CellMap::RowColumns, Op::Merge) if table.appends => {
            // OpenTSDB's append: each point's qualifier and value concatenated onto the one append column
            // (spec: ingest §4.7); HBase keeps arrival order, the read's merge sorts and de-duplicates.
            // A compacted column or a cells run (a flush's fragment) goes point by point: a record is one
            // point's qualifier and value.
            let mut record = Vec::with_capacity(value.len());
            for column in codec::columns(value) {
                let c = column.map_err(|e| StoreError::Corrupt(format!("columns of a write: {e}")))?;
                if c.qualifier.len() % 2 == 0 {
                    codec::each_point(c.qualifier, c.value, |q, v| {
                        record.extend_from_slice(q);
                        record.extend_from_slice(v);
                        Ok(())
                    })
                    .map_err(|e| StoreError::Corrupt(format!("a point of a write: {e}")))?;
                } else {
                    record.extend_from_slice(c.qualifier);
                    record.extend_from_slice(c.value);
                }
            }
            vec![Mutation::append(name, key, family, vec![(codec::APPEND_QUALIFIER.to_vec(), record)])]
        }
        (CellMap::RowColumns, Op::Put | Op::Merge) => {
            // A row fragment of several points (a flush of the series table, a batch of puts) goes as
            // OpenTSDB's compaction would write it: one compacted column instead of a cell per point.
            // OpenTSDB merges compacted columns with single cells and with each other when it reads a row
            // (spec: ingest §4.6), and so does rtsd; HBase stores, logs and compacts one cell instead of
            // each point's (B over 4 connections: ~14 points a fragment).
            let compacted;
            let value = match &table.merge {
                // A cells run (a flush's fragment, see codec::cells_run) is rtsd's own: merged, it is the
                // compacted column OpenTSDB reads.
                Some(merge)
                    if op == Op::Merge && (codec::columns(value).nth(1).is_some() || codec::has_cells_run(value)) =>
                {
                    compacted = (merge.full)(key, None, &[value], MergeContext { stored: false });
                    compacted.as_slice()
                }
                _ => value,
            };
            let mut columns = Vec::new();
            for column in codec::columns(value) {
                let c = column.map_err(|e| StoreError::Corrupt(format!("columns of a write: {e}")))?;
                columns.push((c.qualifier.to_vec(), c.value.to_vec()));
            }
            if op == Op::Put {
                // A whole row replaced: a delete of every cell up to now, and the new cells one millisecond
                // later. HBase masks a put by a delete marker of the same timestamp, and both would get the
                // server's clock within one Multi.
                let now = crate::timefmt::now_ms().max(1) as u64;
                return Ok(vec![
                    Mutation::delete(name, key, family, &[]).with_timestamp(now),
                    Mutation::put(name, key, family, columns).with_timestamp(now + 1),
                ]);
            }
            vec![Mutation::put(name, key, family, columns)]
        }
        (CellMap::RowColumns, Op::Delete) => vec![Mutation::delete(name, key, family, &[])],
        (CellMap::QualifierRow | CellMap::Plain, Op::Put) => {
            let (qualifier, row) = table.cell_of(key);
            vec![Mutation::put(name, row, family, vec![(qualifier.unwrap_or_default().to_vec(), value.to_vec())])]
        }
        (CellMap::QualifierRow | CellMap::Plain, Op::Delete) => {
            let (qualifier, row) = table.cell_of(key);
            vec![Mutation::delete(name, row, family, &[qualifier.unwrap_or_default()])]
        }
        (_, Op::Merge) | (_, Op::DeleteRange) => {
            unreachable!("merges into cell tables and range deletes are applied one by one")
        }
    })
}

impl HBaseEngine {
    /// Applies merges into [`CellMap::Plain`] and [`CellMap::QualifierRow`] tables, each key's operands in
    /// one read-merge-compare-and-set, many keys at once (see [`merge_cell`]).
    pub(super) fn apply_merges(&self, merges: Vec<PendingMerge>) -> Result<(), StoreError> {
        let client = &self.client;
        let calls = merges.into_iter().map(|m| merge_cell(client.clone(), m)).collect();
        self.run_at_most(MERGES_IN_FLIGHT, calls, "merge").into_iter().collect()
    }

    pub(super) fn cas(
        &self,
        table: &Table,
        row: &[u8],
        qualifier: &[u8],
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<bool, StoreError> {
        let put = Mutation::put(&table.hbase, row, &table.family, vec![(qualifier.to_vec(), value.to_vec())]);
        let (client, family, qualifier) = (self.client.clone(), table.family.clone(), qualifier.to_vec());
        let expected = expected.unwrap_or_default().to_vec();
        self.run(async move { client.check_and_put(&put, &family, &qualifier, &expected).await }).map_err(hbase_error)
    }

    pub(super) fn delete_range(&self, table: &Table, start: &[u8], end: &[u8]) -> Result<(), StoreError> {
        let mut keys = Vec::new();
        let mut cursor = self.unstarted_cursor(table);
        cursor.seek_until(start, end);
        while cursor.valid() && cursor.key() < end {
            keys.push(cursor.key().to_vec());
            cursor.next();
        }
        cursor.status()?;
        if let Some(parts) = table.parts.filter(|p| p.parts.iter().any(|(_, c)| *c != Combine::Sum)) {
            // Versions of max and min parts lie past the time a family delete is stamped with.
            let resets = keys.into_iter().map(|k| (table.clone(), parts, k)).collect();
            return self.reset_keys(resets);
        }
        let deletes: Vec<Mutation> =
            keys.iter().map(|k| Mutation::delete(&table.hbase, k, &table.family, &[])).collect();
        self.apply(deletes)
    }

    pub(super) fn apply(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        if mutations.is_empty() {
            return Ok(());
        }
        let client = self.client.clone();
        let outcomes = self.run(async move { client.multi(mutations).await });
        for outcome in outcomes {
            outcome.map_err(hbase_error)?;
        }
        Ok(())
    }

    /// A cursor that reads nothing until it is positioned.
    pub(super) fn unstarted_cursor(&self, table: &Table) -> HBaseCursor {
        HBaseCursor {
            engine_client: self.client.clone(),
            handle: self.runtime.as_ref().expect("runtime lives as long as the engine").handle().clone(),
            table: table.clone(),
            rows: None,
            current: None,
            error: None,
            behind: Vec::new(),
        }
    }
}

/// What a batch has left to apply, in this order: resets of keys with parts, then the Multi, then the
/// read-modify-write merges.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) resets: Vec<(Table, Parts, Vec<u8>)>,
    /// Rows of tables with operand cells that a put or delete replaces (see [`reset_row`]).
    pub(super) row_resets: Vec<(Table, Vec<u8>)>,
    pub(super) mutations: Vec<Mutation>,
    pub(super) merges: Vec<PendingMerge>,
    pub(super) merge_at: HashMap<(String, Vec<u8>), usize>,
    /// Keys of tables with parts that the pending writes write (a reset of one must wait for them).
    pub(super) written: std::collections::HashSet<(String, Vec<u8>)>,
}

impl HBaseEngine {
    /// Applies what a batch has pending (see [`Pending`]).
    pub(super) fn flush(&self, pending: &mut Pending) -> Result<(), StoreError> {
        let Pending { resets, row_resets, mutations, merges, .. } = std::mem::take(pending);
        let started = std::time::Instant::now();
        // What the batch asks of HBase, by table and kind, for the debug line below (bench/RESULTS.md's
        // breakdowns of a flush).
        let kinds = tracing::enabled!(tracing::Level::DEBUG).then(|| {
            let mut kinds: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
            for m in &mutations {
                *kinds.entry((m.table.as_str(), m.kind.multi_name())).or_default() += 1;
            }
            kinds.into_iter().map(|((t, k), n)| format!("{t}.{k}={n}")).collect::<Vec<_>>().join(" ")
        });
        let counts = (resets.len(), row_resets.len(), merges.len());
        self.reset_keys(resets)?;
        let client = &self.client;
        let calls = row_resets.into_iter().map(|(table, row)| reset_row(client.clone(), table, row)).collect();
        self.run_at_most(MERGES_IN_FLIGHT, calls, "reset").into_iter().collect::<Result<(), _>>()?;
        let reset = started.elapsed();
        self.apply(mutations)?;
        let applied = started.elapsed();
        self.apply_merges(merges)?;
        tracing::debug!(
            resets = counts.0, row_resets = counts.1, mutations = kinds.unwrap_or_default(), merges = counts.2,
            ?reset, ?applied, took = ?started.elapsed(), "HBase batch written"
        );
        Ok(())
    }

    /// [`reset_key`] of each key, many at once.
    pub(super) fn reset_keys(&self, resets: Vec<(Table, Parts, Vec<u8>)>) -> Result<(), StoreError> {
        let client = &self.client;
        let calls =
            resets.into_iter().map(|(table, parts, row)| reset_key(client.clone(), table, parts, row)).collect();
        self.run_at_most(MERGES_IN_FLIGHT, calls, "reset").into_iter().collect()
    }
}

/// Merges into cell tables under way at once (each a Get and a CheckAndPut).
pub(super) const MERGES_IN_FLIGHT: usize = 64;

/// Single-row calls of one [`Engine::check_and_put_many`] under way at once.
pub(super) const CALLS_IN_FLIGHT: usize = 64;

/// A batch's merge operands for one key of a cell table, in batch order.
pub(super) struct PendingMerge {
    pub(super) table: Table,
    pub(super) key: Vec<u8>,
    pub(super) operands: Vec<Vec<u8>>,
}

/// One key's merge: read the cell, merge the operands into it with the table's merge, compare-and-set; again
/// when another writer changed the cell in between.
pub(super) async fn merge_cell(client: Arc<Client>, m: PendingMerge) -> Result<(), StoreError> {
    let PendingMerge { table, key, operands } = m;
    let merge = table.merge.as_ref().ok_or_else(|| {
        StoreError::Corrupt(format!("a merge into {}:{}, which has none", table.hbase, family_text(&table)))
    })?;
    let (qualifier, row) = table.cell_of(&key);
    let qualifier = qualifier.unwrap_or_default();
    let operands: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
    for _ in 0..MERGE_ROUNDS {
        let cells =
            client.get(&table.hbase, row, Some(table.family.as_slice()), &[qualifier]).await.map_err(hbase_error)?;
        let current = cells.into_iter().next().map(|c| c.value);
        let merged = (merge.full)(&key, current.as_deref(), &operands, MergeContext { stored: true });
        let put = Mutation::put(&table.hbase, row, &table.family, vec![(qualifier.to_vec(), merged)]);
        // An empty expected value stands for an absent cell (HBase's CheckAndPut).
        let expected = current.as_deref().unwrap_or_default();
        if client.check_and_put(&put, &table.family, qualifier, expected).await.map_err(hbase_error)? {
            return Ok(());
        }
    }
    Err(StoreError::Engine(EngineError {
        kind: EngineErrorKind::Unavailable,
        message: format!("HBase error: a merge into {} lost {MERGE_ROUNDS} compare-and-sets", table.hbase),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtsd_hbase::MutationKind;

    fn data_table(appends: bool) -> Table {
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let layout = crate::store::Layout { uid_widths: [3, 3, 3], salt: codec::SaltConfig::NONE };
        let spec = crate::store::tables::table_spec(crate::store::CF_DATA, &layout, false, &metrics);
        let mut options = HBaseOptions::new("127.0.0.1:2181");
        options.appends = appends;
        table_of(&spec, &options)
    }

    /// A fragment as the series table flushes it: single-point columns in arrival order (`(seconds, value)`).
    fn fragment(points: &[(i64, u8)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(ts, v) in points {
            codec::push_column(&mut out, &codec::build_qualifier(ts, 0), &[v]);
        }
        out
    }

    const KEY: &[u8] = &[0, 0, 1, 0x50, 0xE2, 0x27, 0x00, 0, 0, 1, 0, 0, 1];

    // Issue 21 item 5; spec: ingest §4.6. A fragment of several points is one compacted column, byte for byte
    // the column OpenTSDB's compaction writes for those points; a lone point stays a single cell.
    #[test]
    fn a_fragment_of_several_points_is_written_as_one_compacted_column() {
        let base = 1356998400;
        let table = data_table(false);
        let written =
            mutations(Op::Merge, &table, KEY, &fragment(&[(base + 20, 3), (base, 1), (base + 10, 2)])).unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].kind, MutationKind::Put);
        // Qualifiers 0x0000, 0x00A0, 0x0140 (offsets 0, 10 and 20 s, 1-byte integers), the values, the meta byte.
        let want = (vec![0x00, 0x00, 0x00, 0xA0, 0x01, 0x40], vec![1, 2, 3, 0]);
        assert_eq!(written[0].columns, vec![want]);

        let single = mutations(Op::Merge, &table, KEY, &fragment(&[(base + 30, 9)])).unwrap();
        assert_eq!(single[0].columns, vec![(vec![0x01, 0xE0], vec![9])]);

        // A point sent again in one fragment: the later value wins, as a later cell does in HBase.
        let again = mutations(Op::Merge, &table, KEY, &fragment(&[(base, 1), (base, 2)])).unwrap();
        assert_eq!(again[0].columns, vec![(vec![0x00, 0x00], vec![2])]);
        // An integer and a float at one instant (a variant duplicate, without tsd.storage.fix_duplicates): the
        // row is left as OpenTSDB leaves it, each cell as written.
        let mut variant = fragment(&[(base, 1)]);
        codec::push_column(&mut variant, &codec::build_qualifier(base, 0x0B), &1.5f32.to_be_bytes());
        let variant = mutations(Op::Merge, &table, KEY, &variant).unwrap();
        assert_eq!(variant[0].columns.len(), 2, "{:?}", variant[0].columns);

        // With appends on, a fragment's points go onto the append column as records (spec: ingest §4.7).
        let appended = mutations(Op::Merge, &data_table(true), KEY, &fragment(&[(base, 1), (base + 10, 2)])).unwrap();
        assert_eq!(appended[0].kind, MutationKind::Append);
        assert_eq!(appended[0].columns, vec![(codec::APPEND_QUALIFIER.to_vec(), vec![0x00, 0x00, 1, 0x00, 0xA0, 2])]);
        // A fragment the store wrote as a cells run goes to HBase as OpenTSDB's compacted column, and with appends
        // on as one record a point: the append column's reader takes a qualifier, then that qualifier's value.
        let run = codec::cells_run(&fragment(&[(base, 1), (base + 10, 2)])).unwrap();
        assert_eq!(*run.last().unwrap(), codec::CELLS_RUN);
        let written = mutations(Op::Merge, &table, KEY, &run).unwrap();
        assert_eq!(written[0].columns, vec![(vec![0x00, 0x00, 0x00, 0xA0], vec![1, 2, 0])]);
        let appended = mutations(Op::Merge, &data_table(true), KEY, &run).unwrap();
        assert_eq!(appended[0].columns, vec![(codec::APPEND_QUALIFIER.to_vec(), vec![0x00, 0x00, 1, 0x00, 0xA0, 2])]);
    }
}
