//! The module `geofed_ldif`: `parse(text, names)` as geofed.ops.ldapcli.parse returns it,
//! `ldap_users` and `ldap_groups`, a home's entries as geofed.ops.users reads them,
//! `plain_text(entries)` as geofed.ops.ldapcli.entries_text makes it, and `merge`, the
//! merged entries as geofed.ops.users writes them (with their digests).

use std::borrow::Cow;
use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

use pyo3::types::{IntoPyDict, PyBool, PyDict, PyList, PyString, PyTuple};

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

/// A value as the digest takes it: a list's values joined by commas, else str().
fn text_of<'a>(value: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, str>> {
    if let Ok(s) = value.downcast::<PyString>() {
        return s.to_cow();
    }
    if let Ok(list) = value.downcast::<PyList>() {
        let mut out = String::new();
        for (i, v) in list.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&text_of(&v)?);
        }
        return Ok(Cow::Owned(out));
    }
    Ok(Cow::Owned(value.str()?.to_cow()?.into_owned()))
}

/// `name.lower()` as Python makes it (ASCII here, anything else by Python itself).
fn lower<'a>(name: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, str>> {
    if let Ok(s) = name.downcast::<PyString>() {
        let text = s.to_cow()?;
        if text.is_ascii() {
            return Ok(if text.bytes().any(|b| b.is_ascii_uppercase()) {
                Cow::Owned(text.to_ascii_lowercase())
            } else {
                text
            });
        }
    }
    Ok(Cow::Owned(name.call_method0("lower")?.downcast_into::<PyString>()?.to_cow()?.into_owned()))
}

/// A site as `merge` takes it: its code, prefix, offset and id range, its users and groups.
struct Site<'py> {
    code: Bound<'py, PyString>,
    prefix: String,
    offset: i64,
    id_range: i64,
    users: Bound<'py, PyAny>,
    groups: Bound<'py, PyAny>,
}

impl Site<'_> {
    /// The federation's id for a home id; None where it leaves the site's range (or is no
    /// 64-bit integer).
    fn merged_id(&self, local: &Bound<'_, PyAny>) -> Option<i64> {
        local.extract::<i64>().ok().filter(|id| (0..self.id_range).contains(id)).map(|id| self.offset + id)
    }

    fn range(&self) -> String {
        format!("{}-{}", self.offset, self.offset + self.id_range - 1)
    }
}

/// `merge`'s result: the merged users and groups, the refusals, each site's counts.
type Merged<'py> = (Bound<'py, PyDict>, Bound<'py, PyDict>, Bound<'py, PyList>, Bound<'py, PyDict>);

/// A candidate for a merged name: the name, its site (by place), its entry at home, its
/// merged id(s).
type Candidate<'py> = (String, usize, Bound<'py, PyDict>, i64, i64);

