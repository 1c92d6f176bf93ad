//! The client's public values (cells, mutations) and their protobuf form.
use std::sync::atomic::{AtomicU64, Ordering};

use crate::proto;

/// One cell of a row, as HBase returns it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub row: Vec<u8>,
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    /// Milliseconds since the epoch; the server's clock unless the writer set it.
    pub timestamp: u64,
    pub value: Vec<u8>,
}

impl From<proto::Cell> for Cell {
    fn from(c: proto::Cell) -> Cell {
        Cell {
            row: c.row.unwrap_or_default(),
            family: c.family.unwrap_or_default(),
            qualifier: c.qualifier.unwrap_or_default(),
            timestamp: c.timestamp.unwrap_or_default(),
            value: c.value.unwrap_or_default(),
        }
    }
}

pub(crate) fn cells(r: Option<proto::Result>) -> Vec<Cell> {
    r.map(|r| r.cell.into_iter().map(Cell::from).collect()).unwrap_or_default()
}

/// What a [`Mutation`] does to its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationKind {
    /// Sets each column's value.
    Put,
    /// Appends each value to the column's current value (creating it); answers the new values.
    Append,
    /// Adds each value (an 8-byte big-endian i64) to the column's counter; answers the new values.
    Increment,
    /// Deletes every version of each column; with no columns, the whole family; with no family, the whole row.
    Delete,
    /// Deletes the one version of each column whose timestamp is the mutation's (which it must have): older
    /// and newer versions stay, and a later write at another timestamp is not masked.
    DeleteVersion,
}

impl MutationKind {
    /// Its name in [`crate::Client::op_counts`].
    pub fn name(self) -> &'static str {
        match self {
            MutationKind::Put => "put",
            MutationKind::Append => "append",
            MutationKind::Increment => "increment",
            MutationKind::Delete => "delete",
            MutationKind::DeleteVersion => "delete_version",
        }
    }

    /// Its name in [`crate::Client::op_counts`] when sent in a Multi.
    pub fn multi_name(self) -> &'static str {
        match self {
            MutationKind::Put => "multi_put",
            MutationKind::Append => "multi_append",
            MutationKind::Increment => "multi_increment",
            MutationKind::Delete => "multi_delete",
            MutationKind::DeleteVersion => "multi_delete_version",
        }
    }
}

/// A write to one row of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    pub table: String,
    pub row: Vec<u8>,
    pub kind: MutationKind,
    /// Empty only for a whole-row delete.
    pub family: Vec<u8>,
    /// (qualifier, value); values are ignored by Delete.
    pub columns: Vec<(Vec<u8>, Vec<u8>)>,
    /// The cells' timestamp; `None` lets the server stamp them (what OpenTSDB does).
    pub timestamp: Option<u64>,
}

impl Mutation {
    fn new(kind: MutationKind, table: &str, row: &[u8], family: &[u8], columns: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        Mutation {
            table: table.to_string(),
            row: row.to_vec(),
            kind,
            family: family.to_vec(),
            columns,
            timestamp: None,
        }
    }

    pub fn put(table: &str, row: &[u8], family: &[u8], columns: Vec<(Vec<u8>, Vec<u8>)>) -> Mutation {
        Mutation::new(MutationKind::Put, table, row, family, columns)
    }

    pub fn append(table: &str, row: &[u8], family: &[u8], columns: Vec<(Vec<u8>, Vec<u8>)>) -> Mutation {
        Mutation::new(MutationKind::Append, table, row, family, columns)
    }

    pub fn increment(table: &str, row: &[u8], family: &[u8], qualifier: &[u8], amount: i64) -> Mutation {
        let columns = vec![(qualifier.to_vec(), amount.to_be_bytes().to_vec())];
        Mutation::new(MutationKind::Increment, table, row, family, columns)
    }

    /// Deletes `qualifiers` of `family` (all versions); no qualifiers: the whole family.
    pub fn delete(table: &str, row: &[u8], family: &[u8], qualifiers: &[&[u8]]) -> Mutation {
        let columns = qualifiers.iter().map(|q| (q.to_vec(), Vec::new())).collect();
        Mutation::new(MutationKind::Delete, table, row, family, columns)
    }

    /// Deletes the version at `timestamp` of each of `qualifiers` of `family` (see [`MutationKind::DeleteVersion`]).
    pub fn delete_version(table: &str, row: &[u8], family: &[u8], qualifiers: &[&[u8]], timestamp: u64) -> Mutation {
        let columns = qualifiers.iter().map(|q| (q.to_vec(), Vec::new())).collect();
        Mutation::new(MutationKind::DeleteVersion, table, row, family, columns).with_timestamp(timestamp)
    }

