//! `rtsd import FILE...`: OpenTSDB's text import (`tsdb import`). Each line is a telnet `put` line without the
//! `put` word, `metric timestamp value tag=value ...`, parsed and validated by the very code the telnet port uses
//! ([`rtsd_protocol::telnet::parse_put`]), so a line is accepted here exactly when `put <line>` would be, and its
//! error is the telnet error text, prefixed with `FILE:LINE:`. Files ending in `.gz` are inflated; `-` is stdin.
//!
//! Into a store, a reader thread cuts the input into blocks of whole lines, parser threads (one per core) parse
//! them and resolve their series, and the calling thread applies the parsed blocks strictly in input order to a
//! bulk load ([`crate::store::bulk`]): points are grouped by row in memory, and each row is written once, whole
//! and compacted as the daemon's merges would leave it, into table files RocksDB ingests. A daemon holding the
//! directory gets the points through its `/api/put` instead.
//!
//! Like OpenTSDB's importer, the first bad line stops the import (the points before it stay written) unless
//! `--skip-errors` is given, in which case every bad line is reported and skipped. Re-running an import is
//! always safe: a point is a cell at (series, time), and writing it again overwrites it with the same value.
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use rtsd_protocol::codec::Value;
use rtsd_protocol::point::{DataPoint, Rules};
use rtsd_protocol::telnet::{self, Words};

use crate::store::bulk::BulkLoad;
use crate::store::{AddError, SeriesKey, Store};

/// Bytes of points held in memory before the rows the series have left are written (see
/// [`Store::bulk_write_left`]): the larger, the fewer rows are written in two pieces, which then cost a merge.
/// An hour of 100 k series every 10 s is ~220 MB of rows.
const BATCH_BYTES: usize = 256 << 20;
/// Points per `/api/put` request when importing through a daemon.
const HTTP_BATCH_POINTS: usize = 5_000;

/// How an import treats bad lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Report and skip bad lines instead of stopping at the first one (`--skip-errors`).
    pub skip_errors: bool,
}

/// Where points go.
pub enum Sink<'a> {
    /// Straight into an open store.
    Store(&'a Store),
    /// Through a running daemon's `/api/put?details`.
    Daemon(SocketAddr),
}

/// What one import run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub points: u64,
    pub bad_lines: u64,
    pub files: u64,
    /// Set when the import stopped at a bad line: `FILE:LINE`.
    pub stopped_at: Option<String>,
}

/// Why an import could not go on (bad lines are not errors; they are reported and counted).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{0}")]
    Store(String),
    #[error("the daemon at {addr} refused the points: {message}")]
    Daemon { addr: SocketAddr, message: String },
}

/// Imports every file in order. Bad lines are reported on `errors` as `FILE:LINE: message`; progress and
/// per-file timings go to `bar` and `log`.
pub fn import_files(
    sink: &Sink<'_>,
    paths: &[String],
    rules: &Rules,
    options: ImportOptions,
    errors: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<ImportSummary, ImportError> {
    let total_bytes: u64 =
        paths.iter().filter(|p| p.as_str() != "-").filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let bar = super::progress(total_bytes, "bytes");
    let started = Instant::now();
    let mut summary = ImportSummary::default();
    let mut load = match sink {
        Sink::Store(store) => Some(store.bulk_load().map_err(|e| ImportError::Store(e.to_string()))?),
        Sink::Daemon(_) => None,
    };
    let result = import_paths(sink, paths, rules, options, &mut summary, load.as_mut(), errors, log, &bar);
    if let (Sink::Store(store), Some(load)) = (sink, load.as_mut()) {
        // Whatever stopped the import, what was read before it is written: a re-run then has less to redo. The
        // write-ahead log is synced too (UIDs and any other logged write).
        let written = store.bulk_write(load).and_then(|_| store.sync_wal());
        result?;
        written.map_err(|e| ImportError::Store(e.to_string()))?;
    } else {
        result?;
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let _ = writeln!(
        log,
        "Total: imported {} data points in {secs:.3}s ({:.1} points/s){}",
        summary.points,
        summary.points as f64 / secs,
        match summary.bad_lines {
            0 => String::new(),
            n => format!(", {n} bad lines skipped"),
        }
    );
    Ok(summary)
}

/// [`import_files`] up to the final write.
#[allow(clippy::too_many_arguments)]
fn import_paths(
    sink: &Sink<'_>,
    paths: &[String],
    rules: &Rules,
    options: ImportOptions,
    summary: &mut ImportSummary,
    mut load: Option<&mut BulkLoad>,
    errors: &mut dyn Write,
    log: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<(), ImportError> {
    for path in paths {
        let file_started = Instant::now();
        let before = summary.points;
        let bad_before = summary.bad_lines;
        let reader = open(path, bar)?;
        match (sink, load.as_deref_mut()) {
            (Sink::Store(store), Some(load)) => {
                import_store(reader, path, store, load, rules, options, summary, errors, bar)?
            }
            (Sink::Store(_), None) => unreachable!("a store import has a bulk load"),
            (Sink::Daemon(_), _) => {
                let mut writer = Writer::new(sink, options.skip_errors);
                let reader = Box::new(BufReader::with_capacity(1 << 20, reader));
                let result = import_reader(reader, path, &mut writer, rules, options, summary, errors, bar);
                // Whatever happened, what was read before it is sent: a re-run then has less to redo.
                let flushed = writer.flush(summary, errors, path);
                result.and(flushed)?
            }
        }
        summary.files += 1;
        let ms = file_started.elapsed().as_millis().max(1);
        let points = summary.points - before;
        let _ = writeln!(
            log,
            "Processed {path} in {ms} ms, {points} data points ({:.1} points/s){}",
            points as f64 * 1000.0 / ms as f64,
            match summary.bad_lines - bad_before {
                0 => String::new(),
                n => format!(", {n} bad lines skipped"),
            }
        );
        if summary.stopped_at.is_some() {
            break;
        }
    }
    Ok(())
}

/// Opens a path for reading: `-` is stdin, `*.gz` is inflated (multi-member gzip too). Not buffered: the store
/// path reads straight into its blocks; the daemon path adds a `BufReader`.
fn open(path: &str, bar: &ProgressBar) -> Result<Box<dyn Read + Send>, ImportError> {
    if path == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    let file = std::fs::File::open(path).map_err(|source| ImportError::Read { path: path.to_string(), source })?;
    let counted = bar.wrap_read(file);
    Ok(if Path::new(path).extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, counted)))
    } else {
        Box::new(counted)
    })
}

