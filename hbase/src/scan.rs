//! Scanning a key range across regions, a page (`caching` rows) per RPC.
//!
//! A region scanner lives on its region server: the first `Scan` call opens it (and answers the first page), the
//! next ones page through it by scanner id with a call sequence number the server checks, and the server closes it
//! when the region has no more rows (`more_results_in_region = false`); the scan then continues at the region's
//! end key in the next region. Rows bigger than the server's size limit arrive as partial results, stitched back
//! together here; heartbeats (empty pages sent so the RPC does not time out on a long filtered stretch) are skipped.
//!
//! Failures (the region split or moved, its server died, the scanner lease expired, an out-of-order call) are
//! handled by reopening at the resume key: just after the last complete row received, or the region boundary
//! reached. Rows are then never lost nor repeated, because every complete row moves the resume key past itself and
//! a partially received row is dropped and read again whole.
use std::collections::VecDeque;
use std::sync::Arc;

use crate::client::{Client, Inner};
use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::meta::RegionLoc;
use crate::ops::Cell;
use crate::proto;

/// What to scan.
#[derive(Debug, Clone, Default)]
pub struct ScanRequest {
    pub table: String,
    /// Inclusive; empty = from the table's first row.
    pub start: Vec<u8>,
    /// Exclusive; empty = to the table's end.
    pub stop: Vec<u8>,
    /// Families to read, each with the qualifiers to read (none = the whole family); empty = all families.
    pub families: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    /// A server-side filter.
    pub filter: Option<Filter>,
    /// Rows per RPC (0: 128).
    pub caching: u32,
    /// Bytes per RPC the server aims for (0: the server's default); rows larger than it come in parts.
    pub max_result_size: u64,
}

/// A server-side filter: the Java class name (`org.apache.hadoop.hbase.filter.RowFilter`...) and that filter's
/// own protobuf serialisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub class: String,
    pub serialized: Vec<u8>,
}

struct Open {
    loc: Arc<RegionLoc>,
    conn: Arc<Conn>,
    id: u64,
    /// The next call's sequence number; the server rejects a repeated or skipped one.
    seq: u64,
}

/// Rows of a [`ScanRequest`], in key order; each row is its cells.
pub struct Scanner {
    inner: Arc<Inner>,
    req: ScanRequest,
    /// Where a reopened region scanner starts (inclusive).
    resume: Vec<u8>,
    open: Option<Open>,
    rows: VecDeque<Vec<Cell>>,
    /// The row received in parts so far.
    partial: Stitcher,
    done: bool,
    reopens: u32,
    partials: u32,
    heartbeats: u32,
}

impl Client {
    /// Starts a scan; no RPC is made before the first [`Scanner::next`].
    pub fn scan(&self, req: ScanRequest) -> Scanner {
        let empty = !req.stop.is_empty() && req.start >= req.stop;
        Scanner {
            inner: self.inner.clone(),
            resume: req.start.clone(),
            req,
            open: None,
            rows: VecDeque::new(),
            partial: Stitcher::default(),
            // An empty range needs no RPC (and a 2.x server must not see start == stop, see proto_scan).
            done: empty,
            reopens: 0,
            partials: 0,
            heartbeats: 0,
        }
    }

    /// Every row of the scan (for ranges known to be small).
    pub async fn scan_all(&self, req: ScanRequest) -> Result<Vec<Vec<Cell>>> {
        let mut s = self.scan(req);
        let mut rows = Vec::new();
        while let Some(r) = s.next().await? {
            rows.push(r);
        }
        Ok(rows)
    }
}

impl Scanner {
    /// The next row, `None` at the end. An error is final for this scanner (retriable failures were retried
    /// until the client's operation deadline, per page).
    pub async fn next(&mut self) -> Result<Option<Vec<Cell>>> {
        loop {
            if let Some(r) = self.rows.pop_front() {
                return Ok(Some(r));
            }
            if self.done {
                return Ok(None);
            }
            self.fetch().await?;
        }
    }

    /// How often a region scanner was reopened after a failure (a split, a move, an expired lease).
    pub fn reopens(&self) -> u32 {
        self.reopens
    }

    /// How many partial results (parts of a row bigger than the page size) were stitched into rows.
    pub fn partial_results(&self) -> u32 {
        self.partials
    }

    /// How many heartbeat pages came (the server's time limit passed before a page filled: a long filtered stretch).
    pub fn heartbeats(&self) -> u32 {
        self.heartbeats
    }

