"""Records: the typed results every capability produces and the report renders.

A record is a `Record`: its kind ("testbed.verify", "bench.hpl", ...), the version of
that kind, when and by which geofed on which host it was made, free-form `meta` (the
federation it ran on) and `data`, an instance of the kind's dataclass. The kinds are
declared in this package's modules, one per family (testbed, mpi, hpl, ...), each a
dataclass registered with `@kind(NAME, version=N)`; `make`
builds and checks the data at once, so a producer's drift fails in its own tests,
and loading refuses a file of an unknown kind or version in one line naming it.

On disk a record is JSON: {"schema": 2, "kind", "version", "created", "geofed_version",
"host", "meta", "data"}. Records of the first schema (no "version") load as version 1
of their kind. Capabilities only write records; they never format reports.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import re
import socket
import time
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from geofed import __version__
from geofed.errors import UserError

SCHEMA = 2
FIRST_SCHEMA = 1  # records of geofed before kinds had versions
ENVELOPE = ("schema", "kind", "created", "geofed_version", "meta", "data")

KINDS: dict[str, type] = {}


class RecordError(ValueError):
    """A record that does not fit its kind: the message names what is wrong."""


def kind(name: str, version: int = 1, added: dict | None = None):
    """Register a record kind: `@kind("bench.mpi")` over a class of typed fields whose
    docstring has an `Attributes:` section with one line per field (Google's style: what
    `help()` shows and docs/records.md is made of); a field without its line, or a line
    without its field, is refused at import.

    A kind whose version is above 1 may read an older version's data with a
    classmethod `upgrade(version, data) -> data` (dicts, before they are typed); where the
    newer version only added fields, `added` names them with what an older record holds."""
    def register(cls):
        if added:
            cls.upgrade = classmethod(lambda _cls, _version, data: {**added, **data})
        if name in KINDS:
            raise RuntimeError(f"record kind {name} declared twice")
        cls = dataclass(cls, kw_only=True)  # the fields of a shared base come first
        cls.KIND, cls.VERSION, cls.FIELD_DOCS = name, version, _field_docs(cls)
        keys = [_key(f) for f in dataclasses.fields(cls)]
        if set(keys) != set(cls.FIELD_DOCS):
            raise RuntimeError(f"record kind {name}: fields {sorted(set(keys) - set(cls.FIELD_DOCS))} have no line "
                               f"under Attributes, lines {sorted(set(cls.FIELD_DOCS) - set(keys))} no field")
        KINDS[name] = cls
        return cls
    return register


def _field_docs(cls) -> dict[str, str]:
    """Field name -> meaning, from the `Attributes:` sections of the class and its bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        text = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
        if "\nAttributes:\n" not in text:
            continue
        entry = None
        for line in text.split("\nAttributes:\n", 1)[1].splitlines():
            if line.startswith("        ") and entry:
                docs[entry] += " " + line.strip()
            elif m := re.match(r"    (\w+): (.*)", line):
                entry, docs[m[1]] = m[1], m[2].strip()
            elif line.strip():
                break
    return docs


def json_key(key: str):
    """A field stored under another name in the JSON, where that is no Python name (`class`)."""
    return field(metadata={"key": key})


def _key(f) -> str:
    return f.metadata.get("key") or f.name


@dataclass(frozen=True)
class Sanity:
    """Is the result correct (data intact, residual passed, steps delivered), apart from how fast it came.

    Read `.ok`: a verdict is an object, never false, so `rec.sanity() or default` replaces
    only the None of a kind that checks nothing."""
    ok: bool
    why: str  # what was checked, or what failed


def sanity_of(recs: list[Record]) -> Sanity:
    """Every record that has a correctness check, ANDed; the failures named."""
    checked = [(r, r.sanity()) for r in recs]
    checked = [(r, s) for r, s in checked if s is not None]
    bad = [f"{r.kind}: {s.why}" for r, s in checked if not s.ok]
    if bad:
        return Sanity(False, "; ".join(bad))
    return Sanity(True, f"{len(checked)} record(s) checked")


