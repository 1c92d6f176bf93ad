//! `rtsd scan`: stored rows printed as `tsdb scan` prints them, and OpenTSDB's command-line query grammar that
//! `rtsd scan`, `rtsd query` and `rtsd fsck` share.
//!
//! Arguments follow `CliQuery.parseCommandLineQuery`: `START [END] [+plotparam ...] AGG [rate [counter[,MAX[,RESET]]]]
//! [downsample N FUNC] METRIC [TAG=VALUE ...] [AGG ... more queries]`. START and END are OpenTSDB dates (seconds,
//! milliseconds, `YYYY/MM/DD[-HH:MM[:SS]]`, `1h-ago`), truncated to seconds as the CLI does; N is milliseconds.
//! A tag value may be `*`, `a|b`, a wildcard like `web*` or `type(...)`: OpenTSDB's legacy tag filters.
//!
//! Output forms:
//! * default (`tsdb scan`): one line per row, `[row key bytes] metric base_time (date) {tags}`, then one indented
//!   line per cell with qualifier and value bytes, offset, `l`/`f`, the absolute time and its date; a compacted
//!   column lists its points under a `= N values:` line.
//! * `--import`: one line per point, `metric timestamp value tag=value ...` (timestamps in seconds for second
//!   cells, milliseconds for millisecond cells; tags in OpenTSDB's HashMap order), ready for `rtsd import`.
//! * `--delete`: import form, and every printed row is deleted (in batches, each atomic).
use std::io::Write;

use rtsd_protocol::codec::{self, Value};
use rtsd_protocol::javafmt;
use rtsd_protocol::point::{self, Tags, UidKind};
use rtsd_protocol::query::{is_aggregator, parse_time, Filter};

use crate::store::{Store, StoreError};

/// One query of a command line.
#[derive(Debug, Clone, PartialEq)]
pub struct CliSubQuery {
    pub aggregator: String,
    pub rate: bool,
    /// `counter[,max[,reset]]` after `rate`: (max, reset), `None` for a plain rate.
    pub counter: Option<(Option<i64>, Option<i64>)>,
    /// `downsample N FUNC`: (N in milliseconds, function).
    pub downsample: Option<(i64, String)>,
    pub metric: String,
    /// Tags as given, in order (`Tags.parse` rules: a repeated identical tag is ignored).
    pub tags: Vec<(String, String)>,
    /// A trailing argument with a space in it: Gnuplot options for this query's line.
    pub plot_options: Option<String>,
}

/// A parsed command line: the time range and one or more queries.
#[derive(Debug, Clone, PartialEq)]
pub struct CliQuery {
    /// Start in milliseconds, truncated to whole seconds as OpenTSDB's CLI does.
    pub start_ms: i64,
    /// End in milliseconds (whole seconds); `None`: now.
    pub end_ms: Option<i64>,
    /// `+key=value` Gnuplot parameters.
    pub plot_params: Vec<String>,
    pub queries: Vec<CliSubQuery>,
}

impl CliQuery {
    /// The end, or `now_ms` when none was given.
    pub fn end_or(&self, now_ms: i64) -> i64 {
        self.end_ms.unwrap_or(now_ms)
    }
}

