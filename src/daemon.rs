//! Starting and stopping the daemon: open the store, bind the port, serve until a signal or `diediedie`, then
//! drain connections and flush RocksDB so a restart replays nothing.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::server::{self, Tsd};
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open data directory {dir}: {source}")]
    Store { dir: String, source: StoreError },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// A daemon that is serving.
pub struct Running {
    pub addr: SocketAddr,
    /// Where the Chukwa collector port listens, when it does (`rtsd.chukwa.port`).
    pub chukwa_addr: Option<SocketAddr>,
    pub tsd: Arc<Tsd>,
    task: tokio::task::JoinHandle<()>,
    chukwa_task: Option<tokio::task::JoinHandle<()>>,
    rollup_task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Asks the daemon to stop (as SIGTERM does).
    pub fn shutdown(&self) {
        self.tsd.shutdown.cancel();
    }

    /// Waits until every connection is closed and the store is flushed.
    pub async fn stopped(self) {
        let _ = self.task.await;
        if let Some(task) = self.chukwa_task {
            let _ = task.await;
        }
        let _ = self.rollup_task.await;
        if let Err(e) = self.tsd.store.flush() {
            tracing::error!(error = %e, "flush at shutdown failed; the write-ahead log still holds every point");
        }
    }
}

/// Opens the store and starts serving on the configured port.
pub async fn start(mut config: Config) -> Result<Running, StartError> {
    let budget = crate::fds::plan(config.max_open_files, config.connections_limit);
    tracing::info!(
        limit = budget.limit,
        rocksdb_files = budget.rocksdb_files,
        connections = budget.connections,
        "file descriptors shared out"
    );
    config.max_open_files = budget.rocksdb_files;
    config.connections_limit = budget.connections;
    let metrics = Arc::new(Metrics::new());
    let store = Store::open(&config.store_options(), metrics.clone())
        .map_err(|source| StartError::Store { dir: config.data_dir.display().to_string(), source })?;
    let listener = server::bind(&config)
        .await
        .map_err(|source| StartError::Bind { addr: SocketAddr::new(config.bind, config.port), source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr: SocketAddr::new(config.bind, config.port), source })?;
    let chukwa =
        server::chukwa::bind_configured(&config).await.map_err(|(addr, source)| StartError::Bind { addr, source })?;
    let config_max_buffered = config.max_buffered_bytes;
    let tsd = Arc::new(Tsd {
        config,
        store,
        metrics,
        shutdown: CancellationToken::new(),
        started: Instant::now(),
        port: addr.port(),
        queries: Default::default(),
        store_gauges_at: Default::default(),
        connections: Default::default(),
        bodies: server::conn::BodyBudget::new(config_max_buffered),
    });
    let (chukwa_addr, chukwa_task) = match chukwa {
        Some(listener) => {
            let collector = crate::chukwa::Collector::open(&tsd.store, tsd.config.chukwa.clone())
                .map_err(|source| StartError::Store { dir: tsd.config.data_dir.display().to_string(), source })?;
            let addr = listener.local_addr().ok();
            if let Some(chukwa_addr) = addr {
                tracing::info!(%chukwa_addr, "Chukwa collector port listening");
            }
            (addr, Some(tokio::spawn(server::chukwa::serve(listener, tsd.clone(), Arc::new(collector)))))
        }
        None => (None, None),
    };
    // Announced before the first connection is accepted: the port takes connections from the bind on, and a
    // client that got in (a test reading `/logs`) must find the announcement already made.
    let data_dir = tsd.config.data_dir.display().to_string();
    tracing::info!(%addr, data_dir, "rtsd ready: telnet put and HTTP on one port");
    let task = tokio::spawn(server::serve(listener, tsd.clone()));
    let rollup_task = tokio::spawn(fold_rollups(tsd.clone()));
    tokio::spawn(flush_series_table(tsd.clone()));
    tokio::spawn(seal_owned_rows(tsd.clone()));
    if let Some(options) = tsd.store.shared_log_options() {
        tokio::spawn(tend_shared_log(tsd.clone(), options.lease));
    }
    tokio::spawn(write_counters(tsd.clone()));
    tokio::spawn(compact_after_bursts(tsd.clone()));
    tokio::spawn(server::reap_idle_connections(tsd.clone()));
    Ok(Running { addr, chukwa_addr, tsd, task, chukwa_task, rollup_task })
}

