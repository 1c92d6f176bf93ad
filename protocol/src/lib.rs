//! Pure parsers and codecs for rtsd, an OpenTSDB 2.4-compatible time-series daemon.
//!
//! Nothing in this crate does I/O: it turns bytes into values and back, with OpenTSDB's exact error texts.
//! The daemon (`src/` of the workspace root) owns sockets, RocksDB and time.
//!
//! * [`number`]: OpenTSDB's `Tags.parseLong` and Java's `Double.parseDouble`, with their error messages.
//! * [`javafmt`]: Java renderings that leak into OpenTSDB's texts (`HashMap` order, `Arrays.toString`).
//! * [`point`]: a data point's value and the write-path validation shared by every ingest protocol.
//! * [`telnet`]: the line protocol: framing rules, command words, the `put` line.
//! * [`json_put`]: `/api/put` request bodies (Jackson-compatible) and reply shapes.
//! * [`codec`]: OpenTSDB's storage layout: qualifiers, values, row keys, salt, UIDs, compacted columns.
//!
//! ```
//! use rtsd_protocol::telnet::{parse_command, Command};
//! let line = b"put sys.cpu.user 1356998400 42 host=web01";
//! match parse_command(line) {
//!     Command::Put(words) => assert_eq!(words.len(), 5),
//!     _ => unreachable!(),
//! }
//! ```

pub mod annotation;
pub mod chukwa;
pub mod codec;
pub mod http_json;
pub mod javafmt;
pub mod json_put;
pub mod number;
pub mod point;
pub mod query;
pub mod telnet;
