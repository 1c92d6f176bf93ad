//! A telnet-style connection: lines in, OpenTSDB's replies out (spec: ingest §1.2-§1.7).
//!
//! All complete lines of one read are handled together: their points go into one RocksDB batch, committed
//! before the read ends and before any non-`put` command is answered. So when a client gets the reply to, say,
//! `version`, every `put` it sent before is in the write-ahead log: a cheap durability barrier for clients that
//! want one. Successful puts get no reply; errors get OpenTSDB's exact line and the connection stays open.
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rtsd_protocol::point::ErrorCategory;
use rtsd_protocol::telnet::{self, Command, MAX_LINE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::series_cache::SeriesCache;
use super::Tsd;
use crate::metrics::Protocol;
use crate::rollup::{self, RollupError};
use crate::store::{AddError, PointBatch};

/// What the connection should do after a chunk of lines.
enum Next {
    Continue,
    Close,
}

/// The cache key of a put line: its metric and tag words.
fn series_cache_key(cache: &mut SeriesCache, words: &[&[u8]]) {
    cache.set_key(std::iter::once(words[1]).chain(words[4..].iter().copied()));
}

/// Serves a telnet connection until it closes, sends a line over the limit, idles past
/// `rtsd.telnet.idle_timeout_secs` (the reaper cancels `conn.closed`, see `super::conn`) or the daemon stops.
pub async fn serve_connection(mut stream: TcpStream, tsd: Arc<Tsd>, conn: Arc<super::conn::Conn>) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut out: Vec<u8> = Vec::new();
    let mut cache = SeriesCache::new(&tsd.store);
    loop {
        let n = tokio::select! {
            r = stream.read_buf(&mut buf) => r,
            _ = tsd.shutdown.cancelled() => break,
            _ = conn.closed.cancelled() => break,
        };
        conn.touch();
        match n {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let kind = if e.kind() == std::io::ErrorKind::ConnectionReset { "reset" } else { "unknown" };
                tsd.metrics.connection_exception(kind);
                break;
            }
        }
        // Parsing and the RocksDB write are short, synchronous work; keep them off the async scheduler's toes.
        let busy = conn.busy();
        let (consumed, next) = tokio::task::block_in_place(|| handle_lines(&buf, &tsd, &mut out, &mut cache));
        drop(busy);
        let _ = buf.split_to(consumed);
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                tsd.metrics.write_blocked();
                break;
            }
            out.clear();
        }
        if matches!(next, Next::Close) {
            break;
        }
        if telnet::partial_too_long(&buf) {
            // OpenTSDB's frame decoder gives up on a line this long and closes without a reply (spec: ingest §1.2).
            too_long(&tsd, buf.len());
            break;
        }
    }
    let _ = stream.shutdown().await;
}

/// Counts and logs (once in a while) a connection closed for a line over [`MAX_LINE`].
fn too_long(tsd: &Tsd, bytes: usize) {
    tsd.metrics.connection_exception("closed");
    static LOG: crate::logs::Throttle = crate::logs::Throttle::new(Duration::from_secs(10));
    if let Some(unlogged) = LOG.allow() {
        tracing::info!(bytes, unlogged_since_last = unlogged, "closing telnet connection: frame length exceeds {MAX_LINE}");
    }
}

/// Handles every complete line in `buf`; returns the bytes consumed.
fn handle_lines(buf: &[u8], tsd: &Tsd, out: &mut Vec<u8>, cache: &mut SeriesCache) -> (usize, Next) {
    cache.refresh(&tsd.store);
    let mut session = Session { tsd, batch: tsd.store.new_batch(), out, puts: 0, cache };
    let mut pos = 0;
    let mut lines = 0;
    let mut next = Next::Continue;
    while let Some((line, used)) = telnet::next_line(&buf[pos..]) {
        if telnet::line_too_long(line) {
            // The lines before it are handled; the connection closes without a reply, whether the line came in
            // one read or many (spec: ingest §1.2).
            too_long(tsd, line.len());
            next = Next::Close;
            break;
        }
        pos += used;
        lines += 1;
        if let Next::Close = session.command(line) {
            next = Next::Close;
            break;
        }
    }
    session.commit();
    tsd.metrics.rpcs("telnet", lines);
    tsd.metrics.rpcs("put", session.puts);
    (pos, next)
}

struct Session<'a> {
    tsd: &'a Tsd,
    batch: PointBatch,
    out: &'a mut Vec<u8>,
    /// `put` lines seen, reported to the shared counters once per read.
    puts: u64,
    cache: &'a mut SeriesCache,
}

