"""One peer of `geofed obstacle`, started by `geofed run` (one rank per node).

    geofed run -f FED -p G1W1 -- python -m geofed.apps.obstacle.dist --n 32 --scheme async \
        --secret-file S --out DIR

MPI is used only at start-up, as a P2PDC bootstrap: rank 0 reads the per-job
secret and broadcasts it, every peer opens its P2PSAP endpoint and the peers
exchange their addresses (node address from the testbed plan, endpoint port);
then a barrier so that every peer starts the clock together. All solver data
(halos, votes, snapshots, stop) then travel over P2PSAP. With `--scheme mpi` the
same ranks run the MPI baseline instead (baseline.py). Each peer writes its slab
and its counters to DIR/peer-<rank>.npz; the command assembles them.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from geofed import runtime
from geofed.apps.obstacle import peer as P2PDC
from geofed.apps.obstacle.problem import default_3d

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
        raise SystemExit(f"geofed obstacle: secret missing (--secret-file {path or '(none)'} is absent or empty)")
    return secret


def solve_p2psap(comm, problem, args):
    import geofed_p2psap
    rank, size = comm.Get_rank(), comm.Get_size()
    secret = comm.bcast(read_secret(args.secret_file) if rank == 0 else None, root=0)
    ep = geofed_p2psap.Endpoint(rank, size, secret)
    try:
        addrs = comm.allgather(f"{my_address()}:{ep.port}")
        sites = comm.allgather(runtime.site() or "A")
        nbrs = P2PDC.connect_all(ep, rank, addrs, sites, args.scheme, args.network)
        all_sync = all(P2PDC.pair_scheme(args.scheme, a, b) == "sync" for a in sites for b in sites)
        runtime.quiet_barrier(comm)
        res = P2PDC.Peer(ep, rank, size, problem, nbrs, args.tol, all_sync).run()
        stats = {str(j): dict(ep.stats(j)) for j in nbrs}
        # Others may still be finishing their last exchange with us.
        runtime.quiet_barrier(comm)
        return res, {"pair_schemes": {str(j): s for j, s in nbrs.items()}, "protocol": stats}
    finally:
        ep.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geofed.apps.obstacle.dist", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--c", type=float, default=10.0)
    ap.add_argument("--delta", type=float)
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--scheme", choices=SCHEMES + ("mpi",), required=True)
    ap.add_argument("--network", choices=("eth", "fabric"), default="eth")
    ap.add_argument("--secret-file", help="the per-job secret (read by rank 0 only)")
    ap.add_argument("--out", required=True, help="directory for peer-<rank>.npz")
    args = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    problem = default_3d(args.n, args.c, args.delta)
    if args.scheme == "mpi":
        from geofed.apps.obstacle import baseline
        runtime.quiet_barrier(comm)
        res, extra = baseline.solve(comm, problem, args.tol), {}
    else:
        res, extra = solve_p2psap(comm, problem, args)
    info = {"rank": rank, "node": runtime.node(), "site": runtime.site(), "lo": res.lo, "hi": res.hi,
            "iterations": res.iterations, "seconds": res.seconds, "residual": res.residual,
            "snapshots": res.snapshots, "halos_received": res.halos_received, **extra}
    np.savez(Path(args.out) / f"peer-{rank}.npz", u=res.u, history=np.array(res.history, dtype=float).reshape(-1, 2),
             info=json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
