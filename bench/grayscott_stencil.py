#!/usr/bin/env python3
"""Stencil benchmark: the Gray-Scott step per rank, native (Rust) against NumPy, in one run.

For every L and rank count the simulation runs without staging (engine none) under the
venv's mpiexec on this host, once per kernel and repeat, interleaved so both kernels see
the same machine; the time per step is rank 0's compute time (ghost exchange and
stencil) over the run's steps. Medians of the repeats; the ratio is NumPy's time over
the native kernel's. Both kernels' final fields are compared: they must be equal bit
for bit (noise 0), or the row says so.

    .venv/bin/python bench/grayscott_stencil.py                  # L 64,128; ranks 1,4
    .venv/bin/python bench/grayscott_stencil.py --L 64 --ranks 4 --repeat 5 --out geofed-out/bench

Peer: `--peer-cmd 'mpiexec -n {ranks} /path/to/peer {settings}'` also times another
program on the same settings file, written in the ADIOS2 tutorial's full shape (the
tutorial's own settings loader requires every key). The peer prints its seconds per
step (exchange and stencil, as here) as the last line of its output. Measured against
the tutorial's GrayScott class (ADIOS2-Examples, source/cpp/gray-scott/simulation) with a
ten-line timing driver, built outside this repository with the venv's mpicxx -O3
(docs/grayscott.md).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from geofed import records
from geofed.native import binary
from geofed.validate import positive_int

KERNELS = ("numpy", "native")


def run_kernel(tmp: Path, settings: Path, ranks: int, kernel: str, tag: str) -> tuple[float, dict]:
    """Seconds per step of the simulation's rank program with `kernel`, and its final U and V."""
    result = tmp / f"{tag}.json"
    params = {"settings": str(settings), "kernel": kernel, "final": True}
    cmd = [binary("mpiexec"), "-n", str(ranks), sys.executable, "-m", "geofed.workloads", "grayscott-simulation",
           json.dumps(params), str(result)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"grayscott_stencil: {kernel} on {ranks} ranks failed: {res.stderr.strip()[-300:]}")
    r = json.loads(result.read_text())
    return sum(row["compute_s"] for row in r["steps"]) / r["steps_run"], r["final"]


def run_peer(template: str, settings: Path, ranks: int) -> float:
    cmd = shlex.split(template.format(ranks=ranks, settings=settings))
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=settings.parent)
    lines = res.stdout.split()
    if res.returncode != 0 or not lines:
        raise SystemExit(f"grayscott_stencil: the peer failed: {res.stderr.strip()[-300:]}")
    try:
        return float(lines[-1])
    except ValueError:
        raise SystemExit(f"grayscott_stencil: the peer's last line is not seconds per step: {lines[-1]!r}") from None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--L", default="64,128", help="cube sizes (default 64,128)")
    ap.add_argument("--ranks", default="1,4", help="rank counts (default 1,4)")
    ap.add_argument("--steps", type=positive_int, default=40, help="steps per run (default 40)")
    ap.add_argument("--repeat", type=positive_int, default=3, help="runs per kernel and cell; medians (default 3)")
    ap.add_argument("--peer-cmd", help="also time this command; {ranks} and {settings} are filled in")
    ap.add_argument("--out", default="geofed-out/bench", help="directory for the JSON record")
    args = ap.parse_args()
    try:
        sizes = [positive_int(x) for x in args.L.split(",")]
        rank_counts = [positive_int(x) for x in args.ranks.split(",")]
    except argparse.ArgumentTypeError as e:
        print(f"grayscott_stencil: error: {e}", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="geofed-stencil-") as tmp:
        tmp = Path(tmp)
        for L in sizes:
            settings = tmp / f"settings-{L}.json"
            settings.write_text(json.dumps({
                "L": L, "steps": args.steps, "plotgap": args.steps, "F": 0.02, "k": 0.048, "dt": 1.0,
                "Du": 0.2, "Dv": 0.1, "noise": 0.0, "output": "gs.bp", "engine": "none",
                # the tutorial's keys geofed ignores; its loader needs them
                "checkpoint": False, "checkpoint_freq": 700, "checkpoint_output": "ckpt.bp", "restart": False,
                "restart_input": "ckpt.bp", "adios_config": "adios2.xml", "adios_span": False,
                "adios_memory_selection": False, "mesh_type": "image"}))
            for ranks in rank_counts:
                times = {k: [] for k in KERNELS}
                peer = []
                finals = {}
                for r in range(args.repeat):
                    print(f"L = {L}, {ranks} ranks: run {r + 1}/{args.repeat}", file=sys.stderr, flush=True)
                    for kernel in KERNELS:
                        t, finals[kernel] = run_kernel(tmp, settings, ranks, kernel, f"{kernel}-{L}-{ranks}")
                        times[kernel].append(t)
                    if args.peer_cmd:
                        peer.append(run_peer(args.peer_cmd, settings, ranks))
                a, b = finals["numpy"], finals["native"]
                med = {k: statistics.median(v) for k, v in times.items()}
                rows.append({"L": L, "ranks": ranks, "steps": args.steps, "numpy_ms": med["numpy"] * 1e3,
                             "native_ms": med["native"] * 1e3, "numpy_over_native": med["numpy"] / med["native"],
                             "equal": bool(np.array_equal(a["U"], b["U"]) and np.array_equal(a["V"], b["V"])),
                             "samples_ms": {k: [x * 1e3 for x in v] for k, v in times.items()},
                             **({"peer_ms": statistics.median(peer) * 1e3,
                                 "native_over_peer": med["native"] / statistics.median(peer)} if peer else {})})
    rec = records.make("bench.grayscott_stencil", {"rows": rows, "peer_cmd": args.peer_cmd})
    print("#    L  ranks   numpy [ms/step]   native [ms/step]   numpy/native   equal" +
          ("   peer [ms/step]   native/peer" if args.peer_cmd else ""))
    for x in rows:
        peer = f" {x['peer_ms']:>16.2f} {x['native_over_peer']:>13.2f}" if "peer_ms" in x else ""
        print(f"{x['L']:>6} {x['ranks']:>6} {x['numpy_ms']:>17.2f} {x['native_ms']:>18.2f} "
              f"{x['numpy_over_native']:>14.2f} {str(x['equal']):>7}{peer}")
    print(f"record: {records.save(rec, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
