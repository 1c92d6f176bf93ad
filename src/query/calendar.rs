//! Calendar-aligned downsampling buckets: OpenTSDB's `DateTime.previousInterval` and `Calendar.add` stepping in
//! a time zone (spec: query §3.2 "Calendar mode").
//!
//! Units of an hour or less step by exact elapsed time (Java's `Calendar.add` on time fields adds milliseconds);
//! days, weeks, months and years step on the civil calendar of the zone, keeping the wall-clock time, so a
//! `1dc` bucket is 23 or 25 hours long across a DST change. Wall-clock times that a DST change skips or repeats
//! are resolved with jiff's "compatible" rule (a skipped time moves forward, a repeated one takes the earlier
//! instant).

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, Zoned};

/// A calendar unit of a `<count><unit>c` downsampling interval: the request's own type (one type, parsed once).
pub use rtsd_protocol::query::CalendarUnit;

/// Whether `Calendar.add` on this unit adds elapsed time rather than civil-calendar fields.
fn is_elapsed(unit: CalendarUnit) -> bool {
    matches!(unit, CalendarUnit::Millisecond | CalendarUnit::Second | CalendarUnit::Minute | CalendarUnit::Hour)
}

/// `<count><unit>c` in a time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct Calendar {
    /// At least 1.
    pub count: i32,
    pub unit: CalendarUnit,
    pub tz: TimeZone,
}

impl Calendar {
    pub fn new(count: i32, unit: CalendarUnit, tz: TimeZone) -> Calendar {
        Calendar { count: count.max(1), unit, tz }
    }

    /// The fixed duration of `<count><unit>` in ms (what the scan window aligns to).
    pub fn fixed_interval_ms(&self) -> i64 {
        i64::from(self.count).saturating_mul(self.unit.fixed_ms())
    }

    /// One bucket length forward (`forward`) or back from `z`: `count` units, weeks as `7·count` days.
    pub(crate) fn step(&self, z: &Zoned, forward: bool) -> Option<Zoned> {
        let n = i64::from(if forward { self.count } else { -self.count });
        step_units(z, self.unit, n)
    }

    /// The zoned instant of `ts_ms` in this calendar's zone.
    pub(crate) fn zoned(&self, ts_ms: i64) -> Option<Zoned> {
        Some(Timestamp::from_millisecond(ts_ms).ok()?.to_zoned(self.tz.clone()))
    }

