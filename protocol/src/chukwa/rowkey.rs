//! Chukwa 0.7+'s HBase row key for table `chukwa` (spec: chukwa §5.3, `HBaseUtil.buildKey`), for cross-checks and
//! an HBase-compatible export (§8.7 vector 8).
//!
//! 14 bytes: the UTC day of year as ASCII decimal copied to `key[0..]`, then the first 6 bytes of MD5(primary key)
//! copied over `key[2..8]` (so a third day digit is overwritten and a single digit leaves `key[1] = 0`), then the
//! first 6 bytes of MD5(source) at `key[8..14]`. Strings are hashed as UTF-8.
use md5::{Digest, Md5};

/// Length of a row key.
pub const ROW_KEY_LEN: usize = 14;

const MS_PER_DAY: i64 = 86_400_000;

/// The first 6 bytes of the MD5 digest of `s` in UTF-8 (`HBaseUtil.getHash`).
pub fn md5_prefix(s: &str) -> [u8; 6] {
    let digest = Md5::digest(s.as_bytes());
    let mut out = [0u8; 6];
    out.copy_from_slice(&digest[..6]);
    out
}

/// The row key of `primary_key` (a full metric name such as `SystemMetrics.cpu.combined`, or a bare dataType for
/// annotation rows) from `source` at `time_ms` (`HBaseUtil.buildKey(time, primaryKey, source)`).
pub fn row_key(time_ms: i64, primary_key: &str, source: &str) -> [u8; ROW_KEY_LEN] {
    let mut key = row_key_without_source(time_ms, primary_key);
    key[8..14].copy_from_slice(&md5_prefix(source));
    key
}

/// The row key without a source: bytes 8-13 stay zero (`HBaseUtil.buildKey(time, primaryKey)`).
pub fn row_key_without_source(time_ms: i64, primary_key: &str) -> [u8; ROW_KEY_LEN] {
    let mut key = [0u8; ROW_KEY_LEN];
    let day = day_of_year_utc(time_ms).to_string();
    let day = day.as_bytes();
    let n = day.len().min(ROW_KEY_LEN);
    key[..n].copy_from_slice(&day[..n]);
    key[2..8].copy_from_slice(&md5_prefix(primary_key));
    key
}

/// The 8-byte big-endian column qualifier (and cell timestamp) of families `t` and `a`.
pub fn qualifier(time_ms: i64) -> [u8; 8] {
    time_ms.to_be_bytes()
}

/// `Calendar.DAY_OF_YEAR` of `time_ms` in UTC, as Java's default `GregorianCalendar` computes it: Gregorian from
/// 1582-10-15 on, Julian before (so 1582 has 355 days and 1582-10-15 is day 278), 1-based.
pub fn day_of_year_utc(time_ms: i64) -> u32 {
    let day = time_ms.div_euclid(MS_PER_DAY);
    if day >= GREGORIAN_CUTOVER_DAY {
        let (year, _, _) = gregorian_from_days(day);
        // The cutover year counts from its Julian 1 January.
        let jan1 = if year == 1582 { julian_to_days(1582, 1, 1) } else { gregorian_to_days(year, 1, 1) };
        (day - jan1 + 1) as u32
    } else {
        let (year, _, _) = julian_from_days(day);
        (day - julian_to_days(year, 1, 1) + 1) as u32
    }
}

