//! The `tsdb-uid` table: names of metrics, tag keys and tag values mapped to fixed-width ids (spec: ingest §4.10).
//!
//! Each kind keeps its max-id counter, forward map (name -> id) and reverse map (id -> name) in `tsdb-uid`, and
//! a new name is assigned by OpenTSDB's own protocol: an atomic increment of the counter, a compare-and-set of
//! the reverse map, then a compare-and-set of the forward map. So writers that share the table (rtsd nodes and
//! OpenTSDB TSDs on one HBase cluster) can assign at once: the forward map's compare-and-set decides which id a
//! name gets, and a loser's id is left unused (orphaned, as OpenTSDB leaves it). A crash between the steps
//! wastes an id at worst; no id is ever handed out twice. Hot names are answered from bounded in-memory caches
//! and never touch the engine.
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use quick_cache::sync::Cache;
use rtsd_protocol::codec;
use rtsd_protocol::javafmt;
use rtsd_protocol::point::UidKind;

use super::engine::{cell_key, CheckAndPut, Durability, Engine, ReadHints, WriteBatch};
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
    /// Names being assigned (or renamed) by this process: one caller per name at a time, so two connections
    /// naming a new metric at once get the same id without wasting one, while different names are assigned at
    /// once (one lock per kind held over each name's round trips made every connection wait on every new name:
    /// ~160 ms per name on HBase, bench/RESULTS.md). Other writers of the table (other nodes, OpenTSDB's TSDs)
    /// are kept apart by the protocol itself (see the module comment), not by this.
    claims: Claims,
}

/// A set of names claimed by callers of this process, and a way to wait for a name to be released.
#[derive(Default)]
struct Claims {
    names: Mutex<HashSet<String>>,
    released: Condvar,
}

/// Names claimed until dropped.
struct Claim<'a> {
    claims: &'a Claims,
    names: Vec<String>,
}

impl Claims {
    /// Claims every one of `names` at once, waiting until none is claimed by another caller. All or none are
    /// taken in one step, so callers that claim several names (a rename) cannot deadlock each other.
    fn claim_all(&self, names: &[&str]) -> Claim<'_> {
        let mut held = self.names.lock().unwrap_or_else(|e| e.into_inner());
        while names.iter().any(|n| held.contains(*n)) {
            held = self.released.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        held.extend(names.iter().cloned());
        Claim { claims: self, names }
    }