    /// Extends the server-side scanner's lease (a caller pausing longer than the lease between pages). Not
    /// needed for correctness: an expired scanner is reopened at the resume key.
    pub async fn renew_lease(&mut self) -> Result<()> {
        let Some(open) = &self.open else { return Ok(()) };
        let req = proto::ScanRequest {
            scanner_id: Some(open.id),
            number_of_rows: Some(0),
            renew: Some(true),
            ..Default::default()
        };
        let _: proto::ScanResponse = open.conn.call("Scan", &req, self.inner.cfg.rpc_timeout).await?;
        Ok(())
    }

    /// Closes the server-side scanner now (dropping the scanner does it in the background).
    pub async fn close(mut self) -> Result<()> {
        self.done = true;
        match self.open.take() {
            Some(open) => close_call(&open, self.inner.cfg.rpc_timeout).await,
            None => Ok(()),
        }
    }

    /// One page, retried per the error table until the deadline.
    async fn fetch(&mut self) -> Result<()> {
        let mut attempts = self.inner.attempts();
        loop {
            let timeout = self.inner.rpc_timeout(&attempts);
            match self.fetch_once(timeout).await {
                Ok(()) => return Ok(()),
                Err((loc, e)) => {
                    tracing::debug!(error = %e, resume = ?self.resume, "hbase scan reopening");
                    if let Some(loc) = loc {
                        self.inner.forget(&loc, &e);
                    }
                    if let Some(open) = self.open.take() {
                        // The old scanner may still be alive (a timeout, a lease not yet expired): release it.
                        tokio::spawn(async move {
                            let _ = close_call(&open, std::time::Duration::from_secs(5)).await;
                        });
                    }
                    self.partial = Stitcher::default();
                    self.reopens += 1;
                    self.inner.pause(e, &mut attempts).await?;
                }
            }
        }
    }

    async fn fetch_once(&mut self, timeout: std::time::Duration) -> Result<(), (Option<Arc<RegionLoc>>, Error)> {
        let caching = if self.req.caching == 0 { 128 } else { self.req.caching };
        if let Some(open) = &mut self.open {
            let req = proto::ScanRequest {
                scanner_id: Some(open.id),
                number_of_rows: Some(caching),
                next_call_seq: Some(open.seq),
                client_handles_partials: Some(true),
                client_handles_heartbeats: Some(true),
                ..Default::default()
            };
            let resp = open.conn.call("Scan", &req, timeout).await.map_err(|e| (Some(open.loc.clone()), e))?;
            open.seq += 1;
            let loc = open.loc.clone();
            return self.absorb(&loc, resp).map_err(|e| (Some(loc), e));
        }
        let loc = self.inner.locate(&self.req.table, &self.resume).await.map_err(|e| (None, e))?;
        let req = proto::ScanRequest {
            region: Some(proto::RegionSpecifier::name(&loc.name)),
            scan: Some(self.proto_scan()),
            number_of_rows: Some(caching),
            client_handles_partials: Some(true),
            client_handles_heartbeats: Some(true),
            ..Default::default()
        };
        let opened = async {
            let conn = self.inner.conn(&loc.server, timeout).await?;
            let resp: proto::ScanResponse = conn.call("Scan", &req, timeout).await?;
            Ok((conn, resp))
        }
        .await;
        let (conn, resp) = opened.map_err(|e| (Some(loc.clone()), e))?;
        if let Some(id) = resp.scanner_id {
            self.open = Some(Open { loc: loc.clone(), conn, id, seq: 0 });
        }
        self.absorb(&loc, resp).map_err(|e| (Some(loc), e))
    }

    fn proto_scan(&self) -> proto::Scan {
        proto::Scan {
            column: self
                .req
                .families
                .iter()
                .map(|(f, qs)| proto::Column { family: f.clone(), qualifier: qs.clone() })
                .collect(),
            start_row: Some(self.resume.clone()),
            stop_row: (!self.req.stop.is_empty()).then(|| self.req.stop.clone()),
            filter: self
                .req
                .filter
                .as_ref()
                .map(|f| proto::Filter { name: f.class.clone(), serialized_filter: Some(f.serialized.clone()) }),
            max_result_size: (self.req.max_result_size > 0).then_some(self.req.max_result_size),
            caching: Some(if self.req.caching == 0 { 128 } else { self.req.caching }),
            include_stop_row: Some(false),
            ..Default::default()
        }
    }

    /// A whole row: it becomes the next row, and the resume key moves past it.
    fn push_row(&mut self, row: Vec<Cell>) {
        self.resume = row[0].row.clone();
        self.resume.push(0);
        self.rows.push_back(row);
    }

