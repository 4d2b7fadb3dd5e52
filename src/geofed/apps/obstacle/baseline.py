"""The baseline a user would write: synchronous projected Jacobi directly on MPI.

Same problem, same slabs and the same relaxation as the P2PDC peers; every
iteration exchanges both halo planes with the neighbours (nonblocking send and
receive) and stops on an allreduce of max |F(u) - u|, so the stop certifies the
same fixed-point residual as the synchronous P2PSAP run.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from geofed.apps.obstacle.peer import Result
from geofed.apps.obstacle.problem import Problem, Slab, split

HALO = 1


def solve(comm, p: Problem, tol: float) -> Result:
    rank, size = comm.Get_rank(), comm.Get_size()
    lo, hi = split(p.n, size)[rank]
    slab = Slab(p, lo, hi)
    nbrs = [(j, side) for j, side in ((rank - 1, -1), (rank + 1, 1)) if 0 <= j < size]
    inbox = {side: np.empty(slab.face(side).shape) for _, side in nbrs}
    history, it, t0 = [], 0, time.perf_counter()
    while True:
        reqs = [comm.Irecv(inbox[side], source=j, tag=HALO) for j, side in nbrs]
        reqs += [comm.Isend(np.ascontiguousarray(slab.face(side)), dest=j, tag=HALO) for j, side in nbrs]
        MPI.Request.Waitall(reqs)
        for _, side in nbrs:
            slab.set_halo(side, inbox[side])
        diff = slab.relax()
        it += 1
        worst = comm.allreduce(diff, op=MPI.MAX)
        history.append((time.perf_counter() - t0, worst))
        if worst <= tol:
            return Result(rank, lo, hi, slab.u.copy(), it, time.perf_counter() - t0, worst,
                          halos_received=it * len(nbrs), history=history)
