//! Parsing a block of lines into points of numbered series, one parser per thread. A line is accepted exactly
//! when the telnet port would accept `put <line>` ([`telnet::parse_put`]); lines of a series the parser has met
//! before take a shorter path that parses only their timestamp and value.
use std::collections::HashMap;

use rtsd_protocol::codec::Value;
use rtsd_protocol::point::Rules;
use rtsd_protocol::telnet::{self, Words};

use crate::store::{AddError, SeriesKey, Store};

/// Series remembered at most per parser; past this, new series are resolved every time (a file with more
/// series than this is rare).
const MAX_SERIES: usize = 1 << 22;

/// One parsed block.
pub(super) struct Parsed {
    /// Lines in the block (all of them, unless `stopped`).
    pub(super) lines: u64,
    /// Series this parser numbered for the first time in this block (numbers are per parser).
    pub(super) new_series: Vec<SeriesKey>,
    pub(super) points: Vec<(u32, i64, Value)>,
    /// (line within the block, 1-based; message).
    pub(super) errors: Vec<(u64, String)>,
    /// The parser stopped at its first bad line (no `--skip-errors`): nothing after it is in `points`.
    pub(super) stopped: bool,
    /// A storage failure while resolving UIDs: the import cannot go on.
    pub(super) fatal: Option<String>,
}

/// What one parser thread remembers: its series by their words. A line names its series by a metric word and
/// its tag words as written; both are numbered separately (few distinct of each, so those maps stay in cache),
/// and each tag-words number keeps its series as a short list sorted by metric number. Lines sharing their tags
/// come together in every file we know (a host's metrics in one round, or a whole series in an export sorted by
/// series), so that list is in cache when the next line looks: one probe of a large map per line, which missed
/// the cache on nearly every line, is what this replaces (`perf`: two thirds of the parsers' time).
pub(super) struct Parser<'a> {
    store: &'a Store,
    rules: &'a Rules,
    skip_errors: bool,
    metrics: Words2Id,
    tags: Words2Id,
    /// Per tag-words number: (metric number, the series' number in this parser), sorted by metric number.
    series: Vec<Vec<(u32, u32)>>,
    /// Where [`Parser::known`] found the last line's series: (tag-words number, index in its list).
    last: (u32, usize),
    /// Series remembered (at most [`MAX_SERIES`]).
    remembered: usize,
    /// By metric-word number: a series of that metric; by tag-words number: a series with those tags.
    metric_keys: Vec<SeriesKey>,
    tag_keys: Vec<SeriesKey>,
    numbered: u32,
}

/// Numbers for the distinct words of one kind, with the last one looked up remembered.
struct Words2Id {
    ids: HashMap<Vec<u8>, u32, FastHash>,
    /// The words of each number.
    words: Vec<Vec<u8>>,
    last: Vec<u8>,
    last_id: Option<u32>,
}

impl Words2Id {
    fn new() -> Words2Id {
        Words2Id { ids: HashMap::with_hasher(FastHash), words: Vec::new(), last: Vec::new(), last_id: None }
    }

    fn get(&mut self, words: &[u8]) -> Option<u32> {
        if self.last_id.is_some() && self.last.as_slice() == words {
            return self.last_id;
        }
        let id = *self.ids.get(words)?;
        self.last.clear();
        self.last.extend_from_slice(words);
        self.last_id = Some(id);
        Some(id)
    }

    /// The words' number, numbering them if new; `None` once [`MAX_SERIES`] words are numbered.
    fn get_or_insert(&mut self, words: &[u8]) -> Option<u32> {
        if let Some(id) = self.get(words) {
            return Some(id);
        }
        if self.ids.len() >= MAX_SERIES {
            return None;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(words.to_vec(), id);
        self.words.push(words.to_vec());
        Some(id)
    }
}

impl<'a> Parser<'a> {
    pub(super) fn new(store: &'a Store, rules: &'a Rules, skip_errors: bool) -> Parser<'a> {
        Parser {
            store,
            rules,
            skip_errors,
            metrics: Words2Id::new(),
            tags: Words2Id::new(),
            series: Vec::new(),
            last: (u32::MAX, 0),
            remembered: 0,
            metric_keys: Vec::new(),
            tag_keys: Vec::new(),
            numbered: 0,
        }
    }

    pub(super) fn parse_block(&mut self, block: &[u8]) -> Parsed {
        let mut out = Parsed {
            lines: 0,
            new_series: Vec::new(),
            points: Vec::with_capacity(block.len() / 48),
            errors: Vec::new(),
            stopped: false,
            fatal: None,
        };
        // The pieces `block.split(|&b| b == b'\n')` gives (the last one empty when the block ends with a
        // newline), found with a vectorized search.
        let mut rest = Some(block);
        while let Some(piece) = rest {
            let raw = match memchr::memchr(b'\n', piece) {
                Some(i) => {
                    rest = Some(&piece[i + 1..]);
                    &piece[..i]
                }
                None => {
                    rest = None;
                    piece
                }
            };
            out.lines += 1;
            let text = raw.strip_suffix(b"\r").unwrap_or(raw);
            if text.is_empty() {
                continue;
            }
            if let Err(message) = self.parse_line(text, &mut out) {
                out.errors.push((out.lines, message));
                if !self.skip_errors || out.fatal.is_some() {
                    out.stopped = true;
                    break;
                }
            }
        }
        // `split` yields an empty piece after the block's final newline: not a line.
        if block.ends_with(b"\n") && !out.stopped {
            out.lines -= 1;
        }
        out
    }

