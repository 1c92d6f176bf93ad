//! `rtsd.chukwa.*` properties (README "Chukwa collector port"), typed once at start-up.
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use jiff::tz::TimeZone;

use super::dedup::DedupLimits;
use super::mapping::Processor;
use super::rules::{Rule, DEFAULT_TIME_FORMAT};
use crate::config::ConfigError;

/// The property naming the listener port; also the one the `--chukwa-port` flag sets.
pub const PORT_PROPERTY: &str = "rtsd.chukwa.port";

/// The defaults of the fixed `rtsd.chukwa.*` properties, for `/api/config` and the README table.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("rtsd.chukwa.bind", ""),
    ("rtsd.chukwa.compression", "auto"),
    ("rtsd.chukwa.dedup.entries", "4096"),
    ("rtsd.chukwa.dedup.streams", "16384"),
    ("rtsd.chukwa.dedup.idle_secs", "604800"),
    ("rtsd.chukwa.dedup.span_bytes", "67108864"),
    ("rtsd.chukwa.dedup.window_secs", "86400"),
    ("rtsd.chukwa.hicc.timezone", ""),
    ("rtsd.chukwa.ingest_series", "true"),
    ("rtsd.chukwa.max_body_bytes", "67108864"),
    ("rtsd.chukwa.max_chunks", "100000"),
    ("rtsd.chukwa.port", "8080"),
    ("rtsd.chukwa.schema", "true"),
    ("rtsd.chukwa.sync", "true"),
];

/// How POST bodies are compressed (spec §3.2, §8.1); agents send no header saying so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyCompression {
    /// zlib when the body starts like a zlib stream, gzip on `1f 8b`, else raw.
    Auto,
    None,
    Zlib,
    Gzip,
}

/// The Chukwa collector port's settings.
#[derive(Debug, Clone)]
pub struct ChukwaConfig {
    /// `rtsd.chukwa.port`; 0 disables the listener.
    pub port: u16,
    /// The port was set explicitly (file, `--set`, `--chukwa-port`): failing to bind it stops the daemon. The
    /// default port that can't be bound (another service on 8080) only logs a warning.
    pub port_required: bool,
    /// `rtsd.chukwa.bind`; empty means `tsd.network.bind`.
    pub bind: IpAddr,
    pub compression: BodyCompression,
    /// Largest body, compressed or decompressed.
    pub max_body_bytes: usize,
    pub max_chunks: usize,
    /// fsync every post's write before replying (durable across power loss, not only process crashes).
    pub sync: bool,
    pub dedup: DedupLimits,
    /// Streams whose de-duplication state is kept in memory (least recently used beyond are reloaded).
    pub streams_in_memory: usize,
    /// Write Chukwa's `chukwa` / `chukwa_meta` tables (what HICC reads).
    pub schema: bool,
    /// Write `chukwa.ingest.*` and `chukwa.dedup.*` series (server time) with every post.
    pub ingest_series: bool,
    /// dataType -> processor, from `rtsd.chukwa.processor.<dataType>` and `rtsd.chukwa.rule.<dataType>.*`.
    pub processors: HashMap<String, Processor>,
    /// The zone HICC's `yyyyMMddHHmmss` times are read in (the server's, by default).
    pub hicc_tz: TimeZone,
}

impl Default for ChukwaConfig {
    fn default() -> Self {
        let props: BTreeMap<String, String> = DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ChukwaConfig::from_properties(&props, IpAddr::from([0, 0, 0, 0])).expect("the defaults are valid")
    }
}

