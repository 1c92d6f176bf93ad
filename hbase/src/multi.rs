//! Batches of mutations (or Gets): one `Multi` RPC per region server per round, each carrying one `RegionAction` per region.
//!
//! Every mutation gets its own outcome. A round sends all pending mutations (grouped by the server of their
//! region, the servers in parallel); what failed retriably (a moved region, a dead server, a busy region) is
//! located again and sent in the next round after a pause, until the deadline. A mutation is reported done only
//! when its server answered a result for it.
use std::collections::HashMap;
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::client::{Client, Inner};
use crate::error::{Error, Result, Retry};
use crate::meta::RegionLoc;
use crate::ops::{cells, Cell, Mutation};
use crate::proto;

/// An action for a (table, row), or the reason it could not be made.
type TargetedAction = ((String, Vec<u8>), Result<proto::Action>);

/// One region's share of a round: the region and the indexes of its mutations.
type RegionBatch = (Arc<RegionLoc>, Vec<usize>);

impl Client {
    /// Applies `mutations` (any tables, rows, kinds; not atomic as a group) and answers one outcome per
    /// mutation, in order: the new cells of an Append or Increment, empty for Put and Delete.
    pub async fn multi(&self, mutations: Vec<Mutation>) -> Vec<Result<Vec<Cell>>> {
        let ops = mutations
            .into_iter()
            .map(|m| {
                self.inner.count(&m.table, m.kind.multi_name(), m.columns.len().max(1) as u64);
                let action = m.validate().map(|()| proto::Action {
                    index: None,
                    // The nonce is chosen once: a retried Increment or Append then carries the same one.
                    mutation: Some(m.to_proto(self.inner.nonces.for_mutation(&m))),
                    get: None,
                });
                ((m.table, m.row), action)
            })
            .collect();
        self.run_actions(ops).await
    }

    /// Reads many rows of `table` at once (one Multi per region server): one outcome per row, in order, each as
    /// [`Client::get`] answers it (empty for an absent row).
    pub async fn get_many(
        &self,
        table: &str,
        rows: &[Vec<u8>],
        family: Option<&[u8]>,
        qualifiers: &[&[u8]],
    ) -> Vec<Result<Vec<Cell>>> {
        let column = crate::client::columns(family, qualifiers);
        for _ in rows {
            self.inner.count(table, "multi_get", 1);
        }
        let ops = rows
            .iter()
            .map(|r| {
                let action = if r.is_empty() {
                    Err(Error::Invalid(format!("empty row key (Get on {table})")))
                } else {
                    let get = proto::Get { row: r.clone(), column: column.clone(), ..Default::default() };
                    Ok(proto::Action { index: None, mutation: None, get: Some(get) })
                };
                ((table.to_string(), r.clone()), action)
            })
            .collect();
        self.run_actions(ops).await
    }

