//! User rules for log data types (spec: chukwa §5.1 `TsProcessor`, §8.5 "user rules of dataType -> line regex +
//! timestamp format"), from the configuration:
//!
//! ```text
//! rtsd.chukwa.rule.AppLog.regex = ^(?P<time>\S+ \S+) \w+ .* latency=(?P<latency>[0-9.]+) status=(?P<tag_status>\d+)
//! rtsd.chukwa.rule.AppLog.time_format = yyyy-MM-dd HH:mm:ss,SSS
//! rtsd.chukwa.rule.AppLog.timezone = UTC
//! ```
//!
//! Each line of a chunk of that dataType is matched against the regex. The `time` group is parsed with the
//! `SimpleDateFormat`-style format (default TsProcessor's `yyyy-MM-dd HH:mm:ss,SSS`) in the given zone (default
//! the system's, as Chukwa used the demux JVM's default zone). Every other named group that captured text becomes
//! the metric `<dataType>.<group>`, except groups named `tag_<k>`, which become the tag `<k>` of those points.
//! Lines that don't match, or whose time doesn't parse, are skipped.
use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use regex::Regex;

use super::mapping::{ChunkInfo, Extracted, Sample};

/// TsProcessor's default time format.
pub const DEFAULT_TIME_FORMAT: &str = "yyyy-MM-dd HH:mm:ss,SSS";

/// A compiled user rule.
#[derive(Debug, Clone)]
pub struct Rule {
    regex: Regex,
    format: TimeFormat,
    tz: TimeZone,
    /// (group name, metric suffix) for value groups; (group name, tag key) for `tag_*` groups.
    metrics: Vec<String>,
    tags: Vec<(String, String)>,
}

impl Rule {
    /// Compiles a rule; the error says what is wrong, for the configuration error.
    pub fn new(regex: &str, time_format: &str, timezone: &str) -> Result<Rule, String> {
        let regex = Regex::new(regex).map_err(|e| e.to_string())?;
        if !regex.capture_names().flatten().any(|n| n == "time") {
            return Err("the regex needs a named group `time` (?P<time>...)".into());
        }
        let format = TimeFormat::parse(time_format)?;
        let tz = match timezone.trim() {
            "" => TimeZone::system(),
            name => TimeZone::get(name).map_err(|e| format!("unknown time zone {name:?}: {e}"))?,
        };
        let mut metrics = Vec::new();
        let mut tags = Vec::new();
        for name in regex.capture_names().flatten() {
            match name.strip_prefix("tag_") {
                _ if name == "time" => {}
                Some(key) if !key.is_empty() => tags.push((name.to_string(), key.to_string())),
                _ => metrics.push(name.to_string()),
            }
        }
        if metrics.is_empty() {
            return Err("the regex names no value group besides `time` and `tag_*`".into());
        }
        Ok(Rule { regex, format, tz, metrics, tags })
    }

    /// The samples of every matching line of `data`. Records written by `CharFileTailingAdaptorUTF8NewLineEscaped`
    /// end only at newlines not escaped by `0x04`; those escapes are undone and the record matched whole.
    pub fn extract(&self, info: &ChunkInfo<'_>, data: &[u8]) -> Extracted {
        let mut out = Extracted::default();
        for line in split_lines(data) {
            let line = rtsd_protocol::chukwa::unescape_newlines(line);
            let text = String::from_utf8_lossy(&line);
            let text = text.strip_suffix('\r').unwrap_or(&text);
            let Some(caps) = self.regex.captures(text) else { continue };
            let Some(time) = caps.name("time").and_then(|t| self.format.parse_ms(t.as_str(), &self.tz)) else {
                continue;
            };
            out.time = Some(time);
            let extra_tags: Vec<(String, String)> = self
                .tags
                .iter()
                .filter_map(|(group, key)| Some((key.clone(), caps.name(group)?.as_str().to_string())))
                .filter(|(_, v)| !v.is_empty())
                .collect();
            for group in &self.metrics {
                let Some(value) = caps.name(group) else { continue };
                out.samples.push(Sample {
                    name: format!("{}.{group}", info.data_type),
                    source: info.source.to_string(),
                    time,
                    value: value.as_str().trim().to_string(),
                    host: info.source.to_string(),
                    process: None,
                    extra_tags: extra_tags.clone(),
                });
            }
        }
        out
    }
}

