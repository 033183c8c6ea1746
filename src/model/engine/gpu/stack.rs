//! A whole BERT on a device: the embeddings and every layer, forward with the tape and backward
//! into a gradient arena, as the CPU engine's `Engine::forward` / `backward` (../stack.rs) with
//! the same dropout sites and masks. The weights are read where the model keeps them (candle's
//! tensors on the card), but for q, k and v, copied into one (3h x h) weight and one 3h bias a
//! forward (the optimizer changes them between steps). Everything else lives in a workspace
//! allocated for a row and item capacity at the first step and grown, once, by a larger batch;
//! a step of the same size allocates nothing.
use super::device::{Addr, Arg, Buf, Device};
use super::layer::{
    self, parts, row_blocks, Dims, LayerAddrs, LayerParams, LayerTape, Rows, Scratch, ROW_WARPS,
};
use crate::model::engine::embeddings::check_tables;
use crate::model::engine::packed::Packed;
use crate::model::engine::stack::Engine;
use crate::model::engine::weights::{embedding_tensors, layer_tensors};
use crate::model::kernels::cuda::KernelMask;
use crate::model::{Bert, BertLayer, Dropout};
use candle_core::{bail, Result, Tensor};

/// Where each parameter's gradient lies in a `Grads` arena (element offsets).
#[derive(Clone, Debug)]
struct Layout {
    /// word, position, type, LayerNorm weight, LayerNorm bias (the last two end to end)
    emb: [usize; 5],
    /// per layer, in `LayerAddrs`' fields' order; g1 b1 bo and g2 b2 bd end to end, as the
    /// LayerNorms' backward writes their partial sums
    layers: Vec<[usize; 12]>,
    len: usize,
}

/// The gradients of a stack's parameters, accumulated over backward passes, in one arena (one
/// zero-fill a step).
pub struct Grads<D: Device> {
    all: Buf<D, f32>,
    layout: Layout,
}

impl<D: Device> Grads<D> {
    fn at(&self, off: usize) -> Addr {
        self.all.at(off)
    }

    /// Zero every gradient (one fill).
    pub fn zero(&self, dev: &D) -> Result<()> {
        dev.zero(self.all.at(0), 4 * self.layout.len)
    }
}

/// The embeddings' LayerNorm tape and the batch's layout on the device, for up to `rows` rows
/// and `items` sequences.
struct Workspace<D: Device> {
    rows: usize,
    items: usize,
    tapes: Vec<LayerTape<D>>,
    hidden: Buf<D, f32>,
    xhat: Buf<D, f32>,
    rstd: Buf<D, f32>,
    de: Buf<D, f32>,
    /// the last layer's gradient, packed (from candle's padded one: `backward_padded`)
    dh: Buf<D, f32>,
    scratch: Scratch<D>,
    /// tokens, positions, types (rows each), then per table the scatter's entries (rows), their
    /// starts (rows + 1) and the rows in entry order (rows)
    meta: Buf<D, u32>,
    /// each item's first row, then each item's length
    items_meta: Buf<D, i32>,
    row_ids: Buf<D, u64>,
}

impl<D: Device> Workspace<D> {
    fn new(dev: &D, rows: usize, items: usize, d: Dims, layers: usize) -> Result<Workspace<D>> {
        let h = d.hidden;
        Ok(Workspace {
            rows,
            items,
            tapes: (0..layers)
                .map(|_| LayerTape::new(dev, rows, d))
                .collect::<Result<_>>()?,
            hidden: Buf::zeros(dev, rows * h)?,
            xhat: Buf::zeros(dev, rows * h)?,
            rstd: Buf::zeros(dev, rows)?,
            de: Buf::zeros(dev, rows * h)?,
            dh: Buf::zeros(dev, rows * h)?,
            scratch: Scratch::new(dev, rows, items, d)?,
            meta: Buf::zeros(dev, 12 * rows + 3)?,
            items_meta: Buf::zeros(dev, 2 * items)?,
            row_ids: Buf::zeros(dev, rows)?,
        })
    }

    fn rows_of(&self, p: &Packed) -> Rows {
        Rows {
            t: p.rows(),
            items: p.lens().len(),
            off: self.items_meta.at(0),
            len: self.items_meta.at(p.lens().len()),
            row_ids: self.row_ids.at(0),
        }
    }
}

