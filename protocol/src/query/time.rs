//! OpenTSDB's time language: relative (`1h-ago`), absolute (`2013/01/01-12:00`), `now`, seconds, milliseconds
//! (spec: query §1.3), and durations (`5m`, `1d`, `500ms`).

use jiff::civil;
use jiff::tz::TimeZone;

use super::javautil::{java_len, java_parse_long};
use super::RequestError;

/// Parses a query time into epoch milliseconds, with OpenTSDB's rules and error texts (spec: query §1.3).
///
/// In order: `<digits>ms` is milliseconds; `now` (any case) is `now_ms`; `<duration>-ago` (any case) is `now_ms`
/// minus [`parse_duration`] of the prefix; a string containing `/` or `:` is an absolute date
/// (`yyyy/MM/dd`, `yyyy/MM/dd[-| ]HH:mm`, `yyyy/MM/dd[-| ]HH:mm:ss`, told apart by length alone, parsed leniently
/// like Java's `SimpleDateFormat`) in time zone `tz` (an IANA/Java zone id; `None` or empty means UTC, the JVM
/// default a TSD usually runs with); anything else is a number: at most 10 characters means seconds, more means
/// milliseconds, and `<10 digits>.<1-3 digits>` is seconds with a millisecond fraction.
///
/// An empty string gives -1, as OpenTSDB's parser does; callers treat empty as "not given" before calling.
pub fn parse_time(s: &str, now_ms: i64, tz: Option<&str>) -> Result<i64, RequestError> {
    parse_time_msg(s, now_ms, tz).map_err(RequestError::bad_request)
}

/// [`parse_time`] with the bare message, for callers that add their own details.
pub(crate) fn parse_time_msg(s: &str, now_ms: i64, tz: Option<&str>) -> Result<i64, String> {
    if s.is_empty() {
        return Ok(-1);
    }
    let b = s.as_bytes();
    if b.len() > 2 && b.ends_with(b"ms") && b[..b.len() - 2].iter().all(u8::is_ascii_digit) {
        return crate::number::parse_long(&s[..s.len() - 2]).map_err(|e| e.to_string());
    }
    if s.eq_ignore_ascii_case("now") {
        return Ok(now_ms);
    }
    if b.len() >= 4 && b[b.len() - 4..].eq_ignore_ascii_case(b"-ago") {
        // The last four bytes are ASCII, so this is a character boundary.
        let interval = duration_msg(&s[..s.len() - 4])?;
        return Ok(now_ms.wrapping_sub(interval));
    }
    if s.contains('/') || s.contains(':') {
        return parse_absolute(s, tz);
    }
    let contains_dot = s.contains('.');
    if contains_dot && !is_dotted_ms(b) {
        return Err(format!(
            "Invalid time: {s}. Millisecond timestamps must be in the format <seconds>.<ms> where the \
             milliseconds are limited to 3 digits"
        ));
    }
    let digits = if contains_dot { s.replace('.', "") } else { s.to_string() };
    let time = crate::number::parse_long(&digits).map_err(|e| format!("Invalid time: {s}. {e}"))?;
    if time < 0 {
        return Err(format!("Invalid time: {s}. Negative timestamps are not supported."));
    }
    // OpenTSDB's seconds-or-milliseconds rule: ten characters or fewer are seconds.
    if java_len(s) <= 10 {
        Ok(time.wrapping_mul(1000))
    } else {
        Ok(time)
    }
}

/// `^[0-9]{10}\.[0-9]{1,3}$`
fn is_dotted_ms(b: &[u8]) -> bool {
    (12..=14).contains(&b.len())
        && b[10] == b'.'
        && b[..10].iter().all(u8::is_ascii_digit)
        && b[11..].iter().all(u8::is_ascii_digit)
}

