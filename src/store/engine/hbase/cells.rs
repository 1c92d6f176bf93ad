//! How the store's keys and values are HBase cells: where a key's value lives, the blind per-part cells of
//! merges that declare [`Parts`], and joining a row's cells back into the store's value.
use super::*;

impl Table {
    /// Where a store key's value is in HBase: the qualifier of its one cell (`None` for a [`CellMap::RowColumns`]
    /// key, whose value is the whole row) and the row.
    pub(super) fn cell_of<'k>(&self, key: &'k [u8]) -> (Option<&'k [u8]>, &'k [u8]) {
        match self.cells {
            CellMap::QualifierRow => {
                let (q, r) = split_cell_key(key);
                (Some(q), r)
            }
            CellMap::Plain => (Some(&[]), key),
            CellMap::RowColumns => (None, key),
        }
    }
}

impl Table {
    /// The table's parts if `key` has them (see [`Parts::split`]: decided by the key alone).
    pub(super) fn parts_of(&self, key: &[u8]) -> Option<Parts> {
        self.parts.filter(|p| (p.split)(key, &[]).is_some())
    }

    /// The qualifier a read asks for: every cell of the row when the table has parts.
    pub(super) fn read_qualifier<'k>(&self, key: &'k [u8]) -> (Option<&'k [u8]>, &'k [u8]) {
        match self.cell_of(key) {
            (_, row) if self.parts.is_some() || self.operands => (None, row),
            found => found,
        }
    }
}

/// Versions of max and min parts start here: far past any time a server stamps, so that no delete a server
/// stamps (of the empty-qualifier cell, of the family) masks them, and below `i64::MAX`.
pub(super) const PART_VERSIONS: u64 = 1 << 60;

/// The version of a max (`Combine::Max`: `n`) or min (`u32::MAX - n`) part holding `n`: ordered as the values
/// are, so the version HBase serves (the newest) is the largest, or the smallest, value written. The low 20 bits
/// are random: a delete of one version ([`reset_key`]) then masks that write only, not a later write of the
/// same number (which gets other low bits, but for a chance of 2^-20).
pub(super) fn part_version(order: u64) -> u64 {
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    // splitmix64's finaliser over the sequence, the time and the process.
    let mut z = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ t ^ (u64::from(std::process::id()) << 40);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    PART_VERSIONS + ((order.min(u64::from(u32::MAX)) << 20) | (z & 0xf_ffff))
}

/// The mutations that apply `operand` to `key`'s parts: a sum an Increment of its cell, a max or a min a Put of
/// the number (8 bytes big-endian) at the version that orders it (see [`part_version`]). With `set` (a put of a
/// value, after [`reset_key`]) sums are Puts of the number. Nothing is read: these go into the batch's Multi.
pub(super) fn part_writes(table: &Table, parts: Parts, key: &[u8], operand: &[u8], set: bool) -> Vec<Mutation> {
    let (name, family) = (table.hbase.as_str(), table.family.as_slice());
    let updates = (parts.split)(key, operand).unwrap_or_default();
    updates
        .into_iter()
        .filter_map(|(i, n)| {
            let (qualifier, combine) = *parts.parts.get(i)?;
            let cell = vec![(qualifier.to_vec(), n.to_be_bytes().to_vec())];
            Some(match combine {
                Combine::Sum if set => Mutation::put(name, key, family, cell),
                Combine::Sum => Mutation::increment(name, key, family, qualifier, n),
                Combine::Max => Mutation::put(name, key, family, cell).with_timestamp(part_version(n.max(0) as u64)),
                Combine::Min => Mutation::put(name, key, family, cell)
                    .with_timestamp(part_version(u64::from(u32::MAX).saturating_sub(n.max(0) as u64))),
            })
        })
        .collect()
}

