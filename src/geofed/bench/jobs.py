"""Run a benchmark's rank program on a placement and collect the record rank 0 wrote.

Network benchmarks run without the node CPU quota (busy-polling ranks waiting on a
long link would be throttled, see docs/launch.md). A job that does not finish in
`timeout` seconds is stopped, every rank of it included, and reported as a hang.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from geofed import federation
from geofed.errors import UserError
from geofed.federation import Federation
from geofed.launch import job as launch
from geofed.launch.placement import Placement


class JobFailed(Exception):
    """The benchmark job ran but produced no result (hang, crash, MPI error)."""


def require_reachable(fed: Federation, placement: Placement) -> None:
    """Every node of the placement exists on the testbed and every link emulator runs."""
    from geofed.testbed import core, host
    from geofed.testbed.plan import make_plan
    core.require_root("use")
    plan = make_plan(fed)
    state = core.read_state(plan)
    if state is None:
        shipped = fed.name in federation.shipped_names() and federation.resolve(fed.name) == fed.path
        raise UserError(f"testbed {fed.name} is not up; run: geofed testbed up {fed.name if shipped else fed.path}")
    present = set(host.netns_list())
    for node in placement.nodes(fed):
        if plan.node(node.name).netns not in present:
            raise UserError(f"node {node.name} of testbed {fed.name} is unreachable: namespace "
                            f"{plan.node(node.name).netns} is gone (geofed testbed down/up {fed.name})")
    for name, emu in state["emulators"].items():
        if not host.alive(emu["pid"]):
            raise UserError(f"link {name} of testbed {fed.name} is down: its emulator (pid {emu['pid']}) is not "
                            f"running (geofed testbed down/up {fed.name})")


def run_program(fed: Federation, placement: Placement, argv: list[str], *, ranks_per_node: int = 1,
                hostfile: str | None = None, timeout: float = 600, what: str = "benchmark") -> dict:
    """Run `python -m <argv>` on every rank with `--record PATH` added; the record rank 0 wrote."""
    # A real cluster's rank 0 writes where this process can read it: the current
    # directory, shared as for any MPI job; on the testbed every node sees /tmp.
    with tempfile.TemporaryDirectory(prefix=".geofed-bench-", dir="." if hostfile else None) as tmp:
        record = Path(tmp).resolve() / "record.json"
        program = [sys.executable, "-m", *argv, "--record", str(record)]
        job = launch.Job(fed, placement, program, ranks_per_node, cpu_limit=False)
        if hostfile:
            import os
            cmd = (launch.slurm_command(job, hostfile, Path.cwd()) if os.environ.get("SLURM_JOB_ID")
                   else launch.hostfile_command(job, hostfile))
        else:
            require_reachable(fed, placement)
            cmd = launch.testbed_command(job)
        rc = launch.run(cmd, timeout=timeout, job=job)
        if rc == 124:
            raise JobFailed(f"{what}: no result within --timeout {timeout:g} s, the MPI job hung or a link is "
                            f"too slow for the sizes asked; it was stopped")
        if rc == 130:
            raise KeyboardInterrupt
        if rc == 2 and not record.exists():
            raise UserError(f"{what}: the ranks rejected the request (see the message above)")
        if not record.exists():
            raise JobFailed(f"{what}: the MPI job ended with status {rc} and wrote no record")
        rec = json.loads(record.read_text())
        rec["data"]["exit_status"] = rc
        return rec
