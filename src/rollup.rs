//! Rollups: OpenTSDB 2.4's rollup configuration (`tsd.rollups.*`, the `tsd.rollups.config` JSON) and the checks
//! a `rollup` data point goes through before it is stored (spec: ingest §1.7, §6; query §6.13).
//!
//! A rollup interval names two tables: the temporal table (one series' values aggregated over the interval) and
//! the pre-aggregate table (values already aggregated across series, tagged `_aggregate=<AGG>`). Rows are keyed
//! like data rows but their base time is the start of the interval's row span (an hour, a day, a month or a
//! year), and a cell's qualifier is the aggregator's ID byte followed by `(offset << 4) | flags` on two bytes,
//! where the offset counts intervals from the base time (OpenTSDB's `RollupUtils.buildRollupQualifier`). The
//! interval marked `defaultInterval` is the raw data table itself.
//!
//! Beyond OpenTSDB, rtsd computes rollups itself (`rtsd.rollups.auto`): every non-default interval that divides
//! an hour gets count, sum, min and max of the raw points of each series, recomputed from the stored raw row
//! whenever points arrive for it (see `store::rollup`). Without `tsd.rollups.config` the intervals are 1m, 10m
//! and 1h ([`BUILTIN_CONFIG`]).
use std::collections::BTreeMap;

use rtsd_protocol::codec;
use rtsd_protocol::point::{DataPoint, PutError, RollupSpec};
use serde::Deserialize;

use crate::config::ConfigError;

/// The rollup configuration used when rollups are enabled without `tsd.rollups.config`: the raw table as the
/// default interval, then 1-minute rows of an hour and 10-minute and 1-hour rows of a day.
pub const BUILTIN_CONFIG: &str = r#"{"aggregationIds":{"sum":0,"count":1,"min":2,"max":3},"intervals":[
{"table":"tsdb","preAggregationTable":"tsdb-agg","interval":"1s","rowSpan":"1h","defaultInterval":true},
{"table":"tsdb-rollup-1m","preAggregationTable":"tsdb-rollup-agg-1m","interval":"1m","rowSpan":"1h"},
{"table":"tsdb-rollup-10m","preAggregationTable":"tsdb-rollup-agg-10m","interval":"10m","rowSpan":"1d"},
{"table":"tsdb-rollup-1h","preAggregationTable":"tsdb-rollup-agg-1h","interval":"1h","rowSpan":"1d"}]}"#;

/// The properties read here and their defaults (OpenTSDB's, plus rtsd's own `rtsd.rollups.*`).
pub const DEFAULTS: &[(&str, &str)] = &[
    ("tsd.rollups.enable", "false"),
    ("tsd.rollups.config", ""),
    ("tsd.rollups.agg_tag_key", "_aggregate"),
    ("tsd.rollups.raw_agg_tag_value", "RAW"),
    ("tsd.rollups.tag_raw", "false"),
    ("tsd.rollups.block_derived", "true"),
    ("rtsd.rollups.auto", "true"),
    ("rtsd.rollups.flush_interval_ms", "60000"),
    ("rtsd.rollups.fold_on_flush", "true"),
];

/// The aggregators rtsd computes itself, in the order their cells are written.
pub const AUTO_AGGREGATORS: [&str; 4] = ["sum", "count", "min", "max"];

/// The span a rollup row covers (`rowSpan`): hours (a multiple), a day, a month or a year, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSpan {
    Hours(u32),
    Day,
    Month,
    Year,
}

/// One configured rollup interval (OpenTSDB's `RollupInterval`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupInterval {
    /// The temporal table, e.g. `tsdb-rollup-1h`.
    pub table: String,
    /// The pre-aggregate table, e.g. `tsdb-rollup-agg-1h`.
    pub preagg_table: String,
    /// The interval as configured, e.g. `1h` (what `query.rollupTable` echoes).
    pub interval: String,
    pub interval_secs: u32,
    pub row_span: RowSpan,
    /// How many intervals a row holds (the largest offset + 1).
    pub intervals: u32,
    /// The raw table: its data is raw data.
    pub default: bool,
}

