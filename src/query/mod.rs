//! The query engine (spec: query §1.5): stored rows -> per-series downsample -> rate -> aggregation across
//! series with interpolation -> output. Being written.
//!
//! The numeric core, with no I/O:
//! * [`series`]: input points ([`Point`], integer or float [`Value`]) and typed output values ([`OutValue`],
//!   [`format_value`]) (§0.6, §1.6);
//! * [`aggregators`]: the 35 registered aggregators, their interpolation and integer / double paths (§2);

pub mod aggregators;
pub mod series;

pub use aggregators::{Aggregator, Estimation, Interpolation, PercentileLevel, AGGREGATOR_NAMES};
pub use series::{format_value, write_value, OutPoint, OutValue, Point, Value};

// The response body; written by the daemon side (the engine's modules are declared above this line).
pub mod output;
