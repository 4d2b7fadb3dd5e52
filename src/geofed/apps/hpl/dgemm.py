"""A node's DGEMM rate, the peak that HPL's SPF is a fraction of.

One rank per node multiplies two n x n matrices (numpy's OpenBLAS, one thread: the
caller starts the ranks with OPENBLAS_NUM_THREADS=1) for at least `seconds`: long
enough to span many periods of the node's CPU quota, so the rate is the node's speed,
not a burst inside one period. GFLOPS: 2 n^3 flops per product. The rank program is
the `dgemm` part of the `hpl-sweep` workload.
"""

from __future__ import annotations

import time

import numpy as np

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


def measure(comm, n: int, seconds: float) -> dict | None:
    """Every rank's rate; rank 0 gets {"nodes": [{node, site, gflops, n}, ...]}, the others None."""
    where = runtime.rank_map(comm)
    rates = comm.gather(rate_gflops(n, seconds), root=0)
    if comm.Get_rank() != 0:
        return None
    return {"nodes": [{"node": w["node"], "site": w["site"], "gflops": g, "n": n} for w, g in zip(where, rates)]}