impl RollupInterval {
    /// The start of the row holding `timestamp` (seconds), as `RollupUtils.getRollupBasetime`.
    pub fn base_time(&self, timestamp: i64) -> u32 {
        let span = match self.row_span {
            RowSpan::Hours(n) => i64::from(n) * 3600,
            RowSpan::Day => 86_400,
            RowSpan::Month | RowSpan::Year => {
                let Ok(ts) = jiff::Timestamp::from_second(timestamp) else { return 0 };
                let date = ts.to_zoned(jiff::tz::TimeZone::UTC).date();
                let first = if self.row_span == RowSpan::Month { date.first_of_month() } else { date.first_of_year() };
                return first.to_zoned(jiff::tz::TimeZone::UTC).map(|z| z.timestamp().as_second() as u32).unwrap_or(0);
            }
        };
        (timestamp - timestamp.rem_euclid(span)) as u32
    }

    /// The base time of the row after the one starting at `base_time`.
    pub fn next_base_time(&self, base_time: u32) -> u32 {
        let b = i64::from(base_time);
        match self.row_span {
            RowSpan::Hours(n) => (b + i64::from(n.max(1)) * 3600) as u32,
            RowSpan::Day => (b + 86_400) as u32,
            RowSpan::Month => self.base_time(b + 32 * 86_400),
            RowSpan::Year => self.base_time(b + 366 * 86_400),
        }
    }

    /// The 3-byte qualifier of a cell: aggregator ID, then `(offset << 4) | flags` big-endian.
    pub fn qualifier(&self, timestamp: i64, base_time: u32, flags: u8, aggregator_id: u8) -> [u8; 3] {
        let offset = ((timestamp - i64::from(base_time)) / i64::from(self.interval_secs)) as u16;
        let packed = (offset << 4) | u16::from(flags & codec::FLAGS_MASK);
        let [hi, lo] = packed.to_be_bytes();
        [aggregator_id, hi, lo]
    }

    /// Whether rtsd computes this interval itself: a rollup table (not the raw one) whose buckets tile an hour,
    /// so one raw row holds whole buckets.
    pub fn is_auto(&self) -> bool {
        !self.default && self.interval_secs > 0 && 3600 % self.interval_secs == 0
    }

    /// The RocksDB column family of a table: `<table>:t`, as the data table's `tsdb:t`.
    pub fn family(table: &str) -> String {
        format!("{table}:t")
    }

    /// The column family of the rollups rtsd computes for a table (`<table>:a`, see `store::rollup_rows`), given
    /// the table's family.
    pub fn auto_family(family: &str) -> String {
        format!("{}:a", family.strip_suffix(":t").unwrap_or(family))
    }

    /// Whether a column family holds rollups rtsd computed (`<table>:a`).
    pub fn is_auto_family(family: &str) -> bool {
        family.ends_with(":a") && family != "chukwa:a"
    }
}

