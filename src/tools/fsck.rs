//! `rtsd fsck`: OpenTSDB's data-table check (`tsdb fsck`) on rtsd's rows, with OpenTSDB's flags:
//! `--full-scan` or a command-line query to choose rows; `--fix` to repair, refined by `--resolve-duplicates`,
//! `--last-write-wins`, `--delete-orphans`, `--delete-unknown-columns`, `--delete-bad-values`,
//! `--delete-bad-rows`, `--delete-bad-compacts`, or `--fix-all` for all of them.
//!
//! What it finds, per row (OpenTSDB's categories and messages):
//! * invalid row keys (wrong length for the configured UID widths and salt);
//! * orphans: a metric, tag key or tag value UID in the key that has no name;
//! * unknown columns: qualifiers shorter than 2 bytes, or odd lengths other than 3 and 5;
//! * compacted columns that can't be split (or whose last byte isn't 0/1), and ones out of order;
//! * duplicate data points: several cells for the same instant (rtsd keeps them when
//!   `tsd.storage.fix_duplicates` is off, as OpenTSDB does);
//! * bad values: integers whose length disagrees with their qualifier, floats on other than 4 or 8 bytes,
//!   legacy 8-byte floats flagged as 4 bytes; 8-byte integers that fit fewer bytes are counted for VLE.
//!
//! Repairs rewrite the whole row in one atomic write (RocksDB holds an HBase row as one value): the surviving
//! points as one compacted column sorted by time, other columns (annotations, appends) kept. rtsd keeps no
//! per-cell write times, so "oldest" and "latest" among duplicates follow the order of the columns in the
//! stored row. A row with an error that was found but not marked for repair is not rewritten (OpenTSDB: "One or
//! more errors found in row that were not marked for repair"), except that columns and rows marked for
//! deletion are still removed.
use std::collections::BTreeMap;
use std::io::Write;

use rtsd_protocol::codec::{self, Column, FLAG_FLOAT, LENGTH_MASK};
use rtsd_protocol::javafmt;
use rtsd_protocol::point::UidKind;

use crate::scan::{java_date, CliQuery, Names};
use crate::store::{Store, StoreError};

/// What to repair (OpenTSDB's `FsckOptions`).
#[derive(Debug, Clone, Copy, Default)]
pub struct FsckOptions {
    pub fix: bool,
    pub resolve_duplicates: bool,
    pub last_write_wins: bool,
    pub delete_orphans: bool,
    pub delete_unknown_columns: bool,
    pub delete_bad_values: bool,
    pub delete_bad_rows: bool,
    pub delete_bad_compacts: bool,
}

impl FsckOptions {
    /// `--fix-all`: fix with every repair enabled.
    pub fn fix_all(last_write_wins: bool) -> FsckOptions {
        FsckOptions {
            fix: true,
            resolve_duplicates: true,
            last_write_wins,
            delete_orphans: true,
            delete_unknown_columns: true,
            delete_bad_values: true,
            delete_bad_rows: true,
            delete_bad_compacts: true,
        }
    }
}

/// OpenTSDB's fsck counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckCounts {
    pub kvs_processed: u64,
    pub rows_processed: u64,
    pub valid_datapoints: u64,
    pub annotations: u64,
    pub append_dps: u64,
    pub bad_key: u64,
    pub bad_key_fixed: u64,
    pub duplicates: u64,
    pub duplicates_fixed: u64,
    pub orphans: u64,
    pub orphans_fixed: u64,
    pub future: u64,
    pub unknown: u64,
    pub unknown_fixed: u64,
    pub bad_values: u64,
    pub bad_values_deleted: u64,
    pub value_encoding: u64,
    pub value_encoding_fixed: u64,
    pub fixable_compacted_columns: u64,
    pub bad_compacted_columns: u64,
    pub bad_compacted_columns_deleted: u64,
    pub vle: u64,
    pub vle_bytes: u64,
    pub vle_fixed: u64,
}

