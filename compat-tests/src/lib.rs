//! Shared helpers for compat tests.
