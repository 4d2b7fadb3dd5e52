"""One `geofed obstacle` job on a placement: its ranks are the `obstacle` workload's (dist.py)."""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

import numpy as np

from geofed.apps.obstacle import problem as P
from geofed.apps.obstacle.dist import SCHEMES
from geofed.errors import UserError
from geofed.params import Params, param
from geofed.validate import nonnegative_float, positive_float


class Spec(Params):
    """What one solve is given (and every peer of it)."""
    n: int = param(32, "interior points per axis")
    tol: float = param(1e-6, "certified fixed-point residual max|u - F(u)|")
    scheme: str = param("async", "sync, async, hybrid (sync inside a site), auto (async across sites), or mpi "
                                 "(the synchronous projected Jacobi on MPI)", choices=(*SCHEMES, "mpi"))
    c: float = param(10.0, "reaction coefficient c >= 0", type=nonnegative_float)
    delta: float | None = param(None, "Richardson step (default and maximum h^2/(6 + c h^2))", type=positive_float)
    network: str = param("eth", "P2PSAP network context", choices=("eth", "fabric"))
    secret_file: str | None = param(None, "the job secret peers authenticate with (default: a fresh random one "
                                          "per job)", type=str)


def check(spec: Spec, peers: int) -> P.Problem:
    """Every input error before anything starts (the ranks would otherwise each fail)."""
    if not spec.tol > 0:
        raise UserError(f"--tol: must be > 0, got {spec.tol:g}")
    problem = P.default_3d(spec.n, spec.c, spec.delta)
    P.split(spec.n, peers)
    if spec.secret_file is not None:
        path = Path(spec.secret_file)
        if not path.is_file() or not path.read_bytes().strip():
            raise UserError(f"--secret-file {path}: secret missing (no such file, or it is empty)")
    return problem


def run_on_placement(fed, placement, spec: Spec, timeout: float | None = None, hostfile: str | None = None) -> dict:
    """Solve on `placement` (the testbed, or a real cluster's hostfile); the assembled
    solution with every peer's counters. A failed job raises JobFailed."""
    from geofed.launch import runner

    problem = check(spec, placement.node_count)
    with runner.work_directory("obstacle", hostfile) as tmp:
        secret_file = spec.secret_file
        if secret_file is None and spec.scheme != "mpi":
            secret_file = str(tmp / "secret")
            fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        # No CPU quota: a peer (or MPI rank) waiting for a halo across the 9 ms link
        # would burn its node's quota polling and be throttled for the rest of the
        # cgroup period, which measures the quota, not the scheme (docs/p2psap.md).
        res = runner.run_ranks(fed, placement, "obstacle", dataclasses.asdict(spec) | {"secret_file": secret_file},
                               hostfile=hostfile, timeout=timeout, cpu_limit=False,
                               what=f"obstacle {spec.scheme} on {placement.code}")
    return assemble(problem, spec, placement.code, res)


def assemble(problem: P.Problem, spec: Spec, placement: str, res: dict) -> dict:
    """The result of a solve from what its rank 0 returned."""
    u = np.array(res["u"])
    certified = res["peers"][0]["residual"]
    return {"u": u, "n": spec.n, "c": problem.c, "delta": problem.delta, "tol": spec.tol, "scheme": spec.scheme,
            "network": spec.network, "placement": placement, "peers": res["peers"], "certified_residual": certified,
            "recomputed_residual": P.residual(problem, u), "error_bound": problem.error_bound(certified),
            "time_to_solution_s": max(p["seconds"] for p in res["peers"]), "residual_history": res["residual_history"]}
