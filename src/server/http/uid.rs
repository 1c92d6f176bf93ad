//! `/api/uid/*` (spec: query §6.6-§6.8; OpenTSDB's `UniqueIdRpc`): assign UIDs, rename them, and read, edit and
//! delete UIDMeta and TSMeta. Other `/api/uid/<x>` answer 501; with `tsd.mode=ro` the whole route is absent.
//!
//! Texts, statuses and JSON shapes are OpenTSDB 2.4's. Where 2.4 answers a client's mistake with a 500 (an
//! unknown `type` on the query string, bad hex in a UID, unknown names in `m=` of a TSMeta POST, an exhausted
//! UID width during assign) rtsd answers 400/404 with the same message.
use std::cmp::Ordering;

use hyper::{Method, StatusCode};
use rtsd_protocol::codec;
use rtsd_protocol::http_json::{
    jackson_double, jackson_int, jackson_long, jackson_string, jackson_string_map, json_kind, json_string,
};
use rtsd_protocol::javafmt;
use rtsd_protocol::number::parse_java_double;
use rtsd_protocol::point::{self, UidKind};
use rtsd_protocol::query::parse_with_metric;
use serde_json::Value as Json;

use super::meta::{ts_meta_json, ts_metas_json, uid_meta_json};
use super::reply::Reply;
use super::request::ApiRequest;
use crate::server::Tsd;
use crate::store::meta::{TsMeta, TsMetaEdit, UidMetaEdit};
use crate::store::uid::{AssignError, RenameError, UidError};
use crate::store::{StoreError, Tsuid};

/// Routes `/api/uid/<segments>`.
pub fn handle(segments: &[&str], req: &ApiRequest, tsd: &Tsd) -> Reply {
    let reply = match segments.first().copied() {
        Some("assign") => assign(req, tsd),
        Some("uidmeta") => uidmeta(req, tsd),
        Some("tsmeta") => tsmeta(req, tsd),
        Some("rename") => rename(req, tsd),
        _ => Err(Reply::error(StatusCode::NOT_IMPLEMENTED, "Other UID endpoints have not been implemented yet", None)),
    };
    reply.unwrap_or_else(|e| e)
}

/// Handlers return early with an error reply through `?`.
type Answer = Result<Reply, Reply>;

fn bad(message: &str) -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, message, None)
}

/// A `BadRequestException` made from an exception: its message is the details too (spec: query §0.4).
fn bad_wrapped(message: &str) -> Reply {
    Reply::error(StatusCode::BAD_REQUEST, message, Some(message))
}

fn internal(e: StoreError) -> Reply {
    tracing::error!(error = %e, "UID endpoint storage failure");
    Reply::error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None)
}

fn status_only(status: StatusCode) -> Reply {
    Reply::json(status, bytes::Bytes::new())
}

fn required<'a>(req: &'a ApiRequest, name: &str) -> Result<&'a str, Reply> {
    match req.param(name) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(bad(&format!("Missing parameter <code>{name}</code>"))),
    }
}

/// Java's `String.compareTo`: UTF-16 code units, which is how OpenTSDB's `TreeMap`s order names.
fn java_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// A `TreeMap<String, String>` as JSON: sorted the Java way, a repeated key keeping its last value.
fn tree_map_json(mut pairs: Vec<(String, String)>) -> String {
    pairs.sort_by(|a, b| java_cmp(&a.0, &b.0));
    let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        match out.last_mut() {
            Some(last) if last.0 == k => last.1 = v,
            _ => out.push((k, v)),
        }
    }
    let body: Vec<String> = out.iter().map(|(k, v)| format!("{}:{}", json_string(k), json_string(v))).collect();
    format!("{{{}}}", body.join(","))
}

