//! Pure helpers for the collector's exactly-once de-duplication (spec: chukwa §1 "Tags", §8.4): tag lookup, the
//! stream key, and content fingerprints. The stateful rules (high-water mark, ring, classification) live in the
//! daemon; everything here is a function of one chunk.
use std::borrow::Cow;

use smallvec::SmallVec;
use xxhash_rust::xxh64::Xxh64;

use super::chunk::Chunk;

/// What `RecordUtil.getClusterName` answers for tags without a cluster, and the stream key's cluster then.
pub const UNDEFINED_CLUSTER: &str = "undefined";

/// `Chunk.getTag(name)`: the value of the first `name="value"` in `tags` that starts at a word boundary (Java's
/// regex `\b<name>="([^"]*)"`, with `name` taken literally). `None` when there is none.
///
/// ```
/// use rtsd_protocol::chukwa::get_tag;
/// let tags = r#" cluster="demo" timeStamp="1466380800123""#;
/// assert_eq!(get_tag(tags, "cluster"), Some("demo"));
/// assert_eq!(get_tag(tags, "Stamp"), None); // not at a word boundary
/// ```
pub fn get_tag<'t>(tags: &'t str, name: &str) -> Option<&'t str> {
    let mut from = 0;
    while from <= tags.len() {
        let p = from + tags.get(from..)?.find(name)?;
        let after = p + name.len();
        if tags[after..].starts_with("=\"") && at_word_boundary(tags, p) {
            let value = &tags[after + 2..];
            // `[^"]*"` needs a closing quote; without one no later start can match either.
            return value.find('"').map(|q| &value[..q]);
        }
        // Next candidate start: one character further.
        from = p + tags[p..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// Java's `\b` before byte `p`: exactly one of the characters around it is a word character. Java (8-18, which
/// Chukwa ran on) counts letters, digits and `_` as word characters there.
fn at_word_boundary(s: &str, p: usize) -> bool {
    let is_word = |c: char| c == '_' || c.is_alphanumeric();
    let before = s[..p].chars().next_back().is_some_and(is_word);
    let after = s[p..].chars().next().is_some_and(is_word);
    before != after
}

/// The cluster a chunk belongs to: its `cluster` tag, or `"undefined"` (spec §8.4).
pub fn cluster_name(tags: &str) -> &str {
    get_tag(tags, "cluster").unwrap_or(UNDEFINED_CLUSTER)
}

/// A stream's identity on the wire (spec §1, §8.4): (cluster, source, dataType, streamName). Not the whole tags
/// string, which carries per-chunk `timeStamp`/`time` tags, and not the adaptor ID, which is not sent. Ordered, so
/// a post's stream locks can be taken in one fixed order (§8.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey<'a> {
    pub cluster: Cow<'a, str>,
    pub source: Cow<'a, str>,
    pub data_type: Cow<'a, str>,
    pub stream_name: Cow<'a, str>,
}

impl StreamKey<'_> {
    /// A key that owns its strings, to outlive the request body.
    pub fn into_owned(self) -> StreamKey<'static> {
        StreamKey {
            cluster: Cow::Owned(self.cluster.into_owned()),
            source: Cow::Owned(self.source.into_owned()),
            data_type: Cow::Owned(self.data_type.into_owned()),
            stream_name: Cow::Owned(self.stream_name.into_owned()),
        }
    }
}

impl Chunk<'_> {
    /// `getTag(name)` on this chunk's tags (see [`get_tag`]).
    pub fn tag(&self, name: &str) -> Option<&str> {
        get_tag(&self.tags, name)
    }

    /// The `cluster` tag, or `"undefined"`.
    pub fn cluster(&self) -> &str {
        cluster_name(&self.tags)
    }

    /// The stream this chunk belongs to, borrowing from the chunk.
    pub fn stream_key(&self) -> StreamKey<'_> {
        StreamKey {
            cluster: Cow::Borrowed(self.cluster()),
            source: Cow::Borrowed(&self.source),
            data_type: Cow::Borrowed(&self.data_type),
            stream_name: Cow::Borrowed(&self.stream_name),
        }
    }

    /// The identity of an opaque-stream chunk (see [`OpaqueKey`]).
    pub fn opaque_key(&self) -> OpaqueKey {
        OpaqueKey { seq_id: self.seq_id, len: self.data.len() as u64, hash: content_hash(self.data) }
    }

    /// The content fingerprint of a byte-offset-stream chunk (see [`Fingerprint`]).
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(self.data)
    }
}

/// xxh64 (seed 0) of `data`: the content hash of spec §8.4. A fixed, documented function because de-duplication
/// state that stores it is snapshotted and must read the same after an upgrade.
pub fn content_hash(data: &[u8]) -> u64 {
    xxhash_rust::xxh64::xxh64(data, 0)
}

