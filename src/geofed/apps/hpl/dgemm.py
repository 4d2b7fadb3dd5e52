"""Rank program: a node's DGEMM rate, the peak that HPL's SPF is a fraction of.

One rank per node multiplies two n x n matrices (numpy's OpenBLAS, one thread) for
at least `--seconds`: long enough to span many periods of the node's CPU quota, so
the rate is the node's speed, not a burst inside one period. Rank 0 writes every
node's rate (GFLOPS: 2 n^3 flops per product) as JSON.

    geofed run -p W1G1 -- env OPENBLAS_NUM_THREADS=1 python -m geofed.apps.hpl.dgemm --out peaks.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI

from geofed import runtime


def rate_gflops(n: int, seconds: float) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    c = np.empty((n, n))
    np.matmul(a, b, out=c)  # warm-up: the first call pays for page faults
    products, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        np.matmul(a, b, out=c)
        products += 1
    return 2 * n**3 * products / elapsed / 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m geofed.apps.hpl.dgemm", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    where = runtime.rank_map(comm)
    rates = comm.gather(rate_gflops(args.n, args.seconds), root=0)
    if comm.Get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump([{"node": w["node"], "site": w["site"], "gflops": g, "n": args.n} for w, g in zip(where, rates)], f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
