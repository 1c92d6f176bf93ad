//! The Chukwa collector port (spec: chukwa §8): what happens to a POST from a Chukwa agent between the parsed
//! body and the reply.
//!
//! [`Collector::ingest`] takes a decompressed body and, for the whole post, in one atomic RocksDB write:
//! 1. decides per chunk, against its stream's de-duplication state ([`dedup`]), what is new;
//! 2. turns the new records into samples ([`mapping`], [`rules`]) and writes them as OpenTSDB points through
//!    the same path as `put` ([`Store::add_point`]) and as Chukwa's own `chukwa`/`chukwa_meta` rows ([`schema`]);
//! 3. writes the streams' new de-duplication state and the `chukwa.ingest.*` series beside them;
//! 4. commits (fsynced by default), and only then applies nothing more: the in-memory state already is the
//!    committed one. If the commit fails the touched streams are dropped from memory and reloaded from RocksDB
//!    on their next post, and the agent hears `503 Commit failed` and re-sends.
//!
//! The reply is one `ok: <len> bytes ending at offset <seqID-1>` line per chunk, duplicates included. Streams of
//! one post are locked in [`StreamKey`] order, so concurrent posts from many agents never deadlock.
pub mod config;
pub mod dedup;
pub mod mapping;
pub mod rules;
pub mod schema;

use crate::timefmt::now_ms;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rtsd_protocol::chukwa::{parse_body_with, Ack, Chunk, FrameError, Limits, PingStats, StreamKey};
use rtsd_protocol::codec::Value;
use rtsd_protocol::point::{self, DataPoint, Rules, Tags};

pub use self::config::ChukwaConfig;
use self::dedup::{Outcome, StreamState};
use self::mapping::{ChunkInfo, Processor, Sample};
use self::schema::MetaType;
use crate::metrics::Metrics;
use crate::store::{
    AddError, PointBatch, Store, StoreError, CF_CHUKWA_A, CF_CHUKWA_META, CF_CHUKWA_STREAMS, CF_CHUKWA_T,
};

/// Why a post got no `ok` lines.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The body cannot be framed: HTTP 500 with this text, as Java's collector failed such posts.
    #[error("{0}")]
    Frame(#[from] FrameError),
    /// Storage cannot commit (or read the streams' state): HTTP 503 `Commit failed`; the agent re-sends.
    #[error("storage unavailable: {0}")]
    Unavailable(StoreError),
}

/// What one committed post did (for tests and logs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PostSummary {
    pub chunks: usize,
    pub new_chunks: u64,
    pub records: u64,
    pub points: u64,
}

/// The collector: de-duplication state of every stream, and what `GET ?ping` reports.
pub struct Collector {
    config: ChukwaConfig,
    streams: Mutex<Streams>,
    /// `chukwa_meta` cells written since start: each is written once per process, not with every chunk.
    meta_written: Mutex<HashSet<Vec<u8>>>,
    ping: Mutex<PingStats>,
    /// The last timestamp given to the `chukwa.ingest.*` series: strictly increasing, so no two posts overwrite.
    last_series_ms: AtomicI64,
    /// Tests make the next commit fail, as a storage error would.
    #[cfg(test)]
    fail_next_commit: std::sync::atomic::AtomicBool,
}

/// The streams whose state is in memory, with when each was last used. Bounded: every post stores its streams'
/// new state, so a stream dropped from memory is reloaded from RocksDB when it posts again.
#[derive(Default)]
struct Streams {
    map: HashMap<StreamKey<'static>, (Arc<Mutex<Slot>>, u64)>,
    tick: u64,
}

impl Streams {
    fn slot(&mut self, key: &StreamKey<'_>) -> Arc<Mutex<Slot>> {
        self.tick += 1;
        let tick = self.tick;
        let entry = self.map.entry(key.clone().into_owned()).or_default();
        entry.1 = tick;
        entry.0.clone()
    }

