"""Running the MDFS job on a placement of the testbed (through `geofed run`'s launcher)."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np



def save_npz(path: Path, x: np.ndarray, y: np.ndarray) -> Path:
    np.savez(path, x=x, y=y)
    return path


def run_on_placement(fed, placement: str, data_npz: Path, params, split: str = "speed", threads: int = 0,
                     timeout: float | None = None, progress: bool = False, hostfile: str | None = None) -> dict:
    """One MDFS job on `placement` (the testbed, or a real cluster's hostfile); the merged
    result (see dist.py) with per-rank timings. A failed job raises JobFailed."""
    from geofed.launch import job as launch
    from geofed.launch import runner
    from geofed.launch.placement import parse

    with runner.work_directory("mdfs", hostfile) as tmp:
        pfile, out = tmp / "params.json", tmp / "result.pkl"
        pfile.write_text(json.dumps(params.as_dict()))
        argv = [sys.executable, "-m", "geofed.apps.mdfs.dist", "--data", str(data_npz), "--params", str(pfile),
                "--split", split, "--threads", str(threads), "--out", str(out)] + (["--progress"] if progress else [])
        j = launch.Job(fed, parse(placement, fed), argv)
        runner.run(j, what=f"mdfs on {placement}", hostfile=hostfile, timeout=timeout)
        with open(out, "rb") as f:
            return pickle.load(f)
