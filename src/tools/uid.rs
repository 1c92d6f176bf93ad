//! `rtsd uid ...` and `rtsd mkmetric`: OpenTSDB's `tsdb uid` on rtsd's UID table (the `tsdb-uid` cells, kept in
//! RocksDB as forward `id` and reverse `name` maps plus a max-id counter per kind).
//!
//! * `grep [KIND] REGEX`: names matching the regular expression (found anywhere in the name; `-i` ignores case),
//!   printed `kind name: [uid bytes]` in name order; exit 1 when nothing matches.
//! * `assign KIND NAME...` (and `mkmetric NAME...` = `assign metrics NAME...`): creates missing UIDs, prints each.
//! * `rename KIND OLD NEW`: renames a UID in place (data keeps its UID).
//! * `delete KIND NAME`: removes both mappings; data rows with the UID become orphans (`rtsd fsck
//!   --delete-orphans` removes them), the id is never reused.
//! * `fsck [fix] [delete_unknown]`: forward and reverse maps must agree, ids must have the configured width,
//!   the counter must cover every id; `fix` repairs as OpenTSDB does.
//! * `metasync`: rebuilds rtsd's series index from a full scan of the data (OpenTSDB builds TSMeta this way).
//! * `treesync` / `treepurge`: rtsd has no tree processing; like OpenTSDB with trees disabled, nothing to do.
//! * `[KIND] NAME` / `[KIND] ID`: looks up one mapping.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;

use rtsd_protocol::codec;
use rtsd_protocol::javafmt;
use rtsd_protocol::point::{validate_string, Rules, UidKind};

use crate::store::admin::{UidCellWrite, UidFamily};
use crate::store::{Store, StoreError};

/// A kind from its OpenTSDB name (`metrics`/`metric`, `tagk`, `tagv`).
pub fn parse_kind(s: &str) -> Result<UidKind, String> {
    match s.to_ascii_lowercase().as_str() {
        "metrics" | "metric" => Ok(UidKind::Metric),
        "tagk" => Ok(UidKind::TagKey),
        "tagv" => Ok(UidKind::TagValue),
        _ => Err(format!("Invalid type requested: {s}")),
    }
}

fn kind_of_qualifier(q: &[u8]) -> Option<UidKind> {
    UidKind::ALL.into_iter().find(|k| k.as_str().as_bytes() == q)
}

/// `kind name: [uid bytes]`, OpenTSDB's line for one mapping.
fn mapping_line(kind: &str, name: &str, uid: &[u8]) -> String {
    format!("{kind} {name}: {}", javafmt::byte_array(uid))
}

/// `uid grep`: returns whether anything matched.
pub fn grep(
    store: &Store,
    kind: Option<UidKind>,
    pattern: &str,
    ignore_case: bool,
    out: &mut impl Write,
) -> Result<bool, String> {
    let re = regex::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .build()
        .map_err(|e| format!("invalid regular expression: {e}"))?;
    // HBase order: by name (the row), then by kind (the qualifier).
    let mut found: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>> = BTreeMap::new();
    store
        .for_each_uid_cell(UidFamily::Id, |q, row, value| {
            let Some(k) = kind_of_qualifier(q) else { return Ok(true) };
            if row == [0] || kind.is_some_and(|want| want != k) {
                return Ok(true);
            }
            if re.is_match(&String::from_utf8_lossy(row)) {
                found.insert((row.to_vec(), q.to_vec()), value.to_vec());
            }
            Ok(true)
        })
        .map_err(|e| e.to_string())?;
    for ((name, q), uid) in &found {
        writeln!(out, "{}", mapping_line(&String::from_utf8_lossy(q), &String::from_utf8_lossy(name), uid))
            .map_err(|e| e.to_string())?;
    }
    Ok(!found.is_empty())
}

