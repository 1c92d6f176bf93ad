//! Downsample specifications: `<interval>[c]-<function>[-<fill>]` (spec: query §3.1, §3.4).

use super::javautil::{java_parse_int, java_split};
use super::time::duration_msg;
use super::RequestError;

/// What a downsampler puts in buckets that received no data (spec: query §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FillPolicy {
    /// `none` (the default): empty buckets are not emitted; cross-series aggregation interpolates.
    None,
    /// `zero`: empty buckets are 0.0.
    Zero,
    /// `nan`: empty buckets are NaN, written as the string `"NaN"`.
    NaN,
    /// `null`: empty buckets are NaN, written as JSON `null`.
    Null,
    /// `scalar`: accepted by OpenTSDB's parser but unusable in `/api/query` (2.4 fails at run time with
    /// "unhandled fill policy"); it only has a value in `/api/query/exp`.
    Scalar,
}

impl FillPolicy {
    /// The policy's name as OpenTSDB writes it.
    pub fn name(self) -> &'static str {
        match self {
            FillPolicy::None => "none",
            FillPolicy::Zero => "zero",
            FillPolicy::NaN => "nan",
            FillPolicy::Null => "null",
            FillPolicy::Scalar => "scalar",
        }
    }

    /// Parses a policy name, case-insensitively; the error is OpenTSDB's `Unrecognized fill policy: <x>`.
    pub fn parse(s: &str) -> Result<FillPolicy, String> {
        [FillPolicy::None, FillPolicy::Zero, FillPolicy::NaN, FillPolicy::Null, FillPolicy::Scalar]
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("Unrecognized fill policy: {s}"))
    }
}

/// A calendar unit for calendar-aligned downsampling (spec: query §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CalendarUnit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl CalendarUnit {
    /// The unit of a duration suffix (`ms`, `s`, `m`, `h`, `d`, `w`, `n`, `y`; case-insensitive as in
    /// `DateTime.unitsToCalendarType`).
    pub fn from_suffix(suffix: &str) -> Option<CalendarUnit> {
        Some(match suffix.to_ascii_lowercase().as_str() {
            "ms" => CalendarUnit::Millisecond,
            "s" => CalendarUnit::Second,
            "m" => CalendarUnit::Minute,
            "h" => CalendarUnit::Hour,
            "d" => CalendarUnit::Day,
            "w" => CalendarUnit::Week,
            "n" => CalendarUnit::Month,
            "y" => CalendarUnit::Year,
            _ => return None,
        })
    }

    /// The fixed length `DateTime.parseDuration` gives one unit (`n` = 30 days, `y` = 365 days); calendar mode
    /// still uses it to align the scan window (spec: query §1.5 step 2).
    pub fn fixed_ms(self) -> i64 {
        match self {
            CalendarUnit::Millisecond => 1,
            CalendarUnit::Second => 1_000,
            CalendarUnit::Minute => 60_000,
            CalendarUnit::Hour => 3_600_000,
            CalendarUnit::Day => 86_400_000,
            CalendarUnit::Week => 7 * 86_400_000,
            CalendarUnit::Month => 30 * 86_400_000,
            CalendarUnit::Year => 365 * 86_400_000,
        }
    }
}

/// The `count` x `unit` step of a calendar downsampler (`1dc` -> 1 x Day), as OpenTSDB's `Downsampler` derives
/// it from the interval text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CalendarInterval {
    pub count: i32,
    pub unit: CalendarUnit,
}

/// A parsed downsample specification (spec: query §3.1).
///
/// `interval_ms` is the fixed bucket width; for calendar downsampling use [`DownsampleSpec::calendar_interval`]
/// with `timezone`. After [`crate::query::TsQuery`] validation, `calendar` is true when the spec had the `c`
/// suffix *or* the query set `useCalendar`, and `timezone` is the query's zone (None = UTC).
#[derive(Debug, Clone, PartialEq)]
pub struct DownsampleSpec {
    /// The specification as the client sent it (`1h-avg-nan`).
    pub spec: String,
    /// Bucket width in ms for fixed intervals; 0 for "all".
    pub interval_ms: i64,
    /// The interval text without the calendar `c` (`1h`, `1d`, `0all`).
    pub string_interval: String,
    /// Calendar-aligned buckets (see above).
    pub calendar: bool,
    /// "all" mode (`0all-sum`): one bucket per series over [start, end).
    pub run_all: bool,
    /// The aggregator used inside each bucket (a name from [`crate::query::AGGREGATORS`], never `none`).
    pub function: String,
    /// What empty buckets get.
    pub fill: FillPolicy,
    /// The query's `timezone`, used for calendar buckets; None means UTC.
    pub timezone: Option<String>,
}