    /// Runs actions (each for a table and row, or already failed) in rounds of one Multi per region server until
    /// each has an outcome or the deadline passed.
    async fn run_actions(&self, ops: Vec<TargetedAction>) -> Vec<Result<Vec<Cell>>> {
        let inner = &self.inner;
        let n = ops.len();
        let mut outcome: Vec<Option<Result<Vec<Cell>>>> = vec![None; n];
        let mut keys = Vec::with_capacity(n);
        let mut actions = Vec::with_capacity(n);
        let mut pending = Vec::new();
        for (i, (key, action)) in ops.into_iter().enumerate() {
            keys.push(key);
            match action {
                Ok(a) => {
                    pending.push(i);
                    actions.push(a);
                }
                Err(e) => {
                    outcome[i] = Some(Err(e));
                    actions.push(proto::Action::default());
                }
            }
        }
        let actions = Arc::new(actions);
        let mut last_error: HashMap<usize, Error> = HashMap::new();
        let mut attempts = inner.attempts();
        while !pending.is_empty() {
            let timeout = inner.rpc_timeout(&attempts);
            let mut by_server: HashMap<String, HashMap<Vec<u8>, RegionBatch>> = HashMap::new();
            let mut retry = Vec::new();
            for &i in &pending {
                match inner.locate(&keys[i].0, &keys[i].1).await {
                    Ok(loc) => {
                        let regions = by_server.entry(loc.server.clone()).or_default();
                        regions.entry(loc.name.clone()).or_insert_with(|| (loc.clone(), Vec::new())).1.push(i);
                    }
                    Err(e) if e.is_retriable() => {
                        last_error.insert(i, e);
                        retry.push(i);
                    }
                    Err(e) => outcome[i] = Some(Err(e)),
                }
            }
            let mut calls = JoinSet::new();
            for (server, regions) in by_server {
                // A server's share goes in Multis of at most MAX_ACTIONS_PER_MULTI (one Multi of 100k+ actions
                // held a region server busy for 15 s, past its ZooKeeper session, and it aborted; HBase itself
                // warns past 5000 rows per call, HBASE-18023), MULTIS_IN_FLIGHT of them at once.
                let max = part_size(regions.values().flat_map(|(_, idx)| idx).map(|&i| &actions[i]));
                let parts = split_batches(regions, max, |i| keys[i].1.as_slice());
                let server: Arc<str> = server.into();
                let turns = Arc::new(tokio::sync::Semaphore::new(MULTIS_IN_FLIGHT));
                for part in parts {
                    let (inner, actions, server, turns) =
                        (self.inner.clone(), actions.clone(), server.clone(), turns.clone());
                    calls.spawn(async move {
                        let _turn = turns.acquire().await.expect("the semaphore is never closed");
                        send(&inner, &server, part, &actions, timeout).await
                    });
                }
            }
            while let Some(done) = calls.join_next().await {
                let done = done.expect("a Multi task panicked");
                for (i, res) in done {
                    match res {
                        Ok(c) => outcome[i] = Some(Ok(c)),
                        Err(e) if e.is_retriable() => {
                            last_error.insert(i, e);
                            retry.push(i);
                        }
                        Err(e) => outcome[i] = Some(Err(e)),
                    }
                }
            }
            retry.sort_unstable();
            pending = retry;
            if let Some(&first) = pending.first() {
                if let Err(final_err) = inner.pause(last_error[&first].clone(), &mut attempts).await {
                    for &i in &pending {
                        outcome[i] = Some(Err(give_up(&final_err, last_error.remove(&i).unwrap())));
                    }
                    pending.clear();
                }
            }
        }
        outcome.into_iter().map(|o| o.expect("every action has an outcome")).collect()
    }
}

/// Actions per Multi RPC at most; a server's share of a larger batch goes in several.
pub const MAX_ACTIONS_PER_MULTI: usize = 2000;

/// Actions per Multi at most when the batch has Increments or Appends. A region server applies a Multi's Puts and
/// Deletes of one region as one mini-batch with one write-ahead-log sync, but each Increment or Append alone, with
/// its own row lock, read and sync, one after the other on the handler that took the Multi: 4,096 series counters
/// in two Multis took ~2 s on the test bed, so they go in small Multis that several handlers take at once.
pub const MAX_RMW_ACTIONS_PER_MULTI: usize = 128;

/// Multis of one batch under way to one server at once (the connection's own limit bounds all calls to it).
pub const MULTIS_IN_FLIGHT: usize = 8;

/// The most actions a Multi of `actions` carries (see [`MAX_RMW_ACTIONS_PER_MULTI`]).
fn part_size<'a>(mut actions: impl Iterator<Item = &'a proto::Action>) -> usize {
    if actions.any(one_by_one) {
        MAX_RMW_ACTIONS_PER_MULTI
    } else {
        MAX_ACTIONS_PER_MULTI
    }
}

