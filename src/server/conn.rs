//! Client connections: admission at the cap, idleness, and the bytes their request bodies hold (issue 23).
//!
//! OpenTSDB closes a connection over `tsd.core.connections.limit` at once, and has no idle timeout unless
//! `tsd.core.socket.timeout` is set, so ten silent sockets locked every other client out for good. Here:
//!
//! * every connection is registered with the time it last sent or received a byte and whether a request of
//!   its is being handled ([`Conn`]);
//! * at the cap, a new connection takes the place of the longest-idle one that is not handling a request
//!   (idle for at least [`MIN_IDLE_TO_EVICT_MS`]); only when every connection is busy is the new one refused,
//!   counted (`rpc.connectionmgr.connections type=rejected`) and logged once in a while;
//! * a reaper closes connections idle past their limit: one that never sent a byte after
//!   `rtsd.network.first_byte_timeout_secs`, a telnet one after `rtsd.telnet.idle_timeout_secs`, an HTTP one
//!   between requests after `rtsd.http.idle_timeout_secs` (`tsd.core.socket.timeout`, when set, is the limit
//!   for all three, as in OpenTSDB);
//! * request bodies being buffered hold permits of one process-wide budget ([`BodyBudget`]), so many slow or
//!   held bodies cannot together take the memory that one is allowed.
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

use crate::logs::Throttle;
use crate::timefmt::now_ms;

/// A connection idle for less than this is never closed to make room for a new one.
pub const MIN_IDLE_TO_EVICT_MS: i64 = 1_000;

/// One registered connection's state, shared by its handler, the registry and the reaper.
#[derive(Debug)]
pub struct Conn {
    last_active_ms: AtomicI64,
    /// Requests (HTTP) or batches of lines (telnet) being handled: never closed for idleness meanwhile.
    busy: AtomicUsize,
    /// How long it may stay idle (ms); set by its handler as it learns what the connection is.
    idle_limit_ms: AtomicI64,
    /// Cancelled to close the connection (idle, or evicted at the cap).
    pub closed: CancellationToken,
}

impl Conn {
    /// Bytes went in or out.
    pub fn touch(&self) {
        self.last_active_ms.store(now_ms(), Ordering::Relaxed);
    }

    pub fn set_idle_limit(&self, limit: Duration) {
        self.idle_limit_ms.store(limit.as_millis().min(i64::MAX as u128) as i64, Ordering::Relaxed);
    }

    /// Marks a request as being handled until the guard drops.
    pub fn busy(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::AcqRel);
        BusyGuard(self.clone())
    }

    fn idle_ms(&self, now: i64) -> Option<i64> {
        (self.busy.load(Ordering::Acquire) == 0)
            .then(|| now.saturating_sub(self.last_active_ms.load(Ordering::Relaxed)))
    }
}

pub struct BusyGuard(Arc<Conn>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Every open connection of both listeners.
#[derive(Default)]
pub struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
}

/// Why a connection was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

impl Registry {
    /// Registers a new connection with `first_byte` as its idle limit. At `limit` (0: none), the longest-idle
    /// connection not handling a request makes room; with none, the new one is refused.
    pub fn admit(self: &Arc<Self>, limit: usize, first_byte: Duration) -> Result<Registered, Full> {
        let now = now_ms();
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        // Evicted connections leave the map when their handlers end; they no longer count against the cap.
        let open = conns.values().filter(|c| !c.closed.is_cancelled()).count();
        if limit > 0 && open >= limit {
            let victim = conns
                .values()
                .filter(|c| !c.closed.is_cancelled())
                .filter_map(|c| c.idle_ms(now).map(|idle| (idle, c)))
                .filter(|(idle, _)| *idle >= MIN_IDLE_TO_EVICT_MS)
                .max_by_key(|(idle, _)| *idle);
            match victim {
                Some((idle, c)) => {
                    c.closed.cancel();
                    static LOG: Throttle = Throttle::new(Duration::from_secs(10));
                    if let Some(unlogged) = LOG.allow() {
                        tracing::info!(
                            idle_ms = idle,
                            limit,
                            unlogged_since_last = unlogged,
                            "connection limit reached: closed the longest-idle connection to admit a new one"
                        );
                    }
                }
                None => return Err(Full),
            }
        }
        let conn = Arc::new(Conn {
            last_active_ms: AtomicI64::new(now),
            busy: AtomicUsize::new(0),
            idle_limit_ms: AtomicI64::new(0),
            closed: CancellationToken::new(),
        });
        conn.set_idle_limit(first_byte);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        conns.insert(id, conn.clone());
        Ok(Registered { id, registry: self.clone(), conn })
    }

    /// Closes connections idle past their limit; returns how many.
    pub fn reap(&self) -> usize {
        let now = now_ms();
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut closed = 0;
        for c in conns.values() {
            let limit = c.idle_limit_ms.load(Ordering::Relaxed);
            if limit > 0 && !c.closed.is_cancelled() && c.idle_ms(now).is_some_and(|idle| idle >= limit) {
                c.closed.cancel();
                closed += 1;
            }
        }
        closed
    }