/// A Java `HashMap<String, _>` of already rendered values, in that map's iteration order.
fn hash_map_json(entries: &[(String, String)]) -> String {
    let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    let body: Vec<String> = javafmt::hashmap_order(&keys)
        .into_iter()
        .map(|i| format!("{}:{}", json_string(&entries[i].0), entries[i].1))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Java's `String.split(",")`: empty pieces kept, except trailing ones.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

/// OpenTSDB's `UniqueId.stringToUniqueIdType`: `metric`/`metrics`, `tagk`, `tagv`, any case.
fn parse_type(s: &str) -> Result<UidKind, String> {
    match s.to_lowercase().as_str() {
        "metric" | "metrics" => Ok(UidKind::Metric),
        "tagk" => Ok(UidKind::TagKey),
        "tagv" => Ok(UidKind::TagValue),
        _ => Err(format!("Invalid type requested: {s}")),
    }
}

/// The type names `/api/uid/assign` and `/api/uid/rename` take (`metrics` is not one of them).
fn kind_of(type_name: &str) -> Option<UidKind> {
    match type_name.to_lowercase().as_str() {
        "metric" => Some(UidKind::Metric),
        "tagk" => Some(UidKind::TagKey),
        "tagv" => Some(UidKind::TagValue),
        _ => None,
    }
}

/// OpenTSDB's `Tags.validateString(type, name)` with the configured special characters.
fn validate(tsd: &Tsd, what: &str, name: Option<&str>) -> Result<(), String> {
    let Some(name) = name else { return Err(format!("Invalid {what}: null")) };
    point::validate_string(&what, name, &tsd.config.rules).map_err(|e| e.message())
}

fn no_such_name(kind: UidKind, name: &str) -> String {
    format!("No such name for '{kind}': '{name}'")
}

fn no_such_uid(kind: UidKind, uid: &[u8]) -> String {
    format!("No such unique ID for '{kind}': {}", javafmt::byte_array(uid))
}

// ---------------------------------------------------------------------------------------------------------------
// /api/uid/assign

/// `/api/uid/assign` (spec: query §6.6): per type, the UIDs assigned and, when some failed, `<type>_errors` with
/// the reasons; 200 when nothing failed, else 400 with the same body.
fn assign(req: &ApiRequest, tsd: &Tsd) -> Answer {
    let mut source: Vec<(String, Vec<Option<String>>)> = Vec::new();
    match req.method {
        Method::GET => {
            for t in ["metric", "tagk", "tagv"] {
                if let Some(v) = req.param(t).filter(|v| !v.is_empty()) {
                    let names = java_split(v, ',');
                    if !names.is_empty() {
                        source.push((t.to_string(), names.into_iter().map(|n| Some(n.to_string())).collect()));
                    }
                }
            }
        }
        Method::POST => {
            for (t, v) in req.json_object()? {
                let Json::Array(items) = v else {
                    return Err(Reply::unparsable_json(&format!(
                        "Cannot deserialize a List out of {} token",
                        json_kind(&v)
                    )));
                };
                let names = items
                    .iter()
                    .map(jackson_string)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| Reply::unparsable_json(&e))?;
                source.push((t, names));
            }
        }
        _ => return Err(Reply::method_not_allowed(&req.method)),
    }
    if source.is_empty() {
        return Err(bad("Missing values to assign UIDs"));
    }
    let mut response: Vec<(String, String)> = Vec::new();
    let mut failed = false;
    for (type_name, names) in source {
        let mut results = Vec::new();
        let mut errors = Vec::new();
        for name in names {
            let key = name.clone().unwrap_or_else(|| "null".to_string());
            match assign_one(tsd, &type_name, name.as_deref()) {
                Ok(uid) => results.push((key, uid)),
                Err(reason) => errors.push((key, reason?)),
            }
        }
        response.push((type_name.clone(), tree_map_json(results)));
        if !errors.is_empty() {
            failed = true;
            response.push((format!("{type_name}_errors"), tree_map_json(errors)));
        }
    }
    let status = if failed { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    Ok(Reply::json(status, hash_map_json(&response)))
}

/// OpenTSDB's `TSDB.assignUid`: the new UID as hex, or the reason it failed (Err(Err) for a storage failure).
fn assign_one(tsd: &Tsd, type_name: &str, name: Option<&str>) -> Result<String, Result<String, Reply>> {
    validate(tsd, type_name, name).map_err(Ok)?;
    let name = name.unwrap_or_default();
    let Some(kind) = kind_of(type_name) else { return Err(Ok("Unknown type name".to_string())) };
    match tsd.store.uids().assign_new(kind, name) {
        Ok(uid) => Ok(codec::uid_to_string(uid.as_bytes())),
        Err(AssignError::Uid(UidError::Store(e))) => Err(Err(internal(e))),
        Err(e) => Err(Ok(e.to_string())),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// /api/uid/rename

/// `/api/uid/rename`: `metric|tagk|tagv=<old>&name=<new>` (GET) or the same as a JSON object (POST) →
/// `{"result":"true"}`, or 400 `{"result":"false","error":"..."}`.
fn rename(req: &ApiRequest, tsd: &Tsd) -> Answer {
    let mut source: Vec<(String, Option<String>)> = Vec::new();
    match req.method {
        Method::GET => {
            for t in ["metric", "tagk", "tagv", "name"] {
                if let Some(v) = req.param(t).filter(|v| !v.is_empty()) {
                    source.push((t.to_string(), Some(v.to_string())));
                }
            }
        }
        Method::POST => {
            for (k, v) in req.json_object()? {
                source.push((k, jackson_string(&v).map_err(|e| Reply::unparsable_json(&e))?));
            }
        }
        _ => {
            // 2.4's text lacks the space after "method" here.
            return Err(Reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                "Method not allowed",
                Some(&format!("The HTTP method[{}] is not permitted for this endpoint", req.method)),
            ));
        }
    }
    // The last type in HashMap order wins when several are given, as in OpenTSDB.
    let keys: Vec<&str> = source.iter().map(|(k, _)| k.as_str()).collect();
    let (mut type_name, mut old, mut new) = (None, None, None);
    for i in javafmt::hashmap_order(&keys) {
        let (k, v) = &source[i];
        if k == "name" {
            new = v.clone();
        } else {
            type_name = Some(k.clone());
            old = v.clone();
        }
    }
    let (Some(type_name), Some(old), Some(new)) = (type_name, old, new) else {
        return Err(bad("Missing necessary values to rename UID"));
    };
    let outcome = (|| -> Result<(), Result<String, StoreError>> {
        validate(tsd, &type_name, Some(&old)).map_err(Ok)?;
        validate(tsd, &type_name, Some(&new)).map_err(Ok)?;
        let Some(kind) = kind_of(&type_name) else { return Err(Ok("Unknown type name".to_string())) };
        match tsd.store.rename_uid(kind, &old, &new) {
            Ok(_) => Ok(()),
            Err(RenameError::Store(e)) => Err(Err(e)),
            Err(e) => Err(Ok(e.to_string())),
        }
    })();
    match outcome {
        Ok(()) => Ok(Reply::json(StatusCode::OK, hash_map_json(&[("result".into(), "\"true\"".into())]))),
        Err(Ok(reason)) => Ok(Reply::json(
            StatusCode::BAD_REQUEST,
            hash_map_json(&[("result".into(), "\"false\"".into()), ("error".into(), json_string(&reason))]),
        )),
        Err(Err(e)) => Err(internal(e)),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// /api/uid/uidmeta

/// A UIDMeta as a POST, PUT or DELETE gives it.
struct UidMetaRequest {
    uid: String,
    kind: Option<UidKind>,
    edit: UidMetaEdit,
}

fn uid_meta_request(req: &ApiRequest) -> Result<UidMetaRequest, Reply> {
    let mut r = UidMetaRequest { uid: String::new(), kind: None, edit: UidMetaEdit::default() };
    if !req.body.is_empty() {
        for (k, v) in req.json_object()? {
            let set = |r: &mut UidMetaRequest| -> Result<(), String> {
                match k.as_str() {
                    "uid" => r.uid = jackson_string(&v)?.unwrap_or_default(),
                    "type" => {
                        r.kind = match jackson_string(&v)? {
                            Some(t) => Some(parse_type(&t)?),
                            None => None,
                        }
                    }
                    "displayName" => r.edit.display_name.set(jackson_string(&v)?.unwrap_or_default()),
                    "description" => r.edit.description.set(jackson_string(&v)?.unwrap_or_default()),
                    "notes" => r.edit.notes.set(jackson_string(&v)?.unwrap_or_default()),
                    "created" => r.edit.created.set(jackson_long(&v)?),
                    "custom" => r.edit.custom.set_custom(jackson_string_map(&v)?),
                    _ => {}
                }
                Ok(())
            };
            set(&mut r).map_err(|e| Reply::unparsable_json(&e))?;
        }
        return Ok(r);
    }
    r.uid = required(req, "uid")?.to_string();
    r.kind = Some(parse_type(required(req, "type")?).map_err(|e| bad(&e))?);
    if let Some(v) = req.param("display_name") {
        r.edit.display_name.set(v.to_string());
    }
    if let Some(v) = req.param("description") {
        r.edit.description.set(v.to_string());
    }
    if let Some(v) = req.param("notes") {
        r.edit.notes.set(v.to_string());
    }
    Ok(r)
}

/// `/api/uid/uidmeta` (spec: query §6.7): GET one UIDMeta; POST merges, PUT overwrites (304 when the request
/// changes nothing); DELETE removes it (204).
fn uidmeta(req: &ApiRequest, tsd: &Tsd) -> Answer {
    let not_found = |kind: UidKind, uid: &[u8]| {
        Reply::error(StatusCode::NOT_FOUND, "Could not find the requested UID", Some(&no_such_uid(kind, uid)))
    };
    match req.method {
        Method::GET => {
            let uid = required(req, "uid")?;
            let kind = parse_type(required(req, "type")?).map_err(|e| bad(&e))?;
            let uid = codec::string_to_uid(uid, None).map_err(|e| bad_wrapped(&e.to_string()))?;
            match tsd.store.uid_meta(kind, &uid).map_err(internal)? {
                Some(m) => Ok(Reply::json(StatusCode::OK, uid_meta_json(&m))),
                None => Err(not_found(kind, &uid)),
            }
        }
        Method::POST | Method::PUT => {
            let r = uid_meta_request(req)?;
            if r.uid.is_empty() {
                return Err(bad_wrapped("Missing UID"));
            }
            let Some(kind) = r.kind else { return Err(bad_wrapped("Missing type")) };
            if !r.edit.has_changes() {
                return Ok(status_only(StatusCode::NOT_MODIFIED));
            }
            let uid = codec::string_to_uid(&r.uid, None).map_err(|e| bad_wrapped(&e.to_string()))?;
            match tsd.store.update_uid_meta(kind, &uid, &r.edit, req.method == Method::PUT).map_err(internal)? {
                Some(m) => Ok(Reply::json(StatusCode::OK, uid_meta_json(&m))),
                None => Err(not_found(kind, &uid)),
            }
        }
        Method::DELETE => {
            let r = uid_meta_request(req)?;
            let refuse =
                |d: &str| Reply::error(StatusCode::BAD_REQUEST, "Unable to delete UIDMeta information", Some(d));
            if r.uid.is_empty() {
                return Err(refuse("Missing UID"));
            }
            let Some(kind) = r.kind else { return Err(refuse("Missing type")) };
            let uid = codec::string_to_uid(&r.uid, None).map_err(|e| refuse(&e.to_string()))?;
            tsd.store.delete_uid_meta(kind, &uid).map_err(internal)?;
            Ok(status_only(StatusCode::NO_CONTENT))
        }
        _ => Err(Reply::method_not_allowed(&req.method)),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// /api/uid/tsmeta

fn ts_meta_request(req: &ApiRequest) -> Result<TsMetaEdit, Reply> {
    let mut e = TsMetaEdit::default();
    if !req.body.is_empty() {
        for (k, v) in req.json_object()? {
            let set = |e: &mut TsMetaEdit| -> Result<(), String> {
                let text = |v: &Json| jackson_string(v).map(Option::unwrap_or_default);
                match k.as_str() {
                    "tsuid" => e.tsuid = text(&v)?,
                    "displayName" => e.display_name.set(text(&v)?),
                    "description" => e.description.set(text(&v)?),
                    "notes" => e.notes.set(text(&v)?),
                    "created" => e.created.set(jackson_long(&v)?),
                    "custom" => e.custom.set_custom(jackson_string_map(&v)?),
                    "units" => e.units.set(text(&v)?),
                    "dataType" => e.data_type.set(text(&v)?),
                    "retention" => e.retention.set(jackson_int(&v)?),
                    "max" => e.max.set(jackson_double(&v)?),
                    "min" => e.min.set(jackson_double(&v)?),
                    _ => {}
                }
                Ok(())
            };
            set(&mut e).map_err(|m| Reply::unparsable_json(&m))?;
        }
        return Ok(e);
    }
    // OpenTSDB's `parseTSMetaQS`.
    e.tsuid = req.param("tsuid").unwrap_or_default().to_string();
    let strings = [
        ("display_name", &mut e.display_name),
        ("description", &mut e.description),
        ("notes", &mut e.notes),
        ("units", &mut e.units),
        ("data_type", &mut e.data_type),
    ];
    for (name, field) in strings {
        if let Some(v) = req.param(name) {
            field.set(v.to_string());
        }
    }
    if let Some(v) = req.param("retention").filter(|v| !v.is_empty()) {
        e.retention.set(v.parse::<i32>().map_err(|_| bad("Unable to parse 'retention' value"))?);
    }
    // `Float.parseFloat`: the value passes through single precision.
    let float = |name: &str| -> Result<Option<f64>, Reply> {
        match req.param(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => match parse_java_double(v) {
                Ok(d) => Ok(Some(f64::from(d as f32))),
                Err(_) => Err(bad(&format!("Unable to parse '{name}' value"))),
            },
        }
    };
    if let Some(d) = float("max")? {
        e.max.set(d);
    }
    if let Some(d) = float("min")? {
        e.min.set(d);
    }
    Ok(e)
}

/// Resolves names to UIDs: Ok(Err(text)) names the first that has none (OpenTSDB's `NoSuchUniqueName` text).
fn resolve(tsd: &Tsd, kind: UidKind, name: &str) -> Result<Result<Vec<u8>, String>, Reply> {
    Ok(tsd
        .store
        .uids()
        .get(kind, name)
        .map_err(internal)?
        .map(|u| u.as_bytes().to_vec())
        .ok_or_else(|| no_such_name(kind, name)))
}

/// A (tagk UID, tagv UID) pair.
type UidPair = (Vec<u8>, Vec<u8>);

/// The resolved (tagk, tagv) pairs of a tag map, resolved in the map's Java iteration order.
fn resolve_tags(tsd: &Tsd, tags: &[(String, String)]) -> Result<Result<Vec<UidPair>, String>, Reply> {
    let keys: Vec<&str> = tags.iter().map(|(k, _)| k.as_str()).collect();
    let mut out = Vec::with_capacity(tags.len());
    for i in javafmt::hashmap_order(&keys) {
        let k = match resolve(tsd, UidKind::TagKey, &tags[i].0)? {
            Ok(k) => k,
            Err(e) => return Ok(Err(e)),
        };
        let v = match resolve(tsd, UidKind::TagValue, &tags[i].1)? {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        out.push((k, v));
    }
    Ok(Ok(out))
}

/// `/api/uid/tsmeta` (spec: query §6.8): GET by `tsuid` (one object) or `m` (an array of every series of the metric
/// carrying the given tags); POST merges, PUT overwrites (304 when the request changes nothing), with `m` and
/// `create=true` creating; DELETE removes (204).
fn tsmeta(req: &ApiRequest, tsd: &Tsd) -> Answer {
    let store = &tsd.store;
    match req.method {
        Method::GET if req.has("tsuid") => {
            let tsuid = req.param("tsuid").unwrap_or_default();
            let tsuid = Tsuid::parse(tsuid).map_err(|e| bad_wrapped(&e))?;
            match store.ts_meta(&tsuid).map_err(internal)? {
                Some(m) => Ok(Reply::json(StatusCode::OK, ts_meta_json(&m))),
                None => Err(Reply::error(StatusCode::NOT_FOUND, "Could not find Timeseries meta data", None)),
            }
        }
        Method::GET => {
            let (metric, tags) = parse_with_metric(required(req, "m")?).map_err(|e| bad_wrapped(&e))?;
            let not_found = |e: String| Reply::error(StatusCode::NOT_FOUND, "Unable to find one of the UIDs", Some(&e));
            let metric = resolve(tsd, UidKind::Metric, &metric)?.map_err(not_found)?;
            let tags = resolve_tags(tsd, &tags)?.map_err(not_found)?;
            let metas = store.ts_metas_of_metric(&metric, &tags).map_err(internal)?;
            Ok(Reply::json(StatusCode::OK, ts_metas_json(&metas)))
        }
        Method::POST | Method::PUT => {
            let overwrite = req.method == Method::PUT;
            let edit = ts_meta_request(req)?;
            let unresolved =
                |e: String| Reply::error(StatusCode::NOT_FOUND, "Unable to find one or more UIDs", Some(&e));
            let updated = |m: Option<TsMeta>| match m {
                Some(m) => Ok(Reply::json(StatusCode::OK, ts_meta_json(&m))),
                None => Err(bad_wrapped("Requested TSMeta did not exist")),
            };
            if edit.tsuid.is_empty() {
                // No TSUID: the series named by `m`, created with `create=true` (2.1+).
                let m = required(req, "m")?;
                let create = req.param("create") == Some("true");
                let (metric, tags) = parse_with_metric(m).map_err(|e| bad_wrapped(&e))?;
                // OpenTSDB resolves the tags first, then the metric; the TSUID's pairs are sorted by tagk UID.
                let mut pairs = resolve_tags(tsd, &tags)?.map_err(unresolved)?;
                pairs.sort();
                let mut tsuid = resolve(tsd, UidKind::Metric, &metric)?.map_err(unresolved)?;
                for (k, v) in pairs {
                    tsuid.extend_from_slice(&k);
                    tsuid.extend_from_slice(&v);
                }
                store.split_tsuid(&tsuid).map_err(|e| bad_wrapped(&e))?;
                let exists = store.ts_meta_exists(&tsuid).map_err(internal)?;
                if !exists && create {
                    return updated(store.create_ts_meta(&tsuid, &edit).map_err(internal)?);
                }
                if !exists {
                    return Err(bad("Could not find TSMeta, specify \"create=true\" to create a new one."));
                }
                if !edit.has_changes() {
                    return Ok(status_only(StatusCode::NOT_MODIFIED));
                }
                return updated(store.update_ts_meta(&tsuid, &edit, overwrite).map_err(internal)?);
            }
            if !edit.has_changes() {
                return Ok(status_only(StatusCode::NOT_MODIFIED));
            }
            let tsuid = Tsuid::parse(&edit.tsuid).map_err(|e| bad_wrapped(&e))?;
            let (metric, pairs) = store.split_tsuid(&tsuid).map_err(|e| bad_wrapped(&e))?;
            // Every UID of the TSUID must have a name.
            let mut uids = vec![(UidKind::Metric, metric)];
            for (k, v) in pairs {
                uids.push((UidKind::TagKey, k));
                uids.push((UidKind::TagValue, v));
            }
            for (kind, uid) in uids {
                if store.uids().name_of(kind, uid).map_err(internal)?.is_none() {
                    return Err(unresolved(no_such_uid(kind, uid)));
                }
            }
            updated(store.update_ts_meta(&tsuid, &edit, overwrite).map_err(internal)?)
        }
        Method::DELETE => {
            let edit = ts_meta_request(req)?;
            let refuse =
                |d: &str| Reply::error(StatusCode::BAD_REQUEST, "Unable to delete TSMeta information", Some(d));
            if edit.tsuid.is_empty() {
                return Err(refuse("Missing UID"));
            }
            let tsuid = Tsuid::parse(&edit.tsuid).map_err(|e| refuse(&e))?;
            store.delete_ts_meta(&tsuid).map_err(internal)?;
            Ok(status_only(StatusCode::NO_CONTENT))
        }
        _ => Err(Reply::method_not_allowed(&req.method)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_split_drops_only_trailing_empties() {
        assert_eq!(java_split("a,b", ','), vec!["a", "b"]);
        assert_eq!(java_split("a,,b,,", ','), vec!["a", "", "b"]);
        assert_eq!(java_split(",a", ','), vec!["", "a"]);
        assert!(java_split(",,", ',').is_empty());
    }

    #[test]
    fn tree_maps_sort_like_java_and_keep_the_last_value() {
        assert_eq!(
            tree_map_json(vec![("b".into(), "1".into()), ("a".into(), "2".into()), ("b".into(), "3".into())]),
            r#"{"a":"2","b":"3"}"#
        );
        // UTF-16 order puts a supplementary character before U+FFFD; byte order would not.
        assert_eq!(java_cmp("\u{10000}", "\u{FFFD}"), Ordering::Less);
    }

    #[test]
    fn rename_replies_in_hashmap_order() {
        assert_eq!(hash_map_json(&[("result".into(), "\"true\"".into())]), r#"{"result":"true"}"#);
        let both = hash_map_json(&[("result".into(), "\"false\"".into()), ("error".into(), "\"x\"".into())]);
        assert!(both == r#"{"result":"false","error":"x"}"# || both == r#"{"error":"x","result":"false"}"#, "{both}");
    }
}
