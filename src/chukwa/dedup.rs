//! Exactly-once per stream (spec: chukwa §8.4): the state one Chukwa stream keeps, the rules that classify each
//! chunk against it, and the byte layout it is persisted in.
//!
//! A stream is (cluster, source, dataType, streamName). Most streams number their bytes ("ByteOffset"): the state
//! is a high-water mark `hwm` (the highest accepted chunk end) and a ring of recently accepted chunk starts with
//! content fingerprints, so that an agent's resend after a lost reply or a crash (which restarts at an offset we
//! acknowledged, usually with other chunk boundaries) is trimmed at `hwm`, while a rotation or a non-replayable
//! adaptor reusing offsets (different bytes at a known offset) is accepted as a reset. Adaptors that break the
//! offset contract (HeartbeatAdaptor's negative starts, `STATUS` streams, SocketAdaptor's `seqID = len`) are
//! "Opaque": de-duplicated by exact content only.
//!
//! Nothing here does I/O. [`StreamState::observe`] mutates the state and records which keys changed;
//! [`StreamState::drain_writes`] hands those out as puts and deletes for the caller to put in the same atomic
//! RocksDB write as the points, and [`StreamState::load`] rebuilds a state from the stored keys. A state whose
//! write failed must be dropped and reloaded, never reused.
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use rtsd_protocol::chukwa::{content_hash, Fingerprint, OpaqueKey, StreamKey, FINGERPRINT_BASE};
use smallvec::SmallVec;

/// Bounds of the de-duplication memory (spec §8.4: "4096 entries, 64 MiB of stream span and 24 h"; idle streams
/// forgotten after 7 days).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupLimits {
    /// Most ring entries (ByteOffset) or content keys (Opaque) kept per stream.
    pub entries: usize,
    /// Most stream bytes the ring spans below `hwm`.
    pub span_bytes: i64,
    /// Entries older than this (server time) are dropped.
    pub window_ms: i64,
    /// A stream idle for longer is forgotten; when it returns it is new.
    pub idle_ms: i64,
}

impl Default for DedupLimits {
    fn default() -> Self {
        DedupLimits { entries: 4096, span_bytes: 64 << 20, window_ms: 24 * 3_600_000, idle_ms: 7 * 86_400_000 }
    }
}

/// How one chunk was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No data: acknowledged and otherwise ignored.
    Empty,
    /// Starts at or past `hwm`: everything is new. `gap` when it starts past it on a known stream (lost data,
    /// sigar's unsent first sample).
    New { gap: bool },
    /// Starts at a ring entry with the same leading bytes: the agent re-sent; records ending at or below `hwm`
    /// are dropped.
    Resend,
    /// Starts where the previous chunk of the stream, a resend or a continuation, ended: the rest of a resend
    /// that spans several chunks. Trimmed at `hwm` like a resend.
    Continuation,
    /// Below `hwm` but different bytes (or no ring entry): a rotation, truncation or a non-replayable adaptor
    /// restarted. Everything is accepted and the ring starts over. `window_miss` when the start was older than
    /// anything the ring remembers.
    Reset { window_miss: bool },
    /// An opaque stream's chunk not seen before.
    OpaqueNew,
    /// An opaque stream's chunk seen before (same seqID, length and content): dropped.
    OpaqueDuplicate,
}

/// What to keep of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    /// Absolute stream offset at or below which record ends are dropped (`Some(hwm)` for resends and
    /// continuations). `None` keeps everything (unless [`Verdict::drop_all`]).
    pub trim_at: Option<i64>,
}

impl Verdict {
    fn keep_all(outcome: Outcome) -> Verdict {
        Verdict { outcome, trim_at: None }
    }