#[allow(clippy::too_many_arguments)]
fn import_reader(
    mut reader: Box<dyn BufRead + Send>,
    path: &str,
    writer: &mut Writer<'_>,
    rules: &Rules,
    options: ImportOptions,
    summary: &mut ImportSummary,
    errors: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<(), ImportError> {
    let mut line = Vec::with_capacity(256);
    let mut lineno = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| ImportError::Read { path: path.to_string(), source })?;
        if n == 0 {
            return Ok(());
        }
        lineno += 1;
        // Java's readLine: a line ends at \n, \r\n or (not here: never seen in practice) a lone \r.
        let mut text: &[u8] = &line;
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        if let Some(t) = text.strip_suffix(b"\r") {
            text = t;
        }
        if text.is_empty() {
            continue;
        }
        let mut words: Words<'_> = Words::new();
        words.push(b"put");
        words.extend(telnet::split_words(text));
        let outcome = match telnet::parse_put(&words, rules) {
            Ok(point) => {
                writer.add(&point, text, lineno);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(()) => {}
            Err(message) => {
                let _ = bar.suspend(|| writeln!(errors, "{path}:{lineno}: {message}"));
                summary.bad_lines += 1;
                if !options.skip_errors {
                    summary.stopped_at = Some(format!("{path}:{lineno}"));
                    return Ok(());
                }
            }
        }
        if writer.full() {
            writer.flush(summary, errors, path)?;
            if summary.stopped_at.is_some() {
                return Ok(());
            }
        }
        if lineno.is_multiple_of(65536) {
            bar.set_message(format!("{} points", summary.points + writer.pending()));
        }
    }
}

/// Collects points and posts them in batches to a daemon's `/api/put` (the store path is [`import_store`]).
struct Writer<'a> {
    sink: &'a Sink<'a>,
    /// JSON objects of the pending points and the line each came from.
    json: Vec<(u64, String)>,
    /// A refused point is only known once its batch is answered: without `--skip-errors` the import stops
    /// after that batch.
    skip_errors: bool,
}

/// Series remembered at most per parser; past this, new series are resolved every time (a file with more
/// series than this is rare).
const MAX_SERIES: usize = 1 << 22;

impl<'a> Writer<'a> {
    fn new(sink: &'a Sink<'a>, skip_errors: bool) -> Writer<'a> {
        Writer { sink, json: Vec::new(), skip_errors }
    }

    fn pending(&self) -> u64 {
        self.json.len() as u64
    }

    fn full(&self) -> bool {
        self.json.len() >= HTTP_BATCH_POINTS
    }

    fn add(&mut self, point: &DataPoint<'_>, line: &[u8], lineno: u64) {
        self.json.push((lineno, point_json(point, line)));
    }

    fn flush(&mut self, summary: &mut ImportSummary, errors: &mut dyn Write, path: &str) -> Result<(), ImportError> {
        let Sink::Daemon(addr) = self.sink else { return Ok(()) };
        if self.json.is_empty() {
            return Ok(());
        }
        let sent = std::mem::take(&mut self.json);
        let failures = post_points(*addr, &sent)?;
        summary.points += (sent.len() - failures.len()) as u64;
        for (lineno, message) in failures {
            let _ = writeln!(errors, "{path}:{lineno}: {message}");
            summary.bad_lines += 1;
            if summary.stopped_at.is_none() && !self.skip_errors {
                summary.stopped_at = Some(format!("{path}:{lineno}"));
            }
        }
        Ok(())
    }
}

/// One `/api/put` object; the value is sent as the text of the line, which `/api/put` parses as telnet does.
fn point_json(point: &DataPoint<'_>, line: &[u8]) -> String {
    use rtsd_protocol::http_json::json_string;
    let words = telnet::split_words(line);
    let value = words.get(2).map(|w| telnet::latin1(w)).unwrap_or_default();
    let mut o = String::with_capacity(128);
    o.push_str("{\"metric\":");
    o.push_str(&json_string(&point.metric));
    o.push_str(",\"timestamp\":");
    o.push_str(&point.timestamp.to_string());
    o.push_str(",\"value\":");
    o.push_str(&json_string(&value));
    o.push_str(",\"tags\":{");
    for (i, (k, v)) in point.tags.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&json_string(k));
        o.push(':');
        o.push_str(&json_string(v));
    }
    o.push_str("}}");
    o
}