/// Removes every cell of `row`, the empty-qualifier one and the parts', so that a put after it stands alone
/// (a store put or delete of a key with parts). The empty-qualifier cell and the sums are deleted up to the
/// server's time; a max or min part's versions lie past it, so each version HBase serves is deleted on its own
/// (a delete up to a version would mask every later write of a smaller number) until none is left: HBase keeps
/// one version per cell, but an older one may still be in another file, and is served once the newer is deleted.
/// Returns once a write after it is stamped later than the deletes.
pub(super) async fn reset_key(client: Arc<Client>, table: Table, parts: Parts, row: Vec<u8>) -> Result<(), StoreError> {
    let (name, family) = (table.hbase.as_str(), table.family.as_slice());
    let mut stamped: Vec<&[u8]> = vec![b""];
    let mut versioned: Vec<&[u8]> = Vec::new();
    for &(qualifier, combine) in parts.parts {
        match combine {
            Combine::Sum => stamped.push(qualifier),
            Combine::Max | Combine::Min => versioned.push(qualifier),
        }
    }
    client.mutate(&Mutation::delete(name, &row, family, &stamped)).await.map_err(hbase_error)?;
    let mut cleared = versioned.is_empty();
    for _ in 0..MERGE_ROUNDS {
        if cleared {
            break;
        }
        let cells = client.get(name, &row, Some(family), &versioned).await.map_err(hbase_error)?;
        if cells.is_empty() {
            cleared = true;
            break;
        }
        let deletes = cells
            .iter()
            .map(|c| Mutation::delete_version(name, &row, family, &[c.qualifier.as_slice()], c.timestamp))
            .collect();
        for outcome in client.multi(deletes).await {
            outcome.map_err(hbase_error)?;
        }
    }
    if !cleared {
        return Err(StoreError::Engine(EngineError {
            kind: EngineErrorKind::Unavailable,
            message: format!("HBase error: the parts of a row of {name} kept coming back ({MERGE_ROUNDS} deletes)"),
        }));
    }
    // The server stamps the delete and the writes after it in milliseconds: one within the same millisecond
    // would be masked by the delete.
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    Ok(())
}

/// A [`CellMap::QualifierRow`] key split into (qualifier, row).
pub(super) fn split_cell_key(key: &[u8]) -> (&[u8], &[u8]) {
    match key.iter().position(|&b| b == 0) {
        Some(i) => (&key[..i], &key[i + 1..]),
        None => (&key[..0], key),
    }
}

/// A row's cells as the store's value of it (see the module comment).
pub(super) fn value_of(table: &Table, key: &[u8], cells: &[Cell]) -> Option<Vec<u8>> {
    if cells.is_empty() {
        return None;
    }
    match table.cells {
        CellMap::RowColumns => {
            let mut columns = Vec::new();
            for cell in cells {
                codec::push_column(&mut columns, &cell.qualifier, &cell.value);
            }
            Some(match &table.merge {
                Some(merge) => (merge.full)(key, None, &[&columns], MergeContext { stored: false }),
                None => columns,
            })
        }
        CellMap::Plain if table.operands => join_operands(table, key, cells),
        CellMap::Plain => match table.parts {
            Some(parts) => join_parts(table, parts, key, cells),
            None => Some(cells[0].value.clone()),
        },
        CellMap::QualifierRow => Some(cells[0].value.clone()),
    }
}

/// The value of a key with parts: the table's merge of its empty-qualifier cell (merges applied whole, puts, and
/// rows written before the parts) and of each part's cell as the operand [`Parts::join`] makes of it.
pub(super) fn join_parts(table: &Table, parts: Parts, key: &[u8], cells: &[Cell]) -> Option<Vec<u8>> {
    let mut whole = None;
    let mut operands = Vec::new();
    for cell in cells {
        if cell.qualifier.is_empty() {
            whole = Some(cell.value.as_slice());
            continue;
        }
        let Some(i) = parts.parts.iter().position(|(q, _)| *q == cell.qualifier.as_slice()) else { continue };
        let Ok(number) = <[u8; 8]>::try_from(cell.value.as_slice()) else { continue };
        operands.push((parts.join)(key, i, i64::from_be_bytes(number)));
    }
    if operands.is_empty() {
        return whole.map(<[u8]>::to_vec);
    }
    let operands: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
    let merge = table.merge.as_ref()?;
    Some((merge.full)(key, whole, &operands, MergeContext { stored: false }))
}

