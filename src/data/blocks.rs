//! Re-batching a stream into global blocks: rows [k * block, (k + 1) * block) counted from the
//! start of the file, cut to a row range. Models then see the same batches whatever the reader's
//! batch size or the shard boundaries (see `shard`).
use super::{Batch, BatchReader};
use crate::error::{Error, Result};
use arrow_array::RecordBatch;
use std::ops::Range;

/// The rows of `range` as batches, each within one global block of `block` rows.
pub fn blocks(reader: BatchReader, range: Range<usize>, block: usize) -> Blocks {
    Blocks {
        reader,
        range,
        block,
        pending: Vec::new(),
        current: None,
    }
}

pub struct Blocks {
    reader: BatchReader,
    range: Range<usize>,
    block: usize,
    /// Pieces of the block being gathered (a block may span reader batches).
    pending: Vec<Batch>,
    /// A reader batch not yet consumed, and how many of its rows are.
    current: Option<(Batch, usize)>,
}

impl Blocks {
    /// Concatenate the gathered pieces into one batch.
    fn flush(&mut self) -> Result<Option<Batch>> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let pieces = std::mem::take(&mut self.pending);
        if pieces.len() == 1 {
            return Ok(pieces.into_iter().next());
        }
        let first = &pieces[0];
        let data: Vec<&RecordBatch> = pieces.iter().map(|p| &p.data).collect();
        let joined = arrow_select::concat::concat_batches(&first.data.schema(), data)
            .map_err(|e| Error::file(&first.path, e))?;
        Ok(Some(Batch {
            path: first.path.clone(),
            first_row: first.first_row,
            data: joined,
        }))
    }

    fn step(&mut self) -> Result<Option<Batch>> {
        loop {
            let (batch, used) = match self.current.take() {
                Some(c) => c,
                None => match self.reader.next() {
                    Some(b) => (b?, 0),
                    None => return self.flush(),
                },
            };
            let start = batch.first_row + used;
            let end = batch.first_row + batch.num_rows();
            if start >= self.range.end {
                return self.flush();
            }
            if end <= self.range.start {
                continue;
            }
            let from = start.max(self.range.start);
            // up to the end of from's block, of the batch or of the range
            let block_end = (from / self.block + 1) * self.block;
            let to = end.min(block_end).min(self.range.end);
            self.pending.push(Batch {
                path: batch.path.clone(),
                first_row: from,
                data: batch.data.slice(from - batch.first_row, to - from),
            });
            if to < end {
                let used = to - batch.first_row;
                self.current = Some((batch, used));
            }
            // a piece that stops short of its block's end stops at its batch's end: the block
            // continues in the next batch, so pending only ever holds one block
            if to == block_end || to == self.range.end {
                return self.flush();
            }
        }
    }
}

impl Iterator for Blocks {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        self.step().transpose()
    }
}
