//! Python bindings (module `geofed_mdfs`); the orchestration lives in geofed.apps.mdfs.

use crate::kernel::{self, Analysis, Unit};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn columns(x: &PyReadonlyArray2<f64>) -> Vec<Vec<f64>> {
    let a = x.as_array();
    (0..a.ncols()).map(|j| a.column(j).to_vec()).collect()
}

/// The bins of one variable (column) of `x` in discretization `t`, with `var_id` as the
/// variable's id in the reference's random stream.
#[pyfunction]
#[pyo3(signature = (column, var_id, divisions, t, seed, range_))]
fn discretize<'py>(
    py: Python<'py>,
    column: PyReadonlyArray1<f64>,
    var_id: u32,
    divisions: usize,
    t: u32,
    seed: u32,
    range_: f64,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let col = column.as_array().to_vec();
    if col.is_empty() {
        return Err(PyValueError::new_err("empty column"));
    }
    let thr = crate::discretize::thresholds(&crate::discretize::sorted_copy(&col), seed, t, var_id, divisions, range_);
    Ok(col.iter().map(|x| crate::discretize::bin(*x, &thr)).collect::<Vec<u8>>().into_pyarray(py))
}

/// Contrast variables of `x` (n x p): (source column per contrast, n x n_contrast data).
#[pyfunction]
fn contrast_variables<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<f64>,
    n_contrast: usize,
    seed: u32,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray2<f64>>)> {
    let a = x.as_array();
    let (n, p) = (a.nrows(), a.ncols());
    if n == 0 || p == 0 {
        return Err(PyValueError::new_err("no data"));
    }
    let (src, perms) = crate::contrast::draw(n, p, n_contrast, seed);
    let mut out = numpy::ndarray::Array2::<f64>::zeros((n, n_contrast));
    for (j, (s, perm)) in src.iter().zip(&perms).enumerate() {
        for (o, &from) in perm.iter().enumerate() {
            out[[o, j]] = a[[from, *s]];
        }
    }
    Ok((src.iter().map(|&s| s as i64).collect::<Vec<_>>().into_pyarray(py), out.into_pyarray(py)))
}

/// Work units of one discretization: (kind 0 real / 1 contrast, first variable, tuples).
#[pyfunction]
fn work_units(p: usize, n_contrast: usize, dimensions: usize) -> Vec<(u8, u32, u64)> {
    kernel::units(p, n_contrast, dimensions)
        .into_iter()
        .map(|(u, w)| match u {
            Unit::Real(i) => (0, i, w),
            Unit::Contrast(i) => (1, i, w),
        })
        .collect()
}

/// One node's share of an analysis: holds the data (real then contrast columns) and
/// the running maxima; `run` folds in units of one discretization.
#[pyclass(name = "Analysis")]
struct PyAnalysis {
    inner: Analysis,
    k: usize,
}

#[pymethods]
impl PyAnalysis {
    #[new]
    #[pyo3(signature = (x, y, contrast, dimensions, divisions, pc_xi, seed, range_))]
    fn new(
        x: PyReadonlyArray2<f64>,
        y: PyReadonlyArray1<u8>,
        contrast: Option<PyReadonlyArray2<f64>>,
        dimensions: usize,
        divisions: usize,
        pc_xi: f64,
        seed: u32,
        range_: f64,
    ) -> PyResult<Self> {
        let mut cols = columns(&x);
        let p = cols.len();
        if let Some(c) = contrast {
            cols.extend(columns(&c));
        }
        let y = y.as_array().to_vec();
        let inner =
            Analysis::new(cols, p, &y, dimensions, divisions, pc_xi, seed, range_).map_err(PyValueError::new_err)?;
        Ok(PyAnalysis { inner, k: dimensions })
    }

    /// units: (kind, first variable) pairs of discretization t.
    fn run(&mut self, py: Python<'_>, t: u32, units: Vec<(u8, u32)>, threads: usize) {
        let units: Vec<Unit> =
            units.into_iter().map(|(kind, i)| if kind == 0 { Unit::Real(i) } else { Unit::Contrast(i) }).collect();
        let inner = &mut self.inner;
        py.allow_threads(|| inner.run(t, &units, threads));
    }

    #[getter]
    fn h_y(&self) -> f64 {
        self.inner.h_y()
    }

    /// (max IG per variable, its discretization, its tuple (p x k), max IG per contrast);
    /// -inf and -1 where no tuple was scored here.
    #[allow(clippy::type_complexity)]
    fn results<'py>(
        &self,
        py: Python<'py>,
    ) -> (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray2<i64>>, Bound<'py, PyArray1<f64>>)
    {
        let r = &self.inner.results;
        let ig: Vec<f64> = r.best.iter().map(|b| b.ig).collect();
        let t: Vec<i64> = r.best.iter().map(|b| if b.t == u32::MAX { -1 } else { b.t as i64 }).collect();
        let mut tuples = numpy::ndarray::Array2::<i64>::from_elem((r.best.len(), self.k), -1);
        for (v, b) in r.best.iter().enumerate() {
            for j in 0..self.k {
                if b.tuple[j] != u32::MAX {
                    tuples[[v, j]] = b.tuple[j] as i64;
                }
            }
        }
        (ig.into_pyarray(py), t.into_pyarray(py), tuples.into_pyarray(py), r.contrast.clone().into_pyarray(py))
    }
}

#[pymodule]
fn geofed_mdfs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(discretize, m)?)?;
    m.add_function(wrap_pyfunction!(contrast_variables, m)?)?;
    m.add_function(wrap_pyfunction!(work_units, m)?)?;
    m.add_class::<PyAnalysis>()?;
    Ok(())
}
