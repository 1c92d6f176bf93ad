//! Regions: which region of a table holds a row key and on which server, as `hbase:meta` says, cached.
//!
//! The cache keeps, per table, the regions last seen in meta keyed by start key; regions of one table never overlap
//! in the cache: inserting a region found in meta evicts every cached region overlapping its range, which is what
//! makes the cache converge after a split (two daughters replace their parent as they are looked up) or a merge
//! (the merged region replaces both parents). A region is dropped when a server says it is not there
//! (`NotServingRegionException`, `RegionMovedException`, ...) and when its server is gone.
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use prost::Message;

use crate::error::{Error, Result};
use crate::proto;

/// The name of the only `hbase:meta` region (HBase 2 never splits meta).
pub const META_REGION: &[u8] = b"hbase:meta,,1";
pub const META_FAMILY: &[u8] = b"info";

/// One region of a table and where it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionLoc {
    pub table: String,
    /// The full region name (its meta row key), what `RegionSpecifier` names.
    pub name: Vec<u8>,
    pub start: Vec<u8>,
    /// Exclusive; empty for the table's last region.
    pub end: Vec<u8>,
    /// `host:port` of its region server.
    pub server: String,
}

impl RegionLoc {
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && (self.end.is_empty() || key < self.end.as_slice())
    }

    pub fn is_meta(&self) -> bool {
        self.name == META_REGION
    }
}

/// One table's cached regions by start key.
type Regions = BTreeMap<Vec<u8>, Arc<RegionLoc>>;

#[derive(Default)]
pub struct RegionCache {
    tables: RwLock<HashMap<String, Regions>>,
}

impl RegionCache {
    /// The cached region of `table` holding `key`, if any.
    pub fn get(&self, table: &str, key: &[u8]) -> Option<Arc<RegionLoc>> {
        let tables = self.tables.read().unwrap();
        let (_, loc) = tables.get(table)?.range(..=key.to_vec()).next_back()?;
        loc.contains(key).then(|| loc.clone())
    }

    /// Caches `loc`, evicting the cached regions its range overlaps (stale parents of a split or merge).
    pub fn insert(&self, loc: Arc<RegionLoc>) {
        let mut tables = self.tables.write().unwrap();
        let regions = tables.entry(loc.table.clone()).or_default();
        let mut stale = Vec::new();
        let upper: Option<&[u8]> = (!loc.end.is_empty()).then_some(loc.end.as_slice());
        // Cached regions are disjoint and sorted: walk down from the last one starting before loc's end until one
        // ends at or before loc's start.
        let candidates: Box<dyn DoubleEndedIterator<Item = (&Vec<u8>, &Arc<RegionLoc>)>> = match upper {
            Some(end) => Box::new(regions.range(..end.to_vec())),
            None => Box::new(regions.iter()),
        };
        for (start, r) in candidates.rev() {
            if !r.end.is_empty() && r.end.as_slice() <= loc.start.as_slice() {
                break;
            }
            stale.push(start.clone());
        }
        for s in stale {
            regions.remove(&s);
        }
        regions.insert(loc.start.clone(), loc);
    }

    /// Drops `loc` if it is still the cached region at its start key.
    pub fn invalidate(&self, loc: &RegionLoc) {
        let mut tables = self.tables.write().unwrap();
        if let Some(regions) = tables.get_mut(&loc.table) {
            if regions.get(&loc.start).is_some_and(|r| r.name == loc.name) {
                regions.remove(&loc.start);
            }
        }
    }

    /// Drops every region cached on `server` (it stopped or its connection broke).
    pub fn invalidate_server(&self, server: &str) {
        let mut tables = self.tables.write().unwrap();
        for regions in tables.values_mut() {
            regions.retain(|_, r| r.server != server);
        }
    }

    /// How many regions are cached for `table` (for tests and metrics).
    pub fn len(&self, table: &str) -> usize {
        self.tables.read().unwrap().get(table).map_or(0, |r| r.len())
    }
}

/// The meta row key a reversed scan starts from to find the region of `table` holding `key`: meta rows are
/// `<table>,<start key>,<region id>`, and the largest one at or before this key is that region's. Region ids are
/// decimal digits, so fourteen 9s sort after all of them.
pub fn meta_search_key(table: &str, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(table.len() + key.len() + 16);
    k.extend_from_slice(table.as_bytes());
    k.push(b',');
    k.extend_from_slice(key);
    k.extend_from_slice(b",99999999999999");
    k
}