@dataclass
class Record:
    kind: str
    version: int
    created: str
    geofed_version: str
    host: str
    meta: dict
    data: object  # an instance of KINDS[kind]
    path: str | None = None  # the file it was read from, if any

    def sanity(self) -> Sanity | None:
        """The kind's correctness verdict, None where it has no notion of one."""
        check = getattr(self.data, "sanity", None)
        return check() if check else None

    @property
    def federation(self) -> str:
        return self.meta.get("federation", "")

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "kind": self.kind, "version": self.version, "created": self.created,
                "geofed_version": self.geofed_version, "host": self.host, "meta": self.meta,
                "data": _plain(self.data)}


def make(kind_name: str, data: dict, **meta) -> Record:
    """A record of `kind_name` made now; its data checked against the kind (RecordError)."""
    cls = KINDS.get(kind_name)
    if cls is None:
        raise RecordError(f"unknown record kind {kind_name!r}")
    return Record(kind_name, cls.VERSION, datetime.now(timezone.utc).isoformat(timespec="seconds"), __version__,
                  socket.gethostname(), meta, typed(cls, data, f"{kind_name} version {cls.VERSION}"))


def federation_meta(fed) -> dict:
    return {"federation": fed.name, "federation_file": str(fed.path), "federation_sha256": fed.sha256}


