//! The one write path of data points, whatever the protocol: telnet `put` and `rollup`, `/api/put` and
//! `/api/rollup`. The protocols parse and validate in their own words (spec: ingest §1, §3); from a validated
//! [`DataPoint`] on, everything is here: the connection's series cache, UIDs, rollup targets, the batch, the
//! commit, and what each failure is, so both protocols report it the same way.
//!
//! A put goes protocol -> [`Writer`] -> store: `known` for a series the connection wrote before (no lookups),
//! else `put`, then one `commit` per read (telnet) or per request (HTTP).
pub mod series_cache;

use rtsd_protocol::codec::Value;
use rtsd_protocol::point::{DataPoint, ErrorCategory, PutError, RollupSpec, Rules};

pub use series_cache::SeriesCache;

use crate::metrics::Metrics;
use crate::rollup::{self, RollupError};
use crate::store::engine::{EngineError, EngineErrorKind};
use crate::store::uid::Names;
use crate::store::{AddError, PointBatch, Store, StoreError};

/// Why a point was not added to the batch.
#[derive(Debug)]
pub enum IngestError {
    /// The client's point, refused in OpenTSDB's words (unknown names with auto-creation off, bad tags, ...).
    Refused(PutError),
    /// A `rollup` to an interval the rollup configuration lacks.
    NoSuchRollup(String),
    /// Ours and not the client's: UIDs exhausted. OpenTSDB logs it and answers no telnet line (spec: ingest §1.3).
    Internal(String),
    /// The store could not take the point (assigning its UIDs failed): the batch fails with it, reported as a
    /// failed write is (issue 23).
    Storage(StoreError),
}

impl From<AddError> for IngestError {
    fn from(e: AddError) -> Self {
        match e {
            AddError::Put(e) => IngestError::Refused(e),
            AddError::Internal(m) => IngestError::Internal(m),
            AddError::Storage(e) => IngestError::Storage(e),
        }
    }
}

impl From<RollupError> for IngestError {
    fn from(e: RollupError) -> Self {
        match e {
            RollupError::Put(e) => IngestError::Refused(e),
            RollupError::NoSuchRollup(m) => IngestError::NoSuchRollup(m),
        }
    }
}

impl IngestError {
    /// The OpenTSDB stats category the failure counts under (`rpc.errors type=...`); none for UID exhaustion.
    pub fn category(&self) -> Option<ErrorCategory> {
        match self {
            IngestError::Refused(e) => Some(e.category()),
            IngestError::NoSuchRollup(_) => Some(ErrorCategory::IllegalArguments),
            IngestError::Internal(_) => None,
            IngestError::Storage(_) => Some(ErrorCategory::HbaseErrors),
        }
    }

    /// The telnet reply line to `command` (`put`, `rollup`), if any: OpenTSDB answers nothing to an unexpected
    /// exception, and storage failures only with `tsd.rpc.telnet.return_errors` (spec: ingest §1.6).
    pub fn telnet_line(&self, command: &str, return_errors: bool) -> Option<String> {
        match self {
            IngestError::Refused(e) => Some(format!("{command}: {e}\n")),
            IngestError::NoSuchRollup(m) => Some(format!("{command}: No such rollup: {m}\n")),
            IngestError::Internal(_) => None,
            IngestError::Storage(e) => return_errors.then(|| storage_line(command, e)),
        }
    }

    /// The `details` text of an `/api/put` or `/api/rollup` element (spec: ingest §3.4). A missing rollup
    /// interval is no IllegalArgumentException in OpenTSDB: its HTTP path reports an unexpected exception.
    pub fn http_detail(&self) -> String {
        match self {
            IngestError::Refused(e) => e.http_detail(),
            IngestError::NoSuchRollup(_) | IngestError::Internal(_) => "Unexpected exception".to_string(),
            IngestError::Storage(e) => storage_detail(e),
        }
    }

    /// Counts the failure and logs what is ours (the client's errors are its own to read).
    fn record(&self, metrics: &Metrics, command: &str) {
        if let Some(category) = self.category() {
            metrics.put_error(category);
        }
        match self {
            IngestError::Internal(m) => {
                tracing::error!(error = %m, command, "Unexpected exception while adding a point")
            }
            IngestError::NoSuchRollup(m) => tracing::warn!(error = %m, "rollup point refused"),
            // Counted and logged (once in a while) by the store.
            IngestError::Refused(_) | IngestError::Storage(_) => {}
        }
    }
}

/// The HTTP text of a write the store refused (an element's `details`, the error envelope's message).
pub fn storage_detail(e: &StoreError) -> String {
    format!("Storage exception: {e}")
}

/// OpenTSDB's line for a write the store refused (spec: ingest §1.6).
pub fn storage_line(command: &str, e: &StoreError) -> String {
    format!("{command}: HBase error: {e}\n")
}

/// One batch of writes of one connection: its series cache, and the points on their way into one atomic write.
pub struct Writer<'a> {
    store: &'a Store,
    rules: &'a Rules,
    metrics: &'a Metrics,
    cache: &'a mut SeriesCache,
    batch: PointBatch,
    /// The storage cluster was found unreachable (HBase down) while resolving a point's names: every later point
    /// of this batch that needs names resolved fails with the same error at once. Each lookup would otherwise
    /// wait out the client's whole deadline again, one after the other: a request of many new series would take
    /// many deadlines to answer what its first point already knew (issue 21 §6, HBase entirely down).
    unreachable: Option<EngineError>,
}