/// One server's region batches as parts of at most `max` actions each (a region's actions split across parts
/// when it has more). `row_of(i)` is action `i`'s row: a row's actions stay in one part, in the order given, since
/// parts are under way at once and the server applies a row's actions in the order it receives them (a row with
/// more than `max` actions gets a part of its own).
fn split_batches<'k>(
    regions: HashMap<Vec<u8>, RegionBatch>,
    max: usize,
    row_of: impl Fn(usize) -> &'k [u8],
) -> Vec<HashMap<Vec<u8>, RegionBatch>> {
    let max = max.max(1);
    let mut parts: Vec<HashMap<Vec<u8>, RegionBatch>> = Vec::new();
    let mut room = 0;
    for (name, (loc, mut idx)) in regions {
        // Stable: a row's actions keep their order.
        idx.sort_by(|&a, &b| row_of(a).cmp(row_of(b)));
        let mut rest = idx.as_slice();
        while let Some(&first) = rest.first() {
            // The row's actions, whole, into the current part when they fit (or it is empty), else a new one.
            let run = rest.iter().take_while(|&&i| row_of(i) == row_of(first)).count();
            if room < run.min(max) {
                parts.push(HashMap::new());
                room = max;
            }
            let (now, later) = rest.split_at(run);
            let part = parts.last_mut().expect("a part was pushed");
            match part.get_mut(&name) {
                Some((_, taken)) => taken.extend_from_slice(now),
                None => {
                    part.insert(name.clone(), (loc.clone(), now.to_vec()));
                }
            }
            room = room.saturating_sub(run);
            rest = later;
        }
    }
    parts
}

/// Whether a region server applies `action` of a Multi on its own (an Increment or an Append: row lock, read,
/// write-ahead-log sync) rather than in a mini-batch with the Puts and Deletes around it.
fn one_by_one(action: &proto::Action) -> bool {
    action.mutation.as_ref().is_some_and(|m| {
        matches!(
            proto::MutationType::try_from(m.mutate_type.unwrap_or_default()),
            Ok(proto::MutationType::Increment | proto::MutationType::Append)
        )
    })
}

/// Puts a region's Puts and Deletes before its Increments and Appends, each kind in the order given, when no row
/// has both on a common cell (else the order stays). A region server applies the Puts and Deletes it collected
/// as one mini-batch with one sync, but applies the collected ones before each Increment or Append: a series
/// counter's Increment and Put of its last-point time, alternating, cost a sync each (4,096 counters took ~1.5 s
/// on the test bed). Across rows, and across cells of one row, a Multi's order means nothing.
fn puts_first(idx: &mut [usize], actions: &[proto::Action]) {
    let (rmw, batched): (Vec<usize>, Vec<usize>) = idx.iter().partition(|&&i| one_by_one(&actions[i]));
    if rmw.is_empty() || batched.is_empty() {
        return;
    }
    // The cells each action touches: (row, family, qualifier); `None` for a Delete of a whole family or row.
    type CellId<'a> = (&'a [u8], Option<(&'a [u8], &'a [u8])>);
    let cells = |i: usize| -> Vec<CellId<'_>> {
        let m = actions[i].mutation.as_ref().expect("mutations only");
        let row = m.row.as_deref().unwrap_or_default();
        if m.column_value.is_empty() {
            return vec![(row, None)];
        }
        let mut out = Vec::new();
        for c in &m.column_value {
            if c.qualifier_value.is_empty() {
                out.push((row, None));
            }
            for q in &c.qualifier_value {
                out.push((row, Some((c.family.as_slice(), q.qualifier.as_deref().unwrap_or_default()))));
            }
        }
        out
    };
    let rmw_cells: std::collections::HashSet<CellId<'_>> = rmw.iter().flat_map(|&i| cells(i)).collect();
    let rmw_rows: std::collections::HashSet<&[u8]> = rmw_cells.iter().map(|(row, _)| *row).collect();
    let conflict = batched.iter().flat_map(|&i| cells(i)).any(|(row, cell)| match cell {
        None => rmw_rows.contains(row),
        Some(_) => rmw_cells.contains(&(row, cell)) || rmw_cells.contains(&(row, None)),
    });
    if conflict {
        return;
    }
    for (slot, i) in idx.iter_mut().zip(batched.into_iter().chain(rmw)) {
        *slot = i;
    }
}

/// The deadline's error for one mutation, keeping its own last error.
fn give_up(deadline: &Error, last: Error) -> Error {
    match deadline {
        Error::Deadline { elapsed, .. } => Error::Deadline { elapsed: *elapsed, last: Box::new(last) },
        other => other.clone(),
    }
}

