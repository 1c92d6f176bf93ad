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
                let (inner, actions) = (self.inner.clone(), actions.clone());
                // A server's share goes in Multis of at most MAX_ACTIONS_PER_MULTI, one after the other: one
                // Multi of 100k+ actions held a region server busy for 15 s, past its ZooKeeper session, and it
                // aborted (HBase itself warns past 5000 rows per call, HBASE-18023).
                calls.spawn(async move {
                    let mut out = Vec::new();
                    for part in split_batches(regions, MAX_ACTIONS_PER_MULTI) {
                        out.extend(send(&inner, &server, part, &actions, timeout).await);
                    }
                    out
                });
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

/// Actions per Multi RPC at most; a server's share of a larger batch goes in several, in turn.
pub const MAX_ACTIONS_PER_MULTI: usize = 2000;

/// One server's region batches as parts of at most `max` actions each (a region's actions split across parts
/// when it has more), in the order given.
fn split_batches(regions: HashMap<Vec<u8>, RegionBatch>, max: usize) -> Vec<HashMap<Vec<u8>, RegionBatch>> {
    let max = max.max(1);
    let mut parts: Vec<HashMap<Vec<u8>, RegionBatch>> = Vec::new();
    let mut room = 0;
    for (name, (loc, idx)) in regions {
        for piece in idx.chunks(max) {
            let mut piece = piece;
            while !piece.is_empty() {
                if room == 0 {
                    parts.push(HashMap::new());
                    room = max;
                }
                let (now, later) = piece.split_at(piece.len().min(room));
                let part = parts.last_mut().expect("a part was pushed");
                part.entry(name.clone()).or_insert_with(|| (loc.clone(), Vec::new())).1.extend_from_slice(now);
                room -= now.len();
                piece = later;
            }
        }
    }
    parts
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
    let regions: Vec<RegionBatch> = regions.into_values().collect();
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
        let parts = split_batches(regions, 2000);
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
        assert_eq!(split_batches(small, 2000).len(), 1);
    }
}
