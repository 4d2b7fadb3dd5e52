"""Run a benchmark's rank program on a placement and collect the record rank 0 wrote.

Network benchmarks run without the node CPU quota (busy-polling ranks waiting on a
long link would be throttled, see docs/launch.md). The job goes through the one
runner (geofed.launch.runner): a hang past `timeout` is stopped, every rank of it
included, and raised as JobFailed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from geofed import records
from geofed.errors import UserError
from geofed.federation import Federation
from geofed.launch import job as launch
from geofed.launch import runner
from geofed.launch.placement import Placement


def run_program(fed: Federation, placement: Placement, argv: list[str], *, ranks_per_node: int = 1,
                hostfile: str | None = None, timeout: float = 600, what: str = "benchmark",
                echo: bool = True) -> records.Record:
    """Run `python -m <argv>` on every rank with `--record PATH` added; the record rank 0 wrote.

    With `echo` rank 0's table is shown as it is measured. A job that wrote its record
    and then reported wrong data keeps its exit status in the record."""
    with runner.work_directory("bench", hostfile) as tmp:
        record = tmp / "record.json"
        program = [sys.executable, "-m", *argv, "--record", str(record)]
        job = launch.Job(fed, placement, program, ranks_per_node, cpu_limit=False)
        with runner.started(job, Path(tmp) / "job.log", hostfile=hostfile, echo=echo) as running:
            rc = running.wait(timeout)
        if rc == 2 and not record.exists():
            raise UserError(f"{what}: the ranks rejected the request{runner.last_error(running.output())}")
        if rc == 124 or not record.exists():
            raise running.failure(what, rc, timeout)
        rec = records.read(record)
        rec.data.exit_status = rc
        return rec