/// The parsed `tsd.rollups.config` (OpenTSDB's `RollupConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupConfig {
    /// In configuration order.
    pub intervals: Vec<RollupInterval>,
    /// Lower-case aggregator name -> ID byte (0..=127).
    pub aggregation_ids: BTreeMap<String, u8>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigJson {
    aggregation_ids: Option<BTreeMap<String, i64>>,
    intervals: Option<Vec<IntervalJson>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntervalJson {
    table: Option<String>,
    pre_aggregation_table: Option<String>,
    interval: Option<String>,
    row_span: Option<String>,
    #[serde(default)]
    default_interval: bool,
}

impl RollupConfig {
    /// Parses and validates the JSON with OpenTSDB's rules and messages (`RollupConfig`, `RollupInterval`).
    pub fn parse(json: &str) -> Result<RollupConfig, String> {
        let raw: ConfigJson = serde_json::from_str(json).map_err(|e| format!("invalid rollup config JSON: {e}"))?;
        let intervals = raw.intervals.filter(|i| !i.is_empty());
        let Some(intervals) = intervals else {
            return Err("Rollup config given but no intervals were found.".into());
        };
        let ids = raw.aggregation_ids.filter(|i| !i.is_empty());
        let Some(ids) = ids else {
            return Err("Rollup config given but no aggegation ID mappings found.".into());
        };
        let mut config = RollupConfig { intervals: Vec::new(), aggregation_ids: BTreeMap::new() };
        for i in intervals {
            let interval = RollupInterval::compile(i)?;
            if config.intervals.iter().any(|have| have.interval == interval.interval) {
                return Err(format!("Only one interval of each type can be configured: {}", interval.interval));
            }
            if interval.default && config.intervals.iter().any(|have| have.default) {
                return Err(format!(
                    "Multiple default intervals configured. Only one is allowed: {}",
                    interval.interval
                ));
            }
            config.intervals.push(interval);
        }
        if !config.intervals.iter().any(|i| i.default) {
            return Err("None of the rollup intervals were marked as the \"default\".".into());
        }
        for (name, id) in ids {
            if !(0..=127).contains(&id) {
                return Err(format!("ID for aggregator must be between 0 and 127: {name}={id}"));
            }
            let name = name.to_ascii_lowercase();
            if config.aggregation_ids.values().any(|&have| i64::from(have) == id) {
                return Err(format!("Multiple mappings for the ID '{id}' are not allowed."));
            }
            if crate::query::Aggregator::from_name(&name).is_none() {
                return Err(format!("No such aggregator found for {name}"));
            }
            config.aggregation_ids.insert(name, id as u8);
        }
        Ok(config)
    }

    /// The interval configured as `interval` (e.g. `1h`).
    pub fn interval(&self, interval: &str) -> Option<&RollupInterval> {
        self.intervals.iter().find(|i| i.interval == interval)
    }

    /// The interval marked as the default (the raw table); validation guarantees one.
    pub fn default_interval(&self) -> &RollupInterval {
        self.intervals.iter().find(|i| i.default).unwrap_or(&self.intervals[0])
    }

    /// `getIdForAggregator`, with its messages.
    pub fn aggregator_id(&self, aggregator: Option<&str>) -> Result<u8, String> {
        let Some(agg) = aggregator.filter(|a| !a.is_empty()) else {
            return Err("Aggregator cannot be null or empty.".into());
        };
        self.aggregation_ids
            .get(&agg.to_ascii_lowercase())
            .copied()
            .ok_or_else(|| format!("No ID found mapping to aggregator: {agg}"))
    }

    /// Every table named by the configuration, temporal and pre-aggregate, without duplicates.
    pub fn tables(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for i in &self.intervals {
            for t in [&i.table, &i.preagg_table] {
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
        }
        out
    }

    /// The intervals a downsample of `interval_ms` can read, best (largest) first: the configured intervals
    /// that divide it (OpenTSDB's `getRollupInterval(long, String)`).
    pub fn best_matches(&self, interval_ms: i64) -> Vec<&RollupInterval> {
        if interval_ms <= 0 || interval_ms % 1000 != 0 {
            return Vec::new();
        }
        let secs = interval_ms / 1000;
        let mut out: Vec<&RollupInterval> =
            self.intervals.iter().filter(|i| i.interval_secs > 0 && secs % i64::from(i.interval_secs) == 0).collect();
        out.sort_by_key(|i| std::cmp::Reverse(i.interval_secs));
        out
    }
}

impl RollupInterval {
    fn compile(i: IntervalJson) -> Result<RollupInterval, String> {
        let table = i.table.filter(|t| !t.is_empty()).ok_or("The rollup table cannot be null or empty")?;
        let preagg_table = i
            .pre_aggregation_table
            .filter(|t| !t.is_empty())
            .ok_or("The pre-aggregate rollup table cannot be null or empty")?;
        let interval = i.interval.unwrap_or_default();
        let row_span_text = i.row_span.unwrap_or_default();
        // DateTime.getDurationUnits / getDurationInterval: leading digits, then the unit.
        let digits = row_span_text.chars().take_while(char::is_ascii_digit).count();
        let unit = &row_span_text[digits..];
        if unit.len() > 1 {
            return Err("Milliseconds are not supported".into());
        }
        let multiplier: u32 =
            row_span_text[..digits].parse().map_err(|_| format!("Invalid rowSpan: {row_span_text}"))?;
        let row_span = match unit {
            "h" => RowSpan::Hours(multiplier),
            _ if multiplier > 1 => return Err("Multipliers are only usable with the 'h' unit".into()),
            "d" => RowSpan::Day,
            "n" => RowSpan::Month,
            "y" => RowSpan::Year,
            other => return Err(format!("Unrecogznied span '{other}'")),
        };
        if let RowSpan::Hours(n) = row_span {
            if n > 1 && n % 2 != 0 {
                return Err("The multiplier must be 1 or an even value".into());
            }
        }
        let ms = rtsd_protocol::query::parse_duration(&interval).map_err(|e| e.message)?;
        let interval_secs = u32::try_from(ms / 1000).map_err(|_| format!("Interval is too big: {interval}"))?;
        if interval_secs == 0 {
            return Err("Milliseconds are not supported as the interval".into());
        }
        // OpenTSDB sizes months and years generously so that every row holds all its intervals.
        let span_secs: u64 = match row_span {
            RowSpan::Hours(n) => 3600 * u64::from(n.max(1)),
            RowSpan::Day => 86_400,
            RowSpan::Month => 86_400 * 32,
            RowSpan::Year => 86_400 * 366,
        };
        if u64::from(interval_secs) >= span_secs {
            return Err(format!("Interval [{interval_secs}] is too large for the span [{unit}]"));
        }
        let intervals = (span_secs / u64::from(interval_secs)) as u32;
        if intervals > 7774 {
            return Err(format!(
                "Too many intervals [{intervals}] in the span. Must be smaller than [7774] to fit in 14 bits"
            ));
        }
        if intervals < 12 {
            return Err(format!("Not enough intervals [{intervals}] for the span. Must be at least [12]"));
        }
        Ok(RollupInterval {
            table,
            preagg_table,
            interval,
            interval_secs,
            row_span,
            intervals,
            default: i.default_interval,
        })
    }
}

/// `tsd.rollups.*` and `rtsd.rollups.*` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupSettings {
    /// The rollup configuration, when `tsd.rollups.enable` is on.
    pub config: Option<RollupConfig>,
    pub agg_tag_key: String,
    pub raw_agg_tag_value: String,
    pub tag_raw: bool,
    pub block_derived: bool,
    /// Whether rtsd computes the rollups of raw points itself.
    pub auto: bool,
    /// How often the background task folds newly written raw rows into the rollup tables.
    pub flush_interval_ms: u64,
    /// Whether the series table's flushes fold the rows of past hours they see whole (see
    /// `store::rollup::owned`): a backfill then has its rollups as it goes.
    pub fold_on_flush: bool,
}

impl RollupSettings {
    /// Reads the properties; a configuration OpenTSDB would refuse at start-up is refused here too.
    pub fn from_properties(properties: &BTreeMap<String, String>) -> Result<RollupSettings, ConfigError> {
        let get = |k: &str| properties.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
        let boolean = |k: &str| matches!(get(k).to_ascii_uppercase().as_str(), "1" | "TRUE" | "YES");
        let invalid = |key: &str, why: String| ConfigError::Invalid { key: key.into(), value: get(key), why };
        let config = if boolean("tsd.rollups.enable") {
            let text = get("tsd.rollups.config");
            let json = if text.is_empty() {
                BUILTIN_CONFIG.to_string()
            } else if text.ends_with(".json") {
                std::fs::read_to_string(&text)
                    .map_err(|e| invalid("tsd.rollups.config", format!("Failed to open conf file: {text}: {e}")))?
            } else {
                text
            };
            Some(RollupConfig::parse(&json).map_err(|why| invalid("tsd.rollups.config", why))?)
        } else {
            None
        };
        let flush_interval_ms = get("rtsd.rollups.flush_interval_ms")
            .parse::<u64>()
            .map_err(|e| invalid("rtsd.rollups.flush_interval_ms", e.to_string()))?;
        Ok(RollupSettings {
            config,
            agg_tag_key: get("tsd.rollups.agg_tag_key"),
            raw_agg_tag_value: get("tsd.rollups.raw_agg_tag_value"),
            tag_raw: boolean("tsd.rollups.tag_raw"),
            block_derived: boolean("tsd.rollups.block_derived"),
            auto: boolean("rtsd.rollups.auto"),
            flush_interval_ms: flush_interval_ms.max(1),
            fold_on_flush: boolean("rtsd.rollups.fold_on_flush"),
        })
    }

    /// The intervals rtsd computes from raw points (none unless rollups are enabled and `rtsd.rollups.auto`).
    pub fn auto_intervals(&self) -> Vec<RollupInterval> {
        match &self.config {
            Some(c) if self.auto => c.intervals.iter().filter(|i| i.is_auto()).cloned().collect(),
            _ => Vec::new(),
        }
    }
}

/// Where a rollup point goes: the table and the cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupTarget {
    /// The column family (`<table>:t`).
    pub family: String,
    pub base_time: u32,
    pub qualifier: Vec<u8>,
}