/// `uid assign` / `mkmetric`: assigns (or finds) each name's UID and prints it. Names are checked with
/// OpenTSDB's character rules first; a bad name is reported and the rest still assigned. Returns whether all
/// succeeded.
pub fn assign(
    store: &Store,
    kind: UidKind,
    names: &[String],
    rules: &Rules,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<bool, String> {
    let mut ok = true;
    for name in names {
        if let Err(e) = validate_string(&format_args!("{} name", kind), name, rules) {
            let _ = writeln!(err, "{}", e.message());
            ok = false;
            continue;
        }
        match store.uids().get_or_create(kind, name, true) {
            Ok(uid) => {
                writeln!(out, "{}", mapping_line(kind.as_str(), name, uid.as_bytes())).map_err(|e| e.to_string())?
            }
            Err(e) => {
                let _ = writeln!(err, "error while processing {name}: {e}");
                ok = false;
            }
        }
    }
    Ok(ok)
}

/// `uid delete`: returns the deleted UID.
pub fn delete(store: &Store, kind: UidKind, name: &str) -> Result<Vec<u8>, String> {
    store
        .delete_uid(kind, name)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("No such name for '{kind}': '{name}'"))
}

/// `uid [KIND] NAME|ID`. An all-digit argument is an id (on the kind's width, or `idwidth` when given); without a
/// kind every kind is looked up. Returns whether anything was found.
pub fn lookup(
    store: &Store,
    kind: Option<UidKind>,
    arg: &str,
    idwidth: Option<usize>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<bool, String> {
    let kinds: Vec<UidKind> = kind.map(|k| vec![k]).unwrap_or_else(|| UidKind::ALL.to_vec());
    let mut found = false;
    if let Ok(id) = arg.parse::<u64>() {
        for k in kinds {
            let width = idwidth.unwrap_or(store.uids().table(k).width());
            let Ok(uid) = codec::long_to_uid(id, width) else {
                let _ =
                    writeln!(err, "{id} is too large to fit on {width} bytes.  Maybe you forgot to adjust --idwidth?");
                continue;
            };
            match store.uids().name_of(k, &uid).map_err(|e| e.to_string())? {
                Some(name) => {
                    writeln!(out, "{}", mapping_line(k.as_str(), &name, &uid)).map_err(|e| e.to_string())?;
                    found = true;
                }
                None if kind.is_some() => {
                    let _ = writeln!(err, "No such unique ID for '{k}': {}", javafmt::byte_array(&uid));
                }
                None => {}
            }
        }
    } else {
        for k in kinds {
            match store.uids().get(k, arg).map_err(|e| e.to_string())? {
                Some(uid) => {
                    writeln!(out, "{}", mapping_line(k.as_str(), arg, uid.as_bytes())).map_err(|e| e.to_string())?;
                    found = true;
                }
                None if kind.is_some() => {
                    let _ = writeln!(err, "No such name for '{k}': '{arg}'");
                }
                None => {}
            }
        }
    }
    Ok(found)
}

/// Qualifiers of UID meta objects and TSMeta counters: not mappings, skipped by the check.
const META_QUALIFIERS: [&[u8]; 5] = [b"metric_meta", b"tagk_meta", b"tagv_meta", b"ts_meta", b"ts_ctr"];

/// One kind's view for the check.
#[derive(Default)]
struct KindState {
    max_id: Option<u64>,
    max_found: u64,
    /// name -> hex uid (forward)
    name2id: BTreeMap<String, String>,
    /// hex uid -> name (reverse)
    id2name: BTreeMap<String, String>,
    errors: u64,
}

/// `uid fsck`: checks (and with `fix` repairs) the UID maps; returns the number of errors found. Messages are
/// OpenTSDB's, one per line, on `out`.
pub fn fsck(store: &Store, fix: bool, delete_unknown: bool, out: &mut impl Write) -> Result<u64, String> {
    let started = std::time::Instant::now();
    if fix {
        say(out, format!("Running fsck in FIX mode (remove unknowns: {delete_unknown})"));
    } else {
        say(out, "Running in log only mode".into());
    }
    let mut writes: Vec<UidCellWrite> = Vec::new();
    let (mut kinds, kvs) = read_uid_maps(store, fix && delete_unknown, &mut writes, out)?;
    let mut total = 0u64;
    for kind in UidKind::ALL {
        let Some(st) = kinds.get_mut(&kind) else { continue };
        let mut check = KindCheck::new(kind, fix, &mut writes);
        let renamed = check.forward_mappings(st);
        check.rename_collisions(&renamed);
        check.reverse_mappings(st, &renamed);
        check.max_id(st);
        for m in check.messages {
            say(out, m);
        }
        st.errors += check.errors;
        if st.errors > 0 {
            say(out, format!("{kind}: Found {} errors.", st.errors));
            total += st.errors;
        }
    }
    if fix && !writes.is_empty() {
        store.write_uid_cells(&writes).map_err(|e| e.to_string())?;
    }
    let ms = started.elapsed().as_millis().max(1);
    say(out, format!("{kvs} KVs analyzed in {ms}ms (~{} KV/s)", kvs as u128 * 1000 / ms));
    if total == 0 {
        say(out, "No errors found.".into());
    } else {
        say(out, format!("{total} errors found."));
    }
    Ok(total)
}

/// One line of fsck's report.
fn say(out: &mut impl Write, line: String) {
    let _ = writeln!(out, "{line}");
}

/// fsck's first pass: every cell of both families read into its kind's maps (a cell that is not a mapping is
/// reported, and with `remove_unknown` removed). Returns each kind's state and the number of cells read.
fn read_uid_maps(
    store: &Store,
    remove_unknown: bool,
    writes: &mut Vec<UidCellWrite>,
    out: &mut impl Write,
) -> Result<(HashMap<UidKind, KindState>, u64), String> {
    let mut kinds: HashMap<UidKind, KindState> = HashMap::new();
    let mut kvs = 0u64;
    for family in [UidFamily::Id, UidFamily::Name] {
        let mut cells = Vec::new();
        store
            .for_each_uid_cell(family, |q, row, value| {
                cells.push((q.to_vec(), row.to_vec(), value.to_vec()));
                Ok(true)
            })
            .map_err(|e: StoreError| e.to_string())?;
        for (q, row, value) in cells {
            kvs += 1;
            if META_QUALIFIERS.contains(&q.as_slice()) {
                continue;
            }
            let Some(kind) = kind_of_qualifier(&q) else {
                say(
                    out,
                    format!("Unknown qualifier {} in row {}", codec::uid_to_string(&q), codec::uid_to_string(&row)),
                );
                if remove_unknown {
                    writes.push((family, q.clone(), row.clone(), None));
                    say(
                        out,
                        format!(
                            "FIX: Removed unknown qualifier {} in row {}",
                            codec::uid_to_string(&q),
                            codec::uid_to_string(&row)
                        ),
                    );
                }
                continue;
            };
            let width = store.uids().table(kind).width();
            read_uid_cell(kinds.entry(kind).or_default(), kind, width, family, &row, &value, out);
        }
    }
    Ok((kinds, kvs))
}

/// One cell of a kind into its state: the max-ID counter, or a forward or reverse mapping (one whose UID is not
/// `width` bytes is an error and left out).
fn read_uid_cell(
    st: &mut KindState,
    kind: UidKind,
    width: usize,
    family: UidFamily,
    row: &[u8],
    value: &[u8],
    out: &mut impl Write,
) {
    if family == UidFamily::Id && row == [0] {
        if value.len() != 8 {
            st.errors += 1;
            say(out, format!("Invalid maximum ID for {kind}: should be on 8 bytes: {}", codec::uid_to_string(value)));
        } else {
            let max = u64::from_be_bytes(value[..8].try_into().unwrap_or([0; 8]));
            st.max_id = Some(max);
            say(out, format!("Maximum ID for {kind}: {max}"));
        }
        return;
    }
    let (uid, name) = match family {
        UidFamily::Id => (value, String::from_utf8_lossy(row).into_owned()),
        UidFamily::Name => (row, String::from_utf8_lossy(value).into_owned()),
    };
    if uid.len() != width {
        st.errors += 1;
        say(
            out,
            format!(
                "Invalid {kind} ID of length {} (expected: {width}): {name} -> {}",
                uid.len(),
                codec::uid_to_string(uid)
            ),
        );
        return;
    }
    let hex = codec::uid_to_string(uid);
    if family == UidFamily::Id {
        st.max_found = st.max_found.max(codec::uid_to_long(uid));
        st.name2id.insert(name, hex);
    } else {
        st.id2name.insert(hex, name);
    }
}

/// A UID collision `fix` resolves: (UID in hex, the `fsck.<names>` name it gets, the names that shared it).
type Collision = (String, String, Vec<String>);

/// fsck's second pass over one kind's maps: the messages to print in order, the errors counted, and (with
/// `fix`) the cell writes that repair them.
struct KindCheck<'a> {
    kind: UidKind,
    qualifier: Vec<u8>,
    fix: bool,
    writes: &'a mut Vec<UidCellWrite>,
    messages: Vec<String>,
    errors: u64,
}

