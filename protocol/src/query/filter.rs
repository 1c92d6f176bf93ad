//! Tag value filters: the seven types OpenTSDB 2.4 registers, their exact matching rules, and the legacy
//! `tagk=value` forms (spec: query §5).

use std::fmt;

use super::javautil::{hashset_to_string, java_lower, java_split, split_string};

/// The registered filter types of OpenTSDB 2.4 (spec: query §5.1). `not_key` is not registered in 2.4.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// `literal_or`: the value is one of `a|b|c`, case-sensitive.
    LiteralOr,
    /// `iliteral_or`: as `literal_or`, case-insensitive.
    ILiteralOr,
    /// `not_literal_or`: the value is none of `a|b|c`.
    NotLiteralOr,
    /// `not_iliteral_or`: as `not_literal_or`, case-insensitive.
    NotILiteralOr,
    /// `wildcard`: a `*` glob, case-sensitive (but see [`Filter::case_insensitive`] for the legacy `web*` form).
    Wildcard,
    /// `iwildcard`: a `*` glob, case-insensitive.
    IWildcard,
    /// `regexp`: an unanchored regular expression search.
    Regexp,
}

impl FilterKind {
    /// Every registered type, in the order `/api/config/filters` lists them (Java `HashMap` order).
    pub const ALL: [FilterKind; 7] = [
        FilterKind::Regexp,
        FilterKind::IWildcard,
        FilterKind::ILiteralOr,
        FilterKind::NotILiteralOr,
        FilterKind::NotLiteralOr,
        FilterKind::LiteralOr,
        FilterKind::Wildcard,
    ];

    /// The registered name (`literal_or`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::LiteralOr => "literal_or",
            FilterKind::ILiteralOr => "iliteral_or",
            FilterKind::NotLiteralOr => "not_literal_or",
            FilterKind::NotILiteralOr => "not_iliteral_or",
            FilterKind::Wildcard => "wildcard",
            FilterKind::IWildcard => "iwildcard",
            FilterKind::Regexp => "regexp",
        }
    }

    /// Looks a type up by its registered name, case-sensitively as OpenTSDB does.
    pub fn from_name(name: &str) -> Option<FilterKind> {
        FilterKind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn description(self) -> &'static str {
        match self {
            FilterKind::LiteralOr => {
                "Accepts one or more exact values and matches if the series contains any of them. Multiple values \
                 can be included and must be separated by the | (pipe) character. The filter is case sensitive and \
                 will not allow characters that TSDB does not allow at write time."
            }
            FilterKind::ILiteralOr => {
                "Accepts one or more exact values and matches if the series contains any of them. Multiple values \
                 can be included and must be separated by the | (pipe) character. The filter is case insensitive \
                 and will not allow characters that TSDB does not allow at write time."
            }
            FilterKind::NotLiteralOr => {
                "Accepts one or more exact values and matches if the series does NOT contain any of them. Multiple \
                 values can be included and must be separated by the | (pipe) character. The filter is case \
                 sensitive and will not allow characters that TSDB does not allow at write time."
            }
            FilterKind::NotILiteralOr => {
                "Accepts one or more exact values and matches if the series does NOT contain any of them. Multiple \
                 values can be included and must be separated by the | (pipe) character. The filter is case \
                 insensitive and will not allow characters that TSDB does not allow at write time."
            }
            FilterKind::Wildcard => {
                "Performs pre, post and in-fix glob matching of values. The globs are case sensitive and multiple \
                 wildcards can be used. The wildcard character is the * (asterisk). At least one wildcard must be \
                 present in the filter value. A wildcard by itself can be used as well to match on any value for \
                 the tag key."
            }
            FilterKind::IWildcard => {
                "Performs pre, post and in-fix glob matching of values. The globs are case insensitive and \
                 multiple wildcards can be used. The wildcard character is the * (asterisk). Case insensitivity \
                 is achieved by dropping all values to lower case. At least one wildcard must be present in the \
                 filter value. A wildcard by itself can be used as well to match on any value for the tag key."
            }
            FilterKind::Regexp => {
                "Provides full, POSIX compliant regular expression using the built in Java Pattern class. Note \
                 that an expression containing curly braces {} will not parse properly in URLs. If the pattern is \
                 not a valid regular expression then an exception will be raised."
            }
        }
    }

    fn examples(self) -> String {
        let name = self.name();
        match self {
            FilterKind::Regexp => {
                r#"host=regexp(.*)  {"type":"regexp","tagk":"host","filter":".*","groupBy":false}"#.to_string()
            }
            FilterKind::Wildcard | FilterKind::IWildcard => format!(
                r#"host={name}(web*),  host={name}(web*.tsdb.net)  {{"type":"{name}","tagk":"host","filter":"web*.tsdb.net","groupBy":false}}"#
            ),
            _ => format!(
                r#"host={name}(web01),  host={name}(web01|web02|web03)  {{"type":"{name}","tagk":"host","filter":"web01|web02|web03","groupBy":false}}"#
            ),
        }
    }
}

