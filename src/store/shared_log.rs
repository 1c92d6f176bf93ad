//! The series log of a node whose engine is shared (HBase): acknowledged points kept in a table of the engine
//! itself until the node has written them into their rows, so a point is acknowledged once HBase has it and is
//! still never held only in the node's memory.
//!
//! Without it a node wrote every batch's points into their rows at once: one HBase cell per point wherever a
//! batch held a row's point alone (data set A: every series new, its points 100,000 lines apart), plus the series
//! index and a rollup mark per row, four HBase actions a point on the ingest path against OpenTSDB's one
//! (bench/RESULTS.md, 2026-11-28 22:35). With it a commit is one Put of the batch's points (a record) into the
//! `rtsd` table's `log` family, and the points join the node's series table (see [`super::pending`]) as they do
//! on the embedded engine; the node's flush writes each row's points as one cell, with its index entries and
//! mark, then deletes the records it covered. The flush runs every `rtsd.storage.hbase.flush_ms` (5 s): until
//! then other nodes and OpenTSDB's TSDs do not read the points (OpenTSDB's own TSDs buffer puts for a second
//! before HBase sees them; VictoriaMetrics leaves the newest 30 s out of its answers). A `sync` put is flushed
//! before it is answered, so what it acknowledged reads through every node. The interval is what a row's
//! fragment gathers: a series sending every second (or a backfill) is one HBase cell per 5 points where 1 s made
//! it one per point, and a burst's rows are written after it rather than during it (bench/RESULTS.md,
//! 2026-11-30 00:00: A over HTTP, 58 k points/s at 1 s, 98 k at 5 s).
//!
//! **No node-local state.** Each node writes its records under a node id of its own and keeps a lease row beside
//! them, renewed every few seconds. A node that dies leaves records and a lease that stops being renewed; once it
//! is older than `rtsd.storage.hbase.log_lease_ms`, any other node claims it (a compare-and-set of the lease),
//! writes the records' points into their rows and deletes them. A claim that turns out wrong (a node alive but
//! unable to renew for that long) costs nothing: rows written twice are the same cells, and the node's own flush
//! deletes only its records. The id is kept in the data directory ([`NODE_FILE`], locked while the node runs),
//! so a node restarted there takes its own records over at once, as the embedded engine replays its log at open;
//! a node whose directory is gone is a new node, and its old records wait for their lease like any dead node's.
//!
//! Rows of the log table: `R ‖ node ‖ segment ‖ sequence` (big-endian u64s) for a record, whose value is a
//! format byte then the batch's points as [`super::pending::PointLog`] lays them out; `L ‖ node` for a lease,
//! whose value is [`Lease`]'s.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::engine::{Durability, Engine, ReadHints, WriteBatch};
use super::{pending, StoreError};

/// The log table: a family of rtsd's own HBase table (`create 'rtsd', ..., {NAME => 'log', VERSIONS => 1}`).
pub const CF_LOG: &str = "rtsd:log";

/// How a node of a shared engine holds what it acknowledged (`rtsd.storage.hbase.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOptions {
    /// `rtsd.storage.hbase.flush_ms`: how long acknowledged points may wait in the node before their rows are
    /// written (and other nodes read them).
    pub flush_interval: Duration,
    /// `rtsd.storage.hbase.log_lease_ms`: how long a node's lease may go unrenewed before another node takes
    /// over its records.
    pub lease: Duration,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions { flush_interval: Duration::from_secs(5), lease: Duration::from_secs(30) }
    }
}

/// The format of a record's value (its first byte).
const RECORD_FORMAT: u8 = 1;
/// A batch's points are split into records of at most this many bytes (HBase refuses cells past 10 MB).
const RECORD_BYTES: usize = 2 << 20;
/// Records a rescue reads and writes into rows at a time.
const RESCUE_RECORDS: usize = 32;
/// A lease whose node's records were all rescued is deleted once it is this many leases old.
const RETIRED_LEASES: u32 = 10;

/// The file in the data directory that keeps the node's id (see the module's comment).
pub const NODE_FILE: &str = "shared-log-node";

const NODE_BYTES: usize = 16;
type NodeId = [u8; NODE_BYTES];