    /// Past `capacity` streams, drops the least recently used down to three quarters of it (so the sort is
    /// paid once per quarter of the capacity). A slot some post holds (its `Arc` is shared) is never dropped:
    /// a second slot for the same stream would let two posts de-duplicate it at once.
    fn evict_beyond(&mut self, capacity: usize) {
        if self.map.len() <= capacity {
            return;
        }
        let mut idle: Vec<(u64, StreamKey<'static>)> = self
            .map
            .iter()
            .filter(|(_, (slot, _))| Arc::strong_count(slot) == 1)
            .map(|(k, (_, tick))| (*tick, k.clone()))
            .collect();
        idle.sort_unstable_by_key(|(tick, _)| *tick);
        let excess = self.map.len().saturating_sub(capacity - capacity / 4);
        for (_, key) in idle.into_iter().take(excess) {
            self.map.remove(&key);
        }
    }
}

/// One stream's state, loaded on first use.
#[derive(Default)]
struct Slot {
    state: Option<StreamState>,
    /// Stored keys to delete with the next write (a forgotten idle stream, an unreadable state).
    stale_keys: Vec<Vec<u8>>,
}

const PING_WINDOW_MS: i64 = 60_000;
const META_CACHE_LIMIT: usize = 200_000;

impl Collector {
    /// A collector over `store`. Streams idle for longer than the configured limit are deleted from storage.
    pub fn open(store: &Store, config: ChukwaConfig) -> Result<Collector, StoreError> {
        let now = now_ms();
        let collector = Collector {
            config,
            streams: Mutex::new(Streams::default()),
            meta_written: Mutex::new(HashSet::new()),
            ping: Mutex::new(PingStats { window_start_ms: now, ..PingStats::default() }),
            last_series_ms: AtomicI64::new(0),
            #[cfg(test)]
            fail_next_commit: std::sync::atomic::AtomicBool::new(false),
        };
        collector.forget_idle_streams(store, now)?;
        Ok(collector)
    }

    pub fn config(&self) -> &ChukwaConfig {
        &self.config
    }

    /// Deletes the state of streams idle for longer than the limit: one seek per stream (its header comes
    /// first), a scan only of the idle ones.
    fn forget_idle_streams(&self, store: &Store, now: i64) -> Result<(), StoreError> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        let mut from: Vec<u8> = Vec::new();
        loop {
            let mut first: Option<(Vec<u8>, Vec<u8>)> = None;
            store.scan_raw(CF_CHUKWA_STREAMS, &from, |k, v| {
                first = Some((k.to_vec(), v.to_vec()));
                false
            })?;
            let Some((key, value)) = first else { break };
            let Some((_, at)) = dedup::split_stream_key(&key) else {
                // Not a key this module writes: drop it, go on after it.
                from = [&key[..], &[0]].concat();
                doomed.push(key);
                continue;
            };
            let prefix = key[..at].to_vec();
            let idle = dedup::is_header_suffix(&key[at..])
                && dedup::header_last_seen(&value)
                    .is_some_and(|seen| now.saturating_sub(seen) > self.config.dedup.idle_ms);
            if idle {
                store.scan_raw(CF_CHUKWA_STREAMS, &prefix, |k, _| {
                    let mine = k.starts_with(&prefix);
                    if mine {
                        doomed.push(k.to_vec());
                    }
                    mine
                })?;
            }
            // Past every key of this stream (tags 0-2 follow the prefix).
            from = [&prefix[..], &[dedup::LAST_TAG + 1]].concat();
        }
        if doomed.is_empty() {
            return Ok(());
        }
        tracing::info!(keys = doomed.len(), "forgetting the de-duplication state of idle Chukwa streams");
        let mut batch = store.new_batch();
        for key in &doomed {
            store.delete_raw(&mut batch, CF_CHUKWA_STREAMS, key);
        }
        store.commit(&mut batch, true)?;
        Ok(())
    }

    /// A POST was received (before it is read): counted for `?ping`.
    pub fn note_post(&self) {
        let mut ping = lock(&self.ping);
        roll_window(&mut ping, now_ms());
        ping.posts_in_window += 1;
    }

    /// The body of `GET <collector>?ping`.
    pub fn ping_body(&self) -> String {
        let now = now_ms();
        let mut ping = lock(&self.ping);
        roll_window(&mut ping, now);
        ping.now_ms = now;
        rtsd_protocol::chukwa::ping_body(&ping)
    }

    /// Ingests one decompressed POST body. Returns the 200 reply body once everything it changed is durable.
    pub fn ingest(&self, store: &Store, metrics: &Metrics, rules: &Rules, body: &[u8]) -> Result<String, IngestError> {
        self.ingest_summary(store, metrics, rules, body).map(|(reply, _)| reply)
    }

