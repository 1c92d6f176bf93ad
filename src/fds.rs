//! The daemon's file-descriptor budget (issue 23): sockets and RocksDB share one per-process limit, and when
//! idle client sockets used it all up, RocksDB could not open a file, failed a flush and refused every write
//! until a restart. So at start:
//!
//! * the soft `RLIMIT_NOFILE` is raised to the hard one (Debian's default soft limit is 1024, the hard one
//!   far higher; systemd's `LimitNOFILE` sets both);
//! * RocksDB keeps at most `rtsd.rocksdb.max_open_files` table files open (by default half the limit);
//! * [`RESERVED`] descriptors stay for RocksDB's other files (write-ahead logs, MANIFEST, its log), the series
//!   log, import files, listeners and the runtime;
//! * client connections get the rest: `tsd.core.connections.limit` is lowered to it when it is 0 (unlimited) or
//!   larger, and a connection over the cap is closed at once (counted, logged once in a while).
//!
//! Descriptors of this process beyond the budget (an operator's `lsof`, a leak) can still make `accept` fail
//! with EMFILE; the accept loop then backs off instead of spinning (`crate::server`).

/// Descriptors kept for everything but table files and client sockets.
pub const RESERVED: u64 = 128;

/// How the descriptors of the process are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// The soft limit after raising it.
    pub limit: u64,
    /// Table files RocksDB may keep open.
    pub rocksdb_files: i32,
    /// Client connections at once (both listeners together).
    pub connections: usize,
}

/// Raises the soft descriptor limit to the hard one and shares it out; `rocksdb_files` and `connections` are
/// the configured values (0: decide).
pub fn plan(rocksdb_files: i32, connections: usize) -> FdBudget {
    let limit = raise_soft_limit();
    share(limit, rocksdb_files, connections)
}

/// [`plan`] for a given limit (the arithmetic, without touching the process).
pub fn share(limit: u64, rocksdb_files: i32, connections: usize) -> FdBudget {
    let rocksdb_files = if rocksdb_files > 0 { rocksdb_files as u64 } else { (limit / 2).clamp(64, 65_536) };
    let left = limit.saturating_sub(rocksdb_files + RESERVED).max(16);
    let connections = if connections == 0 { left } else { (connections as u64).min(left) };
    FdBudget { limit, rocksdb_files: rocksdb_files.min(i32::MAX as u64) as i32, connections: connections as usize }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft limit in force.
fn raise_soft_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls with a valid out-parameter.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    // An "unlimited" hard limit is no descriptor count; the kernel caps a process at fs.nr_open anyway.
    if limit.rlim_cur == libc::RLIM_INFINITY {
        1 << 20
    } else {
        limit.rlim_cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_shared_between_rocksdb_sockets_and_the_rest() {
        // Debian's 1024: half for table files, 128 kept, the rest for clients.
        assert_eq!(share(1024, 0, 0), FdBudget { limit: 1024, rocksdb_files: 512, connections: 384 });
        // A configured connection limit within the budget stands; one beyond it is lowered.
        assert_eq!(share(1024, 0, 100).connections, 100);
        assert_eq!(share(1024, 0, 5000).connections, 384);
        // A configured table-file bound is kept.
        assert_eq!(share(65_536, 1000, 0), FdBudget { limit: 65_536, rocksdb_files: 1000, connections: 64_408 });
        // A tiny limit still leaves some connections.
        assert_eq!(share(100, 0, 0), FdBudget { limit: 100, rocksdb_files: 64, connections: 16 });
    }
}