/// What a lease row says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lease {
    /// When it was last written, ms since the epoch (the writer's clock).
    at_ms: u64,
    /// The node holding the records: their own node, or one rescuing them.
    holder: NodeId,
    state: LeaseState,
    /// `host:pid` of the node that wrote it, for logs.
    about: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseState {
    Live = 0,
    Claimed = 1,
    /// Every record was rescued: nothing left to take over.
    Retired = 2,
}

impl Lease {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(8 + NODE_BYTES + 1 + self.about.len());
        v.extend_from_slice(&self.at_ms.to_be_bytes());
        v.extend_from_slice(&self.holder);
        v.push(self.state as u8);
        v.extend_from_slice(self.about.as_bytes());
        v
    }

    fn decode(v: &[u8]) -> Option<Lease> {
        let at_ms = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
        let holder: NodeId = v.get(8..8 + NODE_BYTES)?.try_into().ok()?;
        let state = match *v.get(8 + NODE_BYTES)? {
            0 => LeaseState::Live,
            1 => LeaseState::Claimed,
            2 => LeaseState::Retired,
            _ => return None,
        };
        let about = String::from_utf8_lossy(&v[8 + NODE_BYTES + 1..]).into_owned();
        Some(Lease { at_ms, holder, state, about })
    }
}

fn lease_key(node: &NodeId) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + NODE_BYTES);
    k.push(b'L');
    k.extend_from_slice(node);
    k
}