/// POSTs a batch to `/api/put?details` and returns the (line, error) of every point the daemon refused.
fn post_points(addr: SocketAddr, points: &[(u64, String)]) -> Result<Vec<(u64, String)>, ImportError> {
    let fail = |message: String| ImportError::Daemon { addr, message };
    let mut body = String::with_capacity(points.iter().map(|p| p.1.len() + 1).sum::<usize>() + 2);
    body.push('[');
    for (i, (_, json)) in points.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(json);
    }
    body.push(']');
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| fail(e.to_string()))?;
    stream.set_read_timeout(Some(Duration::from_secs(300))).map_err(|e| fail(e.to_string()))?;
    let head = format!(
        "POST /api/put?details HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body.as_bytes()))
        .map_err(|e| fail(e.to_string()))?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let parsed: serde_json::Value = serde_json::from_str(body)
        .map_err(|_| fail(format!("HTTP {status}: {}", body.chars().take(300).collect::<String>())))?;
    if status != 200 && status != 400 {
        return Err(fail(format!("HTTP {status}: {body}")));
    }
    // Match each reported datapoint to the first unclaimed line with the same metric and timestamp.
    let mut claimed = vec![false; points.len()];
    let mut out = Vec::new();
    for e in parsed.get("errors").and_then(|v| v.as_array()).into_iter().flatten() {
        let message = e.get("error").and_then(|v| v.as_str()).unwrap_or("refused").to_string();
        let dp = e.get("datapoint");
        let metric = dp.and_then(|d| d.get("metric")).and_then(|v| v.as_str()).unwrap_or("");
        let ts = dp.and_then(|d| d.get("timestamp")).and_then(|v| v.as_i64()).unwrap_or(0);
        let needle = format!("{{\"metric\":{},\"timestamp\":{ts},", rtsd_protocol::http_json::json_string(metric));
        let at = (0..points.len()).find(|&i| !claimed[i] && points[i].1.starts_with(&needle));
        let lineno = match at {
            Some(i) => {
                claimed[i] = true;
                points[i].0
            }
            None => 0,
        };
        out.push((lineno, message));
    }
    let failed = parsed.get("failed").and_then(|v| v.as_u64()).unwrap_or(out.len() as u64) as usize;
    while out.len() < failed {
        out.push((0, "refused by the daemon".into()));
    }
    Ok(out)
}

/// The daemon to import through when the directory is locked: the configured bind address (loopback when it
/// is the wildcard) and port.
pub fn daemon_addr(config: &crate::config::Config) -> Option<SocketAddr> {
    let host = if config.bind.is_unspecified() { "127.0.0.1".to_string() } else { config.bind.to_string() };
    (host.as_str(), config.port).to_socket_addrs().ok()?.next()
}

/// `rtsd import`: opens the store (or finds the daemon that holds it), imports, and prints the summary.
/// Returns the process exit code: 0 when every line was imported (or skipped with `--skip-errors`), 1 when the
/// import stopped at a bad line.
pub fn run(config: &crate::config::Config, paths: &[String], options: ImportOptions) -> Result<u8, String> {
    // Not `stderr().lock()` for the whole import: a log line from another thread (a parser's UID assignment, a
    // store warning) would then wait for that lock forever.
    let mut errors = std::io::stderr();
    let mut log = std::io::stderr();
    let summary = match super::open_writable(config, "") {
        Ok(store) => import_files(&Sink::Store(&store), paths, &config.rules, options, &mut errors, &mut log),
        Err(super::OpenError::Locked { dir, .. }) => {
            let addr = daemon_addr(config).ok_or("cannot resolve the daemon's address")?;
            let _ = writeln!(log, "data directory {dir} is in use by a running rtsd: importing through it at {addr}");
            import_files(&Sink::Daemon(addr), paths, &config.rules, options, &mut errors, &mut log)
        }
        Err(e) => return Err(e.to_string()),
    }
    .map_err(|e| e.to_string())?;
    if let Some(at) = summary.stopped_at {
        let _ = writeln!(
            log,
            "import stopped at the bad line {at}; the {} data points before it are written, so fix the line and \
             run the same import again (nothing is imported twice), or pass --skip-errors",
            summary.points
        );
        return Ok(1);
    }
    Ok(0)
}

// ---------------------------------------------------------------------------------------------------------------
// The store path: a reader thread cuts the input into blocks of whole lines, parser threads turn blocks into
// (series, timestamp, value) records, and this thread applies the parsed blocks strictly in input order, so a
// later line still wins over an earlier one for the same cell, errors are reported in line order, and "stop at
// the first bad line" means exactly the lines before it are written.

/// How many points ahead the applying thread fetches a series' state, and its row's ends.
const PREFETCH_SERIES: usize = 32;
const PREFETCH_ROW: usize = 8;

/// Bytes per block handed to a parser.
const BLOCK_BYTES: usize = 1 << 20;

/// One parsed block.
struct Parsed {
    /// Lines in the block (all of them, unless `stopped`).
    lines: u64,
    /// Series this parser numbered for the first time in this block (numbers are per parser).
    new_series: Vec<SeriesKey>,
    points: Vec<(u32, i64, Value)>,
    /// (line within the block, 1-based; message).
    errors: Vec<(u64, String)>,
    /// The parser stopped at its first bad line (no `--skip-errors`): nothing after it is in `points`.
    stopped: bool,
    /// A storage failure while resolving UIDs: the import cannot go on.
    fatal: Option<String>,
}