/// The table name as meta's `RegionInfo` spells it: `default` namespace tables without a prefix.
fn table_string(t: &proto::TableName) -> String {
    let q = String::from_utf8_lossy(&t.qualifier);
    if t.namespace == b"default" {
        q.into_owned()
    } else {
        format!("{}:{}", String::from_utf8_lossy(&t.namespace), q)
    }
}

/// Reads a meta row (its `info` cells) as the region of `table` holding `key`. Errors: the table does not exist
/// (the row is another table's, or none), or the region is not usable right now (offline split parent, no server,
/// a hole while a split or merge rewrites meta) — the latter retriable.
pub fn parse_meta_row(table: &str, key: &[u8], cells: &[proto::Cell]) -> Result<RegionLoc> {
    let mut info = None;
    let mut server = None;
    let mut row = None;
    for c in cells {
        if c.family.as_deref() != Some(META_FAMILY) {
            continue;
        }
        row = c.row.clone();
        match c.qualifier.as_deref() {
            Some(b"regioninfo") => {
                let v = c.value.as_deref().unwrap_or_default();
                let pb = v.strip_prefix(b"PBUF").ok_or_else(|| Error::Protocol("regioninfo without PBUF".into()))?;
                info = Some(proto::RegionInfo::decode(pb).map_err(|e| Error::Protocol(format!("regioninfo: {e}")))?);
            }
            Some(b"server") => server = c.value.as_deref().map(|v| String::from_utf8_lossy(v).into_owned()),
            _ => {}
        }
    }
    let (Some(info), Some(row)) = (info, row) else {
        return Err(Error::TableNotFound(table.to_string()));
    };
    if table_string(&info.table_name) != table {
        return Err(Error::TableNotFound(table.to_string()));
    }
    let what = || format!("{table} row {key:02x?}");
    let loc = RegionLoc {
        table: table.to_string(),
        name: row,
        start: info.start_key.unwrap_or_default(),
        end: info.end_key.unwrap_or_default(),
        server: server.unwrap_or_default(),
    };
    if info.offline.unwrap_or(false) || info.split.unwrap_or(false) || loc.server.is_empty() || !loc.contains(key) {
        return Err(Error::RegionNotOnline(what()));
    }
    Ok(loc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(start: &str, end: &str, server: &str) -> Arc<RegionLoc> {
        Arc::new(RegionLoc {
            table: "t".into(),
            name: format!("t,{start},1").into_bytes(),
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            server: server.into(),
        })
    }

    #[test]
    fn lookup_respects_end_keys() {
        let c = RegionCache::default();
        c.insert(loc("", "b", "s1"));
        c.insert(loc("c", "", "s2"));
        assert_eq!(c.get("t", b"a").unwrap().server, "s1");
        assert!(c.get("t", b"b").is_none(), "hole between b and c");
        assert_eq!(c.get("t", b"zz").unwrap().server, "s2");
        assert!(c.get("u", b"a").is_none());
    }

    #[test]
    fn split_daughters_and_merges_evict_overlaps() {
        let c = RegionCache::default();
        c.insert(loc("", "m", "s1"));
        c.insert(loc("m", "", "s2"));
        // Split of [m, ∞) at q: the daughter [m, q) evicts the parent.
        c.insert(loc("m", "q", "s3"));
        assert_eq!(c.len("t"), 2);
        assert!(c.get("t", b"r").is_none());
        c.insert(loc("q", "", "s3"));
        assert_eq!(c.get("t", b"r").unwrap().server, "s3");
        // Merge of everything: one region replaces three.
        c.insert(loc("", "", "s1"));
        assert_eq!(c.len("t"), 1);
        assert_eq!(c.get("t", b"r").unwrap().server, "s1");
    }

    #[test]
    fn invalidation_by_region_and_by_server() {
        let c = RegionCache::default();
        let a = loc("", "m", "s1");
        c.insert(a.clone());
        c.insert(loc("m", "", "s2"));
        let mut other = (*a).clone();
        other.name = b"t,,2".to_vec();
        c.invalidate(&other);
        assert!(c.get("t", b"a").is_some());
        c.invalidate(&a);
        assert!(c.get("t", b"a").is_none());
        c.invalidate_server("s2");
        assert_eq!(c.len("t"), 0);
    }
}
