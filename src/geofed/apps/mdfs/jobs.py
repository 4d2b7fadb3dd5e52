"""Running the MDFS job on a placement of the testbed (through `geofed run`'s launcher)."""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

from geofed.errors import UserError


def save_npz(path: Path, x: np.ndarray, y: np.ndarray) -> Path:
    np.savez(path, x=x, y=y)
    return path


def run_on_testbed(fed, placement: str, data_npz: Path, params, split: str = "speed", threads: int = 0,
                   timeout: float | None = None, progress: bool = False) -> dict:
    """One MDFS job on `placement`; the merged result (see dist.py) with per-rank timings."""
    from geofed.launch import job as launch
    from geofed.launch.placement import parse
    from geofed.testbed import core as tb
    from geofed.testbed.plan import make_plan

    tb.require_root("run MDFS on")
    if not tb.is_up(make_plan(fed)):
        raise UserError(f"testbed {fed.name} is not up; run: geofed testbed up {fed.name}")
    with tempfile.TemporaryDirectory(prefix="geofed-mdfs-") as tmp:
        pfile, out = Path(tmp) / "params.json", Path(tmp) / "result.pkl"
        pfile.write_text(json.dumps(params.as_dict()))
        argv = [sys.executable, "-m", "geofed.apps.mdfs.dist", "--data", str(data_npz), "--params", str(pfile),
                "--split", split, "--threads", str(threads), "--out", str(out)] + (["--progress"] if progress else [])
        j = launch.Job(fed, parse(placement, fed), argv)
        rc = launch.run(launch.testbed_command(j), timeout=timeout, job=j)
        if rc != 0 or not out.exists():
            raise RuntimeError(f"MDFS job on {placement} failed (exit status {rc})")
        with open(out, "rb") as f:
            return pickle.load(f)
