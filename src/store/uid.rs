//! The `tsdb-uid` table: names of metrics, tag keys and tag values mapped to fixed-width ids (spec: ingest §4.10).
//!
//! Each kind keeps its max-id counter, forward map (name -> id) and reverse map (id -> name) in `tsdb-uid`, and
//! a new name is assigned by OpenTSDB's own protocol: an atomic increment of the counter, a compare-and-set of
//! the reverse map, then a compare-and-set of the forward map. So writers that share the table (rtsd nodes and
//! OpenTSDB TSDs on one HBase cluster) can assign at once: the forward map's compare-and-set decides which id a
//! name gets, and a loser's id is left unused (orphaned, as OpenTSDB leaves it). A crash between the steps
//! wastes an id at worst; no id is ever handed out twice. Hot names are answered from bounded in-memory caches
//! and never touch the engine.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use quick_cache::sync::Cache;
use rtsd_protocol::codec;
use rtsd_protocol::javafmt;
use rtsd_protocol::point::UidKind;

use super::engine::{cell_key, Durability, Engine, ReadHints, WriteBatch};
use super::{meta, Store, StoreError, CF_UID_ID, CF_UID_NAME};
use crate::metrics::Metrics;

/// A UID: `width` big-endian bytes (1..8), on the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uid {
    bytes: [u8; 8],
    len: u8,
}

impl Uid {
    pub fn from_slice(b: &[u8]) -> Option<Uid> {
        if b.is_empty() || b.len() > 8 {
            return None;
        }
        let mut bytes = [0u8; 8];
        bytes[..b.len()].copy_from_slice(b);
        Some(Uid { bytes, len: b.len() as u8 })
    }

