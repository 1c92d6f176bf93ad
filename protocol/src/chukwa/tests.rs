//! Cross-module tests of the Chukwa codec: the spec's worked example and vectors (chukwa §2.1, §8.7), every
//! framing error with its text, replies, and property tests (round trip, never panic).
use std::borrow::Cow;

use proptest::prelude::*;

use super::*;

/// The 88-byte POST body of spec §2.1, transcribed from its hex dump.
const SPEC_BODY: [u8; 88] = [
    0x00, 0x00, 0x00, 0x01, // number of chunks = 1
    0x00, 0x00, 0x00, 0x01, // protocol version = 1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, // seqID = 8
    0x00, 0x05, 0x68, 0x6f, 0x73, 0x74, 0x31, // "host1"
    0x00, 0x0f, 0x20, 0x63, 0x6c, 0x75, 0x73, 0x74, 0x65, 0x72, 0x3d, 0x22, 0x64, 0x65, 0x6d, 0x6f,
    0x22, // " cluster=\"demo\""
    0x00, 0x10, 0x2f, 0x76, 0x61, 0x72, 0x2f, 0x6c, 0x6f, 0x67, 0x2f, 0x61, 0x70, 0x70, 0x2e, 0x6c, 0x6f,
    0x67, // "/var/log/app.log"
    0x00, 0x06, 0x41, 0x70, 0x70, 0x4c, 0x6f, 0x67, // "AppLog"
    0x00, 0x00, // debuggingInfo = ""
    0x00, 0x00, 0x00, 0x02, // numRecords = 2
    0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x07, // end offsets 3, 7
    0x61, 0x3d, 0x31, 0x0a, 0x62, 0x3d, 0x32, 0x0a, // data
];

/// Offsets of the fields in [`SPEC_BODY`] (the dump's left column).
const AT_VERSION: usize = 0x04;
const AT_SOURCE: usize = 0x10;
const AT_NUM_RECORDS: usize = 0x44;
const AT_OFFSETS: usize = 0x48;
const AT_DATA: usize = 0x50;

fn spec_chunk() -> Chunk<'static> {
    Chunk::new(8, "host1", " cluster=\"demo\"", "/var/log/app.log", "AppLog", b"a=1\nb=2\n").with_record_ends([3, 7])
}

fn err_text(body: &[u8]) -> String {
    parse_body(body).unwrap_err().to_string()
}

fn with(body: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    b
}

// ---- §2.1 and §8.7 vectors ---------------------------------------------------------------------------------------

/// §8.7 vector 1: the §2.1 body parses to its chunk, re-encodes byte for byte, and is acked as the spec says.
#[test]
fn spec_88_byte_example() {
    let post = parse_body(&SPEC_BODY).unwrap();
    assert_eq!(post.trailing, 0);
    assert_eq!(post.chunks.len(), 1);
    let c = &post.chunks[0];
    assert_eq!(c.seq_id, 8);
    assert_eq!(c.source, "host1");
    assert_eq!(c.tags, " cluster=\"demo\"");
    assert_eq!(c.stream_name, "/var/log/app.log");
    assert_eq!(c.data_type, "AppLog");
    assert_eq!(c.debugging_info, "");
    assert_eq!(c.record_ends.to_vec(), [3, 7]);
    assert_eq!(c.data, b"a=1\nb=2\n");
    assert_eq!(c.records().collect::<Vec<_>>(), [&b"a=1\n"[..], b"b=2\n"]);
    assert_eq!((c.start(), c.len()), (0, 8));
    assert_eq!(c.cluster(), "demo");
    // Nothing was copied: strings borrow from the body.
    assert!(matches!(c.source, Cow::Borrowed(_)));
    assert_eq!(*c, spec_chunk());

    assert_eq!(c.encoded_len(), 84);
    let mut again = Vec::new();
    c.write_to(&mut again).unwrap();
    assert_eq!(again, SPEC_BODY[4..]);
    assert_eq!(encode_body(&post.chunks).unwrap(), SPEC_BODY);
    assert_eq!(encode_body([&spec_chunk()]).unwrap(), SPEC_BODY);

    assert_eq!(c.ack().to_string(), "ok: 8 bytes ending at offset 7");
    assert_eq!(reply_body(post.chunks.iter().map(Chunk::ack)), "ok: 8 bytes ending at offset 7\n");
}