/// Folds newly written raw rows into the automatic rollup tables every `rtsd.rollups.flush_interval_ms`, and
/// once more at shutdown (see `store::rollup`). Rows not folded before a crash are folded after the restart:
/// their pending marks are stored with the points.
///
/// Between those folds it watches the backlog: once [`FOLD_BACKLOG_ROWS`] rows of hours older than the newest
/// hour written wait, it folds them, [`FOLD_CHUNK_ROWS`] at a time (a query's fold waits for at most one chunk).
/// A burst of writes in time order thus gets its hours folded as it moves past them, and a query right after
/// it folds only the newest hour, not the whole burst (issue 22 item 5: q1 right after data set B's burst took
/// 3 s, against 50 ms warm, all of it the fold of the day's 24 000 rows of its metric).
async fn fold_rollups(tsd: Arc<Tsd>) {
    let every = std::time::Duration::from_millis(tsd.config.rollups.flush_interval_ms);
    let poll = every.min(std::time::Duration::from_millis(FOLD_POLL_MS));
    let mut last_full = std::time::Instant::now();
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(poll) => false,
            _ = tsd.shutdown.cancelled() => true,
        };
        let full = stopping || last_full.elapsed() >= every;
        if !full && tsd.store.closed_backlog() < FOLD_BACKLOG_ROWS {
            continue;
        }
        let worker = tsd.clone();
        // Periodic folds take what the series table's flushes wrote; the last one settles (see fold_flushed).
        let fold = move || match (stopping, full) {
            (true, _) => worker.store.fold_rollups(None),
            (false, true) => worker.store.fold_flushed(None),
            (false, false) => {
                // All of it (a query after the burst finds none), but not past the period: writes into passed
                // hours that never stop must not hold off the full fold.
                let (mut folded, started) = (0, std::time::Instant::now());
                while worker.store.closed_backlog() > 0 && started.elapsed() < every {
                    match worker.store.fold_closed(FOLD_CHUNK_ROWS)? {
                        0 => break,
                        n => folded += n,
                    }
                }
                Ok(folded)
            }
        };
        if full {
            last_full = std::time::Instant::now();
        }
        if stopping && tsd.store.folds_resume_elsewhere() {
            // No last fold: what is left keeps its stored marks for the next start or another node.
            return;
        }
        // A fold of a large backlog through HBase's round trips takes minutes: on a shutdown meanwhile it stops
        // after the chunk being written (see Store::abandon_folds) instead of holding up the daemon's exit.
        let abandon = tsd.store.folds_resume_elsewhere().then(|| {
            let tsd = tsd.clone();
            tokio::spawn(async move {
                tsd.shutdown.cancelled().await;
                tsd.store.abandon_folds();
            })
        });
        // Folds while the daemon runs are background work, on a thread of their own at a lower CPU priority, so
        // that ingest keeps its rate while they run: folding passed hours took a core for the whole of data set
        // B's burst and cut its ingest by ~40% (bench/RESULTS.md, 2026-11-29 00:23). A query folds its own metric
        // at its own priority; the last fold at shutdown runs at the normal one. (A thread per fold, not the
        // blocking pool: an unprivileged thread cannot raise its priority back, and the pool's threads are reused.)
        let (sent, outcome) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new().name("rtsd-fold".into()).spawn(move || {
            if !stopping {
                lower_this_threads_priority();
            }
            let _ = sent.send(fold());
        });
        let outcome = match spawned {
            Ok(_) => outcome.await.map_err(|_| "the fold's thread panicked".to_string()),
            Err(e) => Err(format!("no thread for the fold: {e}")),
        };
        if let Some(abandon) = abandon {
            abandon.abort();
        }
        match outcome {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "folding raw rows into rollups failed; will retry"),
            Err(e) => tracing::error!(error = %e, "rollup task failed"),
        }
        if stopping {
            return;
        }
    }
}

/// How much lower than the daemon's a background fold's CPU priority is (a nice value: higher is lower).
const BACKGROUND_NICE: libc::c_int = 10;