/// What one parser thread remembers: its series by their words. A line names its series by a metric word and
/// its tag words as written; both are numbered separately (few distinct of each, so those maps stay in cache),
/// and each tag-words number keeps its series as a short list sorted by metric number. Lines sharing their tags
/// come together in every file we know (a host's metrics in one round, or a whole series in an export sorted by
/// series), so that list is in cache when the next line looks: one probe of a large map per line, which missed
/// the cache on nearly every line, is what this replaces (`perf`: two thirds of the parsers' time).
struct Parser<'a> {
    store: &'a Store,
    rules: &'a Rules,
    skip_errors: bool,
    metrics: Words2Id,
    tags: Words2Id,
    /// Per tag-words number: (metric number, the series' number in this parser), sorted by metric number.
    series: Vec<Vec<(u32, u32)>>,
    /// Where [`Parser::known`] found the last line's series: (tag-words number, index in its list).
    last: (u32, usize),
    /// Series remembered (at most [`MAX_SERIES`]).
    remembered: usize,
    /// By metric-word number: a series of that metric; by tag-words number: a series with those tags.
    metric_keys: Vec<SeriesKey>,
    tag_keys: Vec<SeriesKey>,
    numbered: u32,
}

/// Numbers for the distinct words of one kind, with the last one looked up remembered.
struct Words2Id {
    ids: HashMap<Vec<u8>, u32, FastHash>,
    /// The words of each number.
    words: Vec<Vec<u8>>,
    last: Vec<u8>,
    last_id: Option<u32>,
}

impl Words2Id {
    fn new() -> Words2Id {
        Words2Id { ids: HashMap::with_hasher(FastHash), words: Vec::new(), last: Vec::new(), last_id: None }
    }

    fn get(&mut self, words: &[u8]) -> Option<u32> {
        if self.last_id.is_some() && self.last.as_slice() == words {
            return self.last_id;
        }
        let id = *self.ids.get(words)?;
        self.last.clear();
        self.last.extend_from_slice(words);
        self.last_id = Some(id);
        Some(id)
    }

    /// The words' number, numbering them if new; `None` once [`MAX_SERIES`] words are numbered.
    fn get_or_insert(&mut self, words: &[u8]) -> Option<u32> {
        if let Some(id) = self.get(words) {
            return Some(id);
        }
        if self.ids.len() >= MAX_SERIES {
            return None;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(words.to_vec(), id);
        self.words.push(words.to_vec());
        Some(id)
    }
}

impl Parser<'_> {
    fn parse_block(&mut self, block: &[u8]) -> Parsed {
        let mut out = Parsed {
            lines: 0,
            new_series: Vec::new(),
            points: Vec::with_capacity(block.len() / 48),
            errors: Vec::new(),
            stopped: false,
            fatal: None,
        };
        // The pieces `block.split(|&b| b == b'\n')` gives (the last one empty when the block ends with a
        // newline), found with a vectorized search.
        let mut rest = Some(block);
        while let Some(piece) = rest {
            let raw = match memchr::memchr(b'\n', piece) {
                Some(i) => {
                    rest = Some(&piece[i + 1..]);
                    &piece[..i]
                }
                None => {
                    rest = None;
                    piece
                }
            };
            out.lines += 1;
            let text = raw.strip_suffix(b"\r").unwrap_or(raw);
            if text.is_empty() {
                continue;
            }
            if let Err(message) = self.parse_line(text, &mut out) {
                out.errors.push((out.lines, message));
                if !self.skip_errors || out.fatal.is_some() {
                    out.stopped = true;
                    break;
                }
            }
        }
        // `split` yields an empty piece after the block's final newline: not a line.
        if block.ends_with(b"\n") && !out.stopped {
            out.lines -= 1;
        }
        out
    }

    fn parse_line(&mut self, text: &[u8], out: &mut Parsed) -> Result<(), String> {
        // Only the timestamp and value are parsed (no word splitting) for a line of a known series, and for a new
        // series whose metric word and tag words were both met (and checked) in other lines: its key is made of
        // theirs, without looking up UIDs (a file names each of its series first in a line like this, once per
        // parser).
        if let Some((metric, timestamp, value, tags)) = split_head(text) {
            let seen = match self.known(metric, tags) {
                Some(i) => Some(Seen::Series(i)),
                None => self.metrics.get(metric).zip(self.tags.get(tags)).map(|(m, t)| Seen::Words(m, t)),
            };
            if let Some(seen) = seen {
                if let Some((timestamp, value)) =
                    telnet::parse_put_known_series(&[b"put", metric, timestamp, value, tags])
                {
                    match seen {
                        Seen::Series(i) => out.points.push((i, timestamp, value)),
                        Seen::Words(m, t) => {
                            let (metric_of, tags_of) = (&self.metric_keys[m as usize], &self.tag_keys[t as usize]);
                            let series = self.store.series_key_crossed(metric_of, tags_of);
                            self.add_new_series(text, series, timestamp, value, out);
                        }
                    }
                    return Ok(());
                }
            }
        }
        let mut words: Words<'_> = Words::new();
        words.push(b"put");
        words.extend(telnet::split_words(text));
        let point = telnet::parse_put(&words, self.rules).map_err(|e| e.to_string())?;
        match self.store.series_key(&point) {
            Ok(series) => {
                self.add_new_series(text, series, point.timestamp, point.value, out);
                Ok(())
            }
            Err(AddError::Put(e)) => Err(e.to_string()),
            Err(AddError::Internal(e)) => {
                out.fatal = Some(e.clone());
                Err(format!("not written: {e}"))
            }
            Err(AddError::Storage(e)) => {
                let e = e.to_string();
                out.fatal = Some(e.clone());
                Err(format!("not written: {e}"))
            }
        }
    }

