//! The storage engine the compat suite's daemons run on: embedded RocksDB (the default), or HBase when
//! `RTSD_COMPAT_ENGINE=hbase` (issue 21: "the compat suite runs against rtsd-on-HBase as well as rtsd-on-RocksDB,
//! with the same assertions ... one parameterised harness, not a copy").
//!
//! On HBase every [`crate::Daemon`] runs in a *table set* of its own: an HBase namespace (`compat1`, `compat2`, ...)
//! holding OpenTSDB's tables and rtsd's, selected with `rtsd.storage.hbase.namespace`. A set is leased under a file
//! lock (so threads and test processes sharing one cluster never share a set), created on its first lease, and
//! emptied at every lease: each table's rows deleted, each family's TTL back to forever. So a daemon on HBase starts
//! as empty as one on a fresh RocksDB directory, without creating tables per daemon (seconds each on HBase).
//!
//! The cluster is the one `RTSD_COMPAT_HBASE_DIR` names (a directory `scripts/hbase-cluster up` started; scripts/test
//! starts one for the whole run), else one this process starts on first need and its watcher stops after the process
//! exits ([`crate::testbed::Testbed::start_cluster`]).
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::testbed::{hbase_tool_in, Testbed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    RocksDb,
    HBase,
}

/// The engine of this test process, from `RTSD_COMPAT_ENGINE` (`rocksdb`, the default, or `hbase`).
pub fn engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    *ENGINE.get_or_init(|| match std::env::var("RTSD_COMPAT_ENGINE").unwrap_or_default().as_str() {
        "" | "rocksdb" => Engine::RocksDb,
        "hbase" => Engine::HBase,
        other => panic!("RTSD_COMPAT_ENGINE={other:?}: the engines are rocksdb and hbase"),
    })
}

/// For a check about what only the RocksDB engine has (its files on disk, its data directory, a retention that
/// drops points by their timestamp): true, after saying why it is skipped, when the suite runs on HBase. The HBase
/// side of the same feature is proven by tests/rtsd_on_hbase.rs.
pub fn skip_on_hbase(why: &str) -> bool {
    if engine() == Engine::HBase {
        eprintln!("skipped on HBase: {why}");
        return true;
    }
    false
}

/// For a check that needs what only the HBase engine has (two nodes on one store): true, after saying why it is
/// skipped, when the suite runs on RocksDB.
pub fn skip_on_rocksdb(why: &str) -> bool {
    if engine() == Engine::RocksDb {
        eprintln!("skipped on RocksDB: {why}");
        return true;
    }
    false
}

/// How many table sets a cluster may hold: more than the test threads of 2 cores, each with its daemons.
const SETS: usize = 6;
/// OpenTSDB's tables and rtsd's in a set (HBaseTool `create-set`), with their families.
const SET_TABLES: &[(&str, &[&str])] = &[
    ("tsdb", &["t"]),
    ("tsdb-uid", &["id", "name"]),
    ("tsdb-tree", &["t"]),
    ("tsdb-meta", &["name"]),
    ("tsdb-agg", &["t", "a"]),
    ("tsdb-rollup-1m", &["t", "a"]),
    ("tsdb-rollup-10m", &["t", "a"]),
    ("tsdb-rollup-1h", &["t", "a"]),
    ("tsdb-rollup-agg-1m", &["t", "a"]),
    ("tsdb-rollup-agg-10m", &["t", "a"]),
    ("tsdb-rollup-agg-1h", &["t", "a"]),
    ("rtsd", &["meta", "series", "rollup_dirty", "chukwa_streams", "log"]),
    ("chukwa", &["t", "a"]),
    ("chukwa_meta", &["k", "c"]),
];
/// Rows deleted from a table (over its leases) past which it is truncated instead: see [`TableSet::empty`].
const TRUNCATE_AFTER: u64 = 3000;
/// The families of a rollup table a test's own rollup config names.
const ROLLUP_FAMILIES: &[&str] = &["t", "a"];

