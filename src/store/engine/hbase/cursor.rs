//! Cursors over HBase tables: forward scans fed by a task on the engine's runtime, backward reads from a bounded
//! forward scan.
use super::*;

/// A forward scan of one table (see [`Cursor`]): rows are fetched by a task on the engine's runtime, a batch
/// ahead of the reader.
pub(super) struct HBaseCursor {
    pub(super) engine_client: Arc<Client>,
    pub(super) handle: tokio::runtime::Handle,
    pub(super) table: Table,
    pub(super) rows: Option<tokio::sync::mpsc::Receiver<Result<Entry, rtsd_hbase::Error>>>,
    pub(super) current: Option<(Vec<u8>, Vec<u8>)>,
    pub(super) error: Option<StoreError>,
    /// Backward reads: the rows of a bounded forward scan, walked from the end (HBase's reversed scans are not
    /// in rtsd's client), and the position in them.
    pub(super) behind: Vec<(Vec<u8>, Vec<u8>)>,
}

impl HBaseCursor {
    pub(super) fn unsupported(&mut self, what: &str) {
        self.rows = None;
        self.current = None;
        self.error = Some(StoreError::Engine(EngineError {
            kind: EngineErrorKind::Other,
            message: format!("HBase error: the HBase engine cannot {what} yet"),
        }));
    }
}

impl HBaseCursor {
    /// Starts a scan at `key`, up to `end` (exclusive; empty = the table's end).
    pub(super) fn start(&mut self, key: &[u8], end: &[u8]) {
        // An async channel: the scan task never blocks a runtime thread when the reader is slow (two blocked
        // tasks would stall every other call of the engine).
        let (tx, rx) = tokio::sync::mpsc::channel(self.table.scan_caching as usize);
        let (client, table) = (self.engine_client.clone(), self.table.clone());
        let (qualifier, start) = table.cell_of(key);
        let (qualifier, start) = (qualifier.map(<[u8]>::to_vec), start.to_vec());
        let stop = match table.cells {
            // The end of a cell key names a row of some qualifier; rows of one qualifier are not contiguous.
            CellMap::QualifierRow => Vec::new(),
            _ => end.to_vec(),
        };
        self.handle.spawn(async move {
            // A QualifierRow scan reads one qualifier's cells (one UID kind's names): the store's keys put the
            // qualifier first, so its key order is that kind's rows in order.
            let qualifiers: Vec<Vec<u8>> = qualifier.iter().filter(|q| !q.is_empty()).cloned().collect();
            let mut scanner = client.scan(ScanRequest {
                table: table.hbase.clone(),
                start,
                stop,
                families: vec![(table.family.clone(), qualifiers)],
                caching: table.scan_caching,
                ..Default::default()
            });
            loop {
                let row = match scanner.next().await {
                    Ok(Some(cells)) => cells,
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                let Some(first) = row.first() else { continue };
                let entries: Vec<(Vec<u8>, Vec<u8>)> = match table.cells {
                    CellMap::QualifierRow => row
                        .iter()
                        .map(|c| (crate::store::engine::cell_key(&c.qualifier, &c.row), c.value.clone()))
                        .collect(),
                    _ => value_of(&table, &first.row, &row).map(|v| (first.row.clone(), v)).into_iter().collect(),
                };
                for entry in entries {
                    // The reader went away: the scan ends (the scanner is closed when dropped).
                    if tx.send(Ok(entry)).await.is_err() {
                        return;
                    }
                }
            }
        });
        self.rows = Some(rx);
        self.error = None;
        self.behind.clear();
        self.next();
    }

    /// Positions at the last row of `floor..=key` (`floor` empty: the table's first row), read forward.
    pub(super) fn read_backward(&mut self, key: Option<&[u8]>, floor: &[u8]) {
        let end = key.map(|k| {
            let mut end = k.to_vec();
            end.push(0);
            end
        });
        self.start(floor, end.as_deref().unwrap_or_default());
        let mut rows = Vec::new();
        while let Some(row) = self.current.take() {
            rows.push(row);
            self.next();
        }
        self.rows = None;
        self.behind = rows;
        self.current = self.behind.pop();
    }
}

impl Cursor for HBaseCursor {
    fn seek(&mut self, key: &[u8]) {
        self.start(key, b"");
    }

    fn seek_until(&mut self, key: &[u8], end: &[u8]) {
        self.start(key, end);
    }

    /// Reads the whole table forward: for rtsd's small tables (the rollup marks).
    fn seek_to_last(&mut self) {
        self.read_backward(None, b"");
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        self.read_backward(Some(key), b"");
    }

    fn seek_for_prev_from(&mut self, key: &[u8], floor: &[u8]) {
        self.read_backward(Some(key), floor);
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }

    fn next(&mut self) {
        if self.rows.is_none() && self.current.is_some() {
            // Positioned by a backward read, which keeps no rows after the current one.
            self.unsupported("turn a backward read forwards (next after seek_for_prev)");
            return;
        }
        self.current = match self.rows.as_mut().map(|rx| park_on(rx.recv())) {
            Some(Some(Ok(entry))) => Some(entry),
            Some(Some(Err(e))) => {
                self.error = Some(hbase_error(e));
                None
            }
            // The scan task finished.
            Some(None) | None => None,
        };
    }

    fn prev(&mut self) {
        if self.rows.is_some() {
            // Positioned by a forward seek: HBase would need a reversed scan from here.
            self.unsupported("turn a forward scan backwards (prev after seek)");
            return;
        }
        self.current = self.behind.pop();
    }

    fn status(&self) -> Result<(), StoreError> {
        match &self.error {
            Some(StoreError::Engine(e)) => {
                Err(StoreError::Engine(EngineError { kind: e.kind, message: e.message.clone() }))
            }
            Some(e) => Err(StoreError::Corrupt(e.to_string())),
            None => Ok(()),
        }
    }
}
