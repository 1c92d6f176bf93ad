//! Points in and out of the engine, and how an output value is printed (spec: query §0.6, §1.6).
//!
//! A stored value is an integer or a floating-point number; which one it is decides whether an output point is
//! computed (and printed) as a Java `long` or a `double` (§1.6 "Value typing"). Downsampled and rate values are
//! always [`Value::Double`].

use rtsd_protocol::javafmt;

/// One value of a series: the stored value itself ([`Value::Int`], [`Value::Float`] for a 4-byte float,
/// [`Value::Double`]). The engine reads a float as Java does, widened to a double exactly (`Float.intBitsToFloat(..)`
/// read back as a double, [`Value::as_f64`]), and computes doubles as [`Value::Double`].
pub use rtsd_protocol::codec::Value;

/// One point of a series: its time in Unix epoch milliseconds and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub ts: i64,
    pub value: Value,
}

impl Point {
    pub fn int(ts: i64, v: i64) -> Point {
        Point { ts, value: Value::Int(v) }
    }

    pub fn float(ts: i64, v: f64) -> Point {
        Point { ts, value: Value::Double(v) }
    }
}

impl From<&rtsd_protocol::codec::RowPoint> for Point {
    fn from(p: &rtsd_protocol::codec::RowPoint) -> Point {
        Point { ts: p.timestamp_ms, value: p.value }
    }
}

/// The value of one output point, already typed the way §1.6 prints it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OutValue {
    /// Computed on the integer path: a JSON integer (`"1356998400":40`).
    Int(i64),
    /// Computed on the double path, finite: Java's `Double.toString` (`55.0`, `9.349986906415408E11`).
    Double(f64),
    /// NaN with any fill policy but `null`: the JSON string `"NaN"`.
    NaN,
    /// NaN with fill policy `null`: JSON `null`.
    Null,
}

impl OutValue {
    /// The value as a double (NaN for [`OutValue::NaN`] and [`OutValue::Null`]); handy in tests and summaries.
    pub fn to_f64(self) -> f64 {
        match self {
            OutValue::Int(v) => v as f64,
            OutValue::Double(v) => v,
            OutValue::NaN | OutValue::Null => f64::NAN,
        }
    }
}

/// One output point: time in ms (the serializer divides by 1000, truncating, unless `msResolution`) and value.
pub type OutPoint = (i64, OutValue);

/// Appends `v` as OpenTSDB writes it in JSON (spec: query §0.6): integers plain, doubles the Java way, NaN as the
/// string `"NaN"` (quotes included) or `null` per the fill policy the pipeline already applied. The infinities,
/// which `/api/query` never produces (2.4's aggregation throws first) but expressions can, are quoted strings
/// too, as Jackson's `QUOTE_NON_NUMERIC_NUMBERS` writes them.
pub fn write_value(out: &mut String, v: &OutValue) {
    match *v {
        OutValue::Int(i) => out.push_str(itoa::Buffer::new().format(i)),
        OutValue::Double(d) if d.is_infinite() => out.push_str(if d > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" }),
        OutValue::Double(d) => javafmt::write_double(out, d),
        OutValue::NaN => out.push_str("\"NaN\""),
        OutValue::Null => out.push_str("null"),
    }
}

/// [`write_value`] into a fresh string.
pub fn format_value(v: &OutValue) -> String {
    let mut s = String::with_capacity(24);
    write_value(&mut s, v);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: query §0.6 — integers plain, doubles Java-style, NaN quoted, null for fill `null`.
    #[test]
    fn formats_values_like_jackson() {
        assert_eq!(format_value(&OutValue::Int(40)), "40");
        assert_eq!(format_value(&OutValue::Int(-13)), "-13");
        assert_eq!(format_value(&OutValue::Double(55.0)), "55.0");
        assert_eq!(format_value(&OutValue::Double(0.03333333333333333)), "0.03333333333333333");
        assert_eq!(format_value(&OutValue::Double(934998690641.5408)), "9.349986906415408E11");
        assert_eq!(format_value(&OutValue::Double(-1.6666666666666667)), "-1.6666666666666667");
        assert_eq!(format_value(&OutValue::NaN), "\"NaN\"");
        assert_eq!(format_value(&OutValue::Double(f64::NEG_INFINITY)), "\"-Infinity\"");
        assert_eq!(format_value(&OutValue::Null), "null");
    }

    #[test]
    fn a_stored_point_keeps_its_value_and_a_float_reads_as_its_exact_double() {
        use rtsd_protocol::codec::RowPoint;
        let p = |value| Point::from(&RowPoint { timestamp_ms: 1, qualifier: Default::default(), value });
        assert_eq!(p(Value::Int(7)).value, Value::Int(7));
        assert_eq!(p(Value::Float(0.1f32)).value.as_f64(), f64::from(0.1f32));
        assert_eq!(p(Value::Double(0.1)).value.as_f64(), 0.1);
        assert!(p(Value::Int(7)).value.is_integer() && !p(Value::Double(7.0)).value.is_integer());
    }
}