/// Lowers the calling thread's CPU priority by [`BACKGROUND_NICE`] (Linux: a thread's own nice value). Best
/// effort: on failure the thread keeps the daemon's priority.
fn lower_this_threads_priority() {
    // SAFETY: gettid, getpriority and setpriority on the calling thread's own id touch no memory of ours;
    // getpriority returns -1 both for nice -1 and for an error, which errno tells apart.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if now == -1 && *libc::__errno_location() != 0 {
            return;
        }
        libc::setpriority(libc::PRIO_PROCESS, tid, (now + BACKGROUND_NICE).min(19));
    }
}

/// How often the rollup task looks at the backlog of rows to fold (see [`fold_rollups`]).
const FOLD_POLL_MS: u64 = 200;
/// Rows of passed hours that make the rollup task fold before its period is up.
const FOLD_BACKLOG_ROWS: usize = 1024;
/// Rows per fold of passed hours: how long a query's own fold may wait for the daemon's.
const FOLD_CHUNK_ROWS: usize = 512;

/// Writes the in-memory series table's points into their rows (see `store::pending`) once it holds
/// [`FLUSH_POINTS`] points or its oldest points waited [`FLUSH_INTERVAL_MS`]. A flush costs a merge operand, a
/// rollup mark and an index probe per row it writes, whatever that row's point count: flushing by points and not
/// by the clock keeps that cost per point the same at any ingest rate (at 2 s, a slow machine paid it for every
/// few points). Queries take the table's points without waiting for it; readers that go to the engine directly
/// (meta, annotations, folds) and deletes flush it first (`Store::settle`), so the threshold bounds what they wait
/// for during a burst. Shutdown flushes what is left (`Store::flush`).
async fn flush_series_table(tsd: Arc<Tsd>) {
    let poll = std::time::Duration::from_millis(FLUSH_POLL_MS);
    // On a shared engine other nodes read the points only once they are flushed: its own, shorter interval.
    let interval = tsd
        .store
        .shared_log_options()
        .map_or(std::time::Duration::from_millis(FLUSH_INTERVAL_MS), |o| o.flush_interval);
    let mut last = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = tsd.shutdown.cancelled() => return,
        }
        let points = tsd.store.pending_points();
        if points == 0 {
            last = std::time::Instant::now();
            continue;
        }
        if points < FLUSH_POINTS && last.elapsed() < interval {
            continue;
        }
        last = std::time::Instant::now();
        let worker = tsd.clone();
        // A failed flush is counted and logged (once in a while) by the store, and retried.
        if let Err(e) = tokio::task::spawn_blocking(move || worker.store.flush_in_background()).await {
            tracing::error!(error = %e, "series table flush task failed");
        }
    }
}

/// Writes the rollups of the rows the series table's flushes fold themselves once their series moved on (see
/// `store::rollup::owned`), at the daemon's priority and off the flush that readers wait for; writers that find
/// many queued seal some themselves (see `Store::commit`).
async fn seal_owned_rows(tsd: Arc<Tsd>) {
    let poll = std::time::Duration::from_millis(FLUSH_POLL_MS);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = tsd.shutdown.cancelled() => return,
        }
        if tsd.store.sealing_backlog() == 0 {
            continue;
        }
        let worker = tsd.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || worker.store.seal_in_background(usize::MAX)).await {
            tracing::error!(error = %e, "rollup seal task failed");
        }
    }
}

/// Renews this node's lease on its records in the shared series log and takes over the records of nodes whose
/// lease expired (see `store::shared_log`), a few times per lease.
async fn tend_shared_log(tsd: Arc<Tsd>, lease: std::time::Duration) {
    let every = (lease / 6).max(std::time::Duration::from_millis(100));
    loop {
        let worker = tsd.clone();
        match tokio::task::spawn_blocking(move || worker.store.tend_shared_log()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                static FAILED: crate::logs::Throttle = crate::logs::Throttle::new(std::time::Duration::from_secs(60));
                if let Some(earlier) = FAILED.allow() {
                    tracing::warn!(error = %e, earlier, "tending the shared series log failed; will retry");
                }
            }
            Err(e) => tracing::error!(error = %e, "shared series log task failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = tsd.shutdown.cancelled() => return,
        }
    }
}

