"""One `geofed obstacle` job on a placement of the testbed, through `geofed run`'s launcher."""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geofed.apps.obstacle import problem as P
from geofed.errors import JobFailed, UserError


@dataclass(frozen=True)
class Spec:
    n: int
    tol: float
    scheme: str                  # sync | async | hybrid | auto | mpi (the MPI baseline)
    c: float = 10.0
    delta: float | None = None
    network: str = "eth"
    secret_file: str | None = None  # None: a fresh random secret per job


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


def run_on_placement(fed, placement: str, spec: Spec, timeout: float | None = None,
                     hostfile: str | None = None) -> dict:
    """Solve on `placement` (the testbed, or a real cluster's hostfile); the assembled
    solution with every peer's counters. A failed job raises JobFailed."""
    from geofed.launch import job as launch
    from geofed.launch import runner
    from geofed.launch.placement import parse

    pl = parse(placement, fed)
    problem = check(spec, pl.node_count)
    with runner.work_directory("obstacle", hostfile) as work:
        tmp = str(work)
        secret_file = spec.secret_file
        if secret_file is None and spec.scheme != "mpi":
            secret_file = str(Path(tmp) / "secret")
            fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        argv = [sys.executable, "-m", "geofed.apps.obstacle.dist", "--n", str(spec.n), "--c", repr(spec.c),
                "--tol", repr(spec.tol), "--scheme", spec.scheme, "--network", spec.network, "--out", tmp]
        argv += ["--delta", repr(spec.delta)] if spec.delta is not None else []
        argv += ["--secret-file", secret_file] if secret_file else []
        # No CPU quota: a peer (or MPI rank) waiting for a halo across the 9 ms link
        # would burn its node's quota polling and be throttled for the rest of the
        # cgroup period, which measures the quota, not the scheme (docs/p2psap.md).
        j = launch.Job(fed, pl, argv, cpu_limit=False)
        what = f"obstacle {spec.scheme} on {placement}"
        runner.run(j, what=what, hostfile=hostfile, timeout=timeout)
        files = sorted(Path(tmp).glob("peer-*.npz"), key=lambda p: int(p.stem.split("-")[1]))
        if len(files) != pl.node_count:
            raise JobFailed(f"{what}: {len(files)} of {pl.node_count} peers wrote their part of the solution")
        return assemble(problem, spec, placement, files)


def assemble(problem: P.Problem, spec: Spec, placement: str, files: list[Path]) -> dict:
    peers, slabs, history = [], [], None
    for path in files:
        with np.load(path) as z:
            peers.append(json.loads(str(z["info"])))
            slabs.append(z["u"])
            if history is None:  # peer 0 saw every certified residual
                history = z["history"].tolist()
    u = np.concatenate(slabs)
    certified = peers[0]["residual"]
    return {"u": u, "n": spec.n, "c": problem.c, "delta": problem.delta, "tol": spec.tol, "scheme": spec.scheme,
            "network": spec.network, "placement": placement, "peers": peers, "certified_residual": certified,
            "recomputed_residual": P.residual(problem, u), "error_bound": problem.error_bound(certified),
            "time_to_solution_s": max(p["seconds"] for p in peers), "residual_history": history}
