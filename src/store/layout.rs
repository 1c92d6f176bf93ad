//! The bytes of OpenTSDB's keys as a data directory lays them out (spec: ingest §4.2, §4.10): UID widths and
//! salt, and how a TSUID (the metric UID followed by (tag key, tag value) UID pairs) splits. The one place that
//! knows it; every reader of TSUIDs and row keys asks here.
use std::fmt;

use rtsd_protocol::codec::{self, SaltConfig};

/// A time series' identity as OpenTSDB names it: the metric UID followed by the (tag key, tag value) UID pairs,
/// in the order the row key holds them (spec: ingest §4.2). Owned where a series is handed around (a query's
/// series, a TSMeta, a lookup result); borrowed as `&[u8]` (it derefs to its bytes) where a row key is built, an
/// index key written or a TSUID compared, so that the hot paths copy nothing. Shown as OpenTSDB shows it: upper-
/// case hex.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tsuid(Vec<u8>);

impl Tsuid {
    /// A TSUID as OpenTSDB's APIs take it (hex, either case). The error is the codec's text.
    pub fn parse(hex: &str) -> Result<Tsuid, String> {
        codec::string_to_uid(hex, None).map(Tsuid).map_err(|e| e.to_string())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl From<Vec<u8>> for Tsuid {
    fn from(bytes: Vec<u8>) -> Tsuid {
        Tsuid(bytes)
    }
}

impl From<&[u8]> for Tsuid {
    fn from(bytes: &[u8]) -> Tsuid {
        Tsuid(bytes.to_vec())
    }
}

impl std::ops::Deref for Tsuid {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Tsuid {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// So that a map keyed by TSUIDs is looked up with borrowed bytes.
impl std::borrow::Borrow<[u8]> for Tsuid {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

/// A TSUID equals its bytes (what tests and fixtures spell out).
impl PartialEq<[u8]> for Tsuid {
    fn eq(&self, other: &[u8]) -> bool {
        self.0 == other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for Tsuid {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.0 == other
    }
}

impl PartialEq<Vec<u8>> for Tsuid {
    fn eq(&self, other: &Vec<u8>) -> bool {
        &self.0 == other
    }
}

impl fmt::Display for Tsuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&codec::uid_to_string(&self.0))
    }
}

impl fmt::Debug for Tsuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tsuid({self})")
    }
}

/// The layout facts that must not change once data is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub uid_widths: [usize; 3],
    pub salt: SaltConfig,
}

impl Layout {
    pub(super) fn describe(&self) -> String {
        format!(
            "uid.width.metric={} uid.width.tagk={} uid.width.tagv={} salt.width={} salt.buckets={}",
            self.uid_widths[0], self.uid_widths[1], self.uid_widths[2], self.salt.width, self.salt.buckets
        )
    }

    /// Bytes of a row key before the tags: salt, metric UID, base time.
    pub fn tags_offset(&self) -> usize {
        self.salt.width + self.uid_widths[0] + 4
    }

    /// Bytes of one (tag key, tag value) UID pair.
    pub fn pair_width(&self) -> usize {
        self.uid_widths[1] + self.uid_widths[2]
    }

    /// Whether `tsuid` is a metric UID followed by whole tag pairs.
    pub fn is_tsuid(&self, tsuid: &[u8]) -> bool {
        tsuid.len() >= self.uid_widths[0] && (tsuid.len() - self.uid_widths[0]).is_multiple_of(self.pair_width())
    }