/// Parses an OpenTSDB command-line query (see the module docs) as `CliQuery.parseCommandLineQuery` does, with
/// errors instead of Java's exceptions. `now_ms` anchors relative times.
pub fn parse_command_line(args: &[String], now_ms: i64) -> Result<CliQuery, String> {
    let Some(start) = args.first() else {
        return Err("Not enough arguments: expected START-DATE [END-DATE] AGG METRIC [TAG=VALUE ...]".into());
    };
    let start_ms = cli_time(start, now_ms)?;
    // An END is there when a fourth argument exists and the second looks like a date: it has `:`, `/` or `-`
    // or is a positive number (OpenTSDB's rule; anything else is the aggregator).
    let mut end_ms = None;
    if args.len() > 3 {
        let a = &args[1];
        if !a.starts_with('+')
            && (a.contains(':') || a.contains('/') || a.contains('-') || a.parse::<i64>().is_ok_and(|n| n > 0))
        {
            end_ms = Some(cli_time(a, now_ms)?);
        }
    }
    let mut i = if end_ms.is_some() { 2 } else { 1 };
    let mut plot_params = Vec::new();
    while i < args.len() && args[i].starts_with('+') {
        plot_params.push(args[i].clone());
        i += 1;
    }
    let mut queries = Vec::new();
    let need = |i: usize, what: &str| -> Result<&String, String> {
        args.get(i).ok_or_else(|| format!("Not enough arguments: missing {what}"))
    };
    while i < args.len() {
        let aggregator = args[i].clone();
        if !is_aggregator(&aggregator) {
            return Err(format!("No such aggregator: {aggregator}"));
        }
        i += 1;
        let mut rate = false;
        let mut counter = None;
        if need(i, "METRIC")? == "rate" {
            rate = true;
            i += 1;
            if need(i, "METRIC")?.starts_with("counter") {
                let parts: Vec<&str> = args[i].split(',').collect();
                let num = |s: Option<&&str>| -> Result<Option<i64>, String> {
                    match s.filter(|s| !s.is_empty()) {
                        None => Ok(None),
                        Some(s) => s.parse().map(Some).map_err(|_| format!("Invalid counter option: {}", args[i])),
                    }
                };
                counter = Some((num(parts.get(1))?, num(parts.get(2))?));
                i += 1;
            }
        }
        let mut downsample = None;
        if need(i, "METRIC")? == "downsample" {
            let n = need(i + 1, "the downsample interval")?;
            let interval: i64 = n.parse().map_err(|_| format!("Invalid downsample interval: {n} (milliseconds)"))?;
            if interval <= 0 {
                return Err(format!("Invalid downsample interval: {n} (milliseconds)"));
            }
            let function = need(i + 2, "the downsample function")?.clone();
            if !is_aggregator(&function) {
                return Err(format!("No such aggregator: {function}"));
            }
            downsample = Some((interval, function));
            i += 3;
        }
        let metric = need(i, "METRIC")?.clone();
        i += 1;
        let mut tags: Tags<'_> = Tags::new();
        while i < args.len() && args[i].get(1..).is_some_and(|r| !r.contains(' ') && r.contains('=')) {
            point::add_tag(&mut tags, args[i].as_str().into()).map_err(|e| e.message())?;
            i += 1;
        }
        let mut plot_options = None;
        if i < args.len() && args[i].get(1..).is_some_and(|r| r.contains(' ')) {
            plot_options = Some(args[i].clone());
            i += 1;
        }
        let tags = tags.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        queries.push(CliSubQuery { aggregator, rate, counter, downsample, metric, tags, plot_options });
    }
    if queries.is_empty() {
        return Err("Not enough arguments, need at least one query.".into());
    }
    Ok(CliQuery { start_ms, end_ms, plot_params, queries })
}

/// A command-line date in ms, whole seconds (OpenTSDB's CLI divides by 1000 before querying).
fn cli_time(s: &str, now_ms: i64) -> Result<i64, String> {
    let ms = parse_time(s, now_ms, None).map_err(|e| e.message)?;
    if ms < 0 {
        return Err(format!("Invalid date: {s}"));
    }
    Ok(ms / 1000 * 1000)
}

/// How `scan` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanFormat {
    /// `tsdb scan`'s default: rows and cells with their bytes.
    Raw,
    /// `tsdb scan --import`.
    Import,
}

/// What a scan did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanSummary {
    pub rows: u64,
    pub points: u64,
    pub deleted_rows: u64,
}

/// The tag filters of a query, resolved for row selection.
pub struct RowFilter {
    /// (tagk UID, filter on the value's name). A key without a UID matches nothing.
    filters: Vec<(Vec<u8>, Filter)>,
    impossible: bool,
}