    /// `DateTime.previousInterval(ts, count, unit, tz)`: the start of the calendar bucket holding `ts`. An anchor
    /// is picked (the start of the next larger unit when `count` divides it, else one level higher; months and
    /// years anchor at January 1st), then stepped forward by `count` units while it is `<= ts`, and back once.
    /// Weeks start on Sunday (the JVM's en_US locale) and are found by 7-day steps whatever the count.
    /// `None` when `ts` is outside the calendar's range (beyond year ±9999).
    pub fn previous_interval(&self, ts_ms: i64) -> Option<Zoned> {
        let z = self.zoned(ts_ms)?;
        let dt = z.datetime();
        let n = self.count;
        let date = dt.date();
        let midnight = |d: jiff::civil::Date| d.to_datetime(jiff::civil::Time::midnight());
        let anchor: DateTime = match self.unit {
            CalendarUnit::Millisecond => {
                if 1000 % n == 0 {
                    truncate(dt, Trunc::Second)
                } else {
                    truncate(dt, Trunc::Minute)
                }
            }
            CalendarUnit::Second => {
                if 60 % n == 0 {
                    truncate(dt, Trunc::Minute)
                } else {
                    truncate(dt, Trunc::Hour)
                }
            }
            CalendarUnit::Minute => {
                if 60 % n == 0 {
                    truncate(dt, Trunc::Hour)
                } else {
                    midnight(date)
                }
            }
            CalendarUnit::Hour => {
                if 24 % n == 0 {
                    midnight(date)
                } else {
                    midnight(date.first_of_month())
                }
            }
            CalendarUnit::Day => {
                if n == 1 {
                    midnight(date.first_of_month())
                } else {
                    midnight(date.first_of_year())
                }
            }
            CalendarUnit::Week => {
                let back = i64::from(date.weekday().to_sunday_zero_offset());
                midnight(date.checked_sub(Span::new().days(back)).ok()?)
            }
            CalendarUnit::Month | CalendarUnit::Year => midnight(date.first_of_year()),
        };
        let mut cal = self.tz.to_zoned(anchor).ok()?;
        let anchor_ms = cal.timestamp().as_millisecond();
        if anchor_ms == ts_ms {
            return Some(cal);
        }
        // previousInterval steps weeks by 7 days, not 7·count.
        let (unit, step) = match self.unit {
            CalendarUnit::Week => (CalendarUnit::Day, 7i64),
            u => (u, i64::from(n)),
        };
        if anchor_ms > ts_ms {
            return step_units(&cal, unit, -step);
        }
        if is_elapsed(unit) {
            // Elapsed-time steps: jump straight to the last boundary <= ts.
            let step_ms = step.checked_mul(unit.fixed_ms())?;
            let k = (ts_ms - anchor_ms) / step_ms;
            let ms = anchor_ms.checked_add(k.checked_mul(step_ms)?)?;
            return Some(Timestamp::from_millisecond(ms).ok()?.to_zoned(self.tz.clone()));
        }
        // Civil steps: at most ~366 of them (days from January 1st).
        loop {
            let next = step_units(&cal, unit, step)?;
            if next.timestamp().as_millisecond() > ts_ms {
                // Java adds past `ts` and then subtracts once; on a civil calendar that is not always the
                // boundary it came from, so do the same.
                return step_units(&next, unit, -step);
            }
            cal = next;
        }
    }
}

enum Trunc {
    Second,
    Minute,
    Hour,
}

fn truncate(dt: DateTime, to: Trunc) -> DateTime {
    let (h, m, s) = match to {
        Trunc::Second => (dt.hour(), dt.minute(), dt.second()),
        Trunc::Minute => (dt.hour(), dt.minute(), 0),
        Trunc::Hour => (dt.hour(), 0, 0),
    };
    dt.date().to_datetime(jiff::civil::time(h, m, s, 0))
}

/// `Calendar.add(unit, n)` (weeks as `7·n` days).
fn step_units(z: &Zoned, unit: CalendarUnit, n: i64) -> Option<Zoned> {
    let span = match unit {
        CalendarUnit::Millisecond => Span::new().try_milliseconds(n).ok()?,
        CalendarUnit::Second => Span::new().try_seconds(n).ok()?,
        CalendarUnit::Minute => Span::new().try_minutes(n).ok()?,
        CalendarUnit::Hour => Span::new().try_hours(n).ok()?,
        CalendarUnit::Day => Span::new().try_days(n).ok()?,
        CalendarUnit::Week => Span::new().try_days(n.checked_mul(7)?).ok()?,
        CalendarUnit::Month => Span::new().try_months(n).ok()?,
        CalendarUnit::Year => Span::new().try_years(n).ok()?,
    };
    z.checked_add(span).ok()
}

