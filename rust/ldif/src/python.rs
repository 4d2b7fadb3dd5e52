//! The module `geofed_ldif`: `parse(text, names)` as geofed.ops.ldapcli.parse returns it,
//! `plain_text(entries)` as geofed.ops.ldapcli.entries_text makes it, and `written(attrs)`,
//! a merged entry as geofed.ops.users writes it (with its digest).

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

/// LDIF of whole entries [(dn, {attribute: value, values or None}[, object classes])],
/// each value as Python's str() makes it (the classes, where given, first); None where a
/// value needs base64 (the caller makes it then).
#[pyfunction]
fn plain_text(entries: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let mut out = String::new();
    for (i, item) in entries.try_iter()?.enumerate() {
        let item = item?;
        let entry = item.downcast::<PyTuple>()?;
        let dn = entry.get_item(0)?;
        let attrs = entry.get_item(1)?.downcast_into::<PyDict>()?;
        if i > 0 {
            out.push('\n');
        }
        if !push_value(&mut out, "dn", &dn)? {
            return Ok(None);
        }
        if entry.len() > 2 {
            for class in entry.get_item(2)?.try_iter()? {
                if !push_value(&mut out, "objectClass", &class?)? {
                    return Ok(None);
                }
            }
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

/// A merged entry's attributes as they are written: memberUid sorted (one member alone as
/// its value, none as None), and geofedDigest (`crate::digest` of the rest, each value as Python's str() makes it, a
/// list's joined by commas).
#[pyfunction]
fn written<'py>(py: Python<'py>, attrs: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, value) in attrs.iter() {
        let name = name.downcast_into::<PyString>()?;
        if name.to_str()? == "memberUid" && !value.is_none() {
            out.set_item(name, members(py, &value)?)?;
        } else {
            out.set_item(name, value)?;
        }
    }
    // The digest's text: `name\tvalue` lines sorted by name, made in one buffer.
    let mut named: Vec<(&str, Bound<'py, PyAny>)> = Vec::with_capacity(out.len());
    let keys = out.keys();
    let names: Vec<Bound<'py, PyString>> =
        keys.iter().map(|k| Ok(k.downcast_into::<PyString>()?)).collect::<PyResult<_>>()?;
    for name in &names {
        let key = name.to_str()?;
        if key != "geofedDigest" {
            named.push((key, out.get_item(name)?.expect("a key of out")));
        }
    }
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut text = String::with_capacity(256);
    for (i, (key, value)) in named.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(key);
        text.push('\t');
        push_text(&mut text, value)?;
    }
    out.set_item("geofedDigest", crate::sha256_hex(text.as_bytes()))?;
    Ok(out)
}

/// memberUid's values sorted: one alone as its value, none (or one empty) as None.
fn members<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let mut all: Vec<Bound<'py, PyString>> =
        value.try_iter()?.map(|m| Ok(m?.downcast_into::<PyString>()?)).collect::<PyResult<_>>()?;
    if all.len() == 1 {
        let one = all.pop().expect("one member");
        return Ok(if one.to_str()?.is_empty() { py.None().into_bound(py) } else { one.into_any() });
    }
    if all.is_empty() {
        return Ok(py.None().into_bound(py));
    }
    let mut keyed = all.iter().map(|m| Ok((m.to_str()?, m))).collect::<PyResult<Vec<_>>>()?;
    keyed.sort_by(|a, b| a.0.cmp(b.0));
    Ok(PyList::new(py, keyed.into_iter().map(|(_, m)| m))?.into_any())
}

/// A value as the digest takes it: a list's values joined by commas, else str().
fn push_text(out: &mut String, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Ok(list) = value.downcast::<PyList>() {
        for (i, v) in list.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(v.downcast::<PyString>()?.to_str()?);
        }
    } else if let Ok(s) = value.downcast::<PyString>() {
        out.push_str(s.to_str()?);
    } else {
        out.push_str(value.str()?.to_str()?);
    }
    Ok(())
}

#[pymodule]
fn geofed_ldif(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(plain_text, m)?)?;
    m.add_function(wrap_pyfunction!(written, m)?)
}
