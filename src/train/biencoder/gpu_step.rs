//! A bi-encoder step on the GPU engine (model/engine/gpu): every column's rows packed into one
//! forward, each named by (example, column) as the CPU engine names them (so the dropout masks
//! are the CPU engine's), the pooled rows split back into columns for the loss in candle, one
//! backward, the backbone's gradients exported beside the loss head's. One forward instead of one
//! a column: on a card a step's time goes to launches, and a column is as many as the batch.
use super::task::BiEncoderTask;
use crate::error::Result;
use crate::model::engine::gpu::device::Device;
use crate::model::engine::gpu::grads::Grads;
use crate::model::engine::gpu::leaf::GpuLeaf;
use crate::model::engine::gpu::stack::Stack;
use crate::model::Dropout;
use crate::train::grads::ParamGrads;
use crate::train::params;
use crate::train::task::{dropout_key, Gradients};
use candle_core::backprop::GradStore;
use candle_core::Tensor;

/// The card the task's model lives on when the GPU engine trains it: asked for with
/// CONDENSER_GPU_ENGINE=1 (opt-in until its tests have passed on a lent card: written and
/// tested on the CPU's emulation only, docs/gpu.md), f32 weights on a CUDA device, BERT's GELU,
/// heads of width 32 or 64 (the CUDA kernels'), the engine not turned off
/// (CONDENSER_ENGINE=off). GradCache (a mini-batch size) runs on the engine too
/// (gradcache::gpu_gradients). None: candle's graph trains it.
#[cfg(feature = "cuda")]
pub fn card(task: &BiEncoderTask) -> Option<candle_core::cuda::CudaDevice> {
    use crate::model::Activation;
    let value = std::env::var("CONDENSER_GPU_ENGINE").unwrap_or_default();
    let asked = matches!(value.as_str(), "1" | "on");
    if !matches!(value.as_str(), "" | "0" | "off" | "1" | "on") {
        // a typo must not pass for "off" unseen: said once a process
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "warning: CONDENSER_GPU_ENGINE={value:?} is not 1, on, 0 or off; \
                 training through candle's graph"
            )
        });
    }
    let bert = &task.enc.bert;
    let w = bert.embeddings.word.embeddings();
    let fits = asked
        && crate::model::engine::enabled()
        && w.dtype() == candle_core::DType::F32
        && bert
            .layers
            .iter()
            .all(|l| l.act == Activation::Gelu && matches!(l.attention.head_dim, 32 | 64));
    match w.device() {
        candle_core::Device::Cuda(d) if fits => Some(d.clone()),
        _ => None,
    }
}

/// `gradients` on the task's card, the engine made at the first call and kept in the task.
#[cfg(feature = "cuda")]
pub fn on_card(
    task: &BiEncoderTask,
    card: &candle_core::cuda::CudaDevice,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    use crate::model::engine::gpu::cuda::Cuda;
    let mut slot = task.gpu.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        let stack = Stack::new(Cuda::new(card)?, &task.enc.bert)?;
        let grads = stack.zero_grads(&candle_core::Device::Cuda(card.clone()))?;
        *slot = Some((stack, grads));
    }
    let (stack, grads) = slot.as_mut().expect("made above");
    match task.mini_batch {
        Some(m) => super::gradcache::gpu_gradients(task, stack, grads, idx, drop, weight, m),
        None => gradients(task, stack, grads, idx, drop, weight),
    }
}

/// The step's loss and gradients for rows `idx`, on `stack` (the task's model's), accumulating
/// into `grads` (restarted first). `weight` scales the loss (a share of a split batch). The
/// backbone's gradients are views of `grads`' arena, held by the returned gradients' lease.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn gradients<D: Device>(
    task: &BiEncoderTask,
    stack: &mut Stack<D>,
    grads: &mut Grads<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
    weight: f64,
) -> Result<Gradients> {
    grads.restart(stack.device())?;
    let (leaf, emb) = embed(task, stack, idx, drop)?;
    let (loss, value) = task.weighted_loss(&emb, idx, weight)?;
    let store = loss.backward()?;
    leaf.backward(stack, &task.enc.bert, &store, drop, grads)?;
    finish(task, store, grads, value)
}

