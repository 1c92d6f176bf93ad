//! The `exp=` language of `/api/query/gexp` (spec query §6.2): Graphite-style function calls over `m=`-style
//! metric queries, e.g. `scale(sum:sys.cpu.user{host=*},2)` or `divideSeries(sum:a,sum:b)`.
//!
//! OpenTSDB 2.4 parses it with a JavaCC grammar (src/parser.jj, `SyntaxChecker`); this is our own recursive
//! descent over the same tokens:
//! * whitespace (space, tab, CR, LF) is skipped everywhere;
//! * a NAME is one or more of `A-Z a-z 0-9 * - _ # / $ @ | . ' [ ]`; the other tokens are `( ) , : { } =`;
//! * `EXPRESSION := NAME "(" PARAMETER ("," PARAMETER)* ")"`;
//! * `PARAMETER := EXPRESSION | METRIC | NAME` (a nested call, a metric query, or a literal such as `2` or `'5min'`);
//! * `METRIC := NAME ":" [NAME ":"] [NAME ":"] NAME ["{" NAME "=" NAME ("," NAME "=" NAME)* "}"]`.
//!
//! So a metric query here cannot carry the second (non-grouping) braces, filter functions such as
//! `wildcard(web*)`, or `rate{counter}`: none of those are NAME characters in 2.4 either.
//!
//! Metric queries are re-serialised without whitespace (`agg:[x:][y:]metric[{k=v,...}]`) and appended to one list
//! shared by every `exp=` of a request, as 2.4 does; the engine parses each with the `m=` grammar and runs it as
//! an ordinary sub-query. The function name is checked against 2.4's registry as soon as it is read, so an unknown
//! function is reported before a later syntax error, as in 2.4.

use super::request::{param_all, parse_get, parse_m_sub};
use super::{RequestError, TsQuery};

/// The functions 2.4.1 registers (src/query/expression/ExpressionFactory.java); names are case-sensitive and
/// several are aliases of one another.
pub const GEXP_FUNCTIONS: &[&str] = &[
    "alias",
    "scale",
    "absolute",
    "movingAverage",
    "highestCurrent",
    "highestMax",
    "shift",
    "timeShift",
    "divideSeries",
    "divide",
    "sumSeries",
    "sum",
    "diffSeries",
    "difference",
    "multiplySeries",
    "multiply",
];

/// One parsed `exp=` call.
#[derive(Debug, Clone, PartialEq)]
pub struct GexpCall {
    /// The function name as written (one of [`GEXP_FUNCTIONS`]).
    pub function: String,
    /// The arguments in the order written.
    pub args: Vec<GexpArg>,
}

/// One argument of a [`GexpCall`].
#[derive(Debug, Clone, PartialEq)]
pub enum GexpArg {
    /// A nested call.
    Call(GexpCall),
    /// A metric query: its index in the request's shared metric-query list.
    Metric(usize),
    /// A literal parameter (scale factor, alias text, window, top-n, shift), kept verbatim.
    Literal(String),
}

/// Parses one `exp=` value, appending its metric queries to `metric_queries` (shared by all the request's
/// `exp=` values).
///
/// Errors are 2.4's: an unknown function is `Function <name> has not been implemented`, anything the grammar
/// rejects is `Failed to parse <exp>`. 2.4 answers both with 500 (they are not `BadRequestException`s), and so do
/// we. (A character outside the grammar's tokens makes 2.4's lexer throw a `java.lang.Error` that no handler
/// catches, so the client gets no answer at all; we answer it like any other syntax error.)
pub fn parse_gexp(exp: &str, metric_queries: &mut Vec<String>) -> Result<GexpCall, RequestError> {
    let tokens = tokenize(exp);
    let mut parser = Parser { tokens: &tokens, pos: 0, exp, metric_queries, depth: 0 };
    let call = parser.expression()?;
    // 2.4's EXPRESSION() production returns once its closing parenthesis is read and ignores what follows.
    Ok(call)
}

