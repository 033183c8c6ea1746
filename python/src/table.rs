//! `condenser.read_table`: a dataset file's columns (an encode's output, augment's pairs, mined
//! triplets) as Python values: texts as lists of str, numbers as float64 arrays, vectors as
//! (n, dim) float32 arrays; read by the library's own readers (Parquet, Arrow IPC, CSV, TSV,
//! JSONL), so bad cells are named by file, row and column as the commands name them.
use crate::call;
use arrow_schema::DataType;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// One column's values, gathered over the file's blocks.
enum Values {
    Texts(Vec<String>),
    Numbers(Vec<f64>),
    Vectors(usize, Vec<f32>),
}

#[pyfunction]
#[pyo3(signature = (path, columns = None))]
pub fn read_table<'py>(
    py: Python<'py>,
    path: PathBuf,
    columns: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cols = call::run(py, true, || {
        let names = match &columns {
            Some(c) => c.clone(),
            None => condenser::data::column_names(&path)?,
        };
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut values: Vec<Option<Values>> = names.iter().map(|_| None).collect();
        let reader = condenser::data::open(&path, &refs)?;
        for batch in reader {
            let batch = batch?;
            for (k, name) in names.iter().enumerate() {
                let col = batch.column(name)?;
                let v = values[k].get_or_insert_with(|| match col.data_type() {
                    DataType::FixedSizeList(_, d) => Values::Vectors(*d as usize, Vec::new()),
                    t if t.is_numeric() || *t == DataType::Boolean => Values::Numbers(Vec::new()),
                    _ => Values::Texts(Vec::new()),
                });
                match v {
                    Values::Texts(t) => {
                        t.extend(batch.texts(name)?.into_iter().map(str::to_string))
                    }
                    Values::Numbers(x) => x.extend(batch.labels(name)?),
                    Values::Vectors(_, x) => x.extend(batch.vectors(name)?.concat()),
                }
            }
        }
        Ok(names.into_iter().zip(values).collect::<Vec<_>>())
    })?;
    let d = PyDict::new(py);
    for (name, v) in cols {
        match v {
            None => d.set_item(name, Vec::<String>::new())?,
            Some(Values::Texts(t)) => d.set_item(name, t)?,
            Some(Values::Numbers(x)) => d.set_item(name, PyArray1::from_vec(py, x))?,
            Some(Values::Vectors(dim, x)) => {
                let n = x.len() / dim.max(1);
                let a = numpy::ndarray::Array2::from_shape_vec((n, dim), x)
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("{name}: {e}")))?;
                let a: Bound<'py, PyArray2<f32>> = a.into_pyarray(py);
                d.set_item(name, a)?
            }
        }
    }
    Ok(d)
}
