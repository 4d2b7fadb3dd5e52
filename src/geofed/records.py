"""Records: the JSON every capability produces and the report renders.

A record is {"schema", "kind", "created", "geofed_version", "host", "meta", "data"}.
`kind` names the capability and its result ("testbed.verify", "job.pingpong", ...)
and selects the report section; `data` is the kind's own content. Capabilities only
write records; they never format reports.
"""

from __future__ import annotations

import json
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

from geofed import __version__
from geofed.errors import UserError

SCHEMA = 1
REQUIRED = ("schema", "kind", "created", "geofed_version", "meta", "data")


def make(kind: str, data: dict, **meta) -> dict:
    return {
        "schema": SCHEMA,
        "kind": kind,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "geofed_version": __version__,
        "host": socket.gethostname(),
        "meta": meta,
        "data": data,
    }


def federation_meta(fed) -> dict:
    return {"federation": fed.name, "federation_file": str(fed.path), "federation_sha256": fed.sha256}


def save(record: dict, directory: str | Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = directory / f"{record['kind']}-{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{record['kind']}-{stamp}-{n}.json"
    path.write_text(json.dumps(record, indent=1))
    return path


def validate(record: dict, where: str = "record") -> dict:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: not a geofed record (not a JSON object)")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise ValueError(f"{where}: not a geofed record (missing {', '.join(missing)})")
    if record["schema"] != SCHEMA:
        raise ValueError(f"{where}: record schema {record['schema']} is not {SCHEMA}")
    if not isinstance(record["kind"], str) or not isinstance(record["data"], dict) or not isinstance(record["meta"], dict):
        raise ValueError(f"{where}: not a geofed record (kind must be a string, meta and data objects)")
    return record


def load_paths(paths: list[str]) -> list[tuple[str, dict]]:
    """(path, record) of record files and of every record in directories, in the order given.

    A file named on its own must be a record; in a directory other JSON is skipped."""
    found = []
    for spec in paths:
        p = Path(spec)
        if not p.exists():
            raise UserError(f"{spec}: no such file or directory")
        for f in sorted(p.glob("*.json")) if p.is_dir() else [p]:
            try:
                found.append((str(f), validate(json.loads(f.read_text(encoding="utf-8")), str(f))))
            except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
                if not p.is_dir():
                    raise UserError(f"{f}: not a geofed record ({str(e).splitlines()[0][:80]})") from None
    if not found:
        raise UserError(f"no geofed record in {', '.join(paths)}")
    return found


def load_dir(directory: str | Path) -> list[dict]:
    """Every record in a directory, oldest first; other JSON files are skipped."""
    out = []
    for p in sorted(Path(directory).glob("*.json")):
        try:
            out.append(validate(json.loads(p.read_text()), str(p)))
        except (ValueError, json.JSONDecodeError):
            continue
    return sorted(out, key=lambda r: r["created"])
