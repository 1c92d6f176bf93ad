//! Reading an input: a file (`.gz` inflated) or stdin, and for the store path, blocks of whole lines.
use std::io::{BufReader, Read};
use std::path::Path;

use indicatif::ProgressBar;

use super::ImportError;

/// Bytes per block handed to a parser.
pub(super) const BLOCK_BYTES: usize = 1 << 20;

/// Opens a path for reading: `-` is stdin, `*.gz` is inflated (multi-member gzip too). Not buffered: the store
/// path reads straight into its blocks; the daemon path adds a `BufReader`.
pub(super) fn open(path: &str, bar: &ProgressBar) -> Result<Box<dyn Read + Send>, ImportError> {
    if path == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    let file = std::fs::File::open(path).map_err(|source| ImportError::Read { path: path.to_string(), source })?;
    let counted = bar.wrap_read(file);
    Ok(if Path::new(path).extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, counted)))
    } else {
        Box::new(counted)
    })
}

/// A block of whole lines: the first `len` bytes of `buf` (the rest is buffer space, kept initialized so that a
/// recycled buffer is read into without clearing it first).
pub(super) struct Block {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
}

/// Reads blocks of whole lines straight into buffers the parsers hand back (`free`), and deals them round-robin
/// to the parsers; stops early when `stop` is set.
pub(super) fn read_blocks(
    mut reader: Box<dyn Read + Send>,
    path: &str,
    to_parsers: Vec<std::sync::mpsc::SyncSender<Block>>,
    free: std::sync::mpsc::Receiver<Vec<u8>>,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(), ImportError> {
    let fail = |source| ImportError::Read { path: path.to_string(), source };
    // The partial last line of the previous block.
    let mut carry: Vec<u8> = Vec::new();
    let mut next = 0usize;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let mut buf = free.try_recv().unwrap_or_default();
        if buf.len() < BLOCK_BYTES.max(2 * carry.len()) {
            buf.resize(BLOCK_BYTES.max(2 * carry.len()), 0);
        }
        buf[..carry.len()].copy_from_slice(&carry);
        let mut filled = carry.len();
        carry.clear();
        // Fill the buffer; a read of 0 is the end of the input.
        let mut eof = false;
        while filled < buf.len() {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(e)),
            }
        }
        let len = if eof {
            filled
        } else {
            // Keep the partial last line for the next block (a line longer than a block grows the next buffer).
            match buf[..filled].iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => 0,
            }
        };
        carry.extend_from_slice(&buf[len..filled]);
        if len > 0 && to_parsers[next % to_parsers.len()].send(Block { buf, len }).is_err() {
            return Ok(());
        }
        if len > 0 {
            next += 1;
        }
        if eof {
            return Ok(());
        }
    }
}