/// Rows `idx`' columns through `stack` in one forward, each row keyed as the CPU engine keys
/// it: the leaf (its tape in `stack` until the next forward) and each column's pooled rows.
pub(super) fn embed<D: Device>(
    task: &BiEncoderTask,
    stack: &mut Stack<D>,
    idx: &[usize],
    drop: Option<&Dropout>,
) -> Result<(GpuLeaf, Vec<Tensor>)> {
    let (columns, b) = (task.data.texts.len(), idx.len());
    let (mut seqs, mut keys) = (
        Vec::with_capacity(columns * b),
        Vec::with_capacity(columns * b),
    );
    for c in 0..columns {
        seqs.extend(task.column(c, idx));
        keys.extend(idx.iter().map(|&i| dropout_key(i, c)));
    }
    let bert = &task.enc.bert;
    let on = bert.embeddings.word.embeddings().device().clone();
    let leaf = GpuLeaf::forward(stack, bert, &seqs, None, &keys, drop, &on)?;
    let pooled = task.enc.pool(leaf.states.as_tensor(), &leaf.mask)?;
    let emb = (0..columns)
        .map(|c| pooled.narrow(0, c * b, b))
        .collect::<candle_core::Result<_>>()?;
    Ok((leaf, emb))
}

/// The step's gradients: the loss head's from `store`, the backbone's as views of `grads`' arena
/// (held by the result's lease).
pub(super) fn finish<D: Device>(
    task: &BiEncoderTask,
    store: GradStore,
    grads: &Grads<D>,
    value: f64,
) -> Result<Gradients> {
    let mut out = ParamGrads::from_store(&params::var_list(&task.varmap), store);
    let (pairs, lease) = grads.export(&task.enc.bert)?;
    out.add_pairs(pairs)?;
    out.hold(lease);
    Ok(Gradients {
        value,
        parts: Vec::new(),
        grads: out,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{engine_step, BiData, BiEncoderOptions, BiEncoderTask};
    use crate::model::engine::gpu::emulated::Emulated;
    use crate::model::engine::gpu::stack::Stack;
    use crate::model::engine::Engine;
    use crate::model::Dropout;
    use crate::train::losses;
    use crate::train::params;
    use std::path::Path;

    /// The checkout whose datasets/ the test reads: where it was built, or (a test binary carried
    /// to the lent GPU machine) the folder it runs in.
    fn root() -> std::path::PathBuf {
        let built = Path::new(env!("CARGO_MANIFEST_DIR"));
        if built.join("datasets/model").exists() {
            built.to_path_buf()
        } else {
            std::env::current_dir().expect("a working folder")
        }
    }

    /// MNR on all-MiniLM-L6-v2 with STSb dev's pairs, on `device`.
    fn mnr_task(device: candle_core::Device) -> BiEncoderTask {
        let root = root();
        let opts = BiEncoderOptions {
            saved_max_seq_length: None,
            pooling: None,
            max_seq_length: 32,
            num_labels: 3,
            seed: 1,
            device,
            mini_batch_size: None,
        };
        let model = root.join("datasets/model/all-MiniLM-L6-v2");
        let mut task = BiEncoderTask::new(&model, losses::find("mnr").unwrap(), &opts).unwrap();
        let stsb = root.join("datasets/data/stsb/dev.parquet");
        let cols = "sentence1,sentence2".parse().unwrap();
        task.data = BiData::read(&stsb, task.spec, Some(&cols), &task.enc, 3).unwrap();
        task
    }

    /// MNR on all-MiniLM-L6-v2 and six STSb dev pairs, dropout on: the GPU engine's step (on the
    /// emulated device) gives the CPU engine's step's loss and every parameter's gradient.
    #[test]
    fn an_mnr_step_matches_the_cpu_engine() {
        let Some(dev) = Emulated::for_test("the emulated GPU step") else {
            return;
        };
        let task = mnr_task(candle_core::Device::Cpu);
        let mut stack = Stack::new(dev, &task.enc.bert).unwrap();
        let mut grads = stack.zero_grads(&candle_core::Device::Cpu).unwrap();
        let (idx, drop) = step_rows(&task);
        let got = super::gradients(&task, &mut stack, &mut grads, &idx, Some(&drop), 1.0).unwrap();
        same_step(&task, &task, got);
    }

    /// GradCache on the engine (mini-batches of 4 over six pairs: one whole, one ragged; the
    /// emulated device): the CPU engine's whole-batch loss and gradients, as if the batch had
    /// been embedded at once.
    #[test]
    fn gradcache_on_the_engine_matches_the_whole_batch() {
        let Some(dev) = Emulated::for_test("the emulated GPU GradCache step") else {
            return;
        };
        let task = mnr_task(candle_core::Device::Cpu);
        let mut stack = Stack::new(dev, &task.enc.bert).unwrap();
        let mut grads = stack.zero_grads(&candle_core::Device::Cpu).unwrap();
        let (idx, drop) = step_rows(&task);
        let got = super::super::gradcache::gpu_gradients(
            &task,
            &mut stack,
            &mut grads,
            &idx,
            Some(&drop),
            1.0,
            4,
        )
        .unwrap();
        same_step(&task, &task, got);
    }

    /// --precision bf16: the same step with the Linears' products on bf16 operands (the kernels'
    /// `to_bf16`, a bf16 GEMM) against the CPU engine's bf16 step.
    #[test]
    fn a_bf16_mnr_step_matches_the_cpu_engine() {
        use crate::model::kernels::precision::Precision;
        let check = "the emulated GPU step in bf16";
        if let Err(why) = Precision::Bf16.check_cpu("--precision") {
            return crate::runtime::skipped(check, "avx512bf16", &why.to_string());
        }
        let Some(dev) = Emulated::for_test(check) else {
            return;
        };
        let mut task = mnr_task(candle_core::Device::Cpu);
        task.enc.bert.set_precision(Precision::Bf16).unwrap();
        let mut stack = Stack::new(dev, &task.enc.bert).unwrap();
        let mut grads = stack.zero_grads(&candle_core::Device::Cpu).unwrap();
        let (idx, drop) = step_rows(&task);
        let got = super::gradients(&task, &mut stack, &mut grads, &idx, Some(&drop), 1.0).unwrap();
        same_step_within(&task, &task, got, BF16_TOL);
        // the bf16 weights and operand rooms are made once: a second step allocates nothing
        use crate::model::engine::gpu::device::Device;
        let before = stack.device().counts();
        super::gradients(&task, &mut stack, &mut grads, &idx, Some(&drop), 1.0).unwrap();
        let after = stack.device().counts();
        assert_eq!(
            after.allocations, before.allocations,
            "a second bf16 step allocated"
        );
        eprintln!("a bf16 step: {} launches", after.launches - before.launches);
    }

    /// The same step on a card (a `cuda` build's test binary on the lent machine): the task
    /// there trains through the GPU engine as the trainer runs it (`on_card`).
    #[cfg(feature = "cuda")]
    #[test]
    fn an_mnr_step_on_the_card_matches_the_cpu_engine() {
        if crate::model::kernels::blas::blas().is_none() {
            return crate::runtime::skipped("the GPU step on a card", "blas", "no BLAS here");
        }
        let Ok(card) = candle_core::Device::new_cuda(0) else {
            return crate::runtime::skipped("the GPU step on a card", "gpu", "no CUDA device");
        };
        let (on_card, on_cpu) = (mnr_task(card.clone()), mnr_task(candle_core::Device::Cpu));
        let candle_core::Device::Cuda(cd) = &card else {
            unreachable!("new_cuda gives a CUDA device")
        };
        let (idx, drop) = step_rows(&on_card);
        let got = super::on_card(&on_card, cd, &idx, Some(&drop), 1.0).unwrap();
        same_step(&on_cpu, &on_card, got);
        // and GradCache's two passes (mini-batches of 4) on the same card
        let mut cached = mnr_task(card.clone());
        cached.mini_batch = Some(4);
        let got = super::on_card(&cached, cd, &idx, Some(&drop), 1.0).unwrap();
        same_step(&on_cpu, &cached, got);
        // and --precision bf16 (cuBLAS's bf16 GEMM) against the CPU engine's bf16 step
        use crate::model::kernels::precision::Precision;
        if Precision::Bf16.check_cpu("--precision").is_ok() {
            let (mut on_card, mut on_cpu) = (mnr_task(card.clone()), on_cpu);
            on_card.enc.bert.set_precision(Precision::Bf16).unwrap();
            on_cpu.enc.bert.set_precision(Precision::Bf16).unwrap();
            let got = super::on_card(&on_card, cd, &idx, Some(&drop), 1.0).unwrap();
            same_step_within(&on_cpu, &on_card, got, BF16_TOL);
        }
    }

    /// The rows of the compared step and its dropout.
    fn step_rows(task: &BiEncoderTask) -> (Vec<usize>, Dropout) {
        (
            (0..6).collect(),
            Dropout::new(task.folder.config.dropout_rates(), 5),
        )
    }

    /// How far a step's gradients may be from the CPU's: each parameter's largest difference
    /// (of its largest value), and all gradients' difference (of their L2 norm).
    #[derive(Clone, Copy)]
    struct Tol {
        each: f32,
        all: f64,
    }

    impl Tol {
        /// The loss's (of its value).
        fn loss(self) -> f64 {
            self.each as f64 / 20.0
        }
    }

    /// How far a bf16 step's gradients may be from the CPU's, of the largest: the two sides
    /// round f32 values that differ in their last bits (other kernels, other sums) and so now
    /// and then to neighbouring bf16 values.
    /// Measured (MiniLM, six STSb pairs, dropout on): 6.6e-3 and 8.0e-3; with the card's products
    /// left in f32 against the CPU's bf16 ones, 1.9e-2 and 2.0e-2.
    const BF16_TOL: Tol = Tol {
        each: 1e-2,
        all: 1.2e-2,
    };

    /// `got` (a step of `gpu_task`) against the CPU engine's step of `cpu_task` (the same model
    /// and data): the loss, and every parameter's gradient in the varmaps' order.
    fn same_step(
        cpu_task: &BiEncoderTask,
        gpu_task: &BiEncoderTask,
        got: crate::train::task::Gradients,
    ) {
        // measured: 3.9e-6 of the norm
        let tol = Tol {
            each: 2e-4,
            all: 1e-4,
        };
        same_step_within(cpu_task, gpu_task, got, tol)
    }

    /// `same_step` with each gradient within `tol` of its largest value.
    fn same_step_within(
        cpu_task: &BiEncoderTask,
        gpu_task: &BiEncoderTask,
        got: crate::train::task::Gradients,
        tol: Tol,
    ) {
        let (idx, drop) = step_rows(cpu_task);
        let eng = Engine::for_bert(&cpu_task.enc.bert).unwrap();
        let want = engine_step::gradients(cpu_task, &eng, &idx, Some(&drop), 1.0).unwrap();
        assert!(
            (got.value - want.value).abs() <= tol.loss() * want.value.abs().max(1.0),
            "loss {} against {}",
            got.value,
            want.value
        );
        let (gv, wv) = (
            params::var_list(&gpu_task.varmap),
            params::var_list(&cpu_task.varmap),
        );
        let (gs, ws) = (got.grads.in_order(&gv), want.grads.in_order(&wv));
        let (mut off, mut norm) = (0f64, 0f64);
        assert!(wv.len() > 100, "{} parameters", wv.len());
        for (k, (g, w)) in gs.iter().zip(&ws).enumerate() {
            let (Some(g), Some(w)) = (g, w) else {
                panic!("parameter {k}: a gradient on one side only")
            };
            let (g, w): (Vec<f32>, Vec<f32>) = (
                g.flatten_all().unwrap().to_vec1().unwrap(),
                w.flatten_all().unwrap().to_vec1().unwrap(),
            );
            // a floor of 1e-3, not 1: MiniLM's gradients are small, and their rounding smaller
            let scale = w.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            let worst = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                worst <= tol.each * scale,
                "parameter {k}: off by {worst} (scale {scale})"
            );
            for (a, b) in g.iter().zip(&w) {
                off += ((a - b) as f64).powi(2);
                norm += (*b as f64).powi(2);
            }
        }
        // all gradients together: rounding's differences are spread thin, a wrong product's are
        // not
        let rel = (off / norm).sqrt();
        eprintln!("gradients' relative L2 difference: {rel:.3e}");
        assert!(
            rel <= tol.all,
            "the gradients differ by {rel:.3e} of their norm"
        );
    }
}
