//! A connection's memory of the series it has written, resolved to UIDs: a collector sends the same few
//! thousand series over and over, and a point of a known series needs neither name lookups in the shared UID
//! cache nor tag validation again. Telnet keys a series by the words of its `put` line, `/api/put` by the metric
//! and tag strings of its JSON object; either way a point only reaches the cache once its series was accepted.
use std::collections::HashMap;
use std::hash::BuildHasher;

use crate::store::{SeriesKey, Store};

/// Bounds a connection's cache; past it the cache starts over (a collector's series set is far smaller).
const CAPACITY: usize = 200_000;

/// The seeds of the two 64-bit halves of a key's digest (arbitrary, different).
const DIGEST_SEEDS: [u64; 2] = [0x9e37_79b9_7f4a_7c15, 0xc2b2_ae3d_27d4_eb4f];

/// No entry (the end of a chain of successors).
const NONE: u32 = u32::MAX;

/// Entries are found by a 128-bit digest of their key, not the key's bytes: the table of a busy connection
/// (tens of thousands of series) is far larger than the CPU caches, and comparing a stored key cost a second
/// cache miss per point (perf: ~10% of `/api/put`'s time). Two different series of one connection share a
/// digest with a probability around n^2 / 2^129 (n = series), below 10^-28 at the capacity; a client able to
/// forge a collision could only mislabel points it could write under either name anyway.
///
/// A collector sends its series in the same order every interval, so each entry remembers the entry looked up
/// after it last time, and a lookup first tries that one. Entries sit in a vector in the order they were first
/// seen, so a connection repeating its order walks them sequentially, which the CPU prefetches; a probe of the
/// hash index (a cache miss per point on a connection with tens of thousands of series: perf, 12% of A telnet
/// ingest) is left for series out of their usual order.
pub struct SeriesCache {
    /// By the low half of the digest (entries are checked against the whole digest).
    index: HashMap<u64, u32, foldhash::fast::FixedState>,
    entries: Vec<Entry>,
    /// The key being looked up (reused, so a lookup allocates nothing), and its digest.
    key: Vec<u8>,
    digest: u128,
    /// The entry of the previous lookup or insert (its `next` is the first guess), or [`NONE`].
    last: u32,
    /// The store's cache generation the entries belong to (see [`Store::cache_generation`]).
    generation: u64,
}

struct Entry {
    digest: u128,
    series: SeriesKey,
    /// The entry looked up right after this one last time, or [`NONE`].
    next: u32,
}

impl SeriesCache {
    pub fn new(store: &Store) -> SeriesCache {
        SeriesCache {
            index: HashMap::default(),
            entries: Vec::new(),
            key: Vec::new(),
            digest: 0,
            last: NONE,
            generation: store.cache_generation(),
        }
    }

    /// Called before each batch: forgets everything when names may map to other UIDs than before
    /// (`dropcaches`, renames) or when the cache is full.
    pub fn refresh(&mut self, store: &Store) {
        let generation = store.cache_generation();
        if self.generation != generation || self.entries.len() >= CAPACITY {
            self.index.clear();
            self.entries.clear();
            self.last = NONE;
            self.generation = generation;
        }
    }

