"""One HPL run on a placement (testbed, hostfile or srun), through the one job runner.

The ranks run `geofed-xhpl` (setup.sh builds it: HPL 2.0 from HPCC 1.5.0's source
against the venv's MPICH and OpenBLAS) with one OpenBLAS thread each, in a working
directory holding its input; rank 0 writes the results there, which become a record.
"""

from __future__ import annotations

from pathlib import Path

from geofed.apps.hpl import output
from geofed.apps.hpl.params import text
from geofed.errors import JobFailed
from geofed.federation import Federation
from geofed.launch import job as launch
from geofed.launch import mpi, runner
from geofed.launch.placement import Placement
from geofed.native import binary
from geofed.records.hpl import HplParams


def run(fed: Federation, placement: Placement, params: HplParams, *, hostfile: str | None = None,
        timeout: float | None = None, cpu_limit: bool = False, preload: list[str] = ()) -> dict:
    """The data of a `bench.hpl` record: every N's time, GFLOPS and residual check;
    `params` checked for the placement (HplParams.on). `preload` (`env LD_PRELOAD=...`)
    goes before the program (geofed's profiler, for its overhead)."""
    ranks_per_node = params.ranks_per_node
    xhpl = binary(mpi.program("geofed-xhpl"))
    what = f"hpl on {placement.code}"
    with runner.work_directory("hpl", hostfile) as tmp:
        Path(tmp, "hpccinf.txt").write_text(text(params))
        job = launch.Job(fed, placement, [*preload, "env", "OPENBLAS_NUM_THREADS=1", xhpl], ranks_per_node,
                         cpu_limit=cpu_limit)
        with runner.started(job, Path(tmp) / "job.log", hostfile=hostfile, cwd=tmp) as running:
            rc = running.wait(timeout)
        # Status 1 is HPL's own verdict (a residual check failed): the rows say which.
        if rc not in (0, 1):
            raise running.failure(what, rc, timeout)
        results = Path(tmp, "hpccoutf.txt")
        try:
            rows = output.parse(results.read_text(errors="replace") if results.exists() else "", len(params.ns))
        except output.BadOutput as e:
            kept = running.keep_log(what)
            raise JobFailed(f"{what}: {e}; log: {kept}", log=kept) from None
    nodes = placement.nodes(fed)
    sites = [s.code for s in fed.sites if any(n.site == s.code for n in nodes)]
    return {
        "placement": placement.code, "nodes": [n.name for n in nodes], "ranks_per_node": ranks_per_node,
        "ranks": len(nodes) * ranks_per_node,
        "ranks_per_site": {s: sum(ranks_per_node for n in nodes if n.site == s) for s in sites},
        "where": "hostfile" if hostfile else "testbed", "cpu_limit": cpu_limit, "params": params,
        "link": ({"sites": sites, "rtt_ms": fed.rtt_ms(*sites), "bandwidth_gbps": fed.bandwidth_gbps(*sites)}
                 if len(sites) == 2 else None),
        "rows": rows, "passed": all(r["passed"] for r in rows),
    }


def format_table(data: dict) -> str:
    head = f"{'N':>7} {'NB':>4} {'P':>3} {'Q':>3} {'time [s]':>10} {'GFLOPS':>10} {'residual':>10}  check"
    lines = [head] + [f"{r['n']:>7} {r['nb']:>4} {r['p']:>3} {r['q']:>3} {r['time_s']:>10.2f} {r['gflops']:>10.4g} "
                      f"{r['residual']:>10.3g}  {'PASSED' if r['passed'] else 'FAILED'}" for r in data["rows"]]
    where = ", ".join(f"{k} {v}" for k, v in data["ranks_per_site"].items())
    lines.append(f"HPL on {data['placement']} ({data['ranks']} ranks: {where})"
                 + (f", across the {data['link']['rtt_ms']:.4g} ms link" if data["link"] else ", one site"))
    return "\n".join(lines)
