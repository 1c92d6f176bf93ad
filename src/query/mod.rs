//! The query engine (spec: query §1.5): stored rows -> per-series downsample -> rate -> aggregation across
//! series with interpolation -> output. Being written.

// The response body; written by the daemon side (the engine's modules are declared above this line).
pub mod output;