    /// Connections registered now (evicted ones until their handlers end).
    pub fn len(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connection's place in the registry, given up when its handler ends.
pub struct Registered {
    id: u64,
    registry: Arc<Registry>,
    pub conn: Arc<Conn>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.conns.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// A stream that notes every byte read or written as activity of its connection (HTTP connections, whose
/// reads happen inside hyper).
pub struct ActiveIo<T> {
    inner: T,
    conn: Arc<Conn>,
}

impl<T> ActiveIo<T> {
    pub fn new(inner: T, conn: Arc<Conn>) -> ActiveIo<T> {
        ActiveIo { inner, conn }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ActiveIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.touch();
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ActiveIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.touch();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The process-wide budget of request-body bytes being buffered (`rtsd.http.max_buffered_bytes`).
pub struct BodyBudget {
    permits: Arc<tokio::sync::Semaphore>,
    /// Bytes per permit: the semaphore counts in KiB so that a budget of gigabytes fits its permit count.
    unit: usize,
}

/// Bytes of the budget held by one request's body, returned when it drops.
pub struct BodyPermit(#[allow(dead_code)] Option<tokio::sync::OwnedSemaphorePermit>);

impl BodyBudget {
    pub fn new(bytes: usize) -> BodyBudget {
        let unit = 1024;
        let permits = (bytes / unit).clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        BodyBudget { permits: Arc::new(tokio::sync::Semaphore::new(permits)), unit }
    }

    /// Takes room for `more` bytes on top of `held`, without waiting: `None` when the budget is spent.
    pub fn grow(&self, held: &mut BodyPermit, more: usize) -> Option<()> {
        let units = more.div_ceil(self.unit) as u32;
        let permit = self.permits.clone().try_acquire_many_owned(units).ok()?;
        match &mut held.0 {
            Some(p) => p.merge(permit),
            None => held.0 = Some(permit),
        }
        Some(())
    }

    pub fn empty_permit() -> BodyPermit {
        BodyPermit(None)
    }
}

/// Why a request body could not be received.
#[derive(Debug)]
pub enum BodyError {
    /// Over the per-request limit (declared or received).
    TooLarge,
    /// The process-wide budget is spent: come back later.
    Busy,
    /// It did not arrive within the request timeout.
    TimedOut,
    /// The connection failed mid-body.
    Broken(String),
}

/// Receives a whole request body (chunked or not) of at most `limit` bytes within `timeout`, holding room for its
/// bytes in `budget`. A declared `Content-Length` over the limit is refused before anything is read. Both HTTP
/// listeners read their bodies here.
pub async fn receive_body(
    mut body: hyper::body::Incoming,
    declared: Option<u64>,
    limit: usize,
    budget: &BodyBudget,
    timeout: Duration,
) -> Result<(bytes::Bytes, BodyPermit), BodyError> {
    use http_body_util::BodyExt;
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut held = BodyBudget::empty_permit();
    let mut raw = bytes::BytesMut::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(BodyError::TimedOut),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(BodyError::Broken(e.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        if raw.len() + data.len() > limit {
            return Err(BodyError::TooLarge);
        }
        budget.grow(&mut held, data.len()).ok_or(BodyError::Busy)?;
        raw.extend_from_slice(&data);
    }
    Ok((raw.freeze(), held))
}

/// The `Content-Length` a request declares, if it is a number.
pub fn declared_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers.get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room_and_busy_ones_are_kept() {
        let registry = Arc::new(Registry::default());
        let first = Duration::from_secs(30);
        let a = registry.admit(2, first).unwrap();
        let b = registry.admit(2, first).unwrap();
        // Both just arrived: neither has been idle long enough to give way.
        assert_eq!(registry.admit(2, first).err(), Some(Full));
        a.conn.last_active_ms.store(now_ms() - 5_000, Ordering::Relaxed);
        b.conn.last_active_ms.store(now_ms() - 9_000, Ordering::Relaxed);
        let _busy = b.conn.busy();
        // b is idler but handling a request: a gives way.
        let c = registry.admit(2, first).unwrap();
        assert!(a.conn.closed.is_cancelled() && !b.conn.closed.is_cancelled());
        assert_eq!(registry.len(), 3, "a stays registered until its handler ends");
        drop(a);
        assert_eq!(registry.len(), 2);
        drop((b, c));
        assert!(registry.is_empty());
    }

    #[test]
    fn the_reaper_closes_connections_idle_past_their_limit() {
        let registry = Arc::new(Registry::default());
        let quiet = registry.admit(0, Duration::from_secs(30)).unwrap();
        let fresh = registry.admit(0, Duration::from_secs(30)).unwrap();
        let working = registry.admit(0, Duration::from_secs(30)).unwrap();
        quiet.conn.last_active_ms.store(now_ms() - 31_000, Ordering::Relaxed);
        working.conn.last_active_ms.store(now_ms() - 31_000, Ordering::Relaxed);
        let _busy = working.conn.busy();
        assert_eq!(registry.reap(), 1);
        assert!(quiet.conn.closed.is_cancelled());
        assert!(!fresh.conn.closed.is_cancelled() && !working.conn.closed.is_cancelled());
    }

    #[test]
    fn bodies_share_one_budget() {
        let budget = BodyBudget::new(4096);
        let (mut one, mut two) = (BodyBudget::empty_permit(), BodyBudget::empty_permit());
        assert!(budget.grow(&mut one, 3000).is_some());
        assert!(budget.grow(&mut two, 2000).is_none(), "only 1 KiB is left");
        assert!(budget.grow(&mut two, 1000).is_some());
        drop(one);
        assert!(budget.grow(&mut two, 3000).is_some(), "freed when the first body is done");
    }
}