fn record_key(node: &NodeId, segment: u64, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + NODE_BYTES + 16);
    k.push(b'R');
    k.extend_from_slice(node);
    k.extend_from_slice(&segment.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The key range of a node's records: `[start, end)`.
fn records_of(node: &NodeId) -> (Vec<u8>, Vec<u8>) {
    let mut start = vec![b'R'];
    start.extend_from_slice(node);
    let mut end = start.clone();
    end.extend_from_slice(&[0xff; 17]);
    (start, end)
}

/// A node id: 16 lowercase hex digits, random per process (a restarted node's old records are taken over like
/// any dead node's).
fn new_node_id() -> NodeId {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let mut id = [0u8; NODE_BYTES];
    id.copy_from_slice(format!("{:016x}", h.finish()).as_bytes());
    id
}

fn now_ms() -> u64 {
    crate::timefmt::now_ms().max(0) as u64
}

/// Splits a batch's logged points into pieces of at most [`RECORD_BYTES`] (one piece when smaller), each whole
/// entries.
fn pieces(mut payload: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while payload.len() > RECORD_BYTES {
        let mut cut = 0;
        for (key, column) in pending::entries(payload) {
            let len = 2 + key.len() + 1 + column.len();
            if cut + len > RECORD_BYTES && cut > 0 {
                break;
            }
            cut += len;
        }
        if cut == 0 {
            break;
        }
        out.push(&payload[..cut]);
        payload = &payload[cut..];
    }
    if !payload.is_empty() {
        out.push(payload);
    }
    out
}

/// The node id kept in `data_dir` (written there when absent or unreadable), with the file locked for as long as
/// it is held; a fresh id, with nothing kept, when another process holds the file (two nodes must never share an
/// id: their records' keys would collide).
fn node_id_in(data_dir: &std::path::Path) -> std::io::Result<(NodeId, Option<std::fs::File>)> {
    use std::io::Read;
    std::fs::create_dir_all(data_dir)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(data_dir.join(NODE_FILE))?;
    // flock(2) (std's File::try_lock is newer than the crate's minimum Rust): released when the process dies.
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok((new_node_id(), None));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    if let Ok(id) = NodeId::try_from(text.trim().as_bytes()) {
        if id.iter().all(u8::is_ascii_hexdigit) {
            return Ok((id, Some(file)));
        }
    }
    let id = new_node_id();
    write_node_file(&mut file, &id)?;
    Ok((id, Some(file)))
}

/// Replaces the id in the (locked) node file.
fn write_node_file(file: &mut std::fs::File, id: &NodeId) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(id)?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// The log of one node (see the module's comment).
pub(super) struct SharedLog {
    engine: Arc<dyn Engine>,
    node: NodeId,
    /// [`NODE_FILE`], locked while the node runs (`None`: another process holds it; the id is this process's).
    _node_file: Option<std::fs::File>,
    /// The claim on this node's own lease taken at open, when its earlier life left one: the records under the
    /// id are taken over before anything new is logged ([`super::Store::resume_shared_log`]).
    resume: Mutex<Option<Vec<u8>>>,
    about: String,
    options: LogOptions,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    segment: u64,
    seq: u64,
    /// The records written (or tried) per segment, until a flush deletes them.
    written: Vec<(u64, Vec<u8>)>,
    /// Whether the lease row is written (before the first record).
    leased: bool,
    /// Leases deleted by [`SharedLog::retire`] so far: a lease written while one was deleted must be written again.
    retires: u64,
}

impl SharedLog {
    /// The node's log, or `None` when the engine has no log table (an `rtsd` table created before it, without
    /// the `log` family): the node then writes each batch's points into their rows before acknowledging them.
    pub(super) fn open(
        engine: Arc<dyn Engine>,
        options: LogOptions,
        data_dir: &std::path::Path,
    ) -> Result<Option<SharedLog>, StoreError> {
        match engine.get(CF_LOG, b"L", ReadHints { fill_cache: false }) {
            Ok(_) => {
                let (node, file) = node_id_in(data_dir).map_err(|e| StoreError::Io {
                    context: "keeping the node's id in the data directory",
                    source: e,
                })?;
                let mut log = SharedLog::new(engine, options);
                (log.node, log._node_file) = (node, file);
                log.claim_own()?;
                Ok(Some(log))
            }
            Err(e) if e.to_string().contains("NoSuchColumnFamily") => {
                tracing::warn!(
                    "the rtsd table has no family `log` (alter 'rtsd', {{NAME => 'log', VERSIONS => 1}}): each batch's \
                     points are written into their rows before they are acknowledged, one HBase cell per row and \
                     batch, which is several times slower"
                );
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// At open, under an id an earlier life used: claims its lease, so this node takes its records over
    /// ([`SharedLog::resume`]). Should another node's claim win the race (it is rescuing them since the earlier
    /// life's lease expired), the records are left to it and this node takes a new id, whose lease it can never
    /// overwrite while the other node works.
    fn claim_own(&mut self) -> Result<(), StoreError> {
        let hints = ReadHints { fill_cache: false };
        match self.engine.get(CF_LOG, &lease_key(&self.node), hints)? {
            Some(seen) => self.claim_own_from(&seen),
            None => Ok(()),
        }
    }

    /// [`SharedLog::claim_own`] of the lease last seen as `seen`.
    fn claim_own_from(&mut self, seen: &[u8]) -> Result<(), StoreError> {
        let node = self.node;
        if let Some(claim) = self.claim(&node, seen, LeaseState::Claimed)? {
            *self.resume.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(claim);
            return Ok(());
        }
        self.node = new_node_id();
        if let Some(file) = self._node_file.as_mut() {
            write_node_file(file, &self.node)
                .map_err(|e| StoreError::Io { context: "keeping the node's id in the data directory", source: e })?;
        }
        tracing::info!(
            node = %String::from_utf8_lossy(&node),
            new = %String::from_utf8_lossy(&self.node),
            "another node is taking over this node's earlier series log records; this node goes on under a new id"
        );
        Ok(())
    }

    pub(super) fn new(engine: Arc<dyn Engine>, options: LogOptions) -> SharedLog {
        let node = new_node_id();
        let about = format!("{}:{}", crate::metrics::hostname(), std::process::id());
        // Segments are numbered from the clock, so a node restarted under its id never writes a key its earlier
        // life wrote.
        let state = Mutex::new(State { segment: now_ms(), ..Default::default() });
        SharedLog { engine, node, _node_file: None, resume: Mutex::new(None), about, options, state }
    }

    pub(super) fn options(&self) -> LogOptions {
        self.options
    }

    fn lease(&self, holder: NodeId, state: LeaseState) -> Lease {
        Lease { at_ms: now_ms(), holder, state, about: self.about.clone() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one record (split if large) whose payload follows the series log's record header in `record`.
    pub(super) fn append_record(&self, record: &[u8], durability: Durability) -> Result<(), StoreError> {
        let payload = record.get(pending::RECORD_HEADER..).unwrap_or_default();
        let mut batch = WriteBatch::default();
        let mut value = Vec::new();
        {
            let mut state = self.lock();
            // The lease comes before the first record, so a record is never without one to take it over; checked
            // again under the lock that records the keys, so a `retire` in between is seen.
            while !state.leased {
                let retires = state.retires;
                drop(state);
                self.engine.write(self.lease_batch(), Durability::Logged)?;
                state = self.lock();
                if state.retires == retires {
                    state.leased = true;
                }
            }
            let segment = state.segment;
            for piece in pieces(payload) {
                state.seq += 1;
                let key = record_key(&self.node, segment, state.seq);
                value.clear();
                value.push(RECORD_FORMAT);
                value.extend_from_slice(piece);
                batch.put(CF_LOG, &key, &value);
                // Remembered before the write: a write that fails half-way leaves records the next flush deletes.
                state.written.push((segment, key));
            }
        }
        self.engine.write(batch, durability)
    }

    fn lease_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::default();
        batch.put(CF_LOG, &lease_key(&self.node), &self.lease(self.node, LeaseState::Live).encode());
        batch
    }

    /// Starts a new segment (no record is being appended: the caller holds the series table's gate).
    pub(super) fn rotate(&self) -> u64 {
        let mut state = self.lock();
        state.segment += 1;
        state.segment
    }

    /// Deletes the records of segments before `cut` (their points are in their rows).
    pub(super) fn delete_before(&self, cut: u64) -> Result<(), StoreError> {
        let done: Vec<(u64, Vec<u8>)> = {
            let mut state = self.lock();
            let (done, keep) = std::mem::take(&mut state.written).into_iter().partition(|(s, _)| *s < cut);
            state.written = keep;
            done
        };
        if done.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        for (_, key) in &done {
            batch.delete(CF_LOG, key);
        }
        let result = self.engine.write(batch, Durability::Logged);
        if result.is_err() {
            self.lock().written.extend(done);
        }
        result
    }

    /// Renews the node's lease (once it has one).
    pub(super) fn renew(&self) -> Result<(), StoreError> {
        if !self.lock().leased {
            return Ok(());
        }
        self.engine.write(self.lease_batch(), Durability::Logged)
    }

    /// Deletes the lease of a node with no record left (a clean stop); a later record writes it again.
    pub(super) fn retire(&self) -> Result<(), StoreError> {
        let mut state = self.lock();
        if !state.leased || !state.written.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete(CF_LOG, &lease_key(&self.node));
        state.retires += 1;
        state.leased = false;
        self.engine.write(batch, Durability::Logged)
    }

    /// Leases of other nodes that are older than [`LogOptions::lease`]: `(node, the lease's value)`. Retired
    /// leases old enough are deleted on the way.
    fn expired(&self) -> Result<Vec<(NodeId, Vec<u8>)>, StoreError> {
        let now = now_ms();
        let lease_ms = self.options.lease.as_millis() as u64;
        let mut leases = Vec::new();
        {
            let Some(mut cursor) = self.engine.cursor(CF_LOG, ReadHints { fill_cache: false }) else {
                return Ok(Vec::new());
            };
            cursor.seek_until(b"L", b"M");
            while cursor.valid() && cursor.key().first() == Some(&b'L') {
                let (key, value) = (cursor.key(), cursor.value());
                if let (Ok(node), Some(lease)) = (NodeId::try_from(&key[1..]), Lease::decode(value)) {
                    if node != self.node && now.saturating_sub(lease.at_ms) > lease_ms {
                        leases.push((node, lease.state, now.saturating_sub(lease.at_ms), value.to_vec()));
                    }
                }
                cursor.next();
            }
            cursor.status()?;
        }
        let mut out = Vec::new();
        let mut gone = WriteBatch::default();
        for (node, state, age, value) in leases {
            match state {
                LeaseState::Live | LeaseState::Claimed => out.push((node, value)),
                // A node claimed by mistake (alive, but it could not renew in time) goes on logging under its id
                // until its next renewal rewrites the lease: records under a retired lease are taken over too.
                LeaseState::Retired if self.has_records(&node)? => out.push((node, value)),
                LeaseState::Retired if age > lease_ms * u64::from(RETIRED_LEASES) => {
                    gone.delete(CF_LOG, &lease_key(&node))
                }
                LeaseState::Retired => {}
            }
        }
        if !gone.is_empty() {
            self.engine.write(gone, Durability::Logged)?;
        }
        Ok(out)
    }

    /// Whether any record of `node` is stored.
    fn has_records(&self, node: &NodeId) -> Result<bool, StoreError> {
        let (start, end) = records_of(node);
        let Some(mut cursor) = self.engine.cursor(CF_LOG, ReadHints { fill_cache: false }) else { return Ok(false) };
        cursor.seek_until(&start, &end);
        let found = cursor.valid() && cursor.key() < end.as_slice();
        cursor.status()?;
        Ok(found)
    }

    /// Claims `node`'s lease, whose value was `seen`: returns the claim's value, or `None` when another node
    /// (or the node itself) wrote the lease since.
    fn claim(&self, node: &NodeId, seen: &[u8], state: LeaseState) -> Result<Option<Vec<u8>>, StoreError> {
        let mut lease = self.lease(self.node, state);
        if let Some(old) = Lease::decode(seen) {
            // The dead node's own description stays, so the logs say whose records these are.
            lease.about = old.about;
        }
        let value = lease.encode();
        let ok = self.engine.check_and_put(CF_LOG, &lease_key(node), Some(seen), &value)?;
        Ok(ok.then_some(value))
    }

    /// Up to [`RESCUE_RECORDS`] records of `node` from `from` on: their keys and their points.
    fn read_records(&self, node: &NodeId, from: &[u8]) -> Result<(Vec<Vec<u8>>, Vec<u8>), StoreError> {
        let (_, end) = records_of(node);
        let (mut keys, mut points) = (Vec::new(), Vec::new());
        let Some(mut cursor) = self.engine.cursor(CF_LOG, ReadHints { fill_cache: false }) else {
            return Ok((keys, points));
        };
        cursor.seek_until(from, &end);
        while cursor.valid() && cursor.key() < end.as_slice() && keys.len() < RESCUE_RECORDS {
            match cursor.value().split_first() {
                Some((&RECORD_FORMAT, rest)) => points.extend_from_slice(rest),
                _ => tracing::warn!(key = ?cursor.key(), "a series log record of unknown format is skipped"),
            }
            keys.push(cursor.key().to_vec());
            cursor.next();
        }
        cursor.status()?;
        Ok((keys, points))
    }
}

impl super::Store {
    /// At open: writes the points this node's earlier life left in the log (killed under the same id) into their
    /// rows, before anything new is logged.
    pub(super) fn resume_shared_log(&self) -> Result<(), StoreError> {
        let Some(log) = self.pending.shared() else { return Ok(()) };
        let Some(mut claim) = log.resume.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(()) };
        // This node goes on under the id, so it must finish: should another node claim the lease half-way (a
        // chunk slower than the lease), the node claims it back and goes on (the other stops at its next
        // renewal); whatever either wrote is the same cells.
        loop {
            if self.take_over(log, &log.node, claim)?.1 {
                return Ok(());
            }
            let hints = ReadHints { fill_cache: false };
            let Some(seen) = self.engine.get(CF_LOG, &lease_key(&log.node), hints)? else { return Ok(()) };
            match log.claim(&log.node, &seen, LeaseState::Claimed)? {
                Some(again) => claim = again,
                None => {
                    return Err(StoreError::Corrupt(
                        "another node keeps claiming this node's series log records; start the node again".into(),
                    ))
                }
            }
        }
    }

    /// A node's housekeeping of the shared series log (the daemon calls it every few seconds): renews its lease,
    /// and takes over the records of every node whose lease expired, writing their points into their rows.
    /// Returns the points rescued.
    pub fn tend_shared_log(&self) -> Result<u64, StoreError> {
        let Some(log) = self.pending.shared() else { return Ok(0) };
        log.renew()?;
        let mut rescued = 0;
        for (node, seen) in log.expired()? {
            rescued += self.rescue(log, &node, seen)?;
        }
        Ok(rescued)
    }

    /// Writes the points of a dead node's records into their rows and deletes the records (see the module's
    /// comment); stops when another node claims them meanwhile.
    fn rescue(&self, log: &SharedLog, node: &NodeId, seen: Vec<u8>) -> Result<u64, StoreError> {
        match log.claim(node, &seen, LeaseState::Claimed)? {
            Some(claim) => Ok(self.take_over(log, node, claim)?.0),
            None => Ok(0),
        }
    }

    /// [`Store::rescue`] once the lease is claimed (`claim`: its value).
    /// Returns the points written and whether every record was (false: another node claimed the lease meanwhile
    /// and goes on with the rest).
    fn take_over(&self, log: &SharedLog, node: &NodeId, mut claim: Vec<u8>) -> Result<(u64, bool), StoreError> {
        let who = Lease::decode(&claim).map(|l| l.about).unwrap_or_default();
        let (mut from, _) = records_of(node);
        let (mut points, mut records) = (0u64, 0usize);
        loop {
            let (keys, logged) = log.read_records(node, &from)?;
            let Some(last) = keys.last() else { break };
            let rows = pending::rows_of(&logged);
            for slice in rows.chunks(super::write::FLUSH_SLICE_ROWS) {
                self.write_rows(slice)?;
            }
            points += rows.iter().map(|r| r.fragment.points).sum::<u64>();
            records += keys.len();
            self.engine.sync()?;
            let mut batch = WriteBatch::default();
            for key in &keys {
                batch.delete(CF_LOG, key);
            }
            self.engine.write(batch, Durability::Logged)?;
            from = last.clone();
            from.push(0);
            // Both leases renewed between chunks, so that a long rescue is not taken for a dead node, nor makes
            // this node look dead.
            log.renew()?;
            match log.claim(node, &claim, LeaseState::Claimed)? {
                Some(renewed) => claim = renewed,
                None => {
                    tracing::info!(node = %String::from_utf8_lossy(node), %who, records, "another node took over a series log's rescue");
                    return Ok((points, false));
                }
            }
        }
        log.claim(node, &claim, LeaseState::Retired)?;
        if records > 0 {
            tracing::warn!(
                node = %String::from_utf8_lossy(node),
                %who,
                records,
                points,
                "wrote the acknowledged points a node left in the series log into their rows (its lease expired)"
            );
        }
        Ok((points, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_reads_back() {
        let lease = Lease {
            at_ms: 1_700_000_000_123,
            holder: *b"0123456789abcdef",
            state: LeaseState::Claimed,
            about: "h:1".into(),
        };
        assert_eq!(Lease::decode(&lease.encode()), Some(lease));
        assert_eq!(Lease::decode(b"short"), None);
    }

    #[test]
    fn large_batches_split_into_whole_entries() {
        let mut log = pending::PointLog::default();
        let value = [7u8; 200];
        let n = 3 * RECORD_BYTES / 230;
        for i in 0..n {
            log.push(format!("row-{i:08}").as_bytes(), &[0, 0x10], &value);
        }
        let parts = pieces(log.payload());
        assert!(log.payload().len() > 2 * RECORD_BYTES);
        assert_eq!(parts.len(), 3);
        // Each piece but the last is full to within one entry.
        assert!(parts.iter().all(|p| p.len() <= RECORD_BYTES));
        assert!(parts[..2].iter().all(|p| p.len() > RECORD_BYTES - 230));
        assert_eq!(parts.concat(), log.payload());
        assert_eq!(parts.iter().map(|p| pending::entries(p).count()).sum::<usize>(), n);
        assert_eq!(pieces(b""), Vec::<&[u8]>::new());
    }

    /// An engine holding just the log table (the log only needs rows in key order, so RocksDB stands in for HBase).
    fn engine(dir: &std::path::Path) -> Arc<dyn Engine> {
        use crate::store::engine::{rocks, CellMap, TableSpec, Tuning};
        let specs = [TableSpec::new(CF_LOG, CellMap::Plain, Tuning::Log)];
        let options = rocks::RocksOptions {
            memtable_bytes: 8 << 20,
            block_cache_bytes: 1 << 20,
            max_open_files: 64,
            read_only: false,
        };
        Arc::new(rocks::RocksEngine::open(dir, &specs, &options).unwrap())
    }

    fn rows(engine: &dyn Engine, prefix: u8) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut cursor = engine.cursor(CF_LOG, ReadHints::default()).unwrap();
        cursor.seek(&[prefix]);
        let mut out = Vec::new();
        while cursor.valid() && cursor.key()[0] == prefix {
            out.push((cursor.key().to_vec(), cursor.value().to_vec()));
            cursor.next();
        }
        out
    }

    fn record(points: &[(&[u8], u8)]) -> Vec<u8> {
        let mut log = pending::PointLog::default();
        for (key, v) in points {
            log.push(key, &[0, 0x10], &[*v]);
        }
        let mut bytes = vec![0; pending::RECORD_HEADER];
        bytes.extend_from_slice(log.payload());
        bytes
    }

    #[test]
    fn records_live_until_their_segment_is_flushed_and_a_lease_guards_them() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let lease = Duration::from_millis(300);
        let options = LogOptions { flush_interval: Duration::from_secs(1), lease };
        let (a, b) = (SharedLog::new(engine.clone(), options), SharedLog::new(engine.clone(), options));
        assert!(rows(engine.as_ref(), b'L').is_empty(), "no lease before the first record");
        a.append_record(&record(&[(b"row-1", 1), (b"row-2", 2)]), Durability::Logged).unwrap();
        let cut = a.rotate();
        a.append_record(&record(&[(b"row-1", 3)]), Durability::Synced).unwrap();
        let records = rows(engine.as_ref(), b'R');
        assert_eq!(
            records.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            [record_key(&a.node, cut - 1, 1), record_key(&a.node, cut, 2)]
        );
        assert_eq!(records[0].1[0], RECORD_FORMAT);
        assert_eq!(
            pending::entries(&records[0].1[1..]).map(|(k, _)| k.to_vec()).collect::<Vec<_>>(),
            [b"row-1".to_vec(), b"row-2".to_vec()]
        );
        let leases = rows(engine.as_ref(), b'L');
        assert_eq!(leases.len(), 1);
        let held = Lease::decode(&leases[0].1).unwrap();
        assert_eq!((held.holder, held.state), (a.node, LeaseState::Live));

        // A fresh lease is nobody's to take; one left unrenewed past its time is, and a claim is one node's.
        assert!(b.expired().unwrap().is_empty());
        std::thread::sleep(lease + Duration::from_millis(100));
        let expired = b.expired().unwrap();
        assert_eq!(expired.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [a.node]);
        assert!(a.expired().unwrap().is_empty(), "a node never takes its own records");
        let claim = b.claim(&a.node, &expired[0].1, LeaseState::Claimed).unwrap().expect("claimed");
        assert_eq!(b.claim(&a.node, &expired[0].1, LeaseState::Claimed).unwrap(), None, "seen value is gone");
        let claimed = Lease::decode(&claim).unwrap();
        assert_eq!(
            (claimed.holder, claimed.state, claimed.about.as_str()),
            (b.node, LeaseState::Claimed, a.about.as_str())
        );
        // The node was alive after all: its renewal overrides the claim, and the claimer's next step fails.
        a.renew().unwrap();
        assert_eq!(b.claim(&a.node, &claim, LeaseState::Claimed).unwrap(), None);

        // A flush deletes the records of the segments it covered, and a clean stop the lease.
        a.retire().unwrap();
        assert_eq!(rows(engine.as_ref(), b'L').len(), 1, "records left: the lease stays");
        a.delete_before(cut).unwrap();
        assert_eq!(
            rows(engine.as_ref(), b'R').iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            [record_key(&a.node, cut, 2)]
        );
        a.delete_before(a.rotate()).unwrap();
        assert!(rows(engine.as_ref(), b'R').is_empty());
        a.retire().unwrap();
        assert!(rows(engine.as_ref(), b'L').is_empty());
        // The next record writes the lease again.
        a.append_record(&record(&[(b"row-3", 4)]), Durability::Logged).unwrap();
        assert_eq!(rows(engine.as_ref(), b'L').len(), 1);
    }

    #[test]
    fn retired_leases_are_deleted_once_old() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let options = LogOptions { flush_interval: Duration::from_secs(1), lease: Duration::from_millis(20) };
        let (a, b) = (SharedLog::new(engine.clone(), options), SharedLog::new(engine.clone(), options));
        a.append_record(&record(&[(b"row-1", 1)]), Durability::Logged).unwrap();
        std::thread::sleep(Duration::from_millis(40));
        let (node, seen) = b.expired().unwrap().remove(0);
        let retired = b.claim(&node, &seen, LeaseState::Retired).unwrap().expect("retired");
        assert!(b.expired().unwrap().is_empty(), "a retired lease is not old yet");
        // Claimed by mistake: the node logged on under its id (its next renewal would rewrite the lease), so the
        // retired lease, once old, is taken over again while records remain under it.
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(b.expired().unwrap(), [(a.node, retired)]);
        a.delete_before(a.rotate()).unwrap();
        assert!(b.expired().unwrap().is_empty(), "a retired lease with no records has nothing to take over");
        assert_eq!(rows(engine.as_ref(), b'L').len(), 1);
        std::thread::sleep(Duration::from_millis(20 * u64::from(RETIRED_LEASES) + 20));
        assert!(b.expired().unwrap().is_empty());
        assert!(rows(engine.as_ref(), b'L').is_empty());
    }

    #[test]
    fn a_data_directory_keeps_its_node_id_for_one_process_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let (id, held) = node_id_in(dir.path()).unwrap();
        assert!(held.is_some());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(NODE_FILE)).unwrap(),
            format!("{}\n", std::str::from_utf8(&id).unwrap())
        );
        // A second process on the same directory (a second open file here) must not share the id.
        let (other, none) = node_id_in(dir.path()).unwrap();
        assert!(none.is_none());
        assert_ne!(other, id);
        drop(held);
        // Restarted there, the node is the same node.
        let (again, _held) = node_id_in(dir.path()).unwrap();
        assert_eq!(again, id);
        // A file that does not hold an id is given a new one.
        drop(_held);
        std::fs::write(dir.path().join(NODE_FILE), "not an id").unwrap();
        let (fresh, _held) = node_id_in(dir.path()).unwrap();
        assert_ne!(fresh, id);
        assert_eq!(std::fs::read(dir.path().join(NODE_FILE)).unwrap()[..NODE_BYTES], fresh);
    }

    #[test]
    fn a_restarted_node_claims_its_records_unless_another_node_took_them_over_first() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let node_dir = dir.path().join("node");
        let options = LogOptions { flush_interval: Duration::from_secs(1), lease: Duration::from_secs(30) };
        let first = SharedLog::open(engine.clone(), options, &node_dir).unwrap().unwrap();
        assert!(first.resume.lock().unwrap().is_none(), "nothing left by an earlier life");
        first.append_record(&record(&[(b"row-1", 1)]), Durability::Logged).unwrap();
        let id = first.node;
        drop(first);
        // Restarted in its directory: the same id, and its lease claimed for the takeover.
        let second = SharedLog::open(engine.clone(), options, &node_dir).unwrap().unwrap();
        assert_eq!(second.node, id);
        let claim = second.resume.lock().unwrap().clone().expect("claimed");
        let lease = Lease::decode(&claim).unwrap();
        assert_eq!((lease.holder, lease.state), (id, LeaseState::Claimed));
        drop(second);
        // Another node claims the lease first; a later claim from a value it no longer holds fails, and the
        // restarted node goes on under a new id (kept in its directory), leaving the records to the other node.
        let other = SharedLog::new(engine.clone(), options);
        let taken = other.claim(&id, &claim, LeaseState::Claimed).unwrap().expect("claimed by the other node");
        let mut third = SharedLog::new(engine.clone(), options);
        (third.node, third._node_file) = (id, None);
        third.claim_own_from(&claim).unwrap();
        assert_ne!(third.node, id, "a new id");
        assert!(third.resume.lock().unwrap().is_none());
        assert!(other.claim(&id, &taken, LeaseState::Claimed).unwrap().is_some(), "the other node goes on");
        let taken = rows(engine.as_ref(), b'L').into_iter().find(|(k, _)| k[1..] == id).unwrap().1;
        // Through open (which reads the current value), the restarted node claims it back: a takeover may change
        // hands, the records are written the same by whoever finishes.
        let fourth = SharedLog::open(engine.clone(), options, &node_dir).unwrap().unwrap();
        assert_eq!(fourth.node, id);
        assert!(fourth.resume.lock().unwrap().is_some());
        assert_eq!(other.claim(&id, &taken, LeaseState::Claimed).unwrap(), None, "the other node stops");
    }

    #[test]
    fn node_ids_are_hex_and_differ() {
        let (a, b) = (new_node_id(), new_node_id());
        assert_ne!(a, b);
        assert!(a.iter().all(|c| c.is_ascii_hexdigit()));
        let (start, end) = records_of(&a);
        assert!(start.as_slice() < record_key(&a, 1, 1).as_slice() && record_key(&a, u64::MAX, u64::MAX) < end);
        assert!(lease_key(&a) < b"M".to_vec());
    }
}
