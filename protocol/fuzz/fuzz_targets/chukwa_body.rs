//! Feeds arbitrary bytes through the Chukwa POST body parser (and the count-less chunk stream reader): they must
//! never panic, and whatever parses must encode back to a body that parses to the same chunks.
//! Run: `cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run chukwa_body`
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtsd_protocol::chukwa::{encode_body, parse_body, parse_chunk, reply_body, Chunk};

fuzz_target!(|data: &[u8]| {
    if let Ok(post) = parse_body(data) {
        let _ = reply_body(post.chunks.iter().map(Chunk::ack));
        for chunk in &post.chunks {
            assert_eq!(chunk.records().map(<[u8]>::len).sum::<usize>(), chunk.len());
            let _ = chunk.stream_key();
        }
        // Strings of raw 00 bytes grow when re-encoded (00 -> C0 80), so re-encoding may refuse a long one.
        if let Ok(again) = encode_body(&post.chunks) {
            let reparsed = parse_body(&again).expect("an encoded body parses");
            assert_eq!(reparsed.chunks, post.chunks);
        }
    }
    let mut rest = data;
    while let Ok((_, after)) = parse_chunk(rest) {
        if after.len() == rest.len() {
            break;
        }
        rest = after;
    }
});
