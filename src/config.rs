//! Configuration: OpenTSDB-style properties (`tsd.*`, rtsd's own `rtsd.*`) plus command-line flags, resolved into
//! one [`Config`] value at start-up (spec: ingest §6).
//!
//! Properties come from, in increasing priority: OpenTSDB 2.4's defaults, then either the file named by `--config`
//! or, without one, the default configuration shipped inside the binary (`rtsd.conf` at the repository root), then
//! flags. Every effective property is kept, so `/api/config` can show them all.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rtsd_protocol::codec::SaltConfig;
use rtsd_protocol::point::Rules;

use crate::store::{Layout, StoreOptions};

/// The configuration rtsd ships: what `rtsd serve` uses when no `--config` is given.
pub const SHIPPED_CONFIG: &str = include_str!("../rtsd.conf");

/// OpenTSDB 2.4's defaults for the properties rtsd reads, plus rtsd's own (spec: ingest §6). Listed once here so
/// `/api/config` shows them and the README table can be checked against them.
const DEFAULTS: &[(&str, &str)] = &[
    ("hbase.client.operation.timeout", "60000"),
    ("hbase.rpc.timeout", "20000"),
    ("hbase.region_client.inflight_limit", "64"),
    ("tsd.core.auto_create_metrics", "false"),
    ("tsd.core.auto_create_tagks", "true"),
    ("tsd.core.auto_create_tagvs", "true"),
    ("tsd.core.connections.limit", "0"),
    ("tsd.core.enable_api", "true"),
    ("tsd.core.enable_ui", "true"),
    ("tsd.core.meta.enable_tsuid_incrementing", "false"),
    ("tsd.core.socket.timeout", "0"),
    ("tsd.core.stats_with_port", "false"),
    ("tsd.core.tag.allow_specialchars", ""),
    ("tsd.http.query.allow_delete", "false"),
    ("tsd.http.request.cors_domains", ""),
    (
        "tsd.http.request.cors_headers",
        "Authorization, Content-Type, Accept, Origin, User-Agent, DNT, Cache-Control, X-Mx-ReqToken, Keep-Alive, X-Requested-With, If-Modified-Since",
    ),
    ("tsd.http.request.max_chunk", "4096"),
    ("tsd.http.show_stack_trace", "true"),
    ("tsd.mode", "rw"),
    ("tsd.network.bind", "0.0.0.0"),
    ("tsd.network.port", "4242"),
    // OpenTSDB enables `diediedie` by default; a daemon that any client can stop with one word is a hazard, so
    // rtsd ships it off and honours the property both ways.
    ("tsd.no_diediedie", "true"),
    ("tsd.rpc.telnet.return_errors", "true"),
    ("tsd.query.limits.bytes.allow_override", "false"),
    ("tsd.query.limits.bytes.default", "0"),
    ("tsd.query.limits.data_points.allow_override", "false"),
    ("tsd.query.limits.data_points.default", "0"),
    ("tsd.query.timeout", "0"),
    ("tsd.stats.canonical", "false"),
    ("tsd.storage.fix_duplicates", "false"),
    ("tsd.storage.enable_appends", "false"),
    ("tsd.storage.enable_compaction", "true"),
    ("tsd.storage.hbase.data_table", "tsdb"),
    ("tsd.storage.hbase.meta_table", "tsdb-meta"),
    ("tsd.storage.hbase.tree_table", "tsdb-tree"),
    ("tsd.storage.hbase.uid_table", "tsdb-uid"),
    ("tsd.storage.hbase.zk_basedir", "/hbase"),
    ("tsd.storage.hbase.zk_quorum", "localhost"),
    ("tsd.storage.max_tags", "8"),
    ("tsd.storage.salt.buckets", "20"),
    ("tsd.storage.salt.width", "0"),
    ("tsd.storage.uid.width.metric", "3"),
    ("tsd.storage.uid.width.tagk", "3"),
    ("tsd.storage.uid.width.tagv", "3"),
    ("tsd.uid.lru.enable", "false"),
    ("tsd.uid.lru.id.size", "5000000"),
    ("tsd.uid.lru.name.size", "5000000"),
    ("rtsd.block_cache_mb", "256"),
    ("rtsd.data_dir", "./rtsd-data"),
    ("rtsd.memtable_mb", "32"),
    ("rtsd.storage.engine", "rocksdb"),
    ("rtsd.storage.hbase.flush_ms", "5000"),
    ("rtsd.storage.hbase.log_lease_ms", "30000"),
    ("rtsd.storage.hbase.namespace", ""),
    ("rtsd.storage.hbase.rtsd_table", "rtsd"),
    ("rtsd.storage.min_free_mb", "128"),
    ("rtsd.rocksdb.max_open_files", "0"),
    ("rtsd.http.max_body_bytes", "67108864"),
    ("rtsd.http.max_buffered_bytes", "268435456"),
    ("rtsd.http.idle_timeout_secs", "120"),
    ("rtsd.http.request_timeout_secs", "60"),
    ("rtsd.telnet.idle_timeout_secs", "600"),
    ("rtsd.network.first_byte_timeout_secs", "30"),
    ("rtsd.uid.cache_capacity", "1000000"),
];

