"""`geofed demo`: the main job, end to end on the shipped icm-task federation.

Testbed up, verify it against the federation file, run an MPI job placed across
both sites (W2G1: rank 0 at W1 meets an intra-site and an inter-site peer), render
the report, and take the testbed down again, also on failure. One rank per node:
the scaled nodes have one core each.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Callable

from geofed import federation, records, report
from geofed.launch import job as launch
from geofed.launch.placement import parse
from geofed.testbed import core, verify

DEMO_FEDERATION = "icm-task"
DEMO_PLACEMENT = "W2G1"


def run(out: Path, progress: Callable[[str], None]) -> int:
    core.require_root("up (geofed demo)")
    fed = federation.load(DEMO_FEDERATION)
    out.mkdir(parents=True, exist_ok=True)
    progress(f"[1/4] bringing up testbed {fed.name}")
    core.up(fed, progress)
    try:
        progress("[2/4] verifying the testbed against its federation file")
        data = verify.verify(fed, progress=progress)
        print(verify.format_table(data))
        records.save(records.make("testbed.verify", data, **records.federation_meta(fed)), out)
        progress(f"[3/4] MPI ping-pong across placement {DEMO_PLACEMENT}")
        job_ok = _pingpong(fed, out)
    finally:
        progress("[4/4] taking the testbed down")
        core.down(fed.name)
    page = report.render(records.load_dir(out), out, title=f"geofed demo: {fed.description}")
    print(f"report: {page}")
    if not data["ok"]:
        print("demo: the testbed did not meet its federation file (see the report)", file=sys.stderr)
    return 0 if data["ok"] and job_ok else 1


def _pingpong(fed, out: Path) -> bool:
    with tempfile.TemporaryDirectory(prefix="geofed-") as tmp:
        rec_path = Path(tmp) / "pingpong.json"
        j = launch.Job(fed, parse(DEMO_PLACEMENT, fed),
                       [sys.executable, "-m", "geofed.bench.pingpong", "--out", str(rec_path)], cpu_limit=False)
        rc = launch.run(launch.testbed_command(j), timeout=300, job=j)
        if rc != 0 or not rec_path.exists():
            print(f"demo: the MPI job failed with status {rc}", file=sys.stderr)
            return False
        records.save(json.loads(rec_path.read_text()), out)
    return True