    /// [`Collector::ingest`], also saying what the post did.
    pub fn ingest_summary(
        &self,
        store: &Store,
        metrics: &Metrics,
        rules: &Rules,
        body: &[u8],
    ) -> Result<(String, PostSummary), IngestError> {
        let post = parse_body_with(body, &Limits { max_chunks: self.config.max_chunks })?;
        let now = now_ms();
        let mut keys: Vec<StreamKey<'_>> = post.chunks.iter().map(|c| c.stream_key()).collect();
        keys.sort();
        keys.dedup();
        let slots: Vec<Arc<Mutex<Slot>>> = {
            let mut streams = lock(&self.streams);
            let slots = keys.iter().map(|k| streams.slot(k)).collect();
            streams.evict_beyond(self.config.streams_in_memory);
            slots
        };
        // In key order: the fixed lock order of spec §8.3.
        let mut guards: Vec<MutexGuard<'_, Slot>> = slots.iter().map(|s| lock_slot(s)).collect();
        for (key, slot) in keys.iter().zip(guards.iter_mut()) {
            if slot.state.is_none() {
                self.load_stream(store, key, slot, now).map_err(IngestError::Unavailable)?;
            }
            // Idle too long while in memory: forgotten, as it would be at start-up.
            let idle = slot.state.as_ref().filter(|s| s.last_seen_ms() > 0 && s.is_idle(now, &self.config.dedup));
            if let Some(old) = idle {
                slot.stale_keys = old.all_keys(&dedup::stream_prefix(key));
                slot.state = Some(StreamState::new());
            }
        }

        let mut work = Work::new(store, rules, &self.meta_written);
        for chunk in &post.chunks {
            let at = keys.binary_search(&chunk.stream_key()).unwrap_or_default();
            // Loaded just above.
            let Some(state) = guards[at].state.as_mut() else { continue };
            self.chunk(&mut work, state, chunk, now);
        }
        for (key, slot) in keys.iter().zip(guards.iter_mut()) {
            let prefix = dedup::stream_prefix(key);
            for stale in slot.stale_keys.drain(..) {
                store.delete_raw(&mut work.batch, CF_CHUKWA_STREAMS, &stale);
            }
            let Some(state) = slot.state.as_mut() else { continue };
            for (k, v) in state.drain_writes(&prefix) {
                match v {
                    Some(v) => store.put_raw(&mut work.batch, CF_CHUKWA_STREAMS, &k, &v),
                    None => store.delete_raw(&mut work.batch, CF_CHUKWA_STREAMS, &k),
                }
            }
        }
        if self.config.ingest_series {
            self.ingest_series(&mut work, now);
        }
        let committed = match work.storage.take() {
            Some(e) => Err(e),
            None => self.commit(store, &mut work.batch),
        };
        if let Err(e) = committed {
            // Memory ran ahead of storage: forget it, the next post reloads what was committed.
            for slot in guards.iter_mut() {
                slot.state = None;
            }
            return Err(IngestError::Unavailable(e));
        }
        drop(guards);
        {
            let mut written = lock(&self.meta_written);
            if written.len() > META_CACHE_LIMIT {
                written.clear();
            }
            written.extend(work.meta_pending.drain());
        }
        let summary = work.record_metrics(metrics, post.chunks.len());
        {
            let mut ping = lock(&self.ping);
            roll_window(&mut ping, now);
            ping.chunks_in_window += post.chunks.len() as u64;
            ping.lifetime_chunks += post.chunks.len() as u64;
        }
        let reply = rtsd_protocol::chukwa::reply_body(post.chunks.iter().map(Ack::of));
        Ok((reply, summary))
    }

    fn commit(&self, store: &Store, batch: &mut PointBatch) -> Result<u64, StoreError> {
        #[cfg(test)]
        if self.fail_next_commit.swap(false, Ordering::Relaxed) {
            return Err(StoreError::Corrupt("injected commit failure".into()));
        }
        store.commit(batch, self.config.sync)
    }

    fn load_stream(&self, store: &Store, key: &StreamKey<'_>, slot: &mut Slot, now: i64) -> Result<(), StoreError> {
        let prefix = dedup::stream_prefix(key);
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        store.scan_raw(CF_CHUKWA_STREAMS, &prefix, |k, v| {
            if !k.starts_with(&prefix) {
                return false;
            }
            entries.push((k[prefix.len()..].to_vec(), v.to_vec()));
            true
        })?;
        let loaded = StreamState::load(entries.iter().map(|(k, v)| (&k[..], &v[..])));
        let state = match loaded {
            Ok(Some(state)) if !state.is_idle(now, &self.config.dedup) => state,
            Ok(None) => StreamState::new(),
            other => {
                if let Err(e) = other {
                    tracing::warn!(stream = ?key, error = %e, "unreadable Chukwa stream state; starting the stream afresh");
                }
                slot.stale_keys = entries.iter().map(|(k, _)| [&prefix[..], k].concat()).collect();
                StreamState::new()
            }
        };
        slot.state = Some(state);
        Ok(())
    }

