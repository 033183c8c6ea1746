//! The training loop every training command shares: seeded shuffles, gradient accumulation,
//! linear warm-up/decay, clipping, evaluation with the best model kept, atomic checkpoints that a
//! killed run resumes from bit for bit, a NaN stop, progress, train_log.csv and a loss curve.
use super::checkpoint::{self, TrainState};
use super::optim::{clip_factor, linear_schedule, AdamW};
use super::params;
use crate::error::{Error, Result};
use crate::hash::mix64;
use crate::model::Dropout;
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use candle_nn::VarMap;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct TrainConfig {
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    /// Fraction of optimizer steps spent warming up.
    pub warmup: f64,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub grad_accum: usize,
    pub seed: u64,
    pub dropout: f32,
    /// Evaluate every this many optimizer steps (and always at the end).
    pub eval_steps: Option<u64>,
    pub checkpoint_steps: u64,
    /// Stop after this many optimizer steps (a time budget); the schedule spans them.
    pub max_steps: Option<u64>,
    /// Threads that split each micro-batch on CPU (tasks whose loss is a per-example mean).
    pub threads: usize,
    pub out: PathBuf,
}

/// What a training command supplies: its examples' loss, its evaluation, its parameters.
pub trait TrainTask: Sync {
    fn num_examples(&self) -> usize;
    /// Whether `loss` is the mean of independent per-example terms (no in-batch negatives, no
    /// token-weighted mean, no `loss_parts`). Then the trainer may split a micro-batch across
    /// CPU threads and weight the shards' gradients by size: the same gradient, with every core
    /// busy through the elementwise work that threaded matmuls leave serial.
    fn per_example_mean(&self) -> bool {
        false
    }
    /// Mean loss over the training examples `idx`, with dropout when given.
    fn loss(&self, idx: &[usize], drop: Option<&Dropout>) -> candle_core::Result<Tensor>;
    /// (metric name, value; higher is better), or None without dev data.
    fn evaluate(&self) -> Result<Option<(String, f64)>>;
    /// Named parts of the last `loss` call's value (e.g. Condenser's two MLM losses), logged per
    /// step beside the total.
    fn loss_parts(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    fn varmap(&self) -> &VarMap;
    /// Write the model folder.
    fn save(&self, dir: &Path) -> Result<()>;
}

#[derive(Clone, Debug)]
pub struct TrainReport {
    pub steps: u64,
    pub best: Option<(String, f64)>,
    /// Wall time of the whole loop, evaluation and checkpoints included.
    pub seconds: f64,
    /// Time in forward, backward and optimizer updates only.
    pub step_seconds: f64,
    /// Training examples per second of step time.
    pub examples_per_s: f64,
}

fn epoch_order(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(mix64(
        seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9),
    )));
    order
}

