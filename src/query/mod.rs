//! The query engine (spec: query §1.5): stored rows -> per-series downsample -> rate -> aggregation across
//! series with interpolation -> output.
//!
//! The numeric core, with no I/O:
//! * [`series`]: input points ([`Point`], integer or float [`Value`]) and typed output values ([`OutValue`],
//!   [`format_value`]) (§0.6, §1.6);
//! * [`aggregators`]: the 35 registered aggregators, their interpolation and integer / double paths (§2);
//! * [`downsample`]: fixed, calendar and `all` buckets, fill policies (§3), with [`calendar`] for the
//!   time-zone arithmetic;
//! * [`rate`]: rates and counter options (§4);
//! * [`pipeline`]: the scan window, and one group's downsample -> rate -> cross-series aggregation -> output
//!   window (§1.5 steps 2, 5-7).
//!
//! The daemon calls [`scan_window`] to know what to read, groups the series, and runs [`Query::run`] per group.
//!
//! The daemon side, which reads the store and knows nothing of HTTP ([`QueryError`] names what went wrong;
//! `server::http::reply` gives it a status):
//! * [`exec`]: `/api/query`, per sub-query `plan` (what to read: metric, filters, engine view, scan window) ->
//!   `read` (a rollup table, or raw rows by key or by scan) -> grouping and the engine per group -> [`output`];
//! * [`rollup`]: the rollup tables' side of the read; [`stats`]: what `showStats` and `showSummary` report;
//! * [`expr`]: `/api/query/exp` and `/api/query/gexp` over the answers;
//! * [`last`] and [`lookup`]: `/api/query/last` and `/api/search/lookup`, from the series index.

pub mod aggregators;
pub mod calendar;
pub mod downsample;
pub mod pipeline;
pub mod rate;
pub mod series;

pub use aggregators::{Aggregator, Estimation, Interpolation, PercentileLevel, AGGREGATOR_NAMES};
pub use calendar::{time_zone, Calendar, CalendarUnit};
pub use downsample::{Downsampler, FillPolicy, Window};
pub use pipeline::{grid_points, in_output_window, run_group, scan_window, GridRow, GroupIter, Infinity, Query};
pub use rate::RateConfig;
pub use series::{format_value, write_value, OutPoint, OutValue, Point, Value};

pub mod error;
pub mod exec;
pub mod expr;
pub mod last;
pub mod lookup;
pub mod output;
mod plan;
mod read;
pub mod rollup;
pub mod stats;

pub use error::QueryError;