/// One Multi to `server`; the outcome of each mutation sent.
async fn send(
    inner: &Inner,
    server: &str,
    regions: HashMap<Vec<u8>, RegionBatch>,
    actions: &[proto::Action],
    timeout: std::time::Duration,
) -> Vec<(usize, Result<Vec<Cell>>)> {
    let mut regions: Vec<RegionBatch> = regions.into_values().collect();
    for (_, idx) in &mut regions {
        puts_first(idx, actions);
    }
    let needs_nonce = regions
        .iter()
        .flat_map(|(_, idx)| idx)
        .any(|&i| actions[i].mutation.as_ref().is_some_and(|m| m.nonce.is_some()));
    let req = proto::MultiRequest {
        region_action: regions
            .iter()
            .map(|(loc, idx)| proto::RegionAction {
                region: proto::RegionSpecifier::name(&loc.name),
                atomic: None,
                action: idx.iter().map(|&i| proto::Action { index: Some(i as u32), ..actions[i].clone() }).collect(),
            })
            .collect(),
        nonce_group: needs_nonce.then(|| inner.nonces.group()),
    };
    inner.count("*", "multi", regions.iter().map(|(_, idx)| idx.len() as u64).sum());
    let res: Result<proto::MultiResponse> = async {
        let conn = inner.conn(server, timeout).await?;
        conn.call("Multi", &req, timeout).await
    }
    .await;
    let mut out = Vec::new();
    let resp = match res {
        Ok(r) => r,
        Err(e) => {
            // The whole call failed: nothing is known about any of its mutations.
            for (loc, idx) in &regions {
                inner.forget(loc, &e);
                out.extend(idx.iter().map(|&i| (i, Err(e.clone()))));
            }
            return out;
        }
    };
    // Results come in the order of the region actions sent.
    for (n, (loc, idx)) in regions.iter().enumerate() {
        let Some(rar) = resp.region_action_result.get(n) else {
            let e = Error::Protocol(format!("Multi answered {} region results", resp.region_action_result.len()));
            out.extend(idx.iter().map(|&i| (i, Err(e.clone()))));
            continue;
        };
        if let Some(ex) = &rar.exception {
            let e = pair_error(ex);
            inner.forget(loc, &e);
            out.extend(idx.iter().map(|&i| (i, Err(e.clone()))));
            continue;
        }
        let mut answered: HashMap<u32, &proto::ResultOrException> = HashMap::new();
        for roe in &rar.result_or_exception {
            answered.insert(roe.index.unwrap_or(u32::MAX), roe);
        }
        let mut forgot = false;
        for &i in idx {
            let res = match answered.get(&(i as u32)) {
                Some(roe) => match &roe.exception {
                    Some(ex) => Err(pair_error(ex)),
                    None => Ok(cells(roe.result.clone())),
                },
                // Not answered means not known to be applied: retried (a server answers every action).
                None => Err(Error::Remote {
                    class: "MissingActionResult".into(),
                    message: format!("no result for action {i}"),
                    do_not_retry: false,
                }),
            };
            if let Err(e) = &res {
                if !forgot && matches!(e.retry(), Retry::Relocate | Retry::ServerGone) {
                    inner.forget(loc, e);
                    forgot = true;
                }
            }
            out.push((i, res));
        }
    }
    out
}

