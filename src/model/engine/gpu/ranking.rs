//! An in-batch ranking loss (the bi-encoder's mnr, cached-mnr, mnr-masked, contrastive:
//! train's `LossSpec::ranking`) on the device, over embeddings already there: cuBLAS's products,
//! heads.cu's normalisation and `ranking_rows` for the softmax's reductions, so that a step hands
//! candle nothing and allocates nothing after its first (issue 57, item 1). Here, beside the
//! kernel it launches; the same arithmetic as train/losses/functional.rs's `in_batch_ranking`,
//! which the tests (train/biencoder/gpu_ranking_test.rs) hold it to.
use super::buffers::ROW_WARPS;
use super::device::{Addr, Arg, Buf, Device, Op, Operands};
use super::heads::{normalize, normalize_backward};
use crate::error::Result;

/// An in-batch ranking loss's form (anchors are the first text column, candidates the columns
/// after it): what a loss declares (train's `LossSpec::ranking`, re-exported as
/// `losses::Ranking`, whose `forward` runs it in candle) and what the device runs here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranking {
    /// What the similarities are multiplied by before the softmax.
    pub scale: f64,
    /// Cosine similarity (else the dot product).
    pub cosine: bool,
    /// Another row's positive leaves row i's softmax when the two rows share their anchor or
    /// positive text (mnr-masked; the target is the rows' text ids).
    pub exclude_shared: bool,
}

/// The loss's memory for up to `rows` embeddings of `width` (anchors then candidates) and
/// `anchors` anchors, grown by a larger batch and otherwise reused.
pub struct RankingRoom<D: Device> {
    rows: usize,
    anchors: usize,
    width: usize,
    normed: Buf<D, f32>,
    norms: Buf<D, f32>,
    scores: Buf<D, f32>,
    loss: Buf<D, f32>,
    ids: Buf<D, u32>,
}

impl<D: Device> RankingRoom<D> {
    fn fits(&self, rows: usize, anchors: usize, width: usize) -> bool {
        self.rows >= rows && self.anchors >= anchors && self.width == width
    }

    fn new(dev: &D, rows: usize, anchors: usize, width: usize) -> Result<RankingRoom<D>> {
        Ok(RankingRoom {
            rows,
            anchors,
            width,
            normed: Buf::zeros(dev, rows * width)?,
            norms: Buf::zeros(dev, rows)?,
            scores: Buf::zeros(dev, anchors * (rows - anchors))?,
            loss: Buf::zeros(dev, anchors)?,
            ids: Buf::zeros(dev, 2 * anchors)?,
        })
    }
}

/// The batch's shape: `anchors` rows of anchors, then `rows - anchors` candidates (the other
/// columns' rows, in column order), each `width` wide.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub rows: usize,
    pub anchors: usize,
    pub width: usize,
}

/// Ranking loss `r` over the embeddings at `emb` (`shape`), weight x its batch mean: returns its
/// value, and writes the gradient with respect to the embeddings at `grad` (rows x width,
/// every element written). `ids` (anchors x 2, the rows' text ids) where `r` excludes shared
/// texts.
pub fn ranking_loss<D: Device>(
    dev: &D,
    room: &mut Option<RankingRoom<D>>,
    r: Ranking,
    (emb, shape): (Addr, Shape),
    ids: Option<&[u32]>,
    weight: f64,
    grad: Addr,
) -> Result<f64> {
    let Shape {
        rows: n,
        anchors: b,
        width: w,
    } = shape;
    if b == 0 || n <= b {
        return Err(crate::error::Error::msg(format!(
            "ranking loss on the device: {b} anchors among {n} rows"
        )));
    }
    let c = n - b;
    if !room.as_ref().is_some_and(|x| x.fits(n, b, w)) {
        *room = None; // freed before the larger one is allocated
        *room = Some(RankingRoom::new(dev, n, b, w)?);
    }
    let room = room.as_ref().expect("made above");
    // the similarities' operands: unit rows for the cosine, the embeddings for the dot product
    let x = if r.cosine {
        normalize(dev, emb, (n, w), room.normed.at(0), room.norms.at(0))?;
        room.normed.at(0)
    } else {
        emb
    };
    let (anchors, candidates) = (x, x + (b * w * 4) as Addr);
    let s = room.scores.at(0);
    dev.gemm(
        Operands::F32,
        (Op::N, Op::T),
        (b, c, w),
        (anchors, w),
        (candidates, w),
        0.0,
        (s, c),
    )?;
    let ids_at = match (r.exclude_shared, ids) {
        (true, Some(v)) if v.len() == 2 * b => {
            room.ids.write(dev, 0, v)?;
            room.ids.at(0)
        }
        (true, _) => {
            return Err(crate::error::Error::msg(
                "ranking loss on the device: shared texts to exclude and no text ids for them",
            ))
        }
        (false, _) => 0,
    };
    let args = [
        Arg::Addr(s),
        Arg::Addr(ids_at),
        Arg::I32(b as i32),
        Arg::I32(c as i32),
        Arg::F32(r.scale as f32),
        Arg::F32(weight as f32),
        Arg::Addr(room.loss.at(0)),
    ];
    let blocks = (b as u32).div_ceil(ROW_WARPS);
    dev.launch("ranking_rows", (blocks, 1), 32 * ROW_WARPS, &args)?;
    // the scores are now their gradient G (b x c): anchors' gradient G x candidates, the
    // candidates' G^T x anchors
    let grad_candidates = grad + (b * w * 4) as Addr;
    dev.gemm(
        Operands::F32,
        (Op::N, Op::N),
        (b, w, c),
        (s, c),
        (candidates, w),
        0.0,
        (grad, w),
    )?;
    dev.gemm(
        Operands::F32,
        (Op::T, Op::N),
        (c, w, b),
        (s, c),
        (anchors, w),
        0.0,
        (grad_candidates, w),
    )?;
    if r.cosine {
        let y = (room.normed.at(0), room.norms.at(0));
        normalize_backward(dev, y, grad, (n, w), grad)?;
    }
    // the mean as candle takes it (f32 sum in row order), then the weight
    let losses = room.loss.read(dev, 0, b)?;
    let mean = losses.iter().sum::<f32>() / b as f32;
    Ok(mean as f64 * weight)
}