    /// The metric UID of a TSUID (all of it, when shorter).
    pub fn tsuid_metric<'t>(&self, tsuid: &'t [u8]) -> &'t [u8] {
        &tsuid[..self.uid_widths[0].min(tsuid.len())]
    }

    /// The (tag key, tag value) UID pairs of a TSUID; a trailing partial pair is left out.
    pub fn tsuid_pairs<'t>(&self, tsuid: &'t [u8]) -> impl Iterator<Item = (&'t [u8], &'t [u8])> + 't {
        self.pairs(tsuid.get(self.uid_widths[0]..).unwrap_or_default())
    }

    /// The row key of a series' row holding `timestamp` (seconds; the row's base hour is taken from it): salt,
    /// metric UID, base time, tag pairs.
    pub fn row_key(&self, tsuid: &[u8], timestamp: i64) -> Vec<u8> {
        codec::row_key_from_tsuid(tsuid, timestamp, &self.salt, self.uid_widths[0])
    }

    /// Where a row key holds its metric UID: after the salt.
    pub fn metric_at(&self) -> std::ops::Range<usize> {
        self.salt.width..self.salt.width + self.uid_widths[0]
    }

    /// The metric UID of a row key (`None` for a key too short to hold one).
    pub fn metric_of<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        key.get(self.metric_at())
    }

    /// The TSUID of a row key: the key without salt and base time.
    pub fn tsuid_of_row(&self, key: &[u8]) -> Tsuid {
        Tsuid(codec::tsuid_from_row_key(key, self.salt.width, self.uid_widths[0]))
    }

    /// Splits consecutive (tag key, tag value) UID pairs (a TSUID's or a row key's tags).
    pub fn pairs<'t>(&self, tags: &'t [u8]) -> impl Iterator<Item = (&'t [u8], &'t [u8])> + 't {
        let kw = self.uid_widths[1];
        tags.chunks_exact(self.pair_width()).map(move |c| c.split_at(kw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsuid_reads_and_shows_as_opentsdb_hex_and_is_looked_up_by_its_bytes() {
        // spec: query §6.8: TSUIDs are upper-case hex in every answer, either case in a request.
        let t = Tsuid::parse("00000a000001000000ff").unwrap();
        assert_eq!(t, [0, 0, 10, 0, 0, 1, 0, 0, 0, 255]);
        assert_eq!(t.to_string(), "00000A000001000000FF");
        assert_eq!(format!("{t:?}"), "Tsuid(00000A000001000000FF)");
        assert_eq!(Tsuid::parse("00000A000001000000FF").unwrap(), t);
        assert_eq!(Tsuid::parse("").unwrap_err(), "UID was empty");
        assert!(Tsuid::parse("00000G").is_err());
        let mut seen = std::collections::HashMap::new();
        seen.insert(t.clone(), 1);
        assert_eq!(seen.get(&[0u8, 0, 10, 0, 0, 1, 0, 0, 0, 255][..]), Some(&1), "found by borrowed bytes");
        let (one, two) = (Tsuid::from(vec![0, 0, 1]), Tsuid::from(&[0u8, 0, 2][..]));
        assert!(one < two, "ordered as its bytes (row order)");
    }

    #[test]
    fn tsuids_split_into_the_metric_and_tag_pairs_by_the_uid_widths() {
        let layout = Layout { uid_widths: [3, 2, 4], salt: SaltConfig::NONE };
        let tsuid = [0, 0, 1, 0, 7, 0, 0, 0, 9, 0, 8, 0, 0, 0, 10];
        assert!(layout.is_tsuid(&tsuid));
        assert_eq!(layout.tsuid_metric(&tsuid), [0, 0, 1]);
        let pairs: Vec<(&[u8], &[u8])> = layout.tsuid_pairs(&tsuid).collect();
        assert_eq!(pairs, [(&[0, 7][..], &[0, 0, 0, 9][..]), (&[0, 8][..], &[0, 0, 0, 10][..])]);
        assert!(!layout.is_tsuid(&tsuid[..14]));
        assert!(!layout.is_tsuid(&[0, 1]));
        assert_eq!(layout.tsuid_pairs(&tsuid[..14]).count(), 1, "a partial pair is left out");
        // spec: ingest §4.2: salt, metric, base hour, tags; and back.
        let salted = Layout { uid_widths: [3, 2, 4], salt: SaltConfig { width: 1, buckets: 20 } };
        let key = salted.row_key(&tsuid, 1356998461);
        assert_eq!(key.len(), 1 + 15 + 4);
        assert_eq!(&key[1..4], &tsuid[..3]);
        assert_eq!(&key[4..8], &1356998400u32.to_be_bytes());
        assert_eq!(&key[8..], &tsuid[3..]);
        assert_eq!(salted.tsuid_of_row(&key), tsuid);
    }
}