impl DownsampleSpec {
    /// Parses `<interval>[c]-<function>[-<fill>]` with OpenTSDB's rules and error texts (spec: query §3.1, §1.4).
    pub fn parse(spec: &str) -> Result<DownsampleSpec, RequestError> {
        Self::parse_msg(spec).map_err(RequestError::bad_request)
    }

    pub(crate) fn parse_msg(spec: &str) -> Result<DownsampleSpec, String> {
        let parts = java_split(spec, '-');
        if parts.len() < 2 {
            return Err(format!(
                "Invalid downsampling specifier '{spec}': must provide at least interval and function"
            ));
        }
        if parts.len() > 3 {
            return Err(format!(
                "Invalid downsampling specifier '{spec}': must consist of interval, function, and optional fill \
                 policy"
            ));
        }
        let p0 = parts[0];
        let (interval_ms, string_interval, calendar, run_all) = if p0.contains("all") {
            (0, p0.to_string(), false, true)
        } else if let Some(duration) = p0.strip_suffix('c') {
            (duration_msg(duration)?, duration.to_string(), true, false)
        } else if p0.is_empty() {
            // OpenTSDB looks at the last character of the empty interval.
            return Err("String index out of range: -1".into());
        } else {
            (duration_msg(p0)?, p0.to_string(), false, false)
        };
        let function = parts[1];
        if !super::is_aggregator(function) {
            return Err(format!("No such downsampling function: {function}"));
        }
        if function == "none" {
            return Err("cannot use the NONE aggregator for downsampling".into());
        }
        let fill = match parts.get(2) {
            Some(p) => FillPolicy::parse(p)?,
            None => FillPolicy::None,
        };
        Ok(DownsampleSpec {
            spec: spec.to_string(),
            interval_ms,
            string_interval,
            calendar,
            run_all,
            function: function.to_string(),
            fill,
            timezone: None,
        })
    }

    /// The calendar step OpenTSDB's `Downsampler` derives from the interval text when calendar mode is on:
    /// `ms` if the text contains `ms` (any case), else its last character is the unit; the rest must be an
    /// `int`. Errors carry Java's texts (`For input string: "5mi"`, `Unrecognized unit type: x`).
    ///
    /// Meaningless for "all" specs. rtsd checks this while validating a query instead of failing at run time.
    pub fn calendar_interval(&self) -> Result<CalendarInterval, RequestError> {
        self.calendar_interval_msg().map_err(RequestError::bad_request)
    }

