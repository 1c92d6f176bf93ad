//! An engine-neutral atomic write: puts, deletes and merges over several tables, applied all or none by
//! [`super::Engine::write`].
//!
//! Kept flat (one byte buffer and one entry per operation, as RocksDB's own write batch is) so that building a
//! batch of a flush's thousands of rows costs no allocation per row, and handing it to RocksDB one copy.

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Put,
    Delete,
    Merge,
    /// Deletes every row from the key (inclusive) to the value (exclusive).
    DeleteRange,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    op: Op,
    table: u16,
    key_end: u32,
    value_end: u32,
}

#[derive(Default, Clone)]
pub struct WriteBatch {
    /// Tables the batch touches, by index (a batch touches a handful).
    tables: Vec<String>,
    /// Each operation's key then value, back to back.
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl WriteBatch {
    pub fn put(&mut self, table: &str, key: &[u8], value: &[u8]) {
        self.push(Op::Put, table, key, value);
    }

    /// Adds `operand` to the row at `key` by the table's [`super::Merge`].
    pub fn merge(&mut self, table: &str, key: &[u8], operand: &[u8]) {
        self.push(Op::Merge, table, key, operand);
    }

    pub fn delete(&mut self, table: &str, key: &[u8]) {
        self.push(Op::Delete, table, key, &[]);
    }

    /// Deletes the rows in `[start, end)`.
    pub fn delete_range(&mut self, table: &str, start: &[u8], end: &[u8]) {
        self.push(Op::DeleteRange, table, start, end);
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn clear(&mut self) {
        self.tables.clear();
        self.bytes.clear();
        self.entries.clear();
    }

    /// Bytes of keys and values.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The operations in order: (op, table, key, value; empty for a delete).
    pub fn iter(&self) -> impl Iterator<Item = (Op, &str, &[u8], &[u8])> + '_ {
        let mut start = 0usize;
        self.entries.iter().map(move |e| {
            let (key_end, value_end) = (e.key_end as usize, e.value_end as usize);
            let item = (
                e.op,
                self.tables[e.table as usize].as_str(),
                &self.bytes[start..key_end],
                &self.bytes[key_end..value_end],
            );
            start = value_end;
            item
        })
    }

    fn push(&mut self, op: Op, table: &str, key: &[u8], value: &[u8]) {
        let table = match self.tables.iter().rposition(|t| t == table) {
            Some(i) => i,
            None => {
                self.tables.push(table.to_string());
                self.tables.len() - 1
            }
        };
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        let value_end = self.bytes.len() as u32;
        self.entries.push(Entry { op, table: table as u16, key_end, value_end });
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch").field("ops", &self.entries.len()).field("bytes", &self.bytes.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_come_back_in_order_with_their_tables_and_bytes() {
        let mut b = WriteBatch::default();
        assert!(b.is_empty());
        b.put("tsdb:t", b"k1", b"v1");
        b.merge("rtsd:series", b"k2", b"");
        b.delete("tsdb:t", b"k3");
        b.put("tsdb-uid:id", b"", b"value");
        let ops: Vec<_> = b.iter().collect();
        assert_eq!(
            ops,
            vec![
                (Op::Put, "tsdb:t", &b"k1"[..], &b"v1"[..]),
                (Op::Merge, "rtsd:series", &b"k2"[..], &b""[..]),
                (Op::Delete, "tsdb:t", &b"k3"[..], &b""[..]),
                (Op::Put, "tsdb-uid:id", &b""[..], &b"value"[..]),
            ]
        );
        assert_eq!((b.len(), b.size()), (4, 13));
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.iter().count(), 0);
    }
}