/// The HBase cluster the suite's daemons use.
struct Cluster {
    dir: PathBuf,
    zk_quorum: String,
    /// The cluster this process started, when `RTSD_COMPAT_HBASE_DIR` named none (kept for the process's life).
    _own: Option<Testbed>,
}

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let (dir, own) = match std::env::var_os("RTSD_COMPAT_HBASE_DIR").filter(|d| !d.is_empty()) {
            Some(d) => (PathBuf::from(d), None),
            None => {
                let tb = Testbed::start_cluster("compat-on-hbase");
                (tb.path().to_path_buf(), Some(tb))
            }
        };
        let env = std::fs::read_to_string(dir.join("cluster.env"))
            .unwrap_or_else(|e| panic!("{}/cluster.env: {e} (is the cluster up?)", dir.display()));
        let zk_quorum = env
            .lines()
            .find_map(|l| l.strip_prefix("zk_quorum="))
            .unwrap_or_else(|| panic!("no zk_quorum in {}/cluster.env", dir.display()))
            .trim()
            .to_string();
        std::fs::create_dir_all(dir.join("compat-sets")).expect("compat-sets dir");
        Cluster { dir, zk_quorum, _own: own }
    })
}

/// A namespace of tables leased to one daemon (and the daemons it is restarted as) until dropped.
pub struct TableSet {
    namespace: String,
    /// The extra rollup tables the daemon's rollup config names (created in the set when missing).
    extra: Vec<String>,
    /// Held while the set is leased; closing it releases the lock.
    _lock: File,
}

impl TableSet {
    /// Leases a free set, creating it on its first use, empties it, and makes sure it holds the tables of the
    /// rollup config in `settings` (`tsd.rollups.config` as inline JSON), if any.
    pub fn lease(settings: &[(String, String)]) -> TableSet {
        let cluster = cluster();
        let sets = cluster.dir.join("compat-sets");
        let deadline = Instant::now() + Duration::from_secs(300);
        let (namespace, lock) = loop {
            let free = (1..=SETS).find_map(|i| {
                let ns = format!("compat{i}");
                let file = File::create(sets.join(format!("{ns}.lock"))).expect("lock file");
                file.try_lock().ok().map(|()| (ns, file))
            });
            if let Some(found) = free {
                break found;
            }
            assert!(Instant::now() < deadline, "no free HBase table set in 300 s (all {SETS} leased)");
            std::thread::sleep(Duration::from_millis(100));
        };
        // The marker names the tables created, so a set made before a table was added gets it (create-set keeps
        // what exists).
        let marker = sets.join(format!("{namespace}.created"));
        let tables: String = SET_TABLES.iter().map(|(t, f)| format!("{t} {}\n", f.join(","))).collect();
        if std::fs::read_to_string(&marker).ok().as_deref() != Some(tables.as_str()) {
            hbase_tool_in(&cluster.dir, &["create-set", &namespace]);
            std::fs::write(&marker, &tables).expect("set marker");
        }
        let extra = extra_rollup_tables(settings);
        for table in &extra {
            let marker = sets.join(format!("{namespace}.{table}.created"));
            if !marker.exists() {
                hbase_tool_in(&cluster.dir, &["create", &format!("{namespace}:{table}"), &ROLLUP_FAMILIES.join(",")]);
                std::fs::write(&marker, "").expect("table marker");
            }
        }
        let set = TableSet { namespace, extra, _lock: lock };
        set.empty();
        set
    }

    /// The properties that put a daemon on this set.
    pub fn settings(&self) -> Vec<(String, String)> {
        vec![
            ("rtsd.storage.engine".into(), "hbase".into()),
            ("tsd.storage.hbase.zk_quorum".into(), cluster().zk_quorum.clone()),
            ("rtsd.storage.hbase.namespace".into(), self.namespace.clone()),
            // The suite's TSMeta checks count points received (overwrites too) on both engines; on HBase rtsd
            // keeps those counters only when asked, as OpenTSDB keeps `ts_ctr`.
            ("tsd.core.meta.enable_tsuid_incrementing".into(), "true".into()),
        ]
    }

