//! Whether the store can take writes, and what went wrong when it could not (issue 23).
//!
//! * **A free-space guard.** Below `rtsd.storage.min_free_mb` of free space on the data directory's file
//!   system, new writes are refused with a transient error ([`StoreError::Unavailable`]: HTTP 503 with
//!   `Retry-After`, telnet `put: HBase error: ...`) before RocksDB ever meets a full disk. Writes already
//!   acknowledged still move from the series log into their rows in that reserve, reads go on, and writes are
//!   taken again as soon as space comes back (checked at most every [`CHECK_MS`] on the write path). RocksDB
//!   itself, once it has failed a write for want of space, stops all writes until its own recovery finds free
//!   space again (polling every 5 s): the guard keeps the store out of that state.
//! * **Failures counted and logged once.** Every storage failure is counted by kind on `/metrics`
//!   (`rtsd_storage_errors_total{kind}`) and logged at most once per [`LOG_EVERY`] per kind, with the count of
//!   those not logged: a failing disk fails every point, and a line each buried the cause.
//! * **A verdict for operators**: [`Health::writable`] (`/api/health`, `rtsd.storage.writable` in `/api/stats`).
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::engine::EngineErrorKind;
use super::StoreError;
use crate::logs::Throttle;
use crate::metrics::Metrics;

/// How often the write path looks at the free space, at most.
const CHECK_MS: i64 = 100;
/// One log line per kind of failure at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// A failed write leaves the store reported unwritable for this long, unless a write succeeds first.
const FAILURE_MEMORY_MS: i64 = 5_000;

/// What went wrong, as the `kind` label of `rtsd_storage_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Refused by the free-space guard.
    LowSpace,
    /// The file system is full (ENOSPC, EDQUOT, RocksDB's NoSpace).
    NoSpace,
    /// Out of file descriptors (EMFILE, ENFILE).
    NoFiles,
    /// Any other failure.
    Other,
    /// The storage cluster cannot be reached for now (the HBase engine: region servers or ZooKeeper down).
    Unreachable,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::LowSpace => "low_space",
            FailureKind::NoSpace => "no_space",
            FailureKind::NoFiles => "no_files",
            FailureKind::Other => "other",
            FailureKind::Unreachable => "unreachable",
        }
    }

    /// Classifies a failure: transient ones heal by themselves once space or descriptors come back.
    pub fn of(e: &StoreError) -> FailureKind {
        match e {
            StoreError::Unavailable(_) => FailureKind::LowSpace,
            StoreError::Io { source, .. } => match source.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) => FailureKind::NoSpace,
                Some(libc::EMFILE) | Some(libc::ENFILE) => FailureKind::NoFiles,
                _ => FailureKind::Other,
            },
            StoreError::Engine(e) => match e.kind {
                EngineErrorKind::NoSpace => FailureKind::NoSpace,
                EngineErrorKind::NoFiles => FailureKind::NoFiles,
                EngineErrorKind::Other => FailureKind::Other,
                EngineErrorKind::Unavailable => FailureKind::Unreachable,
            },
            _ => FailureKind::Other,
        }
    }

    /// Whether a client should simply try again later (503 with Retry-After) rather than hear of a fault.
    pub fn is_transient(self) -> bool {
        self != FailureKind::Other
    }
}

pub struct Health {
    dir: PathBuf,
    min_free_bytes: u64,
    metrics: Arc<Metrics>,
    /// When the free space was last looked at (ms), what it was, and the guard's verdict.
    checked_ms: AtomicI64,
    free_bytes: AtomicU64,
    low_space: AtomicBool,
    /// When a write last failed (ms; 0: never since the last success).
    failed_ms: AtomicI64,
    /// One log throttle per [`FailureKind`], indexed by the variant.
    throttles: [Throttle; 5],
}

impl Health {
    pub fn new(dir: PathBuf, min_free_bytes: u64, metrics: Arc<Metrics>) -> Health {
        Health {
            dir,
            min_free_bytes,
            metrics,
            checked_ms: AtomicI64::new(i64::MIN),
            free_bytes: AtomicU64::new(u64::MAX),
            low_space: AtomicBool::new(false),
            failed_ms: AtomicI64::new(0),
            throttles: [const { Throttle::new(LOG_EVERY) }; 5],
        }
    }

