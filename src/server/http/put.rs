//! `POST /api/put` and `POST /api/rollup` (spec: ingest §3, query §6.13): the body read as OpenTSDB reads it, each
//! element validated in its words, then handed to the write path (`crate::ingest`).
use std::borrow::Cow;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use rtsd_protocol::json_put::{self, BodyPoint, IncomingPoint, PutDetail};
use rtsd_protocol::point::{self, DataPoint, ErrorCategory, PutError, Tags};

use super::reply::Reply;
use super::request::ApiRequest;
use crate::ingest::{IngestError, Writer};
use crate::metrics::Protocol;
use crate::server::Tsd;
use crate::store::StoreError;

/// `POST /api/put` (spec: ingest §3), and with `rollup` `POST /api/rollup`, which takes the same bodies with the
/// rollup fields and answers the same way (spec: query §6.13; OpenTSDB's `RollupDataPointRpc` shares
/// `PutDataPointRpc.processDataPoint`).
pub(super) fn put(req: &ApiRequest, tsd: &Tsd, rollup: bool) -> Reply {
    if req.method != Method::POST {
        return Reply::method_not_allowed(&req.method);
    }
    tsd.metrics.rpc(if rollup { "rollup" } else { "put" });
    // Collectors' bodies take the plain reader, which builds no per-point values; anything else the general one.
    let plain = if rollup { None } else { json_put::parse_plain_put_body(&req.body) };
    let parsed = match plain {
        Some(body) => Ok(PutBody::Plain(body)),
        None if rollup => json_put::parse_rollup_body(&req.body).map(PutBody::General),
        None => json_put::parse_put_body(&req.body).map(PutBody::General),
    };
    let body = match parsed {
        Ok(body) => body,
        Err(e) => {
            let details = e.details();
            return Reply::error(StatusCode::BAD_REQUEST, &e.to_string(), details.as_deref());
        }
    };
    if body.is_empty() {
        return Reply::error(StatusCode::BAD_REQUEST, "No datapoints found in content", None);
    }
    let show_details = req.has("details");
    let show_summary = req.has("summary");
    let sync = req.has("sync");
    // 2.4 reads it with Integer.parseInt (an unparseable one is an internal error: 500 with Java's message) and
    // arms its timer, and reports `timeouts`, only for a positive one (spec: ingest §3.3).
    let timeouts = match req.param("sync_timeout") {
        None => None,
        Some(v) => match v.parse::<i32>() {
            Ok(ms) if ms > 0 => Some(0),
            Ok(_) => None,
            Err(_) => {
                let message = format!("For input string: \"{v}\"");
                return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &message, None);
            }
        },
    };

    let mut tally = Tally {
        tsd,
        show_details,
        errors: Vec::new(),
        accepted: Vec::new(),
        storage: None,
        success: 0,
        failed: 0,
        unstored: 0,
    };
    let mut series = req.series.lock().unwrap_or_else(|e| e.into_inner());
    let mut writer = Writer::new(&tsd.store, &tsd.config.rules, &tsd.metrics, &mut series);
    match body {
        PutBody::Plain(body) => {
            if writer.batches_names() {
                resolve_new_names(&body, &mut writer);
            }
            for p in &body.points {
                let tags = body.tags(p).iter().copied();
                if add_known_point(&mut writer, p.metric, tags, p.timestamp, p.value) {
                    tally.success += 1;
                    if show_details {
                        tally.accepted.push(BodyPoint::Point(body.incoming(p)));
                    }
                    continue;
                }
                let body_point = BodyPoint::Point(body.incoming(p));
                let added = add_http_point(&body_point, &mut writer);
                tally.record(added, body_point);
            }
        }
        PutBody::General(points) => {
            for body_point in points {
                let added = if rollup {
                    add_http_rollup_point(&body_point, &mut writer)
                } else {
                    add_http_point(&body_point, &mut writer)
                };
                tally.record(added, body_point);
            }
        }
    }
    // The batch is one atomic write: either every accepted point is stored or none is, and then the client hears
    // a server error and can resend (spec: ingest §3.5 leaves storage failures without `sync` invisible; rtsd
    // writes synchronously, so it can and does tell). A point whose UIDs could not be assigned fails the whole
    // batch the same way: storing the rest would answer a status that tells the client not to resend them.
    let committed = match tally.storage.take() {
        // Counted by the writer when the point's UIDs could not be assigned.
        Some(e) => Err(e),
        None => writer.commit(sync).inspect_err(|_| tsd.metrics.put_error(ErrorCategory::HbaseErrors)),
    };
    if let Err(e) = committed {
        return storage_failure(tally, &e, show_summary, timeouts);
    }
    let Tally { success, failed, errors, .. } = tally;
    if !rollup {
        // Rollup points are no data points (OpenTSDB counts them apart).
        tsd.metrics.point_added(Protocol::Http, success);
    }

    if !show_summary && !show_details {
        if failed > 0 {
            return Reply::error(
                StatusCode::BAD_REQUEST,
                "One or more data points had errors",
                Some("Please see the TSD logs or append \"details\" to the put request"),
            );
        }
        return Reply::json(StatusCode::NO_CONTENT, Bytes::new());
    }
    let status = if failed > 0 { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let details = if show_details { Some(errors.as_slice()) } else { None };
    Reply::json(status, json_put::summary_json(success, failed, timeouts, details))
}

