//! The listener: one TCP port that serves both OpenTSDB protocols (spec: ingest §1.1).
//!
//! Each connection's first byte decides its protocol for life, as in OpenTSDB: an ASCII capital letter (an HTTP
//! method) makes it HTTP, anything else the telnet-style line protocol. The byte is only peeked, so the chosen
//! handler reads the stream from its start. A connection that closes before sending a byte is simply dropped
//! (port probes, potsdb's `check_host`).
pub mod chukwa;
pub mod conn;
pub mod http;
pub mod telnet;

/// What 2.4 answers a histogram write with when `tsd.core.histograms.config` is unset, its default: rtsd stores
/// no histograms (spec: ingest §1.7, query §6.12), on telnet (`histogram: illegal argument: ...`) and on
/// `/api/histogram` (503).
pub const HISTOGRAMS_DISABLED: &str =
    "Histogram storage has not been enabled. Check the 'tsd.core.histograms.config' configuration.";

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::Store;

/// Everything a connection handler needs: the daemon's shared state.
pub struct Tsd {
    pub config: Config,
    pub store: Store,
    pub metrics: Arc<Metrics>,
    /// Cancelled when the daemon shuts down (signal or `diediedie`).
    pub shutdown: CancellationToken,
    pub started: Instant,
    /// The port actually bound (differs from the config when it asked for port 0).
    pub port: u16,
    /// Running and recently completed `/api/query` requests (`/api/stats/query`).
    pub queries: http::stats::QueryLog,
    /// When the store gauges were last computed (see [`Tsd::refresh_store_gauges`]).
    pub store_gauges_at: std::sync::Mutex<Option<Instant>>,
    /// Every open client connection of both listeners (see [`conn`]).
    pub connections: Arc<conn::Registry>,
    /// The request-body bytes all connections may buffer together (see [`conn::BodyBudget`]).
    pub bodies: conn::BodyBudget,
}

impl Tsd {
    /// Sets `rtsd_series`, `rtsd_disk_bytes` and `rtsd_rocksdb_background_work` before `/metrics` is written. Counting walks the series index
    /// (a second per few million series), so a count is reused for 10 s however often `/metrics` is read.
    pub fn refresh_store_gauges(&self) {
        // Cheap (a few RocksDB properties, jemalloc's counters), so always current.
        self.metrics.rocksdb_background_work.set(self.store.background_work() as i64);
        if let Some(heap) = crate::alloc::heap_stats() {
            self.metrics.heap_allocated_bytes.set(heap.allocated as i64);
            self.metrics.heap_resident_bytes.set(heap.resident as i64);
        }
        let Ok(mut at) = self.store_gauges_at.lock() else { return };
        if at.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(10)) {
            return;
        }
        *at = Some(Instant::now());
        // On HBase the index is shared by every node and counting it is a scan of all of it (more than 10 s at
        // 100 k series): `/metrics` leaves the gauge out there (see Tsd::metrics_text).
        if self.store.series_index_is_complete() {
            match self.store.series_count() {
                Ok(n) => {
                    self.metrics.series.set(n as i64);
                }
                Err(e) => tracing::warn!(error = %e, "counting series failed"),
            }
        }
        self.metrics.disk_bytes.set(self.store.disk_bytes() as i64);
    }

    /// The `/metrics` text, its store gauges refreshed. Without `rtsd_series` where the series index is shared
    /// (HBase): no node can count it cheaply, and a 0 would read as "no series".
    pub fn metrics_text(&self) -> String {
        self.refresh_store_gauges();
        if self.store.series_index_is_complete() {
            self.metrics.encode()
        } else {
            self.metrics.encode_except(&["rtsd_series"])
        }
    }

    fn stats(&self) -> (Vec<crate::metrics::Stat>, u64, Vec<(String, String)>) {
        let uids = self.store.uids();
        let mut stats = self.metrics.opentsdb_stats(|kind| {
            let t = uids.table(kind);
            (t.cache_size() as u64, t.ids_used(), t.ids_available())
        });
        // Whether the store takes writes now (1) or refuses them (0: a nearly full disk, failing writes).
        let writable = u64::from(self.store.health().writable());
        stats.push(crate::metrics::Stat { name: "storage.writable", value: writable, tag: None });
        stats.extend(self.store.engine().client_stats());
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let port = self.config.stats_with_port.then_some(self.port);
        (stats, now, crate::metrics::stat_host_tags(self.config.stats_canonical, port))
    }

    /// OpenTSDB's `stats` lines (telnet `stats`, `/stats`).
    pub fn stats_text(&self) -> String {
        let (stats, now, tags) = self.stats();
        crate::metrics::render_stats_text(&stats, now, &tags)
    }

    /// `/api/stats`.
    pub fn stats_json(&self) -> String {
        let (stats, now, tags) = self.stats();
        crate::metrics::render_stats_json(&stats, now, &tags)
    }
}

