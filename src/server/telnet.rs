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

use super::Tsd;
use crate::ingest::{IngestError, SeriesCache, Writer};
use crate::metrics::Protocol;

/// What the connection should do after a chunk of lines.
enum Next {
    Continue,
    Close,
}

/// The words of a put line that name its series (its metric and tags): its key in the connection's cache.
fn series_words<'w>(words: &'w [&'w [u8]]) -> impl Iterator<Item = &'w [u8]> + 'w {
    std::iter::once(words[1]).chain(words[4..].iter().copied())
}

/// At most this many bytes of lines handled as one batch (one write) on a shared cluster (HBase): while a write
/// waits for HBase, the lines that arrive meanwhile are read at once with the next, so one write carries several
/// points of each series in one row's Put, where 64 KiB reads put one point per row (data set B: 1,000 series a
/// round; bench/RESULTS.md). The batch is still written before any of its lines is answered.
const SHARED_BATCH_BYTES: usize = 1 << 20;

/// Serves a telnet connection until it closes, sends a line over the limit, idles past
/// `rtsd.telnet.idle_timeout_secs` (the reaper cancels `conn.closed`, see `super::conn`) or the daemon stops.
pub async fn serve_connection(mut stream: TcpStream, tsd: Arc<Tsd>, conn: Arc<super::conn::Conn>) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut out: Vec<u8> = Vec::new();
    let mut cache = SeriesCache::new(&tsd.store);
    let batch_bytes = if tsd.store.node_local() { 0 } else { SHARED_BATCH_BYTES };
    loop {
        let n = tokio::select! {
            r = stream.read_buf(&mut buf) => r,
            _ = tsd.shutdown.cancelled() => break,
            _ = conn.closed.cancelled() => break,
        };
        conn.touch();
        let mut n = n.map(|n| (n, false));
        // On a shared cluster, what has arrived meanwhile joins the batch (see SHARED_BATCH_BYTES).
        while let Ok((read, _)) = n {
            if read == 0 || buf.len() >= batch_bytes {
                break;
            }
            buf.reserve(batch_bytes - buf.len());
            match stream.try_read_buf(&mut buf) {
                Ok(0) => {
                    n = Ok((read, true));
                    break;
                }
                Ok(more) => n = Ok((read + more, false)),
                // Nothing more now (or an error, which the next read reports): the batch is what was read.
                Err(_) => break,
            }
        }
        let closed = match n {
            Ok((0, _)) => break,
            // The lines before the end are handled first.
            Ok((_, eof)) => eof,
            Err(e) => {
                let kind = if e.kind() == std::io::ErrorKind::ConnectionReset { "reset" } else { "unknown" };
                tsd.metrics.connection_exception(kind);
                break;
            }
        };
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
        if matches!(next, Next::Close) || closed {
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
        tracing::info!(
            bytes,
            unlogged_since_last = unlogged,
            "closing telnet connection: frame length exceeds {MAX_LINE}"
        );
    }
}

/// Handles every complete line in `buf`; returns the bytes consumed.
fn handle_lines(buf: &[u8], tsd: &Tsd, out: &mut Vec<u8>, cache: &mut SeriesCache) -> (usize, Next) {
    let mut writer = Writer::new(&tsd.store, &tsd.config.rules, &tsd.metrics, cache);
    if tsd.config.mode.writes() && writer.batches_names() {
        resolve_new_names(buf, tsd, &mut writer);
    }
    let mut session = Session { tsd, writer, out, puts: 0 };
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

/// Resolves the names of the new series of every complete `put` line in `buf` together (see
/// [`Writer::resolve_names`]), before the lines are handled one by one as usual. Lines that do not parse are left
/// to that handling, which answers them.
fn resolve_new_names(buf: &[u8], tsd: &Tsd, writer: &mut Writer<'_>) {
    let mut names = crate::store::uid::Names::default();
    let mut pos = 0;
    while let Some((line, used)) = telnet::next_line(&buf[pos..]) {
        if telnet::line_too_long(line) {
            break;
        }
        pos += used;
        if let Command::Put(words) = telnet::parse_command(line) {
            if words.len() >= 5 && !writer.is_new_series(series_words(&words)) {
                continue;
            }
            if let Ok(point) = telnet::parse_put(&words, &tsd.config.rules) {
                names.add_point(&point);
            }
        }
    }
    writer.resolve_names(&names);
}

struct Session<'a> {
    tsd: &'a Tsd,
    writer: Writer<'a>,
    out: &'a mut Vec<u8>,
    /// `put` lines seen, reported to the shared counters once per read.
    puts: u64,
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
        self.puts += 1;
        // The cache key of a put line: its metric and tag words.
        let keyed = words.len() >= 5;
        if keyed && self.writer.known(series_words(words), || telnet::parse_put_known_series(words)) {
            return;
        }
        let result = match telnet::parse_put(words, &self.tsd.config.rules) {
            Ok(point) => self.writer.put(&point, keyed, "put"),
            Err(e) => {
                self.writer.refused(&e);
                Err(IngestError::Refused(e))
            }
        };
        if let Err(e) = result {
            self.report(&e, "put");
        }
    }

    /// A `rollup` line (spec: ingest §1.7): parsed as OpenTSDB's `RollupDataPointRpc`, checked against the
    /// rollup configuration, stored in the batch with the puts. Errors are `rollup: <category>: <message>`.
    fn rollup(&mut self, words: &[&[u8]]) {
        self.tsd.metrics.rpc("rollup");
        let result = match telnet::parse_rollup(words) {
            Ok(Some((point, spec))) => self.writer.rollup(point, &spec),
            Ok(None) => {
                // OpenTSDB fails with an unexpected exception here and answers nothing (spec: ingest §1.3).
                tracing::error!("Unexpected exception caught while serving rollup: no interval or aggregator");
                return;
            }
            Err(e) => {
                self.writer.refused(&e);
                Err(IngestError::Refused(e))
            }
        };
        if let Err(e) = result {
            self.report(&e, "rollup");
        }
    }

    /// Writes a line's failure back, when OpenTSDB would (see [`IngestError::telnet_line`]).
    fn report(&mut self, e: &IngestError, command: &str) {
        if let Some(line) = e.telnet_line(command, self.tsd.config.return_errors) {
            self.reply(&line);
        }
    }

    /// Writes pending points; a storage failure is reported per point as OpenTSDB does when
    /// `tsd.rpc.telnet.return_errors` is on (spec: ingest §1.6). Logged and counted by the store.
    fn commit(&mut self) {
        let (points, rollups) = self.writer.pending();
        match self.writer.commit(false) {
            Ok(n) => self.tsd.metrics.point_added(Protocol::Telnet, n),
            Err(e) => {
                let lines =
                    std::iter::repeat_n("put", points as usize).chain(std::iter::repeat_n("rollup", rollups as usize));
                for command in lines {
                    self.tsd.metrics.put_error(ErrorCategory::HbaseErrors);
                    if self.tsd.config.return_errors {
                        self.reply(&crate::ingest::storage_line(command, &e));
                    }
                }
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
