//! The query engine (spec: query §1.5): stored rows -> per-series downsample -> rate -> aggregation across
//! series with interpolation -> output. Being written.
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

// The daemon side: running a parsed request against the store, the response body, and expressions over answers
// (`/api/query/exp`, `/api/query/gexp`).
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
