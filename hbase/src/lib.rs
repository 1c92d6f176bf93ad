//! A native HBase client for rtsd: HBase's own RPC protocol over TCP, as gohbase and asynchbase speak it — no JVM,
//! no Thrift or REST gateway. Written for HBase 2.x (tested against 2.6) and the calls OpenTSDB's storage needs.
//!
//! ```no_run
//! # async fn demo() -> rtsd_hbase::Result<()> {
//! use rtsd_hbase::{Client, Mutation, ScanRequest};
//!
//! // Where hbase:meta is comes from ZooKeeper (`tsd.storage.hbase.zk_quorum` / `zk_basedir`).
//! let client = Client::connect("127.0.0.1:2181", "/hbase").await?;
//! client.put("tsdb-uid", b"\x00", b"id", vec![(b"metrics".to_vec(), 0i64.to_be_bytes().to_vec())]).await?;
//! let cells = client.get("tsdb-uid", b"\x00", Some(b"id"), &[b"metrics"]).await?;
//! let next_uid = client.increment("tsdb-uid", b"\x00", b"id", b"metrics", 1).await?;
//! // OpenTSDB's UID CAS: set only if the cell is absent (empty expected value).
//! let won = client
//!     .check_and_put(&Mutation::put("tsdb-uid", b"sys.cpu", b"id", vec![(b"metrics".to_vec(), vec![0, 0, 1])]),
//!         b"id", b"metrics", b"")
//!     .await?;
//! // One Multi per region server; one outcome per mutation, in order.
//! let outcomes = client.multi(vec![Mutation::put("tsdb", b"row", b"t", vec![(vec![0, 0], vec![1])])]).await;
//! let mut scanner = client.scan(ScanRequest { table: "tsdb".into(), caching: 1000, ..Default::default() });
//! while let Some(row) = scanner.next().await? {
//!     // row: Vec<Cell { row, family, qualifier, timestamp, value }>
//! }
//! # let _ = (cells, next_uid, won, outcomes); Ok(()) }
//! ```
//!
//! # What it does
//! - **Connections**: one TCP connection per region server, shared by all calls to it
//!   (multiplexed by call id), opened on first use and replaced when it breaks. At most
//!   [`Config::max_calls_per_server`] calls are under way on it at once, below what a region server queues, so a
//!   burst waits in the client instead of being refused (`CallQueueTooBigException`) and retried after a pause.
//!   No cell-block codec is announced, so the servers answer every row as protobuf cells.
//! - **Regions**: `hbase:meta`'s location from ZooKeeper (`<zk_basedir>/meta-region-server`, a minimal one-read
//!   ZooKeeper client), or, with [`Config::bootstrap_servers`], from any HBase >= 2.5 server
//!   (`ClientMetaService.GetMetaRegionLocations`, no ZooKeeper needed); a region's location by a one-row reversed scan of meta, cached per table and start key.
//!   A cached region is dropped when a server says it is not there (`NotServingRegionException`,
//!   `RegionMovedException`, `RegionOpeningException`) or its server is gone; a newly found region evicts the
//!   cached ones it overlaps, so the cache follows splits and merges.
//! - **Calls**: [`Client::get`]; [`Client::scan`] (paging by `caching` rows, partial rows stitched back, heartbeats
//!   skipped, continuing region after region, reopening at the last row after a split, move, expired lease or
//!   out-of-order call); [`Client::put`], [`Client::append`], [`Client::increment`], [`Client::delete`] and
//!   [`Client::mutate`]; [`Client::check_and_put`] (`BinaryComparator`, `EQUAL`; an empty expected value means
//!   "absent"); [`Client::multi`] and [`Client::get_many`] (per region server per round, `Multi` RPCs of at
//!   most 2,000 actions, 128 with Increments or Appends, several under way at once, a row's actions in one of them
//!   and in order, a region's Puts and Deletes before its Increments and Appends when no cell has both; retried
//!   per action).
//! - **Failures**: every call retries retriable errors with exponential backoff ([`Config::initial_backoff`] to
//!   [`Config::max_backoff`]) until its deadline ([`Config::operation_timeout`]; each RPC also bounded by
//!   [`Config::rpc_timeout`]), then fails with [`Error::Deadline`] (the last error inside) or
//!   [`Error::Unreachable`]. Errors are typed ([`Error::TableNotFound`], [`Error::Remote`] with the server's
//!   exception class, ...; [`Error::retry`] says what a retry would do). A write returns `Ok` only when HBase
//!   acknowledged it; an error means it may or may not have been applied. Increments and Appends carry a nonce so
//!   that a server recognises a retry of one it already applied. [`Client::stats`] counts retries, relocations,
//!   server failures and meta lookups.
//!
//! - **Admin**: the active master from ZooKeeper (`<zk_basedir>/master`) or `GetActiveMaster`; a table's family
//!   descriptors ([`Client::families`], [`Client::family`]), a family replaced ([`Client::modify_family`]) and its
//!   TTL read and set ([`Client::family_ttl`], [`Client::set_family_ttl`]), waiting for the master's procedure.
//!
//! # What it does not do (yet)
//! Other DDL (tables are created by HBase's own tools), SASL/Kerberos, cell blocks, region replicas, reversed scans for
//! callers. Filters: [`Filter::prefix`], [`Filter::row_regex`] (OpenTSDB's key regex), [`Filter::key_only`],
//! [`Filter::list`]; any other by class name and serialized form ([`Filter::raw`]).
pub mod admin;
mod client;
mod conn;
mod error;
mod filter;
pub mod meta;
mod multi;
mod ops;
mod proto;
mod registry;
mod scan;
mod zk;

pub use admin::FamilyDescriptor;
pub use client::{Client, Config, OpCount, Stats};
pub use error::{Error, Result, Retry};
pub use meta::RegionLoc;
pub use ops::{Cell, Mutation, MutationKind};
pub use scan::{Filter, ScanRequest, Scanner};
