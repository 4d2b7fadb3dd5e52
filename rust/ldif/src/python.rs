//! The module `geofed_ldif`: `parse(text, names)` as geofed.ops.ldapcli.parse returns it,
//! `ldap_users` and `ldap_groups`, a home's entries as geofed.ops.users reads them,
//! `plain_text(entries)` as geofed.ops.ldapcli.entries_text makes it, and `written(attrs)`,
//! a merged entry as geofed.ops.users writes it (with its digest).

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};

/// [(dn, {attribute: [values]})] of ldapsearch's LDIF; `names` (lower case -> wanted
/// spelling) puts attribute names back as they were asked for.
#[pyfunction]
fn parse<'py>(py: Python<'py>, text: &str, names: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyList>> {
    // Each name as the server spelled it -> the Python string it is kept as (made once).
    let mut spelling: HashMap<&str, Bound<'py, PyString>> = HashMap::new();
    let out = PyList::empty(py);
    for entry in split(py, text)? {
        let attrs = PyDict::new(py);
        for (name, value) in &entry.values {
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
        out.append(PyTuple::new(py, [PyString::new(py, &entry.dn).into_any(), attrs.into_any()])?)?;
    }
    Ok(out)
}

/// The entries of `text`, split without the GIL (the other home's read goes on meanwhile).
fn split<'t>(py: Python<'_>, text: &'t str) -> PyResult<Vec<crate::Entry<'t>>> {
    py.allow_threads(|| crate::entries(text)).map_err(|e| PyValueError::new_err(format!("LDIF from ldapsearch: {e}")))
}

/// The first value of each attribute named in `wanted` (matched without case), by place.
fn firsts<'e, const N: usize>(entry: &'e crate::Entry<'_>, wanted: [&str; N]) -> [Option<&'e str>; N] {
    let mut out = [None; N];
    for (name, value) in &entry.values {
        if let Some(i) = wanted.iter().position(|w| w.eq_ignore_ascii_case(name)) {
            out[i].get_or_insert(value.as_ref());
        }
    }
    out
}

/// A value that is there and not empty.
fn given(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

fn text_or_none<'py>(py: Python<'py>, value: Option<&str>) -> Bound<'py, PyAny> {
    value.map_or_else(|| py.None().into_bound(py), |v| PyString::new(py, v).into_any())
}

fn integer_or_none<'py>(py: Python<'py>, value: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value.and_then(crate::integer) {
        Some(n) => n.into_pyobject(py)?.into_any(),
        None => py.None().into_bound(py),
    })
}

/// An OpenLDAP home's users as geofed.ops.users reads them, from ldapsearch's LDIF of
/// `ldap_user_attrs`: {name, dn, uid, gid, gecos, home, shell, activated, uuid}, where
/// the first of each attribute's values counts, gecos falls back to cn and then to the
/// name, home to /home/<name>, shell to /bin/bash (an empty value as none), activated
/// is whether the activation attribute holds its value (without case), uuid is the
/// entryUUID in lower case.
#[pyfunction]
fn ldap_users<'py>(
    py: Python<'py>,
    text: &str,
    activation_attribute: &str,
    activation_value: &str,
) -> PyResult<Bound<'py, PyList>> {
    let keys =
        ["name", "dn", "uid", "gid", "gecos", "home", "shell", "activated", "uuid"].map(|k| PyString::intern(py, k));
    let wanted = activation_value.to_lowercase();
    let out = PyList::empty(py);
    for entry in split(py, text)? {
        let [name, uid, gid, gecos, cn, home, shell, uuid] = firsts(
            &entry,
            ["uid", "uidNumber", "gidNumber", "gecos", "cn", "homeDirectory", "loginShell", "entryUUID"],
        );
        let activated = entry
            .values
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(activation_attribute) && v.to_lowercase() == wanted);
        let home = match given(home) {
            Some(h) => h.to_owned(),
            None => format!("/home/{}", name.unwrap_or("None")),
        };
        let values = [
            text_or_none(py, name),
            PyString::new(py, &entry.dn).into_any(),
            integer_or_none(py, uid)?,
            integer_or_none(py, gid)?,
            text_or_none(py, given(gecos).or(given(cn)).or(name)),
            PyString::new(py, &home).into_any(),
            PyString::new(py, given(shell).unwrap_or("/bin/bash")).into_any(),
            PyBool::new(py, activated).to_owned().into_any(),
            text_or_none(py, given(uuid).map(str::to_lowercase).as_deref()),
        ];
        out.append(dict_of(py, &keys, values)?)?;
    }
    Ok(out)
}

/// A dict of `keys` and `values`, pair by pair.
fn dict_of<'py, const N: usize>(
    py: Python<'py>,
    keys: &[Bound<'py, PyString>; N],
    values: [Bound<'py, PyAny>; N],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in keys.iter().zip(values) {
        dict.set_item(k, v)?;
    }
    Ok(dict)
}

/// An OpenLDAP home's POSIX groups as geofed.ops.users reads them, from ldapsearch's
/// LDIF of `LDAP_GROUP_ATTRS`: {name, dn, gid, members, uuid} (the first cn and
/// gidNumber, every memberUid, the entryUUID in lower case).
#[pyfunction]
fn ldap_groups<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
    let keys = ["name", "dn", "gid", "members", "uuid"].map(|k| PyString::intern(py, k));
    let out = PyList::empty(py);
    for entry in split(py, text)? {
        let [name, gid, uuid] = firsts(&entry, ["cn", "gidNumber", "entryUUID"]);
        let members = PyList::empty(py);
        for (n, v) in &entry.values {
            if n.eq_ignore_ascii_case("memberUid") {
                members.append(PyString::new(py, v))?;
            }
        }
        let values = [
            text_or_none(py, name),
            PyString::new(py, &entry.dn).into_any(),
            integer_or_none(py, gid)?,
            members.into_any(),
            text_or_none(py, given(uuid).map(str::to_lowercase).as_deref()),
        ];
        out.append(dict_of(py, &keys, values)?)?;
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
    m.add_function(wrap_pyfunction!(ldap_users, m)?)?;
    m.add_function(wrap_pyfunction!(ldap_groups, m)?)?;
    m.add_function(wrap_pyfunction!(plain_text, m)?)?;
    m.add_function(wrap_pyfunction!(written, m)?)
}
