#!/usr/bin/env python3
"""Predicted against measured on three federations: `geofed bench model` over fresh runs.

For each federation (default: icm-task, ma-hd and bench/model/held-back.toml, which
the models were never tuned on) this runs, with the installed geofed:
  testbed verify (the host's own cost of a crossing between sites, a testbed constant);
  one-site runs (the calibration): bench mpi latency bw on X2, allreduce on X4,
      the one-site rows of mdfs sweep and bench obstacle, bench grayscott with its
      consumers at the simulation's site;
  inter-site runs (the validation): bench mpi latency bw on X1Y1, allreduce on X2Y2,
      mdfs sweep on X1Y1 and X2Y2, bench obstacle on X1Y1 (with its TCP transfer of
      20 MB), bench grayscott with the consumers across the link;
then `geofed bench model` on the records: calibration from the one-site runs only,
every inter-site row predicted, SimGrid beside the MPI rows. Needs root (testbed).

    sudo .venv/bin/python bench/model_validation.py --out geofed-out/model-validation
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = ["icm-task", "ma-hd", str(HERE / "model" / "held-back.toml")]


def geofed(*args: str, check: bool = True) -> None:
    cmd = [str(Path(sys.executable).parent / "geofed"), *args]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=check)


def sites_of(spec: str) -> tuple[str, str, int, int]:
    """(storage site, other site, their node counts) of a two-site federation."""
    from geofed import federation
    fed = federation.load(spec)
    x = fed.site(fed.storage)
    y = next(s for s in fed.sites if s.code != x.code)
    return x.code, y.code, x.nodes, y.nodes


def validate(spec: str, out: Path, repeat: int, sizes: str) -> None:
    x, y, nx, ny = sites_of(spec)
    out.mkdir(parents=True, exist_ok=True)
    cross2 = f"{x}{min(2, nx)}{y}{min(2, ny)}"
    geofed("testbed", "up", spec)
    try:
        # its record is wanted even when a pair misses verify's own tolerances
        geofed("testbed", "verify", spec, "--out", str(out), check=False)
        for placement, benches in ((f"{x}2", ["latency", "bw"]), (f"{x}1{y}1", ["latency", "bw"])):
            geofed("bench", "mpi", *benches, "-f", spec, "-p", placement, "--sizes", sizes, "--budget", "0.3",
                   "--out", str(out))
        for placement in (f"{x}{min(4, nx)}", cross2):
            geofed("bench", "mpi", "allreduce", "-f", spec, "-p", placement, "--sizes", "8,1K,64K,1M",
                   "--budget", "0.3", "--out", str(out))
        for analysis in (y, x):  # the simulation at y: consumers at its own site (calibration), then across
            geofed("bench", "grayscott", "-f", spec, "--sim-site", y, "--analysis-site", analysis,
                   "--sizes", "32:60,48:60,64:60", "--out", str(out))
    finally:
        geofed("testbed", "down", spec)
    # mdfs sweep names placements with every site, in its own order (G1W0 style)
    codes = [f"{x}1{y}0", f"{x}0{y}1", f"{x}2{y}0", f"{x}{min(4, nx)}{y}0", f"{x}1{y}1", cross2]
    geofed("mdfs", "sweep", "-f", spec, "--placements", ",".join(dict.fromkeys(codes)), "--repeat", str(repeat),
           "--out", str(out))
    geofed("bench", "obstacle", "-f", spec, "--placements", f"{x}2,{x}1{y}1", "--mbytes", "20",
           "--repeat", str(repeat), "--out", str(out))
    geofed("bench", "model", "-f", spec, str(out), "--out", str(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("federations", nargs="*", default=DEFAULT, help="federation files or shipped names")
    ap.add_argument("--out", default="geofed-out/model-validation", help="a directory per federation under it")
    ap.add_argument("--repeat", type=int, default=3, help="runs per mdfs and obstacle cell; medians (default 3)")
    ap.add_argument("--sizes", default="1:4M", help="MPI message sizes (default 1:4M)")
    args = ap.parse_args()
    for spec in args.federations:
        validate(spec, Path(args.out) / Path(spec).stem, args.repeat, args.sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