impl FsckCounts {
    pub fn total_errors(&self) -> u64 {
        self.bad_key
            + self.duplicates
            + self.orphans
            + self.unknown
            + self.bad_values
            + self.bad_compacted_columns
            + self.fixable_compacted_columns
            + self.value_encoding
    }

    pub fn total_fixed(&self) -> u64 {
        self.bad_key_fixed
            + self.duplicates_fixed
            + self.orphans_fixed
            + self.unknown_fixed
            + self.value_encoding_fixed
            + self.bad_values_deleted
            + self.bad_compacted_columns_deleted
    }

    /// The closing report, OpenTSDB's lines in its order.
    pub fn report(&self) -> String {
        let lines = [
            ("Key Values Processed", self.kvs_processed),
            ("Rows Processed", self.rows_processed),
            ("Valid Datapoints", self.valid_datapoints),
            ("Annotations", self.annotations),
            ("Invalid Row Keys Found", self.bad_key),
            ("Invalid Rows Deleted", self.bad_key_fixed),
            ("Duplicate Datapoints", self.duplicates),
            ("Duplicate Datapoints Resolved", self.duplicates_fixed),
            ("Orphaned UID Rows", self.orphans),
            ("Orphaned UID Rows Deleted", self.orphans_fixed),
            ("Possible Future Objects", self.future),
            ("Unknown Objects", self.unknown),
            ("Unknown Objects Deleted", self.unknown_fixed),
            ("Unparseable Datapoint Values", self.bad_values),
            ("Unparseable Datapoint Values Deleted", self.bad_values_deleted),
            ("Improperly Encoded Floating Point Values", self.value_encoding),
            ("Improperly Encoded Floating Point Values Fixed", self.value_encoding_fixed),
            ("Unparseable Compacted Columns", self.bad_compacted_columns),
            ("Unparseable Compacted Columns Deleted", self.bad_compacted_columns_deleted),
            ("Datapoints Qualified for VLE ", self.vle),
            ("Datapoints Compressed with VLE", self.vle_fixed),
            ("Bytes Saved with VLE", self.vle_bytes),
            ("Total Errors", self.total_errors()),
            ("Total Correctable Errors", self.total_errors()),
            ("Total Errors Fixed", self.total_fixed()),
        ];
        let mut out = String::new();
        for (label, n) in lines {
            out.push_str(&format!("{label}: {n}\n"));
        }
        out
    }
}

/// A data point of the row being checked.
struct Dp {
    /// Index of the column it came from (write-order proxy).
    column: usize,
    compacted: bool,
    qualifier: Vec<u8>,
    value: Vec<u8>,
}

/// What the checks of one row decided about its columns.
struct RowFixes {
    /// Columns to delete.
    drop: Vec<bool>,
    /// Columns of data points (replaced by one compacted column when the row is rewritten).
    data: Vec<bool>,
    /// Whether the row needs rewriting (acted on with --fix).
    changed: bool,
    /// Whether some error found stays unrepaired.
    unrepaired: bool,
}