    fn parse_line(&mut self, text: &[u8], out: &mut Parsed) -> Result<(), String> {
        // Only the timestamp and value are parsed (no word splitting) for a line of a known series, and for a new
        // series whose metric word and tag words were both met (and checked) in other lines: its key is made of
        // theirs, without looking up UIDs (a file names each of its series first in a line like this, once per
        // parser).
        if let Some((metric, timestamp, value, tags)) = split_head(text) {
            let seen = match self.known(metric, tags) {
                Some(i) => Some(Seen::Series(i)),
                None => self.metrics.get(metric).zip(self.tags.get(tags)).map(|(m, t)| Seen::Words(m, t)),
            };
            if let Some(seen) = seen {
                if let Some((timestamp, value)) =
                    telnet::parse_put_known_series(&[b"put", metric, timestamp, value, tags])
                {
                    match seen {
                        Seen::Series(i) => out.points.push((i, timestamp, value)),
                        Seen::Words(m, t) => {
                            let (metric_of, tags_of) = (&self.metric_keys[m as usize], &self.tag_keys[t as usize]);
                            let series = self.store.series_key_crossed(metric_of, tags_of);
                            self.add_new_series(text, series, timestamp, value, out);
                        }
                    }
                    return Ok(());
                }
            }
        }
        let mut words: Words<'_> = Words::new();
        words.push(b"put");
        words.extend(telnet::split_words(text));
        let point = telnet::parse_put(&words, self.rules).map_err(|e| e.to_string())?;
        match self.store.series_key(&point) {
            Ok(series) => {
                self.add_new_series(text, series, point.timestamp, point.value, out);
                Ok(())
            }
            Err(AddError::Put(e)) => Err(e.to_string()),
            Err(AddError::Internal(e)) => {
                out.fatal = Some(e.clone());
                Err(format!("not written: {e}"))
            }
            Err(AddError::Storage(e)) => {
                let e = e.to_string();
                out.fatal = Some(e.clone());
                Err(format!("not written: {e}"))
            }
        }
    }

    /// Numbers a series met for the first time in `text` and adds the line's point.
    fn add_new_series(&mut self, text: &[u8], series: SeriesKey, timestamp: i64, value: Value, out: &mut Parsed) {
        let i = self.numbered;
        self.numbered += 1;
        // A line that passed has at least four words, so it splits.
        if let Some((metric, _, _, tags)) = split_head(text) {
            self.remember(metric, tags, &series, i);
        }
        out.new_series.push(series);
        out.points.push((i, timestamp, value));
    }

    /// The number of the series a line's metric and tag words name, if this parser has seen them.
    fn known(&mut self, metric: &[u8], tags: &[u8]) -> Option<u32> {
        let t = self.tags.get(tags)?;
        let list = self.series.get(t as usize)?;
        // Lines sharing their tags usually name their metrics in the same order every time (a host's metrics
        // in a round): try the entry after the one found last before hashing the metric word.
        if self.last.0 == t {
            if let Some(&(m, series)) = list.get(self.last.1 + 1) {
                if self.metrics.words[m as usize] == metric {
                    self.last.1 += 1;
                    return Some(series);
                }
            }
        }
        let m = self.metrics.get(metric)?;
        let i = list.binary_search_by_key(&m, |&(metric, _)| metric).ok()?;
        self.last = (t, i);
        Some(list[i].1)
    }

    fn remember(&mut self, metric: &[u8], tags: &[u8], key: &SeriesKey, series: u32) {
        if self.remembered >= MAX_SERIES {
            return;
        }
        let (Some(m), Some(t)) = (self.metrics.get_or_insert(metric), self.tags.get_or_insert(tags)) else {
            return;
        };
        // The first series of each metric word and of each tag words keeps their UIDs for the words' other series.
        if m as usize == self.metric_keys.len() {
            self.metric_keys.push(key.clone());
        }
        if t as usize == self.tag_keys.len() {
            self.tag_keys.push(key.clone());
        }
        if self.series.len() <= t as usize {
            self.series.resize_with(t as usize + 1, Vec::new);
        }
        let list = &mut self.series[t as usize];
        if let Err(i) = list.binary_search_by_key(&m, |&(metric, _)| metric) {
            list.insert(i, (m, series));
            self.remembered += 1;
        }
    }
}

/// What a parser knows of a line's words: the series itself (its number), or its metric word and its tag words
/// apart (their numbers), each from other series.
enum Seen {
    Series(u32),
    Words(u32, u32),
}

/// (metric, timestamp, value, tag words as written) of a line.
type Head<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a [u8]);

/// A line's metric, timestamp and value words and the rest (its tag words, as written), split at the first three
/// spaces; `None` with fewer than four words.
fn split_head(text: &[u8]) -> Option<Head<'_>> {
    let space = |from: usize| memchr::memchr(b' ', &text[from..]).map(|i| from + i);
    let s1 = space(0)?;
    let s2 = space(s1 + 1)?;
    let s3 = space(s2 + 1)?;
    Some((&text[..s1], &text[s1 + 1..s2], &text[s2 + 1..s3], &text[s3 + 1..]))
}

/// A fast hash for the per-parser maps (keys come from the file being imported, not from a network peer).
#[derive(Clone, Copy, Default)]
struct FastHash;

impl std::hash::BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let word = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