impl fmt::Display for FilterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `/api/config/filters` body: every filter type with its examples and description, in OpenTSDB's order
/// (spec: query §5.4).
pub fn config_filters_json() -> String {
    let mut out = String::from("{");
    for (i, kind) in FilterKind::ALL.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&crate::http_json::json_string(kind.name()));
        out.push_str(":{\"examples\":");
        out.push_str(&crate::http_json::json_string(&kind.examples()));
        out.push_str(",\"description\":");
        out.push_str(&crate::http_json::json_string(kind.description()));
        out.push('}');
    }
    out.push('}');
    out
}

/// How a filter decides, prepared once at construction.
#[derive(Debug, Clone)]
enum Matcher {
    /// `literal_or` family: the set of values (lower-cased when case-insensitive), deduplicated, in first-seen
    /// order; `negate` for the `not_` types.
    Literals {
        values: Vec<String>,
        negate: bool,
    },
    /// `wildcard` family, OpenTSDB's component algorithm (spec: query §5.2).
    Wildcard {
        has_prefix: bool,
        has_postfix: bool,
        components: Vec<String>,
        match_all: bool,
    },
    Regex(regex::Regex),
}

/// One tag value filter of a sub-query (spec: query §5).
///
/// `matches` decides a series' value for `tagk`. The engine applies the common rule itself: a series lacking
/// `tagk` is excluded for **every** filter type, the `not_*` ones included ([`Filter::matches_series`] does both).
#[derive(Debug, Clone)]
pub struct Filter {
    /// The tag key filtered on.
    pub tagk: String,
    /// The filter's type as reported (`type` in JSON and in the `query` echo).
    pub kind: FilterKind,
    /// The filter text as given (`web01|web02`, `web*`, `^web\d+$`).
    pub raw: String,
    /// Whether results are grouped by this key's values.
    pub group_by: bool,
    /// Case-insensitive matching. True for the `i*` types, and for the legacy `host=web*` form, which OpenTSDB
    /// turns into a case-insensitive filter that still reports itself as `wildcard` (spec: query §5.3).
    pub case_insensitive: bool,
    matcher: Matcher,
}

/// Filters compare by everything a client can see: key, type, text, group-by and case rule.
impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        self.tagk == other.tagk
            && self.kind == other.kind
            && self.raw == other.raw
            && self.group_by == other.group_by
            && self.case_insensitive == other.case_insensitive
    }
}

/// The message OpenTSDB gives for an unregistered filter type (used to tell it apart, see `RequestError`).
pub(crate) const NO_SUCH_FILTER: &str = "Could not find a tag value filter of the type: ";

