//! rtsd's benchmarks: a load generator for data sets A and B of `shared/spec/performance.md`, and a runner that
//! measures rtsd and VictoriaMetrics side by side on loopback.
//!
//! * [`data`]: the data sets, rendered to telnet lines or `/api/put` requests before any clock starts.
//! * [`load`]: K blocking connections on threads, released together; a discard sink to time the generator alone.
//! * [`server`]: the servers under test with scratch data directories, stopped by a guard on drop.
//! * [`runner`]: interleaved runs, stored-points counters as the clock, disk, RSS, CPU, q1/q2/q3, visibility, checks.
//! * [`report`]: medians, ratios against the bar, and the `RESULTS.md` entry.
//! * [`http`]: a small HTTP/1.1 client over std sockets.
//! * [`rollups`]: `rtsd-bench rollups`, a month of data queried at `1h-avg` from rollups and from raw data.
//! * [`soak`]: `rtsd-bench soak`, RSS during a long ingest whose series keep changing.
//!
//! The micro-benchmarks of the hot paths are in `benches/hot_paths.rs` (criterion). Nothing here is part of the
//! test suite's timing: the unit tests check bytes and parsing only.
pub mod data;
pub mod http;
pub mod load;
pub mod report;
pub mod rollups;
pub mod runner;
pub mod server;
pub mod soak;
