//! Dates as OpenTSDB writes and reads them: `YYYY/MM/DD HH:MM:SS` out, and for command-line times seconds,
//! milliseconds or `YYYY/MM/DD-HH:MM:SS` in (interpreted as UTC).

/// Milliseconds since the epoch, from the system clock: the "now" of relative times and default query ends.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + if m <= 2 { 1 } else { 0 }, m, d)
}

/// `YYYY/MM/DD HH:MM:SS` in UTC.
pub fn format_utc(secs: i64) -> String {
    let (y, mo, d) = civil_from_days(secs.div_euclid(86400));
    let t = secs.rem_euclid(86400);
    format!("{y:04}/{mo:02}/{d:02} {:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
}

/// A command-line time: seconds, milliseconds (more than 10 digits... i.e. above 2^32-1), or
/// `YYYY/MM/DD[-HH:MM[:SS]]` in UTC. Returns milliseconds.
pub fn parse_time_ms(s: &str) -> Result<i64, String> {
    if let Ok(n) = s.parse::<i64>() {
        if n < 0 {
            return Err(format!("invalid time: {s}"));
        }
        return Ok(if n > 0xFFFF_FFFF { n } else { n * 1000 });
    }
    let (date, time) = s.split_once('-').unwrap_or((s, "00:00:00"));
    let d: Vec<&str> = date.split('/').collect();
    let t: Vec<&str> = time.split(':').collect();
    let num = |x: &str| x.parse::<u32>().map_err(|_| format!("invalid date: {s}"));
    if d.len() != 3 || t.len() < 2 || t.len() > 3 {
        return Err(format!("invalid date: {s} (expected seconds, milliseconds or YYYY/MM/DD-HH:MM:SS)"));
    }
    let (y, mo, day) = (num(d[0])? as i64, num(d[1])?, num(d[2])?);
    let (h, mi, sec) = (num(t[0])?, num(t[1])?, if t.len() == 3 { num(t[2])? } else { 0 });
    if !(1..=12).contains(&mo) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 59 {
        return Err(format!("invalid date: {s}"));
    }
    let days = days_from_civil(y, mo, day);
    Ok((days * 86400 + (h * 3600 + mi * 60 + sec) as i64) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_utc_dates() {
        assert_eq!(format_utc(0), "1970/01/01 00:00:00");
        assert_eq!(format_utc(1356998400), "2013/01/01 00:00:00");
        assert_eq!(format_utc(1479496100), "2016/11/18 19:08:20");
        assert_eq!(parse_time_ms("2013/01/01-00:00:00"), Ok(1356998400000));
        assert_eq!(parse_time_ms("2016/11/18-19:08:20"), Ok(1479496100000));
        assert_eq!(parse_time_ms("2016/11/18-19:08"), Ok(1479496080000));
        assert_eq!(parse_time_ms("2016/11/18"), Ok(1479427200000));
        assert_eq!(parse_time_ms("1356998400"), Ok(1356998400000));
        assert_eq!(parse_time_ms("1356998400500"), Ok(1356998400500));
        assert!(parse_time_ms("2016/13/01").is_err());
        assert!(parse_time_ms("yesterday").is_err());
    }
}