    /// De-duplicates one chunk and writes what is new.
    fn chunk(&self, work: &mut Work<'_>, state: &mut StreamState, chunk: &Chunk<'_>, now: i64) {
        let verdict = state.observe(chunk.seq_id, chunk.data, chunk.stream_name == "STATUS", now, &self.config.dedup);
        let cluster = chunk.cluster();
        let host = chunk.source.as_ref();
        let tally = work.tally(cluster, host, &chunk.data_type);
        match verdict.outcome {
            Outcome::Empty => return,
            Outcome::New { gap } => tally.gap += u64::from(gap),
            Outcome::Resend | Outcome::Continuation | Outcome::OpaqueDuplicate => tally.duplicate += 1,
            Outcome::Reset { window_miss } => {
                tally.reset += 1;
                tally.window_miss += u64::from(window_miss);
            }
            Outcome::OpaqueNew => {}
        }
        if verdict.drop_all() {
            return;
        }
        let kept = Kept::of(chunk, verdict.trim_at);
        if kept.records == 0 && kept.byte_from >= chunk.data.len() {
            return;
        }
        tally.chunks += 1;
        tally.bytes += (chunk.data.len() - kept.byte_from) as u64;
        tally.records += kept.records;

        let processor = self.config.processor_for(&chunk.data_type, &chunk.stream_name);
        if processor.is_raw() {
            return;
        }
        let input = match processor {
            // Line rules read the new bytes; JSON processors need whole records.
            Processor::Rule(_) => &chunk.data[kept.byte_from..],
            _ => &chunk.data[kept.record_from..],
        };
        let info = ChunkInfo { data_type: &chunk.data_type, source: &chunk.source, tags: &chunk.tags };
        let extracted = mapping::extract(&processor, &info, input);
        let (mut points, mut refused) = (0u64, 0u64);
        for sample in &extracted.samples {
            if self.config.schema {
                let key = schema::cell_key(sample.time, &sample.name, &sample.source);
                work.store.put_raw(&mut work.batch, CF_CHUKWA_T, &key, sample.value.as_bytes());
                work.meta(&chunk.data_type, &sample.name, MetaType::Metric);
            }
            match work.point(sample, cluster) {
                Some(true) => points += 1,
                Some(false) => refused += 1,
                None => {}
            }
        }
        if self.config.schema {
            // `AbstractProcessor.process`: the chunk's source first, then what the parser found; the tags at the
            // processor's time (only when the data carried one).
            work.meta(&chunk.data_type, &chunk.source, MetaType::Source);
            for source in &extracted.sources {
                work.meta(&chunk.data_type, source, MetaType::Source);
            }
            if extracted.register_cluster {
                work.meta(&chunk.data_type, chunk.tag("cluster").unwrap_or("null"), MetaType::Cluster);
            }
            if let Some(time) = extracted.time {
                let key = schema::cell_key(time, &chunk.data_type, &chunk.source);
                work.store.put_raw(&mut work.batch, CF_CHUKWA_A, &key, chunk.tags.as_bytes());
            }
        }
        let tally = work.tally(cluster, host, &chunk.data_type);
        tally.points += points;
        tally.refused += refused;
        tally.unparsable += u64::from(extracted.unparsable);
    }