    /// Refuses a new write while the free space is below the reserve. Cheap: an atomic load, and a `statvfs`
    /// at most every [`CHECK_MS`].
    pub fn check_writable(&self) -> Result<(), StoreError> {
        let now = crate::timefmt::now_ms();
        if now.saturating_sub(self.checked_ms.load(Ordering::Relaxed)) >= CHECK_MS {
            self.checked_ms.store(now, Ordering::Relaxed);
            self.refresh_free_space();
        }
        if !self.low_space.load(Ordering::Relaxed) {
            return Ok(());
        }
        let e = StoreError::Unavailable(format!(
            "the data directory's disk has {} MB free, below rtsd.storage.min_free_mb ({} MB): writes resume once \
             space is freed",
            self.free_bytes.load(Ordering::Relaxed) >> 20,
            self.min_free_bytes >> 20
        ));
        self.failed("write", &e);
        Err(e)
    }

    fn refresh_free_space(&self) {
        if self.min_free_bytes == 0 {
            return;
        }
        let Some(free) = free_bytes(&self.dir) else { return };
        self.free_bytes.store(free, Ordering::Relaxed);
        let was_low = self.low_space.load(Ordering::Relaxed);
        // A quarter of the reserve of hysteresis: a disk hovering at the line does not flap.
        let low =
            if was_low { free < self.min_free_bytes + self.min_free_bytes / 4 } else { free < self.min_free_bytes };
        if low != was_low {
            self.low_space.store(low, Ordering::Relaxed);
            if low {
                tracing::error!(
                    free_mb = free >> 20,
                    min_free_mb = self.min_free_bytes >> 20,
                    "data directory's disk is nearly full: refusing writes until space is freed"
                );
            } else {
                tracing::warn!(free_mb = free >> 20, "data directory's disk has space again: taking writes");
            }
        }
    }

    /// Counts and logs (throttled per kind) a failure of `operation` (`write`, `flush`, `uid`, ...).
    pub fn failed(&self, operation: &'static str, e: &StoreError) {
        let kind = FailureKind::of(e);
        self.metrics.storage_error(kind.as_str());
        self.failed_ms.store(crate::timefmt::now_ms(), Ordering::Relaxed);
        if let Some(unlogged) = self.throttles[kind as usize].allow() {
            tracing::error!(operation, kind = kind.as_str(), unlogged_since_last = unlogged, error = %e, "storage failure");
        }
    }

    /// A write went through: the store takes writes again.
    pub fn succeeded(&self) {
        if self.failed_ms.load(Ordering::Relaxed) != 0 {
            self.failed_ms.store(0, Ordering::Relaxed);
        }
    }

    /// Whether writes are taken now: enough free space, and no write failed in the last few seconds.
    pub fn writable(&self) -> bool {
        self.refresh_free_space();
        let failed = self.failed_ms.load(Ordering::Relaxed);
        !self.low_space.load(Ordering::Relaxed)
            && (failed == 0 || crate::timefmt::now_ms().saturating_sub(failed) > FAILURE_MEMORY_MS)
    }

    /// The free space last seen on the data directory's file system (`u64::MAX` before the first look).
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes.load(Ordering::Relaxed)
    }
}

/// The bytes an unprivileged writer may still use on the file system holding `dir`.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `stat` a valid out-parameter for the call.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_classified_by_what_heals_them() {
        let io = |errno| StoreError::Io { context: "series log", source: std::io::Error::from_raw_os_error(errno) };
        assert_eq!(FailureKind::of(&io(libc::ENOSPC)), FailureKind::NoSpace);
        assert_eq!(FailureKind::of(&io(libc::EMFILE)), FailureKind::NoFiles);
        assert_eq!(FailureKind::of(&io(libc::EIO)), FailureKind::Other);
        assert_eq!(FailureKind::of(&StoreError::Unavailable("low".into())), FailureKind::LowSpace);
        assert_eq!(FailureKind::of(&StoreError::Corrupt("bad".into())), FailureKind::Other);
        assert!(FailureKind::NoSpace.is_transient() && !FailureKind::Other.is_transient());
    }

    #[test]
    fn the_guard_refuses_writes_below_the_reserve_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::new());
        // No file system has this much free: every write is refused, and counted.
        let health = Health::new(dir.path().to_path_buf(), u64::MAX / 2, metrics.clone());
        let e = health.check_writable().unwrap_err();
        assert!(e.to_string().contains("below rtsd.storage.min_free_mb"), "{e}");
        assert!(!health.writable());
        assert!(metrics.encode().contains("rtsd_storage_errors_total{kind=\"low_space\"} 1\n"), "{}", metrics.encode());
        // Without a reserve nothing is refused.
        let health = Health::new(dir.path().to_path_buf(), 0, metrics);
        assert!(health.check_writable().is_ok() && health.writable());
    }
}