/// Why a rollup point is refused: OpenTSDB's exception classes, which pick the telnet category and the HTTP
/// detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollupError {
    /// `IllegalArgumentException` (and the other put errors).
    Put(PutError),
    /// `NoSuchRollupForIntervalException`: telnet `No such rollup: ...`; over HTTP an unexpected exception.
    NoSuchRollup(String),
}

impl From<PutError> for RollupError {
    fn from(e: PutError) -> Self {
        RollupError::Put(e)
    }
}

/// The point's aggregate tag (`_aggregate`, `tsd.rollups.agg_tag_key`) as `addAggregatePointInternal` completes
/// it: added when missing (for a raw rollup only with `tsd.rollups.tag_raw`), upper-cased when it names the group
/// by aggregator, refused when it does not. Returns its value.
fn set_agg_tag(settings: &RollupSettings, point: &mut DataPoint<'_>, spec: &RollupSpec) -> Result<String, RollupError> {
    use std::borrow::Cow;
    let illegal = |m: String| RollupError::Put(PutError::IllegalArgument(m));
    let is_groupby = spec.groupby_aggregator.is_some();
    let groupby = spec.groupby_aggregator.as_deref().unwrap_or("");
    let key = settings.agg_tag_key.as_str();
    let existing = point.tags.iter().position(|(k, _)| k == key);
    Ok(match existing {
        None if !is_groupby => {
            if settings.tag_raw {
                point.tags.push((Cow::Owned(key.to_string()), Cow::Owned(settings.raw_agg_tag_value.clone())));
            }
            settings.raw_agg_tag_value.clone()
        }
        None => {
            let v = groupby.to_ascii_uppercase();
            point.tags.push((Cow::Owned(key.to_string()), Cow::Owned(v.clone())));
            v
        }
        Some(i) => {
            if !is_groupby || !point.tags[i].1.eq_ignore_ascii_case(groupby) {
                return Err(illegal(format!(
                    "Given tag value for {key} of {} did not match the group by aggregator of {} for {} {}",
                    point.tags[i].1,
                    spec.groupby_aggregator.as_deref().unwrap_or("null"),
                    point.metric,
                    point.tags_java()
                )));
            }
            let v = groupby.to_ascii_uppercase();
            point.tags[i].1 = Cow::Owned(v.clone());
            v
        }
    })
}