/// §8.7 vector 2: the empty chunk (offsets `[-1]`, no data) is accepted, round-trips and is acked.
#[test]
fn empty_chunk_is_accepted() {
    let empty = Chunk::new(5, "h", "", "s", "t", b"");
    assert_eq!(empty.record_ends.to_vec(), [-1]);
    let body = encode_body([&empty]).unwrap();
    assert_eq!(body.len(), 4 + MIN_CHUNK_LEN + 3);
    assert_eq!(&body[body.len() - 8..], [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
    let post = parse_body(&body).unwrap();
    let c = &post.chunks[0];
    assert_eq!(*c, empty);
    assert!(c.is_empty());
    assert_eq!(c.records().collect::<Vec<_>>(), [&b""[..]]);
    assert_eq!(c.ack().to_string(), "ok: 0 bytes ending at offset 4");
}

/// §8.7 vector 3 inside a chunk: `00 0a c0 80 c3 a9 ed a0 bd ed b8 80` is NUL, é, 😀.
#[test]
fn modified_utf8_in_a_chunk() {
    let mut body = SPEC_BODY[..AT_SOURCE].to_vec();
    body.extend_from_slice(&[0x00, 0x0a, 0xc0, 0x80, 0xc3, 0xa9, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]);
    body.extend_from_slice(&SPEC_BODY[AT_SOURCE + 7..]);
    let post = parse_body(&body).unwrap();
    assert_eq!(post.chunks[0].source, "\u{0}é😀");
    assert!(matches!(post.chunks[0].source, Cow::Owned(_)));
    let mut c = spec_chunk();
    c.source = "\u{0}é😀".into();
    assert_eq!(encode_body([&c]).unwrap(), body);
}

/// §8.7 vectors 4 and 5, the pure half: a resend with other boundaries starts with the bytes we fingerprinted;
/// a rotated file's chunk at a reused offset does not.
#[test]
fn resend_and_rotation_fingerprints() {
    let stream: Vec<u8> = (0..300u32).map(|i| b"0123456789abcdefghij\n"[(i % 21) as usize]).collect();
    let first = Chunk::new(100, "h", "", "/f", "T", &stream[0..100]);
    let second = Chunk::new(250, "h", "", "/f", "T", &stream[100..250]);
    let resent = Chunk::new(300, "h", "", "/f", "T", &stream[100..300]);
    assert_eq!((first.start(), second.start(), resent.start()), (0, 100, 100));
    assert_eq!(second.fingerprint().matches(resent.data), Some(true));
    let rotated_bytes = vec![b'Z'; 80];
    let rotated = Chunk::new(80, "h", "", "/f", "T", &rotated_bytes);
    assert_eq!(rotated.start(), 0);
    // Shorter than the stored chunk: no verdict, which the dedup rules treat as a reset (no loss).
    assert_eq!(first.fingerprint().matches(rotated.data), None);
    let rotated_bytes = vec![b'Z'; 120];
    let rotated = Chunk::new(120, "h", "", "/f", "T", &rotated_bytes);
    assert_eq!(first.fingerprint().matches(rotated.data), Some(false));
}

/// §8.7 vector 7: a heartbeat chunk (seqID 7, 300 bytes) starts before 0, which marks its stream opaque.
#[test]
fn heartbeat_starts_below_zero() {
    let json = vec![b' '; 300];
    let beat = Chunk::new(7, "h", "", "STATUS", "Heartbeat", &json);
    assert_eq!(beat.start(), -293);
    assert_eq!(Chunk::new(i64::MIN, "h", "", "s", "t", &json).start(), i64::MIN);
}

// ---- bodies --------------------------------------------------------------------------------------------------

#[test]
fn several_chunks_in_order_and_trailing_bytes_ignored() {
    let data = b"line one\nline two\n";
    let a = Chunk::new(18, "h1", " cluster=\"c\"", "/a", "A", data).with_record_ends(RecordEnds::from_lengths([9, 9]));
    let b = Chunk::new(1000, "h2", "", "/b", "B", b"x");
    let mut body = encode_body([&a, &b]).unwrap();
    assert_eq!(&body[..4], [0, 0, 0, 2]);
    body.extend_from_slice(b"junk");
    let post = parse_body(&body).unwrap();
    assert_eq!(post.chunks, vec![a, b]);
    assert_eq!(post.trailing, 4);
    assert_eq!(
        reply_body(post.chunks.iter().map(Chunk::ack)),
        "ok: 18 bytes ending at offset 17\nok: 1 bytes ending at offset 999\n"
    );
}

#[test]
fn zero_chunks() {
    let post = parse_body(&[0, 0, 0, 0]).unwrap();
    assert!(post.chunks.is_empty());
    assert_eq!(reply_body(post.chunks.iter().map(Chunk::ack)), "");
    assert_eq!(encode_body(std::iter::empty::<&Chunk>()).unwrap(), [0, 0, 0, 0]);
}

#[test]
fn parse_chunk_reads_a_stream_without_count() {
    let mut stream = Vec::new();
    spec_chunk().write_to(&mut stream).unwrap();
    spec_chunk().write_to(&mut stream).unwrap();
    let (first, rest) = parse_chunk(&stream).unwrap();
    assert_eq!(first, spec_chunk());
    let (second, rest) = parse_chunk(rest).unwrap();
    assert_eq!(second, spec_chunk());
    assert!(rest.is_empty());
    // A partial chunk is "read more", not garbage.
    let err = parse_chunk(&stream[..50]).unwrap_err();
    assert!(err.is_truncated());
    assert!(!parse_chunk(&with(&stream, 0, &[0, 0, 0, 9])).unwrap_err().is_truncated());
}

// ---- every framing error, with its text ------------------------------------------------------------------------

#[test]
fn error_body_shorter_than_the_count() {
    assert_eq!(err_text(b""), "bad post body at byte 0: truncated chunk count: needs 4 bytes, 0 left");
    assert_eq!(err_text(&[0, 0, 1]), "bad post body at byte 0: truncated chunk count: needs 4 bytes, 3 left");
}

#[test]
fn error_negative_count() {
    assert_eq!(err_text(&[0xff, 0xff, 0xff, 0xff]), "bad post body at byte 0: negative chunk count -1");
}

#[test]
fn error_count_over_the_limit() {
    let body = encode_body([&spec_chunk(), &spec_chunk()]).unwrap();
    let err = parse_body_with(&body, &Limits { max_chunks: 1 }).unwrap_err();
    assert_eq!(err.to_string(), "bad post body at byte 0: 2 chunks in one post, more than the limit of 1");
    assert_eq!(parse_body_with(&body, &Limits { max_chunks: 2 }).unwrap().chunks.len(), 2);
    let huge = [0x7f, 0xff, 0xff, 0xff];
    assert_eq!(
        err_text(&huge),
        "bad post body at byte 0: 2147483647 chunks in one post, more than the limit of 100000"
    );
}

#[test]
fn error_count_beyond_the_body() {
    assert_eq!(
        err_text(&[0, 0, 0, 1]),
        "bad post body at byte 0: chunk count 1 cannot fit in the 0 bytes that follow it"
    );
    let two = with(&SPEC_BODY, 0, &[0, 0, 0, 3]);
    assert_eq!(err_text(&two), "bad post body at byte 0: chunk count 3 cannot fit in the 84 bytes that follow it");
    // Two announced and room for two minimal chunks, but the second is zeros: its version is wrong.
    let mut body = with(&SPEC_BODY, 0, &[0, 0, 0, 2]);
    body.extend_from_slice(&[0; MIN_CHUNK_LEN - 4]);
    body.truncate(4 + 84 + 20);
    assert_eq!(
        err_text(&body),
        "bad chunk 1 at byte 88: Protocol version mismatched, drop data.  source version: 0, collector version:1"
    );
}

#[test]
fn error_protocol_version() {
    let body = with(&SPEC_BODY, AT_VERSION, &[0, 0, 0, 2]);
    let err = parse_body(&body).unwrap_err();
    assert_eq!(err.kind, FrameErrorKind::ProtocolVersion { version: 2 });
    assert_eq!(
        err.to_string(),
        "bad chunk 0 at byte 4: Protocol version mismatched, drop data.  source version: 2, collector version:1"
    );
    let body = with(&SPEC_BODY, AT_VERSION, &[0xff, 0xff, 0xff, 0xfe]);
    assert_eq!(
        err_text(&body),
        "bad chunk 0 at byte 4: Protocol version mismatched, drop data.  source version: -2, collector version:1"
    );
}

#[test]
fn error_truncated_at_every_length() {
    for len in 0..SPEC_BODY.len() {
        let err = parse_body(&SPEC_BODY[..len]).unwrap_err();
        assert!(err.is_truncated() || matches!(err.kind, FrameErrorKind::CountBeyondBody { .. }), "{len}: {err}");
    }
    // The texts name the field, where it starts, what it needed and what was left.
    assert_eq!(err_text(&SPEC_BODY[..87]), "bad chunk 0 at byte 80: truncated data: needs 8 bytes, 7 left");
    assert_eq!(err_text(&SPEC_BODY[..AT_DATA]), "bad chunk 0 at byte 80: truncated data: needs 8 bytes, 0 left");
    assert_eq!(
        err_text(&SPEC_BODY[..78]),
        "bad chunk 0 at byte 72: truncated record end offsets: needs 8 bytes, 6 left"
    );
    assert_eq!(err_text(&SPEC_BODY[..70]), "bad chunk 0 at byte 68: truncated numRecords: needs 4 bytes, 2 left");
    assert_eq!(err_text(&SPEC_BODY[..67]), "bad chunk 0 at byte 66: truncated debuggingInfo: needs 2 bytes, 1 left");
    assert_eq!(err_text(&SPEC_BODY[..62]), "bad chunk 0 at byte 60: truncated dataType: needs 6 bytes, 2 left");
    assert_eq!(err_text(&SPEC_BODY[..45]), "bad chunk 0 at byte 42: truncated streamName: needs 16 bytes, 3 left");
    assert_eq!(err_text(&SPEC_BODY[..40]), "bad chunk 0 at byte 40: truncated streamName: needs 2 bytes, 0 left");
    assert_eq!(err_text(&SPEC_BODY[..36]), "bad chunk 0 at byte 25: truncated tags: needs 15 bytes, 11 left");
}

#[test]
fn error_truncated_seq_id_and_source() {
    // A count of 1 with room for one minimal chunk, cut inside the fields.
    let mut body = SPEC_BODY[..12].to_vec();
    body.resize(4 + MIN_CHUNK_LEN, 0);
    body[8..16].copy_from_slice(&8i64.to_be_bytes());
    body[16..18].copy_from_slice(&[0x00, 0x40]); // source of 64 bytes, 16 left
    assert_eq!(err_text(&body), "bad chunk 0 at byte 18: truncated source: needs 64 bytes, 16 left");
    let err = parse_chunk(&body[4..14]).unwrap_err();
    assert_eq!(err.to_string(), "bad chunk 0 at byte 4: truncated seqID: needs 8 bytes, 6 left");
}

#[test]
fn error_malformed_modified_utf8() {
    // "host1" -> "h\x80st1": a continuation byte where a character starts.
    let body = with(&SPEC_BODY, AT_SOURCE + 3, &[0x80]);
    let err = parse_body(&body).unwrap_err();
    assert_eq!(err.kind, FrameErrorKind::Utf { field: Field::Source, error: Mutf8Error::Malformed { at: 1 } });
    assert_eq!(err.to_string(), "bad chunk 0 at byte 18: malformed input around byte 1 in source");
    // A 2-byte lead as the last byte of dataType "AppLog".
    let body = with(&SPEC_BODY, 0x3a + 2 + 5, &[0xc3]);
    assert_eq!(err_text(&body), "bad chunk 0 at byte 60: malformed input: partial character at end in dataType");
    // 4-byte UTF-8 (not modified UTF-8) in the tags.
    let body = with(&SPEC_BODY, 0x17 + 2, &[0xf0, 0x9f, 0x98, 0x80]);
    assert_eq!(err_text(&body), "bad chunk 0 at byte 25: malformed input around byte 0 in tags");
}

#[test]
fn error_no_records() {
    let mut body = SPEC_BODY[..AT_NUM_RECORDS].to_vec();
    body.extend_from_slice(&[0, 0, 0, 0]);
    body.extend_from_slice(&[0; 16]);
    assert_eq!(err_text(&body), "bad chunk 0 at byte 68: numRecords is 0, must be at least 1");
    let body = with(&SPEC_BODY, AT_NUM_RECORDS, &[0x80, 0, 0, 0]);
    assert_eq!(err_text(&body), "bad chunk 0 at byte 68: numRecords is -2147483648, must be at least 1");
}

#[test]
fn error_absurd_record_count_is_not_allocated() {
    let body = with(&SPEC_BODY, AT_NUM_RECORDS, &[0x7f, 0xff, 0xff, 0xff]);
    assert_eq!(
        err_text(&body),
        "bad chunk 0 at byte 72: truncated record end offsets: needs 8589934588 bytes, 16 left"
    );
}

#[test]
fn error_absurd_data_length_is_not_allocated() {
    let body = with(&SPEC_BODY, AT_OFFSETS + 4, &[0x7f, 0xff, 0xff, 0xfe]);
    assert_eq!(err_text(&body), "bad chunk 0 at byte 80: truncated data: needs 2147483647 bytes, 8 left");
}

#[test]
fn error_decreasing_offsets() {
    let body = with(&SPEC_BODY, AT_OFFSETS, &[0, 0, 0, 7, 0, 0, 0, 3]);
    let err = parse_body(&body).unwrap_err();
    assert_eq!(err.kind, FrameErrorKind::OffsetDecreases { index: 1, offset: 3, previous: 7 });
    assert_eq!(err.to_string(), "bad chunk 0 at byte 76: record end offset #1 is 3, before the previous end 7");
    let body = with(&SPEC_BODY, AT_OFFSETS, &[0xff, 0xff, 0xff, 0xfe]);
    assert_eq!(err_text(&body), "bad chunk 0 at byte 72: record end offset #0 is -2, before the previous end -1");
}

#[test]
fn equal_offsets_are_empty_records() {
    let body = with(&SPEC_BODY, AT_OFFSETS, &[0, 0, 0, 3, 0, 0, 0, 3]);
    // Offsets [3, 3] end the data at byte 3: four data bytes, the rest is trailing.
    let post = parse_body(&body).unwrap();
    assert_eq!(post.trailing, 4);
    assert_eq!(post.chunks[0].records().collect::<Vec<_>>(), [&b"a=1\n"[..], b""]);
    let c = Chunk::new(3, "h", "", "s", "t", b"abc").with_record_ends([-1, -1, 1, 1, 2]);
    assert_eq!(c.records().collect::<Vec<_>>(), [&b""[..], b"", b"ab", b"", b"c"]);
    assert_eq!(parse_body(&encode_body([&c]).unwrap()).unwrap().chunks, vec![c]);
}

#[test]
fn error_in_a_later_chunk_names_it() {
    let mut body = encode_body([&spec_chunk(), &spec_chunk(), &spec_chunk()]).unwrap();
    body[4 + 84 * 2 + 3] = 7;
    assert_eq!(
        err_text(&body),
        "bad chunk 2 at byte 172: Protocol version mismatched, drop data.  source version: 7, collector version:1"
    );
}

// ---- encoder errors ------------------------------------------------------------------------------------------

#[test]
fn encoder_refuses_what_java_cannot_write() {
    let long = "é".repeat(40_000); // 80 000 encoded bytes
    let mut c = spec_chunk();
    c.stream_name = Cow::Owned(long);
    let mut out = vec![1, 2];
    let err = c.write_to(&mut out).unwrap_err();
    assert_eq!(err, EncodeError::StringTooLong { field: Field::StreamName, len: 80_000 });
    assert_eq!(err.to_string(), "encoded string too long: 80000 bytes (streamName)");
    assert_eq!(out, [1, 2], "nothing written on error");

    // 65535 encoded bytes is the most writeUTF can say.
    c.stream_name = Cow::Owned("x".repeat(65_535));
    assert_eq!(parse_body(&encode_body([&c]).unwrap()).unwrap().chunks, vec![c.clone()]);

    let c = spec_chunk().with_record_ends([3, 6]);
    assert_eq!(c.validate().unwrap_err().to_string(), "last record end offset 6 does not match 8 data bytes");
    let c = spec_chunk().with_record_ends(Vec::new());
    assert_eq!(c.validate().unwrap_err(), EncodeError::NoRecords);
    let c = spec_chunk().with_record_ends([5, 4, 7]);
    assert_eq!(c.validate().unwrap_err(), EncodeError::OffsetDecreases { index: 1, offset: 4, previous: 5 });

    let mut out = vec![9];
    assert!(write_body([&spec_chunk(), &c], &mut out).is_err());
    assert_eq!(out, [9], "a failed body leaves the buffer as it was");
}

// ---- replies and pages ---------------------------------------------------------------------------------------

#[test]
fn reply_lines() {
    assert_eq!(Ack { len: 8, seq_id: 8 }.to_string(), "ok: 8 bytes ending at offset 7");
    // seqID 0 (an empty first chunk) and Java's long wrap-around.
    assert_eq!(Ack { len: 0, seq_id: 0 }.to_string(), "ok: 0 bytes ending at offset -1");
    assert_eq!(Ack { len: 1, seq_id: i64::MIN }.to_string(), "ok: 1 bytes ending at offset 9223372036854775807");
    let mut out = String::from("x");
    write_reply_body([Ack { len: 2, seq_id: 10 }, Ack { len: 3, seq_id: 13 }], &mut out);
    assert_eq!(out, "xok: 2 bytes ending at offset 9\nok: 3 bytes ending at offset 12\n");
    assert!(out[1..].lines().all(|l| l.starts_with(ACK_PREFIX)));
}

#[test]
fn collector_pages() {
    assert_eq!(COMMIT_FAILED_BODY, "Commit failed");
    assert_eq!(ACKS_PAGE, "<html><body><h2>Commit status</h2><ul>\n</ul></body></html>\n");
    assert_eq!(SERVLET_RUNNING_PAGE, "<html><body><h2>Chukwa servlet running</h2>\n</body></html>\n");
    let stats = PingStats {
        window_start_ms: 1_466_380_800_000,
        now_ms: 1_466_380_801_234,
        posts_in_window: 3,
        chunks_in_window: 12,
        lifetime_chunks: 99,
    };
    assert_eq!(
        ping_body(&stats),
        "Date:1466380800000\nNow:1466380801234\nnumberHTTPConnection in time window:3\n\
         numberchunks in time window:12\nlifetimechunks:99\n"
    );
}

#[test]
fn compression_sniffing() {
    assert_eq!(sniff_compression(&[0x78, 0x9c, 1]), Compression::Zlib);
    assert_eq!(sniff_compression(&[0x78, 0x01]), Compression::Zlib);
    assert_eq!(sniff_compression(&[0x78, 0xda]), Compression::Zlib);
    assert_eq!(sniff_compression(&[0x78, 0x9d]), Compression::None);
    assert_eq!(sniff_compression(&[0x1f, 0x8b, 8]), Compression::Gzip);
    assert_eq!(sniff_compression(&SPEC_BODY), Compression::None);
    assert_eq!(sniff_compression(&[0x78]), Compression::None);
    assert_eq!(sniff_compression(&[]), Compression::None);
}

#[test]
fn newline_unescaping() {
    assert!(matches!(unescape_newlines(b"plain\n"), Cow::Borrowed(_)));
    assert_eq!(&*unescape_newlines(b"a\x04\nb\x04\x04\nc\x04"), b"a\nb\x04\nc\x04");
}

#[test]
fn hand_built_offsets_never_panic_records() {
    let c = Chunk::new(3, "h", "", "s", "t", b"abc").with_record_ends([10, 1, -5]);
    assert_eq!(c.records().collect::<Vec<_>>(), [&b"abc"[..], b"", b""]);
    assert_eq!(c.records().len(), 3);
}

// ---- property tests ------------------------------------------------------------------------------------------

/// Strings with the characters modified UTF-8 treats specially.
fn java_string() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            4 => "[ -~]{0,4}",
            1 => Just("\0".to_string()),
            1 => Just("😀".to_string()),
            1 => Just("é€".to_string()),
            1 => any::<char>().prop_map(String::from),
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

#[derive(Debug, Clone)]
struct OwnedChunk {
    seq_id: i64,
    strings: [String; 5],
    data: Vec<u8>,
    ends: Vec<i32>,
}

impl OwnedChunk {
    fn chunk(&self) -> Chunk<'_> {
        let [source, tags, stream_name, data_type, debugging_info] = &self.strings;
        Chunk {
            seq_id: self.seq_id,
            source: source.into(),
            tags: tags.into(),
            stream_name: stream_name.into(),
            data_type: data_type.into(),
            debugging_info: debugging_info.into(),
            record_ends: self.ends.clone().into(),
            data: &self.data,
        }
    }
}

/// A chunk with arbitrary strings, data and record split (including empty records and the empty chunk).
fn owned_chunk() -> impl Strategy<Value = OwnedChunk> {
    (
        any::<i64>(),
        [java_string(), java_string(), java_string(), java_string(), java_string()],
        proptest::collection::vec(any::<u8>(), 0..200),
        proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    )
        .prop_map(|(seq_id, strings, data, cuts)| {
            let mut cuts: Vec<i32> = cuts.iter().map(|ix| ix.index(data.len() + 1) as i32 - 1).collect();
            cuts.push(data.len() as i32 - 1);
            cuts.sort_unstable();
            OwnedChunk { seq_id, strings, data, ends: cuts }
        })
}

proptest! {
    #[test]
    fn round_trip(chunks in proptest::collection::vec(owned_chunk(), 0..5)) {
        let built: Vec<Chunk<'_>> = chunks.iter().map(OwnedChunk::chunk).collect();
        let body = encode_body(&built).unwrap();
        prop_assert_eq!(body.len(), 4 + built.iter().map(Chunk::encoded_len).sum::<usize>());
        let post = parse_body(&body).unwrap();
        prop_assert_eq!(post.trailing, 0);
        prop_assert_eq!(&post.chunks, &built);
        for (parsed, owned) in post.chunks.iter().zip(&chunks) {
            let records: Vec<u8> = parsed.records().flatten().copied().collect();
            prop_assert_eq!(&records, &owned.data, "records tile the data");
            prop_assert_eq!(parsed.records().count(), owned.ends.len());
        }
        prop_assert_eq!(encode_body(&post.chunks).unwrap(), body);
    }

    #[test]
    fn never_panics_on_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_body(&body);
        let _ = parse_chunk(&body);
    }

    #[test]
    fn never_panics_on_arbitrary_bytes_after_a_small_count(n in 0u8..4, rest in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut body = vec![0, 0, 0, n];
        body.extend_from_slice(&[0, 0, 0, 1]);
        body.extend_from_slice(&rest);
        if let Ok(post) = parse_body(&body) {
            for c in &post.chunks {
                let _ = c.records().count();
                let _ = reply_body([c.ack()]);
            }
        }
    }

    #[test]
    fn never_panics_on_mutated_bodies(
        chunks in proptest::collection::vec(owned_chunk(), 1..4),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let built: Vec<Chunk<'_>> = chunks.iter().map(OwnedChunk::chunk).collect();
        let mut body = encode_body(&built).unwrap();
        for (at, byte, op) in edits {
            let i = at.index(body.len());
            match op {
                0 => body[i] = byte,
                1 => body.insert(i, byte),
                _ => { body.remove(i); }
            }
        }
        if let Ok(post) = parse_body(&body) {
            for c in &post.chunks {
                // Whatever parsed is itself encodable and parses back the same.
                let again = encode_body([c]).unwrap();
                prop_assert_eq!(&parse_body(&again).unwrap().chunks[0], c);
                prop_assert_eq!(c.records().map(<[u8]>::len).sum::<usize>(), c.len());
            }
        }
        let _ = parse_body(&body[..cut.index(body.len() + 1)]);
    }
}
