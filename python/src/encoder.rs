//! A sentence encoder for `condenser.SentenceTransformer`: the folder loaded as the CLI loads it
//! (names from CONDENSER_HOME, the pooling's and prompt's notes, bf16 on the CPU's kernels), its
//! embeddings handed to numpy without a copy.
use crate::call;
use crate::errors::to_py;
use condenser::model::layers::pooling::l2_normalize_row;
use condenser::model::{InferenceOptions, ModelFolder, SentenceEncoder};
use condenser::runtime::{ComputeType, DeviceSpec};
use numpy::{IntoPyArray, PyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::RwLock;

#[pyclass(frozen, module = "condenser._condenser")]
pub struct Encoder {
    enc: RwLock<SentenceEncoder>,
    dir: PathBuf,
    similarity: Option<String>,
}

impl Encoder {
    /// The embeddings, the library's seconds, the hand-over's seconds.
    fn timed<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        batch_size: usize,
        show_progress: bool,
        prompt: Option<String>,
        normalize: bool,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, f64, f64)> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let enc = self.enc.read().unwrap_or_else(|e| e.into_inner());
        let n = texts.len();
        let (e, took) = call::run(py, !show_progress, || {
            let t = std::time::Instant::now();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let bar = condenser::cli::progress::bar(Some(n as u64), "texts");
            let mut e = enc.encode_prompted(&refs, prompt.as_deref(), batch_size, &bar)?;
            bar.finish_and_clear();
            if normalize {
                e.data
                    .chunks_exact_mut(e.dim.max(1))
                    .for_each(l2_normalize_row);
            }
            Ok((e, t.elapsed().as_secs_f64()))
        })?;
        let t = std::time::Instant::now();
        let dim = e.dim;
        let a = numpy::ndarray::Array2::from_shape_vec((n, dim), e.data)
            .map_err(|err| PyValueError::new_err(format!("embeddings of {n} x {dim}: {err}")))?;
        // moved into numpy, not copied
        let a = a.into_pyarray(py);
        Ok((a, took, t.elapsed().as_secs_f64()))
    }
}

/// `--device` and `--dtype` as the CLI takes them, from Python's strings.
pub fn options(device: &str, dtype: Option<&str>) -> PyResult<InferenceOptions> {
    let spec: DeviceSpec = device
        .parse()
        .map_err(|e: String| PyValueError::new_err(format!("device={device:?}: {e}")))?;
    let dtype = dtype
        .map(|d| {
            <ComputeType as clap::ValueEnum>::from_str(d, true).map_err(|_| {
                PyValueError::new_err(format!(
                    "dtype {d:?}: condenser computes in float32, bfloat16 or float16"
                ))
            })
        })
        .transpose()?;
    Ok(InferenceOptions {
        device: spec.open().map_err(to_py)?,
        dtype,
        ..InferenceOptions::default()
    })
}

#[pymethods]
impl Encoder {
    #[new]
    #[pyo3(signature = (path, device = "cpu", dtype = None))]
    fn new(py: Python<'_>, path: PathBuf, device: &str, dtype: Option<&str>) -> PyResult<Encoder> {
        let opts = options(device, dtype)?;
        let dir = condenser::model::folders::home::resolve(&path);
        let (enc, folder) = call::run(py, true, || {
            let enc = opts.encoder(&dir)?;
            Ok((enc, ModelFolder::open(&dir)?))
        })?;
        Ok(Encoder {
            enc: RwLock::new(enc),
            dir,
            similarity: folder.similarity_fn_name,
        })
    }

    /// Embeddings (n, dim) of `texts` with `prompt` before each (None: none), float32,
    /// C-contiguous, each row L2-normalised where `normalize`; with the seconds the library took
    /// and the seconds its rows took to become the numpy array (a move, not a copy), which
    /// benches/python_encode.py reports.
    #[pyo3(signature = (texts, batch_size = 32, show_progress = true, prompt = None, normalize = false))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        batch_size: usize,
        show_progress: bool,
        prompt: Option<String>,
        normalize: bool,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, f64, f64)> {
        self.timed(py, texts, batch_size, show_progress, prompt, normalize)
    }

    /// The tokens a prompt puts before a text ([CLS] included): what the pooling leaves out when
    /// include_prompt is false.
    fn prompt_length(&self, prompt: &str) -> PyResult<usize> {
        let enc = self.enc.read().unwrap_or_else(|e| e.into_inner());
        enc.prompt_length(prompt).map_err(to_py)
    }

    #[getter]
    fn dim(&self) -> usize {
        self.enc.read().unwrap_or_else(|e| e.into_inner()).dim()
    }

    #[getter]
    fn max_seq_length(&self) -> usize {
        self.enc
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .max_seq_length
    }

    #[setter]
    fn set_max_seq_length(&self, n: usize) -> PyResult<()> {
        let mut enc = self.enc.write().unwrap_or_else(|e| e.into_inner());
        let most = enc.bert.config.max_position_embeddings;
        if !(2..=most).contains(&n) {
            return Err(PyValueError::new_err(format!(
                "max_seq_length {n}: this model takes 2 to {most} tokens (its \
                 max_position_embeddings)"
            )));
        }
        enc.max_seq_length = n;
        Ok(())
    }

    /// config_sentence_transformers.json's prompts, by name.
    #[getter]
    fn prompts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let enc = self.enc.read().unwrap_or_else(|e| e.into_inner());
        for (k, v) in &enc.prompts.named {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    #[getter]
    fn default_prompt_name(&self) -> Option<String> {
        let enc = self.enc.read().unwrap_or_else(|e| e.into_inner());
        enc.prompts.default_name.clone()
    }

    #[getter]
    fn include_prompt(&self) -> bool {
        let enc = self.enc.read().unwrap_or_else(|e| e.into_inner());
        enc.prompts.include_prompt
    }

    #[getter]
    fn similarity_fn_name(&self) -> Option<String> {
        self.similarity.clone()
    }

    #[getter]
    fn normalizes(&self) -> bool {
        self.enc.read().unwrap_or_else(|e| e.into_inner()).normalize
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.dir.clone()
    }
}