/// Looks a zone up by its IANA name (`UTC`, `America/Denver`, ...), as the daemon needs for `timezone`.
pub fn time_zone(name: &str) -> Option<TimeZone> {
    TimeZone::get(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(count: i32, unit: &str, tz: &str) -> Calendar {
        Calendar::new(count, CalendarUnit::from_suffix(unit).unwrap(), time_zone(tz).unwrap())
    }

    fn prev(c: &Calendar, ts_ms: i64) -> i64 {
        c.previous_interval(ts_ms).unwrap().timestamp().as_millisecond()
    }

    const T: i64 = 1_356_998_400_000; // 2013-01-01T00:00:00Z, a Tuesday

    // spec: query §3.2 — `1dc` in America/Denver puts 2013-01-01T00:00:05Z in 2012-12-31T00:00 Denver.
    #[test]
    fn day_in_denver() {
        let c = cal(1, "d", "America/Denver");
        assert_eq!(prev(&c, T + 5_000), 1_356_937_200_000);
        assert_eq!(prev(&c, 1_356_937_200_000), 1_356_937_200_000);
        assert_eq!(prev(&c, 1_356_937_199_999), 1_356_937_200_000 - 86_400_000);
    }

    #[test]
    fn anchors_by_unit() {
        let utc = |count, unit| cal(count, unit, "UTC");
        // 2013-01-01T05:47:13.250Z
        let ts = T + ((5 * 60 + 47) * 60 + 13) * 1000 + 250;
        assert_eq!(prev(&utc(1, "h"), ts), T + 5 * 3_600_000);
        assert_eq!(prev(&utc(6, "h"), ts), T);
        assert_eq!(prev(&utc(5, "h"), ts), T + 5 * 3_600_000); // from the 1st of the month
        assert_eq!(prev(&utc(15, "m"), ts), T + (5 * 60 + 45) * 60_000);
        assert_eq!(prev(&utc(7, "m"), ts), T + (5 * 60 + 43) * 60_000); // from midnight: 343 = 49·7
        assert_eq!(prev(&utc(10, "s"), ts), T + ((5 * 60 + 47) * 60 + 10) * 1000);
        assert_eq!(prev(&utc(7, "s"), ts), T + ((5 * 60 + 47) * 60 + 8) * 1000); // from top of hour: 2828 = 404·7
        assert_eq!(prev(&utc(100, "ms"), ts), ts - 50);
        assert_eq!(prev(&utc(1, "n"), ts), T);
        assert_eq!(prev(&utc(1, "y"), ts), T);
        // 2013-03-15 in 2-month buckets from January: March 1st.
        let mar15 = 1_363_305_600_000;
        assert_eq!(prev(&utc(2, "n"), mar15), 1_362_096_000_000);
        // 3-day buckets from January 1st: Jan 1, 4, 7, ... ; Mar 15 is day 73 -> Mar 14 (day 72).
        assert_eq!(prev(&utc(3, "d"), mar15), mar15 - 86_400_000);
        // Weeks start on Sunday: 2013-01-01 (Tue) -> 2012-12-30.
        assert_eq!(prev(&utc(1, "w"), ts), T - 2 * 86_400_000);
        assert_eq!(prev(&utc(3, "w"), ts), T - 2 * 86_400_000);
    }

    // Across the spring-forward day a calendar day is 23 hours long.
    #[test]
    fn dst_days_step_on_the_civil_calendar() {
        let c = cal(1, "d", "America/Denver");
        // 2013-03-10 00:00 MST = 07:00Z; DST starts 02:00 local.
        let mar10 = 1_362_898_800_000;
        let z = c.previous_interval(mar10 + 12 * 3_600_000).unwrap();
        assert_eq!(z.timestamp().as_millisecond(), mar10);
        let next = c.step(&z, true).unwrap();
        assert_eq!(next.timestamp().as_millisecond() - mar10, 23 * 3_600_000);
    }

    // The zone decides where sub-day buckets start: Kolkata (UTC+05:30) hours begin at :30 UTC.
    #[test]
    fn hours_in_a_half_hour_zone() {
        let c = cal(1, "h", "Asia/Kolkata");
        assert_eq!(prev(&c, T), T - 1_800_000);
        assert_eq!(prev(&c, T + 1_800_000), T + 1_800_000);
        assert_eq!(prev(&cal(1, "h", "UTC"), T + 1_800_000), T);
        // A Kolkata calendar day starts at 18:30 UTC the day before.
        assert_eq!(prev(&cal(1, "d", "Asia/Kolkata"), T), T - 19_800_000);
    }

    #[test]
    fn out_of_range_is_none() {
        let c = cal(1, "d", "UTC");
        assert!(c.previous_interval(i64::MAX).is_none());
        assert!(c.previous_interval(i64::MIN).is_none());
    }
}