    /// Every row of every table deleted and every family's TTL back to forever: the set as created.
    ///
    /// Deleting leaves delete markers, which HBase's scans step over until a major compaction: after a few data
    /// sets on the same keys (UIDs start at 1 again in every lease) a query over 50 points took 0.9 s instead of
    /// 5 ms. So a table whose deleted rows add up past [`TRUNCATE_AFTER`] is truncated instead (seconds, so rarely).
    fn empty(&self) {
        let mut tables: Vec<(String, Vec<&str>)> =
            SET_TABLES.iter().map(|(t, f)| (format!("{}:{t}", self.namespace), f.to_vec())).collect();
        tables.extend(self.extra.iter().map(|t| (format!("{}:{t}", self.namespace), ROLLUP_FAMILIES.to_vec())));
        let tally_file = cluster().dir.join("compat-sets").join(format!("{}.deleted", self.namespace));
        let mut deleted: BTreeMap<String, u64> = std::fs::read_to_string(&tally_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' ').and_then(|(t, n)| Some((t.to_string(), n.parse().ok()?))))
            .collect();
        let mut truncate = Vec::new();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let client = rtsd_hbase::Client::connect(&cluster().zk_quorum, "")
                .await
                .unwrap_or_else(|e| panic!("connect to the compat cluster: {e}"));
            for (table, families) in &tables {
                let rows = client
                    .scan_all(rtsd_hbase::ScanRequest { table: table.clone(), caching: 1000, ..Default::default() })
                    .await
                    .unwrap_or_else(|e| panic!("scan {table}: {e}"));
                let total = deleted.entry(table.clone()).or_default();
                *total += rows.len() as u64;
                if *total > TRUNCATE_AFTER {
                    *total = 0;
                    truncate.push(table.clone());
                } else {
                    let mut rows = rows;
                    // rtsd keeps the maxima and minima of its index in cells versioned past any time a server
                    // stamps (its HBase engine's `part_version`), which a row delete stamped by the server does
                    // not reach: each such version is deleted on its own, and the table scanned again until it
                    // is empty (a version deleted may uncover an older one in another file).
                    for _ in 0..64 {
                        if rows.is_empty() {
                            break;
                        }
                        let past = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_millis() as u64)
                            + 86_400_000;
                        let mut deletes = Vec::new();
                        for cells in &rows {
                            deletes.push(rtsd_hbase::Mutation::delete_row(table, &cells[0].row));
                            for c in cells.iter().filter(|c| c.timestamp > past) {
                                let q = [c.qualifier.as_slice()];
                                deletes.push(rtsd_hbase::Mutation::delete_version(
                                    table,
                                    &c.row,
                                    &c.family,
                                    &q,
                                    c.timestamp,
                                ));
                            }
                        }
                        for r in client.multi(deletes).await {
                            r.unwrap_or_else(|e| panic!("empty {table}: {e}"));
                        }
                        rows = client
                            .scan_all(rtsd_hbase::ScanRequest {
                                table: table.clone(),
                                caching: 1000,
                                ..Default::default()
                            })
                            .await
                            .unwrap_or_else(|e| panic!("scan {table}: {e}"));
                    }
                    assert!(rows.is_empty(), "{table} could not be emptied");
                }
                for family in families {
                    client
                        .set_family_ttl(table, family.as_bytes(), None)
                        .await
                        .unwrap_or_else(|e| panic!("reset the TTL of {table}:{family}: {e}"));
                }
            }
        });
        if !truncate.is_empty() {
            let args: Vec<&str> = std::iter::once("truncate").chain(truncate.iter().map(String::as_str)).collect();
            hbase_tool_in(&cluster().dir, &args);
        }
        let tally: String = deleted.iter().map(|(t, n)| format!("{t} {n}\n")).collect();
        std::fs::write(&tally_file, tally).expect("deleted-rows tally");
    }
}

/// The tables of an inline `tsd.rollups.config` in `settings` that a set does not have.
fn extra_rollup_tables(settings: &[(String, String)]) -> Vec<String> {
    let Some((_, config)) = settings.iter().find(|(k, _)| k == "tsd.rollups.config") else {
        return Vec::new();
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(config) else {
        return Vec::new();
    };
    let mut tables = BTreeSet::new();
    for interval in json["intervals"].as_array().into_iter().flatten() {
        for key in ["table", "preAggregationTable"] {
            if let Some(t) = interval[key].as_str() {
                if !SET_TABLES.iter().any(|(name, _)| *name == t) {
                    tables.insert(t.to_string());
                }
            }
        }
    }
    tables.into_iter().collect()
}
