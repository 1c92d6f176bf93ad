//! Rate options: counter handling for `rate` queries (spec: query §1.1 `rate{...}`, §4.4).

use super::javautil::{java_len, java_parse_long, split_string};
use super::RequestError;

/// Counter options of a rate query (spec: query §4.4). [`Default`] is OpenTSDB's: not a counter, counter max
/// `Long.MAX_VALUE`, reset value 0, resets not dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateOptions {
    /// The series is a monotonically increasing counter that may wrap or reset.
    pub counter: bool,
    /// The value the counter wraps at.
    pub counter_max: i64,
    /// A rate above this (when > 0) after a wrap is reported as 0.0 instead.
    pub reset_value: i64,
    /// Drop the point at a counter reset instead of computing a wrapped rate.
    pub drop_resets: bool,
}

impl Default for RateOptions {
    fn default() -> Self {
        RateOptions { counter: false, counter_max: i64::MAX, reset_value: 0, drop_resets: false }
    }
}

impl RateOptions {
    /// The `rateOptions` object as OpenTSDB echoes it in `query` (spec: query §1.6).
    pub fn to_json(&self) -> String {
        format!(
            "{{\"counter\":{},\"counterMax\":{},\"resetValue\":{},\"dropResets\":{}}}",
            self.counter, self.counter_max, self.reset_value, self.drop_resets
        )
    }

    /// Java's `RateOptions.toString()`, `{counter,max,reset}`, as it appears in OpenTSDB's query dumps.
    pub(crate) fn java_string(&self) -> String {
        format!("{{{},{},{}}}", self.counter, self.counter_max, self.reset_value)
    }
}

/// Parses the `rate...` part of a GET `m=` or `tsuid=` sub-query (spec: query §1.1).
///
/// Returns `None` when the part has no `{` (plain `rate`: options left unset, i.e. defaults), otherwise the
/// options of `rate{counter[,<max>[,<reset>]]}` / `rate{dropcounter,...}`, with OpenTSDB's error texts.
/// Exactly as OpenTSDB: the text between the 5th character and the last one is split on `,` into 1 to 3 parts;
/// `counter` is "first part ends with `counter`", `dropResets` is "first part is `dropcounter`"; an empty max
/// or reset keeps its default.
pub fn parse_rate_spec(spec: &str) -> Result<Option<RateOptions>, RequestError> {
    if !spec.contains('{') {
        return Ok(None);
    }
    parse_rate_options_msg(spec).map(Some).map_err(RequestError::bad_request)
}

/// OpenTSDB's `QueryRpc.parseRateOptions(true, spec)`.
pub(crate) fn parse_rate_options_msg(spec: &str) -> Result<RateOptions, String> {
    let len = java_len(spec);
    if len == 4 {
        return Ok(RateOptions::default());
    }
    if len < 6 {
        return Err(format!("Invalid rate options specification: {spec}"));
    }
    // Java indexes UTF-16 code units; a lone surrogate left by the cut becomes U+FFFD.
    let units: Vec<u16> = spec.encode_utf16().collect();
    let inner = String::from_utf16_lossy(&units[5..units.len() - 1]);
    let parts = split_string(&inner, ',');
    if parts.len() > 3 {
        return Err(format!(
            "Incorrect number of values in rate options specification, must be counter[,counter max value,reset \
             value], recieved: {} parts",
            parts.len()
        ));
    }
    let counter = parts[0].ends_with("counter");
    let counter_max = match parts.get(1) {
        Some(p) if !p.is_empty() => {
            java_parse_long(p).ok_or_else(|| format!("Max value of counter was not a number, received '{p}'"))?
        }
        _ => i64::MAX,
    };
    let reset_value = match parts.get(2) {
        Some(p) if !p.is_empty() => {
            java_parse_long(p).ok_or_else(|| format!("Reset value of counter was not a number, received '{p}'"))?
        }
        _ => 0,
    };
    Ok(RateOptions { counter, counter_max, reset_value, drop_resets: parts[0] == "dropcounter" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> RateOptions {
        parse_rate_spec(s).unwrap().unwrap()
    }
    fn err(s: &str) -> String {
        parse_rate_spec(s).unwrap_err().message
    }
    const MAX: i64 = i64::MAX;

    // spec: query §1.1 (rate grammar), §4.4
    #[test]
    fn forms() {
        assert_eq!(parse_rate_spec("rate").unwrap(), None);
        assert_eq!(parse_rate_spec("RATE").unwrap(), None);
        let rate = |counter, counter_max, reset_value, drop_resets| RateOptions {
            counter,
            counter_max,
            reset_value,
            drop_resets,
        };
        assert_eq!(ok("rate{counter}"), rate(true, MAX, 0, false));
        assert_eq!(ok("rate{counter,100}"), rate(true, 100, 0, false));
        assert_eq!(ok("rate{counter,100,35}"), rate(true, 100, 35, false));
        assert_eq!(ok("rate{counter,,35}"), rate(true, MAX, 35, false));
        assert_eq!(ok("rate{dropcounter}"), rate(true, MAX, 0, true));
        assert_eq!(ok("rate{dropcounter,10000,35}"), rate(true, 10000, 35, true));
        assert_eq!(ok("rate{counter,+5,-1}"), rate(true, 5, -1, false));
        // The first part only has to end with "counter".
        assert_eq!(ok("rate{xcounter}"), rate(true, MAX, 0, false));
        assert_eq!(ok("rate{foo}"), rate(false, MAX, 0, false));
        assert_eq!(ok("rate{}"), rate(false, MAX, 0, false));
        assert_eq!(RateOptions::default(), rate(false, MAX, 0, false));
    }

    // spec: query §1.1 (rate errors)
    #[test]
    fn errors() {
        assert_eq!(err("rate{"), "Invalid rate options specification: rate{");
        assert_eq!(
            err("rate{counter,1,2,3}"),
            "Incorrect number of values in rate options specification, must be counter[,counter max value,reset \
             value], recieved: 4 parts"
        );
        assert_eq!(err("rate{counter,abc}"), "Max value of counter was not a number, received 'abc'");
        assert_eq!(err("rate{counter,1,x}"), "Reset value of counter was not a number, received 'x'");
        assert_eq!(
            err("rate{counter,99999999999999999999}"),
            "Max value of counter was not a number, received '99999999999999999999'"
        );
        // The max is looked at before the reset value.
        assert_eq!(err("rate{counter,a,b}"), "Max value of counter was not a number, received 'a'");
    }

    #[test]
    fn echo() {
        let o = RateOptions { counter: true, counter_max: MAX, reset_value: 1, drop_resets: false };
        assert_eq!(
            o.to_json(),
            r#"{"counter":true,"counterMax":9223372036854775807,"resetValue":1,"dropResets":false}"#
        );
        assert_eq!(o.java_string(), "{true,9223372036854775807,1}");
    }
}