/// A forward's batch, for its backward: the packing, each table's scatter entry count, and the
/// layers' weights as the forward read them (q, k and v from its copy).
struct Batch {
    packed: Packed,
    entries: [usize; 3],
    params: Vec<LayerParams>,
}

/// A BERT's engine on device D. It holds no borrow of the model (a training task keeps both):
/// every call takes the model, checked to be the one it was made for.
pub struct Stack<D: Device> {
    dev: D,
    /// the word embeddings' id: the model's identity
    model: candle_core::TensorId,
    dims: Dims,
    /// per layer: q, k and v's weights (3h x h) then their biases (3h), copied each forward
    qkv: Vec<Buf<D, f32>>,
    ws: Option<Workspace<D>>,
    batch: Option<Batch>,
    layout: Layout,
}

fn dims_of(l: &BertLayer) -> Dims {
    let a = &l.attention;
    Dims {
        hidden: a.heads * a.head_dim,
        intermediate: l.intermediate.weight.dims()[0],
        heads: a.heads,
        scale: 1.0 / (a.head_dim as f32).sqrt(),
    }
}

impl<D: Device> Stack<D> {
    /// The stack for `bert`, whose weights live on `dev` (f32, contiguous).
    pub fn new(dev: D, bert: &Bert) -> Result<Stack<D>> {
        let Some(first) = bert.layers.first() else {
            bail!("gpu engine: a model without layers")
        };
        let d = dims_of(first);
        let h = d.hidden;
        let qkv = bert
            .layers
            .iter()
            .map(|_| Buf::zeros(&dev, 3 * h * h + 3 * h))
            .collect::<Result<_>>()?;
        let e = embedding_tensors(&bert.embeddings);
        let mut len = 0;
        let mut take = |n: usize| {
            let at = len;
            len += n;
            at
        };
        let emb = [
            take(e[0].elem_count()),
            take(e[1].elem_count()),
            take(e[2].elem_count()),
            take(h),
            take(h),
        ];
        let (i, mut layers) = (d.intermediate, Vec::new());
        for _ in &bert.layers {
            let wqkv = take(3 * h * h);
            let bqkv = take(3 * h);
            let wo = take(h * h);
            let (g1, b1, bo) = (take(h), take(h), take(h));
            let wi = take(i * h);
            let bi = take(i);
            let wd = take(h * i);
            let (g2, b2, bd) = (take(h), take(h), take(h));
            layers.push([wqkv, bqkv, wo, bo, g1, b1, wi, bi, wd, bd, g2, b2]);
        }
        let model = e[0].id();
        Ok(Stack {
            dev,
            model,
            dims: d,
            qkv,
            ws: None,
            batch: None,
            layout: Layout { emb, layers, len },
        })
    }

    /// A zeroed gradient arena for this stack's parameters.
    pub fn zero_grads(&self) -> Result<Grads<D>> {
        Ok(Grads {
            all: Buf::zeros(&self.dev, self.layout.len)?,
            layout: self.layout.clone(),
        })
    }

    /// Layer l's weights: q, k, v from the copy `forward` made, the rest where the model has them.
    fn params(&self, bert: &Bert, l: usize) -> Result<LayerParams> {
        let layer = &bert.layers[l];
        let t = layer_tensors(layer)?;
        let a = |k: usize| self.dev.tensor_addr(t[k]);
        let h = self.dims.hidden;
        let q = &self.qkv[l];
        Ok(LayerParams {
            w: LayerAddrs {
                wqkv: q.at(0),
                bqkv: q.at(3 * h * h),
                wo: a(6)?,
                bo: a(7)?,
                g1: a(8)?,
                b1: a(9)?,
                wi: a(10)?,
                bi: a(11)?,
                wd: a(12)?,
                bd: a(13)?,
                g2: a(14)?,
                b2: a(15)?,
            },
            eps1: layer.attention.norm.eps() as f32,
            eps2: layer.norm.eps() as f32,
        })
    }

    fn grad_addrs(&self, g: &Grads<D>, l: usize) -> LayerAddrs {
        LayerAddrs::of(g.layout.layers[l].map(|off| g.at(off)))
    }

    /// The device the stack runs on.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// Err unless `bert` is the model the stack was made for.
    fn check(&self, bert: &Bert) -> Result<()> {
        if embedding_tensors(&bert.embeddings)[0].id() != self.model {
            bail!("gpu engine: called with another model than it was made for")
        }
        Ok(())
    }