    /// Numbers a series met for the first time in `text` and adds the line's point.
    fn add_new_series(&mut self, text: &[u8], series: SeriesKey, timestamp: i64, value: Value, out: &mut Parsed) {
        let i = self.numbered;
        self.numbered += 1;
        // A line that passed has at least four words, so it splits.
        if let Some((metric, _, _, tags)) = split_head(text) {
            self.remember(metric, tags, &series, i);
        }
        out.new_series.push(series);
        out.points.push((i, timestamp, value));
    }

    /// The number of the series a line's metric and tag words name, if this parser has seen them.
    fn known(&mut self, metric: &[u8], tags: &[u8]) -> Option<u32> {
        let t = self.tags.get(tags)?;
        let list = self.series.get(t as usize)?;
        // Lines sharing their tags usually name their metrics in the same order every time (a host's metrics
        // in a round): try the entry after the one found last before hashing the metric word.
        if self.last.0 == t {
            if let Some(&(m, series)) = list.get(self.last.1 + 1) {
                if self.metrics.words[m as usize] == metric {
                    self.last.1 += 1;
                    return Some(series);
                }
            }
        }
        let m = self.metrics.get(metric)?;
        let i = list.binary_search_by_key(&m, |&(metric, _)| metric).ok()?;
        self.last = (t, i);
        Some(list[i].1)
    }

    fn remember(&mut self, metric: &[u8], tags: &[u8], key: &SeriesKey, series: u32) {
        if self.remembered >= MAX_SERIES {
            return;
        }
        let (Some(m), Some(t)) = (self.metrics.get_or_insert(metric), self.tags.get_or_insert(tags)) else {
            return;
        };
        // The first series of each metric word and of each tag words keeps their UIDs for the words' other series.
        if m as usize == self.metric_keys.len() {
            self.metric_keys.push(key.clone());
        }
        if t as usize == self.tag_keys.len() {
            self.tag_keys.push(key.clone());
        }
        if self.series.len() <= t as usize {
            self.series.resize_with(t as usize + 1, Vec::new);
        }
        let list = &mut self.series[t as usize];
        if let Err(i) = list.binary_search_by_key(&m, |&(metric, _)| metric) {
            list.insert(i, (m, series));
            self.remembered += 1;
        }
    }
}

/// What a parser knows of a line's words: the series itself (its number), or its metric word and its tag words
/// apart (their numbers), each from other series.
enum Seen {
    Series(u32),
    Words(u32, u32),
}

/// (metric, timestamp, value, tag words as written) of a line.
type Head<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a [u8]);

/// A line's metric, timestamp and value words and the rest (its tag words, as written), split at the first three
/// spaces; `None` with fewer than four words.
fn split_head(text: &[u8]) -> Option<Head<'_>> {
    let space = |from: usize| memchr::memchr(b' ', &text[from..]).map(|i| from + i);
    let s1 = space(0)?;
    let s2 = space(s1 + 1)?;
    let s3 = space(s2 + 1)?;
    Some((&text[..s1], &text[s1 + 1..s2], &text[s2 + 1..s3], &text[s3 + 1..]))
}

/// A fast hash for the per-parser maps (keys come from the file being imported, not from a network peer).
#[derive(Clone, Copy, Default)]
struct FastHash;

impl std::hash::BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let word = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A block of whole lines: the first `len` bytes of `buf` (the rest is buffer space, kept initialized so that a
/// recycled buffer is read into without clearing it first).
struct Block {
    buf: Vec<u8>,
    len: usize,
}

/// Reads blocks of whole lines straight into buffers the parsers hand back (`free`), and deals them round-robin
/// to the parsers; stops early when `stop` is set.
fn read_blocks(
    mut reader: Box<dyn Read + Send>,
    path: &str,
    to_parsers: Vec<std::sync::mpsc::SyncSender<Block>>,
    free: std::sync::mpsc::Receiver<Vec<u8>>,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(), ImportError> {
    let fail = |source| ImportError::Read { path: path.to_string(), source };
    // The partial last line of the previous block.
    let mut carry: Vec<u8> = Vec::new();
    let mut next = 0usize;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let mut buf = free.try_recv().unwrap_or_default();
        if buf.len() < BLOCK_BYTES.max(2 * carry.len()) {
            buf.resize(BLOCK_BYTES.max(2 * carry.len()), 0);
        }
        buf[..carry.len()].copy_from_slice(&carry);
        let mut filled = carry.len();
        carry.clear();
        // Fill the buffer; a read of 0 is the end of the input.
        let mut eof = false;
        while filled < buf.len() {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(e)),
            }
        }
        let len = if eof {
            filled
        } else {
            // Keep the partial last line for the next block (a line longer than a block grows the next buffer).
            match buf[..filled].iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => 0,
            }
        };
        carry.extend_from_slice(&buf[len..filled]);
        if len > 0 && to_parsers[next % to_parsers.len()].send(Block { buf, len }).is_err() {
            return Ok(());
        }
        if len > 0 {
            next += 1;
        }
        if eof {
            return Ok(());
        }
    }
}

