//! The request side of `/api/query/exp` (spec: query §6.3): the JSON body (`time`, `filters`, `metrics`,
//! `expressions`, `outputs`), its validation with OpenTSDB 2.4.1's texts (src/query/pojo/*.java), and the
//! arithmetic expression language of `expressions[].expr`.
//!
//! 2.4 binds the body to its `Query` POJO and calls `validate()`; every complaint is an
//! `IllegalArgumentException`, which no handler maps to a 400, so the client gets a **500** with the message
//! (spec: query §0.4). Errors found in a nested object are re-thrown as `Invalid <name> at index <i>` (or
//! `Invalid time`): that is the `message`; rtsd adds the inner complaint as `details` (2.4 has it only in the
//! stack trace).
//!
//! The sub-queries are ordinary `/api/query` sub-queries: [`ExpQuery::ts_query`] holds one per metric, in the
//! order of `metrics`, built the way 2.4's `QueryExecutor` builds them (the time's downsampler and rate, the
//! metric's aggregator or else the time's, the referenced filter set).

use super::json::{as_bool, as_string, JVal};
use super::request::{filter_from_json, read_body};
use super::{Filter, RequestError, RequestErrorKind, SubQuery, TsQuery};

/// A validated `/api/query/exp` request.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpQuery {
    /// The body as bound (for the response's `query` echo).
    pub body: ExpBody,
    /// One sub-query per entry of `metrics`, same order; validated (times resolved).
    pub ts_query: TsQuery,
    /// The parsed `expr` of each entry of `expressions`, same order.
    pub parsed: Vec<Expr>,
}

/// The bound JSON body; fields keep what the client sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExpBody {
    pub name: Option<String>,
    pub time: Option<Timespan>,
    pub filters: Option<Vec<FilterSet>>,
    pub metrics: Option<Vec<MetricSpec>>,
    pub expressions: Option<Vec<ExpressionSpec>>,
    pub outputs: Option<Vec<OutputSpec>>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timespan {
    pub start: Option<String>,
    pub end: Option<String>,
    pub timezone: Option<String>,
    pub downsampler: Option<DownsamplerSpec>,
    pub aggregator: Option<String>,
    pub rate: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct DownsamplerSpec {
    pub interval: Option<String>,
    pub aggregator: Option<String>,
    pub fill_policy: Option<NumericFill>,
}

/// `{"policy":..,"value":..}`, normalised as 2.4's `NumericFillPolicy.validate()` does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumericFill {
    /// `none`, `zero`, `nan`, `null` or `scalar`.
    pub policy: &'static str,
    /// The value substituted for a missing or NaN point.
    pub value: f64,
}