/// Lines ending at `\n` not preceded by `0x04` (the escape), each without its `\n`; a last line without one too.
fn split_lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut i = 0;
        while i < rest.len() {
            if rest[i] == b'\n' && (i == 0 || rest[i - 1] != 0x04) {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                return Some(line);
            }
            i += 1;
        }
        let line = rest;
        rest = &[];
        Some(line)
    })
}

/// A `SimpleDateFormat` pattern, for parsing: `yyyy yy MM MMM M dd d HH H hh h mm m ss s SSS a`, quoted
/// literals (`'T'`), and any other character matching itself.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeFormat {
    items: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Literal(String),
    /// A numeric field: its letter and the pattern's width.
    Number(char, usize),
    MonthName,
    AmPm,
}

impl TimeFormat {
    pub fn parse(pattern: &str) -> Result<TimeFormat, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut items = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                let close = chars[i + 1..].iter().position(|&q| q == '\'').map(|p| i + 1 + p);
                let Some(close) = close else { return Err(format!("unterminated quote in {pattern:?}")) };
                let text: String = if close == i + 1 { "'".into() } else { chars[i + 1..close].iter().collect() };
                items.push(Item::Literal(text));
                i = close + 1;
            } else if c.is_ascii_alphabetic() {
                let n = chars[i..].iter().take_while(|&&d| d == c).count();
                items.push(match c {
                    'M' if n >= 3 => Item::MonthName,
                    'y' | 'M' | 'd' | 'H' | 'h' | 'k' | 'K' | 'm' | 's' | 'S' => Item::Number(c, n),
                    'a' => Item::AmPm,
                    _ => return Err(format!("unsupported pattern letter {c:?} in {pattern:?}")),
                });
                i += n;
            } else {
                items.push(Item::Literal(c.to_string()));
                i += 1;
            }
        }
        Ok(TimeFormat { items })
    }

    /// Milliseconds since the epoch of `text` read as this format in `tz`; `None` when it doesn't fit. Trailing
    /// text is ignored, as `SimpleDateFormat.parse` does.
    pub fn parse_ms(&self, text: &str, tz: &TimeZone) -> Option<i64> {
        let (mut year, mut month, mut day, mut hour, mut minute, mut second, mut milli) =
            (1970i64, 1i64, 1i64, 0i64, 0i64, 0i64, 0i64);
        let mut pm: Option<bool> = None;
        let mut hour12 = false;
        let mut rest = text;
        for (n, item) in self.items.iter().enumerate() {
            match item {
                Item::Literal(l) => rest = rest.strip_prefix(l.as_str())?,
                Item::MonthName => {
                    const MONTHS: [&str; 12] =
                        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
                    let head: String = rest.chars().take(3).collect::<String>().to_ascii_lowercase();
                    month = MONTHS.iter().position(|m| *m == head)? as i64 + 1;
                    rest = &rest[head.len()..];
                    // A full month name: skip its remaining letters.
                    rest = rest.trim_start_matches(|c: char| c.is_ascii_alphabetic());
                }
                Item::AmPm => {
                    let head = rest.get(..2)?.to_ascii_lowercase();
                    pm = Some(match head.as_str() {
                        "am" => false,
                        "pm" => true,
                        _ => return None,
                    });
                    rest = &rest[2..];
                }
                Item::Number(c, width) => {
                    // Abutting a following numeric field, a field takes exactly its width; otherwise all digits.
                    let abutting = matches!(self.items.get(n + 1), Some(Item::Number(..)));
                    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                    let take = if abutting { *width } else { digits.min(18) };
                    if take == 0 || digits < take {
                        return None;
                    }
                    let v: i64 = rest[..take].parse().ok()?;
                    rest = &rest[take..];
                    match c {
                        'y' if *width == 2 && take == 2 => year = 2000 + v,
                        'y' => year = v,
                        'M' => month = v,
                        'd' => day = v,
                        'H' | 'k' => hour = v % 24,
                        'h' | 'K' => {
                            hour = v % 12;
                            hour12 = true;
                        }
                        'm' => minute = v,
                        's' => second = v,
                        // `S` is a count of milliseconds, whatever its width.
                        _ => milli = v,
                    }
                }
            }
        }
        if hour12 && pm == Some(true) {
            hour += 12;
        }
        lenient_ms(year, month, day, hour, minute, second, milli, tz)
    }
}