impl ChukwaConfig {
    /// Types the `rtsd.chukwa.*` properties of a full property map; `bind` is `tsd.network.bind`.
    pub fn from_properties(props: &BTreeMap<String, String>, bind: IpAddr) -> Result<ChukwaConfig, ConfigError> {
        let get = |key: &str| props.get(key).map(|v| v.trim()).unwrap_or("");
        let invalid = |key: &str, why: &str| ConfigError::Invalid {
            key: key.to_string(),
            value: get(key).to_string(),
            why: why.to_string(),
        };
        let number = |key: &str| -> Result<u64, ConfigError> {
            match get(key) {
                "" => DEFAULTS.iter().find(|(k, _)| *k == key).map_or(Ok(0), |(_, v)| Ok(v.parse().unwrap_or(0))),
                v => v.parse::<u64>().map_err(|e| invalid(key, &e.to_string())),
            }
        };
        // OpenTSDB's boolean rule: 1, TRUE or YES; a missing key takes its default.
        let boolean = |key: &str| -> bool {
            let v = match get(key) {
                "" => DEFAULTS.iter().find(|(k, _)| *k == key).map_or("", |(_, v)| v),
                v => v,
            };
            matches!(v.to_ascii_uppercase().as_str(), "1" | "TRUE" | "YES")
        };
        let port = u16::try_from(number(PORT_PROPERTY)?).map_err(|e| invalid(PORT_PROPERTY, &e.to_string()))?;
        let bind = match get("rtsd.chukwa.bind") {
            "" => bind,
            v => v.parse::<IpAddr>().map_err(|e| invalid("rtsd.chukwa.bind", &e.to_string()))?,
        };
        let compression = match get("rtsd.chukwa.compression").to_ascii_lowercase().as_str() {
            "" | "auto" => BodyCompression::Auto,
            "none" => BodyCompression::None,
            "zlib" | "deflate" | "defaultcodec" => BodyCompression::Zlib,
            "gzip" => BodyCompression::Gzip,
            _ => return Err(invalid("rtsd.chukwa.compression", "expected auto, none, zlib or gzip")),
        };
        let secs_ms = |key: &str| -> Result<i64, ConfigError> { Ok((number(key)? as i64).saturating_mul(1000)) };
        let dedup = DedupLimits {
            entries: (number("rtsd.chukwa.dedup.entries")? as usize).max(1),
            span_bytes: number("rtsd.chukwa.dedup.span_bytes")? as i64,
            window_ms: secs_ms("rtsd.chukwa.dedup.window_secs")?,
            idle_ms: secs_ms("rtsd.chukwa.dedup.idle_secs")?,
        };
        let hicc_tz = match get("rtsd.chukwa.hicc.timezone") {
            "" => TimeZone::system(),
            name => TimeZone::get(name).map_err(|e| invalid("rtsd.chukwa.hicc.timezone", &e.to_string()))?,
        };
        let mut processors = HashMap::new();
        for (key, value) in props.range("rtsd.chukwa.processor.".to_string()..) {
            let Some(data_type) = key.strip_prefix("rtsd.chukwa.processor.") else { break };
            let processor = Processor::from_name(value).ok_or_else(|| {
                invalid(key, "expected system_metrics, hadoop_metrics, chukwa_metrics, flat_json or raw")
            })?;
            processors.insert(data_type.to_string(), processor);
        }
        for (key, regex) in props.range("rtsd.chukwa.rule.".to_string()..) {
            let Some(rest) = key.strip_prefix("rtsd.chukwa.rule.") else { break };
            let Some(data_type) = rest.strip_suffix(".regex") else { continue };
            let format = props.get(&format!("rtsd.chukwa.rule.{data_type}.time_format"));
            let format = format.map(|f| f.trim()).filter(|f| !f.is_empty()).unwrap_or(DEFAULT_TIME_FORMAT);
            let zone = props.get(&format!("rtsd.chukwa.rule.{data_type}.timezone")).map_or("", |z| z.trim());
            let rule = Rule::new(regex.trim(), format, zone).map_err(|why| invalid(key, &why))?;
            processors.insert(data_type.to_string(), Processor::Rule(Arc::new(rule)));
        }
        Ok(ChukwaConfig {
            port,
            port_required: false,
            bind,
            compression,
            max_body_bytes: number("rtsd.chukwa.max_body_bytes")? as usize,
            max_chunks: number("rtsd.chukwa.max_chunks")? as usize,
            sync: boolean("rtsd.chukwa.sync"),
            dedup,
            streams_in_memory: (number("rtsd.chukwa.dedup.streams")? as usize).max(1),
            schema: boolean("rtsd.chukwa.schema"),
            ingest_series: boolean("rtsd.chukwa.ingest_series"),
            processors,
            hicc_tz,
        })
    }

    /// The processor for a chunk: configured for its dataType, else Chukwa's default mapping.
    pub fn processor_for(&self, data_type: &str, stream_name: &str) -> Processor {
        match self.processors.get(data_type) {
            Some(p) => p.clone(),
            None => Processor::default_for(data_type, stream_name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &[(&str, &str)]) -> Result<ChukwaConfig, ConfigError> {
        let mut props: BTreeMap<String, String> =
            DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        props.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        ChukwaConfig::from_properties(&props, IpAddr::from([127, 0, 0, 1]))
    }

    #[test]
    fn defaults() {
        let c = config(&[]).unwrap();
        assert_eq!(c.port, 8080);
        assert_eq!(c.bind, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(c.compression, BodyCompression::Auto);
        assert_eq!(c.dedup, DedupLimits::default());
        assert!(c.sync && c.schema && c.ingest_series && !c.port_required);
        assert!(matches!(c.processor_for("SystemMetrics", "Sigar"), Processor::SystemMetrics));
        assert_eq!(ChukwaConfig::default().port, 8080);
    }

    #[test]
    fn processors_and_rules() {
        let c = config(&[
            ("rtsd.chukwa.processor.MySigar", "system_metrics"),
            ("rtsd.chukwa.processor.SystemMetrics", "raw"),
            ("rtsd.chukwa.rule.AppLog.regex", r"^(?P<time>\S+ \S+) .*v=(?P<v>\d+)"),
            ("rtsd.chukwa.rule.AppLog.timezone", "UTC"),
        ])
        .unwrap();
        assert!(matches!(c.processor_for("MySigar", "x"), Processor::SystemMetrics));
        assert!(c.processor_for("SystemMetrics", "x").is_raw());
        assert!(matches!(c.processor_for("AppLog", "x"), Processor::Rule(_)));
        assert!(c.processor_for("Other", "x").is_raw());
    }

    #[test]
    fn invalid_values() {
        for (k, v) in [
            ("rtsd.chukwa.port", "70000"),
            ("rtsd.chukwa.compression", "snappy"),
            ("rtsd.chukwa.bind", "nowhere"),
            ("rtsd.chukwa.processor.X", "bogus"),
            ("rtsd.chukwa.rule.X.regex", "(?P<v>1)"),
            ("rtsd.chukwa.hicc.timezone", "Mars/Olympus"),
        ] {
            let e = config(&[(k, v)]).unwrap_err();
            assert!(e.to_string().starts_with(&format!("invalid value for {k}")), "{e}");
        }
        assert_eq!(config(&[("rtsd.chukwa.port", "0")]).unwrap().port, 0);
    }
}
