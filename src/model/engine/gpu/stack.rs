//! A whole BERT on a device: the embeddings and every layer, forward with the tape and backward
//! into a gradient arena, as the CPU engine's `Stack::forward` / `backward` (../cpu/stack.rs) with
//! the same dropout sites and masks. The weights are read where the model keeps them (candle's
//! tensors on the GPU), but for q, k and v, copied into one (3h x h) weight and one 3h bias a
//! forward (the optimizer changes them between steps). Everything else lives in a workspace
//! allocated for a row and item capacity at the first step and grown, once, by a larger batch;
//! a step of the same size allocates nothing.
use super::buffers::{Dims, LayerAddrs, LayerParams, ROW_WARPS};
use super::device::{Addr, Arg, Buf, Device};
use super::grads::{Grads, Layout};
use super::layer::{self, parts, row_blocks};
use super::products::{padded_rows, RoundedWeights};
use super::workspace::{batch_meta, Workspace};
use crate::model::engine::cpu;
use crate::model::engine::cpu::check_tables;
use crate::model::engine::gpu::kernels::KernelMask;
use crate::model::engine::packed::Packed;
use crate::model::engine::weights::{embedding_tensors, layer_tensors};
use crate::model::kernels::precision::Precision;
use crate::model::{Bert, BertLayer, Dropout};
use candle_core::{bail, Result};

// the last forward's rows as the heads take them: padded for candle's, packed for the device's
#[path = "stack_out.rs"]
mod out;

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
    dims: Dims,
    /// per layer: q, k and v's weights (3h x h) then their biases (3h), copied each forward
    qkv: Vec<Buf<D, f32>>,
    /// the product weights as bf16 bits (--precision bf16; made at the first bf16 forward)
    bf16: Option<RoundedWeights<D>>,
    ws: Option<Workspace<D>>,
    batch: Option<Batch>,
    layout: Layout,
    /// false: forward alone (`for_inference`), on two tapes, no backward buffers
    backward: bool,
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
        Ok(Stack {
            dev,
            dims: d,
            qkv,
            bf16: None,
            ws: None,
            batch: None,
            layout: Layout::of(bert, h, d.intermediate),
            backward: true,
        })
    }

    /// The stack for inference: forward alone, its workspace two layers' tapes instead of one
    /// a layer and no room for gradients (encoder/on_gpu.rs); `backward` refuses.
    pub fn for_inference(dev: D, bert: &Bert) -> Result<Stack<D>> {
        Ok(Stack {
            backward: false,
            ..Stack::new(dev, bert)?
        })
    }

    /// Free the workspace and forget the last forward (a backward now refuses; the next forward
    /// allocates the workspace again): a training's dev evaluation runs a stack for inference
    /// of its own, and the GPU need not hold both workspaces at once.
    pub fn release(&mut self) {
        self.batch = None;
        self.ws = None;
    }

    /// A zeroed gradient arena for this stack's parameters, on `on` (candle's handle on the
    /// stack's device: the exported gradients are its views).
    pub fn zero_grads(&self, on: &candle_core::Device) -> Result<Grads<D>> {
        Grads::new(&self.dev, self.layout.clone(), on)
    }

    /// Layer l's weights: q, k, v from the copy `forward` made, the rest where the model has them,
    /// and the bf16 copies where `bf16`.
    fn params(&self, bert: &Bert, l: usize, bf16: bool) -> Result<LayerParams> {
        let layer = &bert.layers[l];
        let t = layer_tensors(layer)?;
        let a = |k: usize| self.dev.tensor_addr(t[k]);
        let h = self.dims.hidden;
        let q = &self.qkv[l];
        let bf16 = match (&self.bf16, bf16) {
            (Some(b), true) => Some(b.of(l)),
            (None, true) => bail!("gpu engine: bf16 products before their weights were made"),
            (_, false) => None,
        };
        Ok(LayerParams {
            bf16,
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
        self.layout.check(bert)
    }

    /// Err where the stack runs forward alone (`for_inference`): no tape for a backward and no
    /// room for gradients, so nothing may write one.
    pub fn can_backward(&self) -> Result<()> {
        if !self.backward {
            bail!("gpu engine: a backward on a stack made for inference (no tape kept)")
        }
        Ok(())
    }

    /// Forward of token sequences through the embeddings and every layer, keeping the tape (a
    /// stack for inference keeps none);
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
        let (meta, entries, im) = batch_meta(&packed, ids, types);
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
        let bf16 = match bert.precision() {
            Precision::F32 => false,
            Precision::Bf16 => true,
            p => bail!(
                "gpu engine: --precision {} (the GPU engine's products are f32 or bf16)",
                p.name()
            ),
        };
        if bf16 {
            if self.bf16.is_none() {
                let layers = bert.layers.len();
                self.bf16 = Some(RoundedWeights::new(&self.dev, layers, self.dims)?);
            }
            let rounded = self.bf16.as_ref().expect("made above");
            rounded.round(&self.dev, bert, &self.qkv)?;
        }
        let params: Vec<LayerParams> = (0..bert.layers.len())
            .map(|l| self.params(bert, l, bf16))
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
        let layers = bert.layers.len();
        // bf16 products run on padded rows (products::padded_rows): room for them
        let room = if bf16 { padded_rows(t) } else { t };
        let shape = (layers, self.backward);
        let ws = Workspace::grow(&mut self.ws, dev, (room, items), dims, shape, bf16)?;
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
            Arg::Mask(KernelMask::of(cpu::Stack::mask(drop, 0, false).as_ref())),
            Arg::Addr(rows.row_ids),
            Arg::I32(t as i32),
            Arg::I32(h as i32),
            Arg::Addr(first.x.at(0)),
            Arg::Addr(ws.xhat.at(0)),
            Arg::Addr(ws.rstd.at(0)),
        ];
        dev.launch("embed_forward", (row_blocks(t), 1), 32 * ROW_WARPS, &args)?;
        // (one tape a layer; for inference two, in turn: tape l % 2's rows are layer l's)
        let n = ws.tapes.len();
        for (l, p) in params.iter().enumerate() {
            let out = if l + 1 < layers {
                ws.tapes[(l + 1) % n].x.at(0)
            } else {
                ws.hidden.at(0)
            };
            let sites = cpu::Stack::sites(drop, l);
            layer::forward(
                dev,
                p,
                dims,
                &rows,
                &sites,
                &ws.tapes[l % n],
                &ws.scratch,
                out,
            )?;
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
        self.can_backward()?;
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
            let sites = cpu::Stack::sites(drop, l);
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
            Arg::Mask(KernelMask::of(cpu::Stack::mask(drop, 0, false).as_ref())),
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
}