    /// Nothing of the chunk is new.
    pub fn drop_all(&self) -> bool {
        matches!(self.outcome, Outcome::Empty | Outcome::OpaqueDuplicate)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ByteOffset,
    /// `sticky`: the stream announced itself (negative start, `STATUS`); otherwise it was converted because it
    /// kept restarting at 0 (SocketAdaptor) and turns back into ByteOffset when it shows a positive start.
    Opaque {
        sticky: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct RingEntry {
    end: i64,
    at_ms: i64,
    fp: Fingerprint,
    /// Hashes of short prefixes ([`HEAD_LENGTHS`] below the fingerprint's first length): a resend *shorter* than
    /// the chunk first sent at its offset, and shorter than 256 bytes, can still be compared.
    heads: SmallVec<[(u32, u64); 3]>,
}

/// Prefix lengths hashed besides the fingerprint's (which start at 256 bytes or the chunk's length).
const HEAD_LENGTHS: [usize; 3] = [32, 64, 128];

impl RingEntry {
    fn new(end: i64, at_ms: i64, data: &[u8]) -> RingEntry {
        let first = data.len().min(FINGERPRINT_BASE);
        let heads =
            HEAD_LENGTHS.iter().filter(|&&l| l < first).map(|&l| (l as u32, content_hash(&data[..l]))).collect();
        RingEntry { end, at_ms, fp: Fingerprint::of(data), heads }
    }

    /// Do `data`'s leading bytes equal this chunk's? Compared at the largest prefix both have; `None` when
    /// `data` is too short to compare (shorter than 32 bytes and than the chunk).
    fn same_content(&self, data: &[u8]) -> Option<bool> {
        self.fp.matches(data).or_else(|| {
            let &(len, hash) = self.heads.iter().rev().find(|&&(len, _)| len as usize <= data.len())?;
            Some(content_hash(&data[..len as usize]) == hash)
        })
    }
}

/// Keys changed since the last [`StreamState::drain_writes`].
#[derive(Debug, Clone, Default)]
struct Dirty {
    header: bool,
    ring: BTreeSet<i64>,
    opaque: Vec<OpaqueKey>,
}

/// One stream's de-duplication state.
#[derive(Debug, Clone)]
pub struct StreamState {
    kind: Kind,
    hwm: i64,
    ring: BTreeMap<i64, RingEntry>,
    /// End of the previous chunk when it was a resend or continuation (the continuation rule).
    cont_end: Option<i64>,
    /// The previous non-empty chunk started at offset 0 (SocketAdaptor detection).
    last_start_zero: bool,
    opaque: HashMap<OpaqueKey, i64>,
    /// Opaque keys in insertion order, for eviction.
    opaque_order: VecDeque<(i64, OpaqueKey)>,
    last_seen_ms: i64,
    /// Has seen a chunk (or was loaded from storage): a start past `hwm` is then a gap.
    known: bool,
    dirty: Dirty,
}

impl Default for StreamState {
    fn default() -> Self {
        StreamState::new()
    }
}

impl StreamState {
    /// A stream never seen.
    pub fn new() -> StreamState {
        StreamState {
            kind: Kind::ByteOffset,
            hwm: 0,
            ring: BTreeMap::new(),
            cont_end: None,
            last_start_zero: false,
            opaque: HashMap::new(),
            opaque_order: VecDeque::new(),
            last_seen_ms: 0,
            known: false,
            dirty: Dirty::default(),
        }
    }

    /// The high-water mark: the highest accepted chunk end (ByteOffset streams).
    pub fn hwm(&self) -> i64 {
        self.hwm
    }

    pub fn is_opaque(&self) -> bool {
        matches!(self.kind, Kind::Opaque { .. })
    }

    pub fn last_seen_ms(&self) -> i64 {
        self.last_seen_ms
    }

    /// Classifies the chunk covering `[seq_id - data.len(), seq_id)` and updates the state (spec §8.4 rules 1-4,
    /// the continuation and fingerprint refinements, opaque streams). `status`: the stream is named `STATUS`.
    pub fn observe(&mut self, seq_id: i64, data: &[u8], status: bool, now_ms: i64, limits: &DedupLimits) -> Verdict {
        if data.is_empty() {
            return Verdict::keep_all(Outcome::Empty);
        }
        let e = seq_id;
        let s = seq_id.saturating_sub(data.len() as i64);
        self.last_seen_ms = now_ms;
        self.dirty.header = true;
        if self.kind == Kind::ByteOffset && (s < 0 || status) {
            self.become_opaque(true);
        }
        if let Kind::Opaque { sticky } = self.kind {
            if sticky || s <= 0 {
                return self.observe_opaque(e, data, now_ms, limits);
            }
            // A converted stream that now counts bytes again: a fresh ByteOffset stream from here.
            self.clear_opaque();
            self.kind = Kind::ByteOffset;
            self.hwm = s;
        }

        let mut verdict = if s >= self.hwm {
            Verdict::keep_all(Outcome::New { gap: self.known && s > self.hwm })
        } else if let Some(entry) = self.ring.get(&s) {
            match entry.same_content(data) {
                Some(true) => Verdict { outcome: Outcome::Resend, trim_at: Some(self.hwm) },
                _ => Verdict::keep_all(Outcome::Reset { window_miss: false }),
            }
        } else if self.cont_end == Some(s) {
            Verdict { outcome: Outcome::Continuation, trim_at: Some(self.hwm) }
        } else {
            let window_miss = self.ring.keys().next().is_none_or(|&oldest| s < oldest);
            Verdict::keep_all(Outcome::Reset { window_miss })
        };

        if matches!(verdict.outcome, Outcome::Reset { .. }) {
            if s == 0 && self.last_start_zero {
                // Restarting at 0 again and again with other bytes: SocketAdaptor (seqID = event length).
                self.become_opaque(false);
                return self.observe_opaque(e, data, now_ms, limits);
            }
            self.clear_ring();
            self.hwm = e;
        } else {
            self.hwm = self.hwm.max(e);
        }
        if matches!(verdict.outcome, Outcome::Resend | Outcome::Continuation) && verdict.trim_at >= Some(e) {
            // Wholly below hwm: nothing to trim against beyond dropping every record.
            verdict.trim_at = Some(e);
        }
        self.ring.insert(s, RingEntry::new(e, now_ms, data));
        self.dirty.ring.insert(s);
        self.evict_ring(now_ms, limits);
        self.cont_end = matches!(verdict.outcome, Outcome::Resend | Outcome::Continuation).then_some(e);
        self.last_start_zero = s == 0;
        self.known = true;
        verdict
    }

    fn observe_opaque(&mut self, e: i64, data: &[u8], now_ms: i64, limits: &DedupLimits) -> Verdict {
        let key = OpaqueKey { seq_id: e, len: data.len() as u64, hash: content_hash(data) };
        self.known = true;
        self.last_start_zero = e == data.len() as i64;
        if self.opaque.contains_key(&key) {
            return Verdict::keep_all(Outcome::OpaqueDuplicate);
        }
        self.insert_opaque(key, now_ms);
        self.evict_opaque(now_ms, limits);
        Verdict::keep_all(Outcome::OpaqueNew)
    }

    fn insert_opaque(&mut self, key: OpaqueKey, at_ms: i64) {
        self.opaque.insert(key, at_ms);
        self.opaque_order.push_back((at_ms, key));
        self.dirty.opaque.push(key);
    }

    /// Turns the stream opaque. Chunks the ring remembers keep being recognised: their opaque key is known from
    /// the ring entry (its end, length and the whole-chunk hash that ends every fingerprint).
    fn become_opaque(&mut self, sticky: bool) {
        let seeds: Vec<(OpaqueKey, i64)> = self
            .ring
            .iter()
            .filter_map(|(&s, entry)| {
                let &(len, hash) = entry.fp.prefixes().last()?;
                (i64::from(len) == entry.end - s)
                    .then_some((OpaqueKey { seq_id: entry.end, len: u64::from(len), hash }, entry.at_ms))
            })
            .collect();
        self.clear_ring();
        for (key, at) in seeds {
            if !self.opaque.contains_key(&key) {
                self.insert_opaque(key, at);
            }
        }
        self.kind = Kind::Opaque { sticky };
        self.cont_end = None;
    }

    fn clear_ring(&mut self) {
        self.dirty.ring.extend(self.ring.keys().copied());
        self.ring.clear();
    }

    fn clear_opaque(&mut self) {
        self.dirty.opaque.extend(self.opaque.keys().copied());
        self.opaque.clear();
        self.opaque_order.clear();
    }

    /// Drops the oldest ring entries beyond the count, span and age bounds; the newest entry always stays.
    fn evict_ring(&mut self, now_ms: i64, limits: &DedupLimits) {
        while self.ring.len() > 1 {
            let Some((&s, entry)) = self.ring.iter().next() else { break };
            let over = self.ring.len() > limits.entries
                || self.hwm.saturating_sub(s) > limits.span_bytes
                || now_ms.saturating_sub(entry.at_ms) > limits.window_ms;
            if !over {
                break;
            }
            self.ring.remove(&s);
            self.dirty.ring.insert(s);
        }
    }

    fn evict_opaque(&mut self, now_ms: i64, limits: &DedupLimits) {
        while let Some(&(at, key)) = self.opaque_order.front() {
            let current = self.opaque.get(&key) == Some(&at);
            let over = self.opaque.len() > limits.entries.max(1) || now_ms.saturating_sub(at) > limits.window_ms;
            if current && !over {
                break;
            }
            self.opaque_order.pop_front();
            if current {
                self.opaque.remove(&key);
                self.dirty.opaque.push(key);
            }
        }
    }

    /// The puts (`Some(value)`) and deletes (`None`) that bring storage up to date with this state, keyed under
    /// `prefix` ([`stream_prefix`]); clears the record of changes.
    pub fn drain_writes(&mut self, prefix: &[u8]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::with_capacity(1 + dirty.ring.len() + dirty.opaque.len());
        if dirty.header {
            out.push((key_with(prefix, TAG_HEADER, &[]), Some(self.encode_header())));
        }
        for s in dirty.ring {
            let key = key_with(prefix, TAG_RING, &ordered_i64(s));
            out.push((key, self.ring.get(&s).map(encode_ring_entry)));
        }
        let mut seen = std::collections::HashSet::new();
        for k in dirty.opaque {
            if !seen.insert(k) {
                continue;
            }
            let key = key_with(prefix, TAG_OPAQUE, &encode_opaque_key(&k));
            out.push((key, self.opaque.get(&k).map(|at| at.to_be_bytes().to_vec())));
        }
        out
    }

    fn encode_header(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32);
        v.push(FORMAT_VERSION);
        v.push(match self.kind {
            Kind::ByteOffset => 0,
            Kind::Opaque { sticky: true } => 1,
            Kind::Opaque { sticky: false } => 2,
        });
        v.extend_from_slice(&self.hwm.to_be_bytes());
        v.push(u8::from(self.cont_end.is_some()));
        v.extend_from_slice(&self.cont_end.unwrap_or(0).to_be_bytes());
        v.push(u8::from(self.last_start_zero));
        v.extend_from_slice(&self.last_seen_ms.to_be_bytes());
        v
    }

    /// Rebuilds a state from its stored keys, given as (key without the stream prefix, value) in key order.
    /// `Ok(None)` when there is no header: the stream was never stored.
    pub fn load<'a>(entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Result<Option<StreamState>, String> {
        let mut state = StreamState::new();
        let mut header = false;
        for (suffix, value) in entries {
            let (&tag, rest) = suffix.split_first().ok_or("empty key suffix")?;
            match tag {
                TAG_HEADER => {
                    let v = value;
                    if v.len() != 28 || v[0] != FORMAT_VERSION {
                        return Err(format!("bad stream header of {} bytes", v.len()));
                    }
                    state.kind = match v[1] {
                        0 => Kind::ByteOffset,
                        1 => Kind::Opaque { sticky: true },
                        2 => Kind::Opaque { sticky: false },
                        k => return Err(format!("unknown stream kind {k}")),
                    };
                    state.hwm = be_i64(&v[2..10]);
                    state.cont_end = (v[10] == 1).then(|| be_i64(&v[11..19]));
                    state.last_start_zero = v[19] == 1;
                    state.last_seen_ms = be_i64(&v[20..28]);
                    header = true;
                }
                TAG_RING => {
                    if rest.len() != 8 || value.len() < 17 {
                        return Err("bad ring entry".into());
                    }
                    let s = from_ordered_i64(rest);
                    let (fp_pairs, after) = read_pairs(&value[16..]).ok_or("truncated fingerprint")?;
                    let (heads, after) = read_pairs(after).ok_or("truncated prefix hashes")?;
                    if !after.is_empty() {
                        return Err("bad ring entry length".into());
                    }
                    let fp = Fingerprint::from_prefixes(fp_pairs).ok_or("bad fingerprint")?;
                    let entry =
                        RingEntry { end: be_i64(&value[0..8]), at_ms: be_i64(&value[8..16]), fp, heads: heads.into() };
                    state.ring.insert(s, entry);
                }
                TAG_OPAQUE => {
                    if rest.len() != 24 || value.len() != 8 {
                        return Err("bad opaque entry".into());
                    }
                    let key = OpaqueKey {
                        seq_id: from_ordered_i64(&rest[0..8]),
                        len: u64::from_be_bytes(rest[8..16].try_into().unwrap_or_default()),
                        hash: u64::from_be_bytes(rest[16..24].try_into().unwrap_or_default()),
                    };
                    state.opaque.insert(key, be_i64(value));
                }
                t => return Err(format!("unknown stream key tag {t}")),
            }
        }
        if !header {
            return Ok(None);
        }
        let mut order: Vec<(i64, OpaqueKey)> = state.opaque.iter().map(|(k, at)| (*at, *k)).collect();
        order.sort();
        state.opaque_order = order.into();
        state.known = true;
        Ok(Some(state))
    }

    /// Whether the stream has been idle longer than the limit at `now_ms` (then it is forgotten).
    pub fn is_idle(&self, now_ms: i64, limits: &DedupLimits) -> bool {
        now_ms.saturating_sub(self.last_seen_ms) > limits.idle_ms
    }

    /// Every stored key of this state under `prefix`, for deleting a forgotten stream.
    pub fn all_keys(&self, prefix: &[u8]) -> Vec<Vec<u8>> {
        let mut keys = vec![key_with(prefix, TAG_HEADER, &[])];
        keys.extend(self.ring.keys().map(|&s| key_with(prefix, TAG_RING, &ordered_i64(s))));
        keys.extend(self.opaque.keys().map(|k| key_with(prefix, TAG_OPAQUE, &encode_opaque_key(k))));
        keys
    }
}

const FORMAT_VERSION: u8 = 1;
const TAG_HEADER: u8 = 0;
const TAG_RING: u8 = 1;
const TAG_OPAQUE: u8 = 2;
/// The largest tag after a stream prefix: keys of a stream all sort below `prefix ‖ LAST_TAG + 1`.
pub const LAST_TAG: u8 = TAG_OPAQUE;

/// The key prefix of a stream's state: each of cluster, source, dataType and streamName as a `u32` big-endian
/// byte length and the UTF-8 bytes. Self-delimiting, so no stream's keys can be mistaken for another's.
pub fn stream_prefix(key: &StreamKey<'_>) -> Vec<u8> {
    let parts = [&key.cluster, &key.source, &key.data_type, &key.stream_name];
    let mut out = Vec::with_capacity(16 + parts.iter().map(|p| p.len()).sum::<usize>());
    for p in parts {
        out.extend_from_slice(&(p.len() as u32).to_be_bytes());
        out.extend_from_slice(p.as_bytes());
    }
    out
}

/// Splits a stored key into its stream (as a prefix length) and the rest; `None` for a malformed key.
pub fn split_stream_key(key: &[u8]) -> Option<(StreamKey<'static>, usize)> {
    let mut at = 0;
    let mut parts: [String; 4] = Default::default();
    for part in &mut parts {
        let len = u32::from_be_bytes(key.get(at..at + 4)?.try_into().ok()?) as usize;
        at += 4;
        *part = String::from_utf8(key.get(at..at.checked_add(len)?)?.to_vec()).ok()?;
        at += len;
    }
    let [cluster, source, data_type, stream_name] = parts;
    Some((
        StreamKey {
            cluster: cluster.into(),
            source: source.into(),
            data_type: data_type.into(),
            stream_name: stream_name.into(),
        },
        at,
    ))
}

/// Whether a key suffix (after the stream prefix) is a stream's header.
pub fn is_header_suffix(suffix: &[u8]) -> bool {
    suffix == [TAG_HEADER]
}

/// A header value's last-seen time, without decoding the rest.
pub fn header_last_seen(value: &[u8]) -> Option<i64> {
    (value.len() == 28).then(|| be_i64(&value[20..28]))
}

fn key_with(prefix: &[u8], tag: u8, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 1 + rest.len());
    k.extend_from_slice(prefix);
    k.push(tag);
    k.extend_from_slice(rest);
    k
}