pub fn train(
    task: &impl TrainTask,
    cfg: &TrainConfig,
    resume: bool,
    progress: &ProgressBar,
) -> Result<TrainReport> {
    let n = task.num_examples();
    if n == 0 {
        return Err(Error::msg("no training examples"));
    }
    let (batch, accum) = (cfg.batch_size.max(1), cfg.grad_accum.max(1));
    let micro_per_epoch = n.div_ceil(batch) as u64;
    let mut total_micro = micro_per_epoch * cfg.epochs as u64;
    if let Some(m) = cfg.max_steps {
        total_micro = total_micro.min(m * accum as u64);
    }
    let total_steps = total_micro.div_ceil(accum as u64);
    let warmup_steps = (total_steps as f64 * cfg.warmup).ceil() as u64;
    let mut opt = AdamW::new(params::vars(task.varmap()), cfg.weight_decay);
    let on_cpu = params::device_of(task.varmap()).is_cpu();
    let threads = if task.per_example_mean() && on_cpu {
        cfg.threads.clamp(1, batch)
    } else {
        1
    };
    let ckpt = cfg.out.join("checkpoint");
    let mut st = TrainState::default();
    if resume {
        st = checkpoint::load(&ckpt, task.varmap(), &mut opt)?;
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| Error::file(&cfg.out, e))?;
    progress.set_length(total_steps);
    progress.set_position(st.step);
    let start = Instant::now();
    let mut order = (0, Vec::new());
    let mut acc: Vec<Option<Tensor>> = Vec::new();
    let (mut acc_n, mut acc_loss) = (0usize, 0f64);
    let mut acc_parts: Vec<f64> = Vec::new();
    let (mut step_seconds, mut examples) = (0f64, 0usize);
    while st.micro < total_micro {
        let t_step = Instant::now();
        let epoch = (st.micro / micro_per_epoch) as usize;
        if order.1.is_empty() || order.0 != epoch {
            order = (epoch, epoch_order(n, cfg.seed, epoch));
        }
        let pos = (st.micro % micro_per_epoch) as usize * batch;
        let idx = &order.1[pos..(pos + batch).min(n)];
        // dropout masks from (seed, micro-step): a resumed run draws exactly the same ones
        let drop_seed = mix64(cfg.seed ^ mix64(st.micro));
        let (lv, grads) = micro_step(task, &opt, idx, cfg, threads, drop_seed)?;
        if !lv.is_finite() {
            return Err(Error::msg(format!(
                "training stopped: loss is {lv} at step {} (micro-batch {}); the last good checkpoint is {}",
                st.step,
                st.micro,
                ckpt.display()
            )));
        }
        acc = sum_grads(acc, grads)?;
        let parts = task.loss_parts();
        if st.part_names.is_empty() && !parts.is_empty() {
            st.part_names = parts.iter().map(|p| p.0.to_string()).collect();
        }
        acc_parts.resize(parts.len(), 0.0);
        for (a, p) in acc_parts.iter_mut().zip(&parts) {
            *a += p.1;
        }
        acc_n += 1;
        acc_loss += lv;
        st.micro += 1;
        examples += idx.len();
        step_seconds += t_step.elapsed().as_secs_f64();
        if acc_n == accum || st.micro == total_micro {
            let k = acc_n as f64;
            let norm = AdamW::grad_norm(&acc)? / k;
            let t_update = Instant::now();
            let lr = cfg.lr * linear_schedule(st.step, total_steps, warmup_steps);
            opt.step(&acc, lr, clip_factor(norm, cfg.max_grad_norm) / k)
                ?;
            st.step += 1;
            step_seconds += t_update.elapsed().as_secs_f64();
            let mean_loss = acc_loss / k;
            (acc, acc_n, acc_loss) = (Vec::new(), 0, 0.0);
            if !acc_parts.is_empty() {
                st.parts.push(acc_parts.iter().map(|v| v / k).collect());
                acc_parts.clear();
            }
            let mut metric = None;
            let last = st.micro == total_micro;
            if last || cfg.eval_steps.is_some_and(|e| st.step % e == 0) {
                metric = task.evaluate()?;
                if let Some((name, v)) = &metric {
                    if st.best.as_ref().is_none_or(|(_, b)| v > b) {
                        st.best = Some((name.clone(), *v));
                        task.save(&cfg.out)?;
                    }
                } else if last {
                    task.save(&cfg.out)?;
                }
            }
            st.log.push((st.step, mean_loss, lr, metric.map(|m| m.1)));
            progress.set_message(format!(
                "loss {mean_loss:.4} lr {lr:.2e} {:.1} ex/s",
                examples as f64 / step_seconds
            ));
            progress.inc(1);
            if st.step % cfg.checkpoint_steps.max(1) == 0 || last {
                checkpoint::save(&ckpt, task.varmap(), &opt, &st)?;
                // the log and curve follow the checkpoint, so a long run can be watched (the
                // final one is written once, after the loop)
                if !last {
                    checkpoint::write_log(&cfg.out, &st)?;
                }
            }
        }
    }
    checkpoint::write_log(&cfg.out, &st)?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(TrainReport {
        steps: st.step,
        best: st.best,
        seconds,
        step_seconds,
        examples_per_s: examples as f64 / step_seconds.max(1e-9),
    })
}

/// One micro-batch's loss value and gradients (in the optimizer's order). With `threads` > 1 the
/// examples are split into that many contiguous shards, each run on its own thread with serial
/// matmuls and its own dropout masks; shard i's loss is weighted by its share of the examples,
/// so the gradients sum to the whole micro-batch's.
fn micro_step(
    task: &impl TrainTask,
    opt: &AdamW,
    idx: &[usize],
    cfg: &TrainConfig,
    threads: usize,
    drop_seed: u64,
) -> Result<(f64, Vec<Option<Tensor>>)> {
    let run = |shard: &[usize], seed: u64, weight: f64| -> Result<(f64, GradStore)> {
        let drop = Dropout::new(cfg.dropout, seed);
        let loss = task
            .loss(shard, Some(&drop))
            .map_err(|e| Error::msg(format!("forward failed: {e}")))?;
        let to_err = |e: candle_core::Error| Error::msg(e.to_string());
        let loss = if weight == 1.0 {
            loss
        } else {
            loss.affine(weight, 0.0).map_err(to_err)?
        };
        let lv = loss
            .to_dtype(candle_core::DType::F64)
            .and_then(|l| l.to_scalar::<f64>())
            .map_err(to_err)?;
        Ok((lv, loss.backward().map_err(to_err)?))
    };
    if threads <= 1 {
        let (lv, g) = run(idx, drop_seed, 1.0)?;
        return Ok((lv, opt.collect(&g)));
    }
    let size = idx.len().div_ceil(threads);
    let shards: Vec<Result<(f64, GradStore)>> = crate::model::blas::serial(|| {
        std::thread::scope(|s| {
            let handles: Vec<_> = idx
                .chunks(size)
                .enumerate()
                .map(|(i, shard)| {
                    let seed = mix64(drop_seed ^ (i as u64 + 1));
                    let weight = shard.len() as f64 / idx.len() as f64;
                    s.spawn(move || run(shard, seed, weight))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a training shard panicked"))
                .collect()
        })
    });
    let (mut lv, mut acc) = (0.0, Vec::new());
    for shard in shards {
        let (l, g) = shard?;
        lv += l;
        acc = sum_grads(acc, opt.collect(&g))?;
    }
    Ok((lv, acc))
}

/// a + b per parameter; an empty `a` (nothing accumulated yet) gives `b`.
fn sum_grads(a: Vec<Option<Tensor>>, b: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
    if a.is_empty() {
        return Ok(b);
    }
    a.into_iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => x.add(&y).map(Some).map_err(Error::from),
            (x, y) => Ok(x.or(y)),
        })
        .collect()
}
