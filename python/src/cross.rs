//! A trained cross-encoder for `condenser.CrossEncoder`: its scores (a sigmoid for one label,
//! class probabilities for more), as `augment` labels pairs with them.
use crate::call;
use crate::encoder::options;
use condenser::model::CrossEncoderModel;
use numpy::{IntoPyArray, PyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::RwLock;

#[pyclass(frozen, module = "condenser._condenser")]
pub struct Scorer {
    model: RwLock<CrossEncoderModel>,
    dir: PathBuf,
}

#[pymethods]
impl Scorer {
    #[new]
    #[pyo3(signature = (path, device = "cpu", dtype = None))]
    fn new(py: Python<'_>, path: PathBuf, device: &str, dtype: Option<&str>) -> PyResult<Scorer> {
        let opts = options(device, dtype)?;
        let dir = condenser::model::folders::home::resolve(&path);
        let model = call::run(py, true, || opts.cross_encoder(&dir))?;
        Ok(Scorer {
            model: RwLock::new(model),
            dir,
        })
    }

    /// Scores (n, labels) of `pairs`, float32.
    #[pyo3(signature = (pairs, batch_size = 32, show_progress = true))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        pairs: Vec<(String, String)>,
        batch_size: usize,
        show_progress: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let model = self.model.read().unwrap_or_else(|e| e.into_inner());
        let n = pairs.len();
        let labels = model.model.num_labels;
        let rows = call::run(py, !show_progress, || {
            let refs: Vec<(&str, &str)> = pairs
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            let bar = condenser::cli::progress::bar(Some(n as u64), "pairs");
            let rows = model.predict(&refs, batch_size, &bar)?;
            bar.finish_and_clear();
            Ok(rows)
        })?;
        let a = numpy::ndarray::Array2::from_shape_vec((n, labels), rows.concat())
            .map_err(|e| PyValueError::new_err(format!("scores of {n} x {labels}: {e}")))?;
        Ok(a.into_pyarray(py))
    }

    #[getter]
    fn num_labels(&self) -> usize {
        let m = self.model.read().unwrap_or_else(|e| e.into_inner());
        m.model.num_labels
    }

    #[getter]
    fn max_length(&self) -> usize {
        let m = self.model.read().unwrap_or_else(|e| e.into_inner());
        m.tok.max_seq_length
    }

    #[setter]
    fn set_max_length(&self, n: usize) -> PyResult<()> {
        let mut m = self.model.write().unwrap_or_else(|e| e.into_inner());
        let most = m.model.bert.config.max_position_embeddings;
        if !(3..=most).contains(&n) {
            return Err(PyValueError::new_err(format!(
                "max_length {n}: this model takes 3 to {most} tokens a pair"
            )));
        }
        m.tok.max_seq_length = n;
        Ok(())
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.dir.clone()
    }
}