/// Why the configuration can't be used; the daemon prints it and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid value for {key}: {value:?}: {why}")]
    Invalid { key: String, value: String, why: String },
}

impl From<crate::store::retention::InvalidSetting> for ConfigError {
    fn from(e: crate::store::retention::InvalidSetting) -> Self {
        ConfigError::Invalid { key: e.key, value: e.value, why: e.why }
    }
}

/// `tsd.mode`: which half of the API this daemon serves (spec: ingest §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    ReadWrite,
    ReadOnly,
    WriteOnly,
}

impl Mode {
    /// Whether put and the other write endpoints exist (`rw`, `wo`).
    pub fn writes(self) -> bool {
        self != Mode::ReadOnly
    }

    /// Whether query, search and suggest exist (`rw`, `ro`).
    pub fn reads(self) -> bool {
        self != Mode::WriteOnly
    }
}

/// The effective configuration of one daemon.
#[derive(Debug, Clone)]
pub struct Config {
    /// Every effective property, defaults included (what `/api/config` shows).
    pub properties: BTreeMap<String, String>,
    pub bind: IpAddr,
    pub port: u16,
    pub data_dir: PathBuf,
    pub mode: Mode,
    pub diediedie: bool,
    pub auto_create: [bool; 3],
    pub rules: Rules,
    pub uid_widths: [usize; 3],
    pub salt: SaltConfig,
    pub fix_duplicates: bool,
    /// `tsd.core.meta.enable_tsuid_incrementing`: on HBase, whether the series' point counters are kept (see
    /// [`StoreOptions::count_received`]).
    pub tsuid_incrementing: bool,
    pub connections_limit: usize,
    /// Idle limits (see `server::conn`): before a connection's first byte, between telnet lines, between HTTP
    /// requests. `tsd.core.socket.timeout`, when set, replaces all three.
    pub first_byte_timeout: std::time::Duration,
    pub telnet_idle_timeout: std::time::Duration,
    pub http_idle_timeout: std::time::Duration,
    /// `rtsd.http.request_timeout_secs`: the longest a request's headers, and then its body, may take to arrive.
    pub http_request_timeout: std::time::Duration,
    /// `rtsd.http.max_buffered_bytes`: request-body bytes all connections together may hold while they arrive.
    pub max_buffered_bytes: usize,
    pub return_errors: bool,
    pub enable_api: bool,
    /// `tsd.core.enable_ui`: the web UI (`/`, `/s/...`, `/favicon.ico`) and `/q`.
    pub enable_ui: bool,
    pub stats_canonical: bool,
    pub stats_with_port: bool,
    pub uid_cache_capacity: usize,
    /// `rtsd.block_cache_mb`: RocksDB's cache of uncompressed blocks, shared by the data and rollup tables.
    pub block_cache_bytes: usize,
    /// `rtsd.memtable_mb`: RocksDB's write buffers of every table together.
    pub memtable_bytes: usize,
    pub max_body_bytes: usize,
    /// `rtsd.storage.min_free_mb`: below this much free space on the data directory's disk, writes are refused
    /// (transiently) before RocksDB meets a full disk.
    pub min_free_bytes: u64,
    /// `rtsd.rocksdb.max_open_files`: table files RocksDB keeps open; 0 = half the process's file-descriptor
    /// limit, decided at start (see `crate::fds`).
    pub max_open_files: i32,
    /// `tsd.http.request.cors_domains`, lower-cased; empty = CORS off, `*` = any origin.
    pub cors_domains: Vec<String>,
    /// `tsd.http.request.cors_headers`, sent as `Access-Control-Allow-Headers`.
    pub cors_headers: String,
    /// What one query may read before it is stopped (spec: query §1.4, §9 items 1-2).
    pub query_limits: QueryLimits,
    /// `tsd.http.query.allow_delete`: `DELETE /api/query` deletes what the query matched (spec: query §1.7).
    pub allow_delete: bool,
    /// `rtsd.chukwa.*`: the Chukwa collector port.
    pub chukwa: crate::chukwa::ChukwaConfig,
    /// `tsd.rollups.*`, `rtsd.rollups.*`.
    pub rollups: crate::rollup::RollupSettings,
    /// `rtsd.retention.*`.
    pub retention: crate::store::retention::RetentionSettings,
    /// `rtsd.storage.engine` and, for HBase, `tsd.storage.hbase.*`.
    pub engine: crate::store::EngineChoice,
}