/// Days since 1970-01-01 of 1582-10-15, the first Gregorian day in Java's default calendar.
const GREGORIAN_CUTOVER_DAY: i64 = -141_427;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn gregorian_to_days(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count (H. Hinnant's `civil_from_days`).
fn gregorian_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 (Gregorian) of a proleptic Julian date: 4-year cycles of 1461 days, years from March.
fn julian_to_days(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(4);
    let yoe = y - era * 4;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    // 0000-03-01 Julian is 0000-02-29 Gregorian... expressed via the offset of 1970-01-01 (Gregorian) = 1969-12-19
    // (Julian): day 719_470 counted from Julian 0000-03-01.
    era * 1461 + yoe * 365 + doy - 719_470
}

/// The proleptic Julian date of a day count.
fn julian_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_470;
    let era = z.div_euclid(1461);
    let doe = z - era * 1461;
    let yoe = (doe - doe / 1460) / 365;
    let doy = doe - 365 * yoe;
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 4 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SOURCE_HOST1: &str = "host1";
    const CPU: &str = "SystemMetrics.cpu.combined";
    /// 2016-06-20T00:00:00Z, day 172.
    const JUNE_20: i64 = 1_466_380_800_000;
    /// 2016-01-05T00:00:00Z, day 5.
    const JAN_5: i64 = 1_451_952_000_000;
    /// 2016-02-01T00:00:00Z, day 32.
    const FEB_1: i64 = 1_454_284_800_000;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn md5_prefixes_of_the_spec() {
        assert_eq!(hex(&md5_prefix(CPU)), "cb 75 b6 4b e1 65");
        assert_eq!(hex(&md5_prefix(SOURCE_HOST1)), "81 5a d1 c0 58 df");
        assert_eq!(hex(&md5_prefix("HadoopMetrics.jvm.JvmMetrics.MemHeapUsedM")), "61 11 af eb 5a c7");
        assert_eq!(hex(&md5_prefix("nn1.example.com:NameNode")), "08 25 09 62 7a 36");
    }

    /// The five worked examples of spec §5.3 (§8.7 vector 8).
    #[test]
    fn worked_examples() {
        assert_eq!(day_of_year_utc(JUNE_20), 172);
        assert_eq!(day_of_year_utc(JAN_5), 5);
        assert_eq!(day_of_year_utc(FEB_1), 32);
        assert_eq!(hex(&row_key(JUNE_20, CPU, SOURCE_HOST1)), "31 37 cb 75 b6 4b e1 65 81 5a d1 c0 58 df");
        assert_eq!(hex(&row_key(JAN_5, CPU, SOURCE_HOST1)), "35 00 cb 75 b6 4b e1 65 81 5a d1 c0 58 df");
        assert_eq!(hex(&row_key(FEB_1, CPU, SOURCE_HOST1)), "33 32 cb 75 b6 4b e1 65 81 5a d1 c0 58 df");
        assert_eq!(
            hex(&row_key(JUNE_20, "HadoopMetrics.jvm.JvmMetrics.MemHeapUsedM", "nn1.example.com:NameNode")),
            "31 37 61 11 af eb 5a c7 08 25 09 62 7a 36"
        );
        assert_eq!(hex(&row_key(JUNE_20, "SystemMetrics", SOURCE_HOST1)), "31 37 7a f2 6c 81 03 cf 81 5a d1 c0 58 df");
    }

    #[test]
    fn qualifier_of_the_spec() {
        assert_eq!(hex(&qualifier(JUNE_20)), "00 00 01 55 6b 1b 50 00");
    }

    #[test]
    fn without_source_leaves_zeros() {
        let key = row_key_without_source(JUNE_20, CPU);
        assert_eq!(hex(&key), "31 37 cb 75 b6 4b e1 65 00 00 00 00 00 00");
    }

    #[test]
    fn day_boundaries_are_utc() {
        assert_eq!(day_of_year_utc(0), 1);
        assert_eq!(day_of_year_utc(JUNE_20 - 1), 171);
        assert_eq!(day_of_year_utc(-1), 365); // 1969-12-31T23:59:59.999Z
        assert_eq!(day_of_year_utc(951_782_400_000), 60); // 2000-02-29
        assert_eq!(day_of_year_utc(978_220_800_000), 366); // 2000-12-31
        assert_eq!(day_of_year_utc(4_107_542_400_000), 60); // 2100-03-01: 2100 is not a leap year
    }

    #[test]
    fn java_calendar_cutover() {
        let day = |d: i64| day_of_year_utc(d * MS_PER_DAY);
        assert_eq!(day(GREGORIAN_CUTOVER_DAY), 278); // 1582-10-15, right after Julian 1582-10-04
        assert_eq!(day(GREGORIAN_CUTOVER_DAY - 1), 277); // 1582-10-04 (Julian)
        assert_eq!(day(GREGORIAN_CUTOVER_DAY + 77), 355); // 1582-12-31: 1582 had 355 days
        assert_eq!(day(GREGORIAN_CUTOVER_DAY + 78), 1); // 1583-01-01
                                                        // Values printed by Java 17's GregorianCalendar in UTC.
        assert_eq!(day(-200_000), 145); // 1422-05-25 (Julian)
        assert_eq!(day(-800_000), 251); // 222 BC-09-08
        assert_eq!(day(-719_468), 63); // 1 BC-03-03 (Julian, a leap year)
        assert_eq!(day(-5_000_000), 261); // 11721 BC-09-17
        assert_eq!(day(2_932_896), 365); // 9999-12-31
        assert_eq!(day(16_971), 171); // 2016-06-19
        assert_eq!(day_of_year_utc(i64::MIN), 336);
        assert_eq!(day_of_year_utc(i64::MAX), 229);
    }

    #[test]
    fn calendar_helpers_invert() {
        for d in [-800_000i64, -141_428, -1, 0, 1, 59, 60, 10_957, 2_932_896] {
            let (y, m, dd) = gregorian_from_days(d);
            assert_eq!(gregorian_to_days(y, m, dd), d);
            let (y, m, dd) = julian_from_days(d);
            assert_eq!(julian_to_days(y, m, dd), d);
        }
        assert_eq!(gregorian_to_days(1970, 1, 1), 0);
        assert_eq!(julian_to_days(1969, 12, 19), 0);
        assert_eq!(julian_to_days(1582, 10, 5), GREGORIAN_CUTOVER_DAY);
    }

    proptest! {
        #[test]
        fn day_of_year_in_range(ms in any::<i64>()) {
            let doy = day_of_year_utc(ms);
            prop_assert!((1..=366).contains(&doy));
            let _ = row_key(ms, "m", "s");
        }
    }
}
