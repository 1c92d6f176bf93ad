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
//!
//! The jobs have their own modules: `read` opens an input and cuts it into blocks of whole lines, `parse` turns
//! a block into points of numbered series, `bulk` runs the store path (reader, parsers, and the bulk load the
//! blocks are applied to), and `daemon` the path through a daemon's `/api/put`.
mod bulk;
mod daemon;
mod parse;
mod read;

use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::time::Instant;

use indicatif::ProgressBar;
use rtsd_protocol::point::Rules;

use crate::store::bulk::BulkLoad;
use crate::store::Store;

pub use daemon::daemon_addr;

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
        let reader = read::open(path, bar)?;
        match (sink, load.as_deref_mut()) {
            (Sink::Store(store), Some(load)) => {
                bulk::import_store(reader, path, store, load, rules, options, summary, errors, bar)?
            }
            (Sink::Store(_), None) => unreachable!("a store import has a bulk load"),
            (Sink::Daemon(_), _) => {
                let mut writer = daemon::Writer::new(sink, options.skip_errors);
                let reader = Box::new(BufReader::with_capacity(1 << 20, reader));
                let result = daemon::import_reader(reader, path, &mut writer, rules, options, summary, errors, bar);
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::read::BLOCK_BYTES;
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
    /// (key, value) pairs of a table.
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn stored(s: &Store) -> (Pairs, Pairs) {
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
