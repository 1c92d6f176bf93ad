//! rtsd: a time-series daemon that speaks OpenTSDB 2.4's protocols and stores OpenTSDB's layout in RocksDB.
//!
//! The daemon's pieces, in the order data flows through them:
//! * [`config`]: properties file + flags -> one [`config::Config`].
//! * [`server`]: the shared port (telnet lines and HTTP), connection handling, graceful shutdown.
//! * [`store`]: RocksDB in OpenTSDB's layout: UIDs, rows, the write path, scans.
//! * [`graph`]: the PNG graphs of `/q`, drawn in-process.
//! * [`logs`]: logging, and the ring of recent records `/logs` serves.
//! * [`metrics`]: Prometheus `/metrics` and OpenTSDB's `stats`.
//! * [`scan`]: `rtsd scan`, stored rows printed as `tsdb scan` does, and the command-line query grammar.
//! * [`tools`]: the other `tsdb` tools: `import`, `query`, `uid`, `mkmetric`, `fsck`.
//!
//! Parsing and byte layouts live in the `rtsd-protocol` crate, which does no I/O.

pub mod alloc;
pub mod chukwa;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod fds;
pub mod graph;
pub mod ingest;
pub mod logs;
pub mod metrics;
pub mod query;
pub mod rollup;
pub mod scan;
pub mod server;
pub mod store;
pub mod timefmt;
pub mod tools;
pub mod version;