/// A validated `GET /api/query/gexp` request.
#[derive(Debug, Clone, PartialEq)]
pub struct GexpQuery {
    /// The sub-queries to run: `tsuid=`, then `m=`, then every `exp=`'s metric queries, duplicates dropped, as
    /// 2.4's `parseQuery` builds them.
    pub ts_query: TsQuery,
    /// One parsed call per `exp=`, in order.
    pub expressions: Vec<GexpCall>,
    /// For each metric query of the `exp=` values ([`GexpArg::Metric`] indexes this), the index of the
    /// sub-query of [`GexpQuery::ts_query`] that answers it.
    ///
    /// 2.4 looks the answer up by the metric query's position in its own list, which is wrong as soon as `m=`
    /// parameters come first or a metric query repeats (it then evaluates another series or fails); rtsd maps
    /// each one to its own sub-query.
    pub metric_subs: Vec<usize>,
    /// The metric queries of the `exp=` values as 2.4 rebuilds them (`sum:m{host=a}`), indexed like
    /// [`GexpQuery::metric_subs`].
    pub metric_queries: Vec<String>,
}

/// Parses `GET /api/query/gexp` (spec: query §6.2): `/api/query`'s parameters plus one or more `exp=`.
pub fn parse_gexp_get(params: &[(String, String)], now_ms: i64) -> Result<GexpQuery, RequestError> {
    let mut metric_queries = Vec::new();
    let mut expressions = Vec::new();
    for exp in param_all(params, "exp") {
        expressions.push(parse_gexp(exp, &mut metric_queries)?);
    }
    let mut all: Vec<(String, String)> = params.iter().filter(|(k, _)| k != "exp").cloned().collect();
    all.extend(metric_queries.iter().map(|m| ("m".to_string(), m.clone())));
    let ts_query = parse_get(&all, now_ms)?;
    let mut metric_subs = Vec::with_capacity(metric_queries.len());
    for m in &metric_queries {
        let sub = parse_m_sub(m)?;
        let index = ts_query.queries.iter().position(|q| q.same_query(&sub)).expect("every metric query was run");
        metric_subs.push(index);
    }
    Ok(GexpQuery { ts_query, expressions, metric_subs, metric_queries })
}

fn failed(exp: &str) -> RequestError {
    RequestError::internal(format!("Failed to parse {exp}"))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Punct(char),
    /// A character that belongs to no token; lexing stops there, and only a parse that reaches it fails (2.4's
    /// lexer is lazy, so junk after the closing parenthesis goes unnoticed).
    Invalid,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '*' | '-' | '_' | '#' | '/' | '$' | '@' | '|' | '.' | '\'' | ']' | '[')
}

/// Splits `exp` into tokens, ending with [`Tok::Invalid`] at the first character that belongs to no token.
fn tokenize(exp: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = exp.chars().peekable();
    while let Some(&c) = chars.peek() {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            chars.next();
        } else if matches!(c, '(' | ')' | ',' | ':' | '{' | '}' | '=') {
            chars.next();
            out.push(Tok::Punct(c));
        } else if is_name_char(c) {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if !is_name_char(c) {
                    break;
                }
                name.push(c);
                chars.next();
            }
            out.push(Tok::Name(name));
        } else {
            // `&&` is a token of 2.4's grammar that no production uses: a syntax error either way.
            out.push(Tok::Invalid);
            break;
        }
    }
    out
}

struct Parser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    exp: &'a str,
    metric_queries: &'a mut Vec<String>,
    /// Calls open around the current position.
    depth: usize,
}

/// Deepest nesting of calls accepted: deeper is refused as a syntax error instead of risking the stack (2.4's
/// generated parser has no limit and overflows its own).
const MAX_DEPTH: usize = 64;