/// Writes the series' point counters (TSMeta `totalDatapoints`, `lastReceived`) counted in memory on ingest
/// (see `store::series`); shutdown's flush writes the rest.
async fn write_counters(tsd: Arc<Tsd>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(crate::store::series::COUNTER_WRITE_SECS)) => {}
            _ = tsd.shutdown.cancelled() => return,
        }
        let worker = tsd.clone();
        match tokio::task::spawn_blocking(move || worker.store.flush_counters()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "writing the series' point counters failed; will retry"),
            Err(e) => tracing::error!(error = %e, "series counter task failed"),
        }
    }
}

/// Once nothing has been written for [`COMPACT_AFTER_IDLE_SECS`] after a burst of writes, compacts what the burst
/// left (`Store::compact_written`): the store settles into its compact, packed form instead of keeping the
/// burst's last row fragments in uncompressed level-0 files until more writes push them down. Steady ingest never
/// pauses that long, and leaves compaction to RocksDB.
async fn compact_after_bursts(tsd: Arc<Tsd>) {
    let mut seen = tsd.store.write_activity();
    let mut since = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            _ = tsd.shutdown.cancelled() => return,
        }
        let now = tsd.store.write_activity();
        if now != seen {
            (seen, since) = (now, std::time::Instant::now());
            continue;
        }
        if since.elapsed().as_secs() < COMPACT_AFTER_IDLE_SECS || !tsd.store.compaction_owed() {
            continue;
        }
        let worker = tsd.clone();
        match tokio::task::spawn_blocking(move || worker.store.compact_written()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "compacting after a burst of writes failed; will retry"),
            Err(e) => tracing::error!(error = %e, "compaction task failed"),
        }
    }
}

/// Seconds without writes after which a burst's leftovers are compacted (see [`compact_after_bursts`]).
const COMPACT_AFTER_IDLE_SECS: u64 = 10;

/// The longest the series table keeps points before writing them into rows (at low ingest rates); longer
/// gathers more points per row fragment, shorter keeps the series log (replayed after a crash) smaller.
const FLUSH_INTERVAL_MS: u64 = 10_000;
/// The series table's size that starts a flush: each row then gets some points per merge operand under load
/// (B's 4,000 series: ~100), and the table stays far below the writers' own bound (`store::MAX_PENDING_POINTS`).
/// Every read settles the table first, so a query during or right after a burst waits for what it holds: at
/// 1,200,000 (polled every 100 ms) q1's first answer after B's burst waited 136-233 ms for it, at 400,000 (every
/// 25 ms) 25-60 ms, for ~5% more CPU in flushes (bench/RESULTS.md, 2026-11-29 19:00).
const FLUSH_POINTS: u64 = 400_000;
/// How often the flush task looks at the table's size (at 3 M points/s, 75,000 points arrive meanwhile).
const FLUSH_POLL_MS: u64 = 25;

/// Runs until SIGINT, SIGTERM or `diediedie`.
pub async fn run(config: Config) -> Result<(), StartError> {
    // Handlers first: a SIGTERM sent as soon as "ready" is logged must shut down gracefully, not kill.
    let signals = Signals::install();
    let running = start(config).await?;
    let token = running.tsd.shutdown.clone();
    tokio::spawn(async move {
        signals.wait().await;
        tracing::info!("shutdown requested");
        token.cancel();
    });
    running.stopped().await;
    tracing::info!("rtsd stopped");
    Ok(())
}

/// SIGTERM and SIGINT, registered before the daemon announces itself.
struct Signals {
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{signal, SignalKind};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(term), Ok(int)) => Signals { streams: Some((term, int)) },
            _ => Signals { streams: None },
        }
    }

    async fn wait(self) {
        match self.streams {
            Some((mut term, mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_threads_nice() -> libc::c_int {
        // SAFETY: as in lower_this_threads_priority.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    // A background fold's thread runs BACKGROUND_NICE below the daemon, and only that thread: the caller's
    // priority (here the test's thread, in the daemon the runtime's) is unchanged.
    #[test]
    fn a_background_folds_thread_runs_at_a_lower_priority_than_the_rest() {
        let before = this_threads_nice();
        let lowered = std::thread::spawn(|| {
            let before = this_threads_nice();
            lower_this_threads_priority();
            (before, this_threads_nice())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before, (before + BACKGROUND_NICE).min(19)));
        assert_eq!(this_threads_nice(), before);
    }
}