/// `tsd.query.timeout` (ms) and `tsd.query.limits.*`; 0 means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryLimits {
    pub timeout_ms: u64,
    pub max_data_points: u64,
    pub max_bytes: u64,
    /// Whether a query's `overrideDataPointLimit` / `overrideByteLimit` may lift the limits.
    pub allow_override_data_points: bool,
    pub allow_override_bytes: bool,
}

/// Overrides from the command line; `None` leaves the property as the file says.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub port: Option<u16>,
    pub bind: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// Extra `key=value` properties (`--set`), applied last.
    pub set: Vec<(String, String)>,
    /// `--chukwa-port`: `rtsd.chukwa.port`.
    pub chukwa_port: Option<u16>,
}

impl Config {
    /// Resolves defaults, the config file (or the shipped one) and flags.
    pub fn load(flags: &Flags) -> Result<Config, ConfigError> {
        let mut properties: BTreeMap<String, String> = DEFAULTS
            .iter()
            .chain(crate::chukwa::config::DEFAULTS)
            .chain(crate::rollup::DEFAULTS)
            .chain(crate::store::retention::DEFAULTS)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let text = match &flags.config {
            Some(path) => {
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.clone(), source })?
            }
            None => SHIPPED_CONFIG.to_string(),
        };
        let from_file = parse_properties(&text);
        // A Chukwa port asked for (rather than the default) must be bound, or the daemon doesn't start.
        let chukwa_port_required = flags.chukwa_port.is_some()
            || from_file.iter().chain(&flags.set).any(|(k, _)| k == crate::chukwa::config::PORT_PROPERTY);
        properties.extend(from_file);
        if let Some(port) = flags.chukwa_port {
            properties.insert(crate::chukwa::config::PORT_PROPERTY.into(), port.to_string());
        }
        if let Some(port) = flags.port {
            properties.insert("tsd.network.port".into(), port.to_string());
        }
        if let Some(bind) = &flags.bind {
            properties.insert("tsd.network.bind".into(), bind.clone());
        }
        if let Some(dir) = &flags.data_dir {
            properties.insert("rtsd.data_dir".into(), dir.display().to_string());
        }
        for (k, v) in &flags.set {
            properties.insert(k.clone(), v.clone());
        }
        let mut config = Config::from_properties(properties)?;
        config.chukwa.port_required = chukwa_port_required;
        Ok(config)
    }

    /// Validates and types a full property map.
    pub fn from_properties(properties: BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let p = Props(&properties);
        let max_tags = p.number::<usize>("tsd.storage.max_tags")?;
        if max_tags < 1 {
            return Err(p.invalid("tsd.storage.max_tags", "tsd.storage.max_tags must be greater than 0"));
        }
        let width = |key: &str| -> Result<usize, ConfigError> {
            let w = p.number::<usize>(key)?;
            if !(1..=8).contains(&w) {
                return Err(p.invalid(key, "UID widths must be between 1 and 8 bytes"));
            }
            Ok(w)
        };
        let salt_width = p.number::<usize>("tsd.storage.salt.width")?;
        if salt_width > 8 {
            return Err(p.invalid("tsd.storage.salt.width", "salt width must be between 0 and 8"));
        }
        let salt_buckets = p.number::<u32>("tsd.storage.salt.buckets")?;
        if salt_buckets < 1 {
            return Err(p.invalid("tsd.storage.salt.buckets", "salt buckets must be at least 1"));
        }
        let mode = match p.get("tsd.mode").to_ascii_lowercase().as_str() {
            "ro" => Mode::ReadOnly,
            "wo" => Mode::WriteOnly,
            _ => Mode::ReadWrite,
        };
        // OpenTSDB sizes its name and id caches separately; rtsd keeps one bounded cache per direction and kind,
        // sized by the LRU properties when they are enabled.
        let uid_cache_capacity = if p.boolean("tsd.uid.lru.enable") {
            p.number::<usize>("tsd.uid.lru.name.size")?.max(1)
        } else {
            p.number::<usize>("rtsd.uid.cache_capacity")?.max(1)
        };
        let bind_text = p.get("tsd.network.bind");
        let bind = bind_text.parse::<IpAddr>().map_err(|e| p.invalid("tsd.network.bind", &e.to_string()))?;
        Ok(Config {
            bind,
            port: p.number("tsd.network.port")?,
            data_dir: PathBuf::from(p.get("rtsd.data_dir")),
            mode,
            diediedie: !p.boolean("tsd.no_diediedie"),
            auto_create: [
                p.boolean("tsd.core.auto_create_metrics"),
                p.boolean("tsd.core.auto_create_tagks"),
                p.boolean("tsd.core.auto_create_tagvs"),
            ],
            rules: Rules { max_tags, allow_specialchars: p.get("tsd.core.tag.allow_specialchars").chars().collect() },
            uid_widths: [
                width("tsd.storage.uid.width.metric")?,
                width("tsd.storage.uid.width.tagk")?,
                width("tsd.storage.uid.width.tagv")?,
            ],
            salt: SaltConfig { width: salt_width, buckets: salt_buckets },
            fix_duplicates: p.boolean("tsd.storage.fix_duplicates"),
            tsuid_incrementing: p.boolean("tsd.core.meta.enable_tsuid_incrementing"),
            connections_limit: p.number("tsd.core.connections.limit")?,
            first_byte_timeout: p.idle_secs("rtsd.network.first_byte_timeout_secs")?,
            telnet_idle_timeout: p.idle_secs("rtsd.telnet.idle_timeout_secs")?,
            http_idle_timeout: p.idle_secs("rtsd.http.idle_timeout_secs")?,
            http_request_timeout: std::time::Duration::from_secs(p.number("rtsd.http.request_timeout_secs")?),
            max_buffered_bytes: p.number("rtsd.http.max_buffered_bytes")?,
            return_errors: p.boolean("tsd.rpc.telnet.return_errors"),
            // Compared literally in OpenTSDB: `TRUE` or `1` disable the API (spec: ingest §6).
            enable_api: p.get("tsd.core.enable_api") == "true",
            enable_ui: p.get("tsd.core.enable_ui") == "true",
            stats_canonical: p.boolean("tsd.stats.canonical"),
            stats_with_port: p.boolean("tsd.core.stats_with_port"),
            uid_cache_capacity,
            block_cache_bytes: p.number::<usize>("rtsd.block_cache_mb")?.saturating_mul(1 << 20),
            memtable_bytes: p.number::<usize>("rtsd.memtable_mb")?.saturating_mul(1 << 20),
            max_body_bytes: p.number("rtsd.http.max_body_bytes")?,
            min_free_bytes: p.number::<u64>("rtsd.storage.min_free_mb")?.saturating_mul(1 << 20),
            max_open_files: p.number("rtsd.rocksdb.max_open_files")?,
            cors_domains: p
                .get("tsd.http.request.cors_domains")
                .split(',')
                .map(|d| d.trim().to_ascii_lowercase())
                .filter(|d| !d.is_empty())
                .collect(),
            cors_headers: p.get("tsd.http.request.cors_headers").to_string(),
            query_limits: QueryLimits {
                timeout_ms: p.number("tsd.query.timeout")?,
                max_data_points: p.number("tsd.query.limits.data_points.default")?,
                max_bytes: p.number("tsd.query.limits.bytes.default")?,
                allow_override_data_points: p.boolean("tsd.query.limits.data_points.allow_override"),
                allow_override_bytes: p.boolean("tsd.query.limits.bytes.allow_override"),
            },
            allow_delete: p.boolean("tsd.http.query.allow_delete"),
            chukwa: crate::chukwa::ChukwaConfig::from_properties(&properties, bind)?,
            rollups: crate::rollup::RollupSettings::from_properties(&properties)?,
            retention: crate::store::retention::RetentionSettings::from_properties(&properties)?,
            engine: engine_choice(&p)?,
            properties,
        })
    }

    /// What the store is opened with.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            path: self.data_dir.clone(),
            layout: Layout { uid_widths: self.uid_widths, salt: self.salt },
            auto_create: self.auto_create,
            fix_duplicates: self.fix_duplicates,
            // Cheap merges on the node's own RocksDB, so always kept there; on HBase an Increment per active
            // series every 30 s on one region server, so only when asked for, as OpenTSDB keeps `ts_ctr`.
            count_received: matches!(self.engine, crate::store::EngineChoice::RocksDb) || self.tsuid_incrementing,
            cache_capacity: self.uid_cache_capacity,
            block_cache_bytes: self.block_cache_bytes,
            memtable_bytes: self.memtable_bytes,
            rollups: self.rollups.clone(),
            retention: self.retention.clone(),
            min_free_bytes: self.min_free_bytes,
            // 0: the daemon decides at start (`crate::fds`); tools opening a directory keep RocksDB's unbounded.
            max_open_files: if self.max_open_files > 0 { self.max_open_files } else { -1 },
            engine: self.engine.clone(),
        }
    }

    /// A configuration for tests: the shipped defaults with a data directory and any overrides.
    pub fn for_data_dir(dir: &Path, overrides: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut flags = Flags { data_dir: Some(dir.to_path_buf()), ..Flags::default() };
        flags.set = overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load(&flags)
    }
}

