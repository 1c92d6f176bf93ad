//! Java's "modified UTF-8", as written by `DataOutput.writeUTF` and read by `DataInput.readUTF` (spec: chukwa §2).
//!
//! It differs from UTF-8 in two ways: U+0000 is written as the two bytes `C0 80`, and a supplementary character
//! is written as its UTF-16 surrogate pair, each surrogate as a 3-byte sequence (6 bytes in all, as CESU-8 does).
//! For text without NUL and without supplementary characters the two encodings are the same bytes, which is the
//! case for nearly every string a Chukwa agent sends, so decoding borrows from the input whenever it can.
//!
//! The decoder accepts exactly what Java's `readUTF` accepts and fails where it fails, with its messages:
//! overlong 2- and 3-byte forms are decoded (Java does), raw `00` bytes are NUL (Java reads them so), and 4-byte
//! UTF-8 sequences are malformed (Java has no 4-byte form). A lone surrogate, which Java would keep in its UTF-16
//! string, has no place in a Rust `str` and becomes U+FFFD.
use std::borrow::Cow;

/// The largest string `writeUTF` can write: its length prefix is a `u16` count of encoded bytes.
pub const MAX_UTF_LEN: usize = u16::MAX as usize;

/// Why a modified UTF-8 byte string is not one `readUTF` would read. `Display` is Java's
/// `UTFDataFormatException` message; `at` counts from the first byte after the length prefix, as Java's does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Mutf8Error {
    /// A 2- or 3-byte sequence runs past the end of the string.
    #[error("malformed input: partial character at end")]
    PartialCharacter,
    /// A byte that cannot start a sequence (`80`-`BF`, `F0`-`FF`) or a continuation byte that is not `10xxxxxx`.
    #[error("malformed input around byte {at}")]
    Malformed {
        /// The byte count Java puts in its message.
        at: usize,
    },
}

/// Decodes the bytes of one `writeUTF` string (without its length prefix). Borrows when the bytes are plain UTF-8
/// that Java reads the same way; allocates only for `C0 80`, surrogates, overlong forms and lone surrogates.
pub fn decode(bytes: &[u8]) -> Result<Cow<'_, str>, Mutf8Error> {
    if bytes.is_ascii() {
        // ASCII is its own modified UTF-8 (Java reads a raw 00 byte as NUL, so it is no exception).
        return Ok(Cow::Borrowed(ascii_str(bytes)));
    }
    // Valid UTF-8 without 4-byte sequences (lead bytes F0-F4) and without surrogates (which valid UTF-8 cannot
    // hold) decodes to the same characters in Java.
    if !bytes.iter().any(|&b| b >= 0xF0) {
        if let Ok(s) = std::str::from_utf8(bytes) {
            return Ok(Cow::Borrowed(s));
        }
    }
    decode_slow(bytes).map(Cow::Owned)
}

fn ascii_str(bytes: &[u8]) -> &str {
    // ASCII is valid UTF-8; the fallback is unreachable but keeps the function panic-free.
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// Java's `readUTF` loop over UTF-16 code units, then surrogate pairs joined into characters.
fn decode_slow(bytes: &[u8]) -> Result<String, Mutf8Error> {
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c >> 4 {
            0..=7 => {
                units.push(u16::from(c));
                i += 1;
            }
            12 | 13 => {
                if i + 2 > bytes.len() {
                    return Err(Mutf8Error::PartialCharacter);
                }
                let c2 = bytes[i + 1];
                if c2 & 0xC0 != 0x80 {
                    return Err(Mutf8Error::Malformed { at: i + 2 });
                }
                units.push((u16::from(c & 0x1F) << 6) | u16::from(c2 & 0x3F));
                i += 2;
            }
            14 => {
                if i + 3 > bytes.len() {
                    return Err(Mutf8Error::PartialCharacter);
                }
                let (c2, c3) = (bytes[i + 1], bytes[i + 2]);
                if c2 & 0xC0 != 0x80 || c3 & 0xC0 != 0x80 {
                    return Err(Mutf8Error::Malformed { at: i + 2 });
                }
                units.push((u16::from(c & 0x0F) << 12) | (u16::from(c2 & 0x3F) << 6) | u16::from(c3 & 0x3F));
                i += 3;
            }
            _ => return Err(Mutf8Error::Malformed { at: i }),
        }
    }
    Ok(char::decode_utf16(units).map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER)).collect())
}

/// The number of bytes `writeUTF` writes for `s` after its length prefix.
pub fn encoded_len(s: &str) -> usize {
    s.chars()
        .map(|c| match c as u32 {
            0 => 2,
            1..=0x7F => 1,
            0x80..=0x7FF => 2,
            0x800..=0xFFFF => 3,
            _ => 6,
        })
        .sum()
}

