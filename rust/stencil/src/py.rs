//! Python bindings (module `geofed_stencil`); the simulation lives in geofed.apps.grayscott.

use crate::Coefficients;
use numpy::{PyReadonlyArray3, PyReadwriteArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// step(u, v, u_new, v_new, du, dv, f, k, dt, noise=None, threads=1): the interior of
/// u_new and v_new from u and v (C-contiguous float64 blocks with one ghost cell per side);
/// `noise` holds the interior's scaled noise. The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (u, v, u_new, v_new, du, dv, f, k, dt, noise=None, threads=1))]
#[allow(clippy::too_many_arguments)]
fn step(
    py: Python<'_>,
    u: PyReadonlyArray3<f64>,
    v: PyReadonlyArray3<f64>,
    mut u_new: PyReadwriteArray3<f64>,
    mut v_new: PyReadwriteArray3<f64>,
    du: f64,
    dv: f64,
    f: f64,
    k: f64,
    dt: f64,
    noise: Option<PyReadonlyArray3<f64>>,
    threads: usize,
) -> PyResult<()> {
    let shape = u.shape().to_vec();
    if shape.iter().any(|&n| n < 3) {
        return Err(PyValueError::new_err(format!("a ghosted block has at least 3 cells per axis, got {shape:?}")));
    }
    for (name, s) in [("v", v.shape()), ("u_new", u_new.shape()), ("v_new", v_new.shape())] {
        if s != shape.as_slice() {
            return Err(PyValueError::new_err(format!("{name} has shape {s:?}, u {shape:?}")));
        }
    }
    let interior: Vec<usize> = shape.iter().map(|n| n - 2).collect();
    if let Some(n) = &noise {
        if n.shape() != interior.as_slice() {
            return Err(PyValueError::new_err(format!("noise has shape {:?}, the interior {interior:?}", n.shape())));
        }
    }
    let contiguous = "arrays must be C-contiguous";
    let (u, v) = (
        u.as_slice().map_err(|_| PyValueError::new_err(contiguous))?,
        v.as_slice().map_err(|_| PyValueError::new_err(contiguous))?,
    );
    let un = u_new.as_slice_mut().map_err(|_| PyValueError::new_err(contiguous))?;
    let vn = v_new.as_slice_mut().map_err(|_| PyValueError::new_err(contiguous))?;
    let noise = match &noise {
        Some(n) => Some(n.as_slice().map_err(|_| PyValueError::new_err(contiguous))?),
        None => None,
    };
    let dims = [shape[0], shape[1], shape[2]];
    let c = Coefficients { du, dv, f, k, dt };
    py.allow_threads(|| crate::step(dims, u, v, un, vn, &c, noise, threads.max(1)));
    Ok(())
}

#[pymodule]
fn geofed_stencil(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(step, m)?)
}