    pub(crate) fn calendar_interval_msg(&self) -> Result<CalendarInterval, String> {
        let s = self.string_interval.as_str();
        let chars: Vec<char> = s.chars().collect();
        let unit_len = if s.to_lowercase().contains("ms") { 2 } else { 1 };
        if chars.len() < unit_len {
            return Err(format!("String index out of range: {}", chars.len() as i64 - unit_len as i64));
        }
        let count_text: String = chars[..chars.len() - unit_len].iter().collect();
        let unit_text: String = chars[chars.len() - unit_len..].iter().collect();
        let count = java_parse_int(&count_text).ok_or_else(|| format!("For input string: \"{count_text}\""))?;
        let unit =
            CalendarUnit::from_suffix(&unit_text).ok_or_else(|| format!("Unrecognized unit type: {unit_text}"))?;
        if count < 1 {
            return Err("Interval must be greater than zero".into());
        }
        Ok(CalendarInterval { count, unit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(s: &str) -> DownsampleSpec {
        DownsampleSpec::parse_msg(s).unwrap()
    }
    fn err(s: &str) -> String {
        DownsampleSpec::parse_msg(s).unwrap_err()
    }

    // spec: query §3.1
    #[test]
    fn fixed_intervals() {
        let d = ds("1m-avg");
        assert_eq!((d.interval_ms, d.calendar, d.run_all, d.function.as_str()), (60_000, false, false, "avg"));
        assert_eq!(d.fill, FillPolicy::None);
        assert_eq!(d.string_interval, "1m");
        assert_eq!(ds("1h-sum-zero").fill, FillPolicy::Zero);
        assert_eq!(ds("30m-avg-nan").fill, FillPolicy::NaN);
        assert_eq!(ds("15s-max-null").fill, FillPolicy::Null);
        assert_eq!(ds("15s-max-NULL").fill, FillPolicy::Null);
        assert_eq!(ds("1m-avg-scalar").fill, FillPolicy::Scalar);
        assert_eq!(ds("500ms-sum").interval_ms, 500);
        assert_eq!(ds("1w-sum").interval_ms, 7 * 86_400_000);
        assert_eq!(ds("1n-sum").interval_ms, 30 * 86_400_000);
        assert_eq!(ds("1y-sum").interval_ms, 365 * 86_400_000);
        assert_eq!(ds("1000s-avg").interval_ms, 1_000_000);
        assert_eq!(ds("1m-p99").function, "p99");
        assert_eq!(ds("1m-squareSum").function, "squareSum");
        // Java's split drops trailing empty parts.
        assert_eq!(ds("1m-avg-").fill, FillPolicy::None);
    }

    // spec: query §3.1 ("all" and calendar)
    #[test]
    fn all_and_calendar() {
        for s in ["0all-sum", "all-sum", "1all-count"] {
            let d = ds(s);
            assert!(d.run_all && !d.calendar && d.interval_ms == 0, "{s}");
        }
        let d = ds("1dc-sum");
        assert!(d.calendar && !d.run_all);
        assert_eq!((d.interval_ms, d.string_interval.as_str()), (86_400_000, "1d"));
        assert_eq!(d.calendar_interval_msg(), Ok(CalendarInterval { count: 1, unit: CalendarUnit::Day }));
        assert_eq!(ds("1nc-max").calendar_interval_msg(), Ok(CalendarInterval { count: 1, unit: CalendarUnit::Month }));
        assert_eq!(ds("2wc-max").calendar_interval_msg(), Ok(CalendarInterval { count: 2, unit: CalendarUnit::Week }));
        assert_eq!(ds("1yc-max").calendar_interval_msg(), Ok(CalendarInterval { count: 1, unit: CalendarUnit::Year }));
        assert_eq!(
            ds("30mc-avg").calendar_interval_msg(),
            Ok(CalendarInterval { count: 30, unit: CalendarUnit::Minute })
        );
        assert_eq!(
            ds("250msc-avg").calendar_interval_msg(),
            Ok(CalendarInterval { count: 250, unit: CalendarUnit::Millisecond })
        );
        assert_eq!(ds("1hc-avg").calendar_interval_msg(), Ok(CalendarInterval { count: 1, unit: CalendarUnit::Hour }));
        // Durations OpenTSDB accepts but its calendar code cannot step by.
        assert_eq!(ds("5minc-avg").calendar_interval_msg(), Err("For input string: \"5mi\"".into()));
        assert_eq!(ds("1.5hc-avg").calendar_interval_msg(), Err("For input string: \"1.5\"".into()));
    }

    // spec: query §1.4 (downsample errors)
    #[test]
    fn errors() {
        assert_eq!(err("1m"), "Invalid downsampling specifier '1m': must provide at least interval and function");
        assert_eq!(err(""), "Invalid downsampling specifier '': must provide at least interval and function");
        assert_eq!(
            err("1m-avg-nan-x"),
            "Invalid downsampling specifier '1m-avg-nan-x': must consist of interval, function, and optional fill \
             policy"
        );
        assert_eq!(err("1m-foo"), "No such downsampling function: foo");
        assert_eq!(err("1m-Sum"), "No such downsampling function: Sum");
        assert_eq!(err("1m-none"), "cannot use the NONE aggregator for downsampling");
        assert_eq!(err("10m-avg-badbadbad"), "Unrecognized fill policy: badbadbad");
        assert_eq!(err("1x-avg"), "Invalid duration (suffix): 1x");
        assert_eq!(err("0m-avg"), "Zero or negative duration: 0m");
        assert_eq!(err("m-avg"), "Invalid duration (number): m");
        assert_eq!(err("1c-avg"), "Invalid duration, must have an integer and unit: 1");
        assert_eq!(err("c-avg"), "Cannot parse null or empty duration");
        assert_eq!(err("-avg"), "String index out of range: -1");
        // The interval is checked before the function, the function before the fill.
        assert_eq!(err("1x-foo-bar"), "Invalid duration (suffix): 1x");
        assert_eq!(err("1m-foo-bar"), "No such downsampling function: foo");
    }
}