    /// Takes a page's rows and decides where the scan goes next.
    fn absorb(&mut self, loc: &RegionLoc, resp: proto::ScanResponse) -> Result<()> {
        if !resp.cells_per_result.is_empty() {
            return Err(Error::Protocol("the server answered in cell blocks, which were not asked for".into()));
        }
        self.heartbeats += resp.heartbeat_message.unwrap_or(false) as u32;
        self.inner.count(&self.req.table, "scan", resp.results.len() as u64);
        for (i, r) in resp.results.into_iter().enumerate() {
            let partial = r.partial.unwrap_or(false) || resp.partial_flag_per_result.get(i).copied().unwrap_or(false);
            self.partials += partial as u32;
            let cells: Vec<Cell> = r.cell.into_iter().map(Cell::from).collect();
            for row in self.partial.push(cells, partial) {
                self.push_row(row);
            }
        }
        if resp.more_results == Some(false) || resp.more_results_in_region == Some(false) {
            // A row never spans regions: one still "partial" when its region ends is whole.
            if let Some(row) = self.partial.finish() {
                self.push_row(row);
            }
        }
        if resp.more_results == Some(false) {
            // The scan is over (stop row or filter): the server closed the scanner.
            self.open = None;
            self.done = true;
        } else if resp.more_results_in_region == Some(false) {
            // This region is exhausted and its scanner closed; go on at its end key unless that is past the scan.
            self.open = None;
            if loc.end.is_empty() || (!self.req.stop.is_empty() && loc.end.as_slice() >= self.req.stop.as_slice()) {
                self.done = true;
            } else {
                self.resume = loc.end.clone();
            }
        }
        Ok(())
    }
}

/// Stitches rows that arrive in parts (results flagged "may have more cells in row") back together.
#[derive(Default)]
struct Stitcher {
    cells: Vec<Cell>,
}

impl Stitcher {
    /// Takes one result's cells; returns the rows it completes, in order. The flag says a row *may* have more
    /// cells: a flagged row followed by another row had none (HBase's own client reads it so too; the server
    /// flags a row when a size or time limit falls at its end), so it is whole then.
    fn push(&mut self, cells: Vec<Cell>, may_have_more: bool) -> Vec<Vec<Cell>> {
        let mut whole = Vec::new();
        if self.cells.last().zip(cells.first()).is_some_and(|(last, first)| last.row != first.row) {
            whole.extend(self.finish());
        }
        self.cells.extend(cells);
        if !may_have_more {
            whole.extend(self.finish());
        }
        whole
    }

    /// The row received so far, as a whole row (its region ended).
    fn finish(&mut self) -> Option<Vec<Cell>> {
        (!self.cells.is_empty()).then(|| std::mem::take(&mut self.cells))
    }
}

async fn close_call(open: &Open, timeout: std::time::Duration) -> Result<()> {
    let req = proto::ScanRequest {
        scanner_id: Some(open.id),
        number_of_rows: Some(0),
        close_scanner: Some(true),
        ..Default::default()
    };
    let _: proto::ScanResponse = open.conn.call("Scan", &req, timeout).await?;
    Ok(())
}

impl Drop for Scanner {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            // Without a runtime (dropped after it stopped) the lease expires on its own.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = close_call(&open, std::time::Duration::from_secs(5)).await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(row: &str, q: &str) -> Cell {
        Cell { row: row.into(), family: b"t".to_vec(), qualifier: q.into(), timestamp: 1, value: vec![] }
    }

    #[test]
    fn parts_of_a_row_are_stitched_into_one_row() {
        let mut s = Stitcher::default();
        assert!(s.push(vec![cell("a", "1")], true).is_empty());
        assert!(s.push(vec![cell("a", "2")], true).is_empty());
        assert_eq!(s.push(vec![cell("a", "3")], false), vec![vec![cell("a", "1"), cell("a", "2"), cell("a", "3")]]);
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_row_that_may_have_more_is_whole_when_another_row_follows_or_its_region_ends() {
        // Seen from HBase 2.6 emptying a two-family table: row a flagged, then row b.
        let mut s = Stitcher::default();
        assert!(s.push(vec![cell("a", "1")], true).is_empty());
        assert_eq!(s.push(vec![cell("b", "1")], true), vec![vec![cell("a", "1")]]);
        assert_eq!(s.push(vec![cell("c", "1")], false), vec![vec![cell("b", "1")], vec![cell("c", "1")]]);
        assert!(s.push(vec![cell("d", "1")], true).is_empty());
        assert_eq!(s.finish(), Some(vec![cell("d", "1")]));
    }
}