/// Parses a duration such as `5m`, `1h`, `500ms` into milliseconds, with OpenTSDB's rules (spec: query §1.3).
///
/// The leading digits are the amount; the unit is the **last character** (`s m h d w n y`, any case; `n` = 30
/// days, `y` = 365 days), or milliseconds when the last two characters are `ms` (the `m` lower case). Anything
/// between the digits and the unit is ignored, so `1.5h` is one hour and `5min` is five *months*.
pub fn parse_duration(s: &str) -> Result<i64, RequestError> {
    duration_msg(s).map_err(RequestError::bad_request)
}

/// [`parse_duration`] with the bare message.
pub(crate) fn duration_msg(s: &str) -> Result<i64, String> {
    if s.is_empty() {
        return Err("Cannot parse null or empty duration".into());
    }
    let chars: Vec<char> = s.chars().collect();
    let mut unit = 0;
    while chars[unit].is_ascii_digit() {
        unit += 1;
        if unit >= chars.len() {
            return Err(format!("Invalid duration, must have an integer and unit: {s}"));
        }
    }
    // The digits are ASCII, so `unit` is also a byte offset.
    let interval = java_parse_long(&s[..unit]).ok_or_else(|| format!("Invalid duration (number): {s}"))?;
    if interval <= 0 {
        return Err(format!("Zero or negative duration: {s}"));
    }
    let last = chars[chars.len() - 1].to_lowercase().next().unwrap_or(' ');
    let multiplier: i64 = match last {
        's' => {
            if chars[chars.len() - 2] == 'm' {
                return Ok(interval);
            }
            1
        }
        'm' => 60,
        'h' => 3600,
        'd' => 3600 * 24,
        'w' => 3600 * 24 * 7,
        'n' => 3600 * 24 * 30,
        'y' => 3600 * 24 * 365,
        _ => return Err(format!("Invalid duration (suffix): {s}")),
    } * 1000;
    if interval as f64 * multiplier as f64 > i64::MAX as f64 {
        return Err(format!("Duration must be < Long.MAX_VALUE ms: {s}"));
    }
    Ok(interval.wrapping_mul(multiplier))
}

/// Java's three-letter time zone ids that are not IANA names, with the zone Java maps each to
/// (`java.time.ZoneId.SHORT_IDS`; `EST`, `MST`, `HST` are IANA names too and need no mapping).
const JAVA_SHORT_IDS: &[(&str, &str)] = &[
    ("ACT", "Australia/Darwin"),
    ("AET", "Australia/Sydney"),
    ("AGT", "America/Argentina/Buenos_Aires"),
    ("ART", "Africa/Cairo"),
    ("AST", "America/Anchorage"),
    ("BET", "America/Sao_Paulo"),
    ("BST", "Asia/Dhaka"),
    ("CAT", "Africa/Harare"),
    ("CNT", "America/St_Johns"),
    ("CST", "America/Chicago"),
    ("CTT", "Asia/Shanghai"),
    ("EAT", "Africa/Addis_Ababa"),
    ("ECT", "Europe/Paris"),
    ("IET", "America/Indiana/Indianapolis"),
    ("IST", "Asia/Kolkata"),
    ("JST", "Asia/Tokyo"),
    ("MIT", "Pacific/Apia"),
    ("NET", "Asia/Yerevan"),
    ("NST", "Pacific/Auckland"),
    ("PLT", "Asia/Karachi"),
    ("PNT", "America/Phoenix"),
    ("PRT", "America/Puerto_Rico"),
    ("PST", "America/Los_Angeles"),
    ("SST", "Pacific/Guadalcanal"),
    ("VST", "Asia/Ho_Chi_Minh"),
];

/// Looks up a time zone by its Java id, case-sensitively as OpenTSDB does (`America/Denver`, `UTC`, `PST`).
///
/// Zone data comes from the system's `/usr/share/zoneinfo`, or the copy bundled into the binary when the system
/// has none. The error is the bare zone name; callers wrap it in the message their context uses
/// (`Invalid timezone name: <x>` for dates, `The timezone specification could not be found` for downsampling).
pub fn resolve_timezone(name: &str) -> Result<TimeZone, String> {
    let lookup = JAVA_SHORT_IDS.iter().find(|(id, _)| *id == name).map_or(name, |(_, iana)| *iana);
    match jiff::tz::db().get(lookup) {
        // jiff matches names case-insensitively; Java does not.
        Ok(tz) if tz.iana_name() == Some(lookup) => Ok(tz),
        _ => Err(name.to_string()),
    }
}