    /// The `chukwa.ingest.*` and `chukwa.dedup.*` points of this post, at a server time unique to it.
    fn ingest_series(&self, work: &mut Work<'_>, now: i64) {
        if work.tallies.is_empty() {
            return;
        }
        let mut last = self.last_series_ms.load(Ordering::Relaxed);
        let ts = loop {
            let ts = now.max(last + 1);
            match self.last_series_ms.compare_exchange(last, ts, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break ts,
                Err(seen) => last = seen,
            }
        };
        let tallies: Vec<((String, String, String), Tally)> =
            work.tallies.iter().map(|(k, t)| (k.clone(), *t)).collect();
        for ((cluster, host, data_type), t) in tallies {
            let series = [
                ("chukwa.ingest.chunks", t.chunks),
                ("chukwa.ingest.bytes", t.bytes),
                ("chukwa.ingest.records", t.records),
                ("chukwa.dedup.duplicate", t.duplicate),
                ("chukwa.dedup.reset", t.reset),
                ("chukwa.dedup.gap", t.gap),
                ("chukwa.dedup.window_miss", t.window_miss),
            ];
            for (metric, value) in series {
                if value == 0 {
                    continue;
                }
                let mut tags = Tags::new();
                tags.push((Cow::Borrowed("cluster"), Cow::Owned(sanitize(&cluster, work.rules, "undefined"))));
                tags.push((Cow::Borrowed("host"), Cow::Owned(sanitize(&host, work.rules, "unknown"))));
                tags.push((Cow::Borrowed("datatype"), Cow::Owned(sanitize(&data_type, work.rules, "unknown"))));
                let dp =
                    DataPoint { metric: Cow::Borrowed(metric), timestamp: ts, value: Value::Int(value as i64), tags };
                match work.store.add_point(&mut work.batch, &dp) {
                    Err(AddError::Storage(e)) => {
                        work.storage.get_or_insert(e);
                    }
                    Err(e) => tracing::debug!(error = %e, metric, "Chukwa ingest series point not written"),
                    Ok(()) => {}
                }
            }
        }
    }
}

/// Per (cluster, host, dataType) counts of one post.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    chunks: u64,
    bytes: u64,
    records: u64,
    points: u64,
    refused: u64,
    unparsable: u64,
    duplicate: u64,
    reset: u64,
    gap: u64,
    window_miss: u64,
}

/// One post's write batch and counts.
struct Work<'a> {
    store: &'a Store,
    rules: &'a Rules,
    batch: PointBatch,
    tallies: HashMap<(String, String, String), Tally>,
    meta_pending: HashSet<Vec<u8>>,
    meta_written: &'a Mutex<HashSet<Vec<u8>>>,
    /// A point the store could not take (its UIDs could not be assigned) fails the whole post, so the agent
    /// resends it rather than hearing its records were stored.
    storage: Option<StoreError>,
}

impl<'a> Work<'a> {
    fn new(store: &'a Store, rules: &'a Rules, meta_written: &'a Mutex<HashSet<Vec<u8>>>) -> Work<'a> {
        Work {
            store,
            rules,
            batch: store.new_batch(),
            tallies: HashMap::new(),
            meta_pending: HashSet::new(),
            meta_written,
            storage: None,
        }
    }

    fn tally(&mut self, cluster: &str, host: &str, data_type: &str) -> &mut Tally {
        self.tallies.entry((cluster.to_string(), host.to_string(), data_type.to_string())).or_default()
    }

    /// Writes a `chukwa_meta` cell unless this process already did.
    fn meta(&mut self, row: &str, qualifier: &str, kind: MetaType) {
        let key = schema::meta_key(row, qualifier);
        if self.meta_pending.contains(&key) || lock(self.meta_written).contains(&key) {
            return;
        }
        self.store.put_raw(&mut self.batch, CF_CHUKWA_META, &key, schema::meta_value(row, qualifier, kind).as_bytes());
        self.meta_pending.insert(key);
    }

    /// Adds a sample as an OpenTSDB point: `Some(true)` written, `Some(false)` refused, `None` not a number.
    fn point(&mut self, sample: &Sample, cluster: &str) -> Option<bool> {
        let value = tsdb_value(&sample.value)?;
        if sample.time <= 0 {
            return Some(false);
        }
        let mut tags = Tags::new();
        tags.push((Cow::Borrowed("host"), Cow::Owned(sanitize(&sample.host, self.rules, "unknown"))));
        tags.push((Cow::Borrowed("cluster"), Cow::Owned(sanitize(cluster, self.rules, "undefined"))));
        if let Some(p) = &sample.process {
            tags.push((Cow::Borrowed("process"), Cow::Owned(sanitize(p, self.rules, "unknown"))));
        }
        for (k, v) in &sample.extra_tags {
            let k = sanitize(k, self.rules, "_");
            if !tags.iter().any(|(have, _)| *have == k) {
                tags.push((Cow::Owned(k), Cow::Owned(sanitize(v, self.rules, "_"))));
            }
        }
        let dp = DataPoint {
            metric: Cow::Owned(sanitize(&sample.name, self.rules, "_")),
            timestamp: sample.time,
            value,
            tags,
        };
        if let Err(e) = point::check_for_write(&dp, self.rules) {
            tracing::debug!(error = %e, "Chukwa sample refused");
            return Some(false);
        }
        match self.store.add_point(&mut self.batch, &dp) {
            Ok(()) => Some(true),
            Err(AddError::Storage(e)) => {
                self.storage.get_or_insert(e);
                Some(false)
            }
            Err(e) => {
                tracing::debug!(error = %e, metric = %dp.metric, "Chukwa sample not written");
                Some(false)
            }
        }
    }

    /// Adds this post's counts to `/metrics`.
    fn record_metrics(&self, metrics: &Metrics, chunks: usize) -> PostSummary {
        let mut summary = PostSummary { chunks, ..PostSummary::default() };
        let mut by_type: HashMap<&str, Tally> = HashMap::new();
        for ((_, _, data_type), t) in &self.tallies {
            let sum = by_type.entry(data_type.as_str()).or_default();
            sum.chunks += t.chunks;
            sum.bytes += t.bytes;
            sum.records += t.records;
            sum.points += t.points;
            sum.refused += t.refused;
            sum.unparsable += t.unparsable;
            sum.duplicate += t.duplicate;
            sum.reset += t.reset;
            sum.gap += t.gap;
            sum.window_miss += t.window_miss;
        }
        for (data_type, t) in by_type {
            metrics.chukwa_ingested(data_type, t.chunks, t.bytes, t.records, t.points);
            metrics.chukwa_dedup("duplicate", t.duplicate);
            metrics.chukwa_dedup("reset", t.reset);
            metrics.chukwa_dedup("gap", t.gap);
            metrics.chukwa_dedup("window_miss", t.window_miss);
            metrics.chukwa_dropped("unparsable", t.unparsable);
            metrics.chukwa_dropped("refused_point", t.refused);
            summary.new_chunks += t.chunks;
            summary.records += t.records;
            summary.points += t.points;
        }
        summary
    }
}

/// What survives of a chunk after trimming at `trim_at` (spec §8.4 rule 2): records whose absolute end lies past
/// it, and the bytes past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kept {
    records: u64,
    /// Start in `data` of the first kept record.
    record_from: usize,
    /// Start in `data` of the first byte past `trim_at`.
    byte_from: usize,
}