/// The checks of OpenTSDB's `TSDB.addAggregatePointInternal`, in its order and with its texts, up to the point
/// where UIDs are resolved: completes the tags (the `_aggregate` tag) and says where the point is stored. The
/// point's syntax (timestamp > 0, a number, finite) was checked by the protocol parser.
pub fn prepare(
    settings: &RollupSettings,
    point: &mut DataPoint<'_>,
    spec: &RollupSpec,
    rules: &rtsd_protocol::point::Rules,
) -> Result<RollupTarget, RollupError> {
    let illegal = |m: String| RollupError::Put(PutError::IllegalArgument(m));
    let interval = spec.interval.as_deref().filter(|i| !i.is_empty());
    let config = settings.config.as_ref();
    if interval.is_some() && config.is_none() {
        return Err(illegal("No rollup or aggregations were configured".into()));
    }
    let is_groupby = spec.groupby_aggregator.is_some();
    let groupby = spec.groupby_aggregator.as_deref().unwrap_or("");
    if is_groupby && groupby.is_empty() {
        return Err(illegal(format!(
            "Cannot write a group by data point without specifying the aggregation function. Metric={} tags={}",
            point.metric,
            point.tags_java()
        )));
    }
    let value_bytes = point.value.encode();
    if point.timestamp < 0 || point.timestamp > codec::MAX_SECONDS {
        return Err(illegal(format!(
            "{} timestamp={} when trying to add value={}/{} to metric={}, tags={}",
            if point.timestamp < 0 { "negative " } else { "bad" },
            point.timestamp,
            rtsd_protocol::javafmt::byte_array(&value_bytes),
            point.value.flags(),
            point.metric,
            point.tags_java()
        )));
    }
    // Without rollups OpenTSDB has no aggregate tag key: a pre-aggregate then gets a null tag name, which its
    // tag validation reports (kept, so the texts match).
    let Some(config) = config else {
        if is_groupby {
            if crate::query::Aggregator::from_name(&groupby.to_ascii_lowercase()).is_none() {
                return Err(illegal(format!(
                    "Invalid group by aggregator {groupby} with metric {} {}",
                    point.metric,
                    point.tags_java()
                )));
            }
            rtsd_protocol::point::validate_string(&"metric name", &point.metric, rules)?;
            return Err(illegal(format!("Invalid tag name with value [{}]: null", groupby.to_ascii_uppercase())));
        }
        return Err(illegal("No rollup or aggregations were configured".into()));
    };
    let agg_tag_value = set_agg_tag(settings, point, spec)?;
    let derived = |agg: &str| settings.block_derived && (agg == "AVG" || agg == "DEV");
    if is_groupby {
        if crate::query::Aggregator::from_name(&groupby.to_ascii_lowercase()).is_none() {
            return Err(illegal(format!(
                "Invalid group by aggregator {groupby} with metric {} {}",
                point.metric,
                point.tags_java()
            )));
        }
        if derived(&agg_tag_value) {
            return Err(illegal(format!(
                "Derived group by aggregations are not allowed {groupby} with metric {} {}",
                point.metric,
                point.tags_java()
            )));
        }
    }
    rtsd_protocol::point::check_for_write(point, rules)?;
    let Some(interval) = interval else {
        // A pre-aggregate without an interval: a raw-style cell in the default interval's pre-aggregate table.
        let base_time = codec::base_time(point.timestamp);
        let qualifier = codec::build_qualifier(point.timestamp, point.value.flags()).to_vec();
        let family = RollupInterval::family(&config.default_interval().preagg_table);
        return Ok(RollupTarget { family, base_time, qualifier });
    };
    let Some(rollup) = config.interval(interval) else {
        return Err(RollupError::NoSuchRollup(format!("No rollups configured for the interval: {interval}")));
    };
    if rollup.default && !is_groupby {
        // OpenTSDB would put a rollup cell into the raw data table here, where an aggregator ID of 1, 5 or 6 reads
        // as an annotation, append or histogram column. rtsd keeps the raw table raw (a deliberate difference).
        return Err(illegal(format!(
            "The default rollup interval {interval} is the raw data table; write its points with put"
        )));
    }
    let aggregator_id = config.aggregator_id(spec.aggregator.as_deref()).map_err(illegal)?;
    let temporal = spec.aggregator.as_deref().unwrap_or("").to_ascii_uppercase();
    if derived(&temporal) {
        return Err(illegal(format!(
            "Derived rollup aggregations are not allowed {temporal} with metric {} {}",
            point.metric,
            point.tags_java()
        )));
    }
    let base_time = rollup.base_time(point.timestamp);
    let qualifier = rollup.qualifier(point.timestamp, base_time, point.value.flags(), aggregator_id).to_vec();
    let table = if is_groupby { &rollup.preagg_table } else { &rollup.table };
    Ok(RollupTarget { family: RollupInterval::family(table), base_time, qualifier })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_config_is_valid_and_computes_three_intervals() {
        let c = RollupConfig::parse(BUILTIN_CONFIG).unwrap();
        let auto: Vec<&str> = c.intervals.iter().filter(|i| i.is_auto()).map(|i| i.interval.as_str()).collect();
        assert_eq!(auto, ["1m", "10m", "1h"]);
        assert_eq!(c.interval("1m").unwrap().intervals, 60);
        assert_eq!(c.interval("10m").unwrap().intervals, 144);
        assert_eq!(c.interval("1h").unwrap().intervals, 24);
        assert_eq!(c.default_interval().table, "tsdb");
        let best: Vec<&str> = c.best_matches(7_200_000).iter().map(|i| i.interval.as_str()).collect();
        assert_eq!(best, ["1h", "10m", "1m", "1s"]);
        assert!(c.best_matches(1500).is_empty());
    }

    #[test]
    fn qualifiers_and_base_times_follow_rollup_utils() {
        // spec: ingest §1.7; OpenTSDB RollupUtils: 1h in 1d rows, 1356998400 = 2013-01-01T00:00:00Z.
        let c = RollupConfig::parse(BUILTIN_CONFIG).unwrap();
        let h = c.interval("1h").unwrap();
        let ts = 1356998400 + 5 * 3600 + 59;
        assert_eq!(h.base_time(ts), 1356998400);
        // offset 5, flags 0 (1-byte integer): 0x0050, aggregator id first.
        assert_eq!(h.qualifier(ts, 1356998400, 0, 0), [0, 0x00, 0x50]);
        let m = c.interval("1m").unwrap();
        assert_eq!(m.base_time(ts), 1356998400 + 5 * 3600);
        assert_eq!(m.qualifier(1356998400 + 5 * 3600 + 59 * 60, 1356998400 + 5 * 3600, 0x0B, 1), [1, 0x03, 0xBB]);
        let month = RollupConfig::parse(
            r#"{"aggregationIds":{"sum":0},"intervals":[{"table":"t","preAggregationTable":"p","interval":"1d",
            "rowSpan":"1n","defaultInterval":true}]}"#,
        )
        .unwrap();
        // 2013-02-10 -> 2013-02-01T00:00:00Z
        assert_eq!(month.intervals[0].base_time(1360454400), 1359676800);
    }

    // spec: ingest §6; OpenTSDB 2.4 TSDB(): the config is inline JSON or a path ending in `.json`.
    #[test]
    fn settings_read_the_config_inline_or_from_a_json_file() {
        let props = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            DEFAULTS.iter().chain(pairs).map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let off = RollupSettings::from_properties(&props(&[])).unwrap();
        assert_eq!(off.config, None);
        assert!(off.auto_intervals().is_empty());
        let builtin = RollupSettings::from_properties(&props(&[("tsd.rollups.enable", "true")])).unwrap();
        assert_eq!(builtin.auto_intervals().len(), 3);
        assert_eq!((builtin.agg_tag_key.as_str(), builtin.raw_agg_tag_value.as_str()), ("_aggregate", "RAW"));
        let json = r#"{"aggregationIds":{"sum":0,"count":1,"min":2,"max":3},"intervals":[
            {"table":"tsdb","preAggregationTable":"tsdb-preagg","interval":"1m","rowSpan":"1h","defaultInterval":true},
            {"table":"tsdb-rollup-1h","preAggregationTable":"tsdb-rollup-preagg-1h","interval":"1h","rowSpan":"1d"}]}"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollups.json");
        std::fs::write(&path, json).unwrap();
        let path = path.display().to_string();
        let file =
            RollupSettings::from_properties(&props(&[("tsd.rollups.enable", "true"), ("tsd.rollups.config", &path)]));
        let inline =
            RollupSettings::from_properties(&props(&[("tsd.rollups.enable", "true"), ("tsd.rollups.config", json)]));
        assert_eq!(file.unwrap(), inline.unwrap());
        // OpenTSDB's documented example: the default 1m interval is the raw table, so rtsd computes only 1h.
        let auto =
            RollupSettings::from_properties(&props(&[("tsd.rollups.enable", "true"), ("tsd.rollups.config", json)]))
                .unwrap()
                .auto_intervals();
        assert_eq!(auto.iter().map(|i| i.interval.as_str()).collect::<Vec<_>>(), ["1h"]);
        let missing = format!("{}/nope.json", dir.path().display());
        let e = RollupSettings::from_properties(&props(&[
            ("tsd.rollups.enable", "true"),
            ("tsd.rollups.config", &missing),
        ]));
        assert!(e.unwrap_err().to_string().contains("Failed to open conf file"));
        let e = RollupSettings::from_properties(&props(&[("tsd.rollups.enable", "true"), ("tsd.rollups.config", "{")]));
        assert!(e.unwrap_err().to_string().starts_with("invalid value for tsd.rollups.config"));
    }

    #[test]
    fn bad_configs_are_refused_with_opentsdb_messages() {
        let e = |json: &str| RollupConfig::parse(json).unwrap_err();
        assert_eq!(e(r#"{"aggregationIds":{"sum":0}}"#), "Rollup config given but no intervals were found.");
        let one = r#"{"table":"a","preAggregationTable":"b","interval":"1h","rowSpan":"1d","defaultInterval":true}"#;
        assert_eq!(
            e(&format!(r#"{{"intervals":[{one}]}}"#)),
            "Rollup config given but no aggegation ID mappings found."
        );
        assert_eq!(
            e(&format!(r#"{{"aggregationIds":{{"sum":0}},"intervals":[{one},{one}]}}"#)),
            "Only one interval of each type can be configured: 1h"
        );
        assert_eq!(
            e(&format!(r#"{{"aggregationIds":{{"sum":200}},"intervals":[{one}]}}"#)),
            "ID for aggregator must be between 0 and 127: sum=200"
        );
        assert_eq!(
            e(&format!(r#"{{"aggregationIds":{{"nope":1}},"intervals":[{one}]}}"#)),
            "No such aggregator found for nope"
        );
        assert_eq!(
            e(
                r#"{"aggregationIds":{"sum":0},"intervals":[{"table":"a","preAggregationTable":"b","interval":"1m","rowSpan":"1h"}]}"#
            ),
            "None of the rollup intervals were marked as the \"default\"."
        );
        assert_eq!(
            e(
                r#"{"aggregationIds":{"sum":0},"intervals":[{"table":"a","preAggregationTable":"b","interval":"10m","rowSpan":"1h","defaultInterval":true}]}"#
            ),
            "Not enough intervals [6] for the span. Must be at least [12]"
        );
    }
}
