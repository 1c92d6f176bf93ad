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

/// Entries are found by a 128-bit digest of their key, not the key's bytes: the table of a busy connection
/// (tens of thousands of series) is far larger than the CPU caches, and comparing a stored key cost a second
/// cache miss per point (perf: ~10% of `/api/put`'s time). Two different series of one connection share a
/// digest with a probability around n^2 / 2^129 (n = series), below 10^-28 at the capacity; a client able to
/// forge a collision could only mislabel points it could write under either name anyway.
pub struct SeriesCache {
    map: HashMap<u128, SeriesKey, foldhash::fast::FixedState>,
    /// The key being looked up (reused, so a lookup allocates nothing), and its digest.
    key: Vec<u8>,
    digest: u128,
    /// The store's cache generation the entries belong to (see [`Store::cache_generation`]).
    generation: u64,
}

impl SeriesCache {
    pub fn new(store: &Store) -> SeriesCache {
        SeriesCache { map: HashMap::default(), key: Vec::new(), digest: 0, generation: store.cache_generation() }
    }

    /// Called before each batch: forgets everything when names may map to other UIDs than before
    /// (`dropcaches`, renames) or when the cache is full.
    pub fn refresh(&mut self, store: &Store) {
        let generation = store.cache_generation();
        if self.generation != generation || self.map.len() >= CAPACITY {
            self.map.clear();
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
    pub fn get(&self) -> Option<&SeriesKey> {
        self.map.get(&self.digest)
    }

    /// Remembers the series of the current key.
    pub fn insert(&mut self, series: SeriesKey) {
        self.map.insert(self.digest, series);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_parts_in_order_and_length_prefixed() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config::for_data_dir(dir.path(), &[]).unwrap();
        let store = Store::open(&config, Default::default()).unwrap();
        let mut cache = SeriesCache::new(&store);
        let series = |metric: &str| {
            let point = rtsd_protocol::point::DataPoint {
                metric: metric.into(),
                timestamp: 1,
                value: rtsd_protocol::codec::Value::Int(1),
                tags: [("host".into(), "a".into())].into_iter().collect(),
            };
            store.series_key(&point).unwrap()
        };
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
    fn digests_of_a_full_cache_of_similar_keys_are_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config::for_data_dir(dir.path(), &[]).unwrap();
        let store = Store::open(&config, Default::default()).unwrap();
        let mut cache = SeriesCache::new(&store);
        let mut seen = std::collections::HashSet::new();
        for n in 0..CAPACITY {
            let host = format!("host{n:06}");
            cache.set_key([&b"sys.cpu.user"[..], b"host", host.as_bytes(), b"dc", b"dc0"]);
            assert!(seen.insert(cache.digest), "{host}");
        }
    }
}
