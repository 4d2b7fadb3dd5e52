//! The module `geofed_ldif`: `parse(text, names)` as geofed.ops.ldapcli.parse returns it,
//! and `plain_text(entries)` as geofed.ops.ldapcli.entries_text makes it.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// [(dn, {attribute: [values]})] of plain LDIF; `names` (lower case -> wanted spelling)
/// puts attribute names back as they were asked for.
#[pyfunction]
fn parse<'py>(py: Python<'py>, text: &str, names: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyList>> {
    // Each name as the server spelled it -> the Python string it is kept as (made once).
    let mut spelling: HashMap<&str, Bound<'py, PyString>> = HashMap::new();
    let out = PyList::empty(py);
    for entry in crate::entries(text) {
        let attrs = PyDict::new(py);
        for (name, value) in entry.values {
            let key = match spelling.get(name) {
                Some(k) => k.clone(),
                None => {
                    let wanted = match names.get_item(name.to_lowercase())? {
                        Some(w) => w.downcast_into::<PyString>()?,
                        None => PyString::new(py, name),
                    };
                    spelling.insert(name, wanted.clone());
                    wanted
                }
            };
            let value = PyString::new(py, value);
            match attrs.get_item(&key)? {
                Some(list) => list.downcast::<PyList>()?.append(value)?,
                None => attrs.set_item(key, PyList::new(py, [value])?)?,
            }
        }
        out.append(PyTuple::new(py, [PyString::new(py, entry.dn).into_any(), attrs.into_any()])?)?;
    }
    Ok(out)
}

/// LDIF of whole entries [(dn, {attribute: value, values or None})], each value as
/// Python's str() makes it; None where a value needs base64 (the caller makes it then).
#[pyfunction]
fn plain_text(entries: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let mut out = String::new();
    for (i, item) in entries.try_iter()?.enumerate() {
        let (dn, attrs): (Bound<PyAny>, Bound<PyDict>) = item?.extract()?;
        if i > 0 {
            out.push('\n');
        }
        if !push_value(&mut out, "dn", &dn)? {
            return Ok(None);
        }
        for (name, values) in attrs.iter() {
            let name = name.str()?;
            let name = name.to_str()?;
            if let Ok(list) = values.downcast::<PyList>() {
                for v in list.iter() {
                    if !push_value(&mut out, name, &v)? {
                        return Ok(None);
                    }
                }
            } else if !values.is_none() && !push_value(&mut out, name, &values)? {
                return Ok(None);
            }
        }
    }
    Ok(Some(out))
}

fn push_value(out: &mut String, name: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    let text = match value.downcast::<PyString>() {
        Ok(s) => s.clone(),
        Err(_) => value.str()?,
    };
    Ok(crate::push_line(out, name, text.to_str()?))
}

#[pymodule]
fn geofed_ldif(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(plain_text, m)?)
}
