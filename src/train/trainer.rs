//! The training loop every training command shares: seeded shuffles, gradient accumulation,
//! linear warm-up/decay, clipping, evaluation with the best model kept, atomic checkpoints that a
//! killed run resumes from bit for bit, a NaN stop, progress, train_log.csv and a loss curve.
use super::adamw::AdamW;
use super::checkpoint::{self, TrainState};
use super::config::TrainConfig;
use super::grads::ParamGrads;
use super::loss_scale;
use super::params;
use super::schedule::{clip_factor, linear_schedule};
use super::task::{Gradients, TrainTask};
use crate::error::{Error, Result};
use crate::hash::mix64;
use crate::model::{Dropout, DropoutRates};
use indicatif::ProgressBar;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct TrainReport {
    pub steps: u64,
    pub best: Option<(String, f64)>,
    /// Wall time of the whole loop, evaluation and checkpoints included.
    pub seconds: f64,
    /// The optimizer steps' wall time: each from its first micro-batch's start to the moment
    /// its update is complete on the device (forward, backward, gradient norm and update
    /// inside; evaluation and checkpoints outside).
    pub step_seconds: f64,
    /// Dev evaluation's wall time, and saving's (the best or final model, checkpoints and the
    /// log they carry): with the steps, every second of the loop is one of the three.
    pub eval_seconds: f64,
    pub save_seconds: f64,
    /// Training examples per second of step time.
    pub examples_per_s: f64,
    /// Threads a micro-batch was split across by the trainer (1: not split; a task that splits
    /// its batches itself says so when its threads are set).
    pub threads: usize,
    /// The run had already finished: --resume found nothing left to do.
    pub already_done: bool,
    /// f16: optimizer steps skipped for overflowing gradients, over the whole run.
    pub skipped_steps: u64,
}