    /// Claims those of `names` no other caller holds, without waiting; returns them claimed (in the order given)
    /// and the others.
    fn claim_free<'n>(&self, names: &[&'n str]) -> (Claim<'_>, Vec<&'n str>, Vec<&'n str>) {
        let mut held = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let (mut taken, mut busy) = (Vec::new(), Vec::new());
        for &name in names {
            if held.insert(name.to_string()) {
                taken.push(name);
            } else {
                busy.push(name);
            }
        }
        let claim = Claim { claims: self, names: taken.iter().map(|n| n.to_string()).collect() };
        (claim, taken, busy)
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.names.is_empty() {
            return;
        }
        let mut held = self.claims.names.lock().unwrap_or_else(|e| e.into_inner());
        for name in &self.names {
            held.remove(name);
        }
        drop(held);
        self.claims.released.notify_all();
    }
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
            claims: Claims::default(),
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
        let _claim = self.claims.claim_all(&[name]);
        // A caller of this process that held the name before us assigned it (or found it assigned) meanwhile.
        // Another writer of the table may have too: then the forward map's compare-and-set tells us, below.
        if let Some(uid) = self.by_name.get(name) {
            return Ok(uid);
        }
        one(self.assign_claimed(db, metrics, &[name])?)
    }

    /// `/api/uid/assign`: a new UID for `name`, or the UID it already has as [`AssignError::Exists`].
    fn assign_new(&self, db: &dyn Engine, metrics: &Metrics, name: &str) -> Result<Uid, AssignError> {
        let _claim = self.claims.claim_all(&[name]);
        if let Some(uid) = self.lookup_stored(db, name)? {
            self.remember(name, uid);
            return Err(AssignError::Exists(uid));
        }
        Ok(one(self.assign_claimed(db, metrics, &[name])?)?)
    }

    /// Resolves many names at once, for an engine whose every call is a round trip: the names not cached are
    /// read in one [`Engine::get_many`], and with `create` those not stored are assigned together (see
    /// [`UidTable::assign_claimed`]), so a batch of new names costs a handful of round trips instead of several
    /// per name. Best effort: a name left unresolved (claimed by another caller, or whose assignment failed) is
    /// resolved by [`UidTable::get_or_create`] when its point is added, which reports what fails. Errs only
    /// when the engine could not be read or the counter not incremented.
    fn resolve_many(&self, db: &dyn Engine, metrics: &Metrics, names: &[&str], create: bool) -> Result<(), UidError> {
        let mut seen = HashSet::new();
        let wanted: Vec<&str> =
            names.iter().copied().filter(|n| seen.insert(*n) && self.by_name.get(*n).is_none()).collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let kind = self.kind.as_str().as_bytes();
        let keys: Vec<Vec<u8>> = wanted.iter().map(|n| cell_key(kind, n.as_bytes())).collect();
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut missing = Vec::new();
        let started = std::time::Instant::now();
        db.get_many(CF_UID_ID, &key_refs, false, ReadHints::default(), &mut |i, value| {
            metrics.uid_cache_miss(self.kind);
            match value.and_then(|v| Uid::from_slice(v).filter(|_| v.len() == self.width)) {
                Some(uid) => self.remember(wanted[i], uid),
                // A stored id of the wrong width is reported by the point's own lookup.
                None if value.is_some() => {}
                None => missing.push(wanted[i]),
            }
            Ok(())
        })?;
        let looked_up = started.elapsed();
        if !create || missing.is_empty() {
            return Ok(());
        }
        let (_claim, claimed, _busy) = self.claims.claim_free(&missing);
        // Assigned by a caller that released its claim between the read above and our claim.
        let claimed: Vec<&str> = claimed.into_iter().filter(|n| self.by_name.get(*n).is_none()).collect();
        if claimed.is_empty() {
            return Ok(());
        }
        for outcome in self.assign_claimed(db, metrics, &claimed)? {
            if let Err(e) = outcome {
                tracing::debug!(kind = %self.kind, error = %e, "UID not assigned ahead of its point");
            }
        }
        // Where a batch of new names waits (on HBase each step is a round trip to a region server).
        tracing::debug!(
            kind = %self.kind,
            looked_up = wanted.len(),
            assigned = claimed.len(),
            lookup_ms = looked_up.as_secs_f64() * 1e3,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "new names resolved"
        );
        Ok(())
    }

    /// Hands out ids to `names` by OpenTSDB's protocol (see the module comment): one increment of the counter by
    /// the number of names reserves a block of ids no other writer gets (OpenTSDB increments by one per name;
    /// the counter means the same either way), then the reverse maps' compare-and-sets, then the forward maps',
    /// each step for every name at once. The caller has claimed the names and found them unassigned. One outcome
    /// per name, in order; Err when no id could be reserved at all.
    fn assign_claimed(
        &self,
        db: &dyn Engine,
        metrics: &Metrics,
        names: &[&str],
    ) -> Result<Vec<Result<Uid, UidError>>, UidError> {
        let max = codec::max_uid(self.width);
        let exhausted = || UidError::Exhausted { kind: self.kind, width: self.width };
        if self.max_id.load(Ordering::Acquire) >= max {
            metrics.uid_rejected(self.kind);
            return Err(exhausted());
        }
        let kind = self.kind.as_str().as_bytes();
        let started = std::time::Instant::now();
        let top = db.increment(CF_UID_ID, &cell_key(kind, &[0]), names.len() as i64)? as u64;
        let incremented = started.elapsed();
        self.max_id.fetch_max(top.min(max), Ordering::AcqRel);
        let first = top + 1 - names.len() as u64;
        let mut outcomes: Vec<Result<Uid, UidError>> = Vec::with_capacity(names.len());
        // (index, name, id) of the names whose id is within the width.
        let mut placed: Vec<(usize, &str, Uid)> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let id = first + i as u64;
            if id > max {
                metrics.uid_rejected(self.kind);
                outcomes.push(Err(exhausted()));
            } else {
                let uid = Uid::from_id(id, self.width);
                outcomes.push(Ok(uid));
                placed.push((i, name, uid));
            }
        }
        // The reverse maps first: an id whose name is set but not its forward map is an orphan nobody reads.
        let reverse_keys: Vec<Vec<u8>> = placed.iter().map(|(_, _, uid)| cell_key(kind, uid.as_bytes())).collect();
        let reverse: Vec<CheckAndPut<'_>> = placed
            .iter()
            .zip(&reverse_keys)
            .map(|((_, name, _), key)| CheckAndPut { key, expected: None, value: name.as_bytes() })
            .collect();
        let mut forward_of = Vec::new();
        let reversed = db.check_and_put_many(CF_UID_NAME, &reverse);
        let reverse_done = started.elapsed();
        for ((i, name, uid), done) in placed.iter().zip(reversed) {
            match done {
                Ok(true) => forward_of.push((*i, *name, *uid)),
                Ok(false) => {
                    outcomes[*i] = Err(StoreError::Corrupt(format!(
                        "{} id {} was handed out twice: its reverse mapping exists",
                        self.kind,
                        codec::uid_to_string(uid.as_bytes())
                    ))
                    .into())
                }
                Err(e) => outcomes[*i] = Err(e.into()),
            }
        }
        let forward_keys: Vec<Vec<u8>> =
            forward_of.iter().map(|(_, name, _)| cell_key(kind, name.as_bytes())).collect();
        let forward: Vec<CheckAndPut<'_>> = forward_of
            .iter()
            .zip(&forward_keys)
            .map(|((_, _, uid), key)| CheckAndPut { key, expected: None, value: uid.as_bytes() })
            .collect();
        // The UIDMetas with their `created` time, as OpenTSDB writes with `tsd.core.meta.enable_realtime_uid`: one
        // write for all the names, under way beside the forward maps' compare-and-sets rather than after them (on
        // HBase a round trip fewer for each batch of new names, which an HTTP request waits for). It is keyed by
        // the id, which the reverse map already made this writer's alone; a name whose forward map another writer
        // wins leaves its orphan id's UIDMeta, as it leaves the id's reverse map.
        let uid_meta = meta::uid_meta_storage_json(self.kind, meta::now_seconds());
        let mut batch = WriteBatch::default();
        for (_, _, uid) in &forward_of {
            batch.put(CF_UID_NAME, &cell_key(meta::uid_meta_qualifier(self.kind), uid.as_bytes()), uid_meta.as_bytes());
        }
        let (forward_done, metas_written) = std::thread::scope(|scope| {
            let metas = (!forward_of.is_empty()).then(|| scope.spawn(|| db.write(batch, Durability::Logged)));
            let forward_done = db.check_and_put_many(CF_UID_ID, &forward);
            let written = metas.map_or(Ok(()), |m| m.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            (forward_done, written)
        });
        tracing::debug!(
            kind = %self.kind,
            names = names.len(),
            increment_ms = incremented.as_secs_f64() * 1e3,
            reverse_ms = (reverse_done - incremented).as_secs_f64() * 1e3,
            forward_ms = (started.elapsed() - reverse_done).as_secs_f64() * 1e3,
            "UIDs assigned: increment, reverse and forward compare-and-sets"
        );
        let mut won = Vec::new();
        for ((i, name, uid), done) in forward_of.iter().zip(forward_done) {
            outcomes[*i] = match done {
                Ok(true) => {
                    won.push((*name, *uid));
                    Ok(*uid)
                }
                // Another writer of the table assigned the name meanwhile: its id is the name's.
                Ok(false) => self.lookup_stored(db, name).map_err(UidError::from).and_then(|winner| {
                    let winner = winner.ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "{} '{name}': forward mapping vanished during assignment",
                            self.kind
                        ))
                    })?;
                    tracing::info!(
                        kind = %self.kind, name, orphan = %codec::uid_to_string(uid.as_bytes()), "UID race lost"
                    );
                    self.remember(name, winner);
                    Ok(winner)
                }),
                Err(e) => Err(e.into()),
            };
        }
        if let Err(e) = metas_written {
            if !won.is_empty() {
                // The mappings stand (they are the assignment); only the UIDMetas are missing, as after a crash
                // between the steps. The callers hear the error and will find the names assigned when they retry.
                for (name, uid) in &won {
                    self.remember(name, *uid);
                }
                return Err(e.into());
            }
        }
        for (name, uid) in won {
            metrics.uid_assigned(self.kind);
            tracing::info!(kind = %self.kind, name, uid = %codec::uid_to_string(uid.as_bytes()), "assigned UID");
            self.remember(name, uid);
        }
        Ok(outcomes)
    }

    /// Gives the UID of `old` the name `new` (OpenTSDB's `UniqueId.rename`): the reverse map, the new forward map
    /// and the removal of the old one in one atomic write, then the caches and the suggest index. Data rows,
    /// the series index and metadata are keyed by UID, so they follow the new name with no rewrite.
    fn rename(&self, db: &dyn Engine, old: &str, new: &str) -> Result<Uid, RenameError> {
        // Both names: neither may be assigned by this process while the mappings move.
        let _claim = self.claims.claim_all(&[old, new]);
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

/// The names of a batch's points, by kind, each once in the order first seen (so that new names get ids in the
/// order their points came, as when each point is resolved in turn): what [`Store::resolve_names`] resolves.
#[derive(Default)]
pub struct Names {
    kinds: [Vec<String>; 3],
    seen: [HashSet<String>; 3],
}

impl Names {
    pub fn add(&mut self, kind: UidKind, name: &str) {
        let i = kind.index();
        if !self.seen[i].contains(name) {
            self.seen[i].insert(name.to_string());
            self.kinds[i].push(name.to_string());
        }
    }

    /// A point's metric, tag keys and tag values.
    pub fn add_point(&mut self, point: &rtsd_protocol::point::DataPoint<'_>) {
        self.add(UidKind::Metric, &point.metric);
        for (k, v) in &point.tags {
            self.add(UidKind::TagKey, k);
            self.add(UidKind::TagValue, v);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.iter().all(Vec::is_empty)
    }

    /// The names of one kind, in the order first added.
    pub fn of(&self, kind: UidKind) -> Vec<&str> {
        self.kinds[kind.index()].iter().map(String::as_str).collect()
    }
}

/// The one outcome of an assignment of one name.
fn one(mut outcomes: Vec<Result<Uid, UidError>>) -> Result<Uid, UidError> {
    outcomes
        .pop()
        .unwrap_or_else(|| Err(StoreError::Corrupt("an assignment of one name gave no outcome".into()).into()))
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

    /// Resolves many names of `kind` at once (see [`UidTable::resolve_many`]): what a batch of points does
    /// before adding them one by one, on an engine whose lookups are round trips.
    pub fn resolve_many(&self, kind: UidKind, names: &[&str], create: bool) -> Result<(), UidError> {
        self.table(kind).resolve_many(self.db.as_ref(), &self.metrics, names, create)
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
    /// Whether a batch of points gains by resolving its new names together ([`Store::resolve_names`]) before
    /// its points are added: on an engine whose every lookup is a round trip (HBase). On the embedded engine a
    /// lookup is a read of memory or disk, and the point's own is as cheap.
    pub fn resolves_names_in_batches(&self) -> bool {
        !self.node_local
    }

    /// Resolves `names` (assigning new ones where the configuration auto-creates them), the three kinds at once,
    /// each kind's names together (see [`UidTable::resolve_many`]). Best effort, ahead of adding the points: each
    /// point's own lookup then finds its names cached, and reports whatever failed here. Errs when the engine
    /// failed (e.g. HBase unreachable), so the caller can fail its points at once instead of waiting again.
    pub fn resolve_names(&self, names: &Names) -> Result<(), StoreError> {
        if names.is_empty() {
            return Ok(());
        }
        let resolve = |kind: UidKind| {
            let of_kind = names.of(kind);
            if of_kind.is_empty() {
                return Ok(());
            }
            self.uids.resolve_many(kind, &of_kind, self.auto_create[kind.index()])
        };
        let outcomes: Vec<Result<(), UidError>> = std::thread::scope(|s| {
            let threads: Vec<_> =
                [UidKind::TagKey, UidKind::TagValue].map(|kind| s.spawn(move || resolve(kind))).into_iter().collect();
            let mut outcomes = vec![resolve(UidKind::Metric)];
            outcomes.extend(threads.into_iter().map(|t| t.join().expect("a UID resolution panicked")));
            outcomes
        });
        for outcome in outcomes {
            match outcome {
                Ok(()) | Err(UidError::NoSuchName { .. } | UidError::Exhausted { .. }) => {}
                Err(UidError::Store(e)) => {
                    self.health.failed("uid", &e);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Renames a UID's name (`/api/uid/rename`) and tells connections to drop the name -> UID resolutions they
    /// cached, so a later point named `old` is a new name again, as on the OpenTSDB daemon that did the rename.
    pub fn rename_uid(&self, kind: UidKind, old: &str, new: &str) -> Result<Uid, RenameError> {
        let uid = self.uids.rename(kind, old, new)?;
        self.generation.fetch_add(1, Ordering::Release);
        Ok(uid)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::super::engine::rocks::{RocksEngine, RocksOptions};
    use super::super::engine::{CellMap, Cursor, RowVisitor, TableSpec, Tuning};
    use super::*;

    /// What a [`Hooked`] engine does before a compare-and-set: `(table, key, value)`.
    type BeforeCas = Box<dyn Fn(&RocksEngine, &str, &[u8], &[u8]) + Send + Sync>;

    /// RocksDB with a hook before each compare-and-set and a count of the calls a round-trip engine would pay.
    struct Hooked {
        inner: RocksEngine,
        before_cas: BeforeCas,
        calls: [AtomicUsize; 5],
    }

    /// Indexes of [`Hooked::calls`].
    const GET: usize = 0;
    const GET_MANY: usize = 1;
    const INCREMENT: usize = 2;
    const CAS: usize = 3;
    const WRITE: usize = 4;

    impl Hooked {
        fn open(dir: &std::path::Path, before_cas: BeforeCas) -> Hooked {
            let specs = [
                TableSpec::new(CF_UID_ID, CellMap::QualifierRow, Tuning::Small),
                TableSpec::new(CF_UID_NAME, CellMap::QualifierRow, Tuning::Small),
            ];
            let options = RocksOptions {
                memtable_bytes: 8 << 20,
                block_cache_bytes: 1 << 20,
                max_open_files: 64,
                read_only: false,
            };
            let inner = RocksEngine::open(dir, &specs, &options).unwrap();
            Hooked { inner, before_cas, calls: Default::default() }
        }

        fn calls(&self) -> [usize; 5] {
            self.calls.each_ref().map(|c| c.load(Ordering::SeqCst))
        }

        fn count(&self, i: usize) {
            self.calls[i].fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Engine for Hooked {
        fn name(&self) -> &'static str {
            "hooked"
        }
        fn has_table(&self, table: &str) -> bool {
            self.inner.has_table(table)
        }
        fn get(&self, table: &str, key: &[u8], hints: ReadHints) -> Result<Option<Vec<u8>>, StoreError> {
            self.count(GET);
            self.inner.get(table, key, hints)
        }
        fn get_many(
            &self,
            table: &str,
            keys: &[&[u8]],
            sorted: bool,
            hints: ReadHints,
            f: &mut RowVisitor<'_>,
        ) -> Result<(), StoreError> {
            self.count(GET_MANY);
            self.inner.get_many(table, keys, sorted, hints, f)
        }
        fn cursor(&self, table: &str, hints: ReadHints) -> Option<Box<dyn Cursor + '_>> {
            self.inner.cursor(table, hints)
        }
        fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), StoreError> {
            self.count(WRITE);
            self.inner.write(batch, durability)
        }
        fn sync(&self) -> Result<(), StoreError> {
            self.inner.sync()
        }
        fn increment(&self, table: &str, key: &[u8], delta: i64) -> Result<i64, StoreError> {
            self.count(INCREMENT);
            self.inner.increment(table, key, delta)
        }
        fn check_and_put(
            &self,
            table: &str,
            key: &[u8],
            expected: Option<&[u8]>,
            value: &[u8],
        ) -> Result<bool, StoreError> {
            self.count(CAS);
            (self.before_cas)(&self.inner, table, key, value);
            self.inner.check_and_put(table, key, expected, value)
        }
    }

    fn uids(engine: Hooked) -> (Arc<Hooked>, Uids) {
        let engine = Arc::new(engine);
        let uids = Uids::open(engine.clone(), [3, 3, 3], 1000, Arc::new(Metrics::new())).unwrap();
        (engine, uids)
    }

    /// Issue 21 item 5: one lock per kind over each new name's round trips made every connection wait on any
    /// new name (~160 ms per name on HBase). A name whose assignment is stuck must not hold up another's.
    #[test]
    fn a_new_name_is_assigned_while_another_is_stuck() {
        let dir = tempfile::tempdir().unwrap();
        let (stuck_tx, stuck_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (stuck_tx, release_rx) = (Mutex::new(stuck_tx), Mutex::new(release_rx));
        let hook: BeforeCas = Box::new(move |_, table, _, value| {
            // The reverse map of "slow": tell the test, then wait for it.
            if table == CF_UID_NAME && value == b"slow" {
                stuck_tx.lock().unwrap().send(()).unwrap();
                release_rx.lock().unwrap().recv_timeout(Duration::from_secs(30)).unwrap();
            }
        });
        let (_engine, uids) = uids(Hooked::open(dir.path(), hook));
        let uids = Arc::new(uids);
        let slow = {
            let uids = uids.clone();
            std::thread::spawn(move || uids.get_or_create(UidKind::Metric, "slow", true).unwrap())
        };
        stuck_rx.recv_timeout(Duration::from_secs(10)).expect("slow's assignment reached its reverse map");
        let (done_tx, done_rx) = mpsc::channel();
        {
            let uids = uids.clone();
            std::thread::spawn(move || done_tx.send(uids.get_or_create(UidKind::Metric, "fast", true).unwrap()));
        }
        let fast = done_rx.recv_timeout(Duration::from_secs(5));
        release_tx.send(()).unwrap();
        let fast = fast.expect("fast was assigned while slow's assignment was stuck");
        let slow = slow.join().unwrap();
        assert_eq!((slow.as_bytes(), fast.as_bytes()), ([0, 0, 1].as_slice(), [0, 0, 2].as_slice()));
        assert_eq!(uids.name_of(UidKind::Metric, &[0, 0, 2]).unwrap().as_deref(), Some("fast"));
    }

    #[test]
    fn callers_naming_one_new_name_at_once_get_one_id_and_waste_none() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, uids) = uids(Hooked::open(dir.path(), Box::new(|_, _, _, _| {})));
        let uids = Arc::new(uids);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let uids = uids.clone();
                std::thread::spawn(move || uids.get_or_create(UidKind::TagValue, "web01", true).unwrap())
            })
            .collect();
        let got: HashSet<Vec<u8>> = threads.into_iter().map(|t| t.join().unwrap().as_bytes().to_vec()).collect();
        assert_eq!(got, HashSet::from([vec![0, 0, 1]]));
        // One increment and one pair of compare-and-sets: the others waited for the name and found it.
        assert_eq!(engine.calls()[INCREMENT], 1);
        assert_eq!(engine.calls()[CAS], 2);
        assert_eq!(uids.table(UidKind::TagValue).ids_used(), 1);
    }

    /// A batch's new names cost the same few calls whatever their number (each a round trip on HBase): one read
    /// of them all, one increment, the reverse compare-and-sets, then the forward ones (all in flight at once on
    /// HBase) beside one write of their UIDMetas. Ids follow the names' order.
    #[test]
    fn a_batch_of_new_names_is_resolved_in_a_few_calls() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, uids) = uids(Hooked::open(dir.path(), Box::new(|_, _, _, _| {})));
        uids.get_or_create(UidKind::TagValue, "known", true).unwrap();
        let before = engine.calls();
        let names: Vec<String> = (0..50).map(|i| format!("host{i:02}")).collect();
        let mut asked: Vec<&str> = names.iter().map(String::as_str).collect();
        asked.extend(["known", "host00"]);
        uids.resolve_many(UidKind::TagValue, &asked, true).unwrap();
        let after = engine.calls();
        let spent: Vec<usize> = after.iter().zip(before).map(|(a, b)| a - b).collect();
        // known is cached: not read again; host00 is asked twice and assigned once.
        assert_eq!(spent, vec![0, 1, 1, 100, 1], "get, get_many, increment, compare-and-sets, write");
        for (i, name) in names.iter().enumerate() {
            let uid = uids.get_or_create(UidKind::TagValue, name, true).unwrap();
            assert_eq!(uid.as_bytes(), Uid::from_id(i as u64 + 2, 3).as_bytes(), "{name}");
            assert_eq!(uids.name_of(UidKind::TagValue, uid.as_bytes()).unwrap().as_deref(), Some(name.as_str()));
        }
        // Every one answered from the cache; the counter says 51 ids are out.
        assert_eq!(engine.calls(), after);
        assert_eq!(uids.table(UidKind::TagValue).ids_used(), 51);
        let stored = engine.get(CF_UID_ID, &cell_key(b"tagv", &[0]), ReadHints::default()).unwrap();
        assert_eq!(stored, Some(51i64.to_be_bytes().to_vec()));
        // Their UIDMetas were written (in the one write).
        let meta = engine.get(CF_UID_NAME, &cell_key(b"tagv_meta", &[0, 0, 51]), ReadHints::default()).unwrap();
        assert!(meta.is_some_and(|m| m.starts_with(b"{")));
        // Names already stored are read, not assigned; without `create` an unknown one stays unknown.
        let (_e2, fresh) = uids_of(engine.clone());
        fresh.resolve_many(UidKind::TagValue, &["host07", "nobody"], false).unwrap();
        assert_eq!(fresh.get(UidKind::TagValue, "host07").unwrap().map(|u| u.as_bytes().to_vec()), Some(vec![0, 0, 9]));
        assert!(fresh.get(UidKind::TagValue, "nobody").unwrap().is_none());
        assert_eq!(fresh.table(UidKind::TagValue).ids_used(), 51);
    }

    fn uids_of(engine: Arc<Hooked>) -> (Arc<Hooked>, Uids) {
        let uids = Uids::open(engine.clone(), [3, 3, 3], 1000, Arc::new(Metrics::new())).unwrap();
        (engine, uids)
    }

    /// Another writer of the table (an OpenTSDB TSD, another node) maps a name between our read and our forward
    /// compare-and-set: the name gets that writer's id, our id for it is left unused (as OpenTSDB leaves it),
    /// and the other names of the batch keep theirs.
    #[test]
    fn a_name_another_writer_maps_meanwhile_gets_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let hook: BeforeCas = Box::new(|inner, table, key, _| {
            if table == CF_UID_ID && key == cell_key(b"metrics", b"raced").as_slice() {
                // The other writer's forward map lands first (its reverse map too, as its protocol does).
                inner.check_and_put(CF_UID_NAME, &cell_key(b"metrics", &[0, 0, 9]), None, b"raced").unwrap();
                inner.check_and_put(CF_UID_ID, key, None, &[0, 0, 9]).unwrap();
            }
        });
        let (_engine, uids) = uids(Hooked::open(dir.path(), hook));
        uids.resolve_many(UidKind::Metric, &["a", "raced", "b"], true).unwrap();
        let id = |name: &str| uids.get(UidKind::Metric, name).unwrap().map(|u| u.as_bytes().to_vec());
        assert_eq!((id("a"), id("raced"), id("b")), (Some(vec![0, 0, 1]), Some(vec![0, 0, 9]), Some(vec![0, 0, 3])));
        assert_eq!(uids.name_of(UidKind::Metric, &[0, 0, 2]).unwrap().as_deref(), Some("raced"), "the orphan");
    }

    /// A rename holds both names: an assignment of the new name waits for it, and then finds the name taken.
    #[test]
    fn a_rename_and_an_assignment_of_its_new_name_do_not_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let (_engine, uids) = uids(Hooked::open(dir.path(), Box::new(|_, _, _, _| {})));
        let old = uids.get_or_create(UidKind::Metric, "old", true).unwrap();
        let uids = Arc::new(uids);
        let claim = uids.table(UidKind::Metric).claims.claim_all(&["new"]);
        let renamer = {
            let uids = uids.clone();
            std::thread::spawn(move || uids.rename(UidKind::Metric, "old", "new").map(|u| u.as_bytes().to_vec()))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!renamer.is_finished(), "the rename waits for the claimed name");
        drop(claim);
        assert_eq!(renamer.join().unwrap().unwrap(), old.as_bytes());
        assert!(matches!(uids.assign_new(UidKind::Metric, "new"), Err(AssignError::Exists(u)) if u == old));
    }
}