/// Imports one input into a bulk load with parallel parsing; writes batches as memory fills up (the last one is
/// the caller's to write).
#[allow(clippy::too_many_arguments)]
fn import_store(
    reader: Box<dyn Read + Send>,
    path: &str,
    store: &Store,
    load: &mut BulkLoad,
    rules: &Rules,
    options: ImportOptions,
    summary: &mut ImportSummary,
    errors: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<(), ImportError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::sync_channel;
    let parsers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut block_txs = Vec::with_capacity(parsers);
        let mut parsed_rxs = Vec::with_capacity(parsers);
        // Parsed blocks' buffers go back to the reader: no fresh (page-faulting) megabyte per block.
        let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        for _ in 0..parsers {
            let (block_tx, block_rx) = sync_channel::<Block>(2);
            let (parsed_tx, parsed_rx) = sync_channel::<Parsed>(2);
            let free_tx = free_tx.clone();
            block_txs.push(block_tx);
            parsed_rxs.push(parsed_rx);
            let mut parser = Parser {
                store,
                rules,
                skip_errors: options.skip_errors,
                metrics: Words2Id::new(),
                tags: Words2Id::new(),
                series: Vec::new(),
                last: (u32::MAX, 0),
                remembered: 0,
                metric_keys: Vec::new(),
                tag_keys: Vec::new(),
                numbered: 0,
            };
            scope.spawn(move || {
                for block in block_rx {
                    let parsed = parser.parse_block(&block.buf[..block.len]);
                    let _ = free_tx.send(block.buf);
                    if parsed_tx.send(parsed).is_err() {
                        return;
                    }
                }
            });
        }
        drop(free_tx);
        let stop = &stop;
        let reader_thread = scope.spawn(move || read_blocks(reader, path, block_txs, free_rx, stop));

        // Apply parsed blocks in input order: block b came from parser b % parsers. Each parser numbers the
        // series it meets; the load's number of each is kept per parser (a series met by two parsers is one
        // series of the load, so its points stay in input order).
        let mut ids: Vec<Vec<u32>> = (0..parsers).map(|_| Vec::new()).collect();
        let mut base_line = 0u64;
        let mut result: Result<(), ImportError> = Ok(());
        for b in 0.. {
            let p = b % parsers;
            let Ok(parsed) = parsed_rxs[p].recv() else { break };
            ids[p].extend(parsed.new_series.iter().map(|s| load.series(s)));
            let ids = &ids[p];
            // Each point lands in its own series' row, a cache miss or two among 100 k rows: the state of the
            // series a few points ahead is fetched early, then its row's ends.
            let points = &parsed.points;
            for (k, (i, timestamp, value)) in points.iter().enumerate() {
                if let Some(&(ahead, _, _)) = points.get(k + PREFETCH_SERIES) {
                    load.prefetch_series(ids[ahead as usize]);
                }
                if let Some(&(ahead, _, _)) = points.get(k + PREFETCH_ROW) {
                    load.prefetch_row(ids[ahead as usize]);
                }
                load.add(ids[*i as usize], *timestamp, value);
            }
            summary.points += parsed.points.len() as u64;
            for (line, message) in &parsed.errors {
                let lineno = base_line + line;
                bar.suspend(|| {
                    let _ = writeln!(errors, "{path}:{lineno}: {message}");
                });
                summary.bad_lines += 1;
                if parsed.stopped && summary.stopped_at.is_none() && !options.skip_errors {
                    summary.stopped_at = Some(format!("{path}:{lineno}"));
                }
            }
            base_line += parsed.lines;
            if load.bytes() >= BATCH_BYTES {
                // The rows the series have left first: whole in time-ordered input. The current rows too only
                // when they alone hold half the budget (then some rows are written in two pieces).
                let written = store.bulk_write_left(load).and_then(|_| match load.bytes() >= BATCH_BYTES / 2 {
                    true => store.bulk_write(load),
                    false => Ok(0),
                });
                if let Err(e) = written {
                    result = Err(ImportError::Store(e.to_string()));
                    break;
                }
            }
            if let Some(e) = parsed.fatal {
                result = Err(ImportError::Store(e));
                break;
            }
            if parsed.stopped {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        drop(parsed_rxs);
        let read =
            reader_thread.join().unwrap_or_else(|_| Err(ImportError::Store("the reader thread panicked".into())));
        result.and(read)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::sync::Arc;

    fn store(dir: &Path) -> Store {
        let config = Config::for_data_dir(dir, &[("tsd.core.auto_create_metrics", "true")]).unwrap();
        Store::open(&config.store_options(), Arc::new(crate::metrics::Metrics::new())).unwrap()
    }

    fn run_import(store: &Store, path: &str, skip: bool) -> (ImportSummary, String) {
        let mut errors = Vec::new();
        let mut log = Vec::new();
        let s = import_files(
            &Sink::Store(store),
            &[path.to_string()],
            &Rules::default(),
            ImportOptions { skip_errors: skip },
            &mut errors,
            &mut log,
        )
        .unwrap();
        (s, String::from_utf8(errors).unwrap())
    }

    #[test]
    fn reports_bad_lines_with_file_and_line_and_stops_unless_skipping() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.txt");
        std::fs::write(
            &file,
            "m 1356998400 1 host=a\n\nm 1356998401 x host=a\r\nm 1356998402 3\nm 1356998403 4 host=a\n",
        )
        .unwrap();
        let data = dir.path().join("data");
        let s = store(&data);
        let path = file.display().to_string();
        let (summary, errors) = run_import(&s, &path, false);
        assert_eq!(summary.points, 1);
        assert_eq!(summary.stopped_at, Some(format!("{path}:3")));
        assert_eq!(errors, format!("{path}:3: invalid value: Invalid character 'x' in x\n"));
        let (summary, errors) = run_import(&s, &path, true);
        assert_eq!((summary.points, summary.bad_lines, summary.stopped_at), (2, 2, None));
        assert_eq!(
            errors,
            format!(
                "{path}:3: invalid value: Invalid character 'x' in x\n\
                 {path}:4: illegal argument: not enough arguments (need least 4, got 3)\n"
            )
        );
    }

    #[test]
    fn a_line_longer_than_a_block_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("long.txt");
        let long = "x".repeat(BLOCK_BYTES * 5 / 2);
        std::fs::write(&file, format!("m 1356998400 1 host=a\n{long}\nm 1356998401 2 host=a")).unwrap();
        let s = store(&dir.path().join("data"));
        let path = file.display().to_string();
        let (summary, errors) = run_import(&s, &path, true);
        assert_eq!((summary.points, summary.bad_lines), (2, 1));
        assert_eq!(errors, format!("{path}:2: illegal argument: not enough arguments (need least 4, got 1)\n"));
    }

    #[test]
    fn blocks_are_applied_in_line_order_across_parsers() {
        // ~3.5 MB: several 1 MB blocks over at least two parsers. The same cell is written early and late (the
        // late value must win), a bad line sits deep in the file, and line numbers must count across blocks.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.txt");
        let mut text = String::new();
        let n = 60_000u64;
        for i in 1..=n {
            // ~58 bytes a line: blocks of 1 MB start near lines 18k, 36k and 54k, dealt to parsers 0, 1, 0, 1.
            let line = match i {
                10 => "m 1356998400 1 host=h0 extra=padding-padding-padding-padding".to_string(),
                45_000 => "m 1356998400 x host=h0".to_string(),
                59_990 => "m 1356998400 2 host=h0 extra=padding-padding-padding-padding".to_string(),
                // One cell written in blocks 0, 1 and 2 (parsers 0, 1, 0): the last line wins.
                17 | 20_000 => format!("m 1356998399 {} host=h1 extra=padding-padding-padding-padding", i % 100),
                40_000 => "m 1356998399 3 host=h1 extra=padding-padding-padding-padding".to_string(),
                _ => format!("m {} {i} host=h{} extra=padding-padding-padding-padding", 1356998400 + i, i % 50),
            };
            text.push_str(&line);
            text.push('\n');
        }
        assert!(text.len() > 3 << 20);
        std::fs::write(&file, &text).unwrap();
        let path = file.display().to_string();
        let count = |s: &Store| {
            let metric = s.uids().get(rtsd_protocol::point::UidKind::Metric, "m").unwrap().unwrap();
            let mut points = Vec::new();
            s.for_each_row(metric.as_bytes(), 0, u32::MAX, |row| {
                let tags: Vec<Vec<u8>> = row.tags.iter().map(|(_, v)| v.to_vec()).collect();
                for p in rtsd_protocol::codec::row_points(row.base_time, row.value).unwrap() {
                    points.push((p.timestamp_ms, tags.clone(), p.value));
                }
                Ok(true)
            })
            .unwrap();
            points
        };

        let stopped = store(&dir.path().join("a"));
        let (summary, errors) = run_import(&stopped, &path, false);
        assert_eq!(errors, format!("{path}:45000: invalid value: Invalid character 'x' in x\n"));
        assert_eq!(summary.stopped_at, Some(format!("{path}:45000")));
        assert_eq!(summary.points, 44_999);
        // Every line before the bad one is a distinct cell but two (the cell written three times), and nothing
        // after it was written.
        assert_eq!(count(&stopped).len(), 44_997);
        drop(stopped);

        let skipped = store(&dir.path().join("b"));
        let (summary, errors) = run_import(&skipped, &path, true);
        assert_eq!(errors, format!("{path}:45000: invalid value: Invalid character 'x' in x\n"));
        assert_eq!((summary.points, summary.bad_lines), (n - 1, 1));
        let points = count(&skipped);
        let h0 = skipped.uids().get(rtsd_protocol::point::UidKind::TagValue, "h0").unwrap().unwrap();
        let cell: Vec<_> = points
            .iter()
            .filter(|(ts, tags, _)| *ts == 1356998400000 && tags.iter().any(|t| t == h0.as_bytes()))
            .collect();
        assert_eq!(cell.len(), 1, "{cell:?}");
        assert_eq!(cell[0].2, rtsd_protocol::codec::Value::Int(2));
        let h1 = skipped.uids().get(rtsd_protocol::point::UidKind::TagValue, "h1").unwrap().unwrap();
        let cell: Vec<_> = points
            .iter()
            .filter(|(ts, tags, _)| *ts == 1356998399000 && tags.iter().any(|t| t == h1.as_bytes()))
            .collect();
        assert_eq!(cell.len(), 1, "{cell:?}");
        assert_eq!(cell[0].2, rtsd_protocol::codec::Value::Int(3));
    }

    /// Every data row (key, value) and every series-index entry but the wall-clock ones (first seen, counters).
    fn stored(s: &Store) -> (Vec<(Vec<u8>, Vec<u8>)>, Vec<(Vec<u8>, Vec<u8>)>) {
        // Rows as they read: a row with merge operands comes out of the read's merge unpacked, the same row
        // written whole (or compacted) is stored packed.
        let mut rows = Vec::new();
        s.scan_raw(crate::store::CF_DATA, &[], |k, v| {
            rows.push((k.to_vec(), rtsd_protocol::codec::expand_row(v).unwrap().into_owned()));
            true
        })
        .unwrap();
        let mut index = Vec::new();
        s.scan_raw(crate::store::CF_SERIES, &[], |k, v| {
            if k[0] == b'S' || k[0] == b'T' {
                index.push((k.to_vec(), v.to_vec()));
            }
            true
        })
        .unwrap();
        (rows, index)
    }

    #[test]
    fn an_interrupted_import_run_again_stores_what_one_clean_run_stores() {
        // Two hours of 40 series, packed and not, with a bad line two thirds in.
        let dir = tempfile::tempdir().unwrap();
        let mut good = String::new();
        for i in 0..720u64 {
            for h in 0..40 {
                good.push_str(&format!("m {} {} host=h{h}\n", 1356998400 + i * 10, (i * 7 + h) % 1000));
            }
        }
        let lines: Vec<&str> = good.lines().collect();
        let mut bad = lines.clone();
        bad[lines.len() * 2 / 3] = "m 1356998400 oops host=h0";
        let (good_file, bad_file) = (dir.path().join("good.txt"), dir.path().join("bad.txt"));
        std::fs::write(&good_file, &good).unwrap();
        std::fs::write(&bad_file, bad.join("\n") + "\n").unwrap();

        let clean = store(&dir.path().join("clean"));
        let (summary, _) = run_import(&clean, &good_file.display().to_string(), false);
        assert_eq!(summary.points, lines.len() as u64);

        // A run that stopped at the bad line, after an earlier run killed while it was making its table files.
        let data = dir.path().join("again");
        std::fs::create_dir_all(data.join("bulk-load")).unwrap();
        std::fs::write(data.join("bulk-load").join("000000-data-0.sst"), b"half a table file").unwrap();
        let again = store(&data);
        let (summary, _) = run_import(&again, &bad_file.display().to_string(), false);
        assert_eq!(summary.points, (lines.len() * 2 / 3) as u64);
        let (summary, errors) = run_import(&again, &good_file.display().to_string(), false);
        assert_eq!((summary.points, errors.as_str()), (lines.len() as u64, ""));
        // Run twice more: nothing changes.
        let (rows, index) = stored(&again);
        run_import(&again, &good_file.display().to_string(), false);
        assert_eq!(stored(&again), (rows.clone(), index.clone()));
        assert_eq!((rows, index), stored(&clean));
        assert!(!data.join("bulk-load").exists());
    }

    #[test]
    fn series_are_told_apart_by_metric_and_tags_and_found_again_in_any_tag_order() {
        // The parser numbers metric words and tag words separately (Words2Id): metrics sharing tags, tags shared
        // by metrics, the same series with its tags in another order, and a later line for the same cell.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.txt");
        std::fs::write(
            &file,
            "a 1356998400 1 host=x dc=1\nb 1356998400 2 host=x dc=1\na 1356998401 3 dc=1 host=x\n\
             b 1356998400 4 host=x dc=1\na 1356998402 5 host=y dc=1\nb 1356998403 6 host=y dc=1\n",
        )
        .unwrap();
        let s = store(&dir.path().join("data"));
        let (summary, errors) = run_import(&s, &file.display().to_string(), false);
        assert_eq!((summary.points, errors.as_str()), (6, ""));
        let uid = |kind, name: &str| s.uids().get(kind, name).unwrap().unwrap().as_bytes().to_vec();
        let points = |metric: &str| {
            let mut out = Vec::new();
            s.for_each_row(&uid(rtsd_protocol::point::UidKind::Metric, metric), 0, u32::MAX, |row| {
                let host = row.tags.iter().map(|(_, v)| v.to_vec()).find(|v| {
                    *v == uid(rtsd_protocol::point::UidKind::TagValue, "x")
                        || *v == uid(rtsd_protocol::point::UidKind::TagValue, "y")
                });
                let host = if host == Some(uid(rtsd_protocol::point::UidKind::TagValue, "x")) { "x" } else { "y" };
                for p in rtsd_protocol::codec::row_points(row.base_time, row.value).unwrap() {
                    out.push((host, p.timestamp_ms / 1000, p.value));
                }
                Ok(true)
            })
            .unwrap();
            out.sort_by_key(|p| (p.0, p.1));
            out
        };
        use rtsd_protocol::codec::Value::Int;
        assert_eq!(points("a"), vec![("x", 1356998400, Int(1)), ("x", 1356998401, Int(3)), ("y", 1356998402, Int(5))]);
        assert_eq!(points("b"), vec![("x", 1356998400, Int(4)), ("y", 1356998403, Int(6))]);
    }
}