/// Appends the modified UTF-8 bytes of `s` (without a length prefix).
pub fn encode_into(s: &str, out: &mut Vec<u8>) {
    // NUL (one byte 00) and 4-byte sequences (lead byte F0-F4) are the only UTF-8 bytes that differ.
    if !s.bytes().any(|b| b == 0 || b >= 0xF0) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    let mut units = [0u16; 2];
    for c in s.chars() {
        if c == '\0' {
            out.extend_from_slice(&[0xC0, 0x80]);
        } else if (c as u32) < 0x10000 {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        } else {
            for &u in c.encode_utf16(&mut units).iter() {
                out.extend_from_slice(&[
                    0xE0 | (u >> 12) as u8,
                    0x80 | ((u >> 6) & 0x3F) as u8,
                    0x80 | (u & 0x3F) as u8,
                ]);
            }
        }
    }
}

/// The modified UTF-8 bytes of `s` (without a length prefix).
pub fn encode(s: &str) -> Cow<'_, [u8]> {
    if !s.bytes().any(|b| b == 0 || b >= 0xF0) {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(encoded_len(s));
    encode_into(s, &mut out);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Spec chukwa §2 and §8.7 vector 3: NUL, é, 😀.
    #[test]
    fn spec_vector_nul_e_acute_emoji() {
        let s = "\u{0}é😀";
        assert_eq!(encoded_len(s), 10);
        assert_eq!(&*encode(s), &[0xc0, 0x80, 0xc3, 0xa9, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]);
        let decoded = decode(&[0xc0, 0x80, 0xc3, 0xa9, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]).unwrap();
        assert_eq!(decoded, s);
        assert!(matches!(decoded, Cow::Owned(_)));
    }

    #[test]
    fn plain_text_borrows() {
        assert!(matches!(decode(b"host1"), Ok(Cow::Borrowed("host1"))));
        assert!(matches!(decode("/var/log/café".as_bytes()), Ok(Cow::Borrowed("/var/log/café"))));
        assert!(matches!(encode("host1"), Cow::Borrowed(b"host1")));
        assert!(matches!(decode(b""), Ok(Cow::Borrowed(""))));
    }

    #[test]
    fn java_accepts_raw_nul_and_overlong_forms() {
        assert_eq!(decode(b"a\0b").unwrap(), "a\0b");
        // C1 81 is an overlong 'A'; E0 81 81 an overlong 'A' too: Java's readUTF does not check.
        assert_eq!(decode(&[0xC1, 0x81]).unwrap(), "A");
        assert_eq!(decode(&[0xE0, 0x81, 0x81]).unwrap(), "A");
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(decode(&[0x61, 0xED, 0xA0, 0xBD]).unwrap(), "a\u{FFFD}");
        assert_eq!(decode(&[0xED, 0xB8, 0x80, 0x62]).unwrap(), "\u{FFFD}b");
    }

    #[test]
    fn java_error_positions_and_messages() {
        // A continuation byte where a character should start: Java reports its own index.
        let e = decode(&[0x61, 0x80]).unwrap_err();
        assert_eq!(e, Mutf8Error::Malformed { at: 1 });
        assert_eq!(e.to_string(), "malformed input around byte 1");
        // 4-byte UTF-8 (F0 9F 98 80, an emoji in real UTF-8): Java has no such form.
        assert_eq!(decode("😀".as_bytes()).unwrap_err(), Mutf8Error::Malformed { at: 0 });
        assert_eq!(decode(&[0xFF]).unwrap_err(), Mutf8Error::Malformed { at: 0 });
        // A bad continuation of a 2-byte sequence: Java reports the byte after it (count was advanced by 2).
        assert_eq!(decode(&[0x61, 0xC3, 0x41]).unwrap_err(), Mutf8Error::Malformed { at: 3 });
        // ... and of a 3-byte sequence: count advanced by 3, minus one.
        assert_eq!(decode(&[0xE2, 0x82, 0x41]).unwrap_err(), Mutf8Error::Malformed { at: 2 });
        let e = decode(&[0x61, 0xC3]).unwrap_err();
        assert_eq!(e, Mutf8Error::PartialCharacter);
        assert_eq!(e.to_string(), "malformed input: partial character at end");
        assert_eq!(decode(&[0xE2, 0x82]).unwrap_err(), Mutf8Error::PartialCharacter);
    }

    proptest! {
        #[test]
        fn round_trip(s in any::<String>()) {
            let bytes = encode(&s);
            prop_assert_eq!(bytes.len(), encoded_len(&s));
            prop_assert_eq!(decode(&bytes).unwrap(), s.as_str());
        }

        #[test]
        fn round_trip_with_nul_and_supplementary(parts in proptest::collection::vec(
            prop_oneof![Just("\0".to_string()), Just("😀".to_string()), Just("é".to_string()), "[a-z]{0,3}",
                        any::<char>().prop_map(String::from)], 0..20)) {
            let s: String = parts.concat();
            let bytes = encode(&s);
            prop_assert!(!bytes.contains(&0), "no raw NUL in modified UTF-8");
            prop_assert!(!bytes.iter().any(|&b| b >= 0xF0), "no 4-byte sequences");
            prop_assert_eq!(decode(&bytes).unwrap(), s.as_str());
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }
    }
}