impl NumericFill {
    /// 2.4's default for a metric without `fillPolicy` (its `TimeSyncedIterator` default): zero.
    pub const ZERO: NumericFill = NumericFill { policy: "zero", value: 0.0 };
    /// 2.4's default for an expression without `fillPolicy`: NaN.
    pub const NAN: NumericFill = NumericFill { policy: "nan", value: f64::NAN };
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilterSet {
    pub id: Option<String>,
    pub tags: Vec<Filter>,
    pub explicit_tags: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetricSpec {
    pub metric: Option<String>,
    pub id: Option<String>,
    pub filter: Option<String>,
    pub time_offset: Option<String>,
    pub aggregator: Option<String>,
    pub fill_policy: Option<NumericFill>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExpressionSpec {
    pub id: Option<String>,
    pub expr: Option<String>,
    /// `None`: 2.4's default join, a union on all tags including aggregated tag keys.
    pub join: Option<Join>,
    pub fill_policy: Option<NumericFill>,
}

/// How an expression pairs the series of its variables (2.4's `Join`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    /// `None` only when the client sent a join without `operator` (a validation error).
    pub operator: Option<SetOperator>,
    /// Join on the tag keys the variable's query filtered on, not on every tag.
    pub use_query_tags: bool,
    /// The aggregated tag keys are part of the join key (default true).
    pub include_agg_tags: bool,
}

impl Join {
    /// What 2.4 uses when an expression has no `join`.
    pub const DEFAULT: Join =
        Join { operator: Some(SetOperator::Union), use_query_tags: false, include_agg_tags: true };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOperator {
    Union,
    Intersection,
}

impl SetOperator {
    pub fn name(self) -> &'static str {
        match self {
            SetOperator::Union => "union",
            SetOperator::Intersection => "intersection",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputSpec {
    pub id: Option<String>,
    pub alias: Option<String>,
}

impl ExpBody {
    /// The response's `query` echo: the bound body with every property (absent ones `null`) in the order
    /// Jackson gives 2.4's POJOs (properties backed by a same-named field in field order, then getter-only ones),
    /// the default join filled in as 2.4's validation does.
    pub fn to_json(&self) -> String {
        let mut o = String::from("{\"name\":");
        o.push_str(&opt_str(self.name.as_deref()));
        o.push_str(",\"time\":");
        match &self.time {
            None => o.push_str("null"),
            Some(t) => {
                o.push_str(&format!(
                    "{{\"start\":{},\"end\":{},\"timezone\":{},\"downsampler\":",
                    opt_str(t.start.as_deref()),
                    opt_str(t.end.as_deref()),
                    opt_str(t.timezone.as_deref())
                ));
                match &t.downsampler {
                    None => o.push_str("null"),
                    Some(d) => o.push_str(&format!(
                        "{{\"interval\":{},\"aggregator\":{},\"fillPolicy\":{}}}",
                        opt_str(d.interval.as_deref()),
                        opt_str(d.aggregator.as_deref()),
                        fill_json(d.fill_policy)
                    )),
                }
                o.push_str(&format!(",\"aggregator\":{},\"rate\":{}}}", opt_str(t.aggregator.as_deref()), t.rate));
            }
        }
        o.push_str(",\"filters\":");
        push_list(&mut o, self.filters.as_deref(), |f| {
            let tags: Vec<String> = f.tags.iter().map(Filter::to_json).collect();
            format!(
                "{{\"id\":{},\"tags\":[{}],\"explicitTags\":{}}}",
                opt_str(f.id.as_deref()),
                tags.join(","),
                f.explicit_tags
            )
        });
        o.push_str(",\"metrics\":");
        push_list(&mut o, self.metrics.as_deref(), |m| {
            // Jackson writes the properties backed by a same-named field first (field order), then the getter-only
            // ones (`time_offset` and `fill_policy` are fields of other names).
            format!(
                "{{\"metric\":{},\"id\":{},\"filter\":{},\"aggregator\":{},\"timeOffset\":{},\"fillPolicy\":{}}}",
                opt_str(m.metric.as_deref()),
                opt_str(m.id.as_deref()),
                opt_str(m.filter.as_deref()),
                opt_str(m.aggregator.as_deref()),
                opt_str(m.time_offset.as_deref()),
                fill_json(m.fill_policy)
            )
        });
        o.push_str(",\"expressions\":");
        push_list(&mut o, self.expressions.as_deref(), |e| {
            let j = e.join.unwrap_or(Join::DEFAULT);
            format!(
                "{{\"id\":{},\"expr\":{},\"join\":{{\"operator\":{},\"useQueryTags\":{},\"includeAggTags\":{}}},\"fillPolicy\":{}}}",
                opt_str(e.id.as_deref()),
                opt_str(e.expr.as_deref()),
                opt_str(j.operator.map(SetOperator::name)),
                j.use_query_tags,
                j.include_agg_tags,
                fill_json(e.fill_policy)
            )
        });
        o.push_str(",\"outputs\":");
        push_list(&mut o, self.outputs.as_deref(), |out| {
            format!("{{\"id\":{},\"alias\":{}}}", opt_str(out.id.as_deref()), opt_str(out.alias.as_deref()))
        });
        o.push('}');
        o
    }
}

fn opt_str(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_string(), crate::http_json::json_string)
}

fn fill_json(f: Option<NumericFill>) -> String {
    match f {
        None => "null".into(),
        Some(f) => {
            let value =
                if f.value.is_nan() { "\"NaN\"".to_string() } else { crate::javafmt::double_to_string(f.value) };
            format!("{{\"policy\":\"{}\",\"value\":{value}}}", f.policy)
        }
    }
}

fn push_list<T>(o: &mut String, items: Option<&[T]>, f: impl Fn(&T) -> String) {
    match items {
        None => o.push_str("null"),
        Some(items) => {
            o.push('[');
            o.push_str(&items.iter().map(f).collect::<Vec<_>>().join(","));
            o.push(']');
        }
    }
}

/// OpenTSDB's message of an `IllegalArgumentException` escaping the handler.
fn illegal(message: impl Into<String>) -> RequestError {
    RequestError::internal(message)
}

/// An error inside a nested object: 2.4's wrapper message, with the inner complaint as details.
fn wrapped(message: String, inner: String) -> RequestError {
    RequestError { kind: RequestErrorKind::Internal, message, details: Some(inner) }
}

/// Parses and validates a `/api/query/exp` body (spec: query §6.3).
pub fn parse_exp(body: &[u8], now_ms: i64) -> Result<ExpQuery, RequestError> {
    if body.is_empty() {
        // JSON.parseToObject's own check, an IllegalArgumentException -> 500.
        return Err(illegal("Incoming data was null or empty"));
    }
    let root = read_body(body).map_err(RequestError::into_internal)?;
    let body = body_from_json(&root).map_err(|m| super::request::unable_to_parse(m).into_internal())?;
    let parsed = validate(&body)?;
    let ts_query = build_ts_query(&body, now_ms)?;
    Ok(ExpQuery { body, ts_query, parsed })
}

/// `Query.validate()` (src/query/pojo/Query.java), in its order; returns the parsed expressions.
fn validate(q: &ExpBody) -> Result<Vec<Expr>, RequestError> {
    let time = q.time.as_ref().ok_or_else(|| illegal("missing time"))?;
    validate_time(time).map_err(|m| wrapped("Invalid time".into(), m))?;
    let metrics = q.metrics.as_deref().filter(|m| !m.is_empty()).ok_or_else(|| illegal("missing or empty metrics"))?;
    let mut variable_ids: Vec<Option<&str>> = Vec::new();
    for m in metrics {
        if variable_ids.contains(&m.id.as_deref()) {
            return Err(illegal(format!("duplicated metric id: {}", m.id.as_deref().unwrap_or("null"))));
        }
        variable_ids.push(m.id.as_deref());
    }
    let mut filter_ids: Vec<Option<&str>> = Vec::new();
    for f in q.filters.iter().flatten() {
        if filter_ids.contains(&f.id.as_deref()) {
            return Err(illegal(format!("duplicated filter id: {}", f.id.as_deref().unwrap_or("null"))));
        }
        filter_ids.push(f.id.as_deref());
    }
    for e in q.expressions.iter().flatten() {
        if variable_ids.contains(&e.id.as_deref()) {
            return Err(illegal(format!(
                "Duplicated variable or expression id: {}",
                e.id.as_deref().unwrap_or("null")
            )));
        }
        variable_ids.push(e.id.as_deref());
    }
    for (i, m) in metrics.iter().enumerate() {
        validate_metric(m).map_err(|e| wrapped(format!("Invalid metric at index {i}"), e))?;
    }
    for (i, f) in q.filters.iter().flatten().enumerate() {
        let id = f.id.as_deref().filter(|s| !s.is_empty()).ok_or("Missing or empty id".to_string());
        id.and_then(validate_id).map_err(|e| wrapped(format!("Invalid filter at index {i}"), e))?;
    }
    let mut parsed = Vec::new();
    for (i, e) in q.expressions.iter().flatten().enumerate() {
        parsed.push(validate_expression(e).map_err(|m| wrapped(format!("Invalid expression at index {i}"), m))?);
    }
    for m in metrics {
        if let Some(f) = m.filter.as_deref().filter(|f| !f.is_empty()) {
            if q.filters.is_some() && !filter_ids.contains(&Some(f)) {
                return Err(illegal(format!(
                    "unrecognized filter id {f} in metric {}",
                    m.id.as_deref().unwrap_or("null")
                )));
            }
        }
    }
    for (e, expr) in q.expressions.iter().flatten().zip(&parsed) {
        for var in expr.variables() {
            if !variable_ids.contains(&Some(var.as_str())) {
                return Err(illegal(format!(
                    "Expression [{}] was missing input {var}",
                    e.expr.as_deref().unwrap_or("null")
                )));
            }
        }
    }
    // Outputs are not validated: one without an id names nothing and is skipped when writing.
    Ok(parsed)
}

fn validate_time(t: &Timespan) -> Result<(), String> {
    let start = t.start.as_deref().filter(|s| !s.is_empty()).ok_or("missing or empty start")?;
    let tz = t.timezone.as_deref();
    super::time::parse_time_msg(start, 0, tz)?;
    if let Some(end) = t.end.as_deref().filter(|s| !s.is_empty()) {
        super::time::parse_time_msg(end, 0, tz)?;
    }
    if let Some(ds) = &t.downsampler {
        let interval = ds.interval.as_deref().filter(|s| !s.is_empty()).ok_or("Missing or empty interval")?;
        super::time::duration_msg(interval)?;
        check_aggregator(ds.aggregator.as_deref())?;
    }
    check_aggregator(t.aggregator.as_deref())
}

/// 2.4 looks aggregators up lower-cased here (`Aggregators.get(name.toLowerCase())`), though the sub-query it
/// builds later uses the name as sent.
fn check_aggregator(name: Option<&str>) -> Result<(), String> {
    let name = name.filter(|s| !s.is_empty()).ok_or("Missing or empty aggregator")?;
    if !super::is_aggregator(&name.to_lowercase()) {
        return Err("Invalid aggregator".into());
    }
    Ok(())
}

fn validate_metric(m: &MetricSpec) -> Result<(), String> {
    m.metric.as_deref().filter(|s| !s.is_empty()).ok_or("missing or empty metric")?;
    let id = m.id.as_deref().filter(|s| !s.is_empty()).ok_or("missing or empty id")?;
    validate_id(id)?;
    if let Some(offset) = m.time_offset.as_deref() {
        super::time::parse_time_msg(offset, 0, None)?;
    }
    if let Some(agg) = m.aggregator.as_deref().filter(|s| !s.is_empty()) {
        if !super::is_aggregator(&agg.to_lowercase()) {
            return Err("Invalid aggregator".into());
        }
    }
    Ok(())
}

fn validate_expression(e: &ExpressionSpec) -> Result<Expr, String> {
    let id = e.id.as_deref().filter(|s| !s.is_empty()).ok_or("missing or empty id")?;
    validate_id(id)?;
    let expr = e.expr.as_deref().filter(|s| !s.is_empty()).ok_or("missing or empty expr")?;
    let parsed = parse_expression(expr)?;
    if let Some(join) = &e.join {
        if join.operator.is_none() {
            return Err("Missing join operator".into());
        }
    }
    Ok(parsed)
}

/// `Query.validateId`: letters and digits only, and not a single digit.
fn validate_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("The ID cannot be null or empty".into());
    }
    if let Some(c) = id.chars().find(|c| !c.is_alphanumeric()) {
        return Err(format!("Invalid id (\"{id}\"): illegal character: {c}"));
    }
    if id.chars().count() == 1 && id.chars().all(|c| c.is_ascii_digit()) {
        return Err("The ID cannot be an integer".into());
    }
    Ok(())
}

/// The sub-queries of `QueryExecutor`'s constructor, one per metric, then `TSQuery.validateAndSetQuery()`.
fn build_ts_query(q: &ExpBody, now_ms: i64) -> Result<TsQuery, RequestError> {
    let time = q.time.as_ref().expect("validated");
    let mut ts = TsQuery {
        start: time.start.clone(),
        end: time.end.clone(),
        timezone: time.timezone.clone(),
        ..TsQuery::default()
    };
    for m in q.metrics.iter().flatten() {
        let mut sub = SubQuery { metric: m.metric.clone(), rate: time.rate, ..SubQuery::default() };
        if let Some(ds) = &time.downsampler {
            // 2.4 drops the downsampler's fill policy here (its bug #898, spec §9 item 5); rtsd passes it on,
            // except `scalar`, which a downsample spec cannot carry (dropped as 2.4 does).
            let fill =
                ds.fill_policy.filter(|f| f.policy != "scalar").map(|f| format!("-{}", f.policy)).unwrap_or_default();
            sub.downsample = Some(format!(
                "{}-{}{fill}",
                ds.interval.as_deref().unwrap_or_default(),
                ds.aggregator.as_deref().unwrap_or_default()
            ));
        }
        if let Some(fid) = m.filter.as_deref().filter(|f| !f.is_empty()) {
            let sets = q
                .filters
                .as_deref()
                .filter(|f| !f.is_empty())
                .ok_or_else(|| illegal(format!("No filter defined: {fid}")))?;
            if let Some(set) = sets.iter().find(|s| s.id.as_deref() == Some(fid)) {
                sub.filters = set.tags.clone();
                sub.explicit_tags = set.explicit_tags;
            }
        }
        sub.aggregator = m.aggregator.clone().or_else(|| time.aggregator.clone()).unwrap_or_default();
        ts.queries.push(sub);
    }
    // TSQuery.validateAndSetQuery() throws IllegalArgumentExceptions too: 500, the bare message.
    ts.validate(now_ms).map_err(|e| RequestError { details: None, ..e.into_internal() })?;
    Ok(ts)
}

/// An `id` as 2.4's builders bind it: `setId` runs `Query.validateId`, so a bad id fails the binding itself.
fn bound_id(v: &JVal) -> Result<Option<String>, String> {
    let id = as_string(v)?;
    validate_id(id.as_deref().unwrap_or_default())?;
    Ok(id)
}

fn cannot(what: &str, v: &JVal) -> String {
    format!("Cannot deserialize instance of `{what}` out of {} token", v.token_name())
}

fn object<'a>(v: &'a JVal, what: &str) -> Result<Option<&'a [(String, JVal)]>, String> {
    match v {
        JVal::Null => Ok(None),
        JVal::Obj(p) => Ok(Some(p)),
        other => Err(cannot(what, other)),
    }
}

