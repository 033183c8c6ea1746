//! `condenser._condenser`: the extension under the `condenser` Python package (python/condenser/,
//! the thin layer that gives it sentence-transformers' names). Everything runs on the condenser
//! library: the same engine, numbers and outputs as the `condenser` binary.
mod call;
mod commands;
mod cross;
mod encoder;
mod errors;
mod notes;
mod overlap;
mod table;

use pyo3::prelude::*;

/// Every later call on `n` threads (encode, predict, training's batch split, the commands).
#[pyfunction]
fn set_num_threads(n: usize) -> PyResult<()> {
    if n == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "set_num_threads(0): at least 1",
        ));
    }
    call::set_threads(n)
}

/// The threads a call runs on.
#[pyfunction]
fn get_num_threads() -> usize {
    call::threads()
}

/// The CPU's class as the engine sees it, and where its matmuls run (for bug reports).
#[pyfunction]
fn engine_info() -> (String, String, String) {
    (
        condenser::runtime::cpu_model(),
        condenser::model::kernels::isa::describe(),
        condenser::model::kernels::blas::describe(),
    )
}

#[pymodule]
fn _condenser(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // the process settings the binary makes at its start (src/main.rs): CONDENSER_* read once
    // (a bad value is a ValueError naming it and its valid values), the allocator's thresholds
    // and the environment the BLAS reads when it loads (written as Python writes os.environ:
    // numpy, imported first, has threads running by now)
    condenser::settings::check()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    condenser::runtime::tune_allocator();
    condenser::model::kernels::blas::prepare_env_in_interpreter();
    notes::install();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<encoder::Encoder>()?;
    m.add_class::<cross::Scorer>()?;
    m.add_function(wrap_pyfunction!(overlap::overlap_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(table::read_table, m)?)?;
    m.add_function(wrap_pyfunction!(commands::commands, m)?)?;
    m.add_function(wrap_pyfunction!(commands::run_command, m)?)?;
    m.add_function(wrap_pyfunction!(commands::run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(engine_info, m)?)?;
    Ok(())
}
