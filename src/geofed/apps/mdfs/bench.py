"""`geofed bench mdfs`: geofed's MDFS against the reference (PyPI mdfs 1.5.2) on the same
machine, data and parameters, in one run: CPU and wall time, medians of --repeat runs,
and whether both found the same relevant variables."""

from __future__ import annotations

import importlib.util
import os
import statistics
import time

import numpy as np

from geofed import records
from geofed.errors import UserError

CASES = {"1d1": (1, 1), "2d1": (2, 1), "2d30": (2, 30), "3d1": (3, 1)}


def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def check(cases: str) -> list[str]:
    """The cases asked for; refused (UserError) when the reference is missing or a case unknown."""
    if importlib.util.find_spec("mdfs") is None:
        raise UserError("bench mdfs: the reference is not installed; pip install 'mdfs==1.5.2'")
    names = [c.strip() for c in cases.split(",") if c.strip()]
    bad = [c for c in names if c not in CASES]
    if bad:
        raise UserError(f"--cases: unknown {', '.join(bad)} (known: {', '.join(CASES)})")
    return names


def measure(cases: str, variables: int, repeat: int, threads: int, progress) -> dict:
    """Each case by the reference, by geofed on one thread and on `threads` (0: every core)."""
    import mdfs

    from geofed.apps.mdfs import core, data
    names = check(cases)
    threads = threads or os.cpu_count() or 1
    ds = data.madelon_like(p=variables)
    xf, yi = np.asfortranarray(ds.x), ds.y.astype(np.intc)
    rows = []
    for case in names:
        dim, disc = CASES[case]
        params = core.Params(dimensions=dim, discretizations=disc, n_contrast=None if (dim, disc) != (1, 1) else 0)
        sides = {"reference": lambda: mdfs.run(xf, yi, dimensions=dim, discretizations=disc, seed=0,
                                               n_contrast=params.contrast_count(ds.x.shape[1]) or None),
                 "geofed 1 thread": lambda: core.analyse(ds.x, ds.y, params, threads=1),
                 f"geofed {threads} threads": lambda: core.analyse(ds.x, ds.y, params, threads=threads)}
        found = {}
        for side, fn in sides.items():
            cpu, wall = [], []
            for r in range(repeat):
                progress(f"bench mdfs: {case} {side} run {r + 1}/{repeat}")
                out, c, w = _timed(fn)
                cpu.append(c)
                wall.append(w)
            rel = out["relevant_variables"] if side == "reference" else out["relevant"]
            found[side] = [int(v) for v in rel]
            rows.append({"case": case, "dimensions": dim, "discretizations": disc, "side": side,
                         "threads": 1 if side != f"geofed {threads} threads" else threads,
                         "cpu_s": statistics.median(cpu), "wall_s": statistics.median(wall),
                         "cpu_samples": cpu, "wall_samples": wall, "relevant": found[side]})
        ref = next(r for r in rows if r["case"] == case and r["side"] == "reference")
        for r in rows:
            if r["case"] == case:
                r["speedup_wall"] = ref["wall_s"] / r["wall_s"]
                r["speedup_cpu"] = ref["cpu_s"] / r["cpu_s"]
                r["same_relevant"] = r["relevant"] == ref["relevant"]
    return {"n_objects": int(ds.x.shape[0]), "n_variables": int(ds.x.shape[1]), "data": ds.source, "repeat": repeat,
            "host_cpus": os.cpu_count(), "rows": rows}


def format_table(rec: records.Record) -> str:
    d = rec.data
    lines = [f"MDFS on {d.data}: medians of {d.repeat} run(s)",
             f"{'case':<6} {'side':<20} {'CPU [s]':>9} {'wall [s]':>9} {'x ref (wall)':>12} {'x ref (CPU)':>11} "
             f"{'relevant':>8} same"]
    for r in d.rows:
        lines.append(f"{r['case']:<6} {r['side']:<20} {r['cpu_s']:>9.3f} {r['wall_s']:>9.3f} {r['speedup_wall']:>12.1f}"
                     f" {r['speedup_cpu']:>11.1f} {len(r['relevant']):>8} {'yes' if r['same_relevant'] else 'NO'}")
    return "\n".join(lines)