/// A date and time from fields that may overflow (month 13, second 61), rolled over as `SimpleDateFormat` does
/// by default (lenient), in `tz`; milliseconds since the epoch.
#[allow(clippy::too_many_arguments)]
pub fn lenient_ms(
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    milli: i64,
    tz: &TimeZone,
) -> Option<i64> {
    use jiff::ToSpan;
    let year = i16::try_from(year).ok()?;
    let start = DateTime::new(year, 1, 1, 0, 0, 0, 0).ok()?;
    let dt = start
        .checked_add((month - 1).months())
        .ok()?
        .checked_add((day - 1).days().hours(hour).minutes(minute).seconds(second).milliseconds(milli))
        .ok()?;
    Some(dt.to_zoned(tz.clone()).ok()?.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(pattern: &str, text: &str) -> Option<i64> {
        TimeFormat::parse(pattern).unwrap().parse_ms(text, &TimeZone::UTC)
    }

    #[test]
    fn time_formats() {
        assert_eq!(utc(DEFAULT_TIME_FORMAT, "2016-06-20 00:00:00,123"), Some(1_466_380_800_123));
        assert_eq!(utc(DEFAULT_TIME_FORMAT, "2016-06-20 00:00:01,000 INFO x"), Some(1_466_380_801_000));
        assert_eq!(utc("yyyyMMddHHmmss", "20160620000000"), Some(1_466_380_800_000));
        assert_eq!(utc("yyyy-MM-dd'T'HH:mm:ss", "2016-06-20T01:02:03"), Some(1_466_384_523_000));
        assert_eq!(utc("MMM d HH:mm:ss yyyy", "Jun 20 00:00:00 2016"), Some(1_466_380_800_000));
        assert_eq!(utc("dd/MMM/yyyy:hh:mm:ss a", "20/June/2016:01:00:00 pm"), Some(1_466_427_600_000));
        // Lenient: month 13 is January of the next year.
        assert_eq!(utc("yyyyMMdd", "20151301"), utc("yyyyMMdd", "20160101"));
        assert_eq!(utc(DEFAULT_TIME_FORMAT, "2016-06-20"), None);
        assert_eq!(utc(DEFAULT_TIME_FORMAT, "garbage"), None);
        assert!(TimeFormat::parse("yyyy-MM-dd Q").is_err());
        assert!(TimeFormat::parse("'unterminated").is_err());
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let f = TimeFormat::parse(DEFAULT_TIME_FORMAT).unwrap();
        assert_eq!(f.parse_ms("2016-06-20 02:00:00,000", &paris), Some(1_466_380_800_000));
    }

    #[test]
    fn rules_turn_lines_into_samples() {
        let rule = Rule::new(
            r"^(?P<time>\S+ \S+) \w+ .*latency=(?P<latency>[0-9.]+)(?: status=(?P<tag_status>\d+))?",
            DEFAULT_TIME_FORMAT,
            "UTC",
        )
        .unwrap();
        let info = ChunkInfo { data_type: "AppLog", source: "host1", tags: "" };
        let data = b"2016-06-20 00:00:00,000 INFO a latency=12 status=200\nnot a match\n\
                     2016-06-20 00:00:01,500 WARN b latency=3.5\r\nmulti\x04\nline 2016 latency=1\n";
        let x = rule.extract(&info, data);
        let got: Vec<_> =
            x.samples.iter().map(|s| (s.name.as_str(), s.time, s.value.as_str(), s.extra_tags.clone())).collect();
        assert_eq!(
            got,
            [
                ("AppLog.latency", 1_466_380_800_000, "12", vec![("status".to_string(), "200".to_string())]),
                ("AppLog.latency", 1_466_380_801_500, "3.5", vec![]),
            ]
        );
        assert_eq!(x.time, Some(1_466_380_801_500));
        assert!(Rule::new("(?P<x>1)", DEFAULT_TIME_FORMAT, "UTC").is_err(), "no time group");
        assert!(Rule::new("(?P<time>1)", DEFAULT_TIME_FORMAT, "UTC").is_err(), "no value group");
        assert!(Rule::new("(?P<time>1)(?P<v>2)", DEFAULT_TIME_FORMAT, "Nowhere/City").is_err());
        assert!(Rule::new("(", DEFAULT_TIME_FORMAT, "UTC").is_err());
    }

    #[test]
    fn escaped_newlines_stay_in_their_record() {
        let lines: Vec<&[u8]> = split_lines(b"a\x04\nb\nc\n\nd").collect();
        assert_eq!(lines, [&b"a\x04\nb"[..], b"c", b"", b"d"]);
    }
}