/// Runs the check over the rows of `query` (or every row when `None`), writing findings to `out`; returns
/// the counters. Rewrites and deletes are applied in atomic batches as the scan goes.
pub fn run(
    store: &Store,
    query: Option<&CliQuery>,
    now_ms: i64,
    options: FsckOptions,
    out: &mut impl Write,
) -> Result<FsckCounts, String> {
    let mut checker =
        Checker { store, options, counts: FsckCounts::default(), names: Names::new(store), pending: Vec::new() };
    let bar = super::progress(if query.is_none() { store.estimated_rows() } else { 0 }, "rows");
    let mut failure: Option<String> = None;
    let mut visit = |key: &[u8], value: &[u8], checker: &mut Checker<'_>| -> Result<bool, StoreError> {
        let mut msgs = String::new();
        checker.check_row(key, value, &mut msgs)?;
        if !msgs.is_empty() {
            bar.suspend(|| {
                if let Err(e) = out.write_all(msgs.as_bytes()) {
                    failure = Some(e.to_string());
                }
            });
        }
        bar.inc(1);
        if checker.pending.len() >= 1024 {
            checker.flush()?;
        }
        Ok(failure.is_none())
    };
    match query {
        None => store.for_each_raw_row(|k, v| visit(k, v, &mut checker)).map_err(|e| e.to_string())?,
        Some(q) => {
            let end = q.end_or(now_ms);
            let start_hour = codec::base_time(q.start_ms.max(0));
            let end_hour = codec::base_time(end.clamp(0, codec::MAX_SECONDS * 1000));
            for sub in &q.queries {
                let Some(metric) = store.uids().get(UidKind::Metric, &sub.metric).map_err(|e| e.to_string())? else {
                    return Err(format!("No such name for 'metrics': '{}'", sub.metric));
                };
                let filter = crate::scan::RowFilter::new(store, &sub.tags).map_err(|e| e.to_string())?;
                let mut names = Names::new(store);
                store
                    .for_each_row(metric.as_bytes(), start_hour, end_hour, |row| {
                        if !filter.matches(&mut names, &row.tags)? {
                            return Ok(true);
                        }
                        visit(row.key, row.value, &mut checker)
                    })
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    checker.flush().map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    if let Some(e) = failure {
        return Err(format!("write failed: {e}"));
    }
    Ok(checker.counts)
}

struct Checker<'a> {
    store: &'a Store,
    options: FsckOptions,
    counts: FsckCounts,
    names: Names<'a>,
    /// Row rewrites (`Some`) and deletes (`None`) not yet written.
    pending: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// How a cell prints in messages (OpenTSDB prints the HBase KeyValue).
fn kv(key: &[u8], q: &[u8], v: &[u8]) -> String {
    format!("key={} qualifier={} value={}", codec::uid_to_string(key), javafmt::byte_array(q), javafmt::byte_array(v))
}

impl Checker<'_> {
    fn flush(&mut self) -> Result<(), StoreError> {
        let rows = std::mem::take(&mut self.pending);
        self.store.rewrite_rows(&rows)
    }

    fn check_row(&mut self, key: &[u8], value: &[u8], m: &mut String) -> Result<(), StoreError> {
        // A packed row is checked (and rewritten, if fixed) as the OpenTSDB cells it stands for. A packed column
        // that cannot be unpacked stays as stored and is found as an unknown column (its qualifier is empty).
        let expanded = codec::expand_row(value).unwrap_or(std::borrow::Cow::Borrowed(value));
        let value: &[u8] = &expanded;
        self.counts.rows_processed += 1;
        let Some(row) = self.store.decode_row(key, value) else {
            self.bad_key(key, m);
            return Ok(());
        };
        let global = row.metric.iter().all(|&b| b == 0) && row.tags.is_empty();
        if !global && self.orphan(key, &row, m)? {
            return Ok(());
        }
        let o = self.options;
        let (cols, truncated) = self.columns(key, value, m);
        let mut fixes = RowFixes {
            drop: vec![false; cols.len()],
            data: vec![false; cols.len()],
            changed: truncated && o.fix && o.delete_bad_compacts,
            unrepaired: false,
        };
        if fixes.changed {
            self.counts.bad_compacted_columns_deleted += 1;
        }
        let mut dps: BTreeMap<i64, Vec<Dp>> = BTreeMap::new();
        for (i, c) in cols.iter().enumerate() {
            self.check_column(key, i64::from(row.base_time) * 1000, i, c, &mut fixes, &mut dps, m);
        }
        let kept = self.check_points(key, dps, &mut fixes, m);
        if o.fix && fixes.changed {
            self.rewrite(key, value, &cols, &fixes, &kept, m);
        }
        Ok(())
    }

    /// A key that is no row key of this layout.
    fn bad_key(&mut self, key: &[u8], m: &mut String) {
        use std::fmt::Write as _;
        self.counts.bad_key += 1;
        let _ = writeln!(m, "Invalid row key.\n\tKey: {}", codec::uid_to_string(key));
        if self.options.fix && self.options.delete_bad_rows {
            self.pending.push((key.to_vec(), None));
            self.counts.bad_key_fixed += 1;
        }
    }

    /// Whether a UID of the key has no name (an orphan row; deleted with --delete-orphans).
    fn orphan(&mut self, key: &[u8], row: &crate::store::RowRef<'_>, m: &mut String) -> Result<bool, StoreError> {
        use std::fmt::Write as _;
        let mut orphan = None;
        if self.names.lookup(UidKind::Metric, row.metric)?.is_none() {
            orphan = Some(("Unable to resolve the metric from the row key.", UidKind::Metric, row.metric));
        } else {
            for (k, v) in &row.tags {
                if self.names.lookup(UidKind::TagKey, k)?.is_none() {
                    orphan = Some(("Unable to resolve the a tagk or tagv from the row key.", UidKind::TagKey, k));
                    break;
                }
                if self.names.lookup(UidKind::TagValue, v)?.is_none() {
                    orphan = Some(("Unable to resolve the a tagk or tagv from the row key.", UidKind::TagValue, v));
                    break;
                }
            }
        }
        let Some((what, kind, uid)) = orphan else { return Ok(false) };
        self.counts.orphans += 1;
        let _ = writeln!(
            m,
            "{what}\n\tKey: {}\n\tNo such unique ID for '{kind}': {}",
            codec::uid_to_string(key),
            javafmt::byte_array(uid)
        );
        if self.options.fix && self.options.delete_orphans {
            self.pending.push((key.to_vec(), None));
            self.counts.orphans_fixed += 1;
        }
        Ok(true)
    }

    /// The columns as stored, and whether a framing error ended the readable part.
    fn columns<'v>(&mut self, key: &[u8], value: &'v [u8], m: &mut String) -> (Vec<Column<'v>>, bool) {
        use std::fmt::Write as _;
        let mut cols: Vec<Column<'_>> = Vec::new();
        let mut truncated = false;
        for c in codec::columns(value) {
            match c {
                Ok(c) => cols.push(c),
                Err(e) => {
                    truncated = true;
                    self.counts.bad_compacted_columns += 1;
                    let _ = writeln!(
                        m,
                        "Corrupted row encoding after {} columns: {e}\n\tKey: {}",
                        cols.len(),
                        codec::uid_to_string(key)
                    );
                }
            }
        }
        (cols, truncated)
    }

    /// Column `i`: an unknown or future object, an annotation or append, or data points (into `dps`, by time;
    /// `base_ms` is the row's base time).
    #[allow(clippy::too_many_arguments)]
    fn check_column(
        &mut self,
        key: &[u8],
        base_ms: i64,
        i: usize,
        c: &Column<'_>,
        fixes: &mut RowFixes,
        dps: &mut BTreeMap<i64, Vec<Dp>>,
        m: &mut String,
    ) {
        use std::fmt::Write as _;
        let o = self.options;
        self.counts.kvs_processed += 1;
        let (q, v) = (c.qualifier, c.value);
        if q.len() < 2 {
            self.counts.unknown += 1;
            let _ = writeln!(m, "Invalid qualifier, must be on 2 bytes or more.\n\t{}", kv(key, q, v));
            if o.fix && o.delete_unknown_columns {
                fixes.drop[i] = true;
                fixes.changed = true;
                self.counts.unknown_fixed += 1;
            }
            return;
        }
        if q.len() % 2 == 1 {
            if q.len() != 3 && q.len() != 5 {
                self.counts.unknown += 1;
                let _ =
                    writeln!(m, "Unknown qualifier, must be 2, 3, 5 or an even number of bytes.\n\t{}", kv(key, q, v));
                if o.fix && o.delete_unknown_columns {
                    fixes.drop[i] = true;
                    fixes.changed = true;
                    self.counts.unknown_fixed += 1;
                }
            } else if q[0] == rtsd_protocol::annotation::PREFIX {
                self.counts.annotations += 1;
            } else if q[0] == codec::APPEND_PREFIX {
                self.counts.append_dps += 1;
            } else {
                self.counts.future += 1;
                let _ = writeln!(m, "Found an object possibly from a future version of OpenTSDB\n\t{}", kv(key, q, v));
            }
            return;
        }
        fixes.data[i] = true;
        let single = q.len() == 2 || (q.len() == 4 && codec::is_ms_qualifier(q[0]));
        if single {
            let off = codec::qualifier_offset_ms(q, 0).map(i64::from).unwrap_or(0);
            dps.entry(base_ms + off).or_default().push(Dp {
                column: i,
                compacted: false,
                qualifier: q.to_vec(),
                value: v.to_vec(),
            });
        } else if !self.check_compacted(key, base_ms, i, q, v, fixes, dps, m) {
            // Unparseable: deleted with --delete-bad-compacts, else kept as it is.
            fixes.data[i] = false;
            if o.fix && o.delete_bad_compacts {
                fixes.drop[i] = true;
                fixes.changed = true;
                self.counts.bad_compacted_columns_deleted += 1;
            }
        }
    }

    /// A compacted column `i`: its cells into `dps` (reordered, with --fix, when they were out of order); false
    /// when it cannot be split into cells.
    #[allow(clippy::too_many_arguments)]
    fn check_compacted(
        &mut self,
        key: &[u8],
        base_ms: i64,
        i: usize,
        q: &[u8],
        v: &[u8],
        fixes: &mut RowFixes,
        dps: &mut BTreeMap<i64, Vec<Dp>>,
        m: &mut String,
    ) -> bool {
        use std::fmt::Write as _;
        let mut bad = |text: String| {
            self.counts.bad_compacted_columns += 1;
            let _ = writeln!(m, "{text}");
        };
        if v.last().is_none_or(|&b| b > codec::MS_MIXED_COMPACT) {
            bad(format!(
                "The last byte of a compacted should be 0 or 1. Either this value is corrupted or it was written by a \
                 future version of OpenTSDB.\n\t{}",
                kv(key, q, v)
            ));
            return false;
        }
        let cells = match codec::split_compacted(q, v) {
            Ok(cells) => cells,
            Err(e) => {
                bad(e.to_string());
                return false;
            }
        };
        let mut requalified = Vec::with_capacity(q.len());
        let mut sorted: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
        for (cq, cv) in cells {
            let off = codec::qualifier_offset_ms(&cq, 0).map(i64::from).unwrap_or(0);
            sorted.push((off, cq.to_vec(), cv.to_vec()));
        }
        sorted.sort_by_key(|c| c.0);
        for (off, cq, cv) in sorted {
            requalified.extend_from_slice(&cq);
            dps.entry(base_ms + off).or_default().push(Dp { column: i, compacted: true, qualifier: cq, value: cv });
        }
        if requalified != q {
            self.counts.fixable_compacted_columns += 1;
            let _ = writeln!(m, "Compacted column was out of order or requires a fixup: {}", kv(key, q, v));
            fixes.changed |= self.options.fix;
        }
        true
    }

    /// Per instant: duplicates, then the value of the point kept. Returns the cells kept.
    fn check_points(
        &mut self,
        key: &[u8],
        dps: BTreeMap<i64, Vec<Dp>>,
        fixes: &mut RowFixes,
        m: &mut String,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut kept: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (ts, mut list) in dps {
            if list.len() > 1 {
                self.duplicates(key, ts, &mut list, fixes, m);
            }
            self.counts.valid_datapoints += 1;
            let d = &list[0];
            match self.check_value(key, d, m) {
                ValueCheck::Ok => kept.push((d.qualifier.clone(), d.value.clone())),
                ValueCheck::Fixed(q, v) => {
                    kept.push((q, v));
                    fixes.changed = true;
                }
                ValueCheck::Delete => fixes.changed = true,
                ValueCheck::Unrepaired => {
                    fixes.unrepaired = true;
                    kept.push((d.qualifier.clone(), d.value.clone()));
                }
            }
        }
        kept
    }

    /// Several points at instant `ts`: reports them and leaves only the one kept (the oldest, or the latest with
    /// --last-write-wins) in `list`.
    fn duplicates(&mut self, key: &[u8], ts: i64, list: &mut Vec<Dp>, fixes: &mut RowFixes, m: &mut String) {
        use std::fmt::Write as _;
        let o = self.options;
        list.sort_by_key(|d| d.column);
        let n = list.len();
        let keep = if o.last_write_wins { n - 1 } else { 0 };
        let _ = write!(
            m,
            "More than one column had a value for the same timestamp: ({ts} - {})\n    row key: ({})\n",
            java_date(ts),
            codec::uid_to_string(key)
        );
        for (j, d) in list.iter().enumerate() {
            let note = match (j == keep, o.last_write_wins) {
                (true, true) => " <--- keep latest",
                (true, false) => " <--- keep oldest",
                (false, _) => "",
            };
            let shown = codec::Value::decode(d.qualifier.last().copied().unwrap_or(0) & 0x0F, &d.value)
                .map(crate::scan::import_value)
                .unwrap_or_else(|e| e.to_string());
            let _ = writeln!(
                m,
                "    column: ({})  compacted: ({})  qualifier: {} value: {shown}{note}",
                d.column,
                d.compacted,
                javafmt::byte_array(&d.qualifier)
            );
        }
        self.counts.duplicates += (n - 1) as u64;
        if o.fix && o.resolve_duplicates {
            self.counts.duplicates_fixed += (n - 1) as u64;
            fixes.changed = true;
        } else {
            fixes.unrepaired = true;
        }
        let d = list.swap_remove(keep);
        list.clear();
        list.push(d);
    }

    /// Queues the fixed row: the columns not marked for deletion, the data-point columns replaced by one
    /// compacted column unless some error in them stays unrepaired.
    fn rewrite(
        &mut self,
        key: &[u8],
        value: &[u8],
        cols: &[Column<'_>],
        fixes: &RowFixes,
        kept: &[(Vec<u8>, Vec<u8>)],
        m: &mut String,
    ) {
        use std::fmt::Write as _;
        if fixes.unrepaired {
            let _ = writeln!(
                m,
                "One or more errors found in row that were not marked for repair\n\tKey: {}",
                codec::uid_to_string(key)
            );
        }
        let rewrite_data = !fixes.unrepaired;
        let mut columns: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (i, c) in cols.iter().enumerate() {
            if fixes.drop[i] || (rewrite_data && fixes.data[i]) {
                continue;
            }
            columns.push((c.qualifier.to_vec(), c.value.to_vec()));
        }
        if rewrite_data && !kept.is_empty() {
            columns.push(compact(kept));
        }
        columns.sort_by(|a, b| a.0.cmp(&b.0));
        if columns.is_empty() {
            self.pending.push((key.to_vec(), None));
        } else {
            let mut row = Vec::new();
            for (q, v) in &columns {
                codec::push_column(&mut row, q, v);
            }
            if row != value {
                self.pending.push((key.to_vec(), Some(row)));
            }
        }
    }

    /// OpenTSDB's `fsckFloat` / `fsckInteger` on the point kept for an instant.
    fn check_value(&mut self, key: &[u8], d: &Dp, m: &mut String) -> ValueCheck {
        use std::fmt::Write as _;
        let o = self.options;
        let (q, v) = (&d.qualifier, &d.value);
        let last = q.len() - 1;
        let flags = q[last];
        let length = usize::from(flags & LENGTH_MASK) + 1;
        let delete_or_keep = |counts: &mut FsckCounts| {
            if o.fix && o.delete_bad_values {
                counts.bad_values_deleted += 1;
                ValueCheck::Delete
            } else {
                ValueCheck::Unrepaired
            }
        };
        if flags & FLAG_FLOAT != 0 {
            if length == 4 && v.len() == 8 {
                if v[..4] != [0, 0, 0, 0] {
                    self.counts.bad_values += 1;
                    let _ = writeln!(
                        m,
                        "Floating point value was marked as 4 bytes long but was actually 8 bytes long and the first \
                         four bytes were not zeroed\n\t{}",
                        kv(key, q, v)
                    );
                    return delete_or_keep(&mut self.counts);
                }
                self.counts.value_encoding += 1;
                let _ = writeln!(
                    m,
                    "Floating point value was marked as 4 bytes long but was actually 8 bytes long\n\t{}",
                    kv(key, q, v)
                );
                if o.fix {
                    self.counts.value_encoding_fixed += 1;
                    return ValueCheck::Fixed(q.clone(), v[4..].to_vec());
                }
                return ValueCheck::Unrepaired;
            }
            if length == 8 && v.len() == 4 {
                self.counts.bad_values += 1;
                let _ = writeln!(
                    m,
                    "This floating point value was marked as 8 bytes long but was only 4 bytes.\n\t{}",
                    kv(key, q, v)
                );
                return delete_or_keep(&mut self.counts);
            }
            if v.len() != 4 && v.len() != 8 {
                self.counts.bad_values += 1;
                let _ = writeln!(
                    m,
                    "This floating point value must be encoded either on 4 or 8 bytes, but it's on {} bytes.\n\t{}",
                    v.len(),
                    kv(key, q, v)
                );
                return delete_or_keep(&mut self.counts);
            }
            return ValueCheck::Ok;
        }
        if v.len() != length {
            self.counts.bad_values += 1;
            let _ = writeln!(
                m,
                "The integer value is {} bytes long but should be {length} bytes.\n\t{}",
                v.len(),
                kv(key, q, v)
            );
            return delete_or_keep(&mut self.counts);
        }
        if length == 8 {
            let decoded = i64::from_be_bytes(v[..8].try_into().unwrap_or([0; 8]));
            let value = codec::Value::Int(decoded);
            let smaller = value.encode();
            if smaller.len() < 8 {
                self.counts.vle += 1;
                self.counts.vle_bytes += (8 - smaller.len()) as u64;
                if o.fix {
                    self.counts.vle_fixed += 1;
                    let mut nq = q.clone();
                    nq[last] = codec::fix_qualifier_flags(flags, smaller.len());
                    return ValueCheck::Fixed(nq, smaller.to_vec());
                }
            }
        }
        ValueCheck::Ok
    }
}

enum ValueCheck {
    Ok,
    Fixed(Vec<u8>, Vec<u8>),
    Delete,
    Unrepaired,
}

/// One column for time-sorted points: the single cell, or qualifiers ‖ values ‖ meta byte (1 when seconds and
/// milliseconds mix), as OpenTSDB's compaction writes it.
fn compact(points: &[(Vec<u8>, Vec<u8>)]) -> (Vec<u8>, Vec<u8>) {
    if let [(q, v)] = points {
        return (q.clone(), v.clone());
    }
    let (mut q, mut v) = (Vec::new(), Vec::new());
    let (mut secs, mut millis) = (false, false);
    for (pq, pv) in points {
        if pq.len() == 4 {
            millis = true;
        } else {
            secs = true;
        }
        q.extend_from_slice(pq);
        v.extend_from_slice(pv);
    }
    v.push(if secs && millis { codec::MS_MIXED_COMPACT } else { 0 });
    (q, v)
}