impl Kept {
    fn of(chunk: &Chunk<'_>, trim_at: Option<i64>) -> Kept {
        let len = chunk.data.len();
        let Some(trim) = trim_at else {
            return Kept { records: chunk.record_ends.len() as u64, record_from: 0, byte_from: 0 };
        };
        let s = chunk.start();
        let byte_from = trim.saturating_sub(s).clamp(0, len as i64) as usize;
        let mut kept = Kept { records: 0, record_from: len, byte_from };
        let mut previous_end: i64 = -1;
        for end in chunk.record_ends.iter() {
            let end = i64::from(end);
            if s.saturating_add(end + 1) > trim {
                if kept.records == 0 {
                    kept.record_from = (previous_end + 1).clamp(0, len as i64) as usize;
                }
                kept.records += 1;
            }
            previous_end = end;
        }
        kept
    }
}

/// A sample's value as an OpenTSDB value: numbers as `put` parses them, booleans as 1/0; `None` for anything
/// else and for NaN or infinities.
fn tsdb_value(s: &str) -> Option<Value> {
    match s {
        "true" => return Some(Value::Int(1)),
        "false" => return Some(Value::Int(0)),
        _ => {}
    }
    let v = point::parse_value(s.trim()).ok()?;
    let finite = match v {
        Value::Float(f) => f.is_finite(),
        Value::Double(d) => d.is_finite(),
        Value::Int(_) => true,
    };
    finite.then_some(v)
}

/// A name or tag made legal for OpenTSDB: characters outside its set become `_`; empty becomes `empty`.
pub fn sanitize(s: &str, rules: &Rules, empty: &str) -> String {
    if s.is_empty() {
        return empty.to_string();
    }
    s.chars().map(|c| if point::is_allowed_char(c, rules) { c } else { '_' }).collect()
}

fn roll_window(ping: &mut PingStats, now: i64) {
    if now - ping.window_start_ms >= PING_WINDOW_MS {
        let windows = (now - ping.window_start_ms) / PING_WINDOW_MS;
        ping.window_start_ms += windows * PING_WINDOW_MS;
        ping.posts_in_window = 0;
        ping.chunks_in_window = 0;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks a stream; a lock poisoned by a panic mid-post may hold a half-updated state, so it is reloaded.
fn lock_slot(m: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => {
            m.clear_poison();
            let mut g = poisoned.into_inner();
            g.state = None;
            g
        }
    }
}

#[cfg(test)]
mod tests;
