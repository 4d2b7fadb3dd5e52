"""The workload contract and its registry.

A workload is anything that runs on a placement (or on the testbed as a whole) and
produces a record: an MPI micro-benchmark, HPL, MDFS, a transfer, a storage grid, ...
Each is one module in this package that defines `WORKLOAD`, an instance of a
`Workload` subclass; the registry finds the modules itself, so adding a workload
touches no list. From the registry come `geofed bench NAME` (its options from the
workload's `Params` dataclass), the demo's steps and the verdicts the demo ANDs.

A workload keeps apart, as ReFrame's checks do:
- `sanity(record)`: is the result correct (the data it moved arrived intact, the
  residual is small, the files are identical); a failed sanity check is exit 1;
- `figures(record)`: how fast it was, named numbers a reference can hold with a
  tolerance (`geofed bench check`).
MPI workloads subclass `RankWorkload`: their `rank()` runs in every rank under the one
entry point `python -m geofed.workloads NAME`, rank 0 returns the result, and a rank
that fails ends the job with one line (geofed.runtime.refuse).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

from geofed import records
from geofed.errors import UserError
from geofed.federation import Federation
from geofed.launch.job import testbed_transport
from geofed.launch.mpi import current as current_mpi
from geofed.launch.placement import Placement
from geofed.params import Declared
from geofed.progress import progress as show_progress
from geofed.records import Sanity

# The record kind of a workload that needs no picture of its own: its parameters, its
# result as it returned it, its sanity verdict and its figures (docs/records.md).
RESULT_KIND = "workload.result"


@dataclass
class Context:
    """Where a workload runs: the federation, the placement (None for workloads of the
    whole testbed), how its MPI job is launched, and where files beside the record go."""
    fed: Federation
    placement: Placement | None = None
    ranks_per_node: int = 1
    hostfile: str | None = None
    timeout: float = 900.0
    out: Path | None = None
    progress: Callable[[str], None] = show_progress


class Workload(Declared):
    """The contract (see the module's doc). A workload declares itself in its class line,
    `class Matrix(RankWorkload, kind="bench.matrix", Params=MatrixParams)`; its name is its
    module's (`mdfs_sweep` is `mdfs-sweep`), its help its docstring's first paragraph."""
    name: str = ""          # `geofed bench NAME`
    kind: str = ""          # the record kind it produces
    Params: type = type(None)
    needs_placement: bool = True
    min_nodes: int = 1
    command: str | None = None  # its own row of geofed.cli's table; None: `geofed bench NAME` is made
    part_of: str | None = None  # a rank program run by that workload (Gray-Scott's analysis): no command
    runs_mpi: bool = False  # it runs MPI jobs: its record names the MPI (geofed.launch.mpi)

    def __init_subclass__(cls, **declared):
        super().__init_subclass__(**declared)
        if cls.__module__ != __name__ and "name" not in declared:
            cls.name = cls.__module__.rpartition(".")[2].replace("_", "-")

    def check(self, ctx: Context, params) -> None:
        """Refuse (UserError) what cannot run, before anything starts."""
        if self.needs_placement:
            if ctx.placement is None:
                raise UserError(f"{self.name}: needs a placement (-p)")
            if ctx.placement.node_count * ctx.ranks_per_node < self.min_nodes:
                raise UserError(f"{self.name} needs at least {self.min_nodes} ranks; placement "
                                f"{ctx.placement.code} with {ctx.ranks_per_node} rank per node gives "
                                f"{ctx.placement.node_count * ctx.ranks_per_node}")

    def run(self, ctx: Context, params) -> records.Record:
        raise NotImplementedError

    def sanity(self, rec) -> Sanity:
        """Is the result correct: by default what its record kind checks."""
        return rec.sanity() or Sanity(True, "nothing to check")

    def figures(self, rec) -> dict[str, float]:
        return {}

    def table(self, rec) -> str:
        return ""

    def meta(self, ctx: Context) -> dict:
        """What a record of this run says beside its data: the federation and, when the
        workload runs MPI jobs, which MPI and how its ranks talked."""
        meta = records.federation_meta(ctx.fed)
        if self.runs_mpi:
            meta.update(current_mpi().meta(testbed=testbed_transport(ctx.hostfile)))
        return meta

    def record(self, ctx: Context, params, result: dict):
        """The record of a run: of the workload's own kind, or of RESULT_KIND with its
        sanity verdict and figures in it (the report cannot ask the workload)."""
        meta = self.meta(ctx)
        if self.kind != RESULT_KIND:
            return records.make(self.kind, result, **meta)
        rec = records.make(RESULT_KIND, {"workload": self.name,
                                         "placement": ctx.placement.code if ctx.placement else None,
                                         "params": dataclasses.asdict(params), "result": result,
                                         "verdict": {"ok": True, "why": ""}, "figures": {}}, **meta)
        verdict = self.sanity(rec)
        rec.data.verdict, rec.data.figures = {"ok": verdict.ok, "why": verdict.why}, self.figures(rec)
        return rec

    def params_from_dict(self, given: dict, params_type: type | None = None) -> Any:
        params_type = params_type or self.Params
        known = {f.name for f in dataclasses.fields(params_type)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise UserError(f"{self.name}: unknown parameter {unknown[0]!r} (known: {', '.join(sorted(known))})")
        return params_type(**given)


class RankWorkload(Workload):
    """An MPI workload: `rank(comm, params)` runs in every rank; rank 0 returns the
    record's data (a dict), the others None. Network workloads run without the node
    CPU quota (busy-polling ranks on a long link would be throttled, docs/launch.md)."""
    cpu_limit: bool = False
    runs_mpi: bool = True
    echo: bool = False  # show the ranks' output as it comes (a benchmark's table, measured size by size)
    # What one job of its ranks is given, when a driver runs several jobs for one request
    # (BT-I/O: one per subtype) and the ranks' parameters differ from the user's.
    RankParams: type | None = None

    def rank(self, comm, params) -> dict | None:
        raise NotImplementedError

    def run(self, ctx: Context, params) -> records.Record:
        from geofed.launch import runner
        return self.record(ctx, params, runner.run_ranks(
            ctx.fed, ctx.placement, self.name, dataclasses.asdict(params), ranks_per_node=ctx.ranks_per_node,
            hostfile=ctx.hostfile, timeout=ctx.timeout, cpu_limit=self.cpu_limit, echo=self.echo,
            what=f"bench {self.name} on {ctx.placement.code}"))


@cache
def all_workloads() -> dict[str, Workload]:
    """Every workload by name: the `WORKLOAD` of each module in this package, and the
    `WORKLOADS` of a module that holds several (a workload's parts)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for w in [getattr(module, "WORKLOAD", None), *getattr(module, "WORKLOADS", ())]:
            if w is not None:
                assert w.name not in found, f"two workloads named {w.name}"
                found[w.name] = w
    return found


def get(name: str) -> Workload:
    try:
        return all_workloads()[name]
    except KeyError:
        raise UserError(f"unknown workload {name!r}; known: {', '.join(sorted(all_workloads()))}") from None