    fn from_id(id: u64, width: usize) -> Uid {
        let be = id.to_be_bytes();
        let mut bytes = [0u8; 8];
        bytes[..width].copy_from_slice(&be[8 - width..]);
        Uid { bytes, len: width as u8 }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// Why a name has no UID to give.
#[derive(Debug, thiserror::Error)]
pub enum UidError {
    /// The name is unknown and auto-creation is off for its kind (`NoSuchUniqueName`).
    #[error("No such name for '{kind}': '{name}'")]
    NoSuchName { kind: UidKind, name: String },
    /// Every id of the width is taken (OpenTSDB's exact text).
    #[error("All Unique IDs for {kind} on {width} bytes are already assigned!")]
    Exhausted { kind: UidKind, width: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why `/api/uid/assign` gave no new UID to a name; `Display` is OpenTSDB's reason text.
#[derive(Debug, thiserror::Error)]
pub enum AssignError {
    #[error("Name already exists with UID: {}", codec::uid_to_string(.0.as_bytes()))]
    Exists(Uid),
    #[error(transparent)]
    Uid(#[from] UidError),
}

impl From<StoreError> for AssignError {
    fn from(e: StoreError) -> Self {
        AssignError::Uid(UidError::Store(e))
    }
}

/// Why `/api/uid/rename` refused; `Display` is OpenTSDB's text (`TSDB.renameUid`, `UniqueId.rename`).
#[derive(Debug, thiserror::Error)]
pub enum RenameError {
    #[error("Name(\"{0}\") does not exist")]
    NoSuchName(String),
    #[error(
        "When trying rename(\"{old}\", \"{new}\") on UniqueId(tsdb-uid, {kind}, {width}): new name already \
         assigned ID={id}"
    )]
    Exists { old: String, new: String, kind: UidKind, width: usize, id: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One kind's UID table with its caches.
pub struct UidTable {
    kind: UidKind,
    width: usize,
    by_name: Cache<String, Uid>,
    by_id: Cache<Uid, String>,
    /// Highest id handed out; mirrors the counter row so assignment needs no read.
    max_id: AtomicU64,
    /// Serialises assignment (rare) so two connections naming a new metric at once get the same id.
    assign: Mutex<()>,
}

impl UidTable {
    fn open(db: &dyn Engine, kind: UidKind, width: usize, capacity: usize) -> Result<UidTable, StoreError> {
        let max_id = match db.get(CF_UID_ID, &cell_key(kind.as_str().as_bytes(), &[0]), ReadHints::default())? {
            Some(v) if v.len() == 8 => u64::from_be_bytes(v[..8].try_into().unwrap_or([0; 8])),
            Some(v) => return Err(StoreError::Corrupt(format!("max-id row for {kind} holds {} bytes", v.len()))),
            None => 0,
        };
        Ok(UidTable {
            kind,
            width,
            by_name: Cache::new(capacity),
            by_id: Cache::new(capacity),
            max_id: AtomicU64::new(max_id),
            assign: Mutex::new(()),
        })
    }

    /// The number of ids handed out (OpenTSDB's `uid.ids-used`).
    pub fn ids_used(&self) -> u64 {
        self.max_id.load(Ordering::Relaxed)
    }

    /// The number of ids left on this width (`uid.ids-available`).
    pub fn ids_available(&self) -> u64 {
        codec::max_uid(self.width).saturating_sub(self.ids_used())
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn cache_size(&self) -> usize {
        self.by_name.len()
    }

    fn lookup_stored(&self, db: &dyn Engine, name: &str) -> Result<Option<Uid>, StoreError> {
        let stored =
            db.get(CF_UID_ID, &cell_key(self.kind.as_str().as_bytes(), name.as_bytes()), ReadHints::default())?;
        match stored {
            Some(bytes) => match Uid::from_slice(&bytes) {
                Some(uid) if bytes.len() == self.width => Ok(Some(uid)),
                _ => Err(StoreError::Corrupt(format!(
                    "{} '{name}' maps to {} bytes, expected {}",
                    self.kind,
                    bytes.len(),
                    self.width
                ))),
            },
            None => Ok(None),
        }
    }

    /// The UID of `name`, assigning one when `create` allows it.
    fn get_or_create(&self, db: &dyn Engine, metrics: &Metrics, name: &str, create: bool) -> Result<Uid, UidError> {
        if let Some(uid) = self.by_name.get(name) {
            metrics.uid_cache_hit(self.kind);
            return Ok(uid);
        }
        metrics.uid_cache_miss(self.kind);
        if let Some(uid) = self.lookup_stored(db, name)? {
            self.remember(name, uid);
            return Ok(uid);
        }
        if !create {
            return Err(UidError::NoSuchName { kind: self.kind, name: name.to_string() });
        }
        self.assign(db, metrics, name)
    }

    fn assign(&self, db: &dyn Engine, metrics: &Metrics, name: &str) -> Result<Uid, UidError> {
        let _guard = self.assign.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Another connection may have assigned it while we waited for the lock.
        if let Some(uid) = self.lookup_stored(db, name)? {
            self.remember(name, uid);
            return Ok(uid);
        }
        self.assign_locked(db, metrics, name)
    }

    /// `/api/uid/assign`: a new UID for `name`, or the UID it already has as [`AssignError::Exists`].
    fn assign_new(&self, db: &dyn Engine, metrics: &Metrics, name: &str) -> Result<Uid, AssignError> {
        let _guard = self.assign.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(uid) = self.lookup_stored(db, name)? {
            self.remember(name, uid);
            return Err(AssignError::Exists(uid));
        }
        Ok(self.assign_locked(db, metrics, name)?)
    }

    /// Hands out the next id by OpenTSDB's protocol (see the module comment); the caller holds the assignment
    /// lock and knows `name` was unassigned when it looked.
    fn assign_locked(&self, db: &dyn Engine, metrics: &Metrics, name: &str) -> Result<Uid, UidError> {
        let max = codec::max_uid(self.width);
        if self.max_id.load(Ordering::Acquire) >= max {
            metrics.uid_rejected(self.kind);
            return Err(UidError::Exhausted { kind: self.kind, width: self.width });
        }
        let kind = self.kind.as_str().as_bytes();
        let id = db.increment(CF_UID_ID, &cell_key(kind, &[0]), 1)? as u64;
        self.max_id.fetch_max(id.min(max), Ordering::AcqRel);
        if id > max {
            metrics.uid_rejected(self.kind);
            return Err(UidError::Exhausted { kind: self.kind, width: self.width });
        }
        let uid = Uid::from_id(id, self.width);
        // The reverse map first: an id whose name is set but not its forward map is an orphan nobody reads.
        if !db.check_and_put(CF_UID_NAME, &cell_key(kind, uid.as_bytes()), None, name.as_bytes())? {
            return Err(StoreError::Corrupt(format!(
                "{} id {} was handed out twice: its reverse mapping exists",
                self.kind,
                codec::uid_to_string(uid.as_bytes())
            ))
            .into());
        }
        if !db.check_and_put(CF_UID_ID, &cell_key(kind, name.as_bytes()), None, uid.as_bytes())? {
            // Another writer of the table assigned the name meanwhile: its id is the name's.
            let winner = self.lookup_stored(db, name)?.ok_or_else(|| {
                StoreError::Corrupt(format!("{} '{name}': forward mapping vanished during assignment", self.kind))
            })?;
            tracing::info!(kind = %self.kind, name, orphan = %codec::uid_to_string(uid.as_bytes()), "UID race lost");
            self.remember(name, winner);
            return Ok(winner);
        }
        // The UIDMeta with its `created` time, as OpenTSDB writes with `tsd.core.meta.enable_realtime_uid`.
        let uid_meta = meta::uid_meta_storage_json(self.kind, meta::now_seconds());
        let mut batch = WriteBatch::default();
        batch.put(CF_UID_NAME, &cell_key(meta::uid_meta_qualifier(self.kind), uid.as_bytes()), uid_meta.as_bytes());
        db.write(batch, Durability::Logged)?;
        metrics.uid_assigned(self.kind);
        tracing::info!(kind = %self.kind, name, uid = %codec::uid_to_string(uid.as_bytes()), "assigned UID");
        self.remember(name, uid);
        Ok(uid)
    }

    /// Gives the UID of `old` the name `new` (OpenTSDB's `UniqueId.rename`): the reverse map, the new forward map
    /// and the removal of the old one in one atomic write, then the caches and the suggest index. Data rows,
    /// the series index and metadata are keyed by UID, so they follow the new name with no rewrite.
    fn rename(&self, db: &dyn Engine, old: &str, new: &str) -> Result<Uid, RenameError> {
        let _guard = self.assign.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(uid) = self.lookup_stored(db, old)? else {
            return Err(RenameError::NoSuchName(old.to_string()));
        };
        if let Some(taken) = self.lookup_stored(db, new)? {
            return Err(RenameError::Exists {
                old: old.to_string(),
                new: new.to_string(),
                kind: self.kind,
                width: self.width,
                id: javafmt::byte_array(taken.as_bytes()),
            });
        }
        let kind = self.kind.as_str().as_bytes();
        let mut batch = WriteBatch::default();
        batch.put(CF_UID_NAME, &cell_key(kind, uid.as_bytes()), new.as_bytes());
        batch.put(CF_UID_ID, &cell_key(kind, new.as_bytes()), uid.as_bytes());
        batch.delete(CF_UID_ID, &cell_key(kind, old.as_bytes()));
        db.write(batch, Durability::Logged)?;
        self.by_name.remove(old);
        self.remember(new, uid);
        tracing::info!(kind = %self.kind, old, new, uid = %codec::uid_to_string(uid.as_bytes()), "renamed UID");
        Ok(uid)
    }

    /// The name of a UID, from cache or the reverse map.
    fn name_of(&self, db: &dyn Engine, uid: &[u8]) -> Result<Option<String>, StoreError> {
        let Some(key) = Uid::from_slice(uid) else {
            return Ok(None);
        };
        if let Some(name) = self.by_id.get(&key) {
            return Ok(Some(name));
        }
        let Some(bytes) = db.get(CF_UID_NAME, &cell_key(self.kind.as_str().as_bytes(), uid), ReadHints::default())?
        else {
            return Ok(None);
        };
        let name = String::from_utf8_lossy(&bytes).into_owned();
        self.by_id.insert(key, name.clone());
        Ok(Some(name))
    }

    /// Up to `max` assigned names starting with `prefix`, in byte order (OpenTSDB's `suggest`), read from the
    /// forward map: its keys are `kind 0x00 name`, so one kind's names lie together in byte order and a seek to
    /// the prefix reads exactly the names returned. No copy of every name is kept in memory: with millions of
    /// tag values that copy would be most of the daemon's memory, and the map's recent blocks sit in the block
    /// cache anyway.
    fn suggest(&self, db: &dyn Engine, prefix: &str, max: usize) -> Result<Vec<String>, StoreError> {
        let start = cell_key(self.kind.as_str().as_bytes(), prefix.as_bytes());
        let names_at = start.len() - prefix.len();
        let mut names = Vec::new();
        let Some(mut iter) = db.cursor(CF_UID_ID, ReadHints::default()) else { return Ok(names) };
        // Without a prefix 2.4 scans the names from `!` up to, not including, `~` (UniqueId's START_ROW and
        // END_ROW): a name whose first byte is past ASCII is never suggested then.
        let unprefixed = prefix.is_empty();
        if unprefixed {
            iter.seek(&[start.as_slice(), b"!"].concat());
        } else {
            iter.seek(&start);
        }
        while names.len() < max {
            if !iter.valid() || !iter.key().starts_with(&start) {
                break;
            }
            let key = iter.key();
            let name = &key[names_at..];
            if unprefixed && name.first().is_some_and(|b| *b >= b'~') {
                break;
            }
            // `kind 0x00 0x00` is the kind's id counter, not a name.
            if name != [0] {
                names.push(String::from_utf8_lossy(name).into_owned());
            }
            iter.next();
        }
        iter.status()?;
        Ok(names)
    }

    fn remember(&self, name: &str, uid: Uid) {
        self.by_name.insert(name.to_string(), uid);
        self.by_id.insert(uid, name.to_string());
    }

    fn clear(&self) {
        self.by_name.clear();
        self.by_id.clear();
    }
}

/// The three UID tables of one store.
pub struct Uids {
    db: Arc<dyn Engine>,
    tables: [UidTable; 3],
    metrics: Arc<Metrics>,
}

impl Uids {
    pub(super) fn open(
        db: Arc<dyn Engine>,
        widths: [usize; 3],
        capacity: usize,
        metrics: Arc<Metrics>,
    ) -> Result<Uids, StoreError> {
        let tables = [
            UidTable::open(db.as_ref(), UidKind::Metric, widths[0], capacity)?,
            UidTable::open(db.as_ref(), UidKind::TagKey, widths[1], capacity)?,
            UidTable::open(db.as_ref(), UidKind::TagValue, widths[2], capacity)?,
        ];
        Ok(Uids { db, tables, metrics })
    }

    pub fn table(&self, kind: UidKind) -> &UidTable {
        &self.tables[kind.index()]
    }

    /// Up to `max` names of `kind` starting with `prefix`, in byte order (`/api/suggest`).
    pub fn suggest(&self, kind: UidKind, prefix: &str, max: usize) -> Result<Vec<String>, StoreError> {
        self.table(kind).suggest(self.db.as_ref(), prefix, max)
    }

    /// The UID of a name, assigned if `create`.
    pub fn get_or_create(&self, kind: UidKind, name: &str, create: bool) -> Result<Uid, UidError> {
        self.table(kind).get_or_create(self.db.as_ref(), &self.metrics, name, create)
    }

    /// A new UID for `name` (`/api/uid/assign`); a name that has one already is reported with it.
    pub fn assign_new(&self, kind: UidKind, name: &str) -> Result<Uid, AssignError> {
        self.table(kind).assign_new(self.db.as_ref(), &self.metrics, name)
    }

    /// Renames `old` to `new`, keeping its UID (`/api/uid/rename`).
    pub fn rename(&self, kind: UidKind, old: &str, new: &str) -> Result<Uid, RenameError> {
        self.table(kind).rename(self.db.as_ref(), old, new)
    }

    /// The UID of a name if it has one.
    pub fn get(&self, kind: UidKind, name: &str) -> Result<Option<Uid>, StoreError> {
        match self.get_or_create(kind, name, false) {
            Ok(uid) => Ok(Some(uid)),
            Err(UidError::NoSuchName { .. }) => Ok(None),
            Err(UidError::Store(e)) => Err(e),
            Err(UidError::Exhausted { .. }) => Ok(None),
        }
    }

    /// The name of a UID if it has one.
    pub fn name_of(&self, kind: UidKind, uid: &[u8]) -> Result<Option<String>, StoreError> {
        self.table(kind).name_of(self.db.as_ref(), uid)
    }

    /// Forgets every cached mapping (`dropcaches`); the next lookups read RocksDB again.
    pub fn drop_caches(&self) {
        for t in &self.tables {
            t.clear();
        }
    }
}

impl Store {
    /// Renames a UID's name (`/api/uid/rename`) and tells connections to drop the name -> UID resolutions they
    /// cached, so a later point named `old` is a new name again, as on the OpenTSDB daemon that did the rename.
    pub fn rename_uid(&self, kind: UidKind, old: &str, new: &str) -> Result<Uid, RenameError> {
        let uid = self.uids.rename(kind, old, new)?;
        self.generation.fetch_add(1, Ordering::Release);
        Ok(uid)
    }
}
