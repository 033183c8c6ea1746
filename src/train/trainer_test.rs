//! trainer.rs's clock: a step's time runs until its work is complete on the device, and the
//! loop's every second is a step's, an evaluation's or a save's.
use super::checkpoint::TrainState;
use super::config::{TaskKey, TrainConfig};
use super::task::{LossOutput, Score, TrainTask};
use crate::error::Result;
use crate::model::kernels::precision::Precision;
use crate::model::{Dropout, DropoutRates};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarMap;
use std::path::Path;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

/// Work a device does after the host has moved on: a GPU's stream runs the backward and the
/// update queued by the step's calls, and the host learns they are done only by waiting.
const DEVICE_WORK: Duration = Duration::from_millis(40);

/// A least-squares task on one weight whose every step also queues DEVICE_WORK of work that
/// completes on another thread (as a GPU's queued kernels do): only `synchronize` waits for it.
struct QueuedWork {
    varmap: VarMap,
    /// the last work queued (each waits for the one before it)
    queued: Mutex<Vec<JoinHandle<()>>>,
    /// Evaluation's own wall time (a dev set's).
    eval: Duration,
}

impl QueuedWork {
    fn new(eval: Duration) -> QueuedWork {
        let varmap = VarMap::new();
        varmap
            .get(
                (1, 1),
                "w",
                candle_nn::Init::Const(0.5),
                DType::F32,
                &Device::Cpu,
            )
            .unwrap();
        QueuedWork {
            varmap,
            queued: Mutex::new(Vec::new()),
            eval,
        }
    }
}

impl TrainTask for QueuedWork {
    fn num_examples(&self) -> usize {
        8
    }

    fn loss(&self, idx: &[usize], _seed: u64, _drop: Option<&Dropout>) -> Result<LossOutput> {
        // in order after the work queued before it, as on a stream
        let mut queued = self.queued.lock().unwrap();
        let before = queued.pop();
        queued.push(std::thread::spawn(move || {
            if let Some(b) = before {
                b.join().unwrap();
            }
            std::thread::sleep(DEVICE_WORK)
        }));
        drop(queued);
        let w = super::params::var_list(&self.varmap)[0].as_tensor().clone();
        let x = Tensor::from_vec(
            idx.iter().map(|&i| i as f32).collect::<Vec<_>>(),
            (idx.len(), 1),
            &Device::Cpu,
        )?;
        let loss = (x.matmul(&w)? - 1.0)?.sqr()?.mean_all()?;
        Ok(LossOutput::single(loss))
    }

    fn key(&self) -> TaskKey {
        TaskKey {
            loss: "squares".into(),
            data: "0..8".into(),
        }
    }

    fn dropout_rates(&self) -> DropoutRates {
        DropoutRates::uniform(0.0)
    }

    fn evaluate(&self) -> Result<Option<Score>> {
        std::thread::sleep(self.eval);
        Ok(Some(("loss".into(), 0.0)))
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    fn save(&self, dir: &Path) -> Result<()> {
        super::params::save_vars(&self.varmap, &dir.join("model.safetensors"))
    }

    fn synchronize(&self) -> Result<()> {
        for h in self.queued.lock().unwrap().drain(..) {
            h.join().unwrap();
        }
        Ok(())
    }
}

fn config(out: &Path, grad_accum: usize) -> TrainConfig {
    TrainConfig {
        epochs: 3,
        batch_size: 2,
        lr: 1e-2,
        warmup: 0.1,
        weight_decay: 0.0,
        max_grad_norm: 1.0,
        grad_accum,
        seed: 1,
        dropout: None,
        eval_steps: Some(4),
        checkpoint_steps: 5,
        max_steps: None,
        threads: 1,
        precision: Precision::F32,
        no_shuffle: false,
        out: out.to_path_buf(),
    }
}

/// Each step's logged time holds the device's work for every micro-batch of it (the clock
/// stops after `synchronize`, not when the host has queued the work), train_log.csv's times
/// add up to the report's, and steps, evaluations and saves together are the loop's wall time
/// within 5% (nothing else in the loop, a gradient norm say, runs off the clock).
#[test]
fn a_step_ends_when_its_work_is_complete_on_the_device() {
    for accum in [1, 2] {
        let d = tempfile::tempdir().unwrap();
        let task = QueuedWork::new(Duration::from_millis(30));
        let cfg = config(d.path(), accum);
        let bar = indicatif::ProgressBar::hidden();
        let r = super::train(&task, &cfg, false, &bar).unwrap();
        assert_eq!(r.steps, 12 / accum as u64);
        let log = std::fs::read_to_string(d.path().join("train_log.csv")).unwrap();
        let mut lines = log.lines();
        assert_eq!(lines.next().unwrap(), "step,loss,lr,eval,seconds");
        let times: Vec<f64> = lines
            .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(times.len() as u64, r.steps);
        let device = DEVICE_WORK.as_secs_f64() * accum as f64;
        for t in &times {
            assert!(
                *t >= device,
                "a step of {t} s: its device work is {device} s"
            );
        }
        let logged: f64 = times.iter().sum();
        assert!((logged - r.step_seconds).abs() < 1e-5 * r.steps as f64);
        let accounted = r.step_seconds + r.eval_seconds + r.save_seconds;
        assert!(r.eval_seconds >= 0.03 * (r.steps / 4) as f64);
        assert!(
            (accounted - r.seconds).abs() <= 0.05 * r.seconds,
            "steps {} + evaluation {} + saving {} against the loop's {} s",
            r.step_seconds,
            r.eval_seconds,
            r.save_seconds,
            r.seconds
        );
    }
}

/// A checkpoint written before step times were kept (an older condenser's) resumes into a log
/// whose earlier steps have an empty time, the later ones their own.
#[test]
fn a_log_without_earlier_times_keeps_its_rows() {
    let d = tempfile::tempdir().unwrap();
    let st = TrainState {
        log: vec![(1, 0.5, 1e-3, None), (2, 0.4, 1e-3, Some(0.7))],
        step_seconds: vec![0.25],
        ..Default::default()
    };
    super::checkpoint::write_log(d.path(), &st).unwrap();
    let log = std::fs::read_to_string(d.path().join("train_log.csv")).unwrap();
    assert_eq!(
        log,
        "step,loss,lr,eval,seconds\n1,0.5,0.001,,\n2,0.4,0.001,0.7,0.250000\n"
    );
}