    /// The workspace `ws`, grown to hold `rows` rows and `items` items if it does not.
    fn grow<'w>(
        ws: &'w mut Option<Workspace<D>>,
        dev: &D,
        (rows, items): (usize, usize),
        d: Dims,
        layers: usize,
    ) -> Result<&'w Workspace<D>> {
        let fits = ws
            .as_ref()
            .is_some_and(|w| w.rows >= rows && w.items >= items);
        if !fits {
            // grown past the batch at hand, so that slightly longer batches fit too
            let (r, n) = match ws.as_ref() {
                Some(w) => (rows.max(w.rows) * 5 / 4, items.max(w.items)),
                None => (rows, items),
            };
            *ws = None; // freed before the larger one is allocated
            *ws = Some(Workspace::new(dev, r, n, d, layers)?);
        }
        Ok(ws.as_ref().expect("made above"))
    }

    /// Forward of token sequences through the embeddings and every layer, keeping the tape;
    /// `keys` name each sequence for its dropout masks (by place where None), as the CPU engine.
    /// Returns the address of the last layer's rows (rows x hidden, packed), valid until the
    /// next forward.
    pub fn forward(
        &mut self,
        bert: &Bert,
        ids: &[&[u32]],
        types: Option<&[&[u32]]>,
        keys: Option<&[u64]>,
        drop: Option<&Dropout>,
    ) -> Result<Addr> {
        self.check(bert)?;
        let e = embedding_tensors(&bert.embeddings);
        check_tables((e[0].dims()[0], e[1].dims()[0], e[2].dims()[0]), ids, types)?;
        let packed = Packed::of(ids, keys)?;
        let (t, items, h) = (packed.rows(), ids.len(), self.dims.hidden);
        if t == 0 {
            bail!("gpu engine: a batch without tokens")
        }
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
        // q, k and v as one, from the model's current weights
        let h3 = 3 * h * h;
        for (l, layer) in bert.layers.iter().enumerate() {
            let ts = layer_tensors(layer)?;
            let q = &self.qkv[l];
            for k in 0..3 {
                let w = self.dev.tensor_addr(ts[2 * k])?;
                let b = self.dev.tensor_addr(ts[2 * k + 1])?;
                self.dev.copy(q.at(k * h * h), w, 4 * h * h)?;
                self.dev.copy(q.at(h3 + k * h), b, 4 * h)?;
            }
        }
        let params: Vec<LayerParams> = (0..bert.layers.len())
            .map(|l| self.params(bert, l))
            .collect::<Result<_>>()?;
        let (g, bb) = (self.dev.tensor_addr(e[3])?, self.dev.tensor_addr(e[4])?);
        let tables = [
            self.dev.tensor_addr(e[0])?,
            self.dev.tensor_addr(e[1])?,
            self.dev.tensor_addr(e[2])?,
        ];
        let eps = bert.embeddings.norm.eps() as f32;
        let dims = self.dims;
        let dev = &self.dev;
        let ws = Self::grow(&mut self.ws, dev, (t, items), dims, bert.layers.len())?;
        ws.meta.write(dev, 0, &meta)?;
        ws.items_meta.write(dev, 0, &im)?;
        ws.row_ids.write(dev, 0, packed.row_ids())?;
        let rows = ws.rows_of(&packed);
        let Some(first) = ws.tapes.first() else {
            bail!("gpu engine: a model without layers")
        };
        let args = [
            Arg::Addr(ws.meta.at(0)),
            Arg::Addr(ws.meta.at(t)),
            Arg::Addr(ws.meta.at(2 * t)),
            Arg::Addr(tables[0]),
            Arg::Addr(tables[1]),
            Arg::Addr(tables[2]),
            Arg::Addr(g),
            Arg::Addr(bb),
            Arg::F32(eps),
            Arg::Mask(KernelMask::of(Engine::mask(drop, 0, false).as_ref())),
            Arg::Addr(rows.row_ids),
            Arg::I32(t as i32),
            Arg::I32(h as i32),
            Arg::Addr(first.x.at(0)),
            Arg::Addr(ws.xhat.at(0)),
            Arg::Addr(ws.rstd.at(0)),
        ];
        dev.launch("embed_forward", (row_blocks(t), 1), 32 * ROW_WARPS, &args)?;
        let n = ws.tapes.len();
        for (l, p) in params.iter().enumerate() {
            let out = if l + 1 < n {
                ws.tapes[l + 1].x.at(0)
            } else {
                ws.hidden.at(0)
            };
            let sites = Engine::sites(drop, l);
            layer::forward(dev, p, dims, &rows, &sites, &ws.tapes[l], &ws.scratch, out)?;
        }
        let hidden = ws.hidden.at(0);
        self.batch = Some(Batch {
            packed,
            entries,
            params,
        });
        Ok(hidden)
    }

    /// Backward of the last `forward` from the gradient of its last layer's rows (`dhidden`,
    /// rows x hidden on the device), with the same dropout; accumulates into `grads`.
    pub fn backward(
        &mut self,
        bert: &Bert,
        dhidden: Addr,
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        self.check(bert)?;
        let Some(batch) = self.batch.take() else {
            bail!("gpu engine: backward without a forward before it")
        };
        let (Some(ws), dev, dims) = (self.ws.as_ref(), &self.dev, self.dims) else {
            bail!("gpu engine: backward without a workspace")
        };
        let (t, h) = (batch.packed.rows(), dims.hidden);
        let rows = ws.rows_of(&batch.packed);
        let n = ws.tapes.len();
        for l in (0..n).rev() {
            let dout = if l + 1 == n {
                dhidden
            } else {
                ws.scratch.dx().at(0)
            };
            let p = &batch.params[l];
            let sites = Engine::sites(drop, l);
            let gr = self.grad_addrs(grads, l);
            layer::backward(
                dev,
                p,
                dims,
                &rows,
                &sites,
                &ws.tapes[l],
                &ws.scratch,
                dout,
                &gr,
            )?;
        }
        // the embeddings: dropout and LayerNorm backward, then each table's rows by entry
        let e = embedding_tensors(&bert.embeddings);
        let partial_rows = parts(t);
        let partial = ws.scratch.partial();
        let args = [
            Arg::Addr(ws.scratch.dx().at(0)),
            Arg::Addr(ws.xhat.at(0)),
            Arg::Addr(ws.rstd.at(0)),
            Arg::Addr(dev.tensor_addr(e[3])?),
            Arg::Mask(KernelMask::of(Engine::mask(drop, 0, false).as_ref())),
            Arg::Mask(KernelMask::default()),
            Arg::Addr(rows.row_ids),
            Arg::I32(t as i32),
            Arg::I32(h as i32),
            Arg::Addr(ws.de.at(0)),
            Arg::Addr(0),
            Arg::Addr(partial),
        ];
        dev.launch(
            "residual_norm_backward",
            (partial_rows as u32, 1),
            32 * ROW_WARPS,
            &args,
        )?;
        let off = &grads.layout.emb;
        layer::add_partials(
            dev,
            partial,
            partial_rows,
            2 * h,
            h,
            &[grads.at(off[3]), grads.at(off[4])],
        )?;
        for (k, &entries) in batch.entries.iter().enumerate() {
            // meta's sections for table k (see `forward`)
            let base = 3 * t + k * (3 * t + 1);
            let args = [
                Arg::Addr(ws.meta.at(base)),
                Arg::Addr(ws.meta.at(base + t)),
                Arg::Addr(ws.meta.at(base + 2 * t + 1)),
                Arg::I32(entries as i32),
                Arg::Addr(ws.de.at(0)),
                Arg::I32(h as i32),
                Arg::Addr(grads.at(off[k])),
            ];
            dev.launch("embed_scatter", (entries as u32, 1), 128, &args)?;
        }
        Ok(())
    }

    /// The last forward's rows (at `hidden`) as candle's heads take them: a (b, len, h) tensor
    /// on `on` (zeros where padded), its (b, len) 0/1 mask, and len.
    pub fn padded(
        &self,
        hidden: Addr,
        on: &candle_core::Device,
    ) -> Result<(Tensor, Tensor, usize)> {
        let (Some(batch), Some(ws)) = (&self.batch, &self.ws) else {
            bail!("gpu engine: no forward to pad")
        };
        let p = &batch.packed;
        let (b, h) = (p.lens().len(), self.dims.hidden);
        let len = p.lens().iter().copied().max().unwrap_or(0).max(1);
        let (states, at) = self.dev.new_tensor(&[b, len, h], on)?;
        let rows = ws.rows_of(p);
        let args = [
            Arg::Addr(hidden),
            Arg::Addr(rows.off),
            Arg::Addr(rows.len),
            Arg::I32(len as i32),
            Arg::I32(h as i32),
            Arg::Addr(at),
        ];
        self.dev.launch("pad_rows", (b as u32, 1), 256, &args)?;
        let mut mask = vec![0u32; b * len];
        for (i, &n) in p.lens().iter().enumerate() {
            mask[i * len..i * len + n].fill(1);
        }
        Ok((states, Tensor::from_vec(mask, (b, len), on)?, len))
    }

    /// `backward` from the gradient of `padded`'s states (b, len, h; the padding's part dropped).
    pub fn backward_padded(
        &mut self,
        bert: &Bert,
        g: &Tensor,
        drop: Option<&Dropout>,
        grads: &Grads<D>,
    ) -> Result<()> {
        let (Some(batch), Some(ws)) = (&self.batch, &self.ws) else {
            bail!("gpu engine: backward without a forward before it")
        };
        let p = &batch.packed;
        let (b, len, h) = g.dims3()?;
        if b != p.lens().len()
            || h != self.dims.hidden
            || len < p.lens().iter().copied().max().unwrap_or(0)
        {
            bail!(
                "gpu engine: a gradient of {:?} for {} items",
                g.dims(),
                p.lens().len()
            )
        }
        let g = g.contiguous()?;
        let rows = ws.rows_of(p);
        let args = [
            Arg::Addr(self.dev.tensor_addr(&g)?),
            Arg::Addr(rows.off),
            Arg::Addr(rows.len),
            Arg::I32(len as i32),
            Arg::I32(h as i32),
            Arg::Addr(ws.dh.at(0)),
        ];
        self.dev.launch("unpad_rows", (b as u32, 1), 256, &args)?;
        let dh = ws.dh.at(0);
        self.backward(bert, dh, drop, grads)
    }

    /// Each parameter (the model's tensor) with its gradient as a new tensor on `on`, in
    /// `Engine::export`'s order (q, k and v split again): device copies out of the arena.
    pub fn export(
        &self,
        bert: &Bert,
        grads: &Grads<D>,
        on: &candle_core::Device,
    ) -> Result<Vec<(Tensor, Tensor)>> {
        let mut out = Vec::new();
        for (t, at) in self.parameters(bert, grads)? {
            let (g, addr) = self.dev.new_tensor(t.dims(), on)?;
            self.dev.copy(addr, grads.at(at), 4 * t.elem_count())?;
            out.push((t, g));
        }
        Ok(out)
    }

    /// Each parameter with where its gradient starts in the arena, in `Engine::export`'s order.
    fn parameters(&self, bert: &Bert, grads: &Grads<D>) -> Result<Vec<(Tensor, usize)>> {
        self.check(bert)?;
        let mut out = Vec::new();
        let e = embedding_tensors(&bert.embeddings);
        for (k, t) in e.into_iter().enumerate() {
            out.push((t.clone(), grads.layout.emb[k]));
        }
        let h = self.dims.hidden;
        for (layer, off) in bert.layers.iter().zip(&grads.layout.layers) {
            let ts = layer_tensors(layer)?;
            let mut at: Vec<usize> = Vec::new();
            for k in 0..3 {
                at.push(off[0] + k * h * h);
                at.push(off[1] + k * h);
            }
            // wo bo g1 b1 wi bi wd bd g2 b2, as layer_tensors orders them
            at.extend([2usize, 3, 4, 5, 6, 7, 8, 9, 10, 11].map(|f| off[f]));
            out.extend(ts.into_iter().cloned().zip(at));
        }
        Ok(out)
    }

    /// Each parameter (the model's tensor) with its gradient read back to the host, in
    /// `Engine::export`'s order (q, k and v split again).
    pub fn export_host(&self, bert: &Bert, grads: &Grads<D>) -> Result<Vec<(Tensor, Vec<f32>)>> {
        let all = grads.all.read(&self.dev, 0, grads.layout.len)?;
        Ok(self
            .parameters(bert, grads)?
            .into_iter()
            .map(|(t, at)| {
                let n = t.elem_count();
                (t, all[at..at + n].to_vec())
            })
            .collect())
    }
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