/// Big-endian with the sign bit flipped, so that keys sort as the numbers do.
fn ordered_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

fn from_ordered_i64(b: &[u8]) -> i64 {
    (u64::from_be_bytes(b.try_into().unwrap_or_default()) ^ (1 << 63)) as i64
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b.try_into().unwrap_or_default())
}

fn encode_opaque_key(k: &OpaqueKey) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&ordered_i64(k.seq_id));
    v.extend_from_slice(&k.len.to_be_bytes());
    v.extend_from_slice(&k.hash.to_be_bytes());
    v
}

fn encode_ring_entry(e: &RingEntry) -> Vec<u8> {
    let prefixes = e.fp.prefixes();
    let mut v = Vec::with_capacity(18 + 12 * (prefixes.len() + e.heads.len()));
    v.extend_from_slice(&e.end.to_be_bytes());
    v.extend_from_slice(&e.at_ms.to_be_bytes());
    for list in [prefixes, &e.heads[..]] {
        v.push(list.len() as u8);
        for &(len, hash) in list {
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(&hash.to_be_bytes());
        }
    }
    v
}

/// A count byte and that many (u32 length, u64 hash) pairs; the pairs and the bytes after them.
/// Decoded (length, hash) pairs and the bytes after them.
type Pairs<'a> = (Vec<(u32, u64)>, &'a [u8]);

