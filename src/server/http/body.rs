//! Request bodies: read whole (chunked or not) within the size, memory and time limits, and inflated when the
//! client compressed them (gzip, deflate).
use std::io::Read;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::CONTENT_ENCODING;
use hyper::{Request, StatusCode};

use super::reply::Reply;
use crate::server::conn::{declared_length, receive_body, BodyBudget, BodyError, BodyPermit};

/// Bodies being received hold all of `rtsd.http.max_buffered_bytes`: 503, come back later.
fn buffered_too_much() -> Reply {
    Reply::error(
        StatusCode::SERVICE_UNAVAILABLE,
        "Too many request bytes are being received at once",
        Some("Send the request again later (rtsd.http.max_buffered_bytes)"),
    )
    .retry_later_if_unavailable()
}

/// A body over `rtsd.http.max_body_bytes`: 413, before reading it when its `Content-Length` says so.
fn body_too_large(limit: usize) -> Reply {
    Reply::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("Request body exceeds the limit of {limit} bytes"),
        Some("Raise rtsd.http.max_body_bytes or send smaller batches"),
    )
}

/// Reads the whole body (chunked or not) up to `limit` bytes, holding room for its bytes in `budget` (503 when
/// all connections together buffer too much), within `timeout` (408), and inflates gzip/deflate encodings.
/// Returns the body and the room it holds.
pub(super) async fn read_body(
    req: Request<Incoming>,
    limit: usize,
    budget: &BodyBudget,
    timeout: std::time::Duration,
) -> Result<(Bytes, BodyPermit), Reply> {
    let encoding =
        req.headers().get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_ascii_lowercase());
    let declared = declared_length(req.headers());
    let (raw, mut held) = match receive_body(req.into_body(), declared, limit, budget, timeout).await {
        Ok(received) => received,
        Err(BodyError::TooLarge) => return Err(body_too_large(limit)),
        Err(BodyError::Busy) => return Err(buffered_too_much()),
        Err(BodyError::TimedOut) => {
            return Err(Reply::error(
                StatusCode::REQUEST_TIMEOUT,
                "Request body not received in time",
                Some(&format!("The body must arrive within rtsd.http.request_timeout_secs ({} s)", timeout.as_secs())),
            ))
        }
        Err(BodyError::Broken(e)) => {
            return Err(Reply::error(StatusCode::BAD_REQUEST, "Unable to read the request body", Some(&e)))
        }
    };
    if raw.is_empty() {
        // A GET that advertises gzip but carries nothing (opentsdb-py's /api/version).
        return Ok((raw, held));
    }
    let mut inflated = Vec::new();
    let inflated_result = match encoding.as_deref() {
        Some("gzip") | Some("x-gzip") => {
            flate2::read::MultiGzDecoder::new(&raw[..]).take(limit as u64 + 1).read_to_end(&mut inflated)
        }
        Some("deflate") | Some("x-deflate") => {
            // HTTP's "deflate" is zlib-wrapped; some clients send raw deflate. Try zlib first.
            let zlib = flate2::read::ZlibDecoder::new(&raw[..]).take(limit as u64 + 1).read_to_end(&mut inflated);
            if zlib.is_err() {
                inflated.clear();
                flate2::read::DeflateDecoder::new(&raw[..]).take(limit as u64 + 1).read_to_end(&mut inflated)
            } else {
                zlib
            }
        }
        _ => return Ok((raw, held)),
    };
    match inflated_result {
        Ok(_) if inflated.len() > limit => Err(body_too_large(limit)),
        Ok(_) => {
            // The inflated body is held too (the compressed one is freed with the reply).
            if budget.grow(&mut held, inflated.len()).is_none() {
                return Err(buffered_too_much());
            }
            Ok((Bytes::from(inflated), held))
        }
        Err(e) => {
            Err(Reply::error(StatusCode::BAD_REQUEST, "Unable to decompress the request body", Some(&e.to_string())))
        }
    }
}