/// The de-duplication identity of a chunk from an *opaque* stream (HeartbeatAdaptor, SocketAdaptor, `STATUS`,
/// spec §8.4): `(seqID, len, xxh64(data))`. Equal keys mean a duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpaqueKey {
    pub seq_id: i64,
    pub len: u64,
    pub hash: u64,
}

/// Where prefix fingerprints start (spec §8.4): a chunk of at most this many bytes is hashed whole.
pub const FINGERPRINT_BASE: usize = 256;

/// The prefix lengths a [`Fingerprint`] hashes for a chunk of `len` bytes: `min(len, 256)`, then doubling (512,
/// 1024, ...) while below `len`, and finally `len` itself. `1000` gives `256, 512, 1000`; `100` gives `100`.
pub fn fingerprint_lengths(len: usize) -> impl Iterator<Item = usize> {
    let mut next = Some(len.min(FINGERPRINT_BASE));
    std::iter::from_fn(move || {
        let current = next?;
        next = (current < len).then(|| current.saturating_mul(2).min(len));
        Some(current)
    })
}

/// A byte-offset chunk's content fingerprint (spec §8.4, "fingerprint strength"): xxh64 of its prefixes at
/// [`fingerprint_lengths`]. Two chunks that start at the same stream offset are compared at the largest prefix
/// both contain, so a nearly static head (sigar's JSON starts with filesystem names) does not make a new sample
/// look like a resend: an equal hash means the overlapping bytes really are the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// `(prefix length, xxh64 of that prefix)`, lengths strictly increasing, the last one the chunk's length.
    prefixes: SmallVec<[(u32, u64); 4]>,
}

impl Fingerprint {
    /// Fingerprints `data` in one pass.
    pub fn of(data: &[u8]) -> Fingerprint {
        let mut hasher = Xxh64::new(0);
        let mut hashed = 0;
        let prefixes = fingerprint_lengths(data.len())
            .map(|len| {
                hasher.update(&data[hashed..len]);
                hashed = len;
                (len as u32, hasher.digest())
            })
            .collect();
        Fingerprint { prefixes }
    }

    /// Rebuilds a fingerprint from stored prefixes; `None` unless lengths strictly increase and there is one.
    pub fn from_prefixes(prefixes: impl IntoIterator<Item = (u32, u64)>) -> Option<Fingerprint> {
        let prefixes: SmallVec<[(u32, u64); 4]> = prefixes.into_iter().collect();
        let increasing = prefixes.windows(2).all(|w| w[0].0 < w[1].0);
        (increasing && !prefixes.is_empty()).then_some(Fingerprint { prefixes })
    }

    /// `(prefix length, hash)` pairs, for storing.
    pub fn prefixes(&self) -> &[(u32, u64)] {
        &self.prefixes
    }