def save(record: Record, directory: str | Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = directory / f"{record.kind}-{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{record.kind}-{stamp}-{n}.json"
    path.write_text(dumps(record))
    return path


def dumps(record: Record) -> str:
    return json.dumps(record.to_dict(), indent=1)


def from_dict(doc, path: str | None = None) -> Record:
    """A Record from its JSON form (read from `path`, if from a file); RecordError naming what is wrong."""
    if not isinstance(doc, dict):
        raise RecordError("not a geofed record (not a JSON object)")
    missing = [k for k in ENVELOPE if k not in doc]
    if missing:
        raise RecordError(f"not a geofed record (missing {', '.join(missing)})")
    schema, name = doc["schema"], doc["kind"]
    if schema not in (FIRST_SCHEMA, SCHEMA):
        raise RecordError(f"record schema {schema!r}: this geofed ({__version__}) reads schemas {FIRST_SCHEMA} and {SCHEMA}")
    if not isinstance(name, str) or not isinstance(doc["data"], dict) or not isinstance(doc["meta"], dict):
        raise RecordError("not a geofed record (kind must be a string, meta and data objects)")
    cls = KINDS.get(name)
    if cls is None:
        raise RecordError(f"unknown record kind {name!r} (this geofed, {__version__}, knows {len(KINDS)} kinds: "
                          "docs/records.md)")
    version = 1 if schema == FIRST_SCHEMA else doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordError(f"{name}: version {version!r} is not a version")
    data = doc["data"]
    if version > cls.VERSION:
        raise RecordError(f"{name} version {version} is newer than this geofed's ({__version__}: version {cls.VERSION})")
    if version < cls.VERSION:
        if not hasattr(cls, "upgrade"):
            raise RecordError(f"{name} version {version}: this geofed ({__version__}) reads version {cls.VERSION} only")
        data = cls.upgrade(version, dict(data))
    try:
        typed_data = typed(cls, data, f"{name} version {version}")
    except RecordError as e:
        raise RecordError(f"{e} (written by geofed {doc.get('geofed_version', '?')})") from None
    return Record(name, cls.VERSION, str(doc["created"]), str(doc["geofed_version"]), str(doc.get("host", "")),
                  doc["meta"], typed_data, path)


def read(path: str | Path) -> Record:
    """The record in one file; RecordError naming what is wrong."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"not a geofed record (not JSON: {str(e).splitlines()[0][:80]})") from None
    except OSError as e:
        raise RecordError(f"cannot read: {e.strerror}") from None
    return from_dict(doc, str(path))


def _is_record(path: Path) -> bool:
    """Whether a JSON file claims to be a geofed record (it has the envelope), whether or not it fits."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(doc, dict) and all(k in doc for k in ("schema", "kind", "data"))


def _read_in_dir(path: Path) -> Record | None:
    """A record found in a directory: other JSON is skipped; a record that cannot be read is named."""
    try:
        return read(path)
    except RecordError as e:
        if _is_record(path):
            raise UserError(f"{path}: {e}") from None
        return None


def load_paths(paths: list[str]) -> list[Record]:
    """Records of files and of every record in directories, in the order given.

    A file named on its own must be a record; in a directory other JSON is skipped,
    but a geofed record this geofed cannot read is refused, naming the file."""
    found = []
    for spec in paths:
        p = Path(spec)
        if not p.exists():
            raise UserError(f"{spec}: no such file or directory")
        if p.is_dir():
            found += [r for f in sorted(p.glob("*.json")) if (r := _read_in_dir(f)) is not None]
        else:
            try:
                found.append(read(p))
            except RecordError as e:
                raise UserError(f"{p}: {e}") from None
    if not found:
        raise UserError(f"no geofed record in {', '.join(paths)}")
    return found


def load_tree(paths: list[str]) -> list[Record]:
    """Records of files and of directory trees (every directory below, `geofed-out/`
    and its parts included), oldest first; as `load_paths` otherwise."""
    expanded = []
    try:
        for spec in paths:
            p = Path(spec)
            expanded.append(spec)
            if p.is_dir():
                expanded += sorted(str(d) for d in p.rglob("*") if d.is_dir())
        return sorted(load_paths(expanded), key=lambda r: r.created)
    except OSError as e:  # a directory on the way this user may not enter
        raise UserError(f"{e.filename}: cannot read: {e.strerror}") from None


def load_dir(directory: str | Path) -> list[Record]:
    """Every record in a directory, oldest first; other JSON files are skipped."""
    out = [r for p in sorted(Path(directory).glob("*.json")) if (r := _read_in_dir(p)) is not None]
    return sorted(out, key=lambda r: r.created)


# ---------------------------------------------------------------- typing the data


def typed(cls, data, where: str):
    """An instance of dataclass `cls` from a dict: every field present (or defaulted),
    of its declared type, and nothing else."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected an object, got {type(data).__name__}")
    fields = {_key(f): f for f in dataclasses.fields(cls)}
    extra = sorted(set(data) - set(fields))
    if extra:
        raise RecordError(f"{where}: unknown field(s) {', '.join(extra)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for key, f in fields.items():
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{where}: missing field {key}")
            continue
        values[f.name] = _value(hints[f.name], data[key], f"{where}: {key}")
    return cls(**values)


def _value(hint, value, where: str):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _value(a, value, where)
            except RecordError as e:
                errors.append(str(e))
        raise RecordError(errors[0] if len(inner) == 1 else f"{where}: expected {_name(hint)}, got {_got(value)}")
    if hint is typing.Any:
        return value
    if dataclasses.is_dataclass(hint):
        return typed(hint, value, where)
    if origin is tuple or hint is tuple:
        if not isinstance(value, (list, tuple)):
            raise RecordError(f"{where}: expected a list, got {_got(value)}")
        return tuple(_value(args[0], v, where) for v in value) if args and args[-1] is Ellipsis else tuple(value)
    if origin is list or hint is list:
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, got {_got(value)}")
        return [_value(args[0], v, where) for v in value] if args and dataclasses.is_dataclass(args[0]) else value
    plain = PLAIN_TYPES.get(origin or hint)
    if plain is None:
        raise TypeError(f"{where}: records cannot declare a field of type {hint!r}")
    accepts, expected = plain
    if not accepts(value):
        raise RecordError(f"{where}: expected {expected}, got {_got(value)}")
    return value


# JSON's plain values: what a field of the type accepts, and its name in an error.
PLAIN_TYPES = {
    dict: (lambda v: isinstance(v, dict), "an object"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    str: (lambda v: isinstance(v, str), "a string"),
}


def _name(hint) -> str:
    return " or ".join(getattr(a, "__name__", str(a)) for a in typing.get_args(hint))


def _got(value) -> str:
    return "null" if value is None else type(value).__name__


def _plain(obj):
    """The JSON form of typed data: dataclasses as objects, tuples as lists."""
    if dataclasses.is_dataclass(obj):
        return {_key(f): _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------- docs/records.md


def reference() -> str:
    """docs/records.md: every kind, its version and its fields, from the registry."""
    out = [line.rstrip() for line in _DOC_HEAD.strip("\n").splitlines()] + [""]
    for name in sorted(KINDS):
        cls = KINDS[name]
        out += [f"## `{name}` (version {cls.VERSION})", "", (cls.__doc__ or "").strip().splitlines()[0], "",
                "| field | type | meaning |", "|---|---|---|"]
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            optional = "" if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING else " (optional)"
            out.append(f"| `{_key(f)}` | {_type_text(hints[f.name])}{optional} | {cls.FIELD_DOCS[_key(f)]} |")
        if hasattr(cls, "sanity"):
            out += ["", f"Sanity: {(cls.sanity.__doc__ or '').strip()}"]
        out.append("")
    params = sorted(_params(), key=lambda t: t.__name__)
    if params:
        out += ["## Parameters", "", "The typed parameters of workloads and their models; some are stored in records.", ""]
        for cls in params:
            out += [f"### `{cls.__name__}`", "", (cls.__doc__ or "").strip().splitlines()[0], "",
                    "| field | type | default |", "|---|---|---|"]
            hints = typing.get_type_hints(cls)
            out += [f"| `{f.name}` | {_type_text(hints[f.name])} | "
                    f"{'-' if f.default is dataclasses.MISSING else f'`{f.default!r}`'} |" for f in dataclasses.fields(cls)]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _params() -> set:
    """Every `...Params` dataclass the package's modules declare."""
    return {v for m in _families() for v in vars(m).values() if isinstance(v, type) and dataclasses.is_dataclass(v)
            and v.__name__.endswith("Params") and v.__module__ == m.__name__}


def _type_text(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in typing.get_args(hint)).replace("NoneType", "null")
    if dataclasses.is_dataclass(hint):
        return f"`{hint.__name__}`"
    origin = typing.get_origin(hint)
    return {list: "list", dict: "object", tuple: "list", str: "string", int: "integer", float: "number",
            bool: "boolean", type(None): "null"}.get(origin or hint, str(hint))


_DOC_HEAD = """
# Records

<!-- Generated by geofed.records.reference() from the registry of kinds; tests/test_records.py
     checks this file against it. Edit the dataclasses in src/geofed/records/, then run
     `python -c 'from geofed import records; print(records.reference(), end="")' > docs/records.md`. -->

Every capability writes **records** (JSON) and never formats a report itself:

```json
{"schema": 2, "kind": "testbed.verify", "version": 1, "created": "2026-11-21T20:10:22+00:00",
 "geofed_version": "0.1.0", "host": "vm",
 "meta": {"federation": "icm-task", "federation_file": "...", "federation_sha256": "..."},
 "data": { ... the kind's fields, below ... }}
```

Each kind is a dataclass in `src/geofed/records/` declared with `@kind("bench.mpi")` and its own version: producers call
`records.make(kind, data, **meta)`, which checks every field at once; `records.save(record, DIR)`
writes `<kind>-<timestamp>.json` and never overwrites another record; `records.load_dir(DIR)` and
`records.load_paths(PATHS)` return typed `Record`s and refuse, in one line naming the file, a record of
an unknown kind, of a version newer than this geofed's, or whose fields do not fit. Records of the first
schema (no `version`, geofed before typed records) load as version 1 of their kind.

A kind with a correctness notion has `sanity()`: is the result correct (data intact, residual check
passed, every step delivered), kept apart from its performance figures; the report shows it the same
way for every kind and `records.sanity_of(records)` ANDs them.

`geofed report DIR|FILE...` renders records to `DIR/report.html` with PNG plots (`src/geofed/report/`):
directories are searched with every directory below them (`geofed-out/` and its parts), files are
records on their own. It opens with an overview: each federation drawn with its sites and links, each
link's verdict with its reason (`testbed verify`, `bench check`), its headline figures beside the link
model's and the seeds' own; then one section per kind; records of a kind no section renders are listed,
not dropped. A path that does not exist, cannot be entered or written is one line, exit 2.

A new kind is one dataclass registered with `@kind` in this package, each field with its line under
`Attributes:` in the docstring; change a kind's fields and raise its version (`@kind(NAME, version=N)`) (with an `upgrade` from the older one where it can be read).
"""


def _families() -> list:
    """The modules of this package, one per family of kinds."""
    return [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]


# Importing every family fills KINDS, so a new family is one new module.
_families()
