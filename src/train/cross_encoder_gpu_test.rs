//! cross_encoder_gpu.rs's tests: a cross-encoder step on the GPU engine (the emulated device,
//! and a GPU where one answers) against the CPU engine's step of the same task.
use super::super::{CrossEncoderData, CrossEncoderTask};
use crate::model::engine::gpu::Emulated;
use crate::model::engine::gpu::Training;
use crate::model::Dropout;
use crate::train::params;
use crate::train::task::{Gradients, TrainTask};

/// MiniLM as a one-label cross-encoder (BCE; its pooler and classifier fresh from seed 1) on
/// MRPC train's pairs, 32 tokens a pair, on `device`.
fn task(device: &candle_core::Device) -> CrossEncoderTask {
    let root = crate::runtime::test_root();
    let model = root.join("datasets/model/all-MiniLM-L6-v2");
    let train = [root.join("datasets/data/mrpc/train.parquet")];
    let columns = "sentence1,sentence2,label".parse().unwrap();
    let data = CrossEncoderData {
        train: &train,
        columns: &columns,
        both_orders: false,
    };
    CrossEncoderTask::new(&model, 1, 32, data, 1, device).unwrap()
}

/// Six MRPC pairs, dropout on (the classifier's input site too): the GPU engine's step (`[CLS]`
/// taken on the device into a leaf of six rows, the head and BCE in candle) gives the CPU
/// engine's loss and every parameter's gradient, pooler and classifier included.
#[test]
fn a_cross_encoder_step_matches_the_cpu_engine() {
    let Some(dev) = Emulated::for_test("the emulated GPU cross-encoder step") else {
        return;
    };
    let task = task(&candle_core::Device::Cpu);
    let mut gpu = Training::new(dev, &task.model.bert, &candle_core::Device::Cpu).unwrap();
    let (idx, drop) = step(&task);
    let got = task.gpu_gradients(&mut gpu, &idx, Some(&drop), 1.0);
    same_step(&task, &task, got.unwrap());
}

/// --precision bf16 (the Linears' products on bf16 operands, f32 master weights): the GPU
/// engine's step (emulated) against the CPU engine's bf16 step, the head in bf16 on both (it
/// runs on the CPU here; on a GPU candle runs it in f32).
#[test]
fn a_bf16_cross_encoder_step_matches_the_cpu_engine() {
    use crate::model::kernels::precision::Precision;
    let check = "the emulated GPU cross-encoder step in bf16";
    if let Err(why) = Precision::Bf16.check_cpu("--precision") {
        return crate::runtime::skipped(check, "avx512bf16", &why.to_string());
    }
    let Some(dev) = Emulated::for_test(check) else {
        return;
    };
    let mut task = task(&candle_core::Device::Cpu);
    task.set_precision(Precision::Bf16).unwrap();
    let mut gpu = Training::new(dev, &task.model.bert, &candle_core::Device::Cpu).unwrap();
    let (idx, drop) = step(&task);
    let got = task.gpu_gradients(&mut gpu, &idx, Some(&drop), 1.0);
    same_step_within(&task, &task, got.unwrap(), BF16_TOL);
}

/// The same step on a GPU (a `cuda` build's test binary on the lent machine), through the
/// task's own engine there (`on_gpu`).
#[test]
fn a_cross_encoder_step_on_the_gpu_matches_the_cpu_engine() {
    let Some((gpu, ref cd)) = crate::model::engine::gpu::test_gpu("the GPU step on a GPU") else {
        return;
    };
    let (on_gpu, on_cpu) = (task(&gpu), task(&candle_core::Device::Cpu));
    let (idx, drop) = step(&on_gpu);
    let got = on_gpu.on_gpu(cd, &idx, Some(&drop), 1.0).unwrap();
    same_step(&on_cpu, &on_gpu, got);
    // and --precision bf16: candle runs the pooler and classifier in f32 on a GPU, so the
    // CPU's reference has BERT alone in bf16
    use crate::model::kernels::precision::Precision;
    if Precision::Bf16.check_cpu("--precision").is_ok() {
        let (mut on_gpu, mut on_cpu) = (task(&gpu), task(&candle_core::Device::Cpu));
        on_gpu.set_precision(Precision::Bf16).unwrap();
        on_cpu.model.bert.set_precision(Precision::Bf16).unwrap();
        let got = on_gpu.on_gpu(cd, &idx, Some(&drop), 1.0).unwrap();
        same_step_within(&on_cpu, &on_gpu, got, BF16_TOL);
    }
}

/// Six pairs and the step's dropout.
fn step(task: &CrossEncoderTask) -> (Vec<usize>, Dropout) {
    let drop = Dropout::new(task.folder.config.dropout_rates(), 5);
    ((0..6).collect(), drop)
}

/// `got` (a step of `card_task`) against the CPU engine's step of `cpu_task` (the same model
/// and data on the CPU): the loss, and every gradient (measured: 9.0e-7 of their norm).
fn same_step(cpu_task: &CrossEncoderTask, card_task: &CrossEncoderTask, got: Gradients) {
    same_step_within(cpu_task, card_task, got, (2e-4, 1e-4))
}

/// How far a bf16 step may be from the CPU engine's bf16 step (each parameter of its largest
/// value, all of their norm): the two engines' f32 values differ in their last bits, and some
/// of them round to neighbouring bf16 values. Measured (six MRPC pairs, dropout on): 1.03e-2
/// and 4.2e-3 on an AMX Xeon (the CPU's products on oneMKL); 4.16e-2 and 4.24e-3 on a Zen 4
/// (condenser's AVX512-BF16 kernel), the worst parameter layer 1's output LayerNorm weight (a
/// sum over the batch's tokens that cancels: its largest value 1.7e-3), where the CPU's bf16
/// step is itself 4.0e-2 from the f32 step and the emulated GPU's 1.5e-2. So the bound on each
/// parameter is the reference's own bf16 noise; the norm's catches a wrong product. This step
/// cannot tell the GPU's products in bf16 from f32 ones (5.2e-3 with them in f32: the head,
/// bf16 on both sides, weighs more than BERT's rounding here); the bi-encoder's bf16 step test
/// does (gpu_step_test.rs), on the same stack.
const BF16_TOL: (f32, f64) = (6e-2, 1e-2);

/// `same_step` with each gradient within `tol.0` of its largest value, all within `tol.1` of
/// their norm, the loss within `tol.0` / 20 of its value.
fn same_step_within(
    cpu_task: &CrossEncoderTask,
    card_task: &CrossEncoderTask,
    got: Gradients,
    tol: (f32, f64),
) {
    let (idx, drop) = step(cpu_task);
    let want = cpu_task.gradients(&idx, 0, Some(&drop), 1.0).unwrap();
    let loss_tol = (tol.0 as f64 / 20.0).max(1e-5);
    assert!(
        (got.value - want.value).abs() <= loss_tol * want.value.abs().max(1.0),
        "loss {} against {}",
        got.value,
        want.value
    );
    let vars = (
        params::var_list(&card_task.varmap),
        params::var_list(&cpu_task.varmap),
    );
    got.grads
        .assert_close_to(&want.grads, (&vars.0, &vars.1), tol);
}