fn list<T>(v: &JVal, item: impl Fn(&JVal) -> Result<T, String>) -> Result<Option<Vec<T>>, String> {
    match v {
        JVal::Null => Ok(None),
        JVal::Arr(items) => items.iter().map(item).collect::<Result<Vec<_>, _>>().map(Some),
        other => Err(cannot("java.util.ArrayList", other)),
    }
}

fn body_from_json(root: &JVal) -> Result<ExpBody, String> {
    let pairs = object(root, "net.opentsdb.query.pojo.Query")?.ok_or("Cannot bind a null query")?;
    let mut q = ExpBody::default();
    for (k, v) in pairs {
        match k.as_str() {
            "name" => q.name = as_string(v)?,
            "time" => q.time = timespan_from_json(v)?,
            "filters" => q.filters = list(v, filter_set_from_json)?,
            "metrics" => q.metrics = list(v, metric_from_json)?,
            "expressions" => q.expressions = list(v, expression_from_json)?,
            "outputs" => q.outputs = list(v, output_from_json)?,
            _ => {}
        }
    }
    Ok(q)
}

fn timespan_from_json(v: &JVal) -> Result<Option<Timespan>, String> {
    let Some(pairs) = object(v, "net.opentsdb.query.pojo.Timespan")? else { return Ok(None) };
    let mut t = Timespan::default();
    for (k, v) in pairs {
        match k.as_str() {
            "start" => t.start = as_string(v)?,
            "end" => t.end = as_string(v)?,
            "timezone" => t.timezone = as_string(v)?,
            "aggregator" => t.aggregator = as_string(v)?,
            "rate" => t.rate = as_bool(v)?,
            "downsampler" => {
                t.downsampler = match object(v, "net.opentsdb.query.pojo.Downsampler")? {
                    None => None,
                    Some(pairs) => {
                        let mut d = DownsamplerSpec::default();
                        for (k, v) in pairs {
                            match k.as_str() {
                                "interval" => d.interval = as_string(v)?,
                                "aggregator" => d.aggregator = as_string(v)?,
                                "fillPolicy" => d.fill_policy = fill_from_json(v)?,
                                _ => {}
                            }
                        }
                        Some(d)
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Some(t))
}

/// A `NumericFillPolicy`: bound and validated at once, as 2.4's builder does.
fn fill_from_json(v: &JVal) -> Result<Option<NumericFill>, String> {
    let Some(pairs) = object(v, "net.opentsdb.query.expression.NumericFillPolicy")? else { return Ok(None) };
    let (mut policy, mut value) = (None, 0.0);
    for (k, v) in pairs {
        match k.as_str() {
            "policy" => policy = as_string(v)?,
            "value" => {
                value = match v {
                    JVal::Num(n) => super::json::float_value(n),
                    JVal::Null => 0.0,
                    JVal::Str(s) => crate::number::parse_java_double(s).map_err(|_| {
                        format!(
                            "Cannot deserialize value of type `double` from String \"{s}\": not a valid Double value"
                        )
                    })?,
                    other => return Err(cannot("double", other)),
                }
            }
            _ => {}
        }
    }
    let policy = match policy {
        None => {
            if value == 0.0 {
                "zero"
            } else if value.is_nan() {
                "nan"
            } else {
                "scalar"
            }
        }
        Some(p) => super::FillPolicy::parse(&p)?.name(),
    };
    let value = match policy {
        "none" | "nan" if value != 0.0 && !value.is_nan() => {
            return Err("The value for NONE and NAN must be NaN".into())
        }
        "zero" if value != 0.0 => return Err("The value for ZERO must be 0".into()),
        "null" if value != 0.0 && !value.is_nan() => return Err("The value for NULL must be 0".into()),
        "none" | "nan" | "null" => f64::NAN,
        "zero" => 0.0,
        _ => value,
    };
    Ok(Some(NumericFill { policy, value }))
}

fn filter_set_from_json(v: &JVal) -> Result<FilterSet, String> {
    let pairs = object(v, "net.opentsdb.query.pojo.Filter")?.ok_or("null filter")?;
    let mut f = FilterSet::default();
    for (k, v) in pairs {
        match k.as_str() {
            "id" => f.id = bound_id(v)?,
            "tags" => f.tags = list(v, filter_from_json)?.unwrap_or_default(),
            "explicitTags" => f.explicit_tags = as_bool(v)?,
            _ => {}
        }
    }
    Ok(f)
}

fn metric_from_json(v: &JVal) -> Result<MetricSpec, String> {
    let pairs = object(v, "net.opentsdb.query.pojo.Metric")?.ok_or("null metric")?;
    let mut m = MetricSpec::default();
    for (k, v) in pairs {
        match k.as_str() {
            "metric" => m.metric = as_string(v)?,
            "id" => m.id = bound_id(v)?,
            "filter" => m.filter = as_string(v)?,
            "timeOffset" => m.time_offset = as_string(v)?,
            "aggregator" => m.aggregator = as_string(v)?,
            "fillPolicy" => m.fill_policy = fill_from_json(v)?,
            _ => {}
        }
    }
    Ok(m)
}

fn expression_from_json(v: &JVal) -> Result<ExpressionSpec, String> {
    let pairs = object(v, "net.opentsdb.query.pojo.Expression")?.ok_or("null expression")?;
    let mut e = ExpressionSpec::default();
    for (k, v) in pairs {
        match k.as_str() {
            "id" => e.id = bound_id(v)?,
            "expr" => e.expr = as_string(v)?,
            "fillPolicy" => e.fill_policy = fill_from_json(v)?,
            "join" => {
                e.join = match object(v, "net.opentsdb.query.pojo.Join")? {
                    None => None,
                    Some(pairs) => {
                        let mut j = Join { operator: None, use_query_tags: false, include_agg_tags: true };
                        for (k, v) in pairs {
                            match k.as_str() {
                                "operator" => {
                                    j.operator = match as_string(v)? {
                                        None => None,
                                        Some(s) if s.eq_ignore_ascii_case("union") => Some(SetOperator::Union),
                                        Some(s) if s.eq_ignore_ascii_case("intersection") => {
                                            Some(SetOperator::Intersection)
                                        }
                                        Some(s) => return Err(format!("Unrecognized set operator: {s}")),
                                    }
                                }
                                "useQueryTags" => j.use_query_tags = as_bool(v)?,
                                "includeAggTags" => j.include_agg_tags = as_bool(v)?,
                                _ => {}
                            }
                        }
                        Some(j)
                    }
                }
            }
            _ => {}
        }
    }
    Ok(e)
}

fn output_from_json(v: &JVal) -> Result<OutputSpec, String> {
    let pairs = object(v, "net.opentsdb.query.pojo.Output")?.ok_or("null output")?;
    let mut o = OutputSpec::default();
    for (k, v) in pairs {
        match k.as_str() {
            "id" => o.id = bound_id(v)?,
            "alias" => o.alias = as_string(v)?,
            _ => {}
        }
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------------------------
// The expression language.

/// A parsed `expr`: the part of JEXL 2 that time-series expressions use.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number literal; `int` when written without a fraction or exponent (JEXL keeps those integers, so
    /// `7 / 2` is 3 as in Java).
    Num {
        value: f64,
        int: bool,
    },
    /// A metric or expression id.
    Var(String),
    /// Unary minus.
    Neg(Box<Expr>),
    /// Logical not (`!`, `not`).
    Not(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
}

/// A binary operator, loosest first: `||`; `&&`; `==` `!=`; `<` `>` `<=` `>=`; `+` `-`; `*` `/` `%`. All
/// associate to the left. Comparisons and logic give 1 or 0 (2.4 turns JEXL's booleans into 1 and 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl Expr {
    /// The variable names, each once, in order of first appearance.
    pub fn variables(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<String>) {
        match self {
            Expr::Num { .. } => {}
            Expr::Var(v) => {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Expr::Neg(e) | Expr::Not(e) => e.collect(out),
            Expr::Bin(_, l, r) => {
                l.collect(out);
                r.collect(out);
            }
        }
    }
}

/// Parses an `expr`: numbers, identifiers, arithmetic (`+ - * / %`, `div`, `mod`), comparisons
/// (`== != < > <= >=` and JEXL's `eq ne lt gt le ge`), logic (`&& || !`, `and or not`), unary minus and
/// parentheses. The rest of JEXL (strings, functions, assignments, ternaries, bitwise operators, ...) is refused
/// with a message naming the position, where 2.4 hands it to JEXL.
pub fn parse_expression(text: &str) -> Result<Expr, String> {
    let fail = |m: String| format!("Failed to parse expression [{text}]: {m}");
    let tokens = lex(text).map_err(fail)?;
    if tokens.len() > MAX_TOKENS {
        return Err(fail(format!("longer than {MAX_TOKENS} tokens")));
    }
    let mut p = ExprParser { tokens: &tokens, pos: 0, depth: 0 };
    let e = p.binary(0).map_err(fail)?;
    if let Some((at, _)) = p.tokens.get(p.pos) {
        return Err(fail(format!("unexpected input at position {at}")));
    }
    if e.variables().is_empty() {
        // ExpressionIterator's check; 2.4 makes it when the query runs, rtsd while validating.
        return Err("The expression didn't appear to have any variables".into());
    }
    Ok(e)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64, bool),
    Ident(String),
    Op(&'static str),
    Open,
    Close,
}

/// Operators by spelling, longest first so `<=` is not read as `<`.
const OPERATORS: &[&str] = &["&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%"];

fn lex(text: &str) -> Result<Vec<(usize, Tok)>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let at = i;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let mut s = String::new();
            let mut int = true;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                int &= chars[i] != '.';
                s.push(chars[i]);
                i += 1;
            }
            if i < chars.len() && matches!(chars[i], 'e' | 'E') {
                int = false;
                s.push('e');
                i += 1;
                if i < chars.len() && matches!(chars[i], '+' | '-') {
                    s.push(chars[i]);
                    i += 1;
                }
                while i < chars.len() && chars[i].is_ascii_digit() {
                    s.push(chars[i]);
                    i += 1;
                }
            }
            let value: f64 = s.parse().map_err(|_| format!("bad number at position {at}"))?;
            out.push((at, Tok::Num(value, int)));
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$') {
                s.push(chars[i]);
                i += 1;
            }
            // JEXL's operator words.
            let op = match s.as_str() {
                "div" => Some("/"),
                "mod" => Some("%"),
                "eq" => Some("=="),
                "ne" => Some("!="),
                "lt" => Some("<"),
                "gt" => Some(">"),
                "le" => Some("<="),
                "ge" => Some(">="),
                "and" => Some("&&"),
                "or" => Some("||"),
                "not" => Some("!"),
                _ => None,
            };
            out.push((at, op.map_or(Tok::Ident(s), Tok::Op)));
        } else if c == '(' {
            out.push((at, Tok::Open));
            i += 1;
        } else if c == ')' {
            out.push((at, Tok::Close));
            i += 1;
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(op) = OPERATORS.iter().find(|o| rest.starts_with(**o)) else {
                return Err(format!("unexpected '{c}' at position {at}"));
            };
            out.push((at, Tok::Op(op)));
            i += op.chars().count();
        }
    }
    Ok(out)
}

/// Longest expression accepted, and deepest nesting of parentheses and unary operators: evaluation recurses
/// over the tree, so its size is bounded instead of risking the stack.
const MAX_TOKENS: usize = 1000;
const MAX_NESTING: usize = 64;

/// The binary operators of each precedence level, loosest first.
const LEVELS: &[&[(&str, Op)]] = &[
    &[("||", Op::Or)],
    &[("&&", Op::And)],
    &[("==", Op::Eq), ("!=", Op::Ne)],
    &[("<", Op::Lt), (">", Op::Gt), ("<=", Op::Le), (">=", Op::Ge)],
    &[("+", Op::Add), ("-", Op::Sub)],
    &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Mod)],
];