/// One micro-batch's result: loss value, parts, gradients in the optimizer's order, and the
/// shards it ran as.
struct MicroStep {
    value: f64,
    parts: Vec<(&'static str, f64)>,
    grads: ParamGrads,
    shards: usize,
}

/// The loss parts summed over micro-batches, named in the order they first came.
#[derive(Default)]
struct Parts {
    sums: Vec<f64>,
}

impl Parts {
    fn add(&mut self, st: &mut TrainState, parts: &[(&'static str, f64)]) {
        if st.part_names.is_empty() && !parts.is_empty() {
            st.part_names = parts.iter().map(|p| p.0.to_string()).collect();
        }
        self.sums.resize(parts.len(), 0.0);
        for (a, p) in self.sums.iter_mut().zip(parts) {
            *a += p.1;
        }
    }
}

pub fn train(
    task: &impl TrainTask,
    cfg: &TrainConfig,
    resume: bool,
    progress: &ProgressBar,
) -> Result<TrainReport> {
    cfg.validate()?;
    let n = task.num_examples();
    if n == 0 {
        return Err(Error::msg("no training examples"));
    }
    let (batch, accum) = (cfg.batch_size, cfg.grad_accum);
    let micro_per_epoch = n.div_ceil(batch) as u64;
    let mut total_micro = micro_per_epoch * cfg.epochs as u64;
    if let Some(m) = cfg.max_steps {
        total_micro = total_micro.min(m * accum as u64);
    }
    let total_steps = total_micro.div_ceil(accum as u64);
    let warmup_steps = (total_steps as f64 * cfg.warmup).ceil() as u64;
    let trained: Vec<_> = params::vars(task.varmap())
        .into_iter()
        .filter(|(name, _)| task.trains(name))
        .collect();
    let mut opt = AdamW::new(trained, cfg.weight_decay);
    let on_cpu = params::device_of(task.varmap()).is_cpu();
    let threads = if on_cpu {
        cfg.threads.clamp(1, batch)
    } else {
        1
    };
    // the engine keys dropout by example: shards then share the micro-batch's seed
    let keyed = task.backend().declines().is_none();
    let rates = cfg
        .dropout
        .map(DropoutRates::uniform)
        .unwrap_or_else(|| task.dropout_rates());
    let settings = cfg.settings(n, task.key());
    let ckpt = cfg.out.join("checkpoint");
    let mut st = TrainState::default();
    if resume {
        st = checkpoint::load(&ckpt, task.varmap(), &mut opt, |st| match &st.settings {
            Some(saved) => settings.check_resume(saved),
            None => Err(Error::file(
                &ckpt,
                "--resume: this checkpoint does not record its run's settings (an older \
                 condenser wrote it), so continuing it could mix two schedules; start afresh",
            )),
        })?;
    }
    if !resume && ckpt.exists() {
        // a fresh run into a folder the user let it replace (--overwrite, or a recipe's re-run):
        // the earlier run's checkpoint goes now, so a later --resume cannot continue a stale run
        std::fs::remove_dir_all(&ckpt).map_err(|e| Error::file(&ckpt, e))?;
    }
    st.settings = Some(settings);
    loss_scale::init(&mut st, cfg.precision);
    std::fs::create_dir_all(&cfg.out).map_err(|e| Error::file(&cfg.out, e))?;
    let already_done = resume && st.micro >= total_micro;
    progress.set_length(total_steps);
    progress.set_position(st.step);
    let start = Instant::now();
    let mut order = (0, Vec::new());
    let mut acc = ParamGrads::default();
    let vars = opt.vars();
    let (mut acc_n, mut acc_loss) = (0usize, 0f64);
    let mut parts = Parts::default();
    let (mut step_seconds, mut examples, mut split) = (0f64, 0usize, 1usize);
    // a step's clock starts with its first micro-batch and stops once its update is complete
    // on the device (TrainTask::synchronize): a GPU's backward and update are only queued when
    // the host moves on, and a clock stopped then leaves most of the step out
    let mut t_step: Option<Instant> = None;
    let mut clock = Clock::default();
    while st.micro < total_micro {
        // a cancelled call (Ctrl-C in Python) stops between two micro-batches: the last
        // checkpoint is what a resume continues, as after a kill
        crate::runtime::cancel::check()?;
        let started = *t_step.get_or_insert_with(Instant::now);
        let epoch = (st.micro / micro_per_epoch) as usize;
        if order.1.is_empty() || order.0 != epoch {
            let ordered = match cfg.no_shuffle {
                true => (0..n).collect(),
                false => task.epoch_order(cfg.seed, epoch, batch),
            };
            order = (epoch, ordered);
        }
        let pos = (st.micro % micro_per_epoch) as usize * batch;
        let idx = &order.1[pos..(pos + batch).min(n)];
        // masks and dropout from (seed, micro-step): a resumed run draws exactly the same ones
        let seed = mix64(cfg.seed ^ mix64(st.micro));
        let scale = loss_scale::factor(&st);
        let g = micro_step(task, idx, seed, rates, threads, scale, keyed)?;
        split = split.max(g.shards);
        if !g.value.is_finite() {
            return Err(Error::msg(format!(
                "training stopped: loss is {} at step {} (micro-batch {}); the last good checkpoint is {}",
                g.value,
                st.step + 1,
                st.micro,
                last_good(&ckpt)
            )));
        }
        acc.add(g.grads)?;
        parts.add(&mut st, &g.parts);
        acc_n += 1;
        acc_loss += g.value;
        st.micro += 1;
        examples += idx.len();
        if acc_n == accum || st.micro == total_micro {
            let k = acc_n as f64;
            // the gradients carry the loss scale (1 unless f16): unscaled before clipping
            // `taken` lives to the end of the step: it holds the leases of the GPU engine's
            // arena, of which `grads` may be views (the next backward must not zero it first)
            let taken = std::mem::take(&mut acc);
            let grads = taken.in_order(&vars);
            let norm = AdamW::grad_norm(&grads)? / (k * scale);
            let lr = cfg.lr * linear_schedule(st.step, total_steps, warmup_steps);
            // a finite loss can still have NaN or infinite gradients: never applied, never saved
            // (f16 skips the step and lowers its scale instead, below)
            if !norm.is_finite() && !loss_scale::scaling(&st) {
                return Err(Error::msg(format!(
                    "training stopped: the gradients' norm is {norm} at step {} (micro-batch {}; \
                     the loss was finite); nothing of this step was applied or saved, and the \
                     last good checkpoint is {}",
                    st.step + 1,
                    st.micro,
                    last_good(&ckpt)
                )));
            }
            if loss_scale::after_step(&mut st, norm.is_finite()) {
                opt.step(
                    &grads,
                    lr,
                    clip_factor(norm, cfg.max_grad_norm) / (k * scale),
                )?;
            } else {
                // through stderr itself, not the bar's println: a hidden bar (a library
                // caller's) drops what it is asked to print
                progress.suspend(|| {
                    crate::runtime::notes::note(&format!(
                        "step {}: f16 gradients overflowed; update skipped, loss scale now {}",
                        st.step + 1,
                        loss_scale::factor(&st)
                    ))
                });
            }
            drop((grads, taken));
            task.synchronize()?;
            let seconds = started.elapsed().as_secs_f64();
            t_step = None;
            step_seconds += seconds;
            st.step_seconds.push(seconds);
            st.step += 1;
            let mean_loss = acc_loss / k;
            (acc_n, acc_loss) = (0, 0.0);
            if !parts.sums.is_empty() {
                st.parts.push(parts.sums.iter().map(|v| v / k).collect());
                parts.sums.clear();
            }
            let last = st.micro == total_micro;
            let metric = if last || cfg.eval_steps.is_some_and(|e| st.step % e == 0) {
                evaluate_and_keep_best(task, &mut st, cfg, last, &mut clock)?
            } else {
                None
            };
            st.log.push((st.step, mean_loss, lr, metric));
            progress.set_message(format!(
                "loss {mean_loss:.4} lr {lr:.2e} {:.1} ex/s",
                examples as f64 / step_seconds
            ));
            progress.inc(1);
            if st.step % cfg.checkpoint_steps == 0 || last {
                let t = Instant::now();
                checkpoint::save(&ckpt, task.varmap(), &opt, &st)?;
                // the log and curve follow the checkpoint, so a long run can be watched (the
                // final one is written once, after the loop)
                if !last {
                    checkpoint::write_log(&cfg.out, &st)?;
                }
                clock.saving += t.elapsed().as_secs_f64();
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if !already_done {
        checkpoint::write_log(&cfg.out, &st)?;
    }
    Ok(TrainReport {
        steps: st.step,
        best: st.best,
        seconds,
        step_seconds,
        eval_seconds: clock.evaluating,
        save_seconds: clock.saving,
        examples_per_s: examples as f64 / step_seconds.max(1e-9),
        skipped_steps: st.skipped_steps,
        threads: split,
        already_done,
    })
}

/// Where a stopped run can resume from: its checkpoint, or none yet.
fn last_good(ckpt: &std::path::Path) -> String {
    match ckpt.exists() {
        true => ckpt.display().to_string(),
        false => format!("none ({} was not written yet)", ckpt.display()),
    }
}

/// The loop's time outside its steps: evaluating and saving.
#[derive(Default)]
struct Clock {
    evaluating: f64,
    saving: f64,
}

/// Evaluate; save the model when it is the best so far (or at the end without dev data).
fn evaluate_and_keep_best(
    task: &impl TrainTask,
    st: &mut TrainState,
    cfg: &TrainConfig,
    last: bool,
    clock: &mut Clock,
) -> Result<Option<f64>> {
    let t = Instant::now();
    let metric = task.evaluate()?;
    clock.evaluating += t.elapsed().as_secs_f64();
    let t = Instant::now();
    match &metric {
        Some((name, v)) if st.best.as_ref().is_none_or(|(_, b)| v > b) => {
            st.best = Some((name.clone(), *v));
            task.save(&cfg.out)?;
        }
        None if last => task.save(&cfg.out)?,
        _ => {}
    }
    clock.saving += t.elapsed().as_secs_f64();
    Ok(metric.map(|m| m.1))
}

/// One micro-batch's loss value, parts and gradients (in the optimizer's order), and how many
/// shards it ran as. Where the task allows it and `threads` > 1, the examples are split into that
/// many contiguous shards, each run on its own thread with serial matmuls and its own dropout
/// masks; each shard's loss is weighted by its share of the loss's units (examples, masked
/// tokens), so the gradients sum to the whole micro-batch's.
fn micro_step(
    task: &impl TrainTask,
    idx: &[usize],
    seed: u64,
    rates: DropoutRates,
    threads: usize,
    scale: f64,
    keyed: bool,
) -> Result<MicroStep> {
    let drop = Dropout::new(rates, seed);
    let size = idx.len().div_ceil(threads.max(1));
    let shards: Vec<&[usize]> = idx.chunks(size.max(1)).collect();
    let weights: Option<Vec<f64>> = (shards.len() > 1)
        .then(|| {
            shards
                .iter()
                .map(|s| task.split_weight(s, seed))
                .collect::<Option<Vec<f64>>>()
        })
        .flatten();
    let Some(weights) = weights.filter(|w| w.iter().sum::<f64>() > 0.0) else {
        let g = task.gradients(idx, seed, Some(&drop), scale)?;
        return Ok(MicroStep {
            value: g.value / scale,
            parts: g.parts.iter().map(|(n, v)| (*n, v / scale)).collect(),
            grads: g.grads,
            shards: 1,
        });
    };
    let total: f64 = weights.iter().sum();
    let results: Vec<Result<Gradients>> = crate::model::kernels::blas::serial(|| {
        std::thread::scope(|s| {
            let handles: Vec<_> = shards
                .iter()
                .zip(&weights)
                .enumerate()
                .map(|(i, (shard, w))| {
                    // candle's masks come from a stream: a stream of its own for each shard
                    let d = if keyed {
                        drop.same()
                    } else {
                        drop.fork(i as u64)
                    };
                    let w = w / total * scale;
                    s.spawn(move || task.gradients(shard, seed, Some(&d), w))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a training shard panicked"))
                .collect()
        })
    });
    let (mut value, mut parts, mut acc) = (
        0.0,
        Vec::<(&'static str, f64)>::new(),
        ParamGrads::default(),
    );
    for r in results {
        let g = r?;
        value += g.value;
        if parts.is_empty() {
            parts = g.parts.iter().map(|(n, _)| (*n, 0.0)).collect();
        }
        for (p, (_, v)) in parts.iter_mut().zip(&g.parts) {
            p.1 += v;
        }
        acc.add(g.grads)?;
    }
    Ok(MicroStep {
        value: value / scale,
        parts: parts.into_iter().map(|(n, v)| (n, v / scale)).collect(),
        grads: acc,
        shards: shards.len(),
    })
}