/// An exception inside a Multi answer: the class name and its message.
fn pair_error(ex: &proto::NameBytesPair) -> Error {
    let msg = ex.value.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
    Error::remote(&ex.name, &msg, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(name: &str) -> Arc<RegionLoc> {
        Arc::new(RegionLoc {
            table: "t".into(),
            name: name.as_bytes().to_vec(),
            start: Vec::new(),
            end: Vec::new(),
            server: "s".into(),
        })
    }

    /// A server's share of a large batch goes in Multis of at most the limit, every action in exactly one, each
    /// under its own region.
    #[test]
    fn a_large_batch_is_split_into_multis_of_at_most_the_limit() {
        let mut regions: HashMap<Vec<u8>, RegionBatch> = HashMap::new();
        regions.insert(b"r1".to_vec(), (region("r1"), (0..4500).collect()));
        regions.insert(b"r2".to_vec(), (region("r2"), (4500..4510).collect()));
        regions.insert(b"r3".to_vec(), (region("r3"), (4510..6010).collect()));
        let rows: Vec<Vec<u8>> = (0..6010u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let parts = split_batches(regions, 2000, |i| &rows[i]);
        let sizes: Vec<usize> = parts.iter().map(|p| p.values().map(|(_, idx)| idx.len()).sum()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 6010);
        assert!(sizes.iter().all(|&n| n <= 2000), "{sizes:?}");
        assert_eq!(parts.len(), 4, "{sizes:?}");
        let mut seen: Vec<usize> = Vec::new();
        for part in &parts {
            for (name, (loc, idx)) in part {
                assert_eq!(&loc.name, name);
                let want = match name.as_slice() {
                    b"r1" => 0..4500,
                    b"r2" => 4500..4510,
                    _ => 4510..6010,
                };
                assert!(idx.iter().all(|i| want.contains(i)), "{name:?}");
                seen.extend(idx);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..6010).collect::<Vec<_>>());
        // A small batch stays one Multi.
        let mut small: HashMap<Vec<u8>, RegionBatch> = HashMap::new();
        small.insert(b"r1".to_vec(), (region("r1"), vec![0, 1, 2]));
        assert_eq!(split_batches(small, 2000, |i| &rows[i]).len(), 1);
    }

    /// Parts are under way at once, so a row's actions stay in one part and keep their order; whole rows fill a
    /// part up to the limit, and a row with more actions than the limit has a part of its own.
    #[test]
    fn a_rows_actions_stay_in_one_part_in_order() {
        let rows: Vec<&[u8]> = vec![b"a", b"b", b"a", b"c", b"a", b"d", b"b", b"e"];
        let mut regions: HashMap<Vec<u8>, RegionBatch> = HashMap::new();
        regions.insert(b"r1".to_vec(), (region("r1"), (0..rows.len()).collect()));
        let parts: Vec<Vec<usize>> =
            split_batches(regions, 2, |i| rows[i]).into_iter().map(|p| p[b"r1".as_slice()].1.clone()).collect();
        assert_eq!(parts, vec![vec![0, 2, 4], vec![1, 6], vec![3, 5], vec![7]]);
    }

    /// A region's Puts go before its Increments (one mini-batch, one sync, on the server), each kind in order,
    /// unless a row has both on a common cell or a whole-row Delete beside an Increment.
    #[test]
    fn puts_go_before_increments_unless_a_cell_has_both() {
        let action = |m: Mutation| proto::Action { index: None, mutation: Some(m.to_proto(None)), get: None };
        let put = |row: &[u8], q: &[u8]| action(Mutation::put("t", row, b"f", vec![(q.to_vec(), b"v".to_vec())]));
        let inc = |row: &[u8], q: &[u8]| action(Mutation::increment("t", row, b"f", q, 1));
        let order = |actions: Vec<proto::Action>| {
            let mut idx: Vec<usize> = (0..actions.len()).collect();
            puts_first(&mut idx, &actions);
            idx
        };
        // Series counters: an Increment of `+` and a Put of `M` per row.
        assert_eq!(order(vec![inc(b"r1", b"+"), put(b"r1", b"M"), inc(b"r2", b"+"), put(b"r2", b"M")]), [1, 3, 0, 2]);
        // A Put and an Increment of one cell keep their order.
        assert_eq!(order(vec![inc(b"r1", b"+"), put(b"r2", b"M"), put(b"r1", b"+")]), [0, 1, 2]);
        // So does a whole-row Delete beside an Increment of the row.
        let delete = action(Mutation::delete("t", b"r1", b"", &[]));
        assert_eq!(order(vec![inc(b"r1", b"+"), delete]), [0, 1]);
        // Only one kind: unchanged.
        assert_eq!(order(vec![put(b"r2", b"a"), put(b"r1", b"a")]), [0, 1]);
    }
}