/// `rtsd.storage.engine`: `rocksdb` (embedded, the default) or `hbase` (OpenTSDB's tables on the cluster that
/// `tsd.storage.hbase.zk_quorum` names, under OpenTSDB's own property names, so an `opentsdb.conf` works as is).
fn engine_choice(p: &Props<'_>) -> Result<crate::store::EngineChoice, ConfigError> {
    use crate::store::engine::hbase::{HBaseOptions, HBaseTables};
    match p.get("rtsd.storage.engine").trim().to_ascii_lowercase().as_str() {
        "rocksdb" => Ok(crate::store::EngineChoice::RocksDb),
        "hbase" => {
            let name = |key: &str| -> Result<String, ConfigError> {
                let v = p.get(key).trim();
                if v.is_empty() {
                    return Err(p.invalid(key, "a table name cannot be empty"));
                }
                Ok(v.to_string())
            };
            let zk_quorum = p.get("tsd.storage.hbase.zk_quorum").trim().to_string();
            if zk_quorum.is_empty() {
                return Err(p.invalid("tsd.storage.hbase.zk_quorum", "the HBase engine needs a ZooKeeper quorum"));
            }
            // HBase's own client properties, which asynchbase also reads from the TSD's opentsdb.conf: how long one
            // storage call (retries included) may take before the request fails (503 for a put, 424 for a query),
            // and one RPC's limit within it (asynchbase's 0: none of its own, the call's deadline bounds it).
            let millis = |key: &str| -> Result<std::time::Duration, ConfigError> {
                Ok(std::time::Duration::from_millis(p.number::<u64>(key)?))
            };
            let operation_timeout = millis("hbase.client.operation.timeout")?;
            if operation_timeout.is_zero() {
                return Err(p.invalid("hbase.client.operation.timeout", "a storage call needs a deadline (ms > 0)"));
            }
            let rpc_timeout = match millis("hbase.rpc.timeout")? {
                t if t.is_zero() => operation_timeout,
                t => t.min(operation_timeout),
            };
            Ok(crate::store::EngineChoice::HBase(Box::new(HBaseOptions {
                zk_quorum,
                zk_basedir: p.get("tsd.storage.hbase.zk_basedir").trim().to_string(),
                tables: HBaseTables {
                    data: name("tsd.storage.hbase.data_table")?,
                    uid: name("tsd.storage.hbase.uid_table")?,
                    meta: name("tsd.storage.hbase.meta_table")?,
                    rtsd: name("rtsd.storage.hbase.rtsd_table")?,
                    namespace: {
                        let ns = p.get("rtsd.storage.hbase.namespace");
                        // HBase's rule for a namespace name (TableName.isLegalNamespaceName).
                        if !ns.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                            return Err(p.invalid("rtsd.storage.hbase.namespace", "letters, digits and _ only"));
                        }
                        ns.to_string()
                    },
                },
                appends: p.boolean("tsd.storage.enable_appends"),
                operation_timeout,
                rpc_timeout,
                // asynchbase's 0: no limit.
                calls_per_server: match p.number::<usize>("hbase.region_client.inflight_limit")? {
                    0 => usize::MAX,
                    n => n,
                },
                log: crate::store::shared_log::LogOptions {
                    flush_interval: millis("rtsd.storage.hbase.flush_ms")?,
                    lease: match millis("rtsd.storage.hbase.log_lease_ms")? {
                        t if t < std::time::Duration::from_secs(1) => {
                            return Err(p.invalid("rtsd.storage.hbase.log_lease_ms", "at least 1000 ms"))
                        }
                        t => t,
                    },
                },
            })))
        }
        _ => Err(p.invalid("rtsd.storage.engine", "the storage engine is rocksdb or hbase")),
    }
}