/// A field of the absolute date patterns.
#[derive(Clone, Copy)]
enum Field {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

#[derive(Clone, Copy)]
enum Tok {
    Num(Field),
    Lit(char),
}

/// Absolute dates: the pattern is chosen by the string's length alone, then parsed like a lenient
/// `SimpleDateFormat` (fields may overflow into the next unit, `2013/13/01` is 2014/01/01; spaces and tabs
/// before a number are skipped; a leading `-` makes a field negative; text after the pattern is ignored).
fn parse_absolute(s: &str, tz: Option<&str>) -> Result<i64, String> {
    use Field::*;
    use Tok::*;
    let sep = if s.contains('-') { '-' } else { ' ' };
    let date = [Num(Year), Lit('/'), Num(Month), Lit('/'), Num(Day)];
    let pattern: Vec<Tok> = match java_len(s) {
        10 => date.to_vec(),
        16 => [&date[..], &[Lit(sep), Num(Hour), Lit(':'), Num(Minute)]].concat(),
        19 => [&date[..], &[Lit(sep), Num(Hour), Lit(':'), Num(Minute), Lit(':'), Num(Second)]].concat(),
        _ => return Err(format!("Invalid absolute date: {s}")),
    };
    let zone = match tz {
        Some(name) if !name.is_empty() => {
            Some(resolve_timezone(name).map_err(|n| format!("Invalid timezone name: {n}"))?)
        }
        _ => None,
    };
    let unparseable = || format!("Invalid date: {s}. Unparseable date: \"{s}\"");
    let chars: Vec<char> = s.chars().collect();
    let mut pos = 0;
    let mut fields = [1970i64, 1, 1, 0, 0, 0];
    for tok in pattern {
        match tok {
            Lit(c) => {
                if chars.get(pos) != Some(&c) {
                    return Err(unparseable());
                }
                pos += 1;
            }
            Num(f) => {
                while matches!(chars.get(pos), Some(' ' | '\t')) {
                    pos += 1;
                }
                let neg = chars.get(pos) == Some(&'-');
                if neg {
                    pos += 1;
                }
                let start = pos;
                let mut v: i64 = 0;
                while let Some(d) = chars.get(pos).and_then(|c| c.to_digit(10)) {
                    v = v.saturating_mul(10).saturating_add(i64::from(d));
                    pos += 1;
                }
                if pos == start {
                    return Err(unparseable());
                }
                // Java keeps the field as an int.
                let v = i64::from(if neg { -v } else { v }.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32);
                fields[f as usize] = v;
            }
        }
    }
    let [year, month, day, hour, minute, second] = fields;
    // Lenient calendar arithmetic: months roll into years, days and times are offsets from the 1st at 00:00.
    let month0 = month - 1;
    let y = year + month0.div_euclid(12);
    let m = month0.rem_euclid(12) + 1;
    let days = days_from_civil(y, m, 1) + (day - 1);
    let local_ms = days
        .checked_mul(86_400_000)
        .and_then(|d| d.checked_add(((hour * 60 + minute) * 60 + second) * 1000))
        .ok_or_else(unparseable)?;
    match zone {
        None => Ok(local_ms),
        Some(zone) => {
            let wall = jiff::Timestamp::from_millisecond(local_ms)
                .map_err(|_| unparseable())?
                .to_zoned(TimeZone::UTC)
                .datetime();
            local_to_instant(&zone, wall).ok_or_else(unparseable)
        }
    }
}

/// A wall-clock time in `zone` to epoch ms the way Java's `GregorianCalendar` resolves it: a time in a DST gap
/// or overlap takes the offset in force before the transition's local time, i.e. the later instant.
fn local_to_instant(zone: &TimeZone, wall: civil::DateTime) -> Option<i64> {
    zone.to_ambiguous_timestamp(wall).later().ok().map(|t| t.as_millisecond())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (any year).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_357_000_000_123;

    fn t(s: &str) -> Result<i64, String> {
        parse_time_msg(s, NOW, None)
    }

    // spec: query §1.3 step 1
    #[test]
    fn explicit_ms_suffix() {
        assert_eq!(t("1356998400000ms"), Ok(1_356_998_400_000));
        assert_eq!(t("5ms"), Ok(5));
        assert_eq!(t("99999999999999999999ms"), Err("Value too long: 99999999999999999999".into()));
    }

    // spec: query §1.3 step 2
    #[test]
    fn now_any_case() {
        assert_eq!(t("now"), Ok(NOW));
        assert_eq!(t("NoW"), Ok(NOW));
    }

    // spec: query §1.3 step 3
    #[test]
    fn relative_times() {
        assert_eq!(t("1h-ago"), Ok(NOW - 3_600_000));
        assert_eq!(t("1H-AGO"), Ok(NOW - 3_600_000));
        assert_eq!(t("30s-ago"), Ok(NOW - 30_000));
        assert_eq!(t("500ms-ago"), Ok(NOW - 500));
        assert_eq!(t("2d-ago"), Ok(NOW - 2 * 86_400_000));
        assert_eq!(t("1w-ago"), Ok(NOW - 7 * 86_400_000));
        assert_eq!(t("1n-ago"), Ok(NOW - 30 * 86_400_000));
        assert_eq!(t("1y-ago"), Ok(NOW - 365 * 86_400_000));
        assert_eq!(t("5m-ago"), Ok(NOW - 300_000));
        // Quirks: the unit is the last character, anything between is ignored.
        assert_eq!(t("1.5h-ago"), Ok(NOW - 3_600_000));
        assert_eq!(t("5min-ago"), Ok(NOW - 5 * 30 * 86_400_000));
        // `ms` needs a lower-case m; `5MS` is five seconds.
        assert_eq!(t("5MS-ago"), Ok(NOW - 5_000));
        assert_eq!(t("5mS-ago"), Ok(NOW - 5));
    }

    // spec: query §1.3 step 3 errors
    #[test]
    fn duration_errors() {
        assert_eq!(t("0h-ago"), Err("Zero or negative duration: 0h".into()));
        assert_eq!(t("5-ago"), Err("Invalid duration, must have an integer and unit: 5".into()));
        assert_eq!(t("5x-ago"), Err("Invalid duration (suffix): 5x".into()));
        assert_eq!(t("h-ago"), Err("Invalid duration (number): h".into()));
        assert_eq!(t("-ago"), Err("Cannot parse null or empty duration".into()));
        assert_eq!(t("99999999999999999999h-ago"), Err("Invalid duration (number): 99999999999999999999h".into()));
        assert_eq!(t("9999999999999999y-ago"), Err("Duration must be < Long.MAX_VALUE ms: 9999999999999999y".into()));
        assert_eq!(duration_msg("1m"), Ok(60_000));
        assert_eq!(duration_msg("1s"), Ok(1000));
        assert_eq!(duration_msg("1D"), Ok(86_400_000));
    }

    // spec: query §1.3 step 4
    #[test]
    fn absolute_dates_utc() {
        assert_eq!(t("2013/01/01"), Ok(1_356_998_400_000));
        assert_eq!(t("2013/01/01-00:01"), Ok(1_356_998_460_000));
        assert_eq!(t("2013/01/01 00:01"), Ok(1_356_998_460_000));
        assert_eq!(t("2013/01/01-00:01:05"), Ok(1_356_998_465_000));
        assert_eq!(t("2013/01/01 00:01:05"), Ok(1_356_998_465_000));
        // Lenient: month 13 is January of the next year, hour 24 the next day.
        assert_eq!(t("2012/13/01"), Ok(1_356_998_400_000));
        assert_eq!(t("2012/12/31-24:00"), Ok(1_356_998_400_000));
        assert_eq!(t("2013/01/00"), Ok(1_356_998_400_000 - 86_400_000));
        // Any length other than 10, 16, 19.
        assert_eq!(t("2013/1/1"), Err("Invalid absolute date: 2013/1/1".into()));
        assert_eq!(t("12:00"), Err("Invalid absolute date: 12:00".into()));
        assert_eq!(t("2013/0a/01"), Err("Invalid date: 2013/0a/01. Unparseable date: \"2013/0a/01\"".into()));
    }

    // spec: query §1.3 step 4 (time zones)
    #[test]
    fn absolute_dates_in_a_zone() {
        let denver = |s: &str| parse_time_msg(s, NOW, Some("America/Denver"));
        assert_eq!(denver("2012/12/31"), Ok(1_356_937_200_000));
        assert_eq!(denver("2013/01/01-00:00:00"), Ok(1_356_998_400_000 + 7 * 3_600_000));
        assert_eq!(
            parse_time_msg("2013/01/01", NOW, Some("Nowhere/Land")),
            Err("Invalid timezone name: Nowhere/Land".into())
        );
        // Case-sensitive, as Java's map of zone ids.
        assert_eq!(
            parse_time_msg("2013/01/01", NOW, Some("america/denver")),
            Err("Invalid timezone name: america/denver".into())
        );
        assert_eq!(parse_time_msg("2013/01/01", NOW, Some("UTC")), Ok(1_356_998_400_000));
        assert_eq!(parse_time_msg("2013/01/01", NOW, Some("")), Ok(1_356_998_400_000));
        // Java's short ids.
        assert_eq!(parse_time_msg("2013/01/01", NOW, Some("PST")), Ok(1_356_998_400_000 + 8 * 3_600_000));
        // The zone only matters for absolute dates.
        assert_eq!(parse_time_msg("1356998400", NOW, Some("Nowhere/Land")), Ok(1_356_998_400_000));
        // DST gap (2013-03-10 02:30 does not exist in Denver): Java takes the later instant, 03:30 MDT.
        assert_eq!(denver("2013/03/10-02:30"), Ok(1_362_907_800_000));
        // DST overlap (2013-11-03 01:30 happens twice): the later, MST one.
        assert_eq!(denver("2013/11/03-01:30"), Ok(1_383_467_400_000));
    }

    // spec: query §1.3 step 5
    #[test]
    fn numeric_times() {
        assert_eq!(t("1356998400"), Ok(1_356_998_400_000));
        assert_eq!(t("1356998400000"), Ok(1_356_998_400_000));
        assert_eq!(t("1356998400.123"), Ok(1_356_998_400_123));
        assert_eq!(t("0"), Ok(0));
        assert_eq!(t("60"), Ok(60_000));
        // Quirk: fewer than 3 ms digits are not scaled.
        assert_eq!(t("1356998400.5"), Ok(13_569_984_005));
        assert_eq!(
            t("1356998400.1234"),
            Err("Invalid time: 1356998400.1234. Millisecond timestamps must be in the format <seconds>.<ms> \
                 where the milliseconds are limited to 3 digits"
                .into())
        );
        assert_eq!(t("-5"), Err("Invalid time: -5. Negative timestamps are not supported.".into()));
        assert_eq!(t("abc"), Err("Invalid time: abc. Invalid character 'a' in abc".into()));
        assert_eq!(t(""), Ok(-1));
    }

    #[test]
    fn java_zone_ids() {
        assert!(resolve_timezone("America/Denver").is_ok());
        assert!(resolve_timezone("Europe/Paris").is_ok());
        assert!(resolve_timezone("UTC").is_ok());
        assert!(resolve_timezone("EST").is_ok());
        assert!(resolve_timezone("IST").is_ok());
        assert_eq!(resolve_timezone("faketz12345").unwrap_err(), "faketz12345");
        assert!(resolve_timezone("utc").is_err());
    }
}