/// The merge of geofed.ops.users.merge (which says what it does): `sites` [(code, prefix,
/// offset, id_range, users, groups)] in the homes' order, `held` the admin directory's
/// hand-made entries, `outside` the merged users the homes do not hold (name -> site).
/// Returns (users, groups, refusals, read): the merged entries by name, sorted, each as it
/// is written with its geofedDigest (memberUid sorted, one member alone as its value,
/// none as None); each refusal (kind, name, entry, detail, sources) in the order found;
/// each site's counts.
#[pyfunction]
fn merge<'py>(
    py: Python<'py>,
    sites: &Bound<'py, PyAny>,
    held: &Bound<'py, PyDict>,
    outside: &Bound<'py, PyDict>,
) -> PyResult<Merged<'py>> {
    let key = |k: &str| PyString::intern(py, k);
    let held_of = |k: &str| -> PyResult<Bound<'py, PyDict>> {
        Ok(held.get_item(k)?.ok_or_else(|| PyValueError::new_err(format!("held: no {k}")))?.downcast_into()?)
    };
    let (held_users, held_uids, held_groups, held_gids) =
        (held_of("users")?, held_of("uids")?, held_of("groups")?, held_of("gids")?);
    let sites: Vec<Site> = sites
        .try_iter()?
        .map(|s| {
            let (code, prefix, offset, id_range, users, groups) = s?.extract()?;
            Ok(Site { code, prefix, offset, id_range, users, groups })
        })
        .collect::<PyResult<_>>()?;
    let codes: Vec<String> = sites.iter().map(|s| Ok(s.code.to_cow()?.into_owned())).collect::<PyResult<_>>()?;
    let [k_name, k_dn, k_uid, k_gid, k_gecos, k_home, k_shell, k_activated, k_members] =
        ["name", "dn", "uid", "gid", "gecos", "home", "shell", "activated", "members"].map(key);
    let [a_cn, a_uid, a_gid, a_home, a_shell, a_gecos, a_site, a_source, a_digest, a_members] = [
        "cn",
        "uidNumber",
        "gidNumber",
        "homeDirectory",
        "loginShell",
        "gecos",
        "geofedSite",
        "geofedSource",
        "geofedDigest",
        "memberUid",
    ]
    .map(key);
    let item = |d: &Bound<'py, PyDict>, k: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyAny>> {
        d.get_item(k)?.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(k.clone().unbind()))
    };
    let refusals = PyList::empty(py);
    let refuse = |kind: &str, name: &Bound<'py, PyAny>, what: &str, detail: String, sources: Vec<String>| {
        refusals.append((kind, name, what, detail, sources))
    };
    let source = |i: usize, entry: &Bound<'py, PyDict>| -> PyResult<String> {
        Ok(format!("{}:{}", codes[i], item(entry, &k_dn)?.str()?.to_cow()?))
    };
    let sources = |found: &[Candidate<'py>]| -> PyResult<Vec<String>> {
        found.iter().map(|(_, i, e, ..)| source(*i, e)).collect()
    };
    let joined =
        |found: &[Candidate<'py>]| found.iter().map(|(_, i, ..)| codes[*i].as_str()).collect::<Vec<_>>().join(" and ");
    let read = PyDict::new(py);
    let mut candidates: Vec<Candidate> = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        let code = &codes[i];
        let mut activated = 0;
        for u in site.users.try_iter()? {
            let u = u?.downcast_into::<PyDict>()?;
            if !item(&u, &k_activated)?.is_truthy()? {
                continue;
            }
            activated += 1;
            let name = item(&u, &k_name)?;
            let text = if name.is_none() { String::new() } else { name.downcast::<PyString>()?.to_cow()?.into_owned() };
            if !crate::posix_name(&text) {
                let detail = "not a POSIX login name (a-z 0-9 _ . -, at most 32)";
                refuse("bad-name", &name, "user", detail.into(), vec![source(i, &u)?])?;
                continue;
            }
            let (uid, gid) = (item(&u, &k_uid)?, item(&u, &k_gid)?);
            if uid.is_none() || gid.is_none() {
                let missing = if uid.is_none() { "uidNumber" } else { "gidNumber" };
                refuse(
                    "missing-id",
                    &name,
                    "user",
                    format!("activated at {code} without a {missing}"),
                    vec![source(i, &u)?],
                )?;
                continue;
            }
            match (site.merged_id(&uid), site.merged_id(&gid)) {
                (Some(m_uid), Some(m_gid)) => candidates.push((text, i, u, m_uid, m_gid)),
                (m_uid, _) => {
                    let (attr, bad) = if m_uid.is_none() { ("uidNumber", uid) } else { ("gidNumber", gid) };
                    let detail =
                        format!("{attr} {} + {} leaves site {code}'s range {}", bad.str()?, site.offset, site.range());
                    refuse("id-range", &name, "user", detail, vec![source(i, &u)?])?;
                }
            }
        }
        read.set_item(&site.code, [("activated", activated), ("groups", site.groups.len()?)].into_py_dict(py)?)?;
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0)); // stable: a name's candidates stay in the homes' order
    let users = PyDict::new(py);
    // Each possible member's site (by place; another site's as none of these), looked up
    // once per membership.
    let others: Vec<(String, usize)> = outside
        .iter()
        .map(|(name, site)| {
            let site = site.str()?.to_cow()?.into_owned();
            Ok((name.str()?.to_cow()?.into_owned(), codes.iter().position(|c| *c == site).unwrap_or(usize::MAX)))
        })
        .collect::<PyResult<_>>()?;
    let mut site_of: FxHashMap<&str, usize> = FxHashMap::default();
    site_of.reserve(others.len() + candidates.len());
    site_of.extend(others.iter().map(|(n, i)| (n.as_str(), *i)));
    for found in candidates.chunk_by(|a, b| a.0 == b.0) {
        let (name, i, u, uid, gid) = &found[0];
        let py_name = PyString::new(py, name);
        let uid_taken = !held_uids.is_empty() && held_uids.contains(uid)?;
        if found.len() > 1 || held_users.contains(&py_name)? || uid_taken {
            let (kind, detail) = if found.len() > 1 {
                (
                    "same-name",
                    format!("activated at {}: user names must be unique across the federation", joined(found)),
                )
            } else if let Some(h) = held_users.get_item(&py_name)? {
                ("name-taken", format!("the admin directory has a hand-made {}", h.get_item("dn")?.str()?.to_cow()?))
            } else {
                let dn = held_uids.get_item(uid)?.expect("a held uid");
                ("id-taken", format!("uidNumber {uid} belongs to the hand-made {}", dn.str()?.to_cow()?))
            };
            refuse(kind, &py_name, "user", detail, sources(found)?)?;
            continue;
        }
        let (gecos, home, shell, dn) = (item(u, &k_gecos)?, item(u, &k_home)?, item(u, &k_shell)?, item(u, &k_dn)?);
        let mut lines = [
            ("cn", text_of(&gecos)?),
            ("uidNumber", uid.to_string().into()),
            ("gidNumber", gid.to_string().into()),
            ("homeDirectory", text_of(&home)?),
            ("loginShell", text_of(&shell)?),
            ("gecos", text_of(&gecos)?),
            ("geofedSite", codes[*i].as_str().into()),
            ("geofedSource", text_of(&dn)?),
        ];
        let digest = crate::digest(&mut lines);
        let entry = PyDict::new(py);
        entry.set_item(&a_cn, &gecos)?;
        entry.set_item(&a_uid, uid)?;
        entry.set_item(&a_gid, gid)?;
        entry.set_item(&a_home, home)?;
        entry.set_item(&a_shell, shell)?;
        entry.set_item(&a_gecos, gecos)?;
        entry.set_item(&a_site, &sites[*i].code)?;
        entry.set_item(&a_source, dn)?;
        entry.set_item(&a_digest, digest)?;
        users.set_item(py_name, entry)?;
        site_of.insert(name, *i);
    }
    let mut group_candidates: Vec<Candidate> = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        for g in site.groups.try_iter()? {
            let g = g?.downcast_into::<PyDict>()?;
            let name = format!("{}{}", site.prefix, lower(&item(&g, &k_name)?)?);
            let gid = item(&g, &k_gid)?;
            if gid.is_none() {
                continue; // not a POSIX group
            }
            if !crate::posix_name(&name) {
                let detail = "not a POSIX group name after prefixing (a-z 0-9 _ . -, at most 32)";
                refuse("bad-name", &PyString::new(py, &name), "group", detail.into(), vec![source(i, &g)?])?;
                continue;
            }
            match site.merged_id(&gid) {
                Some(m_gid) => group_candidates.push((name, i, g, m_gid, 0)),
                None => {
                    let detail = format!(
                        "gidNumber {} + {} leaves site {}'s range {}",
                        gid.str()?,
                        site.offset,
                        codes[i],
                        site.range()
                    );
                    refuse("id-range", &PyString::new(py, &name), "group", detail, vec![source(i, &g)?])?
                }
            }
        }
    }
    group_candidates.sort_by(|a, b| a.0.cmp(&b.0));
    let groups = PyDict::new(py);
    for found in group_candidates.chunk_by(|a, b| a.0 == b.0) {
        let (name, i, g, gid, _) = &found[0];
        let py_name = PyString::new(py, name);
        let gid_taken = !held_gids.is_empty() && held_gids.contains(gid)?;
        if found.len() > 1 || held_groups.contains(&py_name)? || gid_taken {
            let (kind, detail) = if found.len() > 1 {
                ("group-clash", format!("groups of {} are both {name} after prefixing", joined(found)))
            } else if let Some(h) = held_groups.get_item(&py_name)? {
                ("group-clash", format!("the admin directory has a hand-made {}", h.get_item("dn")?.str()?.to_cow()?))
            } else {
                let dn = held_gids.get_item(gid)?.expect("a held gid");
                ("id-taken", format!("gidNumber {gid} belongs to the hand-made {}", dn.str()?.to_cow()?))
            };
            refuse(kind, &py_name, "group", detail, sources(found)?)?;
            continue;
        }
        // The members that are merged users of this group's site, sorted, each once.
        let listed: Vec<Bound<PyAny>> = item(g, &k_members)?.try_iter()?.collect::<PyResult<_>>()?;
        let mut members = listed.iter().map(lower).collect::<PyResult<Vec<_>>>()?;
        members.retain(|m| site_of.get(m.as_ref()) == Some(i));
        members.sort_unstable();
        members.dedup();
        let dn = item(g, &k_dn)?;
        let text = members.join(",");
        let member_uid = match members.as_slice() {
            [] => py.None().into_bound(py),
            [one] if one.is_empty() => py.None().into_bound(py),
            [one] => PyString::new(py, one).into_any(),
            _ => PyList::new(py, members.iter().map(|m| PyString::new(py, m)))?.into_any(),
        };
        let mut lines = [
            ("gidNumber", gid.to_string().into()),
            ("memberUid", if member_uid.is_none() { "None".into() } else { Cow::Borrowed(text.as_str()) }),
            ("geofedSite", codes[*i].as_str().into()),
            ("geofedSource", text_of(&dn)?),
        ];
        let digest = crate::digest(&mut lines);
        let entry = PyDict::new(py);
        entry.set_item(&a_gid, gid)?;
        entry.set_item(&a_members, member_uid)?;
        entry.set_item(&a_site, &sites[*i].code)?;
        entry.set_item(&a_source, dn)?;
        entry.set_item(&a_digest, digest)?;
        groups.set_item(py_name, entry)?;
    }
    Ok((users, groups, refusals, read))
}

#[pymodule]
fn geofed_ldif(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(ldap_users, m)?)?;
    m.add_function(wrap_pyfunction!(ldap_groups, m)?)?;
    m.add_function(wrap_pyfunction!(plain_text, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)
}