    /// Length of the fingerprinted chunk.
    pub fn len(&self) -> usize {
        self.prefixes.last().map_or(0, |&(len, _)| len as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Does `data` (a new chunk starting at the same offset) begin with the same bytes? Compared at the largest
    /// stored prefix length that `data` covers. `None` when `data` is shorter than every stored prefix, so no
    /// comparison is possible (the caller should treat it as different: no data is lost that way).
    pub fn matches(&self, data: &[u8]) -> Option<bool> {
        let &(len, hash) = self.prefixes.iter().rev().find(|&&(len, _)| len as usize <= data.len())?;
        Some(content_hash(&data[..len as usize]) == hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn get_tag_as_java() {
        let tags = r#" cluster="demo" timeStamp="1466380800123""#;
        assert_eq!(get_tag(tags, "cluster"), Some("demo"));
        assert_eq!(get_tag(tags, "timeStamp"), Some("1466380800123"));
        assert_eq!(get_tag(tags, "time"), None);
        assert_eq!(get_tag(tags, "Stamp"), None);
        assert_eq!(get_tag(r#"subcluster="x" cluster="y""#, "cluster"), Some("y"));
        assert_eq!(get_tag(r#"cluster="x""#, "cluster"), Some("x"));
        assert_eq!(get_tag(r#" cluster="""#, "cluster"), Some(""));
        assert_eq!(get_tag(r#" cluster="unterminated"#, "cluster"), None);
        assert_eq!(get_tag(r#" a.cluster="dot""#, "cluster"), Some("dot"));
        assert_eq!(get_tag(r#" écluster="x""#, "cluster"), None);
        assert_eq!(get_tag("", "cluster"), None);
        // The first match wins.
        assert_eq!(get_tag(r#" cluster="a" cluster="b""#, "cluster"), Some("a"));
        // [^"]* spans newlines.
        assert_eq!(get_tag(" cluster=\"a\nb\"", "cluster"), Some("a\nb"));
    }

    #[test]
    fn cluster_defaults_to_undefined() {
        assert_eq!(cluster_name(r#" cluster="demo""#), "demo");
        assert_eq!(cluster_name(r#" timeStamp="1""#), "undefined");
    }

    #[test]
    fn stream_key_ignores_per_chunk_tags() {
        let a = Chunk::new(10, "host1", r#" cluster="demo" timeStamp="1""#, "JMX", "JmxData", b"0123456789");
        let b = Chunk::new(20, "host1", r#" cluster="demo" timeStamp="2""#, "JMX", "JmxData", b"0123456789");
        assert_eq!(a.stream_key(), b.stream_key());
        assert_eq!(a.stream_key().cluster, "demo");
        let owned: StreamKey<'static> = a.stream_key().into_owned();
        assert_eq!(owned, b.stream_key());
        let c = Chunk::new(10, "host1", "", "JMX", "JmxData", b"");
        assert_eq!(c.stream_key().cluster, "undefined");
        assert_ne!(a.stream_key(), c.stream_key());
    }

    #[test]
    fn fingerprint_lengths_double_from_256() {
        let lens = |n| fingerprint_lengths(n).collect::<Vec<_>>();
        assert_eq!(lens(0), [0]);
        assert_eq!(lens(100), [100]);
        assert_eq!(lens(256), [256]);
        assert_eq!(lens(257), [256, 257]);
        assert_eq!(lens(512), [256, 512]);
        assert_eq!(lens(1000), [256, 512, 1000]);
        assert_eq!(lens(131_072).len(), 10);
    }

    #[test]
    fn fingerprint_prefix_hashes_are_xxh64_of_prefixes() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let fp = Fingerprint::of(&data);
        assert_eq!(fp.len(), 1000);
        for &(len, hash) in fp.prefixes() {
            assert_eq!(hash, content_hash(&data[..len as usize]));
        }
        assert_eq!(Fingerprint::from_prefixes(fp.prefixes().iter().copied()), Some(fp.clone()));
        assert_eq!(Fingerprint::from_prefixes([(5, 1), (5, 2)]), None);
        assert_eq!(Fingerprint::from_prefixes([]), None);
    }

    #[test]
    fn xxh64_known_values() {
        // Reference values of XXH64 with seed 0.
        assert_eq!(content_hash(b""), 0xef46db3751d8e999);
        assert_eq!(content_hash(b"a"), 0xd24ec4f1a98c6e5b);
    }

    /// A static head no longer hides a different body: compared at the largest common prefix.
    #[test]
    fn fingerprint_sees_past_a_static_head() {
        let mut old = vec![b'x'; 600];
        old.extend_from_slice(b"old sample");
        let mut new = vec![b'x'; 600];
        new.extend_from_slice(b"new sample");
        let fp = Fingerprint::of(&old);
        assert_eq!(fp.matches(&new), Some(false));
        assert_eq!(fp.matches(&old), Some(true));
        // A resend that re-read more of the file: same bytes, longer.
        let mut longer = old.clone();
        longer.extend_from_slice(b" and more");
        assert_eq!(fp.matches(&longer), Some(true));
        // Shorter than every stored prefix: no verdict.
        assert_eq!(fp.matches(&old[..200]), None);
        // A stored shorter chunk is compared on its whole length.
        assert_eq!(Fingerprint::of(&old[..100]).matches(&old), Some(true));
        assert_eq!(Fingerprint::of(&old[..300]).matches(&new), Some(true), "the first 300 bytes are the same");
    }

    #[test]
    fn opaque_key_of_socket_events() {
        // §8.7 vector 6: two different 120-byte events with seqID 120 differ; a repeat is equal.
        let e1 = vec![b'a'; 120];
        let e2 = vec![b'b'; 120];
        let k1 = Chunk::new(120, "h", "", "s", "HadoopMetrics", &e1).opaque_key();
        let k2 = Chunk::new(120, "h", "", "s", "HadoopMetrics", &e2).opaque_key();
        let k1_again = Chunk::new(120, "h", "", "s", "HadoopMetrics", &e1).opaque_key();
        assert_ne!(k1, k2);
        assert_eq!(k1, k1_again);
        assert_eq!(k1.len, 120);
    }

    proptest! {
        #[test]
        fn get_tag_never_panics(tags in any::<String>(), name in "[a-zé_]{0,4}") {
            let _ = get_tag(&tags, &name);
        }

        #[test]
        fn fingerprint_matches_itself_and_its_extensions(data in proptest::collection::vec(any::<u8>(), 0..3000),
                                                          more in proptest::collection::vec(any::<u8>(), 0..600)) {
            let fp = Fingerprint::of(&data);
            prop_assert_eq!(fp.len(), data.len());
            prop_assert_eq!(fp.matches(&data), Some(true));
            let mut longer = data.clone();
            longer.extend_from_slice(&more);
            prop_assert_eq!(fp.matches(&longer), Some(true));
        }
    }
}
