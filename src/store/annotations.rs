//! Annotations in OpenTSDB's place: columns of the data rows (spec: ingest §4.8).
use super::*;

/// Where a stored cell is: (row key, qualifier).
pub type CellAddress = (Vec<u8>, Vec<u8>);

/// The non-deleted annotation columns of a row (a deleted annotation is an empty value: merge operands can
/// replace a column but not remove it).
pub(super) fn annotation_values(row: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    codec::columns(row)
        .filter_map(Result::ok)
        .filter(|c| annotation::is_annotation_qualifier(c.qualifier) && !c.value.is_empty())
        .map(|c| c.value.to_vec())
}

impl Store {
    /// The data row an annotation lives in: the series' row for its hour, or for a global annotation (no TSUID)
    /// the row of the all-zero metric, never salted (spec: ingest §4.8).
    pub fn annotation_row_key(&self, tsuid: Option<&[u8]>, start_time: i64) -> Vec<u8> {
        let hour = codec::base_time(start_time);
        match tsuid {
            Some(t) => self.layout.row_key(t, start_time),
            None => {
                let mut key = vec![0u8; self.layout.salt.width + self.layout.uid_widths[0]];
                key.extend_from_slice(&hour.to_be_bytes());
                key
            }
        }
    }

    /// Stores (or, with `None`, deletes) the annotation column `qualifier` of row `key`, durably.
    pub fn put_annotation(&self, key: &[u8], qualifier: &[u8], json: Option<&[u8]>) -> Result<(), StoreError> {
        self.write_annotations([(key, qualifier, json)])
    }

    /// Stores or deletes several annotation columns (row key, qualifier, JSON or `None`) in one durable atomic
    /// write: a bulk request lands whole or not at all. A deletion writes an empty value, which the row's merge
    /// keeps in place of the column (merge operands can replace a column but not remove it).
    pub fn write_annotations<'a>(
        &self,
        columns: impl IntoIterator<Item = (&'a [u8], &'a [u8], Option<&'a [u8]>)>,
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for (key, qualifier, json) in columns {
            let mut column = Vec::new();
            codec::push_column(&mut column, qualifier, json.unwrap_or_default());
            batch.merge(CF_DATA, key, &column);
        }
        self.engine.write(batch, Durability::Synced)
    }

    /// The stored annotation columns (row key, qualifier) of one series, or with `None` the global ones, whose
    /// time lies in `[start_ms, end_ms]`: what a bulk delete removes. Like OpenTSDB's `Annotation.deleteRange` it
    /// reads the metric's rows of the hours in range and keeps the series' own.
    pub fn annotations_between(
        &self,
        tsuid: Option<&[u8]>,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<CellAddress>, StoreError> {
        let mw = self.layout.uid_widths[0];
        let global_metric = vec![0u8; mw];
        let (metric, tags) = match tsuid {
            Some(t) if t.len() >= mw => (&t[..mw], &t[mw..]),
            // No series has a TSUID shorter than a metric UID: nothing of it is stored.
            Some(_) => return Ok(Vec::new()),
            None => (&global_metric[..], &[][..]),
        };
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last));
        let end_hour = codec::base_time(end_ms.clamp(0, last));
        let tags_offset = self.layout.tags_offset();
        let mut out = Vec::new();
        self.for_each_row(metric, start_hour, end_hour, |row| {
            if &row.key[tags_offset..] != tags {
                return Ok(true);
            }
            for column in codec::columns(row.value).filter_map(Result::ok) {
                if !annotation::is_annotation_qualifier(column.qualifier) || column.value.is_empty() {
                    continue;
                }
                let at = annotation::time_from_qualifier(column.qualifier, row.base_time);
                if at.is_some_and(|t| (start_ms..=end_ms).contains(&t)) {
                    out.push((row.key.to_vec(), column.qualifier.to_vec()));
                }
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// The stored JSON of one annotation column, if present and not deleted.
    pub fn get_annotation(&self, key: &[u8], qualifier: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.settle()?;
        let Some(row) = self.engine.get(CF_DATA, key, ReadHints::default())? else { return Ok(None) };
        let found = codec::columns(&row)
            .filter_map(Result::ok)
            .filter(|c| c.qualifier == qualifier && !c.value.is_empty())
            .last()
            .map(|c| c.value.to_vec());
        Ok(found)
    }

    /// Global annotations stored in the hours covering `[start_ms, end_ms]`, as JSON.
    pub fn global_annotations(&self, start_ms: i64, end_ms: i64) -> Result<Vec<Vec<u8>>, StoreError> {
        let last = codec::MAX_SECONDS * 1000 + 999;
        let start_hour = codec::base_time(start_ms.clamp(0, last));
        let end_hour = codec::base_time(end_ms.clamp(0, last));
        let mut out = Vec::new();
        let metric = vec![0u8; self.layout.uid_widths[0]];
        self.for_each_row(&metric, start_hour, end_hour, |row| {
            if row.tags.is_empty() {
                out.extend(annotation_values(row.value));
            }
            Ok(true)
        })?;
        Ok(out)
    }
}
