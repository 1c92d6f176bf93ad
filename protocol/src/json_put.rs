//! `/api/put` request bodies and replies (spec: ingest §3). STUB: being written.
