//! `rtsd import FILE...`: OpenTSDB's text import (`tsdb import`). Each line is a telnet `put` line without the
//! `put` word, `metric timestamp value tag=value ...`, parsed and validated by the very code the telnet port uses
//! ([`rtsd_protocol::telnet::parse_put`]), so a line is accepted here exactly when `put <line>` would be, and its
//! error is the telnet error text, prefixed with `FILE:LINE:`. Files ending in `.gz` are inflated; `-` is stdin.
//!
//! Points are written straight into RocksDB in large atomic batches, grouped by row so that each row gets one
//! merge operand per batch instead of one per point (no network, no per-point round trip, far fewer memtable
//! entries); the directory must not be in use by a daemon, or the points go through the daemon's `/api/put`.
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

use crate::store::admin::BulkSlot;
use crate::store::{AddError, SeriesKey, Store, StoreError};

/// Points per RocksDB write: rows collect many points each before they are written (see
/// [`crate::store::admin::BulkBatch`]); the byte bound keeps memory in check for wide files.
const BATCH_POINTS: u64 = 1_000_000;
const BATCH_BYTES: usize = 64 << 20;
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
    for path in paths {
        let file_started = Instant::now();
        let before = summary.points;
        let bad_before = summary.bad_lines;
        let reader = open(path, &bar)?;
        std::thread::scope(|scope| {
            let mut writer = Writer::new(sink, options.skip_errors, scope);
            let result = import_reader(reader, path, &mut writer, rules, options, &mut summary, errors, &bar);
            // Whatever happened, what was read before it is written: a re-run then has less to redo.
            let flushed = writer.finish(&mut summary, errors, path);
            result.and(flushed)
        })?;
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
    bar.finish_and_clear();
    if let Sink::Store(store) = sink {
        // Make the import durable as a whole (WAL synced, memtables flushed) before reporting success.
        store.flush().map_err(|e| ImportError::Store(e.to_string()))?;
    }
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

/// Opens a path for line reading: `-` is stdin, `*.gz` is inflated (multi-member gzip too).
fn open(path: &str, bar: &ProgressBar) -> Result<Box<dyn BufRead>, ImportError> {
    if path == "-" {
        return Ok(Box::new(BufReader::with_capacity(1 << 20, std::io::stdin())));
    }
    let file = std::fs::File::open(path).map_err(|source| ImportError::Read { path: path.to_string(), source })?;
    let counted = bar.wrap_read(file);
    let reader: Box<dyn Read> = if Path::new(path).extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, counted)))
    } else {
        Box::new(counted)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

#[allow(clippy::too_many_arguments)]
fn import_reader(
    mut reader: Box<dyn BufRead>,
    path: &str,
    writer: &mut Writer<'_, '_>,
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
        let outcome = if writer.add_known(&words) {
            Ok(())
        } else {
            match telnet::parse_put(&words, rules) {
                Ok(point) => writer.add(&point, &words, text, lineno),
                Err(e) => Err(e.to_string()),
            }
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
        if lineno % 65536 == 0 {
            bar.set_message(format!("{} points", summary.points + writer.pending()));
        }
    }
}

/// Collects points and writes them in batches to the sink.
///
/// Into a store, the work is split over two threads: this one reads, parses and resolves series (UIDs), and
/// hands chunks of (series, timestamp, value) to a writer thread that groups them by row and commits
/// ([`crate::store::admin::BulkBatch`]). Into a daemon, points are posted in batches from this thread.
struct Writer<'a, 's> {
    sink: &'a Sink<'a>,
    /// The writer thread and the chunk being filled (store sink only).
    pipe: Option<Pipe<'s>>,
    chunk: Chunk,
    /// For the daemon: JSON objects of the pending points and the line each came from.
    json: Vec<(u64, String)>,
    /// Internal store failure seen while adding (not the line's fault): fatal.
    failed: Option<String>,
    /// Through a daemon, a refused point is only known once its batch is answered: without `--skip-errors`
    /// the import stops after that batch.
    skip_errors: bool,
    /// Series already resolved, by their metric and tag words, to their number in this file: a line of a known
    /// series only has its timestamp and value parsed (as the telnet port does per connection).
    series: HashMap<Vec<u8>, u32>,
    key: Vec<u8>,
    /// Series numbered in chunks already sent.
    sent_series: usize,
}

/// Points handed to the writer thread: series first seen in this chunk, then the points.
#[derive(Default)]
struct Chunk {
    new_series: Vec<SeriesKey>,
    points: Vec<(u32, i64, Value)>,
}

/// Points per chunk handed to the writer thread.
const CHUNK_POINTS: usize = 1 << 15;

struct Pipe<'s> {
    tx: std::sync::mpsc::SyncSender<Chunk>,
    handle: std::thread::ScopedJoinHandle<'s, Result<u64, StoreError>>,
}

/// The writer thread: resolves chunk points to rows and commits a batch whenever it is full; returns the
/// number of points committed when the channel closes (everything received is committed, also after an error
/// stopped the reader).
fn write_chunks(store: &Store, rx: std::sync::mpsc::Receiver<Chunk>) -> Result<u64, StoreError> {
    let mut bulk = store.new_bulk();
    let mut series: Vec<(SeriesKey, BulkSlot)> = Vec::new();
    let mut written = 0;
    for chunk in rx {
        series.extend(chunk.new_series.into_iter().map(|s| (s, BulkSlot::default())));
        for (i, timestamp, value) in chunk.points {
            let (key, slot) = &mut series[i as usize];
            store.bulk_add(&mut bulk, key, slot, timestamp, value);
        }
        if bulk.len() >= BATCH_POINTS || bulk.bytes() >= BATCH_BYTES {
            written += store.bulk_commit(&mut bulk)?;
        }
    }
    written += store.bulk_commit(&mut bulk)?;
    Ok(written)
}