/// A put body as read: by the plain reader (the common shape) or the general one.
enum PutBody<'a> {
    Plain(json_put::PlainBody<'a>),
    General(Vec<BodyPoint<'a>>),
}

impl PutBody<'_> {
    fn is_empty(&self) -> bool {
        match self {
            PutBody::Plain(body) => body.points.is_empty(),
            PutBody::General(points) => points.is_empty(),
        }
    }
}

/// The counts and `details` of one put request.
struct Tally<'t, 'a> {
    tsd: &'t Tsd,
    show_details: bool,
    errors: Vec<PutDetail<'a>>,
    /// With `details`, the points accepted into the batch: each is reported failed if the batch is not stored.
    accepted: Vec<BodyPoint<'a>>,
    /// The storage failure that keeps the batch from being written.
    storage: Option<StoreError>,
    success: u64,
    failed: u64,
    /// Points that failed for want of storage (their UIDs could not be assigned).
    unstored: u64,
}

impl<'a> Tally<'_, 'a> {
    fn record(&mut self, added: Result<(), PointError>, point: BodyPoint<'a>) {
        match added {
            Ok(()) => {
                self.success += 1;
                if self.show_details {
                    self.accepted.push(point);
                }
            }
            Err(PointError::Ingest(IngestError::Storage(e))) => {
                self.unstored += 1;
                if self.show_details {
                    self.accepted.push(point);
                }
                self.storage.get_or_insert(e);
            }
            Err(e) => {
                self.failed += 1;
                let message = match e {
                    PointError::Invalid((category, message)) => {
                        if let Some(category) = category {
                            self.tsd.metrics.put_error(category);
                        }
                        message
                    }
                    // Counted by the writer.
                    PointError::Ingest(e) => e.http_detail(),
                };
                tracing::debug!(error = %message, "put point refused");
                if self.show_details {
                    self.errors.push(PutDetail { point, error: message });
                }
            }
        }
    }
}

/// Why one element of a put body was refused: the stats category it counts under (none for our own failures)
/// and the `details` text.
type PointFailure = (Option<ErrorCategory>, String);

/// Why one element of a put body was not added to the batch: refused while reading it (counted here), or by
/// the write path (counted there; a storage failure fails the whole batch).
enum PointError {
    Invalid(PointFailure),
    Ingest(IngestError),
}

impl From<PointFailure> for PointError {
    fn from(f: PointFailure) -> Self {
        PointError::Invalid(f)
    }
}

/// The reply to a put whose batch could not be stored: nothing of it was written. A transient condition (a
/// nearly full or full disk, no file descriptors) is a 503 with `Retry-After`, anything else a 500: a server
/// error, never the 400 that tells a client not to resend. With `details`, every point is listed: refused ones
/// with their own error, the others with the storage failure.
fn storage_failure(tally: Tally<'_, '_>, e: &StoreError, show_summary: bool, timeouts: Option<u64>) -> Reply {
    let points = tally.success + tally.failed + tally.unstored;
    let status = Reply::storage_status(e);
    let message = crate::ingest::storage_detail(e);
    let reply = if tally.show_details {
        let mut errors = tally.errors;
        errors.extend(tally.accepted.into_iter().map(|point| PutDetail { point, error: message.clone() }));
        Reply::json(status, json_put::summary_json(0, points, timeouts, Some(&errors)))
    } else if show_summary {
        Reply::json(status, json_put::summary_json(0, points, timeouts, None))
    } else {
        Reply::error(status, &message, Some("The points were not stored: send them again"))
    };
    reply.retry_later_if_unavailable()
}

/// The checks every `/api/put` and `/api/rollup` element goes through first (OpenTSDB's
/// `IncomingDataPoint.validate`, then `extra`, the subclass's own, then the value parse), in OpenTSDB's order
/// (spec: ingest §3.4).
fn http_data_point<'a>(
    body_point: &'a BodyPoint<'_>,
    extra: impl FnOnce(&IncomingPoint<'_>) -> Result<(), String>,
) -> Result<DataPoint<'a>, PointFailure> {
    let illegal = |m: &str| (Some(ErrorCategory::IllegalArguments), m.to_string());
    let p = match body_point {
        BodyPoint::Null => return Err(illegal("Unexpected null datapoint encountered in set.")),
        BodyPoint::Point(p) => p,
    };
    let metric = match p.metric.as_deref() {
        Some(m) if !m.is_empty() => m,
        _ => return Err(illegal("Metric name was empty")),
    };
    if p.timestamp <= 0 {
        return Err(illegal("Invalid timestamp"));
    }
    let value = match p.value.as_deref() {
        Some(v) if !v.is_empty() => v,
        _ => return Err(illegal("Empty value")),
    };
    let pairs = match &p.tags {
        Some(tags) if !tags.is_empty() => tags,
        _ => return Err(illegal("Missing tags")),
    };
    extra(p).map_err(|m| illegal(&m))?;
    let value = point::parse_value(value)
        .map_err(|_| (Some(ErrorCategory::InvalidValues), "Unable to parse value to a number".to_string()))?;
    let mut tags = Tags::new();
    for (k, v) in pairs {
        point::insert_tag(&mut tags, Cow::Borrowed(k.as_ref()), Cow::Borrowed(v.as_ref()))
            .map_err(|e| (Some(e.category()), e.http_detail()))?;
    }
    Ok(DataPoint { metric: Cow::Borrowed(metric), timestamp: p.timestamp, value, tags })
}

