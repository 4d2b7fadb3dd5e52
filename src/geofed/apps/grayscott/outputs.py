"""The workflow's BP5 files read back: a bpls-style listing and every step's digest.

pdf.bp (the PDF analysis' output, at its site) and gs.bp (the simulation's checkpoint,
with --checkpoint) are ADIOS2 BP5 files, readable afterwards with bpls or adios2's
Python API; the workflow reads them back to list them in its record and to check that
each step in the file is the one the consumers saw.
"""

from __future__ import annotations

from pathlib import Path

from geofed.apps.grayscott import stream


def listing(path: Path) -> list[dict]:
    """Variables of a BP5 file as bpls lists them: name, type, steps, shape."""
    ab = stream.bindings()
    adios = ab.ADIOS()
    io = adios.DeclareIO(f"list-{path.name}")
    io.SetEngine("BP5")
    engine = io.Open(str(path), ab.Mode.ReadRandomAccess)
    try:
        found = io.AvailableVariables()
    finally:
        engine.Close()
        stream.drop_read_profile(str(path))
    return [{"name": name, "type": info.get("Type", "?"), "steps": int(info.get("AvailableStepsCount", "1")),
             "shape": info.get("Shape", "") or "scalar"} for name, info in sorted(found.items())]


def step_digests(path: Path, fields: list[str], extras: tuple[str, ...] = ()) -> dict[int, str]:
    """Every step of the file: its digest over the plane CRCs of `fields` (each plane checked on reading)."""
    reader = stream.Reader(str(path), "BP5", fields, 10.0, describe=f"read-back of {path.name}", extras=extras)
    try:
        return {r.step: stream.digest(r.crcs) for r in reader.steps()}
    finally:
        reader.close()


def check(path: Path, fields: list[str], written: dict[int, str], extras: tuple[str, ...] = ()) -> dict:
    """The file against the digests its writer reported, as verify() checks a stream."""
    if not path.exists():
        return {"stream": path.name, "written": len(written), "received": 0, "missing": sorted(written), "differ": []}
    got = step_digests(path, fields, extras)
    return {"stream": path.name, "written": len(written), "received": len(got),
            "missing": sorted(set(written) - set(got)),
            "differ": sorted(s for s in got if s in written and got[s] != written[s]),
            "listing": listing(path)}