/// Series remembered at most per file; past this, new series are resolved every time (a file with more series
/// than this is rare).
const MAX_SERIES: usize = 1 << 22;

/// The words that name a series (`words[0]` is `put`): the metric and every non-empty tag word, in order,
/// each length-prefixed so that different splits can't collide.
fn series_words(words: &[&[u8]], key: &mut Vec<u8>) {
    key.clear();
    for w in std::iter::once(&words[1]).chain(words[4..].iter().filter(|w| !w.is_empty())) {
        key.extend_from_slice(&(w.len() as u32).to_le_bytes());
        key.extend_from_slice(w);
    }
}

impl<'a, 's> Writer<'a, 's> {
    fn new<'e>(sink: &'a Sink<'a>, skip_errors: bool, scope: &'s std::thread::Scope<'s, 'e>) -> Writer<'a, 's>
    where
        'a: 's,
    {
        let pipe = match sink {
            Sink::Store(store) => {
                let store: &'a Store = store;
                let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(4);
                let handle = scope.spawn(move || write_chunks(store, rx));
                Some(Pipe { tx, handle })
            }
            Sink::Daemon(_) => None,
        };
        Writer {
            sink,
            pipe,
            chunk: Chunk::default(),
            json: Vec::new(),
            failed: None,
            skip_errors,
            series: HashMap::new(),
            key: Vec::new(),
            sent_series: 0,
        }
    }

    fn pending(&self) -> u64 {
        match &self.pipe {
            Some(_) => self.chunk.points.len() as u64,
            None => self.json.len() as u64,
        }
    }

    fn full(&self) -> bool {
        match &self.pipe {
            Some(_) => self.chunk.points.len() >= CHUNK_POINTS,
            None => self.json.len() >= HTTP_BATCH_POINTS,
        }
    }

    /// Adds the line's point when its series is known and its timestamp and value pass; false means the full
    /// parser must look at the line.
    fn add_known(&mut self, words: &[&[u8]]) -> bool {
        if self.pipe.is_none() || words.len() < 5 {
            return false;
        }
        series_words(words, &mut self.key);
        let Some(&i) = self.series.get(&self.key) else { return false };
        let Some((timestamp, value)) = telnet::parse_put_known_series(words) else { return false };
        self.chunk.points.push((i, timestamp, value));
        true
    }

    /// Adds a valid point; `Err` is the line's error text (e.g. an unknown metric with auto-creation off).
    fn add(&mut self, point: &DataPoint<'_>, words: &[&[u8]], line: &[u8], lineno: u64) -> Result<(), String> {
        match (self.sink, &self.pipe) {
            (Sink::Store(store), Some(_)) => match store.series_key(point) {
                Ok(series) => {
                    // Every resolved series gets a number, remembered by its words while the map has room.
                    let i = self.chunk_series(series);
                    if self.series.len() < MAX_SERIES {
                        series_words(words, &mut self.key);
                        self.series.insert(self.key.clone(), i);
                    }
                    self.chunk.points.push((i, point.timestamp, point.value));
                    Ok(())
                }
                Err(AddError::Put(e)) => Err(e.to_string()),
                Err(AddError::Internal(e)) => {
                    self.failed = Some(e.clone());
                    Err(format!("not written: {e}"))
                }
            },
            _ => {
                self.json.push((lineno, point_json(point, line)));
                Ok(())
            }
        }
    }

    /// Numbers a new series for the writer thread (numbers count every series sent so far).
    fn chunk_series(&mut self, series: SeriesKey) -> u32 {
        let i = self.next_series();
        self.chunk.new_series.push(series);
        i
    }

    fn next_series(&self) -> u32 {
        (self.sent_series + self.chunk.new_series.len()) as u32
    }

    fn flush(&mut self, summary: &mut ImportSummary, errors: &mut dyn Write, path: &str) -> Result<(), ImportError> {
        if let Some(e) = self.failed.take() {
            return Err(ImportError::Store(e));
        }
        match (self.sink, &self.pipe) {
            (Sink::Store(_), Some(pipe)) => {
                let chunk = std::mem::take(&mut self.chunk);
                self.sent_series += chunk.new_series.len();
                if pipe.tx.send(chunk).is_err() {
                    // The writer thread stopped: its error is reported by `finish`.
                    return Err(ImportError::Store("the writer thread stopped".into()));
                }
                Ok(())
            }
            (Sink::Daemon(addr), _) => {
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
            _ => Ok(()),
        }
    }

    /// Sends what is pending and, into a store, waits until the writer thread has committed everything.
    fn finish(&mut self, summary: &mut ImportSummary, errors: &mut dyn Write, path: &str) -> Result<(), ImportError> {
        let flushed = self.flush(summary, errors, path);
        if let Some(pipe) = self.pipe.take() {
            drop(pipe.tx);
            let written = match pipe.handle.join() {
                Ok(result) => result.map_err(|e| ImportError::Store(e.to_string()))?,
                Err(_) => return Err(ImportError::Store("the writer thread panicked".into())),
            };
            summary.points += written;
        }
        flushed
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
    let stderr = std::io::stderr();
    let mut errors = stderr.lock();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::sync::Arc;

    fn store(dir: &Path) -> Store {
        let config = Config::for_data_dir(dir, &[("tsd.core.auto_create_metrics", "true")]).unwrap();
        Store::open(&config, Arc::new(crate::metrics::Metrics::new())).unwrap()
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
}