impl Filter {
    /// Builds a filter of a registered type, as OpenTSDB's filter constructors do, with their error texts
    /// (`Filter cannot be null or empty`, `Filter must contain more than just a pipe`, `Filter must contain an
    /// asterisk`, or the regex compiler's complaint).
    pub fn new(kind: FilterKind, tagk: &str, filter: &str, group_by: bool) -> Result<Filter, String> {
        let ci = matches!(kind, FilterKind::ILiteralOr | FilterKind::NotILiteralOr | FilterKind::IWildcard);
        Self::build(kind, tagk, filter, group_by, ci)
    }

    fn build(kind: FilterKind, tagk: &str, filter: &str, group_by: bool, ci: bool) -> Result<Filter, String> {
        if tagk.is_empty() {
            return Err("Filter must have a tagk".into());
        }
        if filter.is_empty() {
            return Err("Filter cannot be null or empty".into());
        }
        let matcher = match kind {
            FilterKind::LiteralOr | FilterKind::ILiteralOr | FilterKind::NotLiteralOr | FilterKind::NotILiteralOr => {
                if filter == "|" {
                    return Err("Filter must contain more than just a pipe".into());
                }
                let mut values: Vec<String> = Vec::new();
                for v in java_split(filter, '|') {
                    let v = if ci { java_lower(v) } else { v.to_string() };
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
                let negate = matches!(kind, FilterKind::NotLiteralOr | FilterKind::NotILiteralOr);
                Matcher::Literals { values, negate }
            }
            FilterKind::Wildcard | FilterKind::IWildcard => wildcard_matcher(filter, ci)?,
            FilterKind::Regexp => Matcher::Regex(regex::Regex::new(filter).map_err(|e| e.to_string())?),
        };
        Ok(Filter { tagk: tagk.to_string(), kind, raw: filter.to_string(), group_by, case_insensitive: ci, matcher })
    }

    /// OpenTSDB's filter builder for a JSON filter object or a `type(filter)` value: checks the type and key,
    /// looks the type up (case-sensitively), then constructs (spec: query §1.2 filter object).
    pub(crate) fn from_type_name(
        type_name: Option<&str>,
        tagk: Option<&str>,
        filter: Option<&str>,
        group_by: bool,
    ) -> Result<Filter, String> {
        let type_name = type_name.filter(|t| !t.is_empty()).ok_or("The filter type cannot be null or empty")?;
        let tagk = tagk.filter(|t| !t.is_empty()).ok_or("The tagk cannot be null or empty")?;
        let kind = FilterKind::from_name(type_name).ok_or_else(|| format!("{NO_SUCH_FILTER}{type_name}"))?;
        Filter::new(kind, tagk, filter.unwrap_or(""), group_by)
    }

    /// The legacy `tagk=value` conversion of `tags` maps and `m=` braces (spec: query §5.3):
    /// `*` is a wildcard matching any value; `type(text)` is a filter of that type (type lower-cased, the value
    /// must end with `)`); a value containing `*` is a case-insensitive wildcard reported as `wildcard`; anything
    /// else is a case-sensitive `literal_or`.
    pub fn from_legacy(tagk: &str, value: &str, group_by: bool) -> Result<Filter, String> {
        if tagk.is_empty() {
            return Err("Tagk cannot be null or empty".into());
        }
        if value.is_empty() {
            return Err("Filter cannot be null or empty".into());
        }
        if value == "*" {
            return Self::build(FilterKind::Wildcard, tagk, "*", group_by, true);
        }
        if let Some(paren) = value.find('(') {
            let type_name = java_lower(&value[..paren]);
            if !value.ends_with(')') {
                return Err(format!("Filter must end with a ')': {value}"));
            }
            let inner = &value[paren + 1..value.len() - 1];
            return Self::from_type_name(Some(&type_name), Some(tagk), Some(inner), group_by);
        }
        if value.contains('*') {
            return Self::build(FilterKind::Wildcard, tagk, value, group_by, true);
        }
        Self::build(FilterKind::LiteralOr, tagk, value, group_by, false)
    }

    /// The type name (`literal_or`, ...).
    pub fn type_name(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether a series whose value for [`Filter::tagk`] is `tagv` passes this filter (spec: query §5.2).
    pub fn matches(&self, tagv: &str) -> bool {
        match &self.matcher {
            Matcher::Literals { values, negate } => {
                let found = if self.case_insensitive {
                    let lower = java_lower(tagv);
                    values.contains(&lower)
                } else {
                    values.iter().any(|v| v == tagv)
                };
                found != *negate
            }
            Matcher::Wildcard { has_prefix, has_postfix, components, match_all } => {
                if *match_all {
                    return true;
                }
                let lowered;
                let v = if self.case_insensitive {
                    lowered = java_lower(tagv);
                    lowered.as_str()
                } else {
                    tagv
                };
                wildcard_match(v, components, *has_prefix, *has_postfix)
            }
            Matcher::Regex(re) => re.is_match(tagv),
        }
    }

    /// [`Filter::matches`] plus the common rule: a series without the key (`None`) never matches, whatever the
    /// filter type (spec: query §1.5 step 3, §5.2).
    pub fn matches_series(&self, tagv: Option<&str>) -> bool {
        tagv.is_some_and(|v| self.matches(v))
    }

    /// For a case-sensitive `literal_or`, its distinct values: the engine resolves them to tag value UIDs
    /// (failing with `No such name for 'tagv'` unless configured to skip) when there are at most
    /// `tsd.query.filter.expansion_limit` of them, and may use them as row-key literals (spec: query §1.5 step 1,
    /// §5.2). `None` for every other filter (they are applied to resolved names after the scan).
    pub fn literal_values(&self) -> Option<&[String]> {
        match (&self.matcher, self.kind) {
            (Matcher::Literals { values, .. }, FilterKind::LiteralOr) => Some(values),
            _ => None,
        }
    }

    /// True for a wildcard that accepts every value (`*`): only the key's presence matters.
    pub fn is_match_all(&self) -> bool {
        matches!(self.matcher, Matcher::Wildcard { match_all: true, .. })
    }

    /// OpenTSDB's filter equality, used to de-duplicate sub-queries and brace filters: same family (literal,
    /// not-literal, wildcard, regexp), key, case rule and effective content (the literal *set*, the wildcard
    /// components, the pattern text); `group_by` and the reported type within a family are ignored.
    pub fn same_filter(&self, other: &Filter) -> bool {
        if self.tagk != other.tagk {
            return false;
        }
        match (&self.matcher, &other.matcher) {
            (Matcher::Literals { values: a, negate: na }, Matcher::Literals { values: b, negate: nb }) => {
                na == nb
                    && self.case_insensitive == other.case_insensitive
                    && a.len() == b.len()
                    && a.iter().all(|v| b.contains(v))
            }
            (Matcher::Wildcard { components: a, .. }, Matcher::Wildcard { components: b, .. }) => {
                a == b && self.case_insensitive == other.case_insensitive
            }
            (Matcher::Regex(a), Matcher::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }

    /// The filter object as OpenTSDB echoes it in `query.filters`: `{"tagk":..,"filter":..,"group_by":..,"type":..}`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"tagk\":{},\"filter\":{},\"group_by\":{},\"type\":\"{}\"}}",
            crate::http_json::json_string(&self.tagk),
            crate::http_json::json_string(&self.raw),
            self.group_by,
            self.kind.name()
        )
    }

    /// Java's `TagVFilter.toString()` as it appears in OpenTSDB's query dumps.
    pub(crate) fn java_string(&self) -> String {
        let config = match &self.matcher {
            Matcher::Literals { .. } => {
                let split: Vec<String> = java_split(&self.raw, '|')
                    .into_iter()
                    .map(|v| if self.case_insensitive { java_lower(v) } else { v.to_string() })
                    .collect();
                let refs: Vec<&str> = split.iter().map(String::as_str).collect();
                format!("{{literals={}, case={}}}", hashset_to_string(&refs), self.case_insensitive)
            }
            Matcher::Wildcard { components, .. } => {
                format!("{{components=[{}], case={}}}", components.join(", "), self.case_insensitive)
            }
            Matcher::Regex(re) => format!("{{pattern={}}}", re.as_str()),
        };
        format!(
            "filter_name={}, tagk={}, group_by={}, tagk_bytes=null, config={}",
            self.kind.name(),
            self.tagk,
            self.group_by,
            config
        )
    }
}

/// OpenTSDB's wildcard preparation: leading `*`s mean "postfix match" and trailing `*`s "prefix match"
/// (OpenTSDB's naming), both stripped; the rest is split on `*` into components (empty ones kept).
fn wildcard_matcher(filter: &str, ci: bool) -> Result<Matcher, String> {
    let lowered = if ci { java_lower(filter) } else { filter.to_string() };
    if !lowered.contains('*') {
        return Err("Filter must contain an asterisk".into());
    }
    let mut actual = lowered.as_str();
    let has_postfix = actual.starts_with('*');
    while actual.starts_with('*') && actual.len() >= 2 {
        actual = &actual[1..];
    }
    let has_prefix = actual.ends_with('*');
    while actual.ends_with('*') && actual.len() >= 2 {
        actual = &actual[..actual.len() - 1];
    }
    let components: Vec<String> = if actual.find('*').is_some_and(|i| i > 0) {
        split_string(actual, '*').into_iter().map(str::to_string).collect()
    } else {
        vec![actual.to_string()]
    };
    let match_all = components.len() == 1 && components[0] == "*";
    Ok(Matcher::Wildcard { has_prefix, has_postfix, components, match_all })
}

/// OpenTSDB's wildcard match, quirks included: with a leading `*` only, the value must end with the last
/// component; with a trailing `*` only, it must start with the first; then each component must occur at or
/// after an offset that advances by the *lengths* of the previous components (not by where they were found).
/// Offsets count UTF-16 code units, as Java's do.
fn wildcard_match(v: &str, components: &[String], has_prefix: bool, has_postfix: bool) -> bool {
    if has_postfix && !has_prefix && !components.last().is_some_and(|c| v.ends_with(c.as_str())) {
        return false;
    }
    if has_prefix && !has_postfix && !components.first().is_some_and(|c| v.starts_with(c.as_str())) {
        return false;
    }
    if v.is_ascii() && components.iter().all(|c| c.is_ascii()) {
        let parts: Vec<&[u8]> = components.iter().map(|c| c.as_bytes()).collect();
        ordered_occurrences(v.as_bytes(), &parts)
    } else {
        let hay: Vec<u16> = v.encode_utf16().collect();
        let owned: Vec<Vec<u16>> = components.iter().map(|c| c.encode_utf16().collect()).collect();
        let parts: Vec<&[u16]> = owned.iter().map(Vec::as_slice).collect();
        ordered_occurrences(&hay, &parts)
    }
}

fn ordered_occurrences<T: PartialEq>(hay: &[T], parts: &[&[T]]) -> bool {
    let mut idx = 0usize;
    for part in parts {
        if index_of(hay, part, idx).is_none() {
            return false;
        }
        idx += part.len();
    }
    true
}

/// Java's `String.indexOf(needle, from)`: an empty needle is found at `min(from, len)`.
fn index_of<T: PartialEq>(hay: &[T], needle: &[T], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from.min(hay.len()));
    }
    if from >= hay.len() || needle.len() > hay.len() - from {
        return None;
    }
    (from..=hay.len() - needle.len()).find(|&i| hay[i..i + needle.len()] == *needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(kind: FilterKind, filter: &str) -> Filter {
        Filter::new(kind, "host", filter, false).unwrap()
    }

    // spec: query §5.2 literal_or
    #[test]
    fn literal_or() {
        let l = f(FilterKind::LiteralOr, "web01|web02");
        assert!(l.matches("web01") && l.matches("web02"));
        assert!(!l.matches("WEB01") && !l.matches("web03") && !l.matches(""));
        assert!(!l.matches_series(None));
        // Java's split drops trailing empty parts but keeps inner ones.
        let trailing = f(FilterKind::LiteralOr, "a|");
        assert!(trailing.matches("a") && !trailing.matches(""));
        let inner = f(FilterKind::LiteralOr, "a||b");
        assert!(inner.matches("") && inner.matches("b"));
        // "||" splits into nothing at all, so nothing matches.
        assert!(!f(FilterKind::LiteralOr, "||").matches(""));
        assert_eq!(f(FilterKind::LiteralOr, "web01|web02|web01").literal_values().unwrap(), ["web01", "web02"]);
        assert_eq!(
            Filter::new(FilterKind::LiteralOr, "host", "|", false).unwrap_err(),
            "Filter must contain more than just a pipe"
        );
        assert_eq!(
            Filter::new(FilterKind::LiteralOr, "host", "", false).unwrap_err(),
            "Filter cannot be null or empty"
        );
        assert_eq!(Filter::new(FilterKind::LiteralOr, "", "a", false).unwrap_err(), "Filter must have a tagk");
    }

    // spec: query §5.2 iliteral_or
    #[test]
    fn iliteral_or() {
        let l = f(FilterKind::ILiteralOr, "Web01|web02");
        assert!(l.matches("WEB01") && l.matches("web01") && l.matches("wEb02"));
        assert!(!l.matches("web03"));
        assert!(l.literal_values().is_none(), "never resolved to UIDs");
    }

    // spec: query §5.2 not_literal_or, not_iliteral_or
    #[test]
    fn not_literal_or() {
        let n = f(FilterKind::NotLiteralOr, "web01|web02");
        assert!(!n.matches("web01") && n.matches("web03") && n.matches("WEB01"));
        // The key must still exist (common rule).
        assert!(!n.matches_series(None));
        assert!(n.matches_series(Some("web03")));
        let ni = f(FilterKind::NotILiteralOr, "WEB01");
        assert!(!ni.matches("web01") && ni.matches("web02"));
        assert!(n.literal_values().is_none());
    }

    // spec: query §5.2 regexp
    #[test]
    fn regexp() {
        let r = f(FilterKind::Regexp, "eb0");
        assert!(r.matches("web01"), "unanchored find");
        let anchored = f(FilterKind::Regexp, "^web0[12]$");
        assert!(anchored.matches("web01") && !anchored.matches("web011") && !anchored.matches("xweb01"));
        assert!(f(FilterKind::Regexp, ".*").matches(""));
        assert!(Filter::new(FilterKind::Regexp, "host", "[", false).is_err());
        assert_eq!(Filter::new(FilterKind::Regexp, "host", "", false).unwrap_err(), "Filter cannot be null or empty");
    }

    // spec: query §5.2 wildcard / iwildcard, including the algorithm's quirks
    #[test]
    fn wildcard() {
        let w = f(FilterKind::Wildcard, "web*");
        assert!(w.matches("web01") && w.matches("web") && !w.matches("WEB01") && !w.matches("xweb"));
        let iw = f(FilterKind::IWildcard, "WEB*");
        assert!(iw.matches("web01") && iw.matches("WEB01"));
        assert!(!f(FilterKind::Wildcard, "WEB*").matches("web01"));
        let post = f(FilterKind::Wildcard, "*.tsdb.net");
        assert!(post.matches("web01.tsdb.net") && !post.matches("web01.tsdb.net.x"));
        let infix = f(FilterKind::Wildcard, "web*.tsdb.net");
        assert!(infix.matches("web01.tsdb.net") && !infix.matches("db01.tsdb.net"));
        let both = f(FilterKind::Wildcard, "*eb*");
        assert!(both.matches("web01") && !both.matches("wxb01"));
        let all = f(FilterKind::Wildcard, "*");
        assert!(all.matches("") && all.matches("anything") && all.is_match_all());
        assert!(f(FilterKind::Wildcard, "***").is_match_all());
        assert!(!all.matches_series(None));
        // Quirk: no leading/trailing star means no anchoring at either end.
        let unanchored = f(FilterKind::Wildcard, "ogg*com");
        assert!(unanchored.matches("xxoggxxcomxx"));
        // Quirk: the offset advances by component lengths, not by where they were found, so the components can
        // overlap or come out of order.
        let overlap = f(FilterKind::Wildcard, "ab*bc");
        assert!(overlap.matches("xabc"), "'ab' found at 1, then 'bc' searched from 2: the matches share a 'b'");
        let order = f(FilterKind::Wildcard, "c*a");
        assert!(order.matches("xac"), "'c' found at 2, then 'a' searched from 1 and found before it");
        assert!(!f(FilterKind::Wildcard, "b*a").matches("ab"), "'a' searched from index 1");
        // Runs of stars give empty components, which match trivially.
        assert!(f(FilterKind::Wildcard, "a**b").matches("ab"));
        // UTF-16 offsets.
        assert!(f(FilterKind::Wildcard, "é*x").matches("éx"));
        assert!(f(FilterKind::IWildcard, "É*").matches("éa"));
        assert_eq!(
            Filter::new(FilterKind::Wildcard, "host", "web", false).unwrap_err(),
            "Filter must contain an asterisk"
        );
    }

    // spec: query §5.3
    #[test]
    fn legacy_values() {
        let star = Filter::from_legacy("host", "*", true).unwrap();
        assert_eq!((star.kind, star.raw.as_str(), star.group_by), (FilterKind::Wildcard, "*", true));
        assert!(star.is_match_all());
        let or = Filter::from_legacy("host", "web01|web02", true).unwrap();
        assert_eq!(or.kind, FilterKind::LiteralOr);
        assert!(or.matches("web02") && !or.matches("WEB02"));
        // A value with '*' is a case-insensitive wildcard that still reports `wildcard`.
        let glob = Filter::from_legacy("host", "Web*", false).unwrap();
        assert_eq!((glob.kind, glob.case_insensitive), (FilterKind::Wildcard, true));
        assert!(glob.matches("WEB01"));
        let re = Filter::from_legacy("host", "Regexp(web.*)", true).unwrap();
        assert_eq!((re.kind, re.raw.as_str()), (FilterKind::Regexp, "web.*"));
        let lit = Filter::from_legacy("host", "literal_or(a|b)", true).unwrap();
        assert_eq!((lit.kind, lit.raw.as_str()), (FilterKind::LiteralOr, "a|b"));
        // The outermost parentheses: the first '(' and the final ')'.
        let nested = Filter::from_legacy("host", "regexp(a(b)c)", true).unwrap();
        assert_eq!(nested.raw, "a(b)c");
        assert_eq!(Filter::from_legacy("host", "regexp(x", true).unwrap_err(), "Filter must end with a ')': regexp(x");
        assert_eq!(
            Filter::from_legacy("host", "nosuch(x)", true).unwrap_err(),
            "Could not find a tag value filter of the type: nosuch"
        );
        assert_eq!(Filter::from_legacy("host", "(x)", true).unwrap_err(), "The filter type cannot be null or empty");
        assert_eq!(Filter::from_legacy("host", "wildcard(web)", true).unwrap_err(), "Filter must contain an asterisk");
        assert_eq!(Filter::from_legacy("", "x", true).unwrap_err(), "Tagk cannot be null or empty");
        assert_eq!(Filter::from_legacy("host", "", true).unwrap_err(), "Filter cannot be null or empty");
        // `not_key` is not registered in 2.4.
        assert_eq!(
            Filter::from_legacy("host", "not_key()", true).unwrap_err(),
            "Could not find a tag value filter of the type: not_key"
        );
    }

    #[test]
    fn equality_like_opentsdb() {
        let a = Filter::new(FilterKind::LiteralOr, "host", "a|b", true).unwrap();
        let b = Filter::new(FilterKind::LiteralOr, "host", "b|a|a", false).unwrap();
        assert!(a.same_filter(&b), "sets compare equal, group_by ignored");
        assert!(!a.same_filter(&Filter::new(FilterKind::ILiteralOr, "host", "a|b", true).unwrap()));
        assert!(!a.same_filter(&Filter::new(FilterKind::NotLiteralOr, "host", "a|b", true).unwrap()));
        let legacy_glob = Filter::from_legacy("host", "web*", true).unwrap();
        assert!(legacy_glob.same_filter(&Filter::new(FilterKind::IWildcard, "host", "web*", false).unwrap()));
        assert!(!legacy_glob.same_filter(&Filter::new(FilterKind::Wildcard, "host", "web*", false).unwrap()));
        assert!(!a.same_filter(&Filter::new(FilterKind::LiteralOr, "dc", "a|b", true).unwrap()));
        let r = Filter::new(FilterKind::Regexp, "host", "a.*", false).unwrap();
        assert!(r.same_filter(&Filter::new(FilterKind::Regexp, "host", "a.*", true).unwrap()));
    }

    // spec: query §5.4
    #[test]
    fn config_filters() {
        let body = config_filters_json();
        assert!(body.starts_with(
            r#"{"regexp":{"examples":"host=regexp(.*)  {\"type\":\"regexp\",\"tagk\":\"host\",\"filter\":\".*\",\"groupBy\":false}","description":"Provides full, POSIX compliant regular expression using the built in Java Pattern class."#
        ));
        assert!(body.contains(
            r#""literal_or":{"examples":"host=literal_or(web01),  host=literal_or(web01|web02|web03)  {\"type\":\"literal_or\",\"tagk\":\"host\",\"filter\":\"web01|web02|web03\",\"groupBy\":false}","description":"Accepts one or more exact values and matches if the series contains any of them. Multiple values can be included and must be separated by the | (pipe) character. The filter is case sensitive and will not allow characters that TSDB does not allow at write time."}"#
        ));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 7);
        let order: Vec<&str> = FilterKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            order,
            ["regexp", "iwildcard", "iliteral_or", "not_iliteral_or", "not_literal_or", "literal_or", "wildcard"]
        );
        // The inner maps are Java HashMaps with two keys; "examples" iterates first.
        assert_eq!(crate::javafmt::hashmap_order(&["description", "examples"]), vec![1, 0]);
        assert!(body.contains(r#""iwildcard":{"examples":"host=iwildcard(web*),  host=iwildcard(web*.tsdb.net)  {\"type\":\"iwildcard\",\"tagk\":\"host\",\"filter\":\"web*.tsdb.net\",\"groupBy\":false}","description":"Performs pre, post and in-fix glob matching of values. The globs are case insensitive and multiple wildcards can be used. The wildcard character is the * (asterisk). Case insensitivity is achieved by dropping all values to lower case. At least one wildcard must be present in the filter value. A wildcard by itself can be used as well to match on any value for the tag key."}"#));
    }

    #[test]
    fn echo_and_dump() {
        let w = Filter::from_legacy("host", "*", true).unwrap();
        assert_eq!(w.to_json(), r#"{"tagk":"host","filter":"*","group_by":true,"type":"wildcard"}"#);
        assert_eq!(
            w.java_string(),
            "filter_name=wildcard, tagk=host, group_by=true, tagk_bytes=null, config={components=[*], case=true}"
        );
        let l = Filter::new(FilterKind::LiteralOr, "dc", "lga", false).unwrap();
        assert_eq!(
            l.java_string(),
            "filter_name=literal_or, tagk=dc, group_by=false, tagk_bytes=null, config={literals=[lga], case=false}"
        );
    }
}