    /// Deletes the whole row.
    pub fn delete_row(table: &str, row: &[u8]) -> Mutation {
        Mutation::new(MutationKind::Delete, table, row, b"", Vec::new())
    }

    pub fn with_timestamp(mut self, ts: u64) -> Mutation {
        self.timestamp = Some(ts);
        self
    }

    /// Whether applying it twice differs from applying it once (a retry then needs the server's nonce check).
    pub fn is_idempotent(&self) -> bool {
        matches!(self.kind, MutationKind::Put | MutationKind::Delete | MutationKind::DeleteVersion)
    }

    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        let bad = |why: &str| Err(crate::Error::Invalid(format!("{why} ({:?} on {})", self.kind, self.table)));
        if self.row.is_empty() {
            return bad("empty row key");
        }
        if self.kind != MutationKind::Delete && (self.family.is_empty() || self.columns.is_empty()) {
            return bad("no column");
        }
        if self.kind == MutationKind::DeleteVersion && self.timestamp.is_none() {
            return bad("a version to delete needs its timestamp");
        }
        if self.kind == MutationKind::Increment && self.columns.iter().any(|(_, v)| v.len() != 8) {
            return bad("increment amounts are 8 bytes");
        }
        Ok(())
    }

    pub(crate) fn to_proto(&self, nonce: Option<u64>) -> proto::MutationProto {
        let (kind, delete_type) = match self.kind {
            MutationKind::Put => (proto::MutationType::Put, None),
            MutationKind::Append => (proto::MutationType::Append, None),
            MutationKind::Increment => (proto::MutationType::Increment, None),
            MutationKind::Delete if self.columns.is_empty() => {
                (proto::MutationType::Delete, Some(proto::DeleteType::DeleteFamily))
            }
            MutationKind::Delete => (proto::MutationType::Delete, Some(proto::DeleteType::DeleteMultipleVersions)),
            MutationKind::DeleteVersion => (proto::MutationType::Delete, Some(proto::DeleteType::DeleteOneVersion)),
        };
        let column_value = if self.family.is_empty() {
            Vec::new()
        } else if self.columns.is_empty() {
            // A family delete is one qualifier-less entry of type DELETE_FAMILY.
            vec![proto::ColumnValue {
                family: self.family.clone(),
                qualifier_value: vec![proto::QualifierValue {
                    delete_type: delete_type.map(|d| d as i32),
                    timestamp: self.timestamp,
                    ..Default::default()
                }],
            }]
        } else {
            vec![proto::ColumnValue {
                family: self.family.clone(),
                qualifier_value: self
                    .columns
                    .iter()
                    .map(|(q, v)| proto::QualifierValue {
                        qualifier: Some(q.clone()),
                        value: (!matches!(self.kind, MutationKind::Delete | MutationKind::DeleteVersion))
                            .then(|| v.clone()),
                        timestamp: self.timestamp,
                        delete_type: delete_type.map(|d| d as i32),
                    })
                    .collect(),
            }]
        };
        proto::MutationProto {
            row: Some(self.row.clone()),
            mutate_type: Some(kind as i32),
            column_value,
            timestamp: self.timestamp,
            durability: None,
            nonce,
        }
    }
}

/// Nonces for Increment and Append: the server remembers (nonce group, nonce) of what it applied, so a retry of a
/// call whose answer was lost is answered instead of applied twice. The group is unique per client, the nonce
/// per mutation (kept across its retries).
pub(crate) struct Nonces {
    group: u64,
    next: AtomicU64,
}

impl Nonces {
    pub fn new() -> Nonces {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        // Mix time and pid (splitmix64's finaliser) so two clients started at once get different groups.
        let mut z = (t as u64) ^ ((std::process::id() as u64) << 32) ^ (&t as *const _ as u64);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        Nonces { group: (z ^ (z >> 31)) | 1, next: AtomicU64::new(1) }
    }

    pub fn group(&self) -> u64 {
        self.group
    }

    /// A fresh nonce (for a call that is not a mutation, e.g. a master procedure).
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A nonce for `m` when it needs one.
    pub fn for_mutation(&self, m: &Mutation) -> Option<u64> {
        (!m.is_idempotent()).then(|| self.next.fetch_add(1, Ordering::Relaxed))
    }
}
