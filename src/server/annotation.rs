//! `/api/annotation` and `/api/annotations` (spec: query §6.9): notes on a series or global, stored as columns of
//! the data rows (spec: ingest §4.8), so queries return them with the points they annotate.
use hyper::{Method, StatusCode};
use rtsd_protocol::annotation::{self, Annotation};
use rtsd_protocol::codec;

use super::http::{ApiRequest, Reply};
use super::Tsd;
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
            Err(e) => {
                return Reply::error(StatusCode::BAD_REQUEST, "Unable to parse the given JSON", Some(&e.to_string()))
            }
        }
    } else {
        None
    };
    if let Some(obj) = &body_obj {
        if let Err(e) = given.apply_json(obj) {
            return Reply::error(StatusCode::BAD_REQUEST, "Unable to parse the given JSON", Some(&e));
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
        Some(t) => match codec::string_to_uid(t, None) {
            Ok(bytes) => Some(bytes),
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
        Method::DELETE => match stored {
            Some(_) => match store.put_annotation(&key, &qualifier, None) {
                Ok(()) => Reply::json(StatusCode::NO_CONTENT, ""),
                Err(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
            },
            None => not_found(),
        },
        Method::POST | Method::PUT => {
            // POST changes only the fields it names; PUT replaces the whole annotation.
            let updated = match (&req.method, stored.clone(), &body_obj) {
                (&Method::POST, Some(mut a), Some(obj)) => match a.apply_json(obj) {
                    Ok(()) => a,
                    Err(e) => return Reply::error(StatusCode::BAD_REQUEST, "Unable to parse the given JSON", Some(&e)),
                },
                _ => given.clone(),
            };
            if stored.as_ref() == Some(&updated) {
                return Reply {
                    status: StatusCode::NOT_MODIFIED,
                    body: bytes::Bytes::new(),
                    content_type: "application/json; charset=UTF-8",
                };
            }
            let json = updated.to_json();
            match store.put_annotation(&key, &qualifier, Some(json.as_bytes())) {
                Ok(()) => Reply::json(StatusCode::OK, json),
                Err(e) => Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
            }
        }
        _ => Reply::method_not_allowed(&req.method),
    }
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