/// Adds a point of a series this connection wrote before (same metric and tag strings in the same order),
/// skipping the name lookups and series checks; false when the point needs [`add_http_point`]: its series is
/// new to the connection, or its timestamp or value is not one the shortcut takes. Either way the cache's key is
/// left set to the point's series.
fn add_known_point<'s>(
    writer: &mut Writer<'_>,
    metric: &str,
    tags: impl Iterator<Item = (&'s str, &'s str)>,
    timestamp: i64,
    value: &str,
) -> bool {
    let pairs = tags.flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]);
    let key = std::iter::once(metric.as_bytes()).chain(pairs);
    writer.known(key, || point::known_series_value(timestamp, value).map(|v| (timestamp, v)))
}

/// Resolves the names of the body's points of series new to the connection together (see
/// [`Writer::resolve_names`]), before the points are added one by one as usual; points that fail validation are
/// left to that, which reports them.
fn resolve_new_names(body: &json_put::PlainBody<'_>, writer: &mut Writer<'_>) {
    let mut names = crate::store::uid::Names::default();
    for p in &body.points {
        let pairs = body.tags(p).iter().flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]);
        if !writer.is_new_series(std::iter::once(p.metric.as_bytes()).chain(pairs)) {
            continue;
        }
        let body_point = BodyPoint::Point(body.incoming(p));
        if let Ok(dp) = http_data_point(&body_point, |_| Ok(())) {
            if point::check_for_write(&dp, writer.rules()).is_ok() {
                names.add_point(&dp);
            }
        };
    }
    writer.resolve_names(&names);
}

/// Validates one `/api/put` element (spec: ingest §3.4) and adds it to the batch.
fn add_http_point(body_point: &BodyPoint<'_>, writer: &mut Writer<'_>) -> Result<(), PointError> {
    // Only a point with a metric and tags can be of a known series.
    let keyed = match body_point {
        BodyPoint::Point(IncomingPoint { metric: Some(metric), tags: Some(tags), timestamp, value, .. }) => {
            let tags = tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref()));
            if add_known_point(writer, metric, tags, *timestamp, value.as_deref().unwrap_or("")) {
                return Ok(());
            }
            true
        }
        _ => false,
    };
    let dp = http_data_point(body_point, |_| Ok(()))?;
    point::check_for_write(&dp, writer.rules()).map_err(|e: PutError| {
        let e = point::null_tag_value_error(e, body_point.null_tags());
        PointError::Invalid((Some(e.category()), e.http_detail()))
    })?;
    writer.put(&dp, keyed, "put").map_err(PointError::Ingest)
}

/// Validates one `/api/rollup` element as OpenTSDB's `RollUpDataPoint.validate` and `addAggregatePoint` do
/// (spec: ingest §1.7, query §6.13) and adds it to the batch.
fn add_http_rollup_point(body_point: &BodyPoint<'_>, writer: &mut Writer<'_>) -> Result<(), PointError> {
    let spec = match body_point {
        BodyPoint::Point(p) => p.rollup.clone().unwrap_or_default(),
        BodyPoint::Null => Default::default(),
    };
    let dp = http_data_point(body_point, |_| {
        let groupby = spec.groupby_aggregator.as_deref().is_some_and(|g| !g.is_empty());
        if !groupby && spec.interval.as_deref().unwrap_or("").is_empty() {
            return Err("Missing interval".to_string());
        }
        if !groupby && spec.aggregator.as_deref().unwrap_or("").is_empty() {
            return Err("Missing aggregator".to_string());
        }
        Ok(())
    })?;
    point::check_finite(&dp).map_err(|e| {
        let e = point::null_tag_value_error(e, body_point.null_tags());
        PointError::Invalid((Some(e.category()), e.http_detail()))
    })?;
    writer.rollup(dp, &spec).map_err(|e| match e {
        // A tag the rollup configuration refuses is named as the element gave it (a JSON null).
        IngestError::Refused(e) => {
            PointError::Ingest(IngestError::Refused(point::null_tag_value_error(e, body_point.null_tags())))
        }
        e => PointError::Ingest(e),
    })
}