impl Session<'_> {
    fn command(&mut self, line: &[u8]) -> Next {
        let writes = self.tsd.config.mode.writes();
        match telnet::parse_command(line) {
            Command::Put(words) if writes => self.put(&words),
            Command::Rollup(words) if writes => self.rollup(&words),
            Command::Histogram(_) if writes => {
                self.reply(&format!("histogram: illegal argument: {}\n", super::HISTOGRAMS_DISABLED))
            }
            Command::Version => {
                self.commit();
                self.reply(&crate::version::telnet_reply());
            }
            Command::Help => {
                self.commit();
                self.reply(&telnet::help_reply(enabled_commands(self.tsd)));
            }
            Command::Stats => {
                self.commit();
                let text = self.tsd.stats_text();
                self.reply(&text);
            }
            Command::DropCaches => {
                self.commit();
                self.tsd.store.drop_caches();
                self.reply("Caches dropped.\n");
            }
            Command::Exit => {
                self.commit();
                return Next::Close;
            }
            Command::DieDieDie if self.tsd.config.diediedie => {
                self.commit();
                self.reply("Cleaning up and exiting now.\n");
                tracing::warn!("diediedie received: shutting down");
                self.tsd.shutdown.cancel();
                return Next::Close;
            }
            _ => {
                // Disabled commands (`put` in read-only mode, `diediedie` unless enabled) are unknown words.
                let word = line.split(|&b| b == b' ').next().unwrap_or_default();
                self.reply(&telnet::unknown_command_reply(word));
            }
        }
        Next::Continue
    }

    fn put(&mut self, words: &[&[u8]]) {
        let metrics = &self.tsd.metrics;
        self.puts += 1;
        if words.len() >= 5 {
            series_cache_key(self.cache, words);
            if let Some(series) = self.cache.get() {
                if let Some((timestamp, value)) = telnet::parse_put_known_series(words) {
                    self.tsd.store.add_to_series(&mut self.batch, series, timestamp, value);
                    return;
                }
            }
        }
        let point = match telnet::parse_put(words, &self.tsd.config.rules) {
            Ok(p) => p,
            Err(e) => {
                metrics.put_error(e.category());
                self.reply(&format!("put: {e}\n"));
                return;
            }
        };
        match self.tsd.store.series_key(&point) {
            Ok(series) => {
                self.tsd.store.add_to_series(&mut self.batch, &series, point.timestamp, point.value);
                series_cache_key(self.cache, words);
                self.cache.insert(series);
            }
            Err(AddError::Put(e)) => {
                metrics.put_error(e.category());
                self.reply(&format!("put: {e}\n"));
            }
            Err(AddError::Internal(msg)) => {
                // OpenTSDB logs unexpected exceptions and writes nothing back (spec: ingest §1.3, §1.6).
                tracing::error!(error = %msg, "Unexpected exception caught while serving put");
            }
            Err(AddError::Storage(e)) => self.storage_failed("put", &e),
        }
    }

    /// A point the store could not take (its UIDs could not be assigned): reported as a failed write is, so a
    /// client behind a `version` barrier learns of it (issue 23; OpenTSDB said nothing here, spec: ingest §1.3).
    fn storage_failed(&mut self, command: &str, e: &crate::store::StoreError) {
        self.tsd.metrics.put_error(ErrorCategory::HbaseErrors);
        if self.tsd.config.return_errors {
            self.reply(&format!("{command}: HBase error: {e}\n"));
        }
    }

    /// A `rollup` line (spec: ingest §1.7): parsed as OpenTSDB's `RollupDataPointRpc`, checked against the
    /// rollup configuration, stored in the batch with the puts. Errors are `rollup: <category>: <message>`.
    fn rollup(&mut self, words: &[&[u8]]) {
        let metrics = &self.tsd.metrics;
        metrics.rpc("rollup");
        let (mut point, spec) = match telnet::parse_rollup(words) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => {
                // OpenTSDB fails with an unexpected exception here and answers nothing (spec: ingest §1.3).
                tracing::error!("Unexpected exception caught while serving rollup: no interval or aggregator");
                return;
            }
            Err(e) => {
                metrics.put_error(e.category());
                self.reply(&format!("rollup: {e}\n"));
                return;
            }
        };
        let store = &self.tsd.store;
        let target = match rollup::prepare(store.rollup_settings(), &mut point, &spec, &self.tsd.config.rules) {
            Ok(target) => target,
            Err(RollupError::Put(e)) => {
                metrics.put_error(e.category());
                self.reply(&format!("rollup: {e}\n"));
                return;
            }
            Err(RollupError::NoSuchRollup(m)) => {
                metrics.put_error(ErrorCategory::IllegalArguments);
                self.reply(&format!("rollup: No such rollup: {m}\n"));
                return;
            }
        };
        match store.add_rollup_point(&mut self.batch, &point, &target) {
            Ok(()) => {}
            Err(AddError::Put(e)) => {
                metrics.put_error(e.category());
                self.reply(&format!("rollup: {e}\n"));
            }
            Err(AddError::Internal(msg)) => {
                tracing::error!(error = %msg, "Unexpected exception caught while serving rollup");
            }
            Err(AddError::Storage(e)) => self.storage_failed("rollup", &e),
        }
    }

    /// Writes pending points; a storage failure is reported per point as OpenTSDB does when
    /// `tsd.rpc.telnet.return_errors` is on (spec: ingest §1.6).
    fn commit(&mut self) {
        let (pending, rollups) = (self.batch.len(), self.batch.rollup_points());
        match self.tsd.store.commit(&mut self.batch, false) {
            Ok(n) => self.tsd.metrics.point_added(Protocol::Telnet, n),
            Err(e) => {
                // Logged (once in a while) and counted by the store; each point's client hears of it.
                let lines =
                    std::iter::repeat_n("put", pending as usize).chain(std::iter::repeat_n("rollup", rollups as usize));
                for command in lines {
                    self.storage_failed(command, &e);
                }
                self.batch = self.tsd.store.new_batch();
            }
        }
    }

    fn reply(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }
}

/// The commands this daemon answers, in OpenTSDB's registration order (spec: ingest §1.4).
fn enabled_commands(tsd: &Tsd) -> Vec<&'static str> {
    let mut commands = vec!["stats", "dropcaches", "version", "exit", "help"];
    if tsd.config.mode.writes() {
        commands.extend(["put", "rollup", "histogram"]);
    }
    if tsd.config.diediedie {
        commands.push("diediedie");
    }
    commands
}