impl<'a> Writer<'a> {
    pub fn new(store: &'a Store, rules: &'a Rules, metrics: &'a Metrics, cache: &'a mut SeriesCache) -> Writer<'a> {
        cache.refresh(store);
        Writer { store, rules, metrics, cache, batch: store.new_batch(), unreachable: None }
    }

    /// Adds a point of a series this connection wrote before, found by `key` (the protocol's words for the
    /// series: a `put` line's metric and tags, a JSON object's metric and tag strings), skipping name lookups and
    /// validation. `value` reads the point once the series is known; false (nothing added) when the series is new
    /// to the connection or `value` declines, and the point needs [`Writer::put`]. The key stays set either way.
    pub fn known<'k>(
        &mut self,
        key: impl IntoIterator<Item = &'k [u8]>,
        value: impl FnOnce() -> Option<(i64, Value)>,
    ) -> bool {
        self.cache.set_key(key);
        let Some(series) = self.cache.get() else { return false };
        let Some((timestamp, value)) = value() else { return false };
        self.store.add_to_series(&mut self.batch, series, timestamp, value);
        true
    }

    /// Whether this batch should gather the names of its new series and resolve them together
    /// ([`Writer::resolve_names`]) before adding its points: on an engine whose lookups are round trips.
    pub fn batches_names(&self) -> bool {
        self.store.resolves_names_in_batches() && self.unreachable.is_none()
    }

    /// Whether the series keyed by `key` (as [`Writer::known`] keys it) is new to this connection, so that its
    /// point will need its names resolved. Leaves the key set.
    pub fn is_new_series<'k>(&mut self, key: impl IntoIterator<Item = &'k [u8]>) -> bool {
        self.cache.set_key(key);
        self.cache.get().is_none()
    }

    /// Resolves the names of the batch's new series together, ahead of adding its points one by one (see
    /// [`Store::resolve_names`]): a request of a thousand new names then costs a few round trips, not several
    /// per name. What fails here is the points' to report, by their own lookups; only an unreachable storage is
    /// remembered, so that they fail at once as they would after the first one (see `unreachable`).
    pub fn resolve_names(&mut self, names: &Names) {
        if let Err(StoreError::Engine(e)) = self.store.resolve_names(names) {
            if e.kind == EngineErrorKind::Unavailable {
                self.unreachable = Some(e);
            }
        }
    }

    /// Adds a validated point: resolves its UIDs (assigning new ones as configured) and, when `keyed`, caches its
    /// series under the key the last [`Writer::known`] set. A failure is counted (and logged when it is ours).
    pub fn put(&mut self, point: &DataPoint<'_>, keyed: bool, command: &str) -> Result<(), IngestError> {
        let series = match self.unreachable_error().map_or_else(|| self.store.series_key(point), Err) {
            Ok(series) => series,
            Err(e) => {
                let e = IngestError::from(e);
                self.note_unreachable(&e);
                e.record(self.metrics, command);
                return Err(e);
            }
        };
        self.store.add_to_series(&mut self.batch, &series, point.timestamp, point.value);
        if keyed {
            self.cache.insert(series);
        }
        Ok(())
    }

    /// Adds a rollup or pre-aggregate point (spec: ingest §1.7): checked against the rollup configuration
    /// (its tags rewritten as OpenTSDB does) and stored in its table.
    pub fn rollup(&mut self, mut point: DataPoint<'_>, spec: &RollupSpec) -> Result<(), IngestError> {
        let unreachable = self.unreachable_error();
        let result = rollup::prepare(self.store.rollup_settings(), &mut point, spec, self.rules)
            .map_err(IngestError::from)
            .and_then(|target| match unreachable {
                Some(e) => Err(IngestError::from(e)),
                None => self.store.add_rollup_point(&mut self.batch, &point, &target).map_err(IngestError::from),
            });
        if let Err(e) = &result {
            self.note_unreachable(e);
            e.record(self.metrics, "rollup");
        }
        result
    }

    /// The error a point needing its names resolved fails with once the storage was found unreachable.
    fn unreachable_error(&self) -> Option<AddError> {
        self.unreachable
            .as_ref()
            .map(|e| AddError::Storage(StoreError::Engine(EngineError { kind: e.kind, message: e.message.clone() })))
    }

    fn note_unreachable(&mut self, e: &IngestError) {
        if let IngestError::Storage(StoreError::Engine(e)) = e {
            if e.kind == EngineErrorKind::Unavailable && self.unreachable.is_none() {
                self.unreachable = Some(EngineError { kind: e.kind, message: e.message.clone() });
            }
        }
    }

    /// The rules names are checked against (`tsd.core.tag.allow_specialchars`).
    pub fn rules(&self) -> &'a Rules {
        self.rules
    }

    /// Counts a point the protocol refused before it reached the writer (its parse or validation).
    pub fn refused(&self, e: &PutError) {
        self.metrics.put_error(e.category());
    }

    /// Points and rollup points added since the last commit.
    pub fn pending(&self) -> (u64, u64) {
        (self.batch.len(), self.batch.rollup_points())
    }

    /// Writes the batch atomically (see [`Store::commit`]); returns the data points written. On failure nothing
    /// of it is stored and the batch starts over empty.
    pub fn commit(&mut self, sync: bool) -> Result<u64, StoreError> {
        let result = self.store.commit(&mut self.batch, sync);
        if result.is_err() {
            self.batch = self.store.new_batch();
        }
        result
    }
}
