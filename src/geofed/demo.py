"""`geofed demo`: the main job, end to end on the shipped icm-task federation.

A list of steps, each a workload of the registry on a placement with its parameters:
verify the testbed against its federation file, an MPI ping-pong across W2G1 (rank 0
at W1 meets an intra-site and an inter-site peer), a short Gray-Scott workflow
(simulation at G staged through SST to analysis at W, every step checksummed), seed
000's MDFS Tables 1/2 on the scaled nodes, seed 003's Table III analogue, Linpack on
one node, two nodes in one site and across the link (seed 001), a data set staged
from W to G and compared on arrival, storage near and far (an IOzone-style row on W's
data file system from W1 and across the link from G1, BT-I/O class S at G into it),
MPI latency and bandwidth inside W and across the link. Then the testbed goes down
(also on failure), the models predict every inter-site run from the one-site ones
(SimGrid beside) and the report is written. One rank per node: the scaled nodes have
one core each. The demo's verdict is every step's sanity check, ANDed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from geofed import federation, records, report, workloads
from geofed.errors import JobFailed, UserError
from geofed.launch.placement import parse
from geofed.testbed import core

DEMO_FEDERATION = "icm-task"


@dataclass(frozen=True)
class Step:
    title: str
    workload: str
    placement: str | None = None
    params: dict = field(default_factory=dict)
    ranks_per_node: int = 1
    timeout: float = 300
    quick: dict = field(default_factory=dict)  # what `geofed demo --quick` changes of `params`


STEPS = [
    Step("verifying the testbed against its federation file", "verify"),
    Step("MPI ping-pong across placement W2G1", "pingpong", "W2G1"),
    Step("Gray-Scott: simulation at G, SST staging across the link, analysis and plots at W", "grayscott",
         params={"L": 32, "steps": 60, "plotgap": 10}),  # a few seconds; 6 output steps give the report frames
    # Seed 000's placements, one run each (the sweep command repeats).
    Step("MDFS 2D on the Madelon-like data across seed 000's placements", "mdfs-sweep",
         params={"placements": "G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4", "repeat": 1, "discretizations": 30},
         quick={"placements": "G1W0,G0W1,G1W1"}),  # one node at each site (the model's calibration), then across
    Step("obstacle problem: P2PSAP sync and async peers and MPI Jacobi, in one site and across the link",
         "obstacle-table", params={"placements": "W2,G1W1", "n": 32, "tol": 1e-8, "repeat": 1}),
    # Seed 001's comparison at its smallest: one node (the model's calibration), two nodes
    # in one site, then across the link (about 1 s each).
    *(Step(f"Linpack (HPL) on {p}, N = 2000", "hpl", p, {"n": "2000"}) for p in ("W1", "W2", "G1W1")),
    # Seed 000 staged its data set from ICM to TASK across the link.
    Step("bulk transfer: a 300 MB file staged from W1 to G1 (seed 000's data set)", "stage",
         params={"source": "W1", "destination": "G1", "mbytes": 300}),
    # Seed 002's storage checks at their smallest: W's shared file system from W1 (local)
    # and from G1 (across the link); BT-I/O class S at G into it.
    *(Step(f"storage: W's data file system from {n}", "io",
           params={"node": n, "filesystem": "W:data", "sizes": "4M", "records": "64K,1M", "modes": "buffered",
                   "ops": "write,rewrite,read,reread", "budget": 120.0, "repeat": 1})
      for n in ("W1", "G1")),
    Step("storage: BT-I/O class S at G into W's data file system", "btio", "G2", {"cls": "S"}, ranks_per_node=2),
    # The MPI curves the models need: inside a site (calibration) and across the link (their check).
    *(Step(f"MPI latency and bandwidth on {p}, for the models", "mpi", p,
           {"benchmarks": "latency,bw", "sizes": "1:1M", "budget": 0.2}) for p in ("W2", "W1G1")),
]


def run(out: Path, progress: Callable[[str], None], quick: bool = False) -> int:
    """`quick`: every step, the MDFS sweep on three placements instead of seed 000's seven."""
    core.require_root("up (geofed demo)")
    fed = federation.load(DEMO_FEDERATION)
    checked = []
    for s in STEPS:  # every mistake before the testbed comes up
        w = workloads.get(s.workload)
        ctx, params = _context(fed, s, out, progress), w.params_from_dict(s.params | (s.quick if quick else {}))
        w.check(ctx, params)
        checked.append((s, w, ctx, params))
    total = len(STEPS) + 4
    out.mkdir(parents=True, exist_ok=True)
    progress(f"[1/{total}] bringing up testbed {fed.name}")
    core.up(fed, progress, own=True)  # never someone else's: it is taken down at the end
    verdicts = []
    try:
        for i, (s, w, ctx, params) in enumerate(checked, start=2):
            progress(f"[{i}/{total}] {s.title}")
            verdicts.append(_step(w, ctx, params, s, out))
    finally:
        progress(f"[{total - 2}/{total}] taking the testbed down")
        core.down(fed.name)
    progress(f"[{total - 1}/{total}] predicting every inter-site run from the one-site runs (SimGrid beside)")
    verdicts.append(_model(fed, out))
    progress(f"[{total}/{total}] writing the report")
    page = report.render(records.load_dir(out), out, title=f"geofed demo: {fed.description}",
                         layouts={fed.name: federation.layout(fed)})
    print(f"report: {page}")
    return 0 if all(verdicts) else 1


def _context(fed, s: Step, out: Path, progress) -> workloads.Context:
    return workloads.Context(fed, parse(s.placement, fed) if s.placement else None, s.ranks_per_node,
                             timeout=s.timeout, out=out, progress=progress)


def _step(w: workloads.Workload, ctx: workloads.Context, params, s: Step, out: Path) -> bool:
    """Run one step; its record saved and its table shown; whether it ran and is correct."""
    try:
        rec = w.run(ctx, params)
    except JobFailed as e:
        print(f"demo: {s.title}: {e}", file=sys.stderr)
        return False
    print(w.table(rec))
    records.save(rec, out)
    verdict = w.sanity(rec)
    if not verdict.ok:
        print(f"demo: {s.title}: {verdict.why} (see the report)", file=sys.stderr)
    return verdict.ok


def _model(fed, out: Path) -> bool:
    """Calibrated from this demo's one-site records only; its inter-site records are the check."""
    from geofed.model import calibration, validate
    try:
        recs = records.load_paths([str(out)])
        data = validate.check(fed, calibration.fit(fed, recs), recs)
    except UserError as e:
        print(f"demo: models: {e}", file=sys.stderr)
        return False
    print(validate.format_table(data))
    records.save(records.make("bench.model", data, **records.federation_meta(fed)), out)
    return True