impl RowFilter {
    pub fn new(store: &Store, tags: &[(String, String)]) -> Result<RowFilter, ScanError> {
        let mut filters = Vec::new();
        let mut impossible = false;
        for (k, v) in tags {
            let filter = Filter::from_legacy(k, v, true).map_err(ScanError::Usage)?;
            match store.uids().get(UidKind::TagKey, k)? {
                Some(uid) => filters.push((uid.as_bytes().to_vec(), filter)),
                None => impossible = true,
            }
        }
        Ok(RowFilter { filters, impossible })
    }

    /// Whether a row's (tagk UID, tagv UID) pairs pass every filter.
    pub fn matches(&self, names: &mut Names<'_>, tags: &[(&[u8], &[u8])]) -> Result<bool, StoreError> {
        if self.impossible {
            return Ok(false);
        }
        for (k, f) in &self.filters {
            let value = match tags.iter().find(|(tk, _)| *tk == k.as_slice()) {
                Some((_, v)) => Some(names.name(UidKind::TagValue, v)?),
                None => None,
            };
            if !f.matches_series(value.as_deref()) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// UID -> name with a per-run cache; a UID without a name prints as its hex.
pub struct Names<'a> {
    store: &'a Store,
    cache: std::collections::HashMap<(UidKind, Vec<u8>), Option<String>>,
}

impl<'a> Names<'a> {
    pub fn new(store: &'a Store) -> Names<'a> {
        Names { store, cache: Default::default() }
    }

    /// The name of a UID, if it has one.
    pub fn lookup(&mut self, kind: UidKind, uid: &[u8]) -> Result<Option<String>, StoreError> {
        if let Some(n) = self.cache.get(&(kind, uid.to_vec())) {
            return Ok(n.clone());
        }
        let n = self.store.uids().name_of(kind, uid)?;
        self.cache.insert((kind, uid.to_vec()), n.clone());
        Ok(n)
    }

    /// The name, or the UID in hex when it has none.
    pub fn name(&mut self, kind: UidKind, uid: &[u8]) -> Result<String, StoreError> {
        Ok(self.lookup(kind, uid)?.unwrap_or_else(|| codec::uid_to_string(uid)))
    }
}

/// Prints every row the queries select, in `format`; with `delete`, deletes the rows printed. Returns counts.
pub fn scan(
    store: &Store,
    query: &CliQuery,
    now_ms: i64,
    format: ScanFormat,
    delete: bool,
    out: &mut impl Write,
) -> Result<ScanSummary, ScanError> {
    let uids = store.uids();
    let mut names = Names::new(store);
    let mut summary = ScanSummary::default();
    let end_ms = query.end_or(now_ms);
    let start_hour = codec::base_time(query.start_ms.max(0));
    let end_hour = codec::base_time(end_ms.clamp(0, codec::MAX_SECONDS * 1000));
    let mut buf = String::new();
    let mut to_delete: Vec<Vec<u8>> = Vec::new();
    for sub in &query.queries {
        let Some(metric) = uids.get(UidKind::Metric, &sub.metric)? else {
            return Err(ScanError::Usage(format!("No such name for 'metrics': '{}'", sub.metric)));
        };
        let filter = RowFilter::new(store, &sub.tags)?;
        let mut write_error = None;
        store.for_each_row(metric.as_bytes(), start_hour, end_hour, |row| {
            if !filter.matches(&mut names, &row.tags)? {
                return Ok(true);
            }
            buf.clear();
            summary.points += match format {
                ScanFormat::Import => {
                    import_row(&mut names, &sub.metric, &row.tags, row.base_time, row.value, &mut buf)?
                }
                ScanFormat::Raw => raw_row(&mut names, &sub.metric, &row, &mut buf)?,
            };
            summary.rows += 1;
            if let Err(e) = out.write_all(buf.as_bytes()) {
                write_error = Some(e);
                return Ok(false);
            }
            if delete {
                to_delete.push(row.key.to_vec());
            }
            Ok(true)
        })?;
        if let Some(e) = write_error {
            return Err(ScanError::Io(e));
        }
        // Deleting after the scan of each query keeps the iterator's view simple; rows go in atomic batches.
        for chunk in to_delete.chunks(1024) {
            store.delete_rows(chunk)?;
            summary.deleted_rows += chunk.len() as u64;
        }
        to_delete.clear();
    }
    Ok(summary)
}

/// Appends the import lines of one row's points; returns how many.
pub fn import_row(
    names: &mut Names<'_>,
    metric: &str,
    tags: &[(&[u8], &[u8])],
    base_time: u32,
    value: &[u8],
    buf: &mut String,
) -> Result<u64, StoreError> {
    let tag_text = import_tags(names, tags)?;
    let points = codec::row_points(base_time, value).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    for p in &points {
        let ts = if p.qualifier.len() == 4 { p.timestamp_ms } else { p.timestamp_ms / 1000 };
        buf.push_str(metric);
        buf.push(' ');
        buf.push_str(&ts.to_string());
        buf.push(' ');
        buf.push_str(&import_value(p.value));
        buf.push_str(&tag_text);
        buf.push('\n');
    }
    Ok(points.len() as u64)
}

/// ` k=v k2=v2` in OpenTSDB's HashMap order.
fn import_tags(names: &mut Names<'_>, tags: &[(&[u8], &[u8])]) -> Result<String, StoreError> {
    let mut pairs = Vec::with_capacity(tags.len());
    for (k, v) in tags {
        pairs.push((names.name(UidKind::TagKey, k)?, names.name(UidKind::TagValue, v)?));
    }
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let mut text = String::new();
    for i in javafmt::hashmap_order(&keys) {
        text.push(' ');
        text.push_str(&pairs[i].0);
        text.push('=');
        text.push_str(&pairs[i].1);
    }
    Ok(text)
}

/// `{k=v, k2=v2}` as OpenTSDB prints a tag map.
pub fn tag_map(names: &mut Names<'_>, tags: &[(&[u8], &[u8])]) -> Result<String, StoreError> {
    let mut pairs = Vec::with_capacity(tags.len());
    for (k, v) in tags {
        pairs.push((names.name(UidKind::TagKey, k)?, names.name(UidKind::TagValue, v)?));
    }
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Ok(javafmt::format_map(&refs))
}

/// One row in `tsdb scan`'s default form; returns the number of data points listed.
fn raw_row(
    names: &mut Names<'_>,
    metric: &str,
    row: &crate::store::RowRef<'_>,
    buf: &mut String,
) -> Result<u64, StoreError> {
    use std::fmt::Write as _;
    let base = row.base_time as i64;
    let _ = writeln!(
        buf,
        "{} {metric} {base} ({}) {}",
        javafmt::byte_array(row.key),
        java_date(base * 1000),
        tag_map(names, &row.tags)?
    );
    let mut points = 0u64;
    // OpenTSDB's cells: a packed column shows as the compacted column it stands for. One that cannot be unpacked
    // is listed as it is stored (an unparseable column).
    let cells = row.cells().unwrap_or(std::borrow::Cow::Borrowed(row.value));
    for column in codec::columns(&cells) {
        let column = match column {
            Ok(c) => c,
            Err(e) => {
                let _ = writeln!(buf, "  [corrupt row encoding: {e}]");
                break;
            }
        };
        let (q, v) = (column.qualifier, column.value);
        buf.push_str("  ");
        if q.len() % 2 == 1 && q.first() != Some(&codec::APPEND_PREFIX) {
            if q.first() == Some(&rtsd_protocol::annotation::PREFIX) {
                // An annotation: qualifier, value bytes, offset, the JSON, time and date, with the offset and
                // time computed as 2.4.1's DumpSeries.appendAnnotation does: the offset read from the qualifier's
                // second byte on (`getOffsetFromQualifier(q, 1) / 1000`), the time (in ms) from its first byte
                // (`getTimestampFromQualifier`), so neither is the annotation's real time; the bytes are.
                let offset = dump_offset_ms(q, 1) / 1000;
                let ts = base * 1000 + dump_offset_ms(q, 0);
                let date = if ts as u64 & 0xFFFF_FFFF_0000_0000 != 0 { java_date(ts) } else { java_date(ts * 1000) };
                let _ = write!(
                    buf,
                    "{}\t{}\t{offset}\t{}\t{ts}\t({date})",
                    javafmt::byte_array(q),
                    javafmt::byte_array(v),
                    v.iter().map(|&b| b as char).collect::<String>(),
                );
            } else {
                let _ = write!(buf, "{}\t[Not a data point]", javafmt::byte_array(v));
            }
            buf.push('\n');
            continue;
        }
        let single = q.len() == 2 || (q.len() == 4 && codec::is_ms_qualifier(q[0]));
        if single {
            match codec::row_points(row.base_time, &single_column(q, v)) {
                Ok(p) if p.len() == 1 => {
                    raw_cell(buf, q, v, base, &p[0]);
                    points += 1;
                }
                _ => {
                    let _ =
                        write!(buf, "{}\t{}\t[unparseable data point]", javafmt::byte_array(q), javafmt::byte_array(v));
                }
            }
            buf.push('\n');
            continue;
        }
        let cells = if q.len() == 3 { codec::split_append(v) } else { codec::split_compacted(q, v) };
        match cells {
            Ok(cells) => {
                let _ = write!(buf, "{}\t{} = {} values:", javafmt::byte_array(q), javafmt::byte_array(v), cells.len());
                for (cq, cv) in &cells {
                    buf.push_str("\n    ");
                    match codec::row_points(row.base_time, &single_column(cq, cv)) {
                        Ok(p) if p.len() == 1 => {
                            raw_cell(buf, cq, cv, base, &p[0]);
                            points += 1;
                        }
                        _ => {
                            let _ = write!(
                                buf,
                                "{}\t{}\t[unparseable data point]",
                                javafmt::byte_array(cq),
                                javafmt::byte_array(cv)
                            );
                        }
                    }
                }
            }
            Err(e) => {
                let _ = write!(buf, "{}\t{}\t[{e}]", javafmt::byte_array(q), javafmt::byte_array(v));
            }
        }
        buf.push('\n');
    }
    Ok(points)
}

/// OpenTSDB's `Internal.getOffsetFromQualifier(q, at)` in ms: a 4-byte millisecond offset when the byte at `at`
/// has the ms marker, else a 2-byte second offset (flags shifted out) times 1000. 0 where Java would throw.
fn dump_offset_ms(q: &[u8], at: usize) -> i64 {
    match q.get(at..) {
        Some([b0, b1, b2, b3, ..]) if b0 & 0xF0 == 0xF0 => {
            ((u32::from_be_bytes([*b0, *b1, *b2, *b3]) & 0x0FFF_FFC0) >> 6) as i64
        }
        Some([b0, b1, ..]) if b0 & 0xF0 != 0xF0 => ((u16::from_be_bytes([*b0, *b1]) >> 4) as i64) * 1000,
        _ => 0,
    }
}

fn single_column(q: &[u8], v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(q.len() + v.len() + 2);
    codec::push_column(&mut out, q, v);
    out
}

/// `[qualifier]\t[value]\toffset\tl|f\ttimestamp\t(date)`: the offset in seconds for a second cell, in ms for a
/// millisecond one, and the timestamp likewise.
fn raw_cell(buf: &mut String, q: &[u8], v: &[u8], base: i64, p: &codec::RowPoint) {
    use std::fmt::Write as _;
    let ms = q.len() == 4;
    let offset_ms = p.timestamp_ms - base * 1000;
    let (offset, ts) = if ms { (offset_ms, p.timestamp_ms) } else { (offset_ms / 1000, p.timestamp_ms / 1000) };
    let kind = if matches!(p.value, Value::Int(_)) { 'l' } else { 'f' };
    let _ = write!(
        buf,
        "{}\t{}\t{offset}\t{kind}\t{ts}\t({})",
        javafmt::byte_array(q),
        javafmt::byte_array(v),
        java_date(p.timestamp_ms)
    );
}

/// Java's `Date.toString()` in UTC: `Tue Jan 01 00:00:00 UTC 2013`.
pub fn java_date(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.to_zoned(jiff::tz::TimeZone::UTC).strftime("%a %b %d %H:%M:%S UTC %Y").to_string(),
        Err(_) => ms.to_string(),
    }
}

/// A value as `Cell.parseValue()` prints: a Java long, or a Java double (floats widened to double first).
pub fn import_value(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => javafmt::double_to_string(f as f64),
        Value::Double(d) => javafmt::double_to_string(d),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("write failed: {0}")]
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_opentsdb_command_line_queries() {
        let q = parse_command_line(&args("1356998400 1357002000 sum sys.cpu.user host=web01 dc=*"), 0).unwrap();
        assert_eq!(q.start_ms, 1356998400000);
        assert_eq!(q.end_ms, Some(1357002000000));
        assert_eq!(q.queries.len(), 1);
        let s = &q.queries[0];
        assert_eq!((s.aggregator.as_str(), s.metric.as_str()), ("sum", "sys.cpu.user"));
        assert_eq!(s.tags, vec![("host".to_string(), "web01".to_string()), ("dc".to_string(), "*".to_string())]);

        let q =
            parse_command_line(&args("2013/01/01-00:00:00 sum rate downsample 60000 avg m host=a|b"), 1357002000000)
                .unwrap();
        assert_eq!(q.start_ms, 1356998400000);
        assert_eq!(q.end_ms, None);
        let s = &q.queries[0];
        assert!(s.rate && s.counter.is_none());
        assert_eq!(s.downsample, Some((60000, "avg".to_string())));
        assert_eq!(s.tags, vec![("host".to_string(), "a|b".to_string())]);
    }

    #[test]
    fn parses_counters_several_queries_and_relative_times() {
        let now = 1357002000000;
        let q = parse_command_line(&args("1h-ago sum rate counter,65535,100 a x=y max b"), now).unwrap();
        assert_eq!(q.start_ms, now - 3600000);
        assert_eq!(q.end_ms, None);
        assert_eq!(q.queries.len(), 2);
        assert_eq!(q.queries[0].counter, Some((Some(65535), Some(100))));
        assert_eq!(q.queries[1].aggregator, "max");
        assert_eq!(q.queries[1].metric, "b");
        // A second argument that is the aggregator is not an END, even with four arguments.
        let q = parse_command_line(&args("1356998400 sum m a=b"), now).unwrap();
        assert_eq!(q.end_ms, None);
        // Three arguments: never an END, so `1357002000 m` would be an unknown aggregator.
        assert_eq!(
            parse_command_line(&args("1356998400 1357002000 m"), now).unwrap_err(),
            "No such aggregator: 1357002000"
        );
        // Milliseconds are truncated to seconds.
        assert_eq!(parse_command_line(&args("1356998400123 sum m"), now).unwrap().start_ms, 1356998400000);
        assert_eq!(
            parse_command_line(&args("1356998400 1357002000 sum rate counter,x m"), now).unwrap_err(),
            "Invalid counter option: counter,x"
        );
    }

    #[test]
    fn reports_bad_command_lines() {
        assert!(parse_command_line(&args("1356998400 sum"), 0).unwrap_err().contains("missing METRIC"));
        assert!(parse_command_line(&args("soon sum m"), 0).is_err());
        assert_eq!(parse_command_line(&args("1356998400 foo m"), 0).unwrap_err(), "No such aggregator: foo");
        assert_eq!(
            parse_command_line(&args("1356998400"), 0).unwrap_err(),
            "Not enough arguments, need at least one query."
        );
        assert_eq!(
            parse_command_line(&args("1356998400 sum m a=b a=c"), 0).unwrap_err(),
            "duplicate tag: a=c, tags={a=b}"
        );
        // A word without `=` after the tags starts the next query: here an unknown aggregator.
        assert_eq!(
            parse_command_line(&args("1356998400 sum m hostweb01"), 0).unwrap_err(),
            "No such aggregator: hostweb01"
        );
    }

    #[test]
    fn java_dates() {
        assert_eq!(java_date(1356998400000), "Tue Jan 01 00:00:00 UTC 2013");
        assert_eq!(java_date(1357001999999), "Tue Jan 01 00:59:59 UTC 2013");
    }
}