impl<'a> KindCheck<'a> {
    fn new(kind: UidKind, fix: bool, writes: &'a mut Vec<UidCellWrite>) -> KindCheck<'a> {
        let qualifier = kind.as_str().as_bytes().to_vec();
        KindCheck { kind, qualifier, fix, writes, messages: Vec::new(), errors: 0 }
    }

    /// Writes the reverse mapping `id -> name`.
    fn restore(&mut self, id: &str, name: &str) {
        if let Ok(uid) = codec::string_to_uid(id, None) {
            self.writes.push((UidFamily::Name, self.qualifier.clone(), uid, Some(name.as_bytes().to_vec())));
        }
    }

    /// Removes the reverse mapping of `id`.
    fn remove_reverse(&mut self, id: &str) {
        if let Ok(uid) = codec::string_to_uid(id, None) {
            self.writes.push((UidFamily::Name, self.qualifier.clone(), uid, None));
        }
    }

    /// Forward mappings: each needs the matching reverse mapping; several names on one UID is a collision,
    /// returned (with `fix`) for [`KindCheck::rename_collisions`].
    fn forward_mappings(&mut self, st: &KindState) -> Vec<Collision> {
        let kind = self.kind;
        let mut by_id: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (name, id) in &st.name2id {
            by_id.entry(id.as_str()).or_default().insert(name.as_str());
        }
        let mut renamed: Vec<Collision> = Vec::new();
        for (id, names) in &by_id {
            if names.len() > 1 {
                self.errors += 1;
                let fsck_name = format!("fsck.{}", names.iter().copied().collect::<Vec<_>>().join("."));
                self.messages.push(format!(
                    "UID collision: {kind} {} all map to {id}",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                ));
                if self.fix {
                    renamed.push((id.to_string(), fsck_name, names.iter().map(|s| s.to_string()).collect()));
                }
                continue;
            }
            let name = names.iter().next().copied().unwrap_or_default();
            let problem = match st.id2name.get(*id) {
                None => format!("Forward {kind} mapping is missing reverse mapping: {name} -> {id}"),
                Some(found) if found != name => {
                    format!("Forward {kind} mapping {name} -> {id} is different than reverse mapping: {id} -> {found}")
                }
                Some(_) => continue,
            };
            self.errors += 1;
            self.messages.push(problem);
            if self.fix {
                self.restore(id, name);
                self.messages.push(format!("FIX: Restoring {kind} reverse mapping: {id} -> {name}"));
            }
        }
        renamed
    }

    /// Each collision's names lose their forward mappings; the UID gets the forward and reverse mappings of its
    /// `fsck.<names>` name.
    fn rename_collisions(&mut self, renamed: &[Collision]) {
        let kind = self.kind;
        for (id, fsck_name, names) in renamed {
            for n in names {
                self.writes.push((UidFamily::Id, self.qualifier.clone(), n.as_bytes().to_vec(), None));
                self.messages.push(format!("FIX: Removed forward {kind} mapping for {n} -> {id}"));
            }
            if let Ok(uid) = codec::string_to_uid(id, None) {
                self.writes.push((UidFamily::Id, self.qualifier.clone(), fsck_name.as_bytes().to_vec(), Some(uid)));
            }
            self.restore(id, fsck_name);
            self.messages.push(format!("FIX: Created forward {kind} mapping for fsck'd UID {fsck_name} -> {id}"));
            self.messages.push(format!("Corrupted UID [{id}] renamed to [{fsck_name}]"));
        }
    }

    /// Reverse mappings: one without a forward mapping is harmless (warned); one that disagrees is an error.
    fn reverse_mappings(&mut self, st: &KindState, renamed: &[Collision]) {
        let kind = self.kind;
        for (id, name) in &st.id2name {
            match st.name2id.get(name) {
                None => {
                    self.messages.push(format!("Reverse {kind} mapping is missing forward mapping: {name} -> {id}"));
                    if self.fix {
                        self.remove_reverse(id);
                        self.messages.push(format!("FIX: Removed {kind} reverse mapping: {id} -> {name}"));
                    }
                }
                Some(found) if found != id && !renamed.iter().any(|r| &r.0 == id) => {
                    self.errors += 1;
                    self.messages
                        .push(format!("Inconsistent reverse {kind} mapping {id} -> {name} vs {found} -> {name}"));
                    if self.fix && st.name2id.values().all(|v| v != id) {
                        self.remove_reverse(id);
                        self.messages.push(format!("FIX: Removed {kind} reverse mapping: {id} -> {name}"));
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// The max-ID counter must cover every UID found; one far above the number of mappings is only warned of.
    fn max_id(&mut self, st: &KindState) {
        let kind = self.kind;
        let max_id = st.max_id.unwrap_or(0);
        let entries = st.name2id.len().max(st.id2name.len()) as u64;
        if max_id < st.max_found {
            self.errors += 1;
            self.messages.push(format!(
                "We found an ID of {} for {kind} but the max ID is only {max_id}!  Future IDs may be double-assigned!",
                st.max_found
            ));
            if self.fix {
                let counter = Some(st.max_found.to_be_bytes().to_vec());
                self.writes.push((UidFamily::Id, self.qualifier.clone(), vec![0], counter));
                self.messages.push(format!("FIX: Updated max ID for {kind} to {}", st.max_found));
            }
        } else if max_id > entries {
            self.messages.push(format!(
                "Max ID for {kind} is {max_id} but only {entries} entries were found.  Maybe {} IDs were deleted?",
                max_id - entries
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;

    /// The report without its timing line, which is checked apart.
    fn run_fsck(store: &Store, fix: bool, delete_unknown: bool) -> (u64, Vec<String>) {
        let mut out = Vec::new();
        let errors = fsck(store, fix, delete_unknown, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let timing: Vec<&str> = text.lines().filter(|l| l.contains(" KVs analyzed in ")).collect();
        assert_eq!(timing.len(), 1, "{text}");
        (errors, text.lines().filter(|l| !l.contains(" KVs analyzed in ")).map(str::to_string).collect())
    }

    #[test]
    fn fsck_reports_and_repairs_damaged_uid_maps() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::for_data_dir(dir.path(), &[]).unwrap();
        let store = Store::open(&config.store_options(), Arc::new(crate::metrics::Metrics::new())).unwrap();
        for name in ["a", "b", "c"] {
            store.uids().assign_new(UidKind::Metric, name).unwrap();
        }
        store.uids().assign_new(UidKind::TagKey, "host").unwrap();
        let (errors, report) = run_fsck(&store, false, false);
        assert_eq!(errors, 0);
        assert_eq!(
            report,
            ["Running in log only mode", "Maximum ID for metrics: 3", "Maximum ID for tagk: 1", "No errors found."]
        );
        let m = b"metrics".to_vec();
        let cell = |family, q: &[u8], row: &[u8], value: Option<&[u8]>| -> UidCellWrite {
            (family, q.to_vec(), row.to_vec(), value.map(<[u8]>::to_vec))
        };
        store
            .write_uid_cells(&[
                // Two names on one UID.
                cell(UidFamily::Id, &m, b"x", Some(&[0, 0, 1])),
                // A forward mapping without its reverse, past the max ID.
                cell(UidFamily::Id, &m, b"d", Some(&[0, 0, 5])),
                // A reverse mapping that disagrees with the forward one, and one more for a name mapped elsewhere.
                cell(UidFamily::Name, &m, &[0, 0, 2], Some(b"zz")),
                cell(UidFamily::Name, &m, &[0, 0, 9], Some(b"c")),
                // An ID of the wrong width, an unknown qualifier, a max ID not on 8 bytes.
                cell(UidFamily::Id, b"tagk", b"bad", Some(&[0, 1])),
                cell(UidFamily::Id, b"weird", b"r", Some(b"v")),
                cell(UidFamily::Id, b"tagv", &[0], Some(&[0, 0, 0, 1])),
            ])
            .unwrap();
        // The first pass reports in cell order: by kind (qualifier), then by row.
        let (errors, report) = run_fsck(&store, false, false);
        let expected_log: Vec<String> = [
            "Running in log only mode",
            "Maximum ID for metrics: 3",
            "Maximum ID for tagk: 1",
            "Invalid tagk ID of length 2 (expected: 3): bad -> 0001",
            "Invalid maximum ID for tagv: should be on 8 bytes: 00000001",
            "Unknown qualifier 7765697264 in row 72",
        ]
        .into_iter()
        .chain([
            "UID collision: metrics a, x all map to 000001",
            "Forward metrics mapping b -> 000002 is different than reverse mapping: 000002 -> zz",
            "Forward metrics mapping is missing reverse mapping: d -> 000005",
            "Reverse metrics mapping is missing forward mapping: zz -> 000002",
            "Inconsistent reverse metrics mapping 000009 -> c vs 000003 -> c",
            "We found an ID of 5 for metrics but the max ID is only 3!  Future IDs may be double-assigned!",
            "metrics: Found 5 errors.",
            "tagk: Found 1 errors.",
            "tagv: Found 1 errors.",
            "7 errors found.",
        ])
        .map(str::to_string)
        .collect();
        assert_eq!((errors, report), (7, expected_log));

        let (errors, report) = run_fsck(&store, true, true);
        assert_eq!(errors, 7);
        assert_eq!(
            report,
            [
                "Running fsck in FIX mode (remove unknowns: true)",
                "Maximum ID for metrics: 3",
                "Maximum ID for tagk: 1",
                "Invalid tagk ID of length 2 (expected: 3): bad -> 0001",
                "Invalid maximum ID for tagv: should be on 8 bytes: 00000001",
                "Unknown qualifier 7765697264 in row 72",
                "FIX: Removed unknown qualifier 7765697264 in row 72",
                "UID collision: metrics a, x all map to 000001",
                "Forward metrics mapping b -> 000002 is different than reverse mapping: 000002 -> zz",
                "FIX: Restoring metrics reverse mapping: 000002 -> b",
                "Forward metrics mapping is missing reverse mapping: d -> 000005",
                "FIX: Restoring metrics reverse mapping: 000005 -> d",
                "FIX: Removed forward metrics mapping for a -> 000001",
                "FIX: Removed forward metrics mapping for x -> 000001",
                "FIX: Created forward metrics mapping for fsck'd UID fsck.a.x -> 000001",
                "Corrupted UID [000001] renamed to [fsck.a.x]",
                "Reverse metrics mapping is missing forward mapping: zz -> 000002",
                "FIX: Removed metrics reverse mapping: 000002 -> zz",
                "Inconsistent reverse metrics mapping 000009 -> c vs 000003 -> c",
                "FIX: Removed metrics reverse mapping: 000009 -> c",
                "We found an ID of 5 for metrics but the max ID is only 3!  Future IDs may be double-assigned!",
                "FIX: Updated max ID for metrics to 5",
                "metrics: Found 5 errors.",
                "tagk: Found 1 errors.",
                "tagv: Found 1 errors.",
                "7 errors found.",
            ]
        );
        // What fix leaves: the cells fix does not touch (the bad width, the bad max ID) stay, and b's reverse
        // mapping is gone: the fix restored it and then removed zz's, the same cell, and the later write wins.
        let (errors, report) = run_fsck(&store, false, false);
        assert_eq!(
            (errors, report),
            (
                3,
                [
                    "Running in log only mode",
                    "Maximum ID for metrics: 5",
                    "Maximum ID for tagk: 1",
                    "Invalid tagk ID of length 2 (expected: 3): bad -> 0001",
                    "Invalid maximum ID for tagv: should be on 8 bytes: 00000001",
                    "Forward metrics mapping is missing reverse mapping: b -> 000002",
                    "Max ID for metrics is 5 but only 4 entries were found.  Maybe 1 IDs were deleted?",
                    "metrics: Found 1 errors.",
                    "tagk: Found 1 errors.",
                    "tagv: Found 1 errors.",
                    "3 errors found.",
                ]
                .map(str::to_string)
                .to_vec()
            )
        );
    }
}
