//! Annotations: notes attached to a series (or global) at a time, stored as odd-length columns in OpenTSDB's
//! data rows (spec: ingest §4.8, query §6.9).
use serde_json::{Map, Value as Json};

use crate::codec::MAX_SECONDS;
use crate::http_json::{jackson_long, jackson_string, jackson_string_map, json_kind, json_string};

/// First byte of an annotation column's qualifier.
pub const PREFIX: u8 = 0x01;

/// One annotation, as `/api/annotation` reads and writes it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Annotation {
    /// Upper-case hex TSUID; None for a global annotation.
    pub tsuid: Option<String>,
    pub description: Option<String>,
    pub notes: Option<String>,
    /// Free-form string map, in the order received.
    pub custom: Option<Vec<(String, String)>>,
    /// Seconds or milliseconds, as given.
    pub start_time: i64,
    pub end_time: i64,
}

impl Annotation {
    /// The annotation's JSON as OpenTSDB writes it: `tsuid`, `description`, `notes`, `custom`, `endTime`,
    /// `startTime`, null fields left out (spec: query §1.6, §6.9).
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        let mut field = |name: &str, value: String| {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&json_string(name));
            out.push(':');
            out.push_str(&value);
        };
        if let Some(t) = &self.tsuid {
            field("tsuid", json_string(t));
        }
        if let Some(d) = &self.description {
            field("description", json_string(d));
        }
        if let Some(n) = &self.notes {
            field("notes", json_string(n));
        }
        if let Some(c) = &self.custom {
            // OpenTSDB keeps `custom` in a Java HashMap: Jackson writes it in that map's order.
            let keys: Vec<&str> = c.iter().map(|(k, _)| k.as_str()).collect();
            let body: Vec<String> = crate::javafmt::hashmap_order(&keys)
                .into_iter()
                .map(|i| format!("{}:{}", json_string(&c[i].0), json_string(&c[i].1)))
                .collect();
            field("custom", format!("{{{}}}", body.join(",")));
        }
        field("endTime", self.end_time.to_string());
        field("startTime", self.start_time.to_string());
        out.push('}');
        out
    }

    /// The bytes OpenTSDB 2.4.1 stores in the annotation's column (`Annotation.getStorageJSON`, not the API form):
    /// `tsuid` (left out for a global annotation), `startTime`, `endTime`, `description` and `notes` (`""` when
    /// not given, the Java fields' defaults), `custom` with its keys sorted (a `TreeMap`) or `null`. Checked
    /// against the real 2.4.1's `tsdb scan` by compat-tests/tests/layout_vs_opentsdb.rs (spec: ingest §4.8).
    pub fn to_storage_json(&self) -> String {
        let mut out = String::from("{");
        if let Some(t) = &self.tsuid {
            out.push_str(&format!("\"tsuid\":{},", json_string(t)));
        }
        out.push_str(&format!("\"startTime\":{},\"endTime\":{}", self.start_time, self.end_time));
        for (name, value) in [("description", &self.description), ("notes", &self.notes)] {
            out.push_str(&format!(",{}:{}", json_string(name), json_string(value.as_deref().unwrap_or(""))));
        }
        match &self.custom {
            Some(c) => {
                let mut sorted: Vec<&(String, String)> = c.iter().collect();
                // Java's TreeMap<String, String> orders by String.compareTo: UTF-16 code units.
                sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                let body: Vec<String> =
                    sorted.iter().map(|(k, v)| format!("{}:{}", json_string(k), json_string(v))).collect();
                out.push_str(&format!(",\"custom\":{{{}}}", body.join(",")));
            }
            None => out.push_str(",\"custom\":null"),
        }
        out.push('}');
        out
    }

    /// Reads the fields present in a JSON object; absent fields stay as they are in `self` (so a POST can merge
    /// into a stored annotation). Fields take values as Jackson coerces them
    /// ([`jackson_string`], [`jackson_long`]).
    pub fn apply_json(&mut self, obj: &Map<String, Json>) -> Result<(), String> {
        for (k, v) in obj {
            match k.as_str() {
                "tsuid" => self.tsuid = jackson_string(v)?.filter(|t| !t.is_empty()).map(|t| t.to_ascii_uppercase()),
                "description" => self.description = jackson_string(v)?,
                "notes" => self.notes = jackson_string(v)?,
                "startTime" => self.start_time = jackson_long(v)?,
                "endTime" => self.end_time = jackson_long(v)?,
                "custom" => self.custom = jackson_string_map(v)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Parses a stored annotation object. The empty `description` / `notes` that 2.4.1's storage form always
    /// carries ([`Annotation::to_storage_json`]) read as absent, so answers stay as they were before the form.
    pub fn from_json(bytes: &[u8]) -> Result<Annotation, String> {
        let v: Json = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let Json::Object(obj) = v else { return Err("an annotation must be a JSON object".to_string()) };
        let mut a = Annotation::default();
        a.apply_json(&obj)?;
        a.description = a.description.filter(|d| !d.is_empty());
        a.notes = a.notes.filter(|n| !n.is_empty());
        Ok(a)
    }

    /// The start time in milliseconds (seconds are scaled by their magnitude, as data point timestamps are).
    pub fn start_ms(&self) -> i64 {
        if self.start_time > MAX_SECONDS {
            self.start_time
        } else {
            self.start_time * 1000
        }
    }
}

/// The column qualifier of an annotation starting at `start_time` (seconds or ms by magnitude): `01` + 2-byte
/// seconds offset, or `01` + 4-byte ms offset, from the hour. OpenTSDB 2.4 divides any start divisible by 1000 by
/// 1000 first, which misplaces second timestamps like 1328140000 (spec: ingest §4.8 quirk); rtsd decides by
/// magnitude, as for data points, so every annotation lands at its real offset.
pub fn qualifier(start_time: i64) -> Vec<u8> {
    if start_time > MAX_SECONDS {
        let offset = (start_time.rem_euclid(3_600_000)) as u32;
        let mut q = vec![PREFIX];
        q.extend_from_slice(&offset.to_be_bytes());
        q
    } else {
        let offset = (start_time.rem_euclid(3600)) as u16;
        let mut q = vec![PREFIX];
        q.extend_from_slice(&offset.to_be_bytes());
        q
    }
}

/// Parses stored annotations (bad ones skipped) and keeps those starting in `[start_ms, end_ms]`, sorted by
/// start time: what `/api/annotations` and the `annotations` of `/api/query` list.
pub fn in_range(stored: &[Vec<u8>], start_ms: i64, end_ms: i64) -> Vec<Annotation> {
    let mut list: Vec<Annotation> = stored
        .iter()
        .filter_map(|b| Annotation::from_json(b).ok())
        .filter(|a| (start_ms..=end_ms).contains(&a.start_ms()))
        .collect();
    list.sort_by_key(Annotation::start_ms);
    list
}

/// A JSON array of annotations.
pub fn render_list(list: &[Annotation]) -> String {
    let items: Vec<String> = list.iter().map(Annotation::to_json).collect();
    format!("[{}]", items.join(","))
}

/// Whether a column qualifier is an annotation's.
pub fn is_annotation_qualifier(q: &[u8]) -> bool {
    q.first() == Some(&PREFIX) && (q.len() == 3 || q.len() == 5)
}

/// The fields of a received annotation object, as given (a POST merges exactly these into what is stored).
pub type Fields = Map<String, Json>;

/// A bulk deletion request of `/api/annotation/bulk` (OpenTSDB's `AnnotationBulkDelete`): annotations starting in
/// `[startTime, endTime]` of the listed series and/or the global ones (spec: query §6.9). Times stay text until
/// the handler parses them, as OpenTSDB keeps them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BulkDelete {
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    pub tsuids: Option<Vec<String>>,
    pub global: bool,
}

impl BulkDelete {
    /// Reads a JSON body as Jackson binds it to `AnnotationBulkDelete`: numbers and booleans are accepted where
    /// text is expected, `"true"`/`"false"` and 0/1 where a boolean is, and an unknown field is an error (the
    /// class is not marked to ignore them). The error is the detail of "Unable to parse the given JSON".
    pub fn from_json(bytes: &[u8]) -> Result<BulkDelete, String> {
        let v: Json = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let Json::Object(obj) = v else { return Err("a bulk delete request must be a JSON object".to_string()) };
        let text = |k: &str, v: &Json| match v {
            Json::Null => Ok(None),
            Json::String(s) => Ok(Some(s.clone())),
            Json::Number(n) => Ok(Some(n.to_string())),
            Json::Bool(b) => Ok(Some(b.to_string())),
            _ => Err(format!("Can not deserialize a String from {} for field \"{k}\"", json_kind(v))),
        };
        let mut out = BulkDelete::default();
        for (k, v) in &obj {
            match k.as_str() {
                "startTime" => out.start_time = text(k, v)?,
                "endTime" => out.end_time = text(k, v)?,
                "global" => {
                    out.global = match v {
                        Json::Null => false,
                        Json::Bool(b) => *b,
                        Json::Number(n) => n.as_i64() != Some(0),
                        Json::String(s) if s == "true" || s == "false" => s == "true",
                        _ => {
                            return Err(format!(
                                "Can not deserialize a boolean from {} for field \"global\"",
                                json_kind(v)
                            ))
                        }
                    }
                }
                "tsuids" => {
                    out.tsuids = match v {
                        Json::Null => None,
                        Json::Array(items) => {
                            let mut list = Vec::with_capacity(items.len());
                            for item in items {
                                // Jackson keeps a null element as null; no TSUID can be made of it.
                                list.push(text(k, item)?.ok_or_else(|| "null in tsuids".to_string())?);
                            }
                            Some(list)
                        }
                        _ => {
                            return Err(format!(
                                "Can not deserialize a list from {} for field \"tsuids\"",
                                json_kind(v)
                            ))
                        }
                    }
                }
                // Output only: overwritten with the real count.
                "totalDeleted" if v.is_number() || v.is_null() => {}
                _ => return Err(format!("Unrecognized field \"{k}\"")),
            }
        }
        Ok(out)
    }

    /// The query-string form: `start_time`, `end_time`, `tsuids` (comma separated, each trimmed), `global`
    /// (present = true).
    pub fn from_params(start_time: Option<&str>, end_time: Option<&str>, tsuids: Option<&str>, global: bool) -> Self {
        BulkDelete {
            start_time: start_time.map(str::to_string),
            end_time: end_time.map(str::to_string),
            tsuids: tsuids.map(|t| t.split(',').map(|s| s.trim().to_string()).collect()),
            global,
        }
    }

    /// The reply: the request echoed as Jackson writes `AnnotationBulkDelete` (fields `tsuids`, `global`, then
    /// the getters' `startTime`, `endTime` in milliseconds and `totalDeleted`; a missing list is `null`).
    pub fn render(&self, start_ms: i64, end_ms: i64, total_deleted: u64) -> String {
        let tsuids = match &self.tsuids {
            None => "null".to_string(),
            Some(list) => format!("[{}]", list.iter().map(|t| json_string(t)).collect::<Vec<_>>().join(",")),
        };
        format!(
            r#"{{"tsuids":{tsuids},"global":{},"startTime":{start_ms},"endTime":{end_ms},"totalDeleted":{total_deleted}}}"#,
            self.global
        )
    }
}

/// A `/api/annotation/bulk` POST/PUT body: a JSON array of annotation objects (a single object is refused, as
/// Jackson refuses it for a list). The error is the detail of "Unable to parse the given JSON".
pub fn parse_list(bytes: &[u8]) -> Result<Vec<(Annotation, Fields)>, String> {
    let v: Json = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let Json::Array(items) = v else { return Err("expected a JSON array of annotations".to_string()) };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Json::Object(obj) = item else { return Err("each annotation must be a JSON object".to_string()) };
        let mut a = Annotation::default();
        a.apply_json(&obj)?;
        out.push((a, obj));
    }
    Ok(out)
}

