//! The store path: a reader thread cuts the input into blocks of whole lines, parser threads turn blocks into
//! (series, timestamp, value) records, and this thread applies the parsed blocks strictly in input order to a bulk
//! load ([`crate::store::bulk`]), so a later line still wins over an earlier one for the same cell, errors are
//! reported in line order, and "stop at the first bad line" means exactly the lines before it are written.
use std::io::{Read, Write};

use indicatif::ProgressBar;
use rtsd_protocol::point::Rules;

use super::parse::{Parsed, Parser};
use super::read::{read_blocks, Block};
use super::{ImportError, ImportOptions, ImportSummary};
use crate::store::bulk::BulkLoad;
use crate::store::Store;

/// Bytes of points held in memory before the rows the series have left are written (see
/// [`Store::bulk_write_left`]): the larger, the fewer rows are written in two pieces, which then cost a merge.
/// An hour of 100 k series every 10 s is ~220 MB of rows.
const BATCH_BYTES: usize = 256 << 20;

/// How many points ahead the applying thread fetches a series' state, and its row's ends.
const PREFETCH_SERIES: usize = 32;
const PREFETCH_ROW: usize = 8;

/// Imports one input into a bulk load with parallel parsing; writes batches as memory fills up (the last one is
/// the caller's to write).
#[allow(clippy::too_many_arguments)]
pub(super) fn import_store(
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
            let mut parser = Parser::new(store, rules, options.skip_errors);
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