/// Typed reads of the property map, with errors naming the property.
struct Props<'a>(&'a BTreeMap<String, String>);

impl Props<'_> {
    fn get(&self, key: &str) -> &str {
        self.0.get(key).map(|v| v.trim()).unwrap_or("")
    }

    /// OpenTSDB's boolean rule: true iff the trimmed, upper-cased value is `1`, `TRUE` or `YES`.
    fn boolean(&self, key: &str) -> bool {
        matches!(self.get(key).to_ascii_uppercase().as_str(), "1" | "TRUE" | "YES")
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        self.get(key).parse::<T>().map_err(|e| self.invalid(key, &e.to_string()))
    }

    /// An idle limit in seconds; `tsd.core.socket.timeout` (OpenTSDB's one idle limit) replaces it when set.
    fn idle_secs(&self, key: &str) -> Result<std::time::Duration, ConfigError> {
        let socket: u64 = self.number("tsd.core.socket.timeout")?;
        let secs = if socket > 0 { socket } else { self.number(key)? };
        Ok(std::time::Duration::from_secs(secs))
    }

    fn invalid(&self, key: &str, why: &str) -> ConfigError {
        ConfigError::Invalid { key: key.to_string(), value: self.get(key).to_string(), why: why.to_string() }
    }
}

/// Parses Java `.properties` text as OpenTSDB's config files use it: `key = value` or `key: value` or `key value`,
/// `#` and `!` comments, backslash line continuations. Later keys override earlier ones.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
        if trailing % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let sep = entry.find(|c: char| c == '=' || c == ':' || c.is_whitespace()).unwrap_or(entry.len());
        let key = entry[..sep].trim().to_string();
        let mut value = entry[sep..].trim_start();
        if let Some(rest) = value.strip_prefix(['=', ':']) {
            value = rest.trim_start();
        }
        if !key.is_empty() {
            out.push((key, value.trim_end().to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_syntax() {
        let text =
            "# comment\n! also\n tsd.network.port = 4243\nkey:value\nspaced value here\ncont = a\\\n  b\nempty=\n";
        let parsed = parse_properties(text);
        assert_eq!(
            parsed,
            vec![
                ("tsd.network.port".to_string(), "4243".to_string()),
                ("key".to_string(), "value".to_string()),
                ("spaced".to_string(), "value here".to_string()),
                ("cont".to_string(), "ab".to_string()),
                ("empty".to_string(), "".to_string()),
            ]
        );
    }

    #[test]
    fn shipped_config_enables_auto_create_metrics_and_opentsdb_default_does_not() {
        // spec: ingest §6: OpenTSDB's default is false; rtsd's shipped file turns it on.
        let dir = Path::new("/nonexistent");
        let shipped = Config::for_data_dir(dir, &[]).unwrap();
        assert!(shipped.auto_create[0]);
        let opentsdb = Config::for_data_dir(dir, &[("tsd.core.auto_create_metrics", "false")]).unwrap();
        assert!(!opentsdb.auto_create[0]);
        assert_eq!(shipped.port, 4242);
        assert_eq!(shipped.rules.max_tags, 8);
        assert_eq!(shipped.uid_widths, [3, 3, 3]);
    }

    #[test]
    fn hbase_timeouts_take_hbase_and_asynchbase_property_names() {
        let dir = Path::new("/nonexistent");
        let timeouts = |set: &[(&str, &str)]| {
            let mut all = vec![("rtsd.storage.engine", "hbase")];
            all.extend_from_slice(set);
            match Config::for_data_dir(dir, &all).map(|c| c.engine) {
                Ok(crate::store::EngineChoice::HBase(o)) => {
                    Ok((o.operation_timeout, o.rpc_timeout, o.calls_per_server))
                }
                Ok(_) => panic!("not the HBase engine"),
                Err(e) => Err(e.to_string()),
            }
        };
        let ms = std::time::Duration::from_millis;
        assert_eq!(timeouts(&[]), Ok((ms(60_000), ms(20_000), 64)));
        assert_eq!(
            timeouts(&[("hbase.client.operation.timeout", "5000"), ("hbase.rpc.timeout", "2000")]),
            Ok((ms(5000), ms(2000), 64))
        );
        // asynchbase's 0 (no RPC limit) and an RPC limit past the call's: the call's deadline bounds the RPC.
        assert_eq!(timeouts(&[("hbase.rpc.timeout", "0")]), Ok((ms(60_000), ms(60_000), 64)));
        assert_eq!(
            timeouts(&[("hbase.client.operation.timeout", "3000"), ("hbase.rpc.timeout", "9000")]),
            Ok((ms(3000), ms(3000), 64))
        );
        // Calls in flight per region server: asynchbase's property, its 0 no limit.
        assert_eq!(timeouts(&[("hbase.region_client.inflight_limit", "300")]), Ok((ms(60_000), ms(20_000), 300)));
        assert_eq!(timeouts(&[("hbase.region_client.inflight_limit", "0")]), Ok((ms(60_000), ms(20_000), usize::MAX)));
        assert!(timeouts(&[("hbase.region_client.inflight_limit", "-1")]).is_err());
        assert!(timeouts(&[("hbase.client.operation.timeout", "0")]).unwrap_err().contains("deadline"));
        assert!(timeouts(&[("hbase.rpc.timeout", "soon")]).is_err());
    }

    #[test]
    fn series_counters_are_kept_on_rocksdb_and_on_hbase_only_with_tsuid_incrementing() {
        let dir = Path::new("/nonexistent");
        let counts = |set: &[(&str, &str)]| Config::for_data_dir(dir, set).unwrap().store_options().count_received;
        assert!(counts(&[]));
        assert!(counts(&[("tsd.core.meta.enable_tsuid_incrementing", "false")]));
        assert!(!counts(&[("rtsd.storage.engine", "hbase")]));
        assert!(counts(&[("rtsd.storage.engine", "hbase"), ("tsd.core.meta.enable_tsuid_incrementing", "true")]));
    }

    #[test]
    fn booleans_follow_opentsdb() {
        // spec: ingest §6: true iff `1`, `TRUE` or `YES`; enable_api must be exactly `true`.
        let dir = Path::new("/x");
        for (v, expect) in [("1", true), ("yes", true), (" TRUE ", true), ("on", false), ("0", false)] {
            let c = Config::for_data_dir(dir, &[("tsd.storage.fix_duplicates", v)]).unwrap();
            assert_eq!(c.fix_duplicates, expect, "{v:?}");
        }
        let c = Config::for_data_dir(dir, &[("tsd.core.enable_api", "TRUE")]).unwrap();
        assert!(!c.enable_api);
    }

    #[test]
    fn invalid_values_are_refused() {
        let dir = Path::new("/x");
        let e = Config::for_data_dir(dir, &[("tsd.storage.max_tags", "0")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value for tsd.storage.max_tags: \"0\": tsd.storage.max_tags must be greater than 0"
        );
        assert!(Config::for_data_dir(dir, &[("tsd.storage.uid.width.tagv", "9")]).is_err());
        assert!(Config::for_data_dir(dir, &[("tsd.storage.salt.buckets", "0")]).is_err());
        assert!(Config::for_data_dir(dir, &[("tsd.network.port", "http")]).is_err());
        assert_eq!(Config::for_data_dir(dir, &[("tsd.mode", "RO")]).unwrap().mode, Mode::ReadOnly);
    }
}