/// Binds the listener. Separate from [`serve`] so callers learn the bound address first.
pub async fn bind(config: &Config) -> std::io::Result<TcpListener> {
    bind_addr(SocketAddr::new(config.bind, config.port))
}

/// Binds a listening socket with SO_REUSEADDR, so a restarted daemon can take its port back at once.
pub(crate) fn bind_addr(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Accepts connections until shutdown, then waits for open connections to finish their current work.
pub async fn serve(listener: TcpListener, tsd: Arc<Tsd>) {
    accept_loop(listener, tsd, "", |stream, peer, tsd, conn| async move {
        handle_connection(stream, peer, &tsd, conn).await
    })
    .await
}

/// Closes connections idle past their limits, every second, until shutdown (see [`conn`]).
pub async fn reap_idle_connections(tsd: Arc<Tsd>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            _ = tsd.shutdown.cancelled() => return,
        }
        let closed = tsd.connections.reap();
        for _ in 0..closed {
            tsd.metrics.connection_exception("timeout");
        }
    }
}

/// The accept loop both listeners run: the connection cap, the open-connections gauge, and on shutdown, waiting
/// for open connections to finish. `listener_name` prefixes log lines ("" for the main port).
pub(crate) async fn accept_loop<H, F>(listener: TcpListener, tsd: Arc<Tsd>, listener_name: &str, handler: H)
where
    H: Fn(TcpStream, SocketAddr, Arc<Tsd>, Arc<conn::Conn>) -> F,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let tracker = TaskTracker::new();
    // Failed accepts back off from 10 ms to 1 s while they keep failing (out of file descriptors: sockets must
    // close before another can be accepted), instead of spinning and logging 20 lines a second.
    let mut backoff = std::time::Duration::from_millis(10);
    static ACCEPT_FAILED: crate::logs::Throttle = crate::logs::Throttle::new(std::time::Duration::from_secs(10));
    static REJECTED: crate::logs::Throttle = crate::logs::Throttle::new(std::time::Duration::from_secs(10));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = tsd.shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => {
                backoff = std::time::Duration::from_millis(10);
                conn
            }
            Err(e) => {
                if let Some(unlogged) = ACCEPT_FAILED.allow() {
                    tracing::warn!(error = %e, listener = listener_name, unlogged_since_last = unlogged, "accept failed; backing off");
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = tsd.shutdown.cancelled() => break,
                }
                backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                continue;
            }
        };
        let registered = match tsd.connections.admit(tsd.config.connections_limit, tsd.config.first_byte_timeout) {
            Ok(registered) => registered,
            Err(conn::Full) => {
                // Every connection is busy: the new one is closed at once, nothing written (spec: ingest §1.3).
                tsd.metrics.connection("rejected");
                if let Some(unlogged) = REJECTED.allow() {
                    tracing::warn!(%peer, limit = tsd.config.connections_limit, listener = listener_name, unlogged_since_last = unlogged, "connection refused: every connection is busy at tsd.core.connections.limit");
                }
                drop(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // The gauge is counted before the handler's future exists, and a guard keeps it right even if a handler
        // panics (tokio contains the panic to its task).
        let open = OpenConnection::new(&tsd.metrics);
        let connection = handler(stream, peer, tsd.clone(), registered.conn.clone());
        tracker.spawn(async move {
            let _open = open;
            let _registered = registered;
            connection.await;
        });
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
}

/// Counts a connection as open for as long as it lives (see [`accept_loop`]).
pub(crate) struct OpenConnection(Arc<crate::metrics::Metrics>);

impl OpenConnection {
    pub(crate) fn new(metrics: &Arc<crate::metrics::Metrics>) -> Self {
        metrics.connections_open.inc();
        OpenConnection(metrics.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections_open.dec();
    }
}

async fn handle_connection(stream: TcpStream, peer: SocketAddr, tsd: &Arc<Tsd>, conn: Arc<conn::Conn>) {
    let mut first = [0u8; 1];
    // Until its first byte, the connection's idle limit is rtsd.network.first_byte_timeout_secs.
    let sniffed = tokio::select! {
        n = stream.peek(&mut first) => n,
        _ = tsd.shutdown.cancelled() => return,
        _ = conn.closed.cancelled() => return,
    };
    conn.touch();
    match sniffed {
        Ok(0) | Err(_) => {}
        Ok(_) if first[0].is_ascii_uppercase() => {
            tsd.metrics.connection("http");
            conn.set_idle_limit(tsd.config.http_idle_timeout);
            http::serve_connection(stream, tsd.clone(), conn).await;
        }
        Ok(_) => {
            tsd.metrics.connection("telnet");
            tracing::debug!(%peer, "telnet connection");
            conn.set_idle_limit(tsd.config.telnet_idle_timeout);
            telnet::serve_connection(stream, tsd.clone(), conn).await;
        }
    }
}