fn read_pairs(b: &[u8]) -> Option<Pairs<'_>> {
    let (&n, rest) = b.split_first()?;
    let size = 12 * n as usize;
    let pairs = rest
        .get(..size)?
        .chunks_exact(12)
        .map(|c| {
            (u32::from_be_bytes([c[0], c[1], c[2], c[3]]), u64::from_be_bytes(c[4..12].try_into().unwrap_or_default()))
        })
        .collect();
    Some((pairs, &rest[size..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn limits() -> DedupLimits {
        DedupLimits::default()
    }

    /// Stream bytes `[s, e)` of a deterministic "file".
    fn bytes(s: i64, e: i64) -> Vec<u8> {
        (s..e).map(|i| b"abcdefghijklmnopqrstuvwxyz\n"[(i % 27) as usize]).collect()
    }

    fn observe(st: &mut StreamState, s: i64, e: i64) -> Verdict {
        st.observe(e, &bytes(s, e), false, NOW, &limits())
    }

    /// Round-trips the state through its stored form, as a restart would.
    fn reload(st: &mut StreamState) -> StreamState {
        let prefix = stream_prefix(&StreamKey {
            cluster: "c".into(),
            source: "h".into(),
            data_type: "T".into(),
            stream_name: "/f".into(),
        });
        let mut stored: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        // Everything ever written, in order, as RocksDB would apply it.
        for (k, v) in st.drain_writes(&prefix) {
            match v {
                Some(v) => stored.insert(k, v),
                None => stored.remove(&k),
            };
        }
        let entries: Vec<(Vec<u8>, Vec<u8>)> =
            stored.into_iter().map(|(k, v)| (k[prefix.len()..].to_vec(), v)).collect();
        StreamState::load(entries.iter().map(|(k, v)| (&k[..], &v[..]))).unwrap().unwrap()
    }

    /// §8.7 vector 4: [0,100) and [100,250) accepted, reply lost; [100,300) with the same bytes keeps only what
    /// lies past 250.
    #[test]
    fn resend_with_other_boundaries_is_trimmed_at_hwm() {
        let mut st = StreamState::new();
        assert_eq!(observe(&mut st, 0, 100).outcome, Outcome::New { gap: false });
        assert_eq!(observe(&mut st, 100, 250).outcome, Outcome::New { gap: false });
        let v = observe(&mut st, 100, 300);
        assert_eq!(v, Verdict { outcome: Outcome::Resend, trim_at: Some(250) });
        assert_eq!(st.hwm(), 300);
        // The exact resend of an old chunk is dropped whole.
        let v = observe(&mut st, 0, 100);
        assert_eq!(v, Verdict { outcome: Outcome::Resend, trim_at: Some(100) });
    }

    /// §8.7 vector 5: after hwm 250, [0,80) with other leading bytes is a rotation: accepted, ring restarted.
    #[test]
    fn rotation_is_a_reset() {
        let mut st = StreamState::new();
        observe(&mut st, 0, 100);
        observe(&mut st, 100, 250);
        let rotated = b"NEW FILE CONTENT ".repeat(5);
        let v = st.observe(80, &rotated[..80], false, NOW, &limits());
        assert_eq!(v, Verdict { outcome: Outcome::Reset { window_miss: false }, trim_at: None });
        assert_eq!(st.hwm(), 80);
        // The new file's next chunk is new again.
        assert_eq!(observe(&mut st, 80, 120).outcome, Outcome::New { gap: false });
    }

    /// The continuation refinement: a resend spread over several chunks is trimmed chunk by chunk, though the
    /// second chunk starts at no ring entry.
    #[test]
    fn continuation_of_a_resend_is_trimmed() {
        let mut st = StreamState::new();
        for (s, e) in [(0, 100), (100, 200), (200, 300), (300, 400)] {
            observe(&mut st, s, e);
        }
        // The agent acknowledged up to 100 and re-reads with 150-byte chunks.
        assert_eq!(observe(&mut st, 100, 250), Verdict { outcome: Outcome::Resend, trim_at: Some(250) });
        assert_eq!(observe(&mut st, 250, 400), Verdict { outcome: Outcome::Continuation, trim_at: Some(400) });
        assert_eq!(observe(&mut st, 400, 550), Verdict::keep_all(Outcome::New { gap: false }));
        assert_eq!(st.hwm(), 550);
        // Without the continuation rule 250 would have been a reset (inside the ring span, no entry).
        let mut fresh = StreamState::new();
        for (s, e) in [(0, 100), (100, 200), (200, 300)] {
            observe(&mut fresh, s, e);
        }
        assert_eq!(observe(&mut fresh, 250, 260).outcome, Outcome::Reset { window_miss: false });
    }

    /// The fingerprint refinement: a restarted sigar whose new first sample shares a long static head with the
    /// old one at the same offset is a reset, not a resend.
    #[test]
    fn static_head_does_not_hide_new_content() {
        let mut st = StreamState::new();
        observe(&mut st, 0, 100);
        let head = vec![b'x'; 700];
        let mut old = head.clone();
        old.extend_from_slice(b"\"timestamp\":1000}");
        let mut new = head;
        new.extend_from_slice(b"\"timestamp\":2000}");
        st.observe(100 + old.len() as i64, &old, false, NOW, &limits());
        let v = st.observe(100 + new.len() as i64, &new, false, NOW, &limits());
        assert_eq!(v.outcome, Outcome::Reset { window_miss: false });
    }

    /// §8.7 vector 6: SocketAdaptor events all have seqID = length. Different events are all accepted; an
    /// identical repeat is dropped, also of an event from before the stream was recognised as opaque.
    #[test]
    fn socket_adaptor_events_become_opaque() {
        let mut st = StreamState::new();
        let e1 = vec![b'a'; 120];
        let e2 = vec![b'b'; 120];
        let e3 = vec![b'c'; 90];
        assert_eq!(st.observe(120, &e1, false, NOW, &limits()).outcome, Outcome::New { gap: false });
        assert_eq!(st.observe(120, &e2, false, NOW, &limits()).outcome, Outcome::OpaqueNew);
        assert!(st.is_opaque());
        assert_eq!(st.observe(120, &e2, false, NOW, &limits()).outcome, Outcome::OpaqueDuplicate);
        assert_eq!(st.observe(120, &e1, false, NOW, &limits()).outcome, Outcome::OpaqueDuplicate);
        assert_eq!(st.observe(90, &e3, false, NOW, &limits()).outcome, Outcome::OpaqueNew);
        let mut st = reload(&mut st);
        assert!(st.is_opaque());
        assert_eq!(st.observe(90, &e3, false, NOW, &limits()).outcome, Outcome::OpaqueDuplicate);
        assert_eq!(st.observe(120, &e1, false, NOW, &limits()).outcome, Outcome::OpaqueDuplicate);
    }

    /// A file tailer's resent first chunk is a resend, not the start of an opaque stream.
    #[test]
    fn resent_first_chunk_stays_byte_offset() {
        let mut st = StreamState::new();
        observe(&mut st, 0, 100);
        assert_eq!(observe(&mut st, 0, 100).outcome, Outcome::Resend);
        assert!(!st.is_opaque());
        assert_eq!(observe(&mut st, 100, 200).outcome, Outcome::New { gap: false });
    }

    /// A stream taken for SocketAdaptor that then counts bytes (a file rotated after one chunk) goes back.
    #[test]
    fn converted_stream_reverts_on_positive_start() {
        let mut st = StreamState::new();
        observe(&mut st, 0, 100);
        let other = b"rotated!".repeat(10);
        st.observe(50, &other[..50], false, NOW, &limits());
        assert!(st.is_opaque());
        assert_eq!(st.observe(150, &bytes(50, 150), false, NOW, &limits()).outcome, Outcome::New { gap: false });
        assert!(!st.is_opaque());
        assert_eq!(st.hwm(), 150);
    }

    /// §8.7 vector 7: HeartbeatAdaptor (seqID 7, 300 bytes) and STATUS streams are opaque from the start.
    #[test]
    fn heartbeat_is_opaque() {
        let mut st = StreamState::new();
        let beat = vec![b'h'; 300];
        assert_eq!(st.observe(7, &beat, false, NOW, &limits()).outcome, Outcome::OpaqueNew);
        assert!(st.is_opaque());
        assert_eq!(st.observe(7, &beat, false, NOW, &limits()).outcome, Outcome::OpaqueDuplicate);
        assert_eq!(st.observe(8, &beat, false, NOW, &limits()).outcome, Outcome::OpaqueNew);
        // A converted-because-negative stream stays opaque even when a start is positive.
        assert_eq!(st.observe(1000, &beat, false, NOW, &limits()).outcome, Outcome::OpaqueNew);
        let mut status = StreamState::new();
        assert_eq!(status.observe(500, &beat, true, NOW, &limits()).outcome, Outcome::OpaqueNew);
        assert_eq!(status.observe(500, &beat, true, NOW, &limits()).outcome, Outcome::OpaqueDuplicate);
    }

    #[test]
    fn gaps_and_window_misses_are_reported() {
        let mut st = StreamState::new();
        // A first chunk past 0 on an unknown stream is no gap: we knew nothing.
        assert_eq!(observe(&mut st, 500, 600).outcome, Outcome::New { gap: false });
        assert_eq!(observe(&mut st, 700, 800).outcome, Outcome::New { gap: true });
        assert_eq!(observe(&mut st, 100, 200).outcome, Outcome::Reset { window_miss: true });
        assert_eq!(observe(&mut st, 200, 300).outcome, Outcome::New { gap: false });
        assert_eq!(observe(&mut st, 250, 260).outcome, Outcome::Reset { window_miss: false });
    }

    #[test]
    fn empty_chunks_change_nothing() {
        let mut st = StreamState::new();
        observe(&mut st, 0, 100);
        assert_eq!(st.observe(100, b"", false, NOW, &limits()), Verdict::keep_all(Outcome::Empty));
        assert!(Verdict::keep_all(Outcome::Empty).drop_all());
        assert_eq!(st.hwm(), 100);
    }

    #[test]
    fn ring_is_bounded_by_count_span_and_age() {
        let small = DedupLimits { entries: 3, span_bytes: 1000, window_ms: 10_000, idle_ms: 1 };
        let mut st = StreamState::new();
        for i in 0..5 {
            st.observe((i + 1) * 10, &bytes(i * 10, (i + 1) * 10), false, NOW, &small);
        }
        assert_eq!(st.ring.len(), 3);
        // An evicted start is older than the ring: a window miss, accepted (no loss).
        assert_eq!(st.observe(10, &bytes(0, 10), false, NOW, &small).outcome, Outcome::Reset { window_miss: true });
        let mut st = StreamState::new();
        st.observe(10, &bytes(0, 10), false, NOW, &small);
        st.observe(2000, &bytes(10, 2000), false, NOW, &small);
        assert_eq!(st.ring.len(), 1, "span bound");
        let mut st = StreamState::new();
        st.observe(10, &bytes(0, 10), false, NOW, &small);
        st.observe(20, &bytes(10, 20), false, NOW + 20_000, &small);
        assert_eq!(st.ring.len(), 1, "age bound");
        assert!(st.is_idle(NOW + 20_002, &small));
    }

    /// The stored form rebuilds the same behaviour: a restart in the middle of a resend changes nothing.
    #[test]
    fn state_survives_a_reload() {
        let mut st = StreamState::new();
        observe(&mut st, 0, 100);
        observe(&mut st, 100, 250);
        let mut st = reload(&mut st);
        assert_eq!(st.hwm(), 250);
        assert_eq!(observe(&mut st, 100, 200).outcome, Outcome::Resend);
        let mut st = reload(&mut st);
        assert_eq!(observe(&mut st, 200, 300), Verdict { outcome: Outcome::Continuation, trim_at: Some(250) });
        // A reset deletes the old ring entries from storage too.
        let rotated = b"other bytes ".repeat(10);
        st.observe(60, &rotated[..60], false, NOW, &limits());
        let st = reload(&mut st);
        assert_eq!(st.ring.len(), 1);
        assert_eq!(st.hwm(), 60);
    }

    #[test]
    fn stream_prefixes_split_back() {
        let key = StreamKey {
            cluster: "demo".into(),
            source: "host1".into(),
            data_type: "SysLog".into(),
            stream_name: "/var/log/é".into(),
        };
        let mut stored = stream_prefix(&key);
        let len = stored.len();
        stored.push(TAG_HEADER);
        let (back, at) = split_stream_key(&stored).unwrap();
        assert_eq!((back, at), (key, len));
        assert!(is_header_suffix(&stored[at..]));
        assert_eq!(split_stream_key(&[0, 0, 0, 9, b'a']), None);
        assert!(StreamState::load([(&[9u8][..], &[][..])]).is_err());
        assert!(StreamState::load(std::iter::empty()).unwrap().is_none());
    }
}