/// The time of an annotation column from its qualifier and its row's base hour, in milliseconds.
pub fn time_from_qualifier(qualifier: &[u8], base_time: u32) -> Option<i64> {
    match qualifier {
        [PREFIX, a, b] => Some((base_time as i64 + u16::from_be_bytes([*a, *b]) as i64) * 1000),
        [PREFIX, a, b, c, d] => Some(base_time as i64 * 1000 + u32::from_be_bytes([*a, *b, *c, *d]) as i64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_json_is_2_4_1_s_bytes() {
        // What the real 2.4.1 stored for POST /api/annotation {"tsuid":"000001000001000001","startTime":1700000008,
        // "description":"d","custom":{"k":"v"}} (its `tsdb scan`); spec: ingest §4.8.
        let mut a = Annotation::from_json(
            br#"{"tsuid":"000001000001000001","startTime":1700000008,"description":"d","custom":{"k":"v"}}"#,
        )
        .unwrap();
        assert_eq!(
            a.to_storage_json(),
            r#"{"tsuid":"000001000001000001","startTime":1700000008,"endTime":0,"description":"d","notes":"","custom":{"k":"v"}}"#
        );
        // Global, no custom map: no tsuid, custom null; custom keys sorted.
        a.tsuid = None;
        a.custom = None;
        assert_eq!(
            a.to_storage_json(),
            r#"{"startTime":1700000008,"endTime":0,"description":"d","notes":"","custom":null}"#
        );
        a.custom = Some(vec![("b".into(), "2".into()), ("a".into(), "1".into())]);
        assert!(a.to_storage_json().ends_with(r#""custom":{"a":"1","b":"2"}}"#));
        // Read back, the empty notes are absent again.
        assert_eq!(Annotation::from_json(a.to_storage_json().as_bytes()).unwrap().notes, None);
    }

    #[test]
    fn qualifiers_follow_the_stored_layout() {
        // spec: ingest §4.8: annotation at 1292148123 -> 01 00 7B
        assert_eq!(qualifier(1292148123), vec![0x01, 0x00, 0x7B]);
        // A seconds timestamp divisible by 1000 keeps its real offset (rtsd does not replicate the quirk).
        assert_eq!(qualifier(1328140000), vec![0x01, 0x0A, 0xF0]);
        assert_eq!(qualifier(1356998400500), vec![0x01, 0x00, 0x00, 0x01, 0xF4]);
        assert!(is_annotation_qualifier(&[0x01, 0x00, 0x7B]));
        assert!(!is_annotation_qualifier(&[0x00, 0x00]));
    }

    #[test]
    fn json_round_trips_in_opentsdb_field_order() {
        // spec: query §1.6 example
        let text = r#"{"tsuid":"000001000001000001","description":"Testing Annotations","notes":"These would be details about the event, the description is just a summary","custom":{"owner":"jdoe","dept":"ops"},"endTime":0,"startTime":1369141261}"#;
        let a = Annotation::from_json(text.as_bytes()).unwrap();
        let again: serde_json::Value = serde_json::from_str(&a.to_json()).unwrap();
        assert_eq!(again, serde_json::from_str::<serde_json::Value>(text).unwrap());
        assert!(a
            .to_json()
            .starts_with(r#"{"tsuid":"000001000001000001","description":"Testing Annotations","notes":"#));
        assert!(a.to_json().ends_with(r#"},"endTime":0,"startTime":1369141261}"#));
        let global = Annotation { description: Some("deploy".into()), start_time: 1369141261, ..Annotation::default() };
        assert_eq!(global.to_json(), r#"{"description":"deploy","endTime":0,"startTime":1369141261}"#);
        assert_eq!(global.start_ms(), 1369141261000);
        assert!(Annotation::from_json(b"[1]").is_err());
        assert!(Annotation::from_json(br#"{"startTime":"soon"}"#).is_err());
    }

    #[test]
    fn bulk_delete_requests_bind_like_jackson() {
        // spec: query §6.9; OpenTSDB's TestAnnotationRpc bulkDeleteDELETE body
        let d = BulkDelete::from_json(
            br#"{"tsuids":["000001000001000001","000001000001000002"],"startTime":"1388450560000","endTime":"1388450562000"}"#,
        )
        .unwrap();
        assert_eq!(d.start_time.as_deref(), Some("1388450560000"));
        assert_eq!(d.tsuids.as_ref().unwrap().len(), 2);
        assert!(!d.global);
        let d = BulkDelete::from_json(br#"{"startTime":1328140799,"global":"true","totalDeleted":7}"#).unwrap();
        assert_eq!((d.start_time.as_deref(), d.global, d.tsuids.is_none()), (Some("1328140799"), true, true));
        assert_eq!(
            d.render(1328140799000, 1328140800000, 1),
            r#"{"tsuids":null,"global":true,"startTime":1328140799000,"endTime":1328140800000,"totalDeleted":1}"#
        );
        assert_eq!(
            BulkDelete::from_json(br#"{"startTime":1,"bogus":1}"#).unwrap_err(),
            r#"Unrecognized field "bogus""#
        );
        assert!(BulkDelete::from_json(b"{thisisnotjson}").is_err());
        assert!(BulkDelete::from_json(br#"{"tsuids":"000001000001000001"}"#).is_err());
        let q = BulkDelete::from_params(Some("1h-ago"), None, Some("000001000001000001, 000001000001000002"), false);
        assert_eq!(q.tsuids.unwrap(), vec!["000001000001000001", "000001000001000002"]);
        assert_eq!(BulkDelete::from_params(Some("1"), None, Some(""), false).tsuids.unwrap(), vec![""]);
    }

    #[test]
    fn bulk_bodies_are_lists_and_qualifiers_give_back_their_time() {
        let list = parse_list(br#"[{"startTime":1328140800,"description":"Boo"},{"startTime":1388450562}]"#).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].0.description.as_deref(), Some("Boo"));
        // A single object is not a list (TestAnnotationRpc bulkMissingInvalidSingleObject).
        assert!(parse_list(br#"{"startTime":1388450562,"description":"Boo"}"#).is_err());
        assert!(parse_list(b"Not a json object").is_err());
        assert!(parse_list(b"[1]").is_err());
        let base = codec_base(1292148123);
        assert_eq!(time_from_qualifier(&qualifier(1292148123), base), Some(1292148123000));
        assert_eq!(time_from_qualifier(&qualifier(1356998400500), codec_base(1356998400)), Some(1356998400500));
        assert_eq!(time_from_qualifier(&[0x01, 0x00], base), None);
    }

    fn codec_base(seconds: i64) -> u32 {
        (seconds - seconds.rem_euclid(3600)) as u32
    }
}
