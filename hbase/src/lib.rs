//! A native HBase client for rtsd: HBase's own RPC protocol over TCP, as gohbase and asynchbase speak it, with no
//! JVM, Thrift or REST gateway in between.
mod client;
mod conn;
mod error;
pub mod meta;
mod multi;
mod ops;
mod proto;
mod scan;
mod zk;

pub use client::{Client, Config};
pub use error::{Error, Result, Retry};
pub use meta::RegionLoc;
pub use ops::{Cell, Mutation, MutationKind};
pub use scan::{Filter, ScanRequest, Scanner};