impl Parser<'_> {
    fn peek(&self, ahead: usize) -> Option<&Tok> {
        self.tokens.get(self.pos + ahead)
    }

    fn is_punct(&self, ahead: usize, p: char) -> bool {
        self.peek(ahead) == Some(&Tok::Punct(p))
    }

    fn is_name(&self, ahead: usize) -> bool {
        matches!(self.peek(ahead), Some(Tok::Name(_)))
    }

    fn name(&mut self) -> Result<String, RequestError> {
        match self.peek(0) {
            Some(Tok::Name(n)) => {
                let n = n.clone();
                self.pos += 1;
                Ok(n)
            }
            _ => Err(failed(self.exp)),
        }
    }

    fn punct(&mut self, p: char) -> Result<(), RequestError> {
        if self.is_punct(0, p) {
            self.pos += 1;
            Ok(())
        } else {
            Err(failed(self.exp))
        }
    }

    fn expression(&mut self) -> Result<GexpCall, RequestError> {
        let function = self.name()?;
        if !GEXP_FUNCTIONS.contains(&function.as_str()) {
            return Err(RequestError::internal(format!("Function {function} has not been implemented")));
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(failed(self.exp));
        }
        self.punct('(')?;
        let mut args = vec![self.parameter()?];
        while self.is_punct(0, ',') {
            self.pos += 1;
            args.push(self.parameter()?);
        }
        self.punct(')')?;
        self.depth -= 1;
        Ok(GexpCall { function, args })
    }

    fn parameter(&mut self) -> Result<GexpArg, RequestError> {
        if self.is_name(0) && self.is_punct(1, '(') {
            Ok(GexpArg::Call(self.expression()?))
        } else if self.is_name(0) && self.is_punct(1, ':') {
            let metric = self.metric()?;
            self.metric_queries.push(metric);
            Ok(GexpArg::Metric(self.metric_queries.len() - 1))
        } else {
            Ok(GexpArg::Literal(self.name()?))
        }
    }

    /// `agg:[x:][y:]metric[{k=v,...}]`, rebuilt without whitespace.
    fn metric(&mut self) -> Result<String, RequestError> {
        let mut out = self.name()?;
        self.punct(':')?;
        out.push(':');
        // Up to two optional `NAME :` parts (downsample, rate) before the metric name.
        for _ in 0..2 {
            if self.is_name(0) && self.is_punct(1, ':') {
                out.push_str(&self.name()?);
                self.pos += 1;
                out.push(':');
            }
        }
        out.push_str(&self.name()?);
        if self.is_punct(0, '{') {
            self.pos += 1;
            let mut pairs = Vec::new();
            loop {
                let k = self.name()?;
                self.punct('=')?;
                let v = self.name()?;
                pairs.push(format!("{k}={v}"));
                if self.is_punct(0, ',') {
                    self.pos += 1;
                } else {
                    break;
                }
            }
            self.punct('}')?;
            out.push('{');
            out.push_str(&pairs.join(","));
            out.push('}');
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::RequestErrorKind;

    fn parse(exp: &str) -> (Result<GexpCall, RequestError>, Vec<String>) {
        let mut mq = Vec::new();
        (parse_gexp(exp, &mut mq), mq)
    }

    fn lit(s: &str) -> GexpArg {
        GexpArg::Literal(s.to_string())
    }

    // spec: query §6.2 — the documented example.
    #[test]
    fn scale_of_a_metric_query() {
        let (call, mq) = parse("scale(sum:sys.cpu.user,1)");
        assert_eq!(call.unwrap(), GexpCall { function: "scale".into(), args: vec![GexpArg::Metric(0), lit("1")] });
        assert_eq!(mq, vec!["sum:sys.cpu.user"]);
    }

    // spec: query §6.2 — downsample and rate parts, tags, whitespace dropped from the rebuilt query.
    #[test]
    fn metric_query_parts_and_tags_are_rebuilt() {
        let (call, mq) = parse(" absolute( sum : 1m-avg : rate : sys.cpu.user { host = web* , dc = a|b } ) ");
        assert_eq!(call.unwrap().args, vec![GexpArg::Metric(0)]);
        assert_eq!(mq, vec!["sum:1m-avg:rate:sys.cpu.user{host=web*,dc=a|b}"]);
    }

    // spec: query §6.2 — nested calls; metric indexes run across the whole request's list.
    #[test]
    fn nested_calls_share_the_metric_list() {
        let mut mq = vec!["sum:earlier".to_string()];
        let call = parse_gexp("divideSeries(sum:a,scale(max:b{host=*},'0.5'))", &mut mq).unwrap();
        assert_eq!(
            call,
            GexpCall {
                function: "divideSeries".into(),
                args: vec![
                    GexpArg::Metric(1),
                    GexpArg::Call(GexpCall { function: "scale".into(), args: vec![GexpArg::Metric(2), lit("'0.5'")] }),
                ],
            }
        );
        assert_eq!(mq, vec!["sum:earlier", "sum:a", "max:b{host=*}"]);
    }

    // spec: query §6.2 — every registered name parses; names are case-sensitive.
    #[test]
    fn registry_names() {
        for f in GEXP_FUNCTIONS {
            assert!(parse(&format!("{f}(sum:m)")).0.is_ok(), "{f}");
        }
        let err = parse("Scale(sum:m,2)").0.unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (RequestErrorKind::Internal, "Function Scale has not been implemented")
        );
        // FirstDifference exists in 2.4's source but is not registered.
        let err = parse("firstDiff(sum:m)").0.unwrap_err();
        assert_eq!(err.message, "Function firstDiff has not been implemented");
    }

    // spec: query §6.2 — the unknown function is reported before the syntax error after it.
    #[test]
    fn unknown_function_before_syntax_error() {
        let err = parse("nope(sum:m").0.unwrap_err();
        assert_eq!(err.message, "Function nope has not been implemented");
    }

    // spec: query §6.2, §0 — what the grammar rejects is a 500 "Failed to parse <exp>".
    #[test]
    fn syntax_errors() {
        for exp in [
            "",
            "scale",
            "scale()",
            "scale(sum:m",
            "scale(sum:m,)",
            "scale(sum:m{host})",
            "scale(sum:m{host=*)",
            "scale(sum:m{host=wildcard(web*)})",
            "scale(sum:a:b:c:d,2)",
            "scale(sum:m,2+1)",
            "scale(sum:m && 2)",
            "(sum:m)",
        ] {
            let err = parse(exp).0.unwrap_err();
            assert_eq!(
                (err.kind, err.message.clone()),
                (RequestErrorKind::Internal, format!("Failed to parse {exp}")),
                "{exp:?}"
            );
            assert_eq!(err.details, None);
        }
    }

    fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    // spec: query §6.2 — m= first, then the exp= metric queries, duplicates dropped, each metric query mapped to
    // the sub-query that answers it.
    #[test]
    fn get_request_maps_metric_queries_to_sub_queries() {
        let q = parse_gexp_get(
            &p(&[
                ("start", "1h-ago"),
                ("m", "sum:b"),
                ("exp", "sumSeries(sum:a,sum:b)"),
                ("exp", "scale(sum:a{host=*},2)"),
            ]),
            1_000_000_000_000,
        )
        .unwrap();
        let metrics: Vec<_> = q.ts_query.queries.iter().map(|s| s.metric.clone().unwrap()).collect();
        assert_eq!(metrics, vec!["b", "a", "a"]);
        assert_eq!(q.metric_subs, vec![1, 0, 2]);
        assert_eq!(q.metric_queries, vec!["sum:a", "sum:b", "sum:a{host=*}"]);
        assert_eq!(q.expressions.len(), 2);
        assert_eq!(q.ts_query.start_ms, 1_000_000_000_000 - 3_600_000);
    }

    // spec: query §6.2, §1.4 — the usual /api/query errors, and no sub-query at all.
    #[test]
    fn get_request_errors() {
        let e = parse_gexp_get(&p(&[("exp", "scale(sum:a,2)")]), 0).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (RequestErrorKind::BadRequest, "Missing parameter <code>start</code>")
        );
        let e = parse_gexp_get(&p(&[("start", "1h-ago")]), 1_000_000_000_000).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (RequestErrorKind::BadRequest, "Missing sub queries"));
        let e = parse_gexp_get(&p(&[("start", "1h-ago"), ("exp", "nope(sum:a)")]), 0).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (RequestErrorKind::Internal, "Function nope has not been implemented")
        );
        let e = parse_gexp_get(&p(&[("start", "1h-ago"), ("exp", "scale(nope:a,2)")]), 1_000_000_000_000).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (RequestErrorKind::BadRequest, "No such aggregation function: nope"));
    }

    // spec: query §6.2 — nesting is bounded, so a hostile exp= cannot exhaust the stack.
    #[test]
    fn nesting_is_bounded() {
        let nested = |n: usize| format!("{}sum:m{}", "absolute(".repeat(n), ")".repeat(n));
        assert!(parse(&nested(MAX_DEPTH)).0.is_ok());
        let deep = nested(100_000);
        let err = parse(&deep).0.unwrap_err();
        assert_eq!((err.kind, err.message), (RequestErrorKind::Internal, format!("Failed to parse {deep}")));
    }

    // spec: query §6.2 — 2.4 stops at the call's closing parenthesis.
    #[test]
    fn trailing_text_is_ignored() {
        let (call, mq) = parse("absolute(sum:m) junk % + (");
        assert_eq!(call.unwrap().function, "absolute");
        assert_eq!(mq, vec!["sum:m"]);
    }
}
