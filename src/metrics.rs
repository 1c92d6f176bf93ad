//! rtsd's own counters: Prometheus text on `/metrics`, and the same numbers as OpenTSDB's `stats` lines
//! (telnet `stats`, `/api/stats`, spec: ingest §1.5.1). One set of counters feeds both views.
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use rtsd_protocol::point::{ErrorCategory, UidKind};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabel {
    pub protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CategoryLabel {
    pub category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    pub r#type: &'static str,
}

/// A Chukwa dataType (user-chosen, so an owned string).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DataTypeLabel {
    pub datatype: String,
}

/// Which door a point or request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Telnet,
    Http,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Telnet => "telnet",
            Protocol::Http => "http",
        }
    }
}

/// Every counter rtsd keeps.
pub struct Metrics {
    registry: Registry,
    pub datapoints_added: Family<ProtocolLabel, Counter>,
    pub put_errors: Family<CategoryLabel, Counter>,
    pub connections_open: Gauge,
    /// Series in the index and bytes the data directory holds, set when `/metrics` is read
    /// ([`crate::server::Tsd::refresh_store_gauges`]).
    pub series: Gauge,
    pub disk_bytes: Gauge,
    /// RocksDB compactions and flushes running or pending, set when `/metrics` is read.
    pub rocksdb_background_work: Gauge,
    /// The allocator's heap: bytes allocated and bytes it keeps resident, set when `/metrics` is read.
    pub heap_allocated_bytes: Gauge,
    pub heap_resident_bytes: Gauge,
    pub connections: Family<TypeLabel, Counter>,
    pub connection_exceptions: Family<TypeLabel, Counter>,
    pub rpcs_received: Family<TypeLabel, Counter>,
    pub uid_cache_hits: Family<KindLabel, Counter>,
    pub uid_cache_misses: Family<KindLabel, Counter>,
    pub uids_assigned: Family<KindLabel, Counter>,
    pub uid_rejected_assignments: Family<KindLabel, Counter>,
    pub rocksdb_write_seconds: Histogram,
    pub compaction_duplicates: Family<TypeLabel, Counter>,
    pub http_requests: Family<TypeLabel, Counter>,
    /// The Chukwa collector port (see `crate::chukwa`): posts by result, what was new after de-duplication by
    /// dataType, de-duplication outcomes, and content dropped.
    pub chukwa_posts: Family<TypeLabel, Counter>,
    pub chukwa_chunks: Family<DataTypeLabel, Counter>,
    pub chukwa_bytes: Family<DataTypeLabel, Counter>,
    pub chukwa_records: Family<DataTypeLabel, Counter>,
    pub chukwa_points: Family<DataTypeLabel, Counter>,
    pub chukwa_dedup: Family<TypeLabel, Counter>,
    pub chukwa_dropped: Family<TypeLabel, Counter>,
    /// Automatic rollups (see `store::rollup`): buckets (one per interval and series) recomputed from raw rows,
    /// and points folded into hours that had been rolled up before (late, out-of-order or overwriting points).
    pub rollup_buckets_written: Counter,
    pub rollup_late_points: Counter,
    pub queries_cancelled: Counter,
    /// Rows removed by retention (see `store::retention`) when RocksDB compacted them.
    pub rows_expired: Counter,
    /// Points accepted and stored though already older than the raw table's retention: no read returns them
    /// (an HBase TTL behaves the same). An operator who wonders why a backfill is invisible looks here.
    pub datapoints_expired_on_arrival: Counter,
    /// Storage failures by kind (`store::health::FailureKind`): writes refused by the free-space guard, a full
    /// disk, no file descriptors, anything else.
    pub storage_errors: Family<KindLabel, Counter>,
    /// Points refused by the put path, OpenTSDB's `rpc.errors type=socket_writes_blocked` aside.
    writes_blocked: AtomicU64,
    /// Handles into `uid_cache_hits` / `uid_cache_misses` per kind: UID lookups happen several times per data
    /// point, too often for a label lookup each time.
    uid_hit_handles: [Counter; 3],
    uid_miss_handles: [Counter; 3],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("rtsd");
        let m = Metrics {
            datapoints_added: Family::default(),
            put_errors: Family::default(),
            connections_open: Gauge::default(),
            series: Gauge::default(),
            disk_bytes: Gauge::default(),
            rocksdb_background_work: Gauge::default(),
            heap_allocated_bytes: Gauge::default(),
            heap_resident_bytes: Gauge::default(),
            connections: Family::default(),
            connection_exceptions: Family::default(),
            rpcs_received: Family::default(),
            uid_cache_hits: Family::default(),
            uid_cache_misses: Family::default(),
            uids_assigned: Family::default(),
            uid_rejected_assignments: Family::default(),
            rocksdb_write_seconds: Histogram::new(exponential_buckets(0.000_01, 4.0, 10)),
            compaction_duplicates: Family::default(),
            http_requests: Family::default(),
            chukwa_posts: Family::default(),
            chukwa_chunks: Family::default(),
            chukwa_bytes: Family::default(),
            chukwa_records: Family::default(),
            chukwa_points: Family::default(),
            chukwa_dedup: Family::default(),
            chukwa_dropped: Family::default(),
            rollup_buckets_written: Counter::default(),
            rollup_late_points: Counter::default(),
            queries_cancelled: Counter::default(),
            rows_expired: Counter::default(),
            datapoints_expired_on_arrival: Counter::default(),
            storage_errors: Family::default(),
            writes_blocked: AtomicU64::new(0),
            uid_hit_handles: Default::default(),
            uid_miss_handles: Default::default(),
            registry: Registry::default(),
        };
        let per_kind = |family: &Family<KindLabel, Counter>| {
            UidKind::ALL.map(|k| family.get_or_create(&KindLabel { kind: k.as_str() }).clone())
        };
        let m = Metrics {
            uid_hit_handles: per_kind(&m.uid_cache_hits),
            uid_miss_handles: per_kind(&m.uid_cache_misses),
            ..m
        };
        m.register_clients(&mut registry);
        m.register_data(&mut registry);
        Metrics { registry, ..m }
    }

    /// The client-facing metrics: points, connections, UIDs, writes, HTTP.
    fn register_clients(&self, registry: &mut Registry) {
        registry.register(
            "datapoints_added",
            "Data points accepted and written, by protocol",
            self.datapoints_added.clone(),
        );
        registry.register("put_errors", "Data points refused, by OpenTSDB error category", self.put_errors.clone());
        registry.register("connections_open", "Client connections open now", self.connections_open.clone());
        registry.register("series", "Series in the series index (within retention)", self.series.clone());
        registry.register("disk_bytes", "Bytes of the files in the data directory", self.disk_bytes.clone());
        registry.register(
            "rocksdb_background_work",
            "RocksDB compactions and flushes running, column families with one pending, 1 while the compaction \
             after a burst of writes is owed, and 1 while acknowledged points wait in the series table",
            self.rocksdb_background_work.clone(),
        );
        registry.register(
            "heap_allocated_bytes",
            "Bytes the process has allocated (jemalloc's stats.allocated)",
            self.heap_allocated_bytes.clone(),
        );
        registry.register(
            "heap_resident_bytes",
            "Bytes of heap the allocator keeps resident: allocated pages, freed pages not yet returned, metadata \
             (jemalloc's stats.resident)",
            self.heap_resident_bytes.clone(),
        );
        registry.register(
            "connections",
            "Client connections accepted (telnet, http) or rejected",
            self.connections.clone(),
        );
        registry.register(
            "connection_exceptions",
            "Connections closed because of a protocol error (closed) or an unexpected one (unknown)",
            self.connection_exceptions.clone(),
        );
        registry.register("rpcs_received", "Telnet commands and HTTP requests received", self.rpcs_received.clone());
        registry.register("uid_cache_hits", "Name to UID lookups answered from memory", self.uid_cache_hits.clone());
        registry.register("uid_cache_misses", "Name to UID lookups that read RocksDB", self.uid_cache_misses.clone());
        registry.register("uids_assigned", "New UIDs assigned", self.uids_assigned.clone());
        registry.register(
            "uid_rejected_assignments",
            "UID assignments refused because every id of the width is taken",
            self.uid_rejected_assignments.clone(),
        );
        registry.register(
            "rocksdb_write_seconds",
            "Latency of one atomic RocksDB write of a batch of points",
            self.rocksdb_write_seconds.clone(),
        );
        registry.register(
            "compaction_duplicates",
            "Points at an already stored instant met while compacting a row (identical or variant)",
            self.compaction_duplicates.clone(),
        );
        registry.register("http_requests", "HTTP requests by response status class", self.http_requests.clone());
    }

    /// Chukwa, rollups, queries, retention and storage failures.
    fn register_data(&self, registry: &mut Registry) {
        registry.register(
            "chukwa_posts",
            "Chukwa agent posts by result (ok, bad_body, commit_failed, too_large)",
            self.chukwa_posts.clone(),
        );
        registry.register("chukwa_chunks", "Chukwa chunks with new data, by dataType", self.chukwa_chunks.clone());
        registry.register("chukwa_bytes", "Chukwa chunk bytes accepted as new, by dataType", self.chukwa_bytes.clone());
        registry.register("chukwa_records", "Chukwa records accepted as new, by dataType", self.chukwa_records.clone());
        registry.register(
            "chukwa_points",
            "Data points written from Chukwa records, by dataType",
            self.chukwa_points.clone(),
        );
        registry.register(
            "chukwa_dedup",
            "Chukwa chunks by de-duplication outcome (duplicate, reset, gap, window_miss)",
            self.chukwa_dedup.clone(),
        );
        registry.register(
            "chukwa_dropped",
            "Chukwa content acknowledged but not stored (unparsable chunks, refused points)",
            self.chukwa_dropped.clone(),
        );
        registry.register(
            "rollup_buckets_written",
            "Rollup buckets (per series and interval) computed from raw points and written",
            self.rollup_buckets_written.clone(),
        );
        registry.register(
            "rollup_late_points",
            "Points folded into rollups of an hour that had been rolled up before (late, out of order, overwrites)",
            self.rollup_late_points.clone(),
        );
        registry.register(
            "queries_cancelled",
            "Queries stopped before they finished because the client closed its connection",
            self.queries_cancelled.clone(),
        );
        registry.register(
            "rows_expired",
            "Rows older than their table's retention removed by RocksDB compactions",
            self.rows_expired.clone(),
        );
        registry.register(
            "datapoints_expired_on_arrival",
            "Data points stored though older than rtsd.retention.raw_hours when they arrived: no read returns them",
            self.datapoints_expired_on_arrival.clone(),
        );
        registry.register(
            "storage_errors",
            "Storage failures, by kind: low_space (refused by rtsd.storage.min_free_mb), no_space, no_files, unreachable (a storage cluster down), other",
            self.storage_errors.clone(),
        );
    }

    /// Counts one fold of raw rows into rollups.
    pub fn rollups(&self, buckets_written: u64, late_points: u64) {
        self.rollup_buckets_written.inc_by(buckets_written);
        self.rollup_late_points.inc_by(late_points);
    }

    /// The Prometheus text exposition of every counter.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// [`Metrics::encode`] without the metrics named in `omitted` (full names, `rtsd_series`): their HELP, TYPE
    /// and sample lines.
    pub fn encode_except(&self, omitted: &[&str]) -> String {
        let text = self.encode();
        let named = |line: &str| {
            let rest = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")).unwrap_or(line);
            let name = rest.split([' ', '{']).next().unwrap_or_default();
            omitted.contains(&name)
        };
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n').filter(|l| !named(l.trim_end_matches('\n'))) {
            out.push_str(line);
        }
        out
    }

    pub fn point_added(&self, protocol: Protocol, n: u64) {
        self.datapoints_added.get_or_create(&ProtocolLabel { protocol: protocol.as_str() }).inc_by(n);
    }

    pub fn put_error(&self, category: ErrorCategory) {
        self.put_errors.get_or_create(&CategoryLabel { category: category.as_str() }).inc();
    }

    pub fn rpc(&self, kind: &'static str) {
        self.rpcs(kind, 1);
    }

    /// Counts `n` requests at once: the telnet path tallies a whole read's lines locally and reports them here,
    /// keeping the shared counters off the per-line path.
    pub fn rpcs(&self, kind: &'static str, n: u64) {
        if n > 0 {
            self.rpcs_received.get_or_create(&TypeLabel { r#type: kind }).inc_by(n);
        }
    }

    pub fn storage_error(&self, kind: &'static str) {
        self.storage_errors.get_or_create(&KindLabel { kind }).inc();
    }

    pub fn connection(&self, kind: &'static str) {
        self.connections.get_or_create(&TypeLabel { r#type: kind }).inc();
    }

    pub fn connection_exception(&self, kind: &'static str) {
        self.connection_exceptions.get_or_create(&TypeLabel { r#type: kind }).inc();
    }

    pub fn uid_cache_hit(&self, kind: UidKind) {
        self.uid_hit_handles[kind.index()].inc();
    }

    pub fn uid_cache_miss(&self, kind: UidKind) {
        self.uid_miss_handles[kind.index()].inc();
    }

    pub fn uid_assigned(&self, kind: UidKind) {
        self.uids_assigned.get_or_create(&KindLabel { kind: kind.as_str() }).inc();
    }

    pub fn uid_rejected(&self, kind: UidKind) {
        self.uid_rejected_assignments.get_or_create(&KindLabel { kind: kind.as_str() }).inc();
    }

    pub fn compaction_duplicates(&self, identical: u32, variant: u32) {
        if identical > 0 {
            self.compaction_duplicates.get_or_create(&TypeLabel { r#type: "identical" }).inc_by(identical as u64);
        }
        if variant > 0 {
            self.compaction_duplicates.get_or_create(&TypeLabel { r#type: "variant" }).inc_by(variant as u64);
        }
    }

    pub fn http_response(&self, status: u16) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.http_requests.get_or_create(&TypeLabel { r#type: class }).inc();
    }

    pub fn chukwa_post(&self, result: &'static str) {
        self.chukwa_posts.get_or_create(&TypeLabel { r#type: result }).inc();
    }

    /// What one post brought for one dataType, after de-duplication.
    pub fn chukwa_ingested(&self, data_type: &str, chunks: u64, bytes: u64, records: u64, points: u64) {
        let label = DataTypeLabel { datatype: data_type.to_string() };
        for (family, n) in [
            (&self.chukwa_chunks, chunks),
            (&self.chukwa_bytes, bytes),
            (&self.chukwa_records, records),
            (&self.chukwa_points, points),
        ] {
            if n > 0 {
                family.get_or_create(&label).inc_by(n);
            }
        }
    }

    pub fn chukwa_dedup(&self, outcome: &'static str, n: u64) {
        if n > 0 {
            self.chukwa_dedup.get_or_create(&TypeLabel { r#type: outcome }).inc_by(n);
        }
    }

    pub fn chukwa_dropped(&self, reason: &'static str, n: u64) {
        if n > 0 {
            self.chukwa_dropped.get_or_create(&TypeLabel { r#type: reason }).inc_by(n);
        }
    }

    pub fn write_blocked(&self) {
        self.writes_blocked.fetch_add(1, Ordering::Relaxed);
    }

    fn by_type(family: &Family<TypeLabel, Counter>, kind: &'static str) -> u64 {
        family.get_or_create(&TypeLabel { r#type: kind }).get()
    }

    fn by_kind(family: &Family<KindLabel, Counter>, kind: UidKind) -> u64 {
        family.get_or_create(&KindLabel { kind: kind.as_str() }).get()
    }

    /// OpenTSDB's stats that exist in rtsd, in OpenTSDB's emission order (spec: ingest §1.5.1). `uid_stats` gives
    /// per kind (cache size, ids used, ids available).
    pub fn opentsdb_stats(&self, uid_stats: impl Fn(UidKind) -> (u64, u64, u64)) -> Vec<Stat> {
        let mut out = Vec::new();
        let mut stat = |name: &'static str, value: u64, tag: Option<(&'static str, &'static str)>| {
            out.push(Stat { name, value, tag });
        };
        let open = self.connections_open.get().max(0) as u64;
        let conns = &self.connections;
        stat("connectionmgr.connections", open, Some(("type", "open")));
        stat("connectionmgr.connections", Self::by_type(conns, "rejected"), Some(("type", "rejected")));
        let total = Self::by_type(conns, "telnet") + Self::by_type(conns, "http");
        stat("connectionmgr.connections", total, Some(("type", "total")));
        for t in ["closed", "reset", "timeout", "unknown"] {
            stat("connectionmgr.exceptions", Self::by_type(&self.connection_exceptions, t), Some(("type", t)));
        }
        stat("rpc.received", Self::by_type(&self.rpcs_received, "telnet"), Some(("type", "telnet")));
        stat("rpc.received", Self::by_type(&self.rpcs_received, "http"), Some(("type", "http")));
        stat("rpc.received", Self::by_type(&self.rpcs_received, "put"), Some(("type", "put")));
        for category in ErrorCategory::ALL {
            let n = self.put_errors.get_or_create(&CategoryLabel { category: category.as_str() }).get();
            stat("rpc.errors", n, Some(("type", category.as_str())));
        }
        stat("rpc.errors", self.writes_blocked.load(Ordering::Relaxed), Some(("type", "socket_writes_blocked")));
        for kind in UidKind::ALL {
            let (size, used, available) = uid_stats(kind);
            let tag = Some(("kind", kind.as_str()));
            stat("uid.cache-hit", Self::by_kind(&self.uid_cache_hits, kind), tag);
            stat("uid.cache-miss", Self::by_kind(&self.uid_cache_misses, kind), tag);
            stat("uid.cache-size", size, tag);
            stat("uid.random-collisions", 0, tag);
            stat("uid.rejected-assignments", Self::by_kind(&self.uid_rejected_assignments, kind), tag);
            stat("uid.ids-used", used, tag);
            stat("uid.ids-available", available, tag);
        }
        let added: u64 = ["telnet", "http"]
            .iter()
            .map(|p| self.datapoints_added.get_or_create(&ProtocolLabel { protocol: p }).get())
            .sum();
        stat("datapoints.added", added, Some(("type", "all")));
        stat(
            "compaction.duplicates",
            Self::by_type(&self.compaction_duplicates, "identical"),
            Some(("type", "identical")),
        );
        stat("compaction.duplicates", Self::by_type(&self.compaction_duplicates, "variant"), Some(("type", "variant")));
        // rtsd's own, after OpenTSDB's.
        stat("rollup.buckets_written", self.rollup_buckets_written.get(), None);
        stat("rollup.late_points", self.rollup_late_points.get(), None);
        stat("storage.rows_expired", self.rows_expired.get(), None);
        out
    }
}

/// One OpenTSDB stat: `tsd.<name> <time> <value> [<tag>] host=<host>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub name: &'static str,
    pub value: u64,
    pub tag: Option<(&'static str, &'static str)>,
}

/// The tags every stat line carries: `host=` (or `fqdn=` with `tsd.stats.canonical`) and optionally `port=`.
pub fn stat_host_tags(canonical: bool, with_port: Option<u16>) -> Vec<(String, String)> {
    let host = hostname();
    let mut tags = vec![(if canonical { "fqdn" } else { "host" }.to_string(), host)];
    if let Some(port) = with_port {
        tags.push(("port".to_string(), port.to_string()));
    }
    tags
}

/// The machine's host name, as OpenTSDB puts it on stats.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Telnet `stats` text (spec: ingest §1.5.1).
pub fn render_stats_text(stats: &[Stat], now: u64, host_tags: &[(String, String)]) -> String {
    let mut out = String::new();
    for s in stats {
        out.push_str("tsd.");
        out.push_str(s.name);
        out.push_str(&format!(" {now} {}", s.value));
        if let Some((k, v)) = s.tag {
            out.push_str(&format!(" {k}={v}"));
        }
        for (k, v) in host_tags {
            out.push_str(&format!(" {k}={v}"));
        }
        out.push('\n');
    }
    out
}

/// `/api/stats` JSON: `[{"metric":"tsd.x","timestamp":t,"value":"n","tags":{...}}]` (spec: query §6.14).
pub fn render_stats_json(stats: &[Stat], now: u64, host_tags: &[(String, String)]) -> String {
    use rtsd_protocol::http_json::json_string;
    // Keys in 2.4's IncomingDataPoint field order (metric, timestamp, value, tags), the tags a Java HashMap.
    let mut out = String::from("[");
    for (i, s) in stats.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let mut tags: Vec<(&str, &str)> = s.tag.into_iter().collect();
        for (k, v) in host_tags {
            match tags.iter_mut().find(|(key, _)| *key == k.as_str()) {
                Some(tag) => tag.1 = v,
                None => tags.push((k, v)),
            }
        }
        let keys: Vec<&str> = tags.iter().map(|(k, _)| *k).collect();
        out.push_str(&format!(
            "{{\"metric\":\"tsd.{}\",\"timestamp\":{now},\"value\":\"{}\",\"tags\":{{",
            s.name, s.value
        ));
        for (n, i) in rtsd_protocol::javafmt::hashmap_order(&keys).into_iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&format!("{}:{}", json_string(tags[i].0), json_string(tags[i].1)));
        }
        out.push_str("}}");
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_lines_have_opentsdbs_shape() {
        // spec: ingest §1.5.1: `tsd.<name> <unix_seconds> <integer> [<tag>] host=<hostname>`
        let m = Metrics::new();
        m.point_added(Protocol::Telnet, 3);
        m.point_added(Protocol::Http, 2);
        m.put_error(ErrorCategory::InvalidValues);
        let stats = m.opentsdb_stats(|_| (1, 2, 3));
        let tags = vec![("host".to_string(), "web01".to_string())];
        let text = render_stats_text(&stats, 1479600574, &tags);
        assert!(text.starts_with("tsd.connectionmgr.connections 1479600574 0 type=open host=web01\n"), "{text}");
        assert!(text.contains("\ntsd.rpc.errors 1479600574 1 type=invalid_values host=web01\n"));
        assert!(text.contains("\ntsd.datapoints.added 1479600574 5 type=all host=web01\n"));
        assert!(text.contains("\ntsd.uid.ids-used 1479600574 2 kind=tagk host=web01\n"));
        let json = render_stats_json(&stats, 1, &tags);
        // spec: query §6.14; keys in IncomingDataPoint's order, tags in Java HashMap order.
        assert!(
            json.starts_with(r#"[{"metric":"tsd.connectionmgr.connections","timestamp":1,"value":"0","tags":{"host":"web01","type":"open"}},"#),
            "{json}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed.as_array().unwrap().len(), stats.len());
    }

    #[test]
    fn prometheus_text_names_the_counters() {
        let m = Metrics::new();
        m.point_added(Protocol::Telnet, 7);
        let text = m.encode();
        assert!(text.contains("rtsd_datapoints_added_total{protocol=\"telnet\"} 7\n"), "{text}");
        assert!(text.contains("# TYPE rtsd_rocksdb_write_seconds histogram"));
    }

    #[test]
    fn a_metric_can_be_left_out_of_the_text() {
        let m = Metrics::new();
        m.series.set(5);
        let full = m.encode();
        assert!(full.contains("\nrtsd_series 5\n"), "{full}");
        let text = m.encode_except(&["rtsd_series"]);
        assert!(!text.contains("rtsd_series "), "{text}");
        assert!(!text.contains("rtsd_series\n"), "{text}");
        // Only its three lines go (HELP, TYPE, the sample); a metric whose name starts the same stays.
        assert_eq!(full.lines().count() - text.lines().count(), 3);
        assert!(text.contains("# TYPE rtsd_rocksdb_write_seconds histogram"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
