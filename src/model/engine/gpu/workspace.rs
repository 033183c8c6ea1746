//! The GPU engine's per-batch memory: the workspace a stack's forward and backward run in
//! (every layer's tape, the embeddings' LayerNorm tape, the scratch, the batch's tables),
//! allocated for a row and item capacity and grown, once, by a larger batch, and the tables'
//! contents as a forward uploads them.
use super::buffers::{Dims, LayerTape, Rows, Scratch};
use super::device::{Buf, Device};
use crate::model::engine::packed::Packed;
use candle_core::Result;

/// The embeddings' LayerNorm tape and the batch's layout on the device, for up to `rows` rows
/// and `items` sequences.
pub(super) struct Workspace<D: Device> {
    pub(super) rows: usize,
    pub(super) items: usize,
    /// a tape a layer for a backward; two for a forward alone (inference), each layer's rows
    /// in turn, since no backward reads them (layer l's tape is `tapes[l % tapes.len()]`)
    pub(super) tapes: Vec<LayerTape<D>>,
    pub(super) hidden: Buf<D, f32>,
    pub(super) xhat: Buf<D, f32>,
    pub(super) rstd: Buf<D, f32>,
    pub(super) de: Buf<D, f32>,
    /// the last layer's gradient, packed (from candle's padded one: `backward_padded`)
    pub(super) dh: Buf<D, f32>,
    pub(super) scratch: Scratch<D>,
    /// tokens, positions, types (rows each), then per table the scatter's entries (rows), their
    /// starts (rows + 1) and the rows in entry order (rows)
    pub(super) meta: Buf<D, u32>,
    /// each item's first row, then each item's length
    pub(super) items_meta: Buf<D, i32>,
    pub(super) row_ids: Buf<D, u64>,
}

impl<D: Device> Workspace<D> {
    fn new(
        dev: &D,
        (rows, items): (usize, usize),
        d: Dims,
        (layers, backward): (usize, bool),
        bf16: bool,
    ) -> Result<Workspace<D>> {
        let h = d.hidden;
        let tapes = if backward { layers } else { layers.min(2) };
        let back = if backward { rows } else { 1 };
        Ok(Workspace {
            rows,
            items,
            tapes: (0..tapes)
                .map(|_| LayerTape::new(dev, rows, d))
                .collect::<Result<_>>()?,
            hidden: Buf::zeros(dev, rows * h)?,
            xhat: Buf::zeros(dev, rows * h)?,
            rstd: Buf::zeros(dev, rows)?,
            de: Buf::zeros(dev, back * h)?,
            dh: Buf::zeros(dev, back * h)?,
            scratch: Scratch::new(dev, (rows, items), d, bf16, backward)?,
            meta: Buf::zeros(dev, 12 * rows + 3)?,
            items_meta: Buf::zeros(dev, 2 * items)?,
            row_ids: Buf::zeros(dev, rows)?,
        })
    }

    /// The workspace `ws`, grown to hold `rows` rows and `items` items (and bf16 operands where
    /// `bf16`) if it does not: for `layers` layers and their backward, or (`backward` false)
    /// for a forward alone. A stack is one or the other for its life (`Stack::for_inference`).
    pub(super) fn grow<'w>(
        ws: &'w mut Option<Workspace<D>>,
        dev: &D,
        (rows, items): (usize, usize),
        d: Dims,
        layers: (usize, bool),
        bf16: bool,
    ) -> Result<&'w Workspace<D>> {
        let fits = ws.as_ref().is_some_and(|w| {
            w.rows >= rows && w.items >= items && (!bf16 || w.scratch.bf16_rooms().is_some())
        });
        if !fits {
            // grown past the batch at hand, so that slightly longer batches fit too
            let (r, n) = match ws.as_ref() {
                Some(w) => (rows.max(w.rows) * 5 / 4, items.max(w.items)),
                None => (rows, items),
            };
            *ws = None; // freed before the larger one is allocated
            *ws = Some(Workspace::new(dev, (r, n), d, layers, bf16)?);
        }
        Ok(ws.as_ref().expect("made above"))
    }

    pub(super) fn rows_of(&self, p: &Packed) -> Rows {
        Rows {
            t: p.rows(),
            items: p.lens().len(),
            off: self.items_meta.at(0),
            len: self.items_meta.at(p.lens().len()),
            row_ids: self.row_ids.at(0),
        }
    }
}

/// The batch's tables as `forward` uploads them (`Workspace::meta`): the rows' tokens, positions
/// and types, then per table its scatter plan in fixed-size sections (so that backward finds
/// them from the row count alone); each table's entry count; each item's first row, then each
/// item's length (`Workspace::items_meta`).
pub(super) fn batch_meta(
    packed: &Packed,
    ids: &[&[u32]],
    types: Option<&[&[u32]]>,
) -> (Vec<u32>, [usize; 3], Vec<i32>) {
    let t = packed.rows();
    // the rows' tokens, positions and types, and each table's rows grouped by table row
    let mut cols = [
        Vec::with_capacity(t),
        Vec::with_capacity(t),
        Vec::with_capacity(t),
    ];
    for (i, seq) in ids.iter().enumerate() {
        for (pos, &id) in seq.iter().enumerate() {
            cols[0].push(id);
            cols[1].push(pos as u32);
            cols[2].push(types.map_or(0, |ts| ts[i][pos]));
        }
    }
    let mut meta: Vec<u32> = cols.concat();
    let mut entries = [0usize; 3];
    for (k, keyed) in cols.iter().enumerate() {
        let (index, start, order) = scatter_plan(keyed);
        entries[k] = index.len();
        // fixed-size sections, so that backward finds them from the row count alone
        let pad = |mut v: Vec<u32>, n: usize| {
            v.resize(n, 0);
            v
        };
        meta.extend(pad(index, t));
        meta.extend(pad(start, t + 1));
        meta.extend(order);
    }
    let mut im: Vec<i32> = packed.offsets().iter().map(|&o| o as i32).collect();
    im.extend(packed.lens().iter().map(|&n| n as i32));
    (meta, entries, im)
}

/// A table's scatter plan for rows keyed `keys` (a table row each): the distinct keys (entries),
/// where each entry's rows start in `order` (entries + 1), and the rows ordered by key, in row
/// order within a key (so the sums run in a fixed order).
pub(super) fn scatter_plan(keys: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_by_key(|&r| keys[r as usize]);
    let (mut index, mut start) = (Vec::new(), Vec::new());
    for (k, &r) in order.iter().enumerate() {
        let key = keys[r as usize];
        if index.last() != Some(&key) {
            index.push(key);
            start.push(k as u32);
        }
    }
    start.push(keys.len() as u32);
    (index, start, order)
}
