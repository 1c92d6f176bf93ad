//! UIDMeta and TSMeta as `/api/uid/uidmeta` and `/api/uid/tsmeta` answer them: the objects Jackson makes of
//! OpenTSDB's `UIDMeta` and `TSMeta` (spec: query §6.7, §6.8). The records, and the storage JSON OpenTSDB keeps in
//! `tsdb-uid` and `tsdb-meta` (another field order, no names), are the store's (`store/meta.rs`).
use rtsd_protocol::codec;
use rtsd_protocol::http_json::{jackson_double_json, jackson_string_map_json, json_string};

use crate::store::meta::{type_name, TsMeta, UidMeta};

/// A UIDMeta as Jackson serialises OpenTSDB's `UIDMeta` (field order, `custom` null included).
pub fn uid_meta_json(m: &UidMeta) -> String {
    let f = &m.fields;
    format!(
        "{{\"uid\":\"{}\",\"type\":\"{}\",\"name\":{},\"description\":{},\"notes\":{},\"created\":{},\
         \"custom\":{},\"displayName\":{}}}",
        codec::uid_to_string(&m.uid),
        type_name(m.kind),
        json_string(&m.name),
        json_string(&f.description),
        json_string(&f.notes),
        f.created,
        jackson_string_map_json(f.custom.as_deref()),
        json_string(&f.display_name)
    )
}

/// A TSMeta as Jackson serialises OpenTSDB's `TSMeta`: declared fields first in declaration order, then the
/// getter-only properties, null `custom` left out (`@JsonInclude(NON_NULL)`). The docs' example, which puts
/// `custom` after `min`, is not what the code writes (spec: query §6.8).
pub fn ts_meta_json(m: &TsMeta) -> String {
    let f = &m.fields;
    let mut out = format!("{{\"tsuid\":\"{}\",\"metric\":{},\"tags\":[", m.tsuid, uid_meta_json(&m.metric));
    for (i, t) in m.tags.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&uid_meta_json(t));
    }
    out.push_str(&format!(
        "],\"description\":{},\"notes\":{},\"created\":{}",
        json_string(&f.description),
        json_string(&f.notes),
        f.created
    ));
    if f.custom.is_some() {
        out.push_str(&format!(",\"custom\":{}", jackson_string_map_json(f.custom.as_deref())));
    }
    out.push_str(&format!(
        ",\"units\":{},\"retention\":{},\"max\":{},\"min\":{},\"displayName\":{},\"dataType\":{},\
         \"lastReceived\":{},\"totalDatapoints\":{}}}",
        json_string(&f.units),
        f.retention,
        jackson_double_json(f.max),
        jackson_double_json(f.min),
        json_string(&f.display_name),
        json_string(&f.data_type),
        m.last_received,
        m.total_datapoints
    ));
    out
}

/// A JSON array of TSMeta objects.
pub fn ts_metas_json(metas: &[TsMeta]) -> String {
    let body: Vec<String> = metas.iter().map(ts_meta_json).collect();
    format!("[{}]", body.join(","))
}

#[cfg(test)]
mod tests {
    use rtsd_protocol::point::UidKind;

    use super::*;
    use crate::store::meta::{TsMetaFields, UidMetaFields};

    #[test]
    fn uid_meta_json_is_jacksons() {
        // OpenTSDB test/meta/TestUIDMeta.java `serialize` field order; spec: query §6.7 example
        let mut m = UidMeta {
            uid: vec![0, 0, 0x2A],
            kind: UidKind::Metric,
            name: "sys.cpu.0".into(),
            fields: UidMetaFields { created: 1350425579, ..UidMetaFields::default() },
        };
        assert_eq!(
            uid_meta_json(&m),
            r#"{"uid":"00002A","type":"METRIC","name":"sys.cpu.0","description":"","notes":"","created":1350425579,"custom":null,"displayName":""}"#
        );
        m.fields.display_name = "CPU".into();
        m.fields.custom = Some(vec![("owner".into(), "Jane".into())]);
        assert_eq!(
            uid_meta_json(&m),
            r#"{"uid":"00002A","type":"METRIC","name":"sys.cpu.0","description":"","notes":"","created":1350425579,"custom":{"owner":"Jane"},"displayName":"CPU"}"#
        );
    }

    #[test]
    fn ts_meta_json_orders_fields_as_jackson_and_drops_null_custom() {
        let uid = |kind, b: u8, name: &str| UidMeta {
            uid: vec![0, 0, b],
            kind,
            name: name.into(),
            fields: UidMetaFields::default(),
        };
        let mut m = TsMeta {
            tsuid: vec![0, 0, 1, 0, 0, 1, 0, 0, 1].into(),
            metric: uid(UidKind::Metric, 1, "sys.cpu.0"),
            tags: vec![uid(UidKind::TagKey, 1, "host"), uid(UidKind::TagValue, 1, "web01")],
            fields: TsMetaFields { created: 7, ..TsMetaFields::default() },
            last_received: 9,
            total_datapoints: 3,
        };
        let meta = |b: u8, t: &str, n: &str| {
            format!(
                r#"{{"uid":"00000{b}","type":"{t}","name":"{n}","description":"","notes":"","created":0,"custom":null,"displayName":""}}"#
            )
        };
        let uids = [meta(1, "METRIC", "sys.cpu.0"), meta(1, "TAGK", "host"), meta(1, "TAGV", "web01")];
        assert_eq!(
            ts_meta_json(&m),
            format!(
                r#"{{"tsuid":"000001000001000001","metric":{},"tags":[{},{}],"description":"","notes":"","created":7,"units":"","retention":0,"max":"NaN","min":"NaN","displayName":"","dataType":"","lastReceived":9,"totalDatapoints":3}}"#,
                uids[0], uids[1], uids[2]
            )
        );
        m.fields.custom = Some(vec![("owner".into(), "Jane".into())]);
        m.fields.max = 0.5;
        let with_custom = format!(
            r#"{{"tsuid":"000001000001000001","metric":{},"tags":[{},{}],"description":"","notes":"","created":7,"custom":{{"owner":"Jane"}},"units":"","retention":0,"max":0.5,"min":"NaN","displayName":"","dataType":"","lastReceived":9,"totalDatapoints":3}}"#,
            uids[0], uids[1], uids[2]
        );
        assert_eq!(ts_meta_json(&m), with_custom);
        assert_eq!(ts_metas_json(&[]), "[]");
        assert_eq!(ts_metas_json(&[m.clone(), m]), format!("[{with_custom},{with_custom}]"));
    }
}
