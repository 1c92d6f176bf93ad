//! Server-side filters: a filter travels as its Java class name and that class's own protobuf. These build the
//! ones OpenTSDB's scans use (a row regex, prefixes, lists) without callers knowing the nested messages
//! (field numbers of HBase's Filter and Comparator messages).
use prost::Message;

use crate::proto;
use crate::scan::Filter;

const PKG: &str = "org.apache.hadoop.hbase.filter.";

#[derive(Clone, PartialEq, prost::Message)]
struct CompareFilter {
    #[prost(enumeration = "proto::CompareType", required, tag = "1")]
    compare_op: i32,
    #[prost(message, optional, tag = "2")]
    comparator: Option<proto::Comparator>,
}

/// RowFilter and QualifierFilter: one CompareFilter.
#[derive(Clone, PartialEq, prost::Message)]
struct WrappedCompare {
    #[prost(message, required, tag = "1")]
    compare_filter: CompareFilter,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RegexStringComparator {
    #[prost(string, required, tag = "1")]
    pattern: String,
    #[prost(int32, required, tag = "2")]
    pattern_flags: i32,
    #[prost(string, required, tag = "3")]
    charset: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PrefixFilter {
    #[prost(bytes = "vec", optional, tag = "1")]
    prefix: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct KeyOnlyFilter {
    #[prost(bool, required, tag = "1")]
    len_as_val: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct FilterList {
    /// 1 MUST_PASS_ALL, 2 MUST_PASS_ONE.
    #[prost(int32, required, tag = "1")]
    operator: i32,
    #[prost(message, repeated, tag = "2")]
    filters: Vec<proto::Filter>,
}

impl Filter {
    /// A filter of any class, already serialized.
    pub fn raw(class: &str, serialized: Vec<u8>) -> Filter {
        Filter { class: class.to_string(), serialized }
    }

    fn of(class: &str, m: &impl Message) -> Filter {
        Filter { class: format!("{PKG}{class}"), serialized: m.encode_to_vec() }
    }

    /// Rows whose key starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Filter {
        Filter::of("PrefixFilter", &PrefixFilter { prefix: Some(prefix.to_vec()) })
    }

    /// Rows whose key matches the Java regular expression `pattern`, matched against the key read as ISO-8859-1
    /// (one char per byte) — OpenTSDB's `KeyRegexpFilter`. `pattern` is given as bytes in the same reading:
    /// byte `b` stands for char U+00bb, so a row key's raw bytes can be quoted into it (`\Q...\E`).
    pub fn row_regex(pattern: &[u8]) -> Filter {
        let comparator = RegexStringComparator {
            pattern: pattern.iter().map(|&b| b as char).collect(),
            pattern_flags: 0,
            charset: "ISO-8859-1".into(),
        };
        let compare = CompareFilter {
            compare_op: proto::CompareType::Equal as i32,
            comparator: Some(proto::Comparator {
                name: format!("{PKG}RegexStringComparator"),
                serialized_comparator: Some(comparator.encode_to_vec()),
            }),
        };
        Filter::of("RowFilter", &WrappedCompare { compare_filter: compare })
    }

    /// Cells without their values (keys only).
    pub fn key_only() -> Filter {
        Filter::of("KeyOnlyFilter", &KeyOnlyFilter { len_as_val: false })
    }

    /// Rows passing every filter (`all`) or any of them.
    pub fn list(all: bool, filters: Vec<Filter>) -> Filter {
        let filters = filters
            .into_iter()
            .map(|f| proto::Filter { name: f.class, serialized_filter: Some(f.serialized) })
            .collect();
        Filter::of("FilterList", &FilterList { operator: if all { 1 } else { 2 }, filters })
    }
}