    /// Sets the key that [`SeriesCache::get`] and [`SeriesCache::insert`] use: the series' strings in order,
    /// each length-prefixed so that no two different lists collide.
    pub fn set_key<'b>(&mut self, parts: impl IntoIterator<Item = &'b [u8]>) {
        self.key.clear();
        for part in parts {
            self.key.extend_from_slice(&(part.len() as u32).to_be_bytes());
            self.key.extend_from_slice(part);
        }
        let half = |seed: u64| foldhash::quality::FixedState::with_seed(seed).hash_one(self.key.as_slice());
        self.digest = u128::from(half(DIGEST_SEEDS[0])) << 64 | u128::from(half(DIGEST_SEEDS[1]));
    }

    /// The series of the current key, if this connection wrote it before.
    pub fn get(&mut self) -> Option<&SeriesKey> {
        let guess = self.entries.get(self.last as usize).map_or(NONE, |e| e.next);
        let found = match self.entries.get(guess as usize) {
            Some(e) if e.digest == self.digest => guess,
            _ => {
                let i = *self.index.get(&(self.digest as u64))?;
                if self.entries[i as usize].digest != self.digest {
                    return None;
                }
                if let Some(previous) = self.entries.get_mut(self.last as usize) {
                    previous.next = i;
                }
                i
            }
        };
        self.last = found;
        Some(&self.entries[found as usize].series)
    }

    /// Remembers the series of the current key.
    pub fn insert(&mut self, series: SeriesKey) {
        let i = self.entries.len() as u32;
        self.entries.push(Entry { digest: self.digest, series, next: NONE });
        // A digest whose low half another entry has keeps only the newer one findable through the index.
        self.index.insert(self.digest as u64, i);
        if let Some(previous) = self.entries.get_mut(self.last as usize) {
            previous.next = i;
        }
        self.last = i;
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a fresh directory (kept while the directory lives).
    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config::for_data_dir(dir.path(), &[]).unwrap();
        let store = Store::open(&config.store_options(), Default::default()).unwrap();
        (dir, store)
    }

    /// The series of `metric{host=host}`.
    fn series_key(store: &Store, metric: &str, host: &str) -> SeriesKey {
        let point = rtsd_protocol::point::DataPoint {
            metric: metric.into(),
            timestamp: 1,
            value: rtsd_protocol::codec::Value::Int(1),
            tags: [("host".into(), host.to_string().into())].into_iter().collect(),
        };
        store.series_key(&point).unwrap()
    }

    #[test]
    fn keys_are_the_parts_in_order_and_length_prefixed() {
        let (_dir, store) = store();
        let mut cache = SeriesCache::new(&store);
        let series = |metric: &str| series_key(&store, metric, "a");
        cache.set_key([&b"m"[..], b"host", b"a"]);
        assert!(cache.get().is_none());
        cache.insert(series("m"));
        assert_eq!(cache.get(), Some(&series("m")));
        // The same bytes cut differently are another key.
        cache.set_key([&b"mh"[..], b"ost", b"a"]);
        assert!(cache.get().is_none());
        cache.set_key([&b"m"[..], b"host", b"a"]);
        assert!(cache.get().is_some());
        // dropcaches: the next batch starts over.
        store.drop_caches();
        cache.refresh(&store);
        assert!(cache.is_empty());
    }

    #[test]
    fn series_are_found_in_any_order() {
        // The successor of an entry is only a guess: a changed order still finds each series.
        let (_dir, store) = store();
        let mut cache = SeriesCache::new(&store);
        let series = |host: &str| series_key(&store, "m", host);
        let hosts: Vec<String> = (0..20).map(|i| format!("h{i}")).collect();
        for h in &hosts {
            cache.set_key([&b"m"[..], b"host", h.as_bytes()]);
            assert!(cache.get().is_none());
            cache.insert(series(h));
        }
        let orders: [Vec<usize>; 3] = [(0..20).collect(), (0..20).rev().collect(), (0..20).step_by(3).collect()];
        for order in orders.iter().chain(orders.iter()) {
            for &i in order {
                cache.set_key([&b"m"[..], b"host", hosts[i].as_bytes()]);
                assert_eq!(cache.get(), Some(&series(&hosts[i])), "{}", hosts[i]);
            }
        }
        cache.set_key([&b"m"[..], b"host", b"unknown"]);
        assert!(cache.get().is_none());
    }

    #[test]
    fn digests_of_a_full_cache_of_similar_keys_are_distinct() {
        let (_dir, store) = store();
        let mut cache = SeriesCache::new(&store);
        let mut seen = std::collections::HashSet::new();
        for n in 0..CAPACITY {
            let host = format!("host{n:06}");
            cache.set_key([&b"sys.cpu.user"[..], b"host", host.as_bytes(), b"dc", b"dc0"]);
            assert!(seen.insert(cache.digest), "{host}");
        }
    }
}
