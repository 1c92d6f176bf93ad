//! `/api/annotation` and `/api/annotations` (spec: query §6.9): notes on a series or global, stored as columns of
//! the data rows (spec: ingest §4.8), so queries return them with the points they annotate.
use hyper::{Method, StatusCode};
use rtsd_protocol::annotation::{self, Annotation};
use rtsd_protocol::codec;

use super::reply::Reply;
use super::request::ApiRequest;
use crate::server::Tsd;
use crate::store::Tsuid;
use crate::timefmt::now_ms;

/// A time parameter: a plain integer is kept as given (seconds or ms by magnitude, like `startTime` in JSON);
/// anything else goes through OpenTSDB's time parser and comes back as seconds when it falls on a second.
fn time_param(text: &str) -> Result<i64, String> {
    if let Ok(n) = text.trim().parse::<i64>() {
        return Ok(n);
    }
    let ms = rtsd_protocol::query::parse_time(text, now_ms(), None).map_err(|e| e.message)?;
    Ok(if ms % 1000 == 0 { ms / 1000 } else { ms })
}

/// `/api/annotation`: GET, POST (merge), PUT (replace), DELETE one annotation.
pub fn annotation(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let bad = |m: &str| Reply::error(StatusCode::BAD_REQUEST, m, None);
    // The request's annotation: from a JSON body, or from query parameters.
    let mut given = Annotation::default();
    let has_body = !req.body.iter().all(u8::is_ascii_whitespace);
    let body_obj = if has_body && req.method != Method::GET {
        match serde_json::from_slice::<serde_json::Value>(&req.body) {
            Ok(serde_json::Value::Object(obj)) => Some(obj),
            Ok(_) => return bad("Unable to parse the given JSON"),
            Err(e) => return Reply::unparsable_json(&e.to_string()),
        }
    } else {
        None
    };
    if let Some(obj) = &body_obj {
        if let Err(e) = given.apply_json(obj) {
            return Reply::unparsable_json(&e);
        }
    } else {
        for (k, v) in &req.params {
            match k.as_str() {
                "start_time" => match time_param(v) {
                    Ok(t) => given.start_time = t,
                    Err(e) => return bad(&e),
                },
                "end_time" => match time_param(v) {
                    Ok(t) => given.end_time = t,
                    Err(e) => return bad(&e),
                },
                "tsuid" if !v.is_empty() => given.tsuid = Some(v.to_ascii_uppercase()),
                "description" => given.description = Some(v.clone()),
                "notes" => given.notes = Some(v.clone()),
                _ => {}
            }
        }
    }
    if given.start_time <= 0 {
        return bad("Missing start time");
    }
    let tsuid = match &given.tsuid {
        Some(t) => match Tsuid::parse(t) {
            Ok(tsuid) => Some(tsuid),
            Err(e) => return bad(&format!("Invalid TSUID: {e}")),
        },
        None => None,
    };
    let store = &tsd.store;
    let key = store.annotation_row_key(tsuid.as_deref(), given.start_time);
    let qualifier = annotation::qualifier(given.start_time);
    let stored = match store.get_annotation(&key, &qualifier) {
        Ok(s) => s.and_then(|bytes| Annotation::from_json(&bytes).ok()),
        Err(e) => return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    };
    let not_found = || Reply::error(StatusCode::NOT_FOUND, "Unable to locate annotation in storage", None);
    match req.method {
        Method::GET => match stored {
            Some(a) => Reply::json(StatusCode::OK, a.to_json()),
            None => not_found(),
        },
        // 2.4's Annotation.delete sends its delete whether or not the note exists: 204 either way.
        Method::DELETE if stored.is_none() => Reply::json(StatusCode::NO_CONTENT, ""),
        Method::DELETE => match store.put_annotation(&key, &qualifier, None) {
            Ok(()) => Reply::json(StatusCode::NO_CONTENT, ""),
            Err(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        },
        Method::POST | Method::PUT => {
            let merge = req.method == Method::POST && body_obj.is_some();
            let Some(updated) = updated(stored, &given, body_obj.as_ref().filter(|_| merge)) else {
                return Reply {
                    status: StatusCode::NOT_MODIFIED,
                    body: bytes::Bytes::new(),
                    content_type: "application/json; charset=UTF-8",
                    headers: Vec::new(),
                };
            };
            let stored = updated.to_storage_json();
            match store.put_annotation(&key, &qualifier, Some(stored.as_bytes())) {
                Ok(()) => Reply::json(StatusCode::OK, updated.to_json()),
                Err(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
            }
        }
        _ => Reply::method_not_allowed(&req.method),
    }
}

/// What a POST or PUT makes of the stored annotation: with `merge_fields` (a POST body) only the fields it names
/// change, else the given annotation replaces the stored one. None when the result is what is stored already
/// (304 for one annotation, left out of a bulk reply).
fn updated(
    stored: Option<Annotation>,
    given: &Annotation,
    merge_fields: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<Annotation> {
    let result = match (stored.clone(), merge_fields) {
        (Some(mut a), Some(obj)) => {
            // The fields were read once already into `given`, so applying them again cannot fail.
            match a.apply_json(obj) {
                Ok(()) => a,
                Err(_) => given.clone(),
            }
        }
        _ => given.clone(),
    };
    // Stored annotations carry 2.4.1's defaults (`""` for a missing description or notes) and `custom` sorted
    // (Annotation::to_storage_json): those are the same annotation as one without them.
    let plain = |a: &Annotation| {
        let mut a = a.clone();
        a.description = a.description.filter(|d| !d.is_empty());
        a.notes = a.notes.filter(|n| !n.is_empty());
        if let Some(c) = a.custom.as_mut() {
            c.sort();
        }
        a
    };
    (stored.as_ref().map(plain) != Some(plain(&result))).then_some(result)
}

/// `/api/annotation/bulk` (spec: query §6.9): POST (merge) or PUT (replace) a list of annotations, answered
/// with the stored ones that changed; DELETE the annotations of some series and/or the global ones in a time
/// range, answered with the request and `totalDeleted`. Unlike 2.4, which writes each annotation on its own and
/// may store some before refusing a bad one, rtsd checks the whole list first and writes it atomically.
pub fn bulk(req: &ApiRequest, tsd: &Tsd) -> Reply {
    match req.method {
        Method::POST | Method::PUT => bulk_update(req, tsd),
        Method::DELETE => bulk_delete(req, tsd),
        _ => Reply::method_not_allowed(&req.method),
    }
}

/// Where an annotation is stored: its data row key and column qualifier.
type Slot = (Vec<u8>, Vec<u8>);

fn bulk_update(req: &ApiRequest, tsd: &Tsd) -> Reply {
    if req.body.is_empty() {
        return Reply::missing_content();
    }
    let list = match annotation::parse_list(&req.body) {
        Ok(list) => list,
        Err(e) => return Reply::unparsable_json(&e),
    };
    let store = &tsd.store;
    // Later elements see earlier ones of the same request, as they would if written one by one.
    let mut pending: std::collections::HashMap<Slot, Annotation> = std::collections::HashMap::new();
    let mut order: Vec<Slot> = Vec::new();
    for (given, fields) in &list {
        // OpenTSDB's error for a bad element: its message, and the element as `Annotation.toString` prints it.
        let refuse = |message: &str| {
            let details = format!(
                "Annotation error: TSUID: {} Start: {}  Description: {}",
                given.tsuid.as_deref().unwrap_or(""),
                given.start_time,
                given.description.as_deref().unwrap_or("")
            );
            Reply::error(StatusCode::BAD_REQUEST, message, Some(&details))
        };
        if given.start_time < 1 {
            return refuse("The start timestamp has not been set");
        }
        let tsuid = match given.tsuid.as_deref().map(Tsuid::parse) {
            None => None,
            Some(Ok(tsuid)) => Some(tsuid),
            Some(Err(e)) => return refuse(&format!("Invalid TSUID: {e}")),
        };
        let key = store.annotation_row_key(tsuid.as_deref(), given.start_time);
        let slot = (key, annotation::qualifier(given.start_time));
        let stored = match pending.get(&slot) {
            Some(a) => Some(a.clone()),
            None => match store.get_annotation(&slot.0, &slot.1) {
                Ok(s) => s.and_then(|bytes| Annotation::from_json(&bytes).ok()),
                Err(e) => return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
            },
        };
        let merge = (req.method == Method::POST).then_some(fields);
        if let Some(updated) = updated(stored, given, merge) {
            if !pending.contains_key(&slot) {
                order.push(slot.clone());
            }
            pending.insert(slot, updated);
        }
    }
    // Stored in 2.4.1's storage form, answered in the API form.
    let written: Vec<(&Slot, String)> = order.iter().map(|slot| (slot, pending[slot].to_storage_json())).collect();
    let columns = written.iter().map(|((key, qualifier), json)| (&key[..], &qualifier[..], Some(json.as_bytes())));
    if let Err(e) = store.write_annotations(columns) {
        return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None);
    }
    let answers: Vec<String> = order.iter().map(|slot| pending[slot].to_json()).collect();
    let items: Vec<&str> = answers.iter().map(String::as_str).collect();
    Reply::json(StatusCode::OK, format!("[{}]", items.join(",")))
}

fn bulk_delete(req: &ApiRequest, tsd: &Tsd) -> Reply {
    let bad = |m: &str| Reply::error(StatusCode::BAD_REQUEST, m, None);
    // OpenTSDB wraps the IllegalArgumentExceptions of this path whole: the message is the details too.
    let illegal = |m: &str| Reply::error(StatusCode::BAD_REQUEST, m, Some(m));
    let request = if !req.body.is_empty() {
        match annotation::BulkDelete::from_json(&req.body) {
            Ok(r) => r,
            Err(e) => return Reply::unparsable_json(&e),
        }
    } else {
        let Some(start) = req.param("start_time") else { return bad("Missing parameter <code>start_time</code>") };
        annotation::BulkDelete::from_params(Some(start), req.param("end_time"), req.param("tsuids"), req.has("global"))
    };
    // A start of 0 would delete everything; OpenTSDB insists it is given.
    let Some(start) = request.start_time.as_deref().filter(|s| !s.is_empty()) else {
        return bad("Missing the start time value");
    };
    if !request.global && request.tsuids.as_ref().is_none_or(Vec::is_empty) {
        return bad("Missing the TSUIDs or global annotations flag");
    }
    let now = now_ms();
    let start_ms = match rtsd_protocol::query::parse_time(start, now, None) {
        Ok(t) => t,
        Err(e) => return illegal(&e.message),
    };
    let end_ms = match request.end_time.as_deref().filter(|e| !e.is_empty()) {
        None => now,
        Some(end) => match rtsd_protocol::query::parse_time(end, now, None) {
            Ok(t) => t,
            Err(e) => return illegal(&e.message),
        },
    };
    if end_ms < 1 {
        return illegal("The end timestamp has not been set");
    }
    if end_ms < start_ms {
        return illegal("The end timestamp cannot be less than the start timestamp");
    }
    let mut targets: Vec<Option<Tsuid>> = Vec::new();
    if request.global {
        targets.push(None);
    }
    for tsuid in request.tsuids.iter().flatten() {
        match Tsuid::parse(tsuid) {
            Ok(tsuid) => targets.push(Some(tsuid)),
            Err(e) => return illegal(&e),
        }
    }
    let mut found = Vec::new();
    for target in &targets {
        match tsd.store.annotations_between(target.as_deref(), start_ms, end_ms) {
            Ok(columns) => found.extend(columns),
            Err(e) => return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        }
    }
    // The same series listed twice finds its annotations twice; each is deleted (and counted) once.
    found.sort();
    found.dedup();
    if let Err(e) = tsd.store.write_annotations(found.iter().map(|(k, q)| (&k[..], &q[..], None))) {
        return Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None);
    }
    Reply::json(StatusCode::OK, request.render(start_ms, end_ms, found.len() as u64))
}

/// `/api/annotations`: the global annotations between `start_time` and `end_time` (default now).
pub fn global_annotations(req: &ApiRequest, tsd: &Tsd) -> Reply {
    if req.method != Method::GET {
        return Reply::method_not_allowed(&req.method);
    }
    let Some(start) = req.param("start_time") else {
        return Reply::error(StatusCode::BAD_REQUEST, "Missing start time", None);
    };
    let to_ms = |t: i64| if t > codec::MAX_SECONDS { t } else { t * 1000 };
    let start_ms = match time_param(start) {
        Ok(t) => to_ms(t),
        Err(e) => return Reply::error(StatusCode::BAD_REQUEST, &e, None),
    };
    let end_ms = match req.param("end_time").map(time_param) {
        None => now_ms(),
        Some(Ok(t)) => to_ms(t),
        Some(Err(e)) => return Reply::error(StatusCode::BAD_REQUEST, &e, None),
    };
    match tsd.store.global_annotations(start_ms, end_ms) {
        Ok(stored) => {
            Reply::json(StatusCode::OK, annotation::render_list(&annotation::in_range(&stored, start_ms, end_ms)))
        }
        Err(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}
