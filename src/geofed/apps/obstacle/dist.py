"""One peer of `geofed obstacle`: the `obstacle` workload's ranks (one per node).

MPI is used only at start-up, as a P2PDC bootstrap: rank 0 reads the per-job
secret and broadcasts it, every peer opens its P2PSAP endpoint and the peers
exchange their addresses (node address from the testbed plan, endpoint port);
then a barrier so that every peer starts the clock together. All solver data
(halos, votes, snapshots, stop) then travel over P2PSAP. With `--scheme mpi` the
same ranks run the MPI baseline instead (baseline.py). Once every clock has stopped,
rank 0 gathers the peers' slabs and counters over MPI and returns them.
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np

from geofed import runtime
from geofed.apps.obstacle import peer as P2PDC
from geofed.apps.obstacle.problem import default_3d
from geofed.errors import UserError

SCHEMES = ("sync", "async", "hybrid", "auto")


def my_address() -> str:
    """The address peers reach this node at: the testbed plan's, else the host's."""
    fed, node = runtime.federation(), runtime.node()
    if runtime.testbed() and fed is not None and node:
        from geofed.testbed.plan import make_plan
        return make_plan(fed).node(node).address
    return socket.gethostbyname(socket.gethostname())


def read_secret(path: str | None) -> bytes:
    secret = Path(path).read_bytes().strip() if path and Path(path).is_file() else b""
    if not secret:
        raise UserError(f"secret missing (--secret-file {path or '(none)'} is absent or empty)")
    return secret


def solve_p2psap(comm, problem, spec):
    import geofed_p2psap
    rank, size = comm.Get_rank(), comm.Get_size()
    secret = comm.bcast(read_secret(spec.secret_file) if rank == 0 else None, root=0)
    ep = geofed_p2psap.Endpoint(rank, size, secret)
    try:
        addrs = comm.allgather(f"{my_address()}:{ep.port}")
        sites = comm.allgather(runtime.site() or "A")
        nbrs = P2PDC.connect_all(ep, rank, addrs, sites, spec.scheme, spec.network)
        all_sync = all(P2PDC.pair_scheme(spec.scheme, a, b) == "sync" for a in sites for b in sites)
        runtime.quiet_barrier(comm)
        res = P2PDC.Peer(ep, rank, size, problem, nbrs, spec.tol, all_sync).run()
        stats = {str(j): dict(ep.stats(j)) for j in nbrs}
        # Others may still be finishing their last exchange with us.
        runtime.quiet_barrier(comm)
        return res, {"pair_schemes": {str(j): s for j, s in nbrs.items()}, "protocol": stats}
    finally:
        ep.close()


def solve(comm, spec) -> dict | None:
    """This peer's part of the solve of `spec` (a job.Spec); rank 0 returns every peer's
    counters, the assembled solution and its certified residuals over time, the others None."""
    rank = comm.Get_rank()
    problem = default_3d(spec.n, spec.c, spec.delta)
    if spec.scheme == "mpi":
        from geofed.apps.obstacle import baseline
        runtime.quiet_barrier(comm)
        res, extra = baseline.solve(comm, problem, spec.tol), {}
    else:
        res, extra = solve_p2psap(comm, problem, spec)
    info = {"rank": rank, "node": runtime.node(), "site": runtime.site(), "lo": res.lo, "hi": res.hi,
            "iterations": res.iterations, "seconds": res.seconds, "residual": res.residual,
            "snapshots": res.snapshots, "halos_received": res.halos_received, **extra}
    parts = comm.gather((info, res.u), root=0)
    if rank != 0:
        return None
    return {"peers": [info for info, _ in parts], "u": np.concatenate([u for _, u in parts]).tolist(),
            # peer 0 saw every certified residual
            "residual_history": np.array(res.history, dtype=float).reshape(-1, 2).tolist()}
