//! The query engine (spec: query §1.5): stored rows -> per-series downsample -> rate -> aggregation across
//! series with interpolation -> output. Being written.