/// The first byte of an operand cell's qualifier (see [`operand_qualifier`]).
pub(super) const OPERAND: u8 = b'o';

/// The length of an operand cell's qualifier.
pub(super) const OPERAND_QUALIFIER_LEN: usize = 11;

/// The qualifier of a new operand cell: `o`, then the microseconds since the epoch (8 bytes big-endian, strictly
/// increasing within the process, so one writer's operands of a key are in the order written), then two bytes
/// of this process (two writers' operands of one microsecond each get a cell). HBase returns a row's cells in
/// qualifier order: the operands in the order they were written, after the whole value (empty qualifier).
pub(super) fn operand_qualifier() -> Vec<u8> {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static PROCESS: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as u64;
    // Calls within one microsecond take the next ones (ahead of the clock by at most the calls of a burst).
    let mut prev = LAST.load(std::sync::atomic::Ordering::Acquire);
    let micros = loop {
        let next = now.max(prev + 1);
        match LAST.compare_exchange_weak(
            prev,
            next,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        ) {
            Ok(_) => break next,
            Err(seen) => prev = seen,
        }
    };
    let process = *PROCESS.get_or_init(|| (part_version(0) & 0xffff) as u16);
    let mut q = Vec::with_capacity(11);
    q.push(OPERAND);
    q.extend_from_slice(&micros.to_be_bytes());
    q.extend_from_slice(&process.to_be_bytes());
    q
}

/// A merge into a table with operand cells: a blind Put of the operand as a cell of its own (server-stamped, so
/// after the delete of a [`reset_row`] before it).
pub(super) fn operand_write(table: &Table, key: &[u8], operand: &[u8]) -> Mutation {
    Mutation::put(&table.hbase, key, &table.family, vec![(operand_qualifier(), operand.to_vec())])
}

/// The value of a key with operand cells: the table's merge of its empty-qualifier cell (a put) and of its
/// operands in qualifier order, i.e. as written.
pub(super) fn join_operands(table: &Table, key: &[u8], cells: &[Cell]) -> Option<Vec<u8>> {
    let is_operand = |c: &Cell| c.qualifier.len() == OPERAND_QUALIFIER_LEN && c.qualifier[0] == OPERAND;
    let (mut operands, rest): (Vec<&Cell>, Vec<&Cell>) = cells.iter().partition(|c| is_operand(c));
    // What was written otherwise: the put's cell, and sum parts of rows written before the table had operands.
    let whole = match table.parts {
        Some(parts) => {
            let rest: Vec<Cell> = rest.into_iter().cloned().collect();
            join_parts(table, parts, key, &rest)
        }
        None => rest.iter().find(|c| c.qualifier.is_empty()).map(|c| c.value.clone()),
    };
    if operands.is_empty() {
        return whole;
    }
    operands.sort_by(|a, b| a.qualifier.cmp(&b.qualifier));
    let operands: Vec<&[u8]> = operands.iter().map(|c| c.value.as_slice()).collect();
    let merge = table.merge.as_ref()?;
    Some((merge.full)(key, whole.as_deref(), &operands, MergeContext { stored: false }))
}

/// Removes every cell of `row` of a table with operand cells (a family delete stamped by the server), so that a
/// put after it stands alone; returns once a write after it is stamped later than the delete.
pub(super) async fn reset_row(client: Arc<Client>, table: Table, row: Vec<u8>) -> Result<(), StoreError> {
    client.mutate(&Mutation::delete(&table.hbase, &row, &table.family, &[])).await.map_err(hbase_error)?;
    // The server stamps in milliseconds: a write within the same millisecond would be masked by the delete.
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    Ok(())
}
