//! Which engine runs a BERT, decided in one place (issue 83): condenser's GPU engine on a GPU it
//! takes, condenser's CPU engine, or candle's graph with the reason both declined. Callers ask
//! the Backend their model carries (a task's `backend()`, an encoder's) instead of testing the
//! device, dtype and activation themselves; the conditions live here and in the two engines'
//! own `declines` (stack.rs for the CPU, gpu/cuda.rs's `gpu_for` for a GPU).
use super::cpu::Stack;
use crate::model::kernels::precision::Precision;
use crate::model::{Bert, BertLayer};

/// The engine a model runs on.
#[derive(Clone, Debug)]
pub enum Backend {
    /// condenser's GPU engine on this GPU (model/engine/gpu).
    Gpu(candle_core::cuda::CudaDevice),
    /// condenser's CPU engine (stack.rs).
    Cpu,
    /// candle's graph, and why the engines do not run the model, in words for a summary.
    Graph(String),
}

/// What a model's code can run on besides candle's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// The CPU engine and, on a GPU, the GPU engine (bi-encoders, cross-encoders).
    Both,
    /// The CPU engine only (pretraining: on a GPU, candle's graph).
    CpuOnly,
}

impl Backend {
    /// The backend of `bert` followed by the `head` layers (a Condenser head; empty for none),
    /// for code that runs on what `takes` names.
    pub fn of(bert: &Bert, head: &[BertLayer], takes: Takes) -> Backend {
        // (a build without CUDA: gpu_for takes no model)
        if takes == Takes::Both && head.is_empty() {
            if let Some(gpu) = super::gpu::gpu_for(bert) {
                return Backend::Gpu(gpu);
            }
        }
        let why = Stack::declines(&bert.layers).or_else(|| {
            // plain MLM runs no head: an empty head is no reason to leave the engine
            (!head.is_empty()).then(|| Stack::declines(head)).flatten()
        });
        match why {
            None => Backend::Cpu,
            Some(why) => Backend::Graph(why),
        }
    }

    /// The backend of a bi-encoder's or cross-encoder's BERT.
    pub fn of_bert(bert: &Bert) -> Backend {
        Self::of(bert, &[], Takes::Both)
    }

    /// Why condenser's engines do not run the model (None: one of them does). Only the engines
    /// key dropout masks by example, so a split batch draws what the whole batch would only then.
    pub fn declines(&self) -> Option<&str> {
        match self {
            Backend::Graph(why) => Some(why),
            _ => None,
        }
    }

    /// Whether this is the GPU engine.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Backend::Gpu(_))
    }

    /// Whether this is the CPU engine.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Backend::Cpu)
    }

    /// The CPU engine over `bert`, where it is this backend (None on a GPU or the graph): the
    /// one way callers build the engine they were routed to.
    pub fn cpu_engine<'m>(&self, bert: &'m Bert) -> Option<Stack<'m>> {
        self.is_cpu().then(|| Stack::for_bert(bert)).flatten()
    }

    /// The GPU, where the GPU engine runs the model.
    pub fn gpu(&self) -> Option<&candle_core::cuda::CudaDevice> {
        match self {
            Backend::Gpu(gpu) => Some(gpu),
            _ => None,
        }
    }

    /// Which kernels the engine runs, for a summary: a GPU's, or the CPU class's (also what a
    /// graph's products run on, through the same Linear kernels).
    pub fn kernels(&self) -> String {
        if self.is_gpu() {
            return "CUDA (cuBLAS and the GPU engine's kernels)".into();
        }
        crate::model::kernels::isa::describe()
    }

    /// Whether a model on a GPU may run its products in `p` here: the GPU engine runs f32 and
    /// bf16 (bf16 products, f32 master weights and accumulation); candle's graph there, f32.
    pub fn device_precision(&self, p: Precision) -> bool {
        if self.is_gpu() {
            return gpu_products(p);
        }
        p == Precision::F32
    }

    /// Whether the GPU engine is to run a model on `device` with its products in `p`, asked
    /// before the weights load because their dtype hangs on it (the engine keeps f32 master
    /// weights; candle's graph on a GPU loads them at the compute dtype): a GPU, the engine on,
    /// a precision its products run. The Backend the loaded model carries has the last word
    /// (`of`: the engine may still decline the model's shape).
    pub fn gpu_expected(device: &candle_core::Device, p: Precision) -> bool {
        device.is_cuda() && super::gpu::on() && gpu_products(p)
    }
}

/// The precisions of the GPU engine's products.
fn gpu_products(p: Precision) -> bool {
    matches!(p, Precision::F32 | Precision::Bf16)
}