struct ExprParser<'a> {
    tokens: &'a [(usize, Tok)],
    pos: usize,
    /// Parentheses and unary operators open around the current position.
    depth: usize,
}

impl ExprParser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some((_, Tok::Op(o))) => Some(o),
            _ => None,
        }
    }

    /// Operators of `LEVELS[level]` and tighter.
    fn binary(&mut self, level: usize) -> Result<Expr, String> {
        let Some(ops) = LEVELS.get(level) else { return self.unary() };
        let mut left = self.binary(level + 1)?;
        while let Some(op) = self.peek_op().and_then(|o| ops.iter().find(|(s, _)| *s == o)).map(|(_, op)| *op) {
            self.pos += 1;
            let right = self.binary(level + 1)?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(format!("nested deeper than {MAX_NESTING}"));
        }
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, String> {
        match self.peek_op() {
            Some("-") => {
                self.pos += 1;
                Ok(Expr::Neg(Box::new(self.unary()?)))
            }
            Some("+") => {
                self.pos += 1;
                self.unary()
            }
            Some("!") => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some((at, tok)) = self.tokens.get(self.pos) else {
            return Err("unexpected end of expression".into());
        };
        self.pos += 1;
        match tok {
            Tok::Num(value, int) => Ok(Expr::Num { value: *value, int: *int }),
            Tok::Ident(name) => Ok(Expr::Var(name.clone())),
            Tok::Open => {
                let e = self.binary(0)?;
                match self.tokens.get(self.pos) {
                    Some((_, Tok::Close)) => {
                        self.pos += 1;
                        Ok(e)
                    }
                    Some((at, _)) => Err(format!("expected ')' at position {at}")),
                    None => Err("expected ')' at the end".into()),
                }
            }
            _ => Err(format!("unexpected input at position {at}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_431_600_000_000;

    fn parse(body: &str) -> Result<ExpQuery, RequestError> {
        parse_exp(body.as_bytes(), NOW)
    }

    fn err(body: &str) -> (RequestErrorKind, String, Option<String>) {
        let e = parse(body).unwrap_err();
        (e.kind, e.message, e.details)
    }

    const TIME: &str = r#""time":{"start":"1431561600","aggregator":"sum"}"#;

    // spec: query §6.3 — the body of 2.4's TestQueryExecutor: two metrics on one filter set, one expression.
    #[test]
    fn binds_the_test_executor_body() {
        let q = parse(&format!(
            r#"{{{TIME},"filters":[{{"id":"f1","tags":[{{"type":"wildcard","tagk":"D","filter":"*","groupBy":true}}]}}],
            "metrics":[{{"metric":"A","id":"a","filter":"f1"}},{{"metric":"B","id":"b","filter":"f1","aggregator":"max",
            "fillPolicy":{{"policy":"scalar","value":3}}}}],
            "expressions":[{{"id":"e","expr":"a + b","join":{{"operator":"intersection"}}}}],
            "outputs":[{{"id":"e","alias":"A plus B"}}]}}"#
        ))
        .unwrap();
        assert_eq!(q.ts_query.start_ms, 1_431_561_600_000);
        assert_eq!(q.ts_query.end_ms, NOW);
        assert_eq!(q.ts_query.queries.len(), 2);
        assert_eq!(q.ts_query.queries[0].aggregator, "sum");
        assert_eq!(q.ts_query.queries[1].aggregator, "max");
        assert_eq!(q.ts_query.queries[1].metric.as_deref(), Some("B"));
        assert_eq!(q.ts_query.queries[0].group_by_tagks(), vec!["D"]);
        let m = &q.body.metrics.as_ref().unwrap()[1];
        assert_eq!(m.fill_policy, Some(NumericFill { policy: "scalar", value: 3.0 }));
        let e = &q.body.expressions.as_ref().unwrap()[0];
        assert_eq!(
            e.join,
            Some(Join { operator: Some(SetOperator::Intersection), use_query_tags: false, include_agg_tags: true })
        );
        assert_eq!(q.parsed[0].variables(), vec!["a", "b"]);
    }

    // spec: query §6.3, §9 item 5 — the downsampler (with its fill policy, which 2.4 drops) and rate reach every
    // sub-query.
    #[test]
    fn downsampler_and_rate_reach_the_sub_queries() {
        let q = parse(
            r#"{"time":{"start":"1h-ago","aggregator":"sum","rate":true,
            "downsampler":{"interval":"1m","aggregator":"avg","fillPolicy":{"policy":"zero"}}},
            "metrics":[{"metric":"A","id":"a"}]}"#,
        )
        .unwrap();
        let sub = &q.ts_query.queries[0];
        assert_eq!(sub.downsample.as_deref(), Some("1m-avg-zero"));
        assert!(sub.rate);
        assert_eq!(q.ts_query.start_ms, NOW - 3_600_000);
        // A scalar fill cannot ride in a downsample spec: dropped, as 2.4 drops every downsampler fill.
        let q = parse(
            r#"{"time":{"start":"1h-ago","aggregator":"sum",
            "downsampler":{"interval":"1m","aggregator":"avg","fillPolicy":{"policy":"scalar","value":2}}},
            "metrics":[{"metric":"A","id":"a"}]}"#,
        )
        .unwrap();
        assert_eq!(q.ts_query.queries[0].downsample.as_deref(), Some("1m-avg"));
    }

    // spec: query §6.3, §0.4 — validation errors are 500s with 2.4's texts, in 2.4's order.
    #[test]
    fn validation_errors() {
        let m = r#""metrics":[{"metric":"A","id":"a"}]"#;
        let cases: Vec<(String, &str, Option<&str>)> = vec![
            (format!("{{{m}}}"), "missing time", None),
            (r#"{"time":{"aggregator":"sum"}}"#.into(), "Invalid time", Some("missing or empty start")),
            (r#"{"time":{"start":"1h-ago"}}"#.into(), "Invalid time", Some("Missing or empty aggregator")),
            (r#"{"time":{"start":"1h-ago","aggregator":"nope"}}"#.into(), "Invalid time", Some("Invalid aggregator")),
            (
                r#"{"time":{"start":"1h-ago","aggregator":"sum","downsampler":{"aggregator":"sum"}}}"#.into(),
                "Invalid time",
                Some("Missing or empty interval"),
            ),
            (format!("{{{TIME}}}"), "missing or empty metrics", None),
            (format!(r#"{{{TIME},"metrics":[]}}"#), "missing or empty metrics", None),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"a"}},{{"metric":"B","id":"a"}}]}}"#),
                "duplicated metric id: a",
                None,
            ),
            (format!(r#"{{{TIME},{m},"filters":[{{"id":"f"}},{{"id":"f"}}]}}"#), "duplicated filter id: f", None),
            (
                format!(r#"{{{TIME},{m},"expressions":[{{"id":"a","expr":"a*2"}}]}}"#),
                "Duplicated variable or expression id: a",
                None,
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"id":"a"}}]}}"#),
                "Invalid metric at index 0",
                Some("missing or empty metric"),
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"a_b"}}]}}"#),
                "Unable to parse the given JSON",
                Some("Invalid id (\"a_b\"): illegal character: _"),
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"7"}}]}}"#),
                "Unable to parse the given JSON",
                Some("The ID cannot be an integer"),
            ),
            (
                format!(r#"{{{TIME},{m},"outputs":[{{"id":""}}]}}"#),
                "Unable to parse the given JSON",
                Some("The ID cannot be null or empty"),
            ),
            (
                format!(r#"{{{TIME},{m},"filters":[{{"id":"f.1"}}]}}"#),
                "Unable to parse the given JSON",
                Some("Invalid id (\"f.1\"): illegal character: ."),
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"a","aggregator":"x"}}]}}"#),
                "Invalid metric at index 0",
                Some("Invalid aggregator"),
            ),
            (format!(r#"{{{TIME},{m},"filters":[{{"tags":[]}}]}}"#), "Invalid filter at index 0", Some("Missing or empty id")),
            (
                format!(r#"{{{TIME},{m},"expressions":[{{"id":"e"}}]}}"#),
                "Invalid expression at index 0",
                Some("missing or empty expr"),
            ),
            (
                format!(r#"{{{TIME},{m},"expressions":[{{"id":"e","expr":"a+1","join":{{}}}}]}}"#),
                "Invalid expression at index 0",
                Some("Missing join operator"),
            ),
            (
                format!(r#"{{{TIME},{m},"expressions":[{{"id":"e","expr":"2+1"}}]}}"#),
                "Invalid expression at index 0",
                Some("The expression didn't appear to have any variables"),
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"a","filter":"g"}}],"filters":[{{"id":"f"}}]}}"#),
                "unrecognized filter id g in metric a",
                None,
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"a","filter":"g"}}]}}"#),
                "No filter defined: g",
                None,
            ),
            (
                format!(r#"{{{TIME},{m},"expressions":[{{"id":"e","expr":"a+c"}}]}}"#),
                "Expression [a+c] was missing input c",
                None,
            ),
            (
                r#"{"time":{"start":"1431561600","end":"1431561500","aggregator":"sum"},"metrics":[{"metric":"A","id":"a"}]}"#
                    .into(),
                "End time [1431561500000] must be greater than the start time [1431561600000]",
                None,
            ),
            (
                format!(r#"{{{TIME},"metrics":[{{"metric":"A","id":"a","fillPolicy":{{"policy":"zero","value":1}}}}]}}"#),
                "Unable to parse the given JSON",
                Some("The value for ZERO must be 0"),
            ),
        ];
        for (body, message, details) in cases {
            assert_eq!(
                err(&body),
                (RequestErrorKind::Internal, message.to_string(), details.map(str::to_string)),
                "{body}"
            );
        }
        assert_eq!(err(""), (RequestErrorKind::Internal, "Incoming data was null or empty".into(), None));
        assert_eq!(err("{").0, RequestErrorKind::Internal);
        assert_eq!(err("{").1, "Unable to parse the given JSON");
    }

    // spec: query §6.3 — fill policies normalise as NumericFillPolicy.validate() does.
    #[test]
    fn fill_policies() {
        let fill = |json: &str| fill_from_json(&super::super::json::parse(json).unwrap());
        assert!(fill(r#"{"policy":"nan"}"#).unwrap().unwrap().value.is_nan());
        assert_eq!(fill(r#"{"policy":"NULL"}"#).unwrap().unwrap().policy, "null");
        assert_eq!(fill(r#"{"value":5}"#).unwrap(), Some(NumericFill { policy: "scalar", value: 5.0 }));
        assert_eq!(fill(r#"{}"#).unwrap(), Some(NumericFill::ZERO));
        assert_eq!(fill(r#"{"policy":"nan","value":1}"#).unwrap_err(), "The value for NONE and NAN must be NaN");
        assert_eq!(fill(r#"{"policy":"null","value":1}"#).unwrap_err(), "The value for NULL must be 0");
        assert_eq!(fill(r#"{"policy":"x"}"#).unwrap_err(), "Unrecognized fill policy: x");
        assert_eq!(fill("null").unwrap(), None);
    }

    fn var(v: &str) -> Box<Expr> {
        Box::new(Expr::Var(v.into()))
    }

    fn num(v: f64, int: bool) -> Box<Expr> {
        Box::new(Expr::Num { value: v, int })
    }

    // spec: query §6.3 — precedence, associativity, parentheses, unary minus, JEXL's word operators.
    #[test]
    fn expression_grammar() {
        assert_eq!(
            parse_expression("a + b * 2").unwrap(),
            Expr::Bin(Op::Add, var("a"), Box::new(Expr::Bin(Op::Mul, var("b"), num(2.0, true))))
        );
        assert_eq!(
            parse_expression("(a + b) % 2.5").unwrap(),
            Expr::Bin(Op::Mod, Box::new(Expr::Bin(Op::Add, var("a"), var("b"))), num(2.5, false))
        );
        assert_eq!(
            parse_expression("a - b - c").unwrap(),
            Expr::Bin(Op::Sub, Box::new(Expr::Bin(Op::Sub, var("a"), var("b"))), var("c"))
        );
        assert_eq!(parse_expression("-a").unwrap(), Expr::Neg(var("a")));
        assert_eq!(parse_expression("a div b").unwrap(), Expr::Bin(Op::Div, var("a"), var("b")));
        assert_eq!(parse_expression("a mod 1e3").unwrap(), Expr::Bin(Op::Mod, var("a"), num(1000.0, false)));
        assert_eq!(parse_expression("e2 + e2 * sum1").unwrap().variables(), vec!["e2", "sum1"]);
        // Comparisons bind looser than arithmetic, logic looser still.
        assert_eq!(
            parse_expression("a + 1 > b || !c").unwrap(),
            Expr::Bin(
                Op::Or,
                Box::new(Expr::Bin(Op::Gt, Box::new(Expr::Bin(Op::Add, var("a"), num(1.0, true))), var("b"))),
                Box::new(Expr::Not(var("c")))
            )
        );
        assert_eq!(
            parse_expression("a le b and a != 2").unwrap(),
            Expr::Bin(
                Op::And,
                Box::new(Expr::Bin(Op::Le, var("a"), var("b"))),
                Box::new(Expr::Bin(Op::Ne, var("a"), num(2.0, true)))
            )
        );
    }

    // spec: query §6.3 — size and nesting are bounded, so a hostile expr cannot exhaust the stack.
    #[test]
    fn expression_size_is_bounded() {
        let long = vec!["a"; 501].join("+");
        assert!(parse_expression(&vec!["a"; 500].join("+")).is_ok());
        assert_eq!(
            parse_expression(&long).unwrap_err(),
            format!("Failed to parse expression [{long}]: longer than 1000 tokens")
        );
        let deep = format!("{}a{}", "(".repeat(65), ")".repeat(65));
        assert_eq!(
            parse_expression(&deep).unwrap_err(),
            format!("Failed to parse expression [{deep}]: nested deeper than 64")
        );
        assert!(parse_expression(&format!("{}a{}", "(".repeat(60), ")".repeat(60))).is_ok());
        assert!(parse_expression(&format!("{}a", "-".repeat(65))).is_err());
    }

    #[test]
    fn expression_errors() {
        for (text, message) in [
            ("a +", "Failed to parse expression [a +]: unexpected end of expression"),
            ("(a", "Failed to parse expression [(a]: expected ')' at the end"),
            ("a b", "Failed to parse expression [a b]: unexpected input at position 2"),
            ("a = b", "Failed to parse expression [a = b]: unexpected '=' at position 2"),
            ("a & b", "Failed to parse expression [a & b]: unexpected '&' at position 2"),
            ("a ? 1 : 2", "Failed to parse expression [a ? 1 : 2]: unexpected '?' at position 2"),
            ("f(a)", "Failed to parse expression [f(a)]: unexpected input at position 1"),
            ("1 + 2", "The expression didn't appear to have any variables"),
        ] {
            assert_eq!(parse_expression(text).unwrap_err(), message, "{text}");
        }
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            // spec: query §6.3 — any text is parsed or refused, never a panic; what parses names its variables.
            #[test]
            fn any_expression_text_is_handled(text in "[a-c0-9 .+*/%()<>=!&|-]{0,40}") {
                if let Ok(e) = parse_expression(&text) {
                    prop_assert!(!e.variables().is_empty());
                }
            }

            // spec: query §6.3 — any body is bound, validated or refused with a 4xx/5xx, never a panic.
            #[test]
            fn any_body_is_handled(body in r#"\{("(time|metrics|expressions|outputs|filters|start|id|expr|metric|aggregator)":(\{|\[|"a"|"sum"|1|null|\]|\}|,)*)*\}"#) {
                if let Err(e) = parse_exp(body.as_bytes(), 1_431_600_000_000) {
                    prop_assert!(!e.message.is_empty());
                }
            }
        }
    }
}
